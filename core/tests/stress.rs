//! Stress: several producers push sequence-numbered, checksummed records
//! through one logger under each backpressure policy, against a sink that
//! is slow on purpose, and the output is checked record by record: no
//! loss (block), no duplicate, no torn record, per-producer FIFO, and the
//! accounting closes: produced = written + dropped, with the in-band drop
//! reports adding up to the drops of each ring.
//!
//! Duration: `DPLOG_STRESS_SECS` seconds per policy (default 1, so CI
//! spends ~3 s here); `DPLOG_STRESS_SECS=4` gives the 12 s run recorded in
//! benches/RESULTS.md.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dplog_core::*;
use dplog_schema_nat::*;

const PRODUCERS: u16 = 3;

fn checksum(p: u16, seq: u64) -> u64 {
    // splitmix64 of (producer, seq).
    let mut z = seq ^ (u64::from(p) << 48) ^ 0x9E37_79B9_7F4A_7C15;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Record `seq` of producer `p`: deletes on odd sequence numbers (high
/// priority under `degrade`), creates on even ones; every field derived
/// from (p, seq) so a torn copy fails the check.
fn rec(p: u16, seq: u64) -> Nat44SessionRecord {
    let c = checksum(p, seq);
    Nat44SessionRecord {
        timestamp_ns: seq,
        src_port: p,
        nat_event: if seq % 2 == 1 { 5 } else { 4 },
        src_addr: c as u32,
        post_nat_src_addr: (c >> 32) as u32,
        dst_addr: !(c as u32),
        initiator_octets: c,
        responder_octets: !c,
        initiator_packets: seq as u32,
        ..Default::default()
    }
}

/// 32 bytes per record: producer, seq, and two checks over the whole
/// record; a drop report is `u64::MAX`, ring id, count.
struct Check;
impl Formatter<Nat44SessionRecord> for Check {
    fn format(&mut self, r: &Nat44SessionRecord, out: &mut Vec<u8>) {
        let want = rec(r.src_port, r.timestamp_ns);
        let whole = (r == &want) as u64;
        out.extend_from_slice(&u64::from(r.src_port).to_le_bytes());
        out.extend_from_slice(&r.timestamp_ns.to_le_bytes());
        out.extend_from_slice(&r.initiator_octets.to_le_bytes());
        out.extend_from_slice(&whole.to_le_bytes());
    }
    fn format_drop_report(&mut self, r: &DropReport, out: &mut Vec<u8>) {
        out.extend_from_slice(&u64::MAX.to_le_bytes());
        out.extend_from_slice(&u64::from(r.ring).to_le_bytes());
        out.extend_from_slice(&r.dropped.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
    }
}

/// Keeps every byte; sleeps `delay` per batch so rings fill up.
#[derive(Clone)]
struct Slow {
    bytes: Arc<Mutex<Vec<u8>>>,
    delay: Duration,
}
impl Sink for Slow {
    fn write_batch(&mut self, b: &[u8]) -> Result<Accepted, SinkError> {
        std::thread::sleep(self.delay);
        self.bytes.lock().unwrap().extend_from_slice(b);
        Ok(Accepted::Delivered)
    }
    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
    fn close(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
}

fn secs() -> f64 {
    std::env::var("DPLOG_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0)
}

fn stress(policy: Backpressure) {
    let sink = Slow {
        bytes: Arc::new(Mutex::new(Vec::new())),
        delay: Duration::from_micros(300),
    };
    let cfg = LoggerConfig {
        ring_capacity: 256,
        backpressure: policy,
        batch_bytes: MIN_BATCH_BYTES,
        block_spins: 64,
        ..Default::default()
    };
    let logger = Logger::start(cfg, Check, sink.clone()).unwrap();
    let until = Instant::now() + Duration::from_secs_f64(secs());
    let handles: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let mut prod = logger.producer().unwrap();
            std::thread::spawn(move || {
                let mut seq = 0u64;
                let mut accepted = 0u64;
                let mut burst = Vec::with_capacity(8);
                while Instant::now() < until {
                    for _ in 0..64 {
                        if p == 0 {
                            // Producer 0 uses bursts of 8.
                            burst.clear();
                            burst.extend((seq..seq + 8).map(|s| rec(p, s)));
                            accepted += prod.log_burst(&burst) as u64;
                            seq += 8;
                        } else {
                            accepted += u64::from(prod.log(rec(p, seq)));
                            seq += 1;
                        }
                    }
                }
                (seq, accepted)
            })
        })
        .collect();
    let sent: Vec<(u64, u64)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let snap = logger.snapshot();
    let s = logger.shutdown().unwrap();

    // Decode the output.
    let bytes = sink.bytes.lock().unwrap();
    let mut last: HashMap<u64, u64> = HashMap::new();
    let mut got = [0u64; PRODUCERS as usize];
    let mut lost_deletes = [0u64; PRODUCERS as usize];
    let mut reported = [0u64; PRODUCERS as usize];
    for c in bytes.chunks_exact(32) {
        let w = |i: usize| u64::from_le_bytes(c[i * 8..i * 8 + 8].try_into().unwrap());
        if w(0) == u64::MAX {
            reported[w(1) as usize] += w(2);
            continue;
        }
        let (p, seq) = (w(0), w(1));
        assert_eq!(w(3), 1, "torn record: producer {p} seq {seq}");
        assert_eq!(w(2), checksum(p as u16, seq));
        if let Some(&prev) = last.get(&p) {
            assert!(
                seq > prev,
                "producer {p}: {seq} after {prev} (dup or reorder)"
            );
            // Deletes are the odd sequence numbers skipped over.
            lost_deletes[p as usize] += (prev + 1..seq).filter(|s| s % 2 == 1).count() as u64;
        } else {
            lost_deletes[p as usize] += (0..seq).filter(|s| s % 2 == 1).count() as u64;
        }
        last.insert(p, seq);
        got[p as usize] += 1;
    }
    assert_eq!(bytes.len() % 32, 0);

    let produced: u64 = sent.iter().map(|x| x.0).sum();
    let accepted: u64 = sent.iter().map(|x| x.1).sum();
    assert_eq!(s.produced, produced);
    assert_eq!(s.enqueued, accepted);
    assert_eq!(s.written_records, accepted, "every enqueued record written");
    assert_eq!(
        s.produced,
        s.written_records + s.dropped(),
        "accounting closes"
    );
    assert_eq!(got.iter().sum::<u64>(), s.written_records);
    assert_eq!(snap.rings.len(), PRODUCERS as usize);
    for p in 0..PRODUCERS as usize {
        assert_eq!(got[p], sent[p].1, "producer {p}: written = accepted");
        // Ring p belongs to producer p (registration order).
        assert_eq!(
            reported[p],
            sent[p].0 - sent[p].1,
            "ring {p}: in-band reports = drops"
        );
    }
    match policy {
        Backpressure::Block => {
            assert_eq!(s.dropped(), 0);
            for p in 0..PRODUCERS as usize {
                assert_eq!(last[&(p as u64)] + 1, sent[p].0, "block is lossless");
            }
        }
        Backpressure::Drop => {
            assert!(s.dropped_full > 0, "the slow sink must overflow 256 slots");
            assert_eq!(s.dropped_degraded, 0);
        }
        Backpressure::Degrade => {
            assert!(s.dropped_degraded > 0, "degrade must shed creates");
            // Deletes are only ever lost to a completely full ring.
            assert!(lost_deletes.iter().sum::<u64>() <= s.dropped_full);
        }
    }
    assert!(s.high_water <= 256);
    eprintln!(
        "{policy:?}: {:.1} s, produced {} written {} dropped full {} degraded {} reports {}",
        secs(),
        s.produced,
        s.written_records,
        s.dropped_full,
        s.dropped_degraded,
        s.drop_reports
    );
}

#[test]
fn stress_block() {
    stress(Backpressure::Block);
}

#[test]
fn stress_drop_newest() {
    stress(Backpressure::Drop);
}

#[test]
fn stress_degrade() {
    stress(Backpressure::Degrade);
}
