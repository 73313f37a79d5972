//! `--at` answers against a full scan of the records, on random probes
//! (proptest), for two record types with a lifecycle: `lbConn`, a
//! load balancer's connection declared by the test (open, close,
//! reject; keyed by VIP, port, client and client port), and the NAT44
//! session. Each archive is read with the lookup's row filter (format
//! version 3: only the rows holding the probe's values are decoded),
//! and the `lbConn` probes also run on the version-2 fixture archive
//! (its blocks decode whole) and the version-3 one, the NAT probes on a
//! second archive whose segment summaries are keyed on the public
//! address and port (probes that give both open only the segments that
//! may hold them; the `lbConn` archive's default summaries serve probes
//! that give the whole connection key): the answers must be the scan's,
//! record for record, in order. Both record types also go through
//! archives of format version 4 (each segment rewritten when sealed,
//! sorted by its named index key: `lbConn` by VIP and port, the NAT
//! session by public address and port; lookups read the blocks whose key
//! range holds the probe's key).
//!
//! The scan follows the documented semantics on its own: over the
//! records of `[T - lookback, T]` that hold the probe's values, in the
//! order written, an open at or before T is live unless a close of the
//! same key before T follows it (a close ends the most recent open of
//! its key).

#[path = "../../../testkit/fixtures/lb_conn.rs"]
mod lb_conn;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use dplog_core::schema::Schema;
use dplog_core::{HasSchema, RecordBytes, RecordHeader, Sink};
use dplog_formatters::binary::BinaryEncoder;
use dplog_query::{Lookback, Mode, Query};
use dplog_schema_nat::{Nat44SessionRecord, NatEvent};
use dplog_sinks::archive::{list_segments, ArchiveSink, ArchiveSinkOptions, Segment};
use proptest::prelude::*;

/// An archive `name` of `recs` (records of `schema`, in time order) with
/// small blocks and 200 ms segments, under the test target's scratch
/// directory (made anew by each run; a few hundred KiB).
fn archive(name: &str, schema: &Schema, recs: &[Vec<u8>]) -> PathBuf {
    archive_with(name, schema, recs, vec!["@lifecycle".into()])
}

/// [`archive`] with segment summaries keyed on `summary`.
fn archive_with(name: &str, schema: &Schema, recs: &[Vec<u8>], summary: Vec<String>) -> PathBuf {
    archive_keyed(name, schema, recs, summary, vec!["@lifecycle".into()])
}

/// [`archive_with`] with the block index on `index`: named fields make
/// every segment format version 4 (checked).
fn archive_keyed(
    name: &str,
    schema: &Schema,
    recs: &[Vec<u8>],
    summary: Vec<String>,
    index: Vec<String>,
) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("lookups_vs_scan")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut enc = BinaryEncoder::new(&[schema]);
    let opts = ArchiveSinkOptions {
        block_rows: 64,
        segment_interval_ms: Some(200),
        summary,
        index: index.clone(),
        ..Default::default()
    };
    let mut sink = ArchiveSink::open(&dir, opts).unwrap();
    let mut b = Vec::new();
    for r in recs {
        enc.push(r, &mut b);
    }
    sink.write_batch(&b).unwrap();
    sink.close().unwrap();
    let want = if index == ["@lifecycle"] { 3 } else { 4 };
    let segs = list_segments(&dir).unwrap();
    assert!(segs.len() > 5);
    for sf in segs {
        assert_eq!(
            Segment::open(&sf.path).unwrap().version,
            want,
            "{}",
            sf.path.display()
        );
    }
    dir
}

/// `lbConn` sessions in format version 4, sorted by VIP and port.
fn lb_keyed_archive() -> &'static Path {
    static A: OnceLock<PathBuf> = OnceLock::new();
    A.get_or_init(|| {
        archive_keyed(
            "lb-keyed",
            &lb_conn::schema(),
            lb_records(),
            vec!["@lifecycle".into()],
            vec!["vip".into(), "vport".into()],
        )
    })
}

/// NAT sessions in format version 4, sorted by public address and port
/// (summaries and index on the pair, as the docs tell a NAT operator).
fn nat_keyed_archive() -> &'static Path {
    static A: OnceLock<PathBuf> = OnceLock::new();
    A.get_or_init(|| {
        let pair: Vec<String> = vec![
            "postNATSourceIPv4Address".into(),
            "postNAPTSourceTransportPort".into(),
        ];
        archive_keyed(
            "nat-keyed",
            Nat44SessionRecord::schema(),
            nat_records(),
            pair.clone(),
            pair,
        )
    })
}

fn lb_records() -> &'static Vec<Vec<u8>> {
    static R: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    R.get_or_init(|| {
        lb_conn::archive_v2_conns()
            .iter()
            .map(|c| c.bytes())
            .collect()
    })
}

fn lb_archive() -> &'static Path {
    static A: OnceLock<PathBuf> = OnceLock::new();
    A.get_or_init(|| archive("lb", &lb_conn::schema(), lb_records()))
}

/// The version-3 fixture archive of the same records.
fn lb_fixture_v3() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(lb_conn::ARCHIVE_V3_DIR)
}

/// The NAT archive with its segments summarized on the public address
/// and port (the lookups that give both open only the segments that may
/// hold them).
fn nat_pair_archive() -> &'static Path {
    static A: OnceLock<PathBuf> = OnceLock::new();
    A.get_or_init(|| {
        archive_with(
            "nat-pair",
            Nat44SessionRecord::schema(),
            nat_records(),
            vec![
                "postNATSourceIPv4Address".into(),
                "postNAPTSourceTransportPort".into(),
            ],
        )
    })
}

fn lb_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(lb_conn::ARCHIVE_V2_DIR)
}

/// NAT44 sessions: 3000 creates 1 ms apart from T0, deletes 1 ms to 1.5 s
/// later (each 9th never), post-NAT keys from 4 addresses and 24 ports
/// (so keys repeat within a lookback).
fn nat_records() -> &'static Vec<Vec<u8>> {
    static R: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    R.get_or_init(|| {
        let mut x = 0x853c_49e6_748f_ea9bu64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut evs: Vec<(u64, usize, Nat44SessionRecord)> = Vec::new();
        for k in 0..3000u64 {
            let r = next();
            let open = Nat44SessionRecord {
                header: RecordHeader::of::<Nat44SessionRecord>(),
                timestamp_ns: lb_conn::T0 + k * 1_000_000,
                nat_event: NatEvent::Nat44SessionCreate as u8,
                protocol: [6, 17][(r & 1) as usize],
                src_addr: 0x0A00_0000 | ((r >> 8) & 0x3f) as u32,
                src_port: 1024 + ((r >> 16) % 8) as u16,
                post_nat_src_addr: 0xC633_6400 | ((r >> 24) & 3) as u32,
                post_napt_src_port: 2000 + ((r >> 28) % 24) as u16,
                dst_addr: 0xCB00_7100 | ((r >> 36) & 3) as u32,
                dst_port: [80, 443][((r >> 40) & 1) as usize],
                ..Default::default()
            };
            evs.push((open.timestamp_ns, evs.len(), open));
            if k % 9 != 4 {
                let mut d = open;
                d.timestamp_ns += 1_000_000 * (1 + (r >> 44) % 1500);
                d.nat_event = NatEvent::Nat44SessionDelete as u8;
                d.initiator_packets = (r >> 50) as u32;
                evs.push((d.timestamp_ns, evs.len(), d));
            }
        }
        evs.sort_by_key(|e| (e.0, e.1));
        evs.iter().map(|e| e.2.record_bytes().to_vec()).collect()
    })
}

fn nat_archive() -> &'static Path {
    static A: OnceLock<PathBuf> = OnceLock::new();
    A.get_or_init(|| archive("nat", Nat44SessionRecord::schema(), nat_records()))
}

/// The scan's answer: the live opens at `t` among `recs` (of `s`, in
/// the order written) holding `conds` (`(field, value bytes)`).
fn scan(
    s: &Schema,
    recs: &[Vec<u8>],
    conds: &[(&str, Vec<u8>)],
    t: u64,
    lookback: Option<u64>,
) -> Vec<Vec<u8>> {
    let l = s.meta().lifecycle.as_ref().unwrap();
    let time = |r: &[u8]| s.fields()[s.meta().event_time.unwrap()].read_uint(r);
    let from = lookback.map_or(0, |lb| t.saturating_sub(lb));
    let holds = |r: &[u8]| {
        conds.iter().all(|(name, v)| {
            let f = s.field(name).unwrap().1;
            f.bytes(r) == v.as_slice()
        })
    };
    let mut open: HashMap<Vec<u8>, Vec<usize>> = HashMap::new();
    let mut live = Vec::new();
    for (i, r) in recs.iter().enumerate() {
        let rt = time(r);
        if rt < from || rt > t || !holds(r) {
            continue;
        }
        let key: Vec<u8> = l
            .keys
            .iter()
            .flat_map(|&k| s.fields()[k].bytes(r).to_vec())
            .collect();
        let ev = s.fields()[l.field].read_uint(r);
        if l.is_open(ev) {
            live.push(i);
            open.entry(key).or_default().push(i);
        } else if l.is_close(ev) && rt < t {
            if let Some(j) = open.get_mut(&key).and_then(Vec::pop) {
                live.retain(|&x| x != j);
            }
        }
    }
    live.into_iter().map(|i| recs[i].clone()).collect()
}

/// `dplog-query`'s answer (its library, as the program runs it).
fn lookup(dir: &Path, conds: &[(&str, String)], t: u64, lookback: Option<u64>) -> Vec<Vec<u8>> {
    let q = Query {
        mode: Mode::At(t),
        conds: conds
            .iter()
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect(),
        lookback: lookback.map_or(Lookback::All, Lookback::Ns),
    };
    let mut out = Vec::new();
    let o = dplog_query::run(dir, &q, &mut |_, r, _| out.push(r.to_vec()), &mut |_| {}).unwrap();
    assert!(o.problems.is_empty(), "{:?}", o.problems);
    assert_eq!(o.found as usize, out.len());
    out
}

fn ip(a: u32) -> String {
    std::net::Ipv4Addr::from(a).to_string()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn lb_lookups_equal_the_scan(
        dt in 0u64..2_300_000_000,
        vip in proptest::option::of(0u32..5),
        vport in proptest::option::of(0usize..2),
        client in proptest::option::of(0u32..42),
        cport in proptest::option::of(0u16..18),
        lookback in proptest::option::of(1_000_000u64..1_500_000_000),
    ) {
        let t = lb_conn::T0 + dt;
        let s = lb_conn::schema();
        let mut conds: Vec<(&str, String)> = Vec::new();
        let mut raw: Vec<(&str, Vec<u8>)> = Vec::new();
        if let Some(v) = vip {
            conds.push(("vip", ip(0xC000_0200 | v)));
            raw.push(("vip", (0xC000_0200 | v).to_ne_bytes().to_vec()));
        }
        if let Some(p) = vport {
            let p = [80u16, 443][p];
            conds.push(("vport", p.to_string()));
            raw.push(("vport", p.to_ne_bytes().to_vec()));
        }
        if let Some(c) = client {
            conds.push(("clientAddr", ip(0xC633_6400 | c)));
            raw.push(("clientAddr", (0xC633_6400 | c).to_ne_bytes().to_vec()));
        }
        if let Some(p) = cport {
            conds.push(("clientPort", (40000 + p).to_string()));
            raw.push(("clientPort", (40000 + p).to_ne_bytes().to_vec()));
        }
        let want = scan(&s, lb_records(), &raw, t, lookback);
        prop_assert_eq!(&lookup(lb_archive(), &conds, t, lookback), &want);
        prop_assert_eq!(&lookup(&lb_fixture(), &conds, t, lookback), &want);
        prop_assert_eq!(&lookup(&lb_fixture_v3(), &conds, t, lookback), &want);
        prop_assert_eq!(&lookup(lb_keyed_archive(), &conds, t, lookback), &want);
    }

    #[test]
    fn nat_lookups_equal_the_scan(
        dt in 0u64..4_600_000_000,
        addr in proptest::option::of(0u32..5),
        port in proptest::option::of(1990u16..2030),
        proto in proptest::option::of(0usize..2),
        lookback in proptest::option::of(1_000_000u64..3_000_000_000),
    ) {
        let t = lb_conn::T0 + dt;
        let s = Nat44SessionRecord::schema();
        let mut conds: Vec<(&str, String)> = Vec::new();
        let mut raw: Vec<(&str, Vec<u8>)> = Vec::new();
        if let Some(a) = addr {
            conds.push(("postNATSourceIPv4Address", ip(0xC633_6400 | a)));
            raw.push(("postNATSourceIPv4Address", (0xC633_6400 | a).to_ne_bytes().to_vec()));
        }
        if let Some(p) = port {
            conds.push(("postNAPTSourceTransportPort", p.to_string()));
            raw.push(("postNAPTSourceTransportPort", p.to_ne_bytes().to_vec()));
        }
        if let Some(p) = proto {
            let p = [6u8, 17][p];
            conds.push(("protocolIdentifier", p.to_string()));
            raw.push(("protocolIdentifier", vec![p]));
        }
        let want = scan(s, nat_records(), &raw, t, lookback);
        prop_assert_eq!(&lookup(nat_archive(), &conds, t, lookback), &want);
        prop_assert_eq!(&lookup(nat_pair_archive(), &conds, t, lookback), &want);
        prop_assert_eq!(&lookup(nat_keyed_archive(), &conds, t, lookback), &want);
    }
}

#[test]
fn the_scan_finds_live_sessions_on_the_probes_it_is_given() {
    // The property above is worth something only if probes find
    // sessions: at T0 + 1 s, with no condition, hundreds are live.
    let t = lb_conn::T0 + 1_000_000_000;
    let n = scan(Nat44SessionRecord::schema(), nat_records(), &[], t, None).len();
    assert!(n > 300, "{n} live");
    assert_eq!(lookup(nat_archive(), &[], t, None).len(), n);
    let m = scan(&lb_conn::schema(), lb_records(), &[], t, None).len();
    assert!(m > 100, "{m} live");
    assert_eq!(lookup(&lb_fixture(), &[], t, None).len(), m);
}

/// `--between` conditions and interval.
type Case<'a> = (Vec<(&'a str, String)>, u64, u64);

/// `--between` answers of `dir` for `conds` over `[t1, t2]`.
fn between(dir: &Path, conds: &[(&str, String)], t1: u64, t2: u64) -> Vec<Vec<u8>> {
    let q = Query {
        mode: Mode::Between(t1, t2),
        conds: conds
            .iter()
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect(),
        lookback: Lookback::Default,
    };
    let mut out = Vec::new();
    let o = dplog_query::run(dir, &q, &mut |_, r, _| out.push(r.to_vec()), &mut |_| {}).unwrap();
    assert!(o.problems.is_empty(), "{:?}", o.problems);
    out
}

#[test]
fn between_answers_of_both_formats_are_the_records_in_time_order() {
    // Records of equal event time may come in another order from a
    // version-4 segment (key order): compared within each time.
    let time = |r: &[u8]| u64::from_ne_bytes(r[8..16].try_into().unwrap());
    let by_time = |mut v: Vec<Vec<u8>>| {
        assert!(v.windows(2).all(|w| time(&w[0]) <= time(&w[1])));
        v.sort_by(|a, b| (time(a), a).cmp(&(time(b), b)));
        v
    };
    let t0 = lb_conn::T0;
    let cases: Vec<Case<'_>> = vec![
        (vec![], t0, t0 + 3_000_000_000),
        (vec![], t0 + 150_000_000, t0 + 1_350_000_000),
        (vec![("vip", ip(0xC000_0201))], t0, t0 + 3_000_000_000),
        (
            vec![("vip", ip(0xC000_0202)), ("vport", "443".into())],
            t0 + 400_000_000,
            t0 + 2_000_000_000,
        ),
        (
            vec![("clientAddr", ip(0xC633_6407))],
            t0,
            t0 + 3_000_000_000,
        ),
        (
            vec![("vport", "80".into())],
            t0 + 900_000_000,
            t0 + 1_000_000_000,
        ),
    ];
    for (conds, t1, t2) in cases {
        let a = between(lb_archive(), &conds, t1, t2);
        let b = between(lb_keyed_archive(), &conds, t1, t2);
        assert!(!a.is_empty(), "{conds:?}");
        assert_eq!(by_time(a), by_time(b), "{conds:?} {t1} {t2}");
    }
    let nat = |d: &Path| {
        between(
            d,
            &[("postNATSourceIPv4Address", ip(0xC633_6401))],
            t0,
            t0 + 5_000_000_000,
        )
    };
    let time = |r: &[u8]| {
        Nat44SessionRecord::schema().fields()
            [Nat44SessionRecord::schema().meta().event_time.unwrap()]
        .read_uint(r)
    };
    let (a, b) = (nat(nat_pair_archive()), nat(nat_keyed_archive()));
    assert!(a.len() > 500);
    let sorted = |mut v: Vec<Vec<u8>>| {
        assert!(v.windows(2).all(|w| time(&w[0]) <= time(&w[1])));
        v.sort_by(|x, y| (time(x), x).cmp(&(time(y), y)));
        v
    };
    assert_eq!(sorted(a), sorted(b));
}
