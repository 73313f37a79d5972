//! The `[metrics]` Prometheus listener of a handle (started by
//! `dplog_open`, see `crate::handle`) and the consumers' counters added up
//! as one logger's, which it and `dplog_ring_stats` serve.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use dplog::metrics::MetricsServer;
use dplog::{RingStats, Snapshot, SnapshotSource, Stats};
use dplog::{Slot128, Slot32, Slot64};

use crate::slots::AnyLogger;
use crate::tombstone::lock;

/// A consumer's snapshot source, of its slot type.
#[derive(Clone)]
pub(crate) enum AnySource {
    S32(SnapshotSource<Slot32>),
    S64(SnapshotSource<Slot64>),
    S128(SnapshotSource<Slot128>),
}

impl AnySource {
    pub(crate) fn of(l: &AnyLogger) -> Self {
        match l {
            AnyLogger::S32(l) => Self::S32(l.snapshot_source()),
            AnyLogger::S64(l) => Self::S64(l.snapshot_source()),
            AnyLogger::S128(l) => Self::S128(l.snapshot_source()),
        }
    }

    fn snapshot(&self) -> Snapshot {
        match self {
            Self::S32(s) => s.snapshot(),
            Self::S64(s) => s.snapshot(),
            Self::S128(s) => s.snapshot(),
        }
    }
}

/// The listener and what it serves.
pub(crate) struct Metrics {
    pub(crate) server: MetricsServer,
    /// The consumers' sources, set by `dplog_start`.
    pub(crate) sources: Arc<Mutex<Vec<AnySource>>>,
}

impl Metrics {
    /// Serves the counters of `loggers` from now on.
    pub(crate) fn attach(&self, loggers: &[AnyLogger]) {
        *lock(&self.sources) = loggers.iter().map(AnySource::of).collect();
    }

    /// Stops listening and joins the listener thread.
    pub(crate) fn stop(self) {
        self.server.stop();
    }
}

fn add(t: &mut Stats, s: &Stats) {
    t.produced += s.produced;
    t.enqueued += s.enqueued;
    t.dropped_full += s.dropped_full;
    t.dropped_degraded += s.dropped_degraded;
    t.dropped_disconnected += s.dropped_disconnected;
    t.dropped_stopped += s.dropped_stopped;
    t.rings_stopped += s.rings_stopped;
    t.formatted += s.formatted;
    t.drop_reports += s.drop_reports;
    t.dequeued += s.dequeued;
    t.written_records += s.written_records;
    t.dropped_format += s.dropped_format;
    t.written_bytes += s.written_bytes;
    t.dropped_sink += s.dropped_sink;
    t.sink_errors += s.sink_errors;
    t.sink_retries += s.sink_retries;
    t.sink_pending += s.sink_pending;
    t.dropped_shutdown += s.dropped_shutdown;
    t.batches += s.batches;
    t.high_water = t.high_water.max(s.high_water);
    t.rings += s.rings;
}

/// The consumers' snapshots as one logger's: rings by C ring id (`names`:
/// (consumer index, ring id in its logger) -> C id) in id order, totals
/// added up, latency quantiles the largest (samples added).
pub(crate) fn combined(sources: &[AnySource], names: &HashMap<(usize, u32), u32>) -> Snapshot {
    let mut out = Snapshot::default();
    for (i, src) in sources.iter().enumerate() {
        let s = src.snapshot();
        add(&mut out.consumer, &s.consumer);
        for r in s.rings {
            out.rings.push(RingStats {
                id: names.get(&(i, r.id)).copied().unwrap_or(r.id),
                ..r
            });
        }
        let (a, b) = (&mut out.latency, s.latency);
        a.samples += b.samples;
        a.p50_ns = a.p50_ns.max(b.p50_ns);
        a.p99_ns = a.p99_ns.max(b.p99_ns);
        a.p999_ns = a.p999_ns.max(b.p999_ns);
        a.max_ns = a.max_ns.max(b.max_ns);
    }
    out.rings.sort_by_key(|r| r.id);
    out
}
