//! Rows per second into ClickHouse: the `clickhouse` sink against
//! `clickhouse-client` inserting the same rows as TSV, into Debian's
//! `clickhouse-server` 18.16 started on 127.0.0.1 with a temporary data
//! directory (removed at the end) on this machine.
//!
//! ```sh
//! cargo run --release -p dplog-sinks --no-default-features --example clickhouse_insert_rate [ROWS] [ROUNDS]
//! ```
//!
//! Records: NAT44 session records (64 bytes, 14 fields), varied
//! addresses, ports and counters. The sink gets the binary stream in
//! 256 KiB batches, as a consumer hands them, encodes RowBinary from the
//! records and inserts 100 000 rows at a time; its time runs until the
//! server answered every insert. `clickhouse-client` reads the TSV from
//! its stdin (`INSERT ... FORMAT TabSeparated`); the TSV is rendered
//! before its clock starts, so the client is not charged for making it,
//! while the sink's time includes encoding the records. Each round
//! inserts ROWS rows each way (default 500 000, 5 rounds), alternating;
//! the best and the median round are printed. Rough on a shared
//! machine: the server, the client and the sink share its cores.

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dplog_core::{HasSchema, RecordBytes, Sink};
use dplog_formatters::binary::BinaryEncoder;
use dplog_schema_nat::Nat44SessionRecord;
use dplog_sinks::clickhouse::{create_table, ClickHouseOptions, Server, TableOptions};
use dplog_sinks::ClickHouseSink;
use dplog_testkit::clickhouse::ClickHouse;

const BATCH_BYTES: usize = 256 * 1024;

fn record(i: u64) -> Nat44SessionRecord {
    let delete = i % 2 == 1;
    Nat44SessionRecord {
        timestamp_ns: 1_767_225_600_000_000_000 + i * 1_000,
        src_addr: 0x0A00_0000 | (i.wrapping_mul(2_654_435_761) as u32 & 0x00FF_FFFF),
        post_nat_src_addr: 0xC633_6400 | (i as u32 & 0xFF),
        dst_addr: 0xCB00_7100 | ((i * 7) as u32 & 0xFF),
        src_port: 1024 + (i.wrapping_mul(40_503) % 64_000) as u16,
        post_napt_src_port: 1024 + (i % 63_000) as u16,
        dst_port: [443, 80, 53, 8443][(i % 4) as usize],
        protocol: if i % 4 == 2 { 17 } else { 6 },
        nat_event: if delete { 5 } else { 4 },
        ingress_vrf_id: (i % 5) as u32,
        initiator_packets: if delete { 3 + (i % 1000) as u32 } else { 0 },
        responder_packets: if delete { 2 + (i % 900) as u32 } else { 0 },
        initiator_octets: if delete { 180 + i % 1_500_000 } else { 0 },
        responder_octets: if delete {
            120 + (i * 13) % 90_000_000
        } else {
            0
        },
        ..Default::default()
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rows: usize = args.next().map_or(500_000, |a| a.parse().expect("ROWS"));
    let rounds: usize = args.next().map_or(5, |a| a.parse().expect("ROUNDS"));
    let ch = ClickHouse::start();
    let schema = Nat44SessionRecord::schema();
    for t in ["nat_rb", "nat_tsv"] {
        ch.query(&create_table(schema, &TableOptions::new(t, Server::V18)));
    }
    let recs: Vec<Nat44SessionRecord> = (0..rows as u64).map(record).collect();
    let mut enc = BinaryEncoder::try_new(&[schema]).unwrap();
    let mut batches = vec![Vec::with_capacity(BATCH_BYTES + 256)];
    for r in &recs {
        if batches.last().unwrap().len() >= BATCH_BYTES {
            batches.push(Vec::with_capacity(BATCH_BYTES + 256));
        }
        enc.push(r.record_bytes(), batches.last_mut().unwrap());
    }
    let mut tsv = Vec::new();
    for r in &recs {
        let b = r.record_bytes();
        for (k, f) in schema.fields().iter().enumerate() {
            if k > 0 {
                tsv.push(b'\t');
            }
            tsv.extend_from_slice(f.read_uint(b).to_string().as_bytes());
        }
        tsv.push(b'\n');
    }
    let mut o = ClickHouseOptions::new(ch.url(), "nat_rb");
    o.record_type = Some("nat44Session".into());
    let mut sink = ClickHouseSink::new(o).unwrap();
    let port = ch.tcp_port().to_string();
    let (mut sink_rates, mut client_rates) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t0 = Instant::now();
        for b in &batches {
            sink.write_batch(b).unwrap();
        }
        sink.drain(Instant::now() + Duration::from_secs(300))
            .unwrap();
        let s = t0.elapsed();
        assert_eq!(sink.poll().delivered_records, rows as u64);
        sink_rates.push(rows as f64 / s.as_secs_f64());

        let t0 = Instant::now();
        let mut child = Command::new("clickhouse-client")
            .args(["--host", "127.0.0.1", "--port", &port, "--query"])
            .arg("INSERT INTO nat_tsv FORMAT TabSeparated")
            .stdin(Stdio::piped())
            .spawn()
            .expect("clickhouse-client");
        child.stdin.take().unwrap().write_all(&tsv).unwrap();
        assert!(child.wait().unwrap().success());
        client_rates.push(rows as f64 / t0.elapsed().as_secs_f64());
    }
    // Both tables hold the same rows.
    let q = |t: &str| {
        ch.query(&format!(
            "SELECT count(), sum(postNAPTSourceTransportPort), sum(responderOctets) FROM {t} FORMAT TabSeparated"
        ))
    };
    assert_eq!(q("nat_rb"), q("nat_tsv"));
    let best = |v: &[f64]| v.iter().cloned().fold(0.0, f64::max);
    println!(
        "{rows} rows x {rounds} rounds, TSV {} MB, binary stream {} MB",
        tsv.len() / 1_000_000,
        batches.iter().map(Vec::len).sum::<usize>() / 1_000_000
    );
    println!(
        "clickhouse sink (RowBinary): best {:.0} rows/s, median {:.0} rows/s",
        best(&sink_rates),
        median(&mut sink_rates)
    );
    println!(
        "clickhouse-client (TSV):     best {:.0} rows/s, median {:.0} rows/s",
        best(&client_rates),
        median(&mut client_rates)
    );
}
