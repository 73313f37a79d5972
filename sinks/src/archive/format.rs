//! The archive's on-disk layout: segment names, block frames, the footer,
//! the key hash and the per-block Bloom filters (see the module docs of
//! [`archive`](super) for the whole picture).

use std::io;
use std::path::Path;

use dplog_core::schema::{FieldDef, Schema};

use super::encode::{self, Column, Cursor};

/// Magic at offset 0 of a segment file.
pub const SEGMENT_MAGIC: &[u8; 8] = b"DPLOGAR1";
/// Segment header length: magic, version u32 (1), reserved u32.
pub const SEGMENT_HEADER: usize = 16;
/// Format version in the segment header.
pub const VERSION: u32 = 1;
/// Magic at the start of every block frame.
pub const BLOCK_MAGIC: &[u8; 4] = b"DPAB";
/// Block frame header: magic, kind u8, 3 zero bytes, body length u32,
/// CRC-32 u32 (of the first 12 header bytes and the body).
pub const BLOCK_HEADER: usize = 16;
/// Block kind: a schema (the binary format's `S` frame payload).
pub const KIND_SCHEMA: u8 = b'S';
/// Block kind: records of one schema, columnar and compressed.
pub const KIND_DATA: u8 = b'D';
/// Magic that ends a sealed segment.
pub const TRAILER_MAGIC: &[u8; 8] = b"DPLOGAE1";
/// Trailer: footer length u64, footer CRC-32 u32, reserved u32, magic.
pub const TRAILER: usize = 24;
/// Data block body header: schema id u16, 0 u16, rows u32, min time u64,
/// max time u64, uncompressed column bytes u32.
pub const DATA_HEADER: usize = 28;
/// Largest block body the reader accepts (a bad length field must not
/// make it allocate without bound).
pub const MAX_BLOCK_BODY: usize = 256 << 20;

/// Name of sealed segment `seq` holding event times `min..=max` (ns):
/// `seg-<seq, 10 digits>-<min, 20 digits>-<max, 20 digits>.dpa`, so a
/// directory listing alone tells which segments a time range touches.
pub fn sealed_name(seq: u64, min: u64, max: u64) -> String {
    format!("seg-{seq:010}-{min:020}-{max:020}.dpa")
}

/// Name of open segment `seq` (being written; renamed when sealed).
pub fn open_name(seq: u64) -> String {
    format!(".seg-{seq:010}.dpa.open")
}

/// What a segment file name says: `(seq, Some((min, max)))` for a sealed
/// segment, `(seq, None)` for an open one; `None` for other names.
pub fn parse_name(name: &str) -> Option<(u64, Option<(u64, u64)>)> {
    if let Some(rest) = name
        .strip_prefix(".seg-")
        .and_then(|r| r.strip_suffix(".dpa.open"))
    {
        if rest.len() != 10 || !rest.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        return Some((rest.parse().ok()?, None));
    }
    let rest = name.strip_prefix("seg-")?.strip_suffix(".dpa")?;
    let mut it = rest.split('-');
    let (a, b, c) = (it.next()?, it.next()?, it.next()?);
    if it.next().is_some() || a.len() != 10 || b.len() != 20 || c.len() != 20 {
        return None;
    }
    Some((a.parse().ok()?, Some((b.parse().ok()?, c.parse().ok()?))))
}

/// The segment header bytes.
pub fn segment_header() -> [u8; SEGMENT_HEADER] {
    let mut h = [0u8; SEGMENT_HEADER];
    h[..8].copy_from_slice(SEGMENT_MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h
}

/// Checks a segment header.
///
/// Errors: `InvalidData` naming what is wrong.
pub fn check_header(h: &[u8]) -> io::Result<()> {
    if h.len() < SEGMENT_HEADER || &h[..8] != SEGMENT_MAGIC {
        return Err(invalid("not a dplog archive segment (bad magic)".into()));
    }
    let v = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes"));
    if v != VERSION {
        return Err(invalid(format!(
            "segment format version {v}, this reader knows {VERSION}"
        )));
    }
    Ok(())
}

pub(crate) fn invalid(m: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, m)
}

/// A whole block frame of `kind` around `body`.
pub fn block_frame(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(BLOCK_HEADER + body.len());
    f.extend_from_slice(BLOCK_MAGIC);
    f.extend_from_slice(&[kind, 0, 0, 0]);
    f.extend_from_slice(&(body.len() as u32).to_le_bytes());
    let mut h = crc32fast::Hasher::new();
    h.update(&f[..12]);
    h.update(body);
    f.extend_from_slice(&h.finalize().to_le_bytes());
    f.extend_from_slice(body);
    f
}

/// A block frame header read back: kind and body length, with the CRC to
/// check the body against.
#[derive(Clone, Copy, Debug)]
pub struct FrameHeader {
    /// [`KIND_SCHEMA`] or [`KIND_DATA`].
    pub kind: u8,
    /// Body bytes after the header.
    pub body_len: usize,
    crc: u32,
    head: [u8; 12],
}

/// Parses a block frame header.
///
/// Errors: `InvalidData` for a bad magic, kind or length.
pub fn frame_header(h: &[u8]) -> io::Result<FrameHeader> {
    if h.len() < BLOCK_HEADER || &h[..4] != BLOCK_MAGIC {
        return Err(invalid("no block magic".into()));
    }
    let kind = h[4];
    if kind != KIND_SCHEMA && kind != KIND_DATA || h[5..8] != [0, 0, 0] {
        return Err(invalid(format!("unknown block kind 0x{kind:02x}")));
    }
    let body_len = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes")) as usize;
    if body_len > MAX_BLOCK_BODY {
        return Err(invalid(format!("block length {body_len} too large")));
    }
    Ok(FrameHeader {
        kind,
        body_len,
        crc: u32::from_le_bytes(h[12..16].try_into().expect("4 bytes")),
        head: h[..12].try_into().expect("12 bytes"),
    })
}

impl FrameHeader {
    /// Checks `body` against the header's CRC-32.
    ///
    /// Errors: `InvalidData` "checksum mismatch".
    pub fn check(&self, body: &[u8]) -> io::Result<()> {
        let mut h = crc32fast::Hasher::new();
        h.update(&self.head);
        h.update(body);
        let got = h.finalize();
        if got != self.crc {
            return Err(invalid(format!(
                "checksum mismatch (stored {:08x}, computed {got:08x})",
                self.crc
            )));
        }
        Ok(())
    }
}

/// The columns of records of `s`.
pub fn schema_columns(s: &Schema) -> Vec<Column> {
    let f: Vec<(usize, usize)> = s
        .fields()
        .iter()
        .map(|f| (f.offset as usize, f.size as usize))
        .collect();
    encode::columns(s.size(), &f)
}

/// The event time of `rec` (a record of `s`): its event-time field (ns
/// for an `NsTimestamp`, raw ticks for a `TscTimestamp`), or `None` if
/// the schema has none.
pub fn event_time(s: &Schema, rec: &[u8]) -> Option<u64> {
    s.meta().event_time.map(|i| s.fields()[i].read_uint(rec))
}

/// Body of a data block of `n` records of `s` (`recs`, back to back),
/// event times `min..=max`, compressed at zstd `level`.
///
/// Errors: the compressor's.
pub fn data_body(
    s: &Schema,
    cols: &[Column],
    recs: &[u8],
    n: usize,
    min: u64,
    max: u64,
    level: i32,
) -> io::Result<Vec<u8>> {
    let mut raw = Vec::with_capacity(recs.len() / 2 + 64);
    for &c in cols {
        encode::encode_column(&mut raw, recs, s.size(), n, c);
    }
    let z = zstd::bulk::compress(&raw, level)?;
    let mut body = Vec::with_capacity(DATA_HEADER + z.len());
    body.extend_from_slice(&s.id().to_le_bytes());
    body.extend_from_slice(&[0, 0]);
    body.extend_from_slice(&(n as u32).to_le_bytes());
    body.extend_from_slice(&min.to_le_bytes());
    body.extend_from_slice(&max.to_le_bytes());
    body.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    body.extend_from_slice(&z);
    Ok(body)
}

/// What a data block body's header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataHeader {
    /// Schema id of its records.
    pub schema_id: u16,
    /// Records in it.
    pub rows: u32,
    /// Smallest event time.
    pub min: u64,
    /// Largest event time.
    pub max: u64,
}

/// Parses a data block body's header.
///
/// Errors: `InvalidData` for a short body.
pub fn data_header(body: &[u8]) -> io::Result<DataHeader> {
    if body.len() < DATA_HEADER {
        return Err(invalid("data block shorter than its header".into()));
    }
    let u64at = |o: usize| u64::from_le_bytes(body[o..o + 8].try_into().expect("8 bytes"));
    Ok(DataHeader {
        schema_id: u16::from_le_bytes([body[0], body[1]]),
        rows: u32::from_le_bytes(body[4..8].try_into().expect("4 bytes")),
        min: u64at(8),
        max: u64at(16),
    })
}

/// Decodes a data block body of records of `s` into their bytes (`rows *
/// size`, back to back).
///
/// Errors: `InvalidData` for a body that does not decode (schema id or
/// size mismatch, bad compression, bad columns, trailing bytes).
pub fn decode_data(s: &Schema, body: &[u8]) -> io::Result<(DataHeader, Vec<u8>)> {
    let h = data_header(body)?;
    if h.schema_id != s.id() {
        return Err(invalid(format!(
            "block of schema {} decoded as {}",
            h.schema_id,
            s.id()
        )));
    }
    let raw_len = u32::from_le_bytes(body[24..28].try_into().expect("4 bytes")) as usize;
    let n = h.rows as usize;
    let size = s.size();
    let too_big = match n.checked_mul(size) {
        Some(b) => b > MAX_BLOCK_BODY,
        None => true,
    };
    if raw_len > MAX_BLOCK_BODY || too_big {
        return Err(invalid("block too large".into()));
    }
    let raw = zstd::bulk::decompress(&body[DATA_HEADER..], raw_len)
        .map_err(|e| invalid(format!("zstd: {e}")))?;
    if raw.len() != raw_len {
        return Err(invalid("decompressed length differs".into()));
    }
    let mut recs = vec![0u8; n * size];
    let mut cur = Cursor { b: &raw, p: 0 };
    for c in schema_columns(s) {
        encode::decode_column(&mut cur, &mut recs, size, n, c)?;
    }
    if cur.p != raw.len() {
        return Err(invalid("trailing bytes after the columns".into()));
    }
    Ok((h, recs))
}

/// 64-bit hash of an index key (FNV-1a over the bytes, then the
/// SplitMix64 finalizer); part of the format: a reader must compute the
/// same value.
pub fn key_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    mix(h)
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The index key of `rec`: the bytes of `fields` (the schema's indexed
/// fields, in index order) concatenated.
pub fn key_of(fields: &[&FieldDef], rec: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(16);
    for f in fields {
        k.extend_from_slice(f.bytes(rec));
    }
    k
}

/// Hash functions per Bloom filter.
pub const BLOOM_K: u32 = 5;
/// Bits per distinct key (about 2 % false positives with 5 hashes).
pub const BLOOM_BITS_PER_KEY: usize = 8;

/// A Bloom filter over the key hashes of one block: bits as bytes, bit
/// `i` at byte `i / 8`, bit `i % 8`; position `j` of a hash `h` is
/// `(h + j * (mix(h) | 1)) mod (bits)`, `j` in `0..BLOOM_K`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bloom {
    /// The bit array (its length times 8 is the bit count, at least 64).
    pub bits: Vec<u8>,
}

impl Bloom {
    /// A filter holding every hash of `hashes` (duplicates allowed).
    pub fn build(hashes: &mut Vec<u64>) -> Bloom {
        hashes.sort_unstable();
        hashes.dedup();
        let nbits = (hashes.len() * BLOOM_BITS_PER_KEY)
            .max(64)
            .next_multiple_of(8);
        let mut b = Bloom {
            bits: vec![0; nbits / 8],
        };
        for &h in hashes.iter() {
            b.positions(h, |p, bits| bits[p / 8] |= 1 << (p % 8));
        }
        b
    }

    fn positions(&mut self, h: u64, mut f: impl FnMut(usize, &mut [u8])) {
        let m = (self.bits.len() * 8) as u64;
        let step = mix(h) | 1;
        for j in 0..BLOOM_K as u64 {
            let p = h.wrapping_add(j.wrapping_mul(step)) % m;
            f(p as usize, &mut self.bits);
        }
    }

    /// `false`: no key of hash `h` is in the block; `true`: maybe.
    pub fn may_contain(&self, h: u64) -> bool {
        let m = (self.bits.len() * 8) as u64;
        if m == 0 {
            return true;
        }
        let step = mix(h) | 1;
        (0..BLOOM_K as u64).all(|j| {
            let p = h.wrapping_add(j.wrapping_mul(step)) % m;
            self.bits[(p / 8) as usize] & (1 << (p % 8)) != 0
        })
    }
}

/// One block as the footer lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockMeta {
    /// Byte offset of its frame in the segment file.
    pub offset: u64,
    /// Frame length (header and body), bytes.
    pub len: u32,
    /// [`KIND_SCHEMA`] or [`KIND_DATA`].
    pub kind: u8,
    /// Schema id (of the schema a schema block declares, or of the
    /// records of a data block).
    pub schema_id: u16,
    /// Records (0 for a schema block).
    pub rows: u32,
    /// Smallest event time of its records.
    pub min: u64,
    /// Largest event time of its records.
    pub max: u64,
    /// Bloom filter over its index keys; `None` when its schema has no
    /// indexed field (or a schema block).
    pub bloom: Option<Bloom>,
}

/// A sealed segment's footer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Footer {
    /// Segment sequence number.
    pub seq: u64,
    /// Smallest event time of its records (ns).
    pub min: u64,
    /// Largest event time of its records (ns).
    pub max: u64,
    /// Records in it.
    pub rows: u64,
    /// The writer's `max_lifetime_ms` (the queries' default lookback).
    pub max_lifetime_ms: u64,
    /// The index key fields, by name, in key order (each schema's key is
    /// the subset of them it has).
    pub index_fields: Vec<String>,
    /// Every block, in file order.
    pub blocks: Vec<BlockMeta>,
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    let s = &s.as_bytes()[..s.len().min(255)];
    b.push(s.len() as u8);
    b.extend_from_slice(s);
}

impl Footer {
    /// The footer and trailer bytes that end a sealed segment.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::new();
        for v in [
            self.seq,
            self.min,
            self.max,
            self.rows,
            self.max_lifetime_ms,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.push(self.index_fields.len() as u8);
        for f in &self.index_fields {
            put_str(&mut b, f);
        }
        b.extend_from_slice(&(self.blocks.len() as u32).to_le_bytes());
        for m in &self.blocks {
            b.extend_from_slice(&m.offset.to_le_bytes());
            b.extend_from_slice(&m.len.to_le_bytes());
            b.push(m.kind);
            b.extend_from_slice(&m.schema_id.to_le_bytes());
            b.extend_from_slice(&m.rows.to_le_bytes());
            b.extend_from_slice(&m.min.to_le_bytes());
            b.extend_from_slice(&m.max.to_le_bytes());
            let bloom = m.bloom.as_ref().map_or(&[][..], |x| &x.bits[..]);
            b.extend_from_slice(&(bloom.len() as u32).to_le_bytes());
            b.extend_from_slice(bloom);
        }
        let crc = crc32fast::hash(&b);
        let len = b.len() as u64;
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&crc.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(TRAILER_MAGIC);
        b
    }

    /// Reads the footer of a sealed segment `file` of `file_len` bytes.
    ///
    /// Errors: `InvalidData` for a missing trailer, a footer whose CRC
    /// fails or that does not parse; the read's error.
    pub fn read(file: &std::fs::File, file_len: u64) -> io::Result<Footer> {
        use std::os::unix::fs::FileExt;
        if file_len < (SEGMENT_HEADER + TRAILER) as u64 {
            return Err(invalid("too short for a sealed segment".into()));
        }
        let mut t = [0u8; TRAILER];
        file.read_exact_at(&mut t, file_len - TRAILER as u64)?;
        if &t[16..24] != TRAILER_MAGIC {
            return Err(invalid("no footer (trailer magic missing)".into()));
        }
        let len = u64::from_le_bytes(t[..8].try_into().expect("8 bytes"));
        let crc = u32::from_le_bytes(t[8..12].try_into().expect("4 bytes"));
        if len > file_len - (SEGMENT_HEADER + TRAILER) as u64 || len > MAX_BLOCK_BODY as u64 {
            return Err(invalid(format!("footer length {len} out of range")));
        }
        let mut b = vec![0u8; len as usize];
        file.read_exact_at(&mut b, file_len - TRAILER as u64 - len)?;
        if crc32fast::hash(&b) != crc {
            return Err(invalid("footer checksum mismatch".into()));
        }
        Self::parse(&b).map_err(|e| invalid(format!("bad footer: {e}")))
    }

    fn parse(b: &[u8]) -> io::Result<Footer> {
        let mut c = Cursor { b, p: 0 };
        let (seq, min, max, rows, life) = (c.u64()?, c.u64()?, c.u64()?, c.u64()?, c.u64()?);
        let nf = c.u8()?;
        let mut index_fields = Vec::new();
        for _ in 0..nf {
            let n = c.u8()? as usize;
            index_fields
                .push(String::from_utf8(c.take(n)?.to_vec()).map_err(|_| invalid("name".into()))?);
        }
        let nb = c.u32()? as usize;
        let mut blocks = Vec::with_capacity(nb.min(1 << 20));
        for _ in 0..nb {
            let offset = c.u64()?;
            let len = c.u32()?;
            let kind = c.u8()?;
            let sid = c.take(2)?;
            let schema_id = u16::from_le_bytes([sid[0], sid[1]]);
            let rows = c.u32()?;
            let (bmin, bmax) = (c.u64()?, c.u64()?);
            let bl = c.u32()? as usize;
            let bits = c.take(bl)?.to_vec();
            blocks.push(BlockMeta {
                offset,
                len,
                kind,
                schema_id,
                rows,
                min: bmin,
                max: bmax,
                bloom: (!bits.is_empty()).then_some(Bloom { bits }),
            });
        }
        if c.p != b.len() {
            return Err(invalid("trailing bytes".into()));
        }
        Ok(Footer {
            seq,
            min,
            max,
            rows,
            max_lifetime_ms: life,
            index_fields,
            blocks,
        })
    }
}

/// The fields of `s` named in `index` that it has, in index order.
pub fn index_fields<'a>(s: &'a Schema, index: &[String]) -> Vec<&'a FieldDef> {
    index
        .iter()
        .filter_map(|n| s.field(n).map(|(_, f)| f))
        .collect()
}

/// `path`'s file name as UTF-8, or "".
pub fn file_name(path: &Path) -> &str {
    path.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(
            parse_name(&sealed_name(7, 1, u64::MAX)),
            Some((7, Some((1, u64::MAX))))
        );
        assert_eq!(parse_name(&open_name(42)), Some((42, None)));
        assert_eq!(parse_name("seg-1-2-3.dpa"), None);
        assert_eq!(parse_name(".seg-00000000x1.dpa.open"), None);
    }

    #[test]
    fn bloom_has_no_false_negatives_and_few_positives() {
        let mut hs: Vec<u64> = (0..5000u64).map(|i| key_hash(&i.to_le_bytes())).collect();
        let b = Bloom::build(&mut hs.clone());
        assert!(hs.iter().all(|&h| b.may_contain(h)));
        hs.clear();
        let fp = (5000..105_000u64)
            .filter(|i| b.may_contain(key_hash(&i.to_le_bytes())))
            .count();
        assert!(fp < 5000, "{fp} false positives of 100000");
    }

    #[test]
    fn frame_checksum_catches_a_flipped_bit() {
        let f = block_frame(KIND_SCHEMA, b"hello");
        let h = frame_header(&f).unwrap();
        h.check(&f[BLOCK_HEADER..]).unwrap();
        let mut g = f.clone();
        g[BLOCK_HEADER + 1] ^= 4;
        assert!(h.check(&g[BLOCK_HEADER..]).is_err());
    }
}
