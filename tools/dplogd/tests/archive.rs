//! An archive output behind dplogd killed with SIGKILL: the checkpoint
//! covers only records the archive has written, and a restart cuts the
//! archive back to it, so every committed record is in the archive once.
//! On a full disk dplogd counts written only what the archive holds.

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

/// dplogd run by `strace -f` (its flags `strace_args`), SIGKILLed when
/// dropped: strace 6.1 has no `--kill-on-exit`, and a tracee outlives
/// its tracer.
struct Traced {
    strace: std::process::Child,
    /// dplogd, strace's child; `None` once killed and reaped.
    pid: Option<i32>,
}

impl Traced {
    fn start(s: &Setup, strace: &std::path::Path, strace_args: &[&str], extra: &[&str]) -> Self {
        let mut wrapper = vec![strace.to_str().unwrap(), "-f", "--seccomp-bpf", "-qq"];
        wrapper.extend_from_slice(strace_args);
        let st = s.daemon_wrapped(&wrapper, extra);
        // dplogd writes its pid into the ring directory's lock file
        // (strace forks probes of its own before it: its children list
        // may name one of those).
        let lock = s.rings().join(".dplogd.lock");
        let mut pid = None;
        wait_for(30, "dplogd's pid in its lock file", || {
            pid = read(&lock)
                .trim()
                .parse::<i32>()
                .ok()
                .filter(|p| parent_of(*p) == Some(st.id() as i32));
            pid.is_some()
        });
        Traced { strace: st, pid }
    }

    /// SIGKILLs dplogd; waits for strace, which ends with it.
    fn kill(&mut self) {
        if let Some(pid) = self.pid.take() {
            // SAFETY: kill(2) on the dplogd strace started for this test;
            // strace has not reaped it (it is still waited for below), so
            // the pid is not reused.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = self.strace.wait();
        }
    }
}

impl Drop for Traced {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The parent pid of process `pid` (`/proc/<pid>/status`).
fn parent_of(pid: i32) -> Option<i32> {
    read(std::path::Path::new(&format!("/proc/{pid}/status")))
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|p| p.trim().parse().ok())
}

/// Two paced producers of `n` records each (rings of 1024 slots).
fn producers(s: &Setup, n: u64) -> [std::process::Child; 2] {
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
    [s.producer("one", 1, &args), s.producer("two", 2, &args)]
}

/// What a traced dplogd run called: `fdatasync`s, `msync(MS_SYNC)`s and
/// checkpoints written (renames of `dplogd.checkpoint.tmp`).
#[derive(Debug)]
struct Syncs {
    fdatasync: usize,
    /// Of them, those of the file output `out.bin`.
    file_fdatasync: usize,
    msync_sync: usize,
    checkpoints: usize,
}

/// dplogd under strace with an archive (partial blocks after 50 ms, no
/// fsync interval of its own), an mmap (no msync interval: no msync at
/// all of its own) and a binary file output (no fsync policy), `extra`
/// flags; two paced producers of `n` records each; SIGKILLed once both
/// rings are retired (no shutdown syncs in the trace). Returns the
/// trace's counts and the archive's records.
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
    let mut d = Traced::start(
        &s,
        strace,
        &[
            "-o",
            trace.to_str().unwrap(),
            // Descriptors printed with their paths.
            "-y",
            "-e",
            "trace=fsync,fdatasync,msync,rename,renameat,renameat2",
        ],
        extra,
    );
    wait_for(30, "the daemon's first checkpoint", || {
        s.path("dplogd.checkpoint").exists()
    });
    for mut p in producers(&s, n) {
        assert!(p.wait().unwrap().success());
    }
    wait_for(120, "both rings retired", || {
        ring_dir_files(&s.rings()).is_empty()
    });
    d.kill();
    let text = read(&trace);
    let calls = |f: &dyn Fn(&str) -> bool| text.lines().filter(|l| f(l)).count();
    let syncs = Syncs {
        fdatasync: calls(&|l| l.contains("fdatasync(")),
        file_fdatasync: calls(&|l| l.contains("fdatasync(") && l.contains("/out.bin>")),
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
    // checkpoint, the mmap segment msync'd, and the file output too,
    // although its own policy is `never`.
    assert!(syncs.file_fdatasync * 2 >= syncs.checkpoints, "{syncs:?}");
    assert!(syncs.fdatasync * 2 >= syncs.checkpoints, "{syncs:?}");
    assert!(syncs.msync_sync * 2 >= syncs.checkpoints, "{syncs:?}");
    for tag in [1, 2] {
        assert_exactly(&got[&tag], N, &format!("archive, producer {tag}"));
    }
}

/// A second file output whose every `fdatasync` fails (EIO, injected by
/// strace; its own policy syncs every 10 ms) next to an archive and a
/// file output: without `--fsync` the checkpoints do not need its sync,
/// so they go on (both rings retired, which only a checkpoint does), the
/// archive has every record once and both files every byte the
/// checkpoint names.
#[test]
fn a_file_output_whose_fsync_fails_does_not_hold_back_checkpoints() {
    let Some(strace) = strace_bin() else {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("strace is not installed");
        }
        eprintln!("SKIPPED: strace is not installed");
        return;
    };
    let s = Setup::with_config(
        "[format]\ntype = \"binary\"\n[ring]\nburst = 64\n\
         [[sink]]\ntype = \"archive\"\ndir = \"@/archive\"\nblock_max_age_ms = 50\n\
         fsync_interval_ms = 0\n\
         [[sink]]\ntype = \"file\"\npath = \"@/out.bin\"\n\
         [[sink]]\ntype = \"file\"\npath = \"@/mirror.bin\"\nfsync = \"interval\"\n\
         fsync_interval_ms = 10\n",
    );
    std::fs::create_dir(s.path("archive")).unwrap();
    let trace = s.path("strace.out");
    let mut d = Traced::start(
        &s,
        &strace,
        &[
            "-o",
            trace.to_str().unwrap(),
            "-e",
            "trace=fdatasync",
            "-e",
            "inject=fdatasync:error=EIO",
        ],
        &[],
    );
    wait_for(30, "the daemon's first checkpoint", || {
        s.path("dplogd.checkpoint").exists()
    });
    const N: u64 = 20_000;
    let mut ps = producers(&s, N);
    // A held-back checkpoint keeps the slots: the producers (policy
    // `block`) would wait for ever, so the rings are waited for first
    // (made, then retired).
    wait_for(30, "both rings made", || {
        ring_dir_files(&s.rings())
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "ring"))
            .count()
            == 2
    });
    wait_for(60, "both rings retired", || {
        ring_dir_files(&s.rings()).is_empty()
    });
    for p in &mut ps {
        assert!(p.wait().unwrap().success());
    }
    d.kill();
    let failed = read(&trace)
        .lines()
        .filter(|l| l.contains("fdatasync(") && l.contains("EIO"))
        .count();
    assert!(
        failed > 0,
        "no fdatasync failed: the test exercised nothing"
    );
    let err = s.stderr();
    assert!(!err.contains("not checkpointed"), "stderr:\n{err}");
    let got = archive_seqs(&s.path("archive"));
    for tag in [1, 2] {
        assert_exactly(&got[&tag], N, &format!("archive, producer {tag}"));
    }
    // Both files hold what the last checkpoint names, and the same bytes.
    let ckpt = read(&s.path("dplogd.checkpoint"));
    let out = std::fs::read(s.path("out.bin")).unwrap();
    let mirror = std::fs::read(s.path("mirror.bin")).unwrap();
    assert!(!out.is_empty());
    assert_eq!(out, mirror);
    for f in ["out.bin", "mirror.bin"] {
        let line = ckpt
            .lines()
            .find(|l| l.starts_with("file ") && l.ends_with(f))
            .unwrap_or_else(|| panic!("no line for {f} in the checkpoint:\n{ckpt}"));
        let len: usize = line.split(' ').nth(1).unwrap().parse().unwrap();
        assert_eq!(len, out.len(), "{f}: {line}");
    }
}

/// The value of counter `name` (`dplog_consumer_written_total`, ...) in
/// Prometheus text `text`.
fn counter(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

/// dplogd with an archive on a 256 KiB tmpfs that fills: the archive
/// holds the batch it took when the disk filled and refuses the next
/// (the checkpoint stays before them, the producer blocks); stopped while
/// the disk stays full, dplogd gives up on what the archive could not
/// write and counts it dropped. Its stats count written exactly the
/// records the archive holds, and written + dropped is every record it
/// read.
#[test]
fn dplogd_with_an_archive_on_a_full_disk_counts_written_only_what_the_archive_holds() {
    let Some(fs) = dplog_testkit::tmpfs::Tmpfs::mount("256k") else {
        return;
    };
    let arch = fs.path().join("archive");
    std::fs::create_dir(&arch).unwrap();
    let s = Setup::with_config(&format!(
        "[format]\ntype = \"binary\"\n[ring]\nburst = 64\nshutdown_timeout_ms = 300\n\
         [sink]\ntype = \"archive\"\ndir = \"{}\"\nblock_max_age_ms = 50\nblock_rows = 100\n",
        arch.display()
    ));
    let stats = s.path("stats.txt");
    let mut d = s.daemon_with(&["--stats-file", stats.to_str().unwrap()]);
    // With room: a ring is retired only once its records are written out
    // and checkpointed.
    let mut p1 = s.producer("room", 1, &["--records", "2000", "--capacity", "1024"]);
    assert!(p1.wait().unwrap().success());
    wait_for(30, "the first ring retired", || {
        ring_dir_files(&s.rings()).is_empty()
    });
    assert!(fs.fill("filler") > 0);
    let mut p2 = s.producer("full", 2, &["--records", "5000", "--capacity", "1024"]);
    wait_for(30, "dplogd to say the archive fails", || {
        s.stderr().contains("No space left on device")
    });
    assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
    // Blocked on its ring, whose slots the daemon never freed.
    kill9(&mut p2);
    let text = read(&stats);
    let read_ = counter(&text, "dplog_consumer_dequeued_total");
    let written = counter(&text, "dplog_consumer_written_total");
    let dropped = counter(&text, "dplog_consumer_dropped_sink_total");
    assert_eq!(written + dropped, read_, "{text}");
    assert!(dropped > 0, "nothing dropped: {text}");
    let got = archive_seqs(&arch);
    assert_exactly(&got[&1], 2000, "the records written with room");
    let full = got.get(&2).map_or(0, Vec::len) as u64;
    assert_eq!(2000 + full, written, "{text}");
    let err = s.stderr();
    assert!(
        err.contains("taken and not written when the sink closed"),
        "{err}"
    );
}
