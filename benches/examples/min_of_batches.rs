//! Formatting cost on a shared machine: the minimum over many batches of
//! 1024 NAT44 create records (ns per record), which filters out the time
//! other processes take from the core far better than criterion's means.
//!
//! Peers: the hand-specialised formatter and the `write!` baseline shared
//! with `benches/format_template.rs` ([`dplog_benches::format_peers`]), the
//! compiled template of the same line, and the built-in JSON, text and
//! RFC 5424 layouts. Run pinned, e.g.
//! `cargo build --release -p dplog-benches --example min_of_batches &&
//! taskset -c 1 target/release/examples/min_of_batches [batches]`.
//! The criterion bench stays the reference; see benches/RESULTS.md.
use dplog_schema_nat::NatFormatSpec as _;
use std::time::Instant;

use dplog::formatters::layouts::text_template;
use dplog::formatters::{Options, Program};
use dplog::{Formatter, HasSchema, RecordHeader};
use dplog_benches::format_peers::{FmtWrite, Hand, TEMPLATE};
use dplog_schema_nat::Nat44SessionRecord;

#[inline(never)]
fn do_hand(h: &mut Hand, r: &Nat44SessionRecord, out: &mut Vec<u8>) {
    h.format(r, out)
}
#[inline(never)]
fn do_tmpl(p: &mut Program, r: &Nat44SessionRecord, out: &mut Vec<u8>) {
    p.run(r.as_bytes(), out);
}
fn main() {
    let pool: Vec<Nat44SessionRecord> = (0..1024u64)
        .map(|i| Nat44SessionRecord {
            header: RecordHeader::of::<Nat44SessionRecord>(),
            timestamp_ns: 1_767_225_600_500_000_000 + i * 1_000_000,
            src_addr: 0x0A00_0000 | (i.wrapping_mul(2_654_435_761) as u32 & 0x00FF_FFFF),
            post_nat_src_addr: 0xC633_6400 | (i as u32 & 0xFF),
            dst_addr: 0xCB00_7100 | ((i * 7) as u32 & 0xFF),
            src_port: 1024 + (i.wrapping_mul(40_503) % 64_000) as u16,
            post_napt_src_port: 1024 + (i % 63_000) as u16,
            dst_port: [443, 80, 53, 8443][(i % 4) as usize],
            protocol: 6,
            nat_event: 4,
            ..Default::default()
        })
        .collect();
    let t = TEMPLATE;
    let mut p = text_template(t, dplog_schema_nat::nat44_session(), Options::default()).unwrap();
    let mut h = Hand::new();
    let mut out = Vec::with_capacity(1 << 20);
    let (mut bh, mut bt) = (f64::MAX, f64::MAX);
    let iters: usize = std::env::args().nth(1).map_or(400, |a| a.parse().unwrap());
    for _ in 0..iters {
        out.clear();
        let t0 = Instant::now();
        for r in &pool {
            do_hand(&mut h, std::hint::black_box(r), &mut out);
        }
        bh = bh.min(t0.elapsed().as_nanos() as f64 / 1024.0);
        let a = out.len();
        out.clear();
        let t0 = Instant::now();
        for r in &pool {
            do_tmpl(&mut p, std::hint::black_box(r), &mut out);
        }
        bt = bt.min(t0.elapsed().as_nanos() as f64 / 1024.0);
        // Same line length; the bench checks the bytes.
        assert_eq!(a, out.len());
    }
    // `min_of_batches N line`: only the hand peer and the template (for
    // `valgrind --tool=callgrind`, instructions per line of each).
    if std::env::args().nth(2).as_deref() == Some("line") {
        println!(
            "hand {bh:.2} ns, template {bt:.2} ns, ratio hand/template {:.3}",
            bh / bt
        );
        return;
    }
    for (name, mut q) in [
        (
            "json",
            dplog::formatters::layouts::json(dplog_schema_nat::nat44_session(), Options::default())
                .unwrap(),
        ),
        (
            "text",
            dplog::formatters::layouts::text_default(
                dplog_schema_nat::nat44_session(),
                Options::default(),
            )
            .unwrap(),
        ),
        (
            "rfc5424",
            dplog::formatters::layouts::rfc5424(
                dplog_schema_nat::nat44_session(),
                Options::default(),
                &Default::default(),
            )
            .unwrap(),
        ),
    ] {
        let mut best = f64::MAX;
        for _ in 0..200 {
            out.clear();
            let t0 = Instant::now();
            for r in &pool {
                do_tmpl(&mut q, std::hint::black_box(r), &mut out);
            }
            best = best.min(t0.elapsed().as_nanos() as f64 / 1024.0);
        }
        println!("{name} {best:.2} ns ({} B/rec)", out.len() / 1024);
    }
    for (name, kind, template) in [
        (
            "template via NatFormatter",
            dplog::formatters::Format::Text,
            Some(t),
        ),
        (
            "ipfix via NatFormatter",
            dplog::formatters::Format::Ipfix,
            None,
        ),
    ] {
        let mut f = dplog::formatters::FormatSpec {
            kind,
            template: template.map(String::from),
            ..Default::default()
        }
        .nat_formatter()
        .unwrap();
        let mut best = f64::MAX;
        for _ in 0..200 {
            out.clear();
            let t0 = Instant::now();
            for r in &pool {
                f.format(std::hint::black_box(r), &mut out);
            }
            best = best.min(t0.elapsed().as_nanos() as f64 / 1024.0);
        }
        println!("{name} {best:.2} ns ({} B/rec)", out.len() / 1024);
    }
    let mut w = FmtWrite::new();
    let mut bw = f64::MAX;
    for _ in 0..iters / 4 {
        out.clear();
        let t0 = Instant::now();
        for r in &pool {
            w.format(std::hint::black_box(r), &mut out);
        }
        bw = bw.min(t0.elapsed().as_nanos() as f64 / 1024.0);
    }
    println!("write! {bw:.2} ns, write!/template {:.1}x", bw / bt);
    println!(
        "hand {bh:.2} ns, template {bt:.2} ns, ratio hand/template {:.3}",
        bh / bt
    );
}
