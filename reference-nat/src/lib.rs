//! `dplog-nat`: a reference NAT44 dataplane that logs every session through
//! dplog.
//!
//! This library is the dataplane half; the `dplog-nat` binary wires it to
//! configuration and to a dplog ring. The pieces:
//!
//! * [`input`]: streams legacy pcap and pcapng captures (via `pcap-parser`)
//!   as [`Packet`]s with nanosecond timestamps and per-interface link types.
//! * [`packet`]: parses Ethernet (with 802.1Q / 802.1ad tags), Linux SLL /
//!   SLL2, raw IP and loopback framing down to IPv4 (RFC 791) and TCP, UDP or
//!   ICMP echo, returning a precise reason for every frame it rejects.
//! * [`checksum`]: the internet checksum (RFC 1071) and its incremental
//!   update (RFC 1624) used when rewriting addresses and ports.
//! * [`nat`]: the NAT44 engine, [`Nat44`]: NAPT (RFC 3022) for TCP, UDP and
//!   ICMP echo (RFC 5508) with endpoint-independent mapping and paired
//!   address pooling (RFC 4787), idle timeouts driven by packet time, and
//!   one [`Nat44SessionRecord`] per session create (natEvent 4) and delete
//!   (natEvent 5) as defined by RFC 8158; port block allocation (natEvent
//!   16/17), deterministic NAT (RFC 7422, mapping logged once), session
//!   limits and exhaustion (natEvent 13, 3, 12, rate-limited); ICMP error
//!   translation (RFC 5508) and hairpinning (RFC 4787). Every record type
//!   reaches a [`NatLog`]; [`AllRecords`] turns them into one ring slot
//!   type, `dplog::nat::NatRecord`.
//! * [`synthetic`]: a deterministic generator of realistic inside traffic
//!   for benchmarks.
//! * [`pipeline`]: the per-burst path every worker runs, whatever its
//!   input (capture, synthetic mix, DPDK port): packets through [`Nat44`],
//!   records to the worker's dplog ring, hairpins to their owner worker.
//! * [`app`]: the `dplog-nat` program: configuration, the run loops that
//!   feed packets through the [`pipeline`] into a dplog ring, and the
//!   summary.
//!
//! Conventions: IPv4 addresses are host-order `u32` (`10.0.0.1` is
//! `0x0A00_0001`), ports host-order `u16`, times nanoseconds since the Unix
//! epoch (UTC) as `u64`.
//!
//! ```
//! use dplog_nat::{Nat44, NatConfig, Synthetic, SyntheticConfig, Verdict};
//!
//! let mut nat = Nat44::new(NatConfig::new(
//!     vec!["10.0.0.0/8".parse().unwrap()],
//!     "198.51.100.0/28".parse().unwrap(),
//! ))
//! .unwrap();
//! let mut records = Vec::new();
//! let mut log = |r: dplog::nat::Nat44SessionRecord| records.push(r);
//! let mut gen = Synthetic::new(SyntheticConfig { packets: 1000, ..Default::default() }).unwrap();
//! let mut last = 0;
//! while let Some((ts, frame)) = gen.next_frame() {
//!     let v = nat.process(ts, dplog_nat::LINKTYPE_ETHERNET, frame, &mut log);
//!     assert!(v.is_translated());
//!     last = ts;
//! }
//! nat.finish(last, &mut log);
//! let stats = nat.stats();
//! assert_eq!(stats.sessions_created, stats.sessions_deleted);
//! assert_eq!(records.len() as u64, 2 * stats.sessions_created);
//! assert!(stats.count(Verdict::TranslatedOut) > 0);
//! ```

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod app;
pub mod checksum;
#[cfg(feature = "dpdk")]
#[allow(unsafe_code)]
pub mod dpdk;
pub mod fuzz;
pub mod input;
pub mod nat;
pub mod packet;
pub mod pipeline;
pub mod ringlog;
pub mod signals;
pub mod stdio;
pub mod synthetic;
pub mod workers;

pub use dplog::nat::{Nat44SessionRecord, NatEvent};
pub use dplog::RecordHeader;
pub use input::{read_capture, CaptureFormat, InputError, InputErrorKind, InputStats, Packet};
pub use nat::{
    worker_port_range, AllRecords, Nat44, NatConfig, NatError, NatLog, NatStats, NatTimeouts,
    PortAllocation, Verdict,
};
pub use packet::{
    parse, MalformedReason, ParseError, ParsedPacket, LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2, LINKTYPE_NULL, LINKTYPE_RAW,
};
pub use ringlog::{NatProducer, RingLog, NAT_BURST, PUBLISH_BURSTS};
pub use synthetic::{generate, Synthetic, SyntheticConfig, SyntheticError, SYNTHETIC_START_NS};

#[cfg(test)]
mod capture_tests {
    //! End-to-end runs over the real captures in `../../shared/pcaps` (kept
    //! beside the repository, never copied into it).
    use super::*;
    use std::path::{Path, PathBuf};

    fn capture(name: &str) -> PathBuf {
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/pcaps")).join(name)
    }

    struct Run {
        input: Result<InputStats, InputError>,
        nat: NatStats,
        creates: u64,
        deletes: u64,
    }

    fn run(path: &Path, inside: &[&str]) -> Run {
        let cfg = NatConfig::new(
            inside.iter().map(|p| p.parse().unwrap()).collect(),
            "198.51.100.0/28".parse().unwrap(),
        );
        let mut nat = Nat44::new(cfg).unwrap();
        let (mut creates, mut deletes) = (0u64, 0u64);
        let mut last_create: Option<Nat44SessionRecord> = None;
        let mut log = |r: Nat44SessionRecord| {
            assert_eq!(r.header, RecordHeader::of::<Nat44SessionRecord>());
            match NatEvent::from_u8(r.nat_event) {
                Some(NatEvent::Nat44SessionCreate) => {
                    assert_eq!((r.initiator_packets, r.responder_octets), (0, 0));
                    creates += 1;
                    last_create = Some(r);
                }
                Some(NatEvent::Nat44SessionDelete) => {
                    assert!(
                        r.initiator_packets >= 1,
                        "a session starts with an initiator packet"
                    );
                    deletes += 1;
                }
                None => panic!("bad natEvent {}", r.nat_event),
            }
        };
        let mut buf = Vec::with_capacity(65536);
        let mut last_ts = 0;
        let input = read_capture(path, |p| {
            buf.clear();
            buf.extend_from_slice(p.data);
            nat.process(p.ts_ns, p.linktype, &mut buf, &mut log);
            last_ts = last_ts.max(p.ts_ns);
        });
        nat.finish(last_ts, &mut log);
        Run {
            input,
            nat: nat.stats().clone(),
            creates,
            deletes,
        }
    }

    #[test]
    fn example_pcap_sessions_balance() {
        let path = capture("example.pcap");
        let r = run(&path, &["10.0.0.0/8"]);
        let input = r.input.expect("example.pcap reads cleanly");
        assert_eq!(input.packets, 4631);
        let s = &r.nat;
        assert_eq!(s.packets, 4631);
        assert!(s.sessions_created > 0);
        assert_eq!(r.creates, s.sessions_created);
        assert_eq!(r.deletes, s.sessions_created);
        assert_eq!(s.sessions_deleted, s.sessions_created);
        assert_eq!((s.sessions_live, s.mappings_live), (0, 0));
        assert_eq!(s.records_logged, 2 * s.sessions_created);
        assert_eq!(s.verdicts.iter().sum::<u64>(), 4631);
        assert!(s.count(Verdict::TranslatedOut) > 0 && s.count(Verdict::TranslatedIn) > 0);
    }

    #[test]
    fn truncated_copy_of_a_real_capture_keeps_earlier_packets() {
        let bytes = std::fs::read(capture("example.pcap")).expect("example.pcap");
        let cut = bytes.len() / 2 + 7;
        let mut t = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut t, &bytes[..cut]).unwrap();
        let r = run(t.path(), &["10.0.0.0/8"]);
        let e = r.input.unwrap_err();
        let InputErrorKind::Truncated { packets_read } = e.kind else {
            panic!("expected truncation, got {e}");
        };
        assert!(packets_read > 1000 && packets_read < 4631, "{packets_read}");
        assert_eq!(
            r.nat.packets, packets_read,
            "every packet read was processed"
        );
        assert!(e.offset < cut as u64 && e.offset > 24);
        assert_eq!(r.creates, r.deletes);
    }

    /// Runs every shared capture with its suggested inside prefix(es) and
    /// prints a summary (see it with `cargo test -p dplog-nat survey --
    /// --nocapture`).
    #[test]
    fn survey_of_shared_captures() {
        let plan: [(&str, &[&str]); 17] = [
            ("4KHttpRequests.pcap", &["10.0.0.0/8"]),
            ("DnsPackets.pcap", &["10.0.0.0/8"]),
            ("DnsPackets.pcap", &["10.0.0.0/25"]),
            ("example.pcap", &["10.0.0.0/8"]),
            ("example.pcap", &["10.0.0.0/25"]),
            ("four_ipv6_http_streams.pcap", &["10.0.0.0/8"]),
            ("frag_with_padding.pcap", &["10.0.0.0/8"]),
            ("http-packets.pcap", &["172.16.30.190/32"]),
            ("ip-frag.pcap", &["10.118.213.212/32"]),
            ("many-protocols.pcap", &["10.0.0.0/8"]),
            ("many-protocols.pcap", &["10.0.0.0/25"]),
            ("microsecs_big_endian.pcap", &["10.0.0.0/8"]),
            ("pcapng-example.pcapng", &["10.0.0.0/8"]),
            ("raw_ip.pcap", &["10.0.0.0/8"]),
            ("sll.pcap", &["10.0.0.0/8"]),
            ("tcpreplay-test.pcap", &["172.16.0.0/12"]),
            ("tcpreplay-test.pcap", &["172.16.11.12/32"]),
        ];
        for (name, inside) in plan {
            let path = capture(name);
            if !path.exists() {
                println!("{name}: missing, skipped");
                continue;
            }
            let r = run(&path, inside);
            let input = match &r.input {
                Ok(s) => format!("ok, {} packets", s.packets),
                Err(e) => format!("ERROR {e}"),
            };
            let verdicts: Vec<String> = r
                .nat
                .nonzero()
                .map(|(v, n)| format!("{}={n}", v.name()))
                .collect();
            println!(
                "{name} --inside {}: input {input}; sessions {} (peak {}); {}",
                inside.join(","),
                r.nat.sessions_created,
                r.nat.peak_sessions,
                verdicts.join(" ")
            );
            assert!(r.input.is_ok(), "{name}: {input}");
            assert_eq!(
                (r.creates, r.deletes),
                (r.nat.sessions_created, r.nat.sessions_created)
            );
        }
    }
}
