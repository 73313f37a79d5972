//! The reorder window: with it on, records of several rings come out in
//! event-time order; with it off, per-ring order only.
//!
//! To make the interleaving deterministic the sink holds the consumer in
//! its first `write_batch` (a primer record) while the test fills three
//! rings, then lets it go: the consumer finds every record already queued.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};

use dplog_core::*;
use dplog_schema_nat::*;

struct Stamp;
impl Formatter<Nat44SessionRecord> for Stamp {
    fn format(&mut self, r: &Nat44SessionRecord, out: &mut Vec<u8>) {
        out.extend_from_slice(&r.timestamp_ns.to_le_bytes());
        out.extend_from_slice(&u64::from(r.src_port).to_le_bytes());
    }
}

#[derive(Clone)]
struct Gated {
    bytes: Arc<Mutex<Vec<u8>>>,
    gate: Arc<Mutex<Option<Receiver<()>>>>,
    entered: Sender<()>,
}
impl Sink for Gated {
    fn write_batch(&mut self, b: &[u8]) -> Result<Accepted, SinkError> {
        let gate = self.gate.lock().unwrap().take();
        if let Some(g) = gate {
            self.entered.send(()).unwrap();
            g.recv().unwrap();
        }
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

/// Three rings; ring p gets stamps p, p+3, p+6, … (600 each), pushed ring
/// by ring while the consumer is held. Returns (stamp, ring) in output
/// order, primer excluded.
fn run(window: Option<u64>) -> Vec<(u64, u64)> {
    let (open_tx, open_rx) = channel();
    let (entered_tx, entered_rx) = channel();
    let sink = Gated {
        bytes: Arc::new(Mutex::new(Vec::new())),
        gate: Arc::new(Mutex::new(Some(open_rx))),
        entered: entered_tx,
    };
    let cfg = LoggerConfig {
        ring_capacity: 1024,
        reorder_window_ns: window,
        ..Default::default()
    };
    let logger = Logger::start(cfg, Stamp, sink.clone()).unwrap();
    let mut ps: Vec<_> = (0..3).map(|_| logger.producer().unwrap()).collect();
    // Primer: the consumer formats it, goes idle, writes, and blocks.
    assert!(ps[0].log(Nat44SessionRecord {
        timestamp_ns: 0,
        src_port: 99,
        ..Default::default()
    }));
    entered_rx.recv().unwrap();
    for (p, prod) in ps.iter_mut().enumerate() {
        for i in 0..600u64 {
            assert!(prod.log(Nat44SessionRecord {
                timestamp_ns: 10 + i * 3 + p as u64,
                src_port: p as u16,
                ..Default::default()
            }));
        }
    }
    open_tx.send(()).unwrap();
    drop(ps);
    let s = logger.shutdown().unwrap();
    assert_eq!(s.written_records, 1 + 1800);
    let bytes = sink.bytes.lock().unwrap();
    bytes
        .chunks_exact(16)
        .map(|c| {
            (
                u64::from_le_bytes(c[..8].try_into().unwrap()),
                u64::from_le_bytes(c[8..].try_into().unwrap()),
            )
        })
        .filter(|&(_, p)| p != 99)
        .collect()
}

fn per_ring_fifo(v: &[(u64, u64)]) -> bool {
    (0..3).all(|p| {
        let s: Vec<u64> = v.iter().filter(|x| x.1 == p).map(|x| x.0).collect();
        s.len() == 600 && s.windows(2).all(|w| w[0] < w[1])
    })
}

#[test]
fn window_on_gives_time_order_across_rings() {
    let v = run(Some(1_000));
    assert_eq!(v.len(), 1800);
    assert!(per_ring_fifo(&v));
    assert!(
        v.windows(2).all(|w| w[0].0 < w[1].0),
        "out of time order with the window on"
    );
}

#[test]
fn window_off_keeps_only_per_ring_order() {
    let v = run(None);
    assert_eq!(v.len(), 1800);
    assert!(per_ring_fifo(&v));
    // Round robin by burst of 32: ring 0's first burst reaches stamp
    // 10 + 31*3 before ring 1's first record (stamp 11).
    assert!(
        v.windows(2).any(|w| w[0].0 > w[1].0),
        "round-robin by burst is not time-ordered"
    );
}

/// Collects the sink's bytes.
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

/// `n` producer threads, `per` records each, pushed in bursts of 1 to
/// `min(skew, 64)`
/// with a yield between bursts. Each producer runs its own clock: a burst
/// covers the next `skew` ticks of it, its stamps shuffled inside that
/// span, so a ring's stamps go back by less than `skew`; producers start
/// up to `skew` apart and race each other freely. A stamp is
/// `clock * n + producer` (unique). Ring capacity 256 and 8 records a
/// ring per consumer pass, so rings fill and
/// full staged queues make producers wait. Returns (stamp, producer) in
/// output order.
fn live(n: u64, per: u64, window: Option<u64>, skew: u64, seed: u64) -> Vec<(u64, u64)> {
    let sink = Collect::default();
    let cfg = LoggerConfig {
        ring_capacity: 256,
        reorder_window_ns: window,
        // Longer than any scheduling pause of the test: only the window
        // and the finished rings decide.
        reorder_idle_ms: 60_000,
        // A pass reads at most 8 records a ring, fewer than a producer's
        // bursts: a window of 0 then writes a burst's records over several
        // passes (out of order), and a window at the skew must hold them
        // back across passes.
        burst: 8,
        ..Default::default()
    };
    let logger = Logger::start(cfg, Stamp, sink.clone()).unwrap();
    let prods: Vec<_> = (0..n).map(|_| logger.producer().unwrap()).collect();
    // A ring holds records back once the consumer has it: the flush is
    // answered after the consumer took every ring added before it.
    logger.flush().unwrap();
    let threads: Vec<_> = prods
        .into_iter()
        .zip(0..n)
        .map(|(mut prod, p)| {
            std::thread::spawn(move || {
                let mut x = seed ^ (p + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let mut rnd = move || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                };
                let mut clock = 1_000 + rnd() % skew;
                let mut left = per;
                while left > 0 {
                    let b = (1 + rnd() % skew.min(64)).min(left);
                    // b distinct offsets in 0..skew, shuffled.
                    let mut offs: Vec<u64> = (0..skew).collect();
                    for i in (1..offs.len()).rev() {
                        offs.swap(i, (rnd() % (i as u64 + 1)) as usize);
                    }
                    for &o in offs.iter().take(b as usize) {
                        assert!(prod.log(Nat44SessionRecord {
                            timestamp_ns: (clock + o) * n + p,
                            src_port: p as u16,
                            ..Default::default()
                        }));
                    }
                    clock += skew;
                    left -= b;
                    std::thread::yield_now();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = logger.shutdown().unwrap();
    assert_eq!(s.written_records, n * per);
    let bytes = sink.0.lock().unwrap();
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

fn out_of_order(v: &[(u64, u64)]) -> usize {
    v.windows(2).filter(|w| w[0].0 > w[1].0).count()
}

/// Every producer's records, complete.
fn complete(v: &[(u64, u64)], n: u64, per: u64) {
    for p in 0..n {
        assert_eq!(
            v.iter().filter(|x| x.1 == p).count() as u64,
            per,
            "producer {p}"
        );
    }
}

#[test]
fn two_live_producers_with_bursts_come_out_in_time_order() {
    // Stamps are clock * 2 + p: a skew of 64 clock ticks is 128 units.
    let v = live(2, 20_000, Some(2 * 64), 64, 1);
    complete(&v, 2, 20_000);
    assert_eq!(out_of_order(&v), 0);
}

#[test]
fn four_live_producers_with_bursts_come_out_in_time_order() {
    let v = live(4, 10_000, Some(4 * 64), 64, 7);
    complete(&v, 4, 10_000);
    assert_eq!(out_of_order(&v), 0);
}

#[test]
fn a_window_below_the_skew_leaves_records_out_of_order() {
    // Each ring's own stamps go back inside a burst: with a window of 0
    // a record is written as soon as its ring shows it, before the older
    // records of the same burst.
    let v = live(2, 5_000, Some(0), 64, 3);
    complete(&v, 2, 5_000);
    assert!(out_of_order(&v) > 0);
}
