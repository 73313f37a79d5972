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
    // Listening, not merely connectable, and by this rsyslogd: a connect
    // before it binds could reach another socket, or the client itself,
    // and a port another process took would reach that process.
    wait_for(30, "rsyslogd to listen", || {
        dplog_testkit::tcp_listener_is(port, rs.id()) == Some(true)
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
    let o = parse(&read_lines(&out));
    let seqs = &o.seqs[&9];
    arrivals(seqs, N);
    let repeats = seqs.len() as u64 - N;
    eprintln!("{repeats} records sent twice after the restarts (at least once)");
}

/// rsyslogd on `port` writing each message it receives as the fields it
/// parsed: PRI, protocol version (1: RFC 5424, 0: RFC 3164), HOSTNAME,
/// APP-NAME, PROCID, MSGID, STRUCTURED-DATA and MSG, `|`-separated, one
/// line each, to `<dir>/parsed.out`.
fn rsyslogd_parsed(dir: &Path, port: u16) -> Child {
    let d = dir.display();
    std::fs::write(
        dir.join("rsyslog.conf"),
        format!(
            r#"global(workDirectory="{d}" maxMessageSize="64k")
module(load="imtcp")
input(type="imtcp" address="127.0.0.1" port="{port}")
template(name="parsed" type="string" string="%pri%|%protocol-version%|%hostname%|%app-name%|%procid%|%msgid%|%structured-data%|%msg%\n")
action(type="omfile" file="{d}/parsed.out" template="parsed" flushOnTXEnd="on" asyncWriting="off")
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

/// In `rfc5424` and `rfc3164` the line that ends a ring is a syslog
/// message in the records' header, which rsyslogd parses as such: the
/// configured HOSTNAME and PROCID, the records' APP-NAME (`NAT`), its
/// own MSGID and (RFC 5424) structured data naming the ring.
#[test]
fn the_end_of_a_ring_is_a_syslog_message_in_rfc5424_and_rfc3164() {
    if !Path::new(RSYSLOGD).exists() {
        eprintln!("SKIPPED: {RSYSLOGD} not installed (run scripts/setup.sh)");
        return;
    }
    const N: u64 = 10;
    for (format, version) in [("rfc5424", "1"), ("rfc3164", "0")] {
        let port = dplog_testkit::free_tcp_port();
        let s = Setup::with_config(&format!(
            "[format]\ntype = \"{format}\"\n[format.syslog]\nhostname = \"h\"\nprocid = \"p\"\n[ring]\nburst = 64\n[sink]\ntype = \"syslog\"\ntransport = \"tcp\"\naddress = \"127.0.0.1:{port}\"\n"
        ));
        let mut rs = rsyslogd_parsed(s.dir.path(), port);
        wait_for(30, "rsyslogd to listen", || {
            dplog_testkit::tcp_listener_is(port, rs.id()) == Some(true)
        });
        // The producer ends before dplogd starts: its ring file's name is
        // known.
        let mut p = s.producer("sys", 3, &["--records", &N.to_string()]);
        assert!(p.wait().unwrap().success());
        let ring = ring_dir_files(&s.rings())[0]
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let pid = p.id();
        let mut d = s.daemon();
        let out = s.path("parsed.out");
        wait_for(120, "the records and the end at rsyslogd", || {
            read(&out).lines().count() as u64 > N
        });
        assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
        // SAFETY: kill(2) on the rsyslogd we started and have not reaped.
        unsafe { libc::kill(rs.id() as i32, libc::SIGTERM) };
        let _ = rs.wait();
        let text = read(&out);
        let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split('|').collect()).collect();
        assert_eq!(lines.len() as u64, N + 1, "{format}:\n{text}");
        for l in &lines {
            assert_eq!(l.len(), 8, "{format}: {l:?}");
            assert_eq!(l[1], version, "{format}: {l:?}");
            assert_eq!(l[2], "h", "{format}: {l:?}");
            assert_eq!(l[3], "NAT", "{format}: {l:?}");
        }
        let ends: Vec<&Vec<&str>> = lines
            .iter()
            .filter(|l| l[5] == "RING_CLOSED" || l[7].trim_start().starts_with("RING_CLOSED "))
            .collect();
        assert_eq!(ends.len(), 1, "{format}:\n{text}");
        let e = ends[0];
        // local0 (16), informational (6).
        assert_eq!(e[0], "134", "{format}: {e:?}");
        if format == "rfc5424" {
            assert_eq!(e[4], "p", "{e:?}");
            assert_eq!(
                e[6],
                format!("[dplogRing@32473 ring=\"{ring}\" pid=\"{pid}\" records=\"{N}\"]"),
                "{e:?}"
            );
            assert_eq!(e[7], "", "{e:?}");
        } else {
            // rsyslogd keeps the space after the TAG in MSG.
            assert_eq!(
                e[7].trim_start(),
                format!("RING_CLOSED ring={ring} pid={pid} records={N}"),
                "{e:?}"
            );
        }
    }
}
