//! Table-driven formatters for dplog records.
//!
//! - [`TextFormatter`]: one `name=value` line per record, RFC 3339 time first.
//! - [`JsonFormatter`]: JSON Lines, one object per record (RFC 8259).
//!
//! Both walk [`NAT44_FIELDS`], the table of IANA IPFIX information-element
//! names of RFC 8158. Nothing per record goes through `format!`, `write!` or
//! `core::fmt`: integers use `itoa`, IPv4 addresses a lookup table, time a
//! per-second cached RFC 3339 prefix.
#![warn(missing_docs)]

pub mod ipv4;
pub mod nat44;
pub mod time;

use dplog_core::{Formatter, Nat44SessionRecord};

pub use nat44::{Field, FieldKind, JsonFormatter, Presence, TextFormatter, NAT44_FIELDS};

/// Output formats by name, as used on the command line and in config files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Format {
    /// `text`: see [`TextFormatter`].
    #[default]
    Text,
    /// `json`: see [`JsonFormatter`].
    Json,
}

impl Format {
    /// Every format with its name.
    pub const ALL: [(Format, &'static str); 2] = [(Format::Text, "text"), (Format::Json, "json")];

    /// The format's name (`text`, `json`).
    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Json => "json",
        }
    }

    /// A boxed formatter for NAT44 session records in this format.
    pub fn nat44_formatter(self) -> Box<dyn Formatter<Nat44SessionRecord>> {
        match self {
            Format::Text => Box::new(TextFormatter::default()),
            Format::Json => Box::new(JsonFormatter::default()),
        }
    }
}

impl core::str::FromStr for Format {
    type Err = String;
    /// Parses `text` or `json`; the error lists the known names.
    fn from_str(s: &str) -> Result<Self, String> {
        Format::ALL
            .iter()
            .find(|(_, n)| *n == s)
            .map(|(f, _)| *f)
            .ok_or_else(|| format!("unknown format {s:?}; known formats: text, json"))
    }
}
