//! Port block allocation, deterministic NAT and limits through the whole
//! program: every NAT record type goes through one ring per worker into
//! the JSON file, and the file says exactly what the summary counts.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::Path;

use dplog::config::{FileSinkConfig, SinkConfig};
use dplog::formatters::Format;
use dplog_nat::app::{run, AppConfig, PortAllocationName, Summary};
use serde_json::Value;

fn config(out: &Path, workers: usize) -> AppConfig {
    let mut c = AppConfig::default();
    c.format.kind = Format::Json;
    c.sink = SinkConfig::File(FileSinkConfig {
        path: out.to_path_buf(),
        ..Default::default()
    });
    c.dataplane.workers = workers;
    c.synthetic.packets = 100_000;
    c.synthetic.subscribers = 200;
    c
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn count(recs: &[Value], event: u64) -> u64 {
    recs.iter().filter(|r| r["natEvent"] == event).count() as u64
}

fn lossless(s: &Summary) {
    assert_eq!(s.records.dropped, 0);
    assert_eq!(s.records.written, s.records.produced);
    assert_eq!(s.records.produced, s.records_logged);
}

fn ip(v: &Value) -> Ipv4Addr {
    v.as_str().unwrap().parse().unwrap()
}

#[test]
fn pba_logs_blocks_not_sessions_with_two_workers() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pba.jsonl");
    let mut c = config(&out, 2);
    c.nat.port_allocation = PortAllocationName::Pba;
    c.nat.port_block_size = 64;
    let s = run(&c).unwrap();
    lossless(&s);
    let recs = lines(&out);
    let (alloc, rel) = s.port_blocks;
    assert!(alloc >= 200, "every subscriber got a block: {alloc}");
    assert_eq!(alloc, rel, "all released at the end");
    assert_eq!(count(&recs, 16), alloc);
    assert_eq!(count(&recs, 17), rel);
    assert_eq!(count(&recs, 4) + count(&recs, 5), 0, "no session records");
    assert_eq!(recs.len() as u64, alloc + rel);
    // Every block: 64 ports, in the pool, inside the port range; a block is
    // released exactly as it was allocated (same subscriber, address,
    // range); a subscriber holds at most max_blocks_per_user blocks.
    let mut live: HashMap<(Ipv4Addr, u64), (Ipv4Addr, u64)> = HashMap::new();
    let mut held: HashMap<Ipv4Addr, u64> = HashMap::new();
    let pool: ipnet::Ipv4Net = "198.51.100.0/28".parse().unwrap();
    for r in &recs {
        let (start, end) = (
            r["portRangeStart"].as_u64().unwrap(),
            r["portRangeEnd"].as_u64().unwrap(),
        );
        assert_eq!(
            (end - start + 1, r["portRangeNumPorts"].as_u64()),
            (64, Some(64))
        );
        assert!(start >= 1024);
        let (sub, ext) = (
            ip(&r["sourceIPv4Address"]),
            ip(&r["postNATSourceIPv4Address"]),
        );
        assert!(pool.contains(&ext));
        if r["natEvent"] == 16 {
            assert!(
                live.insert((ext, start), (sub, end)).is_none(),
                "block handed out twice"
            );
            *held.entry(sub).or_default() += 1;
            assert!(held[&sub] <= 4);
        } else {
            assert_eq!(live.remove(&(ext, start)), Some((sub, end)));
            *held.get_mut(&sub).unwrap() -= 1;
        }
    }
    assert!(live.is_empty());
    // Asked for: the sessions inside blocks are logged too.
    let out2 = dir.path().join("pba-sessions.jsonl");
    let mut c2 = config(&out2, 2);
    c2.nat.port_allocation = PortAllocationName::Pba;
    c2.nat.port_block_size = 64;
    c2.nat.log_sessions_in_blocks = true;
    let s2 = run(&c2).unwrap();
    lossless(&s2);
    let recs2 = lines(&out2);
    assert_eq!(count(&recs2, 4), s2.sessions_created);
    assert_eq!(count(&recs2, 5), s2.sessions_created);
    assert_eq!(count(&recs2, 16), s2.port_blocks.0);
}

#[test]
fn deterministic_nat_logs_its_mapping_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("det.jsonl");
    let mut c = config(&out, 2);
    c.nat.port_allocation = PortAllocationName::Deterministic;
    let s = run(&c).unwrap();
    lossless(&s);
    // 200 subscribers → inside 10.0.0.0/24: 256 mapping records, nothing
    // else; 256 / 14 addresses → 19 per address, 3395 ports each.
    assert_eq!(s.config_records, 256);
    assert!(s.sessions_created > 1000);
    let recs = lines(&out);
    assert_eq!(recs.len(), 256);
    assert_eq!(count(&recs, 16), 256);
    assert!(recs.iter().all(|r| r["portRangeNumPorts"] == 3395));
    let first = &recs[0];
    assert_eq!(ip(&first["sourceIPv4Address"]), Ipv4Addr::new(10, 0, 0, 0));
    assert_eq!(
        ip(&first["postNATSourceIPv4Address"]),
        Ipv4Addr::new(198, 51, 100, 1)
    );
    assert_eq!(first["portRangeStart"], 1024);
    // One timebase: the mapping is stamped with the synthetic mix's start
    // (its first packet), like the sessions, not with the wall clock.
    assert!(recs
        .iter()
        .all(|r| r["timestamp"] == "2026-01-01T00:00:00.000000Z"));
}

/// On a capture, the deterministic mapping carries the capture's time (its
/// first packet's), as every session of the same log.
#[test]
fn deterministic_mapping_of_a_capture_is_stamped_on_the_capture_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("det-pcap.jsonl");
    let mut c = config(&out, 1);
    c.nat.port_allocation = PortAllocationName::Deterministic;
    c.nat.inside = vec!["10.0.0.0/24".parse().unwrap()];
    c.input.pcap =
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/pcaps/example.pcap"));
    let s = run(&c).unwrap();
    lossless(&s);
    let recs = lines(&out);
    assert_eq!(s.config_records, 256);
    // example.pcap's first packet (tshark: 1367526033.491822).
    let mapping: Vec<&Value> = recs.iter().take(256).collect();
    assert!(
        mapping
            .iter()
            .all(|r| r["natEvent"] == 16 && r["timestamp"] == "2013-05-02T20:20:33.491822Z"),
        "{:?}",
        mapping[0]
    );
    // Every record of the log lies on the capture's timeline (2013).
    assert!(recs
        .iter()
        .all(|r| r["timestamp"].as_str().unwrap().starts_with("2013-05-0")));
}

#[test]
fn session_limit_drops_and_logs_quota_exceeded() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("limit.jsonl");
    let mut c = config(&out, 1);
    c.nat.max_sessions_per_user = 5;
    c.nat.event_log_interval_ms = 10;
    let s = run(&c).unwrap();
    lossless(&s);
    assert!(s.verdict("session_limit") > 0);
    let recs = lines(&out);
    let quota: Vec<&Value> = recs.iter().filter(|r| r["natEvent"] == 13).collect();
    assert_eq!(quota.len() as u64, s.limit_events.0);
    assert!(quota.len() > 1, "100 ms of traffic at one per 10 ms");
    assert_eq!(
        s.limit_events.0 + s.limit_events.1,
        s.verdict("session_limit")
    );
    for q in quota {
        assert_eq!(q["natQuotaExceededEvent"], 3);
        // The limit under the IANA element of its subtype (473).
        assert_eq!(q["maxEntriesPerUser"], 5);
        assert!(q.get("quotaLimit").is_none());
    }
    assert_eq!(count(&recs, 4), s.sessions_created);
}
