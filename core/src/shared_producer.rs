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
use crate::record::Record;
use crate::ring::DropReason;
use crate::runtime::{Backpressure, Logger, LoggerError};
use crate::table::SchemaTable;
use crate::tsc::now_ticks;

/// One thread's handle on a logger's shared (MPSC) ring; `Clone` for
/// another thread. Made by [`Logger::shared_producer`].
pub struct SharedProducer<R: Record> {
    inner: MpProducer<R>,
    ring_id: u32,
    policy: Backpressure,
    /// `degrade`: this handle's view of the shared ring's state, from the
    /// fill level it reads (each handle enters and leaves on its own
    /// reading; the ring's fill is the same for all).
    degraded: bool,
    high: usize,
    low: usize,
    min_priority: u8,
    schemas: SchemaTable,
    priority: fn(&R, &SchemaTable) -> u8,
}

impl<R: Record> Clone for SharedProducer<R> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            ring_id: self.ring_id,
            policy: self.policy,
            degraded: self.degraded,
            high: self.high,
            low: self.low,
            min_priority: self.min_priority,
            schemas: self.schemas.clone(),
            priority: self.priority,
        }
    }
}

impl<R: Record> core::fmt::Debug for SharedProducer<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SharedProducer")
            .field("ring_id", &self.ring_id)
            .field("policy", &self.policy)
            .field("degraded", &self.degraded)
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
        let cap = cfg.ring_capacity;
        let d = cfg.degrade;
        Ok(SharedProducer {
            inner: p,
            ring_id,
            policy: cfg.backpressure,
            degraded: false,
            high: (cap * usize::from(d.high_watermark_pct))
                .div_ceil(100)
                .clamp(1, cap),
            low: (cap * usize::from(d.low_watermark_pct) / 100).min(cap),
            min_priority: d.min_priority,
            schemas: cfg.schemas.clone(),
            priority: self.rules().priority,
        })
    }
}

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
        match self.policy {
            Backpressure::Block => match self.inner.push(rec) {
                Ok(()) => true,
                Err(_) => self.dropped(DropReason::Disconnected, 1),
            },
            Backpressure::Drop => match self.inner.try_push(rec) {
                Ok(()) => true,
                Err(_) => self.dropped(DropReason::Full, 1),
            },
            Backpressure::Degrade => {
                if self.is_degraded() && (self.priority)(&rec, &self.schemas) < self.min_priority {
                    return self.dropped(DropReason::Degraded, 1);
                }
                match self.inner.try_push(rec) {
                    Ok(()) => true,
                    Err(_) => self.dropped(DropReason::Full, 1),
                }
            }
        }
    }

    /// [`log`](Self::log) for a burst: one claim and one publish per burst
    /// under `block` and `drop_newest` (record by record under `degrade`).
    /// Returns how many were enqueued; the rest are counted by reason.
    #[inline]
    pub fn log_burst(&mut self, recs: &[R]) -> usize {
        match self.policy {
            Backpressure::Block => match self.inner.push_burst(recs) {
                Ok(()) => recs.len(),
                Err(crate::ring::Disconnected(k)) => {
                    self.dropped(DropReason::Disconnected, (recs.len() - k) as u64);
                    k
                }
            },
            Backpressure::Drop => {
                let n = self.inner.try_push_burst(recs);
                if n < recs.len() {
                    self.dropped(DropReason::Full, (recs.len() - n) as u64);
                }
                n
            }
            Backpressure::Degrade => recs.iter().filter(|r| self.log(**r)).count(),
        }
    }

    /// True while this handle sheds low-priority records (`degrade`).
    pub fn degraded(&self) -> bool {
        self.degraded
    }

    #[cold]
    fn dropped(&mut self, reason: DropReason, n: u64) -> bool {
        let reason = if self.inner.is_stopped() {
            DropReason::Stopped
        } else {
            reason
        };
        self.inner.count_dropped(reason, n, now_ticks());
        false
    }

    /// `degrade` state machine on the shared ring's fill: enter at
    /// `fill >= high`, leave at `fill < low`.
    #[inline]
    fn is_degraded(&mut self) -> bool {
        let fill = self.inner.fill();
        if self.degraded {
            if fill < self.low {
                self.degraded = false;
            }
        } else if fill >= self.high {
            self.degraded = true;
        }
        self.degraded
    }
}
