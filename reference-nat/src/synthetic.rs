//! Deterministic synthetic traffic: Ethernet + IPv4 + TCP / UDP / ICMP echo
//! frames with valid checksums, as seen on the inside of a NAT44.
//!
//! Subscribers are `10.0.0.1`, `10.0.0.2`, ... (inside prefix
//! [`SYNTHETIC_INSIDE`]); destinations are `203.0.113.0/24` (RFC 5737
//! TEST-NET-3) and, beyond 256 of them, `198.18.0.0/15` (RFC 2544
//! benchmarking space). Each packet either opens a new flow (a new source
//! port of a random subscriber towards a random destination, hence a new
//! NAT session) or continues a previously opened flow in either direction.
//! The share of opening packets is exact, not a probability: packet `i`
//! (0-based) opens a flow when `ceil((i+1)·share) > ceil(i·share)`, so `N`
//! packets open exactly `ceil(N·share)` flows, spread evenly. At share 0
//! the first [`SyntheticConfig::warmup_flows`] packets open the flows that
//! every later packet continues (the only sessions of the run). A flow
//! ends (TCP FIN) only while more than one flow is open (more than the
//! warm-up at share 0), so ending never forces an extra opening. About 70% of flows are TCP,
//! 25% UDP and 5% ICMP echo. TCP flows start with a SYN, are answered with a
//! SYN-ACK, carry data with ACK|PSH and sometimes end with a FIN.
//!
//! The same configuration always produces the same byte-exact frames and
//! timestamps (the random generator is `rand_pcg::Pcg64` seeded from
//! [`SyntheticConfig::seed`]).

use std::fmt;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

use crate::checksum::{internet_checksum, transport_checksum};
use crate::packet::{
    LINKTYPE_ETHERNET, PROTO_ICMP, PROTO_TCP, PROTO_UDP, TCP_ACK, TCP_FIN, TCP_PSH, TCP_SYN,
};

/// Timestamp of the first synthetic packet: 2026-01-01T00:00:00Z, in
/// nanoseconds since the Unix epoch.
pub const SYNTHETIC_START_NS: u64 = 1_767_225_600 * 1_000_000_000;

/// The inside prefix the synthetic subscribers live in.
pub const SYNTHETIC_INSIDE: &str = "10.0.0.0/8";

/// Most subscribers: all of 10.0.0.1 .. 10.255.255.254.
pub const MAX_SUBSCRIBERS: u32 = (1 << 24) - 2;
/// Most destinations: 256 in 203.0.113.0/24 plus 131072 in 198.18.0.0/15.
pub const MAX_DESTINATIONS: u32 = 256 + (1 << 17);
/// Flows kept open at most; beyond, a random open flow is forgotten (it
/// goes silent and its NAT session later times out).
pub const MAX_OPEN_FLOWS: usize = 65536;

/// Largest frame produced, bytes (data packets); control packets (SYN,
/// SYN-ACK, FIN) are 60 bytes: 54 bytes of headers padded to the Ethernet
/// minimum.
pub const SYNTHETIC_FRAME_LEN: usize = 64;

/// Probability that touching an open flow ends it (TCP with a FIN).
const END_SHARE: f64 = 0.03;

/// Synthetic traffic parameters; also the `[synthetic]` table of the
/// `dplog-nat` configuration (every key optional, unknown keys are errors;
/// `shard` is not configurable).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SyntheticConfig {
    /// Number of inside hosts, 10.0.0.1 upwards (default 1000).
    pub subscribers: u32,
    /// Number of outside hosts, 203.0.113.0 upwards then 198.18.0.0
    /// upwards (default 256).
    pub destinations: u32,
    /// Share of packets that open a new flow (a new NAT session),
    /// 0.0..=1.0 (default 0.1); exact: `packets` packets open
    /// `ceil(packets·share)` flows.
    pub new_session_share: f64,
    /// With `new_session_share` 0: flows opened by the first packets,
    /// which all later packets continue (default 1024; at most
    /// [`MAX_OPEN_FLOWS`] and `packets`, at least 1). Unused above share 0.
    pub warmup_flows: u32,
    /// Packets to generate (default 1 000 000).
    pub packets: u64,
    /// Random seed (default 1).
    pub seed: u64,
    /// Virtual packet rate in packets per second: packet `i` is stamped
    /// [`SYNTHETIC_START_NS`] + i·10⁹/rate_pps ns (default 1 000 000).
    pub rate_pps: u64,
    /// `Some((worker, workers))`: generate only the subscribers that the
    /// dispatcher would send to `worker` of `workers` (see
    /// [`crate::workers::worker_of_inside`]), i.e. what one RSS queue of a
    /// multi-worker NAT receives. `None` (default): every subscriber.
    #[serde(skip)]
    pub shard: Option<(u32, u32)>,
}

impl Default for SyntheticConfig {
    fn default() -> Self {
        Self {
            subscribers: 1000,
            destinations: 256,
            new_session_share: 0.1,
            warmup_flows: 1024,
            packets: 1_000_000,
            seed: 1,
            rate_pps: 1_000_000,
            shard: None,
        }
    }
}

/// An invalid [`SyntheticConfig`].
#[derive(Clone, Debug, PartialEq)]
pub enum SyntheticError {
    /// `subscribers` is 0 or above [`MAX_SUBSCRIBERS`].
    Subscribers(u32),
    /// `destinations` is 0 or above [`MAX_DESTINATIONS`].
    Destinations(u32),
    /// `new_session_share` is not within 0.0..=1.0.
    NewSessionShare(f64),
    /// `rate_pps` is 0.
    ZeroRate,
}

impl fmt::Display for SyntheticError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SyntheticError::Subscribers(n) => {
                write!(f, "subscribers must be 1..={MAX_SUBSCRIBERS}, got {n}")
            }
            SyntheticError::Destinations(n) => {
                write!(f, "destinations must be 1..={MAX_DESTINATIONS}, got {n}")
            }
            SyntheticError::NewSessionShare(x) => {
                write!(f, "new_session_share must be within 0..=1, got {x}")
            }
            SyntheticError::ZeroRate => f.write_str("rate_pps must be at least 1"),
        }
    }
}

impl std::error::Error for SyntheticError {}

#[derive(Clone, Copy, Debug)]
struct Flow {
    proto: u8,
    subscriber: u32,
    destination: u32,
    sport: u16,
    dport: u16,
    /// TCP: SYN sent, not answered yet.
    opening: bool,
    seq_out: u32,
    seq_in: u32,
    icmp_seq: u16,
}

/// The generator. Produces [`SyntheticConfig::packets`] frames, one at a
/// time, into an internal reusable buffer.
pub struct Synthetic {
    cfg: SyntheticConfig,
    rng: Pcg64,
    flows: Vec<Flow>,
    next_port: Vec<u16>,
    produced: u64,
    ip_id: u16,
    buf: [u8; SYNTHETIC_FRAME_LEN],
    /// Subscriber indices of this shard (`None`: all of them).
    shard_subscribers: Option<Vec<u32>>,
}

impl fmt::Debug for Synthetic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Synthetic")
            .field("cfg", &self.cfg)
            .field("flows", &self.flows.len())
            .field("produced", &self.produced)
            .field("ip_id", &self.ip_id)
            .field(
                "shard_subscribers",
                &self.shard_subscribers.as_ref().map(Vec::len),
            )
            .finish_non_exhaustive()
    }
}

/// Address of subscriber `i` (0-based): 10.0.0.1 + i, host order.
pub fn subscriber_addr(i: u32) -> u32 {
    0x0A00_0001 + i
}

/// Address of destination `j` (0-based): 203.0.113.j for j < 256, then
/// 198.18.0.0 + (j - 256), host order.
pub fn destination_addr(j: u32) -> u32 {
    if j < 256 {
        0xCB00_7100 + j
    } else {
        0xC612_0000 + (j - 256)
    }
}

impl Synthetic {
    /// A generator for `cfg`.
    ///
    /// # Errors
    ///
    /// [`SyntheticError`] when a parameter is out of range.
    pub fn new(cfg: SyntheticConfig) -> Result<Self, SyntheticError> {
        if cfg.subscribers == 0 || cfg.subscribers > MAX_SUBSCRIBERS {
            return Err(SyntheticError::Subscribers(cfg.subscribers));
        }
        if cfg.destinations == 0 || cfg.destinations > MAX_DESTINATIONS {
            return Err(SyntheticError::Destinations(cfg.destinations));
        }
        if !(0.0..=1.0).contains(&cfg.new_session_share) {
            return Err(SyntheticError::NewSessionShare(cfg.new_session_share));
        }
        if cfg.rate_pps == 0 {
            return Err(SyntheticError::ZeroRate);
        }
        let shard_subscribers = cfg.shard.map(|(w, n)| {
            (0..cfg.subscribers)
                .filter(|&i| {
                    crate::workers::worker_of_inside(subscriber_addr(i), n as usize) == w as usize
                })
                .collect::<Vec<u32>>()
        });
        Ok(Self {
            shard_subscribers,
            rng: Pcg64::seed_from_u64(cfg.seed),
            next_port: vec![0; cfg.subscribers as usize],
            flows: Vec::new(),
            produced: 0,
            ip_id: 0,
            buf: [0; SYNTHETIC_FRAME_LEN],
            cfg,
        })
    }

    /// Packets produced so far.
    pub fn produced(&self) -> u64 {
        self.produced
    }

    /// The next frame: `(timestamp ns since the Unix epoch, Ethernet frame)`,
    /// or `None` after [`SyntheticConfig::packets`] frames. The slice is the
    /// generator's buffer, overwritten by the next call; it may be modified
    /// (e.g. translated in place).
    pub fn next_frame(&mut self) -> Option<(u64, &mut [u8])> {
        if self.produced >= self.cfg.packets
            || self
                .shard_subscribers
                .as_ref()
                .is_some_and(|v| v.is_empty())
        {
            return None;
        }
        let i = self.produced;
        self.produced += 1;
        let ts = SYNTHETIC_START_NS.saturating_add(
            u64::try_from(u128::from(i) * 1_000_000_000 / u128::from(self.cfg.rate_pps))
                .unwrap_or(u64::MAX),
        );
        let open_new = self.opens(i);
        let len = if open_new {
            let flow = self.open_flow();
            self.emit(&flow, true, None)
        } else {
            let idx = self.rng.gen_range(0..self.flows.len());
            let outbound = self.rng.gen_bool(0.5);
            // Ending a flow never leaves fewer than the floor open, so the
            // pool is never empty when a continuing packet needs a flow.
            let floor = if self.share_nanos() == 0 {
                self.warmup() as usize
            } else {
                1
            };
            let ending = self.rng.gen_bool(END_SHARE) && self.flows.len() > floor;
            let mut flow = self.flows[idx];
            let tcp_flags = if flow.proto != PROTO_TCP {
                None
            } else if ending {
                Some(TCP_FIN | TCP_ACK)
            } else if flow.opening {
                if outbound {
                    Some(TCP_SYN) // retransmitted SYN
                } else {
                    flow.opening = false;
                    Some(TCP_SYN | TCP_ACK)
                }
            } else {
                Some(TCP_ACK | TCP_PSH)
            };
            let len = self.emit(&flow, outbound, tcp_flags);
            flow.icmp_seq = flow.icmp_seq.wrapping_add(u16::from(outbound));
            if ending {
                self.flows.swap_remove(idx);
            } else {
                self.flows[idx] = flow;
            }
            len
        };
        Some((ts, &mut self.buf[..len]))
    }

    /// True when packet `i` (0-based) opens a new flow: the packets where
    /// `ceil(i·share)` steps up, or the warm-up packets at share 0.
    fn opens(&self, i: u64) -> bool {
        let k = self.share_nanos();
        if k == 0 {
            return i < self.warmup();
        }
        // Exact in integers for shares given with up to 9 decimals: with
        // share = k / 10^9, ceil(i·k / 10^9) steps up at packet i.
        let ceil = |x: u64| (u128::from(x) * k).div_ceil(1_000_000_000);
        ceil(i + 1) > ceil(i)
    }

    /// The share in units of 10⁻⁹ (0 for shares below 0.5·10⁻⁹, which
    /// behave as 0: warm-up flows only).
    fn share_nanos(&self) -> u128 {
        (self.cfg.new_session_share * 1e9).round() as u128
    }

    /// Flows opened by the warm-up at share 0.
    fn warmup(&self) -> u64 {
        u64::from(self.cfg.warmup_flows)
            .clamp(1, MAX_OPEN_FLOWS as u64)
            .min(self.cfg.packets)
    }

    /// Flows opened by a run of [`SyntheticConfig::packets`] packets:
    /// `ceil(packets·share)`, or the warm-up at share 0. Each is one NAT
    /// session.
    pub fn flows_to_open(&self) -> u64 {
        let k = self.share_nanos();
        if k == 0 {
            return self.warmup();
        }
        (u128::from(self.cfg.packets) * k).div_ceil(1_000_000_000) as u64
    }

    /// Calls `f(ts_ns, LINKTYPE_ETHERNET, frame)` for every remaining frame;
    /// returns the number of frames produced by this call.
    pub fn run(&mut self, mut f: impl FnMut(u64, u32, &mut [u8])) -> u64 {
        let mut n = 0;
        while let Some((ts, frame)) = self.next_frame() {
            f(ts, LINKTYPE_ETHERNET, frame);
            n += 1;
        }
        n
    }

    fn open_flow(&mut self) -> Flow {
        let subscriber = match &self.shard_subscribers {
            Some(v) => v[self.rng.gen_range(0..v.len())],
            None => self.rng.gen_range(0..self.cfg.subscribers),
        };
        let destination = self.rng.gen_range(0..self.cfg.destinations);
        let p = self.rng.gen_range(0..100u32);
        let (proto, dport) = if p < 70 {
            let d = self.rng.gen_range(0..10u32);
            (
                PROTO_TCP,
                [443, 443, 443, 443, 443, 443, 80, 80, 80, 8080][d as usize],
            )
        } else if p < 95 {
            let d = self.rng.gen_range(0..10u32);
            (
                PROTO_UDP,
                [53, 53, 53, 53, 53, 443, 443, 443, 123, 4500][d as usize],
            )
        } else {
            (PROTO_ICMP, 0)
        };
        let slot = &mut self.next_port[subscriber as usize];
        if *slot == 0 {
            *slot = self.rng.gen_range(1024..=65535);
        }
        let sport = *slot;
        *slot = if sport == 65535 { 1024 } else { sport + 1 };
        let flow = Flow {
            proto,
            subscriber,
            destination,
            sport,
            dport,
            opening: proto == PROTO_TCP,
            seq_out: self.rng.gen(),
            seq_in: self.rng.gen(),
            icmp_seq: 1,
        };
        if self.flows.len() >= MAX_OPEN_FLOWS {
            let victim = self.rng.gen_range(0..self.flows.len());
            self.flows[victim] = flow;
        } else {
            self.flows.push(flow);
        }
        flow
    }

    /// Writes one frame of `flow` into the buffer; returns its length.
    /// `tcp_flags` `None` for TCP means "first packet" (SYN).
    fn emit(&mut self, flow: &Flow, outbound: bool, tcp_flags: Option<u8>) -> usize {
        let inside = subscriber_addr(flow.subscriber);
        let outside = destination_addr(flow.destination);
        let (src, dst, sport, dport) = if outbound {
            (inside, outside, flow.sport, flow.dport)
        } else {
            (outside, inside, flow.dport, flow.sport)
        };
        let b = &mut self.buf;
        b.fill(0);
        // Ethernet: inside host MAC 02:00:<addr>, gateway MAC 02:ff:00:00:00:01.
        let host_mac = [
            0x02,
            0x00,
            0x0A,
            (inside >> 16) as u8,
            (inside >> 8) as u8,
            inside as u8,
        ];
        let gw_mac = [0x02, 0xFF, 0x00, 0x00, 0x00, 0x01];
        let (dst_mac, src_mac) = if outbound {
            (gw_mac, host_mac)
        } else {
            (host_mac, gw_mac)
        };
        b[0..6].copy_from_slice(&dst_mac);
        b[6..12].copy_from_slice(&src_mac);
        b[12..14].copy_from_slice(&0x0800u16.to_be_bytes());

        const PAYLOAD: &[u8; 22] = b"dplog synthetic data!!";
        let l4 = 34;
        let l4_len = match flow.proto {
            PROTO_TCP => {
                let flags = tcp_flags.unwrap_or(TCP_SYN);
                let data = if flags & TCP_PSH != 0 { 10 } else { 0 };
                let (seq, ack) = if outbound {
                    (flow.seq_out, flow.seq_in)
                } else {
                    (flow.seq_in, flow.seq_out)
                };
                let t = &mut b[l4..];
                t[0..2].copy_from_slice(&sport.to_be_bytes());
                t[2..4].copy_from_slice(&dport.to_be_bytes());
                t[4..8].copy_from_slice(&seq.to_be_bytes());
                if flags & TCP_ACK != 0 {
                    t[8..12].copy_from_slice(&ack.to_be_bytes());
                }
                t[12] = 5 << 4;
                t[13] = flags;
                t[14..16].copy_from_slice(&64240u16.to_be_bytes());
                t[20..20 + data].copy_from_slice(&PAYLOAD[..data]);
                20 + data
            }
            PROTO_UDP => {
                let u = &mut b[l4..];
                u[0..2].copy_from_slice(&sport.to_be_bytes());
                u[2..4].copy_from_slice(&dport.to_be_bytes());
                u[4..6].copy_from_slice(&30u16.to_be_bytes());
                u[8..30].copy_from_slice(PAYLOAD);
                30
            }
            _ => {
                let c = &mut b[l4..];
                c[0] = if outbound { 8 } else { 0 };
                c[4..6].copy_from_slice(&flow.sport.to_be_bytes());
                c[6..8].copy_from_slice(&flow.icmp_seq.to_be_bytes());
                c[8..30].copy_from_slice(PAYLOAD);
                30
            }
        };
        let total = 20 + l4_len;
        self.ip_id = self.ip_id.wrapping_add(1);
        let ip = &mut b[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&self.ip_id.to_be_bytes());
        ip[6] = 0x40; // DF
        ip[8] = if outbound { 64 } else { 52 };
        ip[9] = flow.proto;
        ip[12..16].copy_from_slice(&src.to_be_bytes());
        ip[16..20].copy_from_slice(&dst.to_be_bytes());
        let c = internet_checksum(ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        let seg = &mut b[l4..l4 + l4_len];
        match flow.proto {
            PROTO_TCP => {
                let c = transport_checksum(src, dst, PROTO_TCP, seg);
                seg[16..18].copy_from_slice(&c.to_be_bytes());
            }
            PROTO_UDP => {
                let mut c = transport_checksum(src, dst, PROTO_UDP, seg);
                if c == 0 {
                    c = 0xFFFF;
                }
                seg[6..8].copy_from_slice(&c.to_be_bytes());
            }
            _ => {
                let c = internet_checksum(seg);
                seg[2..4].copy_from_slice(&c.to_be_bytes());
            }
        }
        (14 + total).max(60)
    }
}

/// Runs a whole synthetic workload: `f(ts_ns, linktype, frame)` per frame
/// (linktype is always [`LINKTYPE_ETHERNET`]). Returns the frame count.
///
/// # Errors
///
/// [`SyntheticError`] when `cfg` is invalid.
pub fn generate(
    cfg: &SyntheticConfig,
    f: impl FnMut(u64, u32, &mut [u8]),
) -> Result<u64, SyntheticError> {
    Ok(Synthetic::new(cfg.clone())?.run(f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nat::{Nat44, NatConfig, Verdict};
    use crate::packet::{parse, Transport};
    use std::collections::hash_map::DefaultHasher;
    use std::hash::{Hash, Hasher};

    fn small(packets: u64, seed: u64) -> SyntheticConfig {
        SyntheticConfig {
            packets,
            seed,
            ..SyntheticConfig::default()
        }
    }

    fn digest(cfg: &SyntheticConfig) -> u64 {
        let mut h = DefaultHasher::new();
        generate(cfg, |ts, lt, f| {
            ts.hash(&mut h);
            lt.hash(&mut h);
            f.hash(&mut h);
        })
        .unwrap();
        h.finish()
    }

    #[test]
    fn frames_are_valid_and_mixed() {
        let cfg = small(20_000, 7);
        let (mut tcp, mut udp, mut icmp, mut n) = (0u32, 0u32, 0u32, 0u64);
        let mut last_ts = 0;
        generate(&cfg, |ts, lt, f| {
            assert_eq!(lt, LINKTYPE_ETHERNET);
            assert!((60..=64).contains(&f.len()), "len {}", f.len());
            assert_eq!(ts, SYNTHETIC_START_NS + n * 1000, "1 Mpps spacing");
            assert!(ts >= last_ts);
            last_ts = ts;
            let p = parse(lt, f).unwrap();
            let ip = &f[14..p.l3_end()];
            assert_eq!(internet_checksum(&ip[..20]), 0);
            let seg = &ip[20..];
            match p.transport {
                Transport::Tcp(_) => {
                    tcp += 1;
                    assert_eq!(transport_checksum(p.ip.src, p.ip.dst, 6, seg), 0);
                }
                Transport::Udp(_) => {
                    udp += 1;
                    assert_eq!(transport_checksum(p.ip.src, p.ip.dst, 17, seg), 0);
                }
                Transport::IcmpEcho(_) => {
                    icmp += 1;
                    assert_eq!(internet_checksum(seg), 0);
                }
                other => panic!("unexpected {other:?}"),
            }
            let inside = |a: u32| a >> 24 == 10 && a - 0x0A00_0001 < 1000;
            let outside = |a: u32| (0xCB00_7100..=0xCB00_71FF).contains(&a);
            assert!(
                (inside(p.ip.src) && outside(p.ip.dst)) || (outside(p.ip.src) && inside(p.ip.dst))
            );
            n += 1;
        })
        .unwrap();
        assert_eq!(n, 20_000);
        let share = |x: u32| f64::from(x) / 20_000.0;
        assert!((0.64..0.76).contains(&share(tcp)), "tcp {}", share(tcp));
        assert!((0.20..0.30).contains(&share(udp)), "udp {}", share(udp));
        assert!((0.02..0.08).contains(&share(icmp)), "icmp {}", share(icmp));
    }

    #[test]
    fn the_share_is_exact_and_a_tiny_one_is_zero() {
        for (share, packets, want) in [
            (0.1, 50_000u64, 5_000u64),
            (0.25, 1_001, 251),
            (1.0, 777, 777),
            (0.0, 10_000, 1024),
            (1e-12, 5_000, 1024), // rounds to 0: warm-up only, no panic
            (0.0, 100, 100),      // warm-up capped by the packets
        ] {
            let cfg = SyntheticConfig {
                packets,
                new_session_share: share,
                ..SyntheticConfig::default()
            };
            let gen = Synthetic::new(cfg.clone()).unwrap();
            assert_eq!(gen.flows_to_open(), want, "share {share}");
            let mut opened = 0u64;
            let mut g = Synthetic::new(cfg).unwrap();
            for i in 0..packets {
                opened += u64::from(g.opens(i));
            }
            assert_eq!(opened, want, "share {share}");
            // Every packet is produced (no empty flow pool).
            assert_eq!(g.run(|_, _, _| {}), packets);
        }
    }

    #[test]
    fn deterministic_per_seed() {
        assert_eq!(digest(&small(5000, 1)), digest(&small(5000, 1)));
        assert_ne!(digest(&small(5000, 1)), digest(&small(5000, 2)));
    }

    #[test]
    fn destinations_beyond_256_use_benchmark_space() {
        assert_eq!(destination_addr(0), 0xCB00_7100);
        assert_eq!(destination_addr(255), 0xCB00_71FF);
        assert_eq!(destination_addr(256), 0xC612_0000);
        assert_eq!(destination_addr(256 + 70_000), 0xC613_1170);
        assert_eq!(subscriber_addr(0), 0x0A00_0001);
        assert!(Synthetic::new(SyntheticConfig {
            destinations: 0,
            ..SyntheticConfig::default()
        })
        .is_err());
        assert_eq!(
            Synthetic::new(SyntheticConfig {
                new_session_share: 1.5,
                ..SyntheticConfig::default()
            })
            .err(),
            Some(SyntheticError::NewSessionShare(1.5))
        );
    }

    #[test]
    fn nat_translates_every_synthetic_packet() {
        let cfg = SyntheticConfig {
            packets: 50_000,
            subscribers: 200,
            destinations: 1000,
            ..SyntheticConfig::default()
        };
        let mut nat = Nat44::new(NatConfig::new(
            vec![SYNTHETIC_INSIDE.parse().unwrap()],
            "198.51.100.0/24".parse().unwrap(),
        ))
        .unwrap();
        let (mut creates, mut deletes) = (0u64, 0u64);
        let mut log = |r: dplog::nat::Nat44SessionRecord| {
            if r.nat_event == 4 {
                creates += 1
            } else {
                deletes += 1
            }
        };
        let mut last = 0;
        let mut syn = Synthetic::new(cfg).unwrap();
        while let Some((ts, frame)) = syn.next_frame() {
            let v = nat.process(ts, LINKTYPE_ETHERNET, frame, &mut log);
            assert!(v.is_translated(), "{v:?}");
            last = ts;
        }
        nat.finish(last, &mut log);
        let s = nat.stats().clone();
        assert_eq!(
            s.count(Verdict::TranslatedOut) + s.count(Verdict::TranslatedIn),
            50_000
        );
        // 10 % of 50 000 packets open a session, exactly.
        assert_eq!(s.sessions_created, 5000);
        assert_eq!((creates, deletes), (s.sessions_created, s.sessions_created));
    }
}
