//! Ring-size sweep: which capacity absorbs bursty arrivals against a
//! consumer whose drain rate is limited, so that queueing matters.
//!
//! For every capacity 16, 32, …, 131072 (64-byte `Nat44SessionRecord`,
//! `drop_newest` semantics: `try_push_burst`, the rest counted as dropped):
//! - the producer (CPU 0) offers `OFFERED` records/s on average, in bursts
//!   whose sizes are drawn from {32, 64, …, 4096} (uniform over the
//!   exponent, fixed seed, so every size sees the same arrivals: a
//!   forwarding core's per-poll records up to a session-expiry sweep of a
//!   few thousand), each burst
//!   pushed as fast as the ring takes it, then idle until the schedule says
//!   the next burst arrives;
//! - the consumer (CPU 1) drains with `read_burst(32)` but at most
//!   `DRAIN` records/s (a token bucket on the monotonic clock).
//!
//! Printed per size: offered, delivered (records/s the consumer read),
//! drops and drop %, then the best size: the smallest capacity whose drop
//! rate is within 0.1 percentage points of the lowest drop rate seen
//! (more slots past that point only cost memory and cache). The curve is
//! written to `benches/ring_sweep.svg` (plotters).
//!
//! `cargo bench -p dplog-benches --bench ring_sweep` (about 6 s;
//! `DPLOG_SWEEP_MS` sets the time per size, default 400).

use std::hint::spin_loop;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dplog::ring;
use dplog_benches::{nat44, pin, CONSUMER_CPU, PRODUCER_CPU};
use dplog_schema_nat::{Nat44SessionRecord, NatEvent};
use plotters::prelude::*;

/// Average offered rate, records/s (modest, so that the consumer's drain
/// limit, not CPU contention on a shared machine, sets the drain rate).
const OFFERED: f64 = 2e6;
/// Consumer drain limit, records/s (25 % above the average offered rate).
const DRAIN: f64 = 2.5e6;
/// A size is "good enough" when its drop rate is within this many
/// percentage points of the lowest seen.
const TOLERANCE_PP: f64 = 0.1;

struct Point {
    cap: usize,
    offered: u64,
    delivered: u64,
    dropped: u64,
    secs: f64,
}

fn run(cap: usize, dur: Duration) -> Point {
    let (mut p, mut c) = ring::<Nat44SessionRecord>(cap).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop_c = stop.clone();
    let consumer = std::thread::spawn(move || {
        pin(CONSUMER_CPU);
        let t0 = Instant::now();
        let mut taken = 0u64;
        let mut sum = 0u64;
        loop {
            // Token bucket: at most DRAIN × elapsed records so far.
            let allowed = (t0.elapsed().as_secs_f64() * DRAIN) as u64;
            let budget = allowed.saturating_sub(taken).min(32) as usize;
            let k = if budget > 0 {
                c.read_burst(budget, |r| sum = sum.wrapping_add(r.timestamp_ns))
            } else {
                0
            };
            taken += k as u64;
            // Acquire pairs with the producer's Release store of `stop`.
            if k == 0 && stop_c.load(Ordering::Acquire) && c.is_empty() {
                break;
            }
            if k == 0 {
                spin_loop();
            }
        }
        (taken, sum)
    });
    pin(PRODUCER_CPU);
    let template = nat44(7, NatEvent::Nat44SessionCreate, 0);
    let mut burst = vec![template; 8192];
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let (mut offered, mut dropped, mut seq) = (0u64, 0u64, 0u64);
    let t0 = Instant::now();
    let mut due = 0.0f64; // seconds since t0 when the next burst arrives
    while t0.elapsed() < dur {
        let mut now = t0.elapsed().as_secs_f64();
        while now < due {
            spin_loop();
            now = t0.elapsed().as_secs_f64();
        }
        // A producer descheduled by another process (the machine is
        // shared) must not replay the missed schedule as one giant burst:
        // arrivals more than 1 ms late are re-anchored to now (a stalled
        // forwarding core produces nothing while stalled).
        if now > due + 1e-3 {
            due = now;
        }
        // xorshift64*: burst of 32 << (0..=7) records.
        rng ^= rng >> 12;
        rng ^= rng << 25;
        rng ^= rng >> 27;
        let n = 32usize << (rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 61);
        for r in burst[..n].iter_mut() {
            r.timestamp_ns = seq;
            seq += 1;
        }
        let mut done = 0;
        // Push as fast as the ring takes it; what does not fit on the
        // first full try is dropped (drop_newest).
        while done < n {
            let k = p.try_push_burst(&burst[done..n]);
            if k == 0 {
                break;
            }
            done += k;
        }
        offered += n as u64;
        dropped += (n - done) as u64;
        due += n as f64 / OFFERED;
    }
    let secs = t0.elapsed().as_secs_f64();
    // Release pairs with the consumer's Acquire load.
    stop.store(true, Ordering::Release);
    let (taken, _) = consumer.join().expect("consumer thread");
    assert_eq!(taken + dropped, offered, "accounting");
    Point {
        cap,
        offered,
        delivered: taken,
        dropped,
        secs,
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing
    // useful either: run a short sweep then.
    let quick = std::env::args().any(|a| a == "--test" || a == "--quick");
    let ms: u64 = std::env::var("DPLOG_SWEEP_MS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if quick { 20 } else { 400 });
    let sizes: Vec<usize> = (4..=17).map(|e| 1usize << e).collect();
    println!(
        "ring_sweep: 64-byte records, offered {:.1} M/s in bursts of 32..4096, drain limit {:.1} M/s, {ms} ms per size",
        OFFERED / 1e6,
        DRAIN / 1e6
    );
    println!(
        "{:>8} {:>12} {:>12} {:>12} {:>9}",
        "size", "offered/s", "delivered/s", "dropped", "drop %"
    );
    let mut pts = Vec::new();
    for &cap in &sizes {
        let p = run(cap, Duration::from_millis(ms));
        println!(
            "{:>8} {:>12.0} {:>12.0} {:>12} {:>9.4}",
            p.cap,
            p.offered as f64 / p.secs,
            p.delivered as f64 / p.secs,
            p.dropped,
            100.0 * p.dropped as f64 / p.offered as f64
        );
        pts.push(p);
    }
    let pct = |p: &Point| 100.0 * p.dropped as f64 / p.offered.max(1) as f64;
    let min = pts.iter().map(pct).fold(f64::INFINITY, f64::min);
    let best = pts
        .iter()
        .find(|p| pct(p) <= min + TOLERANCE_PP)
        .expect("at least one size");
    println!(
        "best ring size: {} (drop rate {:.4} %, lowest seen {:.4} %)",
        best.cap,
        pct(best),
        min
    );
    if !quick {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/ring_sweep.svg");
        match plot(path, &pts, best.cap) {
            Ok(()) => println!("wrote {path}"),
            Err(e) => eprintln!("warning: cannot write {path}: {e}"),
        }
    }
}

fn plot(path: &str, pts: &[Point], best: usize) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let (upper, lower) = root.split_vertically(240);
    let x = 4f64..17f64;
    let max_drop = pts
        .iter()
        .map(|p| 100.0 * p.dropped as f64 / p.offered.max(1) as f64)
        .fold(0.0, f64::max)
        .max(1.0);
    let mut c = ChartBuilder::on(&upper)
        .caption(
            format!("dplog ring-size sweep (best {best}): drops"),
            ("sans-serif", 16),
        )
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(56)
        .build_cartesian_2d(x.clone(), 0f64..max_drop * 1.05)?;
    c.configure_mesh()
        .x_desc("ring size (log2 slots)")
        .y_desc("dropped %")
        .draw()?;
    c.draw_series(LineSeries::new(
        pts.iter().map(|p| {
            (
                (p.cap as f64).log2(),
                100.0 * p.dropped as f64 / p.offered.max(1) as f64,
            )
        }),
        &RED,
    ))?;
    let max_thr = pts
        .iter()
        .map(|p| p.delivered as f64 / p.secs / 1e6)
        .fold(0.0, f64::max)
        .max(1.0);
    let mut c = ChartBuilder::on(&lower)
        .caption("delivered throughput", ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(56)
        .build_cartesian_2d(x, 0f64..max_thr * 1.1)?;
    c.configure_mesh()
        .x_desc("ring size (log2 slots)")
        .y_desc("M records/s")
        .draw()?;
    c.draw_series(LineSeries::new(
        pts.iter()
            .map(|p| ((p.cap as f64).log2(), p.delivered as f64 / p.secs / 1e6)),
        &BLUE,
    ))?;
    root.present()?;
    Ok(())
}
