//! The worker threads of a run: each owns a [`Nat44`] and a dplog
//! producer and runs a [`Pipeline`] over its input: the batches the
//! dispatcher hands it (a capture, or the synthetic mix sharded), or the
//! synthetic mix it generates itself or had preloaded.

use std::time::Instant;

use crate::ringlog::NatProducer;

use super::{stop_requested, AppConfig};
use crate::nat::{Nat44, NatStats};
use crate::pipeline::Pipeline;
use crate::ringlog::NAT_BURST;
use crate::signals::SessionTally;
use crate::synthetic::{Synthetic, SYNTHETIC_FRAME_LEN};
use crate::workers::{Batch, HairpinLinks, Handoff, Sharder, WorkerCounters, BATCH_PACKETS};

/// Publish counters every this many packets.
const PUBLISH_EVERY: u64 = (BATCH_PACKETS as u64) * 16;

/// A worker's dplog producer; `None` with logging off.
pub(super) type Recs = Option<NatProducer>;

/// A worker's counters, published for the live view every
/// [`PUBLISH_EVERY`] packets and at exit, with the time spent in its
/// packet loop.
struct Publisher<'c> {
    counters: &'c WorkerCounters,
    t0: Instant,
    since: u64,
}

impl<'c> Publisher<'c> {
    /// Starts the busy clock.
    fn start(counters: &'c WorkerCounters) -> Self {
        Self {
            counters,
            t0: Instant::now(),
            since: 0,
        }
    }

    /// `packets` more were processed; publishes `stats` when due.
    #[inline]
    fn add(&mut self, packets: u64, stats: &NatStats) {
        self.since += packets;
        if self.since >= PUBLISH_EVERY {
            self.since = 0;
            self.counters.publish(stats);
            self.counters
                .set_busy_ns(self.t0.elapsed().as_nanos() as u64);
        }
    }

    /// End of the packet loop: publishes `stats`; returns the busy time, ns.
    fn done(&self, stats: &NatStats) -> u64 {
        let busy = self.t0.elapsed().as_nanos() as u64;
        self.counters.publish(stats);
        self.counters.set_busy_ns(busy);
        busy
    }
}

/// A worker fed by the dispatcher: translates each [`Batch`] from `rx`
/// (one rx burst) through its [`Pipeline`] and returns it, emptied, on
/// `ret`; hands hairpin packets to their owners through `links`. At
/// [`Handoff::End`] (or when the dispatcher is gone) every session is
/// deleted and logged. Returns the engine's counters, the busy time (ns)
/// and the records dropped at a stop.
pub(super) fn handoff_worker(
    cfg: &AppConfig,
    nat: Nat44,
    mut producer: Recs,
    // The worker's published counters and its session tally.
    (counters, tally): (&WorkerCounters, Option<&SessionTally>),
    mut rx: rtrb::Consumer<Handoff>,
    mut ret: rtrb::Producer<Batch>,
    links: HairpinLinks,
) -> (NatStats, u64, u64) {
    let log = cfg.ring_log(producer.as_mut()).with_tally(tally);
    let mut pipe = Pipeline::new(nat, log, links);
    let mut publisher = Publisher::start(counters);
    // The capture path delivers nothing: a hairpin is translated in place
    // and counted.
    let mut no_output = |_: &[u8]| {};
    let end = loop {
        // Stage two of hairpins other workers handed over.
        pipe.drain(&mut no_output);
        match rx.pop() {
            Ok(Handoff::Batch(mut b)) => {
                pipe.burst(&mut b);
                publisher.add(b.len() as u64, pipe.stats());
                let _ = ret.push(b);
            }
            Ok(Handoff::End(ts)) => break ts,
            Err(_) => {
                // The dispatcher may push its last batches and the end
                // mark, and drop its side, between the empty pop above and
                // this check: only a ring that is empty after the drop is
                // over.
                if rx.is_abandoned() && rx.is_empty() {
                    break pipe.nat().now_ns();
                }
                // Idle: what the last bursts logged goes out now.
                pipe.idle();
                std::thread::yield_now();
            }
        }
    };
    pipe.close(&mut no_output);
    let (stats, dropped_at_stop) = pipe.finish(end);
    let busy = publisher.done(&stats);
    (stats, busy, dropped_at_stop)
}

/// Frames of a synthetic worker: its own generator (one worker), or its
/// share of the stream preloaded into an arena of
/// [`SYNTHETIC_FRAME_LEN`]-byte slots with `(timestamp, length)` each, and
/// the time of the stream's last packet (when every worker ends).
pub(super) enum SynSource {
    Live(Box<Synthetic>),
    Preloaded(Vec<u8>, Vec<(u64, u8)>, u64),
}

/// Per-worker preloaded frames: arena of fixed-stride slots and
/// `(timestamp, length)` of each.
pub(super) type Shards = Vec<(Vec<u8>, Vec<(u64, u8)>)>;

/// Generates every remaining frame of `gen` into arenas (fixed stride),
/// one per worker of `sharder` (one in all without it), and the last
/// frame's timestamp.
pub(super) fn preload_shards(gen: &mut Synthetic, sharder: Option<&Sharder>) -> (Shards, u64) {
    let n = sharder.map_or(1, Sharder::workers);
    let mut out: Shards = (0..n).map(|_| Default::default()).collect();
    let mut end = 0;
    while let Some((ts, f)) = gen.next_frame() {
        end = ts;
        let w = sharder.map_or(0, |s| s.worker_of(crate::packet::LINKTYPE_ETHERNET, f));
        let (arena, meta) = &mut out[w];
        let mut slot = [0u8; SYNTHETIC_FRAME_LEN];
        slot[..f.len()].copy_from_slice(f);
        arena.extend_from_slice(&slot);
        meta.push((ts, f.len() as u8));
    }
    (out, end)
}

/// A worker over the synthetic mix, its own generator (one worker) or its
/// preloaded share: one packet at a time through its [`Pipeline`], a
/// burst ending every [`NAT_BURST`] packets as a DPDK worker's rx burst
/// does; a stop request is seen before every packet. Returns as
/// [`handoff_worker`].
pub(super) fn synthetic_worker(
    cfg: &AppConfig,
    nat: Nat44,
    mut producer: Recs,
    counters: &WorkerCounters,
    tally: Option<&SessionTally>,
    src: SynSource,
) -> (NatStats, u64, u64) {
    let log = cfg.ring_log(producer.as_mut()).with_tally(tally);
    // No peer: the synthetic mix is sharded by inside host and never
    // hairpins across workers.
    let mut pipe = Pipeline::new(nat, log, HairpinLinks::alone());
    let mut publisher = Publisher::start(counters);
    let mut packets = 0u64;
    // Called after every packet.
    let mut tick = |pipe: &mut Pipeline<'_>| {
        packets += 1;
        if packets % NAT_BURST as u64 == 0 {
            pipe.end_burst();
        }
        publisher.add(1, pipe.stats());
    };
    let mut end = 0;
    match src {
        SynSource::Preloaded(mut arena, meta, stream_end) => {
            end = stream_end;
            for (frame, &(ts, len)) in arena.chunks_exact_mut(SYNTHETIC_FRAME_LEN).zip(meta.iter())
            {
                if stop_requested() {
                    break;
                }
                let frame = &mut frame[..usize::from(len)];
                let wire_len = frame.len();
                pipe.packet(ts, crate::packet::LINKTYPE_ETHERNET, frame, wire_len);
                tick(&mut pipe);
            }
        }
        SynSource::Live(mut gen) => {
            while let Some((ts, frame)) = gen.next_frame() {
                if stop_requested() {
                    break;
                }
                let wire_len = frame.len();
                pipe.packet(ts, crate::packet::LINKTYPE_ETHERNET, frame, wire_len);
                tick(&mut pipe);
            }
        }
    }
    // Every worker ends at the stream's last packet (as `Handoff::End`),
    // or at its own last packet when stopped early.
    let now = pipe.nat().now_ns();
    let end = if stop_requested() { now } else { end.max(now) };
    let (stats, dropped_at_stop) = pipe.finish(end);
    let busy = publisher.done(&stats);
    (stats, busy, dropped_at_stop)
}
