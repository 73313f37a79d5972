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

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::time::Duration;

use dplog::record::{nat_event, quota_event};
use dplog::{
    Nat44SessionRecord, NatAddressesExhaustedRecord, NatEvent, NatPortBlockRecord,
    NatPortsExhaustedRecord, NatQuotaExceededRecord, NatRecord, RecordHeader,
};
use ipnet::Ipv4Net;

use crate::checksum::{internet_checksum, update16, update32};
use crate::packet::{
    self, MalformedReason, ParseError, ParsedPacket, Transport, PROTO_ICMP, PROTO_TCP, PROTO_UDP,
    TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN,
};

// ---------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------

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

/// Receives every record a [`Nat44`] produces, in event order.
///
/// Any `FnMut(Nat44SessionRecord)` closure is a `NatLog` that gets the
/// session records (natEvent 4/5) and discards the others; wrap a
/// `FnMut(NatRecord)` in [`AllRecords`] to receive every record type in one
/// 64-byte slot type (what the `dplog-nat` workers push into their ring).
pub trait NatLog {
    /// A NAT44 session create (natEvent 4) or delete (natEvent 5).
    fn session(&mut self, rec: Nat44SessionRecord);
    /// Any other NAT record: port block allocation / release (16/17),
    /// addresses or ports exhausted (3/12), quota exceeded (13). The
    /// default discards it.
    fn event(&mut self, rec: NatRecord) {
        let _ = rec;
    }
}

impl<F: FnMut(Nat44SessionRecord)> NatLog for F {
    #[inline]
    fn session(&mut self, rec: Nat44SessionRecord) {
        self(rec)
    }
}

/// A [`NatLog`] that hands every record, of any type, to `F` as a
/// [`NatRecord`] slot.
pub struct AllRecords<F>(pub F);

impl<F: FnMut(NatRecord)> NatLog for AllRecords<F> {
    #[inline]
    fn session(&mut self, rec: Nat44SessionRecord) {
        (self.0)(NatRecord::from(rec))
    }
    #[inline]
    fn event(&mut self, rec: NatRecord) {
        (self.0)(rec)
    }
}

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

// ---------------------------------------------------------------------------
// Verdicts and statistics
// ---------------------------------------------------------------------------

/// What [`Nat44::process`] did with a packet. Every packet gets exactly one
/// verdict and each verdict has its own counter in [`NatStats`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Outbound packet translated (source address and port rewritten).
    TranslatedOut,
    /// Inbound packet matched to its session (already in inside form).
    TranslatedIn,
    /// A later fragment (offset > 0) matched through the fragment table;
    /// outbound ones get their source address rewritten.
    FragmentMatched,
    /// A later fragment whose first fragment was not seen (or expired).
    FragmentNoSession,
    /// Inbound packet without a session (unsolicited, or after expiry).
    InboundNoSession,
    /// Outbound ICMP echo reply without a session (an answer to a ping from
    /// outside); not translated.
    IcmpReplyNoSession,
    /// No external port left on the inside host's pool address; dropped.
    PoolExhausted,
    /// Destination is multicast (224.0.0.0/4).
    Multicast,
    /// Destination is the limited broadcast 255.255.255.255.
    Broadcast,
    /// Source or destination in 0.0.0.0/8 ("this network").
    ThisNetwork,
    /// Source or destination in loopback 127.0.0.0/8.
    Loopback,
    /// Source or destination in link-local 169.254.0.0/16.
    LinkLocal,
    /// Source multicast, or source or destination in reserved 240.0.0.0/4.
    Reserved,
    /// Both ends inside: routed, not translated.
    InsideToInside,
    /// Neither end inside: not for this NAT.
    Transit,
    /// IP protocol other than TCP, UDP and ICMP (GRE, ESP, ...).
    UnsupportedProtocol,
    /// ICMP other than echo request / reply and the errors of
    /// [`Verdict::IcmpErrorOut`] (timestamp, router advertisement...).
    IcmpNotEcho,
    /// Not an IPv4 packet (IPv6, ARP, ...).
    NotIpv4,
    /// Link type the parser does not handle.
    UnsupportedLinkType,
    /// The subscriber reached `max_sessions_per_user` (or, with port
    /// blocks, filled all its blocks); dropped, natEvent 13 logged.
    SessionLimit,
    /// Hairpinning (RFC 4787 REQ-9): an inside host reached another inside
    /// host through its external address; source and destination were both
    /// translated.
    Hairpinned,
    /// Sent to a pool address and port with no mapping in this engine
    /// (nothing to hairpin to; with several workers a TCP/UDP packet to
    /// another worker's port is handed to it instead,
    /// [`Verdict::HairpinHandoff`], see [`crate::workers`]), or an ICMP
    /// echo to a pool address; dropped. A TCP/UDP packet gets (or
    /// refreshes) the sender's session before it is dropped, natEvent 4
    /// logged when new: the source mapping is endpoint-independent
    /// (RFC 4787 REQ-1), allocated whatever the destination, and the
    /// two-stage path allocates it on the sender's worker before the
    /// owner finds no mapping; so the sessions and records are the same
    /// for any worker count. A session limit or pool exhaustion on the
    /// sender gives that verdict instead.
    HairpinNoMapping,
    /// Outbound ICMP error (RFC 5508) about a session: outer source and the
    /// quoted packet's destination translated, checksums fixed.
    IcmpErrorOut,
    /// Inbound ICMP error whose quoted packet matches a session.
    IcmpErrorIn,
    /// ICMP error whose quoted packet matches no session; dropped.
    IcmpErrorNoSession,
    /// ICMP error whose quoted packet is truncated, malformed, a later
    /// fragment or of a protocol other than TCP, UDP and ICMP echo (GRE,
    /// IP-in-IP...); dropped.
    IcmpErrorBadQuote,
    /// ICMP error quoting an ICMP error (RFC 1122 3.2.2 forbids sending
    /// one); dropped.
    IcmpErrorQuotesError,
    /// A later fragment that partly overlaps bytes already seen of its
    /// datagram (RFC 5722 treats overlaps as an attack); dropped. A
    /// fragment whose bytes were all seen before is a duplicate: it is
    /// forwarded as [`Verdict::FragmentMatched`] and counted in
    /// [`NatStats::fragments_duplicate`] (without buffering, the NAT
    /// cannot compare contents).
    FragmentOverlap,
    /// Cut by the capture's snap length (captured length below the wire
    /// length) before the headers the NAT needs (the IPv4 header and the
    /// TCP/UDP/ICMP fixed header), or an ICMP error whose quote was cut
    /// (its checksum covers bytes not captured); not translated. A cut
    /// packet whose headers are all there is translated as usual (see
    /// [`Nat44::process_snapped`]).
    Snapped,
    /// Hairpinning across workers (see [`Nat44::set_hairpin_handoff`]):
    /// the source was translated here with the sender's own
    /// endpoint-independent mapping (a session created or refreshed, as
    /// any outbound packet), but the destination pool port belongs to
    /// worker [`Nat44::handoff_target`], which translates the destination
    /// ([`Nat44::hairpin_in`]) and emits the packet; its outcome is counted
    /// there in [`NatStats::hairpin_in_delivered`] /
    /// [`NatStats::hairpin_in_dropped`]. Later fragments of such a
    /// datagram get this verdict too.
    HairpinHandoff,
    /// Malformed frame, with the reason.
    Malformed(MalformedReason),
}

const SIMPLE_VERDICTS: [Verdict; 30] = [
    Verdict::TranslatedOut,
    Verdict::TranslatedIn,
    Verdict::FragmentMatched,
    Verdict::FragmentNoSession,
    Verdict::InboundNoSession,
    Verdict::IcmpReplyNoSession,
    Verdict::PoolExhausted,
    Verdict::Multicast,
    Verdict::Broadcast,
    Verdict::ThisNetwork,
    Verdict::Loopback,
    Verdict::LinkLocal,
    Verdict::Reserved,
    Verdict::InsideToInside,
    Verdict::Transit,
    Verdict::UnsupportedProtocol,
    Verdict::IcmpNotEcho,
    Verdict::NotIpv4,
    Verdict::UnsupportedLinkType,
    Verdict::SessionLimit,
    Verdict::Hairpinned,
    Verdict::HairpinNoMapping,
    Verdict::IcmpErrorOut,
    Verdict::IcmpErrorIn,
    Verdict::IcmpErrorNoSession,
    Verdict::IcmpErrorBadQuote,
    Verdict::IcmpErrorQuotesError,
    Verdict::FragmentOverlap,
    Verdict::Snapped,
    Verdict::HairpinHandoff,
];

impl Verdict {
    /// Number of distinct verdicts (each malformed reason counts as one).
    pub const COUNT: usize = SIMPLE_VERDICTS.len() + MalformedReason::COUNT;

    /// Dense index in `0..Verdict::COUNT`, for counter arrays.
    pub fn index(self) -> usize {
        match self {
            Verdict::TranslatedOut => 0,
            Verdict::TranslatedIn => 1,
            Verdict::FragmentMatched => 2,
            Verdict::FragmentNoSession => 3,
            Verdict::InboundNoSession => 4,
            Verdict::IcmpReplyNoSession => 5,
            Verdict::PoolExhausted => 6,
            Verdict::Multicast => 7,
            Verdict::Broadcast => 8,
            Verdict::ThisNetwork => 9,
            Verdict::Loopback => 10,
            Verdict::LinkLocal => 11,
            Verdict::Reserved => 12,
            Verdict::InsideToInside => 13,
            Verdict::Transit => 14,
            Verdict::UnsupportedProtocol => 15,
            Verdict::IcmpNotEcho => 16,
            Verdict::NotIpv4 => 17,
            Verdict::UnsupportedLinkType => 18,
            Verdict::SessionLimit => 19,
            Verdict::Hairpinned => 20,
            Verdict::HairpinNoMapping => 21,
            Verdict::IcmpErrorOut => 22,
            Verdict::IcmpErrorIn => 23,
            Verdict::IcmpErrorNoSession => 24,
            Verdict::IcmpErrorBadQuote => 25,
            Verdict::IcmpErrorQuotesError => 26,
            Verdict::FragmentOverlap => 27,
            Verdict::Snapped => 28,
            Verdict::HairpinHandoff => 29,
            Verdict::Malformed(r) => SIMPLE_VERDICTS.len() + r as usize,
        }
    }

    /// Inverse of [`Verdict::index`]; `None` when `i >= Verdict::COUNT`.
    pub fn from_index(i: usize) -> Option<Verdict> {
        match SIMPLE_VERDICTS.get(i) {
            Some(v) => Some(*v),
            None => MalformedReason::ALL
                .get(i - SIMPLE_VERDICTS.len())
                .map(|r| Verdict::Malformed(*r)),
        }
    }

    /// Every verdict in index order.
    pub fn all() -> impl Iterator<Item = Verdict> {
        (0..Self::COUNT).filter_map(Self::from_index)
    }

    /// True when the packet was handled by the NAT (translated or matched to
    /// a session); all other verdicts mean "not translated, dropped or left
    /// to the router".
    pub fn is_translated(self) -> bool {
        matches!(
            self,
            Verdict::TranslatedOut
                | Verdict::TranslatedIn
                | Verdict::FragmentMatched
                | Verdict::Hairpinned
                | Verdict::IcmpErrorOut
                | Verdict::IcmpErrorIn
        )
    }

    /// Short snake_case name for summaries, e.g. `"translated_out"` or
    /// `"malformed_tcp_data_offset_past_end"`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::TranslatedOut => "translated_out",
            Verdict::TranslatedIn => "translated_in",
            Verdict::FragmentMatched => "fragment_matched",
            Verdict::FragmentNoSession => "fragment_no_session",
            Verdict::InboundNoSession => "inbound_no_session",
            Verdict::IcmpReplyNoSession => "icmp_reply_no_session",
            Verdict::PoolExhausted => "pool_exhausted",
            Verdict::Multicast => "multicast",
            Verdict::Broadcast => "broadcast",
            Verdict::ThisNetwork => "this_network",
            Verdict::Loopback => "loopback",
            Verdict::LinkLocal => "link_local",
            Verdict::Reserved => "reserved",
            Verdict::InsideToInside => "inside_to_inside",
            Verdict::Transit => "transit",
            Verdict::UnsupportedProtocol => "unsupported_protocol",
            Verdict::IcmpNotEcho => "icmp_not_echo",
            Verdict::NotIpv4 => "not_ipv4",
            Verdict::UnsupportedLinkType => "unsupported_link_type",
            Verdict::SessionLimit => "session_limit",
            Verdict::Hairpinned => "hairpinned",
            Verdict::HairpinNoMapping => "hairpin_no_mapping",
            Verdict::IcmpErrorOut => "icmp_error_out",
            Verdict::IcmpErrorIn => "icmp_error_in",
            Verdict::IcmpErrorNoSession => "icmp_error_no_session",
            Verdict::IcmpErrorBadQuote => "icmp_error_bad_quote",
            Verdict::IcmpErrorQuotesError => "icmp_error_quotes_error",
            Verdict::FragmentOverlap => "fragment_overlap",
            Verdict::Snapped => "snapped",
            Verdict::HairpinHandoff => "hairpin_handoff",
            Verdict::Malformed(r) => r.name(),
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<ParseError> for Verdict {
    fn from(e: ParseError) -> Self {
        match e {
            ParseError::UnsupportedLinkType => Verdict::UnsupportedLinkType,
            ParseError::NotIpv4 => Verdict::NotIpv4,
            ParseError::Malformed(r) => Verdict::Malformed(r),
        }
    }
}

/// Counters of a [`Nat44`]. All counts are since [`Nat44::new`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NatStats {
    /// Packets per verdict, indexed by [`Verdict::index`].
    pub verdicts: [u64; Verdict::COUNT],
    /// Packets given to [`Nat44::process`].
    pub packets: u64,
    /// Sessions created (natEvent 4 records).
    pub sessions_created: u64,
    /// Sessions deleted (natEvent 5 records), for any reason.
    pub sessions_deleted: u64,
    /// Of the deletes: idle timeouts.
    pub sessions_expired: u64,
    /// Of the deletes: by [`Nat44::finish`] at end of input.
    pub sessions_flushed: u64,
    /// Of the deletes: a closing TCP session replaced by a new SYN on the
    /// same 5-tuple.
    pub sessions_replaced: u64,
    /// Sessions alive now.
    pub sessions_live: u64,
    /// Highest `sessions_live` seen.
    pub peak_sessions: u64,
    /// Endpoint-independent mappings (inside addr:port → external
    /// addr:port) alive now.
    pub mappings_live: u64,
    /// Records passed to the `log` callback.
    pub records_logged: u64,
    /// First fragments entered into the fragment table.
    pub fragments_tracked: u64,
    /// Fragment table entries evicted because the table was full.
    pub fragments_evicted: u64,
    /// Fragment table entries removed after the fragment timeout.
    pub fragments_expired: u64,
    /// Later fragments whose bytes were all seen before (forwarded).
    pub fragments_duplicate: u64,
    /// Port blocks reserved (natEvent 16 records).
    pub port_blocks_allocated: u64,
    /// Port blocks released (natEvent 17 records).
    pub port_blocks_released: u64,
    /// Port blocks held now.
    pub port_blocks_live: u64,
    /// Limit and exhaustion records (natEvent 3, 12, 13) logged.
    pub limit_events_logged: u64,
    /// Limit and exhaustion events not logged because of the rate limit
    /// ([`NatConfig::event_log_interval`]).
    pub limit_events_suppressed: u64,
    /// Packets another worker handed over for destination translation
    /// ([`Nat44::hairpin_in`]); not in `packets` (the sender counted them,
    /// as [`Verdict::HairpinHandoff`]).
    pub hairpin_in_received: u64,
    /// Of them, translated to the inside host (destination address, and
    /// port but for later fragments) and emitted.
    pub hairpin_in_delivered: u64,
    /// Of them, dropped: no mapping for the destination pool port, or a
    /// later fragment whose first fragment was not seen here.
    pub hairpin_in_dropped: u64,
    /// Of `hairpin_in_delivered`, later fragments
    /// ([`Verdict::FragmentMatched`]); the rest were
    /// [`Verdict::Hairpinned`].
    pub hairpin_in_fragments_delivered: u64,
    /// Of `hairpin_in_dropped`, later fragments whose first was not seen
    /// ([`Verdict::FragmentNoSession`]); the rest were
    /// [`Verdict::HairpinNoMapping`] (or, never from a well-behaved sender,
    /// a frame that no longer parses).
    pub hairpin_in_fragments_dropped: u64,
}

impl Default for NatStats {
    fn default() -> Self {
        Self {
            verdicts: [0; Verdict::COUNT],
            packets: 0,
            sessions_created: 0,
            sessions_deleted: 0,
            sessions_expired: 0,
            sessions_flushed: 0,
            sessions_replaced: 0,
            sessions_live: 0,
            peak_sessions: 0,
            mappings_live: 0,
            records_logged: 0,
            fragments_tracked: 0,
            fragments_evicted: 0,
            fragments_expired: 0,
            fragments_duplicate: 0,
            port_blocks_allocated: 0,
            port_blocks_released: 0,
            port_blocks_live: 0,
            limit_events_logged: 0,
            limit_events_suppressed: 0,
            hairpin_in_received: 0,
            hairpin_in_delivered: 0,
            hairpin_in_dropped: 0,
            hairpin_in_fragments_delivered: 0,
            hairpin_in_fragments_dropped: 0,
        }
    }
}

impl NatStats {
    /// Packets that got verdict `v`.
    pub fn count(&self, v: Verdict) -> u64 {
        self.verdicts[v.index()]
    }

    /// `(verdict, packets)` for every verdict with a non-zero count, in
    /// index order.
    pub fn nonzero(&self) -> impl Iterator<Item = (Verdict, u64)> + '_ {
        Verdict::all()
            .map(|v| (v, self.count(v)))
            .filter(|(_, n)| *n != 0)
    }

    /// Packets per verdict with every cross-worker handoff resolved to its
    /// outcome at the owner: [`Verdict::HairpinHandoff`] less the packets
    /// the owners received, moved to [`Verdict::Hairpinned`] /
    /// [`Verdict::FragmentMatched`] (delivered) or
    /// [`Verdict::HairpinNoMapping`] / [`Verdict::FragmentNoSession`]
    /// (dropped). Summed over all workers after the run, this is what one
    /// worker would count for the same input. Indexed by [`Verdict::index`].
    pub fn outcomes(&self) -> [u64; Verdict::COUNT] {
        let mut v = self.verdicts;
        let mut add = |k: Verdict, n: u64| v[k.index()] = v[k.index()].saturating_add(n);
        add(
            Verdict::Hairpinned,
            self.hairpin_in_delivered
                - self
                    .hairpin_in_fragments_delivered
                    .min(self.hairpin_in_delivered),
        );
        add(
            Verdict::FragmentMatched,
            self.hairpin_in_fragments_delivered,
        );
        add(
            Verdict::HairpinNoMapping,
            self.hairpin_in_dropped
                - self
                    .hairpin_in_fragments_dropped
                    .min(self.hairpin_in_dropped),
        );
        add(
            Verdict::FragmentNoSession,
            self.hairpin_in_fragments_dropped,
        );
        let h = Verdict::HairpinHandoff.index();
        v[h] = v[h].saturating_sub(self.hairpin_in_received);
        v
    }
}

// ---------------------------------------------------------------------------
// Hashing
// ---------------------------------------------------------------------------

/// A small FxHash-style hasher (multiply-rotate), good for the fixed-size
/// integer keys of the session tables. Not DoS resistant.
#[derive(Default, Clone, Copy)]
struct FxHasher {
    hash: u64,
}

const FX_K: u64 = 0xf135_7aea_2e62_a9c5;

impl FxHasher {
    #[inline]
    fn add(&mut self, v: u64) {
        self.hash = self.hash.wrapping_add(v).wrapping_mul(FX_K);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            self.add(u64::from_le_bytes(b));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        self.hash.rotate_left(26)
    }
}

type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

// ---------------------------------------------------------------------------
// Internal tables
// ---------------------------------------------------------------------------

/// A session's 5-tuple in inside form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FlowKey {
    inside_addr: u32,
    remote_addr: u32,
    inside_port: u16,
    remote_port: u16,
    proto: u8,
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
struct MapKey {
    addr: u32,
    port: u16,
    proto: u8,
}

impl Hash for MapKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(
            (u64::from(self.addr) << 32) | (u64::from(self.port) << 8) | u64::from(self.proto),
        );
    }
}

#[derive(Clone, Copy, Debug)]
struct Mapping {
    ext_addr: u32,
    ext_port: u16,
    pool_index: u32,
    refs: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
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
struct Session {
    /// Creation serial, unique for the engine's lifetime; orders `finish`.
    seq: u64,
    live: bool,
    /// Generation of the session's one valid timer-heap entry.
    timer_gen: u32,
    /// Expiry time of that heap entry.
    scheduled: u64,
    key: FlowKey,
    ext_addr: u32,
    ext_port: u16,
    state: State,
    last_seen: u64,
    init_packets: u32,
    resp_packets: u32,
    init_octets: u64,
    resp_octets: u64,
}

/// Port bitmap of one (pool address, protocol): bit set = in use. Only
/// ports in `lo..=hi` are ever handed out; the others are marked used.
struct PortBlock {
    bits: Box<[u64; 1024]>,
    used: u32,
    lo: u32,
    hi: u32,
    /// Next-fit cursor (next port to try).
    cursor: u32,
}

impl PortBlock {
    fn new(lo: u16, hi: u16) -> Self {
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
    fn alloc_from(&mut self, start: u32) -> Option<u16> {
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

    fn alloc(&mut self) -> Option<u16> {
        self.alloc_from(self.cursor)
    }

    /// Lowest free port in `first..=last` (a port block), if any.
    fn alloc_in(&mut self, first: u32, last: u32) -> Option<u16> {
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

    fn free(&mut self, port: u16) {
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct FragKey {
    src: u32,
    dst: u32,
    id: u16,
    proto: u8,
}

/// Byte ranges of a datagram seen so far, kept per fragment table entry to
/// detect overlaps (bounded: further ranges are not remembered).
const FRAG_RANGES: usize = 6;

#[derive(Clone, Copy, Debug)]
struct FragEntry {
    slot: u32,
    session_seq: u64,
    expires: u64,
    serial: u64,
    /// `[start, end)` payload byte ranges seen; `nranges` used.
    ranges: [(u32, u32); FRAG_RANGES],
    nranges: u8,
    /// A hairpinned datagram (RFC 4787 REQ-9): the inside host its first
    /// fragment was sent to, which later fragments' destination address is
    /// rewritten to as well.
    hairpin_to: Option<u32>,
    /// A datagram whose first fragment was handed to this worker index
    /// ([`Verdict::HairpinHandoff`]): so are its later fragments.
    handoff_to: Option<u32>,
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
struct FragTable {
    map: FxMap<FragKey, FragEntry>,
    order: VecDeque<(FragKey, u64)>,
    capacity: usize,
    timeout_ns: u64,
    serial: u64,
}

impl FragTable {
    fn is_current(&self, key: &FragKey, serial: u64) -> bool {
        self.map.get(key).is_some_and(|e| e.serial == serial)
    }

    #[allow(clippy::too_many_arguments)]
    fn insert(
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

    fn expire(&mut self, now: u64, stats: &mut NatStats) {
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

    fn clear(&mut self) {
        self.map.clear();
        self.order.clear();
    }
}

/// Timer-heap entry: (expiry ns, session seq, slot, generation), min-first.
type Timer = Reverse<(u64, u64, u32, u32)>;

// ---------------------------------------------------------------------------
// The engine
// ---------------------------------------------------------------------------

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

/// Most port blocks one subscriber may hold
/// ([`PortAllocation::PortBlock`]'s `max_blocks`).
pub const MAX_BLOCKS_PER_USER: u16 = 16;

/// Per-subscriber state (sessions, port blocks).
#[derive(Clone, Copy, Debug, Default)]
struct User {
    sessions: u32,
    nblocks: u8,
    blocks: [u16; MAX_BLOCKS_PER_USER as usize],
}

/// Which rate-limited event (index into `event_last`).
#[derive(Clone, Copy)]
enum LimitEvent {
    AddressesExhausted = 0,
    PortsExhausted = 1,
    Quota = 2,
}

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

/// murmur3 fmix32: spreads inside addresses over the pool.
fn mix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
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

#[inline]
fn get16(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

#[inline]
fn put16(b: &mut [u8], at: usize, v: u16) {
    if let Some(s) = at.checked_add(2).and_then(|end| b.get_mut(at..end)) {
        s.copy_from_slice(&v.to_be_bytes());
    }
}

#[inline]
fn put32(b: &mut [u8], at: usize, v: u32) {
    if let Some(s) = at.checked_add(4).and_then(|end| b.get_mut(at..end)) {
        s.copy_from_slice(&v.to_be_bytes());
    }
}

/// Rewrites the IPv4 source address of the packet at `l3` and patches the
/// header checksum (RFC 1624).
fn rewrite_ip_src(frame: &mut [u8], l3: usize, old: u32, new: u32) {
    if let Some(c) = get16(frame, l3 + 10) {
        put16(frame, l3 + 10, update32(c, old, new));
    }
    put32(frame, l3 + 12, new);
}

/// Rewrites the IPv4 destination address of the packet at `l3` and patches
/// the header checksum (RFC 1624): a later fragment of a hairpinned
/// datagram, which carries no transport header.
fn rewrite_ip_dst(frame: &mut [u8], l3: usize, old: u32, new: u32) {
    if let Some(c) = get16(frame, l3 + 10) {
        put16(frame, l3 + 10, update32(c, old, new));
    }
    put32(frame, l3 + 16, new);
}

/// Source NAT of an outbound packet: address, port / ICMP identifier and
/// every checksum that covers them.
fn rewrite_outbound(frame: &mut [u8], p: &ParsedPacket, new_addr: u32, new_port: u16) {
    let l3 = p.l3_offset;
    let l4 = p.l4_offset();
    let old_addr = p.ip.src;
    rewrite_ip_src(frame, l3, old_addr, new_addr);
    match p.transport {
        Transport::Tcp(t) => {
            if let Some(c) = get16(frame, l4 + 16) {
                let c = update16(update32(c, old_addr, new_addr), t.src_port, new_port);
                put16(frame, l4 + 16, c);
            }
            put16(frame, l4, new_port);
        }
        Transport::Udp(u) => {
            if u.checksum != 0 {
                let mut c = update16(
                    update32(u.checksum, old_addr, new_addr),
                    u.src_port,
                    new_port,
                );
                if c == 0 {
                    c = 0xFFFF; // RFC 768: a computed 0 is sent as all ones.
                }
                put16(frame, l4 + 6, c);
            }
            put16(frame, l4, new_port);
        }
        Transport::IcmpEcho(e) => {
            if let Some(c) = get16(frame, l4 + 2) {
                put16(frame, l4 + 2, update16(c, e.identifier, new_port));
            }
            put16(frame, l4 + 4, new_port);
        }
        Transport::IcmpOther { .. } | Transport::Fragment | Transport::Other => {}
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
            frags: FragTable {
                map: FxMap::default(),
                order: VecDeque::new(),
                capacity: cfg.fragment_table_size,
                timeout_ns: nanos(cfg.fragment_timeout),
                serial: 0,
            },
            hairpin_frags: FragTable {
                map: FxMap::default(),
                order: VecDeque::new(),
                capacity: cfg.fragment_table_size,
                timeout_ns: nanos(cfg.fragment_timeout),
                serial: 0,
            },
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

    /// The inside address of index `i` counted through the inside
    /// prefixes in order (inverse of `inside_index`).
    fn inside_address(&self, mut i: u64) -> Option<u32> {
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

    fn pool_index(&self, inside_addr: u32) -> u32 {
        mix32(inside_addr) % self.pool_count
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

    fn advance(&mut self, ts_ns: u64) -> u64 {
        self.now = self.now.max(ts_ns);
        self.now
    }

    fn timeout_of(&self, state: State) -> u64 {
        match state {
            State::Udp => self.udp_ns,
            State::Icmp => self.icmp_ns,
            State::TcpOpening | State::TcpClosing | State::TcpReset => self.tcp_trans_ns,
            State::TcpEstablished => self.tcp_est_ns,
        }
    }

    fn expire(&mut self, now: u64, log: &mut impl NatLog) {
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
    fn reschedule(&mut self, slot: u32) {
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

    fn record(&self, s: &Session, event: NatEvent, ts: u64) -> Nat44SessionRecord {
        Nat44SessionRecord {
            header: RecordHeader::of::<Nat44SessionRecord>(),
            timestamp_ns: ts,
            src_addr: s.key.inside_addr,
            post_nat_src_addr: s.ext_addr,
            dst_addr: s.key.remote_addr,
            src_port: s.key.inside_port,
            post_napt_src_port: s.ext_port,
            dst_port: s.key.remote_port,
            protocol: s.key.proto,
            nat_event: event as u8,
            ingress_vrf_id: self.cfg.vrf_id,
            initiator_packets: s.init_packets,
            responder_packets: s.resp_packets,
            initiator_octets: s.init_octets,
            responder_octets: s.resp_octets,
        }
    }

    fn delete(&mut self, slot: u32, ts: u64, log: &mut impl NatLog) {
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

    /// A subscriber's session ended: when it was the last, its port blocks
    /// are released (natEvent 17 each) and its state dropped.
    fn user_session_ended(&mut self, addr: u32, ext_addr: u32, ts: u64, log: &mut impl NatLog) {
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

    fn block_record(
        &self,
        inside: u32,
        ext_addr: u32,
        block: u16,
        size: u16,
        ts: u64,
        allocation: bool,
    ) -> NatPortBlockRecord {
        let start = u32::from(self.cfg.port_range.0) + u32::from(block) * u32::from(size);
        NatPortBlockRecord {
            timestamp_ns: ts,
            src_addr: inside,
            post_nat_src_addr: ext_addr,
            port_range_start: start as u16,
            port_range_end: (start + u32::from(size) - 1) as u16,
            port_range_step: 1,
            nat_event: if allocation {
                nat_event::PORT_BLOCK_ALLOCATION
            } else {
                nat_event::PORT_BLOCK_DEALLOCATION
            },
            port_range_num_ports: size,
            ingress_vrf_id: self.cfg.vrf_id,
            ..Default::default()
        }
    }

    /// Logs a limit or exhaustion record unless one of the same event was
    /// logged less than `event_log_interval` of packet time ago.
    fn limit_event(&mut self, which: LimitEvent, now: u64, rec: NatRecord, log: &mut impl NatLog) {
        let last = &mut self.event_last[which as usize];
        if last.is_some_and(|t| now < t.saturating_add(self.event_interval_ns)) {
            self.stats.limit_events_suppressed += 1;
            return;
        }
        *last = Some(now);
        log.event(rec);
        self.stats.limit_events_logged += 1;
        self.stats.records_logged += 1;
    }

    fn quota_exceeded(&mut self, now: u64, user: u32, limit: u32, log: &mut impl NatLog) {
        let rec = NatQuotaExceededRecord {
            timestamp_ns: now,
            quota_event: quota_event::MAX_ENTRIES_PER_USER,
            limit,
            src_addr: user,
            ..Default::default()
        };
        self.limit_event(LimitEvent::Quota, now, rec.into(), log);
    }

    fn ports_exhausted(&mut self, now: u64, ext_addr: u32, proto: u8, log: &mut impl NatLog) {
        let rec = NatPortsExhaustedRecord {
            timestamp_ns: now,
            post_nat_src_addr: ext_addr,
            protocol: proto,
            ..Default::default()
        };
        self.limit_event(LimitEvent::PortsExhausted, now, rec.into(), log);
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
    fn det_block(&self, addr: u32) -> Option<(u32, u32, u32)> {
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

    /// A new external port for `key` under port block allocation: from the
    /// subscriber's blocks, or a new block (natEvent 16).
    fn alloc_pba(
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

    /// Creates a session for outbound `key`; `Err(PoolExhausted)` when no
    /// external port is left, `Err(SessionLimit)` when the subscriber is at
    /// its limit.
    fn create(
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
                let (lo, hi) = self.cfg.port_range;
                let (pool_index, ext_port) = match self.cfg.port_allocation {
                    PortAllocation::PortBlock { size, max_blocks } => {
                        let r = self.alloc_pba(now, &key, size, max_blocks, log);
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
                        let Some((pool_index, first, last)) = self.det_block(key.inside_addr)
                        else {
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
    fn touch(
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

    /// An ICMP error (RFC 5508 section 4): the quoted packet (IPv4 header
    /// and at least 8 bytes of its transport header, RFC 792) travelled the
    /// other way, so an outbound error quotes a packet *to* the inside host.
    /// Outbound: the outer source, the quoted destination address and port
    /// (or echo identifier) are translated, with the quoted IPv4 header
    /// checksum, the quoted transport checksum (when quoted) and the ICMP
    /// checksum. Inbound: matched and left as is. Errors do not refresh
    /// the session. Quotes that are truncated, fragments, of another
    /// protocol, or ICMP errors themselves are dropped and counted.
    fn icmp_error(&mut self, p: &ParsedPacket, outbound: bool, frame: &mut [u8]) -> Verdict {
        if p.ip.is_fragment() {
            return Verdict::IcmpErrorBadQuote;
        }
        let l4 = p.l4_offset();
        let end = p.l3_end().min(frame.len());
        let q = l4 + 8; // quoted IPv4 header
        let Some(quote) = frame.get(q..end) else {
            return Verdict::IcmpErrorBadQuote;
        };
        if quote.len() < 20 || quote[0] >> 4 != 4 {
            return Verdict::IcmpErrorBadQuote;
        }
        let ihl = usize::from(quote[0] & 0x0F) * 4;
        if ihl < 20 || quote.len() < ihl + 8 {
            return Verdict::IcmpErrorBadQuote;
        }
        if u16::from_be_bytes([quote[6], quote[7]]) & 0x1FFF != 0 {
            return Verdict::IcmpErrorBadQuote;
        }
        let iproto = quote[9];
        let isrc = u32::from_be_bytes([quote[12], quote[13], quote[14], quote[15]]);
        let idst = u32::from_be_bytes([quote[16], quote[17], quote[18], quote[19]]);
        let t = q + ihl; // quoted transport header
        let (isport, idport, echo) = match iproto {
            PROTO_TCP | PROTO_UDP => (
                get16(frame, t).unwrap_or(0),
                get16(frame, t + 2).unwrap_or(0),
                false,
            ),
            PROTO_ICMP => match frame[t] {
                0 | 8 => {
                    let id = get16(frame, t + 4).unwrap_or(0);
                    (id, id, true)
                }
                ty if is_icmp_error(ty) => return Verdict::IcmpErrorQuotesError,
                _ => return Verdict::IcmpErrorBadQuote,
            },
            _ => return Verdict::IcmpErrorBadQuote,
        };
        let key = if outbound {
            FlowKey {
                inside_addr: idst,
                remote_addr: isrc,
                inside_port: idport,
                remote_port: if echo { 0 } else { isport },
                proto: iproto,
            }
        } else {
            FlowKey {
                inside_addr: isrc,
                remote_addr: idst,
                inside_port: isport,
                remote_port: if echo { 0 } else { idport },
                proto: iproto,
            }
        };
        let Some(&slot) = self.flows.get(&key) else {
            return Verdict::IcmpErrorNoSession;
        };
        if !outbound {
            return Verdict::IcmpErrorIn;
        }
        let s = &self.slots[slot as usize];
        let (ext_addr, ext_port) = (s.ext_addr, s.ext_port);
        // Outer source: the session's external address if the inside host
        // itself reports, else the reporting host's paired address.
        let outer = if p.ip.src == idst {
            ext_addr
        } else {
            self.paired_address(p.ip.src)
        };
        rewrite_ip_src(frame, p.l3_offset, p.ip.src, outer);
        // Quoted destination address and its header checksum.
        if let Some(c) = get16(frame, q + 10) {
            put16(frame, q + 10, update32(c, idst, ext_addr));
        }
        put32(frame, q + 16, ext_addr);
        match iproto {
            PROTO_UDP => {
                if let Some(c) = get16(frame, t + 6).filter(|&c| c != 0) {
                    let mut c = update16(update32(c, idst, ext_addr), idport, ext_port);
                    if c == 0 {
                        c = 0xFFFF;
                    }
                    put16(frame, t + 6, c);
                }
                put16(frame, t + 2, ext_port);
            }
            PROTO_TCP => {
                if t + 18 <= end {
                    if let Some(c) = get16(frame, t + 16) {
                        put16(
                            frame,
                            t + 16,
                            update16(update32(c, idst, ext_addr), idport, ext_port),
                        );
                    }
                }
                put16(frame, t + 2, ext_port);
            }
            _ => {
                // Quoted echo: the identifier and the quoted ICMP checksum.
                if let Some(c) = get16(frame, t + 2) {
                    put16(frame, t + 2, update16(c, idport, ext_port));
                }
                put16(frame, t + 4, ext_port);
            }
        }
        // The ICMP checksum covers the whole message: recompute it.
        put16(frame, l4 + 2, 0);
        let c = internet_checksum(&frame[l4..end]);
        put16(frame, l4 + 2, c);
        Verdict::IcmpErrorOut
    }

    fn later_fragment(
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

/// ICMP error types translated per RFC 5508: destination unreachable (3),
/// source quench (4), time exceeded (11), parameter problem (12).
fn is_icmp_error(icmp_type: u8) -> bool {
    matches!(icmp_type, 3 | 4 | 11 | 12)
}

/// Destination NAT of a hairpinned packet: destination address and port
/// from the external form to the inside host `new_addr:new_port`,
/// checksums patched (RFC 1624). TCP and UDP only.
fn rewrite_destination(frame: &mut [u8], p: &ParsedPacket, new_addr: u32, new_port: u16) {
    let (l3, l4) = (p.l3_offset, p.l4_offset());
    let old_addr = p.ip.dst;
    if let Some(c) = get16(frame, l3 + 10) {
        put16(frame, l3 + 10, update32(c, old_addr, new_addr));
    }
    put32(frame, l3 + 16, new_addr);
    match p.transport {
        Transport::Tcp(t) => {
            if let Some(c) = get16(frame, l4 + 16) {
                put16(
                    frame,
                    l4 + 16,
                    update16(update32(c, old_addr, new_addr), t.dst_port, new_port),
                );
            }
            put16(frame, l4 + 2, new_port);
        }
        Transport::Udp(u) => {
            if let Some(c) = get16(frame, l4 + 6).filter(|&c| c != 0) {
                let mut c = update16(update32(c, old_addr, new_addr), u.dst_port, new_port);
                if c == 0 {
                    c = 0xFFFF;
                }
                put16(frame, l4 + 6, c);
            }
            put16(frame, l4 + 2, new_port);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::{internet_checksum, transport_checksum};
    use crate::packet::build::*;
    use crate::packet::{LINKTYPE_ETHERNET, LINKTYPE_RAW};

    const SEC: u64 = 1_000_000_000;
    const T0: u64 = 1_767_225_600 * SEC;
    const H1: u32 = 0x0A00_0001; // 10.0.0.1
    const H2: u32 = 0x0A00_0002; // 10.0.0.2
    const R1: u32 = 0xCB00_7101; // 203.0.113.1
    const R2: u32 = 0xCB00_7102; // 203.0.113.2

    fn nat() -> Nat44 {
        Nat44::new(NatConfig::new(
            vec!["10.0.0.0/8".parse().unwrap()],
            "198.51.100.0/28".parse().unwrap(),
        ))
        .unwrap()
    }

    struct Log(Vec<Nat44SessionRecord>);
    impl Log {
        fn f(&mut self) -> impl FnMut(Nat44SessionRecord) + '_ {
            |r| self.0.push(r)
        }
        fn events(&self, e: u8) -> Vec<&Nat44SessionRecord> {
            self.0.iter().filter(|r| r.nat_event == e).collect()
        }
    }

    fn run(n: &mut Nat44, log: &mut Log, ts: u64, frame: &mut [u8]) -> Verdict {
        n.process(ts, LINKTYPE_ETHERNET, frame, &mut log.f())
    }

    fn udp_frame(src: u32, sport: u16, dst: u32, dport: u16) -> Vec<u8> {
        eth_ipv4(&ipv4(
            src,
            dst,
            PROTO_UDP,
            &[],
            &udp(sport, dport, b"payload!"),
        ))
    }

    fn tcp_frame(src: u32, sport: u16, dst: u32, dport: u16, flags: u8) -> Vec<u8> {
        eth_ipv4(&ipv4(
            src,
            dst,
            PROTO_TCP,
            &[],
            &tcp(sport, dport, flags, b"data"),
        ))
    }

    fn src_of(f: &[u8]) -> (u32, u16) {
        let p = packet::parse(LINKTYPE_ETHERNET, f).unwrap();
        let port = match p.transport {
            Transport::Tcp(t) => t.src_port,
            Transport::Udp(u) => u.src_port,
            Transport::IcmpEcho(e) => e.identifier,
            _ => 0,
        };
        (p.ip.src, port)
    }

    /// Verifies IPv4 and transport checksums of an Ethernet frame.
    fn verify_checksums(f: &[u8]) {
        let p = packet::parse(LINKTYPE_ETHERNET, f).unwrap();
        let ip = &f[p.l3_offset..p.l3_end()];
        let hl = usize::from(p.ip.header_len);
        assert_eq!(internet_checksum(&ip[..hl]), 0, "IPv4 header checksum");
        let seg = &ip[hl..];
        match p.transport {
            Transport::Tcp(_) => {
                assert_eq!(transport_checksum(p.ip.src, p.ip.dst, 6, seg), 0, "TCP")
            }
            Transport::Udp(u) if u.checksum != 0 => {
                assert_eq!(transport_checksum(p.ip.src, p.ip.dst, 17, seg), 0, "UDP")
            }
            Transport::IcmpEcho(_) => assert_eq!(internet_checksum(seg), 0, "ICMP"),
            _ => {}
        }
    }

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

    #[test]
    fn verdict_index_roundtrip() {
        let all: Vec<Verdict> = Verdict::all().collect();
        assert_eq!(all.len(), Verdict::COUNT);
        for (i, v) in all.iter().enumerate() {
            assert_eq!(v.index(), i);
            assert_eq!(Verdict::from_index(i), Some(*v));
        }
        assert_eq!(Verdict::from_index(Verdict::COUNT), None);
        let names: std::collections::HashSet<_> = all.iter().map(|v| v.name()).collect();
        assert_eq!(names.len(), Verdict::COUNT, "names are unique");
    }

    #[test]
    fn outbound_udp_is_translated_with_valid_checksums() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let mut f = udp_frame(H1, 5000, R1, 53);
        let orig = f.clone();
        assert_eq!(run(&mut n, &mut log, T0, &mut f), Verdict::TranslatedOut);
        let (a, port) = src_of(&f);
        assert_eq!(a, n.paired_address(H1));
        assert!((0xC633_6401..=0xC633_640E).contains(&a));
        assert_eq!(port, 1024);
        verify_checksums(&f);
        // Only the source address, source port and checksums changed.
        let changed: Vec<usize> = (0..f.len()).filter(|&i| f[i] != orig[i]).collect();
        assert!(!changed.is_empty());
        assert!(
            changed
                .iter()
                .all(|&i| (24..30).contains(&i) || (34..36).contains(&i) || (40..42).contains(&i)),
            "changed bytes {changed:?}"
        );
        assert_eq!(log.0.len(), 1);
        let r = log.0[0];
        assert_eq!(r.header, RecordHeader::of::<Nat44SessionRecord>());
        assert_eq!(
            (
                r.nat_event,
                r.timestamp_ns,
                r.src_addr,
                r.src_port,
                r.post_nat_src_addr,
                r.post_napt_src_port
            ),
            (4, T0, H1, 5000, a, 1024)
        );
        assert_eq!(
            (r.dst_addr, r.dst_port, r.protocol, r.ingress_vrf_id),
            (R1, 53, 17, 0)
        );
        assert_eq!((r.initiator_packets, r.initiator_octets), (0, 0));
    }

    #[test]
    fn udp_checksum_zero_stays_zero_and_tcp_icmp_checksums_stay_valid() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let mut ip = ipv4(H1, R1, PROTO_UDP, &[], &udp(7, 9, b"x"));
        ip[26..28].copy_from_slice(&[0, 0]);
        let mut f = eth_ipv4(&ip);
        assert_eq!(run(&mut n, &mut log, T0, &mut f), Verdict::TranslatedOut);
        assert_eq!(&f[14 + 26..14 + 28], &[0, 0]);
        verify_checksums(&f);

        // TCP with IPv4 options: ports and checksum after the options.
        let opts = [1u8, 1, 1, 0];
        let mut f = eth_ipv4(&ipv4(
            H2,
            R1,
            PROTO_TCP,
            &opts,
            &tcp(33333, 80, TCP_SYN, b""),
        ));
        assert_eq!(run(&mut n, &mut log, T0, &mut f), Verdict::TranslatedOut);
        verify_checksums(&f);
        assert_eq!(src_of(&f), (n.paired_address(H2), 1024));

        let mut f = eth_ipv4(&ipv4(H1, R2, PROTO_ICMP, &[], &icmp_echo(false, 0x77, 1)));
        assert_eq!(run(&mut n, &mut log, T0, &mut f), Verdict::TranslatedOut);
        verify_checksums(&f);
        let r = log.0.last().unwrap();
        assert_eq!((r.protocol, r.src_port, r.dst_port), (1, 0x77, 0));
        assert_eq!(src_of(&f).1, r.post_napt_src_port);
    }

    #[test]
    fn exhaustive_checksum_equivalence_over_many_ports() {
        // Random-ish inside ports and addresses; the incremental result must
        // equal a full recomputation every time.
        let mut n = nat();
        let mut log = Log(vec![]);
        for i in 0..2000u32 {
            let src = 0x0A00_0000 | (i.wrapping_mul(2_654_435_761) & 0x00FF_FFFF).max(1);
            let sport = (i.wrapping_mul(40503) & 0xFFFF) as u16;
            for mut f in [
                udp_frame(src, sport, R1, 443),
                tcp_frame(src, sport, R2, 443, TCP_ACK),
                eth_ipv4(&ipv4(src, R1, PROTO_ICMP, &[], &icmp_echo(false, sport, 3))),
            ] {
                assert_eq!(run(&mut n, &mut log, T0, &mut f), Verdict::TranslatedOut);
                verify_checksums(&f);
            }
        }
    }

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
    // ----- port blocks, limits, deterministic NAT -------------------------

    use dplog::Record;

    /// Every record, of any type, as a NatRecord slot.
    #[derive(Default)]
    struct All(Vec<NatRecord>);
    impl All {
        fn f(&mut self) -> AllRecords<impl FnMut(NatRecord) + '_> {
            AllRecords(|r| self.0.push(r))
        }
        /// (natEvent, schema) of every record in order.
        fn kinds(&self) -> Vec<(u8, u16)> {
            self.0
                .iter()
                .map(|r| (event_of(r), r.header().schema_id))
                .collect()
        }
        fn of_event(&self, e: u8) -> Vec<&NatRecord> {
            self.0.iter().filter(|r| event_of(r) == e).collect()
        }
    }

    fn u16_at(r: &NatRecord, at: usize) -> u16 {
        u16::from_ne_bytes([r.slot()[at], r.slot()[at + 1]])
    }
    fn u32_at(r: &NatRecord, at: usize) -> u32 {
        u32::from_ne_bytes(r.slot()[at..at + 4].try_into().unwrap())
    }
    /// natEvent byte of a record by schema (see core/src/record.rs).
    fn event_of(r: &NatRecord) -> u8 {
        let at = match r.header().schema_id {
            dplog::SCHEMA_NAT44_SESSION => 35,
            dplog::record::SCHEMA_NAT_PORT_BLOCK => 30,
            dplog::record::SCHEMA_NAT_ADDRESSES_EXHAUSTED => 20,
            dplog::record::SCHEMA_NAT_PORTS_EXHAUSTED => 21,
            dplog::record::SCHEMA_NAT_QUOTA_EXCEEDED => 28,
            s => panic!("schema {s}"),
        };
        r.slot()[at]
    }
    /// (src_addr, post_nat_src_addr, start, end, num_ports) of a block record.
    fn block_of(r: &NatRecord) -> (u32, u32, u16, u16, u16) {
        assert_eq!(r.header().schema_id, dplog::record::SCHEMA_NAT_PORT_BLOCK);
        (
            u32_at(r, 16),
            u32_at(r, 20),
            u16_at(r, 24),
            u16_at(r, 26),
            u16_at(r, 32),
        )
    }

    fn pba(size: u16, max_blocks: u16, pool: &str) -> Nat44 {
        let mut c = NatConfig::new(vec!["10.0.0.0/8".parse().unwrap()], pool.parse().unwrap());
        c.port_allocation = PortAllocation::PortBlock { size, max_blocks };
        Nat44::new(c).unwrap()
    }

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
            dplog::record::quota_event::MAX_ENTRIES_PER_USER
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
            (u32_at(e[0], 16), e[0].slot()[20]),
            (0xC633_6409, PROTO_UDP)
        );
    }

    #[test]
    fn per_subscriber_session_limit() {
        let mut c = NatConfig::new(
            vec!["10.0.0.0/8".parse().unwrap()],
            "198.51.100.0/28".parse().unwrap(),
        );
        c.max_sessions_per_user = 2;
        let mut n = Nat44::new(c).unwrap();
        let mut log = All::default();
        let verdicts: Vec<Verdict> = (0..3)
            .map(|i| {
                let mut f = udp_frame(H1, 100 + i, R1, 53);
                n.process(T0, LINKTYPE_ETHERNET, &mut f, &mut log.f())
            })
            .collect();
        assert_eq!(
            verdicts,
            vec![
                Verdict::TranslatedOut,
                Verdict::TranslatedOut,
                Verdict::SessionLimit
            ]
        );
        // Existing sessions still pass; other subscribers are not limited.
        let mut f = udp_frame(H1, 100, R1, 53);
        assert_eq!(
            n.process(T0, LINKTYPE_ETHERNET, &mut f, &mut log.f()),
            Verdict::TranslatedOut
        );
        let mut f = udp_frame(H2, 100, R1, 53);
        assert_eq!(
            n.process(T0, LINKTYPE_ETHERNET, &mut f, &mut log.f()),
            Verdict::TranslatedOut
        );
        let q = log.of_event(13);
        assert_eq!(q.len(), 1);
        assert_eq!((u32_at(q[0], 20), u32_at(q[0], 24)), (2, H1));
        // Sessions logged as usual (natEvent 4), the limit record between.
        assert_eq!(log.kinds(), vec![(4, 1), (4, 1), (13, 5), (4, 1)]);
        // After expiry the subscriber may open sessions again.
        let t = T0 + 301 * SEC;
        let mut f = udp_frame(H1, 999, R1, 53);
        assert_eq!(
            n.process(t, LINKTYPE_ETHERNET, &mut f, &mut log.f()),
            Verdict::TranslatedOut
        );
        assert_eq!(n.stats().count(Verdict::SessionLimit), 1);
    }

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

    // ----- ICMP errors, hairpinning, TCP RST, fragments -------------------

    /// An ICMP error of `icmp_type` from `src` to `dst` quoting `quoted`.
    fn icmp_error_frame(src: u32, dst: u32, icmp_type: u8, quoted: &[u8]) -> Vec<u8> {
        let mut m = vec![icmp_type, 3, 0, 0, 0, 0, 0, 0];
        m.extend_from_slice(quoted);
        eth_ipv4(&ipv4(src, dst, PROTO_ICMP, &[], &m))
    }

    #[test]
    fn outbound_icmp_error_translates_the_quoted_packet() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let mut f = udp_frame(H1, 1111, R1, 53);
        run(&mut n, &mut log, T0, &mut f);
        let (ext, ext_port) = src_of(&f);
        // R1's reply (inside form) that H1 answers with port unreachable.
        let reply = ipv4(R1, H1, PROTO_UDP, &[], &udp(53, 1111, b"answer"));
        let mut err = icmp_error_frame(H1, R1, 3, &reply);
        assert_eq!(
            run(&mut n, &mut log, T0 + SEC, &mut err),
            Verdict::IcmpErrorOut
        );
        let p = packet::parse(LINKTYPE_ETHERNET, &err).unwrap();
        assert_eq!((p.ip.src, p.ip.dst), (ext, R1));
        let ip = &err[p.l3_offset..p.l3_end()];
        assert_eq!(internet_checksum(&ip[..20]), 0, "outer IPv4 header");
        assert_eq!(internet_checksum(&ip[20..]), 0, "ICMP message");
        let q = &ip[28..];
        assert_eq!(internet_checksum(&q[..20]), 0, "quoted IPv4 header");
        assert_eq!(u32::from_be_bytes(q[16..20].try_into().unwrap()), ext);
        assert_eq!(u16::from_be_bytes([q[22], q[23]]), ext_port);
        assert_eq!(transport_checksum(R1, ext, 17, &q[20..]), 0, "quoted UDP");
        // Errors do not count as session packets.
        n.finish(T0 + 2 * SEC, &mut log.f());
        assert_eq!(log.events(5)[0].initiator_packets, 1);
        assert_eq!(log.events(5)[0].responder_packets, 0);
    }

    #[test]
    fn outbound_icmp_error_about_tcp_and_echo() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let mut f = tcp_frame(H1, 2222, R1, 80, TCP_SYN);
        run(&mut n, &mut log, T0, &mut f);
        let (ext, ext_port) = src_of(&f);
        // A whole TCP segment quoted (so its checksum is checkable).
        let seg = ipv4(
            R1,
            H1,
            PROTO_TCP,
            &[],
            &tcp(80, 2222, TCP_SYN | TCP_ACK, b""),
        );
        let mut err = icmp_error_frame(H1, R1, 11, &seg);
        assert_eq!(run(&mut n, &mut log, T0, &mut err), Verdict::IcmpErrorOut);
        let p = packet::parse(LINKTYPE_ETHERNET, &err).unwrap();
        let ip = &err[p.l3_offset..p.l3_end()];
        assert_eq!(internet_checksum(&ip[20..]), 0, "ICMP message");
        let q = &ip[28..];
        assert_eq!(u16::from_be_bytes([q[22], q[23]]), ext_port);
        assert_eq!(transport_checksum(R1, ext, 6, &q[20..]), 0, "quoted TCP");
        // Only 8 bytes of TCP quoted (RFC 792 minimum): ports still done.
        let mut err = icmp_error_frame(H1, R1, 3, &seg[..28]);
        assert_eq!(run(&mut n, &mut log, T0, &mut err), Verdict::IcmpErrorOut);
        // Echo: H1 pings, R1's reply comes back, H1 reports it.
        let mut ping = eth_ipv4(&ipv4(H1, R1, PROTO_ICMP, &[], &icmp_echo(false, 77, 1)));
        run(&mut n, &mut log, T0, &mut ping);
        let (_, ext_id) = src_of(&ping);
        let pong = ipv4(R1, H1, PROTO_ICMP, &[], &icmp_echo(true, 77, 1));
        let mut err = icmp_error_frame(H1, R1, 3, &pong);
        assert_eq!(run(&mut n, &mut log, T0, &mut err), Verdict::IcmpErrorOut);
        let p = packet::parse(LINKTYPE_ETHERNET, &err).unwrap();
        let ip = &err[p.l3_offset..p.l3_end()];
        assert_eq!(internet_checksum(&ip[20..]), 0);
        let q = &ip[28..];
        assert_eq!(u16::from_be_bytes([q[24], q[25]]), ext_id);
        assert_eq!(internet_checksum(&q[20..]), 0, "quoted echo checksum");
    }

    #[test]
    fn inbound_and_bad_icmp_errors_are_counted() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let mut f = udp_frame(H1, 1111, R1, 53);
        let orig = f.clone();
        run(&mut n, &mut log, T0, &mut f);
        // A router's time exceeded about H1's packet (inside form): matched.
        let quoted = &orig[14..14 + 28];
        let mut err = icmp_error_frame(R2, H1, 11, quoted);
        let before = err.clone();
        assert_eq!(run(&mut n, &mut log, T0, &mut err), Verdict::IcmpErrorIn);
        assert_eq!(err, before, "inbound packets are left as they are");
        // No session for the quoted flow.
        let other = ipv4(H2, R1, PROTO_UDP, &[], &udp(9, 53, b""));
        let mut err = icmp_error_frame(R2, H2, 3, &other);
        assert_eq!(
            run(&mut n, &mut log, T0, &mut err),
            Verdict::IcmpErrorNoSession
        );
        // Quoting GRE, IP-in-IP, a truncated packet, an error.
        for quoted in [
            ipv4(H1, R1, 47, &[], &[0; 8]),
            ipv4(H1, R1, 4, &[], &[0; 8]),
            quoted[..24].to_vec(),
        ] {
            let mut err = icmp_error_frame(R2, H1, 3, &quoted);
            assert_eq!(
                run(&mut n, &mut log, T0, &mut err),
                Verdict::IcmpErrorBadQuote
            );
        }
        let inner_err = ipv4(H1, R1, PROTO_ICMP, &[], &[11, 0, 0, 0, 0, 0, 0, 0]);
        let mut err = icmp_error_frame(R2, H1, 3, &inner_err);
        assert_eq!(
            run(&mut n, &mut log, T0, &mut err),
            Verdict::IcmpErrorQuotesError
        );
        assert_eq!(n.stats().sessions_created, 1);
    }

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
