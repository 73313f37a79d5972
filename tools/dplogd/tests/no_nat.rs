//! A Rust program that is no NAT, as its user sees dplog: a DNS query
//! record type of its own, logged by the config-driven logger
//! (`LogConfig::start_slots`) through text, JSON, CSV, IPFIX and binary,
//! and into a shared-memory ring (`ShmLogProducer`, the config's record
//! types) that a real dplogd writes as CSV and as IPFIX. No NAT column,
//! template, schema name or schema id may appear anywhere: the exact CSV
//! header, the exact IPFIX template set (decoded by tshark), the binary
//! log's schemas (decoded). With `[schemas] nat = true` the same logger
//! adds the NAT schemas: asking works.

mod common;

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
    server: u32,
    client_port: u16,
    qtype: u16,
    rcode: u8,
    protocol: u8,
    pad: [u8; 2],
    qname: [u8; 32],
}
const _: () = assert!(std::mem::size_of::<DnsQuery>() == 64);

impl Record for DnsQuery {
    const SCHEMA_ID: u16 = 400;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 4 + 4 + 2 + 2 + 1 + 1 + 2 + 32 = 64 bytes
// without padding (size asserted above); the schema is built from its own
// offset_of! values and size_of.
unsafe impl HasSchema for DnsQuery {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(DnsQuery, id = 400, name = "dnsQuery", [
                time_ns => "observationTimeMilliseconds": NsTimestamp, ie 323;
                client => "sourceIPv4Address": Ipv4, ie 8;
                server => "destinationIPv4Address": Ipv4, ie 12;
                client_port => "sourceTransportPort": Port, ie 7;
                qtype => "queryType": U16, ie 0;
                rcode => "responseCode": Enum, ie 0, names &[(0, "noError"), (3, "nxDomain")];
                protocol => "protocolIdentifier": Protocol, ie 4;
                qname => "queryName": Bytes, ie 0;
            ])
            .unwrap()
        })
    }
}

fn query(i: u64) -> DnsQuery {
    let mut qname = [0u8; 32];
    let name = format!("host{i}.example.org");
    qname[..name.len()].copy_from_slice(name.as_bytes());
    DnsQuery {
        header: RecordHeader::of::<DnsQuery>(),
        time_ns: T0 + i * 1_000_000,
        client: 0xC000_0201 + i as u32,
        server: 0xC633_6435,
        client_port: 40000 + i as u16,
        qtype: 28,
        rcode: if i == 2 { 3 } else { 0 },
        protocol: 17,
        pad: [0; 2],
        qname,
    }
}

/// The exact CSV header of a logger serving dnsQuery only: its columns,
/// then the drop report's.
const CSV_HEADER: &str = "recordType,timestamp,observationTimeMilliseconds,sourceIPv4Address,\
destinationIPv4Address,sourceTransportPort,queryType,responseCode,protocolIdentifier,queryName,\
dplogDropped,dplogDropRing,dplogDropReason,dplogFirstDropWallClock,dplogLastDropWallClock";

/// The template set of dnsQuery decoded by tshark: template id, IANA
/// element ids, enterprise element ids (queryType, responseCode,
/// queryName: derived from their names and classes, responseCode an enum;
/// the same whether the
/// program or dplogd exports them).
fn dns_templates() -> Vec<Vec<String>> {
    vec![vec![
        "256".to_string(),
        "323,8,12,7,4".to_string(),
        "4702,23071,22874".to_string(),
    ]]
}

/// A NAT schema or field name in `text` (natEvent, nat44Session,
/// natPortBlock, natPoolId, postNATSourceIPv4Address,
/// postNAPTSourceTransportPort, portRangeStart, the NAT syslog app name).
fn nat_name(text: &str) -> Option<&str> {
    let b = text.as_bytes();
    (0..b.len()).find_map(|i| {
        let rest = &text[i..];
        let camel = rest.starts_with("nat")
            && b.get(i + 3)
                .is_some_and(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
        (camel
            || rest.starts_with("NAT")
            || rest.starts_with("NAPT")
            || rest.starts_with("portRange"))
        .then(|| &rest[..rest.len().min(24)])
    })
}

/// Logs three queries with `start_slots::<Slot64>` in `format` (`extra`
/// TOML added) and returns the file.
fn through_logger(format: &str, extra: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out");
    let cfg = LogConfig::from_toml_str(&format!(
        "{extra}\n[ring]\npublish_every = 8\n[format]\ntype = \"{format}\"\n\
         [format.ipfix]\nexport_clock = \"record\"\n[sink]\ntype = \"file\"\npath = \"{}\"\n",
        path.display()
    ))
    .unwrap();
    let logger = cfg.start_slots::<Slot64>(&[DnsQuery::schema()]).unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..3 {
        assert!(p.log(Slot64::pack_record(&query(i)).unwrap()));
    }
    p.flush();
    drop(p);
    let stats = logger.shutdown().unwrap();
    assert_eq!(stats.written_records, 3, "{format}");
    std::fs::read(path).unwrap()
}

/// The whole IPFIX messages at the start of a file, one per datagram (RFC
/// 7011 section 3.1: the message length is bytes 2..4 of its header); a
/// message still being written is left out.
fn messages(file: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = file;
    while rest.len() >= 16 {
        let n = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
        assert!(n >= 16, "IPFIX message length {n}");
        if n > rest.len() {
            break;
        }
        out.push(&rest[..n]);
        rest = &rest[n..];
    }
    out
}

/// `file` is whole IPFIX messages and nothing else.
fn whole(file: &[u8]) -> bool {
    messages(file).iter().map(|m| m.len()).sum::<usize>() == file.len()
}

/// Every template set of the IPFIX file, decoded by tshark: per template,
/// its id and element ids (IANA, enterprise); and the data records' count.
fn ipfix_templates(file: &[u8]) -> (Vec<Vec<String>>, usize) {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("x.pcap");
    dplog_testkit::tshark::write_udp_pcap(&pcap, &messages(file), 4739);
    let rows = dplog_testkit::tshark::fields(
        &pcap,
        4739,
        &[
            "cflow.template_id",
            "cflow.template_ipfix_field_type",
            "cflow.template_ipfix_field_type_enterprise",
        ],
    );
    let templates: Vec<Vec<String>> = rows
        .into_iter()
        .filter(|r| r.iter().any(|f| !f.is_empty()))
        .collect();
    let srcs = dplog_testkit::tshark::fields(&pcap, 4739, &["cflow.srcaddr"]);
    let records = srcs
        .iter()
        .flat_map(|r| r[0].split(','))
        .filter(|s| !s.is_empty())
        .count();
    (templates, records)
}

#[test]
fn a_config_driven_logger_of_a_users_type_writes_no_nat_in_any_format() {
    for format in ["text", "json", "csv"] {
        let text = String::from_utf8(through_logger(format, "")).unwrap();
        assert_eq!(nat_name(&text), None, "{format}:\n{text}");
        assert!(
            text.contains("host2.example.org") && text.contains("nxDomain"),
            "{format}:\n{text}"
        );
        if format == "csv" {
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 4, "{text}");
            assert_eq!(lines[0].trim_end_matches('\r'), CSV_HEADER);
            assert!(
                lines[1..].iter().all(|l| l.starts_with("dnsQuery,")),
                "{text}"
            );
        }
    }
    let file = through_logger("ipfix", "");
    assert!(whole(&file));
    let (templates, records) = ipfix_templates(&file);
    assert_eq!(templates, dns_templates());
    assert_eq!(records, 3);
    let bin = through_logger("binary", "");
    let d = dplog::formatters::binary::decode(&bin);
    assert_eq!(d.stopped, None);
    let ids: Vec<(u16, &str)> = d.schemas.iter().map(|s| (s.id(), s.name())).collect();
    assert_eq!(ids, [(400, "dnsQuery")]);
    assert_eq!(d.records.len(), 3);
}

#[test]
fn asking_for_the_nat_schemas_adds_them_after_the_users_type() {
    let text = String::from_utf8(through_logger("csv", "[schemas]\nnat = true")).unwrap();
    let header = text.lines().next().unwrap().trim_end_matches('\r');
    let user = &CSV_HEADER[..CSV_HEADER.find(",dplogDropped").unwrap()];
    assert!(header.starts_with(user), "{header}");
    assert!(
        header.contains(",natEvent,postNATSourceIPv4Address,"),
        "{header}"
    );
    let bin = through_logger("binary", "[schemas]\nnat = true");
    let d = dplog::formatters::binary::decode(&bin);
    let ids: Vec<u16> = d.schemas.iter().map(|s| s.id()).collect();
    assert_eq!(ids, [400, 1, 2, 3, 4, 5]);
}

/// Three queries into a ring of `rings` created with the config's record
/// types for dnsQuery (no NAT asked), then the ring closed.
fn log_into_ring(rings: &std::path::Path) {
    let cfg = LogConfig::from_toml_str("[ring]\ncapacity = 64\n").unwrap();
    let types = cfg.record_types(&[DnsQuery::schema()], Slot64::BYTES);
    assert_eq!(types.len(), 1);
    let opts = ShmOptions {
        dir: rings.to_path_buf(),
        name: "dns".into(),
        capacity: 64,
        group: None,
        daemon_uid: None,
    };
    let mut p =
        ShmLogProducer::<Slot64>::create(&opts, &cfg.logger_config(), &types, RecordRules::own())
            .unwrap();
    for i in 0..3 {
        assert!(p.log(Slot64::pack_record(&query(i)).unwrap()));
    }
    p.flush();
}

#[test]
fn dplogd_writes_a_users_ring_with_no_nat_header_column_or_template() {
    // CSV: the file of dnsQuery (one file per record type), headed by
    // exactly dnsQuery's columns (dplogd serves no NAT schemas), rows of
    // those columns.
    let s = Setup::with_config(
        "[format]\ntype = \"csv\"\n[sink]\ntype = \"file\"\npath = \"@/out.csv\"\n",
    );
    let mut d = s.daemon();
    log_into_ring(&s.rings());
    let rows = || -> Vec<String> {
        read(&s.path("out.dnsQuery.csv"))
            .lines()
            .filter(|l| l.starts_with("dnsQuery,"))
            .map(String::from)
            .collect()
    };
    wait_for(60, "three dnsQuery rows", || rows().len() >= 3);
    assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
    let text = read(&s.path("out.dnsQuery.csv"));
    assert_eq!(nat_name(&text), None, "{text}");
    assert!(text.starts_with(&format!("{CSV_HEADER}\r\n")), "{text}");
    assert!(!s.path("out.csv").exists());
    let columns = CSV_HEADER.split(',').count();
    let rows = rows();
    assert_eq!(rows.len(), 3, "{text}");
    for r in &rows {
        assert_eq!(r.trim_end_matches('\r').split(',').count(), columns, "{r}");
    }

    // IPFIX: dnsQuery's template only.
    let s = Setup::with_config(
        "[format]\ntype = \"ipfix\"\n[format.ipfix]\nexport_clock = \"record\"\n\
         [sink]\ntype = \"file\"\npath = \"@/out.ipfix\"\n",
    );
    let mut d = s.daemon();
    log_into_ring(&s.rings());
    let file = || std::fs::read(s.path("out.ipfix")).unwrap_or_default();
    wait_for(60, "three IPFIX data records", || {
        !file().is_empty() && ipfix_templates(&file()).1 >= 3
    });
    assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
    assert!(whole(&file()));
    let (templates, records) = ipfix_templates(&file());
    let mut templates = templates;
    templates.dedup();
    assert_eq!(templates, dns_templates());
    assert_eq!(records, 3);
}
