//! Deterministic NAT (RFC 7422): every inside address has a fixed pool
//! address and port range, computed, never stored, and logged once.

use dplog::nat::nat_event;
use dplog::nat::NatPortBlockRecord;

use super::Nat44;

#[cfg(doc)]
use super::PortAllocation;

impl Nat44 {
    /// The inside address of index `i` counted through the inside
    /// prefixes in order (inverse of `inside_index`).
    pub(super) fn inside_address(&self, mut i: u64) -> Option<u32> {
        for n in &self.cfg.inside {
            let count = 1u64 << (32 - u32::from(n.prefix_len()));
            if i < count {
                let net = u32::from(n.network()) & u32::from(n.netmask());
                return Some(net.wrapping_add(i as u32));
            }
            i -= count;
        }
        None
    }

    /// Index of `addr` counted through the inside prefixes in order
    /// (deterministic NAT), `None` if it is in none.
    fn inside_index(&self, addr: u32) -> Option<u64> {
        let mut base = 0u64;
        for n in &self.cfg.inside {
            let net = u32::from(n.network()) & u32::from(n.netmask());
            if addr & u32::from(n.netmask()) == net {
                return Some(base + u64::from(addr - net));
            }
            base += 1u64 << (32 - u32::from(n.prefix_len()));
        }
        None
    }

    /// Deterministic NAT: (pool index, first port, last port) of `addr`.
    pub(super) fn det_block(&self, addr: u32) -> Option<(u32, u32, u32)> {
        let (per_address, ports) = self.det?;
        let i = self.inside_index(addr)?;
        let pool_index = (i / u64::from(per_address)) as u32;
        let b = (i % u64::from(per_address)) as u32;
        let first = u32::from(self.cfg.port_range.0) + b * ports;
        Some((pool_index, first, first + ports - 1))
    }

    /// The deterministic NAT mapping (RFC 7422), logged once at
    /// configuration time instead of per session: one natEvent 16
    /// [`NatPortBlockRecord`] per inside address (in prefix order, stamped
    /// `ts_ns`) with its pool address and port range. Calls `f` for none
    /// unless the engine uses [`PortAllocation::Deterministic`]. Returns
    /// the number of records.
    pub fn deterministic_mapping(&self, ts_ns: u64, mut f: impl FnMut(NatPortBlockRecord)) -> u64 {
        let Some((_, ports)) = self.det else {
            return 0;
        };
        let mut n = 0;
        for p in &self.cfg.inside {
            let net = u32::from(p.network()) & u32::from(p.netmask());
            let count = 1u64 << (32 - u32::from(p.prefix_len()));
            for k in 0..count {
                let addr = net.wrapping_add(k as u32);
                let Some((pool_index, first, last)) = self.det_block(addr) else {
                    continue;
                };
                f(NatPortBlockRecord {
                    timestamp_ns: ts_ns,
                    src_addr: addr,
                    post_nat_src_addr: self.pool_first + pool_index,
                    port_range_start: first as u16,
                    port_range_end: last as u16,
                    port_range_step: 1,
                    nat_event: nat_event::PORT_BLOCK_ALLOCATION,
                    port_range_num_ports: ports as u16,
                    ingress_vrf_id: self.cfg.vrf_id,
                    ..Default::default()
                });
                n += 1;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nat::testutil::*;

    #[test]
    fn deterministic_mapping_is_logged_once_and_followed() {
        let mut c = NatConfig::new(
            vec!["10.0.0.0/24".parse().unwrap()],
            "198.51.100.0/30".parse().unwrap(),
        );
        c.port_allocation = PortAllocation::Deterministic;
        let mut n = Nat44::new(c).unwrap();
        let mut table = Vec::new();
        let count = n.deterministic_mapping(T0, |r| table.push(r));
        // 256 inside addresses over 2 pool addresses: 128 each, 504 ports.
        assert_eq!(count, 256);
        assert_eq!(table.len(), 256);
        assert!(table
            .iter()
            .all(|r| r.nat_event == 16 && r.port_range_num_ports == 504));
        let h = table.iter().find(|r| r.src_addr == 0x0A00_0085).unwrap(); // 10.0.0.133
        assert_eq!(h.post_nat_src_addr, 0xC633_6402); // 198.51.100.2
        assert_eq!(h.port_range_start, 1024 + 5 * 504);
        let mut log = All::default();
        for i in 0..3 {
            let mut f = tcp_frame(0x0A00_0085, 4000 + i, R1, 443, TCP_SYN);
            assert_eq!(
                n.process(T0, LINKTYPE_ETHERNET, &mut f, &mut log.f()),
                Verdict::TranslatedOut
            );
            verify_checksums(&f);
            let (a, p) = src_of(&f);
            assert_eq!(a, h.post_nat_src_addr);
            assert!((h.port_range_start..=h.port_range_end).contains(&p));
        }
        n.finish(T0 + SEC, &mut log.f());
        assert!(log.0.is_empty(), "nothing logged per session");
        // Too many inside addresses, or too few ports, is a config error.
        let mut c = NatConfig::new(
            vec!["10.0.0.0/8".parse().unwrap()],
            "198.51.100.0/30".parse().unwrap(),
        );
        c.port_allocation = PortAllocation::Deterministic;
        assert!(matches!(
            Nat44::new(c).err(),
            Some(NatError::BadDeterministic(16_777_216, _))
        ));
        let mut c = NatConfig::new(
            vec!["10.0.0.0/16".parse().unwrap()],
            "198.51.100.1/32".parse().unwrap(),
        );
        c.port_allocation = PortAllocation::Deterministic;
        assert!(matches!(
            Nat44::new(c).err(),
            Some(NatError::BadDeterministic(65536, _))
        ));
        let mut c = NatConfig::new(
            vec!["10.0.0.0/8".parse().unwrap()],
            "198.51.100.0/30".parse().unwrap(),
        );
        c.port_allocation = PortAllocation::PortBlock {
            size: 0,
            max_blocks: 1,
        };
        assert_eq!(Nat44::new(c).err(), Some(NatError::BadPortBlock(0, 1)));
    }
}
