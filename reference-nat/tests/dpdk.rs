//! DPDK (feature `dpdk`): replaying a capture through Debian's DPDK 22.11
//! net_pcap vdev (`--no-huge --no-pci`) gives the same sessions and the
//! same log records as reading the capture file, and the translated
//! packets come out of the vdev. Each run is its own process (the EAL
//! initialises once per process).
#![cfg(feature = "dpdk")]

use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dplog-nat"))
}

fn capture(name: &str) -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/pcaps")).join(name)
}

fn eal(prefix: &str, vdev: &str) -> Vec<String> {
    [
        "--no-huge",
        "--no-pci",
        "--no-shconf",
        "-m",
        "128",
        "-l",
        "0",
        "--log-level=error",
        "--file-prefix",
        prefix,
        "--vdev",
        vdev,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn sorted_lines(p: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    v.sort();
    v
}

fn json_summary(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn replay_equals_file(name: &str, inside: &str, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let cap = capture(name);
    let file_log = dir.path().join("file.jsonl");
    let dpdk_log = dir.path().join("dpdk.jsonl");
    let tx = dir.path().join("tx.pcap");
    let common = |log: &Path| {
        vec![
            "--inside".to_string(),
            inside.to_string(),
            "--format".into(),
            "json".into(),
            "--summary".into(),
            "json".into(),
            "-o".into(),
            log.display().to_string(),
        ]
        .into_iter()
        .chain(extra.iter().map(|s| s.to_string()))
        .collect::<Vec<String>>()
    };
    let a = json_summary(
        &bin()
            .args(common(&file_log))
            .arg("--pcap")
            .arg(&cap)
            .output()
            .unwrap(),
    );
    let vdev = format!(
        "net_pcap0,rx_pcap={},tx_pcap={}",
        cap.display(),
        tx.display()
    );
    let prefix = format!("dplogtest{}", std::process::id());
    let b = json_summary(
        &bin()
            .args(common(&dpdk_log))
            .args(["--dpdk", "--dpdk-idle-ms", "300", "--"])
            .args(eal(&prefix, &vdev))
            .output()
            .unwrap(),
    );
    for k in [
        "packets",
        "sessions_created",
        "sessions_deleted",
        "verdicts",
    ] {
        assert_eq!(a[k], b[k], "{name}: {k}");
    }
    assert!(a["sessions_created"].as_u64().unwrap() > 0);
    let (la, lb) = (sorted_lines(&file_log), sorted_lines(&dpdk_log));
    if extra.is_empty() {
        assert_eq!(la.len() as u64, 2 * a["sessions_created"].as_u64().unwrap());
    } else {
        assert_eq!(la.len() as u64, a["records_logged"].as_u64().unwrap());
        assert_eq!(a["port_blocks"], b["port_blocks"]);
        assert!(a["port_blocks"][0].as_u64().unwrap() > 0);
        assert!(la
            .iter()
            .all(|l| l.contains("\"natEvent\":16") || l.contains("\"natEvent\":17")));
    }
    assert_eq!(la, lb, "{name}: same records, field for field");
    // The translated packets were transmitted into tx.pcap: count them.
    let bytes = std::fs::read(&tx).unwrap();
    let mut n = 0u64;
    let mut off = 24usize;
    while off + 16 <= bytes.len() {
        let caplen = u32::from_le_bytes(bytes[off + 8..off + 12].try_into().unwrap()) as usize;
        off += 16 + caplen;
        n += 1;
    }
    let translated: u64 = ["translated_out", "translated_in", "fragment_matched"]
        .iter()
        .map(|v| {
            a["verdicts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e[0] == *v)
                .map_or(0, |e| e[1].as_u64().unwrap())
        })
        .sum();
    assert_eq!(n, translated, "{name}: translated packets sent");
}

#[test]
fn net_pcap_replay_matches_the_pcap_file_example() {
    replay_equals_file("example.pcap", "10.0.0.0/8", &[]);
}

/// Port block allocation through DPDK: the same natEvent 16/17 records
/// (subscriber, address, port range, time) as from the pcap file.
#[test]
fn net_pcap_replay_matches_the_pcap_file_with_port_blocks() {
    replay_equals_file(
        "example.pcap",
        "10.0.0.0/8",
        &["--port-allocation", "pba", "--port-block-size", "128"],
    );
}

#[test]
fn net_null_runs_to_a_packet_limit() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("dplognull{}", std::process::id());
    let out = bin()
        .args(["--summary", "json", "-o"])
        .arg(dir.path().join("null.log"))
        .args(["--dpdk", "--dpdk-packets", "100000", "--"])
        .args(eal(&prefix, "net_null0"))
        .output()
        .unwrap();
    let s = json_summary(&out);
    // net_null's frames are zero-filled: not IPv4, each counted.
    assert!(s["packets"].as_u64().unwrap() >= 100_000);
    assert_eq!(s["sessions_created"], 0);
}

mod shapes;

/// Every bad-input shape of issue 7 through the DPDK net_pcap path: the
/// same counted verdicts as through the pcap path (tests/bad_shapes.rs),
/// no crash, and only the translated packets are transmitted.
#[test]
fn bad_shapes_through_net_pcap_are_counted_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let frames = shapes::bad_frames();
    let rx = dir.path().join("bad.pcap");
    std::fs::write(&rx, shapes::pcap(&frames)).unwrap();
    let tx = dir.path().join("tx.pcap");
    let vdev = format!(
        "net_pcap0,rx_pcap={},tx_pcap={}",
        rx.display(),
        tx.display()
    );
    let prefix = format!("dplogbad{}", std::process::id());
    let s = json_summary(
        &bin()
            .args([
                "--inside",
                "10.0.0.0/8",
                "--format",
                "json",
                "--summary",
                "json",
                "-o",
            ])
            .arg(dir.path().join("bad.jsonl"))
            .args(["--dpdk", "--dpdk-idle-ms", "300", "--"])
            .args(eal(&prefix, &vdev))
            .output()
            .unwrap(),
    );
    assert_eq!(s["packets"], frames.len() as u64);
    let verdict = |name: &str| {
        s["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e[0] == name)
            .map_or(0, |e| e[1].as_u64().unwrap())
    };
    for (name, n) in shapes::expected_verdicts() {
        assert_eq!(verdict(name), n, "{name}: {}", s["verdicts"]);
    }
    assert_eq!(s["sessions_created"], 2);
    assert_eq!(s["records"]["written"], s["records"]["produced"]);
    let bytes = std::fs::read(&tx).unwrap();
    let mut sent = 0u64;
    let mut off = 24usize;
    while off + 16 <= bytes.len() {
        let caplen = u32::from_le_bytes(bytes[off + 8..off + 12].try_into().unwrap()) as usize;
        off += 16 + caplen;
        sent += 1;
    }
    // Translated: the first fragment, the packet with options and the two
    // matched later fragments.
    assert_eq!(sent, 4);
}

/// Writes `frames` (µs timestamp, bytes) as a legacy microsecond pcap.
fn write_pcap(path: &Path, frames: &[(u64, Vec<u8>)]) {
    let mut out = Vec::new();
    out.extend_from_slice(&0xA1B2_C3D4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    for (us, f) in frames {
        out.extend_from_slice(&((us / 1_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&((us % 1_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    std::fs::write(path, out).unwrap();
}

/// Two workers on two Rx/Tx queue pairs of one net_pcap port, each queue
/// replaying the packets the shard function gives its worker (what a
/// symmetric RSS would do), log exactly what two workers log from the
/// capture file: same sessions, same external ports (each worker's port
/// slice), same times.
#[test]
fn two_workers_on_two_queues_match_the_pcap_file_with_two_workers() {
    let dir = tempfile::tempdir().unwrap();
    // The synthetic mix (300 subscribers) as a capture, whole and split by
    // the shard function.
    let inside: ipnet::Ipv4Net = "10.0.0.0/8".parse().unwrap();
    let sharder = dplog_nat::workers::Sharder::new(&[inside], 2);
    let mut all = Vec::new();
    let mut shards: Vec<Vec<(u64, Vec<u8>)>> = vec![Vec::new(), Vec::new()];
    let mix = dplog_nat::SyntheticConfig {
        subscribers: 300,
        destinations: 50,
        new_session_share: 0.2,
        packets: 20_000,
        seed: 7,
        ..Default::default()
    };
    dplog_nat::generate(&mix, |ts, lt, f| {
        let w = sharder.worker_of(lt, f);
        shards[w].push((ts / 1000, f.to_vec()));
        all.push((ts / 1000, f.to_vec()));
    })
    .unwrap();
    let cap = dir.path().join("all.pcap");
    write_pcap(&cap, &all);
    assert!(
        shards.iter().all(|s| s.len() > 100),
        "both queues get traffic"
    );
    let rx: Vec<_> = (0..2)
        .map(|q| dir.path().join(format!("q{q}.pcap")))
        .collect();
    let tx: Vec<_> = (0..2)
        .map(|q| dir.path().join(format!("tx{q}.pcap")))
        .collect();
    for q in 0..2 {
        write_pcap(&rx[q], &shards[q]);
    }
    let (file_log, dpdk_log) = (dir.path().join("file.jsonl"), dir.path().join("dpdk.jsonl"));
    let common = |log: &Path| {
        let mut v: Vec<String> = ["--inside", "10.0.0.0/8", "--workers", "2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(["--format", "json", "--summary", "json", "-o"].map(String::from));
        v.push(log.display().to_string());
        v
    };
    let a = json_summary(
        &bin()
            .args(common(&file_log))
            .arg("--pcap")
            .arg(&cap)
            .output()
            .unwrap(),
    );
    let vdev = format!(
        "net_pcap0,rx_pcap={},rx_pcap={},tx_pcap={},tx_pcap={}",
        rx[0].display(),
        rx[1].display(),
        tx[0].display(),
        tx[1].display()
    );
    let prefix = format!("dplogq{}", std::process::id());
    let b = json_summary(
        &bin()
            .args(common(&dpdk_log))
            .args(["--dpdk", "--dpdk-idle-ms", "300", "--"])
            .args(eal(&prefix, &vdev))
            .output()
            .unwrap(),
    );
    assert_eq!(b["workers"], 2);
    for k in [
        "packets",
        "sessions_created",
        "sessions_deleted",
        "verdicts",
    ] {
        assert_eq!(a[k], b[k], "{k}");
    }
    for w in 0..2 {
        assert_eq!(
            a["per_worker"][w]["packets"], b["per_worker"][w]["packets"],
            "worker {w}"
        );
        assert_eq!(
            b["per_worker"][w]["packets"].as_u64().unwrap(),
            shards[w].len() as u64
        );
        assert!(b["per_worker"][w]["sessions_created"].as_u64().unwrap() > 0);
    }
    let (la, lb) = (sorted_lines(&file_log), sorted_lines(&dpdk_log));
    assert_eq!(la.len() as u64, 2 * a["sessions_created"].as_u64().unwrap());
    assert_eq!(la, lb, "same records, field for field");
}

/// A CPU from the config file that this process may not run on is refused
/// before the EAL starts, naming the key.
#[test]
fn dpdk_mode_refuses_a_cpu_that_is_not_available() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("cpu.toml"),
        "[dataplane]\nworkers = 2\nworker_cpus = [0, 1000]\n",
    )
    .unwrap();
    let prefix = format!("dplogcpu{}", std::process::id());
    let out = bin()
        .args(["--config", "cpu.toml", "-o", "cpu.log", "--dpdk", "--"])
        .args(eal(&prefix, "net_null0"))
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("worker_cpus: CPU 1000 is not available; this process may run on CPUs"),
        "{err}"
    );
}
