//! dplog core: fixed-size records, lock-free SPSC rings, producer handles
//! and the consumer runtime that formats records and writes them to sinks.
//!
//! A forwarding core holds a [`LogProducer`] and copies a
//! [`Nat44SessionRecord`] (64 bytes) into its ring with
//! [`LogProducer::log`]; a consumer thread started by [`Logger::start`]
//! drains every ring in bursts, formats with a [`Formatter`] and writes
//! batches of at least 64 KiB to a [`Sink`].
#![warn(missing_docs)]

pub mod affinity;
pub mod format;
pub mod record;
pub mod ring;
pub mod runtime;
pub mod schema;
pub mod sink;

pub use format::Formatter;
pub use record::{
    Nat44SessionRecord, NatAddressesExhaustedRecord, NatEvent, NatPortBlockRecord,
    NatPortsExhaustedRecord, NatQuotaExceededRecord, NatRecord, Record, RecordHeader,
    SCHEMA_NAT44_SESSION,
};
pub use schema::{FieldDef, FieldKind, HasSchema, Schema, SchemaError};
pub use ring::{ring, Consumer, Disconnected, Producer, RingError, MAX_CAPACITY};
pub use runtime::{
    Backpressure, LogProducer, Logger, LoggerConfig, LoggerError, Stats, MIN_BATCH_BYTES,
};
pub use sink::{Accepted, Progress, Sink, SinkError};
