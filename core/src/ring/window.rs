//! Raw reservations and windows of an SPSC producer, for writers outside
//! Rust that cannot hold a [`Reserved`](super::Reserved) borrow between
//! two calls (the C ABI).

use core::ptr::NonNull;

#[cfg(doc)]
use super::Reserved;
use super::{AtomicUsize, Producer, SAMPLE_EVERY};
use crate::record::Record;

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
