//! Two loggers, one after the other, write the same CSV path (a file
//! sink, and an mmap sink's directory) with the same two user record
//! types registered in opposite orders, so their schema ids and the CSV
//! header's columns differ between the runs (a program restarted after an
//! upgrade): every row of both runs is read back once, under the header
//! of its own run.

use std::collections::BTreeMap;

use dplog::config::LogConfig;
use dplog::schema::Schema;
use dplog::Slot64;

#[path = "../testkit/fixtures/swapped_ids.rs"]
mod swapped_ids;
use swapped_ids::{fw_drop, lb_conn};

/// 2026-01-01T00:00:00Z in ns since the Unix epoch.
const T0: u64 = 1_767_225_600_000_000_000;
/// Records of each type per run.
const N: u64 = 12;

/// Runs a logger of `[format] type = "csv"` and `sink` (a `[sink]` table)
/// whose program registers fwDrop first (ids 256, 257) in run 0 and
/// lbConn first (ids swapped) in run 1, and logs `N` records of each.
fn run(sink: &str, run: u64) {
    let (fw, lb) = if run == 0 {
        (fw_drop(256), lb_conn(257))
    } else {
        (fw_drop(257), lb_conn(256))
    };
    let schemas: Vec<&Schema> = if run == 0 {
        vec![&fw, &lb]
    } else {
        vec![&lb, &fw]
    };
    let cfg = LogConfig::from_toml_str(&format!("[format]\ntype = \"csv\"\n{sink}")).unwrap();
    let logger = cfg.start_slots::<Slot64>(&schemas).unwrap();
    let mut p = logger.producer().unwrap();
    let head = |size: usize, id: u16| {
        let mut r = vec![0u8; size];
        r[0..2].copy_from_slice(&(size as u16).to_ne_bytes());
        r[2..4].copy_from_slice(&id.to_ne_bytes());
        r
    };
    for i in 0..N {
        let t = T0 + run * 1_000_000_000 + i * 1_000;
        let mut r = head(40, fw.id());
        r[8..16].copy_from_slice(&t.to_ne_bytes());
        r[16..20].copy_from_slice(&((1000 * run + i) as u32).to_ne_bytes());
        r[20..22].copy_from_slice(&(40000 + i as u16).to_ne_bytes());
        let name = format!("eth{run}-{i}");
        r[24..24 + name.len()].copy_from_slice(name.as_bytes());
        assert!(p.log(Slot64::from_bytes(&r).unwrap()));
        let mut r = head(32, lb.id());
        r[8..16].copy_from_slice(&(t + 1).to_ne_bytes());
        r[16..24].copy_from_slice(&(10_000 * run + i).to_ne_bytes());
        r[24..26].copy_from_slice(&(80 + i as u16).to_ne_bytes());
        assert!(p.log(Slot64::from_bytes(&r).unwrap()));
    }
    p.flush();
    drop(p);
    let stats = logger.shutdown().unwrap();
    assert_eq!(stats.written_records, 2 * N, "run {run}");
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

/// The rows of CSV logs `texts` (each its header line, then rows), read
/// by column name, in the shape of [`expected`].
fn rows(texts: &[String]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for text in texts {
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().expect("a header").split(',').collect();
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
    }
    m
}

#[test]
fn two_loggers_whose_ids_swapped_write_one_csv_path_and_every_row_keeps_its_columns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.csv");
    let sink = format!("[sink]\ntype = \"file\"\npath = \"{}\"\n", path.display());
    run(&sink, 0);
    run(&sink, 1);
    let mut files = dplog::sinks::file::rotated_files(&path).unwrap();
    files.push(path.clone());
    let texts: Vec<String> = files
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert_eq!(rows(&texts), expected());
    assert_eq!(texts.len(), 2, "the first run's file moved aside");
}

#[test]
fn two_loggers_whose_ids_swapped_write_one_mmap_directory_and_every_row_keeps_its_columns() {
    let dir = tempfile::tempdir().unwrap();
    let sink = format!(
        "[sink]\ntype = \"mmap\"\ndir = \"{}\"\nprefix = \"fw\"\n",
        dir.path().display()
    );
    run(&sink, 0);
    run(&sink, 1);
    let texts: Vec<String> = dplog::sinks::mmap::list_segments(dir.path(), "fw")
        .unwrap()
        .iter()
        .map(|(_, p)| {
            String::from_utf8(dplog::sinks::mmap::reader::read_segment(p).unwrap()).unwrap()
        })
        .collect();
    assert_eq!(rows(&texts), expected());
    assert_eq!(texts.len(), 2, "the second run in a segment of its own");
}
