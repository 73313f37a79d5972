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
