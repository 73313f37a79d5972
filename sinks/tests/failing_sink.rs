//! A sink that fails for good (a file sink on `/dev/full`, every write
//! ENOSPC) under the lossless `block` policy: the consumer says so on
//! stderr (rate-limited), an optional retry deadline
//! (`sink_retry_timeout_ms`) drops the batches it cannot write as
//! `dropped_sink` so the pipeline moves on, the books balance, and shutdown
//! reports the write error (ENOSPC), not fsync's EINVAL.
//!
//! The consumer prints to the process's stderr, so each scenario runs in a
//! child process (this test binary again, one `#[test]` selected with
//! `--exact`) and the parent reads what it printed.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use dplog_core::{Logger, LoggerConfig, Sink, Stats};
use dplog_sinks::FileSink;

const CHILD_ENV: &str = "DPLOG_FAILING_SINK_CHILD";

/// Runs the `#[test]` named `name` of this binary in a child process and
/// returns its (stdout, stderr); fails if it fails or runs over 60 s.
fn run_child(name: &str) -> (String, String) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{name}: the child stalled for 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{name} failed:\n{stdout}\n{stderr}");
    (stdout, stderr)
}

/// Prints the counters the parent checks, as `STATS k=v ...`.
fn print_stats(s: &Stats, err: &str) {
    // On a line of its own: the harness prints "test <name> ... " first.
    println!(
        "\nSTATS produced={} written={} dropped_sink={} dropped_shutdown={} dropped_full={} retries={}",
        s.produced, s.written_records, s.dropped_sink, s.dropped_shutdown, s.dropped_full, s.sink_retries
    );
    println!("SHUTDOWN_ERROR {err}");
}

fn stat(stdout: &str, key: &str) -> u64 {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("STATS "))
        .unwrap_or_else(|| panic!("no STATS line in {stdout}"));
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        .parse()
        .unwrap()
}

fn shutdown_error(stdout: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("SHUTDOWN_ERROR "))
        .unwrap_or_default()
        .to_string()
}

/// Child of `retry_timeout_drops_batches_and_the_pipeline_moves_on`.
#[test]
fn child_dev_full_with_retry_timeout() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let logger = Logger::start(
        LoggerConfig {
            ring_capacity: 256,
            sink_retry_timeout_ms: Some(300),
            shutdown_timeout_ms: 300,
            ..Default::default()
        },
        SeqLine { line_len: 100 },
        FileSink::open("/dev/full").unwrap(),
    )
    .unwrap();
    // 20 000 lines of 100 B = 2 MB: far more than a batch (256 KiB) plus
    // the ring, so without the retry deadline the producer would block
    // for good on the full device.
    const N: u64 = 20_000;
    let mut p = logger.producer().unwrap();
    let writer = std::thread::spawn(move || {
        for i in 0..N {
            assert!(p.log(rec(0, i)));
        }
    });
    writer.join().unwrap();
    let (s, err) = match logger.shutdown() {
        Ok(s) => (s, String::new()),
        Err((s, e)) => (s, e.to_string()),
    };
    print_stats(&s, &err);
}

#[test]
fn retry_timeout_drops_batches_and_the_pipeline_moves_on() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let (out, err) = run_child("child_dev_full_with_retry_timeout");
    let produced = stat(&out, "produced");
    assert_eq!(produced, 20_000);
    assert_eq!(stat(&out, "written"), 0, "{out}");
    assert_eq!(stat(&out, "dropped_full"), 0, "block policy: {out}");
    let dropped_sink = stat(&out, "dropped_sink");
    // Every batch past the deadline is dropped as `dropped_sink`; only the
    // batch being retried when shutdown began can end as
    // `dropped_shutdown`. The books balance exactly.
    assert!(dropped_sink >= produced / 2, "{out}");
    assert_eq!(
        dropped_sink + stat(&out, "dropped_shutdown"),
        produced,
        "{out}"
    );
    assert!(stat(&out, "retries") >= 1, "{out}");
    // The diagnostic: which sink, the OS error, for how long, what waits,
    // what happens next.
    let diag: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("dplog: sink file /dev/full failing for "))
        .collect();
    assert!(!diag.is_empty(), "no diagnostic on stderr:\n{err}");
    assert!(diag[0].contains("No space left on device"), "{}", diag[0]);
    let (n, b, r) = waiting_counts(diag[0]);
    assert_eq!(n, b + r, "{}", diag[0]);
    assert!(b >= 1, "{}", diag[0]);
    assert!(
        diag[0].contains("sink_retry_timeout_ms = 300"),
        "{}",
        diag[0]
    );
    // Rate-limited: the run lasts well under the 5 s period, so the first
    // report and at most one "past the deadline" report.
    assert!(diag.len() <= 2, "not rate-limited:\n{err}");
    // Shutdown reports the write error, not fsync's EINVAL on a device.
    let e = shutdown_error(&out);
    assert!(e.contains("No space left on device"), "{e}");
    assert!(!e.contains("Invalid argument"), "{e}");
}

/// Child of `without_a_deadline_the_sink_is_retried_and_reported`.
#[test]
fn child_dev_full_retried_forever() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let logger = Logger::start(
        LoggerConfig {
            shutdown_timeout_ms: 300,
            ..Default::default()
        },
        SeqLine { line_len: 100 },
        FileSink::open("/dev/full").unwrap(),
    )
    .unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..1000 {
        assert!(p.log(rec(0, i)));
    }
    drop(p);
    // The consumer keeps retrying the batch: nothing is dropped while it
    // runs (lossless block policy).
    std::thread::sleep(Duration::from_millis(1500));
    let mid = logger.stats();
    assert_eq!(mid.written_records, 0, "{mid:?}");
    assert_eq!(mid.dropped_sink + mid.dropped_shutdown, 0, "{mid:?}");
    assert!(mid.sink_retries >= 3, "{mid:?}");
    let (s, err) = match logger.shutdown() {
        Ok(s) => (s, String::new()),
        Err((s, e)) => (s, e.to_string()),
    };
    print_stats(&s, &err);
}

#[test]
fn without_a_deadline_the_sink_is_retried_and_reported() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let (out, err) = run_child("child_dev_full_retried_forever");
    assert_eq!(stat(&out, "produced"), 1000);
    assert_eq!(stat(&out, "written"), 0);
    assert_eq!(stat(&out, "dropped_sink"), 0, "{out}");
    assert_eq!(stat(&out, "dropped_shutdown"), 1000, "{out}");
    let diag: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("dplog: sink file /dev/full failing for "))
        .collect();
    // 1.5 s of retries (about ten of them), one report: once per 5 s.
    assert_eq!(diag.len(), 1, "{err}");
    assert!(diag[0].contains("No space left on device"), "{}", diag[0]);
    // "<n> records waiting (<b> in the batch, <r> in rings)": the first
    // failed write may come before the producer logged all 1000.
    let (n, b, r) = waiting_counts(diag[0]);
    assert_eq!(n, b + r, "{}", diag[0]);
    assert!((1..=1000).contains(&n) && b >= 1, "{}", diag[0]);
    assert!(
        diag[0].contains("sink_retry_timeout_ms is not set"),
        "{}",
        diag[0]
    );
    let e = shutdown_error(&out);
    assert!(e.contains("No space left on device"), "{e}");
}

/// `(n, b, r)` of "<n> records waiting (<b> in the batch, <r> in rings)".
fn waiting_counts(line: &str) -> (u64, u64, u64) {
    let num_before = |marker: &str| -> u64 {
        let head = &line[..line
            .find(marker)
            .unwrap_or_else(|| panic!("{marker}: {line}"))];
        let digits: String = head
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_digit())
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        digits
            .parse()
            .unwrap_or_else(|_| panic!("{marker}: {line}"))
    };
    (
        num_before(" records waiting"),
        num_before(" in the batch"),
        num_before(" in rings"),
    )
}

#[test]
fn closing_after_a_failed_write_reports_enospc_not_einval() {
    let mut s = FileSink::open("/dev/full").unwrap();
    let e = s.write_batch(b"p0 s0000000000 x\n").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
    let e = s.close().unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("No space left on device"), "{msg}");
    assert!(msg.contains("/dev/full"), "{msg}");
    assert!(!msg.contains("Invalid argument"), "{msg}");
    assert!(s.close().is_ok(), "a second close is Ok");
    // A write that succeeds after a failure clears it: /dev/null takes
    // everything, fsync's EINVAL there is no error.
    let mut s = FileSink::open("/dev/null").unwrap();
    s.write_batch(b"p0 s0000000000 x\n").unwrap();
    s.close().unwrap();
}
