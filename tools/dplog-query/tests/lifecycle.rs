//! `--at` for any record type that declares a lifecycle: a load
//! balancer's connection record (`lbConn`: connEvent 1 opens, 2 closes, a
//! connection is its vip, vport, client address and client port, a close
//! alone carries the byte counters), not a NAT record. The lifecycle
//! travels in the archive's schema blocks; dplog-query knows no schema.

use std::path::Path;
use std::process::Command;

use dplog_core::Accepted;
use dplog_formatters::binary::BinaryEncoder;
use dplog_sinks::archive::{ArchiveSink, ArchiveSinkOptions};

#[path = "../../../testkit/fixtures/archive_books.rs"]
mod archive_books;
use archive_books::Books;
#[path = "../../../testkit/fixtures/lb_conn.rs"]
mod lb_conn;
use lb_conn::{Conn, CLOSE, OPEN, REJECT, T0};

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

const MS: u64 = 1_000_000;

/// A connection of client port `cport` to 192.0.2.10:443 from
/// 198.51.100.7, event `event` at T0 + `ms` ms, backend 10.0.0.`backend`.
fn conn(ms: u64, cport: u16, event: u8, backend: u8) -> Conn {
    let close = event == CLOSE;
    Conn {
        time_ns: T0 + ms * MS,
        vip: 0xC000_020A,
        vport: 443,
        client: 0xC633_6407,
        cport,
        event,
        backend: 0x0A00_0000 | u32::from(backend),
        bytes_in: if close { 1000 + u64::from(cport) } else { 0 },
        bytes_out: if close { 2000 } else { 0 },
    }
}

/// The records, in time order: connection 40002 opens and closes before
/// 3 s; 40000 opens at 1 s, is rejected once (not a state) and closes at
/// 5 s, then opens again at 5.5 s (backend 6); 40003 opens at 1 s and
/// closes at exactly 3 s; 40001 opens at 2 s and never closes.
fn records() -> Vec<Conn> {
    vec![
        conn(500, 40002, OPEN, 5),
        conn(1000, 40000, OPEN, 5),
        conn(1000, 40003, OPEN, 5),
        conn(1500, 40002, CLOSE, 5),
        conn(2000, 40001, OPEN, 5),
        conn(2500, 40000, REJECT, 5),
        conn(3000, 40003, CLOSE, 5),
        conn(5000, 40000, CLOSE, 5),
        conn(5500, 40000, OPEN, 6),
    ]
}

/// The records as an archive in `dir` written from binary frames of
/// `schema`, two records a block.
fn write_archive(dir: &Path, schema: &dplog_core::Schema) {
    let mut sink = ArchiveSink::open(
        dir,
        ArchiveSinkOptions {
            block_rows: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let mut enc = BinaryEncoder::try_new(&[schema]).unwrap();
    let mut batch = Vec::new();
    for r in records() {
        assert!(enc.push(&r.bytes(), &mut batch));
    }
    let mut books = Books::of(&sink);
    // Nine records: four whole blocks written (and polled), one held
    // until the close.
    assert_eq!(books.write(&mut sink, &batch), Accepted::Pending);
    assert_eq!((books.booked, books.close(&mut sink)), (8, 1));
}

/// `(clientPort, backendAddr, connEvent)` of each JSON answer.
fn answers(out: &str) -> Vec<(u64, String, String)> {
    out.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["clientPort"].as_u64().unwrap(),
                v["backendAddr"].as_str().unwrap().to_string(),
                v["connEvent"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn at(arch: &Path, ms: u64, conds: &[&str]) -> (i32, String, String) {
    let t = format!("{}ms", T0 / MS + ms);
    let mut args = vec![
        "--archive",
        arch.to_str().unwrap(),
        "--at",
        &t,
        "--format",
        "json",
    ];
    for c in conds {
        args.extend(["--where", c]);
    }
    run(&args)
}

#[test]
fn at_follows_a_user_declared_lifecycle() {
    let dir = tempfile::tempdir().unwrap();
    write_archive(dir.path(), &lb_conn::schema());
    let open = |port: u64, backend: &str| (port, backend.to_string(), "OPEN".to_string());
    // At 3 s: 40000 (open, its reject is no close), 40003 (closed at
    // exactly T: live at T) and 40001 (never closed); not 40002 (closed
    // before T). In the order written.
    let (code, out, err) = at(dir.path(), 3000, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        answers(&out),
        [
            open(40000, "10.0.0.5"),
            open(40003, "10.0.0.5"),
            open(40001, "10.0.0.5")
        ]
    );
    // At 6 s: 40001 still open, and 40000's second connection (its
    // first closed at 5 s).
    let (code, out, err) = at(dir.path(), 6000, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        answers(&out),
        [open(40001, "10.0.0.5"), open(40000, "10.0.0.6")]
    );
    // Conditions on the key: one connection.
    let (code, out, err) = at(
        dir.path(),
        3000,
        &["clientPort=40000", "vip=192.0.2.10", "vport=443"],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(answers(&out), [open(40000, "10.0.0.5")]);
    // Before any open, and between 40002's open and close.
    let (code, out, _) = at(dir.path(), 100, &[]);
    assert_eq!((code, out.as_str()), (1, ""));
    let (code, out, err) = at(dir.path(), 1200, &["clientPort=40002"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(answers(&out), [open(40002, "10.0.0.5")]);
}

/// The same records under the schema without its metadata (an archive
/// written before schemas carried a lifecycle): no record type is
/// stateful, so `--at` is an error that says so (exit 2), not an empty
/// answer; `--between` still finds the records.
#[test]
fn without_a_declared_lifecycle_at_says_so() {
    let dir = tempfile::tempdir().unwrap();
    write_archive(dir.path(), &lb_conn::fields_only());
    let (code, out, err) = at(dir.path(), 3000, &[]);
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert_eq!(
        err,
        format!(
            "dplog-query: --at: no record type in {} declares a lifecycle (lbConn: none says \
             which records open and close a state); declare one (docs/schema-metadata.md) or \
             use --between\n",
            dir.path().display()
        )
    );
    let from = format!("{}ms", T0 / MS);
    let to = format!("{}ms", T0 / MS + 6000);
    let (code, out, err) = run(&[
        "--archive",
        dir.path().to_str().unwrap(),
        "--between",
        &from,
        &to,
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), records().len());
}

/// Written without an `index` setting, the archive keys lbConn by its
/// lifecycle keys, each on its own: `--at` with every key field given,
/// or one of them, answers from the one block the index names (the
/// others are skipped unread); a condition on no key field reads every
/// block of the window.
#[test]
fn at_on_the_lifecycle_keys_uses_the_default_index() {
    let dir = tempfile::tempdir().unwrap();
    write_archive(dir.path(), &lb_conn::schema());
    let key = [
        "vip=192.0.2.10",
        "vport=443",
        "clientAddr=198.51.100.7",
        "clientPort=40001",
    ];
    let (code, out, err) = at(dir.path(), 3000, &key);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        answers(&out),
        [(40001, "10.0.0.5".to_string(), "OPEN".to_string())]
    );
    let query = |conds: &[&str]| {
        let q = dplog_query::Query {
            mode: dplog_query::Mode::At(T0 + 3000 * MS),
            conds: conds
                .iter()
                .map(|c| {
                    let (f, v) = c.split_once('=').unwrap();
                    (f.to_string(), v.to_string())
                })
                .collect(),
            lookback: dplog_query::Lookback::Default,
        };
        let mut found = Vec::new();
        let mut last = dplog_query::Progress::default();
        let o = dplog_query::run(
            dir.path(),
            &q,
            &mut |_, r, _| found.push(u16::from_ne_bytes([r[26], r[27]])),
            &mut |p| last = *p,
        )
        .unwrap();
        assert!(o.problems.is_empty());
        (found, last)
    };
    // 9 records, two a block: 5 blocks, 4 of them up to 3 s (the last
    // holds 5 s and 5.5 s). 40001's open is in one.
    let (found, p) = query(&key);
    assert_eq!(found, [40001]);
    assert_eq!((p.blocks_read, p.blocks_skipped), (1, 3));
    // One key field alone (each is indexed on its own): the same.
    let (found, p) = query(&["clientPort=40001"]);
    assert_eq!(found, [40001]);
    assert_eq!((p.blocks_read, p.blocks_skipped), (1, 3));
    // A field that is no key: every block of the window is read.
    let (found, p) = query(&["backendAddr=10.0.0.5"]);
    assert_eq!(found, [40000, 40003, 40001]);
    assert_eq!((p.blocks_read, p.blocks_skipped), (4, 0));
}
