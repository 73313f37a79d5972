//! A full file system under the checkpoint: dplogd retries the checkpoint
//! (the rings hold the records not checkpointed), leaves no `<path>.tmp`
//! behind, and once there is room again every record is written once.

mod common;

use std::process::{Child, Command};
use std::time::Duration;

use common::*;
use dplog_testkit::tmpfs::Tmpfs;

/// dplogd of `s` with its checkpoint at `cp` and the arguments `extra`
/// (stderr appended to `dplogd.err`).
fn daemon_at(s: &Setup, cp: &std::path::Path, extra: &[&std::ffi::OsStr]) -> Child {
    let err = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(s.path("dplogd.err"))
        .unwrap();
    let c = Command::new(DPLOGD)
        .arg("--config")
        .arg(s.path("dplogd.toml"))
        .arg("--rings")
        .arg(s.rings())
        .arg("--checkpoint")
        .arg(cp)
        .args(["--scan-ms", "20"])
        .args(extra)
        .stderr(err)
        .spawn()
        .unwrap();
    s.track(c)
}

fn tmp_of(cp: &std::path::Path) -> std::path::PathBuf {
    let mut t = cp.as_os_str().to_owned();
    t.push(".tmp");
    t.into()
}

#[test]
fn a_full_checkpoint_file_system_is_waited_out_and_every_record_is_written_once() {
    let Some(fs) = Tmpfs::mount("64k") else {
        return;
    };
    let s = Setup::new("[sink]\ntype = \"file\"\npath = \"@/out.jsonl\"\n");
    let cp = fs.path().join("cp");
    let mut d = daemon_at(&s, &cp, &[]);
    wait_for(60, "the first checkpoint", || cp.exists());
    assert!(fs.fill("filler") > 0);
    // 3000 records through a ring of 64: it fills while nothing can be
    // checkpointed, and the producer (block) waits.
    let mut p = s.producer("full", 3, &["--records", "3000", "--capacity", "64"]);
    wait_for(60, "dplogd to say the checkpoint fails", || {
        s.stderr().contains("No space left on device")
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        d.try_wait().unwrap().is_none(),
        "dplogd exited on a full checkpoint file system:\n{}",
        s.stderr()
    );
    assert!(
        p.try_wait().unwrap().is_none(),
        "the producer finished although no slot could be freed"
    );
    let written = parse(&read_lines(&s.path("out.jsonl")));
    let n = written.seqs.get(&3).map_or(0, Vec::len);
    assert!(
        n <= 64,
        "{n} records written with no checkpoint: more than a ring"
    );
    // Room again: the checkpoint advances and the producer goes on.
    std::fs::remove_file(fs.path().join("filler")).unwrap();
    assert!(p.wait().unwrap().success());
    wait_for(60, "the ring's end line", || {
        !parse(&read_lines(&s.path("out.jsonl"))).ends.is_empty()
    });
    assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
    let out = parse(&read_lines(&s.path("out.jsonl")));
    assert_exactly(&out.seqs[&3], 3000, "a ring whose checkpoint waited");
    let err = s.stderr();
    assert!(
        err.contains("records read and not checkpointed; retrying"),
        "{err}"
    );
    assert!(err.contains("is written again (after "), "{err}");
    assert!(
        !tmp_of(&cp).exists(),
        "a stale {} is left",
        tmp_of(&cp).display()
    );
}

/// Stopped while the checkpoint cannot be written: dplogd says so and
/// exits without a stale `<path>.tmp`; the next dplogd, with room, cuts
/// the output back to the last checkpoint and reads the rest again.
#[test]
fn a_stop_while_the_checkpoint_cannot_be_written_leaves_no_temporary_and_loses_nothing() {
    let Some(fs) = Tmpfs::mount("64k") else {
        return;
    };
    let s = Setup::new("[sink]\ntype = \"file\"\npath = \"@/out.jsonl\"\n");
    let cp = fs.path().join("cp");
    let mut d = daemon_at(&s, &cp, &[]);
    wait_for(60, "the first checkpoint", || cp.exists());
    fs.fill("filler");
    let mut p = s.producer("stop", 4, &["--records", "2000", "--capacity", "64"]);
    wait_for(60, "dplogd to say the checkpoint fails", || {
        s.stderr().contains("No space left on device")
    });
    wait_for(60, "records written and not checkpointed", || {
        parse(&read_lines(&s.path("out.jsonl")))
            .seqs
            .get(&4)
            .is_some_and(|v| !v.is_empty())
    });
    let code = term(&mut d);
    assert_eq!(code, 1, "stderr:\n{}", s.stderr());
    assert!(
        s.stderr().contains("the next dplogd cuts the outputs back"),
        "{}",
        s.stderr()
    );
    assert!(
        !tmp_of(&cp).exists(),
        "a stale {} is left",
        tmp_of(&cp).display()
    );
    std::fs::remove_file(fs.path().join("filler")).unwrap();
    let mut d = daemon_at(&s, &cp, &[]);
    assert!(p.wait().unwrap().success());
    wait_for(60, "the ring's end line", || {
        !parse(&read_lines(&s.path("out.jsonl"))).ends.is_empty()
    });
    assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
    let out = parse(&read_lines(&s.path("out.jsonl")));
    assert_exactly(&out.seqs[&4], 2000, "a ring read again after the stop");
}

/// A stop while the checkpoint cannot be written ends dplogd with an
/// error (the rings keep what was not checkpointed), and its final
/// counters still reach `--stats-file`.
#[test]
fn a_stop_with_the_checkpoint_failing_still_writes_the_stats_file() {
    let Some(fs) = Tmpfs::mount("64k") else {
        return;
    };
    let s = Setup::new("[sink]\ntype = \"file\"\npath = \"@/out.jsonl\"\n");
    let cp = fs.path().join("cp");
    let stats = s.path("stats.txt");
    let mut d = daemon_at(&s, &cp, &["--stats-file".as_ref(), stats.as_os_str()]);
    wait_for(60, "the first checkpoint", || cp.exists());
    assert!(fs.fill("filler") > 0);
    let mut p = s.producer("full", 3, &["--records", "200", "--capacity", "64"]);
    wait_for(60, "dplogd to say the checkpoint fails", || {
        s.stderr().contains("No space left on device")
    });
    assert_eq!(term(&mut d), 1, "stderr:\n{}", s.stderr());
    let written = parse(&read_lines(&s.path("out.jsonl")))
        .seqs
        .get(&3)
        .map_or(0, Vec::len);
    assert!(written > 0, "stderr:\n{}", s.stderr());
    let text = std::fs::read_to_string(&stats).expect("the stats file is written");
    assert!(
        text.contains(&format!("dplog_consumer_written_total {written}\n")),
        "{written} records in the output; stats:\n{text}"
    );
    let _ = p.kill();
    let _ = p.wait();
}
