//! The checkpoint: where each ring was consumed up to, together with how
//! long each file, mmap and archive output was at that moment, so a restarted
//! daemon cuts the outputs back to the checkpoint and resumes the rings
//! there (nothing lost, nothing written twice).
//!
//! Order per batch (see `Daemon::write_batch` and `Daemon::commit`): the
//! batch is written to the sinks; the sinks hand the kernel what they
//! still hold (`Sink::write_out`, no fsync), or with `--fsync` the
//! outputs are fsync'd (`Sink::flush`); the checkpoint is
//! written to `<path>.tmp` (fsync'd with `--fsync`) and renamed over
//! `<path>` (the directory fsync'd with `--fsync`); only then is each
//! ring's consumer index published to its producer, freeing the slots. A
//! crash before the rename leaves the previous checkpoint, whose outputs
//! are shorter than the files: the restart truncates them and re-reads
//! the rings from the previous indices, whose slots were not yet freed.
//!
//! A file output is named by its path and its inode: a file sink that
//! rotates (`max_size_bytes`, `rotate_interval_ms`) renames the live file
//! to `<path>.<unix-ms, 13 digits>` and starts a new one at the path. On
//! restart the checkpointed file is found by its inode, at the path or
//! among the rotated files; if it was rotated after the checkpoint, the
//! files created after it (the newer rotated files and the one at the
//! path) hold only records after the checkpoint and are removed, and it is
//! cut back and renamed to the path again: the outputs are exactly as they
//! were at the checkpoint.
//!
//! An archive output is named by its directory. Before a checkpoint the
//! daemon writes out the archive sink (its partial blocks written to the
//! open segment, fsync'd only with `--fsync`), so the records the
//! checkpoint covers are all in segment files; the checkpoint keeps the newest segment's sequence
//! number, whether it was open, and its length. On restart, before the
//! sink opens, segments newer than that one are removed, and that one,
//! if it was open, is cut back to the checkpointed length (renamed back
//! to its open name if it was sealed after the checkpoint: the footer
//! goes with the cut); the sink's own recovery then seals it. So the
//! archive too holds every record once.
//!
//! The file is text, one item per line, the path last:
//!
//! ```text
//! dplogd-checkpoint 3
//! file <length> <inode|-> <path>
//! mmap <seq|-> <committed bytes> <committed records> <prefix> <dir>
//! archive <seq|-> <O|S> <length> <dir>
//! ring <L|C|Q> <head> <drops reported> <nonce, 16 hex> <ring file name>
//! end
//! ```
//!
//! `O` an open segment, `S` a sealed one (versions 1 and 2 have no
//! archive lines). `L` a ring being served, `C` one whose producer exited and whose exit
//! line is written (the file is removed next), `Q` one quarantined.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use dplog::config::SinkConfig;
use dplog_sinks::archive::format::open_name;
use dplog_sinks::mmap::reader::{list_segments, read_header};

/// Byte offsets of the committed length and record count in an mmap
/// segment header (`dplog_sinks::mmap`'s documented layout).
const MMAP_OFF_COMMITTED: u64 = 24;
const MMAP_OFF_RECORDS: u64 = 32;

/// An output whose position is checkpointed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A file sink's path (rotated files: see the module docs).
    File(PathBuf),
    /// An mmap sink's directory and prefix.
    Mmap(PathBuf, String),
    /// An archive sink's directory.
    Archive(PathBuf),
}

/// A position in a [`Target`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pos {
    /// The live file of a file output: its path, length in bytes and inode
    /// (`None`: no file yet, or a version-1 checkpoint).
    File {
        /// The sink's path.
        path: PathBuf,
        /// Its length.
        len: u64,
        /// Its inode.
        ino: Option<u64>,
    },
    /// The newest segment (`None`: no segment yet), its committed bytes
    /// and records.
    Mmap {
        /// Directory.
        dir: PathBuf,
        /// Segment prefix.
        prefix: String,
        /// Newest segment's sequence number.
        seq: Option<u64>,
        /// Its committed data bytes.
        committed: u64,
        /// Its committed records.
        records: u64,
    },
    /// The newest segment of an archive (`None`: no segment yet).
    Archive {
        /// Directory.
        dir: PathBuf,
        /// Newest segment's sequence number.
        seq: Option<u64>,
        /// It was open (being written); else sealed.
        open: bool,
        /// Its length in bytes.
        len: u64,
    },
}

/// The checkpointed outputs of a sink configuration: every `file`,
/// `mmap` and `archive` sink in it (the others, syslog, Kafka and IPFIX,
/// cannot be cut back: the daemon checkpoints after their
/// acknowledgement, at least once).
pub fn targets(cfg: &SinkConfig) -> Vec<Target> {
    match cfg {
        SinkConfig::File(f) => vec![Target::File(f.path.clone())],
        SinkConfig::Mmap(m) => vec![Target::Mmap(m.dir.clone(), m.prefix.clone())],
        SinkConfig::Archive(a) => vec![Target::Archive(a.dir.clone())],
        SinkConfig::Set(v) => v.iter().flat_map(targets).collect(),
        _ => Vec::new(),
    }
}

/// The current position of `t`.
///
/// Errors: reading the file's metadata or the segment header.
pub fn position(t: &Target) -> io::Result<Pos> {
    match t {
        Target::File(p) => {
            let (len, ino) = match std::fs::metadata(p) {
                Ok(m) => (m.len(), Some(m.ino())),
                Err(e) if e.kind() == io::ErrorKind::NotFound => (0, None),
                Err(e) => return Err(e),
            };
            Ok(Pos::File {
                path: p.clone(),
                len,
                ino,
            })
        }
        Target::Mmap(dir, prefix) => {
            let segs = match list_segments(dir, prefix) {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
                Err(e) => return Err(e),
            };
            match segs.last() {
                None => Ok(Pos::Mmap {
                    dir: dir.clone(),
                    prefix: prefix.clone(),
                    seq: None,
                    committed: 0,
                    records: 0,
                }),
                Some((seq, path)) => {
                    let h = read_header(path)?;
                    Ok(Pos::Mmap {
                        dir: dir.clone(),
                        prefix: prefix.clone(),
                        seq: Some(*seq),
                        committed: h.committed_bytes,
                        records: h.committed_records,
                    })
                }
            }
        }
        Target::Archive(dir) => {
            let segs = archive_segments(dir)?;
            match segs.last() {
                None => Ok(Pos::Archive {
                    dir: dir.clone(),
                    seq: None,
                    open: false,
                    len: 0,
                }),
                Some(sf) => Ok(Pos::Archive {
                    dir: dir.clone(),
                    seq: Some(sf.seq),
                    open: sf.range.is_none(),
                    len: std::fs::metadata(&sf.path)?.len(),
                }),
            }
        }
    }
}

/// The segment files of archive `dir` (none if it does not exist), in
/// sequence order, an open one after a sealed one of the same number.
fn archive_segments(dir: &Path) -> io::Result<Vec<dplog_sinks::archive::SegmentFile>> {
    match dplog_sinks::archive::list_segments(dir) {
        Ok(s) => Ok(s),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// An archive back to its checkpoint (see the module docs): segments
/// after `seq` removed; segment `seq`, open at the checkpoint, cut to
/// `len` and open again.
fn archive_back(dir: &Path, seq: Option<u64>, open: bool, len: u64) -> io::Result<Option<String>> {
    let mut what = Vec::new();
    for sf in archive_segments(dir)? {
        if seq.map_or(true, |c| sf.seq > c) {
            std::fs::remove_file(&sf.path)?;
            what.push(format!(
                "removed {} (records after the checkpoint)",
                sf.path.display()
            ));
        } else if Some(sf.seq) == seq && open {
            let f = OpenOptions::new().write(true).open(&sf.path)?;
            let now = f.metadata()?.len();
            if now < len {
                what.push(format!(
                    "{}: {now} bytes, shorter than the checkpoint's {len} (cut from outside?)",
                    sf.path.display()
                ));
                continue;
            }
            if now > len {
                f.set_len(len)?;
                f.sync_all()?;
            }
            if sf.range.is_some() {
                // Sealed after the checkpoint: its footer and the blocks
                // after the checkpoint are cut; open again, the sink's
                // recovery seals it.
                let to = dir.join(open_name(sf.seq));
                std::fs::rename(&sf.path, &to)?;
                what.push(format!(
                    "{} cut from {now} to {len} bytes and renamed back to {} (sealed after the checkpoint)",
                    sf.path.display(),
                    to.display()
                ));
            } else if now > len {
                what.push(format!(
                    "{}: cut from {now} to {len} bytes (written after the checkpoint)",
                    sf.path.display()
                ));
            }
        }
    }
    if !what.is_empty() {
        File::open(dir)?.sync_all()?;
    }
    Ok((!what.is_empty()).then(|| what.join("; ")))
}

/// The rotated files of a file sink at `path`
/// ([`dplog_sinks::file::rotated_files`]), oldest first; none when the
/// directory is gone.
///
/// Errors: reading the directory.
pub fn rotated_files(path: &Path) -> io::Result<Vec<PathBuf>> {
    match dplog_sinks::file::rotated_files(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        r => r,
    }
}

/// Cuts the file `f` (at `path`) back to `len`; a description if it was
/// longer or shorter.
fn cut_file(f: &File, path: &Path, len: u64) -> io::Result<Option<String>> {
    let now = f.metadata()?.len();
    if now > len {
        f.set_len(len)?;
        f.sync_all()?;
        return Ok(Some(format!(
            "{}: cut from {now} to {len} bytes (written after the checkpoint)",
            path.display()
        )));
    }
    if now < len {
        return Ok(Some(format!(
            "{}: {now} bytes, shorter than the checkpoint's {len} (cut from outside?); appending",
            path.display()
        )));
    }
    Ok(None)
}

/// A file output back to its checkpoint (see the module docs): the
/// checkpointed file (inode `ino`) found at `path` is cut to `len`; found
/// among the rotated files, the files made after it are removed, it is
/// cut and renamed to `path`.
fn file_back(path: &Path, len: u64, ino: Option<u64>) -> io::Result<Option<String>> {
    let live = match OpenOptions::new().write(true).open(path) {
        Ok(f) => Some(f),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let Some(ino) = ino else {
        // No file at the checkpoint (or a version-1 checkpoint): cut the
        // file at the path, as far as it goes.
        return match live {
            Some(f) => cut_file(&f, path, len),
            None => Ok(None),
        };
    };
    if let Some(f) = &live {
        if f.metadata()?.ino() == ino {
            return cut_file(f, path, len);
        }
    }
    let rotated = rotated_files(path)?;
    let Some(at) = rotated
        .iter()
        .position(|p| std::fs::metadata(p).is_ok_and(|m| m.ino() == ino))
    else {
        return Ok(Some(format!(
            "{}: the checkpoint's file (inode {ino}) is neither there nor among its rotated files (removed by retention or from outside?); appending, records after the checkpoint may be written twice",
            path.display()
        )));
    };
    let mut what = Vec::new();
    for newer in &rotated[at + 1..] {
        std::fs::remove_file(newer)?;
        what.push(format!("removed {}", newer.display()));
    }
    let old = &rotated[at];
    let f = OpenOptions::new().write(true).open(old)?;
    if let Some(m) = cut_file(&f, old, len)? {
        what.push(m);
    }
    // Renamed over the file started after the checkpoint (records after
    // it only): the outputs are as they were at the checkpoint.
    std::fs::rename(old, path)?;
    if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        File::open(dir)?.sync_all()?;
    }
    what.push(format!(
        "{} renamed back to {} (rotated after the checkpoint)",
        old.display(),
        path.display()
    ));
    Ok(Some(what.join("; ")))
}

/// Cuts an output back to `pos` (before its sink is opened): a file as
/// [`file_back`] (across rotations); mmap segments newer than the
/// checkpointed one are removed and that one's committed length and count
/// are set back; an archive as [`archive_back`]. Returns a description of what was cut, if anything.
///
/// Errors: the I/O error of truncating, removing, renaming or writing a
/// header.
pub fn truncate_to(pos: &Pos) -> io::Result<Option<String>> {
    match pos {
        Pos::File { path, len, ino } => file_back(path, *len, *ino),
        Pos::Archive {
            dir,
            seq,
            open,
            len,
        } => archive_back(dir, *seq, *open, *len),
        Pos::Mmap {
            dir,
            prefix,
            seq,
            committed,
            records,
        } => {
            let mut cut = Vec::new();
            let segs = match list_segments(dir, prefix) {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            };
            for (s, path) in segs {
                if seq.map_or(true, |c| s > c) {
                    std::fs::remove_file(&path)?;
                    cut.push(format!("removed {}", path.display()));
                } else if Some(s) == *seq {
                    let h = read_header(&path)?;
                    if h.committed_bytes > *committed || h.committed_records > *records {
                        let f = OpenOptions::new().write(true).open(&path)?;
                        f.write_all_at(&committed.to_le_bytes(), MMAP_OFF_COMMITTED)?;
                        f.write_all_at(&records.to_le_bytes(), MMAP_OFF_RECORDS)?;
                        f.sync_all()?;
                        cut.push(format!(
                            "{}: committed cut from {} to {committed} bytes",
                            path.display(),
                            h.committed_bytes
                        ));
                    }
                }
            }
            Ok((!cut.is_empty()).then(|| cut.join("; ")))
        }
    }
}

/// A ring's consumption state in the checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingMark {
    /// Being served.
    Live,
    /// Producer gone, exit line written.
    Closed,
    /// Quarantined.
    Quarantined,
}

/// One ring's line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingEntry {
    /// State.
    pub mark: RingMark,
    /// Consumer index: every record below it is in the outputs.
    pub head: u64,
    /// Producer drops already reported in-band.
    pub drops_reported: u64,
    /// The ring file's lifetime nonce.
    pub nonce: u64,
    /// The ring's file name.
    pub file: String,
}

/// A whole checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checkpoint {
    /// Output positions.
    pub outputs: Vec<Pos>,
    /// Rings.
    pub rings: Vec<RingEntry>,
}

impl Checkpoint {
    /// The text form (module docs).
    pub fn encode(&self) -> String {
        let mut s = String::from("dplogd-checkpoint 3\n");
        for o in &self.outputs {
            match o {
                Pos::File { path, len, ino } => {
                    let ino = ino.map_or("-".to_string(), |i| i.to_string());
                    s += &format!("file {len} {ino} {}\n", path.display());
                }
                Pos::Mmap {
                    dir,
                    prefix,
                    seq,
                    committed,
                    records,
                } => {
                    let seq = seq.map_or("-".to_string(), |s| s.to_string());
                    s += &format!(
                        "mmap {seq} {committed} {records} {prefix} {}\n",
                        dir.display()
                    );
                }
                Pos::Archive {
                    dir,
                    seq,
                    open,
                    len,
                } => {
                    let seq = seq.map_or("-".to_string(), |s| s.to_string());
                    let o = if *open { 'O' } else { 'S' };
                    s += &format!("archive {seq} {o} {len} {}\n", dir.display());
                }
            }
        }
        for r in &self.rings {
            let m = match r.mark {
                RingMark::Live => 'L',
                RingMark::Closed => 'C',
                RingMark::Quarantined => 'Q',
            };
            s += &format!(
                "ring {m} {} {} {:016x} {}\n",
                r.head, r.drops_reported, r.nonce, r.file
            );
        }
        s += "end\n";
        s
    }

    /// Parses [`encode`](Self::encode)'s form.
    ///
    /// Versions 1 (file lines without the inode) and 2 (no archive
    /// lines) are read too.
    ///
    /// Errors: a message naming the bad line (a torn checkpoint cannot
    /// occur, it is renamed into place whole).
    pub fn decode(text: &str) -> Result<Self, String> {
        let mut lines = text.lines().enumerate();
        let version = match lines.next().map(|l| l.1) {
            Some("dplogd-checkpoint 1") => 1,
            Some("dplogd-checkpoint 2") => 2,
            Some("dplogd-checkpoint 3") => 3,
            _ => return Err("line 1 is not `dplogd-checkpoint 3` (or 2, 1)".into()),
        };
        let mut c = Checkpoint::default();
        let mut ended = false;
        for (i, line) in lines {
            let bad = || format!("line {}: cannot parse {line:?}", i + 1);
            let num = |s: Option<&str>| s.and_then(|s| s.parse::<u64>().ok()).ok_or_else(bad);
            let mut w = line.splitn(2, ' ');
            let kind = w.next().unwrap_or("");
            let rest = w.next().unwrap_or("");
            match kind {
                "file" => {
                    let mut p = rest.splitn(if version == 1 { 2 } else { 3 }, ' ');
                    let len = num(p.next())?;
                    let ino = match (version, p.clone().next()) {
                        (1, _) => None,
                        (_, Some("-")) => {
                            p.next();
                            None
                        }
                        _ => Some(num(p.next())?),
                    };
                    let path = p.next().ok_or_else(bad)?;
                    c.outputs.push(Pos::File {
                        path: path.into(),
                        len,
                        ino,
                    });
                }
                "mmap" => {
                    let mut p = rest.splitn(5, ' ');
                    let seq = match p.next() {
                        Some("-") => None,
                        s => Some(num(s)?),
                    };
                    let committed = num(p.next())?;
                    let records = num(p.next())?;
                    let prefix = p.next().ok_or_else(bad)?.to_string();
                    let dir = p.next().ok_or_else(bad)?.into();
                    c.outputs.push(Pos::Mmap {
                        dir,
                        prefix,
                        seq,
                        committed,
                        records,
                    });
                }
                "archive" if version >= 3 => {
                    let mut p = rest.splitn(4, ' ');
                    let seq = match p.next() {
                        Some("-") => None,
                        s => Some(num(s)?),
                    };
                    let open = match p.next() {
                        Some("O") => true,
                        Some("S") => false,
                        _ => return Err(bad()),
                    };
                    let len = num(p.next())?;
                    let dir = p.next().ok_or_else(bad)?.into();
                    c.outputs.push(Pos::Archive {
                        dir,
                        seq,
                        open,
                        len,
                    });
                }
                "ring" => {
                    let mut p = rest.splitn(5, ' ');
                    let mark = match p.next() {
                        Some("L") => RingMark::Live,
                        Some("C") => RingMark::Closed,
                        Some("Q") => RingMark::Quarantined,
                        _ => return Err(bad()),
                    };
                    let head = num(p.next())?;
                    let drops_reported = num(p.next())?;
                    let nonce = p
                        .next()
                        .and_then(|s| u64::from_str_radix(s, 16).ok())
                        .ok_or_else(bad)?;
                    let file = p.next().ok_or_else(bad)?.to_string();
                    c.rings.push(RingEntry {
                        mark,
                        head,
                        drops_reported,
                        nonce,
                        file,
                    });
                }
                "end" => {
                    ended = true;
                    break;
                }
                _ => return Err(bad()),
            }
        }
        if !ended {
            return Err("no `end` line".into());
        }
        Ok(c)
    }
}

/// Reads the checkpoint at `path`; `Ok(None)` if there is none.
///
/// Errors: reading it, or [`Checkpoint::decode`]'s message.
pub fn load(path: &Path) -> Result<Option<Checkpoint>, String> {
    match std::fs::read_to_string(path) {
        Ok(t) => Checkpoint::decode(&t)
            .map(Some)
            .map_err(|e| format!("checkpoint {}: {e}", path.display())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("checkpoint {}: {e}", path.display())),
    }
}

/// Writes `c` to `path` atomically (`<path>.tmp`, renamed), fsync'd
/// (file, then directory) when `fsync`.
///
/// Errors: the I/O error.
/// A write that fails (a full disk) removes `<path>.tmp` again: no stale,
/// empty or partial temporary is left beside the checkpoint.
pub fn save(path: &Path, c: &Checkpoint, fsync: bool) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let written = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(c.encode().as_bytes())?;
        if fsync {
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        // Best effort: the error reported is the write's.
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if fsync {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Whether a checkpoint write error is one that passes (no room on a full
/// disk or quota, an I/O error: the retryable sink errors,
/// [`dplog_core::SinkError`]), so the daemon retries instead of stopping.
pub fn retryable(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSPC | libc::EIO | libc::EDQUOT | libc::ENOBUFS)
    )
}

/// The retries of a checkpoint write that fails retryably ([`retryable`]):
/// the next attempt waits a backoff (10 ms doubling to 1 s), and the
/// failure is said on stderr at most every 5 s. Until a checkpoint is
/// written no ring slot is freed: the rings hold the records not
/// checkpointed and producers follow their policy (as with a full disk
/// under a sink).
#[derive(Debug, Default)]
pub struct Retry {
    /// When the next attempt is due (`None`: no failure pending).
    next: Option<std::time::Instant>,
    backoff: std::time::Duration,
    /// Failed attempts since the last checkpoint written.
    failures: u64,
    said: Option<std::time::Instant>,
}

impl Retry {
    const FIRST: std::time::Duration = std::time::Duration::from_millis(10);
    const MOST: std::time::Duration = std::time::Duration::from_secs(1);
    const SAY_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

    /// Whether an attempt may be made at `now` (no failure pending, or its
    /// backoff has passed).
    pub fn due(&self, now: std::time::Instant) -> bool {
        self.next.map_or(true, |t| now >= t)
    }

    /// The backoff before the next attempt after a failure at `now`
    /// (without waiting).
    pub fn wait(&self, now: std::time::Instant) -> std::time::Duration {
        self.next.map_or(std::time::Duration::ZERO, |t| {
            t.saturating_duration_since(now)
        })
    }

    /// Records a failed attempt at `now` of writing the checkpoint at
    /// `path`, and says so on stderr (with the records it holds back,
    /// `waiting`) when 5 s have passed since it last did.
    pub fn failed(&mut self, now: std::time::Instant, path: &Path, e: &io::Error, waiting: u64) {
        self.backoff = if self.failures == 0 {
            Self::FIRST
        } else {
            (self.backoff * 2).min(Self::MOST)
        };
        self.failures += 1;
        self.next = Some(now + self.backoff);
        if self
            .said
            .map_or(true, |t| now.duration_since(t) >= Self::SAY_EVERY)
        {
            self.said = Some(now);
            eprintln!(
                "dplogd: writing the checkpoint {}: {e}; {waiting} records read and not checkpointed; retrying (the rings hold them, producers see their policy)",
                path.display()
            );
        }
    }

    /// Records a checkpoint written, saying so if attempts had failed.
    pub fn succeeded(&mut self, path: &Path) {
        if self.failures > 0 {
            eprintln!(
                "dplogd: the checkpoint {} is written again (after {} failed attempts)",
                path.display(),
                self.failures
            );
        }
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let c = Checkpoint {
            outputs: vec![
                Pos::File {
                    path: "/tmp/a b.log".into(),
                    len: 12345,
                    ino: Some(77),
                },
                Pos::File {
                    path: "/tmp/none".into(),
                    len: 0,
                    ino: None,
                },
                Pos::Mmap {
                    dir: "/tmp/mm dir".into(),
                    prefix: "nat".into(),
                    seq: Some(3),
                    committed: 99,
                    records: 2,
                },
                Pos::Mmap {
                    dir: "/x".into(),
                    prefix: "p".into(),
                    seq: None,
                    committed: 0,
                    records: 0,
                },
                Pos::Archive {
                    dir: "/tmp/ar dir".into(),
                    seq: Some(4),
                    open: true,
                    len: 4096,
                },
                Pos::Archive {
                    dir: "/a".into(),
                    seq: None,
                    open: false,
                    len: 0,
                },
            ],
            rings: vec![RingEntry {
                mark: RingMark::Closed,
                head: 77,
                drops_reported: 5,
                nonce: 0xdead_beef_0000_0001,
                file: "nat.12.deadbeef00000001.ring".into(),
            }],
        };
        assert_eq!(Checkpoint::decode(&c.encode()).unwrap(), c);
        assert!(Checkpoint::decode("dplogd-checkpoint 1\nfile x y\nend\n").is_err());
        assert!(Checkpoint::decode("dplogd-checkpoint 1\n").is_err());
        // Version 1: no inode.
        let v1 = Checkpoint::decode("dplogd-checkpoint 1\nfile 5 /a b\nend\n").unwrap();
        assert_eq!(
            v1.outputs,
            vec![Pos::File {
                path: "/a b".into(),
                len: 5,
                ino: None
            }]
        );
    }
}
