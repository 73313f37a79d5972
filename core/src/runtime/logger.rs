//! The [`Logger`] handle: starts the consumer thread, hands out
//! producers, and takes counters ([`SnapshotSource`]).

use core::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, unbounded, Sender};

use super::consumer::{ConsumerLoop, ConsumerTotals, Control};
use super::{human_bytes, LogProducer, LoggerConfig, LoggerError, Stats, MIN_BATCH_BYTES};
use crate::format::Formatter;
use crate::policy::Policy;
use crate::record::Record;
use crate::ring::{ring, Consumer, Shared};
use crate::sink::{Sink, SinkCounters};
use crate::stats::{LatencyHistogram, RingStats, Snapshot};
use crate::table::RecordRules;

/// A running consumer thread plus the rings it drains.
///
/// Create with [`Logger::start`], get one [`LogProducer`] per producing
/// thread with [`Logger::producer`], and end with [`Logger::shutdown`],
/// which drains every ring, writes, flushes and closes the sink.
///
/// Most programs start one from a configuration (`dplog::config::
/// LogConfig::start`), with dplog-formatters' table-driven formats and
/// dplog-sinks' sinks. Underneath, a logger takes any [`Formatter`] and
/// any [`Sink`]:
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use dplog_core::{
///     Accepted, Formatter, Logger, LoggerConfig, Record, RecordHeader, Sink, SinkError,
/// };
///
/// /// A health-check result: 16 bytes, copied into a ring slot.
/// #[repr(C)]
/// #[derive(Clone, Copy)]
/// struct Probe {
///     header: RecordHeader,
///     rtt_us: u32,
///     backend: u32,
/// }
/// impl Record for Probe {
///     const SCHEMA_ID: u16 = 700;
///     fn header(&self) -> &RecordHeader {
///         &self.header
///     }
/// }
///
/// /// One line per record: the round-trip time in decimal.
/// struct RttLine;
/// impl Formatter<Probe> for RttLine {
///     fn format(&mut self, p: &Probe, out: &mut Vec<u8>) {
///         out.extend_from_slice(itoa::Buffer::new().format(p.rtt_us).as_bytes());
///         out.push(b'\n');
///     }
/// }
///
/// /// Keeps every batch in memory.
/// struct Memory(Arc<Mutex<Vec<u8>>>);
/// impl Sink for Memory {
///     fn write_batch(&mut self, batch: &[u8]) -> Result<Accepted, SinkError> {
///         self.0.lock().unwrap().extend_from_slice(batch);
///         Ok(Accepted::Delivered)
///     }
///     fn flush(&mut self) -> Result<(), SinkError> {
///         Ok(())
///     }
///     fn close(&mut self) -> Result<(), SinkError> {
///         Ok(())
///     }
/// }
///
/// let out = Arc::new(Mutex::new(Vec::new()));
/// let logger = Logger::<Probe>::start(LoggerConfig::default(), RttLine, Memory(out.clone()))?;
/// let mut producer = logger.producer()?; // one per forwarding thread
/// for rtt_us in [120, 95, 310] {
///     let header = RecordHeader::of::<Probe>();
///     assert!(producer.log(Probe { header, rtt_us, backend: 7 }));
/// }
/// drop(producer);
/// let stats = logger.shutdown().map_err(|(_, e)| e)?; // drains every ring
/// assert_eq!((stats.produced, stats.written_records), (3, 3));
/// assert_eq!(&out.lock().unwrap()[..], b"120\n95\n310\n");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Logger<R: Record> {
    ctrl: Sender<Control<R>>,
    thread: Option<JoinHandle<()>>,
    totals: Arc<ConsumerTotals>,
    rings: Arc<Mutex<Vec<Arc<Shared<R>>>>>,
    config: LoggerConfig,
    latency: Arc<LatencyHistogram>,
    /// The sink's own counters ([`Sink::named_counters`]), taken at start.
    sink_counters: Option<Arc<dyn SinkCounters>>,
    /// How records' priorities and event times are read.
    rules: RecordRules<R>,
}

impl<R: Record> core::fmt::Debug for Logger<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Logger")
            .field("record", &core::any::type_name::<R>())
            .field("config", &self.config)
            .field("running", &self.thread.is_some())
            .finish_non_exhaustive()
    }
}

impl<R: Record> Logger<R> {
    /// Validates `config` and starts the consumer thread (named
    /// `dplog-consumer`) that formats with `formatter` and writes to `sink`.
    ///
    /// Errors: [`LoggerError::Config`] for a setting
    /// [`LoggerConfig::validate`] refuses, or a batch buffer that cannot be
    /// allocated; [`LoggerError::Io`] if the thread cannot be spawned.
    pub fn start<F: Formatter<R>, S: Sink>(
        config: LoggerConfig,
        formatter: F,
        sink: S,
    ) -> Result<Self, LoggerError> {
        Self::start_with_rules(config, RecordRules::own(), formatter, sink)
    }

    /// [`start`](Self::start) reading priorities and event times with
    /// `rules` (e.g. [`RecordRules::by_schema`] for a typed record whose
    /// schema declares them).
    ///
    /// Errors: as [`start`](Self::start).
    pub fn start_with_rules<F: Formatter<R>, S: Sink>(
        config: LoggerConfig,
        rules: RecordRules<R>,
        formatter: F,
        sink: S,
    ) -> Result<Self, LoggerError> {
        config.validate(core::mem::size_of::<R>())?;
        // The batch buffer is sized once; refused, not aborted, when the
        // allocator cannot give it.
        let mut buf = Vec::new();
        buf.try_reserve_exact(config.batch_bytes + MIN_BATCH_BYTES)
            .map_err(|_| {
                LoggerError::Config(format!(
                    "cannot allocate the batch buffer of batch_bytes ([ring] batch_bytes) = {} ({})",
                    config.batch_bytes,
                    human_bytes(config.batch_bytes as u128)
                ))
            })?;
        let latency = Arc::new(LatencyHistogram::new());
        let sink_counters = sink.named_counters();
        let (tx, rx) = unbounded();
        let totals = Arc::new(ConsumerTotals::default());
        let worker = ConsumerLoop::new(
            rx,
            formatter,
            sink,
            buf,
            totals.clone(),
            config.clone(),
            latency.clone(),
            rules,
        );
        let thread = std::thread::Builder::new()
            .name("dplog-consumer".into())
            .spawn(move || worker.run())
            .map_err(LoggerError::Io)?;
        Ok(Self {
            ctrl: tx,
            thread: Some(thread),
            totals,
            rings: Arc::new(Mutex::new(Vec::new())),
            config,
            latency,
            sink_counters,
            rules,
        })
    }

    /// The settings the logger runs with.
    pub fn config(&self) -> &LoggerConfig {
        &self.config
    }

    /// How this logger reads priorities and event times.
    pub(crate) fn rules(&self) -> RecordRules<R> {
        self.rules
    }

    /// A handle on the sink's own counters ([`Sink::named_counters`];
    /// `None` when the sink exposes none). It outlives the logger: take it
    /// before [`shutdown`](Self::shutdown) and read it after, when the
    /// values are final.
    pub fn sink_counters(&self) -> Option<Arc<dyn SinkCounters>> {
        self.sink_counters.clone()
    }

    /// Creates a new SPSC ring of `ring_capacity` slots, registers its
    /// consumer half with the consumer thread and returns the producer half.
    /// Call once per producing thread (forwarding core).
    pub fn producer(&self) -> Result<LogProducer<R>, LoggerError> {
        let (mut p, c) = ring::<R>(self.config.ring_capacity)?;
        let ring_id = self.attach(c)?;
        p.set_block_spins(self.config.block_spins);
        p.set_publish_every(self.config.publish_every);
        Ok(LogProducer {
            inner: p,
            ring_id,
            policy: Policy::new(&self.config, self.rules.priority),
        })
    }

    /// Registers the consumer half of any ring (an MPSC ring from
    /// [`mpsc_ring`](crate::mpsc::mpsc_ring), or an SPSC ring made by hand)
    /// so this logger's consumer drains it round-robin with the others.
    /// Returns the ring id. The producers of such a ring apply no policy
    /// of their own: use their `push`/`try_push` and `count_dropped`.
    pub fn attach(&self, mut consumer: Consumer<R>) -> Result<u32, LoggerError> {
        let mut rings = self.rings.lock().unwrap_or_else(|e| e.into_inner());
        let id = rings.len() as u32;
        consumer.set_id(id);
        let shared = consumer.shared().clone();
        self.ctrl
            .send(Control::AddRing(consumer))
            .map_err(|_| LoggerError::ConsumerGone)?;
        rings.push(shared);
        Ok(id)
    }

    /// Counters per ring and per consumer plus the enqueue-to-write latency
    /// quantiles (see [`Snapshot`]; with the feature `metrics`,
    /// `Snapshot::to_prometheus` renders it as Prometheus text).
    pub fn snapshot(&self) -> Snapshot {
        self.snapshot_source().snapshot()
    }

    /// A cheap, cloneable, `Send + Sync` handle that takes the same
    /// [`Snapshot`] as [`Logger::snapshot`] from another thread (the
    /// metrics listener), without a reference to the logger.
    pub fn snapshot_source(&self) -> SnapshotSource<R> {
        SnapshotSource {
            rings: self.rings.clone(),
            totals: self.totals.clone(),
            latency: self.latency.clone(),
        }
    }

    /// Current counters (a snapshot; each counter is read once, Relaxed).
    pub fn stats(&self) -> Stats {
        self.snapshot_source().stats()
    }

    /// Writes what the consumer has batched and flushes the sink; returns
    /// the sink's flush result. Records still in rings are not waited for.
    /// The outcomes the flush settled (records a sink held pending, such
    /// as an archive's partial blocks, now written) are in
    /// [`stats`](Self::stats) when it returns.
    pub fn flush(&self) -> Result<(), LoggerError> {
        let (tx, rx) = bounded(1);
        self.ctrl
            .send(Control::Flush(tx))
            .map_err(|_| LoggerError::ConsumerGone)?;
        rx.recv()
            .map_err(|_| LoggerError::ConsumerGone)?
            .map_err(LoggerError::Io)
    }

    /// Asks the sink to reopen its destination (e.g. the file at its path
    /// after an external logrotate moved it; see `FileSink::reopen`), on the
    /// consumer thread between two batches; returns the sink's result.
    pub fn reopen(&self) -> Result<(), LoggerError> {
        let (tx, rx) = bounded(1);
        self.ctrl
            .send(Control::Reopen(tx))
            .map_err(|_| LoggerError::ConsumerGone)?;
        rx.recv()
            .map_err(|_| LoggerError::ConsumerGone)?
            .map_err(LoggerError::Io)
    }

    /// Drains every ring until empty, writes the last batch, flushes and
    /// closes the sink, joins the consumer thread and returns the final
    /// counters. Drop every [`LogProducer`] first: a record pushed after the
    /// drain stays in its ring, shows in [`Stats::in_flight`] and makes
    /// the shutdown an error.
    ///
    /// `Ok` means every record a producer accepted before the final counts
    /// were taken was written or dropped for a counted reason
    /// (`produced = written_records + dropped() + dropped_format +
    /// dropped_sink + dropped_shutdown`; drops are counters, not errors).
    ///
    /// Errors (the counters still say what was written):
    /// [`LoggerError::Io`] with the sink's flush or close error;
    /// [`LoggerError::Undelivered`] when records accepted by
    /// [`LogProducer::log`] were logged after the final drain and never
    /// written ([`Stats::in_flight`] above 0: producers still logging
    /// while the shutdown ran); [`LoggerError::ConsumerGone`] if the
    /// consumer thread panicked. A record logged after the final counts
    /// were taken is in no counter.
    // Stats is plain counters that callers destructure; boxing it would
    // only add an allocation at shutdown.
    #[allow(clippy::result_large_err)]
    pub fn shutdown(mut self) -> Result<Stats, (Stats, LoggerError)> {
        let (tx, rx) = bounded(1);
        let sent = self.ctrl.send(Control::Shutdown(tx)).is_ok();
        let result = if sent { rx.recv().ok() } else { None };
        let joined = self
            .thread
            .take()
            .map(|t| t.join().is_ok())
            .unwrap_or(false);
        let stats = self.stats();
        match (result, joined) {
            (Some(Ok(())), true) if stats.in_flight() > 0 => Err((
                stats,
                LoggerError::Undelivered {
                    in_flight: stats.in_flight(),
                    written_records: stats.written_records,
                },
            )),
            (Some(Ok(())), true) => Ok(stats),
            (Some(Err(e)), true) => Err((stats, LoggerError::Io(e))),
            _ => Err((stats, LoggerError::ConsumerGone)),
        }
    }
}

impl<R: Record> Drop for Logger<R> {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            let (tx, rx) = bounded(1);
            if self.ctrl.send(Control::Shutdown(tx)).is_ok() {
                let _ = rx.recv();
            }
            let _ = t.join();
        }
    }
}

/// Takes snapshots of one logger's counters from any thread; see
/// [`Logger::snapshot_source`].
pub struct SnapshotSource<R: Record> {
    rings: Arc<Mutex<Vec<Arc<Shared<R>>>>>,
    totals: Arc<ConsumerTotals>,
    latency: Arc<LatencyHistogram>,
}

impl<R: Record> core::fmt::Debug for SnapshotSource<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SnapshotSource")
            .field("record", &core::any::type_name::<R>())
            .finish_non_exhaustive()
    }
}

impl<R: Record> Clone for SnapshotSource<R> {
    fn clone(&self) -> Self {
        Self {
            rings: self.rings.clone(),
            totals: self.totals.clone(),
            latency: self.latency.clone(),
        }
    }
}

impl<R: Record> SnapshotSource<R> {
    /// Per-ring and consumer counters plus latency quantiles.
    pub fn snapshot(&self) -> Snapshot {
        let rings = self
            .rings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .enumerate()
            .map(|(i, r)| RingStats::read(i as u32, r))
            .collect();
        Snapshot {
            consumer: self.stats(),
            rings,
            latency: self.latency.summary(),
        }
    }

    /// The consumer totals, summed over the rings ([`Logger::stats`]).
    pub fn stats(&self) -> Stats {
        let mut s = Stats::default();
        for r in self.rings.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            // Relaxed: statistics; exact final values are read after the
            // consumer thread is joined (see `Logger::shutdown`).
            let rs = RingStats::read(0, r);
            s.enqueued += rs.enqueued;
            s.dropped_full += rs.dropped_full;
            s.dropped_degraded += rs.dropped_degraded;
            s.dropped_disconnected += rs.dropped_disconnected;
            s.dropped_stopped += rs.dropped_stopped;
            s.rings_stopped += u64::from(rs.stopped);
            s.produced += rs.produced;
            s.dequeued += rs.dequeued;
            s.high_water = s.high_water.max(rs.high_water);
            s.rings += 1;
        }
        let t = &self.totals;
        s.written_records = t.written_records.load(Ordering::Relaxed);
        s.written_bytes = t.written_bytes.load(Ordering::Relaxed);
        s.dropped_sink = t.dropped_sink.load(Ordering::Relaxed);
        s.sink_errors = t.sink_errors.load(Ordering::Relaxed);
        s.sink_retries = t.sink_retries.load(Ordering::Relaxed);
        s.sink_pending = t.sink_pending.load(Ordering::Relaxed);
        s.dropped_shutdown = t.dropped_shutdown.load(Ordering::Relaxed);
        s.dropped_format = t.dropped_format.load(Ordering::Relaxed);
        s.batches = t.batches.load(Ordering::Relaxed);
        s.formatted = t.formatted.load(Ordering::Relaxed);
        s.drop_reports = t.drop_reports.load(Ordering::Relaxed);
        s
    }
}
