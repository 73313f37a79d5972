//! Syslog (TCP) behind dplogd: a daemon killed and restarted sends the
//! records after its last checkpoint again, so delivery is at least once;
//! every record arrives, and repeats show as repeated sequence numbers.

mod common;

use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use common::*;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

const RSYSLOGD: &str = "/usr/sbin/rsyslogd";

fn rsyslogd(dir: &Path, port: u16) -> Child {
    let d = dir.display();
    std::fs::write(
        dir.join("rsyslog.conf"),
        format!(
            r#"global(workDirectory="{d}" maxMessageSize="64k")
module(load="imtcp")
input(type="imtcp" address="127.0.0.1" port="{port}")
template(name="raw" type="string" string="%rawmsg%\n")
action(type="omfile" file="{d}/syslog.out" template="raw" flushOnTXEnd="on" asyncWriting="off")
"#
        ),
    )
    .unwrap();
    Command::new(RSYSLOGD)
        .arg("-n")
        .arg("-f")
        .arg(dir.join("rsyslog.conf"))
        .arg("-i")
        .arg(dir.join("rsyslogd.pid"))
        .spawn()
        .unwrap()
}

#[test]
fn syslog_behind_a_restarted_dplogd_gets_every_record_at_least_once() {
    if !Path::new(RSYSLOGD).exists() {
        eprintln!("SKIPPED: {RSYSLOGD} not installed (run scripts/setup.sh)");
        return;
    }
    let port = dplog_testkit::free_tcp_port();
    let s = Setup::new(&format!(
        "[sink]\ntype = \"syslog\"\ntransport = \"tcp\"\naddress = \"127.0.0.1:{port}\"\n"
    ));
    let mut rs = rsyslogd(s.dir.path(), port);
    // Listening, not merely connectable: a connect before rsyslogd binds
    // could reach another socket, or the client itself.
    wait_for(30, "rsyslogd to listen", || {
        dplog_testkit::tcp_listening(port)
    });
    const N: u64 = 20_000;
    let mut p = s.producer(
        "sys",
        9,
        &[
            "--records",
            &N.to_string(),
            "--capacity",
            "256",
            "--burst",
            "32",
        ],
    );
    let mut rng = Pcg64::seed_from_u64(11);
    for _ in 0..3 {
        let mut d = s.daemon();
        std::thread::sleep(Duration::from_millis(rng.gen_range(100..300)));
        kill9(&mut d);
    }
    let mut d = s.daemon();
    assert!(p.wait().unwrap().success());
    let out = s.path("syslog.out");
    wait_for(120, "the ring's end line at rsyslogd", || {
        read(&out).contains("\"producer_closed\"")
    });
    assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
    // SAFETY: kill(2) on the rsyslogd we started and have not reaped.
    unsafe { libc::kill(rs.id() as i32, libc::SIGTERM) };
    let _ = rs.wait();
    let o = parse(&read(&out));
    let seqs = &o.seqs[&9];
    arrivals(seqs, N);
    let repeats = seqs.len() as u64 - N;
    eprintln!("{repeats} records sent twice after the restarts (at least once)");
}
