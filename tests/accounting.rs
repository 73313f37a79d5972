//! A record no schema of the logger describes is counted dropped
//! (`dropped_format`), never written.

use dplog::config::LogConfig;
use dplog::nat::{Nat44SessionRecord, NatPortBlockRecord};
use dplog::{RecordHeader, Slot64};

#[test]
fn records_of_an_unknown_schema_or_without_a_header_count_dropped_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.log");
    let cfg = LogConfig::from_toml_str(&format!(
        "[format]\ntemplate = \"{{sourceTransportPort}}\"\n[sink]\ntype = \"file\"\npath = \"{}\"\n",
        path.display()
    ))
    .unwrap();
    // Only the NAT44 session schema: a port block is unknown here.
    let logger = cfg
        .start_slots::<Slot64>(&[dplog::nat::nat44_session()])
        .unwrap();
    let mut p = logger.producer().unwrap();
    let session = |port| {
        Slot64::pack(&Nat44SessionRecord {
            src_port: port,
            ..Default::default()
        })
        .unwrap()
    };
    assert!(p.log(session(1)));
    assert!(p.log(Slot64::pack(&NatPortBlockRecord::default()).unwrap()));
    // A slot whose header names schema 0, which no schema describes.
    let mut bytes = [0u8; 64];
    bytes[..2].copy_from_slice(&64u16.to_ne_bytes());
    assert!(p.log(Slot64::from_bytes(&bytes).unwrap()));
    assert!(p.log(session(2)));
    drop(p);
    let s = logger.shutdown().unwrap();
    assert_eq!(
        (s.produced, s.written_records, s.dropped_format),
        (4, 2, 2),
        "{s:?}"
    );
    assert_eq!(
        s.produced,
        s.written_records + s.dropped() + s.dropped_format + s.dropped_sink + s.dropped_shutdown
    );
    assert_eq!(s.in_flight(), 0);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "1\n2\n");
}

#[test]
fn a_typed_record_whose_header_was_never_set_is_dropped_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.log");
    let cfg = LogConfig::from_toml_str(&format!(
        "[sink]\ntype = \"file\"\npath = \"{}\"\n",
        path.display()
    ))
    .unwrap();
    let logger = cfg.start::<Nat44SessionRecord>().unwrap();
    let mut p = logger.producer().unwrap();
    let r = Nat44SessionRecord {
        header: RecordHeader::default(),
        ..Default::default()
    };
    assert!(p.log(r));
    drop(p);
    let s = logger.shutdown().unwrap();
    assert_eq!((s.written_records, s.dropped_format), (0, 1), "{s:?}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
}

#[test]
fn two_record_types_with_one_schema_id_are_refused_at_start() {
    use dplog::schema::{FieldDef, FieldKind, Schema};
    let a = Schema::new(
        501,
        "small",
        16,
        vec![FieldDef::new("v", 8, 8, FieldKind::U64, 0)],
    )
    .unwrap();
    let b = Schema::new(
        501,
        "clash",
        16,
        vec![FieldDef::new("w", 8, 4, FieldKind::U32, 0)],
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.log");
    let cfg = LogConfig::from_toml_str(&format!(
        "[sink]\ntype = \"file\"\npath = \"{}\"\n",
        path.display()
    ))
    .unwrap();
    let e = cfg
        .start_slots::<Slot64>(&[&a, &b])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("record types small and clash share schema id 501"),
        "{e}"
    );
    assert!(!path.exists(), "nothing opened");
}
