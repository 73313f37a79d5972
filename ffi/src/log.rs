//! Logging records: `dplog_log` (its fast path straight into the ring
//! slot, and the path with every check), `dplog_log_refill` behind the
//! header's inline `dplog_log`, `dplog_log_burst`, and the record copying
//! and error reporting that reserve/commit share.

use std::ffi::c_void;
use std::sync::atomic::Ordering;

use dplog::{LogProducer, Slot, Slot128, Slot32, Slot64};

use crate::producer::{
    dplog_producer_t, guard_producer, live_taken, open_window, producer, ProducerState, Reservation,
};
use crate::result::{
    dplog_result, fail, write_out, DPLOG_ERR_BAD_LENGTH, DPLOG_ERR_CLOSED, DPLOG_ERR_CONSUMER_GONE,
    DPLOG_ERR_FULL, DPLOG_ERR_INVALID_ARG, DPLOG_ERR_NULL, DPLOG_ERR_RING_STOPPED, DPLOG_ERR_STATE,
    DPLOG_ERR_TIMEOUT, DPLOG_OK,
};
use crate::slots::AnyProducer;
use crate::tombstone::MAGIC_LIVE;

/// Copies the `len`-byte record at `rec` into the slot at `dst` with its
/// header set to (`len`, `schema_id`, 0, 0), word by word (the header
/// built in a register, written last; a length that is not a multiple of
/// 8 ends with the record's last 8 bytes, overlapping the word before);
/// the slot's bytes past `len` are left as they are (the consumer reads
/// `len` bytes).
///
/// # Safety
/// `8 <= len`; `rec` is valid for `len` bytes (any alignment); `dst` for
/// `len` bytes, 8-byte aligned, and not overlapping `rec`.
#[inline(always)]
unsafe fn copy_into_slot(rec: *const u8, dst: *mut u8, len: usize, schema_id: u16) {
    for i in 1..len / 8 {
        // SAFETY: word i is bytes 8i..8i+8 of both areas, inside `len`.
        unsafe {
            let w = core::ptr::read_unaligned(rec.add(8 * i).cast::<u64>());
            dst.add(8 * i).cast::<u64>().write(w);
        }
    }
    if len % 8 != 0 {
        // SAFETY: bytes len-8..len of both areas (len >= 8), unaligned.
        unsafe {
            let w = core::ptr::read_unaligned(rec.add(len - 8).cast::<u64>());
            core::ptr::write_unaligned(dst.add(len - 8).cast::<u64>(), w);
        }
    }
    let header = (len as u64 & 0xffff) | (u64::from(schema_id) << 16);
    let header = if cfg!(target_endian = "little") {
        header
    } else {
        header.swap_bytes()
    };
    // SAFETY: dst is valid and aligned for its first word (contract).
    unsafe { dst.cast::<u64>().write(header) };
}

/// How far ahead of the slot just written `dplog_log` prefetches for
/// writing, as the ring's own `try_push` (dplog_core::ring).
const PREFETCH_AHEAD_BYTES: usize = 2048;

/// Hints the CPU to fetch the line at `p` for writing (`prefetchw` on
/// x86-64, nothing elsewhere), so a later slot write does not wait for the
/// consumer's core to give the line up. `p` may point anywhere.
#[inline(always)]
fn prefetch_write(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetchw` is a hint: it never faults (even on an unmapped
    // address) and changes no memory or register.
    unsafe {
        core::arch::asm!(
            "prefetchw [{p}]",
            p = in(reg) p,
            options(nostack, preserves_flags, readonly)
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

const _: () = {
    assert!(core::mem::align_of::<Slot32>() % 8 == 0);
    assert!(core::mem::align_of::<Slot64>() % 8 == 0);
    assert!(core::mem::align_of::<Slot128>() % 8 == 0);
};

/// The record size of `schema_id`, or the error for it and `len`.
#[inline(always)]
fn check_schema(st: &ProducerState, schema_id: u16, len: usize) -> Result<usize, dplog_result> {
    let size = st.sizes.get(schema_id);
    if size == 0 {
        return Err(st.sizes.unknown(schema_id));
    }
    if len != size {
        return Err(fail(
            DPLOG_ERR_BAD_LENGTH,
            format!("record length {len}, schema {schema_id} records are {size} bytes"),
        ));
    }
    Ok(size)
}

#[cold]
#[inline(never)]
fn reservation_pending(what: &str) -> dplog_result {
    fail(
        DPLOG_ERR_STATE,
        format!("{what}: a dplog_reserve is pending; dplog_commit it first"),
    )
}

/// The message of [`DPLOG_ERR_TIMEOUT`]: the ring, the timeout and who
/// serves the ring.
#[cold]
fn timed_out_message(st: &ProducerState, n: usize) -> String {
    let path = st.prod.ring_path().map(|p| p.display().to_string());
    let path = path.unwrap_or_default();
    let who = match st.prod.consumer_state() {
        Some((true, _)) => {
            "the dplogd attached to it freed no slot (stopped, or waiting on its sinks)".to_string()
        }
        Some((false, Some(why))) => format!("no consumer attached: {why}"),
        _ => format!(
            "no consumer attached: no dplogd serves {} (start dplogd --rings with that directory)",
            std::path::Path::new(&path)
                .parent()
                .map_or(String::new(), |d| d.display().to_string())
        ),
    };
    format!(
        "ring {path}: full for the block timeout and {who}; {n} record(s) dropped and counted in dropped_disconnected"
    )
}

#[cold]
#[inline(never)]
pub(crate) fn not_enqueued(st: &ProducerState, n: usize) -> dplog_result {
    let timed_out = st.prod.take_timed_out();
    if let (true, Some(path)) = (st.prod.is_stopped(), st.prod.ring_path()) {
        fail(
            DPLOG_ERR_RING_STOPPED,
            format!(
                "ring {}: dplogd quarantined this ring (it found a slot or index in the ring file it cannot trust; its stderr and RING_QUARANTINED line say which); {n} record(s) dropped; free the producer and attach a new ring",
                path.display()
            ),
        )
    } else if timed_out {
        fail(DPLOG_ERR_TIMEOUT, timed_out_message(st, n))
    } else if st.prod.is_stopped() {
        fail(
            DPLOG_ERR_RING_STOPPED,
            format!(
                "ring {}: the consumer stopped reading this ring after its producer published an index that breaks the ring protocol (is the producer used by two threads?); {n} record(s) dropped",
                st.ring_id
            ),
        )
    } else if st.prod.is_disconnected() {
        fail(
            DPLOG_ERR_CONSUMER_GONE,
            format!(
                "ring {}: the consumer thread has stopped; {n} record(s) dropped",
                st.ring_id
            ),
        )
    } else if st.drop_policy {
        fail(
            DPLOG_ERR_FULL,
            format!(
                "ring {}: {n} record(s) dropped (ring full, or below the degrade priority)",
                st.ring_id
            ),
        )
    } else {
        fail(DPLOG_ERR_CLOSED, "the consumer is gone; record(s) dropped")
    }
}

/// Copies one record of schema `schema_id` (`len` bytes at `rec`, any
/// alignment) into the producer's ring. Its header is filled by dplog.
/// Under `backpressure = "block"` it waits (spin, then yield) while the
/// ring is full (a ring of `dplog_attach`: at most its block timeout,
/// `dplog_producer_set_block_timeout`); under `"drop"` a full ring drops the record, counts it and
/// returns `DPLOG_ERR_FULL` (under `"degrade"` also a record below the
/// priority when the ring is above its high watermark).
///
/// Schemas: the ids from `dplog_schema_register`, and, on a handle that
/// asked for them (`dplog_register_nat_schemas` or `[schemas] nat =
/// true`), `DPLOG_SCHEMA_NAT44_SESSION` (`struct dplog_nat44_session`, 64
/// bytes), `DPLOG_SCHEMA_NAT_PORT_BLOCK` (40), `..._ADDRESSES_EXHAUSTED`
/// (24), `..._PORTS_EXHAUSTED` (24), `..._QUOTA_EXCEEDED` (32). A logger
/// of 32-byte slots (`[ring] slot_bytes = 32`) has only the NAT schemas
/// of at most 32 bytes: a NAT44 session or port block record there is
/// `DPLOG_ERR_UNKNOWN_SCHEMA`.
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_UNKNOWN_SCHEMA` (an id the handle
/// does not serve: not registered, a NAT schema on a handle that did not
/// ask for them — `dplog_last_error` says how to ask — or one that does
/// not fit the logger's slot),
/// `DPLOG_ERR_BAD_LENGTH` (`len` is not the schema's record size),
/// `DPLOG_ERR_FULL`, `DPLOG_ERR_CLOSED` (producer freed or logger closed),
/// `DPLOG_ERR_CONSUMER_GONE` (the ring is full and the consumer thread has
/// died; the record is dropped and counted), `DPLOG_ERR_RING_STOPPED` (the
/// consumer stopped this ring after a protocol violation: every call from
/// then on returns it at once, the record dropped and counted in
/// `dropped_stopped`; for a ring of `dplog_attach`: dplogd quarantined
/// it), `DPLOG_ERR_TIMEOUT` (a ring of `dplog_attach` full under `"block"`
/// for its block timeout, `dplog_producer_set_block_timeout`: the record
/// dropped and counted in `dropped_disconnected`), `DPLOG_ERR_STATE` (a
/// `dplog_reserve` is pending on this producer), `DPLOG_ERR_INVALID_ARG`
/// (not a producer). On an
/// argument error nothing is enqueued or counted.
///
/// Cost: a few nanoseconds, no allocation, no lock, no system call unless
/// the ring is full under "block". From C, the common case (a record of a
/// served schema in a logger of any slot size, `block` or `drop`) is
/// compiled inline by the `dplog_log` macro at the end of this header
/// (see `struct dplog_log_window`); this
/// function is what `DPLOG_NO_INLINE`, `(dplog_log)(...)` and other
/// languages call. Thread-safety: one thread at a time per producer;
/// different producers in parallel. Two threads logging on one producer at
/// once lose records without trace and can make its ring index move
/// backwards; the consumer then stops the ring (`DPLOG_ERR_RING_STOPPED`)
/// rather than read stale slots.
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
    // SAFETY: caller contract on p and rec.
    guard_producer(p, || unsafe { log_one(p, schema_id, rec, len) })
}

/// The body of `dplog_log`: the fast path, else every check.
///
/// # Safety
/// As `dplog_log`.
#[inline(always)]
unsafe fn log_one(
    p: *mut dplog_producer_t,
    schema_id: u16,
    rec: *const c_void,
    len: usize,
) -> dplog_result {
    // SAFETY: caller contract on p and rec.
    if unsafe { log_fast(p, schema_id, rec, len) } {
        return DPLOG_OK;
    }
    // SAFETY: caller contract on p and rec.
    unsafe { log_slow(p, schema_id, rec, len) }
}

/// `dplog_log` for the header's inline `dplog_log`: called when its
/// window is used up or empty, or the record is not one it logs itself
/// (a `len` that is not the record size of a schema the window's `sizes`
/// serve). Takes the window back, logs the record exactly as the exported
/// `dplog_log` (same checks, errors and counting), and, when that
/// succeeded, opens the next window (see `struct dplog_log_window`).
///
/// C code calls `dplog_log`; with `DPLOG_NO_INLINE` defined (or from a
/// language that cannot use the header's inline code) `dplog_log` is the
/// exported function, which never opens a window.
///
/// Errors: as `dplog_log`. Thread-safety: as `dplog_log`.
///
/// # Safety
/// As `dplog_log`.
#[no_mangle]
pub unsafe extern "C" fn dplog_log_refill(
    p: *mut dplog_producer_t,
    schema_id: u16,
    rec: *const c_void,
    len: usize,
) -> dplog_result {
    guard_producer(p, || {
        // SAFETY: caller contract on p (the window is given back first).
        let _ = unsafe { live_taken(p) };
        // SAFETY: caller contract on p and rec; the window is empty.
        let r = unsafe { log_one(p, schema_id, rec, len) };
        if r == DPLOG_OK {
            // SAFETY: as above; r == OK means p is a live producer.
            if let Some((obj, st)) = unsafe { live_taken(p) } {
                // SAFETY: single-thread rule; the window is empty.
                unsafe { open_window(obj, st, schema_id) };
            }
        }
        r
    })
}

/// The whole of `dplog_log` in the common case — a live producer of an
/// in-process ring (any slot size), a record of a schema the handle
/// serves, `block` or `drop`, no reservation, a ring with room: the
/// record goes from the caller's memory straight into its ring slot
/// (8-byte loads and stores, the header built in a register, no trip
/// through a slot value on the stack). Returns false, having changed
/// nothing, in every other case, which `log_slow` then handles with the
/// full checks and their error codes. Kept free of anything that needs a
/// stack frame.
///
/// # Safety
/// As `dplog_log`.
#[inline(always)]
unsafe fn log_fast(
    p: *mut dplog_producer_t,
    schema_id: u16,
    rec: *const c_void,
    len: usize,
) -> bool {
    if p.is_null() || rec.is_null() {
        return false;
    }
    // SAFETY: non-NULL and returned by dplog_producer_new (caller
    // contract); producers are never deallocated (see TOMBSTONES).
    let obj = unsafe { &*p };
    // Relaxed: as `check_magic` (partner: the Release store in free).
    if obj.magic.load(Ordering::Relaxed) != MAGIC_LIVE {
        return false;
    }
    // An open inline window is taken back by log_slow first.
    // SAFETY: `cursor` is written only by this thread (single-thread rule).
    if !unsafe { (*obj.window.get()).cursor }.is_null() {
        return false;
    }
    // SAFETY: one thread at a time per producer (documented contract), so
    // this is the only reference to its state.
    let Some(st) = (unsafe { &mut *obj.inner.get() }) else {
        return false;
    };
    // fast_path: `block` or `drop` and no reservation pending. Relaxed
    // `closed`: a hint, as in `producer()` (partner: the Release store in
    // dplog_close). The size table holds the served schemas only (0 for
    // any other id), each at most the slot size.
    if !st.fast_path || st.shared.closed.load(Ordering::Relaxed) || st.sizes.get(schema_id) != len {
        return false;
    }
    // SAFETY: rec is valid for len bytes (contract), len the record size
    // of a served schema.
    unsafe {
        // The default 64-byte slots inline, the others in a function of
        // their own: one compare, where a `match` compiles to a jump table
        // (an indirect jump on every call).
        if let AnyProducer::S64(prod) = &mut st.prod {
            push_fast::<Slot64>(prod, rec.cast(), len, schema_id)
        } else {
            push_fast_other(&mut st.prod, rec.cast(), len, schema_id)
        }
    }
}

/// `log_fast`'s push on a producer of other than 64-byte in-process slots.
///
/// # Safety
/// `rec` is valid for `len` bytes.
#[inline(never)]
unsafe fn push_fast_other(
    prod: &mut AnyProducer,
    rec: *const u8,
    len: usize,
    schema_id: u16,
) -> bool {
    // SAFETY: caller contract on rec.
    unsafe {
        match prod {
            AnyProducer::S32(prod) => push_fast::<Slot32>(prod, rec, len, schema_id),
            AnyProducer::S128(prod) => push_fast::<Slot128>(prod, rec, len, schema_id),
            // Shared-memory rings take the checked path; S64 is log_fast's.
            AnyProducer::S64(_)
            | AnyProducer::M32(_)
            | AnyProducer::M64(_)
            | AnyProducer::M128(_) => false,
        }
    }
}

/// `log_fast` on a ring of `S` slots: one slot reserved, the record
/// copied in, published; false (nothing changed) if `len` is not 8 to
/// `S::BYTES` or the ring has no free slot.
///
/// # Safety
/// `rec` is valid for `len` bytes.
#[inline(always)]
unsafe fn push_fast<S: Slot>(
    prod: &mut LogProducer<S>,
    rec: *const u8,
    len: usize,
    schema_id: u16,
) -> bool {
    if !(8..=S::BYTES).contains(&len) {
        return false;
    }
    let Some(slot) = prod.reserve_raw(1) else {
        return false;
    };
    // SAFETY: rec is valid for len bytes (contract); reserve_raw handed
    // out one free slot of S::BYTES >= len bytes, 8-byte aligned, that only
    // this producer writes until commit_raw publishes it.
    unsafe {
        if len == S::BYTES {
            // A record the size of the slot (the common case): a copy of
            // a constant length, straight-line moves.
            copy_into_slot(rec, slot.as_ptr().cast(), S::BYTES, schema_id);
        } else {
            copy_into_slot(rec, slot.as_ptr().cast(), len, schema_id);
        }
    }
    // SAFETY: the slot of reserve_raw(1) now holds a valid record of
    // `len` bytes; nothing touched the producer in between.
    unsafe { prod.commit_raw(1) };
    prefetch_write(
        slot.as_ptr()
            .cast::<u8>()
            .wrapping_add(PREFETCH_AHEAD_BYTES),
    );
    true
}

/// `dplog_log` with every check and error code, for what `log_fast` left.
///
/// # Safety
/// As `dplog_log`.
#[inline(never)]
unsafe fn log_slow(
    p: *mut dplog_producer_t,
    schema_id: u16,
    rec: *const c_void,
    len: usize,
) -> dplog_result {
    // SAFETY: caller contract on p.
    let st = match unsafe { producer(p) } {
        Ok(s) => s,
        Err(e) => return e,
    };
    if let Err(e) = check_schema(st, schema_id, len) {
        return e;
    }
    if rec.is_null() {
        return fail(DPLOG_ERR_NULL, "dplog_log: rec is NULL");
    }
    // fast_path is off while a reservation holds the slots at the write
    // position.
    if !matches!(st.reservation, Reservation::None) {
        return reservation_pending("dplog_log");
    }
    // SAFETY: rec is non-NULL and valid for len bytes, the schema's size
    // (checked), which fits the slot (the size table holds only schemas
    // that fit it).
    if unsafe { st.prod.log_bytes(rec.cast(), len, schema_id) } {
        DPLOG_OK
    } else {
        not_enqueued(st, 1)
    }
}

/// Copies `n` records of `rec_len` bytes each, packed back to back at
/// `recs`, into the producer's ring with one index publish per chunk of 32.
/// `*n_enqueued` (if not NULL) receives how many were enqueued; under
/// `"drop"`/`"degrade"` the rest were dropped and counted, and the result
/// is `DPLOG_ERR_FULL`. Under `"block"` all are enqueued (or the logger is
/// closed: `DPLOG_ERR_CLOSED`). `n == 0` is `DPLOG_OK` (`recs` may be NULL).
///
/// Errors: as `dplog_log`, and `DPLOG_ERR_INVALID_ARG` when `n * rec_len`
/// overflows `size_t`, exceeds `PTRDIFF_MAX` or runs past the end of the
/// address space from `recs`; on an argument error nothing is enqueued
/// and `*n_enqueued` is not written.
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
    guard_producer(p, || {
        // SAFETY: caller contract on p.
        let st = match unsafe { producer(p) } {
            Ok(s) => s,
            Err(e) => return e,
        };
        if let Err(e) = check_schema(st, schema_id, rec_len) {
            return e;
        }
        if n > 0 && recs.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_log_burst: recs is NULL");
        }
        // n * rec_len bytes must be a real object: no overflow of size_t,
        // at most PTRDIFF_MAX (Rust's pointer-offset limit), and not past
        // the end of the address space.
        let fits = n
            .checked_mul(rec_len)
            .filter(|&total| total <= isize::MAX as usize)
            .and_then(|total| (recs as usize).checked_add(total));
        if fits.is_none() {
            return fail(
                DPLOG_ERR_INVALID_ARG,
                format!(
                    "dplog_log_burst: n = {n} records of {rec_len} bytes overflow the address space"
                ),
            );
        }
        if !matches!(st.reservation, Reservation::None) {
            return reservation_pending("dplog_log_burst");
        }
        // SAFETY: recs is valid for n records of rec_len bytes (contract,
        // bounds checked above); rec_len is the schema's size (checked).
        let done = unsafe { push_chunked(st, recs.cast(), rec_len, rec_len, n, schema_id) };
        // SAFETY: NULL or writable (caller contract).
        unsafe { write_out(n_enqueued, done) };
        if done == n {
            DPLOG_OK
        } else {
            not_enqueued(st, n - done)
        }
    })
}

/// Pushes `n` records of `size` bytes, `stride` bytes apart from `base`,
/// in chunks of 32; returns how many were enqueued.
///
/// # Safety
/// `base` is valid for `n` records `stride` bytes apart; `size` is the
/// record size of a schema in the producer's size table (which fits its
/// slot), `size <= stride`.
pub(crate) unsafe fn push_chunked(
    st: &mut ProducerState,
    base: *const u8,
    stride: usize,
    size: usize,
    n: usize,
    id: u16,
) -> usize {
    // SAFETY: caller contract.
    unsafe { st.prod.push_chunked(base, stride, size, n, id) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast path's slot of a `len`-byte record in `S`, built from an
    /// unaligned source with a garbage header, over a slot full of 0xAA.
    fn fast_slot<S: Slot>(raw: &[u8], len: usize, id: u16) -> S {
        let mut dst = [0xAAAA_AAAA_AAAA_AAAAu64; 16];
        // SAFETY: raw[1..] holds len readable bytes; dst is 128 aligned
        // bytes, at least S::BYTES >= len.
        unsafe { copy_into_slot(raw.as_ptr().add(1), dst.as_mut_ptr().cast(), len, id) };
        // SAFETY: a slot is a header and MaybeUninit bytes; the first len
        // bytes were written above, the rest are 0xAA.
        unsafe { core::ptr::read(dst.as_ptr().cast::<S>()) }
    }

    #[test]
    fn the_fast_path_builds_the_same_slot_as_from_bytes_for_every_size() {
        let mut raw = [0u8; 129];
        for (i, b) in raw.iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        fn check<S: Slot + PartialEq + core::fmt::Debug>(raw: &[u8], len: usize) {
            let fast: S = fast_slot(raw, len, 300);
            let mut want = raw[1..1 + len].to_vec();
            want[0..2].copy_from_slice(&(len as u16).to_ne_bytes());
            want[2..4].copy_from_slice(&300u16.to_ne_bytes());
            want[4..8].fill(0);
            assert_eq!(
                dplog::RecordBytes::record_bytes(&fast),
                &want[..],
                "{len} bytes in {}",
                S::BYTES
            );
            assert_eq!(fast.header().schema_id, 300);
            // The generic path gives the same record.
            // SAFETY: raw[1..] holds len readable bytes.
            let slow: S = unsafe { crate::slots::slot_from_c(raw.as_ptr().add(1), len, 300) };
            assert_eq!(slow, fast, "{len} bytes in {}", S::BYTES);
        }
        for len in [8, 12, 15, 24, 32] {
            check::<Slot32>(&raw, len);
        }
        for len in [9, 40, 44, 64] {
            check::<Slot64>(&raw, len);
        }
        for len in [8, 64, 100, 128] {
            check::<Slot128>(&raw, len);
        }
    }
}
