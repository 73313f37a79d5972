//! The file sink: appends formatted batches to a file, with fsync policies,
//! size- and time-based rotation with retention, and reopen for logrotate.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dplog_core::{Accepted, Sink, SinkError};

/// File mode of a newly created log file: owner read/write, group read
/// (0640). An existing file keeps its mode.
pub const FILE_MODE: u32 = 0o640;

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
    /// single line is larger. `None`: no size limit.
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
    /// runs holds it once. `None` (default): bytes are written as given.
    pub header: Option<Vec<u8>>,
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
}

impl FileSinkCounters {
    fn bump(c: &AtomicU64) {
        // Relaxed: single-writer statistic; partner is the consumer
        // thread's join (see the type docs).
        c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    fn count_error(&self, e: &io::Error) {
        match e.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => Self::bump(&self.enospc),
            Some(libc::EIO) => Self::bump(&self.eio),
            _ => Self::bump(&self.other_errors),
        }
    }

    /// Reads one counter (Relaxed).
    pub fn get(c: &AtomicU64) -> u64 {
        // Relaxed: statistic, see the type docs.
        c.load(Ordering::Relaxed)
    }
}

impl dplog_core::SinkCounters for FileSinkCounters {
    fn named(&self) -> Vec<(String, u64)> {
        let g = Self::get;
        [
            ("enospc", g(&self.enospc)),
            ("eio", g(&self.eio)),
            ("other_errors", g(&self.other_errors)),
            ("rotations", g(&self.rotations)),
            ("deleted", g(&self.deleted)),
            ("reopens", g(&self.reopens)),
            ("syncs", g(&self.syncs)),
        ]
        .into_iter()
        .map(|(n, v)| (format!("file.{n}"), v))
        .collect()
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
/// Each batch is written with `write(2)` until complete. On an
/// error (`ENOSPC`, `EIO`, ...) the sink remembers how many bytes of the
/// batch are already in the file and returns the classified
/// [`SinkError`]; the retry with the same batch resumes there, so a line is
/// never lost or duplicated. Rotation happens only at line boundaries.
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
    counters: Arc<FileSinkCounters>,
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
        let file = open_append(&path).map_err(|e| with_path(&path, e))?;
        let size = file.metadata().map_err(|e| with_path(&path, e))?.len();
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
            counters: Arc::new(FileSinkCounters::default()),
        };
        if let Some(newest) = sink.rotated_files()?.last() {
            sink.last_stamp = rotation_stamp(newest);
        }
        Ok(sink)
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
        match f.sync_data().or_else(unsyncable_is_ok) {
            Ok(()) => {
                self.dirty = false;
                self.last_sync = Instant::now();
                FileSinkCounters::bump(&self.counters.syncs);
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
        if self.dirty && self.opts.fsync != FsyncPolicy::Never {
            self.sync()?;
        }
        let f = open_append(&self.path).map_err(|e| self.err(e))?;
        self.size = f.metadata().map_err(|e| self.err(e))?.len();
        self.file = Some(f);
        self.opened_at = Instant::now();
        FileSinkCounters::bump(&self.counters.reopens);
        Ok(())
    }

    /// Renames the current file to `<path>.<unix-ms>` and opens a fresh
    /// one, then applies retention. Nothing is lost: the old descriptor is
    /// synced (unless the policy is `Never`) and only then closed.
    pub fn rotate(&mut self) -> Result<(), SinkError> {
        if self.file.is_none() {
            return Err(Self::closed());
        }
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
        self.last_stamp = stamp;
        std::fs::rename(&self.path, &target).map_err(|e| self.err(e))?;
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
                return Err(self.err(e));
            }
        }
        FileSinkCounters::bump(&self.counters.rotations);
        self.apply_retention();
        Ok(())
    }

    /// Rotated files of this sink, oldest first.
    pub fn rotated_files(&self) -> io::Result<Vec<PathBuf>> {
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let base = match self.path.file_name() {
            Some(b) => b.to_string_lossy().into_owned(),
            None => return Ok(Vec::new()),
        };
        let prefix = format!("{base}.");
        let mut out = Vec::new();
        for ent in std::fs::read_dir(&dir)? {
            let ent = ent?;
            let name = ent.file_name().to_string_lossy().into_owned();
            if let Some(rest) = name.strip_prefix(&prefix) {
                let stamp = rest;
                if stamp.len() == 13 && stamp.bytes().all(|b| b.is_ascii_digit()) {
                    out.push(ent.path());
                }
            }
        }
        out.sort();
        Ok(out)
    }

    fn apply_retention(&mut self) {
        let Ok(mut files) = self.rotated_files() else {
            FileSinkCounters::bump(&self.counters.other_errors);
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
                    FileSinkCounters::bump(&self.counters.deleted);
                    return false;
                }
                true
            });
        }
        if let Some(keep) = self.opts.keep_files {
            let excess = files.len().saturating_sub(keep);
            for p in &files[..excess] {
                if std::fs::remove_file(p).is_ok() {
                    FileSinkCounters::bump(&self.counters.deleted);
                }
            }
        }
    }

    /// Writes `bytes` (whole lines) to the current file, rotating at line
    /// boundaries when the size limit is reached. Returns how many bytes
    /// were written before an error.
    fn append(&mut self, mut bytes: &[u8]) -> (usize, Result<(), SinkError>) {
        let mut written = 0usize;
        while !bytes.is_empty() {
            if let Err(e) = self.write_header_if_empty(bytes) {
                return (written, Err(e));
            }
            let mut chunk = bytes;
            if let Some(max) = self.opts.max_size_bytes {
                let room = max.saturating_sub(self.size) as usize;
                if chunk.len() > room {
                    // Cut after the last newline that fits.
                    match memchr::memrchr(b'\n', &chunk[..room.min(chunk.len())]) {
                        Some(i) => chunk = &chunk[..=i],
                        None if self.size > 0 => {
                            if let Err(e) = self.rotate() {
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
            written += n;
            self.size += n as u64;
            if n > 0 {
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
            if self.size > 0 && now.duration_since(self.opened_at) >= Duration::from_millis(ms) {
                self.rotate()?;
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

/// Identifies a batch for the retry contract: its length and FNV-1a of its
/// first and last 64 bytes (a different batch of the same length, e.g. after
/// a failover, starts from its beginning).
pub(crate) fn fingerprint(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ b.len() as u64;
    let head = &b[..b.len().min(64)];
    let tail = &b[b.len().saturating_sub(64)..];
    for &x in head.iter().chain(tail) {
        h = (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3);
    }
    h
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
        if start < batch.len() {
            let (n, r) = self.append(&batch[start..]);
            if let Err(e) = r {
                if e.is_retryable() {
                    self.resume = Some((fp, start + n));
                }
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

    fn flush(&mut self) -> Result<(), SinkError> {
        // Writes go straight to the kernel; nothing is buffered here.
        if self.file.is_none() {
            return Err(Self::closed());
        }
        if self.opts.fsync != FsyncPolicy::Never && self.dirty {
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

    fn close(&mut self) -> Result<(), SinkError> {
        if let Some((_, id)) = self.sighup.take() {
            signal_hook::low_level::unregister(id);
        }
        let Some(f) = self.file.take() else {
            return Ok(());
        };
        let synced = f.sync_all().or_else(unsyncable_is_ok);
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
