//! End to end: captures and the synthetic mix through the NAT, a dplog ring,
//! a table-driven formatter and the file sink; every output line parsed back
//! with serde_json and checked against the NAT's own summary.

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use dplog::config::{FileSinkConfig, SinkConfig};
use dplog::formatters::Format;
use dplog::Backpressure;
use dplog_nat::app::{run, AppConfig, Summary};
use ipnet::Ipv4Net;
use serde_json::Value;

fn capture(name: &str) -> PathBuf {
    // The captures live beside the repository (../shared/pcaps), never in it.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/pcaps")
        .join(name)
}

fn config(pcap: Option<PathBuf>, inside: &str, out: &Path, format: Format) -> AppConfig {
    let mut c = AppConfig::default();
    c.input.pcap = pcap;
    c.nat.inside = vec![inside.parse().unwrap()];
    c.nat.pool = "198.51.100.0/28".parse().unwrap();
    c.format.kind = format;
    c.sink = SinkConfig::File(FileSinkConfig {
        path: out.to_path_buf(),
        ..Default::default()
    });
    c
}

/// One parsed log line.
#[derive(Debug, Clone)]
struct Rec {
    event: u64,
    ts_ms: u64,
    proto: u64,
    src: (Ipv4Addr, u64),
    ext: (Ipv4Addr, u64),
    dst: (Ipv4Addr, u64),
}

fn ip(v: &Value, k: &str) -> Ipv4Addr {
    v[k].as_str()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
        .parse()
        .unwrap()
}

fn num(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

fn read_json(path: &Path) -> Vec<Rec> {
    let body = std::fs::read_to_string(path).unwrap();
    assert!(
        body.is_empty() || body.ends_with('\n'),
        "last line is whole"
    );
    body.lines()
        // In-band drop reports (dplog_core::report) are not NAT records.
        .filter(|l| !l.starts_with("{\"dplogEvent\""))
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            Rec {
                event: num(&v, "natEvent"),
                ts_ms: num(&v, "observationTimeMilliseconds"),
                proto: num(&v, "protocolIdentifier"),
                src: (ip(&v, "sourceIPv4Address"), num(&v, "sourceTransportPort")),
                ext: (
                    ip(&v, "postNATSourceIPv4Address"),
                    num(&v, "postNAPTSourceTransportPort"),
                ),
                dst: (
                    ip(&v, "destinationIPv4Address"),
                    num(&v, "destinationTransportPort"),
                ),
            }
        })
        .collect()
}

/// Every property the end-to-end issue asks of a capture's log.
fn check_log(summary: &Summary, recs: &[Rec], pool: Ipv4Net) {
    let creates: Vec<&Rec> = recs.iter().filter(|r| r.event == 4).collect();
    let deletes: Vec<&Rec> = recs.iter().filter(|r| r.event == 5).collect();
    assert_eq!(
        creates.len() + deletes.len(),
        recs.len(),
        "only natEvent 4 and 5"
    );
    assert_eq!(creates.len() as u64, summary.sessions_created);
    assert_eq!(deletes.len() as u64, summary.sessions_created);
    assert_eq!(summary.sessions_deleted, summary.sessions_created);

    // Every translated address lies in the pool.
    for r in recs {
        assert!(pool.contains(&r.ext.0), "{:?} outside {pool}", r.ext);
        assert!(r.ext.1 >= 1024 || r.proto == 1, "low external port {r:?}");
    }
    // Lifetimes: pair each delete with its create (same 5-tuple), then no
    // two sessions of *different* inside endpoints hold the same external
    // (address, port, protocol) at the same time. Sessions of one inside
    // endpoint share it by design: endpoint-independent mapping (RFC 4787).
    let mut open: HashMap<_, u64> = HashMap::new();
    let mut lives = Vec::new();
    for r in recs {
        let key = (r.proto, r.src, r.dst);
        if r.event == 4 {
            // No two creates share a pre-NAT 5-tuple while the first
            // session lives. (After its delete the same 5-tuple may open a
            // new session: DnsPackets.pcap reuses one 39 s after expiry.)
            assert!(
                open.insert(key, r.ts_ms).is_none(),
                "two creates for live {r:?}"
            );
        } else {
            let start = open.remove(&key).expect("delete without create");
            assert!(r.ts_ms >= start, "delete before create: {r:?}");
            lives.push((r.proto, r.ext, r.src, start, r.ts_ms));
        }
    }
    assert!(open.is_empty(), "sessions never deleted: {open:?}");
    let mut by_ext: HashMap<_, Vec<_>> = HashMap::new();
    for (proto, ext, src, a, b) in lives {
        by_ext.entry((proto, ext)).or_default().push((a, b, src));
    }
    for (ext, mut v) in by_ext {
        v.sort();
        for w in v.windows(2) {
            let ((_, end0, src0), (start1, _, src1)) = (w[0], w[1]);
            assert!(
                src0 == src1 || start1 > end0,
                "{ext:?} shared by {src0:?} and {src1:?} at the same time"
            );
        }
    }
    // Block mode: lossless, and every record the NAT logged was written.
    let r = &summary.records;
    assert_eq!(summary.backpressure, "block");
    assert_eq!(r.dropped, 0);
    assert_eq!(r.written, r.produced);
    assert_eq!(r.produced, summary.records_logged);
    assert_eq!(r.written, recs.len() as u64);
    assert_eq!(r.sink_errors, 0);
}

fn run_capture(name: &str, inside: &str) -> (Summary, Vec<Rec>) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sessions.jsonl");
    let cfg = config(Some(capture(name)), inside, &out, Format::Json);
    let s = run(&cfg).unwrap_or_else(|e| panic!("{name}: {e}"));
    let recs = read_json(&out);
    check_log(&s, &recs, cfg.nat.pool);
    (s, recs)
}

/// (capture, inside prefix, sessions). The prefix is the capture's private
/// client side; where both ends are private, the client alone (see
/// ../shared/pcaps/SOURCES.md).
const CAPTURES: &[(&str, &str, u64)] = &[
    ("example.pcap", "10.0.0.0/8", 65),
    ("many-protocols.pcap", "10.0.0.0/8", 128),
    ("http-packets.pcap", "172.16.30.190/32", 12),
    ("4KHttpRequests.pcap", "10.0.0.0/8", 121),
    ("DnsPackets.pcap", "10.0.0.0/25", 211),
    ("ip-frag.pcap", "10.118.213.212/32", 4),
    ("raw_ip.pcap", "10.0.0.0/8", 4),
    ("sll.pcap", "10.0.0.0/8", 1),
    ("tcpreplay-test.pcap", "172.16.11.12/32", 18),
    ("frag_with_padding.pcap", "10.0.0.0/8", 0),
    ("pcapng-example.pcapng", "10.0.0.0/8", 0),
];

#[test]
fn every_ipv4_capture_logs_every_session_exactly_once() {
    for &(name, inside, sessions) in CAPTURES {
        let (s, recs) = run_capture(name, inside);
        assert_eq!(s.sessions_created, sessions, "{name}");
        assert_eq!(recs.len() as u64, 2 * sessions, "{name}");
    }
}

#[test]
fn example_pcap_verdicts_and_first_session() {
    let (s, recs) = run_capture("example.pcap", "10.0.0.0/8");
    assert_eq!(s.packets, 4631);
    assert_eq!(s.verdict("translated_out"), 1750);
    assert_eq!(s.verdict("translated_in"), 2732);
    assert_eq!(s.verdict("inside_to_inside"), 149);
    let first = &recs[0];
    assert_eq!(first.event, 4);
    assert_eq!(first.src.0, Ipv4Addr::new(10, 0, 0, 6));
    // Paired pooling (RFC 4787 REQ-2): each inside host keeps one external
    // address throughout.
    let mut paired: HashMap<Ipv4Addr, HashSet<Ipv4Addr>> = HashMap::new();
    for r in &recs {
        paired.entry(r.src.0).or_default().insert(r.ext.0);
    }
    assert!(paired.values().all(|ext| ext.len() == 1), "{paired:?}");
    assert!(paired.len() >= 2, "example.pcap has several inside hosts");
}

#[test]
fn fragments_are_matched_to_their_session() {
    let (s, _) = run_capture("ip-frag.pcap", "10.118.213.212/32");
    assert_eq!(s.verdict("fragment_matched"), 1549);
    assert_eq!(s.verdict("fragment_no_session"), 1);
    assert_eq!(s.verdict("unsupported_protocol"), 47);
}

#[test]
fn non_ipv4_captures_are_counted_not_translated() {
    let dir = tempfile::tempdir().unwrap();
    for (name, verdict, n) in [
        ("four_ipv6_http_streams.pcap", "not_ipv4", 81),
        ("microsecs_big_endian.pcap", "unsupported_link_type", 13),
    ] {
        let out = dir.path().join(format!("{name}.log"));
        let cfg = config(Some(capture(name)), "10.0.0.0/8", &out, Format::Text);
        let s = run(&cfg).unwrap();
        assert_eq!(s.packets, n, "{name}");
        assert_eq!(s.verdict(verdict), n, "{name}");
        assert_eq!(s.sessions_created, 0);
        assert_eq!(std::fs::metadata(&out).unwrap().len(), 0);
    }
}

#[test]
fn text_and_json_logs_describe_the_same_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let (t, j) = (dir.path().join("a.log"), dir.path().join("a.jsonl"));
    let cap = Some(capture("many-protocols.pcap"));
    run(&config(cap.clone(), "10.0.0.0/8", &t, Format::Text)).unwrap();
    run(&config(cap, "10.0.0.0/8", &j, Format::Json)).unwrap();
    let text = std::fs::read_to_string(&t).unwrap();
    let json = read_json(&j);
    assert_eq!(text.lines().count(), json.len());
    for (line, r) in text.lines().zip(&json) {
        assert!(line.contains(&format!(" natEvent={} ", r.event)), "{line}");
        assert!(
            line.contains(&format!(" sourceIPv4Address={} ", r.src.0)),
            "{line}"
        );
        assert!(
            line.contains(&format!(" postNAPTSourceTransportPort={} ", r.ext.1)),
            "{line}"
        );
    }
}

fn synthetic_config(out: &Path) -> AppConfig {
    let mut c = config(None, "10.0.0.0/8", out, Format::Json);
    c.synthetic.packets = 200_000;
    c
}

#[test]
fn synthetic_mix_is_deterministic_and_lossless_in_block_mode() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
    let sa = run(&synthetic_config(&a)).unwrap();
    let sb = run(&synthetic_config(&b)).unwrap();
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    assert_eq!(sa.sessions_created, sb.sessions_created);
    // About a tenth of the packets open a session.
    assert!(
        (18_000..22_000).contains(&sa.sessions_created),
        "{}",
        sa.sessions_created
    );
    let recs = read_json(&a);
    check_log(&sa, &recs, "198.51.100.0/28".parse().unwrap());
}

#[test]
fn a_16_slot_ring_in_drop_mode_drops_and_accounts_for_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("drop.jsonl");
    let mut cfg = config(None, "10.0.0.0/8", &out, Format::Json);
    cfg.ring.capacity = 16;
    cfg.ring.backpressure = Backpressure::Drop;
    let s = run(&cfg).unwrap();
    let r = &s.records;
    assert_eq!(s.packets, 1_000_000, "the synthetic default");
    assert!(
        r.dropped > 0,
        "a 16-slot ring kept up with {} records",
        r.produced
    );
    assert_eq!(r.produced, s.records_logged);
    assert_eq!(r.produced, r.written + r.dropped);
    assert_eq!(r.enqueued, r.written);
    assert_eq!(read_json(&out).len() as u64, r.written);
    // The log shows the gaps: its in-band drop reports add up to the drops.
    let reported: u64 = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("{\"dplogEvent\""))
        .map(|l| num(&serde_json::from_str(l).unwrap(), "dropped"))
        .sum();
    assert_eq!(reported, r.dropped);
}
