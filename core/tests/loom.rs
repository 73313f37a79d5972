//! loom models of the SPSC and MPSC index protocols: burst and
//! reserve/commit paths, the blocking `push`/`push_burst` wait loops (on a
//! full ring, and a blocked producer seeing the consumer go away), the
//! SPSC producer's deferred tail publication (`set_publish_every`, the
//! full-ring flush, `flush`, the flush on drop), the MPSC claim of a
//! handle that is alone (no CAS) across a clone and its drop, the MPSC
//! publication that skips the tail wait right after the handle's own
//! publication, and the consumer's
//! validation of the producer index (a bad index stops the ring; no valid
//! interleaving trips it, since every model here checks that each record
//! is read exactly once). Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p dplog-core --release --test loom`
//! (scripts/test.sh does, with its own target directory).
//!
//! Every slot is a `loom::cell::UnsafeCell` under `--cfg loom`, so loom
//! checks that no slot is read while written (the Release/Acquire pairs on
//! the indices) in every interleaving, besides the FIFO values asserted
//! here.
#![cfg(loom)]

use dplog_core::{mpsc_ring, ring, Disconnected, Record, RecordHeader};

/// A 24-byte record: a producer number and a sequence number.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
struct Seq {
    header: RecordHeader,
    timestamp_ns: u64,
    src_port: u16,
    reserved: [u16; 3],
}

impl Default for Seq {
    fn default() -> Self {
        Seq {
            header: RecordHeader::of::<Seq>(),
            timestamp_ns: 0,
            src_port: 0,
            reserved: [0; 3],
        }
    }
}

impl Record for Seq {
    const SCHEMA_ID: u16 = 900;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

/// Runs `f` under loom with a preemption bound of 3 (the usual bound: it
/// finds the known classes of ordering bugs and keeps each model to
/// seconds).
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.max_branches = 100_000;
    b.check(f);
}

fn rec(p: u16, i: u64) -> Seq {
    Seq {
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
        let (mut p, mut c) = ring::<Seq>(2).unwrap();
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
        let (mut p, mut c) = ring::<Seq>(2).unwrap();
        let t = loom::thread::spawn(move || {
            assert_eq!(p.try_push_bulk(&[rec(0, 7), rec(0, 8)]), 2);
        });
        let mut out = [Seq::default(); 2];
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
        let (p, mut c) = mpsc_ring::<Seq>(2).unwrap();
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
        let (p, mut c) = mpsc_ring::<Seq>(2).unwrap();
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

/// SPSC, capacity 1: `push` (the `block` policy's wait loop) pushes three
/// records through a one-slot ring, so every push after the first waits
/// for the consumer to free the slot (spin_wait yields under loom); the
/// consumer pops them in order.
#[test]
fn spsc_push_waits_on_a_full_ring() {
    model(|| {
        let (mut p, mut c) = ring::<Seq>(1).unwrap();
        p.set_block_spins(0);
        let t = loom::thread::spawn(move || {
            for i in 0..3 {
                assert!(p.push(rec(0, i)).is_ok());
            }
        });
        let mut next = 0u64;
        while next < 3 {
            match c.pop() {
                Some(r) => {
                    assert_eq!(r.timestamp_ns, next);
                    next += 1;
                }
                None => loom::thread::yield_now(),
            }
        }
        t.join().unwrap();
        assert!(c.is_finished());
    });
}

/// SPSC, capacity 2: `push_burst` of three records waits for room part-way
/// (the first call pushes a prefix, the rest waits); the consumer reads
/// them in order with read_burst.
#[test]
fn spsc_push_burst_waits_on_a_full_ring() {
    model(|| {
        let (mut p, mut c) = ring::<Seq>(2).unwrap();
        p.set_block_spins(0);
        let t = loom::thread::spawn(move || {
            assert_eq!(p.push_burst(&[rec(0, 0), rec(0, 1), rec(0, 2)]), Ok(()));
        });
        let mut next = 0u64;
        while next < 3 {
            let n = c.read_burst(2, |r| {
                assert_eq!(r.timestamp_ns, next);
                next += 1;
            });
            if n == 0 {
                loom::thread::yield_now();
            }
        }
        t.join().unwrap();
        assert!(c.is_finished());
    });
}

/// SPSC: a producer blocked on a full ring sees the consumer go away and
/// returns the record (`push`) or the count pushed (`push_burst`) instead
/// of waiting forever.
#[test]
fn spsc_blocked_producer_sees_the_consumer_go() {
    model(|| {
        let (mut p, c) = ring::<Seq>(1).unwrap();
        p.set_block_spins(0);
        assert!(p.try_push(rec(0, 0)).is_ok());
        let t = loom::thread::spawn(move || {
            let r = p.push(rec(0, 1));
            assert_eq!(r.map_err(|d| d.0.timestamp_ns), Err(1));
            assert_eq!(p.push_burst(&[rec(0, 2), rec(0, 3)]), Err(Disconnected(0)));
            assert!(p.is_disconnected());
        });
        drop(c);
        t.join().unwrap();
    });
}

/// SPSC: the producer publishes an index above the capacity while the
/// consumer reads. Whether the consumer sees that index (the ring stops)
/// or only the producer's next, valid one, each record is read at most
/// once and in order, a valid run reads them all, and a producer waiting
/// on the stopped, full ring returns `Disconnected` instead of waiting for
/// ever.
#[test]
fn spsc_a_bad_index_stops_the_ring_and_releases_the_producer() {
    model(|| {
        let (mut p, mut c) = ring::<Seq>(2).unwrap();
        p.set_block_spins(0);
        assert!(p.try_push(rec(0, 0)).is_ok());
        assert!(p.try_push(rec(0, 1)).is_ok());
        let t = loom::thread::spawn(move || {
            p.publish_raw_index(9);
            let pushed = p.push(rec(0, 2)).is_ok();
            assert!(pushed || p.is_stopped(), "refused only by a stopped ring");
            pushed
        });
        let mut seen = vec![];
        while !c.is_finished() {
            c.read_burst(2, |r| seen.push(r.timestamp_ns));
            loom::thread::yield_now();
        }
        let pushed = t.join().unwrap();
        assert!(seen.iter().copied().eq(0..seen.len() as u64), "{seen:?}");
        if c.is_stopped() {
            assert!(seen.len() <= 3);
        } else {
            assert!(pushed);
            assert_eq!(seen, [0, 1, 2]);
        }
    });
}

/// SPSC deferred publication: capacity 4, `set_publish_every(3)`. Records
/// 0-2 are published by the batch, record 3 stays pending until the push
/// of record 4 finds the ring full from its cached view and flushes it
/// before asking the consumer for room (the full-ring flush, under the
/// blocking `push`); record 4 is published by an explicit `flush`, record
/// 5 by dropping the producer. The consumer reads until `is_finished`:
/// every record, in order, none read while written, and `is_finished`
/// never true before the drop-flushed record is visible.
#[test]
fn spsc_deferred_publication_batch_full_flush_and_drop() {
    model(|| {
        let (mut p, mut c) = ring::<Seq>(4).unwrap();
        p.set_block_spins(0);
        p.set_publish_every(3);
        let t = loom::thread::spawn(move || {
            for i in 0..4 {
                assert!(p.push(rec(0, i)).is_ok());
            }
            assert_eq!(p.pending(), 1, "record 3 waits for the batch");
            assert!(p.push(rec(0, 4)).is_ok());
            assert_eq!(p.pending(), 1, "the full ring published record 3");
            p.flush();
            assert_eq!(p.pending(), 0);
            assert!(p.push(rec(0, 5)).is_ok());
            assert_eq!(p.pending(), 1);
            // Dropped here: the drop publishes record 5.
        });
        let mut next = 0u64;
        while !c.is_finished() {
            let n = c.read_burst(4, |r| {
                assert_eq!(r.timestamp_ns, next);
                next += 1;
            });
            if n == 0 {
                loom::thread::yield_now();
            }
        }
        assert_eq!(next, 6);
        t.join().unwrap();
    });
}

/// MPSC, capacity 1: one producer handle fills the ring, then another
/// handle's blocking `push` and `push_burst` wait for the consumer to free
/// the slot (spin_wait yields under loom) while it reads. Every record
/// arrives once, per-producer FIFO. (Two producer threads blocking at
/// once, with the consumer a third, is past what loom explores in
/// seconds; the claim race between producers is modeled by the
/// `try_push`/`reserve_commit` models above.)
#[test]
fn mpsc_push_waits_on_a_full_ring() {
    model(|| {
        let (mut p2, mut c) = mpsc_ring::<Seq>(1).unwrap();
        let mut p1 = p2.clone();
        p1.set_block_spins(0);
        assert!(p2.try_push(rec(2, 0)).is_ok());
        drop(p2);
        let a = loom::thread::spawn(move || {
            assert!(p1.push(rec(1, 0)).is_ok());
            assert_eq!(p1.push_burst(&[rec(1, 1)]), Ok(()));
        });
        let mut next = [0u64; 3];
        while !c.is_finished() {
            match c.pop() {
                Some(r) => {
                    let p = r.src_port as usize;
                    assert_eq!(r.timestamp_ns, next[p], "producer {p} out of order");
                    next[p] += 1;
                }
                None => loom::thread::yield_now(),
            }
        }
        a.join().unwrap();
        assert_eq!(next, [0, 2, 1]);
    });
}

/// MPSC: a producer blocked on a full ring returns `Disconnected` when the
/// consumer is dropped.
#[test]
fn mpsc_blocked_producer_sees_the_consumer_go() {
    model(|| {
        let (mut p, c) = mpsc_ring::<Seq>(1).unwrap();
        p.set_block_spins(0);
        assert!(p.try_push(rec(1, 0)).is_ok());
        let t = loom::thread::spawn(move || {
            assert_eq!(p.push(rec(1, 1)).map_err(|d| d.0.timestamp_ns), Err(1));
            assert_eq!(p.push_burst(&[rec(1, 2)]), Err(Disconnected(0)));
        });
        drop(c);
        t.join().unwrap();
    });
}

/// MPSC: one handle alone claims without the CAS (a load and a store of
/// the claim index), then clones a second handle for another thread, which
/// pushes and is dropped while the first pushes again: the first either
/// still sees two handles (CAS claim) or already sees itself alone (plain
/// claim, ordered after the dropped handle's claim and publish by the
/// Acquire load of the handle count pairing with the drop's AcqRel
/// decrement). The consumer reads once while they run, then the rest:
/// every record once, per-producer FIFO, no slot read while written.
#[test]
fn mpsc_a_handle_alone_then_cloned_then_alone_again() {
    model(|| {
        let (mut p1, mut c) = mpsc_ring::<Seq>(4).unwrap();
        let a = loom::thread::spawn(move || {
            assert!(p1.try_push(rec(1, 0)).is_ok());
            let mut p2 = p1.clone();
            let b = loom::thread::spawn(move || assert!(p2.try_push(rec(2, 0)).is_ok()));
            assert!(p1.try_push(rec(1, 1)).is_ok());
            b.join().unwrap();
        });
        let mut next = [0u64; 3];
        let mut check = |r: &Seq| {
            let p = r.src_port as usize;
            assert_eq!(r.timestamp_ns, next[p], "producer {p} out of order");
            next[p] += 1;
        };
        // One read racing the producers, then the rest after they are done.
        c.read_burst(4, &mut check);
        a.join().unwrap();
        c.read_burst(4, &mut check);
        assert_eq!(next, [0, 2, 1]);
        assert!(c.is_finished());
    });
}

/// MPSC: a handle whose next claim starts where its own last publication
/// ended publishes without waiting on the tail; here handle 1 pushes twice
/// while handle 2 pushes once, so handle 1's second claim either follows
/// its first directly (no wait) or follows handle 2's (wait for handle
/// 2's publication). The consumer reads once while they run, then the
/// rest: every record once, per-producer FIFO, no claimed-but-unwritten
/// slot read.
#[test]
fn mpsc_a_claim_right_after_its_own_publication_skips_the_wait() {
    model(|| {
        let (p, mut c) = mpsc_ring::<Seq>(4).unwrap();
        let mut p1 = p.clone();
        let mut p2 = p;
        let a = loom::thread::spawn(move || {
            assert!(p1.try_push(rec(1, 0)).is_ok());
            assert!(p1.try_push(rec(1, 1)).is_ok());
        });
        let b = loom::thread::spawn(move || assert!(p2.try_push(rec(2, 0)).is_ok()));
        let mut next = [0u64; 3];
        let mut check = |r: &Seq| {
            let p = r.src_port as usize;
            assert_eq!(r.timestamp_ns, next[p], "producer {p} out of order");
            next[p] += 1;
        };
        c.read_burst(4, &mut check);
        a.join().unwrap();
        b.join().unwrap();
        c.read_burst(4, &mut check);
        assert_eq!(next, [0, 2, 1]);
        assert!(c.is_finished());
    });
}
