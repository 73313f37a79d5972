//! A producer handle shared by several threads: an MPSC ring
//! ([`crate::mpsc`]) into a logger, under the logger's backpressure policy.
//!
//! One SPSC ring per forwarding core ([`Logger::producer`]) is fastest;
//! a ring several threads share serves producers that are not pinned to
//! a core of their own (control-plane threads, a worker pool). Each clone
//! of a [`SharedProducer`] is one thread's handle on the same ring; the
//! policy is the logger's: `block` waits for a slot, `drop_newest` drops
//! and counts, `degrade` sheds records below the minimum priority between
//! the watermarks — the same counters, drop reasons and in-band reports as
//! an SPSC producer's.

use crate::mpsc::{mpsc_ring, MpProducer};
use crate::policy::Policy;
use crate::record::Record;
use crate::runtime::{Logger, LoggerError};

/// One thread's handle on a logger's shared (MPSC) ring; `Clone` for
/// another thread. Made by [`Logger::shared_producer`].
pub struct SharedProducer<R: Record> {
    inner: MpProducer<R>,
    ring_id: u32,
    /// The logger's policy; under `degrade` this handle's view of the
    /// shared ring's state, from the fill level it reads (each handle
    /// enters and leaves on its own reading; the ring's fill is the same
    /// for all).
    policy: Policy<R>,
}

impl<R: Record> Clone for SharedProducer<R> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            ring_id: self.ring_id,
            policy: self.policy.clone(),
        }
    }
}

impl<R: Record> core::fmt::Debug for SharedProducer<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SharedProducer")
            .field("ring_id", &self.ring_id)
            .field("policy", &self.policy.policy)
            .field("degraded", &self.policy.degraded)
            .finish_non_exhaustive()
    }
}

impl<R: Record> Logger<R> {
    /// Creates an MPSC ring of `ring_capacity` slots, registers it with the
    /// consumer and returns its first handle; clone it once per producing
    /// thread. The logger's backpressure policy applies to every handle.
    ///
    /// Errors: as [`Logger::producer`].
    pub fn shared_producer(&self) -> Result<SharedProducer<R>, LoggerError> {
        let cfg = self.config();
        let (mut p, c) = mpsc_ring::<R>(cfg.ring_capacity)?;
        p.set_block_spins(cfg.block_spins);
        let ring_id = self.attach(c)?;
        Ok(SharedProducer {
            inner: p,
            ring_id,
            policy: Policy::new(cfg, self.rules().priority),
        })
    }
}

// `log`, `log_burst` and the `Deref` to the ring producer are one-line
// delegations to the one `Policy` in each policy front end (`LogProducer`,
// `SharedProducer`, `ShmLogProducer`); they are written out per kind
// because each one's docs say what its own ring does when full or
// disconnected, which a shared macro would have to take as arguments.
impl<R: Record> SharedProducer<R> {
    /// The ring's id within its logger.
    pub fn ring_id(&self) -> u32 {
        self.ring_id
    }

    /// Hands `rec` to the shared ring under the logger's policy; see
    /// [`LogProducer::log`](crate::LogProducer::log) for each policy and
    /// the counters. Returns `false` if the record was not enqueued.
    #[inline]
    pub fn log(&mut self, rec: R) -> bool {
        self.policy.log(&mut self.inner, rec)
    }

    /// [`log`](Self::log) for a burst: one claim and one publish per burst
    /// (per run of accepted records under `degrade`). Returns how many
    /// were enqueued; the rest are counted by reason.
    #[inline]
    pub fn log_burst(&mut self, recs: &[R]) -> usize {
        self.policy.log_burst(&mut self.inner, recs)
    }

    /// True while this handle sheds low-priority records (`degrade`).
    pub fn degraded(&self) -> bool {
        self.policy.degraded
    }
}
