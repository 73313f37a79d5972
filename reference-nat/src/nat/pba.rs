//! Port block allocation (PBA): a subscriber's ports come from blocks
//! reserved for it on its paired pool address, logged as natEvent 16 when
//! reserved and 17 when released with its last session.

use dplog::nat::NatAddressesExhaustedRecord;

use super::events::LimitEvent;
use super::ports::PortBlock;
use super::session::FlowKey;
use super::{Nat44, NatLog, PortAllocation, Verdict, MAX_BLOCKS_PER_USER};

/// Per-subscriber state (sessions, port blocks).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct User {
    pub(super) sessions: u32,
    pub(super) nblocks: u8,
    pub(super) blocks: [u16; MAX_BLOCKS_PER_USER as usize],
}

impl Nat44 {
    /// A subscriber's session ended: when it was the last, its port blocks
    /// are released (natEvent 17 each) and its state dropped.
    pub(super) fn user_session_ended(
        &mut self,
        addr: u32,
        ext_addr: u32,
        ts: u64,
        log: &mut impl NatLog,
    ) {
        let Some(u) = self.users.get_mut(&addr) else {
            return;
        };
        u.sessions = u.sessions.saturating_sub(1);
        if u.sessions > 0 {
            return;
        }
        let u = *u;
        self.users.remove(&addr);
        if let PortAllocation::PortBlock { size, .. } = self.cfg.port_allocation {
            let pool_index = ext_addr.wrapping_sub(self.pool_first);
            for &b in &u.blocks[..usize::from(u.nblocks)] {
                if let Some(free) = self.free_blocks.get_mut(&pool_index) {
                    free.push(b);
                }
                self.blocks_used -= 1;
                self.stats.port_blocks_released += 1;
                self.stats.port_blocks_live -= 1;
                let rec = self.block_record(addr, ext_addr, b, size, ts, false);
                log.event(rec.into());
                self.stats.records_logged += 1;
            }
        }
    }

    /// A new external port for `key` under port block allocation: from the
    /// subscriber's blocks, or a new block (natEvent 16).
    pub(super) fn alloc_pba(
        &mut self,
        now: u64,
        key: &FlowKey,
        size: u16,
        max_blocks: u16,
        log: &mut impl NatLog,
    ) -> Result<(u32, u16), Verdict> {
        let pool_index = self.pool_index(key.inside_addr);
        let ext_addr = self.pool_first + pool_index;
        let (lo, hi) = self.cfg.port_range;
        let u = self
            .users
            .get(&key.inside_addr)
            .copied()
            .unwrap_or_default();
        let ports = self
            .ports
            .entry((pool_index, key.proto))
            .or_insert_with(|| PortBlock::new(lo, hi));
        let first_of = |b: u16| u32::from(lo) + u32::from(b) * u32::from(size);
        for &b in &u.blocks[..usize::from(u.nblocks)] {
            if let Some(p) = ports.alloc_in(first_of(b), first_of(b) + u32::from(size) - 1) {
                return Ok((pool_index, p));
            }
        }
        if u16::from(u.nblocks) >= max_blocks {
            let limit = u32::from(max_blocks) * u32::from(size);
            self.quota_exceeded(now, key.inside_addr, limit, log);
            return Err(Verdict::SessionLimit);
        }
        let per = self.blocks_per_address;
        let free = self
            .free_blocks
            .entry(pool_index)
            .or_insert_with(|| (0..per as u16).rev().collect());
        let Some(b) = free.pop() else {
            if self.blocks_used >= u64::from(self.pool_count) * u64::from(per) {
                let rec = NatAddressesExhaustedRecord {
                    timestamp_ns: now,
                    nat_pool_id: 0,
                    ..Default::default()
                };
                self.limit_event(LimitEvent::AddressesExhausted, now, rec.into(), log);
            } else {
                self.ports_exhausted(now, ext_addr, key.proto, log);
            }
            return Err(Verdict::PoolExhausted);
        };
        self.blocks_used += 1;
        self.stats.port_blocks_allocated += 1;
        self.stats.port_blocks_live += 1;
        let user = self.users.entry(key.inside_addr).or_default();
        user.blocks[usize::from(user.nblocks)] = b;
        user.nblocks += 1;
        let rec = self.block_record(key.inside_addr, ext_addr, b, size, now, true);
        log.event(rec.into());
        self.stats.records_logged += 1;
        let port = self
            .ports
            .get_mut(&(pool_index, key.proto))
            .and_then(|ports| ports.alloc_in(first_of(b), first_of(b) + u32::from(size) - 1))
            .ok_or(Verdict::PoolExhausted)?;
        Ok((pool_index, port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nat::testutil::*;

    #[test]
    fn port_blocks_are_allocated_logged_and_released() {
        let mut n = pba(4, 2, "198.51.100.0/28");
        let mut log = All::default();
        let mut ports = Vec::new();
        for i in 0..6u16 {
            let mut f = udp_frame(H1, 2000 + i, R1, 53);
            assert_eq!(
                n.process(T0 + u64::from(i), LINKTYPE_ETHERNET, &mut f, &mut log.f()),
                Verdict::TranslatedOut
            );
            verify_checksums(&f);
            let (addr, port) = src_of(&f);
            assert_eq!(addr, n.paired_address(H1));
            ports.push(port);
        }
        // Two blocks of 4: the first four ports from block 1, then block 2;
        // no session records (PBA logs blocks only).
        let blocks = log.of_event(16);
        assert_eq!(blocks.len(), 2);
        assert_eq!(log.kinds(), vec![(16, 2), (16, 2)]);
        let (src, ext, s1, e1, k1) = block_of(blocks[0]);
        assert_eq!(
            (src, ext, e1 - s1 + 1, k1),
            (H1, n.paired_address(H1), 4, 4)
        );
        let (_, _, s2, e2, _) = block_of(blocks[1]);
        assert!(
            ports[..4].iter().all(|p| (s1..=e1).contains(p)),
            "{ports:?}"
        );
        assert!(
            ports[4..].iter().all(|p| (s2..=e2).contains(p)),
            "{ports:?}"
        );
        assert!(s2 > e1 || e2 < s1, "blocks do not overlap");
        // A 9th session: both blocks full, max_blocks reached → quota.
        for i in 6..9u16 {
            let mut f = udp_frame(H1, 2000 + i, R1, 53);
            let v = n.process(T0 + 10, LINKTYPE_ETHERNET, &mut f, &mut log.f());
            assert_eq!(
                v,
                if i < 8 {
                    Verdict::TranslatedOut
                } else {
                    Verdict::SessionLimit
                }
            );
        }
        let q = log.of_event(13);
        assert_eq!(q.len(), 1);
        assert_eq!(
            u32_at(q[0], 16),
            dplog::nat::quota_event::MAX_ENTRIES_PER_USER
        );
        assert_eq!(u32_at(q[0], 20), 8, "limit = 2 blocks of 4 ports");
        assert_eq!(u32_at(q[0], 24), H1);
        let s = n.stats();
        assert_eq!((s.port_blocks_allocated, s.port_blocks_live), (2, 2));
        assert_eq!(s.sessions_created, 8);
        // Another subscriber gets its own block.
        let mut f = udp_frame(H2, 1, R1, 53);
        n.process(T0 + 11, LINKTYPE_ETHERNET, &mut f, &mut log.f());
        assert_eq!(block_of(log.of_event(16)[2]).0, H2);
        // All sessions end: every block released (natEvent 17).
        n.finish(T0 + 20, &mut log.f());
        let rel = log.of_event(17);
        assert_eq!(rel.len(), 3);
        let mut released: Vec<_> = rel.iter().map(|r| block_of(r)).collect();
        let mut allocated: Vec<_> = log.of_event(16).iter().map(|r| block_of(r)).collect();
        released.sort_unstable();
        allocated.sort_unstable();
        assert_eq!(released, allocated);
        let s = n.stats();
        assert_eq!((s.port_blocks_released, s.port_blocks_live), (3, 0));
        assert_eq!(s.records_logged, log.0.len() as u64);
        assert!(log.of_event(4).is_empty() && log.of_event(5).is_empty());
    }

    #[test]
    fn port_blocks_can_log_their_sessions_too() {
        let mut c = NatConfig::new(
            vec!["10.0.0.0/8".parse().unwrap()],
            "198.51.100.0/28".parse().unwrap(),
        );
        c.port_allocation = PortAllocation::PortBlock {
            size: 64,
            max_blocks: 1,
        };
        c.log_sessions_in_blocks = true;
        let mut n = Nat44::new(c).unwrap();
        let mut log = All::default();
        let mut f = udp_frame(H1, 7, R1, 53);
        n.process(T0, LINKTYPE_ETHERNET, &mut f, &mut log.f());
        n.finish(T0 + SEC, &mut log.f());
        assert_eq!(
            log.kinds(),
            vec![(16, 2), (4, 1), (5, 1), (17, 2)],
            "block, create, delete, release"
        );
    }

    #[test]
    fn block_exhaustion_logs_ports_then_addresses_exhausted_rate_limited() {
        // Pool of one address, range of 8 ports, blocks of 4: two blocks.
        let mut c = NatConfig::new(
            vec!["10.0.0.0/8".parse().unwrap()],
            "198.51.100.9/32".parse().unwrap(),
        );
        c.port_range = (1024, 1031);
        c.port_allocation = PortAllocation::PortBlock {
            size: 4,
            max_blocks: 1,
        };
        let mut n = Nat44::new(c).unwrap();
        let mut log = All::default();
        for h in 1..=2u32 {
            let mut f = udp_frame(0x0A00_0000 + h, 1, R1, 53);
            assert_eq!(
                n.process(T0, LINKTYPE_ETHERNET, &mut f, &mut log.f()),
                Verdict::TranslatedOut
            );
        }
        // Third and fourth subscribers: no block anywhere → natEvent 3 once,
        // the second within the interval suppressed; both dropped.
        for h in 3..=4u32 {
            let mut f = udp_frame(0x0A00_0000 + h, 1, R1, 53);
            assert_eq!(
                n.process(T0 + SEC / 2, LINKTYPE_ETHERNET, &mut f, &mut log.f()),
                Verdict::PoolExhausted
            );
        }
        assert_eq!(log.of_event(3).len(), 1);
        assert_eq!(n.stats().limit_events_suppressed, 1);
        // After the interval it is logged again.
        let mut f = udp_frame(0x0A00_0005, 1, R1, 53);
        n.process(T0 + 2 * SEC, LINKTYPE_ETHERNET, &mut f, &mut log.f());
        assert_eq!(log.of_event(3).len(), 2);
        assert_eq!(n.stats().count(Verdict::PoolExhausted), 3);
        // Sequential allocation on a full address logs natEvent 12 with it.
        let mut c = NatConfig::new(
            vec!["10.0.0.0/8".parse().unwrap()],
            "198.51.100.9/32".parse().unwrap(),
        );
        c.port_range = (1024, 1024);
        let mut n = Nat44::new(c).unwrap();
        let mut log = All::default();
        for sport in 1..=2 {
            let mut f = udp_frame(H1, sport, R1, 53);
            n.process(T0, LINKTYPE_ETHERNET, &mut f, &mut log.f());
        }
        let e = log.of_event(12);
        assert_eq!(e.len(), 1);
        assert_eq!(
            (u32_at(e[0], 16), e[0].as_bytes()[20]),
            (0xC633_6409, PROTO_UDP)
        );
    }
}
