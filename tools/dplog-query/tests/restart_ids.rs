//! A program restarted with its record types registered in another order
//! (so their schema ids swap) writes to the same archive directory, or
//! appends to the binary log that is then imported: `dplog-query` answers
//! with every record of both runs once, each under its own schema.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use dplog_core::Sink;
use dplog_formatters::{Format, FormatSpec};
use dplog_sinks::archive::{ArchiveSink, ArchiveSinkOptions};

#[path = "../../../testkit/fixtures/swapped_ids.rs"]
mod swapped_ids;
use swapped_ids::{fw_drop, lb_conn};

/// 2026-01-01T00:00:00Z in ns since the Unix epoch.
const T0: u64 = 1_767_225_600_000_000_000;
/// Records of each type per run.
const N: u64 = 20;

/// Run `run`'s binary stream: fwDrop registered first (ids 256, 257) in
/// run 0, lbConn first (ids swapped) in run 1; `N` records of each,
/// interleaved, the two runs' times overlapping (a restart within the
/// same second), in batches of 8 records.
fn run_batches(run: u64) -> Vec<Vec<u8>> {
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
    let head = |size: usize, id: u16| {
        let mut r = vec![0u8; size];
        r[0..2].copy_from_slice(&(size as u16).to_ne_bytes());
        r[2..4].copy_from_slice(&id.to_ne_bytes());
        r
    };
    let mut batches = Vec::new();
    let mut out = Vec::new();
    for i in 0..N {
        let t = T0 + i * 1_000_000 + run * 500;
        let mut r = head(40, fw.id());
        r[8..16].copy_from_slice(&t.to_ne_bytes());
        r[16..20].copy_from_slice(&((1000 * run + i) as u32).to_ne_bytes());
        r[20..22].copy_from_slice(&(40000 + i as u16).to_ne_bytes());
        let name = format!("eth{run}-{i}");
        r[24..24 + name.len()].copy_from_slice(name.as_bytes());
        assert!(f.push_bytes(&r, &mut out));
        let mut r = head(32, lb.id());
        r[8..16].copy_from_slice(&(t + 1).to_ne_bytes());
        r[16..24].copy_from_slice(&(10_000 * run + i).to_ne_bytes());
        r[24..26].copy_from_slice(&(80 + i as u16).to_ne_bytes());
        assert!(f.push_bytes(&r, &mut out));
        if i % 4 == 3 {
            batches.push(std::mem::take(&mut out));
        }
    }
    if !out.is_empty() {
        batches.push(out);
    }
    batches
}

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

/// The records of JSON lines `out`, in the shape of [`expected`]; a
/// record with other keys than its type's is kept whole.
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

/// `dplog-query --archive DIR --between` over both runs' times, JSON.
fn query_all(arch: &Path) -> std::process::Output {
    query(arch, &["--format", "json"])
}

/// `dplog-query --archive DIR --between` over both runs' times, `args`.
fn query(arch: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_dplog-query"))
        .arg("--archive")
        .arg(arch)
        .args(["--between", "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"])
        .args(args)
        .output()
        .unwrap()
}

/// The rows of CSV `text` (one header line, then rows) in the shape of
/// [`expected`], read by column name.
fn csv_rows(text: &str) -> BTreeMap<String, usize> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let mut m = BTreeMap::new();
    for line in lines {
        // No value of these records holds a comma or a quote.
        let cells: Vec<&str> = line.split(',').collect();
        let get = |name: &str| {
            header
                .iter()
                .position(|c| *c == name)
                .map_or("?", |i| cells[i])
        };
        let key = match get("recordType") {
            "fwDrop" => format!(
                "fwDrop ifName={} ruleId={} srcPort={}",
                get("ifName"),
                get("ruleId"),
                get("srcPort")
            ),
            "lbConn" => format!("lbConn bytesIn={} vport={}", get("bytesIn"), get("vport")),
            _ => line.to_string(),
        };
        *m.entry(key).or_default() += 1;
    }
    m
}

#[test]
fn an_archive_written_by_two_runs_whose_ids_swapped_answers_every_record_under_its_schema() {
    let dir = tempfile::tempdir().unwrap();
    let arch = dir.path().join("arch");
    std::fs::create_dir(&arch).unwrap();
    for run in 0..2 {
        let mut sink = open_archive(&arch);
        for b in run_batches(run) {
            sink.write_batch(&b).unwrap();
        }
        sink.close().unwrap();
    }
    let out = query_all(&arch);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(got(&out.stdout), expected());
    // CSV: one header over both runs' types, each row in its columns.
    let out = query(&arch, &["--format", "csv"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("recordType,"))
            .count(),
        1
    );
    assert_eq!(csv_rows(&text), expected());
    // A field of one type, whichever id it had in each run.
    let out = query(&arch, &["--format", "json", "--where", "ruleId=1005"]);
    assert_eq!(out.status.code(), Some(0));
    let want: BTreeMap<String, usize> = [(
        "fwDrop ifName=eth1-5 ruleId=1005 srcPort=40005".to_string(),
        1,
    )]
    .into();
    assert_eq!(got(&out.stdout), want);
}

#[test]
fn an_appended_binary_log_whose_ids_swapped_imports_every_record_under_its_schema() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("out.binary");
    let bytes: Vec<u8> = (0..2).flat_map(run_batches).flatten().collect();
    std::fs::write(&log, &bytes).unwrap();
    let arch = dir.path().join("arch");
    std::fs::create_dir(&arch).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-query"))
        .args(["import", "--archive"])
        .arg(&arch)
        .arg(&log)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("imported {} records", 4 * N)),
        "{err}"
    );
    let out = query_all(&arch);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(got(&out.stdout), expected());
}

/// Opens the archive sink on `dir`. A child process another test spawns
/// holds a copy of the lock's descriptor between its fork and its exec
/// (the lock is released at exec, `O_CLOEXEC`): an open that meets one
/// is tried again, for up to 30 s.
fn open_archive(dir: &Path) -> ArchiveSink {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match ArchiveSink::open(dir, ArchiveSinkOptions::default()) {
            Ok(s) => return s,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    && std::time::Instant::now() < until =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("{}: {e}", dir.display()),
        }
    }
}

#[test]
fn ddl_of_a_binary_log_whose_runs_swapped_ids_makes_one_table_per_type() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("out.binary");
    let bytes: Vec<u8> = (0..2).flat_map(run_batches).flatten().collect();
    std::fs::write(&log, &bytes).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-query"))
        .args(["ddl", "--clickhouse", "--log"])
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sql = String::from_utf8(out.stdout).unwrap();
    let tables: Vec<&str> = sql
        .lines()
        .filter(|l| l.starts_with("CREATE TABLE"))
        .collect();
    assert_eq!(
        tables,
        ["CREATE TABLE `fwDrop`", "CREATE TABLE `lbConn`"],
        "{sql}"
    );
}
