//! Counter snapshots: per ring, per consumer, and the enqueue-to-write
//! latency histogram (HDR, via the `hdrhistogram` crate).
//!
//! [`Logger::snapshot`](crate::Logger::snapshot) returns a [`Snapshot`];
//! with the feature `metrics`, `Snapshot::to_prometheus` (= `metrics::encode`)
//! renders it as OpenMetrics text, which Prometheus scrapes, and
//! `metrics::MetricsServer` serves it on a loopback HTTP listener.

use std::sync::Mutex;

use hdrhistogram::Histogram;

use crate::ring::{Ordering, Shared, UNSETTLED};

/// A snapshot of every counter, summed over the rings of one logger.
///
/// Accounting: `produced = enqueued + dropped_full + dropped_degraded +
/// dropped_disconnected + dropped_stopped` (see [`Stats::dropped`]), and once the logger is
/// shut down with its producers dropped,
/// `produced = written_records + dropped() + dropped_format + dropped_sink
/// + dropped_shutdown`.
/// In-band [`DropReport`](crate::DropReport) lines are not records and are counted apart, in
/// `drop_reports`.
/// While running, `enqueued - dequeued` records sit in rings, `sink_pending`
/// in the sink awaiting acknowledgement, and the rest of
/// `dequeued - written_records - dropped_sink - dropped_shutdown` in the
/// batch buffer (see [`Stats::in_flight`]).
// The per-ring counterpart is `RingStats`; why the counters both carry are
// written twice is said there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Records whose fate was decided by a producer (enqueued or dropped).
    pub produced: u64,
    /// Records copied into a ring.
    pub enqueued: u64,
    /// Records dropped because the ring was full ([`Backpressure::Drop`](crate::Backpressure::Drop),
    /// or `Degrade` at 100% fill).
    pub dropped_full: u64,
    /// Records dropped by [`Backpressure::Degrade`](crate::Backpressure::Degrade) above the high
    /// watermark because their priority was too low.
    pub dropped_degraded: u64,
    /// Records dropped because the consumer was gone.
    pub dropped_disconnected: u64,
    /// Records lost in rings the consumer stopped after a protocol
    /// violation (see [`RingStats::dropped_stopped`] for exactly what is
    /// counted; a stopped ring's `enqueued` is what the consumer accepted).
    pub dropped_stopped: u64,
    /// Rings the consumer stopped after a protocol violation (a producer
    /// index above the capacity or moving backwards; see [`crate::ring`](mod@crate::ring)).
    pub rings_stopped: u64,
    /// Records formatted by the consumer.
    pub formatted: u64,
    /// In-band drop reports written.
    pub drop_reports: u64,
    /// Records read out of rings by the consumer.
    pub dequeued: u64,
    /// Records in batches the sink accepted, plus the whole records the
    /// sink kept of batches it refused ([`Sink::kept_of_refused`](crate::Sink::kept_of_refused): a file
    /// on a full disk). A record the formatter turned
    /// into zero bytes on purpose (a filter) counts here too: with its
    /// batch, or at once if the whole batch formatted to nothing (no sink
    /// call is made then). A record the formatter could not format is in
    /// `dropped_format` instead.
    pub written_records: u64,
    /// Records the formatter could not format ([`Formatter::take_skipped`](crate::Formatter::take_skipped):
    /// a schema id the logger has no schema for, a record shorter than its
    /// schema, a record whose header was never set): dropped, with a line
    /// on stderr at most every 5 s.
    pub dropped_format: u64,
    /// Bytes in batches the sink accepted.
    pub written_bytes: u64,
    /// Records the sink refused: whole batches (a permanent error, or given
    /// up on after [`LoggerConfig::sink_retry_timeout_ms`](crate::LoggerConfig::sink_retry_timeout_ms)) less the records
    /// it kept of them ([`Sink::kept_of_refused`](crate::Sink::kept_of_refused)), and single records it
    /// reported failed through [`Sink::poll`](crate::Sink::poll) (e.g. a syslog message too
    /// large for a datagram).
    pub dropped_sink: u64,
    /// Sink calls (write, flush, tick, drain, close) that returned an error,
    /// retryable or permanent.
    pub sink_errors: u64,
    /// Of `sink_errors`, the retryable ones (each followed by a backoff and
    /// a retry of the same batch).
    pub sink_retries: u64,
    /// Records the sink accepted but has not yet acknowledged or failed
    /// (asynchronous sinks such as Kafka; 0 for synchronous sinks).
    pub sink_pending: u64,
    /// Records not delivered when the shutdown timeout
    /// ([`LoggerConfig::shutdown_timeout_ms`](crate::LoggerConfig::shutdown_timeout_ms)) expired: batches the sink
    /// kept refusing with retryable errors (less the records it kept of
    /// them), and records still pending in it.
    pub dropped_shutdown: u64,
    /// Batches written.
    pub batches: u64,
    /// Largest fill level the consumer saw in any one ring, in records.
    pub high_water: u64,
    /// Rings registered.
    pub rings: u64,
}

impl Stats {
    /// Records produced but neither written nor dropped yet.
    pub fn in_flight(&self) -> u64 {
        self.produced.saturating_sub(
            self.written_records
                + self.dropped()
                + self.dropped_format
                + self.dropped_sink
                + self.dropped_shutdown,
        )
    }

    /// Producer-side drops, every reason: `dropped_full + dropped_degraded
    /// + dropped_disconnected + dropped_stopped`.
    pub fn dropped(&self) -> u64 {
        self.dropped_full + self.dropped_degraded + self.dropped_disconnected + self.dropped_stopped
    }
}

/// Counters of one ring (a snapshot; each counter read once, Relaxed).
// Its producer-side counters (`produced`, `enqueued`, `dropped_*`) repeat
// `Stats`'s by name, and the C ABI mirrors both (`dplog_stats`,
// `dplog_ring_stats`). They stay flat fields in each: both structs are
// public with public fields that other crates build with struct literals
// and read by name (dplogd, the C ABI), and a shared
// nested struct would change every such path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingStats {
    /// Ring id within its logger (registration order, from 0).
    pub id: u32,
    /// Capacity in records.
    pub capacity: u64,
    /// Records in the ring at the time of the snapshot.
    pub fill: u64,
    /// Records whose fate a producer decided: `enqueued + dropped_*`.
    pub produced: u64,
    /// Records copied into the ring. For a stopped ring: the records the
    /// consumer accepted before it stopped the ring (the last valid
    /// producer index); the rest are in `dropped_stopped`.
    pub enqueued: u64,
    /// Dropped because the ring was full.
    pub dropped_full: u64,
    /// Dropped by `degrade` (above the high watermark, priority too low).
    pub dropped_degraded: u64,
    /// Dropped because the consumer was gone.
    pub dropped_disconnected: u64,
    /// Lost because the consumer stopped the ring after a protocol
    /// violation: records the producer wrote after the last index the
    /// consumer accepted (never read), plus every record a producer of the
    /// stopped ring then refused (each later call fails at once and is
    /// counted here, whatever the policy). The written-after count is the
    /// SPSC producer's own index minus the accepted one (when it lies
    /// within a capacity above it; 0 otherwise), which the producer
    /// records when it finds the ring stopped (its next call, or its
    /// drop), each record once; until then, and for an MPSC ring, the
    /// published tail's (0 while that is still the bad index). A producer
    /// shared between threads can also lose records that no index shows;
    /// those are in no counter.
    pub dropped_stopped: u64,
    /// The consumer stopped this ring after a protocol violation (a
    /// producer index above the capacity or moving backwards).
    pub stopped: bool,
    /// Records the consumer read out of this ring.
    pub dequeued: u64,
    /// Highest fill level the consumer saw, in records.
    pub high_water: u64,
    /// Times the consumer loaded this ring's published producer index
    /// ([`Consumer::tail_polls`](crate::ring::Consumer::tail_polls)): each
    /// may take the index line from the producer's core. `dequeued /
    /// tail_polls` is the records the consumer read per poll. 0 where
    /// the reader does not count it (`dplogd`).
    pub tail_polls: u64,
}

impl RingStats {
    pub(crate) fn read<T>(id: u32, r: &Shared<T>) -> Self {
        let c = &r.producer_counters;
        // Acquire pairs with the consumer's Release store of `stopped`,
        // which publishes `accepted_tail`.
        let stopped = r.stopped.load(Ordering::Acquire);
        // Relaxed: statistics (see `ProducerCounters`).
        // The free-running producer index counts every record enqueued.
        let tail = r.tail.load(Ordering::Relaxed);
        let (enqueued, fill, stranded) = if stopped {
            // The producer's index is not trusted: the accepted one is
            // the enqueued count; what the producer wrote past it is lost.
            let accepted = r.accepted_tail.load(Ordering::Relaxed);
            let head = r.head.load(Ordering::Relaxed);
            // Acquire pairs with the producer's Release store in
            // `Producer::settle_stop`.
            let stranded = match r.stranded.load(Ordering::Acquire) {
                UNSETTLED => {
                    // Not settled by the producer: estimated from the
                    // published tail, if it is plausible and no longer
                    // the index that broke the protocol.
                    let past = tail.wrapping_sub(accepted);
                    let bad = r.bad_tail.load(Ordering::Relaxed);
                    if tail != bad && past <= r.capacity {
                        past as u64
                    } else {
                        0
                    }
                }
                settled => settled,
            };
            (
                accepted,
                accepted.wrapping_sub(head).min(r.capacity),
                stranded,
            )
        } else {
            (tail, r.len(), 0)
        };
        let enqueued = enqueued as u64;
        let dropped_full = c.dropped_full.load(Ordering::Relaxed);
        let dropped_degraded = c.dropped_degraded.load(Ordering::Relaxed);
        let dropped_disconnected = c.dropped_disconnected.load(Ordering::Relaxed);
        let dropped_stopped = c.dropped_stopped.load(Ordering::Relaxed) + stranded;
        Self {
            id,
            capacity: r.capacity as u64,
            fill: fill as u64,
            produced: enqueued
                + dropped_full
                + dropped_degraded
                + dropped_disconnected
                + dropped_stopped,
            enqueued,
            dropped_full,
            dropped_degraded,
            dropped_disconnected,
            dropped_stopped,
            stopped,
            dequeued: r.consumer_counters.dequeued.load(Ordering::Relaxed),
            high_water: r.consumer_counters.high_water.load(Ordering::Relaxed) as u64,
            tail_polls: r.consumer_counters.tail_polls.load(Ordering::Relaxed),
        }
    }
}

/// Enqueue-to-write latency, nanoseconds, from the HDR histogram of
/// sampled records (one in [`SAMPLE_EVERY`](crate::ring::SAMPLE_EVERY) by
/// ring index). "Write" is the sink accepting the batch (`Delivered`, or
/// `Pending` for asynchronous sinks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatencySummary {
    /// Sampled records in the histogram.
    pub samples: u64,
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Largest sample.
    pub max_ns: u64,
}

/// Everything [`Logger::snapshot`](crate::Logger::snapshot) returns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Consumer totals, summed over its rings (the [`Stats`] of the logger).
    pub consumer: Stats,
    /// One entry per ring, in id order.
    pub rings: Vec<RingStats>,
    /// Enqueue-to-write latency.
    pub latency: LatencySummary,
}

/// The consumer's latency histogram: 1 ns to 60 s, 3 significant digits.
/// The consumer records into it once per written batch (one short lock);
/// snapshots lock it to read quantiles.
pub(crate) struct LatencyHistogram(Mutex<Histogram<u64>>);

impl LatencyHistogram {
    pub(crate) fn new() -> Self {
        Self(Mutex::new(
            Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("static bounds are valid"),
        ))
    }

    /// Records each of `samples_ns` (clamped into the histogram's range).
    pub(crate) fn record_all(&self, samples_ns: impl Iterator<Item = u64>) {
        let mut h = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for v in samples_ns {
            h.saturating_record(v.max(1));
        }
    }

    pub(crate) fn summary(&self) -> LatencySummary {
        let h = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            samples: h.len(),
            p50_ns: h.value_at_quantile(0.5),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            max_ns: h.max(),
        }
    }
}
