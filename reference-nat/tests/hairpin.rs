//! Hairpinning (RFC 4787 REQ-9) between two inside hosts that the shard
//! function puts on different workers, two-stage: the sender's worker
//! translates the source with the sender's own endpoint-independent
//! mapping (REQ-1: the same external address and port as its traffic to
//! the outside), then hands the packet to the worker owning the
//! destination pool port, which translates the destination. Both
//! directions, fragments, 2 and 3 workers, port slices and deterministic
//! NAT (RFC 7422); byte checks on the engines, counters and logs through
//! the capture path.

use std::path::Path;

mod pcap_out;

/// Writes `frames` one second apart from 2023-11-14 22:13:20 UTC.
fn write_capture(path: &Path, frames: &[Vec<u8>]) {
    let t0 = 1_700_000_000u64 * 1_000_000;
    pcap_out::write_pcap(
        path,
        frames
            .iter()
            .enumerate()
            .map(|(i, f)| (t0 + i as u64 * 1_000_000, f)),
    );
}

use dplog::config::{FileSinkConfig, SinkConfig};
use dplog::formatters::Format;
use dplog_nat::app::worker_engines;
use dplog_nat::app::{run, AppConfig};
use dplog_nat::checksum::transport_checksum;
use dplog_nat::workers::worker_of_inside;
use dplog_nat::{AllRecords, Nat44, Verdict, LINKTYPE_ETHERNET};

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

/// Hands `frame` to worker `w` as the dispatcher would and, for a
/// [`Verdict::HairpinHandoff`], on to its owner's stage two; returns the
/// final verdict and the worker that finished the packet.
fn deliver(engines: &mut [Nat44], w: usize, ts: u64, frame: &mut [u8]) -> (Verdict, usize) {
    let mut sink = AllRecords(|_| {});
    let v = engines[w].process(ts, LINKTYPE_ETHERNET, frame, &mut sink);
    if v != Verdict::HairpinHandoff {
        return (v, w);
    }
    let owner = engines[w].handoff_target();
    assert_ne!(owner, w);
    let len = frame.len();
    (
        engines[owner].hairpin_in(ts, LINKTYPE_ETHERNET, frame, len),
        owner,
    )
}

/// Two inside hosts on different workers of `workers`.
fn hosts(workers: usize) -> (u32, u32) {
    let h1 = 0x0A00_0001u32;
    let h2 = (0x0A00_0002u32..)
        .find(|&h| worker_of_inside(h, workers) != worker_of_inside(h1, workers))
        .unwrap();
    (h1, h2)
}

/// What the capture of [`scenario`] holds and what its translation gave.
struct Scenario {
    frames: Vec<Vec<u8>>,
    /// Hairpin packets (each counted once as `hairpin_handoff`).
    handoffs: u64,
    /// (inside addr, inside port) → (external addr, port), as the outside
    /// saw each host.
    e1: (u32, u16),
    e2: (u32, u16),
}

/// H1:6000 and H2:5000 each talk to the outside, then H1 reaches H2
/// through H2's external address and port (a plain packet and a datagram
/// in 3 fragments) and H2 answers to H1's (the same again). Translated on
/// engines set up as the run's workers, checking every byte that
/// changes; returns the capture.
fn scenario(base: &AppConfig, workers: usize) -> Scenario {
    let (h1, h2) = hosts(workers);
    let (w1, w2) = (worker_of_inside(h1, workers), worker_of_inside(h2, workers));
    let base_nat = base.nat_config();
    let mut engines = worker_engines(&base_nat, workers).unwrap();
    for (i, e) in engines.iter_mut().enumerate() {
        e.set_hairpin_handoff(i, workers, base_nat.port_range);
    }
    let mut frames = Vec::new();
    let mut ts = 1u64;
    let mut out =
        |engines: &mut [Nat44], h: u32, port: u16, w: usize, frames: &mut Vec<Vec<u8>>| {
            let f = udp(h, REMOTE, port, 53);
            frames.push(f.clone());
            let mut f = f;
            assert_eq!(deliver(engines, w, ts, &mut f), (Verdict::TranslatedOut, w));
            ts += 1;
            src_of(&f)
        };
    let e1 = out(&mut engines, h1, 6000, w1, &mut frames);
    let e2 = out(&mut engines, h2, 5000, w2, &mut frames);
    let payload: Vec<u8> = (0..40u8).collect();
    let mut handoffs = 0;
    for (from, to, fw, tw, ext_from, ext_to, id) in [
        (h1, h2, w1, w2, e1, e2, 0x1111u16),
        (h2, h1, w2, w1, e2, e1, 0x2222),
    ] {
        let (fport, tport) = if from == h1 {
            (6000, 5000)
        } else {
            (5000, 6000)
        };
        // One unfragmented packet to the peer's external address and port.
        let f = udp(from, ext_to.0, fport, ext_to.1);
        frames.push(f.clone());
        let mut f = f;
        assert_eq!(
            deliver(&mut engines, fw, 10, &mut f),
            (Verdict::Hairpinned, tw)
        );
        assert_eq!(src_of(&f), ext_from, "the sender's one mapping (REQ-1)");
        assert_eq!(dst_of(&f), (to, tport), "delivered to the peer");
        assert_eq!(dplog_nat::checksum::internet_checksum(&f[14..34]), 0);
        assert_eq!(transport_checksum(ext_from.0, to, 17, &f[34..]), 0);
        // One datagram in 3 fragments, all from the sender's worker.
        let d = udp_fragments(from, ext_to.0, fport, ext_to.1, &payload, id, 16);
        frames.extend(d.iter().cloned());
        let mut done = Vec::new();
        for (i, f) in d.iter().enumerate() {
            let mut f = f.clone();
            let want = if i == 0 {
                Verdict::Hairpinned
            } else {
                Verdict::FragmentMatched
            };
            assert_eq!(deliver(&mut engines, fw, 11, &mut f), (want, tw));
            done.push(f);
        }
        assert_eq!(
            check_reassembled(&done, ext_from.0, to, &payload),
            (ext_from.1, tport)
        );
        handoffs += 4;
    }
    Scenario {
        frames,
        handoffs,
        e1,
        e2,
    }
}

/// `(src, sport) → (postNAT src, port)` per session create.
type Creates = Vec<((String, u64), (String, u64))>;

/// `src → (postNAT src, first port, last port)` per port block record.
type Blocks = Vec<(String, (String, u64, u64))>;

/// `(src, sport) → (postNAT src, port)` of every session create in a JSON
/// log, the number of deletes and the port block (RFC 7422 mapping)
/// records: `src → (postNAT src, first port, last port)`.
fn creates(log: &Path) -> (Creates, usize, Blocks) {
    let text = std::fs::read_to_string(log).unwrap();
    let mut c = Vec::new();
    let mut deletes = 0;
    let mut blocks = Vec::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        match v["natEvent"].as_u64() {
            Some(4) => c.push((
                (
                    v["sourceIPv4Address"].as_str().unwrap().to_string(),
                    v["sourceTransportPort"].as_u64().unwrap(),
                ),
                (
                    v["postNATSourceIPv4Address"].as_str().unwrap().to_string(),
                    v["postNAPTSourceTransportPort"].as_u64().unwrap(),
                ),
            )),
            Some(5) => deletes += 1,
            Some(16) => blocks.push((
                v["sourceIPv4Address"].as_str().unwrap().to_string(),
                (
                    v["postNATSourceIPv4Address"].as_str().unwrap().to_string(),
                    v["portRangeStart"].as_u64().unwrap(),
                    v["portRangeEnd"].as_u64().unwrap(),
                ),
            )),
            e => panic!("unexpected natEvent {e:?} in {line}"),
        }
    }
    (c, deletes, blocks)
}

fn dotted(a: u32) -> String {
    std::net::Ipv4Addr::from(a).to_string()
}

fn two_stage_hairpin(workers: usize, deterministic: bool) {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("hairpin.pcap");
    let out = dir.path().join("hairpin.jsonl");
    let mut cfg = config(&pcap, &out, workers);
    if deterministic {
        cfg.nat.port_allocation = dplog_nat::app::PortAllocationName::Deterministic;
        cfg.nat.inside = vec!["10.0.0.0/24".parse().unwrap()];
    }
    let sc = scenario(&cfg, workers);
    write_capture(&pcap, &sc.frames);
    let s = run(&cfg).unwrap();
    let n = sc.frames.len() as u64;
    assert_eq!(s.packets, n);
    assert_eq!(s.verdict("translated_out"), 2, "{:?}", s.verdicts);
    assert_eq!(
        s.verdict("hairpin_handoff"),
        sc.handoffs,
        "{:?}",
        s.verdicts
    );
    assert_eq!(s.verdict("hairpin_no_mapping"), 0, "{:?}", s.verdicts);
    assert_eq!(s.verdict("fragment_no_session"), 0, "{:?}", s.verdicts);
    // Every handed-off packet was delivered by its owner.
    assert_eq!(s.hairpin_in, (sc.handoffs, sc.handoffs, 0));
    assert!(s.to_text().contains(&format!(
        "hairpin handoff    received {0}  delivered {0}  dropped 0",
        sc.handoffs
    )));
    // Sessions: H1 and H2 to the outside, H1 to E2:p2, H2 to E1:p1, each
    // created and deleted once, on the sender's worker.
    assert_eq!((s.sessions_created, s.sessions_deleted), (4, 4));
    let (h1, h2) = hosts(workers);
    let (w1, w2) = (worker_of_inside(h1, workers), worker_of_inside(h2, workers));
    assert_eq!(s.per_worker[w1].sessions_created, 2);
    assert_eq!(s.per_worker[w2].sessions_created, 2);
    let (c, deletes, blocks) = creates(&out);
    if deterministic {
        // RFC 7422: the mapping is logged once at start (natEvent 16 per
        // inside address), sessions are not; each host's one external
        // endpoint (the same for its outside and hairpin sessions, checked
        // on the engines) lies in its block.
        assert_eq!((c.len(), deletes), (0, 0));
        assert_eq!(blocks.len() as u64, s.config_records);
        assert_eq!(s.records.written, s.config_records);
        for (h, e) in [(h1, sc.e1), (h2, sc.e2)] {
            let (_, (ext, lo, hi)) = blocks.iter().find(|(a, _)| *a == dotted(h)).unwrap();
            assert_eq!(*ext, dotted(e.0));
            assert!(
                (*lo..=*hi).contains(&u64::from(e.1)),
                "{e:?} in {lo}..={hi}"
            );
        }
        return;
    }
    // One mapping per inside endpoint (RFC 4787 REQ-1): each host's two
    // creates carry the same external address and port, the one the
    // engines predicted.
    assert!(blocks.is_empty());
    assert_eq!((c.len(), deletes), (4, 4));
    assert_eq!(s.records.written, 8);
    for (h, port, e) in [(h1, 6000, sc.e1), (h2, 5000, sc.e2)] {
        let mine: Vec<_> = c
            .iter()
            .filter(|(inside, _)| *inside == (dotted(h), port))
            .map(|(_, ext)| ext.clone())
            .collect();
        assert_eq!(mine.len(), 2, "{c:?}");
        assert!(
            mine.iter().all(|ext| *ext == (dotted(e.0), u64::from(e.1))),
            "{mine:?} vs {e:?}"
        );
    }
}

#[test]
fn two_stage_hairpin_keeps_one_mapping_2_workers() {
    two_stage_hairpin(2, false);
}

#[test]
fn two_stage_hairpin_keeps_one_mapping_3_workers() {
    two_stage_hairpin(3, false);
}

#[test]
fn two_stage_hairpin_deterministic_nat_2_workers() {
    two_stage_hairpin(2, true);
}

#[test]
fn two_stage_hairpin_deterministic_nat_3_workers() {
    two_stage_hairpin(3, true);
}

#[test]
fn hairpin_to_an_unmapped_pool_port_is_dropped_by_its_owner() {
    let (h1, _) = hosts(2);
    let w1 = worker_of_inside(h1, 2);
    let base = config(Path::new("-"), Path::new("-"), 2);
    let nat = base.nat_config();
    let mut engines = worker_engines(&nat, 2).unwrap();
    for (i, e) in engines.iter_mut().enumerate() {
        e.set_hairpin_handoff(i, 2, nat.port_range);
    }
    // A port of the other worker's slice that nobody holds.
    let (lo, _) = dplog_nat::worker_port_range(nat.port_range, 1 - w1, 2).unwrap();
    let pool = u32::from(nat.pool.network());
    let mut f = udp(h1, pool + 1, 6000, lo + 7);
    assert_eq!(
        deliver(&mut engines, w1, 1, &mut f),
        (Verdict::HairpinNoMapping, 1 - w1)
    );
    let st = engines[1 - w1].stats();
    assert_eq!(
        (
            st.hairpin_in_received,
            st.hairpin_in_delivered,
            st.hairpin_in_dropped
        ),
        (1, 0, 1)
    );
    assert_eq!(st.packets, 0, "counted by the sender");
    assert_eq!(engines[w1].stats().count(Verdict::HairpinHandoff), 1);
    // A later fragment whose first was never handed over.
    let d = udp_fragments(h1, pool + 1, 6000, lo + 7, &[0; 16], 5, 16);
    let mut later = d[1].clone();
    let len = later.len();
    assert_eq!(
        engines[1 - w1].hairpin_in(2, LINKTYPE_ETHERNET, &mut later, len),
        Verdict::FragmentNoSession
    );
}

#[test]
fn many_hairpins_between_workers_through_one_batch_rings_finish_lossless() {
    // 6 hosts on 3 workers, 3000 hairpin packets between random pairs,
    // handoff rings of one batch: workers wait on each other's full rings
    // and must keep draining (no deadlock, nothing lost).
    let workers = 3;
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("many.pcap");
    let out = dir.path().join("many.jsonl");
    let mut cfg = config(&pcap, &out, workers);
    cfg.dataplane.handoff_batches = 1;
    let base = cfg.nat_config();
    let mut engines = worker_engines(&base, workers).unwrap();
    for (i, e) in engines.iter_mut().enumerate() {
        e.set_hairpin_handoff(i, workers, base.port_range);
    }
    let mut hosts = Vec::new();
    for w in 0..workers {
        hosts.extend(
            (0x0A00_0100u32..)
                .filter(|&h| worker_of_inside(h, workers) == w)
                .take(2),
        );
    }
    let mut frames = Vec::new();
    let mut ext = Vec::new();
    for (i, &h) in hosts.iter().enumerate() {
        let f = udp(h, REMOTE, 7000 + i as u16, 53);
        frames.push(f.clone());
        let mut f = f;
        let w = worker_of_inside(h, workers);
        assert_eq!(
            deliver(&mut engines, w, 1, &mut f).0,
            Verdict::TranslatedOut
        );
        ext.push(src_of(&f));
    }
    let mut x = 0x2545_F491u32;
    let (mut cross, mut local) = (0u64, 0u64);
    while frames.len() < 3006 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        let (i, j) = ((x >> 8) as usize % 6, (x >> 20) as usize % 6);
        if i == j {
            continue;
        }
        let (hi, hj) = (hosts[i], hosts[j]);
        if worker_of_inside(hi, workers) == worker_of_inside(hj, workers) {
            local += 1;
        } else {
            cross += 1;
        }
        frames.push(udp(hi, ext[j].0, 7000 + i as u16, ext[j].1));
    }
    write_capture(&pcap, &frames);
    let s = run(&cfg).unwrap();
    assert_eq!(s.packets, 3006);
    assert_eq!(s.verdict("translated_out"), 6);
    assert_eq!(s.verdict("hairpin_handoff"), cross, "{:?}", s.verdicts);
    assert_eq!(s.verdict("hairpinned"), local, "{:?}", s.verdicts);
    assert_eq!(s.hairpin_in, (cross, cross, 0));
    assert_eq!(s.sessions_created, s.sessions_deleted);
    assert_eq!(s.records.written, 2 * s.sessions_created);
    // One mapping per host across all its sessions (REQ-1).
    let (c, _, _) = creates(&out);
    for ((src, port), e) in &c {
        let i = hosts.iter().position(|&h| dotted(h) == *src).unwrap();
        assert_eq!(*port, 7000 + i as u64);
        assert_eq!(*e, (dotted(ext[i].0), u64::from(ext[i].1)));
    }
}

#[test]
fn the_live_view_counts_handoffs_as_neither_drops_nor_twice() {
    use dplog_nat::NatStats;
    let prev = NatStats::default();
    let mut now = NatStats {
        packets: 10,
        hairpin_in_received: 3,
        hairpin_in_delivered: 2,
        hairpin_in_dropped: 1,
        ..Default::default()
    };
    now.verdicts[Verdict::TranslatedOut.index()] = 4;
    now.verdicts[Verdict::HairpinHandoff.index()] = 3;
    now.verdicts[Verdict::InboundNoSession.index()] = 3;
    let line = dplog_nat::app::live_line(1.0, 1.0, &prev, &now, 0, &Default::default(), 16);
    // In 10, out 4 translated here + 2 delivered for other workers.
    assert!(line.contains("in 10 pps  out 6 pps"), "{line}");
    assert!(
        line.contains("  drops inbound_no_session=3 hairpin_in_dropped=1"),
        "{line}"
    );
    assert!(!line.contains("hairpin_handoff"), "{line}");
}

#[test]
fn stage_two_survives_every_prefix_and_bit_flip_of_handed_over_frames() {
    // Whatever reaches hairpin_in (a snapped, cut or corrupted frame) gets
    // a verdict and a count, never a panic.
    let (h1, h2) = hosts(2);
    let (w1, w2) = (worker_of_inside(h1, 2), worker_of_inside(h2, 2));
    let base = config(Path::new("-"), Path::new("-"), 2);
    let nat = base.nat_config();
    let mut engines = worker_engines(&nat, 2).unwrap();
    for (i, e) in engines.iter_mut().enumerate() {
        e.set_hairpin_handoff(i, 2, nat.port_range);
    }
    let mut a = udp(h2, REMOTE, 5000, 53);
    deliver(&mut engines, w2, 1, &mut a);
    let e2 = src_of(&a);
    let mut frames = vec![udp(h1, e2.0, 6000, e2.1)];
    frames.extend(udp_fragments(h1, e2.0, 6000, e2.1, &[7; 40], 9, 16));
    // Source-translate them on the sender, as the handoff ring gets them.
    let mut sink = AllRecords(|_| {});
    for f in &mut frames {
        assert_eq!(
            engines[w1].process(2, LINKTYPE_ETHERNET, f, &mut sink),
            Verdict::HairpinHandoff
        );
    }
    let owner = &mut engines[w2];
    let mut calls = 0u64;
    for f in &frames {
        for cut in 0..=f.len() {
            let mut g = f[..cut].to_vec();
            owner.hairpin_in(3, LINKTYPE_ETHERNET, &mut g, f.len());
            calls += 1;
        }
        for bit in 0..f.len() * 8 {
            let mut g = f.clone();
            g[bit / 8] ^= 1 << (bit % 8);
            let len = g.len();
            owner.hairpin_in(3, LINKTYPE_ETHERNET, &mut g, len);
            calls += 1;
        }
    }
    let st = owner.stats();
    assert_eq!(st.hairpin_in_received, calls);
    assert_eq!(
        st.hairpin_in_delivered + st.hairpin_in_dropped,
        st.hairpin_in_received
    );
    assert!(st.hairpin_in_delivered > 0 && st.hairpin_in_dropped > 0);
    assert_eq!(
        st.packets, 1,
        "only H2's own packet: stage two is not counted there"
    );
}

/// `(natEvent, ms, proto, src, sport, dst, dport)` of every record of a
/// JSON log, sorted: what must not depend on the worker count (the
/// external ports do: each worker allocates from its own slice).
fn record_keys(log: &Path) -> Vec<(u64, u64, u64, String, u64, String, u64)> {
    let text = std::fs::read_to_string(log).unwrap();
    let mut keys: Vec<_> = text
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let n = |k: &str| v[k].as_u64().unwrap();
            let a = |k: &str| v[k].as_str().unwrap().to_string();
            (
                n("natEvent"),
                n("observationTimeMilliseconds"),
                n("protocolIdentifier"),
                a("sourceIPv4Address"),
                n("sourceTransportPort"),
                a("destinationIPv4Address"),
                n("destinationTransportPort"),
            )
        })
        .collect();
    keys.sort();
    keys
}

#[test]
fn hairpins_to_unmapped_pool_ports_log_the_same_for_1_2_and_3_workers() {
    // 8 hosts each talk to the outside, then send UDP hairpins to ports
    // nobody holds (spread over every worker's slice) on a pool address
    // none of them is paired with, and one fragmented datagram (2
    // fragments). Random port allocation, as in the trial that found the
    // difference: the sender's session is created (and logged) whether
    // the owner is its own worker or another.
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("unmapped.pcap");
    let hosts: Vec<u32> = (1..=8).map(|i| 0x0A02_0000 + i).collect();
    let mut base = config(&pcap, Path::new("-"), 1);
    base.nat.port_allocation = dplog_nat::app::PortAllocationName::Random;
    let nat = base.nat_config();
    let probe = Nat44::new(nat.clone()).unwrap();
    let paired: Vec<u32> = hosts.iter().map(|&h| probe.paired_address(h)).collect();
    let pool = u32::from(nat.pool.network());
    let target = (pool + 1..pool + 15)
        .find(|a| !paired.contains(a))
        .expect("a pool address no host is paired with");
    let ports: Vec<u16> = (0..8).map(|k| 1024 + 1 + k * 8000).collect();
    let mut frames = Vec::new();
    for (i, &h) in hosts.iter().enumerate() {
        frames.push(udp(h, REMOTE, 4000 + i as u16, 53));
    }
    for (i, &h) in hosts.iter().enumerate() {
        for (k, &p) in ports.iter().enumerate() {
            frames.push(udp(h, target, 5000 + k as u16, p));
        }
        let payload = [7u8; 40];
        frames.extend(udp_fragments(
            h,
            target,
            6000,
            ports[i % ports.len()] + 1,
            &payload,
            100 + i as u16,
            24,
        ));
    }
    assert!(frames.len() < 200);
    write_capture(&pcap, &frames);
    let hairpins = (hosts.len() * (ports.len() + 1)) as u64;
    let later_fragments = hosts.len() as u64; // one per datagram
    let mut runs = Vec::new();
    for workers in [1usize, 2, 3] {
        let out = dir.path().join(format!("w{workers}.jsonl"));
        let mut cfg = config(&pcap, &out, workers);
        cfg.nat.port_allocation = dplog_nat::app::PortAllocationName::Random;
        let s = run(&cfg).unwrap();
        assert_eq!(s.packets, frames.len() as u64);
        // One session per outside flow and per hairpin attempt, on the
        // sender, created and deleted.
        let sessions = hosts.len() as u64 + hairpins;
        assert_eq!(
            (s.sessions_created, s.sessions_deleted),
            (sessions, sessions),
            "{workers} workers: {:?}",
            s.verdicts
        );
        assert_eq!(s.records.written, 2 * sessions);
        let outcome = |name: &str| {
            s.outcomes
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0, |(_, c)| *c)
        };
        assert_eq!(outcome("translated_out"), hosts.len() as u64);
        assert_eq!(outcome("hairpin_no_mapping"), hairpins, "{:?}", s.outcomes);
        assert_eq!(outcome("fragment_no_session"), later_fragments);
        assert_eq!(outcome("hairpin_handoff"), 0, "{:?}", s.outcomes);
        assert_eq!(outcome("hairpinned"), 0);
        if workers == 1 {
            assert_eq!(s.hairpin_in, (0, 0, 0));
            assert_eq!(s.verdicts, s.outcomes);
        } else {
            // Handoffs did happen, and every one was dropped by its owner.
            let (received, delivered, dropped) = s.hairpin_in;
            assert!(received > 0, "{workers} workers: {:?}", s.verdicts);
            assert_eq!((delivered, dropped), (0, received));
            assert_eq!(s.verdict("hairpin_handoff"), received);
        }
        let keys = record_keys(&out);
        assert_eq!(keys.len() as u64, 2 * sessions);
        // The target address was never anyone's mapping.
        let (c, _, _) = creates(&out);
        assert!(c.iter().all(|(_, (a, _))| *a != dotted(target)));
        runs.push((s.outcomes.clone(), keys));
    }
    assert_eq!(runs[0], runs[1], "1 and 2 workers");
    assert_eq!(runs[0], runs[2], "1 and 3 workers");
}
