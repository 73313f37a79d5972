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
//! [`Sharder::with_hairpin`]). The cost: an inside endpoint that talks to
//! an outside host and hairpins from the same source port gets two
//! external mappings, one per worker; later fragments of a hairpin flow
//! (no ports) go to the sender's worker and find no session; with
//! deterministic NAT (no port slices) hairpinning stays within a worker.
//!
//! Handoff: one `rtrb` wait-free SPSC ring of [`Batch`]es per worker plus a
//! return ring that recycles emptied batches. There is no lock between the
//! dispatcher and a worker, and none between a worker and dplog (each
//! worker owns its own `dplog::LogProducer` ring).

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

/// The RSS stand-in: picks a worker for each packet.
#[derive(Clone, Debug)]
pub struct Sharder {
    inside: Vec<(u32, u32)>,
    workers: usize,
    /// Pool `(network, mask)` and the whole external port range, when
    /// hairpin packets are routed to the owner of their destination port.
    hairpin: Option<((u32, u32), (u16, u16))>,
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
        }
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
    pub fn worker_of(&self, linktype: u32, frame: &[u8]) -> usize {
        if self.workers == 1 {
            return 0;
        }
        let p = match packet::parse(linktype, frame) {
            Ok(p) => p,
            // A frame cut by a snap length still has its addresses.
            Err(_) => match packet::parse_snapped(linktype, frame) {
                Ok(p) => p,
                Err(_) => return 0,
            },
        };
        let dport = match p.transport {
            packet::Transport::Tcp(t) => Some(t.dst_port),
            packet::Transport::Udp(u) => Some(u.dst_port),
            _ => None,
        };
        if let Some(w) = dport
            .filter(|_| self.is_inside(p.ip.src))
            .and_then(|port| self.hairpin_owner(p.ip.dst, port))
        {
            return w;
        }
        self.worker_of_addrs(p.ip.src, p.ip.dst)
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
