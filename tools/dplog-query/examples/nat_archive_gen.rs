//! Writes the synthetic NAT44 archive the `archive` bench and
//! `benches/archive_lookup.py` measure lookups on, and optionally the
//! same events as CSV (for DuckDB / Parquet) and the probes to ask.
//!
//! `nat_archive_gen DIR EVENTS [CSV] [PROBES]`: `EVENTS` session events
//! (creates and deletes) over three simulated days from 2026-01-01
//! (creates spread evenly, lifetimes 1 s to 20 min, 256 pool
//! addresses, random ports), written to the archive directory `DIR`
//! with the sink's default settings but the segment summaries keyed on
//! the post-NAT address and port; `CSV` gets one line per event
//! (`time_ns,event,proto,src_addr,src_port,post_addr,post_port,
//! dst_addr,dst_port,vrf,ipkts,rpkts,iocts,rocts`, addresses as
//! integers); `PROBES` gets 200 `--at` probes (`time_ns addr port`):
//! 100 sessions live at the time asked, 100 random (mostly misses).
//! The random sequence is the bench's, so the data is the same.
//! `NAT_ARCHIVE_GEN_ZSTD_LEVEL` sets the sink's `zstd_level` (default 3);
//! `NAT_ARCHIVE_GEN_INDEX=pair` keys the block index on the post-NAT
//! address and port together (the default indexes each of the session's
//! eight lifecycle keys on its own). `NAT_ARCHIVE_GEN_FORMAT=3` seals
//! every segment as format version 3 (the default, 4, rewrites the
//! segments of a `pair` index sorted by key).
//!
//! It prints one line to stdout, the sealed segments' bytes split from
//! their footers: `split: data blocks B, schema and calibration blocks B,
//! index pages B, headers and footers B, segments B` (bytes).

#![allow(missing_docs)] // an example's main

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io::{BufWriter, Write};
use std::path::Path;

use dplog_core::Sink;
use dplog_core::{HasSchema, RecordBytes, RecordHeader};
use dplog_formatters::binary::BinaryEncoder;
use dplog_schema_nat::{Nat44SessionRecord, NatEvent};
use dplog_sinks::archive::format::{Footer, KIND_DATA};
use dplog_sinks::archive::{list_segments, ArchiveSink, ArchiveSinkOptions};

const EPOCH_2026_NS: u64 = 1_767_225_600_000_000_000;
const SPAN: u64 = 3 * 86_400_000_000_000;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: nat_archive_gen DIR EVENTS [CSV] [PROBES]");
        std::process::exit(2);
    }
    let dir = Path::new(&args[1]);
    let events: u64 = args[2].parse().expect("EVENTS: a count");
    let mut csv = args
        .get(3)
        .filter(|s| !s.is_empty())
        .map(|p| BufWriter::with_capacity(1 << 20, std::fs::File::create(p).expect("CSV file")));
    std::fs::create_dir_all(dir).expect("archive dir");
    let sessions = events / 2;
    let step = SPAN / sessions.max(1);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let schema = Nat44SessionRecord::schema();
    let mut enc = BinaryEncoder::new(&[schema]);
    // Segment summaries keyed on what the probes give: the public
    // address and port (the session's lifecycle keys are its whole tuple).
    let mut opts = ArchiveSinkOptions {
        summary: vec![
            "postNATSourceIPv4Address".into(),
            "postNAPTSourceTransportPort".into(),
        ],
        ..Default::default()
    };
    if std::env::var("NAT_ARCHIVE_GEN_INDEX").is_ok_and(|v| v == "pair") {
        opts.index = opts.summary.clone();
    }
    if let Ok(v) = std::env::var("NAT_ARCHIVE_GEN_FORMAT") {
        opts.format_version = v.parse().expect("NAT_ARCHIVE_GEN_FORMAT: 3 or 4");
    }
    if let Ok(l) = std::env::var("NAT_ARCHIVE_GEN_ZSTD_LEVEL") {
        opts.zstd_level = l.parse().expect("NAT_ARCHIVE_GEN_ZSTD_LEVEL: a zstd level");
    }
    let mut sink = ArchiveSink::open(dir, opts).expect("archive");
    let mut batch = Vec::with_capacity(256 << 10);
    let mut pending: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
    let mut live: HashMap<u64, Nat44SessionRecord> = HashMap::new();
    let mut sample = Vec::new();
    let mut push = |r: &Nat44SessionRecord, batch: &mut Vec<u8>, sink: &mut ArchiveSink| {
        enc.push(r.record_bytes(), batch);
        if batch.len() >= 256 << 10 {
            sink.write_batch(batch).expect("write");
            batch.clear();
        }
        if let Some(w) = csv.as_mut() {
            writeln!(
                w,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                r.timestamp_ns,
                r.nat_event,
                r.protocol,
                r.src_addr,
                r.src_port,
                r.post_nat_src_addr,
                r.post_napt_src_port,
                r.dst_addr,
                r.dst_port,
                r.ingress_vrf_id,
                r.initiator_packets,
                r.responder_packets,
                r.initiator_octets,
                r.responder_octets
            )
            .expect("CSV write");
        }
    };
    for k in 0..sessions {
        let t = EPOCH_2026_NS + k * step;
        while let Some(&Reverse((dt, id))) = pending.peek() {
            if dt > t {
                break;
            }
            pending.pop();
            let mut d = live.remove(&id).expect("live");
            d.timestamp_ns = dt;
            d.nat_event = NatEvent::Nat44SessionDelete as u8;
            d.initiator_packets = (next() % 1000) as u32;
            push(&d, &mut batch, &mut sink);
        }
        let x = next();
        let r = Nat44SessionRecord {
            header: RecordHeader::of::<Nat44SessionRecord>(),
            timestamp_ns: t,
            nat_event: NatEvent::Nat44SessionCreate as u8,
            protocol: if x & 1 == 0 { 6 } else { 17 },
            src_addr: 0x0A00_0000 | (x >> 8) as u32 & 0xFFFF,
            src_port: (x >> 24) as u16 | 1024,
            post_nat_src_addr: 0xC633_6400 | ((x >> 40) as u32 & 0xFF),
            post_napt_src_port: 1024 + ((x >> 48) as u16 % 64512),
            dst_addr: 0xCB00_7100 | ((x >> 4) as u32 & 0xFF),
            dst_port: [80, 443, 53, 8080][(x >> 2) as usize & 3],
            ..Default::default()
        };
        push(&r, &mut batch, &mut sink);
        let life = 1_000_000_000 + next() % 1_200_000_000_000;
        if k % (sessions / 100).max(1) == 0 && sample.len() < 100 {
            sample.push((r.post_nat_src_addr, r.post_napt_src_port, t + life / 2));
        }
        live.insert(k, r);
        pending.push(Reverse((t + life, k)));
    }
    while let Some(Reverse((dt, id))) = pending.pop() {
        let mut d = live.remove(&id).expect("live");
        d.timestamp_ns = dt;
        d.nat_event = NatEvent::Nat44SessionDelete as u8;
        push(&d, &mut batch, &mut sink);
    }
    if !batch.is_empty() {
        sink.write_batch(&batch).expect("write");
    }
    sink.close().expect("close");
    print_split(dir);
    if let Some(mut w) = csv {
        w.flush().expect("CSV flush");
    }
    if let Some(p) = args.get(4) {
        let mut rng = 12345u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut out = String::new();
        for i in 0..200 {
            let x = next();
            let (a, port, t) = match sample.get(i) {
                Some(&(a, p, t)) if i < 100 => (a, p, t),
                _ => (
                    0xC633_6400 | ((x >> 40) as u32 & 0xFF),
                    1024 + ((x >> 48) % 64512) as u16,
                    EPOCH_2026_NS + x % SPAN,
                ),
            };
            out.push_str(&format!("{t} {} {port}\n", std::net::Ipv4Addr::from(a)));
        }
        std::fs::write(p, out).expect("probes file");
    }
}

/// Prints the sealed segments' bytes split by what holds them, from
/// their footers: data blocks, other blocks (schemas, calibrations), key
/// index pages, and the rest (file header, footer, trailer).
fn print_split(dir: &Path) {
    let (mut data, mut other, mut index, mut total) = (0u64, 0u64, 0u64, 0u64);
    for s in list_segments(dir).expect("list segments") {
        let f = std::fs::File::open(&s.path).expect("segment");
        let len = f.metadata().expect("segment size").len();
        let footer = Footer::read(&f, len).expect("sealed segment footer");
        for b in &footer.blocks {
            if b.kind == KIND_DATA {
                data += u64::from(b.len);
            } else {
                other += u64::from(b.len);
            }
        }
        index += footer.index.iter().map(|p| u64::from(p.len)).sum::<u64>();
        total += len;
    }
    println!(
        "split: data blocks {data}, schema and calibration blocks {other}, index pages {index}, \
         headers and footers {}, segments {total}",
        total - data - other - index
    );
}
