//! [`Conv`]: the converters a placeholder names, which kinds each suits
//! and each kind's default.

use super::*;

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

    /// The converter's name as a template writes it (`{f:name}`), for
    /// messages: the canonical spelling of each [`Conv::parse`] alias.
    pub fn name(self) -> &'static str {
        match self {
            Conv::Dec => "dec",
            Conv::Hex => "hex",
            Conv::Bool => "bool",
            Conv::Ipv4 => "ipv4",
            Conv::Ipv6 => "ipv6",
            Conv::Mac => "mac",
            Conv::Rfc3339(0) => "rfc3339_s",
            Conv::Rfc3339(6) => "rfc3339_us",
            Conv::Rfc3339(9) => "rfc3339_ns",
            Conv::Rfc3339(_) => "rfc3339_ms",
            Conv::Rfc3164 => "rfc3164",
            Conv::UnixS => "unix_s",
            Conv::UnixMs => "unix_ms",
            Conv::UnixUs => "unix_us",
            Conv::UnixNs => "unix_ns",
            Conv::Name => "name",
            Conv::Str => "str",
            Conv::Base64 => "base64",
        }
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

    pub(super) fn is_time(self) -> bool {
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
