//! The schema codec: one versioned encoding of a schema's fields and
//! metadata (lifecycle included), which still reads the fields-only
//! encoding of logs written before metadata travelled with them.

#[path = "../../testkit/fixtures/lb_conn.rs"]
mod lb_conn;

use dplog_core::schema::{
    decode_meta, derived_enterprise_ie, encode_meta, EnterpriseIes, FieldDef, FieldKind, Lifecycle,
    Schema, SchemaError, SchemaMeta, META_VERSION,
};

/// The fields part of a description is the old encoding, byte for byte:
/// a description is the old bytes plus the metadata.
#[test]
fn a_description_is_the_old_fields_encoding_then_the_metadata() {
    let old = lb_conn::old_schema_encoding();
    let s = lb_conn::schema();
    let b = s.encode().unwrap();
    assert_eq!(&b[..old.len()], old.as_slice());
    assert_eq!(b[old.len()], META_VERSION, "written as the newest version");
    assert_eq!(META_VERSION, 4);
    assert_eq!(&b[old.len()..], encode_meta(s.meta()).unwrap().as_slice());
    assert_eq!(Schema::decode(&b).unwrap(), s);
    let l = Schema::decode(&b)
        .unwrap()
        .meta()
        .lifecycle
        .clone()
        .unwrap();
    assert_eq!(
        l,
        Lifecycle {
            field: 5,
            opens: vec![1],
            closes: vec![2],
            keys: vec![1, 3, 2, 4],
            close_only: vec![7, 8],
        }
    );
}

/// What logs written before hold (fields only) decodes, with the
/// default metadata: the first timestamp field as event time, nothing
/// else.
#[test]
fn the_old_fields_only_encoding_decodes_with_default_metadata() {
    let s = Schema::decode(&lb_conn::old_schema_encoding()).unwrap();
    assert_eq!(s.fields(), lb_conn::fields_only().fields());
    // Its writer exported each field's position as its IPFIX enterprise
    // element id: so does a reader.
    assert_eq!(
        s.meta(),
        &SchemaMeta {
            event_time: Some(0),
            ipfix_enterprise: EnterpriseIes {
                explicit: vec![],
                by_position: true,
                enums_as_unsigned: false,
            },
            ..SchemaMeta::default()
        }
    );
    assert_eq!(s.enterprise_ie(3), Some(4));
    assert_eq!(s.field("connEvent").unwrap().1.enum_name(2), Some("CLOSE"));
    let ev = s.field("connEvent").unwrap().1;
    assert_eq!(
        (ev.enum_value("CLOSE"), ev.enum_value("close")),
        (Some(2), None)
    );
}

/// Metadata versions 1 (no lifecycle) and 2 (a lifecycle), as written
/// before the enterprise element ids travelled, still read, with the ids
/// their writers exported (each field's position); version 3 carries a
/// declared id and the by-position marker of a schema read from an older
/// log, so a log re-exported keeps its ids.
#[test]
fn metadata_versions_1_and_2_read_with_ids_by_position() {
    let s = lb_conn::fields_only()
        .with_priority(5, None)
        .unwrap()
        .with_enum_numbers(true);
    let fields = s.encode_fields().unwrap();
    let b = s.encode().unwrap();
    assert_eq!(b[fields.len()], 4);
    assert_eq!(Schema::decode(&b).unwrap(), s);
    // Version 4 (as 3) without lifecycle ends: lifecycle absent (1 byte), not
    // by position (1), no declared ids (2). Version 1 is the rest.
    assert_eq!(&b[b.len() - 4..], &[0, 0, 0, 0]);
    let mut v1 = b[..b.len() - 4].to_vec();
    v1[fields.len()] = 1;
    let old = Schema::decode(&v1).unwrap();
    assert_eq!(old.meta().priority, 5);
    assert!(old.meta().ipfix_enterprise.by_position);
    assert_eq!(old.enterprise_ie(0), Some(1));
    assert_eq!(old.enterprise_ie(8), Some(9));
    assert_ne!(s.enterprise_ie(8), Some(9));
    // Re-encoded, it stays by position.
    assert_eq!(Schema::decode(&old.encode().unwrap()).unwrap(), old);

    // Version 2: the lifecycle without its presence byte.
    let s = lb_conn::schema();
    let b = s.encode().unwrap();
    // ... then by position (1 byte) and no declared ids (2).
    let at = b.len() - 3 - lifecycle_len(&s);
    assert_eq!(b[at - 1], 1, "the lifecycle's presence byte");
    let mut v2 = [&b[..at - 1], &b[at..b.len() - 3]].concat();
    v2[fields.len()] = 2;
    let old = Schema::decode(&v2).unwrap();
    assert_eq!(old.meta().lifecycle, s.meta().lifecycle);
    assert!(old.meta().ipfix_enterprise.by_position);

    // A declared id travels.
    let s = lb_conn::fields_only()
        .with_ipfix_enterprise_ie("bytesIn", 4242)
        .unwrap();
    let d = Schema::decode(&s.encode().unwrap()).unwrap();
    assert_eq!(d, s);
    let i = s.field("bytesIn").unwrap().0;
    assert_eq!(d.enterprise_ie(i), Some(4242));
}

/// Metadata version 3 derived an enum field's enterprise element id as
/// an unsigned integer's: a schema read from it keeps those ids (lbConn's
/// `connEvent` 25948, where version 4 derives 18407), every other id is
/// the same in both versions, and encoded again (as version 4, flags
/// byte 2) it keeps them; flags this reader does not know are refused.
#[test]
fn metadata_version_3_keeps_the_enum_ids_its_writer_derived() {
    let s = lb_conn::schema();
    let (ev, _) = s.field("connEvent").unwrap();
    let fields = s.encode_fields().unwrap().len();
    let b = s.encode().unwrap();
    assert_eq!(b[fields], 4);
    assert_eq!(s.enterprise_ie(ev), Some(18407));
    // Version 3's by-position byte 0 is version 4's flags 0: the same
    // bytes under another version.
    let mut v3 = b.clone();
    v3[fields] = 3;
    let old = Schema::decode(&v3).unwrap();
    assert!(old.meta().ipfix_enterprise.enums_as_unsigned);
    assert!(!old.meta().ipfix_enterprise.by_position);
    assert_eq!(old.enterprise_ie(ev), Some(25948));
    assert_eq!(
        old.enterprise_ie(ev),
        Some(derived_enterprise_ie("connEvent", FieldKind::U8))
    );
    for i in (0..s.fields().len()).filter(|&i| i != ev) {
        assert_eq!(old.enterprise_ie(i), s.enterprise_ie(i), "field {i}");
    }
    let again = old.encode().unwrap();
    assert_eq!(again[fields], 4);
    let flags_at = again.len() - 2;
    assert_eq!(again[flags_at - 1..], [2, 0, 0], "flags 2, no declared ids");
    assert_eq!(Schema::decode(&again).unwrap(), old);
    let mut bad = again.clone();
    bad[flags_at - 1] = 4;
    let e = Schema::decode(&bad).unwrap_err();
    assert!(e.contains("enterprise element flags 0x4"), "{e}");
}

/// Bytes of a schema's encoded lifecycle (version 2's layout).
fn lifecycle_len(s: &Schema) -> usize {
    let l = s.meta().lifecycle.as_ref().unwrap();
    2 + 2
        + 8 * l.opens.len()
        + 2
        + 8 * l.closes.len()
        + 2
        + 2 * l.keys.len()
        + 2
        + 2 * l.close_only.len()
}

/// A version this reader does not know is refused, saying so; so is a
/// version 0 and a description cut inside its metadata.
#[test]
fn an_unknown_metadata_version_is_a_clear_error() {
    let s = lb_conn::schema();
    let fields = s.encode_fields().unwrap().len();
    let mut b = s.encode().unwrap();
    b[fields] = META_VERSION + 1;
    let e = Schema::decode(&b).unwrap_err();
    assert!(
        e.contains("metadata version 5: this reader knows versions 1 to 4")
            && e.contains("newer dplog"),
        "{e}"
    );
    b[fields] = 0;
    assert!(Schema::decode(&b)
        .unwrap_err()
        .contains("metadata version 0"));
    let good = s.encode().unwrap();
    let e = Schema::decode(&good[..good.len() - 1]).unwrap_err();
    assert!(
        e.starts_with("schema lbConn: metadata: ") && e.contains("metadata ends early"),
        "{e}"
    );
    // Every cut of a description: decoded (only at the end of the fields
    // or of the whole) or refused, never a panic.
    for n in 0..good.len() {
        if let Ok(d) = Schema::decode(&good[..n]) {
            assert_eq!(n, fields);
            assert_eq!(d.fields(), lb_conn::fields_only().fields());
        }
    }
}

/// The lifecycle builder names what is wrong.
#[test]
fn lifecycles_are_checked_by_field_name() {
    let s = Schema::new(
        9,
        "lease",
        40,
        vec![
            FieldDef::new("t", 8, 8, FieldKind::NsTimestamp, 0),
            FieldDef::new("ev", 16, 1, FieldKind::U8, 0),
            FieldDef::new("mac", 17, 6, FieldKind::Mac, 0),
            FieldDef::new("addr", 24, 4, FieldKind::Ipv4, 0),
            FieldDef::new("n", 32, 8, FieldKind::U64, 0),
        ],
    )
    .unwrap();
    let lc = |f: &str, o: &[u64], c: &[u64], k: &[&str], x: &[&str]| {
        s.clone().with_lifecycle(f, o, c, k, x)
    };
    assert_eq!(
        lc("nope", &[1], &[2], &["mac"], &[]).unwrap_err(),
        SchemaError::BadMetaField("lifecycle", "nope".into())
    );
    assert_eq!(
        lc("mac", &[1], &[2], &["addr"], &[]).unwrap_err(),
        SchemaError::BadMetaField("lifecycle", "mac".into())
    );
    assert_eq!(
        lc("ev", &[1], &[2], &["addr", "gone"], &[]).unwrap_err(),
        SchemaError::BadMetaField("lifecycle", "gone".into())
    );
    let msg = |r: Result<Schema, SchemaError>| r.unwrap_err().to_string();
    assert_eq!(
        msg(lc("ev", &[], &[2], &["mac"], &[])),
        "lifecycle: field ev: a lifecycle needs at least one opening and one closing value"
    );
    assert_eq!(
        msg(lc("ev", &[1, 2], &[2], &["mac"], &[])),
        "lifecycle: value 2 of field ev both opens and closes"
    );
    assert_eq!(
        msg(lc("ev", &[256], &[2], &["mac"], &[])),
        "lifecycle: value 256 does not fit field ev"
    );
    assert_eq!(
        msg(lc("t", &[1], &[2], &["mac"], &[])),
        "lifecycle: field t is a timestamp; the event field says what happened (an enum or integer field)"
    );
    assert_eq!(
        msg(lc("ev", &[1], &[2], &[], &[])),
        "lifecycle: no key field: say which fields identify a state"
    );
    assert!(msg(lc("ev", &[1], &[2], &["mac"], &["mac"])).contains("field mac is listed twice"));
    assert!(msg(lc("ev", &[1], &[2], &["ev"], &[])).contains("field ev is listed twice"));
    // A BYTES-like key (MAC) is fine: keys are compared byte for byte.
    let ok = lc("ev", &[1], &[2, 3], &["mac", "addr"], &["n"]).unwrap();
    let l = ok.meta().lifecycle.as_ref().unwrap();
    assert_eq!(
        (l.field, &l.keys, &l.close_only),
        (1, &vec![2, 3], &vec![4])
    );
    assert!(l.is_close(3) && !l.is_open(3));
    // A hostile description: indexes out of range are refused by the
    // decoder's check (Schema::with_meta), naming the index.
    let mut m = ok.meta().clone();
    m.lifecycle.as_mut().unwrap().keys.push(9);
    let mut b = ok.encode_fields().unwrap();
    b.extend_from_slice(&encode_meta(&m).unwrap());
    let e = Schema::decode(&b).unwrap_err();
    assert!(e.contains("lifecycle: no suitable field \"#9\""), "{e}");
    assert!(decode_meta(&encode_meta(&m).unwrap()).is_ok());
    // An index in range but of an unsuitable field is said by its name.
    let mut m = ok.meta().clone();
    let bytes_field = ok
        .fields()
        .iter()
        .position(|f| !f.kind.is_integer())
        .expect("a non-integer field");
    m.priority_by = Some(dplog_core::schema::FieldValues {
        field: bytes_field,
        values: vec![(1, 2)],
    });
    let e = ok.clone().with_meta(m).unwrap_err().to_string();
    let name = &ok.fields()[bytes_field].name;
    assert!(e.contains(&format!("no suitable field \"{name}\"")), "{e}");
}

/// Encoding refuses what it could not carry instead of cutting it.
#[test]
fn what_does_not_fit_the_encoding_is_an_error() {
    let long = "x".repeat(300);
    let s = lb_conn::fields_only().with_syslog(dplog_core::schema::SyslogMeta {
        sd_id: Some(long.into()),
        ..Default::default()
    });
    let e = s.encode().unwrap_err();
    assert!(
        matches!(&e, SchemaError::NotEncodable(m) if m.starts_with("schema lbConn: its metadata does not fit")),
        "{e}"
    );
}

/// A value listed for a field (MSGID, priority, IPFIX element or name by
/// value) that the field cannot hold, or one listed twice, is refused
/// where a schema is declared, naming the field and the value; a
/// description read back from a log that holds such a list still decodes,
/// so what a writer accepted stays readable.
#[test]
fn declared_values_must_fit_their_field_once_but_a_log_with_them_still_reads() {
    use dplog_core::schema::SyslogMeta;
    let s = lb_conn::fields_only();
    let e = SyslogMeta::resolve(
        &s,
        None,
        Some(("connEvent", &[(1, "A"), (256, "B")])),
        None,
        &[],
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "syslog msgid: field connEvent: value 256 does not fit its 1 byte(s)"
    );
    let e = SyslogMeta::resolve(
        &s,
        None,
        Some(("connEvent", &[(2, "A"), (2, "B")])),
        None,
        &[],
    )
    .unwrap_err();
    assert_eq!(
        e,
        SchemaError::BadMetaValue(
            "syslog msgid",
            "connEvent".into(),
            "value 2 listed twice".into()
        )
    );
    let e = s
        .clone()
        .with_priority(3, Some(("connEvent", &[(2, 6), (2, 1)])))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "priority: field connEvent: value 2 listed twice"
    );
    let e = s
        .clone()
        .with_ipfix_ie_by("bytesIn", "connEvent", &[(1, 1), (300, 2)])
        .unwrap_err();
    assert!(e.to_string().contains("value 300 does not fit"), "{e}");
    let e = s
        .clone()
        .with_name_by("bytesIn", "connEvent", &[(1, "a"), (1, "b")])
        .unwrap_err();
    assert!(e.to_string().contains("value 1 listed twice"), "{e}");
    // A full u64 field takes any value.
    SyslogMeta::resolve(&s, None, Some(("bytesIn", &[(u64::MAX, "M")])), None, &[]).unwrap();

    // with_meta (the C setters' path) checks the same.
    let mut twice =
        SyslogMeta::resolve(&s, None, Some(("connEvent", &[(1, "A")])), None, &[]).unwrap();
    twice
        .msgid_by
        .as_mut()
        .unwrap()
        .values
        .push((1, "B".into()));
    let mut meta = s.meta().clone();
    meta.syslog = twice.clone();
    let e = s.clone().with_meta(meta).unwrap_err();
    assert!(e.to_string().contains("value 1 listed twice"), "{e}");

    // Written (with_syslog does not check), then read back: it decodes.
    let written = s.clone().with_syslog(twice);
    let b = written.encode().unwrap();
    assert_eq!(Schema::decode(&b).unwrap(), written);
}
