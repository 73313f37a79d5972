//! Mmap sink: `MmapSink::write_batch` of 256 KiB batches of text NAT44
//! lines into 64 MiB preallocated segments (lines/s and bytes/s), beside
//! `FileSink::write_batch` of the same batches in the same run.
//!
//! Old segments are deleted outside the measured time every 64 MiB, so
//! the case measures copying into the mapping plus the segment roll
//! (fallocate + mmap), not the disk.

#![allow(missing_docs)] // criterion_main! generates main

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dplog::nat::TextFormatter;
use dplog::sinks::mmap::list_segments;
use dplog::sinks::{FileSink, MmapSink, MmapSinkOptions};
use dplog::{Formatter, Sink};
use dplog_benches::{criterion_config, mixed_pool, pin, PRODUCER_CPU};

const BATCH_BYTES: usize = 256 * 1024;

fn text_batch() -> (Vec<u8>, usize) {
    let pool = mixed_pool(4096);
    let mut f = TextFormatter::default();
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

fn bench(c: &mut Criterion) {
    pin(PRODUCER_CPU);
    let (batch, lines) = text_batch();
    let dir = tempfile::tempdir().expect("temp dir");
    for (group, tp) in [
        ("sink_mmap_bytes", Throughput::Bytes(batch.len() as u64)),
        ("sink_mmap_lines", Throughput::Elements(lines as u64)),
    ] {
        let mut g = c.benchmark_group(group);
        g.throughput(tp);
        let opts = MmapSinkOptions {
            segment_bytes: 64 << 20,
            msync_interval_ms: None,
            prefix: "bench".into(),
            header: None,
            seal: None,
        };
        let mut sink = MmapSink::open(dir.path(), opts).expect("open mmap sink");
        let mut since_gc = 0usize;
        g.bench_function("MmapSink_write_batch_256KiB", |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    if since_gc >= 64 << 20 {
                        let segs = list_segments(dir.path(), "bench").unwrap();
                        for (_, p) in &segs[..segs.len().saturating_sub(1)] {
                            let _ = std::fs::remove_file(p);
                        }
                        since_gc = 0;
                    }
                    let t0 = Instant::now();
                    sink.write_batch(&batch).expect("write_batch");
                    total += t0.elapsed();
                    since_gc += batch.len();
                }
                total
            })
        });
        sink.close().unwrap();
        for (_, p) in list_segments(dir.path(), "bench").unwrap() {
            let _ = std::fs::remove_file(p);
        }

        let path = dir.path().join("file.log");
        let mut file = FileSink::open(&path).expect("open file sink");
        let trunc = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let mut since = 0usize;
        g.bench_function("FileSink_write_batch_256KiB", |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    if since >= 64 << 20 {
                        trunc.set_len(0).unwrap();
                        since = 0;
                    }
                    let t0 = Instant::now();
                    file.write_batch(&batch).expect("write_batch");
                    total += t0.elapsed();
                    since += batch.len();
                }
                total
            })
        });
        file.close().unwrap();
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = criterion_config(Duration::from_millis(500), Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
