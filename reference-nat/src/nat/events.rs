//! Limit and exhaustion events: quota exceeded (natEvent 13,
//! maxEntriesPerUser), ports and addresses exhausted (natEvent 12 and 3),
//! each rate-limited to one record per `event_log_interval` of packet
//! time.

use dplog::nat::quota_event;
use dplog::nat::{NatPortsExhaustedRecord, NatQuotaExceededRecord, NatRecord};

use super::{Nat44, NatLog};

/// Which rate-limited event (index into `event_last`).
#[derive(Clone, Copy)]
pub(super) enum LimitEvent {
    AddressesExhausted = 0,
    PortsExhausted = 1,
    Quota = 2,
}

impl Nat44 {
    /// Logs a limit or exhaustion record unless one of the same event was
    /// logged less than `event_log_interval` of packet time ago.
    pub(super) fn limit_event(
        &mut self,
        which: LimitEvent,
        now: u64,
        rec: NatRecord,
        log: &mut impl NatLog,
    ) {
        let last = &mut self.event_last[which as usize];
        if last.is_some_and(|t| now < t.saturating_add(self.event_interval_ns)) {
            self.stats.limit_events_suppressed += 1;
            return;
        }
        *last = Some(now);
        log.event(rec);
        self.stats.limit_events_logged += 1;
        self.stats.records_logged += 1;
    }

    pub(super) fn quota_exceeded(
        &mut self,
        now: u64,
        user: u32,
        limit: u32,
        log: &mut impl NatLog,
    ) {
        let rec = NatQuotaExceededRecord {
            timestamp_ns: now,
            quota_event: quota_event::MAX_ENTRIES_PER_USER,
            limit,
            src_addr: user,
            ..Default::default()
        };
        self.limit_event(LimitEvent::Quota, now, rec.into(), log);
    }

    pub(super) fn ports_exhausted(
        &mut self,
        now: u64,
        ext_addr: u32,
        proto: u8,
        log: &mut impl NatLog,
    ) {
        let rec = NatPortsExhaustedRecord {
            timestamp_ns: now,
            post_nat_src_addr: ext_addr,
            protocol: proto,
            ..Default::default()
        };
        self.limit_event(LimitEvent::PortsExhausted, now, rec.into(), log);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nat::testutil::*;

    #[test]
    fn per_subscriber_session_limit() {
        let mut c = NatConfig::new(
            vec!["10.0.0.0/8".parse().unwrap()],
            "198.51.100.0/28".parse().unwrap(),
        );
        c.max_sessions_per_user = 2;
        let mut n = Nat44::new(c).unwrap();
        let mut log = All::default();
        let verdicts: Vec<Verdict> = (0..3)
            .map(|i| {
                let mut f = udp_frame(H1, 100 + i, R1, 53);
                n.process(T0, LINKTYPE_ETHERNET, &mut f, &mut log.f())
            })
            .collect();
        assert_eq!(
            verdicts,
            vec![
                Verdict::TranslatedOut,
                Verdict::TranslatedOut,
                Verdict::SessionLimit
            ]
        );
        // Existing sessions still pass; other subscribers are not limited.
        let mut f = udp_frame(H1, 100, R1, 53);
        assert_eq!(
            n.process(T0, LINKTYPE_ETHERNET, &mut f, &mut log.f()),
            Verdict::TranslatedOut
        );
        let mut f = udp_frame(H2, 100, R1, 53);
        assert_eq!(
            n.process(T0, LINKTYPE_ETHERNET, &mut f, &mut log.f()),
            Verdict::TranslatedOut
        );
        let q = log.of_event(13);
        assert_eq!(q.len(), 1);
        assert_eq!((u32_at(q[0], 20), u32_at(q[0], 24)), (2, H1));
        // Sessions logged as usual (natEvent 4), the limit record between.
        assert_eq!(log.kinds(), vec![(4, 1), (4, 1), (13, 5), (4, 1)]);
        // After expiry the subscriber may open sessions again.
        let t = T0 + 301 * SEC;
        let mut f = udp_frame(H1, 999, R1, 53);
        assert_eq!(
            n.process(t, LINKTYPE_ETHERNET, &mut f, &mut log.f()),
            Verdict::TranslatedOut
        );
        assert_eq!(n.stats().count(Verdict::SessionLimit), 1);
    }
}
