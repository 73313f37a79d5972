//! A program restarted with its record types registered in another order
//! (so their schema ids swap) appends to the log the first run wrote: a
//! binary log file, and the same mmap segment. Each run's `H` frame starts
//! a new schema table; `dplog-cat` prints every record of both runs once,
//! under the schema its own run declared.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use dplog_core::Sink;
use dplog_formatters::{Format, FormatSpec};
use dplog_sinks::archive::{ArchiveSink, ArchiveSinkOptions};
use dplog_sinks::{MmapSink, MmapSinkOptions};

#[path = "../../../testkit/fixtures/swapped_ids.rs"]
mod swapped_ids;
use swapped_ids::{fw_drop, lb_conn};

/// 2026-01-01T00:00:00Z in ns since the Unix epoch.
const T0: u64 = 1_767_225_600_000_000_000;
/// Records of each type per run.
const N: u64 = 20;

fn header(size: usize, id: u16) -> Vec<u8> {
    let mut r = vec![0u8; size];
    r[0..2].copy_from_slice(&(size as u16).to_ne_bytes());
    r[2..4].copy_from_slice(&id.to_ne_bytes());
    r
}

/// Run `run`'s binary stream: its types registered fwDrop first (ids 256,
/// 257) in run 0, lbConn first (the ids swapped) in run 1; `N` records of
/// each, interleaved.
fn run_stream(run: u64) -> Vec<u8> {
    let (fw, lb) = if run == 0 {
        (fw_drop(256), lb_conn(257))
    } else {
        (fw_drop(257), lb_conn(256))
    };
    let mut f = FormatSpec {
        kind: Format::Binary,
        ..Default::default()
    }
    .formatter(&[&fw, &lb])
    .unwrap();
    let mut out = Vec::new();
    for i in 0..N {
        let t = T0 + run * 1_000_000_000 + i * 1_000;
        let mut r = header(40, fw.id());
        // (An lbConn is the first record in time.)
        r[8..16].copy_from_slice(&(t + 1).to_ne_bytes());
        r[16..20].copy_from_slice(&((1000 * run + i) as u32).to_ne_bytes());
        r[20..22].copy_from_slice(&(40000 + i as u16).to_ne_bytes());
        let name = format!("eth{run}-{i}");
        r[24..24 + name.len()].copy_from_slice(name.as_bytes());
        assert!(f.push_bytes(&r, &mut out));
        let mut r = header(32, lb.id());
        r[8..16].copy_from_slice(&t.to_ne_bytes());
        r[16..24].copy_from_slice(&(10_000 * run + i).to_ne_bytes());
        r[24..26].copy_from_slice(&(80 + i as u16).to_ne_bytes());
        assert!(f.push_bytes(&r, &mut out));
    }
    out
}

/// Every record both runs wrote, as `dplog-cat --format json` must print
/// it (each key sorted), with its count (1).
fn expected() -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for run in 0..2 {
        for i in 0..N {
            *m.entry(format!(
                "fwDrop ifName=eth{run}-{i} ruleId={} srcPort={}",
                1000 * run + i,
                40000 + i
            ))
            .or_default() += 1;
            *m.entry(format!(
                "lbConn bytesIn={} vport={}",
                10_000 * run + i,
                80 + i
            ))
            .or_default() += 1;
        }
    }
    m
}

/// The records of JSON lines `out`, in the shape of [`expected`]: a
/// record with other keys than its type's is kept whole, so it fails the
/// comparison.
fn got(out: &[u8]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for line in String::from_utf8_lossy(out).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let o = v.as_object().unwrap();
        let mut keys: Vec<&str> = o.keys().map(String::as_str).collect();
        keys.sort_unstable();
        let key = match keys.as_slice() {
            ["ifName", "ruleId", "srcPort", "time", "timestamp"] => format!(
                "fwDrop ifName={} ruleId={} srcPort={}",
                o["ifName"].as_str().unwrap(),
                o["ruleId"],
                o["srcPort"]
            ),
            ["bytesIn", "connTime", "timestamp", "vport"] => {
                format!("lbConn bytesIn={} vport={}", o["bytesIn"], o["vport"])
            }
            _ => line.to_string(),
        };
        *m.entry(key).or_default() += 1;
    }
    m
}

fn cat_json(path: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .args(["--format", "json"])
        .arg(path)
        .output()
        .unwrap()
}

#[test]
fn a_binary_log_appended_by_a_run_with_swapped_ids_prints_each_record_under_its_schema() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("out.binary");
    // Two runs appending to the same file, as a file sink does.
    let mut bytes = run_stream(0);
    bytes.extend_from_slice(&run_stream(1));
    std::fs::write(&log, &bytes).unwrap();
    let out = cat_json(&log);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(got(&out.stdout), expected());

    // CSV out: a new header where the table changes, each row under the
    // header of its own run's table.
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .args(["--format", "csv"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut header: Option<Vec<String>> = None;
    let mut rows = 0;
    for line in text.lines() {
        let cells: Vec<String> = line.split(',').map(str::to_string).collect();
        if cells.first().map(String::as_str) == Some("recordType") {
            header = Some(cells);
            continue;
        }
        let h = header.as_ref().expect("a header before every row");
        let col = |name: &str| h.iter().position(|c| c == name).unwrap();
        let ty = &cells[col("recordType")];
        // Each row's values sit in its own type's columns.
        match ty.as_str() {
            "fwDrop" => assert!(cells[col("ifName")].starts_with("eth"), "{line}"),
            "lbConn" => assert!(cells[col("vport")].parse::<u16>().unwrap() >= 80, "{line}"),
            t => panic!("record type {t} in {line}"),
        }
        rows += 1;
    }
    assert_eq!(rows, 4 * N);
}

#[test]
fn an_mmap_segment_resumed_by_a_run_with_swapped_ids_prints_each_record_under_its_schema() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || MmapSinkOptions {
        segment_bytes: 64 * 1024,
        msync_interval_ms: None,
        prefix: "fw".into(),
        header: None,
        seal: None,
    };
    for run in 0..2 {
        let mut s = open_sink(|| MmapSink::open(dir.path(), opts()));
        if run == 1 {
            // The second run continues the first run's segment.
            assert!(s.recovery().segment.is_some());
        }
        s.write_batch(&run_stream(run)).unwrap();
        s.close().unwrap();
    }
    let segs = dplog_sinks::mmap::list_segments(dir.path(), "fw").unwrap();
    assert_eq!(segs.len(), 1, "both runs in one segment");
    let out = cat_json(dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(got(&out.stdout), expected());
}

#[test]
fn an_archive_written_by_two_runs_whose_ids_swapped_prints_each_record_under_its_schema() {
    let dir = tempfile::tempdir().unwrap();
    for run in 0..2 {
        let mut s = open_sink(|| ArchiveSink::open(dir.path(), ArchiveSinkOptions::default()));
        s.write_batch(&run_stream(run)).unwrap();
        s.close().unwrap();
    }
    let out = cat_json(dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(got(&out.stdout), expected());
    // A field of one type, whichever id it had in each run.
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .args(["--format", "json", "--where", "ruleId=1005"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want: BTreeMap<String, usize> = [(
        "fwDrop ifName=eth1-5 ruleId=1005 srcPort=40005".to_string(),
        1,
    )]
    .into();
    assert_eq!(got(&out.stdout), want);
}

/// `open()`, a sink's open on a directory. A child process another test
/// spawns holds a copy of the directory lock's descriptor between its
/// fork and its exec (the lock is released at exec, `O_CLOEXEC`): an
/// open that meets one is tried again, for up to 30 s.
fn open_sink<T>(mut open: impl FnMut() -> std::io::Result<T>) -> T {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match open() {
            Ok(s) => return s,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    && std::time::Instant::now() < until =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn a_where_on_a_field_the_second_runs_table_lacks_selects_from_the_first_run() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("out.binary");
    // Run 0, then a run that registers lbConn only (id 256).
    let lb = lb_conn(256);
    let mut f = FormatSpec {
        kind: Format::Binary,
        ..Default::default()
    }
    .formatter(&[&lb])
    .unwrap();
    let mut bytes = run_stream(0);
    let mut r = header(32, 256);
    r[8..16].copy_from_slice(&(T0 + 5_000_000_000).to_ne_bytes());
    r[16..24].copy_from_slice(&77u64.to_ne_bytes());
    assert!(f.push_bytes(&r, &mut bytes));
    std::fs::write(&log, &bytes).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .args(["--format", "json", "--where", "ruleId=5"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want: BTreeMap<String, usize> =
        [("fwDrop ifName=eth0-5 ruleId=5 srcPort=40005".to_string(), 1)].into();
    assert_eq!(got(&out.stdout), want);
    // And every record of both, under its own schema.
    let out = cat_json(&log);
    assert!(out.status.success());
    let mut want = BTreeMap::new();
    for i in 0..N {
        want.insert(
            format!("fwDrop ifName=eth0-{i} ruleId={i} srcPort={}", 40000 + i),
            1,
        );
        want.insert(format!("lbConn bytesIn={i} vport={}", 80 + i), 1);
    }
    want.insert("lbConn bytesIn=77 vport=0".to_string(), 1);
    assert_eq!(got(&out.stdout), want);
}
