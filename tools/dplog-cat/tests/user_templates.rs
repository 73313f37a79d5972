//! `dplog-cat --templates NAME=TEMPLATE` on a binary log of two user
//! record types (not NAT) in one ring of 64-byte slots: each type printed
//! with its own template, a type without one in the default layout, and
//! bad names refused with the log's schemas listed.

use std::process::Command;
use std::sync::OnceLock;

use dplog_core::schema::{HasSchema, Schema};
use dplog_core::{schema, Formatter, Record, RecordHeader, Slot64};
use dplog_formatters::{Format, FormatSpec};

/// 2026-01-01T00:00:00Z in ns since the Unix epoch.
const T0: u64 = 1_767_225_600_000_000_000;

#[repr(C)]
#[derive(Clone, Copy)]
struct PortDown {
    header: RecordHeader,
    time_ns: u64,
    if_index: u32,
    reason: u8,
    pad: [u8; 3],
}

impl Record for PortDown {
    const SCHEMA_ID: u16 = 610;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 4 + 1 + 3 = 24 bytes without padding (the
// padding is a field); the schema is built from its own offset_of!.
unsafe impl HasSchema for PortDown {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(PortDown, id = 610, name = "portDown", [
                time_ns => "eventTime": NsTimestamp, ie 0;
                if_index => "ifIndex": U32, ie 10;
                reason => "reason": Enum, ie 0, names &[(1, "CARRIER"), (2, "ADMIN")];
            ])
            .unwrap()
        })
    }
}

#[repr(C)]
#[derive(Clone, Copy)]
struct MacMove {
    header: RecordHeader,
    time_ns: u64,
    mac: [u8; 6],
    vlan: u16,
    from_port: u16,
    to_port: u16,
    pad: u32,
}

impl Record for MacMove {
    const SCHEMA_ID: u16 = 611;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 6 + 2 + 2 + 2 + 4 = 32 bytes without padding;
// the schema is built from its own offset_of!.
unsafe impl HasSchema for MacMove {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(MacMove, id = 611, name = "macMove", [
                time_ns => "eventTime": NsTimestamp, ie 0;
                mac => "mac": Mac, ie 56;
                vlan => "vlan": U16, ie 58;
                from_port => "fromPort": U16, ie 0;
                to_port => "toPort": U16, ie 0;
            ])
            .unwrap()
        })
    }
}

/// A binary log of both types, interleaved in 64-byte slots as one ring
/// carries them.
fn binary_log() -> Vec<u8> {
    let mut f = FormatSpec {
        kind: Format::Binary,
        ..Default::default()
    }
    .formatter(&[PortDown::schema(), MacMove::schema()])
    .unwrap();
    let down = |i: u64, reason| PortDown {
        header: RecordHeader::of::<PortDown>(),
        time_ns: T0 + i * 1_000_000,
        if_index: 7 + i as u32,
        reason,
        pad: [0; 3],
    };
    let moved = |i: u64| MacMove {
        header: RecordHeader::of::<MacMove>(),
        time_ns: T0 + i * 1_000_000,
        mac: [0x02, 0, 0x5e, 0, 0x53, i as u8],
        vlan: 20,
        from_port: 1,
        to_port: 2 + i as u16,
        pad: 0,
    };
    let slots = [
        Slot64::pack(&down(0, 1)).unwrap(),
        Slot64::pack(&moved(1)).unwrap(),
        Slot64::pack(&down(2, 2)).unwrap(),
        Slot64::pack(&moved(3)).unwrap(),
    ];
    let mut out = Vec::new();
    for s in &slots {
        f.format(s, &mut out);
    }
    assert_eq!(f.skipped(), 0);
    out
}

fn cat(args: &[&str]) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switch.bin");
    std::fs::write(&path, binary_log()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .args(args)
        .arg(&path)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn each_user_record_type_gets_its_own_template() {
    let (code, out, err) = cat(&[
        "--templates",
        "portDown={eventTime:rfc3339} DOWN if={ifIndex} {reason:name}",
        "--templates",
        "macMove={eventTime:rfc3339} MOVE {mac} vlan {vlan}: {fromPort} -> {toPort}",
    ]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert_eq!(
        out,
        "2026-01-01T00:00:00.000Z DOWN if=7 CARRIER\n\
         2026-01-01T00:00:00.001Z MOVE 02:00:5e:00:53:01 vlan 20: 1 -> 3\n\
         2026-01-01T00:00:00.002Z DOWN if=9 ADMIN\n\
         2026-01-01T00:00:00.003Z MOVE 02:00:5e:00:53:03 vlan 20: 1 -> 5\n"
    );
}

#[test]
fn a_type_without_a_template_prints_the_default_layout_and_templates_override_template() {
    // `--template` is the first type's (portDown); `--templates` names the
    // second only.
    let (code, out, err) = cat(&[
        "--template",
        "down {ifIndex}",
        "--templates",
        "macMove=move {toPort}",
    ]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert_eq!(out, "down 7\nmove 3\ndown 9\nmove 5\n");
    // Without templates for the second type: its default layout.
    let (code, out, _) = cat(&["--templates", "portDown=down {ifIndex}"]);
    assert_eq!(code, Some(0));
    assert_eq!(
        out,
        "down 7\n\
         2026-01-01T00:00:00.001000Z eventTime=1767225600001 mac=02:00:5e:00:53:01 vlan=20 fromPort=1 toPort=3\n\
         down 9\n\
         2026-01-01T00:00:00.003000Z eventTime=1767225600003 mac=02:00:5e:00:53:03 vlan=20 fromPort=1 toPort=5\n"
    );
    // A name's own template wins over `--template` for the first type.
    let (code, out, _) = cat(&[
        "--template",
        "first {ifIndex}",
        "--templates",
        "portDown=named {ifIndex}",
        "--templates",
        "macMove=m",
    ]);
    assert_eq!(code, Some(0));
    assert_eq!(out, "named 7\nm\nnamed 9\nm\n");
}

#[test]
fn bad_templates_are_refused_with_the_reason() {
    let (code, out, err) = cat(&["--templates", "aclDrop={ruleId}"]);
    assert_eq!((code, out.as_str()), (Some(1), ""));
    assert_eq!(
        err,
        "dplog-cat: template for unknown schema \"aclDrop\"; schemas: portDown, macMove\n"
    );
    let (code, _, err) = cat(&["--templates", "portDown={nope}"]);
    assert_eq!(code, Some(1));
    assert!(
        err.starts_with("dplog-cat: schema portDown: ") && err.contains("nope"),
        "{err}"
    );
    let (code, _, err) = cat(&["--templates", "portDown"]);
    assert_eq!(code, Some(2), "a usage error");
    assert!(err.contains("\"portDown\" is not NAME=TEMPLATE"), "{err}");
    let (code, _, err) = cat(&["--format", "json", "--templates", "portDown=x"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("`templates` applies only to type \"text\""),
        "{err}"
    );
}
