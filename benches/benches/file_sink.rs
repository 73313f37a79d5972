//! File output: `dplog::sinks::FileSink::write_batch` with 256 KiB batches
//! of text-formatted NAT44 lines against a plain `BufWriter<File>` doing one
//! `write_all` per line, and the whole pipeline end to end (`Logger` with
//! `TextFormatter` + `FileSink`, producer on CPU 0, consumer on CPU 1).
//!
//! Files live in a `tempfile` directory (under `$TMPDIR`, default /tmp).
//! The batch cases truncate their file every 64 MiB, outside the measured
//! time, so they measure `write(2)` into the page cache, not the disk.

#![allow(missing_docs)] // criterion_main! generates main

use dplog_schema_nat::NatFormatSpec as _;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use dplog::formatters::{Format, FormatSpec};
use dplog::nat::{NatFormatter, TextFormatter};
use dplog::sinks::FileSink;
use dplog::{Backpressure, Formatter, Logger, LoggerConfig, Sink};
use dplog_benches::format_peers::TEMPLATE;
use dplog_benches::{
    check_two_cpus, criterion_config, mixed_pool, pin, CONSUMER_CPU, PRODUCER_CPU,
};
use dplog_schema_nat::Nat44SessionRecord;

const BATCH_BYTES: usize = 256 * 1024;
const TRUNCATE_EVERY: u64 = 64 * 1024 * 1024;
/// Records per end-to-end run.
const E2E_RECORDS: u64 = 200_000;

/// Whole text lines of alternating create/delete records, at most 256 KiB,
/// and the end offset of every line.
fn text_batch() -> (Vec<u8>, Vec<usize>) {
    let pool = mixed_pool(4096);
    let mut f = TextFormatter::default();
    let mut batch = Vec::with_capacity(BATCH_BYTES);
    let mut ends = Vec::new();
    let mut line = Vec::with_capacity(512);
    for r in pool.iter().cycle() {
        line.clear();
        f.format(r, &mut line);
        if batch.len() + line.len() > BATCH_BYTES {
            break;
        }
        batch.extend_from_slice(&line);
        ends.push(batch.len());
    }
    (batch, ends)
}

/// Bytes and lines written per iteration, for the two throughput groups.
fn throughputs(batch: &[u8], lines: usize) -> [(&'static str, Throughput); 2] {
    [
        ("file_sink_bytes", Throughput::Bytes(batch.len() as u64)),
        ("file_sink_lines", Throughput::Elements(lines as u64)),
    ]
}

fn batches(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let (batch, ends) = text_batch();
    eprintln!(
        "batch: {} bytes, {} lines (mean {:.1} B/line), files in {}",
        batch.len(),
        ends.len(),
        batch.len() as f64 / ends.len() as f64,
        dir.path().display()
    );

    for (group, tp) in throughputs(&batch, ends.len()) {
        let mut g = c.benchmark_group(group);
        g.throughput(tp);

        // FileSink: one write_batch (one write(2)) per 256 KiB batch.
        let path = dir.path().join("sink.log");
        let mut sink = FileSink::open(&path).expect("open file sink");
        let trunc = OpenOptions::new().write(true).open(&path).unwrap();
        let mut since_trunc = 0u64;
        g.bench_function("FileSink_write_batch_256KiB", |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    if since_trunc >= TRUNCATE_EVERY {
                        // O_APPEND: the next write lands at the new end (0).
                        trunc.set_len(0).unwrap();
                        since_trunc = 0;
                    }
                    let t0 = Instant::now();
                    sink.write_batch(&batch).expect("write_batch");
                    total += t0.elapsed();
                    since_trunc += batch.len() as u64;
                }
                total
            })
        });
        sink.close().unwrap();

        // BufWriter<File> (8 KiB buffer): write_all per line.
        let path = dir.path().join("bufwriter.log");
        let mut w = BufWriter::new(File::create(&path).expect("create file"));
        let mut since_trunc = 0u64;
        g.bench_function("BufWriter_write_all_per_line", |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let t0 = Instant::now();
                    if since_trunc >= TRUNCATE_EVERY {
                        w.flush().unwrap(); // timed: these bytes were counted
                        total += t0.elapsed();
                        let f = w.get_mut();
                        f.set_len(0).unwrap();
                        f.seek(SeekFrom::Start(0)).unwrap();
                        since_trunc = 0;
                    }
                    let t0 = Instant::now();
                    let mut start = 0;
                    for &end in &ends {
                        w.write_all(&batch[start..end]).expect("write_all");
                        start = end;
                    }
                    total += t0.elapsed();
                    since_trunc += batch.len() as u64;
                }
                total
            })
        });
        w.flush().unwrap();
        g.finish();
    }
}

/// One end-to-end run: start a logger writing to `path`, push `n` records
/// with `log` (Block policy) from this thread, shut down. Returns the time
/// from the first `log` until `shutdown` has returned (drain, last batch,
/// flush, close with fsync, consumer joined).
fn e2e_run(path: &Path, pool: &[Nat44SessionRecord], n: u64) -> Duration {
    let config = LoggerConfig {
        backpressure: Backpressure::Block,
        consumer_cpu: Some(CONSUMER_CPU),
        ..LoggerConfig::default()
    };
    let sink = FileSink::open(path).expect("open file sink");
    let logger = Logger::start(config, TextFormatter::default(), sink).expect("start logger");
    let mut producer = logger.producer().expect("producer");
    let t0 = Instant::now();
    for i in 0..n {
        let mut r = pool[(i % pool.len() as u64) as usize];
        r.timestamp_ns += i * 1000;
        producer.log(r);
    }
    drop(producer);
    let stats = match logger.shutdown() {
        Ok(s) => s,
        Err((s, e)) => panic!("shutdown failed: {e}; stats {s:?}"),
    };
    let elapsed = t0.elapsed();
    if stats.written_records != n {
        panic!("wrote {} of {n} records: {stats:?}", stats.written_records);
    }
    elapsed
}

fn end_to_end(c: &mut Criterion) {
    check_two_cpus();
    pin(PRODUCER_CPU);
    let dir = tempfile::tempdir().expect("temp dir");
    let pool = mixed_pool(4096);
    let path = dir.path().join("e2e.log");

    let mut g = c.benchmark_group("logger_end_to_end");
    g.sampling_mode(SamplingMode::Flat).sample_size(10);
    g.throughput(Throughput::Elements(E2E_RECORDS));
    g.bench_function("text_FileSink_200k_records", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let _ = std::fs::remove_file(&path);
                total += e2e_run(&path, &pool, E2E_RECORDS);
            }
            let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
            assert!(bytes > E2E_RECORDS * 300, "log file has only {bytes} bytes");
            let _ = std::fs::remove_file(&path);
            total
        })
    });
    g.finish();
}

/// Records per run of the ~120-byte template case (~115 MB of log).
const E2E_120B_RECORDS: u64 = 1_000_000;
/// Records per producer `log_burst` call: one NAT worker rx burst.
const PRODUCER_BURST: usize = 32;

/// The compiled template of the issue's ~120-byte NAT44 text line
/// ([`TEMPLATE`]) behind [`NatFormatter`], the consumer's formatter when a
/// `text` format has a template (as `dplog-nat --template`).
fn template_formatter() -> NatFormatter {
    FormatSpec {
        kind: Format::Text,
        template: Some(TEMPLATE.to_string()),
        ..FormatSpec::default()
    }
    .nat_formatter()
    .expect("template compiles")
}

/// `n` records of the mixed pool with distinct timestamps (1 µs apart).
fn e2e_records(pool: &[Nat44SessionRecord], n: u64) -> Vec<Nat44SessionRecord> {
    (0..n)
        .map(|i| {
            let mut r = pool[(i % pool.len() as u64) as usize];
            r.timestamp_ns += i * 1000;
            r
        })
        .collect()
}

/// The thread named `dplog-consumer` of this process: ns it has run on a
/// CPU and ns it has waited runnable on a run queue (preempted), from the
/// first two fields of `/proc/self/task/*/schedstat`; zeros if not found.
/// On a machine shared with other work the consumer is preempted, so its
/// CPU time per record says what one dedicated core would sustain, and the
/// run-queue wait shows how much of the wall time other work took.
fn consumer_sched_ns() -> (u64, u64) {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return (0, 0);
    };
    for t in tasks.flatten() {
        let p = t.path();
        if std::fs::read_to_string(p.join("comm")).is_ok_and(|c| c.trim() == "dplog-consumer") {
            let s = std::fs::read_to_string(p.join("schedstat")).unwrap_or_default();
            let mut f = s.split_whitespace().map(|v| v.parse().unwrap_or(0));
            return (f.next().unwrap_or(0), f.next().unwrap_or(0));
        }
    }
    (0, 0)
}

/// Consumer CPU ns, run-queue wait ns and records over the runs of one
/// bench case.
static CONSUMER_CPU_TIME: std::sync::Mutex<(u64, u64, u64)> = std::sync::Mutex::new((0, 0, 0));

/// One ring → template → `FileSink` run: a logger (Block policy, consumer
/// on CPU 1) writes to `path`; this thread (CPU 0) pushes `recs` in bursts
/// of [`PRODUCER_BURST`] and the clock stops when the sink has accepted
/// every record (`written_records == n`), i.e. every line is in the page
/// cache. Shutdown (close, with its fsync) is outside the timing. Checks
/// that nothing was lost and returns the elapsed time and the file size.
/// `burst`: the consumer's records per ring per pass (`LoggerConfig::burst`).
fn e2e_template_run(path: &Path, recs: &[Nat44SessionRecord], burst: usize) -> (Duration, u64) {
    let n = recs.len() as u64;
    let config = LoggerConfig {
        backpressure: Backpressure::Block,
        consumer_cpu: Some(CONSUMER_CPU),
        burst,
        ..LoggerConfig::default()
    };
    let sink = FileSink::open(path).expect("open file sink");
    let logger = Logger::start(config, template_formatter(), sink).expect("start logger");
    let mut producer = logger.producer().expect("producer");
    let (cpu0, wait0) = consumer_sched_ns();
    let t0 = Instant::now();
    for chunk in recs.chunks(PRODUCER_BURST) {
        producer.log_burst(chunk);
    }
    while logger.stats().written_records < n {
        // A sink that stopped taking batches must not hang the bench.
        if t0.elapsed() > Duration::from_secs(60) {
            panic!("sink took too long: {:?}", logger.stats());
        }
        std::hint::spin_loop();
    }
    let elapsed = t0.elapsed();
    let (cpu1, wait1) = consumer_sched_ns();
    if let Ok(mut c) = CONSUMER_CPU_TIME.lock() {
        c.0 += cpu1.saturating_sub(cpu0);
        c.1 += wait1.saturating_sub(wait0);
        c.2 += n;
    }
    drop(producer);
    let stats = match logger.shutdown() {
        Ok(s) => s,
        Err((s, e)) => panic!("shutdown failed: {e}; stats {s:?}"),
    };
    assert_eq!(stats.written_records, n, "lost records: {stats:?}");
    assert_eq!(stats.dropped(), 0, "dropped records: {stats:?}");
    let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    (elapsed, bytes)
}

/// Peer: one thread formats the same records with the same template and
/// writes each line with `BufWriter<File>::write_all` (8 KiB buffer, one
/// `write(2)` per 8 KiB); flushed inside the timing.
fn bufwriter_template_run(path: &Path, recs: &[Nat44SessionRecord]) -> (Duration, u64) {
    let mut f = template_formatter();
    let mut w = BufWriter::new(File::create(path).expect("create file"));
    let mut line = Vec::with_capacity(256);
    let t0 = Instant::now();
    for r in recs {
        line.clear();
        f.format(r, &mut line);
        w.write_all(&line).expect("write_all");
    }
    w.flush().expect("flush");
    let elapsed = t0.elapsed();
    drop(w);
    let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    (elapsed, bytes)
}

/// The target case: ~120-byte NAT44 text lines from the ring to a
/// file on one consumer core, lossless, against a buffered `write(2)` loop
/// in the same run. Two file systems: tmpfs (`/dev/shm`, no disk behind
/// the page cache) and the repository's (`CARGO_TARGET_TMPDIR`, ext4 or
/// whatever holds `target/`, written back by the kernel meanwhile). Every
/// run's file (~115 MB) is deleted after the run.
fn end_to_end_template(c: &mut Criterion) {
    check_two_cpus();
    pin(PRODUCER_CPU);
    let recs = e2e_records(&mixed_pool(4096), E2E_120B_RECORDS);
    let mut sample = Vec::new();
    let mut f = template_formatter();
    for r in &recs[..1000] {
        f.format(r, &mut sample);
    }
    eprintln!(
        "template lines: mean {:.1} B/line; first: {}",
        sample.len() as f64 / 1000.0,
        String::from_utf8_lossy(&sample[..sample.iter().position(|&b| b == b'\n').unwrap()])
    );
    let mut dirs = Vec::new();
    if Path::new("/dev/shm").is_dir() {
        dirs.push((
            "devshm",
            tempfile::tempdir_in("/dev/shm").expect("temp dir in /dev/shm"),
        ));
    }
    dirs.push((
        "repofs",
        tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir in target/tmp"),
    ));
    let mut g = c.benchmark_group("logger_end_to_end_120B");
    g.sampling_mode(SamplingMode::Flat).sample_size(10);
    g.throughput(Throughput::Elements(E2E_120B_RECORDS));
    type Run = fn(&Path, &[Nat44SessionRecord]) -> (Duration, u64);
    let cases: [(&str, Run); 3] = [
        // 32 records per ring per pass: one `head` publish per 32 records.
        ("ring_template_FileSink_burst32", |p, r| {
            e2e_template_run(p, r, 32)
        }),
        // 256 per pass: one `head` publish per 256 records. With the ring
        // full (a saturated, lossless pipeline) the blocked producer keeps
        // reading `head`, so every publish is a cross-core cache miss.
        ("ring_template_FileSink_burst256", |p, r| {
            e2e_template_run(p, r, 256)
        }),
        ("BufWriter_template_write_all", bufwriter_template_run),
    ];
    for (fs, dir) in &dirs {
        for (name, run) in cases {
            let path = dir.path().join("e2e120.log");
            g.bench_function(format!("{name}_{fs}_1M"), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let _ = std::fs::remove_file(&path);
                        let (t, bytes) = run(&path, &recs);
                        let _ = std::fs::remove_file(&path);
                        assert!(
                            bytes >= E2E_120B_RECORDS * 100,
                            "log file has only {bytes} bytes"
                        );
                        total += t;
                    }
                    total
                })
            });
            if let Ok(mut c) = CONSUMER_CPU_TIME.lock() {
                if c.2 > 0 {
                    eprintln!(
                        "{name}_{fs}: consumer thread CPU {:.1} ns/record, preempted (runnable, waiting for a CPU) {:.1} ns/record, over {} records ({:.1} M records/s per dedicated core)",
                        c.0 as f64 / c.2 as f64,
                        c.1 as f64 / c.2 as f64,
                        c.2,
                        c.2 as f64 * 1e3 / c.0.max(1) as f64
                    );
                }
                *c = (0, 0, 0);
            }
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = criterion_config(Duration::from_millis(700), Duration::from_secs(2));
    targets = batches, end_to_end, end_to_end_template
}
criterion_main!(benches);
