//! The backpressure policy a logger's producers apply, written once for
//! the SPSC ([`crate::ring::Producer`]), MPSC ([`crate::mpsc::MpProducer`])
//! and shared-memory rings: [`LogProducer`](crate::LogProducer) and
//! [`SharedProducer`](crate::SharedProducer) each pair a ring with a
//! [`Policy`].

use crate::config::{Backpressure, LoggerConfig};
use crate::record::Record;
use crate::ring::DropReason;
use crate::table::SchemaTable;
use crate::tsc::now_ticks;

/// What the policy needs from a ring's producer side.
pub(crate) trait PolicyRing<R> {
    /// Waits for a slot; `false` if the consumer is gone.
    fn push_one(&mut self, rec: R) -> bool;
    /// `false` if the ring is full (or the consumer gone).
    fn try_push_one(&mut self, rec: R) -> bool;
    /// Waits for slots; `Err(k)` if the consumer went away after `k`.
    fn push_all(&mut self, recs: &[R]) -> Result<(), usize>;
    /// How many of `recs` fit now.
    fn try_push_some(&mut self, recs: &[R]) -> usize;
    /// A cheap upper bound of the fill level (no shared load if it can).
    fn fill_bound(&self) -> Option<usize>;
    /// The exact fill level.
    fn fill_now(&mut self) -> usize;
    /// True once the consumer has stopped the ring.
    fn stopped(&self) -> bool;
    /// Counts `n` records dropped for `reason` at `now`.
    fn count(&mut self, reason: DropReason, n: u64, now: u64);
}

/// Every producer side has the same method names; the one difference is
/// the cheap fill bound, which an MPSC handle gives only while it is the
/// ring's only one (other handles move its claim index). Invoked where
/// the producer kinds meet (`runtime/producer.rs`), so that this module
/// needs none of them.
macro_rules! policy_ring {
    ($ty:ident, $bound:expr) => {
        impl<R: $crate::record::Record> $crate::policy::PolicyRing<R> for $ty<R> {
            #[inline(always)]
            fn push_one(&mut self, rec: R) -> bool {
                self.push(rec).is_ok()
            }
            #[inline(always)]
            fn try_push_one(&mut self, rec: R) -> bool {
                self.try_push(rec).is_ok()
            }
            #[inline(always)]
            fn push_all(&mut self, recs: &[R]) -> Result<(), usize> {
                self.push_burst(recs)
                    .map_err(|$crate::ring::Disconnected(k)| k)
            }
            #[inline(always)]
            fn try_push_some(&mut self, recs: &[R]) -> usize {
                self.try_push_burst(recs)
            }
            #[inline(always)]
            fn fill_bound(&self) -> Option<usize> {
                let bound: fn(&Self) -> Option<usize> = $bound;
                bound(self)
            }
            #[inline(always)]
            fn fill_now(&mut self) -> usize {
                self.fill()
            }
            #[inline(always)]
            fn stopped(&self) -> bool {
                self.is_stopped()
            }
            #[inline(always)]
            fn count(&mut self, reason: $crate::ring::DropReason, n: u64, now: u64) {
                self.count_dropped(reason, n, now)
            }
        }
    };
}

pub(crate) use policy_ring;

/// `priority(&rec, schemas)` on this function's own copy of `rec`. A
/// `&rec` handed to the function pointer inside [`Policy::log`] would let
/// the record's address escape there, so the compiler would build every
/// record on the stack, under every policy, and copy it into the slot with
/// 16-byte loads the CPU cannot forward from the narrower field stores:
/// about 8 ns a blocking push of a 64-byte record instead of about 3
/// (`ffi_log_interleaved`).
#[inline(never)]
fn priority_of<R>(priority: fn(&R, &SchemaTable) -> u8, rec: R, schemas: &SchemaTable) -> u8 {
    priority(&rec, schemas)
}

/// A producer's backpressure state: the logger's policy, the `degrade`
/// watermarks (in records) and state, and how to read a record's priority.
pub(crate) struct Policy<R> {
    pub(crate) policy: Backpressure,
    /// `degrade`: true between crossing the high watermark and falling
    /// below the low one.
    pub(crate) degraded: bool,
    high: usize,
    low: usize,
    min_priority: u8,
    /// Per-type priorities, read only while degraded.
    schemas: SchemaTable,
    /// Reads a record's priority with `schemas`.
    priority: fn(&R, &SchemaTable) -> u8,
}

impl<R: Record> Policy<R> {
    /// The policy of a logger with settings `cfg` for rings of
    /// `cfg.ring_capacity` slots.
    pub(crate) fn new(cfg: &LoggerConfig, priority: fn(&R, &SchemaTable) -> u8) -> Self {
        let cap = cfg.ring_capacity;
        let d = cfg.degrade;
        Self {
            policy: cfg.backpressure,
            degraded: false,
            // Ceiling for high, floor for low, both within 1..=cap.
            high: (cap * usize::from(d.high_watermark_pct))
                .div_ceil(100)
                .clamp(1, cap),
            low: (cap * usize::from(d.low_watermark_pct) / 100).min(cap),
            min_priority: d.min_priority,
            schemas: cfg.schemas.clone(),
            priority,
        }
    }

    /// Hands `rec` to `ring` under the policy (see
    /// [`LogProducer::log`](crate::LogProducer::log)).
    #[inline]
    pub(crate) fn log<P: PolicyRing<R>>(&mut self, ring: &mut P, rec: R) -> bool {
        match self.policy {
            Backpressure::Block => ring.push_one(rec) || dropped(ring, DropReason::Disconnected, 1),
            Backpressure::Drop => ring.try_push_one(rec) || dropped(ring, DropReason::Full, 1),
            Backpressure::Degrade => {
                if self.is_degraded(ring)
                    && priority_of(self.priority, rec, &self.schemas) < self.min_priority
                {
                    return dropped(ring, DropReason::Degraded, 1);
                }
                ring.try_push_one(rec) || dropped(ring, DropReason::Full, 1)
            }
        }
    }

    /// [`log`](Self::log) for a burst: one publish per burst (per run of
    /// accepted records under `degrade`); the rest counted by reason.
    #[inline]
    pub(crate) fn log_burst<P: PolicyRing<R>>(&mut self, ring: &mut P, recs: &[R]) -> usize {
        match self.policy {
            Backpressure::Block => match ring.push_all(recs) {
                Ok(()) => recs.len(),
                Err(k) => {
                    dropped(ring, DropReason::Disconnected, (recs.len() - k) as u64);
                    k
                }
            },
            Backpressure::Drop => {
                let n = ring.try_push_some(recs);
                if n < recs.len() {
                    dropped(ring, DropReason::Full, (recs.len() - n) as u64);
                }
                n
            }
            Backpressure::Degrade => {
                if !self.is_degraded(ring) {
                    let n = ring.try_push_some(recs);
                    if n < recs.len() {
                        // Full: the rest goes through the per-record path
                        // (priorities, exact reasons).
                        return n + recs[n..].iter().filter(|r| self.log(ring, **r)).count();
                    }
                    return n;
                }
                recs.iter().filter(|r| self.log(ring, **r)).count()
            }
        }
    }

    /// `degrade` state machine: enter at `fill >= high`, leave at
    /// `fill < low`. On an SPSC ring the exact fill (one Acquire load of
    /// the consumer index) is read only when the cached upper bound
    /// reaches `high`, or while degraded.
    #[inline]
    pub(crate) fn is_degraded<P: PolicyRing<R>>(&mut self, ring: &mut P) -> bool {
        if self.degraded {
            if ring.fill_now() < self.low {
                self.degraded = false;
            }
        } else if ring.fill_bound().map_or(true, |b| b >= self.high) && ring.fill_now() >= self.high
        {
            self.degraded = true;
        }
        self.degraded
    }
}

impl<R> Clone for Policy<R> {
    fn clone(&self) -> Self {
        Self {
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

/// Counts `n` records of `ring` dropped for `reason` (a stopped ring's
/// drops have a reason of their own: it looks full, then disconnected);
/// returns `false`, the result of a refused push.
#[cold]
fn dropped<R, P: PolicyRing<R>>(ring: &mut P, reason: DropReason, n: u64) -> bool {
    let reason = if ring.stopped() {
        DropReason::Stopped
    } else {
        reason
    };
    ring.count(reason, n, now_ticks());
    false
}
