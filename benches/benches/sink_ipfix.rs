//! The IPFIX exporter (`dplog::sinks::IpfixExporter`, UDP) sending into a
//! real nfcapd (nfdump's collector, started here on 127.0.0.1 with a
//! 16 MiB receive buffer and a throwaway data directory) against the
//! IPFIX file sink (`FileSink` into a temp file), in the same run, on the
//! same batches: ~256 KiB of the `ipfix` format's messages of mixed NAT44
//! create/delete records (records/s: the sink's `write_batch` time; the
//! exporter re-packs the records into 1400-byte datagrams and sends them,
//! the file sink writes the bytes).
//!
//! UDP has no flow control: after the timed runs nfcapd is stopped and
//! `nfdump -I` says how many of the records sent it stored, printed with
//! the rate (a rate above what nfcapd keeps up with shows as loss there,
//! not as a slower send).
//!
//! Bounded: the file is truncated every 64 MiB outside the measured time;
//! nfcapd's data file holds what it received (at most a few hundred MiB
//! for a default run; its directory is removed at the end).

#![allow(missing_docs)] // criterion_main! generates main

use dplog_schema_nat::NatFormatSpec as _;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use dplog::formatters::{ExportClock, Format, FormatSpec, IpfixOptions};
use dplog::sinks::{FileSink, IpfixExporter, IpfixExporterOptions, IpfixTransport};
use dplog::{Formatter, Sink};
use dplog_benches::{criterion_config, mixed_pool, pin, PRODUCER_CPU};

const BATCH_BYTES: usize = 256 * 1024;
const TRUNCATE_EVERY: u64 = 64 * 1024 * 1024;

/// Whole IPFIX messages of at most 256 KiB (templates first, as the
/// formatter starts a stream) and the number of data records in them.
fn ipfix_batch() -> (Vec<u8>, usize) {
    let pool = mixed_pool(4096);
    let mut f = FormatSpec {
        kind: Format::Ipfix,
        ipfix: IpfixOptions {
            export_clock: ExportClock::Record,
            ..Default::default()
        },
        ..Default::default()
    }
    .nat_formatter()
    .expect("the ipfix format builds");
    let mut batch = Vec::with_capacity(BATCH_BYTES + 2048);
    let mut n = 0;
    for r in pool.iter().cycle() {
        f.format(r, &mut batch);
        n += 1;
        if batch.len() >= BATCH_BYTES {
            break;
        }
    }
    (batch, n)
}

/// True while a UDP socket is bound to 127.0.0.1:`port`.
fn bound(port: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/udp").unwrap_or_default();
    let local = format!("0100007F:{port:04X}");
    table
        .lines()
        .skip(1)
        .any(|l| l.split_whitespace().nth(1) == Some(local.as_str()))
}

struct Nfcapd {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Nfcapd {
    fn start() -> Option<Self> {
        for k in 0..50u16 {
            let port = 32_000 + (std::process::id() as u16 % 1000) + k;
            if bound(port) {
                continue;
            }
            let dir = tempfile::tempdir().unwrap();
            let mut child = match Command::new("nfcapd")
                .args(["-B", "16777216", "-b", "127.0.0.1", "-p"])
                .arg(port.to_string())
                .args(["-t", "3600", "-w"])
                .arg(dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
            {
                Ok(c) => c,
                Err(_) => {
                    eprintln!(
                        "nfcapd not installed (scripts/setup.sh); IPFIX export bench skipped"
                    );
                    return None;
                }
            };
            let t0 = Instant::now();
            while !bound(port) && child.try_wait().ok()?.is_none() {
                if t0.elapsed() > Duration::from_secs(10) {
                    let _ = child.kill();
                    return None;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            std::thread::sleep(Duration::from_millis(30));
            if child.try_wait().ok()?.is_none() {
                return Some(Self { child, port, dir });
            }
        }
        None
    }

    /// Stops nfcapd (SIGTERM: it writes and closes its file) and returns
    /// the flows it stored (`nfdump -I`).
    fn stop_and_count(mut self) -> Option<u64> {
        // SAFETY: kill(2) on our own child, not yet reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
        let file = std::fs::read_dir(self.dir.path())
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("nfcapd.2"))
            })?;
        let out = Command::new("nfdump")
            .arg("-r")
            .arg(file)
            .arg("-I")
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("Flows"))
            .and_then(|r| r.trim_start_matches([' ', ':']).trim().parse().ok())
    }
}

impl Drop for Nfcapd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn bench(c: &mut Criterion) {
    pin(PRODUCER_CPU);
    let (batch, records) = ipfix_batch();
    eprintln!(
        "{records} records per {} B batch of IPFIX messages",
        batch.len()
    );
    let mut g = c.benchmark_group("sink_ipfix_records");
    g.sampling_mode(SamplingMode::Flat);
    g.throughput(Throughput::Elements(records as u64));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nat.ipfix");
    let mut file = FileSink::open(&path).unwrap();
    let mut written = 0u64;
    g.bench_function("file_sink", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                if written >= TRUNCATE_EVERY {
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(&path)
                        .unwrap()
                        .set_len(0)
                        .unwrap();
                    written = 0;
                }
                let t0 = Instant::now();
                file.write_batch(&batch).unwrap();
                total += t0.elapsed();
                written += batch.len() as u64;
            }
            total
        })
    });
    file.close().unwrap();

    let Some(nf) = Nfcapd::start() else {
        g.finish();
        return;
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], nf.port));
    let mut sink =
        IpfixExporter::new(IpfixExporterOptions::new(IpfixTransport::Udp(addr))).unwrap();
    let counters = sink.counters();
    let mut sent = 0u64;
    g.bench_function("udp_exporter_to_nfcapd", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t0 = Instant::now();
                while sink.write_batch(&batch).is_err() {
                    std::thread::sleep(Duration::from_millis(1));
                }
                total += t0.elapsed();
                sent += records as u64;
            }
            total
        })
    });
    g.finish();
    let messages = dplog::sinks::IpfixCounters::get(&counters.messages);
    sink.close().unwrap();
    // Let nfcapd read what is still in its socket buffer.
    std::thread::sleep(Duration::from_millis(500));
    match nf.stop_and_count() {
        Some(stored) => eprintln!(
            "udp_exporter_to_nfcapd: nfcapd stored {stored} of {sent} records sent in {messages} datagrams ({:.1}%)",
            100.0 * stored as f64 / sent.max(1) as f64
        ),
        None => eprintln!("udp_exporter_to_nfcapd: nfdump could not read nfcapd's file"),
    }
}

criterion_group! {
    name = benches;
    config = criterion_config(Duration::from_millis(500), Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
