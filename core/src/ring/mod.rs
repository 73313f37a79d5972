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
//!
//! The module's files, by role: the memory both sides share and its
//! counters (`shared.rs`, whose layout the C ABI reads), the slot array
//! (`slots.rs`), the SPSC producer and its reservations (`spsc.rs`), the
//! raw windows the C ABI writes through (`window.rs`), the consumer
//! (`consumer.rs`), the multi-producer front end ([`crate::mpsc`],
//! `mpsc.rs`) and the one waiting push loop every producer kind uses
//! (`block.rs`).

use core::mem::size_of;

pub(crate) use crate::sync::{Arc, AtomicBool, AtomicU64, AtomicUsize, Ordering};

pub(crate) mod block;
mod consumer;
pub mod mpsc;
mod shared;
mod slots;
mod spsc;
#[cfg(test)]
mod tests;
#[cfg(not(loom))]
mod window;

pub use consumer::Consumer;
#[cfg(not(loom))]
pub use consumer::ReadBurst;
pub(crate) use shared::{Shared, ROOM_STOPPED};
// Read by the counters (`stats`) and the shared-memory rings (`shm`),
// which loom builds leave out.
#[cfg(not(loom))]
pub(crate) use shared::{split_by_reason, UNSETTLED};
pub use shared::{DropDelta, SAMPLE_EVERY};
pub(crate) use slots::Slots;
pub use spsc::{ring, Producer, Reserved};
#[cfg(not(loom))]
pub use window::RawWindow;

/// Largest ring capacity accepted, in records (2^30).
pub const MAX_CAPACITY: usize = 1 << 30;

/// Default spins with a pause instruction before a waiting producer starts
/// yielding the CPU (see [`Producer::set_block_spins`]).
pub const DEFAULT_BLOCK_SPINS: u32 = 1024;

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

/// The consumer has gone away; the record (or the records not pushed) are
/// handed back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disconnected<T>(pub T);

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
