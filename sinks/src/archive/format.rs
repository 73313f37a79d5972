//! The archive's on-disk layout: segment names, block frames, the footer,
//! the key hash and the key index pages (see the module docs of
//! [`archive`](super) for the whole picture).

use std::io;
use std::path::Path;

use dplog_core::schema::{FieldDef, FieldKind, Schema};
use dplog_formatters::TscCalibration;

use super::encode::{self, Column, Cursor};

/// Magic at offset 0 of a segment file.
pub const SEGMENT_MAGIC: &[u8; 8] = b"DPLOGAR1";
/// Segment header length: magic, version u32, reserved u32.
pub const SEGMENT_HEADER: usize = 16;
/// Format version the writer puts in the segment header: 3. Version 2
/// added [`KIND_CALIBRATION`] blocks to version 1; version 3 compresses
/// each column of a data block on its own, behind a directory of them
/// (see [`BlockEncoder::data_frame`]), so a reader decodes only the
/// columns it needs and, with a [`RowFilter`], only the rows. Readers
/// take all three; a version-1 segment records no TSC calibration, and
/// the data blocks of versions 1 and 2 compress all columns together.
pub const VERSION: u32 = 3;
/// Format version of a segment rewritten when sealed with its rows sorted
/// by key ([`super::keyed`]): its data blocks hold the version-3 column
/// directory over a keyed layout of columns, and its footer the blocks'
/// key ranges instead of a key index. The writer writes every segment as
/// version 3 while it is open.
pub const VERSION_KEYED: u32 = 4;
/// The newest format version readers take.
pub const MAX_VERSION: u32 = VERSION_KEYED;
/// The last format version whose data blocks compress all their columns
/// together as one zstd frame.
pub const VERSION_WHOLE_BLOCKS: u32 = 2;
/// The oldest format version readers take.
pub const MIN_VERSION: u32 = 1;
/// Magic at the start of every block frame.
pub const BLOCK_MAGIC: &[u8; 4] = b"DPAB";
/// Block frame header: magic, kind u8, 3 zero bytes, body length u32,
/// CRC-32 u32 (of the first 12 header bytes and the body).
pub const BLOCK_HEADER: usize = 16;
/// Block kind: a schema (the binary format's `S` frame payload).
pub const KIND_SCHEMA: u8 = b'S';
/// Block kind: records of one schema, columnar and compressed.
pub const KIND_DATA: u8 = b'D';
/// Block kind (version 2): a TSC calibration, as the binary format's `C`
/// frame payload (`hz`, `tsc0`, `ns0`, u64 LE each, 24 bytes). The TSC
/// fields of the data blocks after it in the segment, up to the next
/// one, convert to wall time with it; a data block with none before it
/// in its segment converts with the identity (ticks are ns).
pub const KIND_CALIBRATION: u8 = b'C';
/// Body length of a [`KIND_CALIBRATION`] block.
pub const CALIBRATION_BODY: usize = 24;
/// Magic that ends a sealed segment.
pub const TRAILER_MAGIC: &[u8; 8] = b"DPLOGAE1";
/// Trailer: footer length u64, footer CRC-32 u32, reserved u32, magic.
pub const TRAILER: usize = 24;
/// Data block body header: schema id u16, 0 u16, rows u32, min time u64,
/// max time u64, then u32: the uncompressed column bytes (versions 1 and
/// 2) or the number of columns (version 3).
pub const DATA_HEADER: usize = 28;
/// Version 3: bytes per column in a data block's column directory
/// (stored length u32, encoded length u32, CRC-32 of the stored bytes
/// u32).
pub const COLUMN_ENTRY: usize = 12;

/// Version 3: bytes of a data block body before its first column: the
/// [`DATA_HEADER`], the directory of `ncols` columns and the directory's
/// CRC-32 (of the header and the directory).
pub fn column_prefix_len(ncols: usize) -> usize {
    DATA_HEADER + ncols * COLUMN_ENTRY + 4
}
/// Largest block body the reader accepts (a bad length field must not
/// make it allocate without bound).
pub const MAX_BLOCK_BODY: usize = 256 << 20;

/// Name of sealed segment `seq` holding event times `min..=max` (ns):
/// `seg-<seq, 10 digits>-<min, 20 digits>-<max, 20 digits>.dpa`, so a
/// directory listing alone tells which segments a time range touches.
pub fn sealed_name(seq: u64, min: u64, max: u64) -> String {
    format!("seg-{seq:010}-{min:020}-{max:020}.dpa")
}

/// Name of open segment `seq` (being written; renamed when sealed).
pub fn open_name(seq: u64) -> String {
    format!(".seg-{seq:010}.dpa.open")
}

/// What a segment file name says: `(seq, Some((min, max)))` for a sealed
/// segment, `(seq, None)` for an open one; `None` for other names.
pub fn parse_name(name: &str) -> Option<(u64, Option<(u64, u64)>)> {
    if let Some(rest) = name
        .strip_prefix(".seg-")
        .and_then(|r| r.strip_suffix(".dpa.open"))
    {
        if rest.len() != 10 || !rest.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        return Some((rest.parse().ok()?, None));
    }
    let rest = name.strip_prefix("seg-")?.strip_suffix(".dpa")?;
    let mut it = rest.split('-');
    let (a, b, c) = (it.next()?, it.next()?, it.next()?);
    if it.next().is_some() || a.len() != 10 || b.len() != 20 || c.len() != 20 {
        return None;
    }
    Some((a.parse().ok()?, Some((b.parse().ok()?, c.parse().ok()?))))
}

/// The segment header bytes (format [`VERSION`]).
pub fn segment_header() -> [u8; SEGMENT_HEADER] {
    segment_header_of(VERSION)
}

/// The segment header bytes of format `version`.
pub fn segment_header_of(version: u32) -> [u8; SEGMENT_HEADER] {
    let mut h = [0u8; SEGMENT_HEADER];
    h[..8].copy_from_slice(SEGMENT_MAGIC);
    h[8..12].copy_from_slice(&version.to_le_bytes());
    h
}

/// Checks a segment header; returns its format version
/// ([`MIN_VERSION`] to [`MAX_VERSION`]).
///
/// Errors: `InvalidData` naming what is wrong.
pub fn check_header(h: &[u8]) -> io::Result<u32> {
    if h.len() < SEGMENT_HEADER || &h[..8] != SEGMENT_MAGIC {
        return Err(invalid("not a dplog archive segment (bad magic)".into()));
    }
    let v = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes"));
    if !(MIN_VERSION..=MAX_VERSION).contains(&v) {
        return Err(invalid(format!(
            "segment format version {v}, this reader knows {MIN_VERSION} to {MAX_VERSION}"
        )));
    }
    Ok(v)
}

/// Whether records of `s` have a TSC-typed field (whose printing needs
/// the calibration of their block).
pub fn has_tsc(s: &Schema) -> bool {
    s.fields().iter().any(|f| f.kind == FieldKind::TscTimestamp)
}

/// Body of a [`KIND_CALIBRATION`] block holding `c`.
pub fn calibration_body(c: &TscCalibration) -> [u8; CALIBRATION_BODY] {
    dplog_formatters::binary::calibration_bytes(c)
}

/// Parses a [`KIND_CALIBRATION`] block body.
///
/// Errors: `InvalidData` for a body of another length or a rate of 0 Hz.
pub fn parse_calibration(body: &[u8]) -> io::Result<TscCalibration> {
    dplog_formatters::binary::parse_calibration(body)
        .map_err(|e| invalid(format!("bad calibration block: {e}")))
}

pub(crate) fn invalid(m: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, m)
}

/// A whole block frame of `kind` around `body`.
pub fn block_frame(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(BLOCK_HEADER + body.len());
    f.extend_from_slice(BLOCK_MAGIC);
    f.extend_from_slice(&[kind, 0, 0, 0]);
    f.extend_from_slice(&(body.len() as u32).to_le_bytes());
    let mut h = crc32fast::Hasher::new();
    h.update(&f[..12]);
    h.update(body);
    f.extend_from_slice(&h.finalize().to_le_bytes());
    f.extend_from_slice(body);
    f
}

/// A block frame header read back: kind and body length, with the CRC to
/// check the body against.
#[derive(Clone, Copy, Debug)]
pub struct FrameHeader {
    /// [`KIND_SCHEMA`], [`KIND_DATA`] or [`KIND_CALIBRATION`].
    pub kind: u8,
    /// Body bytes after the header.
    pub body_len: usize,
    crc: u32,
    head: [u8; 12],
}

/// Parses a block frame header.
///
/// Errors: `InvalidData` for a bad magic, kind or length.
pub fn frame_header(h: &[u8]) -> io::Result<FrameHeader> {
    if h.len() < BLOCK_HEADER || &h[..4] != BLOCK_MAGIC {
        return Err(invalid("no block magic".into()));
    }
    let kind = h[4];
    if ![KIND_SCHEMA, KIND_DATA, KIND_CALIBRATION].contains(&kind) || h[5..8] != [0, 0, 0] {
        return Err(invalid(format!("unknown block kind 0x{kind:02x}")));
    }
    let body_len = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes")) as usize;
    if body_len > MAX_BLOCK_BODY {
        return Err(invalid(format!("block length {body_len} too large")));
    }
    Ok(FrameHeader {
        kind,
        body_len,
        crc: u32::from_le_bytes(h[12..16].try_into().expect("4 bytes")),
        head: h[..12].try_into().expect("12 bytes"),
    })
}

impl FrameHeader {
    /// Checks `body` against the header's CRC-32.
    ///
    /// Errors: `InvalidData` "checksum mismatch".
    pub fn check(&self, body: &[u8]) -> io::Result<()> {
        let mut h = crc32fast::Hasher::new();
        h.update(&self.head);
        h.update(body);
        let got = h.finalize();
        if got != self.crc {
            return Err(invalid(format!(
                "checksum mismatch (stored {:08x}, computed {got:08x})",
                self.crc
            )));
        }
        Ok(())
    }
}

/// The columns of records of `s`.
pub fn schema_columns(s: &Schema) -> Vec<Column> {
    let f: Vec<(usize, usize)> = s
        .fields()
        .iter()
        .map(|f| (f.offset as usize, f.size as usize))
        .collect();
    encode::columns(s.size(), &f)
}

/// The event time of `rec` (a record of `s`): its event-time field (ns
/// for an `NsTimestamp`, raw ticks for a `TscTimestamp`), or `None` if
/// the schema has none.
pub fn event_time(s: &Schema, rec: &[u8]) -> Option<u64> {
    s.meta().event_time.map(|i| s.fields()[i].read_uint(rec))
}

/// Body of a data block as [`BlockEncoder::data_frame`] frames it, from
/// fresh buffers and a fresh zstd context per column: the reference the
/// encoder, which keeps both from block to block, is tested against.
#[cfg(test)]
fn data_body(
    s: &Schema,
    cols: &[Column],
    recs: &[u8],
    n: usize,
    min: u64,
    max: u64,
    level: i32,
) -> io::Result<Vec<u8>> {
    let mut dir = Vec::new();
    let mut data = Vec::new();
    for &c in cols {
        let mut raw = Vec::new();
        encode::encode_column(&mut raw, recs, s.size(), n, c);
        let z = zstd::bulk::compress(&raw, level)?;
        let stored = if z.len() < raw.len() { z } else { raw.clone() };
        dir.extend_from_slice(&(stored.len() as u32).to_le_bytes());
        dir.extend_from_slice(&(raw.len() as u32).to_le_bytes());
        dir.extend_from_slice(&crc32fast::hash(&stored).to_le_bytes());
        data.extend_from_slice(&stored);
    }
    let mut body = Vec::with_capacity(DATA_HEADER + dir.len() + data.len());
    body.extend_from_slice(&s.id().to_le_bytes());
    body.extend_from_slice(&[0, 0]);
    body.extend_from_slice(&(n as u32).to_le_bytes());
    body.extend_from_slice(&min.to_le_bytes());
    body.extend_from_slice(&max.to_le_bytes());
    body.extend_from_slice(&(cols.len() as u32).to_le_bytes());
    body.extend_from_slice(&dir);
    let crc = crc32fast::hash(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body.extend_from_slice(&data);
    Ok(body)
}

/// The body of a data block as format versions 1 and 2 wrote it: the
/// [`DATA_HEADER`] (its last u32 the encoded length of all columns),
/// then every column ([`encode`]) compressed together as one zstd frame
/// at `level`. Readers still take it (in a segment of version 1 or 2);
/// the writer no longer makes it. For tests and tools that must build an
/// archive of those versions.
///
/// Errors: the compressor's.
pub fn whole_block_body(
    s: &Schema,
    cols: &[Column],
    recs: &[u8],
    n: usize,
    min: u64,
    max: u64,
    level: i32,
) -> io::Result<Vec<u8>> {
    let mut raw = Vec::with_capacity(recs.len() / 2 + 64);
    let mut scratch = encode::ColumnScratch::default();
    for &c in cols {
        encode::encode_column_with(&mut scratch, &mut raw, recs, s.size(), n, c);
    }
    let z = zstd::bulk::compress(&raw, level)?;
    let mut body = Vec::with_capacity(DATA_HEADER + z.len());
    body.extend_from_slice(&s.id().to_le_bytes());
    body.extend_from_slice(&[0, 0]);
    body.extend_from_slice(&(n as u32).to_le_bytes());
    body.extend_from_slice(&min.to_le_bytes());
    body.extend_from_slice(&max.to_le_bytes());
    body.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    body.extend_from_slice(&z);
    Ok(body)
}

/// Writes data block frames (the archive's one encoder of them), keeping
/// its buffers and its zstd context from block to block (a block then
/// allocates only its frame).
pub struct BlockEncoder {
    pub(super) cols: encode::ColumnScratch,
    pub(super) raw: Vec<u8>,
    pub(super) z: Vec<u8>,
    pub(super) zstd: zstd::bulk::Compressor<'static>,
}

impl std::fmt::Debug for BlockEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockEncoder").finish_non_exhaustive()
    }
}

impl BlockEncoder {
    /// An encoder compressing at zstd `level`.
    ///
    /// Errors: zstd's, for a context it cannot create or a level it
    /// refuses.
    pub fn new(level: i32) -> io::Result<BlockEncoder> {
        Ok(BlockEncoder {
            cols: encode::ColumnScratch::default(),
            raw: Vec::new(),
            z: Vec::new(),
            zstd: zstd::bulk::Compressor::new(level)?,
        })
    }
}

/// What a data block body's header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataHeader {
    /// Schema id of its records.
    pub schema_id: u16,
    /// Records in it.
    pub rows: u32,
    /// Smallest event time.
    pub min: u64,
    /// Largest event time.
    pub max: u64,
}

/// Parses a data block body's header.
///
/// Errors: `InvalidData` for a short body.
pub fn data_header(body: &[u8]) -> io::Result<DataHeader> {
    if body.len() < DATA_HEADER {
        return Err(invalid("data block shorter than its header".into()));
    }
    let u64at = |o: usize| u64::from_le_bytes(body[o..o + 8].try_into().expect("8 bytes"));
    Ok(DataHeader {
        schema_id: u16::from_le_bytes([body[0], body[1]]),
        rows: u32::from_le_bytes(body[4..8].try_into().expect("4 bytes")),
        min: u64at(8),
        max: u64at(16),
    })
}

/// Rows of a data block to decode: those whose bytes at each `offset`
/// equal the `value` given (`(offset, value)` pairs, all must hold; a
/// pair that is not exactly one column of the schema, i.e. one field, is
/// not checked, so the rows kept are a superset of those it names: check
/// them with [`RowFilter::matches`] or the caller's own test). Empty:
/// every row.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RowFilter {
    /// `(offset in the record, bytes)`: the field at `offset`, of
    /// `bytes.len()` bytes, holds `bytes`.
    pub eq: Vec<(usize, Vec<u8>)>,
}

impl RowFilter {
    /// Whether record `rec` passes every pair.
    pub fn matches(&self, rec: &[u8]) -> bool {
        self.eq
            .iter()
            .all(|(o, v)| rec.get(*o..*o + v.len()) == Some(v.as_slice()))
    }
}

/// [`data_header`] of a block of records of `s`, checked: its schema id
/// is `s`'s and its rows' bytes are at most [`MAX_BLOCK_BODY`].
///
/// Errors: `InvalidData` otherwise.
pub(crate) fn checked_data_header(s: &Schema, body: &[u8]) -> io::Result<DataHeader> {
    let h = data_header(body)?;
    if h.schema_id != s.id() {
        return Err(invalid(format!(
            "block of schema {} decoded as {}",
            h.schema_id,
            s.id()
        )));
    }
    if (h.rows as usize)
        .checked_mul(s.size())
        .map_or(true, |b| b > MAX_BLOCK_BODY)
    {
        return Err(invalid("block too large".into()));
    }
    Ok(h)
}

thread_local! {
    /// This thread's zstd decompression context, made on first use: a
    /// lookup decompresses a column at a time, and a context made per
    /// call (`zstd::bulk::decompress`) allocated and initialised ~100 KiB
    /// each time, about a tenth of a warm lookup's CPU.
    static DCTX: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// `src` zstd-decompressed into at most `capacity` bytes, with this
/// thread's context.
///
/// Errors: zstd's (bytes it refuses, a result above `capacity`).
fn decompress(src: &[u8], capacity: usize) -> io::Result<Vec<u8>> {
    DCTX.with(|d| {
        let mut d = d.borrow_mut();
        let d = match &mut *d {
            Some(d) => d,
            none => none.insert(zstd::bulk::Decompressor::new()?),
        };
        d.decompress(src, capacity)
    })
}

/// Column `k`'s encoded bytes from its stored ones `src` (span `sp`): as
/// stored, or zstd-decompressed to `sp.raw` bytes.
///
/// Errors: `InvalidData` for bytes zstd refuses or a length that differs.
pub(crate) fn unstored<'a>(
    k: usize,
    sp: ColumnSpan,
    src: std::borrow::Cow<'a, [u8]>,
) -> io::Result<std::borrow::Cow<'a, [u8]>> {
    if sp.stored == sp.raw {
        return Ok(src);
    }
    let v = decompress(&src, sp.raw).map_err(|e| invalid(format!("column {k}: zstd: {e}")))?;
    if v.len() != sp.raw {
        return Err(invalid(format!("column {k}: decompressed length differs")));
    }
    Ok(std::borrow::Cow::Owned(v))
}

/// Decodes column `k`, all of its encoded bytes `raw`, into column `col`
/// of `rows` rows of `stride` bytes in `out`.
///
/// Errors: `InvalidData` for a column that does not decode or leaves
/// bytes over.
pub(crate) fn decode_whole_column(
    k: usize,
    raw: &[u8],
    out: &mut [u8],
    stride: usize,
    rows: usize,
    col: Column,
) -> io::Result<()> {
    let mut cur = Cursor { b: raw, p: 0 };
    encode::decode_column(&mut cur, out, stride, rows, col)
        .map_err(|e| invalid(format!("column {k}: {e}")))?;
    if cur.p != raw.len() {
        return Err(invalid(format!("column {k}: trailing bytes")));
    }
    Ok(())
}

/// Decodes a data block body of records of `s`, of a segment of format
/// `version`, into their bytes (`rows * size`, back to back).
///
/// Errors: `InvalidData` for a body that does not decode (schema id or
/// size mismatch, bad compression, bad columns, trailing bytes).
pub fn decode_data(s: &Schema, body: &[u8], version: u32) -> io::Result<(DataHeader, Vec<u8>)> {
    decode_rows(s, body, version, &RowFilter::default())
}

/// [`decode_data`] of only the rows `filter` keeps, in block order. A
/// version-3 block decodes the filter's columns first and, when no row
/// passes, nothing else; versions 1 and 2 decode the whole block and
/// drop the other rows.
///
/// Errors: as [`decode_data`] (a version-3 block whose other columns are
/// not read is only checked as far as it is read: its CRC still covers
/// all of it).
pub fn decode_rows(
    s: &Schema,
    body: &[u8],
    version: u32,
    filter: &RowFilter,
) -> io::Result<(DataHeader, Vec<u8>)> {
    let h = checked_data_header(s, body)?;
    let (n, size) = (h.rows as usize, s.size());
    let last = u32::from_le_bytes(body[24..28].try_into().expect("4 bytes")) as usize;
    let cols = schema_columns(s);
    // The filter's pairs that are whole columns, by column index.
    let exact: Vec<(usize, &[u8])> = filter
        .eq
        .iter()
        .filter_map(|(off, v)| {
            cols.iter()
                .position(|c| c.offset == *off && c.width == v.len())
                .map(|k| (k, v.as_slice()))
        })
        .collect();
    if version <= VERSION_WHOLE_BLOCKS {
        if last > MAX_BLOCK_BODY {
            return Err(invalid("block too large".into()));
        }
        let raw =
            decompress(&body[DATA_HEADER..], last).map_err(|e| invalid(format!("zstd: {e}")))?;
        if raw.len() != last {
            return Err(invalid("decompressed length differs".into()));
        }
        let mut recs = vec![0u8; n * size];
        let mut cur = Cursor { b: &raw, p: 0 };
        for &c in &cols {
            encode::decode_column(&mut cur, &mut recs, size, n, c)?;
        }
        if cur.p != raw.len() {
            return Err(invalid("trailing bytes after the columns".into()));
        }
        if !exact.is_empty() {
            let mut w = 0;
            for r in 0..n {
                let rec = &recs[r * size..(r + 1) * size];
                if exact
                    .iter()
                    .all(|&(k, v)| &rec[cols[k].offset..cols[k].offset + v.len()] == v)
                {
                    recs.copy_within(r * size..(r + 1) * size, w * size);
                    w += 1;
                }
            }
            recs.truncate(w * size);
        }
        return Ok((h, recs));
    }
    if last != cols.len() {
        return Err(invalid(format!(
            "block of {last} columns, its schema has {}",
            cols.len()
        )));
    }
    let spans = column_spans(body, cols.len(), body.len())?;
    // The frame's CRC covered the whole body: the columns are not
    // checked again.
    let recs = decode_columns(s, n, &spans, filter, &mut |_| {}, &mut |k| {
        Ok(std::borrow::Cow::Borrowed(
            &body[spans[k].at..spans[k].at + spans[k].stored],
        ))
    })?;
    Ok((h, recs))
}

/// Where one column of a version-3 data block is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnSpan {
    /// Offset of its stored bytes in the block body.
    pub at: usize,
    /// Stored length (equal to `raw`: stored as encoded; else zstd).
    pub stored: usize,
    /// Encoded length.
    pub raw: usize,
    /// CRC-32 of the stored bytes.
    pub crc: u32,
}

/// The columns of a version-3 data block body of `body_len` bytes from
/// its first bytes `prefix` (at least [`column_prefix_len`]`(ncols)`):
/// the directory, checked against its CRC-32.
///
/// Errors: `InvalidData` for a short prefix, a directory that fails its
/// checksum, or lengths that do not fill the body exactly.
pub fn column_spans(prefix: &[u8], ncols: usize, body_len: usize) -> io::Result<Vec<ColumnSpan>> {
    let end = column_prefix_len(ncols);
    if prefix.len() < end || body_len < end {
        return Err(invalid("column directory cut short".into()));
    }
    let u32at = |o: usize| u32::from_le_bytes(prefix[o..o + 4].try_into().expect("4 bytes"));
    if crc32fast::hash(&prefix[..end - 4]) != u32at(end - 4) {
        return Err(invalid("column directory checksum mismatch".into()));
    }
    let mut spans = Vec::with_capacity(ncols);
    let mut at = end;
    for k in 0..ncols {
        let e = DATA_HEADER + k * COLUMN_ENTRY;
        let (stored, raw) = (u32at(e) as usize, u32at(e + 4) as usize);
        if stored > body_len - at || raw > MAX_BLOCK_BODY || stored > raw {
            return Err(invalid(format!("column {k}: lengths out of range")));
        }
        spans.push(ColumnSpan {
            at,
            stored,
            raw,
            crc: u32at(e + 8),
        });
        at += stored;
    }
    if at != body_len {
        return Err(invalid("trailing bytes after the columns".into()));
    }
    Ok(spans)
}

/// The rows `filter` keeps of a version-3 data block of `n` records of
/// `s` whose columns are at `spans`, each column's stored bytes got from
/// `fetch(k)` (checked by it as it needs), and only those it needs: the
/// filter's columns first (see [`RowFilter`]), the others only when a row
/// passes. Each column is fetched once. Before it fetches columns,
/// `advise(ks)` names those it is about to fetch (the filter's, then the
/// others), so that a reader from disk can ask for them together.
///
/// Errors: `InvalidData` for a column that does not decode; `fetch`'s.
pub fn decode_columns<'a>(
    s: &Schema,
    n: usize,
    spans: &[ColumnSpan],
    filter: &RowFilter,
    advise: &mut dyn FnMut(&[usize]),
    fetch: &mut dyn FnMut(usize) -> io::Result<std::borrow::Cow<'a, [u8]>>,
) -> io::Result<Vec<u8>> {
    let size = s.size();
    let cols = schema_columns(s);
    if spans.len() != cols.len() {
        return Err(invalid("column directory of another schema".into()));
    }
    let exact: Vec<(usize, &[u8])> = filter
        .eq
        .iter()
        .filter_map(|(off, v)| {
            cols.iter()
                .position(|c| c.offset == *off && c.width == v.len())
                .map(|k| (k, v.as_slice()))
        })
        .collect();
    // Column `k`'s encoded bytes.
    let mut raw_of = |k: usize| -> io::Result<std::borrow::Cow<'a, [u8]>> {
        let src = fetch(k)?;
        let sp = spans[k];
        if src.len() != sp.stored {
            return Err(invalid(format!("column {k}: {} bytes read", src.len())));
        }
        unstored(k, sp, src)
    };
    // Column `k` (encoded `raw`) decoded into `out` (`stride`-byte rows,
    // the column at `offset` of each).
    let decode = |k: usize, raw: &[u8], out: &mut [u8], stride: usize, offset: usize| {
        let c = Column {
            offset,
            width: cols[k].width,
        };
        decode_whole_column(k, raw, out, stride, n, c)
    };
    // The filter's columns first: the rows they keep, each column read
    // only as far as its encoding needs to tell (see
    // [`encode::rows_equal`]).
    // The first column is scanned; the others are read at the rows it
    // kept only.
    let mut rows: Option<Vec<u32>> = None;
    // The filter's columns as fetched: the records take them too.
    let mut got: Vec<Option<std::borrow::Cow<'a, [u8]>>> = vec![None; cols.len()];
    let ks: Vec<usize> = exact.iter().map(|&(k, _)| k).collect();
    advise(&ks);
    for &(k, v) in &exact {
        let raw = got[k].insert(raw_of(k)?);
        let mut cur = Cursor { b: raw, p: 0 };
        let hit = match &rows {
            None => encode::rows_equal(&mut cur, n, cols[k], v),
            Some(r) => encode::rows_equal_among(&mut cur, n, cols[k], v, r),
        }
        .map_err(|e| invalid(format!("column {k}: {e}")))?;
        rows = Some(hit);
        if rows.as_ref().is_some_and(|r| r.is_empty()) {
            return Ok(Vec::new());
        }
    }
    let rest: Vec<usize> = (0..cols.len()).filter(|&k| got[k].is_none()).collect();
    advise(&rest);
    let Some(rows) = rows else {
        // Every row: each column straight into the records.
        let mut recs = vec![0u8; n * size];
        for (k, c) in cols.iter().enumerate() {
            let raw = raw_of(k)?;
            decode(k, &raw, &mut recs, size, c.offset)?;
        }
        return Ok(recs);
    };
    let mut recs = vec![0u8; rows.len() * size];
    let mut d = Vec::new();
    for (k, c) in cols.iter().enumerate() {
        let (o, w) = (c.offset, c.width);
        d.clear();
        d.resize(n * w, 0);
        let raw = match got[k].take() {
            Some(raw) => raw,
            None => raw_of(k)?,
        };
        decode(k, &raw, &mut d, w, 0)?;
        for (i, &r) in rows.iter().enumerate() {
            let r = r as usize;
            recs[i * size + o..i * size + o + w].copy_from_slice(&d[r * w..(r + 1) * w]);
        }
    }
    Ok(recs)
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// 64-bit hash of an index key (FNV-1a over the bytes, then the
/// SplitMix64 finalizer); part of the format: a reader must compute the
/// same value.
pub fn key_hash(bytes: &[u8]) -> u64 {
    mix(fnv(FNV_OFFSET, bytes))
}

/// [`key_hash32`] of [`key_of`]`(fields, rec)`, without building the key.
pub fn record_key_hash32(fields: &[&FieldDef], rec: &[u8]) -> u32 {
    let h = fields.iter().fold(FNV_OFFSET, |h, f| fnv(h, f.bytes(rec)));
    (mix(h) >> 32) as u32
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The index key of `rec`: the bytes of `fields` (the schema's indexed
/// fields, in index order) concatenated.
pub fn key_of(fields: &[&FieldDef], rec: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(16);
    for f in fields {
        k.extend_from_slice(f.bytes(rec));
    }
    k
}

/// The 32-bit index hash of a key: the high half of [`key_hash`].
pub fn key_hash32(bytes: &[u8]) -> u32 {
    (key_hash(bytes) >> 32) as u32
}

/// Bits of the key hashes an index of `distinct` (hash, block) pairs
/// keeps: 8 more than it takes to number them (a key no row has then
/// names a block in about 1 lookup of 256), 16 to 32.
pub fn index_bits_for(distinct: usize) -> u8 {
    let need = usize::BITS - distinct.max(1).leading_zeros();
    (need + 8).clamp(16, 32) as u8
}

/// Index pairs per page.
pub const PAGE_PAIRS: usize = 4096;

/// One page of a sealed segment's key index, as the footer lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexPage {
    /// Smallest key hash in the page.
    pub first: u32,
    /// Byte offset of the page in the file.
    pub offset: u64,
    /// Page length, bytes.
    pub len: u32,
    /// CRC-32 of the page.
    pub crc: u32,
}

/// Appends bits least significant first.
struct BitWriter {
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl BitWriter {
    fn put(&mut self, v: u64, bits: u32) {
        debug_assert!(bits <= 32);
        self.acc |= (v & ((1u64 << bits) - 1)) << self.n;
        self.n += bits;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }
    fn finish(mut self) -> Vec<u8> {
        if self.n > 0 {
            self.out.push(self.acc as u8);
        }
        self.out
    }
}

/// Reads what [`BitWriter`] wrote.
struct BitReader<'a> {
    b: &'a [u8],
    bit: usize,
}

impl BitReader<'_> {
    /// The next 56 bits (zeros past the end) at the read position.
    fn window(&self) -> u64 {
        let byte = self.bit / 8;
        let w = match self.b.get(byte..byte + 8) {
            Some(s) => u64::from_le_bytes(s.try_into().expect("8 bytes")),
            None => {
                let mut w = [0u8; 8];
                let m = self.b.len().saturating_sub(byte).min(8);
                w[..m].copy_from_slice(&self.b[byte..byte + m]);
                u64::from_le_bytes(w)
            }
        };
        w >> (self.bit % 8)
    }
    fn get(&mut self, bits: u32) -> io::Result<u64> {
        if bits == 0 {
            return Ok(0);
        }
        if self.bit + bits as usize > self.b.len() * 8 {
            return Err(invalid("index page ends early".into()));
        }
        let v = self.window() & ((1u64 << bits) - 1);
        self.bit += bits as usize;
        Ok(v)
    }
    /// A unary number: ones ended by a zero.
    fn unary(&mut self) -> io::Result<u64> {
        let mut q = 0u64;
        loop {
            if self.bit >= self.b.len() * 8 {
                return Err(invalid("index page ends early".into()));
            }
            let ones = (!self.window()).trailing_zeros().min(56) as usize;
            let avail = (self.b.len() * 8 - self.bit).min(56);
            if ones < avail {
                self.bit += ones + 1;
                return Ok(q + ones as u64);
            }
            q += avail as u64;
            self.bit += avail;
        }
    }
}

/// The key index pages of `pairs` (`(key hash32, block index)`, any
/// order, duplicates allowed) from one array: sorted, deduplicated, cut
/// into pages of [`PAGE_PAIRS`] ([`index_page`]), each with its first
/// hash. The reference the writer's bucketed index builder is tested
/// against.
#[cfg(test)]
pub(crate) fn index_pages(pairs: &mut Vec<(u32, u32)>) -> Vec<(u32, Vec<u8>)> {
    pairs.sort_unstable();
    pairs.dedup();
    pairs
        .chunks(PAGE_PAIRS)
        .map(|c| (c[0].0, index_page(c)))
        .collect()
}

/// One key index page of `c`: 1 to [`PAGE_PAIRS`] `(key hash32, block
/// index)` pairs, sorted, without duplicates (a segment's pages cover its
/// pairs in order). A page: pair count u32, first hash u32, smallest
/// block u32, Rice parameter `k` u8, block bits u8 (all LE), then a bit
/// stream (least significant bit first): per pair after the first, the
/// hash's difference from the previous one Rice-coded (quotient `d >> k`
/// in unary, ones ended by a zero, then the `k` low bits); per pair, the
/// block index minus the smallest in `block bits` bits.
pub fn index_page(c: &[(u32, u32)]) -> Vec<u8> {
    debug_assert!(!c.is_empty() && c.len() <= PAGE_PAIRS);
    debug_assert!(c.windows(2).all(|w| w[0] < w[1]));
    let n = c.len();
    let span = u64::from(c[n - 1].0 - c[0].0);
    let mean = span / (n as u64).max(1);
    let k = if mean == 0 {
        0
    } else {
        63 - mean.leading_zeros()
    };
    let base = c.iter().map(|p| p.1).min().unwrap_or(0);
    let top = c.iter().map(|p| p.1 - base).max().unwrap_or(0);
    let bbits = 32 - top.leading_zeros();
    let mut b = Vec::with_capacity(14 + n * 3);
    b.extend_from_slice(&(n as u32).to_le_bytes());
    b.extend_from_slice(&c[0].0.to_le_bytes());
    b.extend_from_slice(&base.to_le_bytes());
    b.push(k as u8);
    b.push(bbits as u8);
    let mut w = BitWriter {
        out: b,
        acc: 0,
        n: 0,
    };
    let mut prev = c[0].0;
    for (i, &(h, blk)) in c.iter().enumerate() {
        if i > 0 {
            let d = u64::from(h - prev);
            // The quotient in unary: ones, then a zero.
            let mut q = d >> k;
            while q >= 32 {
                w.put(u64::from(u32::MAX), 32);
                q -= 32;
            }
            w.put((1u64 << q) - 1, q as u32 + 1);
            w.put(d, k);
            prev = h;
        }
        w.put(u64::from(blk - base), bbits);
    }
    w.finish()
}

/// Parses an index page.
///
/// Errors: `InvalidData` for a page that does not parse.
pub fn parse_index_page(b: &[u8]) -> io::Result<Vec<(u32, u32)>> {
    parse_index_page_upto(b, u32::MAX, true)
}

/// The blocks index page `b` pairs with hash `h` (in page order): the
/// page parsed up to its first hash above `h` (its pairs are sorted).
///
/// Errors: `InvalidData` for a page that does not parse as far as it is
/// read.
pub fn index_page_blocks(b: &[u8], h: u32) -> io::Result<Vec<u32>> {
    Ok(parse_index_page_upto(b, h, false)?
        .into_iter()
        .filter(|&(k, _)| k == h)
        .map(|(_, blk)| blk)
        .collect())
}

/// The pairs of page `b` up to the last whose hash is at most `upto`;
/// `whole`: the page must end after its last pair.
fn parse_index_page_upto(b: &[u8], upto: u32, whole: bool) -> io::Result<Vec<(u32, u32)>> {
    let mut c = Cursor { b, p: 0 };
    let n = c.u32()? as usize;
    if n == 0 || n > PAGE_PAIRS {
        return Err(invalid(format!("index page of {n} pairs")));
    }
    let mut h = u64::from(c.u32()?);
    let base = u64::from(c.u32()?);
    let (k, bbits) = (u32::from(c.u8()?), u32::from(c.u8()?));
    if k > 32 || bbits > 32 {
        return Err(invalid("index page parameters out of range".into()));
    }
    let mut r = BitReader {
        b: &b[c.p..],
        bit: 0,
    };
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        if i > 0 {
            let q = r.unary()?;
            if q > u64::from(u32::MAX) {
                return Err(invalid("index value out of range".into()));
            }
            h += (q << k) | r.get(k)?;
            if h > u64::from(upto) {
                return Ok(out);
            }
        }
        let blk = base + r.get(bbits)?;
        if h > u64::from(u32::MAX) || blk > u64::from(u32::MAX) {
            return Err(invalid("index value out of range".into()));
        }
        out.push((h as u32, blk as u32));
    }
    if whole && r.bit.div_ceil(8) != r.b.len() {
        return Err(invalid("trailing bytes in an index page".into()));
    }
    Ok(out)
}

/// One block as the footer lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockMeta {
    /// Byte offset of its frame in the segment file.
    pub offset: u64,
    /// Frame length (header and body), bytes.
    pub len: u32,
    /// [`KIND_SCHEMA`], [`KIND_DATA`] or [`KIND_CALIBRATION`].
    pub kind: u8,
    /// Schema id (of the schema a schema block declares, or of the
    /// records of a data block; 0 for a calibration block).
    pub schema_id: u16,
    /// Records (0 for a schema or calibration block).
    pub rows: u32,
    /// Smallest event time of its records.
    pub min: u64,
    /// Largest event time of its records.
    pub max: u64,
}

/// The key range of one keyed data block, from the footer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRange {
    /// The block's index in the footer's block list.
    pub block: u32,
    /// The smallest key of its rows ([`super::keyed::KeyLayout::key_bytes`]).
    pub min: Vec<u8>,
    /// The largest key of its rows.
    pub max: Vec<u8>,
}

/// Appends the footer's key ranges (nothing when there are none).
fn put_ranges(b: &mut Vec<u8>, ranges: &[KeyRange]) {
    if ranges.is_empty() {
        return;
    }
    b.extend_from_slice(&(ranges.len() as u32).to_le_bytes());
    for r in ranges {
        b.extend_from_slice(&r.block.to_le_bytes());
        for k in [&r.min, &r.max] {
            b.extend_from_slice(&(k.len() as u16).to_le_bytes());
            b.extend_from_slice(k);
        }
    }
}

/// Reads the footer's key ranges, if any are left in `c`.
fn get_ranges(c: &mut Cursor<'_>) -> io::Result<Vec<KeyRange>> {
    if c.p == c.b.len() {
        return Ok(Vec::new());
    }
    let n = c.u32()? as usize;
    let mut out = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        let block = c.u32()?;
        let mut key = || -> io::Result<Vec<u8>> {
            let l = c.take(2)?;
            let l = u16::from_le_bytes([l[0], l[1]]) as usize;
            Ok(c.take(l)?.to_vec())
        };
        let (min, max) = (key()?, key()?);
        out.push(KeyRange { block, min, max });
    }
    Ok(out)
}

/// A sealed segment's footer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Footer {
    /// Segment sequence number.
    pub seq: u64,
    /// Smallest event time of its records (ns).
    pub min: u64,
    /// Largest event time of its records (ns).
    pub max: u64,
    /// Records in it.
    pub rows: u64,
    /// The writer's `max_lifetime_ms` (the queries' default lookback).
    pub max_lifetime_ms: u64,
    /// The index key fields, by name, in key order (each schema's key is
    /// the subset of them it has), or `[`[`LIFECYCLE_KEYS`]`]`: each
    /// schema's lifecycle keys; see [`index_fields`].
    pub index_fields: Vec<String>,
    /// Every block, in file order.
    pub blocks: Vec<BlockMeta>,
    /// The key index pages, by first hash (they follow the last block).
    pub index: Vec<IndexPage>,
    /// Bits of the key hashes the index keeps: the high `index_bits` of
    /// [`key_hash32`] (16 to 32).
    pub index_bits: u8,
    /// Version 4: the key range of each keyed data block
    /// ([`KeyRange`]); empty in older versions (and then
    /// not written: their footers end after the index directory).
    pub key_ranges: Vec<KeyRange>,
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    let s = &s.as_bytes()[..s.len().min(255)];
    b.push(s.len() as u8);
    b.extend_from_slice(s);
}

impl Footer {
    /// The footer and trailer bytes that end a sealed segment.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::new();
        for v in [
            self.seq,
            self.min,
            self.max,
            self.rows,
            self.max_lifetime_ms,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.push(self.index_fields.len() as u8);
        for f in &self.index_fields {
            put_str(&mut b, f);
        }
        b.extend_from_slice(&(self.blocks.len() as u32).to_le_bytes());
        for m in &self.blocks {
            b.extend_from_slice(&m.offset.to_le_bytes());
            b.extend_from_slice(&m.len.to_le_bytes());
            b.push(m.kind);
            b.extend_from_slice(&m.schema_id.to_le_bytes());
            b.extend_from_slice(&m.rows.to_le_bytes());
            b.extend_from_slice(&m.min.to_le_bytes());
            b.extend_from_slice(&m.max.to_le_bytes());
        }
        b.push(self.index_bits);
        b.extend_from_slice(&(self.index.len() as u32).to_le_bytes());
        for p in &self.index {
            b.extend_from_slice(&p.first.to_le_bytes());
            b.extend_from_slice(&p.offset.to_le_bytes());
            b.extend_from_slice(&p.len.to_le_bytes());
            b.extend_from_slice(&p.crc.to_le_bytes());
        }
        put_ranges(&mut b, &self.key_ranges);
        let crc = crc32fast::hash(&b);
        let len = b.len() as u64;
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&crc.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(TRAILER_MAGIC);
        b
    }

    /// Reads the footer of a sealed segment `file` of `file_len` bytes.
    ///
    /// Errors: `InvalidData` for a missing trailer, a footer whose CRC
    /// fails or that does not parse; the read's error.
    pub fn read(file: &std::fs::File, file_len: u64) -> io::Result<Footer> {
        use super::counted::read_at;
        if file_len < (SEGMENT_HEADER + TRAILER) as u64 {
            return Err(invalid("too short for a sealed segment".into()));
        }
        let mut t = [0u8; TRAILER];
        read_at(file, &mut t, file_len - TRAILER as u64)?;
        if &t[16..24] != TRAILER_MAGIC {
            return Err(invalid("no footer (trailer magic missing)".into()));
        }
        let len = u64::from_le_bytes(t[..8].try_into().expect("8 bytes"));
        let crc = u32::from_le_bytes(t[8..12].try_into().expect("4 bytes"));
        if len > file_len - (SEGMENT_HEADER + TRAILER) as u64 || len > MAX_BLOCK_BODY as u64 {
            return Err(invalid(format!("footer length {len} out of range")));
        }
        let mut b = vec![0u8; len as usize];
        read_at(file, &mut b, file_len - TRAILER as u64 - len)?;
        if crc32fast::hash(&b) != crc {
            return Err(invalid("footer checksum mismatch".into()));
        }
        Self::parse(&b).map_err(|e| invalid(format!("bad footer: {e}")))
    }

    fn parse(b: &[u8]) -> io::Result<Footer> {
        let mut c = Cursor { b, p: 0 };
        let (seq, min, max, rows, life) = (c.u64()?, c.u64()?, c.u64()?, c.u64()?, c.u64()?);
        let nf = c.u8()?;
        let mut index_fields = Vec::new();
        for _ in 0..nf {
            let n = c.u8()? as usize;
            index_fields
                .push(String::from_utf8(c.take(n)?.to_vec()).map_err(|_| invalid("name".into()))?);
        }
        let nb = c.u32()? as usize;
        let mut blocks = Vec::with_capacity(nb.min(1 << 20));
        for _ in 0..nb {
            let offset = c.u64()?;
            let len = c.u32()?;
            let kind = c.u8()?;
            let sid = c.take(2)?;
            let schema_id = u16::from_le_bytes([sid[0], sid[1]]);
            let rows = c.u32()?;
            let (bmin, bmax) = (c.u64()?, c.u64()?);
            blocks.push(BlockMeta {
                offset,
                len,
                kind,
                schema_id,
                rows,
                min: bmin,
                max: bmax,
            });
        }
        let index_bits = c.u8()?;
        if !(16..=32).contains(&index_bits) {
            return Err(invalid(format!("index of {index_bits}-bit hashes")));
        }
        let np = c.u32()? as usize;
        let mut index = Vec::with_capacity(np.min(1 << 20));
        for _ in 0..np {
            index.push(IndexPage {
                first: c.u32()?,
                offset: c.u64()?,
                len: c.u32()?,
                crc: c.u32()?,
            });
        }
        let key_ranges = get_ranges(&mut c)?;
        if c.p != b.len() {
            return Err(invalid("trailing bytes".into()));
        }
        Ok(Footer {
            seq,
            min,
            max,
            rows,
            max_lifetime_ms: life,
            index_fields,
            blocks,
            index,
            index_bits,
            key_ranges,
        })
    }
}

/// The index entry that stands for each record type's own lifecycle
/// keys ([`Lifecycle::keys`](dplog_core::schema::Lifecycle::keys), in their
/// declared order): the archive's default `index`, written as the
/// footer's one index field name. A field name cannot start with `@`.
pub const LIFECYCLE_KEYS: &str = "@lifecycle";

/// Whether index `index` keys each key field on its own
/// (`[`[`LIFECYCLE_KEYS`]`]`: a lookup that gives any of a type's key
/// fields uses it) rather than all of them together (named fields: a
/// lookup must give every key field of the type).
pub fn index_per_field(index: &[String]) -> bool {
    matches!(index, [only] if only == LIFECYCLE_KEYS)
}

/// The hash of one key field's value in a per-field index
/// ([`index_per_field`]): FNV-1a over the field's name, a 0 byte and the
/// value's bytes, then the SplitMix64 finalizer, top 32 bits. Part of
/// the format: a reader must compute the same value.
pub fn field_key_hash32(f: &FieldDef, value: &[u8]) -> u32 {
    seeded_hash32(field_key_seed(f), value)
}

/// [`field_key_hash32`]'s hash state after the field's name and the 0
/// byte: the same for every record, so [`RecordKeys`] computes it once.
fn field_key_seed(f: &FieldDef) -> u64 {
    fnv(fnv(FNV_OFFSET, f.name.as_bytes()), &[0])
}

fn seeded_hash32(seed: u64, value: &[u8]) -> u32 {
    (mix(fnv(seed, value)) >> 32) as u32
}

/// The index hashes of the records of one record type: built once (per
/// block, per segment read) from its key fields, then asked per record.
#[derive(Debug)]
pub struct RecordKeys<'a> {
    /// Each key field with its [`field_key_seed`] (0 unless per field).
    fields: Vec<(&'a FieldDef, u64)>,
    per_field: bool,
}

impl<'a> RecordKeys<'a> {
    /// For key fields `fields` ([`index_fields`]), one hash of them all
    /// or, when `per_field` ([`index_per_field`]), one per field.
    pub fn new(fields: &[&'a FieldDef], per_field: bool) -> Self {
        let seed = |f: &FieldDef| if per_field { field_key_seed(f) } else { 0 };
        Self {
            fields: fields.iter().map(|&f| (f, seed(f))).collect(),
            per_field,
        }
    }

    /// Calls `out` with each index hash of record `rec`: one
    /// [`record_key_hash32`] of the key fields, or per field one
    /// [`field_key_hash32`]; nothing without key fields.
    #[inline]
    pub fn each(&self, rec: &[u8], mut out: impl FnMut(u32)) {
        if self.per_field {
            for &(f, seed) in &self.fields {
                out(seeded_hash32(seed, f.bytes(rec)));
            }
        } else if !self.fields.is_empty() {
            let h = self
                .fields
                .iter()
                .fold(FNV_OFFSET, |h, (f, _)| fnv(h, f.bytes(rec)));
            out((mix(h) >> 32) as u32);
        }
    }
}

/// The key fields of `s` under index `index` (a footer's or the
/// writer's): for `[`[`LIFECYCLE_KEYS`]`]` its lifecycle's key fields
/// (none without a lifecycle); else the fields named in `index` that it
/// has, in index order. Writer and readers compute a record type's key
/// with this one rule.
pub fn index_fields<'a>(s: &'a Schema, index: &[String]) -> Vec<&'a FieldDef> {
    if let [only] = index {
        if only == LIFECYCLE_KEYS {
            return s.meta().lifecycle.as_ref().map_or_else(Vec::new, |l| {
                l.keys.iter().map(|&i| &s.fields()[i]).collect()
            });
        }
    }
    index
        .iter()
        .filter_map(|n| s.field(n).map(|(_, f)| f))
        .collect()
}

/// The key tuple fields of record type `s` under summary key `summary`
/// (the archive's `summary` setting), by the rule of [`index_fields`]:
/// for `[`[`LIFECYCLE_KEYS`]`]` its lifecycle's key fields in their
/// declared order (none without a lifecycle), else the named fields it
/// has, in the order named. A segment's summary ([`super::summary`])
/// holds the tuples of these fields, together.
pub fn tuple_fields<'a>(s: &'a Schema, summary: &[String]) -> Vec<&'a FieldDef> {
    index_fields(s, summary)
}

/// A 32-bit digest of the layout of tuple fields `fields` (each one's
/// name, offset and size): a summary answers for a record type only to
/// a reader whose schema of that id has the same tuple layout.
pub fn tuple_layout(fields: &[&FieldDef]) -> u32 {
    let mut h = FNV_OFFSET;
    for f in fields {
        h = fnv(h, f.name.as_bytes());
        h = fnv(h, &[0]);
        h = fnv(h, &f.offset.to_le_bytes());
        h = fnv(h, &f.size.to_le_bytes());
    }
    (mix(h) >> 32) as u32
}

/// The 64-bit summary hash of a key tuple of record type `schema_id`:
/// FNV-1a over the id (u16 LE) then `tuple` (the tuple fields' bytes,
/// concatenated, as the record holds them), then the SplitMix64
/// finalizer. Part of the format: a reader must compute the same value.
pub fn tuple_hash(schema_id: u16, tuple: &[u8]) -> u64 {
    mix(fnv(fnv(FNV_OFFSET, &schema_id.to_le_bytes()), tuple))
}

/// [`tuple_hash`] of record `rec` of type `schema_id` whose tuple fields
/// are `fields`, without building the tuple.
pub fn record_tuple_hash(schema_id: u16, fields: &[&FieldDef], rec: &[u8]) -> u64 {
    let h = fields
        .iter()
        .fold(fnv(FNV_OFFSET, &schema_id.to_le_bytes()), |h, f| {
            fnv(h, f.bytes(rec))
        });
    mix(h)
}

/// `path`'s file name as UTF-8, or "".
pub fn file_name(path: &Path) -> &str {
    path.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

#[cfg(test)]
mod tests;
