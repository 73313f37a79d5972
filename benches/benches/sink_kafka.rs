//! Kafka sink to librdkafka's mock cluster on loopback: 256 KiB batches of
//! NAT44 lines produced with `KafkaSink::write_batch`, each iteration
//! timed until every record is acknowledged (records/s acknowledged).
//!
//! Lines: the issue's ~120-byte template line (the target case), and the
//! ~350-byte default text layout for the keyed case (its key is the
//! `sourceIPv4Address=` field, the inside address). Producer settings:
//! `defaults` are [`KafkaSinkOptions::new`]'s (linger.ms 5, idempotent,
//! librdkafka's batch.num.messages 10 000); `tuned` adds
//! batch.num.messages 100 000, batch.size 1 000 000 bytes (librdkafka's
//! cap, the mock broker's message.max.bytes), compression off and
//! linger.ms 20; `packN` packs N lines per Kafka message
//! (`lines_per_message`, newline-separated).
//!
//! The same producer against a real broker: Tansu (crates.io `tansu`, a
//! Kafka-protocol broker, installed by `scripts/setup.sh`) on 127.0.0.1
//! with its in-memory storage, in the `sink_kafka_tansu` group (skipped,
//! saying so, when tansu is not installed), with the same batches per
//! iteration and 10 samples (the broker keeps every record in memory: a
//! few hundred MB per case, freed when the case ends).
//!
//! Bounded: every case gets a fresh in-process mock cluster or a fresh
//! tansu process (their logs live in memory), dropped after the case.

#![allow(missing_docs)] // criterion_main! generates main

use dplog_schema_nat::NatFormatSpec as _;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, Criterion, SamplingMode, Throughput,
};
use dplog::formatters::{Format, FormatSpec};
use dplog::nat::TextFormatter;
use dplog::sinks::{KafkaKey, KafkaSink, KafkaSinkOptions};
use dplog::{Formatter, Sink};
use dplog_benches::format_peers::TEMPLATE;
use dplog_benches::{criterion_config, mixed_pool};
use dplog_schema_nat::Nat44SessionRecord;
use rdkafka::mocking::MockCluster;

const BATCH_BYTES: usize = 256 * 1024;
/// Batches per iteration (about 68 000 template lines, 24 000 default
/// lines): long enough that the last batch's linger and ack round trip
/// are a small part of an iteration.
const BATCHES: usize = 32;

/// A tansu broker on a free 127.0.0.1 port with in-memory storage and one
/// 4-partition topic `bench`; killed when dropped.
struct Tansu {
    child: std::process::Child,
    brokers: String,
}

impl Tansu {
    /// `None` when tansu is not installed (on `PATH` or in
    /// `~/.cargo/bin`).
    fn start() -> Option<Tansu> {
        let mut dirs: Vec<std::path::PathBuf> = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default();
        if let Some(h) = std::env::var_os("HOME") {
            dirs.push(std::path::PathBuf::from(h).join(".cargo/bin"));
        }
        let bin = dirs
            .into_iter()
            .map(|d| d.join("tansu"))
            .find(|p| p.is_file())?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("tcp://127.0.0.1:{port}");
        let child = std::process::Command::new(&bin)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", "memory://tansu/", "--silent"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start tansu");
        let t = Tansu {
            child,
            brokers: format!("127.0.0.1:{port}"),
        };
        let t0 = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "tansu did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let ok = std::process::Command::new(&bin)
            .args([
                "topic",
                "create",
                "--broker",
                &url,
                "--partitions",
                "4",
                "bench",
            ])
            .status()
            .expect("tansu topic create")
            .success();
        assert!(ok, "tansu topic create failed");
        Some(t)
    }
}

impl Drop for Tansu {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whole lines of at most 256 KiB and their count: the ~120-byte template
/// line when `template`, else the default text layout.
fn text_batch(template: bool) -> (Vec<u8>, usize) {
    let pool = mixed_pool(4096);
    let mut f: Box<dyn Formatter<Nat44SessionRecord>> = if template {
        Box::new(
            FormatSpec {
                kind: Format::Text,
                template: Some(TEMPLATE.to_string()),
                ..FormatSpec::default()
            }
            .nat_formatter()
            .expect("template compiles"),
        )
    } else {
        Box::new(TextFormatter::default())
    };
    let mut batch = Vec::with_capacity(BATCH_BYTES);
    let mut line = Vec::with_capacity(512);
    let mut n = 0;
    for r in pool.iter().cycle() {
        line.clear();
        f.format(r, &mut line);
        if batch.len() + line.len() > BATCH_BYTES {
            break;
        }
        batch.extend_from_slice(&line);
        n += 1;
    }
    (batch, n)
}

/// librdkafka properties of the `tuned` cases.
fn tuned() -> Vec<(String, String)> {
    [
        ("batch.num.messages", "100000"),
        ("batch.size", "1000000"),
        ("compression.codec", "none"),
        ("linger.ms", "20"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .to_vec()
}

fn bench(c: &mut Criterion) {
    let cases: [(&str, bool, KafkaKey, bool, usize); 5] = [
        ("unkeyed_120B_defaults", true, KafkaKey::None, false, 1),
        ("unkeyed_120B_tuned", true, KafkaKey::None, true, 1),
        ("unkeyed_120B_tuned_pack16", true, KafkaKey::None, true, 16),
        ("unkeyed_120B_tuned_pack64", true, KafkaKey::None, true, 64),
        (
            "keyed_by_inside_address_350B_tuned",
            false,
            KafkaKey::Field("sourceIPv4Address".into()),
            true,
            1,
        ),
    ];
    let mut g = c.benchmark_group("sink_kafka_records");
    g.sampling_mode(SamplingMode::Flat);
    for (name, template, key, tune, pack) in cases {
        let cluster = MockCluster::new(1).expect("mock cluster");
        cluster.create_topic("bench", 4, 1).expect("topic");
        let case = Case {
            template,
            key,
            tune,
            pack,
        };
        bench_case(&mut g, name, cluster.bootstrap_servers(), case);
        drop(cluster);
    }
    g.finish();

    // The same producer against a real broker.
    let tansu_cases: [(&str, KafkaKey, bool, usize); 3] = [
        ("unkeyed_120B_defaults", KafkaKey::None, false, 1),
        ("unkeyed_120B_tuned_pack16", KafkaKey::None, true, 16),
        ("unkeyed_120B_tuned_pack64", KafkaKey::None, true, 64),
    ];
    let mut g = c.benchmark_group("sink_kafka_tansu");
    g.sampling_mode(SamplingMode::Flat);
    g.sample_size(10);
    for (name, key, tune, pack) in tansu_cases {
        let Some(broker) = Tansu::start() else {
            eprintln!("sink_kafka_tansu skipped: tansu is not installed (scripts/setup.sh)");
            break;
        };
        let case = Case {
            template: true,
            key,
            tune,
            pack,
        };
        bench_case(&mut g, name, broker.brokers.clone(), case);
        drop(broker);
    }
    g.finish();
}

/// One producer setting: template lines (else the default text layout),
/// the message key, the tuned properties (else the defaults) and the
/// lines packed per message.
struct Case {
    template: bool,
    key: KafkaKey,
    tune: bool,
    pack: usize,
}

/// Benchmarks `case` as `name` in `g`: a fresh sink on `brokers` (topic
/// `bench`), `BATCHES` batches an iteration, closed after the case.
fn bench_case(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, brokers: String, case: Case) {
    let (batch, lines) = text_batch(case.template);
    let per_iter = (lines * BATCHES) as u64;
    g.throughput(Throughput::Elements(per_iter));
    let mut o = KafkaSinkOptions::new(brokers, "bench");
    o.key = case.key;
    o.lines_per_message = case.pack;
    if case.tune {
        o.properties = tuned();
    }
    let mut sink = KafkaSink::new(o).expect("kafka sink");
    g.bench_function(name, |b| {
        b.iter_custom(|iters| time_acked(&mut sink, &batch, BATCHES, per_iter, iters))
    });
    sink.close().unwrap();
}

/// `iters` times: `batches` copies of `batch` written, then waited for
/// until every record is acknowledged; the elapsed time.
fn time_acked(
    sink: &mut KafkaSink,
    batch: &[u8],
    batches: usize,
    per_iter: u64,
    iters: u64,
) -> Duration {
    let t0 = Instant::now();
    for _ in 0..iters {
        let mut acked = 0u64;
        for _ in 0..batches {
            while sink.write_batch(batch).is_err() {
                acked += sink.poll().delivered_records;
            }
            acked += sink.poll().delivered_records;
        }
        while acked < per_iter {
            let p = sink.poll();
            assert_eq!(p.failed_records, 0);
            acked += p.delivered_records;
            std::thread::sleep(Duration::from_micros(200));
        }
        assert_eq!(acked, per_iter, "acknowledged more records than sent");
    }
    t0.elapsed()
}

criterion_group! {
    name = benches;
    config = criterion_config(Duration::from_millis(500), Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
