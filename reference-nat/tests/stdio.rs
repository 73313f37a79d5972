//! `dplog-nat` under the signals and pipes of an operator's shell: a
//! logrotate `kill -HUP`, and stdout or stderr piped into `head`.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dplog-nat"))
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success(), "kill {sig}");
}

/// Waits at most 30 s for `child` to exit (then kills it and fails).
fn wait(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("dplog-nat did not exit within 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read_all(r: Option<impl Read>) -> String {
    let mut s = String::new();
    if let Some(mut r) = r {
        r.read_to_string(&mut s).unwrap();
    }
    s
}

/// Runs an endless synthetic mix logging to `log` in `dir`, sends SIGHUP
/// after 300 ms (first calling `before_hup`), then SIGINT 300 ms later.
/// Returns the exit status, the JSON summary and stderr.
fn hup_then_int(
    dir: &Path,
    extra: &[&str],
    before_hup: impl FnOnce(),
) -> (ExitStatus, serde_json::Value, String) {
    let mut child = bin()
        .args(["--packets", "2000000000", "--new-session-share", "0.01"])
        .args(["--summary", "json"])
        .args(extra)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    before_hup();
    signal(&child, "-HUP");
    std::thread::sleep(Duration::from_millis(300));
    if child.try_wait().unwrap().is_none() {
        signal(&child, "-INT");
    }
    let status = wait(&mut child);
    let out = read_all(child.stdout.take());
    let err = read_all(child.stderr.take());
    let summary = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("{e}: {status:?}\nstdout: {out}\nstderr: {err}"));
    (status, summary, err)
}

fn count_events(text: &str) -> (u64, u64) {
    let n = |ev: &str| text.lines().filter(|l| l.contains(ev)).count() as u64;
    (n(" natEvent=4 "), n(" natEvent=5 "))
}

#[test]
fn sighup_without_reopen_is_noted_and_the_run_carries_on() {
    let dir = tempfile::tempdir().unwrap();
    let (status, s, err) = hup_then_int(dir.path(), &["-o", "hup.log"], || {});
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(
        s["interrupted"], true,
        "ended by the SIGINT, not the SIGHUP"
    );
    assert!(
        err.contains("SIGHUP received") && err.contains("reopen_on_sighup"),
        "{err}"
    );
    assert_eq!(err.matches("SIGHUP").count(), 1, "one line: {err}");
    let created = s["sessions_created"].as_u64().unwrap();
    assert!(created > 0);
    let log = std::fs::read_to_string(dir.path().join("hup.log")).unwrap();
    assert_eq!(count_events(&log), (created, created));
}

#[test]
fn sighup_with_reopen_on_sighup_reopens_the_log_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("hup.toml"),
        "[sink]\ntype = \"file\"\npath = \"hup.log\"\nreopen_on_sighup = true\n",
    )
    .unwrap();
    let (live, rotated) = (dir.path().join("hup.log"), dir.path().join("hup.log.1"));
    let (status, s, err) = hup_then_int(dir.path(), &["--config", "hup.toml"], || {
        // What logrotate does before its postrotate `kill -HUP`.
        std::fs::rename(&live, &rotated).unwrap();
    });
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(s["interrupted"], true);
    assert!(!err.contains("SIGHUP"), "reopen is configured: {err}");
    let old = std::fs::read_to_string(&rotated).unwrap();
    let new = std::fs::read_to_string(&live).unwrap();
    assert!(!old.is_empty() && !new.is_empty(), "both files written");
    let created = s["sessions_created"].as_u64().unwrap();
    let (c1, d1) = count_events(&old);
    let (c2, d2) = count_events(&new);
    assert_eq!((c1 + c2, d1 + d2), (created, created));
}

/// Runs `dplog-nat args` with stdout and/or stderr a pipe whose read end
/// is closed at once (as `| head -c 100` does after 100 bytes).
fn closed(args: &[&str], close_out: bool, close_err: bool) -> (ExitStatus, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = bin()
        .args(args)
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if close_out {
        drop(child.stdout.take());
    }
    if close_err {
        drop(child.stderr.take());
    }
    let status = wait(&mut child);
    let err = read_all(child.stderr.take());
    (status, err)
}

#[test]
fn a_closed_stdout_or_stderr_is_no_panic_and_keeps_the_exit_code() {
    let ok = ["--packets", "20000", "-o", "out.log", "--live"];
    let (status, err) = closed(&ok, true, false);
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let (status, _) = closed(&ok, true, true);
    assert_eq!(status.code(), Some(0));
    // A run that fails writes its reasons to stderr: exit 1, not 101.
    let lost = ["--packets", "2000", "-o", "/dev/full", "--config", "d.toml"];
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("d.toml");
    std::fs::write(
        &toml,
        "[ring]\nsink_retry_timeout_ms = 100\nshutdown_timeout_ms = 300\n",
    )
    .unwrap();
    let mut lost = lost.map(String::from);
    lost[5] = toml.display().to_string();
    let lost: Vec<&str> = lost.iter().map(String::as_str).collect();
    let (status, _) = closed(&lost, true, true);
    assert_eq!(status.code(), Some(1));
    // A bad flag value: the usage error (exit 2), not a panic.
    let (status, _) = closed(&["--ring-size", "3"], true, true);
    assert_eq!(status.code(), Some(2));
}
