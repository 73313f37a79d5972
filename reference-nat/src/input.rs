//! Capture file input: legacy pcap and pcapng, read with `pcap-parser`.
//!
//! [`read_capture`] streams a file and hands every packet to a callback as
//! soon as it is read, so a caller keeps all packets that precede a
//! truncation or corruption; the error is returned at the end.
//!
//! Timestamps are converted to nanoseconds since the Unix epoch (UTC):
//! legacy pcap in microseconds (magic `0xa1b2c3d4`) or nanoseconds (magic
//! `0xa1b23c4d`), either byte order; pcapng per interface with
//! `if_tsresol` (default 10⁻⁶ s) and `if_tsoffset` (seconds).
//!
//! Every packet record is delivered or counted, alike in both formats: a
//! captured length above the wire length is skipped and counted
//! ([`InputStats::bad_caplen`]); a pcapng packet (Enhanced, Simple or
//! obsolete Packet Block) of an interface its section does not describe
//! is skipped and counted ([`InputStats::unknown_interface`]); a captured
//! length above the snap length is delivered when the record holds that
//! many bytes (libpcap reads such a record too), and ends the read as a
//! corrupt record header ([`InputErrorKind::BadCaplen`]) when the rest of
//! the file (pcap) or its block (pcapng) is too short for it.

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use pcap_parser::pcapng::Block;
use pcap_parser::traits::PcapNGPacketBlock;
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{OptionCode, PcapBlockOwned, PcapError};

/// Initial read buffer size in bytes.
const INITIAL_BUFFER: usize = 1 << 20;
/// Largest single record (pcap record or pcapng block) accepted, in bytes.
pub const MAX_RECORD_BYTES: usize = 256 << 20;
/// libpcap's largest snap length (`MAXIMUM_SNAPLEN`, 262144 bytes): the
/// caplen limit of a file or interface whose snap length is 0.
pub const MAX_SNAPLEN: u32 = 262_144;

const NS_PER_SEC: u64 = 1_000_000_000;

/// One captured packet, valid for the duration of the callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// Capture time in nanoseconds since the Unix epoch (UTC). pcapng
    /// Simple Packet Blocks carry no time and get the previous packet's.
    pub ts_ns: u64,
    /// pcap link type of the packet's interface (see
    /// <https://www.tcpdump.org/linktypes.html>), e.g. 1 for Ethernet.
    pub linktype: u32,
    /// pcapng interface id (index within its section); 0 for legacy pcap.
    pub interface: u32,
    /// Original length of the packet on the wire, in bytes.
    pub orig_len: u32,
    /// Captured bytes (`caplen` of them, at most `orig_len`).
    pub data: &'a [u8],
}

/// Container format of a capture file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureFormat {
    /// Legacy libpcap format.
    Pcap {
        /// Nanosecond timestamps (magic `0xa1b23c4d`).
        nanosecond: bool,
        /// Big-endian headers.
        big_endian: bool,
    },
    /// pcapng (one or more sections).
    PcapNg,
}

/// Counters of one [`read_capture`] run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InputStats {
    /// Container format, once the file header was read.
    pub format: Option<CaptureFormat>,
    /// Packets delivered to the callback.
    pub packets: u64,
    /// Captured bytes delivered to the callback.
    pub bytes: u64,
    /// Of `packets`, those captured shorter than their original length
    /// (cut by a snap length).
    pub snapped: u64,
    /// Records skipped because their captured length exceeds their original
    /// wire length (a corrupt record header), or, for an obsolete pcapng
    /// Packet Block, the bytes its block holds.
    pub bad_caplen: u64,
    /// pcapng packets skipped because they name an interface that was not
    /// described (or a Simple Packet Block without interface 0).
    pub unknown_interface: u64,
    /// pcapng sections seen.
    pub sections: u64,
    /// pcapng interfaces described.
    pub interfaces: u64,
    /// pcapng blocks that are neither packets nor needed metadata (name
    /// resolution, statistics, custom, ...), skipped.
    pub other_blocks: u64,
    /// Bytes of the file parsed (offset reached).
    pub offset: u64,
}

/// What went wrong in [`read_capture`].
#[derive(Debug)]
pub enum InputErrorKind {
    /// Opening or reading the file failed.
    Io(io::Error),
    /// The file has zero length.
    Empty,
    /// The path is not a regular file: a character or block device
    /// (`/dev/zero`), a FIFO, a socket or a directory, named; the reader
    /// needs the file's length (it seeks and checks the header against it).
    NotRegularFile(&'static str),
    /// The file starts with neither a pcap nor a pcapng magic number; the
    /// first (up to) four bytes are given.
    BadMagic(Vec<u8>),
    /// The file ends inside its file header: the 24-byte legacy pcap
    /// header, or the first pcapng Section Header Block (at least 28
    /// bytes, its length as its own header says).
    TruncatedHeader {
        /// `"pcap file header"` or `"pcapng section header block"`.
        what: &'static str,
        /// Bytes the file has.
        have: u64,
        /// Bytes the header needs.
        need: u64,
    },
    /// The file ends in the middle of a record (after its file header).
    Truncated {
        /// Packets delivered before the truncation.
        packets_read: u64,
    },
    /// A record or block could not be parsed.
    Malformed {
        /// Packets delivered before the bad record.
        packets_read: u64,
        /// The parser's description.
        detail: String,
    },
    /// A record header whose captured length cannot be right: larger than
    /// the snap length of the file (legacy pcap header) or of the
    /// interface (pcapng IDB), or, with no snap length, than libpcap's
    /// largest ([`MAX_SNAPLEN`]), or than the pcapng block that holds it.
    /// A corrupt header, not a file cut short: the bytes after it cannot
    /// be trusted, so reading stops here.
    BadCaplen {
        /// 1-based number of the record in the file (every packet record,
        /// delivered or skipped).
        packet: u64,
        /// The captured length the header claims, in bytes.
        caplen: u32,
        /// The limit it exceeds, in bytes.
        limit: u32,
        /// What the limit is (`"snap length"`, `"largest snap length"`,
        /// `"block body"`).
        limit_name: &'static str,
        /// Packets delivered before the bad record.
        packets_read: u64,
    },
    /// A record larger than [`MAX_RECORD_BYTES`].
    RecordTooLarge {
        /// Packets delivered before the record.
        packets_read: u64,
    },
}

/// A capture file could not be read (completely). Packets before the
/// failure were already delivered; `stats` counts them.
#[derive(Debug)]
pub struct InputError {
    /// The file.
    pub path: PathBuf,
    /// Byte offset in the file where the failing record or header starts.
    pub offset: u64,
    /// What went wrong.
    pub kind: InputErrorKind,
    /// Counters up to the failure.
    pub stats: InputStats,
}

impl fmt::Display for InputErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputErrorKind::Io(e) => write!(f, "I/O error: {e}"),
            InputErrorKind::Empty => f.write_str("empty file, not a pcap"),
            InputErrorKind::NotRegularFile(what) => {
                write!(f, "not a regular file ({what}); give a pcap or pcapng file")
            }
            InputErrorKind::BadMagic(m) => {
                f.write_str("not a pcap or pcapng file (bad magic")?;
                for b in m {
                    write!(f, " {b:02x}")?;
                }
                f.write_str(")")
            }
            InputErrorKind::TruncatedHeader { what, have, need } => write!(
                f,
                "truncated {what} ({have} of {need} bytes); no packets were read"
            ),
            InputErrorKind::Truncated { packets_read } => write!(
                f,
                "truncated file: it ends inside a record; {packets_read} packets were read before the truncation"
            ),
            InputErrorKind::Malformed {
                packets_read,
                detail,
            } => write!(
                f,
                "malformed record ({detail}); {packets_read} packets were read before it"
            ),
            InputErrorKind::BadCaplen {
                packet,
                caplen,
                limit,
                limit_name,
                packets_read,
            } => write!(
                f,
                "corrupt record header: packet {packet} claims a captured length of {caplen} bytes, more than the {limit_name} of {limit} bytes; {packets_read} packets were read before it"
            ),
            InputErrorKind::RecordTooLarge { packets_read } => write!(
                f,
                "record larger than {MAX_RECORD_BYTES} bytes; {packets_read} packets were read before it"
            ),
        }
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: at byte offset {}: {}",
            self.path.display(),
            self.offset,
            self.kind
        )
    }
}

impl std::error::Error for InputError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            InputErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// A pcapng interface.
#[derive(Clone, Copy, Debug)]
struct Iface {
    linktype: u32,
    snaplen: u32,
    /// Timestamp units per second.
    units_per_sec: u64,
    /// if_tsoffset, seconds.
    offset_s: i64,
}

/// Known magic numbers as they appear in the first four file bytes.
const MAGICS: [[u8; 4]; 7] = [
    [0xd4, 0xc3, 0xb2, 0xa1], // pcap µs LE
    [0xa1, 0xb2, 0xc3, 0xd4], // pcap µs BE
    [0x4d, 0x3c, 0xb2, 0xa1], // pcap ns LE
    [0xa1, 0xb2, 0x3c, 0x4d], // pcap ns BE
    [0x34, 0xcd, 0xb2, 0xa1], // modified pcap LE
    [0xa1, 0xb2, 0xcd, 0x34], // modified pcap BE
    [0x0a, 0x0d, 0x0d, 0x0a], // pcapng SHB
];

fn to_ns(ts_units: u64, units_per_sec: u64, offset_s: i64) -> u64 {
    let units = u128::from(units_per_sec.max(1));
    let ts = u128::from(ts_units);
    let ns = (ts / units) * u128::from(NS_PER_SEC) + (ts % units) * u128::from(NS_PER_SEC) / units;
    let total =
        i128::try_from(ns).unwrap_or(i128::MAX) + i128::from(offset_s) * i128::from(NS_PER_SEC);
    u64::try_from(total.max(0)).unwrap_or(u64::MAX)
}

struct State<'p, F> {
    path: &'p Path,
    stats: InputStats,
    ifaces: Vec<Iface>,
    section_big_endian: bool,
    last_ts: u64,
    legacy_linktype: u32,
    legacy_nanos: bool,
    legacy_big_endian: bool,
    legacy_snaplen: u32,
    f: F,
}

impl<F: FnMut(Packet<'_>)> State<'_, F> {
    fn error(&self, offset: u64, kind: InputErrorKind) -> InputError {
        InputError {
            path: self.path.to_path_buf(),
            offset,
            kind,
            stats: self.stats.clone(),
        }
    }

    /// Given the bytes of a record that could not be read (`data` starts
    /// at its header), a [`InputErrorKind::BadCaplen`] if its header claims
    /// a captured length above the limit, else `kind` unchanged. Only the
    /// fixed caplen field is peeked at; pcap-parser still parses records.
    fn refine(&self, data: &[u8], kind: InputErrorKind) -> InputErrorKind {
        let u32_at = |at: usize, be: bool| {
            let b: [u8; 4] = data.get(at..at + 4)?.try_into().ok()?;
            Some(if be {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            })
        };
        let snap = |snaplen: u32| {
            if snaplen == 0 {
                (MAX_SNAPLEN, "largest snap length")
            } else {
                (snaplen, "snap length")
            }
        };
        let found = match self.stats.format {
            Some(CaptureFormat::Pcap { big_endian, .. }) => u32_at(8, big_endian)
                .map(|caplen| (caplen, snap(self.legacy_snaplen)))
                .filter(|(c, (lim, _))| c > lim),
            Some(CaptureFormat::PcapNg) => {
                let be = self.section_big_endian;
                // Enhanced Packet Block (type 6): total length at 4, interface
                // at 8, caplen at 20, data at 28.
                match (u32_at(0, be), u32_at(4, be), u32_at(8, be), u32_at(20, be)) {
                    (Some(6), Some(block_len), Some(if_id), Some(caplen)) => {
                        let iface = self.ifaces.get(if_id as usize);
                        let (lim, name) = snap(iface.map_or(0, |i| i.snaplen));
                        let body = block_len.saturating_sub(32);
                        if caplen > lim {
                            Some((caplen, (lim, name)))
                        } else if caplen > body && block_len >= 32 {
                            Some((caplen, (body, "block body")))
                        } else {
                            None
                        }
                    }
                    _ => None,
                }
            }
            None => None,
        };
        match found {
            Some((caplen, (limit, limit_name))) => InputErrorKind::BadCaplen {
                packet: self.stats.packets
                    + self.stats.bad_caplen
                    + self.stats.unknown_interface
                    + 1,
                caplen,
                limit,
                limit_name,
                packets_read: self.stats.packets,
            },
            None => kind,
        }
    }

    fn deliver(&mut self, p: Packet<'_>) {
        self.stats.packets += 1;
        self.stats.bytes += p.data.len() as u64;
        if (p.data.len() as u64) < u64::from(p.orig_len) {
            self.stats.snapped += 1;
        }
        self.last_ts = p.ts_ns;
        (self.f)(p);
    }

    fn block(&mut self, block: PcapBlockOwned<'_>) {
        match block {
            PcapBlockOwned::LegacyHeader(h) => {
                self.legacy_linktype = (h.network.0 as u32) & 0xFFFF;
                self.legacy_nanos = h.is_nanosecond_precision();
                self.legacy_big_endian = h.is_bigendian();
                self.legacy_snaplen = h.snaplen;
                self.stats.format = Some(CaptureFormat::Pcap {
                    nanosecond: self.legacy_nanos,
                    big_endian: h.is_bigendian(),
                });
            }
            PcapBlockOwned::Legacy(b) => {
                if b.caplen > b.origlen {
                    self.stats.bad_caplen += 1;
                    return;
                }
                let frac_ns = if self.legacy_nanos {
                    u64::from(b.ts_usec)
                } else {
                    u64::from(b.ts_usec) * 1000
                };
                let p = Packet {
                    ts_ns: u64::from(b.ts_sec) * NS_PER_SEC + frac_ns,
                    linktype: self.legacy_linktype,
                    interface: 0,
                    orig_len: b.origlen,
                    data: b.data,
                };
                self.deliver(p);
            }
            PcapBlockOwned::NG(b) => self.ng_block(b),
        }
    }

    fn ng_block(&mut self, block: Block<'_>) {
        match block {
            Block::SectionHeader(shb) => {
                self.stats.format = Some(CaptureFormat::PcapNg);
                self.stats.sections += 1;
                self.section_big_endian = shb.big_endian();
                self.ifaces.clear();
            }
            Block::InterfaceDescription(idb) => {
                self.stats.interfaces += 1;
                // pcap-parser decodes if_tsoffset as little-endian only.
                let offset_s = if self.section_big_endian {
                    idb.options
                        .iter()
                        .find(|o| o.code == OptionCode::IfTsoffset)
                        .and_then(|o| o.value().get(..8))
                        .and_then(|v| <[u8; 8]>::try_from(v).ok())
                        .map_or(0, i64::from_be_bytes)
                } else {
                    idb.if_tsoffset
                };
                self.ifaces.push(Iface {
                    linktype: (idb.linktype.0 as u32) & 0xFFFF,
                    snaplen: idb.snaplen,
                    units_per_sec: idb.ts_resolution().unwrap_or(1_000_000),
                    offset_s,
                });
            }
            Block::EnhancedPacket(epb) => {
                let Some(iface) = self.ifaces.get(epb.if_id as usize).copied() else {
                    self.stats.unknown_interface += 1;
                    return;
                };
                if epb.caplen > epb.origlen {
                    self.stats.bad_caplen += 1;
                    return;
                }
                let ts = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
                let p = Packet {
                    ts_ns: to_ns(ts, iface.units_per_sec, iface.offset_s),
                    linktype: iface.linktype,
                    interface: epb.if_id,
                    orig_len: epb.origlen,
                    data: epb.packet_data(),
                };
                self.deliver(p);
            }
            Block::SimplePacket(spb) => {
                let Some(iface) = self.ifaces.first().copied() else {
                    self.stats.unknown_interface += 1;
                    return;
                };
                let data = spb.packet_data();
                let len = if iface.snaplen != 0 {
                    data.len().min(iface.snaplen as usize)
                } else {
                    data.len()
                };
                let p = Packet {
                    ts_ns: self.last_ts,
                    linktype: iface.linktype,
                    interface: 0,
                    orig_len: spb.origlen,
                    data: data.get(..len).unwrap_or(data),
                };
                self.deliver(p);
            }
            Block::Unknown(b) if self.ng_type(b.block_type) == OBSOLETE_PACKET_BLOCK => {
                self.obsolete_packet(b.data)
            }
            _ => self.stats.other_blocks += 1,
        }
    }

    /// `block_type` as written by this section's byte order (pcap-parser
    /// reads an unknown block's type little-endian).
    fn ng_type(&self, block_type: u32) -> u32 {
        if self.section_big_endian {
            block_type.swap_bytes()
        } else {
            block_type
        }
    }

    /// The obsolete pcapng Packet Block (type 2, written by early pcapng
    /// writers; pcap-parser leaves it unknown): `body` is the block body,
    /// interface id u16, drops count u16, timestamp high and low u32,
    /// captured length u32, wire length u32, data. Delivered like an
    /// Enhanced Packet Block; a body too short for its fixed fields or its
    /// captured length is counted in [`InputStats::bad_caplen`] and skipped
    /// (the block's own length keeps the file in step).
    fn obsolete_packet(&mut self, body: &[u8]) {
        let be = self.section_big_endian;
        let u32_at = |at: usize| {
            let b: [u8; 4] = body.get(at..at + 4)?.try_into().ok()?;
            Some(if be {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            })
        };
        let if_id = body.get(..2).map(|b| {
            let b = [b[0], b[1]];
            u32::from(if be {
                u16::from_be_bytes(b)
            } else {
                u16::from_le_bytes(b)
            })
        });
        let (Some(if_id), Some(hi), Some(lo), Some(caplen), Some(origlen)) =
            (if_id, u32_at(4), u32_at(8), u32_at(12), u32_at(16))
        else {
            self.stats.bad_caplen += 1;
            return;
        };
        let Some(iface) = self.ifaces.get(if_id as usize).copied() else {
            self.stats.unknown_interface += 1;
            return;
        };
        let data = body.get(20..20 + caplen as usize);
        let (Some(data), false) = (data, caplen > origlen) else {
            self.stats.bad_caplen += 1;
            return;
        };
        let ts = (u64::from(hi) << 32) | u64::from(lo);
        let p = Packet {
            ts_ns: to_ns(ts, iface.units_per_sec, iface.offset_s),
            linktype: iface.linktype,
            interface: if_id,
            orig_len: origlen,
            data,
        };
        self.deliver(p);
    }
}

/// Block type of the obsolete pcapng Packet Block.
const OBSOLETE_PACKET_BLOCK: u32 = 2;

/// A short description of a parser error, without the input bytes that
/// `PcapError`'s own formatting would dump.
fn describe<I>(e: &PcapError<I>) -> String {
    match e {
        PcapError::NomError(_, kind) | PcapError::OwnedNomError(_, kind) => {
            format!("parse error {kind:?}")
        }
        PcapError::Eof => "end of file".into(),
        PcapError::BufferTooSmall => "buffer too small".into(),
        PcapError::UnexpectedEof => "unexpected end of file".into(),
        PcapError::ReadError => "read error".into(),
        PcapError::Incomplete(n) => format!("incomplete, {n} more bytes needed"),
        PcapError::HeaderNotRecognized => "header not recognized".into(),
    }
}

/// Legacy pcap file header length in bytes (`struct pcap_file_header`).
pub const PCAP_FILE_HEADER_BYTES: u64 = 24;
/// Smallest pcapng Section Header Block in bytes (no options).
pub const PCAPNG_MIN_SHB_BYTES: u64 = 28;

/// The length of an open capture, or [`InputErrorKind::NotRegularFile`]
/// naming what it is instead (its length would read as 0).
fn regular_file_len(file: &File) -> Result<u64, InputErrorKind> {
    let m = file.metadata().map_err(InputErrorKind::Io)?;
    let t = m.file_type();
    if t.is_file() {
        return Ok(m.len());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_char_device() {
            return Err(InputErrorKind::NotRegularFile("a character device"));
        }
        if t.is_block_device() {
            return Err(InputErrorKind::NotRegularFile("a block device"));
        }
        if t.is_fifo() {
            return Err(InputErrorKind::NotRegularFile("a FIFO"));
        }
        if t.is_socket() {
            return Err(InputErrorKind::NotRegularFile("a socket"));
        }
    }
    if t.is_dir() {
        return Err(InputErrorKind::NotRegularFile("a directory"));
    }
    Err(InputErrorKind::NotRegularFile("a special file"))
}

/// Checks the start of an open capture of `file_len` bytes: not empty, a
/// known magic number, and a whole file header (the legacy 24 bytes, or
/// the pcapng Section Header Block's own total length). Leaves the file
/// at offset 0. Returns the container format.
fn check_header(file: &mut File, file_len: u64) -> Result<CaptureFormat, InputErrorKind> {
    if file_len == 0 {
        return Err(InputErrorKind::Empty);
    }
    let mut head = Vec::with_capacity(12);
    (&mut *file)
        .take(12)
        .read_to_end(&mut head)
        .map_err(InputErrorKind::Io)?;
    file.seek(SeekFrom::Start(0)).map_err(InputErrorKind::Io)?;
    let magic = &head[..head.len().min(4)];
    if !MAGICS.iter().any(|m| m.starts_with(magic)) {
        return Err(InputErrorKind::BadMagic(magic.to_vec()));
    }
    let ng = MAGICS[6].starts_with(magic);
    if !ng {
        if file_len < PCAP_FILE_HEADER_BYTES {
            return Err(InputErrorKind::TruncatedHeader {
                what: "pcap file header",
                have: file_len,
                need: PCAP_FILE_HEADER_BYTES,
            });
        }
        let big_endian = magic[0] == 0xa1;
        return Ok(CaptureFormat::Pcap {
            nanosecond: magic == [0x4d, 0x3c, 0xb2, 0xa1] || magic == [0xa1, 0xb2, 0x3c, 0x4d],
            big_endian,
        });
    }
    let truncated = |need: u64| InputErrorKind::TruncatedHeader {
        what: "pcapng section header block",
        have: file_len,
        need,
    };
    if head.len() < 12 {
        return Err(truncated(PCAPNG_MIN_SHB_BYTES));
    }
    // SHB: block type, total length, byte-order magic 0x1a2b3c4d (which
    // says how to read the length).
    let len_bytes: [u8; 4] = head[4..8].try_into().unwrap_or_default();
    let need = match head[8..12] {
        [0x4d, 0x3c, 0x2b, 0x1a] => u64::from(u32::from_le_bytes(len_bytes)),
        [0x1a, 0x2b, 0x3c, 0x4d] => u64::from(u32::from_be_bytes(len_bytes)),
        _ => {
            return Err(InputErrorKind::Malformed {
                packets_read: 0,
                detail: "invalid pcapng section header block (bad byte-order magic)".into(),
            })
        }
    };
    let need = need.max(PCAPNG_MIN_SHB_BYTES);
    if file_len < need {
        return Err(truncated(need));
    }
    Ok(CaptureFormat::PcapNg)
}

/// A pcap-parser reader over `file` (at offset 0, its header checked by
/// [`check_header`]), the file header parsed.
fn open_reader(
    mut file: File,
    file_len: u64,
    capacity: usize,
) -> Result<Box<dyn PcapReaderIterator>, InputErrorKind> {
    let mut head = Vec::with_capacity(4);
    (&mut file)
        .take(4)
        .read_to_end(&mut head)
        .map_err(InputErrorKind::Io)?;
    file.seek(SeekFrom::Start(0)).map_err(InputErrorKind::Io)?;
    match pcap_parser::create_reader(capacity, file) {
        Ok(r) => Ok(r),
        Err(PcapError::Eof | PcapError::Incomplete(_) | PcapError::UnexpectedEof) => {
            Err(InputErrorKind::Truncated { packets_read: 0 })
        }
        Err(PcapError::HeaderNotRecognized) if head == MAGICS[6] => {
            // pcapng magic but the section header does not parse.
            Err(if file_len < PCAPNG_MIN_SHB_BYTES {
                InputErrorKind::Truncated { packets_read: 0 }
            } else {
                InputErrorKind::Malformed {
                    packets_read: 0,
                    detail: "invalid pcapng section header block".into(),
                }
            })
        }
        Err(PcapError::HeaderNotRecognized) => Err(InputErrorKind::BadMagic(head)),
        Err(PcapError::ReadError) => Err(InputErrorKind::Io(io::Error::other("read failed"))),
        Err(e) => Err(InputErrorKind::Malformed {
            packets_read: 0,
            detail: describe(&e),
        }),
    }
}

/// Opens the capture at `path` and checks its file header (see
/// [`read_capture`]'s errors for a file that is missing, empty, not a
/// capture, or cut inside its header) without reading any packet, so a
/// caller can refuse a bad input before it opens its log.
///
/// # Errors
///
/// An [`InputError`] naming the path: [`InputErrorKind::Io`] (e.g. no such
/// file, with the OS error), [`InputErrorKind::Empty`],
/// [`InputErrorKind::BadMagic`], [`InputErrorKind::TruncatedHeader`],
/// [`InputErrorKind::Malformed`] (a pcapng byte-order magic that is
/// neither order).
#[allow(clippy::result_large_err)]
pub fn check_capture(path: &Path) -> Result<CaptureFormat, InputError> {
    let err = |kind| InputError {
        path: path.to_path_buf(),
        offset: 0,
        kind,
        stats: InputStats::default(),
    };
    let mut file = File::open(path).map_err(|e| err(InputErrorKind::Io(e)))?;
    let file_len = regular_file_len(&file).map_err(err)?;
    let format = check_header(&mut file, file_len).map_err(err)?;
    // The header as the reader parses it (version, section header block).
    open_reader(file, file_len, 1 << 16).map_err(err)?;
    Ok(format)
}

/// Reads the pcap or pcapng file at `path`, calling `f` for every packet in
/// file order as it is read. Returns the counters on success.
///
/// Unsupported link types are not an error here: packets are delivered with
/// their link type and the consumer decides. Records whose captured length
/// exceeds their original length are skipped and counted in
/// [`InputStats::bad_caplen`].
///
/// # Errors
///
/// An [`InputError`] carrying the path, the byte offset and the counters so
/// far: [`InputErrorKind::Empty`] for a zero-length file,
/// [`InputErrorKind::BadMagic`], [`InputErrorKind::Truncated`] when the file
/// ends inside its header or a record, [`InputErrorKind::BadCaplen`] when
/// the record that could not be read claims a captured length above the
/// snap length (or its block), [`InputErrorKind::Malformed`] for an
/// unparsable block,
/// [`InputErrorKind::RecordTooLarge`] and [`InputErrorKind::Io`]. Packets
/// before the failure have already been delivered to `f`.
// The error is returned once per file, never on a hot path; keeping the
// counters inline makes it easier to use than a boxed one.
#[allow(clippy::result_large_err)]
pub fn read_capture(path: &Path, f: impl FnMut(Packet<'_>)) -> Result<InputStats, InputError> {
    read_capture_max(path, 0, f)
}

/// [`read_capture`] that stops after `max_packets` packets have been
/// delivered (0 = no limit): the rest of the file is not read, and its
/// errors (a truncation after the limit) are not seen. `dplog-nat
/// --pcap FILE --packets N`.
///
/// # Errors
///
/// As [`read_capture`], for the part of the file read.
#[allow(clippy::result_large_err)]
pub fn read_capture_max(
    path: &Path,
    max_packets: u64,
    f: impl FnMut(Packet<'_>),
) -> Result<InputStats, InputError> {
    let limit = if max_packets == 0 {
        u64::MAX
    } else {
        max_packets
    };
    let mut st = State {
        path,
        stats: InputStats::default(),
        ifaces: Vec::new(),
        section_big_endian: false,
        last_ts: 0,
        legacy_linktype: 0,
        legacy_nanos: false,
        legacy_big_endian: false,
        legacy_snaplen: 0,
        f,
    };
    let io_err = |st: &State<'_, _>, e: io::Error| st.error(0, InputErrorKind::Io(e));
    let mut file = File::open(path).map_err(|e| io_err(&st, e))?;
    let file_len = regular_file_len(&file).map_err(|kind| st.error(0, kind))?;
    check_header(&mut file, file_len).map_err(|kind| st.error(0, kind))?;
    let capacity = INITIAL_BUFFER;
    let mut reader = open_reader(file, file_len, capacity).map_err(|kind| st.error(0, kind))?;
    let mut capacity = capacity;

    loop {
        let offset = reader.consumed() as u64;
        st.stats.offset = offset;
        if st.stats.packets >= limit {
            break;
        }
        // `None`: block handled; `Some(true)`: refill; `Some(false)`: grow.
        let action: Result<Option<bool>, InputErrorKind> = match reader.next() {
            Ok((len, block)) => {
                st.block(block);
                reader.consume(len);
                Ok(None)
            }
            Err(PcapError::Eof) => break,
            Err(PcapError::Incomplete(_)) => Ok(Some(true)),
            Err(PcapError::BufferTooSmall) => Ok(Some(false)),
            Err(PcapError::UnexpectedEof) => Err(InputErrorKind::Truncated {
                packets_read: st.stats.packets,
            }),
            Err(PcapError::ReadError) => Err(InputErrorKind::Io(io::Error::other("read failed"))),
            Err(e) => Err(InputErrorKind::Malformed {
                packets_read: st.stats.packets,
                detail: describe(&e),
            }),
        };
        let grow = match action {
            Ok(None) => continue,
            Ok(Some(true)) => {
                let before = reader.data().len();
                if let Err(e) = reader.refill() {
                    let kind = InputErrorKind::Io(io::Error::other(e.to_string()));
                    return Err(st.error(offset, kind));
                }
                // A full buffer that cannot take more data: grow it.
                reader.data().len() == before && !reader.reader_exhausted()
            }
            Ok(Some(false)) => true,
            Err(kind) => {
                let kind = st.refine(reader.data(), kind);
                return Err(st.error(offset, kind));
            }
        };
        if grow {
            let remaining = file_len.saturating_sub(offset);
            if remaining < capacity as u64 {
                // The record is larger than the buffer and the buffer is
                // larger than what is left of the file.
                let kind = InputErrorKind::Truncated {
                    packets_read: st.stats.packets,
                };
                let kind = st.refine(reader.data(), kind);
                return Err(st.error(offset, kind));
            }
            if capacity >= MAX_RECORD_BYTES {
                let kind = InputErrorKind::RecordTooLarge {
                    packets_read: st.stats.packets,
                };
                let kind = st.refine(reader.data(), kind);
                return Err(st.error(offset, kind));
            }
            capacity *= 2;
            reader.grow(capacity);
            if let Err(e) = reader.refill() {
                let kind = InputErrorKind::Io(io::Error::other(e.to_string()));
                return Err(st.error(offset, kind));
            }
        }
    }
    Ok(st.stats)
}

// The pcapng writer the integration tests use (not part of the library).
#[cfg(test)]
#[path = "../tests/pcapng/mod.rs"]
mod pcapng;

#[cfg(test)]
mod tests {
    use super::*;
    use pcapng::{epb, ng_block, shb};
    use std::io::Write;

    fn legacy_header(magic: u32, big_endian: bool, linktype: u32) -> Vec<u8> {
        let mut h = Vec::new();
        let put32 = |h: &mut Vec<u8>, v: u32| {
            if big_endian {
                h.extend_from_slice(&v.to_be_bytes())
            } else {
                h.extend_from_slice(&v.to_le_bytes())
            }
        };
        let put16 = |h: &mut Vec<u8>, v: u16| {
            if big_endian {
                h.extend_from_slice(&v.to_be_bytes())
            } else {
                h.extend_from_slice(&v.to_le_bytes())
            }
        };
        put32(&mut h, magic);
        put16(&mut h, 2);
        put16(&mut h, 4);
        put32(&mut h, 0);
        put32(&mut h, 0);
        put32(&mut h, 65535);
        put32(&mut h, linktype);
        h
    }

    fn legacy_record(
        big_endian: bool,
        sec: u32,
        frac: u32,
        data: &[u8],
        caplen: u32,
        origlen: u32,
    ) -> Vec<u8> {
        let mut r = Vec::new();
        for v in [sec, frac, caplen, origlen] {
            if big_endian {
                r.extend_from_slice(&v.to_be_bytes());
            } else {
                r.extend_from_slice(&v.to_le_bytes());
            }
        }
        r.extend_from_slice(data);
        r
    }

    fn write_tmp(bytes: &[u8]) -> tempfile::NamedTempFile {
        let mut t = tempfile::NamedTempFile::new().unwrap();
        t.write_all(bytes).unwrap();
        t.flush().unwrap();
        t
    }

    /// (timestamp ns, link type, interface, bytes) per delivered packet.
    type Delivered = Vec<(u64, u32, u32, Vec<u8>)>;

    fn collect(path: &Path) -> (Delivered, Result<InputStats, InputError>) {
        let mut v = Vec::new();
        let r = read_capture(path, |p| {
            v.push((p.ts_ns, p.linktype, p.interface, p.data.to_vec()))
        });
        (v, r)
    }

    #[test]
    fn legacy_microsecond_le() {
        let mut b = legacy_header(0xa1b2_c3d4, false, 1);
        b.extend(legacy_record(
            false,
            1_700_000_000,
            123_456,
            &[1, 2, 3],
            3,
            3,
        ));
        b.extend(legacy_record(false, 1_700_000_001, 0, &[4; 10], 10, 1500));
        let t = write_tmp(&b);
        let (pkts, r) = collect(t.path());
        let s = r.unwrap();
        assert_eq!(
            s.format,
            Some(CaptureFormat::Pcap {
                nanosecond: false,
                big_endian: false
            })
        );
        assert_eq!((s.packets, s.bytes, s.bad_caplen), (2, 13, 0));
        assert_eq!(s.offset, b.len() as u64);
        assert_eq!(pkts[0], (1_700_000_000_123_456_000, 1, 0, vec![1, 2, 3]));
        assert_eq!(pkts[1].0, 1_700_000_001_000_000_000);
    }

    #[test]
    fn legacy_nanosecond_big_endian() {
        let mut b = legacy_header(0xa1b2_3c4d, true, 101);
        b.extend(legacy_record(true, 10, 999_999_999, &[0x45; 4], 4, 4));
        let t = write_tmp(&b);
        let (pkts, r) = collect(t.path());
        assert_eq!(
            r.unwrap().format,
            Some(CaptureFormat::Pcap {
                nanosecond: true,
                big_endian: true
            })
        );
        assert_eq!(pkts, vec![(10_999_999_999, 101, 0, vec![0x45; 4])]);
    }

    #[test]
    fn a_device_or_directory_is_not_a_regular_file() {
        let e = read_capture(Path::new("/dev/zero"), |_| {}).unwrap_err();
        assert!(
            matches!(e.kind, InputErrorKind::NotRegularFile("a character device")),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "/dev/zero: at byte offset 0: not a regular file (a character device); give a pcap or pcapng file"
        );
        let d = tempfile::tempdir().unwrap();
        let e = check_capture(d.path()).unwrap_err();
        assert!(
            matches!(e.kind, InputErrorKind::NotRegularFile("a directory")),
            "{e}"
        );
    }

    #[test]
    fn empty_and_bad_magic() {
        let t = write_tmp(&[]);
        let e = read_capture(t.path(), |_| {}).unwrap_err();
        assert!(matches!(e.kind, InputErrorKind::Empty));
        let msg = e.to_string();
        assert!(msg.contains("empty file, not a pcap"), "{msg}");
        assert!(msg.contains(&t.path().display().to_string()), "{msg}");
        assert!(msg.contains("byte offset 0"), "{msg}");

        let t = write_tmp(b"GIF89a and more bytes to be sure.......");
        let e = read_capture(t.path(), |_| {}).unwrap_err();
        assert!(matches!(&e.kind, InputErrorKind::BadMagic(m) if m == b"GIF8"));
        assert!(e.to_string().contains("bad magic 47 49 46 38"), "{e}");

        // A valid magic, then the file ends inside the global header: the
        // header is named, with how much of it there is.
        let t = write_tmp(&legacy_header(0xa1b2_c3d4, false, 1)[..10]);
        let e = read_capture(t.path(), |_| {}).unwrap_err();
        assert!(
            matches!(
                e.kind,
                InputErrorKind::TruncatedHeader {
                    what: "pcap file header",
                    have: 10,
                    need: 24
                }
            ),
            "{e}"
        );
        let msg = e.to_string();
        assert!(
            msg.contains("truncated pcap file header (10 of 24 bytes)"),
            "{msg}"
        );
        assert!(!msg.contains("inside a record"), "{msg}");
        // Two bytes of a magic number: still the header, not "bad magic".
        let t = write_tmp(&[0xd4, 0xc3]);
        let e = check_capture(t.path()).unwrap_err();
        assert!(
            e.to_string()
                .contains("truncated pcap file header (2 of 24 bytes)"),
            "{e}"
        );
        // 23 bytes: one short.
        let t = write_tmp(&legacy_header(0xa1b2_c3d4, true, 1)[..23]);
        let e = read_capture(t.path(), |_| {}).unwrap_err();
        assert!(e.to_string().contains("(23 of 24 bytes)"), "{e}");
        // The whole header, no records: a valid, empty capture.
        let t = write_tmp(&legacy_header(0xa1b2_c3d4, true, 1));
        assert_eq!(
            check_capture(t.path()).unwrap(),
            CaptureFormat::Pcap {
                nanosecond: false,
                big_endian: true
            }
        );
        assert_eq!(read_capture(t.path(), |_| {}).unwrap().packets, 0);

        let e = read_capture(Path::new("/nonexistent/x.pcap"), |_| {}).unwrap_err();
        assert!(matches!(e.kind, InputErrorKind::Io(_)));
        assert!(std::error::Error::source(&e).is_some());
        let e = check_capture(Path::new("/nonexistent/x.pcap")).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("/nonexistent/x.pcap: ") && msg.contains("No such file or directory"),
            "{msg}"
        );
    }

    #[test]
    fn pcapng_cut_inside_its_section_header_says_so() {
        let full = shb();
        for cut in [5usize, 11, 20] {
            let t = write_tmp(&full[..cut]);
            let e = read_capture(t.path(), |_| {}).unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.contains(&format!(
                    "truncated pcapng section header block ({cut} of 28 bytes)"
                )),
                "{cut}: {msg}"
            );
        }
        // An SHB that claims options it does not have: its own length.
        let mut long = full.clone();
        long[4..8].copy_from_slice(&40u32.to_le_bytes());
        let t = write_tmp(&long);
        let e = check_capture(t.path()).unwrap_err();
        assert!(
            e.to_string()
                .contains("truncated pcapng section header block (28 of 40 bytes)"),
            "{e}"
        );
        let t = write_tmp(&full);
        assert_eq!(check_capture(t.path()).unwrap(), CaptureFormat::PcapNg);
    }

    #[test]
    fn a_packet_limit_stops_reading_after_that_many_packets() {
        let mut b = legacy_header(0xa1b2_c3d4, false, 1);
        for i in 0..5u8 {
            b.extend(legacy_record(false, u32::from(i), 0, &[i; 60], 60, 60));
        }
        // Cut inside the last record: a limit below it never sees the cut.
        b.truncate(b.len() - 10);
        let t = write_tmp(&b);
        let mut got = Vec::new();
        let s = read_capture_max(t.path(), 3, |p| got.push(p.data[0])).unwrap();
        assert_eq!(got, vec![0, 1, 2]);
        assert_eq!(s.packets, 3);
        assert_eq!(s.bytes, 180);
        // 0 = no limit: the truncation is reached.
        let e = read_capture_max(t.path(), 0, |_| {}).unwrap_err();
        assert!(matches!(
            e.kind,
            InputErrorKind::Truncated { packets_read: 4 }
        ));
    }

    #[test]
    fn truncated_file_keeps_earlier_packets() {
        let mut b = legacy_header(0xa1b2_c3d4, false, 1);
        b.extend(legacy_record(false, 1, 0, &[1; 60], 60, 60));
        b.extend(legacy_record(false, 2, 0, &[2; 60], 60, 60));
        let third_at = b.len() as u64;
        b.extend(legacy_record(false, 3, 0, &[3; 60], 60, 60));
        b.truncate(b.len() - 30);
        let t = write_tmp(&b);
        let (pkts, r) = collect(t.path());
        assert_eq!(pkts.len(), 2);
        let e = r.unwrap_err();
        assert!(
            matches!(e.kind, InputErrorKind::Truncated { packets_read: 2 }),
            "{e}"
        );
        assert_eq!(e.offset, third_at);
        assert_eq!(e.stats.packets, 2);
        let msg = e.to_string();
        assert!(
            msg.contains("2 packets were read before the truncation"),
            "{msg}"
        );
        assert!(msg.contains(&format!("byte offset {third_at}")), "{msg}");

        // Truncated inside a record header.
        let t = write_tmp(&b[..(third_at as usize + 5)]);
        let (pkts, r) = collect(t.path());
        assert_eq!(pkts.len(), 2);
        assert!(matches!(
            r.unwrap_err().kind,
            InputErrorKind::Truncated { packets_read: 2 }
        ));
    }

    #[test]
    fn huge_caplen_is_a_corrupt_header_not_truncation_nor_a_crash() {
        for big_endian in [false, true] {
            let mut b = legacy_header(0xa1b2_c3d4, big_endian, 1);
            b.extend(legacy_record(big_endian, 1, 0, &[1; 60], 60, 60));
            let second_at = b.len() as u64;
            // caplen 3 GB, far past the end of the file and the snap length.
            b.extend(legacy_record(
                big_endian,
                2,
                0,
                &[2; 60],
                3_000_000_000,
                3_000_000_000,
            ));
            let t = write_tmp(&b);
            let (pkts, r) = collect(t.path());
            assert_eq!(pkts.len(), 1);
            let e = r.unwrap_err();
            assert!(
                matches!(
                    e.kind,
                    InputErrorKind::BadCaplen {
                        packet: 2,
                        caplen: 3_000_000_000,
                        limit: 65535,
                        limit_name: "snap length",
                        packets_read: 1
                    }
                ),
                "{e}"
            );
            assert_eq!(e.offset, second_at);
            let msg = e.to_string();
            assert!(
                msg.contains(&format!(
                    "at byte offset {second_at}: corrupt record header: packet 2 claims a captured length of 3000000000 bytes, more than the snap length of 65535 bytes; 1 packets were read before it"
                )),
                "{msg}"
            );
            assert!(!msg.contains("truncated"), "{msg}");
        }
    }

    #[test]
    fn caplen_just_above_the_snap_length_in_a_short_file_is_corrupt() {
        let mut b = legacy_header(0xa1b2_c3d4, false, 1);
        b.extend(legacy_record(false, 1, 0, &[1; 60], 60, 60));
        b.extend(legacy_record(false, 2, 0, &[1; 60], 60, 60));
        b.extend(legacy_record(false, 3, 0, &[2; 60], 65536, 65536));
        let t = write_tmp(&b);
        let (pkts, r) = collect(t.path());
        assert_eq!(pkts.len(), 2);
        let e = r.unwrap_err();
        assert!(
            matches!(
                e.kind,
                InputErrorKind::BadCaplen {
                    packet: 3,
                    caplen: 65536,
                    limit: 65535,
                    ..
                }
            ),
            "{e}"
        );
        // Within the snap length, a record the file cannot hold is a
        // truncation.
        let mut b = legacy_header(0xa1b2_c3d4, false, 1);
        b.extend(legacy_record(false, 1, 0, &[2; 60], 1000, 1000));
        let t = write_tmp(&b);
        assert!(matches!(
            read_capture(t.path(), |_| {}).unwrap_err().kind,
            InputErrorKind::Truncated { packets_read: 0 }
        ));
    }

    #[test]
    fn record_bigger_than_initial_buffer_is_read() {
        let big = vec![7u8; INITIAL_BUFFER + 1000];
        let mut b = legacy_header(0xa1b2_c3d4, false, 1);
        b.extend(legacy_record(
            false,
            1,
            0,
            &big,
            big.len() as u32,
            big.len() as u32,
        ));
        b.extend(legacy_record(false, 2, 0, &[1; 8], 8, 8));
        let t = write_tmp(&b);
        let (pkts, r) = collect(t.path());
        assert_eq!(r.unwrap().packets, 2);
        assert_eq!(pkts[0].3.len(), big.len());
    }

    #[test]
    fn caplen_above_origlen_is_counted_and_skipped() {
        let mut b = legacy_header(0xa1b2_c3d4, false, 1);
        b.extend(legacy_record(false, 1, 0, &[1; 60], 60, 40));
        b.extend(legacy_record(false, 2, 0, &[2; 60], 60, 60));
        let t = write_tmp(&b);
        let (pkts, r) = collect(t.path());
        let s = r.unwrap();
        assert_eq!((s.packets, s.bad_caplen), (1, 1));
        assert_eq!(pkts[0].3, vec![2; 60]);
    }

    // --- pcapng ------------------------------------------------------------

    fn idb(linktype: u16, tsresol: Option<u8>) -> Vec<u8> {
        let mut body = linktype.to_le_bytes().to_vec();
        body.extend_from_slice(&0u16.to_le_bytes());
        body.extend_from_slice(&0u32.to_le_bytes());
        if let Some(r) = tsresol {
            body.extend_from_slice(&9u16.to_le_bytes());
            body.extend_from_slice(&1u16.to_le_bytes());
            body.extend_from_slice(&[r, 0, 0, 0]);
            body.extend_from_slice(&[0, 0, 0, 0]); // opt_endofopt
        }
        ng_block(1, &body)
    }

    #[test]
    fn pcapng_interfaces_and_resolutions() {
        let mut b = shb();
        b.extend(idb(1, None)); // Ethernet, microseconds
        b.extend(idb(101, Some(9))); // raw IP, nanoseconds
        b.extend(epb(0, 1_700_000_000_000_001, &[1, 2, 3, 4, 5], 5, 5));
        b.extend(epb(1, 1_700_000_000_000_000_007, &[6, 7], 2, 2));
        b.extend(epb(5, 0, &[9], 1, 1)); // unknown interface
        b.extend(epb(0, 0, &[9; 8], 8, 4)); // caplen > origlen
        b.extend(ng_block(0xBAD, &[1, 2, 3, 4])); // unknown block type
        let t = write_tmp(&b);
        let (pkts, r) = collect(t.path());
        let s = r.unwrap();
        assert_eq!(s.format, Some(CaptureFormat::PcapNg));
        assert_eq!((s.sections, s.interfaces, s.packets), (1, 2, 2));
        assert_eq!(
            (s.unknown_interface, s.bad_caplen, s.other_blocks),
            (1, 1, 1)
        );
        assert_eq!(
            pkts[0],
            (1_700_000_000_000_001_000, 1, 0, vec![1, 2, 3, 4, 5])
        );
        assert_eq!(pkts[1], (1_700_000_000_000_000_007, 101, 1, vec![6, 7]));
    }

    #[test]
    fn pcapng_truncated_keeps_packets() {
        let mut b = shb();
        b.extend(idb(1, None));
        b.extend(epb(0, 1, &[1; 60], 60, 60));
        let cut_at = b.len();
        b.extend(epb(0, 2, &[2; 60], 60, 60));
        let t = write_tmp(&b[..b.len() - 10]);
        let (pkts, r) = collect(t.path());
        assert_eq!(pkts.len(), 1);
        let e = r.unwrap_err();
        assert!(
            matches!(e.kind, InputErrorKind::Truncated { packets_read: 1 }),
            "{e}"
        );
        assert_eq!(e.offset, cut_at as u64);
    }

    #[test]
    fn pcapng_corrupt_caplen_names_the_packet_and_the_limit() {
        let mut b = shb();
        b.extend(idb(1, None)); // snap length 0: libpcap's largest applies
        b.extend(epb(0, 1, &[1; 60], 60, 60));
        let bad_at = b.len() as u64;
        // A well-formed 92-byte block whose caplen claims 2 GB.
        b.extend(epb(0, 2, &[2; 60], 2_000_000_000, 2_000_000_000));
        let t = write_tmp(&b);
        let (pkts, r) = collect(t.path());
        assert_eq!(pkts.len(), 1);
        let e = r.unwrap_err();
        assert!(
            matches!(
                e.kind,
                InputErrorKind::BadCaplen {
                    packet: 2,
                    caplen: 2_000_000_000,
                    limit: MAX_SNAPLEN,
                    limit_name: "largest snap length",
                    packets_read: 1
                }
            ),
            "{e}"
        );
        assert_eq!(e.offset, bad_at);

        // Below the snap length but past the end of its own block.
        let mut b = shb();
        b.extend(idb(1, None));
        b.extend(epb(0, 2, &[2; 60], 200, 200));
        let t = write_tmp(&b);
        let e = read_capture(t.path(), |_| {}).unwrap_err();
        assert!(
            matches!(
                e.kind,
                InputErrorKind::BadCaplen {
                    packet: 1,
                    caplen: 200,
                    limit: 60,
                    limit_name: "block body",
                    packets_read: 0
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn to_ns_conversions() {
        assert_eq!(to_ns(1_500_000, 1_000_000, 0), 1_500_000_000);
        assert_eq!(to_ns(3, 1 << 1, 0), 1_500_000_000); // 2^-1 s units
        assert_eq!(to_ns(5, 1, 10), 15 * NS_PER_SEC);
        assert_eq!(to_ns(5, 1, -10), 0);
        assert_eq!(to_ns(u64::MAX, 1, 0), u64::MAX);
    }
}
