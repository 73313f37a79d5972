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
//! burst = 32               # records per ring per consumer pass
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
//! type = "file"            # file, mmap, syslog, archive, ipfix, kafka
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
//! Every key is optional and defaults as shown. An unknown key or a value
//! of the wrong type is an error that names the key and its line.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::formatters::Format;

use crate::sinks::config::SinkSettings;
use crate::sinks::BoxSink;

// Each sink's settings live in its folder of `dplog_sinks`; re-exported
// here, where the configuration composes them.
pub use crate::sinks::archive::ArchiveSinkConfig;
pub use crate::sinks::config::{SinkRole, FAILOVER_PROBE};
pub use crate::sinks::file::{FileSinkConfig, FsyncSetting};
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

/// `[ring]`: ring and consumer settings; see [`LoggerConfig`].
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RingConfig {
    /// Slots per producer ring; a power of two, at most 2^24
    /// (`MAX_LOGGER_RING_CAPACITY`). Each ring takes `capacity` times the
    /// record size, allocated when it is created. Default 16384
    /// (`DEFAULT_RING_CAPACITY`, from the ring-size sweep).
    pub capacity: usize,
    /// `block`, `drop_newest` (alias `drop`) or `degrade`. Default `block`.
    pub backpressure: Backpressure,
    /// Records per ring per consumer pass. Default 32.
    pub burst: usize,
    /// Bytes per sink write, 65536 to 268435456 (256 MiB,
    /// `MAX_BATCH_BYTES`). Default 262144.
    pub batch_bytes: usize,
    /// CPU to pin the consumer thread to. Default: not pinned.
    pub consumer_cpu: Option<usize>,
    /// `block`: pause-instruction spins before a waiting producer yields.
    /// Default 1024.
    pub block_spins: u32,
    /// Write in-band drop reports. Default true.
    pub drop_reports: bool,
    /// `[ring.degrade]`: watermarks (percent) and minimum priority.
    pub degrade: DegradeConfig,
    /// Reorder window in ns of event time; unset = off (see
    /// `dplog::reorder`).
    pub reorder_window_ns: Option<u64>,
    /// With the reorder window: a ring silent this long (ms) no longer
    /// holds other rings' records back. Default 500.
    pub reorder_idle_ms: u64,
    /// How long shutdown waits for the sink to deliver what is still
    /// buffered or in flight, in ms; what is left is counted in
    /// `dropped_shutdown`. Default 5000.
    pub shutdown_timeout_ms: u64,
    /// How long a batch a sink keeps failing with retryable errors (ENOSPC,
    /// EIO, ...) is retried, in ms, before it is counted in `dropped_sink`
    /// and the consumer moves on (`LoggerConfig::sink_retry_timeout_ms`).
    /// Unset (default): retry forever, lossless under `block`.
    pub sink_retry_timeout_ms: Option<u64>,
    /// Producers publish their ring index once per this many records
    /// (`LoggerConfig::publish_every`); unset = the program's default (1
    /// for the library: every record at once; `dplog-nat`, whose workers
    /// publish every 16 rx bursts and when idle, uses its burst size).
    pub publish_every: Option<usize>,
    /// Ring slot size in bytes for loggers of several record types
    /// ([`LogConfig::start_slots`], the C ABI): 32, 64 or 128; every
    /// record type must fit it. Unset: 64 (the C ABI), or the slot type the
    /// Rust program chose.
    pub slot_bytes: Option<usize>,
    /// `[ring.priorities]`: priority under `degrade` by record type
    /// (schema name), e.g. `aclDrop = 2`; replaces the schema's own rule
    /// for that type.
    pub priorities: std::collections::BTreeMap<String, u8>,
}

impl Default for RingConfig {
    fn default() -> Self {
        let d = LoggerConfig::default();
        Self {
            capacity: d.ring_capacity,
            backpressure: d.backpressure,
            burst: d.burst,
            batch_bytes: d.batch_bytes,
            consumer_cpu: d.consumer_cpu,
            block_spins: d.block_spins,
            drop_reports: d.drop_reports,
            degrade: d.degrade,
            reorder_window_ns: d.reorder_window_ns,
            reorder_idle_ms: d.reorder_idle_ms,
            shutdown_timeout_ms: d.shutdown_timeout_ms,
            sink_retry_timeout_ms: d.sink_retry_timeout_ms,
            publish_every: None,
            slot_bytes: None,
            priorities: Default::default(),
        }
    }
}

/// `[format]`: the output format.
///
/// TSC timestamp fields need no key here: the consumer passes its
/// `TscClock` calibration to the formatter (`Formatter::tsc_calibration`,
/// at start and after each recalibration) and every format prints them as
/// time with it (identity, i.e. ticks taken as ns, on machines without an
/// invariant TSC, where the producer's ticks are realtime ns).
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct FormatConfig {
    /// `text`, `json`, `csv`, `rfc5424`, `rfc3164`, `ipfix` or `binary`.
    /// Default `text`.
    #[serde(rename = "type")]
    pub kind: Format,
    /// `text`: template for the first record type of the logger (the first
    /// schema given to `start_slots`, the type of `start::<R>()`; NAT44
    /// session records for the NAT), e.g.
    /// `"{observationTimeMilliseconds:rfc3339} {natEvent:name} {sourceIPv4Address}"`
    /// (syntax in `dplog::formatters::template`). Default: `name=value` line.
    pub template: Option<String>,
    /// `text`: templates by schema name (`[format.templates]`,
    /// e.g. `natPortBlock = "..."` or `aclDrop = "..."`).
    pub templates: std::collections::BTreeMap<String, String>,
    /// NAT records: natEvent numbering, `rfc8158` (default) or `legacy`
    /// (1/2).
    pub profile: crate::nat::EventProfile,
    /// `[format.syslog]`: hostname (default: this host's name), app_name,
    /// procid (default: this process's id), facility, severity, sd_id
    /// (RFC 5424 section 6.3.2: `name@<enterprise number>` or an
    /// IANA-registered name, checked at load), profile (`"vpp"`: VPP's NAT
    /// syslog layout; its differences from VPP's messages are listed at
    /// `SyslogOptions::profile`) (rfc5424 / rfc3164).
    pub syslog: crate::formatters::SyslogOptions,
    /// `[format.ipfix]`: mtu, template_refresh_secs,
    /// observation_domain_id, export_clock (`system` | `record`),
    /// enterprise_number (of the elements of fields without an IANA id),
    /// exporting_process_id (the scope of drop reports' reliability
    /// statistics records).
    pub ipfix: crate::formatters::IpfixOptions,
    /// `time_precision`: `"s"`, `"ms"`, `"us"` or `"ns"`: the digits of
    /// the lead RFC 3339 time (RFC 5424: at most 6, `ns` prints
    /// microseconds; RFC 3164: whole seconds), the unit of timestamp
    /// values, the IPFIX stamp element (`dplog::formatters::Options::time`
    /// has the table). Unset (default): each format's own (microseconds
    /// for the lead time, milliseconds for values and IPFIX).
    pub time_precision: Option<crate::formatters::TimePrecision>,
    /// `bytes`: how BYTES fields print in the line formats: `"text"`
    /// (default; escaped, up to the first NUL), `"hex"` or `"base64"`
    /// (every byte of the field, NULs included).
    pub bytes: crate::formatters::BytesEncoding,
    /// `[format.bytes_fields]`: `bytes` by field name (e.g. `qname =
    /// "hex"`), in every record type with a BYTES field of that name; a
    /// name that is no BYTES field is an error when the format is built.
    pub bytes_fields: std::collections::BTreeMap<String, crate::formatters::BytesEncoding>,
}

impl FormatConfig {
    /// The formatter settings.
    pub fn spec(&self) -> crate::formatters::FormatSpec {
        crate::formatters::FormatSpec {
            kind: self.kind,
            template: self.template.clone(),
            templates: self.templates.clone(),
            renumber: self.profile.renumber(),
            tsc: None,
            syslog: self.syslog.clone(),
            ipfix: self.ipfix.clone(),
            time_precision: self.time_precision,
            bytes: self.bytes,
            bytes_fields: self.bytes_fields.clone(),
        }
    }

    /// Compiles the format for `schemas` (the first takes `template`); a
    /// bad template or setting is [`ConfigError::Parse`] naming `[format]`,
    /// the schema and the template column.
    pub fn formatter(
        &self,
        schemas: &[&Schema],
    ) -> Result<crate::formatters::SchemaFormatter, ConfigError> {
        self.spec()
            .formatter(schemas)
            .map_err(|e| ConfigError::Parse(format!("[format]: {e}")))
    }

    /// [`formatter`](Self::formatter) for every NAT record type, NAT44
    /// session first.
    pub fn nat_formatter(&self) -> Result<crate::nat::NatFormatter, ConfigError> {
        self.formatter(&crate::nat::all())
    }
}

/// Declares [`SinkConfig`] and its `type` dispatch from one line per sink
/// type: `Variant(settings type)`, the variant's snake_case name being the
/// `type` value. Each settings type implements
/// [`SinkSettings`](crate::sinks::config::SinkSettings) (in its sink's
/// folder, `dplog_sinks::<sink>::config`).
macro_rules! sink_types {
    ($( $(#[doc = $doc:literal])* $(#[cfg($cfg:meta)])* $variant:ident($settings:ty), )*) => {
        /// `[sink]` or `[[sink]]`: where formatted records go, chosen by `type`.
        ///
        /// A single `[sink]` table is one sink. Several `[[sink]]` tables make a
        /// [`SinkConfig::Set`]: every record goes to each sink (fan-out), except
        /// that a table with `role = "failover"` is the secondary of the sink listed
        /// just before it, taking the batches while that one fails (see
        /// [`dplog_sinks::Failover`]). Unknown keys and types are errors.
        ///
        /// ```toml
        /// [[sink]]
        /// type = "file"
        /// path = "/var/log/nat.log"
        /// max_size_bytes = 1073741824
        /// keep_files = 10
        ///
        /// [[sink]]
        /// type = "file"
        /// path = "/var/log/nat-spill.log"
        /// role = "failover"
        /// ```
        #[derive(Clone, Debug, PartialEq)]
        #[non_exhaustive]
        pub enum SinkConfig {
            $( $(#[doc = $doc])* $(#[cfg($cfg)])* $variant($settings), )*
            /// Several `[[sink]]` tables: fan-out, with failover secondaries.
            Set(Vec<SinkConfig>),
        }

        /// One sink table, as tagged in TOML.
        #[derive(Deserialize)]
        #[serde(tag = "type", rename_all = "snake_case")]
        enum OneSink {
            $( $(#[cfg($cfg)])* $variant($settings), )*
            /// `type = "kafka"` in a build without Kafka: refused by name.
            #[cfg(not(feature = "kafka"))]
            Kafka(NoKafka),
        }

        impl From<OneSink> for SinkConfig {
            fn from(o: OneSink) -> Self {
                match o {
                    $( $(#[cfg($cfg)])* OneSink::$variant(s) => SinkConfig::$variant(s), )*
                    #[cfg(not(feature = "kafka"))]
                    OneSink::Kafka(never) => match never {},
                }
            }
        }

        /// Deserializes the settings of a sink of `type` = `kind` from
        /// `table` (its table without `type`), for [`sink_error_at`]:
        /// `Some(error)` if they are bad, `None` for a type this build
        /// does not have.
        fn settings_error(
            kind: &str,
            table: toml_edit::Value,
        ) -> Option<Option<toml_edit::de::Error>> {
            use serde::de::IntoDeserializer as _;
            $(
                $(#[cfg($cfg)])*
                if kind == sink_type_name(stringify!($variant)) {
                    return Some(<$settings>::deserialize(table.into_deserializer()).err());
                }
            )*
            let _ = table;
            None
        }

        impl SinkConfig {
            /// The `type` of every sink this build takes, as written in
            /// TOML, in declaration order: `file`, `mmap`, `syslog`,
            /// `archive`, `ipfix`, and `kafka` with the `kafka` feature.
            /// Help texts list them from here, so they name every type.
            pub fn type_names() -> Vec<&'static str> {
                [$( $(#[cfg($cfg)])* sink_type_name(stringify!($variant)), )*].to_vec()
            }

            /// The `type` of a single sink as written in TOML (`"file"`,
            /// ...); `None` for a set.
            fn type_name(&self) -> Option<&'static str> {
                match self {
                    $( $(#[cfg($cfg)])* SinkConfig::$variant(_) => Some(sink_type_name(stringify!($variant))), )*
                    SinkConfig::Set(_) => None,
                }
            }

            /// The settings of a single sink; `None` for a set.
            fn one(&self) -> Option<&dyn SinkSettings> {
                match self {
                    $( $(#[cfg($cfg)])* SinkConfig::$variant(s) => Some(s), )*
                    SinkConfig::Set(_) => None,
                }
            }
        }
    };
}

// The sink types, one line each (the sink and its settings live in
// `sinks/src/<sink>/`).
sink_types! {
    /// `type = "file"`: a [`FileSink`](crate::sinks::FileSink).
    File(FileSinkConfig),
    /// `type = "mmap"`: an [`MmapSink`](crate::sinks::MmapSink).
    Mmap(MmapSinkConfig),
    /// `type = "syslog"`: a [`SyslogSink`](crate::sinks::SyslogSink).
    Syslog(SyslogSinkConfig),
    /// `type = "archive"`: an [`ArchiveSink`](crate::sinks::ArchiveSink)
    /// (with `[format] type = "binary"`).
    Archive(ArchiveSinkConfig),
    /// `type = "ipfix"`: an [`IpfixExporter`](crate::sinks::IpfixExporter)
    /// (with `[format] type = "ipfix"` only).
    Ipfix(IpfixSinkConfig),
    /// `type = "kafka"`: a `KafkaSink` (feature `kafka`).
    #[cfg(feature = "kafka")]
    Kafka(KafkaSinkConfig),
}

/// `type = "kafka"` in a build without the `kafka` feature: never built,
/// its deserialization is the error naming the feature.
#[cfg(not(feature = "kafka"))]
enum NoKafka {}

#[cfg(not(feature = "kafka"))]
impl<'de> Deserialize<'de> for NoKafka {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Err(serde::de::Error::custom(
            "`type` = \"kafka\": this build has no Kafka support: rebuild with feature `kafka`",
        ))
    }
}

impl Default for SinkConfig {
    fn default() -> Self {
        SinkConfig::File(FileSinkConfig::default())
    }
}

impl<'de> Deserialize<'de> for SinkConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let one = |v: toml::Value| OneSink::deserialize(v).map(SinkConfig::from);
        match toml::Value::deserialize(d)? {
            toml::Value::Array(items) => items
                .into_iter()
                .enumerate()
                .map(|(i, v)| {
                    one(v).map_err(|e| D::Error::custom(format!("[[sink]] #{}: {e}", i + 1)))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(SinkConfig::Set),
            v => one(v).map_err(|e| D::Error::custom(format!("[sink]: {e}"))),
        }
    }
}

/// A single sink's settings dispatch to it; a set is a fan-out (its
/// members carry their own roles) and is built with
/// [`build_set`](crate::sinks::config::build_set).
impl SinkSettings for SinkConfig {
    fn role(&self) -> SinkRole {
        self.one().map_or(SinkRole::Fanout, SinkSettings::role)
    }

    fn describe(&self) -> String {
        self.describe_each().join(", ")
    }

    fn build(&self, header: Option<&[u8]>) -> std::io::Result<BoxSink> {
        match (self, self.one()) {
            (_, Some(s)) => s.build(header),
            (SinkConfig::Set(items), None) => crate::sinks::config::build_set(items, header),
            (_, None) => unreachable!("only a set has no single sink's settings"),
        }
    }

    fn output_file(&self) -> Option<&Path> {
        self.one().and_then(SinkSettings::output_file)
    }
}

impl SinkConfig {
    /// One short description per configured sink, in `[[sink]]` order, as
    /// the built sink's [`Sink::describe`](crate::Sink::describe) names
    /// it: `file PATH`, `mmap DIR`, `syslog udp ADDR` (`tcp`, `unix-dgram`,
    /// `unix-stream`), `kafka topic T at BROKERS`; a failover secondary
    /// ends in ` (failover)`. For summaries and diagnostics; opens nothing.
    pub fn describe_each(&self) -> Vec<String> {
        match self {
            SinkConfig::Set(items) => items
                .iter()
                .flat_map(|i| {
                    let failover = i.role() == SinkRole::Failover;
                    i.describe_each().into_iter().map(move |d| {
                        if failover {
                            format!("{d} (failover)")
                        } else {
                            d
                        }
                    })
                })
                .collect(),
            one => one.one().map(SinkSettings::describe).into_iter().collect(),
        }
    }

    /// Opens the sink (or the fan-out / failover set) these settings
    /// describe.
    ///
    /// Errors: the sink's open error; `InvalidInput` for an empty set or a
    /// set whose first sink has `role = "failover"`.
    pub fn build(&self) -> std::io::Result<BoxSink> {
        SinkSettings::build(self, None)
    }

    /// [`build`](Self::build) for NAT records in `format`: file sinks get
    /// the format's file header (CSV's one header of every NAT record type)
    /// as their `header` option, so a CSV file appended to by several runs,
    /// or rotated, has the header once at its top.
    ///
    /// Errors: as [`build`](Self::build).
    pub fn build_for(&self, format: &FormatConfig) -> std::io::Result<BoxSink> {
        SinkSettings::build(self, format.spec().nat_file_header().as_deref())
    }

    /// [`build_for`](Self::build_for) for records of `schemas` (CSV: the
    /// one header of their columns heads the file).
    ///
    /// Errors: as [`build`](Self::build).
    pub fn build_for_schema(
        &self,
        format: &FormatConfig,
        schemas: &[&Schema],
    ) -> std::io::Result<BoxSink> {
        SinkSettings::build(self, format.spec().file_header(schemas).as_deref())
    }

    /// The sink consumer `i` of several ([`ConsumersConfig`]) writes:
    /// consumer 0 these settings; consumer `i > 0` a file sink's `path` and
    /// an mmap or archive sink's `dir` with the suffix `.i` (in every
    /// `[[sink]]` table), and the same settings (its own connection) for syslog and
    /// Kafka.
    pub fn for_consumer(&self, i: usize) -> SinkConfig {
        fn suffixed(p: &Path, i: usize) -> PathBuf {
            let mut s = p.as_os_str().to_owned();
            s.push(format!(".{i}"));
            s.into()
        }
        let mut c = self.clone();
        if i > 0 {
            match &mut c {
                SinkConfig::File(f) => f.path = suffixed(&f.path, i),
                SinkConfig::Mmap(m) => m.dir = suffixed(&m.dir, i),
                SinkConfig::Archive(a) => a.dir = suffixed(&a.dir, i),
                SinkConfig::Set(v) => *v = v.iter().map(|s| s.for_consumer(i)).collect(),
                _ => {}
            }
        }
        c
    }
}

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

/// `[schemas]`: which of dplog's built-in record types a logger serves
/// besides the types the program declares. A logger serves only what it
/// is given: its CSV header has only their columns, its IPFIX output only
/// their templates. The NAT schemas (NAT44 session, port block, addresses
/// and ports exhausted, quota exceeded; `dplog::nat`) come only with
/// `nat = true`.
///
/// ```toml
/// [schemas]
/// nat = true   # also serve the NAT schemas (default false)
/// ```
///
/// Who reads it: [`LogConfig::start_slots`] and
/// [`LogConfig::start_slot_consumers`] (the NAT schemas that fit the slot
/// come after the program's types), the C ABI's `dplog_open` (as
/// `dplog_register_nat_schemas`) and dplogd (its CSV file header).
/// [`LogConfig::start_nat`], [`LogConfig::start_nat44`] and
/// [`FormatConfig::nat_formatter`] are NAT loggers by name and serve the
/// NAT schemas whatever this says.
///
/// # Examples
///
/// ```
/// use dplog::config::LogConfig;
///
/// let plain = LogConfig::from_toml_str("").unwrap();
/// assert!(!plain.schemas.nat);
/// assert!(plain.record_types(&[], 64).is_empty());
///
/// let nat = LogConfig::from_toml_str("[schemas]\nnat = true\n").unwrap();
/// let names: Vec<&str> = nat.record_types(&[], 32).iter().map(|s| s.name()).collect();
/// // The NAT types that fit a 32-byte slot.
/// assert_eq!(names, ["natAddressesExhausted", "natPortsExhausted", "natQuotaExceeded"]);
/// ```
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct SchemasConfig {
    /// Serve the NAT schemas (`dplog::nat::all`) that fit the slot, after
    /// the program's own types. Default `false`.
    pub nat: bool,
}

/// `[consumers]`: several consumer threads, each with its own formatter,
/// its own sink instance and its own group of rings, for
/// [`LogConfig::start_consumers`] (the C ABI's `dplog_start` takes the same
/// choice as its CPU list).
///
/// ```toml
/// [consumers]
/// cpus = [2, 3]   # one consumer pinned to each; or
/// # count = 2     # that many consumers, not pinned
/// ```
///
/// Consumer 0 writes the configured sink; consumer `i > 0` a file sink's
/// `path` with the suffix `.i` (`nat.log`, `nat.log.1`, ...), an mmap
/// sink's `dir` with the suffix `.i`, and its own connection for syslog or
/// Kafka ([`SinkConfig::for_consumer`]).
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ConsumersConfig {
    /// CPUs to pin the consumers to, one consumer per CPU. Overrides
    /// `[ring] consumer_cpu`.
    pub cpus: Vec<usize>,
    /// Number of consumers when `cpus` is empty. Default 1.
    pub count: Option<usize>,
}

impl ConsumersConfig {
    /// Most consumers one logger group runs.
    pub const MAX: usize = 64;

    /// How many consumers these settings start.
    ///
    /// Errors: [`ConfigError::Parse`] for 0, more than [`Self::MAX`], or
    /// both `cpus` and `count` set.
    pub fn count(&self) -> Result<usize, ConfigError> {
        let n = match (self.cpus.len(), self.count) {
            (0, c) => c.unwrap_or(1),
            (n, None) => n,
            (_, Some(_)) => {
                return Err(ConfigError::Parse(
                    "[consumers]: set either `cpus` or `count`, not both".into(),
                ))
            }
        };
        if n == 0 || n > Self::MAX {
            return Err(ConfigError::Parse(format!(
                "[consumers]: {n} consumers: must be 1 to {}",
                Self::MAX
            )));
        }
        Ok(n)
    }
}

/// A group of loggers started by [`LogConfig::start_consumers`]: one
/// consumer thread each, the rings spread over them by ring number.
///
/// # Examples
///
/// Two consumers, each writing its own file (`probes.log`,
/// `probes.log.1`); ring `r` is drained by consumer `r % 2`:
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
/// let cfg = LogConfig::from_toml_str("[consumers]\ncount = 2\n[sink]\ntype = \"file\"\npath = \"probes.log\"\n")?;
/// let group = cfg.start_consumers::<Probe>()?;
/// for ring in 0..2 {
///     let mut producer = group.producer(ring)?;
///     producer.log(probe(ring as u32));
/// }
/// for result in group.shutdown() {
///     assert_eq!(result.map_err(|(_, e)| e)?.written_records, 1);
/// }
/// assert_eq!(std::fs::read_to_string("probes.log.1")?.lines().count(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Consumers<R: crate::Record> {
    loggers: Vec<Logger<R>>,
}

impl<R: crate::Record> std::fmt::Debug for Consumers<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumers")
            .field("consumers", &self.loggers.len())
            .finish_non_exhaustive()
    }
}

impl<R: crate::Record> Consumers<R> {
    /// The consumers' loggers, consumer 0 first.
    pub fn loggers(&self) -> &[Logger<R>] {
        &self.loggers
    }

    /// A producer on a new ring of consumer `ring % n` (number the rings
    /// 0, 1, 2, ... — e.g. by forwarding core — to balance them).
    ///
    /// Errors: as [`Logger::producer`].
    pub fn producer(&self, ring: usize) -> Result<crate::LogProducer<R>, LoggerError> {
        self.loggers[ring % self.loggers.len()].producer()
    }

    /// A shared (MPSC) producer on a new ring of consumer `ring % n`.
    ///
    /// Errors: as [`Logger::shared_producer`].
    pub fn shared_producer(&self, ring: usize) -> Result<crate::SharedProducer<R>, LoggerError> {
        self.loggers[ring % self.loggers.len()].shared_producer()
    }

    /// Shuts every consumer down (see [`Logger::shutdown`]); their results
    /// in consumer order.
    #[allow(clippy::result_large_err)]
    pub fn shutdown(self) -> Vec<Result<crate::Stats, (crate::Stats, LoggerError)>> {
        self.loggers.into_iter().map(Logger::shutdown).collect()
    }
}

/// `[metrics]`: the Prometheus listener (`dplog_core::metrics`): OpenMetrics
/// text of [`Logger::snapshot`] at `GET /metrics`, served by `tiny_http` on
/// its own unpinned thread (never a producer or consumer core).
///
/// # Examples
///
/// Port 0 picks a free port on loopback; the listener serves the logger's
/// counters until it is stopped:
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
/// use std::io::{Read, Write};
/// use dplog::config::LogConfig;
///
/// let cfg = LogConfig::from_toml_str("[metrics]\nprometheus_listen = \"127.0.0.1:0\"\n[sink]\ntype = \"file\"\npath = \"probes.log\"\n")?;
/// let logger = cfg.start::<Probe>()?;
/// let server = cfg.metrics.start(&logger)?.expect("prometheus_listen is set");
/// let mut http = std::net::TcpStream::connect(server.local_addr())?;
/// http.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")?;
/// let mut page = String::new();
/// http.read_to_string(&mut page)?;
/// assert!(page.contains("dplog_"), "{page}");
/// server.stop();
/// logger.shutdown().map_err(|(_, e)| e)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Address and port to listen on, e.g. `"127.0.0.1:9464"` (port 0
    /// picks a free port). Default: unset, no listener.
    pub prometheus_listen: Option<std::net::SocketAddr>,
    /// Accept a `prometheus_listen` address outside 127.0.0.0/8 and ::1.
    /// The listener has no authentication, so it is refused unless this is
    /// `true`. Default `false`.
    pub allow_non_loopback: bool,
    /// For programs that end (`dplog-nat`): keep serving the final counters
    /// this long after the logger shut down, so a scraper can collect them.
    /// Milliseconds, default 0.
    pub linger_ms: u64,
}

impl MetricsConfig {
    /// Checks the settings without binding.
    ///
    /// Errors: [`ConfigError::Parse`] naming `metrics.prometheus_listen` if
    /// the address is not a loopback address and `allow_non_loopback` is
    /// not set.
    pub fn check(&self) -> Result<(), ConfigError> {
        match self.prometheus_listen {
            Some(a) if !a.ip().is_loopback() && !self.allow_non_loopback => {
                Err(ConfigError::Parse(format!(
                    "metrics.prometheus_listen = \"{a}\" is not a loopback address \
                     (127.0.0.0/8 or ::1); set metrics.allow_non_loopback = true to serve \
                     the unauthenticated listener on it"
                )))
            }
            _ => Ok(()),
        }
    }

    /// Starts the listener for `logger` if `prometheus_listen` is set
    /// (`None` otherwise). The server serves until it is stopped or
    /// dropped, and keeps serving the last counters after the logger shut
    /// down.
    ///
    /// Errors: as [`check`](Self::check); [`ConfigError::Metrics`] if the
    /// address cannot be bound.
    pub fn start<R: crate::Record>(
        &self,
        logger: &Logger<R>,
    ) -> Result<Option<crate::metrics::MetricsServer>, ConfigError> {
        self.check()?;
        let Some(addr) = self.prometheus_listen else {
            return Ok(None);
        };
        crate::metrics::MetricsServer::serve_with(
            addr,
            logger.snapshot_source(),
            self.allow_non_loopback,
        )
        .map(Some)
        .map_err(|e| ConfigError::Metrics(addr, e))
    }
}

/// A configuration that could not be read or used.
#[derive(Debug)]
pub enum ConfigError {
    /// The file could not be read.
    Read(PathBuf, std::io::Error),
    /// The TOML is malformed, has an unknown key or a wrong value; the
    /// message names the key and the line.
    Parse(String),
    /// The sink could not be opened.
    Sink(std::io::Error),
    /// The runtime refused the settings.
    Logger(LoggerError),
    /// The `[metrics]` listener could not be started on this address.
    Metrics(std::net::SocketAddr, std::io::Error),
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ConfigError::Read(p, e) => write!(f, "cannot read config {}: {e}", p.display()),
            ConfigError::Parse(m) => write!(f, "bad config: {m}"),
            ConfigError::Sink(e) => write!(f, "cannot open sink: {e}"),
            ConfigError::Logger(e) => write!(f, "{e}"),
            ConfigError::Metrics(a, e) => write!(f, "cannot serve metrics on {a}: {e}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Parses TOML into `T`, turning errors into [`ConfigError::Parse`].
///
/// Besides TOML and serde errors (unknown key, wrong type, each with its
/// line), a `[format]` table whose `template` or `[format.templates]` goes
/// with a `type` other than `text` (which would ignore it) is an error
/// naming the key and its line.
pub fn parse_toml<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, ConfigError> {
    let v = toml::from_str(text).map_err(|e| {
        let msg = e.to_string();
        ConfigError::Parse(
            point_at_sink_key(text, &msg).unwrap_or_else(|| msg.trim_end().to_string()),
        )
    })?;
    check_format_keys(text)?;
    check_stream_keys(text)?;
    Ok(v)
}

/// A `[sink]` / `[[sink]]` error about one key (unknown, or a bad value:
/// an unknown variant, a wrong type, a value out of range), which toml
/// reports at the table's header (the sink tables go through
/// `toml::Value`, which keeps no positions), rewritten to point at the
/// key's own line and column like every other key error; in a nested
/// table (`[sink.x]`, `x = { ... }`, `x.y = ...`) at the innermost key.
/// `None` for other errors.
///
/// The key is found by deserializing the failing table again from the
/// parsed document, which keeps every key's and value's place
/// ([`sink_error_at`]); an error that names no place there falls back to
/// the first key named in backquotes.
fn point_at_sink_key(text: &str, msg: &str) -> Option<String> {
    // "[sink]: unknown field `bogus`, ..." or "[sink]: `keep_files` = 0 ...".
    let detail = msg
        .lines()
        .find(|l| l.starts_with("[sink]") || l.starts_with("[[sink]]"))?;
    let (label, _) = detail.split_once(": ")?;
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let table = match doc.get("sink")? {
        toml_edit::Item::Table(t) if label == "[sink]" => t,
        toml_edit::Item::ArrayOfTables(a) => {
            let n: usize = label.strip_prefix("[[sink]] #")?.parse().ok()?;
            a.get(n.checked_sub(1)?)?
        }
        _ => return None,
    };
    let (span, detail) = match sink_error_at(table) {
        Some((span, Some(why))) => (span, format!("{label}: {why}")),
        Some((span, None)) => (span, detail.to_string()),
        None => {
            let key = detail.split('`').nth(1)?;
            (table.key(key)?.span()?, detail.to_string())
        }
    };
    let (line, col) = line_col(text, span.start);
    let src = text.lines().nth(line - 1).unwrap_or("");
    let width = line.to_string().len();
    let pad = " ".repeat(width);
    let marks = "^".repeat(span.len().max(1));
    Some(format!(
        "TOML parse error at line {line}, column {col}\n{pad} |\n{line} | {src}\n{pad} | {}{marks}\n{detail}",
        " ".repeat(col - 1)
    ))
}

/// Where the first error of one sink table is: the span of the key it
/// is about, and the error's own message when it came from deserializing
/// the table's settings again here (`None`: toml's message stands, e.g.
/// for a missing or unknown `type`). `None` when no key can be named.
///
/// The table, without its `type`, is deserialized into that type's
/// settings from the parsed document's items, which keep their places
/// (unlike `toml::Value`, which the tagged sink tables go through), so the
/// error's span is the bad value's (or the unknown key's); the key whose
/// value holds that span is the one to point at.
fn sink_error_at(table: &toml_edit::Table) -> Option<(std::ops::Range<usize>, Option<String>)> {
    let (type_key, kind) = table.get_key_value("type")?;
    let type_span = type_key.span()?;
    let Some(kind) = kind.as_str() else {
        return Some((type_span, None));
    };
    let mut rest = table.clone();
    rest.remove("type");
    let rest = toml_edit::Item::Table(rest).into_value().ok()?;
    match settings_error(kind, rest) {
        // Unknown type (or one this build lacks): toml's message names it.
        None => Some((type_span, None)),
        Some(None) => None,
        Some(Some(e)) => {
            let at = e.span()?;
            let key = key_at(table, at.start)?;
            Some((key, Some(e.message().trim_end().to_string())))
        }
    }
}

/// The span of the innermost key of `table` (through nested tables,
/// inline tables and dotted keys) whose key or value covers byte `pos`.
fn key_at(table: &dyn toml_edit::TableLike, pos: usize) -> Option<std::ops::Range<usize>> {
    for (name, _) in table.iter() {
        let Some((key, item)) = table.get_key_value(name) else {
            continue;
        };
        if let Some(inner) = item.as_table_like().and_then(|t| key_at(t, pos)) {
            return Some(inner);
        }
        let covers = |s: Option<std::ops::Range<usize>>| s.is_some_and(|s| s.contains(&pos));
        if covers(key.span()) || covers(item.span()) {
            return key.span();
        }
    }
    None
}

/// The `[format]` keys [`check_format_keys`] looks at, with their places
/// in the text; every other key is ignored here (the real parse checks
/// them).
#[derive(Deserialize)]
struct FormatKeys {
    format: Option<FormatKeysTable>,
}

#[derive(Deserialize)]
struct FormatKeysTable {
    #[serde(rename = "type")]
    kind: Option<String>,
    template: Option<toml::Spanned<toml::Value>>,
    templates: Option<toml::Spanned<toml::Value>>,
}

/// 1-based line and column of byte `at` in `text`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = text.get(..at).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

/// A `template` / `templates` in `[format]` with a `type` other than
/// `text` is [`ConfigError::Parse`] naming the key, the type and the line.
fn check_format_keys(text: &str) -> Result<(), ConfigError> {
    let Ok(FormatKeys { format: Some(f) }) = toml::from_str::<FormatKeys>(text) else {
        return Ok(());
    };
    let kind = f.kind.as_deref().unwrap_or("text");
    if kind == "text" {
        return Ok(());
    }
    for (key, v) in [("template", &f.template), ("templates", &f.templates)] {
        if let Some(v) = v {
            let (line, col) = line_col(text, v.span().start);
            return Err(ConfigError::Parse(format!(
                "config error at line {line}, column {col}: [format] `{key}` applies only to type = \"text\", \
                 but type = \"{kind}\" would ignore it (remove `{key}` or set type = \"text\")"
            )));
        }
    }
    Ok(())
}

/// A `config error at line L, column C` for the key `key` of `table` (a
/// toml_edit table of `text`), with `why`: valid TOML whose settings do
/// not go together.
fn key_error(text: &str, table: &toml_edit::Table, key: &str, why: String) -> ConfigError {
    let at = table.key(key).and_then(|k| k.span()).map_or(0, |r| r.start);
    let (line, col) = line_col(text, at);
    ConfigError::Parse(format!("config error at line {line}, column {col}: {why}"))
}

/// Settings that would cut a binary stream (`binary`, `ipfix`) where its
/// reader cannot resume, each [`ConfigError::Parse`] at its line: a file
/// sink that rotates (`max_size_bytes`, `rotate_interval_ms`) or reopens
/// on SIGHUP starts a new file mid-stream without the stream's header
/// (schemas, IPFIX templates), and an mmap sink splits IPFIX messages
/// (binary logs are fine there: every segment carries the schemas). Also
/// `publish_every = 0`, a `slot_bytes` other than 32, 64 or 128 and an
/// empty `template`.
fn check_stream_keys(text: &str) -> Result<(), ConfigError> {
    let Ok(doc) = toml_edit::ImDocument::parse(text) else {
        return Ok(());
    };
    if let Some(ring) = doc.get("ring").and_then(toml_edit::Item::as_table) {
        if ring
            .get("publish_every")
            .and_then(toml_edit::Item::as_integer)
            == Some(0)
        {
            return Err(key_error(
                text,
                ring,
                "publish_every",
                "[ring] `publish_every` = 0: give 1 (publish every record) or more, or leave it out".into(),
            ));
        }
        if let Some(b) = ring.get("slot_bytes").and_then(toml_edit::Item::as_integer) {
            if !SLOT_SIZES.iter().any(|&s| s as i64 == b) {
                return Err(key_error(
                    text,
                    ring,
                    "slot_bytes",
                    format!("[ring] slot_bytes = {b}: must be 32, 64 or 128"),
                ));
            }
        }
    }
    let format = doc.get("format").and_then(toml_edit::Item::as_table);
    if let Some(f) = format {
        if f.get("template").and_then(toml_edit::Item::as_str) == Some("") {
            return Err(key_error(
                text,
                f,
                "template",
                "[format] `template` is empty: every record would be an empty line".into(),
            ));
        }
    }
    let kind = format
        .and_then(|f| f.get("type"))
        .and_then(toml_edit::Item::as_str)
        .unwrap_or("text");
    // Each sink table with the name an error calls it by: `[sink]`, or
    // `[[sink]] #N` (1-based) when the config lists several.
    let tables: Vec<(String, &toml_edit::Table)> = match doc.get("sink") {
        Some(toml_edit::Item::Table(t)) => vec![("[sink]".into(), t)],
        Some(toml_edit::Item::ArrayOfTables(a)) => a
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("[[sink]] #{}", i + 1), t))
            .collect(),
        _ => Vec::new(),
    };
    check_framing(text, kind, &tables)?;
    check_roles(text, &tables)?;
    check_addresses(text, &tables)?;
    if !matches!(kind, "binary" | "ipfix") {
        return Ok(());
    }
    for (label, t) in tables {
        let sink = t
            .get("type")
            .and_then(toml_edit::Item::as_str)
            .unwrap_or("");
        if sink != "file" {
            continue;
        }
        for key in ["max_size_bytes", "rotate_interval_ms", "reopen_on_sighup"] {
            let set = match t.get(key) {
                Some(v) if key == "reopen_on_sighup" => v.as_bool() == Some(true),
                Some(_) => true,
                None => false,
            };
            if set {
                return Err(key_error(
                    text,
                    t,
                    key,
                    format!(
                        "{label} `{key}` with [format] type = \"{kind}\": a new file would start \
                         mid-stream without the stream's header, and could not be decoded; rotate \
                         line formats only, or write binary logs to an mmap sink (every segment \
                         carries the schemas)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A format whose framing a sink cannot carry, [`ConfigError::Parse`] at
/// the sink's `type` line, saying which combinations work:
/// - `syslog` and `kafka` send one message per line (`\n`): a `binary` or
///   `ipfix` stream is not lines and would be cut at every 0x0A byte (and,
///   over TCP syslog, framed per piece), so they take the line formats
///   only (`text`, `json`, `csv`, `rfc5424`, `rfc3164`);
/// - `ipfix` (the exporter) re-packs IPFIX records into messages: it takes
///   `[format] type = "ipfix"` only;
/// - `archive` stores the binary stream's raw records: `binary` only;
/// - `mmap` splits its segments where IPFIX messages cannot be cut.
///
/// File sinks take every format; mmap sinks every one but `ipfix` (see
/// [`check_stream_keys`]).
fn check_framing(
    text: &str,
    kind: &str,
    tables: &[(String, &toml_edit::Table)],
) -> Result<(), ConfigError> {
    for (label, t) in tables {
        let sink = t
            .get("type")
            .and_then(toml_edit::Item::as_str)
            .unwrap_or("");
        if let Some(why) = framing_why(label, sink, kind) {
            return Err(key_error(text, t, "type", why));
        }
    }
    Ok(())
}

/// A first sink table with `role = "failover"`, [`ConfigError::Parse`] at
/// its `role`: a failover sink is the secondary of the sink listed before
/// it, and the first (or only) sink has none. Checked here, at load, so
/// the error has its line and nothing is opened.
fn check_roles(text: &str, tables: &[(String, &toml_edit::Table)]) -> Result<(), ConfigError> {
    let Some((label, t)) = tables.first() else {
        return Ok(());
    };
    if t.get("role").and_then(toml_edit::Item::as_str) != Some("failover") {
        return Ok(());
    }
    let why = if tables.len() == 1 && label == "[sink]" {
        format!(
            "{label} role = \"failover\": a failover sink needs a sink before it, the one it \
             takes over from, and a single [sink] has none; remove `role`, or list the primary \
             first as [[sink]] tables"
        )
    } else {
        format!(
            "{label} role = \"failover\" needs a sink before it, the one it takes over from; \
             list the primary [[sink]] first, or remove `role`"
        )
    };
    Err(key_error(text, t, "role", why))
}

/// Network addresses a sink would only reject when it opens (syslog, the
/// IPFIX exporter) or never (a Kafka broker list, which librdkafka retries
/// forever), [`ConfigError::Parse`] at their line:
/// - syslog over `udp`, `tcp` or `relp`: `address` an IP address and port
///   (`127.0.0.1:514`, `[::1]:514`);
/// - `ipfix`: `address` a `host:port` (the host may be a name, resolved
///   when the sink opens);
/// - `kafka`: `brokers` a comma-separated list of `host[:port]`.
fn check_addresses(text: &str, tables: &[(String, &toml_edit::Table)]) -> Result<(), ConfigError> {
    for (label, t) in tables {
        let get = |k: &str| t.get(k).and_then(toml_edit::Item::as_str);
        let (key, why) = match get("type").unwrap_or("") {
            "syslog" if matches!(get("transport").unwrap_or("udp"), "udp" | "tcp" | "relp") => {
                let Some(a) = get("address") else { continue };
                match a.parse::<std::net::SocketAddr>() {
                    Ok(_) => continue,
                    Err(_) => (
                        "address",
                        format!(
                            "{label} address = {a:?}: not an IP address and port{} (e.g. \
                             \"127.0.0.1:514\", \"[::1]:514\"); a local socket takes \
                             transport = \"unix_dgram\" or \"unix_stream\"",
                            a.rsplit_once(':')
                                .and_then(|(h, _)| dotted_why(h))
                                .map_or(String::new(), |w| format!(": {w}")),
                        ),
                    ),
                }
            }
            "ipfix" => {
                let Some(a) = get("address") else { continue };
                match host_port_why(a, true) {
                    None => continue,
                    Some(w) => (
                        "address",
                        format!("{label} address = {a:?}: {w} (e.g. \"192.0.2.10:4739\")"),
                    ),
                }
            }
            "kafka" => {
                let Some(b) = get("brokers") else { continue };
                match b.split(',').find_map(|h| host_port_why(h.trim(), false)) {
                    None => continue,
                    Some(w) => (
                        "brokers",
                        format!(
                            "{label} brokers = {b:?}: {w} (a comma-separated list of \
                             host[:port], e.g. \"127.0.0.1:9092,kafka-2:9092\")"
                        ),
                    ),
                }
            }
            _ => continue,
        };
        return Err(key_error(text, t, key, why));
    }
    Ok(())
}

/// Why `host`, made only of digits and dots, is not an IPv4 address
/// (`300.1.1.1`, `10.1`, `12345`); `None` for an IPv4 address or a host
/// with other characters. A resolver would take such a host as a name
/// (or, `getaddrinfo` after `inet_aton`, `10.1` as 10.0.0.1), so it is
/// refused instead.
fn dotted_why(host: &str) -> Option<String> {
    if host.is_empty()
        || !host.bytes().all(|c| c.is_ascii_digit() || c == b'.')
        || host.parse::<std::net::Ipv4Addr>().is_ok()
    {
        return None;
    }
    Some(format!(
        "{host:?} is not an IPv4 address (four numbers 0 to 255 separated by dots, e.g. \
         192.0.2.10)"
    ))
}

/// Why `a` is not `host:port` (`[v6]:port` for IPv6), with the port
/// optional unless `port_needed`; `None` when it is. A host of digits and
/// dots must be an IPv4 address ([`dotted_why`]).
fn host_port_why(a: &str, port_needed: bool) -> Option<String> {
    if a.parse::<std::net::SocketAddr>().is_ok() {
        return None;
    }
    let (host, port) = match a.rsplit_once(':') {
        // An IPv6 address without brackets would be cut at its last ':'.
        Some((h, p)) if !h.contains(':') || h.starts_with('[') => (h, Some(p)),
        Some(_) if a.parse::<std::net::Ipv6Addr>().is_ok() => {
            return Some(format!("an IPv6 address takes brackets: \"[{a}]:port\""));
        }
        Some(_) => return Some("not host:port".into()),
        None => (a, None),
    };
    if host.is_empty() {
        return Some(format!("no host in {a:?}"));
    }
    if let Some(w) = dotted_why(host) {
        return Some(w);
    }
    if let Some(h) = host.strip_prefix('[') {
        if h.strip_suffix(']')
            .and_then(|v| v.parse::<std::net::Ipv6Addr>().ok())
            .is_none()
        {
            return Some(format!("{host:?} is not a bracketed IPv6 address"));
        }
    } else if !host
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_'))
    {
        return Some(format!("{host:?} is not a host name or address"));
    }
    match port {
        Some(p) if p.parse::<u16>().map_or(true, |p| p == 0) => {
            Some(format!("port {p:?} is not a number in 1..65535"))
        }
        None if port_needed => Some("no port".into()),
        _ => None,
    }
}

/// `"File"` → `"file"`: a sink variant's name as its TOML `type`.
fn sink_type_name(variant: &'static str) -> &'static str {
    match variant {
        "File" => "file",
        "Mmap" => "mmap",
        "Syslog" => "syslog",
        "Ipfix" => "ipfix",
        "Kafka" => "kafka",
        "Archive" => "archive",
        _ => variant,
    }
}

/// Why a `sink` of this `type` cannot carry the `kind` format's framing,
/// with the combinations that work; `None` when it can. The rules of
/// [`check_framing`], shared with [`SinkConfig::check_framing`]. `label`
/// names the sink table in the message (`[sink]` or `[[sink]] #N`).
fn framing_why(label: &str, sink: &str, kind: &str) -> Option<String> {
    const LINES: &str = "text, json, csv, rfc5424, rfc3164";
    Some(match (sink, kind) {
        ("syslog" | "kafka", "binary" | "ipfix") => format!(
            "{label} type = \"{sink}\" with [format] type = \"{kind}\": the {sink} sink sends one \
             message per line, and {an} {kind} stream is not lines (it would be cut at every 0x0A \
             byte); {sink} takes the line formats ({LINES}); send ipfix to a sink of type = \
             \"ipfix\" (an IPFIX exporter) or a file, binary to a file or mmap sink",
            an = if kind == "ipfix" { "an" } else { "a" },
        ),
        ("ipfix", k) if k != "ipfix" => format!(
            "{label} type = \"ipfix\" with [format] type = \"{k}\": the IPFIX exporter sends \
             IPFIX records and takes [format] type = \"ipfix\" only; set it, or send {k} \
             to {}",
            if k == "binary" {
                "a file or mmap sink"
            } else {
                "a file, mmap, syslog or kafka sink"
            }
        ),
        ("archive", k) if k != "binary" => format!(
            "{label} type = \"archive\" with [format] type = \"{k}\": the archive stores \
             records, not formatted lines; set [format] type = \"binary\""
        ),
        ("mmap", "ipfix") => format!(
            "{label} type = \"mmap\" with [format] type = \"ipfix\": segments \
             would split IPFIX messages; write IPFIX to a file sink or send it to an ipfix sink \
             (or use type = \"binary\" for mmap segments)"
        ),
        _ => return None,
    })
}

impl SinkConfig {
    /// Checks that every sink of this config can carry `format`'s framing
    /// (the rules [`LogConfig::from_toml_str`] applies at the sink's line),
    /// and that no file sink rotates or reopens a `binary` or `ipfix`
    /// stream; for settings changed after loading, e.g. a command line's
    /// format.
    ///
    /// # Errors
    /// [`ConfigError::Parse`] naming the sink, the format and the
    /// combinations that work.
    pub fn check_framing(&self, format: crate::formatters::Format) -> Result<(), ConfigError> {
        match self {
            SinkConfig::Set(v) => v
                .iter()
                .enumerate()
                .try_for_each(|(i, s)| s.check_framing_as(&format!("[[sink]] #{}", i + 1), format)),
            s => s.check_framing_as("[sink]", format),
        }
    }

    /// [`SinkConfig::check_framing`] of one sink, named `label` in errors.
    fn check_framing_as(
        &self,
        label: &str,
        format: crate::formatters::Format,
    ) -> Result<(), ConfigError> {
        if let SinkConfig::Set(v) = self {
            return v.iter().try_for_each(|s| s.check_framing_as(label, format));
        }
        let kind = format.name();
        let sink = self.type_name().unwrap_or("");
        if let Some(why) = framing_why(label, sink, kind) {
            return Err(ConfigError::Parse(why));
        }
        if let (SinkConfig::File(f), "binary" | "ipfix") = (self, kind) {
            if f.max_size_bytes.is_some() || f.rotate_interval_ms.is_some() || f.reopen_on_sighup {
                return Err(ConfigError::Parse(format!(
                    "{label}: a file sink that rotates or reopens on SIGHUP with format \"{kind}\": a new \
                     file would start mid-stream without the stream's header; rotate line formats \
                     only, or write binary logs to an mmap sink"
                )));
            }
        }
        Ok(())
    }
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

impl LogConfig {
    /// Parses a TOML document; see the module docs for the keys.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        parse_toml(text)
    }

    /// The record types a logger of `slot_bytes`-byte slots serves for
    /// the program's `declared` types: those, in order, then the NAT
    /// schemas that fit the slot when `[schemas] nat = true`
    /// ([`SchemasConfig`]); nothing else. The first one takes `[format]
    /// template`.
    pub fn record_types<'a>(&self, declared: &[&'a Schema], slot_bytes: usize) -> Vec<&'a Schema> {
        let mut v = declared.to_vec();
        if self.schemas.nat {
            v.extend(
                crate::nat::all()
                    .into_iter()
                    .filter(|s| s.size() <= slot_bytes),
            );
        }
        v
    }

    /// The runtime settings of `[ring]`.
    pub fn logger_config(&self) -> LoggerConfig {
        LoggerConfig {
            ring_capacity: self.ring.capacity,
            backpressure: self.ring.backpressure,
            burst: self.ring.burst,
            batch_bytes: self.ring.batch_bytes,
            consumer_cpu: self.ring.consumer_cpu,
            block_spins: self.ring.block_spins,
            drop_reports: self.ring.drop_reports,
            degrade: self.ring.degrade,
            reorder_window_ns: self.ring.reorder_window_ns,
            reorder_idle_ms: self.ring.reorder_idle_ms,
            shutdown_timeout_ms: self.ring.shutdown_timeout_ms,
            sink_retry_timeout_ms: self.ring.sink_retry_timeout_ms,
            publish_every: self.ring.publish_every.unwrap_or(1),
            ..LoggerConfig::default()
        }
    }

    /// Checks the `[ring]` settings for rings of `slot_bytes`-byte records
    /// (`size_of::<R>()`) with [`LoggerConfig::validate`], without opening
    /// anything: a refused configuration creates no file.
    ///
    /// Errors: [`ConfigError::Logger`] naming the key, its value and the
    /// bound (for `capacity`, the memory the ring would take).
    pub fn check_ring(&self, slot_bytes: usize) -> Result<(), ConfigError> {
        self.logger_config()
            .validate(slot_bytes)
            .map_err(ConfigError::Logger)
    }

    /// The per-type table for `schemas` with `[ring.priorities]` applied.
    ///
    /// Errors: [`ConfigError::Parse`] naming `[ring.priorities]` for a
    /// record type that is not among `schemas`.
    pub fn schema_table(&self, schemas: &[&Schema]) -> Result<SchemaTable, ConfigError> {
        let mut t = SchemaTable::new(schemas.iter().copied());
        for (name, &p) in &self.ring.priorities {
            t = t.with_priority(schemas, name, p).map_err(|e| {
                ConfigError::Parse(format!(
                    "[ring.priorities] {name} = {p}: {e}; record types: {}",
                    schemas
                        .iter()
                        .map(|s| s.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
        }
        Ok(t)
    }

    /// Starts a logger of records of `schemas` (each ring of `R`): checks
    /// everything first, so a refused configuration opens no sink and
    /// creates no file.
    fn start_for<R: RecordBytes>(
        &self,
        schemas: &[&Schema],
        header: Option<&Schema>,
        rules: RecordRules<R>,
    ) -> Result<Logger<R>, ConfigError> {
        self.start_consumer(schemas, header, rules, &self.sink, self.ring.consumer_cpu)
    }

    /// One consumer of `schemas` writing to `sink`, pinned to `cpu`.
    fn start_consumer<R: RecordBytes>(
        &self,
        schemas: &[&Schema],
        header: Option<&Schema>,
        rules: RecordRules<R>,
        sink: &SinkConfig,
        cpu: Option<usize>,
    ) -> Result<Logger<R>, ConfigError> {
        self.check_ring(core::mem::size_of::<R>())?;
        let formatter = self.format.formatter(schemas)?;
        let mut cfg = self.logger_config();
        cfg.schemas = self.schema_table(schemas)?;
        cfg.consumer_cpu = cpu;
        let sink = match header {
            Some(_) => sink.build_for_schema(&self.format, schemas),
            None => sink.build(),
        }
        .map_err(ConfigError::Sink)?;
        Logger::start_with_rules(cfg, rules, formatter, sink).map_err(ConfigError::Logger)
    }

    /// Starts the `[consumers]` of records of type `R`: each consumer has
    /// its own formatter, sink instance ([`SinkConfig::for_consumer`]) and
    /// rings. All or nothing: if one cannot start, the ones started are
    /// shut down and the error returned.
    ///
    /// Errors: as [`start`](Self::start), and `[consumers]`'s
    /// ([`ConsumersConfig::count`]).
    pub fn start_consumers<R: HasSchema>(&self) -> Result<Consumers<R>, ConfigError> {
        self.start_group(&[R::schema()], RecordRules::by_schema())
    }

    /// [`start_consumers`](Self::start_consumers) for rings of slots of
    /// several record types; see [`start_slots`](Self::start_slots).
    ///
    /// Errors: as [`start_slots`](Self::start_slots) and
    /// [`start_consumers`](Self::start_consumers).
    pub fn start_slot_consumers<S: Slot>(
        &self,
        schemas: &[&Schema],
    ) -> Result<Consumers<S>, ConfigError> {
        check_slots(self.ring.slot_bytes, S::BYTES, schemas)?;
        self.start_group(&self.record_types(schemas, S::BYTES), RecordRules::own())
    }

    fn start_group<R: RecordBytes>(
        &self,
        schemas: &[&Schema],
        rules: RecordRules<R>,
    ) -> Result<Consumers<R>, ConfigError> {
        let n = self.consumers.count()?;
        // Every setting first, so a refused configuration opens nothing.
        self.check_ring(core::mem::size_of::<R>())?;
        self.format.formatter(schemas)?;
        self.schema_table(schemas)?;
        let mut loggers = Vec::with_capacity(n);
        for i in 0..n {
            let cpu = self
                .consumers
                .cpus
                .get(i)
                .copied()
                .or(self.ring.consumer_cpu.filter(|_| n == 1));
            let sink = self.sink.for_consumer(i);
            match self.start_consumer(schemas, schemas.first().copied(), rules, &sink, cpu) {
                Ok(l) => loggers.push(l),
                Err(e) => {
                    for l in loggers {
                        let _ = l.shutdown();
                    }
                    return Err(e);
                }
            }
        }
        Ok(Consumers { loggers })
    }

    /// Opens the sink, builds the formatter and starts a consumer thread
    /// for records of type `R` (one record type, its [`HasSchema::schema`];
    /// each producer's ring holds `R`s). The `[ring]` settings, priorities
    /// and the format are checked first ([`check_ring`](Self::check_ring)),
    /// so a refused configuration opens no sink and creates no file.
    ///
    /// Under `backpressure = "degrade"` a record's priority is
    /// `[ring.priorities]`'s for its type when set, else its schema's
    /// [`with_priority`](crate::Schema::with_priority) rule, read from the
    /// record's bytes ([`RecordRules::by_schema`]); its event time is the
    /// schema's event-time field.
    ///
    /// Errors: [`ConfigError::Logger`] for a `[ring]` setting,
    /// [`ConfigError::Parse`] for the format or `[ring.priorities]`,
    /// [`ConfigError::Sink`] if the sink cannot be opened.
    pub fn start<R: HasSchema>(&self) -> Result<Logger<R>, ConfigError> {
        self.start_for(&[R::schema()], Some(R::schema()), RecordRules::by_schema())
    }

    /// Starts a logger whose rings carry records of several types in
    /// slots of `S` (32, 64 or 128 bytes, [`crate::Slot32`] & co): pack
    /// records with `S::pack_record` (or `Slot64::pack`). `schemas` are
    /// the record types; each must fit the slot, and `[ring] slot_bytes`,
    /// if set, must be `S`'s size.
    ///
    /// Errors: as [`start`](Self::start); [`ConfigError::Parse`] naming
    /// `[ring] slot_bytes` for a slot size other than `S`'s or a record
    /// type larger than the slot.
    pub fn start_slots<S: Slot>(&self, schemas: &[&Schema]) -> Result<Logger<S>, ConfigError> {
        check_slots(self.ring.slot_bytes, S::BYTES, schemas)?;
        let all = self.record_types(schemas, S::BYTES);
        self.start_for(&all, all.first().copied(), RecordRules::own())
    }

    /// Starts a logger of NAT44 session records only (formatted with every
    /// NAT schema; see [`start`](Self::start)). A NAT logger by name: it
    /// serves the NAT schemas whatever `[schemas] nat` says.
    pub fn start_nat44(&self) -> Result<Logger<Nat44SessionRecord>, ConfigError> {
        self.start_for(
            &crate::nat::all(),
            Some(crate::nat::all()[0]),
            RecordRules::by_schema(),
        )
    }

    /// Starts a logger of every NAT record type in 64-byte slots
    /// ([`NatRecord`]); see [`start_slots`](Self::start_slots). A NAT
    /// logger by name: it serves the NAT schemas whatever `[schemas] nat`
    /// says.
    pub fn start_nat(&self) -> Result<Logger<NatRecord>, ConfigError> {
        let nat = crate::nat::all();
        check_slots(self.ring.slot_bytes, NatRecord::BYTES, &nat)?;
        self.start_for(&nat, nat.first().copied(), RecordRules::own())
    }
}

/// The slot sizes a ring can have.
pub const SLOT_SIZES: [usize; 3] = [32, 64, 128];

/// Checks a configured slot size against the slot type's `bytes` and
/// every schema against it.
///
/// Errors: [`ConfigError::Parse`] naming `[ring] slot_bytes`.
pub fn check_slots(
    configured: Option<usize>,
    bytes: usize,
    schemas: &[&Schema],
) -> Result<(), ConfigError> {
    if let Some(b) = configured {
        if !SLOT_SIZES.contains(&b) {
            return Err(ConfigError::Parse(format!(
                "[ring] slot_bytes = {b}: must be 32, 64 or 128"
            )));
        }
        if b != bytes {
            return Err(ConfigError::Parse(format!(
                "[ring] slot_bytes = {b}, but this program's rings have {bytes}-byte slots"
            )));
        }
    }
    for s in schemas {
        if s.size() > bytes {
            let hint = match SLOT_SIZES.iter().find(|&&x| x >= s.size()) {
                Some(x) => format!("set [ring] slot_bytes = {x}"),
                None => format!(
                    "no slot is that large: [ring] slot_bytes is at most {}",
                    SLOT_SIZES[SLOT_SIZES.len() - 1]
                ),
            };
            return Err(ConfigError::Parse(format!(
                "record type {} is {} bytes: it does not fit a {bytes}-byte slot ({hint})",
                s.name(),
                s.size(),
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(feature = "kafka")]
    use crate::sinks::KafkaKey;
    use crate::sinks::{FsyncPolicy, SyslogTransport};

    #[test]
    fn addresses_a_sink_cannot_use_are_errors_at_their_line() {
        let err = |text: &str| match LogConfig::from_toml_str(text) {
            Err(ConfigError::Parse(m)) => m,
            other => panic!("{text}: {other:?}"),
        };
        for (table, line, says) in [
            (
                "type = \"syslog\"\naddress = \"127.0.0.1:notaport\"",
                3,
                "[sink] address = \"127.0.0.1:notaport\": not an IP address and port",
            ),
            (
                "type = \"syslog\"\ntransport = \"tcp\"\naddress = \"loghost:514\"",
                4,
                "not an IP address and port",
            ),
            (
                "type = \"ipfix\"\naddress = \"collector\"",
                3,
                "[sink] address = \"collector\": no port",
            ),
            (
                "type = \"ipfix\"\naddress = \"2001:db8::1:4739\"",
                3,
                "an IPv6 address takes brackets",
            ),
            (
                "type = \"kafka\"\nbrokers = \"127.0.0.1:9092,127.0.0.1:notaport\"",
                3,
                "port \"notaport\" is not a number in 1..65535",
            ),
            (
                "type = \"kafka\"\nbrokers = \"k1:9092,,k2\"",
                3,
                "no host in \"\"",
            ),
            (
                "type = \"kafka\"\nbrokers = \"k 1:9092\"",
                3,
                "\"k 1\" is not a host name or address",
            ),
            (
                "type = \"ipfix\"\naddress = \"300.1.1.1:4739\"",
                3,
                "[sink] address = \"300.1.1.1:4739\": \"300.1.1.1\" is not an IPv4 address \
                 (four numbers 0 to 255 separated by dots, e.g. 192.0.2.10) (e.g. \
                 \"192.0.2.10:4739\")",
            ),
            (
                "type = \"ipfix\"\ntransport = \"tcp\"\naddress = \"10.1:4739\"",
                4,
                "\"10.1\" is not an IPv4 address",
            ),
            (
                "type = \"syslog\"\naddress = \"300.1.1.1:514\"",
                3,
                "[sink] address = \"300.1.1.1:514\": not an IP address and port: \
                 \"300.1.1.1\" is not an IPv4 address",
            ),
            (
                "type = \"kafka\"\nbrokers = \"127.0.0.1:9092,192.168.1.256\"",
                3,
                "\"192.168.1.256\" is not an IPv4 address",
            ),
        ] {
            if table.contains("kafka") && !cfg!(feature = "kafka") {
                // Refused for want of the feature instead (tested apart).
                continue;
            }
            let text = if table.contains("ipfix") {
                format!("[format]\ntype = \"ipfix\"\n[sink]\n{table}\n")
            } else {
                format!("[sink]\n{table}\n")
            };
            let line = if table.contains("ipfix") {
                line + 2
            } else {
                line
            };
            let m = err(&text);
            assert!(
                m.starts_with(&format!("config error at line {line}, column 1: ")),
                "{text}: {m}"
            );
            assert!(m.contains(says), "{text}: {m}");
        }
        // What works: IP literals, names with ports, a port-less broker.
        for table in [
            "type = \"syslog\"\naddress = \"[::1]:514\"",
            "type = \"syslog\"\ntransport = \"unix_dgram\"\naddress = \"/dev/log\"",
            "type = \"kafka\"\nbrokers = \"127.0.0.1:9092, kafka-2.example:9093,k3\"",
        ] {
            if table.contains("kafka") && !cfg!(feature = "kafka") {
                continue;
            }
            LogConfig::from_toml_str(&format!("[sink]\n{table}\n"))
                .unwrap_or_else(|e| panic!("{table}: {e}"));
        }
        for a in [
            "[2001:db8::1]:4739",
            "collector.example:4739",
            "192.0.2.10:4739",
            "1.example:4739",
            "host-1.2:4739",
        ] {
            LogConfig::from_toml_str(&format!(
                "[format]\ntype = \"ipfix\"\n[sink]\ntype = \"ipfix\"\naddress = \"{a}\"\n"
            ))
            .unwrap_or_else(|e| panic!("{a}: {e}"));
        }
    }

    #[test]
    fn formats_a_sink_cannot_carry_are_errors_at_the_sink_type_line() {
        let err = |text: &str| match LogConfig::from_toml_str(text) {
            Err(ConfigError::Parse(m)) => m,
            other => panic!(
                "expected a parse error for {text:?}, got {:?}",
                other.map(|_| ())
            ),
        };
        let mut bad = vec![
            ("ipfix", "type = \"syslog\"\ntransport = \"udp\"", "syslog"),
            ("binary", "type = \"syslog\"\ntransport = \"tcp\"", "syslog"),
            ("json", "type = \"ipfix\"", "ipfix"),
            ("text", "type = \"ipfix\"\ntransport = \"tcp\"", "ipfix"),
            ("csv", "type = \"ipfix\"", "ipfix"),
            ("rfc5424", "type = \"ipfix\"", "ipfix"),
            ("rfc3164", "type = \"ipfix\"", "ipfix"),
            ("binary", "type = \"ipfix\"", "ipfix"),
        ];
        if cfg!(feature = "kafka") {
            bad.push(("ipfix", "type = \"kafka\"\ntopic = \"t\"", "kafka"));
            bad.push(("binary", "type = \"kafka\"", "kafka"));
        }
        for (kind, table, sink) in bad {
            let text = format!("[format]\ntype = \"{kind}\"\n\n[sink]\n{table}\n");
            let m = err(&text);
            assert!(
                m.starts_with("config error at line 5, column 1: "),
                "{text}: {m}"
            );
            assert!(
                m.contains(&format!(
                    "[sink] type = \"{sink}\" with [format] type = \"{kind}\""
                )),
                "{m}"
            );
            // The message says what works.
            if sink == "ipfix" {
                assert!(m.contains("takes [format] type = \"ipfix\" only"), "{m}");
            } else {
                assert!(
                    m.contains("takes the line formats (text, json, csv, rfc5424, rfc3164)"),
                    "{m}"
                );
            }
        }
        // No [format]: text, which the exporter cannot carry.
        let m = err("[sink]\ntype = \"ipfix\"\n");
        assert!(m.starts_with("config error at line 2, column 1: "), "{m}");
        // In a set, at the line of the table concerned.
        let m = err(
            "[format]\ntype = \"ipfix\"\n[[sink]]\ntype = \"ipfix\"\n[[sink]]\ntype = \"file\"\npath = \"x\"\n[[sink]]\nrole = \"failover\"\ntype = \"syslog\"\n",
        );
        assert!(m.starts_with("config error at line 10, column 1: "), "{m}");
        // ... and named as the third of the set.
        assert!(
            m.contains("[[sink]] #3 type = \"syslog\" with [format] type = \"ipfix\""),
            "{m}"
        );
        // The same rule for a format chosen after loading names the sink of
        // the set too.
        let cfg = LogConfig::from_toml_str(
            "[[sink]]\ntype = \"file\"\npath = \"x\"\n[[sink]]\nrole = \"failover\"\ntype = \"syslog\"\n",
        )
        .expect("a text config with file and syslog sinks loads");
        let m = cfg
            .sink
            .check_framing(crate::formatters::Format::Binary)
            .expect_err("binary into syslog is refused")
            .to_string();
        assert!(
            m.contains("[[sink]] #2 type = \"syslog\" with [format] type = \"binary\""),
            "{m}"
        );
        // What works.
        for (kind, table) in [
            ("ipfix", "type = \"ipfix\"\naddress = \"127.0.0.1:4739\""),
            ("ipfix", "type = \"file\"\npath = \"x\""),
            ("binary", "type = \"file\"\npath = \"x\""),
            ("rfc5424", "type = \"syslog\""),
            ("json", "type = \"syslog\""),
            ("json", "type = \"mmap\"\ndir = \"d\""),
        ] {
            let text = format!("[format]\ntype = \"{kind}\"\n[sink]\n{table}\n");
            assert!(LogConfig::from_toml_str(&text).is_ok(), "{text}");
        }
        let c = LogConfig::from_toml_str(
            "[format]\ntype = \"ipfix\"\n[sink]\ntype = \"ipfix\"\ntransport = \"tcp\"\naddress = \"[::1]:4739\"\nmax_message_bytes = 1200\nobservation_domain_id = 5\n",
        )
        .unwrap();
        let SinkConfig::Ipfix(i) = &c.sink else {
            panic!("{:?}", c.sink)
        };
        let o = i.options().unwrap();
        assert_eq!(
            o.transport,
            crate::sinks::IpfixTransport::Tcp("[::1]:4739".parse().unwrap())
        );
        assert_eq!(
            (o.max_message_bytes, o.observation_domain_id),
            (1200, Some(5))
        );
        assert_eq!(c.sink.describe(), "ipfix tcp [::1]:4739");
    }

    #[test]
    fn settings_that_would_cut_a_binary_stream_are_errors_at_their_line() {
        let err = |text: &str| match LogConfig::from_toml_str(text) {
            Err(ConfigError::Parse(m)) => m,
            other => panic!(
                "expected a parse error for {text:?}, got {:?}",
                other.map(|_| ())
            ),
        };
        for (kind, key, value) in [
            ("binary", "max_size_bytes", "1000000"),
            ("binary", "rotate_interval_ms", "60000"),
            ("ipfix", "reopen_on_sighup", "true"),
        ] {
            let m = err(&format!(
                "[format]\ntype = \"{kind}\"\n[sink]\ntype = \"file\"\npath = \"x\"\n{key} = {value}\n"
            ));
            assert!(m.starts_with("config error at line 6, column 1: "), "{m}");
            assert!(
                m.contains(&format!("`{key}` with [format] type = \"{kind}\"")),
                "{m}"
            );
        }
        let m = err("[format]\ntype = \"ipfix\"\n[[sink]]\ntype = \"mmap\"\ndir = \"d\"\n");
        assert!(m.starts_with("config error at line 4, column 1: "), "{m}");
        // What stays allowed: no rotation, reopen off, binary into mmap,
        // rotation of a line format.
        for ok in [
            "[format]\ntype = \"binary\"\n[sink]\ntype = \"file\"\nreopen_on_sighup = false\n",
            "[format]\ntype = \"binary\"\n[sink]\ntype = \"mmap\"\ndir = \"d\"\n",
            "[format]\ntype = \"csv\"\n[sink]\ntype = \"file\"\nmax_size_bytes = 1000\n",
        ] {
            assert!(LogConfig::from_toml_str(ok).is_ok(), "{ok}");
        }
        let m = err("[ring]\npublish_every = 0\n");
        assert!(
            m.starts_with("config error at line 2, column 1: [ring] `publish_every` = 0"),
            "{m}"
        );
        let m = err("[format]\ntemplate = \"\"\n");
        assert!(
            m.contains("line 2, column 1: [format] `template` is empty"),
            "{m}"
        );
    }

    #[test]
    fn two_file_sinks_on_one_file_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.log");
        let same = dir.path().join(".").join("a.log");
        let text = format!(
            "[[sink]]\ntype = \"file\"\npath = \"{}\"\n[[sink]]\ntype = \"file\"\npath = \"{}\"\n",
            a.display(),
            same.display()
        );
        let cfg = LogConfig::from_toml_str(&text).unwrap();
        let e = cfg.sink.build().err().expect("refused");
        assert!(
            e.to_string()
                .contains("every record would be written twice"),
            "{e}"
        );
        assert!(!a.exists(), "nothing opened");
    }

    #[test]
    fn a_bad_mmap_segment_size_is_refused_before_any_sink_opens() {
        // Refused when the file is read: refused only when the mmap sink
        // opened, it left the file of the sink listed before it behind.
        let text = "[[sink]]\ntype = \"file\"\npath = \"x.log\"\n\
                    [[sink]]\ntype = \"mmap\"\ndir = \"d\"\nsegment_bytes = 4096\n";
        let m = match LogConfig::from_toml_str(text) {
            Err(ConfigError::Parse(m)) => m,
            other => panic!("expected a parse error, got {:?}", other.map(|_| ())),
        };
        assert!(m.contains("line 7"), "{m}");
        assert!(
            m.contains("`segment_bytes` = 4096 must be a multiple of 4096 and at least 65536"),
            "{m}"
        );
        for bad in [0, 65536 + 1, 61440] {
            let t = format!("[sink]\ntype = \"mmap\"\nsegment_bytes = {bad}\n");
            assert!(LogConfig::from_toml_str(&t).is_err(), "{bad}");
        }
        let ok = "[sink]\ntype = \"mmap\"\nsegment_bytes = 65536\n";
        assert!(LogConfig::from_toml_str(ok).is_ok());
    }

    #[test]
    fn a_set_whose_later_sink_cannot_open_leaves_no_file_behind() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        // An existing (empty) file of the set is kept; the one the first
        // sink created is removed.
        std::fs::write(dir.path().join("kept.log"), b"").unwrap();
        for second in [
            format!("type = \"mmap\"\ndir = \"{d}/no/such/dir\"\n"),
            format!("type = \"file\"\npath = \"{d}/no/such/x.log\"\n"),
        ] {
            let text = format!(
                "[[sink]]\ntype = \"file\"\npath = \"{d}/out.log\"\n\
                 [[sink]]\ntype = \"file\"\npath = \"{d}/kept.log\"\n\
                 [[sink]]\n{second}"
            );
            let cfg = LogConfig::from_toml_str(&text).unwrap();
            assert!(cfg.sink.build().is_err(), "{second}");
            assert!(!dir.path().join("out.log").exists(), "{second}");
            assert!(dir.path().join("kept.log").exists(), "{second}");
            assert!(!dir.path().join("no").exists(), "{second}");
        }
        // An address no sink could use is refused at load, before any sink
        // of the set opens.
        let text = format!(
            "[[sink]]\ntype = \"file\"\npath = \"{d}/out.log\"\n\
             [[sink]]\ntype = \"syslog\"\ntransport = \"tcp\"\naddress = \"nohost:99\"\n"
        );
        let e = LogConfig::from_toml_str(&text).err().unwrap().to_string();
        assert!(e.contains("[[sink]] #2 address = \"nohost:99\""), "{e}");
        assert!(!dir.path().join("out.log").exists());
    }

    #[test]
    fn an_unknown_key_in_a_sink_table_is_reported_at_its_own_line() {
        let err = |text: &str| match LogConfig::from_toml_str(text) {
            Err(ConfigError::Parse(m)) => m,
            other => panic!("expected a parse error, got {:?}", other.map(|_| ())),
        };
        let m =
            err("[ring]\ncapacity = 64\n[sink]\ntype = \"file\"\npath = \"x.log\"\nbogus = 1\n");
        assert!(
            m.starts_with("TOML parse error at line 6, column 1\n"),
            "{m}"
        );
        assert!(m.contains("6 | bogus = 1\n  | ^^^^^\n"), "{m}");
        assert!(m.contains("[sink]: unknown field `bogus`"), "{m}");
        let m = err(concat!(
            "[[sink]]\ntype = \"file\"\npath = \"a.log\"\n\n",
            "[[sink]]\ntype = \"file\"\npath = \"b.log\"\n  colour = \"red\"\n"
        ));
        assert!(
            m.starts_with("TOML parse error at line 8, column 3\n"),
            "{m}"
        );
        assert!(m.contains("[[sink]] #2: unknown field `colour`"), "{m}");
        let m = err("[sink]\ntype = \"file\"\npath = \"x.log\"\nkeep_files = 0\n");
        assert!(
            m.starts_with("TOML parse error at line 4, column 1\n"),
            "{m}"
        );
        assert!(
            m.contains("`keep_files` = 0 would delete every rotated file"),
            "{m}"
        );
        let m = err("[sink]\ntype = \"file\"\nkeep_days = 0\n");
        assert!(
            m.starts_with("TOML parse error at line 3, column 1\n"),
            "{m}"
        );
        assert!(m.contains("`keep_days` = 0"), "{m}");
        let ok = "[sink]\ntype = \"file\"\nkeep_files = 3\nkeep_days = 7\n";
        match LogConfig::from_toml_str(ok).unwrap().sink {
            SinkConfig::File(f) => assert_eq!((f.keep_files, f.keep_days), (Some(3), Some(7))),
            _ => panic!("a file sink"),
        }
        // Other errors keep toml's own position.
        let m = err("[ring]\ncapacity = \"big\"\n");
        assert!(m.contains("line 2"), "{m}");
    }

    /// The parse error of `text`, which must not load.
    fn parse_err(text: &str) -> String {
        match LogConfig::from_toml_str(text) {
            Err(ConfigError::Parse(m)) => m,
            other => panic!("expected a parse error, got {:?}", other.map(|_| ())),
        }
    }

    #[test]
    fn a_bad_value_in_a_sink_table_is_reported_at_its_key() {
        // The third sink of a set, its type misspelt: at `type`, line 9.
        let m = parse_err(concat!(
            "[[sink]]\ntype = \"file\"\npath = \"a.log\"\n",
            "[[sink]]\ntype = \"file\"\npath = \"b.log\"\n",
            "[[sink]]\npath = \"c.log\"\ntype = \"sylsog\"\n",
        ));
        assert_eq!(
            m,
            "TOML parse error at line 9, column 1\n  |\n9 | type = \"sylsog\"\n  | ^^^^\n\
             [[sink]] #3: unknown variant `sylsog`, expected one of `file`, `mmap`, `syslog`, \
             `archive`, `ipfix`, `kafka`"
        );
        // An unknown variant of another key, indented: its own column.
        let m = parse_err(concat!(
            "[sink]\ntype = \"syslog\"\naddress = \"127.0.0.1:514\"\n",
            "  transport = \"tpc\"\n",
        ));
        assert_eq!(
            m,
            "TOML parse error at line 4, column 3\n  |\n4 |   transport = \"tpc\"\n  |   \
             ^^^^^^^^^\n[sink]: unknown variant `tpc`, expected one of `udp`, `tcp`, \
             `unix_dgram`, `unix_stream`, `relp`"
        );
        // Wrong types and values out of range, in a set and alone.
        let m = parse_err(concat!(
            "[[sink]]\ntype = \"file\"\npath = \"a.log\"\n\n",
            "[[sink]]\ntype = \"file\"\npath = \"b.log\"\nfsync = \"sometimes\"\n",
        ));
        assert!(
            m.starts_with("TOML parse error at line 8, column 1\n"),
            "{m}"
        );
        assert!(m.contains("8 | fsync = \"sometimes\"\n  | ^^^^^\n"), "{m}");
        assert!(
            m.contains("[[sink]] #2: unknown variant `sometimes`"),
            "{m}"
        );
        let m = parse_err("[sink]\ntype = \"file\"\n\npath = 3\n");
        assert!(
            m.starts_with("TOML parse error at line 4, column 1\n"),
            "{m}"
        );
        assert!(
            m.ends_with("[sink]: invalid type: integer `3`, expected path string"),
            "{m}"
        );
        let m = parse_err("[sink]\ntype = \"file\"\nkeep_files = -1\n");
        assert!(
            m.starts_with("TOML parse error at line 3, column 1\n"),
            "{m}"
        );
        assert!(
            m.ends_with("[sink]: invalid value: integer `-1`, expected usize"),
            "{m}"
        );
        let m =
            parse_err("[[sink]]\ntype = \"file\"\n[[sink]]\ntype = \"mmap\"\nrole = \"backup\"\n");
        assert!(
            m.starts_with("TOML parse error at line 5, column 1\n"),
            "{m}"
        );
        assert!(m.contains("[[sink]] #2: unknown variant `backup`"), "{m}");
        // A `type` that is not a string: at `type`.
        let m = parse_err("[sink]\npath = \"a.log\"\ntype = 3\n");
        assert!(
            m.starts_with("TOML parse error at line 3, column 1\n"),
            "{m}"
        );
        // Two bad values: the message is the one the place points at, the
        // first in the file (not the first by name).
        let m = parse_err(concat!(
            "[sink]\ntype = \"syslog\"\ntransport = \"tpc\"\n",
            "address = 5\n",
        ));
        assert!(
            m.starts_with("TOML parse error at line 3, column 1\n"),
            "{m}"
        );
        assert!(m.contains("[sink]: unknown variant `tpc`"), "{m}");
        assert!(!m.contains("integer"), "{m}");
    }

    #[cfg(feature = "kafka")]
    #[test]
    fn a_bad_value_in_a_nested_sink_table_is_reported_at_its_own_key() {
        // `[sink.properties]`: at the key inside it, not at the header.
        let m = parse_err(concat!(
            "[sink]\ntype = \"kafka\"\ntopic = \"nat\"\n\n",
            "[sink.properties]\n\"socket.timeout.ms\" = \"100\"\n\"linger.ms\" = 5\n",
        ));
        assert_eq!(
            m,
            "TOML parse error at line 7, column 1\n  |\n7 | \"linger.ms\" = 5\n  | \
             ^^^^^^^^^^^\n[sink]: invalid type: integer `5`, expected a string"
        );
        // The same as a dotted key and in an inline table of a set.
        let m = parse_err("[sink]\ntype = \"kafka\"\nproperties.acks = 1\n");
        assert!(
            m.starts_with("TOML parse error at line 3, column 12\n"),
            "{m}"
        );
        assert!(
            m.contains("3 | properties.acks = 1\n  |            ^^^^\n"),
            "{m}"
        );
        let m = parse_err(concat!(
            "[[sink]]\ntype = \"file\"\n",
            "[[sink]]\ntype = \"kafka\"\nproperties = { acks = \"all\", \"retries\" = true }\n",
        ));
        assert!(
            m.starts_with("TOML parse error at line 5, column 30\n"),
            "{m}"
        );
        assert!(
            m.contains("[[sink]] #2: invalid type: boolean `true`, expected a string"),
            "{m}"
        );
    }

    #[test]
    fn a_template_with_a_format_that_ignores_it_is_an_error_naming_key_and_line() {
        for (kind, key) in [
            ("json", "template"),
            ("csv", "template"),
            ("rfc5424", "templates"),
        ] {
            let body = if key == "template" {
                "template = \"{sourceIPv4Address}\"\n".to_string()
            } else {
                "[format.templates]\nnatPortBlock = \"{portRangeStart}\"\n".to_string()
            };
            let text = format!("[ring]\ncapacity = 1024\n[format]\ntype = \"{kind}\"\n{body}");
            let e = LogConfig::from_toml_str(&text).unwrap_err().to_string();
            // `template = ...`, or the `[format.templates]` header.
            assert!(
                e.contains("line 5, column ")
                    && e.contains(&format!("`{key}`"))
                    && e.contains(&format!("type = \"{kind}\"")),
                "{kind}: {e}"
            );
        }
        // The same settings built in code: the formatter refuses them too.
        let spec = crate::formatters::FormatSpec {
            kind: crate::formatters::Format::Json,
            template: Some("{sourceIPv4Address}".into()),
            ..Default::default()
        };
        let e = spec.nat_formatter().err().unwrap().to_string();
        assert!(
            e.contains("`template` applies only to type \"text\"; this format is \"json\""),
            "{e}"
        );
        // With type text (or no type: text is the default) it is accepted.
        for text in [
            "[format]\ntype = \"text\"\ntemplate = \"{sourceIPv4Address}\"\n",
            "[format]\ntemplate = \"{sourceIPv4Address}\"\n",
        ] {
            let c = LogConfig::from_toml_str(text).unwrap();
            assert!(c.format.nat_formatter().is_ok());
        }
        // read_toml names the file as well.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("j.toml");
        std::fs::write(&p, "[format]\ntype = \"json\"\ntemplate = \"x\"\n").unwrap();
        let e = read_toml::<LogConfig>(&p).unwrap_err().to_string();
        assert!(
            e.contains("j.toml: config error at line 3, column 12"),
            "{e}"
        );
    }

    #[test]
    fn format_section_reads_template_profile_syslog_and_ipfix() {
        let c = LogConfig::from_toml_str(
            r#"
            [format]
            type = "rfc5424"
            profile = "legacy"
            [format.syslog]
            hostname = "cgnat-1"
            sd_id = "nsess@32473"
            profile = "vpp"
            [format.ipfix]
            mtu = 9000
            export_clock = "record"
            "#,
        )
        .unwrap();
        let s = c.format.spec();
        assert_eq!(s.kind, crate::formatters::Format::Rfc5424);
        assert_eq!(s.template, None);
        assert_eq!(s.renumber, crate::nat::EventProfile::Legacy.renumber());
        assert_eq!(s.syslog.hostname.as_deref(), Some("cgnat-1"));
        assert_eq!(s.syslog.app_name, None);
        assert_eq!(s.syslog.profile.as_deref(), Some("vpp"));
        // RFC 5424 section 6.3.2 SD-IDs, refused at their line.
        for (bad, why) in [
            ("nsess", "not an IANA-registered SD-ID"),
            ("nsess@abc", "private enterprise number"),
            ("a b@1", "contains ' '"),
        ] {
            let e = LogConfig::from_toml_str(&format!(
                "[format]
type = \"rfc5424\"
[format.syslog]
sd_id = \"{bad}\"
"
            ))
            .unwrap_err()
            .to_string();
            assert!(e.contains("line 4") && e.contains(why), "{bad}: {e}");
        }
        let e = LogConfig::from_toml_str(
            "[format.syslog]
profile = \"cisco\"
",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("line 2") && e.contains("profiles: vpp"), "{e}");
        assert_eq!(s.ipfix.mtu, 9000);
        assert_eq!(s.ipfix.template_refresh_secs, 20);
        assert!(c.format.nat_formatter().is_ok());
        let e = LogConfig::from_toml_str("[format]\ntype = \"text\"\ntemplate = \"x {nope}\"\n")
            .unwrap()
            .format
            .nat_formatter()
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("column 3") && e.contains("nope"), "{e}");
        let e = LogConfig::from_toml_str("[format]\ntype = \"ipfix\"\n[format.ipfix]\nmtu = 100\n")
            .unwrap()
            .format
            .nat_formatter()
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("mtu 100"), "{e}");
    }

    #[test]
    fn empty_document_gives_defaults() {
        let c = LogConfig::from_toml_str("").unwrap();
        assert_eq!(c, LogConfig::default());
        assert_eq!(c.ring.capacity, crate::runtime::DEFAULT_RING_CAPACITY);
        assert_eq!(c.ring.capacity, 16384);
        assert_eq!(c.format.kind, Format::Text);
    }

    #[test]
    fn every_key_is_read() {
        let c = LogConfig::from_toml_str(
            r#"
            [ring]
            capacity = 16
            backpressure = "drop"
            burst = 8
            batch_bytes = 65536
            consumer_cpu = 1
            [format]
            type = "json"
            [sink]
            type = "file"
            path = "/tmp/x.jsonl"
            "#,
        )
        .unwrap();
        let l = c.logger_config();
        assert_eq!(
            (
                l.ring_capacity,
                l.backpressure,
                l.burst,
                l.batch_bytes,
                l.consumer_cpu
            ),
            (16, Backpressure::Drop, 8, 65536, Some(1))
        );
        assert_eq!(c.format.kind, Format::Json);
        assert_eq!(
            c.sink,
            SinkConfig::File(FileSinkConfig {
                path: "/tmp/x.jsonl".into(),
                ..Default::default()
            })
        );
    }

    #[test]
    fn backpressure_names_and_degrade_watermarks() {
        for (name, want) in [
            ("block", Backpressure::Block),
            ("drop_newest", Backpressure::Drop),
            ("drop", Backpressure::Drop),
            ("degrade", Backpressure::Degrade),
        ] {
            let c =
                LogConfig::from_toml_str(&format!("[ring]\nbackpressure = \"{name}\"\n")).unwrap();
            assert_eq!(c.logger_config().backpressure, want, "{name}");
        }
        let c = LogConfig::from_toml_str(
            "[ring]\nbackpressure = \"degrade\"\nblock_spins = 7\ndrop_reports = false\n\
             [ring.degrade]\nhigh_watermark_pct = 90\nlow_watermark_pct = 40\nmin_priority = 3\n",
        )
        .unwrap();
        let l = c.logger_config();
        assert_eq!(
            l.degrade,
            DegradeConfig {
                high_watermark_pct: 90,
                low_watermark_pct: 40,
                min_priority: 3
            }
        );
        assert_eq!((l.block_spins, l.drop_reports), (7, false));
        assert_eq!(l.reorder_window_ns, None);
        let c = LogConfig::from_toml_str("[ring]\nreorder_window_ns = 250000\n").unwrap();
        assert_eq!(c.logger_config().reorder_window_ns, Some(250_000));
        let c = LogConfig::from_toml_str("[ring]\nshutdown_timeout_ms = 750\n").unwrap();
        assert_eq!(c.logger_config().shutdown_timeout_ms, 750);
        assert_eq!(
            LogConfig::default().logger_config().shutdown_timeout_ms,
            5000
        );
        let c = LogConfig::from_toml_str("[ring]\nsink_retry_timeout_ms = 1500\n").unwrap();
        assert_eq!(c.logger_config().sink_retry_timeout_ms, Some(1500));
        assert_eq!(
            LogConfig::default().logger_config().sink_retry_timeout_ms,
            None,
            "off by default: a failing sink is retried forever"
        );
        // Only the keys given change; the others keep their defaults.
        let c = LogConfig::from_toml_str("[ring.degrade]\nlow_watermark_pct = 10\n").unwrap();
        assert_eq!(c.ring.degrade.high_watermark_pct, 80);
        assert_eq!(c.ring.degrade.low_watermark_pct, 10);
        let e = LogConfig::from_toml_str("[ring.degrade]\nhigh = 1\n").unwrap_err();
        assert!(e.to_string().contains("high"), "{e}");
    }

    #[test]
    fn unknown_keys_and_values_are_named() {
        let e = LogConfig::from_toml_str("[ring]\ncapacity = 16\nsize = 4\n").unwrap_err();
        assert!(e.to_string().contains("size"), "{e}");
        assert!(e.to_string().contains("line 3"), "{e}");
        let e = LogConfig::from_toml_str("[sink]\ntype = \"file\"\npth = \"a\"\n").unwrap_err();
        assert!(e.to_string().contains("pth"), "{e}");
        let e = LogConfig::from_toml_str("[sink]\ntype = \"carrier-pigeon\"\n").unwrap_err();
        assert!(e.to_string().contains("carrier-pigeon"), "{e}");
        let e = LogConfig::from_toml_str("[ring]\nbackpressure = \"maybe\"\n").unwrap_err();
        assert!(e.to_string().contains("maybe"), "{e}");
        let e = LogConfig::from_toml_str("[format]\ntype = \"xml\"\n").unwrap_err();
        assert!(e.to_string().contains("xml"), "{e}");
        let e = LogConfig::from_toml_str("color = 1\n").unwrap_err();
        assert!(e.to_string().contains("color"), "{e}");
    }

    #[test]
    fn a_bad_ring_size_fails_at_start_with_the_number() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "[ring]\ncapacity = 1000\n[sink]\ntype = \"file\"\npath = \"{}\"\n",
            dir.path().join("a.log").display()
        );
        let e = LogConfig::from_toml_str(&text)
            .unwrap()
            .start_nat44()
            .err()
            .unwrap();
        assert!(e.to_string().contains("1000"), "{e}");
    }

    #[test]
    fn ring_sizes_past_their_bounds_are_refused_with_the_memory_and_open_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("a.log");
        let start = |ring: &str| {
            let text = format!(
                "[ring]\n{ring}\n[sink]\ntype = \"file\"\npath = \"{}\"\n",
                log.display()
            );
            let e = LogConfig::from_toml_str(&text)
                .unwrap()
                .start_nat44()
                .err()
                .unwrap()
                .to_string();
            assert!(
                !log.exists(),
                "{ring}: refused, yet {} exists",
                log.display()
            );
            e
        };
        assert_eq!(
            start("capacity = 268435456"),
            "invalid logger config: ring_capacity ([ring] capacity) = 268435456 slots x 64 B = 16 GiB per ring \
             is above the limit of 16777216 slots (1 GiB)"
        );
        assert_eq!(
            start("capacity = 1000"),
            "invalid logger config: ring_capacity ([ring] capacity) = 1000 slots x 64 B = 62.5 KiB per ring \
             must be a power of two from 1 to 16777216 slots (1 GiB)"
        );
        assert_eq!(
            start("batch_bytes = 1099511627776"),
            "invalid logger config: batch_bytes ([ring] batch_bytes) = 1099511627776 (1 TiB) is outside \
             65536 (64 KiB) to 268435456 (256 MiB)"
        );
        assert!(start("batch_bytes = 4096").contains("= 4096 (4 KiB) is outside"));
        assert!(start("burst = 0").contains("[ring] burst"));
        // The bounds themselves are accepted, and the Rust API refuses what
        // the TOML refuses, with an error rather than an abort.
        let c = LogConfig::from_toml_str("[ring]\ncapacity = 16777216\nbatch_bytes = 268435456\n")
            .unwrap();
        c.check_ring(64).unwrap();
        let lc = crate::LoggerConfig {
            batch_bytes: 1 << 40,
            ..Default::default()
        };
        let e = Logger::<Nat44SessionRecord>::start(
            lc,
            FormatConfig::default().nat_formatter().unwrap(),
            crate::sinks::FileSink::open(&log).unwrap(),
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("1 TiB"), "{e}");
        assert_eq!(
            crate::runtime::ring_memory(16384, 64),
            "16384 slots x 64 B = 1 MiB per ring"
        );
    }

    #[test]
    fn metrics_section_refuses_non_loopback_unless_allowed_and_serves() {
        let c =
            LogConfig::from_toml_str("[metrics]\nprometheus_listen = \"127.0.0.1:0\"\n").unwrap();
        assert_eq!(
            c.metrics.prometheus_listen,
            Some("127.0.0.1:0".parse().unwrap())
        );
        assert!(c.metrics.check().is_ok());
        assert_eq!(LogConfig::default().metrics.prometheus_listen, None);
        let far = "[metrics]\nprometheus_listen = \"0.0.0.0:9464\"\n";
        let e = LogConfig::from_toml_str(far)
            .unwrap()
            .metrics
            .check()
            .unwrap_err();
        assert!(e.to_string().contains("allow_non_loopback"), "{e}");
        let ok = format!("{far}allow_non_loopback = true\n");
        assert!(LogConfig::from_toml_str(&ok)
            .unwrap()
            .metrics
            .check()
            .is_ok());
        let e = LogConfig::from_toml_str("[metrics]\nprometheus_listen = \"localhost\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("prometheus_listen"), "{e}");
        assert!(LogConfig::from_toml_str("[metrics]\nport = 1\n").is_err());
        // Started from the config: a real GET over loopback.
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "[metrics]\nprometheus_listen = \"127.0.0.1:0\"\n[sink]\ntype = \"file\"\npath = \"{}\"\n",
            dir.path().join("m.log").display()
        );
        let c = LogConfig::from_toml_str(&text).unwrap();
        let logger = c.start_nat44().unwrap();
        let server = c.metrics.start(&logger).unwrap().expect("configured");
        let mut p = logger.producer().unwrap();
        for port in 0..10u16 {
            assert!(p.log(Nat44SessionRecord {
                nat_event: 4,
                src_port: port,
                ..Default::default()
            }));
        }
        drop(p);
        let s = logger.shutdown().unwrap();
        use std::io::{Read, Write};
        let mut t = std::net::TcpStream::connect(server.local_addr()).unwrap();
        write!(t, "GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut body = String::new();
        t.read_to_string(&mut body).unwrap();
        assert!(
            body.contains(&format!(
                "dplog_consumer_written_total {}\n",
                s.written_records
            )),
            "{body}"
        );
        assert_eq!(s.written_records, 10);
        server.stop();
    }

    #[test]
    fn start_nat44_writes_json_to_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let text = format!(
            "[format]\ntype = \"json\"\n[sink]\ntype = \"file\"\npath = \"{}\"\n",
            path.display()
        );
        let logger = LogConfig::from_toml_str(&text)
            .unwrap()
            .start_nat44()
            .unwrap();
        let mut p = logger.producer().unwrap();
        for port in 0..100u16 {
            assert!(p.log(Nat44SessionRecord {
                nat_event: 4,
                src_port: port,
                ..Default::default()
            }));
        }
        drop(p);
        let s = logger.shutdown().unwrap();
        assert_eq!(s.written_records, 100);
        let body = std::fs::read_to_string(&path).unwrap();
        let ports: Vec<u64> = body
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["sourceTransportPort"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(ports, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn sink_tables_fan_out_and_fail_over() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.log");
        let b = dir.path().join("b.log");
        let spill = dir.path().join("spill.log");
        let text = format!(
            "[[sink]]\ntype = \"file\"\npath = \"{}\"\nfsync = \"interval\"\nfsync_interval_ms = 50\n\
             max_size_bytes = 1048576\nrotate_interval_ms = 60000\nkeep_files = 3\nkeep_days = 2\n\
             [[sink]]\ntype = \"file\"\npath = \"/dev/full\"\n\
             [[sink]]\ntype = \"file\"\npath = \"{}\"\nrole = \"failover\"\n\
             [[sink]]\ntype = \"file\"\npath = \"{}\"\nfsync = \"batch\"\n",
            a.display(),
            spill.display(),
            b.display()
        );
        let c = LogConfig::from_toml_str(&text).unwrap();
        let SinkConfig::Set(items) = &c.sink else {
            panic!("not a set: {:?}", c.sink)
        };
        assert_eq!(items.len(), 4);
        let SinkConfig::File(f) = &items[0] else {
            panic!()
        };
        let o = f.options();
        assert_eq!(o.fsync, FsyncPolicy::EveryMs(50));
        assert_eq!(o.max_size_bytes, Some(1 << 20));
        assert_eq!(o.rotate_interval_ms, Some(60_000));
        assert_eq!((o.keep_files, o.keep_days), (Some(3), Some(2)));
        let logger = c.start_nat44().unwrap();
        let mut p = logger.producer().unwrap();
        for port in 0..50u16 {
            assert!(p.log(Nat44SessionRecord {
                src_port: port,
                ..Default::default()
            }));
        }
        drop(p);
        let s = logger.shutdown().unwrap();
        assert_eq!(s.written_records, 50);
        // a and b got every line; /dev/full failed over to spill.
        let a_body = std::fs::read(&a).unwrap();
        assert_eq!(a_body.iter().filter(|&&x| x == b'\n').count(), 50);
        assert_eq!(std::fs::read(&b).unwrap(), a_body);
        assert_eq!(std::fs::read(&spill).unwrap(), a_body);
    }

    #[test]
    fn a_failover_sink_with_no_sink_before_it_is_refused_at_load_at_its_role() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.log");
        let text = format!(
            "[format]\ntype = \"json\"\n\n[[sink]]\ntype = \"file\"\npath = \"{}\"\n  \
             role = \"failover\"\n[[sink]]\ntype = \"file\"\npath = \"{}\"\n",
            a.display(),
            dir.path().join("b.log").display()
        );
        let m = parse_err(&text);
        assert_eq!(
            m,
            "config error at line 7, column 3: [[sink]] #1 role = \"failover\" needs a sink \
             before it, the one it takes over from; list the primary [[sink]] first, or remove \
             `role`"
        );
        let m = parse_err("[sink]\ntype = \"file\"\nrole = \"failover\"\n");
        assert!(
            m.starts_with(
                "config error at line 3, column 1: [sink] role = \"failover\": a failover sink \
                 needs a sink before it"
            ),
            "{m}"
        );
        // A failover sink after another loads.
        let ok = "[[sink]]\ntype = \"file\"\n[[sink]]\ntype = \"file\"\npath = \"b\"\nrole = \"failover\"\n";
        LogConfig::from_toml_str(ok).unwrap();
        // A set made in code is refused before any sink opens.
        let set = SinkConfig::Set(vec![
            SinkConfig::File(FileSinkConfig {
                path: a.clone(),
                role: SinkRole::Failover,
                ..Default::default()
            }),
            SinkConfig::File(FileSinkConfig {
                path: dir.path().join("b.log"),
                ..Default::default()
            }),
        ]);
        let e = set.build().err().unwrap();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(
            e.to_string(),
            "[[sink]] #1: role = \"failover\" needs a sink before it"
        );
        assert!(!a.exists());
    }

    #[test]
    fn a_sink_of_a_set_that_cannot_open_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let text = format!(
            "[[sink]]\ntype = \"file\"\npath = \"{d}/a.log\"\n\
             [[sink]]\ntype = \"file\"\npath = \"{d}/b.log\"\n\
             [[sink]]\ntype = \"file\"\npath = \"{d}/nodir/c.log\"\n"
        );
        let e = LogConfig::from_toml_str(&text)
            .unwrap()
            .start_nat44()
            .err()
            .unwrap();
        let ConfigError::Sink(io) = &e else {
            panic!("{e}")
        };
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
        let m = e.to_string();
        let head = format!("cannot open sink: [[sink]] #3 (file {d}/nodir/c.log): ");
        assert!(m.starts_with(&head), "{m}");
        assert!(m.contains("No such file or directory"), "{m}");
        // The files the first two sinks created are gone again.
        assert!(!dir.path().join("a.log").exists());
        assert!(!dir.path().join("b.log").exists());
        // An archive whose directory is missing, second of its set.
        let text = format!(
            "[format]\ntype = \"binary\"\n\
             [[sink]]\ntype = \"mmap\"\ndir = \"{d}\"\n\
             [[sink]]\ntype = \"archive\"\ndir = \"{d}/nodir\"\n"
        );
        let e = LogConfig::from_toml_str(&text)
            .unwrap()
            .start_nat44()
            .err()
            .unwrap();
        let m = e.to_string();
        let head = format!("cannot open sink: [[sink]] #2 (archive {d}/nodir): ");
        assert!(m.starts_with(&head), "{m}");
        assert!(m.contains("No such file or directory"), "{m}");
        // A single sink keeps its own error: there is no set to place it in.
        let text = format!("[sink]\ntype = \"file\"\npath = \"{d}/nodir/c.log\"\n");
        let e = LogConfig::from_toml_str(&text)
            .unwrap()
            .start_nat44()
            .err()
            .unwrap();
        let m = e.to_string();
        assert!(
            m.starts_with(&format!("cannot open sink: {d}/nodir/c.log: ")),
            "{m}"
        );
    }

    #[test]
    fn sink_table_errors_are_named() {
        let e = LogConfig::from_toml_str("[[sink]]\ntype = \"file\"\nmax_size = 5\n").unwrap_err();
        assert!(e.to_string().contains("max_size"), "{e}");
        assert!(e.to_string().contains("#1"), "{e}");
        let e =
            LogConfig::from_toml_str("[sink]\ntype = \"file\"\nrole = \"backup\"\n").unwrap_err();
        assert!(e.to_string().contains("backup"), "{e}");
        let e = LogConfig::from_toml_str(
            "[[sink]]\ntype = \"file\"\npath = \"/tmp/x\"\nrole = \"failover\"\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("failover"), "{e}");
        let c = LogConfig::from_toml_str("sink = []\n").unwrap();
        assert!(c.start_nat44().is_err());
    }

    #[cfg(not(feature = "kafka"))]
    #[test]
    fn a_kafka_sink_without_the_kafka_feature_is_refused_naming_the_feature_and_line() {
        let e = LogConfig::from_toml_str(
            "[[sink]]\ntype = \"file\"\npath = \"a.log\"\n[[sink]]\ntopic = \"nat\"\ntype = \"kafka\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(
                "[[sink]] #2: `type` = \"kafka\": this build has no Kafka support: rebuild with feature `kafka`"
            ),
            "{e}"
        );
        assert!(e.contains("line 6, column 1"), "{e}");
        assert!(!std::path::Path::new("a.log").exists());
    }

    #[cfg(feature = "kafka")]
    #[test]
    fn every_sink_type_parses_and_builds() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            r#"
            [[sink]]
            type = "mmap"
            dir = "{d}"
            prefix = "seg"
            segment_bytes = 131072
            msync_interval_ms = 0
            [[sink]]
            type = "syslog"
            transport = "udp"
            address = "127.0.0.1:5514"
            max_datagram_bytes = 1024
            [[sink]]
            type = "syslog"
            transport = "unix_stream"
            address = "{d}/none.sock"
            role = "failover"
            [[sink]]
            type = "kafka"
            brokers = "127.0.0.1:1"
            topic = "nat"
            key_field = "sourceIPv4Address"
            linger_ms = 1
            message_max_bytes = 10000
            lines_per_message = 8
            ack_timeout_ms = 750
            properties = {{ "client.id" = "dplog-test" }}
            "#,
            d = dir.path().display()
        );
        let c = LogConfig::from_toml_str(&text).unwrap();
        let SinkConfig::Set(items) = &c.sink else {
            panic!("{:?}", c.sink)
        };
        let SinkConfig::Kafka(k) = &items[3] else {
            panic!()
        };
        let o = k.options();
        assert_eq!(o.key, KafkaKey::Field("sourceIPv4Address".into()));
        assert_eq!(
            o.properties,
            vec![("client.id".into(), "dplog-test".into())]
        );
        assert_eq!(o.message_max_bytes, Some(10000));
        assert_eq!(o.lines_per_message, 8);
        assert_eq!(o.ack_timeout_ms, 750);
        assert_eq!(KafkaSinkConfig::default().options().ack_timeout_ms, 5000);
        let SinkConfig::Syslog(s) = &items[1] else {
            panic!()
        };
        assert_eq!(
            s.options().unwrap().transport,
            SyslogTransport::Udp("127.0.0.1:5514".parse().unwrap())
        );
        let mut sink = c.sink.build().unwrap();
        sink.close().unwrap();
        assert!(dplog_sinks::mmap::list_segments(dir.path(), "seg")
            .unwrap()
            .is_empty());
        let e = LogConfig::from_toml_str("[sink]\ntype = \"syslog\"\naddress = \"nohost\"\n")
            .err()
            .unwrap();
        assert!(e.to_string().contains("nohost"), "{e}");
        let e = LogConfig::from_toml_str("[sink]\ntype = \"kafka\"\nkey = \"x\"\n").unwrap_err();
        assert!(e.to_string().contains("key"), "{e}");
    }

    #[test]
    fn syslog_relp_transport_and_window_parse() {
        let c = LogConfig::from_toml_str(
            "[sink]\ntype = \"syslog\"\ntransport = \"relp\"\naddress = \"127.0.0.1:2514\"\nrelp_window = 32\n",
        )
        .unwrap();
        let SinkConfig::Syslog(s) = &c.sink else {
            panic!("{:?}", c.sink)
        };
        let o = s.options().unwrap();
        assert_eq!(
            o.transport,
            SyslogTransport::Relp("127.0.0.1:2514".parse().unwrap())
        );
        assert_eq!(o.relp_window, 32);
        assert_eq!(c.sink.describe_each(), vec!["syslog relp 127.0.0.1:2514"]);
        assert_eq!(
            SyslogSinkConfig::default().options().unwrap().relp_window,
            128
        );
        // A window the sink refuses is an error naming it.
        let bad = LogConfig::from_toml_str(
            "[sink]\ntype = \"syslog\"\ntransport = \"relp\"\nrelp_window = 0\n",
        )
        .unwrap();
        let e = bad.sink.build().err().unwrap();
        assert!(e.to_string().contains("relp_window"), "{e}");
        let e = LogConfig::from_toml_str("[sink]\ntype = \"syslog\"\ntransport = \"reliable\"\n")
            .unwrap_err();
        assert!(e.to_string().contains("relp"), "{e}");
    }
}
