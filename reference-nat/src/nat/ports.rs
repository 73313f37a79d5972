//! External ports: the port bitmap of a (pool address, protocol), the
//! pairing of an inside host with its pool address (RFC 4787 REQ-2), and
//! the choice of a new mapping's address and port under every
//! [`PortAllocation`].

use super::session::FlowKey;
use super::{Nat44, NatLog, PortAllocation, Verdict};

/// Port bitmap of one (pool address, protocol): bit set = in use. Only
/// ports in `lo..=hi` are ever handed out; the others are marked used.
pub(super) struct PortBlock {
    bits: Box<[u64; 1024]>,
    used: u32,
    lo: u32,
    hi: u32,
    /// Next-fit cursor (next port to try).
    cursor: u32,
}

impl PortBlock {
    pub(super) fn new(lo: u16, hi: u16) -> Self {
        let (lo, hi) = (u32::from(lo), u32::from(hi));
        let mut bits = Box::new([u64::MAX; 1024]);
        for port in lo..=hi {
            bits[(port / 64) as usize] &= !(1u64 << (port % 64));
        }
        Self {
            bits,
            used: 0,
            lo,
            hi,
            cursor: lo,
        }
    }

    fn capacity(&self) -> u32 {
        self.hi - self.lo + 1
    }

    /// Next free port at or after `start` (wrapping within the range).
    pub(super) fn alloc_from(&mut self, start: u32) -> Option<u16> {
        if self.used >= self.capacity() {
            return None;
        }
        let mut p = if (self.lo..=self.hi).contains(&start) {
            start
        } else {
            self.lo
        };
        // At most one full lap plus one word: a free bit exists.
        for _ in 0..=1025 {
            let w = (p / 64) as usize;
            let word = *self.bits.get(w)?;
            let free = !word & (u64::MAX << (p % 64));
            if free != 0 {
                let port = (w as u32) * 64 + free.trailing_zeros();
                self.bits[w] |= 1u64 << (port % 64);
                self.used += 1;
                self.cursor = if port >= self.hi { self.lo } else { port + 1 };
                return u16::try_from(port).ok();
            }
            p = (w as u32 + 1) * 64;
            if p > self.hi {
                p = self.lo;
            }
        }
        None
    }

    pub(super) fn alloc(&mut self) -> Option<u16> {
        self.alloc_from(self.cursor)
    }

    /// Lowest free port in `first..=last` (a port block), if any.
    pub(super) fn alloc_in(&mut self, first: u32, last: u32) -> Option<u16> {
        let (first, last) = (first.max(self.lo), last.min(self.hi));
        let mut p = first;
        while p <= last {
            let w = (p / 64) as usize;
            let word = *self.bits.get(w)?;
            let mut free = !word & (u64::MAX << (p % 64));
            let word_last = (w as u32) * 64 + 63;
            if last < word_last {
                free &= u64::MAX >> (word_last - last);
            }
            if free != 0 {
                let port = (w as u32) * 64 + free.trailing_zeros();
                self.bits[w] |= 1u64 << (port % 64);
                self.used += 1;
                return u16::try_from(port).ok();
            }
            p = word_last + 1;
        }
        None
    }

    pub(super) fn free(&mut self, port: u16) {
        let port32 = u32::from(port);
        let (w, b) = (usize::from(port / 64), port % 64);
        if port32 < self.lo || port32 > self.hi {
            return;
        }
        if let Some(word) = self.bits.get_mut(w) {
            if *word & (1 << b) != 0 {
                *word &= !(1 << b);
                self.used -= 1;
            }
        }
    }
}

/// murmur3 fmix32: spreads inside addresses over the pool.
fn mix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

impl Nat44 {
    /// The pool address an inside host is paired with (RFC 4787 REQ-2
    /// "paired" pooling): a hash of the inside address picks it, so the host
    /// always gets the same external address.
    ///
    /// With [`PortAllocation::Deterministic`], the address the RFC 7422
    /// mapping gives it instead.
    pub fn paired_address(&self, inside_addr: u32) -> u32 {
        match self.det_block(inside_addr) {
            Some((pool_index, _, _)) => self.pool_first + pool_index,
            None => self.pool_first + self.pool_index(inside_addr),
        }
    }

    pub(super) fn pool_index(&self, inside_addr: u32) -> u32 {
        mix32(inside_addr) % self.pool_count
    }

    /// The pool index and external port of a new mapping for outbound
    /// `key` under the configured [`PortAllocation`]:
    /// `Err(PoolExhausted)` when no port is left (natEvent 12 or 3 logged,
    /// rate-limited), `Err(SessionLimit)` when the subscriber's own ports
    /// are all taken (its port blocks at `max_blocks`, or its deterministic
    /// range; natEvent 13 logged, rate-limited).
    pub(super) fn allocate(
        &mut self,
        now: u64,
        key: &FlowKey,
        log: &mut impl NatLog,
    ) -> Result<(u32, u16), Verdict> {
        let (lo, hi) = self.cfg.port_range;
        let chosen = match self.cfg.port_allocation {
            PortAllocation::PortBlock { size, max_blocks } => {
                let r = self.alloc_pba(now, key, size, max_blocks, log);
                if r.is_err()
                    && self
                        .users
                        .get(&key.inside_addr)
                        .is_some_and(|u| u.sessions == 0 && u.nblocks == 0)
                {
                    self.users.remove(&key.inside_addr);
                }
                r?
            }
            PortAllocation::Deterministic => {
                let Some((pool_index, first, last)) = self.det_block(key.inside_addr) else {
                    return Err(Verdict::PoolExhausted);
                };
                let ports = self
                    .ports
                    .entry((pool_index, key.proto))
                    .or_insert_with(|| PortBlock::new(lo, hi));
                match ports.alloc_in(first, last) {
                    Some(p) => (pool_index, p),
                    None => {
                        self.quota_exceeded(now, key.inside_addr, last - first + 1, log);
                        return Err(Verdict::SessionLimit);
                    }
                }
            }
            PortAllocation::Sequential | PortAllocation::Random { .. } => {
                let pool_index = self.pool_index(key.inside_addr);
                let start = match self.cfg.port_allocation {
                    PortAllocation::Random { .. } => {
                        // xorshift64* (Vigna); the state is never 0.
                        self.rng ^= self.rng >> 12;
                        self.rng ^= self.rng << 25;
                        self.rng ^= self.rng >> 27;
                        let r = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32;
                        let span = u64::from(hi - lo) + 1;
                        Some(u32::from(lo) + (r % span) as u32)
                    }
                    _ => None,
                };
                let block = self
                    .ports
                    .entry((pool_index, key.proto))
                    .or_insert_with(|| PortBlock::new(lo, hi));
                let got = match start {
                    None => block.alloc(),
                    Some(p) => block.alloc_from(p),
                };
                match got {
                    Some(p) => (pool_index, p),
                    None => {
                        let ext = self.pool_first + pool_index;
                        self.ports_exhausted(now, ext, key.proto, log);
                        return Err(Verdict::PoolExhausted);
                    }
                }
            }
        };
        Ok(chosen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nat::testutil::*;

    #[test]
    fn pool_exhaustion_drops_without_crash() {
        let mut n = Nat44::new(NatConfig::new(
            vec!["10.0.0.0/8".parse().unwrap()],
            "198.51.100.9/32".parse().unwrap(),
        ))
        .unwrap();
        let mut log = Log(vec![]);
        let mut frame = udp_frame(H1, 0, R1, 53);
        let template = frame.clone();
        let mut ext_ports = std::collections::HashSet::new();
        for port in 0..=EXTERNAL_PORTS_PER_ADDRESS as u16 {
            frame.copy_from_slice(&template);
            // Patch the source port (the UDP checksum just stays "wrong").
            frame[34..36].copy_from_slice(&port.to_be_bytes());
            let v = n.process(T0, LINKTYPE_ETHERNET, &mut frame, &mut |_| {});
            if u32::from(port) < EXTERNAL_PORTS_PER_ADDRESS {
                assert_eq!(v, Verdict::TranslatedOut);
                assert!(ext_ports.insert(src_of(&frame).1));
            } else {
                assert_eq!(v, Verdict::PoolExhausted);
            }
        }
        assert!(ext_ports.iter().all(|p| *p >= 1024));
        assert_eq!(n.stats().count(Verdict::PoolExhausted), 1);
        // A session expires, its port is reused.
        n.expire_until(T0 + 300 * SEC, &mut log.f());
        assert_eq!(n.stats().sessions_live, 0);
        let mut f = udp_frame(H2, 1, R1, 53);
        assert_eq!(
            n.process(T0 + 300 * SEC, LINKTYPE_ETHERNET, &mut f, &mut |_| {}),
            Verdict::TranslatedOut
        );
    }
}
