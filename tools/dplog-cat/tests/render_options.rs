//! `--time-precision` and `--bytes` (the `[format] time_precision` and
//! `bytes` settings for a log being decoded) on a user-declared record
//! (`dnsQuery`: ns query time, 40-byte NUL-padded `qname`), in JSON read
//! back by the test: the exact ns of each record's time and every byte of
//! its `qname`, stale bytes after the NUL included.

use std::process::Command;

#[path = "../../../testkit/fixtures/dns_query.rs"]
mod dns_query;
use dns_query::{N, T0};

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
