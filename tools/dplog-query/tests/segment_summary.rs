//! Segment pruning by key tuple: a lookup opens only the segments whose
//! summary may hold the tuple it gives, however many segments its
//! lookback window spans. Counted (segments opened, blocks decoded),
//! never timed, for a record type this test declares (`vipConn`: a load
//! balancer's connection keyed by vip, vport, client address and port)
//! and for the NAT44 session (summarized on its post-NAT address and
//! port). A segment the summary lacks (a crash between its seal and the
//! summary's append) is opened as before; a damaged summary is reported
//! and the segments it would have ruled out are opened: the answers stay
//! the same.

use std::path::Path;

use dplog_core::{schema, HasSchema, RecordBytes, RecordHeader, Schema, Sink};
use dplog_formatters::binary::BinaryEncoder;
use dplog_query::{Lookback, Mode, Outcome, Query};
use dplog_schema_nat::{Nat44SessionRecord, NatEvent};
use dplog_sinks::archive::summary;
use dplog_sinks::archive::{list_segments, ArchiveSink, ArchiveSinkOptions};

const T0: u64 = 1_767_225_600_000_000_000;
const MS: u64 = 1_000_000;
const OPEN: u8 = 1;
const CLOSE: u8 = 2;

/// A load balancer's connection record, declared here.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct VipConn {
    header: RecordHeader,
    time_ns: u64,
    vip: u32,
    client: u32,
    vport: u16,
    cport: u16,
    event: u8,
    pad: [u8; 3],
    bytes: u64,
}

fn vip_schema() -> Schema {
    schema!(VipConn, id = 610, name = "vipConn", [
        time_ns => "connTime": NsTimestamp, ie 0;
        vip => "vip": Ipv4, ie 0;
        client => "clientAddr": Ipv4, ie 0;
        vport => "vport": Port, ie 0;
        cport => "clientPort": Port, ie 0;
        event => "connEvent": Enum, ie 0, names &[(1, "OPEN"), (2, "CLOSE")];
        bytes => "bytes": U64, ie 0;
    ])
    .unwrap()
    .with_lifecycle(
        "connEvent",
        &[1],
        &[2],
        &["vip", "vport", "clientAddr", "clientPort"],
        &["bytes"],
    )
    .unwrap()
}

impl VipConn {
    fn bytes(&self) -> Vec<u8> {
        let mut r = vec![0u8; std::mem::size_of::<VipConn>()];
        let h = RecordHeader {
            len: r.len() as u16,
            schema_id: 610,
            flags: 0,
            reserved: 0,
        };
        r[0..2].copy_from_slice(&h.len.to_ne_bytes());
        r[2..4].copy_from_slice(&h.schema_id.to_ne_bytes());
        r[8..16].copy_from_slice(&self.time_ns.to_ne_bytes());
        r[16..20].copy_from_slice(&self.vip.to_ne_bytes());
        r[20..24].copy_from_slice(&self.client.to_ne_bytes());
        r[24..26].copy_from_slice(&self.vport.to_ne_bytes());
        r[26..28].copy_from_slice(&self.cport.to_ne_bytes());
        r[28] = self.event;
        r[32..40].copy_from_slice(&self.bytes.to_ne_bytes());
        r
    }
}

/// Ten one-second segments: in second `k`, 40 connections (client
/// ports `k * 100 + i`) open and close within it, 32 rows a block; and
/// one long connection (client port 9999) opens at 2.5 s and closes at
/// 7.5 s.
fn vip_records() -> Vec<VipConn> {
    let mut out = Vec::new();
    let c = |ms: u64, cport: u16, event: u8| VipConn {
        time_ns: T0 + ms * MS,
        vip: 0xC000_020A,
        client: 0xC633_6407,
        vport: 443,
        cport,
        event,
        bytes: if event == CLOSE { 100 } else { 0 },
        ..Default::default()
    };
    for k in 0..10u64 {
        for i in 0..40u64 {
            let port = (k * 100 + i) as u16 + 1024;
            out.push(c(k * 1000 + i * 10, port, OPEN));
            out.push(c(k * 1000 + i * 10 + 500, port, CLOSE));
        }
        if k == 2 {
            out.push(c(2500, 9999, OPEN));
        }
        if k == 7 {
            out.push(c(7500, 9999, CLOSE));
        }
    }
    out.sort_by_key(|r| r.time_ns);
    out
}

fn write(dir: &Path, schema: &Schema, recs: &[Vec<u8>], summary: Vec<String>) {
    let opts = ArchiveSinkOptions {
        block_rows: 32,
        segment_interval_ms: Some(1000),
        summary,
        ..Default::default()
    };
    let mut sink = ArchiveSink::open(dir, opts).unwrap();
    let mut enc = BinaryEncoder::new(&[schema]);
    let mut b = Vec::new();
    for r in recs {
        enc.push(r, &mut b);
    }
    sink.write_batch(&b).unwrap();
    sink.close().unwrap();
}

fn vip_archive(dir: &Path) {
    let recs: Vec<Vec<u8>> = vip_records().iter().map(|r| r.bytes()).collect();
    write(dir, &vip_schema(), &recs, vec!["@lifecycle".into()]);
}

fn query(dir: &Path, mode: Mode, conds: &[(&str, &str)]) -> (Vec<Vec<u8>>, Outcome) {
    let q = Query {
        mode,
        conds: conds
            .iter()
            .map(|(f, v)| (f.to_string(), v.to_string()))
            .collect(),
        lookback: Lookback::All,
    };
    let mut found = Vec::new();
    let o = dplog_query::run(dir, &q, &mut |_, r, _| found.push(r.to_vec()), &mut |_| {}).unwrap();
    (found, o)
}

fn conn_key(cport: &str) -> Vec<(&'static str, String)> {
    vec![
        ("vip", "192.0.2.10".into()),
        ("vport", "443".into()),
        ("clientAddr", "198.51.100.7".into()),
        ("clientPort", cport.into()),
    ]
}

fn at(dir: &Path, ms: u64, conds: &[(&str, String)]) -> (Vec<Vec<u8>>, Outcome) {
    let c: Vec<(&str, &str)> = conds.iter().map(|(f, v)| (*f, v.as_str())).collect();
    query(dir, Mode::At(T0 + ms * MS), &c)
}

fn summaries(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "dps"))
        .collect();
    v.sort();
    v
}

#[test]
fn a_lookup_opens_only_the_segments_that_hold_its_tuple() {
    let dir = tempfile::tempdir().unwrap();
    vip_archive(dir.path());
    assert_eq!(list_segments(dir.path()).unwrap().len(), 10);
    assert_eq!(summaries(dir.path()).len(), 1);
    // The long connection, asked at 5 s with all of the window (10
    // segments in range up to 5 s: 6): its open is in segment 2, its
    // close in 7, beyond T. One segment opened, one block decoded.
    let (found, o) = at(dir.path(), 5000, &conn_key("9999"));
    assert_eq!(found.len(), 1);
    assert_eq!(u16::from_ne_bytes([found[0][26], found[0][27]]), 9999);
    let p = o.progress;
    assert!(o.problems.is_empty() && o.summary_problems.is_empty());
    assert_eq!((p.segments_opened, p.segments_pruned), (1, 5));
    assert_eq!(p.blocks_read, 1);
    // At 9.9 s: the window spans all ten segments; it holds the open
    // (2) and the close (7): two opened, nothing live.
    let (found, o) = at(dir.path(), 9900, &conn_key("9999"));
    assert!(found.is_empty());
    assert_eq!(
        (o.progress.segments_opened, o.progress.segments_pruned),
        (2, 8)
    );
    // A connection of second 4 asked at 4.2 s: live, one segment.
    let (found, o) = at(
        dir.path(),
        4200,
        &conn_key(&(4 * 100 + 3 + 1024).to_string()),
    );
    assert_eq!(found.len(), 1);
    assert_eq!(
        (o.progress.segments_opened, o.progress.segments_pruned),
        (1, 4)
    );
    // A tuple no segment holds: none opened.
    let (found, o) = at(dir.path(), 9900, &conn_key("7"));
    assert!(found.is_empty());
    assert_eq!(
        (o.progress.segments_opened, o.progress.segments_pruned),
        (0, 10)
    );
    // Not every tuple field given: the summary cannot answer, every
    // segment of the window is opened.
    let (_, o) = at(dir.path(), 9900, &[("clientPort", "9999".to_string())]);
    assert_eq!(
        (o.progress.segments_opened, o.progress.segments_pruned),
        (10, 0)
    );
    // --between with the whole tuple prunes the same way: the open and
    // the close, from two segments.
    let c = conn_key("9999");
    let c: Vec<(&str, &str)> = c.iter().map(|(f, v)| (*f, v.as_str())).collect();
    let (found, o) = query(dir.path(), Mode::Between(T0, T0 + 10_000 * MS), &c);
    assert_eq!(found.len(), 2);
    assert_eq!(
        (o.progress.segments_opened, o.progress.segments_pruned),
        (2, 8)
    );
}

#[test]
fn a_segment_the_summary_lacks_is_read_and_a_damaged_summary_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    vip_archive(dir.path());
    let (want, o) = at(dir.path(), 9900, &conn_key("9999"));
    assert_eq!(o.progress.segments_opened, 2);
    let (want5, _) = at(dir.path(), 5000, &conn_key("9999"));
    assert_eq!(want5.len(), 1);
    let sum = summaries(dir.path()).remove(0);
    let bytes = std::fs::read(&sum).unwrap();
    // A crash after segment 6 was sealed, before its entry (and the
    // later ones) were appended: the summary holds entries 0 to 5.
    // Entries are found by walking their heads (magic, length).
    let mut starts = Vec::new();
    let mut at_ = 0usize;
    while at_ < bytes.len() {
        assert_eq!(&bytes[at_..at_ + 4], summary::ENTRY_MAGIC);
        starts.push(at_);
        at_ += u32::from_le_bytes(bytes[at_ + 4..at_ + 8].try_into().unwrap()) as usize;
    }
    assert_eq!(starts.len(), 10);
    std::fs::write(&sum, &bytes[..starts[6]]).unwrap();
    // Segments 6 to 9 have no entry: opened, as before; the answer is
    // the same. 2 (held, ruled out: 0, 1, 3, 4, 5) ...
    let (found, o) = at(dir.path(), 9900, &conn_key("9999"));
    assert_eq!(found, want);
    assert!(o.summary_problems.is_empty());
    assert_eq!(
        (o.progress.segments_opened, o.progress.segments_pruned),
        (5, 5)
    );
    // A torn last entry (cut inside it): reported, the same answer.
    std::fs::write(&sum, &bytes[..starts[6] + 40]).unwrap();
    let (found, o) = at(dir.path(), 9900, &conn_key("9999"));
    assert_eq!(found, want);
    assert_eq!(o.summary_problems.len(), 1, "{:?}", o.summary_problems);
    assert!(o.summary_problems[0].reason.contains("torn"));
    assert_eq!(o.progress.segments_opened, 5);
    // Damaged buckets: every bucket of entry 0 (segment 0, which does
    // not hold the tuple) fails its CRC: reported, and segment 0 is
    // opened; the answer is the same. Its bucket table and buckets lie
    // in the `.dpb` at the offset and length its description gives, the
    // table first (2^bits + 1 offsets u32; bits: the description's byte
    // before the tuple count, its last 4 bytes). The entry holds no table.
    std::fs::write(&sum, &bytes).unwrap();
    let dpb = sum.with_extension("dpb");
    let buckets = std::fs::read(&dpb).unwrap();
    let total0 = u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
    let dlen0 = u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
    assert_eq!(total0, summary::ENTRY_HEAD + dlen0);
    let desc = &bytes[summary::ENTRY_HEAD..summary::ENTRY_HEAD + dlen0];
    let at0 = u64::from_le_bytes(desc[24..32].try_into().unwrap()) as usize;
    let len0 = u64::from_le_bytes(desc[32..40].try_into().unwrap()) as usize;
    let table0 = 4 * ((1usize << desc[dlen0 - 5]) + 1);
    assert!(len0 >= table0 + 4 && at0 + len0 <= buckets.len());
    let mut bad = buckets.clone();
    for b in &mut bad[at0 + table0..at0 + len0] {
        *b ^= 0x55;
    }
    std::fs::write(&dpb, &bad).unwrap();
    let (found, o) = at(dir.path(), 5000, &conn_key("9999"));
    assert_eq!(found, want5);
    assert_eq!(o.summary_problems.len(), 1, "{:?}", o.summary_problems);
    assert!(o.summary_problems[0].reason.contains("checksum mismatch"));
    assert_eq!(
        (o.progress.segments_opened, o.progress.segments_pruned),
        (2, 4)
    );
    // A damaged bucket table (offsets beyond the entry's bytes): reported
    // the same way, segment 0 opened.
    let mut bad = buckets.clone();
    bad[at0..at0 + table0].fill(0xff);
    std::fs::write(&dpb, &bad).unwrap();
    let (found, o) = at(dir.path(), 5000, &conn_key("9999"));
    assert_eq!(found, want5);
    assert_eq!(o.summary_problems.len(), 1, "{:?}", o.summary_problems);
    assert!(o.summary_problems[0].reason.contains("out of range"));
    assert_eq!(
        (o.progress.segments_opened, o.progress.segments_pruned),
        (2, 4)
    );
    std::fs::write(&dpb, &buckets).unwrap();
    // A damaged entry head (entry 1's description): the summary ends
    // there, reported; segments 1 to 9 are opened.
    let mut bad = bytes.clone();
    bad[starts[1] + summary::ENTRY_HEAD + 3] ^= 0x01;
    std::fs::write(&sum, &bad).unwrap();
    let (found, o) = at(dir.path(), 9900, &conn_key("9999"));
    assert_eq!(found, want);
    assert_eq!(o.summary_problems.len(), 1);
    assert!(o.summary_problems[0].reason.contains("checksum mismatch"));
    assert_eq!(
        (o.progress.segments_opened, o.progress.segments_pruned),
        (9, 1)
    );
    // No summary at all: every segment opened, the same answer.
    std::fs::remove_file(&sum).unwrap();
    std::fs::remove_file(&dpb).unwrap();
    let (found, o) = at(dir.path(), 9900, &conn_key("9999"));
    assert_eq!(found, want);
    assert_eq!(
        (o.progress.segments_opened, o.progress.segments_pruned),
        (10, 0)
    );
    // The writer cuts a torn tail off before it appends: a new segment
    // written after a torn append gets a readable entry.
    std::fs::write(&sum, &bytes[..starts[9] + 20]).unwrap();
    std::fs::write(&dpb, &buckets).unwrap();
    let mut later = vip_records()[..4].to_vec();
    for r in &mut later {
        r.time_ns += 20_000 * MS;
    }
    let recs: Vec<Vec<u8>> = later.iter().map(|r| r.bytes()).collect();
    write(dir.path(), &vip_schema(), &recs, vec!["@lifecycle".into()]);
    let (_, o) = at(dir.path(), 9900, &conn_key("9999"));
    assert!(o.summary_problems.is_empty(), "{:?}", o.summary_problems);
    // Segments 9 (entry cut off) and 10 (after T: not in the window).
    assert_eq!(
        (o.progress.segments_opened, o.progress.segments_pruned),
        (3, 7)
    );
}

fn nat(t_ms: u64, port: u16, event: NatEvent, src_port: u16) -> Vec<u8> {
    Nat44SessionRecord {
        header: RecordHeader::of::<Nat44SessionRecord>(),
        timestamp_ns: T0 + t_ms * MS,
        nat_event: event as u8,
        protocol: 6,
        src_addr: 0x0A00_0001,
        src_port,
        post_nat_src_addr: 0xC633_6407,
        post_napt_src_port: port,
        dst_addr: 0xCB00_7101,
        dst_port: 443,
        ..Default::default()
    }
    .record_bytes()
    .to_vec()
}

#[test]
fn nat_lookups_by_public_address_and_port_prune_with_that_summary() {
    // Six one-second segments, 50 sessions each (ports k * 100 + i),
    // each deleted 300 ms after its create; port 5000 created at 1.2 s,
    // deleted at 4.8 s.
    let mut recs: Vec<(u64, Vec<u8>)> = Vec::new();
    for k in 0..6u64 {
        for i in 0..50u64 {
            let port = (k * 100 + i) as u16 + 1024;
            let t = k * 1000 + i * 10;
            recs.push((t, nat(t, port, NatEvent::Nat44SessionCreate, 2000)));
            recs.push((
                t + 300,
                nat(t + 300, port, NatEvent::Nat44SessionDelete, 2000),
            ));
        }
    }
    recs.push((1200, nat(1200, 5000, NatEvent::Nat44SessionCreate, 3000)));
    recs.push((4800, nat(4800, 5000, NatEvent::Nat44SessionDelete, 3000)));
    recs.sort_by_key(|r| r.0);
    let recs: Vec<Vec<u8>> = recs.into_iter().map(|r| r.1).collect();
    let key = [
        ("postNATSourceIPv4Address", "198.51.100.7"),
        ("postNAPTSourceTransportPort", "5000"),
    ];
    let schema = Nat44SessionRecord::schema();
    // Summarized on the public address and port.
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        schema,
        &recs,
        vec![
            "postNATSourceIPv4Address".into(),
            "postNAPTSourceTransportPort".into(),
        ],
    );
    assert_eq!(list_segments(dir.path()).unwrap().len(), 6);
    let (found, o) = query(dir.path(), Mode::At(T0 + 3000 * MS), &key);
    assert_eq!(found.len(), 1);
    assert_eq!(
        (o.progress.segments_opened, o.progress.segments_pruned),
        (1, 3)
    );
    let (found, o) = query(dir.path(), Mode::At(T0 + 5900 * MS), &key);
    assert!(found.is_empty());
    assert_eq!(
        (o.progress.segments_opened, o.progress.segments_pruned),
        (2, 4)
    );
    // The default summary (the session's lifecycle keys, its whole
    // tuple): the address and port alone do not give it, every segment
    // of the window is opened, with the same answer.
    let dflt = tempfile::tempdir().unwrap();
    write(dflt.path(), schema, &recs, vec!["@lifecycle".into()]);
    let (found2, o) = query(dflt.path(), Mode::At(T0 + 3000 * MS), &key);
    assert_eq!(found2.len(), 1);
    assert_eq!(
        (o.progress.segments_opened, o.progress.segments_pruned),
        (4, 0)
    );
}

#[test]
fn a_recovered_segment_gets_its_entry_and_an_empty_summary_setting_writes_none() {
    // A crash: the last second's segment is left open (its blocks
    // flushed), then recovered and sealed by the next writer, with its
    // summary entry: the lookup rules it out as any other.
    let dir = tempfile::tempdir().unwrap();
    let opts = || ArchiveSinkOptions {
        block_rows: 32,
        segment_interval_ms: Some(1000),
        ..Default::default()
    };
    let mut sink = ArchiveSink::open(dir.path(), opts()).unwrap();
    let mut enc = BinaryEncoder::new(&[&vip_schema()]);
    let mut b = Vec::new();
    for r in vip_records() {
        enc.push(&r.bytes(), &mut b);
    }
    sink.write_batch(&b).unwrap();
    sink.flush().unwrap();
    drop(sink);
    let segs = list_segments(dir.path()).unwrap();
    assert_eq!(segs.len(), 10);
    assert!(segs[9].range.is_none());
    drop(ArchiveSink::open(dir.path(), opts()).unwrap());
    assert!(list_segments(dir.path())
        .unwrap()
        .iter()
        .all(|s| s.range.is_some()));
    let (found, o) = at(dir.path(), 9900, &conn_key("9999"));
    assert!(found.is_empty());
    assert_eq!(
        (o.progress.segments_opened, o.progress.segments_pruned),
        (2, 8)
    );
    // `summary = []`: no summary file; every segment of the window is
    // opened, with the same answers.
    let none = tempfile::tempdir().unwrap();
    let recs: Vec<Vec<u8>> = vip_records().iter().map(|r| r.bytes()).collect();
    write(none.path(), &vip_schema(), &recs, Vec::new());
    assert!(std::fs::read_dir(none.path())
        .unwrap()
        .flatten()
        .all(|e| !e.file_name().to_string_lossy().starts_with("summary-")));
    let (found, o) = at(none.path(), 5000, &conn_key("9999"));
    assert_eq!(found.len(), 1);
    assert_eq!(
        (o.progress.segments_opened, o.progress.segments_pruned),
        (6, 0)
    );
}

#[path = "../../../testkit/fixtures/lb_conn.rs"]
mod lb_conn;

/// Summaries written before the bucket tables moved from the `.dps`
/// entries to the `.dpb` (`testkit/fixtures/archive_v3_summary1_lbconn`:
/// the records of the version-3 fixture and their summary, written by
/// the writer of that time) still prune, with the answers of the same
/// segments read without them; today's writer writes those segments
/// byte for byte, and entries without a table.
#[test]
fn summaries_whose_entries_hold_their_tables_still_prune() {
    let fx = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testkit/fixtures/archive_v3_summary1_lbconn");
    let head = |dps: &Path| {
        let b = std::fs::read(dps).unwrap();
        assert_eq!(&b[..4], summary::ENTRY_MAGIC);
        let total = u32::from_le_bytes(b[4..8].try_into().unwrap()) as usize;
        let dlen = u32::from_le_bytes(b[8..12].try_into().unwrap()) as usize;
        (total, dlen)
    };
    let (total, dlen) = head(&fx.join("summary-0000020454.dps"));
    assert!(
        total > summary::ENTRY_HEAD + dlen,
        "the entry holds its table"
    );
    let bare = tempfile::tempdir().unwrap();
    let segs = list_segments(&fx).unwrap();
    assert_eq!(segs.len(), 3);
    for sf in &segs {
        std::fs::copy(&sf.path, bare.path().join(sf.path.file_name().unwrap())).unwrap();
    }
    let ip = |a: u32| std::net::Ipv4Addr::from(a).to_string();
    let mut pruned = 0;
    let mut probes = 0;
    for c in lb_conn::archive_v2_conns()
        .iter()
        .filter(|c| c.event == lb_conn::OPEN)
        .step_by(23)
    {
        let key = [
            ("vip", ip(c.vip)),
            ("vport", c.vport.to_string()),
            ("clientAddr", ip(c.client)),
            ("clientPort", c.cport.to_string()),
        ];
        let key: Vec<(&str, &str)> = key.iter().map(|(f, v)| (*f, v.as_str())).collect();
        for t in [c.time_ns, c.time_ns + 800 * MS] {
            let (found, o) = query(&fx, Mode::At(t), &key);
            let (want, bare_o) = query(bare.path(), Mode::At(t), &key);
            assert_eq!(found, want);
            if t == c.time_ns {
                assert!(found.contains(&c.bytes()));
            }
            assert!(o.problems.is_empty() && o.summary_problems.is_empty());
            assert_eq!(bare_o.progress.segments_pruned, 0);
            pruned += o.progress.segments_pruned;
            probes += 1;
        }
    }
    assert!(
        probes > 50 && pruned > probes / 3,
        "{pruned} pruned in {probes}"
    );
    // Today's writer, the fixture's settings: the same segments (names,
    // records; the bytes differ only in the schema blocks, whose
    // metadata version has moved on), and entries whose tables are in
    // the `.dpb`.
    let now = tempfile::tempdir().unwrap();
    let s = lb_conn::schema();
    let mut enc = BinaryEncoder::new(&[&s]);
    let mut b = Vec::new();
    for c in lb_conn::archive_v2_conns() {
        enc.push(&c.bytes(), &mut b);
    }
    let opts = ArchiveSinkOptions {
        block_rows: 128,
        segment_interval_ms: Some(1000),
        ..Default::default()
    };
    let mut sink = ArchiveSink::open(now.path(), opts).unwrap();
    sink.write_batch(&b).unwrap();
    sink.close().unwrap();
    let now_segs = list_segments(now.path()).unwrap();
    assert_eq!(now_segs.len(), 3);
    for (a, b) in segs.iter().zip(&now_segs) {
        assert_eq!(a.path.file_name(), b.path.file_name());
    }
    let all = || Mode::Between(0, u64::MAX);
    let (fx_records, _) = query(&fx, all(), &[]);
    assert_eq!(fx_records.len(), lb_conn::archive_v2_conns().len());
    assert_eq!(query(now.path(), all(), &[]).0, fx_records);
    let (total, dlen) = head(&now.path().join("summary-0000020454.dps"));
    assert_eq!(total, summary::ENTRY_HEAD + dlen);

    // Today's writer appending to the fixture's summary (the same
    // records again, 10 s later): one `.dps` of both layouts; lookups
    // of the old records and of the new prune, and answer as the
    // segments read without the summary.
    let mixed = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(&fx).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), mixed.path().join(e.file_name())).unwrap();
    }
    let mut b = Vec::new();
    let mut enc = BinaryEncoder::new(&[&s]);
    let later: Vec<lb_conn::Conn> = lb_conn::archive_v2_conns()
        .into_iter()
        .map(|c| lb_conn::Conn {
            time_ns: c.time_ns + 10_000 * MS,
            ..c
        })
        .collect();
    for c in &later {
        enc.push(&c.bytes(), &mut b);
    }
    let opts = ArchiveSinkOptions {
        block_rows: 128,
        segment_interval_ms: Some(1000),
        ..Default::default()
    };
    let mut sink = ArchiveSink::open(mixed.path(), opts).unwrap();
    sink.write_batch(&b).unwrap();
    sink.close().unwrap();
    let segs = list_segments(mixed.path()).unwrap();
    assert_eq!(segs.len(), 6);
    let bare = tempfile::tempdir().unwrap();
    for sf in &segs {
        std::fs::copy(&sf.path, bare.path().join(sf.path.file_name().unwrap())).unwrap();
    }
    let mut pruned = 0;
    for c in lb_conn::archive_v2_conns()
        .iter()
        .chain(&later)
        .filter(|c| c.event == lb_conn::OPEN)
        .step_by(41)
    {
        let key = [
            ("vip", ip(c.vip)),
            ("vport", c.vport.to_string()),
            ("clientAddr", ip(c.client)),
            ("clientPort", c.cport.to_string()),
        ];
        let key: Vec<(&str, &str)> = key.iter().map(|(f, v)| (*f, v.as_str())).collect();
        let (found, o) = query(mixed.path(), Mode::At(c.time_ns + 100 * MS), &key);
        let (want, _) = query(bare.path(), Mode::At(c.time_ns + 100 * MS), &key);
        assert_eq!(found, want);
        assert!(o.problems.is_empty() && o.summary_problems.is_empty());
        pruned += o.progress.segments_pruned;
    }
    assert!(pruned > 50, "{pruned}");
}
