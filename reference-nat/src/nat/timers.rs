//! Time: the engine clock (packet time, never backwards), idle expiry of
//! sessions through a lazy timer heap, and the end-of-input flush.

use std::cmp::Reverse;

use super::session::State;
use super::{Nat44, NatLog};

/// Timer-heap entry: (expiry ns, session seq, slot, generation), min-first.
pub(super) type Timer = Reverse<(u64, u64, u32, u32)>;

impl Nat44 {
    /// Deletes every session at end of input: first those whose timeout
    /// ended by `ts_ns` (stamped with their expiry time), then all others in
    /// creation order, stamped with `ts_ns` (or the engine clock if that is
    /// later). Each delete is logged as natEvent 5 with final counters. The
    /// engine is empty afterwards and can be reused.
    pub fn finish(&mut self, ts_ns: u64, log: &mut impl NatLog) {
        let now = self.advance(ts_ns);
        self.expire(now, log);
        let mut live: Vec<(u64, u32)> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.live)
            .map(|(i, s)| (s.seq, i as u32))
            .collect();
        live.sort_unstable();
        for (_, slot) in live {
            self.delete(slot, now, log);
            self.stats.sessions_flushed += 1;
        }
        self.timers.clear();
        self.frags.clear();
        self.hairpin_frags.clear();
    }

    /// Deletes the sessions whose idle timeout ended at or before `ts_ns`
    /// without processing a packet (e.g. on an idle tick). Advances the
    /// engine clock.
    pub fn expire_until(&mut self, ts_ns: u64, log: &mut impl NatLog) {
        let now = self.advance(ts_ns);
        self.expire(now, log);
    }

    pub(super) fn advance(&mut self, ts_ns: u64) -> u64 {
        self.now = self.now.max(ts_ns);
        self.now
    }

    pub(super) fn timeout_of(&self, state: State) -> u64 {
        match state {
            State::Udp => self.udp_ns,
            State::Icmp => self.icmp_ns,
            State::TcpOpening | State::TcpClosing | State::TcpReset => self.tcp_trans_ns,
            State::TcpEstablished => self.tcp_est_ns,
        }
    }

    pub(super) fn expire(&mut self, now: u64, log: &mut impl NatLog) {
        self.frags.expire(now, &mut self.stats);
        while let Some(&Reverse((at, seq, slot, gen))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            let Some(s) = self.slots.get(slot as usize) else {
                continue;
            };
            if !s.live || s.seq != seq || s.timer_gen != gen {
                continue; // stale entry
            }
            let actual = s.last_seen.saturating_add(self.timeout_of(s.state));
            if actual > now {
                // Refreshed since scheduled: reschedule lazily.
                self.slots[slot as usize].scheduled = actual;
                self.timers.push(Reverse((actual, seq, slot, gen)));
                continue;
            }
            self.delete(slot, actual, log);
            self.stats.sessions_expired += 1;
        }
    }

    /// After a session's state or last_seen changed: make sure its timer
    /// fires no later than its new expiry.
    pub(super) fn reschedule(&mut self, slot: u32) {
        let s = &self.slots[slot as usize];
        let expiry = s.last_seen.saturating_add(self.timeout_of(s.state));
        if expiry < s.scheduled {
            let s = &mut self.slots[slot as usize];
            s.timer_gen = s.timer_gen.wrapping_add(1);
            s.scheduled = expiry;
            self.timers
                .push(Reverse((expiry, s.seq, slot, s.timer_gen)));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::nat::testutil::*;

    #[test]
    fn udp_expiry_logs_counters_and_recreates() {
        let mut n = nat();
        let mut log = Log(vec![]);
        for i in 0..3 {
            let mut f = udp_frame(H1, 5000, R1, 53);
            run(&mut n, &mut log, T0 + i * SEC, &mut f);
        }
        let mut r = udp_frame(R1, 53, H1, 5000);
        assert_eq!(
            run(&mut n, &mut log, T0 + 3 * SEC, &mut r),
            Verdict::TranslatedIn
        );
        // 301 s after the last packet: expired at last + 300 s.
        let mut f = udp_frame(H1, 5000, R1, 53);
        let t_new = T0 + 3 * SEC + 301 * SEC;
        assert_eq!(run(&mut n, &mut log, t_new, &mut f), Verdict::TranslatedOut);
        let ev: Vec<(u8, u64)> = log
            .0
            .iter()
            .map(|r| (r.nat_event, r.timestamp_ns))
            .collect();
        assert_eq!(ev, vec![(4, T0), (5, T0 + 303 * SEC), (4, t_new)]);
        let d = log.0[1];
        assert_eq!((d.initiator_packets, d.responder_packets), (3, 1));
        assert_eq!((d.initiator_octets, d.responder_octets), (3 * 36, 36));
        assert_eq!(n.stats().sessions_expired, 1);
        assert_eq!(n.stats().sessions_live, 1);
    }

    #[test]
    fn session_alive_just_before_timeout() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let mut f = udp_frame(H1, 5000, R1, 53);
        run(&mut n, &mut log, T0, &mut f);
        let mut f = udp_frame(H1, 5000, R1, 53);
        run(&mut n, &mut log, T0 + 299 * SEC, &mut f);
        let mut f = udp_frame(H1, 5000, R1, 53);
        run(&mut n, &mut log, T0 + 598 * SEC, &mut f);
        assert_eq!(log.0.len(), 1, "refreshed in time: one session only");
        n.expire_until(T0 + 898 * SEC, &mut log.f());
        assert_eq!(log.0.len(), 2);
        assert_eq!(log.0[1].timestamp_ns, T0 + 898 * SEC);
    }

    #[test]
    fn finish_deletes_all_in_creation_order() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let flows = [(H1, 1), (H2, 2), (H1, 3), (H2, 4)];
        for (i, (h, p)) in flows.iter().enumerate() {
            let mut f = udp_frame(*h, *p, R1, 53);
            run(&mut n, &mut log, T0 + i as u64, &mut f);
        }
        // Touch the first one last: order must still be creation order.
        let mut f = udp_frame(H1, 1, R1, 53);
        run(&mut n, &mut log, T0 + 10, &mut f);
        n.finish(T0 + 20, &mut log.f());
        let d = log.events(5);
        let order: Vec<u16> = d.iter().map(|r| r.src_port).collect();
        assert_eq!(order, vec![1, 2, 3, 4]);
        assert!(d.iter().all(|r| r.timestamp_ns == T0 + 20));
        assert_eq!(d[0].initiator_packets, 2);
        let s = n.stats();
        assert_eq!(
            (s.sessions_created, s.sessions_deleted, s.sessions_live),
            (4, 4, 0)
        );
        assert_eq!(
            (s.peak_sessions, s.records_logged, s.mappings_live),
            (4, 8, 0)
        );
    }

    #[test]
    fn time_going_backwards_is_harmless() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let mut f = udp_frame(H1, 1, R1, 53);
        run(&mut n, &mut log, T0 + 100 * SEC, &mut f);
        let mut f = udp_frame(H1, 2, R1, 53);
        run(&mut n, &mut log, T0, &mut f); // 100 s in the past
        let mut f = udp_frame(H1, 1, R1, 53);
        run(&mut n, &mut log, 0, &mut f);
        assert_eq!(
            log.0[1].timestamp_ns,
            T0 + 100 * SEC,
            "clock never goes backwards"
        );
        n.expire_until(T0 + 400 * SEC, &mut log.f());
        let d = log.events(5);
        assert_eq!(d.len(), 2);
        assert!(d.iter().all(|r| r.timestamp_ns == T0 + 400 * SEC));
        assert_eq!(n.now_ns(), T0 + 400 * SEC);
    }
}
