//! Multi-worker plumbing: the symmetric shard function that plays the part
//! of the NIC's RSS, the lock-free packet handoff from the dispatcher to
//! each worker, and the live counters every worker publishes.
//!
//! Sharding keeps a subscriber on one worker: when exactly one end of a
//! packet is inside, the worker is chosen from a hash of that inside
//! address; otherwise from a symmetric hash of the address pair
//! (`h(a, b) = h(b, a)`). Both directions of a session therefore reach the
//! same worker (like symmetric RSS), and so do later fragments, which carry
//! no ports, and ICMP errors about the session. Because a subscriber's
//! sessions all live on one worker, its endpoint-independent mappings
//! (RFC 4787 REQ-1), port blocks and session limit are per worker with no
//! sharing at all.
//!
//! Hairpinning (RFC 4787 REQ-9) across workers: a packet from an inside
//! host to a pool address and port goes to the worker that owns that
//! external port (each worker allocates from its own disjoint slice of the
//! port range, see [`crate::nat::worker_port_range`]), because that worker
//! holds the mapping to rewrite the destination with. The hairpin session
//! of the sending host is created there too (with a port of that worker's
//! slice), so the answer, sent by the other inside host to that port,
//! reaches the same worker: both directions of a hairpin flow stay on one
//! worker whatever the two hosts hash to (see
//! [`Sharder::with_hairpin`]). Later fragments of a hairpin datagram
//! carry no ports: the dispatcher ([`Sharder::route`]) remembers the
//! `(src, dst, protocol, IP id)` of each hairpin first fragment with the
//! worker it went to, in a bounded table with the NAT's fragment timeout
//! on capture time (evictions and expiries counted in
//! [`HairpinFragStats`]), and sends the later fragments there; that
//! worker's fragment table rewrites their source and destination
//! addresses. The costs: an inside endpoint that talks to an outside host
//! and hairpins from the same source port gets two external mappings, one
//! per worker (RFC 4787 REQ-1 holds per worker only); a later fragment
//! that arrives before its first, or after its entry was evicted or
//! expired, goes to the sender's worker and is counted
//! `fragment_no_session`; one table look-up per fragment in the
//! dispatcher (none for unfragmented packets); with deterministic NAT (no
//! port slices) hairpinning stays within a worker. The DPDK path has no
//! dispatcher (the NIC's RSS spreads packets over the queues), so none of
//! this routing applies there.
//!
//! Handoff: one `rtrb` wait-free SPSC ring of [`Batch`]es per worker plus a
//! return ring that recycles emptied batches. There is no lock between the
//! dispatcher and a worker, and none between a worker and dplog (each
//! worker owns its own `dplog::LogProducer` ring).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use ipnet::Ipv4Net;

use crate::nat::{NatStats, Verdict};
use crate::packet;

/// Number of packets the dispatcher collects per worker before handing the
/// batch over.
pub const BATCH_PACKETS: usize = 64;

/// murmur3 fmix32 finalizer.
#[inline]
fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// Maps a 32-bit hash onto `0..workers` (Lemire's multiply-shift).
#[inline]
fn reduce(h: u32, workers: usize) -> usize {
    ((u64::from(h) * workers as u64) >> 32) as usize
}

/// The worker that owns inside host `addr` (host order) among `workers`.
/// Used by the dispatcher and by the synthetic generator so that a
/// generated subscriber lands on the same worker the dispatcher would pick.
pub fn worker_of_inside(addr: u32, workers: usize) -> usize {
    if workers <= 1 {
        return 0;
    }
    reduce(fmix32(addr ^ 0x9E37_79B9), workers)
}

/// Counters of the dispatcher's hairpin fragment table (see
/// [`Sharder::route`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct HairpinFragStats {
    /// First fragments of hairpin datagrams remembered (routed to the
    /// owner of their destination port).
    pub tracked: u64,
    /// Later fragments sent to the worker of their first fragment.
    pub routed: u64,
    /// Entries evicted, oldest first, because the table was full.
    pub evicted: u64,
    /// Entries that outlived the fragment timeout (capture time).
    pub expired: u64,
}

/// `(src, dst, protocol, IP id)` of a datagram, host order.
type DatagramKey = (u32, u32, u8, u16);

/// Hairpin first fragments → worker, bounded, FIFO-evicted, each entry
/// living for a fixed timeout of capture time.
#[derive(Clone, Debug)]
struct HairpinFrags {
    /// Key → (worker, expiry ns, serial).
    map: HashMap<DatagramKey, (usize, u64, u64)>,
    /// Insertion order: (key, serial); stale pairs are skipped.
    order: VecDeque<(DatagramKey, u64)>,
    capacity: usize,
    timeout_ns: u64,
    serial: u64,
    stats: HairpinFragStats,
}

impl HairpinFrags {
    fn new(capacity: usize, timeout_ns: u64) -> Self {
        Self {
            map: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
            timeout_ns,
            serial: 0,
            stats: HairpinFragStats::default(),
        }
    }

    fn is_current(&self, key: &DatagramKey, serial: u64) -> bool {
        self.map.get(key).is_some_and(|e| e.2 == serial)
    }

    fn expire(&mut self, now: u64) {
        while let Some(&(key, serial)) = self.order.front() {
            if let Some(&(_, expires, s)) = self.map.get(&key) {
                if s == serial {
                    if expires > now {
                        break;
                    }
                    self.map.remove(&key);
                    self.stats.expired += 1;
                }
            }
            self.order.pop_front();
        }
    }

    fn insert(&mut self, key: DatagramKey, worker: usize, now: u64) {
        if !self.map.contains_key(&key) {
            while self.map.len() >= self.capacity {
                let Some((old, serial)) = self.order.pop_front() else {
                    break;
                };
                if self.is_current(&old, serial) {
                    self.map.remove(&old);
                    self.stats.evicted += 1;
                }
            }
        }
        self.serial += 1;
        let expires = now.saturating_add(self.timeout_ns);
        self.map.insert(key, (worker, expires, self.serial));
        self.order.push_back((key, self.serial));
        self.stats.tracked += 1;
        // Re-inserted keys leave stale pairs behind: keep the queue bounded.
        if self.order.len() > 4 * self.capacity.max(16) {
            let map = &self.map;
            self.order
                .retain(|(k, s)| map.get(k).is_some_and(|e| e.2 == *s));
        }
    }

    fn get(&mut self, key: &DatagramKey) -> Option<usize> {
        let w = self.map.get(key)?.0;
        self.stats.routed += 1;
        Some(w)
    }
}

/// The RSS stand-in: picks a worker for each packet.
#[derive(Clone, Debug)]
pub struct Sharder {
    inside: Vec<(u32, u32)>,
    workers: usize,
    /// Pool `(network, mask)` and the whole external port range, when
    /// hairpin packets are routed to the owner of their destination port.
    hairpin: Option<((u32, u32), (u16, u16))>,
    /// Where the later fragments of hairpin datagrams go ([`Self::route`]).
    frags: HairpinFrags,
}

impl Sharder {
    /// A sharder over `workers` workers (at least 1) for the given inside
    /// prefixes.
    pub fn new(inside: &[Ipv4Net], workers: usize) -> Self {
        Self {
            inside: inside
                .iter()
                .map(|n| (u32::from(n.network()), u32::from(n.netmask())))
                .collect(),
            workers: workers.max(1),
            hairpin: None,
            frags: HairpinFrags::new(
                crate::nat::DEFAULT_FRAGMENT_TABLE_SIZE,
                crate::nat::DEFAULT_FRAGMENT_TIMEOUT.as_nanos() as u64,
            ),
        }
    }

    /// Sizes the hairpin fragment table of [`route`](Self::route):
    /// at most `capacity` datagrams (at least 1; the oldest is evicted and
    /// counted when full), each remembered for `timeout` of capture time.
    /// Defaults: the NAT's own fragment table size and timeout
    /// ([`crate::nat::DEFAULT_FRAGMENT_TABLE_SIZE`], 30 s).
    pub fn with_hairpin_fragments(mut self, capacity: usize, timeout: std::time::Duration) -> Self {
        self.frags = HairpinFrags::new(capacity, timeout.as_nanos() as u64);
        self
    }

    /// The hairpin fragment table's counters.
    pub fn hairpin_fragments(&self) -> HairpinFragStats {
        self.frags.stats
    }

    /// Routes hairpin packets (inside source, destination in `pool`) to the
    /// worker whose slice of `port_range` (as cut by
    /// [`crate::nat::worker_port_range`]) holds the destination port: the
    /// worker that owns the mapping. Not for deterministic NAT, whose
    /// workers share the whole range.
    pub fn with_hairpin(mut self, pool: Ipv4Net, port_range: (u16, u16)) -> Self {
        self.hairpin = Some((
            (u32::from(pool.network()), u32::from(pool.netmask())),
            port_range,
        ));
        self
    }

    /// The worker owning external port `port`, if hairpin routing is on and
    /// `dst` is a pool address.
    fn hairpin_owner(&self, dst: u32, port: u16) -> Option<usize> {
        let ((net, mask), range) = self.hairpin?;
        if dst & mask != net {
            return None;
        }
        (0..self.workers).find(|&w| {
            crate::nat::worker_port_range(range, w, self.workers)
                .is_some_and(|(lo, hi)| (lo..=hi).contains(&port))
        })
    }

    /// Number of workers.
    pub fn workers(&self) -> usize {
        self.workers
    }

    fn is_inside(&self, a: u32) -> bool {
        self.inside.iter().any(|&(net, mask)| a & mask == net)
    }

    /// Worker for a packet from `src` to `dst` (host order). Symmetric:
    /// `worker_of_addrs(a, b) == worker_of_addrs(b, a)`.
    pub fn worker_of_addrs(&self, src: u32, dst: u32) -> usize {
        if self.workers == 1 {
            return 0;
        }
        match (self.is_inside(src), self.is_inside(dst)) {
            (true, false) => worker_of_inside(src, self.workers),
            (false, true) => worker_of_inside(dst, self.workers),
            // Symmetric in (src, dst): XOR commutes.
            _ => reduce(fmix32(src ^ dst), self.workers),
        }
    }

    /// Worker for a captured frame; frames that do not parse as IPv4 go to
    /// worker 0, which counts their verdict.
    ///
    /// Stateless: a later fragment of a hairpin datagram (no ports) goes
    /// to its sender's worker, not to the worker its first fragment went
    /// to; [`route`](Self::route) follows it there.
    pub fn worker_of(&self, linktype: u32, frame: &[u8]) -> usize {
        if self.workers == 1 {
            return 0;
        }
        match Self::parse(linktype, frame) {
            Some(p) => self.pick(&p).0,
            None => 0,
        }
    }

    /// [`worker_of`](Self::worker_of) for a frame captured at `ts_ns`
    /// (ns), which also sends every later fragment of a hairpin datagram
    /// to the worker its first fragment went to (the owner of its
    /// destination port, which created the session the fragments must
    /// find). The first fragment's `(src, dst, protocol, IP id)` is kept
    /// in a bounded table (see
    /// [`with_hairpin_fragments`](Self::with_hairpin_fragments)) until the
    /// timeout passes in capture time; a later fragment not found there
    /// (evicted, expired, or ahead of its first fragment) goes to its
    /// sender's worker, which counts it `fragment_no_session`. Counters:
    /// [`hairpin_fragments`](Self::hairpin_fragments).
    pub fn route(&mut self, ts_ns: u64, linktype: u32, frame: &[u8]) -> usize {
        if self.workers == 1 {
            return 0;
        }
        let Some(p) = Self::parse(linktype, frame) else {
            return 0;
        };
        if self.hairpin.is_none() || !p.ip.is_fragment() {
            return self.pick(&p).0;
        }
        self.frags.expire(ts_ns);
        let key = (p.ip.src, p.ip.dst, p.ip.protocol, p.ip.id);
        if p.ip.is_later_fragment() {
            if let Some(w) = self.frags.get(&key) {
                return w;
            }
            return self.pick(&p).0;
        }
        let (w, hairpin) = self.pick(&p);
        if hairpin {
            self.frags.insert(key, w, ts_ns);
        }
        w
    }

    fn parse(linktype: u32, frame: &[u8]) -> Option<packet::ParsedPacket> {
        match packet::parse(linktype, frame) {
            Ok(p) => Some(p),
            // A frame cut by a snap length still has its addresses.
            Err(_) => packet::parse_snapped(linktype, frame).ok(),
        }
    }

    /// The worker for `p`, and whether it was chosen as the owner of a
    /// hairpin destination port.
    fn pick(&self, p: &packet::ParsedPacket) -> (usize, bool) {
        let dport = match p.transport {
            packet::Transport::Tcp(t) => Some(t.dst_port),
            packet::Transport::Udp(u) => Some(u.dst_port),
            _ => None,
        };
        if let Some(w) = dport
            .filter(|_| self.is_inside(p.ip.src))
            .and_then(|port| self.hairpin_owner(p.ip.dst, port))
        {
            return (w, true);
        }
        (self.worker_of_addrs(p.ip.src, p.ip.dst), false)
    }
}

/// A batch of frames handed from the dispatcher to one worker. Frames are
/// stored back to back in one buffer; the worker translates them in place.
#[derive(Default, Debug)]
pub struct Batch {
    /// `(timestamp ns, link type, start, end)` per frame, into `data`.
    pub frames: Vec<(u64, u32, u32, u32)>,
    /// Frame bytes.
    pub data: Vec<u8>,
    /// Wire length of each frame (the capture's original length), in
    /// `frames` order; above the captured length when a snap length cut
    /// the frame.
    pub wire_lens: Vec<u32>,
}

impl Batch {
    /// An empty batch with room for [`BATCH_PACKETS`] typical frames.
    pub fn new() -> Self {
        Self {
            frames: Vec::with_capacity(BATCH_PACKETS),
            data: Vec::with_capacity(BATCH_PACKETS * 256),
            wire_lens: Vec::with_capacity(BATCH_PACKETS),
        }
    }

    /// Appends a copy of `frame`, captured whole.
    pub fn push(&mut self, ts_ns: u64, linktype: u32, frame: &[u8]) {
        self.push_wire(ts_ns, linktype, frame, frame.len() as u32);
    }

    /// Appends a copy of `frame`, of which `wire_len` bytes were on the
    /// wire (more than `frame.len()` when the capture cut it).
    pub fn push_wire(&mut self, ts_ns: u64, linktype: u32, frame: &[u8], wire_len: u32) {
        let start = self.data.len() as u32;
        self.data.extend_from_slice(frame);
        self.frames
            .push((ts_ns, linktype, start, self.data.len() as u32));
        self.wire_lens.push(wire_len);
    }

    /// Number of frames.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// True when the batch holds no frame.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Empties the batch, keeping its allocations.
    pub fn clear(&mut self) {
        self.frames.clear();
        self.data.clear();
        self.wire_lens.clear();
    }
}

/// What the dispatcher sends a worker.
#[derive(Debug)]
pub enum Handoff {
    /// Frames to translate.
    Batch(Batch),
    /// End of input at this time (ns): delete every session and stop.
    End(u64),
}

const SCALARS: usize = 19;

fn scalars(s: &NatStats) -> [u64; SCALARS] {
    [
        s.packets,
        s.sessions_created,
        s.sessions_deleted,
        s.sessions_expired,
        s.sessions_flushed,
        s.sessions_replaced,
        s.sessions_live,
        s.peak_sessions,
        s.mappings_live,
        s.records_logged,
        s.fragments_tracked,
        s.fragments_evicted,
        s.fragments_expired,
        s.port_blocks_allocated,
        s.port_blocks_released,
        s.port_blocks_live,
        s.limit_events_logged,
        s.limit_events_suppressed,
        s.fragments_duplicate,
    ]
}

fn from_scalars(v: &[u64; SCALARS], s: &mut NatStats) {
    s.packets = v[0];
    s.sessions_created = v[1];
    s.sessions_deleted = v[2];
    s.sessions_expired = v[3];
    s.sessions_flushed = v[4];
    s.sessions_replaced = v[5];
    s.sessions_live = v[6];
    s.peak_sessions = v[7];
    s.mappings_live = v[8];
    s.records_logged = v[9];
    s.fragments_tracked = v[10];
    s.fragments_evicted = v[11];
    s.fragments_expired = v[12];
    s.port_blocks_allocated = v[13];
    s.port_blocks_released = v[14];
    s.port_blocks_live = v[15];
    s.limit_events_logged = v[16];
    s.limit_events_suppressed = v[17];
    s.fragments_duplicate = v[18];
}

/// One worker's published counters: a copy of its [`NatStats`], refreshed
/// by the worker every [`BATCH_PACKETS`]·16 packets and at exit.
///
/// Single writer (the worker), Relaxed stores; readers take Relaxed loads
/// and may see a mix of two refreshes, which is fine for a live view. The
/// exact final values are read after the worker thread is joined (the
/// join is the ordering partner).
pub struct WorkerCounters {
    verdicts: [AtomicU64; Verdict::COUNT],
    scalars: [AtomicU64; SCALARS],
    /// Nanoseconds the worker spent in its packet loop.
    busy_ns: AtomicU64,
}

impl Default for WorkerCounters {
    fn default() -> Self {
        Self {
            verdicts: std::array::from_fn(|_| AtomicU64::new(0)),
            scalars: std::array::from_fn(|_| AtomicU64::new(0)),
            busy_ns: AtomicU64::new(0),
        }
    }
}

impl WorkerCounters {
    /// Publishes `s` (called by the worker only).
    pub fn publish(&self, s: &NatStats) {
        for (a, v) in self.verdicts.iter().zip(s.verdicts.iter()) {
            // Relaxed: single-writer statistic; partner is the reader's
            // Relaxed load (or the thread join for final values).
            a.store(*v, Ordering::Relaxed);
        }
        for (a, v) in self.scalars.iter().zip(scalars(s).iter()) {
            // Relaxed: as above.
            a.store(*v, Ordering::Relaxed);
        }
    }

    /// Records the time spent in the packet loop (called by the worker).
    pub fn set_busy_ns(&self, ns: u64) {
        // Relaxed: single-writer statistic, partner is `busy_ns()`.
        self.busy_ns.store(ns, Ordering::Relaxed);
    }

    /// Nanoseconds the worker has spent in its packet loop so far.
    pub fn busy_ns(&self) -> u64 {
        // Relaxed: partner is `set_busy_ns`.
        self.busy_ns.load(Ordering::Relaxed)
    }

    /// A copy of the last published counters.
    pub fn snapshot(&self) -> NatStats {
        let mut s = NatStats::default();
        for (v, a) in s.verdicts.iter_mut().zip(self.verdicts.iter()) {
            // Relaxed: partner is `publish`.
            *v = a.load(Ordering::Relaxed);
        }
        let mut v = [0u64; SCALARS];
        for (x, a) in v.iter_mut().zip(self.scalars.iter()) {
            // Relaxed: partner is `publish`.
            *x = a.load(Ordering::Relaxed);
        }
        from_scalars(&v, &mut s);
        s
    }
}

/// The live counters of every worker of a run, readable from any thread
/// while the run goes on (see [`crate::app::run_live`]).
pub struct LiveCounters {
    workers: Vec<WorkerCounters>,
}

impl LiveCounters {
    /// Counters for `workers` workers (at least 1).
    pub fn new(workers: usize) -> Self {
        Self {
            workers: (0..workers.max(1))
                .map(|_| WorkerCounters::default())
                .collect(),
        }
    }

    /// Number of workers.
    pub fn len(&self) -> usize {
        self.workers.len()
    }

    /// Always false: there is at least one worker.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Worker `i`'s counters.
    pub fn worker(&self, i: usize) -> Option<&WorkerCounters> {
        self.workers.get(i)
    }

    /// Every worker's last published counters.
    pub fn per_worker(&self) -> Vec<NatStats> {
        self.workers.iter().map(WorkerCounters::snapshot).collect()
    }

    /// The sum over workers (`peak_sessions` is the sum of per-worker
    /// peaks, an upper bound of the true peak).
    pub fn total(&self) -> NatStats {
        sum_stats(&self.per_worker())
    }
}

/// Adds up per-worker statistics (`peak_sessions` is summed too).
pub fn sum_stats(all: &[NatStats]) -> NatStats {
    let mut t = NatStats::default();
    let mut acc = [0u64; SCALARS];
    for s in all {
        for (a, v) in t.verdicts.iter_mut().zip(s.verdicts.iter()) {
            *a += v;
        }
        for (a, v) in acc.iter_mut().zip(scalars(s).iter()) {
            *a += v;
        }
    }
    from_scalars(&acc, &mut t);
    t
}

/// Packets translated (every verdict with [`Verdict::is_translated`]).
pub fn translated(s: &NatStats) -> u64 {
    Verdict::all()
        .filter(|v| v.is_translated())
        .map(|v| s.count(v))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_is_symmetric_and_subscriber_affine() {
        let s = Sharder::new(&["10.0.0.0/8".parse().unwrap()], 4);
        let mut seen = [0u32; 4];
        for i in 0..4000u32 {
            let inside = 0x0A00_0001 + i;
            let r1 = 0xCB00_7100 + (i % 256);
            let r2 = 0xC612_0000 + i;
            let w = s.worker_of_addrs(inside, r1);
            assert_eq!(w, s.worker_of_addrs(r1, inside));
            assert_eq!(w, s.worker_of_addrs(inside, r2), "same subscriber");
            assert_eq!(w, worker_of_inside(inside, 4));
            seen[w] += 1;
            // Neither end inside: still symmetric.
            assert_eq!(s.worker_of_addrs(r1, r2), s.worker_of_addrs(r2, r1));
        }
        // Spread: every worker gets 1000 ± 15 %.
        for n in seen {
            assert!((850..=1150).contains(&n), "{seen:?}");
        }
        assert_eq!(Sharder::new(&[], 1).worker_of(1, &[]), 0);
    }

    #[test]
    fn hairpin_fragments_follow_their_first_fragment_bounded_and_timed() {
        use crate::packet::build::{ether, ipv4_frag, udp};
        use crate::packet::LINKTYPE_ETHERNET as ETH;
        const SEC: u64 = 1_000_000_000;
        let pool: Ipv4Net = "198.51.100.0/28".parse().unwrap();
        let range = (1024, 65535);
        let mut s = Sharder::new(&["10.0.0.0/8".parse().unwrap()], 2)
            .with_hairpin(pool, range)
            .with_hairpin_fragments(2, std::time::Duration::from_secs(30));
        let h1 = 0x0A00_0001u32;
        let w1 = worker_of_inside(h1, 2);
        // A destination port in the other worker's slice.
        let (lo, _) = crate::nat::worker_port_range(range, 1 - w1, 2).unwrap();
        let e = u32::from(pool.network()) + 3;
        let first = |id| {
            ether(
                &[],
                0x0800,
                &ipv4_frag(h1, e, 17, &[], &udp(6000, lo, &[0; 16]), id, 0x2000),
            )
        };
        let later = |id| ether(&[], 0x0800, &ipv4_frag(h1, e, 17, &[], &[0; 16], id, 3));
        assert_eq!(s.route(SEC, ETH, &first(1)), 1 - w1, "to the port's owner");
        // Stateless routing sends the later fragment to the sender's worker.
        assert_eq!(s.worker_of(ETH, &later(1)), w1);
        assert_eq!(s.route(SEC, ETH, &later(1)), 1 - w1, "follows its first");
        assert_eq!(s.route(SEC, ETH, &later(2)), w1, "unknown datagram");
        // Full (2 entries): the oldest is evicted.
        s.route(2 * SEC, ETH, &first(2));
        s.route(3 * SEC, ETH, &first(3));
        assert_eq!(s.route(3 * SEC, ETH, &later(1)), w1, "evicted");
        assert_eq!(s.route(3 * SEC, ETH, &later(2)), 1 - w1);
        // 30 s of capture time after its first fragment, an entry is gone.
        assert_eq!(s.route(32 * SEC, ETH, &later(2)), w1, "expired");
        assert_eq!(s.route(32 * SEC, ETH, &later(3)), 1 - w1);
        assert_eq!(s.route(33 * SEC, ETH, &later(3)), w1, "expired");
        // Non-hairpin fragments are not remembered.
        let out = |off| {
            ether(
                &[],
                0x0800,
                &ipv4_frag(h1, 0xCB00_7101, 17, &[], &udp(6000, lo, &[0; 16]), 9, off),
            )
        };
        assert_eq!(s.route(34 * SEC, ETH, &out(0x2000)), w1);
        assert_eq!(s.route(34 * SEC, ETH, &out(3)), w1);
        assert_eq!(
            s.hairpin_fragments(),
            HairpinFragStats {
                tracked: 3,
                routed: 3,
                evicted: 1,
                expired: 2,
            }
        );
    }

    #[test]
    fn counters_roundtrip_and_sum() {
        let mut a = NatStats {
            packets: 10,
            sessions_created: 3,
            ..Default::default()
        };
        a.verdicts[Verdict::TranslatedOut.index()] = 7;
        a.verdicts[Verdict::Multicast.index()] = 3;
        let live = LiveCounters::new(2);
        live.worker(0).unwrap().publish(&a);
        live.worker(1).unwrap().publish(&a);
        assert_eq!(live.per_worker()[1], a);
        let t = live.total();
        assert_eq!((t.packets, t.sessions_created), (20, 6));
        assert_eq!(t.count(Verdict::TranslatedOut), 14);
        assert_eq!(translated(&t), 14);
    }
}
