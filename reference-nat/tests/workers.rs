//! Multi-worker runs: sharding by subscriber keeps every session's packets
//! and records on one worker, so N workers log exactly the sessions one
//! worker logs (same 5-tuples, same times), each worker allocates ports
//! only from its own slice, and the live counters add up.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::Path;

mod pcap_out;

use dplog::config::{FileSinkConfig, SinkConfig};
use dplog::formatters::Format;
use dplog_nat::app::{run, run_live, AppConfig, PortAllocationName, Summary};
use dplog_nat::workers::LiveCounters;
use dplog_nat::{generate, worker_port_range, SyntheticConfig, Verdict};
use serde_json::Value;

/// Writes the synthetic mix as a legacy pcap (microsecond timestamps,
/// Ethernet); returns the packet count.
fn write_synthetic_pcap(path: &Path, cfg: &SyntheticConfig) -> u64 {
    let mut frames = Vec::new();
    let n = generate(cfg, |ts, _lt, frame| {
        frames.push((ts / 1000, frame.to_vec()))
    })
    .unwrap();
    pcap_out::write_pcap(path, frames);
    n
}

fn config(out: &Path, workers: usize) -> AppConfig {
    let mut c = AppConfig::default();
    c.nat.inside = vec!["10.0.0.0/8".parse().unwrap()];
    c.format.kind = Format::Json;
    c.sink = SinkConfig::File(FileSinkConfig {
        path: out.to_path_buf(),
        ..Default::default()
    });
    c.dataplane.workers = workers;
    c
}

/// What the same seed gives whatever the worker count (README): a
/// record's event, time (RFC 3339, µs), 5-tuple and, on deletes, its
/// packet and octet counters.
type Key = (u64, String, u64, Ipv4Addr, u64, Ipv4Addr, u64, [u64; 4]);

/// Every record's [`Key`], sorted, and (proto, ext addr, ext port) of
/// every create in file order.
fn records(path: &Path) -> (Vec<Key>, Vec<(u64, Ipv4Addr, u64)>) {
    let body = std::fs::read_to_string(path).unwrap();
    let mut keys = Vec::new();
    let mut ext = Vec::new();
    for l in body.lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        let n = |k: &str| v[k].as_u64().unwrap();
        let a = |k: &str| v[k].as_str().unwrap().parse::<Ipv4Addr>().unwrap();
        let c = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
        keys.push((
            n("natEvent"),
            v["timestamp"].as_str().unwrap().to_string(),
            n("protocolIdentifier"),
            a("sourceIPv4Address"),
            n("sourceTransportPort"),
            a("destinationIPv4Address"),
            n("destinationTransportPort"),
            [
                c("initiatorPackets"),
                c("responderPackets"),
                c("initiatorOctets"),
                c("responderOctets"),
            ],
        ));
        if n("natEvent") == 4 {
            ext.push((
                n("protocolIdentifier"),
                a("postNATSourceIPv4Address"),
                n("postNAPTSourceTransportPort"),
            ));
        }
    }
    keys.sort();
    (keys, ext)
}

fn lossless(s: &Summary) {
    let r = &s.records;
    assert_eq!(r.dropped, 0);
    assert_eq!(r.written, r.produced);
    assert_eq!(r.produced, s.records_logged);
    assert_eq!(s.records_logged, 2 * s.sessions_created);
    assert_eq!(s.sessions_deleted, s.sessions_created);
}

#[test]
fn four_workers_log_the_same_sessions_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("mix.pcap");
    let packets = write_synthetic_pcap(
        &pcap,
        &SyntheticConfig {
            subscribers: 300,
            destinations: 50,
            new_session_share: 0.2,
            packets: 20_000,
            seed: 7,
            ..Default::default()
        },
    );
    let mut by_workers = Vec::new();
    for workers in [1usize, 4] {
        let out = dir.path().join(format!("w{workers}.jsonl"));
        let mut cfg = config(&out, workers);
        cfg.input.pcap = Some(pcap.clone());
        let s = run(&cfg).unwrap();
        assert_eq!(s.packets, packets);
        assert_eq!(s.workers, workers);
        assert_eq!(s.per_worker.len(), workers);
        assert_eq!(s.per_worker.iter().map(|w| w.packets).sum::<u64>(), packets);
        assert_eq!(
            s.per_worker.iter().map(|w| w.sessions_created).sum::<u64>(),
            s.sessions_created
        );
        lossless(&s);
        let (keys, ext) = records(&out);
        assert_eq!(keys.len() as u64, 2 * s.sessions_created);
        if workers == 4 {
            // Each of 300 subscribers hashes to one worker: all get work.
            for w in &s.per_worker {
                assert!(w.packets > packets / 8, "{:?}", s.per_worker);
            }
            // A worker's ports come from its own slice: the ports of
            // different workers never overlap, so a port identifies the
            // worker that allocated it.
            let slices: Vec<(u16, u16)> = (0..4)
                .map(|w| worker_port_range((1024, 65535), w, 4).unwrap())
                .collect();
            let mut per_slice = [0u64; 4];
            for (proto, _, port) in &ext {
                if *proto == 1 {
                    continue;
                }
                let w = slices
                    .iter()
                    .position(|(lo, hi)| (u64::from(*lo)..=u64::from(*hi)).contains(port))
                    .expect("port in a slice");
                per_slice[w] += 1;
            }
            assert!(per_slice.iter().all(|&n| n > 0), "{per_slice:?}");
        }
        by_workers.push((s, keys));
    }
    let (s1, k1) = &by_workers[0];
    let (s4, k4) = &by_workers[1];
    assert!(s1.sessions_created > 3000, "{}", s1.sessions_created);
    assert_eq!(s1.sessions_created, s4.sessions_created);
    assert_eq!(s1.verdicts, s4.verdicts);
    assert_eq!(k1, k4, "same sessions, same create and delete times");
}

#[test]
fn synthetic_workers_split_the_mix_and_counters_are_live() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("syn.log");
    let mut cfg = config(&out, 2);
    cfg.format.kind = Format::Text;
    cfg.synthetic.packets = 40_001;
    cfg.dataplane.preload = true;
    let live = LiveCounters::new(2);
    let s = run_live(&cfg, &live).unwrap();
    assert_eq!(s.packets, 40_001);
    // Sharded by subscriber as RSS would: about half each.
    let per: Vec<u64> = s.per_worker.iter().map(|w| w.packets).collect();
    assert_eq!(per.iter().sum::<u64>(), 40_001);
    assert!(per.iter().all(|&p| p > 12_000), "{per:?}");
    lossless(&s);
    let total = live.total();
    assert_eq!(total.packets, 40_001);
    assert_eq!(total.sessions_created, s.sessions_created);
    assert_eq!(
        total.count(Verdict::TranslatedOut) + total.count(Verdict::TranslatedIn),
        40_001
    );
    let lines = std::fs::read_to_string(&out).unwrap().lines().count() as u64;
    assert_eq!(lines, 2 * s.sessions_created);
    // Counters sized for another worker count are refused, not misused.
    let err = run_live(&cfg, &LiveCounters::new(3)).unwrap_err();
    assert!(err.to_string().contains("3 workers"), "{err}");
}

#[test]
fn logging_off_translates_the_same_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("none.log");
    let mut on = config(&out, 1);
    on.synthetic.packets = 10_000;
    let a = run(&on).unwrap();
    let mut off = on.clone();
    off.sink = SinkConfig::File(FileSinkConfig {
        path: dir.path().join("never.log"),
        ..Default::default()
    });
    off.dataplane.logging = false;
    let b = run(&off).unwrap();
    assert!(!b.logging);
    assert_eq!(a.verdicts, b.verdicts);
    assert_eq!(a.sessions_created, b.sessions_created);
    assert_eq!(b.records_logged, 2 * b.sessions_created);
    assert_eq!((b.records.produced, b.records.written), (0, 0));
    assert!(!dir.path().join("never.log").exists());
    let mut zero = on.clone();
    zero.dataplane.workers = 0;
    assert!(run(&zero)
        .unwrap_err()
        .to_string()
        .contains("workers must be"));
}

#[test]
fn random_port_allocation_stays_in_range_and_unique() {
    let dir = tempfile::tempdir().unwrap();
    let mut by_mode = HashMap::new();
    for mode in ["sequential", "random"] {
        let out = dir.path().join(format!("{mode}.jsonl"));
        let mut cfg = config(&out, 2);
        cfg.synthetic.packets = 5000;
        cfg.synthetic.new_session_share = 1.0;
        cfg.nat.port_allocation = if mode == "random" {
            PortAllocationName::Random
        } else {
            PortAllocationName::Sequential
        };
        let s = run(&cfg).unwrap();
        lossless(&s);
        let (_, ext) = records(&out);
        let mut seen = std::collections::HashSet::new();
        for e in &ext {
            assert!(e.2 >= 1024);
            // new_session_share 1.0: every packet opens a new inside
            // endpoint, so every mapping is distinct.
            assert!(seen.insert(*e), "{mode}: {e:?} handed out twice");
        }
        by_mode.insert(mode, ext);
    }
    let seq = &by_mode["sequential"];
    let rnd = &by_mode["random"];
    assert_eq!(seq.len(), rnd.len());
    // Sequential hands out mostly consecutive ports per address; random
    // does not.
    let consecutive = |v: &Vec<(u64, Ipv4Addr, u64)>| {
        let mut last: HashMap<(u64, Ipv4Addr), u64> = HashMap::new();
        v.iter()
            .filter(|(p, a, port)| last.insert((*p, *a), *port).is_some_and(|q| q + 1 == *port))
            .count()
    };
    assert!(consecutive(seq) * 2 > seq.len(), "{}", consecutive(seq));
    assert!(consecutive(rnd) * 20 < rnd.len(), "{}", consecutive(rnd));
}

#[test]
fn the_synthetic_new_session_share_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    for workers in [1usize, 2] {
        for (share, want) in [(0.0, 1024u64), (0.1, 2_000), (0.25, 5_000), (1.0, 20_000)] {
            let out = dir.path().join("share.log");
            let mut cfg = config(&out, workers);
            cfg.format.kind = Format::Text;
            cfg.synthetic.packets = 20_000;
            cfg.synthetic.new_session_share = share;
            let s = run(&cfg).unwrap();
            assert_eq!(s.packets, 20_000);
            // Measured by the NAT: sessions it created.
            assert_eq!(s.sessions_created, want, "share {share}, {workers} workers");
            lossless(&s);
            std::fs::remove_file(&out).unwrap();
        }
    }
    // Share 0 with a smaller warm-up: only those sessions, all packets
    // translated.
    let out = dir.path().join("warm.log");
    let mut cfg = config(&out, 1);
    cfg.synthetic.packets = 10_000;
    cfg.synthetic.new_session_share = 0.0;
    cfg.synthetic.warmup_flows = 10;
    let s = run(&cfg).unwrap();
    assert_eq!(s.sessions_created, 10);
    assert_eq!(
        s.verdict("translated_out") + s.verdict("translated_in"),
        10_000
    );
}

#[test]
fn the_synthetic_stream_does_not_depend_on_the_worker_count() {
    let dir = tempfile::tempdir().unwrap();
    let mut runs = Vec::new();
    for (workers, preload) in [
        (1usize, false),
        (2, false),
        (3, true),
        (4, false),
        (1, true),
    ] {
        let out = dir.path().join(format!("w{workers}{preload}.jsonl"));
        let mut cfg = config(&out, workers);
        cfg.synthetic.packets = 20_000;
        cfg.synthetic.subscribers = 300;
        cfg.synthetic.new_session_share = 0.2;
        cfg.dataplane.preload = preload;
        let s = run(&cfg).unwrap();
        lossless(&s);
        assert_eq!(s.sessions_created, 4_000);
        let (keys, ext) = records(&out);
        let mut ext_sorted = ext.clone();
        ext_sorted.sort();
        runs.push((workers, preload, s.verdicts.clone(), keys, ext_sorted));
    }
    let (_, _, v1, k1, e1) = &runs[0];
    assert_eq!(k1.len(), 8_000);
    for (w, p, v, k, e) in &runs[1..] {
        assert_eq!(v, v1, "{w} workers, preload {p}");
        assert_eq!(
            k, k1,
            "{w} workers, preload {p}: same sessions (5-tuples, events, times, counters)"
        );
        // What the README says is not the same: each worker allocates
        // from its own port slice, so the post-NAT ports depend on the
        // worker count (and are the same for the same count).
        if *w == 1 {
            assert_eq!(e, e1, "one worker, preloaded or not: same mappings");
        } else {
            assert_ne!(e, e1, "{w} workers: post-NAT ports from {w} slices");
        }
    }
}
