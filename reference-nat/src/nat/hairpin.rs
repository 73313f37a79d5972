//! Hairpinning (RFC 4787 REQ-9): within one engine both ends are
//! translated at once; across workers the sender's engine translates the
//! source and the owner of the destination pool port the destination
//! ([`Nat44::hairpin_in`]), see [`crate::workers`].

use super::fragments::FragKey;
use super::rewrite::{rewrite_destination, rewrite_ip_dst};
use super::{Nat44, Verdict};

#[cfg(doc)]
use super::{worker_port_range, NatStats, PortAllocation};
use crate::packet::{self, ParsedPacket, Transport};

impl Nat44 {
    /// Makes this engine worker `index` of `workers` for two-stage
    /// hairpinning (RFC 4787 REQ-9 with REQ-1 kept across workers, as
    /// VPP's NAT44-ED hands a packet between threads): a packet from an
    /// inside host to a pool address and port owned by another worker is
    /// source-translated here with the sender's own endpoint-independent
    /// mapping and returned as [`Verdict::HairpinHandoff`] with
    /// [`handoff_target`](Self::handoff_target) naming the owner, which
    /// translates the destination with [`hairpin_in`](Self::hairpin_in).
    ///
    /// `port_range` is the whole external range before the split of
    /// [`worker_port_range`]: the owner of a pool port is the worker whose
    /// slice holds it; with [`PortAllocation::Deterministic`] (no split),
    /// the worker of the inside host the RFC 7422 mapping gives that port
    /// to ([`crate::workers::worker_of_inside`]). Inside hosts must be
    /// sharded by `worker_of_inside` (as [`crate::workers::Sharder`] does).
    pub fn set_hairpin_handoff(&mut self, index: usize, workers: usize, port_range: (u16, u16)) {
        self.handoff = (workers > 1 && index < workers).then_some((index, workers, port_range));
    }

    /// The worker a [`Verdict::HairpinHandoff`] packet must be handed to
    /// (valid right after that verdict).
    pub fn handoff_target(&self) -> usize {
        self.handoff_target
    }

    /// With [`set_hairpin_handoff`](Self::set_hairpin_handoff), the worker
    /// owning pool address `dst` (host order) and external port `port`:
    /// `None` when `dst` is not a pool address or no worker can own the
    /// port (outside the range, or no deterministic block holds it).
    pub fn hairpin_owner(&self, dst: u32, port: u16) -> Option<usize> {
        let (_, workers, (lo, hi)) = self.handoff?;
        let pool_index = dst.wrapping_sub(self.pool_first);
        if pool_index >= self.pool_count || port < lo || port > hi {
            return None;
        }
        match self.det {
            Some((per_address, ports)) => {
                let b = u32::from(port - lo) / ports;
                if b >= per_address {
                    return None;
                }
                let i = u64::from(pool_index) * u64::from(per_address) + u64::from(b);
                let addr = self.inside_address(i)?;
                Some(crate::workers::worker_of_inside(addr, workers))
            }
            None => {
                let per = (u32::from(hi - lo) + 1) / workers as u32;
                if per == 0 {
                    return None;
                }
                let w = (u32::from(port - lo) / per) as usize;
                Some(w.min(workers - 1))
            }
        }
    }

    /// Stage two of a cross-worker hairpin: translates the destination of
    /// a packet another worker returned as [`Verdict::HairpinHandoff`]
    /// (its source already translated there), captured at `ts_ns` with
    /// link type `linktype`, in place: destination pool address and port
    /// to the inside host of this engine's mapping (checksums patched,
    /// RFC 1624), as [`Verdict::Hairpinned`]; a later fragment gets the
    /// destination address its first fragment got, as
    /// [`Verdict::FragmentMatched`]. Otherwise [`Verdict::HairpinNoMapping`]
    /// or [`Verdict::FragmentNoSession`] (drop it). Counted in
    /// [`NatStats::hairpin_in_received`] / `_delivered` / `_dropped`, not
    /// in `packets` or the verdicts (the sender counted the packet). Does
    /// not refresh a session (neither does a hairpin within one worker).
    /// `wire_len` as for [`process_snapped`](Self::process_snapped).
    pub fn hairpin_in(
        &mut self,
        ts_ns: u64,
        linktype: u32,
        frame: &mut [u8],
        wire_len: usize,
    ) -> Verdict {
        let now = self.advance(ts_ns);
        self.hairpin_frags.expire(now, &mut self.stats);
        self.stats.hairpin_in_received += 1;
        let parsed = match packet::parse(linktype, frame) {
            Ok(p) => Ok(p),
            Err(_) if frame.len() < wire_len => packet::parse_snapped(linktype, frame),
            Err(e) => Err(e),
        };
        let v = match parsed {
            Ok(p) => self.hairpin_deliver(now, &p, frame),
            Err(e) => e.into(),
        };
        if v.is_translated() {
            self.stats.hairpin_in_delivered += 1;
            if v == Verdict::FragmentMatched {
                self.stats.hairpin_in_fragments_delivered += 1;
            }
        } else {
            self.stats.hairpin_in_dropped += 1;
            if v == Verdict::FragmentNoSession {
                self.stats.hairpin_in_fragments_dropped += 1;
            }
        }
        v
    }

    fn hairpin_deliver(&mut self, now: u64, p: &ParsedPacket, frame: &mut [u8]) -> Verdict {
        let fk = FragKey {
            src: p.ip.src,
            dst: p.ip.dst,
            id: p.ip.id,
            proto: p.ip.protocol,
        };
        if p.ip.is_later_fragment() {
            let to = match self.hairpin_frags.map.get(&fk).and_then(|e| e.hairpin_to) {
                Some(to) => to,
                None => return Verdict::FragmentNoSession,
            };
            rewrite_ip_dst(frame, p.l3_offset, p.ip.dst, to);
            return Verdict::FragmentMatched;
        }
        let dport = match p.transport {
            Transport::Tcp(t) => t.dst_port,
            Transport::Udp(u) => u.dst_port,
            _ => return Verdict::HairpinNoMapping,
        };
        let Some(&mk) = self.reverse.get(&(p.ip.dst, dport, p.ip.protocol)) else {
            return Verdict::HairpinNoMapping;
        };
        rewrite_destination(frame, p, mk.addr, mk.port);
        if p.ip.is_first_fragment() {
            let first_len = u32::from(p.ip.total_len.saturating_sub(p.ip.header_len));
            self.hairpin_frags
                .insert(fk, 0, 0, now, first_len, Some(mk.addr), &mut self.stats);
        }
        Verdict::Hairpinned
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nat::testutil::*;

    #[test]
    fn hairpinning_reaches_another_inside_host() {
        let mut n = nat();
        let mut log = Log(vec![]);
        // H2 talks to R1: mapping H2:5000 → E2:P2 (endpoint independent).
        let mut f = udp_frame(H2, 5000, R1, 53);
        run(&mut n, &mut log, T0, &mut f);
        let (e2, p2) = src_of(&f);
        // H1 sends to E2:P2: delivered to H2:5000 from H1's external side.
        let mut f = udp_frame(H1, 6000, e2, p2);
        assert_eq!(run(&mut n, &mut log, T0, &mut f), Verdict::Hairpinned);
        verify_checksums(&f);
        let p = packet::parse(LINKTYPE_ETHERNET, &f).unwrap();
        let Transport::Udp(u) = p.transport else {
            panic!()
        };
        assert_eq!((p.ip.dst, u.dst_port), (H2, 5000));
        let (e1, p1) = (p.ip.src, u.src_port);
        assert_eq!(e1, n.paired_address(H1));
        // H2 answers to E1:P1: hairpinned back to H1:6000, from E2:P2.
        let mut f = udp_frame(H2, 5000, e1, p1);
        assert_eq!(run(&mut n, &mut log, T0, &mut f), Verdict::Hairpinned);
        verify_checksums(&f);
        let p = packet::parse(LINKTYPE_ETHERNET, &f).unwrap();
        let Transport::Udp(u) = p.transport else {
            panic!()
        };
        assert_eq!(
            (p.ip.src, u.src_port, p.ip.dst, u.dst_port),
            (e2, p2, H1, 6000)
        );
        // TCP works the same way; an unmapped external port is dropped.
        let mut f = tcp_frame(H1, 6001, e2, 4444, TCP_SYN);
        assert_eq!(run(&mut n, &mut log, T0, &mut f), Verdict::HairpinNoMapping);
        let mut f = eth_ipv4(&ipv4(H1, e2, PROTO_ICMP, &[], &icmp_echo(false, 1, 1)));
        assert_eq!(run(&mut n, &mut log, T0, &mut f), Verdict::HairpinNoMapping);
    }

    #[test]
    fn later_fragments_of_a_hairpinned_datagram_reach_the_inside_host() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let mut f = udp_frame(H2, 5000, R1, 53);
        run(&mut n, &mut log, T0, &mut f);
        let (e2, p2) = src_of(&f);
        // H1 → E2:P2, one UDP datagram (8 + 64 bytes) in 3 fragments of
        // 24 + 24 + 24 bytes; the UDP checksum covers the whole datagram.
        let payload: Vec<u8> = (0..64u8).collect();
        let mut dgram = udp(6000, p2, &payload);
        let c = transport_checksum(H1, e2, PROTO_UDP, &dgram);
        dgram[6..8].copy_from_slice(&c.to_be_bytes());
        let mut frags: Vec<Vec<u8>> = dgram
            .chunks(24)
            .enumerate()
            .map(|(i, part)| {
                let more = if i < 2 { 0x2000 } else { 0 };
                let word = more | (i as u16 * 3);
                ether(
                    &[],
                    0x0800,
                    &ipv4_frag(H1, e2, PROTO_UDP, &[], part, 99, word),
                )
            })
            .collect();
        assert_eq!(frags.len(), 3);
        let want = [
            Verdict::Hairpinned,
            Verdict::FragmentMatched,
            Verdict::FragmentMatched,
        ];
        for (f, v) in frags.iter_mut().zip(want) {
            assert_eq!(run(&mut n, &mut log, T0 + 1, f), v);
        }
        let e1 = n.paired_address(H1);
        let mut whole = Vec::new();
        for f in &frags {
            let p = packet::parse(LINKTYPE_ETHERNET, f).unwrap();
            assert_eq!((p.ip.src, p.ip.dst, p.ip.id), (e1, H2, 99));
            assert_eq!(internet_checksum(&f[14..34]), 0, "IPv4 header checksum");
            whole.extend_from_slice(&f[34..]);
        }
        // The reassembled datagram: to H2:5000 from E1:P1, checksum right.
        assert_eq!(u16::from_be_bytes([whole[2], whole[3]]), 5000);
        let p1 = u16::from_be_bytes([whole[0], whole[1]]);
        assert_ne!(p1, 0);
        assert_eq!(transport_checksum(e1, H2, PROTO_UDP, &whole), 0);
        assert_eq!(&whole[8..], &payload[..]);
        // The hairpin session counted all three fragments.
        n.finish(T0 + 2, &mut log.f());
        let d: Vec<_> = log
            .events(5)
            .into_iter()
            .filter(|r| r.src_addr == H1)
            .collect();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].initiator_packets, 3);
    }
}
