//! The mmap sink: copies batches into preallocated, memory-mapped segment
//! files whose header holds the committed length, so a process crash
//! loses nothing that was committed and leaves no torn tail.
//!
//! Segment layout (little-endian), one file per segment named
//! `<prefix>-<seq, 10 digits>.dpm`:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `DPLOGMM1` |
//! | 8 | 4 | version (1) |
//! | 12 | 4 | header length ([`HEADER_BYTES`]) |
//! | 16 | 8 | segment size in bytes (header included) |
//! | 24 | 8 | committed length of the data area, in bytes |
//! | 32 | 8 | committed records |
//! | 40 | 8 | segment sequence number |
//!
//! The data area starts at [`HEADER_BYTES`] and holds whole formatted
//! lines. A batch is copied first, then the committed length and record
//! count are stored (Release); bytes past the committed length are never
//! part of the log.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dplog_core::{Accepted, Sink, SinkError};

/// Bytes of the segment header (one page).
pub const HEADER_BYTES: usize = 4096;
const MAGIC: &[u8; 8] = b"DPLOGMM1";
const VERSION: u32 = 1;
const OFF_COMMITTED: usize = 24;
const OFF_RECORDS: usize = 32;

/// Mmap sink settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MmapSinkOptions {
    /// Segment file size in bytes, header included; a multiple of 4096, at
    /// least 64 KiB. Default 64 MiB.
    pub segment_bytes: u64,
    /// `msync(MS_SYNC)` the dirty range at most this often, from the
    /// periodic tick, and before a segment rolls. `None`: only at close
    /// (a full segment only schedules write-back, `MS_ASYNC`). Default
    /// 1000 ms.
    pub msync_interval_ms: Option<u64>,
    /// Segment file name prefix. Default `dplog`.
    pub prefix: String,
}

impl Default for MmapSinkOptions {
    fn default() -> Self {
        Self {
            segment_bytes: 64 << 20,
            msync_interval_ms: Some(1000),
            prefix: "dplog".into(),
        }
    }
}

/// What opening found in the newest existing segment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// The segment resumed, if any existed.
    pub segment: Option<PathBuf>,
    /// Its committed data bytes (kept).
    pub committed_bytes: u64,
    /// Its committed records (kept).
    pub committed_records: u64,
    /// Non-zero bytes found past the committed length (a write cut by the
    /// crash), zeroed.
    pub discarded_tail_bytes: u64,
}

/// Counters (consumer thread writes, Relaxed statistics).
#[derive(Debug, Default)]
pub struct MmapCounters {
    /// Segments created.
    pub segments: AtomicU64,
    /// Successful msync calls.
    pub syncs: AtomicU64,
    /// Failed calls (fallocate, mmap, msync).
    pub errors: AtomicU64,
}

fn bump(c: &AtomicU64) {
    // Relaxed: single-writer statistic.
    c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// One mapped segment.
struct Segment {
    path: PathBuf,
    _file: File,
    base: *mut u8,
    len: usize,
    committed: usize,
    records: u64,
    /// Data bytes up to which msync has run.
    synced: usize,
}

// SAFETY: the mapping is owned by this Segment alone (MAP_SHARED to a file
// only this sink writes); moving it to another thread is sound.
unsafe impl Send for Segment {}

impl Segment {
    fn capacity(&self) -> usize {
        self.len - HEADER_BYTES
    }

    fn header_u64(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `off` is 8-aligned inside the first page of a live,
        // page-aligned mapping of at least HEADER_BYTES; AtomicU64 has the
        // layout of u64.
        unsafe { &*(self.base.add(off) as *const AtomicU64) }
    }

    fn data(&self) -> &[u8] {
        // SAFETY: the data area [HEADER_BYTES, len) is inside the mapping,
        // which lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.base.add(HEADER_BYTES), self.capacity()) }
    }

    fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `data`, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.base.add(HEADER_BYTES), self.capacity()) }
    }

    /// Copies `bytes` (whole lines, `lines` of them) after the committed
    /// data, then publishes the new committed length.
    fn append(&mut self, bytes: &[u8], lines: u64) {
        let at = self.committed;
        self.data_mut()[at..at + bytes.len()].copy_from_slice(bytes);
        self.committed += bytes.len();
        self.records += lines;
        // Release: a reader (or a recovery after a crash of this process;
        // the page cache keeps the stores) that sees the new committed
        // length sees the copied bytes; partner of the Acquire loads in
        // `read_segment` / `open`.
        self.header_u64(OFF_RECORDS)
            .store(self.records, Ordering::Release);
        self.header_u64(OFF_COMMITTED)
            .store(self.committed as u64, Ordering::Release);
    }

    /// `msync(MS_SYNC)` of the pages written since the last sync, header
    /// included.
    fn sync(&mut self) -> io::Result<()> {
        self.msync(libc::MS_SYNC)
    }

    /// `msync` with `flags` (`MS_SYNC` waits for the disk, `MS_ASYNC` only
    /// schedules write-back).
    fn msync(&mut self, flags: libc::c_int) -> io::Result<()> {
        if self.synced == self.committed {
            return Ok(());
        }
        let start = (HEADER_BYTES + self.synced) & !4095;
        let end = HEADER_BYTES + self.committed;
        for (s, l) in [(0usize, HEADER_BYTES), (start, end - start)] {
            // SAFETY: [s, s+l) lies inside the mapping; s is page-aligned.
            let r = unsafe { libc::msync(self.base.add(s).cast(), l, flags) };
            if r != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        self.synced = self.committed;
        Ok(())
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: base/len are the values mmap returned; unmapped once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

fn map_file(path: &Path, size: u64, create: bool) -> io::Result<(File, *mut u8)> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .mode(crate::FILE_MODE)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)?;
    if create {
        // SAFETY: fallocate on our open descriptor; mode 0 allocates real
        // blocks, so later stores through the mapping cannot hit ENOSPC
        // (SIGBUS).
        let r = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, size as libc::off_t) };
        if r != 0 {
            let e = io::Error::last_os_error();
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
    } else if file.metadata()?.len() != size {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: size differs from its header", path.display()),
        ));
    }
    // SAFETY: a fresh shared read/write mapping of `size` bytes of a file
    // that is at least that long; checked for MAP_FAILED below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            // MAP_POPULATE: fault the pages in here, at the roll, instead
            // of one fault per first store on the record path.
            libc::MAP_SHARED | libc::MAP_POPULATE,
            file.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok((file, p.cast()))
}

/// `e` with `what` and `path` in front of its message (same kind), e.g.
/// `mmap segment directory /var/log/nat: No such file or directory (os
/// error 2)`.
fn at_path(what: &str, path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

fn seg_name(prefix: &str, seq: u64) -> String {
    format!("{prefix}-{seq:010}.dpm")
}

/// Segment files of `prefix` in `dir`, oldest first, with their sequence.
pub fn list_segments(dir: &Path, prefix: &str) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut v = Vec::new();
    let pre = format!("{prefix}-");
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(rest) = name.strip_prefix(&pre).and_then(|r| r.strip_suffix(".dpm")) {
            if rest.len() == 10 {
                if let Ok(seq) = rest.parse() {
                    v.push((seq, e.path()));
                }
            }
        }
    }
    v.sort();
    Ok(v)
}

/// Reads the committed data of one segment file.
///
/// Errors: `InvalidData` for a bad magic, version or lengths.
pub fn read_segment(path: &Path) -> io::Result<Vec<u8>> {
    let b = std::fs::read(path)?;
    let bad = |m: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {m}", path.display()),
        )
    };
    if b.len() < HEADER_BYTES || &b[..8] != MAGIC {
        return Err(bad("not a dplog mmap segment"));
    }
    let u32at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
    let u64at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
    if u32at(8) != VERSION || u32at(12) as usize != HEADER_BYTES {
        return Err(bad("unsupported version"));
    }
    let committed = u64at(OFF_COMMITTED) as usize;
    if committed > b.len() - HEADER_BYTES {
        return Err(bad("committed length beyond the segment"));
    }
    Ok(b[HEADER_BYTES..HEADER_BYTES + committed].to_vec())
}

/// The committed data of every segment of `prefix` in `dir`, in order.
pub fn read_all(dir: &Path, prefix: &str) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    for (_, p) in list_segments(dir, prefix)? {
        out.extend_from_slice(&read_segment(&p)?);
    }
    Ok(out)
}

/// Copies batches into memory-mapped, preallocated segment files.
///
/// Open with [`MmapSink::open`], which resumes the newest segment after a
/// crash and reports what it found ([`MmapSink::recovery`]). A batch that
/// does not fit the current segment is split at line boundaries; the
/// segment is synced, and the next one is created with `fallocate` (so a
/// full disk is an `ENOSPC` error at creation, retried by the runtime,
/// never a SIGBUS on a store).
pub struct MmapSink {
    dir: PathBuf,
    opts: MmapSinkOptions,
    seg: Option<Segment>,
    next_seq: u64,
    last_sync: Instant,
    recovery: Recovery,
    /// `(batch fingerprint, bytes committed)` after a failed roll.
    resume: Option<(u64, usize)>,
    closed: bool,
    counters: Arc<MmapCounters>,
}

impl MmapSink {
    /// Opens the segment directory `dir` (which must exist), recovering the
    /// newest segment if there is one.
    ///
    /// Errors: `InvalidInput` for a segment size that is not a multiple of
    /// 4096 or below 64 KiB, or an empty prefix; the I/O error of the
    /// directory or of the newest segment, its message naming the directory
    /// or segment path and the OS error (`InvalidData` if it is not a
    /// dplog segment).
    pub fn open(dir: impl AsRef<Path>, opts: MmapSinkOptions) -> io::Result<Self> {
        if opts.segment_bytes % 4096 != 0 || opts.segment_bytes < 64 * 1024 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "segment_bytes {} must be a multiple of 4096 and at least 65536",
                    opts.segment_bytes
                ),
            ));
        }
        if opts.prefix.is_empty() || opts.prefix.contains('/') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "prefix must be non-empty and contain no '/'",
            ));
        }
        let dir = dir.as_ref().to_path_buf();
        let segs = list_segments(&dir, &opts.prefix)
            .map_err(|e| at_path("mmap segment directory", &dir, e))?;
        let mut s = Self {
            dir,
            opts,
            seg: None,
            next_seq: segs.last().map_or(0, |(q, _)| q + 1),
            last_sync: Instant::now(),
            recovery: Recovery::default(),
            resume: None,
            closed: false,
            counters: Arc::new(MmapCounters::default()),
        };
        if let Some((_, path)) = segs.last() {
            s.resume(path)?;
        }
        Ok(s)
    }

    fn resume(&mut self, path: &Path) -> io::Result<()> {
        let seg_err = |e| at_path("mmap segment", path, e);
        let size = std::fs::metadata(path).map_err(seg_err)?.len();
        // Validates magic/version/committed before mapping (its errors
        // name the path already).
        read_segment(path)?;
        let (file, base) = map_file(path, size, false).map_err(seg_err)?;
        let mut seg = Segment {
            path: path.to_path_buf(),
            _file: file,
            base,
            len: size as usize,
            committed: 0,
            records: 0,
            synced: 0,
        };
        // Acquire: partner of the Release stores in `Segment::append`.
        seg.committed = seg.header_u64(OFF_COMMITTED).load(Ordering::Acquire) as usize;
        seg.records = seg.header_u64(OFF_RECORDS).load(Ordering::Acquire);
        let c = seg.committed;
        let tail = seg.data()[c..]
            .iter()
            .rposition(|&b| b != 0)
            .map_or(0, |i| i + 1);
        if tail > 0 {
            seg.data_mut()[c..c + tail].fill(0);
        }
        seg.synced = 0;
        seg.sync().map_err(seg_err)?;
        self.recovery = Recovery {
            segment: Some(path.to_path_buf()),
            committed_bytes: c as u64,
            committed_records: seg.records,
            discarded_tail_bytes: tail as u64,
        };
        self.seg = Some(seg);
        Ok(())
    }

    /// What opening found (all zero and `segment: None` for a fresh
    /// directory).
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// A handle on the counters.
    pub fn counters(&self) -> Arc<MmapCounters> {
        self.counters.clone()
    }

    /// The segment being written, if any.
    pub fn current_segment(&self) -> Option<&Path> {
        self.seg.as_ref().map(|s| s.path.as_path())
    }

    fn new_segment(&mut self) -> Result<(), SinkError> {
        let path = self.dir.join(seg_name(&self.opts.prefix, self.next_seq));
        let size = self.opts.segment_bytes;
        let (file, base) = map_file(&path, size, true).map_err(|e| {
            bump(&self.counters.errors);
            SinkError::classify(e)
        })?;
        let seg = Segment {
            path,
            _file: file,
            base,
            len: size as usize,
            committed: 0,
            records: 0,
            synced: 0,
        };
        // SAFETY: the header page is inside the new mapping, unaliased.
        let h = unsafe { std::slice::from_raw_parts_mut(seg.base, HEADER_BYTES) };
        h[..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&(HEADER_BYTES as u32).to_le_bytes());
        h[16..24].copy_from_slice(&size.to_le_bytes());
        h[40..48].copy_from_slice(&self.next_seq.to_le_bytes());
        self.next_seq += 1;
        bump(&self.counters.segments);
        self.seg = Some(seg);
        Ok(())
    }

    fn sync_current(&mut self) -> Result<(), SinkError> {
        if let Some(seg) = self.seg.as_mut() {
            match seg.sync() {
                Ok(()) => {
                    bump(&self.counters.syncs);
                    self.last_sync = Instant::now();
                }
                Err(e) => {
                    bump(&self.counters.errors);
                    return Err(SinkError::classify(e));
                }
            }
        }
        Ok(())
    }
}

fn count_lines(b: &[u8]) -> u64 {
    memchr::memchr_iter(b'\n', b).count() as u64
}

impl Sink for MmapSink {
    fn describe(&self) -> String {
        format!("mmap {}", self.dir.display())
    }

    fn write_batch(&mut self, batch: &[u8]) -> Result<Accepted, SinkError> {
        if self.closed {
            return Err(SinkError::Permanent(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "mmap sink is closed",
            )));
        }
        let cap = (self.opts.segment_bytes as usize) - HEADER_BYTES;
        if let Some(line) = batch.split(|&b| b == b'\n').map(|l| l.len() + 1).max() {
            if line > cap {
                return Err(SinkError::Permanent(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("a line of {line} bytes exceeds the segment data area of {cap}"),
                )));
            }
        }
        let fp = crate::file::fingerprint(batch);
        let start = match self.resume.take() {
            Some((f, done)) if f == fp => done,
            _ => 0,
        };
        let mut rest = &batch[start..];
        while !rest.is_empty() {
            if self.seg.is_none() {
                if let Err(e) = self.new_segment() {
                    // The part already committed stays; the retry resumes
                    // after it.
                    self.resume = Some((fp, batch.len() - rest.len()));
                    return Err(e);
                }
            }
            let seg = self.seg.as_mut().expect("segment just ensured");
            let room = seg.capacity() - seg.committed;
            let chunk = if rest.len() <= room {
                rest
            } else {
                match memchr::memrchr(b'\n', &rest[..room]) {
                    Some(i) => &rest[..=i],
                    None => &rest[..0],
                }
            };
            if !chunk.is_empty() {
                seg.append(chunk, count_lines(chunk));
                rest = &rest[chunk.len()..];
            }
            if !rest.is_empty() {
                // Full: roll. With an msync policy the full segment is
                // synced first (a failure is counted in
                // `MmapCounters::errors`); without one, write-back is only
                // scheduled (MS_ASYNC).
                if self.opts.msync_interval_ms.is_some() {
                    let _ = self.sync_current();
                } else if let Some(seg) = self.seg.as_mut() {
                    if seg.msync(libc::MS_ASYNC).is_err() {
                        bump(&self.counters.errors);
                    }
                }
                self.seg = None;
            }
        }
        Ok(Accepted::Delivered)
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        self.sync_current()
    }

    fn tick(&mut self, now: Instant) -> Result<(), SinkError> {
        if let Some(ms) = self.opts.msync_interval_ms {
            if now.duration_since(self.last_sync) >= Duration::from_millis(ms) {
                return self.sync_current();
            }
        }
        Ok(())
    }

    fn close(&mut self) -> Result<(), SinkError> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        let r = self.sync_current();
        self.seg = None;
        r
    }
}
