//! Single-producer single-consumer ring of fixed-size records.
//!
//! The slot array holds the records themselves (no pointers, no pool): a
//! producer copies a record into a slot, the consumer reads it in place.
//! Capacity is a power of two and exact: a ring of N holds N records.
//!
//! Indices are free-running `usize` counters (`tail` = next slot the
//! producer writes, `head` = next slot the consumer reads); `tail - head` is
//! the fill level. The producer's index and the consumer's index each sit on
//! their own 128-byte line (two 64-byte lines, so the adjacent-line
//! prefetcher does not couple them), and each side keeps a private cached
//! copy of the other side's index, refreshed only when the cached value says
//! the ring is full (producer) or empty (consumer).
//!
//! Memory ordering, the whole protocol:
//! - producer writes slot bytes, then `tail.store(Release)`; the consumer's
//!   `tail.load(Acquire)` pairs with it, so slot bytes are visible before the
//!   consumer reads them;
//! - consumer reads slot bytes, then `head.store(Release)`; the producer's
//!   `head.load(Acquire)` pairs with it, so a slot is not overwritten while it
//!   is being read.

use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::mem::{size_of, MaybeUninit};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::sync::Arc;

use crate::record::Record;

/// Largest ring capacity accepted, in records (2^30).
pub const MAX_CAPACITY: usize = 1 << 30;

/// Pads and aligns a value to 128 bytes: two cache lines on x86-64, one on
/// some arm64 parts.
#[repr(C, align(128))]
#[derive(Default)]
pub(crate) struct CachePadded<T>(pub(crate) T);

impl<T> core::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Why a ring could not be created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RingError {
    /// The capacity is 0, not a power of two, or above [`MAX_CAPACITY`].
    BadCapacity(usize),
    /// The record type is larger than 128 bytes.
    RecordTooLarge(usize),
}

impl core::fmt::Display for RingError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RingError::BadCapacity(n) => write!(
                f,
                "ring capacity {n} is invalid: it must be a power of two between 1 and {MAX_CAPACITY}"
            ),
            RingError::RecordTooLarge(n) => {
                write!(f, "record of {n} bytes is larger than the 128-byte slot limit")
            }
        }
    }
}

impl std::error::Error for RingError {}

/// Producer-side counters, written only by the producer thread.
///
/// Each is a single-writer counter: the producer does `load(Relaxed)` then
/// `store(Relaxed)` (no read-modify-write on the hot path). Readers load with
/// `Relaxed`; a reader that needs final values reads them after joining or
/// dropping the producer, whose thread join / `Arc` drop gives the
/// happens-before edge.
#[derive(Default)]
pub(crate) struct ProducerCounters {
    pub(crate) enqueued: AtomicU64,
    pub(crate) dropped_full: AtomicU64,
}

/// Consumer-side counters, written only by the consumer thread (same
/// single-writer discipline as [`ProducerCounters`]).
#[derive(Default)]
pub(crate) struct ConsumerCounters {
    pub(crate) dequeued: AtomicU64,
    pub(crate) high_water: AtomicUsize,
}

pub(crate) struct Shared<T> {
    /// Next slot the producer writes. Written by the producer (Release),
    /// read by the consumer (Acquire).
    tail: CachePadded<AtomicUsize>,
    /// Next slot the consumer reads. Written by the consumer (Release), read
    /// by the producer (Acquire).
    head: CachePadded<AtomicUsize>,
    pub(crate) producer_counters: CachePadded<ProducerCounters>,
    pub(crate) consumer_counters: CachePadded<ConsumerCounters>,
    /// Set when the producer handle is dropped (Release); read by the
    /// consumer (Acquire) after it finds the ring empty, so records pushed
    /// before the drop are never missed.
    pub(crate) producer_gone: AtomicBool,
    /// Set when the consumer handle is dropped (Release); read by a blocked
    /// producer (Acquire) so `push` does not wait forever.
    pub(crate) consumer_gone: AtomicBool,
    slots: NonNull<UnsafeCell<MaybeUninit<T>>>,
    capacity: usize,
    mask: usize,
    _marker: PhantomData<T>,
}

// SAFETY: the slot array is only accessed through the SPSC protocol above:
// the producer writes slots in [tail, head + cap) and the consumer reads slots
// in [head, tail); the Release/Acquire pairs on `tail`/`head` order those
// accesses. T: Send lets records cross to the consumer thread.
unsafe impl<T: Send> Send for Shared<T> {}
// SAFETY: as above; concurrent access from the two handles is coordinated by
// the index protocol, never by shared mutable access to the same slot.
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Shared<T> {
    fn layout(capacity: usize) -> Layout {
        Layout::from_size_align(capacity * size_of::<T>().max(1), 128)
            .expect("capacity was validated against MAX_CAPACITY")
    }

    #[inline(always)]
    fn slot(&self, index: usize) -> *mut MaybeUninit<T> {
        // SAFETY: `index & mask < capacity`, so the offset stays inside the
        // allocation made in `ring`.
        unsafe { (*self.slots.as_ptr().add(index & self.mask)).get() }
    }

    /// Records in the ring right now (a snapshot; either side may move).
    pub(crate) fn len(&self) -> usize {
        // Relaxed: a statistic, no slot is accessed through this value.
        let tail = self.tail.load(Ordering::Relaxed);
        let head = self.head.load(Ordering::Relaxed);
        tail.wrapping_sub(head).min(self.capacity)
    }
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        if size_of::<T>() != 0 {
            // SAFETY: allocated in `ring` with exactly this layout; `T: Copy`
            // for every ring element so no element destructors are owed.
            unsafe { dealloc(self.slots.as_ptr().cast(), Self::layout(self.capacity)) }
        }
    }
}

/// Creates an SPSC ring of `capacity` records (a power of two, exact).
///
/// Returns the producer and consumer halves. Errors: [`RingError`] if the
/// capacity is not a power of two in `1..=MAX_CAPACITY` or `T` exceeds 128
/// bytes. Allocates `capacity * size_of::<T>()` bytes, 128-byte aligned.
pub fn ring<T: Record>(capacity: usize) -> Result<(Producer<T>, Consumer<T>), RingError> {
    if capacity == 0 || !capacity.is_power_of_two() || capacity > MAX_CAPACITY {
        return Err(RingError::BadCapacity(capacity));
    }
    if size_of::<T>() > 128 {
        return Err(RingError::RecordTooLarge(size_of::<T>()));
    }
    let layout = Shared::<T>::layout(capacity);
    let slots = if size_of::<T>() == 0 {
        NonNull::dangling()
    } else {
        // SAFETY: the layout has non-zero size (capacity ≥ 1, T non-ZST).
        let p = unsafe { alloc(layout) };
        match NonNull::new(p.cast::<UnsafeCell<MaybeUninit<T>>>()) {
            Some(p) => p,
            None => handle_alloc_error(layout),
        }
    };
    let shared = Arc::new(Shared {
        tail: CachePadded(AtomicUsize::new(0)),
        head: CachePadded(AtomicUsize::new(0)),
        producer_counters: CachePadded::default(),
        consumer_counters: CachePadded::default(),
        producer_gone: AtomicBool::new(false),
        consumer_gone: AtomicBool::new(false),
        slots,
        capacity,
        mask: capacity - 1,
        _marker: PhantomData,
    });
    Ok((
        Producer {
            shared: shared.clone(),
            tail: 0,
            cached_head: 0,
            enqueued: 0,
        },
        Consumer {
            shared,
            head: 0,
            cached_tail: 0,
        },
    ))
}

/// The consumer has gone away; the record (or the records not pushed) are
/// handed back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disconnected<T>(pub T);

/// The producer half of an SPSC ring. One per producer thread (core); it is
/// `Send` but not `Clone` or `Sync`.
pub struct Producer<T: Record> {
    shared: Arc<Shared<T>>,
    /// Private copy of `shared.tail` (only this side writes it).
    tail: usize,
    /// Cached copy of `shared.head`; refreshed only when the ring looks full.
    cached_head: usize,
    /// Private running count, published to `producer_counters.enqueued`.
    enqueued: u64,
}

impl<T: Record> Producer<T> {
    /// Ring capacity in records.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.shared.capacity
    }

    /// Free slots, refreshing the cached consumer index once if needed.
    #[inline(always)]
    fn free_slots(&mut self, want: usize) -> usize {
        let cap = self.shared.capacity;
        let mut free = cap - self.tail.wrapping_sub(self.cached_head);
        if free < want {
            // Acquire pairs with the consumer's Release store of `head`: the
            // consumer has finished reading every slot below it.
            self.cached_head = self.shared.head.load(Ordering::Acquire);
            free = cap - self.tail.wrapping_sub(self.cached_head);
        }
        free
    }

    #[inline(always)]
    fn publish(&mut self, n: usize) {
        self.tail = self.tail.wrapping_add(n);
        // Release pairs with the consumer's Acquire load of `tail`: the slot
        // writes above happen-before the consumer reads them.
        self.shared.tail.store(self.tail, Ordering::Release);
        self.enqueued += n as u64;
        // Relaxed: single-writer statistic, see `ProducerCounters`.
        self.shared
            .producer_counters
            .enqueued
            .store(self.enqueued, Ordering::Relaxed);
    }

    /// Copies `rec` into the next slot. Returns `Err(rec)` when the ring is
    /// full; the record stays the caller's (nothing is counted as dropped).
    /// Never blocks, never allocates.
    #[inline]
    pub fn try_push(&mut self, rec: T) -> Result<(), T> {
        if self.free_slots(1) == 0 {
            return Err(rec);
        }
        // SAFETY: the slot at `tail` is free (tail - head < capacity), so the
        // consumer is not reading it; only this producer writes slots.
        unsafe { self.shared.slot(self.tail).write(MaybeUninit::new(rec)) };
        self.publish(1);
        Ok(())
    }

    /// Copies as many records of `recs` as fit (DPDK's "burst" semantics) and
    /// returns how many were pushed (a prefix of `recs`). One index publish
    /// for the whole burst.
    #[inline]
    pub fn try_push_burst(&mut self, recs: &[T]) -> usize {
        let n = self.free_slots(recs.len()).min(recs.len());
        if n == 0 {
            return 0;
        }
        for (i, rec) in recs[..n].iter().enumerate() {
            // SAFETY: slots tail..tail+n are free (checked above).
            unsafe {
                self.shared
                    .slot(self.tail.wrapping_add(i))
                    .write(MaybeUninit::new(*rec))
            };
        }
        self.publish(n);
        n
    }

    /// Pushes `rec`, waiting while the ring is full (lossless backpressure).
    ///
    /// Spins with a pause instruction for up to 1024 tries, then yields the
    /// CPU between tries. Returns `Err(Disconnected(rec))` if the consumer
    /// is gone, so a producer never waits forever on a dead consumer.
    #[inline]
    pub fn push(&mut self, rec: T) -> Result<(), Disconnected<T>> {
        let mut rec = rec;
        let mut spins = 0u32;
        loop {
            match self.try_push(rec) {
                Ok(()) => return Ok(()),
                Err(r) => rec = r,
            }
            if self.backoff(&mut spins) {
                return Err(Disconnected(rec));
            }
        }
    }

    /// Pushes every record of `recs`, waiting while the ring is full.
    /// Returns `Err(Disconnected(k))` with the number `k` pushed if the
    /// consumer goes away.
    pub fn push_burst(&mut self, recs: &[T]) -> Result<(), Disconnected<usize>> {
        let mut done = 0;
        let mut spins = 0u32;
        while done < recs.len() {
            let n = self.try_push_burst(&recs[done..]);
            done += n;
            if n == 0 && self.backoff(&mut spins) {
                return Err(Disconnected(done));
            }
        }
        Ok(())
    }

    /// One wait step; returns true if the consumer is gone.
    #[cold]
    fn backoff(&self, spins: &mut u32) -> bool {
        *spins += 1;
        if *spins < 1024 {
            core::hint::spin_loop();
            false
        } else {
            std::thread::yield_now();
            // Acquire pairs with the consumer's Release store on drop.
            self.shared.consumer_gone.load(Ordering::Acquire)
        }
    }

    /// Counts one record as dropped because the ring was full (the
    /// `drop` backpressure policy). Single-writer counter, no RMW.
    #[inline]
    pub fn count_dropped_full(&mut self, n: u64) {
        let c = &self.shared.producer_counters.dropped_full;
        // Relaxed: single-writer statistic, see `ProducerCounters`.
        c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }

    /// Records enqueued through this producer so far.
    pub fn enqueued(&self) -> u64 {
        self.enqueued
    }
}

impl<T: Record> Drop for Producer<T> {
    fn drop(&mut self) {
        // Release pairs with the consumer's Acquire load in `is_finished`:
        // every record pushed before the drop is visible once it sees `true`.
        self.shared.producer_gone.store(true, Ordering::Release);
    }
}

/// The consumer half of an SPSC ring. `Send`, not `Clone`.
pub struct Consumer<T: Record> {
    shared: Arc<Shared<T>>,
    /// Private copy of `shared.head` (only this side writes it).
    head: usize,
    /// Cached copy of `shared.tail`; refreshed when the ring looks empty.
    cached_tail: usize,
}

impl<T: Record> Consumer<T> {
    /// Ring capacity in records.
    pub fn capacity(&self) -> usize {
        self.shared.capacity
    }

    #[inline(always)]
    fn available(&mut self, want: usize) -> usize {
        let mut avail = self.cached_tail.wrapping_sub(self.head);
        if avail < want {
            // Acquire pairs with the producer's Release store of `tail`.
            self.cached_tail = self.shared.tail.load(Ordering::Acquire);
            avail = self.cached_tail.wrapping_sub(self.head);
        }
        avail
    }

    /// Reads up to `max` records in place, calling `f` on each in FIFO
    /// order, then releases their slots with one index publish. Returns the
    /// number read. Zero-copy: `f` sees the record inside its slot.
    #[inline]
    pub fn read_burst(&mut self, max: usize, mut f: impl FnMut(&T)) -> usize {
        let avail = self.available(max);
        let n = avail.min(max);
        if n == 0 {
            return 0;
        }
        let cc = &self.shared.consumer_counters;
        // The fill level seen (a lower bound of the true fill); Relaxed:
        // single-writer statistic.
        if avail > cc.high_water.load(Ordering::Relaxed) {
            cc.high_water.store(avail, Ordering::Relaxed);
        }
        for i in 0..n {
            // SAFETY: slots head..head+n were published by the producer (the
            // Acquire load in `available` ordered their writes before us) and
            // are not reused until we publish `head` below.
            let rec = unsafe { (*self.shared.slot(self.head.wrapping_add(i))).assume_init_ref() };
            f(rec);
        }
        self.head = self.head.wrapping_add(n);
        // Release pairs with the producer's Acquire load of `head`: our slot
        // reads happen-before the producer overwrites the slots.
        self.shared.head.store(self.head, Ordering::Release);
        let d = &cc.dequeued;
        d.store(d.load(Ordering::Relaxed) + n as u64, Ordering::Relaxed);
        n
    }

    /// Pops one record by value.
    pub fn pop(&mut self) -> Option<T> {
        let mut out = None;
        self.read_burst(1, |r| out = Some(*r));
        out
    }

    /// Records waiting in the ring right now (a snapshot).
    pub fn len(&self) -> usize {
        self.shared.len()
    }

    /// True if no record is waiting right now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True once the producer is dropped and every record it pushed has been
    /// read.
    pub fn is_finished(&mut self) -> bool {
        // Acquire pairs with the producer's Release store on drop; checked
        // before the emptiness test so a last push cannot slip between them.
        self.shared.producer_gone.load(Ordering::Acquire) && self.available(1) == 0
    }

    pub(crate) fn shared(&self) -> &Arc<Shared<T>> {
        &self.shared
    }
}

impl<T: Record> Drop for Consumer<T> {
    fn drop(&mut self) {
        // Release pairs with the producer's Acquire load in `backoff`.
        self.shared.consumer_gone.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Nat44SessionRecord, RecordHeader};

    fn rec(i: u64) -> Nat44SessionRecord {
        Nat44SessionRecord {
            timestamp_ns: i,
            header: RecordHeader::of::<Nat44SessionRecord>(),
            ..Default::default()
        }
    }

    #[test]
    fn bad_capacities_are_errors() {
        for c in [0usize, 3, 6, 1000, MAX_CAPACITY * 2] {
            assert_eq!(
                ring::<Nat44SessionRecord>(c).err(),
                Some(RingError::BadCapacity(c))
            );
        }
        assert!(ring::<Nat44SessionRecord>(1).is_ok());
    }

    #[test]
    fn a_ring_of_n_holds_exactly_n() {
        for cap in [1usize, 2, 16, 1024] {
            let (mut p, mut c) = ring::<Nat44SessionRecord>(cap).unwrap();
            for i in 0..cap as u64 {
                assert!(p.try_push(rec(i)).is_ok(), "slot {i} of {cap}");
            }
            assert_eq!(p.try_push(rec(999)).unwrap_err().timestamp_ns, 999);
            assert_eq!(c.len(), cap);
            assert_eq!(c.pop().unwrap().timestamp_ns, 0);
            assert!(p.try_push(rec(cap as u64)).is_ok());
            let mut seen = vec![];
            c.read_burst(usize::MAX, |r| seen.push(r.timestamp_ns));
            assert_eq!(seen, (1..=cap as u64).collect::<Vec<_>>());
        }
    }

    #[test]
    fn burst_pushes_a_prefix_and_wraps() {
        let (mut p, mut c) = ring::<Nat44SessionRecord>(8).unwrap();
        let batch: Vec<_> = (0..5).map(rec).collect();
        assert_eq!(p.try_push_burst(&batch), 5);
        assert_eq!(p.try_push_burst(&batch), 3);
        assert_eq!(c.read_burst(6, |_| {}), 6);
        let more: Vec<_> = (10..20).map(rec).collect();
        assert_eq!(p.try_push_burst(&more), 6);
        let mut seen = vec![];
        while c.read_burst(3, |r| seen.push(r.timestamp_ns)) > 0 {}
        // The second burst pushed the prefix 0, 1, 2; six were read: 0..5 and 0.
        assert_eq!(seen, vec![1, 2, 10, 11, 12, 13, 14, 15]);
        assert_eq!(p.enqueued(), 14);
    }

    #[test]
    fn cross_thread_fifo_no_loss() {
        const N: u64 = 200_000;
        let (mut p, mut c) = ring::<Nat44SessionRecord>(64).unwrap();
        let t = std::thread::spawn(move || {
            let mut i = 0;
            while i < N {
                if i % 3 == 0 {
                    let b: Vec<_> = (i..(i + 7).min(N)).map(rec).collect();
                    p.push_burst(&b).unwrap();
                    i += b.len() as u64;
                } else {
                    p.push(rec(i)).unwrap();
                    i += 1;
                }
            }
        });
        let mut next = 0;
        while !c.is_finished() {
            c.read_burst(32, |r| {
                assert_eq!(r.timestamp_ns, next);
                next += 1;
            });
        }
        t.join().unwrap();
        assert_eq!(next, N);
    }

    #[test]
    fn push_to_a_dropped_consumer_returns_the_record() {
        let (mut p, c) = ring::<Nat44SessionRecord>(1).unwrap();
        p.push(rec(1)).unwrap();
        drop(c);
        assert_eq!(p.push(rec(2)), Err(Disconnected(rec(2))));
    }
}
