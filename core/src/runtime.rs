//! The consumer runtime: a thread that drains rings in bursts, formats
//! records into large batches and hands each batch to a [`Sink`] in one call.
//!
//! ```text
//!  producer core 0 ──► SPSC ring ─┐
//!  producer core 1 ──► SPSC ring ─┼─► consumer thread: read_burst → Formatter
//!  producer core N ──► SPSC ring ─┘        → batch (≥ 64 KiB) → Sink::write_batch
//! ```
//!
//! Control messages (flush, shutdown, new ring) travel on a
//! `crossbeam-channel`; records never do.
//!
//! - One consumer serves many rings, round-robin by burst: one SPSC ring
//!   per forwarding core from [`Logger::producer`], plus any ring (e.g. an
//!   MPSC ring from [`crate::mpsc::mpsc_ring`]) given to [`Logger::attach`].
//! - Per-core pipelines: start N loggers, each with its own sink instance
//!   (one file per core) and its own `consumer_cpu`; each owns the rings of
//!   the producers it hands out.
//! - Backpressure per ring: [`Backpressure`] (`block`, `drop_newest`,
//!   `degrade`), with exact per-reason counters and in-band
//!   [`DropReport`]s ([`crate::report`]).
//! - Order: per-ring FIFO without the reorder window; event-time order
//!   across and within rings with it ([`crate::reorder`]).
//! - Time: the consumer keeps a [`TscClock`] recalibrated against
//!   `CLOCK_REALTIME` every second, converts drop times with it, and hands
//!   each calibration to the formatter ([`Formatter::tsc_calibration`]) for
//!   records stamped with [`crate::tsc::now_ticks`].
//! - Counters: [`Logger::snapshot`] (per ring, per consumer, enqueue-to-write
//!   latency quantiles from an HDR histogram of one record in 64).

use core::sync::atomic::{AtomicU64, Ordering};
use std::io;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded, Receiver, RecvTimeoutError, Sender};

use crate::format::Formatter;
use crate::policy::Policy;
use crate::record::Record;
use crate::reorder::Reorder;
use crate::report::DropReport;
use crate::ring::{ring, Consumer, Producer, RingError, Shared};
use crate::sink::{Accepted, Progress, Sink, SinkCounters, SinkError};
use crate::stats::{LatencyHistogram, RingStats, Snapshot};
use crate::table::{RecordRules, SchemaTable};
use crate::tsc::{now_ticks, realtime_ns, TscClock};

/// What a producer does when its ring is full. Set per logger (and so per
/// ring) in config as `block`, `drop_newest` (alias `drop`) or `degrade`.
/// No policy ever overwrites the oldest record: the first records of an
/// incident are the ones that explain it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Backpressure {
    /// Lossless: the producer waits until a slot frees, spinning with a
    /// pause instruction for [`LoggerConfig::block_spins`] tries, then
    /// yielding between tries.
    #[default]
    Block,
    /// `drop_newest`: the new record is dropped and counted in
    /// [`Stats::dropped_full`]; the consumer writes an in-band
    /// [`DropReport`] into the log.
    #[cfg_attr(feature = "serde", serde(rename = "drop_newest", alias = "drop"))]
    Drop,
    /// `degrade`: above the high watermark only records with
    /// [`Record::priority`] at least [`DegradeConfig::min_priority`] are
    /// accepted, until the fill falls below the low watermark; drops are
    /// counted in [`Stats::dropped_degraded`] (and `dropped_full` at 100%)
    /// and reported in-band like `drop_newest`.
    Degrade,
}

impl Backpressure {
    /// The config name: `block`, `drop_newest` or `degrade`.
    pub fn name(self) -> &'static str {
        match self {
            Backpressure::Block => "block",
            Backpressure::Drop => "drop_newest",
            Backpressure::Degrade => "degrade",
        }
    }
}

/// Watermarks of the `degrade` policy, in percent of the ring capacity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields, default))]
pub struct DegradeConfig {
    /// Fill (%) at or above which only high-priority records are accepted.
    /// Default 80.
    pub high_watermark_pct: u8,
    /// Fill (%) below which all records are accepted again. Default 50.
    pub low_watermark_pct: u8,
    /// Lowest record priority (its schema's rule or
    /// [`Record::priority`]) accepted while degraded. Default
    /// [`PRIORITY_HIGH`](crate::record::PRIORITY_HIGH) (e.g. the NAT's
    /// deletes, port blocks and exhaustion events pass; its session
    /// creates are shed).
    pub min_priority: u8,
}

impl Default for DegradeConfig {
    fn default() -> Self {
        Self {
            high_watermark_pct: 80,
            low_watermark_pct: 50,
            min_priority: crate::record::PRIORITY_HIGH,
        }
    }
}

/// Default slots per ring: 16384 (1 MiB of 64-byte slots), the best size
/// of the ring-size sweep (`benches/benches/ring_sweep.rs`, results and
/// plot in `benches/RESULTS.md` and `benches/ring_sweep.svg`): the smallest
/// ring that dropped nothing when bursts of up to 4096 records met a
/// rate-limited consumer on a shared 2-CPU machine.
pub const DEFAULT_RING_CAPACITY: usize = 16384;

/// Smallest batch buffer the runtime accepts, in bytes (64 KiB).
pub const MIN_BATCH_BYTES: usize = 64 * 1024;

/// Largest batch buffer the runtime accepts, in bytes (256 MiB): a thousand
/// times the default, far past the size where a larger write stops paying.
pub const MAX_BATCH_BYTES: usize = 256 << 20;

/// Largest ring a [`Logger`] creates, in slots (2^24: 1 GiB per ring of
/// 64-byte slots). Every ring's slots are allocated and touched when it is
/// created, so a larger ring would take seconds and gigabytes per
/// producer before the first record; the ring-size sweep found 16384
/// enough (see [`DEFAULT_RING_CAPACITY`]).
pub const MAX_LOGGER_RING_CAPACITY: usize = 1 << 24;

/// `bytes` in the largest binary unit that keeps it whole-ish: `512 B`,
/// `1 MiB`, `16 GiB`, `1.5 KiB`.
pub fn human_bytes(bytes: u128) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut unit = 0;
    while unit + 1 < UNITS.len() && bytes >= 1u128 << (10 * (unit + 1)) {
        unit += 1;
    }
    let scale = 1u128 << (10 * unit);
    if bytes % scale == 0 {
        format!("{} {}", bytes / scale, UNITS[unit])
    } else {
        format!("{:.1} {}", bytes as f64 / scale as f64, UNITS[unit])
    }
}

/// The memory one ring of `capacity` slots of `slot_bytes` bytes takes, in
/// words: `16384 slots x 64 B = 1 MiB per ring`.
pub fn ring_memory(capacity: usize, slot_bytes: usize) -> String {
    format!(
        "{capacity} slots x {slot_bytes} B = {} per ring",
        human_bytes(capacity as u128 * slot_bytes as u128)
    )
}

/// Consumer runtime settings.
#[derive(Clone, Debug)]
pub struct LoggerConfig {
    /// Slots per producer ring; a power of two, at most
    /// [`MAX_LOGGER_RING_CAPACITY`]. Each ring takes `ring_capacity *
    /// size_of::<R>()` bytes, allocated and touched when it is created
    /// (see [`ring_memory`]). Default [`DEFAULT_RING_CAPACITY`].
    pub ring_capacity: usize,
    /// Policy applied by [`LogProducer::log`]. Default [`Backpressure::Block`].
    pub backpressure: Backpressure,
    /// Most records read from one ring before moving to the next. Default 32.
    pub burst: usize,
    /// Batch size in bytes that triggers a write; from
    /// [`MIN_BATCH_BYTES`] to [`MAX_BATCH_BYTES`]. Default 256 KiB.
    pub batch_bytes: usize,
    /// Longest sleep of an idle consumer, in microseconds. Default 200.
    pub idle_sleep_us: u64,
    /// Pin the consumer thread to this CPU (Linux `sched_setaffinity`).
    pub consumer_cpu: Option<usize>,
    /// How long [`Logger::shutdown`] waits for the sink to take the last
    /// batches (retrying retryable errors) and acknowledge pending records,
    /// in milliseconds. What is still undelivered then is counted in
    /// [`Stats::dropped_shutdown`]. Default 5000.
    pub shutdown_timeout_ms: u64,
    /// `block`: pause-instruction spins before a waiting producer starts
    /// yielding the CPU. Default 1024.
    pub block_spins: u32,
    /// `degrade` watermarks and minimum priority.
    pub degrade: DegradeConfig,
    /// Write an in-band [`DropReport`] line when drops happen: on a ring
    /// (`drop_newest`, `degrade`) or in the sink (`dropped_sink`, reported
    /// at the head of the next batch). Default true.
    pub drop_reports: bool,
    /// Reorder window in the records' time unit
    /// ([`Record::event_time`], normally ns): `Some(W)` merges the rings
    /// by event time, holding records until one `W` newer is read (see
    /// [`crate::reorder`] for the order guaranteed with and without it).
    /// Default `None` (off). At most `ring_capacity` records per ring are
    /// held.
    pub reorder_window_ns: Option<u64>,
    /// With the reorder window on: a ring from which nothing was read for
    /// this long (wall clock, ms) no longer holds other rings' records
    /// back (see [`crate::reorder`]); the longest a record waits for a
    /// silent ring. Default 500.
    pub reorder_idle_ms: u64,
    /// How long the consumer keeps retrying a sink that fails with
    /// retryable errors (ENOSPC, EIO, a lost connection), in milliseconds,
    /// counted from the first failure after the last success. Past it the
    /// batch is counted in [`Stats::dropped_sink`] (less the whole records
    /// the sink kept of it, see [`Sink::kept_of_refused`]) and the
    /// consumer moves on; while the sink keeps failing, each later batch
    /// gets one try and is dropped the same way, until a write succeeds.
    /// With [`drop_reports`](Self::drop_reports), the next batch the sink
    /// takes starts with an in-band [`DropReport`] of the drops. `None` (default):
    /// retry forever, so `block` producers wait (lossless). Either way the
    /// consumer prints a diagnostic to stderr at most every 5 s while the
    /// sink fails (sink, OS error, how long, records waiting).
    pub sink_retry_timeout_ms: Option<u64>,
    /// Producers publish their ring index once per this many records (see
    /// [`Producer::set_publish_every`]); records in between stay invisible
    /// to the consumer until the producer calls
    /// [`flush`](Producer::flush) (once per rx burst), the batch fills, the
    /// ring fills or the producer is dropped. Default 1: every record is
    /// published at once, and no flush is needed.
    pub publish_every: usize,
    /// Per-record-type rules: priority under `degrade` and where the
    /// event time is (see [`SchemaTable`]). Build it from the schemas the
    /// logger serves; it is what lets a ring of slots ([`Slot64`](crate::Slot64)
    /// & co) carry several record types. Default empty: each record's own
    /// [`Record::priority`] and [`Record::event_time`].
    pub schemas: SchemaTable,
}

impl LoggerConfig {
    /// Checks every setting before anything is allocated or opened, for
    /// rings of `slot_bytes`-byte slots (`size_of::<R>()`; it only shapes
    /// the message). [`Logger::start`] calls it; call it yourself to refuse
    /// a configuration before opening its sink.
    ///
    /// Errors: [`LoggerError::Config`] naming the setting (field and TOML
    /// key), its value and the bound: a ring capacity that is not a power
    /// of two in `1..=`[`MAX_LOGGER_RING_CAPACITY`] (with the memory the
    /// ring would take), a burst of 0, a batch outside
    /// [`MIN_BATCH_BYTES`]`..=`[`MAX_BATCH_BYTES`], degrade watermarks not
    /// `low < high <= 100`.
    pub fn validate(&self, slot_bytes: usize) -> Result<(), LoggerError> {
        let cap = self.ring_capacity;
        if cap == 0 || !cap.is_power_of_two() || cap > MAX_LOGGER_RING_CAPACITY {
            let why = if cap > MAX_LOGGER_RING_CAPACITY {
                "is above the limit of"
            } else {
                "must be a power of two from 1 to"
            };
            return Err(LoggerError::Config(format!(
                "ring_capacity ([ring] capacity) = {} {why} {MAX_LOGGER_RING_CAPACITY} slots ({})",
                ring_memory(cap, slot_bytes),
                human_bytes(MAX_LOGGER_RING_CAPACITY as u128 * slot_bytes as u128)
            )));
        }
        if self.burst == 0 {
            return Err(LoggerError::Config(
                "burst ([ring] burst) must be at least 1".into(),
            ));
        }
        let b = self.batch_bytes;
        if !(MIN_BATCH_BYTES..=MAX_BATCH_BYTES).contains(&b) {
            return Err(LoggerError::Config(format!(
                "batch_bytes ([ring] batch_bytes) = {b} ({}) is outside {MIN_BATCH_BYTES} ({}) to {MAX_BATCH_BYTES} ({})",
                human_bytes(b as u128),
                human_bytes(MIN_BATCH_BYTES as u128),
                human_bytes(MAX_BATCH_BYTES as u128)
            )));
        }
        let d = self.degrade;
        if !(d.low_watermark_pct < d.high_watermark_pct && d.high_watermark_pct <= 100) {
            return Err(LoggerError::Config(format!(
                "degrade watermarks must satisfy low < high <= 100 (percent of capacity), got low {} high {}",
                d.low_watermark_pct, d.high_watermark_pct
            )));
        }
        Ok(())
    }
}

impl Default for LoggerConfig {
    fn default() -> Self {
        Self {
            ring_capacity: DEFAULT_RING_CAPACITY,
            backpressure: Backpressure::Block,
            burst: 32,
            batch_bytes: 256 * 1024,
            idle_sleep_us: 200,
            consumer_cpu: None,
            shutdown_timeout_ms: 5000,
            block_spins: crate::ring::DEFAULT_BLOCK_SPINS,
            degrade: DegradeConfig::default(),
            drop_reports: true,
            reorder_window_ns: None,
            reorder_idle_ms: 500,
            sink_retry_timeout_ms: None,
            publish_every: 1,
            schemas: SchemaTable::default(),
        }
    }
}

/// Errors of the consumer runtime.
#[derive(Debug)]
pub enum LoggerError {
    /// A setting is out of range; the message names it.
    Config(String),
    /// The ring could not be created.
    Ring(RingError),
    /// The consumer thread has stopped (it panicked or was shut down).
    ConsumerGone,
    /// Spawning the consumer thread, or the sink, failed.
    Io(io::Error),
}

impl core::fmt::Display for LoggerError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LoggerError::Config(m) => write!(f, "invalid logger config: {m}"),
            LoggerError::Ring(e) => write!(f, "{e}"),
            LoggerError::ConsumerGone => write!(f, "the dplog consumer thread has stopped"),
            LoggerError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for LoggerError {}

impl From<RingError> for LoggerError {
    fn from(e: RingError) -> Self {
        LoggerError::Ring(e)
    }
}

/// A snapshot of every counter, summed over the rings of one logger.
///
/// Accounting: `produced = enqueued + dropped_full + dropped_degraded +
/// dropped_disconnected + dropped_stopped` (see [`Stats::dropped`]), and once the logger is
/// shut down with its producers dropped,
/// `produced = written_records + dropped() + dropped_format + dropped_sink
/// + dropped_shutdown`.
/// In-band [`DropReport`] lines are not records and are counted apart, in
/// `drop_reports`.
/// While running, `enqueued - dequeued` records sit in rings, `sink_pending`
/// in the sink awaiting acknowledgement, and the rest of
/// `dequeued - written_records - dropped_sink - dropped_shutdown` in the
/// batch buffer (see [`Stats::in_flight`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Records whose fate was decided by a producer (enqueued or dropped).
    pub produced: u64,
    /// Records copied into a ring.
    pub enqueued: u64,
    /// Records dropped because the ring was full ([`Backpressure::Drop`],
    /// or `Degrade` at 100% fill).
    pub dropped_full: u64,
    /// Records dropped by [`Backpressure::Degrade`] above the high
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
    /// sink kept of batches it refused ([`Sink::kept_of_refused`]: a file
    /// on a full disk). A record the formatter turned
    /// into zero bytes on purpose (a filter) counts here too: with its
    /// batch, or at once if the whole batch formatted to nothing (no sink
    /// call is made then). A record the formatter could not format is in
    /// `dropped_format` instead.
    pub written_records: u64,
    /// Records the formatter could not format ([`Formatter::take_skipped`]:
    /// a schema id the logger has no schema for, a record shorter than its
    /// schema, a record whose header was never set): dropped, with a line
    /// on stderr at most every 5 s.
    pub dropped_format: u64,
    /// Bytes in batches the sink accepted.
    pub written_bytes: u64,
    /// Records the sink refused: whole batches (a permanent error, or given
    /// up on after [`LoggerConfig::sink_retry_timeout_ms`]) less the records
    /// it kept of them ([`Sink::kept_of_refused`]), and single records it
    /// reported failed through [`Sink::poll`] (e.g. a syslog message too
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
    /// ([`LoggerConfig::shutdown_timeout_ms`]) expired: batches the sink
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

/// Consumer-side totals; single writer (the consumer thread), Relaxed
/// load+store. The partner for final reads is the thread join in
/// [`Logger::shutdown`].
#[derive(Default)]
struct ConsumerTotals {
    written_records: AtomicU64,
    written_bytes: AtomicU64,
    dropped_sink: AtomicU64,
    sink_errors: AtomicU64,
    sink_retries: AtomicU64,
    sink_pending: AtomicU64,
    dropped_shutdown: AtomicU64,
    dropped_format: AtomicU64,
    batches: AtomicU64,
    formatted: AtomicU64,
    drop_reports: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    // Relaxed: single-writer statistic (see `ConsumerTotals`).
    c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}

enum Control<R: Record> {
    AddRing(Consumer<R>),
    Flush(Sender<io::Result<()>>),
    Reopen(Sender<io::Result<()>>),
    Shutdown(Sender<io::Result<()>>),
}

/// A running consumer thread plus the rings it drains.
///
/// Create with [`Logger::start`], get one [`LogProducer`] per producing
/// thread with [`Logger::producer`], and end with [`Logger::shutdown`],
/// which drains every ring, writes, flushes and closes the sink.
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
        let worker = ConsumerLoop {
            rx,
            rings: Vec::new(),
            formatter,
            sink,
            buf,
            batch_records: 0,
            batch_empty: 0,
            batch_reports: Vec::new(),
            totals: totals.clone(),
            config: config.clone(),
            last_event_time: 0,
            stop: None,
            deadline: None,
            next_tick: Instant::now(),
            pending: 0,
            clock: TscClock::new(Duration::from_millis(5)),
            batch_samples: Vec::with_capacity(4096),
            latency: latency.clone(),
            passes: 0,
            reorder: config.reorder_window_ns.map(|w| {
                Reorder::new(
                    w,
                    Duration::from_millis(config.reorder_idle_ms),
                    config.ring_capacity,
                    config.schemas.clone(),
                    rules.event_time,
                )
            }),
            event_time: rules.event_time,
            last_skip_diag: None,
            failing_since: None,
            last_diag: None,
            abandoned: 0,
            lost_error: None,
            sink_drops: None,
            sink_report: 0,
            written_event_time: 0,
            report_try_at: Instant::now(),
        };
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
    /// drain stays in its ring and shows in [`Stats::in_flight`].
    ///
    /// Errors: [`LoggerError::Io`] with the sink's flush or close error (the
    /// counters still say what was written); [`LoggerError::ConsumerGone`]
    /// if the consumer thread panicked.
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

/// A producer handle bound to one ring, applying the logger's
/// [`Backpressure`] policy in [`log`](Self::log).
///
/// It dereferences to the raw [`Producer`] for `try_push`, `push` and the
/// burst variants. `Send`, not `Sync`: one per producing thread.
pub struct LogProducer<R: Record> {
    inner: Producer<R>,
    /// The ring's id within its logger ([`RingStats::id`]).
    ring_id: u32,
    /// The logger's backpressure policy and this ring's `degrade` state.
    policy: Policy<R>,
}

impl<R: Record> core::fmt::Debug for LogProducer<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LogProducer")
            .field("inner", &self.inner)
            .field("ring_id", &self.ring_id)
            .field("policy", &self.policy.policy)
            .field("degraded", &self.policy.degraded)
            .finish_non_exhaustive()
    }
}

impl<R: Record> LogProducer<R> {
    /// Hands `rec` to the ring under the configured policy:
    /// - `Block` waits for a slot (lossless);
    /// - `Drop` (`drop_newest`) drops it if the ring is full, counted in
    ///   [`Stats::dropped_full`];
    /// - `Degrade` also drops it, counted in [`Stats::dropped_degraded`],
    ///   when the ring is degraded (see [`DegradeConfig`]) and
    ///   the record's priority ([`Record::priority_in`] with the logger's
    ///   [`LoggerConfig::schemas`]) is below the minimum.
    ///
    /// Returns `false` if the record was not enqueued (dropped, or the
    /// consumer is gone — counted in [`Stats::dropped_disconnected`] — or
    /// has stopped the ring after a protocol violation — counted in
    /// [`Stats::dropped_stopped`], whatever the policy). Never allocates.
    #[inline]
    pub fn log(&mut self, rec: R) -> bool {
        self.policy.log(&mut self.inner, rec)
    }

    /// True while `degrade` sheds low-priority records.
    pub fn degraded(&self) -> bool {
        self.policy.degraded
    }

    /// [`log`](Self::log) for a burst; one index publish per burst (per run
    /// of accepted records under `degrade`). Returns how many were
    /// enqueued; the rest are counted as dropped, by reason.
    #[inline]
    pub fn log_burst(&mut self, recs: &[R]) -> usize {
        self.policy.log_burst(&mut self.inner, recs)
    }

    /// The policy this producer applies.
    pub fn policy(&self) -> Backpressure {
        self.policy.policy
    }

    /// The id of this producer's ring within its logger
    /// ([`RingStats::id`], registration order from 0), the id the
    /// consumer names in drop reports and diagnostics.
    pub fn ring_id(&self) -> u32 {
        self.ring_id
    }
}

impl<R: Record> core::ops::Deref for LogProducer<R> {
    type Target = Producer<R>;
    fn deref(&self) -> &Producer<R> {
        &self.inner
    }
}

impl<R: Record> core::ops::DerefMut for LogProducer<R> {
    fn deref_mut(&mut self) -> &mut Producer<R> {
        &mut self.inner
    }
}

struct ConsumerLoop<R: Record, F, S> {
    rx: Receiver<Control<R>>,
    rings: Vec<Consumer<R>>,
    formatter: F,
    sink: S,
    buf: Vec<u8>,
    batch_records: u64,
    /// Of `batch_records`, those the formatter turned into zero bytes: no
    /// line of theirs reaches the sink, so an asynchronous sink never
    /// reports on them; they count as written with their batch.
    batch_empty: u64,
    /// Byte ranges of the drop-report lines in `buf`, handed to
    /// `Sink::write_batch_marked` so asynchronous sinks leave them out of
    /// their record counts.
    batch_reports: Vec<core::ops::Range<usize>>,
    totals: Arc<ConsumerTotals>,
    config: LoggerConfig,
    /// [`Record::event_time`] of the last record formatted: where an
    /// in-band drop report sits on the records' timeline
    /// ([`DropReport::record_time_ns`]).
    last_event_time: u64,
    /// Reads a record's event time with `config.schemas`.
    event_time: fn(&R, &SchemaTable) -> u64,
    /// When the last "records dropped by the formatter" line was printed.
    last_skip_diag: Option<Instant>,
    /// A shutdown request seen while retrying a batch; served by `run`.
    stop: Option<Sender<io::Result<()>>>,
    /// Set once shutdown starts: retries and drains end here.
    deadline: Option<Instant>,
    /// When `maintain` next calls `Sink::tick` and `Sink::poll`.
    next_tick: Instant,
    /// Records accepted by the sink as `Pending`, not yet resolved.
    pending: i64,
    /// TSC → UTC conversion for drop reports and latency.
    clock: TscClock,
    /// Enqueue timestamps (ticks) of the sampled records in `buf`.
    batch_samples: Vec<u64>,
    latency: Arc<LatencyHistogram>,
    /// Drain passes, to recalibrate the clock every 1024 passes or idle.
    passes: u64,
    /// The reorder window, when configured.
    reorder: Option<Reorder<R>>,
    /// First retryable write error since the sink last took a batch.
    failing_since: Option<Instant>,
    /// When the last sink-failure diagnostic was printed.
    last_diag: Option<Instant>,
    /// Records given up on (retry timeout or shutdown deadline) while the
    /// sink failed, since it last took a batch.
    abandoned: u64,
    /// The retryable write error (ENOSPC, ...) of the last batch given up
    /// on, reported by `finish` when the sink's flush and close succeed.
    lost_error: Option<(io::ErrorKind, String)>,
    /// Records dropped in the sink and not yet reported in-band.
    sink_drops: Option<SinkDrops>,
    /// Bytes of the in-band report of `sink_drops` at the head of `buf`
    /// (0: none there).
    sink_report: usize,
    /// [`Record::event_time`] of the last record of the last batch the
    /// sink took: where a sink drop report sits on the records' timeline.
    written_event_time: u64,
    /// Earliest next try of a batch that holds nothing but the sink drop
    /// report, while idle.
    report_try_at: Instant,
}

/// Records dropped in the sink since the last in-band report of them.
#[derive(Clone, Copy)]
struct SinkDrops {
    dropped: u64,
    /// Wall clock (ns since the Unix epoch) of the first and last give-up.
    first_ns: u64,
    last_ns: u64,
    /// `written_event_time` at the first drop.
    after: u64,
}

/// Period of `Sink::tick` / `Sink::poll` calls.
const TICK_PERIOD: Duration = Duration::from_millis(2);
/// First and longest backoff between retries of a batch.
const RETRY_BACKOFF_MIN: Duration = Duration::from_millis(1);
const RETRY_BACKOFF_MAX: Duration = Duration::from_millis(200);
/// Shortest interval between two sink-failure diagnostics on stderr.
const DIAG_PERIOD: Duration = Duration::from_secs(5);

fn sink_io(e: SinkError) -> io::Error {
    e.into_io()
}

impl<R: Record, F: Formatter<R>, S: Sink> ConsumerLoop<R, F, S> {
    fn run(mut self) {
        if let Some(cpu) = self.config.consumer_cpu {
            // Best effort: an invalid CPU leaves the thread unpinned.
            let _ = crate::affinity::pin_current_thread(cpu);
        }
        if let Some(cal) = self.clock.calibration() {
            self.formatter.tsc_calibration(&cal);
        }
        let mut idle_rounds = 0u32;
        loop {
            if let Some(ack) = self.stop.take() {
                let r = self.finish();
                let _ = ack.send(r);
                return;
            }
            while let Ok(msg) = self.rx.try_recv() {
                if self.control(msg) {
                    return;
                }
            }
            if self.drain_once() > 0 {
                idle_rounds = 0;
                continue;
            }
            // Idle: every ring is empty; the reorder window keeps what it
            // staged until the rings holding it back show newer times or
            // go idle (see `crate::reorder`).
            if self.reorder.as_ref().is_some_and(|r| r.len() > 0) {
                self.emit_reordered(false);
            }
            // Idle: do not sit on a partial batch while nothing arrives. A
            // batch of nothing but the sink drop report is tried at most
            // every RETRY_BACKOFF_MAX: the sink may still be failing.
            if self.buf.len() > self.sink_report || (!self.buf.is_empty() && self.report_try_due())
            {
                self.write_batch();
            }
            self.maintain();
            if idle_rounds == 0 {
                self.recalibrate();
            }
            // Drop finished rings, writing their last drop report first
            // (after `is_finished`, every drop of their producers is seen).
            let mut i = 0;
            while i < self.rings.len() {
                if self.rings[i].is_finished() {
                    if self.config.drop_reports {
                        self.report_drops(i);
                    }
                    if let Some(ro) = &mut self.reorder {
                        // Kept until its staged records are written; it
                        // holds no other ring's back meanwhile.
                        ro.finish(i);
                        if ro.has_staged(i) {
                            i += 1;
                            continue;
                        }
                        ro.remove(i);
                    }
                    self.rings.remove(i);
                } else {
                    i += 1;
                }
            }
            idle_rounds = idle_rounds.saturating_add(1);
            if idle_rounds < 64 {
                core::hint::spin_loop();
            } else if idle_rounds < 128 {
                std::thread::yield_now();
            } else {
                let wait = Duration::from_micros(
                    (u64::from(idle_rounds - 127) * 10).min(self.config.idle_sleep_us),
                );
                match self.rx.recv_timeout(wait) {
                    Ok(msg) => {
                        if self.control(msg) {
                            return;
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => {
                        // The Logger is gone without a shutdown; the error
                        // is counted in sink_errors by `finish`.
                        let _ = self.finish();
                        return;
                    }
                }
            }
        }
    }

    /// Handles one control message; true when the loop must end.
    fn control(&mut self, msg: Control<R>) -> bool {
        match msg {
            Control::AddRing(c) => {
                self.rings.push(c);
                false
            }
            Control::Flush(ack) => {
                self.write_batch();
                let r = self.sink.flush();
                self.count_err(&r);
                let _ = ack.send(r.map_err(sink_io));
                false
            }
            Control::Reopen(ack) => {
                self.write_batch();
                let r = self.sink.reopen();
                self.count_err(&r);
                let _ = ack.send(r.map_err(sink_io));
                false
            }
            Control::Shutdown(ack) => {
                let r = self.finish();
                let _ = ack.send(r);
                true
            }
        }
    }

    /// Counts a failed sink call in `sink_errors` (and `sink_retries` when
    /// retryable).
    fn count_err<T>(&self, r: &Result<T, SinkError>) {
        if let Err(e) = r {
            bump(&self.totals.sink_errors, 1);
            if e.is_retryable() {
                bump(&self.totals.sink_retries, 1);
            }
        }
    }

    /// Books asynchronous outcomes reported by `Sink::poll`.
    fn absorb(&mut self, p: Progress) {
        if p == Progress::default() {
            return;
        }
        let t = &self.totals;
        bump(&t.written_records, p.delivered_records);
        bump(&t.written_bytes, p.delivered_bytes);
        bump(&t.dropped_sink, p.failed_records);
        // Signed: outcomes of a batch's records the sink sent before a
        // retryable error may arrive before the batch is accepted.
        self.pending -= (p.delivered_records + p.failed_records) as i64;
        // Relaxed: single-writer statistic (see `ConsumerTotals`).
        t.sink_pending
            .store(self.pending.max(0) as u64, Ordering::Relaxed);
    }

    /// Periodic sink work (`tick`, then `poll`), at most every
    /// [`TICK_PERIOD`].
    fn maintain(&mut self) {
        let now = Instant::now();
        if now < self.next_tick {
            return;
        }
        self.next_tick = now + TICK_PERIOD;
        let r = self.sink.tick(now);
        self.count_err(&r);
        let p = self.sink.poll();
        self.absorb(p);
    }

    /// Waits up to `backoff` before a retry, serving control messages
    /// meanwhile: rings are added, flush and reopen are answered, and a
    /// shutdown request starts the shutdown deadline (served by `run`).
    fn wait_for_retry(&mut self, backoff: Duration, last: &SinkError) {
        let until = Instant::now() + backoff;
        loop {
            let now = Instant::now();
            if now >= until {
                break;
            }
            match self.rx.recv_timeout(until - now) {
                Ok(Control::AddRing(c)) => self.rings.push(c),
                Ok(Control::Flush(ack)) => {
                    let _ = ack.send(Err(io::Error::new(
                        last.io().kind(),
                        format!("sink is retrying a batch: {last}"),
                    )));
                }
                Ok(Control::Reopen(ack)) => {
                    let r = self.sink.reopen();
                    self.count_err(&r);
                    let _ = ack.send(r.map_err(sink_io));
                }
                Ok(Control::Shutdown(ack)) => {
                    self.stop_requested(ack);
                    break;
                }
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => {
                    // The Logger is gone without a shutdown: stop as if
                    // asked, with nobody to answer.
                    let (tx, _rx) = bounded(1);
                    self.stop_requested(tx);
                    break;
                }
            }
        }
        self.next_tick = Instant::now();
        self.maintain();
    }

    fn stop_requested(&mut self, ack: Sender<io::Result<()>>) {
        self.deadline.get_or_insert_with(|| {
            Instant::now() + Duration::from_millis(self.config.shutdown_timeout_ms)
        });
        if self.stop.is_none() {
            self.stop = Some(ack);
        } else {
            let _ = ack.send(Ok(()));
        }
    }

    /// One round-robin pass: at most `burst` records from each ring.
    /// Returns the number of records read.
    fn drain_once(&mut self) -> usize {
        let mut total = 0;
        self.passes += 1;
        if self.passes % 64 == 0 {
            self.recalibrate();
        }
        if self.reorder.is_some() {
            return self.drain_reordered(total);
        }
        for i in 0..self.rings.len() {
            let buf = &mut self.buf;
            let fmt = &mut self.formatter;
            let samples = &mut self.batch_samples;
            let empty = &mut self.batch_empty;
            let last_time = &mut self.last_event_time;
            let schemas = &self.config.schemas;
            let event_time = self.event_time;
            let n = self.rings[i].read_burst_sampled(
                self.config.burst,
                |rec| {
                    let before = buf.len();
                    fmt.format(rec, buf);
                    *empty += u64::from(buf.len() == before);
                    *last_time = event_time(rec, schemas);
                },
                |t| samples.push(t),
            );
            self.batch_records += n as u64;
            total += n;
            self.count_skipped();
            if self.config.drop_reports {
                self.report_drops(i);
            }
            if self.buf.len() >= self.config.batch_bytes {
                self.write_batch();
            }
        }
        if total > 0 {
            bump(&self.totals.formatted, total as u64);
        }
        total
    }

    /// Moves the records the formatter could not format out of the batch
    /// (they appended nothing, so they are among `batch_empty`) into
    /// `dropped_format`, with a line on stderr at most every 5 s.
    #[inline]
    fn count_skipped(&mut self) {
        let skipped = self.formatter.take_skipped();
        if skipped == 0 {
            return;
        }
        self.skipped_count(skipped);
    }

    #[cold]
    fn skipped_count(&mut self, skipped: u64) {
        self.batch_records -= skipped.min(self.batch_records);
        self.batch_empty -= skipped.min(self.batch_empty);
        bump(&self.totals.dropped_format, skipped);
        let now = Instant::now();
        if self
            .last_skip_diag
            .map_or(true, |t| now.duration_since(t) >= Duration::from_secs(5))
        {
            self.last_skip_diag = Some(now);
            crate::diag_line!(
                "dplog: {skipped} record(s) dropped: the formatter has no schema for their schema id, or they are shorter than their schema (dropped_format = {} so far)",
                self.totals.dropped_format.load(Ordering::Relaxed)
            );
        }
    }

    /// [`drain_once`](Self::drain_once) with the reorder window: stage one
    /// burst per ring, then format what the window lets out.
    fn drain_reordered(&mut self, mut total: usize) -> usize {
        let Some(mut ro) = self.reorder.take() else {
            return total;
        };
        let now = Instant::now();
        ro.track(self.rings.len(), now);
        for i in 0..self.rings.len() {
            let samples = &mut self.batch_samples;
            // A ring whose queue is full waits (see `crate::reorder`).
            total += self.rings[i].read_burst_sampled(
                self.config.burst.min(ro.room(i)),
                |rec| ro.push(i, *rec, now),
                |t| samples.push(t),
            );
            if self.config.drop_reports {
                self.report_drops(i);
            }
        }
        self.reorder = Some(ro);
        self.emit_reordered(false);
        total
    }

    /// Formats the records the reorder window releases (all of them if
    /// `all`), writing batches as they fill.
    fn emit_reordered(&mut self, all: bool) {
        let Some(mut ro) = self.reorder.take() else {
            return;
        };
        loop {
            let buf = &mut self.buf;
            let fmt = &mut self.formatter;
            let limit = self.config.batch_bytes;
            let empty = &mut self.batch_empty;
            let last_time = &mut self.last_event_time;
            let schemas = &self.config.schemas;
            let event_time = self.event_time;
            // Stops after the record that fills the batch.
            let n = ro.emit(Instant::now(), all, |r| {
                let before = buf.len();
                fmt.format(r, buf);
                *empty += u64::from(buf.len() == before);
                *last_time = event_time(r, schemas);
                buf.len() < limit
            }) as u64;
            self.batch_records += n;
            bump(&self.totals.formatted, n);
            self.count_skipped();
            if self.buf.len() >= self.config.batch_bytes {
                self.write_batch();
            } else {
                break;
            }
        }
        self.reorder = Some(ro);
    }

    /// Recalibrates the TSC clock if a second has passed and hands the new
    /// calibration to the formatter.
    fn recalibrate(&mut self) {
        if self.clock.maybe_recalibrate(realtime_ns()) {
            if let Some(cal) = self.clock.calibration() {
                self.formatter.tsc_calibration(&cal);
            }
        }
    }

    /// Writes in-band [`DropReport`]s for ring `i` if it has unreported
    /// drops: one per reason that has some ([`DropReport::with_reason`]),
    /// all of the same interval.
    fn report_drops(&mut self, i: usize) {
        if let Some(d) = self.rings[i].take_drop_report() {
            let base = DropReport::new(
                self.rings[i].id(),
                0,
                self.clock.to_utc_ns(d.first_ns),
                self.clock.to_utc_ns(d.last_ns),
            )
            .with_record_time(self.last_event_time);
            for (reason, n) in d.reasons() {
                let rep = DropReport {
                    dropped: n,
                    ..base.with_reason(reason)
                };
                self.write_drop_report(&rep);
            }
            // Only a count no reason accounts for: reported as the ring's.
            if d.unattributed() > 0 {
                self.write_drop_report(&DropReport {
                    dropped: d.unattributed(),
                    ..base
                });
            }
        }
    }

    /// Formats one drop report into the batch.
    fn write_drop_report(&mut self, rep: &DropReport) {
        let start = self.buf.len();
        self.formatter.format_drop_report(rep, &mut self.buf);
        if self.buf.len() > start {
            self.batch_reports.push(start..self.buf.len());
        }
        bump(&self.totals.drop_reports, 1);
    }

    /// Books the enqueue-to-write latency of the batch's sampled records,
    /// now that the sink has taken the batch.
    fn record_latency(&mut self) {
        if self.batch_samples.is_empty() {
            return;
        }
        let now = now_ticks();
        let clock = &self.clock;
        self.latency.record_all(
            self.batch_samples
                .iter()
                .map(|&t| clock.ticks_to_ns(now.saturating_sub(t))),
        );
        self.batch_samples.clear();
    }

    /// Hands the batch buffer to the sink. A retryable error is retried
    /// with the same bytes after a backoff (1 ms doubling to 200 ms) until
    /// it succeeds, fails for good, or the shutdown deadline passes; the
    /// rings meanwhile fill up and producers see their backpressure policy.
    fn write_batch(&mut self) {
        if self.buf.is_empty() {
            // Records that formatted to zero bytes (a formatter that skips
            // a record type): there is nothing for the sink to accept or
            // refuse, so they are done and count as written (see
            // `Stats::written_records`); their latency samples are not
            // booked, as no sink took them.
            if self.batch_records > 0 {
                bump(&self.totals.written_records, self.batch_records);
                self.batch_records = 0;
            }
            self.batch_empty = 0;
            self.batch_samples.clear();
            return;
        }
        // Past the shutdown deadline with the sink failing, every further
        // try could block for the sink's own I/O timeout (a receiver that
        // stopped reading): one such wait per batch left in the rings made
        // the shutdown last far beyond the deadline. The batch is given up
        // on without a try, as a tried one would be.
        if self.failing_since.is_some() && self.deadline.is_some_and(|d| Instant::now() >= d) {
            let dropped = self.batch_records;
            bump(&self.totals.dropped_shutdown, dropped);
            self.abandoned += dropped;
            self.clear_batch();
            return;
        }
        // Nothing but the report of earlier sink drops: one try while the
        // sink fails (it is placed again at the head of the next batch).
        let report_only = self.sink_report > 0 && self.buf.len() == self.sink_report;
        let mut backoff = RETRY_BACKOFF_MIN;
        loop {
            let r = self.sink.write_batch_marked(&self.buf, &self.batch_reports);
            self.count_err(&r);
            if r.is_ok() {
                self.sink_recovered();
                self.sink_report_landed();
                self.written_event_time = self.last_event_time;
            }
            match r {
                Ok(Accepted::Delivered) => {
                    self.record_latency();
                    let t = &self.totals;
                    bump(&t.written_records, self.batch_records);
                    bump(&t.written_bytes, self.buf.len() as u64);
                    bump(&t.batches, 1);
                    break;
                }
                Ok(Accepted::Pending) => {
                    self.record_latency();
                    let t = &self.totals;
                    bump(&t.batches, 1);
                    // Records that formatted to nothing have no line for
                    // the sink to report on: written with the batch.
                    bump(&t.written_records, self.batch_empty);
                    self.pending += (self.batch_records - self.batch_empty) as i64;
                    // Relaxed: single-writer statistic (see `ConsumerTotals`).
                    t.sink_pending
                        .store(self.pending.max(0) as u64, Ordering::Relaxed);
                    break;
                }
                Err(SinkError::Permanent(_)) => {
                    // Counted in sink_errors and dropped_sink; the sink
                    // refused this batch alone and may take the next.
                    let dropped = self.book_refused();
                    bump(&self.totals.dropped_sink, dropped);
                    self.note_sink_drops(dropped);
                    break;
                }
                Err(e @ SinkError::Retryable(_)) => {
                    let now = Instant::now();
                    let since = *self.failing_since.get_or_insert(now);
                    if self.deadline.is_some_and(|d| now >= d) {
                        let dropped = self.book_refused();
                        bump(&self.totals.dropped_shutdown, dropped);
                        self.abandon(&e, dropped);
                        break;
                    }
                    let give_up = report_only
                        || self.config.sink_retry_timeout_ms.is_some_and(|ms| {
                            now.duration_since(since) >= Duration::from_millis(ms)
                        });
                    if give_up {
                        let dropped = self.book_refused();
                        bump(&self.totals.dropped_sink, dropped);
                        self.note_sink_drops(dropped);
                        self.abandon(&e, dropped);
                    }
                    self.diagnose(&e, now.duration_since(since));
                    if give_up {
                        break;
                    }
                    self.wait_for_retry(backoff, &e);
                    backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
                }
            }
        }
        self.clear_batch();
    }

    /// Empties the batch after the sink took it or it was given up on,
    /// places a pending sink drop report at the head of the next one, and
    /// serves the sink's periodic work.
    fn clear_batch(&mut self) {
        self.buf.clear();
        self.batch_reports.clear();
        self.batch_records = 0;
        self.batch_empty = 0;
        self.batch_samples.clear();
        self.sink_report = 0;
        self.place_sink_report();
        self.maintain();
    }

    /// Books the batch being given up on after retryable errors; `dropped`
    /// of its records are lost.
    fn abandon(&mut self, e: &SinkError, dropped: u64) {
        self.sink.abandon();
        self.abandoned += dropped;
        self.lost_error = Some((e.io().kind(), e.io().to_string()));
    }

    /// The batch in `buf` is refused for good: counts what the sink kept
    /// of it ([`Sink::kept_of_refused`]) as written and returns how many of
    /// its records are dropped.
    fn book_refused(&mut self) -> u64 {
        let kept = self.sink.kept_of_refused(&self.buf, &self.batch_reports);
        let records = kept.records.min(self.batch_records);
        let t = &self.totals;
        bump(&t.written_records, records);
        bump(&t.written_bytes, kept.bytes.min(self.buf.len()) as u64);
        if kept.bytes >= self.sink_report {
            // The drop report at the head of the batch is in the output.
            self.sink_report_landed();
        }
        self.batch_records - records
    }

    /// Adds `n` records dropped in the sink to those the next in-band
    /// report announces.
    fn note_sink_drops(&mut self, n: u64) {
        if n == 0 || !self.config.drop_reports {
            return;
        }
        let now = realtime_ns();
        match &mut self.sink_drops {
            Some(d) => {
                d.dropped += n;
                d.last_ns = now;
            }
            None => {
                self.sink_drops = Some(SinkDrops {
                    dropped: n,
                    first_ns: now,
                    last_ns: now,
                    after: self.written_event_time,
                })
            }
        }
    }

    /// Formats the report of the unreported sink drops at the head of the
    /// (empty) batch buffer, so it reaches the output with the first batch
    /// the sink takes.
    fn place_sink_report(&mut self) {
        let Some(d) = self.sink_drops else {
            return;
        };
        debug_assert!(self.buf.is_empty());
        let rep = DropReport::sink(d.dropped, d.first_ns, d.last_ns).with_record_time(d.after);
        self.formatter.format_drop_report(&rep, &mut self.buf);
        if self.buf.is_empty() {
            // A format without in-band lines: the counters say it.
            self.sink_drops = None;
            bump(&self.totals.drop_reports, 1);
        } else {
            self.sink_report = self.buf.len();
            self.batch_reports.push(0..self.buf.len());
        }
    }

    /// The batch with the sink drop report at its head reached the output
    /// (whole, or the part with the report): those drops are reported.
    fn sink_report_landed(&mut self) {
        if self.sink_report > 0 {
            self.sink_report = 0;
            self.sink_drops = None;
            bump(&self.totals.drop_reports, 1);
        }
    }

    /// True at most once per [`RETRY_BACKOFF_MAX`]: the idle loop may try a
    /// batch that holds only the sink drop report.
    fn report_try_due(&mut self) -> bool {
        let now = Instant::now();
        if now < self.report_try_at {
            return false;
        }
        self.report_try_at = now + RETRY_BACKOFF_MAX;
        true
    }

    /// The sink took a batch: ends a failure episode (with a note on
    /// stderr if one was reported).
    fn sink_recovered(&mut self) {
        if let Some(since) = self.failing_since.take() {
            if self.last_diag.is_some() {
                crate::diag_line!(
                    "dplog: sink {} recovered after failing for {:.1} s; {} records were dropped meanwhile",
                    self.sink.describe(),
                    since.elapsed().as_secs_f64(),
                    self.abandoned
                );
            }
        }
        self.last_diag = None;
        self.abandoned = 0;
    }

    /// Prints what is failing to stderr, at most once per [`DIAG_PERIOD`]:
    /// the sink, its OS error, for how long, how many records wait, and
    /// what happens next.
    fn diagnose(&mut self, e: &SinkError, failing: Duration) {
        let now = Instant::now();
        if self
            .last_diag
            .is_some_and(|t| now.duration_since(t) < DIAG_PERIOD)
        {
            return;
        }
        self.last_diag = Some(now);
        let in_rings: usize = self.rings.iter().map(|r| r.len()).sum();
        let next = match self.config.sink_retry_timeout_ms {
            Some(ms) if failing >= Duration::from_millis(ms) => format!(
                "past sink_retry_timeout_ms = {ms}: batches are dropped (dropped_sink) until a write succeeds"
            ),
            Some(ms) => {
                format!("retrying with backoff; batches are dropped after sink_retry_timeout_ms = {ms}")
            }
            None => format!(
                "retrying with backoff until it recovers (sink_retry_timeout_ms is not set); producers see their backpressure policy ({})",
                self.config.backpressure.name()
            ),
        };
        crate::diag_line!(
            "dplog: sink {} failing for {:.1} s: {}; {} records waiting ({} in the batch, {} in rings), {} dropped since the failure began; {}",
            self.sink.describe(),
            failing.as_secs_f64(),
            e.io(),
            self.batch_records + in_rings as u64,
            self.batch_records,
            in_rings,
            self.abandoned,
            next
        );
    }

    /// Drains until every ring is empty, writes, flushes, waits for pending
    /// deliveries until the shutdown deadline, closes; what is still
    /// undelivered is counted in `dropped_shutdown`.
    fn finish(&mut self) -> io::Result<()> {
        let deadline = *self.deadline.get_or_insert_with(|| {
            Instant::now() + Duration::from_millis(self.config.shutdown_timeout_ms)
        });
        while let Ok(msg) = self.rx.try_recv() {
            match msg {
                Control::AddRing(c) => self.rings.push(c),
                Control::Flush(ack) | Control::Shutdown(ack) | Control::Reopen(ack) => {
                    let _ = ack.send(Ok(()));
                }
            }
        }
        // The reorder window stages everything the rings hold, then
        // writes it in time order.
        if let Some(ro) = &mut self.reorder {
            ro.close();
        }
        while self.drain_once() > 0 {}
        self.emit_reordered(true);
        if let Some(n) = self.reorder.as_ref().map(|r| r.forced()).filter(|&n| n > 0) {
            crate::diag_line!(
                "dplog: reorder window: {n} record(s) written while a ring holding them back had a full staged queue (ring capacity) without showing a time one window newer; they are in order unless that ring later wrote older records (a larger [ring] capacity holds more)"
            );
        }
        self.write_batch();
        // The last batch was dropped: its drop report gets one try alone.
        if self.sink_report > 0 {
            self.write_batch();
        }
        let flushed = self.sink.flush();
        self.count_err(&flushed);
        let drained = self.sink.drain(deadline);
        self.count_err(&drained);
        let p = self.sink.poll();
        self.absorb(p);
        let closed = self.sink.close();
        self.count_err(&closed);
        let p = self.sink.poll();
        self.absorb(p);
        if self.pending > 0 {
            bump(&self.totals.dropped_shutdown, self.pending as u64);
            self.pending = 0;
            // Relaxed: single-writer statistic (see `ConsumerTotals`).
            self.totals.sink_pending.store(0, Ordering::Relaxed);
        }
        let r = flushed.and(drained).and(closed).map_err(sink_io);
        match (r, self.lost_error.take()) {
            // The sink closed cleanly but records were lost to a write
            // error: report that error, not a silent success.
            (Ok(()), Some((kind, msg))) => Err(io::Error::new(
                kind,
                format!(
                    "sink {}: records were not written: {msg}",
                    self.sink.describe()
                ),
            )),
            (r, _) => r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::test_record::{TestRecord, CREATE, DELETE};

    fn ev(e: u8, i: u64) -> TestRecord {
        TestRecord {
            nat_event: e,
            timestamp_ns: i,
            ..Default::default()
        }
    }

    /// A `degrade` producer over a 16-slot ring with the default 80 % / 50 %
    /// watermarks (13 and 8 records), no consumer thread: the test drains
    /// by hand, so every fill level is exact.
    #[test]
    fn degrade_sheds_creates_between_the_watermarks_and_keeps_deletes() {
        let (p, mut c) = ring::<TestRecord>(16).unwrap();
        let shared = c.shared().clone();
        // The default 80 % / 50 % watermarks of 16 slots: 13 and 8.
        let cfg = LoggerConfig {
            ring_capacity: 16,
            backpressure: Backpressure::Degrade,
            ..Default::default()
        };
        let mut lp = LogProducer {
            inner: p,
            ring_id: 0,
            policy: Policy::new(&cfg, RecordRules::own().priority),
        };
        let create = |i| ev(CREATE, i);
        let delete = |i| ev(DELETE, i);
        for i in 0..13 {
            assert!(lp.log(create(i)), "below the high watermark at {i}");
        }
        assert!(
            !lp.log(create(13)),
            "fill 13 = high watermark: creates shed"
        );
        assert!(lp.degraded());
        assert!(lp.log(delete(14)), "deletes outrank creates");
        // Fill 14 → 9: still at or above the low watermark.
        for _ in 0..5 {
            c.pop().unwrap();
        }
        assert!(!lp.log(create(15)));
        // Fill 9 → 7: below the low watermark, everything is accepted again.
        c.pop().unwrap();
        c.pop().unwrap();
        assert!(lp.log(create(16)));
        assert!(!lp.degraded());
        // Fill to 16 with deletes (accepted while degraded), then full.
        let mut i = 17;
        while lp.fill() < 16 {
            assert!(lp.log(delete(i)));
            i += 1;
        }
        assert!(!lp.log(delete(i)), "a full ring drops even a delete");
        let pc = &shared.producer_counters;
        assert_eq!(pc.dropped_degraded.load(Ordering::Relaxed), 2);
        assert_eq!(pc.dropped_full.load(Ordering::Relaxed), 1);
        // Bursts: below the watermark a burst goes in with one publish;
        // above it, creates are filtered out and counted.
        while c.pop().is_some() {}
        let burst: Vec<_> = (0..6)
            .map(|i| if i % 2 == 0 { create(i) } else { delete(i) })
            .collect();
        assert_eq!(lp.log_burst(&burst), 6);
        assert_eq!(lp.log_burst(&burst), 6);
        // Fill 12 < 13: not degraded, the burst takes the 4 free slots;
        // the rest goes record by record: create 4 is shed (fill 16 ≥ high),
        // delete 5 finds the ring full.
        assert_eq!(lp.log_burst(&burst), 4);
        assert_eq!(pc.dropped_degraded.load(Ordering::Relaxed), 2 + 1);
        assert_eq!(pc.dropped_full.load(Ordering::Relaxed), 1 + 1);
        let d = c.take_drop_report().unwrap();
        assert_eq!(d.dropped, 5, "all reasons, once each");
        assert_eq!(d.by_reason, [1 + 1, 2 + 1, 0, 0], "each under its own");
        assert!(d.first_ns <= d.last_ns);
        assert!(c.take_drop_report().is_none(), "reported once");
    }
}
