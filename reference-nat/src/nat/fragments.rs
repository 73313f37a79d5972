//! IPv4 fragments: the bounded table of first fragments that later
//! fragments (which carry no ports) are matched through, with overlap and
//! duplicate detection (RFC 5722).

use std::collections::VecDeque;

use super::hash::FxMap;
use super::rewrite::{rewrite_ip_dst, rewrite_ip_src};
use super::{Nat44, NatStats, Verdict};
use crate::packet::ParsedPacket;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct FragKey {
    pub(super) src: u32,
    pub(super) dst: u32,
    pub(super) id: u16,
    pub(super) proto: u8,
}

/// Byte ranges of a datagram seen so far, kept per fragment table entry to
/// detect overlaps (bounded: further ranges are not remembered).
const FRAG_RANGES: usize = 6;

#[derive(Clone, Copy, Debug)]
pub(super) struct FragEntry {
    pub(super) slot: u32,
    pub(super) session_seq: u64,
    pub(super) expires: u64,
    pub(super) serial: u64,
    /// `[start, end)` payload byte ranges seen; `nranges` used.
    pub(super) ranges: [(u32, u32); FRAG_RANGES],
    pub(super) nranges: u8,
    /// A hairpinned datagram (RFC 4787 REQ-9): the inside host its first
    /// fragment was sent to, which later fragments' destination address is
    /// rewritten to as well.
    pub(super) hairpin_to: Option<u32>,
    /// A datagram whose first fragment was handed to this worker index
    /// ([`Verdict::HairpinHandoff`]): so are its later fragments.
    pub(super) handoff_to: Option<u32>,
}

/// How a later fragment's bytes relate to those seen of its datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FragBytes {
    /// None seen before.
    New,
    /// All seen before (a duplicated fragment, RFC 5722 section 3).
    Duplicate,
    /// Some seen before and some not: a partial overlap.
    Overlap,
}

impl FragEntry {
    /// Classifies `[start, end)` against the ranges seen and remembers new
    /// bytes (ranges kept sorted and coalesced; when all `FRAG_RANGES`
    /// slots hold disjoint ranges, a range that touches none is not
    /// remembered).
    fn check(&mut self, start: u32, end: u32) -> FragBytes {
        let n = usize::from(self.nranges);
        let seen = &self.ranges[..n];
        if seen.iter().any(|&(a, b)| a <= start && end <= b) {
            return FragBytes::Duplicate;
        }
        if seen.iter().any(|&(a, b)| start < b && a < end) {
            return FragBytes::Overlap;
        }
        if n < FRAG_RANGES {
            self.ranges[n] = (start, end);
            self.nranges += 1;
        } else if let Some(r) = self.ranges.iter_mut().find(|r| r.1 == start || r.0 == end) {
            *r = (r.0.min(start), r.1.max(end));
        }
        // Sort and coalesce touching ranges.
        let n = usize::from(self.nranges);
        self.ranges[..n].sort_unstable();
        let mut w = 0;
        for i in 1..n {
            if self.ranges[i].0 <= self.ranges[w].1 {
                self.ranges[w].1 = self.ranges[w].1.max(self.ranges[i].1);
            } else {
                w += 1;
                self.ranges[w] = self.ranges[i];
            }
        }
        self.nranges = (w + 1) as u8;
        FragBytes::New
    }
}

/// (src, dst, protocol, IP id) of first fragments → session, bounded,
/// FIFO-evicted, entries expire after a fixed lifetime.
pub(super) struct FragTable {
    pub(super) map: FxMap<FragKey, FragEntry>,
    order: VecDeque<(FragKey, u64)>,
    capacity: usize,
    timeout_ns: u64,
    serial: u64,
}

impl FragTable {
    /// An empty table of `capacity` entries that expire `timeout_ns` after
    /// their first fragment.
    pub(super) fn new(capacity: usize, timeout_ns: u64) -> Self {
        Self {
            map: FxMap::default(),
            order: VecDeque::new(),
            capacity,
            timeout_ns,
            serial: 0,
        }
    }

    fn is_current(&self, key: &FragKey, serial: u64) -> bool {
        self.map.get(key).is_some_and(|e| e.serial == serial)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn insert(
        &mut self,
        key: FragKey,
        slot: u32,
        session_seq: u64,
        now: u64,
        first_len: u32,
        hairpin_to: Option<u32>,
        stats: &mut NatStats,
    ) {
        self.serial += 1;
        let mut ranges = [(0, 0); FRAG_RANGES];
        ranges[0] = (0, first_len);
        let entry = FragEntry {
            slot,
            session_seq,
            expires: now.saturating_add(self.timeout_ns),
            serial: self.serial,
            ranges,
            nranges: 1,
            hairpin_to,
            handoff_to: None,
        };
        if !self.map.contains_key(&key) {
            while self.map.len() >= self.capacity {
                let Some((old, serial)) = self.order.pop_front() else {
                    break;
                };
                if self.is_current(&old, serial) {
                    self.map.remove(&old);
                    stats.fragments_evicted += 1;
                }
            }
        }
        self.map.insert(key, entry);
        self.order.push_back((key, self.serial));
        stats.fragments_tracked += 1;
        if self.order.len() > 4 * self.capacity.max(16) {
            let map = &self.map;
            self.order
                .retain(|(k, s)| map.get(k).is_some_and(|e| e.serial == *s));
        }
    }

    pub(super) fn expire(&mut self, now: u64, stats: &mut NatStats) {
        while let Some(&(key, serial)) = self.order.front() {
            match self.map.get(&key) {
                Some(e) if e.serial == serial => {
                    if e.expires > now {
                        break;
                    }
                    self.map.remove(&key);
                    stats.fragments_expired += 1;
                }
                _ => {}
            }
            self.order.pop_front();
        }
    }

    pub(super) fn clear(&mut self) {
        self.map.clear();
        self.order.clear();
    }
}

impl Nat44 {
    pub(super) fn later_fragment(
        &mut self,
        now: u64,
        p: &ParsedPacket,
        outbound: bool,
        frame: &mut [u8],
    ) -> Verdict {
        let fk = FragKey {
            src: p.ip.src,
            dst: p.ip.dst,
            id: p.ip.id,
            proto: p.ip.protocol,
        };
        let Some(e) = self.frags.map.get_mut(&fk) else {
            return Verdict::FragmentNoSession;
        };
        let live = self
            .slots
            .get(e.slot as usize)
            .is_some_and(|s| s.live && s.seq == e.session_seq);
        if !live {
            return Verdict::FragmentNoSession;
        }
        let start = u32::from(p.ip.fragment_offset) * 8;
        let end = start + u32::from(p.ip.total_len.saturating_sub(p.ip.header_len));
        match e.check(start, end) {
            FragBytes::Overlap => return Verdict::FragmentOverlap,
            // Forwarded (the receiver's reassembly drops it); counted.
            FragBytes::Duplicate => self.stats.fragments_duplicate += 1,
            FragBytes::New => {}
        }
        let (slot, hairpin_to, handoff_to) = (e.slot, e.hairpin_to, e.handoff_to);
        self.touch(slot, now, p.ip.total_len, outbound, None);
        if outbound {
            let ext = self.slots[slot as usize].ext_addr;
            rewrite_ip_src(frame, p.l3_offset, p.ip.src, ext);
            // Its first fragment was handed to another worker: so is this.
            if let Some(w) = handoff_to {
                self.handoff_target = w as usize;
                return Verdict::HairpinHandoff;
            }
            // A hairpinned datagram: to the inside host, as its first
            // fragment (no transport header here, only the IPv4 one).
            if let Some(to) = hairpin_to {
                rewrite_ip_dst(frame, p.l3_offset, p.ip.dst, to);
            }
        }
        Verdict::FragmentMatched
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nat::testutil::*;

    #[test]
    fn fragments_follow_their_first_fragment() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let mut u = udp(6000, 53, &[0xAB; 24]);
        u[4..6].copy_from_slice(&(8u16 + 24 + 40).to_be_bytes());
        let mut first = ether(
            &[],
            0x0800,
            &ipv4_frag(H1, R1, PROTO_UDP, &[], &u, 77, 0x2000),
        );
        assert_eq!(
            run(&mut n, &mut log, T0, &mut first),
            Verdict::TranslatedOut
        );
        let ext = src_of(&first).0;
        let mut second = ether(
            &[],
            0x0800,
            &ipv4_frag(H1, R1, PROTO_UDP, &[], &[0xCD; 40], 77, 4),
        );
        assert_eq!(
            run(&mut n, &mut log, T0 + 1, &mut second),
            Verdict::FragmentMatched
        );
        let p = packet::parse(LINKTYPE_ETHERNET, &second).unwrap();
        assert_eq!(
            p.ip.src, ext,
            "later fragments get the external source address"
        );
        assert_eq!(internet_checksum(&second[14..34]), 0);
        let mut unknown = ether(
            &[],
            0x0800,
            &ipv4_frag(H1, R1, PROTO_UDP, &[], &[0; 40], 78, 4),
        );
        assert_eq!(
            run(&mut n, &mut log, T0 + 2, &mut unknown),
            Verdict::FragmentNoSession
        );
        // After the 30 s fragment timeout the entry is gone.
        let mut late = ether(
            &[],
            0x0800,
            &ipv4_frag(H1, R1, PROTO_UDP, &[], &[0; 40], 77, 4),
        );
        assert_eq!(
            run(&mut n, &mut log, T0 + 31 * SEC, &mut late),
            Verdict::FragmentNoSession
        );
        n.finish(T0 + 40 * SEC, &mut log.f());
        let d = log.events(5);
        assert_eq!(d[0].initiator_packets, 2);
        assert_eq!(d[0].initiator_octets, (20 + 32) + (20 + 40));
        assert_eq!(n.stats().fragments_expired, 1);
    }

    #[test]
    fn fragment_table_is_bounded() {
        let mut cfg = NatConfig::new(
            vec!["10.0.0.0/8".parse().unwrap()],
            "198.51.100.0/28".parse().unwrap(),
        );
        cfg.fragment_table_size = 8;
        let mut n = Nat44::new(cfg).unwrap();
        let mut log = Log(vec![]);
        for id in 0..20u16 {
            let mut u = udp(6000, 53, &[0; 8]);
            u[4..6].copy_from_slice(&100u16.to_be_bytes());
            let mut f = ether(
                &[],
                0x0800,
                &ipv4_frag(H1, R1, PROTO_UDP, &[], &u, id, 0x2000),
            );
            assert_eq!(run(&mut n, &mut log, T0, &mut f), Verdict::TranslatedOut);
        }
        assert_eq!(n.stats().fragments_evicted, 12);
        let mut old = ether(
            &[],
            0x0800,
            &ipv4_frag(H1, R1, PROTO_UDP, &[], &[0; 8], 0, 2),
        );
        assert_eq!(
            run(&mut n, &mut log, T0, &mut old),
            Verdict::FragmentNoSession
        );
        let mut new = ether(
            &[],
            0x0800,
            &ipv4_frag(H1, R1, PROTO_UDP, &[], &[0; 8], 19, 2),
        );
        assert_eq!(
            run(&mut n, &mut log, T0, &mut new),
            Verdict::FragmentMatched
        );
    }

    #[test]
    fn overlapping_fragments_are_dropped_and_counted() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let l4 = udp(7000, 53, &[7; 24]); // 32 bytes: 0..32
        let mut first = eth_ipv4(&ipv4_frag(H1, R1, PROTO_UDP, &[], &l4[..16], 9, 0x2000));
        assert_eq!(
            run(&mut n, &mut log, T0, &mut first),
            Verdict::TranslatedOut
        );
        // Offset 2 (bytes 16..32): new.
        let mut second = eth_ipv4(&ipv4_frag(H1, R1, PROTO_UDP, &[], &l4[16..], 9, 2));
        assert_eq!(
            run(&mut n, &mut log, T0, &mut second.clone()),
            Verdict::FragmentMatched
        );
        // The same again, and bytes 8..16 again: duplicates, forwarded.
        assert_eq!(
            run(&mut n, &mut log, T0, &mut second),
            Verdict::FragmentMatched
        );
        let mut dup = eth_ipv4(&ipv4_frag(H1, R1, PROTO_UDP, &[], &[0; 8], 9, 1));
        assert_eq!(
            run(&mut n, &mut log, T0, &mut dup),
            Verdict::FragmentMatched
        );
        assert_eq!(n.stats().fragments_duplicate, 2);
        // Bytes 24..40: partly seen → overlap, dropped.
        let mut part = eth_ipv4(&ipv4_frag(H1, R1, PROTO_UDP, &[], &[0; 16], 9, 3));
        assert_eq!(
            run(&mut n, &mut log, T0, &mut part),
            Verdict::FragmentOverlap
        );
        // Bytes 48..56 (leaving a gap), 32..48 fills it, so 40..56 is a
        // duplicate of the coalesced range and 48..64 overlaps it.
        for (off, len, v) in [
            (6, 8, Verdict::FragmentMatched),
            (4, 16, Verdict::FragmentMatched),
            (5, 16, Verdict::FragmentMatched),
            (6, 16, Verdict::FragmentOverlap),
        ] {
            let mut f = eth_ipv4(&ipv4_frag(H1, R1, PROTO_UDP, &[], &vec![0; len], 9, off));
            assert_eq!(run(&mut n, &mut log, T0, &mut f), v, "offset {off}");
        }
        assert_eq!(n.stats().fragments_duplicate, 3);
        assert_eq!(n.stats().count(Verdict::FragmentOverlap), 2);
    }
}
