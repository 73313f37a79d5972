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
//! The module's files, by role: the [`Logger`] handle
//! and its [`SnapshotSource`] (`logger.rs`), the policy-applying
//! [`LogProducer`] (`producer.rs`) and the consumer thread (`consumer/`:
//! its loop and control messages, the drain of the rings, the batch handed
//! to the sink, the in-band reports and diagnostics).

// Names the module docs link to.
#[cfg(doc)]
use crate::{format::Formatter, report::DropReport, sink::Sink, tsc::TscClock};

mod consumer;
mod logger;
mod producer;

pub use crate::config::{
    human_bytes, ring_memory, Backpressure, DegradeConfig, LoggerConfig, LoggerError,
    DEFAULT_BURST, DEFAULT_POLL_GAP_MAX_US, DEFAULT_RING_CAPACITY, MAX_BATCH_BYTES,
    MAX_LOGGER_RING_CAPACITY, MAX_POLL_GAP_US, MIN_BATCH_BYTES,
};
pub use crate::stats::Stats;
pub use logger::{Logger, SnapshotSource};
pub use producer::LogProducer;
