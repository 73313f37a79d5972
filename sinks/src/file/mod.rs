//! The file sink: appends formatted batches to a file, with fsync policies,
//! size- and time-based rotation with retention, and reopen for logrotate.

#[cfg(feature = "config")]
pub mod config;
#[cfg(feature = "config")]
pub use config::{FileSinkConfig, FsyncSetting, HasherSetting, SealConfig};

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::accounting::{bump, fingerprint, named, read};
use crate::seal::{HasherMode, SealOptions, Sealer};
use dplog_core::{Accepted, Kept, Sink, SinkError};

pub use crate::FILE_MODE;

/// How long a size or time rotation that failed (other than for a vanished
/// live file, which is replaced at once) waits before it is tried again;
/// writes go on to the current file meanwhile.
pub const ROTATE_RETRY: Duration = Duration::from_secs(1);

/// When the file sink calls `fdatasync(2)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// Only at rotation and close; the kernel writes back on its own.
    #[default]
    Never,
    /// At most every this many milliseconds, from the periodic tick, when
    /// something was written since the last sync.
    EveryMs(u64),
    /// After every batch, before the batch counts as delivered.
    EveryBatch,
}

/// File sink settings. `Default` is: no fsync but at close, no rotation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileSinkOptions {
    /// When to `fdatasync`.
    pub fsync: FsyncPolicy,
    /// Rotate before the file would grow beyond this many bytes. Batches
    /// are split at line boundaries, so a file exceeds it only when a
    /// single line is larger, or while a rotation that failed waits for
    /// its retry ([`ROTATE_RETRY`]). `None`: no size limit.
    pub max_size_bytes: Option<u64>,
    /// Rotate a non-empty file this many milliseconds after it was opened.
    /// `None`: no time-based rotation.
    pub rotate_interval_ms: Option<u64>,
    /// Keep at most this many rotated files (the oldest go first), at
    /// least 1; `None`: keep them all. `Some(0)` is refused by
    /// [`FileSink::with_options`] (it would delete every rotated file).
    pub keep_files: Option<usize>,
    /// Delete rotated files last modified more than this many days ago, at
    /// least 1; `None`: never. `Some(0)` is refused like `keep_files`.
    pub keep_days: Option<u32>,
    /// Reopen the path when the process receives `SIGHUP` (installs a
    /// handler that only sets a flag, via `signal-hook`; the reopen happens
    /// on the consumer thread at the next tick).
    pub reopen_on_sighup: bool,
    /// The stream's header line (CSV's column names, `\n`-terminated),
    /// written once at the top of each file: a file that is empty when the
    /// sink opens it, rotates to it or reopens it starts with it (written
    /// before the first bytes of a batch that does not already begin with
    /// it), and a batch that begins with it while the file already has
    /// content has that copy dropped, so a file appended to by several
    /// runs holds it once. A file that is not empty at open and does not
    /// start with this header (another run's record types, schema ids or
    /// columns) is not appended to: [`FileSink::with_options`] rotates it
    /// aside (`<path>.<unix-ms>`, as [`FileSink::rotate`]), says so on
    /// stderr and counts it in [`FileSinkCounters::header_changed`], so
    /// no row lands under another run's columns. `None` (default): bytes
    /// are written as given.
    pub header: Option<Vec<u8>>,
    /// Seal what is written ([`crate::seal`]): every write's bytes are
    /// chained with BLAKE3 and the chain head signed with Ed25519, in
    /// `<path>.seal` beside the file (rotated with it, deleted with it by
    /// retention). The file's bytes are unchanged. Refused together with
    /// `reopen_on_sighup` (an external rotation would move the file
    /// without its seal). `None` (default): no seal.
    pub seal: Option<SealOptions>,
}

/// Counters of one file sink, shared with whoever asked for them with
/// [`FileSink::counters`] (the sink itself usually lives in the consumer
/// thread). Each is written by the consumer thread only (Relaxed; read
/// them as statistics, exact after `Logger::shutdown` joined the thread).
#[derive(Debug, Default)]
pub struct FileSinkCounters {
    /// `write(2)` calls that failed with `ENOSPC` or `EDQUOT`.
    pub enospc: AtomicU64,
    /// Calls that failed with `EIO` (write or fdatasync).
    pub eio: AtomicU64,
    /// Other failed calls.
    pub other_errors: AtomicU64,
    /// Files rotated.
    pub rotations: AtomicU64,
    /// Rotated files deleted by retention.
    pub deleted: AtomicU64,
    /// Reopens (API or SIGHUP).
    pub reopens: AtomicU64,
    /// Successful `fdatasync` calls.
    pub syncs: AtomicU64,
    /// Rotations that found the live file gone from its path (moved or
    /// deleted from outside) and started a new file there instead.
    pub vanished: AtomicU64,
    /// Writes that stopped inside a record (a full disk) and were cut back
    /// to the last whole record with `ftruncate`.
    pub cut_back: AtomicU64,
    /// Signed heads the seal's anchor sink refused (not sent; the seal
    /// file has them).
    pub anchor_failed: AtomicU64,
    /// Files found at open under another header than the configured
    /// [`FileSinkOptions::header`] (a CSV log of other record types or
    /// columns) and rotated aside so that this sink's rows start a file
    /// of their own (each is also counted in `rotations`).
    pub header_changed: AtomicU64,
}

impl FileSinkCounters {
    fn count_error(&self, e: &io::Error) {
        match e.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => bump(&self.enospc, 1),
            Some(libc::EIO) => bump(&self.eio, 1),
            _ => bump(&self.other_errors, 1),
        }
    }

    /// Reads one counter (Relaxed).
    pub fn get(c: &AtomicU64) -> u64 {
        read(c)
    }
}

impl dplog_core::SinkCounters for FileSinkCounters {
    fn named(&self) -> Vec<(String, u64)> {
        named(
            "file",
            &[
                ("enospc", &self.enospc),
                ("eio", &self.eio),
                ("other_errors", &self.other_errors),
                ("rotations", &self.rotations),
                ("deleted", &self.deleted),
                ("reopens", &self.reopens),
                ("syncs", &self.syncs),
                ("vanished", &self.vanished),
                ("cut_back", &self.cut_back),
                ("anchor_failed", &self.anchor_failed),
                ("header_changed", &self.header_changed),
            ],
        )
    }
}

/// Appends batches to one file.
///
/// Opened with `O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW` and
/// mode [`FILE_MODE`]: every batch lands at the end of the file even when
/// another writer appends (or an external `truncate` shortened it: no NUL
/// runs), the descriptor does not leak into child processes, and a symlink
/// placed at the path is refused (`ELOOP`) instead of followed.
///
/// Each batch is written with `write(2)` until complete. Records are
/// atomic in the file: when a write stops inside a record (`ENOSPC` on a
/// full disk), the file is cut back to the end of the last whole record
/// (`ftruncate`, on that error path only), so no torn record stays and the
/// next write cannot glue onto one. The sink remembers how many bytes of
/// the batch are in the file and returns the classified [`SinkError`]; the
/// retry with the same batch resumes there, so a record is never lost or
/// duplicated. If the runtime gives up on the batch instead, the whole
/// records already written stay and are reported by
/// [`Sink::kept_of_refused`] (counted as written). Record boundaries are
/// read from the bytes: a batch that starts with a dplog binary frame
/// (format `binary`) is cut at frames, one that starts with a NUL byte
/// (IPFIX) only at its start, anything else at `\n`. Rotation happens only
/// at line boundaries.
///
/// The live file may be moved or deleted from outside at any time: a size
/// or time rotation that finds it gone starts a new file at the path
/// (counted in [`FileSinkCounters::vanished`]), and so does a reopen. What
/// was written before is wherever the file went. A rotation that fails
/// otherwise (a directory that is gone or not writable) is retried after
/// [`ROTATE_RETRY`] while writes go on to the current file, past the size
/// limit: a failed rotation never refuses a record.
///
/// Rotated files are named `<path>.<unix-ms, 13 digits>`; stamps only grow
/// (a rotation within the same millisecond takes the next one), so sorting
/// by name sorts by age.
#[derive(Debug)]
pub struct FileSink {
    path: PathBuf,
    file: Option<File>,
    opts: FileSinkOptions,
    /// Bytes in the current file (as seen by this sink).
    size: u64,
    opened_at: Instant,
    /// Written since the last fdatasync.
    dirty: bool,
    last_sync: Instant,
    /// `(batch fingerprint, bytes of it already written)` after a failed
    /// write.
    resume: Option<(u64, usize)>,
    /// errno of the last failed write whose batch no later write replaced
    /// (the runtime gave up on it); [`Sink::close`] reports it.
    unwritten: Option<i32>,
    sighup: Option<(Arc<AtomicBool>, signal_hook::SigId)>,
    /// Stamp of the newest rotated file.
    last_stamp: u128,
    /// A failed rotation is not tried again before this instant.
    rotate_retry_at: Option<Instant>,
    /// Length the current file must be cut back to before anything else is
    /// written: a torn record whose `ftruncate` failed.
    torn: Option<u64>,
    /// The file was opened non-empty and not ending with `\n`: another
    /// process (an earlier run killed inside a write) left a torn line.
    /// A line batch first ends that line, so its first record stays whole
    /// instead of being glued onto the fragment.
    unterminated: bool,
    counters: Arc<FileSinkCounters>,
    /// The seal of the current file, when sealing is on.
    sealer: Option<Sealer>,
    /// The batch being written is the consumer's buffer, handed over to
    /// the seal's hasher thread once written: its pieces are deferred.
    defer_seal: bool,
}

/// Seals `bytes`, just written at `off` of the current file; a failed
/// seal write is counted (the sealer keeps the entry for its next write).
fn seal_bytes(sealer: &mut Option<Sealer>, counters: &FileSinkCounters, off: u64, bytes: &[u8]) {
    if let Some(s) = sealer.as_mut() {
        if let Err(e) = s.sealed(off, bytes) {
            counters.count_error(&e);
        }
    }
}

/// How a batch divides into records, read from its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    /// `\n`-terminated lines (every text format).
    Lines,
    /// dplog binary frames; `R` frames are the records.
    Frames,
    /// Boundaries not visible (IPFIX messages): the batch is one unit.
    Opaque,
}

/// Length of the binary frame at the start of `b` (4-byte header
/// included), if `b` starts with a whole frame of the binary format.
fn frame_len(b: &[u8]) -> Option<usize> {
    if b.len() < 4 || b[1] != 0 {
        return None;
    }
    let n = 4 + u16::from_le_bytes([b[2], b[3]]) as usize;
    (n <= b.len()).then_some(n)
}

/// The framing of a batch: binary frames if it starts with a binary log's
/// `H` frame or a whole `R`/`S`/`C`/`D` frame (record, schema, TSC
/// calibration, drop report; a formatted line never has a NUL as its
/// second byte), opaque if it starts with a NUL (an IPFIX message header),
/// else lines.
fn framing_of(b: &[u8]) -> Framing {
    let h = b.len() >= 12 && b[0] == b'H' && b[1] == 0 && &b[4..12] == b"DPLOGBIN";
    if h || (matches!(b.first(), Some(b'R' | b'S' | b'C' | b'D')) && frame_len(b).is_some()) {
        Framing::Frames
    } else if b.first() == Some(&0) {
        Framing::Opaque
    } else {
        Framing::Lines
    }
}

/// Bytes of the longest prefix of `b` made of whole records (`b` starts at
/// a record boundary).
fn whole_records(b: &[u8], framing: Framing) -> usize {
    match framing {
        Framing::Lines => memchr::memrchr(b'\n', b).map_or(0, |i| i + 1),
        Framing::Frames => {
            let mut p = 0;
            while let Some(n) = frame_len(&b[p..]) {
                p += n;
            }
            p
        }
        Framing::Opaque => 0,
    }
}

fn with_path(path: &Path, e: io::Error) -> io::Error {
    let kind = e.kind();
    match e.raw_os_error() {
        Some(libc::ELOOP) => io::Error::new(
            kind,
            format!(
                "{}: is a symbolic link; refusing to follow it (O_NOFOLLOW)",
                path.display()
            ),
        ),
        Some(n) => io::Error::new(
            kind,
            format!("{}: {}", path.display(), io::Error::from_raw_os_error(n)),
        ),
        None => io::Error::new(kind, format!("{}: {e}", path.display())),
    }
}

/// Whether the file at `path`, `size` bytes long, is non-empty and does not
/// end with `\n` (read through a descriptor of its own: the sink's is
/// write-only). Unreadable counts as terminated: nothing is added then.
fn ends_unterminated(path: &Path, size: u64) -> bool {
    use std::os::unix::fs::FileExt;
    if size == 0 {
        return false;
    }
    let Ok(f) = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)
    else {
        return false;
    };
    let mut last = [0u8; 1];
    matches!(f.read_at(&mut last, size - 1), Ok(1)) && last[0] != b'\n'
}

/// `open(2)` with the sink's flags; the raw error (errno kept, so it can be
/// classified), without the path.
fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)
}

/// Writes every byte of `buf` with `write(2)`, handling short writes and
/// `EINTR`. Returns the bytes written before an error together with the
/// error.
///
/// Plain `write(2)`, not `writev(2)`: the consumer formats every record of
/// a batch into one contiguous buffer, and a retry resumes inside that
/// same buffer, so there is never more than one buffer to gather; a
/// one-element `writev` moves the same bytes through an extra iovec.
fn write_all_counted(file: &mut File, buf: &[u8]) -> (usize, io::Result<()>) {
    let mut done = 0usize;
    while done < buf.len() {
        match file.write(&buf[done..]) {
            Ok(0) => return (done, Err(io::Error::from(io::ErrorKind::WriteZero))),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (done, Err(e)),
        }
    }
    (done, Ok(()))
}

impl FileSink {
    /// Opens (creating if needed) `path` for appending with default options.
    ///
    /// Errors: the `open(2)` error with the path in the message, e.g.
    /// `NotFound` for a missing directory, `PermissionDenied`, or `ELOOP`
    /// ("refusing to follow") when `path` is a symbolic link.
    pub fn open(path: impl AsRef<Path>) -> io::Result<Self> {
        Self::with_options(path, FileSinkOptions::default())
    }

    /// Opens `path` with `opts`; errors as [`open`](Self::open), plus
    /// `InvalidInput` for a zero size limit or interval, for `keep_files`
    /// or `keep_days` of 0 (naming the key: it would delete every rotated
    /// file; `None` keeps them all), and the
    /// `signal-hook` error if the SIGHUP handler cannot be installed.
    pub fn with_options(path: impl AsRef<Path>, opts: FileSinkOptions) -> io::Result<Self> {
        let path = path.as_ref().to_path_buf();
        if opts.max_size_bytes == Some(0)
            || opts.rotate_interval_ms == Some(0)
            || opts.fsync == FsyncPolicy::EveryMs(0)
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "max_size_bytes, rotate_interval_ms and fsync interval must be > 0",
            ));
        }
        for (key, zero) in [
            ("keep_files", opts.keep_files == Some(0)),
            ("keep_days", opts.keep_days == Some(0)),
        ] {
            if zero {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{key} = 0 would delete every rotated file of {}; leave {key} out to keep them all, or give 1 or more",
                        path.display()
                    ),
                ));
            }
        }
        if opts.seal.is_some() && opts.reopen_on_sighup {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: seal with reopen_on_sighup: an external rotation would move the file \
                     without its seal file; rotate with max_size_bytes or rotate_interval_ms \
                     (the sink rotates both)",
                    path.display()
                ),
            ));
        }
        if let Some(seal) = &opts.seal {
            // The key first: a missing or unprotected key refuses the sink
            // before any file is created.
            crate::seal::load_signing_key(&seal.key_file)?;
        }
        let file = open_append(&path).map_err(|e| with_path(&path, e))?;
        let size = file.metadata().map_err(|e| with_path(&path, e))?.len();
        let sealer = match &opts.seal {
            Some(seal) => {
                let mut s = Sealer::open(&path, size, seal)?;
                if seal.hasher == HasherMode::Thread {
                    s.start_hasher(seal.hasher_cpu)?;
                }
                Some(s)
            }
            None => None,
        };
        let unterminated = ends_unterminated(&path, size);
        let sighup = if opts.reopen_on_sighup {
            let flag = Arc::new(AtomicBool::new(false));
            let id = signal_hook::flag::register(signal_hook::consts::SIGHUP, flag.clone())?;
            Some((flag, id))
        } else {
            None
        };
        let now = Instant::now();
        let mut sink = Self {
            path,
            file: Some(file),
            opts,
            size,
            opened_at: now,
            dirty: false,
            last_sync: now,
            resume: None,
            unwritten: None,
            sighup,
            last_stamp: 0,
            rotate_retry_at: None,
            torn: None,
            unterminated,
            counters: Arc::new(FileSinkCounters::default()),
            sealer,
            defer_seal: false,
        };
        if let Some(newest) = sink.rotated_files()?.last() {
            sink.last_stamp = rotation_stamp(newest);
        }
        if sink.size > 0 && !sink.starts_with_header()? {
            sink.rotate().map_err(SinkError::into_io)?;
            bump(&sink.counters.header_changed, 1);
            let aside = sink.rotated_files()?.pop().unwrap_or_default();
            eprintln!(
                "dplog: {}: its header line is not this log's (other record types, schema ids or columns); moved aside to {} and a new file started",
                sink.path.display(),
                aside.display()
            );
        }
        Ok(sink)
    }

    /// True if the file has no configured header to match, or starts
    /// with it.
    fn starts_with_header(&self) -> io::Result<bool> {
        let Some(h) = self.opts.header.as_deref().filter(|h| !h.is_empty()) else {
            return Ok(true);
        };
        let mut head = Vec::with_capacity(h.len());
        File::open(&self.path)
            .and_then(|f| f.take(h.len() as u64).read_to_end(&mut head))
            .map_err(|e| with_path(&self.path, e))?;
        Ok(head == h)
    }

    /// Sends every head the seal signs also to `sink`
    /// ([`Sealer::set_anchor`]); failures are counted in
    /// [`FileSinkCounters::anchor_failed`].
    ///
    /// # Errors
    /// `InvalidInput` when the sink has no seal.
    pub fn set_seal_anchor(&mut self, sink: Box<dyn Sink>) -> io::Result<()> {
        self.anchor_to(sink, None)
    }

    /// Sends every head the seal signs also to `sink` as a
    /// [`SealHead`](crate::seal::anchor::SealHead) record in `formatter`'s
    /// format ([`Sealer::set_anchor_records`]; a Kafka topic, a ClickHouse
    /// table, ...); failures are counted in
    /// [`FileSinkCounters::anchor_failed`].
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
        // A sealed file sink has its sealer from the start: nothing waits
        // for a first one.
        crate::seal::Sealer::place_anchor(
            self.sealer.is_some(),
            &self.path,
            self.sealer.as_mut(),
            &mut None,
            sink,
            records,
            Box::new(move |_| bump(&counters.anchor_failed, 1)),
        )
    }

    /// The path this sink writes to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The options in force.
    pub fn options(&self) -> &FileSinkOptions {
        &self.opts
    }

    /// A handle on this sink's counters, readable from any thread.
    pub fn counters(&self) -> Arc<FileSinkCounters> {
        self.counters.clone()
    }

    fn closed() -> SinkError {
        SinkError::Permanent(io::Error::new(
            io::ErrorKind::BrokenPipe,
            "file sink is closed",
        ))
    }

    fn err(&self, e: io::Error) -> SinkError {
        self.counters.count_error(&e);
        SinkError::classify(e)
    }

    fn sync(&mut self) -> Result<(), SinkError> {
        let Some(f) = self.file.as_ref() else {
            return Err(Self::closed());
        };
        let synced = f
            .sync_data()
            .or_else(unsyncable_is_ok)
            .and_then(|()| self.sealer.as_mut().map_or(Ok(()), Sealer::sync));
        match synced {
            Ok(()) => {
                self.dirty = false;
                self.last_sync = Instant::now();
                bump(&self.counters.syncs, 1);
                Ok(())
            }
            Err(e) => Err(self.err(e)),
        }
    }

    /// Closes the current file and opens `path` again, creating it: after
    /// an external `mv path path.1` the sink writes to the new `path`,
    /// never to the moved file. Pending bytes are synced first unless the
    /// policy is [`FsyncPolicy::Never`].
    ///
    /// Errors: the `open(2)` error (retryable for ENOSPC/EIO); the sink
    /// then stays on the old file.
    pub fn reopen_file(&mut self) -> Result<(), SinkError> {
        if self.file.is_none() {
            return Err(Self::closed());
        }
        self.settle()?;
        if self.dirty && self.opts.fsync != FsyncPolicy::Never {
            self.sync()?;
        }
        let f = open_append(&self.path).map_err(|e| self.err(e))?;
        let size = f.metadata().map_err(|e| self.err(e))?.len();
        if self.sealer.is_some() && !self.same_file(&f) {
            self.seal_moved("moved", size)?;
        }
        self.size = size;
        self.unterminated = ends_unterminated(&self.path, self.size);
        self.file = Some(f);
        self.opened_at = Instant::now();
        self.rotate_retry_at = None;
        bump(&self.counters.reopens, 1);
        Ok(())
    }

    /// Whether `f` is the file the sink has open (same device and inode).
    fn same_file(&self, f: &File) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (
            self.file.as_ref().and_then(|o| o.metadata().ok()),
            f.metadata().ok(),
        ) {
            (Some(a), Some(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }

    /// The sealed file left the path from outside (moved or deleted): its
    /// seal is signed and renamed to `<path>.<why>-<ms>.seal` (a rotated
    /// set then shows a missing file there), and the file now at the path
    /// (`size` bytes) starts the log's next file.
    fn seal_moved(&mut self, why: &str, size: u64) -> Result<(), SinkError> {
        let Some(s) = self.sealer.as_mut() else {
            return Ok(());
        };
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_millis();
        let gone = PathBuf::from(format!("{}.{why}-{ms:013}", self.path.display()));
        let r = s.rotate_to(&gone).and_then(|()| s.start_next(size));
        r.map_err(|e| self.err(e))
    }

    /// Cuts the current file back to the length a failed `ftruncate` left
    /// pending (a torn record at its end), before anything else is
    /// written to it or it is left.
    fn settle(&mut self) -> Result<(), SinkError> {
        let (Some(len), Some(f)) = (self.torn, self.file.as_ref()) else {
            return Ok(());
        };
        match f.set_len(len) {
            Ok(()) => {
                self.torn = None;
                Ok(())
            }
            Err(e) => Err(self.err(e)),
        }
    }

    /// A write stopped `excess` bytes past the last whole record: cut the
    /// file back by that much (the real length from `fstat`, so an
    /// external truncate or append is respected). A failed cut is retried
    /// by [`settle`](Self::settle) before the next write.
    fn cut_back(&mut self, excess: usize) {
        let Some(f) = self.file.as_ref() else {
            return;
        };
        bump(&self.counters.cut_back, 1);
        let len = match f.metadata() {
            Ok(m) => m.len(),
            Err(e) => {
                self.counters.count_error(&e);
                self.size + excess as u64
            }
        }
        .saturating_sub(excess as u64);
        if let Err(e) = f.set_len(len) {
            self.counters.count_error(&e);
            self.torn = Some(len);
        }
    }

    /// True while a failed rotation waits for [`ROTATE_RETRY`].
    fn rotation_deferred(&mut self) -> bool {
        match self.rotate_retry_at {
            Some(t) if Instant::now() < t => true,
            Some(_) => {
                self.rotate_retry_at = None;
                false
            }
            None => false,
        }
    }

    /// A rotation attempt: a retryable error (ENOSPC, EIO) is returned as
    /// a write error would be; any other leaves the sink on its current
    /// file and defers rotation for [`ROTATE_RETRY`] (the error is counted
    /// in the counters).
    fn try_rotate(&mut self) -> Result<(), SinkError> {
        match self.rotate() {
            Err(e) if e.is_retryable() => Err(e),
            Err(_) => {
                self.rotate_retry_at = Some(Instant::now() + ROTATE_RETRY);
                Ok(())
            }
            Ok(()) => Ok(()),
        }
    }

    /// Renames the current file to `<path>.<unix-ms>` and opens a fresh
    /// one, then applies retention. Nothing is lost: the old descriptor is
    /// synced (unless the policy is `Never`) and only then closed. When
    /// nothing is at the path any more (the live file was moved or deleted
    /// from outside), a new file is started there instead, without a
    /// rotated file (counted in [`FileSinkCounters::vanished`]).
    ///
    /// Errors: the `rename(2)` or `open(2)` error (`NotFound` when the
    /// directory is gone); the sink then stays on its current file.
    pub fn rotate(&mut self) -> Result<(), SinkError> {
        if self.file.is_none() {
            return Err(Self::closed());
        }
        self.settle()?;
        if self.opts.fsync != FsyncPolicy::Never {
            self.sync()?;
        }
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_millis();
        // Stamps only grow, so name order is age order even for several
        // rotations within one millisecond or after a clock step back.
        let mut stamp = ms.max(self.last_stamp + 1);
        let mut target = PathBuf::from(format!("{}.{stamp:013}", self.path.display()));
        while target.exists() {
            stamp += 1;
            target = PathBuf::from(format!("{}.{stamp:013}", self.path.display()));
        }
        match std::fs::rename(&self.path, &target) {
            Ok(()) => self.last_stamp = stamp,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return self.replace_vanished(),
            Err(e) => return Err(self.err(e)),
        }
        if let Some(s) = self.sealer.as_mut() {
            // Signed and renamed with its file, or the file goes back.
            if let Err(e) = s.rotate_to(&target) {
                let _ = std::fs::rename(&target, &self.path);
                return Err(self.err(e));
            }
        }
        match open_append(&self.path) {
            Ok(f) => {
                self.file = Some(f);
                self.size = 0;
                self.opened_at = Instant::now();
                self.dirty = false;
            }
            Err(e) => {
                // Put the file back so writes keep going to `path`.
                let _ = std::fs::rename(&target, &self.path);
                if let Some(s) = self.sealer.as_mut() {
                    s.unrotate(&target);
                }
                return Err(self.err(e));
            }
        }
        if let Some(s) = self.sealer.as_mut() {
            // The next file of the log, continuing the chain's head.
            if let Err(e) = s.start_next(0) {
                self.counters.count_error(&e);
            }
        }
        bump(&self.counters.rotations, 1);
        self.apply_retention();
        Ok(())
    }

    /// True when the open file has no name left (`st_nlink == 0`: deleted
    /// from outside). A failed `fstat` says no; the write reports the error.
    fn live_file_unlinked(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        self.file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .is_some_and(|m| m.nlink() == 0)
    }

    /// The live file is gone from the path: start a new one there. (Its
    /// directory being gone too is the `NotFound` error of the `open`.)
    fn replace_vanished(&mut self) -> Result<(), SinkError> {
        let f = open_append(&self.path).map_err(|e| self.err(e))?;
        let size = f.metadata().map_err(|e| self.err(e))?.len();
        self.seal_moved("vanished", size)?;
        self.size = size;
        self.unterminated = ends_unterminated(&self.path, self.size);
        self.file = Some(f);
        self.opened_at = Instant::now();
        self.dirty = false;
        bump(&self.counters.vanished, 1);
        Ok(())
    }

    /// Rotated files of this sink, oldest first ([`rotated_files`]).
    pub fn rotated_files(&self) -> io::Result<Vec<PathBuf>> {
        rotated_files(&self.path)
    }

    fn apply_retention(&mut self) {
        let Ok(mut files) = self.rotated_files() else {
            bump(&self.counters.other_errors, 1);
            return;
        };
        if let Some(days) = self.opts.keep_days {
            let max_age = Duration::from_secs(u64::from(days) * 86_400);
            let now = SystemTime::now();
            files.retain(|p| {
                let old = std::fs::metadata(p)
                    .and_then(|m| m.modified())
                    .map(|t| now.duration_since(t).unwrap_or(Duration::ZERO) > max_age)
                    .unwrap_or(false);
                if old && std::fs::remove_file(p).is_ok() {
                    let _ = std::fs::remove_file(crate::seal::seal_path(p));
                    bump(&self.counters.deleted, 1);
                    return false;
                }
                true
            });
        }
        if let Some(keep) = self.opts.keep_files {
            let excess = files.len().saturating_sub(keep);
            for p in &files[..excess] {
                if std::fs::remove_file(p).is_ok() {
                    let _ = std::fs::remove_file(crate::seal::seal_path(p));
                    bump(&self.counters.deleted, 1);
                }
            }
        }
    }

    /// Writes `batch[start..]` (whole records) to the current file,
    /// rotating at line boundaries when the size limit is reached. Returns
    /// how many bytes are written, whole records only (a record torn by an
    /// error is cut back off the file).
    fn append(&mut self, batch: &[u8], start: usize) -> (usize, Result<(), SinkError>) {
        let mut bytes = &batch[start..];
        let mut written = 0usize;
        if self.torn.is_some() {
            if let Err(e) = self.settle() {
                return (0, Err(e));
            }
        }
        if self.unterminated && !bytes.is_empty() {
            if framing_of(batch) == Framing::Lines {
                let Some(file) = self.file.as_mut() else {
                    return (0, Err(Self::closed()));
                };
                if let (_, Err(e)) = write_all_counted(file, b"\n") {
                    return (0, Err(self.err(e)));
                }
                seal_bytes(&mut self.sealer, &self.counters, self.size, b"\n");
                self.size += 1;
                self.dirty = true;
            }
            self.unterminated = false;
        }
        while !bytes.is_empty() {
            if let Err(e) = self.write_header_if_empty(bytes) {
                return (written, Err(e));
            }
            let mut chunk = bytes;
            if let Some(max) = self.opts.max_size_bytes {
                let room = max.saturating_sub(self.size) as usize;
                if chunk.len() > room && !self.rotation_deferred() {
                    // Cut after the last newline that fits.
                    match memchr::memrchr(b'\n', &chunk[..room.min(chunk.len())]) {
                        Some(i) => chunk = &chunk[..=i],
                        None if self.size > 0 => {
                            self.seal_deferred(batch);
                            if let Err(e) = self.try_rotate() {
                                return (written, Err(e));
                            }
                            continue;
                        }
                        // An empty file and a line larger than the limit:
                        // write that one line whole.
                        None => {
                            let end = memchr::memchr(b'\n', chunk).map_or(chunk.len(), |i| i + 1);
                            chunk = &chunk[..end];
                        }
                    }
                }
            }
            let Some(file) = self.file.as_mut() else {
                return (written, Err(Self::closed()));
            };
            let (n, r) = write_all_counted(file, chunk);
            let keep = match r {
                Ok(()) => n,
                // Error path only: keep the whole records, cut the rest.
                Err(_) => {
                    let keep = whole_records(&chunk[..n], framing_of(batch));
                    if keep < n {
                        self.cut_back(n - keep);
                    }
                    keep
                }
            };
            written += keep;
            match self.sealer.as_mut() {
                Some(s) if self.defer_seal => s.defer(self.size, batch.len() - bytes.len(), keep),
                _ => seal_bytes(&mut self.sealer, &self.counters, self.size, &chunk[..keep]),
            }
            self.size += keep as u64;
            if keep > 0 {
                self.dirty = true;
            }
            if let Err(e) = r {
                return (written, Err(self.err(e)));
            }
            bytes = &bytes[chunk.len()..];
        }
        (written, Ok(()))
    }

    /// Writes the configured header to an empty file, unless `next` (the
    /// bytes about to be written) already begins with it. A header write
    /// that fails part-way is cut back off (`ftruncate` to 0), so a retry
    /// starts the file cleanly.
    fn write_header_if_empty(&mut self, next: &[u8]) -> Result<(), SinkError> {
        let Some(h) = self.opts.header.as_deref() else {
            return Ok(());
        };
        if self.size > 0 || h.is_empty() || next.starts_with(h) {
            return Ok(());
        }
        let Some(file) = self.file.as_mut() else {
            return Err(Self::closed());
        };
        let (n, r) = write_all_counted(file, h);
        match r {
            Ok(()) => {
                seal_bytes(&mut self.sealer, &self.counters, self.size, h);
                self.size += n as u64;
                self.dirty = true;
                Ok(())
            }
            Err(e) => {
                if n > 0 {
                    let _ = file.set_len(0);
                }
                Err(self.err(e))
            }
        }
    }

    /// Seals the deferred pieces of `batch` on this thread (a rotation
    /// inside the batch, a write that failed part-way); a failed seal
    /// write is counted (the sealer keeps the entry for its next write).
    fn seal_deferred(&mut self, batch: &[u8]) {
        if let Some(s) = self.sealer.as_mut() {
            if let Err(e) = s.seal_deferred(batch) {
                self.counters.count_error(&e);
            }
        }
    }

    /// Waits for the seal's hasher thread to hash every batch handed to
    /// it, and seals them (flush, `write_out`, `sync_all`).
    fn seal_catch_up(&mut self) -> Result<(), SinkError> {
        match self.sealer.as_mut().map(Sealer::catch_up) {
            Some(Err(e)) => Err(self.err(e)),
            _ => Ok(()),
        }
    }

    /// [`Sink::write_batch`]'s work on `batch`, lent or handed over.
    fn write_lent(&mut self, batch: &[u8]) -> Result<Accepted, SinkError> {
        if self.file.is_none() {
            return Err(Self::closed());
        }
        let fp = fingerprint(batch);
        let start = match self.resume.take() {
            Some((f, done)) if f == fp => done,
            // The header is in the file already: this batch's copy of it
            // would repeat it (a second run appending, see `header`).
            _ => match self.opts.header.as_deref() {
                Some(h) if self.size > 0 && !h.is_empty() && batch.starts_with(h) => h.len(),
                _ => 0,
            },
        };
        // A live file deleted from outside would swallow every later batch
        // until the next rotation or reopen: start a new one at the path.
        // One fstat per batch, next to a write of up to `batch_bytes`.
        if start == 0 && self.live_file_unlinked() {
            self.replace_vanished()?;
        }
        if start < batch.len() {
            let (n, r) = self.append(batch, start);
            if let Err(e) = r {
                // Kept for a retry (retryable) and for `kept_of_refused`.
                self.resume = Some((fp, start + n));
                self.unwritten = e.raw_os_error();
                return Err(e);
            }
        }
        self.unwritten = None;
        if self.opts.fsync == FsyncPolicy::EveryBatch {
            if let Err(e) = self.sync() {
                // The bytes are in the file; a retry only syncs again.
                self.resume = Some((fp, batch.len()));
                return Err(e);
            }
        }
        Ok(Accepted::Delivered)
    }

    /// Serves SIGHUP, time-based rotation and the fsync interval.
    fn periodic(&mut self, now: Instant) -> Result<(), SinkError> {
        if self.file.is_none() {
            return Ok(());
        }
        if let Some((flag, _)) = &self.sighup {
            // Relaxed swap: the flag carries no data; the signal handler's
            // store is its partner.
            if flag.swap(false, Ordering::Relaxed) {
                self.reopen_file()?;
            }
        }
        if let Some(ms) = self.opts.rotate_interval_ms {
            if self.size > 0
                && now.duration_since(self.opened_at) >= Duration::from_millis(ms)
                && !self.rotation_deferred()
            {
                self.try_rotate()?;
            }
        }
        if let Some(s) = self.sealer.as_mut() {
            if let Err(e) = s.tick(now) {
                self.counters.count_error(&e);
            }
            if s.take_hasher_death() {
                return Err(SinkError::Permanent(io::Error::other(format!(
                    "{}: {}",
                    self.path.display(),
                    crate::seal::HASHER_DIED
                ))));
            }
        }
        if let FsyncPolicy::EveryMs(ms) = self.opts.fsync {
            if self.dirty && now.duration_since(self.last_sync) >= Duration::from_millis(ms) {
                self.sync()?;
            }
        }
        Ok(())
    }
}

/// The 13-digit millisecond stamp of a rotated file name (0 if none).
fn rotation_stamp(p: &Path) -> u128 {
    p.extension()
        .and_then(|e| e.to_str())
        .and_then(|e| e.parse().ok())
        .unwrap_or(0)
}

impl Sink for FileSink {
    fn write_batch(&mut self, batch: &[u8]) -> Result<Accepted, SinkError> {
        self.write_lent(batch)
    }

    /// Writes the batch as [`write_batch`](Sink::write_batch) does; with a
    /// seal hashing on its hasher thread ([`HasherMode::Thread`]) the
    /// buffer, once written, goes to that thread and a spare one comes
    /// back in its place (the batch's seal entry follows when it is
    /// hashed). A refused batch's written part is sealed here and `buf`
    /// is left as given.
    fn write_batch_owned(
        &mut self,
        buf: &mut Vec<u8>,
        reports: &[std::ops::Range<usize>],
    ) -> Result<Accepted, SinkError> {
        if !self.sealer.as_ref().is_some_and(Sealer::threaded) {
            return self.write_batch_marked(buf, reports);
        }
        self.defer_seal = true;
        let r = self.write_lent(buf);
        self.defer_seal = false;
        if let Some(s) = self.sealer.as_mut() {
            let sealed = if r.is_ok() {
                s.hand_over(buf)
            } else {
                s.seal_deferred(buf)
            };
            if let Err(e) = sealed {
                self.counters.count_error(&e);
            }
        }
        r
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        // Writes go straight to the kernel; nothing is buffered here but
        // the seal entries of batches the hasher thread holds.
        if self.file.is_none() {
            return Err(Self::closed());
        }
        self.seal_catch_up()?;
        if self.opts.fsync != FsyncPolicy::Never && self.dirty {
            self.sync()?;
        }
        Ok(())
    }

    /// Writes go straight to the kernel: only a torn tail a failed
    /// `ftruncate` left is cut (so the file's length ends at a whole
    /// record); no fsync, whatever the policy.
    fn write_out(&mut self) -> Result<(), SinkError> {
        if self.file.is_none() {
            return Err(Self::closed());
        }
        self.seal_catch_up()?;
        self.settle()
    }

    /// `fdatasync(2)` of the file if anything was written since the last
    /// sync, under every policy, `never` included.
    fn sync_all(&mut self) -> Result<(), SinkError> {
        self.write_out()?;
        if self.dirty {
            self.sync()?;
        }
        Ok(())
    }

    fn tick(&mut self, now: Instant) -> Result<(), SinkError> {
        self.periodic(now)
    }

    fn reopen(&mut self) -> Result<(), SinkError> {
        self.reopen_file()
    }

    fn abandon(&mut self) {
        self.resume = None;
    }

    /// The whole records of `batch` in the file (written before the error
    /// that refused it, in this file or in one rotated, moved or reopened
    /// since). Lines: its `\n`s, less the drop-report lines among them and
    /// the configured header line when the batch starts with it (a CSV
    /// stream has one header, over every schema, only at its start);
    /// binary: its `R` frames; opaque: none (an IPFIX batch is cut back to
    /// its start).
    fn kept_of_refused(&mut self, batch: &[u8], reports: &[std::ops::Range<usize>]) -> Kept {
        let done = match self.resume.take() {
            Some((fp, done)) if fp == fingerprint(batch) => done.min(batch.len()),
            _ => return Kept::default(),
        };
        let prefix = &batch[..done];
        let records = match framing_of(batch) {
            Framing::Lines => {
                let lines = memchr::memchr_iter(b'\n', prefix).count() as u64;
                let in_reports = reports.iter().filter(|r| r.end <= done).count() as u64;
                let header = match self.opts.header.as_deref() {
                    Some(h) if !h.is_empty() && done >= h.len() && batch.starts_with(h) => 1,
                    _ => 0,
                };
                lines.saturating_sub(in_reports + header)
            }
            Framing::Frames => {
                let (mut p, mut n) = (0, 0u64);
                while let Some(len) = frame_len(&prefix[p..]) {
                    n += u64::from(prefix[p] == b'R');
                    p += len;
                }
                n
            }
            Framing::Opaque => 0,
        };
        Kept {
            bytes: done,
            records,
        }
    }

    fn close(&mut self) -> Result<(), SinkError> {
        if let Some((_, id)) = self.sighup.take() {
            signal_hook::low_level::unregister(id);
        }
        let Some(f) = self.file.take() else {
            return Ok(());
        };
        let mut synced = f.sync_all().or_else(unsyncable_is_ok);
        if let Some(s) = self.sealer.as_mut() {
            // The head of everything written, signed, after the bytes are
            // durable.
            let sealed = s.close();
            if synced.is_ok() {
                synced = sealed;
            }
        }
        // The write error of a batch left unwritten is what the caller must
        // hear about (ENOSPC on a full disk or /dev/full), not a later
        // fsync's: on a character device fsync fails with EINVAL.
        match self.unwritten.take() {
            Some(errno) => {
                let e = io::Error::from_raw_os_error(errno);
                Err(SinkError::Permanent(io::Error::new(
                    e.kind(),
                    format!(
                        "{}: closed with a batch not written: {e}",
                        self.path.display()
                    ),
                )))
            }
            None => synced.map_err(|e| self.err(e)),
        }
    }

    fn describe(&self) -> String {
        format!("file {}", self.path.display())
    }

    fn named_counters(&self) -> Option<Arc<dyn dplog_core::SinkCounters>> {
        Some(self.counters.clone())
    }
}

/// `fsync(2)` on a file that cannot be synchronised (a character device such
/// as `/dev/null`, a pipe, a socket) fails with `EINVAL`: there is nothing to
/// make durable, so it is not a sink error.
fn unsyncable_is_ok(e: std::io::Error) -> std::io::Result<()> {
    if e.raw_os_error() == Some(libc::EINVAL) {
        Ok(())
    } else {
        Err(e)
    }
}

impl Drop for FileSink {
    fn drop(&mut self) {
        if let Some((_, id)) = self.sighup.take() {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// The files a file sink writing `path` rotated out, oldest first:
/// `<path>.<ms>` in `path`'s directory, `<ms>` the 13-digit Unix time in
/// milliseconds of the rotation (the names [`FileSink`] gives them).
///
/// # Errors
/// Reading the directory (e.g. `NotFound` when it is gone).
pub fn rotated_files(path: &Path) -> io::Result<Vec<PathBuf>> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Some(base) = path.file_name().map(|b| b.to_string_lossy().into_owned()) else {
        return Ok(Vec::new());
    };
    let prefix = format!("{base}.");
    let mut out = Vec::new();
    for ent in std::fs::read_dir(&dir)? {
        let ent = ent?;
        let name = ent.file_name().to_string_lossy().into_owned();
        if let Some(stamp) = name.strip_prefix(&prefix) {
            if stamp.len() == 13 && stamp.bytes().all(|b| b.is_ascii_digit()) {
                out.push(ent.path());
            }
        }
    }
    out.sort();
    Ok(out)
}
