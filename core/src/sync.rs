//! Atomics and `Arc` for the ring protocol: `core`/`std` normally, loom's
//! model-checked versions under `--cfg loom` (see `core/tests/loom.rs`).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::Arc;

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::Arc;

/// Yields after the pause-instruction spins before a waiter starts to
/// sleep (see [`spin_wait`]).
#[cfg(not(loom))]
const WAIT_YIELDS: u32 = 256;

/// One step of a wait loop on another thread's progress: a pause
/// instruction for the first `limit` steps, then a yield for the next
/// [`WAIT_YIELDS`], then sleeps of 50 µs doubling to at most 1 ms, so a
/// producer blocked on a stalled sink stops burning its CPU in
/// `sched_yield` (at the price of up to 1 ms before it notices room, once
/// it has waited that long). Under loom every step yields, so the model
/// checker can schedule the awaited thread.
#[inline]
pub(crate) fn spin_wait(spins: &mut u32, limit: u32) {
    *spins = spins.saturating_add(1);
    #[cfg(loom)]
    {
        let _ = limit;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    {
        if *spins <= limit {
            core::hint::spin_loop();
        } else if *spins - limit <= WAIT_YIELDS {
            std::thread::yield_now();
        } else {
            let doublings = (*spins - limit - WAIT_YIELDS - 1).min(5);
            let us = (50u64 << doublings).min(1000);
            std::thread::sleep(std::time::Duration::from_micros(us));
        }
    }
}
