//! Helpers shared by the DPDK integration tests (`dpdk.rs`,
//! `dpdk_multiprocess.rs`).

use std::path::{Path, PathBuf};

/// A capture in `../shared/pcaps`, beside the repository root.
pub fn capture(name: &str) -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/pcaps")).join(name)
}

/// The lines of a log file, sorted (workers interleave their records).
pub fn sorted_lines(p: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    v.sort();
    v
}

/// The `--summary json` of a run that must have succeeded.
pub fn json_summary(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The arguments a DPDK comparison gives dplog-nat: the `inside` prefix,
/// JSON records and summary, the log at `log`, then `extra`.
pub fn json_run_args(inside: &str, log: &Path, extra: &[&str]) -> Vec<String> {
    [
        "--inside",
        inside,
        "--format",
        "json",
        "--summary",
        "json",
        "-o",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([log.display().to_string()])
    .chain(extra.iter().map(|s| s.to_string()))
    .collect()
}

/// The JSON summary of dplog-nat with `args` reading `cap` (the pcap path
/// the DPDK runs are compared with).
pub fn pcap_run(cap: &Path, args: Vec<String>) -> serde_json::Value {
    json_summary(
        &std::process::Command::new(env!("CARGO_BIN_EXE_dplog-nat"))
            .args(args)
            .arg("--pcap")
            .arg(cap)
            .output()
            .unwrap(),
    )
}
