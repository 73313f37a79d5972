//! The logger's settings ([`LoggerConfig`], [`Backpressure`],
//! [`DegradeConfig`]), their bounds and the logger's error type.

use std::io;

// Names the docs link to.
#[cfg(doc)]
use crate::{DropReport, LogProducer, Logger, Producer, Record, Sink, Stats};

use crate::ring::RingError;
use crate::table::SchemaTable;

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

/// Default [`LoggerConfig::burst`]: 1024 records per ring per consumer
/// pass.
///
/// A pass loads a ring's producer index when fewer than `burst` records
/// are known to be waiting, and the consumer's pacing (see
/// [`LoggerConfig::poll_gap_max_us`]) aims at a whole burst per poll: the
/// burst sets how often the consumer takes the producer's index line (and
/// the slot lines next to where it writes) away from the producer's core.
/// Measured with the C peer harness (`benches/peers`, 1M NAT44 records,
/// `benches/RESULTS.md`): with 32, a distant placement (round trip
/// ~300 ns) made 15–23 % of the producer's calls take over 100 ns (p99.9
/// 260 ns, binary 12 M records/s); with 1024, none did (p99.9 100 ns,
/// 17 M/s), and the near placement's p99.9 went from 30 to 20 ns. A
/// pass of 1024 text records takes the consumer some 50–100 µs per ring
/// before it turns to the next ring.
pub const DEFAULT_BURST: usize = 1024;

/// Default [`LoggerConfig::poll_gap_max_us`]: 20 µs, ten times below the
/// idle sleep, so pacing does not lengthen the longest wait of a record.
pub const DEFAULT_POLL_GAP_MAX_US: u64 = 20;
/// Largest [`LoggerConfig::poll_gap_max_us`] accepted (1 ms).
pub const MAX_POLL_GAP_US: u64 = 1000;

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
    /// Most records read from one ring before moving to the next, and the
    /// records per poll of a ring's index the consumer's pacing aims at.
    /// Default [`DEFAULT_BURST`] (1024).
    pub burst: usize,
    /// Batch size in bytes that triggers a write; from
    /// [`MIN_BATCH_BYTES`] to [`MAX_BATCH_BYTES`]. Default 256 KiB.
    pub batch_bytes: usize,
    /// Longest sleep of an idle consumer, in microseconds. Default 200.
    /// With [`poll_gap_max_us`](Self::poll_gap_max_us), the longest a
    /// published record waits before the consumer reads it (plus the OS's
    /// wake-up delay of a sleeping thread, and the time to format what
    /// other rings held in the same pass).
    pub idle_sleep_us: u64,
    /// Longest pause, in microseconds, between two polls of the rings
    /// while the consumer is awake. After a pass that read less than a
    /// whole `burst` from every ring, the consumer waits before it loads
    /// the producers' published indices again, a pause that doubles from
    /// 0.5 µs per such pass up to this bound and halves after a pass that
    /// read a whole burst; meanwhile it touches no line a producer
    /// writes (it yields the CPU while more than 4 µs of the pause is
    /// left, then spins). Each poll of an index takes the producer's index line away
    /// from the producer's core, so its next publication waits for the
    /// line (a cross-core round trip): pacing keeps the polls near one per
    /// `burst` records at any rate, instead of one per few records. A
    /// record published while the consumer is awake therefore waits at
    /// most this long (plus one pass) before it is read; once idle, the
    /// consumer sleeps up to [`idle_sleep_us`](Self::idle_sleep_us) as
    /// before. A pause never lasts longer than a ring of `ring_capacity`
    /// slots takes to fill at 1.25 ns per record (faster than a producer
    /// core writes), so no ring fills because the consumer paused: 20.5
    /// µs for the default 16384 slots, 1.28 µs for 1024, no pacing below
    /// 400 slots. 0 turns pacing off (poll again at once, the behaviour
    /// before pacing; for comparison). Default
    /// [`DEFAULT_POLL_GAP_MAX_US`], at most [`MAX_POLL_GAP_US`].
    pub poll_gap_max_us: u64,
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
    /// [`MIN_BATCH_BYTES`]`..=`[`MAX_BATCH_BYTES`], a `poll_gap_max_us`
    /// above [`MAX_POLL_GAP_US`], degrade watermarks not
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
        if self.poll_gap_max_us > MAX_POLL_GAP_US {
            return Err(LoggerError::Config(format!(
                "poll_gap_max_us ([ring] poll_gap_max_us) = {} is above the limit of {MAX_POLL_GAP_US} µs (the longest a record may wait while the consumer is awake)",
                self.poll_gap_max_us
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
            burst: DEFAULT_BURST,
            batch_bytes: 256 * 1024,
            idle_sleep_us: 200,
            poll_gap_max_us: DEFAULT_POLL_GAP_MAX_US,
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
    /// [`Logger::shutdown`](crate::Logger::shutdown): records that
    /// [`LogProducer::log`](crate::LogProducer::log) accepted (it returned
    /// `true`) were neither written nor dropped for a counted reason: they
    /// were logged while the shutdown ran, after its final drain, and stay
    /// in their rings (the C `dplog_close` returns
    /// `DPLOG_ERR_UNDELIVERED` for them). The `Stats` returned beside it
    /// say the rest: `produced = written_records + dropped() +
    /// dropped_format + dropped_sink + dropped_shutdown + in_flight`.
    Undelivered {
        /// The records left in rings, [`Stats::in_flight`](crate::Stats::in_flight).
        in_flight: u64,
        /// Of the records produced, those written.
        written_records: u64,
    },
}

impl core::fmt::Display for LoggerError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LoggerError::Config(m) => write!(f, "invalid logger config: {m}"),
            LoggerError::Ring(e) => write!(f, "{e}"),
            LoggerError::ConsumerGone => write!(f, "the dplog consumer thread has stopped"),
            LoggerError::Io(e) => write!(f, "{e}"),
            LoggerError::Undelivered {
                in_flight,
                written_records,
            } => write!(
                f,
                "{in_flight} record(s) accepted by log() were not written: logged after the shutdown's final drain, they stay in their rings ({written_records} written; drop producers before shutdown)"
            ),
        }
    }
}

impl std::error::Error for LoggerError {}

impl From<RingError> for LoggerError {
    fn from(e: RingError) -> Self {
        LoggerError::Ring(e)
    }
}
