//! The NAT44 engine: NAPT for TCP, UDP and ICMP echo (RFC 3022, RFC 5508),
//! endpoint-independent mapping with paired address pooling (RFC 4787
//! REQ-1, REQ-2), session logging as RFC 8158 natEvent 4 / 5 records.
//!
//! The engine is pure: no I/O, no threads, no wall clock. Time is the
//! timestamp of the packets given to [`Nat44::process`]; the engine's clock
//! never goes backwards (an older timestamp counts as the newest one seen).
//!
//! The capture is assumed to be taken on the *inside* interface:
//!
//! * an **outbound** packet (source in an inside prefix, destination a
//!   unicast address outside all inside prefixes) finds or creates its
//!   session and is rewritten in place: source address from the pool,
//!   source port (or ICMP echo identifier) from the session's mapping,
//!   checksums patched incrementally (RFC 1624);
//! * an **inbound** packet (from outside to an inside host) already shows the
//!   inside addresses, so it is matched to its session by the reversed
//!   5-tuple, counted for the responder and left unchanged.
//!
//! Sessions are picked up loosely like Linux conntrack: any outbound TCP
//! packet without a session creates one, not only a SYN.
//!
//! The engine is split by responsibility (every public item is
//! re-exported here, its one public path):
//!
//! * `config`: [`NatConfig`], [`PortAllocation`], the timeouts, the
//!   per-worker port range and the errors of a rejected configuration;
//! * `verdict` and `stats`: what happened to each packet, and the
//!   counters;
//! * `engine`: building a [`Nat44`], classifying each packet (special
//!   addresses, direction, protocol) and driving its translation;
//! * `session`: the session table, endpoint-independent mappings and the
//!   TCP state of a session;
//! * `ports`: the port bitmaps and the choice of a new mapping's pool
//!   address and port (sequential, random);
//! * `pba` and `deterministic`: port block allocation (natEvent 16/17)
//!   and deterministic NAT (RFC 7422);
//! * `events`: session limits and exhaustion events (natEvent 3, 12, 13),
//!   rate-limited;
//! * `log`: [`NatLog`], where every record goes, and the record
//!   builders;
//! * `timers`: idle expiry and the end-of-input flush;
//! * `fragments`: the fragment table that lets later fragments follow
//!   their first;
//! * `icmp` and `hairpin`: ICMP error translation (RFC 5508) and
//!   hairpinning (RFC 4787 REQ-9), within one worker and across workers;
//! * `rewrite`: the in-place header rewrites and their incremental
//!   checksum updates (RFC 1624);
//! * `hash`: the hasher of the internal tables.

use std::collections::BinaryHeap;

mod config;
mod deterministic;
mod engine;
mod events;
mod fragments;
mod hairpin;
mod hash;
mod icmp;
mod log;
mod pba;
mod ports;
mod rewrite;
mod session;
mod stats;
#[cfg(test)]
mod testutil;
mod timers;
mod verdict;

pub use config::{
    worker_port_range, NatConfig, NatError, NatTimeouts, PortAllocation,
    DEFAULT_FRAGMENT_TABLE_SIZE, DEFAULT_FRAGMENT_TIMEOUT, EXTERNAL_PORTS_PER_ADDRESS,
    FIRST_EXTERNAL_PORT, MAX_BLOCKS_PER_USER, MAX_DETERMINISTIC_SUBSCRIBERS,
};
pub use log::{AllRecords, NatLog};
pub use stats::NatStats;
pub use verdict::Verdict;

use fragments::FragTable;
use hash::FxMap;
use pba::User;
use ports::PortBlock;
use session::{FlowKey, MapKey, Mapping, Session};
use timers::Timer;

/// A NAT44 (NAPT) engine. See the module documentation for the semantics.
pub struct Nat44 {
    cfg: NatConfig,
    inside: Vec<(u32, u32)>,
    pool_first: u32,
    pool_count: u32,
    udp_ns: u64,
    tcp_est_ns: u64,
    tcp_trans_ns: u64,
    icmp_ns: u64,
    now: u64,
    next_seq: u64,
    flows: FxMap<FlowKey, u32>,
    mappings: FxMap<MapKey, Mapping>,
    ports: FxMap<(u32, u8), PortBlock>,
    slots: Vec<Session>,
    free_slots: Vec<u32>,
    timers: BinaryHeap<Timer>,
    frags: FragTable,
    /// Hairpin datagrams handed over by other workers: (src, dst,
    /// protocol, IP id) of first fragments → inside destination
    /// ([`Nat44::hairpin_in`]).
    hairpin_frags: FragTable,
    /// Two-stage hairpinning across workers: (this worker, workers, the
    /// whole port range before the split).
    handoff: Option<(usize, usize, (u16, u16))>,
    /// Worker of the last [`Verdict::HairpinHandoff`].
    handoff_target: usize,
    stats: NatStats,
    /// xorshift64* state for [`PortAllocation::Random`].
    rng: u64,
    /// External (address, port, protocol) → mapping key, for hairpinning.
    reverse: FxMap<(u32, u16, u8), MapKey>,
    /// Per-subscriber state; kept only when `track_users`.
    users: FxMap<u32, User>,
    /// Session limit or port blocks configured.
    track_users: bool,
    /// Log natEvent 4/5 (false with PBA unless asked for, and with
    /// deterministic NAT).
    log_sessions: bool,
    /// Free port blocks per pool index (PBA), lowest block on top;
    /// filled on first use.
    free_blocks: FxMap<u32, Vec<u16>>,
    /// Blocks per pool address (PBA).
    blocks_per_address: u32,
    /// Blocks held, all addresses (PBA).
    blocks_used: u64,
    /// Deterministic NAT: (subscribers per pool address, ports per
    /// subscriber).
    det: Option<(u32, u32)>,
    /// Packet time of the last natEvent 3, 12 and 13 record.
    event_last: [Option<u64>; 3],
    event_interval_ns: u64,
}

impl std::fmt::Debug for Nat44 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nat44")
            .field("cfg", &self.cfg)
            .field("now", &self.now)
            .field("flows", &self.flows.len())
            .field("mappings", &self.mappings.len())
            .field("handoff", &self.handoff)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}
