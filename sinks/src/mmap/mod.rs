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
//! | 32 | 8 | committed records (lines, or binary `R` frames) |
//! | 40 | 8 | segment sequence number |
//!
//! The data area starts at [`HEADER_BYTES`] and holds whole records:
//! formatted lines, or frames of the binary format
//! (`dplog_formatters::binary`, `[kind u8][0][len u16 LE][len bytes]`).
//! A batch is copied first, then the committed length and record count are
//! stored (Release); bytes past the committed length are never part of the
//! log.
//!
//! A batch is all or nothing: every segment it needs is created (and
//! preallocated) before any of its bytes is copied, so a segment that
//! cannot be created (a full disk) leaves the batch wholly uncommitted and
//! the retry writes it whole; no record is ever split across segments.
//!
//! Binary logs: each segment's data starts with the schema preamble (the
//! `H` file-header frame and the `S` schema frames the stream began with),
//! so every segment decodes alone and in any order. The sink learns the
//! preamble from a batch that starts with an `H` frame (an encoder's first
//! batch) or from the segment it resumes.
//!
//! A program restarted on the same directory resumes the newest segment.
//! With the binary format its first batch starts with its own `H` frame
//! and schema frames, appended to that segment as they are: an `H` frame
//! starts a new schema table for the frames after it
//! (`dplog_formatters::binary`), so a restart whose record types have
//! other schema ids (registered in another order, added, changed) keeps
//! appending, and readers (`dplog-cat`, `dplog-query import`) take each
//! record under the table of the last `H` before it; the segments after
//! it start with the new preamble. With lines and a
//! [`MmapSinkOptions::header`] (CSV), a resumed segment whose data does
//! not start with this sink's header is not continued (its rows would
//! sit under another run's columns): it is kept as it is, and a new
//! segment starts under the new header ([`Recovery::header_changed`]).
//!
//! One segment holds one framing: a batch of lines after a segment of
//! binary frames (or the reverse, e.g. a run with another `[format]` on
//! the same directory) starts a new segment.
//!
//! Crash safety of the segment files: a segment is created, preallocated
//! and given its header under a temporary name in the same directory
//! (`.<prefix>-<seq>.dpm.tmp`), then renamed to its final name without
//! replacing anything, so a segment name never shows a file without its
//! header, whatever instant a crash hits. With an msync policy the file
//! (header and allocation) is synced before the rename and the directory
//! after it. At open, leftover temporary files of the prefix are removed,
//! and so is any segment that is empty or all zero (headerless: left by a
//! crash of an older dplog, or by a power loss without an msync policy;
//! it holds no record): said once on stderr and in [`Recovery`].
//!
//! Reading segments (header checks, committed data, segment names,
//! framing) is [`reader`], shared with `dplog-cat`.
//!
//! One writer per (directory, prefix): [`MmapSink::open`] takes an
//! exclusive, non-blocking `flock(2)` on `<dir>/.<prefix>.lock` (created
//! if missing, mode 0640, never removed) and holds it until close or drop;
//! a second writer's open fails instead of interleaving segments.

#[cfg(feature = "config")]
pub mod config;
#[cfg(feature = "config")]
pub use config::MmapSinkConfig;

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::accounting::{bump, named};
use dplog_core::{Accepted, Sink, SinkError};

pub mod reader;

use reader::{
    frame_len, is_headerless, preamble_len, read_header, segment_name as seg_name,
    starts_binary_log, MAGIC, OFF_COMMITTED, OFF_RECORDS, VERSION,
};
pub use reader::{list_segments, read_all, read_segment, HEADER_BYTES};

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
    /// A header line (a CSV header) written at the start of every segment
    /// of a line log; the copy a batch starts with (the formatter's, at the
    /// start of its stream) is dropped, so each segment has it once, at
    /// its top. Not counted as a record. Default none.
    pub header: Option<Vec<u8>>,
    /// Seal the segments ([`crate::seal`]): every copy into a segment's
    /// data area is chained with BLAKE3 in `<segment>.seal` (the header,
    /// whose committed length changes with every batch, is not sealed:
    /// the verifier reads it), the head signed with Ed25519 when the sink
    /// moves to the next segment, at close and every `sign_every`; the
    /// segments form one chain. Committed bytes a crash left without
    /// their seal entry are sealed late when the sink resumes the
    /// segment. `None` (default): no seal.
    pub seal: Option<crate::seal::SealOptions>,
}

impl Default for MmapSinkOptions {
    fn default() -> Self {
        Self {
            segment_bytes: 64 << 20,
            msync_interval_ms: Some(1000),
            header: None,
            prefix: "dplog".into(),
            seal: None,
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
    /// Headerless segments removed: zero-length or all-zero files named
    /// like segments (a crash cut their creation short; they held no
    /// record).
    pub removed_headerless: Vec<PathBuf>,
    /// Temporary files of segments whose creation a crash cut short
    /// (`.<prefix>-<seq>.dpm.tmp`), removed.
    pub removed_temporary: Vec<PathBuf>,
    /// The resumed segment holds lines that do not start with this sink's
    /// [`MmapSinkOptions::header`] (a CSV log of other record types or
    /// columns, e.g. a program restarted with its types registered in
    /// another order): it is left as it is, and the first batch starts a
    /// new segment under this sink's header (also said once on stderr).
    pub header_changed: bool,
}

/// Counters (consumer thread writes, Relaxed statistics).
#[derive(Debug, Default)]
pub struct MmapCounters {
    /// Segments created.
    pub segments: AtomicU64,
    /// Successful msync calls.
    pub syncs: AtomicU64,
    /// Failed calls (fallocate, mmap, msync, fsync, rename).
    pub errors: AtomicU64,
    /// Signed heads the seal's anchor sink refused or failed to deliver
    /// (not retried; the seal itself has them).
    pub anchor_failed: AtomicU64,
}

impl dplog_core::SinkCounters for MmapCounters {
    fn named(&self) -> Vec<(String, u64)> {
        named(
            "mmap",
            &[
                ("segments", &self.segments),
                ("syncs", &self.syncs),
                ("errors", &self.errors),
                ("anchor_failed", &self.anchor_failed),
            ],
        )
    }
}

/// One mapped segment.
struct Segment {
    path: PathBuf,
    /// The open segment file (kept open for the mapping's lifetime; synced
    /// with fdatasync when created under an msync policy).
    file: File,
    base: *mut u8,
    len: usize,
    committed: usize,
    records: u64,
    /// Data bytes up to which msync has run.
    synced: usize,
    /// Created by this sink (not resumed): removed at close if it stayed
    /// empty.
    created: bool,
    /// What the committed data holds (`None` while empty).
    framing: Option<Framing>,
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
        .truncate(create)
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
    // MAP_POPULATE maps a shared file's pages read-only, so the first store
    // to each page still takes a write fault (the kernel's dirty tracking):
    // one per 4 KiB on the record path. MADV_POPULATE_WRITE (Linux 5.14)
    // takes those faults here, at the roll; older kernels refuse it
    // (EINVAL) and keep the per-page faults.
    // SAFETY: p..p+size is the mapping just made; the advice changes no
    // contents (the pages are the file's, already allocated by fallocate).
    let _ = unsafe { libc::madvise(p, size as usize, libc::MADV_POPULATE_WRITE) };
    Ok((file, p.cast()))
}

/// `e` with `what` and `path` in front of its message (same kind), e.g.
/// `mmap segment directory /var/log/nat: No such file or directory (os
/// error 2)`.
fn at_path(what: &str, path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

/// Opens (creating it, mode 0640) `<dir>/.<prefix>.lock` and takes an
/// exclusive, non-blocking `flock(2)` on it: one writer per (directory,
/// prefix), across processes and within one (the lock belongs to the open
/// file description).
///
/// Errors: `WouldBlock` if another writer holds it, e.g. `mmap segment
/// directory /var/log/nat: another writer holds it (lock
/// /var/log/nat/.dplog.lock for prefix "dplog" is taken)`; the I/O error
/// of the lock file, naming it.
fn lock_dir(dir: &Path, prefix: &str) -> io::Result<File> {
    let path = dir.join(format!(".{prefix}.lock"));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(crate::FILE_MODE)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| at_path("mmap segment lock", &path, e))?;
    // A lock held only by a process forked by this one between its open and
    // its exec (which closes the O_CLOEXEC descriptor) lingers for that
    // moment after the owner released it: try for up to 200 ms before
    // taking the directory as another writer's.
    let mut tries = 0;
    let r = loop {
        // SAFETY: flock on a descriptor we own; no memory is passed.
        let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        let busy = r != 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock;
        if !busy || tries == 40 {
            break r;
        }
        tries += 1;
        std::thread::sleep(Duration::from_millis(5));
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::WouldBlock {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "mmap segment directory {}: another writer holds it (lock {} for prefix {prefix:?} is taken)",
                    dir.display(),
                    path.display()
                ),
            ));
        }
        return Err(at_path("mmap segment lock", &path, e));
    }
    Ok(file)
}

/// The temporary name segment `name` is created under (hidden, and not
/// ending in `.dpm`, so no reader takes it for a segment).
fn tmp_name(name: &str) -> String {
    format!(".{name}.tmp")
}

/// Temporary segment files of `prefix` in `dir` (`.<prefix>-<10
/// digits>.dpm.tmp`).
fn list_temporary(dir: &Path, prefix: &str) -> io::Result<Vec<PathBuf>> {
    let mut v = Vec::new();
    let pre = format!(".{prefix}-");
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(rest) = name
            .strip_prefix(&pre)
            .and_then(|r| r.strip_suffix(".dpm.tmp"))
        {
            if rest.len() == 10 && rest.bytes().all(|b| b.is_ascii_digit()) {
                v.push(e.path());
            }
        }
    }
    v.sort();
    Ok(v)
}

/// Removes what a crash while a segment was being created leaves in `dir`
/// for `prefix`: temporary segment files, and segments that are empty or
/// all zero (no header, no record; only a crash of an older dplog, or a
/// power loss without an msync policy, leaves one). Says so in one line
/// on stderr. Returns the headerless segments and the temporary files
/// removed.
///
/// Errors: the I/O error of listing, reading or removing, naming the
/// directory or file.
fn clean_crash_leftovers(dir: &Path, prefix: &str) -> io::Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let dir_err = |e| at_path("mmap segment directory", dir, e);
    let temporary = list_temporary(dir, prefix).map_err(dir_err)?;
    for p in &temporary {
        std::fs::remove_file(p).map_err(|e| at_path("mmap temporary segment", p, e))?;
    }
    let mut headerless = Vec::new();
    for (_, p) in list_segments(dir, prefix).map_err(dir_err)? {
        let seg_err = |e| at_path("mmap segment", &p, e);
        if is_headerless(&p).map_err(seg_err)? {
            std::fs::remove_file(&p).map_err(seg_err)?;
            headerless.push(p);
        }
    }
    let names = |v: &[PathBuf]| {
        v.iter()
            .map(|p| {
                p.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut said = Vec::new();
    if !headerless.is_empty() {
        said.push(format!(
            "{} headerless segment(s) (empty or all zero, no records): {}",
            headerless.len(),
            names(&headerless)
        ));
    }
    if !temporary.is_empty() {
        said.push(format!(
            "{} temporary segment file(s): {}",
            temporary.len(),
            names(&temporary)
        ));
    }
    if !said.is_empty() {
        dplog_core::diag_line!(
            "dplog: mmap segment directory {}: a crash cut the creation of a segment short; removed {}",
            dir.display(),
            said.join("; ")
        );
    }
    Ok((headerless, temporary))
}

/// Makes the file at `from` appear as `to`, never replacing an existing
/// `to` (`renameat2(RENAME_NOREPLACE)`; where the file system lacks it, a
/// hard link then an unlink of `from`, which a crash in between leaves as
/// a second name the next open removes).
///
/// Errors: `AlreadyExists` (EEXIST) if `to` exists; the OS error.
fn publish(from: &Path, to: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let cstr = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
    };
    let (f, t) = (cstr(from)?, cstr(to)?);
    // SAFETY: two NUL-terminated paths that outlive the call; no other
    // memory is passed.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if !matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) {
        return Err(e);
    }
    std::fs::hard_link(from, to)?;
    // `to` is in place; a `from` left over (a second name of the same
    // file) is removed by the next open.
    let _ = std::fs::remove_file(from);
    Ok(())
}

/// Copies batches into memory-mapped, preallocated segment files.
///
/// Open with [`MmapSink::open`], which resumes the newest segment after a
/// crash and reports what it found ([`MmapSink::recovery`]). A batch that
/// does not fit the current segment is split at record boundaries (lines,
/// or binary frames); the segment is synced, and the next one continues
/// it. Every segment a batch needs is created with `fallocate` before any
/// of the batch is copied, so a full disk is an `ENOSPC` error at creation
/// with nothing of the batch committed (retried whole by the runtime;
/// never a SIGBUS on a store, never a record split across a segment that
/// could not be created).
pub struct MmapSink {
    dir: PathBuf,
    opts: MmapSinkOptions,
    seg: Option<Segment>,
    next_seq: u64,
    last_sync: Instant,
    recovery: Recovery,
    /// Segments created (preallocated, empty) for a batch that then failed
    /// to get all it needed; used, oldest first, by the next rolls.
    spare: std::collections::VecDeque<Segment>,
    /// A binary log's schema preamble (`H` and `S` frames), written at the
    /// start of every segment; empty for lines.
    preamble: Vec<u8>,
    /// The last TSC calibration frame (`C`) of a binary log written so
    /// far: it follows the preamble at the start of every new segment, so
    /// a segment decoded alone converts TSC times with the calibration in
    /// force there.
    calibration: Vec<u8>,
    /// `MmapSinkOptions::header` (empty: none), shared so a batch can hold
    /// it while the sink rolls segments.
    line_header: std::sync::Arc<[u8]>,
    /// `<dir>/.<prefix>.lock`, held with `flock(LOCK_EX)` while the sink
    /// is open (released at close, or by the kernel when dropped).
    lock: Option<File>,
    closed: bool,
    counters: Arc<MmapCounters>,
    /// The seal of the segment last written to, once one was.
    sealer: Option<crate::seal::Sealer>,
    /// The seal's anchor until there is a sealer to take it.
    anchor: Option<crate::seal::Anchor>,
}

impl std::fmt::Debug for MmapSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MmapSink")
            .field("dir", &self.dir)
            .field("opts", &self.opts)
            .field("segment", &self.seg.as_ref().map(|s| &s.path))
            .field("next_seq", &self.next_seq)
            .field("recovery", &self.recovery)
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

impl MmapSink {
    /// Opens the segment directory `dir` (which must exist), removing what a
    /// crash during a segment's creation left (temporary files of the
    /// prefix, headerless segments: [`Recovery::removed_headerless`]),
    /// recovering the newest segment if there is one, else creating the
    /// first segment (so
    /// a directory the process cannot write fails here, not at the first
    /// batch; an out-of-space error is left to the first batch, which
    /// retries it).
    ///
    /// Errors: `InvalidInput` for a segment size that is not a multiple of
    /// 4096 or below 64 KiB, or an empty prefix; the I/O error of the
    /// directory, of the newest segment or of the first segment's creation,
    /// its message naming the directory or segment path and the OS error
    /// (`InvalidData` if it is not a dplog segment), e.g. `mmap segment
    /// /var/log/nat/dplog-0000000000.dpm: Permission denied (os error
    /// 13)`; `WouldBlock` if another writer (another sink, in this process
    /// or another) holds the directory's lock for this prefix, e.g. `mmap
    /// segment directory /var/log/nat: another writer holds it (lock
    /// /var/log/nat/.dplog.lock for prefix "dplog" is taken)`; the error of
    /// creating that lock file, e.g. `mmap segment lock
    /// /proc/.dplog.lock: No such file or directory (os error 2)`.
    ///
    /// The lock (`flock(LOCK_EX | LOCK_NB)` on `<dir>/.<prefix>.lock`) is
    /// held until [`Sink::close`] or drop.
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
        if let Some(so) = &opts.seal {
            // A missing or unprotected key refuses the sink first.
            crate::seal::load_signing_key(&so.key_file)?;
        }
        let dir = dir.as_ref().to_path_buf();
        // Listed before the lock so that a missing or unreadable directory
        // is reported as such, and again under it: a writer that closed in
        // between may have added segments.
        list_segments(&dir, &opts.prefix)
            .map_err(|e| at_path("mmap segment directory", &dir, e))?;
        let lock = lock_dir(&dir, &opts.prefix)?;
        let dir_err = |e| at_path("mmap segment directory", &dir, e);
        // Under the lock: no other writer is creating a segment here.
        let (removed_headerless, removed_temporary) = clean_crash_leftovers(&dir, &opts.prefix)?;
        let segs = list_segments(&dir, &opts.prefix).map_err(dir_err)?;
        let line_header = opts.header.as_deref().unwrap_or_default().into();
        let mut s = Self {
            dir,
            opts,
            seg: None,
            next_seq: segs.last().map_or(0, |(q, _)| q + 1),
            last_sync: Instant::now(),
            recovery: Recovery::default(),
            spare: Default::default(),
            preamble: Vec::new(),
            calibration: Vec::new(),
            line_header,
            lock: Some(lock),
            closed: false,
            counters: Arc::new(MmapCounters::default()),
            sealer: None,
            anchor: None,
        };
        if let Some((_, path)) = segs.last() {
            s.resume(path)?;
        }
        s.recovery.removed_headerless = removed_headerless;
        s.recovery.removed_temporary = removed_temporary;
        if s.seg.is_none() {
            match s.create_segment() {
                Ok(seg) => s.seg = Some(seg),
                // Out of space now: the first batch retries the creation.
                Err(e) if e.is_retryable() => {}
                Err(e) => return Err(e.into_io()),
            }
        }
        Ok(s)
    }

    fn resume(&mut self, path: &Path) -> io::Result<()> {
        let seg_err = |e| at_path("mmap segment", path, e);
        let size = std::fs::metadata(path).map_err(seg_err)?.len();
        // Validates magic, version, size and committed length before
        // mapping (its errors name the path already).
        read_header(path)?;
        let (file, base) = map_file(path, size, false).map_err(seg_err)?;
        let mut seg = Segment {
            path: path.to_path_buf(),
            file,
            base,
            len: size as usize,
            committed: 0,
            records: 0,
            synced: 0,
            created: false,
            framing: None,
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
        let data = &seg.data()[..c];
        self.preamble = data[..preamble_len(data)].to_vec();
        let framing = (c > 0).then(|| framing_of(data));
        // Lines under another header (a CSV run whose record types or
        // columns changed): this sink's rows must not continue them.
        let header_changed = framing == Some(Framing::Lines)
            && !self.line_header.is_empty()
            && !data.starts_with(&self.line_header);
        seg.framing = framing;
        self.recovery = Recovery {
            segment: Some(path.to_path_buf()),
            committed_bytes: c as u64,
            committed_records: seg.records,
            discarded_tail_bytes: tail as u64,
            header_changed,
            ..Recovery::default()
        };
        if header_changed {
            eprintln!(
                "dplog: mmap segment {}: its header line is not this sink's (other record types or columns); it is kept as it is and a new segment starts",
                path.display()
            );
        } else {
            self.seg = Some(seg);
        }
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

    /// Sends every head the seal signs also to `sink`, another host's
    /// syslog receiver ([`Sealer::set_anchor`](crate::seal::Sealer::set_anchor)),
    /// from one segment's seal to the next; failures are counted in
    /// [`MmapCounters::anchor_failed`].
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
    /// failures are counted in [`MmapCounters::anchor_failed`].
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
            Box::new(move |_| bump(&counters.anchor_failed, 1)),
        )
    }

    /// The segment being written, if any.
    pub fn current_segment(&self) -> Option<&Path> {
        self.seg.as_ref().map(|s| s.path.as_path())
    }

    /// Creates, preallocates and maps the next segment (empty): under its
    /// temporary name until its header is written (and, with an msync
    /// policy, synced), then renamed to its final name, so a crash at any
    /// instant leaves either no segment or one with its header. Errors
    /// name the segment path and keep the classification of the OS error
    /// (ENOSPC retryable, EACCES permanent); nothing is left behind.
    fn create_segment(&mut self) -> Result<Segment, SinkError> {
        let name = seg_name(&self.opts.prefix, self.next_seq);
        let path = self.dir.join(&name);
        let tmp = self.dir.join(tmp_name(&name));
        let size = self.opts.segment_bytes;
        let fail = |counters: &MmapCounters, e: io::Error| {
            bump(&counters.errors, 1);
            match SinkError::classify(e) {
                SinkError::Retryable(e) => SinkError::Retryable(at_path("mmap segment", &path, e)),
                SinkError::Permanent(e) => SinkError::Permanent(at_path("mmap segment", &path, e)),
            }
        };
        let (file, base) = match map_file(&tmp, size, true) {
            Ok(m) => m,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(fail(&self.counters, e));
            }
        };
        let seg = Segment {
            path: path.clone(),
            file,
            base,
            len: size as usize,
            committed: 0,
            records: 0,
            synced: 0,
            created: true,
            framing: None,
        };
        // SAFETY: the header page is inside the new mapping, unaliased.
        let h = unsafe { std::slice::from_raw_parts_mut(seg.base, HEADER_BYTES) };
        h[..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&(HEADER_BYTES as u32).to_le_bytes());
        h[16..24].copy_from_slice(&size.to_le_bytes());
        h[40..48].copy_from_slice(&self.next_seq.to_le_bytes());
        let durable = self.opts.msync_interval_ms.is_some();
        // fdatasync writes the header page (dirty in the page cache through
        // the mapping) and the allocation before the name appears.
        let r = if durable {
            seg.file.sync_data()
        } else {
            Ok(())
        };
        if let Err(e) = r.and_then(|()| publish(&tmp, &path)) {
            drop(seg);
            let _ = std::fs::remove_file(&tmp);
            return Err(fail(&self.counters, e));
        }
        if durable {
            // The new name itself survives a power loss. A failure here
            // leaves a whole segment in place: counted, not an error.
            if File::open(&self.dir).and_then(|d| d.sync_all()).is_err() {
                bump(&self.counters.errors, 1);
            }
        }
        self.next_seq += 1;
        bump(&self.counters.segments, 1);
        Ok(seg)
    }

    /// Leaves the current segment (if any): with an msync policy it is
    /// synced first (a failure is counted in `MmapCounters::errors`);
    /// without one, write-back is only scheduled (MS_ASYNC).
    fn roll(&mut self) {
        if self.opts.msync_interval_ms.is_some() {
            let _ = self.sync_current();
        } else if let Some(seg) = self.seg.as_mut() {
            if seg.msync(libc::MS_ASYNC).is_err() {
                bump(&self.counters.errors, 1);
            }
        }
        self.seg = None;
    }

    fn sync_current(&mut self) -> Result<(), SinkError> {
        if let Some(seg) = self.seg.as_mut() {
            match seg.sync() {
                Ok(()) => {
                    bump(&self.counters.syncs, 1);
                    self.last_sync = Instant::now();
                }
                Err(e) => {
                    bump(&self.counters.errors, 1);
                    return Err(SinkError::classify(e));
                }
            }
        }
        Ok(())
    }
}

/// Seals `bytes`, just copied at file offset `at` of the current segment;
/// a failed seal write is counted (the sealer keeps the entry).
fn seal_copy(
    sealer: &mut Option<crate::seal::Sealer>,
    counters: &MmapCounters,
    at: u64,
    bytes: &[u8],
) {
    if let Some(s) = sealer.as_mut() {
        if s.sealed(at, bytes).is_err() {
            bump(&counters.errors, 1);
        }
    }
}

impl MmapSink {
    /// Puts the sealer on the current segment before bytes are copied
    /// into it: the segment's own seal resumed (committed bytes without
    /// their entries sealed late), or, for a segment without one, the
    /// next file of the chain (the previous segment's seal signed first),
    /// or a new log (the first sealed segment of the directory).
    fn seal_current(&mut self) -> io::Result<()> {
        let Some(so) = self.opts.seal.clone() else {
            return Ok(());
        };
        let Some(seg) = self.seg.as_ref() else {
            return Ok(());
        };
        let path = seg.path.clone();
        let end = (HEADER_BYTES + seg.committed) as u64;
        if self.sealer.as_ref().is_some_and(|s| s.data_path() == path) {
            return Ok(());
        }
        if crate::seal::seal_path(&path).exists() {
            if let Some(s) = self.sealer.as_mut() {
                // Its last head anchored; the anchor goes on with the
                // segment's own seal.
                s.close_keeping_anchor()?;
                self.anchor = s.take_anchor();
            }
            let mut s = crate::seal::Sealer::open(&path, end, &so)?;
            s.adopt_anchor(&mut self.anchor);
            self.sealer = Some(s);
            return Ok(());
        }
        match self.sealer.as_mut() {
            Some(s) => {
                let prev = s.data_path();
                s.finish_file(&prev)?;
                s.next_file_at(&path, end)
            }
            None => {
                // The newest earlier segment with a seal, if any.
                let prev = list_segments(&self.dir, &self.opts.prefix)?
                    .into_iter()
                    .map(|(_, p)| p)
                    .rev()
                    .find(|p| *p != path && crate::seal::seal_path(p).exists());
                let mut s = match prev {
                    Some(prev) => crate::seal::Sealer::open_after(&prev, &path, end, &so)?,
                    None => crate::seal::Sealer::open(&path, end, &so)?,
                };
                s.adopt_anchor(&mut self.anchor);
                self.sealer = Some(s);
                Ok(())
            }
        }
    }
}

/// Bytes of a binary log's TSC calibration frame (`C`): a 4-byte frame
/// header and 24 bytes (`dplog_formatters::binary`).
const CALIBRATION_FRAME_BYTES: usize = 4 + 24;

/// The last whole `C` frame among the binary frames of `b`.
fn last_calibration_frame(b: &[u8]) -> Option<&[u8]> {
    let (mut p, mut last) = (0, None);
    while let Some(n) = frame_len(&b[p..]) {
        if b[p] == b'C' && n == CALIBRATION_FRAME_BYTES {
            last = Some(&b[p..p + n]);
        }
        p += n;
    }
    last
}

/// The framing of `b` (a batch, or a segment's committed data): binary
/// if it starts with a binary log's `H` frame or a whole `R`/`S` frame (a
/// formatted line never has a NUL as its second byte), else lines.
fn framing_of(b: &[u8]) -> Framing {
    // R record, S schema, C TSC calibration, D drop report.
    if starts_binary_log(b)
        || (matches!(b.first(), Some(b'R' | b'S' | b'C' | b'D')) && frame_len(b).is_some())
    {
        Framing::Binary
    } else {
        Framing::Lines
    }
}

/// How a batch divides into records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    /// `\n`-terminated lines.
    Lines,
    /// Binary frames; `R` frames are the records.
    Binary,
}

/// The longest prefix of `b` made of whole records that fits in `room`
/// bytes, and its record count. Errors: a binary batch whose frames do not
/// tile it.
fn fit(b: &[u8], room: usize, framing: Framing) -> io::Result<(usize, u64)> {
    match framing {
        Framing::Lines => {
            let n = if b.len() <= room {
                b.len()
            } else {
                memchr::memrchr(b'\n', &b[..room]).map_or(0, |i| i + 1)
            };
            Ok((n, memchr::memchr_iter(b'\n', &b[..n]).count() as u64))
        }
        Framing::Binary => {
            let (mut p, mut recs) = (0usize, 0u64);
            while p < b.len() {
                let n = frame_len(&b[p..]).ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("binary batch: no whole frame at byte {p} of {}", b.len()),
                    )
                })?;
                if p + n > room {
                    break;
                }
                recs += u64::from(b[p] == b'R');
                p += n;
            }
            Ok((p, recs))
        }
    }
}

impl Sink for MmapSink {
    fn describe(&self) -> String {
        format!("mmap {}", self.dir.display())
    }

    fn named_counters(&self) -> Option<Arc<dyn dplog_core::SinkCounters>> {
        Some(self.counters.clone())
    }

    fn write_batch(&mut self, batch: &[u8]) -> Result<Accepted, SinkError> {
        if self.closed {
            return Err(SinkError::Permanent(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "mmap sink is closed",
            )));
        }
        if batch.is_empty() {
            return Ok(Accepted::Delivered);
        }
        // The data area of a segment this batch makes; a resumed segment
        // (possibly written with another `segment_bytes`) has its own.
        let cap_new = (self.opts.segment_bytes as usize) - HEADER_BYTES;
        let framing = framing_of(batch);
        if starts_binary_log(batch) {
            // An encoder's first batch: its schemas head every new segment
            // from now on (learnt before anything can fail, so a batch
            // dropped after retries still leaves them for the next ones).
            self.preamble = batch[..preamble_len(batch)].to_vec();
        }
        // A line log's header heads every segment (added below); the
        // formatter's own copy at the start of its stream is dropped.
        let header = std::sync::Arc::clone(&self.line_header);
        let line_header: &[u8] = match framing {
            Framing::Lines => &header,
            Framing::Binary => &[],
        };
        let batch = match batch.strip_prefix(line_header) {
            Some(rest) if !line_header.is_empty() => rest,
            _ => batch,
        };
        if batch.is_empty() {
            return Ok(Accepted::Delivered);
        }
        let bad = |e: io::Error| SinkError::Permanent(e);
        // Plan: (starts a new segment, bytes, records) per segment touched.
        let mut plan: Vec<(bool, usize, u64)> = Vec::with_capacity(2);
        let mut p = 0usize;
        // The current segment continues only with its own framing (one
        // segment holds one framing) and up to its own size.
        let (mut new, mut used, mut cap) = match self.seg.as_ref() {
            Some(s) if s.committed == 0 || s.framing == Some(framing) => {
                (false, s.committed, s.capacity())
            }
            _ => (true, 0, cap_new),
        };
        while p < batch.len() {
            let rest = &batch[p..];
            let auto = if used > 0 {
                0
            } else if framing == Framing::Binary && !starts_binary_log(rest) {
                // Room for a calibration frame after the preamble too.
                self.preamble.len() + CALIBRATION_FRAME_BYTES
            } else {
                line_header.len()
            };
            let (n, recs) = fit(rest, cap.saturating_sub(used + auto), framing).map_err(bad)?;
            if n == 0 && used == 0 && cap >= cap_new {
                let rec = match framing {
                    Framing::Lines => memchr::memchr(b'\n', rest).map_or(rest.len(), |i| i + 1),
                    Framing::Binary => frame_len(rest).unwrap_or(rest.len()),
                };
                let pre = match (auto, framing) {
                    (0, _) => String::new(),
                    (_, Framing::Binary) => format!(" less its {auto}-byte schema preamble"),
                    (_, Framing::Lines) => format!(" less its {auto}-byte header"),
                };
                return Err(bad(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "a record of {rec} bytes exceeds the segment data area of {cap_new} bytes{pre}"
                    ),
                )));
            }
            if n > 0 {
                plan.push((new, n, recs));
            }
            p += n;
            new = true;
            used = 0;
            cap = cap_new;
        }
        // Create every segment the batch needs before copying any of it.
        let needed = plan.iter().filter(|c| c.0).count();
        while self.spare.len() < needed {
            let seg = self.create_segment()?;
            self.spare.push_back(seg);
        }
        let mut p = 0usize;
        // The calibration in force at the start of each chunk.
        let mut cal = std::mem::take(&mut self.calibration);
        let mut binary_lead = Vec::new();
        for (new, n, recs) in plan {
            if new {
                self.roll();
                self.seg = self.spare.pop_front();
            }
            if let Err(e) = self.seal_current() {
                bump(&self.counters.errors, 1);
                return Err(SinkError::classify(e));
            }
            let seg = self.seg.as_mut().expect("segment ensured by the plan");
            let chunk = &batch[p..p + n];
            let lead: &[u8] = match framing {
                _ if seg.committed > 0 => &[],
                Framing::Binary if !starts_binary_log(chunk) => {
                    binary_lead.clear();
                    binary_lead.extend_from_slice(&self.preamble);
                    binary_lead.extend_from_slice(&cal);
                    &binary_lead
                }
                Framing::Binary => &[],
                Framing::Lines => line_header,
            };
            if framing == Framing::Binary {
                if let Some(c) = last_calibration_frame(chunk) {
                    cal = c.to_vec();
                }
            }
            // The plan sized every chunk to its segment; a mapping is never
            // indexed past its end, even if that were wrong.
            if seg.committed + lead.len() + n > seg.capacity() {
                bump(&self.counters.errors, 1);
                return Err(bad(io::Error::other(format!(
                    "{}: {} bytes planned past its data area of {} bytes (a dplog bug)",
                    seg.path.display(),
                    seg.committed + lead.len() + n,
                    seg.capacity()
                ))));
            }
            if !lead.is_empty() {
                let at = (HEADER_BYTES + seg.committed) as u64;
                seg.append(lead, 0);
                seal_copy(&mut self.sealer, &self.counters, at, lead);
            }
            let at = (HEADER_BYTES + seg.committed) as u64;
            seg.append(chunk, recs);
            seal_copy(&mut self.sealer, &self.counters, at, chunk);
            seg.framing = Some(framing);
            p += n;
        }
        self.calibration = cal;
        Ok(Accepted::Delivered)
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        self.sync_current()
    }

    /// Nothing to write: a batch is in the shared mapping (the page cache)
    /// with its committed length once `write_batch` returns; no msync.
    fn write_out(&mut self) -> Result<(), SinkError> {
        Ok(())
    }

    fn tick(&mut self, now: Instant) -> Result<(), SinkError> {
        if let Some(s) = self.sealer.as_mut() {
            if s.tick(now).is_err() {
                bump(&self.counters.errors, 1);
            }
        }
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
        let mut r = self.sync_current();
        if let Some(s) = self.sealer.as_mut() {
            // The head of everything copied, signed after the msync.
            if let Err(e) = s.close() {
                bump(&self.counters.errors, 1);
                if r.is_ok() {
                    r = Err(SinkError::classify(e));
                }
            }
        }
        // An anchor no segment's seal took (nothing was written).
        if let Some(a) = self.anchor.take() {
            a.finish();
        }
        // A segment this sink created and never wrote (the one made at
        // open, or made for a batch that never came back) holds nothing:
        // no empty preallocated files are left behind.
        let unused = self.seg.take().filter(|s| s.created && s.committed == 0);
        for seg in unused.into_iter().chain(std::mem::take(&mut self.spare)) {
            let path = seg.path.clone();
            drop(seg);
            let _ = std::fs::remove_file(path);
        }
        // Released (the descriptor closed) only now, after the empty
        // segments are gone: another writer may open the directory (this
        // sink takes no more batches).
        self.lock = None;
        r
    }
}
