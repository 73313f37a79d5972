//! The producer handle (`struct dplog_producer`): its object and state
//! (with its pending reservation), the lookups every producer call starts
//! with, the debug-build check that one thread at a time uses it, how the
//! library opens and takes back its inline window, and
//! `dplog_producer_new` / `dplog_producer_free`.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::handle::{dplog_t, logger, Shared, State};
use crate::result::{
    dplog_result, fail, guard, logger_error, DPLOG_ERR_CLOSED, DPLOG_ERR_NULL,
    DPLOG_ERR_RING_IN_USE, DPLOG_ERR_STATE, DPLOG_OK,
};
use crate::sizes::SchemaSizes;
use crate::slots::AnyProducer;
use crate::tombstone::{bury, check_magic, lock, MAGIC_DEAD, MAGIC_LIVE};
use crate::types::{DPLOG_RECORD_MAX_SIZE, DPLOG_RESERVE_MAX};
use crate::window::{dplog_log_window, window_end};

/// Opaque producer handle: one SPSC ring into one logger, for one
/// forwarding core. Created by `dplog_producer_new`, destroyed by
/// `dplog_producer_free`. It begins with its [`dplog_log_window`], which
/// the header's inline `dplog_log` reads; the rest is private.
///
/// cbindgen:ignore
#[repr(C)]
pub struct dplog_producer_t {
    pub(crate) window: UnsafeCell<dplog_log_window>,
    pub(crate) magic: AtomicU32,
    pub(crate) inner: UnsafeCell<Option<ProducerState>>,
    /// Debug builds: the thread inside a library call on this producer
    /// (its [`thread_token`]), 0 when none; see [`guard_producer`].
    #[cfg(debug_assertions)]
    pub(crate) user: core::sync::atomic::AtomicUsize,
}

impl core::fmt::Debug for dplog_producer_t {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Relaxed: a diagnostic snapshot (partner: none needed); the state
        // itself belongs to the producer's thread and is not read here.
        f.debug_struct("dplog_producer_t")
            .field(
                "magic",
                &self.magic.load(core::sync::atomic::Ordering::Relaxed),
            )
            .finish_non_exhaustive()
    }
}

// The header's inline code casts a `struct dplog_producer *` to its window
// (repr(C), first field).
const _: () = assert!(core::mem::offset_of!(dplog_producer_t, window) == 0);

/// A live producer's state: its ring, its logger's shared state, its
/// policy and the pending reservation (`None` in [`dplog_producer_t`]
/// once freed).
pub(crate) struct ProducerState {
    /// The ring, of the logger's slot type.
    pub(crate) prod: AnyProducer,
    pub(crate) ring_id: u32,
    pub(crate) shared: Arc<Shared>,
    pub(crate) sizes: Arc<SchemaSizes>,
    /// The policy may drop (`drop` or `degrade`), so a refused record means
    /// "full", not "consumer gone".
    pub(crate) drop_policy: bool,
    /// `block` or `drop`, and no reservation pending: a successful
    /// `try_push` is the whole of `log`.
    pub(crate) fast_path: bool,
    /// `block` or `drop` (what `fast_path` returns to after a commit).
    pub(crate) fast_path_policy: bool,
    /// Staging slots of `dplog_reserve` when it cannot hand out ring slots,
    /// allocated on first use.
    pub(crate) staging: Option<Box<Staging>>,
    /// The pending reservation, and its schema and record size.
    pub(crate) reservation: Reservation,
    pub(crate) reserved_schema: u16,
    pub(crate) reserved_size: usize,
    /// Ring index of the first slot of the open inline window.
    pub(crate) window_first: usize,
}

impl Drop for ProducerState {
    fn drop(&mut self) {
        if let Some(c) = self.prod.attached_counts() {
            let mut a = lock(&self.shared.attached);
            a.enqueued += c.enqueued;
            a.dropped_full += c.dropped_full;
            a.dropped_degraded += c.dropped_degraded;
            a.dropped_disconnected += c.dropped_disconnected;
            a.dropped_stopped += c.dropped_stopped;
            a.rings += c.rings;
        }
        lock(&self.shared.windows).remove(&self.ring_id);
        lock(&self.shared.rings).remove(&self.ring_id);
    }
}

/// Staging slots of a reservation that cannot be zero-copy (64-byte
/// aligned; record `i` at `i * slot_bytes`, as in the ring; room for the
/// largest slot).
#[repr(C, align(64))]
pub(crate) struct Staging(pub(crate) [u8; DPLOG_RECORD_MAX_SIZE * DPLOG_RESERVE_MAX]);

/// Where a pending reservation lives.
pub(crate) enum Reservation {
    /// Nothing reserved.
    None,
    /// `n` slots of the ring itself (of the producer's slot size), at the
    /// producer's write position (`Producer::reserve_raw`).
    Ring { slots: *mut u8, n: usize },
    /// `n` slots of the producer's staging area, copied at commit.
    Staging { n: usize },
}

/// # Safety
/// `p` is NULL or a pointer returned by `dplog_producer_new`, used by one
/// thread at a time.
#[inline(always)]
pub(crate) unsafe fn producer<'a>(
    p: *mut dplog_producer_t,
) -> Result<&'a mut ProducerState, dplog_result> {
    if p.is_null() {
        return Err(fail(DPLOG_ERR_NULL, "producer is NULL"));
    }
    // SAFETY: non-NULL and returned by dplog_producer_new; producers are
    // never deallocated (see TOMBSTONES).
    let obj = unsafe { &*p };
    check_magic(&obj.magic, "dplog producer")?;
    // SAFETY: the producer is used by one thread at a time (documented
    // contract), so this is the only reference to its state.
    match unsafe { &mut *obj.inner.get() } {
        Some(st) => {
            // SAFETY: as above; st is obj's state.
            unsafe { take_window(obj, st) };
            // Relaxed: a hint; the partner is the Release store in
            // dplog_close. A record racing with close is either drained
            // or counted in in_flight.
            if st.shared.closed.load(Ordering::Relaxed) {
                return Err(fail(DPLOG_ERR_CLOSED, "the producer's logger is closed"));
            }
            Ok(st)
        }
        None => Err(fail(DPLOG_ERR_CLOSED, "dplog producer is freed")),
    }
}

/// A live producer's object and state with its inline window taken back;
/// `None` for NULL, a freed or a foreign pointer (the caller's full path
/// then reports it).
///
/// # Safety
/// `p` is NULL or returned by `dplog_producer_new`, used by the calling
/// thread only.
#[inline(always)]
pub(crate) unsafe fn live_taken<'a>(
    p: *mut dplog_producer_t,
) -> Option<(&'a dplog_producer_t, &'a mut ProducerState)> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-NULL and returned by dplog_producer_new (caller
    // contract); producers are never deallocated (see TOMBSTONES).
    let obj = unsafe { &*p };
    // Relaxed: as `check_magic` (partner: the Release store in free).
    if obj.magic.load(Ordering::Relaxed) != MAGIC_LIVE {
        return None;
    }
    // SAFETY: single-thread rule: the only reference to the state.
    let st = unsafe { &mut *obj.inner.get() }.as_mut()?;
    // SAFETY: as above; st is obj's state.
    unsafe { take_window(obj, st) };
    Some((obj, st))
}

/// [`guard`] for a call on producer `p`. Debug builds also check that no
/// other thread is inside a library call on the same producer (a producer
/// is used by one thread at a time): the call then fails with
/// [`DPLOG_ERR_STATE`] and changes nothing. Release builds check nothing
/// (no cost on the hot path); the consumer's index validation is what
/// limits the damage there.
#[inline(always)]
pub(crate) fn guard_producer<F: FnOnce() -> dplog_result>(
    p: *mut dplog_producer_t,
    f: F,
) -> dplog_result {
    #[cfg(debug_assertions)]
    {
        guard(|| {
            // SAFETY: p is NULL or returned by dplog_producer_new (the
            // exported functions' contract); producers are never
            // deallocated.
            let _in_use = match unsafe { ProducerInUse::enter(p) } {
                Ok(u) => u,
                Err(e) => return e,
            };
            f()
        })
    }
    #[cfg(not(debug_assertions))]
    {
        let _ = p;
        guard(f)
    }
}

/// A token unique to the calling thread while it lives: the address of a
/// thread-local.
#[cfg(debug_assertions)]
fn thread_token() -> usize {
    thread_local! {
        static TOKEN: u8 = const { 0 };
    }
    TOKEN.with(|t| t as *const u8 as usize)
}

/// Debug builds: the calling thread's claim on a producer for one library
/// call; nested calls on the same thread (a refill calling the exported
/// function) share the outer claim.
#[cfg(debug_assertions)]
struct ProducerInUse<'a>(Option<&'a core::sync::atomic::AtomicUsize>);

#[cfg(debug_assertions)]
impl ProducerInUse<'_> {
    /// # Safety
    /// `p` is NULL or returned by `dplog_producer_new`.
    unsafe fn enter<'a>(p: *mut dplog_producer_t) -> Result<ProducerInUse<'a>, dplog_result> {
        if p.is_null() {
            return Ok(ProducerInUse(None));
        }
        // SAFETY: caller contract; producers are never deallocated.
        let obj = unsafe { &*p };
        // Relaxed: as `check_magic`; a foreign pointer is left to the
        // call's own checks.
        if obj.magic.load(Ordering::Relaxed) != MAGIC_LIVE {
            return Ok(ProducerInUse(None));
        }
        let me = thread_token();
        // Acquire pairs with the Release store of the thread leaving its
        // call, so its writes to the producer are visible to this one.
        match obj
            .user
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => Ok(ProducerInUse(Some(&obj.user))),
            Err(owner) if owner == me => Ok(ProducerInUse(None)),
            Err(_) => Err(fail(
                DPLOG_ERR_STATE,
                "the producer is in use by another thread at this moment (a producer belongs to one thread at a time; checked in debug builds)",
            )),
        }
    }
}

#[cfg(debug_assertions)]
impl Drop for ProducerInUse<'_> {
    fn drop(&mut self) {
        if let Some(u) = self.0 {
            // Release pairs with the next caller's Acquire exchange.
            u.store(0, Ordering::Release);
        }
    }
}

/// Creates a producer for ring `ring_id` (any number the caller chooses,
/// typically the lcore or worker index): a new SPSC ring of `[ring]
/// capacity` slots of `[ring] slot_bytes` (64 by default) drained by the
/// logger's consumer. Use it from
/// one thread (core) at a time: a producer shared by two threads at once
/// loses records, and once its ring index breaks the protocol the consumer
/// stops the ring (see `DPLOG_ERR_RING_STOPPED`).
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_STATE` (not started yet),
/// `DPLOG_ERR_CLOSED`, `DPLOG_ERR_RING_IN_USE` (`ring_id` has a live
/// producer; free it first), `DPLOG_ERR_CONSUMER_GONE`. `*out` is written
/// only on success.
///
/// Ownership: the caller owns the producer and releases it with
/// `dplog_producer_free`, before or after `dplog_close` (after close it
/// only returns `DPLOG_ERR_CLOSED`). Thread-safety: any thread.
///
/// # Safety
/// `h` is NULL or returned by `dplog_open*`; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_producer_new(
    h: *mut dplog_t,
    ring_id: u32,
    out: *mut *mut dplog_producer_t,
) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        let l = match unsafe { logger(h) } {
            Ok(l) => l,
            Err(e) => return e,
        };
        if out.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_producer_new: out is NULL");
        }
        let st = lock(&l.state);
        let run = match &*st {
            State::Started(r) => r,
            State::Opened(_) => {
                return fail(
                    DPLOG_ERR_STATE,
                    "dplog_producer_new: call dplog_start first",
                )
            }
            State::Closed => return fail(DPLOG_ERR_CLOSED, "dplog handle is closed"),
        };
        if !lock(&l.shared.rings).insert(ring_id) {
            return fail(
                DPLOG_ERR_RING_IN_USE,
                format!("ring {ring_id} already has a producer"),
            );
        }
        let consumer_index = ring_id as usize % run.loggers.len();
        let consumer = &run.loggers[consumer_index];
        let prod = match consumer.producer() {
            Ok(p) => p,
            Err(e) => {
                lock(&l.shared.rings).remove(&ring_id);
                return logger_error(e);
            }
        };
        lock(&l.shared.ring_names).insert((consumer_index, prod.ring_id()), ring_id);
        let drop_policy = prod.policy() != dplog::Backpressure::Block;
        let fast_path = matches!(
            prod.policy(),
            dplog::Backpressure::Block | dplog::Backpressure::Drop
        );
        let obj = Box::new(dplog_producer_t {
            window: UnsafeCell::new(dplog_log_window::EMPTY),
            magic: AtomicU32::new(MAGIC_LIVE),
            #[cfg(debug_assertions)]
            user: core::sync::atomic::AtomicUsize::new(0),
            inner: UnsafeCell::new(Some(ProducerState {
                prod,
                ring_id,
                shared: l.shared.clone(),
                sizes: run.sizes.clone(),
                drop_policy,
                fast_path,
                fast_path_policy: fast_path,
                staging: None,
                reservation: Reservation::None,
                reserved_schema: 0,
                reserved_size: 0,
                window_first: 0,
            })),
        });
        lock(&l.shared.windows).insert(
            ring_id,
            // The window's `end` field, for dplog_close.
            obj.window.get() as usize,
        );
        // SAFETY: out is non-NULL (checked) and writable (caller contract).
        unsafe { out.write(Box::into_raw(obj)) };
        DPLOG_OK
    })
}

/// Releases a producer: its ring is drained by the consumer and then
/// removed, and its `ring_id` can be used again. A pending reservation is
/// discarded.
///
/// `p == NULL` is a no-op returning `DPLOG_OK`. A second free of the same
/// pointer is a no-op returning `DPLOG_ERR_CLOSED` (the pointer keeps
/// pointing at a dead-marked object, never at freed memory).
///
/// Thread-safety: not concurrently with any other call on the same
/// producer.
///
/// # Safety
/// `p` is NULL or returned by `dplog_producer_new`.
#[no_mangle]
pub unsafe extern "C" fn dplog_producer_free(p: *mut dplog_producer_t) -> dplog_result {
    guard_producer(p, || {
        if p.is_null() {
            return DPLOG_OK;
        }
        // SAFETY: returned by dplog_producer_new, never deallocated.
        let obj = unsafe { &*p };
        if let Err(e) = check_magic(&obj.magic, "dplog producer") {
            return e;
        }
        // SAFETY: single-thread rule for producers; no other reference.
        if let Some(st) = unsafe { &mut *obj.inner.get() } {
            // SAFETY: as above. The records of the inline window count
            // and are published before the ring's producer is dropped.
            unsafe { take_window(obj, st) };
        }
        // Release: partner of the Relaxed magic check of a later call on
        // the same thread (or one synchronised with it by the caller).
        obj.magic.store(MAGIC_DEAD, Ordering::Release);
        // SAFETY: single-thread rule for producers; no other reference.
        let state = unsafe { (*obj.inner.get()).take() };
        drop(state);
        bury(p as usize);
        DPLOG_OK
    })
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
            // 1: the window's own schema, whose key is `last`.
            let key = if reservation == 1 {
                (*w).last
            } else {
                reservation
            };
            st.reserved_schema = (key >> 16) as u16;
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
    // The inline dplog_reserve zeroes 64 bytes from the cursor for every
    // slot size: a window of 32-byte slots leaves the producer's last free
    // slot out of it, so those bytes never reach a slot it does not hold.
    let inline_len = win.len - (INLINE_ZERO_BYTES.saturating_sub(win.slot_bytes) / win.slot_bytes);
    if inline_len == 0 {
        return;
    }
    let table = st.sizes.table();
    let w = obj.window.get();
    st.window_first = win.first;
    // SAFETY: single-thread rule (cursor, next_index, ring_tail, publish,
    // last, sizes, n_sizes, slot_bytes are only written by this thread); the
    // slots are the window's (open_window), `len` of them of `slot_bytes`
    // each from `start`, and the inline window is the first `inline_len`
    // of them (`inline_len <= len`); `sizes` points into the producer's own
    // `Arc<SchemaSizes>`, which outlives every window it opens (the window
    // is taken back before the state is dropped).
    unsafe {
        // NULL when the library publishes: the inline path tests it alone.
        (*w).ring_tail = if win.publish_each {
            win.tail
        } else {
            core::ptr::null_mut()
        };
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
        window_end(w).store(win.start.add(inline_len * win.slot_bytes), Ordering::SeqCst);
    }
    if st.shared.closed.load(Ordering::SeqCst) {
        // SAFETY: the window just opened, nothing written.
        unsafe { take_window(obj, st) };
    }
}

/// Bytes from the cursor that the inline `dplog_reserve` zeroes for a
/// record of up to 64 bytes, whatever the slot size
/// (`include/dplog_inline.h`); a larger record, in a 128-byte slot, gets
/// its whole slot zeroed.
const INLINE_ZERO_BYTES: usize = 64;

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
