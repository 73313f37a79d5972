//! Binary passthrough: length-prefixed records plus a schema header, and
//! its decoder (used by `dplog-cat`).
//!
//! A file is a sequence of frames, `[kind: u8][0: u8][len: u16 LE][len
//! bytes]`:
//! - kind `H` (file header, first): `DPLOGBIN`, format version (u16 LE,
//!   1), byte order of the records (`1` little-endian, `2` big-endian);
//! - kind `S` (schema): id u16, record size u16, name, field count u16,
//!   then per field: name, offset u16, size u16, kind u8, IPFIX element id
//!   u16, enum count u16 and per enum value: value u32, name. Integers LE;
//!   a name is a u8 length and UTF-8 bytes;
//! - kind `R` (record): the record's bytes as in the ring (header
//!   included; its `schema_id` names an `S` frame seen before).
//!
//! A new `H` may appear later (a writer appending after a restart); it
//! starts a new schema table.

use std::borrow::Cow;

use dplog_core::schema::{EnumName, FieldDef, FieldKind, Schema};

/// Magic at the start of the `H` frame payload.
pub const MAGIC: &[u8; 8] = b"DPLOGBIN";

fn frame(out: &mut Vec<u8>, kind: u8, payload: &[u8]) {
    out.push(kind);
    out.push(0);
    out.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    out.extend_from_slice(payload);
}

fn put_name(b: &mut Vec<u8>, s: &str) {
    let s = &s.as_bytes()[..s.len().min(255)];
    b.push(s.len() as u8);
    b.extend_from_slice(s);
}

/// Serialises `s` as an `S` frame payload.
pub fn schema_bytes(s: &Schema) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&s.id().to_le_bytes());
    b.extend_from_slice(&(s.size() as u16).to_le_bytes());
    put_name(&mut b, s.name());
    b.extend_from_slice(&(s.fields().len() as u16).to_le_bytes());
    for f in s.fields() {
        put_name(&mut b, &f.name);
        b.extend_from_slice(&f.offset.to_le_bytes());
        b.extend_from_slice(&f.size.to_le_bytes());
        b.push(f.kind as u32 as u8);
        b.extend_from_slice(&f.ie_id.to_le_bytes());
        b.extend_from_slice(&(f.enum_names.len() as u16).to_le_bytes());
        for e in &f.enum_names {
            b.extend_from_slice(&e.value.to_le_bytes());
            put_name(&mut b, &e.name);
        }
    }
    b
}

/// Writes binary frames: the header and schemas before the first record.
#[derive(Clone, Debug)]
pub struct BinaryEncoder {
    header: Vec<u8>,
    sizes: Vec<(u16, usize)>,
    started: bool,
}

impl BinaryEncoder {
    /// An encoder for records of `schemas`.
    pub fn new(schemas: &[&Schema]) -> Self {
        let mut header = Vec::new();
        let mut h = MAGIC.to_vec();
        h.extend_from_slice(&1u16.to_le_bytes());
        h.push(if cfg!(target_endian = "little") { 1 } else { 2 });
        frame(&mut header, b'H', &h);
        for s in schemas {
            frame(&mut header, b'S', &schema_bytes(s));
        }
        Self {
            header,
            sizes: schemas.iter().map(|s| (s.id(), s.size())).collect(),
            started: false,
        }
    }

    /// Appends one `R` frame (after the header and schemas, the first
    /// time). `false` and nothing appended for an unknown schema or a
    /// record shorter than its schema's size.
    pub fn push(&mut self, rec: &[u8], out: &mut Vec<u8>) -> bool {
        if rec.len() < 8 {
            return false;
        }
        let sid = u16::from_ne_bytes([rec[2], rec[3]]);
        let Some(&(_, size)) = self.sizes.iter().find(|(id, _)| *id == sid) else {
            return false;
        };
        if rec.len() < size {
            return false;
        }
        if !self.started {
            out.extend_from_slice(&self.header);
            self.started = true;
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
    /// `None` if the whole input decoded; else where it stopped (a
    /// truncated last record, a bad frame).
    pub stopped: Option<Stopped>,
}

struct Rd<'a> {
    b: &'a [u8],
    p: usize,
}

impl<'a> Rd<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.p + n > self.b.len() {
            return Err("schema frame ends early".into());
        }
        let s = &self.b[self.p..self.p + n];
        self.p += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, String> {
        let s = self.take(2)?;
        Ok(u16::from_le_bytes([s[0], s[1]]))
    }
    fn u32(&mut self) -> Result<u32, String> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn name(&mut self) -> Result<String, String> {
        let n = self.u8()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| "name is not UTF-8".to_string())
    }
}

/// Parses an `S` frame payload.
pub fn parse_schema(b: &[u8]) -> Result<Schema, String> {
    let mut r = Rd { b, p: 0 };
    let id = r.u16()?;
    let size = r.u16()? as usize;
    let name = r.name()?;
    let n = r.u16()?;
    let mut fields = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let fname = r.name()?;
        let offset = r.u16()? as usize;
        let fsize = r.u16()? as usize;
        let k = r.u8()?;
        let kind = FieldKind::from_u32(k as u32)
            .ok_or_else(|| format!("field {fname}: unknown kind {k}"))?;
        let ie = r.u16()?;
        let ne = r.u16()?;
        let mut f = FieldDef::new(fname, offset, fsize, kind, ie);
        for _ in 0..ne {
            let value = r.u32()?;
            f.enum_names.push(EnumName {
                value,
                name: Cow::Owned(r.name()?),
            });
        }
        fields.push(f);
    }
    Schema::new(id, name, size, fields).map_err(|e| e.to_string())
}

/// Decodes a binary file up to its last whole record.
pub fn decode(b: &[u8]) -> Decoded<'_> {
    let mut d = Decoded::default();
    // Schema ids -> index in d.schemas, reset by each H frame.
    let mut table: Vec<(u16, usize)> = Vec::new();
    let mut p = 0;
    let mut seen_header = false;
    let stop = |offset, reason: String| Some(Stopped { offset, reason });
    while p < b.len() {
        if b.len() - p < 4 {
            d.stopped = stop(
                p,
                format!("truncated frame header ({} of 4 bytes)", b.len() - p),
            );
            break;
        }
        let kind = b[p];
        let len = u16::from_le_bytes([b[p + 2], b[p + 3]]) as usize;
        if b.len() - p - 4 < len {
            d.stopped = stop(
                p,
                format!(
                    "truncated {} frame: {} of {len} bytes present",
                    kind as char,
                    b.len() - p - 4
                ),
            );
            break;
        }
        let body = &b[p + 4..p + 4 + len];
        match kind {
            b'H' => {
                if body.len() < 11 || &body[..8] != MAGIC {
                    d.stopped = stop(p, "bad file header (not a dplog binary file)".into());
                    break;
                }
                let order = body[10];
                let native = if cfg!(target_endian = "little") { 1 } else { 2 };
                if order != native {
                    d.stopped = stop(
                        p,
                        format!("records are in byte order {order}, this host's is {native}"),
                    );
                    break;
                }
                seen_header = true;
                table.clear();
            }
            _ if !seen_header => {
                d.stopped = stop(p, "no file header (not a dplog binary file)".into());
                break;
            }
            b'S' => match parse_schema(body) {
                Ok(s) => {
                    table.retain(|(id, _)| *id != s.id());
                    table.push((s.id(), d.schemas.len()));
                    d.schemas.push(s);
                }
                Err(e) => {
                    d.stopped = stop(p, format!("bad schema frame: {e}"));
                    break;
                }
            },
            b'R' => {
                let ok = body.len() >= 8;
                let sid = if ok {
                    u16::from_ne_bytes([body[2], body[3]])
                } else {
                    0
                };
                match table.iter().find(|(id, _)| *id == sid) {
                    Some(&(_, si)) if ok && body.len() == d.schemas[si].size() => {
                        d.records.push((si, body))
                    }
                    _ => {
                        d.stopped = stop(
                            p,
                            format!(
                                "record of {} bytes with unknown schema id {sid} or wrong size",
                                body.len()
                            ),
                        );
                        break;
                    }
                }
            }
            k => {
                d.stopped = stop(p, format!("unknown frame kind 0x{k:02x}"));
                break;
            }
        }
        p += 4 + len;
    }
    d
}
