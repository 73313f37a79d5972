//! The NAT schema package of dplog: what a NAT44/CGNAT dataplane logs.
//!
//! dplog's core and formatters know no record type of their own; this
//! crate declares the NAT ones the way any user declares theirs:
//! - [`records`]: the `#[repr(C)]` records (NAT44 session create/delete,
//!   port block allocation/release, addresses/ports exhausted, quota
//!   exceeded; RFC 8158 natEvent numbering) and [`NatRecord`], a 64-byte
//!   slot that carries any of them through one ring;
//! - [`schemas`]: their [`Schema`]s with IANA IPFIX element names and ids,
//!   priorities under `degrade`, event time and VPP's syslog layout;
//! - [`EventProfile`]: RFC 8158 or legacy natEvent numbering in output;
//! - [`TextFormatter`] / [`JsonFormatter`]: NAT44-only formatters kept as
//!   thin wrappers over the compiled layouts.
//!
//! A NAT logger is an ordinary logger of [`NatRecord`] slots:
//!
//! ```
//! use dplog_core::{Logger, LoggerConfig};
//! use dplog_formatters::{Format, FormatSpec};
//! use dplog_schema_nat::{Nat44SessionRecord, NatRecord};
//!
//! let cfg = LoggerConfig { schemas: dplog_schema_nat::table(), ..Default::default() };
//! let spec = FormatSpec { kind: Format::Json, ..Default::default() };
//! let fmt = spec.formatter(&dplog_schema_nat::all()).unwrap();
//! # struct Null;
//! # impl dplog_core::Sink for Null {
//! #     fn write_batch(&mut self, _: &[u8]) -> Result<dplog_core::Accepted, dplog_core::SinkError> {
//! #         Ok(dplog_core::Accepted::Delivered)
//! #     }
//! #     fn flush(&mut self) -> Result<(), dplog_core::SinkError> { Ok(()) }
//! #     fn close(&mut self) -> Result<(), dplog_core::SinkError> { Ok(()) }
//! # }
//! let logger: Logger<NatRecord> = Logger::start(cfg, fmt, Null).unwrap();
//! let mut p = logger.producer().unwrap();
//! p.log(NatRecord::from(Nat44SessionRecord::default()));
//! drop(p);
//! assert_eq!(logger.shutdown().unwrap().written_records, 1);
//! ```
#![warn(missing_docs)]

pub mod profile;
pub mod records;
pub mod schemas;
mod text;

pub use dplog_core::schema::Schema;
pub use profile::{EventProfile, IE_NAT_EVENT};
pub use records::*;
pub use schemas::{
    all, by_id, nat44_session, nat_addresses_exhausted, nat_port_block, nat_ports_exhausted,
    nat_quota_exceeded,
};
pub use text::{Field, FieldKind, JsonFormatter, Presence, TextFormatter, NAT44_FIELDS};

use dplog_formatters::{FormatError, FormatSpec, SchemaFormatter};

/// The logger's per-type table for the NAT schemas (priorities under
/// `degrade`, event time): put it in `LoggerConfig::schemas`.
pub fn table() -> dplog_core::SchemaTable {
    dplog_core::SchemaTable::new(all())
}

/// A formatter over every NAT schema, NAT44 session first (so
/// [`FormatSpec::template`] applies to it).
///
/// # Errors
/// As [`FormatSpec::formatter`].
pub fn formatter(spec: &FormatSpec) -> Result<SchemaFormatter, FormatError> {
    spec.formatter(&all())
}

/// The header line a NAT log file in format `spec` starts with: the CSV
/// header of every NAT record type (for a file sink's `header` option);
/// `None` for every other format.
pub fn file_header(spec: &FormatSpec) -> Option<Vec<u8>> {
    spec.file_header(&all())
}

/// The consumer's formatter for NAT records: a [`SchemaFormatter`] over
/// [`all`].
pub type NatFormatter = SchemaFormatter;

/// NAT conveniences on [`FormatSpec`].
pub trait NatFormatSpec {
    /// [`formatter`]: a formatter over every NAT schema, NAT44 session
    /// first.
    ///
    /// # Errors
    /// As [`FormatSpec::formatter`].
    fn nat_formatter(&self) -> Result<SchemaFormatter, FormatError>;
    /// [`file_header`]: the CSV header of every NAT record type.
    fn nat_file_header(&self) -> Option<Vec<u8>>;
}

impl NatFormatSpec for FormatSpec {
    fn nat_formatter(&self) -> Result<SchemaFormatter, FormatError> {
        formatter(self)
    }
    fn nat_file_header(&self) -> Option<Vec<u8>> {
        file_header(self)
    }
}

/// A boxed formatter for NAT44 session records in `format` with default
/// settings.
pub fn boxed_formatter(
    format: dplog_formatters::Format,
) -> Box<dyn dplog_core::Formatter<Nat44SessionRecord>> {
    Box::new(
        formatter(&FormatSpec {
            kind: format,
            ..FormatSpec::default()
        })
        .expect("default settings compile for the NAT schemas"),
    )
}
