//! dplog core: fixed-size records, lock-free SPSC rings, producer handles
//! and the consumer runtime that formats records and writes them to sinks.
//!
//! A record is a `#[repr(C)]` struct that starts with a [`RecordHeader`]
//! and has a [`Schema`] (its fields, event time, priority and per-format
//! metadata). A forwarding core holds a [`LogProducer`] and copies records
//! into its ring with [`LogProducer::log`] — one record type per ring, or
//! any mix of types in 32-, 64- or 128-byte slots ([`Slot64`] & co); a
//! consumer thread started by [`Logger::start`] drains every ring in
//! bursts, formats with a [`Formatter`] and writes batches of at least
//! 64 KiB to a [`Sink`]. The crate knows no record type of its own: the NAT
//! records are one schema package (`dplog-schema-nat`) among others.
//!
//! Programs import the `dplog` facade crate, which re-exports this one at
//! its root: its crate page starts with a quick start (a record of your
//! own, its schema, a logger from TOML) and lists the field kinds of
//! [`schema!`] and the text templates' converters.
#![warn(missing_docs)]

/// Writes one diagnostic line to stderr, ignoring a write error (a closed
/// or full stderr must not panic a consumer thread, as `eprintln!` would).
#[doc(hidden)]
#[macro_export]
macro_rules! diag_line {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        // Formatted first, then one `write_all`: stderr is unbuffered, so
        // `writeln!` straight to it issues a write(2) per piece and a line
        // could interleave with another thread's, or be read half-written.
        let mut line = ::std::format!($($arg)*);
        line.push('\n');
        let _ = ::std::io::stderr().write_all(line.as_bytes());
    }};
}

pub mod affinity;
// The logger's settings: a leaf below the runtime, the policy and the
// shared-memory rings, re-exported as `dplog_core::runtime::*`.
#[cfg(not(loom))]
mod config;
pub mod format;
#[cfg(all(feature = "metrics", not(loom)))]
pub mod metrics;
#[cfg(not(loom))]
mod policy;
pub mod record;
#[cfg(not(loom))]
pub mod reorder;
pub mod report;
pub mod ring;
mod rules;
// The MPSC front end lives with the ring it shares (`ring/mpsc.rs`); its
// public path stays `dplog_core::mpsc`.
pub use ring::mpsc;
#[cfg(not(loom))]
pub mod runtime;
pub mod schema;
#[cfg(not(loom))]
pub mod shared_producer;
#[cfg(all(not(loom), target_os = "linux"))]
pub mod shm;
pub mod sink;
pub mod slot;
#[cfg(not(loom))]
pub mod stats;
mod sync;
pub mod table;
pub mod tsc;

pub use format::Formatter;
pub use mpsc::{mpsc_ring, MpProducer};
pub use record::{Record, RecordBytes, RecordHeader, PRIORITY_HIGH, PRIORITY_NORMAL};
pub use report::{
    drop_reason_code, drop_reason_name, DropReport, DROP_REASON_DEGRADED, DROP_REASON_DISCONNECTED,
    DROP_REASON_FULL, DROP_REASON_RING, DROP_REASON_SINK, DROP_REASON_STOPPED, SCHEMA_DROP_REPORT,
};
#[cfg(not(loom))]
pub use ring::RawWindow;
pub use ring::{
    ring, Consumer, Disconnected, DropReason, Producer, Reserved, RingError, MAX_CAPACITY,
};
#[cfg(not(loom))]
pub use runtime::{
    Backpressure, DegradeConfig, LogProducer, Logger, LoggerConfig, LoggerError, SnapshotSource,
    Stats, DEFAULT_BURST, DEFAULT_POLL_GAP_MAX_US, DEFAULT_RING_CAPACITY, MAX_BATCH_BYTES,
    MAX_LOGGER_RING_CAPACITY, MAX_POLL_GAP_US, MIN_BATCH_BYTES,
};
pub use schema::{FieldDef, FieldKind, HasSchema, Schema, SchemaError};
#[cfg(not(loom))]
pub use shared_producer::SharedProducer;
pub use sink::{Accepted, Kept, Progress, Sink, SinkCounters, SinkError};
pub use slot::{Slot, Slot128, Slot32, Slot64, SlotTooSmall};
#[cfg(not(loom))]
pub use stats::{LatencySummary, RingStats, Snapshot};
pub use sync::WaitSteps;
pub use table::{RecordRules, SchemaTable};
