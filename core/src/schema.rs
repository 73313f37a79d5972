//! Record schemas: field names, offsets and kinds.
//!
//! A [`Schema`] says how to read every field of one record type from the
//! record's bytes: its name (for NAT records the IANA IPFIX
//! information-element name, RFC 7012 / RFC 8158), its byte offset, its size
//! and its [`FieldKind`]. Formatters compile a schema once into a table of
//! operations and never look at the Rust type again, so a record declared
//! in C is formatted by exactly the same code as one declared in Rust.
//!
//! Two routes build a schema and both end in [`Schema::new`], which
//! validates it:
//! - Rust: the [`schema!`](crate::schema!) macro over a `#[repr(C)]` struct
//!   (offsets from `core::mem::offset_of!`, sizes from the field types);
//! - C: an array of [`DplogFieldDesc`] handed to
//!   [`Schema::from_c_descriptors`] (the C ABI crate exposes it).
//!
//! Integers, IPv4 addresses (host-order `u32`) and timestamps are stored in
//! the host's byte order; IPv6 addresses (16 bytes) and MAC addresses
//! (6 bytes) are stored in network order, as they appear on the wire.

use std::borrow::Cow;
use std::ffi::{c_char, CStr};
use std::fmt;

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
    /// IPFIX exporter; fields with 0 are not exported over IPFIX.
    pub ie_id: u16,
    /// Names of the values of an [`FieldKind::Enum`] field; empty otherwise.
    pub enum_names: Vec<EnumName>,
}

impl FieldDef {
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

/// Reads a host-order unsigned integer of `size` (1, 2, 4 or 8; other sizes
/// read 0) bytes at `off`.
#[inline(always)]
pub fn read_uint(rec: &[u8], off: usize, size: usize) -> u64 {
    match size {
        1 => rec[off] as u64,
        2 => u16::from_ne_bytes([rec[off], rec[off + 1]]) as u64,
        4 => u32::from_ne_bytes(rec[off..off + 4].try_into().unwrap_or([0; 4])) as u64,
        8 => u64::from_ne_bytes(rec[off..off + 8].try_into().unwrap_or([0; 8])),
        _ => 0,
    }
}

/// A validated record schema. Build one with [`Schema::new`], the
/// [`schema!`](crate::schema!) macro or [`Schema::from_c_descriptors`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Schema {
    id: u16,
    name: Cow<'static, str>,
    size: u16,
    fields: Vec<FieldDef>,
}

/// Why a schema was refused. Every variant names the field concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SchemaError {
    /// Record size below the 8-byte [`RecordHeader`](crate::RecordHeader)
    /// or above 65535.
    BadRecordSize(usize),
    /// A field's size does not suit its kind.
    BadSize {
        /// Field name.
        field: String,
        /// Its kind.
        kind: FieldKind,
        /// The size given.
        size: usize,
    },
    /// A field reaches past the end of the record or into the 8-byte header.
    OutOfBounds {
        /// Field name.
        field: String,
        /// Its offset.
        offset: usize,
        /// Its size.
        size: usize,
        /// The record size.
        record_size: usize,
    },
    /// Two fields overlap.
    Overlap(String, String),
    /// A field name is empty, not an identifier (`[A-Za-z_][A-Za-z0-9_]*`)
    /// or not UTF-8.
    BadName(String),
    /// Two fields share a name.
    DuplicateName(String),
    /// A C kind number that is not a [`FieldKind`].
    UnknownKind {
        /// Field name.
        field: String,
        /// The number given.
        kind: u32,
    },
    /// A null pointer where a name or array was required.
    NullPointer(&'static str),
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaError::BadRecordSize(s) => {
                write!(f, "record size {s} is outside 8..=65535 bytes")
            }
            SchemaError::BadSize { field, kind, size } => write!(
                f,
                "field {field}: size {size} does not suit kind {}",
                kind.name()
            ),
            SchemaError::OutOfBounds {
                field,
                offset,
                size,
                record_size,
            } => write!(
                f,
                "field {field}: bytes {offset}..{} are outside the record body 8..{record_size}",
                offset + size
            ),
            SchemaError::Overlap(a, b) => write!(f, "fields {a} and {b} overlap"),
            SchemaError::BadName(n) => write!(f, "bad field name {n:?}"),
            SchemaError::DuplicateName(n) => write!(f, "field name {n} used twice"),
            SchemaError::UnknownKind { field, kind } => {
                write!(f, "field {field}: unknown kind {kind}")
            }
            SchemaError::NullPointer(what) => write!(f, "null pointer for {what}"),
        }
    }
}

impl std::error::Error for SchemaError {}

fn name_ok(n: &str) -> bool {
    let mut c = n.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

impl Schema {
    /// Validates and builds a schema: the record is `size` bytes (8-byte
    /// header included), every field lies in `8..size`, suits its kind, has
    /// an identifier name used once, and no two fields overlap.
    pub fn new(
        id: u16,
        name: impl Into<Cow<'static, str>>,
        size: usize,
        fields: Vec<FieldDef>,
    ) -> Result<Schema, SchemaError> {
        if !(8..=u16::MAX as usize).contains(&size) {
            return Err(SchemaError::BadRecordSize(size));
        }
        for (i, f) in fields.iter().enumerate() {
            if !name_ok(&f.name) {
                return Err(SchemaError::BadName(f.name.to_string()));
            }
            if !f.kind.size_ok(f.size as usize) {
                return Err(SchemaError::BadSize {
                    field: f.name.to_string(),
                    kind: f.kind,
                    size: f.size as usize,
                });
            }
            let (o, s) = (f.offset as usize, f.size as usize);
            if o < 8 || o + s > size {
                return Err(SchemaError::OutOfBounds {
                    field: f.name.to_string(),
                    offset: o,
                    size: s,
                    record_size: size,
                });
            }
            for g in &fields[..i] {
                if g.name == f.name {
                    return Err(SchemaError::DuplicateName(f.name.to_string()));
                }
                let (go, gs) = (g.offset as usize, g.size as usize);
                if o < go + gs && go < o + s {
                    return Err(SchemaError::Overlap(g.name.to_string(), f.name.to_string()));
                }
            }
        }
        Ok(Schema {
            id,
            name: name.into(),
            size: size as u16,
            fields,
        })
    }

    /// Builds a schema from a C descriptor array; the result equals the one
    /// the same layout gives through [`Schema::new`] or
    /// [`schema!`](crate::schema!).
    ///
    /// # Errors
    /// Any [`SchemaError`]; a null `name`, `fields` (with `n_fields > 0`),
    /// field name or enum name is [`SchemaError::NullPointer`].
    ///
    /// # Safety
    /// `name` and every `name` in the descriptors must be null or point to
    /// NUL-terminated strings; `fields` must point to `n_fields` readable
    /// descriptors, and each descriptor's `enum_names` to `enum_count`
    /// readable [`DplogEnumName`]s. Nothing is retained after the call:
    /// strings are copied.
    pub unsafe fn from_c_descriptors(
        id: u16,
        name: *const c_char,
        record_size: usize,
        fields: *const DplogFieldDesc,
        n_fields: usize,
    ) -> Result<Schema, SchemaError> {
        let cstr = |p: *const c_char, what: &'static str| -> Result<String, SchemaError> {
            if p.is_null() {
                return Err(SchemaError::NullPointer(what));
            }
            // SAFETY: the caller guarantees a non-null `p` is NUL-terminated.
            let s = unsafe { CStr::from_ptr(p) };
            s.to_str()
                .map(str::to_owned)
                .map_err(|_| SchemaError::BadName(s.to_string_lossy().into_owned()))
        };
        let schema_name = cstr(name, "schema name")?;
        let descs: &[DplogFieldDesc] = if n_fields == 0 {
            &[]
        } else if fields.is_null() {
            return Err(SchemaError::NullPointer("field descriptors"));
        } else {
            // SAFETY: the caller guarantees `n_fields` readable descriptors.
            unsafe { std::slice::from_raw_parts(fields, n_fields) }
        };
        let mut out = Vec::with_capacity(descs.len());
        for d in descs {
            let fname = cstr(d.name, "field name")?;
            let kind = FieldKind::from_u32(d.kind).ok_or_else(|| SchemaError::UnknownKind {
                field: fname.clone(),
                kind: d.kind,
            })?;
            let mut f = FieldDef::new(
                fname,
                d.offset as usize,
                d.size as usize,
                kind,
                d.ie_id as u16,
            );
            if d.enum_count > 0 {
                if d.enum_names.is_null() {
                    return Err(SchemaError::NullPointer("enum names"));
                }
                // SAFETY: the caller guarantees `enum_count` readable entries.
                let names = unsafe { std::slice::from_raw_parts(d.enum_names, d.enum_count) };
                for e in names {
                    f.enum_names.push(EnumName {
                        value: e.value,
                        name: Cow::Owned(cstr(e.name, "enum name")?),
                    });
                }
            }
            out.push(f);
        }
        Schema::new(id, schema_name, record_size, out)
    }

    /// Schema id, as in [`RecordHeader::schema_id`](crate::RecordHeader).
    pub fn id(&self) -> u16 {
        self.id
    }

    /// Schema name, e.g. `nat44Session`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Record size in bytes, header included.
    pub fn size(&self) -> usize {
        self.size as usize
    }

    /// The fields in declaration (and default output) order.
    pub fn fields(&self) -> &[FieldDef] {
        &self.fields
    }

    /// The index and definition of the field called `name`.
    pub fn field(&self, name: &str) -> Option<(usize, &FieldDef)> {
        self.fields.iter().enumerate().find(|(_, f)| f.name == name)
    }
}

/// C ABI field descriptor (`struct dplog_field_desc`): one element of the
/// array passed to [`Schema::from_c_descriptors`].
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
    /// IANA IPFIX information-element id; 0 for none. Values above 65535
    /// are truncated.
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

/// A record type with a schema whose bytes may be read directly.
///
/// # Safety
/// The implementor must be `#[repr(C)]` with no padding bytes anywhere (so
/// every byte of a value is initialised) and [`HasSchema::schema`] must
/// describe it: `schema().size() == size_of::<Self>()` and every field lies
/// where the schema says.
pub unsafe trait HasSchema: crate::Record {
    /// The record type's schema.
    fn schema() -> &'static Schema;

    /// The record's bytes, header included.
    #[inline(always)]
    fn as_bytes(&self) -> &[u8] {
        // SAFETY: the trait's contract: repr(C) without padding, so all
        // size_of::<Self>() bytes are initialised; the borrow keeps `self`
        // alive for the slice's lifetime.
        unsafe {
            std::slice::from_raw_parts(
                (self as *const Self).cast::<u8>(),
                core::mem::size_of::<Self>(),
            )
        }
    }
}

/// Size of the field that `_f` projects to; used by [`schema!`](crate::schema!).
#[doc(hidden)]
pub const fn field_size<T, F>(_f: fn(&T) -> &F) -> usize {
    core::mem::size_of::<F>()
}

/// Declares a record type's schema from its `#[repr(C)]` struct.
///
/// ```
/// use dplog_core::{schema, schema::FieldKind, Nat44SessionRecord};
/// let s = schema!(Nat44SessionRecord, id = 1, name = "nat44Session", [
///     timestamp_ns => "observationTimeMilliseconds": NsTimestamp, ie 323;
///     src_addr => "sourceIPv4Address": Ipv4, ie 8;
/// ]).unwrap();
/// assert_eq!(s.field("sourceIPv4Address").unwrap().1.offset, 16);
/// ```
///
/// Each entry is `rust_field => "name": Kind, ie N` optionally followed by
/// `, names [(value, "name"), ...]` for enum fields. Offsets come from
/// `offset_of!`, sizes from the field types; the result is
/// [`Schema::new`]'s, so a kind/size mismatch is an error, not silence.
#[macro_export]
macro_rules! schema {
    ($ty:ty, id = $id:expr, name = $name:expr, [
        $( $field:ident => $fname:literal : $kind:ident, ie $ie:expr
           $(, names $names:expr)? ; )*
    ]) => {{
        let fields = vec![ $( {
            #[allow(unused_mut)]
            let mut f = $crate::schema::FieldDef::new(
                $fname,
                ::core::mem::offset_of!($ty, $field),
                $crate::schema::field_size(|r: &$ty| &r.$field),
                $crate::schema::FieldKind::$kind,
                $ie,
            );
            $( f = f.with_names($names); )?
            f
        } ),* ];
        $crate::schema::Schema::new($id, $name, ::core::mem::size_of::<$ty>(), fields)
    }};
}

/// The built-in NAT record schemas (RFC 8158 templates), field names the
/// IANA IPFIX information-element names.
pub mod nat {
    use super::{HasSchema, Schema};
    use crate::record::*;
    use std::sync::OnceLock;

    macro_rules! builtin {
        ($fn:ident, $ty:ty, $id:expr, $name:literal, [$($body:tt)*]) => {
            /// The schema of the record type of the same name.
            pub fn $fn() -> &'static Schema {
                static S: OnceLock<Schema> = OnceLock::new();
                S.get_or_init(|| {
                    crate::schema!($ty, id = $id, name = $name, [$($body)*])
                        .expect("built-in schema is valid (checked by tests)")
                })
            }
            // SAFETY: repr(C) without padding (size asserted in record.rs,
            // checked field by field in this module's tests) and described
            // by the schema built from its own offset_of! values.
            unsafe impl HasSchema for $ty {
                fn schema() -> &'static Schema {
                    $fn()
                }
            }
        };
    }

    builtin!(nat44_session, Nat44SessionRecord, SCHEMA_NAT44_SESSION, "nat44Session", [
        timestamp_ns => "observationTimeMilliseconds": NsTimestamp, ie 323;
        nat_event => "natEvent": Enum, ie 230, names &nat_event::NAMES;
        protocol => "protocolIdentifier": Protocol, ie 4;
        src_addr => "sourceIPv4Address": Ipv4, ie 8;
        src_port => "sourceTransportPort": Port, ie 7;
        post_nat_src_addr => "postNATSourceIPv4Address": Ipv4, ie 225;
        post_napt_src_port => "postNAPTSourceTransportPort": Port, ie 227;
        dst_addr => "destinationIPv4Address": Ipv4, ie 12;
        dst_port => "destinationTransportPort": Port, ie 11;
        ingress_vrf_id => "ingressVRFID": U32, ie 234;
        initiator_packets => "initiatorPackets": U32, ie 298;
        responder_packets => "responderPackets": U32, ie 299;
        initiator_octets => "initiatorOctets": U64, ie 231;
        responder_octets => "responderOctets": U64, ie 232;
    ]);

    builtin!(nat_port_block, NatPortBlockRecord, SCHEMA_NAT_PORT_BLOCK, "natPortBlock", [
        timestamp_ns => "observationTimeMilliseconds": NsTimestamp, ie 323;
        nat_event => "natEvent": Enum, ie 230, names &nat_event::NAMES;
        src_addr => "sourceIPv4Address": Ipv4, ie 8;
        post_nat_src_addr => "postNATSourceIPv4Address": Ipv4, ie 225;
        port_range_start => "portRangeStart": Port, ie 361;
        port_range_end => "portRangeEnd": Port, ie 362;
        port_range_step => "portRangeStepSize": U16, ie 363;
        port_range_num_ports => "portRangeNumPorts": U16, ie 364;
        ingress_vrf_id => "ingressVRFID": U32, ie 234;
    ]);

    builtin!(nat_addresses_exhausted, NatAddressesExhaustedRecord, SCHEMA_NAT_ADDRESSES_EXHAUSTED, "natAddressesExhausted", [
        timestamp_ns => "observationTimeMilliseconds": NsTimestamp, ie 323;
        nat_event => "natEvent": Enum, ie 230, names &nat_event::NAMES;
        nat_pool_id => "natPoolId": U32, ie 283;
    ]);

    builtin!(nat_ports_exhausted, NatPortsExhaustedRecord, SCHEMA_NAT_PORTS_EXHAUSTED, "natPortsExhausted", [
        timestamp_ns => "observationTimeMilliseconds": NsTimestamp, ie 323;
        nat_event => "natEvent": Enum, ie 230, names &nat_event::NAMES;
        post_nat_src_addr => "postNATSourceIPv4Address": Ipv4, ie 225;
        protocol => "protocolIdentifier": Protocol, ie 4;
    ]);

    builtin!(nat_quota_exceeded, NatQuotaExceededRecord, SCHEMA_NAT_QUOTA_EXCEEDED, "natQuotaExceeded", [
        timestamp_ns => "observationTimeMilliseconds": NsTimestamp, ie 323;
        nat_event => "natEvent": Enum, ie 230, names &nat_event::NAMES;
        quota_event => "natQuotaExceededEvent": Enum, ie 466, names &quota_event::NAMES;
        limit => "quotaLimit": U32, ie 0;
        src_addr => "sourceIPv4Address": Ipv4, ie 8;
    ]);

    /// Every built-in NAT schema, by ascending id (1..=5).
    pub fn all() -> [&'static Schema; 5] {
        [
            nat44_session(),
            nat_port_block(),
            nat_addresses_exhausted(),
            nat_ports_exhausted(),
            nat_quota_exceeded(),
        ]
    }

    /// The built-in schema with id `id`.
    pub fn by_id(id: u16) -> Option<&'static Schema> {
        all().into_iter().find(|s| s.id() == id)
    }

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
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::record::*;
    use std::ffi::CString;

    /// Builds `s` again through the C descriptor route.
    fn via_c(s: &Schema) -> Schema {
        let names: Vec<CString> = s
            .fields()
            .iter()
            .map(|f| CString::new(&*f.name).unwrap())
            .collect();
        let enum_cnames: Vec<Vec<CString>> = s
            .fields()
            .iter()
            .map(|f| {
                f.enum_names
                    .iter()
                    .map(|e| CString::new(&*e.name).unwrap())
                    .collect()
            })
            .collect();
        let enum_tables: Vec<Vec<DplogEnumName>> = s
            .fields()
            .iter()
            .zip(&enum_cnames)
            .map(|(f, cn)| {
                f.enum_names
                    .iter()
                    .zip(cn)
                    .map(|(e, c)| DplogEnumName {
                        value: e.value,
                        name: c.as_ptr(),
                    })
                    .collect()
            })
            .collect();
        let descs: Vec<DplogFieldDesc> = s
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| DplogFieldDesc {
                name: names[i].as_ptr(),
                offset: f.offset as u32,
                size: f.size as u32,
                kind: f.kind as u32,
                ie_id: f.ie_id as u32,
                enum_names: enum_tables[i].as_ptr(),
                enum_count: enum_tables[i].len(),
            })
            .collect();
        let sname = CString::new(s.name()).unwrap();
        // SAFETY: every pointer points into the vectors above, alive here.
        unsafe {
            Schema::from_c_descriptors(
                s.id(),
                sname.as_ptr(),
                s.size(),
                descs.as_ptr(),
                descs.len(),
            )
        }
        .unwrap()
    }

    #[test]
    fn the_c_route_gives_the_same_schema_as_the_macro() {
        for s in nat::all() {
            assert_eq!(&via_c(s), s, "{}", s.name());
        }
    }

    #[test]
    fn nat44_schema_matches_the_documented_layout_and_iana_ids() {
        let s = nat::nat44_session();
        assert_eq!((s.id(), s.size()), (SCHEMA_NAT44_SESSION, 64));
        let got: Vec<(&str, u16, u16, u16)> = s
            .fields()
            .iter()
            .map(|f| (&*f.name, f.offset, f.size, f.ie_id))
            .collect();
        assert_eq!(
            got,
            [
                ("observationTimeMilliseconds", 8, 8, 323),
                ("natEvent", 35, 1, 230),
                ("protocolIdentifier", 34, 1, 4),
                ("sourceIPv4Address", 16, 4, 8),
                ("sourceTransportPort", 28, 2, 7),
                ("postNATSourceIPv4Address", 20, 4, 225),
                ("postNAPTSourceTransportPort", 30, 2, 227),
                ("destinationIPv4Address", 24, 4, 12),
                ("destinationTransportPort", 32, 2, 11),
                ("ingressVRFID", 36, 4, 234),
                ("initiatorPackets", 40, 4, 298),
                ("responderPackets", 44, 4, 299),
                ("initiatorOctets", 48, 8, 231),
                ("responderOctets", 56, 8, 232),
            ]
        );
        assert_eq!(
            s.field("natEvent").unwrap().1.enum_name(16),
            Some("PORT_BLOCK_ALLOCATION")
        );
    }

    #[test]
    fn builtin_records_have_no_padding_and_read_back() {
        // Field sizes plus header and reserved bytes cover each record exactly.
        for (s, reserved) in [
            (nat::nat44_session(), 0),
            (nat::nat_port_block(), 3),
            (nat::nat_addresses_exhausted(), 3),
            (nat::nat_ports_exhausted(), 2),
            (nat::nat_quota_exceeded(), 3),
        ] {
            let used: usize = s.fields().iter().map(|f| f.size as usize).sum();
            assert_eq!(8 + used + reserved, s.size(), "{}", s.name());
        }
        let r = NatPortBlockRecord {
            src_addr: 0x0A00_0001,
            port_range_start: 1024,
            port_range_end: 1535,
            port_range_num_ports: 512,
            ingress_vrf_id: 9,
            ..Default::default()
        };
        let b = r.as_bytes();
        let s = NatPortBlockRecord::schema();
        let v = |n| s.field(n).unwrap().1.read_uint(b);
        assert_eq!(v("sourceIPv4Address"), 0x0A00_0001);
        assert_eq!(v("portRangeEnd"), 1535);
        assert_eq!(v("portRangeNumPorts"), 512);
        assert_eq!(v("ingressVRFID"), 9);
        assert_eq!(v("natEvent"), 16);
        let q = NatRecord::from(NatQuotaExceededRecord {
            quota_event: quota_event::MAX_ENTRIES_PER_USER,
            limit: 300,
            ..Default::default()
        });
        assert_eq!(q.header().schema_id, SCHEMA_NAT_QUOTA_EXCEEDED);
        assert_eq!(q.as_bytes().len(), 32);
        assert_eq!(NatRecord::from_bytes(q.as_bytes()), Some(q));
        assert_eq!(NatRecord::from_bytes(&q.as_bytes()[..20]), None);
        assert_eq!(nat::EventProfile::Legacy.map(4), 1);
        assert_eq!(nat::EventProfile::Legacy.map(17), 17);
    }

    #[test]
    fn kinds_round_trip_through_their_c_values() {
        for k in FieldKind::ALL {
            assert_eq!(FieldKind::from_u32(k as u32), Some(k));
        }
        assert_eq!(FieldKind::from_u32(0), None);
        assert_eq!(FieldKind::from_u32(15), None);
    }

    #[test]
    fn bad_schemas_are_refused_with_the_field_named() {
        let f = |n: &'static str, o, s, k| FieldDef::new(n, o, s, k, 0);
        let e = Schema::new(9, "x", 16, vec![f("a", 8, 2, FieldKind::U32)]).unwrap_err();
        assert!(e.to_string().contains("field a: size 2"), "{e}");
        let e = Schema::new(9, "x", 16, vec![f("a", 4, 4, FieldKind::U32)]).unwrap_err();
        assert!(
            matches!(e, SchemaError::OutOfBounds { offset: 4, .. }),
            "{e}"
        );
        let e = Schema::new(9, "x", 16, vec![f("a", 14, 4, FieldKind::U32)]).unwrap_err();
        assert!(e.to_string().contains("8..16"), "{e}");
        let e = Schema::new(
            9,
            "x",
            16,
            vec![f("a", 8, 4, FieldKind::U32), f("b", 10, 2, FieldKind::U16)],
        )
        .unwrap_err();
        assert_eq!(e, SchemaError::Overlap("a".into(), "b".into()));
        let e = Schema::new(
            9,
            "x",
            16,
            vec![f("a", 8, 4, FieldKind::U32), f("a", 12, 4, FieldKind::U32)],
        )
        .unwrap_err();
        assert_eq!(e, SchemaError::DuplicateName("a".into()));
        let e = Schema::new(9, "x", 16, vec![f("1a", 8, 4, FieldKind::U32)]).unwrap_err();
        assert_eq!(e, SchemaError::BadName("1a".into()));
        assert_eq!(
            Schema::new(9, "x", 4, vec![]).unwrap_err(),
            SchemaError::BadRecordSize(4)
        );
        assert!(Schema::new(9, "x", 24, vec![f("e", 8, 3, FieldKind::Enum)]).is_err());
        assert!(Schema::new(9, "x", 24, vec![f("s", 8, 16, FieldKind::Bytes)]).is_ok());
    }

    #[test]
    fn c_descriptors_reject_nulls_and_unknown_kinds() {
        let n = c"a";
        let d = DplogFieldDesc {
            name: n.as_ptr(),
            offset: 8,
            size: 4,
            kind: 99,
            ie_id: 0,
            enum_names: std::ptr::null(),
            enum_count: 0,
        };
        // SAFETY: valid pointers to one descriptor and C strings.
        let e = unsafe { Schema::from_c_descriptors(1, c"s".as_ptr(), 16, &d, 1) }.unwrap_err();
        assert_eq!(
            e,
            SchemaError::UnknownKind {
                field: "a".into(),
                kind: 99
            }
        );
        // SAFETY: null pointers are checked before use.
        let e = unsafe { Schema::from_c_descriptors(1, std::ptr::null(), 16, &d, 1) }.unwrap_err();
        assert_eq!(e, SchemaError::NullPointer("schema name"));
        let e = unsafe { Schema::from_c_descriptors(1, c"s".as_ptr(), 16, std::ptr::null(), 2) }
            .unwrap_err();
        assert_eq!(e, SchemaError::NullPointer("field descriptors"));
    }
}
