//! dplog core: records, rings, producers and the consumer runtime.
#![warn(missing_docs)]

pub mod record;

pub use record::{Nat44SessionRecord, NatEvent, Record, RecordHeader, SCHEMA_NAT44_SESSION};
