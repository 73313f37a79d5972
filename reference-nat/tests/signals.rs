//! `dplog-nat` under SIGTERM with a sink that does not take records: a
//! FIFO whose reader stops reading (the consumer blocked in `write(2)`) or
//! that has no reader at all (the sink blocked in `open(2)`), and ring
//! settings that are refused before any file is created.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dplog-nat"))
}

fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    let r = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(r, 0, "mkfifo {}", std::io::Error::last_os_error());
}

/// Whether a thread of `pid` (named `comm`, if given) sleeps in system
/// call `nr` (`/proc/PID/task/TID/{comm,stat,syscall}`, see proc(5)).
fn thread_blocked_in(pid: u32, comm: Option<&str>, nr: libc::c_long) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|t| {
        let read = |f: &str| std::fs::read_to_string(t.path().join(f)).unwrap_or_default();
        let stat = read("stat");
        // The state follows the parenthesised command name.
        let state = stat.rsplit_once(") ").map(|(_, r)| r.chars().next());
        comm.map_or(true, |c| read("comm").trim() == c)
            && state == Some(Some('S'))
            && read("syscall").split(' ').next() == Some(&nr.to_string())
    })
}

/// Polls `cond` every 10 ms for at most 20 s; panics naming `what` if it
/// never holds (the child is killed first).
fn await_cond(child: &mut Child, what: &str, mut cond: impl FnMut() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(20);
    while !cond() {
        if Instant::now() > give_up {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: not seen within 20 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn sigterm(child: &Child) {
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

/// Waits at most 30 s for `child` to exit (a blocked sink used to keep it
/// for minutes); kills it and panics past that. Returns its status,
/// stdout and stderr.
fn wait_exit(mut child: Child, what: &str) -> (ExitStatus, String, String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: dplog-nat did not exit within 30 s of the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (mut out, mut err) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut err).unwrap();
    }
    (status, out, err)
}

/// Reads `child`'s stderr on a thread, line by line, into the returned
/// channel.
fn stderr_lines(child: &mut Child) -> mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = mpsc::channel();
    let e = std::io::BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in e.lines() {
            if tx.send(line.unwrap_or_default()).is_err() {
                return;
            }
        }
    });
    rx
}

/// A reader of the FIFO at `path`: reads until it has `first` bytes, says
/// so on the first channel, stops reading until told to go on, then reads
/// to the end (the writer gone) and sends everything it read.
fn stalling_reader(
    path: &Path,
    first: usize,
) -> (
    mpsc::Receiver<()>,
    mpsc::Sender<()>,
    mpsc::Receiver<Vec<u8>>,
) {
    let (got_tx, got_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (all_tx, all_rx) = mpsc::channel();
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let mut f = std::fs::File::open(&path).unwrap();
        let mut data = vec![0u8; first];
        f.read_exact(&mut data).unwrap();
        let _ = got_tx.send(());
        if go_rx.recv().is_err() {
            return;
        }
        f.read_to_end(&mut data).unwrap();
        let _ = all_tx.send(data);
    });
    (got_rx, go_tx, all_rx)
}

/// The number just before `label` in `line`.
fn num_before(line: &str, label: &str) -> u64 {
    let at = line
        .find(label)
        .unwrap_or_else(|| panic!("no {label:?} in {line}"));
    let digits: String = line[..at]
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.chars().rev().collect::<String>().parse().unwrap()
}

/// Complete lines of `data`, and of them the session creates and deletes.
fn count_lines(data: &[u8]) -> (u64, u64, u64) {
    let text = String::from_utf8_lossy(data);
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    let lines = complete.lines().count() as u64;
    let creates = complete.matches(" natEvent=4 ").count() as u64;
    let deletes = complete.matches(" natEvent=5 ").count() as u64;
    (lines, creates, deletes)
}

/// A `dplog-nat` run (JSON summary, stdout and stderr piped) writing its
/// file sink into a FIFO whose reader took `stall_after` bytes and stopped
/// reading; returned once the consumer is blocked in `write(2)`.
struct StalledRun {
    /// The run's directory (`<name>.fifo`, `<name>.toml`).
    _dir: tempfile::TempDir,
    child: Child,
    /// Tells the reader to read on, to the end.
    go: mpsc::Sender<()>,
    /// Everything the reader read, once the writer is gone.
    all: mpsc::Receiver<Vec<u8>>,
}

/// Starts a [`StalledRun`] with a 1024-record ring and
/// `[ring] shutdown_timeout_ms = shutdown_timeout_ms`, files named `name`.
fn stalled_run(name: &str, shutdown_timeout_ms: u64, stall_after: usize) -> StalledRun {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join(format!("{name}.fifo"));
    mkfifo(&fifo);
    let config = format!("{name}.toml");
    std::fs::write(
        dir.path().join(&config),
        format!("[ring]\ncapacity = 1024\nshutdown_timeout_ms = {shutdown_timeout_ms}\n"),
    )
    .unwrap();
    let (got, go, all) = stalling_reader(&fifo, stall_after);
    let mut child = bin()
        .args(["--config", &config, "-o", &format!("{name}.fifo")])
        .args(["--packets", "2000000000", "--new-session-share", "0.5"])
        .args(["--summary", "json"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if got.recv_timeout(Duration::from_secs(20)).is_err() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the reader did not get {stall_after} bytes within 20 s");
    }
    let pid = child.id();
    await_cond(&mut child, "consumer blocked in write(2)", || {
        thread_blocked_in(pid, Some("dplog-consumer"), libc::SYS_write)
    });
    StalledRun {
        _dir: dir,
        child,
        go,
        all,
    }
}

#[test]
fn a_second_sigterm_exits_130_with_a_loss_line_that_matches_the_log() {
    // The stop waits up to a minute for a sink that takes nothing, so the
    // second signal finds the first one's shutdown under way. The reader
    // stopped: the pipe fills, the consumer blocks in write(2) and the
    // worker waits on its full ring (sleeping between tries), so every
    // counter holds still while the signals arrive.
    let StalledRun {
        _dir,
        mut child,
        go,
        all,
    } = stalled_run("slow", 60_000, 1 << 20);
    let pid = child.id();
    await_cond(&mut child, "worker waiting on a full ring", || {
        thread_blocked_in(pid, Some("dplog-nat"), libc::SYS_clock_nanosleep)
    });
    let lines = stderr_lines(&mut child);
    sigterm(&child);
    // Signals of one kind do not queue: the second is sent once the first
    // was taken (its note is on stderr), or the two could be one.
    let mut err = String::new();
    let note = "dplog-nat: stop signal received: input stopped, finishing the run (live sessions \
                deleted and logged); a second SIGINT/SIGTERM exits at once and loses what is not yet written";
    loop {
        match lines.recv_timeout(Duration::from_secs(20)) {
            Ok(l) => {
                err += &l;
                err.push('\n');
                if l == note {
                    break;
                }
            }
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("no note of the first SIGTERM within 20 s: {err}");
            }
        }
    }
    sigterm(&child);
    let (status, out, _) = wait_exit(child, "second SIGTERM");
    while let Ok(l) = lines.recv_timeout(Duration::from_secs(20)) {
        err += &l;
        err.push('\n');
    }
    go.send(()).unwrap();
    let data = all.recv_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(out.is_empty(), "no summary after a second signal: {out}");
    let line = err
        .lines()
        .find(|l| l.starts_with("dplog-nat: second signal, exiting at once (status 130): "))
        .unwrap_or_else(|| panic!("no loss line on stderr: {err}"));
    let lost = num_before(line, " log records lost (");
    let in_rings = num_before(line, " in rings, ");
    let in_consumer = num_before(line, " read by the consumer but not written, ");
    let pending = num_before(line, " awaiting the sink's acknowledgement) ");
    let produced = num_before(line, " produced, ");
    // The first " written, " is the consumer's "not written, ".
    let written = num_before(line, " written, 0 dropped before");
    let dropped = num_before(line, " dropped before; ");
    let open = num_before(line, " sessions created have no delete record");
    assert_eq!(lost, in_rings + in_consumer + pending, "{line}");
    assert_eq!(produced, written + lost + dropped, "{line}");
    assert_eq!((pending, dropped), (0, 0), "a file sink, block: {line}");
    assert_eq!(in_rings, 1024, "the ring is full: {line}");
    // What came out of the FIFO: every record counted written, and at most
    // the part of the batch the consumer was blocked writing (counted
    // among the lost); nothing else.
    let (lines, creates, deletes) = count_lines(&data);
    assert!(
        written >= 1 << 20 >> 10 && written <= lines && lines <= written + in_consumer,
        "{lines} lines came out; {line}"
    );
    // Creates out without their delete: the sessions the line names, give
    // or take the creates and deletes among the lost records.
    let orphans = creates - deletes;
    assert!(
        creates > 0 && orphans > 0,
        "{creates} creates, {deletes} deletes"
    );
    assert!(
        orphans.abs_diff(open) <= lost,
        "{orphans} creates without a delete came out; {line}"
    );
}

#[test]
fn a_sink_blocked_in_write_does_not_hold_the_first_sigterm() {
    let StalledRun {
        _dir,
        child,
        go,
        all,
    } = stalled_run("stuck", 300, 256 << 10);
    sigterm(&child);
    let (status, out, err) = wait_exit(child, "one SIGTERM, consumer blocked in write(2)");
    go.send(()).unwrap();
    let data = all.recv_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains("the sink made no progress for [ring] shutdown_timeout_ms = 300 ms"),
        "{err}"
    );
    let s: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(s["interrupted"], true);
    let r = &s["records"];
    let n = |k: &str| r[k].as_u64().unwrap();
    // Nothing is unaccounted for: every record the NAT made was written,
    // not logged at the stop (ring full, no progress) or undelivered.
    assert_eq!(n("produced"), n("written") + n("dropped_shutdown"), "{r}");
    assert_eq!(
        s["records_logged"].as_u64().unwrap(),
        n("produced") + n("dropped_at_stop"),
        "{r}"
    );
    assert!(n("dropped_shutdown") > 0 && n("dropped_at_stop") > 0, "{r}");
    assert_eq!(s["sessions_deleted"], s["sessions_created"]);
    assert!(
        err.contains(&format!(
            "{} undelivered records are counted in dropped_shutdown",
            n("dropped_shutdown")
        )),
        "{err}"
    );
    // Against what came out of the FIFO: every record counted written,
    // and at most part of the batch the consumer was blocked on.
    let (lines, _, _) = count_lines(&data);
    assert!(
        n("written") > 0 && n("written") <= lines,
        "{lines} lines; {r}"
    );
    assert!(
        lines <= n("written") + n("dropped_shutdown"),
        "{lines}; {r}"
    );
    assert!(data.len() as u64 >= n("written_bytes"), "{r}");
}

#[test]
fn a_sink_blocked_in_open_does_not_hold_the_first_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("noreader.fifo");
    mkfifo(&fifo);
    std::fs::write(
        dir.path().join("open.toml"),
        "[ring]\nshutdown_timeout_ms = 300\n",
    )
    .unwrap();
    let mut child = bin()
        .args(["--config", "open.toml", "-o", "noreader.fifo"])
        .args(["--packets", "1000000", "--summary", "json"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // open(2) of a FIFO for writing waits for a reader, which never comes.
    let pid = child.id();
    await_cond(&mut child, "sink blocked in open(2)", || {
        thread_blocked_in(pid, None, libc::SYS_openat)
    });
    sigterm(&child);
    let (status, out, err) = wait_exit(child, "one SIGTERM, sink blocked in open(2)");
    assert_eq!(status.code(), Some(1), "{err}");
    assert_eq!(
        err.trim_end(),
        "dplog-nat: stop signal received: input stopped, finishing the run (live sessions deleted and logged); \
         a second SIGINT/SIGTERM exits at once and loses what is not yet written\n\
         dplog-nat: stopped by a signal while the sink was opening: file noreader.fifo did not open \
         within [ring] shutdown_timeout_ms = 300 ms of the stop (open(2) blocks: a FIFO without a \
         reader? a stuck NFS server?); no packet was read and nothing was logged"
    );
    let s: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(s["interrupted"], true);
    assert_eq!(s["packets"], 0);
    assert_eq!(s["records"]["produced"], 0);
    assert_eq!(s["records"]["written"], 0);
    // Nothing was written into the FIFO: a reader opened now finds it
    // empty, with no writer.
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    let mut rest = Vec::new();
    assert_eq!(f.read_to_end(&mut rest).unwrap(), 0);
}

#[test]
fn refused_ring_sizes_exit_2_naming_the_key_and_memory_and_create_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let files = || {
        let mut v: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    // Safe for the old code first: it left an empty dplog-nat.log here.
    for (toml, flags, want) in [
        (
            "[ring]\ncapacity = 1000\n",
            &[][..],
            "dplog-nat: bad config: ring.toml: config line 2, column 1: [ring] capacity = 1000 must be a power of two from 1 to 16777216 slots per ring\n  |\n2 | capacity = 1000\n  | ^^^^^^^^",
        ),
        (
            "[ring]\nbatch_bytes = 1099511627776\n",
            &[][..],
            "dplog-nat: invalid logger config: batch_bytes ([ring] batch_bytes) = 1099511627776 (1 TiB) is outside 65536 (64 KiB) to 268435456 (256 MiB)",
        ),
        (
            "[ring]\ncapacity = 268435456\n",
            &[][..],
            "dplog-nat: bad config: ring.toml: config line 2, column 1: [ring] capacity = 268435456 is above the limit of 16777216 slots per ring\n  |\n2 | capacity = 268435456\n  | ^^^^^^^^",
        ),
        (
            "",
            &["--ring-size", "33554432"][..],
            "dplog-nat: invalid logger config: ring_capacity ([ring] capacity) = 33554432 slots x 64 B = 2 GiB per ring is above the limit of 16777216 slots (1 GiB)",
        ),
    ] {
        std::fs::write(dir.path().join("ring.toml"), toml).unwrap();
        let o = bin()
            .args(["--config", "ring.toml", "--packets", "1000"])
            .args(flags)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{toml}{flags:?}: {err}");
        assert_eq!(err.trim_end(), want);
        assert_eq!(files(), ["ring.toml"], "{toml}{flags:?}: no file created");
    }
    // The largest ring is accepted, and the summary says what a ring takes.
    let o = bin()
        .args(["--packets", "1000", "-o", "ok.log"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(
            "  ring               16384 slots x 64 B = 1 MiB per ring, block, high-water "
        ),
        "{out}"
    );
}

#[test]
fn rings_larger_than_the_memory_available_are_refused_before_they_are_allocated() {
    use dplog_nat::app::check_ring_memory;
    // 4 rings of 2^24 slots x 64 B: 4 GiB.
    let e = check_ring_memory(1 << 24, 4, Some(3 << 30)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "bad config: [ring] capacity = 16777216 slots x 64 B = 1 GiB per ring x 4 workers = 4 GiB of rings, \
         more than the 3 GiB of memory available (MemAvailable in /proc/meminfo); give a smaller capacity"
    );
    assert!(check_ring_memory(1 << 24, 4, Some(4 << 30)).is_ok());
    assert!(check_ring_memory(1 << 24, 4, None).is_ok());
    // The binary reads /proc/meminfo: 64 workers of the largest ring need
    // 64 GiB, refused (exit 2, no file) where less is available.
    let Some(avail) = dplog_nat::app::mem_available() else {
        println!("skipped the run: /proc/meminfo has no MemAvailable");
        return;
    };
    if avail >= 64 << 30 {
        println!("skipped the run: {avail} bytes available hold 64 GiB of rings");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let o = bin()
        .args([
            "--ring-size",
            "16777216",
            "--workers",
            "64",
            "--packets",
            "1000",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with(
            "dplog-nat: bad config: [ring] capacity = 16777216 slots x 64 B = 1 GiB per ring x 64 workers = 64 GiB of rings, more than the "
        ),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no file created"
    );
}
