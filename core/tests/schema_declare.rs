//! What a schema's declaration refuses, from Rust (`Schema::new`,
//! `schema!`) and through the C descriptors (`Schema::from_c_descriptors`,
//! what `dplog_schema_register` calls): a field name a format writes as
//! its own key or column, a schema without fields, a descriptor count no
//! record can hold. A log written before these were refused still reads.
//! The record is a user type (a load balancer's connection), not NAT.

use dplog_core::schema::{
    reserved_field_name, DplogFieldDesc, FieldDef, FieldKind, HasSchema, Schema, SchemaError,
};
use dplog_core::{schema, Record, RecordHeader};

/// A load balancer's connection record, declared by its user.
#[repr(C)]
#[derive(Clone, Copy)]
struct LbConn {
    header: RecordHeader,
    time_ns: u64,
    backend: u32,
    port: u16,
    state: u8,
    _pad: u8,
}

impl Record for LbConn {
    const SCHEMA_ID: u16 = 610;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

/// `LbConn`'s schema with `backend` named `name`.
fn lb_conn(name: &'static str) -> Result<Schema, SchemaError> {
    lb_conn_with(name, 0, 0)
}

/// `LbConn`'s schema with `backendId` (4-byte unsigned) and `port` given
/// IANA elements `backend_ie` and `port_ie`.
fn lb_conn_ies(backend_ie: u16, port_ie: u16) -> Result<Schema, SchemaError> {
    lb_conn_with("backendId", backend_ie, port_ie)
}

/// `LbConn`'s schema with `backend` named `name`, `backend` and `port`
/// given IANA elements `backend_ie` and `port_ie` (0: none).
fn lb_conn_with(name: &'static str, backend_ie: u16, port_ie: u16) -> Result<Schema, SchemaError> {
    use std::mem::offset_of;
    Schema::new(
        610,
        "lbConn",
        size_of::<LbConn>(),
        vec![
            FieldDef::new(
                "eventTime",
                offset_of!(LbConn, time_ns),
                8,
                FieldKind::NsTimestamp,
                0,
            ),
            FieldDef::new(
                name,
                offset_of!(LbConn, backend),
                4,
                FieldKind::U32,
                backend_ie,
            ),
            FieldDef::new(
                "port",
                offset_of!(LbConn, port),
                2,
                FieldKind::Port,
                port_ie,
            ),
            FieldDef::new("state", offset_of!(LbConn, state), 1, FieldKind::U8, 0),
        ],
    )
}

// SAFETY: repr(C), 8 + 8 + 4 + 2 + 1 + 1 = 24 bytes without padding,
// described by its own offset_of! values.
unsafe impl HasSchema for LbConn {
    fn schema() -> &'static Schema {
        static S: std::sync::OnceLock<Schema> = std::sync::OnceLock::new();
        S.get_or_init(|| lb_conn("backendId").unwrap())
    }
}

/// The names the formats write beside a record's fields (JSON's
/// `timestamp`, CSV's `recordType` and `timestamp`, JSON's drop-report
/// marker `dplogEvent`, the CSV drop-report columns) are refused as field
/// names, each with an error naming the field and what the name is.
#[test]
fn a_field_cannot_take_a_name_the_formats_use_for_their_own_keys() {
    assert_eq!(LbConn::schema().fields()[1].name, "backendId");
    let e = schema!(LbConn, id = 610, name = "lbConn", [
        time_ns => "eventTime": NsTimestamp, ie 0;
        backend => "timestamp": U32, ie 0;
    ])
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "field name timestamp is reserved (the record's event time in JSON and CSV); choose another name"
    );
    for name in [
        "timestamp",
        "recordType",
        "dplogEvent",
        "dplogDropped",
        "dplogDropRing",
        "dplogDropReason",
        "dplogFirstDropWallClock",
        "dplogLastDropWallClock",
        "_dplog_ev",
    ] {
        let e = lb_conn(name).unwrap_err();
        let SchemaError::ReservedName { field, why } = &e else {
            panic!("{name}: {e:?}");
        };
        assert_eq!(field, name);
        assert_eq!(Some(*why), reserved_field_name(name));
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("field name {name} is reserved")),
            "{msg}"
        );
        // The C route refuses it too.
        let cname = std::ffi::CString::new(name).unwrap();
        let d = [desc(c"eventTime", 8, 8, FieldKind::NsTimestamp), {
            let mut d = desc(c"x", 16, 4, FieldKind::U32);
            d.name = cname.as_ptr();
            d
        }];
        // SAFETY: two descriptors and C strings alive for the call.
        let e = unsafe { Schema::from_c_descriptors(610, c"lbConn".as_ptr(), 24, d.as_ptr(), 2) }
            .unwrap_err();
        assert_eq!(
            e,
            SchemaError::ReservedName {
                field: name.into(),
                why: reserved_field_name(name).unwrap()
            }
        );
    }
    // Names that only look alike are a record's own (a JSON drop report's
    // `dropped` and `reason` are keys of its own object, not a record's).
    for name in ["dropped", "reason", "Timestamp", "eventTimestamp", "dplo"] {
        assert_eq!(reserved_field_name(name), None, "{name}");
        assert_eq!(lb_conn(name).unwrap().fields()[1].name, name);
    }
}

/// A field renamed by another field's value (`with_name_by`) takes the
/// new name as its key or column in text, JSON, CSV and syslog: the names
/// the formats keep for themselves are refused there too, in the builder
/// and in a whole declared `SchemaMeta` (what the C ABI's
/// `dplog_schema_set_name_by` declares through), naming the field, the
/// value and the name.
#[test]
fn a_name_by_value_cannot_be_a_name_the_formats_use_for_their_own_keys() {
    let base = || lb_conn("backendId").unwrap();
    for name in ["timestamp", "recordType", "dplogDropped", "_dplogEv"] {
        let e = base()
            .with_name_by("backendId", "state", &[(1, "backendIpv4"), (2, name)])
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "name by value: field backendId: name {name} for value 2 is reserved ({}); choose another name",
                reserved_field_name(name).unwrap()
            )
        );
        let mut meta = base().meta().clone();
        meta.name_by = Some(dplog_core::schema::NameBy {
            field: 1,
            selector: 3,
            names: vec![(1, "backendIpv4".into()), (2, name.to_string().into())],
        });
        let e = base().with_meta(meta).unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("name {name} for value 2 is reserved")),
            "{e}"
        );
    }
    // A name that is no identifier is refused by the builder as by
    // `with_meta`.
    let e = base()
        .with_name_by("backendId", "state", &[(1, "backend ip")])
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "name by value: field backendId: name \"backend ip\" for value 1 is not an identifier"
    );
    // The user's own names are taken.
    let s = base()
        .with_name_by("backendId", "state", &[(1, "backendIpv4"), (2, "dropped")])
        .unwrap();
    let b = s.meta().name_by.as_ref().unwrap();
    assert_eq!((b.field, b.selector), (1, 3));
    assert_eq!(b.names[1], (2, "dropped".into()));
}

fn desc(name: &'static std::ffi::CStr, offset: u32, size: u32, kind: FieldKind) -> DplogFieldDesc {
    DplogFieldDesc {
        name: name.as_ptr(),
        offset,
        size,
        kind: kind as u32,
        ie_id: 0,
        enum_names: std::ptr::null(),
        enum_count: 0,
    }
}

/// A schema without fields would write `{}` or an empty line per record:
/// refused in Rust and C, with the record type named.
#[test]
fn a_schema_without_fields_is_refused() {
    let e = Schema::new(611, "empty", 16, vec![]).unwrap_err();
    assert_eq!(e, SchemaError::NoFields("empty".into()));
    assert!(
        e.to_string().contains("record type empty has no fields"),
        "{e}"
    );
    // SAFETY: no descriptor is read for a count of 0.
    let e = unsafe { Schema::from_c_descriptors(611, c"empty".as_ptr(), 16, std::ptr::null(), 0) }
        .unwrap_err();
    assert_eq!(e, SchemaError::NoFields("empty".into()));
}

/// A descriptor count larger than the record's bytes after its header
/// (SIZE_MAX from a C caller) is an error before any descriptor is read
/// or anything is allocated for them: no panic, no overflow.
#[test]
fn a_field_count_no_record_can_hold_is_refused_before_reading_descriptors() {
    let d = desc(c"eventTime", 8, 8, FieldKind::NsTimestamp);
    for (n, size) in [(usize::MAX, 24), (17, 24), (usize::MAX / 2, 65535)] {
        // SAFETY: the count is refused before a descriptor past the first
        // is read (the one given is valid).
        let e = unsafe { Schema::from_c_descriptors(612, c"lbConn".as_ptr(), size, &d, n) }
            .unwrap_err();
        assert_eq!(
            e,
            SchemaError::TooManyFields {
                n_fields: n,
                record_size: size
            }
        );
        assert!(
            e.to_string().contains(&format!(
                "cannot fit a {size}-byte record (at most {}",
                size - 8
            )),
            "{e}"
        );
    }
    // An enum table longer than its field can name (SIZE_MAX) likewise.
    let names = [dplog_core::schema::DplogEnumName {
        value: 1,
        name: c"a".as_ptr(),
    }];
    for (size, count, max) in [(1u32, usize::MAX, 256), (1, 257, 256), (2, 65536, 65535)] {
        let e = DplogFieldDesc {
            enum_names: names.as_ptr(),
            enum_count: count,
            ..desc(c"state", 8, size, FieldKind::Enum)
        };
        // SAFETY: the count is refused before the table is read.
        let err =
            unsafe { Schema::from_c_descriptors(612, c"lbConn".as_ptr(), 24, &e, 1) }.unwrap_err();
        assert_eq!(
            err,
            SchemaError::BadEnum {
                field: "state".into(),
                problem: format!("{count} names for values: at most {max} for a {size}-byte field")
            }
        );
    }
    // A record size out of range is said as such, whatever the count.
    // SAFETY: refused before any descriptor is read.
    let e = unsafe { Schema::from_c_descriptors(612, c"lbConn".as_ptr(), 4, &d, usize::MAX) }
        .unwrap_err();
    assert_eq!(e, SchemaError::BadRecordSize(4));
    // 16 one-byte fields fill a 24-byte record: the bound is exact.
    let names: Vec<std::ffi::CString> = (0..16)
        .map(|i| std::ffi::CString::new(format!("b{i}")).unwrap())
        .collect();
    let descs: Vec<DplogFieldDesc> = names
        .iter()
        .enumerate()
        .map(|(i, n)| DplogFieldDesc {
            name: n.as_ptr(),
            ..desc(c"x", 8 + i as u32, 1, FieldKind::U8)
        })
        .collect();
    // SAFETY: 16 descriptors and their names, alive for the call.
    let s = unsafe { Schema::from_c_descriptors(612, c"bytes".as_ptr(), 24, descs.as_ptr(), 16) }
        .unwrap();
    assert_eq!(s.fields().len(), 16);
}

/// A log written before reserved names and empty schemas were refused
/// still reads: its description decodes as written.
#[test]
fn descriptions_written_before_the_checks_still_decode() {
    // "backendX9" has the length of "timestamp": the same encoding but
    // for those bytes.
    let b = lb_conn("backendX9").unwrap().encode().unwrap();
    let at = memchr_all(&b, b"backendX9");
    assert_eq!(at.len(), 1);
    let mut old = b.clone();
    old[at[0]..at[0] + 9].copy_from_slice(b"timestamp");
    let s = Schema::decode(&old).unwrap();
    assert_eq!(s.fields()[1].name, "timestamp");
    assert_eq!(s.fields()[1].offset, 16);

    // A name-by-value name written before reserved names were refused
    // there (patched in as above) reads back as written.
    let b = lb_conn("backendId")
        .unwrap()
        .with_name_by("backendId", "state", &[(2, "backendX9")])
        .unwrap()
        .encode()
        .unwrap();
    let at = memchr_all(&b, b"backendX9");
    assert_eq!(at.len(), 1);
    let mut old = b.clone();
    old[at[0]..at[0] + 9].copy_from_slice(b"timestamp");
    let s = Schema::decode(&old).unwrap();
    assert_eq!(
        s.meta().name_by.as_ref().unwrap().names,
        [(2, "timestamp".into())]
    );

    // id 613, size 16, name "empty", no fields (the fields-only encoding).
    let mut empty = Vec::new();
    empty.extend_from_slice(&613u16.to_le_bytes());
    empty.extend_from_slice(&16u16.to_le_bytes());
    empty.push(5);
    empty.extend_from_slice(b"empty");
    empty.extend_from_slice(&0u16.to_le_bytes());
    let s = Schema::decode(&empty).unwrap();
    assert_eq!((s.id(), s.name(), s.fields().len()), (613, "empty", 0));

    // The declaration route still refuses both.
    assert!(Schema::new(613, "empty", 16, Vec::<FieldDef>::new()).is_err());
}

fn memchr_all(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    hay.windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect()
}

/// A field without an IANA element takes an IPFIX enterprise element id
/// derived from its name and type class alone: fixed values (a change
/// would change every exporter's ids), one id for `bytesIn` at any
/// unsigned width, another for a `bytesIn` byte string.
#[test]
fn enterprise_element_ids_are_derived_from_name_and_type() {
    use dplog_core::schema::derived_enterprise_ie as id;
    assert_eq!(id("bytesIn", FieldKind::U64), 31604);
    assert_eq!(id("bytesIn", FieldKind::U32), 31604);
    assert_eq!(id("bytesOut", FieldKind::U64), 18709);
    assert_eq!(id("ruleId", FieldKind::U32), 3074);
    assert_eq!(id("reason", FieldKind::Bytes), 27312);
    assert_eq!(id("backend", FieldKind::Ipv4), 7803);
    assert_eq!(id("bytesIn", FieldKind::Bytes), 22097);
    // Not the position: the same in any schema, at any place.
    let s = lb_conn("backendId").unwrap();
    assert_eq!(s.enterprise_ie(1), Some(id("backendId", FieldKind::U32)));
}

/// Two fields of one type whose derived ids meet (`f116` and `f135`, both
/// unsigned: 26276) are refused where the type is declared, from Rust and
/// C, naming both and how to resolve it; declaring an id for one
/// (`ENTERPRISE_IE | id` as its `ie_id`, `DPLOG_IE_ENTERPRISE | id` in C)
/// resolves it; a declared id another field takes is refused too.
#[test]
fn fields_whose_enterprise_ids_meet_are_refused_at_declaration() {
    use dplog_core::schema::{derived_enterprise_ie, ENTERPRISE_IE};
    assert_eq!(derived_enterprise_ie("f116", FieldKind::U32), 26276);
    assert_eq!(derived_enterprise_ie("f135", FieldKind::U16), 26276);
    let fw = |a_ie: u16, b_ie: u16| {
        Schema::new(
            620,
            "fwDrop",
            24,
            vec![
                FieldDef::new("f116", 8, 4, FieldKind::U32, a_ie),
                FieldDef::new("f135", 12, 2, FieldKind::U16, b_ie),
                FieldDef::new("srcAddr", 16, 4, FieldKind::Ipv4, 8),
            ],
        )
    };
    let e = fw(0, 0).unwrap_err().to_string();
    assert_eq!(
        e,
        "ipfix enterprise element: field f135: its enterprise element id 26276 (derived from \
         its name and type) is also field f116's (derived from its name and type): declare an \
         id of its own for one of them (ie_id = 0x8000 | id, C DPLOG_IE_ENTERPRISE | id) or \
         rename it"
    );
    let s = fw(0, ENTERPRISE_IE | 900).unwrap();
    assert_eq!(s.fields()[1].ie_id, 0, "no IANA element");
    assert_eq!(s.enterprise_ie(0), Some(26276));
    assert_eq!(s.enterprise_ie(1), Some(900));
    assert_eq!(s.meta().ipfix_enterprise.explicit, [(1, 900)]);
    // IANA-mapped fields keep their element.
    assert_eq!(s.fields()[2].ie_id, 8);
    // A declared id that the other field derives: refused.
    let e = fw(0, ENTERPRISE_IE | 26276).unwrap_err().to_string();
    assert!(
        e.contains("field f135: its enterprise element id 26276 (declared) is also field f116's"),
        "{e}"
    );
    // In `schema!`, the same `ie`.
    let s = schema!(LbConn, id = 610, name = "lbConn", [
        time_ns => "eventTime": NsTimestamp, ie 0;
        backend => "backendId": U32, ie ENTERPRISE_IE | 77;
        port => "port": Port, ie 7;
    ])
    .unwrap();
    assert_eq!((s.fields()[1].ie_id, s.enterprise_ie(1)), (0, Some(77)));
    assert_eq!(s.fields()[2].ie_id, 7);
    // The builder: the same rules.
    let s = fw(ENTERPRISE_IE | 1, ENTERPRISE_IE | 2).unwrap();
    assert!(s.clone().with_ipfix_enterprise_ie("f135", 1).is_err());
    assert!(
        s.clone().with_ipfix_enterprise_ie("srcAddr", 5).is_err(),
        "an IANA field"
    );
    assert!(s.clone().with_ipfix_enterprise_ie("f135", 0).is_err());
    assert!(s.clone().with_ipfix_enterprise_ie("f135", 0x8000).is_err());
    assert_eq!(
        s.with_ipfix_enterprise_ie("f135", 3)
            .unwrap()
            .enterprise_ie(1),
        Some(3)
    );

    // From C (what dplog_schema_register calls): the same refusal, and
    // the same resolution with the enterprise bit on the descriptor's id.
    let descs = |b_ie: u32| {
        [
            desc(c"f116", 8, 4, FieldKind::U32),
            DplogFieldDesc {
                ie_id: b_ie,
                ..desc(c"f135", 12, 2, FieldKind::U16)
            },
        ]
    };
    let d = descs(0);
    // SAFETY: two descriptors and C strings alive for the call.
    let e = unsafe { Schema::from_c_descriptors(620, c"fwDrop".as_ptr(), 24, d.as_ptr(), 2) }
        .unwrap_err();
    assert!(e.to_string().contains("id 26276"), "{e}");
    let d = descs(0x8000 | 900);
    // SAFETY: as above.
    let s =
        unsafe { Schema::from_c_descriptors(620, c"fwDrop".as_ptr(), 24, d.as_ptr(), 2) }.unwrap();
    assert_eq!(s.enterprise_ie(1), Some(900));
}

/// A field declared with an IANA element must carry that element's type
/// (RFC 7011 section 6): a 4-byte rule id as sourceTransportPort (7,
/// unsigned16) would reach every collector as a port. Refused at
/// declaration, in Rust and from C, with the element and its type named;
/// reduced-size encoding (a narrower unsigned) and a 4-byte unsigned as
/// an IPv4 address are taken.
#[test]
fn a_field_cannot_take_an_iana_element_of_another_type() {
    lb_conn_ies(0, 7).unwrap();
    lb_conn_ies(1, 11).unwrap(); // u32 as octetDeltaCount (unsigned64): reduced size.
    lb_conn_ies(12, 7).unwrap(); // u32 as destinationIPv4Address.
    let e = lb_conn_ies(7, 0).unwrap_err();
    assert!(
        matches!(&e, SchemaError::ElementType { field, ie_id: 7, element: "sourceTransportPort", .. } if field == "backendId"),
        "{e:?}"
    );
    let m = e.to_string();
    assert!(
        m.contains("backendId")
            && m.contains("sourceTransportPort (unsigned16)")
            && m.contains("wider"),
        "{m}"
    );
    // A port as an IPv6 address, a port as a MAC address: not its type.
    for ie in [27, 56] {
        let e = lb_conn_ies(0, ie).unwrap_err();
        assert!(
            matches!(e, SchemaError::ElementType { ie_id, .. } if ie_id == ie),
            "{e:?}"
        );
    }
    // By value too: the element a selector's value picks for a field.
    let s = lb_conn_ies(0, 0).unwrap();
    s.clone()
        .with_ipfix_ie_by("port", "state", &[(1, 7), (2, 11)])
        .unwrap();
    let e = s
        .with_ipfix_ie_by("port", "state", &[(1, 7), (2, 8)])
        .unwrap_err();
    assert!(
        matches!(e, SchemaError::ElementType { ie_id: 8, .. }),
        "{e:?}"
    );

    // From C: a 20-byte string as sourceTransportPort.
    let mut d = [
        desc(c"eventTime", 8, 8, FieldKind::NsTimestamp),
        desc(c"reason", 16, 20, FieldKind::Bytes),
    ];
    d[1].ie_id = 7;
    // SAFETY: two valid descriptors with static names.
    let e = unsafe { Schema::from_c_descriptors(613, c"fwDrop".as_ptr(), 40, d.as_ptr(), 2) }
        .unwrap_err();
    assert!(
        matches!(e, SchemaError::ElementType { ie_id: 7, .. }),
        "{e:?}"
    );
    d[1].ie_id = 0;
    // SAFETY: as above.
    unsafe { Schema::from_c_descriptors(613, c"fwDrop".as_ptr(), 40, d.as_ptr(), 2) }.unwrap();
}

/// A C descriptor's offset or size past any record is refused with the
/// value the caller passed in the message, not a value cut to 16 bits.
#[test]
fn a_c_offset_or_size_past_any_record_is_named_as_given() {
    for (offset, size, shown) in [
        (0x1_0010u32, 4u32, "bytes 65552..65556"),
        (0xFFFF_0010, 4, "bytes 4294901776..4294901780"),
        (16, 0x1_0004, "bytes 16..65556"),
    ] {
        let d = [
            desc(c"eventTime", 8, 8, FieldKind::NsTimestamp),
            DplogFieldDesc {
                offset,
                size,
                ..desc(c"backendId", 0, 0, FieldKind::Bytes)
            },
        ];
        // SAFETY: two valid descriptors with static names.
        let e = unsafe { Schema::from_c_descriptors(614, c"lbConn".as_ptr(), 64, d.as_ptr(), 2) }
            .unwrap_err();
        assert!(
            matches!(&e, SchemaError::OutOfBounds { field, .. } if field == "backendId"),
            "{e:?}"
        );
        assert!(e.to_string().contains(shown), "{e}");
    }
}
