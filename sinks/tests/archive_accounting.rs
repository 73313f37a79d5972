//! The archive sink's accounting: a record counts written once its block
//! is in a segment file. On a full disk, behind a real logger and on its
//! own: every record counted written is in the archive afterwards,
//! written plus dropped is every record produced, and a batch refused
//! while the disk is full is taken whole, once, when there is room.

use std::path::Path;
use std::time::{Duration, Instant};

use dplog_core::schema::{HasSchema, Schema};
use dplog_core::{Accepted, Logger, LoggerConfig, Record, RecordHeader, Sink, Stats};
use dplog_formatters::binary::BinaryEncoder;
use dplog_formatters::{Format, FormatSpec};
use dplog_sinks::archive::{list_segments, ArchiveReader, ArchiveSink, ArchiveSinkOptions};
use dplog_testkit::tmpfs::Tmpfs;

#[path = "../../testkit/fixtures/lb_conn.rs"]
mod lb_conn;

/// An `lbConn` record ([`lb_conn::schema`], a user's type: its lifecycle
/// makes the archive index its connection keys and summarize each
/// segment).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct LbConn {
    header: RecordHeader,
    time_ns: u64,
    vip: u32,
    client: u32,
    vport: u16,
    cport: u16,
    event: u8,
    pad0: [u8; 3],
    backend: u32,
    pad1: [u8; 4],
    bytes_in: u64,
    bytes_out: u64,
    pad2: [u8; 8],
}
const _: () = assert!(std::mem::size_of::<LbConn>() == 64);

impl Record for LbConn {
    const SCHEMA_ID: u16 = lb_conn::ID;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C) without padding (the pads are fields; 64 bytes,
// asserted above), laid out as lb_conn::fields_only describes it:
// connTime at 8, vip 16, clientAddr 20, vport 24, clientPort 26,
// connEvent 28, backendAddr 32, bytesIn 40, bytesOut 48.
unsafe impl HasSchema for LbConn {
    fn schema() -> &'static Schema {
        static S: std::sync::OnceLock<Schema> = std::sync::OnceLock::new();
        S.get_or_init(lb_conn::schema)
    }
}

impl From<lb_conn::Conn> for LbConn {
    fn from(c: lb_conn::Conn) -> LbConn {
        LbConn {
            header: RecordHeader::of::<LbConn>(),
            time_ns: c.time_ns,
            vip: c.vip,
            client: c.client,
            vport: c.vport,
            cport: c.cport,
            event: c.event,
            pad0: [0; 3],
            backend: c.backend,
            pad1: [0; 4],
            bytes_in: c.bytes_in,
            bytes_out: c.bytes_out,
            pad2: [0; 8],
        }
    }
}

/// Connection event `i` of `n`, spread evenly over `span` ns of event
/// time from [`lb_conn::T0`]; its number in `bytesIn`, its other fields
/// scrambled (so blocks compress about as real traffic's do).
fn conn(i: u64, n: u64, span: u64) -> lb_conn::Conn {
    // splitmix64 of the number.
    let mut x = i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    lb_conn::Conn {
        time_ns: lb_conn::T0 + i * (span / n) + (x >> 44),
        vip: 0xC000_0200 | (x & 3) as u32,
        client: 0x0A00_0000 | (x >> 16) as u32 & 0xff_ffff,
        vport: [80, 443][(x >> 2) as usize & 1],
        cport: (x >> 48) as u16,
        event: [lb_conn::OPEN, lb_conn::CLOSE][(i & 1) as usize],
        backend: 0xC633_6400 | (x >> 40) as u32 & 0xff,
        bytes_in: i,
        bytes_out: x & 0xf_ffff,
    }
}

/// 20 hours, in ns.
const HOURS_20: u64 = 20 * 3_600_000_000_000;

/// The numbers (`bytesIn`) of every record the archive in `dir` holds,
/// its open segment included, sorted; a reading problem fails the test.
fn archived(dir: &Path) -> Vec<u64> {
    let mut r = ArchiveReader::open(dir).unwrap();
    let mut v = Vec::new();
    r.for_each(0, u64::MAX, |s, rec| {
        v.push(s.field("bytesIn").unwrap().1.read_uint(rec));
        true
    })
    .unwrap();
    assert!(r.problems().is_empty(), "{:?}", r.problems());
    v.sort_unstable();
    v
}

/// Logs `n` connections through an archive sink in `dir` (blocks of 512
/// rows, hourly segments), a refused batch given up on after 300 ms;
/// waits for a batch to be given up on before the shutdown (300 ms to
/// shut down). Returns the logger's stats at shutdown.
fn run(dir: &Path, n: u64) -> Stats {
    let sink = ArchiveSink::open(
        dir,
        ArchiveSinkOptions {
            block_rows: 512,
            ..Default::default()
        },
    )
    .unwrap();
    let spec = FormatSpec {
        kind: Format::Binary,
        ..Default::default()
    };
    let logger = Logger::<LbConn>::start(
        LoggerConfig {
            sink_retry_timeout_ms: Some(300),
            shutdown_timeout_ms: 300,
            ..Default::default()
        },
        spec.formatter(&[LbConn::schema()]).unwrap(),
        sink,
    )
    .unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..n {
        assert!(p.log(LbConn::from(conn(i, n, HOURS_20))));
    }
    drop(p);
    let t0 = Instant::now();
    while logger.stats().dropped_sink == 0 && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    match logger.shutdown() {
        Ok(s) => s,
        // The sink's error (ENOSPC): the stats say what was lost.
        Err((s, _)) => s,
    }
}

/// The archive fills its 256 KiB file system part way through 20 h of
/// connections. With 36,782 records the last seal takes the last pages,
/// so the next segment's header cannot be written (no open segment is
/// left); with 30,000 a block of the open segment is the first write
/// refused. Either way the blocks the sink held then are never written:
/// they count as dropped, not written, and the batches refused after the
/// retry timeout are dropped too.
#[test]
fn on_a_full_disk_every_record_counted_written_is_in_the_archive() {
    for n in [36_782, 30_000] {
        let Some(fs) = Tmpfs::mount("256k") else {
            return;
        };
        let s = run(fs.path(), n);
        let segments: Vec<String> = list_segments(fs.path())
            .unwrap()
            .iter()
            .map(|s| s.path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        let dropped = s.dropped_sink + s.dropped_shutdown + s.dropped_format + s.dropped();
        assert_eq!(s.produced, n, "{s:?}");
        assert_eq!(s.written_records + dropped, n, "{s:?}");
        assert!(s.dropped_sink > 0, "the disk never filled: {s:?}");
        assert_eq!(s.sink_pending, 0, "{s:?}");
        let got = archived(fs.path());
        assert_eq!(
            got.len() as u64,
            s.written_records,
            "{n} records: {s:?}, segments {segments:?}"
        );
        // Each once, and only records produced.
        assert!(got.windows(2).all(|w| w[0] < w[1]));
        assert!(got.last().is_some_and(|&l| l < n));
    }
}

/// A logger's flush writes the archive's partial blocks, and its stats
/// count their records written when it returns: 20 rounds of records
/// formatted, then flushed.
#[test]
fn a_logger_flush_counts_the_records_it_wrote_before_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let sink = ArchiveSink::open(dir.path(), ArchiveSinkOptions::default()).unwrap();
    let spec = FormatSpec {
        kind: Format::Binary,
        ..Default::default()
    };
    let logger = Logger::<LbConn>::start(
        LoggerConfig::default(),
        spec.formatter(&[LbConn::schema()]).unwrap(),
        sink,
    )
    .unwrap();
    const ROUNDS: u64 = 20;
    const PER: u64 = 50;
    const N: u64 = ROUNDS * PER;
    let mut p = logger.producer().unwrap();
    for round in 1..=ROUNDS {
        for i in (round - 1) * PER..round * PER {
            assert!(p.log(LbConn::from(conn(i, N, 1_000_000_000))));
        }
        let t0 = Instant::now();
        while logger.stats().formatted < round * PER {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "{:?}",
                logger.stats()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        logger.flush().unwrap();
        // Each flush ends a partial block (of the default 16384 rows).
        let s = logger.stats();
        assert_eq!(
            (s.written_records, s.sink_pending),
            (round * PER, 0),
            "round {round}: {s:?}"
        );
    }
    assert_eq!(archived(dir.path()), (0..N).collect::<Vec<_>>());
    drop(p);
    let s = logger.shutdown().unwrap();
    assert_eq!(s.written_records, N, "{s:?}");
}

/// Binary batches of `n` connections 1 ms apart, `per` to a batch.
fn batches(n: u64, per: u64) -> Vec<Vec<u8>> {
    let s = LbConn::schema();
    let mut enc = BinaryEncoder::try_new(&[s]).unwrap();
    let mut out: Vec<Vec<u8>> = Vec::new();
    for i in 0..n {
        if i % per == 0 {
            out.push(Vec::new());
        }
        let b = out.last_mut().unwrap();
        assert!(enc.push(&conn(i, n, n * 1_000_000).bytes(), b));
    }
    out
}

fn opts() -> ArchiveSinkOptions {
    ArchiveSinkOptions {
        block_rows: 100,
        ..Default::default()
    }
}

/// The disk full before the first segment: the sink holds the rows of
/// the batch it took, refuses the next batch (retryably) until they are
/// written, and its drain gives up at its deadline; with room again the
/// same batch is taken, the held rows reported written by the next poll,
/// and the archive holds every record once, in order.
#[test]
fn on_a_full_disk_rows_are_held_and_the_refused_batch_is_taken_once_there_is_room() {
    let Some(fs) = Tmpfs::mount("256k") else {
        return;
    };
    let dir = fs.path().join("arch");
    std::fs::create_dir(&dir).unwrap();
    let mut sink = ArchiveSink::open(&dir, opts()).unwrap();
    assert!(fs.fill("filler") > 0);
    let b = batches(1000, 250);
    // Two blocks of 100 rows and 50 rows of a third: nothing written
    // (the segment's header cannot be), so the batch is pending.
    assert_eq!(sink.write_batch(&b[0]).unwrap(), Accepted::Pending);
    assert_eq!(sink.poll(), Default::default());
    let e = sink.write_batch(&b[1]).unwrap_err();
    assert!(e.is_retryable(), "{e}");
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
    let e = sink
        .drain(Instant::now() + Duration::from_millis(50))
        .unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
    assert_eq!(sink.poll(), Default::default());
    std::fs::remove_file(fs.path().join("filler")).unwrap();
    // The refused batch again. The drain ended the held partial block
    // (blocks of 100, 100 and 50 rows queued): they are written with two
    // blocks of this batch, 50 of its rows held.
    assert_eq!(sink.write_batch(&b[1]).unwrap(), Accepted::Pending);
    let p = sink.poll();
    assert_eq!((p.delivered_records, p.failed_records), (450, 0));
    assert_eq!(p.delivered_bytes, 450 * (4 + 64));
    // Those 50 and the next batch's 250 end three whole blocks: every row
    // taken is written, so the batch is delivered, and the poll reports
    // the 50 of the batch before.
    assert_eq!(sink.write_batch(&b[2]).unwrap(), Accepted::Delivered);
    assert_eq!(sink.poll().delivered_records, 50);
    assert_eq!(sink.write_batch(&b[3]).unwrap(), Accepted::Pending);
    assert_eq!(sink.poll().delivered_records, 200);
    sink.close().unwrap();
    assert_eq!(sink.poll().delivered_records, 50);
    assert_eq!(archived(&dir), (0..1000).collect::<Vec<_>>());
}

/// Closing on a full disk gives up on the rows not written: the close
/// fails with the write error and the next poll reports them failed;
/// the blocks written before stay in the open segment, which the next
/// open (with room) seals: exactly the records reported written.
#[test]
fn closing_on_a_full_disk_reports_the_rows_not_written_as_failed() {
    let Some(fs) = Tmpfs::mount("256k") else {
        return;
    };
    let dir = fs.path().join("arch");
    std::fs::create_dir(&dir).unwrap();
    let mut sink = ArchiveSink::open(&dir, opts()).unwrap();
    let b = batches(1000, 250);
    assert_eq!(sink.write_batch(&b[0]).unwrap(), Accepted::Pending);
    let first = sink.poll();
    assert_eq!((first.delivered_records, first.failed_records), (200, 0));
    fs.fill("filler");
    // Taken whole; its blocks may not be written.
    assert_eq!(sink.write_batch(&b[1]).unwrap(), Accepted::Pending);
    let second = sink.poll();
    let e = sink.close().unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
    let last = sink.poll();
    let written = first.delivered_records + second.delivered_records + last.delivered_records;
    let failed = second.failed_records + last.failed_records;
    assert_eq!(written + failed, 500);
    assert!(
        failed > 0,
        "every block was written: make the blocks larger"
    );
    // Closed: a second close does nothing, a batch is refused for good.
    sink.close().unwrap();
    assert!(!sink.write_batch(&b[2]).unwrap_err().is_retryable());
    drop(sink);
    std::fs::remove_file(fs.path().join("filler")).unwrap();
    let again = ArchiveSink::open(&dir, opts()).unwrap();
    let c = again.counters();
    assert_eq!(
        c.segments_recovered
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    drop(again);
    assert!(list_segments(&dir)
        .unwrap()
        .iter()
        .all(|s| s.range.is_some()));
    assert_eq!(archived(&dir), (0..written).collect::<Vec<_>>());
}

/// A bad frame anywhere in a batch refuses the whole batch, before any
/// of it is taken: the runtime counts all its records dropped, so none
/// may be in the archive. The batch before and the one after are kept.
#[test]
fn a_batch_with_a_bad_frame_is_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut sink = ArchiveSink::open(dir.path(), opts()).unwrap();
    let b = batches(300, 100);
    assert_eq!(sink.write_batch(&b[0]).unwrap(), Accepted::Delivered);
    // Good records, then one of a schema no frame declared, of the wrong
    // size, or a calibration frame that is not one.
    let mut unknown = b[1].clone();
    let mut rec = conn(0, 1, 1).bytes();
    rec[2..4].copy_from_slice(&999u16.to_ne_bytes());
    unknown.extend_from_slice(&[b'R', 0, 64, 0]);
    unknown.extend_from_slice(&rec);
    let mut short = b[1].clone();
    short.extend_from_slice(&[b'R', 0, 60, 0]);
    short.extend_from_slice(&conn(0, 1, 1).bytes()[..60]);
    let mut cal = b[1].clone();
    cal.extend_from_slice(&[b'C', 0, 3, 0, 1, 2, 3]);
    for (bad, says) in [
        (&unknown, "record of schema id 999 before its schema frame"),
        (&short, "record of 60 bytes, its schema lbConn has 64"),
        (&cal, "calibration frame of 3 bytes"),
    ] {
        let e = sink.write_batch(bad).unwrap_err();
        assert!(!e.is_retryable(), "{e}");
        assert!(e.to_string().contains(says), "{e}");
        assert_eq!(sink.poll(), Default::default());
    }
    assert_eq!(sink.write_batch(&b[2]).unwrap(), Accepted::Delivered);
    sink.close().unwrap();
    assert_eq!(sink.poll(), Default::default());
    let want: Vec<u64> = (0..100).chain(200..300).collect();
    assert_eq!(archived(dir.path()), want);
}
