//! Archives of earlier format versions read as they did: the version-2
//! fixture (`testkit/fixtures/archive_v2_lbconn`, written by the
//! version-2 writer and kept as files) gives back every record, byte for
//! byte, and reading only some rows of a block (a version-3 reader's
//! row filter) gives the same rows from it as from a version-3 archive
//! of the same records; the version-3 fixture
//! (`testkit/fixtures/archive_v3_lbconn`, the same records) reads record
//! for record too.

#[path = "../../testkit/fixtures/lb_conn.rs"]
mod lb_conn;

use std::path::{Path, PathBuf};

use dplog_core::Sink;
use dplog_formatters::binary::BinaryEncoder;
use dplog_sinks::archive::format::{self, RowFilter, KIND_DATA};
use dplog_sinks::archive::{
    list_segments, ArchiveReader, ArchiveSink, ArchiveSinkOptions, Segment,
};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(lb_conn::ARCHIVE_V2_DIR)
}

fn records(dir: &Path) -> Vec<Vec<u8>> {
    let mut r = ArchiveReader::open(dir).unwrap();
    let mut out = Vec::new();
    r.for_each(0, u64::MAX, |_, rec| {
        out.push(rec.to_vec());
        true
    })
    .unwrap();
    assert!(r.problems().is_empty(), "{:?}", r.problems());
    out
}

/// The same records written by this writer (format version 3), with the
/// fixture's settings.
fn rewritten(dir: &Path) {
    let s = lb_conn::schema();
    let mut enc = BinaryEncoder::new(&[&s]);
    let opts = ArchiveSinkOptions {
        block_rows: 128,
        segment_interval_ms: Some(1000),
        ..Default::default()
    };
    let mut sink = ArchiveSink::open(dir, opts).unwrap();
    let mut b = Vec::new();
    for c in lb_conn::archive_v2_conns() {
        enc.push(&c.bytes(), &mut b);
    }
    sink.write_batch(&b).unwrap();
    sink.close().unwrap();
}

#[test]
fn the_version_2_fixture_reads_record_for_record() {
    let want: Vec<Vec<u8>> = lb_conn::archive_v2_conns()
        .iter()
        .map(|c| c.bytes())
        .collect();
    let segs = list_segments(&fixture()).unwrap();
    assert_eq!(segs.len(), 3);
    for sf in &segs {
        let seg = Segment::open(&sf.path).unwrap();
        assert_eq!(seg.version, 2, "{}", sf.path.display());
        assert!(seg.sealed && seg.problems.is_empty());
    }
    assert_eq!(records(&fixture()), want);
    // Written again by this writer: version 3, the same records.
    let dir = tempfile::tempdir().unwrap();
    rewritten(dir.path());
    for sf in list_segments(dir.path()).unwrap() {
        assert_eq!(Segment::open(&sf.path).unwrap().version, format::VERSION);
    }
    assert_eq!(records(dir.path()), want);
}

#[test]
fn a_row_filter_keeps_the_same_rows_of_either_version() {
    let dir = tempfile::tempdir().unwrap();
    rewritten(dir.path());
    // Every block's rows under filters on one, two and three fields
    // (vip 16, vport 24, clientAddr 20, connEvent 28), and one that
    // names part of a field (not checked: every row, though some rows
    // hold those bytes and others do not).
    let rows_of = |dir: &Path, filter: &RowFilter| -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for sf in list_segments(dir).unwrap() {
            let seg = Segment::open(&sf.path).unwrap();
            for (i, b) in seg.blocks.iter().enumerate() {
                if b.kind == KIND_DATA {
                    let (s, recs) = seg.read_block_rows(i, filter).unwrap();
                    out.extend(recs.chunks_exact(s.size()).map(|r| r.to_vec()));
                }
            }
        }
        out
    };
    let all: Vec<Vec<u8>> = lb_conn::archive_v2_conns()
        .iter()
        .map(|c| c.bytes())
        .collect();
    let mut sorted_all = all.clone();
    sorted_all.sort();
    for eq in [
        vec![(16usize, 0xC000_0202u32.to_ne_bytes().to_vec())],
        vec![
            (16, 0xC000_0201u32.to_ne_bytes().to_vec()),
            (24, 443u16.to_ne_bytes().to_vec()),
        ],
        vec![
            (20, 0xC633_6405u32.to_ne_bytes().to_vec()),
            (24, 80u16.to_ne_bytes().to_vec()),
            (28, vec![lb_conn::CLOSE]),
        ],
        vec![(20, 0xC633_6499u32.to_ne_bytes().to_vec())],
        vec![(20, vec![0x05, 0x64])],
    ] {
        let filter = RowFilter { eq };
        let mut want: Vec<Vec<u8>> = all.iter().filter(|r| filter.matches(r)).cloned().collect();
        if filter.eq[0].1.len() == 2 && filter.eq[0].0 == 20 {
            // Not a whole field: the filter keeps every row.
            want = all.clone();
        }
        want.sort();
        for d in [fixture(), dir.path().to_path_buf()] {
            let mut got = rows_of(&d, &filter);
            got.sort();
            assert_eq!(got, want, "{:?} in {}", filter.eq, d.display());
        }
    }
    let mut every = rows_of(dir.path(), &RowFilter::default());
    every.sort();
    assert_eq!(every, sorted_all);
}

#[test]
fn a_damaged_column_fails_its_own_checksum_and_only_when_read() {
    let dir = tempfile::tempdir().unwrap();
    rewritten(dir.path());
    let sf = &list_segments(dir.path()).unwrap()[0];
    let seg = Segment::open(&sf.path).unwrap();
    let bi = seg.blocks.iter().position(|b| b.kind == KIND_DATA).unwrap();
    let (s, all) = seg.read_block(bi).unwrap();
    let cols = format::schema_columns(s);
    // The vip column (offset 16): its stored bytes, from the directory.
    let k = cols.iter().position(|c| c.offset == 16).unwrap();
    let m = seg.blocks[bi].clone();
    let mut bytes = std::fs::read(&sf.path).unwrap();
    let body_at = m.offset as usize + 16;
    let prefix = &bytes[body_at..body_at + format::column_prefix_len(cols.len())];
    let spans = format::column_spans(prefix, cols.len(), m.len as usize - 16).unwrap();
    let vip = &all[16..20];
    let vip_filter = RowFilter {
        eq: vec![(16, vip.to_vec())],
    };
    let (_, want) = seg.read_block_rows(bi, &vip_filter).unwrap();
    assert!(!want.is_empty());
    bytes[body_at + spans[k].at] ^= 0x40;
    std::fs::write(&sf.path, &bytes).unwrap();
    let seg = Segment::open(&sf.path).unwrap();
    // The whole block: its frame checksum fails.
    let e = seg.read_block(bi).unwrap_err();
    assert!(e.to_string().contains("checksum mismatch"), "{e}");
    // The damaged column read: its own checksum fails, by number.
    let e = seg.read_block_rows(bi, &vip_filter).unwrap_err();
    assert!(
        e.to_string()
            .contains(&format!("column {k}: checksum mismatch")),
        "{e}"
    );
    // A filter no row passes on another column: the damaged column is
    // never read, and nothing is returned.
    let none = RowFilter {
        eq: vec![(24, 9u16.to_ne_bytes().to_vec())],
    };
    assert_eq!(seg.read_block_rows(bi, &none).unwrap().1, Vec::<u8>::new());
    // A damaged directory fails the directory's checksum.
    bytes[body_at + spans[k].at] ^= 0x40;
    bytes[body_at + format::DATA_HEADER + 1] ^= 1;
    std::fs::write(&sf.path, &bytes).unwrap();
    let seg = Segment::open(&sf.path).unwrap();
    let e = seg.read_block_rows(bi, &none).unwrap_err();
    assert!(
        e.to_string().contains("column directory checksum mismatch"),
        "{e}"
    );
}

/// The version-3 fixture (`testkit/fixtures/archive_v3_lbconn`): the same
/// records written by the version-3 writer (each column compressed on its
/// own), kept as files: every record back, byte for byte.
#[test]
fn the_version_3_fixture_reads_record_for_record() {
    let v3 = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(lb_conn::ARCHIVE_V3_DIR);
    let want: Vec<Vec<u8>> = lb_conn::archive_v2_conns()
        .iter()
        .map(|c| c.bytes())
        .collect();
    let segs = list_segments(&v3).unwrap();
    assert_eq!(segs.len(), 3);
    for sf in &segs {
        let seg = Segment::open(&sf.path).unwrap();
        assert_eq!(seg.version, 3, "{}", sf.path.display());
        assert!(seg.sealed && seg.problems.is_empty());
    }
    assert_eq!(records(&v3), want);
}
