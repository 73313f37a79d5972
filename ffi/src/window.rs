//! The inline window (`struct dplog_log_window`, the first bytes of every
//! producer): the run of ring slots that the header's `static inline`
//! `dplog_log`, `dplog_reserve` and `dplog_commit` (`include/dplog_inline.h`)
//! fill without a call into the library; its layout checks, and how the
//! library opens it and takes it back.

use std::sync::atomic::{AtomicPtr, Ordering};

use crate::producer::{dplog_producer_t, ProducerState};
use crate::reserve::Reservation;
use crate::slots::AnyProducer;

/// The first bytes of every `struct dplog_producer`: a run of free ring
/// slots that the `static inline` `dplog_log` of `dplog.h` fills without a
/// call into the library, as DPDK's inline `rte_ring_sp_enqueue_elem`
/// writes `struct rte_ring` (layout part of the ABI; it changes only with
/// `DPLOG_VERSION_MAJOR`).
///
/// Producers of loggers of every slot size (`[ring] slot_bytes` = 32, 64
/// or 128) open windows, for every schema the handle serves; a producer of
/// a shared-memory ring (`dplog_attach`) never does (`cursor` stays NULL
/// and every inline call goes to the library).
///
/// The inline path, on the producer's own thread: if `p`, `rec` are not
/// NULL, `(schema_id << 16) | len` is `last`, or else `schema_id <
/// n_sizes` and `sizes[schema_id] == len` (the schema's record size; 0
/// for a schema not served), no inline reservation is
/// pending and `cursor < end` (unsigned compare; `end` read with a relaxed
/// atomic load), it writes the 8-byte record header (`len`, `schema_id`,
/// 4 zero bytes, little-endian) and bytes 8..len of `rec` to the slot at
/// `cursor`, advances `cursor` by `slot_bytes` and `next_index` by 1 and,
/// if `publish`, stores `next_index` to `*ring_tail` with release ordering
/// (partner: the consumer's acquire load of the ring's tail). The slot's
/// bytes past `len` are left as they are (the consumer reads `len`
/// bytes). Anything else calls `dplog_log_refill`, which logs the record as
/// the exported `dplog_log` does and opens a new window. `dplog_reserve` of
/// one record and its `dplog_commit` are inline the same way
/// (`reservation`), with `dplog_reserve_refill` and the exported
/// `dplog_commit` behind them.
///
/// Every other call on the producer first takes the window back
/// (counting its records as enqueued) and leaves it empty (`cursor` and
/// `end` NULL); so does `dplog_close`, which sets `end` to NULL from its
/// own thread (hence the atomic access). A window never holds more than
/// 1023 slots, never wraps, never covers a latency-sampled ring index
/// (one in 1024, which the library stamps) and, with `[ring] publish_every` above
/// 1, never lets more than `publish_every - 1` records wait unpublished.
///
/// The consumer trusts no index published here: a `*ring_tail` more than
/// the ring's capacity ahead of what it has read, or behind what it has
/// already accepted, stops the ring (`DPLOG_ERR_RING_STOPPED`). A window
/// used by two threads at once is undefined behaviour (slots may be
/// written outside the window); the check only keeps the consumer from
/// reading a slot twice or looping on stale slots.
#[repr(C)]
#[derive(Debug)]
pub struct dplog_log_window {
    /// Next slot to write (`slot_bytes` bytes, 8-byte aligned); NULL when
    /// no window is open. Written only by the producer's thread.
    pub cursor: *mut u8,
    /// One past the window's last slot; NULL when no window is open.
    /// Atomic (relaxed): `dplog_close` clears it from another thread.
    pub end: *mut u8,
    /// The ring's published tail index (a free-running count of records).
    pub ring_tail: *mut usize,
    /// Ring index of the slot at `cursor` (free-running).
    pub next_index: usize,
    /// Record size in bytes by schema id, `n_sizes` entries: entry `s` is
    /// the size of a record of schema `s` (8 to `slot_bytes`), 0 for an id
    /// the handle does not serve. Valid while a window is open.
    pub sizes: *const u8,
    /// Entries in `sizes` (one more than the largest id served).
    pub n_sizes: u32,
    /// The ring's slot size in bytes (32, 64 or 128): the distance from
    /// one slot to the next.
    pub slot_bytes: u32,
    /// 1: publish each record as it is written (`publish_every = 1`); 0:
    /// the library publishes the window's records when it takes it back.
    pub publish: u32,
    /// `(schema_id << 16) | record size` of the schema whose record
    /// opened the window: a record of that schema is checked with this
    /// one compare instead of a look-up in `sizes`.
    pub last: u32,
    /// The inline `dplog_reserve` of one record: `0x10000 | schema_id`
    /// while the slot at `cursor` is reserved (zeroed and handed out), 0
    /// otherwise. The inline `dplog_commit` writes its header and
    /// publishes it; while it is set, the inline `dplog_log` and
    /// `dplog_reserve` call into the library (which reports
    /// `DPLOG_ERR_STATE`, as for any pending reservation).
    pub reservation: u32,
}

// The header's inline code casts a `struct dplog_producer *` to the window
// and reads these offsets (repr(C), first field).
const _: () = {
    assert!(core::mem::offset_of!(dplog_producer_t, window) == 0);
    assert!(core::mem::offset_of!(dplog_log_window, end) == size_of::<usize>());
};
#[cfg(target_pointer_width = "64")]
const _: () = assert!(
    core::mem::offset_of!(dplog_log_window, sizes) == 32
        && core::mem::offset_of!(dplog_log_window, reservation) == 56
        && size_of::<dplog_log_window>() == 64
);

impl dplog_log_window {
    pub(crate) const EMPTY: Self = Self {
        cursor: core::ptr::null_mut(),
        end: core::ptr::null_mut(),
        ring_tail: core::ptr::null_mut(),
        next_index: 0,
        sizes: core::ptr::null(),
        n_sizes: 0,
        slot_bytes: 0,
        publish: 0,
        last: 0,
        reservation: 0,
    };
}

/// The atomic view of a window's `end` field.
///
/// # Safety
/// `w` points at a live (never deallocated) window.
#[inline(always)]
pub(crate) unsafe fn window_end<'a>(w: *mut dplog_log_window) -> &'a AtomicPtr<u8> {
    // SAFETY: `end` is a pointer-aligned `*mut u8`, accessed only
    // atomically (here and in the header's inline code); the window is
    // never deallocated (caller contract).
    unsafe { AtomicPtr::from_ptr(core::ptr::addr_of_mut!((*w).end)) }
}

/// Takes the producer's inline window back, if one is open: the records
/// the inline `dplog_log` wrote count as enqueued (and are published per
/// `publish_every`), and the window is left empty. Called first by every
/// producer call.
///
/// # Safety
/// `obj` is a producer used by the calling thread only; `st` is its state.
#[inline]
pub(crate) unsafe fn take_window(obj: &dplog_producer_t, st: &mut ProducerState) {
    let w = obj.window.get();
    // SAFETY: single-thread rule: only this thread writes cursor and
    // next_index; `end` is accessed atomically.
    unsafe {
        if (*w).cursor.is_null() {
            return;
        }
        let written = (*w).next_index.wrapping_sub(st.window_first);
        let reserved = (*w).cursor;
        let reservation = core::mem::take(&mut (*w).reservation);
        // Relaxed: the owner's own store; close may have nulled it already.
        window_end(w).store(core::ptr::null_mut(), Ordering::Relaxed);
        (*w).cursor = core::ptr::null_mut();
        // The inline path wrote `written` records into the window that
        // open_window handed out, and nothing else touched the producer.
        st.prod.close_window(written);
        if reservation != 0 {
            // An inline dplog_reserve holds the next slot, which is now the
            // producer's write position, free (it was in the window) and
            // zeroed: exactly a reserve_raw(1), so it becomes the pending
            // reservation that dplog_commit (or free) completes.
            st.reservation = Reservation::Ring {
                slots: reserved,
                n: 1,
            };
            st.reserved_schema = reservation as u16;
            st.reserved_size = st.sizes.get(st.reserved_schema);
            st.fast_path = false;
        }
    }
}

/// Opens a new inline window after `dplog_log_refill` logged a record of
/// `schema_id`, when the handle serves that schema, the producer's policy
/// allows a window (`block` or `drop`, no reservation), its ring is one of
/// this process (not attached) and the logger is not closed.
///
/// # Safety
/// As `take_window`; no window is open.
#[inline(never)]
pub(crate) unsafe fn open_window(obj: &dplog_producer_t, st: &mut ProducerState, schema_id: u16) {
    // Only for a record the inline path can log: a window that the next
    // call would give back at once costs more than it saves.
    if !st.fast_path || st.sizes.get(schema_id) == 0 {
        return;
    }
    let Some(win) = (match &mut st.prod {
        AnyProducer::S32(p) => p.open_window(usize::MAX).map(Window::of),
        AnyProducer::S64(p) => p.open_window(usize::MAX).map(Window::of),
        AnyProducer::S128(p) => p.open_window(usize::MAX).map(Window::of),
        AnyProducer::M32(_) | AnyProducer::M64(_) | AnyProducer::M128(_) => None,
    }) else {
        return;
    };
    let table = st.sizes.table();
    let w = obj.window.get();
    st.window_first = win.first;
    // SAFETY: single-thread rule (cursor, next_index, ring_tail, publish,
    // last, sizes, n_sizes, slot_bytes are only written by this thread); the
    // slots are the window's (open_window), `len` of them of `slot_bytes`
    // each from `start`; `sizes` points into the producer's own
    // `Arc<SchemaSizes>`, which outlives every window it opens (the window
    // is taken back before the state is dropped).
    unsafe {
        (*w).ring_tail = win.tail;
        (*w).next_index = win.first;
        (*w).sizes = table.as_ptr();
        (*w).n_sizes = table.len() as u32;
        (*w).slot_bytes = win.slot_bytes as u32;
        (*w).publish = u32::from(win.publish_each);
        (*w).last = u32::from(schema_id) << 16 | st.sizes.get(schema_id) as u32;
        (*w).cursor = win.start;
        // SeqCst, with the SeqCst load of `closed` below, against
        // dplog_close's SeqCst store of `closed` then of `end`: either this
        // thread sees `closed`, or close's NULL store comes after this one.
        window_end(w).store(win.start.add(win.len * win.slot_bytes), Ordering::SeqCst);
    }
    if st.shared.closed.load(Ordering::SeqCst) {
        // SAFETY: the window just opened, nothing written.
        unsafe { take_window(obj, st) };
    }
}

/// A `RawWindow` of any slot type, as bytes.
struct Window {
    start: *mut u8,
    len: usize,
    slot_bytes: usize,
    first: usize,
    tail: *mut usize,
    publish_each: bool,
}

impl Window {
    fn of<S: dplog::Slot>(w: dplog::RawWindow<S>) -> Self {
        Self {
            start: w.slots.as_ptr().cast::<u8>(),
            len: w.len,
            slot_bytes: S::BYTES,
            first: w.first,
            tail: w.tail.cast_mut().cast::<usize>(),
            publish_each: w.publish_each,
        }
    }
}
