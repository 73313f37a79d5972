//! `dplog-cat` on segment files written by the real mmap sink
//! (`dplog_sinks::MmapSink`): a binary log in a segment decodes like a
//! binary file, formatted lines come out as they are, several segments are
//! one stream, a torn or foreign segment is refused with the reason, and a
//! directory decodes its segments, skipping those a crash left without a
//! header.

#[path = "../../../formatters/tests/common/mod.rs"]
mod common;

use dplog_schema_nat::NatFormatSpec as _;
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
            header: None,
            seal: None,
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
            .join("../../formatters/tests/golden")
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
        "mmap segment version 2, this dplog reads version 1",
    );
    let mut over = seg.clone();
    over[24..32].copy_from_slice(&(1u64 << 20).to_le_bytes());
    check(
        "over-0000000000.dpm",
        &over,
        "corrupt mmap segment: committed length 1048576 beyond its 61440-byte data area",
    );
    // Zeros but for one byte: not the headerless file a crash leaves.
    let mut nearly = vec![0u8; 65536];
    nearly[65535] = b'\n';
    check(
        "nearly-0000000000.dpm",
        &nearly,
        "not a dplog mmap segment (it does not start with DPLOGMM1)",
    );
}

/// Batches of one binary encoder (the schema preamble only at the start of
/// the first), each holding `all_records()` once.
fn binary_batches(n: usize) -> Vec<Vec<u8>> {
    let mut f = FormatSpec {
        kind: Format::Binary,
        ..Default::default()
    }
    .nat_formatter()
    .unwrap();
    (0..n)
        .map(|_| {
            let mut out = Vec::new();
            for r in all_records() {
                f.format(&r, &mut out);
            }
            out
        })
        .collect()
}

#[test]
fn each_binary_segment_decodes_alone_and_in_any_order() {
    let dir = tempfile::tempdir().unwrap();
    // 7 records (about 400 bytes) a batch, 800 batches: several 60 KiB
    // data areas.
    let n = 800;
    let segs = segments(dir.path(), &binary_batches(n));
    assert!(segs.len() >= 3, "{segs:?}");
    let whole = cat(&["--format", "json"], &segs);
    assert!(
        whole.status.success(),
        "{}",
        String::from_utf8_lossy(&whole.stderr)
    );
    assert_eq!(
        String::from_utf8(whole.stdout).unwrap(),
        golden("nat.jsonl").repeat(n)
    );
    // Alone: each a whole, non-empty part of the log.
    let alone: Vec<Vec<u8>> = segs
        .iter()
        .map(|s| {
            let o = cat(&["--format", "json"], std::slice::from_ref(s));
            assert!(
                o.status.success(),
                "{}: {}",
                s.display(),
                String::from_utf8_lossy(&o.stderr)
            );
            assert!(!o.stdout.is_empty());
            o.stdout
        })
        .collect();
    assert_eq!(alone.concat(), golden("nat.jsonl").repeat(n).into_bytes());
    // In reverse order: the segments' records, segment by segment.
    let rev: Vec<PathBuf> = segs.iter().rev().cloned().collect();
    let o = cat(&["--format", "json"], &rev);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want: Vec<u8> = alone.iter().rev().flatten().copied().collect();
    assert_eq!(o.stdout, want);
    // CSV and IPFIX (which write column names / templates per schema):
    // the segments, each repeating the schemas, give what the same records
    // give from one binary file.
    let file = dir.path().join("all.bin");
    std::fs::write(&file, binary_batches(n).concat()).unwrap();
    for f in ["csv", "ipfix"] {
        let a = cat(&["--format", f], &segs);
        let b = cat(&["--format", f], std::slice::from_ref(&file));
        assert!(a.status.success() && b.status.success(), "{f}");
        assert!(!a.stdout.is_empty());
        assert!(a.stdout == b.stdout, "{f}: segments and file differ");
    }
}

#[test]
fn a_binary_segment_without_its_schemas_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    // R frames only (an encoder already started): what an older dplog left
    // in every segment after the first.
    let b = binary_batches(2);
    let segs = segments(dir.path(), &b[1..]);
    assert_eq!(segs.len(), 1);
    for args in [&["--format", "json"][..], &[][..]] {
        let o = cat(args, &segs);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(o.stdout.is_empty());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!(
                "{}: binary frames without the schema preamble",
                segs[0].display()
            )),
            "{err}"
        );
    }
    // A segment of formatted lines after a binary one: refused.
    let d2 = tempfile::tempdir().unwrap();
    let lines = segments(d2.path(), &[encoded(Format::Json)]);
    let d3 = tempfile::tempdir().unwrap();
    let bin = segments(d3.path(), &binary_batches(1));
    let o = cat(&[], &[bin[0].clone(), lines[0].clone()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("holds formatted lines and an earlier segment a binary log"),
        "{err}"
    );
}

/// Plants what a crash while segments were created leaves (an older
/// dplog: under segment names) after the segments in `dir`: an empty and
/// an all-zero segment, and a temporary file. Returns the two segments.
fn plant_headerless(dir: &Path, after: usize) -> [PathBuf; 2] {
    let empty = dir.join(format!("nat-{after:010}.dpm"));
    std::fs::write(&empty, b"").unwrap();
    let zeros = dir.join(format!("nat-{:010}.dpm", after + 1));
    std::fs::write(&zeros, vec![0u8; 64 * 1024]).unwrap();
    std::fs::write(
        dir.join(format!(".nat-{:010}.dpm.tmp", after + 2)),
        vec![0u8; 64 * 1024],
    )
    .unwrap();
    [empty, zeros]
}

fn assert_skipped(stderr: &[u8], planted: &[PathBuf; 2]) {
    let err = String::from_utf8_lossy(stderr);
    assert_eq!(err.lines().count(), 2, "{err}");
    assert!(
        err.contains(&format!(
            "dplog-cat: {}: skipped: mmap segment without a header (empty): a crash cut its creation short; it holds no records",
            planted[0].display()
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "dplog-cat: {}: skipped: mmap segment without a header (all 65536 bytes zero)",
            planted[1].display()
        )),
        "{err}"
    );
}

#[test]
fn a_directory_decodes_its_segments_and_skips_those_a_crash_left_headerless() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let n = 800;
    let segs = segments(d, &binary_batches(n));
    assert!(segs.len() >= 3, "{segs:?}");
    // The last valid segment also holds a batch cut by the crash: copied
    // in part past its committed length, never committed.
    let last = segs.last().unwrap();
    let mut b = std::fs::read(last).unwrap();
    let committed = u64::from_le_bytes(b[24..32].try_into().unwrap()) as usize;
    let torn = &binary_batches(1)[0][..150];
    b[4096 + committed..4096 + committed + torn.len()].copy_from_slice(torn);
    std::fs::write(last, &b).unwrap();
    let planted = plant_headerless(d, segs.len());
    let want = golden("nat.jsonl").repeat(n);

    // The directory: every record of the valid segments, once, in order.
    let o = cat(&["--format", "json"], &[d.to_path_buf()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8(o.stdout).unwrap();
    assert_eq!(out.lines().count(), n * 7);
    assert_eq!(out, want);
    assert_skipped(&o.stderr, &planted);

    // The same files named one by one (a shell glob of the directory).
    let mut files = segs.clone();
    files.extend(planted.iter().cloned());
    let o = cat(&["--format", "json"], &files);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(String::from_utf8(o.stdout).unwrap(), want);
    assert_skipped(&o.stderr, &planted);

    // A log of formatted lines the same way.
    let dir = tempfile::tempdir().unwrap();
    let json = encoded(Format::Json);
    let k = (150 * 1024) / json.len() + 1;
    let segs = segments(dir.path(), &vec![json.clone(); k]);
    assert!(segs.len() >= 3, "{segs:?}");
    let planted = plant_headerless(dir.path(), segs.len());
    let o = cat(&[], &[dir.path().to_path_buf()]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(o.stdout, json.repeat(k));
    assert_skipped(&o.stderr, &planted);
}

#[test]
fn a_directory_without_segments_or_with_two_logs_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    let o = cat(&[], std::slice::from_ref(&d));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "dplog-cat: {}: no mmap segments (<prefix>-<10 digits>.dpm) and no archive segments in this directory\n",
            d.display()
        )
    );
    // An archive's lock file and nothing else: an archive nothing was
    // written to.
    std::fs::write(d.join(".archive.lock"), b"").unwrap();
    let o = cat(&[], std::slice::from_ref(&d));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "dplog-cat: {}: an archive directory with no segments yet: nothing was written to it\n",
            d.display()
        )
    );
    std::fs::remove_file(d.join(".archive.lock")).unwrap();
    segments(&d, &[encoded(Format::Json)]);
    std::fs::copy(d.join("nat-0000000000.dpm"), d.join("other-0000000000.dpm")).unwrap();
    let o = cat(&[], std::slice::from_ref(&d));
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "dplog-cat: {}: mmap segments of several logs (prefixes nat, other); give the segment files of one\n",
            d.display()
        )
    );
}

/// A damaged segment among intact ones: named with its file and the
/// offset within it, the rest of it skipped, the later segments decoded;
/// exit status 3.
#[test]
fn a_damaged_segment_is_named_and_the_later_ones_still_decode() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let n = 800;
    let segs = segments(d, &binary_batches(n));
    assert!(segs.len() >= 3, "{segs:?}");
    let alone: Vec<String> = segs
        .iter()
        .map(|s| {
            let o = cat(&["--format", "json"], std::slice::from_ref(s));
            assert!(o.status.success());
            String::from_utf8(o.stdout).unwrap()
        })
        .collect();
    // The frame in the middle of the second segment's committed data: its
    // type byte overwritten (frames: type, flags, u16 LE length, body).
    let mut b = std::fs::read(&segs[1]).unwrap();
    let committed = u64::from_le_bytes(b[24..32].try_into().unwrap()) as usize;
    let data = &b[4096..4096 + committed];
    let (mut at, mut frames_before) = (0usize, 0usize);
    while at < committed / 2 {
        at += 4 + u16::from_le_bytes([data[at + 2], data[at + 3]]) as usize;
        frames_before += 1;
    }
    b[4096 + at] = 0xEE;
    std::fs::write(&segs[1], &b).unwrap();
    // The records of the second segment before the damage: its output up
    // to that many records (its preamble frames print nothing).
    let o = cat(&["--format", "json"], &[d.to_path_buf()]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        err.contains(&format!(
            "dplog-cat: {}: damaged at byte {at} of its {committed} committed data bytes (file offset {}): ",
            segs[1].display(),
            4096 + at
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "the rest of it skipped, going on with {}",
            segs[2].display()
        )),
        "{err}"
    );
    let out = String::from_utf8(o.stdout).unwrap();
    let printed_of_1 = out.len() - alone[0].len() - alone[2..].concat().len();
    assert!(out.starts_with(&alone[0]), "the first segment is whole");
    assert!(
        out.ends_with(&alone[2..].concat()),
        "the segments after the damaged one are whole"
    );
    // Of the damaged segment: whole lines, a prefix of what it holds.
    let part = &out[alone[0].len()..alone[0].len() + printed_of_1];
    assert!(alone[1].starts_with(part));
    assert!(part.ends_with('\n') && !part.is_empty() && part.len() < alone[1].len());
    assert!(frames_before > 0);
}
