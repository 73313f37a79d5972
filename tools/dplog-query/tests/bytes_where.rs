//! `--where` on a BYTES field of a user-declared record (`dnsQuery`,
//! 40-byte NUL-padded `qname`): a value is the field's bytes up to its
//! first NUL, so a short name matches, as `dplog-cat --where` on the same
//! log (the fixture's [`dns_query::matching`], which `dplog-cat`'s test
//! checks too); a value longer than the field is a clear error.

use std::process::Command;

use dplog_core::Accepted;
use dplog_sinks::archive::{ArchiveSink, ArchiveSinkOptions};

#[path = "../../../testkit/fixtures/archive_books.rs"]
mod archive_books;
use archive_books::Books;
#[path = "../../../testkit/fixtures/dns_query.rs"]
mod dns_query;
use dns_query::{FULL, N, STALE_TAIL, T0};

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-query"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The `qtype` of each JSON line (the record number).
fn qtypes(out: &str) -> Vec<u64> {
    out.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["qtype"].as_u64().unwrap()
        })
        .collect()
}

#[test]
fn a_bytes_value_is_its_bytes_up_to_the_first_nul() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.bin");
    dns_query::write_log(&log);
    // The log imported (default index, which this record lacks), and the
    // same records through an archive sink indexed on qname: the index
    // must not prune a block holding a match.
    let plain = dir.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let (code, _, err) = run(&[
        "import",
        "--archive",
        plain.to_str().unwrap(),
        "--block-rows",
        "50",
        log.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(&format!("imported {N} records")), "{err}");
    let indexed = dir.path().join("indexed");
    std::fs::create_dir(&indexed).unwrap();
    let mut sink = ArchiveSink::open(
        &indexed,
        ArchiveSinkOptions {
            index: vec!["qname".into()],
            block_rows: 50,
            ..Default::default()
        },
    )
    .unwrap();
    let mut books = Books::of(&sink);
    // N records in whole blocks of 50: all written as the batch is taken.
    assert_eq!(
        books.write(&mut sink, &std::fs::read(&log).unwrap()),
        Accepted::Delivered
    );
    assert_eq!((books.taken, books.close(&mut sink)), (N, 0));
    for (name, arch) in [("plain", &plain), ("indexed", &indexed)] {
        let from = format!("{}ms", T0 / 1_000_000);
        let to = format!("{}ms", T0 / 1_000_000 + N);
        for value in ["ab", "abc", "example.org", FULL] {
            let w = format!("qname={value}");
            let (code, out, err) = run(&[
                "--archive",
                arch.to_str().unwrap(),
                "--format",
                "json",
                "--between",
                &from,
                &to,
                "--where",
                &w,
            ]);
            let want = dns_query::matching(value.as_bytes());
            assert!(!want.is_empty());
            assert_eq!(code, 0, "{name} {w}: {err}");
            assert_eq!(qtypes(&out), want, "{name} {w}");
        }
        // "ab" is 2 of every 5 records (one with stale bytes after its NUL)
        // and the last block.
        assert_eq!(
            dns_query::matching(b"ab").len() as u64,
            (N - STALE_TAIL) / 5 * 2 + STALE_TAIL
        );
        // A prefix of a value is not the value; nothing matches.
        let (code, out, _) = run(&[
            "--archive",
            arch.to_str().unwrap(),
            "--between",
            &from,
            &to,
            "--where",
            "qname=a",
        ]);
        assert_eq!((code, out.as_str()), (1, ""));
        // Longer than the field: no record can hold it, a clear error.
        let long = format!("qname={FULL}x");
        let (code, out, err) = run(&[
            "--archive",
            arch.to_str().unwrap(),
            "--between",
            &from,
            &to,
            "--where",
            &long,
        ]);
        assert_eq!((code, out.as_str()), (2, ""), "{err}");
        assert!(err.contains("longer than the field's 40 bytes"), "{err}");
    }
}

/// `--time-precision` and `--bytes` render the answer as `[format]
/// time_precision` and `bytes` would: the exact ns of each query time and
/// every byte of `qname` in hex, stale bytes after its NUL included.
#[test]
fn time_precision_and_bytes_apply_to_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.bin");
    dns_query::write_log(&log);
    let arch = dir.path().join("arch");
    std::fs::create_dir(&arch).unwrap();
    let (code, _, err) = run(&[
        "import",
        "--archive",
        arch.to_str().unwrap(),
        log.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let from = format!("{}ms", T0 / 1_000_000);
    let to = format!("{}ms", T0 / 1_000_000 + N);
    let (code, out, err) = run(&[
        "--archive",
        arch.to_str().unwrap(),
        "--format",
        "json",
        "--time-precision",
        "ns",
        "--bytes",
        "hex",
        "--between",
        &from,
        &to,
    ]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len() as u64, N);
    for l in lines {
        let i = qtypes(l)[0];
        let hex: String = dns_query::qname_field(i)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert!(
            l.contains(&format!("\"queryTime\":{},", T0 + i * 1_000_000)),
            "{l}"
        );
        assert!(l.contains(&format!("\"qname\":\"{hex}\"")), "{l}");
    }
    let (code, _, err) = run(&[
        "--archive",
        arch.to_str().unwrap(),
        "--bytes",
        "b32",
        "--between",
        &from,
        &to,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("text, hex, base64") || err.contains("b32"),
        "{err}"
    );
}
