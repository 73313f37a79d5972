//! Verifies sealed output files against their seal files
//! (`dplog-verify`): finds the first write where the chain stops
//! holding, says why, and names its first record and byte.
//!
//! The unit of the chain is one write of the sink (a batch), so a
//! manipulation is located at the first record of the first write that
//! fails, with that write's byte range. Records are lines (text formats),
//! frames (`binary`) or messages (`ipfix`), numbered from 1 at the start
//! of the file (a CSV header line is record 1).
//!
//! Nothing read is trusted before it is checked: entries have fixed
//! sizes per tag, offsets and lengths are compared with the output's
//! length before a byte is read, the data is read in 1 MiB pieces, and the
//! seal file is streamed: memory holds the entry being checked and, to
//! explain a finding, at most 64 entries read ahead, whatever the sizes
//! of the files.

use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use ed25519_dalek::{Signature, VerifyingKey};

use crate::seal::{
    genesis, hex, key_message, link, seal_path, sign_message, Entry, EntryReader, Placed, Signed,
    MAGIC,
};
use crate::seal::{TAG_BATCH, TAG_CLOSE, TAG_LATE, TAG_RESUME};

/// How far (in writes) the verifier looks for where a write's bytes went
/// when they are not at their place.
const SEARCH_WRITES: usize = 64;

/// Record starts (line boundaries) a search for where a write's bytes
/// went tries at most, so a finding is explained in bounded time.
const MAX_STARTS: usize = 4096;

/// What went wrong, in the terms of the manipulation that explains it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    /// Bytes were removed from a write (its later writes sit earlier).
    Removed,
    /// A write's bytes changed in place (same length), or records were
    /// moved within it.
    Altered,
    /// Bytes were inserted into or before a write (its later writes sit
    /// later).
    Inserted,
    /// A later write's bytes sit at this write's place.
    Reordered,
    /// The output ends before the bytes its seal records.
    Truncated,
    /// The output ends inside its last sealed write: bytes were removed
    /// from that write, or it was cut short. With no later sealed write
    /// to show where the bytes after the cut went, the seal cannot tell
    /// which.
    RemovedOrTruncated,
    /// The last sealed write's bytes differ and bytes follow it: bytes
    /// were inserted into it, or it was changed (and the bytes after it
    /// are an unsealed tail, or were appended). With no later sealed
    /// write the seal cannot tell which.
    AlteredOrInserted,
    /// Bytes after a cleanly closed file's sealed end (its seal ends
    /// with a close entry and no sink started on it again): the file
    /// grew after the sink closed it, or a rotated file grew.
    AppendedAfterClose,
    /// The seal does not continue the chain here: entries from another
    /// log (a different log id, or a file that does not follow its
    /// predecessor).
    Spliced,
    /// A signature by a key that is not one of the trusted keys (the
    /// tail was re-signed), in a seal that records a trusted key before
    /// it (its start entry or a key change).
    ForeignKey,
    /// A signature by a key that is not one of the trusted keys, in a seal
    /// that records none of them (neither its start entry nor a key
    /// change): most likely the keys given are not this log's (a wrong
    /// `--key`), which is a usage error, not tampering; a seal rebuilt
    /// whole with another key looks the same, so nothing is verified.
    KeyNotInSeal,
    /// A signature that does not verify, or signs another head than the
    /// chain's (the seal was rewritten and not re-signed).
    BadSignature,
    /// A file of a rotated set is missing.
    MissingFile,
    /// The chain head differs from the one a remote receiver got when it
    /// was signed (`--anchors`): the file and its seal were rewritten
    /// and re-signed, with the key, after that signature.
    AnchorMismatch,
    /// The seal file is not one, or is damaged.
    SealDamaged,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Problem::Removed => "removed",
            Problem::Altered => "altered",
            Problem::Inserted => "inserted",
            Problem::Reordered => "reordered",
            Problem::Truncated => "truncated",
            Problem::RemovedOrTruncated => "removed or truncated",
            Problem::AlteredOrInserted => "altered or inserted",
            Problem::AppendedAfterClose => "appended after close",
            Problem::Spliced => "spliced",
            Problem::ForeignKey => "re-signed with another key",
            Problem::KeyNotInSeal => "signed with a key not given (wrong --key?)",
            Problem::BadSignature => "bad signature",
            Problem::MissingFile => "missing file",
            Problem::AnchorMismatch => "differs from the anchored head",
            Problem::SealDamaged => "seal damaged",
        })
    }
}

/// Where and why verification stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// What went wrong.
    pub problem: Problem,
    /// The output file.
    pub file: PathBuf,
    /// The first record where it stops holding, from 1.
    pub record: u64,
    /// Its byte offset in the file.
    pub byte: u64,
    /// The byte range of the write that fails, as sealed.
    pub write: Option<(u64, u64)>,
    /// The details.
    pub detail: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} at record {} (byte {})",
            self.file.display(),
            self.problem,
            self.record,
            self.byte
        )?;
        if let Some((a, b)) = self.write {
            write!(f, ", in the write of bytes {a}..{b}")?;
        }
        write!(f, ": {}", self.detail)
    }
}

/// The outcome of verifying a file or a rotated set.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The first problem, if any: nothing after it is checked.
    pub finding: Option<Finding>,
    /// Remarks that are not tampering but limit what is proven: bytes
    /// not sealed (before sealing started, or a crash between a write and
    /// its entry), writes after the last signature, key changes, earlier
    /// files of the set not present.
    pub notes: Vec<String>,
    /// Writes verified.
    pub writes: u64,
    /// Bytes verified.
    pub bytes: u64,
    /// Signatures verified with a trusted key.
    pub signatures: u64,
    /// Bytes of the checked files that no trusted signature covers, though
    /// nothing contradicts them: written after the last signature (a
    /// crash before the next one, a log still being written), not sealed
    /// (a crash between a write and its seal entry, bytes there before
    /// sealing started, files of a set without a seal), or the whole log
    /// when its seal has no signature. The chain alone does not prove
    /// them: it has no key, so whoever rewrites the file can rebuild a
    /// chain without signatures. `dplog-verify` exits 4 when this is not 0.
    pub unproven: u64,
}

/// How records divide a file, read from its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    Lines,
    Frames,
    Ipfix,
    /// An archive segment: its header, then block frames.
    Blocks,
}

fn framing(f: &File, base: u64) -> Framing {
    let mut b = [0u8; 12];
    let n = f.read_at(&mut b, base).unwrap_or(0);
    if n >= 12 && b[0] == b'H' && b[1] == 0 && &b[4..12] == b"DPLOGBIN" {
        Framing::Frames
    } else if n >= 8 && &b[..8] == crate::archive::format::SEGMENT_MAGIC {
        Framing::Blocks
    } else if n >= 2 && b[0] == 0 && b[1] == 10 {
        Framing::Ipfix
    } else {
        Framing::Lines
    }
}

/// One output file open for verification.
struct Data {
    path: PathBuf,
    file: File,
    /// Bytes of the log: the file's length, or an mmap segment's header
    /// and committed data (the rest is preallocated).
    len: u64,
    /// Where records start: 0, or an mmap segment's data area.
    base: u64,
    framing: Framing,
}

impl Data {
    fn open(path: &Path) -> io::Result<Data> {
        let file = File::open(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        let mut len = file.metadata()?.len();
        let mut base = 0;
        let mut head = [0u8; 32];
        if file.read_exact_at(&mut head, 0).is_ok() && &head[..8] == crate::mmap::reader::MAGIC {
            // An mmap segment: its header (not sealed: its committed
            // length changes with every batch), then the committed data.
            base = crate::mmap::reader::HEADER_BYTES as u64;
            let committed = u64::from_le_bytes(head[24..32].try_into().expect("8 bytes"));
            len = len.min(base.saturating_add(committed));
        }
        let framing = framing(&file, base);
        Ok(Data {
            path: path.to_path_buf(),
            file,
            len,
            base,
            framing,
        })
    }

    /// BLAKE3 of bytes `[off, off + len)`; `None` when they are not all
    /// in the file.
    fn content(&self, off: u64, len: u64, buf: &mut [u8]) -> io::Result<Option<[u8; 32]>> {
        self.content_of(&[(off, len)], buf)
    }

    /// The offsets just after each newline in `[from, to)` (where the
    /// next line record starts), in order, at most `cap` of them.
    fn line_starts(&self, from: u64, to: u64, cap: usize, buf: &mut [u8]) -> io::Result<Vec<u64>> {
        let mut starts = Vec::new();
        let mut p = from;
        while p < to && starts.len() < cap {
            let n = buf.len().min((to - p) as usize);
            let got = self.file.read_at(&mut buf[..n], p)?;
            if got == 0 {
                break;
            }
            let room = cap - starts.len();
            starts.extend(
                memchr::memchr_iter(b'\n', &buf[..got])
                    .map(|x| p + x as u64 + 1)
                    .take(room),
            );
            p += got as u64;
        }
        Ok(starts)
    }

    /// BLAKE3 of the byte ranges `(offset, length)` one after the other;
    /// `None` when they are not all in the file.
    fn content_of(&self, parts: &[(u64, u64)], buf: &mut [u8]) -> io::Result<Option<[u8; 32]>> {
        if parts
            .iter()
            .any(|(off, len)| off.checked_add(*len).map_or(true, |e| e > self.len))
        {
            return Ok(None);
        }
        let mut h = blake3::Hasher::new();
        for &(off, len) in parts {
            let mut at = off;
            let end = off + len;
            while at < end {
                let n = buf.len().min((end - at) as usize);
                self.file.read_exact_at(&mut buf[..n], at)?;
                h.update(&buf[..n]);
                at += n as u64;
            }
        }
        Ok(Some(*h.finalize().as_bytes()))
    }

    /// Record number (from 1) of the record at or after byte `off`, and
    /// that record's start: records starting before `off` plus one.
    fn record_at(&self, off: u64) -> io::Result<(u64, u64)> {
        let mut r = BufReader::with_capacity(1 << 20, &self.file);
        let mut count = 0u64;
        match self.framing {
            Framing::Lines => {
                let mut buf = vec![0u8; 1 << 20];
                let mut at = self.base;
                let mut last_start = self.base;
                while at < off {
                    let want = buf.len().min((off - at) as usize);
                    let n = self.file.read_at(&mut buf[..want], at)?;
                    if n == 0 {
                        break;
                    }
                    for i in memchr::memchr_iter(b'\n', &buf[..n]) {
                        count += 1;
                        last_start = at + i as u64 + 1;
                    }
                    at += n as u64;
                }
                // A write starts at a record boundary unless the bytes
                // before it changed; then name the record that holds it.
                Ok((count + 1, if last_start == off { off } else { last_start }))
            }
            Framing::Blocks => {
                use crate::archive::format::{BLOCK_HEADER, BLOCK_MAGIC, SEGMENT_HEADER};
                // Record 1 is the segment header; each block is one more.
                let (mut at, mut count) = (0u64, 0u64);
                if off >= SEGMENT_HEADER as u64 {
                    at = SEGMENT_HEADER as u64;
                    count = 1;
                }
                let mut hdr = [0u8; BLOCK_HEADER];
                while at < off {
                    if self.file.read_exact_at(&mut hdr, at).is_err() || &hdr[..4] != BLOCK_MAGIC {
                        break;
                    }
                    let n = BLOCK_HEADER as u64
                        + u64::from(u32::from_le_bytes([hdr[8], hdr[9], hdr[10], hdr[11]]));
                    if at + n > off {
                        break;
                    }
                    count += 1;
                    at += n;
                }
                Ok((count + 1, at))
            }
            Framing::Frames | Framing::Ipfix => {
                let mut at = self.base;
                r.seek_relative(self.base as i64)?;
                let mut hdr = [0u8; 4];
                while at < off {
                    if r.read_exact(&mut hdr).is_err() {
                        break;
                    }
                    let n = match self.framing {
                        Framing::Frames => 4 + u64::from(u16::from_le_bytes([hdr[2], hdr[3]])),
                        _ => u64::from(u16::from_be_bytes([hdr[2], hdr[3]])).max(4),
                    };
                    if at + n > off {
                        break;
                    }
                    count += 1;
                    at += n;
                    if r.seek_relative(n as i64 - 4).is_err() {
                        break;
                    }
                }
                Ok((count + 1, at))
            }
        }
    }
}

/// A rotated set's files, oldest first, ending with `path` itself when it
/// exists: what [`crate::file::rotated_files`] finds beside it; for a
/// directory, its archive segments in sequence order
/// ([`crate::archive::list_segments`]).
///
/// # Errors
/// Reading the directory.
pub fn set_of(path: &Path) -> io::Result<Vec<PathBuf>> {
    if path.is_dir() {
        // An archive directory: its segments in sequence order.
        let archive: Vec<PathBuf> = crate::archive::list_segments(path)?
            .into_iter()
            .map(|s| s.path)
            .collect();
        if !archive.is_empty() {
            return Ok(archive);
        }
        // An mmap segment directory of one prefix.
        let mmap = crate::mmap::reader::all_segments(path)?;
        if mmap.iter().any(|(p, _, _)| *p != mmap[0].0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: mmap segments of several prefixes (several logs): name one log's segments",
                    path.display()
                ),
            ));
        }
        return Ok(mmap.into_iter().map(|(_, _, p)| p).collect());
    }
    let mut v = crate::file::rotated_files(path)?;
    if path.exists() {
        v.push(path.to_path_buf());
    }
    Ok(v)
}

/// Verifies `files` (one output file, or a rotated set oldest first) with
/// their seal files, trusting signatures by `trusted` only. Stops at the
/// first problem.
///
/// # Errors
/// An output or seal file that cannot be read (missing seal file
/// included): `NotFound`/`PermissionDenied` with the path.
pub fn verify_files(files: &[PathBuf], trusted: &[VerifyingKey]) -> io::Result<Report> {
    verify_anchored(files, trusted, &[])
}

/// [`verify_files`], and every head in `anchors` (what a remote receiver
/// got, [`read_anchors`]) of the files' log must be the chain's head at
/// that point: a rewritten and re-signed log is found at the last
/// anchored head it still matches ([`Problem::AnchorMismatch`]), one cut
/// short of an anchored head is [`Problem::Truncated`], and an anchored
/// file of the log that is not there is [`Problem::MissingFile`].
///
/// # Errors
/// As [`verify_files`].
pub fn verify_anchored(
    files: &[PathBuf],
    trusted: &[VerifyingKey],
    anchors: &[Anchored],
) -> io::Result<Report> {
    let mut v = Verifier {
        trusted,
        recorded: Vec::new(),
        anchors,
        report: Report::default(),
        prev: None,
        buf: vec![0u8; 1 << 20],
    };
    let mut last = None;
    for (i, f) in files.iter().enumerate() {
        // Older files of a set written before sealing was switched on.
        if v.prev.is_none() && files.len() > 1 && !seal_path(f).exists() {
            v.report.unproven += std::fs::metadata(f).map_or(0, |m| m.len());
            v.report.notes.push(format!(
                "{}: no seal file; written before sealing was switched on? not checked",
                f.display()
            ));
            continue;
        }
        if !v.file(f, i + 1 == files.len())? {
            return Ok(v.report);
        }
        last = Some(f);
    }
    // A log none of the anchors is of: made anew (all of it re-sealed
    // under a new log id), or the anchors are another log's.
    if let (Some((log, _, _)), Some(f)) = (v.prev, files.first()) {
        if !anchors.is_empty() && !anchors.iter().any(|a| a.log_id == log) {
            let d = Data::open(f)?;
            v.find(
                &d,
                Problem::AnchorMismatch,
                0,
                None,
                format!(
                    "none of the {} anchored heads is of this log ({}): the log was sealed anew, or the anchors are another log's",
                    anchors.len(),
                    hex(&log)
                ),
            )?;
            return Ok(v.report);
        }
    }
    // Anchored files after the last one present.
    if let (Some((log, seq, _)), Some(f)) = (v.prev, last) {
        if let Some(a) = anchors.iter().find(|a| a.log_id == log && a.seq > seq) {
            let d = Data::open(f)?;
            let at = d.len;
            v.find(
                &d,
                Problem::MissingFile,
                at,
                None,
                format!(
                    "the anchors record file {} of this log ({} writes up to byte {}), which is not here: files after this one were removed",
                    a.seq, a.writes, a.end
                ),
            )?;
        }
    }
    Ok(v.report)
}

/// A signed head as a remote receiver got it (an anchor message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Anchored {
    /// The log's id.
    pub log_id: [u8; 16],
    /// The file's sequence number in the log.
    pub seq: u64,
    /// Writes sealed in that file when it was signed.
    pub writes: u64,
    /// Their end offset.
    pub end: u64,
    /// The chain head signed.
    pub head: [u8; 32],
}

fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != 2 * N || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// Longest line read from an anchors file; longer ones are skipped.
const MAX_ANCHOR_LINE: usize = 8192;

/// Reads the anchor messages from a receiver's file, keeping those whose
/// signature verifies with one of `trusted`. Returns them with the number
/// of anchor lines dropped (bad fields or signature; never trusted).
///
/// An anchor line is one of:
/// - a syslog line that ends with an anchor message's text, `dplog-seal
///   head log=.. file=.. writes=.. end=.. time=.. head=.. key=.. sig=..`
///   (those eight keys in that order, one space apart), right after the
///   message's RFC 5424 header as the seal sink sends it over every
///   transport (`... dplog-seal - head - `: APP-NAME, PROCID, MSGID,
///   no SD; a receiver storing `%rawmsg%` or RFC 5424 lines), after
///   the tag of a receiver storing traditional lines (`... dplog-seal `
///   or `... dplog-seal: `), or alone on the line (a receiver storing
///   the MSG only);
/// - a JSON object with exactly a seal head's fields (`log`, `file`,
///   `writes`, `end`, `timeMs`, `head`, `key`, `sig`, and perhaps the
///   JSON format's `timestamp`), one per line: the messages of a Kafka
///   anchor topic, the rows of a ClickHouse anchor table as
///   `JSONEachRow`.
///
/// Other lines are not the verifier's, even when a value in them holds
/// such text: an RFC 5424 record's SD-PARAM value keeps its spaces raw,
/// but is quoted and followed by `"]`, so it neither ends its line nor
/// follows the anchor's header; a record's JSON object has keys of its
/// own.
///
/// # Errors
/// Reading the file.
pub fn read_anchors(path: &Path, trusted: &[VerifyingKey]) -> io::Result<(Vec<Anchored>, usize)> {
    use std::io::BufRead;
    let f = File::open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    let mut r = BufReader::new(f);
    let (mut out, mut bad) = (Vec::new(), 0usize);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut r)
            .take(MAX_ANCHOR_LINE as u64 + 1)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            break;
        }
        if line.len() > MAX_ANCHOR_LINE && line.last() != Some(&b'\n') {
            // Skip the rest of an overlong line.
            let mut sink = Vec::new();
            r.read_until(b'\n', &mut sink)?;
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        let parsed = if let Some(fields) = syslog_head(&text) {
            parse_anchor(fields, trusted)
        } else if let Some(obj) = json_head(&text) {
            parse_json_anchor(&obj, trusted)
        } else {
            continue;
        };
        match parsed {
            Some(a) => out.push(a),
            None => bad += 1,
        }
    }
    Ok((out, bad))
}

/// The text every anchor message starts with.
const ANCHOR_TEXT: &str = "dplog-seal head ";

/// The keys of an anchor message's text, in the order the seal sink
/// writes them.
const ANCHOR_KEYS: [&str; 8] = ["log", "file", "writes", "end", "time", "head", "key", "sig"];

/// Whether `before`, what stands before an anchor's text on a
/// receiver's line, is what a receiver stores there: the end of the
/// anchor message's RFC 5424 header (`dplog-seal - head -`: APP-NAME,
/// PROCID, MSGID, no SD), as sent over UDP, TCP and RELP alike; a
/// traditional syslog line's tag (`dplog-seal` or `dplog-seal:`, as
/// rsyslog's `RSYSLOG_TraditionalFileFormat` and `RSYSLOG_FileFormat`
/// write it); or nothing.
fn anchor_prefix(before: &str) -> bool {
    let mut last = before.split_whitespace().rev();
    match last.next() {
        None => true,
        Some("dplog-seal" | "dplog-seal:") => true,
        Some("-") => last.take(3).eq(["head", "-", "dplog-seal"]),
        Some(_) => false,
    }
}

/// The `key=value` fields of `line` if it is an anchor message's line
/// (see [`read_anchors`]): the anchor's text ends the line, in its own
/// shape (its eight keys in order, one space apart), right after what
/// [`anchor_prefix`] accepts. Their values are checked by
/// [`parse_anchor`].
fn syslog_head(line: &str) -> Option<&str> {
    let line = line.trim_end();
    let at = line.rfind(ANCHOR_TEXT)?;
    if !anchor_prefix(&line[..at]) {
        return None;
    }
    let fields = &line[at + ANCHOR_TEXT.len()..];
    let mut parts = fields.split(' ');
    for k in ANCHOR_KEYS {
        let (key, _) = parts.next()?.split_once('=')?;
        if key != k {
            return None;
        }
    }
    parts.next().is_none().then_some(fields)
}

/// A JSON object on `line` that carries a seal head's fields (a
/// [`SealHead`](crate::seal::anchor::SealHead) record as the `json` format
/// prints it, or a row of its ClickHouse table as `JSONEachRow`): one
/// with every field of the [`SealHead`](crate::seal::anchor::SealHead)
/// schema as a key and no other (but the JSON format's `timestamp`).
/// Other lines are none of the verifier's.
fn json_head(line: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
    use dplog_core::HasSchema;
    let t = line.trim();
    if !t.starts_with('{') {
        return None;
    }
    let fields = crate::seal::anchor::SealHead::schema().fields();
    match serde_json::from_str::<serde_json::Value>(t) {
        Ok(serde_json::Value::Object(m))
            if fields.iter().all(|f| m.contains_key(&*f.name))
                && m.keys()
                    .all(|k| k == "timestamp" || fields.iter().any(|f| f.name == k.as_str())) =>
        {
            Some(m)
        }
        _ => None,
    }
}

/// A head from a JSON object: byte fields as hex (either case), numbers
/// as JSON numbers or decimal strings (ClickHouse quotes 64-bit ones).
fn parse_json_anchor(
    m: &serde_json::Map<String, serde_json::Value>,
    trusted: &[VerifyingKey],
) -> Option<Anchored> {
    let text = |k: &str| m.get(k).and_then(serde_json::Value::as_str);
    let num = |k: &str| match m.get(k)? {
        serde_json::Value::Number(n) => n.as_u64(),
        serde_json::Value::String(s) => s.parse().ok(),
        _ => None,
    };
    let bytes = |k: &str| text(k).map(str::to_ascii_lowercase);
    let fields = format!(
        "log={} file={} writes={} end={} time={} head={} key={} sig={}",
        bytes("log")?,
        num("file")?,
        num("writes")?,
        num("end")?,
        num("timeMs")?,
        bytes("head")?,
        bytes("key")?,
        bytes("sig")?
    );
    parse_anchor(&fields, trusted)
}

fn parse_anchor(fields: &str, trusted: &[VerifyingKey]) -> Option<Anchored> {
    let get = |k: &str| {
        fields
            .split_whitespace()
            .find_map(|f| f.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
    };
    let log_id = unhex::<16>(get("log")?)?;
    let seq = get("file")?.parse().ok()?;
    let writes = get("writes")?.parse().ok()?;
    let end = get("end")?.parse().ok()?;
    let time_ms = get("time")?.parse().ok()?;
    let head = unhex::<32>(get("head")?)?;
    let key = unhex::<32>(get("key")?)?;
    let sig = unhex::<64>(get("sig")?)?;
    let vk = trusted.iter().find(|t| t.as_bytes() == &key)?;
    let msg = sign_message(&log_id, seq, writes, end, time_ms, &head);
    vk.verify_strict(&msg, &Signature::from_bytes(&sig)).ok()?;
    Some(Anchored {
        log_id,
        seq,
        writes,
        end,
        head,
    })
}

struct Verifier<'a> {
    trusted: &'a [VerifyingKey],
    /// The keys the checked seals record (start entries', key changes'),
    /// in order: an untrusted signature after a trusted one among them is
    /// [`Problem::ForeignKey`], without one [`Problem::KeyNotInSeal`].
    recorded: Vec<[u8; 32]>,
    anchors: &'a [Anchored],
    report: Report,
    /// Log id, sequence number and final head of the previous file.
    prev: Option<([u8; 16], u64, [u8; 32])>,
    buf: Vec<u8>,
}

impl Verifier<'_> {
    /// Notes a key the seal records (once).
    fn record_key(&mut self, k: [u8; 32]) {
        if !self.recorded.contains(&k) {
            self.recorded.push(k);
        }
    }

    fn find(
        &mut self,
        d: &Data,
        problem: Problem,
        byte: u64,
        write: Option<(u64, u64)>,
        detail: String,
    ) -> io::Result<bool> {
        let (record, start) = d.record_at(byte)?;
        self.report.finding = Some(Finding {
            problem,
            file: d.path.clone(),
            record,
            // Bytes appended after a close start where the sealed bytes
            // end, which is not always a record's start (an archive
            // segment's footer is none).
            byte: if problem == Problem::AppendedAfterClose {
                byte
            } else {
                start
            },
            write,
            detail,
        });
        Ok(false)
    }

    /// Verifies one file; `false` once a finding is made.
    fn file(&mut self, path: &Path, last: bool) -> io::Result<bool> {
        let d = Data::open(path)?;
        let sp = seal_path(path);
        let sf = match File::open(&sp) {
            Ok(f) => f,
            // A sealed log's later file without its seal: removed.
            Err(e) if e.kind() == io::ErrorKind::NotFound && self.prev.is_some() => {
                return self.find(
                    &d,
                    Problem::SealDamaged,
                    0,
                    None,
                    format!(
                        "{} is missing, while the files before this one are sealed",
                        sp.display()
                    ),
                );
            }
            Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", sp.display()))),
        };
        let mut r = BufReader::new(sf);
        let mut magic = [0u8; 8];
        if r.read_exact(&mut magic).is_err() || &magic != MAGIC {
            return self.find(
                &d,
                Problem::SealDamaged,
                0,
                None,
                format!("{} is not a dplog seal file", sp.display()),
            );
        }
        let mut rd = EntryReader::new(r);
        let Some((
            _,
            Entry::Start {
                log_id,
                seq,
                start,
                prev,
                pubkey,
                ..
            },
        )) = rd.next_entry()?
        else {
            return self.find(
                &d,
                Problem::SealDamaged,
                0,
                None,
                format!("{} has no start entry", sp.display()),
            );
        };
        // The file's place in its log.
        match self.prev {
            None => {
                if seq == 0 && prev != genesis(&log_id) {
                    return self.find(
                        &d,
                        Problem::Spliced,
                        start,
                        None,
                        "the first file's chain does not start at its log's genesis".into(),
                    );
                }
                if seq > 0 {
                    self.report.notes.push(format!(
                        "{}: file {seq} of log {}; the {seq} earlier file(s) are not present (retention) and were not checked",
                        path.display(),
                        hex(&log_id)
                    ));
                }
            }
            Some((pid, pseq, phead)) => {
                if pid != log_id {
                    return self.find(
                        &d,
                        Problem::Spliced,
                        start,
                        None,
                        format!(
                            "this file belongs to log {}, the previous to log {}",
                            hex(&log_id),
                            hex(&pid)
                        ),
                    );
                }
                if seq <= pseq {
                    return self.find(
                        &d,
                        Problem::Reordered,
                        start,
                        None,
                        format!(
                            "file {seq} of the log comes after file {pseq}: the set's files \
                             are out of order (renamed?)"
                        ),
                    );
                }
                if seq != pseq + 1 {
                    return self.find(
                        &d,
                        Problem::MissingFile,
                        start,
                        None,
                        format!(
                            "file {seq} of the log follows file {pseq}: file(s) {}..{} are missing",
                            pseq + 1,
                            seq - 1
                        ),
                    );
                }
                if prev != phead {
                    return self.find(
                        &d,
                        Problem::Spliced,
                        start,
                        None,
                        "this file does not continue the previous file's chain head".into(),
                    );
                }
            }
        }
        if start > d.base {
            self.report.unproven += start - d.base;
            self.report.notes.push(format!(
                "{}: bytes {}..{start} were in the file before sealing started and are not sealed",
                path.display(),
                d.base
            ));
        }
        let mut head = prev;
        let mut pos = start;
        let mut batches = 0u64;
        // This file's anchored heads, by write count; the last one matched.
        let mut anchored: Vec<&Anchored> = self
            .anchors
            .iter()
            .filter(|a| a.log_id == log_id && a.seq == seq)
            .collect();
        anchored.sort_by_key(|a| a.writes);
        let mut next_anchor = 0usize;
        let mut matched = start;
        let mut key = pubkey;
        self.record_key(pubkey);
        // Position and write count at the last signature by a trusted key.
        let mut signed = (start, 0u64);
        let mut signed_at_all = false;
        // The seal file byte of a close entry not followed by a resume.
        let mut closed: Option<u64> = None;
        // Entries read ahead to explain a finding.
        let mut ahead: std::collections::VecDeque<Placed> = std::collections::VecDeque::new();
        let mut i = 0usize;
        loop {
            let placed = match ahead.pop_front() {
                Some(p) => p,
                None => match rd.next_entry()? {
                    Some(p) => p,
                    None => break,
                },
            };
            i += 1;
            let (at, e) = (&placed.0, &placed.1);
            match e {
                Entry::Start { log_id: other, .. } => {
                    return self.find(&d, Problem::Spliced, pos, None, format!(
                        "a second start entry (log {}) at byte {at} of the seal file: another log's seal continues here",
                        hex(other)
                    ));
                }
                Entry::Batch {
                    late,
                    off,
                    len,
                    content,
                    chain,
                } => {
                    let tag = if *late { TAG_LATE } else { TAG_BATCH };
                    let range = Some((*off, off.saturating_add(*len)));
                    if let Some(cat) = closed {
                        let how = if *late {
                            "found there when a sink started again on the file, and sealed as found"
                        } else {
                            "sealed after the close with no resume entry"
                        };
                        return self.find(&d, Problem::AppendedAfterClose, pos, range, format!(
                            "the sink closed this file at byte {pos} (the close entry at byte {cat} of the seal file); bytes {off}..{} were {how}: they were appended after the close, not written by the sink",
                            off.saturating_add(*len)
                        ));
                    }
                    if *off != pos || link(&head, tag, *off, *len, content) != *chain {
                        return self.find(&d, Problem::Spliced, pos, range, format!(
                            "seal entry {i} (byte {at} of the seal file) does not continue the chain: entries of another log, or the seal file edited"
                        ));
                    }
                    match d.content(*off, *len, &mut self.buf)? {
                        None => {
                            while ahead.len() < SEARCH_WRITES {
                                match rd.next_entry()? {
                                    Some(p) => ahead.push_back(p),
                                    None => break,
                                }
                            }
                            let (problem, byte, detail) = self.classify_short(
                                &d,
                                (*off, *len),
                                ahead.make_contiguous(),
                                seal_end(&sp)?,
                            )?;
                            return self.find(&d, problem, byte, range, detail);
                        }
                        Some(c) if c != *content => {
                            while ahead.len() < SEARCH_WRITES {
                                match rd.next_entry()? {
                                    Some(p) => ahead.push_back(p),
                                    None => break,
                                }
                            }
                            let (problem, detail) = self.classify(
                                &d,
                                (*off, *len, *content),
                                i,
                                ahead.make_contiguous(),
                                seal_end(&sp)?,
                            )?;
                            return self.find(&d, problem, *off, range, detail);
                        }
                        Some(_) => {}
                    }
                    if *late {
                        self.report.notes.push(format!(
                            "{}: bytes {off}..{} were found unsealed when the sink restarted (a crash between a write and its seal entry) and were sealed then",
                            path.display(),
                            off + len
                        ));
                    }
                    head = *chain;
                    pos = off + len;
                    batches += 1;
                    self.report.writes += 1;
                    self.report.bytes += len;
                    while let Some(a) = anchored.get(next_anchor).filter(|a| a.writes <= batches) {
                        if a.writes == batches && (a.head != head || a.end != pos) {
                            return self.find(&d, Problem::AnchorMismatch, matched, Some((matched, a.end.max(pos))), format!(
                                "after {batches} writes the chain head is {}, the receiver got {} (up to byte {}) when it was signed: the log was rewritten and re-sealed after byte {matched}",
                                hex(&head),
                                hex(&a.head),
                                a.end
                            ));
                        }
                        matched = pos;
                        next_anchor += 1;
                    }
                }
                Entry::Sign(s) | Entry::Close(s) | Entry::Resume(s) => {
                    let Signed {
                        batches: n,
                        end,
                        head: h,
                        pubkey: pk,
                        sig,
                        ..
                    } = s;
                    let after = Some((signed.0, pos));
                    let vk = VerifyingKey::from_bytes(pk).ok();
                    let msg = s.message(e.tag(), &log_id, seq);
                    let what = match e.tag() {
                        TAG_CLOSE => "close entry",
                        TAG_RESUME => "resume entry",
                        _ => "signature",
                    };
                    let valid = vk.is_some_and(|vk| {
                        vk.verify_strict(&msg, &Signature::from_bytes(sig)).is_ok()
                    });
                    if *n != batches || *end != pos || *h != head {
                        return self.find(&d, Problem::BadSignature, signed.0, after, format!(
                            "the {what} at byte {at} of the seal file signs {n} writes up to byte {end}, the chain has {batches} up to byte {pos} with another head: the seal was rewritten after the last good signature"
                        ));
                    }
                    if !valid {
                        return self.find(&d, Problem::BadSignature, signed.0, after, format!(
                            "the {what} at byte {at} of the seal file does not verify with the key it names ({})",
                            hex(pk)
                        ));
                    }
                    let trusted_recorded = self
                        .recorded
                        .iter()
                        .any(|k| self.trusted.iter().any(|t| t.as_bytes() == k));
                    if !self.trusted.iter().any(|t| t.as_bytes() == pk) && !trusted_recorded {
                        let recorded: Vec<String> = self.recorded.iter().map(|k| hex(k)).collect();
                        return self.find(&d, Problem::KeyNotInSeal, signed.0, after, format!(
                            "the writes are signed by key {}; the seal records key(s) {} and none of the keys given (--key): give the public key of the sink's seal.key_file (a seal rebuilt whole with another key looks the same: nothing is verified)",
                            hex(pk),
                            recorded.join(", ")
                        ));
                    }
                    if !self.trusted.iter().any(|t| t.as_bytes() == pk) {
                        return self.find(&d, Problem::ForeignKey, signed.0, after, format!(
                            "the writes from byte {} to {pos} are signed by key {}, which is not a trusted key",
                            signed.0,
                            hex(pk)
                        ));
                    }
                    signed = (pos, batches);
                    signed_at_all = true;
                    match e.tag() {
                        TAG_CLOSE => closed = Some(*at),
                        TAG_RESUME => closed = None,
                        _ => self.report.signatures += 1,
                    }
                }
                Entry::Key {
                    old,
                    new,
                    head: h,
                    time_ms,
                    sig,
                } => {
                    let vk = VerifyingKey::from_bytes(new).ok();
                    let valid = vk.is_some_and(|vk| {
                        vk.verify_strict(
                            &key_message(old, new, h, *time_ms),
                            &Signature::from_bytes(sig),
                        )
                        .is_ok()
                    });
                    if !valid || *old != key || *h != head {
                        return self.find(&d, Problem::BadSignature, pos, None, format!(
                            "the key change at byte {at} of the seal file does not verify or does not follow the chain"
                        ));
                    }
                    self.report.notes.push(format!(
                        "{}: the signing key changed at byte {pos} from {} to {}",
                        path.display(),
                        hex(old),
                        hex(new)
                    ));
                    key = *new;
                    self.record_key(*old);
                    self.record_key(*new);
                }
            }
        }
        let _ = key;
        if let Some(a) = anchored.get(next_anchor) {
            return self.find(&d, Problem::Truncated, pos.min(d.len), Some((pos, a.end)), format!(
                "the receiver got a head over {} writes up to byte {}; this file's seal ends after {batches} writes at byte {pos}: its tail was cut off",
                a.writes, a.end
            ));
        }
        if let Some(crate::seal::Stop { at, why, .. }) = rd.stop().cloned() {
            self.report.notes.push(format!(
                "{}: {why} (byte {at}); entries before it were checked",
                sp.display()
            ));
        }
        if batches > signed.1 || !signed_at_all {
            if !last {
                return self.find(
                    &d,
                    Problem::Truncated,
                    signed.0,
                    Some((signed.0, pos)),
                    "a rotated file's seal does not end with a signature: its tail was cut off"
                        .into(),
                );
            }
            if batches > signed.1 {
                self.report.unproven += pos - signed.0;
                let (rec, _) = d.record_at(signed.0)?;
                self.report.notes.push(format!(
                    "{}: {} write(s), bytes {}..{pos} from record {rec}, came after the last signature: their chain holds, but a truncation there would not show (a crash before the next signature, or compare with the anchored heads)",
                    path.display(),
                    batches - signed.1,
                    signed.0
                ));
            }
        }
        if let (Some(cat), true) = (closed, d.len > pos) {
            return self.find(
                &d,
                Problem::AppendedAfterClose,
                pos,
                None,
                format!(
                    "the sink closed this file at byte {pos} (the close entry at byte {cat} of the seal file), and it has {} bytes after that: appended after the close",
                    d.len - pos
                ),
            );
        }
        if d.len > pos {
            if !last {
                return self.find(
                    &d,
                    Problem::Inserted,
                    pos,
                    None,
                    format!(
                        "a rotated file has {} bytes after its sealed end",
                        d.len - pos
                    ),
                );
            }
            self.report.unproven += d.len - pos;
            let (rec, _) = d.record_at(pos)?;
            self.report.notes.push(format!(
                "{}: bytes {pos}..{} from record {rec} are not sealed (a crash between a write and its seal entry, or appended by something else)",
                path.display(),
                d.len
            ));
        }
        self.prev = Some((log_id, seq, head));
        Ok(true)
    }

    /// Names the manipulation that explains write `i`'s mismatch: where
    /// its own and the next writes' bytes went.
    fn classify(
        &mut self,
        d: &Data,
        own: Written,
        i: usize,
        ahead: &[Placed],
        sealed_end: u64,
    ) -> io::Result<(Problem, String)> {
        let (off, len, own_content) = own;
        let later: Vec<(usize, Written)> = ahead
            .iter()
            .enumerate()
            .filter_map(|(j, (_, e))| match e {
                Entry::Batch {
                    off, len, content, ..
                } => Some((i + 1 + j, (*off, *len, *content))),
                _ => None,
            })
            .take(SEARCH_WRITES)
            .collect();
        // A later write's bytes at this place: this write moved after
        // it (reordered), or this and the writes up to it were removed.
        for (k, (koff, klen, kc)) in &later {
            if d.content(off, *klen, &mut self.buf)? == Some(*kc) {
                let moved = d.content(off + klen, len, &mut self.buf)? == Some(own_content);
                if moved {
                    return Ok((Problem::Reordered, format!(
                        "the bytes sealed for bytes {koff}..{} (write {k} of the seal) sit at this write's place, and this write's after them: out of order",
                        koff + klen
                    )));
                }
                let gone = koff - off;
                return Ok((Problem::Removed, format!(
                    "this write and any up to byte {koff} ({gone} bytes) were removed; the write sealed at byte {koff} sits at their place"
                )));
            }
        }
        // The next write still at its place: this one changed in place.
        if let Some((_, (noff, nlen, nc))) = later.first() {
            if d.content(*noff, *nlen, &mut self.buf)? == Some(*nc) {
                return Ok((Problem::Altered, format!(
                    "the {len} bytes of this write differ from what was sealed (same length; changed, or records moved within it)"
                )));
            }
            // Shifted: find the next write's bytes nearby.
            let mut shifts: Vec<i64> = vec![d.len as i64 - sealed_end as i64, -(len as i64)];
            shifts.retain(|s| *s != 0);
            for s in shifts.clone() {
                let at = *noff as i64 + s;
                if at >= 0 && d.content(at as u64, *nlen, &mut self.buf)? == Some(*nc) {
                    return Ok(shift_finding(s, len));
                }
            }
            // Search record starts around the write's end.
            let hi = (noff + len).min(d.len);
            // One more than tried, as the next write's own start is left out.
            let starts = d.line_starts(off, hi, MAX_STARTS + 1, &mut self.buf)?;
            for c in starts.into_iter().filter(|c| c != noff).take(MAX_STARTS) {
                if d.content(c, *nlen, &mut self.buf)? == Some(*nc) {
                    return Ok(shift_finding(c as i64 - *noff as i64, len));
                }
            }
        } else {
            // The last sealed write (the file is at least as long): no
            // later write shows where its bytes went. Bytes inserted
            // leave all of its own in the file: around the inserted ones
            // (tried at its record starts, with every byte after it
            // taken as inserted), or further on (bytes inserted before
            // it, the rest a tail); else only the length tells.
            let extra = d.len.saturating_sub(off + len);
            if extra > 0 {
                let mut cuts = vec![off];
                cuts.extend(d.line_starts(off, off + len, MAX_STARTS - 1, &mut self.buf)?);
                for c in cuts {
                    let around = [(off, c - off), (c + extra, off + len - c)];
                    if d.content_of(&around, &mut self.buf)? == Some(own_content) {
                        let (rec, _) = d.record_at(c)?;
                        return Ok((Problem::Inserted, format!(
                            "{extra} bytes were inserted into this write (the last sealed one) at byte {c} (record {rec}); its sealed bytes are around them"
                        )));
                    }
                }
                let mut shifts = vec![extra];
                let starts = d.line_starts(off, off + extra, MAX_STARTS - 1, &mut self.buf)?;
                shifts.extend(starts.into_iter().map(|c| c - off));
                for s in shifts {
                    if d.content(off + s, len, &mut self.buf)? == Some(own_content) {
                        return Ok((Problem::Inserted, format!(
                            "{s} bytes were inserted before this write (the last sealed one); its bytes sit that much later"
                        )));
                    }
                }
                return Ok((Problem::AlteredOrInserted, format!(
                    "the {len} bytes of this write (the last sealed one) differ from what was sealed and {extra} bytes follow it: bytes were inserted into it, or it was changed and the bytes after it were appended (or are a crash's unsealed tail); with no later sealed write to show where its bytes went, the seal cannot tell which"
                )));
            }
        }
        Ok((
            Problem::Altered,
            format!("the {len} bytes of this write differ from what was sealed"),
        ))
    }
}

impl Verifier<'_> {
    /// Names why the file ends before write `own` (offset, length) does:
    /// cut short (`truncated`), or bytes removed, which the next sealed
    /// writes show by sitting earlier by as much as the file is short.
    /// Inside the last sealed write nothing shows which (`removed or
    /// truncated`). Returns the problem, the byte to name and why.
    fn classify_short(
        &mut self,
        d: &Data,
        own: (u64, u64),
        ahead: &[Placed],
        sealed_end: u64,
    ) -> io::Result<(Problem, u64, String)> {
        let (off, len) = own;
        let short = sealed_end.saturating_sub(d.len);
        let truncated = (
            Problem::Truncated,
            d.len.max(off),
            format!(
                "the file ends at byte {} but its seal records {} bytes up to byte {sealed_end}",
                d.len,
                off + len
            ),
        );
        if d.len <= off {
            return Ok(truncated);
        }
        let mut last = true;
        for (_, e) in ahead.iter().take(SEARCH_WRITES) {
            if let Entry::Batch {
                off: koff,
                len: klen,
                content,
                ..
            } = e
            {
                last = false;
                if *koff >= off + short
                    && d.content(koff - short, *klen, &mut self.buf)? == Some(*content)
                {
                    return Ok((
                        Problem::Removed,
                        off,
                        format!(
                            "{short} bytes were removed from this write or the ones up to byte {koff}; the write sealed at byte {koff} sits that much earlier"
                        ),
                    ));
                }
            }
        }
        if !last {
            return Ok(truncated);
        }
        Ok((
            Problem::RemovedOrTruncated,
            off,
            format!(
                "the file ends at byte {}, {} bytes into this write (the last sealed one, {len} bytes): bytes were removed from it, or it was cut short; with no later sealed write to show where the bytes after the cut went, the seal cannot tell which",
                d.len,
                d.len - off
            ),
        ))
    }
}

/// A write as sealed: offset, length, content hash.
type Written = (u64, u64, [u8; 32]);

fn shift_finding(s: i64, len: u64) -> (Problem, String) {
    if s < 0 {
        if -s as u64 == len {
            (
                Problem::Removed,
                format!(
                    "this whole write ({len} bytes) was removed; the next one sits at its place"
                ),
            )
        } else {
            (
                Problem::Removed,
                format!(
                    "{} bytes were removed from this write; the next write sits that much earlier",
                    -s
                ),
            )
        }
    } else {
        (Problem::Inserted, format!("{s} bytes were inserted into or before this write; the next write sits that much later"))
    }
}

/// Where the last write the seal file at `sp` records ends (a second,
/// streaming pass over it, made only to explain a finding).
fn seal_end(sp: &Path) -> io::Result<u64> {
    let mut r = BufReader::new(File::open(sp)?);
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic)?;
    let mut rd = EntryReader::new(r);
    let mut end = 0;
    while let Some((_, e)) = rd.next_entry()? {
        match e {
            Entry::Batch { off, len, .. } => end = off.saturating_add(len),
            Entry::Start { start, .. } => end = start,
            _ => {}
        }
    }
    Ok(end)
}
