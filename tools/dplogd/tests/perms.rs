//! Who may read and write a ring: ring files are 0600, or 0640 with a
//! configured group; the daemon only reads them and keeps its position in
//! a consumer file of its own (`<ring>.consumer`, 0640, the ring's
//! group); it refuses a ring of another user unless that uid is allowed.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The ring file of the producer named `name` in `dir`, once it exists.
fn ring_of(dir: &Path, name: &str) -> PathBuf {
    let mut found = None;
    wait_for(30, &format!("the ring file of {name}"), || {
        found = std::fs::read_dir(dir).unwrap().flatten().find_map(|e| {
            let f = e.file_name().to_string_lossy().into_owned();
            (f.starts_with(&format!("{name}.")) && f.ends_with(".ring")).then(|| e.path())
        });
        found.is_some()
    });
    found.unwrap()
}

fn consumer_of(ring: &Path) -> PathBuf {
    let mut p = ring.as_os_str().to_owned();
    p.push(".consumer");
    PathBuf::from(p)
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn rings_are_0600_or_0640_with_their_group_and_the_daemon_only_reads_them() {
    let s = Setup::new("[sink]\ntype = \"file\"\npath = \"@/out.log\"\n");
    // SAFETY: getegid cannot fail.
    let my_gid = unsafe { libc::getegid() };
    // A group of another gid needs root (chown to a group one is not in).
    let group = if is_root() { 65534 } else { my_gid };
    const N: u64 = 3000;
    let n = N.to_string();
    let mut a = s.producer("own", 1, &["--records", &n, "--capacity", "64"]);
    let mut b = s.producer(
        "grp",
        2,
        &[
            "--records",
            &n,
            "--capacity",
            "64",
            "--group",
            &group.to_string(),
        ],
    );
    let ra = ring_of(&s.rings(), "own");
    let rb = ring_of(&s.rings(), "grp");
    assert_eq!(mode(&ra), 0o600);
    assert_eq!(mode(&rb), 0o640);
    assert_eq!(std::fs::metadata(&rb).unwrap().gid(), group);
    // No daemon yet: no consumer file, and the producers wait (block) on
    // their full rings.
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!consumer_of(&ra).exists() && !consumer_of(&rb).exists());
    assert!(a.try_wait().unwrap().is_none() && b.try_wait().unwrap().is_none());
    let mut d = s.daemon();
    // The daemon's consumer files: its own, 0640, the ring's group.
    wait_for(30, "the consumer files", || {
        consumer_of(&ra).exists() && consumer_of(&rb).exists()
    });
    for (ring, gid) in [(&ra, my_gid), (&rb, group)] {
        let md = std::fs::metadata(consumer_of(ring)).unwrap();
        assert_eq!(md.permissions().mode() & 0o777, 0o640, "{ring:?}");
        assert_eq!(md.gid(), gid, "{ring:?}");
        assert_eq!(md.uid(), std::fs::metadata(ring).unwrap().uid());
    }
    // The daemon's position goes to its consumer file (offset 128), never
    // into the ring file (whose bytes 256.. and 512.. a daemon writing its
    // head and reported drops there would change; the producer writes
    // neither).
    wait_for(30, "a published consumer index", || {
        let c = std::fs::read(consumer_of(&ra)).unwrap_or_default();
        c.len() >= 136 && u64::from_ne_bytes(c[128..136].try_into().unwrap()) > 0
    });
    let hdr = std::fs::read(&ra).unwrap();
    assert_eq!(hdr[256..264], [0u8; 8]);
    assert_eq!(hdr[512..520], [0u8; 8]);
    assert!(a.wait().unwrap().success() && b.wait().unwrap().success());
    wait_for(60, "both end lines", || {
        let o = parse(&read_lines(&s.path("out.log")));
        end_of(&o, "own").is_some() && end_of(&o, "grp").is_some()
    });
    assert_eq!(term(&mut d), 0, "{}", s.stderr());
    let o = parse(&read_lines(&s.path("out.log")));
    assert_exactly(&o.seqs[&1], N, "own");
    assert_exactly(&o.seqs[&2], N, "grp");
    // Rings and consumer files removed together.
    assert!(!ra.exists() && !consumer_of(&ra).exists());
    assert!(!rb.exists() && !consumer_of(&rb).exists());
}

#[test]
fn a_ring_of_another_user_is_refused_unless_allowed_and_a_daemon_of_the_group_serves_0640() {
    if !is_root() {
        eprintln!("SKIPPED: needs root (chown to another uid, a daemon run as another user)");
        return;
    }
    let s = Setup::new("[sink]\ntype = \"file\"\npath = \"@/out.log\"\n");
    const N: u64 = 2000;
    let n = N.to_string();
    // A ring given to uid 65534 after its creation: refused by default.
    let mut p = s.producer("other", 3, &["--records", &n, "--capacity", "64"]);
    let ring = ring_of(&s.rings(), "other");
    std::os::unix::fs::chown(&ring, Some(65534), None).unwrap();
    let mut d = s.daemon();
    let f = ring.file_name().unwrap().to_string_lossy().into_owned();
    wait_for(30, "the refusal", || {
        s.stderr().contains(&format!(
            "ring {f}: refused: ring file owned by uid 65534, not this user"
        ))
    });
    // The refusal names the flag that serves it.
    assert!(
        s.stderr().contains("dplogd --allow-uid 65534)"),
        "{}",
        s.stderr()
    );
    assert!(!consumer_of(&ring).exists());
    assert!(p.try_wait().unwrap().is_none(), "the producer waits");
    assert_eq!(term(&mut d), 0);
    assert!(read(&s.path("out.log")).is_empty());
    // Allowed: served whole.
    let mut d = s.daemon_with(&["--allow-uid", "65534"]);
    assert!(p.wait().unwrap().success());
    wait_for(60, "the end line", || {
        end_of(&parse(&read_lines(&s.path("out.log"))), "other").is_some()
    });
    assert_eq!(term(&mut d), 0, "{}", s.stderr());
    assert_exactly(&parse(&read_lines(&s.path("out.log"))).seqs[&3], N, "other");

    // A daemon running as uid 65534, group 65534 (no other groups) serves
    // a root ring of group 65534, mode 0640: read access is all it needs.
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    std::fs::set_permissions(dir, PermissionsExt::from_mode(0o755)).unwrap();
    let rings = dir.join("rings");
    std::fs::create_dir(&rings).unwrap();
    let (cfg, logs) = nobody_config(dir);
    for p in [&rings, &logs] {
        std::os::unix::fs::chown(p, Some(65534), Some(65534)).unwrap();
        std::fs::set_permissions(p, PermissionsExt::from_mode(0o770)).unwrap();
    }
    let err = std::fs::File::create(dir.join("dplogd.err")).unwrap();
    let mut d = dplogd_as_nobody(&cfg, &rings, &logs.join("dplogd.checkpoint"))
        .args(["--scan-ms", "20", "--allow-uid", "0"])
        .stderr(err)
        .spawn()
        .unwrap();
    let mut p = Command::new(PRODUCE)
        .arg("--dir")
        .arg(&rings)
        .args(["--name", "grp", "--tag", "4", "--records", &n])
        .args(["--capacity", "64", "--group", "65534"])
        // The daemon's consumer file is uid 65534's: trusted only when
        // named.
        .args(["--daemon-uid", "65534"])
        .spawn()
        .unwrap();
    let ring = ring_of(&rings, "grp");
    assert_eq!(mode(&ring), 0o640);
    assert!(p.wait().unwrap().success());
    let out = logs.join("out.log");
    let errs = || read(&dir.join("dplogd.err"));
    wait_for(60, "the end line of the group ring", || {
        end_of(&parse(&read_lines(&out)), "grp").is_some()
    });
    assert_eq!(term(&mut d), 0, "{}", errs());
    assert_exactly(&parse(&read_lines(&out)).seqs[&4], N, "grp");
    assert_eq!(std::fs::metadata(&out).unwrap().uid(), 65534);
    assert!(!ring.exists(), "{}", errs());

    // The same daemon on a ring directory it may not write (root's,
    // group 65534, 0750): it cannot make its consumer file, refuses the
    // ring and says why; the producer waits.
    std::os::unix::fs::chown(&rings, Some(0), Some(65534)).unwrap();
    std::fs::set_permissions(&rings, PermissionsExt::from_mode(0o750)).unwrap();
    let err = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("dplogd.err"))
        .unwrap();
    let mut d = dplogd_as_nobody(&cfg, &rings, &logs.join("dplogd.checkpoint"))
        .args(["--scan-ms", "20", "--allow-uid", "0"])
        .stderr(err)
        .spawn()
        .unwrap();
    let mut p = Command::new(PRODUCE)
        .arg("--dir")
        .arg(&rings)
        .args(["--name", "ro", "--tag", "5", "--records", &n])
        .args(["--capacity", "64", "--group", "65534"])
        .spawn()
        .unwrap();
    let ring = ring_of(&rings, "ro");
    let f = ring.file_name().unwrap().to_string_lossy().into_owned();
    wait_for(30, "the refusal", || {
        errs().contains(&format!("ring {f}: refused: the consumer file"))
    });
    assert!(
        errs().contains("the daemon needs write access to the ring directory"),
        "{}",
        errs()
    );
    assert!(p.try_wait().unwrap().is_none(), "the producer waits");
    assert_eq!(term(&mut d), 0, "{}", errs());
    kill9(&mut p);
    assert!(!parse(&read_lines(&out)).seqs.contains_key(&5));

    // A ring directory it may not write and without a lock file: it
    // cannot take the lock, exits at once and says what it needs.
    let bare = dir.join("bare");
    std::fs::create_dir(&bare).unwrap();
    std::fs::set_permissions(&bare, PermissionsExt::from_mode(0o755)).unwrap();
    let o = dplogd_as_nobody(&cfg, &bare, &logs.join("dplogd.checkpoint"))
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert_eq!(
        e.trim_end(),
        format!(
            "dplogd: --rings {b}: lock {b}/.dplogd.lock: Permission denied (os error 13): dplogd \
             needs write access to the ring directory (it creates its lock and consumer files \
             there); {b} is owned by uid 0 gid 0, mode 0755, and this dplogd runs as uid 65534 \
             gid 65534",
            b = bare.display()
        )
    );
}

/// A ring directory every local user may write is named at start, with
/// its mode and what to use instead; a sticky one says others' files
/// cannot be replaced; the README's 0700 draws no warning.
#[test]
fn a_ring_directory_others_may_write_is_warned_about() {
    for (m, expect) in [
        (0o777, Some("mode 0777 lets every local user create files in it, rename or remove ring files; use 0700, or 0770 with a group")),
        (0o1777, Some("mode 1777 lets every local user create files in it (sticky: they cannot replace others' files); use 0700")),
        (0o700, None),
    ] {
        let s = Setup::new("[sink]\ntype = \"file\"\npath = \"@/out.jsonl\"\n");
        std::fs::set_permissions(s.rings(), std::fs::Permissions::from_mode(m)).unwrap();
        let mut d = s.daemon();
        // The first checkpoint is written after the start-up checks.
        wait_for(30, "dplogd's first checkpoint", || {
            s.path("dplogd.checkpoint").exists()
        });
        assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
        let err = s.stderr();
        match expect {
            Some(w) => assert!(err.contains(w), "mode {m:o}: stderr:\n{err}"),
            None => assert!(!err.contains("lets every local user"), "stderr:\n{err}"),
        }
    }
}
