//! The archive sink's settings and counters.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use dplog_core::schema::Schema;

use super::format;

/// The archive sink's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchiveSinkOptions {
    /// Index key fields by name, in key order; each record type's key
    /// is the subset of them it has (a type with none of them is not
    /// indexed). Default `["@lifecycle"]`
    /// ([`format::LIFECYCLE_KEYS`]): each record type's own lifecycle
    /// keys, none for a type without a lifecycle. `[]`: no index.
    pub index: Vec<String>,
    /// Records per data block (per schema), 1 to 1,048,576. Default 16384.
    pub block_rows: usize,
    /// A new segment per slice of this many ms of event time (aligned to
    /// multiples of it); `None`: by size only. Default one hour.
    pub segment_interval_ms: Option<u64>,
    /// A new segment once this many bytes of blocks are written to one.
    /// Default 256 MiB.
    pub segment_bytes: u64,
    /// A partial block is written once its first record is this old (wall
    /// clock). Default 1000.
    pub block_max_age_ms: u64,
    /// fsync of the open segment at most this often; `None`: only when
    /// sealed. Default 1000.
    pub fsync_interval_ms: Option<u64>,
    /// Remove sealed segments whose newest record is older than this
    /// before the newest record written. Default: keep.
    pub retention_age_ms: Option<u64>,
    /// Remove the oldest sealed segments while they take more bytes than
    /// this. Default: keep.
    pub retention_bytes: Option<u64>,
    /// The key tuple fields of the segment summaries ([`summary`](super::summary)), by
    /// name, in tuple order: each record type's tuple is the subset of
    /// them it has, all together (the rule of [`index`](Self::index)'s
    /// named fields). Default `["@lifecycle"]`: each type's lifecycle
    /// keys together. A lookup that gives every tuple field of each type
    /// it may match opens only the segments whose summary may hold that
    /// tuple: set it to the fields your lookups give (the NAT's
    /// `["postNATSourceIPv4Address", "postNAPTSourceTransportPort"]`:
    /// its lifecycle keys are the whole session, which "who had this
    /// address and port" does not give). `[]`: no summary.
    pub summary: Vec<String>,
    /// The longest a session (or port block) lives, ms: stored in every
    /// footer as the default lookback of `dplog-query --at`. Default one
    /// day.
    pub max_lifetime_ms: u64,
    /// zstd level, 1 to 19. Default 3.
    pub zstd_level: i32,
    /// Seal the segments ([`crate::seal`]): every block, header and
    /// footer written is chained with BLAKE3 in `<segment>.seal` (renamed
    /// with its segment, deleted with it by retention), the head signed
    /// with Ed25519 when a segment is sealed, at close and every
    /// `sign_every`; the segments form one chain, across restarts. A
    /// segment a crash left open is recovered with its seal cut back to
    /// the blocks kept and the new footer sealed late. `None` (default):
    /// no seal.
    pub seal: Option<crate::seal::SealOptions>,
}

impl Default for ArchiveSinkOptions {
    fn default() -> Self {
        Self {
            index: vec![format::LIFECYCLE_KEYS.into()],
            summary: vec![format::LIFECYCLE_KEYS.into()],
            block_rows: 16384,
            segment_interval_ms: Some(3_600_000),
            segment_bytes: 256 << 20,
            block_max_age_ms: 1000,
            fsync_interval_ms: Some(1000),
            retention_age_ms: None,
            retention_bytes: None,
            max_lifetime_ms: 86_400_000,
            zstd_level: 3,
            seal: None,
        }
    }
}

impl ArchiveSinkOptions {
    /// Checks the settings.
    ///
    /// Errors: `InvalidInput` naming the setting out of range.
    pub fn check(&self) -> io::Result<()> {
        let bad = |m: String| Err(io::Error::new(io::ErrorKind::InvalidInput, m));
        if !(1..=1 << 20).contains(&self.block_rows) {
            return bad(format!(
                "block_rows = {}: must be 1 to 1048576",
                self.block_rows
            ));
        }
        if self.segment_interval_ms == Some(0) {
            return bad("segment_interval_ms = 0: must be positive".into());
        }
        if self.segment_bytes < 4096 {
            return bad(format!(
                "segment_bytes = {}: must be at least 4096",
                self.segment_bytes
            ));
        }
        if !(1..=19).contains(&self.zstd_level) {
            return bad(format!("zstd_level = {}: must be 1 to 19", self.zstd_level));
        }
        for (what, names) in [("index", &self.index), ("summary", &self.summary)] {
            if names.len() > 16 || names.iter().any(|n| n.is_empty() || n.len() > 255) {
                return bad(format!("{what}: at most 16 field names of 1 to 255 bytes"));
            }
            if names.len() > 1 && names.iter().any(|n| n == format::LIFECYCLE_KEYS) {
                return bad(format!(
                    "{what}: \"{}\" (each record type's lifecycle keys) stands alone, not \
                     with field names",
                    format::LIFECYCLE_KEYS
                ));
            }
        }
        Ok(())
    }

    /// Checks `index`, then `summary`, against the record types the
    /// archive serves: each field they name must be a field of at least
    /// one of `schemas` (a type that lacks it is keyed on the others it
    /// has). `["@lifecycle"]` and `[]` always pass.
    ///
    /// Errors: `InvalidInput` naming the setting and the first field no
    /// type has, with each type's fields.
    ///
    /// # Examples
    ///
    /// ```
    /// use dplog_core::schema::{FieldDef, FieldKind, Schema};
    /// use dplog_sinks::archive::ArchiveSinkOptions;
    ///
    /// let conn = Schema::new(500, "lbConn", 16, vec![
    ///     FieldDef::new("vip", 8, 4, FieldKind::Ipv4, 0),
    ///     FieldDef::new("vport", 12, 2, FieldKind::Port, 0),
    /// ])?;
    /// let typo = ArchiveSinkOptions {
    ///     index: vec!["vipp".into(), "vport".into()],
    ///     ..Default::default()
    /// };
    /// let e = typo.check_index(&[&conn]).unwrap_err();
    /// assert!(e.to_string().starts_with("index: "));
    /// assert!(e.to_string().contains("\"vipp\""));
    /// assert!(e.to_string().contains("lbConn (vip, vport)"));
    /// let typo = ArchiveSinkOptions {
    ///     summary: vec!["vip".into(), "vprot".into()],
    ///     ..Default::default()
    /// };
    /// let e = typo.check_index(&[&conn]).unwrap_err();
    /// assert!(e.to_string().starts_with("summary: "));
    /// assert!(e.to_string().contains("\"vprot\""));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn check_index(&self, schemas: &[&Schema]) -> io::Result<()> {
        Self::check_names("index", &self.index, schemas)?;
        Self::check_names("summary", &self.summary, schemas)
    }

    fn check_names(what: &str, names: &[String], schemas: &[&Schema]) -> io::Result<()> {
        if names.len() == 1 && names[0] == format::LIFECYCLE_KEYS {
            return Ok(());
        }
        let Some(missing) = names
            .iter()
            .find(|n| !schemas.iter().any(|s| s.field(n).is_some()))
        else {
            return Ok(());
        };
        let types: Vec<String> = schemas
            .iter()
            .map(|s| {
                let fields: Vec<&str> = s.fields().iter().map(|f| &*f.name).collect();
                format!("{} ({})", s.name(), fields.join(", "))
            })
            .collect();
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{what}: no record type the archive serves has a field \"{missing}\" \
                 (the record types and their fields: {}); name fields of them, or leave \
                 {what} out for each type's lifecycle keys",
                if types.is_empty() {
                    "none".to_string()
                } else {
                    types.join("; ")
                }
            ),
        ))
    }
}

/// The archive sink's counters (`archive.*`).
#[derive(Debug, Default)]
pub struct ArchiveCounters {
    /// Segments sealed.
    pub segments_sealed: AtomicU64,
    /// Data blocks written.
    pub blocks: AtomicU64,
    /// Records in them.
    pub rows: AtomicU64,
    /// Bytes written to segment files (blocks and footers).
    pub bytes: AtomicU64,
    /// Open segments recovered at open.
    pub segments_recovered: AtomicU64,
    /// Torn or damaged blocks cut off during recovery.
    pub torn_blocks: AtomicU64,
    /// Segments removed by retention.
    pub segments_removed: AtomicU64,
    /// Write errors (each retried).
    pub write_errors: AtomicU64,
    /// Segment summary entries written ([`summary`](super::summary)).
    pub summaries: AtomicU64,
    /// Signed heads the seal's anchor sink refused or failed to deliver
    /// (not retried; the seal itself has them).
    pub anchor_failed: AtomicU64,
}

impl dplog_core::sink::SinkCounters for ArchiveCounters {
    fn named(&self) -> Vec<(String, u64)> {
        // Relaxed: plain event counts, read after the consumer is joined
        // (exact) or while it runs (approximate); no other memory is
        // published through them.
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        vec![
            ("archive.segments_sealed".into(), g(&self.segments_sealed)),
            ("archive.blocks".into(), g(&self.blocks)),
            ("archive.rows".into(), g(&self.rows)),
            ("archive.bytes".into(), g(&self.bytes)),
            (
                "archive.segments_recovered".into(),
                g(&self.segments_recovered),
            ),
            ("archive.torn_blocks".into(), g(&self.torn_blocks)),
            ("archive.segments_removed".into(), g(&self.segments_removed)),
            ("archive.write_errors".into(), g(&self.write_errors)),
            ("archive.summaries".into(), g(&self.summaries)),
            ("archive.anchor_failed".into(), g(&self.anchor_failed)),
        ]
    }
}
