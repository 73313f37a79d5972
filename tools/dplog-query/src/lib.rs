//! Lookups over a dplog archive (`dplog_sinks::archive`): the engine of
//! the `dplog-query` program.
//!
//! # `--at T`: what was live at T
//!
//! A record type is *stateful* when its schema declares a lifecycle
//! ([`Schema::with_lifecycle`](dplog_core::schema::Schema::with_lifecycle)),
//! which travels with the archive's schema blocks: the values of one
//! integer field that open a state (e.g. the NAT's natEvent 4, a NAT44
//! session create, and 16, a port block allocation, also the
//! deterministic-NAT mapping of RFC 7422, logged once; a load balancer's
//! connection open) and those that close it (natEvent 5 and 17), and the
//! key fields that identify a state. A close belongs to the most recent
//! open before it (in event-time order, equal times in the order
//! written) of the same record type with the same key values. A state is
//! live at T when its open is at or before T and no close of it is
//! before T (a close at T counts as live at T; a missing close as still
//! live). The answer is the open record of each live state.
//!
//! Conditions (`field=value`) select records: equal values (a TSC-typed
//! field's raw ticks: no condition converts them; a BYTES field's value
//! is its bytes up to the first NUL, compared byte for byte with the
//! value given, as `dplog-cat --where` compares it, and a value longer
//! than the field is an error; a BYTES key field leaves the key index
//! unused, as the index hashes the whole field); a condition
//! on a transport port (`...TransportPort`) that a record type lacks but
//! whose `portRangeStart`/`portRangeEnd` it has matches when the port is
//! in the range (port blocks, deterministic NAT mappings).
//!
//! **Lookback.** An open can be far older than T. The query reads the
//! records of the window `[T - lookback, T]`, and finds a state only when
//! its open is in that window; the lookback defaults to the archive
//! writer's `max_lifetime_ms` (in every segment footer; default one day),
//! the longest a state lives. Set it to the longest lifetime the
//! dataplane allows (a TCP session refreshed for days, a deterministic
//! mapping logged once at start: `--lookback all`). The cost is one
//! footer and one key index page read for each segment of the window,
//! and a decode only of the blocks the index names. Records of types
//! without a lifecycle, and records whose lifecycle field neither opens
//! nor closes (the NAT's exhaustion and quota events), are not states:
//! `--between` finds them. An archive none of whose record types
//! declares a lifecycle (e.g. written before schemas carried their
//! metadata) holds no state: `--at` on it is an error
//! ([`QueryError::NoLifecycle`]), not an empty answer.
//!
//! # `--between T1 T2`
//!
//! Every record matching the conditions with an event time in
//! `T1..=T2`, in event-time order.
//!
//! # Memory
//!
//! The footers of the segments being read (those whose time ranges
//! overlap) and the decoded blocks that overlap the current time; for
//! `--at`, the matching records of the window (those of one key when the
//! conditions name it).

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use dplog_core::schema::{FieldDef, FieldKind, Lifecycle, Schema};
use dplog_formatters::TscCalibration;
use dplog_sinks::archive::format::{self, key_hash32};
use dplog_sinks::archive::reader::{for_each_group, merge_rows};
use dplog_sinks::archive::summary::{BucketAt, EntryRef, Summaries};
use dplog_sinks::archive::{list_segments, Problem, Segment, SegmentFile};

/// What to look up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// What was live at this time (ns since the epoch).
    At(u64),
    /// Every matching record in `from..=to` (ns).
    Between(u64, u64),
}

/// How far before `--at T` opens are looked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookback {
    /// The archive's `max_lifetime_ms` (newest footer), else one day.
    Default,
    /// This many ns.
    Ns(u64),
    /// The whole archive before T.
    All,
}

/// A lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    /// At or between.
    pub mode: Mode,
    /// `(field, value)` conditions, all of which must hold.
    pub conds: Vec<(String, String)>,
    /// For [`Mode::At`].
    pub lookback: Lookback,
}

/// Why a lookup could not run.
#[derive(Debug)]
pub enum QueryError {
    /// A condition names a field no record type of the archive has.
    UnknownField {
        /// The field.
        field: String,
        /// The fields the archive's record types have.
        known: Vec<String>,
        /// Segments that could not be read (file, byte, why), skipped:
        /// their record types are not in `known`.
        damaged: Vec<Problem>,
    },
    /// No readable segment of the archive declares a record type, so no
    /// condition can be matched: every segment is damaged (`problems`
    /// names each: file, byte, why) or holds no record.
    NoRecordTypes {
        /// The archive directory.
        dir: PathBuf,
        /// How many segments it has.
        segments: usize,
        /// The segments that could not be read, skipped.
        problems: Vec<Problem>,
    },
    /// `--at` on an archive none of whose record types declares a
    /// lifecycle: no record opens or closes a state, so nothing can be
    /// live at T (declare one, or look with `--between`).
    NoLifecycle {
        /// The archive directory.
        dir: PathBuf,
        /// Its record types' names.
        types: Vec<String>,
        /// Segments that could not be read, skipped: their record types
        /// are not in `types`.
        damaged: Vec<Problem>,
    },
    /// A value that does not parse as its field's kind.
    BadValue {
        /// The field.
        field: String,
        /// The value given.
        value: String,
        /// Why.
        why: String,
    },
    /// The archive directory cannot be read, or holds no segment.
    Archive(PathBuf, io::Error),
}

/// The note an answer about record types adds when `damaged` segments
/// (their record types unknown) were skipped.
fn damaged_note(f: &mut fmt::Formatter<'_>, damaged: &[Problem]) -> fmt::Result {
    if damaged.is_empty() {
        return Ok(());
    }
    write!(
        f,
        " ({} damaged segment(s) could not be read: their record types are not known)",
        damaged.len()
    )
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueryError::UnknownField {
                field,
                known,
                damaged,
            } => {
                write!(
                    f,
                    "unknown field {field:?}: the archive's records have {}",
                    known.join(", ")
                )?;
                damaged_note(f, damaged)
            }
            QueryError::NoRecordTypes {
                dir,
                segments,
                problems,
            } if problems.is_empty() => write!(
                f,
                "no segment of {} declares a record type: its {segments} segment(s) hold no \
                 records; nothing to look up",
                dir.display()
            ),
            QueryError::NoRecordTypes {
                dir,
                segments,
                problems,
            } if problems.len() >= *segments => write!(
                f,
                "no readable segment of {} declares a record type: its {segments} segment(s) \
                 are damaged and were skipped; nothing to look up",
                dir.display(),
            ),
            QueryError::NoRecordTypes {
                dir,
                segments,
                problems,
            } => write!(
                f,
                "no readable segment of {} declares a record type: {} of its {segments} \
                 segment(s) are damaged and were skipped, the others hold no records; nothing \
                 to look up",
                dir.display(),
                problems.len()
            ),
            QueryError::NoLifecycle {
                dir,
                types,
                damaged,
            } => {
                write!(
                    f,
                    "--at: no record type in {} declares a lifecycle ({}: none says which \
                     records open and close a state); declare one (docs/schema-metadata.md) \
                     or use --between",
                    dir.display(),
                    types.join(", ")
                )?;
                damaged_note(f, damaged)
            }
            QueryError::BadValue { field, value, why } => {
                write!(f, "{field}={value}: {why}")
            }
            QueryError::Archive(p, e) => write!(f, "{}: {e}", p.display()),
        }
    }
}

impl QueryError {
    /// The damaged segments met before the error (file, byte, why), to
    /// report with it: those that could not be read when the archive's
    /// record types were looked for. Empty for the other errors.
    pub fn problems(&self) -> &[Problem] {
        match self {
            QueryError::UnknownField { damaged, .. } => damaged,
            QueryError::NoRecordTypes { problems, .. } => problems,
            QueryError::NoLifecycle { damaged, .. } => damaged,
            _ => &[],
        }
    }
}

impl std::error::Error for QueryError {}

/// Parses a time: RFC 3339 (`2013-05-02T20:20:36.616804Z`, a fraction of
/// up to 9 digits, `Z` or `±hh:mm`; a space for `T` is accepted), or an
/// integer with a unit: `1367526036616ms`, `...s`, `...us`, `...ns`; a bare
/// integer is milliseconds (as `observationTimeMilliseconds`). Returns ns
/// since the Unix epoch.
///
/// Errors: a message saying what is wrong and which forms are accepted.
pub fn parse_time(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let usage = "give RFC 3339 (2013-05-02T20:20:36.616804Z) or an integer with a unit \
                 (1367526036616ms, 1367526036s, ...ns; a bare integer is ms)";
    let err = |why: &str| format!("unparsable time {s:?}: {why}; {usage}");
    if s.bytes().next().is_some_and(|b| b.is_ascii_digit()) && !s.contains('-') {
        let (num, mul) = [
            ("ns", 1u64),
            ("us", 1_000),
            ("ms", 1_000_000),
            ("s", 1_000_000_000),
        ]
        .iter()
        .find_map(|&(u, m)| s.strip_suffix(u).map(|n| (n, m)))
        .unwrap_or((s, 1_000_000));
        let v: u64 = num.parse().map_err(|_| err("not an integer"))?;
        return v.checked_mul(mul).ok_or_else(|| err("out of range"));
    }
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Result<u32, String> {
        s.get(r)
            .filter(|t| t.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| err("bad date or time digits"))
    };
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(err("not YYYY-MM-DDThh:mm:ss"));
    }
    let (y, mo, d, h, mi, sec) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    );
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return Err(err("date or time out of range"));
    }
    let mut p = 19;
    let mut frac_ns = 0u64;
    if b.get(p) == Some(&b'.') {
        let start = p + 1;
        p = start;
        while p < b.len() && b[p].is_ascii_digit() {
            p += 1;
        }
        let digits = &s[start..p];
        if digits.is_empty() || digits.len() > 9 {
            return Err(err("fraction of 1 to 9 digits"));
        }
        frac_ns = digits.parse::<u64>().map_err(|_| err("fraction"))?
            * 10u64.pow(9 - digits.len() as u32);
    }
    let offset_s: i64 = match &s[p..] {
        "Z" | "z" => 0,
        o if o.len() == 6 && (o.starts_with('+') || o.starts_with('-')) && &o[3..4] == ":" => {
            let hh = num(p + 1..p + 3)? as i64;
            let mm = num(p + 4..p + 6)? as i64;
            let v = hh * 3600 + mm * 60;
            if o.starts_with('+') {
                v
            } else {
                -v
            }
        }
        _ => return Err(err("missing zone (Z or +hh:mm)")),
    };
    let days = dplog_formatters::civil::days_from_civil(y as i64, mo, d);
    let secs = days * 86_400 + h as i64 * 3600 + mi as i64 * 60 + sec as i64 - offset_s;
    if secs < 0 {
        return Err(err("before 1970"));
    }
    Ok(secs as u64 * 1_000_000_000 + frac_ns)
}

/// Parses a lookback: `all`, or an integer with a unit `ns`, `us`, `ms`,
/// `s`, `m`, `h`, `d`.
///
/// Errors: a message naming the accepted forms.
pub fn parse_lookback(s: &str) -> Result<Lookback, String> {
    if s == "all" {
        return Ok(Lookback::All);
    }
    let units = [
        ("ns", 1u64),
        ("us", 1_000),
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
        ("m", 60_000_000_000),
        ("h", 3_600_000_000_000),
        ("d", 86_400_000_000_000),
    ];
    for (u, m) in units {
        if let Some(n) = s.strip_suffix(u) {
            if let Ok(v) = n.parse::<u64>() {
                return v
                    .checked_mul(m)
                    .map(Lookback::Ns)
                    .ok_or_else(|| format!("lookback {s:?} out of range"));
            }
        }
    }
    Err(format!(
        "bad lookback {s:?}: give `all` or an integer with a unit (ns, us, ms, s, m, h, d), e.g. 2d"
    ))
}

/// A condition resolved against one schema.
#[derive(Clone, Debug)]
enum Cond {
    Eq {
        off: usize,
        bytes: Vec<u8>,
    },
    /// A BYTES field whose value (its bytes up to the first NUL) is
    /// `value`.
    Bytes {
        off: usize,
        size: usize,
        value: Vec<u8>,
    },
    Range {
        start: FieldDef,
        end: FieldDef,
        v: u64,
    },
}

/// A field of a state's identity: offset, size, whether it is BYTES
/// (compared by its value, the bytes up to the first NUL).
type IdentField = (usize, usize, bool);

/// A stateful record type's lifecycle, resolved to byte positions.
#[derive(Clone, Debug)]
struct State {
    lifecycle: Lifecycle,
    event: FieldDef,
    keys: Vec<IdentField>,
}

/// The conditions resolved against one schema: `None` when the schema
/// cannot match (it lacks a field a condition names).
#[derive(Clone, Debug)]
struct Resolved {
    conds: Vec<Cond>,
    /// The key index hashes the conditions give: the one of every key
    /// field, or (a per-field index) one per key field given; a block
    /// must be named by each. Empty: the index is not used.
    keys: Vec<u32>,
    /// Stateful: the lifecycle, its event field and the key fields.
    state: Option<State>,
}

impl Resolved {
    /// The rows of a block the conditions can match: the fields they
    /// give exactly (a superset; [`Resolved::matches`] decides).
    fn row_filter(&self) -> format::RowFilter {
        format::RowFilter {
            eq: self
                .conds
                .iter()
                .filter_map(|c| match c {
                    Cond::Eq { off, bytes } => Some((*off, bytes.clone())),
                    _ => None,
                })
                .collect(),
        }
    }

    fn matches(&self, rec: &[u8]) -> bool {
        self.conds.iter().all(|c| match c {
            Cond::Eq { off, bytes } => &rec[*off..*off + bytes.len()] == bytes.as_slice(),
            Cond::Bytes { off, size, value } => {
                dplog_formatters::conv::bytes_field_is(&rec[*off..*off + *size], value)
            }
            Cond::Range { start, end, v } => {
                (start.read_uint(rec)..=end.read_uint(rec)).contains(v)
            }
        })
    }
}

/// The bytes of `value` (as `--where` takes it: a number, an address, an
/// enum name, ...) as field `f` stores it: host-order integers,
/// network-order addresses; for a `Bytes` field the value's bytes without
/// the padding. `ddl --clickhouse --at` turns them into SQL values.
///
/// # Errors
/// Why `value` is no value of `f` (not a number, an address, a name of
/// the enum, too long).
pub fn field_value_bytes(f: &FieldDef, value: &str) -> Result<Vec<u8>, String> {
    value_bytes(f, value)
}

/// The bytes of `value` as field `f` stores it; for a BYTES field, the
/// value's bytes without the padding (see [`Cond::Bytes`]).
fn value_bytes(f: &FieldDef, value: &str) -> Result<Vec<u8>, String> {
    let size = f.size as usize;
    let int = |v: &str| -> Result<u64, String> {
        let not_a_number = || {
            if f.kind == FieldKind::Enum && !f.enum_names.is_empty() {
                format!("not a name of {}: {}", f.name, f.enum_names_hint(v))
            } else {
                format!(
                    "not a number (a {size}-byte {:?} field: give it in decimal, or in hex \
                     after 0x)",
                    f.kind
                )
            }
        };
        let n: u64 = if let Some(h) = v.strip_prefix("0x") {
            u64::from_str_radix(h, 16).map_err(|_| not_a_number())?
        } else {
            v.parse().map_err(|_| not_a_number())?
        };
        if size < 8 && n >> (size * 8) != 0 {
            return Err(format!("{n} does not fit the field's {size} bytes"));
        }
        Ok(n)
    };
    let le = |n: u64| n.to_ne_bytes()[..size].to_vec();
    match f.kind {
        FieldKind::Ipv4 => value
            .parse::<Ipv4Addr>()
            .map(|a| u32::from(a).to_ne_bytes().to_vec())
            .map_err(|_| "not an IPv4 address".into()),
        FieldKind::Ipv6 => value
            .parse::<Ipv6Addr>()
            .map(|a| a.octets().to_vec())
            .map_err(|_| "not an IPv6 address".into()),
        FieldKind::Mac => {
            let p: Vec<u8> = value
                .split([':', '-'])
                .map(|x| u8::from_str_radix(x, 16))
                .collect::<Result<_, _>>()
                .map_err(|_| "not a MAC address".to_string())?;
            if p.len() != 6 {
                return Err("not a MAC address (6 bytes)".into());
            }
            Ok(p)
        }
        FieldKind::Bytes => {
            if value.len() > size {
                return Err(format!(
                    "longer than the field's {size} bytes: no record can hold it"
                ));
            }
            Ok(value.as_bytes().to_vec())
        }
        FieldKind::Protocol => match value.to_ascii_lowercase().as_str() {
            "tcp" => Ok(vec![6]),
            "udp" => Ok(vec![17]),
            "icmp" => Ok(vec![1]),
            v => int(v).map(le),
        },
        FieldKind::Bool => match value {
            "true" => Ok(vec![1]),
            "false" => Ok(vec![0]),
            v => int(v).map(le),
        },
        FieldKind::Enum => match f.enum_value(value) {
            Some(v) => Ok(le(u64::from(v))),
            None => int(value).map(le),
        },
        _ => int(value).map(le),
    }
}

fn resolve(
    s: &Schema,
    index: &[String],
    conds: &[(String, String)],
) -> Result<Option<Resolved>, QueryError> {
    let mut out = Vec::new();
    for (name, value) in conds {
        let bad = |why: String| QueryError::BadValue {
            field: name.clone(),
            value: value.clone(),
            why,
        };
        if let Some((_, f)) = s.field(name) {
            let bytes = value_bytes(f, value).map_err(bad)?;
            out.push(if f.kind == FieldKind::Bytes {
                Cond::Bytes {
                    off: f.offset as usize,
                    size: f.size as usize,
                    value: bytes,
                }
            } else {
                Cond::Eq {
                    off: f.offset as usize,
                    bytes,
                }
            });
            continue;
        }
        let range = (name.ends_with("TransportPort"))
            .then(|| Some((s.field("portRangeStart")?.1, s.field("portRangeEnd")?.1)))
            .flatten();
        match range {
            Some((a, b)) => {
                let v: u64 = value
                    .parse()
                    .ok()
                    .filter(|v| *v <= 65535)
                    .ok_or_else(|| bad("not a port (0 to 65535)".into()))?;
                out.push(Cond::Range {
                    start: a.clone(),
                    end: b.clone(),
                    v,
                });
            }
            None => return Ok(None),
        }
    }
    // The index key, when every key field is given exactly. A BYTES key
    // field never is: the index hashes all of the field's bytes, and
    // records of one value can differ after its first NUL.
    let key_fields = format::index_fields(s, index);
    let per_field = format::index_per_field(index);
    let mut key = Vec::new();
    let mut keys = Vec::new();
    let mut full = !key_fields.is_empty();
    for f in &key_fields {
        match out.iter().find_map(|c| match c {
            Cond::Eq { off, bytes }
                if *off == f.offset as usize && bytes.len() == f.size as usize =>
            {
                Some(bytes)
            }
            _ => None,
        }) {
            Some(b) if per_field => keys.push(format::field_key_hash32(f, b)),
            Some(b) => key.extend_from_slice(b),
            None => full = false,
        }
    }
    if !per_field && full {
        keys.push(key_hash32(&key));
    }
    let state = s.meta().lifecycle.as_ref().map(|l| State {
        lifecycle: l.clone(),
        event: s.fields()[l.field].clone(),
        keys: l
            .keys
            .iter()
            .map(|&i| {
                let f = &s.fields()[i];
                (
                    f.offset as usize,
                    f.size as usize,
                    f.kind == FieldKind::Bytes,
                )
            })
            .collect(),
    });
    Ok(Some(Resolved {
        conds: out,
        keys,
        state,
    }))
}

trait IndexedExt {
    fn is_none_or_has(&self, block: u32) -> bool;
}

impl IndexedExt for Option<&Vec<u32>> {
    fn is_none_or_has(&self, block: u32) -> bool {
        match self {
            None => true,
            Some(v) => v.binary_search(&block).is_ok(),
        }
    }
}

/// Progress of a lookup, for a progress line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Segments of the window done.
    pub segments_done: usize,
    /// Segments in the window.
    pub segments: usize,
    /// Data blocks decoded so far.
    pub blocks_read: u64,
    /// Data blocks the key index (or the record type) ruled out.
    pub blocks_skipped: u64,
    /// Segments of the time window the segment summaries ruled out
    /// (never opened): their entries hold no key tuple the lookup gives.
    pub segments_pruned: usize,
    /// Segments opened to read their blocks (the window's, less those
    /// pruned; not counting the first and last segments of the archive,
    /// opened once by [`Archive::open`] to learn its record types).
    pub segments_opened: usize,
}

/// What a lookup found.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Records output.
    pub found: u64,
    /// Damage met and skipped (file, block, why).
    pub problems: Vec<Problem>,
    /// Damage met in the segment summaries: the segments they would have
    /// ruled out were read instead, so the answer is whole.
    pub summary_problems: Vec<Problem>,
    /// The final progress counts.
    pub progress: Progress,
    /// The lookback used for `--at`, ns (`None`: all).
    pub lookback_ns: Option<u64>,
}

/// The segments of `dir`.
///
/// Errors: [`QueryError::Archive`] for an unreadable directory or one
/// without a segment.
pub fn segments(dir: &Path) -> Result<Vec<SegmentFile>, QueryError> {
    let segs = list_segments(dir).map_err(|e| QueryError::Archive(dir.to_path_buf(), e))?;
    if segs.is_empty() {
        return Err(QueryError::Archive(
            dir.to_path_buf(),
            io::Error::new(
                io::ErrorKind::NotFound,
                "no archive segments (seg-*.dpa) in this directory",
            ),
        ));
    }
    Ok(segs)
}

/// The schemas of segments `probe` (their first schema of each id),
/// with the problems of opening them.
fn probe_schemas(
    files: &[&SegmentFile],
    problems: &mut Vec<Problem>,
) -> (Vec<Schema>, Option<u64>) {
    let mut out: Vec<Schema> = Vec::new();
    let mut life = None;
    // A few at a time: their headers and footers asked for together,
    // with a bounded number of files open.
    let opened = files.chunks(16).flat_map(|c| {
        let paths: Vec<&Path> = c.iter().map(|sf| sf.path.as_path()).collect();
        c.iter().zip(Segment::open_all(&paths))
    });
    for (sf, seg) in opened {
        match seg {
            Ok(seg) => {
                life = life.or(seg.max_lifetime_ms);
                for s in seg.schemas {
                    if !out
                        .iter()
                        .any(|k| k.id() == s.id() && k.fields() == s.fields())
                    {
                        out.push(s);
                    }
                }
            }
            Err(e) => problems.push(Problem {
                path: sf.path.clone(),
                block: None,
                offset: 0,
                reason: format!("{e}; segment skipped"),
            }),
        }
    }
    (out, life)
}

/// The schemas the archive's records have (as a sample: its first and
/// last segments), each with the metadata its writer declared (an
/// output encoder formats with it).
///
/// Errors: as [`segments`].
pub fn archive_schemas(dir: &Path) -> Result<Vec<Schema>, QueryError> {
    Ok(Archive::open(dir)?.schemas)
}

/// An archive directory as a lookup starts from: its segments (from the
/// listing) and the record types of its first and last segments (their
/// schema blocks and footers), read once by [`Archive::open`], for the
/// caller ([`Archive::schemas`]: an output encoder's) and for each
/// [`Archive::run`] alike.
///
/// # Examples
///
/// ```no_run
/// use dplog_query::{Archive, Lookback, Mode, Query};
/// let a = Archive::open("archive".as_ref())?;
/// println!("{} record types", a.schemas().len());
/// let q = Query {
///     mode: Mode::At(1_767_225_600_000_000_000),
///     conds: vec![("postNATSourceIPv4Address".into(), "198.51.100.7".into())],
///     lookback: Lookback::Default,
/// };
/// let o = a.run(&q, &mut |_schema, _rec, _cal| {}, &mut |_| {})?;
/// println!("{} found", o.found);
/// # Ok::<(), dplog_query::QueryError>(())
/// ```
#[derive(Debug)]
pub struct Archive {
    dir: PathBuf,
    segs: Vec<SegmentFile>,
    schemas: Vec<Schema>,
    life_ms: Option<u64>,
    /// The probed segments that could not be opened.
    damaged: Vec<Problem>,
}

impl Archive {
    /// Lists `dir`'s segments and reads the schemas of the first and the
    /// last (a segment that cannot be opened is reported by the lookups
    /// that meet it).
    ///
    /// Errors: as [`segments`].
    pub fn open(dir: &Path) -> Result<Archive, QueryError> {
        let segs = segments(dir)?;
        let probe: Vec<&SegmentFile> = [segs.first(), segs.last()]
            .into_iter()
            .flatten()
            .take(if segs.len() > 1 { 2 } else { 1 })
            .collect();
        let mut damaged = Vec::new();
        let (schemas, life_ms) = probe_schemas(&probe, &mut damaged);
        Ok(Archive {
            dir: dir.to_path_buf(),
            segs,
            schemas,
            life_ms,
            damaged,
        })
    }

    /// The record types of the archive's first and last segments (the
    /// first schema of each id and layout).
    pub fn schemas(&self) -> &[Schema] {
        &self.schemas
    }
}

/// Wall time `t_ns` (ns since the epoch) as a tick count of the TSC the
/// archive's records were stamped with, by the last calibration its
/// newest segment holds: for a record type whose event time is
/// TSC-typed, `--at` and `--between` compare the given time with raw
/// ticks, and this is the tick count to give them. `None` when the
/// archive holds no calibration (format version 1, or no TSC field) or
/// `t_ns` falls before tick 0 by that calibration.
pub fn wall_to_ticks(dir: &Path, t_ns: u64) -> Option<u64> {
    let segs = segments(dir).ok()?;
    let seg = Segment::open(&segs.last()?.path).ok()?;
    let cal = seg
        .read_calibration(seg.calibration_block(seg.blocks.len())?)
        .ok()?;
    let ticks = i128::from(cal.tsc0)
        + (i128::from(t_ns) - i128::from(cal.ns0)) * i128::from(cal.hz) / 1_000_000_000;
    u64::try_from(ticks).ok()
}

/// One matching record of an `--at` window, kept for pairing.
struct Held {
    schema: usize,
    rec: Vec<u8>,
    time: u64,
    /// The calibration of its TSC fields.
    cal: TscCalibration,
}

/// Runs `q` over the archive in `dir`: `emit(schema, record,
/// calibration)` for each answer (for `--at`, the opening records live at
/// T; for `--between`, every match; both in event-time order), with the
/// TSC calibration the archive kept for the record (set it on the output
/// formatter before formatting the record; the identity for an archive
/// of format version 1, which kept none); `progress` after each segment.
///
/// `schema` is the record's own, as its segment declares it (segments of
/// runs whose record types had other ids may give one id to different
/// layouts), and one reference per layout for the whole run: records of
/// one layout (id, name and fields) get the same `&Schema`, at the same
/// address, from every segment, so a caller may key what it derives from
/// a schema by its address (`std::ptr::eq`) while `run` runs.
///
/// Errors: [`QueryError`] for an unknown field, a bad value or an
/// unreadable archive, and [`QueryError::NoRecordTypes`] when conditions
/// are given and no readable segment declares a record type (each
/// damaged segment in it); damage inside an archive that is read is not
/// an error but reported in [`Outcome::problems`].
pub fn run(
    dir: &Path,
    q: &Query,
    emit: &mut dyn FnMut(&Schema, &[u8], TscCalibration),
    progress: &mut dyn FnMut(&Progress),
) -> Result<Outcome, QueryError> {
    Archive::open(dir)?.run(q, emit, progress)
}

impl Archive {
    /// [`run`] over this archive, without listing it and reading its
    /// first and last segments again.
    ///
    /// Errors: as [`run`].
    pub fn run(
        &self,
        q: &Query,
        emit: &mut dyn FnMut(&Schema, &[u8], TscCalibration),
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<Outcome, QueryError> {
        run_on(self, q, emit, progress)
    }
}

fn run_on(
    a: &Archive,
    q: &Query,
    emit: &mut dyn FnMut(&Schema, &[u8], TscCalibration),
    progress: &mut dyn FnMut(&Progress),
) -> Result<Outcome, QueryError> {
    let (dir, segs) = (a.dir.as_path(), &a.segs[..]);
    let mut outcome = Outcome::default();
    // Fields known to the archive: its first and last segments' schemas.
    // Segments that cannot be opened are reported with an error below;
    // a query that runs meets (and reports) them again in its window.
    let mut damaged = a.damaged.clone();
    let (mut known, life_ms) = (a.schemas.clone(), a.life_ms);
    let has = |known: &[Schema], name: &str| {
        known.iter().any(|s| {
            s.field(name).is_some()
                || (name.ends_with("TransportPort") && s.field("portRangeStart").is_some())
        })
    };
    if q.conds.iter().any(|(n, _)| !has(&known, n)) {
        // Not in the first and last segments: every segment's schemas
        // before calling the field unknown.
        let all: Vec<&SegmentFile> = segs.iter().collect();
        damaged.clear();
        known = probe_schemas(&all, &mut damaged).0;
        if known.is_empty() {
            // Nothing to match a field against: the damage (if any) is
            // the answer, not the field.
            return Err(QueryError::NoRecordTypes {
                dir: dir.to_path_buf(),
                segments: segs.len(),
                problems: damaged,
            });
        }
    }
    for (name, _) in &q.conds {
        if !has(&known, name) {
            let mut names: Vec<String> = known
                .iter()
                .flat_map(|s| s.fields().iter().map(|f| f.name.to_string()))
                .collect();
            names.sort();
            names.dedup();
            return Err(QueryError::UnknownField {
                field: name.clone(),
                known: names,
                damaged,
            });
        }
    }
    // --at needs a record type that declares a lifecycle: every
    // segment's schemas before saying that none does.
    let stateful = |known: &[Schema]| known.iter().any(|s| s.meta().lifecycle.is_some());
    if matches!(q.mode, Mode::At(_)) && !known.is_empty() && !stateful(&known) {
        let all: Vec<&SegmentFile> = segs.iter().collect();
        let mut all_damaged = Vec::new();
        let every = probe_schemas(&all, &mut all_damaged).0;
        if !every.is_empty() && !stateful(&every) {
            let mut types: Vec<String> = every.iter().map(|s| s.name().to_string()).collect();
            types.dedup();
            return Err(QueryError::NoLifecycle {
                dir: dir.to_path_buf(),
                types,
                damaged: all_damaged,
            });
        }
    }
    // Values are checked once against every known schema, before output.
    for s in &known {
        resolve(s, &[], &q.conds)?;
    }
    let (from, to) = match q.mode {
        Mode::Between(a, b) => (a, b),
        Mode::At(t) => {
            let lb = match q.lookback {
                Lookback::All => None,
                Lookback::Ns(n) => Some(n),
                Lookback::Default => Some(life_ms.unwrap_or(86_400_000).saturating_mul(1_000_000)),
            };
            outcome.lookback_ns = lb;
            (lb.map_or(0, |l| t.saturating_sub(l)), t)
        }
    };
    let mut summaries = Summaries::new(dir);
    let in_range = segs.iter().filter(|s| s.overlaps(from, to)).count();
    let window: Vec<SegmentFile> = segs
        .iter()
        .filter(|s| s.overlaps(from, to))
        .cloned()
        .collect();
    let window = prune(&mut summaries, window, &known, q);
    let mut prog = Progress {
        segments: window.len(),
        segments_pruned: in_range - window.len(),
        ..Default::default()
    };
    outcome.summary_problems.append(&mut summaries.problems);
    // The schemas met (by layout), each boxed so that it stays at one
    // address for the whole run (what `emit` is given); --at: the
    // matching records held.
    let mut schemas: Vec<(Box<Schema>, Option<Resolved>)> = Vec::new();
    let mut held: Vec<Held> = Vec::new();
    let mut failed: Option<QueryError> = None;
    let mut problems = Vec::new();
    for_each_group(&window, from, to, &mut problems, &mut |group, problems| {
        // The conditions resolved for each schema of each segment (key
        // hashes depend on the segment's index fields).
        let mut res: Vec<HashMap<u16, (usize, Option<Resolved>)>> = Vec::new();
        // Per segment and schema: the blocks the key index names.
        let mut indexed: Vec<HashMap<u16, Vec<u32>>> = Vec::new();
        for seg in &group {
            let mut blocks = HashMap::new();
            let mut m = HashMap::new();
            for s in &seg.schemas {
                let r = match resolve(s, &seg.index_fields, &q.conds) {
                    Ok(r) => r,
                    Err(e) => {
                        failed = Some(e);
                        return false;
                    }
                };
                let k = match schemas.iter().position(|(k, _)| {
                    k.id() == s.id() && k.fields() == s.fields() && k.name() == s.name()
                }) {
                    Some(k) => k,
                    None => {
                        schemas.push((Box::new(s.clone()), r.clone()));
                        schemas.len() - 1
                    }
                };
                // The blocks named by every hash (one page read each,
                // asked for together); none when the segment has no
                // index or a page is damaged.
                if let Some(r) = &r {
                    seg.advise_keys(&r.keys);
                }
                let mut named: Option<Vec<u32>> = None;
                for &h in r.as_ref().map_or(&[][..], |r| &r.keys[..]) {
                    match seg.blocks_with_key(h) {
                        Ok(Some(v)) => {
                            named = Some(match named {
                                None => v,
                                Some(n) => n
                                    .into_iter()
                                    .filter(|b| v.binary_search(b).is_ok())
                                    .collect(),
                            });
                        }
                        Ok(None) => {
                            named = None;
                            break;
                        }
                        Err(e) => {
                            problems.push(Problem {
                                path: seg.path.clone(),
                                block: None,
                                offset: 0,
                                reason: format!("{e}; its blocks are read without the index"),
                            });
                            named = None;
                            break;
                        }
                    }
                }
                if named.is_none() {
                    // A keyed segment (version 4): the blocks whose key
                    // range holds the key's first fields given.
                    named = r
                        .as_ref()
                        .and_then(|r| seg.blocks_in_key_range(s, &r.row_filter()));
                }
                if let Some(v) = named {
                    // Their starts asked for together (cold: one wait).
                    seg.advise_blocks(&v);
                    blocks.insert(s.id(), v);
                }
                m.insert(s.id(), (k, r));
            }
            res.push(m);
            indexed.push(blocks);
        }
        let mut keep = |si: usize, bi: usize| {
            let b = &group[si].blocks[bi];
            let ok = match res[si].get(&b.schema_id) {
                None => true, // undeclared schema: read_block reports it
                Some((_, None)) => false,
                Some((_, Some(r))) => {
                    if matches!(q.mode, Mode::At(_)) && r.state.is_none() {
                        false
                    } else {
                        indexed[si].get(&b.schema_id).is_none_or_has(bi as u32)
                    }
                }
            };
            if ok {
                prog.blocks_read += 1;
            } else {
                prog.blocks_skipped += 1;
            }
            ok
        };
        let mut f = |si: usize, s: &Schema, rec: &[u8], cal: TscCalibration| -> bool {
            let Some((k, Some(r))) = res[si].get(&s.id()) else {
                return true;
            };
            if !r.matches(rec) {
                return true;
            }
            match q.mode {
                Mode::Between(..) => {
                    emit(&schemas[*k].0, rec, cal);
                    outcome.found += 1;
                }
                Mode::At(_) => held.push(Held {
                    schema: *k,
                    rec: rec.to_vec(),
                    time: format::event_time(s, rec).unwrap_or(0),
                    cal,
                }),
            }
            true
        };
        // Only the rows the conditions can match are decoded.
        let mut rows = |si: usize, bi: usize| match res[si].get(&group[si].blocks[bi].schema_id) {
            Some((_, Some(r))) => Some(r.row_filter()),
            _ => None,
        };
        merge_rows(&group, from, to, &mut keep, &mut rows, problems, &mut f);
        prog.segments_done += group.len();
        prog.segments_opened += group.len();
        progress(&prog);
        true
    });
    outcome.problems.extend(problems);
    if let Some(e) = failed {
        return Err(e);
    }
    if let Mode::At(t) = q.mode {
        for (s, rec, cal) in live_at(t, &schemas, &held) {
            emit(s, rec, cal);
            outcome.found += 1;
        }
    }
    outcome.progress = prog;
    Ok(outcome)
}

/// The summary entry of sealed segment `sf` and the tuple hashes to ask
/// it, when it can show that the segment holds no record `q` can match:
/// every record type of the segment either cannot match (it lacks a field
/// `q` names; for `--at`, it has no lifecycle) or is summarized with the
/// tuple layout of a known schema of its id whose tuple fields `q` all
/// gives exactly (one hash each). `None` (the segment is opened): no
/// entry, a type no known schema matches, or one `q` does not give the
/// whole tuple of.
fn summary_probe(
    summaries: &mut Summaries,
    sf: &SegmentFile,
    known: &[Schema],
    q: &Query,
) -> Option<(EntryRef, Vec<u64>)> {
    if q.conds.is_empty() {
        return None;
    }
    let r = summaries.entry(sf)?;
    let mut hashes = Vec::new();
    for ty in &summaries.get(r).types {
        let cands: Vec<&Schema> = known.iter().filter(|s| s.id() == ty.schema_id).collect();
        if cands.is_empty() {
            return None;
        }
        for s in cands {
            let Ok(Some(res)) = resolve(s, &[], &q.conds) else {
                // A bad value was refused before; no match: nothing here.
                continue;
            };
            if matches!(q.mode, Mode::At(_)) && res.state.is_none() {
                continue;
            }
            // The tuple fields the writer named, as this schema has them.
            let fields: Vec<&FieldDef> = ty
                .fields
                .iter()
                .filter_map(|n| s.field(n).map(|(_, f)| f))
                .collect();
            if ty.fields.is_empty()
                || fields.len() != ty.fields.len()
                || format::tuple_layout(&fields) != ty.layout
            {
                return None;
            }
            let mut tuple = Vec::new();
            for f in &fields {
                let given = res.conds.iter().find_map(|c| match c {
                    Cond::Eq { off, bytes }
                        if *off == f.offset as usize && bytes.len() == f.size as usize =>
                    {
                        Some(bytes)
                    }
                    _ => None,
                });
                tuple.extend_from_slice(given?);
            }
            hashes.push(format::tuple_hash(s.id(), &tuple));
        }
    }
    Some((r, hashes))
}

/// The segments of `window` the summaries do not rule out (see
/// [`summary_probe`]): a segment is ruled out when its bucket of every
/// hash asked holds no fingerprint of it. The buckets of every segment
/// are advised to the kernel before any is read. A bucket that cannot be
/// checked is reported and its segment kept.
fn prune(
    summaries: &mut Summaries,
    window: Vec<SegmentFile>,
    known: &[Schema],
    q: &Query,
) -> Vec<SegmentFile> {
    let probes: Vec<Option<(EntryRef, Vec<u64>)>> = window
        .iter()
        .map(|sf| summary_probe(summaries, sf, known, q))
        .collect();
    // Cold, each step's reads are asked for together: the buckets'
    // table offsets of every segment, then their buckets. The offsets
    // are read once, for the advice and the check.
    for (r, hs) in probes.iter().flatten() {
        for &h in hs {
            summaries.advise(*r, h);
        }
    }
    // Per segment, each hash with where its bucket lies (or why not).
    type Buckets = Vec<(u64, io::Result<BucketAt>)>;
    let buckets: Vec<Option<(EntryRef, Buckets)>> = probes
        .into_iter()
        .map(|p| {
            p.map(|(r, hs)| {
                (
                    r,
                    hs.into_iter()
                        .map(|h| (h, summaries.bucket(r, h)))
                        .collect(),
                )
            })
        })
        .collect();
    for (r, bs) in buckets.iter().flatten() {
        for at in bs.iter().filter_map(|(_, b)| b.as_ref().ok()) {
            summaries.advise_bucket(*r, at);
        }
    }
    let mut out = Vec::with_capacity(window.len());
    for (sf, p) in window.into_iter().zip(buckets) {
        let keep = match p {
            None => true,
            Some((r, bs)) => bs.into_iter().any(|(h, at)| {
                match at.and_then(|at| summaries.may_hold_at(r, h, at)) {
                    Ok(may) => may,
                    Err(e) => {
                        summaries.bucket_problem(r, &e);
                        true
                    }
                }
            }),
        };
        if keep {
            out.push(sf);
        }
    }
    out
}

/// The held opens live at `t`, in the order written.
fn live_at<'a>(
    t: u64,
    schemas: &'a [(Box<Schema>, Option<Resolved>)],
    held: &'a [Held],
) -> Vec<(&'a Schema, &'a [u8], TscCalibration)> {
    // Open records by (schema, identity): indexes into held, newest last.
    let mut open: HashMap<(usize, Vec<u8>), Vec<usize>> = HashMap::new();
    let mut live = vec![false; held.len()];
    for (i, h) in held.iter().enumerate() {
        let Some(Some(r)) = schemas.get(h.schema).map(|(_, r)| r) else {
            continue;
        };
        let Some(st) = &r.state else {
            continue;
        };
        let e = st.event.read_uint(&h.rec);
        let mut id = Vec::with_capacity(32);
        for &(o, n, bytes) in &st.keys {
            let f = &h.rec[o..o + n];
            if bytes {
                // The value, NUL-padded: what follows its NUL is not part
                // of the identity.
                let v = dplog_formatters::conv::bytes_value(f);
                id.extend_from_slice(v);
                id.resize(id.len() + n - v.len(), 0);
            } else {
                id.extend_from_slice(f);
            }
        }
        if st.lifecycle.is_open(e) && h.time <= t {
            live[i] = true;
            open.entry((h.schema, id)).or_default().push(i);
        } else if st.lifecycle.is_close(e) && h.time < t {
            if let Some(j) = open.get_mut(&(h.schema, id)).and_then(Vec::pop) {
                live[j] = false;
            }
        }
    }
    held.iter()
        .zip(live)
        .filter(|(_, l)| *l)
        .map(|(h, _)| (&*schemas[h.schema].0, h.rec.as_slice(), h.cal))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_in_every_form() {
        let t = 1_367_526_036_616_804_000u64;
        assert_eq!(parse_time("2013-05-02T20:20:36.616804Z").unwrap(), t);
        assert_eq!(parse_time("2013-05-02 22:20:36.616804+02:00").unwrap(), t);
        assert_eq!(parse_time("1367526036616804000ns").unwrap(), t);
        assert_eq!(parse_time("1367526036616804us").unwrap(), t);
        assert_eq!(
            parse_time("1367526036616").unwrap(),
            1_367_526_036_616_000_000
        );
        assert_eq!(
            parse_time("1367526036s").unwrap(),
            1_367_526_036_000_000_000
        );
        assert_eq!(parse_time("1970-01-01T00:00:00Z").unwrap(), 0);
        assert_eq!(
            parse_time("2000-03-01T00:00:00Z").unwrap(),
            951_868_800 * 1_000_000_000
        );
        for bad in [
            "yesterday",
            "2013-05-02",
            "2013-13-02T00:00:00Z",
            "2013-05-02T20:20:36",
            "12x",
            "2013-05-02T20:20:36.Z",
        ] {
            let e = parse_time(bad).unwrap_err();
            assert!(e.contains("unparsable time"), "{bad}: {e}");
        }
    }

    #[test]
    fn lookbacks_parse() {
        assert_eq!(parse_lookback("all").unwrap(), Lookback::All);
        assert_eq!(
            parse_lookback("2d").unwrap(),
            Lookback::Ns(2 * 86_400_000_000_000)
        );
        assert_eq!(parse_lookback("90s").unwrap(), Lookback::Ns(90_000_000_000));
        assert!(parse_lookback("2 days").is_err());
    }

    #[test]
    fn values_take_their_field_layout() {
        let f = FieldDef::new("a", 0, 4, FieldKind::Ipv4, 0);
        assert_eq!(
            value_bytes(&f, "10.0.0.1").unwrap(),
            0x0A00_0001u32.to_ne_bytes()
        );
        assert!(value_bytes(&f, "10.0.0.256").is_err());
        let p = FieldDef::new("p", 0, 2, FieldKind::Port, 0);
        assert_eq!(value_bytes(&p, "1024").unwrap(), 1024u16.to_ne_bytes());
        assert!(value_bytes(&p, "70000")
            .unwrap_err()
            .contains("does not fit"));
    }
}
