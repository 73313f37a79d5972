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

/// What a traced dplogd run called: `fdatasync`s, `msync(MS_SYNC)`s and
/// checkpoints written (renames of `dplogd.checkpoint.tmp`).
#[derive(Debug)]
struct Syncs {
    fdatasync: usize,
    msync_sync: usize,
    checkpoints: usize,
}

/// dplogd under `strace -f` with an archive (partial blocks after 50 ms,
/// no fsync interval of its own), an mmap (no msync interval: no msync
/// at all of its own) and a
/// binary file output (no fsync policy), `extra` flags; two paced
/// producers of `n` records each; SIGKILLed once both rings are retired
/// (no shutdown syncs in the trace). Returns the trace's counts and the
/// archive's records.
fn traced_run(
    strace: &std::path::Path,
    n: u64,
    extra: &[&str],
) -> (Syncs, std::collections::BTreeMap<u64, Vec<u64>>) {
    let s = Setup::with_config(
        "[format]\ntype = \"binary\"\n[ring]\nburst = 64\n\
         [[sink]]\ntype = \"archive\"\ndir = \"@/archive\"\nblock_max_age_ms = 50\n\
         fsync_interval_ms = 0\n\
         [[sink]]\ntype = \"mmap\"\ndir = \"@/mm\"\nprefix = \"nat\"\nsegment_bytes = 16777216\n\
         msync_interval_ms = 0\n\
         [[sink]]\ntype = \"file\"\npath = \"@/out.bin\"\n",
    );
    std::fs::create_dir(s.path("archive")).unwrap();
    std::fs::create_dir(s.path("mm")).unwrap();
    let trace = s.path("strace.out");
    let trace_s = trace.to_str().unwrap();
    let mut st = s.daemon_wrapped(
        &[
            strace.to_str().unwrap(),
            "-f",
            "--seccomp-bpf",
            "-qq",
            "-o",
            trace_s,
            "-e",
            "trace=fsync,fdatasync,msync,rename,renameat,renameat2",
        ],
        extra,
    );
    wait_for(30, "the daemon's first checkpoint", || {
        s.path("dplogd.checkpoint").exists()
    });
    let args = [
        "--records",
        &n.to_string(),
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
    assert!(p1.wait().unwrap().success());
    assert!(p2.wait().unwrap().success());
    wait_for(120, "both rings retired", || {
        ring_dir_files(&s.rings()).is_empty()
    });
    // dplogd is strace's one child.
    let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", st.id()))
        .unwrap_or_default();
    let pid: i32 = children
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no dplogd under strace; stderr:\n{}", s.stderr()));
    // SAFETY: kill(2) on the dplogd strace started for this test (strace
    // waits for it, so the pid is not reused before strace exits).
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let _ = st.wait();
    let text = read(&trace);
    let calls = |f: &dyn Fn(&str) -> bool| text.lines().filter(|l| f(l)).count();
    let syncs = Syncs {
        fdatasync: calls(&|l| l.contains("fdatasync(")),
        msync_sync: calls(&|l| l.contains("msync(") && l.contains("MS_SYNC")),
        checkpoints: calls(&|l| l.contains("rename") && l.contains("dplogd.checkpoint.tmp\"")),
    };
    (syncs, archive_seqs(&s.path("archive")))
}

/// With an archive output, a checkpoint without `--fsync` only hands the
/// kernel the archive's partial blocks: strace sees no `fdatasync` and no
/// `msync(MS_SYNC)` over dozens of checkpoints, yet the archive has every
/// record once it is checkpointed (read after a SIGKILL). With `--fsync`
/// the same run does sync at its checkpoints (the trace does see them).
#[test]
fn checkpoints_with_an_archive_do_not_fsync_without_the_flag() {
    let Some(strace) = strace_bin() else {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("strace is not installed");
        }
        eprintln!("SKIPPED: strace is not installed");
        return;
    };
    const N: u64 = 20_000;
    let (syncs, got) = traced_run(&strace, N, &[]);
    eprintln!("without --fsync: {syncs:?}");
    // The run is not degenerate: many checkpoints were traced.
    assert!(syncs.checkpoints >= 10, "{syncs:?}");
    assert_eq!(syncs.fdatasync, 0, "{syncs:?}");
    assert_eq!(syncs.msync_sync, 0, "{syncs:?}");
    for tag in [1, 2] {
        assert_exactly(&got[&tag], N, &format!("archive, producer {tag}"));
    }

    let (syncs, got) = traced_run(&strace, N, &["--fsync"]);
    eprintln!("with --fsync: {syncs:?}");
    assert!(syncs.checkpoints >= 10, "{syncs:?}");
    // The archive's open segment is fdatasync'd at (nearly) every
    // checkpoint, the mmap segment msync'd.
    assert!(syncs.fdatasync * 2 >= syncs.checkpoints, "{syncs:?}");
    assert!(syncs.msync_sync * 2 >= syncs.checkpoints, "{syncs:?}");
    for tag in [1, 2] {
        assert_exactly(&got[&tag], N, &format!("archive, producer {tag}"));
    }
}
