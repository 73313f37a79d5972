//! Checking a batch whole before any of it is taken: the sink takes a
//! batch whole or refuses it whole, so the records of a refused batch,
//! which the runtime counts dropped, are never in the archive.

use std::io;

use dplog_core::schema::Schema;
use dplog_core::SinkError;

use super::{format, ArchiveSink};

fn refuse(m: String) -> SinkError {
    SinkError::Permanent(io::Error::new(io::ErrorKind::InvalidData, m))
}

/// The schema id in a record's header (bytes 2..4, native order; 0 for a
/// record shorter than its header).
#[inline]
pub(super) fn record_schema_id(rec: &[u8]) -> u16 {
    if rec.len() >= 4 {
        u16::from_ne_bytes([rec[2], rec[3]])
    } else {
        0
    }
}

/// A `S` frame's schema.
///
/// Errors: permanent, `bad schema frame: <why>`.
pub(super) fn parse_schema(raw: &[u8]) -> Result<Schema, SinkError> {
    dplog_formatters::binary::parse_schema(raw)
        .map_err(|e| refuse(format!("bad schema frame: {e}")))
}

/// Refuses a record of `len` bytes whose schema `s` has another size.
#[inline]
pub(super) fn check_size(s: &Schema, len: usize) -> Result<(), SinkError> {
    if len == s.size() {
        Ok(())
    } else {
        Err(wrong_size(s, len))
    }
}

#[cold]
fn wrong_size(s: &Schema, len: usize) -> SinkError {
    refuse(format!(
        "record of {len} bytes, its schema {} has {}",
        s.name(),
        s.size()
    ))
}

/// The refusal of a batch whose byte `p` starts no frame of the binary
/// format.
#[cold]
fn not_frames(p: usize) -> SinkError {
    refuse(format!(
        "the archive sink takes the binary format's frames (set [format] type = \"binary\"); byte {p} of the batch is not one"
    ))
}

/// The refusal of a record of schema id `sid` no schema frame declared.
#[cold]
pub(super) fn undeclared(sid: u16) -> SinkError {
    refuse(format!("record of schema id {sid} before its schema frame"))
}

impl ArchiveSink {
    /// Checks all of `batch` as [`write_batch`](dplog_core::Sink::write_batch)
    /// would take it, without taking anything: whole binary frames
    /// (`[kind][0][len u16 LE][len bytes]`, kinds
    /// [`FRAME_KINDS`](super::FRAME_KINDS));
    /// schema frames that parse; each record of a schema declared before
    /// it (earlier in the stream, or in this batch: a later declaration of
    /// an id replaces the earlier) and of that schema's size; calibration
    /// frames that parse; and, at the stream's first record, `index`
    /// against the schemas declared by then
    /// ([`ArchiveSinkOptions::check_index`](super::ArchiveSinkOptions::check_index)).
    ///
    /// Errors: permanent, naming the frame's byte or what is wrong.
    pub(super) fn check_batch(&self, batch: &[u8]) -> Result<(), SinkError> {
        // The schemas this batch declares (rare: a stream's start).
        let mut declared: Vec<Schema> = Vec::new();
        let mut index_checked = self.index_checked;
        // The schema id and size of the last record checked (a batch is
        // mostly records of few types); `usize::MAX`: none yet.
        let (mut last_sid, mut last_len) = (0u16, usize::MAX);
        for f in dplog_formatters::binary::frames(batch) {
            let (kind, body) = f.map_err(|e| {
                if e.cut_short {
                    refuse(format!("binary frame at byte {} cut short", e.at))
                } else {
                    not_frames(e.at)
                }
            })?;
            match kind {
                b'R' => {
                    let sid = record_schema_id(body);
                    if sid != last_sid || body.len() != last_len {
                        self.check_record(&declared, sid, body.len(), &mut index_checked)?;
                        (last_sid, last_len) = (sid, body.len());
                    }
                }
                b'S' => {
                    let s = parse_schema(body)?;
                    declared.retain(|d| d.id() != s.id());
                    declared.push(s);
                    last_len = usize::MAX;
                }
                b'C' => {
                    format::parse_calibration(body).map_err(SinkError::Permanent)?;
                }
                // `H` and `D`: the walk took them as frames.
                _ => {}
            }
        }
        Ok(())
    }

    /// A record of schema `sid`, `len` bytes: its schema declared (by
    /// `declared`, this batch's, or earlier) with that size; at the
    /// stream's first record (`index_checked` false, then set), `index`
    /// against the schemas declared by then.
    #[cold]
    fn check_record(
        &self,
        declared: &[Schema],
        sid: u16,
        len: usize,
        index_checked: &mut bool,
    ) -> Result<(), SinkError> {
        let s = declared
            .iter()
            .chain(self.schemas.iter().map(|e| &e.schema))
            .find(|s| s.id() == sid)
            .ok_or_else(|| undeclared(sid))?;
        check_size(s, len)?;
        if !*index_checked {
            // The stream's schemas as `declare` leaves them: a redeclared
            // id's new schema last.
            let served: Vec<&Schema> = self
                .schemas
                .iter()
                .map(|e| &e.schema)
                .filter(|s| declared.iter().all(|d| d.id() != s.id()))
                .chain(declared.iter())
                .collect();
            self.opts
                .check_index(&served)
                .map_err(SinkError::Permanent)?;
            *index_checked = true;
        }
        Ok(())
    }
}
