//! Shared-memory rings against the in-process ring, in the same run.
//!
//! - `shm_push/{in_process,shm}`: producer cost of one 64-byte
//!   `Nat44SessionRecord` push (`try_push`), measured over runs of 1024
//!   pushes into an empty ring of 4096 slots; the ring is drained between
//!   runs outside the measured time, on the same thread (the producer's
//!   own cost, no cross-core traffic). Target: shm within 10 % of
//!   in-process.
//! - `ring_to_file/{in_process_consumer,daemon_path}`: records per second
//!   from a ring to text lines in a file. `in_process_consumer`: a
//!   `Logger` (consumer thread, text formatter, file sink) fed by a
//!   `LogProducer`, timed until its stats count every record written.
//!   `daemon_path`: what `dplogd` does per ring, in one thread: `ShmReader`
//!   copy-out and checks, `SchemaFormatter` text, `FileSink` batches of
//!   `batch_bytes` (the daemon's checkpoint per batch is not included:
//!   one small file rename per 256 KiB batch). Target: at least 0.9x.

#![allow(missing_docs)] // criterion_main! generates main

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dplog::shm::{OpenRules, ShmOptions, ShmProducer, ShmReader};
use dplog::{ring, Logger, LoggerConfig, Sink, Slot64};
use dplog_benches::{criterion_config, nat44};
use dplog_schema_nat::{NatEvent, NatRecord};

const CAP: usize = 4096;
const RUN: u64 = 1024;

fn rec(i: u64) -> NatRecord {
    NatRecord::from(nat44(i, NatEvent::Nat44SessionCreate, i))
}

fn shm_dir() -> tempfile::TempDir {
    // tmpfs, as in production; the test temp dir when /dev/shm is absent.
    tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap())
}

fn push(c: &mut Criterion) {
    let mut g = c.benchmark_group("shm_push");
    g.throughput(Throughput::Elements(1));
    g.bench_function("in_process", |b| {
        let (mut p, mut cons) = ring::<NatRecord>(CAP).unwrap();
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut done = 0;
            while done < iters {
                let n = RUN.min(iters - done);
                let t = Instant::now();
                for i in 0..n {
                    let _ = black_box(p.try_push(rec(i)));
                }
                total += t.elapsed();
                let mut out = [rec(0); 64];
                while cons.pop_burst(&mut out) > 0 {}
                done += n;
            }
            total
        });
    });
    g.bench_function("shm", |b| {
        let dir = shm_dir();
        let mut p = ShmProducer::<Slot64>::create(
            &ShmOptions {
                dir: dir.path().to_path_buf(),
                name: "bench".into(),
                capacity: CAP,
                group: None,
                daemon_uid: None,
            },
            &dplog_schema_nat::all(),
        )
        .unwrap();
        let mut r = ShmReader::open(p.path(), &OpenRules::default()).unwrap();
        let mut out = Vec::new();
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut done = 0;
            while done < iters {
                let n = RUN.min(iters - done);
                let t = Instant::now();
                for i in 0..n {
                    let _ = black_box(p.try_push(rec(i)));
                }
                total += t.elapsed();
                loop {
                    let k = r.poll(1024, &mut out).unwrap();
                    if k == 0 {
                        break;
                    }
                    r.consume(k);
                }
                r.publish_head();
                done += n;
            }
            total
        });
    });
    g.finish();
}

const RECORDS: u64 = 200_000;

fn to_file(c: &mut Criterion) {
    let mut g = c.benchmark_group("ring_to_file");
    g.throughput(Throughput::Elements(RECORDS));
    let schemas = dplog_schema_nat::all();
    let spec = dplog::formatters::FormatSpec::default();
    g.bench_function("in_process_consumer", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let dir = tempfile::tempdir().unwrap();
                let sink = dplog::sinks::FileSink::open(dir.path().join("out.log")).unwrap();
                let cfg = LoggerConfig {
                    ring_capacity: CAP,
                    ..LoggerConfig::default()
                };
                let fmt = spec.formatter(&schemas).unwrap();
                let logger = Logger::<NatRecord>::start(cfg, fmt, sink).unwrap();
                let mut p = logger.producer().unwrap();
                let t = Instant::now();
                for i in 0..RECORDS {
                    p.log(rec(i));
                }
                drop(p);
                let stats = logger.shutdown().unwrap();
                total += t.elapsed();
                assert_eq!(stats.written_records, RECORDS);
            }
            total
        });
    });
    g.bench_function("daemon_path", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let dir = shm_dir();
                let out_dir = tempfile::tempdir().unwrap();
                let mut p = ShmProducer::<Slot64>::create(
                    &ShmOptions {
                        dir: dir.path().to_path_buf(),
                        name: "bench".into(),
                        capacity: CAP,
                        group: None,
                        daemon_uid: None,
                    },
                    &schemas,
                )
                .unwrap();
                let path = p.path().to_path_buf();
                let producer = std::thread::spawn(move || {
                    for i in 0..RECORDS {
                        let _ = p.push(rec(i));
                    }
                });
                let mut r = ShmReader::open(&path, &OpenRules::default()).unwrap();
                let mut fmt = spec.formatter(&schemas).unwrap();
                let mut sink =
                    dplog::sinks::FileSink::open(out_dir.path().join("out.log")).unwrap();
                let batch_bytes = LoggerConfig::default().batch_bytes;
                let mut buf = Vec::with_capacity(batch_bytes + 65536);
                let mut slots = Vec::new();
                let mut n_done = 0u64;
                let t = Instant::now();
                while n_done < RECORDS {
                    let k = r.poll(256, &mut slots).unwrap();
                    for s in slots.chunks_exact(64) {
                        let len = usize::from(u16::from_ne_bytes([s[0], s[1]]));
                        fmt.push_bytes(&s[..len], &mut buf);
                    }
                    r.consume(k);
                    n_done += k as u64;
                    if buf.len() >= batch_bytes || (k == 0 && !buf.is_empty()) {
                        sink.write_batch(&buf).unwrap();
                        buf.clear();
                        r.publish_head();
                    } else if k == 0 {
                        r.publish_head();
                        std::hint::spin_loop();
                    }
                }
                sink.write_batch(&buf).unwrap();
                sink.close().unwrap();
                total += t.elapsed();
                r.publish_head();
                producer.join().unwrap();
            }
            total
        });
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = criterion_config(Duration::from_secs(1), Duration::from_secs(3));
    targets = push, to_file
}
criterion_main!(benches);
