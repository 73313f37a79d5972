//! The session table: 5-tuple keys, endpoint-independent mappings
//! (RFC 4787 REQ-1), sessions with their counters and TCP state (RFC 7857
//! section 2.1), and their creation, refresh and deletion.

use std::cmp::Reverse;
use std::hash::{Hash, Hasher};

use dplog::nat::NatEvent;

use super::{Nat44, NatLog, Verdict};
use crate::packet::{PROTO_ICMP, PROTO_TCP, TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN};

/// A session's 5-tuple in inside form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FlowKey {
    pub(super) inside_addr: u32,
    pub(super) remote_addr: u32,
    pub(super) inside_port: u16,
    pub(super) remote_port: u16,
    pub(super) proto: u8,
}

impl Hash for FlowKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64((u64::from(self.inside_addr) << 32) | u64::from(self.remote_addr));
        h.write_u64(
            (u64::from(self.inside_port) << 32)
                | (u64::from(self.remote_port) << 8)
                | u64::from(self.proto),
        );
    }
}

/// Endpoint-independent mapping key: (protocol, inside address, inside port).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct MapKey {
    pub(super) addr: u32,
    pub(super) port: u16,
    pub(super) proto: u8,
}

impl Hash for MapKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(
            (u64::from(self.addr) << 32) | (u64::from(self.port) << 8) | u64::from(self.proto),
        );
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Mapping {
    pub(super) ext_addr: u32,
    pub(super) ext_port: u16,
    pub(super) pool_index: u32,
    pub(super) refs: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    Udp,
    Icmp,
    /// SYN seen from the initiator, no reply yet.
    TcpOpening,
    TcpEstablished,
    /// FIN seen in either direction (or RST after a FIN).
    TcpClosing,
    /// RST seen on an opening or established session: transitory timeout,
    /// but any later non-RST packet restores it to established, so that a
    /// spoofed or lost-in-flight RST cannot kill a live session early
    /// (RFC 7857 section 2.1; RFC 6146 section 3.5.2.2 TRANS state).
    TcpReset,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Session {
    /// Creation serial, unique for the engine's lifetime; orders `finish`.
    pub(super) seq: u64,
    pub(super) live: bool,
    /// Generation of the session's one valid timer-heap entry.
    pub(super) timer_gen: u32,
    /// Expiry time of that heap entry.
    pub(super) scheduled: u64,
    pub(super) key: FlowKey,
    pub(super) ext_addr: u32,
    pub(super) ext_port: u16,
    pub(super) state: State,
    pub(super) last_seen: u64,
    pub(super) init_packets: u32,
    pub(super) resp_packets: u32,
    pub(super) init_octets: u64,
    pub(super) resp_octets: u64,
}

impl Nat44 {
    pub(super) fn delete(&mut self, slot: u32, ts: u64, log: &mut impl NatLog) {
        let Some(s) = self.slots.get_mut(slot as usize) else {
            return;
        };
        if !s.live {
            return;
        }
        s.live = false;
        let s = *s;
        self.flows.remove(&s.key);
        let mk = MapKey {
            addr: s.key.inside_addr,
            port: s.key.inside_port,
            proto: s.key.proto,
        };
        if let Some(m) = self.mappings.get_mut(&mk) {
            m.refs -= 1;
            if m.refs == 0 {
                let m = *m;
                self.mappings.remove(&mk);
                self.reverse.remove(&(m.ext_addr, m.ext_port, mk.proto));
                self.stats.mappings_live -= 1;
                if let Some(block) = self.ports.get_mut(&(m.pool_index, s.key.proto)) {
                    block.free(m.ext_port);
                }
            }
        }
        self.free_slots.push(slot);
        if self.log_sessions {
            let rec = self.record(&s, NatEvent::Nat44SessionDelete, ts);
            log.session(rec);
            self.stats.records_logged += 1;
        }
        self.stats.sessions_deleted += 1;
        self.stats.sessions_live -= 1;
        if self.track_users {
            self.user_session_ended(s.key.inside_addr, s.ext_addr, ts, log);
        }
    }

    /// Creates a session for outbound `key`; `Err(PoolExhausted)` when no
    /// external port is left, `Err(SessionLimit)` when the subscriber is at
    /// its limit.
    pub(super) fn create(
        &mut self,
        now: u64,
        key: FlowKey,
        tcp_flags: u8,
        log: &mut impl NatLog,
    ) -> Result<u32, Verdict> {
        if self.track_users {
            let limit = self.cfg.max_sessions_per_user;
            let sessions = self.users.get(&key.inside_addr).map_or(0, |u| u.sessions);
            if limit > 0 && sessions >= limit {
                self.quota_exceeded(now, key.inside_addr, limit, log);
                return Err(Verdict::SessionLimit);
            }
        }
        let mk = MapKey {
            addr: key.inside_addr,
            port: key.inside_port,
            proto: key.proto,
        };
        let (ext_addr, ext_port) = match self.mappings.get_mut(&mk) {
            Some(m) => {
                m.refs += 1;
                (m.ext_addr, m.ext_port)
            }
            None => {
                let (pool_index, ext_port) = self.allocate(now, &key, log)?;
                let ext_addr = self.pool_first + pool_index;
                self.mappings.insert(
                    mk,
                    Mapping {
                        ext_addr,
                        ext_port,
                        pool_index,
                        refs: 1,
                    },
                );
                self.reverse.insert((ext_addr, ext_port, key.proto), mk);
                self.stats.mappings_live += 1;
                (ext_addr, ext_port)
            }
        };
        if self.track_users {
            self.users.entry(key.inside_addr).or_default().sessions += 1;
        }
        let state = match key.proto {
            PROTO_TCP if tcp_flags & TCP_RST != 0 => State::TcpReset,
            PROTO_TCP if tcp_flags & TCP_FIN != 0 => State::TcpClosing,
            PROTO_TCP if tcp_flags & (TCP_SYN | TCP_ACK) == TCP_SYN => State::TcpOpening,
            PROTO_TCP => State::TcpEstablished,
            PROTO_ICMP => State::Icmp,
            _ => State::Udp,
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        let scheduled = now.saturating_add(self.timeout_of(state));
        let session = Session {
            seq,
            live: true,
            timer_gen: 0,
            scheduled,
            key,
            ext_addr,
            ext_port,
            state,
            last_seen: now,
            init_packets: 0,
            resp_packets: 0,
            init_octets: 0,
            resp_octets: 0,
        };
        let slot = match self.free_slots.pop() {
            Some(i) => {
                self.slots[i as usize] = session;
                i
            }
            None => {
                self.slots.push(session);
                (self.slots.len() - 1) as u32
            }
        };
        self.flows.insert(key, slot);
        self.timers.push(Reverse((scheduled, seq, slot, 0)));
        if self.log_sessions {
            let rec = self.record(&session, NatEvent::Nat44SessionCreate, now);
            log.session(rec);
            self.stats.records_logged += 1;
        }
        self.stats.sessions_created += 1;
        self.stats.sessions_live += 1;
        self.stats.peak_sessions = self.stats.peak_sessions.max(self.stats.sessions_live);
        Ok(slot)
    }

    /// Counts a packet on a session and advances its TCP state (RFC 7857
    /// section 2.1): FIN → closing (transitory); RST → reset (transitory,
    /// but a later non-RST packet restores established); a reply to a SYN
    /// → established.
    pub(super) fn touch(
        &mut self,
        slot: u32,
        now: u64,
        octets: u16,
        from_initiator: bool,
        tcp_flags: Option<u8>,
    ) {
        let s = &mut self.slots[slot as usize];
        s.last_seen = s.last_seen.max(now);
        if from_initiator {
            s.init_packets = s.init_packets.saturating_add(1);
            s.init_octets += u64::from(octets);
        } else {
            s.resp_packets = s.resp_packets.saturating_add(1);
            s.resp_octets += u64::from(octets);
        }
        if let Some(flags) = tcp_flags {
            if flags & TCP_RST != 0 {
                if s.state != State::TcpClosing {
                    s.state = State::TcpReset;
                }
            } else if flags & TCP_FIN != 0 {
                s.state = State::TcpClosing;
            } else if s.state == State::TcpReset
                || (!from_initiator && s.state == State::TcpOpening)
            {
                s.state = State::TcpEstablished;
            }
        }
        self.reschedule(slot);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::nat::testutil::*;

    #[test]
    fn endpoint_independent_mapping() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let mut a = udp_frame(H1, 4000, R1, 53);
        let mut b = udp_frame(H1, 4000, R2, 123);
        run(&mut n, &mut log, T0, &mut a);
        run(&mut n, &mut log, T0 + SEC, &mut b);
        assert_eq!(
            src_of(&a),
            src_of(&b),
            "same inside addr:port → same external addr:port"
        );
        assert_eq!(n.stats().sessions_created, 2);
        assert_eq!(n.stats().mappings_live, 1);
        // Another inside port of the same host: same address (paired), other port.
        let mut c = udp_frame(H1, 4001, R1, 53);
        run(&mut n, &mut log, T0 + SEC, &mut c);
        assert_eq!(src_of(&c).0, src_of(&a).0);
        assert_ne!(src_of(&c).1, src_of(&a).1);
        // The same port number on TCP is a separate mapping space.
        let mut t = tcp_frame(H1, 4000, R1, 80, TCP_SYN);
        run(&mut n, &mut log, T0 + SEC, &mut t);
        assert_eq!(src_of(&t).0, src_of(&a).0);
    }

    #[test]
    fn different_hosts_never_share_an_external_endpoint() {
        let mut n = Nat44::new(NatConfig::new(
            vec!["10.0.0.0/8".parse().unwrap()],
            "198.51.100.0/30".parse().unwrap(), // 2 usable addresses
        ))
        .unwrap();
        let mut log = Log(vec![]);
        // External endpoint → (inside endpoint, sessions using it).
        type Endpoint = (u32, u16);
        let mut live: HashMap<(u32, u16, u8), (Endpoint, u32)> = HashMap::new();
        let mut ts = T0;
        for i in 0..3000u32 {
            let host = 0x0A00_0001 + (i % 50);
            let sport = 1000 + (i % 97) as u16;
            let dst = R1 + (i % 7);
            ts += SEC / 2;
            let mut f = udp_frame(host, sport, dst, 53);
            assert_eq!(run(&mut n, &mut log, ts, &mut f), Verdict::TranslatedOut);
            let ext = src_of(&f);
            // Keep the set of live mappings in sync with the log.
            for r in log.0.drain(..) {
                let k = (r.post_nat_src_addr, r.post_napt_src_port, r.protocol);
                let owner = (r.src_addr, r.src_port);
                if r.nat_event == 4 {
                    let e = live.entry(k).or_insert((owner, 0));
                    assert_eq!(e.0, owner, "external endpoint shared");
                    e.1 += 1;
                } else {
                    let e = live.get_mut(&k).expect("delete of a live mapping");
                    e.1 -= 1;
                    if e.1 == 0 {
                        live.remove(&k);
                    }
                }
            }
            assert_eq!(live[&(ext.0, ext.1, 17)].0, (host, sport));
        }
        assert!(
            n.stats().sessions_expired > 0,
            "the test covered expiry and reuse"
        );
    }

    #[test]
    fn return_traffic_matches_and_counts() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let mut out = tcp_frame(H1, 40000, R1, 443, TCP_SYN);
        assert_eq!(run(&mut n, &mut log, T0, &mut out), Verdict::TranslatedOut);
        let mut back = tcp_frame(R1, 443, H1, 40000, TCP_SYN | TCP_ACK);
        let before = back.clone();
        assert_eq!(
            run(&mut n, &mut log, T0 + 1, &mut back),
            Verdict::TranslatedIn
        );
        assert_eq!(back, before, "inbound frames are not modified");
        let mut stray = tcp_frame(R2, 443, H1, 40000, TCP_ACK);
        assert_eq!(
            run(&mut n, &mut log, T0 + 2, &mut stray),
            Verdict::InboundNoSession
        );
        n.finish(T0 + 10 * SEC, &mut log.f());
        let d = log.events(5);
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].initiator_packets, d[0].responder_packets), (1, 1));
        assert_eq!((d[0].initiator_octets, d[0].responder_octets), (44, 44));
        assert_eq!(d[0].timestamp_ns, T0 + 10 * SEC);
        assert_eq!(n.stats().count(Verdict::InboundNoSession), 1);
    }

    #[test]
    fn tcp_states_and_timeouts() {
        let mut n = nat();
        let mut log = Log(vec![]);
        // SYN only: transitory, expires after 240 s.
        let mut f = tcp_frame(H1, 1111, R1, 80, TCP_SYN);
        run(&mut n, &mut log, T0, &mut f);
        n.expire_until(T0 + 240 * SEC, &mut log.f());
        assert_eq!(log.events(5).len(), 1);
        assert_eq!(log.events(5)[0].timestamp_ns, T0 + 240 * SEC);

        // Mid-stream pickup (ACK): established, still alive after 240 s.
        let mut log = Log(vec![]);
        let mut f = tcp_frame(H1, 2222, R1, 80, TCP_ACK);
        let t1 = T0 + 1000 * SEC;
        run(&mut n, &mut log, t1, &mut f);
        n.expire_until(t1 + 7000 * SEC, &mut log.f());
        assert!(log.events(5).is_empty());
        // FIN moves it to transitory: expires 240 s after the FIN.
        let t2 = t1 + 7100 * SEC;
        let mut fin = tcp_frame(R1, 80, H1, 2222, TCP_FIN | TCP_ACK);
        assert_eq!(run(&mut n, &mut log, t2, &mut fin), Verdict::TranslatedIn);
        n.expire_until(t2 + 239 * SEC, &mut log.f());
        assert!(log.events(5).is_empty());
        n.expire_until(t2 + 240 * SEC, &mut log.f());
        assert_eq!(log.events(5).len(), 1);
        assert_eq!(log.events(5)[0].timestamp_ns, t2 + 240 * SEC);
        assert_eq!(log.events(5)[0].responder_packets, 1);

        // SYN then reply: established (7440 s).
        let mut log = Log(vec![]);
        let t3 = t2 + 10_000 * SEC;
        let mut f = tcp_frame(H2, 3333, R2, 80, TCP_SYN);
        run(&mut n, &mut log, t3, &mut f);
        let mut f = tcp_frame(R2, 80, H2, 3333, TCP_SYN | TCP_ACK);
        run(&mut n, &mut log, t3 + SEC, &mut f);
        n.expire_until(t3 + 7440 * SEC, &mut log.f());
        assert!(log.events(5).is_empty());
        n.expire_until(t3 + 7441 * SEC, &mut log.f());
        assert_eq!(log.events(5)[0].timestamp_ns, t3 + 7441 * SEC);
    }

    #[test]
    fn new_syn_on_closing_session_replaces_it() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let mut f = tcp_frame(H1, 1111, R1, 80, TCP_ACK);
        run(&mut n, &mut log, T0, &mut f);
        let mut f = tcp_frame(H1, 1111, R1, 80, TCP_RST);
        run(&mut n, &mut log, T0 + SEC, &mut f);
        let mut f = tcp_frame(H1, 1111, R1, 80, TCP_SYN);
        run(&mut n, &mut log, T0 + 2 * SEC, &mut f);
        let ev: Vec<(u8, u64)> = log
            .0
            .iter()
            .map(|r| (r.nat_event, r.timestamp_ns))
            .collect();
        assert_eq!(ev, vec![(4, T0), (5, T0 + 2 * SEC), (4, T0 + 2 * SEC)]);
        assert_eq!(log.0[1].initiator_packets, 2);
        assert_eq!(n.stats().sessions_replaced, 1);
    }

    #[test]
    fn tcp_rst_is_transitory_but_traffic_after_it_restores_the_session() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let mut f = tcp_frame(H1, 1111, R1, 80, TCP_ACK);
        run(&mut n, &mut log, T0, &mut f);
        let mut f = tcp_frame(R1, 80, H1, 1111, TCP_RST);
        run(&mut n, &mut log, T0 + SEC, &mut f);
        // Without more packets: deleted 240 s after the RST.
        let mut probe = nat();
        let mut plog = Log(vec![]);
        let mut f = tcp_frame(H1, 1111, R1, 80, TCP_ACK);
        run(&mut probe, &mut plog, T0, &mut f);
        let mut f = tcp_frame(R1, 80, H1, 1111, TCP_RST);
        run(&mut probe, &mut plog, T0 + SEC, &mut f);
        probe.expire_until(T0 + 241 * SEC, &mut plog.f());
        assert_eq!(plog.events(5).len(), 1);
        // A (spoofed) RST followed by live traffic: established again.
        let mut f = tcp_frame(H1, 1111, R1, 80, TCP_ACK);
        run(&mut n, &mut log, T0 + 2 * SEC, &mut f);
        n.expire_until(T0 + 1000 * SEC, &mut log.f());
        assert!(log.events(5).is_empty(), "restored to established");
        // FIN then RST stays closing: no restore.
        let mut f = tcp_frame(H1, 1111, R1, 80, TCP_FIN | TCP_ACK);
        run(&mut n, &mut log, T0 + 1001 * SEC, &mut f);
        let mut f = tcp_frame(R1, 80, H1, 1111, TCP_RST);
        run(&mut n, &mut log, T0 + 1002 * SEC, &mut f);
        let mut f = tcp_frame(H1, 1111, R1, 80, TCP_ACK);
        run(&mut n, &mut log, T0 + 1003 * SEC, &mut f);
        n.expire_until(T0 + 1243 * SEC, &mut log.f());
        assert_eq!(log.events(5).len(), 1);
    }
}
