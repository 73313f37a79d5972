//! Two workers and the reorder window: the log is in time order. Without
//! the window the consumer interleaves the workers' rings burst by burst
//! and the log is not.

use std::path::Path;
use std::process::Command;

/// Runs dplog-nat on 200,000 synthetic packets with two workers and
/// `ring` as the `[ring]` table; returns the log's line times (the
/// leading RFC 3339 stamp, fixed width, so they sort as strings).
fn run(dir: &Path, name: &str, ring: &str) -> Vec<String> {
    let cfg = dir.join(format!("{name}.toml"));
    std::fs::write(
        &cfg,
        format!("[ring]\n{ring}\n[synthetic]\npackets = 200000\n"),
    )
    .unwrap();
    let log = dir.join(format!("{name}.log"));
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-nat"))
        .arg("--workers")
        .arg("2")
        .arg("--config")
        .arg(&cfg)
        .arg("--output")
        .arg(&log)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&log).unwrap();
    text.lines()
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect()
}

fn out_of_order(times: &[String]) -> usize {
    times.windows(2).filter(|w| w[0] > w[1]).count()
}

#[test]
fn two_workers_with_the_window_write_a_time_ordered_log() {
    let dir = tempfile::tempdir().unwrap();
    // 1 ms of capture time; a worker silent for 10 s of wall time (this
    // test shares a loaded machine) would no longer hold the other back.
    let on = run(
        dir.path(),
        "on",
        "reorder_window_ns = 1000000\nreorder_idle_ms = 10000",
    );
    // 10 % of 200,000 packets open a session: a create and a delete each.
    assert_eq!(on.len(), 40_000);
    assert_eq!(out_of_order(&on), 0);
    assert!(on[0].starts_with("2026-01-01T00:00:00."), "{}", on[0]);

    let off = run(dir.path(), "off", "");
    assert_eq!(off.len(), 40_000);
    assert!(out_of_order(&off) > 0);
    // The same records, merely ordered.
    let (mut a, mut b) = (on.clone(), off);
    a.sort();
    b.sort();
    assert_eq!(a, b);
}
