//! loom models of the SPSC and MPSC index protocols, burst and
//! reserve/commit paths included. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p dplog-core --release --test loom`
//! (scripts/test.sh does, with its own target directory).
//!
//! Every slot is a `loom::cell::UnsafeCell` under `--cfg loom`, so loom
//! checks that no slot is read while written (the Release/Acquire pairs on
//! the indices) in every interleaving, besides the FIFO values asserted
//! here.
#![cfg(loom)]

use dplog_core::{mpsc_ring, ring, Nat44SessionRecord};

/// Runs `f` under loom with a preemption bound of 3 (the usual bound: it
/// finds the known classes of ordering bugs and keeps each model to
/// seconds).
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.max_branches = 100_000;
    b.check(f);
}

fn rec(p: u16, i: u64) -> Nat44SessionRecord {
    Nat44SessionRecord {
        src_port: p,
        timestamp_ns: i,
        ..Default::default()
    }
}

/// SPSC, capacity 2, four records through single, burst and
/// reserve/commit pushes (the ring fills and wraps); the consumer uses
/// read_burst.
#[test]
fn spsc_single_burst_bulk_reserve_commit() {
    model(|| {
        let (mut p, mut c) = ring::<Nat44SessionRecord>(2).unwrap();
        let t = loom::thread::spawn(move || {
            // Record 0: single.
            while p.try_push(rec(0, 0)).is_err() {
                loom::thread::yield_now();
            }
            // Records 1, 2: burst (as many as fit, a prefix).
            let b = [rec(0, 1), rec(0, 2)];
            let mut done = 0;
            while done < 2 {
                done += p.try_push_burst(&b[done..]);
                if done < 2 {
                    loom::thread::yield_now();
                }
            }
            // Record 3: reserve → write → commit.
            loop {
                if let Some(mut r) = p.reserve(1) {
                    r.push(rec(0, 3)).unwrap();
                    assert_eq!(r.commit(), 1);
                    break;
                }
                loom::thread::yield_now();
            }
        });
        let mut next = 0u64;
        while next < 4 {
            let n = c.read_burst(2, |r| {
                assert_eq!(r.timestamp_ns, next);
                next += 1;
            });
            if n == 0 {
                loom::thread::yield_now();
            }
        }
        t.join().unwrap();
        assert!(c.pop().is_none());
    });
}

/// SPSC: bulk push and bulk pop move both records or none (the pop never
/// sees one of the two).
#[test]
fn spsc_bulk_pop_is_all_or_nothing() {
    model(|| {
        let (mut p, mut c) = ring::<Nat44SessionRecord>(2).unwrap();
        let t = loom::thread::spawn(move || {
            assert_eq!(p.try_push_bulk(&[rec(0, 7), rec(0, 8)]), 2);
        });
        let mut out = [Nat44SessionRecord::default(); 2];
        loop {
            match c.pop_bulk(&mut out) {
                0 => loom::thread::yield_now(),
                2 => break,
                n => panic!("bulk popped {n}"),
            }
        }
        assert_eq!((out[0].timestamp_ns, out[1].timestamp_ns), (7, 8));
        t.join().unwrap();
    });
}

/// MPSC, capacity 2: one producer pushes a burst of 2 while another
/// claims 1 with reserve_commit, so exactly one of the claims can find the
/// ring full; no loss, no duplicate, per-producer FIFO, slots never read
/// while written, and the claims are published in claim order.
#[test]
fn mpsc_burst_and_reserve_commit_race_for_the_last_slots() {
    model(|| {
        let (p, mut c) = mpsc_ring::<Nat44SessionRecord>(2).unwrap();
        let mut p1 = p.clone();
        let mut p2 = p;
        let a = loom::thread::spawn(move || p1.try_push_burst(&[rec(1, 0), rec(1, 1)]));
        let b = loom::thread::spawn(move || p2.reserve_commit(1, |_| rec(2, 0)));
        let pushed_a = a.join().unwrap();
        let pushed_b = usize::from(b.join().unwrap());
        // Two slots: whoever claimed first got what it asked for.
        assert!(pushed_a + pushed_b <= 2 && pushed_a + pushed_b >= 1);
        let mut next = [0u64; 3];
        let n = c.read_burst(2, |r| {
            let p = r.src_port as usize;
            assert_eq!(r.timestamp_ns, next[p], "producer {p} out of order");
            next[p] += 1;
        });
        assert_eq!(n, pushed_a + pushed_b);
        assert_eq!(next, [0, pushed_a as u64, pushed_b as u64]);
        assert!(c.is_finished());
    });
}

/// MPSC: two producers publish concurrently with the consumer reading; the
/// second claimant waits for the first to publish (ordered tail), and the
/// consumer never sees a claimed-but-unwritten slot.
#[test]
fn mpsc_concurrent_publish_with_consumer() {
    model(|| {
        let (p, mut c) = mpsc_ring::<Nat44SessionRecord>(2).unwrap();
        let mut p1 = p.clone();
        let mut p2 = p;
        let a = loom::thread::spawn(move || assert!(p1.try_push(rec(1, 0)).is_ok()));
        let b = loom::thread::spawn(move || assert_eq!(p2.try_push_bulk(&[rec(2, 0)]), 1));
        let mut seen = [0u32; 3];
        // One read racing the producers, then the rest after they are done.
        c.read_burst(2, |r| seen[r.src_port as usize] += 1);
        a.join().unwrap();
        b.join().unwrap();
        c.read_burst(2, |r| seen[r.src_port as usize] += 1);
        assert_eq!(seen, [0, 1, 1]);
    });
}
