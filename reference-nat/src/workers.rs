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
//! Hairpinning (RFC 4787 REQ-9) across workers is two-stage, as VPP's
//! NAT44-ED hands a packet between threads: a packet from an inside host
//! to a pool address and port goes, like any packet of that host, to the
//! host's own worker, which translates the source with the host's one
//! endpoint-independent mapping (REQ-1 holds across workers: the same
//! external address and port as the host's traffic to the outside) and
//! creates or refreshes the sender's session there, logged once. If the
//! destination pool port belongs to another worker (the worker whose
//! slice of the port range holds it, see [`crate::nat::worker_port_range`];
//! with deterministic NAT, RFC 7422, the worker of the inside host the
//! mapping reverses to), the packet gets [`Verdict::HairpinHandoff`] and
//! goes, source translated, through a per-(worker pair) SPSC ring
//! ([`HairpinLinks`]) to that owner, which translates the destination
//! ([`Nat44::hairpin_in`]) with its mapping and emits it. Later fragments
//! (no ports) reach the sender's worker by the inside-source shard, follow
//! their first fragment to the same owner (the sender's fragment table
//! remembers it) and get the destination address their first fragment
//! got (the owner's table). Within one worker nothing changes: the engine
//! translates both ends at once. A hairpin to a pool port nobody holds
//! gets the sender's session either way (its mapping is allocated before
//! the destination is looked up, as the two-stage path must), then is
//! dropped ([`Verdict::HairpinNoMapping`], here or at the owner), so the
//! sessions and records do not depend on the worker count;
//! [`NatStats::outcomes`] resolves the handoffs so the verdict counts do
//! not either.
//!
//! The costs: a hairpin packet to another worker's port is copied once
//! into a batch and crosses one more ring (one push per peer per input
//! batch); an owner holds a handed-over packet until its own input has
//! reached the packet's capture time, so a capture replays in capture
//! order (bounded, see [`HAIRPIN_HOLD_PACKETS`]); a worker waiting on a
//! full ring to a peer keeps taking its own inbound hairpin rings, so the
//! wait is lossless and cannot deadlock. The per-packet path pays nothing
//! for this outside the existing "destination in the pool" branch. The
//! DPDK path uses the same handoff between its queue workers (the frame is
//! copied into the batch, its mbuf freed, and the owner sends it on its
//! own Tx queue in a fresh mbuf); there the NIC decides which queue a
//! host's packets reach, so one endpoint keeps one mapping only if they
//! all reach one queue (as with the dispatcher's inside-source shard).
//!
//! Why two stages: routing a hairpin packet straight to the port's owner
//! would give the sender a second mapping on the owner's worker, and later
//! fragments, which carry no ports, would not follow.
//!
//! Handoff: one `rtrb` wait-free SPSC ring of [`Batch`]es per worker plus a
//! return ring that recycles emptied batches. There is no lock between the
//! dispatcher and a worker, and none between a worker and dplog (each
//! worker owns its own `dplog::LogProducer` ring).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use ipnet::Ipv4Net;

use crate::nat::{Nat44, NatStats, Verdict};
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
        }
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
        match Self::parse(linktype, frame) {
            Some(p) => self.pick(&p),
            None => 0,
        }
    }

    fn parse(linktype: u32, frame: &[u8]) -> Option<packet::ParsedPacket> {
        match packet::parse(linktype, frame) {
            Ok(p) => Some(p),
            // A frame cut by a snap length still has its addresses.
            Err(_) => packet::parse_snapped(linktype, frame).ok(),
        }
    }

    /// The worker for `p`.
    fn pick(&self, p: &packet::ParsedPacket) -> usize {
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

/// To one peer: (ring to it, its return ring of emptied batches, the
/// batch being filled).
type OutLink = (rtrb::Producer<Batch>, rtrb::Consumer<Batch>, Batch);

/// Most handed-over packets a worker holds back waiting for its own input
/// to reach their capture time (see [`HairpinLinks`]); beyond, the oldest
/// are translated at once.
pub const HAIRPIN_HOLD_PACKETS: usize = 4096;

/// One worker's end of the hairpin handoff mesh: an `rtrb` SPSC ring of
/// [`Batch`]es to every other worker (with a return ring that recycles
/// emptied batches), and one from every other worker. See the module
/// documentation: a worker that translated the source of a packet to
/// another worker's pool port ([`Verdict::HairpinHandoff`]) stages it
/// here and sends its staged batches once per input batch; the owner
/// translates the destination ([`Nat44::hairpin_in`]).
///
/// Order: the owner translates a handed-over packet once its own input
/// has reached the packet's capture time ([`set_clock`](Self::set_clock)),
/// so a capture replays as it was captured (the mapping a hairpin packet
/// needs was created by an earlier packet of the owner's own input even
/// when the sender's worker ran ahead). Held packets are bounded by
/// [`HAIRPIN_HOLD_PACKETS`] (beyond, the oldest go at once) and all go at
/// the end of input. Packets with the same capture time as one of the
/// owner's own may go before or after it.
///
/// Deadlock freedom: a worker waiting for room in a full ring to a peer
/// keeps taking packets off its own inbound rings (into its hold; stage
/// two never hands a packet on), so two workers sending to each other both
/// progress; nothing is dropped for a full ring (lossless, as dplog's
/// `block` policy). A batch for a peer that is gone (only if its thread
/// panicked) is dropped and counted in [`lost`](Self::lost).
pub struct HairpinLinks {
    /// Per worker index: (ring to it, its return ring, batch being
    /// filled); `None` for this worker itself and after
    /// [`close`](Self::close).
    out: Vec<Option<OutLink>>,
    /// From each other worker: (ring from it, return ring to it).
    inbound: Vec<(rtrb::Consumer<Batch>, rtrb::Producer<Batch>)>,
    /// Handed-over batches not yet translated: (batch, frames done,
    /// inbound index to return it to).
    held: VecDeque<(Batch, usize, usize)>,
    held_frames: usize,
    clock: u64,
    lost: u64,
}

impl std::fmt::Debug for HairpinLinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HairpinLinks")
            .field("peers", &self.out.iter().filter(|l| l.is_some()).count())
            .field("inbound", &self.inbound.len())
            .field("held", &self.held.len())
            .field("held_frames", &self.held_frames)
            .field("clock", &self.clock)
            .field("lost", &self.lost)
            .finish_non_exhaustive()
    }
}

impl HairpinLinks {
    /// The links of `workers` workers, fully meshed with rings of
    /// `capacity` batches (at least 1); element `i` belongs to worker `i`.
    pub fn mesh(workers: usize, capacity: usize) -> Vec<HairpinLinks> {
        let n = workers.max(1);
        let cap = capacity.max(1);
        let mut links: Vec<HairpinLinks> = (0..n)
            .map(|_| HairpinLinks {
                out: (0..n).map(|_| None).collect(),
                inbound: Vec::new(),
                held: VecDeque::new(),
                held_frames: 0,
                clock: 0,
                lost: 0,
            })
            .collect();
        for from in 0..n {
            for to in (0..n).filter(|&to| to != from) {
                let (tx, rx) = rtrb::RingBuffer::<Batch>::new(cap);
                let (ret_tx, ret_rx) = rtrb::RingBuffer::<Batch>::new(cap + 2);
                links[from].out[to] = Some((tx, ret_rx, Batch::new()));
                links[to].inbound.push((rx, ret_tx));
            }
        }
        links
    }

    /// The links of a lone worker: no peer to hand a packet to or take one
    /// from (what [`mesh`](Self::mesh) gives for one worker).
    pub fn alone() -> HairpinLinks {
        Self::mesh(1, 1)
            .pop()
            .expect("a mesh of one worker has one link set")
    }

    /// Stages a copy of `frame` (`wire_len` bytes on the wire, captured
    /// at `ts_ns` with `linktype`) for worker `to`. Ignored when `to` is
    /// this worker or unknown (a caller bug).
    pub fn stage(&mut self, to: usize, ts_ns: u64, linktype: u32, frame: &[u8], wire_len: u32) {
        if let Some(Some((_, _, b))) = self.out.get_mut(to) {
            b.push_wire(ts_ns, linktype, frame, wire_len);
        }
    }

    /// The capture time (ns) this worker's own input has reached:
    /// handed-over packets up to it are translated by
    /// [`drain`](Self::drain).
    pub fn set_clock(&mut self, ts_ns: u64) {
        self.clock = self.clock.max(ts_ns);
    }

    /// Takes every batch off the inbound rings and translates the
    /// destination ([`Nat44::hairpin_in`]) of each held packet captured
    /// at or before the clock; returns the number translated. (The
    /// capture path does not emit packets: they are translated in place
    /// and counted.)
    pub fn drain(&mut self, nat: &mut Nat44) -> usize {
        self.drain_with(nat, &mut |_| {})
    }

    /// [`drain`](Self::drain), handing each frame translated for delivery
    /// to `emit` (the DPDK path sends it on this worker's Tx queue).
    pub fn drain_with(&mut self, nat: &mut Nat44, emit: &mut impl FnMut(&[u8])) -> usize {
        self.take_inbound();
        self.translate_held(nat, false, emit)
    }

    /// Moves every inbound batch into the hold; returns how many.
    fn take_inbound(&mut self) -> usize {
        let mut n = 0;
        for (i, (rx, _)) in self.inbound.iter_mut().enumerate() {
            while let Ok(b) = rx.pop() {
                self.held_frames += b.len();
                self.held.push_back((b, 0, i));
                n += 1;
            }
        }
        n
    }

    /// Translates held packets up to the clock (all with `all`, the
    /// oldest beyond the hold bound); recycles finished batches.
    fn translate_held(
        &mut self,
        nat: &mut Nat44,
        all: bool,
        emit: &mut impl FnMut(&[u8]),
    ) -> usize {
        let mut n = 0;
        let mut k = 0;
        while k < self.held.len() {
            let (b, done, _) = &mut self.held[k];
            let Batch {
                frames,
                data,
                wire_lens,
            } = b;
            while let Some(&(ts, lt, start, end)) = frames.get(*done) {
                let force = all || self.held_frames > HAIRPIN_HOLD_PACKETS;
                if ts > self.clock && !force {
                    break;
                }
                if let Some(f) = data.get_mut(start as usize..end as usize) {
                    let wire = wire_lens.get(*done).map_or(f.len(), |&w| w as usize);
                    if nat.hairpin_in(ts, lt, f, wire).is_translated() {
                        emit(f);
                    }
                }
                *done += 1;
                n += 1;
                self.held_frames -= 1;
            }
            if *done >= frames.len() {
                if let Some((mut b, _, from)) = self.held.remove(k) {
                    b.clear();
                    if let Some((_, ret)) = self.inbound.get_mut(from) {
                        let _ = ret.push(b);
                    }
                }
            } else {
                k += 1;
            }
        }
        n
    }

    /// Sends every non-empty staged batch to its worker, waiting while a
    /// ring is full and taking the inbound rings into the hold meanwhile.
    pub fn send(&mut self) {
        for to in 0..self.out.len() {
            let Some((_, ret, b)) = self.out[to].as_mut() else {
                continue;
            };
            if b.is_empty() {
                continue;
            }
            let mut fresh = ret.pop().unwrap_or_default();
            fresh.clear();
            let mut full = std::mem::replace(b, fresh);
            let mut idle = 0u32;
            while let Some((tx, _, _)) = self.out[to].as_mut() {
                match tx.push(full) {
                    Ok(()) => break,
                    Err(rtrb::PushError::Full(back)) => {
                        if tx.is_abandoned() {
                            self.lost += back.len() as u64;
                            break;
                        }
                        full = back;
                        // Wait for room, keeping our own inbound rings
                        // moving (the peer may be waiting on us).
                        if self.take_inbound() == 0 {
                            idle_wait(&mut idle);
                        } else {
                            idle = 0;
                        }
                    }
                }
            }
        }
    }

    /// End of input: sends what is staged, closes the rings to the other
    /// workers, then takes the inbound rings until every other worker has
    /// closed its ring to this one, and translates everything held. Call
    /// before [`Nat44::finish`] (stage two needs the mappings).
    pub fn close(&mut self, nat: &mut Nat44) {
        self.close_with(nat, &mut |_| {});
    }

    /// [`close`](Self::close), handing each frame translated for delivery
    /// to `emit`.
    pub fn close_with(&mut self, nat: &mut Nat44, emit: &mut impl FnMut(&[u8])) {
        self.send();
        self.out.iter_mut().for_each(|o| *o = None);
        let mut idle = 0u32;
        loop {
            let closed = self.inbound.iter().all(|(rx, _)| rx.is_abandoned());
            let n = self.take_inbound();
            if closed {
                break;
            }
            if n == 0 {
                idle_wait(&mut idle);
            } else {
                idle = 0;
            }
        }
        self.translate_held(nat, true, emit);
    }

    /// Packets dropped because the worker they were for was gone.
    pub fn lost(&self) -> u64 {
        self.lost
    }
}

/// One step of waiting on a peer worker: a yield for the first 256
/// steps, then sleeps of 50 µs doubling to 1 ms (a worker that finished
/// its input early waits for the others without burning its CPU in
/// `sched_yield`, as dplog's own blocked producer).
fn idle_wait(steps: &mut u32) {
    *steps = steps.saturating_add(1);
    if *steps <= 256 {
        std::thread::yield_now();
    } else {
        let us = (50u64 << (*steps - 257).min(5)).min(1000);
        std::thread::sleep(std::time::Duration::from_micros(us));
    }
}

const SCALARS: usize = 24;

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
        s.hairpin_in_received,
        s.hairpin_in_delivered,
        s.hairpin_in_dropped,
        s.hairpin_in_fragments_delivered,
        s.hairpin_in_fragments_dropped,
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
    s.hairpin_in_received = v[19];
    s.hairpin_in_delivered = v[20];
    s.hairpin_in_dropped = v[21];
    s.hairpin_in_fragments_delivered = v[22];
    s.hairpin_in_fragments_dropped = v[23];
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

impl std::fmt::Debug for WorkerCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The documented Relaxed reads of `snapshot` and `busy_ns`.
        f.debug_struct("WorkerCounters")
            .field("stats", &self.snapshot())
            .field("busy_ns", &self.busy_ns())
            .finish()
    }
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
#[derive(Debug)]
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
