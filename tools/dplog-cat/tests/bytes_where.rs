//! `--where` on a BYTES field of a user-declared record (`dnsQuery`,
//! 40-byte NUL-padded `qname`): a value is the field's bytes up to its
//! first NUL, compared as given (not as the text format escapes it), so
//! `dplog-cat` selects the records of the fixture's
//! [`dns_query::matching`], which `dplog-query`'s test checks too; a value
//! longer than the field is a clear error. And `--time-precision` and
//! `--bytes` (the `[format] time_precision` and `bytes` settings for a log
//! being decoded): the exact ns of each record's time and every byte of
//! its `qname`, stale bytes after the NUL included. And `--where` on an
//! enum field whose names hold spaces, `=`, a newline and a direction
//! override: a name selects its value's records as declared, and the
//! error that lists the names shows them escaped.

use std::borrow::Cow;
use std::process::Command;

use dplog_core::schema::{EnumName, FieldDef, FieldKind, Schema};
use dplog_core::Accepted;
use dplog_formatters::binary::BinaryEncoder;
use dplog_sinks::archive::{ArchiveSink, ArchiveSinkOptions};

#[path = "../../../testkit/fixtures/archive_books.rs"]
mod archive_books;
use archive_books::Books;
#[path = "../../../testkit/fixtures/dns_query.rs"]
mod dns_query;
use dns_query::{FULL, N, STALE_TAIL, T0};

fn cat(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The `qtype` (record number) of each JSON line.
fn qtypes(out: &str) -> Vec<u64> {
    numbers(out, "qtype")
}

/// The number of JSON field `key` of each line.
fn numbers(out: &str, key: &str) -> Vec<u64> {
    let key = format!("\"{key}\":");
    out.lines()
        .map(|l| {
            let at = l.find(&key).unwrap() + key.len();
            l[at..]
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect()
}

#[test]
fn a_bytes_value_is_its_bytes_up_to_the_first_nul() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.bin");
    dns_query::write_log(&log);
    let log = log.to_str().unwrap();
    assert_eq!(
        dns_query::matching(b"ab").len() as u64,
        (N - STALE_TAIL) / 5 * 2 + STALE_TAIL
    );
    // The same records as an archive indexed on qname.
    let arch = dir.path().join("arch");
    std::fs::create_dir(&arch).unwrap();
    let mut sink = ArchiveSink::open(
        &arch,
        ArchiveSinkOptions {
            index: vec!["qname".into()],
            block_rows: 50,
            ..Default::default()
        },
    )
    .unwrap();
    let bytes = std::fs::read(log).unwrap();
    let mut books = Books::of(&sink);
    // N records in whole blocks of 50: all written as the batch is taken.
    assert_eq!(books.write(&mut sink, &bytes), Accepted::Delivered);
    assert_eq!((books.taken, books.close(&mut sink)), (N, 0));
    for input in [log, arch.to_str().unwrap()] {
        for value in ["ab", "abc", "example.org", FULL] {
            let w = format!("qname={value}");
            let (code, out, err) = cat(&["--format", "json", "--where", &w, input]);
            assert_eq!(code, 0, "{input} {w}: {err}");
            let want = dns_query::matching(value.as_bytes());
            assert_eq!(qtypes(&out), want, "{input} {w}");
        }
    }
    // A prefix of a value is not the value.
    let (code, out, err) = cat(&["--where", "qname=a", log]);
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    // Longer than the field: no record can hold it, a clear error.
    let long = format!("qname={FULL}x");
    let (code, out, err) = cat(&["--where", &long, log]);
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(err.contains("longer than the field's 40 bytes"), "{err}");
}

#[test]
fn a_bytes_value_with_a_space_is_given_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let s = dns_query::schema();
    let mut enc = dplog_formatters::BinaryEncoder::new(&[&s]);
    let mut out = Vec::new();
    for (i, name) in [&b"a b"[..], b"a\\x20b"].iter().enumerate() {
        let mut r = dns_query::rec(i as u64);
        r[16..56].fill(0);
        r[16..16 + name.len()].copy_from_slice(name);
        assert!(enc.push(&r, &mut out));
    }
    let log = dir.path().join("space.bin");
    std::fs::write(&log, out).unwrap();
    let log = log.to_str().unwrap();
    let (code, out, err) = cat(&["--format", "json", "--where", "qname=a b", log]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(qtypes(&out), [0]);
    let (code, out, err) = cat(&["--format", "json", "--where", "qname=a\\x20b", log]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(qtypes(&out), [1]);
}

/// The JSON string or number after `"key":` in `line`.
fn value<'a>(line: &'a str, key: &str) -> &'a str {
    let at = line.find(&format!("\"{key}\":")).unwrap() + key.len() + 3;
    let rest = &line[at..];
    if let Some(s) = rest.strip_prefix('"') {
        &s[..s.find('"').unwrap()]
    } else {
        &rest[..rest.find([',', '}']).unwrap()]
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn time_precision_and_bytes_apply_to_the_decoded_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.bin");
    dns_query::write_log(&log);
    let log = log.to_str().unwrap();
    let (code, out, err) = cat(&[
        "--format",
        "json",
        "--time-precision",
        "ns",
        "--bytes",
        "hex",
        log,
    ]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len() as u64, N);
    for (i, l) in lines.iter().enumerate() {
        let i = i as u64;
        assert_eq!(
            value(l, "queryTime"),
            (T0 + i * 1_000_000).to_string(),
            "{l}"
        );
        assert_eq!(value(l, "qname"), hex(&dns_query::qname_field(i)), "{l}");
    }
    // Seconds and base64 (checked on the first record: `qname` of record
    // 0, all 40 bytes).
    let (code, out, err) = cat(&[
        "--format",
        "json",
        "--time-precision",
        "s",
        "--bytes",
        "base64",
        log,
    ]);
    assert_eq!(code, 0, "{err}");
    let first = out.lines().next().unwrap();
    assert_eq!(value(first, "queryTime"), (T0 / 1_000_000_000).to_string());
    let want = {
        use std::io::Write;
        let mut p = std::process::Command::new("base64")
            .arg("-w0")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        p.stdin
            .take()
            .unwrap()
            .write_all(&dns_query::qname_field(0))
            .unwrap();
        String::from_utf8(p.wait_with_output().unwrap().stdout).unwrap()
    };
    assert_eq!(value(first, "qname"), want);
    // A bad value is a usage error (exit 2) that lists the good ones.
    let (code, _, err) = cat(&["--time-precision", "min", log]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("known: s, ms, us, ns"), "{err}");
    let (code, _, err) = cat(&["--bytes", "b32", log]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("b32"), "{err}");
}

const NAMES: [&str; 5] = ["ok", "bad\nname", "sp ace=x", "=1+2", "q\"u,o\u{202e}te"];

fn schema() -> Schema {
    let mut ev = FieldDef::new("ev", 16, 1, FieldKind::Enum, 0);
    ev.enum_names = NAMES
        .iter()
        .enumerate()
        .map(|(i, n)| EnumName {
            value: i as u32,
            name: Cow::Owned(n.to_string()),
        })
        .collect();
    Schema::new(
        402,
        "probeEvent",
        24,
        vec![
            FieldDef::new("time", 8, 8, FieldKind::NsTimestamp, 0),
            ev,
            FieldDef::new("seq", 20, 4, FieldKind::U32, 0),
        ],
    )
    .unwrap()
}

/// Records 0..20, record `i` of event `i % 5`.
fn write_log(path: &std::path::Path) {
    let s = schema();
    let mut enc = BinaryEncoder::new(&[&s]);
    let mut out = Vec::new();
    for i in 0..20u32 {
        let mut r = vec![0u8; 24];
        r[0..2].copy_from_slice(&24u16.to_ne_bytes());
        r[2..4].copy_from_slice(&402u16.to_ne_bytes());
        r[8..16].copy_from_slice(&(1_767_225_600_000_000_000u64 + u64::from(i)).to_ne_bytes());
        r[16] = (i % 5) as u8;
        r[20..24].copy_from_slice(&i.to_ne_bytes());
        assert!(enc.push(&r, &mut out));
    }
    std::fs::write(path, out).unwrap();
}

#[test]
fn an_enum_name_selects_its_records_as_declared() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.bin");
    write_log(&log);
    let log = log.to_str().unwrap();
    for (v, name) in NAMES.iter().enumerate() {
        let want: Vec<u64> = (0..20).filter(|i| i % 5 == v as u64).collect();
        let w = format!("ev={name}");
        let (code, out, err) = cat(&["--format", "json", "--where", &w, log]);
        assert_eq!(code, 0, "{w:?}: {err}");
        assert_eq!(numbers(&out, "seq"), want, "{w:?}");
        let w = format!("ev={v}");
        let (code, out, err) = cat(&["--format", "json", "--where", &w, log]);
        assert_eq!(code, 0, "{w:?}: {err}");
        assert_eq!(numbers(&out, "seq"), want, "{w:?}");
    }
}

#[test]
fn the_names_an_error_lists_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.bin");
    write_log(&log);
    let (code, out, err) = cat(&["--where", "ev=nosuch", log.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(out.is_empty());
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(!err.contains('\u{202e}'), "{err:?}");
    assert!(
        err.contains(r#"ok, "bad\nname", "sp ace=x", =1+2, "q\"u,o\u{202e}te""#),
        "{err:?}"
    );
}
