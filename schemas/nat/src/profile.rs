//! How `natEvent` numbers are printed and exported.

use dplog_formatters::Renumber;

/// `natEvent` numbering profile: how event numbers are printed and
/// exported. Records always carry RFC 8158 numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum EventProfile {
    /// RFC 8158 numbers as recorded (4/5 for session create/delete).
    #[default]
    Rfc8158,
    /// The historic numbering older collectors expect: session create
    /// 4 is printed as 1 and delete 5 as 2; other events unchanged.
    Legacy,
}

impl EventProfile {
    /// The number to print or export for recorded `natEvent` `v`.
    #[inline(always)]
    pub const fn map(self, v: u8) -> u8 {
        match (self, v) {
            (EventProfile::Legacy, 4) => 1,
            (EventProfile::Legacy, 5) => 2,
            _ => v,
        }
    }

    /// Parses `rfc8158` or `legacy`.
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "rfc8158" => Some(EventProfile::Rfc8158),
            "legacy" => Some(EventProfile::Legacy),
            _ => None,
        }
    }
}

impl EventProfile {
    /// The formatters' renumbering of natEvent (IANA element 230) for this
    /// profile: `None` for RFC 8158 numbers, 4→1 and 5→2 for `legacy`.
    pub const fn renumber(self) -> Option<Renumber> {
        match self {
            EventProfile::Rfc8158 => None,
            EventProfile::Legacy => Some(Renumber::new(IE_NAT_EVENT, &[(4, 1), (5, 2)])),
        }
    }
}

/// IANA IPFIX element id of `natEvent` (RFC 8158).
pub const IE_NAT_EVENT: u16 = 230;
