//! The consumer half of a ring ([`Consumer`]), which trusts no index it
//! did not write, and its zero-copy read ([`ReadBurst`]).

use super::{Arc, DropDelta, Ordering, Shared, ROOM_STOPPED, SAMPLE_EVERY};
use crate::record::Record;

/// The consumer half of a ring. `Send`, not `Clone`.
pub struct Consumer<T: Record> {
    shared: Arc<Shared<T>>,
    /// Ring id, set by the runtime when the ring is registered.
    id: u32,
    /// Private copy of `shared.head` (only this side writes it).
    head: usize,
    /// Cached copy of `shared.tail`; refreshed when the ring looks empty.
    /// The highest producer index accepted: `head <= cached_tail <= head
    /// + capacity`.
    cached_tail: usize,
    /// The ring broke the protocol: `cached_tail` is final.
    stopped: bool,
    /// Drops reported so far per reason ([`split_by_reason`]).
    drops_reported_by_reason: [u64; 4],
}

impl<T: Record> core::fmt::Debug for Consumer<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Consumer")
            .field("record", &core::any::type_name::<T>())
            .field("id", &self.id)
            .field("capacity", &self.shared.capacity)
            .field("head", &self.head)
            .field("cached_tail", &self.cached_tail)
            .field("stopped", &self.stopped)
            .finish_non_exhaustive()
    }
}

impl<T: Record> Consumer<T> {
    pub(crate) fn new(shared: Arc<Shared<T>>) -> Self {
        Self {
            shared,
            id: 0,
            head: 0,
            cached_tail: 0,
            stopped: false,
            drops_reported_by_reason: [0; 4],
        }
    }

    /// The ring's id within its logger (registration order, from 0; 0 for
    /// a ring not registered with a logger).
    pub fn id(&self) -> u32 {
        self.id
    }

    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn set_id(&mut self, id: u32) {
        self.id = id;
    }

    /// Ring capacity in records.
    pub fn capacity(&self) -> usize {
        self.shared.capacity
    }

    #[inline(always)]
    fn available(&mut self, want: usize) -> usize {
        let mut avail = self.cached_tail.wrapping_sub(self.head);
        if avail < want && !self.stopped {
            // Acquire pairs with the producer's Release store of `tail`.
            let tail = self.shared.tail.load(Ordering::Acquire);
            let polls = &self.shared.consumer_counters.tail_polls;
            // Relaxed: single-writer statistic (this consumer's line).
            polls.store(polls.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            // A valid tail lies in `cached_tail ..= head + capacity`, that
            // is `tail - cached_tail <= capacity - avail` (wrapping): one
            // compare catches both a tail that moved backwards and a fill
            // level above the capacity.
            if tail.wrapping_sub(self.cached_tail) > self.shared.capacity - avail {
                self.stop(tail);
                return avail;
            }
            self.cached_tail = tail;
            avail = tail.wrapping_sub(self.head);
        }
        avail
    }

    /// Stops the ring after the producer published `bad_tail`, which
    /// breaks the protocol: the records up to `cached_tail` (accepted
    /// earlier) are still read, nothing after them ever is. Prints one
    /// line on stderr.
    #[cold]
    #[inline(never)]
    fn stop(&mut self, bad_tail: usize) {
        self.stopped = true;
        let sh = &self.shared;
        // Relaxed: published by the Release store of `stopped` below.
        sh.accepted_tail.store(self.cached_tail, Ordering::Relaxed);
        sh.bad_tail.store(bad_tail, Ordering::Relaxed);
        let how = if bad_tail.wrapping_sub(self.cached_tail) as isize >= 0 {
            "a fill level above the capacity"
        } else {
            "a producer index that moved backwards"
        };
        crate::diag_line!(
            "dplog: ring {} stopped: its producer published index {bad_tail} after {}, with the consumer at {} and capacity {}: {how} breaks the ring protocol (an SPSC producer used by two threads at once, or memory corruption); the {} records accepted before it and not yet read are still written; nothing more is read from this ring (losses counted in dropped_stopped)",
            self.id,
            self.cached_tail,
            self.head,
            sh.capacity,
            self.cached_tail.wrapping_sub(self.head)
        );
        // After the line: whoever sees the ring stopped finds the line whole
        // on stderr. Release pairs with the Acquire loads of `room` in
        // `Shared::is_stopped` (the SPSC producer's slow path, `backoff`,
        // `is_stopped`): they then see `accepted_tail`. Before `stopped`:
        // whoever saw `stopped` (a snapshot) and then pushes finds no
        // room.
        sh.room.store(ROOM_STOPPED, Ordering::Release);
        // Release pairs with the Acquire loads of `stopped` in the MPSC
        // publish and in the snapshot (`RingStats::read`).
        sh.stopped.store(true, Ordering::Release);
    }

    /// True once this ring is stopped after a protocol violation (see the
    /// module docs).
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    #[inline(always)]
    fn note_fill(&self, avail: usize) {
        let cc = &self.shared.consumer_counters;
        // The fill level seen (a lower bound of the true fill); Relaxed:
        // single-writer statistic.
        if avail > cc.high_water.load(Ordering::Relaxed) {
            cc.high_water.store(avail, Ordering::Relaxed);
        }
    }

    #[inline(always)]
    fn release_n(&mut self, n: usize) {
        self.head = self.head.wrapping_add(n);
        // Release pairs with the producer's Acquire load of `head`: our slot
        // reads happen-before the producer overwrites the slots.
        self.shared.head.store(self.head, Ordering::Release);
        let d = &self.shared.consumer_counters.dequeued;
        // Relaxed: single-writer statistic.
        d.store(d.load(Ordering::Relaxed) + n as u64, Ordering::Relaxed);
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
        self.note_fill(avail);
        for i in 0..n {
            // SAFETY: slots head..head+n were published by the producer (the
            // Acquire load in `available` ordered their writes before us) and
            // are not reused until we publish `head` below.
            unsafe { self.shared.slots.with(self.head.wrapping_add(i), &mut f) };
        }
        self.release_n(n);
        n
    }

    /// [`read_burst`](Self::read_burst) that also hands `on_sample` the
    /// enqueue timestamp ([`crate::tsc::now_ticks`] ticks) of each sampled
    /// record read (one in [`SAMPLE_EVERY`]), for latency measurement.
    #[inline]
    pub fn read_burst_sampled(
        &mut self,
        max: usize,
        f: impl FnMut(&T),
        mut on_sample: impl FnMut(u64),
    ) -> usize {
        let from = self.head;
        let avail = self.available(max);
        let n = avail.min(max);
        if n == 0 {
            return 0;
        }
        let mut first = from.wrapping_add(SAMPLE_EVERY - 1) & !(SAMPLE_EVERY - 1);
        while first.wrapping_sub(from) < n {
            let sh = &self.shared;
            // Relaxed: ordered by the Acquire load of `tail` in `available`
            // (see `Shared::samples`); read before the slots are released.
            on_sample(sh.samples[(first / SAMPLE_EVERY) & sh.sample_mask].load(Ordering::Relaxed));
            first = first.wrapping_add(SAMPLE_EVERY);
        }
        self.read_burst(n, f)
    }

    /// Copies up to `out.len()` records into `out` (DPDK "burst" dequeue);
    /// returns how many.
    #[inline]
    pub fn pop_burst(&mut self, out: &mut [T]) -> usize {
        let mut k = 0;
        self.read_burst(out.len(), |r| {
            out[k] = *r;
            k += 1;
        })
    }

    /// Copies exactly `out.len()` records into `out` or none (DPDK "bulk"
    /// dequeue); returns `out.len()` or 0.
    #[inline]
    pub fn pop_bulk(&mut self, out: &mut [T]) -> usize {
        if out.is_empty() || self.available(out.len()) < out.len() {
            return 0;
        }
        self.pop_burst(out)
    }

    /// Zero-copy read of up to `max` records: the returned [`ReadBurst`]
    /// borrows them in their slots (as at most two slices, split where the
    /// ring wraps); [`ReadBurst::release`] frees the slots with one index
    /// publish. Dropping it without release leaves the records in the ring.
    #[cfg(not(loom))]
    #[inline]
    pub fn read(&mut self, max: usize) -> ReadBurst<'_, T> {
        let avail = self.available(max);
        let n = avail.min(max);
        if n > 0 {
            self.note_fill(avail);
        }
        ReadBurst {
            consumer: self,
            len: n,
        }
    }

    /// Pops one record by value.
    pub fn pop(&mut self) -> Option<T> {
        let mut out = None;
        self.read_burst(1, |r| out = Some(*r));
        out
    }

    /// Times this consumer loaded the producer's published index (the
    /// `tail` line) so far: once per read call that found fewer records
    /// cached than it asked for. Each load may move that line away from
    /// the producer's core, so the producer's next publication waits for
    /// it; the runtime paces its polls to keep this near one per burst
    /// (see [`LoggerConfig::poll_gap_max_us`](crate::LoggerConfig::poll_gap_max_us)).
    pub fn tail_polls(&self) -> u64 {
        // Relaxed: single-writer statistic, written by this consumer.
        self.shared
            .consumer_counters
            .tail_polls
            .load(Ordering::Relaxed)
    }

    /// Records waiting in the ring right now (a snapshot).
    pub fn len(&self) -> usize {
        self.shared.len()
    }

    /// True if no record is waiting right now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True once every producer is dropped and every record they pushed has
    /// been read.
    pub fn is_finished(&mut self) -> bool {
        // Acquire pairs with the producer's Release store on drop; checked
        // before the emptiness test so a last push cannot slip between them.
        self.shared.producer_gone.load(Ordering::Acquire) && self.available(1) == 0
    }

    /// Drops recorded on this ring since the previous call (all reasons,
    /// and split by reason), with the interval they happened in; `None` if
    /// none. This is what the runtime turns into in-band
    /// [`DropReport`](crate::report::DropReport)s, one per reason.
    pub fn take_drop_report(&mut self) -> Option<DropDelta> {
        self.shared
            .take_drop_report(&mut self.drops_reported_by_reason)
    }

    #[cfg_attr(loom, allow(dead_code))]
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

/// Records borrowed in place by [`Consumer::read`].
#[cfg(not(loom))]
pub struct ReadBurst<'a, T: Record> {
    consumer: &'a mut Consumer<T>,
    len: usize,
}

#[cfg(not(loom))]
impl<T: Record> core::fmt::Debug for ReadBurst<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ReadBurst")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

#[cfg(not(loom))]
impl<T: Record> ReadBurst<'_, T> {
    /// Records borrowed.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if nothing was available.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The records in FIFO order: the first slice up to the end of the slot
    /// array, the second (possibly empty) from its start.
    pub fn as_slices(&self) -> (&[T], &[T]) {
        if self.len == 0 {
            return (&[], &[]);
        }
        let s = &self.consumer.shared.slots;
        let start = self.consumer.head & s.mask;
        let first = self.len.min(s.capacity - start);
        // SAFETY: slots head..head+len are published (Acquire in
        // `available`), initialised, contiguous in two runs, and not
        // reused before `release`, which needs `self` by value.
        unsafe {
            (
                core::slice::from_raw_parts(s.ptr(start).cast::<T>(), first),
                core::slice::from_raw_parts(s.ptr(0).cast::<T>(), self.len - first),
            )
        }
    }

    /// Frees all borrowed slots with one index publish; returns how many.
    pub fn release(self) -> usize {
        let n = self.len;
        if n > 0 {
            self.consumer.release_n(n);
        }
        n
    }
}
