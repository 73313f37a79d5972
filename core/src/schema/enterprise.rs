//! IPFIX enterprise element ids of the fields without an IANA element.
//!
//! An IPFIX exporter sends such a field as an enterprise-specific element
//! (RFC 7011 section 3.2): an element id of 15 bits under a Private
//! Enterprise Number (PEN). RFC 7011 (sections 3.2, 6.2) gives one
//! (PEN, element id) pair one meaning, so the id depends only on the
//! field itself, never on its position, its record type or the other
//! types an exporter serves:
//!
//! - by default it is derived from the field's name and its element class
//!   ([`enterprise_class`]: the abstract data type its kind exports as,
//!   [`ipfix_type_class`], except that an enum is a class of its own) by
//!   [`derived_enterprise_ie`], a fixed function: two record types'
//!   `bytesIn: u64` fields share one element (as IANA elements are
//!   shared), a `connEvent` enum and a `connEvent` count do not, and the
//!   id is the same in every run, every program and every dplog version
//!   that writes metadata version 4;
//! - a schema may declare a field's id itself, with the field
//!   (`ie_id` = [`ENTERPRISE_IE`]` | id`, in `schema!` and the C
//!   descriptor as in [`FieldDef::new`](super::FieldDef::new)) or later
//!   ([`Schema::with_ipfix_enterprise_ie`]): e.g. the id a collector
//!   already knows, or to resolve two names whose derived ids meet;
//! - a schema read from a log whose metadata predates the derivation
//!   (metadata versions 1 and 2, or a fields-only description) keeps the
//!   ids its writer used, the field's 1-based position
//!   ([`EnterpriseIes::by_position`]); one whose metadata is version 3
//!   derives the ids of its enum fields as its writer did, as unsigned
//!   integers ([`EnterpriseIes::enums_as_unsigned`]).
//!
//! Distinct fields (name and type) that would share one id are refused:
//! within a schema when it is declared, across the record types of one
//! exporter when its formatter is built.

use super::{FieldKind, Schema, SchemaError};

/// The enterprise bit of an element id (RFC 7011 section 3.2). A field
/// declared with `ie_id = ENTERPRISE_IE | id` ([`FieldDef::new`](super::FieldDef::new),
/// `schema!`'s `ie`, the C descriptor's `ie_id` with
/// `DPLOG_IE_ENTERPRISE`) has no IANA element and enterprise element id
/// `id` (1 to 32767), kept in [`EnterpriseIes::explicit`]; its
/// `FieldDef::ie_id` reads 0.
pub const ENTERPRISE_IE: u16 = 0x8000;

/// Highest enterprise element id (15 bits; the 16th is the enterprise
/// bit). Ids are `1..=MAX_ENTERPRISE_IE`.
pub const MAX_ENTERPRISE_IE: u16 = 0x7fff;

/// IANA elements an IPFIX exporter may take as a record's time stamp
/// (observationTimeSeconds .. observationTimeNanoseconds, 322..=325): a
/// field that declares one and is not the record's event time goes out
/// as an enterprise element instead.
pub const STAMP_ELEMENTS: std::ops::RangeInclusive<u16> = 322..=325;

/// The enterprise element ids a schema's fields take; see the module
/// docs. Part of [`SchemaMeta`](super::SchemaMeta).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct EnterpriseIes {
    /// Ids the schema declares: `(field index, id)`, id in
    /// `1..=`[`MAX_ENTERPRISE_IE`]. Other fields take
    /// [`derived_enterprise_ie`].
    pub explicit: Vec<(usize, u16)>,
    /// The fields without an explicit id take their 1-based position, as
    /// dplog did before deriving ids from names: set for schemas decoded
    /// from descriptions without metadata version 3, so that such a log
    /// is exported again with the ids it was first exported with.
    pub by_position: bool,
    /// The fields without an explicit id derive it with an enum field
    /// taken as an unsigned integer ([`ipfix_type_class`] instead of
    /// [`enterprise_class`]), as dplog did before an enum was an element
    /// class of its own: set for schemas decoded from metadata version 3,
    /// so that such a log is exported again with the ids it was first
    /// exported with. Ignored with [`by_position`](Self::by_position).
    pub enums_as_unsigned: bool,
}

/// The IPFIX abstract data type (RFC 7011 section 6.1, RFC 7012) a field
/// of `kind` is exported as, by class: `unsigned` (every unsigned integer
/// kind, port, protocol, enum: one element at any width, RFC 7011 section
/// 6.2's reduced-size encoding), `boolean`, `ipv4Address`, `ipv6Address`,
/// `macAddress`, `octetArray` (byte strings) and `dateTime` (timestamps,
/// sent in the exporter's time precision).
pub fn ipfix_type_class(kind: FieldKind) -> &'static str {
    match kind {
        FieldKind::Bool => "boolean",
        FieldKind::Ipv4 => "ipv4Address",
        FieldKind::Ipv6 => "ipv6Address",
        FieldKind::Mac => "macAddress",
        FieldKind::Bytes => "octetArray",
        FieldKind::NsTimestamp | FieldKind::TscTimestamp => "dateTime",
        FieldKind::U8
        | FieldKind::U16
        | FieldKind::U32
        | FieldKind::U64
        | FieldKind::Port
        | FieldKind::Protocol
        | FieldKind::Enum => "unsigned",
    }
}

/// The class of enterprise element a field of `kind` is, part of the
/// element's identity with the field's name: [`ipfix_type_class`], except
/// that an enum ([`FieldKind::Enum`], with or without names for its
/// values) is `enum`. An enum's values are codes with names, not
/// quantities: a collector must not see one element that holds enum
/// codes in one template and counts in another. Its abstract data type on
/// the wire stays `unsigned`.
pub fn enterprise_class(kind: FieldKind) -> &'static str {
    match kind {
        FieldKind::Enum => "enum",
        k => ipfix_type_class(k),
    }
}

/// The enterprise element id of a field named `name` of `kind` unless its
/// schema declares one: FNV-1a (32-bit) of the name's bytes, a 0 byte and
/// [`enterprise_class`]'s bytes, reduced to `1..=32767` (`h % 32767 +
/// 1`). Fixed: changing it would change every exporter's ids. (Metadata
/// version 3 derived an enum's id with class `unsigned`, see
/// [`EnterpriseIes::enums_as_unsigned`]; every other kind's id is the
/// same.)
///
/// # Examples
///
/// ```
/// use dplog_core::schema::{derived_enterprise_ie, FieldKind};
///
/// // One element for `bytesIn` at any unsigned width, another for a
/// // `bytesIn` byte string, another for a `bytesIn` enum.
/// let id = derived_enterprise_ie("bytesIn", FieldKind::U64);
/// assert_eq!(id, derived_enterprise_ie("bytesIn", FieldKind::U32));
/// assert_ne!(id, derived_enterprise_ie("bytesIn", FieldKind::Bytes));
/// assert_ne!(id, derived_enterprise_ie("bytesIn", FieldKind::Enum));
/// assert!((1..=0x7fff).contains(&id));
/// ```
pub fn derived_enterprise_ie(name: &str, kind: FieldKind) -> u16 {
    derive(name, enterprise_class(kind))
}

/// FNV-1a (32-bit) of `name`, a 0 byte and `class`, reduced to
/// `1..=32767`.
fn derive(name: &str, class: &str) -> u16 {
    const OFFSET: u32 = 0x811c_9dc5;
    const PRIME: u32 = 0x0100_0193;
    let h = name
        .bytes()
        .chain([0])
        .chain(class.bytes())
        .fold(OFFSET, |h, b| (h ^ u32::from(b)).wrapping_mul(PRIME));
    (h % u32::from(MAX_ENTERPRISE_IE)) as u16 + 1
}

impl EnterpriseIes {
    /// The id a field named `name` of `kind` without an explicit id
    /// derives under these settings (not for [`by_position`](Self::by_position)):
    /// [`derived_enterprise_ie`], or with an enum taken as `unsigned` for
    /// [`enums_as_unsigned`](Self::enums_as_unsigned).
    pub fn derived(&self, name: &str, kind: FieldKind) -> u16 {
        if self.enums_as_unsigned {
            derive(name, ipfix_type_class(kind))
        } else {
            derived_enterprise_ie(name, kind)
        }
    }
}

impl Schema {
    /// Whether field `i` can go out as an enterprise element: it has no
    /// IANA element, or one of the [`STAMP_ELEMENTS`] (which only the
    /// event-time field keeps).
    pub fn may_be_enterprise(&self, i: usize) -> bool {
        self.fields
            .get(i)
            .is_some_and(|f| f.ie_id == 0 || STAMP_ELEMENTS.contains(&f.ie_id))
    }

    /// The enterprise element id of field `i` when it goes out as an
    /// enterprise element (see [`EnterpriseIes`]):
    /// its declared id, else its derived one ([`EnterpriseIes::derived`]),
    /// or its 1-based position for a schema read from an older log
    /// ([`EnterpriseIes::by_position`]); `None` for an index out of range
    /// or a position past [`MAX_ENTERPRISE_IE`].
    pub fn enterprise_ie(&self, i: usize) -> Option<u16> {
        let f = self.fields.get(i)?;
        let e = &self.meta.ipfix_enterprise;
        if let Some(&(_, id)) = e.explicit.iter().find(|(j, _)| *j == i) {
            return Some(id);
        }
        if e.by_position {
            return u16::try_from(i + 1)
                .ok()
                .filter(|&p| p <= MAX_ENTERPRISE_IE);
        }
        Some(e.derived(&f.name, f.kind))
    }

    /// Declares the enterprise element id of field `field` (one without
    /// an IANA element): `id` in `1..=32767`, instead of the id derived
    /// from its name and type. The same id for the same field name and
    /// type in several record types is one element; give it to no other.
    /// A second call for the field replaces its id.
    ///
    /// Errors: [`SchemaError::BadMetaField`] for a missing field or one
    /// with an IANA element; [`SchemaError::BadMetaValue`] for an id
    /// outside `1..=32767` or one another field of the schema takes.
    ///
    /// # Examples
    ///
    /// ```
    /// use dplog_core::schema::{FieldDef, FieldKind, Schema};
    ///
    /// let s = Schema::new(300, "fwDrop", 16, vec![FieldDef::new("ruleId", 8, 4, FieldKind::U32, 0)])
    ///     .unwrap()
    ///     .with_ipfix_enterprise_ie("ruleId", 1001)
    ///     .unwrap();
    /// assert_eq!(s.enterprise_ie(0), Some(1001));
    /// ```
    pub fn with_ipfix_enterprise_ie(mut self, field: &str, id: u16) -> Result<Self, SchemaError> {
        const WHAT: &str = "ipfix enterprise element";
        let i = self.index_of(WHAT, field)?;
        if !self.may_be_enterprise(i) {
            return Err(SchemaError::BadMetaField(WHAT, field.to_string()));
        }
        let mut e = self.meta.ipfix_enterprise.clone();
        e.explicit.retain(|(j, _)| *j != i);
        e.explicit.push((i, id));
        e.explicit.sort_unstable();
        self.check_enterprise_ies(&e)?;
        self.meta.ipfix_enterprise = e;
        Ok(self)
    }

    /// The declared ids `e` suit the schema: each names a field that may
    /// go out as an enterprise element, once, with an id in
    /// `1..=32767`; and no two such fields take one id (declared or
    /// derived).
    pub(crate) fn check_enterprise_ies(&self, e: &EnterpriseIes) -> Result<(), SchemaError> {
        const WHAT: &str = "ipfix enterprise element";
        let label = |i: usize| {
            self.fields
                .get(i)
                .map_or_else(|| format!("#{i}"), |f| f.name.to_string())
        };
        for (k, &(i, id)) in e.explicit.iter().enumerate() {
            if !self.may_be_enterprise(i) {
                return Err(SchemaError::BadMetaField(WHAT, label(i)));
            }
            if !(1..=MAX_ENTERPRISE_IE).contains(&id) {
                return Err(SchemaError::BadMetaValue(
                    WHAT,
                    label(i),
                    format!("id {id} is outside 1..={MAX_ENTERPRISE_IE}"),
                ));
            }
            if e.explicit[..k].iter().any(|(j, _)| *j == i) {
                return Err(SchemaError::BadMetaValue(
                    WHAT,
                    label(i),
                    "declared twice".into(),
                ));
            }
        }
        if e.by_position {
            return Ok(());
        }
        let id_of = |i: usize| match e.explicit.iter().find(|(j, _)| *j == i) {
            Some(&(_, id)) => (id, "declared"),
            None => (
                e.derived(&self.fields[i].name, self.fields[i].kind),
                "derived from its name and type",
            ),
        };
        let mut seen: Vec<(u16, usize, &str)> = Vec::new();
        for i in (0..self.fields.len()).filter(|&i| self.may_be_enterprise(i)) {
            let (id, how) = id_of(i);
            if let Some(&(_, j, how_j)) = seen.iter().find(|(x, _, _)| *x == id) {
                return Err(SchemaError::BadMetaValue(
                    WHAT,
                    label(i),
                    format!(
                        "its enterprise element id {id} ({how}) is also field {}'s ({how_j}): \
                         declare an id of its own for one of them (ie_id = 0x8000 | id, \
                         C DPLOG_IE_ENTERPRISE | id) or rename it",
                        label(j)
                    ),
                ));
            }
            seen.push((id, i, how));
        }
        Ok(())
    }
}
