//! `dplog-nat --log-ring` as a user runs it without a daemon: what it says
//! while its rings wait, and the flags it refuses or accepts with it.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dplog-nat"))
}

/// No dplogd serves the ring directory: after about a second dplog-nat
/// says once on stderr which directory it waits on and what for (its
/// workers blocked on full rings). Then the daemon's reader
/// (`dplog::shm::ShmReader`, which makes the ring's consumer file) takes
/// the ring: one more line says the rings are served; it quarantines the
/// ring: one line names it. Killed after it (bounded: 60 s a line).
/// dplog-nat with one worker logging into a 64-slot ring in `rings`
/// (created), run in `dir`, and its stderr line by line.
fn log_ring_nat(
    dir: &std::path::Path,
    rings: &std::path::Path,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    std::fs::create_dir(rings).unwrap();
    let mut c = bin()
        .arg("--log-ring")
        .arg(rings)
        .args([
            "--ring-size",
            "64",
            "--packets",
            "2000000",
            "--workers",
            "1",
        ])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let err = c.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    (c, rx)
}

#[test]
fn a_ring_nobody_serves_is_said_once_and_so_is_the_daemons_arrival() {
    let dir = tempfile::tempdir().unwrap();
    let rings = dir.path().join("rings");
    let (mut c, rx) = log_ring_nat(dir.path(), &rings);
    let want = format!("is dplogd running with --rings {}?", rings.display());
    let mut lines = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !lines.iter().any(|l: &String| l.contains(&want)) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => lines.push(l),
            Err(_) => break,
        }
    }
    // A little more of stderr: the line is not repeated.
    while let Ok(l) = rx.recv_timeout(Duration::from_millis(1500)) {
        lines.push(l);
    }
    let ring = std::fs::read_dir(&rings)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "ring"))
        .expect("the worker's ring file");
    assert!(!dplog::shm::consumer_path(&ring).exists());
    let reader = dplog::shm::ShmReader::open(&ring, &dplog::shm::OpenRules::default()).unwrap();
    let arrived = format!(
        "dplog-nat: --log-ring {}: dplogd serves the rings now",
        rings.display()
    );
    while !lines.iter().any(|l| l == &arrived) {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(l) => lines.push(l),
            Err(_) => break,
        }
    }
    // The daemon quarantines the ring: said once, naming it.
    reader.quarantine();
    let quarantined = format!(
        "dplog-nat: --log-ring {}: dplogd quarantined ring {} (its stderr says why)",
        rings.display(),
        ring.display()
    );
    while !lines.iter().any(|l| l.starts_with(&quarantined)) {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(l) => lines.push(l),
            Err(_) => break,
        }
    }
    while let Ok(l) = rx.recv_timeout(Duration::from_millis(500)) {
        lines.push(l);
    }
    assert_eq!(
        lines.iter().filter(|l| l.starts_with(&quarantined)).count(),
        1,
        "stderr: {lines:#?}"
    );
    drop(reader);
    // SAFETY: kill(2) on our own child, not yet reaped.
    unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
    let _ = c.wait();
    let said: Vec<&String> = lines.iter().filter(|l| l.contains(&want)).collect();
    assert_eq!(said.len(), 1, "stderr: {lines:#?}");
    assert_eq!(
        lines.iter().filter(|l| **l == arrived).count(),
        1,
        "stderr: {lines:#?}"
    );
    let l = said[0];
    assert!(
        l.starts_with(&format!(
            "dplog-nat: --log-ring {}: 1 ring(s) not served after 1s: ",
            rings.display()
        )) && l.contains("the workers wait for it once their rings are full (backpressure block)"),
        "{l}"
    );
    let name = ring.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("dplog-nat-w0."), "{name}");
}

/// `--format` and `--output` choose nothing with `--log-ring` (dplogd's
/// config does): refused, exit 2, nothing created.
#[test]
fn format_and_output_are_refused_with_log_ring() {
    let dir = tempfile::tempdir().unwrap();
    let rings = dir.path().join("rings");
    std::fs::create_dir(&rings).unwrap();
    for (flags, named) in [
        (&["--format", "csv"][..], "--format"),
        (&["-o", "x.csv"][..], "--output"),
        (
            &["--format", "csv", "-o", "x.csv"][..],
            "--format and --output",
        ),
    ] {
        let o = bin()
            .arg("--log-ring")
            .arg(&rings)
            .args(flags)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flags:?}: {err}");
        assert!(
            err.contains(&format!(
                "dplog-nat: {named} with --log-ring {}: dplogd writes these records, and its config ([format], [sink]) chooses the format and the outputs",
                rings.display()
            )),
            "{flags:?}: {err}"
        );
        assert!(!dir.path().join("x.csv").exists());
        assert_eq!(std::fs::read_dir(&rings).unwrap().count(), 0);
    }
    // The same for [format] / [sink] in the config file; [ring] applies.
    for (text, named) in [
        (
            "[ring]\ncapacity = 1024\n[format]\ntype = \"csv\"\n",
            "[format]",
        ),
        (
            "[format]\ntype = \"csv\"\n[sink]\ntype = \"file\"\npath = \"x.csv\"\n",
            "[format] and [sink]",
        ),
    ] {
        let cfg = dir.path().join("nat.toml");
        std::fs::write(&cfg, text).unwrap();
        let o = bin()
            .arg("--log-ring")
            .arg(&rings)
            .arg("--config")
            .arg(&cfg)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{text}: {err}");
        assert!(
            err.contains(&format!(
                "dplog-nat: {named} in {} with --log-ring {}: dplogd writes these records",
                cfg.display(),
                rings.display()
            )),
            "{text}: {err}"
        );
        assert!(!dir.path().join("x.csv").exists());
        assert_eq!(std::fs::read_dir(&rings).unwrap().count(), 0);
    }
}

/// `--log-ring-group` takes a group name as well as a number: the ring
/// file gets that group; an unknown name is refused by name.
#[test]
fn log_ring_group_takes_a_name_or_a_number() {
    use std::os::unix::fs::MetadataExt;
    // A group every system has, by name and by its number.
    let (name, gid) = std::fs::read_to_string("/etc/group")
        .unwrap()
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() >= 3 && f[0] != "root").then(|| (f[0].to_string(), f[2].parse::<u32>().ok()))
        })
        .and_then(|(n, g)| g.map(|g| (n, g)))
        .expect("a group in /etc/group");
    for group in [name.clone(), gid.to_string()] {
        let dir = tempfile::tempdir().unwrap();
        let rings = dir.path().join("rings");
        std::fs::create_dir(&rings).unwrap();
        // Drops when full: the run ends without a daemon.
        let o = bin()
            .arg("--log-ring")
            .arg(&rings)
            .args(["--log-ring-group", &group, "--backpressure", "drop"])
            .args(["--packets", "200", "--workers", "1"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{group}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let ring = std::fs::read_dir(&rings)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "ring"))
            .unwrap_or_else(|| panic!("{group}: no ring file"));
        let md = std::fs::metadata(&ring).unwrap();
        assert_eq!(md.gid(), gid, "{group}");
        assert_eq!(md.mode() & 0o777, 0o640, "{group}");
    }
    let o = bin()
        .args([
            "--log-ring",
            "/nonexistent",
            "--log-ring-group",
            "no-such-group-dplog",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no group named \"no-such-group-dplog\""),
        "{err}"
    );
}

/// A consumer file the producer does not trust (here: group-writable,
/// as someone other than the daemon could have made it) is said once,
/// naming the file and its mode, and the ring counts as not served.
#[test]
fn a_consumer_file_the_producer_refuses_is_said_once() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let rings = dir.path().join("rings");
    let (mut c, rx) = log_ring_nat(dir.path(), &rings);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let ring = loop {
        let found = std::fs::read_dir(&rings)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "ring"));
        if let Some(r) = found {
            break r;
        }
        assert!(std::time::Instant::now() < deadline, "no ring file");
        std::thread::sleep(Duration::from_millis(10));
    };
    // A consumer file made as the daemon would, then opened to the group.
    let reader = dplog::shm::ShmReader::open(&ring, &dplog::shm::OpenRules::default()).unwrap();
    let cpath = dplog::shm::consumer_path(&ring);
    std::fs::set_permissions(&cpath, std::fs::Permissions::from_mode(0o660)).unwrap();
    let refused = format!(
        "dplog-nat: --log-ring {}: consumer file {} refused: ",
        rings.display(),
        cpath.display()
    );
    let mut lines = Vec::new();
    while !lines.iter().any(|l: &String| l.starts_with(&refused)) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => lines.push(l),
            Err(_) => break,
        }
    }
    // More of stderr: the refusal is not repeated; the ring is unserved.
    while let Ok(l) = rx.recv_timeout(Duration::from_millis(2500)) {
        lines.push(l);
    }
    drop(reader);
    // SAFETY: kill(2) on our own child, not yet reaped.
    unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
    let _ = c.wait();
    let said: Vec<&String> = lines.iter().filter(|l| l.starts_with(&refused)).collect();
    assert_eq!(said.len(), 1, "stderr: {lines:#?}");
    assert!(said[0].contains("mode 0660"), "{}", said[0]);
    assert!(
        lines.iter().any(|l| l.contains("1 ring(s) not served")),
        "stderr: {lines:#?}"
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("dplogd serves the rings now")),
        "stderr: {lines:#?}"
    );
}
