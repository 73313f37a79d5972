//! The one waiting push loop of every ring producer: try, and while the
//! ring is full take one wait step (spin with a pause instruction, then
//! yield, then sleep; see [`WaitSteps`]) until the record goes in or the
//! producer side says the push must give up (the consumer is gone or has
//! stopped the ring). The SPSC [`Producer`](super::Producer), the MPSC
//! [`MpProducer`](super::mpsc::MpProducer) and the shared-memory
//! `ShmProducer` (whose wait step gives up only on a quarantine) implement
//! [`WaitingPush`]; their `push` and `push_burst` are these two functions.

use super::{Disconnected, Ordering, Shared};
use crate::sync::WaitSteps;
use core::mem::MaybeUninit;

/// What a waiting push needs from a producer side.
pub(crate) trait WaitingPush<T> {
    /// One attempt: `Err(rec)`, the record back, if the ring is full.
    fn attempt(&mut self, rec: T) -> Result<(), T>;
    /// Pushes as many of `recs` as fit now; returns how many.
    fn attempt_some(&mut self, recs: &[T]) -> usize;
    /// One wait step; true, before any step, if the push must give up.
    fn wait_step(&self, steps: &mut WaitSteps) -> bool;
}

/// Pushes `rec`, waiting while the ring is full; `Err(Disconnected(rec))`
/// once `p` says to give up.
///
/// The first attempt is inline and the wait loop out of line: a loop that
/// carries the record from one attempt to the next, inlined into the
/// caller, made the compiler copy the record through the stack twice on
/// every push, the fast path too (a blocking Rust `log` of a 64-byte
/// record took 16 ns instead of 8; `ffi_log_interleaved`).
#[inline(always)]
pub(crate) fn push_waiting<T: Copy, P: WaitingPush<T>>(
    p: &mut P,
    rec: T,
) -> Result<(), Disconnected<T>> {
    match p.attempt(rec) {
        Ok(()) => Ok(()),
        Err(rec) => {
            // The slow path reads its own copy, made here: a `&rec` would
            // let the caller's record escape, so the compiler would build
            // every record on the stack and copy it into the slot with
            // 16-byte loads that the CPU cannot forward from the narrower
            // field stores (about 8 ns a push of a 64-byte record instead
            // of about 3, `ffi_log_interleaved`). `black_box` keeps the
            // compiler from handing the slow path `rec`'s own address for
            // the copy's.
            let spare = MaybeUninit::new(rec);
            if push_waiting_slow(p, core::hint::black_box(&spare)) {
                Ok(())
            } else {
                Err(Disconnected(rec))
            }
        }
    }
}

/// The wait loop of [`push_waiting`] after its first attempt failed: one
/// wait step (giving up if `p` says so), then another attempt. True once
/// `rec` is in; false if `p` said to give up. It takes a copy of the
/// record by reference (see `push_waiting`) and answers in a register: a by-value `Result` carrying the
/// record back needs a record-sized return slot in every caller's frame,
/// which can push the caller's own record to an offset where one of the
/// copy's 16-byte loads straddles a cache line (0.3–0.7 ns a push).
#[cold]
#[inline(never)]
fn push_waiting_slow<T: Copy, P: WaitingPush<T>>(p: &mut P, rec: &MaybeUninit<T>) -> bool {
    // SAFETY: `push_waiting` made `rec` from a record (`MaybeUninit::new`).
    let rec = unsafe { rec.assume_init_ref() };
    let mut spins = WaitSteps::new();
    loop {
        if p.wait_step(&mut spins) {
            return false;
        }
        if p.attempt(*rec).is_ok() {
            return true;
        }
    }
}

/// Pushes every record of `recs`, waiting while the ring is full;
/// `Err(Disconnected(k))` with the number `k` pushed once `p` says to give
/// up.
#[inline]
pub(crate) fn push_burst_waiting<T, P: WaitingPush<T>>(
    p: &mut P,
    recs: &[T],
) -> Result<(), Disconnected<usize>> {
    let mut done = 0;
    let mut spins = WaitSteps::new();
    while done < recs.len() {
        let n = p.attempt_some(&recs[done..]);
        done += n;
        if n == 0 && p.wait_step(&mut spins) {
            return Err(Disconnected(done));
        }
    }
    Ok(())
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

/// Implements [`WaitingPush`] for the producer `$ty<T>` (methods `try_push`
/// and `try_push_burst`) whose wait step is `$wait`, an expression of
/// `$this` (the producer) and `$steps` (its [`WaitSteps`]): the
/// shared-memory producer's, which gives up only on a quarantine.
macro_rules! waiting_push {
    ($ty:ident, |$this:ident, $steps:ident| $wait:expr) => {
        impl<T: $crate::record::Record> $crate::ring::block::WaitingPush<T> for $ty<T> {
            #[inline(always)]
            fn attempt(&mut self, rec: T) -> Result<(), T> {
                self.try_push(rec)
            }
            #[inline(always)]
            fn attempt_some(&mut self, recs: &[T]) -> usize {
                self.try_push_burst(recs)
            }
            #[inline(always)]
            fn wait_step(&self, $steps: &mut $crate::sync::WaitSteps) -> bool {
                let $this = self;
                $wait
            }
        }
    };
}
pub(crate) use waiting_push;

/// Implements [`WaitingPush`] for the ring producer `$ty<T>` (fields
/// `shared` and `block_spins`, methods `try_push` and `try_push_burst`),
/// whose wait step is [`backoff`]: the SPSC and MPSC producers.
macro_rules! waiting_push_by_backoff {
    ($ty:ident) => {
        $crate::ring::block::waiting_push!($ty, |p, steps| {
            $crate::ring::block::backoff(&p.shared, p.block_spins, steps)
        });
    };
}
pub(crate) use waiting_push_by_backoff;
