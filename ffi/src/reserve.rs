//! Zero-copy reservations: `dplog_reserve` (ring slots, or a staging area
//! when it cannot be zero-copy), `dplog_reserve_refill` behind the header's
//! inline `dplog_reserve`, and `dplog_commit`; also `dplog_producer_flush`,
//! the other call that publishes a producer's records, which the header
//! lists between `dplog_reserve` and `dplog_commit` (cbindgen keeps the
//! order of the source).

use std::ffi::c_void;
use std::sync::atomic::Ordering;

use crate::log::{not_enqueued, push_chunked};
use crate::producer::{
    dplog_producer_t, guard_producer, live_taken, open_window, producer, ProducerState,
    Reservation, Staging,
};
use crate::result::{
    dplog_result, fail, write_out, DPLOG_ERR_CLOSED, DPLOG_ERR_CONSUMER_GONE,
    DPLOG_ERR_INVALID_ARG, DPLOG_ERR_NULL, DPLOG_ERR_STATE, DPLOG_OK,
};
use crate::types::{DPLOG_RECORD_MAX_SIZE, DPLOG_RESERVE_MAX};

/// `dplog_reserve` for the header's inline `dplog_reserve`: called when
/// its window is used up or empty, or the call is not one it handles
/// itself (`n` other than 1, a schema id the window's `sizes` do not
/// serve, NULL arguments). Takes the window back and, for one record
/// of a served schema with no reservation pending, opens a new window and
/// reserves its first slot inline (so the inline `dplog_commit` can
/// publish it); otherwise behaves exactly as the exported `dplog_reserve`.
///
/// Errors: as `dplog_reserve`. Thread-safety: as `dplog_reserve`.
///
/// # Safety
/// As `dplog_reserve`.
#[no_mangle]
pub unsafe extern "C" fn dplog_reserve_refill(
    p: *mut dplog_producer_t,
    schema_id: u16,
    n: usize,
    slots: *mut *mut c_void,
) -> dplog_result {
    guard_producer(p, || {
        // SAFETY: caller contract on p (the window is given back first).
        if let Some((obj, st)) = unsafe { live_taken(p) } {
            if n == 1
                && !slots.is_null()
                && matches!(st.reservation, Reservation::None)
                && !st.shared.closed.load(Ordering::Relaxed)
            {
                // SAFETY: single-thread rule; the window is empty.
                unsafe { open_window(obj, st, schema_id) };
                let w = obj.window.get();
                // The record size (at most 128) rides in the reservation.
                let size = st.sizes.get(schema_id) as u32;
                // SAFETY: single-thread rule; a non-NULL cursor is the
                // first of the window's free slots (open_window); slots is
                // non-NULL and writable (caller contract).
                unsafe {
                    let slot = (*w).cursor;
                    if !slot.is_null() && size != 0 {
                        slot.write_bytes(0, (*w).slot_bytes as usize);
                        (*w).reservation = (u32::from(schema_id) << 16) | size;
                        slots.write(slot.cast());
                        return DPLOG_OK;
                    }
                }
            }
        }
        // SAFETY: caller contract.
        unsafe { dplog_reserve(p, schema_id, n, slots) }
    })
}

/// Reserves `n` (1..=`DPLOG_RESERVE_MAX`) records of schema `schema_id`
/// and stores in `*slots` a pointer to `n` ring slots, each record's bytes
/// zeroed (the header's inline reserve of one record zeroes at least those;
/// the rest of a slot is never read), to fill in place, then publish with
/// `dplog_commit`. The slots are the logger's
/// slot size (`dplog_slot_bytes`: `[ring] slot_bytes`, 64 by default)
/// apart: record `i` starts at `(char *)*slots + i * slot_bytes` whatever
/// the schema's size (with 64-byte slots, for NAT44 that is simply
/// `struct dplog_nat44_session[n]`); only its first record-size bytes are
/// published (the rest of the slot is zeroed at commit).
///
/// Zero-copy: when the ring has `n` free slots that do not wrap past the
/// end of its slot array, `*slots` points into the ring itself and
/// `dplog_commit` only writes the headers and publishes the tail index.
/// Under `backpressure = "block"` it waits (spin, then yield) for the
/// slots. Otherwise — the reservation would wrap (at most once per lap
/// of the ring), the ring is full under `"drop"`, or the policy is
/// `"degrade"` (which judges each record's priority) — `*slots` points
/// into a per-producer staging area that `dplog_commit` copies into the
/// ring under the policy, as `dplog_log_burst` does. Both look the same to
/// the caller.
///
/// Pointer: aligned to the slot size (at least 32); valid for `n *
/// slot_bytes` bytes
/// until the next `dplog_commit` or `dplog_producer_free` on this
/// producer; it must not be used after either. While a reservation is
/// pending, `dplog_log`, `dplog_log_burst` and `dplog_reserve` on this
/// producer return `DPLOG_ERR_STATE`.
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_UNKNOWN_SCHEMA`,
/// `DPLOG_ERR_INVALID_ARG` (`n` is 0 or above `DPLOG_RESERVE_MAX`),
/// `DPLOG_ERR_STATE` (a reservation is pending), `DPLOG_ERR_CLOSED`,
/// `DPLOG_ERR_CONSUMER_GONE` (waiting for room under `"block"` while the
/// consumer thread has died), `DPLOG_ERR_RING_STOPPED` (the consumer
/// stopped the ring after a protocol violation: returned at once, the `n`
/// records counted in `dropped_stopped`). `*slots` is written only on
/// success.
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
    guard_producer(p, || {
        // SAFETY: caller contract on p.
        let st = match unsafe { producer(p) } {
            Ok(s) => s,
            Err(e) => return e,
        };
        let size = st.sizes.get(schema_id);
        if size == 0 {
            return st.sizes.unknown(schema_id);
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
        if !matches!(st.reservation, Reservation::None) {
            return fail(DPLOG_ERR_STATE, "dplog_reserve: a reservation is pending");
        }
        let policy = st.prod.policy();
        let mut ring_slots = None;
        if policy != dplog::Backpressure::Degrade && n <= st.prod.contiguous_slots() {
            let mut spins = 0u32;
            loop {
                if let Some(ptr) = st.prod.reserve_raw(n) {
                    ring_slots = Some(ptr);
                    break;
                }
                // No room: a stopped ring (whose producer finds no room
                // from the first call after the stop) refuses the
                // records at once, under every policy.
                if st.prod.is_stopped() {
                    return stopped(st, n);
                }
                if policy == dplog::Backpressure::Drop {
                    break; // full: staged, and commit drops what does not fit
                }
                if st.prod.is_disconnected() {
                    return fail(
                        DPLOG_ERR_CONSUMER_GONE,
                        "dplog_reserve: the consumer thread has stopped",
                    );
                }
                // Relaxed: a hint, as in `producer()`; the partner is the
                // Release store in dplog_close (whose drain frees room).
                if st.shared.closed.load(Ordering::Relaxed) {
                    return fail(DPLOG_ERR_CLOSED, "the producer's logger is closed");
                }
                spins += 1;
                if spins < 1024 {
                    core::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
        let stride = st.prod.slot_bytes();
        let base: *mut u8 = match ring_slots {
            Some(ptr) => {
                // SAFETY: reserve_raw handed out n free, contiguous slots of
                // `stride` bytes that only this producer may write until it
                // commits; zeroing makes them initialised records-to-be.
                unsafe { core::ptr::write_bytes(ptr, 0, n * stride) };
                st.reservation = Reservation::Ring { slots: ptr, n };
                ptr
            }
            None => {
                // Staged records would only be refused at commit.
                if st.prod.is_stopped() {
                    return stopped(st, n);
                }
                let staging = st.staging.get_or_insert_with(|| {
                    Box::new(Staging([0; DPLOG_RECORD_MAX_SIZE * DPLOG_RESERVE_MAX]))
                });
                // Every byte the caller may write (n slots of `stride`).
                staging.0[..n * stride].fill(0);
                st.reservation = Reservation::Staging { n };
                staging.0.as_mut_ptr()
            }
        };
        st.reserved_schema = schema_id;
        st.reserved_size = size;
        st.fast_path = false;
        // SAFETY: slots is non-NULL (checked) and writable (contract).
        unsafe { slots.write(base.cast()) };
        DPLOG_OK
    })
}

/// `dplog_reserve` of `n` records on a stopped ring: they are dropped and
/// counted in `dropped_stopped` (the caller's records, as a refused
/// `dplog_log`'s), and the call returns `DPLOG_ERR_RING_STOPPED`.
#[cold]
fn stopped(st: &mut ProducerState, n: usize) -> dplog_result {
    st.prod.count_stopped(n as u64);
    not_enqueued(st, n)
}

/// Makes every record this producer has logged visible to the consumer.
///
/// Needed only when the configuration sets `[ring] publish_every` above 1:
/// the producer then publishes its ring index once per that many records
/// (one shared-memory store per batch instead of per record), and records
/// logged since the last publication wait until the next one, a full ring,
/// this call or `dplog_producer_free`. Call it once per iteration of the
/// forwarding loop, after the rx burst is processed, as DPDK code calls
/// `rte_eth_tx_buffer_flush`. With the default (`publish_every = 1`) it
/// does nothing. A pending reservation is not affected (it is published by
/// `dplog_commit`).
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_CLOSED` (freed producer or closed
/// handle).
///
/// Thread-safety: one thread at a time per producer, like `dplog_log`.
///
/// # Safety
/// `p` is NULL or returned by `dplog_producer_new`.
#[no_mangle]
pub unsafe extern "C" fn dplog_producer_flush(p: *mut dplog_producer_t) -> dplog_result {
    guard_producer(p, || {
        // SAFETY: caller contract on p.
        let st = match unsafe { producer(p) } {
            Ok(s) => s,
            Err(e) => return e,
        };
        st.prod.flush();
        DPLOG_OK
    })
}

/// Publishes the first `n` records of the pending reservation (their
/// headers are filled by dplog) and ends it; the other reserved records
/// are discarded, so `n == 0` cancels. `*n_enqueued` (if not NULL)
/// receives how many were enqueued: `n` for a zero-copy reservation (its
/// slots were the ring's); for a staged one, backpressure as
/// `dplog_log_burst`.
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_STATE` (no reservation),
/// `DPLOG_ERR_INVALID_ARG` (`n` above the reserved count; the reservation
/// stays pending), `DPLOG_ERR_FULL`, `DPLOG_ERR_CLOSED`,
/// `DPLOG_ERR_CONSUMER_GONE`, `DPLOG_ERR_RING_STOPPED` (a staged
/// reservation of a ring stopped since; its records are counted in
/// `dropped_stopped`).
///
/// Thread-safety: one thread at a time per producer.
///
/// # Safety
/// `n_enqueued` is NULL or writable; the reserved slots were written only
/// within their `n * slot_bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn dplog_commit(
    p: *mut dplog_producer_t,
    n: usize,
    n_enqueued: *mut usize,
) -> dplog_result {
    guard_producer(p, || {
        // SAFETY: caller contract on p.
        let st = match unsafe { producer(p) } {
            Ok(s) => s,
            Err(e) => return e,
        };
        let reserved = match st.reservation {
            Reservation::None => return fail(DPLOG_ERR_STATE, "dplog_commit: nothing reserved"),
            Reservation::Ring { n, .. } | Reservation::Staging { n } => n,
        };
        if n > reserved {
            return fail(
                DPLOG_ERR_INVALID_ARG,
                format!("dplog_commit: n = {n} but {reserved} reserved"),
            );
        }
        let (size, id) = (st.reserved_size, st.reserved_schema);
        let reservation = core::mem::replace(&mut st.reservation, Reservation::None);
        st.fast_path = st.fast_path_policy;
        let stride = st.prod.slot_bytes();
        let done = match reservation {
            Reservation::Ring { slots, .. } => {
                let header = (size as u16, id);
                for i in 0..n {
                    // SAFETY: slot i < n <= reserved lies in the reservation
                    // (`stride` initialised bytes, zeroed at reserve,
                    // written by C since); no other reference to it.
                    let bytes =
                        unsafe { core::slice::from_raw_parts_mut(slots.add(i * stride), stride) };
                    bytes[0..2].copy_from_slice(&header.0.to_ne_bytes());
                    bytes[2..4].copy_from_slice(&header.1.to_ne_bytes());
                    bytes[4..8].fill(0);
                    // A record's bytes past its length are zero, whatever C
                    // wrote there (the formatters never read them).
                    bytes[size..].fill(0);
                }
                // SAFETY: reserve_raw(reserved) succeeded for these slots,
                // nothing was pushed or reserved since (fast_path was off and
                // dplog_log/log_burst/reserve refuse a pending reservation),
                // and slots 0..n now hold valid records.
                unsafe { st.prod.commit_raw(n) };
                n
            }
            Reservation::Staging { .. } => {
                let Some(staging) = st.staging.take() else {
                    return fail(DPLOG_ERR_STATE, "dplog_commit: nothing reserved");
                };
                // SAFETY: the staging area holds n records `stride` bytes
                // apart; size is the schema's (in the size table, so it
                // fits the slot: size <= stride).
                let done = unsafe { push_chunked(st, staging.0.as_ptr(), stride, size, n, id) };
                st.staging = Some(staging);
                done
            }
            Reservation::None => 0,
        };
        // SAFETY: NULL or writable (caller contract).
        unsafe { write_out(n_enqueued, done) };
        if done == n {
            DPLOG_OK
        } else {
            not_enqueued(st, n - done)
        }
    })
}
