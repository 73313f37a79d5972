//! Data block frames: [`BlockEncoder::data_frame`] for version 3's
//! blocks of one column a field, [`BlockEncoder::frame`] for any list of
//! columns (a keyed block's too); the format is in [`super::format`].

use std::io;

use dplog_core::schema::Schema;

use super::encode::{self, Column};
use super::format::{
    BlockEncoder, BLOCK_HEADER, BLOCK_MAGIC, COLUMN_ENTRY, DATA_HEADER, KIND_DATA,
};

/// Where a data block's column comes from ([`BlockEncoder::frame`]).
pub(crate) enum Part<'a> {
    /// Bytes stored as they are (a keyed block's layout).
    Raw(&'a [u8]),
    /// Column `col` of `rows` records of `stride` bytes in `src`.
    Col {
        src: &'a [u8],
        stride: usize,
        rows: usize,
        col: Column,
    },
}

impl BlockEncoder {
    /// The whole data block frame of `n` records of `s` (`recs`, back to
    /// back; `cols` its [`schema_columns`](super::format::schema_columns)),
    /// event times `min..=max`, one column a field
    /// (as `frame` writes any columns). Format version 3.
    ///
    /// Errors: the compressor's.
    pub fn data_frame(
        &mut self,
        s: &Schema,
        cols: &[Column],
        recs: &[u8],
        n: usize,
        min: u64,
        max: u64,
    ) -> io::Result<Vec<u8>> {
        let (src, stride) = (recs, s.size());
        let parts: Vec<Part> = cols
            .iter()
            .map(|&col| Part::Col {
                src,
                stride,
                rows: n,
                col,
            })
            .collect();
        self.frame(s, n, min, max, &parts, recs.len())
    }

    /// A data block frame of `n` records of `s`, event times `min..=max`,
    /// of `parts` (version 3's blocks and keyed ones): a
    /// [`block_frame`](super::format::block_frame) of [`KIND_DATA`] whose
    /// body is the [`DATA_HEADER`] bytes (schema id u16, two zero bytes,
    /// `n` u32, `min` u64, `max` u64, the number of columns u32, all
    /// little-endian), then the column directory (per part, in order,
    /// [`COLUMN_ENTRY`] bytes: its stored length u32, its encoded length
    /// u32 and the CRC-32 of its stored bytes u32), the CRC-32 of the
    /// header and directory u32, then the columns back to back (a reader
    /// that reads some columns checks those alone): each [`Part::Col`]
    /// encoded ([`encode`]) and compressed with zstd on its own, or stored
    /// as encoded when zstd does not make it shorter (stored length equal
    /// to the encoded one), a [`Part::Raw`] as it is. `hint` (the records'
    /// bytes) sizes the frame's buffer.
    ///
    /// Errors: the compressor's.
    pub(crate) fn frame(
        &mut self,
        s: &Schema,
        n: usize,
        min: u64,
        max: u64,
        parts: &[Part],
        hint: usize,
    ) -> io::Result<Vec<u8>> {
        let dir_len = parts.len() * COLUMN_ENTRY;
        let mut f = Vec::with_capacity(BLOCK_HEADER + DATA_HEADER + dir_len + hint / 4);
        f.extend_from_slice(BLOCK_MAGIC);
        f.extend_from_slice(&[KIND_DATA, 0, 0, 0]);
        f.extend_from_slice(&[0; 8]); // body length and CRC, below
        f.extend_from_slice(&s.id().to_le_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(&(n as u32).to_le_bytes());
        f.extend_from_slice(&min.to_le_bytes());
        f.extend_from_slice(&max.to_le_bytes());
        f.extend_from_slice(&(parts.len() as u32).to_le_bytes());
        let dir_at = f.len();
        let dir_end = dir_at + dir_len;
        f.resize(dir_end + 4, 0);
        for (k, p) in parts.iter().enumerate() {
            let (stored, raw_len): (&[u8], usize) = match *p {
                Part::Raw(b) => (b, b.len()),
                Part::Col {
                    src,
                    stride,
                    rows,
                    col,
                } => {
                    self.raw.clear();
                    encode::encode_column_with(
                        &mut self.cols,
                        &mut self.raw,
                        src,
                        stride,
                        rows,
                        col,
                    );
                    self.z.clear();
                    self.z
                        .reserve(zstd::zstd_safe::compress_bound(self.raw.len()));
                    self.zstd.compress_to_buffer(&self.raw, &mut self.z)?;
                    let z = self.z.len() < self.raw.len();
                    (if z { &self.z } else { &self.raw }, self.raw.len())
                }
            };
            let e = dir_at + k * COLUMN_ENTRY;
            f[e..e + 4].copy_from_slice(&(stored.len() as u32).to_le_bytes());
            f[e + 4..e + 8].copy_from_slice(&(raw_len as u32).to_le_bytes());
            f[e + 8..e + 12].copy_from_slice(&crc32fast::hash(stored).to_le_bytes());
            f.extend_from_slice(stored);
        }
        let dir_crc = crc32fast::hash(&f[BLOCK_HEADER..dir_end]);
        f[dir_end..dir_end + 4].copy_from_slice(&dir_crc.to_le_bytes());
        let body_len = (f.len() - BLOCK_HEADER) as u32;
        f[8..12].copy_from_slice(&body_len.to_le_bytes());
        let mut h = crc32fast::Hasher::new();
        h.update(&f[..12]);
        h.update(&f[BLOCK_HEADER..]);
        f[12..16].copy_from_slice(&h.finalize().to_le_bytes());
        Ok(f)
    }
}
