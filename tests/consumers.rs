//! `[consumers]`: several consumer threads from config, each with its own
//! sink instance and group of rings.

use dplog::config::{ConfigError, LogConfig};
use dplog::nat::{Nat44SessionRecord, NatRecord};

fn config(dir: &std::path::Path, extra: &str) -> LogConfig {
    LogConfig::from_toml_str(&format!(
        "{extra}\n[format]\ntemplate = \"{{sourceTransportPort}} {{destinationTransportPort}}\"\n\
         [sink]\ntype = \"file\"\npath = \"{}\"\n",
        dir.join("c.log").display()
    ))
    .unwrap()
}

fn rec(ring: u16, seq: u16) -> NatRecord {
    NatRecord::from(Nat44SessionRecord {
        src_port: ring,
        dst_port: seq,
        nat_event: 4,
        ..Default::default()
    })
}

#[test]
fn two_consumers_each_write_their_rings_to_their_own_file() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "[consumers]\ncpus = [0, 1]");
    let group = cfg
        .start_slot_consumers::<NatRecord>(&dplog::nat::all())
        .unwrap();
    assert_eq!(group.loggers().len(), 2);
    for ring in 0..4u16 {
        let mut p = group.producer(ring as usize).unwrap();
        for seq in 0..100 {
            assert!(p.log(rec(ring, seq)));
        }
    }
    let mut shared = group.shared_producer(1).unwrap();
    assert!(shared.log(rec(9, 0)));
    drop(shared);
    let stats: Vec<_> = group
        .shutdown()
        .into_iter()
        .map(|r| r.unwrap().written_records)
        .collect();
    assert_eq!(stats, [200, 201]);
    let lines = |name: &str| -> Vec<String> {
        std::fs::read_to_string(dir.path().join(name))
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    };
    let expect = |rings: &[u16], extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = rings
            .iter()
            .flat_map(|&r| (0..100).map(move |s| format!("{r} {s}")))
            .chain(extra.iter().map(|s| s.to_string()))
            .collect();
        v.sort();
        v
    };
    let mut c0 = lines("c.log");
    let mut c1 = lines("c.log.1");
    c0.sort();
    c1.sort();
    assert_eq!(c0, expect(&[0, 2], &[]));
    assert_eq!(c1, expect(&[1, 3], &["9 0"]));
}

#[test]
fn bad_consumer_settings_are_refused_before_anything_opens() {
    let dir = tempfile::tempdir().unwrap();
    for (extra, want) in [
        ("[consumers]\ncount = 0", "0 consumers"),
        ("[consumers]\ncount = 65", "65 consumers"),
        (
            "[consumers]\ncpus = [0]\ncount = 2",
            "either `cpus` or `count`",
        ),
    ] {
        let e = config(dir.path(), extra)
            .start_slot_consumers::<NatRecord>(&dplog::nat::all())
            .unwrap_err();
        assert!(matches!(e, ConfigError::Parse(_)), "{e}");
        assert!(e.to_string().contains(want), "{extra}: {e}");
    }
    assert!(!dir.path().join("c.log").exists(), "nothing opened");
    let e = LogConfig::from_toml_str("[consumers]\ncpu = [1]\n").unwrap_err();
    assert!(e.to_string().contains("cpu"), "{e}");
}
