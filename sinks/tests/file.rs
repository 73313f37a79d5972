//! File sink: compliance, rotation, retention, reopen, SIGHUP, O_NOFOLLOW,
//! copytruncate, fsync policies, and a tmpfs that fills up.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use common::*;
use dplog_core::{Accepted, Formatter, Logger, LoggerConfig, Sink};
use dplog_schema_nat::Nat44SessionRecord;
use dplog_sinks::{FileSink, FileSinkCounters, FileSinkOptions, FsyncPolicy};
use dplog_testkit::tmpfs::Tmpfs;

fn read_all(path: &Path) -> Vec<u8> {
    fs::read(path).unwrap()
}

/// Rotated files oldest first, then the live file.
fn all_files(sink_path: &Path) -> Vec<PathBuf> {
    let probe = FileSink::open(sink_path).unwrap();
    let mut v = probe.rotated_files().unwrap();
    v.push(sink_path.to_path_buf());
    v
}

fn lines(n: std::ops::Range<u64>) -> Vec<u8> {
    let mut out = Vec::new();
    for i in n {
        out.extend_from_slice(format!("p0 s{i:010} xxxxxxxxxxxxxxxxxxxx\n").as_bytes());
    }
    out
}

#[test]
fn compliance_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.log");
    let p2 = path.clone();
    compliance(
        || FileSink::open(&path).unwrap(),
        |_| read_all(&p2),
        Some(Box::new(|| FileSink::open("/dev/full").unwrap())),
    );
}

#[test]
fn appends_and_keeps_an_existing_files_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.log");
    fs::write(&path, b"old\n").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    let mut s = FileSink::open(&path).unwrap();
    assert_eq!(s.write_batch(b"one\n").unwrap(), Accepted::Delivered);
    s.write_batch(b"two\n").unwrap();
    s.close().unwrap();
    assert_eq!(read_all(&path), b"old\none\ntwo\n");
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // A new file gets 0640 (minus the umask, which can only clear bits).
    let fresh = dir.path().join("b.log");
    FileSink::open(&fresh).unwrap().close().unwrap();
    let mode = fs::metadata(&fresh).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & !0o640, 0);
    assert_eq!(mode & 0o600, 0o600);
}

#[test]
fn a_symlink_at_the_path_is_refused_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("victim");
    fs::write(&target, b"precious\n").unwrap();
    let link = dir.path().join("log");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let e = FileSink::open(&link).unwrap_err();
    assert_eq!(e.raw_os_error(), None); // message-wrapped
    assert!(e.to_string().contains("symbolic link"), "{e}");
    assert!(e.to_string().contains("log"), "{e}");
    assert_eq!(read_all(&target), b"precious\n");
}

#[test]
fn missing_directory_and_closed_sink_are_clear_errors() {
    let e = FileSink::open("/nonexistent-dir/x.log").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    assert!(e.to_string().contains("/nonexistent-dir/x.log"));
    let dir = tempfile::tempdir().unwrap();
    let mut s = FileSink::open(dir.path().join("c.log")).unwrap();
    s.close().unwrap();
    let e = s.write_batch(b"x\n").unwrap_err();
    assert!(!e.is_retryable());
    assert!(s.close().is_ok());
}

#[test]
fn a_full_device_is_a_retryable_counted_error() {
    let mut s = FileSink::open("/dev/full").unwrap();
    let c = s.counters();
    let e = s.write_batch(b"line\n").unwrap_err();
    assert!(e.is_retryable());
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
    assert_eq!(FileSinkCounters::get(&c.enospc), 1);
}

#[test]
fn dev_null_takes_everything_and_closes_cleanly() {
    // fsync on a character device fails with EINVAL; nothing is lost, so
    // it is no sink error.
    let mut s = FileSink::open("/dev/null").unwrap();
    s.write_batch(b"line\n").unwrap();
    s.flush().unwrap();
    s.close().unwrap();
}

#[test]
fn size_rotation_splits_at_lines_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.log");
    let opts = FileSinkOptions {
        max_size_bytes: Some(1000),
        ..Default::default()
    };
    let mut s = FileSink::with_options(&path, opts).unwrap();
    let c = s.counters();
    // 36-byte lines, batches of 50 lines (1800 bytes): every batch spans
    // a rotation.
    for b in 0..20u64 {
        s.write_batch(&lines(b * 50..(b + 1) * 50)).unwrap();
    }
    s.close().unwrap();
    let files = all_files(&path);
    assert!(files.len() >= 36, "{} files", files.len());
    assert_eq!(
        FileSinkCounters::get(&c.rotations) as usize,
        files.len() - 1
    );
    let mut body = Vec::new();
    for f in &files {
        let b = read_all(f);
        assert!(b.len() <= 1000, "{} is {} bytes", f.display(), b.len());
        assert!(b.is_empty() || b.ends_with(b"\n"), "{} torn", f.display());
        body.extend_from_slice(&b);
    }
    assert_eq!(body, lines(0..1000));
}

#[test]
fn retention_keeps_k_files_and_drops_old_ones() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.log");
    // A rotated file from 10 days ago.
    let ancient = dir.path().join("k.log.0000000000001");
    fs::write(&ancient, b"old\n").unwrap();
    let f = fs::File::options().write(true).open(&ancient).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(10 * 86_400))
        .unwrap();
    drop(f);
    let opts = FileSinkOptions {
        max_size_bytes: Some(100),
        keep_files: Some(3),
        keep_days: Some(7),
        ..Default::default()
    };
    let mut s = FileSink::with_options(&path, opts).unwrap();
    let c = s.counters();
    s.write_batch(&lines(0..2)).unwrap();
    s.rotate().unwrap();
    assert!(!ancient.exists(), "a file older than keep_days survived");
    for b in 0..10u64 {
        s.write_batch(&lines(b * 2..b * 2 + 2)).unwrap();
        s.rotate().unwrap();
    }
    let rotated = s.rotated_files().unwrap();
    assert_eq!(rotated.len(), 3, "{rotated:?}");
    // The newest three survive: lines 14..20.
    let mut body = Vec::new();
    for f in &rotated {
        body.extend_from_slice(&read_all(f));
    }
    assert_eq!(body, lines(14..20));
    assert_eq!(FileSinkCounters::get(&c.deleted), 1 + 8, "{rotated:?}");
    s.close().unwrap();
}

#[test]
fn time_rotation_happens_on_tick() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.log");
    let opts = FileSinkOptions {
        rotate_interval_ms: Some(300),
        ..Default::default()
    };
    let mut s = FileSink::with_options(&path, opts).unwrap();
    s.write_batch(&lines(0..3)).unwrap();
    s.tick(Instant::now()).unwrap();
    assert!(s.rotated_files().unwrap().is_empty());
    std::thread::sleep(Duration::from_millis(350));
    s.tick(Instant::now()).unwrap();
    // An empty file is not rotated.
    std::thread::sleep(Duration::from_millis(350));
    s.tick(Instant::now()).unwrap();
    let rotated = s.rotated_files().unwrap();
    assert_eq!(rotated.len(), 1);
    assert_eq!(read_all(&rotated[0]), lines(0..3));
    s.write_batch(&lines(3..4)).unwrap();
    s.close().unwrap();
    assert_eq!(read_all(&path), lines(3..4));
}

#[test]
fn reopen_after_mv_writes_to_the_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.log");
    let moved = dir.path().join("m.log.1");
    let logger = Logger::start(
        LoggerConfig::default(),
        SeqLine { line_len: 40 },
        FileSink::open(&path).unwrap(),
    )
    .unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..100 {
        p.log(rec(0, i));
    }
    logger.flush().unwrap();
    // Wait until the consumer wrote all 100 (flush does not wait for rings).
    let t0 = Instant::now();
    while logger.stats().written_records < 100 {
        assert!(t0.elapsed() < Duration::from_secs(10));
        logger.flush().unwrap();
    }
    fs::rename(&path, &moved).unwrap();
    logger.reopen().unwrap();
    for i in 100..200 {
        p.log(rec(0, i));
    }
    drop(p);
    let s = logger.shutdown().unwrap();
    assert_eq!(s.written_records, 200);
    let old = parse_lines(&read_all(&moved));
    let new = parse_lines(&read_all(&path));
    assert_eq!(old.len(), 100);
    assert_eq!(new.len(), 100);
    assert_eq!(new[0], (0, 100));
    assert_eq!(new[99], (0, 199));
}

#[test]
fn sighup_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.log");
    let moved = dir.path().join("h.log.1");
    let opts = FileSinkOptions {
        reopen_on_sighup: true,
        ..Default::default()
    };
    let mut s = FileSink::with_options(&path, opts).unwrap();
    let c = s.counters();
    s.write_batch(b"before\n").unwrap();
    fs::rename(&path, &moved).unwrap();
    // SAFETY: raise(3) sends SIGHUP to this thread; signal-hook's handler
    // (installed by with_options) only sets a flag.
    assert_eq!(unsafe { libc::raise(libc::SIGHUP) }, 0);
    s.tick(Instant::now()).unwrap();
    assert!(FileSinkCounters::get(&c.reopens) >= 1);
    s.write_batch(b"after\n").unwrap();
    s.close().unwrap();
    assert_eq!(read_all(&moved), b"before\n");
    assert_eq!(read_all(&path), b"after\n");
}

#[test]
fn external_truncate_leaves_no_nul_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ct.log");
    let mut s = FileSink::open(&path).unwrap();
    s.write_batch(&lines(0..100)).unwrap();
    // What logrotate's copytruncate does after copying.
    fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(0)
        .unwrap();
    s.write_batch(&lines(100..101)).unwrap();
    s.close().unwrap();
    let body = read_all(&path);
    assert!(!body.contains(&0), "NUL bytes after truncate");
    assert_eq!(body, lines(100..101));
}

#[test]
fn fsync_policies_sync_when_told() {
    let dir = tempfile::tempdir().unwrap();
    let mut every = FileSink::with_options(
        dir.path().join("e.log"),
        FileSinkOptions {
            fsync: FsyncPolicy::EveryBatch,
            ..Default::default()
        },
    )
    .unwrap();
    let c = every.counters();
    for i in 0..3 {
        every.write_batch(&lines(i..i + 1)).unwrap();
    }
    assert_eq!(FileSinkCounters::get(&c.syncs), 3);

    let mut timed = FileSink::with_options(
        dir.path().join("t.log"),
        FileSinkOptions {
            fsync: FsyncPolicy::EveryMs(300),
            ..Default::default()
        },
    )
    .unwrap();
    let c = timed.counters();
    timed.write_batch(&lines(0..1)).unwrap();
    timed.tick(Instant::now()).unwrap();
    assert_eq!(FileSinkCounters::get(&c.syncs), 0);
    std::thread::sleep(Duration::from_millis(350));
    timed.tick(Instant::now()).unwrap();
    assert_eq!(FileSinkCounters::get(&c.syncs), 1);
    // Nothing new written: no further sync.
    std::thread::sleep(Duration::from_millis(350));
    timed.tick(Instant::now()).unwrap();
    assert_eq!(FileSinkCounters::get(&c.syncs), 1);

    let mut never = FileSink::open(dir.path().join("n.log")).unwrap();
    let c = never.counters();
    never.write_batch(&lines(0..1)).unwrap();
    never.flush().unwrap();
    assert_eq!(FileSinkCounters::get(&c.syncs), 0);
    assert!(FileSink::with_options(
        dir.path().join("z.log"),
        FileSinkOptions {
            max_size_bytes: Some(0),
            ..Default::default()
        }
    )
    .is_err());
}

#[test]
fn a_filling_tmpfs_is_survived_losslessly() {
    let Some(fs_) = Tmpfs::mount("4m") else {
        return;
    };
    let filler = fs_.path().join("filler");
    // Leave about 16 KiB free.
    fs::write(&filler, vec![b'f'; 4080 * 1024]).unwrap();
    let path = fs_.path().join("full.log");
    let sink = FileSink::open(&path).unwrap();
    let counters = sink.counters();
    let logger = Logger::start(
        LoggerConfig {
            ring_capacity: 256,
            ..Default::default()
        },
        SeqLine { line_len: 32 },
        sink,
    )
    .unwrap();
    // 40 000 lines * 32 B = 1.25 MiB, more than a batch (256 KiB) plus the
    // ring: does not fit until the filler goes, and blocks the producer.
    const N: u64 = 40_000;
    let mut p = logger.producer().unwrap();
    let writer = std::thread::spawn(move || {
        for i in 0..N {
            assert!(p.log(rec(0, i)));
        }
    });
    let t0 = Instant::now();
    while FileSinkCounters::get(&counters.enospc) < 3 {
        assert!(t0.elapsed() < Duration::from_secs(20), "no ENOSPC seen");
        std::thread::sleep(Duration::from_millis(5));
    }
    // The producer is blocked (Block policy), nothing crashed.
    assert!(!writer.is_finished());
    let before = logger.stats();
    assert!(before.sink_retries >= 3, "{before:?}");
    assert_eq!(before.dropped_sink, 0);
    fs::remove_file(&filler).unwrap();
    writer.join().unwrap();
    let s = logger.shutdown().unwrap();
    assert_eq!(s.written_records, N, "{s:?}");
    assert_eq!(s.dropped_sink + s.dropped_shutdown + s.dropped_full, 0);
    assert!(s.sink_errors >= 3);
    let got = parse_lines(&read_all(&path));
    assert_complete_and_ordered(&got, 1, N);
    assert_eq!(counters.enospc.load(Ordering::Relaxed), s.sink_retries);
}

/// With the drop policy, a sink that keeps failing (ENOSPC) makes the
/// producer drop and count, never block; the books balance at shutdown.
#[test]
fn drop_policy_producers_see_drops_not_the_sink_error() {
    let logger = Logger::start(
        LoggerConfig {
            ring_capacity: 64,
            backpressure: dplog_core::Backpressure::Drop,
            shutdown_timeout_ms: 200,
            ..Default::default()
        },
        SeqLine { line_len: 32 },
        FileSink::open("/dev/full").unwrap(),
    )
    .unwrap();
    let mut p = logger.producer().unwrap();
    let t0 = Instant::now();
    let mut refused = 0u64;
    for i in 0..200_000 {
        if !p.log(rec(0, i)) {
            refused += 1;
        }
    }
    // The producer never waited on the failing sink.
    assert!(t0.elapsed() < Duration::from_secs(10));
    drop(p);
    let s = match logger.shutdown() {
        Ok(s) => s,
        Err((s, _)) => s,
    };
    assert_eq!(s.produced, 200_000);
    assert_eq!(s.dropped_full, refused);
    assert!(refused > 0);
    assert_eq!(s.written_records, 0);
    assert!(s.sink_retries >= 1);
    assert_eq!(
        s.written_records + s.dropped_full + s.dropped_sink + s.dropped_shutdown,
        s.produced,
        "{s:?}"
    );
}

/// CSV-style rows `i,i*7\n`.
fn rows(r: std::ops::Range<u64>) -> Vec<u8> {
    let mut v = Vec::new();
    for i in r {
        v.extend_from_slice(format!("{i},{}\n", i * 7).as_bytes());
    }
    v
}

#[test]
fn a_header_is_written_once_per_file_across_runs_rotations_and_reopens() {
    const H: &[u8] = b"id,value\n";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.csv");
    let opts = || FileSinkOptions {
        header: Some(H.to_vec()),
        ..Default::default()
    };
    // Two runs appending to one file, each formatter starting its stream
    // with the header: the file has it once.
    for run in 0..2u64 {
        let mut s = FileSink::with_options(&path, opts()).unwrap();
        let mut batch = H.to_vec();
        batch.extend(rows(run * 10..run * 10 + 5));
        s.write_batch(&batch).unwrap();
        s.write_batch(&rows(run * 10 + 5..run * 10 + 10)).unwrap();
        s.close().unwrap();
    }
    let mut want = H.to_vec();
    want.extend(rows(0..10));
    want.extend(rows(10..20));
    assert_eq!(
        String::from_utf8(read_all(&path)).unwrap(),
        String::from_utf8(want).unwrap()
    );
    // Without the option the bytes are written as given (the old
    // behaviour: the header twice).
    let plain = dir.path().join("plain.csv");
    for _ in 0..2 {
        let mut s = FileSink::open(&plain).unwrap();
        let mut batch = H.to_vec();
        batch.extend(rows(0..2));
        s.write_batch(&batch).unwrap();
        s.close().unwrap();
    }
    assert_eq!(
        String::from_utf8(read_all(&plain))
            .unwrap()
            .matches("id,value")
            .count(),
        2
    );

    // Size rotation: every file starts with the header, exactly once, and
    // the rows are all there in order.
    let rpath = dir.path().join("r.csv");
    let mut s = FileSink::with_options(
        &rpath,
        FileSinkOptions {
            max_size_bytes: Some(200),
            ..opts()
        },
    )
    .unwrap();
    let mut first = H.to_vec();
    first.extend(rows(0..20));
    s.write_batch(&first).unwrap();
    for b in 1..10u64 {
        s.write_batch(&rows(b * 20..(b + 1) * 20)).unwrap();
    }
    s.close().unwrap();
    let files = all_files(&rpath);
    assert!(files.len() >= 5, "{} files", files.len());
    let mut body = Vec::new();
    for f in &files {
        let b = read_all(f);
        assert!(b.starts_with(H), "{} has no header", f.display());
        assert_eq!(
            String::from_utf8_lossy(&b).matches("id,value").count(),
            1,
            "{}",
            f.display()
        );
        assert!(
            b.len() <= 200 + H.len(),
            "{} is {} bytes",
            f.display(),
            b.len()
        );
        body.extend_from_slice(&b[H.len()..]);
    }
    assert_eq!(body, rows(0..200));

    // An external `mv` then reopen: the new file gets the header too.
    let mpath = dir.path().join("m.csv");
    let mut s = FileSink::with_options(&mpath, opts()).unwrap();
    let mut batch = H.to_vec();
    batch.extend(rows(0..3));
    s.write_batch(&batch).unwrap();
    fs::rename(&mpath, dir.path().join("m.csv.old")).unwrap();
    s.reopen().unwrap();
    s.write_batch(&rows(3..6)).unwrap();
    s.close().unwrap();
    let mut want = H.to_vec();
    want.extend(rows(3..6));
    assert_eq!(read_all(&mpath), want);
}

#[test]
fn keeping_zero_rotated_files_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.log");
    for (key, opts) in [
        (
            "keep_files",
            FileSinkOptions {
                max_size_bytes: Some(4096),
                keep_files: Some(0),
                ..Default::default()
            },
        ),
        (
            "keep_days",
            FileSinkOptions {
                rotate_interval_ms: Some(1000),
                keep_days: Some(0),
                ..Default::default()
            },
        ),
    ] {
        let e = FileSink::with_options(&path, opts).err().unwrap();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(
            e.to_string(),
            format!(
                "{key} = 0 would delete every rotated file of {}; leave {key} out to keep them all, or give 1 or more",
                path.display()
            )
        );
        // Refused before anything was created.
        assert!(!path.exists());
    }
    // One rotated file kept is fine.
    assert!(FileSink::with_options(
        &path,
        FileSinkOptions {
            keep_files: Some(1),
            ..Default::default()
        }
    )
    .is_ok());
}

/// Parses every regular file in `dir` and every descriptor in `held`
/// (files deleted while the sink wrote to them, read through a descriptor
/// opened before the delete) into record sequence numbers, sorted.
/// Panics on a torn or malformed line.
fn seqs_on_disk(dir: &Path, held: &mut [fs::File]) -> Vec<u64> {
    use std::io::Read;
    let mut bodies = Vec::new();
    for ent in fs::read_dir(dir).unwrap() {
        let p = ent.unwrap().path();
        if p.is_file() {
            bodies.push((p.display().to_string(), read_all(&p)));
        }
    }
    for (i, f) in held.iter_mut().enumerate() {
        let mut b = Vec::new();
        f.read_to_end(&mut b).unwrap();
        bodies.push((format!("deleted file {i}"), b));
    }
    let mut seqs = Vec::new();
    for (name, b) in &bodies {
        assert!(b.is_empty() || b.ends_with(b"\n"), "{name} ends torn");
        for line in b.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
            seqs.push(
                strict_seq(line, 64).unwrap_or_else(|| {
                    panic!("{name}: bad line {:?}", String::from_utf8_lossy(line))
                }),
            );
        }
    }
    seqs.sort_unstable();
    seqs
}

/// The sequence number of `line` (without its `\n`) if it is exactly what
/// `SeqLine { line_len }` writes for producer 0, else `None` (a torn or
/// glued record).
fn strict_seq(line: &[u8], line_len: usize) -> Option<u64> {
    let s = std::str::from_utf8(line).ok()?;
    let seq: u64 = s.strip_prefix("p0 s")?.get(..10)?.parse().ok()?;
    let mut want = Vec::new();
    SeqLine { line_len }.format(&rec(0, seq), &mut want);
    (want[..want.len() - 1] == *line).then_some(seq)
}

/// The live file is moved away or deleted from outside while the logger
/// writes with size rotation, with and without a reopen (SIGHUP or
/// `Logger::reopen`) after it: nothing is refused, nothing is dropped
/// under `block`, and `written_records` is exactly the number of records
/// in the files (rotated, moved and deleted ones; a deleted file is read
/// through a descriptor the test opened before deleting it).
#[test]
fn a_moved_or_deleted_live_file_is_replaced_and_every_record_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.log");
    let sink = FileSink::with_options(
        &path,
        FileSinkOptions {
            max_size_bytes: Some(64 * 1024),
            reopen_on_sighup: true,
            ..Default::default()
        },
    )
    .unwrap();
    let c = sink.counters();
    let logger = Logger::start(LoggerConfig::default(), SeqLine { line_len: 64 }, sink).unwrap();
    let mut p = logger.producer().unwrap();
    // 40 rounds of 3000 records of 64 bytes (7.7 MB): about three size
    // rotations per round, and one outside move or delete.
    const ROUNDS: u64 = 40;
    const PER: u64 = 3000;
    let mut held = Vec::new();
    let mut touched = 0;
    for round in 0..ROUNDS {
        for i in 0..PER {
            assert!(p.log(rec(0, round * PER + i)));
        }
        // Act while the consumer is in the middle of the round.
        let t0 = Instant::now();
        loop {
            let s = logger.stats();
            if s.written_records + s.dropped_sink >= round * PER + PER / 2 {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "stalled: {s:?}");
            std::thread::sleep(Duration::from_millis(1));
        }
        let aside = dir.path().join(format!("aside.{round}"));
        match fs::rename(&path, &aside) {
            Ok(()) => touched += 1,
            // Between a replaced file and the next: nothing to move now.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => panic!("{e}"),
        }
        let op = round % 5;
        if op == 1 || op == 3 {
            // Deleted: the descriptor keeps what the sink writes to it
            // countable.
            held.push(fs::File::open(&aside).unwrap());
            fs::remove_file(&aside).unwrap();
        }
        match op {
            // SAFETY: kill(2) on this process; the sink's signal-hook
            // handler only sets a flag.
            2 | 3 => assert_eq!(unsafe { libc::kill(libc::getpid(), libc::SIGHUP) }, 0),
            4 => logger.reopen().unwrap(),
            // The next size rotation finds the path empty.
            _ => {}
        }
    }
    drop(p);
    let s = logger.shutdown().unwrap();
    let n = ROUNDS * PER;
    assert_eq!(s.produced, n);
    assert_eq!(
        (s.dropped_sink, s.dropped_shutdown, s.dropped_full),
        (0, 0, 0),
        "{s:?}"
    );
    assert_eq!(s.written_records, n, "{s:?}");
    let seqs = seqs_on_disk(dir.path(), &mut held);
    assert_eq!(seqs.len() as u64, s.written_records);
    assert_eq!(seqs, (0..n).collect::<Vec<_>>(), "each record once");
    assert!(touched >= ROUNDS - 5, "only {touched} files moved");
    assert!(!held.is_empty());
    let get = |a: &std::sync::atomic::AtomicU64| FileSinkCounters::get(a);
    assert!(get(&c.vanished) >= 1, "no rotation found the path empty");
    assert!(get(&c.rotations) >= 2 * ROUNDS, "{}", get(&c.rotations));
    assert!(get(&c.reopens) >= 1);
}

/// The live file is deleted from outside, with no size limit and no reopen:
/// the next batch goes to a new file at the path, not into the deleted one
/// (where it would be counted written and be gone).
#[test]
fn a_deleted_live_file_without_rotation_is_replaced_at_the_next_batch() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.log");
    let mut s = FileSink::open(&path).unwrap();
    let c = s.counters();
    s.write_batch(&lines(0..10)).unwrap();
    let mut held = fs::File::open(&path).unwrap();
    fs::remove_file(&path).unwrap();
    s.write_batch(&lines(10..30)).unwrap();
    s.write_batch(&lines(30..40)).unwrap();
    s.close().unwrap();
    let mut deleted = Vec::new();
    held.read_to_end(&mut deleted).unwrap();
    assert_eq!(deleted, lines(0..10));
    assert_eq!(read_all(&path), lines(10..40));
    assert_eq!(FileSinkCounters::get(&c.vanished), 1);
}

/// The directory of the live file is renamed from outside: the sink keeps
/// writing to its file (now in the renamed directory), a size rotation
/// that cannot create a new file is deferred instead of refusing records,
/// and once the directory exists again the next attempt moves there.
#[test]
fn a_renamed_directory_defers_rotation_and_loses_nothing() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("logs");
    fs::create_dir(&dir).unwrap();
    let path = dir.join("d.log");
    let mut s = FileSink::with_options(
        &path,
        FileSinkOptions {
            max_size_bytes: Some(1000),
            ..Default::default()
        },
    )
    .unwrap();
    let c = s.counters();
    s.write_batch(&lines(0..20)).unwrap();
    let moved = top.path().join("logs.old");
    fs::rename(&dir, &moved).unwrap();
    // 36-byte lines: 20 lines fill a 1000-byte file; these need rotations.
    s.write_batch(&lines(20..60)).unwrap();
    s.write_batch(&lines(60..100)).unwrap();
    assert!(FileSinkCounters::get(&c.other_errors) >= 1);
    fs::create_dir(&dir).unwrap();
    // Deferred for ROTATE_RETRY; after it, the rotation replaces the
    // vanished file in the recreated directory.
    std::thread::sleep(dplog_sinks::file::ROTATE_RETRY + Duration::from_millis(50));
    s.write_batch(&lines(100..120)).unwrap();
    s.close().unwrap();
    let mut body = Vec::new();
    for d in [&moved, &dir] {
        let mut names: Vec<_> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        for f in names {
            body.extend(read_all(&f));
        }
    }
    // The moved directory holds the file written before and during the
    // deferral, then a rotated file or two after the directory came back.
    let got = parse_lines(&body);
    let mut seqs: Vec<u64> = got.iter().map(|&(_, s)| s).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..120).collect::<Vec<_>>());
    assert!(FileSinkCounters::get(&c.vanished) >= 1);
    assert!(path.exists());
}

/// `SeqLine` records as binary frames (`R`, 0, length, payload) whose
/// payload contains `\n` bytes, so only the framing tells where a record
/// ends; no in-band drop reports (a binary stream has none).
struct FrameSeq;

impl Formatter<Nat44SessionRecord> for FrameSeq {
    fn format(&mut self, r: &Nat44SessionRecord, out: &mut Vec<u8>) {
        let payload = frame_payload(r.timestamp_ns);
        out.extend_from_slice(&[b'R', 0]);
        out.extend_from_slice(&(payload.len() as u16).to_le_bytes());
        out.extend_from_slice(&payload);
    }
    fn format_drop_report(&mut self, _: &dplog_core::DropReport, _: &mut Vec<u8>) {}
}

/// 86 bytes: the sequence number, then a pattern with a `\n` every 10.
fn frame_payload(seq: u64) -> Vec<u8> {
    let mut p = seq.to_le_bytes().to_vec();
    p.extend((0..78u8).map(|i| if i % 10 == 9 { b'\n' } else { b'a' + i % 26 }));
    p
}

/// Decodes a file of `FrameSeq` frames into sequence numbers; panics on a
/// frame that is torn or not what `FrameSeq` writes.
fn decode_frames(b: &[u8]) -> Vec<u64> {
    let mut p = 0;
    let mut seqs = Vec::new();
    while p < b.len() {
        assert!(b.len() - p >= 4, "torn frame header at {p}");
        assert_eq!((b[p], b[p + 1]), (b'R', 0), "bad frame at {p}");
        let n = u16::from_le_bytes([b[p + 2], b[p + 3]]) as usize;
        assert!(b.len() - p - 4 >= n, "torn frame at {p}");
        let payload = &b[p + 4..p + 4 + n];
        let seq = u64::from_le_bytes(payload[..8].try_into().unwrap());
        assert_eq!(payload, frame_payload(seq), "bad frame at {p}");
        seqs.push(seq);
        p += 4 + n;
    }
    seqs
}

/// Producer 0 logs `0..n1`, waits for `go`, then logs `n1..n1 + n2`.
fn two_phase_producer(
    mut p: dplog_core::LogProducer<Nat44SessionRecord>,
    n1: u64,
    n2: u64,
) -> (
    std::thread::JoinHandle<()>,
    std::sync::mpsc::Receiver<()>,
    std::sync::mpsc::Sender<()>,
) {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        for i in 0..n1 {
            assert!(p.log(rec(0, i)));
        }
        done_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        for i in n1..n1 + n2 {
            assert!(p.log(rec(0, i)));
        }
    });
    (h, done_rx, go_tx)
}

/// Fills a tmpfs with the logger running under `block` with
/// `sink_retry_timeout_ms`: batches are given up on while the disk is
/// full, then the filler goes and the rest is written. Returns the stats
/// and the log file's bytes.
fn fill_drop_and_recover<F: Formatter<Nat44SessionRecord>>(
    fs_: &Tmpfs,
    fmt: F,
    n1: u64,
    n2: u64,
) -> (dplog_core::Stats, Vec<u8>, u64) {
    let filler = fs_.path().join("filler");
    // Leave 25 pages (100 KiB) free of the 2 MiB.
    fs::write(&filler, vec![b'f'; 2048 * 1024 - 100 * 1024]).unwrap();
    let path = fs_.path().join("full.log");
    let sink = FileSink::open(&path).unwrap();
    let c = sink.counters();
    let logger = Logger::start(
        LoggerConfig {
            ring_capacity: 1024,
            sink_retry_timeout_ms: Some(100),
            ..Default::default()
        },
        fmt,
        sink,
    )
    .unwrap();
    let (h, done, go) = two_phase_producer(logger.producer().unwrap(), n1, n2);
    done.recv().unwrap();
    let t0 = Instant::now();
    while logger.stats().dropped_sink == 0 {
        assert!(t0.elapsed() < Duration::from_secs(60), "nothing dropped");
        std::thread::sleep(Duration::from_millis(5));
    }
    fs::remove_file(&filler).unwrap();
    go.send(()).unwrap();
    h.join().unwrap();
    // The run lost records: shutdown says so, the counters say how many.
    let s = match logger.shutdown() {
        Ok(s) => s,
        Err((s, e)) => {
            assert!(e.to_string().contains("No space left"), "{e}");
            s
        }
    };
    (s, read_all(&path), FileSinkCounters::get(&c.cut_back))
}

/// A full disk under `sink_retry_timeout_ms`: every record in the file is
/// whole (a write that stopped inside one was cut back), no record is glued
/// onto another, `written_records` is the number of records in the file,
/// and each gap is announced in-band by a drop report right after it whose
/// count is the size of the gap; the report counts sum to `dropped_sink`.
#[test]
fn a_full_disk_keeps_records_whole_and_reports_the_gap_in_band() {
    let Some(fs_) = Tmpfs::mount("2m") else {
        return;
    };
    // 90-byte lines: a 4 KiB page is not a whole number of them.
    let (n1, n2) = (20_000, 5_000);
    let (s, body, cut) = fill_drop_and_recover(&fs_, SeqLine { line_len: 90 }, n1, n2);
    assert_eq!(s.produced, n1 + n2);
    assert_eq!(s.dropped_full + s.dropped_shutdown, 0, "{s:?}");
    assert!(s.dropped_sink > 0, "{s:?}");
    assert_eq!(s.written_records + s.dropped_sink, n1 + n2, "{s:?}");
    assert!(body.ends_with(b"\n"));
    let (mut records, mut reported, mut reports) = (0u64, 0u64, 0u64);
    let mut last: Option<u64> = None;
    let mut pending_report: Option<u64> = None;
    for line in body.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix(b"dplog: ") {
            let text = String::from_utf8_lossy(rest);
            assert!(text.contains(" dropped by the sink"), "{text}");
            assert!(text.contains("; wall clock "), "{text}");
            let n: u64 = text.split(' ').next().unwrap().parse().unwrap();
            assert!(pending_report.is_none(), "two reports in a row");
            pending_report = Some(n);
            reported += n;
            reports += 1;
            continue;
        }
        let seq = strict_seq(line, 90)
            .unwrap_or_else(|| panic!("torn or glued: {:?}", String::from_utf8_lossy(line)));
        let gap = seq - last.map_or(0, |l| l + 1);
        assert!(last.is_none_or(|l| seq > l), "{seq} after {last:?}");
        // A gap is followed by its report; records follow each other.
        assert_eq!(gap, pending_report.take().unwrap_or(0), "at {seq}");
        last = Some(seq);
        records += 1;
    }
    assert_eq!(last, Some(n1 + n2 - 1), "the end is written");
    assert!(pending_report.is_none());
    assert_eq!(records, s.written_records, "{s:?}");
    assert_eq!(reported, s.dropped_sink, "{s:?}");
    assert_eq!(reports, s.drop_reports, "{s:?}");
    assert!(cut >= 1, "no write stopped inside a record");
}

/// The same with binary frames: the file decodes frame by frame to its end
/// and holds exactly `written_records` records, in order.
#[test]
fn a_full_disk_keeps_binary_frames_whole_and_counts_them() {
    let Some(fs_) = Tmpfs::mount("2m") else {
        return;
    };
    let (n1, n2) = (20_000, 5_000);
    let (s, body, cut) = fill_drop_and_recover(&fs_, FrameSeq, n1, n2);
    assert_eq!(s.dropped_full + s.dropped_shutdown, 0, "{s:?}");
    assert!(s.dropped_sink > 0, "{s:?}");
    assert_eq!(s.written_records + s.dropped_sink, n1 + n2, "{s:?}");
    let seqs = decode_frames(&body);
    assert_eq!(seqs.len() as u64, s.written_records, "{s:?}");
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "out of order");
    assert_eq!(seqs.last(), Some(&(n1 + n2 - 1)));
    assert!(cut >= 1, "no write stopped inside a frame");
}

/// A disk that stays full until shutdown under `block` (no retry timeout):
/// the batch given up at the shutdown deadline leaves no torn record, and
/// `written_records` is the number of records in the file.
#[test]
fn a_disk_full_at_shutdown_leaves_no_torn_record() {
    let Some(fs_) = Tmpfs::mount("1m") else {
        return;
    };
    let filler = fs_.path().join("filler");
    fs::write(&filler, vec![b'f'; 1024 * 1024 - 40 * 1024]).unwrap();
    let path = fs_.path().join("full.log");
    let sink = FileSink::open(&path).unwrap();
    let logger = Logger::start(
        LoggerConfig {
            shutdown_timeout_ms: 300,
            ..Default::default()
        },
        SeqLine { line_len: 90 },
        sink,
    )
    .unwrap();
    const N: u64 = 2000; // 180 KB: more than the 40 KiB free
    let mut p = logger.producer().unwrap();
    for i in 0..N {
        assert!(p.log(rec(0, i)));
    }
    drop(p);
    let t0 = Instant::now();
    while logger.stats().sink_retries < 3 {
        assert!(t0.elapsed() < Duration::from_secs(60), "no retry seen");
        std::thread::sleep(Duration::from_millis(5));
    }
    let (s, e) = logger.shutdown().unwrap_err();
    assert!(e.to_string().contains("No space left"), "{e}");
    assert_eq!(s.dropped_sink, 0, "{s:?}");
    assert!(s.dropped_shutdown > 0, "{s:?}");
    assert_eq!(s.written_records + s.dropped_shutdown, N, "{s:?}");
    let body = read_all(&path);
    assert!(body.ends_with(b"\n"), "torn record at the end");
    let seqs: Vec<u64> = body
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| strict_seq(l, 90).expect("whole record"))
        .collect();
    assert_eq!(seqs, (0..s.written_records).collect::<Vec<_>>());
}

/// A run killed inside a write (a second SIGTERM exits at once) can leave
/// a torn line at the end of the file; the next run appending to it must
/// not glue its first record onto that fragment.
#[test]
fn appending_to_a_file_that_ends_in_a_torn_line_keeps_the_first_record_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("torn.log");
    fs::write(&path, b"whole\n{\"torn\":1").unwrap();
    let mut s = FileSink::open(&path).unwrap();
    s.write_batch(b"{\"a\":1}\n{\"b\":2}\n").unwrap();
    s.close().unwrap();
    assert_eq!(
        read_all(&path),
        b"whole\n{\"torn\":1\n{\"a\":1}\n{\"b\":2}\n".to_vec()
    );

    // Through a reopen (logrotate's copytruncate leaves what it likes).
    fs::write(&path, b"x").unwrap();
    let mut s = FileSink::open(&path).unwrap();
    s.write_batch(b"1\n").unwrap();
    fs::write(&path, b"partial").unwrap();
    s.reopen().unwrap();
    s.write_batch(b"2\n").unwrap();
    s.close().unwrap();
    assert_eq!(read_all(&path), b"partial\n2\n".to_vec());

    // A terminated or empty file gets nothing added; a binary batch
    // (frames) is never prefixed with a newline.
    fs::write(&path, b"done\n").unwrap();
    let mut s = FileSink::open(&path).unwrap();
    s.write_batch(b"next\n").unwrap();
    s.close().unwrap();
    assert_eq!(read_all(&path), b"done\nnext\n".to_vec());
    fs::write(&path, b"x").unwrap();
    let mut s = FileSink::open(&path).unwrap();
    let frame = [b'R', 0, 1, 0, 7];
    s.write_batch(&frame).unwrap();
    s.close().unwrap();
    assert_eq!(read_all(&path), [&b"x"[..], &frame[..]].concat());
}
