//! The live view (`[dataplane] live_stats_ms`): one line per interval on
//! stderr from the workers' published counters and the logger's.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dplog::nat::NatRecord;
use dplog::{Logger, Stats};

use crate::nat::{NatStats, Verdict};
use crate::workers::{translated, LiveCounters};

/// The live view: one line per interval on stderr until `done`.
pub(super) fn monitor(
    live: &LiveCounters,
    logger: Option<&Logger<NatRecord>>,
    done: &AtomicBool,
    every: Duration,
    ring_capacity: usize,
) {
    let start = Instant::now();
    let mut prev = live.total();
    let mut prev_written = 0u64;
    let mut last = Instant::now();
    // Relaxed: see the store in `run_live`.
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50).min(every));
        if last.elapsed() < every {
            continue;
        }
        let dt = last.elapsed().as_secs_f64();
        last = Instant::now();
        let now = live.total();
        let log = logger.map(|l| l.stats()).unwrap_or_default();
        crate::diag!(
            "{}",
            live_line(
                start.elapsed().as_secs_f64(),
                dt,
                &prev,
                &now,
                prev_written,
                &log,
                ring_capacity * live.len()
            )
        );
        prev = now;
        prev_written = log.written_records;
    }
}

/// Formats one line of the live view from two snapshots `dt` seconds
/// apart: pps in and out, live sessions, log records written per second,
/// packets not translated by reason, and ring fill (records in rings /
/// total slots, high-water mark).
pub fn live_line(
    t_s: f64,
    dt: f64,
    prev: &NatStats,
    now: &NatStats,
    prev_written: u64,
    log: &Stats,
    ring_slots: usize,
) -> String {
    use std::fmt::Write;
    let per_s = |a: u64, b: u64| b.saturating_sub(a) as f64 / dt.max(1e-9);
    let mut s = format!(
        "[{t_s:7.1}s] in {:.0} pps  out {:.0} pps  sessions {}  log {:.0} rec/s  ring {}/{} (hw {})",
        per_s(prev.packets, now.packets),
        // Out: translated here, plus hairpins delivered for another worker
        // (their sender counted them as `hairpin_handoff`).
        per_s(
            translated(prev) + prev.hairpin_in_delivered,
            translated(now) + now.hairpin_in_delivered
        ),
        now.sessions_live,
        per_s(prev_written, log.written_records),
        log.enqueued.saturating_sub(log.dequeued),
        ring_slots,
        log.high_water,
    );
    let mut first = true;
    for v in Verdict::all() {
        // A handoff is not a drop: its owner delivers or drops it.
        if v.is_translated() || v == Verdict::HairpinHandoff {
            continue;
        }
        let d = now.count(v).saturating_sub(prev.count(v));
        if d > 0 {
            let _ = write!(
                s,
                "{}{}={d}",
                if first { "  drops " } else { " " },
                v.name()
            );
            first = false;
        }
    }
    let d = now
        .hairpin_in_dropped
        .saturating_sub(prev.hairpin_in_dropped);
    if d > 0 {
        let _ = write!(
            s,
            "{}hairpin_in_dropped={d}",
            if first { "  drops " } else { " " }
        );
    }
    if log.dropped_full > 0 {
        let _ = write!(s, "  log-dropped {}", log.dropped_full);
    }
    s
}
