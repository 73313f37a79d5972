//! Shared-memory SPSC rings: a producer in one process (the dataplane), the
//! consumer in another (`dplogd`), so records already pushed outlive a
//! crash of the dataplane.
//!
//! A ring is one file in a tmpfs (`/dev/shm`) or hugetlbfs directory,
//! mapped `MAP_SHARED` by both processes. The producer side
//! ([`ShmProducer`], and [`ShmLogProducer`] with the logger's backpressure
//! policy) runs the same protocol as the in-process [`crate::ring`](mod@crate::ring): slot
//! write, then a Release store of the free-running tail index; a private
//! cached copy of the consumer's head, refreshed only when the ring looks
//! full. The consumer side ([`ShmReader`]) trusts nothing in the file: it
//! is written by another process, possibly buggy or hostile.
//!
//! The consumer never writes into the ring file: it maps it read-only
//! (so a ring shared with a group is mode 0640, not 0660), and keeps its
//! position, the drops it reported and its verdict in a file of its own,
//! `<ring file>.consumer`, which the producer maps read-only. Until that
//! file exists (no consumer yet) the producer sees the consumer as away:
//! `block` waits, `drop_newest` counts.
//!
//! # Ring file layout (version 3, native byte order, x86-64/aarch64 little endian)
//!
//! | offset | size | field | written by |
//! |---|---|---|---|
//! | 0 | 8 | magic `DPLOGSHM` | creator, last of the header |
//! | 8 | 4 | layout version ([`SHM_VERSION`]) | creator |
//! | 12 | 4 | header bytes ([`SHM_HEADER_BYTES`]): slots start here | creator |
//! | 16 | 4 | slot bytes (32, 64 or 128) | creator |
//! | 20 | 4 | capacity in slots (power of two, at most [`SHM_MAX_CAPACITY`]) | creator |
//! | 24 | 4 | producer pid | creator |
//! | 28 | 4 | schema descriptors that follow (at most [`SHM_MAX_SCHEMAS`]) | creator |
//! | 32 | 8 | producer start time (`/proc/<pid>/stat` field 22, clock ticks since boot) | creator |
//! | 40 | 8 | lifetime nonce (random; one per created file) | creator |
//! | 48 | 8 | creation time, ns since the Unix epoch | creator |
//! | 56 | 4 | state: 1 live, 2 closed by its producer | producer |
//! | 60 | 4 | bytes of schema descriptions at 8192 (at most [`SHM_MAX_DESC_BYTES`]) | creator |
//! | 128 | 8 | tail: next slot the producer publishes (own 128-byte line) | producer |
//! | 384 | 56 | drop counters: full, degraded, disconnected, stopped, total, first and last drop time (ticks) | producer |
//! | 1024 | 64 × n | schema descriptors: id u16, 0 u16, record size u32, fingerprint u64 ([`schema_fingerprint`]), name (48 bytes, NUL padded) | creator |
//! | 8192 | 4 + … | schema descriptions, one per descriptor in its order: length u16 (little endian), then the schema's fields in [`Schema::encode`]'s encoding, then its metadata ([`encode_meta`]; absent: the defaults) | creator |
//! | 65536 | capacity × slot bytes | the slots | producer |
//!
//! The descriptions let a consumer rebuild every record type exactly (field
//! names, offsets, sizes, kinds, IPFIX ids, enum names), so it serves
//! record types it was not built with. The reader bounds every length
//! and count by the region, decodes each description with
//! [`Schema::decode`] (which validates it as [`Schema::new`] does), and
//! requires its id, name and size to be the descriptor's and its
//! recomputed [`schema_fingerprint`] to be the descriptor's fingerprint.
//!
//! The file is sized to a multiple of its filesystem's block size
//! (hugetlbfs reports the huge page size), so it can live in hugepages:
//! it is sized with one `ftruncate` and written only through its mapping
//! (hugetlbfs files take neither `write` nor a second `ftruncate`).
//!
//! # Drop counters
//!
//! The producer counts the records its policy refused in the ring file
//! (offset 384: one counter per reason, their total, the first and last
//! drop time in ticks); the consumer reports the growth of the total
//! in-band ([`ShmReader::take_drops`]). The total is checked as the tail
//! is, and a violation quarantines the ring:
//!
//! - it never moves backwards (below the drops already reported);
//! - it is at most one drop per nanosecond of the ring's age plus
//!   [`SHM_DROP_SLACK`] (2^32) records: the age is wall-clock time since
//!   the header's creation time at [`ShmReader::open`] (a creation time
//!   in the future counts as the open itself), then monotonic time;
//! - it grows by at most one drop per nanosecond since the reader last
//!   read it (since the ring's creation, the first time) plus
//!   [`SHM_DROP_SLACK`].
//!
//! A dataplane refuses records far below a drop per nanosecond (each
//! refused call costs several nanoseconds); the slack covers bursts
//! refused and counted in one store. (A loop that re-submits a large
//! burst to a full ring for seconds could pass the bound, and is
//! quarantined like a corrupted counter.)
//! The drop times are only clamped: the daemon reports them within the
//! ring's creation time and its own clock, first before last.
//!
//! # Consumer file layout (version 1, native byte order)
//!
//! `<ring file>.consumer`, created by the consumer (under a temporary name,
//! filled, renamed), owned by it, mode 0640 with the ring file's group, so
//! the producer (the ring's owner, a member of that group) can read it.
//! Sized as the ring file (one block of its filesystem, at least 4096
//! bytes).
//!
//! The producer uses it only if the opened file (`fstat`) is a regular
//! file owned by the producer's own uid, root or the daemon's uid it was
//! given ([`ShmOptions::daemon_uid`]), with no group or other write bit:
//! whoever may create files in the ring directory could otherwise plant
//! one (the nonce is in the ring's file name) and move the head (unread
//! records overwritten) or set the verdict (logging stops). A refused
//! file leaves the ring unserved, as an absent one
//! ([`ShmProducer::consumer_refusal`], [`consumer_status`] say why). Its
//! mapping is under the SIGBUS guard ([`install_sigbus_guard`]): cut short,
//! it reads as zeros and is dropped at the next refresh of the head; a
//! head outside the last capacity below the tail is never taken.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `DPLOGCON`, written last |
//! | 8 | 4 | layout version ([`SHM_CONSUMER_VERSION`]) |
//! | 16 | 8 | the ring file's lifetime nonce: a producer maps only a consumer file of its own ring's lifetime |
//! | 128 | 8 | head: next slot the consumer reads (own 128-byte line) |
//! | 256 | 8 | drops already reported in-band |
//! | 384 | 4 | verdict: 0 served, 3 ([`STATE_QUARANTINED`]) quarantined: a blocked producer stops waiting |
//!
//! A consumer that restarts opens the consumer file again if its magic,
//! version and nonce are the ring's (the producer may have it mapped) and
//! otherwise replaces it.
//!
//! # Lifetimes
//!
//! Each [`ShmProducer::create`] makes a new file `<name>.<pid>.<nonce>.ring`
//! (created under a `.tmp` name, filled, then renamed, so a consumer never
//! sees a half-written header): a restarted dataplane never writes into the
//! file of its previous life, whose records the consumer drains and closes
//! on its own. A clean drop of the producer stores state 2 (Release, after
//! its last tail store); a killed producer leaves state 1, and the consumer
//! finds it dead when `/proc/<pid>/stat` no longer shows the recorded start
//! time.
//!
//! # Ordering
//!
//! - producer: slot bytes, then `tail.store(Release)`; the consumer's
//!   `tail.load(Acquire)` pairs with it;
//! - consumer: copies the slots out, then `head.store(Release)` in the
//!   consumer file; the producer's `head.load(Acquire)` of its read-only
//!   mapping of that file pairs with it, so a slot is not
//!   overwritten while it is copied;
//! - producer drop: last `tail` store, then `state.store(2, Release)`; the
//!   consumer's `state.load(Acquire)` pairs with it, so once it sees 2 it
//!   sees every record;
//! - drop counters: as [`crate::ring`](mod@crate::ring)'s (`dropped_total` Release after the
//!   times, `drops_reported` Release by the consumer in its file);
//! - consumer file: its fields, then the magic by a Release store,
//!   then the rename; the producer maps it only after the rename and
//!   checks the magic with an Acquire load.

use core::marker::PhantomData;
use core::mem::size_of;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::config::{Backpressure, LoggerConfig};
use crate::policy::Policy;
use crate::record::Record;
use crate::ring::{split_by_reason, Disconnected, DropDelta, DropReason};
use crate::schema::{
    FieldKind, FieldValues, IeBy, NameBy, OnlyWhen, Schema, SchemaMeta, SdParam, SyslogMeta,
};
use crate::sync::WaitSteps;
use crate::table::RecordRules;

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
const CONSUMER_MAX_BYTES: u64 = 1 << 30;
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

const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = 8;
const OFF_HEADER_BYTES: usize = 12;
const OFF_SLOT_BYTES: usize = 16;
const OFF_CAPACITY: usize = 20;
const OFF_PID: usize = 24;
const OFF_SCHEMA_COUNT: usize = 28;
const OFF_START_TIME: usize = 32;
const OFF_NONCE: usize = 40;
const OFF_CREATED_NS: usize = 48;
const OFF_STATE: usize = 56;
const OFF_DESC_BYTES: usize = 60;
const OFF_TAIL: usize = 128;
const OFF_DROPPED_FULL: usize = 384;
const OFF_DROPPED_DEGRADED: usize = 392;
const OFF_DROPPED_DISCONNECTED: usize = 400;
const OFF_DROPPED_STOPPED: usize = 408;
const OFF_DROPPED_TOTAL: usize = 416;

/// The header offset of the drop counter of `reason`.
const fn drop_offset(reason: DropReason) -> usize {
    match reason {
        DropReason::Full => OFF_DROPPED_FULL,
        DropReason::Degraded => OFF_DROPPED_DEGRADED,
        DropReason::Disconnected => OFF_DROPPED_DISCONNECTED,
        DropReason::Stopped => OFF_DROPPED_STOPPED,
    }
}
const OFF_FIRST_DROP: usize = 424;
const OFF_LAST_DROP: usize = 432;
const OFF_SCHEMAS: usize = 1024;
const DESC_BYTES: usize = 64;
const OFF_DESCS: usize = 8192;

const _: () = assert!(OFF_SCHEMAS + SHM_MAX_SCHEMAS * DESC_BYTES <= OFF_DESCS);

const C_OFF_MAGIC: usize = 0;
const C_OFF_VERSION: usize = 8;
const C_OFF_NONCE: usize = 16;
const C_OFF_HEAD: usize = 128;
const C_OFF_DROPS_REPORTED: usize = 256;
const C_OFF_VERDICT: usize = 384;

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
    /// (fields and [`SchemaMeta`]), or the producer's own in
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

/// Most syslog profile layouts nested in a schema's metadata: a
/// profile's layout has no profiles of its own.
const META_MAX_DEPTH: usize = 1;
/// Version byte of the metadata encoding.
const META_VERSION: u8 = 1;

/// Encodes a schema's [`SchemaMeta`] (little endian), the tail of its
/// description in a ring file: `version u8 (1)`, `event time u16
/// (field index, 0xffff none)`, `priority u8`, then, each behind a
/// presence byte (0/1): priority by value (`field u16`, `count u16`,
/// `(value u64, priority u8)…`), fields only when (`field u16`, `equals
/// u64`, `count u16`, `field u16…`), the syslog layout (below), the IPFIX
/// element by value (`field u16`, `selector u16`, `count u16`, `(value
/// u32, element u16)…`), the name by value (`field u16`, `selector u16`,
/// `count u16`, `(value u32, name)…`); then `enum numbers u8`. A syslog
/// layout: `app name?`, MSGID by value? (`field u16`, `count u16`,
/// `(value u64, msgid)…`), `SD-ID?`, `count u16` parameters `(name, 0
/// field u16 | 1 constant)`, `count u16` profiles `(name, layout)` (a
/// profile's layout has no profiles). A string is a length byte and that
/// many UTF-8 bytes; `x?` is a presence byte then `x`.
///
/// Returns `None` if something does not fit the encoding (a string above
/// 255 bytes, a count or index above 65535, nested profiles).
pub fn encode_meta(m: &SchemaMeta) -> Option<Vec<u8>> {
    struct W(Vec<u8>);
    impl W {
        fn u8(&mut self, v: u8) {
            self.0.push(v);
        }
        fn u16(&mut self, v: usize) -> Option<()> {
            self.0
                .extend_from_slice(&u16::try_from(v).ok()?.to_le_bytes());
            Some(())
        }
        fn u32(&mut self, v: u32) {
            self.0.extend_from_slice(&v.to_le_bytes());
        }
        fn u64(&mut self, v: u64) {
            self.0.extend_from_slice(&v.to_le_bytes());
        }
        fn str(&mut self, s: &str) -> Option<()> {
            self.0.push(u8::try_from(s.len()).ok()?);
            self.0.extend_from_slice(s.as_bytes());
            Some(())
        }
        fn opt_str(&mut self, s: Option<&str>) -> Option<()> {
            match s {
                None => self.u8(0),
                Some(s) => {
                    self.u8(1);
                    self.str(s)?;
                }
            }
            Some(())
        }
        fn syslog(&mut self, m: &SyslogMeta, depth: usize) -> Option<()> {
            self.opt_str(m.app_name.as_deref())?;
            match &m.msgid_by {
                None => self.u8(0),
                Some(v) => {
                    self.u8(1);
                    self.u16(v.field)?;
                    self.u16(v.values.len())?;
                    for (k, s) in &v.values {
                        self.u64(*k);
                        self.str(s)?;
                    }
                }
            }
            self.opt_str(m.sd_id.as_deref())?;
            self.u16(m.params.len())?;
            for (name, p) in &m.params {
                self.str(name)?;
                match p {
                    SdParam::Field(i) => {
                        self.u8(0);
                        self.u16(*i)?;
                    }
                    SdParam::Const(c) => {
                        self.u8(1);
                        self.str(c)?;
                    }
                }
            }
            if depth >= META_MAX_DEPTH && !m.profiles.is_empty() {
                return None;
            }
            self.u16(m.profiles.len())?;
            for (name, l) in &m.profiles {
                self.str(name)?;
                self.syslog(l, depth + 1)?;
            }
            Some(())
        }
    }
    let mut w = W(Vec::new());
    w.u8(META_VERSION);
    w.u16(m.event_time.unwrap_or(0xffff))?;
    if m.event_time == Some(0xffff) {
        return None;
    }
    w.u8(m.priority);
    match &m.priority_by {
        None => w.u8(0),
        Some(p) => {
            w.u8(1);
            w.u16(p.field)?;
            w.u16(p.values.len())?;
            for (v, pr) in &p.values {
                w.u64(*v);
                w.u8(*pr);
            }
        }
    }
    match &m.only_when {
        None => w.u8(0),
        Some(o) => {
            w.u8(1);
            w.u16(o.field)?;
            w.u64(o.equals);
            w.u16(o.fields.len())?;
            for &f in &o.fields {
                w.u16(f)?;
            }
        }
    }
    w.syslog(&m.syslog, 0)?;
    match &m.ipfix_ie_by {
        None => w.u8(0),
        Some(b) => {
            w.u8(1);
            w.u16(b.field)?;
            w.u16(b.selector)?;
            w.u16(b.ies.len())?;
            for (v, ie) in &b.ies {
                w.u32(*v);
                w.u16(usize::from(*ie))?;
            }
        }
    }
    match &m.name_by {
        None => w.u8(0),
        Some(b) => {
            w.u8(1);
            w.u16(b.field)?;
            w.u16(b.selector)?;
            w.u16(b.names.len())?;
            for (v, n) in &b.names {
                w.u32(*v);
                w.str(n)?;
            }
        }
    }
    w.u8(u8::from(m.enum_numbers));
    Some(w.0)
}

/// Decodes [`encode_meta`]'s encoding, the whole of `b`, and checks every
/// string a formatter writes as it is: an APP-NAME of 1 to 48 printable
/// US-ASCII characters (RFC 5424 section 6.2.5), MSGIDs of 1 to 32
/// (6.2.7), an SD-ID and parameter names of 1 to 32 without `=`, `]`,
/// `"` (6.3.2, 6.3.3), constant parameter values of printable ASCII
/// (space included) without `"`, `\` and `]` (written unescaped),
/// profile names identifiers. Field indexes are checked by
/// [`Schema::with_meta`]. Pure and bounded: it reads only `b` and
/// allocates in proportion to it.
///
/// Errors: a message naming what is wrong.
pub fn decode_meta(b: &[u8]) -> Result<SchemaMeta, String> {
    struct R<'a> {
        b: &'a [u8],
        p: usize,
    }
    fn printable(s: &str, max: usize, what: &str, forbidden: &[char]) -> Result<(), String> {
        if s.is_empty() || s.len() > max {
            return Err(format!("{what} {s:?} is not 1 to {max} characters"));
        }
        match s
            .chars()
            .find(|c| !(33..=126).contains(&(*c as u32)) || forbidden.contains(c))
        {
            Some(c) => Err(format!("{what} {s:?} contains {c:?}")),
            None => Ok(()),
        }
    }
    impl<'a> R<'a> {
        fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
            if n > self.b.len() - self.p {
                return Err("metadata ends early".into());
            }
            let s = &self.b[self.p..self.p + n];
            self.p += n;
            Ok(s)
        }
        fn u8(&mut self) -> Result<u8, String> {
            Ok(self.take(1)?[0])
        }
        fn flag(&mut self) -> Result<bool, String> {
            match self.u8()? {
                0 => Ok(false),
                1 => Ok(true),
                x => Err(format!("presence byte {x}")),
            }
        }
        fn u16(&mut self) -> Result<usize, String> {
            let s = self.take(2)?;
            Ok(usize::from(u16::from_le_bytes([s[0], s[1]])))
        }
        fn u32(&mut self) -> Result<u32, String> {
            let s = self.take(4)?;
            Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        }
        fn u64(&mut self) -> Result<u64, String> {
            Ok(u64::from_le_bytes(
                self.take(8)?.try_into().expect("8 bytes"),
            ))
        }
        fn str(&mut self) -> Result<String, String> {
            let n = usize::from(self.u8()?);
            String::from_utf8(self.take(n)?.to_vec()).map_err(|_| "a string is not UTF-8".into())
        }
        /// A count of elements of at least `min` bytes each: no more than
        /// the bytes left allow.
        fn count(&mut self, min: usize) -> Result<usize, String> {
            let n = self.u16()?;
            if n * min > self.b.len() - self.p {
                return Err(format!("{n} elements do not fit the metadata left"));
            }
            Ok(n)
        }
        fn syslog(&mut self, depth: usize) -> Result<SyslogMeta, String> {
            let mut m = SyslogMeta::default();
            if self.flag()? {
                let a = self.str()?;
                printable(&a, 48, "syslog app name", &[])?;
                m.app_name = Some(a.into());
            }
            if self.flag()? {
                let field = self.u16()?;
                let n = self.count(9)?;
                let mut values = Vec::with_capacity(n);
                for _ in 0..n {
                    let v = self.u64()?;
                    let id = self.str()?;
                    printable(&id, 32, "syslog msgid", &[])?;
                    values.push((v, id.into()));
                }
                m.msgid_by = Some(FieldValues { field, values });
            }
            if self.flag()? {
                let sd = self.str()?;
                printable(&sd, 32, "syslog SD-ID", &['=', ']', '"'])?;
                m.sd_id = Some(sd.into());
            }
            let n = self.count(3)?;
            for _ in 0..n {
                let name = self.str()?;
                printable(&name, 32, "syslog parameter name", &['=', ']', '"'])?;
                let p = match self.u8()? {
                    0 => SdParam::Field(self.u16()?),
                    1 => {
                        let c = self.str()?;
                        if let Some(ch) = c.chars().find(|c| {
                            !(32..=126).contains(&(*c as u32)) || matches!(c, '"' | '\\' | ']')
                        }) {
                            return Err(format!("syslog constant {c:?} contains {ch:?}"));
                        }
                        SdParam::Const(c.into())
                    }
                    k => return Err(format!("syslog parameter kind {k}")),
                };
                m.params.push((name.into(), p));
            }
            let n = self.count(2)?;
            if n > 0 && depth >= META_MAX_DEPTH {
                return Err("a syslog profile's layout has profiles of its own".into());
            }
            for _ in 0..n {
                let name = self.str()?;
                if !name_ok(&name) || name.contains('.') || name.contains('-') {
                    return Err(format!("syslog profile name {name:?}"));
                }
                let l = self.syslog(depth + 1)?;
                m.profiles.push((name.into(), l));
            }
            Ok(m)
        }
    }
    let mut r = R { b, p: 0 };
    let v = r.u8()?;
    if v != META_VERSION {
        return Err(format!(
            "metadata version {v}, this reader knows {META_VERSION}"
        ));
    }
    let event_time = match r.u16()? {
        0xffff => None,
        i => Some(i),
    };
    let mut m = SchemaMeta {
        event_time,
        priority: r.u8()?,
        ..SchemaMeta::default()
    };
    if r.flag()? {
        let field = r.u16()?;
        let n = r.count(9)?;
        let mut values = Vec::with_capacity(n);
        for _ in 0..n {
            values.push((r.u64()?, r.u8()?));
        }
        m.priority_by = Some(FieldValues { field, values });
    }
    if r.flag()? {
        let field = r.u16()?;
        let equals = r.u64()?;
        let n = r.count(2)?;
        let mut fields = Vec::with_capacity(n);
        for _ in 0..n {
            fields.push(r.u16()?);
        }
        m.only_when = Some(OnlyWhen {
            field,
            equals,
            fields,
        });
    }
    m.syslog = r.syslog(0)?;
    if r.flag()? {
        let field = r.u16()?;
        let selector = r.u16()?;
        let n = r.count(6)?;
        let mut ies = Vec::with_capacity(n);
        for _ in 0..n {
            ies.push((r.u32()?, r.u16()? as u16));
        }
        m.ipfix_ie_by = Some(IeBy {
            field,
            selector,
            ies,
        });
    }
    if r.flag()? {
        let field = r.u16()?;
        let selector = r.u16()?;
        let n = r.count(5)?;
        let mut names = Vec::with_capacity(n);
        for _ in 0..n {
            names.push((r.u32()?, r.str()?.into()));
        }
        m.name_by = Some(NameBy {
            field,
            selector,
            names,
        });
    }
    m.enum_numbers = r.flag()?;
    if r.p != b.len() {
        return Err(format!("{} stray bytes after the metadata", b.len() - r.p));
    }
    Ok(m)
}

/// The schema-description region of `schemas` (see the module's file
/// layout): each schema's fields and its metadata.
///
/// Errors: [`ShmError::Config`] if a schema does not survive its encoding
/// (a name above 255 bytes, metadata the encoding cannot carry or a
/// reader would refuse) or the region exceeds [`SHM_MAX_DESC_BYTES`].
fn encode_descriptions(schemas: &[&Schema]) -> Result<Vec<u8>, ShmError> {
    let mut out = Vec::new();
    for s in schemas {
        let mut b = s.encode();
        let fields_len = b.len();
        let same = matches!(Schema::decode(&b), Ok((d, n)) if n == b.len()
            && schema_fingerprint(&d) == schema_fingerprint(s)
            && d.fields() == s.fields());
        if !same {
            return Err(ShmError::Config(format!(
                "schema {}: its description does not encode (a name longer than 255 bytes?)",
                s.name()
            )));
        }
        let meta = encode_meta(s.meta()).ok_or_else(|| {
            ShmError::Config(format!(
                "schema {}: its metadata does not encode (a string above 255 bytes, nested syslog profiles?)",
                s.name()
            ))
        })?;
        match decode_meta(&meta) {
            Ok(m) if &m == s.meta() => {}
            Ok(_) => {
                return Err(ShmError::Config(format!(
                    "schema {}: its metadata does not survive its encoding",
                    s.name()
                )))
            }
            Err(e) => {
                return Err(ShmError::Config(format!(
                    "schema {}: its metadata would be refused by a reader: {e}",
                    s.name()
                )))
            }
        }
        b.extend_from_slice(&meta);
        debug_assert!(b.len() > fields_len);
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
/// [`Schema::decode`] accepts, then optionally the schema's metadata
/// ([`decode_meta`], checked by [`Schema::with_meta`]); no stray bytes
/// after the last. Pure and
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
        let (s, used) = match Schema::decode(&region[p..p + len]) {
            Ok(x) => x,
            Err(e) => return bad(e),
        };
        // The rest of the entry is the metadata (none: the defaults).
        let s = if used == len {
            s
        } else {
            let name = s.name().to_string();
            match decode_meta(&region[p + used..p + len]).map(|m| s.with_meta(m)) {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return bad(format!("schema {name}: metadata: {e}")),
                Err(e) => return bad(format!("schema {name}: metadata: {e}")),
            }
        };
        p += len;
        out.push(s);
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

fn rd_u16(b: &[u8], off: usize) -> u16 {
    u16::from_ne_bytes([b[off], b[off + 1]])
}
fn rd_u32(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}
fn rd_u64(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

fn name_ok(n: &str) -> bool {
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

/// `/proc/<pid>/stat` field 22 (start time, clock ticks since boot), or
/// `None` if there is no such process (or its stat cannot be parsed).
pub fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain any
    // byte: fields resume after the last ')'.
    let close = stat.iter().rposition(|&c| c == b')')?;
    let rest = core::str::from_utf8(&stat[close + 1..]).ok()?;
    // Field 3 (state) is the first after ')'; field 22 is the 20th.
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

/// Reader mappings the SIGBUS guard may replace: start address, length
/// and a hit flag per entry (0 start: free). A signal handler cannot lock,
/// so the registry is a fixed array of atomics.
struct GuardEntry {
    start: AtomicUsize,
    len: AtomicUsize,
    hit: AtomicBool,
}

const GUARD_ENTRIES: usize = 4096;
#[allow(clippy::declare_interior_mutable_const)]
const GUARD_FREE: GuardEntry = GuardEntry {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    hit: AtomicBool::new(false),
};
static GUARD: [GuardEntry; GUARD_ENTRIES] = [GUARD_FREE; GUARD_ENTRIES];

extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler;
    // si_addr is the faulting address for SIGBUS.
    let addr = unsafe { (*info).si_addr() } as usize;
    for e in &GUARD {
        // Acquire pairs with the Release store of `start` at registration
        // (after `len`).
        let start = e.start.load(Ordering::Acquire);
        let len = e.len.load(Ordering::Relaxed);
        if start != 0 && addr >= start && addr < start + len {
            // SAFETY: replaces exactly a registered reader mapping with
            // anonymous zero pages at the same address (MAP_FIXED): the
            // faulting access is retried on them and the reader finds the
            // hit flag. mmap is a plain system call, safe in a handler.
            unsafe {
                libc::mmap(
                    start as *mut libc::c_void,
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                );
            }
            // Release pairs with the reader's Acquire load after its copy.
            e.hit.store(true, Ordering::Release);
            return;
        }
    }
    // Not a ring's page: the handler installed before the guard, if it
    // was one, else the default action (the process dies as it would
    // have without the guard) when the access is retried.
    // Acquire pairs with the Release stores in `install_sigbus_guard`,
    // made before the guard was installed.
    let prev = PREV_HANDLER.load(Ordering::Acquire);
    let flags = PREV_FLAGS.load(Ordering::Acquire);
    if prev != libc::SIG_DFL && prev != libc::SIG_IGN {
        if flags & libc::SA_SIGINFO != 0 {
            // SAFETY: `prev` is the three-argument handler the process had
            // installed (SA_SIGINFO); called as the kernel would call it.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { core::mem::transmute(prev) };
            f(_sig, info, _ctx);
        } else {
            // SAFETY: `prev` is the one-argument handler the process had
            // installed; called as the kernel would call it.
            let f: extern "C" fn(libc::c_int) = unsafe { core::mem::transmute(prev) };
            f(_sig);
        }
        return;
    }
    // SAFETY: resetting a signal's disposition is async-signal-safe.
    unsafe { libc::signal(libc::SIGBUS, libc::SIG_DFL) };
}

/// The SIGBUS handler (`sa_sigaction`) and flags the process had before
/// [`install_sigbus_guard`]; the guard passes it a fault outside the
/// mappings it guards.
static PREV_HANDLER: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);
static PREV_FLAGS: core::sync::atomic::AtomicI32 = core::sync::atomic::AtomicI32::new(0);

/// Installs the SIGBUS guard of [`ShmReader`]s (once per process; later
/// calls do nothing): a producer that truncates its ring file under a
/// reader's mapping makes the reader's next access fault with SIGBUS,
/// which would kill the consuming process. With the guard the faulting
/// mapping is replaced by zero pages and the reader's
/// [`poll`](ShmReader::poll) reports the ring as broken instead. A SIGBUS
/// elsewhere goes to the handler the process had installed before, or
/// keeps its default action. A daemon serving rings of other processes
/// calls this at start; a [`ShmProducer`] calls it when it maps its
/// consumer file (the daemon's file, which it reads).
///
/// Errors: the `sigaction` error.
pub fn install_sigbus_guard() -> io::Result<()> {
    static DONE: AtomicBool = AtomicBool::new(false);
    // AcqRel: one installer; nothing else is published through the flag.
    if DONE.swap(true, Ordering::AcqRel) {
        return Ok(());
    }
    // SAFETY: a zeroed sigaction with an SA_SIGINFO handler of the right
    // signature and an empty mask; the previous action is read into a
    // zeroed struct.
    let r = unsafe {
        let mut sa: libc::sigaction = core::mem::zeroed();
        let mut prev: libc::sigaction = core::mem::zeroed();
        sa.sa_sigaction = on_sigbus as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut sa.sa_mask);
        // The previous action is stored before the guard is installed,
        // so the handler always finds it.
        let mut r = libc::sigaction(libc::SIGBUS, core::ptr::null(), &mut prev);
        if r == 0 && prev.sa_sigaction != on_sigbus as *const () as usize {
            // Release pairs with the handler's Acquire loads.
            PREV_FLAGS.store(prev.sa_flags, Ordering::Release);
            PREV_HANDLER.store(prev.sa_sigaction, Ordering::Release);
            r = libc::sigaction(libc::SIGBUS, &sa, core::ptr::null_mut());
        }
        r
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Registers a reader mapping with the guard; the entry index, or `None`
/// when the registry is full (the mapping is then unguarded).
fn guard_register(start: usize, len: usize) -> Option<usize> {
    for (i, e) in GUARD.iter().enumerate() {
        // Relaxed: the slot is claimed by the CAS below.
        if e.start.load(Ordering::Relaxed) == 0 {
            e.len.store(len, Ordering::Relaxed);
            e.hit.store(false, Ordering::Relaxed);
            // Release pairs with the handler's Acquire load of `start`:
            // `len` is visible with it.
            if e.start
                .compare_exchange(0, start, Ordering::Release, Ordering::Relaxed)
                .is_ok()
            {
                return Some(i);
            }
        }
    }
    None
}

/// A `MAP_SHARED` mapping of a whole ring file.
struct Mapping {
    ptr: *mut u8,
    len: usize,
    /// Its entry in the SIGBUS guard's registry (readers only).
    guard: Option<usize>,
}

// SAFETY: the mapping is plain shared memory; every access through it is
// an atomic, a volatile read or a write to slots the owner holds under the
// ring protocol.
unsafe impl Send for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `file` shared, writable or read-only.
    fn new(file: &File, len: usize, writable: bool) -> io::Result<Self> {
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: a fresh shared mapping of `len` bytes of `file`; the
        // kernel picks the address; checked for MAP_FAILED below.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            ptr: p.cast(),
            len,
            guard: None,
        })
    }

    /// True once the SIGBUS guard replaced this mapping (the file was cut
    /// short under it): its contents are zeros since.
    fn faulted(&self) -> bool {
        // Acquire pairs with the handler's Release store.
        self.guard
            .is_some_and(|i| GUARD[i].hit.load(Ordering::Acquire))
    }

    /// The 8-byte-aligned atomic at `off` (`off + 8 <= len`, a multiple of
    /// 8: every caller passes a layout constant below the header size).
    #[inline(always)]
    fn u64_at(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off % 8 == 0 && off + 8 <= self.len);
        // SAFETY: the mapping is page aligned and at least the header long
        // (checked at creation and open), so `off` is in bounds and 8-byte
        // aligned; AtomicU64 has u64's layout and any bits are valid.
        unsafe { &*self.ptr.add(off).cast::<AtomicU64>() }
    }

    #[inline(always)]
    fn u32_at(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off % 4 == 0 && off + 4 <= self.len);
        // SAFETY: as `u64_at`, 4-byte aligned.
        unsafe { &*self.ptr.add(off).cast::<AtomicU32>() }
    }

    /// Copies `out.len()` bytes from offset `off` with volatile 8-byte
    /// reads (another process may write them at the same time: the copy
    /// may be torn, never undefined), `off` and `out.len()` multiples of 8
    /// and `off + out.len() <= len`.
    fn copy_out(&self, off: usize, out: &mut [u8]) {
        assert!(off % 8 == 0 && out.len() % 8 == 0 && off + out.len() <= self.len);
        for (i, chunk) in out.chunks_exact_mut(8).enumerate() {
            // SAFETY: in bounds and 8-byte aligned (asserted above; the
            // mapping is page aligned); a volatile read of plain memory.
            let v = unsafe { self.ptr.add(off + i * 8).cast::<u64>().read_volatile() };
            chunk.copy_from_slice(&v.to_ne_bytes());
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if let Some(i) = self.guard {
            // Release: the entry is free for another mapping; the handler
            // no longer matches this range.
            GUARD[i].start.store(0, Ordering::Release);
        }
        // SAFETY: unmaps exactly the mapping made in `new`; no reference
        // into it outlives `self` (all borrow `&self`).
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// The consumer file of the ring file at `ring`: `<ring>.consumer`.
pub fn consumer_path(ring: &Path) -> PathBuf {
    let mut p = ring.as_os_str().to_owned();
    p.push(SHM_CONSUMER_SUFFIX);
    PathBuf::from(p)
}

/// Why a producer refuses the consumer file `path` whose `fstat` is `md`,
/// or `None` if it trusts it: a regular file, writable by its owner only
/// (no group or other write bit), owned by this process's effective uid,
/// root, or `daemon_uid` (the uid the daemon runs as,
/// [`ShmOptions::daemon_uid`]). Anyone who may create files in the ring
/// directory could otherwise plant a consumer file (the ring's nonce is
/// in its name) that moves the producer's view of the consumer index
/// (unread records overwritten) or sets the verdict (logging stops).
fn consumer_untrusted(
    path: &Path,
    md: &std::fs::Metadata,
    daemon_uid: Option<u32>,
) -> Option<String> {
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    let mode = md.mode() & 0o7777;
    let owner_ok = md.uid() == me || md.uid() == 0 || Some(md.uid()) == daemon_uid;
    if md.file_type().is_file() && mode & 0o022 == 0 && owner_ok {
        return None;
    }
    let daemon = match daemon_uid {
        Some(u) => format!("the daemon's uid {u}"),
        None => "the daemon's uid if one is given (ShmOptions::daemon_uid, dplog-nat --log-ring-daemon-uid, dplog_attach_daemon)".into(),
    };
    Some(format!(
        "consumer file {} refused: {}owned by uid {} with mode {mode:04o}; a producer uses only a regular file owned by itself (uid {me}), root or {daemon}, and not writable by group or others; the ring is not served until dplogd replaces it (remove the file)",
        path.display(),
        if md.file_type().is_file() { "" } else { "not a regular file, " },
        md.uid(),
    ))
}

/// The lifetime nonce in a ring file's name `<name>.<pid>.<nonce>.ring`.
fn nonce_of_name(ring: &Path) -> Option<u64> {
    ring_file_name(ring)?;
    let stem = ring.file_name()?.to_str()?.strip_suffix(SHM_SUFFIX)?;
    u64::from_str_radix(stem.rsplit('.').next()?, 16).ok()
}

/// What the consumer file of a ring says, as [`consumer_status`] reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConsumerStatus {
    /// No complete consumer file of this ring's lifetime: no daemon serves
    /// the ring (yet).
    Absent,
    /// A consumer file exists but the producer refuses it (owner or mode;
    /// see [`ShmOptions::daemon_uid`]): the ring is not served. The
    /// message names the file, its owner and mode and what is expected.
    Refused(String),
    /// The daemon serves the ring.
    Served,
    /// The daemon quarantined the ring (verdict [`STATE_QUARANTINED`]).
    Quarantined,
}

/// What the consumer file of the ring file at `ring` says, checked as
/// the producer checks it before mapping it: the owner and mode of the
/// opened file (`fstat`; see [`ConsumerStatus::Refused`]), then magic,
/// version and the lifetime nonce of the ring's file name, so a verdict
/// of another lifetime never counts. `daemon_uid` as
/// [`ShmOptions::daemon_uid`]. Reads the file with `pread(2)` instead
/// of mapping it, for a watcher beside the producer (a dataplane's
/// monitor thread) that has only the ring's path; the producer itself
/// asks [`ShmProducer::is_quarantined`] and
/// [`ShmProducer::consumer_refusal`].
pub fn consumer_status(ring: &Path, daemon_uid: Option<u32>) -> ConsumerStatus {
    use std::os::unix::fs::FileExt;
    let path = consumer_path(ring);
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(&path)
    else {
        return ConsumerStatus::Absent;
    };
    let Ok(md) = f.metadata() else {
        return ConsumerStatus::Absent;
    };
    if let Some(why) = consumer_untrusted(&path, &md, daemon_uid) {
        return ConsumerStatus::Refused(why);
    }
    let mut b = [0u8; C_OFF_VERDICT + 4];
    if f.read_exact_at(&mut b, 0).is_err() {
        return ConsumerStatus::Absent;
    }
    let valid = b[C_OFF_MAGIC..C_OFF_MAGIC + 8] == SHM_CONSUMER_MAGIC
        && rd_u32(&b, C_OFF_VERSION) == SHM_CONSUMER_VERSION
        && Some(rd_u64(&b, C_OFF_NONCE)) == nonce_of_name(ring);
    if !valid {
        ConsumerStatus::Absent
    } else if rd_u32(&b, C_OFF_VERDICT) == STATE_QUARANTINED {
        ConsumerStatus::Quarantined
    } else {
        ConsumerStatus::Served
    }
}

/// Whether the consumer file of the ring file at `ring` says its consumer
/// quarantined the ring (verdict [`STATE_QUARANTINED`]); `false` while
/// there is no complete, trusted consumer file of the ring's lifetime.
/// [`consumer_status`] with `daemon_uid` as [`ShmOptions::daemon_uid`].
pub fn consumer_quarantined(ring: &Path, daemon_uid: Option<u32>) -> bool {
    consumer_status(ring, daemon_uid) == ConsumerStatus::Quarantined
}

/// `e` of sizing or mapping a ring file of `len` bytes in `dir` (whose
/// filesystem's pages are `block` bytes), with the size and what to do
/// when it is a lack of memory or room (`ENOMEM`, `ENOSPC`): on hugetlbfs
/// (pages above 4 KiB) reserve huge pages or raise the mount's `size=`,
/// on tmpfs raise its `size=`. Other errors are returned as they are.
fn no_room(e: io::Error, len: u64, block: u64, dir: &Path) -> io::Error {
    if !matches!(e.raw_os_error(), Some(libc::ENOMEM | libc::ENOSPC)) {
        return e;
    }
    let hint = if block > 4096 {
        format!(
            "{dir} is hugetlbfs with {block}-byte pages: this ring takes {} of them, and dplogd's consumer file one more; reserve enough free huge pages (sysctl vm.nr_hugepages=N; see HugePages_Free in /proc/meminfo) and check the mount's size= option, or use a smaller [ring] capacity",
            len / block,
            dir = dir.display()
        )
    } else {
        format!(
            "check the free memory and the size= option of the filesystem of {} (e.g. tmpfs /dev/shm), or use a smaller [ring] capacity",
            dir.display()
        )
    };
    io::Error::new(e.kind(), format!("a ring file of {len} bytes: {e}; {hint}"))
}

/// The block size of `file`'s filesystem (the huge page size on
/// hugetlbfs), 4096 if it cannot be read.
fn block_size(file: &File) -> u64 {
    // SAFETY: fstatfs fills the zeroed struct for our descriptor.
    unsafe {
        let mut st: libc::statfs = core::mem::zeroed();
        if libc::fstatfs(file.as_raw_fd(), &mut st) == 0 && st.f_bsize > 0 {
            st.f_bsize as u64
        } else {
            4096
        }
    }
}

/// Whether the mapped consumer file `m` is a valid one of the ring
/// lifetime `nonce` (magic, version, nonce).
fn consumer_valid(m: &Mapping, nonce: u64) -> bool {
    // Acquire pairs with the creator's Release store of the magic:
    // the fields below are the ones written before it.
    let magic = m.u64_at(C_OFF_MAGIC).load(Ordering::Acquire);
    // Relaxed: ordered by the Acquire load of the magic.
    magic == u64::from_ne_bytes(SHM_CONSUMER_MAGIC)
        && m.u32_at(C_OFF_VERSION).load(Ordering::Relaxed) == SHM_CONSUMER_VERSION
        && m.u64_at(C_OFF_NONCE).load(Ordering::Relaxed) == nonce
}

/// Opens the consumer file of the ring at `ring` (whose open file is
/// `ring_file`, of lifetime `nonce`) for the consumer, read-write: the
/// existing one if it is this user's and of this lifetime, else a new one
/// (mode 0640, the ring file's group), made under a temporary name and
/// renamed over any other.
///
/// A reused file keeps its head, reported drops and verdict: all three
/// are of this ring lifetime (the nonce), written by this user.
///
/// Errors: [`ShmError::Io`] creating, sizing, chown-ing, mapping or
/// renaming it (the ring's directory not writable by the consumer, the
/// consumer not in the ring's group, no space; another user's file in
/// its place in a sticky directory), the message naming the file.
fn consumer_open_rw(ring: &Path, ring_file: &File, nonce: u64) -> Result<Mapping, ShmError> {
    consumer_open_rw_unnamed(ring, ring_file, nonce).map_err(|e| match e {
        // `Other`: the message is complete (`rename_refused`).
        ShmError::Io(e) if e.kind() != io::ErrorKind::Other => ShmError::Io(io::Error::new(
            e.kind(),
            format!(
                "the consumer file {} (the daemon needs write access to the ring directory): {e}",
                consumer_path(ring).display()
            ),
        )),
        other => other,
    })
}

/// [`consumer_open_rw`] but for the file's name in its errors.
fn consumer_open_rw_unnamed(
    ring: &Path,
    ring_file: &File,
    nonce: u64,
) -> Result<Mapping, ShmError> {
    let path = consumer_path(ring);
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(&path)
    {
        let md = f.metadata()?;
        // Only its own file, writable by itself only: a verdict or head
        // someone else could have written is not reused (the file is
        // replaced, zeroed).
        if md.file_type().is_file()
            && md.uid() == me
            && md.mode() & 0o022 == 0
            && md.len() >= SHM_CONSUMER_BYTES as u64
            && md.len() <= CONSUMER_MAX_BYTES
        {
            let mut m = Mapping::new(&f, md.len() as usize, true)?;
            m.guard = guard_register(m.ptr as usize, m.len);
            if consumer_valid(&m, nonce) && !m.faulted() {
                return Ok(m);
            }
        }
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o640)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)?;
    let made = (|| -> Result<Mapping, ShmError> {
        let gid = ring_file.metadata()?.gid();
        // SAFETY: fchown on a descriptor we own; -1 keeps the owner.
        if unsafe { libc::fchown(f.as_raw_fd(), u32::MAX, gid) } != 0 {
            let e = io::Error::last_os_error();
            return Err(ShmError::Io(io::Error::new(
                e.kind(),
                format!("giving the consumer file the ring's group {gid}: {e}"),
            )));
        }
        // The umask may have cleared the group bit.
        std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o640))?;
        let block = block_size(&f);
        let len = (SHM_CONSUMER_BYTES as u64).div_ceil(block) * block;
        // One ftruncate, then only the mapping: hugetlbfs takes no write.
        f.set_len(len)?;
        let mut m = Mapping::new(&f, len as usize, true)?;
        m.guard = guard_register(m.ptr as usize, m.len);
        // Relaxed: nobody maps the file yet; the fence below orders these
        // before the magic.
        m.u32_at(C_OFF_VERSION)
            .store(SHM_CONSUMER_VERSION, Ordering::Relaxed);
        m.u64_at(C_OFF_NONCE).store(nonce, Ordering::Relaxed);
        // Release pairs with the producer's Acquire load of the magic in
        // `consumer_valid`.
        m.u64_at(C_OFF_MAGIC)
            .store(u64::from_ne_bytes(SHM_CONSUMER_MAGIC), Ordering::Release);
        std::fs::rename(&tmp, &path).map_err(|e| rename_refused(&path, me, e))?;
        Ok(m)
    })();
    if made.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    made
}

/// The error of renaming the daemon's new consumer file over `path`: on
/// `EPERM`/`EACCES` with a file of another user at `path` in a sticky
/// directory (mode 1777 or 1770: only a file's owner, the directory's
/// owner or root may replace it), a message naming the file, its owner
/// and mode and the way out; else `e` with the file named. Kind
/// [`io::ErrorKind::Other`] when the message is complete.
fn rename_refused(path: &Path, me: u32, e: io::Error) -> ShmError {
    let dir = path.parent().unwrap_or(Path::new("."));
    if matches!(e.raw_os_error(), Some(libc::EPERM | libc::EACCES)) {
        if let (Ok(old), Ok(d)) = (std::fs::symlink_metadata(path), std::fs::metadata(dir)) {
            if old.uid() != me && d.mode() & libc::S_ISVTX != 0 {
                return ShmError::Io(io::Error::other(format!(
                    "cannot replace the consumer file {} ({e}): it is owned by uid {} (mode {:04o}), not by this daemon (uid {me}), and {} is sticky (mode {:04o}), so only its owner, the directory's owner or root may replace it; the ring is not served until that file is removed",
                    path.display(),
                    old.uid(),
                    old.mode() & 0o7777,
                    dir.display(),
                    d.mode() & 0o7777,
                )));
            }
        }
    }
    ShmError::Io(e)
}

/// The producer's read-only mapping of the consumer file of the ring at
/// `ring` of lifetime `nonce`: `Ok` if it exists, is trusted
/// ([`consumer_untrusted`], on the opened descriptor: no race with a
/// rename), is a regular file of [`SHM_CONSUMER_BYTES`] to 1 GiB and
/// carries the magic, version and nonce; `Err(None)` while there is no
/// such file (the daemon is away or still making it), `Err(Some(why))`
/// when the file there is refused. The mapping is under the SIGBUS
/// guard: a file cut short under it reads as zeros and
/// [`Mapping::faulted`] says so, instead of the producer dying.
fn consumer_open_ro(
    ring: &Path,
    nonce: u64,
    daemon_uid: Option<u32>,
) -> Result<Mapping, Option<String>> {
    let path = consumer_path(ring);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(&path)
        .map_err(|_| None)?;
    let md = f.metadata().map_err(|_| None)?;
    if let Some(why) = consumer_untrusted(&path, &md, daemon_uid) {
        return Err(Some(why));
    }
    if md.len() < SHM_CONSUMER_BYTES as u64 || md.len() > CONSUMER_MAX_BYTES {
        return Err(None);
    }
    // Without the guard a cut file would kill the process on the next
    // read of the head: refuse to map it unguarded.
    install_sigbus_guard().map_err(|e| {
        Some(format!(
            "consumer file {}: installing the SIGBUS guard: {e}",
            path.display()
        ))
    })?;
    let mut m = Mapping::new(&f, md.len() as usize, false).map_err(|_| None)?;
    m.guard = guard_register(m.ptr as usize, m.len);
    if m.guard.is_none() {
        return Err(Some(format!(
            "consumer file {}: the SIGBUS guard has no free entry ({GUARD_ENTRIES} mappings guarded)",
            path.display()
        )));
    }
    if consumer_valid(&m, nonce) && !m.faulted() {
        Ok(m)
    } else {
        Err(None)
    }
}

/// How [`ShmProducer::create`] makes a ring file.
#[derive(Clone, Debug)]
pub struct ShmOptions {
    /// Directory of the ring files (a tmpfs such as `/dev/shm/dplog`, or a
    /// hugetlbfs mount); it must exist.
    pub dir: PathBuf,
    /// Ring name: the file is `<name>.<pid>.<nonce>.ring`. An identifier
    /// (letters, digits, `_`, `-`), at most 32 bytes.
    pub name: String,
    /// Slots, a power of two up to [`SHM_MAX_CAPACITY`].
    pub capacity: usize,
    /// A group that may serve the ring: file mode 0640 and this gid (the
    /// consumer only reads the ring; it writes its position into a
    /// consumer file of its own, which it gives this group too, so the
    /// producer must be a member). `None`: mode 0600.
    pub group: Option<u32>,
    /// The uid the daemon (`dplogd`) runs as, when it is neither this
    /// process's uid nor root: the producer uses a consumer file only if
    /// its owner is this process's effective uid, root or this uid, and
    /// it is writable by its owner only; another file is refused (the
    /// ring is seen as not served: [`ShmProducer::consumer_refusal`],
    /// [`consumer_status`]).
    pub daemon_uid: Option<u32>,
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn random_nonce() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most `b.len()` bytes into `b`.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n == 8 {
        u64::from_ne_bytes(b)
    } else {
        now_ns() ^ (u64::from(std::process::id()) << 32)
    }
}

/// The producer half of a shared-memory ring; the same calls as
/// [`crate::ring::Producer`] (`try_push`, `push`, `try_push_burst`,
/// `push_burst`, `try_push_bulk`, `flush`, `set_publish_every`). One per
/// producer thread: `Send`, not `Sync` or `Clone`.
///
/// `push` waits while the ring is full, for as long as no consumer frees a
/// slot (a consumer that is away is not an error: the daemon may restart);
/// it gives up (`Err(Disconnected)`) only when the consumer quarantined the
/// ring.
pub struct ShmProducer<T: Record> {
    map: Mapping,
    path: PathBuf,
    slots: *mut u8,
    mask: u64,
    capacity: u64,
    tail: u64,
    published: u64,
    publish_every: u64,
    cached_head: u64,
    block_spins: u32,
    /// The ring's lifetime nonce (its consumer file must carry it).
    nonce: u64,
    /// The daemon's uid, trusted as a consumer file's owner
    /// ([`ShmOptions::daemon_uid`]).
    daemon_uid: Option<u32>,
    /// Why the consumer file found last was refused (`None`: none was).
    refusal: core::cell::RefCell<Option<String>>,
    /// The consumer file, mapped read-only once it exists.
    consumer: core::cell::OnceCell<Mapping>,
    /// No attempt to map the consumer file before this instant (an absent
    /// daemon costs one `open` per millisecond, not one per record).
    next_attach: core::cell::Cell<Option<Instant>>,
    _marker: PhantomData<T>,
}

// SAFETY: the producer owns its mapping; it is used from one thread at a
// time (`&mut self` for every push), as the SPSC protocol requires.
unsafe impl<T: Record> Send for ShmProducer<T> {}

impl<T: Record> core::fmt::Debug for ShmProducer<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ShmProducer")
            .field("path", &self.path)
            .field("capacity", &self.capacity)
            .field("tail", &self.tail)
            .field("cached_head", &self.cached_head)
            .finish_non_exhaustive()
    }
}

impl<T: Record> ShmProducer<T> {
    /// Creates a ring file for records (or slots) of type `T` declaring
    /// `schemas`, mapped and ready: `<dir>/<name>.<pid>.<nonce>.ring`,
    /// mode 0600 (0640 with `group`), its pages faulted in.
    ///
    /// Errors: [`ShmError::Config`] for a name, capacity, slot size
    /// (`size_of::<T>()` must be 32, 64 or 128), a schema larger than the
    /// slot, too many schemas or descriptions larger than
    /// [`SHM_MAX_DESC_BYTES`]; [`ShmError::Io`] for the file (the
    /// directory missing, no space: hugetlbfs without free pages).
    pub fn create(opts: &ShmOptions, schemas: &[&Schema]) -> Result<Self, ShmError> {
        let slot_bytes = size_of::<T>();
        let cfg = |m: String| Err(ShmError::Config(m));
        if !matches!(slot_bytes, 32 | 64 | 128) || core::mem::align_of::<T>() > 128 {
            return cfg(format!(
                "records of {slot_bytes} bytes: a shared-memory ring takes 32-, 64- or 128-byte slots"
            ));
        }
        if !ring_name_ok(&opts.name) {
            return cfg(format!(
                "ring name {:?}: letters, digits, '_' and '-', 1 to {SHM_RING_NAME_MAX} bytes",
                opts.name
            ));
        }
        let cap = opts.capacity;
        if cap == 0 || !cap.is_power_of_two() || cap > SHM_MAX_CAPACITY as usize {
            return cfg(format!(
                "capacity {cap}: a power of two between 1 and {SHM_MAX_CAPACITY}"
            ));
        }
        if schemas.len() > SHM_MAX_SCHEMAS {
            return cfg(format!(
                "{} schemas, a ring declares at most {SHM_MAX_SCHEMAS}",
                schemas.len()
            ));
        }
        for s in schemas {
            if s.size() > slot_bytes || !name_ok(s.name()) {
                return cfg(format!(
                    "schema {} ({} bytes) does not fit a {slot_bytes}-byte slot",
                    s.name(),
                    s.size()
                ));
            }
        }
        let descriptions = encode_descriptions(schemas)?;
        let pid = std::process::id();
        let start_time = process_start_time(pid).ok_or_else(|| {
            ShmError::Io(io::Error::other(
                "cannot read this process's /proc/self/stat",
            ))
        })?;
        let nonce = random_nonce();
        let base = format!("{}.{pid}.{nonce:016x}{SHM_SUFFIX}", opts.name);
        let path = opts.dir.join(&base);
        let tmp = opts.dir.join(format!(".{base}.tmp"));
        let mode = if opts.group.is_some() { 0o640 } else { 0o600 };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        let made = (|| -> Result<Self, ShmError> {
            if let Some(gid) = opts.group {
                // SAFETY: fchown on a descriptor we own; -1 keeps the owner.
                if unsafe { libc::fchown(file.as_raw_fd(), u32::MAX, gid) } != 0 {
                    return Err(io::Error::last_os_error().into());
                }
                // The umask may have cleared the group bit of `mode`.
                std::fs::set_permissions(
                    &tmp,
                    std::os::unix::fs::PermissionsExt::from_mode(0o640),
                )?;
            }
            let need = SHM_HEADER_BYTES as u64 + (cap * slot_bytes) as u64;
            let block = block_size(&file);
            let len = need.div_ceil(block) * block;
            let room = |e: io::Error| no_room(e, len, block, &opts.dir);
            file.set_len(len).map_err(room)?;
            if block <= 4096 {
                // tmpfs allocates on first touch: the fault-in below would
                // die of SIGBUS on a full one. Allocated here, a lack of
                // room is an error (a filesystem without fallocate is
                // left to the fault-in). hugetlbfs reserves at mmap.
                // SAFETY: fallocate on a descriptor we own; no memory passed.
                let r = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len as libc::off_t) };
                if r != 0 && r != libc::EOPNOTSUPP && r != libc::EINVAL {
                    return Err(room(io::Error::from_raw_os_error(r)).into());
                }
            }
            let map = Mapping::new(&file, len as usize, true).map_err(room)?;
            // Fault in every page now (as the in-process ring does), so the
            // producer takes no page fault on its first lap.
            // SAFETY: the mapping is `len` bytes, fresh, not yet shared.
            unsafe { map.ptr.write_bytes(0, len as usize) };
            let mut hdr = vec![0u8; OFF_DESCS + descriptions.len()];
            hdr[OFF_DESC_BYTES..OFF_DESC_BYTES + 4]
                .copy_from_slice(&(descriptions.len() as u32).to_ne_bytes());
            hdr[OFF_DESCS..].copy_from_slice(&descriptions);
            hdr[OFF_VERSION..OFF_VERSION + 4].copy_from_slice(&SHM_VERSION.to_ne_bytes());
            hdr[OFF_HEADER_BYTES..OFF_HEADER_BYTES + 4]
                .copy_from_slice(&(SHM_HEADER_BYTES as u32).to_ne_bytes());
            hdr[OFF_SLOT_BYTES..OFF_SLOT_BYTES + 4]
                .copy_from_slice(&(slot_bytes as u32).to_ne_bytes());
            hdr[OFF_CAPACITY..OFF_CAPACITY + 4].copy_from_slice(&(cap as u32).to_ne_bytes());
            hdr[OFF_PID..OFF_PID + 4].copy_from_slice(&pid.to_ne_bytes());
            hdr[OFF_SCHEMA_COUNT..OFF_SCHEMA_COUNT + 4]
                .copy_from_slice(&(schemas.len() as u32).to_ne_bytes());
            hdr[OFF_START_TIME..OFF_START_TIME + 8].copy_from_slice(&start_time.to_ne_bytes());
            hdr[OFF_NONCE..OFF_NONCE + 8].copy_from_slice(&nonce.to_ne_bytes());
            hdr[OFF_CREATED_NS..OFF_CREATED_NS + 8].copy_from_slice(&now_ns().to_ne_bytes());
            hdr[OFF_STATE..OFF_STATE + 4].copy_from_slice(&STATE_LIVE.to_ne_bytes());
            for (i, s) in schemas.iter().enumerate() {
                let d = &mut hdr[OFF_SCHEMAS + i * DESC_BYTES..OFF_SCHEMAS + (i + 1) * DESC_BYTES];
                d[0..2].copy_from_slice(&s.id().to_ne_bytes());
                d[4..8].copy_from_slice(&(s.size() as u32).to_ne_bytes());
                d[8..16].copy_from_slice(&schema_fingerprint(s).to_ne_bytes());
                d[16..16 + s.name().len()].copy_from_slice(s.name().as_bytes());
            }
            // SAFETY: `hdr` fits the header (the descriptor table is
            // asserted at compile time, the descriptions are bounded by
            // SHM_MAX_DESC_BYTES); nobody else maps the file yet.
            unsafe { core::ptr::copy_nonoverlapping(hdr.as_ptr(), map.ptr, hdr.len()) };
            // The magic last: a reader that sees it sees the whole header
            // (the rename below publishes the file; this orders the bytes
            // for a reader that maps the temporary name anyway).
            core::sync::atomic::fence(Ordering::Release);
            // SAFETY: 8 bytes at offset 0 of the mapping.
            unsafe { core::ptr::copy_nonoverlapping(SHM_MAGIC.as_ptr(), map.ptr, 8) };
            std::fs::rename(&tmp, &path)?;
            // SAFETY: the slots start at SHM_HEADER_BYTES, inside the
            // mapping of at least header + slots bytes.
            let slots = unsafe { map.ptr.add(SHM_HEADER_BYTES) };
            Ok(Self {
                map,
                path: path.clone(),
                slots,
                mask: cap as u64 - 1,
                capacity: cap as u64,
                tail: 0,
                published: 0,
                publish_every: 1,
                cached_head: 0,
                block_spins: crate::ring::DEFAULT_BLOCK_SPINS,
                nonce,
                daemon_uid: opts.daemon_uid,
                refusal: core::cell::RefCell::new(None),
                consumer: core::cell::OnceCell::new(),
                next_attach: core::cell::Cell::new(None),
                _marker: PhantomData,
            })
        })();
        if made.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        made
    }

    /// The ring file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Ring capacity in records.
    pub fn capacity(&self) -> usize {
        self.capacity as usize
    }

    /// Records pushed so far (the producer's index).
    pub fn enqueued(&self) -> u64 {
        self.tail
    }

    /// Records published to the consumer so far (the shared tail).
    pub fn committed(&self) -> u64 {
        self.published
    }

    #[inline(always)]
    fn tail_atomic(&self) -> &AtomicU64 {
        self.map.u64_at(OFF_TAIL)
    }

    /// The consumer file's mapping, mapped on first success; `None` while
    /// no valid one exists (the consumer is away). Tries at most once a
    /// millisecond.
    fn consumer(&self) -> Option<&Mapping> {
        if let Some(m) = self.consumer.get() {
            return Some(m);
        }
        let now = Instant::now();
        if self.next_attach.get().is_some_and(|t| now < t) {
            return None;
        }
        self.next_attach.set(Some(now + Duration::from_millis(1)));
        match consumer_open_ro(&self.path, self.nonce, self.daemon_uid) {
            Ok(m) => {
                *self.refusal.borrow_mut() = None;
                Some(self.consumer.get_or_init(|| m))
            }
            Err(why) => {
                if why.is_some() {
                    *self.refusal.borrow_mut() = why;
                }
                None
            }
        }
    }

    /// Forgets a consumer mapping whose file was cut short under it (the
    /// SIGBUS guard replaced it with zeros): the producer sees the
    /// consumer as away until a valid file exists again. One atomic load;
    /// called only where the head is refreshed, never per record.
    fn drop_faulted_consumer(&mut self) {
        if self.consumer.get().is_some_and(Mapping::faulted) {
            self.consumer.take();
            *self.refusal.borrow_mut() = Some(format!(
                "consumer file {} was cut short under the producer's mapping; the ring is not served until dplogd replaces it",
                consumer_path(&self.path).display()
            ));
        }
    }

    /// Why the consumer file of this ring is refused, if the last one
    /// found was (see [`ShmOptions::daemon_uid`]): a message naming the
    /// file, its owner and mode and what is expected. `None` once a
    /// trusted one is mapped. The ring is then not served: the producer
    /// follows its policy as when no daemon runs.
    pub fn consumer_refusal(&self) -> Option<String> {
        // Try to attach now (at most once a millisecond).
        let _ = self.consumer();
        self.refusal.borrow().clone()
    }

    /// The consumer's index: 0 while it has no consumer file.
    fn consumer_head(&self) -> u64 {
        // Acquire pairs with the consumer's Release store of `head`: it
        // has copied out every slot below it.
        self.consumer()
            .map_or(0, |m| m.u64_at(C_OFF_HEAD).load(Ordering::Acquire))
    }

    /// True once a consumer file of this ring exists and is mapped.
    pub fn consumer_attached(&self) -> bool {
        self.consumer().is_some()
    }

    #[inline(always)]
    fn free_slots(&mut self, want: usize) -> usize {
        let mut free = self
            .capacity
            .wrapping_sub(self.tail.wrapping_sub(self.cached_head));
        if free < want as u64 {
            self.flush();
            self.refresh_head();
            free = self
                .capacity
                .wrapping_sub(self.tail.wrapping_sub(self.cached_head));
        }
        free as usize
    }

    /// Refreshes the cached consumer index from the consumer file. A head
    /// outside `tail - capacity ..= tail` (one the consumer never wrote:
    /// memory corruption, a file cut short and read as zeros) is not
    /// taken: the cache keeps the last sane one, so `tail - cached_head`
    /// stays within the capacity and no unread slot is overwritten, now
    /// or on a later push's fast path.
    fn refresh_head(&mut self) {
        self.drop_faulted_consumer();
        let head = self.consumer_head();
        if self.tail.wrapping_sub(head) <= self.capacity {
            self.cached_head = head;
        }
    }

    /// Makes every record pushed so far visible to the consumer (one
    /// Release store of the tail, or nothing if none is pending).
    #[inline]
    pub fn flush(&mut self) {
        if self.tail != self.published {
            self.published = self.tail;
            // Release pairs with the consumer's Acquire load of `tail`.
            self.tail_atomic().store(self.tail, Ordering::Release);
        }
    }

    /// Publishes the tail once every `n` records (see
    /// [`crate::ring::Producer::set_publish_every`]); clamped to
    /// `1..=capacity`. A record a crash catches unpublished is not
    /// committed: only published records survive the producer.
    pub fn set_publish_every(&mut self, n: usize) {
        self.publish_every = (n as u64).clamp(1, self.capacity);
        if self.tail - self.published >= self.publish_every {
            self.flush();
        }
    }

    /// Pause-instruction spins before a waiting push yields (see
    /// [`crate::ring::Producer::set_block_spins`]).
    pub fn set_block_spins(&mut self, spins: u32) {
        self.block_spins = spins;
    }

    #[inline(always)]
    fn write(&mut self, index: u64, rec: T) {
        let off = (index & self.mask) as usize * size_of::<T>();
        // SAFETY: slot `index & mask` is inside the slot array and free
        // (the caller checked `tail - head < capacity`); only this producer
        // writes slots. Slots are size_of::<T>()-aligned (page-aligned
        // array of 32/64/128-byte slots), so an unaligned write is not
        // needed, but `write_unaligned` costs the same and needs no
        // alignment proof.
        unsafe { self.slots.add(off).cast::<T>().write_unaligned(rec) };
    }

    #[inline(always)]
    fn publish(&mut self, n: usize) {
        self.tail += n as u64;
        if self.tail - self.published >= self.publish_every {
            self.published = self.tail;
            // Release pairs with the consumer's Acquire load of `tail`.
            self.tail_atomic().store(self.tail, Ordering::Release);
        }
    }

    /// Copies `rec` into the next slot; `Err(rec)` when the ring is full.
    #[inline]
    pub fn try_push(&mut self, rec: T) -> Result<(), T> {
        if self.free_slots(1) == 0 {
            return Err(rec);
        }
        self.write(self.tail, rec);
        self.publish(1);
        Ok(())
    }

    /// As many of `recs` as fit; one publish. Returns how many.
    #[inline]
    pub fn try_push_burst(&mut self, recs: &[T]) -> usize {
        let n = self.free_slots(recs.len()).min(recs.len());
        for (i, r) in recs[..n].iter().enumerate() {
            self.write(self.tail + i as u64, *r);
        }
        if n > 0 {
            self.publish(n);
        }
        n
    }

    /// All of `recs` or none; returns `recs.len()` or 0.
    #[inline]
    pub fn try_push_bulk(&mut self, recs: &[T]) -> usize {
        if recs.is_empty() || self.free_slots(recs.len()) < recs.len() {
            return 0;
        }
        self.try_push_burst(recs)
    }

    /// True once the consumer quarantined the ring.
    pub fn is_quarantined(&self) -> bool {
        // Acquire pairs with the consumer's Release store of the verdict.
        self.consumer()
            .is_some_and(|m| m.u32_at(C_OFF_VERDICT).load(Ordering::Acquire) == STATE_QUARANTINED)
    }

    /// True once the ring stopped taking records: for a shared-memory
    /// ring, once the consumer quarantined it ([`is_quarantined`](Self::is_quarantined)),
    /// as an in-process ring stops on a protocol violation.
    pub fn is_stopped(&self) -> bool {
        self.is_quarantined()
    }

    /// One wait step of a blocked push; true, before any step, once the
    /// consumer quarantined the ring (it will free no slot).
    fn wait(&self, steps: &mut WaitSteps) -> bool {
        if self.is_quarantined() {
            return true;
        }
        steps.step(self.block_spins);
        false
    }

    /// Pushes `rec`, waiting while the ring is full (spin, yield, then
    /// sleep up to 1 ms between tries). `Err(Disconnected(rec))` only if
    /// the consumer quarantined the ring.
    #[inline]
    pub fn push(&mut self, rec: T) -> Result<(), Disconnected<T>> {
        let mut rec = rec;
        let mut steps = WaitSteps::new();
        loop {
            match self.try_push(rec) {
                Ok(()) => return Ok(()),
                Err(r) => rec = r,
            }
            if self.wait(&mut steps) {
                return Err(Disconnected(rec));
            }
        }
    }

    /// Pushes all of `recs`, waiting while full; `Err(Disconnected(k))`
    /// after `k` if the consumer quarantined the ring.
    pub fn push_burst(&mut self, recs: &[T]) -> Result<(), Disconnected<usize>> {
        let mut done = 0;
        let mut steps = WaitSteps::new();
        while done < recs.len() {
            let n = self.try_push_burst(&recs[done..]);
            done += n;
            if n == 0 && self.wait(&mut steps) {
                return Err(Disconnected(done));
            }
        }
        Ok(())
    }

    /// Fill level, refreshing the consumer index (one Acquire load).
    pub fn fill(&mut self) -> usize {
        self.refresh_head();
        self.tail.wrapping_sub(self.cached_head).min(self.capacity) as usize
    }

    /// Fill level from the cached consumer index (an upper bound).
    pub fn fill_upper_bound(&self) -> usize {
        self.tail.wrapping_sub(self.cached_head).min(self.capacity) as usize
    }

    /// Counts `n` records dropped for `reason` at `now`
    /// ([`crate::tsc::now_ticks`]); the consumer reports them in-band when
    /// it next drains the ring.
    pub fn count_dropped(&mut self, reason: DropReason, n: u64, now: u64) {
        let m = &self.map;
        let c = m.u64_at(drop_offset(reason));
        // Relaxed: single-writer statistic; published by the Release
        // store of the total below.
        c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
        let total = m.u64_at(OFF_DROPPED_TOTAL).load(Ordering::Relaxed);
        // Acquire pairs with the consumer's Release store of
        // `drops_reported`: every earlier drop reported, this one opens a
        // new interval (0 reported while there is no consumer file mapped;
        // attaching is `free_slots`'s, so a drop reads no clock).
        let reported = self.consumer.get().map_or(0, |c| {
            c.u64_at(C_OFF_DROPS_REPORTED).load(Ordering::Acquire)
        });
        if reported == total {
            m.u64_at(OFF_FIRST_DROP).store(now, Ordering::Relaxed);
        }
        // Relaxed: published by the Release store of the total below.
        m.u64_at(OFF_LAST_DROP).store(now, Ordering::Relaxed);
        // Release pairs with the consumer's Acquire load of the total.
        m.u64_at(OFF_DROPPED_TOTAL)
            .store(total + n, Ordering::Release);
    }

    /// Records dropped so far, every reason.
    pub fn dropped(&self) -> u64 {
        // Relaxed: own single-writer counter.
        self.map.u64_at(OFF_DROPPED_TOTAL).load(Ordering::Relaxed)
    }

    /// Records dropped so far for `reason` (the ring's own per-reason
    /// counter; they add up to [`dropped`](Self::dropped)).
    pub fn dropped_for(&self, reason: DropReason) -> u64 {
        // Relaxed: own single-writer counter.
        self.map.u64_at(drop_offset(reason)).load(Ordering::Relaxed)
    }
}

impl<T: Record> Drop for ShmProducer<T> {
    fn drop(&mut self) {
        self.flush();
        // Release pairs with the consumer's Acquire load of the state:
        // once it sees CLOSED it sees the last tail.
        let _ = self.map.u32_at(OFF_STATE).compare_exchange(
            STATE_LIVE,
            STATE_CLOSED,
            Ordering::Release,
            Ordering::Relaxed,
        );
    }
}

/// A shared-memory producer with the logger's backpressure policy: the
/// same [`log`](Self::log) / [`log_burst`](Self::log_burst) as
/// [`LogProducer`](crate::LogProducer). Dereferences to [`ShmProducer`].
pub struct ShmLogProducer<R: Record> {
    inner: ShmProducer<R>,
    policy: Policy<R>,
}

impl<R: Record> core::fmt::Debug for ShmLogProducer<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ShmLogProducer")
            .field("inner", &self.inner)
            .field("policy", &self.policy.policy)
            .finish_non_exhaustive()
    }
}

impl<R: Record> ShmLogProducer<R> {
    /// Creates the ring file ([`ShmProducer::create`]) with `opts`, the
    /// capacity taken from `cfg.ring_capacity` when `opts.capacity` is 0,
    /// and the policy, block spins and publish interval of `cfg`; records
    /// of `schemas`, priorities under `degrade` by `rules`.
    ///
    /// Errors: as [`ShmProducer::create`].
    pub fn create(
        opts: &ShmOptions,
        cfg: &LoggerConfig,
        schemas: &[&Schema],
        rules: RecordRules<R>,
    ) -> Result<Self, ShmError> {
        let mut opts = opts.clone();
        if opts.capacity == 0 {
            opts.capacity = cfg.ring_capacity;
        }
        let mut inner = ShmProducer::create(&opts, schemas)?;
        inner.set_block_spins(cfg.block_spins);
        inner.set_publish_every(cfg.publish_every);
        let mut pcfg = cfg.clone();
        pcfg.ring_capacity = opts.capacity;
        Ok(Self {
            inner,
            policy: Policy::new(&pcfg, rules.priority),
        })
    }

    /// Hands `rec` to the ring under the policy: `block` waits (while no
    /// consumer drains, for as long as it takes), `drop_newest` drops and
    /// counts, `degrade` sheds low priorities above the watermark. Returns
    /// `false` if the record was not enqueued.
    #[inline]
    pub fn log(&mut self, rec: R) -> bool {
        self.policy.log(&mut self.inner, rec)
    }

    /// [`log`](Self::log) for a burst; returns how many were enqueued.
    #[inline]
    pub fn log_burst(&mut self, recs: &[R]) -> usize {
        self.policy.log_burst(&mut self.inner, recs)
    }

    /// The policy applied.
    pub fn policy(&self) -> Backpressure {
        self.policy.policy
    }
}

impl<R: Record> core::ops::Deref for ShmLogProducer<R> {
    type Target = ShmProducer<R>;
    fn deref(&self) -> &ShmProducer<R> {
        &self.inner
    }
}

impl<R: Record> core::ops::DerefMut for ShmLogProducer<R> {
    fn deref_mut(&mut self) -> &mut ShmProducer<R> {
        &mut self.inner
    }
}

/// Which ring files [`ShmReader::open`] accepts.
#[derive(Clone, Debug, Default)]
pub struct OpenRules {
    /// Owner uids accepted besides this process's effective uid.
    pub allow_uids: Vec<u32>,
}

/// The consumer side of a ring file, in another process than its
/// producer. It keeps its own copy of the consumer index and of the last
/// producer index it accepted, and checks everything it reads from the
/// file before use: the header once ([`parse_header`], on a copy), the
/// file size on every [`poll`](Self::poll) (a file truncated under it
/// would fault the mapping), every producer index ([`check_tail`]) and
/// every record header ([`check_slots`], on the copied-out slots).
pub struct ShmReader {
    /// The ring file, read-only.
    map: Mapping,
    /// The consumer file, read-write.
    cmap: Mapping,
    file: File,
    path: PathBuf,
    info: RingInfo,
    head: u64,
    last_tail: u64,
    drops_reported: u64,
    /// `drops_reported` per reason ([`split_by_reason`]).
    drops_reported_by_reason: [u64; 4],
    /// When [`take_drops`](Self::take_drops) last read the drop total.
    drops_checked: Option<Instant>,
    /// When the reader was opened, and the ring's age then (wall clock
    /// since its creation time, 0 if that lay in the future): the drop
    /// bound's clock.
    opened: Instant,
    age_at_open_ns: u64,
    size_check: bool,
}

impl core::fmt::Debug for ShmReader {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ShmReader")
            .field("path", &self.path)
            .field("info", &self.info)
            .field("head", &self.head)
            .finish_non_exhaustive()
    }
}

/// What the producer of a ring is doing, as far as the consumer can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProducerState {
    /// Its process runs (same pid and start time) and the ring is live.
    Running,
    /// It closed the ring (dropped its producer).
    Closed,
    /// Its process is gone (no such pid, or another process's start time).
    Dead,
}

impl ShmReader {
    /// Opens and maps a ring file read-only, checking its type, owner and
    /// header, and opens (or creates) its consumer file
    /// ([`consumer_path`]; see the module's layout).
    ///
    /// Errors: [`ShmError::Io`] (not a regular file, a symlink, open or
    /// map failure, the consumer file cannot be made), [`ShmError::Owner`]
    /// for a file of a uid neither this process's nor in `rules`,
    /// [`ShmError::BadHeader`] from [`parse_header`]; [`ShmError::Schema`]
    /// for a bad schema description behind a valid fixed header, after
    /// marking the ring quarantined in its consumer file (its producer
    /// stops waiting and counts drops); [`ShmError::Protocol`], also after
    /// marking it quarantined, when a consumer file kept from an earlier
    /// daemon holds an index the producer's contradicts.
    ///
    /// The consumer index starts where such a kept consumer file says an
    /// earlier daemon freed the ring (0 for a new file).
    pub fn open(path: &Path, rules: &OpenRules) -> Result<Self, ShmError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(path)?;
        let md = file.metadata()?;
        if !md.file_type().is_file() {
            return Err(ShmError::BadHeader("not a regular file".into()));
        }
        // SAFETY: geteuid cannot fail.
        let me = unsafe { libc::geteuid() };
        if md.uid() != me && !rules.allow_uids.contains(&md.uid()) {
            return Err(ShmError::Owner { uid: md.uid() });
        }
        let len = md.len();
        let mut hdr = vec![0u8; SHM_HEADER_BYTES];
        let got = std::os::unix::fs::FileExt::read_at(&file, &mut hdr, 0)?;
        hdr.truncate(got);
        let info = match parse_header(&hdr, len) {
            Err(ShmError::Schema(m)) => {
                // The fixed header is valid (and the file at least a header
                // long): mark the ring quarantined, so a producer blocked
                // on it stops waiting, as for a protocol violation.
                if let Ok(c) = consumer_open_rw(path, &file, rd_u64(&hdr, OFF_NONCE)) {
                    // Release pairs with the producer's Acquire load in
                    // `is_quarantined`.
                    c.u32_at(C_OFF_VERDICT)
                        .store(STATE_QUARANTINED, Ordering::Release);
                }
                return Err(ShmError::Schema(m));
            }
            r => r?,
        };
        // Whole blocks of the filesystem: a hugetlbfs mapping is unmapped
        // only in whole huge pages (the producer sized the file so).
        let block = block_size(&file);
        let map_len = usize::try_from(info.needed_bytes().div_ceil(block) * block)
            .map_err(|_| ShmError::BadHeader("ring larger than the address space".into()))?;
        let mut map = Mapping::new(&file, map_len, false)?;
        map.guard = guard_register(map.ptr as usize, map.len);
        let cmap = consumer_open_rw(path, &file, info.nonce)?;
        // A consumer file this daemon's uid kept from an earlier daemon of
        // the same ring lifetime holds the position that daemon freed (it
        // frees slots only once their records are written): start there,
        // not at 0, or the head would move backwards under the producer.
        // A checkpoint, if there is one, moves it again (`resume_at`).
        // Acquire pairs with the earlier daemon's Release stores
        // (`publish_head`, `publish_reported`).
        let head = cmap.u64_at(C_OFF_HEAD).load(Ordering::Acquire);
        let drops_reported = cmap.u64_at(C_OFF_DROPS_REPORTED).load(Ordering::Acquire);
        // A creation time in the future (a clock set back, or a lying
        // header) counts as now: the drop bound then starts at this open.
        let age_at_open_ns = now_ns().saturating_sub(info.created_ns);
        let mut reader = Self {
            map,
            cmap,
            file,
            path: path.to_path_buf(),
            info,
            head: 0,
            last_tail: 0,
            drops_reported: 0,
            drops_reported_by_reason: [0; 4],
            drops_checked: None,
            opened: Instant::now(),
            age_at_open_ns,
            size_check: true,
        };
        // (A ring already quarantined is not served again: no position.)
        if (head != 0 || drops_reported != 0) && !reader.quarantined() {
            if let Err(e) = reader.resume_at(head, drops_reported) {
                // A position the producer's index contradicts: stop the
                // ring, so a producer blocked on it stops waiting.
                reader.quarantine();
                return Err(ShmError::Protocol(format!(
                    "its consumer file's index {head}: {e}"
                )));
            }
        }
        Ok(reader)
    }

    /// Test hook: [`poll`](Self::poll) skips its file-size check, as if
    /// the file were cut between the check and the copy (the SIGBUS
    /// guard's case).
    #[doc(hidden)]
    pub fn skip_size_check(&mut self) {
        self.size_check = false;
    }

    /// The validated header.
    pub fn info(&self) -> &RingInfo {
        &self.info
    }

    /// The ring file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The consumer index: records below it are consumed.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// The last producer index accepted.
    pub fn tail(&self) -> u64 {
        self.last_tail
    }

    /// Sets the consumer index and the drops already reported (from a
    /// checkpoint), checked against the producer's index. The reported
    /// drops are given to their reasons by the counters as they are now,
    /// in the order of [`DropReason::ALL`]: when drops of several reasons
    /// were still unreported at the checkpoint, the first reports after it
    /// may split them between those reasons differently (their counts are
    /// exact; see [`crate::report`]).
    ///
    /// Errors: [`ShmError::Protocol`] if the producer's index is below
    /// `head` or more than a capacity above it.
    pub fn resume_at(&mut self, head: u64, drops_reported: u64) -> Result<(), ShmError> {
        self.check_size()?;
        // Acquire pairs with the producer's Release store of `tail`.
        let tail = self.map.u64_at(OFF_TAIL).load(Ordering::Acquire);
        check_tail(head, head, tail, self.info.capacity)?;
        self.head = head;
        self.last_tail = head;
        self.drops_reported = drops_reported;
        self.drops_reported_by_reason = [0; 4];
        split_by_reason(
            drops_reported,
            self.drop_counters(),
            &mut self.drops_reported_by_reason,
        );
        Ok(())
    }

    /// The producer's drop counters, in the order of [`DropReason::ALL`].
    fn drop_counters(&self) -> [u64; 4] {
        // Relaxed: statistics; a caller that needs them to cover a total
        // loads the total first, with Acquire (the producer stores each
        // counter before it publishes the total).
        DropReason::ALL.map(|r| self.map.u64_at(drop_offset(r)).load(Ordering::Relaxed))
    }

    /// Drops reported in-band so far (checkpointed with the head).
    pub fn drops_reported(&self) -> u64 {
        self.drops_reported
    }

    fn check_size(&self) -> Result<(), ShmError> {
        let len = self.file.metadata()?.len();
        if len < self.info.needed_bytes() {
            return Err(ShmError::Protocol(format!(
                "file shrank to {len} bytes, below the {} its header declares",
                self.info.needed_bytes()
            )));
        }
        Ok(())
    }

    /// Copies up to `max` published records after the consumer index into
    /// `out` (cleared first; `n × slot_bytes` bytes) and checks them;
    /// returns `n`. The index does not move: call
    /// [`consume`](Self::consume) once they are written.
    ///
    /// Errors: [`ShmError::Protocol`] for a bad producer index or record;
    /// the records before a bad one are left in `out` (whole slots) so the
    /// caller may write them before it quarantines the ring: `Err` then
    /// comes with `out.len() / slot_bytes` good records.
    pub fn poll(&mut self, max: usize, out: &mut Vec<u8>) -> Result<usize, ShmError> {
        out.clear();
        if self.size_check {
            self.check_size()?;
        }
        // Acquire pairs with the producer's Release store of `tail`.
        let tail = self.map.u64_at(OFF_TAIL).load(Ordering::Acquire);
        if self.map.faulted() {
            return Err(ShmError::Protocol(
                "the file was cut short under the mapping (SIGBUS)".into(),
            ));
        }
        check_tail(self.head, self.last_tail, tail, self.info.capacity)?;
        self.last_tail = tail;
        let n = (tail - self.head).min(max as u64) as usize;
        let sb = self.info.slot_bytes as usize;
        out.resize(n * sb, 0);
        let cap = u64::from(self.info.capacity);
        // Two runs: to the end of the slot array, then from its start.
        let first = (
            (self.head & (cap - 1)) as usize,
            n.min((cap - (self.head & (cap - 1))) as usize),
        );
        self.map
            .copy_out(SHM_HEADER_BYTES + first.0 * sb, &mut out[..first.1 * sb]);
        if first.1 < n {
            self.map
                .copy_out(SHM_HEADER_BYTES, &mut out[first.1 * sb..n * sb]);
        }
        if self.map.faulted() {
            out.clear();
            return Err(ShmError::Protocol(
                "the file was cut short under the mapping (SIGBUS)".into(),
            ));
        }
        let (good, err) = check_slots(out, self.info.slot_bytes, &self.info.schemas);
        match err {
            None => Ok(n),
            Some(e) => {
                out.truncate(good * sb);
                Err(e)
            }
        }
    }

    /// Advances the consumer's own index by `n` records (of the last
    /// [`poll`](Self::poll)); the producer sees the room only after
    /// [`publish_head`](Self::publish_head).
    pub fn consume(&mut self, n: usize) {
        self.head = (self.head + n as u64).min(self.last_tail);
    }

    /// Publishes the consumer index to the producer (Release; pairs with
    /// the producer's Acquire load of `head`): the slots below it may be
    /// overwritten. Call after the records are written and checkpointed.
    pub fn publish_head(&self) {
        self.cmap
            .u64_at(C_OFF_HEAD)
            .store(self.head, Ordering::Release);
    }

    /// The ring's state word (any value: a hostile producer writes any).
    pub fn state_word(&self) -> u32 {
        // Acquire pairs with the producer's Release store at drop.
        self.map.u32_at(OFF_STATE).load(Ordering::Acquire)
    }

    /// Whether the producer is running, closed or dead. Read the state
    /// before the last [`poll`](Self::poll) that drains a closed or dead
    /// ring: a producer's records are all published before it closes, and
    /// a dead one publishes nothing more.
    pub fn producer_state(&self) -> ProducerState {
        if self.state_word() == STATE_CLOSED {
            return ProducerState::Closed;
        }
        match process_start_time(self.info.pid) {
            Some(t) if t == self.info.start_time => ProducerState::Running,
            _ => ProducerState::Dead,
        }
    }

    /// Marks the ring quarantined (Release; pairs with the producer's
    /// Acquire load in `is_quarantined`: a producer blocked on it stops
    /// waiting and counts its records dropped).
    pub fn quarantine(&self) {
        self.cmap
            .u32_at(C_OFF_VERDICT)
            .store(STATE_QUARANTINED, Ordering::Release);
    }

    /// True if the consumer file says the ring is quarantined: marked by
    /// [`quarantine`](Self::quarantine), or found so when
    /// [`open`](Self::open) reused the file of this ring lifetime (a
    /// verdict of this user, before a restart: it is never cleared).
    pub fn quarantined(&self) -> bool {
        // Acquire pairs with the Release store in `quarantine`.
        self.cmap.u32_at(C_OFF_VERDICT).load(Ordering::Acquire) == STATE_QUARANTINED
    }

    /// Removes the ring file and its consumer file (once the ring is
    /// drained and its end written).
    pub fn remove_files(&self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(consumer_path(&self.path));
    }

    /// The ring's age in nanoseconds now: wall-clock time since its
    /// creation time as read at [`open`](Self::open) (0 if that lay in
    /// the future), plus monotonic time since then.
    fn age_ns(&self, now: Instant) -> u64 {
        let since_open =
            u64::try_from(now.duration_since(self.opened).as_nanos()).unwrap_or(u64::MAX);
        self.age_at_open_ns.saturating_add(since_open)
    }

    /// The producer's drops not yet reported in-band, split by reason
    /// (drops the reason counters do not cover, corrupted too, are
    /// [`DropDelta::unattributed`]), marking them reported in this reader (the caller checkpoints
    /// [`drops_reported`](Self::drops_reported) and calls
    /// [`publish_reported`](Self::publish_reported) after writing the
    /// report); `Ok(None)` if there are none. The first and last drop
    /// times are the producer's ticks, `first_ns <= last_ns`; the caller
    /// bounds them by the ring's creation and its own clock.
    ///
    /// The drop total is the producer's word, checked as its index is
    /// (see the module's "Drop counters"): it may not move backwards, may
    /// not exceed one drop per nanosecond of the ring's age plus
    /// [`SHM_DROP_SLACK`], and may not grow by more than one drop per
    /// nanosecond since the previous call (since the ring's creation at
    /// the first call) plus [`SHM_DROP_SLACK`].
    ///
    /// Errors: [`ShmError::Protocol`] naming the total and the bound it
    /// broke; nothing is marked reported (quarantine the ring).
    pub fn take_drops(&mut self) -> Result<Option<DropDelta>, ShmError> {
        let now = Instant::now();
        // Acquire pairs with the producer's Release store of the total.
        let total = self.map.u64_at(OFF_DROPPED_TOTAL).load(Ordering::Acquire);
        let since = self.drops_checked.replace(now);
        if total < self.drops_reported {
            return Err(ShmError::Protocol(format!(
                "drop counter moved backwards from {} to {total}",
                self.drops_reported
            )));
        }
        if total == self.drops_reported {
            return Ok(None);
        }
        let age = self.age_ns(now);
        if total > age.saturating_add(SHM_DROP_SLACK) {
            return Err(ShmError::Protocol(format!(
                "drop counter {total} is more than one drop per nanosecond of the ring's age ({age} ns) plus {SHM_DROP_SLACK}"
            )));
        }
        let delta = total - self.drops_reported;
        let elapsed = since.map_or(age, |t| {
            u64::try_from(now.duration_since(t).as_nanos()).unwrap_or(u64::MAX)
        });
        if delta > elapsed.saturating_add(SHM_DROP_SLACK) {
            return Err(ShmError::Protocol(format!(
                "drop counter grew by {delta} to {total} in {elapsed} ns, more than one drop per nanosecond plus {SHM_DROP_SLACK}"
            )));
        }
        // Relaxed: ordered by the Acquire load above.
        let first = self.map.u64_at(OFF_FIRST_DROP).load(Ordering::Relaxed);
        let last = self.map.u64_at(OFF_LAST_DROP).load(Ordering::Relaxed);
        let d = DropDelta {
            dropped: delta,
            by_reason: split_by_reason(
                delta,
                self.drop_counters(),
                &mut self.drops_reported_by_reason,
            ),
            first_ns: first.min(last),
            last_ns: last,
        };
        self.drops_reported = total;
        Ok(Some(d))
    }

    /// Publishes the reported-drops count to the producer (Release; pairs
    /// with its Acquire load when it counts a drop).
    pub fn publish_reported(&self) {
        self.cmap
            .u64_at(C_OFF_DROPS_REPORTED)
            .store(self.drops_reported, Ordering::Release);
    }
}

/// The name part of a ring file name `<name>.<pid>.<nonce>.ring`, if the
/// file name has that shape. The name part is not checked: a consumer
/// checks it with [`ring_name_ok`] before it serves the ring.
pub fn ring_file_name(path: &Path) -> Option<&str> {
    let f = path.file_name()?.to_str()?;
    let stem = f.strip_suffix(SHM_SUFFIX)?;
    if f.starts_with('.') {
        return None;
    }
    let mut parts = stem.rsplitn(3, '.');
    let nonce = parts.next()?;
    let pid = parts.next()?;
    let name = parts.next()?;
    (nonce.len() == 16
        && nonce.bytes().all(|c| c.is_ascii_hexdigit())
        && pid.parse::<u32>().is_ok()
        && !name.is_empty())
    .then_some(name)
}
