//! TOML configuration that chooses the ring, the format and the sink.
//!
//! ```toml
//! [ring]
//! capacity = 16384         # slots per producer ring, a power of two,
//!                          # at most 2^24 (each ring takes capacity x
//!                          # record size: 16384 x 64 B = 1 MiB)
//! backpressure = "block"   # "block" (lossless), "drop_newest" (alias
//!                          # "drop"; counted and reported in-band) or
//!                          # "degrade" (watermarks and priorities)
//! burst = 1024             # records per ring per consumer pass (and
//!                          # per poll of a ring's index, when paced)
//! batch_bytes = 262144     # bytes per sink write, 65536 to 256 MiB
//! # consumer_cpu = 1       # pin the consumer thread
//! block_spins = 1024       # block: pause spins before yielding
//! drop_reports = true      # in-band "N records dropped" lines
//! # reorder_window_ns = 1000000  # merge rings by event time (off if unset)
//! reorder_idle_ms = 500    # reorder: a ring silent this long holds
//!                          # nothing back
//! shutdown_timeout_ms = 5000 # wait this long for the sink at shutdown
//! # sink_retry_timeout_ms = 30000 # give up on a failing sink's batch after
//!                          # this long (dropped_sink); unset = retry forever
//! # publish_every = 32     # producers publish once per 32 records and
//!                          # must call flush() when idle (default 1)
//! poll_gap_max_us = 20     # awake consumer: longest pause between polls
//!                          # of the rings, the longest a record waits
//!                          # then (0: no pacing; at most 1000)
//! # slot_bytes = 64        # rings of several record types (start_slots,
//!                          # the C ABI): 32, 64 or 128; each type must fit
//!
//! [ring.degrade]           # used by backpressure = "degrade"
//! high_watermark_pct = 80  # at or above: only priority >= min_priority
//! low_watermark_pct = 50   # below: everything accepted again
//! min_priority = 2         # PRIORITY_HIGH: what a schema's rule (or
//!                          # [ring.priorities]) raises, e.g. NAT deletes
//!
//! [ring.priorities]        # by record type (schema name), over the
//! # aclDrop = 2            # schema's own rule
//!
//! [format]
//! type = "text"            # text, json, csv, rfc5424, rfc3164, ipfix,
//!                          # binary
//! # template = "..."       # text: the first record type's line
//! # time_precision = "ns"  # s, ms, us or ns (unset: each format's own;
//!                          # docs/time-and-bytes.md)
//! bytes = "text"           # BYTES fields: text (escaped, up to the first
//!                          # NUL), hex or base64 (every byte)
//!
//! [format.templates]       # text: a line per record type, by schema name
//! # aclDrop = "{dropTime:rfc3339} {dropReason:name} rule {ruleId}"
//!
//! [format.bytes_fields]    # BYTES rendering by field name, over `bytes`
//! # qname = "hex"
//!
//! [sink]
//! type = "file"            # file, mmap, syslog, archive, ipfix, clickhouse, kafka
//! path = "dplog.log"       # (ipfix: an IPFIX exporter, [format] type =
//!                          # "ipfix" only; archive: type = "binary")
//!
//! [schemas]                # built-in record types served besides the
//! nat = false              # program's own: true adds the NAT schemas
//!                          # (see SchemasConfig)
//!
//! [consumers]              # LogConfig::start_consumers: several consumer
//! # cpus = [2, 3]          # threads, one per CPU (or count = N), each with
//!                          # its own sink (file.log, file.log.1, ...)
//!
//! [metrics]                # Prometheus text exposition of the snapshot
//! # prometheus_listen = "127.0.0.1:9464"  # off if unset; GET /metrics
//! allow_non_loopback = false  # a non-loopback listen address is refused
//!                          # unless this is true
//! linger_ms = 0            # programs that end (dplog-nat): keep serving
//!                          # the final counters this long after the run
//! ```
//!
//! Every key is optional and defaults as shown. An unknown key, a value
//! of the wrong type or settings that do not go together (a sink's own
//! rules, e.g. an IPFIX sink wants `[format] type = "ipfix"`) are an error
//! that names the key path and its place, then shows the line:
//! `config line 7, column 9: [sink] type: unknown variant `kafak`, ...`.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::formatters::Format;

use crate::sinks::config::SinkSettings;
use crate::sinks::BoxSink;

// Each sink's settings live in its folder of `dplog_sinks`; re-exported
// here, where the configuration composes them.
pub use crate::sinks::archive::ArchiveSinkConfig;
pub use crate::sinks::clickhouse::ClickHouseSinkConfig;
pub use crate::sinks::config::{SinkRole, FAILOVER_PROBE};
pub use crate::sinks::file::{FileSinkConfig, FsyncSetting, SealConfig};
pub use crate::sinks::ipfix::config::IpfixTransportName;
pub use crate::sinks::ipfix::IpfixSinkConfig;
#[cfg(feature = "kafka")]
pub use crate::sinks::kafka::KafkaSinkConfig;
pub use crate::sinks::mmap::MmapSinkConfig;
pub use crate::sinks::syslog::{SyslogSinkConfig, SyslogTransportName};

use crate::nat::{Nat44SessionRecord, NatFormatSpec as _, NatRecord};
use crate::schema::{HasSchema, Schema};
use crate::{
    Backpressure, DegradeConfig, Logger, LoggerConfig, LoggerError, RecordBytes, RecordRules,
    SchemaTable, Slot,
};

mod errors;
mod format;
mod load;
mod metrics;
mod ring;
mod schemas;
mod sink;
mod start;
#[cfg(test)]
mod tests;

pub use errors::ConfigError;
pub use format::FormatConfig;
pub use metrics::MetricsConfig;
pub use ring::{check_slots, RingConfig, SLOT_SIZES};
pub use schemas::SchemasConfig;
pub use sink::SinkConfig;
pub use start::{Consumers, ConsumersConfig};

/// The whole logging configuration: `[ring]`, `[format]`, `[sink]`.
///
/// # Examples
///
/// A logger of a record type of your own (`Probe`, with its schema; see
/// the crate's quick start) writing CSV; every key left out takes its
/// default, and a key the configuration does not have is an error that
/// names it and its line:
///
/// ```
/// # use std::sync::OnceLock;
/// # use dplog::schema::{HasSchema, Schema};
/// # use dplog::{schema, Record, RecordHeader};
/// # #[repr(C)]
/// # #[derive(Clone, Copy)]
/// # struct Probe { header: RecordHeader, time_ns: u64, seq: u32, ttl: u8, _pad: [u8; 3] }
/// # impl Record for Probe {
/// #     const SCHEMA_ID: u16 = 500;
/// #     fn header(&self) -> &RecordHeader { &self.header }
/// # }
/// # // SAFETY: repr(C), 24 bytes without padding; schema from its offsets.
/// # unsafe impl HasSchema for Probe {
/// #     fn schema() -> &'static Schema {
/// #         static S: OnceLock<Schema> = OnceLock::new();
/// #         S.get_or_init(|| schema!(Probe, id = 500, name = "probe", [
/// #             time_ns => "time": NsTimestamp, ie 0;
/// #             seq => "seq": U32, ie 0;
/// #             ttl => "ttl": U8, ie 0;
/// #         ]).unwrap())
/// #     }
/// # }
/// # fn probe(seq: u32) -> Probe {
/// #     Probe { header: RecordHeader::of::<Probe>(), time_ns: 1_767_225_600_000_000_000, seq, ttl: 64, _pad: [0; 3] }
/// # }
/// # let dir = tempfile::tempdir()?;
/// # std::env::set_current_dir(dir.path())?;
/// use dplog::config::LogConfig;
///
/// let cfg = LogConfig::from_toml_str("[format]\ntype = \"csv\"\n[sink]\ntype = \"file\"\npath = \"probes.csv\"\n")?;
/// assert_eq!(cfg.ring.capacity, 16384);
/// let logger = cfg.start::<Probe>()?;
/// let mut producer = logger.producer()?;
/// for seq in 0..3 {
///     producer.log(probe(seq));
/// }
/// drop(producer);
/// let stats = logger.shutdown().map_err(|(_, e)| e)?;
/// assert_eq!(stats.written_records, 3);
/// assert_eq!(std::fs::read_to_string("probes.csv")?.lines().count(), 1 + 3); // header + rows
///
/// let err = LogConfig::from_toml_str("[ring]\ncapacityy = 1024\n").unwrap_err();
/// assert!(err.to_string().contains("capacityy") && err.to_string().contains("line 2"), "{err}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// `[ring]`.
    pub ring: RingConfig,
    /// `[format]`.
    pub format: FormatConfig,
    /// `[sink]`.
    pub sink: SinkConfig,
    /// `[metrics]`.
    pub metrics: MetricsConfig,
    /// `[consumers]`.
    pub consumers: ConsumersConfig,
    /// `[schemas]`: built-in record types served besides the program's
    /// own (the NAT schemas only when asked).
    pub schemas: SchemasConfig,
}

/// Parses TOML into `T`, turning errors into [`ConfigError::Parse`].
///
/// The text is parsed once; `T` is deserialized from that parse and the
/// load-time checks run on it. Every error names its key and starts
/// `config line L, column C: ` with the key's (or value's) place, then
/// shows the line: TOML syntax, serde errors (unknown key, wrong type), a
/// `[format]` table whose `template` or `[format.templates]` goes with a
/// `type` other than `text` (which would ignore it), and each sink table's
/// own rules ([`SinkSettings::check`]).
pub fn parse_toml<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, ConfigError> {
    load::parse(text)
}

/// Reads and parses a TOML file into `T`.
pub fn read_toml<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, ConfigError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| ConfigError::Read(path.to_path_buf(), e))?;
    parse_toml(&text).map_err(|e| match e {
        ConfigError::Parse(m) => ConfigError::Parse(format!("{}: {m}", path.display())),
        other => other,
    })
}
