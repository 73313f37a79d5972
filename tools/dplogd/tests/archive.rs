//! An archive output behind dplogd killed with SIGKILL: the checkpoint
//! covers only records the archive has written, and a restart cuts the
//! archive back to it, so every committed record is in the archive once.

mod common;

use std::time::Duration;

use common::*;
use dplog_sinks::archive::ArchiveReader;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

/// Per tag (`responderOctets`) the sequence numbers (`initiatorOctets`)
/// of every record in the archive, sorted.
fn archive_seqs(dir: &std::path::Path) -> std::collections::BTreeMap<u64, Vec<u64>> {
    let mut r = ArchiveReader::open(dir).unwrap();
    let mut out: std::collections::BTreeMap<u64, Vec<u64>> = Default::default();
    r.for_each(0, u64::MAX, |s, rec| {
        let tag = s.field("responderOctets").unwrap().1.read_uint(rec);
        let seq = s.field("initiatorOctets").unwrap().1.read_uint(rec);
        out.entry(tag).or_default().push(seq);
        true
    })
    .unwrap();
    assert!(
        r.problems().is_empty(),
        "archive damage: {:?}",
        r.problems()
    );
    for v in out.values_mut() {
        v.sort_unstable();
    }
    out
}

/// dplogd with an archive sink (blocks of 100 rows, so blocks are written
/// between checkpoints too; 64 KiB segments, so segments are sealed
/// between them) SIGKILLed five times at random instants while two paced
/// producers stream, restarted each time: the archive holds every record
/// of both producers exactly once.
#[test]
fn dplogd_sigkilled_with_an_archive_sink_keeps_every_record_once() {
    let s = Setup::with_config(
        "[format]\ntype = \"binary\"\n[ring]\nburst = 64\n\
         [[sink]]\ntype = \"archive\"\ndir = \"@/archive\"\nblock_max_age_ms = 200\n\
         block_rows = 100\nsegment_bytes = 65536\n",
    );
    std::fs::create_dir(s.path("archive")).unwrap();
    const N: u64 = 40_000;
    let args = [
        "--records",
        &N.to_string(),
        "--capacity",
        "1024",
        "--burst",
        "8",
        "--pause-us",
        "400",
    ]
    .map(String::from);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut p1 = s.producer("one", 1, &args);
    let mut p2 = s.producer("two", 2, &args);
    let mut rng = Pcg64::seed_from_u64(11);
    for _ in 0..5 {
        let mut d = s.daemon();
        std::thread::sleep(Duration::from_millis(rng.gen_range(300..900)));
        kill9(&mut d);
    }
    let started = std::time::SystemTime::now();
    let mut d = s.daemon();
    // Its first checkpoint is written once its signal handlers are in
    // place: the SIGTERM below ends it cleanly.
    wait_for(30, "the restarted daemon's first checkpoint", || {
        std::fs::metadata(s.path("dplogd.checkpoint"))
            .and_then(|m| m.modified())
            .is_ok_and(|t| t > started)
    });
    assert!(p1.wait().unwrap().success());
    assert!(p2.wait().unwrap().success());
    wait_for(120, "both rings retired", || {
        ring_dir_files(&s.rings()).is_empty()
    });
    assert_eq!(
        term(&mut d),
        0,
        "dplogd exit status; stderr:\n{}",
        s.stderr()
    );
    let got = archive_seqs(&s.path("archive"));
    for tag in [1, 2] {
        assert_exactly(&got[&tag], N, &format!("archive, producer {tag}"));
    }
    let err = s.stderr();
    // The kills did land between a write and its checkpoint: some
    // restart had archive blocks to cut back.
    assert!(
        err.contains("(written after the checkpoint)")
            || err.contains("(records after the checkpoint)")
            || err.contains("(sealed after the checkpoint)"),
        "no restart cut the archive back; stderr:\n{err}"
    );
}
