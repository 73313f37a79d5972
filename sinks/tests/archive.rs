//! The archive sink on its own: any schema round-trips byte for byte, in
//! time order; segments roll by time and size; retention removes whole
//! segments; a second writer and a non-binary stream are refused; an open
//! segment is readable while written; TSC calibrations are kept per block
//! and repeated per segment, and a version-1 segment still reads.

use std::path::Path;
use std::time::{Duration, Instant};

use dplog_core::schema::{FieldDef, FieldKind, Schema};
use dplog_core::{Accepted, Sink};
use dplog_formatters::binary::BinaryEncoder;
use dplog_formatters::TscCalibration;
use dplog_sinks::archive::format::{self, key_hash32, key_of, KIND_CALIBRATION, KIND_DATA};
use dplog_sinks::archive::{
    list_segments, ArchiveReader, ArchiveSink, ArchiveSinkOptions, Segment,
};

#[path = "../../testkit/fixtures/lb_conn.rs"]
mod lb_conn;
#[path = "../../testkit/fixtures/tsc_archive.rs"]
mod tsc_archive;
use tsc_archive::{cal_of, write_calibrated, Books, T0};

/// A 48-byte record of a type the archive knows nothing about: an
/// ns time, an IPv6 address, a MAC, a rule id and a reason.
fn acl_schema() -> Schema {
    Schema::new(
        300,
        "aclDrop",
        48,
        vec![
            FieldDef::new("dropTime", 8, 8, FieldKind::NsTimestamp, 0),
            FieldDef::new("sourceIPv6Address", 16, 16, FieldKind::Ipv6, 27),
            FieldDef::new("sourceMacAddress", 32, 6, FieldKind::Mac, 56),
            FieldDef::new("vlanId", 38, 2, FieldKind::U16, 58),
            FieldDef::new("ruleId", 40, 4, FieldKind::U32, 0),
            FieldDef::new("dropReason", 44, 1, FieldKind::U8, 0),
            FieldDef::new("tag", 45, 3, FieldKind::Bytes, 0),
        ],
    )
    .unwrap()
}

fn acl(t: u64, i: u64) -> Vec<u8> {
    let mut r = vec![0u8; 48];
    r[0..2].copy_from_slice(&48u16.to_ne_bytes());
    r[2..4].copy_from_slice(&300u16.to_ne_bytes());
    r[8..16].copy_from_slice(&t.to_ne_bytes());
    r[16] = 0x20;
    r[17] = 0x01;
    r[30..32].copy_from_slice(&((i % 97) as u16).to_be_bytes());
    r[32..38].copy_from_slice(&[2, 0, 0x5e, 0, (i % 7) as u8, (i * 13) as u8]);
    r[38..40].copy_from_slice(&((i % 5) as u16 + 100).to_ne_bytes());
    r[40..44].copy_from_slice(&((i * 2654435761) as u32).to_ne_bytes());
    r[44] = (i % 3) as u8;
    r[45..48].copy_from_slice(b"ab\0");
    r
}

fn opts() -> ArchiveSinkOptions {
    ArchiveSinkOptions {
        index: vec!["ruleId".into()],
        block_rows: 100,
        segment_interval_ms: Some(1000),
        ..Default::default()
    }
}

/// Writes `recs` through a binary encoder in batches of `per` records,
/// through `books` (which checks the sink's accounting of each); returns
/// each batch's outcome and the rows the poll after it reported.
fn write(
    sink: &mut ArchiveSink,
    books: &mut Books,
    schema: &Schema,
    recs: &[Vec<u8>],
    per: usize,
) -> Vec<(Accepted, u64)> {
    let mut enc = BinaryEncoder::new(&[schema]);
    let mut out = Vec::new();
    for chunk in recs.chunks(per) {
        let mut batch = Vec::new();
        for r in chunk {
            assert!(enc.push(r, &mut batch));
        }
        let before = books.booked;
        let a = books.write(sink, &batch);
        let polled = books.booked
            - before
            - if a == Accepted::Delivered {
                chunk.len() as u64
            } else {
                0
            };
        out.push((a, polled));
    }
    out
}

fn read_all(dir: &Path) -> Vec<Vec<u8>> {
    let mut r = ArchiveReader::open(dir).unwrap();
    let mut v = Vec::new();
    r.for_each(0, u64::MAX, |s, rec| {
        assert_eq!(s.name(), "aclDrop");
        v.push(rec.to_vec());
        true
    })
    .unwrap();
    assert!(r.problems().is_empty(), "{:?}", r.problems());
    v
}

#[test]
fn any_schema_round_trips_in_time_order_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let s = acl_schema();
    // 5000 records over 5 s, slightly out of order within 10 ms.
    let recs: Vec<Vec<u8>> = (0..5000u64)
        .map(|i| acl(T0 + i * 1_000_000 + (i % 3) * 4_000_000, i))
        .collect();
    // Format version 3, whose key index is checked below (version 4
    // keeps blocks' key ranges instead: tests/archive_keyed.rs).
    let o = ArchiveSinkOptions {
        format_version: 3,
        ..opts()
    };
    let mut sink = ArchiveSink::open(dir.path(), o).unwrap();
    let mut books = Books::of(&sink);
    let outcomes = write(&mut sink, &mut books, &s, &recs, 333);
    // Batches of 333 rows into blocks of 100: each ends a partial block.
    assert!(outcomes.iter().all(|(a, _)| *a == Accepted::Pending));
    books.close(&mut sink);
    let segs = list_segments(dir.path()).unwrap();
    assert!(
        (5..=7).contains(&segs.len()),
        "{} segments for 5 s of 1 s slices",
        segs.len()
    );
    let schemas = ArchiveReader::open(dir.path()).unwrap().schemas();
    assert_eq!(schemas, vec![s.clone()]);
    let back = read_all(dir.path());
    let mut want = recs.clone();
    want.sort_by_key(|r| u64::from_ne_bytes(r[8..16].try_into().unwrap()));
    assert_eq!(back.len(), want.len());
    // Time order; records of equal time keep their written order.
    let times: Vec<u64> = back
        .iter()
        .map(|r| u64::from_ne_bytes(r[8..16].try_into().unwrap()))
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    let mut a = back.clone();
    a.sort();
    let mut b = want;
    b.sort();
    assert_eq!(a, b);
    // Compact: far less than the raw records.
    let bytes: u64 = segs
        .iter()
        .map(|s| std::fs::metadata(&s.path).unwrap().len())
        .sum();
    assert!(bytes < 5000 * 48 / 2, "{bytes} bytes");
    // The key index (ruleId): every row's key names its block, and a key
    // no row has names none.
    let seg = Segment::open(&segs[0].path).unwrap();
    assert!(!seg.index.is_empty());
    let key = [&s.fields()[4]];
    let mut checked = 0;
    for i in 0..seg.blocks.len() {
        if seg.blocks[i].kind != KIND_DATA {
            continue;
        }
        let (_, recs) = seg.read_block(i).unwrap();
        for r in recs.chunks_exact(48) {
            let blocks = seg
                .blocks_with_key(key_hash32(&key_of(&key, r)))
                .unwrap()
                .unwrap();
            assert!(blocks.contains(&(i as u32)));
            checked += 1;
        }
    }
    assert!(checked > 500);
    let none = seg
        .blocks_with_key(key_hash32(&0x1234_5678u32.to_ne_bytes()))
        .unwrap()
        .unwrap();
    assert!(none.is_empty());
}

#[test]
fn segments_roll_by_size_and_retention_removes_whole_segments() {
    let dir = tempfile::tempdir().unwrap();
    let s = acl_schema();
    let o = ArchiveSinkOptions {
        segment_interval_ms: None,
        segment_bytes: 4096,
        retention_bytes: Some(20_000),
        ..opts()
    };
    let mut sink = ArchiveSink::open(dir.path(), o).unwrap();
    // Incompressible-ish records: every block fills a segment.
    let recs: Vec<Vec<u8>> = (0..6000u64)
        .map(|i| {
            let mut r = acl(T0 + i * 1_000, i);
            let x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            r[16..24].copy_from_slice(&x.to_ne_bytes());
            r
        })
        .collect();
    let mut books = Books::of(&sink);
    let outcomes = write(&mut sink, &mut books, &s, &recs, 500);
    // Batches of 500 rows fill 5 blocks of 100 each, all written as the
    // batch is taken: every batch is delivered, nothing left to poll.
    assert_eq!(outcomes, vec![(Accepted::Delivered, 0); 12]);
    assert_eq!(books.close(&mut sink), 0);
    let c = sink.counters();
    let g = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    let segs = list_segments(dir.path()).unwrap();
    let total: u64 = segs
        .iter()
        .map(|s| std::fs::metadata(&s.path).unwrap().len())
        .sum();
    assert!(total <= 20_000, "{total} bytes kept");
    assert!(g(&c.segments_removed) > 0);
    assert_eq!(
        g(&c.segments_removed) + segs.len() as u64,
        g(&c.segments_sealed)
    );
    // What is left is the newest records, whole segments of them.
    let back = read_all(dir.path());
    assert!(!back.is_empty());
    assert_eq!(back.last().unwrap(), recs.last().unwrap());
    let first = recs.iter().position(|r| r == &back[0]).unwrap();
    assert_eq!(back, recs[first..].to_vec());

    // By age: records 10 s apart, keep 25 s before the newest.
    let dir = tempfile::tempdir().unwrap();
    let o = ArchiveSinkOptions {
        retention_age_ms: Some(25_000),
        ..opts()
    };
    let mut sink = ArchiveSink::open(dir.path(), o).unwrap();
    let recs: Vec<Vec<u8>> = (0..10u64)
        .map(|i| acl(T0 + i * 10_000_000_000, i))
        .collect();
    let mut books = Books::of(&sink);
    let outcomes = write(&mut sink, &mut books, &s, &recs, 1);
    // Each record starts a segment of its own: its batch ends the one
    // before, whose block is then written (polled); it waits for its own.
    let mut want = vec![(Accepted::Pending, 1); 10];
    want[0].1 = 0;
    assert_eq!(outcomes, want);
    assert_eq!(books.close(&mut sink), 1);
    let back = read_all(dir.path());
    // The newest is at 90 s: segments whose newest record is before 65 s
    // are gone.
    assert_eq!(back, recs[7..].to_vec());
}

#[test]
fn a_second_writer_and_a_line_format_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut sink = ArchiveSink::open(dir.path(), opts()).unwrap();
    let e = ArchiveSink::open(dir.path(), opts()).unwrap_err();
    assert!(e.to_string().contains("another writer holds it"), "{e}");
    let e = sink
        .write_batch(b"2026-01-01T00:00:00Z natEvent=4\n")
        .unwrap_err();
    assert!(!e.is_retryable());
    assert!(e.to_string().contains("[format] type = \"binary\""), "{e}");
    // Calibration (C) and drop-report (D) frames of the binary stream
    // are taken and skipped; the records around them are kept.
    let s = acl_schema();
    let mut batch = Vec::new();
    let mut enc = BinaryEncoder::new(&[&s]);
    assert!(enc.push(&acl(T0, 1), &mut batch));
    for (kind, len) in [(b'C', 24u16), (b'D', 40u16)] {
        batch.extend_from_slice(&[kind, 0]);
        batch.extend_from_slice(&len.to_le_bytes());
        batch.extend(std::iter::repeat(7u8).take(len as usize));
    }
    assert!(enc.push(&acl(T0 + 1, 2), &mut batch));
    let mut books = Books::of(&sink);
    // Two rows of a block of 100: held until the close writes them.
    assert_eq!(books.write(&mut sink, &batch), Accepted::Pending);
    assert_eq!(books.close(&mut sink), 2);
    assert_eq!(read_all(dir.path()), vec![acl(T0, 1), acl(T0 + 1, 2)]);
    let e = ArchiveSink::open(
        dir.path(),
        ArchiveSinkOptions {
            block_rows: 0,
            ..opts()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("block_rows"), "{e}");
}

#[test]
fn the_open_segment_is_readable_while_written() {
    let dir = tempfile::tempdir().unwrap();
    let s = acl_schema();
    let mut sink = ArchiveSink::open(
        dir.path(),
        ArchiveSinkOptions {
            block_max_age_ms: 50,
            ..opts()
        },
    )
    .unwrap();
    let recs: Vec<Vec<u8>> = (0..250u64).map(|i| acl(T0 + i, i)).collect();
    let mut books = Books::of(&sink);
    // Two full blocks are written (and reported); the last 50 records
    // wait for their block (its age, a flush or the close).
    assert_eq!(
        write(&mut sink, &mut books, &s, &recs, 250),
        vec![(Accepted::Pending, 200)]
    );
    assert_eq!(read_all(dir.path()).len(), 200);
    let start = Instant::now();
    let mut polled = 0;
    while read_all(dir.path()).len() < 250 {
        std::thread::sleep(Duration::from_millis(20));
        sink.tick(Instant::now()).unwrap();
        polled += books.poll(&mut sink);
        assert!(start.elapsed() < Duration::from_secs(10));
    }
    assert_eq!(polled + books.poll(&mut sink), 50);
    assert_eq!(read_all(dir.path()), recs);
    let segs = list_segments(dir.path()).unwrap();
    assert_eq!(segs.len(), 1);
    assert!(segs[0].range.is_none(), "still open");
    assert_eq!(books.close(&mut sink), 0);
    let segs = list_segments(dir.path()).unwrap();
    assert_eq!(segs[0].range, Some((T0, T0 + 249)));
    assert_eq!(read_all(dir.path()), recs);
}

#[test]
fn a_writer_restarted_on_old_times_reads_back_in_time_order() {
    let dir = tempfile::tempdir().unwrap();
    let s = acl_schema();
    // Two runs over the same three seconds (a replayed capture), one
    // sink each: their segments overlap in time.
    let run = |k: u64| -> Vec<Vec<u8>> {
        (0..900u64)
            .map(|i| {
                let mut r = acl(T0 + i * 3_333_333, i);
                r[44] = k as u8; // which run
                r
            })
            .collect()
    };
    for k in 0..2 {
        let mut sink = ArchiveSink::open(dir.path(), opts()).unwrap();
        let mut books = Books::of(&sink);
        write(&mut sink, &mut books, &s, &run(k), 250);
        books.close(&mut sink);
    }
    assert!(list_segments(dir.path()).unwrap().len() >= 6);
    let back = read_all(dir.path());
    assert_eq!(back.len(), 1800);
    // Time order over both runs; at equal times the first run first.
    let key = |r: &Vec<u8>| (u64::from_ne_bytes(r[8..16].try_into().unwrap()), r[44]);
    assert!(back.windows(2).all(|w| key(&w[0]) <= key(&w[1])));
    let (a, b) = (run(0), run(1));
    let want: Vec<Vec<u8>> = a
        .iter()
        .zip(&b)
        .flat_map(|(x, y)| [x.clone(), y.clone()])
        .collect();
    assert_eq!(back, want);
}

/// A 32-byte record with an ns event time and a TSC-typed field.
fn tsc_schema() -> Schema {
    Schema::new(
        320,
        "tscSeen",
        32,
        vec![
            FieldDef::new("eventTime", 8, 8, FieldKind::NsTimestamp, 0),
            FieldDef::new("flowStartMilliseconds", 16, 8, FieldKind::TscTimestamp, 152),
            FieldDef::new("ruleId", 24, 4, FieldKind::U32, 0),
        ],
    )
    .unwrap()
}

/// Record `i`: event time T0 + i ms, ticks 2.4e6 apart.
fn tsc_rec(i: u64) -> Vec<u8> {
    let mut r = vec![0u8; 32];
    r[0..2].copy_from_slice(&32u16.to_ne_bytes());
    r[2..4].copy_from_slice(&320u16.to_ne_bytes());
    r[8..16].copy_from_slice(&(T0 + i * 1_000_000).to_ne_bytes());
    r[16..24].copy_from_slice(&(8_234 + i * 2_400_000).to_ne_bytes());
    r[24..28].copy_from_slice(&((i % 11) as u32).to_ne_bytes());
    r
}

fn rec_index(rec: &[u8]) -> u64 {
    (u64::from_ne_bytes(rec[8..16].try_into().unwrap()) - T0) / 1_000_000
}

/// 4000 TSC records and 4000 ACL records, interleaved, 1 ms apart (4
/// segments of 1 s), with the calibrations of [`tsc_archive::CALS`], in
/// batches of 250 of each; not closed. Returns the sink's [`Books`].
fn write_tsc(sink: &mut ArchiveSink) -> Books {
    let (t, a) = (tsc_schema(), acl_schema());
    let mut books = Books::of(sink);
    write_calibrated(sink, &mut books, &[&t, &a], 4000, 250, |i, enc, batch| {
        assert!(enc.push(&tsc_rec(i), batch));
        assert!(enc.push(&acl(T0 + i * 1_000_000, i), batch));
    });
    books
}

/// Every record of `dir` with its calibration: (TSC record indexes and
/// calibrations, ACL records read).
fn read_calibrated(dir: &Path) -> (Vec<(u64, TscCalibration)>, usize, ArchiveReader) {
    let mut r = ArchiveReader::open(dir).unwrap();
    let (mut tsc, mut acls) = (Vec::new(), 0);
    r.for_each_calibrated(0, u64::MAX, |s, rec, cal| {
        match s.name() {
            "tscSeen" => tsc.push((rec_index(rec), cal)),
            _ => acls += 1,
        }
        true
    })
    .unwrap();
    (tsc, acls, r)
}

#[test]
fn tsc_calibrations_are_kept_per_block_and_repeated_per_segment() {
    let dir = tempfile::tempdir().unwrap();
    let mut sink = ArchiveSink::open(dir.path(), opts()).unwrap();
    let mut books = write_tsc(&mut sink);
    sink.flush().unwrap();
    books.poll(&mut sink);
    // Every record is written by the flush.
    assert_eq!(books.booked, 8000);
    // Read while open (its last segment scanned, not from a footer),
    // then sealed by the close.
    for sealed in [false, true] {
        if sealed {
            assert_eq!(books.close(&mut sink), 0);
        }
        let (tsc, acls, r) = read_calibrated(dir.path());
        assert!(r.problems().is_empty(), "{:?}", r.problems());
        assert_eq!(acls, 4000);
        assert_eq!(tsc.len(), 4000);
        for (k, (i, cal)) in tsc.iter().enumerate() {
            assert_eq!(*i, k as u64);
            assert_eq!(*cal, cal_of(*i), "record {i}");
        }
    }
    let segs = list_segments(dir.path()).unwrap();
    assert_eq!(segs.len(), 4);
    let (mut cal_blocks, mut tsc_blocks, mut acl_blocks) = (Vec::new(), 0, 0);
    for sf in &segs {
        let seg = Segment::open(&sf.path).unwrap();
        assert_eq!(seg.version, format::VERSION);
        let mut n = 0;
        for (i, b) in seg.blocks.iter().enumerate() {
            if b.kind == KIND_CALIBRATION {
                n += 1;
                continue;
            }
            if b.kind != KIND_DATA {
                continue;
            }
            let (s, recs) = seg.read_block(i).unwrap();
            if s.name() != "tscSeen" {
                // Not cut by a recalibration: full blocks of 100.
                assert_eq!(b.rows, 100);
                acl_blocks += 1;
                continue;
            }
            tsc_blocks += 1;
            // Each segment's first TSC block follows a calibration block
            // of that segment: the segment reads alone.
            assert!(seg.calibration_block(i).is_some(), "{}", sf.path.display());
            let cal = seg.block_calibration(i).unwrap();
            for r in recs.chunks_exact(32) {
                assert_eq!(cal, cal_of(rec_index(r)), "{} block {i}", sf.path.display());
            }
        }
        cal_blocks.push(n);
    }
    // One per segment, and one at each change (1550 in the second
    // segment, 2777 in the third).
    assert_eq!(cal_blocks, [1, 2, 2, 1]);
    // The TSC blocks cut at each change: 40 blocks of 100, and 2 more.
    assert_eq!((tsc_blocks, acl_blocks), (42, 40));
}

#[test]
fn a_damaged_calibration_block_skips_only_the_tsc_blocks_it_applies_to() {
    let dir = tempfile::tempdir().unwrap();
    let mut sink = ArchiveSink::open(dir.path(), opts()).unwrap();
    write_tsc(&mut sink).close(&mut sink);
    let segs = list_segments(dir.path()).unwrap();
    let seg = Segment::open(&segs[1].path).unwrap();
    // The second segment's second calibration block (from record 1550).
    let ci = seg
        .blocks
        .iter()
        .enumerate()
        .filter(|(_, b)| b.kind == KIND_CALIBRATION)
        .nth(1)
        .unwrap()
        .0;
    let lost: u64 = (ci..seg.blocks.len())
        .filter(|&i| {
            seg.blocks[i].kind == KIND_DATA
                && seg.calibration_block(i) == Some(ci)
                && seg.schema(seg.blocks[i].schema_id).unwrap().name() == "tscSeen"
        })
        .map(|i| u64::from(seg.blocks[i].rows))
        .sum();
    assert_eq!(lost, 450);
    let mut bytes = std::fs::read(&segs[1].path).unwrap();
    bytes[seg.blocks[ci].offset as usize + 20] ^= 1;
    std::fs::write(&segs[1].path, bytes).unwrap();
    let (tsc, acls, r) = read_calibrated(dir.path());
    assert_eq!(acls, 4000);
    assert_eq!(tsc.len() as u64, 4000 - lost);
    assert!(tsc.iter().all(|(i, c)| *c == cal_of(*i)));
    assert!(!tsc.iter().any(|(i, _)| (1550..2000).contains(i)));
    assert_eq!(r.problems().len(), 5, "{:?}", r.problems());
    for p in r.problems() {
        assert_eq!(p.path, segs[1].path);
        assert!(
            p.reason
                .contains(&format!("its calibration (block {ci}): checksum mismatch")),
            "{p}"
        );
    }
}

/// A sealed segment of format version 1 (no calibration blocks) holding
/// `recs` of `s`, built with the format's own pieces.
fn write_v1_segment(dir: &Path, seq: u64, s: &Schema, recs: &[Vec<u8>]) -> std::path::PathBuf {
    let mut file = format::segment_header().to_vec();
    file[8..12].copy_from_slice(&1u32.to_le_bytes());
    let schema = format::block_frame(format::KIND_SCHEMA, &s.encode().unwrap());
    let times: Vec<u64> = recs
        .iter()
        .map(|r| format::event_time(s, r).unwrap())
        .collect();
    let (min, max) = (*times.iter().min().unwrap(), *times.iter().max().unwrap());
    let flat: Vec<u8> = recs.concat();
    let data = format::block_frame(
        KIND_DATA,
        &format::whole_block_body(
            s,
            &format::schema_columns(s),
            &flat,
            recs.len(),
            min,
            max,
            3,
        )
        .unwrap(),
    );
    let mut blocks = Vec::new();
    for (kind, f, rows, lo, hi) in [
        (format::KIND_SCHEMA, &schema, 0, 0, 0),
        (KIND_DATA, &data, recs.len() as u32, min, max),
    ] {
        blocks.push(format::BlockMeta {
            offset: file.len() as u64,
            len: f.len() as u32,
            kind,
            schema_id: s.id(),
            rows,
            min: lo,
            max: hi,
        });
        file.extend_from_slice(f);
    }
    let footer = format::Footer {
        seq,
        min,
        max,
        rows: recs.len() as u64,
        max_lifetime_ms: 86_400_000,
        index_fields: Vec::new(),
        blocks,
        index: Vec::new(),
        index_bits: 16,
        key_ranges: Vec::new(),
    };
    file.extend_from_slice(&footer.to_bytes());
    let path = dir.join(format::sealed_name(seq, min, max));
    std::fs::write(&path, file).unwrap();
    path
}

#[test]
fn a_version_1_segment_reads_with_the_identity_calibration() {
    let dir = tempfile::tempdir().unwrap();
    let s = tsc_schema();
    let recs: Vec<Vec<u8>> = (0..500).map(tsc_rec).collect();
    let path = write_v1_segment(dir.path(), 0, &s, &recs);
    let seg = Segment::open(&path).unwrap();
    assert_eq!(seg.version, 1);
    assert!(seg.problems.is_empty(), "{:?}", seg.problems);
    let (tsc, acls, r) = read_calibrated(dir.path());
    assert!(r.problems().is_empty(), "{:?}", r.problems());
    assert_eq!(acls, 0);
    assert_eq!(
        tsc,
        (0..500)
            .map(|i| (i, TscCalibration::IDENTITY))
            .collect::<Vec<_>>()
    );
    // The writer appends version-2 segments after it; both read.
    let mut sink = ArchiveSink::open(dir.path(), opts()).unwrap();
    write_tsc(&mut sink).close(&mut sink);
    let (tsc, _, r) = read_calibrated(dir.path());
    assert!(r.problems().is_empty(), "{:?}", r.problems());
    assert_eq!(tsc.len(), 4500);
    let v1 = tsc
        .iter()
        .filter(|(_, c)| *c == TscCalibration::IDENTITY)
        .count();
    assert_eq!(v1, 500);
    // A version this reader does not know is refused, by name.
    let mut bytes = std::fs::read(&path).unwrap();
    let unknown = format::MAX_VERSION + 1;
    bytes[8..12].copy_from_slice(&unknown.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    let e = Segment::open(&path).unwrap_err();
    assert!(
        e.to_string().contains(&format!("format version {unknown}")),
        "{e}"
    );
}

#[test]
fn a_recovered_segment_keeps_its_calibration_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let mut sink = ArchiveSink::open(dir.path(), opts()).unwrap();
    let mut books = write_tsc(&mut sink);
    sink.flush().unwrap();
    books.poll(&mut sink);
    assert_eq!(books.booked, 8000);
    // A crash: the last segment is left open, then recovered and sealed
    // by the next writer.
    drop(sink);
    let open = list_segments(dir.path()).unwrap();
    assert!(open.last().unwrap().range.is_none());
    let sink = ArchiveSink::open(dir.path(), opts()).unwrap();
    assert_eq!(
        sink.counters()
            .segments_recovered
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    drop(sink);
    let segs = list_segments(dir.path()).unwrap();
    assert!(segs.iter().all(|s| s.range.is_some()));
    let last = Segment::open(&segs.last().unwrap().path).unwrap();
    assert!(last.sealed);
    assert!(last.blocks.iter().any(|b| b.kind == KIND_CALIBRATION));
    let (tsc, acls, r) = read_calibrated(dir.path());
    assert!(r.problems().is_empty(), "{:?}", r.problems());
    assert_eq!((tsc.len(), acls), (4000, 4000));
    assert!(tsc.iter().all(|(i, c)| *c == cal_of(*i)));
}

/// The records of `log` (a binary log) archived, then read back: the
/// segment's schemas, the body of its one schema block and its records.
fn archive_of(log: &[u8]) -> (Vec<Schema>, Vec<u8>, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let mut sink = ArchiveSink::open(dir.path(), ArchiveSinkOptions::default()).unwrap();
    let mut books = Books::of(&sink);
    // Three rows, held in their block until the close.
    assert_eq!(books.write(&mut sink, log), Accepted::Pending);
    assert_eq!(books.close(&mut sink), 3);
    let segs = list_segments(dir.path()).unwrap();
    assert_eq!(segs.len(), 1);
    let seg = Segment::open(&segs[0].path).unwrap();
    assert!(seg.problems.is_empty(), "{:?}", seg.problems);
    let kinds: Vec<u8> = seg.blocks.iter().map(|b| b.kind).collect();
    let si = kinds
        .iter()
        .position(|&k| k == format::KIND_SCHEMA)
        .unwrap();
    assert_eq!(
        kinds.iter().filter(|&&k| k == format::KIND_SCHEMA).count(),
        1
    );
    let raw = std::fs::read(&segs[0].path).unwrap();
    let b = &seg.blocks[si];
    let frame = &raw[b.offset as usize..b.offset as usize + b.len as usize];
    let mut recs = Vec::new();
    for i in 0..seg.blocks.len() {
        if seg.blocks[i].kind == KIND_DATA {
            recs.extend_from_slice(&seg.read_block(i).unwrap().1);
        }
    }
    (seg.schemas.clone(), frame.to_vec(), recs)
}

/// A binary log written before schemas carried their metadata (bytes of
/// that code) archives and reads back: its schema block holds the old
/// fields-only encoding byte for byte, which reads as the schema with
/// default metadata; a log of today's encoding keeps its writer's
/// metadata (syslog layout, priorities, lifecycle) in the archive.
#[test]
fn schema_blocks_of_the_old_and_the_new_encoding_read_back() {
    let want: Vec<u8> = lb_conn::old_log_records()
        .iter()
        .flat_map(|r| r.bytes())
        .collect();
    let (schemas, frame, recs) = archive_of(&lb_conn::old_binary_log());
    assert_eq!(schemas, vec![lb_conn::fields_only_as_read()]);
    assert_eq!(
        frame,
        format::block_frame(format::KIND_SCHEMA, &lb_conn::old_schema_encoding())
    );
    assert_eq!(recs, want);
    let s = lb_conn::schema();
    let mut enc = BinaryEncoder::try_new(&[&s]).unwrap();
    let mut log = Vec::new();
    for r in lb_conn::old_log_records() {
        assert!(enc.push(&r.bytes(), &mut log));
    }
    let (schemas, frame, recs) = archive_of(&log);
    assert_eq!(schemas, vec![s.clone()]);
    assert_eq!(
        frame,
        format::block_frame(format::KIND_SCHEMA, &s.encode().unwrap())
    );
    assert!(schemas[0].meta().lifecycle.is_some());
    assert_eq!(recs, want);
}

/// An archive of `lbConn` records (a load balancer's connections, which
/// declare a lifecycle keyed by vip, vport, clientAddr and clientPort)
/// written with `opts`, one record a connection: client ports 40000 to
/// 40000 + `n`, opens, two records a block.
fn write_lb(dir: &Path, opts: ArchiveSinkOptions, n: u16) {
    let mut sink = ArchiveSink::open(dir, opts).unwrap();
    let schema = lb_conn::schema();
    let mut enc = BinaryEncoder::try_new(&[&schema]).unwrap();
    let mut batch = Vec::new();
    for i in 0..n {
        let c = lb_conn::Conn {
            time_ns: lb_conn::T0 + u64::from(i) * 1_000_000,
            cport: 40000 + i,
            ..lb_conn::old_log_records()[0]
        };
        assert!(enc.push(&c.bytes(), &mut batch));
    }
    let mut books = Books::of(&sink);
    books.write(&mut sink, &batch);
    books.close(&mut sink);
    assert_eq!(books.booked, u64::from(n));
}

/// Without an `index` setting a record type is keyed by its own
/// lifecycle keys, each on its own: the footer says so, the reader
/// derives the lbConn key (vip, vport, clientAddr, clientPort) from it,
/// the key index names exactly the block of a client port and every
/// block for the vip they share, and no NAT field name is written.
#[test]
fn the_default_index_is_each_record_types_lifecycle_keys() {
    let dir = tempfile::tempdir().unwrap();
    let opts = ArchiveSinkOptions {
        block_rows: 2,
        ..Default::default()
    };
    write_lb(dir.path(), opts, 8);
    let segs = list_segments(dir.path()).unwrap();
    assert_eq!(segs.len(), 1);
    let seg = Segment::open(&segs[0].path).unwrap();
    assert_eq!(seg.index_fields, [format::LIFECYCLE_KEYS]);
    let s = seg.schema(lb_conn::ID).unwrap();
    let key = format::index_fields(s, &seg.index_fields);
    let names: Vec<&str> = key.iter().map(|f| &*f.name).collect();
    assert_eq!(names, ["vip", "vport", "clientAddr", "clientPort"]);
    // Connection 40005 is the 6th record: block 2 of the data blocks
    // (two records each).
    let c = lb_conn::Conn {
        time_ns: lb_conn::T0 + 5_000_000,
        cport: 40005,
        ..lb_conn::old_log_records()[0]
    };
    assert!(format::index_per_field(&seg.index_fields));
    let rec = c.bytes();
    let data: Vec<u32> = (0..seg.blocks.len() as u32)
        .filter(|&i| seg.blocks[i as usize].kind == KIND_DATA)
        .collect();
    assert_eq!(data.len(), 4);
    let port = format::field_key_hash32(key[3], key[3].bytes(&rec));
    assert_eq!(seg.blocks_with_key(port).unwrap(), Some(vec![data[2]]));
    let vip = format::field_key_hash32(key[0], key[0].bytes(&rec));
    assert_eq!(seg.blocks_with_key(vip).unwrap(), Some(data.clone()));
    // A client port no record has names no block (its hash, cut to the
    // index's bits, meets none of the 20 (value, block) pairs).
    let none = format::field_key_hash32(key[3], &7u16.to_ne_bytes());
    assert_eq!(seg.blocks_with_key(none).unwrap(), Some(vec![]));
    let bytes = std::fs::read(&segs[0].path).unwrap();
    for nat in ["postNAT", "postNAPT", "NATSource", "natEvent"] {
        assert!(
            !bytes.windows(nat.len()).any(|w| w == nat.as_bytes()),
            "{nat} in a non-NAT archive"
        );
    }
}

/// An `index` naming a field that none of the served record types has
/// (a typo) is refused with the field and the types' fields: at
/// `open_for`, before anything is opened, and by a sink opened without
/// the schemas at its stream's first record (nothing written).
#[test]
fn an_index_field_no_record_type_has_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let typo = ArchiveSinkOptions {
        index: vec!["vipp".into(), "vport".into()],
        ..Default::default()
    };
    let schema = lb_conn::schema();
    let e = ArchiveSink::open_for(dir.path(), typo.clone(), &[&schema]).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    let msg = e.to_string();
    assert!(msg.contains("\"vipp\""), "{msg}");
    assert!(
        msg.contains(
            "lbConn (connTime, vip, clientAddr, vport, clientPort, connEvent, backendAddr, \
             bytesIn, bytesOut)"
        ),
        "{msg}"
    );
    assert!(!dir.path().join(".archive.lock").exists());

    let mut sink = ArchiveSink::open(dir.path(), typo).unwrap();
    let mut enc = BinaryEncoder::try_new(&[&schema]).unwrap();
    let mut batch = Vec::new();
    assert!(enc.push(&lb_conn::old_log_records()[0].bytes(), &mut batch));
    let e = sink.write_batch(&batch).unwrap_err();
    assert!(e.to_string().contains("\"vipp\""), "{e}");
    sink.close().unwrap();
    assert!(list_segments(dir.path()).unwrap().is_empty());

    // A name some types lack is fine: aclDrop has ruleId, lbConn is
    // keyed on vport alone.
    let acl = acl_schema();
    let mixed = ArchiveSinkOptions {
        index: vec!["ruleId".into(), "vport".into()],
        ..Default::default()
    };
    assert!(mixed.check_index(&[&acl, &schema]).is_ok());
    let k = format::index_fields(&schema, &mixed.index);
    assert_eq!(k.iter().map(|f| &*f.name).collect::<Vec<_>>(), ["vport"]);
}
