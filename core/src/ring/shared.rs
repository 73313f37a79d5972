//! The memory an SPSC or MPSC ring's sides share ([`Shared`]): the
//! indices, each on its own 128-byte line, the slot array and the
//! producer and consumer counters. The C ABI's inline producer
//! (`include/dplog_inline.h`) reads this layout; `ffi/` asserts its
//! offsets at compile time.

use core::marker::PhantomData;

use super::{AtomicBool, AtomicU64, AtomicUsize, DropReason, Ordering, RingError, Slots};

/// Pads and aligns a value to 128 bytes: two cache lines on x86-64, one on
/// some arm64 parts.
#[repr(C, align(128))]
pub(crate) struct CachePadded<T>(pub(crate) T);

impl<T> core::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Producer-side counters of one ring.
///
/// SPSC: single-writer counters, the producer does `load(Relaxed)` then
/// `store(Relaxed)` (no read-modify-write on the hot path). MPSC: producers
/// use `fetch_add(Relaxed)`. Readers load with `Relaxed`; a reader that
/// needs final values reads them after joining or dropping the producers,
/// whose thread join / `Arc` drop gives the happens-before edge.
///
/// The enqueued count has no counter of its own: it is the free-running
/// `tail` index, read Relaxed by the snapshot.
pub(crate) struct ProducerCounters {
    pub(crate) dropped_full: AtomicU64,
    pub(crate) dropped_degraded: AtomicU64,
    pub(crate) dropped_disconnected: AtomicU64,
    pub(crate) dropped_stopped: AtomicU64,
    /// Sum of the four drop counters. Stored (Release) after
    /// `first_drop_ns`/`last_drop_ns`; the consumer's Acquire load in
    /// [`Shared::take_drop_report`] pairs with it.
    pub(crate) dropped_total: AtomicU64,
    /// Time of the first drop not yet reported by the consumer
    /// ([`crate::tsc::now_ticks`] ticks).
    pub(crate) first_drop_ns: AtomicU64,
    /// Time of the latest drop (ticks).
    pub(crate) last_drop_ns: AtomicU64,
}

impl ProducerCounters {
    fn new() -> Self {
        Self {
            dropped_full: AtomicU64::new(0),
            dropped_degraded: AtomicU64::new(0),
            dropped_disconnected: AtomicU64::new(0),
            dropped_stopped: AtomicU64::new(0),
            dropped_total: AtomicU64::new(0),
            first_drop_ns: AtomicU64::new(0),
            last_drop_ns: AtomicU64::new(0),
        }
    }

    /// The drop counter of `reason`.
    fn dropped(&self, reason: DropReason) -> &AtomicU64 {
        match reason {
            DropReason::Full => &self.dropped_full,
            DropReason::Degraded => &self.dropped_degraded,
            DropReason::Disconnected => &self.dropped_disconnected,
            DropReason::Stopped => &self.dropped_stopped,
        }
    }
}

/// Consumer-side counters, written only by the consumer thread (same
/// single-writer discipline as [`ProducerCounters`]).
pub(crate) struct ConsumerCounters {
    pub(crate) dequeued: AtomicU64,
    pub(crate) high_water: AtomicUsize,
    /// Drops already written as an in-band report. Written by the consumer
    /// (Release), read by a dropping producer (Acquire) to know whether its
    /// drop starts a new unreported interval.
    pub(crate) drops_reported: AtomicU64,
    /// Loads of the producer's `tail` line by the consumer (each one may
    /// take the line from the producer's core: the cost the consumer's
    /// polling puts on the producer).
    pub(crate) tail_polls: AtomicU64,
}

impl ConsumerCounters {
    fn new() -> Self {
        Self {
            dequeued: AtomicU64::new(0),
            high_water: AtomicUsize::new(0),
            drops_reported: AtomicU64::new(0),
            tail_polls: AtomicU64::new(0),
        }
    }
}

/// Drops a consumer observed since its previous report on one ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DropDelta {
    /// Records dropped in the interval (all reasons).
    pub dropped: u64,
    /// `dropped` split by reason, indexed as [`DropReason::ALL`]. The sum
    /// is `dropped`, except for drops whose reason a shared-memory ring's
    /// counters do not account for (a corrupted file: `dropped` minus the
    /// sum, see [`DropDelta::unattributed`]). Exact per report unless
    /// drops of several reasons race with the report; exact summed over
    /// the reports in any case (see [`crate::report`]).
    pub by_reason: [u64; 4],
    /// Time of the first of them, [`crate::tsc::now_ticks`] ticks
    /// (convert with [`crate::tsc::TscClock::to_utc_ns`]). It may be
    /// earlier than the true first drop (never later), see
    /// [`crate::report`].
    pub first_ns: u64,
    /// Time of the last of them, ticks; never earlier than the true last
    /// drop.
    pub last_ns: u64,
}

impl DropDelta {
    /// The reasons with drops in this interval, with their counts, in the
    /// order of [`DropReason::ALL`].
    pub fn reasons(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL
            .into_iter()
            .zip(self.by_reason)
            .filter(|&(_, n)| n > 0)
    }

    /// Drops of this interval that no reason's counter accounts for
    /// (only a corrupted shared-memory ring file has them).
    pub fn unattributed(&self) -> u64 {
        self.dropped.saturating_sub(
            self.by_reason
                .iter()
                .fold(0u64, |a, &n| a.saturating_add(n)),
        )
    }
}

/// Splits the `dropped` drops a report takes (the new part of the drop
/// total) by reason: `counters` are the per-reason drop counters, read
/// after the total; `reported` is what earlier reports gave each reason,
/// and is advanced by what this one gives.
///
/// A producer counts a drop under its reason before it adds it to the
/// total, so the counters read after the total cover at least the drops
/// in it: each reason gets what its counter gained, and when a drop in
/// flight has already reached its counter but not the total (the counters
/// cover more than `dropped`), the reasons are filled in the order of
/// [`DropReason::ALL`] up to `dropped`; what one report gives a reason
/// too much or too little, the next gives back. Counters that cover less
/// than `dropped` (a corrupted shared-memory ring) leave the rest
/// unattributed ([`DropDelta::unattributed`]).
pub(crate) fn split_by_reason(
    dropped: u64,
    counters: [u64; 4],
    reported: &mut [u64; 4],
) -> [u64; 4] {
    let mut left = dropped;
    let mut out = [0u64; 4];
    for i in 0..4 {
        let n = counters[i].saturating_sub(reported[i]).min(left);
        out[i] = n;
        reported[i] += n;
        left -= n;
    }
    out
}

pub(crate) struct Shared<T> {
    /// Next slot published to the consumer. Written by the producer
    /// (Release), read by the consumer (Acquire). For MPSC this is DPDK's
    /// `prod.tail`.
    pub(crate) tail: CachePadded<AtomicUsize>,
    /// MPSC only: next slot to claim (DPDK's `prod.head`), advanced by CAS.
    pub(crate) prod_head: CachePadded<AtomicUsize>,
    /// Next slot the consumer reads. Written by the consumer (Release), read
    /// by the producer (Acquire).
    pub(crate) head: CachePadded<AtomicUsize>,
    pub(crate) producer_counters: CachePadded<ProducerCounters>,
    pub(crate) consumer_counters: CachePadded<ConsumerCounters>,
    /// Live producer handles (MPSC clones; 1 for SPSC). Decremented
    /// (AcqRel) on drop; the last one sets `producer_gone`.
    pub(crate) producers: AtomicUsize,
    /// Set when the last producer handle is dropped (Release); read by the
    /// consumer (Acquire) after it finds the ring empty, so records pushed
    /// before the drop are never missed.
    pub(crate) producer_gone: AtomicBool,
    /// Set when the consumer handle is dropped (Release); read by a blocked
    /// producer (Acquire) so `push` does not wait forever.
    pub(crate) consumer_gone: AtomicBool,
    /// Set by the consumer when it stops the ring after a protocol
    /// violation (Release, after `accepted_tail`, `bad_tail` and `room`);
    /// read (Acquire) by MPSC producers before they publish and by
    /// snapshots, which then read the indices below.
    pub(crate) stopped: AtomicBool,
    /// The SPSC producer's room: `capacity` while the ring is served,
    /// [`ROOM_STOPPED`] once the consumer stopped it (Release, after
    /// `accepted_tail` and before `stopped`). The producer's fast path
    /// computes its free slots from it rather than from `capacity`
    /// (Relaxed, its one load of either), so the first call after the stop
    /// finds no room and takes the slow path, whose Acquire load of it
    /// decides (see [`Producer::is_stopped`]).
    pub(crate) room: AtomicUsize,
    /// Records the SPSC producer wrote past `accepted_tail` before it
    /// found the ring stopped (never read, so lost), as it counted them
    /// from its own index: stored (Release) on every slow-path call of a
    /// stopped ring and at its drop; [`UNSETTLED`] until then (a snapshot
    /// then estimates them from the published tail).
    pub(crate) stranded: AtomicU64,
    /// The last producer index the consumer accepted before it stopped
    /// the ring: every record below it is read, none above it ever is.
    pub(crate) accepted_tail: AtomicUsize,
    /// The producer index that broke the protocol.
    pub(crate) bad_tail: AtomicUsize,
    pub(crate) slots: Slots<T>,
    pub(crate) capacity: usize,
    /// Enqueue-time samples for the latency histogram: the producer that
    /// publishes ring index `i` with `i % SAMPLE_EVERY == 0` stores
    /// [`crate::tsc::now_ticks`] in `samples[(i / SAMPLE_EVERY) & mask]`
    /// (Relaxed) before its Release store of `tail`, which orders it for
    /// the consumer like the slot itself. There are `capacity /
    /// SAMPLE_EVERY` entries (at least 1), so an entry is rewritten only by
    /// the push of index `i + capacity` or later, which cannot happen
    /// before the consumer releases slot `i`.
    pub(crate) samples: Box<[AtomicU64]>,
    pub(crate) sample_mask: usize,
    _marker: PhantomData<T>,
}

/// One record in this many (by ring index) carries an enqueue timestamp
/// for the enqueue-to-write latency histogram.
///
/// Why 4096: the C header's inline `dplog_log` writes through a window
/// that ends before each sampled index, and the sampled record and the
/// next window go through the library, a call several times as long as
/// the inline write. One such call in 1024 is 0.1 % of the calls, the
/// producer's p99.9 itself; one in 4096 (0.024 %; 0.05 % for
/// `dplog_reserve`, two calls per window) leaves the p99.9 to the inline
/// path. The histogram still gets 244 samples per million records.
pub const SAMPLE_EVERY: usize = 4096;

/// `Shared::room` of a stopped ring: negative as a signed number by far
/// more than any capacity, so the producer's free slots (`room` minus its
/// fill, compared signed) are negative whatever its indices.
pub(crate) const ROOM_STOPPED: usize = (isize::MIN / 2) as usize;

/// `Shared::stranded` before the producer settled a stop.
pub(crate) const UNSETTLED: u64 = u64::MAX;

// SAFETY: the slot array is only accessed through the ring protocol above:
// producers write slots in [tail, head + cap) they own and the consumer reads
// slots in [head, tail); the Release/Acquire pairs on `tail`/`head` order
// those accesses. T: Send lets records cross to the consumer thread.
unsafe impl<T: Send> Send for Shared<T> {}
// SAFETY: as above; concurrent access from the handles is coordinated by
// the index protocol, never by shared mutable access to the same slot.
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Shared<T> {
    pub(crate) fn new(capacity: usize) -> Result<Self, RingError> {
        Ok(Self {
            tail: CachePadded(AtomicUsize::new(0)),
            prod_head: CachePadded(AtomicUsize::new(0)),
            head: CachePadded(AtomicUsize::new(0)),
            producer_counters: CachePadded(ProducerCounters::new()),
            consumer_counters: CachePadded(ConsumerCounters::new()),
            producers: AtomicUsize::new(1),
            producer_gone: AtomicBool::new(false),
            consumer_gone: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            room: AtomicUsize::new(capacity),
            stranded: AtomicU64::new(UNSETTLED),
            accepted_tail: AtomicUsize::new(0),
            bad_tail: AtomicUsize::new(0),
            slots: Slots::new(capacity)?,
            capacity,
            samples: (0..(capacity / SAMPLE_EVERY).max(1))
                .map(|_| AtomicU64::new(0))
                .collect(),
            sample_mask: (capacity / SAMPLE_EVERY).max(1) - 1,
            _marker: PhantomData,
        })
    }

    /// Stamps the enqueue time of the sampled index in `from..from+n`, if
    /// any (at most one when `n <= SAMPLE_EVERY`). Call before publishing.
    #[inline(always)]
    pub(crate) fn stamp(&self, from: usize, n: usize) {
        #[cfg(not(loom))]
        {
            let first = from.wrapping_add(SAMPLE_EVERY - 1) & !(SAMPLE_EVERY - 1);
            if first.wrapping_sub(from) < n {
                self.stamp_slow(first);
            }
        }
        #[cfg(loom)]
        let _ = (from, n);
    }

    #[cold]
    #[inline(never)]
    #[cfg_attr(loom, allow(dead_code))]
    fn stamp_slow(&self, index: usize) {
        // Relaxed: ordered by the caller's following Release store of
        // `tail` (see `samples`).
        self.samples[(index / SAMPLE_EVERY) & self.sample_mask]
            .store(crate::tsc::now_ticks(), Ordering::Relaxed);
    }

    /// True once the consumer stopped the ring. Acquire pairs with the
    /// consumer's Release store of `room` in `Consumer::stop`, which
    /// follows its store of `accepted_tail`.
    #[inline]
    pub(crate) fn is_stopped(&self) -> bool {
        self.room.load(Ordering::Acquire) != self.capacity
    }

    /// Records in the ring right now (a snapshot; either side may move).
    pub(crate) fn len(&self) -> usize {
        // Relaxed: a statistic, no slot is accessed through this value.
        let tail = self.tail.load(Ordering::Relaxed);
        let head = self.head.load(Ordering::Relaxed);
        tail.wrapping_sub(head).min(self.capacity)
    }

    /// Counts `n` drops for `reason` at time `now_ns`. `shared_writers`:
    /// true for MPSC (RMW), false for the single SPSC producer.
    #[cold]
    pub(crate) fn count_drop(&self, reason: DropReason, n: u64, now_ns: u64, shared_writers: bool) {
        let c = &self.producer_counters;
        let counter = c.dropped(reason);
        // A stopped ring's drops are counted with read-modify-writes
        // even from an SPSC producer: a ring stops when its producer is
        // used by two threads at once, which would lose plain stores.
        if shared_writers || reason == DropReason::Stopped {
            // Relaxed: statistics; the report handshake below is Release.
            counter.fetch_add(n, Ordering::Relaxed);
            // Acquire pairs with the consumer's Release store of
            // `drops_reported` in `take_drop_report`.
            let reported = self
                .consumer_counters
                .drops_reported
                .load(Ordering::Acquire);
            if c.dropped_total.load(Ordering::Relaxed) == reported {
                c.first_drop_ns.store(now_ns, Ordering::Relaxed);
            }
            c.last_drop_ns.fetch_max(now_ns, Ordering::Relaxed);
            // Release pairs with the consumer's Acquire load of
            // `dropped_total`: the times above are visible with the count.
            c.dropped_total.fetch_add(n, Ordering::Release);
        } else {
            // Relaxed: single-writer statistic.
            counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
            let total = c.dropped_total.load(Ordering::Relaxed);
            // Acquire pairs with the consumer's Release store of
            // `drops_reported`: if every earlier drop is reported, this one
            // opens a new interval.
            if self
                .consumer_counters
                .drops_reported
                .load(Ordering::Acquire)
                == total
            {
                c.first_drop_ns.store(now_ns, Ordering::Relaxed);
            }
            c.last_drop_ns.store(now_ns, Ordering::Relaxed);
            // Release pairs with the consumer's Acquire load of
            // `dropped_total` in `take_drop_report`.
            c.dropped_total.store(total + n, Ordering::Release);
        }
    }

    /// Consumer side: the drops not yet reported, marking them reported,
    /// split by reason with `by_reason_reported` (the consumer's own
    /// record of what it gave each reason, see [`split_by_reason`]).
    /// `None` if there are none.
    pub(crate) fn take_drop_report(&self, by_reason_reported: &mut [u64; 4]) -> Option<DropDelta> {
        let c = &self.producer_counters;
        // Acquire pairs with the producers' Release update of
        // `dropped_total` in `count_drop`.
        let total = c.dropped_total.load(Ordering::Acquire);
        let reported = self
            .consumer_counters
            .drops_reported
            .load(Ordering::Relaxed);
        if total == reported {
            return None;
        }
        let first_ns = c.first_drop_ns.load(Ordering::Relaxed);
        let last_ns = c.last_drop_ns.load(Ordering::Relaxed);
        // Relaxed: ordered after the Acquire load of the total above, so
        // each counter covers at least its drops in the total (the
        // producers add to it before they publish the total).
        let counters = DropReason::ALL.map(|r| c.dropped(r).load(Ordering::Relaxed));
        // Release pairs with the producers' Acquire load in `count_drop`.
        self.consumer_counters
            .drops_reported
            .store(total, Ordering::Release);
        let dropped = total - reported;
        Some(DropDelta {
            dropped,
            by_reason: split_by_reason(dropped, counters, by_reason_reported),
            first_ns: first_ns.min(last_ns),
            last_ns,
        })
    }
}
