//! `[sink]` / `[[sink]]`: the sink tables, dispatched on `type` to each
//! sink's own settings (`dplog_sinks::<sink>::config`).

use super::*;

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
        pub(super) enum OneSink {
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
        pub(super) fn settings_error(
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

        /// Applies the own rules ([`SinkSettings::check`]) of a sink of
        /// `type` = `kind` deserialized from `table` (its table without
        /// `type`) against the `format` named so; `None` for settings
        /// that do not deserialize (reported by the real parse) or a type
        /// this build does not have.
        pub(super) fn settings_check(
            kind: &str,
            table: toml_edit::Value,
            format: &str,
        ) -> Option<Result<(), crate::sinks::config::SettingsError>> {
            use serde::de::IntoDeserializer as _;
            $(
                $(#[cfg($cfg)])*
                if kind == sink_type_name(stringify!($variant)) {
                    return <$settings>::deserialize(table.into_deserializer())
                        .ok()
                        .map(|s| s.check(format));
                }
            )*
            let _ = (table, format);
            None
        }

        impl SinkConfig {
            /// The `type` of every sink this build takes, as written in
            /// TOML, in declaration order: `file`, `mmap`, `syslog`,
            /// `archive`, `ipfix`, `clickhouse`, and `kafka` with the `kafka` feature.
            /// Help texts list them from here, so they name every type.
            pub fn type_names() -> Vec<&'static str> {
                [$( $(#[cfg($cfg)])* sink_type_name(stringify!($variant)), )*].to_vec()
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
    /// `type = "clickhouse"`: a
    /// [`ClickHouseSink`](crate::sinks::ClickHouseSink) (with `[format]
    /// type = "binary"`).
    Clickhouse(ClickHouseSinkConfig),
    /// `type = "kafka"`: a `KafkaSink` (feature `kafka`).
    #[cfg(feature = "kafka")]
    Kafka(KafkaSinkConfig),
}

/// `type = "kafka"` in a build without the `kafka` feature: never built,
/// its deserialization is the error naming the feature.
#[cfg(not(feature = "kafka"))]
pub(super) enum NoKafka {}

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

/// `"File"` → `"file"`: a sink variant's name as its TOML `type`.
pub(super) fn sink_type_name(variant: &'static str) -> &'static str {
    match variant {
        "File" => "file",
        "Mmap" => "mmap",
        "Syslog" => "syslog",
        "Ipfix" => "ipfix",
        "Kafka" => "kafka",
        "Archive" => "archive",
        "Clickhouse" => "clickhouse",
        _ => variant,
    }
}

impl SinkConfig {
    /// Applies every sink's own rules against `format`
    /// ([`SinkSettings::check`]: the framing it can carry, no file sink
    /// rotating or reopening a `binary` or `ipfix` stream, its addresses),
    /// which [`LogConfig::from_toml_str`] applies at the key's line; for
    /// settings changed after loading, e.g. a command line's format.
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
        match self.one().map(|s| s.check(format.name())) {
            Some(Err(e)) => Err(ConfigError::Parse(format!("{label} {}", e.why))),
            _ => Ok(()),
        }
    }
}
