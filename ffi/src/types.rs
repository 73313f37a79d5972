//! C types and constants that are not specific to a record type: the
//! record header, record and reservation sizes, the field and enum
//! descriptors of `dplog_schema_register` (`DPLOG_FIELD_*`) and its
//! first schema id, the consumer limit. Each C type is checked at compile time against the core type it
//! stands for.

use std::ffi::c_char;

use dplog::schema::{DplogEnumName, DplogFieldDesc};
use dplog::RecordHeader;

/// First schema id `dplog_schema_register` hands out (then 257, ...).
pub const DPLOG_SCHEMA_USER_FIRST: u16 = 256;

/// Largest record, header included, that any logger takes: one 128-byte
/// ring slot (`[ring] slot_bytes = 128`). A logger takes records up to its
/// own slot size (`dplog_slot_bytes`): 64 bytes unless its config says
/// otherwise.
pub const DPLOG_RECORD_MAX_SIZE: usize = 128;

/// Ring slot size of a logger whose config has no `[ring] slot_bytes`,
/// in bytes. `[ring] slot_bytes` may be 32, 64 or 128.
pub const DPLOG_SLOT_BYTES_DEFAULT: usize = 64;

/// Field kind (`struct dplog_field_desc.kind`): unsigned 8-bit integer, size 1.
pub const DPLOG_FIELD_U8: u32 = 1;
/// Unsigned 16-bit integer, host order, size 2.
pub const DPLOG_FIELD_U16: u32 = 2;
/// Unsigned 32-bit integer, host order, size 4.
pub const DPLOG_FIELD_U32: u32 = 3;
/// Unsigned 64-bit integer, host order, size 8.
pub const DPLOG_FIELD_U64: u32 = 4;
/// Boolean, one byte (0 false, anything else true).
pub const DPLOG_FIELD_BOOL: u32 = 5;
/// IPv4 address as a host-order `uint32_t`, size 4.
pub const DPLOG_FIELD_IPV4: u32 = 6;
/// IPv6 address, 16 bytes in network order.
pub const DPLOG_FIELD_IPV6: u32 = 7;
/// Transport port (or ICMP identifier), host-order `uint16_t`.
pub const DPLOG_FIELD_PORT: u32 = 8;
/// IP protocol number, one byte.
pub const DPLOG_FIELD_PROTOCOL: u32 = 9;
/// MAC address, 6 bytes in network order.
pub const DPLOG_FIELD_MAC: u32 = 10;
/// TSC timestamp (`uint64_t` cycles).
pub const DPLOG_FIELD_TSC_TIMESTAMP: u32 = 11;
/// Nanoseconds since the Unix epoch, `uint64_t`.
pub const DPLOG_FIELD_NS_TIMESTAMP: u32 = 12;
/// Enumeration (integer of size 1, 2 or 4) with a name table.
pub const DPLOG_FIELD_ENUM: u32 = 13;
/// Fixed-size byte string, NUL-padded.
pub const DPLOG_FIELD_BYTES: u32 = 14;

/// `dplog_field_desc.ie_id = DPLOG_IE_ENTERPRISE | id` declares the
/// field's IPFIX enterprise element id `id` (1 to 32767) under `[format.ipfix]
/// enterprise_number`, instead of the id derived from its name and type;
/// the field then has no IANA element. The same id for the same field
/// name and type in several record types is one element; an id that
/// another field of the type takes is refused by `dplog_schema_register`
/// (`DPLOG_ERR_INVALID_ARG`), one that a field of another registered type
/// with another name or type takes by `dplog_start` (`DPLOG_ERR_CONFIG`).
pub const DPLOG_IE_ENTERPRISE: u32 = 0x8000;
const _: () = assert!(DPLOG_IE_ENTERPRISE == dplog::schema::ENTERPRISE_IE as u32);
const _: () = {
    use dplog::FieldKind as K;
    assert!(DPLOG_FIELD_U8 == K::U8 as u32 && DPLOG_FIELD_U16 == K::U16 as u32);
    assert!(DPLOG_FIELD_U32 == K::U32 as u32 && DPLOG_FIELD_U64 == K::U64 as u32);
    assert!(DPLOG_FIELD_BOOL == K::Bool as u32 && DPLOG_FIELD_IPV4 == K::Ipv4 as u32);
    assert!(DPLOG_FIELD_IPV6 == K::Ipv6 as u32 && DPLOG_FIELD_PORT == K::Port as u32);
    assert!(DPLOG_FIELD_PROTOCOL == K::Protocol as u32 && DPLOG_FIELD_MAC == K::Mac as u32);
    assert!(DPLOG_FIELD_TSC_TIMESTAMP == K::TscTimestamp as u32);
    assert!(DPLOG_FIELD_NS_TIMESTAMP == K::NsTimestamp as u32);
    assert!(DPLOG_FIELD_ENUM == K::Enum as u32 && DPLOG_FIELD_BYTES == K::Bytes as u32);
};
/// Most consumer cores one `dplog_start` takes.
pub const DPLOG_CONSUMERS_MAX: usize = 64;
// The same bound as the Rust config's `[consumers]`.
const _: () = assert!(DPLOG_CONSUMERS_MAX == dplog::config::ConsumersConfig::MAX);
/// Most records one `dplog_reserve` hands out.
pub const DPLOG_RESERVE_MAX: usize = 64;

/// Header at offset 0 of every record, 8 bytes. `dplog_log`,
/// `dplog_log_burst` and `dplog_commit` overwrite it with `len` and
/// `schema_id` from their arguments and zero `flags` and `reserved`, so C
/// code may leave it zeroed.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct dplog_record_header {
    /// Total record length in bytes, header included.
    pub len: u16,
    /// Schema id, e.g. `DPLOG_SCHEMA_NAT44_SESSION`.
    pub schema_id: u16,
    /// Record flags; 0.
    pub flags: u16,
    /// Reserved; 0.
    pub reserved: u16,
}

// The C header is the core's, byte for byte.
const _: () = {
    use core::mem::size_of;
    assert!(size_of::<dplog_record_header>() == size_of::<RecordHeader>());
};

/// One field of a user record type, for `dplog_schema_register` (the C
/// view of `dplog::schema::DplogFieldDesc`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct dplog_field_desc {
    /// NUL-terminated UTF-8 field name, an identifier
    /// (`[A-Za-z_][A-Za-z0-9_]*`), the key in formatted output. Copied.
    pub name: *const c_char,
    /// Byte offset in the record (`offsetof`), at least 8 (after the header).
    pub offset: u32,
    /// Size in bytes (`sizeof` the member); must suit `kind`.
    pub size: u32,
    /// One of `DPLOG_FIELD_*`.
    pub kind: u32,
    /// IANA IPFIX information-element id; 0 for none: the field goes out
    /// as an enterprise element whose id is derived from its name and
    /// type (two types' fields of one name and type share it; a name
    /// whose id another field of the type takes is refused, naming
    /// both). `DPLOG_IE_ENTERPRISE | id` declares that id instead.
    pub ie_id: u32,
    /// Name table of a `DPLOG_FIELD_ENUM` field (`enum_count` entries), or NULL.
    pub enum_names: *const dplog_enum_name,
    /// Entries in `enum_names`.
    pub enum_count: usize,
}

/// One entry of an enum field's name table. The name is copied.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct dplog_enum_name {
    /// The numeric value.
    pub value: u32,
    /// NUL-terminated UTF-8 name.
    pub name: *const c_char,
}

// Same layout as the core's descriptor types, so the array is passed as is.
const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    type F = dplog_field_desc;
    type D = DplogFieldDesc;
    assert!(size_of::<F>() == size_of::<D>() && align_of::<F>() == align_of::<D>());
    assert!(offset_of!(F, name) == offset_of!(D, name));
    assert!(offset_of!(F, offset) == offset_of!(D, offset));
    assert!(offset_of!(F, size) == offset_of!(D, size));
    assert!(offset_of!(F, kind) == offset_of!(D, kind));
    assert!(offset_of!(F, ie_id) == offset_of!(D, ie_id));
    assert!(offset_of!(F, enum_names) == offset_of!(D, enum_names));
    assert!(offset_of!(F, enum_count) == offset_of!(D, enum_count));
    assert!(size_of::<dplog_enum_name>() == size_of::<DplogEnumName>());
    assert!(offset_of!(dplog_enum_name, value) == offset_of!(DplogEnumName, value));
    assert!(offset_of!(dplog_enum_name, name) == offset_of!(DplogEnumName, name));
};
