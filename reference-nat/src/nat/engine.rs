//! The engine's front: building a [`Nat44`] from a checked
//! [`NatConfig`], its accessors, and the per-packet path (parse, special
//! addresses, direction, protocol, session lookup or creation,
//! translation).

use std::collections::BinaryHeap;
use std::time::Duration;

use ipnet::Ipv4Net;

use super::fragments::{FragKey, FragTable};
use super::hash::FxMap;
use super::icmp::is_icmp_error;
use super::rewrite::{rewrite_destination, rewrite_outbound};
use super::session::{FlowKey, State};
use super::{
    Nat44, NatConfig, NatError, NatLog, NatStats, PortAllocation, Verdict, FIRST_EXTERNAL_PORT,
    MAX_BLOCKS_PER_USER, MAX_DETERMINISTIC_SUBSCRIBERS,
};
use crate::packet::{
    self, ParseError, ParsedPacket, Transport, PROTO_ICMP, PROTO_TCP, PROTO_UDP, TCP_ACK, TCP_SYN,
};

fn prefix_bits(n: &Ipv4Net) -> (u32, u32) {
    let mask = u32::from(n.netmask());
    (u32::from(n.network()), mask)
}

fn overlaps(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[inline]
fn in_prefix(addr: u32, net: u32, len: u32) -> bool {
    (addr ^ net) >> (32 - len) == 0
}

/// Verdict for special-purpose source or destination addresses (RFC 6890),
/// or `None` for ordinary unicast.
fn special_address(src: u32, dst: u32) -> Option<Verdict> {
    const THIS_NET: u32 = 0x0000_0000; // 0.0.0.0/8
    const LOOPBACK: u32 = 0x7F00_0000; // 127.0.0.0/8
    const LINK_LOCAL: u32 = 0xA9FE_0000; // 169.254.0.0/16
    const MULTICAST: u32 = 0xE000_0000; // 224.0.0.0/4
    const RESERVED: u32 = 0xF000_0000; // 240.0.0.0/4
    if dst == u32::MAX {
        Some(Verdict::Broadcast)
    } else if in_prefix(dst, MULTICAST, 4) {
        Some(Verdict::Multicast)
    } else if in_prefix(src, THIS_NET, 8) || in_prefix(dst, THIS_NET, 8) {
        Some(Verdict::ThisNetwork)
    } else if in_prefix(src, LOOPBACK, 8) || in_prefix(dst, LOOPBACK, 8) {
        Some(Verdict::Loopback)
    } else if in_prefix(src, LINK_LOCAL, 16) || in_prefix(dst, LINK_LOCAL, 16) {
        Some(Verdict::LinkLocal)
    } else if in_prefix(src, MULTICAST, 4)
        || in_prefix(src, RESERVED, 4)
        || in_prefix(dst, RESERVED, 4)
    {
        Some(Verdict::Reserved)
    } else {
        None
    }
}

impl Nat44 {
    /// Validates `cfg` and builds an engine with empty tables.
    ///
    /// # Errors
    ///
    /// [`NatError`] when there is no inside prefix, the pool is not usable
    /// unicast space or overlaps an inside prefix, a timeout is zero, or the
    /// fragment table size is zero.
    pub fn new(cfg: NatConfig) -> Result<Nat44, NatError> {
        if cfg.inside.is_empty() {
            return Err(NatError::NoInsidePrefix);
        }
        let pool = cfg.pool.trunc();
        let specials: [Ipv4Net; 5] = [
            "0.0.0.0/8".parse().expect("literal"),
            "127.0.0.0/8".parse().expect("literal"),
            "169.254.0.0/16".parse().expect("literal"),
            "224.0.0.0/4".parse().expect("literal"),
            "240.0.0.0/4".parse().expect("literal"),
        ];
        if specials.iter().any(|s| overlaps(s, &pool)) {
            return Err(NatError::PoolNotUnicast(cfg.pool));
        }
        if let Some(i) = cfg.inside.iter().find(|i| overlaps(i, &pool)) {
            return Err(NatError::PoolOverlapsInside {
                pool: cfg.pool,
                inside: *i,
            });
        }
        let t = &cfg.timeouts;
        for (name, d) in [
            ("udp", t.udp),
            ("tcp_established", t.tcp_established),
            ("tcp_transitory", t.tcp_transitory),
            ("icmp", t.icmp),
        ] {
            if d.is_zero() {
                return Err(NatError::ZeroTimeout(name));
            }
        }
        if cfg.fragment_table_size == 0 {
            return Err(NatError::ZeroFragmentTable);
        }
        let (plo, phi) = cfg.port_range;
        if plo < FIRST_EXTERNAL_PORT || phi < plo {
            return Err(NatError::BadPortRange(plo, phi));
        }
        let rng = match cfg.port_allocation {
            PortAllocation::Random { seed } => seed | 1,
            _ => 1,
        };
        let len = u32::from(pool.prefix_len());
        let size = 1u64 << (32 - len);
        let (pool_first, pool_count) = if len >= 31 {
            (u32::from(pool.network()), size as u32)
        } else {
            (u32::from(pool.network()) + 1, (size - 2) as u32)
        };
        let range_len = u32::from(phi) - u32::from(plo) + 1;
        let mut blocks_per_address = 0;
        let mut det = None;
        match cfg.port_allocation {
            PortAllocation::PortBlock { size, max_blocks } => {
                if size == 0
                    || u32::from(size) > range_len
                    || max_blocks == 0
                    || max_blocks > MAX_BLOCKS_PER_USER
                {
                    return Err(NatError::BadPortBlock(size, max_blocks));
                }
                blocks_per_address = range_len / u32::from(size);
            }
            PortAllocation::Deterministic => {
                let n: u64 = cfg
                    .inside
                    .iter()
                    .map(|p| 1u64 << (32 - u32::from(p.prefix_len())))
                    .sum();
                if n > MAX_DETERMINISTIC_SUBSCRIBERS {
                    return Err(NatError::BadDeterministic(
                        n,
                        "more inside addresses than MAX_DETERMINISTIC_SUBSCRIBERS (2^20)",
                    ));
                }
                let per_address = n.div_ceil(u64::from(pool_count));
                let ports = u64::from(range_len) / per_address;
                if ports == 0 {
                    return Err(NatError::BadDeterministic(
                        n,
                        "fewer than one port per subscriber (grow the pool or the port range)",
                    ));
                }
                det = Some((per_address as u32, ports as u32));
            }
            PortAllocation::Sequential | PortAllocation::Random { .. } => {}
        }
        let pba = matches!(cfg.port_allocation, PortAllocation::PortBlock { .. });
        let quiet = pba || det.is_some();
        Ok(Nat44 {
            inside: cfg.inside.iter().map(prefix_bits).collect(),
            pool_first,
            pool_count,
            udp_ns: nanos(t.udp),
            tcp_est_ns: nanos(t.tcp_established),
            tcp_trans_ns: nanos(t.tcp_transitory),
            icmp_ns: nanos(t.icmp),
            now: 0,
            next_seq: 1,
            flows: FxMap::default(),
            mappings: FxMap::default(),
            ports: FxMap::default(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            timers: BinaryHeap::new(),
            frags: FragTable::new(cfg.fragment_table_size, nanos(cfg.fragment_timeout)),
            hairpin_frags: FragTable::new(cfg.fragment_table_size, nanos(cfg.fragment_timeout)),
            handoff: None,
            handoff_target: 0,
            stats: NatStats::default(),
            rng,
            reverse: FxMap::default(),
            users: FxMap::default(),
            track_users: pba || cfg.max_sessions_per_user > 0,
            log_sessions: !quiet || cfg.log_sessions_in_blocks,
            free_blocks: FxMap::default(),
            blocks_per_address,
            blocks_used: 0,
            det,
            event_last: [None; 3],
            event_interval_ns: nanos(cfg.event_log_interval),
            cfg,
        })
    }

    /// The configuration the engine was built with.
    pub fn config(&self) -> &NatConfig {
        &self.cfg
    }

    /// Counters so far.
    pub fn stats(&self) -> &NatStats {
        &self.stats
    }

    /// The engine clock: the newest packet (or `finish`) timestamp seen, in
    /// nanoseconds since the Unix epoch.
    pub fn now_ns(&self) -> u64 {
        self.now
    }

    /// Number of usable pool addresses.
    pub fn pool_size(&self) -> u32 {
        self.pool_count
    }

    /// True when `addr` (host order) is in an inside prefix.
    pub fn is_inside(&self, addr: u32) -> bool {
        self.inside.iter().any(|&(net, mask)| addr & mask == net)
    }

    /// Processes one captured frame at time `ts_ns` (nanoseconds since the
    /// Unix epoch) with pcap link type `linktype`.
    ///
    /// Sessions whose idle timeout ended at or before `ts_ns` are deleted
    /// first (natEvent 5 records, stamped with their expiry time). Then the
    /// packet is classified; an outbound packet is rewritten in place in
    /// `frame`. New sessions produce natEvent 4 records. Every record goes
    /// to `log` synchronously, in event order.
    pub fn process(
        &mut self,
        ts_ns: u64,
        linktype: u32,
        frame: &mut [u8],
        log: &mut impl NatLog,
    ) -> Verdict {
        let now = self.advance(ts_ns);
        self.expire(now, log);
        let v = self.handle(now, linktype, frame, log);
        self.stats.packets += 1;
        self.stats.verdicts[v.index()] += 1;
        v
    }

    /// [`process`](Self::process) for a frame of which only `frame.len()`
    /// of `wire_len` bytes were captured (pcap caplen < original length,
    /// a snap length). If the frame parses whole it is processed as usual.
    /// Otherwise, when the IPv4 header and the transport's fixed header
    /// (TCP 20 bytes, UDP and ICMP echo 8) were captured, it is translated
    /// like any other packet: the rewrites touch only those headers and
    /// update the checksums incrementally (RFC 1624), so the payload that
    /// was not captured is not needed; session byte counters use the IPv4
    /// total length. Otherwise (headers cut, or an ICMP error whose quote
    /// was cut) it gets [`Verdict::Snapped`].
    pub fn process_snapped(
        &mut self,
        ts_ns: u64,
        linktype: u32,
        frame: &mut [u8],
        wire_len: usize,
        log: &mut impl NatLog,
    ) -> Verdict {
        if frame.len() >= wire_len || packet::parse(linktype, frame).is_ok() {
            return self.process(ts_ns, linktype, frame, log);
        }
        let now = self.advance(ts_ns);
        self.expire(now, log);
        let v = match packet::parse_snapped(linktype, frame) {
            Ok(p) => match p.transport {
                Transport::IcmpOther { icmp_type, .. } if is_icmp_error(icmp_type) => {
                    Verdict::Snapped
                }
                _ => self.handle_parsed(now, p, frame, log),
            },
            Err(ParseError::Malformed(r)) if r.is_cut() => Verdict::Snapped,
            Err(e) => e.into(),
        };
        self.stats.packets += 1;
        self.stats.verdicts[v.index()] += 1;
        v
    }

    fn handle(
        &mut self,
        now: u64,
        linktype: u32,
        frame: &mut [u8],
        log: &mut impl NatLog,
    ) -> Verdict {
        let p = match packet::parse(linktype, frame) {
            Ok(p) => p,
            Err(e) => return e.into(),
        };
        self.handle_parsed(now, p, frame, log)
    }

    fn handle_parsed(
        &mut self,
        now: u64,
        p: ParsedPacket,
        frame: &mut [u8],
        log: &mut impl NatLog,
    ) -> Verdict {
        let (src, dst) = (p.ip.src, p.ip.dst);
        if let Some(v) = special_address(src, dst) {
            return v;
        }
        let outbound = match (self.is_inside(src), self.is_inside(dst)) {
            (true, true) => return Verdict::InsideToInside,
            (false, false) => return Verdict::Transit,
            (true, false) => true,
            (false, true) => false,
        };
        let proto = p.ip.protocol;
        if !matches!(proto, PROTO_TCP | PROTO_UDP | PROTO_ICMP) {
            return Verdict::UnsupportedProtocol;
        }
        if p.ip.is_later_fragment() {
            return self.later_fragment(now, &p, outbound, frame);
        }
        let (sport, dport, tcp_flags, icmp_reply) = match p.transport {
            Transport::Tcp(t) => (t.src_port, t.dst_port, Some(t.flags), None),
            Transport::Udp(u) => (u.src_port, u.dst_port, None, None),
            // The identifier is the inside host's "port"; the remote port is 0.
            Transport::IcmpEcho(e) if outbound => (e.identifier, 0, None, Some(e.reply)),
            Transport::IcmpEcho(e) => (0, e.identifier, None, Some(e.reply)),
            Transport::IcmpOther { icmp_type, .. } if is_icmp_error(icmp_type) => {
                return self.icmp_error(&p, outbound, frame);
            }
            Transport::IcmpOther { .. } => return Verdict::IcmpNotEcho,
            Transport::Fragment | Transport::Other => return Verdict::UnsupportedProtocol,
        };
        // Hairpinning (RFC 4787 REQ-9): to one of our external addresses.
        // Across workers (two-stage): the owner of the destination port
        // translates the destination; here only the source.
        // A TCP/UDP hairpin to a pool port nobody holds still gets the
        // sender's session first (its mapping is allocated, RFC 4787 REQ-1:
        // endpoint-independent, so not conditional on the destination),
        // then is dropped: exactly what the two-stage path does when the
        // owner finds no mapping, so the audit log is the same for any
        // worker count.
        let mut handoff = None;
        let mut no_mapping = false;
        let hairpin = if outbound && dst.wrapping_sub(self.pool_first) < self.pool_count {
            if icmp_reply.is_some() {
                return Verdict::HairpinNoMapping;
            }
            match self.hairpin_owner(dst, dport) {
                Some(w) if self.handoff.is_some_and(|(me, _, _)| me != w) => {
                    handoff = Some(w);
                    None
                }
                _ => match self.reverse.get(&(dst, dport, proto)) {
                    Some(&mk) => Some(mk),
                    None => {
                        no_mapping = true;
                        None
                    }
                },
            }
        } else {
            None
        };
        let key = if outbound {
            FlowKey {
                inside_addr: src,
                remote_addr: dst,
                inside_port: sport,
                remote_port: dport,
                proto,
            }
        } else {
            FlowKey {
                inside_addr: dst,
                remote_addr: src,
                inside_port: dport,
                remote_port: sport,
                proto,
            }
        };
        let octets = p.ip.total_len;
        let slot = if outbound {
            let existing = self.flows.get(&key).copied();
            let existing = match (existing, tcp_flags) {
                // A new SYN on a closing or reset TCP session starts a new
                // session (port reuse after FIN / RST, RFC 7857 2.2).
                (Some(slot), Some(f))
                    if f & (TCP_SYN | TCP_ACK) == TCP_SYN
                        && matches!(
                            self.slots[slot as usize].state,
                            State::TcpClosing | State::TcpReset
                        ) =>
                {
                    self.delete(slot, now, log);
                    self.stats.sessions_replaced += 1;
                    None
                }
                (e, _) => e,
            };
            let slot = match existing {
                Some(slot) => slot,
                None if icmp_reply == Some(true) => return Verdict::IcmpReplyNoSession,
                None => match self.create(now, key, tcp_flags.unwrap_or(0), log) {
                    Ok(slot) => slot,
                    Err(v) => return v,
                },
            };
            self.touch(slot, now, octets, true, tcp_flags);
            if no_mapping {
                // Dropped: later fragments find no fragment entry and are
                // dropped too (as the owner drops them on the two-stage
                // path).
                return Verdict::HairpinNoMapping;
            }
            let s = &self.slots[slot as usize];
            let (ext_addr, ext_port) = (s.ext_addr, s.ext_port);
            rewrite_outbound(frame, &p, ext_addr, ext_port);
            if let Some(mk) = hairpin {
                rewrite_destination(frame, &p, mk.addr, mk.port);
            }
            slot
        } else {
            let slot = match self.flows.get(&key) {
                Some(&slot) if icmp_reply != Some(false) => slot,
                _ => return Verdict::InboundNoSession,
            };
            self.touch(slot, now, octets, false, tcp_flags);
            slot
        };
        if p.ip.is_first_fragment() {
            let fk = FragKey {
                src,
                dst,
                id: p.ip.id,
                proto,
            };
            let seq = self.slots[slot as usize].seq;
            let first_len = u32::from(p.ip.total_len.saturating_sub(p.ip.header_len));
            let hairpin_to = hairpin.map(|mk| mk.addr);
            self.frags
                .insert(fk, slot, seq, now, first_len, hairpin_to, &mut self.stats);
            if let Some(w) = handoff {
                if let Some(e) = self.frags.map.get_mut(&fk) {
                    e.handoff_to = Some(w as u32);
                }
            }
        }
        if let Some(w) = handoff {
            self.handoff_target = w;
            Verdict::HairpinHandoff
        } else if hairpin.is_some() {
            Verdict::Hairpinned
        } else if outbound {
            Verdict::TranslatedOut
        } else {
            Verdict::TranslatedIn
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nat::testutil::*;
    use crate::packet::MalformedReason;

    #[test]
    fn special_destinations_and_directions_are_counted() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let cases: [(u32, u32, Verdict); 11] = [
            (H1, 0xE000_00FB, Verdict::Multicast), // 224.0.0.251
            (H1, 0xEFFF_FFFA, Verdict::Multicast), // 239.255.255.250
            (H1, 0xFFFF_FFFF, Verdict::Broadcast),
            (0, 0xFFFF_FFFF, Verdict::Broadcast), // DHCP discover
            (H1, 0x0000_0001, Verdict::ThisNetwork),
            (H1, 0x7F00_0001, Verdict::Loopback),
            (H1, 0xA9FE_0101, Verdict::LinkLocal),
            (H1, 0xF000_0001, Verdict::Reserved),
            (H1, H2, Verdict::InsideToInside),
            (R1, R2, Verdict::Transit),
            (R1, H1, Verdict::InboundNoSession),
        ];
        for (src, dst, want) in cases {
            let mut f = udp_frame(src, 68, dst, 67);
            let before = f.clone();
            assert_eq!(
                run(&mut n, &mut log, T0, &mut f),
                want,
                "{src:#x} → {dst:#x}"
            );
            assert_eq!(f, before, "untranslated frames are not modified");
        }
        assert!(log.0.is_empty());
        let s = n.stats();
        assert_eq!(s.count(Verdict::Multicast), 2);
        assert_eq!(s.count(Verdict::Broadcast), 2);
        assert_eq!(s.count(Verdict::ThisNetwork), 1);
        assert_eq!(s.count(Verdict::Loopback), 1);
        assert_eq!(s.count(Verdict::LinkLocal), 1);
        assert_eq!(s.count(Verdict::InsideToInside), 1);
        assert_eq!(s.count(Verdict::Transit), 1);
        assert_eq!(s.packets, 11);
        assert_eq!(s.sessions_created, 0);
    }

    #[test]
    fn protocol_and_parse_verdicts() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let mut gre = eth_ipv4(&ipv4(H1, R1, 47, &[], &[0u8; 8]));
        assert_eq!(
            run(&mut n, &mut log, T0, &mut gre),
            Verdict::UnsupportedProtocol
        );
        let mut unreach = icmp_echo(false, 0, 0);
        unreach[0] = 3;
        let mut f = eth_ipv4(&ipv4(H1, R1, PROTO_ICMP, &[], &unreach));
        // An unreachable without a quoted packet.
        assert_eq!(
            run(&mut n, &mut log, T0, &mut f),
            Verdict::IcmpErrorBadQuote
        );
        let mut timestamp = icmp_echo(false, 0, 0);
        timestamp[0] = 13;
        let mut f = eth_ipv4(&ipv4(H1, R1, PROTO_ICMP, &[], &timestamp));
        assert_eq!(run(&mut n, &mut log, T0, &mut f), Verdict::IcmpNotEcho);
        let mut v6 = ether(&[], 0x86DD, &[0x60; 40]);
        assert_eq!(run(&mut n, &mut log, T0, &mut v6), Verdict::NotIpv4);
        let mut short = udp_frame(H1, 1, R1, 2);
        short[14] = 0x43;
        assert_eq!(
            run(&mut n, &mut log, T0, &mut short),
            Verdict::Malformed(MalformedReason::Ipv4IhlTooSmall)
        );
        let mut any = udp_frame(H1, 1, R1, 2);
        assert_eq!(
            n.process(T0, 999, &mut any, &mut log.f()),
            Verdict::UnsupportedLinkType
        );
        assert_eq!(
            n.stats()
                .count(Verdict::Malformed(MalformedReason::Ipv4IhlTooSmall)),
            1
        );
        assert_eq!(n.stats().nonzero().count(), 6);
    }

    #[test]
    fn icmp_echo_sessions() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let mut req = eth_ipv4(&ipv4(H1, R1, PROTO_ICMP, &[], &icmp_echo(false, 9, 1)));
        assert_eq!(run(&mut n, &mut log, T0, &mut req), Verdict::TranslatedOut);
        let mut rep = eth_ipv4(&ipv4(R1, H1, PROTO_ICMP, &[], &icmp_echo(true, 9, 1)));
        assert_eq!(
            run(&mut n, &mut log, T0 + 1, &mut rep),
            Verdict::TranslatedIn
        );
        // A ping from outside is unsolicited; the inside host's answer does
        // not open a session.
        let mut req_in = eth_ipv4(&ipv4(R2, H1, PROTO_ICMP, &[], &icmp_echo(false, 5, 1)));
        assert_eq!(
            run(&mut n, &mut log, T0 + 2, &mut req_in),
            Verdict::InboundNoSession
        );
        let mut rep_out = eth_ipv4(&ipv4(H1, R2, PROTO_ICMP, &[], &icmp_echo(true, 5, 1)));
        assert_eq!(
            run(&mut n, &mut log, T0 + 3, &mut rep_out),
            Verdict::IcmpReplyNoSession
        );
        // ICMP times out after 60 s.
        n.expire_until(T0 + 1 + 60 * SEC, &mut log.f());
        let d = log.events(5);
        assert_eq!(d.len(), 1);
        assert_eq!(
            (
                d[0].initiator_packets,
                d[0].responder_packets,
                d[0].dst_port
            ),
            (1, 1, 0)
        );
    }

    #[test]
    fn raw_ip_linktype_is_translated() {
        let mut n = nat();
        let mut ip = ipv4(H1, R1, PROTO_UDP, &[], &udp(1, 2, b"abc"));
        assert_eq!(
            n.process(T0, LINKTYPE_RAW, &mut ip, &mut |_| {}),
            Verdict::TranslatedOut
        );
        assert_eq!(internet_checksum(&ip[..20]), 0);
        assert_eq!(
            transport_checksum(n.paired_address(H1), R1, 17, &ip[20..]),
            0
        );
    }
}
