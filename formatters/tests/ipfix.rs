//! IPFIX messages decoded by Wireshark's tshark (installed by
//! scripts/setup.sh): the encoder's output is written to a pcap as UDP
//! datagrams to port 4739 and every field is compared with the record.

mod acl;
mod common;

use dplog_schema_nat::NatFormatSpec as _;
use std::path::Path;
use std::process::Command;

#[path = "../../testkit/fixtures/lb_conn.rs"]
mod lb_conn;

use acl::*;
use common::*;
use dplog_core::schema::{
    derived_enterprise_ie, FieldDef, FieldKind, HasSchema, Schema, ENTERPRISE_IE,
};
use dplog_core::Formatter;
use dplog_formatters::ipfix::split_messages;
use dplog_formatters::{ExportClock, Format, FormatSpec, IpfixOptions};
use dplog_testkit::tshark;

fn ipfix_spec(mtu: usize) -> FormatSpec {
    FormatSpec {
        kind: Format::Ipfix,
        ipfix: IpfixOptions {
            mtu,
            export_clock: ExportClock::Record,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The IPFIX port the pcaps' datagrams go to (RFC 7011 §10.3.4).
const PORT: u16 = 4739;

/// Writes every IPFIX message of `stream` to a pcap as one UDP datagram to
/// [`PORT`]; returns how many.
fn write_pcap(path: &Path, stream: &[u8]) -> usize {
    let msgs = split_messages(stream);
    tshark::write_udp_pcap(path, &msgs, PORT);
    msgs.len()
}

/// tshark's `fields` of every packet of the pcap at `path`.
fn tshark(path: &Path, fields: &[&str]) -> Vec<Vec<String>> {
    tshark::fields(path, PORT, fields)
}

#[test]
fn tshark_decodes_every_field_of_every_nat_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = ipfix_spec(1500).nat_formatter().unwrap();
    let mut out = Vec::new();
    let recs = all_records();
    for r in &recs {
        f.format(r, &mut out);
    }
    let p = dir.path().join("nat.pcap");
    assert_eq!(
        write_pcap(&p, &out),
        1,
        "7 records fit one 1472-byte message"
    );
    let rows = tshark(
        &p,
        &[
            "cflow.version",
            "cflow.sequence",
            "cflow.od_id",
            "cflow.nat_event",
            "cflow.srcaddr",
            "cflow.srcport",
            "cflow.post_natsource_ipv4_address",
            "cflow.post_naptsource_transport_port",
            "cflow.dstaddr",
            "cflow.dstport",
            "cflow.protocol",
            "cflow.ingress_vrfid",
            "cflow.port_range_start",
            "cflow.port_range_end",
            "cflow.port_range_num_ports",
            "cflow.nat_pool_id",
            "cflow.nat_quota_exceeded_event",
            "cflow.max_entries_per_user",
            "cflow.observation_time_milliseconds",
        ],
    );
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0];
    assert_eq!(r[0], "10");
    assert_eq!(r[1], "0", "first message: no data records before it");
    assert_eq!(r[2], "1");
    assert_eq!(r[3], "4,5,16,17,3,12,13");
    assert_eq!(r[4], "10.0.0.6,10.0.0.6,10.0.0.7,10.0.0.7,10.0.0.9");
    assert_eq!(r[5], "51234,51234");
    assert_eq!(
        r[6],
        "198.51.100.3,198.51.100.3,198.51.100.4,198.51.100.4,198.51.100.254"
    );
    assert_eq!(r[7], "1024,1024");
    assert_eq!(r[8], "203.0.113.5,203.0.113.5");
    assert_eq!(r[9], "443,443");
    assert_eq!(r[10], "6,6,17");
    assert_eq!(r[11], "7,7,3,0");
    assert_eq!(r[12], "2048,2048");
    assert_eq!(r[13], "2559,2559");
    assert_eq!(r[14], "512,512");
    assert_eq!(r[15], "42");
    assert_eq!(r[16], "3");
    assert_eq!(r[17], "300");
    // observationTimeMilliseconds on every record; tshark prints it as a
    // date, so compare the count and the first one's milliseconds.
    assert_eq!(
        r[18],
        "Jan  1, 2026 00:00:00.123000000 UTC,Jan  1, 2026 00:01:01.623000000 UTC,\
         Jan  1, 2026 00:00:00.124000000 UTC,Jan  1, 2026 00:00:00.125000000 UTC,\
         Jan  1, 2026 00:00:00.126000000 UTC,Jan  1, 2026 00:00:00.127000000 UTC,\
         Jan  1, 2026 00:00:00.128000000 UTC"
    );
}

#[test]
fn sequence_counts_records_messages_respect_the_mtu_and_templates_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = ipfix_spec(256).nat_formatter().unwrap();
    let mut out = Vec::new();
    // 100 creates 1 s apart: 100 s of export time, so the templates (sent
    // first) are re-sent every 20 s.
    for i in 0..100u64 {
        let mut r = session(4);
        r.timestamp_ns = T0 + i * 1_000_000_000;
        r.src_port = i as u16;
        f.format(&r, &mut out);
    }
    let msgs = split_messages(&out);
    assert_eq!(msgs.iter().map(|m| m.len()).sum::<usize>(), out.len());
    assert!(msgs.iter().all(|m| m.len() <= 256 - 28));
    let p = dir.path().join("seq.pcap");
    write_pcap(&p, &out);
    let rows = tshark(
        &p,
        &["cflow.sequence", "cflow.srcport", "cflow.template_id"],
    );
    assert_eq!(rows.len(), msgs.len());
    let mut expected_seq = 0u64;
    let mut ports = Vec::new();
    let mut template_msgs = 0;
    for r in &rows {
        assert_eq!(r[0].parse::<u64>().unwrap(), expected_seq, "{rows:?}");
        let n: Vec<u64> = r[1]
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().unwrap())
            .collect();
        expected_seq += n.len() as u64;
        ports.extend(n);
        // At this MTU the 10 templates take two messages; count refreshes
        // by the first template id.
        if r[2].split(',').any(|t| t == "256") {
            template_msgs += 1;
        }
    }
    assert_eq!(ports, (0..100).collect::<Vec<u64>>());
    // t = 0, 20, 40, 60, 80 s.
    assert_eq!(template_msgs, 5, "{rows:?}");
}

#[test]
fn nat_templates_have_no_enterprise_element_and_quota_limit_only_its_iana_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = ipfix_spec(1500).nat_formatter().unwrap();
    let mut out = Vec::new();
    for r in all_records() {
        f.format(&r, &mut out);
    }
    let p = dir.path().join("nat.pcap");
    write_pcap(&p, &out);
    let rows = tshark(
        &p,
        &[
            "cflow.template_id",
            "cflow.template_ipfix_pen_provided",
            "cflow.template_ipfix_field_pen",
            "cflow.template_ipfix_field_type",
        ],
    );
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0];
    // Five schemas, the quota one as six templates (five limits and none).
    assert_eq!(r[0], "256,257,258,259,260,261,262,263,264,265");
    assert!(
        !r[1].is_empty() && r[1].split(',').all(|b| b == "0"),
        "{r:?}"
    );
    assert_eq!(r[2], "", "no enterprise number in any NAT template");
    // quotaLimit (no IANA element of its own) appears only as the limit
    // element of its subtype: 471..=475, once each.
    let types: Vec<u32> = r[3].split(',').map(|t| t.parse().unwrap()).collect();
    for ie in 471..=475 {
        assert_eq!(types.iter().filter(|&&t| t == ie).count(), 1, "{ie}");
    }
    assert_eq!(types.iter().filter(|&&t| t == 466).count(), 6);
}

#[test]
fn tshark_decodes_enterprise_elements_and_the_tsc_event_time_of_a_user_schema() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = ipfix_spec(1500).formatter(&[AclDrop::schema()]).unwrap();
    f.set_tsc_calibration(ACL_CAL);
    let mut out = Vec::new();
    for r in [
        acl_drop(1_234, 1, 7, true),
        acl_drop(2_500, 2, 0x0102_0304, false),
        acl_drop(61_001, 3, 4_000_000_000, true),
    ] {
        f.format(&r, &mut out);
    }
    assert_eq!(f.skipped(), 0);
    let p = dir.path().join("acl.pcap");
    assert_eq!(write_pcap(&p, &out), 1);
    let rows = tshark(
        &p,
        &[
            "cflow.template_id",
            "cflow.template_field_count",
            "cflow.template_ipfix_pen_provided",
            "cflow.template_ipfix_field_type",
            "cflow.template_ipfix_field_type_enterprise",
            "cflow.template_ipfix_field_pen",
            "cflow.template_field_length",
            "cflow.observation_time_milliseconds",
            "cflow.srcaddrv6",
            "cflow.srcmac",
            "cflow.vlanid",
            "cflow.protocol",
            "cflow.srcport",
            "cflow.dstport",
            "cflow.enterprise_private_entry",
        ],
    );
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0];
    assert_eq!(r[0], "256");
    // The stamp and 9 fields: the event-time field (no IANA element) is
    // the stamp, not exported again.
    assert_eq!(r[1], "10");
    assert_eq!(
        r[2], "0,0,0,0,1,0,0,0,1,1",
        "the enterprise bit on dropReason, logged and ruleId"
    );
    // IANA element ids in template order, then the enterprise ones: each
    // derived from the field's name and type class, all under PEN 32473.
    assert_eq!(r[3], "323,27,56,58,4,7,11");
    // Pinned: dropReason 21645 (an enum), logged 12947, ruleId 3074.
    assert_eq!(r[4], "21645,12947,3074");
    let ids: Vec<String> = ["dropReason", "logged", "ruleId"]
        .iter()
        .map(|n| {
            let (_, f) = AclDrop::schema().field(n).unwrap();
            derived_enterprise_ie(n, f.kind).to_string()
        })
        .collect();
    assert_eq!(r[4], ids.join(","));
    assert_eq!(r[5], "32473,32473,32473");
    assert_eq!(r[6], "8,16,6,2,1,1,2,2,1,4");
    // observationTimeMilliseconds from the TSC event-time field, converted
    // with the calibration.
    assert_eq!(
        r[7],
        "Jan  1, 2026 00:00:01.234000000 UTC,Jan  1, 2026 00:00:02.500000000 UTC,\
         Jan  1, 2026 00:01:01.001000000 UTC"
    );
    assert_eq!(r[8], "2001:db8::1,2001:db8::2,2001:db8::3");
    assert_eq!(
        r[9],
        "02:00:5e:10:20:01,02:00:5e:10:20:02,02:00:5e:10:20:03"
    );
    assert_eq!(r[10], "101,102,103");
    assert_eq!(r[11], "17,17,17");
    assert_eq!(r[12], "5353,5353,5353");
    assert_eq!(r[13], "53,53,53");
    // Per record: dropReason (1 byte), logged (RFC 7011 boolean: 1 true,
    // 2 false), ruleId (4 bytes big-endian).
    assert_eq!(r[14], "01,01,00000007,02,02,01020304,03,01,ee6b2800");
    // The same values in tshark's own words, each with its element id and
    // enterprise (32473 is IANA's documentation PEN).
    let entries: Vec<String> = tshark_verbose(&p)
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Enterprise Private entry: "))
        .map(String::from)
        .collect();
    let e = |t: u16, v: &str| {
        format!(
            "(Example Enterprise Number for Documentation Use) Type {t}: Value (hex bytes): {v}"
        )
    };
    assert_eq!(
        entries,
        [
            e(21645, "01"),
            e(12947, "01"),
            e(3074, "00 00 00 07"),
            e(21645, "02"),
            e(12947, "02"),
            e(3074, "01 02 03 04"),
            e(21645, "03"),
            e(12947, "01"),
            e(3074, "ee 6b 28 00"),
        ]
    );
}

/// tshark's detailed dissection (`-V`) of the IPFIX packets in `path`.
fn tshark_verbose(path: &Path) -> String {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(path)
        .args(["-d", "udp.port==4739,cflow", "-V"])
        .output()
        .expect("tshark not found: run scripts/setup.sh (Debian package tshark)");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The IPFIX file format, byte for byte (`tests/golden/nat.ipfix`):
/// every NAT record type, then 100 session creates 1 s apart at a 256-byte
/// MTU (many messages, template refreshes). Regenerate with
/// `DPLOG_UPDATE_GOLDEN=1` only for a deliberate format change.
#[test]
fn the_ipfix_file_format_is_the_golden_one() {
    let mut f = ipfix_spec(256).nat_formatter().unwrap();
    let mut out = Vec::new();
    for r in all_records() {
        f.format(&r, &mut out);
    }
    for i in 0..100u64 {
        let mut r = session(if i % 2 == 0 { 4 } else { 5 });
        r.timestamp_ns = T0 + 1_000_000_000 + i * 1_000_000_000;
        r.src_port = i as u16;
        f.format(&r, &mut out);
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/nat.ipfix");
    if std::env::var_os("DPLOG_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &out).unwrap();
    }
    let want = std::fs::read(&path).unwrap();
    assert!(
        out == want,
        "the IPFIX stream differs from tests/golden/nat.ipfix"
    );
}

/// Drop reports in IPFIX: the Exporting Process Reliability Statistics
/// options template (RFC 7011 section 4.3) once, then an options record
/// per report, decoded by tshark: exportingProcessId as the scope,
/// notSentFlowTotalCount as a running total, the first and last drop as
/// observationTimeMilliseconds.
#[test]
fn tshark_decodes_drop_reports_as_reliability_statistics_options_records() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = ipfix_spec(1500).nat_formatter().unwrap();
    let mut out = Vec::new();
    // 2026-11-30T07:49:15Z and 100 ms later.
    let wall = 1_796_024_955_000_000_000u64;
    let r = session(4);
    f.format(&r, &mut out);
    Formatter::<dplog_schema_nat::Nat44SessionRecord>::format_drop_report(
        &mut f,
        &dplog_core::DropReport::new(0, 12, wall, wall + 100_000_000).with_record_time(T0),
        &mut out,
    );
    f.format(&r, &mut out);
    Formatter::<dplog_schema_nat::Nat44SessionRecord>::format_drop_report(
        &mut f,
        &dplog_core::DropReport::sink(5, wall + 200_000_000, wall + 300_000_000),
        &mut out,
    );
    let p = dir.path().join("drops.pcap");
    assert_eq!(write_pcap(&p, &out), 1);
    let rows = tshark(
        &p,
        &[
            "_ws.malformed",
            "cflow.sequence",
            "cflow.template_ipfix_scope_field_count",
            "cflow.scope_field_type",
            "cflow.notsent_flows",
            "cflow.observation_time_milliseconds",
            "cflow.template_id",
        ],
    );
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0];
    assert_eq!(r[0], "", "malformed");
    assert_eq!(r[1], "0");
    assert_eq!(r[2], "1", "one scope field");
    // Running total: 12, then 12 + 5.
    assert_eq!(r[4], "12,17");
    // Two records (first and last drop each) after each session's stamp.
    // tshark prints dates with a comma ("Nov 30, 2026 ... UTC").
    let times: Vec<&str> = r[5].split(" UTC").filter(|t| !t.is_empty()).collect();
    assert_eq!(times.len(), 2 + 2 * 2, "{times:?}");
    assert!(times[1].contains("07:49:15.000000000"), "{times:?}");
    assert!(times[2].contains("07:49:15.100000000"), "{times:?}");
    assert!(times[4].contains("07:49:15.200000000"), "{times:?}");
    assert!(times[5].contains("07:49:15.300000000"), "{times:?}");
    // The options template once, after the NAT templates (256..=265).
    assert_eq!(r[6].split(',').filter(|t| *t == "266").count(), 1, "{r:?}");
    // tshark's own words: exportingProcessId (144, which it names by its
    // NetFlow v9 name) as the one scope field, its value in each record.
    let v = tshark_verbose(&p);
    assert!(v.contains("(Scope Count = 1; Data Count = 3)"), "{v}");
    assert!(v.contains("Field (1/1) [Scope]: FLOW_EXPORTER"), "{v}");
    assert_eq!(v.matches("FlowExporter: 1\n").count(), 2, "{v}");
    assert!(!v.contains("Malformed"), "{v}");
}

/// A firewall's drop (`fwDrop`) and a load balancer's connection
/// (`lbConn`), declared by their user: both have `bytesIn: u64` without
/// an IANA element; each has fields of its own; `fwDrop.srcAddr` is
/// IANA's sourceIPv4Address (8).
fn fw_and_lb() -> (Schema, Schema) {
    let fw = Schema::new(
        300,
        "fwDrop",
        48,
        vec![
            FieldDef::new("dropTime", 8, 8, FieldKind::NsTimestamp, 0),
            FieldDef::new("srcAddr", 16, 4, FieldKind::Ipv4, 8),
            FieldDef::new("ruleId", 20, 4, FieldKind::U32, 0),
            FieldDef::new("bytesIn", 24, 8, FieldKind::U64, 0),
            FieldDef::new("reason", 32, 16, FieldKind::Bytes, 0),
        ],
    )
    .unwrap();
    let lb = Schema::new(
        301,
        "lbConn",
        48,
        vec![
            FieldDef::new("connTime", 8, 8, FieldKind::NsTimestamp, 0),
            FieldDef::new("backend", 16, 4, FieldKind::Ipv4, 0),
            FieldDef::new("bytesIn", 24, 8, FieldKind::U64, 0),
            FieldDef::new("bytesOut", 32, 8, FieldKind::U64, 0),
        ],
    )
    .unwrap();
    (fw, lb)
}

/// One record of `s` (48 bytes): its header, the time, then `body` at
/// byte 16.
fn record_of(s: &Schema, body: &[u8]) -> Vec<u8> {
    let mut r = vec![0u8; 48];
    r[0..2].copy_from_slice(&48u16.to_ne_bytes());
    r[2..4].copy_from_slice(&s.id().to_ne_bytes());
    r[8..16].copy_from_slice(&1_767_225_600_000_000_000u64.to_ne_bytes());
    r[16..16 + body.len()].copy_from_slice(body);
    r
}

/// IPFIX of one record of each of `schemas` (in that registration
/// order); tshark's template ids, then per field the element id without
/// the enterprise bit of the enterprise fields and their PENs.
fn enterprise_elements(schemas: &[&Schema]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let mut f = ipfix_spec(1500).formatter(schemas).unwrap();
    let mut out = Vec::new();
    for s in schemas {
        let mut body = vec![0u8; 32];
        body[0..4].copy_from_slice(&0x0a00_0001u32.to_ne_bytes());
        body[8..16].copy_from_slice(&1234u64.to_ne_bytes());
        assert!(f.push_bytes(&record_of(s, &body), &mut out));
    }
    let p = dir.path().join("two.pcap");
    assert_eq!(write_pcap(&p, &out), 1);
    let rows = tshark(
        &p,
        &[
            "cflow.template_id",
            "cflow.template_ipfix_field_type_enterprise",
            "cflow.template_ipfix_field_pen",
        ],
    );
    assert_eq!(rows.len(), 1, "{rows:?}");
    rows[0].clone()
}

/// RFC 7011 gives a (PEN, element id) one meaning: decoded by tshark, the
/// two types' `bytesIn` is one enterprise element, every other field
/// without an IANA element one of its own, with the ids derived from
/// name and type (pinned: the same in every run and version), whichever
/// type is registered first; a declared id goes out as declared; an
/// exporter whose types would give one id two meanings is refused.
#[test]
fn tshark_decodes_one_enterprise_element_per_field_name_and_type_across_types() {
    let (fw, lb) = fw_and_lb();
    // fwDrop: ruleId, bytesIn, reason; lbConn: backend, bytesIn,
    // bytesOut (the event-time fields are the stamp, 323).
    let r = enterprise_elements(&[&fw, &lb]);
    assert_eq!(r[0], "256,257");
    assert_eq!(r[1], "3074,31604,27312,7803,31604,18709");
    assert_eq!(r[2], "32473,32473,32473,32473,32473,32473");
    // Registered the other way round: the templates swap, each field
    // keeps its id.
    let r = enterprise_elements(&[&lb, &fw]);
    assert_eq!(r[1], "7803,31604,18709,3074,31604,27312");
    // Served alone, the same ids.
    assert_eq!(enterprise_elements(&[&lb])[1], "7803,31604,18709");

    // A declared id, with the field or by the builder.
    let lb7 = lb
        .clone()
        .with_ipfix_enterprise_ie("backend", 7001)
        .unwrap();
    assert_eq!(
        enterprise_elements(&[&fw, &lb7])[1],
        "3074,31604,27312,7001,31604,18709"
    );

    // A field of another type and name that declares bytesIn's id:
    // refused when the exporter is built, naming both and how to resolve
    // it.
    let clash = Schema::new(
        303,
        "lbStats",
        16,
        vec![FieldDef::new(
            "bytesOut",
            8,
            8,
            FieldKind::U64,
            ENTERPRISE_IE | 31604,
        )],
    )
    .unwrap();
    let e = ipfix_spec(1500)
        .formatter(&[&fw, &clash])
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains(
            "enterprise element 32473/31604 would be field bytesIn (unsigned) of record type \
             fwDrop and field bytesOut (unsigned) of record type lbStats"
        ) && e.contains("declare an id of its own"),
        "{e}"
    );
    // A bytesIn of another type is another element.
    let blob = Schema::new(
        302,
        "blob",
        24,
        vec![FieldDef::new("bytesIn", 8, 16, FieldKind::Bytes, 0)],
    )
    .unwrap();
    assert_eq!(blob.enterprise_ie(0), Some(22097));
    ipfix_spec(1500).formatter(&[&fw, &blob]).unwrap();
}

/// A binary log carries each schema's ids: decoded (as dplog-cat and
/// dplogd do), its schemas export the templates the writer's did, byte
/// for byte, declared ids included.
#[test]
fn a_binary_log_re_exports_the_same_enterprise_elements() {
    let (fw, lb) = fw_and_lb();
    let lb = lb.with_ipfix_enterprise_ie("backend", 7001).unwrap();
    let recs = [record_of(&fw, &[1; 32]), record_of(&lb, &[2; 32])];
    let mut bin = FormatSpec {
        kind: Format::Binary,
        ..Default::default()
    }
    .formatter(&[&fw, &lb])
    .unwrap();
    let mut log = Vec::new();
    for r in &recs {
        assert!(bin.push_bytes(r, &mut log));
    }
    let d = dplog_formatters::binary::decode(&log);
    assert_eq!(d.schemas, [fw.clone(), lb.clone()]);
    let ipfix = |schemas: &[&Schema]| {
        let mut f = ipfix_spec(1500).formatter(schemas).unwrap();
        let mut out = Vec::new();
        for r in &recs {
            assert!(f.push_bytes(r, &mut out));
        }
        out
    };
    let decoded: Vec<&Schema> = d.schemas.iter().collect();
    assert_eq!(ipfix(&decoded), ipfix(&[&fw, &lb]));
}

/// A binary log written before enterprise element ids were derived from
/// names (its schema without metadata; bytes of that code), exported
/// again as IPFIX (as `dplog-cat --format ipfix` does): its fields keep
/// the ids its writer exported, their positions (vip 2nd .. bytesOut
/// 9th; connTime, the event time, is the stamp).
#[test]
fn an_old_binary_log_re_exports_its_writers_position_ids() {
    let old = lb_conn::old_binary_log();
    let d = dplog_formatters::binary::decode(&old);
    assert!(d.stopped.is_none(), "{:?}", d.stopped);
    let schemas: Vec<&Schema> = d.schemas.iter().collect();
    let mut f = ipfix_spec(1500).formatter(&schemas).unwrap();
    let mut out = Vec::new();
    for (_, r) in &d.records {
        assert!(f.push_bytes(r, &mut out));
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("old.pcap");
    assert_eq!(write_pcap(&p, &out), 1);
    let rows = tshark(
        &p,
        &[
            "cflow.template_ipfix_field_type_enterprise",
            "cflow.template_ipfix_field_pen",
        ],
    );
    assert_eq!(rows[0][0], "2,3,4,5,6,7,8,9");
    // The same schema declared now takes the derived ids.
    assert_eq!(
        lb_conn::fields_only().enterprise_ie(7),
        Some(derived_enterprise_ie("bytesIn", FieldKind::U64))
    );
}

/// A load balancer's `lbConn` whose `connEvent` is an enum (codes with
/// names) and an `lbStats` whose `connEvent` is a count of one byte: one
/// name and width, two meanings.
fn enum_and_count() -> (Schema, Schema) {
    let names: &'static [(u32, &'static str)] = &[(1, "OPEN"), (2, "CLOSE")];
    let conn = Schema::new(
        301,
        "lbConn",
        48,
        vec![
            FieldDef::new("connTime", 8, 8, FieldKind::NsTimestamp, 0),
            FieldDef::new("connEvent", 16, 1, FieldKind::Enum, 0).with_names(names),
        ],
    )
    .unwrap();
    let stats = Schema::new(
        304,
        "lbStats",
        48,
        vec![
            FieldDef::new("statsTime", 8, 8, FieldKind::NsTimestamp, 0),
            FieldDef::new("connEvent", 16, 1, FieldKind::U8, 0),
        ],
    )
    .unwrap();
    (conn, stats)
}

/// An enum is not a count: decoded by tshark, `lbConn.connEvent` (an
/// enum) and `lbStats.connEvent` (a plain u8) are two enterprise elements
/// (ids derived with the classes `enum` and `unsigned`, pinned), while a
/// second enum `connEvent` whose names agree (one more value) shares the
/// enum's element; one that names a value otherwise is refused, naming
/// both fields and how to declare an id.
#[test]
fn tshark_decodes_an_enum_and_a_count_of_one_name_as_two_elements() {
    let (conn, stats) = enum_and_count();
    assert_eq!(conn.enterprise_ie(1), Some(18407));
    assert_eq!(stats.enterprise_ie(1), Some(25948));
    let r = enterprise_elements(&[&conn, &stats]);
    assert_eq!(r[0], "256,257");
    assert_eq!(r[1], "18407,25948");
    assert_eq!(r[2], "32473,32473");

    let enum_of = |id, name, names: &'static [(u32, &'static str)]| {
        Schema::new(
            id,
            name,
            48,
            vec![
                FieldDef::new("t", 8, 8, FieldKind::NsTimestamp, 0),
                FieldDef::new("connEvent", 16, 2, FieldKind::Enum, 0).with_names(names),
            ],
        )
        .unwrap()
    };
    // Names that agree where both name a value: one element.
    let grown = enum_of(305, "lbConn2", &[(1, "OPEN"), (3, "REJECT")]);
    assert_eq!(enterprise_elements(&[&conn, &grown])[1], "18407,18407");
    // Value 1 named otherwise: refused.
    let other = enum_of(306, "vpnConn", &[(1, "UP")]);
    let e = ipfix_spec(1500)
        .formatter(&[&conn, &other])
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains(
            "enterprise element 32473/18407 would be field connEvent (enum, value 1 named \
             \"OPEN\") of record type lbConn and field connEvent (enum, value 1 named \"UP\") \
             of record type vpnConn: declare an id of its own"
        ) && e.contains("dplog-cat --ipfix-ie vpnConn.connEvent=0x8000|<id>"),
        "{e}"
    );
}

/// A binary log whose metadata is version 3 (written before an enum was
/// an element class of its own) re-exports its enum's id as its writer
/// derived it (connEvent's unsigned id, 25948), every other id as
/// derived now; its two `connEvent`s would then be one element with two
/// meanings: refused, naming both fields and dplog-cat's `--ipfix-ie`.
#[test]
fn a_metadata_v3_log_keeps_its_enum_ids_and_its_clash_is_refused() {
    let (conn, stats) = enum_and_count();
    let v3 = |s: &Schema| {
        let fields = s.encode_fields().unwrap().len();
        let mut b = s.encode().unwrap();
        assert_eq!(b[fields], 4);
        b[fields] = 3;
        Schema::decode(&b).unwrap()
    };
    let (old_conn, old_stats) = (v3(&conn), v3(&stats));
    assert_eq!(old_conn.enterprise_ie(1), Some(25948));
    assert_eq!(old_stats.enterprise_ie(1), Some(25948));
    // Alone, the old enum exports its writer's id.
    assert_eq!(enterprise_elements(&[&old_conn])[1], "25948");
    let e = ipfix_spec(1500)
        .formatter(&[&old_conn, &old_stats])
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains(
            "enterprise element 32473/25948 would be field connEvent (enum) of record type \
             lbConn and field connEvent (unsigned) of record type lbStats"
        ) && e.contains("dplog-cat --ipfix-ie lbStats.connEvent=0x8000|<id>"),
        "{e}"
    );
}
