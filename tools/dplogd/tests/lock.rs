//! One dplogd per ring directory: a second one is refused by name.

mod common;

use common::*;

/// The first daemon's first checkpoint is written (after it took the
/// lock).
fn wait_started(s: &Setup, since: std::time::SystemTime) {
    wait_for(30, "the daemon's first checkpoint", || {
        std::fs::metadata(s.path("dplogd.checkpoint"))
            .and_then(|m| m.modified())
            .is_ok_and(|t| t > since)
    });
}

/// A second dplogd on a served ring directory exits 1 with a message
/// naming the directory and the first one's pid, and cuts back or opens
/// nothing; the first one keeps serving every record once; once the
/// first is SIGKILLed (the lock goes with it) a new daemon starts.
#[test]
fn a_second_dplogd_on_the_same_ring_directory_is_refused() {
    let s = Setup::new("[sink]\ntype = \"file\"\npath = \"@/out.jsonl\"\n");
    let t0 = std::time::SystemTime::now();
    let mut first = s.daemon();
    wait_started(&s, t0);
    let second = std::process::Command::new(DPLOGD)
        .arg("--config")
        .arg(s.path("dplogd.toml"))
        .arg("--rings")
        .arg(s.rings())
        .arg("--checkpoint")
        .arg(s.path("other.checkpoint"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "stderr: {err}");
    assert!(
        err.contains(&format!("--rings {}:", s.rings().display()))
            && err.contains(&format!("another dplogd (pid {})", first.id()))
            && err.contains(".dplogd.lock"),
        "the refusal names the directory, the holder's pid and the lock: {err}"
    );
    // It wrote no checkpoint (it stopped before touching anything).
    assert!(!s.path("other.checkpoint").exists());
    // The first one serves a producer whole.
    let mut p = s.producer("one", 1, &["--records", "5000", "--capacity", "256"]);
    assert!(p.wait().unwrap().success());
    wait_for(60, "the producer's end line", || {
        parse(&read_lines(&s.path("out.jsonl"))).ends.len() == 1
    });
    assert_exactly(
        &parse(&read_lines(&s.path("out.jsonl"))).seqs[&1],
        5000,
        "output",
    );
    // A SIGKILLed holder leaves the lock file but not the lock.
    kill9(&mut first);
    assert!(s.rings().join(".dplogd.lock").exists());
    let t1 = std::time::SystemTime::now();
    let mut third = s.daemon();
    wait_started(&s, t1);
    let pid = std::fs::read_to_string(s.rings().join(".dplogd.lock")).unwrap();
    assert_eq!(pid.trim(), third.id().to_string());
    assert_eq!(term(&mut third), 0, "stderr:\n{}", s.stderr());
}
