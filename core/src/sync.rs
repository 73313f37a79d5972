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

/// The steps of a wait on another thread's progress: what a producer
/// blocked on a full ring does between tries (the `block` policy's
/// bounded spin), and what dplog's MPSC producers do while an earlier
/// claimant publishes.
///
/// [`step`](Self::step) executes a pause instruction for the first
/// `block_spins` steps, then yields the CPU for the next
/// [`YIELDS`](Self::YIELDS), then sleeps 50 µs, doubling to at most 1 ms:
/// a producer stuck behind a stalled sink stops burning its core in
/// `sched_yield`, at the price of up to 1 ms before it notices room once it
/// has waited that long. Under `--cfg loom` every step yields, so the model
/// checker can schedule the awaited thread. Counts the steps of each kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitSteps {
    spins: u32,
    yields: u32,
    sleeps: u32,
}

impl WaitSteps {
    /// Yields after the pause-instruction spins, before the sleeps.
    pub const YIELDS: u32 = 256;

    /// A wait that has taken no step yet.
    pub const fn new() -> Self {
        Self {
            spins: 0,
            yields: 0,
            sleeps: 0,
        }
    }

    /// Takes one step of the wait (see the type's docs).
    #[inline]
    pub fn step(&mut self, block_spins: u32) {
        #[cfg(loom)]
        {
            let _ = block_spins;
            self.spins = self.spins.saturating_add(1);
            loom::thread::yield_now();
        }
        #[cfg(not(loom))]
        {
            if self.spins < block_spins {
                self.spins += 1;
                core::hint::spin_loop();
            } else if self.yields < Self::YIELDS {
                self.yields += 1;
                std::thread::yield_now();
            } else {
                let us = (50u64 << self.sleeps.min(5)).min(1000);
                self.sleeps = self.sleeps.saturating_add(1);
                std::thread::sleep(std::time::Duration::from_micros(us));
            }
        }
    }

    /// True once the wait has used up its `block_spins` pause spins (it
    /// yields or sleeps from now on).
    #[inline]
    pub fn spun(&self, block_spins: u32) -> bool {
        self.spins >= block_spins
    }

    /// Pause-instruction spins taken.
    pub fn spins(&self) -> u32 {
        self.spins
    }

    /// CPU yields taken.
    pub fn yields(&self) -> u32 {
        self.yields
    }

    /// Sleeps taken.
    pub fn sleeps(&self) -> u32 {
        self.sleeps
    }
}
