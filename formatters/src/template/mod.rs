//! Compiled templates: a table of operations built once from a schema and
//! either a user template string or a format's layout, walked per record.
//!
//! Template syntax: literal text, with `{field}` or `{field:converter}`
//! placeholders; `{{` and `}}` stand for literal braces. Example:
//!
//! ```text
//! {observationTimeMilliseconds:rfc3339} NAT44 {natEvent:name} {sourceIPv4Address}:{sourceTransportPort} -> {postNATSourceIPv4Address}:{postNAPTSourceTransportPort}
//! ```
//!
//! Converters (the first listed for a kind is its default):
//!
//! | kind                        | converters                                         |
//! |-----------------------------|----------------------------------------------------|
//! | u8/u16/u32/u64, port, protocol | `dec`, `hex`                                    |
//! | bool                        | `bool` (`true`/`false`), `dec`                     |
//! | enum                        | `dec`, `name`, `hex`                               |
//! | ipv4                        | `ipv4` (dotted quad), `dec`, `hex`                 |
//! | ipv6                        | `ipv6` (RFC 5952)                                  |
//! | mac                         | `mac` (`aa:bb:cc:dd:ee:ff`)                        |
//! | ns timestamp                | `unix_ms`, `unix`/`unix_s`, `unix_us`, `unix_ns`, `rfc3339`, `rfc3339_s`, `rfc3339_ms`, `rfc3339_us`, `rfc3339_ns`, `rfc3164`, `dec`, `hex` |
//! | tsc timestamp               | every ns-timestamp converter (converted with the program's [`TscCalibration`]; default as for ns), `dec` and `hex` (raw ticks) |
//! | bytes                       | `str` (escaped for the output syntax), `hex`, `base64` |
//!
//! Time precision ([`Options::time`], `[format] time_precision`): a
//! timestamp field without a converter prints as a Unix time integer in
//! that unit (`unix_s`, `unix_ms`, `unix_us` or `unix_ns`; `unix_ms`
//! when it is not set), and `rfc3339` prints that many fractional digits
//! (0, 3, 6 or 9; 3 when it is not set). Every other converter names its
//! own precision and keeps it.
//!
//! Byte strings ([`Options::bytes`], `[format] bytes`, and per field
//! [`Program::set_bytes_encoding`]): a BYTES field without a converter
//! prints as `str` (the default: its bytes up to the first NUL, escaped,
//! see [`Escape`]), `hex` (two lower-case hex digits per byte) or
//! `base64` (RFC 4648 section 4, with padding). `hex` and `base64` carry
//! every byte of the field, its NULs and the bytes after them included
//! (the whole fixed-size field), and need no escaping: their alphabets
//! hold no character any output syntax escapes.
//!
//! A TSC timestamp field printed as time is converted with the calibration
//! of [`Options::tsc`] and, once the consumer passes its own
//! (`Formatter::tsc_calibration`, about once a second), with that one
//! ([`Program::set_tsc_calibration`]). Until then the conversion is
//! [`TscCalibration::IDENTITY`]: without an invariant TSC the producer's
//! `now_ticks` are already nanoseconds and the consumer passes nothing.
//!
//! Fields of the element a [`Renumber`] names print renumbered (e.g. the
//! NAT schema's legacy profile prints natEvent 4/5 as 1/2).
//!
//! Compiling checks everything: an unknown field, an unknown converter or
//! one that does not suit the field's kind, an unclosed `{` or a stray `}`
//! is a [`TemplateError`] with the 1-based column. The per-record loop
//! ([`Program::run`]) then only walks the table.

use std::fmt;

use dplog_core::schema::{read_uint, FieldDef, FieldKind, Schema};

use crate::conv::{
    push_base64, push_escaped, push_hex, push_hex_bytes, push_ipv6, push_mac, Escape, Rfc3164Cache,
    Rfc3339Cache, TscCalibration,
};
use crate::raw;

mod compile;
mod converters;
mod run;
#[cfg(test)]
mod tests;

pub use converters::Conv;

/// Prints (and exports) some values of one information element as others:
/// a numbering profile, e.g. the NAT schema's legacy natEvent numbers
/// (4→1, 5→2). Applies to every integer field with element id `ie_id`,
/// in the text layouts and in IPFIX; records keep their own numbers, and
/// name converters and conditions see the recorded value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Renumber {
    /// The IANA element id of the fields renumbered.
    pub ie_id: u16,
    pairs: [(u8, u8); 4],
    len: u8,
}

impl Renumber {
    /// Renumbers `from` to `to` for each pair (at most 4 pairs; values
    /// 0..=255). Panics at compile time (in const use) or at run time
    /// beyond 4 pairs.
    pub const fn new(ie_id: u16, pairs: &[(u8, u8)]) -> Self {
        assert!(pairs.len() <= 4, "at most 4 renumbered values");
        let mut p = [(0u8, 0u8); 4];
        let mut i = 0;
        while i < pairs.len() {
            p[i] = pairs[i];
            i += 1;
        }
        Self {
            ie_id,
            pairs: p,
            len: pairs.len() as u8,
        }
    }

    /// The number printed for recorded value `v`.
    #[inline(always)]
    pub fn map(&self, v: u64) -> u64 {
        let mut i = 0;
        while i < self.len as usize {
            if self.pairs[i].0 as u64 == v {
                return self.pairs[i].1 as u64;
            }
            i += 1;
        }
        v
    }
}

/// The precision times are printed (and exported) with: whole seconds,
/// milliseconds, microseconds or nanoseconds (`[format] time_precision =
/// "s" | "ms" | "us" | "ns"`).
///
/// Times are truncated to it, never rounded (a record's second, and so
/// its date, stays its own). What each format does with it is said at
/// [`Options::time`].
///
/// # Examples
///
/// A user record (an 8-byte header, a nanosecond time, an 8-byte name)
/// in JSON with nanoseconds and its name in hex, every byte of it:
///
/// ```
/// use dplog_core::schema::{FieldDef, FieldKind, Schema};
/// use dplog_formatters::{BytesEncoding, Format, FormatSpec, TimePrecision};
///
/// let s = Schema::new(
///     500,
///     "tunnelUp",
///     24,
///     vec![
///         FieldDef::new("eventTime", 8, 8, FieldKind::NsTimestamp, 0),
///         FieldDef::new("name", 16, 8, FieldKind::Bytes, 0),
///     ],
/// )
/// .unwrap();
/// let spec = FormatSpec {
///     kind: Format::Json,
///     time_precision: Some(TimePrecision::Ns),
///     bytes: BytesEncoding::Hex,
///     ..Default::default()
/// };
/// let mut enc = spec.encoder(&[&s]).unwrap();
/// let mut rec = [0u8; 24];
/// rec[0..2].copy_from_slice(&24u16.to_ne_bytes());
/// rec[2..4].copy_from_slice(&500u16.to_ne_bytes());
/// rec[8..16].copy_from_slice(&1_767_225_600_123_456_789u64.to_ne_bytes());
/// rec[16..24].copy_from_slice(b"gre\0\xff\n\"x");
/// let mut out = Vec::new();
/// assert!(enc.push(&rec, &mut out));
/// assert_eq!(
///     String::from_utf8(out).unwrap(),
///     "{\"timestamp\":\"2026-01-01T00:00:00.123456789Z\",\
///      \"eventTime\":1767225600123456789,\"name\":\"67726500ff0a2278\"}\n"
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum TimePrecision {
    /// `s`: whole seconds.
    S,
    /// `ms`: milliseconds.
    Ms,
    /// `us`: microseconds.
    Us,
    /// `ns`: nanoseconds.
    Ns,
}

impl TimePrecision {
    /// Every precision with its name.
    pub const ALL: [(TimePrecision, &'static str); 4] = [
        (TimePrecision::S, "s"),
        (TimePrecision::Ms, "ms"),
        (TimePrecision::Us, "us"),
        (TimePrecision::Ns, "ns"),
    ];

    /// Fractional digits of a second: 0, 3, 6 or 9.
    pub const fn digits(self) -> u8 {
        match self {
            TimePrecision::S => 0,
            TimePrecision::Ms => 3,
            TimePrecision::Us => 6,
            TimePrecision::Ns => 9,
        }
    }

    /// Nanoseconds per unit: 10^9, 10^6, 10^3 or 1.
    pub const fn ns_per_unit(self) -> u64 {
        match self {
            TimePrecision::S => 1_000_000_000,
            TimePrecision::Ms => 1_000_000,
            TimePrecision::Us => 1_000,
            TimePrecision::Ns => 1,
        }
    }

    /// The name (`s`, `ms`, `us`, `ns`).
    pub fn name(self) -> &'static str {
        TimePrecision::ALL
            .iter()
            .find(|(p, _)| *p == self)
            .map_or("ms", |(_, n)| n)
    }
}

impl core::str::FromStr for TimePrecision {
    type Err = String;
    /// Parses `s`, `ms`, `us` or `ns`; the error lists them.
    fn from_str(s: &str) -> Result<Self, String> {
        TimePrecision::ALL
            .iter()
            .find(|(_, n)| *n == s)
            .map(|(p, _)| *p)
            .ok_or_else(|| format!("unknown time precision {s:?}; known: s, ms, us, ns"))
    }
}

/// How a BYTES field is rendered in the line formats (`[format] bytes =
/// "text" | "hex" | "base64"`, and per field `[format.bytes_fields]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum BytesEncoding {
    /// `text` (default): the bytes up to the first NUL (a byte string is
    /// NUL-padded; the rest is not part of the value), escaped for the
    /// output syntax ([`Escape`]). Lossless except that nothing after
    /// the first NUL is shown and, in JSON, invalid UTF-8 becomes U+FFFD.
    #[default]
    Text,
    /// `hex`: every byte of the field (NULs and what follows them
    /// included) as two lower-case hex digits.
    Hex,
    /// `base64`: every byte of the field as RFC 4648 section 4 base64
    /// (standard alphabet, `=` padding).
    Base64,
}

impl BytesEncoding {
    /// Every encoding with its name.
    pub const ALL: [(BytesEncoding, &'static str); 3] = [
        (BytesEncoding::Text, "text"),
        (BytesEncoding::Hex, "hex"),
        (BytesEncoding::Base64, "base64"),
    ];

    /// The name (`text`, `hex`, `base64`).
    pub fn name(self) -> &'static str {
        BytesEncoding::ALL
            .iter()
            .find(|(e, _)| *e == self)
            .map_or("text", |(_, n)| n)
    }
}

impl core::str::FromStr for BytesEncoding {
    type Err = String;
    /// Parses `text`, `hex` or `base64`; the error lists them.
    fn from_str(s: &str) -> Result<Self, String> {
        BytesEncoding::ALL
            .iter()
            .find(|(_, n)| *n == s)
            .map(|(e, _)| *e)
            .ok_or_else(|| format!("unknown bytes encoding {s:?}; known: text, hex, base64"))
    }
}

/// Settings that apply to every compiled template.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Value renumbering of one element (a numbering profile); `None`:
    /// values as recorded.
    pub renumber: Option<Renumber>,
    /// TSC-to-wall-time calibration used until the consumer passes one
    /// (`Formatter::tsc_calibration`); `None` starts with
    /// [`TscCalibration::IDENTITY`].
    pub tsc: Option<TscCalibration>,
    /// Time precision; `None` (default) keeps each format's own:
    ///
    /// | format | `None` | `Some(p)` |
    /// |---|---|---|
    /// | text, JSON, CSV: lead time (RFC 3339) | microseconds | `p` digits |
    /// | RFC 5424 TIMESTAMP | microseconds | `p` digits, at most 6 (TIME-SECFRAC, RFC 5424 section 6.2.3): `ns` prints microseconds |
    /// | RFC 3164 TIMESTAMP | whole seconds | whole seconds (the format has no fraction) |
    /// | a timestamp field's value (every line format) | Unix ms integer | Unix integer in `p` |
    /// | templates: `{t}`, `{t:rfc3339}` | `unix_ms`, 3 digits | `p` |
    /// | JSON and CSV drop reports' `timestamp` | nanoseconds | `p` digits |
    /// | IPFIX | see [`crate::ipfix`] | see [`crate::ipfix`] |
    /// | binary | raw nanoseconds (ticks) | unchanged |
    pub time: Option<TimePrecision>,
    /// How BYTES fields without a converter print in the line formats
    /// (text, JSON, CSV, syslog); per-field overrides:
    /// [`Program::set_bytes_encoding`]. IPFIX and binary always carry the
    /// field's raw bytes.
    pub bytes: BytesEncoding,
}

/// A template that could not be compiled: what and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateError {
    /// 1-based column (in characters) of the offending placeholder or brace;
    /// 0 when the error is not tied to a template position.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.column > 0 {
            write!(
                f,
                "template error at column {}: {}",
                self.column, self.message
            )
        } else {
            write!(f, "template error: {}", self.message)
        }
    }
}

impl std::error::Error for TemplateError {}

/// One operation of a compiled template.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// Copy `lits[start..start+len]`.
    Lit {
        start: u32,
        len: u32,
    },
    Dec {
        off: u32,
        size: u8,
    },
    Hex {
        off: u32,
        size: u8,
    },
    /// A renumbered field (see [`Renumber`]) as a decimal integer.
    Event {
        off: u32,
        size: u8,
    },
    Bool {
        off: u32,
    },
    Ipv4 {
        off: u32,
    },
    Ipv6 {
        off: u32,
    },
    Mac {
        off: u32,
    },
    Rfc3339 {
        off: u32,
        cache: u16,
        digits: u8,
        tsc: bool,
    },
    Rfc3164 {
        off: u32,
        cache: u16,
        tsc: bool,
    },
    Unix {
        off: u32,
        div: u32,
        tsc: bool,
    },
    Name {
        off: u32,
        size: u8,
        table: u16,
        event: bool,
    },
    Str {
        off: u32,
        len: u16,
        esc: Escape,
    },
    /// Every byte of a byte string, hex or base64 (never `Text`).
    Bytes {
        off: u32,
        len: u16,
        enc: BytesEncoding,
    },
    /// Superinstruction built by `Program::build` (never in `ops`): IPv4
    /// address at `off`, one separator byte, decimal integer at `off2`
    /// (the `{addr}:{port}` of every 5-tuple).
    Ipv4Dec {
        off: u32,
        sep: u8,
        off2: u32,
        size2: u8,
    },
    /// Superinstruction (steps only): `Ipv4Dec` with a 2-byte port read
    /// as one exact `u16` load.
    Ipv4Port {
        off: u32,
        sep: u8,
        off2: u32,
    },
    /// RFC 3339 with milliseconds of an ns (not TSC) field (steps only):
    /// `Rfc3339 { digits: 3, tsc: false }` with the digit count constant.
    Rfc3339Ms {
        off: u32,
        cache: u16,
    },
    /// Decimal integer of exactly 1, 2, 4 or 8 bytes (steps only): one
    /// exact load, no shift or mask.
    Dec1 {
        off: u32,
    },
    Dec2 {
        off: u32,
    },
    Dec4 {
        off: u32,
    },
    Dec8 {
        off: u32,
    },
    /// Skip the next `skip` ops unless the field equals `value`.
    SkipUnless {
        off: u32,
        size: u8,
        value: u32,
        skip: u16,
    },
}

/// Escaped enum names for values 0..=255 (`(start, len)` in `lits`, len 0 =
/// no name) and a sparse list for larger values.
#[derive(Clone, Debug)]
struct NameTable {
    dense: Box<[(u32, u32); 256]>,
    sparse: Vec<(u32, u32, u32)>,
}

/// Longest literal suffix fused into a step (copied inline as two
/// 16-byte stores); a longer literal stays a step of its own.
const POST_MAX: usize = 32;

/// One step of the run loop: an op, then a literal suffix
/// (`post[..post_len]`, empty if `post_len` is 0, always copied as 32
/// bytes). Built from the ops by merging each literal into the field op
/// before it, which halves the dispatches of a typical `{a} x {b} y` line,
/// then specialised (exact-size loads) and fused in pairs (see
/// `Program::build`).
#[derive(Clone, Copy, Debug)]
struct Step {
    op: Op,
    /// Second half of a fused pair (superinstruction): after `op`, the
    /// literal `mid[..mid_len]` (one 16-byte store), then the tail field.
    tail: Tail,
    mid_len: u8,
    mid: [u8; 16],
    post_len: u32,
    post: [u8; POST_MAX],
}

/// The field a step runs after its own op (see `Program::fuse_steps`):
/// the converters that most often follow another field in NAT44 lines.
#[derive(Clone, Copy, Debug)]
enum Tail {
    None,
    /// `{ipv4}<sep>{port}` with a 2-byte port (the 5-tuple endpoint).
    Ipv4Port {
        off: u32,
        sep: u8,
        off2: u32,
    },
    /// An enum name (as [`Op::Name`]).
    Name {
        off: u32,
        size: u8,
        table: u16,
        event: bool,
    },
}

impl Step {
    fn of(op: Op) -> Step {
        Step {
            op,
            tail: Tail::None,
            mid_len: 0,
            mid: [0; 16],
            post_len: 0,
            post: [0; POST_MAX],
        }
    }
}

/// Bytes reserved in the output past [`Program::max_output`]: literal
/// blocks copy 16 bytes at a time and may run up to 15 bytes past a
/// literal; a dotted quad's last table store runs 1 byte past its share.
const SLACK: usize = 64;

/// A compiled template for one schema: run it on a record's bytes.
#[derive(Clone, Debug)]
pub struct Program {
    ops: Vec<Op>,
    /// `ops` with literals fused as suffixes; rebuilt by `run` after the
    /// program changed (`ready` false).
    steps: Vec<Step>,
    ready: bool,
    /// `ops.len()` right after the last conditional body closed: no
    /// literal may merge into the op before this index.
    sealed: usize,
    lits: Vec<u8>,
    /// `lits` plus 32 zero bytes, so every literal can be copied in
    /// 16-byte blocks and every name as one 32-byte block.
    padded: Vec<u8>,
    /// Output of the rarer converters that append to a `Vec` (hex, IPv6,
    /// MAC, RFC 3164 time, escaped strings) before it joins the line.
    tmp: Vec<u8>,
    names: Vec<NameTable>,
    rfc3339: Vec<Rfc3339Cache>,
    rfc3164: Vec<Rfc3164Cache>,
    renumber: Renumber,
    tsc: TscCalibration,
    /// The options' time precision and bytes encoding (for defaults).
    time: Option<TimePrecision>,
    bytes: BytesEncoding,
    /// Byte-string ops printed with the default converter, for
    /// [`Program::set_bytes_encoding`]: (op index, field index, escape).
    default_bytes: Vec<(usize, usize, Escape)>,
    min_len: usize,
    max_out: usize,
    schema_id: u16,
    /// Whether `build` specialises and pair-fuses steps (tests compare
    /// against the unfused program).
    fuse: bool,
}
