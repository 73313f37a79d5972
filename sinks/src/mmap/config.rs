//! `type = "mmap"` settings (feature `config`): [`MmapSinkConfig`].

use std::io;
use std::path::PathBuf;

use serde::Deserialize;

use super::{MmapSink, MmapSinkOptions};
use crate::config::{SettingsError, SinkRole, SinkSettings};
use crate::route::BoxSink;

/// `type = "mmap"` settings; see [`MmapSinkOptions`].
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MmapSinkConfig {
    /// Existing directory for the segment files. Default `.`.
    pub dir: PathBuf,
    /// Segment file name prefix. Default `dplog`.
    pub prefix: String,
    /// Segment size, a multiple of 4096, at least 65536. Default 64 MiB.
    #[serde(deserialize_with = "segment_bytes_valid")]
    pub segment_bytes: u64,
    /// msync period (also before a roll); 0 = only at close. Default 1000.
    pub msync_interval_ms: u64,
    /// `fanout` (default) or `failover`.
    pub role: SinkRole,
    /// Seal the segments (`seal = { key_file = "...", sign_every_s = N }`,
    /// as a file sink's, `[sink.seal.anchor]` included; `dplog-verify DIR`
    /// checks them). Default: no seal.
    pub seal: Option<crate::file::SealConfig>,
}

impl Default for MmapSinkConfig {
    fn default() -> Self {
        let d = MmapSinkOptions::default();
        Self {
            dir: PathBuf::from("."),
            prefix: d.prefix,
            segment_bytes: d.segment_bytes,
            msync_interval_ms: d.msync_interval_ms.unwrap_or(0),
            role: SinkRole::Fanout,
            seal: None,
        }
    }
}

/// `segment_bytes` as [`MmapSink::open`] accepts it, checked when the file
/// is read: refused only at open, it left the files of the sinks opened
/// before it (a `[[sink]]` set) behind.
fn segment_bytes_valid<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = u64::deserialize(d)?;
    if v % 4096 != 0 || v < 64 * 1024 {
        return Err(serde::de::Error::custom(format!(
            "`segment_bytes` = {v} must be a multiple of 4096 and at least 65536"
        )));
    }
    Ok(v)
}

impl MmapSinkConfig {
    /// The sink options these settings describe, with `header` as
    /// [`MmapSinkOptions::header`].
    pub fn options(&self, header: Option<&[u8]>) -> MmapSinkOptions {
        MmapSinkOptions {
            segment_bytes: self.segment_bytes,
            msync_interval_ms: (self.msync_interval_ms > 0).then_some(self.msync_interval_ms),
            prefix: self.prefix.clone(),
            header: header.map(<[u8]>::to_vec),
            seal: self.seal.as_ref().map(crate::file::SealConfig::options),
        }
    }
}

impl SinkSettings for MmapSinkConfig {
    /// `ipfix`: segments would split IPFIX messages. Every other format,
    /// `binary` included (every segment carries the schemas), is fine.
    fn check(&self, format: &str) -> Result<(), SettingsError> {
        crate::settings::nonempty_path("dir", &self.dir)?;
        if let Some(seal) = &self.seal {
            seal.check("mmap sink", false)?;
        }
        crate::settings::failover_stream("mmap", self.role, format)?;
        if format != "ipfix" {
            return Ok(());
        }
        Err(SettingsError::new(
            "type",
            "type = \"mmap\" with [format] type = \"ipfix\": segments would split IPFIX \
             messages; write IPFIX to a file sink or send it to an ipfix sink (or use type = \
             \"binary\" for mmap segments)"
                .into(),
        ))
    }

    fn role(&self) -> SinkRole {
        self.role
    }

    /// `mmap DIR`.
    fn describe(&self) -> String {
        format!("mmap {}", self.dir.display())
    }

    /// An [`MmapSink`] on `dir`, with the seal's anchor sink when there
    /// is one.
    fn build(&self, header: Option<&[u8]>) -> io::Result<BoxSink> {
        let mut sink = MmapSink::open(&self.dir, self.options(header))?;
        if let Some(anchor) = self.seal.as_ref().and_then(|s| s.anchor.as_ref()) {
            anchor.attach(|a, records| sink.anchor_to(a, records))?;
        }
        Ok(Box::new(sink))
    }
}
