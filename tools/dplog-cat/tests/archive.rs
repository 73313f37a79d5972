//! `dplog-cat DIR` on an archive: the same output as the binary log of
//! the same records (TSC fields in wall time with the calibrations the
//! log carried), the same selection, and damage named with the rest
//! printed.

use std::path::Path;
use std::process::{Command, Output};

use dplog_core::schema::{FieldDef, FieldKind, Schema};
use dplog_core::Sink;
use dplog_formatters::binary::BinaryEncoder;
use dplog_formatters::TscCalibration;
use dplog_sinks::archive::format::{self, KIND_CALIBRATION, KIND_DATA};
use dplog_sinks::archive::{list_segments, ArchiveSink, ArchiveSinkOptions, Segment};

#[path = "../../../testkit/fixtures/tsc_archive.rs"]
mod tsc_archive;
use tsc_archive::{cal_of, T0};

/// A 32-byte record of no known package: ns time, IPv4 address, port,
/// rule id.
fn schema() -> Schema {
    Schema::new(
        310,
        "fwDeny",
        32,
        vec![
            FieldDef::new("denyTime", 8, 8, FieldKind::NsTimestamp, 0),
            FieldDef::new("sourceIPv4Address", 16, 4, FieldKind::Ipv4, 8),
            FieldDef::new("sourceTransportPort", 20, 2, FieldKind::U16, 7),
            FieldDef::new("ruleId", 24, 4, FieldKind::U32, 0),
        ],
    )
    .unwrap()
}

fn rec(i: u64) -> Vec<u8> {
    let mut r = vec![0u8; 32];
    r[0..2].copy_from_slice(&32u16.to_ne_bytes());
    r[2..4].copy_from_slice(&310u16.to_ne_bytes());
    r[8..16].copy_from_slice(&(T0 + i * 1_000_000).to_ne_bytes());
    r[16..20].copy_from_slice(&[10, 0, (i / 250) as u8, (i % 250) as u8]);
    r[20..22].copy_from_slice(&((1024 + i % 4000) as u16).to_ne_bytes());
    r[24..28].copy_from_slice(&((i % 7) as u32).to_ne_bytes());
    r
}

/// 3000 records (3 s) as a binary log `log.bin` and an archive `arch/`
/// of 1 s segments, written from the same stream.
fn write_both(dir: &Path) {
    let s = schema();
    let mut enc = BinaryEncoder::new(&[&s]);
    let mut stream = Vec::new();
    let arch = dir.join("arch");
    std::fs::create_dir(&arch).unwrap();
    let mut sink = ArchiveSink::open(
        &arch,
        ArchiveSinkOptions {
            index: vec!["sourceIPv4Address".into()],
            block_rows: 200,
            segment_interval_ms: Some(1000),
            ..Default::default()
        },
    )
    .unwrap();
    for chunk in (0..3000u64).collect::<Vec<_>>().chunks(250) {
        let mut batch = Vec::new();
        for &i in chunk {
            assert!(enc.push(&rec(i), &mut batch));
        }
        sink.write_batch(&batch).unwrap();
        stream.extend_from_slice(&batch);
    }
    sink.close().unwrap();
    std::fs::write(dir.join("log.bin"), stream).unwrap();
}

fn cat(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn an_archive_prints_like_the_binary_log_of_the_same_records() {
    let dir = tempfile::tempdir().unwrap();
    write_both(dir.path());
    assert!(list_segments(&dir.path().join("arch")).unwrap().len() >= 3);
    for format in ["json", "text", "csv"] {
        let a = cat(dir.path(), &["--format", format, "arch"]);
        let b = cat(dir.path(), &["--format", format, "log.bin"]);
        assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
        assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
        assert_eq!(
            a.stdout.iter().filter(|&&c| c == b'\n').count(),
            3000 + usize::from(format == "csv")
        );
        assert!(a.stdout == b.stdout, "{format} differs");
    }
    // Selection: a time range across a segment boundary and a field.
    let sel = [
        "--format",
        "json",
        "--from",
        "2026-01-01T00:00:00.900Z",
        "--to",
        "2026-01-01T00:00:01.100Z",
        "--where",
        "ruleId=3",
    ];
    let a = cat(dir.path(), &[&sel[..], &["arch"]].concat());
    let b = cat(dir.path(), &[&sel[..], &["log.bin"]].concat());
    assert!(a.status.success() && b.status.success());
    // Records 900..1100 with i % 7 == 3.
    let want = (900..1100u64).filter(|i| i % 7 == 3).count();
    assert_eq!(a.stdout.iter().filter(|&&c| c == b'\n').count(), want);
    assert_eq!(a.stdout, b.stdout);
}

#[test]
fn a_damaged_block_is_named_and_the_rest_printed() {
    let dir = tempfile::tempdir().unwrap();
    write_both(dir.path());
    let segs = list_segments(&dir.path().join("arch")).unwrap();
    let seg = Segment::open(&segs[1].path).unwrap();
    let (bad, meta) = seg
        .blocks
        .iter()
        .enumerate()
        .find(|(_, b)| b.kind == KIND_DATA)
        .unwrap();
    let rows = meta.rows as usize;
    let mut bytes = std::fs::read(&segs[1].path).unwrap();
    bytes[meta.offset as usize + 40] ^= 0x10;
    std::fs::write(&segs[1].path, bytes).unwrap();
    let o = cat(dir.path(), &["--format", "json", "arch"]);
    let err = String::from_utf8_lossy(&o.stderr);
    // Damage: status 3, as dplog-query's.
    assert_eq!(o.status.code(), Some(3), "{err}");
    let name = segs[1].path.file_name().unwrap().to_string_lossy();
    assert!(err.contains(&*name), "{err}");
    assert!(err.contains(&format!("block {bad}")), "{err}");
    assert_eq!(
        o.stdout.iter().filter(|&&c| c == b'\n').count(),
        3000 - rows
    );
    // A segment cut shorter than its header: named once, with its byte.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&segs[0].path)
        .unwrap()
        .set_len(10)
        .unwrap();
    let o = cat(dir.path(), &["--format", "json", "arch"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    let name = segs[0].path.file_name().unwrap().to_string_lossy();
    let line = format!(
        "dplog-cat: arch/{name}: at byte 0: shorter than a segment header; segment skipped"
    );
    assert_eq!(err.lines().filter(|l| *l == line).count(), 1, "{err}");
}

/// A `--where` that can never hold (a misspelt field, a value its field
/// cannot print) is an error, not an empty answer, for a binary log and
/// an archive alike.
#[test]
fn a_where_that_cannot_hold_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    write_both(dir.path());
    for input in ["log.bin", "arch"] {
        for (cond, want) in [
            (
                "sourceIPv4Adress=10.0.0.26",
                "no record type of this log has a field \"sourceIPv4Adress\"; its fields: denyTime, ruleId, sourceIPv4Address, sourceTransportPort",
            ),
            (
                "sourceIPv4Address=10.0.0.999",
                "\"10.0.0.999\" is not a value of sourceIPv4Address",
            ),
        ] {
            let o = cat(dir.path(), &["--where", cond, input]);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{input} {cond}: {err}");
            assert!(err.contains(want), "{input} {cond}: {err}");
            assert!(o.stdout.is_empty(), "{input} {cond}");
        }
    }
}

/// A 32-byte record with an ns event time, a TSC-typed field and a rule.
fn tsc_schema() -> Schema {
    Schema::new(
        320,
        "tscSeen",
        32,
        vec![
            FieldDef::new("eventTime", 8, 8, FieldKind::NsTimestamp, 0),
            FieldDef::new("flowStartMilliseconds", 16, 8, FieldKind::TscTimestamp, 152),
            FieldDef::new("ruleId", 24, 4, FieldKind::U32, 0),
        ],
    )
    .unwrap()
}

fn ticks(i: u64) -> u64 {
    8_234 + i * 2_400_000
}

/// Record `i`: event time T0 + i ms + 0.5 ms (between the other type's
/// records: records of equal time and different types need not keep
/// their stream order in an archive), ticks 2.4e6 apart.
fn tsc_rec(i: u64) -> Vec<u8> {
    let mut r = vec![0u8; 32];
    r[0..2].copy_from_slice(&32u16.to_ne_bytes());
    r[2..4].copy_from_slice(&320u16.to_ne_bytes());
    r[8..16].copy_from_slice(&(T0 + i * 1_000_000 + 500_000).to_ne_bytes());
    r[16..24].copy_from_slice(&ticks(i).to_ne_bytes());
    r[24..28].copy_from_slice(&((i % 11) as u32).to_ne_bytes());
    r
}

/// 4000 TSC records (4 s) with the calibrations of
/// [`tsc_archive::CALS`], and a record of another type each 4 ms, as a
/// binary log `log.bin` and an archive `arch/` of 1 s segments, written
/// from the same stream.
fn write_tsc_both(dir: &Path) {
    let (t, f) = (tsc_schema(), schema());
    let opts = ArchiveSinkOptions {
        index: vec!["ruleId".into()],
        block_rows: 200,
        segment_interval_ms: Some(1000),
        ..Default::default()
    };
    tsc_archive::write_both(dir, opts, &[&t, &f], 4000, 300, |i, enc, batch| {
        if i % 4 == 1 {
            assert!(enc.push(&rec(i), batch));
        }
        assert!(enc.push(&tsc_rec(i), batch));
    });
}

/// The value of `"key":` in a JSON line, as a number.
fn json_u64(line: &str, key: &str) -> u64 {
    let at = line.find(&format!("\"{key}\":")).unwrap() + key.len() + 3;
    line[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn tsc_fields_print_as_wall_time_with_the_calibrations_of_the_binary_log() {
    let dir = tempfile::tempdir().unwrap();
    write_tsc_both(dir.path());
    let segs = list_segments(&dir.path().join("arch")).unwrap();
    assert_eq!(segs.len(), 4);
    for format in ["json", "text", "csv"] {
        let a = cat(dir.path(), &["--format", format, "arch"]);
        let b = cat(dir.path(), &["--format", format, "log.bin"]);
        assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
        assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
        assert_eq!(
            a.stdout.iter().filter(|&&c| c == b'\n').count(),
            5000 + usize::from(format == "csv")
        );
        assert!(a.stdout == b.stdout, "{format} differs");
    }
    // Through dplog-cat's binary output: the archive's calibrations
    // become `C` frames again.
    let a = cat(dir.path(), &["--format", "binary", "arch"]);
    assert!(a.status.success());
    std::fs::write(dir.path().join("again.bin"), &a.stdout).unwrap();
    let a = cat(dir.path(), &["--format", "json", "again.bin"]);
    let b = cat(dir.path(), &["--format", "json", "log.bin"]);
    assert!(a.stdout == b.stdout, "binary round trip differs");
    // Each TSC field is the wall time of its own calibration: the record
    // before a change, the one at it, the last one.
    let a = cat(dir.path(), &["--format", "json", "arch"]);
    let out = String::from_utf8(a.stdout).unwrap();
    let tsc: Vec<&str> = out.lines().filter(|l| !l.contains("denyTime")).collect();
    assert_eq!(tsc.len(), 4000);
    for (i, line) in tsc.iter().enumerate() {
        let want = cal_of(i as u64).to_ns(ticks(i as u64)) / 1_000_000;
        assert_eq!(json_u64(line, "flowStartMilliseconds"), want, "record {i}");
    }
    // By hand: record 1549 (3_717_608_234 ticks) under 2,399,999,999 Hz
    // from tick 7000 at T0 is 1.549000514 s after T0; record 1550
    // (3_720_008_234) under the next line (tick 3_600_007_000 at T0 +
    // 4.5 s, 2,400,000,007 Hz) 4.550000514 s; record 3999 (9_597_608_234)
    // under the last (tick 6e9 at T0 + 9 s) 10.499003431 s.
    for (i, ms) in [
        (1549, 1_767_225_601_549),
        (1550, 1_767_225_604_550),
        (3999, 1_767_225_610_499),
    ] {
        assert_eq!(json_u64(tsc[i], "flowStartMilliseconds"), ms, "record {i}");
    }
    // Each segment alone prints its records as in the whole archive: it
    // repeats the calibration in force at its start.
    let mut alone = Vec::new();
    for (k, sf) in segs.iter().enumerate() {
        let seg = Segment::open(&sf.path).unwrap();
        let first = seg.blocks.iter().position(|b| b.kind == KIND_DATA).unwrap();
        assert_eq!(seg.blocks[first - 1].kind, KIND_CALIBRATION, "segment {k}");
        let one = dir.path().join(format!("one{k}"));
        std::fs::create_dir(&one).unwrap();
        std::fs::copy(&sf.path, one.join(sf.path.file_name().unwrap())).unwrap();
        let o = cat(dir.path(), &["--format", "json", &format!("one{k}")]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        alone.extend_from_slice(&o.stdout);
    }
    assert!(alone == out.as_bytes(), "segments read alone differ");
    // Selection across the first change: by event time and by field.
    let sel = [
        "--format",
        "text",
        "--from",
        "2026-01-01T00:00:01.500Z",
        "--to",
        "2026-01-01T00:00:01.600Z",
        "--where",
        "ruleId=3",
    ];
    let a = cat(dir.path(), &[&sel[..], &["arch"]].concat());
    let b = cat(dir.path(), &[&sel[..], &["log.bin"]].concat());
    assert!(a.status.success() && b.status.success());
    // Both types have a ruleId: the TSC records' is i % 11, the others'
    // (each 4 ms) i % 7.
    let want = (1500..1600u64)
        .filter(|i| i % 11 == 3 || (i % 4 == 1 && i % 7 == 3))
        .count();
    assert_eq!(want, 13);
    assert_eq!(a.stdout.iter().filter(|&&c| c == b'\n').count(), want);
    assert_eq!(a.stdout, b.stdout);
}

/// A record whose event time is TSC-typed (the archive orders it by
/// ticks), as the dplog-cat stream tests have it.
fn tick_schema() -> Schema {
    Schema::new(
        910,
        "tick",
        24,
        vec![
            FieldDef::new(
                "observationTimeMilliseconds",
                8,
                8,
                FieldKind::TscTimestamp,
                323,
            ),
            FieldDef::new("flowEndMilliseconds", 16, 8, FieldKind::TscTimestamp, 153),
        ],
    )
    .unwrap()
}

#[test]
fn from_and_to_select_a_tsc_event_time_by_its_wall_time() {
    let dir = tempfile::tempdir().unwrap();
    let s = tick_schema();
    let mut enc = BinaryEncoder::new(&[&s]);
    let arch = dir.path().join("arch");
    std::fs::create_dir(&arch).unwrap();
    let mut sink = ArchiveSink::open(
        &arch,
        ArchiveSinkOptions {
            index: Vec::new(),
            block_rows: 100,
            segment_interval_ms: None,
            ..Default::default()
        },
    )
    .unwrap();
    let mut stream = Vec::new();
    // 1000 records 1 ms apart at 2,399,999,999 Hz; a recalibration at
    // record 500 moves the line 3 s on.
    for i in 0..1000u64 {
        if i == 0 || i == 500 {
            enc.set_tsc_calibration(TscCalibration {
                hz: 2_399_999_999,
                tsc0: 7_000,
                ns0: T0 + if i == 0 { 0 } else { 3_000_000_000 },
            });
        }
        let mut r = vec![0u8; 24];
        r[0..2].copy_from_slice(&24u16.to_ne_bytes());
        r[2..4].copy_from_slice(&910u16.to_ne_bytes());
        let t = 7_000 + i * 2_400_000;
        r[8..16].copy_from_slice(&t.to_ne_bytes());
        r[16..24].copy_from_slice(&(t + 1_200_000).to_ne_bytes());
        let mut batch = Vec::new();
        assert!(enc.push(&r, &mut batch));
        sink.write_batch(&batch).unwrap();
        stream.extend_from_slice(&batch);
    }
    sink.close().unwrap();
    std::fs::write(dir.path().join("log.bin"), stream).unwrap();
    // Records 400..500 by the first line, 500..600 by the second (3.5 s
    // to 3.6 s after T0).
    for (from, to, n) in [
        ("2026-01-01T00:00:00.400Z", "2026-01-01T00:00:00.500Z", 100),
        ("2026-01-01T00:00:03.500Z", "2026-01-01T00:00:03.600Z", 100),
        ("2026-01-01T00:00:01Z", "2026-01-01T00:00:03Z", 0),
    ] {
        let args = ["--format", "json", "--from", from, "--to", to];
        let a = cat(dir.path(), &[&args[..], &["arch"]].concat());
        let b = cat(dir.path(), &[&args[..], &["log.bin"]].concat());
        assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
        assert_eq!(
            a.stdout.iter().filter(|&&c| c == b'\n').count(),
            n,
            "{from}"
        );
        assert_eq!(a.stdout, b.stdout, "{from}");
    }
}

/// A sealed segment of format version 1 (no calibration blocks) holding
/// `recs` of `s`, built with the format's own pieces.
fn write_v1_segment(dir: &Path, s: &Schema, recs: &[Vec<u8>]) {
    let mut file = format::segment_header().to_vec();
    file[8..12].copy_from_slice(&1u32.to_le_bytes());
    let schema = format::block_frame(format::KIND_SCHEMA, &s.encode().unwrap());
    let times: Vec<u64> = recs
        .iter()
        .map(|r| format::event_time(s, r).unwrap())
        .collect();
    let (min, max) = (*times.iter().min().unwrap(), *times.iter().max().unwrap());
    let cols = format::schema_columns(s);
    let data = format::block_frame(
        KIND_DATA,
        &format::whole_block_body(s, &cols, &recs.concat(), recs.len(), min, max, 3).unwrap(),
    );
    let mut blocks = Vec::new();
    for (kind, f, rows, lo, hi) in [
        (format::KIND_SCHEMA, &schema, 0, 0, 0),
        (KIND_DATA, &data, recs.len() as u32, min, max),
    ] {
        blocks.push(format::BlockMeta {
            offset: file.len() as u64,
            len: f.len() as u32,
            kind,
            schema_id: s.id(),
            rows,
            min: lo,
            max: hi,
        });
        file.extend_from_slice(f);
    }
    let footer = format::Footer {
        seq: 0,
        min,
        max,
        rows: recs.len() as u64,
        max_lifetime_ms: 86_400_000,
        index_fields: Vec::new(),
        blocks,
        index: Vec::new(),
        index_bits: 16,
        key_ranges: Vec::new(),
    };
    file.extend_from_slice(&footer.to_bytes());
    std::fs::write(dir.join(format::sealed_name(0, min, max)), file).unwrap();
}

#[test]
fn a_version_1_archive_prints_tsc_fields_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let s = tsc_schema();
    let recs: Vec<Vec<u8>> = (0..300).map(tsc_rec).collect();
    let arch = dir.path().join("arch");
    std::fs::create_dir(&arch).unwrap();
    write_v1_segment(&arch, &s, &recs);
    // The binary log of the same records without a calibration: the
    // identity (ticks are ns).
    let mut enc = BinaryEncoder::new(&[&s]);
    let mut log = Vec::new();
    for r in &recs {
        assert!(enc.push(r, &mut log));
    }
    std::fs::write(dir.path().join("log.bin"), log).unwrap();
    let a = cat(dir.path(), &["--format", "json", "arch"]);
    let b = cat(dir.path(), &["--format", "json", "log.bin"]);
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
    let out = String::from_utf8(a.stdout).unwrap();
    assert_eq!(out.lines().count(), 300);
    for (i, line) in out.lines().enumerate() {
        assert_eq!(
            json_u64(line, "flowStartMilliseconds"),
            ticks(i as u64) / 1_000_000
        );
    }
}
