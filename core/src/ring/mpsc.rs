//! Multi-producer single-consumer ring: DPDK's `rte_ring` MP/SC protocol
//! over the same slot array and [`Consumer`] as the SPSC ring.
//!
//! Producers claim slots by moving `prod_head` with a compare-and-swap,
//! copy their records into the claimed slots, then wait until every earlier
//! claim is published (`tail == their head`) and publish theirs by storing
//! `tail = head + n`. The consumer sees only `tail`, so it never reads a
//! claimed-but-unwritten slot, and records of one producer stay in that
//! producer's order (its claims are ordered by its own program order).
//!
//! Memory ordering:
//! - a producer's `head.load(Acquire)` (the consumer index) pairs with the
//!   consumer's Release store: slots below it are no longer being read;
//! - the claim CAS on `prod_head` is Relaxed: it only hands out disjoint
//!   index ranges, it publishes no data;
//! - the wait `tail.load(Acquire)` pairs with the previous claimant's
//!   Release store of `tail`, and our own `tail.store(Release)` then
//!   publishes its slots and ours to the consumer's Acquire load.
//!
//! A handle that is the ring's only one claims without the CAS: the claim
//! index is then written by no other thread, so a plain load and store of
//! `prod_head` hand out the same ranges the CAS would, and the single push
//! costs no locked instruction (a locked instruction drains the store
//! buffer, so each push would wait for the previous push's slot and `tail`
//! lines to come back from the consumer's core). The handle knows it is
//! alone from the live-handle count `producers`: a clone is made by a
//! thread that holds a handle, so the handle it was cloned from sees the
//! new count in program order before its next claim, and the clone reaches
//! its thread through a synchronising hand-over, after every claim made
//! alone; a dropped handle's last claim and publish happen before its
//! AcqRel decrement, which the `Acquire` load of the count in `claim`
//! pairs with, so the handle left alone resumes from the claim index the
//! others left. Publication does not depend on being alone: a handle left
//! alone after another gave up on a stopped ring still waits for a `tail`
//! that never reaches its claim, and gives up too.
//!
//! A claim that starts exactly where the same handle's last publication
//! ended (its `published_end`) publishes without reading `tail`: claims
//! are totally ordered by `prod_head`, so no other claim lies between
//! that publication and this claim, and only the claimant of the range
//! starting at `tail` ever stores `tail`; the value is therefore still
//! the one this handle stored. That spares a load of the line the
//! consumer polls, which would otherwise wait for the line to come back
//! from the consumer's core on every push. A clone starts from its
//! parent's `published_end`, which is as good a bound: the parent stored
//! it before the clone was made.
//!
//! A producer preempted between claim and publish holds up the producers
//! claimed after it (they spin, then yield) — the same property as DPDK's
//! MP ring; the consumer is never blocked by it, it sees an empty ring.
//!
//! The consumer validates `tail` as for an SPSC ring (see [`crate::ring`](mod@crate::ring)):
//! publication in claim order means `tail` only moves forward, and a claim
//! never passes the consumer index by more than the capacity, so a tail
//! that moves backwards or a fill above the capacity stops the ring. The
//! claimed index `prod_head` is the producers' own and is not read by the
//! consumer. A producer publishes nothing into a stopped ring: it gives
//! up before it publishes, or while it waits for an earlier claimant (its
//! records count as not pushed), so no record is written into a ring that
//! is no longer read and no producer waits forever on a tail that will not
//! reach its claim. Records published between the stop and the
//! producer's check are counted lost from the published tail (see
//! [`RingStats::dropped_stopped`](crate::stats::RingStats::dropped_stopped)).

use core::mem::size_of;

use super::block::{push_burst_waiting, push_waiting, waiting_push_by_backoff};
use crate::record::Record;
use crate::ring::{
    check, Arc, Consumer, Disconnected, DropReason, Ordering, RingError, Shared,
    DEFAULT_BLOCK_SPINS,
};

/// How many of `want` slots a claim takes with `free` slots free: all or
/// none (`bulk`), else as many as fit; `None` when that is none.
#[inline(always)]
fn claim_count(free: usize, want: usize, bulk: bool) -> Option<usize> {
    let n = if bulk {
        if free < want {
            return None;
        }
        want
    } else {
        free.min(want)
    };
    (n > 0).then_some(n)
}

/// Creates an MPSC ring of `capacity` records (a power of two, exact).
///
/// Clone the [`MpProducer`] once per producing thread. Errors as for
/// [`ring`](crate::ring::ring). Allocates `capacity * size_of::<T>()` bytes.
pub fn mpsc_ring<T: Record>(capacity: usize) -> Result<(MpProducer<T>, Consumer<T>), RingError> {
    check::<T>(capacity)?;
    debug_assert!(size_of::<T>() <= 128);
    let shared = Arc::new(Shared::new(capacity)?);
    Ok((
        MpProducer {
            shared: shared.clone(),
            cached_head: 0,
            published_end: 0,
            block_spins: DEFAULT_BLOCK_SPINS,
        },
        Consumer::new(shared),
    ))
}

/// How far ahead of its claim `try_push` prefetches, in bytes (the SPSC
/// producer's distance).
const PREFETCH_AHEAD_BYTES: usize = 2048;

/// Pause-instruction spins a producer waits for an earlier claimant to
/// publish before it starts yielding the CPU (capped by the block spins).
const PUBLISH_WAIT_SPINS: u32 = 64;

/// A producer handle of an MPSC ring. `Clone` gives another handle for
/// another thread; `Send`, not `Sync`.
pub struct MpProducer<T: Record> {
    shared: Arc<Shared<T>>,
    /// Cached copy of the consumer index; a lower bound of it, refreshed
    /// when the ring looks full.
    cached_head: usize,
    /// The end of this handle's last publication (`tail` as it stored
    /// it), or the ring's start: a claim that begins exactly there
    /// follows no other claim, so `tail` is already at its head and the
    /// publish needs no wait (module docs).
    published_end: usize,
    block_spins: u32,
}

impl<T: Record> core::fmt::Debug for MpProducer<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MpProducer")
            .field("record", &core::any::type_name::<T>())
            .field("capacity", &self.shared.capacity)
            .field("cached_head", &self.cached_head)
            .finish_non_exhaustive()
    }
}

impl<T: Record> Clone for MpProducer<T> {
    fn clone(&self) -> Self {
        // Relaxed: this handle already keeps the count above zero.
        self.shared.producers.fetch_add(1, Ordering::Relaxed);
        Self {
            shared: self.shared.clone(),
            cached_head: self.cached_head,
            published_end: self.published_end,
            block_spins: self.block_spins,
        }
    }
}

waiting_push_by_backoff!(MpProducer);

impl<T: Record> Drop for MpProducer<T> {
    fn drop(&mut self) {
        // AcqRel: the last handle's decrement acquires every other handle's
        // release of its pushes, then the Release store of `producer_gone`
        // pairs with the consumer's Acquire load in `is_finished`.
        if self.shared.producers.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.producer_gone.store(true, Ordering::Release);
        }
    }
}

impl<T: Record> MpProducer<T> {
    /// Ring capacity in records.
    pub fn capacity(&self) -> usize {
        self.shared.capacity
    }

    /// Claims up to `want` slots (exactly `want` if `bulk`); returns the
    /// first index and the count, or `None`.
    #[inline(always)]
    fn claim(&mut self, want: usize, bulk: bool) -> Option<(usize, usize)> {
        // Acquire pairs with the AcqRel decrement of the last other handle
        // dropped (see the module docs): its claims happen before ours.
        if self.shared.producers.load(Ordering::Acquire) == 1 {
            return self.claim_alone(want, bulk);
        }
        self.claim_shared(want, bulk)
    }

    /// Free slots above claim index `head` by the cached consumer index,
    /// refreshed (one Acquire load) when that shows fewer than `want` or
    /// more than the capacity. More than the capacity after the refresh
    /// means the consumer index is past `head`; each claim decides what
    /// that means.
    #[inline(always)]
    fn free_above(&mut self, head: usize, want: usize) -> usize {
        let cap = self.shared.capacity;
        let free = cap.wrapping_add(self.cached_head).wrapping_sub(head);
        if free >= want && free <= cap {
            return free;
        }
        // Acquire pairs with the consumer's Release store of `head`.
        self.cached_head = self.shared.head.load(Ordering::Acquire);
        cap.wrapping_add(self.cached_head).wrapping_sub(head)
    }

    /// The claim of the ring's only handle: no other thread writes
    /// `prod_head`, so a load and a store replace the CAS (module docs).
    #[inline(always)]
    fn claim_alone(&mut self, want: usize, bulk: bool) -> Option<(usize, usize)> {
        let cap = self.shared.capacity;
        // Relaxed: only this handle writes the claim index while it is
        // alone; its own earlier store is visible to it in program order,
        // and the other handles' stores by the Acquire load in `claim`.
        let head = self.shared.prod_head.load(Ordering::Relaxed);
        let free = self.free_above(head, want);
        if free > cap {
            // The consumer index passed every claim: only memory
            // corruption does that. Claim nothing (the ring is full
            // to this handle); the consumer's own index check
            // decides whether the ring stops.
            return None;
        }
        let n = claim_count(free, want, bulk)?;
        // Relaxed: the claim publishes no data, and no other handle reads
        // it until it synchronises with this one (module docs).
        self.shared
            .prod_head
            .store(head.wrapping_add(n), Ordering::Relaxed);
        Some((head, n))
    }

    /// The claim of one of several handles: a CAS on `prod_head`. Out of
    /// line, so the single push of a handle alone stays small enough to
    /// inline (a locked CAS costs far more than the call).
    #[inline(never)]
    fn claim_shared(&mut self, want: usize, bulk: bool) -> Option<(usize, usize)> {
        let cap = self.shared.capacity;
        let mut spins = crate::sync::WaitSteps::new();
        loop {
            // Relaxed: the CAS below validates it; see the module docs.
            let head = self.shared.prod_head.load(Ordering::Relaxed);
            let free = self.free_above(head, want);
            if free > cap {
                // `head` was older than the consumer index we now know;
                // after that Acquire a fresh load cannot be older.
                spins.step(0);
                continue;
            }
            let n = claim_count(free, want, bulk)?;
            // Relaxed both ways: the claim publishes no data (see above).
            if self
                .shared
                .prod_head
                .compare_exchange_weak(
                    head,
                    head.wrapping_add(n),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                return Some((head, n));
            }
            spins.step(u32::MAX);
        }
    }

    /// Publishes `head..head+n` once every earlier claim is published;
    /// false, publishing nothing, if the ring is stopped (before or while
    /// it waits): the caller gets its records back, nothing is written
    /// into a ring that is no longer read.
    #[inline(always)]
    fn publish(&mut self, head: usize, n: usize) -> bool {
        self.shared.stamp(head, n);
        // Acquire pairs with the consumer's Release store of `stopped`.
        if self.shared.stopped.load(Ordering::Acquire) {
            return false;
        }
        // A claim that starts where this handle's last publication ended
        // follows no other claim, so `tail` is at `head` already: no load
        // of the `tail` line the consumer polls (module docs).
        if head != self.published_end && !self.wait_turn(head) {
            return false;
        }
        // Release pairs with the consumer's Acquire load of `tail`.
        self.shared
            .tail
            .store(head.wrapping_add(n), Ordering::Release);
        self.published_end = head.wrapping_add(n);
        // The enqueued count is `tail` itself (see `RingStats::read`).
        true
    }

    /// Waits until every claim before `head` is published (`tail ==
    /// head`); false if the ring is stopped while it waits.
    #[inline(never)]
    fn wait_turn(&self, head: usize) -> bool {
        let mut spins = crate::sync::WaitSteps::new();
        let limit = self.block_spins.min(PUBLISH_WAIT_SPINS);
        // Acquire pairs with the previous claimant's Release store of `tail`.
        while self.shared.tail.load(Ordering::Acquire) != head {
            // Acquire pairs with the consumer's Release store of `stopped`:
            // a stopped ring's tail may never reach this claim, so give up
            // before the next step.
            if self.shared.stopped.load(Ordering::Acquire) {
                return false;
            }
            // An earlier claimant copies a burst in well under a
            // microsecond; one that takes longer has been preempted, and
            // only yielding lets it run again when it shares this CPU.
            spins.step(limit);
        }
        true
    }

    #[inline(always)]
    fn copy_in(&self, head: usize, recs: &[T]) {
        for (i, r) in recs.iter().enumerate() {
            // SAFETY: head..head+len was claimed by this producer and
            // is free (below cached consumer index + capacity); no other
            // producer writes it and the consumer does not read it before
            // `publish`.
            unsafe { self.shared.slots.write(head.wrapping_add(i), *r) };
        }
    }

    /// Copies `rec` into the ring; `Err(rec)` when full (or stopped, see
    /// the module docs). Never blocks on a full ring (it may briefly wait
    /// for an earlier producer to publish).
    // Always inlined, as the SPSC push gets inlined on its own: the record
    // then stays in registers instead of being passed through memory; the
    // rarely taken paths (shared claim, the publication wait) are calls.
    #[inline(always)]
    pub fn try_push(&mut self, rec: T) -> Result<(), T> {
        let Some((head, _)) = self.claim(1, true) else {
            return Err(rec);
        };
        // SAFETY: slot `head` was claimed by this producer and is free
        // (below the consumer index + capacity); no other producer writes
        // it and the consumer does not read it before `publish`.
        unsafe { self.shared.slots.write(head, rec) };
        // Start the ownership transfer of a slot line a few pushes ahead,
        // as the SPSC `try_push` does: prefetching a slot another producer
        // or the consumer still uses only moves the line, never its data.
        self.shared
            .slots
            .prefetch_write(head.wrapping_add(PREFETCH_AHEAD_BYTES / size_of::<T>().max(1)));
        if self.publish(head, 1) {
            Ok(())
        } else {
            Err(rec)
        }
    }

    /// As many of `recs` as fit (`rte_ring_mp_enqueue_burst_elem`); returns
    /// how many (a prefix). One claim and one publish.
    #[inline]
    pub fn try_push_burst(&mut self, recs: &[T]) -> usize {
        match self.claim(recs.len(), false) {
            Some((head, n)) => {
                self.copy_in(head, &recs[..n]);
                if self.publish(head, n) {
                    n
                } else {
                    0
                }
            }
            None => 0,
        }
    }

    /// All of `recs` or none (`rte_ring_mp_enqueue_bulk_elem`); returns
    /// `recs.len()` or 0.
    #[inline]
    pub fn try_push_bulk(&mut self, recs: &[T]) -> usize {
        if recs.is_empty() {
            return 0;
        }
        match self.claim(recs.len(), true) {
            Some((head, n)) => {
                self.copy_in(head, recs);
                if self.publish(head, n) {
                    n
                } else {
                    0
                }
            }
            None => 0,
        }
    }

    /// Zero-copy: claims exactly `n` slots (all or nothing), builds record
    /// `i` in slot `i` with `make(i)`, then publishes all `n` (the
    /// reserve → write → commit sequence in one call, since an MPSC claim
    /// cannot be given back). Returns false, without calling `make`, if
    /// fewer than `n` slots are free; false also if the ring was stopped
    /// while it waited to publish (the records are not pushed).
    ///
    /// `make` must not panic: a panic would leave the claimed slots
    /// unpublished and stall the ring's other producers.
    #[inline]
    pub fn reserve_commit(&mut self, n: usize, mut make: impl FnMut(usize) -> T) -> bool {
        if n == 0 {
            return false;
        }
        match self.claim(n, true) {
            Some((head, _)) => {
                for i in 0..n {
                    // SAFETY: claimed by this producer, see `copy_in`.
                    unsafe { self.shared.slots.write(head.wrapping_add(i), make(i)) };
                }
                self.publish(head, n)
            }
            None => false,
        }
    }

    /// Pushes `rec`, waiting while the ring is full (spin, then yield);
    /// `Err(Disconnected(rec))` if the consumer is gone.
    #[inline]
    pub fn push(&mut self, rec: T) -> Result<(), Disconnected<T>> {
        push_waiting(self, rec)
    }

    /// Pushes every record of `recs`, waiting while the ring is full;
    /// `Err(Disconnected(k))` with the number pushed if the consumer goes.
    pub fn push_burst(&mut self, recs: &[T]) -> Result<(), Disconnected<usize>> {
        push_burst_waiting(self, recs)
    }

    /// Spins before a waiting push yields; see
    /// [`Producer::set_block_spins`](crate::ring::Producer::set_block_spins).
    pub fn set_block_spins(&mut self, spins: u32) {
        self.block_spins = spins;
    }

    /// Fill level (claimed minus consumed), refreshing the consumer index.
    pub fn fill(&mut self) -> usize {
        // Acquire pairs with the consumer's Release store of `head`.
        self.cached_head = self.shared.head.load(Ordering::Acquire);
        // Relaxed: a snapshot for watermark decisions.
        let head = self.shared.prod_head.load(Ordering::Relaxed);
        head.wrapping_sub(self.cached_head)
            .min(self.shared.capacity)
    }

    /// An upper bound of the fill level with no access to the consumer's
    /// index, while this handle is the ring's only one: the claim index
    /// (written only by this handle then) minus the cached consumer index
    /// (never ahead of the true one). `None` while other handles exist:
    /// their claims move the claim index under this one. The `degrade`
    /// policy reads the exact fill only when the bound reaches its high
    /// watermark.
    #[inline(always)]
    pub fn fill_upper_bound(&self) -> Option<usize> {
        // Acquire pairs with the AcqRel decrement of a dropped handle, as
        // in `claim`.
        if self.shared.producers.load(Ordering::Acquire) != 1 {
            return None;
        }
        // Relaxed: this handle's own store while alone (see `claim_alone`).
        let head = self.shared.prod_head.load(Ordering::Relaxed);
        Some(head.wrapping_sub(self.cached_head))
    }

    /// Counts `n` records dropped for `reason` at `now` (a
    /// [`crate::tsc::now_ticks`] value); atomic read-modify-write, shared
    /// by the producers.
    pub fn count_dropped(&mut self, reason: DropReason, n: u64, now: u64) {
        self.shared.count_drop(reason, n, now, true);
    }

    /// True if the consumer half has been dropped.
    pub fn is_disconnected(&self) -> bool {
        // Acquire pairs with the consumer's Release store on drop.
        self.shared.consumer_gone.load(Ordering::Acquire)
    }

    /// True if the consumer has stopped reading this ring after a
    /// protocol violation (see [`crate::ring`](mod@crate::ring)).
    pub fn is_stopped(&self) -> bool {
        self.shared.is_stopped()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::record::test_record::TestRecord;

    fn rec(p: u16, i: u64) -> TestRecord {
        TestRecord {
            src_port: p,
            timestamp_ns: i,
            ..Default::default()
        }
    }

    #[test]
    fn capacity_edge_and_bulk() {
        let (mut p, mut c) = mpsc_ring::<TestRecord>(8).unwrap();
        let recs: Vec<_> = (0..5).map(|i| rec(0, i)).collect();
        assert_eq!(p.try_push_bulk(&recs), 5);
        assert_eq!(p.try_push_bulk(&recs), 0, "bulk is all or nothing");
        assert_eq!(p.try_push_burst(&recs), 3);
        assert_eq!(p.try_push(rec(0, 99)), Err(rec(0, 99)));
        assert!(!p.reserve_commit(1, |i| rec(0, i as u64)));
        let mut out = [TestRecord::default(); 8];
        assert_eq!(c.pop_bulk(&mut out), 8);
        let ts: Vec<u64> = out.iter().map(|r| r.timestamp_ns).collect();
        assert_eq!(ts, vec![0, 1, 2, 3, 4, 0, 1, 2]);
        assert!(p.reserve_commit(8, |i| rec(1, 10 + i as u64)));
        let mut seen = vec![];
        c.read_burst(100, |r| seen.push(r.timestamp_ns));
        assert_eq!(seen, (10..18).collect::<Vec<_>>());
    }

    #[test]
    fn a_stopped_ring_makes_waiting_mp_producers_give_up() {
        let (mut p, mut c) = mpsc_ring::<TestRecord>(8).unwrap();
        assert_eq!(p.try_push_burst(&[rec(0, 0), rec(0, 1)]), 2);
        assert_eq!(c.read_burst(8, |_| {}), 2);
        // A published index far above every claim: the consumer stops the
        // ring, and a producer waiting for the tail to reach its claim
        // gives up instead of waiting for ever.
        c.shared().tail.store(100, Ordering::Release);
        assert_eq!(c.read_burst(8, |_| panic!("stopped: nothing read")), 0);
        assert!(c.is_stopped() && p.is_stopped());
        // Every later call fails at once, with room left in the ring and
        // an unbounded wait: nothing is published into the stopped ring.
        p.set_block_spins(u32::MAX);
        let mut q = p.clone();
        for i in 2..10 {
            assert_eq!(p.try_push(rec(0, i)), Err(rec(0, i)));
            assert_eq!(p.push(rec(0, i)), Err(Disconnected(rec(0, i))));
            assert_eq!(q.push_burst(&[rec(1, i)]), Err(Disconnected(0)));
        }
        assert!(!p.reserve_commit(1, |i| rec(0, i as u64)));
        assert_eq!(c.shared().tail.load(Ordering::Relaxed), 100);
        let s = crate::stats::RingStats::read(0, c.shared());
        assert!(s.stopped);
        assert_eq!(
            (s.enqueued, s.dequeued, s.dropped_stopped, s.produced),
            (2, 2, 0, 2),
            "the tail is still the bad index: nothing counted as written after the stop"
        );
    }

    #[test]
    fn a_handle_alone_again_resumes_after_its_clone_claims_and_publishes() {
        let (mut p1, mut c) = mpsc_ring::<TestRecord>(8).unwrap();
        assert!(p1.try_push(rec(1, 0)).is_ok());
        let mut p2 = p1.clone();
        assert!(p2.try_push(rec(2, 0)).is_ok());
        assert_eq!(p2.try_push_burst(&[rec(2, 1), rec(2, 2)]), 2);
        assert!(p1.try_push(rec(1, 1)).is_ok());
        drop(p2);
        // Alone again: claims follow the clone's without a gap or overlap,
        // and the ring still fills to exactly its capacity.
        assert_eq!(p1.try_push_burst(&[rec(1, 2), rec(1, 3), rec(1, 4)]), 3);
        assert_eq!(p1.fill(), 8);
        assert_eq!(p1.try_push(rec(1, 5)), Err(rec(1, 5)));
        let mut seen = vec![];
        c.read_burst(8, |r| seen.push((r.src_port, r.timestamp_ns)));
        assert_eq!(
            seen,
            [
                (1, 0),
                (2, 0),
                (2, 1),
                (2, 2),
                (1, 1),
                (1, 2),
                (1, 3),
                (1, 4)
            ]
        );
        assert!(p1.try_push(rec(1, 5)).is_ok());
        assert_eq!(c.pop().map(|r| r.timestamp_ns), Some(5));
        // Alone: a bound from the cached consumer index (8, refreshed by
        // the push that found the ring full; 9 claimed), above the true
        // fill 0; the exact fill refreshes it.
        assert_eq!(p1.fill_upper_bound(), Some(1));
        assert_eq!(p1.fill(), 0);
        assert_eq!(p1.fill_upper_bound(), Some(0));
        let p3 = p1.clone();
        assert_eq!(p1.fill_upper_bound(), None, "another handle claims too");
        drop(p3);
        assert_eq!(p1.fill_upper_bound(), Some(0));
        let s = crate::stats::RingStats::read(0, c.shared());
        assert_eq!((s.enqueued, s.dequeued), (9, 9));
    }

    #[test]
    fn four_producers_fifo_each_no_loss() {
        const PER: u64 = 50_000;
        let (p, mut c) = mpsc_ring::<TestRecord>(64).unwrap();
        let hs: Vec<_> = (0..4u16)
            .map(|id| {
                let mut p = p.clone();
                std::thread::spawn(move || {
                    let mut i = 0;
                    while i < PER {
                        if id % 2 == 0 {
                            p.push(rec(id, i)).unwrap();
                            i += 1;
                        } else {
                            let b: Vec<_> = (i..(i + 5).min(PER)).map(|j| rec(id, j)).collect();
                            p.push_burst(&b).unwrap();
                            i += b.len() as u64;
                        }
                    }
                })
            })
            .collect();
        drop(p);
        let mut next = [0u64; 4];
        while !c.is_finished() {
            c.read_burst(32, |r| {
                assert_eq!(r.timestamp_ns, next[r.src_port as usize]);
                next[r.src_port as usize] += 1;
            });
        }
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(next, [PER; 4]);
    }
}
