//! A rotating file sink behind a daemon that dies between a checkpoint
//! and the next: the checkpoint names the live file by its inode, so the
//! restart finds it among the rotated files, removes the files made after
//! it, cuts it back and renames it to the path again; the rotated files
//! and the live one together hold every record exactly once.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

const SINK: &str = "[sink]\ntype = \"file\"\npath = \"@/out.jsonl\"\nmax_size_bytes = 16384\n";

/// The rotated files of `out` (`out.jsonl.<13 digits>`), oldest first.
fn rotated(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .strip_prefix("out.jsonl.")
                .is_some_and(|s| s.len() == 13 && s.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    v.sort();
    v
}

/// Every line of the rotated files and the live file, in age order.
fn all_lines(dir: &Path) -> String {
    let mut text = String::new();
    for p in rotated(dir) {
        text += &read(&p);
    }
    text + &read(&dir.join("out.jsonl"))
}

/// Deterministic: the daemon's checkpoint is copied while it serves, the
/// daemon goes on writing (and rotating) and is killed; putting the copy
/// back makes the restart exactly a daemon killed right after that
/// checkpoint. The producer's ring holds every record it pushed (its
/// capacity is above what it pushes), so the restart can read them again.
#[test]
fn a_rotation_after_the_checkpoint_is_undone_on_restart() {
    let s = Setup::new(SINK);
    let mut p = s.producer(
        "rot",
        1,
        &[
            "--records",
            "0",
            "--capacity",
            "65536",
            "--burst",
            "32",
            "--pause-us",
            "2000",
        ],
    );
    let mut d = s.daemon();
    let ckpt = s.path("dplogd.checkpoint");
    // Rotations happen inside a batch, before its checkpoint: the first
    // batch (the ring's backlog) can rotate many times while the
    // checkpoint is still the one written at start, which names no ring.
    // A checkpoint that names the ring is one a restart resumes from.
    wait_for(60, "two rotations and a checkpoint naming the ring", || {
        rotated(s.dir.path()).len() >= 2 && read(&ckpt).contains("\nring ")
    });
    let old = read(&ckpt);
    assert!(old.ends_with("end\n") && old.contains("\nring "), "{old}");
    let live_then = rotated(s.dir.path()).len();
    wait_for(60, "two more rotations", || {
        rotated(s.dir.path()).len() >= live_then + 2
    });
    kill9(&mut d);
    kill9(&mut p);
    std::fs::write(&ckpt, &old).unwrap();
    let files_before = rotated(s.dir.path()).len();
    let mut d = s.daemon();
    wait_for(60, "the ring's exit line", || {
        all_lines(s.dir.path()).contains("\"producer_exited\"")
    });
    assert_eq!(term(&mut d), 0, "{}", s.stderr());
    let e = s.stderr();
    assert!(e.contains("renamed back to"), "{e}");
    assert!(e.contains("removed "), "{e}");
    let o = parse(&all_lines(s.dir.path()));
    let end = end_of(&o, "rot").unwrap();
    let n = end["records"].as_u64().unwrap();
    assert!(n > 0);
    // What the restart found and did, for a count that does not hold.
    let files: Vec<String> = rotated(s.dir.path())
        .iter()
        .chain([s.dir.path().join("out.jsonl")].iter())
        .map(|p| format!("{} {} B", p.display(), read(p).len()))
        .collect();
    let what = format!(
        "records across the rotated files (checkpoint then: {old:?}; files: {files:?}; daemon: {e})"
    );
    assert_exactly(&o.seqs[&1], n, &what);
    assert!(
        rotated(s.dir.path()).len() >= files_before.min(2),
        "{files_before}"
    );
}

/// Random: dplogd killed with SIGKILL six times while two producers
/// stream into a file sink rotating every 16 KiB.
#[test]
fn dplogd_sigkilled_under_rotation_writes_every_record_exactly_once() {
    let s = Setup::new(SINK);
    const N: u64 = 30_000;
    let n = N.to_string();
    let args = ["--records", &n, "--capacity", "256", "--burst", "32"];
    let mut p1 = s.producer("one", 1, &args);
    let mut p2 = s.producer("two", 2, &args);
    let mut rng = Pcg64::seed_from_u64(9);
    for _ in 0..6 {
        let mut d = s.daemon();
        std::thread::sleep(Duration::from_millis(rng.gen_range(60..300)));
        kill9(&mut d);
    }
    let mut d = s.daemon();
    assert!(p1.wait().unwrap().success());
    assert!(p2.wait().unwrap().success());
    wait_for(120, "both producers' end lines", || {
        parse(&all_lines(s.dir.path())).ends.len() >= 2
    });
    assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
    let o = parse(&all_lines(s.dir.path()));
    for tag in [1, 2] {
        assert_exactly(&o.seqs[&tag], N, &format!("producer {tag}"));
    }
    assert!(rotated(s.dir.path()).len() > 10);
    eprintln!(
        "{} restarts cut back across a rotation",
        s.stderr().matches("renamed back to").count()
    );
}
