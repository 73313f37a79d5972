//! The ring file's layout: its constants and offsets, the schema
//! descriptions, and the pure checks of a header, a producer index and
//! copied-out slots.

use super::*;

/// Magic at offset 0 of a ring file.
pub const SHM_MAGIC: [u8; 8] = *b"DPLOGSHM";
/// Layout version this code writes and reads.
pub const SHM_VERSION: u32 = 3;
/// Magic at offset 0 of a consumer file.
pub const SHM_CONSUMER_MAGIC: [u8; 8] = *b"DPLOGCON";
/// Consumer-file layout version this code writes and reads.
pub const SHM_CONSUMER_VERSION: u32 = 1;
/// Suffix the consumer file adds to its ring file's name.
pub const SHM_CONSUMER_SUFFIX: &str = ".consumer";
/// Smallest size of a consumer file, in bytes.
pub const SHM_CONSUMER_BYTES: usize = 4096;
/// Largest consumer file a producer maps (one 1 GiB huge page).
pub(super) const CONSUMER_MAX_BYTES: u64 = 1 << 30;
/// Bytes before the first slot.
pub const SHM_HEADER_BYTES: usize = 65536;
/// Largest size of the schema-description region, in bytes.
pub const SHM_MAX_DESC_BYTES: usize = SHM_HEADER_BYTES - OFF_DESCS;
/// Largest capacity accepted, in slots (2^24).
pub const SHM_MAX_CAPACITY: u32 = 1 << 24;
/// Slack of the bounds on a ring's drop total, in records (2^32): one
/// burst counted at once (a producer counts a refused burst in one store)
/// and the lag between the producer's count and the reader's clock. See
/// the module's "Drop counters".
pub const SHM_DROP_SLACK: u64 = 1 << 32;
/// Most schema descriptors a ring file carries.
pub const SHM_MAX_SCHEMAS: usize = 64;
/// Bytes of a descriptor's name field (names are at most 47 bytes).
pub const SHM_NAME_BYTES: usize = 48;
/// File name suffix of a ring.
pub const SHM_SUFFIX: &str = ".ring";
/// Longest ring name ([`ShmOptions::name`]), in bytes.
pub const SHM_RING_NAME_MAX: usize = 32;

/// Whether `name` is a ring name a producer may create
/// ([`ShmOptions::name`], `dplog_attach`): 1 to [`SHM_RING_NAME_MAX`]
/// ASCII letters, digits, `_` or `-`. The producer refuses any other
/// name; a consumer refuses a ring file whose name part
/// ([`ring_file_name`]) is not one (someone renamed it), so a name it
/// writes into a log line or onto a terminal holds no space, control or
/// other character that could forge one.
pub fn ring_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= SHM_RING_NAME_MAX
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

/// State word: the producer may still push.
pub const STATE_LIVE: u32 = 1;
/// State word: the producer closed the ring (dropped its handle).
pub const STATE_CLOSED: u32 = 2;
/// Consumer file's verdict word: the consumer refused the ring after a
/// protocol violation; a blocked producer stops waiting.
pub const STATE_QUARANTINED: u32 = 3;

pub(super) const OFF_MAGIC: usize = 0;
pub(super) const OFF_VERSION: usize = 8;
pub(super) const OFF_HEADER_BYTES: usize = 12;
pub(super) const OFF_SLOT_BYTES: usize = 16;
pub(super) const OFF_CAPACITY: usize = 20;
pub(super) const OFF_PID: usize = 24;
pub(super) const OFF_SCHEMA_COUNT: usize = 28;
pub(super) const OFF_START_TIME: usize = 32;
pub(super) const OFF_NONCE: usize = 40;
pub(super) const OFF_CREATED_NS: usize = 48;
pub(super) const OFF_STATE: usize = 56;
pub(super) const OFF_DESC_BYTES: usize = 60;
pub(super) const OFF_TAIL: usize = 128;
pub(super) const OFF_DROPPED_FULL: usize = 384;
pub(super) const OFF_DROPPED_DEGRADED: usize = 392;
pub(super) const OFF_DROPPED_DISCONNECTED: usize = 400;
pub(super) const OFF_DROPPED_STOPPED: usize = 408;
pub(super) const OFF_DROPPED_TOTAL: usize = 416;

/// The header offset of the drop counter of `reason`.
pub(super) const fn drop_offset(reason: DropReason) -> usize {
    match reason {
        DropReason::Full => OFF_DROPPED_FULL,
        DropReason::Degraded => OFF_DROPPED_DEGRADED,
        DropReason::Disconnected => OFF_DROPPED_DISCONNECTED,
        DropReason::Stopped => OFF_DROPPED_STOPPED,
    }
}
pub(super) const OFF_FIRST_DROP: usize = 424;
pub(super) const OFF_LAST_DROP: usize = 432;
pub(super) const OFF_SCHEMAS: usize = 1024;
pub(super) const DESC_BYTES: usize = 64;
pub(super) const OFF_DESCS: usize = 8192;

const _: () = assert!(OFF_SCHEMAS + SHM_MAX_SCHEMAS * DESC_BYTES <= OFF_DESCS);

pub(super) const C_OFF_MAGIC: usize = 0;
pub(super) const C_OFF_VERSION: usize = 8;
pub(super) const C_OFF_NONCE: usize = 16;
pub(super) const C_OFF_HEAD: usize = 128;
pub(super) const C_OFF_DROPS_REPORTED: usize = 256;
pub(super) const C_OFF_VERDICT: usize = 384;

/// Why a ring file was refused or a ring quarantined. Every message names
/// what was wrong and the value found.
#[derive(Debug)]
pub enum ShmError {
    /// Opening, sizing, mapping or renaming the file failed.
    Io(io::Error),
    /// The file is not a valid ring (header check).
    BadHeader(String),
    /// The file's owner is not an accepted user.
    Owner {
        /// Owner uid of the file.
        uid: u32,
    },
    /// The producer broke the index or record protocol while the ring was
    /// served.
    Protocol(String),
    /// A setting given to [`ShmProducer::create`] is out of range.
    Config(String),
    /// The fixed header is valid but a schema description is not (see
    /// [`decode_descriptions`] and [`parse_header`]); [`ShmReader::open`]
    /// has marked the ring quarantined.
    Schema(String),
}

impl core::fmt::Display for ShmError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ShmError::Io(e) => write!(f, "{e}"),
            ShmError::BadHeader(m) => write!(f, "bad ring header: {m}"),
            ShmError::Owner { uid } => write!(
                f,
                "ring file owned by uid {uid}, not this user (add the uid to the accepted users to serve it: `OpenRules::allow_uids`, dplogd --allow-uid {uid})"
            ),
            ShmError::Protocol(m) => write!(f, "protocol violation: {m}"),
            ShmError::Config(m) => write!(f, "{m}"),
            ShmError::Schema(m) => write!(f, "bad schema description: {m}"),
        }
    }
}

impl std::error::Error for ShmError {}

impl From<io::Error> for ShmError {
    fn from(e: io::Error) -> Self {
        ShmError::Io(e)
    }
}

/// FNV-1a 64 over a schema's identity: id, name, size and every field's
/// name, offset, size, kind (C ABI number), IPFIX id and enum names
/// (value and name). Two processes agree on a schema iff their
/// fingerprints match.
pub fn schema_fingerprint(s: &Schema) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: &[u8]| {
        for &x in b {
            h ^= u64::from(x);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    eat(&s.id().to_le_bytes());
    eat(s.name().as_bytes());
    eat(&[0]);
    eat(&(s.size() as u64).to_le_bytes());
    for f in s.fields() {
        eat(f.name.as_bytes());
        eat(&[0]);
        eat(&f.offset.to_le_bytes());
        eat(&f.size.to_le_bytes());
        let kind = FieldKind::ALL
            .iter()
            .position(|k| *k == f.kind)
            .unwrap_or(usize::MAX) as u64;
        eat(&kind.to_le_bytes());
        eat(&f.ie_id.to_le_bytes());
        eat(&(f.enum_names.len() as u64).to_le_bytes());
        for e in &f.enum_names {
            eat(&e.value.to_le_bytes());
            eat(e.name.as_bytes());
            eat(&[0]);
        }
    }
    h
}

/// One schema descriptor of a ring file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaDesc {
    /// Schema id (the records' header `schema_id`).
    pub id: u16,
    /// Record size in bytes, header included.
    pub size: u32,
    /// [`schema_fingerprint`] of the producer's schema.
    pub fingerprint: u64,
    /// Schema name (an identifier, at most 47 bytes).
    pub name: String,
    /// The schema: as the reader rebuilt it from the file's description
    /// (fields and [`SchemaMeta`](crate::schema::SchemaMeta)), or the producer's own in
    /// [`SchemaDesc::of`].
    pub schema: Schema,
}

impl SchemaDesc {
    /// The descriptor of `s`.
    pub fn of(s: &Schema) -> Self {
        Self {
            id: s.id(),
            size: s.size() as u32,
            fingerprint: schema_fingerprint(s),
            name: s.name().to_string(),
            schema: s.clone(),
        }
    }
}

/// The metadata codec lives with the schema codec; re-exported here, where
/// the ring descriptions first used it.
pub use crate::schema::{decode_meta, encode_meta};

/// The schema-description region of `schemas` (see the module's file
/// layout): each schema's description ([`Schema::encode`]: its fields
/// and its metadata) behind its length.
///
/// Errors: [`ShmError::Config`] if a schema does not encode (see
/// [`Schema::encode`]) or the region exceeds [`SHM_MAX_DESC_BYTES`].
pub(super) fn encode_descriptions(schemas: &[&Schema]) -> Result<Vec<u8>, ShmError> {
    let mut out = Vec::new();
    for s in schemas {
        let b = s.encode().map_err(|e| ShmError::Config(e.to_string()))?;
        out.extend_from_slice(&(b.len().min(u16::MAX as usize) as u16).to_le_bytes());
        out.extend_from_slice(&b);
        if b.len() > u16::MAX as usize || out.len() > SHM_MAX_DESC_BYTES {
            return Err(ShmError::Config(format!(
                "schema descriptions take more than the ring header's {SHM_MAX_DESC_BYTES} bytes (at schema {})",
                s.name()
            )));
        }
    }
    Ok(out)
}

/// Decodes the schema-description region `region` (the bytes its header
/// field declares) into `count` schemas: each a little-endian u16 length
/// within the region, then exactly that many bytes that
/// [`Schema::decode`] accepts (a schema's fields, then optionally its
/// metadata; none: the defaults); no stray bytes after the last. Pure and
/// bounded: it reads only `region` and allocates in proportion to it.
/// [`parse_header`] then matches each against its descriptor.
///
/// Errors: [`ShmError::Schema`] naming the description's index and what
/// is wrong.
pub fn decode_descriptions(region: &[u8], count: usize) -> Result<Vec<Schema>, ShmError> {
    let mut p = 0usize;
    let mut out = Vec::with_capacity(count.min(SHM_MAX_SCHEMAS));
    for i in 0..count {
        let bad = |m: String| Err(ShmError::Schema(format!("schema description {i}: {m}")));
        if region.len() - p < 2 {
            return bad(format!(
                "missing: the region of {} bytes ends",
                region.len()
            ));
        }
        let len = u16::from_le_bytes([region[p], region[p + 1]]) as usize;
        p += 2;
        if len > region.len() - p {
            return bad(format!(
                "{len} bytes declared, {} left in the region",
                region.len() - p
            ));
        }
        match Schema::decode(&region[p..p + len]) {
            Ok(s) => out.push(s),
            Err(e) => return bad(e),
        }
        p += len;
    }
    if p != region.len() {
        return Err(ShmError::Schema(format!(
            "{} stray bytes after the schema descriptions",
            region.len() - p
        )));
    }
    Ok(out)
}

/// The validated static part of a ring header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingInfo {
    /// Bytes per slot: 32, 64 or 128.
    pub slot_bytes: u32,
    /// Slots (a power of two).
    pub capacity: u32,
    /// The creating process.
    pub pid: u32,
    /// Its start time, clock ticks since boot (`/proc/<pid>/stat` field 22).
    pub start_time: u64,
    /// Random per-file nonce: one lifetime of one producer.
    pub nonce: u64,
    /// Creation time, ns since the Unix epoch.
    pub created_ns: u64,
    /// The record types the producer declared.
    pub schemas: Vec<SchemaDesc>,
}

impl RingInfo {
    /// Bytes the file must hold at least: header plus slots.
    pub fn needed_bytes(&self) -> u64 {
        SHM_HEADER_BYTES as u64 + u64::from(self.capacity) * u64::from(self.slot_bytes)
    }
}

pub(super) fn rd_u16(b: &[u8], off: usize) -> u16 {
    u16::from_ne_bytes([b[off], b[off + 1]])
}
pub(super) fn rd_u32(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}
pub(super) fn rd_u64(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

pub(super) fn name_ok(n: &str) -> bool {
    !n.is_empty()
        && n.len() < SHM_NAME_BYTES
        && n.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || c == b'.')
}

/// Parses and checks a copy of a ring header (`header`, at least
/// [`SHM_HEADER_BYTES`] bytes are read when present) of a file of
/// `file_len` bytes. Pure: reads only `header`, so any bytes are safe.
///
/// Errors: [`ShmError::BadHeader`] naming the field and its value: a short
/// header, wrong magic or version, a slot size other than 32/64/128, a
/// capacity that is 0, not a power of two or above [`SHM_MAX_CAPACITY`], a
/// file shorter than header plus slots, too many schema descriptors, a
/// descriptor with a bad name, a size below 8 or above the slot, a
/// schema id given twice; [`ShmError::Schema`] for a schema description
/// that is out of its region, malformed, or not the descriptor's schema
/// (id, name, size, recomputed fingerprint); see [`decode_descriptions`].
pub fn parse_header(header: &[u8], file_len: u64) -> Result<RingInfo, ShmError> {
    let bad = |m: String| Err(ShmError::BadHeader(m));
    if header.len() < SHM_HEADER_BYTES || file_len < SHM_HEADER_BYTES as u64 {
        return bad(format!(
            "file of {file_len} bytes is shorter than the {SHM_HEADER_BYTES}-byte header"
        ));
    }
    if header[OFF_MAGIC..OFF_MAGIC + 8] != SHM_MAGIC {
        return bad("magic is not DPLOGSHM".into());
    }
    let version = rd_u32(header, OFF_VERSION);
    if version != SHM_VERSION {
        return bad(format!(
            "layout version {version}, this reader knows {SHM_VERSION}"
        ));
    }
    let hb = rd_u32(header, OFF_HEADER_BYTES);
    if hb as usize != SHM_HEADER_BYTES {
        return bad(format!("header length {hb}, expected {SHM_HEADER_BYTES}"));
    }
    let slot_bytes = rd_u32(header, OFF_SLOT_BYTES);
    if !matches!(slot_bytes, 32 | 64 | 128) {
        return bad(format!("slot size {slot_bytes}, expected 32, 64 or 128"));
    }
    let capacity = rd_u32(header, OFF_CAPACITY);
    if capacity == 0 || !capacity.is_power_of_two() || capacity > SHM_MAX_CAPACITY {
        return bad(format!(
            "capacity {capacity}, expected a power of two between 1 and {SHM_MAX_CAPACITY}"
        ));
    }
    let count = rd_u32(header, OFF_SCHEMA_COUNT);
    if count as usize > SHM_MAX_SCHEMAS {
        return bad(format!(
            "{count} schema descriptors, at most {SHM_MAX_SCHEMAS}"
        ));
    }
    let desc_bytes = rd_u32(header, OFF_DESC_BYTES) as usize;
    if desc_bytes > SHM_MAX_DESC_BYTES {
        return Err(ShmError::Schema(format!(
            "{desc_bytes} bytes of schema descriptions, at most {SHM_MAX_DESC_BYTES}"
        )));
    }
    let described =
        decode_descriptions(&header[OFF_DESCS..OFF_DESCS + desc_bytes], count as usize)?;
    let mut schemas: Vec<SchemaDesc> = Vec::with_capacity(count as usize);
    for (i, schema) in described.into_iter().enumerate() {
        let d = &header[OFF_SCHEMAS + i * DESC_BYTES..OFF_SCHEMAS + (i + 1) * DESC_BYTES];
        let id = rd_u16(d, 0);
        let size = rd_u32(d, 4);
        let fingerprint = rd_u64(d, 8);
        let raw = &d[16..16 + SHM_NAME_BYTES];
        let end = raw.iter().position(|&c| c == 0).unwrap_or(raw.len());
        let name = match core::str::from_utf8(&raw[..end]) {
            Ok(n) if name_ok(n) && raw[end..].iter().all(|&c| c == 0) => n.to_string(),
            _ => return bad(format!("schema descriptor {i} has no valid name")),
        };
        if size < 8 || size > slot_bytes {
            return bad(format!(
                "schema {name} (id {id}) has records of {size} bytes, outside 8..={slot_bytes}"
            ));
        }
        if schemas.iter().any(|s| s.id == id) {
            return bad(format!("schema id {id} is declared twice"));
        }
        if schema.id() != id || schema.name() != name || schema.size() as u32 != size {
            return Err(ShmError::Schema(format!(
                "schema {name} (id {id}, {size} bytes) is described as {} (id {}, {} bytes)",
                schema.name(),
                schema.id(),
                schema.size()
            )));
        }
        let fp = schema_fingerprint(&schema);
        if fp != fingerprint {
            return Err(ShmError::Schema(format!(
                "schema {name} (id {id}): fingerprint of its description {fp:016x}, the descriptor says {fingerprint:016x}"
            )));
        }
        schemas.push(SchemaDesc {
            id,
            size,
            fingerprint,
            name,
            schema,
        });
    }
    let info = RingInfo {
        slot_bytes,
        capacity,
        pid: rd_u32(header, OFF_PID),
        start_time: rd_u64(header, OFF_START_TIME),
        nonce: rd_u64(header, OFF_NONCE),
        created_ns: rd_u64(header, OFF_CREATED_NS),
        schemas,
    };
    if file_len < info.needed_bytes() {
        return bad(format!(
            "file of {file_len} bytes is shorter than header and {capacity} slots of {slot_bytes} bytes ({} bytes)",
            info.needed_bytes()
        ));
    }
    Ok(info)
}

/// Checks a producer index read from shared memory against the consumer's
/// own state: `tail` may not move backwards from `last_tail` and may hold
/// at most `capacity` records above `head` (`head <= last_tail` is the
/// consumer's own invariant). Pure.
///
/// Errors: [`ShmError::Protocol`] with the three indices.
pub fn check_tail(head: u64, last_tail: u64, tail: u64, capacity: u32) -> Result<(), ShmError> {
    if tail < last_tail {
        return Err(ShmError::Protocol(format!(
            "producer index moved backwards from {last_tail} to {tail}"
        )));
    }
    if tail - head > u64::from(capacity) {
        return Err(ShmError::Protocol(format!(
            "producer index {tail} is {} records above the consumer index {head}, more than the capacity {capacity}",
            tail - head
        )));
    }
    Ok(())
}

/// Checks copied-out slots (`slots`, a whole number of `slot_bytes`-byte
/// slots) before any is formatted: every record header's length must lie
/// in `8..=slot_bytes` and its schema id be one the ring declared, with
/// that schema's record size. Pure.
///
/// Returns how many leading slots are valid and, if one is not, the
/// violation (the valid prefix may still be written).
pub fn check_slots(
    slots: &[u8],
    slot_bytes: u32,
    schemas: &[SchemaDesc],
) -> (usize, Option<ShmError>) {
    let sb = slot_bytes as usize;
    for (i, s) in slots.chunks_exact(sb).enumerate() {
        let len = rd_u16(s, 0);
        let id = rd_u16(s, 2);
        let fail = |m: String| (i, Some(ShmError::Protocol(m)));
        if !(8..=slot_bytes).contains(&u32::from(len)) {
            return fail(format!(
                "record {i} of the burst has length {len}, outside 8..={slot_bytes}"
            ));
        }
        match schemas.iter().find(|d| d.id == id) {
            None => {
                return fail(format!(
                    "record {i} of the burst has schema id {id}, which the ring does not declare"
                ))
            }
            Some(d) if d.size != u32::from(len) => {
                return fail(format!(
                    "record {i} of the burst has length {len}, schema {} has {}",
                    d.name, d.size
                ))
            }
            Some(_) => {}
        }
    }
    (slots.len() / sb.max(1), None)
}
