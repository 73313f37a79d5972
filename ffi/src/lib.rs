//! # libdplog: the C ABI of dplog
//!
//! Builds `libdplog.so` and `libdplog.a`; `include/dplog.h` is generated
//! from this file by cbindgen (pinned, see `cbindgen.toml`).
//!
//! Design:
//! - Every export runs inside [`guard`], which turns a Rust panic into
//!   [`DPLOG_ERR_PANIC`]: no unwind crosses the C boundary.
//! - Handles ([`dplog_t`], [`dplog_producer_t`]) carry a magic word. Closing
//!   or freeing one marks it dead and keeps its (small) allocation for the
//!   life of the process in a global tombstone list, so a later call with
//!   the same pointer reads valid memory and returns [`DPLOG_ERR_CLOSED`]
//!   instead of touching freed memory.
//! - The logger handle's state sits behind a mutex: every logger function is
//!   thread-safe, `dplog_close` included. A producer is used by one thread
//!   at a time (it owns one SPSC ring).
#![allow(non_camel_case_types)]
#![warn(missing_docs)]

use std::cell::{RefCell, UnsafeCell};
use std::collections::HashSet;
use std::ffi::{c_char, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use dplog::config::{ConfigError, LogConfig, SinkConfig};
use dplog::sinks::FileSink;
use dplog::{Formatter, LogProducer, Logger, LoggerError, Nat44SessionRecord, RecordHeader, Sink};
use hdrhistogram::Histogram;

// ---------------------------------------------------------------------------
// Version
// ---------------------------------------------------------------------------

/// Major version of the library this header belongs to (Cargo.toml `version`).
pub const DPLOG_VERSION_MAJOR: u32 = 0;
/// Minor version of the library this header belongs to.
pub const DPLOG_VERSION_MINOR: u32 = 1;
/// Patch version of the library this header belongs to.
pub const DPLOG_VERSION_PATCH: u32 = 0;
/// `MAJOR * 10000 + MINOR * 100 + PATCH`, for `#if DPLOG_VERSION_NUMBER >= ...`.
pub const DPLOG_VERSION_NUMBER: u32 = 100;

const fn parse_u32(s: &str) -> u32 {
    let b = s.as_bytes();
    let mut i = 0;
    let mut v = 0u32;
    while i < b.len() {
        assert!(b[i].is_ascii_digit());
        v = v * 10 + (b[i] - b'0') as u32;
        i += 1;
    }
    v
}

// The header's macros must match Cargo.toml: a version bump that forgets
// them does not compile.
const _: () = assert!(DPLOG_VERSION_MAJOR == parse_u32(env!("CARGO_PKG_VERSION_MAJOR")));
const _: () = assert!(DPLOG_VERSION_MINOR == parse_u32(env!("CARGO_PKG_VERSION_MINOR")));
const _: () = assert!(DPLOG_VERSION_PATCH == parse_u32(env!("CARGO_PKG_VERSION_PATCH")));
const _: () = assert!(
    DPLOG_VERSION_NUMBER
        == DPLOG_VERSION_MAJOR * 10000 + DPLOG_VERSION_MINOR * 100 + DPLOG_VERSION_PATCH
);

// ---------------------------------------------------------------------------
// Result codes
// ---------------------------------------------------------------------------

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
/// A record length does not match the schema's record size.
pub const DPLOG_ERR_BAD_LENGTH: dplog_result = 3;
/// The schema id is not known to this library.
pub const DPLOG_ERR_UNKNOWN_SCHEMA: dplog_result = 4;
/// The configuration cannot be read or is invalid (unknown key, wrong type,
/// ring capacity not a power of two, ...); `dplog_last_error` names it.
pub const DPLOG_ERR_CONFIG: dplog_result = 5;
/// The sink failed: open, write, flush, reopen or close (errno text in
/// `dplog_last_error`).
pub const DPLOG_ERR_IO: dplog_result = 6;
/// The call is not valid in the handle's current state: a producer before
/// `dplog_start`, a second `dplog_start`, a second `dplog_reserve` before
/// `dplog_commit`, a `dplog_commit` without a reservation.
pub const DPLOG_ERR_STATE: dplog_result = 7;
/// The handle was closed or freed (use after close, double free), or the
/// producer's logger was closed. Nothing was done.
pub const DPLOG_ERR_CLOSED: dplog_result = 8;
/// The ring was full under `backpressure = "drop"`: the record(s) were
/// dropped and counted in `dplog_stats.dropped_full`.
pub const DPLOG_ERR_FULL: dplog_result = 9;
/// `dplog_producer_new`: this ring id already has a live producer.
pub const DPLOG_ERR_RING_IN_USE: dplog_result = 10;
/// `dplog_close`: the logger is closed, but some records were not
/// delivered (dropped because a ring was full, refused by the sink, or
/// still in a ring); the final stats say how many of each.
pub const DPLOG_ERR_UNDELIVERED: dplog_result = 11;
/// Valid request that this build does not support (e.g. more than one
/// consumer core, reopen of a non-file sink, user-registered schemas).
pub const DPLOG_ERR_UNSUPPORTED: dplog_result = 12;
/// The consumer thread stopped unexpectedly (it panicked).
pub const DPLOG_ERR_CONSUMER_GONE: dplog_result = 13;
/// A Rust panic was caught at the boundary; the handle may be unusable
/// but the process is intact.
pub const DPLOG_ERR_PANIC: dplog_result = 14;

const MESSAGES: [&CStr; 15] = [
    c"success",
    c"a required pointer argument was NULL",
    c"invalid argument",
    c"record length does not match the schema",
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
];

// ---------------------------------------------------------------------------
// Records, schemas and constants shared with C
// ---------------------------------------------------------------------------

/// Schema id of `struct dplog_nat44_session`.
pub const DPLOG_SCHEMA_NAT44_SESSION: u16 = 1;
const _: () = assert!(DPLOG_SCHEMA_NAT44_SESSION == dplog::SCHEMA_NAT44_SESSION);
/// Size in bytes of `struct dplog_nat44_session` (one 64-byte ring slot).
pub const DPLOG_NAT44_SESSION_SIZE: usize = 64;
/// Most records one `dplog_reserve` hands out.
pub const DPLOG_RESERVE_MAX: usize = 64;

/// natEvent 1 (historic): NAT translation create (RFC 8158, IANA registry).
pub const DPLOG_NAT_EVENT_TRANSLATION_CREATE: u8 = 1;
/// natEvent 2 (historic): NAT translation delete.
pub const DPLOG_NAT_EVENT_TRANSLATION_DELETE: u8 = 2;
/// natEvent 3: NAT addresses exhausted.
pub const DPLOG_NAT_EVENT_ADDRESSES_EXHAUSTED: u8 = 3;
/// natEvent 4: NAT44 session create.
pub const DPLOG_NAT_EVENT_NAT44_SESSION_CREATE: u8 = 4;
/// natEvent 5: NAT44 session delete.
pub const DPLOG_NAT_EVENT_NAT44_SESSION_DELETE: u8 = 5;
/// natEvent 12: NAT ports exhausted.
pub const DPLOG_NAT_EVENT_PORTS_EXHAUSTED: u8 = 12;
/// natEvent 13: quota exceeded.
pub const DPLOG_NAT_EVENT_QUOTA_EXCEEDED: u8 = 13;
/// natEvent 16: port block allocation.
pub const DPLOG_NAT_EVENT_PORT_BLOCK_ALLOCATION: u8 = 16;
/// natEvent 17: port block de-allocation.
pub const DPLOG_NAT_EVENT_PORT_BLOCK_DEALLOCATION: u8 = 17;

/// Header at offset 0 of every record, 8 bytes. `dplog_log`,
/// `dplog_log_burst` and `dplog_commit` fill `len` and `schema_id` from the
/// schema and zero `flags` and `reserved`, so C code may leave it zeroed.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct dplog_record_header {
    /// Total record length in bytes, header included.
    pub len: u16,
    /// Schema id, e.g. `DPLOG_SCHEMA_NAT44_SESSION`.
    pub schema_id: u16,
    /// Record flags; 0.
    pub flags: u16,
    /// Reserved; 0.
    pub reserved: u16,
}

/// A NAT44 session create or delete event (RFC 8158 natEvent 4 and 5);
/// schema `DPLOG_SCHEMA_NAT44_SESSION`, exactly 64 bytes.
///
/// Addresses are IPv4 addresses in host byte order (10.0.0.1 is
/// 0x0A000001); ports are host byte order. Counters are meaningful on
/// deletes (natEvent 5) and zero on creates.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct dplog_nat44_session {
    /// Filled by dplog (len 64, schema 1).
    pub header: dplog_record_header,
    /// Event time, nanoseconds since the Unix epoch (UTC, CLOCK_REALTIME).
    pub timestamp_ns: u64,
    /// sourceIPv4Address (IE 8): pre-NAT inside source address.
    pub src_addr: u32,
    /// postNATSourceIPv4Address (IE 225): outside address from the pool.
    pub post_nat_src_addr: u32,
    /// destinationIPv4Address (IE 12).
    pub dst_addr: u32,
    /// sourceTransportPort (IE 7), or the ICMP echo identifier.
    pub src_port: u16,
    /// postNAPTSourceTransportPort (IE 227).
    pub post_napt_src_port: u16,
    /// destinationTransportPort (IE 11); 0 for ICMP.
    pub dst_port: u16,
    /// protocolIdentifier (IE 4): 1 ICMP, 6 TCP, 17 UDP.
    pub protocol: u8,
    /// natEvent (IE 230): `DPLOG_NAT_EVENT_NAT44_SESSION_CREATE` or `_DELETE`.
    pub nat_event: u8,
    /// ingressVRFID (IE 234); 0 for the default VRF.
    pub ingress_vrf_id: u32,
    /// initiatorPackets (IE 298), deletes only.
    pub initiator_packets: u32,
    /// responderPackets (IE 299), deletes only.
    pub responder_packets: u32,
    /// initiatorOctets (IE 231), deletes only.
    pub initiator_octets: u64,
    /// responderOctets (IE 232), deletes only.
    pub responder_octets: u64,
}

// The C struct is the Rust record, byte for byte.
const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    type R = Nat44SessionRecord;
    type C = dplog_nat44_session;
    assert!(size_of::<C>() == size_of::<R>() && size_of::<C>() == DPLOG_NAT44_SESSION_SIZE);
    assert!(align_of::<C>() == align_of::<R>());
    assert!(size_of::<dplog_record_header>() == size_of::<RecordHeader>());
    assert!(offset_of!(C, timestamp_ns) == offset_of!(R, timestamp_ns));
    assert!(offset_of!(C, src_addr) == offset_of!(R, src_addr));
    assert!(offset_of!(C, post_nat_src_addr) == offset_of!(R, post_nat_src_addr));
    assert!(offset_of!(C, dst_addr) == offset_of!(R, dst_addr));
    assert!(offset_of!(C, src_port) == offset_of!(R, src_port));
    assert!(offset_of!(C, post_napt_src_port) == offset_of!(R, post_napt_src_port));
    assert!(offset_of!(C, dst_port) == offset_of!(R, dst_port));
    assert!(offset_of!(C, protocol) == offset_of!(R, protocol));
    assert!(offset_of!(C, nat_event) == offset_of!(R, nat_event));
    assert!(offset_of!(C, ingress_vrf_id) == offset_of!(R, ingress_vrf_id));
    assert!(offset_of!(C, initiator_packets) == offset_of!(R, initiator_packets));
    assert!(offset_of!(C, responder_packets) == offset_of!(R, responder_packets));
    assert!(offset_of!(C, initiator_octets) == offset_of!(R, initiator_octets));
    assert!(offset_of!(C, responder_octets) == offset_of!(R, responder_octets));
};

/// Every counter of one logger, summed over its rings, plus latency
/// percentiles. Filled by `dplog_stats` and `dplog_close`.
///
/// Accounting: `produced = enqueued + dropped_full`; after `dplog_close`,
/// `produced = written_records + dropped_full + dropped_sink +
/// dropped_shutdown + in_flight`.
///
/// Latency is the age of a record when the consumer formats it: consumer
/// CLOCK_REALTIME minus the record's `timestamp_ns`, in nanoseconds, over
/// the records whose `timestamp_ns` is non-zero and not in the future
/// (`latency_samples` of them). The percentiles are 0 when there is no
/// sample. While running they may lag by up to 255 records; after
/// `dplog_close` they cover every record.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct dplog_stats {
    /// Records whose fate a producer decided (enqueued or dropped).
    pub produced: u64,
    /// Records copied into a ring.
    pub enqueued: u64,
    /// Records dropped because a ring was full (`backpressure = "drop"`), or
    /// because the logger was closed.
    pub dropped_full: u64,
    /// Records read out of rings by the consumer.
    pub dequeued: u64,
    /// Records in batches the sink accepted.
    pub written_records: u64,
    /// Bytes in batches the sink accepted.
    pub written_bytes: u64,
    /// Records in batches the sink refused.
    pub dropped_sink: u64,
    /// Sink calls (write, flush, tick, drain, close) that failed,
    /// retryable or permanent.
    pub sink_errors: u64,
    /// Of `sink_errors`, the retryable ones (each retried after a backoff).
    pub sink_retries: u64,
    /// Records the sink accepted but has not acknowledged yet (asynchronous
    /// sinks; 0 for files).
    pub sink_pending: u64,
    /// Records not delivered when the shutdown timeout expired.
    pub dropped_shutdown: u64,
    /// Batches written to the sink.
    pub batches: u64,
    /// Highest fill level the consumer saw in any one ring, in records.
    pub high_water: u64,
    /// Rings registered (one per `dplog_producer_new`).
    pub rings: u64,
    /// Records produced but neither written nor dropped (still in a ring or
    /// in the consumer's batch).
    pub in_flight: u64,
    /// Records that contributed to the latency percentiles.
    pub latency_samples: u64,
    /// Median record age at formatting, in nanoseconds.
    pub latency_p50_ns: u64,
    /// 90th percentile, in nanoseconds.
    pub latency_p90_ns: u64,
    /// 99th percentile, in nanoseconds.
    pub latency_p99_ns: u64,
    /// 99.9th percentile, in nanoseconds.
    pub latency_p999_ns: u64,
    /// Largest record age seen, in nanoseconds.
    pub latency_max_ns: u64,
}

// ---------------------------------------------------------------------------
// Errors, panic guard, handles
// ---------------------------------------------------------------------------

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `msg` as the calling thread's last error and returns `code`.
#[cold]
#[inline(never)]
fn fail(code: dplog_result, msg: impl Into<String>) -> dplog_result {
    let mut m: String = msg.into();
    m.retain(|c| c != '\0');
    let c = CString::new(m).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|l| *l.borrow_mut() = c);
    code
}

/// Runs `f`; a panic becomes [`DPLOG_ERR_PANIC`] (with its message as the
/// last error) instead of unwinding into C.
#[inline(always)]
fn guard<F: FnOnce() -> dplog_result>(f: F) -> dplog_result {
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

const MAGIC_LIVE: u32 = 0x6470_6c67; // "dplg"
const MAGIC_DEAD: u32 = 0xdead_0d0e;

/// Addresses of closed handles and freed producers. They are never freed:
/// a stale pointer keeps pointing at a dead-marked object. Holding them
/// here keeps them reachable (no leak report from LeakSanitizer/valgrind).
static TOMBSTONES: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn bury(addr: usize) {
    lock(&TOMBSTONES).push(addr);
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn check_magic(m: &AtomicU32, what: &str) -> Result<(), dplog_result> {
    // Relaxed: the magic word only changes under the handle's own
    // discipline (close/free); its partner is the Release store in
    // close/free, which is ordered for the same handle by the state mutex
    // (logger) or by the single-thread rule (producer).
    match m.load(Ordering::Relaxed) {
        MAGIC_LIVE => Ok(()),
        MAGIC_DEAD => Err(fail(DPLOG_ERR_CLOSED, format!("{what} is closed or freed"))),
        _ => Err(fail(
            DPLOG_ERR_INVALID_ARG,
            format!("pointer is not a {what} (bad magic word)"),
        )),
    }
}

/// State shared by a logger and its producers.
struct Shared {
    /// Ring ids with a live producer.
    rings: Mutex<HashSet<u32>>,
    /// Set by `dplog_close`; producers check it before every record.
    closed: AtomicBool,
}

/// Opaque logger handle: one configuration, one sink, one consumer thread,
/// any number of producers. Created by `dplog_open`/`dplog_open_str`,
/// destroyed by `dplog_close`.
pub struct dplog_t {
    magic: AtomicU32,
    shared: Arc<Shared>,
    latency: Arc<Mutex<Histogram<u64>>>,
    state: Mutex<State>,
}

enum State {
    Opened(Box<Pending>),
    Started(Box<Running>),
    Closed,
}

struct Pending {
    config: LogConfig,
    /// For a file sink: the sink, opened at `dplog_open` time, and its path.
    file: Option<(FileSink, PathBuf)>,
}

struct Running {
    logger: Logger<Nat44SessionRecord>,
    /// The sink is a file (so `dplog_reopen` is meaningful).
    is_file: bool,
}

/// Opaque producer handle: one SPSC ring into one logger, for one
/// forwarding core. Created by `dplog_producer_new`, destroyed by
/// `dplog_producer_free`.
pub struct dplog_producer_t {
    magic: AtomicU32,
    inner: UnsafeCell<Option<ProducerState>>,
}

struct ProducerState {
    prod: LogProducer<Nat44SessionRecord>,
    ring_id: u32,
    shared: Arc<Shared>,
    drop_policy: bool,
    /// Staging slots of `dplog_reserve`, allocated on first use.
    staging: Option<Box<[Nat44SessionRecord; DPLOG_RESERVE_MAX]>>,
    reserved: usize,
}

impl Drop for ProducerState {
    fn drop(&mut self) {
        lock(&self.shared.rings).remove(&self.ring_id);
    }
}

/// # Safety
/// `h` is NULL or a pointer returned by `dplog_open*` (live or closed).
unsafe fn logger<'a>(h: *const dplog_t) -> Result<&'a dplog_t, dplog_result> {
    if h.is_null() {
        return Err(fail(DPLOG_ERR_NULL, "dplog handle is NULL"));
    }
    // SAFETY: non-NULL and, by the caller's contract, returned by
    // dplog_open*; handles are never deallocated (see TOMBSTONES).
    let l = unsafe { &*h };
    check_magic(&l.magic, "dplog handle")?;
    Ok(l)
}

/// # Safety
/// `p` is NULL or a pointer returned by `dplog_producer_new`, used by one
/// thread at a time.
#[inline(always)]
unsafe fn producer<'a>(p: *mut dplog_producer_t) -> Result<&'a mut ProducerState, dplog_result> {
    if p.is_null() {
        return Err(fail(DPLOG_ERR_NULL, "producer is NULL"));
    }
    // SAFETY: non-NULL and returned by dplog_producer_new; producers are
    // never deallocated (see TOMBSTONES).
    let obj = unsafe { &*p };
    check_magic(&obj.magic, "dplog producer")?;
    // SAFETY: the producer is used by one thread at a time (documented
    // contract), so this is the only reference to its state.
    match unsafe { &mut *obj.inner.get() } {
        Some(st) => {
            // Relaxed: a hint; the partner is the Release store in
            // dplog_close. A record racing with close is either drained
            // or counted in in_flight.
            if st.shared.closed.load(Ordering::Relaxed) {
                return Err(fail(DPLOG_ERR_CLOSED, "the producer's logger is closed"));
            }
            Ok(st)
        }
        None => Err(fail(DPLOG_ERR_CLOSED, "dplog producer is freed")),
    }
}

/// # Safety
/// `out` is NULL or valid for a write of `T`.
unsafe fn write_out<T>(out: *mut T, v: T) {
    if !out.is_null() {
        // SAFETY: non-NULL, and the caller's contract says it is writable.
        unsafe { out.write(v) };
    }
}

fn config_error(e: ConfigError) -> dplog_result {
    let code = match &e {
        ConfigError::Sink(_) => DPLOG_ERR_IO,
        _ => DPLOG_ERR_CONFIG,
    };
    fail(code, e.to_string())
}

fn logger_error(e: LoggerError) -> dplog_result {
    let code = match &e {
        LoggerError::ConsumerGone => DPLOG_ERR_CONSUMER_GONE,
        LoggerError::Io(_) => DPLOG_ERR_IO,
        _ => DPLOG_ERR_CONFIG,
    };
    fail(code, e.to_string())
}

// ---------------------------------------------------------------------------
// Latency: a formatter wrapper that records each record's age
// ---------------------------------------------------------------------------

const LATENCY_MERGE_EVERY: u32 = 256;

fn new_histogram() -> Histogram<u64> {
    // 1 ns .. 1 hour, 3 significant digits; the bounds are constants.
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

struct TimedFormatter {
    inner: Box<dyn Formatter<Nat44SessionRecord>>,
    local: Histogram<u64>,
    pending: u32,
    shared: Arc<Mutex<Histogram<u64>>>,
}

impl TimedFormatter {
    fn merge(&mut self) {
        if self.local.is_empty() {
            return;
        }
        let _ = lock(&self.shared).add(&self.local);
        self.local.reset();
        self.pending = 0;
    }
}

impl Formatter<Nat44SessionRecord> for TimedFormatter {
    fn format(&mut self, rec: &Nat44SessionRecord, out: &mut Vec<u8>) {
        self.inner.format(rec, out);
        if rec.timestamp_ns != 0 {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            if now >= rec.timestamp_ns {
                self.local
                    .saturating_record((now - rec.timestamp_ns).max(1));
                self.pending += 1;
                if self.pending >= LATENCY_MERGE_EVERY {
                    self.merge();
                }
            }
        }
    }
}

impl Drop for TimedFormatter {
    fn drop(&mut self) {
        self.merge();
    }
}

// ---------------------------------------------------------------------------
// Exports
// ---------------------------------------------------------------------------

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

/// Stores the library's own version (from its Cargo.toml) in the three
/// out-params, to compare with the header's `DPLOG_VERSION_*` macros.
///
/// Errors: `DPLOG_ERR_NULL` if any pointer is NULL (nothing written).
/// Thread-safety: any thread.
///
/// # Safety
/// The pointers are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_version(
    major: *mut u32,
    minor: *mut u32,
    patch: *mut u32,
) -> dplog_result {
    guard(|| {
        if major.is_null() || minor.is_null() || patch.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_version: NULL out-param");
        }
        let p = |s: &str| s.parse::<u32>().unwrap_or(u32::MAX);
        // SAFETY: non-NULL and writable (caller contract).
        unsafe {
            major.write(p(env!("CARGO_PKG_VERSION_MAJOR")));
            minor.write(p(env!("CARGO_PKG_VERSION_MINOR")));
            patch.write(p(env!("CARGO_PKG_VERSION_PATCH")));
        }
        DPLOG_OK
    })
}

fn open_config(config: LogConfig, out: *mut *mut dplog_t) -> dplog_result {
    // Fail fast: the file sink is opened now, not at start.
    let file = match &config.sink {
        SinkConfig::File(f) => match FileSink::open(&f.path) {
            Ok(s) => Some((s, PathBuf::from(&f.path))),
            Err(e) => return fail(DPLOG_ERR_IO, format!("cannot open sink: {e}")),
        },
        #[allow(unreachable_patterns)]
        _ => None,
    };
    let h = Box::new(dplog_t {
        magic: AtomicU32::new(MAGIC_LIVE),
        shared: Arc::new(Shared {
            rings: Mutex::new(HashSet::new()),
            closed: AtomicBool::new(false),
        }),
        latency: Arc::new(Mutex::new(new_histogram())),
        state: Mutex::new(State::Opened(Box::new(Pending { config, file }))),
    });
    // SAFETY: out is non-NULL (checked by the callers) and writable.
    unsafe { out.write(Box::into_raw(h)) };
    DPLOG_OK
}

/// Reads the TOML configuration file at `config_path` (keys: see the README
/// and `dplog::config`; every key optional), opens the sink (a file sink's
/// file is created now, mode 0640) and returns a new logger handle in
/// `*out`. No thread is started until `dplog_start`.
///
/// Errors: `DPLOG_ERR_NULL` (a NULL argument), `DPLOG_ERR_INVALID_ARG` (path
/// not UTF-8), `DPLOG_ERR_CONFIG` (file unreadable, bad TOML, unknown key,
/// wrong value; `dplog_last_error` names key and line), `DPLOG_ERR_IO`
/// (sink cannot be opened). `*out` is written only on success.
///
/// Ownership: the caller owns the handle and must release it with
/// `dplog_close`. Thread-safety: any thread.
///
/// # Safety
/// `config_path` is NULL or a NUL-terminated string; `out` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_open(
    config_path: *const c_char,
    out: *mut *mut dplog_t,
) -> dplog_result {
    guard(|| {
        if config_path.is_null() || out.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_open: NULL argument");
        }
        // SAFETY: non-NULL, NUL-terminated (caller contract).
        let path = match unsafe { CStr::from_ptr(config_path) }.to_str() {
            Ok(p) => p,
            Err(_) => return fail(DPLOG_ERR_INVALID_ARG, "config path is not UTF-8"),
        };
        match dplog::config::read_toml::<LogConfig>(std::path::Path::new(path)) {
            Ok(c) => open_config(c, out),
            Err(e) => config_error(e),
        }
    })
}

/// Like `dplog_open`, with the TOML document itself in `toml`
/// (NUL-terminated, UTF-8; an empty string gives every default).
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_INVALID_ARG` (not UTF-8),
/// `DPLOG_ERR_CONFIG`, `DPLOG_ERR_IO`; `*out` is written only on success.
/// Ownership and thread-safety as `dplog_open`.
///
/// # Safety
/// `toml` is NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_open_str(
    toml: *const c_char,
    out: *mut *mut dplog_t,
) -> dplog_result {
    guard(|| {
        if toml.is_null() || out.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_open_str: NULL argument");
        }
        // SAFETY: non-NULL, NUL-terminated (caller contract).
        let text = match unsafe { CStr::from_ptr(toml) }.to_str() {
            Ok(t) => t,
            Err(_) => return fail(DPLOG_ERR_INVALID_ARG, "config text is not UTF-8"),
        };
        match LogConfig::from_toml_str(text) {
            Ok(c) => open_config(c, out),
            Err(e) => config_error(e),
        }
    })
}

/// Starts the consumer thread (named `dplog-consumer`). With
/// `n_cores == 1` it is pinned to CPU `cores[0]`; with `n_cores == 0`
/// (`cores` may be NULL) the config's `[ring] consumer_cpu`, if any, is used.
///
/// Errors: `DPLOG_ERR_NULL` (handle NULL, or `cores` NULL with
/// `n_cores > 0`), `DPLOG_ERR_INVALID_ARG` (a CPU this process cannot run
/// on), `DPLOG_ERR_UNSUPPORTED` (`n_cores > 1`: one consumer per handle in
/// this version), `DPLOG_ERR_STATE` (already started), `DPLOG_ERR_CLOSED`,
/// `DPLOG_ERR_CONFIG` (ring settings refused: capacity not a power of two,
/// burst 0, batch below 64 KiB), `DPLOG_ERR_IO` (thread or sink failure).
/// On error the handle stays as it was (not started).
///
/// Thread-safety: any thread; serialized with other calls on the handle.
///
/// # Safety
/// `h` is NULL or returned by `dplog_open*`; `cores` is NULL or valid for
/// `n_cores` elements.
#[no_mangle]
pub unsafe extern "C" fn dplog_start(
    h: *mut dplog_t,
    cores: *const u32,
    n_cores: usize,
) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        let l = match unsafe { logger(h) } {
            Ok(l) => l,
            Err(e) => return e,
        };
        if n_cores > 0 && cores.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_start: cores is NULL");
        }
        if n_cores > 1 {
            return fail(
                DPLOG_ERR_UNSUPPORTED,
                format!("dplog_start: {n_cores} consumer cores asked, this version runs one"),
            );
        }
        let cpu = if n_cores == 1 {
            // SAFETY: cores is valid for n_cores == 1 element.
            let c = unsafe { *cores } as usize;
            if let Err(e) = cpu_allowed(c) {
                return e;
            }
            Some(c)
        } else {
            None
        };
        let mut st = lock(&l.state);
        let pending = match &mut *st {
            State::Opened(p) => p,
            State::Started(_) => return fail(DPLOG_ERR_STATE, "dplog_start: already started"),
            State::Closed => return fail(DPLOG_ERR_CLOSED, "dplog handle is closed"),
        };
        let mut cfg = pending.config.clone();
        if cpu.is_some() {
            cfg.ring.consumer_cpu = cpu;
        }
        let running = if let Some((sink, sink_path)) = pending.file.take() {
            let formatter = TimedFormatter {
                inner: cfg.format.kind.nat44_formatter(),
                local: new_histogram(),
                pending: 0,
                shared: l.latency.clone(),
            };
            match Logger::start(cfg.logger_config(), formatter, sink) {
                Ok(logger) => Running {
                    logger,
                    is_file: true,
                },
                Err(e) => {
                    // The sink went down with the failed start; reopen it
                    // so the handle stays usable (as before the call).
                    pending.file = FileSink::open(&sink_path).ok().map(|s| (s, sink_path));
                    return logger_error(e);
                }
            }
        } else {
            match cfg.start_nat44() {
                Ok(logger) => Running {
                    logger,
                    is_file: false,
                },
                Err(e) => return config_error(e),
            }
        };
        *st = State::Started(Box::new(running));
        DPLOG_OK
    })
}

fn cpu_allowed(cpu: usize) -> Result<(), dplog_result> {
    // SAFETY: cpu_set_t is plain data (all-zero is valid); sched_getaffinity
    // writes at most size_of::<cpu_set_t>() bytes into it.
    let (rc, set) = unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        let rc = libc::sched_getaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &mut set);
        (rc, set)
    };
    let ok = cpu < libc::CPU_SETSIZE as usize
        && (rc != 0
            // SAFETY: cpu < CPU_SETSIZE, so CPU_ISSET reads inside `set`.
            || unsafe { libc::CPU_ISSET(cpu, &set) });
    if ok {
        Ok(())
    } else {
        Err(fail(
            DPLOG_ERR_INVALID_ARG,
            format!("CPU {cpu} is not in this process's affinity mask"),
        ))
    }
}

/// Creates a producer for ring `ring_id` (any number the caller chooses,
/// typically the lcore or worker index): a new SPSC ring of `[ring]
/// capacity` slots drained by the logger's consumer. Use it from one
/// thread (core) at a time.
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_STATE` (not started yet),
/// `DPLOG_ERR_CLOSED`, `DPLOG_ERR_RING_IN_USE` (`ring_id` has a live
/// producer; free it first), `DPLOG_ERR_CONSUMER_GONE`. `*out` is written
/// only on success.
///
/// Ownership: the caller owns the producer and releases it with
/// `dplog_producer_free`, before or after `dplog_close` (after close it
/// only returns `DPLOG_ERR_CLOSED`). Thread-safety: any thread.
///
/// # Safety
/// `h` is NULL or returned by `dplog_open*`; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_producer_new(
    h: *mut dplog_t,
    ring_id: u32,
    out: *mut *mut dplog_producer_t,
) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        let l = match unsafe { logger(h) } {
            Ok(l) => l,
            Err(e) => return e,
        };
        if out.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_producer_new: out is NULL");
        }
        let st = lock(&l.state);
        let run = match &*st {
            State::Started(r) => r,
            State::Opened(_) => {
                return fail(
                    DPLOG_ERR_STATE,
                    "dplog_producer_new: call dplog_start first",
                )
            }
            State::Closed => return fail(DPLOG_ERR_CLOSED, "dplog handle is closed"),
        };
        if !lock(&l.shared.rings).insert(ring_id) {
            return fail(
                DPLOG_ERR_RING_IN_USE,
                format!("ring {ring_id} already has a producer"),
            );
        }
        let prod = match run.logger.producer() {
            Ok(p) => p,
            Err(e) => {
                lock(&l.shared.rings).remove(&ring_id);
                return logger_error(e);
            }
        };
        let drop_policy = prod.policy() == dplog::Backpressure::Drop;
        let obj = Box::new(dplog_producer_t {
            magic: AtomicU32::new(MAGIC_LIVE),
            inner: UnsafeCell::new(Some(ProducerState {
                prod,
                ring_id,
                shared: l.shared.clone(),
                drop_policy,
                staging: None,
                reserved: 0,
            })),
        });
        // SAFETY: out is non-NULL (checked) and writable (caller contract).
        unsafe { out.write(Box::into_raw(obj)) };
        DPLOG_OK
    })
}

/// Releases a producer: its ring is drained by the consumer and then
/// removed, and its `ring_id` can be used again. A pending reservation is
/// discarded.
///
/// `p == NULL` is a no-op returning `DPLOG_OK`. A second free of the same
/// pointer is a no-op returning `DPLOG_ERR_CLOSED` (the pointer keeps
/// pointing at a dead-marked object, never at freed memory).
///
/// Thread-safety: not concurrently with any other call on the same
/// producer.
///
/// # Safety
/// `p` is NULL or returned by `dplog_producer_new`.
#[no_mangle]
pub unsafe extern "C" fn dplog_producer_free(p: *mut dplog_producer_t) -> dplog_result {
    guard(|| {
        if p.is_null() {
            return DPLOG_OK;
        }
        // SAFETY: returned by dplog_producer_new, never deallocated.
        let obj = unsafe { &*p };
        if let Err(e) = check_magic(&obj.magic, "dplog producer") {
            return e;
        }
        // Release: partner of the Relaxed magic check of a later call on
        // the same thread (or one synchronised with it by the caller).
        obj.magic.store(MAGIC_DEAD, Ordering::Release);
        // SAFETY: single-thread rule for producers; no other reference.
        let state = unsafe { (*obj.inner.get()).take() };
        drop(state);
        bury(p as usize);
        DPLOG_OK
    })
}

#[inline(always)]
fn nat44_from_c(rec: *const u8) -> Nat44SessionRecord {
    // SAFETY: the callers checked that `rec` is non-NULL and, by contract,
    // valid for DPLOG_NAT44_SESSION_SIZE bytes; every field of the record
    // is an integer, so any bytes are a valid value; read_unaligned
    // allows any alignment.
    let mut r = unsafe { core::ptr::read_unaligned(rec.cast::<Nat44SessionRecord>()) };
    r.header = RecordHeader::of::<Nat44SessionRecord>();
    r
}

#[inline(always)]
fn check_schema(schema_id: u16, len: usize) -> Result<(), dplog_result> {
    if schema_id != DPLOG_SCHEMA_NAT44_SESSION {
        return Err(fail(
            DPLOG_ERR_UNKNOWN_SCHEMA,
            format!("unknown schema id {schema_id}"),
        ));
    }
    if len != DPLOG_NAT44_SESSION_SIZE {
        return Err(fail(
            DPLOG_ERR_BAD_LENGTH,
            format!("record length {len}, schema {schema_id} records are {DPLOG_NAT44_SESSION_SIZE} bytes"),
        ));
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn not_enqueued(st: &ProducerState, n: usize) -> dplog_result {
    if st.drop_policy {
        fail(
            DPLOG_ERR_FULL,
            format!("ring {} full: {n} record(s) dropped", st.ring_id),
        )
    } else {
        fail(DPLOG_ERR_CLOSED, "the consumer is gone; record(s) dropped")
    }
}

/// Copies one record of schema `schema_id` (`len` bytes at `rec`, any
/// alignment) into the producer's ring. Its header is filled by dplog.
/// Under `backpressure = "block"` it waits (spin, then yield) while the
/// ring is full; under `"drop"` a full ring drops the record, counts it in
/// `dropped_full` and returns `DPLOG_ERR_FULL`.
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_UNKNOWN_SCHEMA`,
/// `DPLOG_ERR_BAD_LENGTH` (`len` != the schema's size, 64 for NAT44),
/// `DPLOG_ERR_FULL`, `DPLOG_ERR_CLOSED` (producer freed, logger closed or
/// consumer gone), `DPLOG_ERR_INVALID_ARG` (not a producer). On an
/// argument error nothing is enqueued or counted.
///
/// Cost: a few nanoseconds, no allocation, no lock, no system call unless
/// the ring is full under "block". Thread-safety: one thread at a time
/// per producer; different producers in parallel.
///
/// # Safety
/// `p` is NULL or returned by `dplog_producer_new`; `rec` is NULL or valid
/// for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn dplog_log(
    p: *mut dplog_producer_t,
    schema_id: u16,
    rec: *const c_void,
    len: usize,
) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on p.
        let st = match unsafe { producer(p) } {
            Ok(s) => s,
            Err(e) => return e,
        };
        if let Err(e) = check_schema(schema_id, len) {
            return e;
        }
        if rec.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_log: rec is NULL");
        }
        if st.prod.log(nat44_from_c(rec.cast())) {
            DPLOG_OK
        } else {
            not_enqueued(st, 1)
        }
    })
}

/// Copies `n` records of `rec_len` bytes each, packed back to back at
/// `recs`, into the producer's ring with one index publish per chunk of 32.
/// `*n_enqueued` (if not NULL) receives how many were enqueued; under
/// `"drop"` the rest were dropped and counted, and the result is
/// `DPLOG_ERR_FULL`. Under `"block"` all are enqueued (or the logger is
/// closed: `DPLOG_ERR_CLOSED`). `n == 0` is `DPLOG_OK` (`recs` may be NULL).
///
/// Errors: as `dplog_log`; on an argument error nothing is enqueued and
/// `*n_enqueued` is not written.
///
/// Thread-safety: one thread at a time per producer.
///
/// # Safety
/// `recs` is NULL or valid for `n * rec_len` bytes; `n_enqueued` is NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_log_burst(
    p: *mut dplog_producer_t,
    schema_id: u16,
    recs: *const c_void,
    rec_len: usize,
    n: usize,
    n_enqueued: *mut usize,
) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on p.
        let st = match unsafe { producer(p) } {
            Ok(s) => s,
            Err(e) => return e,
        };
        if let Err(e) = check_schema(schema_id, rec_len) {
            return e;
        }
        if n > 0 && recs.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_log_burst: recs is NULL");
        }
        const CHUNK: usize = 32;
        let base = recs.cast::<u8>();
        let mut chunk = [Nat44SessionRecord::default(); CHUNK];
        let mut done = 0usize;
        let mut i = 0usize;
        while i < n {
            let k = (n - i).min(CHUNK);
            for (j, slot) in chunk[..k].iter_mut().enumerate() {
                // SAFETY: (i + j) < n, so the record lies inside the
                // caller's n * rec_len bytes.
                *slot = nat44_from_c(unsafe { base.add((i + j) * rec_len) });
            }
            done += st.prod.log_burst(&chunk[..k]);
            i += k;
        }
        // SAFETY: NULL or writable (caller contract).
        unsafe { write_out(n_enqueued, done) };
        if done == n {
            DPLOG_OK
        } else {
            not_enqueued(st, n - done)
        }
    })
}

/// Reserves `n` (1..=`DPLOG_RESERVE_MAX`) record slots of schema
/// `schema_id` and stores in `*slots` a pointer to `n` contiguous records
/// (for NAT44: `struct dplog_nat44_session[n]`, 8-byte aligned) to fill in
/// place, then publish with `dplog_commit`. The pointer is valid until the
/// next `dplog_commit` or `dplog_producer_free` on this producer.
///
/// In this version the slots are a per-producer staging area, copied into
/// the ring by `dplog_commit` (one copy, like `dplog_log_burst`), because
/// the ring does not yet expose its slots; the API will stay the same when
/// it does.
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_UNKNOWN_SCHEMA`,
/// `DPLOG_ERR_INVALID_ARG` (`n` is 0 or above `DPLOG_RESERVE_MAX`),
/// `DPLOG_ERR_STATE` (a reservation is pending), `DPLOG_ERR_CLOSED`.
///
/// Thread-safety: one thread at a time per producer.
///
/// # Safety
/// `slots` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_reserve(
    p: *mut dplog_producer_t,
    schema_id: u16,
    n: usize,
    slots: *mut *mut c_void,
) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on p.
        let st = match unsafe { producer(p) } {
            Ok(s) => s,
            Err(e) => return e,
        };
        if let Err(e) = check_schema(schema_id, DPLOG_NAT44_SESSION_SIZE) {
            return e;
        }
        if slots.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_reserve: slots is NULL");
        }
        if n == 0 || n > DPLOG_RESERVE_MAX {
            return fail(
                DPLOG_ERR_INVALID_ARG,
                format!("dplog_reserve: n = {n}, must be 1..={DPLOG_RESERVE_MAX}"),
            );
        }
        if st.reserved > 0 {
            return fail(DPLOG_ERR_STATE, "dplog_reserve: a reservation is pending");
        }
        let staging = st
            .staging
            .get_or_insert_with(|| Box::new([Nat44SessionRecord::default(); DPLOG_RESERVE_MAX]));
        for r in staging[..n].iter_mut() {
            *r = Nat44SessionRecord::default();
        }
        st.reserved = n;
        // SAFETY: slots is non-NULL (checked) and writable (contract).
        unsafe { slots.write(staging.as_mut_ptr().cast()) };
        DPLOG_OK
    })
}

/// Publishes the first `n` records of the pending reservation (their
/// headers are filled by dplog) and ends it; the other reserved slots are
/// discarded, so `n == 0` cancels. `*n_enqueued` (if not NULL) receives how
/// many were enqueued; backpressure as `dplog_log_burst`.
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_STATE` (no reservation),
/// `DPLOG_ERR_INVALID_ARG` (`n` above the reserved count; the reservation
/// stays pending), `DPLOG_ERR_FULL`, `DPLOG_ERR_CLOSED`.
///
/// Thread-safety: one thread at a time per producer.
///
/// # Safety
/// `n_enqueued` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_commit(
    p: *mut dplog_producer_t,
    n: usize,
    n_enqueued: *mut usize,
) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on p.
        let st = match unsafe { producer(p) } {
            Ok(s) => s,
            Err(e) => return e,
        };
        if st.reserved == 0 {
            return fail(DPLOG_ERR_STATE, "dplog_commit: nothing reserved");
        }
        if n > st.reserved {
            return fail(
                DPLOG_ERR_INVALID_ARG,
                format!("dplog_commit: n = {n} but {} reserved", st.reserved),
            );
        }
        st.reserved = 0;
        let Some(staging) = st.staging.as_mut() else {
            return fail(DPLOG_ERR_STATE, "dplog_commit: nothing reserved");
        };
        for r in staging[..n].iter_mut() {
            r.header = RecordHeader::of::<Nat44SessionRecord>();
        }
        let done = st.prod.log_burst(&staging[..n]);
        // SAFETY: NULL or writable (caller contract).
        unsafe { write_out(n_enqueued, done) };
        if done == n {
            DPLOG_OK
        } else {
            not_enqueued(st, n - done)
        }
    })
}

fn fill_stats(s: &dplog::Stats, hist: &Histogram<u64>) -> dplog_stats {
    let q = |p: f64| {
        if hist.is_empty() {
            0
        } else {
            hist.value_at_quantile(p)
        }
    };
    dplog_stats {
        produced: s.produced,
        enqueued: s.enqueued,
        dropped_full: s.dropped_full,
        dequeued: s.dequeued,
        written_records: s.written_records,
        written_bytes: s.written_bytes,
        dropped_sink: s.dropped_sink,
        sink_errors: s.sink_errors,
        sink_retries: s.sink_retries,
        sink_pending: s.sink_pending,
        dropped_shutdown: s.dropped_shutdown,
        batches: s.batches,
        high_water: s.high_water,
        rings: s.rings,
        in_flight: s.in_flight(),
        latency_samples: hist.len(),
        latency_p50_ns: q(0.5),
        latency_p90_ns: q(0.9),
        latency_p99_ns: q(0.99),
        latency_p999_ns: q(0.999),
        latency_max_ns: if hist.is_empty() { 0 } else { hist.max() },
    }
}

/// Stores a snapshot of every counter and the latency percentiles in
/// `*out` (see `struct dplog_stats`). Before `dplog_start` every field is 0.
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_CLOSED` (use `dplog_close`'s
/// final stats instead). Thread-safety: any thread.
///
/// # Safety
/// `h` is NULL or returned by `dplog_open*`; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_stats(h: *mut dplog_t, out: *mut dplog_stats) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        let l = match unsafe { logger(h) } {
            Ok(l) => l,
            Err(e) => return e,
        };
        if out.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_stats: out is NULL");
        }
        let st = lock(&l.state);
        let s = match &*st {
            State::Started(r) => r.logger.stats(),
            State::Opened(_) => dplog::Stats::default(),
            State::Closed => return fail(DPLOG_ERR_CLOSED, "dplog handle is closed"),
        };
        let v = fill_stats(&s, &lock(&l.latency));
        // SAFETY: non-NULL (checked), writable (caller contract).
        unsafe { out.write(v) };
        DPLOG_OK
    })
}

/// Makes the consumer write what it has batched and flush the sink, and
/// waits for that. Records still in rings are not waited for. Before
/// `dplog_start` it flushes the sink directly.
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_CLOSED`, `DPLOG_ERR_IO` (the sink's
/// flush failed), `DPLOG_ERR_CONSUMER_GONE`. Thread-safety: any thread;
/// blocks the caller (not the producers) for one consumer round trip.
///
/// # Safety
/// `h` is NULL or returned by `dplog_open*`.
#[no_mangle]
pub unsafe extern "C" fn dplog_flush(h: *mut dplog_t) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        let l = match unsafe { logger(h) } {
            Ok(l) => l,
            Err(e) => return e,
        };
        let mut st = lock(&l.state);
        match &mut *st {
            State::Started(r) => match r.logger.flush() {
                Ok(()) => DPLOG_OK,
                Err(e) => logger_error(e),
            },
            State::Opened(p) => match p.file.as_mut().map(|(s, _)| s.flush()) {
                Some(Err(e)) => fail(DPLOG_ERR_IO, e.to_string()),
                _ => DPLOG_OK,
            },
            State::Closed => fail(DPLOG_ERR_CLOSED, "dplog handle is closed"),
        }
    })
}

/// Reopens the file sink's path (for logrotate: after `mv dplog.log
/// dplog.log.1`, call this and new batches go to a new `dplog.log`, never
/// to the renamed file). What is batched before the call is written to the
/// old file first. Returns when the new file is open.
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_CLOSED`, `DPLOG_ERR_IO` (the path
/// cannot be opened; the sink keeps no file and counts refused batches in
/// `dropped_sink` until a later reopen succeeds), `DPLOG_ERR_UNSUPPORTED`
/// (the sink is not a file), `DPLOG_ERR_CONSUMER_GONE`.
/// Thread-safety: any thread.
///
/// # Safety
/// `h` is NULL or returned by `dplog_open*`.
#[no_mangle]
pub unsafe extern "C" fn dplog_reopen(h: *mut dplog_t) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        let l = match unsafe { logger(h) } {
            Ok(l) => l,
            Err(e) => return e,
        };
        let mut st = lock(&l.state);
        match &mut *st {
            State::Started(r) => {
                if !r.is_file {
                    return fail(
                        DPLOG_ERR_UNSUPPORTED,
                        "dplog_reopen: the sink is not a file",
                    );
                }
                match r.logger.reopen() {
                    Ok(()) => DPLOG_OK,
                    Err(LoggerError::Io(e)) => fail(DPLOG_ERR_IO, format!("reopen: {e}")),
                    Err(e) => logger_error(e),
                }
            }
            State::Opened(p) => match p.file.as_mut() {
                Some((s, _)) => match s.reopen() {
                    Ok(()) => DPLOG_OK,
                    Err(e) => fail(DPLOG_ERR_IO, format!("reopen: {e}")),
                },
                None => fail(
                    DPLOG_ERR_UNSUPPORTED,
                    "dplog_reopen: the sink is not a file",
                ),
            },
            State::Closed => fail(DPLOG_ERR_CLOSED, "dplog handle is closed"),
        }
    })
}

/// Closes the logger: drains every ring, writes the last batch, flushes
/// and closes (fsyncs) the sink, joins the consumer thread, and stores the
/// final counters in `*final_stats` (if not NULL) — written whenever the
/// handle was live, even on `DPLOG_ERR_UNDELIVERED` or `DPLOG_ERR_IO`.
/// The handle is released in every case except `DPLOG_ERR_NULL` and
/// `DPLOG_ERR_CLOSED`.
///
/// Free producers first (or at least stop using them): a record logged
/// concurrently with the close may stay in its ring and is reported in
/// `in_flight`; after the close, producers return `DPLOG_ERR_CLOSED` and
/// must still be freed with `dplog_producer_free`.
///
/// Returns `DPLOG_OK` when every produced record was written;
/// `DPLOG_ERR_UNDELIVERED` when some were dropped (ring full, sink
/// refusal) or left in flight; `DPLOG_ERR_IO` when the sink's final
/// flush/close failed; `DPLOG_ERR_CONSUMER_GONE` if the consumer died.
/// `dplog_close(NULL, ...)` returns `DPLOG_ERR_NULL`; a second close of
/// the same handle is a no-op returning `DPLOG_ERR_CLOSED`.
///
/// Thread-safety: any thread; calls racing with it on the same handle
/// return `DPLOG_ERR_CLOSED` once it has begun.
///
/// # Safety
/// `h` is NULL or returned by `dplog_open*`; `final_stats` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_close(
    h: *mut dplog_t,
    final_stats: *mut dplog_stats,
) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        let l = match unsafe { logger(h) } {
            Ok(l) => l,
            Err(e) => return e,
        };
        let mut st = lock(&l.state);
        let prev = core::mem::replace(&mut *st, State::Closed);
        // Release: partner of the Relaxed check in `producer()`.
        l.shared.closed.store(true, Ordering::Release);
        // Release: partner of the Relaxed magic check (same mutex order).
        l.magic.store(MAGIC_DEAD, Ordering::Release);
        let (stats, err) = match prev {
            State::Closed => return fail(DPLOG_ERR_CLOSED, "dplog handle is already closed"),
            State::Opened(mut p) => {
                let e = p.file.as_mut().and_then(|(s, _)| s.close().err());
                (
                    dplog::Stats::default(),
                    e.map(|e| LoggerError::Io(e.into())),
                )
            }
            State::Started(r) => match r.logger.shutdown() {
                Ok(s) => (s, None),
                Err((s, e)) => (s, Some(e)),
            },
        };
        drop(st);
        bury(h as usize);
        let v = fill_stats(&stats, &lock(&l.latency));
        // SAFETY: NULL or writable (caller contract).
        unsafe { write_out(final_stats, v) };
        if let Some(e) = err {
            return logger_error(e);
        }
        let undelivered = v.dropped_full + v.dropped_sink + v.dropped_shutdown + v.in_flight;
        if undelivered > 0 {
            return fail(
                DPLOG_ERR_UNDELIVERED,
                format!(
                    "{undelivered} record(s) not delivered: {} dropped (ring full), {} refused by the sink, {} at the shutdown timeout, {} in flight",
                    v.dropped_full, v.dropped_sink, v.dropped_shutdown, v.in_flight
                ),
            );
        }
        DPLOG_OK
    })
}

/// Nanoseconds since the Unix epoch (CLOCK_REALTIME), for `timestamp_ns`.
///
/// Errors: `DPLOG_ERR_NULL`. Thread-safety: any thread. Cost: one vDSO
/// clock read (~20 ns); hot loops may read it once per burst.
///
/// # Safety
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_now_ns(out: *mut u64) -> dplog_result {
    guard(|| {
        if out.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_now_ns: out is NULL");
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        // SAFETY: non-NULL, writable.
        unsafe { out.write(now) };
        DPLOG_OK
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_error_code_with_its_message() {
        let r = guard(|| panic!("boom {}", 42));
        assert_eq!(r, DPLOG_ERR_PANIC);
        let mut buf = [0 as c_char; 128];
        let mut len = 0usize;
        // SAFETY: buf is 128 bytes, len is writable.
        assert_eq!(
            unsafe { dplog_last_error(buf.as_mut_ptr(), buf.len(), &mut len) },
            DPLOG_OK
        );
        // SAFETY: dplog_last_error NUL-terminates.
        let msg = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
        assert!(msg.contains("boom 42"), "{msg}");
        assert_eq!(len, msg.len());
    }

    #[test]
    fn every_code_has_its_own_message() {
        let mut seen = HashSet::new();
        for code in DPLOG_OK..=DPLOG_ERR_PANIC {
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
