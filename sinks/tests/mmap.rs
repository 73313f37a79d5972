//! Mmap sink: compliance, segment rolls, preallocation, and recovery after
//! a SIGKILLed writer process.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::MetadataExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use dplog_core::{Accepted, Sink};
use dplog_sinks::mmap::{list_segments, read_all, HEADER_BYTES};
use dplog_sinks::{MmapSink, MmapSinkOptions};

fn opts(seg: u64) -> MmapSinkOptions {
    MmapSinkOptions {
        segment_bytes: seg,
        msync_interval_ms: Some(10),
        prefix: "t".into(),
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
        format!("{}: not a dplog mmap segment", seg.display())
    );
}
