//! `--where` on an enum field of a user-declared record whose names hold
//! spaces, `=`, a newline and a direction override: a name selects its
//! value's records as declared (not as the text format escapes it), a
//! number selects the same, and the error that lists the names shows
//! them escaped (no raw newline or U+202E reaches the terminal).

use std::borrow::Cow;
use std::process::Command;

use dplog_core::schema::{EnumName, FieldDef, FieldKind, Schema};
use dplog_formatters::binary::BinaryEncoder;

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

/// The `seq` of each JSON line.
fn seqs(out: &str) -> Vec<u32> {
    out.lines()
        .map(|l| {
            let at = l.find("\"seq\":").unwrap() + 6;
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
fn an_enum_name_selects_its_records_as_declared() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.bin");
    write_log(&log);
    let log = log.to_str().unwrap();
    for (v, name) in NAMES.iter().enumerate() {
        let want: Vec<u32> = (0..20).filter(|i| i % 5 == v as u32).collect();
        let w = format!("ev={name}");
        let (code, out, err) = cat(&["--format", "json", "--where", &w, log]);
        assert_eq!(code, 0, "{w:?}: {err}");
        assert_eq!(seqs(&out), want, "{w:?}");
        let w = format!("ev={v}");
        let (code, out, err) = cat(&["--format", "json", "--where", &w, log]);
        assert_eq!(code, 0, "{w:?}: {err}");
        assert_eq!(seqs(&out), want, "{w:?}");
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
