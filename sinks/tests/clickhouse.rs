//! The ClickHouse sink against a real server: Debian's
//! `clickhouse-server` 18.16, started per test on 127.0.0.1 with its own
//! data directory (`dplog_testkit::clickhouse`), read back with
//! `clickhouse-client`. Records of a user's record type (every field
//! kind), not the NAT's: inserts compared field by field, the server
//! down at start, killed mid-stream and restarted (nothing lost, every
//! record counted once), a missing table, a mismatched column, wrong
//! credentials.

use std::io;
use std::time::{Duration, Instant};

use dplog_core::schema::{FieldDef, FieldKind, Schema};
use dplog_core::{Accepted, Sink, SinkError};
use dplog_formatters::binary::BinaryEncoder;
use dplog_sinks::clickhouse::{create_table, value_sql, ClickHouseOptions, Server, TableOptions};
use dplog_sinks::ClickHouseSink;
use dplog_testkit::clickhouse::{ClickHouse, WRITER_PASSWORD};

/// A DNS query log record (a user's type): every field kind but TSC.
fn dns() -> Schema {
    Schema::new(
        710,
        "dnsQuery",
        80,
        vec![
            FieldDef::new("queryTime", 8, 8, FieldKind::NsTimestamp, 0),
            FieldDef::new("seq", 16, 8, FieldKind::U64, 0),
            FieldDef::new("client", 24, 4, FieldKind::Ipv4, 0),
            FieldDef::new("resolver", 28, 4, FieldKind::U32, 0),
            FieldDef::new("server6", 32, 16, FieldKind::Ipv6, 0),
            FieldDef::new("clientMac", 48, 6, FieldKind::Mac, 0),
            FieldDef::new("clientPort", 54, 2, FieldKind::Port, 0),
            FieldDef::new("qtype", 56, 2, FieldKind::U16, 0),
            FieldDef::new("proto", 58, 1, FieldKind::Protocol, 0),
            FieldDef::new("rcode", 59, 1, FieldKind::Enum, 0)
                .with_names(&[(0, "NOERROR"), (3, "NXDOMAIN")]),
            FieldDef::new("cached", 60, 1, FieldKind::Bool, 0),
            FieldDef::new("hops", 61, 1, FieldKind::U8, 0),
            FieldDef::new("qname", 62, 16, FieldKind::Bytes, 0),
        ],
    )
    .unwrap()
}

const T0: u64 = 1_767_225_600_000_000_000;

/// Record `i`'s bytes.
fn rec(i: u64) -> Vec<u8> {
    let mut r = vec![0u8; 80];
    r[0..2].copy_from_slice(&80u16.to_ne_bytes());
    r[2..4].copy_from_slice(&710u16.to_ne_bytes());
    r[8..16].copy_from_slice(&(T0 + i * 1_000_003).to_ne_bytes());
    r[16..24].copy_from_slice(&i.to_ne_bytes());
    r[24..28].copy_from_slice(&(0x0A00_0000u32 | i as u32).to_ne_bytes());
    r[28..32].copy_from_slice(&(i as u32).wrapping_mul(2_654_435_761).to_ne_bytes());
    let mut v6 = [0u8; 16];
    v6[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    v6[14..].copy_from_slice(&(i as u16).to_be_bytes());
    r[32..48].copy_from_slice(&v6);
    r[48..54].copy_from_slice(&[0x02, 0, 0x5e, 0, (i >> 8) as u8, i as u8]);
    r[54..56].copy_from_slice(&(1024 + (i % 60000) as u16).to_ne_bytes());
    r[56..58].copy_from_slice(&(if i % 2 == 0 { 1u16 } else { 28 }).to_ne_bytes());
    r[58] = if i % 3 == 0 { 6 } else { 17 };
    r[59] = if i % 5 == 0 { 3 } else { 0 };
    r[60] = (i % 2) as u8 * 9;
    r[61] = (i % 256) as u8;
    let name = format!("h{i}.example");
    r[62..62 + name.len()].copy_from_slice(name.as_bytes());
    r
}

/// Record `i` as `clickhouse-client` prints the query of [`SELECT`].
fn expected_line(i: u64) -> String {
    let mac = format!("02005E00{:02X}{:02X}", (i >> 8) as u8, i as u8);
    let mut name = format!("h{i}.example").into_bytes();
    name.resize(16, 0);
    let name: String = name.iter().map(|b| format!("{b:02X}")).collect();
    format!(
        "{}\t{i}\t10.0.{}.{}\t{}\t{}\t{mac}\t{}\t{}\t{}\t{}\t{}\t{}\t{name}",
        T0 + i * 1_000_003,
        (i >> 8) & 0xff,
        i & 0xff,
        (i as u32).wrapping_mul(2_654_435_761),
        std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, i as u16),
        1024 + i % 60000,
        if i % 2 == 0 { 1 } else { 28 },
        if i % 3 == 0 { 6 } else { 17 },
        if i % 5 == 0 { 3 } else { 0 },
        i % 2,
        i % 256,
    )
}

/// Every column, converted to text that shows its bytes.
const SELECT: &str = "SELECT queryTime, seq, IPv4NumToString(client), resolver, \
     IPv6NumToString(server6), hex(clientMac), clientPort, qtype, proto, rcode, cached, hops, \
     hex(qname) FROM dns ORDER BY seq FORMAT TabSeparated";

fn table(ch: &ClickHouse) {
    ch.query(&create_table(
        &dns(),
        &TableOptions::new("dns", Server::V18),
    ));
}

fn options(ch: &ClickHouse, dir: &tempfile::TempDir) -> ClickHouseOptions {
    let pw = dir.path().join("password");
    std::fs::write(&pw, format!("{WRITER_PASSWORD}\n")).unwrap();
    let mut o = ClickHouseOptions::new(ch.url(), "dns");
    o.user = Some("writer".into());
    o.password_file = Some(pw);
    o.batch_rows = 300;
    o.retry_initial_ms = 20;
    o.retry_max_ms = 200;
    o
}

/// Binary-format batches of records `range`, `per` records each, the
/// first led by the stream's header and schema.
fn batches(range: std::ops::Range<u64>, per: usize) -> Vec<Vec<u8>> {
    let s = dns();
    let mut enc = BinaryEncoder::try_new(&[&s]).unwrap();
    let ids: Vec<u64> = range.collect();
    ids.chunks(per)
        .map(|c| {
            let mut b = Vec::new();
            for &i in c {
                assert!(enc.push(&rec(i), &mut b));
            }
            b
        })
        .collect()
}

/// Polls the sink (ticking it) until it reported `n` records delivered;
/// returns them. Bounded at 60 s.
fn delivered(sink: &mut ClickHouseSink, n: u64) -> u64 {
    let t0 = Instant::now();
    let mut got = 0;
    while got < n {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{got} of {n} delivered"
        );
        sink.tick(Instant::now()).unwrap();
        let p = sink.poll();
        assert_eq!(p.failed_records, 0);
        got += p.delivered_records;
        std::thread::sleep(Duration::from_millis(10));
    }
    got
}

/// Writes `b` as the runtime does: a retryable refusal is retried with
/// the same bytes after a pause (`on_retry` called each time).
fn write(sink: &mut ClickHouseSink, b: &[u8], mut on_retry: impl FnMut()) {
    let t0 = Instant::now();
    loop {
        match sink.write_batch(b) {
            Ok(a) => {
                assert_eq!(a, Accepted::Pending);
                return;
            }
            Err(SinkError::Retryable(_)) => {
                assert!(t0.elapsed() < Duration::from_secs(60));
                on_retry();
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("{e:?}"),
        }
    }
}

fn counter(sink: &ClickHouseSink, name: &str) -> u64 {
    use dplog_core::SinkCounters as _;
    sink.counters()
        .named()
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v)
        .unwrap()
}

#[test]
fn inserts_read_back_field_by_field() {
    let ch = ClickHouse::start();
    table(&ch);
    let dir = tempfile::tempdir().unwrap();
    let mut sink = ClickHouseSink::new(options(&ch, &dir)).unwrap();
    for b in batches(0..1000, 64) {
        write(&mut sink, &b, || panic!("the server is up"));
    }
    sink.flush().unwrap();
    assert_eq!(delivered(&mut sink, 1000), 1000);
    assert_eq!(sink.poll().delivered_records, 0);
    let out = ch.query(SELECT);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1000);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(*l, expected_line(i as u64));
    }
    // Every field's SQL value (what `ddl --at --where` writes) finds
    // its record: addresses, MAC, NUL-padded bytes, time.
    let schema = dns();
    let r = rec(777);
    let conds: Vec<String> = schema
        .fields()
        .iter()
        .map(|f| {
            let mut v = r[f.offset as usize..(f.offset + f.size) as usize].to_vec();
            if f.kind == FieldKind::Bytes {
                while v.last() == Some(&0) {
                    v.pop();
                }
            }
            format!("`{}` = {}", f.name, value_sql(f, &v, Server::V18))
        })
        .collect();
    let hit = ch.query(&format!(
        "SELECT seq FROM dns WHERE {}",
        conds.join(" AND ")
    ));
    assert_eq!(hit.trim(), "777", "{conds:?}");
    // 1000 rows in inserts of at most 300 rows (batch_rows).
    assert_eq!(counter(&sink, "clickhouse.rows"), 1000);
    assert!(counter(&sink, "clickhouse.inserts") >= 4);
    assert_eq!(counter(&sink, "clickhouse.retries"), 0);
    assert_eq!(counter(&sink, "clickhouse.table_checks"), 1);
    sink.close().unwrap();
}

#[test]
fn a_server_down_at_start_gets_every_record_once_it_is_up() {
    let mut ch = ClickHouse::start();
    table(&ch);
    ch.kill();
    let dir = tempfile::tempdir().unwrap();
    let mut sink = ClickHouseSink::new(options(&ch, &dir)).unwrap();
    let bs = batches(0..500, 100);
    // The table cannot be checked: the first batch is refused, retryably,
    // and nothing of it is taken.
    let mut refused = 0;
    write(&mut sink, &bs[0], || {
        refused += 1;
        if refused == 3 {
            ch.restart();
        }
    });
    assert!(refused >= 3);
    for b in &bs[1..] {
        write(&mut sink, b, || {});
    }
    sink.drain(Instant::now() + Duration::from_secs(60))
        .unwrap();
    assert_eq!(delivered(&mut sink, 500), 500);
    let n = ch.query("SELECT count(), uniqExact(seq) FROM dns FORMAT TabSeparated");
    assert_eq!(n.trim(), "500\t500");
}

#[test]
fn a_server_killed_mid_stream_and_restarted_loses_nothing_and_counts_each_record_once() {
    let mut ch = ClickHouse::start();
    table(&ch);
    let dir = tempfile::tempdir().unwrap();
    let mut sink = ClickHouseSink::new(options(&ch, &dir)).unwrap();
    let bs = batches(0..6000, 100);
    let mut killed = false;
    let mut refusals = 0;
    for (k, b) in bs.iter().enumerate() {
        if k == 20 {
            ch.kill();
            killed = true;
        }
        write(&mut sink, b, || {
            refusals += 1;
            // The sink holds one insert and fills the next, then refuses:
            // the ring's backpressure. Bring the server back.
            if killed {
                ch.restart();
                killed = false;
            }
        });
        sink.tick(Instant::now()).unwrap();
    }
    assert!(
        refusals > 0,
        "the sink refused batches while the server was down"
    );
    sink.drain(Instant::now() + Duration::from_secs(60))
        .unwrap();
    assert_eq!(delivered(&mut sink, 6000), 6000);
    assert_eq!(sink.poll().delivered_records, 0, "no record counted twice");
    assert!(counter(&sink, "clickhouse.retries") > 0);
    // Every record is there. A plain MergeTree on 18.16 does not
    // deduplicate: an insert the server committed just before it was
    // killed, whose answer was lost, would be there twice (whole inserts
    // only); here the kill comes between inserts.
    let n =
        ch.query("SELECT uniqExact(seq), min(seq), max(seq), count() FROM dns FORMAT TabSeparated");
    let f: Vec<u64> = n.split_whitespace().map(|x| x.parse().unwrap()).collect();
    assert_eq!(&f[..3], &[6000, 0, 5999], "{n}");
    eprintln!(
        "rows {} for 6000 records ({} duplicated)",
        f[3],
        f[3] - 6000
    );
}

fn first_error(sink: &mut ClickHouseSink) -> io::Error {
    let b = batches(0..10, 10).remove(0);
    match sink.write_batch(&b) {
        Err(SinkError::Permanent(e)) => e,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_missing_table_is_refused_by_name() {
    let ch = ClickHouse::start();
    let dir = tempfile::tempdir().unwrap();
    let mut sink = ClickHouseSink::new(options(&ch, &dir)).unwrap();
    let e = first_error(&mut sink).to_string();
    assert!(
        e.contains("ClickHouse table dns at http://127.0.0.1:"),
        "{e}"
    );
    assert!(e.contains("it does not exist"), "{e}");
    // And every later batch.
    let e2 = first_error(&mut sink).to_string();
    assert_eq!(e, e2);
}

#[test]
fn a_mismatched_column_is_refused_naming_it() {
    let ch = ClickHouse::start();
    let sql = create_table(&dns(), &TableOptions::new("dns", Server::V18))
        .replace("`clientPort` UInt16", "`clientPort` UInt32");
    ch.query(&sql);
    let dir = tempfile::tempdir().unwrap();
    let mut sink = ClickHouseSink::new(options(&ch, &dir)).unwrap();
    let e = first_error(&mut sink).to_string();
    assert!(
        e.contains("does not match record type dnsQuery: column `clientPort` is UInt32, which cannot hold field clientPort (Port, 2 bytes): make it UInt16"),
        "{e}"
    );
    assert_eq!(ch.query("SELECT count() FROM dns").trim(), "0");
}

#[test]
fn wrong_credentials_are_refused_and_the_password_is_never_printed() {
    let ch = ClickHouse::start();
    table(&ch);
    let mut o = ClickHouseOptions::new(ch.url(), "dns");
    o.user = Some("writer".into());
    o.password = Some("not-the-password".into());
    assert!(!format!("{o:?}").contains("not-the-password"));
    let mut sink = ClickHouseSink::new(o).unwrap();
    assert!(!format!("{sink:?}").contains("not-the-password"));
    let e = first_error(&mut sink).to_string();
    assert!(e.contains("user writer refused (HTTP 401)"), "{e}");
    assert!(!e.contains("not-the-password"), "{e}");
}

#[test]
fn a_partial_insert_goes_when_its_first_row_is_batch_age_ms_old() {
    let ch = ClickHouse::start();
    table(&ch);
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(&ch, &dir);
    o.batch_age_ms = 200;
    let mut sink = ClickHouseSink::new(o).unwrap();
    // 10 rows of an insert of up to 300: only the age sends them, on a
    // tick, without a flush.
    write(&mut sink, &batches(0..10, 10)[0], || {
        panic!("the server is up")
    });
    sink.tick(Instant::now()).unwrap();
    assert_eq!(
        sink.poll().delivered_records,
        0,
        "younger than batch_age_ms"
    );
    assert_eq!(ch.query("SELECT count() FROM dns").trim(), "0");
    assert_eq!(delivered(&mut sink, 10), 10);
    assert_eq!(counter(&sink, "clickhouse.inserts"), 1);
    assert_eq!(ch.query("SELECT count() FROM dns").trim(), "10");
}

#[test]
fn a_server_killed_while_inserts_are_in_flight_loses_nothing() {
    let mut ch = ClickHouse::start();
    table(&ch);
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(&ch, &dir);
    o.batch_rows = 20_000;
    // Only full inserts go before the drain (none cut by age).
    o.batch_age_ms = 600_000;
    let mut sink = ClickHouseSink::new(o).unwrap();
    let bs = batches(0..200_000, 2000);
    // Another thread kills the server (SIGKILL) as soon as the first
    // insert is in the table: the next ones are being sent or built.
    let (pid, port) = (ch.pid().unwrap(), ch.tcp_port());
    let killer = std::thread::spawn(move || {
        let t0 = Instant::now();
        loop {
            let out = std::process::Command::new("clickhouse-client")
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                .args(["--query", "SELECT count() FROM dns"])
                .output()
                .unwrap();
            let n: u64 = String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse()
                .unwrap_or(0);
            if n > 0 {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "no insert arrived");
            std::thread::sleep(Duration::from_millis(5));
        }
        let st = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        assert!(st.success());
    });
    let mut killer = Some(killer);
    for b in &bs {
        write(&mut sink, b, || {
            // Refused: the server is down (or the inserts ahead are
            // slow). Once the killer is done, bring the server back.
            if killer.as_ref().is_some_and(|k| k.is_finished()) {
                killer.take().unwrap().join().unwrap();
                ch.restart();
            }
        });
        sink.tick(Instant::now()).unwrap();
    }
    if let Some(k) = killer.take() {
        k.join().unwrap();
        ch.restart();
    }
    sink.drain(Instant::now() + Duration::from_secs(120))
        .unwrap();
    assert_eq!(delivered(&mut sink, 200_000), 200_000);
    assert_eq!(sink.poll().delivered_records, 0, "no record counted twice");
    let n =
        ch.query("SELECT uniqExact(seq), min(seq), max(seq), count() FROM dns FORMAT TabSeparated");
    let f: Vec<u64> = n.split_whitespace().map(|x| x.parse().unwrap()).collect();
    assert_eq!(&f[..3], &[200_000, 0, 199_999], "{n}");
    // A plain MergeTree on 18.16 keeps an insert twice when the server
    // committed it and died before answering: whole inserts, of at least
    // batch_rows rows.
    let dup = f[3] - 200_000;
    assert!(dup == 0 || dup >= 20_000, "{dup} duplicated rows");
    eprintln!(
        "{} retries; {dup} rows duplicated",
        counter(&sink, "clickhouse.retries")
    );
}

#[test]
fn tsc_fields_arrive_as_wall_time_under_the_streams_calibrations() {
    use dplog_formatters::TscCalibration;
    let ch = ClickHouse::start();
    let s = Schema::new(
        711,
        "probe",
        24,
        vec![
            FieldDef::new("ticks", 8, 8, FieldKind::TscTimestamp, 0),
            FieldDef::new("n", 16, 4, FieldKind::U32, 0),
        ],
    )
    .unwrap();
    ch.query(&create_table(&s, &TableOptions::new("probe", Server::V18)));
    let cals = [
        TscCalibration {
            hz: 3_000_000_000,
            tsc0: 1_000,
            ns0: T0,
        },
        TscCalibration {
            hz: 2_999_000_000,
            tsc0: 900_000_000,
            ns0: T0 + 300_000_000,
        },
    ];
    let mut enc = BinaryEncoder::try_new(&[&s]).unwrap();
    let mut stream = Vec::new();
    let mut want = Vec::new();
    for n in 0..400u32 {
        // The consumer recalibrates half-way.
        let cal = cals[(n / 200) as usize];
        enc.set_tsc_calibration(cal);
        let ticks = 1_000_000_000 + u64::from(n) * 3_000_000;
        let mut r = vec![0u8; 24];
        r[0..2].copy_from_slice(&24u16.to_ne_bytes());
        r[2..4].copy_from_slice(&711u16.to_ne_bytes());
        r[8..16].copy_from_slice(&ticks.to_ne_bytes());
        r[16..20].copy_from_slice(&n.to_ne_bytes());
        assert!(enc.push(&r, &mut stream));
        want.push(format!("{}\t{n}", cal.to_ns(ticks)));
    }
    let mut sink = ClickHouseSink::new(ClickHouseOptions::new(ch.url(), "probe")).unwrap();
    write(&mut sink, &stream, || panic!("the server is up"));
    sink.flush().unwrap();
    assert_eq!(delivered(&mut sink, 400), 400);
    let out = ch.query("SELECT ticks, n FROM probe ORDER BY n FORMAT TabSeparated");
    assert_eq!(out.lines().collect::<Vec<_>>(), want);
}
