//! TOML configuration that chooses the ring, the format and the sink.
//!
//! ```toml
//! [ring]
//! capacity = 2048          # slots per producer ring, a power of two
//! backpressure = "block"   # "block" (lossless) or "drop" (counted)
//! burst = 32               # records per ring per consumer pass
//! batch_bytes = 262144     # bytes per sink write, at least 65536
//! # consumer_cpu = 1       # pin the consumer thread
//!
//! [format]
//! type = "text"            # "text" or "json"
//!
//! [sink]
//! type = "file"
//! path = "dplog.log"
//! ```
//!
//! Every key is optional and defaults as shown. An unknown key or a value
//! of the wrong type is an error that names the key and its line.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::formatters::Format;
use crate::sinks::FileSink;
use crate::{Backpressure, Logger, LoggerConfig, LoggerError, Nat44SessionRecord};

/// `[ring]`: ring and consumer settings; see [`LoggerConfig`].
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RingConfig {
    /// Slots per producer ring; a power of two. Default 2048.
    pub capacity: usize,
    /// `block` or `drop`. Default `block`.
    pub backpressure: Backpressure,
    /// Records per ring per consumer pass. Default 32.
    pub burst: usize,
    /// Bytes per sink write, at least 65536. Default 262144.
    pub batch_bytes: usize,
    /// CPU to pin the consumer thread to. Default: not pinned.
    pub consumer_cpu: Option<usize>,
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
        }
    }
}

/// `[format]`: the output format.
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct FormatConfig {
    /// `text` or `json`. Default `text`.
    #[serde(rename = "type")]
    pub kind: Format,
}

/// `[sink]`: where formatted records go, chosen by `type`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SinkConfig {
    /// `type = "file"`: a [`FileSink`].
    File(FileSinkConfig),
}

impl Default for SinkConfig {
    fn default() -> Self {
        SinkConfig::File(FileSinkConfig::default())
    }
}

/// `[sink] type = "file"` settings.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FileSinkConfig {
    /// File to append to; created with mode 0640. Default `dplog.log`.
    pub path: PathBuf,
}

impl Default for FileSinkConfig {
    fn default() -> Self {
        Self {
            path: PathBuf::from("dplog.log"),
        }
    }
}

/// The whole logging configuration: `[ring]`, `[format]`, `[sink]`.
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// `[ring]`.
    pub ring: RingConfig,
    /// `[format]`.
    pub format: FormatConfig,
    /// `[sink]`.
    pub sink: SinkConfig,
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
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ConfigError::Read(p, e) => write!(f, "cannot read config {}: {e}", p.display()),
            ConfigError::Parse(m) => write!(f, "bad config: {m}"),
            ConfigError::Sink(e) => write!(f, "cannot open sink: {e}"),
            ConfigError::Logger(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Parses TOML into `T`, turning errors into [`ConfigError::Parse`].
pub fn parse_toml<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::Parse(e.to_string().trim_end().to_string()))
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

    /// The runtime settings of `[ring]`.
    pub fn logger_config(&self) -> LoggerConfig {
        LoggerConfig {
            ring_capacity: self.ring.capacity,
            backpressure: self.ring.backpressure,
            burst: self.ring.burst,
            batch_bytes: self.ring.batch_bytes,
            consumer_cpu: self.ring.consumer_cpu,
            ..LoggerConfig::default()
        }
    }

    /// Opens the sink, builds the formatter and starts a consumer thread for
    /// NAT44 session records.
    pub fn start_nat44(&self) -> Result<Logger<Nat44SessionRecord>, ConfigError> {
        let formatter = self.format.kind.nat44_formatter();
        let sink = match &self.sink {
            SinkConfig::File(f) => FileSink::open(&f.path).map_err(ConfigError::Sink)?,
        };
        Logger::start(self.logger_config(), formatter, sink).map_err(ConfigError::Logger)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_document_gives_defaults() {
        let c = LogConfig::from_toml_str("").unwrap();
        assert_eq!(c, LogConfig::default());
        assert_eq!(c.ring.capacity, 2048);
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
                path: "/tmp/x.jsonl".into()
            })
        );
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
}
