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
//! `summary-<day>.dps` (day: the segment's smallest event time divided by
//! 86,400 s, 10 digits) holds one entry per segment sealed with its
//! smallest event time that day, appended when the segment is sealed
//! (after its rename and the directory's fsync), then fsynced. An entry:
//!
//! - a 16-byte head: `DPSM`, the entry's length u32, the length of its
//!   description u32, the CRC-32 of the description u32 (all LE);
//! - the description: the segment's sequence number, smallest and largest
//!   event time (u64 each, as in its name), the number of record types
//!   u16 and per type its schema id u16, the [`format::tuple_layout`] of
//!   its tuple fields u32 and their names (a count u8, then each as a
//!   length u8 and UTF-8; none: the type's rows are not summarized), then
//!   the bucket bits u8 and the number of tuples u32;
//! - the bucket table: `2^bits + 1` offsets u32 (from the first bucket);
//! - the buckets: tuple hashes go to bucket `hash >> (64 - bits)`, and
//!   each bucket is the CRC-32 (of the segment's sequence number u64, the
//!   bucket number u32 and the fingerprints) then the sorted fingerprints
//!   of its hashes, the 16 bits after the bucket bits, u16 each. Bits are
//!   chosen for about [`BUCKET_TUPLES`] tuples a bucket, so a probe
//!   reads two table offsets and one bucket of about 130 bytes, and a
//!   tuple a segment does not hold is taken for one it may hold about
//!   once in 1000 segments.
//!
//! About 2.1 bytes per distinct tuple of a segment.
//!
//! # Crashes and damage
//!
//! The summary is an aid, never the only way to a record. A segment
//! without an entry (the writer crashed between the segment's rename and
//! the summary's append, or the summary was deleted) is found by the
//! directory listing, as every lookup starts there, and is opened and read
//! as before: an entry is matched to a segment by sequence number and time
//! range. A recovered segment (see the [module docs](super)) gets its
//! entry when it is sealed. An entry whose head fails its CRC or runs past
//! the end of the file ends the summary there (reported; the segments of
//! later entries are opened); a bucket whose CRC fails or whose offsets
//! are out of range is reported and its segment opened. The writer cuts
//! a torn last entry off before it appends the next one.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use dplog_core::schema::Schema;

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
/// Largest entry the reader takes (a bad length must not make it
/// allocate without bound).
const MAX_ENTRY: u64 = 1 << 31;

/// The name of the summary of day `day` (event time / [`DAY_NS`]).
pub fn summary_name(day: u64) -> String {
    format!("summary-{day:010}.dps")
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

/// The summary entry of segment `seq` (event times `min..=max`) holding
/// record types `types` and tuple hashes `hashes` (any order, duplicates
/// allowed; sorted and deduplicated here).
pub fn entry_bytes(
    seq: u64,
    min: u64,
    max: u64,
    types: &[TypeEntry],
    hashes: &mut Vec<u64>,
) -> Vec<u8> {
    hashes.sort_unstable();
    hashes.dedup();
    let bits = bucket_bits_for(hashes.len());
    let mut desc = Vec::new();
    for v in [seq, min, max] {
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
    desc.extend_from_slice(&(hashes.len() as u32).to_le_bytes());
    let nb = 1usize << bits;
    let mut table = Vec::with_capacity(4 * (nb + 1));
    let mut data = Vec::with_capacity(4 * nb + 2 * hashes.len());
    let mut fps: Vec<u16> = Vec::new();
    let mut fp_bytes = Vec::new();
    let mut k = 0;
    for b in 0..nb {
        fps.clear();
        while k < hashes.len() && bucket_of(hashes[k], bits) == b {
            fps.push(fingerprint(hashes[k], bits));
            k += 1;
        }
        fps.sort_unstable();
        fps.dedup();
        fp_bytes.clear();
        for f in &fps {
            fp_bytes.extend_from_slice(&f.to_le_bytes());
        }
        table.extend_from_slice(&(data.len() as u32).to_le_bytes());
        data.extend_from_slice(&bucket_crc(seq, b as u32, &fp_bytes).to_le_bytes());
        data.extend_from_slice(&fp_bytes);
    }
    table.extend_from_slice(&(data.len() as u32).to_le_bytes());
    let total = ENTRY_HEAD + desc.len() + table.len() + data.len();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(ENTRY_MAGIC);
    out.extend_from_slice(&(total as u32).to_le_bytes());
    out.extend_from_slice(&(desc.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&desc).to_le_bytes());
    out.extend_from_slice(&desc);
    out.extend_from_slice(&table);
    out.extend_from_slice(&data);
    out
}

/// One segment's entry, as read from a summary file (its description;
/// the buckets stay in the file).
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
    /// Byte offset of the bucket table in the summary file.
    table_at: u64,
    /// Byte offset of the first bucket.
    data_at: u64,
    /// Bytes of the buckets.
    data_len: u64,
}

/// Parses entry `desc` (its description) found at byte `at`, of `total`
/// bytes.
fn parse_entry(desc: &[u8], at: u64, total: u64) -> io::Result<Entry> {
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
    let table_at = at + (ENTRY_HEAD + desc.len()) as u64;
    let data_at = table_at + 4 * ((1u64 << bits) + 1);
    let end = at + total;
    if data_at > end {
        return Err(invalid("entry shorter than its bucket table".into()));
    }
    Ok(Entry {
        seq,
        min,
        max,
        types,
        tuples,
        bits,
        table_at,
        data_at,
        data_len: end - data_at,
    })
}

/// Reads the entries of summary file `file` of `len` bytes, from the
/// start up to the first that is torn or damaged: the entries and, if it
/// stopped early, the byte offset and why.
fn read_entries(file: &File, len: u64) -> (Vec<Entry>, Option<(u64, String)>) {
    let mut out = Vec::new();
    let mut at = 0u64;
    while at < len {
        let mut h = [0u8; ENTRY_HEAD];
        if len - at < ENTRY_HEAD as u64 || file.read_exact_at(&mut h, at).is_err() {
            return (out, Some((at, "torn entry head".into())));
        }
        if &h[..4] != ENTRY_MAGIC {
            return (out, Some((at, "no entry magic".into())));
        }
        let total = u64::from(u32::from_le_bytes(h[4..8].try_into().expect("4 bytes")));
        let dlen = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes")) as u64;
        let crc = u32::from_le_bytes(h[12..16].try_into().expect("4 bytes"));
        if total > MAX_ENTRY || total > len - at || dlen + (ENTRY_HEAD as u64) > total {
            return (
                out,
                Some((
                    at,
                    format!("entry of {total} bytes runs past the end (torn)"),
                )),
            );
        }
        let mut desc = vec![0u8; dlen as usize];
        if file
            .read_exact_at(&mut desc, at + ENTRY_HEAD as u64)
            .is_err()
        {
            return (out, Some((at, "entry unreadable".into())));
        }
        if crc32fast::hash(&desc) != crc {
            return (out, Some((at, "entry checksum mismatch".into())));
        }
        match parse_entry(&desc, at, total) {
            Ok(e) => out.push(e),
            Err(e) => return (out, Some((at, e.to_string()))),
        }
        at += total;
    }
    (out, None)
}

/// Appends `entry` (from [`entry_bytes`]) to the summary of day `day` in
/// archive directory `dir`, after cutting off a torn or damaged tail
/// (said on stderr), and fsyncs it. Returns whether a tail was cut.
///
/// Errors: the file cannot be opened, read, cut, written or synced.
pub fn append(dir: &Path, day: u64, entry: &[u8]) -> io::Result<bool> {
    let path = dir.join(summary_name(day));
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o640)
        .open(&path)?;
    let len = f.metadata()?.len();
    let (entries, stop) = read_entries(&f, len);
    let mut end = len;
    let cut = stop.is_some();
    if let Some((at, why)) = stop {
        eprintln!(
            "dplog: archive summary {}: {why} at byte {at}; cut off there ({} entries kept)",
            path.display(),
            entries.len()
        );
        f.set_len(at)?;
        end = at;
    }
    f.write_all_at(entry, end)?;
    f.sync_data()?;
    Ok(cut)
}

/// A day's summary file, open, with the entries read from it.
type DayFile = (File, Vec<Entry>);

/// The per-day summaries of an archive directory, read as a lookup needs
/// them: each day's file once, its entries' descriptions only; buckets
/// are read one per probe.
#[derive(Debug)]
pub struct Summaries {
    dir: PathBuf,
    /// Per day read: its file and entries (`None`: no summary that day).
    days: Vec<(u64, Option<DayFile>)>,
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

    fn day(&mut self, day: u64) -> Option<&DayFile> {
        let k = match self.days.iter().position(|(d, _)| *d == day) {
            Some(k) => k,
            None => {
                let path = self.dir.join(summary_name(day));
                let loaded = match File::open(&path) {
                    Ok(f) => {
                        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
                        let (entries, stop) = read_entries(&f, len);
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
                        Some((f, entries))
                    }
                    Err(_) => None,
                };
                self.days.push((day, loaded));
                self.days.len() - 1
            }
        };
        self.days[k].1.as_ref()
    }

    /// The entry of sealed segment `sf` (matched by sequence number and
    /// time range), if its day's summary has one.
    pub fn entry(&mut self, sf: &SegmentFile) -> Option<Entry> {
        let (min, max) = sf.range?;
        let (_, entries) = self.day(day_of(min))?;
        entries
            .iter()
            .rev()
            .find(|e| e.seq == sf.seq && e.min == min && e.max == max)
            .cloned()
    }

    /// Whether the segment of `e` may hold a row of tuple hash `h`
    /// ([`format::tuple_hash`]): `false` only when its bucket, checked,
    /// holds no fingerprint of `h`.
    ///
    /// Errors: `InvalidData` for a bucket out of range or failing its
    /// CRC; the read's error.
    pub fn may_hold(&mut self, e: &Entry, h: u64) -> io::Result<bool> {
        let (f, _) = self
            .day(day_of(e.min))
            .ok_or_else(|| invalid("summary no longer readable".into()))?;
        let b = bucket_of(h, e.bits);
        let mut t = [0u8; 8];
        f.read_exact_at(&mut t, e.table_at + 4 * b as u64)?;
        let lo = u64::from(u32::from_le_bytes(t[..4].try_into().expect("4 bytes")));
        let hi = u64::from(u32::from_le_bytes(t[4..].try_into().expect("4 bytes")));
        if lo > hi || hi > e.data_len || hi - lo < 4 || (hi - lo) % 2 != 0 {
            return Err(invalid(format!(
                "summary bucket {b} of segment {}: offsets out of range",
                e.seq
            )));
        }
        let mut buf = vec![0u8; (hi - lo) as usize];
        f.read_exact_at(&mut buf, e.data_at + lo)?;
        let crc = u32::from_le_bytes(buf[..4].try_into().expect("4 bytes"));
        let fps = &buf[4..];
        if bucket_crc(e.seq, b as u32, fps) != crc {
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
    pub fn bucket_problem(&mut self, e: &Entry, err: &io::Error) {
        self.problems.push(Problem {
            path: self.dir.join(summary_name(day_of(e.min))),
            block: None,
            offset: e.table_at,
            reason: format!("{err}; segment {} is read without the summary", e.seq),
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
            let e = entry_bytes(seq, seq * 10, seq * 10 + 5, &types, &mut with_repeats);
            append(dir.path(), 0, &e).unwrap();
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
            assert_eq!(e.types, types);
            assert_eq!(e.tuples as usize, hs.len());
            for &h in hs {
                assert!(sums.may_hold(&e, h).unwrap());
            }
            // Tuples it lacks: about 1 in 1000 taken for one it holds
            // (at most 64 fingerprints of 65536 a bucket).
            let mut wrong = 0;
            for _ in 0..100_000 {
                let h = next();
                if hs.binary_search(&h).is_err() && sums.may_hold(&e, h).unwrap() {
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
