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

/// A converter: how one field's value becomes text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conv {
    /// Decimal integer.
    Dec,
    /// Lower-case hexadecimal integer, no prefix.
    Hex,
    /// `true` / `false`.
    Bool,
    /// Dotted-quad IPv4.
    Ipv4,
    /// RFC 5952 IPv6.
    Ipv6,
    /// Colon-separated MAC.
    Mac,
    /// RFC 3339 UTC with 0, 3, 6 or 9 fractional digits.
    Rfc3339(u8),
    /// RFC 3164 `Mmm dd hh:mm:ss`, UTC.
    Rfc3164,
    /// Unix time in seconds (integer, truncated).
    UnixS,
    /// Unix time in milliseconds.
    UnixMs,
    /// Unix time in microseconds.
    UnixUs,
    /// Unix time in nanoseconds.
    UnixNs,
    /// An enum field's name (the number if the value has no name).
    Name,
    /// A byte string up to its first NUL, escaped for the output syntax.
    Str,
    /// A byte string, every byte of the field, RFC 4648 base64 (for a
    /// byte string, [`Conv::Hex`] is every byte in hex).
    Base64,
}

impl Conv {
    /// Parses a converter name (see the module docs).
    pub fn parse(s: &str) -> Option<Conv> {
        Some(match s {
            "dec" | "num" => Conv::Dec,
            "hex" => Conv::Hex,
            "bool" => Conv::Bool,
            "ipv4" => Conv::Ipv4,
            "ipv6" => Conv::Ipv6,
            "mac" => Conv::Mac,
            "rfc3339" | "rfc3339_ms" | "rfc3339ms" => Conv::Rfc3339(3),
            "rfc3339_s" | "rfc3339s" => Conv::Rfc3339(0),
            "rfc3339_us" | "rfc3339us" => Conv::Rfc3339(6),
            "rfc3339_ns" | "rfc3339ns" => Conv::Rfc3339(9),
            "rfc3164" => Conv::Rfc3164,
            "unix" | "unix_s" => Conv::UnixS,
            "unix_ms" => Conv::UnixMs,
            "unix_us" => Conv::UnixUs,
            "unix_ns" => Conv::UnixNs,
            "name" => Conv::Name,
            "str" => Conv::Str,
            "base64" => Conv::Base64,
            _ => return None,
        })
    }

    /// The default converter of a kind (with [`Options`]' defaults; see
    /// [`Conv::default_with`]).
    pub fn default_for(kind: FieldKind) -> Conv {
        match kind {
            FieldKind::Bool => Conv::Bool,
            FieldKind::Ipv4 => Conv::Ipv4,
            FieldKind::Ipv6 => Conv::Ipv6,
            FieldKind::Mac => Conv::Mac,
            // A TSC field converts with the program's calibration.
            FieldKind::NsTimestamp | FieldKind::TscTimestamp => Conv::UnixMs,
            FieldKind::Bytes => Conv::Str,
            _ => Conv::Dec,
        }
    }

    /// The default converter of a kind under `opts`: a timestamp as a
    /// Unix time in [`Options::time`]'s unit, a byte string as
    /// [`Options::bytes`] says.
    pub fn default_with(kind: FieldKind, opts: &Options) -> Conv {
        match kind {
            FieldKind::NsTimestamp | FieldKind::TscTimestamp => match opts.time {
                None | Some(TimePrecision::Ms) => Conv::UnixMs,
                Some(TimePrecision::S) => Conv::UnixS,
                Some(TimePrecision::Us) => Conv::UnixUs,
                Some(TimePrecision::Ns) => Conv::UnixNs,
            },
            FieldKind::Bytes => match opts.bytes {
                BytesEncoding::Text => Conv::Str,
                BytesEncoding::Hex => Conv::Hex,
                BytesEncoding::Base64 => Conv::Base64,
            },
            k => Conv::default_for(k),
        }
    }

    fn is_time(self) -> bool {
        matches!(
            self,
            Conv::Rfc3339(_)
                | Conv::Rfc3164
                | Conv::UnixS
                | Conv::UnixMs
                | Conv::UnixUs
                | Conv::UnixNs
        )
    }

    /// Whether this converter suits `kind` (with or without TSC calibration).
    pub fn suits(self, kind: FieldKind, tsc: bool) -> bool {
        use FieldKind as K;
        match self {
            Conv::Dec => kind.is_integer(),
            Conv::Hex => kind.is_integer() || kind == K::Bytes,
            Conv::Base64 => kind == K::Bytes,
            Conv::Bool => kind == K::Bool,
            Conv::Ipv4 => kind == K::Ipv4,
            Conv::Ipv6 => kind == K::Ipv6,
            Conv::Mac => kind == K::Mac,
            Conv::Name => kind == K::Enum,
            Conv::Str => kind == K::Bytes,
            c if c.is_time() => kind == K::NsTimestamp || (kind == K::TscTimestamp && tsc),
            _ => false,
        }
    }
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

impl Program {
    /// Starts an empty program for `schema`; add to it with
    /// [`Program::lit`], [`Program::field`] and [`Program::when`].
    pub fn new(schema: &Schema, opts: Options) -> Program {
        Program {
            ops: Vec::new(),
            steps: Vec::new(),
            ready: false,
            sealed: usize::MAX,
            lits: Vec::new(),
            padded: Vec::new(),
            tmp: Vec::new(),
            names: Vec::new(),
            rfc3339: Vec::new(),
            rfc3164: Vec::new(),
            renumber: opts.renumber.unwrap_or_default(),
            tsc: opts.tsc.unwrap_or(TscCalibration::IDENTITY),
            time: opts.time,
            bytes: opts.bytes,
            default_bytes: Vec::new(),
            min_len: schema.size(),
            max_out: 0,
            schema_id: schema.id(),
            fuse: true,
        }
    }

    /// The same program with step specialisation and pair fusion off
    /// (literal suffixes and `{ipv4}:{dec}` still fuse): the reference the
    /// superinstruction tests compare with.
    #[doc(hidden)]
    pub fn unfused(mut self) -> Program {
        self.fuse = false;
        self.ready = false;
        self
    }

    /// Number of steps (dispatches) one record runs through, conditional
    /// bodies included (for tests and benches).
    #[doc(hidden)]
    pub fn step_count(&mut self) -> usize {
        if !self.ready {
            self.build();
        }
        self.steps.len()
    }

    /// Compiles a user template (syntax in the module docs) for `schema`.
    /// String fields are escaped with `esc`.
    pub fn compile(
        template: &str,
        schema: &Schema,
        opts: Options,
        esc: Escape,
    ) -> Result<Program, TemplateError> {
        let mut p = Program::new(schema, opts);
        let mut lit = String::new();
        let mut chars = template.char_indices().enumerate().peekable();
        while let Some((col0, (_, c))) = chars.next() {
            let col = col0 + 1;
            match c {
                '{' if matches!(chars.peek(), Some((_, (_, '{')))) => {
                    chars.next();
                    lit.push('{');
                }
                '}' if matches!(chars.peek(), Some((_, (_, '}')))) => {
                    chars.next();
                    lit.push('}');
                }
                '}' => {
                    return Err(TemplateError {
                        column: col,
                        message: "unmatched '}' (write '}}' for a literal brace)".into(),
                    })
                }
                '{' => {
                    let mut spec = String::new();
                    let mut closed = false;
                    for (_, (_, c)) in chars.by_ref() {
                        if c == '}' {
                            closed = true;
                            break;
                        }
                        if c == '{' {
                            break;
                        }
                        spec.push(c);
                    }
                    if !closed {
                        return Err(TemplateError {
                            column: col,
                            message: "unclosed '{' (write '{{' for a literal brace)".into(),
                        });
                    }
                    p.lit(lit.as_bytes());
                    lit.clear();
                    let (name, conv) = match spec.split_once(':') {
                        Some((n, c)) => (n.trim(), Some(c.trim())),
                        None => (spec.trim(), None),
                    };
                    let (idx, _) = schema.field(name).ok_or_else(|| TemplateError {
                        column: col,
                        message: format!(
                            "unknown field {name:?} in schema {}; known fields: {}",
                            schema.name(),
                            schema
                                .fields()
                                .iter()
                                .map(|f| &*f.name)
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    })?;
                    let conv = match conv {
                        None => None,
                        // Bare `rfc3339`: the options' precision.
                        Some("rfc3339") => Some(Conv::Rfc3339(p.time.map_or(3, |t| t.digits()))),
                        Some(c) => Some(Conv::parse(c).ok_or_else(|| TemplateError {
                            column: col,
                            message: format!("unknown converter {c:?} for field {name}"),
                        })?),
                    };
                    p.field(schema, idx, conv, esc)
                        .map_err(|message| TemplateError {
                            column: col,
                            message,
                        })?;
                }
                // Every sink takes a line as one record (a datagram, a
                // RELP or Kafka message, each counted written or dropped),
                // so a record must stay on one line.
                '\n' => {
                    return Err(TemplateError {
                        column: col,
                        message: "a line break would split each record into several lines (one record, one line)".into(),
                    })
                }
                c => lit.push(c),
            }
        }
        p.lit(lit.as_bytes());
        Ok(p)
    }

    /// Appends a literal (merged with a literal just before it).
    pub fn lit(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.ready = false;
        let start = self.lits.len() as u32;
        self.lits.extend_from_slice(bytes);
        self.max_out += bytes.len();
        // Never merge into the last op of a conditional body: the literal
        // comes after the body and must not be skipped with it.
        let sealed = self.sealed == self.ops.len();
        if let Some(Op::Lit { start: s, len }) = self.ops.last_mut().filter(|_| !sealed) {
            if *s + *len == start {
                *len += bytes.len() as u32;
                return;
            }
        }
        self.ops.push(Op::Lit {
            start,
            len: bytes.len() as u32,
        });
    }

    /// Appends field `idx` of `schema` printed with `conv` (its kind's
    /// default under the program's [`Options`] if `None`, see
    /// [`Conv::default_with`]); strings and enum names escaped with `esc`.
    ///
    /// # Errors
    /// A message if `idx` is out of range or `conv` does not suit the kind.
    pub fn field(
        &mut self,
        schema: &Schema,
        idx: usize,
        conv: Option<Conv>,
        esc: Escape,
    ) -> Result<(), String> {
        let f: &FieldDef = schema
            .fields()
            .get(idx)
            .ok_or_else(|| format!("no field #{idx} in schema {}", schema.name()))?;
        // TSC fields always convert: with the consumer's calibration once
        // it arrives, the identity before.
        let tsc = true;
        let opts = Options {
            time: self.time,
            bytes: self.bytes,
            ..Options::default()
        };
        if conv.is_none() && f.kind == FieldKind::Bytes {
            self.default_bytes.push((self.ops.len(), idx, esc));
        }
        let conv = conv.unwrap_or(Conv::default_with(f.kind, &opts));
        if !conv.suits(f.kind, tsc) {
            let hint = if f.kind == FieldKind::TscTimestamp && conv.is_time() {
                " (a TSC field needs a TSC calibration to print as time)"
            } else {
                ""
            };
            return Err(format!(
                "converter {conv:?} does not suit field {} of kind {}{hint}",
                f.name,
                f.kind.name()
            ));
        }
        let off = f.offset as u32;
        let size = f.size as u8;
        let is_tsc = f.kind == FieldKind::TscTimestamp;
        let is_event =
            self.renumber.len > 0 && f.ie_id == self.renumber.ie_id && f.kind.is_integer();
        let (op, max) = match conv {
            Conv::Dec if is_event => (Op::Event { off, size }, 20),
            Conv::Dec => (Op::Dec { off, size }, 20),
            Conv::Hex if f.kind == FieldKind::Bytes => bytes_op(f, BytesEncoding::Hex, esc),
            Conv::Base64 => bytes_op(f, BytesEncoding::Base64, esc),
            Conv::Hex => (Op::Hex { off, size }, 16),
            Conv::Bool => (Op::Bool { off }, 5),
            Conv::Ipv4 => (Op::Ipv4 { off }, 15),
            Conv::Ipv6 => (Op::Ipv6 { off }, 45),
            Conv::Mac => (Op::Mac { off }, 17),
            Conv::Rfc3339(digits) => {
                self.rfc3339.push(Rfc3339Cache::default());
                let cache = (self.rfc3339.len() - 1) as u16;
                (
                    Op::Rfc3339 {
                        off,
                        cache,
                        digits,
                        tsc: is_tsc,
                    },
                    30,
                )
            }
            Conv::Rfc3164 => {
                self.rfc3164.push(Rfc3164Cache::default());
                let cache = (self.rfc3164.len() - 1) as u16;
                (
                    Op::Rfc3164 {
                        off,
                        cache,
                        tsc: is_tsc,
                    },
                    15,
                )
            }
            Conv::UnixS => (
                Op::Unix {
                    off,
                    div: 1_000_000_000,
                    tsc: is_tsc,
                },
                20,
            ),
            Conv::UnixMs => (
                Op::Unix {
                    off,
                    div: 1_000_000,
                    tsc: is_tsc,
                },
                20,
            ),
            Conv::UnixUs => (
                Op::Unix {
                    off,
                    div: 1_000,
                    tsc: is_tsc,
                },
                20,
            ),
            Conv::UnixNs => (
                Op::Unix {
                    off,
                    div: 1,
                    tsc: is_tsc,
                },
                20,
            ),
            Conv::Name => {
                let mut t = NameTable {
                    dense: Box::new([(0, 0); 256]),
                    sparse: Vec::new(),
                };
                // An unnamed value prints in decimal: up to 20 digits.
                let mut longest = 20;
                for e in &f.enum_names {
                    let start = self.lits.len() as u32;
                    push_escaped(&mut self.lits, e.name.as_bytes(), esc);
                    let len = self.lits.len() as u32 - start;
                    longest = longest.max(len as usize);
                    if e.value < 256 {
                        t.dense[e.value as usize] = (start, len);
                    } else {
                        t.sparse.push((e.value, start, len));
                    }
                }
                self.names.push(t);
                (
                    Op::Name {
                        off,
                        size,
                        table: (self.names.len() - 1) as u16,
                        event: is_event,
                    },
                    longest,
                )
            }
            Conv::Str => bytes_op(f, BytesEncoding::Text, esc),
        };
        self.ready = false;
        self.ops.push(op);
        self.max_out += max;
        Ok(())
    }

    /// Prints the BYTES field named `field` with `enc` wherever this
    /// program prints it with its default converter (a layout's field,
    /// a template's `{field}`; not a template's `{field:str}`, `{field:hex}`
    /// or `{field:base64}`, which name their own): the per-field override
    /// of [`Options::bytes`] (`[format.bytes_fields]`). Returns how many
    /// places changed (0 if the program does not print the field, or the
    /// schema has no such BYTES field).
    pub fn set_bytes_encoding(
        &mut self,
        schema: &Schema,
        field: &str,
        enc: BytesEncoding,
    ) -> usize {
        let mut n = 0;
        for &(at, idx, esc) in &self.default_bytes {
            let Some(f) = schema.fields().get(idx).filter(|f| f.name == field) else {
                continue;
            };
            // A Str op's bound (6 bytes per byte) covers hex (2) and
            // base64 (4 per 3): `max_out` needs no change.
            self.ops[at] = bytes_op(f, enc, esc).0;
            n += 1;
        }
        if n > 0 {
            self.ready = false;
        }
        n
    }

    /// Appends integer field `idx` printed through the name table `names`
    /// (raw recorded values, no profile mapping); values without a name
    /// print in decimal.
    pub fn field_mapped(
        &mut self,
        schema: &Schema,
        idx: usize,
        names: &[(u32, &str)],
        esc: Escape,
    ) -> Result<(), String> {
        let f = schema
            .fields()
            .get(idx)
            .ok_or_else(|| format!("no field #{idx} in schema {}", schema.name()))?;
        if !f.kind.is_integer() {
            return Err(format!("field {} is not an integer", f.name));
        }
        let mut t = NameTable {
            dense: Box::new([(0, 0); 256]),
            sparse: Vec::new(),
        };
        let mut longest = 20;
        for &(value, name) in names {
            let start = self.lits.len() as u32;
            push_escaped(&mut self.lits, name.as_bytes(), esc);
            let len = self.lits.len() as u32 - start;
            longest = longest.max(len as usize);
            if value < 256 {
                t.dense[value as usize] = (start, len);
            } else {
                t.sparse.push((value, start, len));
            }
        }
        self.names.push(t);
        self.ready = false;
        self.ops.push(Op::Name {
            off: f.offset as u32,
            size: f.size as u8,
            table: (self.names.len() - 1) as u16,
            event: false,
        });
        self.max_out += longest;
        Ok(())
    }

    /// Makes the ops added by `body` run only for records whose integer
    /// field `idx` equals `value` (compared before any profile mapping).
    pub fn when(
        &mut self,
        schema: &Schema,
        idx: usize,
        value: u32,
        body: impl FnOnce(&mut Program) -> Result<(), String>,
    ) -> Result<(), String> {
        let f = &schema.fields()[idx];
        if !f.kind.is_integer() {
            return Err(format!("field {} is not an integer", f.name));
        }
        let at = self.ops.len();
        self.ready = false;
        self.ops.push(Op::SkipUnless {
            off: f.offset as u32,
            size: f.size as u8,
            value,
            skip: 0,
        });
        body(self)?;
        // A literal merged into one from before the condition would be
        // skipped with it: `lit` only merges with the op right before it,
        // and that is the SkipUnless here, so no merge can cross it.
        let n = (self.ops.len() - at - 1) as u16;
        if let Op::SkipUnless { skip, .. } = &mut self.ops[at] {
            *skip = n;
        }
        self.sealed = self.ops.len();
        Ok(())
    }

    /// The time precision of [`Options::time`] this program was built with.
    pub fn time_precision(&self) -> Option<TimePrecision> {
        self.time
    }

    /// Replaces the TSC calibration that converts TSC timestamp fields
    /// printed as time (the consumer's, from `Formatter::tsc_calibration`).
    pub fn set_tsc_calibration(&mut self, cal: TscCalibration) {
        self.tsc = cal;
    }

    /// The TSC calibration in use.
    pub fn tsc_calibration(&self) -> TscCalibration {
        self.tsc
    }

    /// The schema id this program was compiled for.
    pub fn schema_id(&self) -> u16 {
        self.schema_id
    }

    /// The shortest record (bytes) this program formats: its schema's size.
    pub fn min_len(&self) -> usize {
        self.min_len
    }

    /// Upper bound of the bytes one run appends.
    pub fn max_output(&self) -> usize {
        self.max_out
    }

    /// Fuses literals into the ops before them (see [`Step`]) and pads the
    /// literal pool for 16-byte block copies.
    fn build(&mut self) {
        // Last op of every conditional body: a literal right after one is
        // outside the body and must not join a step inside it.
        let ends: Vec<usize> = self
            .ops
            .iter()
            .enumerate()
            .filter_map(|(a, op)| match op {
                Op::SkipUnless { skip, .. } => Some(a + *skip as usize),
                _ => None,
            })
            .collect();
        let mut steps: Vec<Step> = Vec::with_capacity(self.ops.len());
        let mut step_of = Vec::with_capacity(self.ops.len());
        let ops = &self.ops;
        let mut j = 0;
        while j < ops.len() {
            let op = ops[j];
            // `{ipv4}<one byte>{dec}` inside one block becomes one step.
            if let (
                Op::Ipv4 { off },
                Some(Op::Lit { start, len: 1 }),
                Some(Op::Dec { off: o2, size: s2 }),
            ) = (op, ops.get(j + 1).copied(), ops.get(j + 2).copied())
            {
                if !ends.contains(&j) && !ends.contains(&(j + 1)) {
                    steps.push(Step::of(Op::Ipv4Dec {
                        off,
                        sep: self.lits[start as usize],
                        off2: o2,
                        size2: s2,
                    }));
                    step_of.extend([steps.len() - 1; 3]);
                    j += 3;
                    continue;
                }
            }
            // A literal joins the field step before it.
            if let Op::Lit { start, len } = op {
                let fusable = j > 0 && !ends.contains(&(j - 1)) && len as usize <= POST_MAX;
                if let Some(last) = steps.last_mut().filter(|_| fusable) {
                    if !matches!(last.op, Op::Lit { .. } | Op::SkipUnless { .. })
                        && last.post_len == 0
                    {
                        let (s, l) = (start as usize, len as usize);
                        last.post[..l].copy_from_slice(&self.lits[s..s + l]);
                        last.post_len = len;
                        step_of.push(steps.len() - 1);
                        j += 1;
                        continue;
                    }
                }
            }
            steps.push(Step::of(op));
            step_of.push(steps.len() - 1);
            j += 1;
        }
        // Skip counts in steps: a body's ops a+1..=a+k are the steps after
        // step_of[a] up to step_of[a+k] (no fusion crosses a body's ends).
        for (a, op) in self.ops.iter().enumerate() {
            if let Op::SkipUnless { skip, .. } = *op {
                let (s, e) = (step_of[a], step_of[a + skip as usize]);
                if let Op::SkipUnless { skip, .. } = &mut steps[s].op {
                    *skip = (e - s) as u16;
                }
            }
        }
        if self.fuse {
            steps = self.fuse_steps(steps);
        }
        self.steps = steps;
        self.padded.clear();
        self.padded.extend_from_slice(&self.lits);
        self.padded.extend_from_slice(&[0; 32]);
        self.ready = true;
    }

    /// Specialises steps (decimal fields of 1, 2, 4 or 8 bytes, RFC 3339
    /// ms time, and `{ipv4}:{port}` with a 2-byte port, each read with one
    /// exact load) and fuses pairs into superinstructions: a field step
    /// whose literal suffix is at most 16 bytes, followed by an
    /// `{ipv4}<sep>{port}` or an enum-name step, becomes one step (the
    /// second as its [`Tail`]), greedily from the left. The bench line
    /// `{time} NAT44 {event} {a}:{p} -> {b}:{q} proto={n} dst={c}:{r}` runs
    /// as 3 steps: time + event, `a:p` + `b:q`, `n` + `c:r`. No pair is
    /// fused across the end of a conditional body; skip counts are
    /// remapped.
    fn fuse_steps(&self, steps: Vec<Step>) -> Vec<Step> {
        // Steps that end a conditional body.
        let mut ends = vec![false; steps.len()];
        for (s, st) in steps.iter().enumerate() {
            if let Op::SkipUnless { skip, .. } = st.op {
                ends[s + skip as usize] = true;
            }
        }
        let spec = |op: Op| match op {
            Op::Dec { off, size: 1 } => Op::Dec1 { off },
            Op::Dec { off, size: 2 } => Op::Dec2 { off },
            Op::Dec { off, size: 4 } => Op::Dec4 { off },
            Op::Dec { off, size: 8 } => Op::Dec8 { off },
            Op::Rfc3339 {
                off,
                cache,
                digits: 3,
                tsc: false,
            } => Op::Rfc3339Ms { off, cache },
            Op::Ipv4Dec {
                off,
                sep,
                off2,
                size2: 2,
            } => Op::Ipv4Port { off, sep, off2 },
            op => op,
        };
        let mut out: Vec<Step> = Vec::with_capacity(steps.len());
        let mut new_of = Vec::with_capacity(steps.len());
        let mut k = 0;
        while k < steps.len() {
            let a = steps[k];
            let b = steps.get(k + 1).map(|b| spec(b.op));
            let mid_len = a.post_len as usize;
            // Heads: any field op (not a literal or a condition) whose
            // suffix fits the 16-byte middle and that ends no body.
            let head = !matches!(a.op, Op::Lit { .. } | Op::SkipUnless { .. });
            if head && mid_len <= 16 && !ends[k] {
                let tail = match b {
                    Some(Op::Ipv4Port { off, sep, off2 }) => Tail::Ipv4Port { off, sep, off2 },
                    Some(Op::Name {
                        off,
                        size,
                        table,
                        event,
                    }) => Tail::Name {
                        off,
                        size,
                        table,
                        event,
                    },
                    _ => Tail::None,
                };
                if !matches!(tail, Tail::None) {
                    let b = steps[k + 1];
                    let mut mid = [0u8; 16];
                    mid.copy_from_slice(&a.post[..16]);
                    out.push(Step {
                        op: spec(a.op),
                        tail,
                        mid_len: mid_len as u8,
                        mid,
                        post_len: b.post_len,
                        post: b.post,
                    });
                    new_of.extend([out.len() - 1; 2]);
                    k += 2;
                    continue;
                }
            }
            out.push(Step {
                op: spec(a.op),
                ..a
            });
            new_of.push(out.len() - 1);
            k += 1;
        }
        // A body's end step is never the first of a fused pair, so it
        // maps to the step that still ends the body.
        for (s, st) in steps.iter().enumerate() {
            if let Op::SkipUnless { skip, .. } = st.op {
                let (ns, ne) = (new_of[s], new_of[s + skip as usize]);
                if let Op::SkipUnless { skip, .. } = &mut out[ns].op {
                    *skip = (ne - ns) as u16;
                }
            }
        }
        out
    }

    /// Appends the formatted record. Returns `false` (appending nothing) if
    /// `rec` is shorter than the schema's record size.
    ///
    /// Reserves [`Program::max_output`] bytes (plus slack for 16-byte
    /// literal blocks) in `out` once per record and writes the line through
    /// a raw cursor: no per-operation capacity check, length update or
    /// bounds check, no allocation once `out` has grown, no `core::fmt`.
    #[inline]
    pub fn run(&mut self, rec: &[u8], out: &mut Vec<u8>) -> bool {
        if rec.len() < self.min_len {
            return false;
        }
        if !self.ready {
            self.build();
        }
        let Program {
            steps,
            padded,
            tmp,
            names,
            rfc3339,
            rfc3164,
            renumber,
            tsc,
            max_out,
            min_len,
            ..
        } = self;
        let (renumber, tsc, max_out, self_min_len) = (*renumber, *tsc, *max_out, *min_len);
        out.reserve(max_out + SLACK);
        let len0 = out.len();
        let lits = padded.as_ptr();
        // Fields are read as one 8-byte load at min(offset, hi): every
        // field lies in 8..min_len and records are at least 8 bytes, so
        // the load stays inside `rec` (checked against min_len above).
        let rp = Rec {
            p: rec.as_ptr(),
            hi: self_min_len - 8,
        };
        // Bound kept by the loop below: from `p`, the bytes `out` can take
        // are at least SLACK plus the `max_out` shares (see `field`/`lit`)
        // of the steps not yet run; every writer touches at most its share
        // plus 16 bytes (32 for RFC 3339, whose share is 30, and for a
        // step's 32-byte literal suffix, whose share is `post_len`; a fused
        // pair's parts write one after the other, each within its own
        // share plus 16), < SLACK.
        // SAFETY: `reserve` made `len0 + max_out + SLACK` bytes allocated.
        let mut base = unsafe { out.as_mut_ptr().add(len0) };
        let mut p = base;
        // Steps walked by pointer: `sp` and `end` stay in registers (a
        // `Vec` length would be reloaded after every byte store).
        let mut sp = steps.as_ptr();
        // SAFETY: one past the end of `steps`.
        let end = unsafe { sp.add(steps.len()) };
        while sp < end {
            // SAFETY: `sp` is in `steps` (below `end`); skip counts never
            // run past the last step (`build`), so `sp <= end` always.
            let st = unsafe { &*sp };
            // SAFETY: `sp < end`, so one step further is at most `end`.
            sp = unsafe { sp.add(1) };
            // SAFETY: every writer call below stays within the bound above;
            // literal and name sources are in `padded`, which holds 32
            // readable bytes past every literal.
            p = unsafe {
                match st.op {
                    Op::Lit { start, len } => raw::lit16(p, lits.add(start as usize), len as usize),
                    Op::Dec { off, size } => raw::dec(p, rp.rd(off, size)),
                    Op::Event { off, size } => raw::dec(p, map_event(renumber, rp.rd(off, size))),
                    Op::Ipv4 { off } => raw::ipv4(p, rp.ld::<u32>(off)),
                    Op::Dec1 { off } => raw::dec_u16(p, rp.ld::<u8>(off) as u16),
                    Op::Dec2 { off } => raw::dec_u16(p, rp.ld::<u16>(off)),
                    Op::Dec4 { off } => raw::dec(p, rp.ld::<u32>(off) as u64),
                    Op::Dec8 { off } => raw::dec(p, rp.ld::<u64>(off)),
                    Op::Ipv4Port { off, sep, off2 } => ipv4_port(p, rp, off, sep, off2),
                    Op::Ipv4Dec {
                        off,
                        sep,
                        off2,
                        size2,
                    } => {
                        let q = raw::ipv4(p, rp.ld::<u32>(off));
                        *q = sep;
                        raw::dec(q.add(1), rp.uint(off2, size2))
                    }
                    Op::Rfc3339 {
                        off,
                        cache,
                        digits,
                        tsc: is_tsc,
                    } => {
                        let ns = ns_of(&tsc, rp, off, is_tsc);
                        rfc3339[cache as usize].write_raw(p, ns, digits)
                    }
                    Op::Rfc3339Ms { off, cache } => {
                        rfc3339[cache as usize].write_raw(p, rp.ld::<u64>(off), 3)
                    }
                    Op::Unix {
                        off,
                        div,
                        tsc: is_tsc,
                    } => {
                        let ns = ns_of(&tsc, rp, off, is_tsc);
                        // Constant divisors become multiplications; a
                        // division by the runtime `div` would be a hardware
                        // divide.
                        let v = match div {
                            1_000_000 => ns / 1_000_000,
                            1 => ns,
                            1_000 => ns / 1_000,
                            1_000_000_000 => ns / 1_000_000_000,
                            d => ns / d as u64,
                        };
                        raw::dec(p, v)
                    }
                    Op::Name {
                        off,
                        size,
                        table,
                        event,
                    } => {
                        let mut v = rp.uint(off, size);
                        if event {
                            v = map_event(renumber, v);
                        }
                        name(p, lits, &names[table as usize], v)
                    }
                    Op::Bool { off } => {
                        let s: &[u8] = if rec[off as usize] != 0 {
                            b"true"
                        } else {
                            b"false"
                        };
                        std::ptr::copy_nonoverlapping(s.as_ptr(), p, s.len());
                        p.add(s.len())
                    }
                    Op::SkipUnless {
                        off,
                        size,
                        value,
                        skip,
                    } => {
                        if rp.rd(off, size) != value as u64 {
                            sp = sp.add(skip as usize);
                        }
                        p
                    }
                    // The rarer converters, out of line.
                    op @ (Op::Hex { .. }
                    | Op::Ipv6 { .. }
                    | Op::Mac { .. }
                    | Op::Rfc3164 { .. }
                    | Op::Str { .. }
                    | Op::Bytes { .. }) => {
                        let at = len0 + p.offset_from(base) as usize;
                        // The bytes up to `at` are written (initialised).
                        let end = rare(op, rec, rp, &tsc, tmp, rfc3164, out, at, max_out);
                        base = out.as_mut_ptr().add(len0);
                        out.as_mut_ptr().add(end)
                    }
                }
            };
            // The second half of a fused pair: the middle literal as one
            // 16-byte store, then the tail field.
            // SAFETY: as above (the middle's share is `mid_len`).
            unsafe {
                match st.tail {
                    Tail::None => {}
                    Tail::Ipv4Port { off, sep, off2 } => {
                        p.cast::<[u8; 16]>().write_unaligned(st.mid);
                        p = ipv4_port(p.add(st.mid_len as usize), rp, off, sep, off2);
                    }
                    Tail::Name {
                        off,
                        size,
                        table,
                        event,
                    } => {
                        p.cast::<[u8; 16]>().write_unaligned(st.mid);
                        let mut v = rp.uint(off, size);
                        if event {
                            v = map_event(renumber, v);
                        }
                        p = name(p.add(st.mid_len as usize), lits, &names[table as usize], v);
                    }
                }
            }
            // The suffix fused by `build`: always all 32 bytes of `post`
            // (two 16-byte stores, no loop); the bytes past `post_len`
            // are overwritten by the next write.
            // SAFETY: as above (32 bytes, within the writer's slack).
            p = unsafe {
                p.cast::<[u8; POST_MAX]>().write_unaligned(st.post);
                p.add(st.post_len as usize)
            };
        }
        // SAFETY: `p - base` bytes from `len0` were written above, within
        // the reserved capacity.
        unsafe { out.set_len(len0 + p.offset_from(base) as usize) };
        true
    }
}

/// Low-byte masks of 0..=8-byte integers (16 entries so that `size & 15`
/// indexes without a bounds check; 9..=15 never occur).
const MASKS: [u64; 16] = [
    0,
    0xff,
    0xffff,
    0xff_ffff,
    0xffff_ffff,
    0xff_ffff_ffff,
    0xffff_ffff_ffff,
    0xff_ffff_ffff_ffff,
    u64::MAX,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
];

/// Value `v` of a renumbered field.
#[inline(always)]
fn map_event(renumber: Renumber, v: u64) -> u64 {
    renumber.map(v)
}

/// The rarer converters (hex, IPv6, MAC, RFC 3164 time, escaped strings),
/// out of the hot loop: `op` is appended to `tmp`, `out` is cut to `at`
/// bytes, grown by `tmp` plus a fresh `max_out + SLACK` reserve (so their
/// output needs no bound) and `tmp` copied in; returns the new end index.
///
/// # Safety
/// `out`'s first `at` bytes must be initialised and `at <= out.capacity()`.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn rare(
    op: Op,
    rec: &[u8],
    rp: Rec,
    tsc: &TscCalibration,
    tmp: &mut Vec<u8>,
    rfc3164: &mut [Rfc3164Cache],
    out: &mut Vec<u8>,
    at: usize,
    max_out: usize,
) -> usize {
    tmp.clear();
    match op {
        Op::Hex { off, size } => push_hex(tmp, rp.rd(off, size)),
        Op::Ipv6 { off } => {
            let o = off as usize;
            let a: [u8; 16] = rec[o..o + 16].try_into().unwrap_or([0; 16]);
            push_ipv6(tmp, &a)
        }
        Op::Mac { off } => push_mac(tmp, &rec[off as usize..off as usize + 6]),
        Op::Rfc3164 {
            off,
            cache,
            tsc: is_tsc,
        } => {
            let ns = ns_of(tsc, rp, off, is_tsc);
            rfc3164[cache as usize].push(tmp, ns)
        }
        Op::Str { off, len, esc } => {
            push_escaped(tmp, &rec[off as usize..off as usize + len as usize], esc)
        }
        Op::Bytes { off, len, enc } => {
            let b = &rec[off as usize..off as usize + len as usize];
            match enc {
                BytesEncoding::Base64 => push_base64(tmp, b),
                _ => push_hex_bytes(tmp, b),
            }
        }
        _ => {}
    }
    // SAFETY: the caller guarantees `at` initialised bytes within capacity.
    unsafe { out.set_len(at) };
    out.reserve(tmp.len() + max_out + SLACK);
    out.extend_from_slice(tmp);
    at + tmp.len()
}

/// The op printing byte-string field `f` with `enc` (as text escaped
/// with `esc`) and the bound of its output: 6 bytes per byte plus a CSV
/// field's 2 quotes for escaped text, 2 per byte for hex, 4 per 3 for
/// base64.
fn bytes_op(f: &FieldDef, enc: BytesEncoding, esc: Escape) -> (Op, usize) {
    let (off, len, size) = (f.offset as u32, f.size, f.size as usize);
    match enc {
        BytesEncoding::Text => (Op::Str { off, len, esc }, size * 6 + 2),
        BytesEncoding::Hex => (Op::Bytes { off, len, enc }, size * 2),
        BytesEncoding::Base64 => (Op::Bytes { off, len, enc }, size.div_ceil(3) * 4),
    }
}

/// Writes an enum name from `t` (escaped, in `lits`), or `v` in decimal if
/// it has none, and returns the cursor past it.
///
/// # Safety
/// `p` writable for the name rounded up to 16 bytes, and for at least 32
/// (a name is one 32-byte copy) and 20 (a number) bytes; `lits` is the
/// padded literal pool `t` points into.
#[inline(always)]
unsafe fn name(p: *mut u8, lits: *const u8, t: &NameTable, v: u64) -> *mut u8 {
    let (start, len) = if v < 256 {
        t.dense[v as usize]
    } else {
        t.sparse
            .iter()
            .find(|e| e.0 as u64 == v)
            .map_or((0, 0), |e| (e.1, e.2))
    };
    // SAFETY: the caller's bounds; names lie in `lits` with 32 readable
    // bytes past each.
    unsafe {
        if len == 0 {
            raw::dec(p, v)
        } else {
            raw::lit32(p, lits.add(start as usize), len as usize)
        }
    }
}

/// Writes the IPv4 address at `off`, `sep` and the 2-byte port at `off2`
/// (`10.0.0.1:1234`) and returns the cursor past them (9 to 21 bytes).
///
/// # Safety
/// `p` writable for 22 bytes; `off`/`off2` fields of 4/2 bytes inside the
/// record (see [`Rec::ld`]).
#[inline(always)]
unsafe fn ipv4_port(p: *mut u8, rp: Rec, off: u32, sep: u8, off2: u32) -> *mut u8 {
    // SAFETY: ipv4 writes at most 16 bytes, then 1 + 5 more: 22 in all.
    unsafe {
        let q = raw::ipv4(p, rp.ld::<u32>(off));
        *q = sep;
        raw::dec_u16(q.add(1), rp.ld::<u16>(off2))
    }
}

/// A record being formatted: its start and the highest offset at which an
/// 8-byte load stays inside it (record length - 8).
#[derive(Clone, Copy)]
struct Rec {
    p: *const u8,
    hi: usize,
}

impl Rec {
    /// The `size`-byte host-order integer at `off`: one exact load for 1,
    /// 2, 4 and 8 bytes (the branch on `size` is predicted per step),
    /// [`Rec::rd`] otherwise.
    #[inline(always)]
    fn uint(self, off: u32, size: u8) -> u64 {
        // SAFETY: fields of `size` bytes lie inside the record (see `ld`).
        unsafe {
            match size {
                1 => self.ld::<u8>(off) as u64,
                2 => self.ld::<u16>(off) as u64,
                4 => self.ld::<u32>(off) as u64,
                8 => self.ld::<u64>(off),
                _ => self.rd(off, size),
            }
        }
    }

    /// The host-order `T` at `off`: one exact unaligned load.
    ///
    /// # Safety
    /// `off + size_of::<T>()` must be within the schema's record size (true
    /// for every field of the schema the program was built for, with `T`
    /// the field's size).
    #[inline(always)]
    unsafe fn ld<T: Copy>(self, off: u32) -> T {
        // SAFETY: the caller's bound; `Program::run` checked the record is
        // at least the schema's size; an unaligned read.
        unsafe { self.p.add(off as usize).cast::<T>().read_unaligned() }
    }

    /// The `size`-byte host-order integer at `off` (like [`read_uint`]):
    /// one unaligned 8-byte load at `min(off, hi)`, shifted and masked on
    /// little-endian targets.
    #[inline(always)]
    fn rd(self, off: u32, size: u8) -> u64 {
        let off = off as usize;
        if cfg!(target_endian = "little") && off <= self.hi {
            // SAFETY: `off + 8 <= hi + 8`, the record's length (`Rec` is
            // built by `Program::run` from a record of at least min_len
            // bytes, hi = min_len - 8); an unaligned read.
            let w = unsafe { self.p.add(off).cast::<u64>().read_unaligned() };
            return w & MASKS[size as usize & 15];
        }
        let at = off.min(self.hi);
        if cfg!(target_endian = "little") {
            // SAFETY: `at + 8 <= hi + 8`, the record's length (`Rec` is
            // built by `Program::run` from a record of at least min_len
            // bytes, hi = min_len - 8); an unaligned read.
            let w = unsafe { self.p.add(at).cast::<u64>().read_unaligned() };
            // off - at <= 8 - size (the field ends inside the record), so
            // the shift is below 64.
            (w >> ((off - at) * 8)) & MASKS[size as usize & 15]
        } else {
            // SAFETY: as above, `hi + 8` bytes are readable.
            let rec = unsafe { std::slice::from_raw_parts(self.p, self.hi + 8) };
            read_uint(rec, off, size as usize)
        }
    }
}

/// The nanosecond time of the 8-byte field at `off` (TSC ticks converted).
#[inline(always)]
fn ns_of(tsc: &TscCalibration, rec: Rec, off: u32, is_tsc: bool) -> u64 {
    // SAFETY: time fields are 8 bytes inside the record (the converter
    // only suits 8-byte timestamp kinds).
    let v = unsafe { rec.ld::<u64>(off) };
    if is_tsc {
        tsc.to_ns(v)
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dplog_schema_nat as nat;

    fn err(t: &str) -> TemplateError {
        Program::compile(t, nat::nat44_session(), Options::default(), Escape::Text).unwrap_err()
    }

    #[test]
    fn bad_templates_name_the_column() {
        let e = err("ok {sourceIPv4Adress} x");
        assert_eq!(e.column, 4);
        assert!(
            e.message.contains("unknown field \"sourceIPv4Adress\""),
            "{e}"
        );
        assert!(
            e.to_string().starts_with("template error at column 4:"),
            "{e}"
        );
        let e = err("{natEvent:nome}");
        assert_eq!(e.column, 1);
        assert!(e.message.contains("unknown converter \"nome\""), "{e}");
        let e = err("ab {sourceIPv4Address:rfc3339}");
        assert_eq!(e.column, 4);
        assert!(e.message.contains("does not suit"), "{e}");
        let e = err("x {natEvent");
        assert_eq!((e.column, e.message.contains("unclosed")), (3, true));
        let e = err("é }");
        assert_eq!((e.column, e.message.contains("unmatched")), (3, true));
        let e = err("{sourceTransportPort:name}");
        assert!(e.message.contains("does not suit"), "{e}");
    }

    #[test]
    fn a_line_break_in_a_template_is_an_error_at_its_column() {
        let e = err("a {natEvent}\nb {sourceIPv4Address}");
        assert_eq!(e.column, 13, "{e}");
        assert!(e.message.contains("line break"), "{e}");
    }

    /// Literal fusion and the `{ipv4}:{dec}` superinstruction must not
    /// move anything across the ends of a conditional body.
    #[test]
    fn fused_steps_keep_conditional_bodies_exact() {
        let s = nat::nat44_session();
        let f = |name: &str| s.field(name).unwrap().0;
        let mut p = Program::new(s, Options::default());
        p.lit(b"<");
        p.field(s, f("sourceIPv4Address"), None, Escape::Text)
            .unwrap();
        p.lit(b":");
        p.field(s, f("sourceTransportPort"), None, Escape::Text)
            .unwrap();
        p.when(s, f("natEvent"), 5, |p| {
            p.lit(b" del ");
            p.field(s, f("destinationIPv4Address"), None, Escape::Text)?;
            p.lit(b":");
            p.field(s, f("destinationTransportPort"), None, Escape::Text)?;
            p.lit(b" pk=");
            p.field(s, f("initiatorPackets"), None, Escape::Text)?;
            p.when(s, f("protocolIdentifier"), 17, |p| {
                p.lit(b" udp");
                Ok(())
            })
        })
        .unwrap();
        p.lit(b" | ");
        p.field(s, f("postNATSourceIPv4Address"), None, Escape::Text)
            .unwrap();
        p.lit(b":");
        p.field(s, f("postNAPTSourceTransportPort"), None, Escape::Text)
            .unwrap();
        p.lit(b" a literal longer than sixteen bytes>");
        let mut r = dplog_schema_nat::Nat44SessionRecord {
            nat_event: 4,
            protocol: 17,
            src_addr: 0x0A00_0001,
            src_port: 1234,
            dst_addr: 0xC000_0201,
            dst_port: 53,
            post_nat_src_addr: 0xC633_6405,
            post_napt_src_port: 40000,
            initiator_packets: 7,
            ..Default::default()
        };
        let run = |p: &mut Program, r: &dplog_schema_nat::Nat44SessionRecord| {
            let mut out = b"x".to_vec();
            assert!(p.run(dplog_core::HasSchema::as_bytes(r), &mut out));
            String::from_utf8(out).unwrap()
        };
        let tail = " | 198.51.100.5:40000 a literal longer than sixteen bytes>";
        assert_eq!(run(&mut p, &r), format!("x<10.0.0.1:1234{tail}"));
        r.nat_event = 5;
        assert_eq!(
            run(&mut p, &r),
            format!("x<10.0.0.1:1234 del 192.0.2.1:53 pk=7 udp{tail}")
        );
        r.protocol = 6;
        assert_eq!(
            run(&mut p, &r),
            format!("x<10.0.0.1:1234 del 192.0.2.1:53 pk=7{tail}")
        );
        // Adding to a program that already ran rebuilds its steps.
        p.lit(b"!");
        assert!(run(&mut p, &r).ends_with(">!"));
    }

    /// Fields in the last 8 bytes of a short record (read by the shifted
    /// load), and rare converters that grow `out` in the middle of a line
    /// appended after existing bytes with no spare capacity.
    #[test]
    fn tail_fields_and_rare_converters_grow_out_mid_line() {
        use dplog_core::schema::{FieldDef, FieldKind as K};
        let s = Schema::new(
            41,
            "tail",
            44,
            vec![
                FieldDef::new("a", 8, 4, K::Ipv4, 0),
                FieldDef::new("mac", 12, 6, K::Mac, 0),
                FieldDef::new("tag", 18, 20, K::Bytes, 0),
                FieldDef::new("b", 38, 1, K::U8, 0),
                FieldDef::new("c", 39, 1, K::Bool, 0),
                FieldDef::new("port", 40, 2, K::Port, 0),
                FieldDef::new("d", 42, 2, K::U16, 0),
            ],
        )
        .unwrap();
        let mut p = Program::compile(
            "{a}:{port} mac={mac} tag={tag} b={b:hex} c={c} d={d} {port:hex}",
            &s,
            Options::default(),
            Escape::Json,
        )
        .unwrap();
        let mut rec = [0u8; 44];
        rec[8..12].copy_from_slice(&0xC000_0201u32.to_ne_bytes());
        rec[12..18].copy_from_slice(&[0, 0x1b, 0x21, 0xaa, 0xbb, 0xff]);
        rec[18..38].copy_from_slice(b"\"q\\\n\x01long tail......");
        rec[38] = 0xab;
        rec[39] = 1;
        rec[40..42].copy_from_slice(&65535u16.to_ne_bytes());
        rec[42..44].copy_from_slice(&7u16.to_ne_bytes());
        let want = "192.0.2.1:65535 mac=00:1b:21:aa:bb:ff \
                    tag=\\\"q\\\\\\n\\u0001long tail...... b=ab c=true d=7 ffff";
        for _ in 0..2 {
            let mut out = b"head|".to_vec();
            out.shrink_to_fit();
            assert!(p.run(&rec, &mut out));
            assert_eq!(std::str::from_utf8(&out).unwrap(), format!("head|{want}"));
        }
    }

    #[test]
    fn braces_escape_and_short_records_are_refused() {
        let mut p = Program::compile(
            "{{{natEvent}}} }}",
            nat::nat44_session(),
            Options::default(),
            Escape::Text,
        )
        .unwrap();
        let r = dplog_schema_nat::Nat44SessionRecord {
            nat_event: 4,
            ..Default::default()
        };
        let mut out = Vec::new();
        assert!(p.run(dplog_core::HasSchema::as_bytes(&r), &mut out));
        assert_eq!(out, b"{4} }");
        assert!(!p.run(&dplog_core::HasSchema::as_bytes(&r)[..63], &mut out));
        assert_eq!(out, b"{4} }");
    }
}
