//! Each bad-input shape driven through the pcap path (two
//! workers, so the dispatcher's parser sees it too): every one gives a
//! counted verdict, no panic, and the good packets around it still work.

use std::path::Path;

use dplog::config::{FileSinkConfig, SinkConfig};
use dplog::formatters::Format;
use dplog_nat::app::{run, AppConfig, Summary};

mod shapes;
use shapes::*;

fn run_frames(dir: &Path, frames: &[Vec<u8>]) -> Summary {
    let p = dir.join("bad.pcap");
    std::fs::write(&p, pcap(frames)).unwrap();
    let mut c = AppConfig::default();
    c.input.pcap = Some(p);
    c.nat.inside = vec!["10.0.0.0/8".parse().unwrap()];
    c.format.kind = Format::Json;
    c.sink = SinkConfig::File(FileSinkConfig {
        path: dir.join("out.jsonl"),
        ..Default::default()
    });
    c.dataplane.workers = 2;
    let s = run(&c).unwrap();
    assert_eq!(s.packets, frames.len() as u64);
    assert_eq!(s.records.written, s.records.produced);
    assert_eq!(s.sessions_deleted, s.sessions_created);
    s
}

#[test]
fn every_bad_shape_is_a_counted_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let frames = bad_frames();
    let s = run_frames(dir.path(), &frames);
    let want = expected_verdicts();
    for (name, n) in want {
        assert_eq!(s.verdict(name), n, "{name}: {:?}", s.verdicts);
    }
    assert_eq!(
        s.verdicts.iter().map(|(_, n)| n).sum::<u64>(),
        frames.len() as u64
    );
    assert_eq!(s.sessions_created, 2);
}

#[test]
fn a_flood_of_fragment_ids_is_bounded_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    // 6000 first fragments with distinct ids (table holds 4096), then the
    // later fragments of the first 10 ids (evicted) and the last 10.
    let mut frames = Vec::new();
    for id in 0..6000u16 {
        frames.push(eth(&ip(
            H,
            R,
            17,
            &[],
            id,
            0x2000,
            &udp(7000, 53, 40, &[0; 8]),
        )));
    }
    for id in (0..10).chain(5990..6000) {
        frames.push(eth(&ip(H, R, 17, &[], id, 2, &[0; 8])));
    }
    let s = run_frames(dir.path(), &frames);
    assert_eq!(s.verdict("translated_out"), 6000);
    assert_eq!(s.verdict("fragment_no_session"), 10);
    assert_eq!(s.verdict("fragment_matched"), 10);
    assert_eq!(s.sessions_created, 1, "one 5-tuple, one session");
}
