//! The archive readers' file access, counted: the files they opened, the
//! reads they made and the bytes those returned, for this whole process
//! ([`read_counts`]), so that what a lookup cost can be said
//! (`dplog-query --stats`) and tested; and read-ahead advice, which lets
//! a cold disk serve several reads a lookup knows it will make at once.
//!
//! The counts are statistics: each is one relaxed atomic add, read with
//! a relaxed load; no other memory is published through them.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

static FILES: AtomicU64 = AtomicU64::new(0);
static READS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

/// What the archive readers of this process read so far: segment and
/// summary files opened, read calls, bytes read (from the page cache or
/// the disk alike: read-ahead advice is not counted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadCounts {
    /// Files opened for reading (segments, summaries).
    pub files_opened: u64,
    /// Read calls (`pread`, `read`).
    pub reads: u64,
    /// Bytes those calls returned.
    pub bytes: u64,
}

/// The counts of every archive read of this process so far (all threads).
///
/// # Examples
///
/// ```
/// use dplog_sinks::archive::counted::read_counts;
/// let before = read_counts();
/// // ... a lookup ...
/// let after = read_counts();
/// assert!(after.files_opened >= before.files_opened);
/// ```
pub fn read_counts() -> ReadCounts {
    // Relaxed: statistics, no ordering partner (see the module docs).
    ReadCounts {
        files_opened: FILES.load(Ordering::Relaxed),
        reads: READS.load(Ordering::Relaxed),
        bytes: BYTES.load(Ordering::Relaxed),
    }
}

fn count(bytes: usize) {
    // Relaxed: statistics, no ordering partner (see the module docs).
    READS.fetch_add(1, Ordering::Relaxed);
    BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
}

/// `File::open`, counted.
pub(crate) fn open(path: &Path) -> io::Result<File> {
    let f = File::open(path)?;
    // Relaxed: statistics, no ordering partner (see the module docs).
    FILES.fetch_add(1, Ordering::Relaxed);
    Ok(f)
}

/// [`open`] for a file read at a few places the caller names: the
/// kernel's read-ahead is turned off for it (`POSIX_FADV_RANDOM`), so a
/// read fetches what it asks for and the ranges given to [`advise`].
///
/// Why: a lookup reads a segment's header, footer and one or two blocks,
/// and a summary's buckets one at a time. With read-ahead on, each cold
/// read also fetches up to the disk's `read_ahead_kb` around it (8 MiB on
/// some virtual disks): a cold 1e8-event lookup read 2.5 MB more from
/// disk than it used, about 5 ms. A reader that goes on to read a whole
/// file in order calls [`in_order`].
pub(crate) fn open_random(path: &Path) -> io::Result<File> {
    let f = open(path)?;
    fadvise(&f, 0, 0, libc::POSIX_FADV_RANDOM);
    Ok(f)
}

/// Turns the kernel's read-ahead back on for `f`, doubled
/// (`POSIX_FADV_SEQUENTIAL`): the caller reads most of the file from
/// here on, in order (a scan, a recovery). A hint.
pub(crate) fn in_order(f: &File) {
    fadvise(f, 0, 0, libc::POSIX_FADV_SEQUENTIAL);
}

/// `read_exact_at`, counted (one read; the bytes of `buf` when it
/// succeeds).
pub(crate) fn read_at(f: &File, buf: &mut [u8], off: u64) -> io::Result<()> {
    let r = f.read_exact_at(buf, off);
    count(if r.is_ok() { buf.len() } else { 0 });
    r
}

/// The rest of `f` from its position, appended to `out`, counted as one
/// read.
pub(crate) fn read_to_end(mut f: &File, out: &mut Vec<u8>) -> io::Result<usize> {
    let r = f.read_to_end(out);
    count(*r.as_ref().unwrap_or(&0));
    r
}

/// Asks the kernel to read bytes `off..off + len` of `f` in the
/// background (`POSIX_FADV_WILLNEED`), so that reads the caller makes
/// next are served together by a cold disk instead of one after the
/// other. A hint: errors are ignored, nothing is counted.
pub(crate) fn advise(f: &File, off: u64, len: u64) {
    if len == 0 {
        return;
    }
    fadvise(f, off, len, libc::POSIX_FADV_WILLNEED);
}

/// `posix_fadvise(f, off, len, advice)`; errors are ignored (a hint).
fn fadvise(f: &File, off: u64, len: u64, advice: libc::c_int) {
    // SAFETY: posix_fadvise on a descriptor `f` owns, with plain integer
    // arguments; it touches no memory of ours.
    unsafe {
        libc::posix_fadvise(
            f.as_raw_fd(),
            off as libc::off_t,
            len as libc::off_t,
            advice,
        );
    }
}
