//! dplog sinks. Each implements [`dplog_core::Sink`].
//!
//! - [`FileSink`]: appends batches to a file (`O_APPEND | O_CLOEXEC |
//!   O_NOFOLLOW`, mode 0640), fsync policies, size/time rotation with
//!   retention, reopen through the API or on `SIGHUP`.
//! - [`ArchiveSink`]: compressed, columnar, indexed, time-sliced
//!   segments of the binary format's records, for lookups
//!   (`dplog-query`); [`archive::ArchiveReader`] reads them back.
//! - [`MmapSink`]: copies batches into preallocated memory-mapped segment
//!   files with a committed-length header; recovers after a crash.
//! - `KafkaSink` (feature `kafka`, on by default): each line as one Kafka
//!   message (rdkafka), keyed, counted as written only when acknowledged.
//! - [`FanOut`] and [`Failover`]: one batch to several sinks, or a primary
//!   with a secondary that takes over while the primary fails.
//! - [`SyslogSink`]: each line as one syslog message over UDP (RFC 5426),
//!   TCP with octet counting (RFC 6587), RELP (rsyslog's acknowledged
//!   protocol) or a unix socket; reconnects with backoff.
//! - [`ClickHouseSink`]: the binary stream's records of one type
//!   inserted into a ClickHouse table over HTTP as RowBinary, encoded
//!   from their schema; counted written when the server answers 200;
//!   `dplog-query ddl --clickhouse` prints the table.
//! - [`IpfixExporter`]: an IPFIX Exporting Process (RFC 7011) over UDP or
//!   TCP, re-packing the `ipfix` format's records into messages of its own
//!   (MTU-sized datagrams, template refresh, sequence numbers).
//!
//! Each sink has its folder (`archive/`, `file/`, `mmap/`, `syslog/`,
//! `kafka/`, `ipfix/`, `clickhouse/`, `route/`): the sink in `mod.rs` and, with feature `config`, its TOML
//! settings in `config.rs` (module `config` says what they provide), composed by `dplog::config`.
//!
//! Features: `kafka` (default) builds the Kafka sink and links librdkafka;
//! `config` adds the serde settings of every sink.
//!
//! A program chooses its sinks in the TOML of `dplog::config` (`[sink]`, or
//! several `[[sink]]` tables); the repository's `docs/sinks.md` walks
//! through each sink with a collector started on this machine (rsyslogd,
//! a Kafka-protocol broker, nfcapd).
#![warn(missing_docs)]

mod accounting;
pub mod archive;
pub mod clickhouse;
#[cfg(feature = "config")]
pub mod config;
pub mod file;
pub mod ipfix;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod mmap;
pub mod route;
pub mod seal;
#[cfg(feature = "config")]
mod settings;
pub mod syslog;
mod tcp;
pub mod verify;
pub mod verify_syslog;

pub use archive::{ArchiveCounters, ArchiveReader, ArchiveSink, ArchiveSinkOptions};
pub use clickhouse::{ClickHouseCounters, ClickHouseOptions, ClickHouseSink};
pub use file::{FileSink, FileSinkCounters, FileSinkOptions, FsyncPolicy};

/// File mode of a newly created log file (file sink, mmap segment, seal
/// file): owner read/write, group read (0640). An existing file keeps its
/// mode.
pub const FILE_MODE: u32 = 0o640;
pub use ipfix::{IpfixCounters, IpfixExporter, IpfixExporterOptions, IpfixTransport};
#[cfg(feature = "kafka")]
pub use kafka::{KafkaCounters, KafkaKey, KafkaSink, KafkaSinkOptions};
pub use mmap::{MmapCounters, MmapSink, MmapSinkOptions, Recovery};
pub use route::{BoxSink, ChildCounters, Failover, FailoverCounters, FanOut};
pub use syslog::{SyslogCounters, SyslogSink, SyslogSinkOptions, SyslogTransport};
