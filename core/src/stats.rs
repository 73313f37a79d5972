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
use crate::runtime::Stats;

/// Counters of one ring (a snapshot; each counter read once, Relaxed).
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

impl Snapshot {
    /// The snapshot as Prometheus/OpenMetrics text exposition: the same
    /// text the metrics listener serves, from
    /// [`metrics::encode`](crate::metrics::encode) (one encoder, built on
    /// `prometheus-client`; feature `metrics`).
    #[cfg(feature = "metrics")]
    pub fn to_prometheus(&self) -> String {
        crate::metrics::encode(self)
    }
}
