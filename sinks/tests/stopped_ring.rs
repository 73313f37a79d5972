//! A producer index that breaks the ring protocol (a fill level above the
//! capacity, or an index that moves backwards) stops that ring: what the
//! consumer accepted before is in the file exactly once, nothing after it
//! is read (no duplicates, bounded output), the stop is in the stats, every
//! later record of the producer is refused at once (counted, never a wait)
//! and shutdown returns.
//!
//! The bad index is published through the raw window the C header's
//! inline `dplog_log` writes ([`dplog_core::RawWindow::tail`]).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use dplog_core::{Backpressure, LogProducer, Logger, LoggerConfig, Snapshot, Stats};
use dplog_schema_nat::Nat44SessionRecord;
use dplog_sinks::FileSink;

const CAPACITY: usize = 1024;
const LINE: usize = 32;

fn start(path: &Path) -> Logger<Nat44SessionRecord> {
    Logger::start(
        LoggerConfig {
            ring_capacity: CAPACITY,
            backpressure: Backpressure::Block,
            shutdown_timeout_ms: 20_000,
            ..Default::default()
        },
        SeqLine { line_len: LINE },
        FileSink::open(path).unwrap(),
    )
    .unwrap()
}

/// Waits (generously: a loaded 2-core machine) until `cond` holds for a
/// snapshot of `logger`.
fn wait_for(logger: &Logger<Nat44SessionRecord>, what: &str, cond: impl Fn(&Snapshot) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = logger.snapshot();
        if cond(&s) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Publishes `index` as the producer's ring tail through the inline
/// window layout, as a C writer sharing the producer would.
fn publish_raw(p: &mut LogProducer<Nat44SessionRecord>, index: usize) {
    let w = p
        .open_window(1)
        .expect("the write position is not a sampled index");
    // SAFETY: `tail` points at the ring's live tail index (open_window).
    unsafe { (*w.tail).store(index, std::sync::atomic::Ordering::Release) };
    // SAFETY: the window was just opened and nothing was written into it.
    unsafe { p.close_window(0) };
}

/// Logs `seq` records `from..to` on producer 0; returns how many were
/// accepted.
fn log(p: &mut LogProducer<Nat44SessionRecord>, from: u64, to: u64) -> u64 {
    (from..to).filter(|&i| p.log(rec(0, i))).count() as u64
}

/// Shuts down (which must return) and reads the file: the record lines and
/// the drop counts of the in-band reports.
fn finish(logger: Logger<Nat44SessionRecord>, path: &Path) -> (Stats, Vec<(u16, u64)>, u64, u64) {
    let stats = logger.shutdown().expect("shutdown returns Ok");
    let body = std::fs::read(path).unwrap();
    let (records, reports, reported) = split_reports(&body);
    assert_eq!(
        records.len(),
        parse_lines(&records).len() * LINE,
        "whole lines only"
    );
    (stats, parse_lines(&records), reports, reported)
}

#[test]
fn a_fill_above_the_capacity_stops_the_ring_with_every_earlier_record_on_disk_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("over.log");
    let logger = start(&path);
    let mut p = logger.producer().unwrap();
    assert_eq!(log(&mut p, 0, 1000), 1000);
    wait_for(&logger, "1000 dequeued", |s| s.consumer.dequeued == 1000);
    publish_raw(&mut p, 1000 + CAPACITY + 7);
    wait_for(&logger, "the ring to stop", |s| s.rings[0].stopped);
    // Every later record is refused at once, though the producer's own view
    // of the ring still has room: none is written into a ring the consumer
    // will never read again.
    let accepted = log(&mut p, 1000, 2500);
    assert_eq!(accepted, 0);
    assert!(p.is_stopped());
    drop(p);
    let (stats, got, reports, reported) = finish(logger, &path);

    assert_complete_and_ordered(&got, 1, 1000);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        1000 * LINE as u64 + reports_len(&path),
        "nothing but the 1000 records and the drop reports"
    );
    assert_eq!(stats.rings_stopped, 1);
    assert_eq!(stats.enqueued, 1000, "what the consumer accepted");
    assert_eq!(stats.written_records, 1000);
    assert_eq!(
        stats.dropped_stopped,
        2500 - 1000,
        "every later record refused"
    );
    assert_eq!(stats.produced, 2500);
    assert_eq!(
        stats.produced,
        stats.written_records + stats.dropped() + stats.dropped_sink + stats.dropped_shutdown
    );
    assert_eq!(stats.in_flight(), 0);
    assert!(reports >= 1);
    assert_eq!(reported, 2500 - 1000, "the refused ones, reported in-band");
}

#[test]
fn a_producer_index_that_moves_backwards_stops_the_ring_without_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("back.log");
    let logger = start(&path);
    let mut p = logger.producer().unwrap();
    assert_eq!(log(&mut p, 0, 1000), 1000);
    wait_for(&logger, "1000 dequeued", |s| s.consumer.dequeued == 1000);
    // Behind the consumer: before the check, 900 - 1000 wrapped to a fill
    // of 2^64 - 100 and the consumer wrote stale slots without end.
    publish_raw(&mut p, 900);
    wait_for(&logger, "the ring to stop", |s| s.rings[0].stopped);
    assert_eq!(log(&mut p, 1000, 1010), 0, "refused, though there is room");
    drop(p);
    let (stats, got, reports, reported) = finish(logger, &path);

    assert_complete_and_ordered(&got, 1, 1000);
    assert!(reports >= 1);
    assert_eq!(reported, 10, "the refused ones, reported in-band");
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        1000 * LINE as u64 + reports_len(&path)
    );
    assert_eq!(stats.rings_stopped, 1);
    assert_eq!(
        (stats.enqueued, stats.written_records, stats.dropped_stopped),
        (1000, 1000, 10)
    );
    assert_eq!(stats.produced, 1010);
    assert_eq!(stats.produced, stats.written_records + stats.dropped());
}

#[test]
fn a_stopped_ring_does_not_stop_the_other_rings() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.log");
    let logger = start(&path);
    let mut bad = logger.producer().unwrap();
    let mut good = logger.producer().unwrap();
    assert_eq!(log(&mut bad, 0, 100), 100);
    wait_for(&logger, "100 dequeued", |s| s.consumer.dequeued == 100);
    publish_raw(&mut bad, 100 + CAPACITY + 1);
    wait_for(&logger, "ring 0 to stop", |s| s.rings[0].stopped);
    let good_n = (0..5000).filter(|&i| good.log(rec(1, i))).count();
    assert_eq!(good_n, 5000);
    drop((bad, good));
    let stats = logger.shutdown().expect("shutdown returns Ok");
    let got = parse_lines(&std::fs::read(&path).unwrap());
    for (producer, n) in [(0u16, 100u64), (1, 5000)] {
        let seqs: Vec<u64> = got
            .iter()
            .filter(|r| r.0 == producer)
            .map(|r| r.1)
            .collect();
        assert_eq!(seqs, (0..n).collect::<Vec<_>>(), "producer {producer}");
    }
    assert_eq!(got.len(), 5100);
    assert_eq!(stats.rings_stopped, 1);
    assert_eq!(stats.written_records, 5100);
}

/// Bytes of the in-band drop-report lines in the file at `path`.
fn reports_len(path: &Path) -> u64 {
    std::fs::read(path)
        .unwrap()
        .split(|&b| b == b'\n')
        .filter(|l| l.starts_with(b"dplog: "))
        .map(|l| l.len() as u64 + 1)
        .sum()
}
