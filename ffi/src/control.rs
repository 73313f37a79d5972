//! Calls on a live logger's sink and its end: `dplog_flush`,
//! `dplog_reopen` and `dplog_close` (drain, final counters, tombstone).

use std::sync::atomic::Ordering;

use dplog::LoggerError;

use crate::handle::{dplog_t, logger, State};
use crate::result::{
    dplog_result, fail, guard, logger_error, write_out, DPLOG_ERR_CLOSED, DPLOG_ERR_IO,
    DPLOG_ERR_RING_STOPPED, DPLOG_ERR_UNDELIVERED, DPLOG_OK,
};
use crate::stats::{dplog_stats, fill_stats, sum_stats};
use crate::tombstone::{bury, lock, MAGIC_DEAD};
use crate::window::{dplog_log_window, window_end};

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
            State::Started(r) => {
                // Every consumer flushes; the first error is reported.
                let res: Vec<_> = r.loggers.iter().map(|lg| lg.flush()).collect();
                match res.into_iter().find_map(Result::err) {
                    None => DPLOG_OK,
                    Some(e) => logger_error(e),
                }
            }
            State::Opened(p) => match p.sink.as_mut().map(|s| s.flush()) {
                Some(Err(e)) => fail(DPLOG_ERR_IO, e.to_string()),
                _ => DPLOG_OK,
            },
            State::Closed => fail(DPLOG_ERR_CLOSED, "dplog handle is closed"),
        }
    })
}

/// Asks the sink to reopen its destination, between two batches, and waits
/// for it. For a file sink (logrotate): after `mv dplog.log dplog.log.1`,
/// call this and new batches go to a new `dplog.log`, never to the renamed
/// file; what was batched before the call goes to the old file. Sinks
/// without a destination to reopen return `DPLOG_OK`.
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_CLOSED`, `DPLOG_ERR_IO` (the path
/// cannot be opened), `DPLOG_ERR_CONSUMER_GONE`. Thread-safety: any thread.
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
                let res: Vec<_> = r.loggers.iter().map(|lg| lg.reopen()).collect();
                match res.into_iter().find_map(Result::err) {
                    None => DPLOG_OK,
                    Some(LoggerError::Io(e)) => fail(DPLOG_ERR_IO, format!("reopen: {e}")),
                    Some(e) => logger_error(e),
                }
            }
            State::Opened(p) => match p.sink.as_mut().map(|s| s.reopen()) {
                Some(Err(e)) => fail(DPLOG_ERR_IO, format!("reopen: {e}")),
                _ => DPLOG_OK,
            },
            State::Closed => fail(DPLOG_ERR_CLOSED, "dplog handle is closed"),
        }
    })
}

/// Closes the logger: drains every ring, writes the last batch, flushes
/// and closes the sink (within `[ring] shutdown_timeout_ms`), joins the
/// consumer thread, and stores the final counters in `*final_stats` (if
/// not NULL) — written whenever the handle was live, even on
/// `DPLOG_ERR_UNDELIVERED` or `DPLOG_ERR_IO`. The latency fields cover
/// every sampled record, those written by the final drain included. The handle is released in
/// every case except `DPLOG_ERR_NULL` and `DPLOG_ERR_CLOSED`.
///
/// Free producers first (or at least stop using them): a record logged
/// concurrently with the close may stay in its ring and is reported in
/// `in_flight`, or, when it lands after the final count, is not counted
/// at all (its `dplog_log` may still have returned `DPLOG_OK`). Once the
/// close has begun, every producer's inline window is emptied, and
/// producers return `DPLOG_ERR_CLOSED`; they must still be freed with
/// `dplog_producer_free`.
/// With `[ring] publish_every` above 1, records a live producer logged
/// since its last publication are not seen by the consumer or counted
/// unless `dplog_producer_flush` or `dplog_producer_free` comes first.
///
/// Returns `DPLOG_OK` when every produced record was written;
/// `DPLOG_ERR_RING_STOPPED` when the consumer stopped one or more rings
/// after a protocol violation (`rings_stopped`, `dropped_stopped`; the
/// message names the ring ids); `DPLOG_ERR_UNDELIVERED` when some records
/// were not written (dropped for any reason, or
/// left in flight; the stats say which); `DPLOG_ERR_IO` when the sink's
/// final flush/close failed; `DPLOG_ERR_CONSUMER_GONE` if the consumer
/// died. `dplog_close(NULL, ...)` returns `DPLOG_ERR_NULL`; a second close
/// of the same handle is a no-op returning `DPLOG_ERR_CLOSED`.
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
        // SeqCst (a Release store for the Relaxed check in `producer()`):
        // ordered with open_window's SeqCst store of `end` then load of
        // `closed`, so no window opens unseen by the loop below.
        l.shared.closed.store(true, Ordering::SeqCst);
        for &w in lock(&l.shared.windows).values() {
            // SeqCst: see above. The inline dplog_log of every producer
            // now finds its window empty and calls into the library,
            // which returns DPLOG_ERR_CLOSED.
            // SAFETY: producers are never deallocated; a freed one
            // removed its entry under this lock.
            unsafe { window_end(w as *mut dplog_log_window) }
                .store(core::ptr::null_mut(), Ordering::SeqCst);
        }
        // Release: partner of the Relaxed magic check (same mutex order).
        l.magic.store(MAGIC_DEAD, Ordering::Release);
        // C ring ids of the rings the consumers stopped.
        let mut stopped: Vec<u32> = Vec::new();
        let (v, err) = match prev {
            State::Closed => return fail(DPLOG_ERR_CLOSED, "dplog handle is already closed"),
            State::Opened(mut p) => {
                let e = p.sink.as_mut().and_then(|s| s.close().err());
                (dplog_stats::default(), e.map(|e| LoggerError::Io(e.into())))
            }
            State::Started(r) => {
                // The snapshot source outlives the logger, so the latency
                // percentiles include the records written by the drain.
                let mut all = Vec::with_capacity(r.loggers.len());
                let mut first_err = None;
                for (i, lg) in r.loggers.into_iter().enumerate() {
                    let (res, snap) = lg.shutdown();
                    let latency = snap.latency;
                    let names = lock(&l.shared.ring_names);
                    for ring in snap.rings.iter().filter(|r| r.stopped) {
                        stopped.push(names.get(&(i, ring.id)).copied().unwrap_or(ring.id));
                    }
                    match res {
                        Ok(s) => all.push(fill_stats(&s, &latency)),
                        Err((s, e)) => {
                            all.push(fill_stats(&s, &latency));
                            first_err.get_or_insert(e);
                        }
                    }
                }
                (sum_stats(&all), first_err)
            }
        };
        drop(st);
        if let Some(m) = lock(&l.shared.metrics).take() {
            m.stop();
        }
        bury(h as usize);
        // SAFETY: NULL or writable (caller contract).
        unsafe { write_out(final_stats, v) };
        if let Some(e) = err {
            return logger_error(e);
        }
        let dropped = v.dropped_full
            + v.dropped_degraded
            + v.dropped_disconnected
            + v.dropped_stopped
            + v.dropped_sink
            + v.dropped_shutdown;
        if !stopped.is_empty() {
            stopped.sort_unstable();
            return fail(
                DPLOG_ERR_RING_STOPPED,
                format!(
                    "ring(s) {stopped:?} stopped after a protocol violation (a producer index above the capacity or moving backwards: is a producer used by two threads?); {} record(s) lost there, {} written",
                    v.dropped_stopped, v.written_records
                ),
            );
        }
        if dropped + v.in_flight > 0 {
            return fail(
                DPLOG_ERR_UNDELIVERED,
                format!(
                    "{} record(s) not delivered: {} dropped (full {}, degraded {}, consumer gone {}, ring stopped {}, sink {}, shutdown timeout {}), {} in flight",
                    dropped + v.in_flight,
                    dropped,
                    v.dropped_full,
                    v.dropped_degraded,
                    v.dropped_disconnected,
                    v.dropped_stopped,
                    v.dropped_sink,
                    v.dropped_shutdown,
                    v.in_flight
                ),
            );
        }
        DPLOG_OK
    })
}
