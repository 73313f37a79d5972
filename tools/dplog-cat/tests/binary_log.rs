//! `dplog-cat` on binary log files written by the `binary` format: JSON
//! out, a file cut mid-record decodes up to its last whole record, devices
//! and failing outputs are refused with the reason.

#[path = "../../../formatters/tests/common/mod.rs"]
mod common;

use dplog_schema_nat::NatFormatSpec as _;
use std::process::Command;

use common::*;
use dplog_core::Formatter;
use dplog_formatters::{Format, FormatSpec};

fn binary_file() -> Vec<u8> {
    let mut f = FormatSpec {
        kind: Format::Binary,
        ..Default::default()
    }
    .nat_formatter()
    .unwrap();
    let mut out = Vec::new();
    for r in all_records() {
        f.format(&r, &mut out);
    }
    out
}

#[test]
fn dplog_cat_decodes_to_json_and_reports_a_truncated_tail() {
    let dir = tempfile::tempdir().unwrap();
    let b = binary_file();
    let full = dir.path().join("full.bin");
    std::fs::write(&full, &b).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .args(["--format", "json"])
        .arg(&full)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let golden = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../formatters/tests/golden/nat.jsonl"
    ))
    .unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), golden);

    // Cut 10 bytes into the last record's frame.
    let last = all_records().last().unwrap().as_bytes().len() + 4;
    let cut_at = b.len() - last + 10;
    let cut = dir.path().join("cut.bin");
    std::fs::write(&cut, &b[..cut_at]).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .args(["--format", "json"])
        .arg(&cut)
        .output()
        .unwrap();
    // Damage: status 3 (2 is a usage error).
    assert_eq!(out.status.code(), Some(3));
    let lines: Vec<&str> = golden.lines().collect();
    let got = String::from_utf8(out.stdout).unwrap();
    assert_eq!(got.lines().collect::<Vec<_>>(), lines[..6]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains(&format!("stopped at byte {} of {cut_at}", b.len() - last))
            && err.contains("decoded 6 whole records"),
        "{err}"
    );
}

#[test]
fn a_file_that_is_no_binary_log_is_named_so() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.bin");
    std::fs::write(&junk, b"junk\n").unwrap();
    let want = format!(
        "dplog-cat: {}: not a dplog binary log (byte 0: no H frame; a binary log, as [format] \
         type = \"binary\" writes it, starts with its H frame; dplog-cat also reads mmap \
         segments and archive directories)\n",
        junk.display()
    );
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .arg(&junk)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert_eq!(String::from_utf8_lossy(&out.stderr), want);
    // A text log: the same, whatever its first frame header would claim.
    std::fs::write(&junk, b"2026-01-01T00:00:00.000000Z natEvent=4\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .args(["--format", "json"])
        .arg(&junk)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stderr), want);
    // On standard input too.
    let mut child = Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"junk\n").unwrap();
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("dplog-cat: standard input: not a dplog binary log (byte 0: no H frame"),
        "{err}"
    );
    // A log cut inside its H frame is a damaged log, not a foreign file.
    let b = binary_file();
    for n in [1, 6, 11] {
        std::fs::write(&junk, &b[..n]).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
            .arg(&junk)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{n}: {err}");
        assert!(
            err.contains(&format!("stopped at byte 0 of {n}: truncated")),
            "{n}: {err}"
        );
    }
}

/// An empty file is a log a file sink created and has not written yet:
/// no records, said on stderr, exit 0 (as `dplog-query import` says it);
/// before a log it changes nothing.
/// Nothing on standard input: no records, said on stderr, exit 0, as for
/// an empty file; a log on standard input is not remarked on.
#[test]
fn an_empty_standard_input_is_said() {
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .arg("-")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "dplog-cat: standard input: empty: no records\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("nat.bin");
    std::fs::write(&log, binary_file()).unwrap();
    let piped = Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .args(["--format", "json", "-"])
        .stdin(std::fs::File::open(&log).unwrap())
        .output()
        .unwrap();
    assert_eq!(piped.status.code(), Some(0));
    assert!(!piped.stdout.is_empty());
    assert!(
        piped.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&piped.stderr)
    );
}

#[test]
fn an_empty_file_is_a_log_not_written_yet() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.bin");
    std::fs::write(&empty, b"").unwrap();
    let note = format!(
        "dplog-cat: {}: empty: no records (a log created and not written yet); skipped\n",
        empty.display()
    );
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .args(["--format", "json"])
        .arg(&empty)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    assert_eq!(String::from_utf8_lossy(&out.stderr), note);
    let log = dir.path().join("nat.bin");
    std::fs::write(&log, binary_file()).unwrap();
    let alone = Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .args(["--format", "json"])
        .arg(&log)
        .output()
        .unwrap();
    let both = Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .args(["--format", "json"])
        .arg(&empty)
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(both.status.code(), Some(0));
    assert!(!alone.stdout.is_empty());
    assert_eq!(both.stdout, alone.stdout);
    assert_eq!(String::from_utf8_lossy(&both.stderr), note);
}

#[test]
fn dplog_cat_refuses_devices_and_reports_write_errors() {
    // /dev/zero would be read forever: refused up front.
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .args(["--format", "json", "/dev/zero"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("/dev/zero: not a regular file"), "{err}");

    // Output to a full device: an error message, not a silent exit 1.
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full.bin");
    std::fs::write(&full, binary_file()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .args(["--format", "json"])
        .arg(&full)
        .stdout(std::fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("writing the output") && err.contains("No space left on device"),
        "{err}"
    );

    // A reader that goes away (`dplog-cat … | head -c 10`): a quiet, clean end.
    let mut big = Vec::new();
    for _ in 0..2000 {
        big.extend_from_slice(&binary_file());
    }
    std::fs::write(&full, big).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .args(["--format", "json"])
        .arg(&full)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 10];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
