//! dplog-nat logging through dplogd (`--log-ring`): the same log, line for
//! line, as dplog-nat's own consumer writes, plus the ring's end line.

mod common;

use common::*;
use dplog_nat::app::{run, AppConfig};

#[test]
fn dplog_nat_through_dplogd_writes_the_log_its_own_consumer_writes() {
    let s = Setup::new("[sink]\ntype = \"file\"\npath = \"@/via-dplogd.log\"\n");
    // The daemon formats text, as dplog-nat does by default.
    std::fs::write(
        s.path("dplogd.toml"),
        format!(
            "[sink]\ntype = \"file\"\npath = \"{}\"\n",
            s.path("via-dplogd.log").display()
        ),
    )
    .unwrap();
    let nat = |out: &str| {
        AppConfig::from_toml_str(&format!(
            "[synthetic]\npackets = 20000\n[dataplane]\nworkers = 2\n[sink]\ntype = \"file\"\npath = \"{}\"\n",
            s.path(out).display()
        ))
        .unwrap()
    };
    let local = run(&nat("local.log")).unwrap();
    let mut d = s.daemon();
    let mut cfg = nat("unused.log");
    cfg.log_ring = Some(s.rings());
    let via = run(&cfg).unwrap();
    assert_eq!(via.records_logged, local.records_logged);
    assert!(local.records_logged > 3000, "{}", local.records_logged);
    wait_for(60, "both workers' rings closed", || {
        read(&s.path("via-dplogd.log"))
            .lines()
            .filter(|l| l.starts_with("dplogd: producer of ring dplog-nat-w"))
            .count()
            == 2
    });
    assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
    let mut got: Vec<String> = read(&s.path("via-dplogd.log"))
        .lines()
        .filter(|l| !l.starts_with("dplogd: "))
        .map(String::from)
        .collect();
    let mut want: Vec<String> = read(&s.path("local.log"))
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(got.len() as u64, local.records_logged);
    // Two workers' rings interleave differently in the two consumers.
    got.sort();
    want.sort();
    assert!(got == want, "the logs differ");
    assert!(!s.path("unused.log").exists() || read(&s.path("unused.log")).is_empty());
}

/// `--log-ring-group`: dplog-nat's ring files are 0640 with the group;
/// while no daemon runs its workers wait (block) on their full rings, and
/// the daemon, once started, drains them whole.
#[test]
fn dplog_nat_ring_files_with_a_group_are_0640_and_drained() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let s = Setup::new("[sink]\ntype = \"file\"\npath = \"@/via-dplogd.log\"\n");
    // SAFETY: geteuid and getegid cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    // Another group than one's own needs root (chown to it).
    let group = if uid == 0 { 65534 } else { gid };
    let mut cfg = AppConfig::from_toml_str(
        "[synthetic]\npackets = 20000\n[dataplane]\nworkers = 2\n[ring]\ncapacity = 256\nbackpressure = \"block\"\n",
    )
    .unwrap();
    cfg.log_ring = Some(s.rings());
    cfg.log_ring_group = Some(group);
    let t = std::thread::spawn(move || run(&cfg).unwrap());
    let rings = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(s.rings())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "ring"))
            .collect()
    };
    wait_for(30, "both workers' ring files", || rings().len() == 2);
    for r in rings() {
        let md = std::fs::metadata(&r).unwrap();
        assert_eq!(md.permissions().mode() & 0o777, 0o640, "{r:?}");
        assert_eq!(md.gid(), group, "{r:?}");
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(!t.is_finished(), "the workers wait for the daemon");
    let mut d = s.daemon();
    let via = t.join().unwrap();
    wait_for(60, "both workers' rings closed", || {
        read(&s.path("via-dplogd.log"))
            .lines()
            .filter(|l| l.contains("\"producer_closed\""))
            .count()
            == 2
    });
    assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
    assert!(via.records_logged > 3000, "{}", via.records_logged);
    let got = read(&s.path("via-dplogd.log"))
        .lines()
        .filter(|l| !l.contains("\"dplogd\""))
        .count() as u64;
    assert_eq!(got, via.records_logged);
    assert!(rings().is_empty());
}
