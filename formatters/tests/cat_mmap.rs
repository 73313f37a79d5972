//! `dplog-cat` on segment files written by the real mmap sink
//! (`dplog_sinks::MmapSink`): a binary log in a segment decodes like a
//! binary file, formatted lines come out as they are, several segments are
//! one stream, and a torn or foreign segment is refused with the reason.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;
use dplog_core::{Formatter, Sink};
use dplog_formatters::{Format, FormatSpec};
use dplog_sinks::mmap::list_segments;
use dplog_sinks::{MmapSink, MmapSinkOptions};

fn encoded(kind: Format) -> Vec<u8> {
    let mut f = FormatSpec {
        kind,
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

/// Writes `batches` through a real mmap sink with 64 KiB segments; returns
/// the segment paths in order.
fn segments(dir: &Path, batches: &[Vec<u8>]) -> Vec<PathBuf> {
    let mut s = MmapSink::open(
        dir,
        MmapSinkOptions {
            segment_bytes: 64 * 1024,
            msync_interval_ms: None,
            prefix: "nat".into(),
        },
    )
    .unwrap();
    for b in batches {
        s.write_batch(b).unwrap();
    }
    s.close().unwrap();
    list_segments(dir, "nat")
        .unwrap()
        .into_iter()
        .map(|(_, p)| p)
        .collect()
}

fn cat(args: &[&str], files: &[PathBuf]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .args(args)
        .args(files)
        .output()
        .unwrap()
}

fn golden(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden")
            .join(name),
    )
    .unwrap()
}

#[test]
fn a_binary_log_in_an_mmap_segment_decodes_to_any_format() {
    let dir = tempfile::tempdir().unwrap();
    let segs = segments(dir.path(), &[encoded(Format::Binary)]);
    assert_eq!(segs.len(), 1);
    let o = cat(&["--format", "json"], &segs);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8(o.stdout).unwrap(), golden("nat.jsonl"));
    let o = cat(&["--format", "csv"], &segs);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8(o.stdout).unwrap(), golden("nat.csv"));
}

#[test]
fn formatted_lines_in_several_segments_come_out_as_one_stream() {
    let dir = tempfile::tempdir().unwrap();
    let json = encoded(Format::Json);
    // Enough batches to fill more than one 60 KiB data area.
    let n = (150 * 1024) / json.len() + 1;
    let batches = vec![json.clone(); n];
    let segs = segments(dir.path(), &batches);
    assert!(segs.len() >= 3, "{segs:?}");
    let o = cat(&[], &segs);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.stdout, json.repeat(n));
    // --format cannot convert lines that are already formatted.
    let o = cat(&["--format", "csv"], &segs[..1]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("holds formatted lines, not a binary log; --format csv cannot convert them"),
        "{err}"
    );
}

#[test]
fn torn_and_foreign_segments_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let segs = segments(dir.path(), &[encoded(Format::Json)]);
    let seg = std::fs::read(&segs[0]).unwrap();
    let check = |name: &str, bytes: &[u8], want: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let o = cat(&[], std::slice::from_ref(&p));
        assert_eq!(o.status.code(), Some(1), "{name}");
        assert!(o.stdout.is_empty(), "{name}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("{}: {want}", p.display())),
            "{name}: {err}"
        );
    };
    // Cut after the header: the size in the header gives it away.
    check(
        "cut-0000000000.dpm",
        &seg[..5000],
        "torn mmap segment: its header says 65536 bytes, the file has 5000",
    );
    check(
        "short-0000000000.dpm",
        &seg[..100],
        "torn mmap segment: 100 bytes, shorter than its 4096-byte header",
    );
    let mut v2 = seg.clone();
    v2[8..12].copy_from_slice(&2u32.to_le_bytes());
    check(
        "v2-0000000000.dpm",
        &v2,
        "mmap segment version 2, this dplog-cat reads version 1",
    );
    let mut over = seg.clone();
    over[24..32].copy_from_slice(&(1u64 << 20).to_le_bytes());
    check(
        "over-0000000000.dpm",
        &over,
        "corrupt mmap segment: committed length 1048576 beyond its 61440-byte data area",
    );
    check(
        "zeros-0000000000.dpm",
        &vec![0u8; 65536],
        "not a dplog mmap segment (it does not start with DPLOGMM1)",
    );
}
