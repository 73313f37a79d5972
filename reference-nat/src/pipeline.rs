//! The forwarding pipeline every worker runs, whatever its input: packets
//! in → [`Nat44`] → verdicts out, the records to the worker's dplog ring
//! ([`RingLog`]), hairpin packets for another worker's pool port to that
//! worker ([`HairpinLinks`]).
//!
//! Only the input and the output differ between the run loops, and a
//! [`Burst`] is that difference: a capture or synthetic batch handed over
//! by the dispatcher ([`Batch`]: frames in memory, dropped after their
//! verdict) or a DPDK Rx burst (mbufs, the translated ones transmitted,
//! the others freed). A worker's loop is:
//!
//! 1. [`Pipeline::drain`]: translate the destination of the hairpin
//!    packets other workers handed over, up to this worker's input time;
//! 2. take a burst from its input and [`Pipeline::burst`] it (or, for a
//!    packet at a time, [`Pipeline::packet`] then [`Pipeline::end_burst`]
//!    every [`NAT_BURST`](crate::ringlog::NAT_BURST) packets), or
//!    [`Pipeline::idle`] when there is none;
//! 3. at the end of its input, [`Pipeline::close`] (the last handoffs) and
//!    [`Pipeline::finish`] (every session deleted and logged).
//!
//! The per-packet path is generic over the [`Burst`] (static dispatch, no
//! call through a vtable) and allocates nothing of its own: a hairpin
//! packet for another worker is copied into the batch staged for that
//! worker, whose buffers are recycled.

use crate::nat::{Nat44, NatStats, Verdict};
use crate::ringlog::RingLog;
use crate::workers::{Batch, HairpinLinks};

/// One received packet of a [`Burst`].
#[derive(Debug)]
pub struct Frame<'a> {
    /// Capture or receive time, nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// pcap link type of `data` (`LINKTYPE_ETHERNET` for DPDK).
    pub linktype: u32,
    /// The frame as captured; the NAT rewrites it in place.
    pub data: &'a mut [u8],
    /// Its length on the wire (at least `data.len()`; more when a snap
    /// length cut it, see [`Nat44::process_snapped`]).
    pub wire_len: usize,
}

/// A burst of received packets and what becomes of them: the input and
/// output side of a [`Pipeline`].
///
/// [`Pipeline::burst`] takes the packets in order, each once: `frame(i)`,
/// then, unless it was `None`, `verdict(i, v)` after the frame's borrow
/// ended. An implementation may rely on that order (the DPDK one frees or
/// transmits packet `i`'s mbuf at its verdict).
pub trait Burst {
    /// Packets in the burst.
    fn count(&self) -> usize;

    /// Packet `i` (`i < count()`), or `None` to skip it (no verdict, not
    /// counted).
    fn frame(&mut self, i: usize) -> Option<Frame<'_>>;

    /// The verdict of packet `i`, given right after the NAT processed it
    /// (the [`Frame`] no longer borrowed). The default does nothing: the
    /// frames go with the burst.
    #[inline]
    fn verdict(&mut self, i: usize, v: Verdict) {
        let _ = (i, v);
    }
}

/// A batch of frames handed over by the dispatcher (a capture, or the
/// synthetic mix sharded): translated in place, then recycled.
impl Burst for Batch {
    #[inline]
    fn count(&self) -> usize {
        self.frames.len()
    }

    #[inline]
    fn frame(&mut self, i: usize) -> Option<Frame<'_>> {
        let &(ts_ns, linktype, start, end) = self.frames.get(i)?;
        let data = self.data.get_mut(start as usize..end as usize)?;
        let wire_len = self.wire_lens.get(i).map_or(data.len(), |&w| w as usize);
        Some(Frame {
            ts_ns,
            linktype,
            data,
            wire_len,
        })
    }
}

/// One worker's NAT engine, its record sink and its ends of the hairpin
/// handoff mesh, run over bursts of packets. See the module
/// documentation for the loop around it.
#[derive(Debug)]
pub struct Pipeline<'a> {
    nat: Nat44,
    log: RingLog<'a>,
    links: HairpinLinks,
}

impl<'a> Pipeline<'a> {
    /// A pipeline over `nat` logging into `log`, handing hairpins to the
    /// other workers through `links` (a lone worker's are
    /// [`HairpinLinks::alone`]).
    pub fn new(nat: Nat44, log: RingLog<'a>, links: HairpinLinks) -> Self {
        Self { nat, log, links }
    }

    /// The engine (its counters, its clock).
    pub fn nat(&self) -> &Nat44 {
        &self.nat
    }

    /// The engine's counters so far.
    pub fn stats(&self) -> &NatStats {
        self.nat.stats()
    }

    /// One packet: translated in place by the NAT (a frame cut by the snap
    /// length is translated when its headers were captured, else counted
    /// `snapped`), its records logged; the input time of the hairpin
    /// handoff advanced to it, and a packet for another worker's pool port
    /// ([`Verdict::HairpinHandoff`]) staged for that worker (copied; it is
    /// sent at [`end_burst`](Self::end_burst)).
    #[inline]
    pub fn packet(
        &mut self,
        ts_ns: u64,
        linktype: u32,
        frame: &mut [u8],
        wire_len: usize,
    ) -> Verdict {
        let v = self
            .nat
            .process_snapped(ts_ns, linktype, frame, wire_len, &mut self.log);
        self.links.set_clock(ts_ns);
        if v == Verdict::HairpinHandoff {
            self.links.stage(
                self.nat.handoff_target(),
                ts_ns,
                linktype,
                frame,
                wire_len as u32,
            );
        }
        v
    }

    /// Every packet of `burst` through [`packet`](Self::packet), each
    /// verdict handed back to the burst, then [`end_burst`](Self::end_burst).
    #[inline]
    pub fn burst<B: Burst>(&mut self, burst: &mut B) {
        for i in 0..burst.count() {
            let Some(f) = burst.frame(i) else {
                continue;
            };
            let v = self.packet(f.ts_ns, f.linktype, f.data, f.wire_len);
            burst.verdict(i, v);
        }
        self.end_burst();
    }

    /// The end of an rx burst: a ring publication every
    /// [`PUBLISH_BURSTS`](crate::ringlog::PUBLISH_BURSTS) bursts
    /// ([`RingLog::end_burst`]), and one handoff per peer with hairpin
    /// packets staged ([`HairpinLinks::send`]).
    #[inline]
    pub fn end_burst(&mut self) {
        self.log.end_burst();
        self.links.send();
    }

    /// Stage two of the hairpins other workers handed over: the
    /// destination of each translated ([`Nat44::hairpin_in`]) once this
    /// worker's input reached its capture time, and given to `emit` when
    /// delivered (the DPDK path sends it; a capture run only counts it).
    pub fn drain(&mut self, emit: &mut impl FnMut(&[u8])) {
        self.links.drain_with(&mut self.nat, emit);
    }

    /// No packet to take: what the last bursts logged goes out now.
    pub fn idle(&mut self) {
        self.log.flush();
    }

    /// End of this worker's input: the staged handoffs sent, the rings to
    /// the other workers closed, and every hairpin they hand over until
    /// they close theirs translated and given to `emit`. Before
    /// [`finish`](Self::finish): stage two needs the mappings.
    pub fn close(&mut self, emit: &mut impl FnMut(&[u8])) {
        self.links.close_with(&mut self.nat, emit);
    }

    /// Deletes and logs every session at `end_ns` ([`Nat44::finish`]);
    /// returns the engine's final counters and the records not logged at a
    /// stop ([`RingLog::dropped_at_stop`]).
    pub fn finish(mut self, end_ns: u64) -> (NatStats, u64) {
        self.nat.finish(end_ns, &mut self.log);
        (self.nat.stats().clone(), self.log.dropped_at_stop())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nat::NatConfig;
    use crate::packet::build::{eth_ipv4, ipv4, udp};
    use crate::packet::{LINKTYPE_ETHERNET, PROTO_UDP};

    const T0: u64 = 1_767_225_600_000_000_000;
    const H1: u32 = 0x0A00_0001; // 10.0.0.1
    const H2: u32 = 0x0A00_0002; // 10.0.0.2
    const R1: u32 = 0xCB00_7101; // 203.0.113.1

    fn engine(range: (u16, u16)) -> Nat44 {
        let mut c = NatConfig::new(
            vec!["10.0.0.0/8".parse().unwrap()],
            "198.51.100.7/32".parse().unwrap(),
        );
        c.port_range = range;
        Nat44::new(c).unwrap()
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

    /// Records the verdicts a burst gets.
    struct Verdicts<'b>(&'b mut Batch, Vec<Verdict>);

    impl Burst for Verdicts<'_> {
        fn count(&self) -> usize {
            self.0.count()
        }
        fn frame(&mut self, i: usize) -> Option<Frame<'_>> {
            self.0.frame(i)
        }
        fn verdict(&mut self, i: usize, v: Verdict) {
            assert_eq!(i, self.1.len(), "verdicts come in packet order");
            self.1.push(v);
        }
    }

    #[test]
    fn a_burst_gets_the_verdicts_and_records_of_packet_by_packet_processing() {
        let frames = [
            udp_frame(H1, 1111, R1, 53),
            udp_frame(H2, 2222, R1, 53),
            // Inbound reply to the first session.
            udp_frame(R1, 53, H1, 1111),
            // Inbound without a session.
            udp_frame(R1, 53, H2, 9),
        ];
        let mut direct = engine((1024, 65535));
        let mut want_records = Vec::new();
        let mut want = Vec::new();
        for (k, f) in frames.iter().enumerate() {
            let mut f = f.clone();
            let mut log = |r: dplog::nat::Nat44SessionRecord| want_records.push(r);
            want.push(direct.process(T0 + k as u64, LINKTYPE_ETHERNET, &mut f, &mut log));
        }
        direct.finish(T0 + 10, &mut |r: dplog::nat::Nat44SessionRecord| {
            want_records.push(r)
        });

        let mut batch = Batch::new();
        for (k, f) in frames.iter().enumerate() {
            batch.push(T0 + k as u64, LINKTYPE_ETHERNET, f);
        }
        let mut pipe = Pipeline::new(
            engine((1024, 65535)),
            RingLog::new(None),
            HairpinLinks::alone(),
        );
        let mut got = Verdicts(&mut batch, Vec::new());
        pipe.burst(&mut got);
        assert_eq!(got.1, want);
        assert_eq!(
            want,
            [
                Verdict::TranslatedOut,
                Verdict::TranslatedOut,
                Verdict::TranslatedIn,
                Verdict::InboundNoSession
            ]
        );
        // The frames were translated in place, as `process` does.
        let mut first = frames[0].clone();
        engine((1024, 65535)).process(T0, LINKTYPE_ETHERNET, &mut first, &mut |_| {});
        assert_eq!(batch.frame(0).unwrap().data, &first[..]);
        let (stats, dropped) = pipe.finish(T0 + 10);
        assert_eq!(stats, *direct.stats());
        assert_eq!(dropped, 0);
        assert_eq!(stats.sessions_created, 2);
        assert_eq!(want_records.len(), 4);
    }

    #[test]
    fn a_hairpin_to_another_workers_port_is_handed_to_it_and_delivered() {
        // Two workers on halves of the range: worker 1 owns 33280..=65535.
        let mut links = HairpinLinks::mesh(2, 4).into_iter();
        let mut w0 = engine((1024, 33279));
        let mut w1 = engine((33280, 65535));
        w0.set_hairpin_handoff(0, 2, (1024, 65535));
        w1.set_hairpin_handoff(1, 2, (1024, 65535));
        let mut p0 = Pipeline::new(w0, RingLog::new(None), links.next().unwrap());
        let mut p1 = Pipeline::new(w1, RingLog::new(None), links.next().unwrap());
        // H2's session on worker 1 gives it the pool port 33280.
        let mut b1 = Batch::new();
        b1.push(T0, LINKTYPE_ETHERNET, &udp_frame(H2, 2222, R1, 53));
        p1.burst(&mut b1);
        // H1 on worker 0 sends to that pool address and port.
        let mut b0 = Batch::new();
        b0.push(
            T0 + 1,
            LINKTYPE_ETHERNET,
            &udp_frame(H1, 1111, 0xC633_6407, 33280),
        );
        let mut v0 = Verdicts(&mut b0, Vec::new());
        p0.burst(&mut v0);
        assert_eq!(v0.1, [Verdict::HairpinHandoff]);
        // Worker 1's input has reached the packet's time: delivered to H2.
        let mut b1 = Batch::new();
        b1.push(T0 + 2, LINKTYPE_ETHERNET, &udp_frame(H2, 2222, R1, 53));
        p1.burst(&mut b1);
        let mut delivered = Vec::new();
        p1.drain(&mut |f: &[u8]| delivered.push(f.to_vec()));
        assert_eq!(delivered.len(), 1);
        let p = crate::packet::parse(LINKTYPE_ETHERNET, &delivered[0]).unwrap();
        assert_eq!(p.ip.dst, H2);
        assert_eq!(p.ip.src, 0xC633_6407, "source translated by worker 0");
        // Each closes on its own thread: a close waits for the peer's.
        let ((n0, (s0, _)), (n1, (s1, _))) = std::thread::scope(|sc| {
            let closing = |mut p: Pipeline<'static>| {
                move || {
                    let mut n = 0;
                    p.close(&mut |_: &[u8]| n += 1);
                    (n, p.finish(T0 + 3))
                }
            };
            let a = sc.spawn(closing(p0));
            let b = sc.spawn(closing(p1));
            (a.join().unwrap(), b.join().unwrap())
        });
        assert_eq!((n0, n1), (0, 0), "nothing more was handed over");
        assert_eq!(s0.count(Verdict::HairpinHandoff), 1);
        assert_eq!((s1.hairpin_in_received, s1.hairpin_in_delivered), (1, 1));
    }
}
