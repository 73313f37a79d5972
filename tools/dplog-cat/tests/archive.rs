//! `dplog-cat DIR` on an archive: the same output as the binary log of
//! the same records, the same selection, and damage named with the rest
//! printed.

use std::path::Path;
use std::process::{Command, Output};

use dplog_core::schema::{FieldDef, FieldKind, Schema};
use dplog_core::Sink;
use dplog_formatters::binary::BinaryEncoder;
use dplog_sinks::archive::format::KIND_DATA;
use dplog_sinks::archive::{list_segments, ArchiveSink, ArchiveSinkOptions, Segment};

const T0: u64 = 1_767_225_600_000_000_000;

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
    assert_eq!(o.status.code(), Some(2), "{err}");
    let name = segs[1].path.file_name().unwrap().to_string_lossy();
    assert!(err.contains(&*name), "{err}");
    assert!(err.contains(&format!("block {bad}")), "{err}");
    assert_eq!(
        o.stdout.iter().filter(|&&c| c == b'\n').count(),
        3000 - rows
    );
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
