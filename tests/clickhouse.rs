//! A user's record type (a DNS query, declared with `schema!`) logged
//! through `LogConfig` into ClickHouse (`[format] type = "binary"`,
//! `[sink] type = "clickhouse"`) on a `clickhouse-server` 18.16 started
//! on loopback: every record written, counted once, read back by
//! `clickhouse-client`; a table that does not match the record, a
//! `record_type` the logger does not serve and a line format are refused
//! when the logger starts, with the column or key named.

use std::path::Path;
use std::sync::OnceLock;

use dplog::config::{ConfigError, LogConfig};
use dplog::schema::{HasSchema, Schema};
use dplog::sinks::clickhouse::{create_table, Server, TableOptions};
use dplog::{schema, Record, RecordHeader};
use dplog_testkit::clickhouse::{ClickHouse, WRITER_PASSWORD};

/// A DNS resolver's query record.
#[repr(C)]
#[derive(Clone, Copy)]
struct DnsQuery {
    header: RecordHeader,
    time_ns: u64,
    client: u32,
    client_port: u16,
    qtype: u16,
    rcode: u8,
    cached: u8,
    _pad: [u8; 6],
    qname: [u8; 32],
}
const _: () = assert!(std::mem::size_of::<DnsQuery>() == 64);

impl Record for DnsQuery {
    const SCHEMA_ID: u16 = 720;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 4 + 2 + 2 + 1 + 1 + 6 + 32 = 64 bytes without
// padding (asserted above); the schema is built from its offset_of!
// values and size_of.
unsafe impl HasSchema for DnsQuery {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(DnsQuery, id = 720, name = "dnsQuery", [
                time_ns => "queryTime": NsTimestamp, ie 0;
                client => "client": Ipv4, ie 8;
                client_port => "clientPort": Port, ie 7;
                qtype => "qtype": U16, ie 0;
                rcode => "rcode": Enum, ie 0, names &[(0, "NOERROR"), (3, "NXDOMAIN")];
                cached => "cached": Bool, ie 0;
                qname => "qname": Bytes, ie 0;
            ])
            .unwrap()
        })
    }
}

const T0: u64 = 1_767_225_600_000_000_000;

fn query(i: u64) -> DnsQuery {
    let mut qname = [0u8; 32];
    let n = format!("q{i}.example.org");
    qname[..n.len()].copy_from_slice(n.as_bytes());
    DnsQuery {
        header: RecordHeader::of::<DnsQuery>(),
        time_ns: T0 + i * 1000,
        client: 0xC633_6400 | (i as u32 & 0xff),
        client_port: 1024 + i as u16,
        qtype: 28,
        rcode: if i % 7 == 0 { 3 } else { 0 },
        cached: (i % 2) as u8,
        _pad: [0; 6],
        qname,
    }
}

fn config(
    ch: &ClickHouse,
    dir: &Path,
    format: &str,
    extra: &str,
) -> Result<LogConfig, ConfigError> {
    let pw = dir.join("pw");
    std::fs::write(&pw, WRITER_PASSWORD).unwrap();
    LogConfig::from_toml_str(&format!(
        r#"
        [ring]
        capacity = 4096
        [format]
        type = "{format}"
        [sink]
        type = "clickhouse"
        url = "{}"
        table = "dns"
        user = "writer"
        password_file = "{}"
        batch_rows = 1000
        batch_age_ms = 50
        {extra}
        "#,
        ch.url(),
        pw.display()
    ))
}

#[test]
fn a_user_record_is_logged_into_clickhouse_and_counted_once() {
    let ch = ClickHouse::start();
    ch.query(&create_table(
        DnsQuery::schema(),
        &TableOptions::new("dns", Server::V18),
    ));
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&ch, dir.path(), "binary", "").unwrap();
    let logger = cfg.start::<DnsQuery>().unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..5000 {
        assert!(p.log(query(i)));
    }
    p.flush();
    drop(p);
    let stats = logger.shutdown().unwrap();
    assert_eq!((stats.written_records, stats.dropped()), (5000, 0));
    let out = ch.query(
        "SELECT count(), uniqExact(queryTime), sum(cached), countIf(rcode = 3), \
         min(clientPort), max(clientPort) FROM dns FORMAT TabSeparated",
    );
    assert_eq!(out.trim(), "5000\t5000\t2500\t715\t1024\t6023");
    let one = ch.query(
        "SELECT queryTime, IPv4NumToString(client), clientPort, qtype, rcode, cached, \
         qname FROM dns WHERE clientPort = 1031 FORMAT TabSeparated",
    );
    // FixedString(32): the NUL padding prints as \0 escapes.
    assert_eq!(
        one.trim_end(),
        format!(
            "{}\t198.51.100.7\t1031\t28\t3\t1\tq7.example.org{}",
            T0 + 7000,
            "\\0".repeat(32 - 14)
        )
    );
}

fn refusal(r: Result<dplog::Logger<DnsQuery>, ConfigError>) -> String {
    match r {
        Err(e) => e.to_string(),
        Ok(l) => {
            let _ = l.shutdown();
            panic!("the logger started")
        }
    }
}

#[test]
fn a_table_that_does_not_match_the_record_stops_the_start() {
    let ch = ClickHouse::start();
    let sql = create_table(DnsQuery::schema(), &TableOptions::new("dns", Server::V18))
        .replace("`qtype` UInt16", "`qtype` String");
    ch.query(&sql);
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&ch, dir.path(), "binary", "").unwrap();
    let e = refusal(cfg.start::<DnsQuery>());
    assert!(
        e.contains("[sink] table: ClickHouse table dns at http://127.0.0.1:"),
        "{e}"
    );
    assert!(
        e.contains("does not match record type dnsQuery: column `qtype` is String, which cannot hold field qtype (U16, 2 bytes): make it UInt16"),
        "{e}"
    );
    let cfg = config(&ch, dir.path(), "binary", "record_type = \"dnsAnswer\"").unwrap();
    let e = refusal(cfg.start::<DnsQuery>());
    assert!(
        e.contains("record_type = \"dnsAnswer\": the logger serves no such record type (it serves dnsQuery)"),
        "{e}"
    );
    let e = config(&ch, dir.path(), "json", "").unwrap_err().to_string();
    assert!(
        e.contains("type = \"clickhouse\" with [format] type = \"json\""),
        "{e}"
    );
    assert!(e.contains("set [format] type = \"binary\""), "{e}");
}

/// A DNS answer record: a second record type of the same logger.
#[repr(C)]
#[derive(Clone, Copy)]
struct DnsAnswer {
    header: RecordHeader,
    time_ns: u64,
    client: u32,
    ttl: u32,
    addr: [u8; 16],
}
const _: () = assert!(std::mem::size_of::<DnsAnswer>() == 40);

impl Record for DnsAnswer {
    const SCHEMA_ID: u16 = 721;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 4 + 4 + 16 = 40 bytes without padding
// (asserted above); the schema is built from its offset_of! values and
// size_of.
unsafe impl HasSchema for DnsAnswer {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(DnsAnswer, id = 721, name = "dnsAnswer", [
                time_ns => "answerTime": NsTimestamp, ie 0;
                client => "client": Ipv4, ie 8;
                ttl => "ttl": U32, ie 0;
                addr => "answer": Ipv6, ie 0;
            ])
            .unwrap()
        })
    }
}

/// A record type no sink would store stops the start (a ClickHouse sink
/// passes over other types, counting them written): one sink for two
/// types, and a set of two sinks for the same one. With a file sink
/// beside, every type is stored somewhere, and the start goes on to the
/// table check. Refused before any connection: no server needed.
#[test]
fn a_record_type_no_sink_stores_stops_the_start() {
    use dplog::Slot64;
    let types = [DnsQuery::schema(), DnsAnswer::schema()];
    let start = |sinks: &str| {
        let cfg =
            LogConfig::from_toml_str(&format!("[format]\ntype = \"binary\"\n{sinks}")).unwrap();
        match cfg.start_slots::<Slot64>(&types) {
            Err(e) => e.to_string(),
            Ok(l) => {
                let _ = l.shutdown();
                "started".to_string()
            }
        }
    };
    let dead = format!("http://127.0.0.1:{}", dplog_testkit::free_tcp_port());
    let one = format!("[sink]\ntype = \"clickhouse\"\nurl = \"{dead}\"\ntable = \"dns\"\n");
    let e = start(&one);
    assert!(
        e.contains("a clickhouse sink stores one record type (dnsQuery), so the records of dnsAnswer would go to no sink"),
        "{e}"
    );
    let twice = format!(
        "[[sink]]\ntype = \"clickhouse\"\nurl = \"{dead}\"\ntable = \"a\"\nrecord_type = \"dnsAnswer\"\n\
         [[sink]]\ntype = \"clickhouse\"\nurl = \"{dead}\"\ntable = \"b\"\nrecord_type = \"dnsAnswer\"\n"
    );
    let e = start(&twice);
    assert!(
        e.contains("(dnsAnswer, dnsAnswer), so the records of dnsQuery would go to no sink"),
        "{e}"
    );
    // A file sink beside takes every type: no refusal (the server is not
    // there, which the start does not refuse either).
    let dir = tempfile::tempdir().unwrap();
    let with_file = format!(
        "[[sink]]\ntype = \"clickhouse\"\nurl = \"{dead}\"\ntable = \"dns\"\n\
         [[sink]]\ntype = \"file\"\npath = {:?}\n",
        dir.path().join("all.bin").to_str().unwrap()
    );
    assert_eq!(start(&with_file), "started");
}

#[test]
fn two_record_types_go_to_their_own_tables_through_a_sink_set() {
    use dplog::{Slot, Slot64};
    let ch = ClickHouse::start();
    ch.query(&create_table(
        DnsQuery::schema(),
        &TableOptions::new("dns", Server::V18),
    ));
    ch.query(&create_table(
        DnsAnswer::schema(),
        &TableOptions::new("answers", Server::V18),
    ));
    let url = ch.url();
    let cfg = LogConfig::from_toml_str(&format!(
        r#"
        [ring]
        capacity = 4096
        [format]
        type = "binary"
        [[sink]]
        type = "clickhouse"
        url = "{url}"
        table = "dns"
        record_type = "dnsQuery"
        [[sink]]
        type = "clickhouse"
        url = "{url}"
        table = "answers"
        record_type = "dnsAnswer"
        "#
    ))
    .unwrap();
    let logger = cfg
        .start_slots::<Slot64>(&[DnsQuery::schema(), DnsAnswer::schema()])
        .unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..3000u64 {
        assert!(p.log(Slot64::pack_record(&query(i)).unwrap()));
        if i % 3 == 0 {
            let mut addr = [0u8; 16];
            addr[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
            addr[15] = i as u8;
            let a = DnsAnswer {
                header: RecordHeader::of::<DnsAnswer>(),
                time_ns: T0 + i * 1000 + 500,
                client: 0xC633_6400 | (i as u32 & 0xff),
                ttl: 300,
                addr,
            };
            assert!(p.log(Slot64::pack_record(&a).unwrap()));
        }
    }
    p.flush();
    drop(p);
    let stats = logger.shutdown().unwrap();
    assert_eq!((stats.written_records, stats.dropped()), (4000, 0));
    assert_eq!(ch.query("SELECT count() FROM dns").trim(), "3000");
    assert_eq!(
        ch.query(
            "SELECT count(), sum(ttl), uniqExact(answerTime) FROM answers FORMAT TabSeparated"
        )
        .trim(),
        "1000\t300000\t1000"
    );
}
