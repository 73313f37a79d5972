//! Lock-free rings of fixed-size records: single-producer (this module) and
//! multi-producer ([`crate::mpsc`]) front ends over one slot array, drained
//! by one single-consumer [`Consumer`].
//!
//! The slot array holds the records themselves (no pointers, no pool): a
//! producer copies a record into a slot, the consumer reads it in place.
//! A slot is `size_of::<T>()` bytes; for mixed record sizes use the
//! fixed-size slot types [`Slot32`](crate::slot::Slot32),
//! [`Slot64`](crate::slot::Slot64) and [`Slot128`](crate::slot::Slot128),
//! whose header `len` says how many bytes are valid. Capacity is a power of
//! two and exact: a ring of N holds N records.
//!
//! Indices are free-running `usize` counters (`tail` = next slot published
//! to the consumer, `head` = next slot the consumer reads); `tail - head` is
//! the fill level. The producer's index and the consumer's index each sit on
//! their own 128-byte line (two 64-byte lines, so the adjacent-line
//! prefetcher does not couple them), and each side keeps a private cached
//! copy of the other side's index, refreshed only when the cached value says
//! the ring is full (producer) or empty (consumer).
//!
//! Producer API ([`Producer`], the names are DPDK's `rte_ring` ones):
//! - single: [`try_push`](Producer::try_push) (fails when full) and
//!   [`push`](Producer::push) (waits);
//! - bulk, all or nothing: [`try_push_bulk`](Producer::try_push_bulk);
//! - burst, as many as fit: [`try_push_burst`](Producer::try_push_burst) and
//!   the waiting [`push_burst`](Producer::push_burst);
//! - zero-copy: [`reserve`](Producer::reserve) → write records into the
//!   slots with [`Reserved::push`] (edit in place with `Reserved::get_mut`)
//!   → [`Reserved::commit`].
//!
//! Consumer API ([`Consumer`]): [`read_burst`](Consumer::read_burst)
//! (callback per record, in place), [`pop_burst`](Consumer::pop_burst) /
//! [`pop_bulk`](Consumer::pop_bulk) (copy out), and zero-copy
//! [`read`](Consumer::read) → [`ReadBurst::release`]. Every consumer call
//! publishes its index once per burst.
//!
//! Memory ordering, the whole protocol:
//! - producer writes slot bytes, then `tail.store(Release)`; the consumer's
//!   `tail.load(Acquire)` pairs with it, so slot bytes are visible before the
//!   consumer reads them;
//! - consumer reads slot bytes, then `head.store(Release)`; the producer's
//!   `head.load(Acquire)` pairs with it, so a slot is not overwritten while it
//!   is being read.
//!
//! The multi-producer claim protocol (`prod_head`) is documented in
//! [`crate::mpsc`].
//!
//! The consumer trusts no index it did not write. Each time it reloads the
//! producer's `tail` it checks `cached_tail <= tail <= head + capacity`
//! (one wrapping compare): a fill level above the capacity, or a tail
//! that moves backwards, cannot come from a producer that follows the
//! protocol (it comes from one SPSC producer used by two threads at once,
//! or from memory corruption). The consumer then stops the ring: it reads
//! the records it had already accepted (each index at most once, so
//! nothing is read twice) and never reloads the tail again; it prints one
//! line naming the ring on stderr, and records the stop in the ring's
//! stats ([`RingStats::stopped`](crate::stats::RingStats)).
//!
//! Every later call of a stopped ring's producer fails at once, at no
//! cost to the fast path: the SPSC producer computes its free slots from
//! a room word that holds the capacity (its fast path's one load of it),
//! and the consumer, when it stops the ring, sets it so that no indices
//! leave room. The next call so takes the slow path,
//! which sees the ring stopped: `try_push` and the bursts, bulks and
//! reservations find no room, `push` and `push_burst` return
//! `Err(Disconnected)` before they wait (so does a push on a full ring
//! whose consumer is gone), and [`Producer::is_stopped`] says why. An
//! MPSC producer checks before it publishes. The policy layer
//! ([`LogProducer::log`](crate::LogProducer::log)) counts each refused
//! record in `dropped_stopped`. Records written after the last index the
//! consumer accepted (a call in flight at the stop, an inline window's
//! slots) are never read; the producer counts them in `dropped_stopped`
//! from its own index when it finds the ring stopped, and again, as a
//! count, not an increment, at its drop, so each is counted once.

use core::marker::PhantomData;
use core::mem::{size_of, MaybeUninit};
#[cfg(not(loom))]
use core::ptr::NonNull;
#[cfg(not(loom))]
use std::alloc::{alloc, dealloc, Layout};

use crate::record::Record;
use crate::sync::WaitSteps;
pub(crate) use crate::sync::{Arc, AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Largest ring capacity accepted, in records (2^30).
pub const MAX_CAPACITY: usize = 1 << 30;

/// Default spins with a pause instruction before a waiting producer starts
/// yielding the CPU (see [`Producer::set_block_spins`]).
pub const DEFAULT_BLOCK_SPINS: u32 = 1024;

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

/// Why a ring could not be created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RingError {
    /// The capacity is 0, not a power of two, or above [`MAX_CAPACITY`].
    BadCapacity(usize),
    /// The record type is larger than 128 bytes.
    RecordTooLarge(usize),
    /// The slot array (this many bytes) could not be allocated.
    OutOfMemory(usize),
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
            RingError::OutOfMemory(n) => write!(
                f,
                "cannot allocate {n} bytes for the ring's slots; choose a smaller capacity"
            ),
        }
    }
}

impl std::error::Error for RingError {}

/// Why a record was dropped; each reason has its own exact counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The ring was full (`drop_newest`, or `degrade` at 100% fill).
    Full,
    /// The ring was above its high watermark and the record's priority was
    /// below the accepted minimum (`degrade`).
    Degraded,
    /// The consumer is gone.
    Disconnected,
    /// The consumer stopped reading the ring after a protocol violation
    /// (see the module docs).
    Stopped,
}

impl DropReason {
    /// Every reason, in the order of [`DropDelta::by_reason`].
    pub const ALL: [DropReason; 4] = [
        DropReason::Full,
        DropReason::Degraded,
        DropReason::Disconnected,
        DropReason::Stopped,
    ];
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
}

impl ConsumerCounters {
    fn new() -> Self {
        Self {
            dequeued: AtomicU64::new(0),
            high_water: AtomicUsize::new(0),
            drops_reported: AtomicU64::new(0),
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

/// The slot array. Outside loom it is one raw 128-byte-aligned allocation;
/// under `--cfg loom` every slot is a `loom::cell::UnsafeCell` so the model
/// checker sees each slot access.
/// How far ahead of the write position `try_push` prefetches, in bytes.
const PREFETCH_AHEAD_BYTES: usize = 2048;

/// Slot arrays of at least this many bytes are mapped on their own and
/// backed by transparent huge pages where the kernel allows it.
///
/// With 4 KiB pages a producer walks the page tables once per 4 KiB of
/// slots (64 records of 64 bytes); measured on the per-call latency bench,
/// that walk is the slowest push of every 64 (100–300 ns under a
/// hypervisor's nested paging). One 2 MiB page covers 32,768 such slots.
/// DPDK rings live in huge-page memzones for the same reason.
#[cfg(all(not(loom), target_os = "linux"))]
const HUGE_FROM_BYTES: usize = 1 << 20;
/// The transparent huge page size on x86-64 and aarch64 (4 KiB granule).
#[cfg(all(not(loom), target_os = "linux"))]
const HUGE_PAGE_BYTES: usize = 2 << 20;

pub(crate) struct Slots<T> {
    #[cfg(not(loom))]
    ptr: NonNull<core::cell::UnsafeCell<MaybeUninit<T>>>,
    /// Length of the anonymous mapping behind `ptr` (a huge-page backed
    /// array), or 0 when `ptr` came from the global allocator.
    #[cfg(not(loom))]
    mapped: usize,
    #[cfg(loom)]
    cells: Box<[loom::cell::UnsafeCell<MaybeUninit<T>>]>,
    mask: usize,
    #[cfg_attr(loom, allow(dead_code))]
    capacity: usize,
}

impl<T> Slots<T> {
    #[cfg(not(loom))]
    fn layout(capacity: usize) -> Layout {
        Layout::from_size_align(capacity * size_of::<T>().max(1), 128)
            .expect("capacity was validated against MAX_CAPACITY")
    }

    /// Allocates the slot array; `OutOfMemory` instead of aborting when the
    /// allocator refuses (a huge configured capacity).
    fn new(capacity: usize) -> Result<Self, RingError> {
        #[cfg(not(loom))]
        {
            let layout = Self::layout(capacity);
            #[cfg(target_os = "linux")]
            if size_of::<T>() != 0 && layout.size() >= HUGE_FROM_BYTES {
                if let Some((ptr, mapped)) = map_huge(layout.size()) {
                    return Ok(Self {
                        ptr: ptr.cast(),
                        mapped,
                        mask: capacity - 1,
                        capacity,
                    });
                }
            }
            let ptr = if size_of::<T>() == 0 {
                NonNull::dangling()
            } else {
                // SAFETY: the layout has non-zero size (capacity ≥ 1, T non-ZST).
                let p = unsafe { alloc(layout) };
                if p.is_null() {
                    return Err(RingError::OutOfMemory(layout.size()));
                }
                // Fault every page in now (zeroing it), as DPDK's memzones
                // are populated at creation: otherwise the producer takes
                // one page fault per 4 KiB of slots (64 records) during
                // the ring's first lap, on the forwarding core, at a few
                // microseconds each.
                // SAFETY: p is a fresh allocation of layout.size() bytes.
                unsafe { p.write_bytes(0, layout.size()) };
                match NonNull::new(p.cast()) {
                    Some(p) => p,
                    None => return Err(RingError::OutOfMemory(layout.size())),
                }
            };
            Ok(Self {
                ptr,
                mapped: 0,
                mask: capacity - 1,
                capacity,
            })
        }
        #[cfg(loom)]
        {
            Ok(Self {
                cells: (0..capacity)
                    .map(|_| loom::cell::UnsafeCell::new(MaybeUninit::uninit()))
                    .collect(),
                mask: capacity - 1,
                capacity,
            })
        }
    }

    /// Pointer to slot `index & mask`.
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) fn ptr(&self, index: usize) -> *mut MaybeUninit<T> {
        // SAFETY: `index & mask < capacity`, so the offset stays inside the
        // allocation made in `new`.
        unsafe { (*self.ptr.as_ptr().add(index & self.mask)).get() }
    }

    /// Hints the CPU to fetch slot `index & mask` for writing
    /// (`prefetchw` on x86-64; nothing elsewhere). Never faults.
    #[inline(always)]
    pub(crate) fn prefetch_write(&self, index: usize) {
        #[cfg(all(not(loom), target_arch = "x86_64"))]
        // SAFETY: `prefetchw` only hints the cache; it cannot fault or
        // change memory, and the address is inside the slot array.
        unsafe {
            core::arch::asm!(
                "prefetchw [{p}]",
                p = in(reg) self.ptr(index),
                options(nostack, preserves_flags, readonly)
            );
        }
        #[cfg(not(all(not(loom), target_arch = "x86_64")))]
        let _ = index;
    }

    /// Writes `v` into slot `index & mask`.
    ///
    /// # Safety
    /// The caller owns the slot under the ring protocol (no reader, no
    /// other writer).
    #[inline(always)]
    pub(crate) unsafe fn write(&self, index: usize, v: T) {
        #[cfg(not(loom))]
        // SAFETY: the caller owns the slot; the pointer is in bounds.
        unsafe {
            self.ptr(index).write(MaybeUninit::new(v))
        };
        #[cfg(loom)]
        self.cells[index & self.mask].with_mut(|p| {
            // SAFETY: the caller owns the slot; loom checks the access.
            unsafe { p.write(MaybeUninit::new(v)) }
        });
    }

    /// Calls `f` on the record in slot `index & mask`.
    ///
    /// # Safety
    /// The slot holds a record published to the caller, and no writer
    /// touches it until the caller releases it.
    #[inline(always)]
    pub(crate) unsafe fn with<R>(&self, index: usize, f: impl FnOnce(&T) -> R) -> R {
        #[cfg(not(loom))]
        {
            // SAFETY: the caller guarantees the slot is initialised and
            // stable for the duration of `f`.
            f(unsafe { (*self.ptr(index)).assume_init_ref() })
        }
        #[cfg(loom)]
        {
            self.cells[index & self.mask].with(|p| {
                // SAFETY: as above; loom checks the access.
                f(unsafe { (*p).assume_init_ref() })
            })
        }
    }
}

impl<T> Drop for Slots<T> {
    fn drop(&mut self) {
        #[cfg(all(not(loom), target_os = "linux"))]
        if self.mapped != 0 {
            // SAFETY: `map_huge` mapped exactly `mapped` bytes at `ptr`;
            // `T: Copy` for every ring element so no destructors are owed.
            unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.mapped) };
            return;
        }
        #[cfg(not(loom))]
        if size_of::<T>() != 0 {
            // SAFETY: allocated in `new` with exactly this layout; `T: Copy`
            // for every ring element so no element destructors are owed.
            unsafe { dealloc(self.ptr.as_ptr().cast(), Self::layout(self.capacity)) }
        }
    }
}

/// Maps `size` bytes (rounded up to whole huge pages) of zeroed anonymous
/// memory aligned to [`HUGE_PAGE_BYTES`], asks for transparent huge pages
/// (`madvise(MADV_HUGEPAGE)`: honoured when
/// `/sys/kernel/mm/transparent_hugepage/enabled` is `madvise` or `always`,
/// ignored under `never`, where 4 KiB pages back it as before) and faults
/// every page in, as [`Slots::new`] does for allocator memory. Returns the
/// aligned start and the mapping's length, or `None` when the kernel
/// refuses the mapping (the caller falls back to the allocator).
#[cfg(all(not(loom), target_os = "linux"))]
fn map_huge(size: usize) -> Option<(NonNull<u8>, usize)> {
    let len = size.checked_next_multiple_of(HUGE_PAGE_BYTES)?;
    let reserve = len.checked_add(HUGE_PAGE_BYTES)?;
    // SAFETY: a fresh private anonymous mapping; no existing memory is
    // touched.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            reserve,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    let start = p as usize;
    let aligned = start.next_multiple_of(HUGE_PAGE_BYTES);
    let head = aligned - start;
    let tail = reserve - head - len;
    // SAFETY: both ranges lie inside the mapping made above, outside
    // [aligned, aligned + len), and are page-aligned (mmap returns
    // page-aligned memory; `aligned` and `len` are huge-page multiples).
    unsafe {
        if head != 0 {
            libc::munmap(p, head);
        }
        if tail != 0 {
            libc::munmap((aligned + len) as *mut libc::c_void, tail);
        }
        // A hint: an error (THP compiled out) leaves 4 KiB pages.
        libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        // Fault every page in now, as the allocator path does (the memory
        // is already zero; the stores take the faults off the record path).
        core::ptr::write_bytes(aligned as *mut u8, 0, len);
    }
    NonNull::new(aligned as *mut u8).map(|p| (p, len))
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
pub const SAMPLE_EVERY: usize = 1024;

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

/// Validates a capacity and a record type for a ring.
pub(crate) fn check<T>(capacity: usize) -> Result<(), RingError> {
    if capacity == 0 || !capacity.is_power_of_two() || capacity > MAX_CAPACITY {
        return Err(RingError::BadCapacity(capacity));
    }
    if size_of::<T>() > 128 {
        return Err(RingError::RecordTooLarge(size_of::<T>()));
    }
    Ok(())
}

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

/// The consumer has gone away; the record (or the records not pushed) are
/// handed back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disconnected<T>(pub T);

/// The producer half of an SPSC ring. One per producer thread (core); it is
/// `Send` but not `Clone` or `Sync`.
pub struct Producer<T: Record> {
    shared: Arc<Shared<T>>,
    /// Next slot this producer writes (only this side writes it). Slots in
    /// `published..tail` are written but not yet visible to the consumer.
    tail: usize,
    /// The value last stored to `shared.tail`.
    published: usize,
    /// Publish `shared.tail` once this many records are pending (1 = every
    /// push; see [`Producer::set_publish_every`]).
    publish_every: usize,
    /// Cached copy of `shared.head`; refreshed only when the ring looks full.
    cached_head: usize,
    /// Private running count of records enqueued by this handle.
    enqueued: u64,
    /// Pause-instruction spins before a waiting push starts yielding.
    block_spins: u32,
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
    fn free_slots(&mut self, want: usize) -> usize {
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
    fn publish(&mut self, n: usize) {
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
        // SAFETY: the slot at `tail` is free (tail - head < capacity), so the
        // consumer is not reading it; only this producer writes slots.
        unsafe { self.shared.slots.write(self.tail, rec) };
        // Start the ownership transfer of a slot line a few pushes ahead, so
        // the push that writes it does not wait for the consumer's core to
        // give the line up. Prefetching a slot the consumer still reads is
        // harmless: it only moves the line, never the data's meaning.
        self.shared.slots.prefetch_write(
            self.tail
                .wrapping_add(PREFETCH_AHEAD_BYTES / size_of::<T>().max(1)),
        );
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
        let mut rec = rec;
        let mut spins = WaitSteps::new();
        loop {
            match self.try_push(rec) {
                Ok(()) => return Ok(()),
                Err(r) => rec = r,
            }
            if backoff(&self.shared, self.block_spins, &mut spins) {
                return Err(Disconnected(rec));
            }
        }
    }

    /// Pushes every record of `recs`, waiting while the ring is full.
    /// Returns `Err(Disconnected(k))` with the number `k` pushed if the
    /// consumer goes away.
    pub fn push_burst(&mut self, recs: &[T]) -> Result<(), Disconnected<usize>> {
        let mut done = 0;
        let mut spins = WaitSteps::new();
        while done < recs.len() {
            let n = self.try_push_burst(&recs[done..]);
            done += n;
            if n == 0 && backoff(&self.shared, self.block_spins, &mut spins) {
                return Err(Disconnected(done));
            }
        }
        Ok(())
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

/// One wait step of a blocked producer; true, before any step, if the
/// consumer is gone or has stopped the ring (it will free no slot: the
/// push fails at once instead of waiting out its spins).
#[cold]
pub(crate) fn backoff<T>(shared: &Shared<T>, limit: u32, steps: &mut WaitSteps) -> bool {
    // Acquire pairs with the consumer's Release store on drop (and, in
    // `is_stopped`, with its Release store of `room`).
    if shared.consumer_gone.load(Ordering::Acquire) || shared.is_stopped() {
        return true;
    }
    steps.step(limit);
    false
}

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

/// Raw zero-copy reservation, for callers that cannot hold a [`Reserved`]
/// borrow between two calls (the C ABI's `dplog_reserve`/`dplog_commit`).
#[cfg(not(loom))]
impl<T: Record> Producer<T> {
    /// Slots from the producer's write position to the end of the slot
    /// array: the most [`reserve_raw`](Self::reserve_raw) can hand out
    /// without wrapping (whether or not they are free).
    #[inline(always)]
    pub fn contiguous_slots(&self) -> usize {
        self.shared.capacity - (self.tail & (self.shared.capacity - 1))
    }

    /// Pointer to the `n` slots at the producer's write position, if they
    /// are free and contiguous in memory (`n <= contiguous_slots()`);
    /// `None` if `n` is 0, would wrap, or fewer than `n` slots are free.
    /// Nothing is published. The slots may hold old records or be
    /// uninitialised: write all `n` before [`commit_raw`](Self::commit_raw).
    /// The pointer stays valid while the producer lives; the slots stay
    /// this producer's until it commits, pushes or reserves again.
    #[inline(always)]
    pub fn reserve_raw(&mut self, n: usize) -> Option<NonNull<T>> {
        // One read of the write position for the bound and the pointer:
        // a producer that C code wrongly shares between threads then still
        // hands out slots inside the array.
        let tail = self.tail;
        // From the slot mask (capacity - 1), which the slot pointer below
        // needs too: the capacity itself is then not loaded at all.
        let mask = self.shared.slots.mask;
        let contiguous = mask - (tail & mask) + 1;
        if n == 0 || n > contiguous || self.free_slots(n) < n {
            return None;
        }
        let p = self.shared.slots.ptr(tail).cast::<T>();
        // The slot array is never null (see `Slots::new`).
        NonNull::new(p)
    }

    /// Opens a window of free slots that code outside Rust fills and
    /// publishes record by record with the ring protocol itself: the
    /// `static inline` `dplog_log` of `include/dplog.h` (as DPDK's
    /// `rte_ring_sp_enqueue_elem` is inline over `struct rte_ring`).
    ///
    /// The window is the slots from the write position up to `max`, cut
    /// at the end of the slot array (no wrap), at the free room, before
    /// the next latency-sampled index (a multiple of [`SAMPLE_EVERY`],
    /// which only a push stamps), and, with
    /// [`set_publish_every`](Self::set_publish_every) above 1, so that
    /// fewer than `publish_every` records are ever pending. `None` when
    /// that leaves no slot (the write position is a sampled index, or the
    /// ring is full): push the next record the ordinary way.
    ///
    /// The writer fills slot `first + i` at `slots + i` in order and, if
    /// [`RawWindow::publish_each`], publishes it by storing `first + i + 1`
    /// to `*tail` with Release ordering (partner: the consumer's Acquire
    /// load of the tail, as for [`publish`](Self::try_push)). The producer
    /// must then be given back the count written with
    /// [`close_window`](Self::close_window) before any other call on it.
    #[inline]
    pub fn open_window(&mut self, max: usize) -> Option<RawWindow<T>> {
        // One read of the write position for every bound and the pointer,
        // as in `reserve_raw`: the window stays inside the slot array.
        let tail = self.tail;
        let to_sample = SAMPLE_EVERY - (tail & (SAMPLE_EVERY - 1));
        if to_sample == SAMPLE_EVERY {
            return None;
        }
        let contiguous = self.shared.capacity - (tail & (self.shared.capacity - 1));
        let mut n = max.min(to_sample).min(contiguous);
        let publish_each = self.publish_every == 1;
        if !publish_each {
            // Keep pending below publish_every with every slot written.
            n = n.min((self.publish_every - 1).saturating_sub(self.pending()));
        }
        if n == 0 {
            return None;
        }
        let n = n.min(self.free_slots(n));
        if n == 0 {
            return None;
        }
        let slots = NonNull::new(self.shared.slots.ptr(tail).cast::<T>())?;
        Some(RawWindow {
            slots,
            len: n,
            first: tail,
            tail: &*self.shared.tail as *const AtomicUsize,
            publish_each,
        })
    }

    /// Takes back a window from [`open_window`](Self::open_window) of which
    /// the first `written` slots were filled (and, with `publish_each`,
    /// published). Counts them as enqueued and publishes them if they are
    /// not yet published and `publish_every` says so.
    ///
    /// # Safety
    /// The last call on this producer was the `open_window` that returned
    /// the window, `written <= len`, and the first `written` slots hold
    /// valid records.
    #[inline]
    pub unsafe fn close_window(&mut self, written: usize) {
        // The window never contains a sampled index, so this stamps
        // nothing; the tail store (if any) repeats or extends the writer's.
        // SAFETY: as commit_raw (slots free when opened, written by the
        // caller's contract).
        unsafe { self.commit_raw(written) };
    }

    /// Publishes the first `n` slots of the last
    /// [`reserve_raw`](Self::reserve_raw) (as [`Reserved::commit`]).
    ///
    /// # Safety
    /// A `reserve_raw(m)` with `m >= n` returned `Some` and no push,
    /// reserve or commit happened on this producer since; the first `n` of
    /// those slots hold valid records written through its pointer.
    #[inline(always)]
    pub unsafe fn commit_raw(&mut self, n: usize) {
        if n > 0 {
            // The slots tail..tail+n are free (checked by reserve_raw) and
            // initialised (caller contract); publish's Release store of the
            // tail pairs with the consumer's Acquire load.
            self.publish(n);
        }
    }
}

/// A run of free ring slots handed to a writer outside Rust by
/// [`Producer::open_window`].
#[cfg(not(loom))]
#[derive(Debug, Clone, Copy)]
pub struct RawWindow<T> {
    /// The first slot of the window; slot `i` is at `slots + i`.
    pub slots: NonNull<T>,
    /// Slots in the window (1 ..= `SAMPLE_EVERY - 1`).
    pub len: usize,
    /// Free-running ring index of the first slot.
    pub first: usize,
    /// The ring's published tail index: store `index + 1` with Release
    /// after writing slot `index` (only when `publish_each`).
    pub tail: *const AtomicUsize,
    /// True when every record is to be published as it is written
    /// (`publish_every == 1`); false when the producer publishes them at
    /// [`Producer::close_window`].
    pub publish_each: bool,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::test_record::TestRecord;
    use crate::record::RecordHeader;

    fn rec(i: u64) -> TestRecord {
        TestRecord {
            timestamp_ns: i,
            header: RecordHeader::of::<TestRecord>(),
            ..Default::default()
        }
    }

    #[test]
    fn drop_reports_split_the_drops_by_reason_exactly_once() {
        let (mut p, mut c) = ring::<TestRecord>(4).unwrap();
        p.count_dropped(DropReason::Degraded, 3, 10);
        p.count_dropped(DropReason::Full, 2, 20);
        let d = c.take_drop_report().unwrap();
        assert_eq!(
            (d.dropped, d.by_reason, d.unattributed()),
            (5, [2, 3, 0, 0], 0)
        );
        assert_eq!(
            d.reasons().collect::<Vec<_>>(),
            [(DropReason::Full, 2), (DropReason::Degraded, 3)]
        );
        assert!(c.take_drop_report().is_none(), "reported once");
        p.count_dropped(DropReason::Degraded, 1, 30);
        let d = c.take_drop_report().unwrap();
        assert_eq!((d.dropped, d.by_reason), (1, [0, 1, 0, 0]));
    }

    #[test]
    fn a_drop_counted_but_not_yet_in_the_total_goes_to_a_later_report() {
        // The total says 4 new drops; the counters already hold a fifth,
        // of another reason, still on its way to the total.
        let mut reported = [1, 0, 0, 0];
        assert_eq!(
            split_by_reason(4, [3, 2, 0, 1], &mut reported),
            [2, 2, 0, 0]
        );
        assert_eq!(reported, [3, 2, 0, 0]);
        // It reaches the total: the next report gives it to its reason.
        assert_eq!(
            split_by_reason(1, [3, 2, 0, 1], &mut reported),
            [0, 0, 0, 1]
        );
        assert_eq!(reported, [3, 2, 0, 1]);
        // Counters that cover less than the total (a corrupted file)
        // leave the rest to no reason.
        let d = DropDelta {
            dropped: 5,
            by_reason: split_by_reason(5, [5, 2, 0, 1], &mut reported),
            ..Default::default()
        };
        assert_eq!((d.by_reason, d.unattributed()), ([2, 0, 0, 0], 3));
    }

    /// CPU time of the calling thread.
    fn thread_cpu() -> std::time::Duration {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec for the call.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        assert_eq!(rc, 0);
        std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }

    #[test]
    fn a_producer_blocked_on_a_stalled_consumer_sleeps_instead_of_burning_its_cpu() {
        let (mut p, mut c) = ring::<TestRecord>(4).unwrap();
        for i in 0..4 {
            p.try_push(rec(i)).unwrap();
        }
        let blocked = std::thread::spawn(move || {
            let (cpu0, wall0) = (thread_cpu(), std::time::Instant::now());
            p.push(rec(4)).unwrap();
            (thread_cpu() - cpu0, wall0.elapsed(), p)
        });
        // The consumer stalls for 400 ms, then makes room.
        std::thread::sleep(std::time::Duration::from_millis(400));
        assert_eq!(c.pop().unwrap().timestamp_ns, 0);
        let (cpu, wall, _p) = blocked.join().unwrap();
        assert!(
            wall >= std::time::Duration::from_millis(390),
            "it waited: {wall:?}"
        );
        // Spinning or yielding the whole time would use about all of it.
        assert!(
            cpu < wall / 4,
            "blocked producer used {cpu:?} of CPU in {wall:?}"
        );
        for i in 1..5 {
            assert_eq!(c.pop().unwrap().timestamp_ns, i);
        }
    }

    /// Writes `n` records into `w` as the inline C `dplog_log` does: slot
    /// by slot, each published with a Release store of its index + 1.
    fn fill_window(w: &RawWindow<TestRecord>, n: usize, ts0: u64) {
        for i in 0..n {
            // SAFETY: slot i < w.len of a window just opened; `tail` points
            // at the ring's live tail index.
            unsafe {
                w.slots.as_ptr().add(i).write(rec(ts0 + i as u64));
                if w.publish_each {
                    (*w.tail).store(w.first + i + 1, Ordering::Release);
                }
            }
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_ring_of_a_mebibyte_or_more_is_mapped_on_huge_page_bounds_and_round_trips() {
        let size = size_of::<TestRecord>();
        let cap = (HUGE_FROM_BYTES / size).next_power_of_two();
        let (mut p, mut c) = ring::<TestRecord>(cap).unwrap();
        let slots = &p.shared.slots;
        assert_eq!(slots.ptr(0) as usize % HUGE_PAGE_BYTES, 0, "2 MiB aligned");
        assert_eq!(slots.mapped, (cap * size).next_multiple_of(HUGE_PAGE_BYTES));
        // Two laps and a bit: every slot written and read back in order.
        let n = 2 * cap as u64 + 17;
        let mut next = 0;
        for i in 0..n {
            while p.try_push(rec(i)).is_err() {
                assert_eq!(c.pop().unwrap().timestamp_ns, next);
                next += 1;
            }
        }
        while let Some(r) = c.pop() {
            assert_eq!(r.timestamp_ns, next);
            next += 1;
        }
        assert_eq!(next, n);
        // A small ring stays with the allocator.
        let (p, _c) = ring::<TestRecord>(64).unwrap();
        assert_eq!(p.shared.slots.mapped, 0);
    }

    #[test]
    fn a_window_stops_before_sampled_indexes_and_its_records_reach_the_consumer_in_order() {
        const S: usize = SAMPLE_EVERY;
        let (mut p, mut c) = ring::<TestRecord>(2 * S).unwrap();
        assert!(
            p.open_window(2 * S).is_none(),
            "index 0 is sampled: a push takes it"
        );
        p.try_push(rec(0)).unwrap();
        let w = p.open_window(2 * S).unwrap();
        assert_eq!(
            (w.first, w.len),
            (1, S - 1),
            "up to the next sampled index, SAMPLE_EVERY"
        );
        assert!(w.publish_each);
        fill_window(&w, 40, 1);
        assert_eq!(c.len(), 41, "each window record is published as written");
        // SAFETY: 40 of the window's slots were written, nothing else ran.
        unsafe { p.close_window(40) };
        assert_eq!(p.pending(), 0);
        let w = p.open_window(5).unwrap();
        assert_eq!((w.first, w.len), (41, 5), "max caps the window");
        fill_window(&w, 5, 41);
        // SAFETY: as above.
        unsafe { p.close_window(5) };
        for i in 46..S as u64 {
            p.try_push(rec(i)).unwrap();
        }
        assert!(p.open_window(8).is_none(), "index SAMPLE_EVERY is sampled");
        p.try_push(rec(S as u64)).unwrap();
        for i in 0..=S as u64 {
            assert_eq!(c.pop().unwrap().timestamp_ns, i);
        }
        assert!(c.pop().is_none());
        assert_eq!(
            p.enqueued(),
            S as u64 + 1,
            "window records count as enqueued"
        );
    }

    #[test]
    fn a_window_never_wraps_nor_passes_the_free_room_nor_the_publication_batch() {
        let (mut p, mut c) = ring::<TestRecord>(64).unwrap();
        for i in 0..60 {
            p.try_push(rec(i)).unwrap();
        }
        for _ in 0..50 {
            c.pop().unwrap();
        }
        let w = p.open_window(100).unwrap();
        assert_eq!(
            (w.first, w.len),
            (60, 4),
            "cut at the end of the slot array"
        );
        fill_window(&w, 4, 60);
        // SAFETY: the four slots were written.
        unsafe { p.close_window(4) };
        p.try_push(rec(64)).unwrap();
        // 65 pushed, 50 popped: 49 free, but the window is also cut at
        // sampled index 128.
        let w = p.open_window(100).unwrap();
        assert_eq!((w.first, w.len), (65, 49), "cut at the free room");
        // SAFETY: nothing written.
        unsafe { p.close_window(0) };

        let (mut p, c) = ring::<TestRecord>(256).unwrap();
        p.set_publish_every(8);
        p.try_push(rec(0)).unwrap();
        p.try_push(rec(1)).unwrap();
        let w = p.open_window(100).unwrap();
        assert!(!w.publish_each);
        assert_eq!(w.len, 5, "2 pending + 5 = 7 < publish_every");
        fill_window(&w, 5, 2);
        assert_eq!(c.len(), 0, "deferred: nothing published by the writer");
        // SAFETY: five slots written.
        unsafe { p.close_window(5) };
        assert_eq!(p.pending(), 7);
        p.try_push(rec(7)).unwrap();
        assert_eq!(c.len(), 8, "the eighth record publishes the batch");
    }

    #[test]
    fn deferred_publication_is_invisible_until_batch_flush_full_or_drop() {
        let (mut p, mut c) = ring::<TestRecord>(8).unwrap();
        p.set_publish_every(4);
        for i in 0..3 {
            p.try_push(rec(i)).unwrap();
        }
        assert_eq!(p.pending(), 3);
        assert_eq!(c.len(), 0, "three of four: nothing published yet");
        p.try_push(rec(3)).unwrap();
        assert_eq!(p.pending(), 0);
        assert_eq!(c.len(), 4, "the fourth push publishes the batch");
        p.try_push(rec(4)).unwrap();
        assert_eq!(c.len(), 4);
        p.flush();
        assert_eq!(c.len(), 5, "flush publishes the pending record");
        p.flush();
        assert_eq!(c.len(), 5, "a second flush is a no-op");
        // Fill the ring: 3 more fit (capacity 8); the push that finds it
        // full publishes what is pending before it fails.
        for i in 5..8 {
            p.try_push(rec(i)).unwrap();
        }
        assert_eq!(c.len(), 5);
        assert!(p.try_push(rec(8)).is_err());
        assert_eq!(c.len(), 8, "a full ring publishes the pending records");
        let mut seen = Vec::new();
        c.read_burst(8, |r| seen.push(r.timestamp_ns));
        assert_eq!(seen, (0..8).collect::<Vec<_>>());
        p.try_push(rec(8)).unwrap();
        assert_eq!(c.len(), 0);
        drop(p);
        assert_eq!(c.pop().map(|r| r.timestamp_ns), Some(8), "drop flushes");
        assert!(c.is_finished());
    }

    #[test]
    fn publish_every_is_clamped_and_lowering_it_publishes() {
        let (mut p, c) = ring::<TestRecord>(4).unwrap();
        p.set_publish_every(1000);
        for i in 0..3 {
            p.try_push(rec(i)).unwrap();
        }
        assert_eq!(c.len(), 0);
        p.try_push(rec(3)).unwrap();
        assert_eq!(c.len(), 4, "clamped to the capacity (4)");
        let (mut p, c) = ring::<TestRecord>(4).unwrap();
        p.set_publish_every(4);
        p.try_push(rec(0)).unwrap();
        p.try_push(rec(1)).unwrap();
        assert_eq!(c.len(), 0);
        p.set_publish_every(2);
        assert_eq!(
            c.len(),
            2,
            "lowering the batch below the pending count publishes"
        );
        p.set_publish_every(0);
        p.try_push(rec(2)).unwrap();
        assert_eq!(c.len(), 3, "0 means every push");
    }

    /// Publishes `index` as the ring's tail, as a misbehaving writer of the
    /// shared index would.
    fn publish_raw(p: &Producer<TestRecord>, index: usize) {
        p.shared.tail.store(index, Ordering::Release);
    }

    #[test]
    fn a_fill_above_the_capacity_stops_the_ring_after_the_records_accepted_before() {
        let (mut p, mut c) = ring::<TestRecord>(8).unwrap();
        for i in 0..5 {
            p.try_push(rec(i)).unwrap();
        }
        let mut seen = vec![];
        assert_eq!(c.read_burst(3, |r| seen.push(r.timestamp_ns)), 3);
        // Consumer at 3, indices up to 5 accepted: 3 + 8 = 11 is the
        // highest valid tail.
        publish_raw(&p, 12);
        while c.read_burst(8, |r| seen.push(r.timestamp_ns)) > 0 {}
        assert_eq!(seen, vec![0, 1, 2, 3, 4], "each accepted record once");
        assert!(c.is_stopped() && p.is_stopped());
        assert_eq!(
            c.read_burst(8, |_| panic!("a stopped ring is never read")),
            0
        );
        // Every later call fails at once, though the producer's own view
        // still has room for 3 (it cached the consumer index 0): with an
        // unbounded wait, a push that waited would never return.
        p.set_block_spins(u32::MAX);
        for i in 5..13 {
            assert_eq!(p.try_push(rec(i)), Err(rec(i)));
            assert_eq!(p.push(rec(i)), Err(Disconnected(rec(i))));
        }
        assert_eq!(p.try_push_burst(&[rec(13), rec(14)]), 0);
        assert_eq!(p.try_push_bulk(&[rec(13)]), 0);
        assert_eq!(p.push_burst(&[rec(13), rec(14)]), Err(Disconnected(0)));
        assert!(p.reserve(1).is_none());
        assert!(p.reserve(usize::MAX).is_none());
        assert!(p.reserve_burst(usize::MAX).is_empty());
        assert!(p.reserve_raw(1).is_none());
        assert_eq!(p.enqueued(), 5);
        assert_eq!(
            c.read_burst(8, |_| panic!("a stopped ring is never read")),
            0
        );
        let s = crate::stats::RingStats::read(0, &p.shared);
        assert!(s.stopped);
        assert_eq!(
            (s.enqueued, s.dequeued, s.dropped_stopped, s.fill, s.produced),
            (5, 5, 0, 0, 5),
            "enqueued is what the consumer accepted; nothing was written after it (the refused records are the caller's, counted by the policy layer)"
        );
        assert_eq!(c.shared.bad_tail.load(Ordering::Relaxed), 12);
    }

    #[test]
    fn records_written_after_the_stop_point_count_as_dropped_stopped_once() {
        let (mut p, mut c) = ring::<TestRecord>(2 * SAMPLE_EVERY).unwrap();
        for i in 0..5 {
            p.try_push(rec(i)).unwrap();
        }
        // An inline window open before the stop, as the C header's
        // dplog_log holds one.
        let w = p.open_window(16).unwrap();
        assert_eq!(w.first, 5);
        assert_eq!(c.read_burst(8, |_| {}), 5);
        // A bad index breaks the protocol: the consumer, which accepted
        // 5, stops the ring at its next look.
        p.publish_raw_index(5 + 2 * SAMPLE_EVERY + 1);
        assert_eq!(c.read_burst(8, |_| panic!("nothing more is read")), 0);
        assert!(c.is_stopped());
        let stats = |p: &Producer<TestRecord>| crate::stats::RingStats::read(0, &p.shared);
        assert_eq!(
            stats(&p).dropped_stopped,
            0,
            "the published tail is still the bad index: nothing counted from it"
        );
        // The window's writer goes on, unaware: 3 records after the stop
        // point, published, never read.
        fill_window(&w, 3, 5);
        let s = stats(&p);
        assert_eq!(
            (s.enqueued, s.dropped_stopped, s.produced),
            (5, 3, 8),
            "estimated from the published tail before the producer knows"
        );
        // SAFETY: 3 of the window's slots were written, nothing else ran.
        unsafe { p.close_window(3) };
        assert_eq!(p.try_push(rec(8)), Err(rec(8)), "the next call fails");
        let s = stats(&p);
        assert_eq!((s.enqueued, s.dropped_stopped, s.produced), (5, 3, 8));
        assert_eq!(p.shared.stranded.load(Ordering::Relaxed), 3, "settled");
        assert!(p.open_window(16).is_none());
        assert_eq!(p.try_push(rec(8)), Err(rec(8)));
        let shared = p.shared.clone();
        drop(p);
        let s = crate::stats::RingStats::read(0, &shared);
        assert_eq!(
            (s.enqueued, s.dequeued, s.dropped_stopped, s.produced),
            (5, 5, 3, 8),
            "the drop settles again: each record counted once"
        );
        assert!(c.is_finished());
    }

    #[test]
    fn a_tail_that_moves_backwards_stops_the_ring_and_nothing_is_read_twice() {
        let (mut p, mut c) = ring::<TestRecord>(8).unwrap();
        for i in 0..6 {
            p.try_push(rec(i)).unwrap();
        }
        let mut seen = vec![];
        while c.read_burst(4, |r| seen.push(r.timestamp_ns)) > 0 {}
        assert_eq!(seen, (0..6).collect::<Vec<_>>());
        // Behind the consumer: without the check, 2 - 6 wraps to a huge
        // fill and the consumer reads stale slots for ever.
        publish_raw(&p, 2);
        assert_eq!(c.read_burst(8, |r| seen.push(r.timestamp_ns)), 0);
        assert!(c.is_stopped());
        assert!(p.is_stopped());
        assert!(!c.is_finished(), "its producer is live");
        assert_eq!(seen.len(), 6);
        // Behind what the consumer accepted but not behind its head: also
        // a violation.
        let (mut p, mut c) = ring::<TestRecord>(8).unwrap();
        for i in 0..6 {
            p.try_push(rec(i)).unwrap();
        }
        assert_eq!(c.read_burst(2, |_| {}), 2);
        publish_raw(&p, 4);
        let mut n = 2;
        while c.read_burst(8, |_| n += 1) > 0 {}
        assert!(c.is_stopped(), "the reload sees 4 < 6");
        assert_eq!(n, 6, "2..6 were accepted before: read, once");
        drop(p);
        assert!(c.is_finished(), "a stopped ring ends with its producer");
    }

    #[test]
    fn a_valid_tail_at_exactly_the_capacity_is_accepted() {
        let (mut p, mut c) = ring::<TestRecord>(4).unwrap();
        for round in 0..3u64 {
            for i in 0..4 {
                p.try_push(rec(round * 4 + i)).unwrap();
            }
            let mut n = 0;
            while c.read_burst(3, |_| n += 1) > 0 {}
            assert_eq!(n, 4);
        }
        assert!(!c.is_stopped());
    }

    #[test]
    fn bad_capacities_are_errors() {
        for c in [0usize, 3, 6, 1000, MAX_CAPACITY * 2] {
            assert_eq!(ring::<TestRecord>(c).err(), Some(RingError::BadCapacity(c)));
        }
        assert!(ring::<TestRecord>(1).is_ok());
    }

    #[test]
    fn a_ring_of_n_holds_exactly_n() {
        for cap in [1usize, 2, 16, 1024] {
            let (mut p, mut c) = ring::<TestRecord>(cap).unwrap();
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
        let (mut p, mut c) = ring::<TestRecord>(8).unwrap();
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
        let (mut p, mut c) = ring::<TestRecord>(64).unwrap();
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
        let (mut p, c) = ring::<TestRecord>(1).unwrap();
        p.push(rec(1)).unwrap();
        drop(c);
        assert_eq!(p.push(rec(2)), Err(Disconnected(rec(2))));
    }

    #[test]
    fn bulk_is_all_or_nothing_and_reserve_commit_publishes_once() {
        let (mut p, mut c) = ring::<TestRecord>(8).unwrap();
        let six: Vec<_> = (0..6).map(rec).collect();
        assert_eq!(p.try_push_bulk(&six), 6);
        assert_eq!(p.try_push_bulk(&six[..3]), 0, "only 2 free: nothing pushed");
        assert_eq!(c.len(), 6);
        assert!(p.reserve(3).is_none());
        {
            let mut r = p.reserve(2).unwrap();
            assert_eq!(r.len(), 2);
            r.push(rec(100)).unwrap();
            r.get_mut(0).unwrap().src_port = 7;
            assert!(r.get_mut(1).is_none());
            // Dropped uncommitted: nothing published.
        }
        assert_eq!(c.len(), 6);
        let mut r = p.reserve(2).unwrap();
        r.push(rec(6)).unwrap();
        r.get_mut(0).unwrap().src_port = 7;
        r.push(rec(7)).unwrap();
        assert_eq!(r.push(rec(8)), Err(rec(8)));
        assert_eq!(r.commit(), 2);
        assert_eq!(p.enqueued(), 8);
        let mut out = [TestRecord::default(); 5];
        assert_eq!(c.pop_bulk(&mut out), 5);
        let mut out9 = [TestRecord::default(); 9];
        assert_eq!(c.pop_bulk(&mut out9), 0, "only 3 left: nothing popped");
        assert_eq!(c.pop_burst(&mut out9), 3);
        assert_eq!(
            out9[..3].iter().map(|r| r.timestamp_ns).collect::<Vec<_>>(),
            vec![5, 6, 7]
        );
        assert_eq!(out9[1].src_port, 7, "edited in its slot before commit");
    }

    #[test]
    fn zero_copy_read_spans_the_wrap_and_releases_once() {
        let (mut p, mut c) = ring::<TestRecord>(4).unwrap();
        assert_eq!(p.try_push_burst(&[rec(0), rec(1), rec(2)]), 3);
        assert_eq!(c.read_burst(3, |_| {}), 3);
        assert_eq!(p.try_push_burst(&[rec(3), rec(4), rec(5), rec(6)]), 4);
        {
            let b = c.read(10);
            assert_eq!(b.len(), 4);
            let (x, y) = b.as_slices();
            assert_eq!(
                x.iter().map(|r| r.timestamp_ns).collect::<Vec<_>>(),
                vec![3]
            );
            assert_eq!(
                y.iter().map(|r| r.timestamp_ns).collect::<Vec<_>>(),
                vec![4, 5, 6]
            );
            // Not released at the end of this scope.
        }
        assert_eq!(c.len(), 4, "not released: records stay");
        assert!(p.try_push(rec(9)).is_err());
        let b = c.read(2);
        assert_eq!(b.release(), 2);
        assert_eq!(p.try_push_burst(&[rec(7), rec(8), rec(9)]), 2);
        let mut seen = vec![];
        c.read_burst(10, |r| seen.push(r.timestamp_ns));
        assert_eq!(seen, vec![5, 6, 7, 8]);
        assert!(c.read(4).is_empty());
    }
}
