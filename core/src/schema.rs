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
    /// IPFIX exporter; a field with 0 is exported as an enterprise-specific
    /// element (RFC 7011 section 3.2, see `dplog_formatters::ipfix`).
    pub ie_id: u16,
    /// Names of the values of an [`FieldKind::Enum`] field; empty otherwise.
    pub enum_names: Vec<EnumName>,
}

impl FieldDef {
    /// For an error about `value`, which is none of this enum field's
    /// names: says that names are matched as written, suggests the name
    /// `value` spells in another case, and lists the first dozen names
    /// (with how many more there are). Used by the tools' `--where`.
    pub fn enum_names_hint(&self, value: &str) -> String {
        const SHOWN: usize = 12;
        let names: Vec<&str> = self.enum_names.iter().map(|e| e.name.as_ref()).collect();
        let mut list = names
            .iter()
            .take(SHOWN)
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        if names.len() > SHOWN {
            list.push_str(&format!(" and {} more", names.len() - SHOWN));
        }
        let close = names
            .iter()
            .find(|n| n.eq_ignore_ascii_case(value))
            .map_or(String::new(), |n| format!("did you mean {n}? "));
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
    meta: SchemaMeta,
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
    /// A record type's name is not 1 to 32 characters of a letter or `_`
    /// then letters, digits, `_`, `.` or `-`.
    BadSchemaName(String),
    /// An enum field's descriptor counts names but its name table is a
    /// null pointer; the field's name.
    NullEnumNames(String),
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
    /// An enum table that does not suit its field: names on a field that
    /// is not an enum, a value too large for the field, a value named
    /// twice.
    BadEnum {
        /// Field name.
        field: String,
        /// What is wrong.
        problem: String,
    },
    /// An IPFIX element id above 32767 (RFC 7011 section 3.2: the top bit
    /// marks enterprise-specific elements).
    BadElementId {
        /// Field name.
        field: String,
        /// The id given.
        ie_id: u32,
    },
    /// Schema metadata names a field the schema does not have, or one of
    /// the wrong kind (what it is for, the field name).
    BadMetaField(&'static str, String),
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
            SchemaError::BadSchemaName(n) => write!(
                f,
                "bad record type name {n:?}: 1 to 32 characters, a letter or '_' then letters, digits, '_', '.' or '-'"
            ),
            SchemaError::NullEnumNames(field) => write!(
                f,
                "null pointer for the enum names of field {field:?} (enum_count is not 0)"
            ),
            SchemaError::DuplicateName(n) => write!(f, "field name {n} used twice"),
            SchemaError::UnknownKind { field, kind } => {
                write!(f, "field {field}: unknown kind {kind}")
            }
            SchemaError::NullPointer(what) => write!(f, "null pointer for {what}"),
            SchemaError::BadEnum { field, problem } => write!(f, "field {field}: {problem}"),
            SchemaError::BadElementId { field, ie_id } => write!(
                f,
                "field {field}: IPFIX element id {ie_id} is above 32767 (0 for none)"
            ),
            SchemaError::BadMetaField(what, field) => {
                write!(f, "{what}: no suitable field {field:?} in the schema")
            }
        }
    }
}

impl std::error::Error for SchemaError {}

/// An enum table suits its field: only on enum fields, every value fits
/// the field's size, no value named twice.
fn check_enum(f: &FieldDef) -> Result<(), SchemaError> {
    let bad = |problem: String| {
        Err(SchemaError::BadEnum {
            field: f.name.to_string(),
            problem,
        })
    };
    if f.enum_names.is_empty() {
        return Ok(());
    }
    if f.kind != FieldKind::Enum {
        return bad(format!(
            "names for values on a field of kind {}, not enum",
            f.kind.name()
        ));
    }
    let max = if f.size >= 4 {
        u64::from(u32::MAX)
    } else {
        (1u64 << (8 * f.size)) - 1
    };
    for (i, e) in f.enum_names.iter().enumerate() {
        if u64::from(e.value) > max {
            return bad(format!(
                "value {} ({:?}) does not fit the field's {} byte(s)",
                e.value, e.name, f.size
            ));
        }
        if f.enum_names[..i].iter().any(|o| o.value == e.value) {
            return bad(format!("value {} named twice", e.value));
        }
    }
    Ok(())
}

/// A record type's name: it is a syslog MSGID and SD-ID part, a TOML key
/// and a JSON/CSV value, so 1 to 32 characters of `[A-Za-z0-9_.-]`,
/// starting with a letter or `_`.
fn schema_name_ok(n: &str) -> bool {
    let mut c = n.chars();
    n.len() <= 32
        && matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '_' | '.' | '-'))
}

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
        let name = name.into();
        if !schema_name_ok(&name) {
            return Err(SchemaError::BadSchemaName(name.to_string()));
        }
        for (i, f) in fields.iter().enumerate() {
            if !name_ok(&f.name) {
                return Err(SchemaError::BadName(f.name.to_string()));
            }
            if f.ie_id > 0x7fff {
                return Err(SchemaError::BadElementId {
                    field: f.name.to_string(),
                    ie_id: u32::from(f.ie_id),
                });
            }
            check_enum(f)?;
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
        let mut s = Schema {
            id,
            name,
            size: size as u16,
            fields,
            meta: SchemaMeta::default(),
        };
        s.meta.event_time = s
            .fields
            .iter()
            .position(|f| matches!(f.kind, FieldKind::NsTimestamp | FieldKind::TscTimestamp));
        Ok(s)
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
            let ie_id = u16::try_from(d.ie_id)
                .ok()
                .filter(|&ie| ie <= 0x7fff)
                .ok_or_else(|| SchemaError::BadElementId {
                    field: fname.clone(),
                    ie_id: d.ie_id,
                })?;
            let mut f = FieldDef::new(fname, d.offset as usize, d.size as usize, kind, ie_id);
            if d.enum_count > 0 {
                if d.enum_names.is_null() {
                    return Err(SchemaError::NullEnumNames(f.name.to_string()));
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

    /// What formatters and the runtime need beyond the fields: event time,
    /// priority, syslog and IPFIX metadata (see [`SchemaMeta`]).
    pub fn meta(&self) -> &SchemaMeta {
        &self.meta
    }

    fn index_of(&self, what: &'static str, name: &str) -> Result<usize, SchemaError> {
        self.field(name)
            .map(|(i, _)| i)
            .ok_or_else(|| SchemaError::BadMetaField(what, name.to_string()))
    }

    fn integer_field(&self, what: &'static str, name: &str) -> Result<usize, SchemaError> {
        let i = self.index_of(what, name)?;
        if self.fields[i].kind.is_integer() && self.fields[i].size <= 8 {
            Ok(i)
        } else {
            Err(SchemaError::BadMetaField(what, name.to_string()))
        }
    }

    /// Declares which field is the record's event time: `Some(name)` of a
    /// [`FieldKind::NsTimestamp`] or [`FieldKind::TscTimestamp`] field, or
    /// `None` for a record without one. Default: the first timestamp field.
    /// The reorder window and the formats' message time read it.
    ///
    /// Errors: [`SchemaError::BadMetaField`] for a missing or non-timestamp
    /// field.
    pub fn with_event_time(mut self, field: Option<&str>) -> Result<Self, SchemaError> {
        self.meta.event_time = match field {
            None => None,
            Some(n) => {
                let i = self.index_of("event time", n)?;
                if !matches!(
                    self.fields[i].kind,
                    FieldKind::NsTimestamp | FieldKind::TscTimestamp
                ) {
                    return Err(SchemaError::BadMetaField("event time", n.to_string()));
                }
                Some(i)
            }
        };
        Ok(self)
    }

    /// Declares the record type's priority under the `degrade`
    /// backpressure policy ([`PRIORITY_NORMAL`](crate::record::PRIORITY_NORMAL)
    /// by default) and, optionally, priorities by the value of one integer
    /// field (`(field, [(value, priority)])`, e.g. a session delete
    /// outranking a create). Config can override the whole rule per type.
    ///
    /// Errors: [`SchemaError::BadMetaField`] for a missing or non-integer
    /// field.
    pub fn with_priority(
        mut self,
        default: u8,
        by_field: Option<(&str, &[(u64, u8)])>,
    ) -> Result<Self, SchemaError> {
        self.meta.priority = default;
        self.meta.priority_by = match by_field {
            None => None,
            Some((n, values)) => Some(FieldValues {
                field: self.integer_field("priority", n)?,
                values: values.to_vec(),
            }),
        };
        Ok(self)
    }

    /// Declares fields that the default text and JSON layouts print only
    /// when integer field `when` equals `equals` (e.g. a session's counters
    /// only on its delete); CSV leaves their cells empty otherwise, as JSON
    /// leaves their keys out. Syslog, IPFIX and binary print every field.
    ///
    /// Errors: [`SchemaError::BadMetaField`] for a missing field.
    pub fn with_fields_only_when(
        mut self,
        when: &str,
        equals: u64,
        fields: &[&str],
    ) -> Result<Self, SchemaError> {
        let field = self.integer_field("fields only when", when)?;
        let fields = fields
            .iter()
            .map(|n| self.index_of("fields only when", n))
            .collect::<Result<_, _>>()?;
        self.meta.only_when = Some(OnlyWhen {
            field,
            equals,
            fields,
        });
        Ok(self)
    }

    /// Sets the syslog metadata (RFC 5424 / RFC 3164 defaults of this
    /// record type); see [`SyslogMeta`]. Its field indexes must be this
    /// schema's: build it with [`SyslogMeta::resolve`].
    pub fn with_syslog(mut self, syslog: SyslogMeta) -> Self {
        self.meta.syslog = syslog;
        self
    }

    /// Declares that the IPFIX information element of field `field` is
    /// chosen by the value of integer field `selector` (`[(value, ie)]`;
    /// other values export no such element): one template per value. E.g.
    /// RFC 8158's natQuotaExceededEvent selects the limit's element.
    ///
    /// Errors: [`SchemaError::BadMetaField`] for a missing field.
    pub fn with_ipfix_ie_by(
        mut self,
        field: &str,
        selector: &str,
        ies: &[(u32, u16)],
    ) -> Result<Self, SchemaError> {
        self.meta.ipfix_ie_by = Some(IeBy {
            field: self.index_of("ipfix element by value", field)?,
            selector: self.integer_field("ipfix element by value", selector)?,
            ies: ies.to_vec(),
        });
        Ok(self)
    }

    /// Declares that the default text, JSON, CSV and syslog layouts name
    /// field `field` by the value of integer field `selector`
    /// (`[(value, name)]`; a record whose selector has another value
    /// leaves the field out), as [`Schema::with_ipfix_ie_by`] chooses its
    /// IPFIX element: e.g. RFC 8158's quota-exceeded limit is
    /// `maxSessionEntries`, ..., `maxFragmentsPendingReassembly` by
    /// natQuotaExceededEvent. The field keeps its own name for templates.
    ///
    /// Errors: [`SchemaError::BadMetaField`] for a missing field or a
    /// non-integer selector.
    pub fn with_name_by(
        mut self,
        field: &str,
        selector: &str,
        names: &[(u32, &'static str)],
    ) -> Result<Self, SchemaError> {
        self.meta.name_by = Some(NameBy {
            field: self.index_of("name by value", field)?,
            selector: self.integer_field("name by value", selector)?,
            names: names.iter().map(|&(v, n)| (v, Cow::Borrowed(n))).collect(),
        });
        Ok(self)
    }

    /// Replaces the whole [`SchemaMeta`] (e.g. one decoded from a
    /// shared-memory ring's description), checked as the `with_*`
    /// builders check theirs: the event time a timestamp field; the
    /// priority, only-when, MSGID and selector fields integers of at most
    /// 8 bytes; every other field index in range (syslog parameters and
    /// profiles included); name-by names identifiers.
    ///
    /// Errors: [`SchemaError::BadMetaField`] naming what it is for and the
    /// field (its index when out of range).
    pub fn with_meta(mut self, meta: SchemaMeta) -> Result<Self, SchemaError> {
        let n = self.fields.len();
        let bad = |what: &'static str, i: usize| SchemaError::BadMetaField(what, format!("#{i}"));
        let any = |what: &'static str, i: usize| if i < n { Ok(()) } else { Err(bad(what, i)) };
        let int = |what: &'static str, i: usize| {
            if i < n && self.fields[i].kind.is_integer() && self.fields[i].size <= 8 {
                Ok(())
            } else {
                Err(bad(what, i))
            }
        };
        if let Some(i) = meta.event_time {
            if i >= n
                || !matches!(
                    self.fields[i].kind,
                    FieldKind::NsTimestamp | FieldKind::TscTimestamp
                )
            {
                return Err(bad("event time", i));
            }
        }
        if let Some(p) = &meta.priority_by {
            int("priority", p.field)?;
        }
        if let Some(o) = &meta.only_when {
            int("fields only when", o.field)?;
            for &f in &o.fields {
                any("fields only when", f)?;
            }
        }
        fn syslog(
            m: &SyslogMeta,
            int: &dyn Fn(&'static str, usize) -> Result<(), SchemaError>,
            any: &dyn Fn(&'static str, usize) -> Result<(), SchemaError>,
        ) -> Result<(), SchemaError> {
            if let Some(v) = &m.msgid_by {
                int("syslog msgid", v.field)?;
            }
            for (_, p) in &m.params {
                if let SdParam::Field(i) = p {
                    any("syslog parameter", *i)?;
                }
            }
            for (_, l) in &m.profiles {
                syslog(l, int, any)?;
            }
            Ok(())
        }
        syslog(&meta.syslog, &int, &any)?;
        if let Some(b) = &meta.ipfix_ie_by {
            any("ipfix element by value", b.field)?;
            int("ipfix element by value", b.selector)?;
        }
        if let Some(b) = &meta.name_by {
            any("name by value", b.field)?;
            int("name by value", b.selector)?;
            if let Some((_, bad_name)) = b.names.iter().find(|(_, nm)| !name_ok(nm)) {
                return Err(SchemaError::BadMetaField(
                    "name by value",
                    bad_name.to_string(),
                ));
            }
        }
        self.meta = meta;
        Ok(self)
    }

    /// Makes the default layouts print enum fields as numbers (`true`) or
    /// by name (`false`, the default); see [`SchemaMeta::enum_numbers`].
    pub fn with_enum_numbers(mut self, numbers: bool) -> Self {
        self.meta.enum_numbers = numbers;
        self
    }

    /// The index and definition of the field called `name`.
    pub fn field(&self, name: &str) -> Option<(usize, &FieldDef)> {
        self.fields.iter().enumerate().find(|(_, f)| f.name == name)
    }

    /// Serialises the schema's identity and fields (not its [`SchemaMeta`])
    /// in the compact little-endian encoding of the binary log's `S` frame
    /// and of a shared-memory ring's schema descriptions:
    ///
    /// `id u16, record size u16, name, field count u16`, then per field
    /// `name, offset u16, size u16, kind u8 (C ABI value), IPFIX id u16,
    /// enum-name count u16` and per enum name `value u32, name`; a name is
    /// a length byte and that many UTF-8 bytes (names longer than 255
    /// bytes are cut: compare [`Schema::decode`]'s result when it
    /// matters).
    pub fn encode(&self) -> Vec<u8> {
        fn put_name(b: &mut Vec<u8>, s: &str) {
            let s = &s.as_bytes()[..s.len().min(255)];
            b.push(s.len() as u8);
            b.extend_from_slice(s);
        }
        let mut b = Vec::new();
        b.extend_from_slice(&self.id.to_le_bytes());
        b.extend_from_slice(&self.size.to_le_bytes());
        put_name(&mut b, &self.name);
        b.extend_from_slice(&(self.fields.len().min(u16::MAX as usize) as u16).to_le_bytes());
        for f in self.fields.iter().take(u16::MAX as usize) {
            put_name(&mut b, &f.name);
            b.extend_from_slice(&f.offset.to_le_bytes());
            b.extend_from_slice(&f.size.to_le_bytes());
            b.push(f.kind as u32 as u8);
            b.extend_from_slice(&f.ie_id.to_le_bytes());
            let n = f.enum_names.len().min(u16::MAX as usize);
            b.extend_from_slice(&(n as u16).to_le_bytes());
            for e in &f.enum_names[..n] {
                b.extend_from_slice(&e.value.to_le_bytes());
                put_name(&mut b, &e.name);
            }
        }
        b
    }

    /// Decodes one schema encoded by [`Schema::encode`] from the start of
    /// `b` and validates it with [`Schema::new`]; returns it and the bytes
    /// it took (trailing bytes are the caller's). Pure and bounded: it
    /// reads only `b`, and allocates at most in proportion to `b.len()`.
    ///
    /// Errors: a message naming what ended early, a bad kind or name, or
    /// the [`SchemaError`] of the decoded schema.
    pub fn decode(b: &[u8]) -> Result<(Schema, usize), String> {
        struct Rd<'a> {
            b: &'a [u8],
            p: usize,
        }
        impl<'a> Rd<'a> {
            fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
                if n > self.b.len() - self.p {
                    return Err("schema description ends early".into());
                }
                let s = &self.b[self.p..self.p + n];
                self.p += n;
                Ok(s)
            }
            fn u8(&mut self) -> Result<u8, String> {
                Ok(self.take(1)?[0])
            }
            fn u16(&mut self) -> Result<u16, String> {
                let s = self.take(2)?;
                Ok(u16::from_le_bytes([s[0], s[1]]))
            }
            fn u32(&mut self) -> Result<u32, String> {
                let s = self.take(4)?;
                Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
            }
            fn name(&mut self) -> Result<String, String> {
                let n = self.u8()? as usize;
                String::from_utf8(self.take(n)?.to_vec())
                    .map_err(|_| "name is not UTF-8".to_string())
            }
        }
        let mut r = Rd { b, p: 0 };
        let id = r.u16()?;
        let size = r.u16()? as usize;
        let name = r.name()?;
        let n = r.u16()?;
        // Every field takes at least 10 bytes: no allocation beyond the input.
        let mut fields = Vec::with_capacity((n as usize).min(b.len() / 10));
        for _ in 0..n {
            let fname = r.name()?;
            let offset = r.u16()? as usize;
            let fsize = r.u16()? as usize;
            let k = r.u8()?;
            let kind = FieldKind::from_u32(k as u32)
                .ok_or_else(|| format!("field {fname}: unknown kind {k}"))?;
            let ie = r.u16()?;
            let ne = r.u16()?;
            let mut f = FieldDef::new(fname, offset, fsize, kind, ie);
            for _ in 0..ne {
                let value = r.u32()?;
                f.enum_names.push(EnumName {
                    value,
                    name: Cow::Owned(r.name()?),
                });
            }
            fields.push(f);
        }
        let s = Schema::new(id, name, size, fields).map_err(|e| e.to_string())?;
        Ok((s, r.p))
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
    /// IANA IPFIX information-element id; 0 for none. Values above 32767
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
/// use dplog_core::{schema, RecordHeader};
/// #[repr(C)]
/// #[derive(Clone, Copy)]
/// struct AclDrop {
///     header: RecordHeader,
///     timestamp_ns: u64,
///     src_addr: u32,
///     rule: u32,
/// }
/// let s = schema!(AclDrop, id = 300, name = "aclDrop", [
///     timestamp_ns => "observationTimeMilliseconds": NsTimestamp, ie 323;
///     src_addr => "sourceIPv4Address": Ipv4, ie 8;
///     rule => "aclRule": U32, ie 0;
/// ]).unwrap();
/// assert_eq!(s.field("sourceIPv4Address").unwrap().1.offset, 16);
/// assert_eq!(s.meta().event_time, Some(0));
/// ```
///
/// Each entry is `rust_field => "name": Kind, ie N` optionally followed by
/// `, names &[(value, "name"), ...]` (any expression of type
/// `&[(u32, &'static str)]`) for enum fields. Offsets come from
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

/// Priorities (or other small values) by the value of one integer field.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FieldValues<T> {
    /// Index of the field in [`Schema::fields`].
    pub field: usize,
    /// `(field value, result)`; a value not listed takes the default.
    pub values: Vec<(u64, T)>,
}

/// Fields printed by the default text/JSON layouts only when another
/// field has one value; see [`Schema::with_fields_only_when`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct OnlyWhen {
    /// Index of the integer field tested.
    pub field: usize,
    /// The value that shows the fields.
    pub equals: u64,
    /// Indexes of the fields shown only then.
    pub fields: Vec<usize>,
}

/// An IPFIX element chosen by another field's value; see
/// [`Schema::with_ipfix_ie_by`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct IeBy {
    /// Index of the field whose element varies.
    pub field: usize,
    /// Index of the integer field whose value selects it.
    pub selector: usize,
    /// `(selector value, IANA element id)`.
    pub ies: Vec<(u32, u16)>,
}

/// A field's output name chosen by another field's value; see
/// [`Schema::with_name_by`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct NameBy {
    /// Index of the field whose name varies.
    pub field: usize,
    /// Index of the integer field whose value selects the name.
    pub selector: usize,
    /// `(selector value, name)`.
    pub names: Vec<(u32, Cow<'static, str>)>,
}

/// One RFC 5424 SD-PARAM (or RFC 3164 `NAME=value` pair) of a declared
/// syslog layout: a field's value or a constant.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SdParam {
    /// The value of the field with this index.
    Field(usize),
    /// A constant value (RFC 3164 omits it).
    Const(Cow<'static, str>),
}

/// Syslog metadata of a record type: what RFC 5424 and RFC 3164 print by
/// default. Everything is optional; without it a record is printed with
/// APP-NAME from the syslog options (default `dplog`), MSGID the schema
/// name, SD-ID `<schema name>@<enterprise>` and every field as a parameter
/// under its name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SyslogMeta {
    /// APP-NAME (RFC 5424) / TAG (RFC 3164) unless the options set one.
    pub app_name: Option<Cow<'static, str>>,
    /// MSGID by the value of an integer field (a value not listed prints
    /// in decimal).
    pub msgid_by: Option<FieldValues<Cow<'static, str>>>,
    /// SD-ID of the declared parameter layout (`name@enterprise` or an
    /// IANA-registered bare name), unless the options set one.
    pub sd_id: Option<Cow<'static, str>>,
    /// The parameters in order (PARAM-NAME, value); empty: every field
    /// under its own name.
    pub params: Vec<(Cow<'static, str>, SdParam)>,
    /// Other layouts of this record type by syslog profile name (e.g.
    /// `vpp`: VPP's exact NAT layout), chosen by the syslog options'
    /// `profile`; a profile not listed uses this layout.
    pub profiles: Vec<(Cow<'static, str>, SyslogMeta)>,
}

impl SyslogMeta {
    /// Builds syslog metadata for `schema` by field names: `app_name`,
    /// MSGID by `(field, [(value, msgid)])`, SD-ID and parameters as
    /// `(PARAM-NAME, source)` where a source starting with `=` is a
    /// constant and any other names a field.
    ///
    /// Errors: [`SchemaError::BadMetaField`] for a field the schema lacks.
    pub fn resolve(
        schema: &Schema,
        app_name: Option<&'static str>,
        msgid_by: Option<(&str, &[(u64, &'static str)])>,
        sd_id: Option<&'static str>,
        params: &[(&'static str, &'static str)],
    ) -> Result<SyslogMeta, SchemaError> {
        let msgid_by = match msgid_by {
            None => None,
            Some((n, values)) => Some(FieldValues {
                field: schema.integer_field("syslog msgid", n)?,
                values: values.iter().map(|&(v, m)| (v, Cow::Borrowed(m))).collect(),
            }),
        };
        let params = params
            .iter()
            .map(|&(name, src)| {
                let v = match src.strip_prefix('=') {
                    Some(c) => SdParam::Const(Cow::Borrowed(c)),
                    None => SdParam::Field(schema.index_of("syslog parameter", src)?),
                };
                Ok((Cow::Borrowed(name), v))
            })
            .collect::<Result<_, SchemaError>>()?;
        Ok(SyslogMeta {
            app_name: app_name.map(Cow::Borrowed),
            msgid_by,
            sd_id: sd_id.map(Cow::Borrowed),
            params,
            profiles: Vec::new(),
        })
    }

    /// This layout with `layout` as the one of syslog profile `name`.
    pub fn with_profile(mut self, name: &'static str, layout: SyslogMeta) -> SyslogMeta {
        self.profiles.push((Cow::Borrowed(name), layout));
        self
    }

    /// The layout of profile `name` (`None`: this one), this one if the
    /// record type declares none for it.
    pub fn for_profile(&self, name: Option<&str>) -> &SyslogMeta {
        name.and_then(|n| self.profiles.iter().find(|(p, _)| p == n))
            .map_or(self, |(_, m)| m)
    }
}

/// What a schema declares beyond its fields; see [`Schema::meta`] and the
/// `with_*` builders of [`Schema`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SchemaMeta {
    /// Index of the event-time field, if any (default: the first
    /// timestamp field).
    pub event_time: Option<usize>,
    /// Priority under `degrade` (default
    /// [`PRIORITY_NORMAL`](crate::record::PRIORITY_NORMAL)).
    pub priority: u8,
    /// Priorities by one field's value, over `priority`.
    pub priority_by: Option<FieldValues<u8>>,
    /// Fields the default text/JSON layouts print only conditionally.
    pub only_when: Option<OnlyWhen>,
    /// Syslog defaults.
    pub syslog: SyslogMeta,
    /// An IPFIX element chosen by another field's value.
    pub ipfix_ie_by: Option<IeBy>,
    /// A field named by another field's value in the default layouts.
    pub name_by: Option<NameBy>,
    /// The default text, JSON, CSV and syslog layouts print enum fields
    /// as numbers (as some collectors expect, e.g. NAT's natEvent) instead
    /// of their names. Default `false`: names.
    pub enum_numbers: bool,
}

impl Default for SchemaMeta {
    fn default() -> Self {
        Self {
            event_time: None,
            priority: crate::record::PRIORITY_NORMAL,
            priority_by: None,
            only_when: None,
            syslog: SyslogMeta::default(),
            ipfix_ie_by: None,
            name_by: None,
            enum_numbers: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        use crate::record::test_record::TestRecord;
        let names = [(4, "CREATE"), (5, "DELETE")];
        let s = crate::schema!(TestRecord, id = 1, name = "testSession", [
            timestamp_ns => "observationTimeMilliseconds": NsTimestamp, ie 323;
            nat_event => "event": Enum, ie 0, names &names;
            protocol => "protocolIdentifier": Protocol, ie 4;
            src_addr => "sourceIPv4Address": Ipv4, ie 8;
            src_port => "sourceTransportPort": Port, ie 7;
            initiator_octets => "initiatorOctets": U64, ie 231;
        ])
        .unwrap();
        assert_eq!(via_c(&s), s);
        assert_eq!(s.meta().event_time, Some(0));
    }

    #[test]
    fn metadata_names_real_fields_of_the_right_kind() {
        use crate::record::test_record::TestRecord;
        let s = crate::schema!(TestRecord, id = 1, name = "t", [
            timestamp_ns => "ts": NsTimestamp, ie 0;
            nat_event => "event": U8, ie 0;
            src_addr => "addr": Bytes, ie 0;
        ])
        .unwrap();
        let e = s.clone().with_event_time(Some("event")).unwrap_err();
        assert_eq!(e, SchemaError::BadMetaField("event time", "event".into()));
        assert!(s.clone().with_event_time(Some("nope")).is_err());
        assert_eq!(
            s.clone().with_event_time(None).unwrap().meta().event_time,
            None
        );
        let p = s
            .clone()
            .with_priority(1, Some(("event", &[(5, 2)])))
            .unwrap();
        assert_eq!(p.meta().priority_by.as_ref().unwrap().field, 1);
        assert!(s.clone().with_priority(1, Some(("addr", &[]))).is_err());
        let w = s
            .clone()
            .with_fields_only_when("event", 5, &["addr"])
            .unwrap();
        assert_eq!(w.meta().only_when.as_ref().unwrap().fields, [2]);
        let m = SyslogMeta::resolve(
            &s,
            Some("APP"),
            None,
            Some("x@1"),
            &[("A", "addr"), ("K", "=v")],
        )
        .unwrap();
        assert_eq!(m.params[0].1, SdParam::Field(2));
        assert_eq!(m.params[1].1, SdParam::Const("v".into()));
        assert!(SyslogMeta::resolve(&s, None, None, None, &[("A", "nope")]).is_err());
    }

    #[test]
    fn names_enum_tables_and_element_ids_are_checked() {
        let f = |n: &'static str, o, s, k| FieldDef::new(n, o, s, k, 0);
        let one = || vec![f("a", 8, 1, FieldKind::Enum)];
        for bad in ["", "lb conn", "x]\"y", "1abc", &"x".repeat(33)] {
            let e = Schema::new(9, bad.to_string(), 16, one()).unwrap_err();
            assert_eq!(e, SchemaError::BadSchemaName(bad.to_string()));
        }
        for good in ["aclDrop", "lb-conn.v2", "_x", &"x".repeat(32)] {
            assert!(
                Schema::new(9, good.to_string(), 16, one()).is_ok(),
                "{good}"
            );
        }
        let e = Schema::new(
            9,
            "x",
            16,
            vec![f("a", 8, 1, FieldKind::Enum).with_names(&[(300, "big")])],
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("value 300 (\"big\") does not fit"),
            "{e}"
        );
        let e = Schema::new(
            9,
            "x",
            16,
            vec![f("a", 8, 2, FieldKind::Enum).with_names(&[(1, "a"), (1, "b")])],
        )
        .unwrap_err();
        assert!(e.to_string().contains("value 1 named twice"), "{e}");
        let e = Schema::new(
            9,
            "x",
            16,
            vec![f("a", 8, 4, FieldKind::U32).with_names(&[(1, "a")])],
        )
        .unwrap_err();
        assert!(e.to_string().contains("not enum"), "{e}");
        let e = Schema::new(
            9,
            "x",
            16,
            vec![FieldDef::new("a", 8, 4, FieldKind::U32, 40000)],
        )
        .unwrap_err();
        assert_eq!(
            e,
            SchemaError::BadElementId {
                field: "a".into(),
                ie_id: 40000
            }
        );
        // From C, an id above 16 bits is refused, not truncated.
        let d = DplogFieldDesc {
            name: c"a".as_ptr(),
            offset: 8,
            size: 4,
            kind: FieldKind::U32 as u32,
            ie_id: 70_000,
            enum_names: std::ptr::null(),
            enum_count: 0,
        };
        // SAFETY: valid pointers to one descriptor and C strings.
        let e = unsafe { Schema::from_c_descriptors(1, c"s".as_ptr(), 16, &d, 1) }.unwrap_err();
        assert_eq!(
            e,
            SchemaError::BadElementId {
                field: "a".into(),
                ie_id: 70_000
            }
        );
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
        // SAFETY: the name is a NUL-terminated literal; a null `fields` is
        // refused before any descriptor is read.
        let e = unsafe { Schema::from_c_descriptors(1, c"s".as_ptr(), 16, std::ptr::null(), 2) }
            .unwrap_err();
        assert_eq!(e, SchemaError::NullPointer("field descriptors"));
        // A bad record type name is said as one, not as a field's.
        let ok = DplogFieldDesc {
            kind: FieldKind::U32 as u32,
            ..d
        };
        // SAFETY: the name is a NUL-terminated literal; `ok` is readable.
        let e =
            unsafe { Schema::from_c_descriptors(1, c"a b\n".as_ptr(), 16, &ok, 1) }.unwrap_err();
        assert_eq!(e, SchemaError::BadSchemaName("a b\n".into()));
        assert!(e.to_string().starts_with("bad record type name"), "{e}");
        // Enum names counted but not given: the field is named.
        let mut en = ok;
        en.kind = FieldKind::Enum as u32;
        en.size = 1;
        en.enum_count = 2;
        en.enum_names = std::ptr::null();
        // SAFETY: the name is a NUL-terminated literal; a null enum table
        // is refused before it is read.
        let e = unsafe { Schema::from_c_descriptors(1, c"s".as_ptr(), 16, &en, 1) }.unwrap_err();
        assert_eq!(e, SchemaError::NullEnumNames("a".into()));
    }
}
