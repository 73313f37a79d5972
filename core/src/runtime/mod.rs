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
//!
//! The module's files, by role: the settings and errors
//! ([`LoggerConfig`], [`LoggerError`]: `config.rs`), the [`Logger`] handle
//! and its [`SnapshotSource`] (`logger.rs`), the policy-applying
//! [`LogProducer`] (`producer.rs`) and the consumer thread (`consumer/`:
//! its loop and control messages, the drain of the rings, the batch handed
//! to the sink, the in-band reports and diagnostics).

// Names the module and `Stats` docs link to.
#[cfg(doc)]
use crate::{format::Formatter, report::DropReport, sink::Sink, stats::RingStats, tsc::TscClock};

mod config;
mod consumer;
mod logger;
mod producer;

pub use config::{
    human_bytes, ring_memory, Backpressure, DegradeConfig, LoggerConfig, LoggerError,
    DEFAULT_RING_CAPACITY, MAX_BATCH_BYTES, MAX_LOGGER_RING_CAPACITY, MIN_BATCH_BYTES,
};
pub use logger::{Logger, SnapshotSource};
pub use producer::LogProducer;

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
