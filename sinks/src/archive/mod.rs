//! The archive sink: a log that is small and searchable, for the question
//! that arrives months later ("who had public address A, port P at time
//! T?"), for records of any schema.
//!
//! # What it receives
//!
//! The archive needs the raw records and their schemas, not formatted
//! text. It takes the stream of the `binary` format
//! (`dplog_formatters::binary`: an `H` frame, the `S` schema frames, then
//! one `R` frame per record with its bytes as they were in the ring), so
//! the consumer runtime, the formatter and the batch accounting stay what
//! they are for every other sink: configure `[format] type = "binary"`
//! with `[sink] type = "archive"` (the configuration refuses another
//! format). A batch that is not binary frames is refused (permanent
//! error). Of the binary stream the archive keeps the schemas, the
//! records and the TSC calibrations (`C` frames); drop-report frames
//! (`D`) are skipped: drops are in the logger's counters. In a
//! `[[sink]]` set every sink gets the same bytes, so an archive goes
//! with other binary sinks (a binary file, mmap segments).
//!
//! **TSC fields.** A record's `TscTimestamp` fields are stored as raw
//! ticks, and each data block of a record type that has one follows the
//! calibration block its rows were taken under (see Layout): readers
//! ([`ArchiveReader::for_each_calibrated`], [`reader::merge`]) hand each
//! record with its calibration, and `dplog-cat` and `dplog-query` print
//! these fields as wall time exactly as `dplog-cat` does from the binary
//! log. A change of calibration (the consumer recalibrates about once a
//! second) closes the partial blocks of those record types, so their
//! blocks hold at most the records of one calibration; record types
//! without a TSC field are not cut.
//!
//! Times are each record's event-time field (its schema's): ns since the
//! epoch for an `NsTimestamp` field; raw ticks for a `TscTimestamp` one
//! (its slices, ranges and query times are then in ticks: give such a
//! schema an `NsTimestamp` event time to slice and query it by wall
//! time); the writer's clock for a schema without one.
//!
//! # Layout
//!
//! A directory of segments, one per time slice of the records' event
//! time (`segment_interval_ms`, aligned to multiples of it) or per
//! `segment_bytes` of blocks, whichever ends first. A segment being
//! written is `.seg-<seq>.dpa.open`; sealing appends the footer, fsyncs
//! the file, renames it to `seg-<seq>-<min time>-<max time>.dpa` (10 and
//! 20 digits, times in ns) and fsyncs the directory. The name is the
//! sidecar: a query lists the directory and opens only segments whose time
//! range matters.
//!
//! A segment file ([`format`](mod@format)) is a 16-byte header
//! (`DPLOGAR1`, format version u32 LE, 3, or 4 for a segment rewritten
//! sorted by key when sealed ([`keyed`]); readers also take version 2,
//! whose data blocks compress their columns together, and version 1,
//! which moreover has no calibration blocks: its TSC fields print as
//! ticks read as ns, the identity) then block frames `[DPAB][kind u8][0 0 0][body
//! length u32 LE][CRC-32 u32 LE][body]` (the CRC covers the first 12
//! header bytes and the body):
//! - kind `S`: a schema, as the binary format's `S` frame payload; each
//!   segment declares every schema of the stream before its first data
//!   block, so it decodes alone and formats as the logger did;
//! - kind `D`: up to `block_rows` records of one schema, sorted by event
//!   time (equal times in the order written): schema id, rows, min and
//!   max event time, the number of columns, a directory of the columns
//!   (stored and encoded length and a CRC-32 each) with its own CRC-32,
//!   then the records' columns
//!   ([`encode`]: constant, frame of reference, delta, delta of delta or
//!   dictionary, bit-packed; other widths as byte planes), each
//!   compressed with zstd on its own (or stored as encoded when zstd
//!   does not shorten it), so a reader reads and decodes only the
//!   columns and rows it needs ([`format::RowFilter`],
//!   [`Segment::read_block_rows`]), checking the directory's and each
//!   column's CRC-32 (the frame's covers the whole body);
//!   versions 1 and 2 put the encoded length of all columns where
//!   version 3 has their number, and compress them together;
//! - kind `C` (version 2): a TSC calibration, as the binary format's `C`
//!   frame payload (`hz`, `tsc0`, `ns0`, u64 LE each). The TSC fields of
//!   the data blocks after it, up to the next one, convert with it; one
//!   goes before the first data block with TSC fields of every segment
//!   (so it reads alone, as an mmap segment does) and before each such
//!   block whose calibration differs from the segment's last one. A data
//!   block with none before it converts with the identity.
//!
//! A segment is written as version 3 while it is open. When `index`
//! names fields (and `format_version` is 4, the default), sealing
//! rewrites it as version 4 ([`keyed`]): each record type's rows sorted
//! by its key tuple, a row repeating the previous row's tuple stored as a
//! flag and its own fields, the blocks' key ranges in the footer instead
//! of a key index; readers hand its rows in event-time order.
//!
//! A sealed segment ends with its key index pages, a footer (time range,
//! rows, the writer's `max_lifetime_ms`, the index key fields, per block
//! its offset, kind, schema, rows and time range, and the directory of
//! the index pages: first hash, offset, length, CRC-32) and a 24-byte
//! trailer (footer length, its CRC-32, `DPLOGAE1`).
//!
//! # Index
//!
//! `index` names the key fields. By default (`["@lifecycle"]`) each
//! record type's key fields are its own lifecycle's keys
//! ([`Schema::with_lifecycle`](dplog_core::schema::Schema::with_lifecycle)),
//! each indexed on its own: a lookup that gives any of them exactly
//! (e.g. the NAT's public address and port of its session tuple) reads
//! the blocks that hold all the values given; a type without a lifecycle
//! is not indexed. Named fields instead (e.g.
//! `["postNATSourceIPv4Address", "postNAPTSourceTransportPort"]`) are
//! one key together: each type's key is the subset of them it has (NAT44
//! sessions: address and port; port blocks, whose port is a range: the
//! address), a lookup must give every one of them, a type with none is
//! not indexed, and a name that no served type has is refused
//! ([`ArchiveSinkOptions::check_index`]). The footer keeps the `index`
//! the segment was written with, and readers derive each type's key from
//! it with the writer's rule ([`format::index_fields`],
//! [`format::index_per_field`]). A sealed segment's index is every distinct
//! (key hash, block) pair of its rows, the hash cut to 8 bits more than
//! it takes to number the pairs ([`format::index_bits_for`]: a key no row
//! has names a block in 1 lookup of 256), sorted, in pages of 4096 pairs
//! (hash differences Rice-coded, blocks bit-packed: about 1.7 bytes a
//! pair); the footer lists each page's first hash. A lookup reads the footers of the segments in
//! its time range and one page of each, and decodes only the blocks the
//! page names (a hash collision only costs a block read), of them first
//! the columns of the fields whose values it knows, then the other
//! columns of only the rows that hold those values. An open
//! segment has no index yet: it is scanned. The open segment keeps its
//! pairs in memory until sealed (8 bytes per distinct key per block;
//! a block's repeated keys are mostly dropped as it is encoded, the
//! rest when sealed), in buckets by hash that the seal radix-sorts.
//!
//! # Segment summaries
//!
//! When a segment is sealed, the key tuples of its rows (each record
//! type's [`summary`](ArchiveSinkOptions::summary) fields together;
//! default its lifecycle keys) are appended as one entry to the summary
//! of its day, `summary-<day>.dps` and `.dpb` ([`summary`]: bucketed
//! 16-bit fingerprints, a CRC-32 per bucket, about 2.1 bytes per
//! distinct tuple). A lookup that gives a type's whole tuple reads the
//! entries of its window's days (a few dozen bytes a segment), two
//! offsets of a bucket table and one bucket per segment, and opens only the
//! segments that may hold the tuple (`dplog-query`), so its cost does not
//! grow with the lookback window. A segment without an entry (a crash
//! between its rename and the append) is opened as before; a damaged
//! summary is reported and the segments it would rule out are opened.
//! The segment files and their format are unchanged by the summaries.
//! The open segment keeps its tuple hashes in memory until sealed (8
//! bytes per distinct tuple per block). `summary = []` writes none.
//!
//! # Durability and crashes
//!
//! A record is in memory until its block is written: when the block is
//! full, when it is `block_max_age_ms` old (default 1000), on
//! [`flush`](dplog_core::Sink::flush) (which also fsyncs the open
//! segment), on [`write_out`](dplog_core::Sink::write_out) (which does
//! not) and at close. Blocks go to the open
//! segment with `pwrite`; the file is fsynced every `fsync_interval_ms`
//! and when sealed. A process crash (SIGKILL) loses the records not yet in
//! a block (at most `block_max_age_ms` of them); the next
//! [`ArchiveSink::open`] on the directory recovers the open segment: its
//! blocks are read from the start up to the first that is torn or fails
//! its checksum (reported on stderr with the file and offset, counted in
//! `archive.torn_blocks`, and cut off), the rest sealed as any segment.
//! Readers never return a block that fails its checksum.
//!
//! A write error (a full disk) cuts the file back to its last whole block;
//! the block stays queued and the next batch is refused with the
//! (retryable) error until it is written, so nothing is lost or written
//! twice. A new segment whose header cannot be written is removed again:
//! the blocks for it stay queued.
//!
//! # Delivery accounting
//!
//! A record counts as written (the logger's `written_records`) once its
//! block is in a segment file (`pwrite` returned), not when the sink takes
//! its batch. A batch is taken whole or refused whole: every frame is
//! checked before any of it is taken (a record of an undeclared schema or
//! of the wrong size, a schema or calibration frame that does not parse:
//! a permanent error, nothing of the batch kept). A batch taken is
//! [`Accepted::Delivered`] when every row the sink holds is written by
//! the time it returns (its rows ended whole blocks), else
//! [`Accepted::Pending`]: [`Sink::poll`] reports rows in
//! [`Progress::delivered_records`] (with their binary frames' bytes in
//! [`Progress::delivered_bytes`]) as their blocks are written, by a later
//! batch, [`tick`](Sink::tick), [`write_out`](Sink::write_out),
//! [`flush`](Sink::flush), [`drain`](Sink::drain) (which retries a
//! retryable failure until its deadline) or the close. Rows still not
//! written when the sink closes (the disk full to the end) are given up
//! on: the close returns the write error, says on stderr how many, and
//! the next poll reports them in [`Progress::failed_records`] (the
//! logger's `dropped_sink`). So every record counted written is in a
//! segment file: a sealed one, or the open one a failed close leaves,
//! which readers scan and the next open seals.
//!
//! # Retention
//!
//! After each seal, whole sealed segments are removed, oldest first, while
//! the archive's sealed bytes exceed `retention_bytes`, or while a
//! segment's newest record is older than `retention_age_ms` before the
//! newest record written (event time, so replaying old captures keeps
//! them).
//!
//! # Reading
//!
//! [`ArchiveReader`] yields every record in event-time order, whatever
//! its type (for `dplog-cat` and exports); [`Segment`] reads one
//! segment's blocks, [`reader::merge`] merges blocks by time (for
//! lookups, `dplog-query`).
//!
//! One writer per directory: [`ArchiveSink::open`] holds an exclusive
//! `flock(2)` on `<dir>/.archive.lock`.

mod check;
pub mod counted;
pub mod encode;
pub mod format;
mod frame;
pub mod keyed;
mod options;
mod pairs;
pub mod reader;
mod recover;
pub mod summary;

pub use options::{ArchiveCounters, ArchiveSinkOptions};
use pairs::{index_tail, KeyPairs};
use recover::{lock_dir, recover, sync_dir};

#[cfg(feature = "config")]
pub mod config;
#[cfg(feature = "config")]
pub use config::ArchiveSinkConfig;

pub use reader::{list_segments, ArchiveReader, Problem, Segment, SegmentFile};

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dplog_core::schema::{FieldDef, Schema};
use dplog_core::{Accepted, Progress, Sink, SinkError};
use dplog_formatters::TscCalibration;

use encode::Column;
use format::{BlockMeta, Footer, KIND_CALIBRATION, KIND_DATA, KIND_SCHEMA};

fn add(a: &AtomicU64, n: u64) {
    // Relaxed: a counter; see ArchiveCounters::named.
    a.fetch_add(n, Ordering::Relaxed);
}

/// Frame kinds of the binary format the sink takes: file header, schema,
/// record, TSC calibration, drop report (the format's own list).
pub use dplog_formatters::binary::FRAME_KINDS;

/// A schema the stream declared, with what blocks of it need.
#[derive(Debug)]
struct SchemaEntry {
    schema: Schema,
    /// Its `S` frame payload (written as the segment's schema block).
    raw: Vec<u8>,
    cols: Vec<Column>,
    key: Vec<FieldDef>,
    /// Its key tuple fields for the segment summary: the `summary`
    /// fields it has (empty: its rows are not summarized).
    tuple: Vec<FieldDef>,
    /// What the segment summary says of the type.
    ty: summary::TypeEntry,
    /// It has a TSC-typed field: its blocks hold rows of one calibration
    /// and follow that calibration's block.
    tsc: bool,
}

/// Records of one schema waiting for their block.
#[derive(Debug)]
struct Buffer {
    entry: Arc<SchemaEntry>,
    recs: Vec<u8>,
    rows: usize,
    min: u64,
    max: u64,
    since: Instant,
    /// Its rows are in event-time order (each time at least the one
    /// before, the first at least 0).
    in_order: bool,
    /// The last row's event time.
    last: u64,
}

impl Buffer {
    /// Empties it for the next block's rows.
    fn clear(&mut self) {
        self.recs.clear();
        self.rows = 0;
        self.min = u64::MAX;
        self.max = 0;
        self.in_order = true;
        self.last = 0;
    }
}

/// A block ready to be written.
#[derive(Debug)]
struct Encoded {
    entry: Arc<SchemaEntry>,
    /// The stream's schema table when the block was queued: the segment
    /// it lands in declares these, not a later table that may give one
    /// of its ids another layout.
    table: Vec<Arc<SchemaEntry>>,
    /// The calibration of its rows' TSC fields (`None`: it has none).
    cal: Option<TscCalibration>,
    meta: BlockMeta,
    frame: Vec<u8>,
    /// The key hashes of its rows, most duplicates removed (empty: no
    /// indexed field); the seal removes the rest.
    keys: Vec<u32>,
    /// The tuple hashes of its rows for the summary, each once (empty:
    /// its type has no tuple fields).
    tuples: Vec<u64>,
}

/// Slots of the filter that drops a block's repeated key hashes.
const KEY_FILTER: usize = 4096;

#[derive(Debug)]
enum Op {
    Block(Encoded),
    Seal,
}

/// The open segment file.
#[derive(Debug)]
struct OpenSeg {
    file: File,
    seq: u64,
    path: PathBuf,
    offset: u64,
    blocks: Vec<BlockMeta>,
    declared: Vec<u16>,
    /// The calibration of its last calibration block (`None`: none yet).
    cal: Option<TscCalibration>,
    /// (key hash, block index) of every indexed row written.
    pairs: KeyPairs,
    /// Tuple hashes of its rows, for its summary entry.
    tuples: Vec<u64>,
    /// The record types of its data blocks, for its summary entry.
    types: Vec<summary::TypeEntry>,
    dirty: bool,
    last_sync: Instant,
}

/// Writes records of the binary format into an archive directory; see
/// the [module docs](self).
#[derive(Debug)]
pub struct ArchiveSink {
    dir: PathBuf,
    opts: ArchiveSinkOptions,
    _lock: File,
    schemas: Vec<Arc<SchemaEntry>>,
    buffers: Vec<Buffer>,
    ops: VecDeque<Op>,
    open: Option<OpenSeg>,
    next_seq: u64,
    slice: Option<u64>,
    /// The event times (ns) of slice `slice`: `[start, end)`.
    slice_ns: (u64, u64),
    logical_bytes: u64,
    newest: u64,
    counters: Arc<ArchiveCounters>,
    closed: bool,
    /// Block encoding buffers and zstd context, kept across blocks.
    enc: format::BlockEncoder,
    /// (time, row) of a block whose rows are out of time order.
    order: Vec<(u64, u32)>,
    /// A block's rows in time order, swapped with its buffer's.
    sorted: Vec<u8>,
    /// Per slot the last key hash seen in the block being encoded, its
    /// generation (`key_gen`) in the high half.
    key_filter: Vec<u64>,
    key_gen: u32,
    /// The calibration in force: the stream's last `C` frame's (the
    /// identity before any, as the binary decoder has it).
    cal: TscCalibration,
    /// `index` was checked against the record types served
    /// ([`ArchiveSink::open_for`], or the schemas declared before the
    /// stream's first record).
    index_checked: bool,
    /// The seal of the segment being written, once one was opened.
    sealer: Option<crate::seal::Sealer>,
    /// The newest sealed segment with a seal when the sink opened: the
    /// chain the first new segment continues.
    last_sealed: Option<PathBuf>,
    /// The seal's anchor until there is a sealer to take it.
    anchor: Option<crate::seal::Anchor>,
    /// Outcomes of the rows taken since the last [`Sink::poll`]: rows
    /// whose block was written, and rows given up on.
    progress: Progress,
}

impl ArchiveSink {
    /// Opens the archive in existing directory `dir`: takes its lock,
    /// recovers any open segment a crash left (see the module docs) and
    /// numbers new segments after the last one.
    ///
    /// Errors: `InvalidInput` for settings out of range; the lock is
    /// held by another writer; the directory or a segment cannot be read
    /// or written (recovery).
    pub fn open(dir: &Path, opts: ArchiveSinkOptions) -> io::Result<ArchiveSink> {
        opts.check()?;
        if let Err(e) = std::fs::read_dir(dir) {
            return Err(io::Error::new(
                e.kind(),
                format!("archive directory {}: {e}", dir.display()),
            ));
        }
        if let Some(so) = &opts.seal {
            // A missing or unprotected key refuses the sink first.
            crate::seal::load_signing_key(&so.key_file)?;
        }
        let lock = lock_dir(dir)?;
        let opts_level = opts.zstd_level;
        let counters = Arc::new(ArchiveCounters::default());
        recover::clean_rewrites(dir)?;
        let mut next_seq = 0;
        for sf in list_segments(dir)? {
            next_seq = next_seq.max(sf.seq + 1);
            if sf.range.is_none() {
                let torn = recover(dir, &sf.path, sf.seq, &opts).map_err(|e| {
                    io::Error::new(e.kind(), format!("recovering {}: {e}", sf.path.display()))
                })?;
                add(&counters.segments_recovered, 1);
                add(&counters.torn_blocks, torn);
            }
        }
        let last_sealed = list_segments(dir)?
            .into_iter()
            .rev()
            .find(|s| s.range.is_some() && crate::seal::seal_path(&s.path).exists())
            .map(|s| s.path);
        Ok(ArchiveSink {
            dir: dir.to_path_buf(),
            opts,
            _lock: lock,
            schemas: Vec::new(),
            buffers: Vec::new(),
            ops: VecDeque::new(),
            open: None,
            next_seq,
            slice: None,
            slice_ns: (0, 0),
            logical_bytes: 0,
            newest: 0,
            counters,
            closed: false,
            enc: format::BlockEncoder::new(opts_level)?,
            order: Vec::new(),
            sorted: Vec::new(),
            key_filter: Vec::new(),
            key_gen: 0,
            cal: TscCalibration::IDENTITY,
            index_checked: false,
            sealer: None,
            last_sealed,
            anchor: None,
            progress: Progress::default(),
        })
    }

    /// [`ArchiveSink::open`] for records of `schemas` (the record types
    /// the stream will declare): refuses an `index` that names a field
    /// none of them has ([`ArchiveSinkOptions::check_index`]) before
    /// opening anything. A sink opened with [`ArchiveSink::open`] checks
    /// the same against the schemas its stream declares before the first
    /// record, and refuses every batch (permanent error, the same
    /// message) when it fails.
    ///
    /// Errors: as [`ArchiveSink::open`]; `InvalidInput` for the index.
    pub fn open_for(
        dir: &Path,
        opts: ArchiveSinkOptions,
        schemas: &[&Schema],
    ) -> io::Result<ArchiveSink> {
        opts.check()?;
        opts.check_index(schemas)?;
        let mut sink = Self::open(dir, opts)?;
        sink.index_checked = true;
        Ok(sink)
    }

    /// The sink's counters.
    pub fn counters(&self) -> Arc<ArchiveCounters> {
        self.counters.clone()
    }

    /// Sends every head the seal signs also to `sink`, another host's
    /// syslog receiver ([`Sealer::set_anchor`](crate::seal::Sealer::set_anchor)),
    /// through every segment; failures are counted in
    /// [`ArchiveCounters::anchor_failed`].
    ///
    /// # Errors
    /// `InvalidInput` when the sink has no seal.
    pub fn set_seal_anchor(&mut self, sink: Box<dyn Sink>) -> io::Result<()> {
        self.anchor_to(sink, None)
    }

    /// Sends every head the seal signs also to `sink` as a
    /// [`SealHead`](crate::seal::anchor::SealHead) record in `formatter`'s
    /// format (a Kafka topic, a ClickHouse table, ...;
    /// [`Sealer::set_anchor_records`](crate::seal::Sealer::set_anchor_records));
    /// failures are counted in [`ArchiveCounters::anchor_failed`].
    ///
    /// # Errors
    /// `InvalidInput` when the sink has no seal.
    pub fn set_seal_anchor_records(
        &mut self,
        sink: Box<dyn Sink>,
        formatter: dplog_formatters::SchemaFormatter,
    ) -> io::Result<()> {
        self.anchor_to(sink, Some(formatter))
    }

    /// The anchor of [`set_seal_anchor`](Self::set_seal_anchor) (`records`
    /// `None`) or [`set_seal_anchor_records`](Self::set_seal_anchor_records).
    pub(crate) fn anchor_to(
        &mut self,
        sink: Box<dyn Sink>,
        records: Option<dplog_formatters::SchemaFormatter>,
    ) -> io::Result<()> {
        let counters = self.counters.clone();
        crate::seal::Sealer::place_anchor(
            self.opts.seal.is_some(),
            &self.dir,
            self.sealer.as_mut(),
            &mut self.anchor,
            sink,
            records,
            Box::new(move |_| add(&counters.anchor_failed, 1)),
        )
    }

    fn declare(&mut self, raw: &[u8]) -> Result<(), SinkError> {
        let s = check::parse_schema(raw)?;
        if let Some(k) = self.schemas.iter().position(|e| e.schema.id() == s.id()) {
            if self.schemas[k].raw == raw {
                return Ok(());
            }
            // One schema per id in a segment: another layout under a known
            // id starts a new one.
            self.roll();
            self.schemas.remove(k);
        }
        let key = format::index_fields(&s, &self.opts.index)
            .into_iter()
            .cloned()
            .collect();
        let cols = format::schema_columns(&s);
        let tsc = format::has_tsc(&s);
        let tuple = format::tuple_fields(&s, &self.opts.summary)
            .into_iter()
            .cloned()
            .collect();
        let ty = summary::type_entry(&s, &self.opts.summary);
        self.schemas.push(Arc::new(SchemaEntry {
            schema: s,
            raw: raw.to_vec(),
            cols,
            key,
            tuple,
            ty,
            tsc,
        }));
        Ok(())
    }

    /// A `C` frame: the calibration of the records after it. A change
    /// closes the partial blocks of the record types with a TSC field
    /// (their rows so far keep the calibration they came with).
    fn calibrate(&mut self, body: &[u8]) -> Result<(), SinkError> {
        let cal = format::parse_calibration(body).map_err(SinkError::Permanent)?;
        if cal == self.cal {
            return Ok(());
        }
        for k in 0..self.buffers.len() {
            if self.buffers[k].entry.tsc {
                self.encode(k);
            }
        }
        self.cal = cal;
        Ok(())
    }

    fn add_record(&mut self, rec: &[u8]) -> Result<(), SinkError> {
        let sid = check::record_schema_id(rec);
        // The buffer of the schema; a buffer without rows takes the
        // schema's current declaration.
        let k = match self.buffers.iter().position(|b| b.entry.schema.id() == sid) {
            Some(k) if self.buffers[k].rows > 0 => k,
            found => {
                let Some(entry) = self.schemas.iter().find(|e| e.schema.id() == sid) else {
                    return Err(check::undeclared(sid));
                };
                let entry = entry.clone();
                match found {
                    Some(k) => {
                        self.buffers[k].entry = entry;
                        k
                    }
                    None => {
                        self.buffers.push(Buffer {
                            entry,
                            recs: Vec::new(),
                            rows: 0,
                            min: u64::MAX,
                            max: 0,
                            since: Instant::now(),
                            in_order: true,
                            last: 0,
                        });
                        self.buffers.len() - 1
                    }
                }
            }
        };
        let schema = &self.buffers[k].entry.schema;
        check::check_size(schema, rec.len())?;
        let t = format::event_time(schema, rec).unwrap_or_else(dplog_core::tsc::realtime_ns);
        let in_slice = self.slice.is_some() && (self.slice_ns.0..self.slice_ns.1).contains(&t);
        if let (Some(iv), false) = (self.opts.segment_interval_ms, in_slice) {
            let span = iv.saturating_mul(1_000_000).max(1);
            let s = t / span;
            match self.slice {
                // Forward into a new slice, or far back (a record more
                // than one slice late starts its own segment).
                Some(cur) if s > cur || s + 1 < cur => {
                    self.roll();
                    self.slice = Some(s);
                }
                None => self.slice = Some(s),
                _ => {}
            }
            let cur = self.slice.unwrap_or(s);
            self.slice_ns = (cur * span, (cur * span).saturating_add(span));
        }
        self.newest = self.newest.max(t);
        let b = &mut self.buffers[k];
        if b.rows == 0 {
            b.since = Instant::now();
        }
        b.recs.extend_from_slice(rec);
        b.rows += 1;
        b.min = b.min.min(t);
        b.max = b.max.max(t);
        b.in_order &= t >= b.last;
        b.last = t;
        if b.rows >= self.opts.block_rows {
            self.encode(k);
            if self.logical_bytes >= self.opts.segment_bytes {
                self.roll();
            }
        }
        Ok(())
    }

    /// Turns buffer `k` into a queued block. A block that cannot be
    /// compressed (zstd does not fail on valid input) is not queued: its
    /// rows are reported failed, the error counted in `write_errors` and
    /// said on stderr.
    fn encode(&mut self, k: usize) {
        let b = &mut self.buffers[k];
        if b.rows == 0 {
            return;
        }
        let e = b.entry.clone();
        // Rows in event-time order (stable: equal times keep the order
        // written), so readers merge blocks by time.
        let size = e.schema.size();
        if let Some(ti) = e.schema.meta().event_time {
            let tf = &e.schema.fields()[ti];
            if !b.in_order {
                self.order.clear();
                self.order.extend(
                    b.recs
                        .chunks_exact(size)
                        .enumerate()
                        .map(|(i, r)| (tf.read_uint(r), i as u32)),
                );
                // (time, row) pairs are distinct: sorted unstably they
                // still keep equal times in the order written.
                self.order.sort_unstable();
                self.sorted.clear();
                for &(_, i) in &self.order {
                    let at = i as usize * size;
                    self.sorted.extend_from_slice(&b.recs[at..at + size]);
                }
                std::mem::swap(&mut b.recs, &mut self.sorted);
            }
        }
        let frame = match self
            .enc
            .data_frame(&e.schema, &e.cols, &b.recs, b.rows, b.min, b.max)
        {
            Ok(f) => f,
            Err(err) => {
                add(&self.counters.write_errors, 1);
                eprintln!(
                    "dplog: archive {}: a block of {} {} record(s) cannot be compressed ({err}); \
                     they are dropped",
                    self.dir.display(),
                    b.rows,
                    e.schema.name()
                );
                self.progress.failed_records += b.rows as u64;
                b.clear();
                return;
            }
        };
        let mut keys: Vec<u32> = Vec::new();
        if !e.key.is_empty() {
            let key: Vec<&FieldDef> = e.key.iter().collect();
            if self.key_filter.is_empty() {
                self.key_filter = vec![0; KEY_FILTER];
            }
            // A new generation per block (never 0, the filter's initial
            // value): a hash is kept unless its slot holds it from this
            // block.
            self.key_gen = self.key_gen.wrapping_add(1);
            if self.key_gen == 0 {
                self.key_filter.fill(0);
                self.key_gen = 1;
            }
            let gen = u64::from(self.key_gen) << 32;
            let per_field = format::index_per_field(&self.opts.index);
            keys.reserve(b.rows);
            let filter = &mut self.key_filter;
            let hashes = format::RecordKeys::new(&key, per_field);
            for r in b.recs.chunks_exact(size) {
                hashes.each(r, |h| {
                    let slot = &mut filter[h as usize % KEY_FILTER];
                    if *slot != gen | u64::from(h) {
                        *slot = gen | u64::from(h);
                        keys.push(h);
                    }
                });
            }
        }
        let mut tuples = Vec::new();
        if !e.tuple.is_empty() {
            let fields: Vec<&FieldDef> = e.tuple.iter().collect();
            let id = e.schema.id();
            tuples.extend(
                b.recs
                    .chunks_exact(size)
                    .map(|r| format::record_tuple_hash(id, &fields, r)),
            );
            // Opens and closes of one tuple are often in one block.
            tuples.sort_unstable();
            tuples.dedup();
        }
        let meta = BlockMeta {
            offset: 0,
            len: frame.len() as u32,
            kind: KIND_DATA,
            schema_id: e.schema.id(),
            rows: b.rows as u32,
            min: b.min,
            max: b.max,
        };
        self.logical_bytes += frame.len() as u64;
        b.clear();
        let cal = e.tsc.then_some(self.cal);
        self.ops.push_back(Op::Block(Encoded {
            table: self.schemas.clone(),
            entry: e,
            cal,
            meta,
            frame,
            keys,
            tuples,
        }));
    }

    /// Ends the logical segment: every buffer to a block, then a seal.
    fn roll(&mut self) {
        for k in 0..self.buffers.len() {
            self.encode(k);
        }
        self.ops.push_back(Op::Seal);
        self.slice = None;
        self.logical_bytes = 0;
    }

    fn open_segment(&mut self) -> io::Result<&mut OpenSeg> {
        if self.open.is_none() {
            let seq = self.next_seq;
            let path = self.dir.join(format::open_name(seq));
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o640)
                .custom_flags(libc::O_CLOEXEC)
                .open(&path)?;
            // The header, and the file's name durable in the directory
            // (the blocks fsynced later are found after a power loss).
            if let Err(e) = file
                .write_all_at(&format::segment_header(), 0)
                .and_then(|_| sync_dir(&self.dir))
            {
                drop(file);
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
            if let Some(so) = &self.opts.seal {
                // The segment's seal, continuing the chain: the previous
                // segment's in this run, or the newest sealed one's.
                let started = match (self.sealer.as_mut(), &self.last_sealed) {
                    (Some(s), _) => s.next_file(&path),
                    (None, prev) => match prev {
                        Some(prev) => crate::seal::Sealer::open_after(prev, &path, 0, so),
                        None => crate::seal::Sealer::open(&path, 0, so),
                    }
                    .map(|mut s| {
                        s.adopt_anchor(&mut self.anchor);
                        self.sealer = Some(s);
                    }),
                };
                let sealed = started.and_then(|()| {
                    let s = self.sealer.as_mut().expect("started above");
                    s.sealed(0, &format::segment_header())
                });
                if let Err(e) = sealed {
                    drop(file);
                    let _ = std::fs::remove_file(&path);
                    let _ = std::fs::remove_file(crate::seal::seal_path(&path));
                    return Err(e);
                }
            }
            self.next_seq += 1;
            self.open = Some(OpenSeg {
                file,
                seq,
                path,
                offset: format::SEGMENT_HEADER as u64,
                blocks: Vec::new(),
                declared: Vec::new(),
                cal: None,
                pairs: KeyPairs::default(),
                tuples: Vec::new(),
                types: Vec::new(),
                dirty: true,
                last_sync: Instant::now(),
            });
        }
        Ok(self.open.as_mut().expect("just opened"))
    }

    /// Writes `frame` at the open segment's end; on failure cuts the file
    /// back to its last whole block.
    fn append(
        seg: &mut OpenSeg,
        frame: &[u8],
        counters: &ArchiveCounters,
        sealer: &mut Option<crate::seal::Sealer>,
    ) -> io::Result<u64> {
        let at = seg.offset;
        if let Err(e) = seg.file.write_all_at(frame, at) {
            add(&counters.write_errors, 1);
            let _ = seg.file.set_len(at);
            return Err(e);
        }
        if let Some(s) = sealer.as_mut() {
            // After the bytes: a crash between leaves them unsealed.
            if s.sealed(at, frame).is_err() {
                add(&counters.write_errors, 1);
            }
        }
        seg.offset += frame.len() as u64;
        seg.dirty = true;
        add(&counters.bytes, frame.len() as u64);
        Ok(at)
    }

    /// Writes the queued blocks and seals, in order; what fails stays
    /// queued.
    fn drain_ops(&mut self) -> io::Result<()> {
        while let Some(op) = self.ops.front() {
            match op {
                Op::Block(enc) => {
                    // Every schema of the stream, in the stream's order,
                    // and the block's own: a segment read alone formats
                    // its records with the logger's whole schema table
                    // (e.g. one CSV header over every record type, in
                    // the logger's column order).
                    let mut entries = enc.table.clone();
                    entries.push(enc.entry.clone());
                    let counters = self.counters.clone();
                    self.open_segment()?;
                    let seg = self.open.as_mut().expect("just opened");
                    let sealer = &mut self.sealer;
                    for entry in entries {
                        if seg.declared.contains(&entry.schema.id()) {
                            continue;
                        }
                        let f = format::block_frame(KIND_SCHEMA, &entry.raw);
                        let at = Self::append(seg, &f, &counters, sealer)?;
                        seg.blocks.push(BlockMeta {
                            offset: at,
                            len: f.len() as u32,
                            kind: KIND_SCHEMA,
                            schema_id: entry.schema.id(),
                            rows: 0,
                            min: 0,
                            max: 0,
                        });
                        seg.declared.push(entry.schema.id());
                    }
                    let Some(Op::Block(enc)) = self.ops.front() else {
                        unreachable!("front is a block")
                    };
                    let seg = self.open.as_mut().expect("opened above");
                    let sealer = &mut self.sealer;
                    // Its calibration, unless the segment's last one is
                    // it: the first block with TSC fields of every
                    // segment has one before it (a segment reads alone).
                    if let Some(cal) = enc.cal.filter(|c| seg.cal != Some(*c)) {
                        let f =
                            format::block_frame(KIND_CALIBRATION, &format::calibration_body(&cal));
                        let at = Self::append(seg, &f, &counters, sealer)?;
                        seg.blocks.push(BlockMeta {
                            offset: at,
                            len: f.len() as u32,
                            kind: KIND_CALIBRATION,
                            schema_id: 0,
                            rows: 0,
                            min: 0,
                            max: 0,
                        });
                        seg.cal = Some(cal);
                    }
                    let at = Self::append(seg, &enc.frame, &counters, sealer)?;
                    let mut meta = enc.meta.clone();
                    meta.offset = at;
                    add(&counters.blocks, 1);
                    add(&counters.rows, meta.rows as u64);
                    // Written: its rows count as delivered, each with the
                    // bytes of its binary frame.
                    let rows = u64::from(meta.rows);
                    self.progress.delivered_records += rows;
                    self.progress.delivered_bytes += rows * (4 + enc.entry.schema.size() as u64);
                    let bi = seg.blocks.len() as u32;
                    for &h in &enc.keys {
                        seg.pairs.push(h, bi);
                    }
                    seg.tuples.extend_from_slice(&enc.tuples);
                    if !seg.types.contains(&enc.entry.ty) {
                        seg.types.push(enc.entry.ty.clone());
                    }
                    seg.blocks.push(meta);
                    self.ops.pop_front();
                }
                Op::Seal => {
                    self.seal()?;
                    self.ops.pop_front();
                }
            }
        }
        Ok(())
    }

    /// Footer, fsync, rename, directory fsync; then retention.
    fn seal(&mut self) -> io::Result<()> {
        let Some(seg) = self.open.as_mut() else {
            return Ok(());
        };
        let data = seg.blocks.iter().filter(|b| b.kind == KIND_DATA);
        let min = data.clone().map(|b| b.min).min().unwrap_or(0);
        let max = data.clone().map(|b| b.max).max().unwrap_or(0);
        let rows = data.map(|b| b.rows as u64).sum();
        let keyed = self.opts.format_version >= format::VERSION_KEYED
            && self.sealer.is_none()
            && !self.opts.index.is_empty()
            && !format::index_per_field(&self.opts.index);
        if keyed {
            let parts = keyed::OpenParts {
                dir: &self.dir,
                file: &seg.file,
                path: &seg.path,
                seq: seg.seq,
                blocks: &seg.blocks,
                min,
                max,
                rows,
                max_lifetime_ms: self.opts.max_lifetime_ms,
                index: &self.opts.index,
                block_rows: self.opts.block_rows,
            };
            match keyed::rewrite(&parts, &mut self.enc) {
                Ok(Some((_, n))) => {
                    add(&self.counters.bytes, n);
                    return self.sealed(min, max);
                }
                Ok(None) => {}
                Err(e) => {
                    // Sealed as version 3 below: nothing is lost.
                    eprintln!(
                        "dplog: archive {}: segment {} not rewritten sorted by key (sealed as \
                         version {}): {e}",
                        self.dir.display(),
                        seg.seq,
                        format::VERSION
                    );
                    add(&self.counters.write_errors, 1);
                }
            }
        }
        let end = seg.offset;
        let (index, mut bytes, index_bits) = index_tail(&mut seg.pairs, end);
        let footer = Footer {
            seq: seg.seq,
            min,
            max,
            rows,
            max_lifetime_ms: self.opts.max_lifetime_ms,
            index_fields: self.opts.index.clone(),
            blocks: seg.blocks.clone(),
            index,
            index_bits,
            key_ranges: Vec::new(),
        };
        bytes.extend_from_slice(&footer.to_bytes());
        if let Err(e) = seg
            .file
            .write_all_at(&bytes, end)
            .and_then(|_| seg.file.sync_all())
        {
            add(&self.counters.write_errors, 1);
            let _ = seg.file.set_len(end);
            return Err(e);
        }
        if let Some(s) = self.sealer.as_mut() {
            if s.sealed(end, &bytes).is_err() {
                add(&self.counters.write_errors, 1);
            }
        }
        let sealed = self.dir.join(format::sealed_name(seg.seq, min, max));
        std::fs::rename(&seg.path, &sealed)?;
        if let Some(s) = self.sealer.as_mut() {
            // Signed, synced and renamed with its segment.
            if s.finish_file(&sealed).is_err() {
                add(&self.counters.write_errors, 1);
            }
        }
        add(&self.counters.bytes, bytes.len() as u64);
        self.sealed(min, max)
    }

    /// After the open segment's rename to its sealed name (events
    /// `min..=max`): the directory's fsync, its summary entry, retention.
    fn sealed(&mut self, min: u64, max: u64) -> io::Result<()> {
        let Some(seg) = self.open.as_mut() else {
            return Ok(());
        };
        add(&self.counters.segments_sealed, 1);
        let (seq, mut tuples, types) = (
            seg.seq,
            std::mem::take(&mut seg.tuples),
            std::mem::take(&mut seg.types),
        );
        self.open = None;
        // Renamed: the segment is sealed whatever follows. A directory
        // that cannot be synced is counted; the next seal syncs it again.
        if sync_dir(&self.dir).is_err() {
            add(&self.counters.write_errors, 1);
        }
        // Its summary entry, once it is sealed for good: without one
        // (a crash or an error here) lookups open it as before.
        let day = summary::day_of(min);
        if !self.opts.summary.is_empty() {
            match summary::append(&self.dir, day, seq, (min, max), &types, &mut tuples) {
                Ok(_) => add(&self.counters.summaries, 1),
                Err(e) => {
                    eprintln!(
                        "dplog: archive {}: segment {seq} sealed without its summary entry \
                         (lookups read it whole): {e}",
                        self.dir.display()
                    );
                    add(&self.counters.write_errors, 1);
                }
            }
        }
        self.retain();
        Ok(())
    }

    /// Removes whole sealed segments past the retention limits.
    fn retain(&mut self) {
        if self.opts.retention_age_ms.is_none() && self.opts.retention_bytes.is_none() {
            return;
        }
        let Ok(segs) = list_segments(&self.dir) else {
            return;
        };
        let sealed: Vec<(SegmentFile, u64)> = segs
            .into_iter()
            .filter(|s| s.range.is_some())
            .map(|s| {
                let len = std::fs::metadata(&s.path).map_or(0, |m| m.len());
                (s, len)
            })
            .collect();
        let mut total: u64 = sealed.iter().map(|(_, l)| l).sum();
        let cutoff = self
            .opts
            .retention_age_ms
            .map(|a| self.newest.saturating_sub(a.saturating_mul(1_000_000)));
        let mut removed = false;
        for (s, len) in &sealed {
            let max = s.range.map_or(0, |r| r.1);
            let too_old = cutoff.is_some_and(|c| max < c);
            let too_big = self.opts.retention_bytes.is_some_and(|b| total > b);
            if !too_old && !too_big {
                break;
            }
            if std::fs::remove_file(&s.path).is_ok() {
                let _ = std::fs::remove_file(crate::seal::seal_path(&s.path));
                total -= len;
                removed = true;
                add(&self.counters.segments_removed, 1);
            }
        }
        if removed {
            // Summaries of days no sealed segment starts on any more.
            let first_day = list_segments(&self.dir)
                .ok()
                .and_then(|l| l.iter().filter_map(|s| s.range).map(|r| r.0).min())
                .map(summary::day_of);
            if let (Some(first), Ok(rd)) = (first_day, std::fs::read_dir(&self.dir)) {
                for e in rd.flatten() {
                    let name = e.file_name();
                    let day = name.to_str().and_then(summary::parse_summary_name);
                    if day.is_some_and(|d| d < first) {
                        let _ = std::fs::remove_file(e.path());
                    }
                }
            }
            let _ = sync_dir(&self.dir);
        }
    }

    fn sync(&mut self, force: bool) -> io::Result<()> {
        if let Some(seg) = self.open.as_mut() {
            let due = self
                .opts
                .fsync_interval_ms
                .is_some_and(|ms| seg.last_sync.elapsed() >= Duration::from_millis(ms));
            if seg.dirty && (force || due) {
                seg.file.sync_data()?;
                if let Some(s) = self.sealer.as_mut() {
                    s.sync()?;
                }
                seg.dirty = false;
                seg.last_sync = Instant::now();
            }
        }
        Ok(())
    }

    /// Rows taken and neither written nor given up on: in the buffers
    /// and in the queued blocks.
    fn held_rows(&self) -> u64 {
        let buffered: u64 = self.buffers.iter().map(|b| b.rows as u64).sum();
        let queued: u64 = self
            .ops
            .iter()
            .map(|op| match op {
                Op::Block(enc) => u64::from(enc.meta.rows),
                Op::Seal => 0,
            })
            .sum();
        buffered + queued
    }

    /// Gives up on every row not written (at close, the write failing
    /// with `e`): they are reported failed ([`Progress::failed_records`])
    /// and said on stderr; the queued blocks and seals are dropped. The
    /// open segment keeps its whole blocks, sealed by the next
    /// [`ArchiveSink::open`].
    fn give_up(&mut self, e: &SinkError) {
        let rows = self.held_rows();
        if rows > 0 {
            eprintln!(
                "dplog: archive {}: {rows} record(s) taken and not written when the sink \
                 closed: {}; they are dropped",
                self.dir.display(),
                e.io()
            );
        }
        self.progress.failed_records += rows;
        for b in &mut self.buffers {
            b.clear();
        }
        self.ops.clear();
    }

    fn closed_error() -> SinkError {
        SinkError::Permanent(io::Error::new(
            io::ErrorKind::BrokenPipe,
            "archive sink is closed",
        ))
    }
}

impl Sink for ArchiveSink {
    /// Takes the batch whole, or refuses it whole (every frame is checked
    /// first; see the module docs' delivery accounting); blocks queued by
    /// an earlier failure are written first, and until they are the batch
    /// is refused with their (retryable) error.
    ///
    /// `Ok(Accepted::Delivered)` when every row the sink holds is in the
    /// open segment when it returns (the batch's rows filled whole
    /// blocks); else `Ok(Accepted::Pending)`: its rows are reported by
    /// [`poll`](Sink::poll) as their blocks are written (delivered, with
    /// their binary frames' bytes), or given up on at close (failed).
    fn write_batch(&mut self, batch: &[u8]) -> Result<Accepted, SinkError> {
        if self.closed {
            return Err(Self::closed_error());
        }
        self.drain_ops().map_err(SinkError::classify)?;
        self.check_batch(batch)?;
        let failed_before = self.progress.failed_records;
        let (mut rows, mut row_bytes) = (0u64, 0u64);
        // `check_batch` refused every frame the calls below refuse, so
        // none fails with part of the batch taken.
        let mut p = 0;
        while p < batch.len() {
            let len = u16::from_le_bytes([batch[p + 2], batch[p + 3]]) as usize;
            let body = &batch[p + 4..p + 4 + len];
            match batch[p] {
                b'S' => self.declare(body)?,
                b'R' => {
                    self.add_record(body)?;
                    rows += 1;
                    row_bytes += 4 + len as u64;
                }
                b'C' => self.calibrate(body)?,
                // `H`: a new stream, its schemas follow as `S` frames (the
                // calibration carries over, as in the binary format); `D`
                // (a drop report) is not stored (see the module docs).
                _ => {}
            }
            p += 4 + len;
        }
        // `check_batch` checked `index` before the stream's first record.
        self.index_checked |= rows > 0;
        // The batch is taken: a write error now leaves the blocks queued
        // for the next call, which reports it.
        let _ = self.drain_ops();
        if self.held_rows() == 0 && self.progress.failed_records == failed_before {
            // Every row taken is written, this batch's in this call: the
            // runtime books them with the batch, not through `poll`.
            self.progress.delivered_records = self.progress.delivered_records.saturating_sub(rows);
            self.progress.delivered_bytes = self.progress.delivered_bytes.saturating_sub(row_bytes);
            return Ok(Accepted::Delivered);
        }
        Ok(Accepted::Pending)
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        self.write_out()?;
        if self.closed {
            return Ok(());
        }
        self.sync(true).map_err(SinkError::classify)
    }

    /// Every partial block encoded and written to the open segment
    /// (`pwrite`), with the seals queued before them; no fsync (the
    /// segment is fsynced every `fsync_interval_ms` and when sealed).
    /// Each call ends the partial blocks: a caller that writes out often
    /// gets blocks of fewer rows.
    fn write_out(&mut self) -> Result<(), SinkError> {
        if self.closed {
            return Ok(());
        }
        for k in 0..self.buffers.len() {
            self.encode(k);
        }
        self.drain_ops().map_err(SinkError::classify)
    }

    fn tick(&mut self, _now: Instant) -> Result<(), SinkError> {
        if self.closed {
            return Ok(());
        }
        let age = Duration::from_millis(self.opts.block_max_age_ms);
        for k in 0..self.buffers.len() {
            if self.buffers[k].rows > 0 && self.buffers[k].since.elapsed() >= age {
                self.encode(k);
            }
        }
        self.drain_ops().map_err(SinkError::classify)?;
        if let Some(s) = self.sealer.as_mut() {
            if s.tick(Instant::now()).is_err() {
                add(&self.counters.write_errors, 1);
            }
        }
        self.sync(false).map_err(SinkError::classify)
    }

    fn poll(&mut self) -> Progress {
        std::mem::take(&mut self.progress)
    }

    /// [`flush`](Sink::flush), tried again while it fails retryably (a
    /// full disk), every 10 ms doubling to 200 ms, until `deadline`.
    ///
    /// Errors: the last flush's, at the deadline or when it is permanent;
    /// what is not written stays held (for [`close`](Sink::close)).
    fn drain(&mut self, deadline: Instant) -> Result<(), SinkError> {
        let mut backoff = Duration::from_millis(10);
        loop {
            match self.flush() {
                Err(e) if e.is_retryable() => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(e);
                    }
                    std::thread::sleep(backoff.min(deadline - now));
                    backoff = (backoff * 2).min(Duration::from_millis(200));
                }
                r => return r,
            }
        }
    }

    /// Ends the segment and writes what the sink holds; rows that cannot
    /// be written then are given up on: reported failed by the next
    /// [`poll`](Sink::poll) and said on stderr, and the write's error is
    /// returned. The open segment left by such a failure keeps its whole
    /// blocks and is sealed by the next [`ArchiveSink::open`].
    fn close(&mut self) -> Result<(), SinkError> {
        if self.closed {
            return Ok(());
        }
        self.roll();
        let written = self.drain_ops().map_err(SinkError::classify);
        if let Err(e) = &written {
            self.give_up(e);
        }
        if let Some(a) = self.anchor.take() {
            // No segment was opened: no head to send.
            a.finish();
        }
        if let Some(s) = self.sealer.as_mut() {
            s.close().map_err(SinkError::classify)?;
        }
        self.closed = true;
        written
    }

    fn describe(&self) -> String {
        format!("archive {}", self.dir.display())
    }

    fn named_counters(&self) -> Option<Arc<dyn dplog_core::sink::SinkCounters>> {
        Some(self.counters.clone())
    }
}

#[cfg(test)]
mod tests;
