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
