//! Binary format throughput, ring to disk on one consumer core: 64-byte
//! `Nat44SessionRecord`s pushed from CPU 0, the consumer on CPU 1 encoding
//! them in the `binary` format (a 4-byte frame header and the record's 64
//! bytes) into 256 KiB batches for a `FileSink`; the same pipeline with the
//! `text` format; and, as the bound of each, a plain `write(2)` loop of the
//! same bytes, all in one run.
//!
//! Group `binary_end_to_end_64B` (records/s, one criterion iteration = one
//! run of [`RECORDS`] records):
//!
//! - `ring_binary_FileSink`: `Logger` (`Block` policy, 65536-slot ring,
//!   consumer on CPU 1, `LoggerConfig::burst` 256) with the `binary`
//!   `NatFormatter` and a `FileSink`; this thread, on CPU 0, pushes the
//!   records with `log_burst` of 32 (cycling through a pool of 4096
//!   varied records); the clock stops when the sink has accepted every
//!   record (`written_records`, every byte in the page cache); shutdown
//!   and its `fsync` are outside the timing; nothing may be lost;
//! - `write_loop_binary`: the bound: the same number of bytes, as 256 KiB
//!   batches of the binary stream of the same records encoded beforehand,
//!   written with one `write(2)` per batch to a file in the same
//!   directory (no ring, no encoding);
//! - `ring_text_FileSink` and `write_loop_text`: the same two with the
//!   `text` format (the built-in text layout, ~300-byte lines);
//! - `ring_binary_FileSink_sealed`: `ring_binary_FileSink` with the sink's
//!   `seal` on (`dplog::sinks::seal`: BLAKE3 of every write chained in
//!   `<file>.seal`, an Ed25519 signature at close and every 60 s), hashed
//!   on the seal's hasher thread (`hasher = "thread"`, the default from 3 CPUs, not
//!   pinned: on a 2-CPU machine it shares a core with the producer or the
//!   consumer), in the same run, so the cases compare: the cost of
//!   sealing;
//! - `ring_binary_FileSink_sealed_cpu0`: the same with the hasher thread
//!   pinned to CPU 0, the producer's (`hasher_cpu = 0`);
//! - `ring_binary_FileSink_sealed_inline`: the same with `hasher =
//!   "inline"` (BLAKE3 on the consumer thread);
//! - `sink_binary_{plain,sealed_thread,sealed_inline}`: no ring and no
//!   producer: this thread, on CPU 0, hands the write loop's 256 KiB
//!   batches (copied into the batch buffer, as a consumer formats into
//!   it) to a `FileSink` with `write_batch_owned`, plain, sealed with the
//!   hasher thread pinned to CPU 1 (a core of its own: what a machine
//!   with a spare core gives it), and sealed inline; the clock stops
//!   after `flush` (every batch hashed and sealed). Its CPU time per
//!   record (`/proc/thread-self/schedstat`) is the consumer-side cost of
//!   each.
//!
//! Files are in `/dev/shm` (tmpfs: no disk behind the page cache; the
//! repository's file system if there is none) and deleted after every run.
//! The bench prints the stream sizes and the consumer thread's CPU time per
//! record (from `/proc/self/task/*/schedstat`), which on a shared machine
//! says what one dedicated core sustains, and for the sealed cases the
//! hasher thread's.
//!
//! `cargo bench -p dplog-benches --bench binary_throughput`

#![allow(missing_docs)] // criterion_main! generates main

use dplog_schema_nat::NatFormatSpec as _;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use dplog::formatters::{Format, FormatSpec};
use dplog::nat::NatFormatter;
use dplog::sinks::seal::{HasherMode, SealOptions};
use dplog::sinks::{FileSink, FileSinkOptions};
use dplog::{Backpressure, Formatter, Logger, LoggerConfig};
use dplog_benches::{
    check_two_cpus, criterion_config, mixed_pool, pin, CONSUMER_CPU, PRODUCER_CPU,
};
use dplog_schema_nat::Nat44SessionRecord;

/// Records per run.
const RECORDS: u64 = 4_000_000;
/// Records the producer cycles through.
const POOL: usize = 4096;
const PRODUCER_BURST: usize = 32;
const BATCH_BYTES: usize = 256 * 1024;

fn formatter(kind: Format) -> NatFormatter {
    FormatSpec {
        kind,
        ..FormatSpec::default()
    }
    .nat_formatter()
    .expect("format builds")
}

/// The consumer thread's (`dplog-consumer`) CPU ns so far; 0 if not found.
fn consumer_cpu_ns() -> u64 {
    thread_cpu_ns("dplog-consumer")
}

/// CPU ns so far of this process's thread named `name`; 0 if not found.
fn thread_cpu_ns(name: &str) -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    for t in tasks.flatten() {
        let p = t.path();
        if std::fs::read_to_string(p.join("comm")).is_ok_and(|c| c.trim() == name) {
            let s = std::fs::read_to_string(p.join("schedstat")).unwrap_or_default();
            return s
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
        }
    }
    0
}

/// Consumer CPU ns, records and hasher CPU ns over the runs of one case.
static CONSUMER: std::sync::Mutex<(u64, u64, u64)> = std::sync::Mutex::new((0, 0, 0));

/// One ring → formatter → `FileSink` run of [`RECORDS`] records into
/// `path`; returns the elapsed time and the file's size.
fn ring_run(
    path: &Path,
    kind: Format,
    pool: &[Nat44SessionRecord],
    seal: Option<(&Path, HasherMode, Option<usize>)>,
) -> (Duration, u64) {
    let config = LoggerConfig {
        backpressure: Backpressure::Block,
        consumer_cpu: Some(CONSUMER_CPU),
        burst: 256,
        ..LoggerConfig::default()
    };
    let opts = FileSinkOptions {
        seal: seal.map(|(key_file, hasher, hasher_cpu)| SealOptions {
            hasher,
            hasher_cpu,
            ..SealOptions::new(key_file)
        }),
        ..FileSinkOptions::default()
    };
    let sink = FileSink::with_options(path, opts).expect("open file sink");
    let logger = Logger::start(config, formatter(kind), sink).expect("start logger");
    let mut producer = logger.producer().expect("producer");
    let cpu0 = consumer_cpu_ns();
    // The hasher thread lives as long as the sink: started before, gone
    // at shutdown.
    let hash0 = thread_cpu_ns("dplog-seal-hash");
    let t0 = Instant::now();
    let mut sent = 0u64;
    while sent < RECORDS {
        for chunk in pool.chunks(PRODUCER_BURST) {
            let k = chunk.len().min((RECORDS - sent) as usize);
            producer.log_burst(&chunk[..k]);
            sent += k as u64;
            if sent == RECORDS {
                break;
            }
        }
    }
    while logger.stats().written_records < RECORDS {
        // A sink that stopped taking batches must not hang the bench.
        if t0.elapsed() > Duration::from_secs(120) {
            panic!("sink took too long: {:?}", logger.stats());
        }
        std::hint::spin_loop();
    }
    let elapsed = t0.elapsed();
    let cpu1 = consumer_cpu_ns();
    let hash1 = thread_cpu_ns("dplog-seal-hash");
    if let Ok(mut c) = CONSUMER.lock() {
        c.0 += cpu1.saturating_sub(cpu0);
        c.1 += RECORDS;
        c.2 += hash1.saturating_sub(hash0);
    }
    drop(producer);
    let stats = match logger.shutdown() {
        Ok(s) => s,
        Err((s, e)) => panic!("shutdown failed: {e}; stats {s:?}"),
    };
    assert_eq!(stats.written_records, RECORDS, "lost records: {stats:?}");
    assert_eq!(stats.dropped(), 0, "dropped records: {stats:?}");
    let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    (elapsed, bytes)
}

/// The bytes the pipeline writes for [`RECORDS`] records of `pool` in
/// `kind`: the total, and the first 256 KiB of the stream (the pool
/// encoded repeatedly), the batch the write loop repeats.
fn stream(kind: Format, pool: &[Nat44SessionRecord]) -> (u64, Vec<u8>) {
    let mut f = formatter(kind);
    let mut total = 0u64;
    let mut batch = Vec::with_capacity(BATCH_BYTES + 4096);
    let mut buf = Vec::with_capacity(BATCH_BYTES + 4096);
    for i in 0..RECORDS {
        buf.clear();
        f.format(&pool[(i % POOL as u64) as usize], &mut buf);
        total += buf.len() as u64;
        if batch.len() + buf.len() <= BATCH_BYTES {
            batch.extend_from_slice(&buf);
        }
    }
    (total, batch)
}

/// The bound: `total` bytes to `path` as `batch` over and over (the last
/// write cut short), one `write(2)` per batch; returns the elapsed time and
/// the file's size.
fn write_loop(path: &Path, total: u64, batch: &[u8]) -> (Duration, u64) {
    let mut f = File::create(path).expect("create file");
    let t0 = Instant::now();
    let mut left = total;
    while left > 0 {
        let k = (batch.len() as u64).min(left) as usize;
        // `write_all` is one write(2) per batch unless the kernel takes
        // less, as the file sink does.
        f.write_all(&batch[..k]).expect("write");
        left -= k as u64;
    }
    let elapsed = t0.elapsed();
    drop(f);
    let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    (elapsed, bytes)
}

/// CPU ns so far of the calling thread.
fn this_thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// The write loop through a `FileSink` (`seal`: key and hasher mode),
/// each batch copied into the buffer handed over; returns the elapsed
/// time (to the `flush` that waits for the hasher), this thread's CPU ns
/// and the file's size.
fn sink_loop(
    path: &Path,
    total: u64,
    batch: &[u8],
    seal: Option<(&Path, HasherMode)>,
) -> (Duration, u64, u64) {
    use dplog::Sink as _;
    let opts = FileSinkOptions {
        seal: seal.map(|(key_file, hasher)| SealOptions {
            hasher,
            hasher_cpu: Some(CONSUMER_CPU),
            ..SealOptions::new(key_file)
        }),
        ..FileSinkOptions::default()
    };
    let mut sink = FileSink::with_options(path, opts).expect("open file sink");
    let mut buf = Vec::with_capacity(BATCH_BYTES + 4096);
    let cpu0 = this_thread_cpu_ns();
    let t0 = Instant::now();
    let mut left = total;
    while left > 0 {
        let k = (batch.len() as u64).min(left) as usize;
        buf.clear();
        buf.extend_from_slice(&batch[..k]);
        sink.write_batch_owned(&mut buf, &[]).expect("write");
        left -= k as u64;
    }
    sink.flush().expect("flush");
    let elapsed = t0.elapsed();
    let cpu = this_thread_cpu_ns().saturating_sub(cpu0);
    sink.close().expect("close");
    let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    (elapsed, cpu, bytes)
}

/// Whether a ring run's file of `bytes` is the stream of `total` bytes:
/// exactly, or, in `binary`, with a `C` frame (28 bytes) more for every
/// recalibration (about once a second) a run slowed by a loaded machine
/// went through.
fn size_ok(kind: Format, bytes: u64, total: u64) -> bool {
    bytes == total || (kind == Format::Binary && bytes > total && (bytes - total) % 28 == 0)
}

/// Prints and resets the consumer CPU per record of the case just run.
fn report_consumer(case: &str) {
    if let Ok(mut c) = CONSUMER.lock() {
        if c.1 > 0 {
            eprintln!(
                "{case}: consumer thread CPU {:.2} ns/record ({:.1} M records/s per dedicated core)",
                c.0 as f64 / c.1 as f64,
                c.1 as f64 * 1e3 / c.0.max(1) as f64
            );
            if c.2 > 0 {
                eprintln!(
                    "{case}: hasher thread CPU {:.2} ns/record",
                    c.2 as f64 / c.1 as f64
                );
            }
        }
        *c = (0, 0, 0);
    }
}

fn bench(c: &mut Criterion) {
    check_two_cpus();
    pin(PRODUCER_CPU);
    let pool = mixed_pool(POOL);
    let dir = if Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm").expect("temp dir in /dev/shm")
    } else {
        tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir")
    };
    let path = dir.path().join("binary_throughput.out");
    let seal_file = dplog::sinks::seal::seal_path(&path);
    let key = dir.path().join("seal.key");
    dplog::sinks::seal::generate_key_pair(&key, &dir.path().join("seal.pub")).expect("seal key");
    let mut g = c.benchmark_group("binary_end_to_end_64B");
    g.sampling_mode(SamplingMode::Flat).sample_size(10);
    g.throughput(Throughput::Elements(RECORDS));
    for (name, kind) in [("binary", Format::Binary), ("text", Format::Text)] {
        let (total, batch) = stream(kind, &pool);
        eprintln!(
            "{name}: {total} bytes for {RECORDS} records ({:.1} B/record)",
            total as f64 / RECORDS as f64
        );
        g.bench_function(format!("ring_{name}_FileSink"), |b| {
            b.iter_custom(|iters| {
                let mut t = Duration::ZERO;
                for _ in 0..iters {
                    let _ = std::fs::remove_file(&path);
                    let (d, bytes) = ring_run(&path, kind, &pool, None);
                    let _ = std::fs::remove_file(&path);
                    assert!(
                        size_ok(kind, bytes, total),
                        "{name}: file size {bytes}, {total} expected"
                    );
                    t += d;
                }
                t
            })
        });
        report_consumer(&format!("ring_{name}_FileSink"));
        if kind == Format::Binary {
            for (case, mode, cpu) in [
                ("ring_binary_FileSink_sealed", HasherMode::Thread, None),
                (
                    "ring_binary_FileSink_sealed_cpu0",
                    HasherMode::Thread,
                    Some(PRODUCER_CPU),
                ),
                (
                    "ring_binary_FileSink_sealed_inline",
                    HasherMode::Inline,
                    None,
                ),
            ] {
                g.bench_function(case, |b| {
                    b.iter_custom(|iters| {
                        let mut t = Duration::ZERO;
                        for _ in 0..iters {
                            let _ = std::fs::remove_file(&path);
                            let _ = std::fs::remove_file(&seal_file);
                            let (d, bytes) = ring_run(&path, kind, &pool, Some((&key, mode, cpu)));
                            let _ = std::fs::remove_file(&path);
                            let _ = std::fs::remove_file(&seal_file);
                            assert!(
                                size_ok(kind, bytes, total),
                                "{name}: sealed file size {bytes}, {total} expected"
                            );
                            t += d;
                        }
                        t
                    })
                });
                report_consumer(case);
            }
            for (case, seal) in [
                ("sink_binary_plain", None),
                ("sink_binary_sealed_thread", Some(HasherMode::Thread)),
                ("sink_binary_sealed_inline", Some(HasherMode::Inline)),
            ] {
                g.bench_function(case, |b| {
                    b.iter_custom(|iters| {
                        let mut t = Duration::ZERO;
                        for _ in 0..iters {
                            let _ = std::fs::remove_file(&path);
                            let _ = std::fs::remove_file(&seal_file);
                            let (d, cpu, bytes) =
                                sink_loop(&path, total, &batch, seal.map(|m| (key.as_path(), m)));
                            let _ = std::fs::remove_file(&path);
                            let _ = std::fs::remove_file(&seal_file);
                            assert_eq!(bytes, total, "{case}: file size");
                            if let Ok(mut c) = CONSUMER.lock() {
                                c.0 += cpu;
                                c.1 += RECORDS;
                            }
                            t += d;
                        }
                        t
                    })
                });
                report_consumer(case);
            }
        }
        g.bench_function(format!("write_loop_{name}"), |b| {
            b.iter_custom(|iters| {
                let mut t = Duration::ZERO;
                for _ in 0..iters {
                    let _ = std::fs::remove_file(&path);
                    let (d, bytes) = write_loop(&path, total, &batch);
                    let _ = std::fs::remove_file(&path);
                    assert_eq!(bytes, total, "{name}: write loop file size");
                    t += d;
                }
                t
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = criterion_config(Duration::from_millis(500), Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
