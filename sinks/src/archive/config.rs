//! `type = "archive"` settings (feature `config`): [`ArchiveSinkConfig`].
//!
//! ```toml
//! [format]
//! type = "binary"          # the archive takes the binary stream
//! [sink]
//! type = "archive"
//! dir = "archive"          # an existing directory
//! ```

use std::io;
use std::path::PathBuf;

use serde::Deserialize;

use super::{ArchiveSink, ArchiveSinkOptions};
use crate::config::{SettingsError, SinkRole, SinkSettings};
use crate::route::BoxSink;

/// `type = "archive"` settings; see [`ArchiveSinkOptions`] (0 turns the
/// optional limits off).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ArchiveSinkConfig {
    /// Existing directory of the segments. Default `archive`.
    pub dir: PathBuf,
    /// Index key fields; see [`ArchiveSinkOptions::index`]. Default
    /// `["@lifecycle"]`: each record type's lifecycle keys. A name that
    /// no record type of the stream has is refused.
    pub index: Vec<String>,
    /// Key tuple fields of the segment summaries; see
    /// [`ArchiveSinkOptions::summary`]. Default `["@lifecycle"]`: each
    /// record type's lifecycle keys together; `[]`: no summary.
    pub summary: Vec<String>,
    /// Records per block. Default 16384.
    pub block_rows: usize,
    /// Event-time slice per segment, ms; 0 = by size only. Default
    /// 3600000.
    pub segment_interval_ms: u64,
    /// Bytes of blocks per segment. Default 268435456.
    pub segment_bytes: u64,
    /// A partial block is written after this long, ms. Default 1000.
    pub block_max_age_ms: u64,
    /// fsync period of the open segment, ms; 0 = only when sealed.
    /// Default 1000.
    pub fsync_interval_ms: u64,
    /// Remove segments older than this (event time, before the newest
    /// record), ms; 0 = keep. Default 0.
    pub retention_age_ms: u64,
    /// Remove the oldest segments beyond this many bytes; 0 = keep.
    /// Default 0.
    pub retention_bytes: u64,
    /// The longest session or port block lifetime, ms: the default
    /// lookback of `dplog-query --at`. Default 86400000.
    pub max_lifetime_ms: u64,
    /// zstd level 1 to 19. Default 3.
    pub zstd_level: i32,
    /// Segment format version sealed, 3 or 4; see
    /// [`ArchiveSinkOptions::format_version`]. Default 4.
    pub format_version: u32,
    /// `fanout` (default) or `failover`.
    pub role: SinkRole,
    /// Seal the segments (`seal = { key_file = "...", sign_every_s = N }`,
    /// as a file sink's, `[sink.seal.anchor]` included; `dplog-verify DIR`
    /// checks them). Default: no seal.
    pub seal: Option<crate::file::SealConfig>,
}

impl Default for ArchiveSinkConfig {
    fn default() -> Self {
        let d = ArchiveSinkOptions::default();
        Self {
            dir: PathBuf::from("archive"),
            index: d.index,
            summary: d.summary,
            block_rows: d.block_rows,
            segment_interval_ms: d.segment_interval_ms.unwrap_or(0),
            segment_bytes: d.segment_bytes,
            block_max_age_ms: d.block_max_age_ms,
            fsync_interval_ms: d.fsync_interval_ms.unwrap_or(0),
            retention_age_ms: 0,
            retention_bytes: 0,
            max_lifetime_ms: d.max_lifetime_ms,
            zstd_level: d.zstd_level,
            format_version: d.format_version,
            role: SinkRole::Fanout,
            seal: None,
        }
    }
}

impl ArchiveSinkConfig {
    /// The sink options these settings describe.
    pub fn options(&self) -> ArchiveSinkOptions {
        let opt = |v: u64| (v > 0).then_some(v);
        ArchiveSinkOptions {
            index: self.index.clone(),
            summary: self.summary.clone(),
            block_rows: self.block_rows,
            segment_interval_ms: opt(self.segment_interval_ms),
            segment_bytes: self.segment_bytes,
            block_max_age_ms: self.block_max_age_ms,
            fsync_interval_ms: opt(self.fsync_interval_ms),
            retention_age_ms: opt(self.retention_age_ms),
            retention_bytes: opt(self.retention_bytes),
            max_lifetime_ms: self.max_lifetime_ms,
            zstd_level: self.zstd_level,
            format_version: self.format_version,
            seal: self.seal.as_ref().map(crate::file::SealConfig::options),
        }
    }
}

impl SinkSettings for ArchiveSinkConfig {
    /// The archive stores the binary stream's records: `binary` only, and
    /// not with `role = "failover"` (a secondary takes over mid-stream,
    /// after the schema frames went to the primary).
    fn check(&self, format: &str) -> Result<(), SettingsError> {
        crate::settings::nonempty_path("dir", &self.dir)?;
        if let Some(seal) = &self.seal {
            seal.check("archive", false)?;
        }
        if format == "binary" {
            return crate::settings::failover_stream("archive", self.role, format);
        }
        Err(SettingsError::new(
            "type",
            format!(
                "type = \"archive\" with [format] type = \"{format}\": the archive stores \
                 records, not formatted lines; set [format] type = \"binary\""
            ),
        ))
    }

    fn role(&self) -> SinkRole {
        self.role
    }

    /// `archive DIR`.
    fn describe(&self) -> String {
        format!("archive {}", self.dir.display())
    }

    /// An [`ArchiveSink`] on `dir` (the header is not used: segments
    /// carry their schemas), with the seal's anchor sink when there is
    /// one.
    fn build(&self, _header: Option<&[u8]>) -> io::Result<BoxSink> {
        let mut sink = ArchiveSink::open(&self.dir, self.options())?;
        if let Some(anchor) = self.seal.as_ref().and_then(|s| s.anchor.as_ref()) {
            anchor.attach(|a, records| sink.anchor_to(a, records))?;
        }
        Ok(Box::new(sink))
    }
}
