//! The consumer's paced polling (`LoggerConfig::poll_gap_max_us`) with a
//! record type of the user's own: every record is written once, in
//! per-producer order, while the logger runs (no flush, no shutdown
//! needed) through bursts, trickles and idle gaps; each ring's polls of
//! its producer's index are counted.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dplog_core::*;

/// A user record: a probe result of a load balancer's health checker.
#[repr(C)]
#[derive(Clone, Copy)]
struct Probe {
    header: RecordHeader,
    seq: u64,
    backend: u32,
    rtt_us: u32,
}

impl Record for Probe {
    const SCHEMA_ID: u16 = 901;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

/// Writes each record as its backend and sequence number, 12 bytes.
struct Raw;
impl Formatter<Probe> for Raw {
    fn format(&mut self, r: &Probe, out: &mut Vec<u8>) {
        out.extend_from_slice(&r.backend.to_le_bytes());
        out.extend_from_slice(&r.seq.to_le_bytes());
    }
    fn format_drop_report(&mut self, _: &DropReport, _: &mut Vec<u8>) {}
}

#[derive(Clone, Default)]
struct Collect(Arc<Mutex<Vec<u8>>>);
impl Sink for Collect {
    fn write_batch(&mut self, b: &[u8]) -> Result<Accepted, SinkError> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(Accepted::Delivered)
    }
    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
    fn close(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
}

const PER_PRODUCER: u64 = 20_000;

/// Two producers log `PER_PRODUCER` records each in a mix of tight bursts
/// (up to 200 records, past a 128-slot ring) into rings of
/// `ring_capacity` slots, single records and pauses
/// of 20 µs to 2 ms, so the consumer meets full, lean and empty passes.
/// Waits (60 s bound) until the sink holds them all, then checks order
/// and counters.
fn run(poll_gap_max_us: u64, ring_capacity: usize) {
    let sink = Collect::default();
    let cfg = LoggerConfig {
        ring_capacity,
        batch_bytes: MIN_BATCH_BYTES,
        poll_gap_max_us,
        ..Default::default()
    };
    let logger = Logger::start(cfg, Raw, sink.clone()).unwrap();
    let threads: Vec<_> = (0..2u32)
        .map(|backend| {
            let mut p = logger.producer().unwrap();
            std::thread::spawn(move || {
                let mut seq = 0u64;
                let mut round = 0u64;
                while seq < PER_PRODUCER {
                    round += 1;
                    // Burst sizes 1, 7, 49, 200, 1, ... and a pause after
                    // every third burst, growing with the round.
                    let burst = [1, 7, 49, 200][(round % 4) as usize].min(PER_PRODUCER - seq);
                    for _ in 0..burst {
                        let r = Probe {
                            header: RecordHeader::of::<Probe>(),
                            seq,
                            backend,
                            rtt_us: 0,
                        };
                        assert!(p.log(r), "block policy: never refused");
                        seq += 1;
                    }
                    if round % 3 == 0 {
                        std::thread::sleep(Duration::from_micros(20 * (round % 100)));
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // The records reach the sink while the logger runs: the paced
    // consumer writes its partial batch when the rings go quiet.
    let t = Instant::now();
    while logger.stats().written_records < 2 * PER_PRODUCER {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "records not written while running: {:?}",
            logger.stats()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let snap = logger.snapshot();
    assert_eq!(snap.rings.len(), 2);
    for r in &snap.rings {
        assert_eq!(r.dequeued, PER_PRODUCER);
        // A poll reads at most a ring's worth of records.
        assert!(
            r.tail_polls >= PER_PRODUCER / ring_capacity as u64,
            "ring {}: {} polls for {} records",
            r.id,
            r.tail_polls,
            r.dequeued
        );
    }
    let s = logger.shutdown().unwrap();
    assert_eq!(
        (s.produced, s.written_records),
        (2 * PER_PRODUCER, 2 * PER_PRODUCER)
    );
    let bytes = sink.0.lock().unwrap();
    let mut next = [0u64; 2];
    for c in bytes.chunks_exact(12) {
        let backend = u32::from_le_bytes(c[..4].try_into().unwrap()) as usize;
        let seq = u64::from_le_bytes(c[4..].try_into().unwrap());
        assert_eq!(seq, next[backend], "producer {backend} out of order");
        next[backend] += 1;
    }
    assert_eq!(next, [PER_PRODUCER; 2]);
}

#[test]
fn a_paced_consumer_writes_every_record_once_in_order_while_running() {
    // The default ring: the whole default pause.
    run(DEFAULT_POLL_GAP_MAX_US, DEFAULT_RING_CAPACITY);
    // Rings smaller than a burst of 200 (records wait for room under
    // `block`) and smaller than a whole pause (1024 slots: 1.28 µs).
    run(DEFAULT_POLL_GAP_MAX_US, 128);
    run(DEFAULT_POLL_GAP_MAX_US, 1024);
}

#[test]
fn the_longest_pause_is_honoured_and_pacing_can_be_turned_off() {
    // The bound itself, and no pacing at all, are as lossless.
    run(MAX_POLL_GAP_US, DEFAULT_RING_CAPACITY);
    run(0, 128);
}

#[test]
fn a_pause_above_the_limit_is_refused_with_its_name() {
    let cfg = LoggerConfig {
        poll_gap_max_us: MAX_POLL_GAP_US + 1,
        ..Default::default()
    };
    let e = Logger::start(cfg, Raw, Collect::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid logger config: poll_gap_max_us ([ring] poll_gap_max_us) = 1001 is above the limit of 1000 µs (the longest a record may wait while the consumer is awake)"
    );
}
