//! Hairpinning (RFC 4787 REQ-9) between two inside hosts that the shard
//! function puts on different workers: the dispatcher sends a packet to a
//! pool address and port to the worker owning that port, so both
//! directions of the hairpin flow meet the mappings they need.

use std::io::Write;
use std::path::Path;

use dplog::config::{FileSinkConfig, SinkConfig};
use dplog::formatters::Format;
use dplog_nat::app::{run, AppConfig};
use dplog_nat::checksum::transport_checksum;
use dplog_nat::workers::worker_of_inside;
use dplog_nat::{worker_port_range, AllRecords, Nat44, Verdict, LINKTYPE_ETHERNET};

const REMOTE: u32 = 0xCB00_7109; // 203.0.113.9

/// Ethernet + IPv4 + UDP `sport → dport` with valid checksums.
fn udp(src: u32, dst: u32, sport: u16, dport: u16) -> Vec<u8> {
    let mut u = sport.to_be_bytes().to_vec();
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&12u16.to_be_bytes());
    u.extend_from_slice(&[0, 0, 1, 2, 3, 4]);
    let c = transport_checksum(src, dst, 17, &u);
    u[6..8].copy_from_slice(&c.to_be_bytes());
    let mut ip = vec![0x45, 0, 0, 32, 0, 1, 0x40, 0, 64, 17, 0, 0];
    ip.extend_from_slice(&src.to_be_bytes());
    ip.extend_from_slice(&dst.to_be_bytes());
    let c = dplog_nat::checksum::internet_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(&ip);
    f.extend_from_slice(&u);
    f
}

fn src_of(f: &[u8]) -> (u32, u16) {
    (
        u32::from_be_bytes(f[26..30].try_into().unwrap()),
        u16::from_be_bytes(f[34..36].try_into().unwrap()),
    )
}

fn dst_of(f: &[u8]) -> (u32, u16) {
    (
        u32::from_be_bytes(f[30..34].try_into().unwrap()),
        u16::from_be_bytes(f[36..38].try_into().unwrap()),
    )
}

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut out = Vec::new();
    out.extend_from_slice(&0xA1B2_C3D4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        out.extend_from_slice(&(1_700_000_000u32 + i as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    std::fs::File::create(path)
        .unwrap()
        .write_all(&out)
        .unwrap();
}

fn config(pcap: &Path, out: &Path, workers: usize) -> AppConfig {
    let mut c = AppConfig::default();
    c.input.pcap = Some(pcap.to_path_buf());
    c.nat.inside = vec!["10.0.0.0/8".parse().unwrap()];
    c.format.kind = Format::Json;
    c.sink = SinkConfig::File(FileSinkConfig {
        path: out.to_path_buf(),
        ..Default::default()
    });
    c.dataplane.workers = workers;
    c
}

#[test]
fn hairpinning_works_between_hosts_on_different_workers() {
    // Two inside hosts that the shard function puts on different workers.
    let h1 = 0x0A00_0001u32;
    let h2 = (0x0A00_0002u32..)
        .find(|&h| worker_of_inside(h, 2) != worker_of_inside(h1, 2))
        .unwrap();
    let (w1, w2) = (worker_of_inside(h1, 2), worker_of_inside(h2, 2));
    assert_ne!(w1, w2);

    // Predict the mappings with one engine set up as H2's worker: H2's
    // session to the outside, then H1's hairpin session (created on the
    // worker owning H2's external port), both sequential.
    let dir = tempfile::tempdir().unwrap();
    let base = config(Path::new("-"), Path::new("-"), 2);
    let mut c = base.nat_config();
    c.port_range = worker_port_range(c.port_range, w2, 2).unwrap();
    let mut owner = Nat44::new(c).unwrap();
    let mut sink = AllRecords(|_| {});
    let mut a = udp(h2, REMOTE, 5000, 53);
    assert_eq!(
        owner.process(1, LINKTYPE_ETHERNET, &mut a, &mut sink),
        Verdict::TranslatedOut
    );
    let (e2, p2) = src_of(&a);
    let mut b = udp(h1, e2, 6000, p2);
    assert_eq!(
        owner.process(2, LINKTYPE_ETHERNET, &mut b, &mut sink),
        Verdict::Hairpinned
    );
    assert_eq!(dst_of(&b), (h2, 5000), "delivered to H2");
    let (e1, p1) = src_of(&b);

    // The capture: H2 talks to the outside, H1 reaches H2 through E2:p2,
    // H2 answers to E1:p1 (H1's hairpin mapping), twice each way.
    let frames = vec![
        udp(h2, REMOTE, 5000, 53),
        udp(h1, e2, 6000, p2),
        udp(h2, e1, 5000, p1),
        udp(h1, e2, 6000, p2),
        udp(h2, e1, 5000, p1),
    ];
    let pcap = dir.path().join("hairpin.pcap");
    write_pcap(&pcap, &frames);
    let out = dir.path().join("hairpin.jsonl");
    let s = run(&config(&pcap, &out, 2)).unwrap();
    assert_eq!(s.packets, 5);
    assert_eq!(s.verdict("hairpin_no_mapping"), 0, "{:?}", s.verdicts);
    // Every packet of the hairpin flow, both ways, was translated.
    assert_eq!(s.verdict("translated_out"), 1);
    assert_eq!(s.verdict("hairpinned"), 4, "{:?}", s.verdicts);
    // H2's outside session and the two hairpin sessions (H1 to E2:p2, H2
    // to E1:p1) all live on the worker owning H2's port.
    assert_eq!(s.sessions_created, 3);
    assert_eq!(s.sessions_deleted, 3);
    assert_eq!(s.per_worker[w2].sessions_created, 3);
    assert_eq!(s.per_worker[w1].sessions_created, 0);
    assert_eq!(s.records.written, 6);
}

/// The fragments of one UDP datagram `sport → dport` with `payload`
/// (checksum over the whole datagram), `chunk` bytes of IP payload each
/// (a multiple of 8), all with IP id `id`.
fn udp_fragments(
    src: u32,
    dst: u32,
    sport: u16,
    dport: u16,
    payload: &[u8],
    id: u16,
    chunk: usize,
) -> Vec<Vec<u8>> {
    let mut u = sport.to_be_bytes().to_vec();
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    let c = transport_checksum(src, dst, 17, &u);
    u[6..8].copy_from_slice(&c.to_be_bytes());
    let parts: Vec<&[u8]> = u.chunks(chunk).collect();
    let last = parts.len() - 1;
    parts
        .iter()
        .enumerate()
        .map(|(i, part)| {
            let more = if i < last { 0x2000u16 } else { 0 };
            let word = more | ((i * chunk / 8) as u16);
            let total = (20 + part.len()) as u16;
            let mut ip = vec![0x45, 0];
            ip.extend_from_slice(&total.to_be_bytes());
            ip.extend_from_slice(&id.to_be_bytes());
            ip.extend_from_slice(&word.to_be_bytes());
            ip.extend_from_slice(&[64, 17, 0, 0]);
            ip.extend_from_slice(&src.to_be_bytes());
            ip.extend_from_slice(&dst.to_be_bytes());
            let c = dplog_nat::checksum::internet_checksum(&ip);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
            f.extend_from_slice(&ip);
            f.extend_from_slice(part);
            f
        })
        .collect()
}

/// Checks a translated datagram's fragments: every IPv4 header checksum
/// right, from `from` to `to` (addresses), and the reassembled UDP
/// datagram's ports and checksum; returns its (source port, destination
/// port).
fn check_reassembled(frags: &[Vec<u8>], from: u32, to: u32, payload: &[u8]) -> (u16, u16) {
    let mut whole = Vec::new();
    for f in frags {
        assert_eq!(
            dplog_nat::checksum::internet_checksum(&f[14..34]),
            0,
            "IPv4 header checksum"
        );
        assert_eq!(src_of(f).0, from, "source address");
        assert_eq!(dst_of(f).0, to, "destination address");
        whole.extend_from_slice(&f[34..]);
    }
    assert_eq!(&whole[8..], payload);
    assert_eq!(transport_checksum(from, to, 17, &whole), 0, "UDP checksum");
    (
        u16::from_be_bytes([whole[0], whole[1]]),
        u16::from_be_bytes([whole[2], whole[3]]),
    )
}

fn hairpin_fragments_reach_the_owner(workers: usize) {
    let h1 = 0x0A00_0001u32;
    let h2 = (0x0A00_0002u32..)
        .find(|&h| worker_of_inside(h, workers) != worker_of_inside(h1, workers))
        .unwrap();
    let w2 = worker_of_inside(h2, workers);
    let dir = tempfile::tempdir().unwrap();
    let base = config(Path::new("-"), Path::new("-"), workers);
    // The engines the run will have, to predict the mappings and check
    // the translated bytes.
    let mut engines = dplog_nat::app::worker_engines(&base.nat_config(), workers).unwrap();
    let mut sink = AllRecords(|_| {});
    let mut a = udp(h2, REMOTE, 5000, 53);
    assert_eq!(
        engines[w2].process(1, LINKTYPE_ETHERNET, &mut a, &mut sink),
        Verdict::TranslatedOut
    );
    let (e2, p2) = src_of(&a);

    // H1 → E2:p2: two datagrams of 3 fragments each (8 + 40 bytes of UDP
    // in 16-byte pieces); then H2 answers to H1's hairpin mapping, also
    // fragmented. Capture times 1 s apart.
    let payload: Vec<u8> = (0..40u8).collect();
    let d1 = udp_fragments(h1, e2, 6000, p2, &payload, 0x1111, 16);
    let d2 = udp_fragments(h1, e2, 6000, p2, &payload, 0x2222, 16);
    assert_eq!(d1.len(), 3);
    let mut frames = vec![udp(h2, REMOTE, 5000, 53)];
    frames.extend(d1.iter().cloned());
    frames.extend(d2.iter().cloned());

    // Predict H1's hairpin mapping on the owner (w2), translating d1 and
    // d2 there in capture order, and check the bytes.
    let mut t = 2u64;
    let mut translated = Vec::new();
    for f in d1.iter().chain(d2.iter()) {
        let mut f = f.clone();
        let v = engines[w2].process(t, LINKTYPE_ETHERNET, &mut f, &mut sink);
        assert!(
            matches!(v, Verdict::Hairpinned | Verdict::FragmentMatched),
            "{v:?}"
        );
        translated.push(f);
        t += 1;
    }
    let e1 = src_of(&translated[0]).0;
    let (p1, to_port) = check_reassembled(&translated[..3], e1, h2, &payload);
    assert_eq!(to_port, 5000, "delivered to H2:5000");
    assert_eq!(
        check_reassembled(&translated[3..], e1, h2, &payload),
        (p1, 5000)
    );
    let d3 = udp_fragments(h2, e1, 5000, p1, &payload, 0x3333, 16);
    let mut back = Vec::new();
    for f in &d3 {
        let mut f = f.clone();
        let v = engines[w2].process(t, LINKTYPE_ETHERNET, &mut f, &mut sink);
        assert!(
            matches!(v, Verdict::Hairpinned | Verdict::FragmentMatched),
            "{v:?}"
        );
        back.push(f);
        t += 1;
    }
    assert_eq!(check_reassembled(&back, e2, h1, &payload), (p2, 6000));
    frames.extend(d3.iter().cloned());

    let pcap = dir.path().join("hairpin_frags.pcap");
    write_pcap(&pcap, &frames);
    let out = dir.path().join("hairpin_frags.jsonl");
    let s = run(&config(&pcap, &out, workers)).unwrap();
    assert_eq!(s.packets, 10);
    assert_eq!(s.verdict("fragment_no_session"), 0, "{:?}", s.verdicts);
    assert_eq!(s.verdict("translated_out"), 1);
    assert_eq!(s.verdict("hairpinned"), 3, "{:?}", s.verdicts);
    assert_eq!(s.verdict("fragment_matched"), 6, "{:?}", s.verdicts);
    // Every packet went to the worker owning the mappings.
    assert_eq!(s.per_worker[w2].packets, 10);
    assert_eq!(s.per_worker[w2].translated, 10);
    assert_eq!(s.hairpin_fragments.tracked, 3);
    assert_eq!(s.hairpin_fragments.routed, 6);
    assert_eq!(
        (s.hairpin_fragments.evicted, s.hairpin_fragments.expired),
        (0, 0)
    );
    // H2's outside session and the two hairpin sessions: created and
    // deleted once each.
    assert_eq!((s.sessions_created, s.sessions_deleted), (3, 3));
    assert_eq!(s.records.written, 6);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(s
        .to_text()
        .contains("hairpin fragments  datagrams 3  later fragments routed 6"));
    assert_eq!(text.lines().count(), 6);
}

#[test]
fn later_fragments_of_hairpin_datagrams_follow_the_first_2_workers() {
    hairpin_fragments_reach_the_owner(2);
}

#[test]
fn later_fragments_of_hairpin_datagrams_follow_the_first_3_workers() {
    hairpin_fragments_reach_the_owner(3);
}
