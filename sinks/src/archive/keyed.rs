//! Version-4 segments ([`format::VERSION_KEYED`]): when a segment is
//! sealed, its rows are rewritten sorted by their index key, and a row
//! that repeats the previous row's key tuple (a session's close after its
//! open, adjacent once sorted) is stored as a flag and its own fields.
//!
//! # What a keyed segment holds
//!
//! The same header (version 4), schema blocks and footer as version 3,
//! with data blocks of up to `block_rows` records of one schema, the
//! schema's rows across the whole segment sorted by their *key tuple*
//! (the index key fields the type has, in index order, then its other
//! lifecycle keys) and then by event time (equal times in the order
//! written). A data block's body is framed as in version 3 (the
//! [`format::DATA_HEADER`], a directory of its columns with a CRC-32
//! each and one of the directory, the columns, each compressed with zstd
//! on its own or stored as encoded); its columns are:
//!
//! 0. its layout, stored as is: tag `1` u8, the number of key fields
//!    u8, `1` when they are packed into one column (else `0`) u8, the
//!    number of other tuple fields u8, then the schema field index (u16
//!    LE) of each key field, in key order, and of each other tuple field;
//! 1. a flag per row (width 1): `1` when the row's tuple fields equal
//!    the previous row's (never the first row's), else `0`;
//! 2. every column of the schema ([`format::schema_columns`]) that is
//!    not a tuple field, over all rows, in the schema's order;
//! 3. the key fields of the rows flagged `0`: one column of width 8
//!    holding each row's key fields packed big-endian into a u64 (the
//!    first key field in the high bytes; non-decreasing in this order),
//!    when they are numeric (1, 2, 4 or 8 bytes) and 8 bytes or fewer
//!    together, else one column per key field;
//! 4. the other tuple fields of the rows flagged `0`, one column each.
//!
//! A row flagged `1` takes its tuple fields from the last row flagged `0`
//! before it. Every column is encoded as in version 3 ([`encode`](super::encode)).
//!
//! The footer lists, after the (empty) key index directory, the key
//! range of each keyed data block: the count u32, then per block its
//! index u32, and the smallest and largest key of its rows, each a u16
//! length and the key's bytes (each key field big-endian when numeric,
//! as stored otherwise, concatenated: their byte order is the rows'
//! order). A lookup that gives the key's first fields reads only the
//! blocks whose range holds them ([`Segment::blocks_in_key_range`]).
//!
//! Readers hand a keyed block's rows in event-time order (sorted when
//! decoded; equal times in key order), so the merge by time of
//! [`reader::merge`](super::reader::merge) is unchanged; since every
//! block of a keyed segment spans the segment's time range, a reader
//! that merges a segment by time holds all its blocks decoded at once.
//!
//! [`Segment::blocks_in_key_range`]: super::reader::Segment::blocks_in_key_range

use std::borrow::Cow;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use dplog_core::schema::Schema;

use super::encode::Column;
pub use super::format::KeyRange;
use super::format::{
    self, invalid, BlockEncoder, BlockMeta, DataHeader, Footer, RowFilter, BLOCK_HEADER,
    KIND_CALIBRATION, KIND_DATA, KIND_SCHEMA, VERSION_KEYED,
};
use super::frame::Part;

/// Tag of a keyed block's layout column.
const LAYOUT_TAG: u8 = 1;

/// Largest memory the seal-time sort of one record type of a segment
/// may take (its decoded records, their sort keys and order); a segment
/// with a type above it is sealed as version 3.
pub const SORT_MAX_BYTES: u64 = 512 << 20;

/// Which fields of a record type a keyed block sorts and pairs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyLayout {
    /// Schema field indexes of the key fields, in key order.
    pub key: Vec<usize>,
    /// Schema field indexes of the type's other lifecycle keys.
    pub rest: Vec<usize>,
    /// The key fields are stored packed into one u64 column.
    pub packed: bool,
}

fn numeric(w: usize) -> bool {
    matches!(w, 1 | 2 | 4 | 8)
}

/// Appends field `(offset, width)` of `rec` in sort order: big-endian
/// when numeric (the record holds it little-endian), else as stored.
fn put_sortable(out: &mut Vec<u8>, rec: &[u8], off: usize, w: usize) {
    let b = &rec[off..off + w];
    if numeric(w) {
        out.extend(b.iter().rev());
    } else {
        out.extend_from_slice(b);
    }
}

impl KeyLayout {
    /// The layout of records of `s` under index `index` (named fields):
    /// the key its [`format::index_fields`] give, then its lifecycle's
    /// other keys; a field that is not exactly one column of the
    /// schema's is left out.
    pub fn of(s: &Schema, index: &[String]) -> KeyLayout {
        let f = s.fields();
        let cols = format::schema_columns(s);
        let is_col = |i: usize| {
            f[i].size > 0
                && cols
                    .iter()
                    .any(|c| c.offset == f[i].offset as usize && c.width == f[i].size as usize)
        };
        let key: Vec<usize> = format::index_fields(s, index)
            .into_iter()
            .filter_map(|k| f.iter().position(|x| std::ptr::eq(x, k)))
            .filter(|&i| is_col(i))
            .collect();
        let rest: Vec<usize> = s.meta().lifecycle.as_ref().map_or_else(Vec::new, |l| {
            l.keys
                .iter()
                .copied()
                .filter(|i| !key.contains(i) && is_col(*i))
                .collect()
        });
        let widths: Vec<usize> = key.iter().map(|&i| f[i].size as usize).collect();
        let packed = !key.is_empty()
            && widths.iter().all(|&w| numeric(w))
            && widths.iter().sum::<usize>() <= 8;
        KeyLayout { key, rest, packed }
    }

    /// Its layout column's bytes.
    fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![
            LAYOUT_TAG,
            self.key.len() as u8,
            u8::from(self.packed),
            self.rest.len() as u8,
        ];
        for &i in self.key.iter().chain(&self.rest) {
            b.extend_from_slice(&(i as u16).to_le_bytes());
        }
        b
    }

    /// Parses a layout column of a block of records of `s`.
    fn parse(s: &Schema, b: &[u8]) -> io::Result<KeyLayout> {
        let bad = |why: &str| invalid(format!("keyed block layout: {why}"));
        if b.len() < 4 || b[0] != LAYOUT_TAG {
            return Err(bad("unknown tag"));
        }
        let (nk, nr) = (b[1] as usize, b[3] as usize);
        if b.len() != 4 + 2 * (nk + nr) || b[2] > 1 {
            return Err(bad("bad length"));
        }
        let idx: Vec<usize> = b[4..]
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]) as usize)
            .collect();
        let f = s.fields();
        let cols = format::schema_columns(s);
        for (k, &i) in idx.iter().enumerate() {
            let is_col = i < f.len()
                && f[i].size > 0
                && cols
                    .iter()
                    .any(|c| c.offset == f[i].offset as usize && c.width == f[i].size as usize);
            if !is_col || idx[..k].contains(&i) {
                return Err(bad("a field that is not one column of its schema"));
            }
        }
        let l = KeyLayout {
            key: idx[..nk].to_vec(),
            rest: idx[nk..].to_vec(),
            packed: b[2] == 1,
        };
        let widths: Vec<usize> = l.key.iter().map(|&i| f[i].size as usize).collect();
        if l.packed
            && (widths.is_empty()
                || !widths.iter().all(|&w| numeric(w))
                || widths.iter().sum::<usize>() > 8)
        {
            return Err(bad("packed key fields that do not fit 8 bytes"));
        }
        Ok(l)
    }

    /// `(offset, width)` of the tuple fields: key then rest.
    fn tuple(&self, s: &Schema) -> Vec<(usize, usize)> {
        let f = s.fields();
        self.key
            .iter()
            .chain(&self.rest)
            .map(|&i| (f[i].offset as usize, f[i].size as usize))
            .collect()
    }

    /// The schema's columns that are not tuple fields.
    fn every(&self, s: &Schema) -> Vec<Column> {
        let t = self.tuple(s);
        format::schema_columns(s)
            .into_iter()
            .filter(|c| !t.contains(&(c.offset, c.width)))
            .collect()
    }

    /// Appends the key of record `rec` of `s` as the footer's ranges
    /// hold it: each key field big-endian when numeric, else as stored.
    pub fn key_bytes(&self, s: &Schema, rec: &[u8], out: &mut Vec<u8>) {
        let f = s.fields();
        for &i in &self.key {
            put_sortable(out, rec, f[i].offset as usize, f[i].size as usize);
        }
    }

    /// The key bytes of the longest first key fields `filter` gives
    /// exactly (`None`: not the first one).
    pub fn prefix_of(&self, s: &Schema, filter: &RowFilter) -> Option<Vec<u8>> {
        let f = s.fields();
        let mut out = Vec::new();
        for &i in &self.key {
            let (o, w) = (f[i].offset as usize, f[i].size as usize);
            let Some((_, v)) = filter.eq.iter().find(|(off, v)| *off == o && v.len() == w) else {
                break;
            };
            let mut rec = vec![0u8; o + w];
            rec[o..].copy_from_slice(v);
            put_sortable(&mut out, &rec, o, w);
        }
        (!out.is_empty()).then_some(out)
    }

    /// Whether a block of key range `r` may hold a key starting with
    /// `prefix`.
    pub fn may_hold(r: &KeyRange, prefix: &[u8]) -> bool {
        let cut = |k: &[u8]| k[..k.len().min(prefix.len())].to_vec();
        cut(&r.min).as_slice() <= prefix && prefix <= cut(&r.max).as_slice()
    }
}

/// The keyed data block frame of `n` records of `s` (`recs`, sorted by
/// their key tuple), event times `min..=max`, in layout `l`.
///
/// Errors: the compressor's.
pub fn keyed_frame(
    enc: &mut BlockEncoder,
    s: &Schema,
    l: &KeyLayout,
    recs: &[u8],
    n: usize,
    min: u64,
    max: u64,
) -> io::Result<Vec<u8>> {
    let size = s.size();
    let t = l.tuple(s);
    let same = |a: &[u8], b: &[u8]| t.iter().all(|&(o, w)| a[o..o + w] == b[o..o + w]);
    let mut flags = Vec::with_capacity(n);
    let mut fresh = Vec::new();
    for i in 0..n {
        let r = &recs[i * size..(i + 1) * size];
        let rep = i > 0 && !t.is_empty() && same(r, &recs[(i - 1) * size..i * size]);
        flags.push(u8::from(rep));
        if !rep {
            fresh.extend_from_slice(r);
        }
    }
    let m = fresh.len() / size;
    let f = s.fields();
    let mut packed = Vec::new();
    if l.packed {
        for r in fresh.chunks_exact(size) {
            let mut v = 0u64;
            for &i in &l.key {
                let w = f[i].size as usize;
                v = v.checked_shl(8 * w as u32).unwrap_or(0) | f[i].read_uint(r);
            }
            packed.extend_from_slice(&v.to_le_bytes());
        }
    }
    let layout = l.to_bytes();
    let mut parts = vec![
        Part::Raw(&layout),
        Part::Col {
            src: &flags,
            stride: 1,
            rows: n,
            col: Column {
                offset: 0,
                width: 1,
            },
        },
    ];
    for c in l.every(s) {
        parts.push(Part::Col {
            src: recs,
            stride: size,
            rows: n,
            col: c,
        });
    }
    let field_col = |i: usize| Column {
        offset: f[i].offset as usize,
        width: f[i].size as usize,
    };
    if l.packed {
        parts.push(Part::Col {
            src: &packed,
            stride: 8,
            rows: m,
            col: Column {
                offset: 0,
                width: 8,
            },
        });
    } else {
        for &i in &l.key {
            parts.push(Part::Col {
                src: &fresh,
                stride: size,
                rows: m,
                col: field_col(i),
            });
        }
    }
    for &i in &l.rest {
        parts.push(Part::Col {
            src: &fresh,
            stride: size,
            rows: m,
            col: field_col(i),
        });
    }
    enc.frame(s, n, min, max, &parts, recs.len())
}

/// Decodes the keyed data block `body` (checked by its frame's CRC) of
/// records of `s`: the rows `filter` keeps (a superset, as
/// [`format::decode_rows`]), in event-time order (equal times in the
/// block's order). The tuple columns are decoded first: a block none of
/// whose rows holds the filter's tuple values decodes nothing else.
///
/// Errors: `InvalidData` for a body that does not decode.
pub fn decode_keyed(
    s: &Schema,
    body: &[u8],
    filter: &RowFilter,
) -> io::Result<(DataHeader, Vec<u8>)> {
    let h = format::checked_data_header(s, body)?;
    let (n, size) = (h.rows as usize, s.size());
    let ncols = u32::from_le_bytes(body[24..28].try_into().expect("4 bytes")) as usize;
    if !(2..=1 << 16).contains(&ncols) {
        return Err(invalid(format!("keyed block of {ncols} columns")));
    }
    let spans = format::column_spans(body, ncols, body.len())?;
    let raw_of = |k: usize| -> io::Result<Cow<'_, [u8]>> {
        let sp = spans[k];
        format::unstored(k, sp, Cow::Borrowed(&body[sp.at..sp.at + sp.stored]))
    };
    let dec = |k: usize, out: &mut [u8], stride: usize, rows: usize, col: Column| {
        format::decode_whole_column(k, &raw_of(k)?, out, stride, rows, col)
    };
    let l = KeyLayout::parse(s, &raw_of(0)?)?;
    let every = l.every(s);
    let key_cols = if l.packed { 1 } else { l.key.len() };
    if ncols != 2 + every.len() + key_cols + l.rest.len() {
        return Err(invalid(format!(
            "keyed block of {ncols} columns, its layout has {}",
            2 + every.len() + key_cols + l.rest.len()
        )));
    }
    let mut flags = vec![0u8; n];
    dec(
        1,
        &mut flags,
        1,
        n,
        Column {
            offset: 0,
            width: 1,
        },
    )?;
    if flags.first().is_some_and(|&f| f != 0) || flags.iter().any(|&f| f > 1) {
        return Err(invalid("keyed block: bad row flags".into()));
    }
    let m = flags.iter().filter(|&&f| f == 0).count();
    let f = s.fields();
    let t = l.tuple(s);
    // The tuple fields of the rows flagged 0, a buffer per field (`m`
    // values of its width each), in key then rest order.
    let mut tv: Vec<Vec<u8>> = t.iter().map(|&(_, w)| vec![0u8; m * w]).collect();
    let mut k = 2 + every.len();
    // A packed key is one column of all the key fields; the tuple's other
    // fields (and the key's, unpacked) are a column each.
    let first = if l.packed {
        let mut p = vec![0u8; m * 8];
        dec(
            k,
            &mut p,
            8,
            m,
            Column {
                offset: 0,
                width: 8,
            },
        )?;
        k += 1;
        for (j, v) in p.chunks_exact(8).enumerate() {
            let mut v = u64::from_le_bytes(v.try_into().expect("8 bytes"));
            for (q, &i) in l.key.iter().enumerate().rev() {
                let w = f[i].size as usize;
                tv[q][j * w..(j + 1) * w].copy_from_slice(&v.to_le_bytes()[..w]);
                v = v.checked_shr(8 * w as u32).unwrap_or(0);
            }
        }
        l.key.len()
    } else {
        0
    };
    for q in first..t.len() {
        let w = t[q].1;
        dec(
            k,
            &mut tv[q],
            w,
            m,
            Column {
                offset: 0,
                width: w,
            },
        )?;
        k += 1;
    }
    // The filter's values of whole columns; those on tuple fields pick
    // the rows first.
    let cols = format::schema_columns(s);
    let exact: Vec<(usize, &[u8])> = filter
        .eq
        .iter()
        .filter(|(o, v)| cols.iter().any(|c| c.offset == *o && c.width == v.len()))
        .map(|(o, v)| (*o, v.as_slice()))
        .collect();
    let on_tuple: Vec<(usize, &[u8])> = exact
        .iter()
        .filter_map(|&(o, v)| t.iter().position(|&x| x == (o, v.len())).map(|q| (q, v)))
        .collect();
    // The rows to decode (`None`: all), each with its flagged-0 row.
    let rows: Option<Vec<(u32, u32)>> = (!on_tuple.is_empty()).then(|| {
        let hit = |j: usize| {
            on_tuple
                .iter()
                .all(|&(q, v)| &tv[q][j * v.len()..(j + 1) * v.len()] == v)
        };
        let mut out = Vec::new();
        let (mut j, mut keep) = (0usize, false);
        for (i, &fl) in flags.iter().enumerate() {
            if fl == 0 {
                if i > 0 {
                    j += 1;
                }
                keep = hit(j);
            }
            if keep {
                out.push((i as u32, j as u32));
            }
        }
        out
    });
    let rows = rows.unwrap_or_else(|| {
        let mut j = 0u32;
        (0..n)
            .map(|i| {
                if flags[i] == 0 && i > 0 {
                    j += 1;
                }
                (i as u32, j)
            })
            .collect()
    });
    if rows.is_empty() {
        return Ok((h, Vec::new()));
    }
    let mut recs = vec![0u8; rows.len() * size];
    if rows.len() == n {
        for (j, &c) in every.iter().enumerate() {
            dec(2 + j, &mut recs, size, n, c)?;
        }
    } else {
        let mut d = Vec::new();
        for (j, &c) in every.iter().enumerate() {
            let (o, w) = (c.offset, c.width);
            d.clear();
            d.resize(n * w, 0);
            dec(
                2 + j,
                &mut d,
                w,
                n,
                Column {
                    offset: 0,
                    width: w,
                },
            )?;
            for (r, &(i, _)) in recs.chunks_exact_mut(size).zip(&rows) {
                let i = i as usize;
                r[o..o + w].copy_from_slice(&d[i * w..(i + 1) * w]);
            }
        }
    }
    for (r, &(_, j)) in recs.chunks_exact_mut(size).zip(&rows) {
        let j = j as usize;
        for (q, &(o, w)) in t.iter().enumerate() {
            r[o..o + w].copy_from_slice(&tv[q][j * w..(j + 1) * w]);
        }
    }
    // The rows kept, in event-time order.
    let holds = |r: &[u8]| exact.iter().all(|&(o, v)| &r[o..o + v.len()] == v);
    let mut order: Vec<(u64, u32)> = recs
        .chunks_exact(size)
        .enumerate()
        .filter(|(_, r)| holds(r))
        .map(|(i, r)| (format::event_time(s, r).unwrap_or(0), i as u32))
        .collect();
    order.sort_unstable();
    if order.len() == rows.len() && order.windows(2).all(|w| w[0].1 < w[1].1) {
        return Ok((h, recs));
    }
    let mut out = Vec::with_capacity(order.len() * size);
    for &(_, i) in &order {
        out.extend_from_slice(&recs[i as usize * size..(i as usize + 1) * size]);
    }
    Ok((h, out))
}

/// Name of the file a segment is rewritten into before its rename.
pub fn sort_name(seq: u64) -> String {
    format!(".seg-{seq:010}.dpa.sort")
}

/// Whether `name` is a [`sort_name`] (a rewrite a crash left).
pub fn is_sort_name(name: &str) -> bool {
    name.strip_prefix(".seg-")
        .and_then(|r| r.strip_suffix(".dpa.sort"))
        .is_some_and(|r| r.len() == 10 && r.bytes().all(|b| b.is_ascii_digit()))
}

/// What [`rewrite`] is given of the open segment.
pub(super) struct OpenParts<'a> {
    pub dir: &'a Path,
    pub file: &'a File,
    pub path: &'a Path,
    pub seq: u64,
    pub blocks: &'a [BlockMeta],
    /// Footer fields: time range, rows, lookback, index fields.
    pub min: u64,
    pub max: u64,
    pub rows: u64,
    pub max_lifetime_ms: u64,
    pub index: &'a [String],
    pub block_rows: usize,
}

/// A block frame of the open segment, checked.
fn read_frame(file: &File, m: &BlockMeta) -> io::Result<Vec<u8>> {
    let mut b = vec![0u8; m.len as usize];
    file.read_exact_at(&mut b, m.offset)?;
    let fh = format::frame_header(&b[..BLOCK_HEADER])?;
    if BLOCK_HEADER + fh.body_len != b.len() || fh.kind != m.kind {
        return Err(invalid("block header differs from its listing".into()));
    }
    fh.check(&b[BLOCK_HEADER..])?;
    Ok(b)
}

/// Rewrites the open segment `p` as a version-4 segment: to
/// [`sort_name`], fsynced, renamed to its sealed name, the directory
/// fsynced, then the open segment removed (a crash leaves the open
/// segment, the sorted file beside it, or both names of one segment:
/// recovery removes the sorted file, or the open one once the sealed one
/// exists). Returns the sealed path and the bytes written, or `None`
/// (nothing written) when the segment has calibration blocks, a record
/// type without an event time, or a type whose sort would take more than
/// [`SORT_MAX_BYTES`]: it is then sealed as version 3.
///
/// Memory: one record type's rows of the segment decoded at a time,
/// with their sort keys (within [`SORT_MAX_BYTES`]), and one block.
///
/// Errors: reading the open segment or writing the new one (the new
/// file is removed; the open segment is as it was).
pub(super) fn rewrite(
    p: &OpenParts<'_>,
    enc: &mut BlockEncoder,
) -> io::Result<Option<(PathBuf, u64)>> {
    if p.blocks.iter().any(|b| b.kind == KIND_CALIBRATION) {
        return Ok(None);
    }
    let mut schemas: Vec<(Schema, Vec<u8>)> = Vec::new();
    for m in p.blocks.iter().filter(|b| b.kind == KIND_SCHEMA) {
        let frame = read_frame(p.file, m)?;
        let s = dplog_formatters::binary::parse_schema(&frame[BLOCK_HEADER..])
            .map_err(|e| invalid(format!("schema block: {e}")))?;
        schemas.retain(|(k, _)| k.id() != s.id());
        schemas.push((s, frame));
    }
    let mut ids: Vec<u16> = Vec::new();
    for b in p.blocks.iter().filter(|b| b.kind == KIND_DATA) {
        if !ids.contains(&b.schema_id) {
            ids.push(b.schema_id);
        }
    }
    for &id in &ids {
        let Some((s, _)) = schemas.iter().find(|(s, _)| s.id() == id) else {
            return Err(invalid(format!("data of undeclared schema {id}")));
        };
        let rows: u64 = p
            .blocks
            .iter()
            .filter(|b| b.kind == KIND_DATA && b.schema_id == id)
            .map(|b| u64::from(b.rows))
            .sum();
        let l = KeyLayout::of(s, p.index);
        let klen: usize = l.tuple(s).iter().map(|t| t.1).sum::<usize>() + 8;
        let need = rows.saturating_mul((2 * s.size() + klen + 8) as u64);
        if s.meta().event_time.is_none() || need > SORT_MAX_BYTES {
            return Ok(None);
        }
    }
    let tmp = p.dir.join(sort_name(p.seq));
    let out = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o640)
        .custom_flags(libc::O_CLOEXEC)
        .open(&tmp)?;
    let written = write_sorted(p, enc, &out, &schemas, &ids);
    let done = written.and_then(|(blocks, ranges, end)| {
        let footer = Footer {
            seq: p.seq,
            min: p.min,
            max: p.max,
            rows: p.rows,
            max_lifetime_ms: p.max_lifetime_ms,
            index_fields: p.index.to_vec(),
            blocks,
            index: Vec::new(),
            index_bits: 32,
            key_ranges: ranges,
        };
        let fb = footer.to_bytes();
        out.write_all_at(&fb, end)?;
        out.sync_all()?;
        Ok(end + fb.len() as u64)
    });
    let len = match done {
        Ok(len) => len,
        Err(e) => {
            drop(out);
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    drop(out);
    let sealed = p.dir.join(format::sealed_name(p.seq, p.min, p.max));
    if let Err(e) = std::fs::rename(&tmp, &sealed) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    // Renamed: the segment is sealed. Its open file is now a copy that
    // readers skip ([`super::list_segments`]); one that cannot be removed
    // now (or a crash first) is removed when the archive is next opened.
    let _ = File::open(p.dir).and_then(|d| d.sync_all());
    if std::fs::remove_file(p.path).is_ok() {
        let _ = File::open(p.dir).and_then(|d| d.sync_all());
    }
    Ok(Some((sealed, len)))
}

/// Writes the header, the schema blocks and each type's rows sorted into
/// `out`; returns the block list, the key ranges and the end offset.
fn write_sorted(
    p: &OpenParts<'_>,
    enc: &mut BlockEncoder,
    out: &File,
    schemas: &[(Schema, Vec<u8>)],
    ids: &[u16],
) -> io::Result<(Vec<BlockMeta>, Vec<KeyRange>, u64)> {
    let mut at = format::SEGMENT_HEADER as u64;
    out.write_all_at(&format::segment_header_of(VERSION_KEYED), 0)?;
    let mut blocks = Vec::new();
    let mut ranges = Vec::new();
    for (s, frame) in schemas {
        out.write_all_at(frame, at)?;
        blocks.push(BlockMeta {
            offset: at,
            len: frame.len() as u32,
            kind: KIND_SCHEMA,
            schema_id: s.id(),
            rows: 0,
            min: 0,
            max: 0,
        });
        at += frame.len() as u64;
    }
    for &id in ids {
        let s = &schemas
            .iter()
            .find(|(s, _)| s.id() == id)
            .expect("checked")
            .0;
        let size = s.size();
        let mut recs = Vec::new();
        for m in p
            .blocks
            .iter()
            .filter(|b| b.kind == KIND_DATA && b.schema_id == id)
        {
            let frame = read_frame(p.file, m)?;
            let (_, r) = format::decode_data(s, &frame[BLOCK_HEADER..], format::VERSION)?;
            recs.extend_from_slice(&r);
        }
        let n = recs.len() / size;
        let l = KeyLayout::of(s, p.index);
        let t = l.tuple(s);
        let ti = s.meta().event_time.expect("checked");
        let tf = &s.fields()[ti];
        let (to, tw) = (tf.offset as usize, tf.size as usize);
        // Sort keys: the tuple in sort order, then the event time.
        let klen = t.iter().map(|x| x.1).sum::<usize>() + tw;
        let mut keys = Vec::with_capacity(n * klen);
        for r in recs.chunks_exact(size) {
            for &(o, w) in &t {
                put_sortable(&mut keys, r, o, w);
            }
            put_sortable(&mut keys, r, to, tw);
        }
        let mut order: Vec<u32> = (0..n as u32).collect();
        // Stable: equal keys and times keep the order written.
        order.sort_by(|&a, &b| {
            let (a, b) = (a as usize * klen, b as usize * klen);
            keys[a..a + klen].cmp(&keys[b..b + klen])
        });
        drop(keys);
        let mut sorted = Vec::with_capacity(recs.len());
        for &i in &order {
            sorted.extend_from_slice(&recs[i as usize * size..(i as usize + 1) * size]);
        }
        drop(recs);
        for chunk in sorted.chunks(p.block_rows * size) {
            let rows = chunk.len() / size;
            let (mut min, mut max) = (u64::MAX, 0);
            for r in chunk.chunks_exact(size) {
                let v = tf.read_uint(r);
                min = min.min(v);
                max = max.max(v);
            }
            let frame = keyed_frame(enc, s, &l, chunk, rows, min, max)?;
            out.write_all_at(&frame, at)?;
            if !l.key.is_empty() {
                let (mut lo, mut hi) = (Vec::new(), Vec::new());
                l.key_bytes(s, &chunk[..size], &mut lo);
                l.key_bytes(s, &chunk[(rows - 1) * size..], &mut hi);
                ranges.push(KeyRange {
                    block: blocks.len() as u32,
                    min: lo,
                    max: hi,
                });
            }
            blocks.push(BlockMeta {
                offset: at,
                len: frame.len() as u32,
                kind: KIND_DATA,
                schema_id: id,
                rows: rows as u32,
                min,
                max,
            });
            at += frame.len() as u64;
        }
    }
    Ok((blocks, ranges, at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dplog_core::schema::{FieldDef, FieldKind};

    /// A 32-byte record: time, key `a` (u32), `b` (u16), a counter.
    fn schema() -> Schema {
        Schema::new(
            402,
            "t",
            32,
            vec![
                FieldDef::new("time", 8, 8, FieldKind::NsTimestamp, 0),
                FieldDef::new("a", 16, 4, FieldKind::U32, 0),
                FieldDef::new("b", 20, 2, FieldKind::U16, 0),
                FieldDef::new("n", 24, 8, FieldKind::U64, 0),
            ],
        )
        .unwrap()
    }

    fn rec(t: u64, a: u32, b: u16, n: u64) -> Vec<u8> {
        let mut r = vec![0u8; 32];
        r[8..16].copy_from_slice(&t.to_ne_bytes());
        r[16..20].copy_from_slice(&a.to_ne_bytes());
        r[20..22].copy_from_slice(&b.to_ne_bytes());
        r[24..32].copy_from_slice(&n.to_ne_bytes());
        r
    }

    /// Records sorted by (a, b, time), pairs of equal keys among them,
    /// and their keyed block body.
    fn block() -> (Schema, Vec<Vec<u8>>, Vec<u8>) {
        let s = schema();
        let mut recs: Vec<Vec<u8>> = (0..300u64)
            .map(|i| {
                rec(
                    1000 + (i * 7919) % 301,
                    (i % 5) as u32,
                    (i / 5 % 3) as u16,
                    i,
                )
            })
            .collect();
        recs.sort_by_key(|r| (r[16..20].to_vec(), r[20..22].to_vec(), r[8..16].to_vec()));
        let index = vec!["a".to_string(), "b".to_string()];
        let l = KeyLayout::of(&s, &index);
        assert!(l.packed && l.key.len() == 2);
        let mut enc = BlockEncoder::new(3).unwrap();
        let f = keyed_frame(&mut enc, &s, &l, &recs.concat(), recs.len(), 1000, 1300).unwrap();
        (s, recs, f[BLOCK_HEADER..].to_vec())
    }

    #[test]
    fn a_keyed_block_gives_back_its_rows_in_time_order_and_those_a_filter_keeps() {
        let (s, recs, body) = block();
        let (h, got) = decode_keyed(&s, &body, &RowFilter::default()).unwrap();
        assert_eq!(h.rows, 300);
        let mut want = recs.clone();
        want.sort_by_key(|r| r[8..16].to_vec());
        let mut by_time: Vec<Vec<u8>> = got.chunks_exact(32).map(|r| r.to_vec()).collect();
        let t = |r: &Vec<u8>| u64::from_ne_bytes(r[8..16].try_into().unwrap());
        assert!(by_time.windows(2).all(|w| t(&w[0]) <= t(&w[1])));
        by_time.sort();
        want.sort();
        assert_eq!(by_time, want);
        let filter = RowFilter {
            eq: vec![
                (16, 3u32.to_ne_bytes().to_vec()),
                (20, 1u16.to_ne_bytes().to_vec()),
            ],
        };
        let (_, kept) = decode_keyed(&s, &body, &filter).unwrap();
        let mut kept: Vec<Vec<u8>> = kept.chunks_exact(32).map(|r| r.to_vec()).collect();
        kept.sort();
        let want: Vec<Vec<u8>> = want.into_iter().filter(|r| filter.matches(r)).collect();
        assert_eq!(want.len(), 20);
        assert_eq!(kept, want);
        let none = RowFilter {
            eq: vec![(16, 9u32.to_ne_bytes().to_vec())],
        };
        assert!(decode_keyed(&s, &body, &none).unwrap().1.is_empty());
    }

    #[test]
    fn a_damaged_keyed_block_is_an_error_not_a_panic() {
        let (s, _, body) = block();
        let ncols = u32::from_le_bytes(body[24..28].try_into().unwrap()) as usize;
        let layout_at = format::column_prefix_len(ncols);
        // A layout naming a field the schema does not have, one with an
        // unknown tag, and a body cut short.
        let mut bad_field = body.clone();
        bad_field[layout_at + 4] = 99;
        let mut bad_tag = body.clone();
        bad_tag[layout_at] = 7;
        for (what, b) in [
            ("field", bad_field),
            ("tag", bad_tag),
            ("cut", body[..body.len() - 3].to_vec()),
            ("header", body[..20].to_vec()),
        ] {
            let e = decode_keyed(&s, &b, &RowFilter::default()).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{what}: {e}");
        }
        // Another schema's block.
        let other = Schema::new(403, "u", 32, schema().fields().to_vec()).unwrap();
        assert!(decode_keyed(&other, &body, &RowFilter::default()).is_err());
    }

    #[test]
    fn key_ranges_hold_a_prefix_between_their_ends() {
        let r = KeyRange {
            block: 0,
            min: vec![1, 2, 0, 5],
            max: vec![1, 4, 0, 0],
        };
        assert!(KeyLayout::may_hold(&r, &[1]));
        assert!(KeyLayout::may_hold(&r, &[1, 2]));
        assert!(KeyLayout::may_hold(&r, &[1, 4, 0, 0]));
        assert!(!KeyLayout::may_hold(&r, &[1, 2, 0, 4]));
        assert!(!KeyLayout::may_hold(&r, &[1, 4, 0, 1]));
        assert!(!KeyLayout::may_hold(&r, &[2]));
        assert!(!KeyLayout::may_hold(&r, &[0, 9]));
    }
}
