//! Archive sink and `dplog-query` lookups.
//!
//! Three parts, in one run:
//!
//! 1. **Storage** (printed table): one dplog-nat synthetic run
//!    (`DPLOG_ARCHIVE_BENCH_PACKETS`, default 1,000,000 packets: 200,000
//!    session events) logged as binary; the same records as text (the
//!    default line), JSON, text compressed with zstd (levels 3 and 9),
//!    binary, and the archive (default settings), in bytes per event.
//! 2. **Ingest** (criterion, `archive_ingest/write_batch_256KiB`):
//!    `ArchiveSink::write_batch` of 256 KiB batches of binary frames of
//!    that run's records, on the criterion thread (one core; CPU 0),
//!    blocks encoded, compressed and written as they fill; records/s.
//!    Retention bounds the disk use to 512 MiB.
//! 3. **Lookup** (printed table): archives of
//!    `DPLOG_ARCHIVE_BENCH_EVENTS` events (default `1000000,10000000,
//!    100000000`; about 10 bytes each on disk) of synthetic NAT44
//!    sessions over three simulated days (creates spread evenly, lifetimes
//!    1 s to 20 min, 256 pool addresses, random ports, one-hour
//!    segments, the default one-day lookback); 200 `--at` lookups of
//!    random (address, port, time), through the `dplog_query` library
//!    (what the program runs), p50/p99/max latency warm (pages cached)
//!    and cold (the archive's pages dropped before each lookup with
//!    `posix_fadvise(DONTNEED)`, which needs no root; with
//!    `DPLOG_ARCHIVE_BENCH_DROP_CACHES=1`, as root, `echo 3 >
//!    /proc/sys/vm/drop_caches` instead).
//!
//! The archives are written under `DPLOG_ARCHIVE_BENCH_DIR` (default the
//! system temporary directory) and removed at the end. Smoke run:
//! `DPLOG_ARCHIVE_BENCH_PACKETS=20000 DPLOG_ARCHIVE_BENCH_EVENTS=20000
//! cargo bench -p dplog-benches --bench archive -- --test`.

#![allow(missing_docs)] // a bench target's main

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use dplog::formatters::binary::BinaryEncoder;
use dplog::formatters::{Format, FormatSpec};
use dplog::nat::{Nat44SessionRecord, NatEvent};
use dplog::schema::HasSchema;
use dplog::sinks::archive::{list_segments, ArchiveSink, ArchiveSinkOptions};
use dplog::{RecordBytes, RecordHeader, Schema, Sink};
use dplog_benches::{criterion_config, pin, EPOCH_2026_NS, PRODUCER_CPU};
use dplog_query::{Lookback, Mode, Query};

fn env_u64s(name: &str, default: &[u64]) -> Vec<u64> {
    match std::env::var(name) {
        Ok(v) => v
            .split(',')
            .map(|x| {
                x.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("{name}: {x:?} is not a count"))
            })
            .collect(),
        Err(_) => default.to_vec(),
    }
}

fn bench_dir() -> tempfile::TempDir {
    match std::env::var_os("DPLOG_ARCHIVE_BENCH_DIR") {
        Some(d) => tempfile::tempdir_in(d).expect("temp dir in DPLOG_ARCHIVE_BENCH_DIR"),
        None => tempfile::tempdir().expect("temp dir"),
    }
}

fn dir_bytes(dir: &Path) -> u64 {
    list_segments(dir)
        .unwrap()
        .iter()
        .map(|s| std::fs::metadata(&s.path).map_or(0, |m| m.len()))
        .sum()
}

/// The records (bytes, with their schemas) of one dplog-nat synthetic
/// run logged as binary.
fn nat_run(dir: &Path, packets: u64) -> (Vec<Schema>, Vec<Vec<u8>>) {
    let bin = dir.join("nat.bin");
    let toml = format!(
        "[format]\ntype = \"binary\"\n[sink]\ntype = \"file\"\npath = \"{}\"\n[synthetic]\npackets = {packets}\n",
        bin.display()
    );
    let cfg = dplog_nat::app::AppConfig::from_toml_str(&toml).expect("config");
    dplog_nat::app::run(&cfg).expect("dplog-nat run");
    let bytes = std::fs::read(&bin).unwrap();
    std::fs::remove_file(&bin).unwrap();
    let d = dplog::formatters::binary::decode(&bytes);
    assert!(d.stopped.is_none());
    let mut schemas: Vec<Schema> = Vec::new();
    for s in &d.schemas {
        if !schemas.iter().any(|k| k.id() == s.id()) {
            schemas.push(s.clone());
        }
    }
    let recs = d.records.iter().map(|(_, r)| r.to_vec()).collect();
    (schemas, recs)
}

/// Binary frames of `recs` in batches of about 256 KiB.
fn batches(schemas: &[Schema], recs: &[Vec<u8>]) -> Vec<(Vec<u8>, u64)> {
    let refs: Vec<&Schema> = schemas.iter().collect();
    let mut enc = BinaryEncoder::new(&refs);
    let mut out = Vec::new();
    let mut cur = Vec::with_capacity(256 << 10);
    let mut n = 0;
    for r in recs {
        enc.push(r, &mut cur);
        n += 1;
        if cur.len() >= (256 << 10) - 128 {
            out.push((std::mem::take(&mut cur), n));
            n = 0;
        }
    }
    if n > 0 {
        out.push((cur, n));
    }
    out
}

fn storage(schemas: &[Schema], recs: &[Vec<u8>]) {
    let refs: Vec<&Schema> = schemas.iter().collect();
    let n = recs.len() as f64;
    let fmt = |kind: Format| {
        let mut enc = FormatSpec {
            kind,
            ..Default::default()
        }
        .encoder(&refs)
        .unwrap();
        let mut out = Vec::new();
        for r in recs {
            enc.push(r, &mut out);
        }
        out
    };
    let text = fmt(Format::Text);
    let json = fmt(Format::Json);
    let binary = fmt(Format::Binary);
    let z3 = zstd::bulk::compress(&text, 3).unwrap().len();
    let z9 = zstd::bulk::compress(&text, 9).unwrap().len();
    let dir = bench_dir();
    let mut sink = ArchiveSink::open(dir.path(), ArchiveSinkOptions::default()).unwrap();
    for (b, _) in batches(schemas, recs) {
        sink.write_batch(&b).unwrap();
    }
    sink.close().unwrap();
    let arch = dir_bytes(dir.path());
    println!(
        "archive storage: {} events of one dplog-nat synthetic run",
        recs.len()
    );
    println!("  {:<22} {:>12} {:>10}", "format", "bytes", "bytes/event");
    for (name, b) in [
        ("text", text.len() as u64),
        ("json", json.len() as u64),
        ("text + zstd -3", z3 as u64),
        ("text + zstd -9", z9 as u64),
        ("binary", binary.len() as u64),
        ("archive", arch),
    ] {
        println!("  {name:<22} {b:>12} {:>10.2}", b as f64 / n);
    }
}

fn ingest(c: &mut Criterion, schemas: &[Schema], recs: &[Vec<u8>]) {
    let batches = batches(schemas, recs);
    let dir = bench_dir();
    let opts = ArchiveSinkOptions {
        retention_bytes: Some(512 << 20),
        ..Default::default()
    };
    let mut sink = ArchiveSink::open(dir.path(), opts).unwrap();
    let per = batches.iter().map(|b| b.1).sum::<u64>() / batches.len() as u64;
    let mut g = c.benchmark_group("archive_ingest");
    g.throughput(Throughput::Elements(per));
    let mut i = 0;
    g.bench_function("write_batch_256KiB", |b| {
        b.iter(|| {
            // The run's records again and again: later passes only shift
            // nothing in time, so segments roll by size, as on a busy day.
            sink.write_batch(&batches[i % batches.len()].0).unwrap();
            i += 1;
        })
    });
    g.finish();
    sink.close().unwrap();
}

/// Writes `events` synthetic session events over three days into `dir`;
/// returns 100 of its sessions as (pool address, port, a time in their
/// life).
fn synthetic_archive(dir: &Path, events: u64) -> Vec<(u32, u16, u64)> {
    let mut sample = Vec::new();
    let span = 3 * 86_400_000_000_000u64;
    let sessions = events / 2;
    let step = span / sessions.max(1);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let schema = Nat44SessionRecord::schema();
    let mut enc = BinaryEncoder::new(&[schema]);
    let mut sink = ArchiveSink::open(dir, ArchiveSinkOptions::default()).unwrap();
    let mut batch = Vec::with_capacity(256 << 10);
    // Deletes waiting, by time.
    let mut pending: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
    let mut live: std::collections::HashMap<u64, Nat44SessionRecord> = Default::default();
    let mut push = |r: &Nat44SessionRecord, batch: &mut Vec<u8>, sink: &mut ArchiveSink| {
        enc.push(r.record_bytes(), batch);
        if batch.len() >= 256 << 10 {
            sink.write_batch(batch).unwrap();
            batch.clear();
        }
    };
    for k in 0..sessions {
        let t = EPOCH_2026_NS + k * step;
        while let Some(&Reverse((dt, id))) = pending.peek() {
            if dt > t {
                break;
            }
            pending.pop();
            let mut d = live.remove(&id).unwrap();
            d.timestamp_ns = dt;
            d.nat_event = NatEvent::Nat44SessionDelete as u8;
            d.initiator_packets = (next() % 1000) as u32;
            push(&d, &mut batch, &mut sink);
        }
        let x = next();
        let r = Nat44SessionRecord {
            header: RecordHeader::of::<Nat44SessionRecord>(),
            timestamp_ns: t,
            nat_event: NatEvent::Nat44SessionCreate as u8,
            protocol: if x & 1 == 0 { 6 } else { 17 },
            src_addr: 0x0A00_0000 | (x >> 8) as u32 & 0xFFFF,
            src_port: (x >> 24) as u16 | 1024,
            post_nat_src_addr: 0xC633_6400 | ((x >> 40) as u32 & 0xFF),
            post_napt_src_port: 1024 + ((x >> 48) as u16 % 64512),
            dst_addr: 0xCB00_7100 | ((x >> 4) as u32 & 0xFF),
            dst_port: [80, 443, 53, 8080][(x >> 2) as usize & 3],
            ..Default::default()
        };
        push(&r, &mut batch, &mut sink);
        let life = 1_000_000_000 + next() % 1_200_000_000_000;
        if k % (sessions / 100).max(1) == 0 && sample.len() < 100 {
            sample.push((r.post_nat_src_addr, r.post_napt_src_port, t + life / 2));
        }
        live.insert(k, r);
        pending.push(Reverse((t + life, k)));
    }
    while let Some(Reverse((dt, id))) = pending.pop() {
        let mut d = live.remove(&id).unwrap();
        d.timestamp_ns = dt;
        d.nat_event = NatEvent::Nat44SessionDelete as u8;
        push(&d, &mut batch, &mut sink);
    }
    if !batch.is_empty() {
        sink.write_batch(&batch).unwrap();
    }
    sink.close().unwrap();
    sample
}

fn drop_cache(dir: &Path) {
    if std::env::var_os("DPLOG_ARCHIVE_BENCH_DROP_CACHES").is_some() {
        std::fs::write("/proc/sys/vm/drop_caches", "3\n").expect("drop_caches (root)");
        return;
    }
    for s in list_segments(dir).unwrap() {
        if let Ok(f) = std::fs::File::open(&s.path) {
            use std::os::fd::AsRawFd;
            // SAFETY: posix_fadvise on a descriptor we own; no memory is
            // passed.
            unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
    }
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn lookups(events: u64) {
    let dir = bench_dir();
    let t0 = Instant::now();
    let sample = synthetic_archive(dir.path(), events);
    let write = t0.elapsed();
    let bytes = dir_bytes(dir.path());
    let segs = list_segments(dir.path()).unwrap().len();
    let mut rng = 12345u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let span = 3 * 86_400_000_000_000u64;
    // 100 lookups of sessions live at the time asked, 100 of random
    // (address, port, time), mostly misses.
    let probes: Vec<Query> = (0..200)
        .map(|i| {
            let x = next();
            let (a, p, t) = match sample.get(i) {
                Some(&(a, p, t)) if i < 100 => (a, p, t),
                _ => (
                    0xC633_6400 | ((x >> 40) as u32 & 0xFF),
                    1024 + ((x >> 48) % 64512) as u16,
                    EPOCH_2026_NS + x % span,
                ),
            };
            Query {
                mode: Mode::At(t),
                conds: vec![
                    (
                        "postNATSourceIPv4Address".into(),
                        std::net::Ipv4Addr::from(a).to_string(),
                    ),
                    ("postNAPTSourceTransportPort".into(), p.to_string()),
                ],
                lookback: Lookback::Default,
            }
        })
        .collect();
    let mut found = 0;
    let mut run = |cold: bool| {
        let mut times = Vec::new();
        for q in &probes {
            if cold {
                drop_cache(dir.path());
            }
            let t = Instant::now();
            let o = dplog_query::run(dir.path(), q, &mut |_, _, _| {}, &mut |_| {}).unwrap();
            times.push(t.elapsed());
            found += o.found;
        }
        times
    };
    let _ = run(false); // warm the cache
    let mut warm = run(false);
    let mut cold = run(true);
    println!(
        "archive lookup: {events} events, {segs} segments, {bytes} bytes ({:.2} bytes/event), written in {:.1} s; {} records found per pass of 200 lookups",
        bytes as f64 / events as f64,
        write.as_secs_f64(),
        found / 3
    );
    for (name, v) in [("warm", &mut warm), ("cold", &mut cold)] {
        println!(
            "  --at {name}: p50 {:?}  p99 {:?}  max {:?}",
            percentile(v, 0.5),
            percentile(v, 0.99),
            percentile(v, 1.0)
        );
    }
}

fn main() {
    pin(PRODUCER_CPU);
    let mut c =
        criterion_config(Duration::from_millis(700), Duration::from_secs(3)).configure_from_args();
    let packets = env_u64s("DPLOG_ARCHIVE_BENCH_PACKETS", &[1_000_000])[0];
    let dir = bench_dir();
    let (schemas, recs) = nat_run(dir.path(), packets);
    storage(&schemas, &recs);
    ingest(&mut c, &schemas, &recs);
    for n in env_u64s(
        "DPLOG_ARCHIVE_BENCH_EVENTS",
        &[1_000_000, 10_000_000, 100_000_000],
    ) {
        lookups(n);
    }
    c.final_summary();
}
