//! Reading an archive: its segments ([`list_segments`]), one segment's
//! blocks ([`Segment`]), and every record in time order
//! ([`ArchiveReader`], for `dplog-cat` and imports).
//!
//! Nothing damaged is ever returned as data: every block's CRC-32 is
//! checked before it is decoded, and a block that fails (or does not
//! decode) is reported as a [`Problem`] naming the file, the block and
//! why, while reading goes on with the next block and segment.

use std::fmt;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use dplog_core::schema::Schema;
use dplog_formatters::TscCalibration;

use super::counted;
use super::format::{
    self, check_header, data_header, frame_header, BlockMeta, Footer, IndexPage, RowFilter,
    BLOCK_HEADER, KIND_CALIBRATION, KIND_DATA, KIND_SCHEMA, SEGMENT_HEADER,
};

/// Bytes of a segment's start [`Segment::open`] asks the kernel for with
/// its end: the header and the schema blocks written first.
const HEAD_ADVICE: u64 = 16 << 10;
/// Bytes of a segment's end asked for with its start: the trailer and
/// the footer (block directory, key index directory) of most segments.
const TAIL_ADVICE: u64 = 64 << 10;
/// Blocks of one segment above which [`merge_rows`] reads it as a scan,
/// with the kernel's read-ahead (a lookup decodes one to a few).
const SCAN_FROM_BLOCKS: usize = 4;

/// A segment file of an archive directory, from its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentFile {
    /// Its path.
    pub path: PathBuf,
    /// Sequence number.
    pub seq: u64,
    /// `Some((min, max))` event times (ns) of a sealed segment; `None`
    /// for an open one (being written, or left by a crash).
    pub range: Option<(u64, u64)>,
}

impl SegmentFile {
    /// Whether the segment may hold records with event times in
    /// `from..=to` (an open segment always may).
    pub fn overlaps(&self, from: u64, to: u64) -> bool {
        self.range.is_none_or_overlap(from, to)
    }
}

trait RangeExt {
    fn is_none_or_overlap(&self, from: u64, to: u64) -> bool;
}

impl RangeExt for Option<(u64, u64)> {
    fn is_none_or_overlap(&self, from: u64, to: u64) -> bool {
        match *self {
            None => true,
            Some((a, b)) => a <= to && b >= from,
        }
    }
}

/// The segment files of archive directory `dir`, in sequence order
/// (other files are ignored).
///
/// Errors: the directory cannot be read.
pub fn list_segments(dir: &Path) -> io::Result<Vec<SegmentFile>> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some((seq, range)) = format::parse_name(name) {
            v.push(SegmentFile {
                path: e.path(),
                seq,
                range,
            });
        }
    }
    v.sort_by_key(|s| (s.seq, s.range.is_none()));
    // An open segment whose sealed one exists (a crash between a keyed
    // rewrite's rename and the removal of the open file) is a copy of it.
    v.dedup_by(|b, a| a.seq == b.seq && a.range.is_some() && b.range.is_none());
    Ok(v)
}

/// Damage found while reading: a torn or corrupt block, a bad footer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The segment file.
    pub path: PathBuf,
    /// Index of the block in the segment (file order), if one is at fault.
    pub block: Option<usize>,
    /// Byte offset in the file where it was found.
    pub offset: u64,
    /// What is wrong, and what was done about it.
    pub reason: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.path.display())?;
        if let Some(b) = self.block {
            write!(f, "block {b} ")?;
        }
        write!(f, "at byte {}: {}", self.offset, self.reason)
    }
}

/// One open segment file: its blocks and schemas.
#[derive(Debug)]
pub struct Segment {
    /// Its path.
    pub path: PathBuf,
    file: File,
    /// Its format version (from the header): 1 records no TSC
    /// calibration, 2 may ([`format::KIND_CALIBRATION`] blocks).
    pub version: u32,
    /// Whether its footer was read (sealed); `false` for an open segment
    /// or a sealed one whose footer is damaged (its blocks were found by
    /// scanning; it has no key index).
    pub sealed: bool,
    /// Every whole, checksummed block, in file order.
    pub blocks: Vec<BlockMeta>,
    /// The directory of its key index pages (empty: no index).
    pub index: Vec<IndexPage>,
    /// Hash bits its index keeps (see [`format::index_bits_for`]).
    pub index_bits: u8,
    /// The schemas its schema blocks declare.
    pub schemas: Vec<Schema>,
    /// The index key fields of its footer (empty when not sealed).
    pub index_fields: Vec<String>,
    /// Version 4: the key range of each keyed data block, from the
    /// footer (see [`blocks_in_key_range`](Self::blocks_in_key_range)).
    pub key_ranges: Vec<super::keyed::KeyRange>,
    /// The writer's `max_lifetime_ms`, from the footer.
    pub max_lifetime_ms: Option<u64>,
    /// Damage found while opening it.
    pub problems: Vec<Problem>,
    /// Byte length of its valid prefix (header and whole blocks; the
    /// footer of a sealed segment excluded).
    pub valid_len: u64,
    /// The indexes of its [`KIND_CALIBRATION`] blocks, ascending, taken
    /// once from [`blocks`](Self::blocks) when the segment is opened:
    /// [`calibration_block`](Self::calibration_block) searches these
    /// instead of scanning back through the blocks for each one.
    cal_blocks: Vec<usize>,
}

impl Segment {
    /// Opens segment `path`: reads its footer, or, for an open segment
    /// (or a damaged footer, reported in [`problems`](Self::problems)),
    /// scans its blocks from the start up to the first one that is torn
    /// or fails its checksum (reported; nothing from there on is read).
    ///
    /// Errors: the file cannot be opened or read; it is not an archive
    /// segment (bad magic or version).
    pub fn open(path: &Path) -> io::Result<Segment> {
        Self::open_all(&[path]).pop().expect("one result per path")
    }

    /// [`open`](Self::open) of each of `paths`, in order: every file is
    /// opened and its header and footer asked for (cold, the disk serves
    /// all of them together) before the first is read. Every file is open
    /// at once: give a few paths at a time.
    pub fn open_all(paths: &[&Path]) -> Vec<io::Result<Segment>> {
        let files: Vec<io::Result<(File, u64)>> = paths
            .iter()
            .map(|p| {
                let file = counted::open_random(p)?;
                let len = file.metadata()?.len();
                // The header (and the schema blocks after it) and the
                // footer, asked for together.
                counted::advise(&file, 0, len.min(HEAD_ADVICE));
                counted::advise(&file, len.saturating_sub(TAIL_ADVICE), len.min(TAIL_ADVICE));
                Ok((file, len))
            })
            .collect();
        files
            .into_iter()
            .zip(paths)
            .map(|(f, p)| f.and_then(|(file, len)| Self::read_open(p, file, len)))
            .collect()
    }

    fn read_open(path: &Path, file: File, len: u64) -> io::Result<Segment> {
        let mut h = [0u8; SEGMENT_HEADER];
        counted::read_at(&file, &mut h, 0)
            .map_err(|_| format::invalid("shorter than a segment header".into()))?;
        let version = check_header(&h)?;
        let mut seg = Segment {
            path: path.to_path_buf(),
            file,
            version,
            sealed: false,
            blocks: Vec::new(),
            index: Vec::new(),
            index_bits: 32,
            schemas: Vec::new(),
            index_fields: Vec::new(),
            key_ranges: Vec::new(),
            max_lifetime_ms: None,
            problems: Vec::new(),
            valid_len: SEGMENT_HEADER as u64,
            cal_blocks: Vec::new(),
        };
        let is_open = format::parse_name(format::file_name(path)).is_some_and(|(_, r)| r.is_none());
        let footer = if is_open {
            None
        } else {
            match Footer::read(&seg.file, len) {
                Ok(f) => Some(f),
                Err(e) => {
                    seg.problems.push(Problem {
                        path: seg.path.clone(),
                        block: None,
                        offset: len,
                        reason: format!("{e}; its blocks are read by scanning"),
                    });
                    None
                }
            }
        };
        match footer {
            Some(f) => {
                seg.sealed = true;
                seg.valid_len = f
                    .blocks
                    .last()
                    .map_or(SEGMENT_HEADER as u64, |b| b.offset + b.len as u64);
                seg.blocks = f.blocks;
                seg.index = f.index;
                seg.index_bits = f.index_bits;
                seg.index_fields = f.index_fields;
                seg.key_ranges = f.key_ranges;
                seg.max_lifetime_ms = Some(f.max_lifetime_ms);
                for i in 0..seg.blocks.len() {
                    if seg.blocks[i].kind == KIND_SCHEMA {
                        match seg.read_body(i) {
                            Ok(body) => seg.add_schema(i, &body),
                            Err(e) => seg.problem(i, e.to_string()),
                        }
                    }
                }
            }
            None => seg.scan(len)?,
        }
        seg.cal_blocks = calibration_blocks(&seg.blocks);
        Ok(seg)
    }

    fn problem(&mut self, i: usize, reason: String) {
        self.problems.push(Problem {
            path: self.path.clone(),
            block: Some(i),
            offset: self.blocks.get(i).map_or(self.valid_len, |b| b.offset),
            reason,
        });
    }

    fn add_schema(&mut self, i: usize, body: &[u8]) {
        match dplog_formatters::binary::parse_schema(body) {
            Ok(s) => {
                self.schemas.retain(|k| k.id() != s.id());
                self.schemas.push(s);
            }
            Err(e) => self.problem(i, format!("bad schema block: {e}")),
        }
    }

    /// Blocks by scanning from the header, up to the end or the first
    /// block that is torn or damaged.
    fn scan(&mut self, len: u64) -> io::Result<()> {
        counted::in_order(&self.file);
        let mut off = SEGMENT_HEADER as u64;
        while off < len {
            let i = self.blocks.len();
            let stop = |seg: &mut Segment, why: String| {
                seg.problems.push(Problem {
                    path: seg.path.clone(),
                    block: Some(i),
                    offset: off,
                    reason: format!("{why}; {} bytes from here on are not read", len - off),
                });
            };
            if len - off < BLOCK_HEADER as u64 {
                stop(self, "torn block header".into());
                break;
            }
            let mut hb = [0u8; BLOCK_HEADER];
            counted::read_at(&self.file, &mut hb, off)?;
            let fh = match frame_header(&hb) {
                Ok(h) => h,
                Err(e) => {
                    stop(self, e.to_string());
                    break;
                }
            };
            if len - off - (BLOCK_HEADER as u64) < fh.body_len as u64 {
                stop(
                    self,
                    format!(
                        "torn block: {} of {} body bytes present",
                        len - off - BLOCK_HEADER as u64,
                        fh.body_len
                    ),
                );
                break;
            }
            let mut body = vec![0u8; fh.body_len];
            counted::read_at(&self.file, &mut body, off + BLOCK_HEADER as u64)?;
            if let Err(e) = fh.check(&body) {
                stop(self, e.to_string());
                break;
            }
            let mut meta = BlockMeta {
                offset: off,
                len: (BLOCK_HEADER + fh.body_len) as u32,
                kind: fh.kind,
                schema_id: 0,
                rows: 0,
                min: 0,
                max: 0,
            };
            if fh.kind == KIND_DATA {
                match data_header(&body) {
                    Ok(d) => {
                        meta.schema_id = d.schema_id;
                        meta.rows = d.rows;
                        meta.min = d.min;
                        meta.max = d.max;
                    }
                    Err(e) => {
                        stop(self, e.to_string());
                        break;
                    }
                }
            } else if fh.kind == KIND_CALIBRATION {
                if let Err(e) = format::parse_calibration(&body) {
                    stop(self, e.to_string());
                    break;
                }
            } else if body.len() >= 2 {
                meta.schema_id = u16::from_le_bytes([body[0], body[1]]);
            }
            self.blocks.push(meta);
            if fh.kind == KIND_SCHEMA {
                self.add_schema(i, &body);
            }
            off += (BLOCK_HEADER + fh.body_len) as u64;
            self.valid_len = off;
        }
        Ok(())
    }

    /// Says that most of this segment is read from here on, in order (a
    /// scan, a recovery): the kernel's read-ahead, off for the few reads
    /// of a lookup, is turned back on. A hint.
    pub(crate) fn read_in_order(&self) {
        counted::in_order(&self.file);
    }

    fn read_body(&self, i: usize) -> io::Result<Vec<u8>> {
        let m = &self.blocks[i];
        if (m.len as usize) < BLOCK_HEADER || m.len as usize > BLOCK_HEADER + format::MAX_BLOCK_BODY
        {
            return Err(format::invalid(format!(
                "block length {} out of range",
                m.len
            )));
        }
        let short = |e: io::Error| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                format::invalid("block cut short (file truncated)".into())
            } else {
                e
            }
        };
        // Header and body read apart: the body lands where it is used.
        let mut hb = [0u8; BLOCK_HEADER];
        counted::read_at(&self.file, &mut hb, m.offset).map_err(short)?;
        let fh = frame_header(&hb)?;
        if BLOCK_HEADER + fh.body_len != m.len as usize || fh.kind != m.kind {
            return Err(format::invalid(
                "block header differs from the footer".into(),
            ));
        }
        let mut body = vec![0u8; fh.body_len];
        counted::read_at(&self.file, &mut body, m.offset + BLOCK_HEADER as u64).map_err(short)?;
        fh.check(&body)?;
        Ok(body)
    }

    /// The data blocks holding a row whose key hashes to `h`
    /// ([`format::key_hash32`]), from the key index: `None` when the
    /// segment has none (open, or its footer damaged), else the block
    /// indexes (a superset when hashes collide), ascending.
    ///
    /// Errors: `InvalidData` for an index page that fails its checksum or
    /// does not parse (read the blocks instead, and report it).
    pub fn blocks_with_key(&self, h: u32) -> io::Result<Option<Vec<u32>>> {
        if !self.sealed || self.version >= format::VERSION_KEYED {
            return Ok(None);
        }
        let mut out = Vec::new();
        let h = h >> (32 - u32::from(self.index_bits));
        for p in self.key_pages(h) {
            if p.len as usize > format::MAX_BLOCK_BODY {
                return Err(format::invalid("index page length out of range".into()));
            }
            let mut b = vec![0u8; p.len as usize];
            counted::read_at(&self.file, &mut b, p.offset)?;
            if crc32fast::hash(&b) != p.crc {
                return Err(format::invalid(format!(
                    "index page at byte {}: checksum mismatch",
                    p.offset
                )));
            }
            out.extend(format::index_page_blocks(&b, h)?);
        }
        out.sort_unstable();
        out.dedup();
        Ok(Some(out))
    }

    /// The index pages that may hold (shortened) key hash `h`: from the
    /// last one starting before it, while they start at or before it.
    fn key_pages(&self, h: u32) -> impl Iterator<Item = &IndexPage> {
        let start = self
            .index
            .partition_point(|p| p.first < h)
            .saturating_sub(1);
        self.index[start..].iter().take_while(move |p| p.first <= h)
    }

    /// Asks the kernel for the key index pages that
    /// [`blocks_with_key`](Self::blocks_with_key) reads for each of
    /// `hashes`, all at once (a hint: a cold disk then serves them
    /// together); nothing for a segment without an index.
    pub fn advise_keys(&self, hashes: &[u32]) {
        if !self.sealed || hashes.len() < 2 {
            return;
        }
        for &h in hashes {
            for p in self.key_pages(h >> (32 - u32::from(self.index_bits))) {
                counted::advise(&self.file, p.offset, u64::from(p.len));
            }
        }
    }

    /// Asks the kernel for the start of each data block of `blocks` (the
    /// frame header and column directory of a version-3 block, which
    /// [`read_block_rows`](Self::read_block_rows) reads first; an older
    /// block whole), all at once, so that a cold disk serves the blocks
    /// a key index names together rather than one after the other. A
    /// hint; nothing for fewer than two blocks.
    pub fn advise_blocks(&self, blocks: &[u32]) {
        if blocks.len() < 2 {
            return;
        }
        for &i in blocks {
            let Some(m) = self.blocks.get(i as usize) else {
                continue;
            };
            let len = match self.schema(m.schema_id) {
                Some(s)
                    if m.kind == KIND_DATA
                        && self.version > format::VERSION_WHOLE_BLOCKS
                        && self.version < format::VERSION_KEYED =>
                {
                    BLOCK_HEADER + format::column_prefix_len(format::schema_columns(s).len())
                }
                _ => m.len as usize,
            };
            counted::advise(&self.file, m.offset, len.min(m.len as usize) as u64);
        }
    }

    /// Version 4: the data blocks of record type `s` whose key range may
    /// hold the first key fields `filter` gives exactly
    /// ([`keyed::KeyLayout::prefix_of`](super::keyed::KeyLayout::prefix_of)),
    /// ascending; `None` when the segment is not keyed, not sealed, or
    /// the filter does not give the type's first key field (read every
    /// block of the type). A data block of the type without a range is
    /// named.
    pub fn blocks_in_key_range(&self, s: &Schema, filter: &RowFilter) -> Option<Vec<u32>> {
        if !self.sealed || self.version < format::VERSION_KEYED {
            return None;
        }
        let l = super::keyed::KeyLayout::of(s, &self.index_fields);
        let q = l.prefix_of(s, filter)?;
        let mut ranges = self.key_ranges.iter().peekable();
        let mut out = Vec::new();
        for (i, b) in self.blocks.iter().enumerate() {
            while ranges.next_if(|r| (r.block as usize) < i).is_some() {}
            if b.kind != KIND_DATA || b.schema_id != s.id() {
                continue;
            }
            match ranges.next_if(|r| r.block as usize == i) {
                Some(r) if !super::keyed::KeyLayout::may_hold(r, &q) => {}
                _ => out.push(i as u32),
            }
        }
        Some(out)
    }

    /// The schema with id `id` in this segment.
    pub fn schema(&self, id: u16) -> Option<&Schema> {
        self.schemas.iter().find(|s| s.id() == id)
    }

    /// The calibration block in force at block `i`: the last
    /// [`KIND_CALIBRATION`] block before it in the file, if any (for `i`
    /// past the last block, the segment's last calibration block).
    /// `O(log c)` for `c` calibration blocks in the segment, from the list
    /// made when it was opened.
    pub fn calibration_block(&self, i: usize) -> Option<usize> {
        let before = self.cal_blocks.partition_point(|&c| c < i);
        before.checked_sub(1).map(|k| self.cal_blocks[k])
    }

    /// Reads and checks calibration block `c`.
    ///
    /// Errors: `InvalidData` for a block that is not a calibration, fails
    /// its checksum or does not parse; the read's error.
    pub fn read_calibration(&self, c: usize) -> io::Result<TscCalibration> {
        if self.blocks[c].kind != KIND_CALIBRATION {
            return Err(format::invalid("not a calibration block".into()));
        }
        format::parse_calibration(&self.read_body(c)?)
    }

    /// The calibration the TSC fields of data block `i` convert with: its
    /// [`calibration_block`](Self::calibration_block)'s, or the identity
    /// (ticks are ns) when none precedes it (always so in a version-1
    /// segment).
    ///
    /// Errors: as [`read_calibration`](Self::read_calibration), for the
    /// calibration block (then the block's TSC fields cannot be printed
    /// as wall time: report it and skip the block).
    pub fn block_calibration(&self, i: usize) -> io::Result<TscCalibration> {
        match self.calibration_block(i) {
            Some(c) => self.read_calibration(c),
            None => Ok(TscCalibration::IDENTITY),
        }
    }

    /// Reads, checks and decodes data block `i`: its schema and its
    /// records (`rows * schema size` bytes, back to back, in the order
    /// they were written).
    ///
    /// Errors: `InvalidData` for a block that fails its checksum or does
    /// not decode, or whose schema the segment does not declare; the
    /// read's error. Report them with [`Problem`] and go on.
    pub fn read_block(&self, i: usize) -> io::Result<(&Schema, Vec<u8>)> {
        self.read_block_rows(i, &RowFilter::default())
    }

    /// [`read_block`](Self::read_block) of only the rows `filter` keeps
    /// (a superset of those whose fields hold its values; see
    /// [`RowFilter`]), in block order. A block of format version 3
    /// decodes the filter's columns and, for the rows they keep, the
    /// others; older blocks decode whole and drop the other rows.
    ///
    /// Errors: as [`read_block`](Self::read_block).
    pub fn read_block_rows(&self, i: usize, filter: &RowFilter) -> io::Result<(&Schema, Vec<u8>)> {
        let m = &self.blocks[i];
        if m.kind != KIND_DATA {
            return Err(format::invalid("not a data block".into()));
        }
        let s = self.schema(m.schema_id).ok_or_else(|| {
            format::invalid(format!(
                "schema {} is not declared in the segment",
                m.schema_id
            ))
        })?;
        if self.version > format::VERSION_WHOLE_BLOCKS
            && self.version < format::VERSION_KEYED
            && !filter.eq.is_empty()
        {
            return self.read_columns(i, s, filter).map(|recs| (s, recs));
        }
        let body = self.read_body(i)?;
        let (h, recs) = if self.version >= format::VERSION_KEYED {
            super::keyed::decode_keyed(s, &body, filter)?
        } else {
            format::decode_rows(s, &body, self.version, filter)?
        };
        if h.rows != m.rows || h.schema_id != m.schema_id {
            return Err(format::invalid(
                "block header differs from the footer".into(),
            ));
        }
        Ok((s, recs))
    }

    /// The rows `filter` keeps of version-3 data block `i` (of schema
    /// `s`), reading only the columns it needs: the block's header and
    /// column directory (checked against their CRC-32), then each column
    /// read (checked against its own CRC-32). The block's frame CRC,
    /// which covers the columns not read, is not checked.
    fn read_columns(&self, i: usize, s: &Schema, filter: &RowFilter) -> io::Result<Vec<u8>> {
        let m = &self.blocks[i];
        let ncols = format::schema_columns(s).len();
        let prefix = format::column_prefix_len(ncols);
        let mut head = vec![0u8; BLOCK_HEADER + prefix];
        if (m.len as usize) < head.len() {
            return Err(format::invalid(format!(
                "block of {} bytes, shorter than its column directory",
                m.len
            )));
        }
        let short = |e: io::Error| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                format::invalid("block cut short (file truncated)".into())
            } else {
                e
            }
        };
        counted::read_at(&self.file, &mut head, m.offset).map_err(short)?;
        let fh = frame_header(&head)?;
        if BLOCK_HEADER + fh.body_len != m.len as usize || fh.kind != m.kind {
            return Err(format::invalid(
                "block header differs from the footer".into(),
            ));
        }
        let body = &head[BLOCK_HEADER..];
        let spans = format::column_spans(body, ncols, fh.body_len)?;
        let h = data_header(body)?;
        let last = u32::from_le_bytes(body[24..28].try_into().expect("4 bytes")) as usize;
        if h.rows != m.rows || h.schema_id != m.schema_id || h.schema_id != s.id() || last != ncols
        {
            return Err(format::invalid(
                "block header differs from the footer".into(),
            ));
        }
        let at = m.offset + BLOCK_HEADER as u64;
        let mut advise = |ks: &[usize]| {
            if ks.len() > 1 {
                for &k in ks {
                    counted::advise(&self.file, at + spans[k].at as u64, spans[k].stored as u64);
                }
            }
        };
        format::decode_columns(s, h.rows as usize, &spans, filter, &mut advise, &mut |k| {
            let sp = spans[k];
            let mut b = vec![0u8; sp.stored];
            counted::read_at(&self.file, &mut b, at + sp.at as u64).map_err(short)?;
            let got = crc32fast::hash(&b);
            if got != sp.crc {
                return Err(format::invalid(format!(
                    "column {k}: checksum mismatch (stored {:08x}, computed {got:08x})",
                    sp.crc
                )));
            }
            Ok(std::borrow::Cow::Owned(b))
        })
    }

    /// A [`Problem`] for block `i` failing with `e`.
    pub fn block_problem(&self, i: usize, e: &io::Error) -> Problem {
        Problem {
            path: self.path.clone(),
            block: Some(i),
            offset: self.blocks.get(i).map_or(0, |b| b.offset),
            reason: format!("{e}; block skipped"),
        }
    }

    /// Smallest and largest event time of its data blocks, if any.
    pub fn time_range(&self) -> Option<(u64, u64)> {
        let d = self.blocks.iter().filter(|b| b.kind == KIND_DATA);
        let min = d.clone().map(|b| b.min).min()?;
        Some((min, d.map(|b| b.max).max()?))
    }

    /// Records in its data blocks.
    pub fn rows(&self) -> u64 {
        self.blocks
            .iter()
            .filter(|b| b.kind == KIND_DATA)
            .map(|b| b.rows as u64)
            .sum()
    }
}

/// Opens the segments of `files` (in sequence order) that overlap
/// `from..=to`, grouped so that no record of a later group is older than
/// one of an earlier group: segments whose time ranges overlap go
/// together (a record a slice late lands in the next segment; a writer
/// restarted on old data writes segments over earlier times). Each group
/// is handed to `group` in sequence order (so records of equal time keep
/// the order they were written in), groups in time order, until `group`
/// returns `false`. A segment that cannot be opened is added to
/// `problems` and skipped; those opened add their own problems.
///
/// Memory: the footers of one group at a time. Time ranges come from the
/// sealed segments' names; an open segment is scanned to learn its own.
pub fn for_each_group(
    files: &[SegmentFile],
    from: u64,
    to: u64,
    problems: &mut Vec<Problem>,
    group: &mut dyn FnMut(Vec<Segment>, &mut Vec<Problem>) -> bool,
) {
    let skipped = |sf: &SegmentFile, e: io::Error| Problem {
        path: sf.path.clone(),
        block: None,
        offset: 0,
        reason: format!("{e}; segment skipped"),
    };
    let mut spans: Vec<(u64, u64, usize)> = Vec::new();
    let mut opened: Vec<(usize, Segment)> = Vec::new();
    for (i, sf) in files.iter().enumerate() {
        if !sf.overlaps(from, to) {
            continue;
        }
        match sf.range {
            Some((lo, hi)) => spans.push((lo, hi, i)),
            None => match Segment::open(&sf.path) {
                Ok(seg) => {
                    if let Some((lo, hi)) = seg.time_range() {
                        if lo <= to && hi >= from {
                            spans.push((lo, hi, i));
                            opened.push((i, seg));
                            continue;
                        }
                    }
                    problems.extend(seg.problems.iter().cloned());
                }
                Err(e) => problems.push(skipped(sf, e)),
            },
        }
    }
    spans.sort_unstable();
    let mut k = 0;
    while k < spans.len() {
        let mut members = vec![spans[k].2];
        let mut hi = spans[k].1;
        k += 1;
        while k < spans.len() && spans[k].0 <= hi {
            members.push(spans[k].2);
            hi = hi.max(spans[k].1);
            k += 1;
        }
        members.sort_unstable();
        let mut segs = Vec::with_capacity(members.len());
        for i in members {
            let seg = match opened.iter().position(|(j, _)| *j == i) {
                Some(p) => opened.swap_remove(p).1,
                None => match Segment::open(&files[i].path) {
                    Ok(s) => s,
                    Err(e) => {
                        problems.push(skipped(&files[i], e));
                        continue;
                    }
                },
            };
            problems.extend(seg.problems.iter().cloned());
            segs.push(seg);
        }
        if !segs.is_empty() && !group(segs, problems) {
            return;
        }
    }
}

/// A decoded block being merged.
struct Cursor<'s> {
    schema: &'s Schema,
    recs: Vec<u8>,
    /// The calibration of its TSC fields.
    cal: TscCalibration,
    row: usize,
    /// The block's smallest time: the time of records of a schema
    /// without an event-time field (the writer's clock at the block).
    min: u64,
}

impl Cursor<'_> {
    fn time(&self) -> u64 {
        let n = self.schema.size();
        format::event_time(self.schema, &self.recs[self.row * n..(self.row + 1) * n])
            .unwrap_or(self.min)
    }
}

/// What [`merge`] calls per record: `(segment index, schema, record,
/// calibration)`, `false` to stop.
pub type MergeFn<'a> = dyn FnMut(usize, &Schema, &[u8], TscCalibration) -> bool + 'a;

/// The indexes of the [`KIND_CALIBRATION`] blocks among `blocks`,
/// ascending.
fn calibration_blocks(blocks: &[BlockMeta]) -> Vec<usize> {
    blocks
        .iter()
        .enumerate()
        .filter(|(_, b)| b.kind == KIND_CALIBRATION)
        .map(|(i, _)| i)
        .collect()
}

/// Calls `f(segment index, schema, record, calibration)` for the records
/// with event times in `from..=to` of the data blocks of `segs` that
/// `keep(segment index, block index)` accepts, in event-time order
/// (records of equal time in the order written: segment, block, row),
/// until `f` returns `false` (then `false`). The calibration is the one
/// the record's TSC fields convert with ([`Segment::block_calibration`]:
/// set it on the formatter before formatting the record). Damaged blocks
/// are skipped and added to `problems`; so are the blocks of a record
/// type with a TSC field whose calibration block is damaged.
///
/// Memory: the decoded blocks whose time ranges overlap at the current
/// time (one or two per record type for a log written in time order).
pub fn merge(
    segs: &[Segment],
    from: u64,
    to: u64,
    keep: &mut dyn FnMut(usize, usize) -> bool,
    problems: &mut Vec<Problem>,
    f: &mut MergeFn<'_>,
) -> bool {
    merge_rows(segs, from, to, keep, &mut |_, _| None, problems, f)
}

/// [`merge`] of only the rows `rows(segment index, block index)` keeps
/// of each block (`None`: all; see [`Segment::read_block_rows`]): a
/// lookup that knows the values of some fields decodes the other
/// columns of only the rows that hold them (format version 3).
pub fn merge_rows(
    segs: &[Segment],
    from: u64,
    to: u64,
    keep: &mut dyn FnMut(usize, usize) -> bool,
    rows: &mut dyn FnMut(usize, usize) -> Option<RowFilter>,
    problems: &mut Vec<Problem>,
    f: &mut MergeFn<'_>,
) -> bool {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    // Candidate blocks by their smallest time.
    let mut cands: Vec<(u64, usize, usize)> = Vec::new();
    for (si, seg) in segs.iter().enumerate() {
        for (bi, b) in seg.blocks.iter().enumerate() {
            if b.kind == KIND_DATA && b.min <= to && b.max >= from && keep(si, bi) {
                cands.push((b.min, si, bi));
            }
        }
    }
    // A segment of which more than a lookup's few blocks are read is
    // read in order: its read-ahead back on.
    for (si, seg) in segs.iter().enumerate() {
        if cands
            .iter()
            .filter(|c| c.1 == si)
            .nth(SCAN_FROM_BLOCKS)
            .is_some()
        {
            seg.read_in_order();
        }
    }
    cands.sort_unstable();
    let mut cursors: Vec<Option<Cursor<'_>>> = Vec::new();
    // Per segment, the calibration block read last and its value (most
    // blocks share one).
    let mut cals: Vec<Option<(usize, io::Result<TscCalibration>)>> =
        segs.iter().map(|_| None).collect();
    // (head time, segment, block, cursor index), smallest first.
    let mut heap: BinaryHeap<Reverse<(u64, usize, usize, usize)>> = BinaryHeap::new();
    let mut next = 0;
    loop {
        // Open every block that may hold a record at or before the head.
        while next < cands.len() && heap.peek().is_none_or_at_least(cands[next].0) {
            let (_, si, bi) = cands[next];
            next += 1;
            let read = match rows(si, bi) {
                Some(filter) => segs[si].read_block_rows(bi, &filter),
                None => segs[si].read_block(bi),
            };
            match read {
                Ok((schema, recs)) if !recs.is_empty() => {
                    let cal = match segs[si].calibration_block(bi) {
                        None => TscCalibration::IDENTITY,
                        Some(ci) => {
                            let cached = &mut cals[si];
                            if !matches!(cached, Some((c, _)) if *c == ci) {
                                *cached = Some((ci, segs[si].read_calibration(ci)));
                            }
                            match cached.as_ref().map(|(_, r)| r) {
                                Some(Ok(c)) => *c,
                                // Records without a TSC field print the
                                // same with any calibration.
                                Some(Err(_)) if !format::has_tsc(schema) => {
                                    TscCalibration::IDENTITY
                                }
                                Some(Err(e)) => {
                                    let e = format::invalid(format!(
                                        "its calibration (block {ci}): {e}"
                                    ));
                                    problems.push(segs[si].block_problem(bi, &e));
                                    continue;
                                }
                                None => unreachable!("cached above"),
                            }
                        }
                    };
                    let c = Cursor {
                        schema,
                        recs,
                        cal,
                        row: 0,
                        min: segs[si].blocks[bi].min,
                    };
                    heap.push(Reverse((c.time(), si, bi, cursors.len())));
                    cursors.push(Some(c));
                }
                Ok(_) => {}
                Err(e) => problems.push(segs[si].block_problem(bi, &e)),
            }
        }
        let Some(Reverse((t, si, bi, k))) = heap.pop() else {
            return true;
        };
        let c = cursors[k].as_mut().expect("a cursor in the heap is live");
        let n = c.schema.size();
        if (from..=to).contains(&t) && !f(si, c.schema, &c.recs[c.row * n..(c.row + 1) * n], c.cal)
        {
            return false;
        }
        c.row += 1;
        if c.row * n < c.recs.len() {
            heap.push(Reverse((c.time(), si, bi, k)));
        } else {
            cursors[k] = None;
        }
    }
}

trait HeadExt {
    fn is_none_or_at_least(&self, t: u64) -> bool;
}

impl HeadExt for Option<&std::cmp::Reverse<(u64, usize, usize, usize)>> {
    fn is_none_or_at_least(&self, t: u64) -> bool {
        match self {
            None => true,
            Some(h) => h.0 .0 >= t,
        }
    }
}

/// Reads every record of an archive directory in event-time order
/// (records of equal time in the order written), whatever their types:
/// blocks are sorted by time when written, and the blocks of segments
/// whose time ranges overlap are merged. Memory: the footers of the
/// overlapping segments being read and the decoded blocks that overlap
/// the current time.
///
/// ```no_run
/// use dplog_sinks::archive::ArchiveReader;
/// let mut r = ArchiveReader::open(std::path::Path::new("archive"))?;
/// r.for_each(0, u64::MAX, |schema, rec| {
///     println!("{} record of {} bytes", schema.name(), rec.len());
///     true // go on
/// })?;
/// for p in r.problems() {
///     eprintln!("dplog: {p}");
/// }
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct ArchiveReader {
    segments: Vec<SegmentFile>,
    problems: Vec<Problem>,
}

impl ArchiveReader {
    /// The archive in `dir`.
    ///
    /// Errors: the directory cannot be read.
    pub fn open(dir: &Path) -> io::Result<ArchiveReader> {
        Ok(ArchiveReader {
            segments: list_segments(dir)?,
            problems: Vec::new(),
        })
    }

    /// Its segment files, in sequence order.
    pub fn segments(&self) -> &[SegmentFile] {
        &self.segments
    }

    /// Damage found so far (files that are not segments, torn or corrupt
    /// blocks, bad footers), in the order found.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// Every distinct schema of the archive's records (same id and
    /// layout once), in the order first met: what an output encoder
    /// needs before the first record. Reads each segment's footer and
    /// schema blocks; damage is added to [`problems`](Self::problems).
    pub fn schemas(&mut self) -> Vec<Schema> {
        let mut out: Vec<Schema> = Vec::new();
        for sf in &self.segments {
            match Segment::open(&sf.path) {
                Ok(seg) => {
                    for s in seg.schemas {
                        if !out
                            .iter()
                            .any(|k| k.id() == s.id() && k.fields() == s.fields())
                        {
                            out.push(s);
                        }
                    }
                }
                Err(e) => self.problems.push(Problem {
                    path: sf.path.clone(),
                    block: None,
                    offset: 0,
                    reason: format!("{e}; segment skipped"),
                }),
            }
        }
        out
    }

    /// Calls `f(schema, record)` for every record with an event time in
    /// `from..=to` (ns), in the order described on [`ArchiveReader`],
    /// until `f` returns `false`. Damaged blocks and segments are
    /// skipped and added to [`problems`](Self::problems). A record's TSC
    /// fields are raw ticks: [`for_each_calibrated`](Self::for_each_calibrated)
    /// gives the calibration to print them with.
    ///
    /// Errors: none today (damage is a problem, not an error); kept for
    /// readers that may fail as a whole.
    pub fn for_each(
        &mut self,
        from: u64,
        to: u64,
        mut f: impl FnMut(&Schema, &[u8]) -> bool,
    ) -> io::Result<()> {
        self.for_each_calibrated(from, to, |s, r, _| f(s, r))
    }

    /// [`for_each`](Self::for_each) with each record's TSC calibration
    /// (`f(schema, record, calibration)`): the one in force where the
    /// writer took the record (the binary stream's `C` frame before it),
    /// the identity for a segment that records none (format version 1).
    /// Pass it to the formatter (`set_tsc_calibration`) before formatting
    /// the record, as for a binary log's `C` frames.
    ///
    /// Errors: as [`for_each`](Self::for_each).
    pub fn for_each_calibrated(
        &mut self,
        from: u64,
        to: u64,
        mut f: impl FnMut(&Schema, &[u8], TscCalibration) -> bool,
    ) -> io::Result<()> {
        let files = self.segments.clone();
        for_each_group(
            &files,
            from,
            to,
            &mut self.problems,
            &mut |segs, problems| {
                merge(
                    &segs,
                    from,
                    to,
                    &mut |_, _| true,
                    problems,
                    &mut |_, s, r, c| f(s, r, c),
                )
            },
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dplog_core::schema::{FieldDef, FieldKind};

    /// A segment of `kinds` (`S`, `C`, `D` blocks, in file order) in
    /// `dir`: data block `i` holds one record of event time `i`,
    /// calibration block `i` the calibration [`cal`]`(i)`; sealed (a
    /// footer lists the blocks) or open (its blocks are found by
    /// scanning).
    fn write_segment(dir: &Path, kinds: &[u8], sealed: bool) -> PathBuf {
        let s = Schema::new(
            401,
            "t",
            16,
            vec![FieldDef::new("time", 8, 8, FieldKind::NsTimestamp, 0)],
        )
        .unwrap();
        let cols = format::schema_columns(&s);
        let mut enc = format::BlockEncoder::new(1).unwrap();
        let mut file = format::segment_header().to_vec();
        let mut blocks = Vec::new();
        for (i, &kind) in kinds.iter().enumerate() {
            let t = i as u64;
            let (f, rows) = match kind {
                KIND_SCHEMA => (format::block_frame(KIND_SCHEMA, &s.encode().unwrap()), 0),
                KIND_CALIBRATION => (
                    format::block_frame(KIND_CALIBRATION, &format::calibration_body(&cal(i))),
                    0,
                ),
                _ => {
                    let mut rec = [0u8; 16];
                    rec[8..16].copy_from_slice(&t.to_ne_bytes());
                    (enc.data_frame(&s, &cols, &rec, 1, t, t).unwrap(), 1)
                }
            };
            blocks.push(BlockMeta {
                offset: file.len() as u64,
                len: f.len() as u32,
                kind,
                schema_id: if kind == KIND_CALIBRATION { 0 } else { s.id() },
                rows,
                min: if rows == 1 { t } else { 0 },
                max: if rows == 1 { t } else { 0 },
            });
            file.extend_from_slice(&f);
        }
        let max = kinds.len() as u64;
        let name = if sealed {
            let footer = Footer {
                seq: 0,
                min: 0,
                max,
                rows: kinds.iter().filter(|&&k| k == KIND_DATA).count() as u64,
                max_lifetime_ms: 86_400_000,
                index_fields: Vec::new(),
                blocks,
                index: Vec::new(),
                index_bits: 16,
                key_ranges: Vec::new(),
            };
            file.extend_from_slice(&footer.to_bytes());
            format::sealed_name(0, 0, max)
        } else {
            format::open_name(0)
        };
        let path = dir.join(name);
        std::fs::write(&path, file).unwrap();
        path
    }

    /// The calibration of calibration block `i`.
    fn cal(i: usize) -> TscCalibration {
        TscCalibration {
            hz: 1_000_000_000 + i as u64,
            tsc0: i as u64,
            ns0: 7 * i as u64,
        }
    }

    /// Opens the segment of `kinds` sealed and open, and checks every
    /// block's calibration block (and one past the end) against a scan
    /// back from it, the list made at open against `kinds`, and each
    /// data block's calibration.
    fn check(kinds: &[u8]) {
        let want_list: Vec<usize> = (0..kinds.len())
            .filter(|&i| kinds[i] == KIND_CALIBRATION)
            .collect();
        for sealed in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let seg = Segment::open(&write_segment(dir.path(), kinds, sealed)).unwrap();
            assert!(seg.problems.is_empty(), "{:?}", seg.problems);
            assert_eq!(seg.sealed, sealed);
            assert_eq!(seg.blocks.len(), kinds.len());
            assert_eq!(seg.cal_blocks, want_list, "sealed {sealed}");
            for i in 0..=kinds.len() + 1 {
                let want = kinds[..i.min(kinds.len())]
                    .iter()
                    .rposition(|&k| k == KIND_CALIBRATION);
                assert_eq!(seg.calibration_block(i), want, "block {i}, sealed {sealed}");
                if kinds.get(i) == Some(&KIND_DATA) {
                    let c = seg.block_calibration(i).unwrap();
                    assert_eq!(c, want.map_or(TscCalibration::IDENTITY, cal), "block {i}");
                    let (_, rec) = seg.read_block(i).unwrap();
                    assert_eq!(rec[8..16], (i as u64).to_ne_bytes());
                }
            }
        }
    }

    #[test]
    fn a_segment_of_many_blocks_and_no_calibration_has_none_in_force() {
        let mut kinds = vec![KIND_SCHEMA];
        kinds.resize(5000, KIND_DATA);
        check(&kinds);
    }

    #[test]
    fn each_block_takes_the_last_calibration_block_before_it() {
        // Data before the first calibration, calibrations back to back,
        // long and short runs between them, one last at the end.
        let mut kinds = vec![KIND_SCHEMA, KIND_DATA, KIND_DATA, KIND_CALIBRATION];
        for run in [1usize, 0, 7, 300, 2, 0, 0, 41] {
            kinds.extend(std::iter::repeat(KIND_DATA).take(run));
            kinds.push(KIND_CALIBRATION);
        }
        kinds.extend(std::iter::repeat(KIND_DATA).take(50));
        kinds.push(KIND_CALIBRATION);
        check(&kinds);
        // A calibration first, before the schema.
        check(&[KIND_CALIBRATION, KIND_SCHEMA, KIND_DATA, KIND_DATA]);
    }
}
