//! Fields: their kinds, definitions and the C ABI descriptors.

use std::borrow::Cow;
use std::ffi::c_char;

/// How a field's bytes are interpreted. The numeric values are the C ABI
/// values of [`DplogFieldDesc::kind`].
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldKind {
    /// Unsigned 8-bit integer. Size 1.
    U8 = 1,
    /// Unsigned 16-bit integer, host order. Size 2.
    U16 = 2,
    /// Unsigned 32-bit integer, host order. Size 4.
    U32 = 3,
    /// Unsigned 64-bit integer, host order. Size 8.
    U64 = 4,
    /// Boolean, one byte, 0 false and anything else true. Size 1.
    Bool = 5,
    /// IPv4 address as a host-order `u32` (`0x0A000001` is `10.0.0.1`). Size 4.
    Ipv4 = 6,
    /// IPv6 address, 16 bytes in network order. Size 16.
    Ipv6 = 7,
    /// Transport port (or ICMP identifier), host-order `u16`. Size 2.
    Port = 8,
    /// IP protocol number (IANA "Protocol Numbers"). Size 1.
    Protocol = 9,
    /// MAC address, 6 bytes in network order. Size 6.
    Mac = 10,
    /// CPU time-stamp-counter value (`rdtsc`), host-order `u64` ticks;
    /// converting it to wall time needs a calibration. Size 8.
    TscTimestamp = 11,
    /// Nanoseconds since the Unix epoch, UTC, host-order `u64`. Size 8.
    NsTimestamp = 12,
    /// An unsigned integer (size 1, 2 or 4) with a table of names.
    Enum = 13,
    /// A fixed-size byte string, NUL-padded (any size from 1 to 255).
    Bytes = 14,
}

impl FieldKind {
    /// Every kind, in C ABI order.
    pub const ALL: [FieldKind; 14] = [
        FieldKind::U8,
        FieldKind::U16,
        FieldKind::U32,
        FieldKind::U64,
        FieldKind::Bool,
        FieldKind::Ipv4,
        FieldKind::Ipv6,
        FieldKind::Port,
        FieldKind::Protocol,
        FieldKind::Mac,
        FieldKind::TscTimestamp,
        FieldKind::NsTimestamp,
        FieldKind::Enum,
        FieldKind::Bytes,
    ];

    /// The kind with C ABI value `v`, if any.
    pub fn from_u32(v: u32) -> Option<FieldKind> {
        FieldKind::ALL.iter().copied().find(|k| *k as u32 == v)
    }

    /// The kind's fixed size in bytes; `None` for [`FieldKind::Enum`]
    /// (1, 2 or 4) and [`FieldKind::Bytes`] (1..=255).
    pub const fn fixed_size(self) -> Option<usize> {
        match self {
            FieldKind::U8 | FieldKind::Bool | FieldKind::Protocol => Some(1),
            FieldKind::U16 | FieldKind::Port => Some(2),
            FieldKind::U32 | FieldKind::Ipv4 => Some(4),
            FieldKind::U64 | FieldKind::TscTimestamp | FieldKind::NsTimestamp => Some(8),
            FieldKind::Ipv6 => Some(16),
            FieldKind::Mac => Some(6),
            FieldKind::Enum | FieldKind::Bytes => None,
        }
    }

    /// Whether a field of this kind and `size` bytes is well formed.
    pub const fn size_ok(self, size: usize) -> bool {
        match self.fixed_size() {
            Some(s) => s == size,
            None => match self {
                FieldKind::Enum => matches!(size, 1 | 2 | 4),
                _ => size >= 1 && size <= 255,
            },
        }
    }

    /// Whether the value is read as an unsigned integer (everything but
    /// IPv6, MAC and byte strings).
    pub const fn is_integer(self) -> bool {
        !matches!(self, FieldKind::Ipv6 | FieldKind::Mac | FieldKind::Bytes)
    }

    /// Lower-case name used in binary file headers and error messages.
    pub const fn name(self) -> &'static str {
        match self {
            FieldKind::U8 => "u8",
            FieldKind::U16 => "u16",
            FieldKind::U32 => "u32",
            FieldKind::U64 => "u64",
            FieldKind::Bool => "bool",
            FieldKind::Ipv4 => "ipv4",
            FieldKind::Ipv6 => "ipv6",
            FieldKind::Port => "port",
            FieldKind::Protocol => "protocol",
            FieldKind::Mac => "mac",
            FieldKind::TscTimestamp => "tsc",
            FieldKind::NsTimestamp => "ns",
            FieldKind::Enum => "enum",
            FieldKind::Bytes => "bytes",
        }
    }
}

/// One entry of an enum field's name table.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EnumName {
    /// The numeric value.
    pub value: u32,
    /// Its name, printed by the `name` converter.
    pub name: Cow<'static, str>,
}

/// One field of a schema.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FieldDef {
    /// Field name; for NAT records the IANA IPFIX information-element name.
    pub name: Cow<'static, str>,
    /// Byte offset from the start of the record (header included).
    pub offset: u16,
    /// Size in bytes; must suit `kind` (see [`FieldKind::size_ok`]).
    pub size: u16,
    /// How the bytes are interpreted.
    pub kind: FieldKind,
    /// IANA IPFIX information-element id (RFC 7012), 0 if none. Used by the
    /// IPFIX exporter; a field with 0 is exported as an enterprise-specific
    /// element (RFC 7011 section 3.2, see `dplog_formatters::ipfix`), its
    /// id derived from its name and type. Given as
    /// [`ENTERPRISE_IE`](super::ENTERPRISE_IE)` | id` to
    /// [`Schema::new`](super::Schema::new), it declares that enterprise
    /// element id instead (the schema keeps it in its metadata, and this
    /// reads 0).
    pub ie_id: u16,
    /// Names of the values of an [`FieldKind::Enum`] field; empty otherwise.
    pub enum_names: Vec<EnumName>,
}

impl FieldDef {
    /// For an error about `value`, which is none of this enum field's
    /// names: says that names are matched as written, suggests the name
    /// `value` spells in another case, and lists the first dozen names
    /// (with how many more there are). Used by the tools' `--where`. A
    /// name with anything but printable ASCII (spaces, control or
    /// direction characters, ...) is shown quoted with Rust's escapes
    /// (`"bad\nname"`), so a declared name cannot forge terminal output.
    pub fn enum_names_hint(&self, value: &str) -> String {
        const SHOWN: usize = 12;
        let shown = |n: &str| -> String {
            if !n.is_empty() && n.bytes().all(|b| b.is_ascii_graphic()) {
                n.to_string()
            } else {
                format!("{n:?}")
            }
        };
        let names: Vec<&str> = self.enum_names.iter().map(|e| e.name.as_ref()).collect();
        let mut list = names
            .iter()
            .take(SHOWN)
            .map(|n| shown(n))
            .collect::<Vec<_>>()
            .join(", ");
        if names.len() > SHOWN {
            list.push_str(&format!(" and {} more", names.len() - SHOWN));
        }
        let close = names
            .iter()
            .find(|n| n.eq_ignore_ascii_case(value))
            .map_or(String::new(), |n| format!("did you mean {}? ", shown(n)));
        format!(
            "{close}give a number or one of the field's names, matched as written (case and all): \
             {list}"
        )
    }

    /// A field without enum names.
    pub fn new(
        name: impl Into<Cow<'static, str>>,
        offset: usize,
        size: usize,
        kind: FieldKind,
        ie_id: u16,
    ) -> Self {
        Self {
            name: name.into(),
            offset: offset.min(u16::MAX as usize) as u16,
            size: size.min(u16::MAX as usize) as u16,
            kind,
            ie_id,
            enum_names: Vec::new(),
        }
    }

    /// Adds the name table of an enum field.
    pub fn with_names(mut self, names: &[(u32, &'static str)]) -> Self {
        self.enum_names = names
            .iter()
            .map(|&(value, name)| EnumName {
                value,
                name: Cow::Borrowed(name),
            })
            .collect();
        self
    }

    /// The name of `value`, if the table has it.
    pub fn enum_name(&self, value: u32) -> Option<&str> {
        self.enum_names
            .iter()
            .find(|e| e.value == value)
            .map(|e| &*e.name)
    }

    /// The value named `name` in the table, matched as written (case and
    /// all), if the table has it: the inverse of
    /// [`enum_name`](Self::enum_name), for the tools' `--where`.
    pub fn enum_value(&self, name: &str) -> Option<u32> {
        self.enum_names
            .iter()
            .find(|e| e.name == name)
            .map(|e| e.value)
    }

    /// Reads an integer-valued field (see [`FieldKind::is_integer`]) from
    /// `rec`, zero-extended to `u64`. `rec` must be at least the schema's
    /// record size (checked by the caller; panics on a short slice).
    #[inline(always)]
    pub fn read_uint(&self, rec: &[u8]) -> u64 {
        read_uint(rec, self.offset as usize, self.size as usize)
    }

    /// The field's bytes in `rec`.
    #[inline(always)]
    pub fn bytes<'a>(&self, rec: &'a [u8]) -> &'a [u8] {
        &rec[self.offset as usize..self.offset as usize + self.size as usize]
    }
}

pub use crate::rules::read_uint;

/// C ABI field descriptor (`struct dplog_field_desc`): one element of the
/// array passed to [`Schema::from_c_descriptors`](super::Schema::from_c_descriptors).
///
/// ```c
/// struct dplog_field_desc {
///     const char *name;      /* NUL-terminated field name */
///     uint32_t offset;       /* offsetof(struct my_record, field) */
///     uint32_t size;         /* sizeof(field) */
///     uint32_t kind;         /* FieldKind value: 1 u8 .. 14 bytes */
///     uint32_t ie_id;        /* IANA IPFIX element id, 0 if none */
///     const struct dplog_enum_name *enum_names; /* enum kind only */
///     size_t enum_count;
/// };
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DplogFieldDesc {
    /// NUL-terminated UTF-8 field name.
    pub name: *const c_char,
    /// Byte offset in the record, header included.
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
    /// A [`FieldKind`] value (1..=14).
    pub kind: u32,
    /// IANA IPFIX information-element id; 0 for none. `0x8000 | id` (id
    /// 1 to 32767) declares the field's enterprise element id instead (see
    /// [`ENTERPRISE_IE`](super::ENTERPRISE_IE)); other values above 32767
    /// are refused (`BadElementId`).
    pub ie_id: u32,
    /// Name table of an enum field, `enum_count` entries; may be null when
    /// `enum_count` is 0.
    pub enum_names: *const DplogEnumName,
    /// Entries in `enum_names`.
    pub enum_count: usize,
}

/// C ABI enum-name entry (`struct dplog_enum_name { uint32_t value; const
/// char *name; }`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DplogEnumName {
    /// The numeric value.
    pub value: u32,
    /// NUL-terminated UTF-8 name.
    pub name: *const c_char,
}
