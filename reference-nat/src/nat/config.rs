//! NAT44 configuration: [`NatConfig`] with its timeouts and port
//! allocation, the per-worker split of the port range, and [`NatError`],
//! why [`Nat44::new`](super::Nat44::new) refuses a configuration.

use std::fmt;
use std::time::Duration;

use ipnet::Ipv4Net;

#[cfg(doc)]
use super::{Nat44, NatStats, Verdict};

/// Session idle timeouts. A session is deleted when no packet was seen for
/// its timeout: expiry time = last packet time + timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NatTimeouts {
    /// UDP sessions (RFC 4787 REQ-5 asks for at least 2 min; default 300 s).
    pub udp: Duration,
    /// Established TCP sessions (RFC 5382 REQ-5: at least 2 h 4 min; default
    /// 7440 s).
    pub tcp_established: Duration,
    /// TCP sessions opening (SYN seen, no reply yet) or closing (FIN or RST
    /// seen); RFC 5382 REQ-5 / RFC 7857: 4 min, default 240 s.
    pub tcp_transitory: Duration,
    /// ICMP echo sessions (RFC 5508 REQ-1: at least 60 s; default 60 s).
    pub icmp: Duration,
}

impl Default for NatTimeouts {
    fn default() -> Self {
        Self {
            udp: Duration::from_secs(300),
            tcp_established: Duration::from_secs(7440),
            tcp_transitory: Duration::from_secs(240),
            icmp: Duration::from_secs(60),
        }
    }
}

/// Default capacity of the fragment table (entries).
pub const DEFAULT_FRAGMENT_TABLE_SIZE: usize = 4096;
/// Default lifetime of a fragment table entry.
pub const DEFAULT_FRAGMENT_TIMEOUT: Duration = Duration::from_secs(30);

/// First external port handed out; ports below are never allocated.
pub const FIRST_EXTERNAL_PORT: u16 = 1024;
/// Number of external ports per (pool address, protocol): 1024..=65535.
pub const EXTERNAL_PORTS_PER_ADDRESS: u32 = 65536 - FIRST_EXTERNAL_PORT as u32;

/// NAT44 configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NatConfig {
    /// Inside (private) prefixes. Packets from these are translated when
    /// they leave; at least one is required.
    pub inside: Vec<Ipv4Net>,
    /// External address pool. For prefixes shorter than /31 the network and
    /// broadcast addresses are not used (198.51.100.0/28 gives .1 to .14);
    /// a /31 or /32 is used whole.
    pub pool: Ipv4Net,
    /// VRF id written to `ingress_vrf_id` of every record (0 = default VRF).
    pub vrf_id: u32,
    /// Idle timeouts.
    pub timeouts: NatTimeouts,
    /// Capacity of the fragment table ((src, dst, protocol, IP id) →
    /// session); when full, the oldest entry is evicted.
    pub fragment_table_size: usize,
    /// Lifetime of a fragment table entry after its first fragment.
    pub fragment_timeout: Duration,
    /// External ports this engine may hand out, `(first, last)` inclusive,
    /// on every pool address and protocol. Default
    /// `(FIRST_EXTERNAL_PORT, 65535)`. A multi-worker NAT gives each worker
    /// a disjoint slice (see [`worker_port_range`]) so that per-worker port
    /// allocators never collide and need no lock.
    pub port_range: (u16, u16),
    /// How external ports are chosen. Default [`PortAllocation::Sequential`].
    pub port_allocation: PortAllocation,
    /// Most sessions one subscriber (inside address) may have at once; 0
    /// (default) = no limit. A new session beyond it is dropped with
    /// [`Verdict::SessionLimit`] and logged as natEvent 13, subtype
    /// maxEntriesPerUser (RFC 8158 section 4.1), rate-limited by
    /// `event_log_interval`.
    pub max_sessions_per_user: u32,
    /// With [`PortAllocation::PortBlock`] or
    /// [`PortAllocation::Deterministic`]: also log natEvent 4/5 for the
    /// sessions inside a block. Default false (the block records 16/17, or
    /// the deterministic mapping, are the audit trail, which is the point
    /// of both). Ignored by the other allocations, which always log
    /// sessions.
    pub log_sessions_in_blocks: bool,
    /// Rate limit of the limit and exhaustion records (natEvent 3, 12, 13):
    /// at most one record of each of the three events per interval of
    /// packet time per engine (= per worker); the others are counted in
    /// [`NatStats::limit_events_suppressed`]. Default 1 s.
    pub event_log_interval: Duration,
}

/// How a [`Nat44`] chooses the external port of a new mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PortAllocation {
    /// Next-fit from a cursor: deterministic, the fastest.
    #[default]
    Sequential,
    /// Per session, randomized (RFC 6056 style port randomization: each new
    /// mapping starts its search for a free port at a pseudo-random port of
    /// the range). `seed` makes runs reproducible.
    Random {
        /// Seed of the engine's xorshift generator.
        seed: u64,
    },
    /// Port block allocation (PBA): a subscriber's first session reserves
    /// a block of `size` contiguous ports on its paired pool address (the
    /// same ports for TCP, UDP and ICMP), logged as natEvent 16 with the
    /// range; its sessions take ports from its blocks; when a block is full
    /// another is reserved, up to `max_blocks` per subscriber. The blocks are
    /// released (natEvent 17) when the subscriber's last session ends.
    /// Blocks are cut from the engine's `port_range`; `size` must be at
    /// least 1 and at most the range's length.
    PortBlock {
        /// Ports per block (K).
        size: u16,
        /// Most blocks one subscriber may hold (at least 1).
        max_blocks: u16,
    },
    /// Deterministic NAT (RFC 7422): inside address number `i` (counting
    /// through the inside prefixes in order) always gets pool address
    /// `i / per_address` and ports block `i % per_address` of size
    /// `floor(range / per_address)`, where `per_address = ceil(inside
    /// addresses / pool addresses)`. Nothing is logged per session or block:
    /// the whole mapping is logged once at configuration time (see
    /// [`Nat44::deterministic_mapping`]). The inside prefixes may hold at
    /// most [`MAX_DETERMINISTIC_SUBSCRIBERS`] addresses.
    Deterministic,
}

/// Most inside addresses [`PortAllocation::Deterministic`] maps (the
/// mapping is logged once, one record per inside address).
pub const MAX_DETERMINISTIC_SUBSCRIBERS: u64 = 1 << 20;

/// The slice of `(first, last)` that worker `index` of `workers` owns:
/// the range is cut into `workers` contiguous, disjoint parts of equal size
/// (the last takes the remainder). Returns `None` when `index >= workers`
/// or the range has fewer ports than workers.
pub fn worker_port_range(range: (u16, u16), index: usize, workers: usize) -> Option<(u16, u16)> {
    let (lo, hi) = (u32::from(range.0), u32::from(range.1));
    if workers == 0 || index >= workers || hi < lo {
        return None;
    }
    let len = hi - lo + 1;
    let per = len / workers as u32;
    if per == 0 {
        return None;
    }
    let first = lo + per * index as u32;
    let last = if index + 1 == workers {
        hi
    } else {
        first + per - 1
    };
    Some((u16::try_from(first).ok()?, u16::try_from(last).ok()?))
}

impl NatConfig {
    /// A configuration with the given inside prefixes and pool, VRF 0 and
    /// default timeouts and fragment table settings.
    pub fn new(inside: Vec<Ipv4Net>, pool: Ipv4Net) -> Self {
        Self {
            inside,
            pool,
            vrf_id: 0,
            timeouts: NatTimeouts::default(),
            fragment_table_size: DEFAULT_FRAGMENT_TABLE_SIZE,
            fragment_timeout: DEFAULT_FRAGMENT_TIMEOUT,
            port_range: (FIRST_EXTERNAL_PORT, 65535),
            port_allocation: PortAllocation::Sequential,
            max_sessions_per_user: 0,
            log_sessions_in_blocks: false,
            event_log_interval: Duration::from_secs(1),
        }
    }
}

/// Most port blocks one subscriber may hold
/// ([`PortAllocation::PortBlock`]'s `max_blocks`).
pub const MAX_BLOCKS_PER_USER: u16 = 16;

/// Why a [`NatConfig`] was rejected by [`Nat44::new`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NatError {
    /// `inside` is empty.
    NoInsidePrefix,
    /// The pool overlaps a special-purpose range (0/8, 127/8, 169.254/16,
    /// 224/4, 240/4) and cannot be used as source addresses.
    PoolNotUnicast(Ipv4Net),
    /// The pool overlaps an inside prefix.
    PoolOverlapsInside {
        /// The configured pool.
        pool: Ipv4Net,
        /// The inside prefix it overlaps.
        inside: Ipv4Net,
    },
    /// A timeout is zero; the field name is given.
    ZeroTimeout(&'static str),
    /// `fragment_table_size` is zero.
    ZeroFragmentTable,
    /// `port_range` is empty or starts below [`FIRST_EXTERNAL_PORT`].
    BadPortRange(u16, u16),
    /// [`PortAllocation::PortBlock`] with a block size of 0, larger than
    /// the port range, or `max_blocks` 0.
    BadPortBlock(u16, u16),
    /// [`PortAllocation::Deterministic`] with more inside addresses than
    /// [`MAX_DETERMINISTIC_SUBSCRIBERS`] (the count is given) or fewer than
    /// one port per subscriber (`ports per subscriber` = 0).
    BadDeterministic(u64, &'static str),
}

impl fmt::Display for NatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NatError::NoInsidePrefix => f.write_str("no inside prefix configured"),
            NatError::PoolNotUnicast(p) => {
                write!(
                    f,
                    "pool {p} overlaps a non-unicast or special-purpose range"
                )
            }
            NatError::PoolOverlapsInside { pool, inside } => {
                write!(f, "pool {pool} overlaps inside prefix {inside}")
            }
            NatError::ZeroTimeout(which) => write!(f, "timeout {which} is zero"),
            NatError::ZeroFragmentTable => f.write_str("fragment table size is zero"),
            NatError::BadPortRange(a, b) => write!(
                f,
                "port range {a}..={b} is empty or starts below {FIRST_EXTERNAL_PORT}"
            ),
            NatError::BadPortBlock(size, max) => write!(
                f,
                "port block size {size} with max_blocks {max}: the size must be 1..=ports in the range and max_blocks at least 1"
            ),
            NatError::BadDeterministic(n, why) => {
                write!(f, "deterministic NAT over {n} inside addresses: {why}")
            }
        }
    }
}

impl std::error::Error for NatError {}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::nat::testutil::*;

    #[test]
    fn config_errors() {
        let inside: Vec<Ipv4Net> = vec!["10.0.0.0/8".parse().unwrap()];
        let e = Nat44::new(NatConfig::new(vec![], "198.51.100.0/28".parse().unwrap()));
        assert_eq!(e.err(), Some(NatError::NoInsidePrefix));
        let e = Nat44::new(NatConfig::new(
            inside.clone(),
            "10.1.0.0/24".parse().unwrap(),
        ));
        assert!(matches!(e.err(), Some(NatError::PoolOverlapsInside { .. })));
        let e = Nat44::new(NatConfig::new(
            inside.clone(),
            "224.0.0.0/24".parse().unwrap(),
        ));
        assert!(matches!(e.err(), Some(NatError::PoolNotUnicast(_))));
        let mut c = NatConfig::new(inside.clone(), "198.51.100.7/32".parse().unwrap());
        c.timeouts.icmp = Duration::ZERO;
        assert_eq!(Nat44::new(c).err(), Some(NatError::ZeroTimeout("icmp")));
        let n = Nat44::new(NatConfig::new(
            inside.clone(),
            "198.51.100.7/32".parse().unwrap(),
        ))
        .unwrap();
        assert_eq!(n.pool_size(), 1);
        assert_eq!(n.paired_address(H1), 0xC633_6407);
        assert_eq!(nat().pool_size(), 14);
        assert!(NatError::NoInsidePrefix.to_string().contains("inside"));
    }
}
