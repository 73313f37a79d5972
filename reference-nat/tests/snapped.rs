//! Packets cut by a capture's snap length (caplen < original length): the
//! NAT translates them when the IPv4 and transport headers were captured
//! (incremental checksums, RFC 1624, need no payload) and counts the rest
//! under their own verdict, `snapped`, not as malformed.

use dplog::config::{FileSinkConfig, SinkConfig};
use dplog::formatters::Format;
use dplog_nat::app::{run, AppConfig};
use dplog_nat::checksum::{internet_checksum, transport_checksum};
use dplog_nat::{AllRecords, Nat44, NatConfig, Verdict, LINKTYPE_ETHERNET};

mod pcapng;
use pcapng::{epb, idb, shb};

const INSIDE: u32 = 0x0A01_0203; // 10.1.2.3
const REMOTE: u32 = 0xCB00_7109; // 203.0.113.9
const SNAPLEN: usize = 64;

/// Ethernet + IPv4 (with `options`) + `l4` (checksum field zero; filled in
/// here) with valid checksums.
fn frame(src: u32, dst: u32, proto: u8, options: &[u8], l4: &[u8]) -> Vec<u8> {
    let hl = 20 + options.len();
    let total = (hl + l4.len()) as u16;
    let mut ip = vec![0x40 | (hl / 4) as u8, 0];
    ip.extend_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&[0x12, 0x34, 0x40, 0x00, 64, proto, 0, 0]);
    ip.extend_from_slice(&src.to_be_bytes());
    ip.extend_from_slice(&dst.to_be_bytes());
    ip.extend_from_slice(options);
    let c = internet_checksum(&ip[..hl]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut seg = l4.to_vec();
    let at = match proto {
        6 => 16,
        17 => 6,
        _ => 2,
    };
    let c = if proto == 1 {
        internet_checksum(&seg)
    } else {
        transport_checksum(src, dst, proto, &seg)
    };
    seg[at..at + 2].copy_from_slice(&c.to_be_bytes());
    ip.extend_from_slice(&seg);
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(&ip);
    f
}

fn udp(sport: u16, dport: u16, payload: usize) -> Vec<u8> {
    let mut u = sport.to_be_bytes().to_vec();
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend((0..payload).map(|i| i as u8));
    u
}

fn tcp(sport: u16, dport: u16, flags: u8, payload: usize) -> Vec<u8> {
    let mut t = sport.to_be_bytes().to_vec();
    t.extend_from_slice(&dport.to_be_bytes());
    t.extend_from_slice(&7u32.to_be_bytes());
    t.extend_from_slice(&0u32.to_be_bytes());
    t.extend_from_slice(&[0x50, flags, 0xFF, 0xFF, 0, 0, 0, 0]);
    t.extend((0..payload).map(|i| (i * 7) as u8));
    t
}

fn echo(id: u16, payload: usize) -> Vec<u8> {
    let mut e = vec![8, 0, 0, 0];
    e.extend_from_slice(&id.to_be_bytes());
    e.extend_from_slice(&1u16.to_be_bytes());
    e.extend((0..payload).map(|i| i as u8));
    e
}

fn nat() -> Nat44 {
    Nat44::new(NatConfig::new(
        vec!["10.0.0.0/8".parse().unwrap()],
        "198.51.100.0/28".parse().unwrap(),
    ))
    .unwrap()
}

#[test]
fn a_cut_packet_is_translated_exactly_as_its_whole_self() {
    let whole = [
        frame(INSIDE, REMOTE, 17, &[], &udp(4000, 53, 300)),
        frame(INSIDE, REMOTE, 6, &[], &tcp(4001, 443, 0x02, 100)),
        frame(INSIDE, REMOTE, 6, &[], &tcp(4001, 443, 0x18, 900)),
        frame(INSIDE, REMOTE, 1, &[], &echo(77, 200)),
        // IPv4 options: 14 + 28 + 8 = 50 bytes of headers, still captured.
        frame(
            INSIDE,
            REMOTE,
            17,
            &[1, 1, 1, 1, 1, 1, 1, 0],
            &udp(4002, 53, 100),
        ),
    ];
    let (mut full, mut snap) = (nat(), nat());
    let mut sink = AllRecords(|_| {});
    for (i, w) in whole.iter().enumerate() {
        let ts = 1_700_000_000_000_000_000 + i as u64 * 1000;
        let mut a = w.clone();
        let va = full.process(ts, LINKTYPE_ETHERNET, &mut a, &mut sink);
        assert_eq!(va, Verdict::TranslatedOut, "whole frame {i}");
        let mut b = w[..SNAPLEN].to_vec();
        // Cut, it no longer parses as a whole packet...
        assert!(dplog_nat::parse(LINKTYPE_ETHERNET, &b).is_err());
        let vb = snap.process_snapped(ts, LINKTYPE_ETHERNET, &mut b, w.len(), &mut sink);
        // ...but is translated, byte for byte as the whole frame's first
        // 64 bytes (addresses, ports, IPv4 and transport checksums).
        assert_eq!(vb, Verdict::TranslatedOut, "cut frame {i}");
        assert_eq!(b, a[..SNAPLEN], "cut frame {i}");
        assert_ne!(b, w[..SNAPLEN], "it was rewritten");
    }
    // The whole frames' checksums stay valid after translation (so the cut
    // ones, identical, carry the right checksums).
    let s = snap.stats();
    assert_eq!(s.sessions_created, full.stats().sessions_created);
    assert_eq!(s.sessions_created, 4, "UDP, TCP (2 packets), echo, UDP");
    assert_eq!(s.count(Verdict::Snapped), 0);
    // A return packet of a cut packet's session (the capture is taken on
    // the inside: replies are in inside form) matches the session.
    let mut n = nat();
    let mut out = whole[0][..SNAPLEN].to_vec();
    n.process_snapped(1, LINKTYPE_ETHERNET, &mut out, whole[0].len(), &mut sink);
    let mut reply = frame(REMOTE, INSIDE, 17, &[], &udp(53, 4000, 10));
    let v = n.process(2, LINKTYPE_ETHERNET, &mut reply, &mut sink);
    assert_eq!(v, Verdict::TranslatedIn);
}

#[test]
fn a_packet_cut_before_its_headers_end_is_snapped_not_malformed() {
    let mut n = nat();
    let mut sink = AllRecords(|_| {});
    // 40 bytes of IPv4 options: 14 + 60 + 8 = 82 bytes of headers > 64.
    let opts = [1u8; 40];
    let w = frame(INSIDE, REMOTE, 17, &opts, &udp(4000, 53, 100));
    let mut cut = w[..SNAPLEN].to_vec();
    let v = n.process_snapped(1, LINKTYPE_ETHERNET, &mut cut, w.len(), &mut sink);
    assert_eq!(v, Verdict::Snapped);
    assert_eq!(cut, w[..SNAPLEN], "left as is");
    // The same bytes with no snap length recorded are a malformed frame.
    let v = n.process(2, LINKTYPE_ETHERNET, &mut cut, &mut sink);
    assert!(matches!(v, Verdict::Malformed(_)), "{v:?}");
    // An ICMP error whose quote was cut: its checksum covers bytes that
    // were not captured, so it cannot be fixed up.
    let quoted = frame(REMOTE, INSIDE, 17, &[], &udp(53, 4000, 0));
    let mut icmp = vec![3, 3, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&quoted[14..]);
    icmp.extend_from_slice(&[0; 60]);
    let w = frame(INSIDE, REMOTE, 1, &[], &icmp);
    let mut cut = w[..SNAPLEN].to_vec();
    let v = n.process_snapped(3, LINKTYPE_ETHERNET, &mut cut, w.len(), &mut sink);
    assert_eq!(v, Verdict::Snapped);
    // Cut inside the Ethernet header.
    let mut tiny = w[..10].to_vec();
    let v = n.process_snapped(4, LINKTYPE_ETHERNET, &mut tiny, w.len(), &mut sink);
    assert_eq!(v, Verdict::Snapped);
    // A cut frame that is wrong in itself keeps its own verdict.
    let mut bad = frame(INSIDE, REMOTE, 17, &[], &udp(4000, 53, 100));
    bad[14] = 0x44; // IHL 4
    let wl = bad.len();
    let v = n.process_snapped(5, LINKTYPE_ETHERNET, &mut bad[..SNAPLEN], wl, &mut sink);
    assert_eq!(
        v,
        Verdict::Malformed(dplog_nat::MalformedReason::Ipv4IhlTooSmall)
    );
    assert_eq!(n.stats().count(Verdict::Snapped), 3);
    assert_eq!(n.stats().sessions_created, 0);
    assert_eq!(Verdict::Snapped.name(), "snapped");
}

// --- pcapng written by hand, cut at a snap length of 64 -------------------

/// A pcapng capture of `frames` (Ethernet, one microsecond apart), each cut
/// to `snaplen` bytes.
fn pcapng(frames: &[Vec<u8>], snaplen: usize) -> Vec<u8> {
    let mut f = shb();
    f.extend(idb(snaplen as u32));
    for (i, w) in frames.iter().enumerate() {
        let ts = 1_700_000_000_000_000u64 + i as u64; // microseconds
        let cap = &w[..w.len().min(snaplen)];
        f.extend(epb(0, ts, cap, cap.len() as u32, w.len() as u32));
    }
    f
}

#[test]
fn a_snapped_pcapng_through_the_whole_program() {
    let dir = tempfile::tempdir().unwrap();
    let mut frames = Vec::new();
    for i in 0..20u16 {
        // Outbound with 300-byte payloads: cut, headers intact.
        frames.push(frame(
            INSIDE + u32::from(i % 4),
            REMOTE,
            17,
            &[],
            &udp(5000 + i, 53, 300),
        ));
    }
    for i in 0..5u16 {
        // Headers past the snap length: snapped.
        frames.push(frame(INSIDE, REMOTE, 17, &[1; 40], &udp(6000 + i, 53, 100)));
    }
    // Short enough to be captured whole.
    frames.push(frame(INSIDE, REMOTE, 17, &[], &udp(7000, 53, 4)));
    let bytes = pcapng(&frames, SNAPLEN);
    assert!(bytes.len() < 4096, "a small capture: {}", bytes.len());
    let pcap = dir.path().join("snapped.pcapng");
    std::fs::write(&pcap, &bytes).unwrap();
    for workers in [1usize, 2] {
        let out = dir.path().join(format!("snapped{workers}.jsonl"));
        let mut cfg = AppConfig::default();
        cfg.input.pcap = Some(pcap.clone());
        cfg.nat.inside = vec!["10.0.0.0/8".parse().unwrap()];
        cfg.format.kind = Format::Json;
        cfg.sink = SinkConfig::File(FileSinkConfig {
            path: out.clone(),
            ..Default::default()
        });
        cfg.dataplane.workers = workers;
        let s = run(&cfg).unwrap();
        assert_eq!(s.packets, 26);
        assert_eq!(s.capture_snapped, 25);
        assert_eq!(s.verdict("translated_out"), 21);
        assert_eq!(s.verdict("snapped"), 5);
        assert!(
            s.verdicts.iter().all(|(n, _)| !n.starts_with("malformed")),
            "{:?}",
            s.verdicts
        );
        assert_eq!(s.sessions_created, 21);
        assert_eq!(s.records.written, 42);
        let text = s.to_text();
        assert!(
            text.contains("snapped            25 packets cut by the snap length"),
            "{text}"
        );
        let lines = std::fs::read_to_string(&out).unwrap().lines().count();
        assert_eq!(lines, 42);
    }
}
