//! Format version 4: segments rewritten when sealed, sorted by their
//! named index key, a connection's close stored as a repeat of its open.
//! The same records written as version 3 and as version 4 read back the
//! same (every record, in event-time order; records of equal time may
//! come in another order), the blocks' key ranges name fewer blocks than
//! there are and never miss a row, and each state a crash during the
//! seal-time rewrite can leave (its sorted file half written; renamed but
//! the open segment not yet removed) reads and recovers without a record
//! lost or doubled, as does a writer process SIGKILLed while it seals
//! (most rounds land in the middle of a rewrite). The record type is not the NAT's: `lbConn`, a load
//! balancer's connection with its own lifecycle (open, close, reject).

#[path = "../../testkit/fixtures/lb_conn.rs"]
mod lb_conn;

use std::path::Path;
use std::sync::atomic::Ordering;

use dplog_core::Sink;
use dplog_formatters::binary::BinaryEncoder;
use dplog_sinks::archive::format::{self, RowFilter, KIND_DATA};
use dplog_sinks::archive::{
    keyed, list_segments, ArchiveReader, ArchiveSink, ArchiveSinkOptions, Segment,
};

fn opts(version: u32) -> ArchiveSinkOptions {
    ArchiveSinkOptions {
        index: vec!["vip".into(), "vport".into()],
        block_rows: 128,
        segment_interval_ms: Some(1000),
        format_version: version,
        ..Default::default()
    }
}

/// Every record of `lb_conn::archive_v2_conns` (3,000 odd, 2.3 s) into
/// a sink on `dir`; closed (sealed) or only flushed (its last segment
/// left open, as a crash leaves it).
fn write(dir: &Path, version: u32, close: bool) {
    let s = lb_conn::schema();
    let mut enc = BinaryEncoder::new(&[&s]);
    let mut sink = ArchiveSink::open(dir, opts(version)).unwrap();
    let mut b = Vec::new();
    for c in lb_conn::archive_v2_conns() {
        enc.push(&c.bytes(), &mut b);
    }
    sink.write_batch(&b).unwrap();
    if close {
        sink.close().unwrap();
    } else {
        sink.flush().unwrap();
    }
}

fn want() -> Vec<Vec<u8>> {
    lb_conn::archive_v2_conns()
        .iter()
        .map(|c| c.bytes())
        .collect()
}

fn time(r: &[u8]) -> u64 {
    u64::from_ne_bytes(r[8..16].try_into().unwrap())
}

/// Every record of the archive in `dir`, in the reader's order; no
/// damage.
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

/// `recs` are in event-time order, and hold what `want` holds: the same
/// records, each as often, within each event time in any order.
fn same_records(recs: &[Vec<u8>], want: &[Vec<u8>]) {
    assert!(recs.windows(2).all(|w| time(&w[0]) <= time(&w[1])));
    let by_time = |v: &[Vec<u8>]| {
        let mut v = v.to_vec();
        v.sort_by(|a, b| (time(a), a).cmp(&(time(b), b)));
        v
    };
    assert_eq!(recs.len(), want.len());
    assert_eq!(by_time(recs), by_time(want));
}

fn versions(dir: &Path) -> Vec<u32> {
    list_segments(dir)
        .unwrap()
        .iter()
        .map(|sf| Segment::open(&sf.path).unwrap().version)
        .collect()
}

#[test]
fn keyed_segments_read_as_the_time_ordered_ones() {
    let (v3, v4) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write(v3.path(), 3, true);
    write(v4.path(), 4, true);
    assert_eq!(versions(v3.path()), vec![3; 3]);
    assert_eq!(versions(v4.path()), vec![4; 3]);
    let (a, b) = (records(v3.path()), records(v4.path()));
    // Version 3 gives the records as written (equal times in order).
    assert_eq!(a, want());
    same_records(&b, &a);
}

#[test]
fn key_ranges_name_the_blocks_of_a_key_and_miss_none() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 4, true);
    let s = lb_conn::schema();
    let all = want();
    let (mut named_total, mut data_total) = (0, 0);
    for vip in 0..4u32 {
        for vport in [None, Some(80u16), Some(443)] {
            let vip = 0xC000_0200 | vip;
            let mut filter = RowFilter {
                eq: vec![(16, vip.to_ne_bytes().to_vec())],
            };
            if let Some(p) = vport {
                filter.eq.push((24, p.to_ne_bytes().to_vec()));
            }
            let mut got = Vec::new();
            for sf in list_segments(dir.path()).unwrap() {
                let seg = Segment::open(&sf.path).unwrap();
                assert!(seg.index.is_empty() && !seg.key_ranges.is_empty());
                let named = seg.blocks_in_key_range(&s, &filter).unwrap();
                let data = seg.blocks.iter().filter(|b| b.kind == KIND_DATA).count();
                assert!(named.len() <= data);
                named_total += named.len();
                data_total += data;
                for &i in &named {
                    let (_, recs) = seg.read_block_rows(i as usize, &filter).unwrap();
                    got.extend(
                        recs.chunks_exact(s.size())
                            .filter(|r| filter.matches(r))
                            .map(|r| r.to_vec()),
                    );
                }
                // Without the port the VIP alone still prunes.
                let port_only = RowFilter {
                    eq: vec![(24, 80u16.to_ne_bytes().to_vec())],
                };
                assert_eq!(seg.blocks_in_key_range(&s, &port_only), None);
            }
            let mut want: Vec<Vec<u8>> =
                all.iter().filter(|r| filter.matches(r)).cloned().collect();
            assert!(!want.is_empty());
            got.sort();
            want.sort();
            assert_eq!(got, want, "vip {vip:x} port {vport:?}");
        }
    }
    assert!(
        named_total * 3 < data_total,
        "{named_total} of {data_total}"
    );
}

#[test]
fn a_keyed_block_decodes_its_rows_in_time_order() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 4, true);
    let sf = &list_segments(dir.path()).unwrap()[1];
    let seg = Segment::open(&sf.path).unwrap();
    for (i, b) in seg.blocks.iter().enumerate() {
        if b.kind == KIND_DATA {
            let (s, recs) = seg.read_block(i).unwrap();
            assert_eq!(recs.len(), b.rows as usize * s.size());
            let t: Vec<u64> = recs.chunks_exact(s.size()).map(time).collect();
            assert!(t.windows(2).all(|w| w[0] <= w[1]));
            assert_eq!((t[0], *t.last().unwrap()), (b.min, b.max));
        }
    }
}

#[test]
fn the_writer_can_be_told_to_write_version_3_and_refuses_others() {
    let dir = tempfile::tempdir().unwrap();
    for bad in [2, 5] {
        let e = ArchiveSink::open(dir.path(), opts(bad)).unwrap_err();
        assert!(e.to_string().contains("format_version"), "{e}");
    }
    // The per-field index (the default) keeps version 3 under version 4.
    let mut o = opts(4);
    o.index = vec![format::LIFECYCLE_KEYS.into()];
    let s = lb_conn::schema();
    let mut enc = BinaryEncoder::new(&[&s]);
    let mut sink = ArchiveSink::open(dir.path(), o).unwrap();
    let mut b = Vec::new();
    for c in lb_conn::archive_v2_conns() {
        enc.push(&c.bytes(), &mut b);
    }
    sink.write_batch(&b).unwrap();
    sink.close().unwrap();
    assert_eq!(versions(dir.path()), vec![3; 3]);
    assert_eq!(records(dir.path()), want());
}

/// The open segment of a crashed writer, and its sealed version-4 copy,
/// in `dir`: `(open segment's name, sealed segment's path)`.
fn crashed_and_sealed(dir: &Path) -> (String, std::path::PathBuf) {
    let open_dir = tempfile::tempdir().unwrap();
    write(open_dir.path(), 4, false);
    let segs = list_segments(open_dir.path()).unwrap();
    let last = segs.last().unwrap();
    assert!(last.range.is_none());
    for sf in &segs {
        let name = sf.path.file_name().unwrap();
        std::fs::copy(&sf.path, dir.join(name)).unwrap();
    }
    // The same records sealed: the last segment's rewrite.
    let sealed_dir = tempfile::tempdir().unwrap();
    write(sealed_dir.path(), 4, true);
    let sealed = list_segments(sealed_dir.path()).unwrap().pop().unwrap();
    assert_eq!(sealed.seq, last.seq);
    let to = dir.join(sealed.path.file_name().unwrap());
    std::fs::copy(&sealed.path, &to).unwrap();
    (
        last.path.file_name().unwrap().to_str().unwrap().to_string(),
        to,
    )
}

#[test]
fn a_crash_before_the_rewrite_is_renamed_recovers_the_open_segment() {
    let dir = tempfile::tempdir().unwrap();
    let (open, sealed) = crashed_and_sealed(dir.path());
    // The rewrite half written: its sorted file, cut short; not renamed.
    let seq = list_segments(dir.path()).unwrap().last().unwrap().seq;
    let bytes = std::fs::read(&sealed).unwrap();
    std::fs::remove_file(&sealed).unwrap();
    let sort = dir.path().join(keyed::sort_name(seq));
    std::fs::write(&sort, &bytes[..bytes.len() / 2]).unwrap();
    // Readers read the open segment (scanned) and nothing of the sorted
    // file.
    same_records(&records(dir.path()), &want());
    // The next writer removes the sorted file and seals the open
    // segment as it was written (version 3).
    let sink = ArchiveSink::open(dir.path(), opts(4)).unwrap();
    assert_eq!(
        sink.counters().segments_recovered.load(Ordering::Relaxed),
        1
    );
    drop(sink);
    assert!(!sort.exists() && !dir.path().join(&open).exists());
    assert_eq!(versions(dir.path()), vec![4, 4, 3]);
    same_records(&records(dir.path()), &want());
}

#[test]
fn a_crash_after_the_rewrite_is_renamed_keeps_one_copy() {
    let dir = tempfile::tempdir().unwrap();
    let (open, sealed) = crashed_and_sealed(dir.path());
    // Renamed, the open segment not yet removed: both names of one
    // segment. Readers take the sealed one only.
    assert!(dir.path().join(&open).exists() && sealed.exists());
    assert_eq!(list_segments(dir.path()).unwrap().len(), 3);
    same_records(&records(dir.path()), &want());
    // The next writer removes the copy; nothing to recover.
    let sink = ArchiveSink::open(dir.path(), opts(4)).unwrap();
    assert_eq!(
        sink.counters().segments_recovered.load(Ordering::Relaxed),
        0
    );
    drop(sink);
    assert!(!dir.path().join(&open).exists());
    assert_eq!(versions(dir.path()), vec![4, 4, 4]);
    same_records(&records(dir.path()), &want());
}

/// Connection `seq` of the crash test: opens and closes in pairs (one
/// key each), 2 µs apart (50,000 a 100 ms segment), `bytesIn` the
/// sequence number.
fn conn(seq: u64) -> lb_conn::Conn {
    let k = seq / 2;
    lb_conn::Conn {
        time_ns: lb_conn::T0 + seq * 2_000,
        vip: 0xC000_0200 | (k % 4) as u32,
        vport: [80, 443][(k / 4 % 2) as usize],
        client: 0xC633_6400 | (k * 7 % 40) as u32,
        cport: 40000 + (k % 1000) as u16,
        event: if seq % 2 == 0 {
            lb_conn::OPEN
        } else {
            lb_conn::CLOSE
        },
        backend: 0x0A00_0001,
        bytes_in: seq,
        bytes_out: 0,
    }
}

/// The child half of `sigkill_during_seals_loses_and_doubles_nothing`:
/// writes connections forever in batches of 5,000 (a 100 ms segment is
/// sealed, and rewritten, at the start of every tenth batch), flushing
/// each and then printing how many it wrote. Runs only when spawned by
/// that test.
#[test]
#[ignore = "helper process for the crash test"]
fn keyed_crash_child() {
    let Ok(dir) = std::env::var("DPLOG_KEYED_CHILD_DIR") else {
        return;
    };
    let s = lb_conn::schema();
    let mut enc = BinaryEncoder::new(&[&s]);
    let o = ArchiveSinkOptions {
        segment_interval_ms: Some(100),
        block_rows: 256,
        ..opts(4)
    };
    let mut sink = ArchiveSink::open(Path::new(&dir), o).unwrap();
    let mut seq = 0u64;
    loop {
        let mut b = Vec::new();
        for _ in 0..5000 {
            enc.push(&conn(seq).bytes(), &mut b);
            seq += 1;
        }
        sink.write_batch(&b).unwrap();
        sink.flush().unwrap();
        println!("{seq}");
    }
}

#[test]
fn sigkill_during_seals_loses_and_doubles_nothing() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    for round in 0..4u64 {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "keyed_crash_child", "--nocapture"])
            .env("DPLOG_KEYED_CHILD_DIR", dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut reported = 0u64;
        let mut line = String::new();
        // Killed as the batch that starts a new segment is written, so
        // while the last one is rewritten, at a different point of the
        // rewrite each round (it takes tens of ms in a debug build).
        while reported < 50_000 * (round + 1) {
            line.clear();
            assert!(out.read_line(&mut line).unwrap() > 0, "the child stopped");
            if let Ok(n) = line.trim().parse() {
                reported = n;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(
            [5, 30, 90, 250][round as usize],
        ));
        // SAFETY: kill(2) on our own, not yet reaped, child.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        assert!(!child.wait().unwrap().success());
        // The next writer recovers; every record flushed before the kill
        // is there once, and the records after them, if any, too.
        drop(ArchiveSink::open(dir.path(), opts(4)).unwrap());
        let mut seqs: Vec<u64> = records(dir.path())
            .iter()
            .map(|r| u64::from_ne_bytes(r[40..48].try_into().unwrap()))
            .collect();
        seqs.sort_unstable();
        let n = seqs.len() as u64;
        assert!(
            n >= reported,
            "round {round}: {n} records, {reported} flushed"
        );
        assert_eq!(seqs, (0..n).collect::<Vec<u64>>(), "round {round}");
        let v = versions(dir.path());
        assert!(
            v.iter().filter(|&&x| x == 4).count() >= round as usize,
            "{v:?}"
        );
        assert!(v.iter().all(|&x| x == 3 || x == 4), "{v:?}");
        for e in std::fs::read_dir(dir.path()).unwrap() {
            let name = e.unwrap().file_name().into_string().unwrap();
            assert!(
                !name.ends_with(".sort") && !name.ends_with(".open"),
                "{name}"
            );
        }
    }
}
