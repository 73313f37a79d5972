//! What reading an archive costs, counted with the readers' process-wide
//! counts (`dplog_sinks::archive::counted`): opening a sealed segment,
//! decoding the rows of a block that a filter keeps, which fetches each
//! column once (the filter's columns are not read again for the
//! records), and asking a day's summary about a segment: its `.dps`
//! (descriptions only, whatever the segment's tuples), then two offsets
//! and one bucket of its `.dpb`. One test in this file: the counts are
//! of the whole process.

use dplog_core::schema::{FieldDef, FieldKind, Schema};
use dplog_core::Sink;
use dplog_formatters::binary::BinaryEncoder;
use dplog_sinks::archive::counted::{read_counts, ReadCounts};
use dplog_sinks::archive::format::{self, RowFilter, KIND_DATA};
use dplog_sinks::archive::summary::{self, Summaries, TypeEntry};
use dplog_sinks::archive::{list_segments, ArchiveSink, ArchiveSinkOptions, Segment, SegmentFile};

/// A tunnel session record, declared here: time, tunnel id, peer, event,
/// bytes (32 bytes).
fn tunnel_schema() -> Schema {
    Schema::new(
        420,
        "tunnelSession",
        32,
        vec![
            FieldDef::new("eventTime", 8, 8, FieldKind::NsTimestamp, 0),
            FieldDef::new("tunnelId", 16, 4, FieldKind::U32, 0),
            FieldDef::new("peerAddress", 20, 4, FieldKind::Ipv4, 0),
            FieldDef::new("tunnelEvent", 24, 1, FieldKind::U8, 0),
            FieldDef::new("octets", 28, 4, FieldKind::U32, 0),
        ],
    )
    .unwrap()
}

fn tunnel(t: u64, i: u32) -> Vec<u8> {
    let mut r = vec![0u8; 32];
    r[0..2].copy_from_slice(&32u16.to_ne_bytes());
    r[2..4].copy_from_slice(&420u16.to_ne_bytes());
    r[8..16].copy_from_slice(&t.to_ne_bytes());
    r[16..20].copy_from_slice(&(i % 50).to_ne_bytes());
    r[20..24].copy_from_slice(&(0xC000_0200 + i % 7).to_ne_bytes());
    r[24] = (i % 2) as u8 + 1;
    r[28..32].copy_from_slice(&(i * 977).to_ne_bytes());
    r
}

fn since(b: ReadCounts) -> ReadCounts {
    let a = read_counts();
    ReadCounts {
        files_opened: a.files_opened - b.files_opened,
        reads: a.reads - b.reads,
        bytes: a.bytes - b.bytes,
    }
}

#[test]
fn a_filtered_block_fetches_each_column_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = tunnel_schema();
    let opts = ArchiveSinkOptions {
        block_rows: 1000,
        ..Default::default()
    };
    let mut sink = ArchiveSink::open(dir.path(), opts).unwrap();
    let mut enc = BinaryEncoder::new(&[&s]);
    let mut b = Vec::new();
    let t0 = 1_767_225_600_000_000_000u64;
    for i in 0..1000u32 {
        enc.push(&tunnel(t0 + u64::from(i) * 1_000_000, i), &mut b);
    }
    sink.write_batch(&b).unwrap();
    sink.close().unwrap();
    let segs = list_segments(dir.path()).unwrap();
    assert_eq!(segs.len(), 1);

    let before = read_counts();
    let seg = Segment::open(&segs[0].path).unwrap();
    let opened = since(before);
    assert_eq!(opened.files_opened, 1);
    // Header, trailer, footer, and the schema block's frame header and
    // body: five reads.
    assert_eq!(opened.reads, 5);
    assert!(seg.sealed && seg.version == format::VERSION);

    let i = seg.blocks.iter().position(|m| m.kind == KIND_DATA).unwrap();
    let m = seg.blocks[i].clone();
    assert_eq!(m.rows, 1000);
    let ncols = format::schema_columns(&s).len();
    // Tunnel 7 from peer 192.0.2.0 (i % 50 == 7 and i % 7 == 0): rows
    // 7, 357, 707.
    let filter = RowFilter {
        eq: vec![
            (16, 7u32.to_ne_bytes().to_vec()),
            (20, 0xC000_0200u32.to_ne_bytes().to_vec()),
        ],
    };
    let before = read_counts();
    let (_, recs) = seg.read_block_rows(i, &filter).unwrap();
    let read = since(before);
    let want: Vec<Vec<u8>> = [7u32, 357, 707]
        .iter()
        .map(|&i| tunnel(t0 + u64::from(i) * 1_000_000, i))
        .collect();
    assert_eq!(recs, want.concat());
    // The block's header and column directory, then each column once:
    // the two filter columns are not fetched again for the records.
    assert_eq!(read.files_opened, 0);
    assert_eq!(read.reads, 1 + ncols as u64);
    // Every byte of the block is read once: its frame header and column
    // directory, then the columns, which fill the rest of its body.
    assert_eq!(read.bytes, u64::from(m.len));

    // No row of tunnel 7 from peer 192.0.2.9 (no such peer): the
    // filter's columns only.
    let filter = RowFilter {
        eq: vec![
            (16, 7u32.to_ne_bytes().to_vec()),
            (20, 0xC000_0209u32.to_ne_bytes().to_vec()),
        ],
    };
    let before = read_counts();
    let (_, recs) = seg.read_block_rows(i, &filter).unwrap();
    assert!(recs.is_empty());
    assert_eq!(since(before).reads, 1 + 2);

    // A day's summary of three segments of 20,000 tuples each: the
    // `.dps` holds their descriptions only (the bucket tables, 2 kB a
    // segment, are in the `.dpb`), and asking about a tuple reads the
    // two offsets of its bucket, then the bucket.
    let sdir = tempfile::tempdir().unwrap();
    let types = [TypeEntry {
        schema_id: 420,
        layout: 7,
        fields: vec!["tunnelId".into(), "peerAddress".into()],
    }];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut sets = Vec::new();
    for seq in 0..3u64 {
        let mut hs: Vec<u64> = (0..20_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            })
            .collect();
        summary::append(
            sdir.path(),
            0,
            seq,
            (seq * 10, seq * 10 + 5),
            &types,
            &mut hs,
        )
        .unwrap();
        sets.push(hs);
    }
    let dps = std::fs::metadata(sdir.path().join(summary::summary_name(0)))
        .unwrap()
        .len();
    assert!(dps < 3 * 128, "{dps} bytes of entries");
    let mut sums = Summaries::new(sdir.path());
    let before = read_counts();
    let sf = SegmentFile {
        path: sdir.path().join("x"),
        seq: 1,
        range: Some((10, 15)),
    };
    let e = sums.entry(&sf).unwrap();
    let read = since(before);
    // The `.dps` and `.dpb` opened, the `.dps` read whole (and its end).
    assert_eq!((read.files_opened, read.bytes), (2, dps));
    let before = read_counts();
    assert!(sums.may_hold(e, sets[1][123]).unwrap());
    let read = since(before);
    assert_eq!(read.reads, 2);
    assert!(read.bytes < 8 + 4 + 2 * 200, "{} bytes", read.bytes);
    assert!(sums.problems.is_empty());
}
