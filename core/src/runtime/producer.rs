//! [`LogProducer`]: one SPSC ring's producer under the logger's
//! backpressure policy.

use super::Backpressure;
// Names the docs link to.
#[cfg(doc)]
use super::{DegradeConfig, LoggerConfig, Stats};
use crate::mpsc::MpProducer;
use crate::policy::{policy_ring, Policy};
use crate::record::Record;
use crate::ring::Producer;
#[cfg(target_os = "linux")]
use crate::shm::ShmProducer;
#[cfg(doc)]
use crate::stats::RingStats;

/// A producer handle bound to one ring, applying the logger's
/// [`Backpressure`] policy in [`log`](Self::log).
///
/// It dereferences to the raw [`Producer`] for `try_push`, `push` and the
/// burst variants. `Send`, not `Sync`: one per producing thread.
pub struct LogProducer<R: Record> {
    pub(super) inner: Producer<R>,
    /// The ring's id within its logger ([`RingStats::id`]).
    pub(super) ring_id: u32,
    /// The logger's backpressure policy and this ring's `degrade` state.
    pub(super) policy: Policy<R>,
}

impl<R: Record> core::fmt::Debug for LogProducer<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LogProducer")
            .field("inner", &self.inner)
            .field("ring_id", &self.ring_id)
            .field("policy", &self.policy.policy)
            .field("degraded", &self.policy.degraded)
            .finish_non_exhaustive()
    }
}

impl<R: Record> LogProducer<R> {
    /// Hands `rec` to the ring under the configured policy:
    /// - `Block` waits for a slot (lossless);
    /// - `Drop` (`drop_newest`) drops it if the ring is full, counted in
    ///   [`Stats::dropped_full`];
    /// - `Degrade` also drops it, counted in [`Stats::dropped_degraded`],
    ///   when the ring is degraded (see [`DegradeConfig`]) and
    ///   the record's priority ([`Record::priority_in`] with the logger's
    ///   [`LoggerConfig::schemas`]) is below the minimum.
    ///
    /// Returns `false` if the record was not enqueued (dropped, or the
    /// consumer is gone — counted in [`Stats::dropped_disconnected`] — or
    /// has stopped the ring after a protocol violation — counted in
    /// [`Stats::dropped_stopped`], whatever the policy). Never allocates.
    #[inline]
    pub fn log(&mut self, rec: R) -> bool {
        self.policy.log(&mut self.inner, rec)
    }

    /// True while `degrade` sheds low-priority records.
    pub fn degraded(&self) -> bool {
        self.policy.degraded
    }

    /// [`log`](Self::log) for a burst; one index publish per burst (per run
    /// of accepted records under `degrade`). Returns how many were
    /// enqueued; the rest are counted as dropped, by reason.
    #[inline]
    pub fn log_burst(&mut self, recs: &[R]) -> usize {
        self.policy.log_burst(&mut self.inner, recs)
    }

    /// The policy this producer applies.
    pub fn policy(&self) -> Backpressure {
        self.policy.policy
    }

    /// The id of this producer's ring within its logger
    /// ([`RingStats::id`], registration order from 0), the id the
    /// consumer names in drop reports and diagnostics.
    pub fn ring_id(&self) -> u32 {
        self.ring_id
    }
}

impl<R: Record> core::ops::Deref for LogProducer<R> {
    type Target = Producer<R>;
    fn deref(&self) -> &Producer<R> {
        &self.inner
    }
}

impl<R: Record> core::ops::DerefMut for LogProducer<R> {
    fn deref_mut(&mut self) -> &mut Producer<R> {
        &mut self.inner
    }
}

// The policy's view of each producer kind (see `crate::policy`), here
// where the kinds meet: the policy depends on none of them, and the
// shared-memory rings, which apply the policy, are not depended on by it.
policy_ring!(Producer, |p| Some(p.fill_upper_bound()));
policy_ring!(MpProducer, |p| p.fill_upper_bound());
#[cfg(target_os = "linux")]
policy_ring!(ShmProducer, |p| Some(p.fill_upper_bound()));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::test_record::{TestRecord, CREATE, DELETE};
    use crate::ring::ring;
    use crate::runtime::LoggerConfig;
    use crate::table::RecordRules;
    use core::sync::atomic::Ordering;

    fn ev(e: u8, i: u64) -> TestRecord {
        TestRecord {
            nat_event: e,
            timestamp_ns: i,
            ..Default::default()
        }
    }

    /// A `degrade` producer over a 16-slot ring with the default 80 % / 50 %
    /// watermarks (13 and 8 records), no consumer thread: the test drains
    /// by hand, so every fill level is exact.
    #[test]
    fn degrade_sheds_creates_between_the_watermarks_and_keeps_deletes() {
        let (p, mut c) = ring::<TestRecord>(16).unwrap();
        let shared = c.shared().clone();
        // The default 80 % / 50 % watermarks of 16 slots: 13 and 8.
        let cfg = LoggerConfig {
            ring_capacity: 16,
            backpressure: Backpressure::Degrade,
            ..Default::default()
        };
        let mut lp = LogProducer {
            inner: p,
            ring_id: 0,
            policy: Policy::new(&cfg, RecordRules::own().priority),
        };
        let create = |i| ev(CREATE, i);
        let delete = |i| ev(DELETE, i);
        for i in 0..13 {
            assert!(lp.log(create(i)), "below the high watermark at {i}");
        }
        assert!(
            !lp.log(create(13)),
            "fill 13 = high watermark: creates shed"
        );
        assert!(lp.degraded());
        assert!(lp.log(delete(14)), "deletes outrank creates");
        // Fill 14 → 9: still at or above the low watermark.
        for _ in 0..5 {
            c.pop().unwrap();
        }
        assert!(!lp.log(create(15)));
        // Fill 9 → 7: below the low watermark, everything is accepted again.
        c.pop().unwrap();
        c.pop().unwrap();
        assert!(lp.log(create(16)));
        assert!(!lp.degraded());
        // Fill to 16 with deletes (accepted while degraded), then full.
        let mut i = 17;
        while lp.fill() < 16 {
            assert!(lp.log(delete(i)));
            i += 1;
        }
        assert!(!lp.log(delete(i)), "a full ring drops even a delete");
        let pc = &shared.producer_counters;
        assert_eq!(pc.dropped_degraded.load(Ordering::Relaxed), 2);
        assert_eq!(pc.dropped_full.load(Ordering::Relaxed), 1);
        // Bursts: below the watermark a burst goes in with one publish;
        // above it, creates are filtered out and counted.
        while c.pop().is_some() {}
        let burst: Vec<_> = (0..6)
            .map(|i| if i % 2 == 0 { create(i) } else { delete(i) })
            .collect();
        assert_eq!(lp.log_burst(&burst), 6);
        assert_eq!(lp.log_burst(&burst), 6);
        // Fill 12 < 13: not degraded, the burst takes the 4 free slots;
        // the rest goes record by record: create 4 is shed (fill 16 ≥ high),
        // delete 5 finds the ring full.
        assert_eq!(lp.log_burst(&burst), 4);
        assert_eq!(pc.dropped_degraded.load(Ordering::Relaxed), 2 + 1);
        assert_eq!(pc.dropped_full.load(Ordering::Relaxed), 1 + 1);
        let d = c.take_drop_report().unwrap();
        assert_eq!(d.dropped, 5, "all reasons, once each");
        assert_eq!(d.by_reason, [1 + 1, 2 + 1, 0, 0], "each under its own");
        assert!(d.first_ns <= d.last_ns);
        assert!(c.take_drop_report().is_none(), "reported once");
    }
}
