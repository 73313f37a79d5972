//! The reference NAT44 end to end, swept two ways:
//!
//! 1. **pps against new-session share**, logging off and on. For each share
//!    in `SHARES`, the `nat` bench's workload (65,536 preloaded 64-byte
//!    frames through a fresh `Nat44`, bursts of 32, every session ended)
//!    runs with records discarded (`RingLog::new(None)`, the
//!    `--no-logging` baseline) and into a dplog ring (default 16384
//!    slots, `block` policy, publish once per burst) formatted as text into
//!    a file, alternately, `REPS` times each. The best run of each is kept
//!    (the least disturbed by the rest of the machine). Plot:
//!    `benches/nat_pps.svg`.
//! 2. **A VPP-style handoff sweep**: ring size 64 … 65536 against pps and
//!    drops, end to end, at 100 % new sessions (two records per packet at
//!    the end, the most pressure on the ring) under `drop_newest`, so a
//!    ring too small for the consumer's hiccups shows as drops rather than
//!    as a stalled worker. Plot: `benches/nat_ring_sweep.svg`.
//!
//! The worker (this thread) is pinned to CPU 0, the consumer to CPU 1.
//! `cargo bench -p dplog-benches --bench nat_sweep` (about 30 s;
//! `DPLOG_SWEEP_REPS` sets the runs per point, default 25;
//! `DPLOG_SWEEP_SHARES=0.1,0.1` runs only those shares, without the ring
//! sweep and plots; `DPLOG_SWEEP_BUSY_PEER=1` adds an "off, CPU 1 busy"
//! run to each point; `DPLOG_SWEEP_LOG_DIR` puts the log files there).

use std::path::Path;
use std::time::{Duration, Instant};

use dplog::config::FormatConfig;
use dplog::sinks::FileSink;
use dplog::{Backpressure, Logger, LoggerConfig};
use dplog_benches::{check_two_cpus, pin, CONSUMER_CPU, PRODUCER_CPU};
use dplog_nat::{NatProducer, RingLog, NAT_BURST};
use dplog_schema_nat::NatRecord;
use plotters::prelude::*;

#[path = "common/nat_workload.rs"]
mod nat_workload;
use nat_workload::{engine, preload, translate, FRAMES};

/// New-session shares of the first sweep.
const SHARES: [f64; 8] = [0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0];
/// Ring sizes of the second sweep.
const RING_SIZES: [usize; 11] = [
    64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536,
];

/// Shares to sweep: `DPLOG_SWEEP_SHARES` (comma-separated fractions), else
/// [`SHARES`].
fn shares() -> Vec<f64> {
    std::env::var("DPLOG_SWEEP_SHARES")
        .ok()
        .map(|v| {
            v.split(',')
                .map(|x| x.trim().parse().expect("DPLOG_SWEEP_SHARES: fractions"))
                .collect()
        })
        .unwrap_or_else(|| SHARES.to_vec())
}

/// A thread pinned to the consumer's CPU that keeps it busy (integer work
/// in registers, no memory traffic) while `busy` is set: the "off, other
/// core busy" peer of `DPLOG_SWEEP_BUSY_PEER=1`, which separates the cost
/// of logging from the cost of any work on the second vCPU (on a VM the
/// two may share a physical core or memory path).
fn busy_peer(
    busy: std::sync::Arc<std::sync::atomic::AtomicBool>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    use std::sync::atomic::Ordering;
    std::thread::spawn(move || {
        pin(CONSUMER_CPU);
        let mut x = 1u64;
        // Relaxed: flags only, no data is handed over.
        while !stop.load(Ordering::Relaxed) {
            if busy.load(Ordering::Relaxed) {
                for _ in 0..1000 {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            } else {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    })
}

fn reps() -> usize {
    std::env::var("DPLOG_SWEEP_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25)
        .max(1)
}

/// Best (shortest) time of `reps` runs of the workload at `share`, logging
/// into `producer` (or nowhere).
fn best_run(
    arena: &[u8],
    meta: &[(u64, usize)],
    reps: usize,
    mut producer: Option<&mut NatProducer>,
) -> Duration {
    let mut best = Duration::MAX;
    for _ in 0..reps {
        let (nat, mut a) = (engine(), arena.to_vec());
        let t0 = Instant::now();
        let nat = translate(
            nat,
            &mut a,
            meta,
            &mut RingLog::new(producer.as_deref_mut()),
        );
        best = best.min(t0.elapsed());
        drop(nat);
    }
    best
}

/// A logger writing text to `path` with `capacity` slots under `policy`.
fn logger(path: &Path, capacity: usize, policy: Backpressure) -> Logger<NatRecord> {
    let config = LoggerConfig {
        ring_capacity: capacity,
        backpressure: policy,
        consumer_cpu: Some(CONSUMER_CPU),
        publish_every: NAT_BURST,
        schemas: dplog::nat::table(),
        ..LoggerConfig::default()
    };
    let formatter = FormatConfig::default()
        .nat_formatter()
        .expect("text formatter");
    let sink = FileSink::open(path).expect("open file sink");
    Logger::start(config, formatter, sink).expect("start logger")
}

struct SharePoint {
    share: f64,
    off_mpps: f64,
    on_mpps: f64,
    records: u64,
}

struct RingPoint {
    cap: usize,
    mpps: f64,
    produced: u64,
    dropped: u64,
}

fn main() {
    check_two_cpus();
    pin(PRODUCER_CPU);
    let reps = reps();
    // The log files' directory: a temporary one under $DPLOG_SWEEP_LOG_DIR
    // (e.g. /dev/shm, to take disk writeback out), else under the system's.
    let dir = match std::env::var_os("DPLOG_SWEEP_LOG_DIR") {
        Some(d) => tempfile::tempdir_in(d),
        None => tempfile::tempdir(),
    }
    .expect("temp dir");
    let mpps = |d: Duration| FRAMES as f64 / d.as_secs_f64() / 1e6;

    let with_peer = std::env::var_os("DPLOG_SWEEP_BUSY_PEER").is_some();
    let busy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let peer = with_peer.then(|| busy_peer(busy.clone(), stop.clone()));
    println!("nat_sweep: pps against new-session share ({reps} runs per point, best kept)");
    println!(
        "{:>7} {:>9} {:>9} {:>8} {:>12}{}",
        "share",
        "off Mpps",
        "on Mpps",
        "cost %",
        "records/run",
        if with_peer {
            "   off+busy CPU1 Mpps, cost %"
        } else {
            ""
        }
    );
    let mut shares = Vec::new();
    for share in self::shares() {
        let (arena, meta) = preload(share);
        let path = dir.path().join("share.log");
        let log = logger(&path, dplog::DEFAULT_RING_CAPACITY, Backpressure::Block);
        let mut producer = NatProducer::Local(log.producer().expect("producer"));
        // Off and on runs alternate, so both see the same machine.
        let (mut off, mut on, mut off_busy) = (Duration::MAX, Duration::MAX, Duration::MAX);
        for _ in 0..reps {
            off = off.min(best_run(&arena, &meta, 1, None));
            on = on.min(best_run(&arena, &meta, 1, Some(&mut producer)));
            if with_peer {
                // Relaxed: a flag for the peer thread.
                busy.store(true, std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
                off_busy = off_busy.min(best_run(&arena, &meta, 1, None));
                busy.store(false, std::sync::atomic::Ordering::Relaxed);
            }
        }
        drop(producer);
        let st = log
            .shutdown()
            .unwrap_or_else(|(_, e)| panic!("shutdown: {e}"));
        assert_eq!(
            (st.dropped_full, st.written_records),
            (0, st.produced),
            "block policy loses nothing"
        );
        let _ = std::fs::remove_file(&path);
        let p = SharePoint {
            share,
            off_mpps: mpps(off),
            on_mpps: mpps(on),
            records: st.produced / reps as u64,
        };
        let peer_cols = if with_peer {
            format!(
                "   {:>9.2} {:>6.1}",
                mpps(off_busy),
                100.0 * (1.0 - mpps(off_busy) / p.off_mpps)
            )
        } else {
            String::new()
        };
        println!(
            "{:>6.1}% {:>9.2} {:>9.2} {:>8.1} {:>12}{peer_cols}",
            share * 100.0,
            p.off_mpps,
            p.on_mpps,
            100.0 * (1.0 - p.on_mpps / p.off_mpps),
            p.records
        );
        shares.push(p);
    }

    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(h) = peer {
        h.join().expect("busy peer");
    }
    if std::env::var_os("DPLOG_SWEEP_SHARES").is_some() {
        // A partial sweep: no ring sweep, no plots.
        return;
    }
    println!();
    println!("nat_sweep: ring size against pps and drops, 100 % new sessions, drop_newest");
    println!(
        "{:>7} {:>9} {:>10} {:>9} {:>8}",
        "slots", "Mpps", "produced", "dropped", "drop %"
    );
    let (arena, meta) = preload(1.0);
    let mut rings = Vec::new();
    for cap in RING_SIZES {
        let path = dir.path().join("ring.log");
        let log = logger(&path, cap, Backpressure::Drop);
        let mut producer = NatProducer::Local(log.producer().expect("producer"));
        let best = best_run(&arena, &meta, reps, Some(&mut producer));
        drop(producer);
        let st = log
            .shutdown()
            .unwrap_or_else(|(_, e)| panic!("shutdown: {e}"));
        assert_eq!(st.produced, st.written_records + st.dropped_full);
        let _ = std::fs::remove_file(&path);
        let p = RingPoint {
            cap,
            mpps: mpps(best),
            produced: st.produced,
            dropped: st.dropped_full,
        };
        println!(
            "{:>7} {:>9.2} {:>10} {:>9} {:>8.2}",
            cap,
            p.mpps,
            p.produced,
            p.dropped,
            100.0 * p.dropped as f64 / p.produced.max(1) as f64
        );
        rings.push(p);
    }
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/");
    plot_shares(&format!("{root}nat_pps.svg"), &shares).expect("plot nat_pps.svg");
    plot_rings(&format!("{root}nat_ring_sweep.svg"), &rings).expect("plot nat_ring_sweep.svg");
    println!("\nplots: benches/nat_pps.svg, benches/nat_ring_sweep.svg");
}

fn plot_shares(path: &str, pts: &[SharePoint]) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (800, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    let max = pts.iter().map(|p| p.off_mpps).fold(1.0, f64::max);
    let mut c = ChartBuilder::on(&root)
        .caption(
            "dplog-nat, one worker: translated Mpps against new-session share",
            ("sans-serif", 16),
        )
        .margin(8)
        .x_label_area_size(32)
        .y_label_area_size(56)
        .build_cartesian_2d(0f64..100f64, 0f64..max * 1.1)?;
    c.configure_mesh()
        .x_desc("packets opening a session (%)")
        .y_desc("Mpps")
        .draw()?;
    c.draw_series(LineSeries::new(
        pts.iter().map(|p| (p.share * 100.0, p.off_mpps)),
        &BLUE,
    ))?
    .label("logging off")
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
    c.draw_series(LineSeries::new(
        pts.iter().map(|p| (p.share * 100.0, p.on_mpps)),
        &RED,
    ))?
    .label("logging on (text file, block)")
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
    c.configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()?;
    root.present()?;
    Ok(())
}

fn plot_rings(path: &str, pts: &[RingPoint]) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let (upper, lower) = root.split_vertically(240);
    let x = 5f64..17f64;
    let max_mpps = pts.iter().map(|p| p.mpps).fold(0.1, f64::max);
    let mut c = ChartBuilder::on(&upper)
        .caption(
            "dplog-nat end to end, 100 % new sessions: Mpps against ring size",
            ("sans-serif", 16),
        )
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(56)
        .build_cartesian_2d(x.clone(), 0f64..max_mpps * 1.1)?;
    c.configure_mesh()
        .x_desc("ring size (log2 slots)")
        .y_desc("Mpps")
        .draw()?;
    c.draw_series(LineSeries::new(
        pts.iter().map(|p| ((p.cap as f64).log2(), p.mpps)),
        &BLUE,
    ))?;
    let drop_pct = |p: &RingPoint| 100.0 * p.dropped as f64 / p.produced.max(1) as f64;
    let max_drop = pts.iter().map(drop_pct).fold(1.0, f64::max);
    let mut c = ChartBuilder::on(&lower)
        .caption("records dropped (drop_newest)", ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(56)
        .build_cartesian_2d(x, 0f64..max_drop * 1.05)?;
    c.configure_mesh()
        .x_desc("ring size (log2 slots)")
        .y_desc("dropped %")
        .draw()?;
    c.draw_series(LineSeries::new(
        pts.iter().map(|p| ((p.cap as f64).log2(), drop_pct(p))),
        &RED,
    ))?;
    root.present()?;
    Ok(())
}
