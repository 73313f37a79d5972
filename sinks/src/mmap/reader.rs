//! Reading the mmap sink's segment files: the one parser of their header
//! and committed data, used by [`MmapSink::open`](super::MmapSink::open)
//! to recover the newest segment and by `dplog-cat` to decode segments.
//!
//! Layout (little-endian; see the [`mmap`](super) module docs): a
//! [`HEADER_BYTES`]-byte header (magic [`MAGIC`], version [`VERSION`],
//! header length, segment size, committed data length, committed records,
//! sequence number), then the data area, of which only the first
//! `committed` bytes are part of the log. Files are named
//! `<prefix>-<seq, 10 digits>.dpm` ([`segment_name`]).
//!
//! The committed data holds whole records: formatted lines, or frames of
//! the binary format (`dplog_formatters::binary`: `[kind u8][0][len u16
//! LE][len bytes]`), each segment of a binary log starting with the schema
//! preamble (the `H` frame and the `S` frames after it).

use std::fs::OpenOptions;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Bytes of the segment header (one page).
pub const HEADER_BYTES: usize = 4096;
/// The first 8 bytes of every segment file.
pub const MAGIC: &[u8; 8] = b"DPLOGMM1";
/// The segment layout version this crate writes and reads.
pub const VERSION: u32 = 1;
/// Byte offset of the committed data length (u64) in the header.
pub(crate) const OFF_COMMITTED: usize = 24;
/// Byte offset of the committed record count (u64) in the header.
pub(crate) const OFF_RECORDS: usize = 32;
/// Magic of a binary log's `H` frame payload (`dplog_formatters::binary`).
const BIN_MAGIC: &[u8; 8] = b"DPLOGBIN";

/// A segment header, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Layout version ([`VERSION`]).
    pub version: u32,
    /// Header length in bytes ([`HEADER_BYTES`]).
    pub header_bytes: u32,
    /// Segment size in bytes, header included (the file's size).
    pub segment_bytes: u64,
    /// Committed length of the data area, in bytes.
    pub committed_bytes: u64,
    /// Committed records (lines, or binary `R` frames).
    pub committed_records: u64,
    /// Segment sequence number.
    pub seq: u64,
}

/// Why a file is not a whole segment this crate can read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SegmentError {
    /// The file does not start with [`MAGIC`].
    NotASegment,
    /// The file starts with the magic but is shorter than its header.
    Torn {
        /// The file's length in bytes.
        len: u64,
    },
    /// Another layout version.
    Version(u32),
    /// A header length other than [`HEADER_BYTES`].
    HeaderLength(u32),
    /// The header's segment size differs from the file's length.
    Size {
        /// Segment size the header gives.
        header: u64,
        /// The file's length.
        file: u64,
    },
    /// The committed length runs past the data area.
    Committed {
        /// Committed length the header gives.
        committed: u64,
        /// Size of the data area.
        room: u64,
    },
}

impl std::fmt::Display for SegmentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SegmentError::NotASegment => {
                write!(f, "not a dplog mmap segment (it does not start with DPLOGMM1)")
            }
            SegmentError::Torn { len } => write!(
                f,
                "torn mmap segment: {len} bytes, shorter than its {HEADER_BYTES}-byte header"
            ),
            SegmentError::Version(v) => write!(
                f,
                "mmap segment version {v}, this dplog reads version {VERSION}"
            ),
            SegmentError::HeaderLength(h) => write!(
                f,
                "mmap segment header length {h}, expected {HEADER_BYTES}"
            ),
            SegmentError::Size { header, file } => write!(
                f,
                "torn mmap segment: its header says {header} bytes, the file has {file}"
            ),
            SegmentError::Committed { committed, room } => write!(
                f,
                "corrupt mmap segment: committed length {committed} beyond its {room}-byte data area"
            ),
        }
    }
}

impl std::error::Error for SegmentError {}

/// Parses and checks the header at the start of `head` (at least the
/// first [`HEADER_BYTES`] bytes of the file, or the whole file if
/// shorter) of a segment file of `file_len` bytes: magic, version, header
/// length, segment size equal to `file_len`, committed length inside the
/// data area.
///
/// Errors: the first check that fails, as a [`SegmentError`].
pub fn parse_header(head: &[u8], file_len: u64) -> Result<SegmentHeader, SegmentError> {
    if !head.starts_with(MAGIC) {
        return Err(SegmentError::NotASegment);
    }
    if head.len() < HEADER_BYTES || file_len < HEADER_BYTES as u64 {
        return Err(SegmentError::Torn {
            len: file_len.min(head.len() as u64),
        });
    }
    let u32at = |o: usize| u32::from_le_bytes(head[o..o + 4].try_into().expect("4 bytes"));
    let u64at = |o: usize| u64::from_le_bytes(head[o..o + 8].try_into().expect("8 bytes"));
    let h = SegmentHeader {
        version: u32at(8),
        header_bytes: u32at(12),
        segment_bytes: u64at(16),
        committed_bytes: u64at(OFF_COMMITTED),
        committed_records: u64at(OFF_RECORDS),
        seq: u64at(40),
    };
    if h.version != VERSION {
        return Err(SegmentError::Version(h.version));
    }
    if h.header_bytes as usize != HEADER_BYTES {
        return Err(SegmentError::HeaderLength(h.header_bytes));
    }
    if h.segment_bytes != file_len {
        return Err(SegmentError::Size {
            header: h.segment_bytes,
            file: file_len,
        });
    }
    let room = file_len - HEADER_BYTES as u64;
    if h.committed_bytes > room {
        return Err(SegmentError::Committed {
            committed: h.committed_bytes,
            room,
        });
    }
    Ok(h)
}

/// The committed data of a whole segment file's bytes `b`, after
/// [`parse_header`].
///
/// Errors: as [`parse_header`].
pub fn committed_data(b: &[u8]) -> Result<&[u8], SegmentError> {
    let h = parse_header(b, b.len() as u64)?;
    Ok(&b[HEADER_BYTES..HEADER_BYTES + h.committed_bytes as usize])
}

/// `e` as `InvalidData` naming `path`: `PATH: REASON`.
fn invalid(path: &Path, e: SegmentError) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {e}", path.display()),
    )
}

/// Reads and checks the header of the segment file at `path` (only its
/// first page is read).
///
/// Errors: the I/O error of opening or reading; `InvalidData` naming the
/// path and the [`SegmentError`], e.g. `/d/t-0000000000.dpm: not a dplog
/// mmap segment (it does not start with DPLOGMM1)`.
pub fn read_header(path: &Path) -> io::Result<SegmentHeader> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)?;
    let len = f.metadata()?.len();
    let mut head = Vec::with_capacity(HEADER_BYTES);
    f.take(HEADER_BYTES as u64).read_to_end(&mut head)?;
    parse_header(&head, len).map_err(|e| invalid(path, e))
}

/// Reads the committed data of one segment file.
///
/// Errors: the I/O error of reading; `InvalidData` as [`read_header`].
pub fn read_segment(path: &Path) -> io::Result<Vec<u8>> {
    let mut b = std::fs::read(path)?;
    let h = parse_header(&b, b.len() as u64).map_err(|e| invalid(path, e))?;
    b.truncate(HEADER_BYTES + h.committed_bytes as usize);
    b.drain(..HEADER_BYTES);
    Ok(b)
}

/// The file name of segment `seq` of `prefix`: `<prefix>-<seq, 10
/// digits>.dpm`.
pub fn segment_name(prefix: &str, seq: u64) -> String {
    format!("{prefix}-{seq:010}.dpm")
}

/// The prefix and sequence number of a segment file name
/// (`<prefix>-<10 digits>.dpm`, the prefix non-empty); `None` for any
/// other name (the temporary `.<name>.tmp` of a segment being created,
/// the writer's lock file, ...).
pub fn parse_segment_name(name: &str) -> Option<(&str, u64)> {
    let (prefix, seq) = name.strip_suffix(".dpm")?.rsplit_once('-')?;
    if prefix.is_empty() || seq.len() != 10 || !seq.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((prefix, seq.parse().ok()?))
}

/// Every segment file in `dir`, as `(prefix, seq, path)`, sorted by
/// prefix then sequence.
///
/// Errors: the I/O error of reading the directory.
pub fn all_segments(dir: &Path) -> io::Result<Vec<(String, u64, PathBuf)>> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name();
        let name = name.to_string_lossy();
        if let Some((prefix, seq)) = parse_segment_name(&name) {
            v.push((prefix.to_string(), seq, e.path()));
        }
    }
    v.sort();
    Ok(v)
}

/// Segment files of `prefix` in `dir`, oldest first, with their sequence.
///
/// Errors: the I/O error of reading the directory.
pub fn list_segments(dir: &Path, prefix: &str) -> io::Result<Vec<(u64, PathBuf)>> {
    Ok(all_segments(dir)?
        .into_iter()
        .filter(|(p, _, _)| p == prefix)
        .map(|(_, seq, path)| (seq, path))
        .collect())
}

/// The committed data of every segment of `prefix` in `dir`, in order.
///
/// Errors: as [`list_segments`] and [`read_segment`].
pub fn read_all(dir: &Path, prefix: &str) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    for (_, p) in list_segments(dir, prefix)? {
        out.extend_from_slice(&read_segment(&p)?);
    }
    Ok(out)
}

/// True if the file at `path` is empty or holds only zero bytes: a
/// segment without a header (a crash cut its creation short), which holds
/// no record. Reads only up to the first non-zero byte (the first page of
/// a real segment).
///
/// Errors: the I/O error of opening or reading.
pub fn is_headerless(path: &Path) -> io::Result<bool> {
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut want = HEADER_BYTES;
    loop {
        let n = match f.read(&mut buf[..want]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(true);
        }
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        want = buf.len();
    }
}

/// Length of the binary frame starting at `b[0]` (4-byte header
/// included), if `b` starts with a whole frame of the binary format.
pub fn frame_len(b: &[u8]) -> Option<usize> {
    if b.len() < 4 || b[1] != 0 {
        return None;
    }
    let n = 4 + u16::from_le_bytes([b[2], b[3]]) as usize;
    (n <= b.len()).then_some(n)
}

/// True if `b` starts with a binary log's `H` frame.
pub fn starts_binary_log(b: &[u8]) -> bool {
    b.len() >= 12 && b[0] == b'H' && b[1] == 0 && &b[4..12] == BIN_MAGIC
}

/// Length of the schema preamble at the start of `b`: the `H` frame and
/// the `S` frames right after it (0 if `b` does not start with `H`).
pub fn preamble_len(b: &[u8]) -> usize {
    if !starts_binary_log(b) {
        return 0;
    }
    let mut p = 0;
    while let Some(n) = frame_len(&b[p..]) {
        if p > 0 && b[p] != b'S' {
            break;
        }
        p += n;
    }
    p
}

/// What a segment's committed data holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentData {
    /// Nothing committed.
    Empty,
    /// A binary log with its schema preamble: decodes alone.
    Binary,
    /// Binary frames (`R`/`S`, a NUL second byte) without the preamble:
    /// written by a dplog that kept the schemas only in the first
    /// segment; decodes only after the segments before it.
    Headless,
    /// Formatted lines (a formatted line never has a NUL second byte).
    Lines,
}

/// Classifies a segment's committed data `b`.
pub fn segment_data_kind(b: &[u8]) -> SegmentData {
    if b.is_empty() {
        SegmentData::Empty
    } else if starts_binary_log(b) {
        SegmentData::Binary
    } else if b.len() >= 4 && b[1] == 0 && matches!(b[0], b'R' | b'S' | b'C' | b'D') {
        SegmentData::Headless
    } else {
        SegmentData::Lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 64 KiB segment with `committed` data bytes of `x`.
    fn segment(committed: u64) -> Vec<u8> {
        let mut b = vec![0u8; 64 * 1024];
        b[..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&(HEADER_BYTES as u32).to_le_bytes());
        b[16..24].copy_from_slice(&(64u64 * 1024).to_le_bytes());
        b[24..32].copy_from_slice(&committed.to_le_bytes());
        b[32..40].copy_from_slice(&7u64.to_le_bytes());
        b[40..48].copy_from_slice(&3u64.to_le_bytes());
        b[HEADER_BYTES..HEADER_BYTES + committed as usize].fill(b'x');
        b
    }

    #[test]
    fn a_whole_segment_gives_its_header_and_committed_data() {
        let b = segment(100);
        let h = parse_header(&b, b.len() as u64).unwrap();
        assert_eq!(
            h,
            SegmentHeader {
                version: 1,
                header_bytes: 4096,
                segment_bytes: 65536,
                committed_bytes: 100,
                committed_records: 7,
                seq: 3,
            }
        );
        assert_eq!(committed_data(&b).unwrap(), &[b'x'; 100][..]);
        // The header page alone is enough for the header.
        assert_eq!(parse_header(&b[..HEADER_BYTES], 65536).unwrap(), h);
    }

    #[test]
    fn each_bad_header_is_refused_with_its_reason() {
        let mut foreign = segment(0);
        foreign[0] = b'X';
        assert_eq!(committed_data(&foreign), Err(SegmentError::NotASegment));
        assert_eq!(
            committed_data(&segment(0)[..100]),
            Err(SegmentError::Torn { len: 100 })
        );
        let mut v2 = segment(0);
        v2[8] = 2;
        assert_eq!(
            committed_data(&v2).unwrap_err().to_string(),
            "mmap segment version 2, this dplog reads version 1"
        );
        let mut hl = segment(0);
        hl[12..16].copy_from_slice(&8192u32.to_le_bytes());
        assert_eq!(committed_data(&hl), Err(SegmentError::HeaderLength(8192)));
        assert_eq!(
            committed_data(&segment(0)[..32 * 1024]),
            Err(SegmentError::Size {
                header: 65536,
                file: 32768
            })
        );
        let mut over = segment(0);
        over[24..32].copy_from_slice(&(1u64 << 20).to_le_bytes());
        assert_eq!(
            committed_data(&over).unwrap_err().to_string(),
            "corrupt mmap segment: committed length 1048576 beyond its 61440-byte data area"
        );
    }

    #[test]
    fn segment_names_round_trip_and_other_names_are_not_segments() {
        assert_eq!(segment_name("nat", 12), "nat-0000000012.dpm");
        assert_eq!(parse_segment_name("a-b-0000000012.dpm"), Some(("a-b", 12)));
        for other in [
            ".nat-0000000012.dpm.tmp",
            ".nat.lock",
            "nat-12.dpm",
            "nat-+000000012.dpm",
            "-0000000012.dpm",
            "nat-0000000012.log",
        ] {
            assert_eq!(parse_segment_name(other), None, "{other}");
        }
    }

    #[test]
    fn segment_data_is_classified_by_its_first_frame() {
        let mut h = vec![b'H', 0, 8, 0];
        h.extend_from_slice(BIN_MAGIC);
        let s = [b'S', 0, 1, 0, 9];
        let r = [b'R', 0, 2, 0, 1, 2];
        let log = [&h[..], &s, &r].concat();
        assert_eq!(segment_data_kind(&log), SegmentData::Binary);
        assert_eq!(preamble_len(&log), h.len() + s.len());
        assert_eq!(frame_len(&r), Some(6));
        assert_eq!(frame_len(&r[..5]), None);
        assert_eq!(segment_data_kind(&r), SegmentData::Headless);
        assert_eq!(segment_data_kind(b"R 1 2\n"), SegmentData::Lines);
        assert_eq!(segment_data_kind(b""), SegmentData::Empty);
    }
}
