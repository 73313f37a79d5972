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
//!
//! Beyond its fields a schema declares metadata ([`SchemaMeta`], set by
//! the `with_*` builders: event time, priority, syslog layout, IPFIX
//! and name choices by value, its [`Lifecycle`]); it travels with every
//! log in the schema's description ([`Schema::encode`]), so a reader
//! formats and queries any log as its writer declared it, without the
//! writer's code.
//!
//! # Encoding: one description per schema (little endian)
//!
//! A *description* is the schema's fields, then its metadata:
//!
//! 1. fields ([`Schema::encode_fields`]): `id u16, record size u16,
//!    name, field count u16`, then per field `name, offset u16, size u16,
//!    kind u8 (C ABI value), IPFIX id u16, enum-name count u16` and per
//!    enum name `value u32, name`; a name is a length byte and that many
//!    UTF-8 bytes;
//! 2. metadata ([`encode_meta`]): a version byte, then the
//!    [`SchemaMeta`] that version carries.
//!
//! Versions of the metadata: **1** carries everything but the
//! lifecycle; **2** adds the [`Lifecycle`]; **3** adds the IPFIX
//! enterprise element ids ([`EnterpriseIes`]); **4** derives an enum
//! field's id as a class of its own ([`enterprise_class`]). A writer
//! writes version 4 (a reader of versions 1 to 3 refuses it); a reader
//! reads every version, and refuses one above [`META_VERSION`] with an
//! error that says so ("written by a newer dplog"). A schema read from
//! version 1 or 2 keeps the enterprise element ids its writer exported
//! (each field's position, [`EnterpriseIes::by_position`]), one read
//! from version 3 its enum fields' ids as that writer derived them
//! ([`EnterpriseIes::enums_as_unsigned`]).
//!
//! A description that ends after its fields (no metadata) is what every
//! container held before the metadata travelled with it: it decodes with
//! the default [`SchemaMeta`] (the first timestamp field as event time,
//! normal priority, no syslog layout), its enterprise element ids by
//! position as its writer exported them. A container knows where each
//! description ends (a frame, block or entry length), so the decoder
//! reads a whole description ([`Schema::decode`]).

mod codec;
mod enterprise;
mod fields;
mod iana;
mod meta;

pub use codec::*;
pub use enterprise::*;
pub use fields::*;
pub use iana::*;
pub use meta::*;

use std::borrow::Cow;
use std::ffi::{c_char, CStr};
use std::fmt;

/// A validated record schema. Build one with [`Schema::new`], the
/// [`schema!`](crate::schema!) macro or [`Schema::from_c_descriptors`].
///
/// A schema is the record type's fields (name, offset, size, kind, IPFIX
/// element, enum names) and what it declares beyond them
/// ([`SchemaMeta`]: event time, priority, syslog layout, lifecycle).
/// Every log carries it whole ([`Schema::encode`]), so the tools format a
/// log exactly as its writer would without knowing the type.
///
/// # Examples
///
/// ```
/// use dplog_core::schema::{FieldDef, FieldKind, Schema};
///
/// // A load balancer's connection record: 8 bytes of record header,
/// // then the fields at their offsets; 40 bytes in all.
/// let conn = Schema::new(500, "lbConn", 40, vec![
///     FieldDef::new("connTime", 8, 8, FieldKind::NsTimestamp, 0),
///     FieldDef::new("vip", 16, 4, FieldKind::Ipv4, 0),
///     FieldDef::new("clientAddr", 20, 4, FieldKind::Ipv4, 0),
///     FieldDef::new("vport", 24, 2, FieldKind::Port, 0),
///     FieldDef::new("clientPort", 26, 2, FieldKind::Port, 0),
///     FieldDef::new("connEvent", 28, 1, FieldKind::Enum, 0)
///         .with_names(&[(1, "OPEN"), (2, "CLOSE")]),
///     FieldDef::new("bytesOut", 32, 8, FieldKind::U64, 0),
/// ])?
/// // A close outranks an open under `degrade`.
/// .with_priority(1, Some(("connEvent", &[(2, 2)])))?
/// // `dplog-query --at` finds who held vip:vport at a time.
/// .with_lifecycle("connEvent", &[1], &[2], &["vip", "vport", "clientAddr", "clientPort"], &["bytesOut"])?;
///
/// let bytes = conn.encode()?; // what a binary log or archive carries
/// let back = Schema::decode(&bytes)?;
/// assert_eq!(back, conn);
/// assert_eq!(back.field("connEvent").unwrap().1.enum_name(2), Some("CLOSE"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
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
    /// A field name is empty or not an identifier
    /// (`[A-Za-z_][A-Za-z0-9_]*`).
    BadName(String),
    /// A name given over the C ABI (`what`: schema name, field name or
    /// enum name) is not UTF-8; the name with each bad byte sequence as
    /// U+FFFD.
    NotUtf8 {
        /// Which name.
        what: &'static str,
        /// The name, lossily decoded.
        lossy: String,
    },
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
    /// A field declared with an IANA element it cannot carry: a kind or
    /// width that is not the element's abstract data type
    /// ([`iana_type_fit`]).
    ElementType {
        /// Field name.
        field: String,
        /// Its kind.
        kind: FieldKind,
        /// Its size in bytes.
        size: usize,
        /// The IANA element id.
        ie_id: u16,
        /// The element's name.
        element: &'static str,
        /// The element's abstract data type.
        element_type: IanaType,
        /// What does not fit.
        why: &'static str,
    },
    /// Schema metadata names a field the schema does not have, or one of
    /// the wrong kind (what it is for, the field name).
    BadMetaField(&'static str, String),
    /// Schema metadata lists a value of an integer field that the field
    /// cannot hold, or one value twice (what it is for, the field name,
    /// the problem).
    BadMetaValue(&'static str, String, String),
    /// A lifecycle that cannot work (see [`Schema::with_lifecycle`]):
    /// what is wrong.
    BadLifecycle(String),
    /// The schema does not fit its encoding, or a reader would refuse it
    /// (see [`Schema::encode`]): the schema and what.
    NotEncodable(String),
    /// A schema declared without fields (its name): every format would
    /// write an empty record (`{}`, an empty line).
    NoFields(String),
    /// More field descriptors than a record of that size can hold (each
    /// field takes at least one of the `record_size - 8` bytes after the
    /// header), refused before anything is allocated for them.
    TooManyFields {
        /// The descriptor count given.
        n_fields: usize,
        /// The record size given.
        record_size: usize,
    },
    /// A field name a format uses for its own keys or columns (see
    /// [`reserved_field_name`]): the field's name and the format's use.
    ReservedName {
        /// Field name.
        field: String,
        /// What the name already means in the output.
        why: &'static str,
    },
}

/// [`SchemaError::ElementType`] if `field` cannot carry IANA element `ie`
/// (1 to 32767, and in the registry table); enterprise ids and 0 pass.
pub(crate) fn check_iana_type(field: &FieldDef, ie: u16) -> Result<(), SchemaError> {
    if ie == 0 || ie >= ENTERPRISE_IE {
        return Ok(());
    }
    let Some((element, element_type)) = iana_element(ie) else {
        return Ok(());
    };
    match iana_type_fit(field.kind, field.size as usize, element_type) {
        None => Ok(()),
        Some(why) => Err(SchemaError::ElementType {
            field: field.name.to_string(),
            kind: field.kind,
            size: field.size as usize,
            ie_id: ie,
            element,
            element_type,
            why,
        }),
    }
}

/// Whether `name` is reserved: a format writes it as a key or column of
/// its own beside a record's fields, so a field of that name would make
/// the output ambiguous (a JSON object with the key twice, a CSV column
/// twice, a record read as a drop report). Returns what the name means
/// there, or `None` for a name fields may take.
///
/// Reserved (case-sensitive, as JSON keys and CSV headers are):
/// - `timestamp`: the record's event time, JSON's first key and the
///   second CSV column;
/// - `recordType`: the first CSV column, the record type's name;
/// - every name that starts with `dplog`: dplog's own keys and columns
///   (JSON's `dplogEvent` marks a drop report; the CSV drop-report columns
///   `dplogDropped`, `dplogDropRing`, `dplogDropReason`,
///   `dplogFirstDropWallClock`, `dplogLastDropWallClock`), present and to
///   come;
/// - every name that starts with `_dplog`: aliases in the SQL dplog
///   writes for ClickHouse (`dplog-query ddl --clickhouse`).
///
/// [`Schema::new`] (and so [`schema!`](crate::schema!) and
/// [`Schema::from_c_descriptors`]) refuses such a field name with
/// [`SchemaError::ReservedName`]; a schema decoded from a log
/// ([`Schema::decode`]) is read as it was written.
///
/// # Examples
///
/// ```
/// use dplog_core::schema::reserved_field_name;
///
/// assert!(reserved_field_name("timestamp").is_some());
/// assert!(reserved_field_name("dplogDropped").is_some());
/// assert_eq!(reserved_field_name("eventTime"), None);
/// assert_eq!(reserved_field_name("dropped"), None);
/// ```
pub fn reserved_field_name(name: &str) -> Option<&'static str> {
    match name {
        "timestamp" => Some("the record's event time in JSON and CSV"),
        "recordType" => Some("the CSV column of the record type"),
        n if n.starts_with("dplog") => {
            Some("names starting with dplog are dplog's own keys and columns, the drop reports' among them")
        }
        n if n.starts_with("_dplog") => {
            Some("names starting with _dplog are aliases in the SQL dplog writes (ClickHouse)")
        }
        _ => None,
    }
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
            SchemaError::NotUtf8 { what, lossy } => write!(f, "{what} {lossy:?} is not UTF-8"),
            SchemaError::BadEnum { field, problem } => write!(f, "field {field}: {problem}"),
            SchemaError::BadElementId { field, ie_id } => write!(
                f,
                "field {field}: IPFIX element id {ie_id} is neither an IANA element (1 to 32767, 0 for none) nor an enterprise one (0x8000 | 1 to 32767)"
            ),
            SchemaError::ElementType {
                field,
                kind,
                size,
                ie_id,
                element,
                element_type,
                why,
            } => write!(
                f,
                "field {field} ({kind:?}, {size} bytes) cannot be IANA element {ie_id}, {element} \
                 ({}): {why} (RFC 7011 section 6); give it the element of its type, or ie 0 \
                 for an enterprise element of its own",
                element_type.name()
            ),
            SchemaError::BadMetaField(what, field) => {
                write!(f, "{what}: no suitable field {field:?} in the schema")
            }
            SchemaError::BadMetaValue(what, field, problem) => {
                write!(f, "{what}: field {field}: {problem}")
            }
            SchemaError::BadLifecycle(m) => write!(f, "lifecycle: {m}"),
            SchemaError::NotEncodable(m) => write!(f, "{m}"),
            SchemaError::NoFields(n) => write!(
                f,
                "record type {n} has no fields: declare at least one (every format would write an empty record)"
            ),
            SchemaError::TooManyFields {
                n_fields,
                record_size,
            } => write!(
                f,
                "{n_fields} fields cannot fit a {record_size}-byte record (at most {}: one byte each after the 8-byte header)",
                record_size.saturating_sub(8)
            ),
            SchemaError::ReservedName { field, why } => write!(
                f,
                "field name {field} is reserved ({why}); choose another name"
            ),
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
    /// header included), it has at least one field, every field lies in
    /// `8..size`, suits its kind, has an identifier name used once that is
    /// not reserved ([`reserved_field_name`]), and no two fields overlap.
    ///
    /// # Errors
    /// The first problem found, as a [`SchemaError`] naming the field:
    /// [`SchemaError::NoFields`] for an empty `fields`,
    /// [`SchemaError::ReservedName`] for a name such as `timestamp`,
    /// [`SchemaError::ElementType`] for an IANA element id whose type the
    /// field cannot carry (a 20-byte string as sourceTransportPort),
    /// [`SchemaError::BadMetaValue`] for two fields without an IANA
    /// element whose IPFIX enterprise element ids, derived from their
    /// names and types, are one ([`derived_enterprise_ie`]; the message
    /// says how to resolve it).
    pub fn new(
        id: u16,
        name: impl Into<Cow<'static, str>>,
        size: usize,
        fields: Vec<FieldDef>,
    ) -> Result<Schema, SchemaError> {
        let s = Schema::build(id, name, size, fields)?;
        if s.fields.is_empty() {
            return Err(SchemaError::NoFields(s.name.to_string()));
        }
        if let Some((f, why)) = s
            .fields
            .iter()
            .find_map(|f| reserved_field_name(&f.name).map(|why| (f, why)))
        {
            return Err(SchemaError::ReservedName {
                field: f.name.to_string(),
                why,
            });
        }
        s.check_enterprise_ies(&s.meta.ipfix_enterprise)?;
        for f in &s.fields {
            check_iana_type(f, f.ie_id)?;
        }
        Ok(s)
    }

    /// [`Schema::new`]'s checks but two: a schema without fields and a
    /// reserved field name pass. For descriptions read back from logs
    /// ([`Schema::decode`]), so a log written before those were refused
    /// still reads.
    pub(crate) fn build(
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
            if f.ie_id == ENTERPRISE_IE {
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
        // An enterprise element id declared with the field: kept in the
        // metadata, the field has no IANA element.
        for (i, f) in s.fields.iter_mut().enumerate() {
            if f.ie_id & ENTERPRISE_IE != 0 {
                s.meta
                    .ipfix_enterprise
                    .explicit
                    .push((i, f.ie_id & MAX_ENTERPRISE_IE));
                f.ie_id = 0;
            }
        }
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
                .map_err(|_| SchemaError::NotUtf8 {
                    what,
                    lossy: s.to_string_lossy().into_owned(),
                })
        };
        let schema_name = cstr(name, "schema name")?;
        if !(8..=u16::MAX as usize).contains(&record_size) {
            return Err(SchemaError::BadRecordSize(record_size));
        }
        // Bounded before the descriptors are read or anything allocated
        // for them: a count no record can hold (SIZE_MAX) is an error.
        if n_fields > record_size - 8 {
            return Err(SchemaError::TooManyFields {
                n_fields,
                record_size,
            });
        }
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
                .filter(|&ie| ie != ENTERPRISE_IE)
                .ok_or_else(|| SchemaError::BadElementId {
                    field: fname.clone(),
                    ie_id: d.ie_id,
                })?;
            // Past any record (at most 65535 bytes): refused with the
            // values given, before FieldDef's 16-bit fields would hold them.
            if d.offset > u32::from(u16::MAX) || d.size > u32::from(u16::MAX) {
                return Err(SchemaError::OutOfBounds {
                    field: fname,
                    offset: d.offset as usize,
                    size: d.size as usize,
                    record_size,
                });
            }
            let mut f = FieldDef::new(fname, d.offset as usize, d.size as usize, kind, ie_id);
            if d.enum_count > 0 {
                if d.enum_names.is_null() {
                    return Err(SchemaError::NullEnumNames(f.name.to_string()));
                }
                // Bounded before the table is read: a field of one byte
                // has 256 values, the encoding counts names in 16 bits.
                let max = if d.size == 1 {
                    256
                } else {
                    usize::from(u16::MAX)
                };
                if d.enum_count > max {
                    return Err(SchemaError::BadEnum {
                        field: f.name.to_string(),
                        problem: format!(
                            "{} names for values: at most {max} for a {}-byte field",
                            d.enum_count, d.size
                        ),
                    });
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

    /// The index and definition of the field called `name`.
    pub fn field(&self, name: &str) -> Option<(usize, &FieldDef)> {
        self.fields.iter().enumerate().find(|(_, f)| f.name == name)
    }
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

// The blanket impl lives beside `HasSchema` so `record` does not need `schema`.
impl<T: HasSchema> crate::record::RecordBytes for T {
    #[inline(always)]
    fn record_bytes(&self) -> &[u8] {
        self.as_bytes()
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
            vec![FieldDef::new("a", 8, 4, FieldKind::U32, ENTERPRISE_IE)],
        )
        .unwrap_err();
        assert_eq!(
            e,
            SchemaError::BadElementId {
                field: "a".into(),
                ie_id: 0x8000
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
        // A name that is not UTF-8 is said as such, naming which name.
        let bad = [b'u', b'p', 0xff, 0];
        let names = [DplogEnumName {
            value: 1,
            name: bad.as_ptr().cast(),
        }];
        en.enum_count = 1;
        en.enum_names = names.as_ptr();
        // SAFETY: `bad` is NUL-terminated; `names` holds one entry.
        let e = unsafe { Schema::from_c_descriptors(1, c"s".as_ptr(), 16, &en, 1) }.unwrap_err();
        assert_eq!(e.to_string(), "enum name \"up\u{fffd}\" is not UTF-8");
        let fname = DplogFieldDesc {
            name: bad.as_ptr().cast(),
            ..ok
        };
        // SAFETY: as above.
        let e = unsafe { Schema::from_c_descriptors(1, c"s".as_ptr(), 16, &fname, 1) }.unwrap_err();
        assert_eq!(
            e,
            SchemaError::NotUtf8 {
                what: "field name",
                lossy: "up\u{fffd}".into()
            }
        );
    }
}
