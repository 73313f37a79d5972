//! `dplog-cat --format ipfix` of a binary log whose record types clash
//! once exported as IPFIX (a binary logger exports no IPFIX, so it does
//! not check): refused with exit status 1, naming both fields and
//! `--ipfix-ie`; with `--ipfix-ie` declaring an enterprise or an IANA
//! element for one of them, exported and decoded by tshark with the
//! declared ids.

use std::path::Path;
use std::process::Command;

use dplog::config::LogConfig;
use dplog::schema::{FieldDef, FieldKind, Schema};
use dplog::Slot64;
use dplog_formatters::ipfix::split_messages;
use dplog_testkit::tshark;

/// 2026-01-01T00:00:00Z in ns since the Unix epoch.
const T0: u64 = 1_767_225_600_000_000_000;
/// Records of each type.
const N: u32 = 3;

/// `fwStats` (`f116: u32`) and `lbStats` (`f135: u16`): each alone a
/// good record type, but their fields' derived enterprise element ids
/// meet (26276).
fn schemas() -> (Schema, Schema) {
    let fw = Schema::new(
        300,
        "fwStats",
        24,
        vec![
            FieldDef::new("t", 8, 8, FieldKind::NsTimestamp, 0),
            FieldDef::new("f116", 16, 4, FieldKind::U32, 0),
        ],
    )
    .unwrap();
    let lb = Schema::new(
        301,
        "lbStats",
        24,
        vec![
            FieldDef::new("t", 8, 8, FieldKind::NsTimestamp, 0),
            FieldDef::new("f135", 16, 2, FieldKind::U16, 0),
        ],
    )
    .unwrap();
    assert_eq!(fw.enterprise_ie(1), lb.enterprise_ie(1));
    assert_eq!(fw.enterprise_ie(1), Some(26276));
    (fw, lb)
}

/// A binary log of `N` records of each type, written by a logger started
/// from its configuration (rings of 64-byte slots, a file sink): fwStats
/// `f116` = 0x0a000001 + i, lbStats `f135` = 100 + i.
fn write_log(path: &Path) {
    let (fw, lb) = schemas();
    let cfg = LogConfig::from_toml_str(&format!(
        "[ring]\nslot_bytes = 64\n[format]\ntype = \"binary\"\n[sink]\ntype = \"file\"\npath = \"{}\"\n",
        path.display()
    ))
    .unwrap();
    let logger = cfg.start_slots::<Slot64>(&[&fw, &lb]).unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..N {
        for (s, v) in [
            (&fw, (0x0a00_0001 + i).to_ne_bytes().to_vec()),
            (&lb, (100 + i as u16).to_ne_bytes().to_vec()),
        ] {
            let mut r = vec![0u8; 24];
            r[0..2].copy_from_slice(&24u16.to_ne_bytes());
            r[2..4].copy_from_slice(&s.id().to_ne_bytes());
            r[8..16].copy_from_slice(&(T0 + u64::from(i) * 1_000_000).to_ne_bytes());
            r[16..16 + v.len()].copy_from_slice(&v);
            assert!(p.log(Slot64::from_bytes(&r).unwrap()));
        }
    }
    drop(p);
    assert_eq!(logger.shutdown().unwrap().written_records, 2 * u64::from(N));
}

/// dplog-cat's exit status, stdout and stderr.
fn cat(args: &[&str], log: &Path) -> (i32, Vec<u8>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .args(args)
        .arg(log)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        o.stdout,
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// tshark's decoding of the IPFIX stream `ipfix` (one datagram per
/// message): per field, the values of every message joined.
fn decoded(dir: &Path, ipfix: &[u8], fields: &[&str]) -> Vec<String> {
    let pcap = dir.join("out.pcap");
    tshark::write_udp_pcap(&pcap, &split_messages(ipfix), 4739);
    let rows = tshark::fields(&pcap, 4739, fields);
    (0..fields.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].as_str())
                .filter(|v| !v.is_empty())
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect()
}

#[test]
fn a_clash_in_a_binary_log_is_refused_then_resolved_with_ipfix_ie() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stats.log");
    write_log(&log);

    // Without a declaration: refused, both fields named, and the option.
    let (code, out, err) = cat(&["--format", "ipfix"], &log);
    assert_eq!(code, 1, "{err}");
    let _ = out;
    assert!(
        err.contains(
            "enterprise element 32473/26276 would be field f116 (unsigned) of record type \
             fwStats and field f135 (unsigned) of record type lbStats: declare an id of its own"
        ) && err.contains("dplog-cat --ipfix-ie lbStats.f135=0x8000|<id>"),
        "{err}"
    );

    // An enterprise id declared for lbStats.f135: both exported, tshark
    // decodes the templates with 26276 and 4001 and every record.
    let (code, out, err) = cat(
        &[
            "--format",
            "ipfix",
            "--ipfix-ie",
            "lbStats.f135=0x8000|4001",
        ],
        &log,
    );
    assert_eq!(code, 0, "{err}");
    let r = decoded(
        dir.path(),
        &out,
        &[
            "cflow.template_id",
            "cflow.template_ipfix_field_type_enterprise",
            "cflow.template_ipfix_field_pen",
            "cflow.enterprise_private_entry",
        ],
    );
    assert_eq!(r[0], "256,257");
    assert_eq!(r[1], "26276,4001");
    assert_eq!(r[2], "32473,32473");
    assert_eq!(
        r[3], "0a000001,0064,0a000002,0065,0a000003,0066",
        "f116 and f135 of each record, in log order"
    );
    // The same written 32768+N.
    let (code, out2, err) = cat(
        &["--format", "ipfix", "--ipfix-ie", "lbStats.f135=36769"],
        &log,
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out2, out);

    // An IANA element for fwStats.f116 instead: sourceIPv4Address (8)
    // takes a 4-byte unsigned.
    let (code, out, err) = cat(&["--format", "ipfix", "--ipfix-ie", "fwStats.f116=8"], &log);
    assert_eq!(code, 0, "{err}");
    let r = decoded(
        dir.path(),
        &out,
        &[
            "cflow.template_ipfix_field_type",
            "cflow.template_ipfix_field_type_enterprise",
            "cflow.srcaddr",
        ],
    );
    assert_eq!(r[0], "323,8,323");
    assert_eq!(r[1], "26276");
    assert_eq!(r[2], "10.0.0.1,10.0.0.2,10.0.0.3");

    // Checked as a declaration: sourceIPv4Address on a 2-byte field, a
    // record type or field the log lacks, a bad id.
    let (code, _, err) = cat(&["--format", "ipfix", "--ipfix-ie", "lbStats.f135=8"], &log);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--ipfix-ie lbStats.f135:") && err.contains("sourceIPv4Address"),
        "{err}"
    );
    let (code, _, err) = cat(
        &["--format", "ipfix", "--ipfix-ie", "dnsQuery.f135=8"],
        &log,
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("the log has no record type dnsQuery (it has fwStats, lbStats)"),
        "{err}"
    );
    let (code, _, err) = cat(
        &["--format", "ipfix", "--ipfix-ie", "lbStats.f99=0x8000|5"],
        &log,
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("record type lbStats has no such field (it has t, f135)"),
        "{err}"
    );
    for bad in [
        "lbStats.f135=0x8000",
        "lbStats.f135=0x8000|0",
        "lbStats=5",
        "lbStats.f135=70000",
    ] {
        let (code, _, err) = cat(&["--format", "ipfix", "--ipfix-ie", bad], &log);
        assert_eq!(code, 2, "{bad}: {err}");
        assert!(err.contains("is not TYPE.FIELD=ID"), "{bad}: {err}");
    }
}

/// `lbConn`: `t` (event time), `backend: u32` declared as IANA element 8
/// (sourceIPv4Address), `vip: u32` without an element; a binary log of
/// `N` records.
fn write_lb_conn(path: &Path) {
    let lb = Schema::new(
        310,
        "lbConn",
        24,
        vec![
            FieldDef::new("t", 8, 8, FieldKind::NsTimestamp, 0),
            FieldDef::new("backend", 16, 4, FieldKind::U32, 8),
            FieldDef::new("vip", 20, 4, FieldKind::U32, 0),
        ],
    )
    .unwrap();
    let cfg = LogConfig::from_toml_str(&format!(
        "[ring]\nslot_bytes = 64\n[format]\ntype = \"binary\"\n[sink]\ntype = \"file\"\npath = \"{}\"\n",
        path.display()
    ))
    .unwrap();
    let logger = cfg.start_slots::<Slot64>(&[&lb]).unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..N {
        let mut r = vec![0u8; 24];
        r[0..2].copy_from_slice(&24u16.to_ne_bytes());
        r[2..4].copy_from_slice(&lb.id().to_ne_bytes());
        r[8..16].copy_from_slice(&(T0 + u64::from(i) * 1_000_000).to_ne_bytes());
        r[16..20].copy_from_slice(&(0x0a00_0001 + i).to_ne_bytes());
        r[20..24].copy_from_slice(&(0xc000_0201 + i).to_ne_bytes());
        assert!(p.log(Slot64::from_bytes(&r).unwrap()));
    }
    drop(p);
    assert_eq!(logger.shutdown().unwrap().written_records, u64::from(N));
}

/// Two fields of a type on one IANA element, and a field given twice,
/// are refused as enterprise clashes are; `=0` (no IANA element: the
/// field's enterprise one), which the type-mismatch message suggests,
/// is taken.
#[test]
fn an_iana_element_twice_in_a_type_or_a_field_given_twice_is_refused_and_0_is_taken() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("lb.log");
    write_lb_conn(&log);
    let (code, _, err) = cat(&["--format", "ipfix", "--ipfix-ie", "lbConn.vip=8"], &log);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "--ipfix-ie lbConn.vip: IANA element 8 (sourceIPv4Address) is already field backend's in record type lbConn"
        ),
        "{err}"
    );
    let (code, _, err) = cat(
        &[
            "--format",
            "ipfix",
            "--ipfix-ie",
            "lbConn.vip=12",
            "--ipfix-ie",
            "lbConn.vip=0x8000|7",
        ],
        &log,
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--ipfix-ie lbConn.vip is given twice (=12, then =0x8000|7)"),
        "{err}"
    );
    // The type-mismatch message suggests ie 0 ...
    let (code, _, err) = cat(&["--format", "ipfix", "--ipfix-ie", "lbConn.t=12"], &log);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("or ie 0 for an enterprise element"), "{err}");
    // ... and 0 is taken: backend leaves element 8 for an enterprise one,
    // and vip can then take 8 (in either order of the options).
    let (code, out, err) = cat(
        &[
            "--format",
            "ipfix",
            "--ipfix-ie",
            "lbConn.vip=8",
            "--ipfix-ie",
            "lbConn.backend=0",
        ],
        &log,
    );
    assert_eq!(code, 0, "{err}");
    let r = decoded(
        dir.path(),
        &out,
        &[
            "cflow.template_ipfix_field_type",
            "cflow.template_ipfix_field_type_enterprise",
            "cflow.srcaddr",
        ],
    );
    assert!(r[0].split(',').any(|t| t == "8"), "{r:?}");
    assert_eq!(
        r[1].split(',').count(),
        1,
        "backend as an enterprise element: {r:?}"
    );
    assert_eq!(
        r[2], "192.0.2.1,192.0.2.2,192.0.2.3",
        "vip as sourceIPv4Address"
    );
}
