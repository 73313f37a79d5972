//! File output: `dplog::sinks::FileSink::write_batch` with 256 KiB batches
//! of text-formatted NAT44 lines against a plain `BufWriter<File>` doing one
//! `write_all` per line, and the whole pipeline end to end (`Logger` with
//! `TextFormatter` + `FileSink`, producer on CPU 0, consumer on CPU 1).
//!
//! Files live in a `tempfile` directory (under `$TMPDIR`, default /tmp).
//! The batch cases truncate their file every 64 MiB, outside the measured
//! time, so they measure `write(2)` into the page cache, not the disk.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use dplog::formatters::TextFormatter;
use dplog::sinks::FileSink;
use dplog::{Backpressure, Formatter, Logger, LoggerConfig, Nat44SessionRecord, Sink};
use dplog_benches::{
    check_two_cpus, criterion_config, mixed_pool, pin, CONSUMER_CPU, PRODUCER_CPU,
};

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

criterion_group! {
    name = benches;
    config = criterion_config(Duration::from_millis(700), Duration::from_secs(2));
    targets = batches, end_to_end
}
criterion_main!(benches);
