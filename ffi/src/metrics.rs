//! `[metrics]` through the C ABI, and per-ring counters:
//! `dplog_metrics_port` and `dplog_ring_stats`.
//!
//! `dplog_open` binds the Prometheus listener of `[metrics]
//! prometheus_listen` (loopback only unless `allow_non_loopback = true`;
//! a bad address or a port in use fails the open, like the sink) and
//! starts it on its own unpinned thread (`dplog-metrics`, never a producer
//! or consumer core). Until `dplog_start` it serves empty counters; from
//! then on, every consumer's counters as one logger: per-ring series by C
//! ring id, consumer totals added up, latency quantiles the largest of the
//! consumers' (as in `dplog_stats`). `dplog_close` stops it.

use crate::handle::{dplog_t, logger, State};
use crate::prometheus::{combined, AnySource};
use crate::result::{
    dplog_result, fail, guard, DPLOG_ERR_CLOSED, DPLOG_ERR_NULL, DPLOG_ERR_STATE, DPLOG_OK,
};
use crate::tombstone::lock;

/// One ring's counters (`dplog_ring_stats`). Accounting as in
/// `struct dplog_stats`: `produced = enqueued + dropped_full +
/// dropped_degraded + dropped_disconnected + dropped_stopped`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct dplog_ring_stats {
    /// The ring id given to `dplog_producer_new`.
    pub ring_id: u32,
    /// 1 once the consumer stopped the ring after a protocol violation
    /// (`DPLOG_ERR_RING_STOPPED`), else 0.
    pub stopped: u32,
    /// Capacity in records.
    pub capacity: u64,
    /// Records in the ring at the time of the call.
    pub fill: u64,
    /// Records whose fate its producer decided (enqueued or dropped).
    pub produced: u64,
    /// Records copied into the ring.
    pub enqueued: u64,
    /// Dropped because the ring was full.
    pub dropped_full: u64,
    /// Dropped by `"degrade"`.
    pub dropped_degraded: u64,
    /// Dropped because the consumer was gone.
    pub dropped_disconnected: u64,
    /// Lost to a stop of the ring (see `struct dplog_stats`).
    pub dropped_stopped: u64,
    /// Records the consumer read out of the ring.
    pub dequeued: u64,
    /// Highest fill level the consumer saw, in records.
    pub high_water: u64,
}

/// Stores the counters of every ring of the logger, in ring id order,
/// in `out[0..min(cap, n)]`, and the number of rings in `*n` (call with
/// `cap` 0 to learn it). A ring stays listed after its producer is freed.
/// Before `dplog_start` there are none. The latency percentiles are in
/// `dplog_stats`.
///
/// Errors: `DPLOG_ERR_NULL` (`n` NULL, or `out` NULL with `cap` > 0),
/// `DPLOG_ERR_CLOSED`. Thread-safety: any thread. Cost: a lock per
/// consumer and a read of each ring's counters; not for the hot path.
///
/// # Safety
/// `h` is NULL or returned by `dplog_open*`; `out` is NULL or points to
/// `cap` writable structs; `n` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_ring_stats(
    h: *mut dplog_t,
    out: *mut dplog_ring_stats,
    cap: usize,
    n: *mut usize,
) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        let l = match unsafe { logger(h) } {
            Ok(l) => l,
            Err(e) => return e,
        };
        if n.is_null() || (out.is_null() && cap > 0) {
            return fail(
                DPLOG_ERR_NULL,
                "dplog_ring_stats: n is NULL, or out is NULL with cap > 0",
            );
        }
        let st = lock(&l.state);
        let rings = match &*st {
            State::Started(r) => {
                let sources: Vec<AnySource> = r.loggers.iter().map(AnySource::of).collect();
                combined(&sources, &lock(&l.shared.ring_names)).rings
            }
            State::Opened(_) => Vec::new(),
            State::Closed => return fail(DPLOG_ERR_CLOSED, "dplog handle is closed"),
        };
        drop(st);
        for (i, r) in rings.iter().take(cap).enumerate() {
            let v = dplog_ring_stats {
                ring_id: r.id,
                stopped: u32::from(r.stopped),
                capacity: r.capacity,
                fill: r.fill,
                produced: r.produced,
                enqueued: r.enqueued,
                dropped_full: r.dropped_full,
                dropped_degraded: r.dropped_degraded,
                dropped_disconnected: r.dropped_disconnected,
                dropped_stopped: r.dropped_stopped,
                dequeued: r.dequeued,
                high_water: r.high_water,
            };
            // SAFETY: i < cap, and out points to cap writable structs.
            unsafe { out.add(i).write(v) };
        }
        // SAFETY: non-NULL (checked), writable (caller contract).
        unsafe { n.write(rings.len()) };
        DPLOG_OK
    })
}

/// Stores in `*port` the TCP port the `[metrics]` listener is bound to
/// (the one the system chose for `prometheus_listen = "127.0.0.1:0"`).
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_STATE` (the config has no
/// `[metrics] prometheus_listen`), `DPLOG_ERR_CLOSED`. Thread-safety: any
/// thread.
///
/// # Safety
/// `h` is NULL or returned by `dplog_open*`; `port` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_metrics_port(h: *mut dplog_t, port: *mut u16) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        let l = match unsafe { logger(h) } {
            Ok(l) => l,
            Err(e) => return e,
        };
        if port.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_metrics_port: port is NULL");
        }
        if matches!(&*lock(&l.state), State::Closed) {
            return fail(DPLOG_ERR_CLOSED, "dplog handle is closed");
        }
        let p = match &*lock(&l.shared.metrics) {
            Some(m) => m.server.local_addr().port(),
            None => {
                return fail(
                    DPLOG_ERR_STATE,
                    "dplog_metrics_port: no [metrics] prometheus_listen in the config",
                )
            }
        };
        // SAFETY: non-NULL (checked), writable (caller contract).
        unsafe { port.write(p) };
        DPLOG_OK
    })
}
