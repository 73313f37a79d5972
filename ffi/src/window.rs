//! The inline window (`struct dplog_log_window`, the first bytes of every
//! producer): the run of ring slots that the header's `static inline`
//! `dplog_log`, `dplog_reserve` and `dplog_commit` (`include/dplog_inline.h`)
//! fill without a call into the library, and its layout checks. The
//! library opens and takes back a producer's window in `crate::producer`,
//! which owns the producer state a window is opened from.

use std::sync::atomic::AtomicPtr;

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
/// if `ring_tail` is not NULL, stores `next_index` to `*ring_tail` with
/// release ordering (partner: the consumer's acquire load of the ring's
/// tail). The slot's
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
/// 4095 slots, never wraps, never covers a latency-sampled ring index
/// (one in 4096, which the library stamps) and, with `[ring] publish_every` above
/// 1, never lets more than `publish_every - 1` records wait unpublished.
/// The 64 bytes from `cursor` are always the producer's: a window of
/// 32-byte slots ends one slot before the free slots the producer holds,
/// so the inline `dplog_reserve` may zero 64 bytes for every record size
/// (and 128 for a record above 64 bytes, in a 128-byte slot).
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
    /// The ring's published tail index (a free-running count of records)
    /// when the inline path publishes each record (`publish` is 1); NULL
    /// when the library publishes the window's records (`publish` 0), so
    /// the inline path tests this one field for both.
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
    /// The inline `dplog_reserve` of one record, while the slot at
    /// `cursor` is reserved (its record's bytes zeroed and handed out): 1
    /// for a record of the window's own schema (its key is `last`), else
    /// `schema_id << 16 | size` (as `last`, and the low half of the
    /// record's header; the size is never below 8, so a key is never 0 or
    /// 1 and the inline `dplog_commit` needs no table lookup); 0 when
    /// nothing is reserved. The inline `dplog_commit` writes the header
    /// and publishes the record; while it is set, the inline `dplog_log`
    /// and `dplog_reserve` call into the library (which reports
    /// `DPLOG_ERR_STATE`, as for any pending reservation).
    pub reservation: u32,
}

// The header's inline code casts a `struct dplog_producer *` to the window
// and reads these offsets (repr(C), first field).
const _: () = assert!(core::mem::offset_of!(dplog_log_window, end) == size_of::<usize>());
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
