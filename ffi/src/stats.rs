//! Counters: `struct dplog_stats`, how it is filled from the core's
//! counters and latency summary and summed over consumers, and
//! `dplog_stats`.

use crate::handle::{dplog_t, logger, State};
use crate::result::{dplog_result, fail, guard, DPLOG_ERR_CLOSED, DPLOG_ERR_NULL, DPLOG_OK};
use crate::tombstone::lock;

/// Every counter of one logger, summed over its rings, plus latency
/// percentiles. Filled by `dplog_stats` and `dplog_close`.
///
/// Accounting: `produced = enqueued + dropped_full + dropped_degraded +
/// dropped_disconnected + dropped_stopped`; `in_flight` is what is neither
/// written nor dropped, so after `dplog_close` `produced = written_records +
/// every dropped_* (`dropped_format` included) + in_flight`.
///
/// A stopped ring (`rings_stopped`, `DPLOG_ERR_RING_STOPPED`) counts as
/// `enqueued` the records its consumer accepted before the bad index, and
/// in `dropped_stopped` what its producer wrote past them (a call racing
/// the stop, the rest of an inline window opened before it; never read)
/// plus every record of every later call, each refused at once. Records
/// that two threads sharing one producer
/// overwrote in the ring before any index went wrong were never in the
/// ring and are in no counter: `produced` may then be below the number of
/// `DPLOG_OK` returns.
///
/// Latency is enqueue-to-write: from the producer's publish of a record to
/// the sink accepting its batch, in nanoseconds, measured by dplog's
/// runtime on a sample of the records (`latency_samples` of them); 0 when
/// there is no sample.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct dplog_stats {
    /// Records whose fate a producer decided (enqueued or dropped).
    pub produced: u64,
    /// Records copied into a ring.
    pub enqueued: u64,
    /// Records dropped because a ring was full (`backpressure = "drop"` or
    /// `"degrade"`).
    pub dropped_full: u64,
    /// Records dropped by `"degrade"` (ring above its high watermark and the
    /// record's priority too low).
    pub dropped_degraded: u64,
    /// Records dropped because the consumer was gone.
    pub dropped_disconnected: u64,
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
    /// 99th percentile, in nanoseconds.
    pub latency_p99_ns: u64,
    /// 99.9th percentile, in nanoseconds.
    pub latency_p999_ns: u64,
    /// Largest record age seen, in nanoseconds.
    pub latency_max_ns: u64,
    /// Records lost in rings the consumer stopped after a protocol
    /// violation (see above and `DPLOG_ERR_RING_STOPPED`).
    pub dropped_stopped: u64,
    /// Rings the consumer stopped after a protocol violation.
    pub rings_stopped: u64,
    /// Records the consumer could not format (a schema id the logger has
    /// no schema for, a record shorter than its schema, a record whose
    /// header was never set): dropped, with a line on stderr at most
    /// every 5 s. Last in the struct, so a program built against a header
    /// without it still finds every field before it at its offset.
    pub dropped_format: u64,
}

pub(crate) fn fill_stats(s: &dplog::Stats, lat: &dplog::LatencySummary) -> dplog_stats {
    dplog_stats {
        produced: s.produced,
        enqueued: s.enqueued,
        dropped_full: s.dropped_full,
        dropped_degraded: s.dropped_degraded,
        dropped_disconnected: s.dropped_disconnected,
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
        latency_samples: lat.samples,
        latency_p50_ns: lat.p50_ns,
        latency_p99_ns: lat.p99_ns,
        latency_p999_ns: lat.p999_ns,
        latency_max_ns: lat.max_ns,
        dropped_stopped: s.dropped_stopped,
        rings_stopped: s.rings_stopped,
        dropped_format: s.dropped_format,
    }
}

/// The counters of several consumers added up; the latency percentiles
/// are the largest of theirs (an upper bound: percentiles do not add).
pub(crate) fn sum_stats(all: &[dplog_stats]) -> dplog_stats {
    let mut t = dplog_stats::default();
    for s in all {
        t.produced += s.produced;
        t.enqueued += s.enqueued;
        t.dropped_full += s.dropped_full;
        t.dropped_degraded += s.dropped_degraded;
        t.dropped_disconnected += s.dropped_disconnected;
        t.dequeued += s.dequeued;
        t.written_records += s.written_records;
        t.written_bytes += s.written_bytes;
        t.dropped_sink += s.dropped_sink;
        t.sink_errors += s.sink_errors;
        t.sink_retries += s.sink_retries;
        t.sink_pending += s.sink_pending;
        t.dropped_shutdown += s.dropped_shutdown;
        t.batches += s.batches;
        t.high_water = t.high_water.max(s.high_water);
        t.rings += s.rings;
        t.in_flight += s.in_flight;
        t.latency_samples += s.latency_samples;
        t.latency_p50_ns = t.latency_p50_ns.max(s.latency_p50_ns);
        t.latency_p99_ns = t.latency_p99_ns.max(s.latency_p99_ns);
        t.latency_p999_ns = t.latency_p999_ns.max(s.latency_p999_ns);
        t.latency_max_ns = t.latency_max_ns.max(s.latency_max_ns);
        t.dropped_stopped += s.dropped_stopped;
        t.rings_stopped += s.rings_stopped;
        t.dropped_format += s.dropped_format;
    }
    t
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
        let v = match &*st {
            State::Started(r) => {
                let all: Vec<dplog_stats> = r
                    .loggers
                    .iter()
                    .map(|lg| {
                        let snap = lg.snapshot();
                        fill_stats(&snap.consumer, &snap.latency)
                    })
                    .collect();
                sum_stats(&all)
            }
            State::Opened(_) => dplog_stats::default(),
            State::Closed => return fail(DPLOG_ERR_CLOSED, "dplog handle is closed"),
        };
        // SAFETY: non-NULL (checked), writable (caller contract).
        unsafe { out.write(v) };
        DPLOG_OK
    })
}
