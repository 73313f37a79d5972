//! TSC-typed fields in answers: printed as wall time with the calibration
//! the archive kept for each record, exactly as `dplog-cat` prints the
//! binary log the archive was written from (calibration changes
//! mid-stream, a window inside one segment, `--at`, binary output); a
//! condition on a TSC field compares its raw ticks.

use std::path::Path;
use std::process::Command;

use dplog_core::schema::{FieldDef, FieldKind, Schema};
use dplog_formatters::binary::{Frame, StreamDecoder};
use dplog_formatters::{Format, FormatSpec};
use dplog_sinks::archive::{list_segments, ArchiveSinkOptions};

#[path = "../../../testkit/fixtures/tsc_archive.rs"]
mod tsc_archive;
use tsc_archive::{cal_of, T0};

fn run(args: &[&str]) -> (i32, Vec<u8>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-query"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A NAT session record whose start is TSC-typed: ns event time, the
/// session's start in ticks, post-NAT address and port, natEvent (4
/// opens a session, 5 closes it; a session is its start, address and
/// port).
fn schema() -> Schema {
    Schema::new(
        330,
        "tscSession",
        32,
        vec![
            FieldDef::new("eventTime", 8, 8, FieldKind::NsTimestamp, 0),
            FieldDef::new("flowStartMilliseconds", 16, 8, FieldKind::TscTimestamp, 152),
            FieldDef::new("postNATSourceIPv4Address", 24, 4, FieldKind::Ipv4, 225),
            FieldDef::new("postNAPTSourceTransportPort", 28, 2, FieldKind::Port, 227),
            FieldDef::new("natEvent", 30, 1, FieldKind::U8, 230),
        ],
    )
    .unwrap()
    .with_lifecycle(
        "natEvent",
        &[4],
        &[5],
        &[
            "flowStartMilliseconds",
            "postNATSourceIPv4Address",
            "postNAPTSourceTransportPort",
        ],
        &[],
    )
    .unwrap()
}

/// Session `s` starts at this tick count.
fn ticks(s: u64) -> u64 {
    8_234 + s * 2_400_000
}

/// Record `i` (event time T0 + i ms): for i < 3000 the create of session
/// i, then the delete of session i - 3000 (same start, address, port).
fn rec(i: u64) -> Vec<u8> {
    let (s, ev) = if i < 3000 { (i, 4u8) } else { (i - 3000, 5) };
    let mut r = vec![0u8; 32];
    r[0..2].copy_from_slice(&32u16.to_ne_bytes());
    r[2..4].copy_from_slice(&330u16.to_ne_bytes());
    r[8..16].copy_from_slice(&(T0 + i * 1_000_000).to_ne_bytes());
    r[16..24].copy_from_slice(&ticks(s).to_ne_bytes());
    r[24..28].copy_from_slice(&u32::from_be_bytes([198, 51, 100, (s % 200) as u8]).to_ne_bytes());
    r[28..30].copy_from_slice(&((1024 + s) as u16).to_ne_bytes());
    r[30] = ev;
    r
}

/// 4000 records (4 s) with the calibrations of [`tsc_archive::CALS`] as a
/// binary log `log.bin` and an archive `arch/` of 1 s segments, from one
/// stream.
fn write_both(dir: &Path) {
    let s = schema();
    let opts = ArchiveSinkOptions {
        block_rows: 200,
        segment_interval_ms: Some(1000),
        ..Default::default()
    };
    tsc_archive::write_both(dir, opts, &[&s], 4000, 300, |i, enc, batch| {
        assert!(enc.push(&rec(i), batch));
    });
    assert_eq!(list_segments(&dir.join("arch")).unwrap().len(), 4);
}

/// What `dplog-cat --format FORMAT` prints of binary log `bin`: each
/// record formatted with the calibration of the `C` frame before it.
fn cat(bin: &[u8], format: Format) -> Vec<u8> {
    let s = schema();
    let mut enc = FormatSpec {
        kind: format,
        ..Default::default()
    }
    .encoder(&[&s])
    .unwrap();
    let (mut dec, mut p, mut out) = (StreamDecoder::new(), 0, Vec::new());
    while p < bin.len() {
        let (f, n) = dec.next(&bin[p..]).unwrap().unwrap();
        match f {
            Frame::Calibration(c) => enc.set_tsc_calibration(c),
            Frame::Record(_, r) => assert!(enc.push(r, &mut out)),
            _ => {}
        }
        p += n;
    }
    out
}

fn lines(b: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(b)
        .lines()
        .map(String::from)
        .collect()
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

fn ms(t: u64) -> String {
    format!("{}ms", t / 1_000_000)
}

#[test]
fn between_prints_tsc_fields_as_dplog_cat_prints_the_binary_log() {
    let dir = tempfile::tempdir().unwrap();
    write_both(dir.path());
    let arch = dir.path().join("arch");
    let arch = arch.to_str().unwrap();
    let log = std::fs::read(dir.path().join("log.bin")).unwrap();
    let (from, to) = (ms(T0), ms(T0 + 4_000_000_000));
    for format in [Format::Json, Format::Text, Format::Csv] {
        let (code, out, err) = run(&[
            "--archive",
            arch,
            "--format",
            format.name(),
            "--between",
            &from,
            &to,
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(out == cat(&log, format), "{} differs", format.name());
    }
    let want = lines(&cat(&log, Format::Json));
    assert_eq!(want.len(), 4000);
    // Each record's TSC field in its own calibration's wall time (the
    // deletes' too: they carry their session's start ticks and were
    // written under the last calibration).
    for (i, line) in want.iter().enumerate() {
        let i = i as u64;
        let s = if i < 3000 { i } else { i - 3000 };
        let v = json_u64(line, "flowStartMilliseconds");
        assert_eq!(v, cal_of(i).to_ns(ticks(s)) / 1_000_000, "record {i}");
    }
    // By hand: session 1550 (3_720_008_234 ticks) under the second line
    // (tick 3_600_007_000 at T0 + 4.5 s, 2,400,000,007 Hz) starts
    // 4.550000514 s after T0.
    assert_eq!(
        json_u64(&want[1550], "flowStartMilliseconds"),
        1_767_225_604_550
    );
    // A window inside the third segment (its own calibration blocks: the
    // one in force at its start, the change at 2.777 s), and one across
    // the first change.
    for (a, b) in [(2_100u64, 2_900u64), (1_540, 1_560)] {
        let (code, out, err) = run(&[
            "--archive",
            arch,
            "--format",
            "json",
            "--between",
            &ms(T0 + a * 1_000_000),
            &ms(T0 + b * 1_000_000),
        ]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(lines(&out), want[a as usize..=b as usize], "{a}..={b}");
    }
    // Binary output: the calibrations go out as `C` frames again.
    let (code, out, err) = run(&[
        "--archive",
        arch,
        "--format",
        "binary",
        "--between",
        &from,
        &to,
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(lines(&cat(&out, Format::Json)), want);
}

#[test]
fn at_prints_a_live_sessions_tsc_start_in_wall_time() {
    let dir = tempfile::tempdir().unwrap();
    write_both(dir.path());
    let arch = dir.path().join("arch");
    let arch = arch.to_str().unwrap();
    let want = lines(&cat(
        &std::fs::read(dir.path().join("log.bin")).unwrap(),
        Format::Json,
    ));
    // Sessions created under each calibration; 500 is deleted at 3.5 s.
    for (s, at, live) in [
        (500u64, 3_400u64, true),
        (500, 3_501, false),
        (1_600, 3_900, true),
        (2_800, 3_900, true),
    ] {
        let addr = format!("postNATSourceIPv4Address=198.51.100.{}", s % 200);
        let port = format!("postNAPTSourceTransportPort={}", 1024 + s);
        let (code, out, err) = run(&[
            "--archive",
            arch,
            "--format",
            "json",
            "--at",
            &ms(T0 + at * 1_000_000),
            "--where",
            &addr,
            "--where",
            &port,
        ]);
        if !live {
            assert_eq!(code, 1, "session {s} at {at}: {err}");
            assert!(out.is_empty());
            continue;
        }
        assert_eq!(code, 0, "session {s} at {at}: {err}");
        assert_eq!(lines(&out), [want[s as usize].clone()], "session {s}");
        assert_eq!(
            json_u64(&want[s as usize], "flowStartMilliseconds"),
            cal_of(s).to_ns(ticks(s)) / 1_000_000
        );
    }
}

/// dplog-query has no time condition on a TSC field: `--where` on one
/// compares its raw ticks (as `:dec` prints them), and `--at` /
/// `--between` apply to the event time only.
#[test]
fn a_condition_on_a_tsc_field_compares_raw_ticks() {
    let dir = tempfile::tempdir().unwrap();
    write_both(dir.path());
    let arch = dir.path().join("arch");
    let arch = arch.to_str().unwrap();
    let (from, to) = (ms(T0), ms(T0 + 4_000_000_000));
    let by_ticks = format!("flowStartMilliseconds={}", ticks(1_600));
    let (code, out, err) = run(&[
        "--archive",
        arch,
        "--format",
        "json",
        "--between",
        &from,
        &to,
        "--where",
        &by_ticks,
    ]);
    assert_eq!(code, 0, "{err}");
    let got = lines(&out);
    assert_eq!(got.len(), 1);
    assert_eq!(
        json_u64(&got[0], "postNAPTSourceTransportPort"),
        1024 + 1_600
    );
    // Its printed (wall-time) value is not a tick count it has.
    let printed = format!(
        "flowStartMilliseconds={}",
        json_u64(&got[0], "flowStartMilliseconds")
    );
    let (code, out, _) = run(&[
        "--archive",
        arch,
        "--between",
        &from,
        &to,
        "--where",
        &printed,
    ]);
    assert_eq!(code, 1);
    assert!(out.is_empty());
}

/// A record type whose event time is TSC-typed: `--at` compares the time
/// given with raw ticks, so a wall time finds nothing, and stderr says
/// why, with the tick count the archive's last calibration gives for it;
/// `--at` with that count answers.
#[test]
fn a_wall_time_against_a_tsc_event_time_is_noted_with_its_tick_count() {
    let dir = tempfile::tempdir().unwrap();
    let s = schema()
        .with_event_time(Some("flowStartMilliseconds"))
        .unwrap();
    let opts = ArchiveSinkOptions {
        block_rows: 200,
        segment_interval_ms: Some(1000),
        ..Default::default()
    };
    tsc_archive::write_both(dir.path(), opts, &[&s], 4000, 300, |i, enc, batch| {
        assert!(enc.push(&rec(i), batch));
    });
    let arch = dir.path().join("arch");
    let arch = arch.to_str().unwrap();
    // Wall time T0 + 10 s by the last calibration (the third of CALS).
    let t = T0 + 10_000_000_000;
    let cal = tsc_archive::CALS[2].1;
    let want = cal.tsc0 + (t - cal.ns0) * cal.hz / 1_000_000_000;
    let (code, out, err) = run(&["--archive", arch, "--at", &ms(t)]);
    assert_eq!((code, out.is_empty()), (1, true), "{err}");
    assert!(
        err.contains(&format!(
            "the event time of tscSession is a TSC tick count, which --at compares the time \
             given with: by the archive's last calibration, {t} ns since the epoch is tick \
             {want} (--at {want}ns)"
        )),
        "{err}"
    );
    // Ticks of a session started and not closed (session 1600 opens at
    // its tick count; its delete is record 4600, past the stream).
    let at = format!("{}ns", ticks(1_600));
    let (code, out, err) = run(&["--archive", arch, "--at", &at, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("note:"), "{err}");
    assert!(!lines(&out).is_empty());
}
