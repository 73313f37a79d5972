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

/// One step of a wait loop on another thread's progress: a pause
/// instruction for the first `limit` steps, then a yield. Under loom every
/// step yields, so the model checker can schedule the awaited thread.
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
        } else {
            std::thread::yield_now();
        }
    }
}
