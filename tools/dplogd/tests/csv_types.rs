//! dplogd's CSV output of several record types: rings of a user's two
//! record types (a DNS query and an ACL drop, of different columns; no
//! NAT) drained by a real dplogd into CSV go to one file per record type,
//! `out.<type>.csv`, each headed once by its own columns, so python's
//! `csv.DictReader` reads every row of every file with the right header
//! (checked strictly: no row with a cell more or less than its header).
//! A restarted dplogd cuts each file back to its checkpoint and appends
//! to it without a second header.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use common::*;
use dplog::config::LogConfig;
use dplog::schema::{HasSchema, Schema};
use dplog::shm::{ShmLogProducer, ShmOptions};
use dplog::{schema, Record, RecordHeader, RecordRules, Slot, Slot64};

/// 2026-01-01T00:00:00Z in ns since the Unix epoch.
const T0: u64 = 1_767_225_600_000_000_000;

/// A DNS query: 64 bytes, schema id 400.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct DnsQuery {
    header: RecordHeader,
    time_ns: u64,
    client: u32,
    client_port: u16,
    qtype: u16,
    qname: [u8; 40],
}
const _: () = assert!(std::mem::size_of::<DnsQuery>() == 64);

impl Record for DnsQuery {
    const SCHEMA_ID: u16 = 400;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 4 + 2 + 2 + 40 = 64 bytes without padding
// (size asserted above); the schema is built from its own offset_of!
// values and size_of.
unsafe impl HasSchema for DnsQuery {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(DnsQuery, id = 400, name = "dnsQuery", [
                time_ns => "queryTime": NsTimestamp, ie 323;
                client => "clientAddr": Ipv4, ie 8;
                client_port => "clientPort": Port, ie 7;
                qtype => "queryType": U16, ie 0;
                qname => "queryName": Bytes, ie 0;
            ])
            .unwrap()
        })
    }
}

/// An ACL drop: 32 bytes, schema id 401.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct AclDrop {
    header: RecordHeader,
    time_ns: u64,
    rule_id: u32,
    reason: u8,
    protocol: u8,
    vlan: u16,
    packet_len: u32,
    in_port: u32,
}
const _: () = assert!(std::mem::size_of::<AclDrop>() == 32);

impl Record for AclDrop {
    const SCHEMA_ID: u16 = 401;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 4 + 1 + 1 + 2 + 4 + 4 = 32 bytes without
// padding (size asserted above); the schema is built from its own
// offset_of! values and size_of.
unsafe impl HasSchema for AclDrop {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(AclDrop, id = 401, name = "aclDrop", [
                time_ns => "dropTime": NsTimestamp, ie 0;
                rule_id => "ruleId": U32, ie 0;
                reason => "reason": Enum, ie 0, names &[(1, "deny"), (2, "rateLimit")];
                protocol => "protocolIdentifier": Protocol, ie 4;
                vlan => "vlanId": U16, ie 58;
                packet_len => "packetLength": U32, ie 0;
                in_port => "ingressPort": U32, ie 0;
            ])
            .unwrap()
        })
    }
}

fn query(i: u64) -> DnsQuery {
    let mut qname = [0u8; 40];
    let name = format!("host{i}.example.org");
    qname[..name.len()].copy_from_slice(name.as_bytes());
    DnsQuery {
        header: RecordHeader::of::<DnsQuery>(),
        time_ns: T0 + i * 1_000_000,
        client: 0xC000_0201 + i as u32,
        client_port: 40000 + i as u16,
        qtype: 28,
        qname,
    }
}

fn drop_of(i: u64) -> AclDrop {
    AclDrop {
        header: RecordHeader::of::<AclDrop>(),
        time_ns: T0 + i * 1_000_000,
        rule_id: 100 + i as u32,
        reason: if i % 2 == 0 { 1 } else { 2 },
        protocol: 6,
        vlan: 102,
        packet_len: 60 + i as u32,
        in_port: 3,
    }
}

/// The columns of dnsQuery's file: its fields, then the drop report's.
const DNS_COLUMNS: &str =
    "recordType,timestamp,queryTime,clientAddr,clientPort,queryType,queryName,\
dplogDropped,dplogDropRing,dplogDropReason,dplogFirstDropWallClock,dplogLastDropWallClock";
/// The columns of aclDrop's file.
const ACL_COLUMNS: &str = "recordType,timestamp,dropTime,ruleId,reason,protocolIdentifier,vlanId,\
packetLength,ingressPort,dplogDropped,dplogDropRing,dplogDropReason,dplogFirstDropWallClock,\
dplogLastDropWallClock";

/// A ring `name` of `rings` declaring `types`, into which `log` logs, then
/// closed.
fn ring(
    rings: &Path,
    name: &str,
    types: &[&Schema],
    log: impl FnOnce(&mut ShmLogProducer<Slot64>),
) {
    let cfg = LogConfig::from_toml_str("[ring]\ncapacity = 64\n").unwrap();
    let types = cfg.record_types(types, Slot64::BYTES);
    let opts = ShmOptions {
        dir: rings.to_path_buf(),
        name: name.into(),
        capacity: 64,
        group: None,
        daemon_uid: None,
    };
    let mut p =
        ShmLogProducer::<Slot64>::create(&opts, &cfg.logger_config(), &types, RecordRules::own())
            .unwrap();
    log(&mut p);
    p.flush();
}

/// `(recordType, key)` of every row of the CSV file `path`, read by
/// python's csv.DictReader (strict quoting) after checking that its
/// header is exactly `columns` and that every row has exactly one cell
/// per column; `key` is the row's `ruleId` or `queryName`. Panics with
/// python's message otherwise.
fn dict_rows(path: &Path, columns: &str) -> Vec<(String, String)> {
    const SCRIPT: &str = r#"
import csv, sys
path, columns = sys.argv[1], sys.argv[2].split(",")
with open(path, newline="") as f:
    r = csv.DictReader(f, strict=True)
    if r.fieldnames != columns:
        sys.exit(f"header {r.fieldnames}, want {columns}")
    for row in r:
        if None in row or None in row.values():
            sys.exit(f"line {r.line_num}: cells missing or extra: {row}")
        if row["recordType"] in columns:
            sys.exit(f"line {r.line_num}: a header line among the rows")
        print(row["recordType"], row.get("ruleId") or row.get("queryName"))
"#;
    let out = Command::new("python3")
        .args(["-c", SCRIPT, path.to_str().unwrap(), columns])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}\n{}",
        path.display(),
        String::from_utf8_lossy(&out.stderr),
        read(path)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (t, k) = l.split_once(' ').unwrap();
            (t.to_string(), k.to_string())
        })
        .collect()
}

/// The whole lines of `path` that start with `prefix`.
fn count(path: &Path, prefix: &str) -> usize {
    read_lines(path)
        .lines()
        .filter(|l| l.starts_with(prefix))
        .count()
}

#[test]
fn csv_of_two_user_types_is_one_file_per_type_each_with_its_own_header() {
    let s = Setup::with_config(
        "[format]\ntype = \"csv\"\n[sink]\ntype = \"file\"\npath = \"@/out.csv\"\n",
    );
    let dns = s.path("out.dnsQuery.csv");
    let acl = s.path("out.aclDrop.csv");
    let mut d = s.daemon();
    // One ring of both types, interleaved; one of aclDrop alone.
    ring(
        &s.rings(),
        "both",
        &[DnsQuery::schema(), AclDrop::schema()],
        |p| {
            for i in 0..3 {
                assert!(p.log(Slot64::pack_record(&query(i)).unwrap()));
                assert!(p.log(Slot64::pack_record(&drop_of(i)).unwrap()));
            }
        },
    );
    ring(&s.rings(), "acl", &[AclDrop::schema()], |p| {
        for i in 3..5 {
            assert!(p.log(Slot64::pack_record(&drop_of(i)).unwrap()));
        }
    });
    wait_for(60, "3 dnsQuery and 5 aclDrop rows", || {
        count(&dns, "dnsQuery,") >= 3 && count(&acl, "aclDrop,") >= 5
    });
    assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
    assert!(
        !s.path("out.csv").exists(),
        "the configured path itself stays unwritten"
    );
    let q = |i: u64| ("dnsQuery".to_string(), format!("host{i}.example.org"));
    let a = |i: u64| ("aclDrop".to_string(), (100 + i).to_string());
    assert_eq!(dict_rows(&dns, DNS_COLUMNS), [q(0), q(1), q(2)]);
    let mut acl_rows = dict_rows(&acl, ACL_COLUMNS);
    acl_rows.sort();
    assert_eq!(acl_rows, [a(0), a(1), a(2), a(3), a(4)]);

    // What a daemon killed between a write and its checkpoint leaves: a
    // row past the checkpointed length of a type's file. The restarted
    // daemon cuts it back (the type files are checkpointed outputs),
    // then appends to each file: still one header each.
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(&acl).unwrap();
    f.write_all(b"aclDrop,not,checkpointed\r\n").unwrap();
    drop(f);
    let mut d = s.daemon();
    ring(
        &s.rings(),
        "later",
        &[AclDrop::schema(), DnsQuery::schema()],
        |p| {
            assert!(p.log(Slot64::pack_record(&drop_of(5)).unwrap()));
            assert!(p.log(Slot64::pack_record(&query(3)).unwrap()));
        },
    );
    wait_for(60, "the rows of the restarted daemon", || {
        count(&dns, "dnsQuery,") >= 4 && count(&acl, "aclDrop,") >= 6
    });
    assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
    assert_eq!(dict_rows(&dns, DNS_COLUMNS), [q(0), q(1), q(2), q(3)]);
    let mut acl_rows = dict_rows(&acl, ACL_COLUMNS);
    acl_rows.sort();
    assert_eq!(acl_rows, [a(0), a(1), a(2), a(3), a(4), a(5)]);
}
