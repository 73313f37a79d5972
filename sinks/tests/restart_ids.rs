//! A program restarted with its record types registered in another order
//! (so their schema ids, and the columns of its CSV header, change)
//! writes to the path or directory the first run wrote: every row of both
//! runs must stay under the header of its own run. The file sink moves the
//! old file aside (its rotation naming); the mmap sink starts a new
//! segment. An IPFIX file appended the same way re-sends its templates
//! before the second run's first data record.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dplog_core::schema::Schema;
use dplog_core::Sink;
use dplog_formatters::{Format, FormatSpec, SchemaFormatter};
use dplog_sinks::{
    ArchiveReader, ArchiveSink, ArchiveSinkOptions, FileSink, FileSinkOptions, MmapSink,
    MmapSinkOptions,
};

#[path = "../../testkit/fixtures/swapped_ids.rs"]
mod swapped_ids;
use swapped_ids::{fw_drop, lb_conn};

/// 2026-01-01T00:00:00Z in ns since the Unix epoch.
const T0: u64 = 1_767_225_600_000_000_000;
/// Records of each type per run.
const N: u64 = 10;

/// Run `run`'s schemas in registration order: fwDrop first (ids 256,
/// 257) in run 0, lbConn first (ids swapped) in run 1.
fn run_schemas(run: u64) -> Vec<Schema> {
    if run == 0 {
        vec![fw_drop(256), lb_conn(257)]
    } else {
        vec![lb_conn(256), fw_drop(257)]
    }
}

/// Run `run`'s records: `N` of each type, interleaved.
fn run_records(run: u64) -> Vec<Vec<u8>> {
    let s = run_schemas(run);
    let id = |name: &str| s.iter().find(|k| k.name() == name).unwrap().id();
    let head = |size: usize, id: u16| {
        let mut r = vec![0u8; size];
        r[0..2].copy_from_slice(&(size as u16).to_ne_bytes());
        r[2..4].copy_from_slice(&id.to_ne_bytes());
        r
    };
    let mut out = Vec::new();
    for i in 0..N {
        let t = T0 + run * 1_000_000_000 + i * 1_000;
        let mut r = head(40, id("fwDrop"));
        r[8..16].copy_from_slice(&t.to_ne_bytes());
        r[16..20].copy_from_slice(&((1000 * run + i) as u32).to_ne_bytes());
        r[20..22].copy_from_slice(&(40000 + i as u16).to_ne_bytes());
        let name = format!("eth{run}-{i}");
        r[24..24 + name.len()].copy_from_slice(name.as_bytes());
        out.push(r);
        let mut r = head(32, id("lbConn"));
        r[8..16].copy_from_slice(&(t + 1).to_ne_bytes());
        r[16..24].copy_from_slice(&(10_000 * run + i).to_ne_bytes());
        r[24..26].copy_from_slice(&(80 + i as u16).to_ne_bytes());
        out.push(r);
    }
    out
}

fn spec(kind: Format) -> FormatSpec {
    FormatSpec {
        kind,
        ..Default::default()
    }
}

/// Run `run`'s formatter and file header in format `kind`.
fn run_formatter(run: u64, kind: Format) -> (SchemaFormatter, Option<Vec<u8>>) {
    let s = run_schemas(run);
    let refs: Vec<&Schema> = s.iter().collect();
    (
        spec(kind).formatter(&refs).unwrap(),
        spec(kind).file_header(&refs),
    )
}

/// Writes run `run` through `sink`, in batches of 4 records as a consumer
/// would.
fn write_run(run: u64, sink: &mut dyn Sink, f: &mut SchemaFormatter) {
    for chunk in run_records(run).chunks(4) {
        let mut batch = Vec::new();
        for r in chunk {
            assert!(f.push_bytes(r, &mut batch));
        }
        sink.write_batch(&batch).unwrap();
    }
}

/// Every record of both runs as [`rows`] gives it, with its count (1).
fn expected() -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for run in 0..2 {
        for i in 0..N {
            *m.entry(format!(
                "fwDrop ifName={} ruleId={} srcPort={}",
                format_args!("eth{run}-{i}"),
                1000 * run + i,
                40000 + i
            ))
            .or_default() += 1;
            *m.entry(format!(
                "lbConn bytesIn={} vport={}",
                10_000 * run + i,
                80 + i
            ))
            .or_default() += 1;
        }
    }
    m
}

/// The rows of CSV logs `texts` (each starting with its header), read by
/// column name as a CSV reader would, in the shape of [`expected`]. A row
/// whose type's columns are not where its header says gets another key.
fn rows(texts: &[String]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for text in texts {
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().expect("a header").split(',').collect();
        assert_eq!(header[0], "recordType", "{text}");
        for line in lines {
            // No value of these records holds a comma or a quote.
            let cells: Vec<&str> = line.split(',').collect();
            assert_eq!(cells.len(), header.len(), "{line}");
            let get = |name: &str| {
                header
                    .iter()
                    .position(|c| *c == name)
                    .map_or("?", |i| cells[i])
            };
            let key = match get("recordType") {
                "fwDrop" => format!(
                    "fwDrop ifName={} ruleId={} srcPort={}",
                    get("ifName"),
                    get("ruleId"),
                    get("srcPort")
                ),
                "lbConn" => format!("lbConn bytesIn={} vport={}", get("bytesIn"), get("vport")),
                t => format!("{t}: {line}"),
            };
            *m.entry(key).or_default() += 1;
        }
    }
    m
}

/// `path` and its rotated files, oldest first, read whole.
fn file_and_rotated(path: &Path) -> Vec<String> {
    let mut files: Vec<PathBuf> = dplog_sinks::file::rotated_files(path).unwrap();
    files.push(path.to_path_buf());
    files
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}

#[test]
fn a_csv_file_under_another_runs_header_is_moved_aside_and_every_row_keeps_its_columns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.csv");
    let mut headers = Vec::new();
    let mut moved = Vec::new();
    for run in 0..2 {
        let (mut f, header) = run_formatter(run, Format::Csv);
        headers.push(header.clone().unwrap());
        let mut sink = FileSink::with_options(
            &path,
            FileSinkOptions {
                header,
                ..Default::default()
            },
        )
        .unwrap();
        write_run(run, &mut sink, &mut f);
        moved.push(dplog_sinks::FileSinkCounters::get(
            &sink.counters().header_changed,
        ));
        sink.close().unwrap();
    }
    assert_ne!(headers[0], headers[1], "the runs' columns differ");
    let texts = file_and_rotated(&path);
    assert_eq!(rows(&texts), expected());
    assert_eq!(texts.len(), 2, "the first run's file moved aside");
    for (t, h) in texts.iter().zip(&headers) {
        assert!(t.as_bytes().starts_with(h), "{t}");
    }
    assert_eq!(moved, [0, 1]);

    // A third run with the second run's table appends to its file.
    let (mut f, header) = run_formatter(1, Format::Csv);
    let mut sink = FileSink::with_options(
        &path,
        FileSinkOptions {
            header,
            ..Default::default()
        },
    )
    .unwrap();
    write_run(1, &mut sink, &mut f);
    assert_eq!(
        dplog_sinks::FileSinkCounters::get(&sink.counters().header_changed),
        0
    );
    sink.close().unwrap();
    let texts = file_and_rotated(&path);
    assert_eq!(texts.len(), 2);
    assert_eq!(
        texts[1]
            .lines()
            .filter(|l| l.starts_with("recordType,"))
            .count(),
        1,
        "one header"
    );
    assert_eq!(texts[1].lines().count(), 1 + 2 * 2 * N as usize);
}

#[test]
fn an_mmap_csv_segment_under_another_runs_header_is_not_continued() {
    let dir = tempfile::tempdir().unwrap();
    let mut changed = Vec::new();
    for run in 0..2 {
        let (mut f, header) = run_formatter(run, Format::Csv);
        let mut sink = MmapSink::open(
            dir.path(),
            MmapSinkOptions {
                segment_bytes: 64 * 1024,
                msync_interval_ms: None,
                prefix: "fw".into(),
                header,
                seal: None,
            },
        )
        .unwrap();
        changed.push(sink.recovery().header_changed);
        write_run(run, &mut sink, &mut f);
        sink.close().unwrap();
    }
    let segs = dplog_sinks::mmap::list_segments(dir.path(), "fw").unwrap();
    let texts: Vec<String> = segs
        .iter()
        .map(|(_, p)| {
            String::from_utf8(dplog_sinks::mmap::reader::read_segment(p).unwrap()).unwrap()
        })
        .collect();
    assert_eq!(rows(&texts), expected());
    assert_eq!(segs.len(), 2, "the second run in a segment of its own");
    assert_eq!(changed, [false, true]);
}

/// The IPFIX messages of `b` (RFC 7011 section 3): for each data set,
/// its byte offset in `b`, its set id (the template id), and the offset
/// and record length of the template that defined that id last before
/// it.
fn ipfix_data_sets(b: &[u8]) -> Vec<(usize, u16, usize, usize)> {
    let be16 = |p: usize| u16::from_be_bytes([b[p], b[p + 1]]) as usize;
    let mut templates: BTreeMap<u16, (usize, usize)> = BTreeMap::new();
    let mut sets = Vec::new();
    let mut m = 0;
    while m < b.len() {
        assert_eq!(be16(m), 10, "an IPFIX message header at byte {m}");
        let end = m + be16(m + 2);
        let mut p = m + 16;
        while p < end {
            let (id, len) = (be16(p) as u16, be16(p + 2));
            if id == 2 {
                // Template records: id, field count, field specifiers.
                let mut t = p + 4;
                while t + 4 <= p + len {
                    let (tid, n) = (be16(t) as u16, be16(t + 2));
                    let mut f = t + 4;
                    let mut rec = 0;
                    for _ in 0..n {
                        let (ie, flen) = (be16(f), be16(f + 2));
                        assert_ne!(flen, 0xffff, "fixed-length fields only");
                        rec += flen;
                        f += if ie & 0x8000 != 0 { 8 } else { 4 };
                    }
                    templates.insert(tid, (t, rec));
                    t = f;
                }
            } else if id >= 256 {
                let (at, rec) = *templates
                    .get(&id)
                    .unwrap_or_else(|| panic!("data set {id} at byte {p} before any template"));
                assert_eq!((len - 4) % rec, 0, "data set {id} at byte {p}");
                sets.push((p, id, at, rec));
            }
            p += len;
        }
        m = end;
    }
    sets
}

#[test]
fn an_ipfix_file_appended_by_a_run_with_swapped_ids_redefines_its_templates_before_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.ipfix");
    let mut starts = Vec::new();
    for run in 0..2 {
        starts.push(std::fs::metadata(&path).map_or(0, |m| m.len() as usize));
        let (mut f, header) = run_formatter(run, Format::Ipfix);
        assert!(header.is_none());
        let mut sink = FileSink::open(&path).unwrap();
        write_run(run, &mut sink, &mut f);
        sink.close().unwrap();
    }
    let b = std::fs::read(&path).unwrap();
    let sets = ipfix_data_sets(&b);
    // Every data set is read with a template its own run sent: the
    // second run's (ids swapped) redefine 256 and 257 before its data.
    // A data record's length in IPFIX: fwDrop 8 + 4 + 2 + 16 bytes,
    // lbConn 8 + 8 + 2.
    let ipfix_len = |run: u64, id: u16| match run_schemas(run).iter().find(|s| s.id() == id) {
        Some(s) if s.name() == "fwDrop" => 30,
        Some(_) => 18,
        None => panic!("no schema {id} in run {run}"),
    };
    let mut per_run = [0usize; 2];
    for (at, id, template_at, rec) in sets {
        let run = usize::from(at >= starts[1]);
        assert!(
            template_at >= starts[run],
            "data set {id} at byte {at} (run {run}) read with the template at byte {template_at}"
        );
        assert_eq!(rec, ipfix_len(run as u64, id), "data set {id} at byte {at}");
        per_run[run] += 1;
    }
    assert!(per_run[0] > 0 && per_run[1] > 0, "{per_run:?}");
}

#[test]
fn a_sealed_csv_file_moved_aside_for_another_header_still_verifies_with_its_seal() {
    use dplog_sinks::{seal, verify};
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = (dir.path().join("seal.key"), dir.path().join("seal.pub"));
    let vk = seal::generate_key_pair(&key, &public).unwrap();
    let path = dir.path().join("out.csv");
    for run in 0..2 {
        let (mut f, header) = run_formatter(run, Format::Csv);
        let mut sink = FileSink::with_options(
            &path,
            FileSinkOptions {
                header,
                seal: Some(seal::SealOptions {
                    key_file: key.clone(),
                    sign_every: None,
                    hasher: seal::HasherMode::for_this_machine(),
                    hasher_cpu: None,
                }),
                ..Default::default()
            },
        )
        .unwrap();
        write_run(run, &mut sink, &mut f);
        sink.close().unwrap();
    }
    let files = verify::set_of(&path).unwrap();
    assert_eq!(files.len(), 2, "{files:?}");
    let r = verify::verify_files(&files, &[vk]).unwrap();
    assert_eq!(r.finding, None, "{:?}", r.notes);
    assert_eq!(rows(&file_and_rotated(&path)), expected());
}

/// Both runs' binary streams in one batch into one archive sink (as an
/// importer, or a daemon draining two programs into one archive, hands
/// them over): the second run's declarations give ids 256 and 257 other
/// layouts while the first run's blocks are still queued. Each block is
/// declared in its segment with the table of its own run, so every
/// record reads back under its own schema, none skipped.
#[test]
fn an_archive_sink_given_both_runs_in_one_batch_declares_each_block_with_its_own_runs_table() {
    let dir = tempfile::tempdir().unwrap();
    let mut sink = ArchiveSink::open(dir.path(), ArchiveSinkOptions::default()).unwrap();
    let mut batch = Vec::new();
    for run in 0..2 {
        let (mut f, header) = run_formatter(run, Format::Binary);
        batch.extend_from_slice(&header.unwrap_or_default());
        for r in run_records(run) {
            assert!(f.push_bytes(&r, &mut batch));
        }
    }
    sink.write_batch(&batch).unwrap();
    sink.close().unwrap();
    let mut reader = ArchiveReader::open(dir.path()).unwrap();
    let mut got: BTreeMap<String, usize> = BTreeMap::new();
    let u = |r: &[u8], at: usize, n: usize| {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&r[at..at + n]);
        u64::from_ne_bytes(b)
    };
    reader
        .for_each(0, u64::MAX, |s, rec| {
            let row = match s.name() {
                "fwDrop" => {
                    let name = &rec[24..40];
                    let end = name.iter().position(|&b| b == 0).unwrap_or(16);
                    format!(
                        "fwDrop ifName={} ruleId={} srcPort={}",
                        String::from_utf8_lossy(&name[..end]),
                        u(rec, 16, 4),
                        u(rec, 20, 2)
                    )
                }
                other => format!("{other} bytesIn={} vport={}", u(rec, 16, 8), u(rec, 24, 2)),
            };
            *got.entry(row).or_default() += 1;
            true
        })
        .unwrap();
    assert!(reader.problems().is_empty(), "{:?}", reader.problems());
    assert_eq!(got, expected());
}
