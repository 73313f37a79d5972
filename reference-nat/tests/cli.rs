//! The `dplog-nat` binary as a user runs it.

use std::path::Path;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dplog-nat"))
}

#[test]
fn the_readme_capture_command_writes_one_json_object_per_event() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/pcaps/example.pcap");
    let o = bin()
        .arg("--pcap")
        .arg(&pcap)
        .args([
            "--inside",
            "10.0.0.0/8",
            "--pool",
            "198.51.100.0/28",
            "--format",
            "json",
        ])
        .args(["--output", "sessions.jsonl"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary = String::from_utf8(o.stdout).unwrap();
    assert!(summary.contains("created 65  deleted 65"), "{summary}");
    assert!(
        summary.contains("produced 130  enqueued 130  dropped 0  written 130"),
        "{summary}"
    );
    let body = std::fs::read_to_string(dir.path().join("sessions.jsonl")).unwrap();
    let events: Vec<u64> = body
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["natEvent"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(events.len(), 130);
    assert_eq!(events.iter().filter(|e| **e == 4).count(), 65);
    assert_eq!(events.iter().filter(|e| **e == 5).count(), 65);
}

#[test]
fn the_default_run_uses_the_synthetic_mix_and_a_config_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("nat.toml"),
        "[ring]\ncapacity = 512\n[format]\ntype = \"text\"\n[sink]\ntype = \"file\"\npath = \"out.log\"\n[synthetic]\npackets = 20000\nseed = 7\n",
    )
    .unwrap();
    let o = bin()
        .args(["--config", "nat.toml", "--summary", "json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["input"], "synthetic");
    assert_eq!(s["packets"], 20000);
    assert_eq!(s["ring_capacity"], 512);
    let created = s["sessions_created"].as_u64().unwrap();
    assert!(created > 1000, "{created}");
    assert_eq!(s["records"]["written"].as_u64().unwrap(), 2 * created);
    let text = std::fs::read_to_string(dir.path().join("out.log")).unwrap();
    assert_eq!(text.lines().count() as u64, 2 * created);
    assert!(text
        .lines()
        .all(|l| l.len() > 27 && l.as_bytes()[26] == b'Z'));

    // A flag overrides the file.
    let o = bin()
        .args([
            "--config",
            "nat.toml",
            "--summary",
            "json",
            "--format",
            "json",
            "-o",
            "o.jsonl",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success());
    let s2: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s2["format"], "json");
    assert_eq!(s2["sessions_created"], s["sessions_created"]);
}

#[test]
fn the_shipped_example_config_is_valid() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("dplog-nat.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let cfg = dplog_nat::app::AppConfig::from_toml_str(&text).unwrap();
    assert_eq!(cfg.ring.capacity, dplog::DEFAULT_RING_CAPACITY);
    // The file says every key shows its default: hold it to that.
    assert_eq!(cfg, dplog_nat::app::AppConfig::default());
}

#[test]
fn sigint_stops_the_input_and_still_logs_every_delete() {
    let dir = tempfile::tempdir().unwrap();
    let child = bin()
        .args(["--packets", "2000000000", "--new-session-share", "0.01"])
        .args(["--summary", "json", "-o", "sig.log"])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    let killed = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["interrupted"], true);
    let packets = s["packets"].as_u64().unwrap();
    assert!(packets > 0 && packets < 2_000_000_000, "{packets}");
    let created = s["sessions_created"].as_u64().unwrap();
    assert_eq!(s["sessions_deleted"].as_u64().unwrap(), created);
    let log = std::fs::read_to_string(dir.path().join("sig.log")).unwrap();
    let creates = log.lines().filter(|l| l.contains(" natEvent=4 ")).count() as u64;
    let deletes = log.lines().filter(|l| l.contains(" natEvent=5 ")).count() as u64;
    assert_eq!((creates, deletes), (created, created));
}

#[test]
fn cpus_out_of_range_are_an_error_naming_the_flag_and_the_cpus_available() {
    let dir = tempfile::tempdir().unwrap();
    let allowed = dplog_nat::app::cpu_list(&dplog_nat::app::allowed_cpus());
    for (flag, value) in [
        ("--producer-cpu", "1000"),
        ("--worker-cpus", "0,1000"),
        ("--consumer-cpu", "1000"),
    ] {
        let o = bin()
            .args(["--packets", "1000", "-o", "cpu.log", flag, value])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{flag}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!(
                "{flag}: CPU 1000 is not available; this process may run on CPUs {allowed}"
            )),
            "{flag}: {err}"
        );
        assert!(o.stdout.is_empty(), "no run, no summary");
    }
    assert!(!dir.path().join("cpu.log").exists(), "nothing ran");
    // The same from the config file names the key.
    std::fs::write(
        dir.path().join("cpu.toml"),
        "producer_cpu = 1000\n[synthetic]\npackets = 1000\n",
    )
    .unwrap();
    let o = bin()
        .args(["--config", "cpu.toml", "-o", "cpu.log"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("producer_cpu: CPU 1000 is not available"),
        "{err}"
    );
    // A CPU that exists is accepted.
    let first = dplog_nat::app::allowed_cpus()[0].to_string();
    let o = bin()
        .args([
            "--packets",
            "1000",
            "-o",
            "cpu.log",
            "--producer-cpu",
            &first,
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn cpu_lists_print_as_ranges() {
    use dplog_nat::app::cpu_list;
    assert_eq!(cpu_list(&[0, 1]), "0-1");
    assert_eq!(cpu_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
    assert_eq!(cpu_list(&[3]), "3");
}

#[test]
fn kernel_cpu_lists_parse() {
    use dplog_nat::app::parse_cpu_list;
    assert_eq!(parse_cpu_list("0-1"), Some(vec![0, 1]));
    assert_eq!(parse_cpu_list("0-2,5,7-8"), Some(vec![0, 1, 2, 5, 7, 8]));
    assert_eq!(parse_cpu_list("x"), None);
    assert_eq!(parse_cpu_list("3-1"), None);
}

/// Runs dplog-nat with `args` in `dir`, sends SIGINT after `after`, and
/// waits (at most 30 s, then kills it and fails) for it to exit.
fn interrupt(
    dir: &Path,
    args: &[&str],
    after: std::time::Duration,
) -> (std::process::ExitStatus, String, String) {
    let start = std::time::Instant::now();
    interrupt_when(dir, args, || start.elapsed() >= after)
}

/// [`interrupt`], sending the SIGINT once `ready()` is true (polled every
/// 10 ms, at most 20 s).
fn interrupt_when(
    dir: &Path,
    args: &[&str],
    mut ready: impl FnMut() -> bool,
) -> (std::process::ExitStatus, String, String) {
    use std::io::Read;
    let mut child = bin()
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !ready() && std::time::Instant::now() < give_up {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("one SIGINT did not end dplog-nat within 30 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let (mut out, mut err) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status, out, err)
}

#[test]
fn one_sigint_ends_a_worker_blocked_on_a_full_ring_and_says_what_was_lost() {
    let dir = tempfile::tempdir().unwrap();
    // /dev/full: every write fails with ENOSPC, which the file sink retries
    // forever under the lossless block policy, so the ring fills and the
    // worker blocks in its push.
    std::fs::write(
        dir.path().join("full.toml"),
        "[ring]\ncapacity = 64\nbackpressure = \"block\"\nshutdown_timeout_ms = 300\n",
    )
    .unwrap();
    let args = [
        "--config",
        "full.toml",
        "--packets",
        "2000000000",
        "--new-session-share",
        "0.5",
        "-o",
        "/dev/full",
        "--summary",
        "json",
    ];
    let (status, out, err) = interrupt(dir.path(), &args, std::time::Duration::from_millis(1000));
    // Not the second-signal exit (130): the run ended by itself, with the
    // sink's failure reported at shutdown (exit 1).
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    let s: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(s["interrupted"], true);
    let r = &s["records"];
    let n = |k: &str| r[k].as_u64().unwrap();
    assert_eq!(n("written"), 0);
    assert!(n("dropped_at_stop") > 0, "{r}");
    // Every record the NAT made is either handed to dplog or counted as
    // dropped at stop; what dplog held is undelivered at shutdown.
    assert_eq!(
        n("produced") + n("dropped_at_stop"),
        s["records_logged"].as_u64().unwrap()
    );
    assert!(n("produced") >= 64, "the ring filled: {r}");
    assert_eq!(
        n("dropped_shutdown") + n("dropped_sink"),
        n("produced"),
        "{r}"
    );
    // Every live session was still deleted (the deletes among the lost).
    assert_eq!(s["sessions_deleted"], s["sessions_created"]);

    // The text summary says it in words.
    let mut args = args;
    args[9] = "text";
    let (status, out, _) = interrupt(dir.path(), &args, std::time::Duration::from_millis(700));
    assert_eq!(status.code(), Some(1));
    assert!(out.contains("interrupted"), "{out}");
    let line = out
        .lines()
        .find(|l| l.contains("dropped at stop"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.contains(
            "not logged: after the stop signal the ring stayed full with no consumer progress for [ring] shutdown_timeout_ms"
        ),
        "{line}"
    );
    // The interrupted line does not claim the deletes were logged.
    let line = out
        .lines()
        .find(|l| l.contains("interrupted"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(!line.contains("and logged"), "{line}");
    assert!(line.contains("live sessions were deleted;"), "{line}");
    assert!(
        line.contains("not logged at the stop (sink stuck)"),
        "{line}"
    );
}

#[test]
fn the_interrupted_line_says_logged_only_when_nothing_was_lost() {
    use dplog_nat::app::Summary;
    let mut s = Summary::default();
    assert_eq!(s.interrupted_line(), None);
    assert!(!s.to_text().contains("interrupted"));
    s.interrupted = true;
    s.records.produced = 10;
    s.records.written = 10;
    assert_eq!(
        s.interrupted_line().unwrap(),
        "input stopped early by a signal; live sessions were deleted and logged"
    );
    // The trial's stuck sink: 3020 not logged at the stop, none written.
    s.records.written = 0;
    s.records.dropped_at_stop = 3020;
    s.records.dropped_shutdown = 10;
    assert_eq!(
        s.interrupted_line().unwrap(),
        "input stopped early by a signal; live sessions were deleted; 3020 records were not logged at the stop (sink stuck); 10 logged records were not delivered by the sink"
    );
    assert!(s.to_text().contains(
        "  interrupted        input stopped early by a signal; live sessions were deleted; 3020 records"
    ));
    s.records.dropped_at_stop = 0;
    s.records.dropped_shutdown = 0;
    s.records.dropped = 1;
    assert_eq!(
        s.interrupted_line().unwrap(),
        "input stopped early by a signal; live sessions were deleted; 1 record was dropped by the ring's backpressure policy"
    );
}

#[test]
fn records_lost_to_a_failing_sink_make_the_run_fail_and_say_how_many() {
    let dir = tempfile::tempdir().unwrap();
    // /dev/full with a retry deadline: the consumer gives batches up as
    // dropped_sink and the run completes — but it lost audit records.
    std::fs::write(
        dir.path().join("deadline.toml"),
        "[ring]\nsink_retry_timeout_ms = 100\nshutdown_timeout_ms = 300\n",
    )
    .unwrap();
    let out = bin()
        .current_dir(dir.path())
        .args([
            "--config",
            "deadline.toml",
            "--packets",
            "2000",
            "-o",
            "/dev/full",
        ])
        .args(["--summary", "json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &s["records"];
    let n = |k: &str| r[k].as_u64().unwrap();
    let lost = n("dropped_sink") + n("dropped_shutdown");
    assert!(lost > 0 && n("written") == 0, "{r}");
    assert_eq!(lost, n("produced"), "{r}");
    assert!(
        err.contains(&format!(
            "{lost} of {} log records were not delivered",
            n("produced")
        )),
        "{err}"
    );
}

#[test]
fn absurd_worker_counts_are_an_error_not_an_allocation() {
    for w in ["1000000000", "4294967296", "18446744073709551615"] {
        let out = bin()
            .args(["--workers", w, "--packets", "10"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--workers {w}: {err}");
        assert!(
            err.contains(&format!("workers must be 1..=64, got {w}")),
            "{err}"
        );
    }
}

fn example_pcap() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/pcaps/example.pcap")
}

#[test]
fn a_missing_capture_is_an_error_naming_it_and_creates_no_log() {
    let dir = tempfile::tempdir().unwrap();
    let o = bin()
        .args(["--pcap", "no-such.pcap", "-o", "out.log"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no-such.pcap: at byte offset 0: I/O error: No such file or directory"),
        "{err}"
    );
    assert!(err.contains("no log was opened"), "{err}");
    assert!(!dir.path().join("out.log").exists(), "no empty log file");
    // A capture cut inside its file header: the same, the header named.
    let bytes = std::fs::read(example_pcap()).unwrap();
    std::fs::write(dir.path().join("cut.pcap"), &bytes[..20]).unwrap();
    let o = bin()
        .args(["--pcap", "cut.pcap", "-o", "out.log", "--summary", "json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cut.pcap: at byte offset 0: truncated pcap file header (20 of 24 bytes)"),
        "{err}"
    );
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["packets"], 0);
    assert_eq!(s["records"]["written"], 0);
    assert!(s["input_error"]
        .as_str()
        .unwrap()
        .contains("truncated pcap file header"));
    assert!(!dir.path().join("out.log").exists(), "no empty log file");
}

#[test]
fn packets_with_a_capture_reads_only_that_many() {
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str], out: &str| {
        let o = bin()
            .arg("--pcap")
            .arg(example_pcap())
            .args(["--inside", "10.0.0.0/8", "--summary", "json", "-o", out])
            .args(extra)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let whole = run(&[], "whole.log");
    assert_eq!(whole["packets"], 4631);
    let s = run(&["--packets", "100"], "first.log");
    assert_eq!(s["packets"], 100);
    assert!(
        s["input"]
            .as_str()
            .unwrap()
            .ends_with("(first 100 packets)"),
        "{}",
        s["input"]
    );
    let verdicts: u64 = s["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v[1].as_u64().unwrap())
        .sum();
    assert_eq!(verdicts, 100);
    let created = s["sessions_created"].as_u64().unwrap();
    assert!(created > 0 && created < whole["sessions_created"].as_u64().unwrap());
    assert_eq!(s["records"]["written"].as_u64().unwrap(), 2 * created);
    let lines = std::fs::read_to_string(dir.path().join("first.log"))
        .unwrap()
        .lines()
        .count() as u64;
    assert_eq!(lines, 2 * created);
    // The first 100 packets' sessions open as in the whole run: the first
    // create lines are the same.
    let first = std::fs::read_to_string(dir.path().join("first.log")).unwrap();
    let whole_log = std::fs::read_to_string(dir.path().join("whole.log")).unwrap();
    assert_eq!(first.lines().next(), whole_log.lines().next());
    // 0 is refused rather than read as "nothing" or "everything".
    let o = bin()
        .arg("--pcap")
        .arg(example_pcap())
        .args(["--packets", "0", "-o", "zero.log"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--packets 0 with --pcap"));
    assert!(!dir.path().join("zero.log").exists());
}

#[test]
fn worker_cpus_must_give_each_worker_a_cpu_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let first = dplog_nat::app::allowed_cpus()[0].to_string();
    let two = format!("{first},{first}");
    for (workers, cpus, want) in [
        (
            "2",
            first.as_str(),
            "--worker-cpus: 1 CPU for 2 workers; give one CPU per worker (or none)",
        ),
        (
            "2",
            two.as_str(),
            &*format!("--worker-cpus: CPU {first} is listed twice"),
        ),
    ] {
        let o = bin()
            .args(["--packets", "1000", "-o", "w.log", "--workers", workers])
            .args(["--worker-cpus", cpus])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{cpus}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(want), "{err}");
    }
    // From the config file, the key is named.
    std::fs::write(
        dir.path().join("w.toml"),
        format!("[dataplane]\nworkers = 2\nworker_cpus = [{first}, {first}]\n[synthetic]\npackets = 1000\n"),
    )
    .unwrap();
    let o = bin()
        .args(["--config", "w.toml", "-o", "w.log"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("worker_cpus: CPU {first} is listed twice")),
        "{err}"
    );
    assert!(!dir.path().join("w.log").exists(), "nothing ran");
    // One CPU per worker is accepted.
    let o = bin()
        .args(["--packets", "1000", "-o", "w.log", "--worker-cpus", &first])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn the_summary_names_every_sink_of_a_fan_out() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("fan.toml"),
        "[[sink]]\ntype = \"file\"\npath = \"a.log\"\n[[sink]]\ntype = \"file\"\npath = \"b.log\"\n[synthetic]\npackets = 2000\n",
    )
    .unwrap();
    let o = bin()
        .args(["--config", "fan.toml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("  output             file a.log, file b.log (text)\n"),
        "{text}"
    );
    let o = bin()
        .args(["--config", "fan.toml", "--summary", "json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["sinks"], serde_json::json!(["file a.log", "file b.log"]));
    // Each sink's own counters, under its place in the set.
    let counters = s["sink_counters"].as_array().unwrap();
    for name in ["sink0.file.rotations", "sink1.file.rotations"] {
        assert!(
            counters.contains(&serde_json::json!([name, 0])),
            "{counters:?}"
        );
    }
    // One file sink keeps the short form.
    let o = bin()
        .args(["--packets", "2000", "-o", "c.log"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("  output             c.log (text)\n"),
        "{text}"
    );
}

#[test]
fn a_csv_log_appended_to_twice_or_rotated_has_its_header_once_per_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("csv.toml"),
        "[format]\ntype = \"csv\"\n[sink]\ntype = \"file\"\npath = \"n.csv\"\n[synthetic]\npackets = 2000\n",
    )
    .unwrap();
    let mut written = 0;
    for _ in 0..2 {
        let o = bin()
            .args(["--config", "csv.toml", "--summary", "json"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        written += s["records"]["written"].as_u64().unwrap();
    }
    let body = std::fs::read_to_string(dir.path().join("n.csv")).unwrap();
    let header = body.lines().next().unwrap().to_string();
    assert!(
        header.starts_with("recordType,timestamp,observationTimeMilliseconds,natEvent,"),
        "{header}"
    );
    assert_eq!(
        body.lines().filter(|l| **l == *header).count(),
        1,
        "{header}"
    );
    assert_eq!(body.lines().count() as u64, 1 + written);

    // Rotation by size: every file starts with the header, once.
    std::fs::write(
        dir.path().join("rot.toml"),
        "[format]\ntype = \"csv\"\n[sink]\ntype = \"file\"\npath = \"r.csv\"\nmax_size_bytes = 65536\n[synthetic]\npackets = 20000\n",
    )
    .unwrap();
    let o = bin()
        .args(["--config", "rot.toml", "--summary", "json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("r.csv")
        })
        .collect();
    assert!(files.len() >= 3, "{files:?}");
    let mut rows = 0u64;
    for f in &files {
        let b = std::fs::read_to_string(f).unwrap();
        assert_eq!(b.lines().next(), Some(&*header), "{}", f.display());
        assert_eq!(b.lines().filter(|l| **l == *header).count(), 1);
        rows += b.lines().count() as u64 - 1;
    }
    assert_eq!(rows, s["records"]["written"].as_u64().unwrap());
}

#[test]
fn an_mmap_sink_that_cannot_open_names_its_directory_and_the_os_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("mm.toml"),
        "[sink]\ntype = \"mmap\"\ndir = \"segments\"\n[synthetic]\npackets = 1000\n",
    )
    .unwrap();
    let o = bin()
        .args(["--config", "mm.toml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(
            "cannot open sink: mmap segment directory segments: No such file or directory (os error 2)"
        ),
        "{err}"
    );
}

#[test]
fn sigint_with_a_busy_consumer_waits_for_it_and_loses_no_delete() {
    // A ring of 64 slots per worker: at the stop each worker deletes every
    // live session (thousands), so its ring is full again and again while
    // the consumer, healthy but busy, drains it. Those records must wait
    // for the consumer, not be dropped as if the sink were stuck.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("small.toml"), "[ring]\ncapacity = 64\n").unwrap();
    let args = [
        "--config",
        "small.toml",
        "--packets",
        "3000000",
        "--new-session-share",
        "0.02",
        "--workers",
        "2",
        "-o",
        "sig.log",
        "--summary",
        "json",
    ];
    // Signalled once 128 KiB of creates (about 480 records) are in the
    // log: hundreds of live sessions, more than the rings hold, whatever
    // the load.
    let log_path = dir.path().join("sig.log");
    let (status, out, err) = interrupt_when(dir.path(), &args, || {
        std::fs::metadata(&log_path).is_ok_and(|m| m.len() >= 128 << 10)
    });
    assert_eq!(status.code(), Some(0), "{err}");
    let s: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(s["interrupted"], true, "the signal came after the run");
    let r = &s["records"];
    assert_eq!(r["dropped_at_stop"].as_u64(), Some(0), "{r}");
    let created = s["sessions_created"].as_u64().unwrap();
    assert!(
        created > 64 * 2,
        "live sessions overflow the rings: {created}"
    );
    assert_eq!(s["sessions_deleted"].as_u64().unwrap(), created);
    let log = std::fs::read_to_string(dir.path().join("sig.log")).unwrap();
    let creates = log.lines().filter(|l| l.contains(" natEvent=4 ")).count() as u64;
    let deletes = log.lines().filter(|l| l.contains(" natEvent=5 ")).count() as u64;
    assert_eq!((creates, deletes), (created, created));
    assert!(!err.contains("not delivered"), "{err}");
}

#[test]
fn flags_without_their_mode_and_negative_counts_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let o = bin().args(args).current_dir(dir.path()).output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    // A DPDK limit without --dpdk would be silently ignored.
    let (code, err) = run(&["--dpdk-packets", "5", "--packets", "10"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--dpdk-packets") && err.contains("--dpdk"),
        "{err}"
    );
    // So would a block size without port blocks.
    let (code, err) = run(&["--port-block-size", "64", "--packets", "10"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--port-block-size") && err.contains("pba"),
        "{err}"
    );
    // ... which it is not with them, on the command line or in the config.
    let (code, err) = run(&[
        "--port-allocation",
        "pba",
        "--port-block-size",
        "64",
        "--packets",
        "1000",
        "-o",
        "pba.log",
    ]);
    assert_eq!(code, Some(0), "{err}");
    std::fs::write(
        dir.path().join("pba.toml"),
        "[nat]\nport_allocation = \"pba\"\n",
    )
    .unwrap();
    let (code, err) = run(&[
        "--config",
        "pba.toml",
        "--port-block-size",
        "64",
        "--packets",
        "1000",
        "-o",
        "pba.log",
    ]);
    assert_eq!(code, Some(0), "{err}");
    // A negative count is an invalid value, not a hint to write `-- -1`
    // (`--` starts the EAL arguments).
    for flag in ["--workers", "--packets", "--ring-size", "--dpdk-packets"] {
        let (code, err) = run(&[flag, "-1"]);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("invalid value '-1'"), "{flag}: {err}");
        assert!(!err.contains("-- -1"), "{flag}: {err}");
    }
}

#[test]
fn backpressure_degrade_is_accepted_on_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let o = bin()
        .args(["--backpressure", "degrade", "--packets", "2000"])
        .args(["-o", "d.log", "--summary", "json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["backpressure"], "degrade", "{s}");
    let created = s["sessions_created"].as_u64().unwrap();
    assert_eq!(s["records"]["written"].as_u64().unwrap(), 2 * created);
}

#[test]
fn packets_beyond_a_short_capture_say_how_many_it_had() {
    let dir = tempfile::tempdir().unwrap();
    let o = bin()
        .arg("--pcap")
        .arg(example_pcap())
        .args(["--inside", "10.0.0.0/8", "--packets", "100000"])
        .args(["-o", "short.log", "--summary", "json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["packets"], 4631);
    let input = s["input"].as_str().unwrap();
    assert!(
        input.ends_with("(--packets 100000, capture had 4631)"),
        "{input}"
    );
}

#[test]
fn backpressure_takes_the_toml_names_drop_newest_and_its_alias_drop() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["drop_newest", "drop"] {
        let o = bin()
            .args(["--backpressure", name, "--packets", "2000"])
            .args(["-o", "d.log", "--summary", "json"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(s["backpressure"], "drop", "{name}: {s}");
    }
    // The help names the TOML spelling.
    let o = bin().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(help.contains("drop_newest"), "{help}");
    // Anything else is refused by name.
    let o = bin()
        .args(["--backpressure", "drop_oldest", "--packets", "10"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("invalid value 'drop_oldest'"), "{err}");
}

#[test]
fn worker_cpus_take_ranges_in_worker_order() {
    use dplog_nat::app::parse_cpu_sequence;
    assert_eq!(parse_cpu_sequence("0-1"), Ok(vec![0, 1]));
    assert_eq!(parse_cpu_sequence("3,0-1"), Ok(vec![3, 0, 1]));
    assert_eq!(parse_cpu_sequence(" 2 , 4-5 "), Ok(vec![2, 4, 5]));
    // Duplicates are kept, for check_worker_cpus to refuse by name.
    assert_eq!(parse_cpu_sequence("1,1"), Ok(vec![1, 1]));
    for (bad, want) in [
        ("", "empty CPU list"),
        ("0,,1", "empty item"),
        ("1-0", "runs backwards"),
        ("a", "'a' is not a CPU number"),
        ("0-x", "'x' is not a CPU number"),
        ("-1", "'' is not a CPU number"),
        ("0-99999999", "too long"),
    ] {
        let e = parse_cpu_sequence(bad).unwrap_err();
        assert!(e.contains(want), "{bad}: {e}");
    }
    // The binary takes the shape its messages print (`cpu_list`).
    let dir = tempfile::tempdir().unwrap();
    let allowed = dplog_nat::app::allowed_cpus();
    let (workers, list) = if allowed.len() >= 2 && allowed[1] == allowed[0] + 1 {
        (2, format!("{}-{}", allowed[0], allowed[1]))
    } else {
        (1, format!("{0}-{0}", allowed[0]))
    };
    assert_eq!(
        dplog_nat::app::cpu_list(&allowed[..workers]),
        if workers == 2 {
            list.clone()
        } else {
            allowed[0].to_string()
        }
    );
    let o = bin()
        .args(["--packets", "2000", "-o", "w.log", "--summary", "json"])
        .args(["--workers", &workers.to_string(), "--worker-cpus", &list])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["workers"], workers, "{s}");
    // A malformed list is a usage error naming the flag.
    let o = bin()
        .args(["--packets", "10", "-o", "w.log", "--worker-cpus", "1-0"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--worker-cpus"), "{err}");
    assert!(err.contains("CPU range '1-0' runs backwards"), "{err}");
}

#[test]
fn a_device_as_the_capture_is_not_a_regular_file_not_an_empty_one() {
    let dir = tempfile::tempdir().unwrap();
    for (path, what) in [("/dev/zero", "a character device"), (".", "a directory")] {
        let o = bin()
            .args(["--pcap", path, "-o", "out.log"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{path}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!(
                "{path}: at byte offset 0: not a regular file ({what}); give a pcap or pcapng file"
            )),
            "{err}"
        );
        assert!(!err.contains("empty file"), "{err}");
        assert!(!dir.path().join("out.log").exists(), "no log opened");
    }
}

/// Syslog over UDP with datagrams too small for the RFC 5424 records: no
/// record is sent cut, each is counted dropped by the sink, the run fails
/// saying how many, and the sink's own counter is in both summaries.
#[test]
fn syslog_records_too_large_for_a_datagram_are_dropped_not_cut_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    std::fs::write(
        dir.path().join("udp.toml"),
        format!(
            "[format]\ntype = \"rfc5424\"\n[sink]\ntype = \"syslog\"\ntransport = \"udp\"\naddress = \"{}\"\nmax_datagram_bytes = 200\n[synthetic]\npackets = 2000\n",
            rx.local_addr().unwrap()
        ),
    )
    .unwrap();
    let o = bin()
        .args(["--config", "udp.toml", "--summary", "json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = &s["records"];
    let n = |k: &str| r[k].as_u64().unwrap();
    let produced = n("produced");
    assert!(produced > 0, "{r}");
    assert_eq!(n("written"), 0, "{r}");
    assert_eq!(n("dropped_sink"), produced, "{r}");
    let counters: Vec<(String, u64)> = serde_json::from_value(s["sink_counters"].clone()).unwrap();
    assert!(
        counters.contains(&("syslog.too_large".to_string(), produced)),
        "{counters:?}"
    );
    assert!(
        counters.contains(&("syslog.messages".to_string(), 0)),
        "{counters:?}"
    );
    assert!(
        err.contains(&format!(
            "{produced} of {produced} log records were not delivered"
        )),
        "{err}"
    );
    // Nothing reached the receiver, not even a cut message.
    rx.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 2048];
    assert!(rx.recv(&mut buf).is_err(), "a datagram was sent");
    let o = bin()
        .args(["--config", "udp.toml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains(&format!(
            "  sink counters      syslog.too_large {produced}\n"
        )),
        "{text}"
    );
}

/// `--format` takes every name `[format] type` takes; `--help` lists them
/// and says where the other settings are.
#[test]
fn format_flag_takes_every_format_name_and_help_points_to_the_config() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "text", "json", "csv", "rfc5424", "rfc3164", "ipfix", "binary",
    ] {
        let o = bin()
            .args(["--format", name, "--packets", "200", "-o", name])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let text = String::from_utf8(o.stdout).unwrap();
        assert!(
            text.contains(&format!("  output             {name} ({name})\n")),
            "{text}"
        );
        assert!(std::fs::metadata(dir.path().join(name)).unwrap().len() > 0);
    }
    let o = bin().args(["--format", "xml"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("[possible values: text, json, csv, rfc5424, rfc3164, ipfix, binary]"),
        "{err}"
    );
    let o = bin().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(
        help.contains("[possible values: text, json, csv, rfc5424, rfc3164, ipfix, binary]"),
        "{help}"
    );
    assert!(
        help.contains("[format.syslog]") && help.contains("reference-nat/dplog-nat.toml"),
        "{help}"
    );
}

/// `--help` names every sink type the config takes (the types the
/// config's own error lists for an unknown one), and no other.
#[test]
fn help_names_every_sink_type_the_config_takes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.toml"), "[sink]\ntype = \"nope\"\n").unwrap();
    let o = bin()
        .args(["--config", "bad.toml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8(o.stderr).unwrap();
    let listed = err
        .split("unknown variant `nope`, expected one of ")
        .nth(1)
        .unwrap_or_else(|| panic!("no list of sink types in {err}"));
    let mut accepted: Vec<&str> = listed
        .lines()
        .next()
        .unwrap()
        .split(", ")
        .map(|t| t.trim_matches('`'))
        .collect();
    // A build without Kafka knows the name only to refuse it.
    if !cfg!(feature = "kafka") {
        accepted.retain(|t| *t != "kafka");
    }
    assert!(accepted.len() >= 6, "{accepted:?}");
    let o = bin().arg("--help").output().unwrap();
    assert!(o.status.success());
    let help = String::from_utf8(o.stdout).unwrap();
    let named: Vec<&str> = help
        .split("[[sink]] ")
        .nth(1)
        .and_then(|s| s.split(';').next())
        .unwrap_or_else(|| panic!("no sink list in --help:\n{help}"))
        .trim_start_matches("type = ")
        .split(", ")
        .collect();
    assert_eq!(named, accepted, "--help:\n{help}");
}
