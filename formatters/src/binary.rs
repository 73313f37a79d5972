//! Binary passthrough: length-prefixed records plus a schema header, and
//! its decoder (used by `dplog-cat`).
//!
//! A file is a sequence of frames, `[kind: u8][0: u8][len: u16 LE][len
//! bytes]`:
//! - kind `H` (file header, first): `DPLOGBIN`, format version (u16 LE,
//!   1), byte order of the records (`1` little-endian, `2` big-endian);
//! - kind `S` (schema): the schema's description
//!   ([`Schema::encode`](dplog_core::schema::Schema::encode)): id u16,
//!   record size u16, name, field count u16, then per field: name, offset
//!   u16, size u16, kind u8, IPFIX element id u16, enum count u16 and per
//!   enum value: value u32, name; then its metadata (a version byte, then
//!   event time, priorities, syslog layout, lifecycle, ...; see
//!   `dplog_core::schema`'s codec). Integers LE; a name is a u8 length
//!   and UTF-8 bytes. A frame that ends after the fields (what logs
//!   written before the metadata travelled hold) gives the default
//!   metadata, so a reader formats any log with its writer's metadata
//!   and needs no schema package;
//! - kind `R` (record): the record's bytes as in the ring (header
//!   included; its `schema_id` names an `S` frame seen before);
//! - kind `C` (TSC calibration): `hz` u64, `tsc0` u64, `ns0` u64, LE (24
//!   bytes; [`TscCalibration`]): the records after it until the next `C`
//!   were formatted with it, and a reader converts their TSC timestamp
//!   fields with it. The writer puts one before its first record (the
//!   identity, `hz` 1e9 and 0, 0, when the consumer has no calibration:
//!   ticks are then nanoseconds) and one each time the consumer
//!   recalibrates (about once a second), before the next record;
//! - kind `D` (drop report, [`DropReport`]): `ring` u32, `reason` u32
//!   (`dplog_core::report`'s codes: 0 a ring's drops without a reason, 1
//!   the sink's, 2..=5 a ring's full, degraded, disconnected, stopped),
//!   `dropped` u64, `first_ns` u64, `last_ns` u64, `record_time_ns` u64,
//!   LE (40 bytes): records lost at that place in the stream, with exact
//!   counts (see `dplog_core::report`).
//!
//! A new `H` may appear later (a writer appending after a restart, or an
//! mmap segment's preamble); it starts a new schema table. The
//! calibration carries over an `H` (each writer sends its own `C` before
//! its first record).

use dplog_core::report::DropReport;
use dplog_core::schema::{Schema, SchemaError};

use crate::conv::TscCalibration;

/// Magic at the start of the `H` frame payload.
pub const MAGIC: &[u8; 8] = b"DPLOGBIN";

/// True if `prefix`, the first bytes of an input (any number; 12 decide),
/// can start a binary log: its `H` frame (`H`, 0, the frame length, then
/// [`MAGIC`]) or a prefix of one (a log cut inside its first frame is
/// damaged, not foreign), or nothing (an empty log). Readers call it to
/// refuse another kind of file at once, by name, instead of decoding it
/// as a truncated frame.
pub fn may_start_log(prefix: &[u8]) -> bool {
    let b = &prefix[..prefix.len().min(12)];
    b.is_empty()
        || (b[0] == b'H'
            && b.get(1).map_or(true, |&z| z == 0)
            && MAGIC.starts_with(&b[b.len().min(4)..]))
}

fn frame(out: &mut Vec<u8>, kind: u8, payload: &[u8]) {
    out.push(kind);
    out.push(0);
    out.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    out.extend_from_slice(payload);
}

/// Serialises `s` as an `S` frame payload ([`Schema::encode`]: fields
/// and metadata).
///
/// # Errors
/// As [`Schema::encode`]; [`SchemaError::NotEncodable`] too for a
/// description above a frame's 65535 bytes.
pub fn schema_bytes(s: &Schema) -> Result<Vec<u8>, SchemaError> {
    let b = s.encode()?;
    if b.len() > usize::from(u16::MAX) {
        return Err(SchemaError::NotEncodable(format!(
            "schema {}: its description of {} bytes exceeds a binary frame's 65535",
            s.name(),
            b.len()
        )));
    }
    Ok(b)
}

/// `C` frame payload of `c`.
pub fn calibration_bytes(c: &TscCalibration) -> [u8; 24] {
    let mut b = [0u8; 24];
    b[..8].copy_from_slice(&c.hz.to_le_bytes());
    b[8..16].copy_from_slice(&c.tsc0.to_le_bytes());
    b[16..].copy_from_slice(&c.ns0.to_le_bytes());
    b
}

/// `D` frame payload of `r`.
pub fn drop_report_bytes(r: &DropReport) -> [u8; 40] {
    let mut b = [0u8; 40];
    b[..4].copy_from_slice(&r.ring.to_le_bytes());
    b[4..8].copy_from_slice(&r.reason.to_le_bytes());
    b[8..16].copy_from_slice(&r.dropped.to_le_bytes());
    b[16..24].copy_from_slice(&r.first_ns.to_le_bytes());
    b[24..32].copy_from_slice(&r.last_ns.to_le_bytes());
    b[32..].copy_from_slice(&r.record_time_ns.to_le_bytes());
    b
}

fn le64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
}

/// Parses a `C` frame payload.
pub fn parse_calibration(b: &[u8]) -> Result<TscCalibration, String> {
    if b.len() != 24 {
        return Err(format!("calibration frame of {} bytes, not 24", b.len()));
    }
    let c = TscCalibration {
        hz: le64(b),
        tsc0: le64(&b[8..]),
        ns0: le64(&b[16..]),
    };
    if c.hz == 0 {
        return Err("calibration frame with a tick rate of 0 Hz".into());
    }
    Ok(c)
}

/// Parses a `D` frame payload.
pub fn parse_drop_report(b: &[u8]) -> Result<DropReport, String> {
    if b.len() != 40 {
        return Err(format!("drop report frame of {} bytes, not 40", b.len()));
    }
    let mut r = DropReport::new(
        u32::from_le_bytes(b[..4].try_into().expect("4 bytes")),
        le64(&b[8..]),
        le64(&b[16..]),
        le64(&b[24..]),
    )
    .with_record_time(le64(&b[32..]));
    r.reason = u32::from_le_bytes(b[4..8].try_into().expect("4 bytes"));
    Ok(r)
}

/// Writes binary frames: the header and schemas before the first record,
/// a `C` frame before it and after each change of calibration, `D` frames
/// for drop reports.
#[derive(Clone, Debug)]
pub struct BinaryEncoder {
    header: Vec<u8>,
    sizes: Vec<(u16, usize)>,
    started: bool,
    /// The consumer's calibration (identity until it passes one).
    cal: TscCalibration,
    /// The calibration of the last `C` frame written.
    written_cal: Option<TscCalibration>,
    /// The header is written and the last `C` frame carries `cal`: a
    /// record needs no lead (one test per record instead of two).
    led: bool,
}

impl BinaryEncoder {
    /// An encoder for records of `schemas`: its preamble carries each
    /// schema's fields and metadata ([`schema_bytes`]).
    ///
    /// # Panics
    /// If a schema does not encode (see [`BinaryEncoder::try_new`], which
    /// says why instead).
    pub fn new(schemas: &[&Schema]) -> Self {
        match Self::try_new(schemas) {
            Ok(e) => e,
            Err(e) => panic!("binary encoder: {e}"),
        }
    }

    /// An encoder for records of `schemas`.
    ///
    /// # Errors
    /// As [`schema_bytes`], for the first schema that does not encode.
    pub fn try_new(schemas: &[&Schema]) -> Result<Self, SchemaError> {
        let mut header = Vec::new();
        let mut h = MAGIC.to_vec();
        h.extend_from_slice(&1u16.to_le_bytes());
        h.push(if cfg!(target_endian = "little") { 1 } else { 2 });
        frame(&mut header, b'H', &h);
        for s in schemas {
            frame(&mut header, b'S', &schema_bytes(s)?);
        }
        Ok(Self {
            header,
            sizes: schemas.iter().map(|s| (s.id(), s.size())).collect(),
            started: false,
            cal: TscCalibration::IDENTITY,
            written_cal: None,
            led: false,
        })
    }

    /// The calibration the records from now on are stamped with (the
    /// consumer's); a `C` frame carrying it goes before the next record.
    pub fn set_tsc_calibration(&mut self, cal: TscCalibration) {
        self.cal = cal;
        self.led &= self.written_cal == Some(cal);
    }

    /// The header and schemas (first time), and a `C` frame if the
    /// calibration changed since the last one written. Out of line: a
    /// record needs it once per calibration change.
    #[cold]
    #[inline(never)]
    fn lead(&mut self, out: &mut Vec<u8>) {
        if !self.started {
            out.extend_from_slice(&self.header);
            self.started = true;
        }
        if self.written_cal != Some(self.cal) {
            frame(out, b'C', &calibration_bytes(&self.cal));
            self.written_cal = Some(self.cal);
        }
        self.led = true;
    }

    /// Appends a `D` frame for `r` (after the header, the first time).
    pub fn push_drop_report(&mut self, r: &DropReport, out: &mut Vec<u8>) {
        self.lead(out);
        frame(out, b'D', &drop_report_bytes(r));
    }

    /// Appends one `R` frame (after the header and schemas, the first
    /// time). `false` and nothing appended for an unknown schema or a
    /// record shorter than its schema's size.
    pub fn push(&mut self, rec: &[u8], out: &mut Vec<u8>) -> bool {
        if rec.len() < 8 {
            return false;
        }
        let sid = u16::from_ne_bytes([rec[2], rec[3]]);
        match self.sizes.iter().position(|(id, _)| *id == sid) {
            Some(i) => self.push_schema(i, rec, out),
            None => false,
        }
    }

    /// [`push`](Self::push) for a record whose schema is number `i` of the
    /// schemas this encoder was built with (the caller looked its id up):
    /// `false` and nothing appended if there is no schema `i` or the
    /// record is shorter than its size.
    #[inline]
    pub fn push_schema(&mut self, i: usize, rec: &[u8], out: &mut Vec<u8>) -> bool {
        let Some(&(_, size)) = self.sizes.get(i) else {
            return false;
        };
        if rec.len() < size {
            return false;
        }
        if !self.led {
            self.lead(out);
        }
        // The frame as `frame` writes it, with one capacity check: the
        // 4-byte header, then the record (one fixed-size copy for the
        // common 64-byte slot).
        let len = size as u16;
        let head = [b'R', 0, len.to_le_bytes()[0], len.to_le_bytes()[1]];
        out.reserve(4 + size);
        let at = out.len();
        // SAFETY: `reserve` made room for 4 + size bytes after `at`;
        // `rec` holds at least `size` bytes (checked above) and cannot
        // overlap `out`'s spare capacity (a shared and a unique borrow);
        // all 4 + size bytes are written before `set_len`.
        unsafe {
            let p = out.as_mut_ptr().add(at);
            p.cast::<[u8; 4]>().write_unaligned(head);
            if size == 64 {
                p.add(4)
                    .cast::<[u8; 64]>()
                    .write_unaligned(rec.as_ptr().cast::<[u8; 64]>().read_unaligned());
            } else {
                copy_other(rec.as_ptr(), p.add(4), size);
            }
            out.set_len(at + 4 + size);
        }
        true
    }
}

/// Copies a record of any size but 64 bytes. Out of line: inlined, its
/// `memcpy` call would absorb the fixed 64-byte copy beside it (the same
/// call when `size` is 64), and every record would pay a call.
///
/// # Safety
/// `src` readable and `dst` writable for `size` bytes, not overlapping.
#[inline(never)]
unsafe fn copy_other(src: *const u8, dst: *mut u8, size: usize) {
    // SAFETY: the caller's contract.
    unsafe { core::ptr::copy_nonoverlapping(src, dst, size) }
}

/// Where and why decoding stopped before the end of the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stopped {
    /// Byte offset of the frame that could not be decoded.
    pub offset: usize,
    /// Why.
    pub reason: String,
}

/// A decoded file: its schemas and the records in order (schema index into
/// `schemas`, record bytes).
#[derive(Debug, Default)]
pub struct Decoded<'a> {
    /// Every schema seen, in order.
    pub schemas: Vec<Schema>,
    /// `(index into schemas, record bytes)`.
    pub records: Vec<(usize, &'a [u8])>,
    /// The drop reports, with the number of records before each.
    pub drop_reports: Vec<(usize, DropReport)>,
    /// The calibration in force at the end.
    pub calibration: TscCalibration,
    /// `None` if the whole input decoded; else where it stopped (a
    /// truncated last record, a bad frame).
    pub stopped: Option<Stopped>,
}

/// One decoded frame.
#[derive(Debug)]
pub enum Frame<'a> {
    /// `H`: a new schema table starts.
    Header,
    /// `S`: schema number `.0` of [`StreamDecoder::schemas`] (new).
    Schema(usize),
    /// `C`: the calibration of the records that follow.
    Calibration(TscCalibration),
    /// `R`: a record of schema `.0` (index into
    /// [`StreamDecoder::schemas`]), its bytes.
    Record(usize, &'a [u8]),
    /// `D`: a drop report.
    DropReport(DropReport),
}

/// Decodes a binary log frame by frame from a buffer the caller refills,
/// holding only the schemas and the calibration: memory does not grow
/// with the log.
#[derive(Debug)]
pub struct StreamDecoder {
    schemas: Vec<Schema>,
    /// Schema ids -> index in `schemas`, reset by each `H` frame.
    table: Vec<(u16, usize)>,
    seen_header: bool,
    cal: TscCalibration,
}

impl Default for StreamDecoder {
    fn default() -> Self {
        Self {
            schemas: Vec::new(),
            table: Vec::new(),
            seen_header: false,
            cal: TscCalibration::IDENTITY,
        }
    }
}

/// Largest frame: a 4-byte frame header and a 65535-byte payload.
pub const MAX_FRAME: usize = 4 + u16::MAX as usize;

impl StreamDecoder {
    /// A decoder before the file header.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every schema seen, in order (a schema id redefined after an `H`
    /// gets a new entry).
    pub fn schemas(&self) -> &[Schema] {
        &self.schemas
    }

    /// The calibration in force (the last `C` frame's; the identity
    /// before any).
    pub fn calibration(&self) -> TscCalibration {
        self.cal
    }

    /// Decodes the frame at the start of `b`. `Ok(None)`: `b` holds no
    /// whole frame (give more bytes; at the end of the input, that is a
    /// truncated frame, see [`StreamDecoder::truncated`]); `Ok(Some((frame,
    /// n)))`: the frame and its length in bytes.
    ///
    /// # Errors
    /// Why the frame cannot be decoded (not a dplog binary log, a bad
    /// schema, a record of an unknown schema, an unknown frame kind).
    pub fn next<'a>(&mut self, b: &'a [u8]) -> Result<Option<(Frame<'a>, usize)>, String> {
        if b.len() < 4 {
            return Ok(None);
        }
        let kind = b[0];
        let len = u16::from_le_bytes([b[2], b[3]]) as usize;
        if b.len() - 4 < len {
            return Ok(None);
        }
        let body = &b[4..4 + len];
        let f = match kind {
            b'H' => {
                if b[1] != 0 || body.len() < 11 || &body[..8] != MAGIC {
                    return Err("bad file header (not a dplog binary file)".into());
                }
                let order = body[10];
                let native = if cfg!(target_endian = "little") { 1 } else { 2 };
                if order != native {
                    return Err(format!(
                        "records are in byte order {order}, this host's is {native}"
                    ));
                }
                self.seen_header = true;
                self.table.clear();
                Frame::Header
            }
            _ if !self.seen_header => return Err("no file header (not a dplog binary file)".into()),
            b'S' => {
                let s = parse_schema(body).map_err(|e| format!("bad schema frame: {e}"))?;
                self.table.retain(|(id, _)| *id != s.id());
                self.table.push((s.id(), self.schemas.len()));
                self.schemas.push(s);
                Frame::Schema(self.schemas.len() - 1)
            }
            b'C' => {
                self.cal = parse_calibration(body)?;
                Frame::Calibration(self.cal)
            }
            b'D' => Frame::DropReport(parse_drop_report(body)?),
            b'R' => {
                let ok = body.len() >= 8;
                let sid = if ok {
                    u16::from_ne_bytes([body[2], body[3]])
                } else {
                    0
                };
                match self.table.iter().find(|(id, _)| *id == sid) {
                    Some(&(_, si)) if ok && body.len() == self.schemas[si].size() => {
                        Frame::Record(si, body)
                    }
                    _ => {
                        return Err(format!(
                            "record of {} bytes with unknown schema id {sid} or wrong size",
                            body.len()
                        ))
                    }
                }
            }
            k => return Err(format!("unknown frame kind 0x{k:02x}")),
        };
        Ok(Some((f, 4 + len)))
    }

    /// Why `rest`, the bytes left at the end of the input, holds no whole
    /// frame.
    pub fn truncated(rest: &[u8]) -> String {
        if rest.len() < 4 {
            format!("truncated frame header ({} of 4 bytes)", rest.len())
        } else {
            let len = u16::from_le_bytes([rest[2], rest[3]]) as usize;
            format!(
                "truncated {} frame: {} of {len} bytes present",
                rest[0] as char,
                rest.len() - 4
            )
        }
    }
}

/// Every frame kind: file header, schema, record, TSC calibration, drop
/// report.
pub const FRAME_KINDS: [u8; 5] = [b'H', b'S', b'R', b'C', b'D'];

/// Why a batch is not whole frames ([`frames`]): the byte `at` starts
/// no frame (a kind other than `H`, `S`, `R`, `C`, `D`, a second byte
/// other than 0, or fewer than 4 bytes left), or its frame runs past the
/// end (`cut_short`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameError {
    /// Offset of the frame in the batch.
    pub at: usize,
    /// The frame's header is whole, its body is not.
    pub cut_short: bool,
}

/// The frames of `batch`, in order, as `(kind, body)` (`body` the `len`
/// bytes after the 4-byte header); an `Err` ends the walk at the first
/// byte that starts no whole frame. For sinks that take whole batches of
/// this format (the archive, ClickHouse) and for counting its records.
pub fn frames(batch: &[u8]) -> Frames<'_> {
    Frames { batch, p: 0 }
}

/// The iterator of [`frames`].
#[derive(Debug)]
pub struct Frames<'a> {
    batch: &'a [u8],
    p: usize,
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<(u8, &'a [u8]), FrameError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let (b, p) = (self.batch, self.p);
        if p >= b.len() {
            return None;
        }
        // A load of bytes further on that the walk (each frame's length
        // read before the next) does not wait for: a batch not in the
        // cache streams in while the walk goes on.
        std::hint::black_box(b.get(p + 1024).copied());
        // Ends the walk after an error.
        self.p = b.len();
        if b.len() - p < 4 || !FRAME_KINDS.contains(&b[p]) || b[p + 1] != 0 {
            return Some(Err(FrameError {
                at: p,
                cut_short: false,
            }));
        }
        let len = usize::from(u16::from_le_bytes([b[p + 2], b[p + 3]]));
        if b.len() - p - 4 < len {
            return Some(Err(FrameError {
                at: p,
                cut_short: true,
            }));
        }
        self.p = p + 4 + len;
        Some(Ok((b[p], &b[p + 4..p + 4 + len])))
    }
}

/// Parses an `S` frame payload, the whole of `b` ([`Schema::decode`]):
/// the schema with its writer's metadata, or with the default metadata
/// for a payload of fields alone (a log written before the metadata
/// travelled).
///
/// Errors: as [`Schema::decode`] (e.g. a metadata version newer than
/// this reader's).
pub fn parse_schema(b: &[u8]) -> Result<Schema, String> {
    Schema::decode(b)
}

/// Decodes a binary file up to its last whole record (all in memory; see
/// [`StreamDecoder`] for a log of any size).
pub fn decode(b: &[u8]) -> Decoded<'_> {
    let mut d = Decoded::default();
    let mut dec = StreamDecoder::new();
    let mut p = 0;
    while p < b.len() {
        match dec.next(&b[p..]) {
            Ok(Some((f, n))) => {
                match f {
                    Frame::Record(si, r) => d.records.push((si, r)),
                    Frame::DropReport(r) => d.drop_reports.push((d.records.len(), r)),
                    Frame::Header | Frame::Schema(_) | Frame::Calibration(_) => {}
                }
                p += n;
            }
            Ok(None) => {
                d.stopped = Some(Stopped {
                    offset: p,
                    reason: StreamDecoder::truncated(&b[p..]),
                });
                break;
            }
            Err(reason) => {
                d.stopped = Some(Stopped { offset: p, reason });
                break;
            }
        }
    }
    d.schemas = dec.schemas;
    d.calibration = dec.cal;
    d
}
