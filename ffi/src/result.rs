//! Result codes (`dplog_result`, `DPLOG_OK`, `DPLOG_ERR_*`) and their
//! messages (`dplog_strerror`), the calling thread's last error
//! (`dplog_last_error`), the panic guard every export runs in, and the
//! mapping of the core's errors to codes.

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use dplog::config::ConfigError;
use dplog::LoggerError;

/// Result of every dplog function: `DPLOG_OK` (0) or one of the
/// `DPLOG_ERR_*` codes. `dplog_strerror` gives a static message per code.
pub type dplog_result = i32;

/// Success.
pub const DPLOG_OK: dplog_result = 0;
/// A required pointer argument was NULL.
pub const DPLOG_ERR_NULL: dplog_result = 1;
/// An argument is out of range: a CPU that does not exist, a reserve of 0
/// or more than `DPLOG_RESERVE_MAX` records, a commit of more than was
/// reserved, a string that is not UTF-8, a pointer that is not a dplog
/// handle (wrong magic word).
pub const DPLOG_ERR_INVALID_ARG: dplog_result = 2;
/// A record length does not match the schema's record size, or a record
/// type is larger than the logger's ring slot (`dplog_schema_register`).
pub const DPLOG_ERR_BAD_LENGTH: dplog_result = 3;
/// The schema id is not one the handle serves: not registered
/// (`dplog_schema_register`), a NAT schema on a handle that did not ask
/// for them (`dplog_register_nat_schemas`, `[schemas] nat = true`), or one
/// that does not fit the logger's slot; `dplog_last_error` says which.
pub const DPLOG_ERR_UNKNOWN_SCHEMA: dplog_result = 4;
/// The configuration cannot be read or is invalid (unknown key, wrong type,
/// ring capacity not a power of two, ...); `dplog_last_error` names it.
pub const DPLOG_ERR_CONFIG: dplog_result = 5;
/// The sink failed: open, write, flush, reopen or close (errno text in
/// `dplog_last_error`).
pub const DPLOG_ERR_IO: dplog_result = 6;
/// The call is not valid in the handle's current state: a producer before
/// `dplog_start`, a second `dplog_start`, a second `dplog_reserve` before
/// `dplog_commit`, a `dplog_log`/`dplog_log_burst` while a reservation is
/// pending, a `dplog_commit` without a reservation; in debug builds of the
/// library also a producer call made while another thread is inside a
/// call on the same producer (nothing is done; a producer belongs to one
/// thread at a time).
pub const DPLOG_ERR_STATE: dplog_result = 7;
/// The handle was closed or freed (use after close, double free), or the
/// producer's logger was closed. Nothing was done.
pub const DPLOG_ERR_CLOSED: dplog_result = 8;
/// The ring was full under `backpressure = "drop"` (or, under `"degrade"`,
/// full or above its high watermark for the record's priority): the
/// record(s) were dropped and counted in `dplog_stats`.
pub const DPLOG_ERR_FULL: dplog_result = 9;
/// `dplog_producer_new`: this ring id already has a live producer.
pub const DPLOG_ERR_RING_IN_USE: dplog_result = 10;
/// `dplog_close`: the logger is closed, but some records were not
/// delivered (dropped because a ring was full, refused by the sink, or
/// still in a ring); the final stats say how many of each.
pub const DPLOG_ERR_UNDELIVERED: dplog_result = 11;
/// Valid request that this build does not support. No function of this
/// version returns it (more than one consumer core, its last use, is
/// supported since 0.1); kept so codes keep their numbers.
pub const DPLOG_ERR_UNSUPPORTED: dplog_result = 12;
/// The consumer thread stopped unexpectedly (it panicked): a producer
/// whose ring is full gets it (the record is dropped and counted in
/// `dropped_disconnected` under `"block"`, `dropped_full` otherwise), as
/// do `dplog_producer_new`, `dplog_flush`, `dplog_reopen` and
/// `dplog_close`. Nothing more is written; close the handle. Tests provoke
/// it with the environment variable `DPLOG_FAULT_CONSUMER_PANIC_AFTER=N`
/// (read by `dplog_start`): the consumer panics after formatting N records.
pub const DPLOG_ERR_CONSUMER_GONE: dplog_result = 13;
/// A Rust panic was caught at the boundary; the handle may be unusable
/// but the process is intact.
pub const DPLOG_ERR_PANIC: dplog_result = 14;
/// `dplog_schema_register`: a record type of that name is already
/// registered on the handle, or is a built-in NAT schema's name
/// (`nat44Session`, `natPortBlock`, `natAddressesExhausted`,
/// `natPortsExhausted`, `natQuotaExceeded`). Nothing was registered.
pub const DPLOG_ERR_EXISTS: dplog_result = 15;
/// The consumer stopped reading this producer's ring (from a producer
/// call), or one or more rings (from `dplog_close`), because a ring index
/// the producer published broke the ring protocol: a fill level above the
/// capacity, or an index that moved backwards. The usual cause is one
/// producer used by two threads at once, which is not allowed. The
/// records accepted before are written exactly once; nothing after them
/// is read, and what is lost is counted in `dropped_stopped` (see
/// `struct dplog_stats`). The consumer prints one line naming the ring on
/// stderr; the other rings go on. From then on every log, burst or
/// reservation call on the stopped ring's producer returns this code at
/// once, whatever the policy, and its records are dropped and counted in
/// `dropped_stopped` (records the inline `dplog_log` wrote into a window
/// opened before the stop return `DPLOG_OK` and are counted there too);
/// free the producer. A ring of `dplog_attach` stops the same way when
/// `dplogd` quarantines it (a record or index in its file it cannot
/// trust: a bad schema id or length in a slot, indices out of range; the
/// daemon's stderr and its `RING_QUARANTINED` line say which); the
/// message of `dplog_last_error` then names the daemon's quarantine.
pub const DPLOG_ERR_RING_STOPPED: dplog_result = 16;
/// A producer of `dplog_attach` under `backpressure = "block"` whose block
/// timeout (`dplog_producer_set_block_timeout`) passed while its ring was
/// full and no slot was freed (no `dplogd` serves the ring, or the one
/// that does is stopped or waits on its sinks). The records not enqueued
/// are dropped and counted in `dropped_disconnected` (reported in-band
/// when a daemon serves the ring again); `dplog_last_error` says whether
/// a consumer is attached. The next call logs again as soon as a slot is
/// free; while none is freed it returns this at once (after the pause
/// spins), not after another timeout.
pub const DPLOG_ERR_TIMEOUT: dplog_result = 17;
/// The highest `dplog_result` code (for tables indexed by code).
pub const DPLOG_ERR_LAST: dplog_result = 17;

const MESSAGES: [&CStr; 18] = [
    c"success",
    c"a required pointer argument was NULL",
    c"invalid argument",
    c"record length does not match the schema, or does not fit the ring slot",
    c"unknown schema id",
    c"invalid configuration",
    c"sink I/O error",
    c"call not valid in the current state",
    c"handle is closed or freed",
    c"ring full: record dropped and counted",
    c"ring id already has a producer",
    c"closed, but some records were not delivered",
    c"not supported by this build",
    c"the consumer thread has stopped",
    c"internal error (panic caught at the C boundary)",
    c"a schema of that name is already registered",
    c"ring stopped: its producer broke the ring protocol (shared between threads?), or dplogd quarantined it",
    c"block timeout: the ring stayed full, no consumer freed a slot; record dropped and counted",
];

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `msg` as the calling thread's last error and returns `code`.
#[cold]
#[inline(never)]
pub(crate) fn fail(code: dplog_result, msg: impl Into<String>) -> dplog_result {
    let mut m: String = msg.into();
    m.retain(|c| c != '\0');
    let c = CString::new(m).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|l| *l.borrow_mut() = c);
    code
}

/// Runs `f`; a panic becomes [`DPLOG_ERR_PANIC`] (with its message as the
/// last error) instead of unwinding into C.
#[inline(always)]
pub(crate) fn guard<F: FnOnce() -> dplog_result>(f: F) -> dplog_result {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => panicked(p),
    }
}

#[cold]
#[inline(never)]
fn panicked(p: Box<dyn std::any::Any + Send>) -> dplog_result {
    let msg = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    // Dropping the payload could itself panic; leak it instead.
    core::mem::forget(p);
    fail(
        DPLOG_ERR_PANIC,
        format!("panic caught at the C boundary: {msg}"),
    )
}

/// # Safety
/// `out` is NULL or valid for a write of `T`.
pub(crate) unsafe fn write_out<T>(out: *mut T, v: T) {
    if !out.is_null() {
        // SAFETY: non-NULL, and the caller's contract says it is writable.
        unsafe { out.write(v) };
    }
}

pub(crate) fn config_error(e: ConfigError) -> dplog_result {
    let code = match &e {
        ConfigError::Sink(_) => DPLOG_ERR_IO,
        _ => DPLOG_ERR_CONFIG,
    };
    fail(code, e.to_string())
}

pub(crate) fn logger_error(e: LoggerError) -> dplog_result {
    let code = match &e {
        LoggerError::ConsumerGone => DPLOG_ERR_CONSUMER_GONE,
        LoggerError::Io(_) => DPLOG_ERR_IO,
        LoggerError::Undelivered { .. } => DPLOG_ERR_UNDELIVERED,
        _ => DPLOG_ERR_CONFIG,
    };
    fail(code, e.to_string())
}

/// Static, NUL-terminated English message for `code`; never NULL. Unknown
/// codes give "unknown dplog_result". The string is owned by the library.
///
/// Thread-safety: any thread, any time.
#[no_mangle]
pub extern "C" fn dplog_strerror(code: dplog_result) -> *const c_char {
    usize::try_from(code)
        .ok()
        .and_then(|i| MESSAGES.get(i))
        .map_or(c"unknown dplog_result".as_ptr(), |m| m.as_ptr())
}

/// Copies the detailed message of the last failed dplog call on the
/// calling thread (e.g. the config key and line, the errno text) into
/// `buf`, truncated to `buf_len - 1` bytes and NUL-terminated, and stores
/// the full message length (without NUL) in `*msg_len` if `msg_len` is not
/// NULL. An empty message if no call has failed on this thread.
///
/// Errors: `DPLOG_ERR_NULL` if `buf` is NULL while `buf_len > 0`.
/// `buf_len == 0` only reports the length.
///
/// Thread-safety: any thread; the message is per thread.
///
/// # Safety
/// `buf` is valid for `buf_len` bytes; `msg_len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_last_error(
    buf: *mut c_char,
    buf_len: usize,
    msg_len: *mut usize,
) -> dplog_result {
    guard(|| {
        if buf.is_null() && buf_len > 0 {
            return DPLOG_ERR_NULL;
        }
        let msg = LAST_ERROR
            .try_with(|l| l.borrow().as_bytes().to_vec())
            .unwrap_or_default();
        if buf_len > 0 {
            let n = msg.len().min(buf_len - 1);
            // SAFETY: buf is valid for buf_len > n bytes (caller contract);
            // msg is a separate Rust allocation, so they do not overlap.
            unsafe {
                core::ptr::copy_nonoverlapping(msg.as_ptr(), buf.cast::<u8>(), n);
                *buf.add(n) = 0;
            }
        }
        // SAFETY: msg_len is NULL or writable (caller contract).
        unsafe { write_out(msg_len, msg.len()) };
        DPLOG_OK
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn a_panic_becomes_an_error_code_with_its_message() {
        let r = guard(|| panic!("boom {}", 42));
        assert_eq!(r, DPLOG_ERR_PANIC);
        let mut buf = [0 as c_char; 128];
        let mut len = 0usize;
        // SAFETY: buf is 128 bytes, len is writable.
        let rc = unsafe { dplog_last_error(buf.as_mut_ptr(), buf.len(), &mut len) };
        assert_eq!(rc, DPLOG_OK);
        // SAFETY: dplog_last_error NUL-terminates.
        let msg = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
        assert!(msg.contains("boom 42"), "{msg}");
        assert_eq!(len, msg.len());
    }

    #[test]
    fn every_code_has_its_own_message() {
        let mut seen = HashSet::new();
        assert_eq!(MESSAGES.len(), DPLOG_ERR_LAST as usize + 1);
        for code in DPLOG_OK..=DPLOG_ERR_LAST {
            // SAFETY: dplog_strerror returns a static C string.
            let m = unsafe { CStr::from_ptr(dplog_strerror(code)) };
            assert!(seen.insert(m.to_owned()), "duplicate message for {code}");
        }
        // SAFETY: as above.
        let m = unsafe { CStr::from_ptr(dplog_strerror(99)) };
        assert_eq!(m.to_str().unwrap(), "unknown dplog_result");
        // SAFETY: as above.
        let m = unsafe { CStr::from_ptr(dplog_strerror(-1)) };
        assert_eq!(m.to_str().unwrap(), "unknown dplog_result");
    }
}
