//! The SPSC ring's producer half ([`Producer`]) and its zero-copy
//! reservation ([`Reserved`]).

use core::mem::size_of;

use super::block::{push_burst_waiting, push_waiting, waiting_push_by_backoff};
use super::slots::PREFETCH_AHEAD_BYTES;
use super::{
    check, Arc, Consumer, Disconnected, DropReason, Ordering, RingError, Shared,
    DEFAULT_BLOCK_SPINS,
};
use crate::record::Record;

/// Creates an SPSC ring of `capacity` records (a power of two, exact).
///
/// Returns the producer and consumer halves. Errors: [`RingError`] if the
/// capacity is not a power of two in `1..=MAX_CAPACITY` or `T` exceeds 128
/// bytes. Allocates `capacity * size_of::<T>()` bytes, 128-byte aligned.
pub fn ring<T: Record>(capacity: usize) -> Result<(Producer<T>, Consumer<T>), RingError> {
    check::<T>(capacity)?;
    let shared = Arc::new(Shared::new(capacity)?);
    Ok((
        Producer {
            shared: shared.clone(),
            tail: 0,
            published: 0,
            publish_every: 1,
            cached_head: 0,
            enqueued: 0,
            block_spins: DEFAULT_BLOCK_SPINS,
        },
        Consumer::new(shared),
    ))
}

/// The producer half of an SPSC ring. One per producer thread (core); it is
/// `Send` but not `Clone` or `Sync`.
pub struct Producer<T: Record> {
    pub(super) shared: Arc<Shared<T>>,
    /// Next slot this producer writes (only this side writes it). Slots in
    /// `published..tail` are written but not yet visible to the consumer.
    pub(super) tail: usize,
    /// The value last stored to `shared.tail`.
    pub(super) published: usize,
    /// Publish `shared.tail` once this many records are pending (1 = every
    /// push; see [`Producer::set_publish_every`]).
    pub(super) publish_every: usize,
    /// Cached copy of `shared.head`; refreshed only when the ring looks full.
    pub(super) cached_head: usize,
    /// Private running count of records enqueued by this handle.
    pub(super) enqueued: u64,
    /// Pause-instruction spins before a waiting push starts yielding.
    pub(super) block_spins: u32,
}

impl<T: Record> core::fmt::Debug for Producer<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Producer")
            .field("record", &core::any::type_name::<T>())
            .field("capacity", &self.shared.capacity)
            .field("tail", &self.tail)
            .field("published", &self.published)
            .field("publish_every", &self.publish_every)
            .field("cached_head", &self.cached_head)
            .field("enqueued", &self.enqueued)
            .finish_non_exhaustive()
    }
}

impl<T: Record> Producer<T> {
    /// Ring capacity in records.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.shared.capacity
    }

    /// Free slots, refreshing the cached consumer index once if needed;
    /// 0 once the ring is stopped. `want` is at most `isize::MAX` (a
    /// slice's length for a record type of at least one byte; callers
    /// with a caller-given count clamp it to the capacity first).
    #[inline(always)]
    pub(super) fn free_slots(&mut self, want: usize) -> usize {
        // The fast path: the room (the capacity while the ring is served;
        // the fast path's one load of it) less the fill from the cached
        // consumer index. Relaxed: the room only
        // sends the producer of a stopped ring to the slow path, which
        // reads it again with Acquire. Wrapping, as release builds compile
        // it anyway: a producer whose state two threads corrupted (tail
        // behind the cached consumer index) must not panic in debug
        // builds; it publishes an index the consumer then refuses (see
        // the module docs). Signed: a stopped ring's room makes `free`
        // negative whatever the indices.
        let room = self.shared.room.load(Ordering::Relaxed);
        let free = room.wrapping_sub(self.tail.wrapping_sub(self.cached_head));
        if (free as isize) < (want as isize) {
            return self.free_slots_slow();
        }
        free
    }

    /// [`free_slots`](Self::free_slots) when the cached view has too
    /// little room: publishes what is pending, refreshes the consumer
    /// index, and checks whether the ring is stopped.
    #[cold]
    #[inline(never)]
    fn free_slots_slow(&mut self) -> usize {
        let cap = self.shared.capacity;
        // The consumer can only free slots it can see: publish any
        // deferred records before asking it for room.
        self.flush();
        // Acquire pairs with the consumer's Release store of `head`: the
        // consumer has finished reading every slot below it.
        self.cached_head = self.shared.head.load(Ordering::Acquire);
        if self.shared.is_stopped() {
            self.settle_stop();
            return 0;
        }
        let free = cap.wrapping_sub(self.tail.wrapping_sub(self.cached_head));
        // Above the capacity only when the producer's index is behind the
        // consumer's (two threads corrupted it): no room, and the index
        // flush published stops the ring.
        if free > cap {
            0
        } else {
            free
        }
    }

    /// Counts the records this producer wrote past the last index the
    /// consumer accepted before it stopped the ring (never read, so lost
    /// to `dropped_stopped`): its own index less that one, when it lies
    /// within a capacity above it (a producer whose index two threads
    /// corrupted counts none). Stores the count, so calling it again
    /// after more records were published (an inline window's, a commit)
    /// counts each record once. Call after `flush`, once the ring is
    /// stopped.
    #[cold]
    fn settle_stop(&mut self) {
        let sh = &self.shared;
        // Relaxed: published by the consumer's Release store of `room`,
        // which the caller's Acquire load saw.
        let accepted = sh.accepted_tail.load(Ordering::Relaxed);
        let past = self.tail.wrapping_sub(accepted);
        let stranded = if past <= sh.capacity { past } else { 0 };
        // Release pairs with the Acquire load in `RingStats::read`.
        sh.stranded.store(stranded as u64, Ordering::Release);
    }

    /// Makes every record pushed so far visible to the consumer (one Release
    /// store of the ring's tail index, or nothing if none is pending).
    ///
    /// Needed only with [`set_publish_every`](Self::set_publish_every)
    /// above 1: call it once per iteration of the forwarding loop, after the
    /// rx burst is processed, as a DPDK application calls
    /// `rte_eth_tx_buffer_flush` after `rte_eth_tx_buffer`. Dropping the
    /// producer flushes too.
    #[inline]
    pub fn flush(&mut self) {
        if self.tail != self.published {
            self.published = self.tail;
            // Release pairs with the consumer's Acquire load of `tail` (in
            // `Consumer::available`): the slot writes below `tail`
            // happen-before the consumer reads them.
            self.shared.tail.store(self.tail, Ordering::Release);
        }
    }

    /// Records pushed but not yet visible to the consumer (at most
    /// `publish_every - 1` between calls).
    #[inline]
    pub fn pending(&self) -> usize {
        self.tail.wrapping_sub(self.published)
    }

    /// Publishes the ring's tail index once every `n` records instead of on
    /// every push (batched index publication, as in Lee et al.'s
    /// MCRingBuffer, 2009): the producer then stores to the shared index
    /// line, which the consumer polls, once per `n` records, so a single
    /// [`try_push`](Self::try_push) costs about a slot write. Bursts and
    /// commits larger than `n` still publish at once.
    ///
    /// Records pushed since the last publication stay invisible to the
    /// consumer until `n` accumulate, the ring fills, [`flush`](Self::flush)
    /// is called or the producer is dropped, so a producer that sets this
    /// must call `flush` whenever it goes idle (for a forwarding loop: once
    /// per rx burst). `n` is clamped to `1..=capacity`; 1 (the default)
    /// publishes every push.
    pub fn set_publish_every(&mut self, n: usize) {
        self.publish_every = n.clamp(1, self.shared.capacity);
        if self.pending() >= self.publish_every {
            self.flush();
        }
    }

    /// Fill level as this producer sees it, refreshing the consumer index
    /// first (one Acquire load). Used by the `degrade` policy.
    #[inline]
    pub fn fill(&mut self) -> usize {
        // Acquire pairs with the consumer's Release store of `head`.
        self.cached_head = self.shared.head.load(Ordering::Acquire);
        self.tail.wrapping_sub(self.cached_head)
    }

    /// Fill level from the cached consumer index: an upper bound of the true
    /// fill, with no shared-memory access.
    #[inline(always)]
    pub fn fill_upper_bound(&self) -> usize {
        self.tail.wrapping_sub(self.cached_head)
    }

    #[inline(always)]
    pub(super) fn publish(&mut self, n: usize) {
        self.shared.stamp(self.tail, n);
        self.tail = self.tail.wrapping_add(n);
        if self.tail.wrapping_sub(self.published) >= self.publish_every {
            self.published = self.tail;
            // Release pairs with the consumer's Acquire load of `tail`: the
            // slot writes above happen-before the consumer reads them.
            self.shared.tail.store(self.tail, Ordering::Release);
        }
        // No separate counter store: the free-running `tail` is the
        // ring's enqueued count (see `RingStats::read`).
        self.enqueued += n as u64;
    }

    /// Copies `rec` into the next slot. Returns `Err(rec)` when the ring is
    /// full; the record stays the caller's (nothing is counted as dropped).
    /// Never blocks, never allocates.
    #[inline]
    pub fn try_push(&mut self, rec: T) -> Result<(), T> {
        if self.free_slots(1) == 0 {
            return Err(rec);
        }
        // The prefetch below reuses `tail` and `slots` as read here, so
        // they stay in registers across the slot's stores.
        let tail = self.tail;
        let slots = &self.shared.slots;
        // SAFETY: the slot at `tail` is free (tail - head < capacity), so the
        // consumer is not reading it; only this producer writes slots.
        unsafe { slots.write(tail, rec) };
        // Start the ownership transfer of a slot line a few pushes ahead, so
        // the push that writes it does not wait for the consumer's core to
        // give the line up. Prefetching a slot the consumer still reads is
        // harmless: it only moves the line, never the data's meaning.
        slots.prefetch_write(tail.wrapping_add(PREFETCH_AHEAD_BYTES / size_of::<T>().max(1)));
        self.publish(1);
        Ok(())
    }

    #[inline(always)]
    fn copy_in(&mut self, recs: &[T]) {
        for (i, rec) in recs.iter().enumerate() {
            // SAFETY: the caller checked that slots tail..tail+len are free.
            unsafe { self.shared.slots.write(self.tail.wrapping_add(i), *rec) };
        }
    }

    /// Copies as many records of `recs` as fit (DPDK's "burst" semantics,
    /// `rte_ring_sp_enqueue_burst_elem`) and returns how many were pushed
    /// (a prefix of `recs`). One index publish for the whole burst.
    #[inline]
    pub fn try_push_burst(&mut self, recs: &[T]) -> usize {
        let n = self.free_slots(recs.len()).min(recs.len());
        if n == 0 {
            return 0;
        }
        self.copy_in(&recs[..n]);
        self.publish(n);
        n
    }

    /// Copies all of `recs` or none (DPDK's "bulk" semantics,
    /// `rte_ring_sp_enqueue_bulk_elem`): returns `recs.len()` or 0. One
    /// index publish.
    #[inline]
    pub fn try_push_bulk(&mut self, recs: &[T]) -> usize {
        if recs.is_empty() || self.free_slots(recs.len()) < recs.len() {
            return 0;
        }
        self.copy_in(recs);
        self.publish(recs.len());
        recs.len()
    }

    /// Reserves exactly `n` slots (all or nothing) for zero-copy writing;
    /// `None` if fewer than `n` are free (or `n` is 0). Write records with
    /// [`Reserved::push`], publish them with [`Reserved::commit`]; dropping
    /// the reservation publishes nothing.
    #[inline]
    pub fn reserve(&mut self, n: usize) -> Option<Reserved<'_, T>> {
        if n == 0 || n > self.shared.capacity || self.free_slots(n) < n {
            return None;
        }
        Some(Reserved {
            producer: self,
            len: n,
            written: 0,
        })
    }

    /// Reserves as many slots as are free, up to `max` (possibly 0).
    #[inline]
    pub fn reserve_burst(&mut self, max: usize) -> Reserved<'_, T> {
        let max = max.min(self.shared.capacity);
        let n = self.free_slots(max).min(max);
        Reserved {
            producer: self,
            len: n,
            written: 0,
        }
    }

    /// Sets how many times a waiting [`push`](Self::push) or
    /// [`push_burst`](Self::push_burst) spins with a pause instruction
    /// before it starts yielding the CPU between tries (the `block`
    /// policy's bounded spin). Default [`DEFAULT_BLOCK_SPINS`]; 0 yields at
    /// once.
    pub fn set_block_spins(&mut self, spins: u32) {
        self.block_spins = spins;
    }

    /// Pushes `rec`, waiting while the ring is full (lossless backpressure).
    ///
    /// Spins with a pause instruction for up to the block-spin limit (see
    /// [`set_block_spins`](Self::set_block_spins)), then yields the CPU
    /// between tries, and after 256 yields sleeps between tries (50 µs,
    /// doubling to 1 ms), so a producer stuck behind a stalled sink does
    /// not burn its core in system calls. Returns `Err(Disconnected(rec))` if the consumer is
    /// gone, so a producer never waits forever on a dead consumer.
    #[inline]
    pub fn push(&mut self, rec: T) -> Result<(), Disconnected<T>> {
        push_waiting(self, rec)
    }

    /// Pushes every record of `recs`, waiting while the ring is full.
    /// Returns `Err(Disconnected(k))` with the number `k` pushed if the
    /// consumer goes away.
    pub fn push_burst(&mut self, recs: &[T]) -> Result<(), Disconnected<usize>> {
        push_burst_waiting(self, recs)
    }

    /// Counts `n` records as dropped because the ring was full (the
    /// `drop_newest` policy). Single-writer counter, no RMW. The drop time
    /// of the in-band report is [`crate::tsc::now_ticks`].
    #[inline]
    pub fn count_dropped_full(&mut self, n: u64) {
        self.count_dropped(DropReason::Full, n, crate::tsc::now_ticks());
    }

    /// Counts `n` records dropped for `reason` at `now` (a
    /// [`crate::tsc::now_ticks`] value). Single-writer counter, no RMW.
    #[inline]
    pub fn count_dropped(&mut self, reason: DropReason, n: u64, now: u64) {
        self.shared.count_drop(reason, n, now, false);
    }

    /// Records enqueued through this producer so far.
    pub fn enqueued(&self) -> u64 {
        self.enqueued
    }

    /// True if the consumer half has been dropped.
    pub fn is_disconnected(&self) -> bool {
        // Acquire pairs with the consumer's Release store on drop.
        self.shared.consumer_gone.load(Ordering::Acquire)
    }

    /// Test hook: publishes `index` as the ring's tail (Release), as a
    /// producer breaking the protocol would (two threads sharing one
    /// producer, or a corrupted index). Nothing else changes: the next
    /// push publishes this producer's own index again.
    #[doc(hidden)]
    pub fn publish_raw_index(&self, index: usize) {
        // Release pairs with the consumer's Acquire load of `tail`.
        self.shared.tail.store(index, Ordering::Release);
    }

    /// True if the consumer has stopped reading this ring after a
    /// protocol violation (see the module docs): nothing pushed from now
    /// on is read, and every push fails at once.
    pub fn is_stopped(&self) -> bool {
        self.shared.is_stopped()
    }
}

waiting_push_by_backoff!(Producer);

impl<T: Record> Drop for Producer<T> {
    fn drop(&mut self) {
        self.flush();
        if self.shared.is_stopped() {
            // The records written past the stop point, counted once.
            self.settle_stop();
        }
        // Release pairs with the consumer's Acquire load in `is_finished`:
        // every record pushed before the drop is visible once it sees `true`.
        self.shared.producer_gone.store(true, Ordering::Release);
    }
}

/// Slots reserved by [`Producer::reserve`] for zero-copy writes.
///
/// Records are written in slot order with [`push`](Self::push) and can be
/// edited in their slots with `get_mut`;
/// [`commit`](Self::commit) publishes the records written so far with one
/// index store. Dropping it uncommitted publishes nothing.
pub struct Reserved<'a, T: Record> {
    producer: &'a mut Producer<T>,
    len: usize,
    written: usize,
}

impl<T: Record> core::fmt::Debug for Reserved<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Reserved")
            .field("len", &self.len)
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

impl<T: Record> Reserved<'_, T> {
    /// Slots reserved.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if no slot was reserved.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Records written so far.
    pub fn written(&self) -> usize {
        self.written
    }

    /// Writes `rec` into the next reserved slot; `Err(rec)` once all
    /// reserved slots are written.
    #[inline]
    pub fn push(&mut self, rec: T) -> Result<(), T> {
        if self.written == self.len {
            return Err(rec);
        }
        let idx = self.producer.tail.wrapping_add(self.written);
        // SAFETY: idx is inside the reservation: free slots that only this
        // producer may write until it publishes them.
        unsafe { self.producer.shared.slots.write(idx, rec) };
        self.written += 1;
        Ok(())
    }

    /// The `i`-th record written into this reservation, in its slot, for
    /// in-place edits before commit; `None` if `i >= written()`.
    #[cfg(not(loom))]
    #[inline]
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i >= self.written {
            return None;
        }
        let idx = self.producer.tail.wrapping_add(i);
        // SAFETY: the slot was initialised by `push` and belongs to this
        // reservation (the consumer cannot see it before commit); the
        // `&mut self` borrow keeps the reference unique.
        Some(unsafe { (*self.producer.shared.slots.ptr(idx)).assume_init_mut() })
    }

    /// Publishes the written records (one Release store) and returns how
    /// many were published.
    #[inline]
    pub fn commit(self) -> usize {
        let n = self.written;
        if n > 0 {
            self.producer.publish(n);
        }
        n
    }
}
