//! Consumer runtime: every record written once, in per-producer order, with
//! exact accounting under both backpressure policies.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use dplog_core::*;
use dplog_schema_nat::*;

/// Formats a record as its timestamp and source port, 16 bytes; a drop
/// report as `REPORT` and its count, 16 bytes.
struct Fixed;
const REPORT: u64 = u64::MAX;
impl Formatter<Nat44SessionRecord> for Fixed {
    fn format(&mut self, r: &Nat44SessionRecord, out: &mut Vec<u8>) {
        out.extend_from_slice(&r.timestamp_ns.to_le_bytes());
        out.extend_from_slice(&u64::from(r.src_port).to_le_bytes());
    }
    fn format_drop_report(&mut self, r: &DropReport, out: &mut Vec<u8>) {
        out.extend_from_slice(&REPORT.to_le_bytes());
        out.extend_from_slice(&r.dropped.to_le_bytes());
    }
}

/// Splits decoded output into records and the sum of drop-report counts.
fn split_reports(entries: Vec<(u64, u64)>) -> (Vec<(u64, u64)>, u64, usize) {
    let mut recs = Vec::new();
    let (mut dropped, mut reports) = (0, 0);
    for (a, b) in entries {
        if a == REPORT {
            dropped += b;
            reports += 1;
        } else {
            recs.push((a, b));
        }
    }
    (recs, dropped, reports)
}

/// Collects batches in memory; refuses every batch for good while `fail`
/// is set.
#[derive(Clone, Default)]
struct Collect {
    bytes: Arc<Mutex<Vec<u8>>>,
    batches: Arc<Mutex<usize>>,
    fail: Arc<AtomicBool>,
    closed: Arc<Mutex<bool>>,
}
impl Sink for Collect {
    fn write_batch(&mut self, b: &[u8]) -> Result<Accepted, SinkError> {
        // Relaxed: a test switch; the logger's control channel orders it.
        if self.fail.load(Ordering::Relaxed) {
            return Err(SinkError::Permanent(io::Error::other("injected")));
        }
        self.bytes.lock().unwrap().extend_from_slice(b);
        *self.batches.lock().unwrap() += 1;
        Ok(Accepted::Delivered)
    }
    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
    fn close(&mut self) -> Result<(), SinkError> {
        *self.closed.lock().unwrap() = true;
        Ok(())
    }
}

fn rec(seq: u64, producer: u16) -> Nat44SessionRecord {
    Nat44SessionRecord {
        timestamp_ns: seq,
        src_port: producer,
        ..Default::default()
    }
}

fn decode_raw(bytes: &[u8]) -> Vec<(u64, u64)> {
    bytes
        .chunks_exact(16)
        .map(|c| {
            (
                u64::from_le_bytes(c[..8].try_into().unwrap()),
                u64::from_le_bytes(c[8..].try_into().unwrap()),
            )
        })
        .collect()
}

fn decode(bytes: &[u8]) -> Vec<(u64, u16)> {
    bytes
        .chunks_exact(16)
        .map(|c| {
            (
                u64::from_le_bytes(c[..8].try_into().unwrap()),
                u64::from_le_bytes(c[8..].try_into().unwrap()) as u16,
            )
        })
        .collect()
}

#[test]
fn block_policy_is_lossless_and_fifo_per_producer() {
    const PER: u64 = 100_000;
    let sink = Collect::default();
    let cfg = LoggerConfig {
        ring_capacity: 64,
        ..Default::default()
    };
    let logger = Logger::start(cfg, Fixed, sink.clone()).unwrap();
    let handles: Vec<_> = (0..3u16)
        .map(|p| {
            let mut prod = logger.producer().unwrap();
            std::thread::spawn(move || {
                let mut burst = Vec::new();
                for i in 0..PER {
                    if p == 2 {
                        burst.push(rec(i, p));
                        if burst.len() == 16 {
                            assert_eq!(prod.log_burst(&burst), 16);
                            burst.clear();
                        }
                    } else {
                        assert!(prod.log(rec(i, p)));
                    }
                }
                assert_eq!(prod.log_burst(&burst), burst.len());
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let stats = logger.shutdown().unwrap();
    assert!(*sink.closed.lock().unwrap());
    assert_eq!(stats.rings, 3);
    assert_eq!(stats.produced, 3 * PER);
    assert_eq!(stats.enqueued, 3 * PER);
    assert_eq!(stats.dequeued, 3 * PER);
    assert_eq!(stats.written_records, 3 * PER);
    assert_eq!(stats.written_bytes, 3 * PER * 16);
    assert_eq!(
        stats.dropped_full + stats.dropped_sink + stats.sink_errors,
        0
    );
    assert!(stats.high_water >= 1 && stats.high_water <= 64);
    let got = decode(&sink.bytes.lock().unwrap());
    let mut next = [0u64; 3];
    for (seq, p) in got {
        assert_eq!(seq, next[p as usize], "producer {p} out of order");
        next[p as usize] += 1;
    }
    assert_eq!(next, [PER; 3]);
}

#[test]
fn drop_policy_counts_exactly_what_it_drops() {
    const N: u64 = 200_000;
    let sink = Collect::default();
    let cfg = LoggerConfig {
        ring_capacity: 16,
        backpressure: Backpressure::Drop,
        ..Default::default()
    };
    let logger = Logger::start(cfg, Fixed, sink.clone()).unwrap();
    let mut prod = logger.producer().unwrap();
    let mut accepted = 0;
    for i in 0..N {
        accepted += u64::from(prod.log(rec(i, 0)));
    }
    drop(prod);
    let s = logger.shutdown().unwrap();
    assert_eq!(s.produced, N);
    assert_eq!(s.enqueued, accepted);
    assert_eq!(s.dropped_full, N - accepted);
    assert_eq!(s.written_records + s.dropped_full, s.produced);
    let (got, reported, reports) = split_reports(decode_raw(&sink.bytes.lock().unwrap()));
    assert_eq!(got.len() as u64, accepted);
    assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "order kept");
    // The log itself shows every gap: the in-band reports add up to the
    // drop counter exactly.
    assert!(s.dropped_full > 0, "a 16-slot ring must overflow here");
    assert_eq!(reported, s.dropped_full);
    assert_eq!(reports as u64, s.drop_reports);
    assert!(reports >= 1);
}

#[test]
fn sink_errors_are_counted_as_drops_not_swallowed() {
    let sink = Collect::default();
    sink.fail.store(true, Ordering::Relaxed);
    let logger = Logger::start(LoggerConfig::default(), Fixed, sink).unwrap();
    let mut prod = logger.producer().unwrap();
    for i in 0..1000 {
        assert!(prod.log(rec(i, 0)));
    }
    drop(prod);
    let s = logger.shutdown().unwrap();
    assert_eq!(s.written_records, 0);
    assert_eq!(s.dropped_sink, 1000);
    assert!(s.sink_errors >= 1);
    assert_eq!(
        s.written_records + s.dropped_full + s.dropped_sink,
        s.produced
    );
}

#[test]
fn flush_writes_the_partial_batch() {
    let sink = Collect::default();
    let logger = Logger::start(LoggerConfig::default(), Fixed, sink.clone()).unwrap();
    let mut prod = logger.producer().unwrap();
    for i in 0..10 {
        prod.log(rec(i, 0));
    }
    // The consumer writes a partial batch once it goes idle; flush makes
    // that observable without waiting.
    while logger.stats().dequeued < 10 {
        std::thread::yield_now();
    }
    logger.flush().unwrap();
    assert_eq!(decode(&sink.bytes.lock().unwrap()).len(), 10);
    assert_eq!(logger.stats().written_records, 10);
    drop(prod);
    logger.shutdown().unwrap();
}

#[test]
fn bad_configs_are_errors() {
    let bad = |cfg: LoggerConfig| {
        Logger::start(cfg, Fixed, Collect::default())
            .err()
            .unwrap()
            .to_string()
    };
    let e = bad(LoggerConfig {
        ring_capacity: 1000,
        ..Default::default()
    });
    assert!(e.contains("1000") && e.contains("power of two"), "{e}");
    let e = bad(LoggerConfig {
        batch_bytes: 4096,
        ..Default::default()
    });
    assert!(
        e.contains("batch_bytes ([ring] batch_bytes) = 4096 (4 KiB) is outside"),
        "{e}"
    );
    let e = bad(LoggerConfig {
        burst: 0,
        ..Default::default()
    });
    assert!(e.contains("burst"), "{e}");
    // Past the upper bounds: an error with the memory, not an abort or
    // gigabytes allocated and zeroed.
    let e = bad(LoggerConfig {
        batch_bytes: 1 << 40,
        ..Default::default()
    });
    assert!(
        e.contains("= 1099511627776 (1 TiB) is outside 65536 (64 KiB) to 268435456 (256 MiB)"),
        "{e}"
    );
    let e = bad(LoggerConfig {
        ring_capacity: 1 << 28,
        ..Default::default()
    });
    let slot = std::mem::size_of::<Nat44SessionRecord>();
    assert!(
        e.contains(&format!(
            "= 268435456 slots x {slot} B = {} per ring is above the limit of 16777216 slots",
            dplog_core::runtime::human_bytes((1u128 << 28) * slot as u128)
        )),
        "{e}"
    );
}

#[test]
fn enqueue_to_write_latency_is_sampled_and_plausible() {
    let sink = Collect::default();
    let logger = Logger::start(LoggerConfig::default(), Fixed, sink).unwrap();
    let mut prod = logger.producer().unwrap();
    for i in 0..20_000u64 {
        assert!(prod.log(rec(i, 0)));
        if i % 1000 == 0 {
            // Let the consumer catch up now and then, so batches are written
            // while records keep arriving.
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    drop(prod);
    while logger.stats().written_records < 20_000 {
        std::thread::yield_now();
    }
    let lat = logger.snapshot().latency;
    // One record in SAMPLE_EVERY is sampled.
    let every = dplog_core::ring::SAMPLE_EVERY as u64;
    assert!(lat.samples >= 20_000 / every / 2, "{lat:?}");
    assert!(lat.p50_ns > 0, "{lat:?}");
    assert!(
        lat.p50_ns <= lat.p99_ns && lat.p99_ns <= lat.max_ns,
        "{lat:?}"
    );
    // Everything here is written within seconds, not at the histogram's
    // 60 s ceiling.
    assert!(lat.max_ns < 10_000_000_000, "{lat:?}");
    logger.shutdown().unwrap();
}

/// Refuses its third batch for good after writing the first half of its
/// records, which it reports as kept (as a file on a full disk keeps the
/// whole records it wrote); takes every other batch.
#[derive(Clone, Default)]
struct KeepsHalfOfOne {
    collect: Collect,
    calls: usize,
    kept: Option<Kept>,
}
impl Sink for KeepsHalfOfOne {
    fn write_batch(&mut self, b: &[u8]) -> Result<Accepted, SinkError> {
        self.calls += 1;
        if self.calls == 3 {
            let records = (b.len() / 16) as u64 / 2;
            let bytes = records as usize * 16;
            self.collect.write_batch(&b[..bytes])?;
            self.kept = Some(Kept { bytes, records });
            return Err(SinkError::Permanent(io::Error::other("injected")));
        }
        self.collect.write_batch(b)
    }
    fn kept_of_refused(&mut self, _: &[u8], _: &[std::ops::Range<usize>]) -> Kept {
        self.kept.take().unwrap_or_default()
    }
    fn flush(&mut self) -> Result<(), SinkError> {
        self.collect.flush()
    }
    fn close(&mut self) -> Result<(), SinkError> {
        self.collect.close()
    }
}

/// A batch the sink refuses after keeping part of it: the kept records
/// count as written, the rest as `dropped_sink`, and the next batch starts
/// with an in-band sink drop report whose count is the gap before it.
#[test]
fn a_refused_batch_counts_what_the_sink_kept_and_the_gap_is_reported() {
    let sink = KeepsHalfOfOne::default();
    let out = sink.collect.bytes.clone();
    let cfg = LoggerConfig {
        batch_bytes: MIN_BATCH_BYTES,
        ..Default::default()
    };
    let logger = Logger::start(cfg, Fixed, sink).unwrap();
    let mut prod = logger.producer().unwrap();
    // 16-byte records, 64 KiB batches: at least six batches.
    const N: u64 = 25_000;
    for i in 0..N {
        assert!(prod.log(rec(i, 0)));
    }
    drop(prod);
    let s = logger.shutdown().unwrap();
    let entries = decode_raw(&out.lock().unwrap());
    let (recs, reported, reports) = split_reports(entries.clone());
    assert_eq!(recs.len() as u64, s.written_records, "{s:?}");
    assert!(s.dropped_sink > 0, "{s:?}");
    assert_eq!(s.written_records + s.dropped_sink, N, "{s:?}");
    assert_eq!((reports, reported), (1, s.dropped_sink), "{s:?}");
    assert_eq!(s.drop_reports, 1);
    // The report sits in the gap, right after the last kept record.
    let at = entries.iter().position(|e| e.0 == REPORT).unwrap();
    assert_eq!(entries[at + 1].0 - entries[at - 1].0 - 1, s.dropped_sink);
    assert!(recs.windows(2).all(|w| w[0].0 < w[1].0));
}

/// Records dropped by the sink with no record after them: the drop report
/// still reaches the sink once it takes writes, alone, by shutdown.
#[test]
fn a_sink_drop_with_nothing_after_it_is_still_reported() {
    let sink = Collect::default();
    let (out, fail) = (sink.bytes.clone(), sink.fail.clone());
    fail.store(true, Ordering::Relaxed);
    let logger = Logger::start(LoggerConfig::default(), Fixed, sink).unwrap();
    let mut prod = logger.producer().unwrap();
    for i in 0..100 {
        assert!(prod.log(rec(i, 0)));
    }
    drop(prod);
    let t0 = std::time::Instant::now();
    while logger.stats().dropped_sink < 100 {
        assert!(t0.elapsed() < std::time::Duration::from_secs(60));
        let _ = logger.flush();
        std::thread::yield_now();
    }
    fail.store(false, Ordering::Relaxed);
    let s = logger.shutdown().unwrap();
    assert_eq!((s.written_records, s.dropped_sink), (0, 100), "{s:?}");
    let entries = decode_raw(&out.lock().unwrap());
    assert_eq!(entries, vec![(REPORT, 100)]);
    assert_eq!(s.drop_reports, 1);
}

/// Takes nothing: every write waits `stall` (a receiver that stopped
/// reading, until the sink's own I/O timeout) and fails retryably.
#[derive(Clone)]
struct Stalls {
    stall: std::time::Duration,
    calls: Arc<Mutex<usize>>,
}
impl Sink for Stalls {
    fn write_batch(&mut self, _: &[u8]) -> Result<Accepted, SinkError> {
        *self.calls.lock().unwrap() += 1;
        std::thread::sleep(self.stall);
        Err(SinkError::Retryable(io::Error::new(
            io::ErrorKind::TimedOut,
            "injected stall",
        )))
    }
    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
    fn close(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
}

/// A sink that stalls on every write: once the shutdown deadline has passed
/// and a try failed, the batches still in the rings are counted
/// `dropped_shutdown` without another try each, so the shutdown ends near
/// its deadline instead of one stall per batch later.
#[test]
fn a_stalling_sink_does_not_stretch_the_shutdown_by_one_stall_per_batch() {
    let sink = Stalls {
        stall: std::time::Duration::from_millis(400),
        calls: Arc::default(),
    };
    let calls = sink.calls.clone();
    let cfg = LoggerConfig {
        ring_capacity: 1 << 16,
        batch_bytes: MIN_BATCH_BYTES,
        shutdown_timeout_ms: 200,
        ..Default::default()
    };
    let logger = Logger::start(cfg, Fixed, sink).unwrap();
    let mut prod = logger.producer().unwrap();
    // 16-byte records, 64 KiB batches: 16 batches.
    const N: u64 = 1 << 16;
    for i in 0..N {
        assert!(prod.log(rec(i, 0)));
    }
    drop(prod);
    let t0 = std::time::Instant::now();
    let s = match logger.shutdown() {
        Ok(s) => s,
        Err((s, _)) => s,
    };
    let took = t0.elapsed();
    assert_eq!((s.written_records, s.dropped_shutdown), (0, N), "{s:?}");
    // The try under way and the one that met the deadline (0.2 s), not one
    // per batch (16): counted in tries, not in seconds, so a loaded
    // machine cannot fail it.
    assert!(
        *calls.lock().unwrap() <= 4,
        "{} tries in {took:?}",
        calls.lock().unwrap()
    );
}

#[test]
fn shared_producers_are_lossless_and_fifo_per_thread_under_block() {
    const PER: u64 = 50_000;
    let sink = Collect::default();
    let cfg = LoggerConfig {
        ring_capacity: 64,
        ..Default::default()
    };
    let logger = Logger::start(cfg, Fixed, sink.clone()).unwrap();
    let shared = logger.shared_producer().unwrap();
    let handles: Vec<_> = (0..3u16)
        .map(|p| {
            let mut prod = shared.clone();
            std::thread::spawn(move || {
                for i in 0..PER {
                    if i % 2 == 0 {
                        assert!(prod.log(rec(i, p)));
                    } else {
                        assert_eq!(prod.log_burst(&[rec(i, p)]), 1);
                    }
                }
            })
        })
        .collect();
    drop(shared);
    for h in handles {
        h.join().unwrap();
    }
    let stats = logger.shutdown().unwrap();
    assert_eq!(stats.rings, 1, "one ring shared by three threads");
    assert_eq!(
        (stats.produced, stats.written_records, stats.dropped()),
        (3 * PER, 3 * PER, 0)
    );
    let mut next = [0u64; 3];
    for (seq, p) in decode(&sink.bytes.lock().unwrap()) {
        assert_eq!(seq, next[p as usize], "thread {p} out of order");
        next[p as usize] += 1;
    }
    assert_eq!(next, [PER; 3]);
}

#[test]
fn a_shared_producer_counts_exactly_what_drop_newest_drops() {
    const N: u64 = 100_000;
    let sink = Collect::default();
    let cfg = LoggerConfig {
        ring_capacity: 16,
        backpressure: Backpressure::Drop,
        ..Default::default()
    };
    let logger = Logger::start(cfg, Fixed, sink.clone()).unwrap();
    let mut prod = logger.shared_producer().unwrap();
    let mut accepted = 0;
    for i in 0..N {
        accepted += u64::from(prod.log(rec(i, 0)));
    }
    drop(prod);
    let s = logger.shutdown().unwrap();
    assert_eq!(s.produced, N);
    assert_eq!(s.dropped_full, N - accepted);
    assert_eq!(s.written_records, accepted);
    let (got, reported, _) = split_reports(decode_raw(&sink.bytes.lock().unwrap()));
    assert_eq!(got.len() as u64, accepted);
    assert!(s.dropped_full > 0, "a 16-slot ring must overflow here");
    assert_eq!(reported, s.dropped_full, "in-band reports add up");
}

/// Holds its first batch until released, so a test fills the rings to an
/// exact level.
struct Gate {
    inner: Collect,
    entered: Option<std::sync::mpsc::Sender<()>>,
    release: std::sync::mpsc::Receiver<()>,
}
impl Sink for Gate {
    fn write_batch(&mut self, b: &[u8]) -> Result<Accepted, SinkError> {
        if let Some(tx) = self.entered.take() {
            tx.send(()).unwrap();
            self.release.recv().unwrap();
        }
        self.inner.write_batch(b)
    }
    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
    fn close(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
}

#[test]
fn a_shared_producer_sheds_low_priority_records_between_the_watermarks() {
    let sink = Collect::default();
    let (entered_tx, entered) = std::sync::mpsc::channel();
    let (release, release_rx) = std::sync::mpsc::channel();
    let gate = Gate {
        inner: sink.clone(),
        entered: Some(entered_tx),
        release: release_rx,
    };
    let cfg = LoggerConfig {
        ring_capacity: 16,
        backpressure: Backpressure::Degrade,
        batch_bytes: MIN_BATCH_BYTES,
        idle_sleep_us: 50,
        ..Default::default()
    };
    let logger = Logger::start(cfg, Fixed, gate).unwrap();
    let mut p = logger.shared_producer().unwrap();
    let ev = |i: u64, e: u8| Nat44SessionRecord {
        timestamp_ns: i,
        nat_event: e,
        ..Default::default()
    };
    // The plug: the consumer takes it and waits in the sink.
    assert!(p.log(ev(0, 4)));
    entered
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the consumer reached the sink");
    // 13 creates fill the empty 16-slot ring to its 80 % watermark.
    for i in 1..=13 {
        assert!(p.log(ev(i, 4)), "below the watermark: {i}");
    }
    assert!(!p.log(ev(14, 4)), "a create is shed at the watermark");
    assert!(p.degraded());
    assert!(p.log(ev(15, 5)), "a delete outranks it");
    assert!(!p.log(ev(16, 4)));
    release.send(()).unwrap();
    drop(p);
    let s = logger.shutdown().unwrap();
    assert_eq!(
        (s.produced, s.written_records, s.dropped_degraded),
        (17, 15, 2)
    );
    let (got, reported, _) = split_reports(decode_raw(&sink.bytes.lock().unwrap()));
    let seqs: Vec<u64> = got.iter().map(|r| r.0).collect();
    assert_eq!(seqs, (0..=13).chain([15]).collect::<Vec<_>>());
    assert_eq!(reported, 2);
}

/// Polls `logger`'s counters until `done` holds (a generous bound: the
/// consumer may be slow on a loaded machine).
fn wait_stats(logger: &Logger<Nat44SessionRecord>, what: &str, done: impl Fn(&Stats) -> bool) {
    let t = std::time::Instant::now();
    while !done(&logger.stats()) {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(60),
            "timed out waiting for {what}: {:?}",
            logger.stats()
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// A producer index above the capacity (what two threads sharing one
/// producer publish) stops the ring; every later record, whatever the
/// policy, is refused at once and counted in `dropped_stopped`, so
/// `produced = enqueued + dropped` holds exactly. With an unbounded wait
/// (`block_spins = u32::MAX`), a `block` record that waited would never
/// return.
#[test]
fn a_stopped_ring_refuses_every_later_record_at_once_and_counts_it() {
    for policy in [
        Backpressure::Block,
        Backpressure::Drop,
        Backpressure::Degrade,
    ] {
        let sink = Collect::default();
        let cfg = LoggerConfig {
            ring_capacity: 64,
            backpressure: policy,
            block_spins: u32::MAX,
            ..Default::default()
        };
        let logger = Logger::start(cfg, Fixed, sink.clone()).unwrap();
        let mut prod = logger.producer().unwrap();
        for i in 0..10 {
            assert!(prod.log(rec(i, 0)));
        }
        wait_stats(&logger, "the 10 records read", |s| s.dequeued == 10);
        prod.publish_raw_index(10 + 64 + 1);
        wait_stats(&logger, "the ring stopped", |s| s.rings_stopped == 1);
        let refused = (10..60).filter(|&i| !prod.log(rec(i, 0))).count();
        assert_eq!(refused, 50, "{policy:?}");
        let burst: Vec<_> = (60..70).map(|i| rec(i, 0)).collect();
        assert_eq!(prod.log_burst(&burst), 0, "{policy:?}");
        let s = logger.stats();
        assert_eq!(
            (s.produced, s.enqueued, s.dropped_stopped, s.dropped()),
            (70, 10, 60, 60),
            "{policy:?}: {s:?}"
        );
        drop(prod);
        let s = logger.shutdown().unwrap();
        assert_eq!(
            (
                s.produced,
                s.written_records,
                s.dropped_stopped,
                s.in_flight()
            ),
            (70, 10, 60, 0),
            "{policy:?}: {s:?}"
        );
        let (got, reported, _) = split_reports(decode_raw(&sink.bytes.lock().unwrap()));
        assert_eq!(got, (0..10).map(|i| (i, 0)).collect::<Vec<_>>());
        assert_eq!(
            reported, 60,
            "{policy:?}: the refused records reported in-band"
        );
    }
}
