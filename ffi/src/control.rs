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
/// A handle that only attached rings (`dplog_attach`) reports what their
/// freed producers counted: `produced`, `enqueued`, the drops by reason
/// and `rings`; `written_records` and the sink counters stay 0 (dplogd
/// writes those records and counts them in its own stats).
///
/// Returns `DPLOG_OK` when every produced record was written (attached
/// rings: handed to dplogd's ring);
/// `DPLOG_ERR_RING_STOPPED` when the consumer stopped one or more rings
/// after a protocol violation (`rings_stopped`, `dropped_stopped`; the
/// message names the ring ids); `DPLOG_ERR_UNDELIVERED` when some records
/// were not written (dropped for any reason, or
/// left in flight; the stats say which, the message also names the sink
/// error that cost them, if any); `DPLOG_ERR_IO` when the sink's final
/// flush/close failed and lost no record; `DPLOG_ERR_CONSUMER_GONE` if the consumer
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
                // A handle that attached rings: what their producers
                // counted (dplogd writes and counts the records).
                let a = *lock(&l.shared.attached);
                let dropped = a.dropped_full
                    + a.dropped_degraded
                    + a.dropped_disconnected
                    + a.dropped_stopped;
                let v = dplog_stats {
                    produced: a.enqueued + dropped,
                    enqueued: a.enqueued,
                    dropped_full: a.dropped_full,
                    dropped_degraded: a.dropped_degraded,
                    dropped_disconnected: a.dropped_disconnected,
                    dropped_stopped: a.dropped_stopped,
                    rings: a.rings,
                    ..dplog_stats::default()
                };
                (v, e.map(|e| LoggerError::Io(e.into())))
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
                        // Records left in rings: counted in `in_flight`
                        // and said below, as every undelivered record.
                        Ok(s) | Err((s, LoggerError::Undelivered { .. })) => {
                            all.push(fill_stats(&s, &latency))
                        }
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
        let dropped = v.dropped_full
            + v.dropped_degraded
            + v.dropped_disconnected
            + v.dropped_stopped
            + v.dropped_format
            + v.dropped_sink
            + v.dropped_shutdown;
        // A sink error that cost records (a batch given up on, the final
        // flush) is an undelivery: said below with the error's text. Only
        // an error that lost nothing (a failed close after every record
        // was written) is DPLOG_ERR_IO.
        let sink_error = match err {
            Some(LoggerError::Io(e)) if dropped + v.in_flight > 0 => Some(e.to_string()),
            Some(e) => return logger_error(e),
            None => None,
        };
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
                    "{} record(s) not delivered: {} dropped (full {}, degraded {}, consumer gone {}, ring stopped {}, not formattable {}, sink {}, shutdown timeout {}), {} in flight{}",
                    dropped + v.in_flight,
                    dropped,
                    v.dropped_full,
                    v.dropped_degraded,
                    v.dropped_disconnected,
                    v.dropped_stopped,
                    v.dropped_format,
                    v.dropped_sink,
                    v.dropped_shutdown,
                    v.in_flight,
                    sink_error.map_or(String::new(), |e| format!("; {e}"))
                ),
            );
        }
        DPLOG_OK
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::producer::dplog_producer_free;
    use crate::testutil::{log_dns_query, open, register_dns_query, start_with_producer};
    use std::time::Duration;

    /// Counters of `h` now.
    fn stats(h: *mut dplog_t) -> dplog_stats {
        let mut st = dplog_stats::default();
        // SAFETY: h is live; st is writable.
        assert_eq!(unsafe { crate::dplog_stats(h, &mut st) }, DPLOG_OK);
        st
    }

    /// Records a sink gave up on (UDP syslog to a port where nothing
    /// listens, past `sink_retry_timeout_ms`) make `dplog_close` say
    /// `DPLOG_ERR_UNDELIVERED`, with the sink's error in its message; the
    /// sink recovered before the close, so nothing failed at the close
    /// itself and it is not `DPLOG_ERR_IO`. A user record type, not NAT.
    #[test]
    fn records_a_sink_gave_up_on_are_undelivered_not_an_io_error() {
        let port = dplog_testkit::free_udp_port();
        let text = format!(
            "[ring]\ncapacity = 1024\nsink_retry_timeout_ms = 200\n\
             [format]\ntype = \"rfc5424\"\n\
             [sink]\ntype = \"syslog\"\ntransport = \"udp\"\naddress = \"127.0.0.1:{port}\"\n"
        );
        let h = open(&text);
        let id = register_dns_query(h);
        let p = start_with_producer(h);
        let log = |n: u32| {
            for i in 0..n {
                assert_eq!(log_dns_query(p, id, i), DPLOG_OK);
            }
            // SAFETY: p is live.
            assert_eq!(unsafe { crate::dplog_producer_flush(p) }, DPLOG_OK);
        };
        // Nothing listens: the sink retries, then gives the records up.
        log(20);
        dplog_testkit::wait_until(
            "20 records dropped by the sink",
            Duration::from_secs(60),
            || stats(h).dropped_sink == 20,
        );
        // A receiver now: the sink recovers and writes what follows.
        let rx = std::net::UdpSocket::bind(("127.0.0.1", port)).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        log(5);
        let mut buf = [0u8; 2048];
        let mut got = 0;
        // The in-band report of the 20 dropped records, then the 5.
        while got < 5 {
            let n = rx.recv(&mut buf).expect("a datagram within 60 s");
            if !buf[..n].windows(15).any(|w| w == b"RECORDS_DROPPED") {
                got += 1;
            }
        }
        // SAFETY: p was returned by dplog_producer_new and is freed once.
        assert_eq!(unsafe { dplog_producer_free(p) }, DPLOG_OK);
        let mut st = dplog_stats::default();
        // SAFETY: h is live; st is writable.
        let rc = unsafe { crate::dplog_close(h, &mut st) };
        let mut buf = [0 as core::ffi::c_char; 1024];
        // SAFETY: buf is writable for its length; no length wanted.
        unsafe { crate::dplog_last_error(buf.as_mut_ptr(), buf.len(), core::ptr::null_mut()) };
        // SAFETY: dplog_last_error NUL-terminated buf.
        let msg = unsafe { core::ffi::CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        assert_eq!(rc, DPLOG_ERR_UNDELIVERED, "{msg}");
        assert_eq!((st.written_records, st.dropped_sink), (5, 20), "{msg}");
        assert!(msg.contains("20 record(s) not delivered"), "{msg}");
        assert!(msg.contains("Connection refused"), "{msg}");
    }
}
