//! Per-day segment summaries: which key tuples each sealed segment may
//! hold, so that a lookup opens only the segments that may hold its
//! tuple, however long its lookback window.
//!
//! # What is summarized
//!
//! For each record type, the *key tuple* of each of its rows: the bytes
//! of its tuple fields together ([`format::tuple_fields`] under the
//! archive's [`summary`](super::ArchiveSinkOptions::summary) setting: by
//! default its lifecycle's key fields, e.g. an LB connection's vip,
//! vport, client address and port; or the named fields it has, e.g. the
//! NAT44 session's post-NAT address and port), hashed with the schema id
//! by [`format::tuple_hash`]. A lookup that gives every tuple field of a
//! type exactly asks the summary whether a segment may hold that tuple;
//! it opens the segment only if it may (or if the segment holds a type
//! the summary cannot answer for: one with no tuple fields, or whose
//! tuple fields the lookup does not all give).
//!
//! # Files
//!
//! Two files per day (day: the segment's smallest event time divided by
//! 86,400 s, 10 digits), each appended to when a segment is sealed (after
//! its rename and the directory's fsync): first its buckets to
//! `summary-<day>.dpb`, fsynced, then its entry to `summary-<day>.dps`,
//! fsynced. A lookup reads the small `.dps` whole, in one read (a few
//! dozen bytes a segment, whatever its tuples), then for each segment of
//! its window the two offsets of its bucket in the `.dpb`'s bucket table
//! and then that bucket (each step asked of the kernel for every segment
//! at once, so a cold disk serves them together).
//!
//! A `.dps` entry:
//!
//! - a 16-byte head: `DPSM`, the entry's length u32, the length of its
//!   description u32, the CRC-32 of what follows the head u32 (all LE);
//! - the description: the segment's sequence number, smallest and largest
//!   event time (u64 each, as in its name), the byte offset and length of
//!   its buckets in the `.dpb` (u64 each), the number of record types u16
//!   and per type its schema id u16, the [`format::tuple_layout`] of its
//!   tuple fields u32 and their names (a count u8, then each as a length
//!   u8 and UTF-8; none: the type's rows are not summarized), then the
//!   bucket bits u8 and the number of tuples u32; the entry's length is
//!   the head's and the description's.
//!
//! The segment's bytes in the `.dpb` (at the offset and of the length its
//! description gives): its bucket table, `2^bits + 1` offsets u32 LE from
//! its first bucket (which follows the table), then the buckets.
//!
//! Entries written before the tables went to the `.dpb` hold the table
//! after the description (an entry longer than its head and description;
//! covered by its CRC-32) and the `.dpb` their buckets only; they read as
//! they did. A table in the `.dpb` has no CRC of its own: a damaged offset
//! points outside the segment's bytes (refused) or at bytes that fail the
//! bucket's CRC, which names the segment and the bucket: either way the
//! segment is opened.
//!
//! The buckets: tuple hashes go to bucket `hash >> (64 - bits)`, and each
//! bucket is the CRC-32 (of the segment's sequence number u64, the bucket
//! number u32 and the fingerprints) then the sorted fingerprints of its
//! hashes, the 16 bits after the bucket bits, u16 each. Bits are chosen
//! for about [`BUCKET_TUPLES`] tuples a bucket, so a probe reads one
//! bucket of about 130 bytes, and a tuple a segment does not hold is
//! taken for one it may hold about once in 1000 segments.
//!
//! About 2.1 bytes per distinct tuple of a segment, in the `.dpb`; the
//! `.dps`, about 60 bytes a segment plus its record types' tuple field
//! names (123 bytes for the NAT44 session on its post-NAT address and
//! port).
//!
//! # Crashes and damage
//!
//! The summary is an aid, never the only way to a record. A segment
//! without an entry (the writer crashed between the segment's rename and
//! the entry's append, or the summary was deleted) is found by the
//! directory listing, as every lookup starts there, and is opened and read
//! as before: an entry is matched to a segment by sequence number and time
//! range. A recovered segment (see the [module docs](super)) gets its
//! entry when it is sealed. Buckets written without their entry (a crash
//! between the two appends) are never referred to. An entry that fails
//! its CRC or runs past the end of the `.dps` ends the summary there
//! (reported; the segments of later entries are opened); a bucket whose
//! CRC fails or that lies outside the `.dpb` is reported and its segment
//! opened. The writer cuts a torn last entry off before it appends the
//! next.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use dplog_core::schema::Schema;

use super::counted;
use super::format::{self, invalid};
use super::reader::{Problem, SegmentFile};

/// Magic at the start of each summary entry.
pub const ENTRY_MAGIC: &[u8; 4] = b"DPSM";
/// Bytes of an entry's head.
pub const ENTRY_HEAD: usize = 16;
/// Tuples a bucket holds on average, about.
pub const BUCKET_TUPLES: usize = 64;
/// Event time (ns) of one summary file: a day.
pub const DAY_NS: u64 = 86_400_000_000_000;
/// Largest `.dps` file or entry the reader takes (a bad length must not
/// make it allocate without bound).
const MAX_DESCS: u64 = 1 << 30;

/// The name of the entries file (`.dps`) of day `day` (event time /
/// [`DAY_NS`]).
pub fn summary_name(day: u64) -> String {
    format!("summary-{day:010}.dps")
}

/// The name of the buckets file (`.dpb`) of day `day`.
pub fn buckets_name(day: u64) -> String {
    format!("summary-{day:010}.dpb")
}

/// The day a summary file name (`.dps` or `.dpb`) is of.
pub fn parse_summary_name(name: &str) -> Option<u64> {
    let d = name.strip_prefix("summary-")?;
    let d = d.strip_suffix(".dps").or_else(|| d.strip_suffix(".dpb"))?;
    (d.len() == 10).then(|| d.parse().ok()).flatten()
}

/// The day a segment whose smallest event time is `min` is summarized
/// under.
pub fn day_of(min: u64) -> u64 {
    min / DAY_NS
}

/// A record type of a summarized segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeEntry {
    /// Its schema id.
    pub schema_id: u16,
    /// [`format::tuple_layout`] of its tuple fields.
    pub layout: u32,
    /// Its tuple fields by name, in tuple order (empty: its rows are not
    /// summarized, and a lookup that may match it opens the segment).
    pub fields: Vec<String>,
}

/// Bucket bits for `n` tuples: about [`BUCKET_TUPLES`] a bucket, 0 to 24.
pub fn bucket_bits_for(n: usize) -> u8 {
    let buckets = n.div_ceil(BUCKET_TUPLES).max(1);
    let bits = usize::BITS - (buckets - 1).leading_zeros();
    bits.min(24) as u8
}

fn bucket_crc(seq: u64, bucket: u32, fps: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&seq.to_le_bytes());
    h.update(&bucket.to_le_bytes());
    h.update(fps);
    h.finalize()
}

fn fingerprint(h: u64, bits: u8) -> u16 {
    (h << bits >> 48) as u16
}

fn bucket_of(h: u64, bits: u8) -> usize {
    if bits == 0 {
        0
    } else {
        (h >> (64 - u32::from(bits))) as usize
    }
}

/// The buckets of `hashes` (sorted, distinct) for segment `seq`, with
/// `bits` bucket bits: the bucket table and the buckets' bytes.
fn buckets(seq: u64, bits: u8, hashes: &[u64]) -> (Vec<u32>, Vec<u8>) {
    let nb = 1usize << bits;
    let mut table = Vec::with_capacity(nb + 1);
    let mut data = Vec::with_capacity(4 * nb + 2 * hashes.len());
    let mut fp_bytes = Vec::new();
    let mut k = 0;
    for b in 0..nb {
        fp_bytes.clear();
        let mut last = None;
        // Sorted hashes: each bucket's run, fingerprints ascending.
        while k < hashes.len() && bucket_of(hashes[k], bits) == b {
            let f = fingerprint(hashes[k], bits);
            if last != Some(f) {
                fp_bytes.extend_from_slice(&f.to_le_bytes());
                last = Some(f);
            }
            k += 1;
        }
        table.push(data.len() as u32);
        data.extend_from_slice(&bucket_crc(seq, b as u32, &fp_bytes).to_le_bytes());
        data.extend_from_slice(&fp_bytes);
    }
    table.push(data.len() as u32);
    (table, data)
}

/// One segment's entry, as read from a `.dps` file, with its bucket
/// table (the buckets stay in the `.dpb`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The segment's sequence number.
    pub seq: u64,
    /// Its smallest event time.
    pub min: u64,
    /// Its largest event time.
    pub max: u64,
    /// Its record types (those with rows in it).
    pub types: Vec<TypeEntry>,
    /// Distinct tuple hashes summarized.
    pub tuples: u32,
    bits: u8,
    /// Byte offset in the `.dpb` of its bucket table (an entry that
    /// holds its table: of its first bucket).
    data_at: u64,
    /// Bytes of its table and buckets in the `.dpb`.
    data_len: u64,
    /// Its bucket table, when the entry holds it (written before the
    /// tables went to the `.dpb`); `None`: at `data_at` in the `.dpb`.
    table: Option<Vec<u32>>,
}

/// Bytes of a bucket table of `bits` bucket bits.
fn table_len(bits: u8) -> u64 {
    4 * ((1u64 << bits) + 1)
}

/// The `.dps` entry of segment `seq` whose bucket table and buckets lie
/// at `data_at` in the `.dpb` (`data_len` bytes).
fn entry_bytes(
    seq: u64,
    (min, max): (u64, u64),
    (data_at, data_len): (u64, u64),
    types: &[TypeEntry],
    bits: u8,
    tuples: usize,
) -> Vec<u8> {
    let mut desc = Vec::new();
    for v in [seq, min, max, data_at, data_len] {
        desc.extend_from_slice(&v.to_le_bytes());
    }
    desc.extend_from_slice(&(types.len() as u16).to_le_bytes());
    for t in types {
        desc.extend_from_slice(&t.schema_id.to_le_bytes());
        desc.extend_from_slice(&t.layout.to_le_bytes());
        desc.push(t.fields.len() as u8);
        for f in &t.fields {
            let b = &f.as_bytes()[..f.len().min(255)];
            desc.push(b.len() as u8);
            desc.extend_from_slice(b);
        }
    }
    desc.push(bits);
    desc.extend_from_slice(&(tuples as u32).to_le_bytes());
    let dlen = desc.len();
    let total = ENTRY_HEAD + desc.len();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(ENTRY_MAGIC);
    out.extend_from_slice(&(total as u32).to_le_bytes());
    out.extend_from_slice(&(dlen as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&desc).to_le_bytes());
    out.extend_from_slice(&desc);
    out
}

/// Parses an entry's description `desc` and bucket table `table` (empty:
/// the table is in the `.dpb`).
fn parse_entry(desc: &[u8], table: &[u8]) -> io::Result<Entry> {
    let mut p = 0usize;
    let mut take = |n: usize| -> io::Result<&[u8]> {
        let s = desc
            .get(p..p + n)
            .ok_or_else(|| invalid("entry description too short".into()))?;
        p += n;
        Ok(s)
    };
    let u64_ = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
    let seq = u64_(take(8)?);
    let min = u64_(take(8)?);
    let max = u64_(take(8)?);
    let data_at = u64_(take(8)?);
    let data_len = u64_(take(8)?);
    let nt = u16::from_le_bytes(take(2)?.try_into().expect("2 bytes"));
    let mut types = Vec::with_capacity(nt as usize);
    for _ in 0..nt {
        let schema_id = u16::from_le_bytes(take(2)?.try_into().expect("2 bytes"));
        let layout = u32::from_le_bytes(take(4)?.try_into().expect("4 bytes"));
        let nf = take(1)?[0];
        let mut fields = Vec::with_capacity(nf as usize);
        for _ in 0..nf {
            let n = take(1)?[0] as usize;
            fields.push(
                String::from_utf8(take(n)?.to_vec())
                    .map_err(|_| invalid("entry: a field name is not UTF-8".into()))?,
            );
        }
        types.push(TypeEntry {
            schema_id,
            layout,
            fields,
        });
    }
    let bits = take(1)?[0];
    let tuples = u32::from_le_bytes(take(4)?.try_into().expect("4 bytes"));
    if bits > 24 || p != desc.len() {
        return Err(invalid("entry description malformed".into()));
    }
    let table = if table.is_empty() {
        // In the `.dpb`, followed by at least each bucket's CRC.
        if data_len < table_len(bits) + 4 * (1u64 << bits) {
            return Err(invalid("entry's buckets shorter than their table".into()));
        }
        None
    } else {
        if table.len() as u64 != table_len(bits) {
            return Err(invalid("entry's bucket table of the wrong length".into()));
        }
        let table: Vec<u32> = table
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        if table.windows(2).any(|w| w[1] < w[0] + 4)
            || u64::from(table[table.len() - 1]) != data_len
        {
            return Err(invalid("entry's bucket table out of order".into()));
        }
        Some(table)
    };
    Ok(Entry {
        seq,
        min,
        max,
        types,
        tuples,
        bits,
        data_at,
        data_len,
        table,
    })
}

/// Parses the entries of `.dps` bytes `b`, from the start up to the first
/// that is torn or damaged: the entries and, if it stopped early, the
/// byte offset and why.
fn parse_entries(b: &[u8]) -> (Vec<Entry>, Option<(u64, String)>) {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < b.len() {
        let stop = |why: String| Some((at as u64, why));
        let Some(h) = b.get(at..at + ENTRY_HEAD) else {
            return (out, stop("torn entry head".into()));
        };
        if &h[..4] != ENTRY_MAGIC {
            return (out, stop("no entry magic".into()));
        }
        let total = u32::from_le_bytes(h[4..8].try_into().expect("4 bytes")) as usize;
        let dlen = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(h[12..16].try_into().expect("4 bytes"));
        if total > b.len() - at || dlen > total.saturating_sub(ENTRY_HEAD) {
            return (
                out,
                stop(format!("entry of {total} bytes runs past the end (torn)")),
            );
        }
        let rest = &b[at + ENTRY_HEAD..at + total];
        if crc32fast::hash(rest) != crc {
            return (out, stop("entry checksum mismatch".into()));
        }
        match parse_entry(&rest[..dlen], &rest[dlen..]) {
            Ok(e) => out.push(e),
            Err(e) => return (out, stop(e.to_string())),
        }
        at += total;
    }
    (out, None)
}

fn read_all(f: &File) -> io::Result<Vec<u8>> {
    let len = f.metadata()?.len();
    if len > MAX_DESCS {
        return Err(invalid(format!("summary of {len} bytes: too large")));
    }
    let mut b = Vec::with_capacity(len as usize);
    counted::read_to_end(f, &mut b)?;
    Ok(b)
}

/// Adds the summary entry of sealed segment `seq` (event times
/// `min..=max`) holding record types `types` and tuple hashes `hashes`
/// (any order, duplicates allowed) to the summary of day `day` in archive
/// directory `dir`: its buckets appended to the `.dpb` and fsynced, then
/// its entry appended to the `.dps` (after cutting off a torn or damaged
/// tail, said on stderr) and fsynced. Returns whether a tail was cut.
///
/// Errors: a file cannot be opened, read, cut, written or synced.
pub fn append(
    dir: &Path,
    day: u64,
    seq: u64,
    (min, max): (u64, u64),
    types: &[TypeEntry],
    hashes: &mut Vec<u64>,
) -> io::Result<bool> {
    hashes.sort_unstable();
    hashes.dedup();
    let bits = bucket_bits_for(hashes.len());
    let (table, buckets) = buckets(seq, bits, hashes);
    // The table, then the buckets its offsets are from.
    let mut data = Vec::with_capacity(4 * table.len() + buckets.len());
    for o in &table {
        data.extend_from_slice(&o.to_le_bytes());
    }
    data.extend_from_slice(&buckets);
    let open = |name: String| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o640)
            .open(dir.join(name))
    };
    let fb = open(buckets_name(day))?;
    let data_at = fb.metadata()?.len();
    fb.write_all_at(&data, data_at)?;
    fb.sync_data()?;
    let entry = entry_bytes(
        seq,
        (min, max),
        (data_at, data.len() as u64),
        types,
        bits,
        hashes.len(),
    );
    let fd = open(summary_name(day))?;
    let (entries, stop) = parse_entries(&read_all(&fd)?);
    let mut end = fd.metadata()?.len();
    let cut = stop.is_some();
    if let Some((at, why)) = stop {
        eprintln!(
            "dplog: archive summary {}: {why} at byte {at}; cut off there ({} entries kept)",
            dir.join(summary_name(day)).display(),
            entries.len()
        );
        fd.set_len(at)?;
        end = at;
    }
    fd.write_all_at(&entry, end)?;
    fd.sync_data()?;
    Ok(cut)
}

/// A segment's entry in [`Summaries`], as [`Summaries::entry`] found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryRef {
    day: usize,
    entry: usize,
}

/// Where the bucket of a hash lies in its segment's `.dpb` bytes, as
/// [`Summaries::bucket`] found it: its number and byte range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketAt {
    b: usize,
    lo: u64,
    hi: u64,
}

/// A day's summary: its entries (read whole from the `.dps`) and its open
/// `.dpb`.
#[derive(Debug)]
struct Day {
    entries: Vec<Entry>,
    buckets: Option<File>,
}

/// The per-day summaries of an archive directory, read as a lookup needs
/// them: each day's `.dps` once, in one read; one bucket of the `.dpb`
/// per probe.
#[derive(Debug)]
pub struct Summaries {
    dir: PathBuf,
    /// Per day read (`None`: no summary that day).
    days: Vec<(u64, Option<Day>)>,
    /// Damage found (each summary file that stopped early, each bucket
    /// that failed its check): reported, never fatal.
    pub problems: Vec<Problem>,
}

impl Summaries {
    /// The summaries of archive directory `dir` (nothing is read yet).
    pub fn new(dir: &Path) -> Summaries {
        Summaries {
            dir: dir.to_path_buf(),
            days: Vec::new(),
            problems: Vec::new(),
        }
    }

    fn day(&mut self, day: u64) -> Option<&Day> {
        let k = match self.days.iter().position(|(d, _)| *d == day) {
            Some(k) => k,
            None => {
                let path = self.dir.join(summary_name(day));
                let loaded = counted::open(&path).ok().map(|f| {
                    let (entries, stop) = match read_all(&f) {
                        Ok(b) => parse_entries(&b),
                        Err(e) => (Vec::new(), Some((0, e.to_string()))),
                    };
                    if let Some((at, why)) = stop {
                        self.problems.push(Problem {
                            path: path.clone(),
                            block: None,
                            offset: at,
                            reason: format!(
                                "summary {why}; the segments of this entry and later ones \
                                 are read without it"
                            ),
                        });
                    }
                    Day {
                        entries,
                        buckets: counted::open_random(&self.dir.join(buckets_name(day))).ok(),
                    }
                });
                self.days.push((day, loaded));
                self.days.len() - 1
            }
        };
        self.days[k].1.as_ref()
    }

    /// The entry of sealed segment `sf` (matched by sequence number and
    /// time range), if its day's summary has one.
    pub fn entry(&mut self, sf: &SegmentFile) -> Option<EntryRef> {
        let (min, max) = sf.range?;
        self.day(day_of(min))?;
        let d = self.days.iter().position(|(d, _)| *d == day_of(min))?;
        let day = self.days[d].1.as_ref()?;
        let e = day
            .entries
            .iter()
            .rposition(|e| e.seq == sf.seq && e.min == min && e.max == max)?;
        Some(EntryRef { day: d, entry: e })
    }

    /// The entry `r` names.
    pub fn get(&self, r: EntryRef) -> &Entry {
        &self.days[r.day].1.as_ref().expect("an entry's day").entries[r.entry]
    }

    fn buckets_file(&self, r: EntryRef) -> Option<&File> {
        self.days[r.day].1.as_ref()?.buckets.as_ref()
    }

    /// The bucket of hash `h` in the segment of `r` and where it lies in
    /// the `.dpb`: from the entry's table, or from the two offsets of the
    /// table in the `.dpb` (one read of 8 bytes), for
    /// [`may_hold_at`](Self::may_hold_at) and
    /// [`advise_bucket`](Self::advise_bucket).
    ///
    /// Errors: `InvalidData` for a missing `.dpb` or offsets out of
    /// order or beyond the entry's bytes; the read's error.
    pub fn bucket(&self, r: EntryRef, h: u64) -> io::Result<BucketAt> {
        let e = self.get(r);
        let b = bucket_of(h, e.bits);
        if let Some(t) = &e.table {
            return Ok(BucketAt {
                b,
                lo: e.data_at + u64::from(t[b]),
                hi: e.data_at + u64::from(t[b + 1]),
            });
        }
        let f = self
            .buckets_file(r)
            .ok_or_else(|| invalid("summary buckets file missing".into()))?;
        let mut two = [0u8; 8];
        counted::read_at(f, &mut two, e.data_at + 4 * b as u64).map_err(|err| {
            if err.kind() == io::ErrorKind::UnexpectedEof {
                invalid(format!(
                    "summary bucket table of segment {}: beyond the end of the buckets file",
                    e.seq
                ))
            } else {
                err
            }
        })?;
        let lo = u64::from(u32::from_le_bytes(two[..4].try_into().expect("4 bytes")));
        let hi = u64::from(u32::from_le_bytes(two[4..].try_into().expect("4 bytes")));
        let base = e.data_at + table_len(e.bits);
        if lo + 4 > hi || hi > e.data_len - table_len(e.bits) {
            return Err(invalid(format!(
                "summary bucket {b} of segment {}: its table offsets are out of range \
                 (the table is damaged)",
                e.seq
            )));
        }
        Ok(BucketAt {
            b,
            lo: base + lo,
            hi: base + hi,
        })
    }

    /// Asks the kernel to read, in the background, what
    /// [`Summaries::may_hold`] reads first for hash `h` in the segment of
    /// `r`: its bucket when the entry holds the bucket table, else the
    /// two offsets of the table in the `.dpb` (then
    /// [`bucket`](Self::bucket) and [`advise_bucket`](Self::advise_bucket)). A lookup advises every
    /// segment of its window first, so a cold disk serves them together.
    pub fn advise(&self, r: EntryRef, h: u64) {
        let e = self.get(r);
        let Some(f) = self.buckets_file(r) else {
            return;
        };
        match &e.table {
            Some(_) => {
                if let Ok(at) = self.bucket(r, h) {
                    counted::advise(f, at.lo, at.hi - at.lo);
                }
            }
            None => counted::advise(f, e.data_at + 4 * bucket_of(h, e.bits) as u64, 8),
        }
    }

    /// After [`advise`](Self::advise) and [`bucket`](Self::bucket): for
    /// an entry whose bucket table is in the `.dpb`, asks the kernel for
    /// the bucket at `at` (nothing for one that holds its table, whose
    /// bucket `advise` asked for). A hint.
    pub fn advise_bucket(&self, r: EntryRef, at: &BucketAt) {
        if self.get(r).table.is_some() {
            return;
        }
        if let Some(f) = self.buckets_file(r) {
            counted::advise(f, at.lo, at.hi - at.lo);
        }
    }

    /// Whether the segment of `e` may hold a row of tuple hash `h`
    /// ([`format::tuple_hash`]): `false` only when its bucket, checked,
    /// holds no fingerprint of `h`. [`bucket`](Self::bucket), then
    /// [`may_hold_at`](Self::may_hold_at).
    ///
    /// Errors: as those.
    pub fn may_hold(&self, r: EntryRef, h: u64) -> io::Result<bool> {
        self.may_hold_at(r, h, self.bucket(r, h)?)
    }

    /// [`may_hold`](Self::may_hold) with the bucket of `h` found by
    /// [`bucket`](Self::bucket) already.
    ///
    /// Errors: `InvalidData` for a bucket failing its CRC or a missing
    /// `.dpb`; the read's error (a bucket beyond the end of the `.dpb`).
    pub fn may_hold_at(&self, r: EntryRef, h: u64, at: BucketAt) -> io::Result<bool> {
        let e = self.get(r);
        let BucketAt { b, lo, hi } = at;
        let f = self
            .buckets_file(r)
            .ok_or_else(|| invalid("summary buckets file missing".into()))?;
        let mut buf = vec![0u8; (hi - lo) as usize];
        counted::read_at(f, &mut buf, lo).map_err(|err| {
            if err.kind() == io::ErrorKind::UnexpectedEof {
                invalid(format!(
                    "summary bucket {b} of segment {}: beyond the end of the buckets file",
                    e.seq
                ))
            } else {
                err
            }
        })?;
        let crc = u32::from_le_bytes(buf[..4].try_into().expect("4 bytes"));
        let fps = &buf[4..];
        if fps.len() % 2 != 0 || bucket_crc(e.seq, b as u32, fps) != crc {
            return Err(invalid(format!(
                "summary bucket {b} of segment {}: checksum mismatch",
                e.seq
            )));
        }
        let want = fingerprint(h, e.bits);
        let n = fps.len() / 2;
        let at = |i: usize| u16::from_le_bytes([fps[2 * i], fps[2 * i + 1]]);
        // Sorted: binary search.
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match at(mid).cmp(&want) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(true),
            }
        }
        Ok(false)
    }

    /// Reports a bucket that could not be checked for the segment of `e`.
    pub fn bucket_problem(&mut self, r: EntryRef, err: &io::Error) {
        let e = self.get(r);
        let (min, data_at, seq) = (e.min, e.data_at, e.seq);
        self.problems.push(Problem {
            path: self.dir.join(buckets_name(day_of(min))),
            block: None,
            offset: data_at,
            reason: format!("{err}; segment {seq} is read without the summary"),
        });
    }
}

/// The [`TypeEntry`] of record type `s` under summary key `summary`
/// (an archive's [`ArchiveSinkOptions::summary`](super::ArchiveSinkOptions::summary)).
pub fn type_entry(s: &Schema, summary: &[String]) -> TypeEntry {
    let keys = format::tuple_fields(s, summary);
    TypeEntry {
        schema_id: s.id(),
        layout: format::tuple_layout(&keys),
        fields: keys.iter().map(|f| f.name.to_string()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    #[test]
    fn every_tuple_written_is_found_and_few_others_are() {
        let dir = tempfile::tempdir().unwrap();
        let mut next = xorshift(0x1234_5678_9abc_def1);
        let types = [TypeEntry {
            schema_id: 7,
            layout: 0xdead_beef,
            fields: vec!["a".into(), "b".into()],
        }];
        // Three segments of 0, 100 and 20,000 tuples (with repeats).
        let mut sets = Vec::new();
        for (seq, n) in [(0u64, 0usize), (1, 100), (2, 20_000)] {
            let mut hs: Vec<u64> = (0..n).map(|_| next()).collect();
            let mut with_repeats = hs.clone();
            with_repeats.extend_from_slice(&hs[..n / 2]);
            append(
                dir.path(),
                0,
                seq,
                (seq * 10, seq * 10 + 5),
                &types,
                &mut with_repeats,
            )
            .unwrap();
            hs.sort_unstable();
            sets.push((seq, hs));
        }
        let mut sums = Summaries::new(dir.path());
        for (seq, hs) in &sets {
            let sf = SegmentFile {
                path: dir.path().join("x"),
                seq: *seq,
                range: Some((seq * 10, seq * 10 + 5)),
            };
            let e = sums.entry(&sf).expect("an entry");
            assert_eq!(sums.get(e).types, types);
            assert_eq!(sums.get(e).tuples as usize, hs.len());
            for &h in hs {
                assert!(sums.may_hold(e, h).unwrap());
            }
            // Tuples it lacks: about 1 in 1000 taken for one it holds
            // (at most 64 fingerprints of 65536 a bucket).
            let mut wrong = 0;
            for _ in 0..100_000 {
                let h = next();
                if hs.binary_search(&h).is_err() && sums.may_hold(e, h).unwrap() {
                    wrong += 1;
                }
            }
            assert!(wrong <= 300, "segment {seq}: {wrong} of 100000");
            if hs.is_empty() {
                assert_eq!(wrong, 0);
            }
        }
        // An entry of another time range under the same number is not
        // the segment's.
        let other = SegmentFile {
            path: dir.path().join("x"),
            seq: 1,
            range: Some((11, 15)),
        };
        assert!(sums.entry(&other).is_none());
        assert!(sums.problems.is_empty());
    }
}
