//! Mmap sink: compliance, segment rolls, preallocation, and recovery after
//! a SIGKILLed writer process.

mod common;
#[path = "../../testkit/fixtures/lb_conn.rs"]
mod lb_conn;

use dplog_schema_nat::NatFormatSpec as _;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::MetadataExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use dplog_core::{Accepted, Sink};
use dplog_sinks::mmap::{list_segments, read_all, HEADER_BYTES};
use dplog_sinks::{MmapSink, MmapSinkOptions};
use dplog_testkit::tmpfs::Tmpfs;

fn opts(seg: u64) -> MmapSinkOptions {
    MmapSinkOptions {
        segment_bytes: seg,
        msync_interval_ms: Some(10),
        prefix: "t".into(),
        header: None,
        seal: None,
    }
}

fn lines(r: std::ops::Range<u64>) -> Vec<u8> {
    let mut v = Vec::new();
    for i in r {
        v.extend_from_slice(format!("p0 s{i:010} mmmmmmmmmmmmmmmmmmmm\n").as_bytes());
    }
    v
}

#[test]
fn compliance_mmap() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    compliance(
        || MmapSink::open(&d, opts(256 * 1024)).unwrap(),
        |_| read_all(&d, "t").unwrap(),
        None,
    );
    // 900 KB over 256 KiB segments: several rolls, all preallocated.
    let segs = list_segments(&d, "t").unwrap();
    assert!(segs.len() >= 4, "{segs:?}");
    for (_, p) in &segs {
        let m = std::fs::metadata(p).unwrap();
        assert_eq!(m.len(), 256 * 1024);
        assert!(m.blocks() * 512 >= m.len(), "{} is sparse", p.display());
    }
}

#[test]
fn rolls_at_line_boundaries_and_resumes_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = MmapSink::open(dir.path(), opts(64 * 1024)).unwrap();
    assert_eq!(s.describe(), format!("mmap {}", dir.path().display()));
    assert_eq!(s.recovery().segment, None);
    // 36-byte lines; 60 KiB data area per segment.
    for b in 0..40u64 {
        assert_eq!(
            s.write_batch(&lines(b * 100..(b + 1) * 100)).unwrap(),
            Accepted::Delivered
        );
    }
    s.close().unwrap();
    assert_eq!(read_all(dir.path(), "t").unwrap(), lines(0..4000));
    let mut s = MmapSink::open(dir.path(), opts(64 * 1024)).unwrap();
    let r = s.recovery().clone();
    assert!(r.segment.is_some());
    assert_eq!(r.discarded_tail_bytes, 0);
    assert!(r.committed_records > 0);
    s.write_batch(&lines(4000..4010)).unwrap();
    s.close().unwrap();
    assert_eq!(read_all(dir.path(), "t").unwrap(), lines(0..4010));
    for (_, p) in list_segments(dir.path(), "t").unwrap() {
        let body = dplog_sinks::mmap::read_segment(&p).unwrap();
        assert!(body.ends_with(b"\n"));
        assert!(body.len() <= 64 * 1024 - HEADER_BYTES);
    }
}

#[test]
fn bad_options_and_oversized_lines_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    assert!(MmapSink::open(dir.path(), opts(5000)).is_err());
    assert!(MmapSink::open(dir.path(), opts(4096)).is_err());
    let mut s = MmapSink::open(dir.path(), opts(64 * 1024)).unwrap();
    let mut big = vec![b'x'; 70 * 1024];
    big.push(b'\n');
    let e = s.write_batch(&big).unwrap_err();
    assert!(!e.is_retryable());
    assert_eq!(
        e.io().to_string(),
        "a record of 71681 bytes exceeds the segment data area of 61440 bytes"
    );
    // The writer lets go of the directory before the next open.
    drop(s);
    std::fs::write(dir.path().join("t-0000000099.dpm"), b"garbage").unwrap();
    let e = MmapSink::open(dir.path(), opts(64 * 1024)).err().unwrap();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
}

/// The child half of `sigkill_mid_write_recovers_every_committed_record`:
/// writes batches forever, printing the highest committed sequence after
/// each batch. Runs only when spawned by that test.
#[test]
#[ignore = "helper process for the crash test"]
fn mmap_crash_child() {
    let Ok(dir) = std::env::var("DPLOG_MMAP_CHILD_DIR") else {
        return;
    };
    let mut s = MmapSink::open(&dir, opts(64 * 1024)).unwrap();
    let mut seq = 0u64;
    loop {
        s.write_batch(&lines(seq..seq + 50)).unwrap();
        seq += 50;
        println!("committed {}", seq - 1);
    }
}

#[test]
fn sigkill_mid_write_recovers_every_committed_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "mmap_crash_child", "--nocapture"])
        .env("DPLOG_MMAP_CHILD_DIR", dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut last_reported = None;
    let t0 = Instant::now();
    let mut line = String::new();
    // Let it roll a few segments (60 KiB each, 36-byte lines).
    while last_reported.unwrap_or(0) < 8000 {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "child ended early");
        if let Some(n) = line.trim().strip_prefix("committed ") {
            last_reported = Some(n.parse::<u64>().unwrap());
        }
        assert!(t0.elapsed() < Duration::from_secs(20));
    }
    // SAFETY: kill(2) on our own, not yet reaped, child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let st = child.wait().unwrap();
    assert!(!st.success());
    let reported = last_reported.unwrap();

    let mut s = MmapSink::open(dir.path(), opts(64 * 1024)).unwrap();
    let rec = s.recovery().clone();
    eprintln!("recovery: {rec:?}");
    assert!(rec.segment.is_some());
    let body = read_all(dir.path(), "t").unwrap();
    assert!(body.ends_with(b"\n"), "garbage tail");
    let got = parse_lines(&body);
    // Every committed record, once, in order, and nothing else.
    let n = got.len() as u64;
    assert!(n > reported, "lost committed records: {n} <= {reported}");
    assert_complete_and_ordered(&got, 1, n);
    // Appending continues right after the recovered data.
    s.write_batch(&lines(n..n + 1)).unwrap();
    s.close().unwrap();
    let got = parse_lines(&read_all(dir.path(), "t").unwrap());
    assert_complete_and_ordered(&got, 1, n + 1);
}

#[test]
fn open_errors_name_the_directory_or_segment_and_the_os_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir");
    let e = MmapSink::open(&missing, opts(64 * 1024)).err().unwrap();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    assert_eq!(
        e.to_string(),
        format!(
            "mmap segment directory {}: No such file or directory (os error 2)",
            missing.display()
        )
    );
    // A regular file where the directory should be.
    let file = dir.path().join("plain");
    std::fs::write(&file, b"x").unwrap();
    let e = MmapSink::open(&file, opts(64 * 1024)).err().unwrap();
    assert_eq!(
        e.to_string(),
        format!(
            "mmap segment directory {}: Not a directory (os error 20)",
            file.display()
        )
    );
    // A foreign file named like the newest segment.
    let seg = dir.path().join("t-0000000000.dpm");
    std::fs::write(&seg, vec![7u8; 8192]).unwrap();
    let e = MmapSink::open(dir.path(), opts(64 * 1024)).err().unwrap();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
    assert_eq!(
        e.to_string(),
        format!(
            "{}: not a dplog mmap segment (it does not start with DPLOGMM1)",
            seg.display()
        )
    );
}

/// Binary-format batches (`dplog_formatters::binary`) of records with
/// sequence numbers `r`, `per` records a batch, as a NAT formatter makes
/// them: the first batch starts with the schema preamble.
fn binary_batches(r: std::ops::Range<u64>, per: u64) -> Vec<Vec<u8>> {
    binary_batches_counted(r, per)
        .into_iter()
        .map(|(b, _)| b)
        .collect()
}

/// [`binary_batches`] with the record count of each batch.
fn binary_batches_counted(r: std::ops::Range<u64>, per: u64) -> Vec<(Vec<u8>, u64)> {
    use dplog_core::Formatter;
    let mut f = dplog_formatters::FormatSpec {
        kind: dplog_formatters::Format::Binary,
        ..Default::default()
    }
    .nat_formatter()
    .unwrap();
    let mut out = Vec::new();
    let mut b = Vec::new();
    let mut n = 0;
    for i in r {
        f.format(&rec(0, i), &mut b);
        n += 1;
        if n == per {
            out.push((std::mem::take(&mut b), n));
            n = 0;
        }
    }
    if n > 0 {
        out.push((b, n));
    }
    out
}

/// Sequence numbers (`timestamp_ns`) of the records of one segment decoded
/// alone; panics if it does not decode whole.
fn segment_seqs(p: &std::path::Path) -> Vec<u64> {
    let body = dplog_sinks::mmap::read_segment(p).unwrap();
    let d = dplog_formatters::binary::decode(&body);
    assert_eq!(d.stopped, None, "{} does not decode alone", p.display());
    d.records
        .iter()
        .map(|(_, r)| u64::from_ne_bytes(r[8..16].try_into().unwrap()))
        .collect()
}

/// The committed record count in a segment's header.
fn header_records(p: &std::path::Path) -> u64 {
    let b = std::fs::read(p).unwrap();
    u64::from_le_bytes(b[32..40].try_into().unwrap())
}

#[test]
fn a_segment_that_cannot_be_created_commits_nothing_of_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = MmapSink::open(dir.path(), opts(64 * 1024)).unwrap();
    // 60 KiB data area, 68-byte R frames: batch 0 (with the preamble) and
    // batch 1 fit segment 0; batch 2 needs segment 1.
    let batches = binary_batches(0..1500, 400);
    assert_eq!(s.write_batch(&batches[0]).unwrap(), Accepted::Delivered);
    assert_eq!(s.write_batch(&batches[1]).unwrap(), Accepted::Delivered);
    let before = read_all(dir.path(), "t").unwrap();
    assert_eq!(before, [batches[0].clone(), batches[1].clone()].concat());
    // Segment 1 cannot be created: a directory has its name (EISDIR).
    let blocker = dir.path().join("t-0000000001.dpm");
    std::fs::create_dir(&blocker).unwrap();
    for _ in 0..2 {
        let e = s.write_batch(&batches[2]).unwrap_err();
        assert!(
            e.to_string().contains(&blocker.display().to_string()),
            "{e}"
        );
        // Nothing of the refused batch is committed: no partial record,
        // no partial batch, and the header counts what is there.
        let (_, p0) = &list_segments(dir.path(), "t").unwrap()[0];
        assert_eq!(dplog_sinks::mmap::read_segment(p0).unwrap(), before);
        assert_eq!(header_records(p0), 800);
        assert_eq!(segment_seqs(p0), (0..800).collect::<Vec<_>>());
        // Nor is a temporary file left behind.
        assert_eq!(temporary_files(dir.path()), Vec::<String>::new());
    }
    // The retry with the same bytes commits the batch whole, once.
    std::fs::remove_dir(&blocker).unwrap();
    for b in &batches[2..] {
        assert_eq!(s.write_batch(b).unwrap(), Accepted::Delivered);
    }
    s.close().unwrap();
    let segs = list_segments(dir.path(), "t").unwrap();
    assert!(segs.len() >= 2, "{segs:?}");
    let mut all = Vec::new();
    for (_, p) in &segs {
        let seqs = segment_seqs(p);
        assert_eq!(header_records(p), seqs.len() as u64);
        all.extend(seqs);
    }
    assert_eq!(all, (0..1500).collect::<Vec<_>>());
}

#[test]
fn every_binary_segment_starts_with_the_schema_preamble() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = MmapSink::open(dir.path(), opts(64 * 1024)).unwrap();
    // 5000 records of 68 bytes = 332 KiB over 60 KiB data areas; batches
    // of 2000 records span several segments each.
    for b in binary_batches(0..5000, 2000) {
        assert_eq!(s.write_batch(&b).unwrap(), Accepted::Delivered);
    }
    s.close().unwrap();
    let segs = list_segments(dir.path(), "t").unwrap();
    assert!(segs.len() >= 6, "{segs:?}");
    let mut all = Vec::new();
    // In reverse order: each segment is self-describing.
    for (_, p) in segs.iter().rev() {
        let body = dplog_sinks::mmap::read_segment(p).unwrap();
        assert!(body.starts_with(b"H\0"), "{}", p.display());
        let seqs = segment_seqs(p);
        assert!(!seqs.is_empty());
        assert_eq!(header_records(p), seqs.len() as u64);
        all.splice(0..0, seqs);
    }
    assert_eq!(all, (0..5000).collect::<Vec<_>>());
    // A reopened sink (a restart) keeps putting the preamble first, even
    // for batches without one (an encoder already started).
    let mut s = MmapSink::open(dir.path(), opts(64 * 1024)).unwrap();
    let more = binary_batches(0..3000, 3000);
    let pre = more[0].len() - 3000 * 68;
    assert_eq!(more[0][pre], b'R');
    s.write_batch(&more[0][pre..]).unwrap();
    s.close().unwrap();
    let segs2 = list_segments(dir.path(), "t").unwrap();
    assert!(segs2.len() > segs.len());
    for (_, p) in &segs2[segs.len()..] {
        assert!(!segment_seqs(p).is_empty());
    }
}

#[test]
fn a_filling_tmpfs_commits_whole_records_and_counts_them() {
    let Some(fs_) = Tmpfs::mount("400k") else {
        return;
    };
    let mut s = MmapSink::open(fs_.path(), opts(128 * 1024)).unwrap();
    let mut accepted = 0u64;
    let mut seq = 0u64;
    let mut enospc = 0;
    for (b, n) in binary_batches_counted(0..20_000, 1000) {
        match s.write_batch(&b) {
            Ok(_) => accepted += n,
            Err(e) => {
                assert!(e.is_retryable(), "{e}");
                assert!(e.to_string().contains("No space left"), "{e}");
                enospc += 1;
                // Dropped by the runtime after its retries: the next
                // batches still come, without the preamble.
            }
        }
        seq += n;
    }
    assert!(enospc > 0);
    assert!(
        seq == 20_000 && accepted > 0 && accepted < 20_000,
        "{accepted}"
    );
    s.close().unwrap();
    let mut on_disk = 0u64;
    for (_, p) in list_segments(fs_.path(), "t").unwrap() {
        let seqs = segment_seqs(&p);
        assert_eq!(header_records(&p), seqs.len() as u64);
        on_disk += seqs.len() as u64;
    }
    assert_eq!(on_disk, accepted);
}

#[test]
fn a_directory_the_process_cannot_write_fails_at_open_with_path_and_os_error() {
    // /proc takes no new files, for root too: the writer's lock file is
    // the first one the open creates.
    let e = MmapSink::open("/proc", opts(64 * 1024)).err().unwrap();
    let m = e.to_string();
    assert!(
        m.starts_with("mmap segment lock /proc/.t.lock: ") && m.contains("(os error "),
        "{m}"
    );
}

#[test]
fn a_sink_closed_without_writing_leaves_no_segment() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = MmapSink::open(dir.path(), opts(64 * 1024)).unwrap();
    // Created at open (so an unwritable directory fails there)...
    assert_eq!(list_segments(dir.path(), "t").unwrap().len(), 1);
    s.close().unwrap();
    // ...and removed at close, empty.
    assert!(list_segments(dir.path(), "t").unwrap().is_empty());
    // A written segment stays, and so does a resumed one left empty.
    let mut s = MmapSink::open(dir.path(), opts(64 * 1024)).unwrap();
    s.write_batch(&lines(0..3)).unwrap();
    s.close().unwrap();
    let mut s = MmapSink::open(dir.path(), opts(64 * 1024)).unwrap();
    s.close().unwrap();
    assert_eq!(list_segments(dir.path(), "t").unwrap().len(), 1);
    assert_eq!(read_all(dir.path(), "t").unwrap(), lines(0..3));
}

#[test]
fn a_csv_header_heads_every_segment_once() {
    let dir = tempfile::tempdir().unwrap();
    let header = b"timestamp,natEvent,sourceIPv4Address\n".to_vec();
    let o = MmapSinkOptions {
        header: Some(header.clone()),
        ..opts(64 * 1024)
    };
    let mut s = MmapSink::open(dir.path(), o.clone()).unwrap();
    // The formatter's first batch starts with the header; later ones not.
    let mut first = header.clone();
    first.extend_from_slice(&lines(0..1000));
    s.write_batch(&first).unwrap();
    for b in 1..5u64 {
        s.write_batch(&lines(b * 1000..(b + 1) * 1000)).unwrap();
    }
    s.close().unwrap();
    // A second run appending to the same directory sends the header again.
    let mut s = MmapSink::open(dir.path(), o).unwrap();
    let mut again = header.clone();
    again.extend_from_slice(&lines(5000..5100));
    s.write_batch(&again).unwrap();
    s.close().unwrap();

    let segs = list_segments(dir.path(), "t").unwrap();
    assert!(
        segs.len() >= 3,
        "5100 lines of 36 bytes over 60 KiB segments: {segs:?}"
    );
    let mut data = Vec::new();
    for (_, p) in &segs {
        let body = dplog_sinks::mmap::read_segment(p).unwrap();
        assert!(
            body.starts_with(&header),
            "{} starts with the header",
            p.display()
        );
        let rest = &body[header.len()..];
        assert!(
            !rest.windows(header.len()).any(|w| w == header.as_slice()),
            "{} has the header once",
            p.display()
        );
        data.extend_from_slice(rest);
        // The header is not a record.
        assert_eq!(
            header_records(p),
            rest.iter().filter(|&&c| c == b'\n').count() as u64
        );
    }
    assert_eq!(data, lines(0..5100), "every line once, in order");
}

#[test]
fn a_resumed_segment_of_another_size_is_filled_to_its_own_size_only() {
    let dir = tempfile::tempdir().unwrap();
    // A first run with 64 KiB segments (60 KiB data area) leaves segment 0
    // with 1000 lines of 36 bytes (36000 bytes, 25440 left).
    let mut s = MmapSink::open(dir.path(), opts(64 * 1024)).unwrap();
    s.write_batch(&lines(0..1000)).unwrap();
    s.close().unwrap();
    // A second run with 1 MiB segments resumes it and writes a batch of
    // 100 KB: more than the resumed segment has left, less than the
    // configured segment size (the old code planned with the configured
    // size and copied past the 64 KiB mapping: a panic).
    let mut s = MmapSink::open(dir.path(), opts(1 << 20)).unwrap();
    assert_eq!(s.recovery().committed_records, 1000);
    assert_eq!(
        s.write_batch(&lines(1000..3800)).unwrap(),
        Accepted::Delivered
    );
    s.close().unwrap();
    let segs = list_segments(dir.path(), "t").unwrap();
    assert_eq!(segs.len(), 2, "{segs:?}");
    let sizes: Vec<u64> = segs
        .iter()
        .map(|(_, p)| std::fs::metadata(p).unwrap().len())
        .collect();
    assert_eq!(sizes, [64 * 1024, 1 << 20]);
    let b0 = dplog_sinks::mmap::read_segment(&segs[0].1).unwrap();
    // The resumed segment is filled with whole lines up to its own data
    // area (61440 / 36 = 1706 lines), the rest goes to the new one.
    assert_eq!(b0, lines(0..1706));
    assert_eq!(header_records(&segs[0].1), 1706);
    assert_eq!(header_records(&segs[1].1), 3800 - 1706);
    assert_eq!(read_all(dir.path(), "t").unwrap(), lines(0..3800));

    // A binary log resumed the same way.
    let dir = tempfile::tempdir().unwrap();
    let batches = binary_batches(0..1200, 600);
    let mut s = MmapSink::open(dir.path(), opts(64 * 1024)).unwrap();
    s.write_batch(&batches[0]).unwrap();
    s.close().unwrap();
    let mut s = MmapSink::open(dir.path(), opts(1 << 20)).unwrap();
    s.write_batch(&batches[1]).unwrap();
    s.close().unwrap();
    let mut all = Vec::new();
    for (_, p) in list_segments(dir.path(), "t").unwrap() {
        let seqs = segment_seqs(&p);
        assert_eq!(header_records(&p), seqs.len() as u64);
        all.extend(seqs);
    }
    assert_eq!(all, (0..1200).collect::<Vec<_>>());
}

#[test]
fn a_second_writer_on_one_directory_is_refused_until_the_first_closes() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = MmapSink::open(dir.path(), opts(64 * 1024)).unwrap();
    a.write_batch(&lines(0..10)).unwrap();
    // flock is per open file description: a second open in this process
    // conflicts like another process would.
    let e = MmapSink::open(dir.path(), opts(64 * 1024)).err().unwrap();
    assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    let lock = dir.path().join(".t.lock");
    assert_eq!(
        e.to_string(),
        format!(
            "mmap segment directory {}: another writer holds it (lock {} for prefix \"t\" is taken)",
            dir.path().display(),
            lock.display()
        )
    );
    // The refused open touched nothing: the first writer goes on.
    a.write_batch(&lines(10..20)).unwrap();
    // Another prefix in the same directory is another log.
    let mut other = MmapSink::open(
        dir.path(),
        MmapSinkOptions {
            prefix: "u".into(),
            ..opts(64 * 1024)
        },
    )
    .unwrap();
    other.write_batch(&lines(0..5)).unwrap();
    other.close().unwrap();
    // Released at close...
    a.close().unwrap();
    let mut b = MmapSink::open(dir.path(), opts(64 * 1024)).unwrap();
    b.write_batch(&lines(20..30)).unwrap();
    // ...and at drop, without close.
    drop(b);
    let mut c = MmapSink::open(dir.path(), opts(64 * 1024)).unwrap();
    c.write_batch(&lines(30..40)).unwrap();
    c.close().unwrap();
    assert_eq!(read_all(dir.path(), "t").unwrap(), lines(0..40));
    assert_eq!(read_all(dir.path(), "u").unwrap(), lines(0..5));
    // The lock file is not a segment.
    assert!(lock.exists());
    assert_eq!(list_segments(dir.path(), "t").unwrap().len(), 1);
}

#[test]
fn a_change_of_framing_starts_a_new_segment() {
    let dir = tempfile::tempdir().unwrap();
    let o = opts(1 << 20);
    // A text run, then a binary run, then a JSON-like line run, each a
    // separate process run on the same directory.
    let mut s = MmapSink::open(dir.path(), o.clone()).unwrap();
    s.write_batch(&lines(0..100)).unwrap();
    s.close().unwrap();
    let bin = binary_batches(0..300, 100);
    let mut s = MmapSink::open(dir.path(), o.clone()).unwrap();
    for b in &bin {
        s.write_batch(b).unwrap();
    }
    s.close().unwrap();
    let json: Vec<u8> = (0..50u64)
        .flat_map(|i| format!("{{\"seq\":{i}}}\n").into_bytes())
        .collect();
    let mut s = MmapSink::open(dir.path(), o.clone()).unwrap();
    s.write_batch(&json).unwrap();
    s.close().unwrap();
    // And within one sink: lines after binary frames.
    let mut s = MmapSink::open(dir.path(), o.clone()).unwrap();
    let more = binary_batches(0..10, 10);
    s.write_batch(&more[0]).unwrap();
    s.write_batch(&lines(100..110)).unwrap();
    s.close().unwrap();

    let segs = list_segments(dir.path(), "t").unwrap();
    let bodies: Vec<Vec<u8>> = segs
        .iter()
        .map(|(_, p)| dplog_sinks::mmap::read_segment(p).unwrap())
        .collect();
    assert_eq!(bodies.len(), 5, "{segs:?}");
    assert_eq!(bodies[0], lines(0..100));
    assert_eq!(segment_seqs(&segs[1].1), (0..300).collect::<Vec<_>>());
    assert_eq!(header_records(&segs[1].1), 300);
    // The JSON run did not append to the binary segment.
    assert_eq!(bodies[2], json);
    assert_eq!(header_records(&segs[2].1), 50);
    assert_eq!(segment_seqs(&segs[3].1), (0..10).collect::<Vec<_>>());
    assert_eq!(bodies[4], lines(100..110));
    assert_eq!(header_records(&segs[4].1), 10);
}

#[test]
fn a_record_too_big_for_an_empty_resumed_smaller_segment_goes_to_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    // An empty 64 KiB segment, as a crash right after its creation leaves
    // it: header only, nothing committed.
    let mut seg = vec![0u8; 64 * 1024];
    seg[..8].copy_from_slice(b"DPLOGMM1");
    seg[8..12].copy_from_slice(&1u32.to_le_bytes());
    seg[12..16].copy_from_slice(&(HEADER_BYTES as u32).to_le_bytes());
    seg[16..24].copy_from_slice(&(64u64 * 1024).to_le_bytes());
    std::fs::write(dir.path().join("t-0000000000.dpm"), &seg).unwrap();
    let mut s = MmapSink::open(dir.path(), opts(1 << 20)).unwrap();
    assert_eq!(s.recovery().committed_bytes, 0);
    // A 70 KiB line: too big for the resumed segment's 60 KiB data area,
    // not for the configured 1 MiB segments.
    let mut big = vec![b'x'; 70 * 1024];
    big.push(b'\n');
    assert_eq!(s.write_batch(&big).unwrap(), Accepted::Delivered);
    s.write_batch(&lines(0..3)).unwrap();
    s.close().unwrap();
    let segs = list_segments(dir.path(), "t").unwrap();
    assert_eq!(segs.len(), 2, "{segs:?}");
    assert!(dplog_sinks::mmap::read_segment(&segs[0].1)
        .unwrap()
        .is_empty());
    assert_eq!(
        dplog_sinks::mmap::read_segment(&segs[1].1).unwrap(),
        [big, lines(0..3)].concat()
    );
    assert_eq!(header_records(&segs[1].1), 4);
}

/// Names in `dir` of temporary segment files (`.<prefix>-<seq>.dpm.tmp`).
fn temporary_files(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

#[test]
fn headerless_segments_and_temporary_files_left_by_a_crash_are_removed_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 2000 lines of 36 bytes over 60 KiB data areas (1706 lines each):
    // two segments.
    let mut s = MmapSink::open(d, opts(64 * 1024)).unwrap();
    s.write_batch(&lines(0..2000)).unwrap();
    s.close().unwrap();
    let valid = list_segments(d, "t").unwrap();
    assert_eq!(valid.len(), 2, "{valid:?}");
    // What a crash while segments were created leaves: a zero-length and
    // an all-zero (preallocated, no header yet) file under segment names,
    // and a temporary file.
    let empty = d.join("t-0000000002.dpm");
    std::fs::write(&empty, b"").unwrap();
    let zeros = d.join("t-0000000003.dpm");
    std::fs::write(&zeros, vec![0u8; 64 * 1024]).unwrap();
    let tmp = d.join(".t-0000000004.dpm.tmp");
    std::fs::write(&tmp, vec![0u8; 64 * 1024]).unwrap();
    // Another prefix's temporary file is not this writer's.
    let other = d.join(".u-0000000000.dpm.tmp");
    std::fs::write(&other, b"").unwrap();

    let mut s = MmapSink::open(d, opts(64 * 1024)).unwrap();
    let r = s.recovery().clone();
    assert_eq!(r.removed_headerless, vec![empty.clone(), zeros.clone()]);
    assert_eq!(r.removed_temporary, vec![tmp.clone()]);
    // The newest real segment is resumed.
    assert_eq!(r.segment.as_deref(), Some(valid[1].1.as_path()));
    assert_eq!(r.committed_records, 2000 - 1706);
    assert_eq!(r.discarded_tail_bytes, 0);
    assert!(!empty.exists() && !zeros.exists() && !tmp.exists());
    assert!(other.exists());
    s.write_batch(&lines(2000..3000)).unwrap();
    s.close().unwrap();
    // Every line once, in order, and the headers count exactly them.
    let segs = list_segments(d, "t").unwrap();
    assert_eq!(segs.len(), 2, "{segs:?}");
    assert_eq!(
        segs.iter().map(|(_, p)| header_records(p)).sum::<u64>(),
        3000
    );
    assert_eq!(read_all(d, "t").unwrap(), lines(0..3000));
    assert_eq!(temporary_files(d), [".u-0000000000.dpm.tmp"]);

    // Only the headerless segment is the crash's: a zero header with data
    // after it is not a segment this sink wrote, and stays (refused).
    let mut odd = vec![0u8; 64 * 1024];
    odd[64 * 1024 - 1] = b'\n';
    let odd_path = d.join("t-0000000009.dpm");
    std::fs::write(&odd_path, &odd).unwrap();
    let e = MmapSink::open(d, opts(64 * 1024)).err().unwrap();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
    assert_eq!(
        e.to_string(),
        format!(
            "{}: not a dplog mmap segment (it does not start with DPLOGMM1)",
            odd_path.display()
        )
    );
    assert_eq!(std::fs::read(&odd_path).unwrap(), odd);
}

#[test]
fn a_fresh_directory_with_only_a_headerless_segment_starts_anew() {
    // A crash in the first milliseconds of the first run: the only
    // segment has no header yet.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let first = d.join("t-0000000000.dpm");
    std::fs::write(&first, vec![0u8; 64 * 1024]).unwrap();
    let mut s = MmapSink::open(d, opts(64 * 1024)).unwrap();
    assert_eq!(s.recovery().segment, None);
    assert_eq!(s.recovery().removed_headerless, vec![first.clone()]);
    // The new first segment takes its name, with a header.
    assert_eq!(s.current_segment(), Some(first.as_path()));
    s.write_batch(&lines(0..10)).unwrap();
    s.close().unwrap();
    assert_eq!(read_all(d, "t").unwrap(), lines(0..10));
    assert_eq!(header_records(&first), 10);
}

#[test]
fn a_torn_tail_past_the_committed_length_is_discarded_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut s = MmapSink::open(d, opts(64 * 1024)).unwrap();
    s.write_batch(&lines(0..100)).unwrap();
    s.close().unwrap();
    let (_, p) = list_segments(d, "t").unwrap().remove(0);
    // A batch cut by the crash: copied in part, its length never
    // committed.
    let mut b = std::fs::read(&p).unwrap();
    let torn = &lines(100..102)[..50];
    let at = HEADER_BYTES + 100 * 36;
    b[at..at + torn.len()].copy_from_slice(torn);
    std::fs::write(&p, &b).unwrap();
    // The reader takes the committed data only.
    assert_eq!(dplog_sinks::mmap::read_segment(&p).unwrap(), lines(0..100));
    let mut s = MmapSink::open(d, opts(64 * 1024)).unwrap();
    assert_eq!(s.recovery().committed_records, 100);
    assert_eq!(s.recovery().discarded_tail_bytes, 50);
    s.write_batch(&lines(100..110)).unwrap();
    s.close().unwrap();
    assert_eq!(read_all(d, "t").unwrap(), lines(0..110));
    assert_eq!(header_records(&p), 110);
}

/// 36-byte lines per batch in the restart crash test's child.
const RESTART_BATCH: u64 = 20;
/// Segments a restart child writes at most, past the one it resumes.
const RESTART_SEGMENTS: u64 = 4;

/// The child half of `sigkill_at_any_moment_leaves_a_log_that_restarts`:
/// opens the sink on the directory (resuming what is there), then writes
/// batches of lines from the given sequence number, printing `write E
/// roll` (this batch needs a new segment) or `write E` before each batch
/// and `committed E next-rolls` (the next batch needs a new segment) or
/// `committed E` after it (E: the sequence number after the batch);
/// after [`RESTART_SEGMENTS`] new segments it waits to be killed. Runs
/// only when spawned by that test.
#[test]
#[ignore = "helper process for the crash test"]
fn mmap_restart_child() {
    let (Ok(dir), Ok(start), Ok(durable)) = (
        std::env::var("DPLOG_MMAP_RESTART_DIR"),
        std::env::var("DPLOG_MMAP_RESTART_START"),
        std::env::var("DPLOG_MMAP_RESTART_DURABLE"),
    ) else {
        return;
    };
    let o = MmapSinkOptions {
        msync_interval_ms: (durable == "1").then_some(10),
        ..opts(64 * 1024)
    };
    let mut s = MmapSink::open(&dir, o).unwrap();
    let cap = 64 * 1024 - HEADER_BYTES as u64;
    let mut used = s.recovery().committed_bytes;
    let mut seq: u64 = start.parse().unwrap();
    let mut rolls = 0;
    while rolls <= RESTART_SEGMENTS {
        let b = lines(seq..seq + RESTART_BATCH);
        let roll = used + b.len() as u64 > cap;
        println!(
            "write {}{}",
            seq + RESTART_BATCH,
            if roll { " roll" } else { "" }
        );
        s.write_batch(&b).unwrap();
        seq += RESTART_BATCH;
        if roll {
            rolls += 1;
            used = (used + b.len() as u64) % cap;
        } else {
            used += b.len() as u64;
        }
        let next_rolls = used + b.len() as u64 > cap;
        println!(
            "committed {seq}{}",
            if next_rolls { " next-rolls" } else { "" }
        );
    }
    println!("done");
    loop {
        std::thread::park();
    }
}

#[test]
fn sigkill_at_any_moment_leaves_a_log_that_restarts() {
    use std::sync::mpsc;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Records in the directory (sequence numbers 0..next, checked).
    let mut next = 0u64;
    let mut killed_in_roll = 0;
    for i in 0..20u64 {
        let durable = i % 2 == 0;
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "mmap_restart_child", "--nocapture"])
            .env("DPLOG_MMAP_RESTART_DIR", d)
            .env("DPLOG_MMAP_RESTART_START", next.to_string())
            .env(
                "DPLOG_MMAP_RESTART_DURABLE",
                if durable { "1" } else { "0" },
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, rx) = mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for l in out.lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut seen = Vec::new();
        if i % 4 == 0 {
            // The first milliseconds of a run: start-up, open, and the
            // creation of a first segment. A random moment, not a
            // synchronisation.
            std::thread::sleep(Duration::from_millis(i / 4 * 4));
        } else {
            // Around the creation of the child's (i % 4)-th new segment:
            // right after it says the next batch needs one (the kill lands
            // before or in the creation) or that it starts that batch (in
            // or after it), plus 0..21 µs.
            let want = i % 4;
            let mark = if i / 4 % 2 == 0 {
                " roll"
            } else {
                " next-rolls"
            };
            let mut marks = 0;
            loop {
                let l = rx
                    .recv_timeout(Duration::from_secs(120))
                    .expect("child is silent");
                let hit = l.ends_with(mark);
                let done = l == "done";
                seen.push(l);
                if hit {
                    marks += 1;
                    if marks == want {
                        let t = Instant::now();
                        let jitter = Duration::from_micros(i * 3 % 24);
                        while t.elapsed() < jitter {
                            std::hint::spin_loop();
                        }
                        break;
                    }
                }
                assert!(!done, "the child ended without {want} rolls");
            }
        }
        // SAFETY: kill(2) on our own, not yet reaped, child.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        assert!(!child.wait().unwrap().success());
        reader.join().unwrap();
        seen.extend(rx.try_iter());
        // What the child said: every batch it reported committed must be
        // there; nothing past the batch it was writing may be.
        let last = |what: &str| {
            seen.iter()
                .rev()
                .filter_map(|l| l.strip_prefix(what))
                .find_map(|r| r.split(' ').next()?.parse::<u64>().ok())
                .unwrap_or(next)
        };
        let (committed, produced) = (last("committed "), last("write "));
        killed_in_roll += u64::from(
            seen.iter()
                .rev()
                .find(|l| l.starts_with("write "))
                .is_some_and(|l| l.ends_with(" roll"))
                && produced > committed,
        );

        // The reader decodes the directory as the crash left it: whole
        // lines, sequence numbers 0.. without a gap or a duplicate.
        let check = |when: &str| -> u64 {
            let body = read_all(d, "t").unwrap_or_else(|e| panic!("run {i}, {when}: {e}"));
            assert!(body.ends_with(b"\n") || body.is_empty(), "run {i}, {when}");
            let got = parse_lines(&body);
            let n = got.len() as u64;
            assert_complete_and_ordered(&got, 1, n);
            assert!(
                n >= committed && n <= produced,
                "run {i}, {when}: {n} records, the child committed {committed} and wrote up to {produced}"
            );
            n
        };
        // Whatever instant the kill hit, a segment name shows a whole
        // preallocated file with its header.
        for (_, p) in list_segments(d, "t").unwrap() {
            let b = std::fs::read(&p).unwrap();
            assert_eq!(b.len(), 64 * 1024, "run {i}: {}", p.display());
            assert_eq!(&b[..8], b"DPLOGMM1", "run {i}: {}", p.display());
        }
        let n = check("after the kill");
        // The sink starts on it, and removes what the crash left.
        let mut s = MmapSink::open(d, opts(64 * 1024))
            .unwrap_or_else(|e| panic!("run {i}: restart refused: {e}"));
        assert_eq!(temporary_files(d), Vec::<String>::new(), "run {i}");
        assert!(s.recovery().removed_headerless.is_empty(), "run {i}");
        s.close().unwrap();
        assert_eq!(check("after the restart"), n);
        let segs = list_segments(d, "t").unwrap();
        assert_eq!(
            segs.iter().map(|(_, p)| header_records(p)).sum::<u64>(),
            n,
            "run {i}"
        );
        next = n;
    }
    eprintln!(
        "{killed_in_roll} of 15 kills landed in a batch that created a segment; {next} records"
    );
    // Bounded: at most 20 runs of 5 segments of 64 KiB.
    assert!(next > 0);
}

/// A binary log written before schemas carried their metadata (bytes of
/// that code) goes into a segment byte for byte and decodes from it with
/// the default metadata; a log of today's encoding keeps its writer's
/// metadata in the segment's preamble.
#[test]
fn segments_of_the_old_and_the_new_schema_encoding_decode() {
    use dplog_formatters::binary;
    let want: Vec<Vec<u8>> = lb_conn::old_log_records()
        .iter()
        .map(|r| r.bytes())
        .collect();
    let s = lb_conn::schema();
    let mut enc = binary::BinaryEncoder::try_new(&[&s]).unwrap();
    let mut new = Vec::new();
    for r in &want {
        assert!(enc.push(r, &mut new));
    }
    for (log, schema) in [
        (lb_conn::old_binary_log(), lb_conn::fields_only_as_read()),
        (new, s),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = MmapSink::open(dir.path(), opts(256 * 1024)).unwrap();
        assert_eq!(sink.write_batch(&log).unwrap(), Accepted::Delivered);
        sink.close().unwrap();
        let data = read_all(dir.path(), "t").unwrap();
        assert_eq!(data, log);
        let d = binary::decode(&data);
        assert!(d.stopped.is_none(), "{:?}", d.stopped);
        assert_eq!(d.schemas, vec![schema]);
        let got: Vec<Vec<u8>> = d.records.iter().map(|(_, r)| r.to_vec()).collect();
        assert_eq!(got, want);
    }
}
