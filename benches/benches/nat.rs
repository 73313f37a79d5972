//! The reference NAT44 (`dplog-nat`) translating 64-byte packets from
//! memory, with logging off and on, at 0 %, 10 % and 100 % of packets
//! opening a new session.
//!
//! Each iteration translates a fresh copy of 65,536 preloaded synthetic
//! frames (1000 subscribers, 256 destinations, Ethernet + IPv4 + TCP / UDP /
//! ICMP echo, at most 64 bytes) through a fresh `Nat44` engine, then ends
//! every session (`finish`, natEvent 5 for each), so every created session
//! costs its create and its delete record. The copy and the engine set-up
//! are outside the timed part (`iter_batched`).
//!
//! * `off`: records discarded (the `--no-logging` baseline of `dplog-nat`);
//! * `on`: every record pushed into a dplog ring of `NatRecord` slots
//!   (the default 16384 slots, as `dplog-nat`; lossless `block` policy),
//!   formatted as text and written to
//!   a file by the consumer thread.
//!
//! Both work as a `dplog-nat` worker does: packets in bursts of
//! `NAT_BURST` (32), through a `RingLog`, which publishes the ring index
//! once per burst (`[ring] publish_every`, flushed after each burst).
//!
//! The bench thread (the forwarding worker, the producer) is pinned to CPU
//! 0 and the consumer to CPU 1. Throughput is packets per second.
//!
//! Run: `cargo bench -p dplog-benches --bench nat` (add `-- --quick` for a
//! short smoke run).

#![allow(missing_docs)] // criterion_main! generates main

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use dplog::config::FormatConfig;
use dplog::sinks::FileSink;
use dplog::{Backpressure, Logger, LoggerConfig};
use dplog_benches::{check_two_cpus, criterion_config, pin, CONSUMER_CPU, PRODUCER_CPU};
use dplog_nat::{NatProducer, RingLog, NAT_BURST};
use dplog_schema_nat::NatRecord;

#[path = "common/nat_workload.rs"]
mod nat_workload;
use nat_workload::{engine, preload, translate, FRAMES};

/// Truncate the log file when it grows past this (O_APPEND keeps writing
/// at the new end), so a long run does not fill the disk.
const TRUNCATE_AT: u64 = 256 * 1024 * 1024;

fn nat_translate(c: &mut Criterion) {
    check_two_cpus();
    pin(PRODUCER_CPU);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut g = c.benchmark_group("nat_translate_64B");
    g.throughput(Throughput::Elements(FRAMES as u64));
    for (share, name) in [(0.0, "0pct"), (0.1, "10pct"), (1.0, "100pct")] {
        let (arena, meta) = preload(share);
        // Sanity: the share is what it says (sessions per packet).
        let mut probe = arena.clone();
        let s = translate(engine(), &mut probe, &meta, &mut RingLog::new(None))
            .stats()
            .clone();
        eprintln!(
            "nat bench {name}: {} packets, {} sessions, {} records per iteration",
            s.packets, s.sessions_created, s.records_logged
        );

        g.bench_function(format!("logging_off/new_sessions_{name}"), |b| {
            b.iter_batched(
                || (engine(), arena.clone()),
                |(nat, mut a)| translate(nat, &mut a, &meta, &mut RingLog::new(None)),
                BatchSize::PerIteration,
            )
        });

        let path = dir.path().join(format!("nat-{name}.log"));
        let config = LoggerConfig {
            ring_capacity: dplog::DEFAULT_RING_CAPACITY,
            backpressure: Backpressure::Block,
            consumer_cpu: Some(CONSUMER_CPU),
            schemas: dplog::nat::table(),
            ..LoggerConfig::default()
        };
        let formatter = FormatConfig::default()
            .nat_formatter()
            .expect("text formatter");
        let sink = FileSink::open(&path).expect("open file sink");
        let logger = Logger::<NatRecord>::start(config, formatter, sink).expect("start logger");
        let mut producer = logger.producer().expect("producer");
        producer.set_publish_every(NAT_BURST);
        let mut producer = NatProducer::Local(producer);
        g.bench_function(
            format!("logging_on_text_file_block/new_sessions_{name}"),
            |b| {
                b.iter_batched(
                    || {
                        if std::fs::metadata(&path).map_or(0, |m| m.len()) > TRUNCATE_AT {
                            let f = std::fs::OpenOptions::new().write(true).open(&path);
                            let _ = f.and_then(|f| f.set_len(0));
                        }
                        (engine(), arena.clone())
                    },
                    |(nat, mut a)| {
                        translate(nat, &mut a, &meta, &mut RingLog::new(Some(&mut producer)))
                    },
                    BatchSize::PerIteration,
                )
            },
        );
        drop(producer);
        match logger.shutdown() {
            Ok(st) => assert_eq!(
                (st.dropped_full, st.written_records),
                (0, st.produced),
                "block policy loses nothing"
            ),
            Err((_, e)) => panic!("logger shutdown: {e}"),
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = criterion_config(Duration::from_secs(1), Duration::from_secs(4)).sample_size(10);
    targets = nat_translate
}
criterion_main!(benches);
