//! dplog-cat throughput: records per second decoding a binary log of NAT
//! records to JSON (output to /dev/null), and the process's peak RSS.
//!
//! `cargo bench -p dplog-cat --bench throughput` writes a log of
//! `DPLOG_CAT_BENCH_MIB` MiB (default 1024) into `DPLOG_CAT_BENCH_DIR`
//! (default the system temporary directory; the file is removed after),
//! runs the `dplog-cat` binary of this build `DPLOG_CAT_BENCH_RUNS` times
//! (default 3) and prints one line per run and the best: records, seconds,
//! records/s, MiB/s and the child's peak RSS (`getrusage(RUSAGE_CHILDREN)`
//! after each run: the largest so far). Measure on a quiet machine.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Instant;

use dplog_core::Formatter;
use dplog_formatters::{Format, FormatSpec};
use dplog_schema_nat::{Nat44SessionRecord, NatFormatSpec as _, NatRecord};
use dplog_sinks::mmap::reader::preamble_len;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Peak RSS of the waited-for children so far, KiB.
fn children_max_rss_kib() -> i64 {
    // SAFETY: getrusage fills the zeroed struct it is given.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut u);
        u.ru_maxrss
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is taken.
    let mib = env("DPLOG_CAT_BENCH_MIB", 1024);
    let runs = env("DPLOG_CAT_BENCH_RUNS", 3).max(1);
    let dir = std::env::var_os("DPLOG_CAT_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let path = dir.join(format!("dplog-cat-bench-{}.bin", std::process::id()));

    // 1024 distinct sessions (creates and deletes), repeated.
    let mut f = FormatSpec {
        kind: Format::Binary,
        ..Default::default()
    }
    .nat_formatter()
    .unwrap();
    let mut block = Vec::new();
    let t0 = 1_767_225_600_000_000_000u64;
    for i in 0..1024u32 {
        let r = Nat44SessionRecord {
            timestamp_ns: t0 + u64::from(i) * 1_000_000,
            nat_event: if i % 2 == 0 { 4 } else { 5 },
            protocol: 6,
            src_addr: 0x0A00_0000 | i,
            src_port: 40_000 + i as u16,
            post_nat_src_addr: 0xC633_6400 | (i & 0xff),
            post_napt_src_port: 1024 + i as u16,
            dst_addr: 0xCB00_7105,
            dst_port: 443,
            ..Default::default()
        };
        f.format(&NatRecord::from(r), &mut block);
    }
    let pre = preamble_len(&block);
    let body = &block[pre..];
    let reps = ((mib << 20) as usize / body.len()).max(1);
    let records = reps as u64 * 1024;
    {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        w.write_all(&block[..pre]).unwrap();
        for _ in 0..reps {
            w.write_all(body).unwrap();
        }
        w.flush().unwrap();
    }
    let bytes = std::fs::metadata(&path).unwrap().len();
    println!(
        "dplog-cat binary -> json: {records} records, {:.1} MiB log",
        bytes as f64 / (1 << 20) as f64
    );
    let mut best = f64::MAX;
    for run in 0..runs {
        let start = Instant::now();
        let st = Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
            .args(["--format", "json"])
            .arg(&path)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        let secs = start.elapsed().as_secs_f64();
        assert!(st.success(), "dplog-cat failed: {st}");
        best = best.min(secs);
        println!(
            "run {run}: {secs:.3} s, {:.0} records/s, {:.0} MiB/s, peak RSS {} KiB",
            records as f64 / secs,
            bytes as f64 / (1 << 20) as f64 / secs,
            children_max_rss_kib()
        );
    }
    println!(
        "best: {:.0} records/s ({best:.3} s), peak RSS {} KiB",
        records as f64 / best,
        children_max_rss_kib()
    );
    let _ = std::fs::remove_file(&path);
}
