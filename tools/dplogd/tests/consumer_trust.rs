//! Whom a producer trusts for its consumer file (`<ring>.consumer`): the
//! file tells it how far the daemon has read (slots below are
//! overwritten) and whether the ring is quarantined (logging stops), and
//! anyone who may create files in the ring directory could plant one.
//! The producer uses it only if it is owned by itself, root or the
//! daemon's uid it was given, and writable by its owner only; a file cut
//! short under the producer's mapping does not kill it; a verdict of
//! another ring lifetime never counts; and a daemon that cannot replace
//! another user's file in a sticky directory says so.

mod common;

use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;
use dplog_core::shm::{
    consumer_path, consumer_status, ConsumerStatus, OpenRules, ShmOptions, ShmProducer, ShmReader,
    SHM_HEADER_BYTES,
};
use dplog_core::Slot64;

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn opts(dir: &Path, name: &str, cap: usize) -> ShmOptions {
    ShmOptions {
        dir: dir.to_path_buf(),
        name: name.into(),
        capacity: cap,
        group: None,
        daemon_uid: None,
    }
}

/// The lifetime nonce in the ring file's header (offset 40).
fn nonce_of(ring: &Path) -> u64 {
    let b = std::fs::read(ring).unwrap();
    u64::from_ne_bytes(b[40..48].try_into().unwrap())
}

/// Plants a complete consumer file for `ring` (magic, version 1, the
/// nonce given, `head`, `verdict`), mode `mode`, owner `uid` (if given).
fn plant(ring: &Path, nonce: u64, head: u64, verdict: u32, mode: u32, uid: Option<u32>) {
    let mut b = vec![0u8; 4096];
    b[0..8].copy_from_slice(b"DPLOGCON");
    b[8..12].copy_from_slice(&1u32.to_ne_bytes());
    b[16..24].copy_from_slice(&nonce.to_ne_bytes());
    b[128..136].copy_from_slice(&head.to_ne_bytes());
    b[384..388].copy_from_slice(&verdict.to_ne_bytes());
    let path = consumer_path(ring);
    let _ = std::fs::remove_file(&path);
    std::fs::write(&path, &b).unwrap();
    let f = std::fs::File::open(&path).unwrap();
    f.set_permissions(PermissionsExt::from_mode(mode)).unwrap();
    if let Some(uid) = uid {
        // SAFETY: fchown on a descriptor we own; -1 keeps the group.
        assert_eq!(unsafe { libc::fchown(f.as_raw_fd(), uid, u32::MAX) }, 0);
    }
}

/// The sequence numbers (`initiator_octets`, record offset 48) of the
/// first `n` slots of the ring file, read from the file itself.
fn slot_seqs(ring: &Path, n: usize) -> Vec<u64> {
    let b = std::fs::read(ring).unwrap();
    (0..n)
        .map(|i| {
            let off = SHM_HEADER_BYTES + i * 64 + 48;
            u64::from_ne_bytes(b[off..off + 8].try_into().unwrap())
        })
        .collect()
}

fn after_attach_interval() {
    // The producer looks for its consumer file at most once a millisecond.
    std::thread::sleep(std::time::Duration::from_millis(3));
}

#[test]
fn a_consumer_file_writable_by_group_or_others_is_refused_and_no_record_is_overwritten() {
    for mode in [0o660, 0o606] {
        let d = tempfile::tempdir().unwrap();
        let mut p =
            ShmProducer::<Slot64>::create(&opts(d.path(), "w", 4), &dplog_schema_nat::all())
                .unwrap();
        for i in 0..4 {
            p.try_push(tagged_record(1, i)).unwrap();
        }
        // A planted file of this lifetime claiming every record read.
        plant(p.path(), nonce_of(p.path()), 4, 0, mode, None);
        after_attach_interval();
        assert!(
            p.try_push(tagged_record(1, 99)).is_err(),
            "mode {mode:o}: a record overwritten"
        );
        assert!(!p.consumer_attached());
        let why = p.consumer_refusal().expect("a refusal");
        let cpath = consumer_path(p.path());
        assert!(why.contains(&cpath.display().to_string()), "{why}");
        assert!(why.contains(&format!("mode {mode:04o}")), "{why}");
        assert!(why.contains("not writable by group or others"), "{why}");
        assert!(
            matches!(consumer_status(p.path(), None), ConsumerStatus::Refused(ref m) if *m == why),
            "{:?}",
            consumer_status(p.path(), None)
        );
        assert_eq!(slot_seqs(p.path(), 4), vec![0, 1, 2, 3]);
        // The daemon does not reuse it either (its own uid, but writable
        // by others): it replaces it with its own, 0640, and the
        // producer takes that one.
        let ino = std::fs::metadata(&cpath).unwrap().ino();
        let mut r = ShmReader::open(p.path(), &OpenRules::default()).unwrap();
        let md = std::fs::metadata(&cpath).unwrap();
        assert_ne!(md.ino(), ino);
        assert_eq!(md.mode() & 0o7777, 0o640);
        let mut out = Vec::new();
        assert_eq!(r.poll(8, &mut out).unwrap(), 4);
        r.consume(4);
        r.publish_head();
        after_attach_interval();
        assert!(p.try_push(tagged_record(1, 4)).is_ok());
        assert!(p.consumer_attached());
        assert_eq!(p.consumer_refusal(), None);
        assert_eq!(consumer_status(p.path(), None), ConsumerStatus::Served);
    }
}

#[test]
fn a_consumer_file_of_another_owner_is_refused_unless_it_is_the_daemon_uid() {
    if !is_root() {
        eprintln!("skipped: giving a file to uid 65534 needs root");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let mut p =
        ShmProducer::<Slot64>::create(&opts(d.path(), "o", 4), &dplog_schema_nat::all()).unwrap();
    for i in 0..4 {
        p.try_push(tagged_record(2, i)).unwrap();
    }
    plant(p.path(), nonce_of(p.path()), 4, 0, 0o640, Some(65534));
    after_attach_interval();
    assert!(
        p.try_push(tagged_record(2, 99)).is_err(),
        "a record overwritten"
    );
    let why = p.consumer_refusal().expect("a refusal");
    assert!(why.contains("owned by uid 65534 with mode 0640"), "{why}");
    assert!(why.contains("owned by itself (uid 0), root or"), "{why}");
    assert!(matches!(
        consumer_status(p.path(), None),
        ConsumerStatus::Refused(_)
    ));
    assert_eq!(slot_seqs(p.path(), 4), vec![0, 1, 2, 3]);
    // A quarantine verdict in such a file does not stop the producer.
    plant(p.path(), nonce_of(p.path()), 0, 3, 0o640, Some(65534));
    after_attach_interval();
    assert!(!p.is_quarantined());
    assert!(!p.is_stopped());

    // Given as the daemon's uid, the same owner is trusted.
    let mut o = opts(d.path(), "t", 4);
    o.daemon_uid = Some(65534);
    let mut q = ShmProducer::<Slot64>::create(&o, &dplog_schema_nat::all()).unwrap();
    for i in 0..4 {
        q.try_push(tagged_record(3, i)).unwrap();
    }
    plant(q.path(), nonce_of(q.path()), 4, 0, 0o640, Some(65534));
    after_attach_interval();
    assert!(q.try_push(tagged_record(3, 4)).is_ok());
    assert!(q.consumer_attached());
    assert_eq!(
        consumer_status(q.path(), Some(65534)),
        ConsumerStatus::Served
    );
    // But not when others may write it.
    plant(q.path(), nonce_of(q.path()), 4, 0, 0o660, Some(65534));
    assert!(matches!(
        consumer_status(q.path(), Some(65534)),
        ConsumerStatus::Refused(_)
    ));
}

/// The child of [`a_consumer_file_cut_short_does_not_kill_the_producer`]:
/// runs only when that test starts it (a SIGBUS would kill the whole
/// test binary).
#[test]
fn truncation_child() {
    let Ok(dir) = std::env::var("DPLOG_TRUST_TRUNCATE_DIR") else {
        return;
    };
    let mut p =
        ShmProducer::<Slot64>::create(&opts(Path::new(&dir), "cut", 4), &dplog_schema_nat::all())
            .unwrap();
    for i in 0..4 {
        p.try_push(tagged_record(4, i)).unwrap();
    }
    // The daemon's file, trusted, mapped by the producer.
    let mut r = ShmReader::open(p.path(), &OpenRules::default()).unwrap();
    let mut out = Vec::new();
    assert_eq!(r.poll(8, &mut out).unwrap(), 4);
    r.consume(4);
    r.publish_head();
    drop(r);
    after_attach_interval();
    for i in 4..8 {
        p.try_push(tagged_record(4, i)).unwrap();
    }
    assert!(p.consumer_attached());
    // Cut short under the producer's mapping.
    std::fs::OpenOptions::new()
        .write(true)
        .open(consumer_path(p.path()))
        .unwrap()
        .set_len(0)
        .unwrap();
    // Full ring: every try refreshes the head from the mapping.
    for _ in 0..3 {
        assert!(p.try_push(tagged_record(4, 99)).is_err());
        after_attach_interval();
    }
    assert!(!p.is_quarantined());
    assert_eq!(p.fill(), 4);
    let why = p.consumer_refusal().expect("the cut is said");
    assert!(why.contains("cut short"), "{why}");
    assert!(
        why.contains(&consumer_path(p.path()).display().to_string()),
        "{why}"
    );
    assert_eq!(slot_seqs(p.path(), 4), vec![4, 5, 6, 7]);
    println!("truncation child: survived");
}

#[test]
fn a_consumer_file_cut_short_does_not_kill_the_producer() {
    let d = tempfile::tempdir().unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "truncation_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("DPLOG_TRUST_TRUNCATE_DIR", d.path())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{:?}: {text}", out.status);
    assert!(text.contains("truncation child: survived"), "{text}");
}

#[test]
fn a_verdict_of_another_lifetime_or_layout_never_counts() {
    let d = tempfile::tempdir().unwrap();
    let p =
        ShmProducer::<Slot64>::create(&opts(d.path(), "v", 4), &dplog_schema_nat::all()).unwrap();
    let nonce = nonce_of(p.path());
    // Another lifetime's file at this name (its nonce is not the ring's).
    plant(p.path(), nonce ^ 1, 0, 3, 0o640, None);
    assert_eq!(consumer_status(p.path(), None), ConsumerStatus::Absent);
    assert!(!dplog_core::shm::consumer_quarantined(p.path(), None));
    after_attach_interval();
    assert!(!p.is_quarantined());
    // Another layout version.
    plant(p.path(), nonce, 0, 3, 0o640, None);
    let c = consumer_path(p.path());
    let mut b = std::fs::read(&c).unwrap();
    b[8..12].copy_from_slice(&7u32.to_ne_bytes());
    std::fs::write(&c, &b).unwrap();
    assert_eq!(consumer_status(p.path(), None), ConsumerStatus::Absent);
    // This lifetime's: it counts.
    plant(p.path(), nonce, 0, 3, 0o640, None);
    assert_eq!(consumer_status(p.path(), None), ConsumerStatus::Quarantined);
    after_attach_interval();
    assert!(p.is_quarantined());
}

#[test]
fn a_restarted_daemon_keeps_the_verdict_its_consumer_file_holds() {
    let s = Setup::new("[sink]\ntype = \"file\"\npath = \"@/out.jsonl\"\n");
    // A ring a daemon quarantined (its verdict in the consumer file)
    // and stopped before any checkpoint said so.
    let mut bad =
        ShmProducer::<Slot64>::create(&opts(&s.rings(), "bad", 64), &dplog_schema_nat::all())
            .unwrap();
    for i in 0..10 {
        bad.try_push(tagged_record(5, i)).unwrap();
    }
    let r = ShmReader::open(bad.path(), &OpenRules::default()).unwrap();
    r.quarantine();
    drop(r);
    assert!(bad.is_quarantined());
    // A healthy ring beside it, closed: drained to its end line.
    let mut good =
        ShmProducer::<Slot64>::create(&opts(&s.rings(), "good", 64), &dplog_schema_nat::all())
            .unwrap();
    for i in 0..10 {
        good.try_push(tagged_record(6, i)).unwrap();
    }
    drop(good);
    let mut d = s.daemon();
    wait_for(60, "the good ring's end line", || {
        end_of(&parse(&read_lines(&s.path("out.jsonl"))), "good").is_some()
    });
    wait_for(30, "the verdict said", || {
        s.stderr()
            .contains("quarantined before the restart (its consumer file says so); not served")
    });
    assert_eq!(term(&mut d), 0, "{}", s.stderr());
    let o = parse(&read_lines(&s.path("out.jsonl")));
    assert_exactly(&o.seqs[&6], 10, "good");
    assert!(!o.seqs.contains_key(&5), "the quarantined ring was served");
    assert!(bad.is_quarantined());
    assert!(bad.path().exists());
}

#[test]
fn a_daemon_that_cannot_replace_another_users_file_in_a_sticky_directory_says_so() {
    if !is_root() {
        eprintln!("skipped: another user's file and a daemon of uid 65534 need root");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    std::fs::set_permissions(dir, PermissionsExt::from_mode(0o755)).unwrap();
    let rings = dir.join("rings");
    std::fs::create_dir(&rings).unwrap();
    std::fs::set_permissions(&rings, PermissionsExt::from_mode(0o1777)).unwrap();
    let (cfg, logs) = nobody_config(dir);
    // A root ring of group 65534 (the daemon reads it) and a consumer
    // file planted before the daemon by uid 65533.
    let mut o = opts(&rings, "sticky", 64);
    o.group = Some(65534);
    let mut p = ShmProducer::<Slot64>::create(&o, &dplog_schema_nat::all()).unwrap();
    for i in 0..64 {
        p.try_push(tagged_record(7, i)).unwrap();
    }
    plant(p.path(), nonce_of(p.path()), 64, 0, 0o644, Some(65533));
    let errf = dir.join("dplogd.err");
    let err = std::fs::File::create(&errf).unwrap();
    let mut d = dplogd_as_nobody(&cfg, &rings, &logs.join("dplogd.checkpoint"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .args(["--scan-ms", "20", "--allow-uid", "0"])
        .stderr(err)
        .spawn()
        .unwrap();
    // Killed if an assertion fails before its SIGTERM below.
    struct Reap(u32);
    impl Drop for Reap {
        fn drop(&mut self) {
            // SAFETY: kill/waitpid on our own child; WNOHANG returns 0
            // only while it runs (never reaped, so the pid is still ours).
            unsafe {
                if libc::waitpid(self.0 as i32, core::ptr::null_mut(), libc::WNOHANG) == 0 {
                    libc::kill(self.0 as i32, libc::SIGKILL);
                    libc::waitpid(self.0 as i32, core::ptr::null_mut(), 0);
                }
            }
        }
    }
    let _reap = Reap(d.id());
    let f = p.path().file_name().unwrap().to_string_lossy().into_owned();
    let c = consumer_path(p.path());
    let errs = || read(&errf);
    wait_for(30, "the refusal", || {
        errs().contains(&format!(
            "ring {f}: refused: cannot replace the consumer file {}",
            c.display()
        ))
    });
    let e = errs();
    assert!(e.contains("it is owned by uid 65533 (mode 0644)"), "{e}");
    assert!(e.contains("(uid 65534)"), "{e}");
    assert!(
        e.contains(&format!("{} is sticky (mode 1777)", rings.display())),
        "{e}"
    );
    assert!(e.contains("the ring is not served"), "{e}");
    assert_eq!(term(&mut d), 0, "{e}");
    // The planted file is still there, and the producer refuses it: its
    // records stay.
    assert_eq!(std::fs::metadata(&c).unwrap().uid(), 65533);
    assert!(p.try_push(tagged_record(7, 99)).is_err());
    assert!(p.consumer_refusal().unwrap().contains("owned by uid 65533"));
    assert_eq!(slot_seqs(p.path(), 4), vec![0, 1, 2, 3]);
    assert!(!parse(&read_lines(&logs.join("out.log")))
        .seqs
        .contains_key(&7));
}
