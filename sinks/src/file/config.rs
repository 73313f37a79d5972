//! `type = "file"` settings (feature `config`): [`FileSinkConfig`].

use std::io;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{FileSink, FileSinkOptions, FsyncPolicy};
use crate::config::{SettingsError, SinkRole, SinkSettings};
use crate::route::BoxSink;

/// `fsync` of a file sink.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum FsyncSetting {
    /// Only at rotation and close. Default.
    #[default]
    Never,
    /// Every `fsync_interval_ms` when something was written.
    Interval,
    /// After every batch.
    Batch,
}

/// `Some(n)` for `n >= 1`; 0 is an error naming `key`.
fn at_least_one<'de, D, T>(d: D, key: &str) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + PartialEq + From<u8>,
{
    let v = T::deserialize(d)?;
    if v == T::from(0) {
        return Err(serde::de::Error::custom(format!(
            "`{key}` = 0 would delete every rotated file; leave `{key}` out to keep them all, \
             or give 1 or more"
        )));
    }
    Ok(Some(v))
}

fn keep_files_at_least_one<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<usize>, D::Error> {
    at_least_one(d, "keep_files")
}

fn keep_days_at_least_one<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    at_least_one(d, "keep_days")
}

/// `seal = { key_file = "...", sign_every_s = N }` of a file sink: seal
/// what the sink writes ([`crate::seal`]).
///
/// ```toml
/// [sink]
/// type = "file"
/// path = "/var/log/nat/sessions.log"
/// max_size_bytes = 1_000_000_000
/// seal = { key_file = "/etc/dplog/seal.key", sign_every_s = 60 }
/// ```
///
/// With the signed heads also sent to another host's syslog receiver:
///
/// ```toml
/// [sink]
/// type = "file"
/// path = "/var/log/nat/sessions.log"
///
/// [sink.seal]
/// key_file = "/etc/dplog/seal.key"
///
/// [sink.seal.anchor]
/// transport = "tcp"
/// address = "192.0.2.10:514"
/// ```
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SealConfig {
    /// The Ed25519 private key (PKCS#8 PEM, mode 0600; `dplog-verify
    /// keygen` makes one). Required. The sink is refused when it is
    /// missing, unreadable, not 0600 or not such a key.
    pub key_file: PathBuf,
    /// Also sign the chain head every this many seconds while records
    /// come in (the head is always signed at rotation and at close).
    /// At least 1. Default: 60.
    #[serde(default = "default_sign_every_s")]
    pub sign_every_s: u64,
    /// Also send every signed head to a sink on another host
    /// (`[sink.seal.anchor]`), for `dplog-verify --anchors`: see
    /// [`AnchorConfig`]. Default: none.
    #[serde(default)]
    pub anchor: Option<AnchorConfig>,
    /// Where the writes are hashed: `"thread"` (a hasher thread of the
    /// sink's own, while the consumer formats the next batch) or
    /// `"inline"` (on the consumer thread, as it writes; the only mode
    /// of the mmap and archive sinks). Default for file sinks: the
    /// thread if `hasher_cpu` is given or the process may run on 3 or
    /// more CPUs, inline otherwise
    /// ([`HasherMode::for_this_machine`](crate::seal::HasherMode::for_this_machine)).
    #[serde(default)]
    pub hasher: Option<HasherSetting>,
    /// The CPU to pin the hasher thread to (one the producers and the
    /// consumer do not use). Default: not pinned.
    #[serde(default)]
    pub hasher_cpu: Option<usize>,
}

/// `[sink.seal.anchor]`: where a sealed file sink also sends every signed
/// chain head, chosen by `type`; the other keys are that sink's own.
///
/// - no `type`, or `type = "syslog"`: a syslog receiver (the keys of a
///   `type = "syslog"` sink: `transport`, `address`, ...), one RFC 5424
///   message per head;
/// - `type = "kafka"` (feature `kafka`): a Kafka topic (the keys of a
///   `type = "kafka"` sink: `brokers`, `topic`, ...), one JSON message per
///   head, a [`SealHead`](crate::seal::anchor::SealHead) record with its
///   byte fields in hex;
/// - `type = "clickhouse"`: a ClickHouse table (the keys of a `type =
///   "clickhouse"` sink: `url`, `table`, ...), one row per head; the
///   table is the `SealHead` schema's
///   ([`create_table`](crate::clickhouse::columns::create_table) makes it).
///
/// ```toml
/// [sink]
/// type = "file"
/// path = "/var/log/nat/sessions.log"
///
/// [sink.seal]
/// key_file = "/etc/dplog/seal.key"
///
/// [sink.seal.anchor]
/// type = "clickhouse"
/// url = "http://192.0.2.10:8123"
/// table = "seal_heads"
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum AnchorConfig {
    /// A syslog receiver.
    Syslog(crate::syslog::config::SyslogSinkConfig),
    /// A Kafka topic.
    #[cfg(feature = "kafka")]
    Kafka(crate::kafka::config::KafkaSinkConfig),
    /// A ClickHouse table.
    Clickhouse(crate::clickhouse::config::ClickHouseSinkConfig),
}

impl<'de> Deserialize<'de> for AnchorConfig {
    /// The table read whole, dispatched on `type` (absent: syslog, as
    /// before there was a choice), the rest given to that sink's settings.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut v = serde_json::Value::deserialize(d)?;
        let ty = match v.as_object_mut().map(|m| m.remove("type")) {
            None => return Err(D::Error::custom("`seal.anchor` must be a table")),
            Some(None) => None,
            Some(Some(serde_json::Value::String(t))) => Some(t),
            Some(Some(other)) => {
                return Err(D::Error::custom(format!(
                    "`seal.anchor.type` = {other}: give \"syslog\", \"kafka\" or \"clickhouse\""
                )))
            }
        };
        let e = |e: serde_json::Error| D::Error::custom(format!("seal.anchor: {e}"));
        match ty.as_deref() {
            None | Some("syslog") => serde_json::from_value(v).map(Self::Syslog).map_err(e),
            #[cfg(feature = "kafka")]
            Some("kafka") => serde_json::from_value(v).map(Self::Kafka).map_err(e),
            #[cfg(not(feature = "kafka"))]
            Some("kafka") => Err(D::Error::custom(
                "`seal.anchor.type` = \"kafka\": this build has no Kafka support: rebuild \
                 with feature `kafka`",
            )),
            Some("clickhouse") => serde_json::from_value(v).map(Self::Clickhouse).map_err(e),
            Some(t) => Err(D::Error::custom(format!(
                "`seal.anchor.type` = {t:?}: an anchor goes to \"syslog\" (the default), \
                 \"kafka\" or \"clickhouse\""
            ))),
        }
    }
}

impl AnchorConfig {
    /// Checks the anchor sink's settings with the format its heads take
    /// (rfc5424 lines, JSON lines, the binary stream).
    fn check(&self) -> Result<(), SettingsError> {
        let r = match self {
            Self::Syslog(c) => c.check("rfc5424"),
            #[cfg(feature = "kafka")]
            Self::Kafka(c) => c.check("json"),
            Self::Clickhouse(c) => c.check("binary"),
        };
        r.map_err(|e| SettingsError::new("seal", format!("seal.anchor: {e}")))
    }

    /// Opens the anchor sink and hands it to a sealed sink with `to`:
    /// the sink and, for heads as records, their formatter (`None`: the
    /// syslog anchor's RFC 5424 lines).
    pub(crate) fn attach(
        &self,
        to: impl FnOnce(BoxSink, Option<dplog_formatters::SchemaFormatter>) -> io::Result<()>,
    ) -> io::Result<()> {
        use dplog_formatters::Format;
        let (built, format) = match self {
            Self::Syslog(c) => (c.build(None)?, None),
            #[cfg(feature = "kafka")]
            Self::Kafka(c) => (c.build(None)?, Some(Format::Json)),
            Self::Clickhouse(c) => (c.build(None)?, Some(Format::Binary)),
        };
        let records = format
            .map(crate::seal::anchor::formatter)
            .transpose()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        to(built, records)
    }
}

/// `hasher` of a `seal` table.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum HasherSetting {
    /// A hasher thread.
    Thread,
    /// On the consumer thread.
    Inline,
}

fn default_sign_every_s() -> u64 {
    60
}

impl SealConfig {
    /// The checks every sink's `seal` table shares: `sign_every_s` at
    /// least 1, the anchor sink's settings, and `hasher = "thread"` or
    /// `hasher_cpu` only where `file_sink`; `sink` names the sink for the
    /// message.
    pub(crate) fn check(&self, sink: &str, file_sink: bool) -> Result<(), SettingsError> {
        if self.sign_every_s == 0 {
            return Err(SettingsError::new(
                "seal",
                "`seal.sign_every_s` = 0: give the seconds between signatures, 1 or more \
                 (the head is also signed whenever a file or segment closes)"
                    .to_string(),
            ));
        }
        if let Some(a) = &self.anchor {
            a.check()?;
        }
        if !file_sink && (self.hasher == Some(HasherSetting::Thread) || self.hasher_cpu.is_some()) {
            return Err(SettingsError::new(
                "seal",
                format!(
                    "`seal.hasher = \"thread\"` and `seal.hasher_cpu` are for file sinks; the \
                     {sink} hashes inline (leave them out)"
                ),
            ));
        }
        Ok(())
    }

    /// The sink's [`SealOptions`](crate::seal::SealOptions).
    pub(crate) fn options(&self) -> crate::seal::SealOptions {
        crate::seal::SealOptions {
            key_file: self.key_file.clone(),
            sign_every: Some(std::time::Duration::from_secs(self.sign_every_s)),
            hasher: match (self.hasher, self.hasher_cpu) {
                (Some(HasherSetting::Inline), _) => crate::seal::HasherMode::Inline,
                // A CPU to pin to asks for the thread.
                (Some(HasherSetting::Thread), _) | (None, Some(_)) => {
                    crate::seal::HasherMode::Thread
                }
                (None, None) => crate::seal::HasherMode::for_this_machine(),
            },
            hasher_cpu: self.hasher_cpu,
        }
    }
}

/// `type = "file"` settings; see [`FileSinkOptions`].
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FileSinkConfig {
    /// File to append to; created with mode 0640. Default `dplog.log`.
    pub path: PathBuf,
    /// `never` (default), `interval` or `batch`.
    pub fsync: FsyncSetting,
    /// Period of `fsync = "interval"`, in milliseconds. Default 1000.
    pub fsync_interval_ms: u64,
    /// Rotate before the file exceeds this size. Default: no limit.
    pub max_size_bytes: Option<u64>,
    /// Rotate a non-empty file this long after it was opened. Default: never.
    pub rotate_interval_ms: Option<u64>,
    /// Keep at most this many rotated files, at least 1 (0 would delete
    /// every rotated file, so it is an error). Default: all.
    #[serde(deserialize_with = "keep_files_at_least_one")]
    pub keep_files: Option<usize>,
    /// Delete rotated files older than this many days, at least 1 (0 is an
    /// error, as for `keep_files`). Default: never.
    #[serde(deserialize_with = "keep_days_at_least_one")]
    pub keep_days: Option<u32>,
    /// Reopen the path on SIGHUP (for an external logrotate). Default false.
    pub reopen_on_sighup: bool,
    /// `fanout` (default) or `failover`; see [`SinkRole`].
    pub role: SinkRole,
    /// Seal what is written (hash chain and signatures in `<path>.seal`);
    /// see [`SealConfig`]. Default: no seal.
    pub seal: Option<SealConfig>,
}

impl Default for FileSinkConfig {
    fn default() -> Self {
        Self {
            path: PathBuf::from("dplog.log"),
            fsync: FsyncSetting::Never,
            fsync_interval_ms: 1000,
            max_size_bytes: None,
            rotate_interval_ms: None,
            keep_files: None,
            keep_days: None,
            reopen_on_sighup: false,
            role: SinkRole::Fanout,
            seal: None,
        }
    }
}

impl FileSinkConfig {
    /// The sink options these settings describe.
    pub fn options(&self) -> FileSinkOptions {
        FileSinkOptions {
            fsync: match self.fsync {
                FsyncSetting::Never => FsyncPolicy::Never,
                FsyncSetting::Interval => FsyncPolicy::EveryMs(self.fsync_interval_ms),
                FsyncSetting::Batch => FsyncPolicy::EveryBatch,
            },
            max_size_bytes: self.max_size_bytes,
            rotate_interval_ms: self.rotate_interval_ms,
            keep_files: self.keep_files,
            keep_days: self.keep_days,
            reopen_on_sighup: self.reopen_on_sighup,
            header: None,
            seal: self.seal.as_ref().map(SealConfig::options),
        }
    }
}

impl SinkSettings for FileSinkConfig {
    /// A file that rotates (`max_size_bytes`, `rotate_interval_ms`) or
    /// reopens on SIGHUP (`reopen_on_sighup`) with a `binary` or `ipfix`
    /// stream: the new file would start mid-stream without the stream's
    /// header (schemas, IPFIX templates), and could not be decoded; so
    /// would a `role = "failover"` file with those formats, which takes
    /// over mid-stream. Every other format is fine.
    fn check(&self, format: &str) -> Result<(), SettingsError> {
        crate::settings::nonempty_path("path", &self.path)?;
        if let Some(seal) = &self.seal {
            seal.check("file sink", true)?;
            if self.reopen_on_sighup {
                return Err(SettingsError::new(
                    "seal",
                    "`seal` with `reopen_on_sighup`: an external rotation moves the file without \
                     its seal file (`<path>.seal`); rotate with `max_size_bytes` or \
                     `rotate_interval_ms`, which move both"
                        .to_string(),
                ));
            }
        }
        crate::settings::failover_stream("file", self.role, format)?;
        if !matches!(format, "binary" | "ipfix") {
            return Ok(());
        }
        let key = if self.max_size_bytes.is_some() {
            "max_size_bytes"
        } else if self.rotate_interval_ms.is_some() {
            "rotate_interval_ms"
        } else if self.reopen_on_sighup {
            "reopen_on_sighup"
        } else {
            return Ok(());
        };
        Err(SettingsError::new(
            key,
            format!(
                "`{key}` with [format] type = \"{format}\": a file sink that rotates or reopens \
                 on SIGHUP would start a new file mid-stream without the stream's header, and \
                 it could not be decoded; rotate line formats only, or write binary logs to an \
                 mmap sink (every segment carries the schemas)"
            ),
        ))
    }

    fn role(&self) -> SinkRole {
        self.role
    }

    /// `file PATH`.
    fn describe(&self) -> String {
        format!("file {}", self.path.display())
    }

    /// A [`FileSink`] with `header` as its [`FileSinkOptions::header`],
    /// and the seal's anchor sink when there is one.
    fn build(&self, header: Option<&[u8]>) -> io::Result<BoxSink> {
        let mut sink = FileSink::with_options(
            &self.path,
            FileSinkOptions {
                header: header.map(<[u8]>::to_vec),
                ..self.options()
            },
        )?;
        if let Some(anchor) = self.seal.as_ref().and_then(|s| s.anchor.as_ref()) {
            anchor.attach(|a, records| sink.anchor_to(a, records))?;
        }
        Ok(Box::new(sink))
    }

    fn output_file(&self) -> Option<&Path> {
        Some(&self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::SealConfig;
    use crate::seal::HasherMode;

    fn hasher(extra: &str) -> HasherMode {
        let c: SealConfig =
            serde_json::from_str(&format!(r#"{{"key_file": "/etc/dplog/seal.key"{extra}}}"#))
                .unwrap();
        c.options().hasher
    }

    #[test]
    fn an_unset_hasher_follows_the_cpus_and_a_hasher_cpu_asks_for_the_thread() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let expected = if cpus >= 3 {
            HasherMode::Thread
        } else {
            HasherMode::Inline
        };
        assert_eq!(hasher(""), expected, "{cpus} CPUs");
        assert_eq!(hasher(r#", "hasher_cpu": 1"#), HasherMode::Thread);
        assert_eq!(
            hasher(r#", "hasher": "inline", "hasher_cpu": 1"#),
            HasherMode::Inline
        );
        assert_eq!(hasher(r#", "hasher": "thread""#), HasherMode::Thread);
        assert_eq!(HasherMode::for_cpus(1), HasherMode::Inline);
        assert_eq!(HasherMode::for_cpus(2), HasherMode::Inline);
        assert_eq!(HasherMode::for_cpus(3), HasherMode::Thread);
    }
}
