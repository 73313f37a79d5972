//! A user's record type (`lbConn`, no schema package: dplog-cat links
//! none) printed from a binary log, an archive and an mmap segment with
//! the metadata its writer declared, which travels in the log: RFC 5424
//! exactly as the writer's own syslog formatter prints it (APP-NAME,
//! MSGID by value, SD-ID, parameters, enum names), and JSON with its
//! counters only on a close. A log written before the metadata travelled
//! (bytes of that code) still prints, with the default layout.

use std::path::Path;
use std::process::{Command, Output};

use dplog_core::{Accepted, Sink};
use dplog_formatters::binary::BinaryEncoder;
use dplog_formatters::{Format, FormatSpec, SyslogOptions};
use dplog_sinks::archive::{ArchiveSink, ArchiveSinkOptions};
use dplog_sinks::{MmapSink, MmapSinkOptions};

#[path = "../../../testkit/fixtures/archive_books.rs"]
mod archive_books;
use archive_books::Books;
#[path = "../../../testkit/fixtures/lb_conn.rs"]
mod lb_conn;

fn cat(args: &[&str], input: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dplog-cat"))
        .args(args)
        .arg(input)
        .output()
        .unwrap()
}

fn stdout(o: Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// What `schema`'s own formatter in `format` prints for the fixture's
/// records, PROCID `P` (syslog; a formatter's default is its process id).
fn writer_prints(schema: &dplog_core::Schema, format: Format) -> String {
    let mut enc = FormatSpec {
        kind: format,
        syslog: SyslogOptions {
            procid: Some("P".into()),
            ..Default::default()
        },
        ..Default::default()
    }
    .encoder(&[schema])
    .unwrap();
    let mut out = Vec::new();
    for r in lb_conn::old_log_records() {
        assert!(enc.push(&r.bytes(), &mut out));
    }
    String::from_utf8(out).unwrap()
}

/// RFC 5424 lines with their PROCID (the fifth header field) set to `P`.
fn procid_p(s: &str) -> String {
    s.lines()
        .map(|l| {
            let mut f: Vec<&str> = l.splitn(6, ' ').collect();
            f[4] = "P";
            f.join(" ") + "\n"
        })
        .collect()
}

/// The fixture's records of `schema` as a binary log, an archive and an
/// mmap segment directory in `dir`.
fn write_all(dir: &Path, schema: &dplog_core::Schema) {
    let mut enc = BinaryEncoder::try_new(&[schema]).unwrap();
    let mut log = Vec::new();
    for r in lb_conn::old_log_records() {
        assert!(enc.push(&r.bytes(), &mut log));
    }
    write_containers(dir, &log);
}

fn write_containers(dir: &Path, log: &[u8]) {
    std::fs::write(dir.join("log.bin"), log).unwrap();
    std::fs::create_dir(dir.join("arch")).unwrap();
    let mut a = ArchiveSink::open(&dir.join("arch"), ArchiveSinkOptions::default()).unwrap();
    let mut books = Books::of(&a);
    // A few records of a block of 16384 rows: written by the close.
    assert_eq!(books.write(&mut a, log), Accepted::Pending);
    assert_eq!(books.close(&mut a), books.taken);
    assert!(books.taken > 0);
    std::fs::create_dir(dir.join("mm")).unwrap();
    let mut m = MmapSink::open(
        dir.join("mm"),
        MmapSinkOptions {
            segment_bytes: 64 * 1024,
            msync_interval_ms: None,
            prefix: "lb".into(),
            header: None,
            seal: None,
        },
    )
    .unwrap();
    assert_eq!(m.write_batch(log).unwrap(), Accepted::Delivered);
    m.close().unwrap();
}

fn inputs(dir: &Path) -> [std::path::PathBuf; 3] {
    [
        dir.join("log.bin"),
        dir.join("arch"),
        dir.join("mm").join("lb-0000000000.dpm"),
    ]
}

#[test]
fn a_user_schemas_syslog_layout_travels_with_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let s = lb_conn::schema();
    write_all(dir.path(), &s);
    let want = writer_prints(&s, Format::Rfc5424);
    // The writer's layout, not the default one (APP-NAME dplog, MSGID
    // lbConn, every field under its name).
    let first = want.lines().next().unwrap();
    assert!(
        first.contains(
            " lb P CONNOPEN [conn@32473 vip=\"192.0.2.10\" vport=\"443\" client=\"198.51.100.7\" \
             cport=\"40000\" in=\"0\" v=\"1\"]"
        ),
        "{first}"
    );
    assert_eq!(want.lines().count(), 3);
    for input in inputs(dir.path()) {
        let got = stdout(cat(&["--format", "rfc5424"], &input));
        assert_eq!(procid_p(&got), want, "{}", input.display());
    }
    // JSON: enum names, the counters only on a close (the writer's
    // fields-only-when), as the writer prints it.
    let want = writer_prints(&s, Format::Json);
    assert!(want
        .lines()
        .next()
        .unwrap()
        .contains("\"connEvent\":\"OPEN\""));
    assert!(!want.lines().next().unwrap().contains("bytesIn"));
    assert!(want.lines().nth(2).unwrap().contains("\"bytesIn\":1000"));
    for input in inputs(dir.path()) {
        assert_eq!(stdout(cat(&["--format", "json"], &input)), want);
    }
}

#[test]
fn a_log_written_before_metadata_travelled_prints_with_the_default_layout() {
    let dir = tempfile::tempdir().unwrap();
    write_containers(dir.path(), &lb_conn::old_binary_log());
    let want = writer_prints(&lb_conn::fields_only(), Format::Rfc5424);
    let first = want.lines().next().unwrap();
    assert!(first.contains(" dplog P lbConn [lbConn@32473 "), "{first}");
    for input in inputs(dir.path()) {
        let got = stdout(cat(&["--format", "rfc5424"], &input));
        assert_eq!(procid_p(&got), want, "{}", input.display());
    }
}
