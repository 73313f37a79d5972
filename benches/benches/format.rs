//! Per-record formatting of NAT44 create and delete records: dplog's
//! `TextFormatter` / `JsonFormatter` (thin wrappers over the compiled
//! `text` and `json` layouts) against the same lines produced with
//! `write!` (core::fmt) into a `Vec<u8>`.
//!
//! One criterion iteration formats one record (taken round-robin from a
//! pool of 1024 varied records, timestamps 1 ms apart) into a reused Vec
//! that is cleared every 1024 records. Each case runs twice: in group
//! `format_elements` (records/s) and in group `format_bytes` (bytes/s, with
//! the pool's mean line length as bytes per iteration); both measure the
//! same code. Before measuring, the `write!` lines are checked byte for
//! byte against dplog's.

#![allow(missing_docs)] // criterion_main! generates main

use std::hint::black_box;
use std::io::Write;
use std::net::Ipv4Addr;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dplog::nat::{JsonFormatter, TextFormatter};
use dplog::Formatter;
use dplog_benches::{criterion_config, record_pool};
use dplog_schema_nat::{Nat44SessionRecord, NatEvent};

const POOL: usize = 1024;
const CLEAR_EVERY: usize = 1024;

/// The `core::fmt` baseline: the same layout as dplog's formatters, with
/// the `YYYY-MM-DDTHH:MM:SS` prefix cached per second (as dplog does) and
/// everything else through `write!`.
struct FmtBaseline {
    json: bool,
    cached_sec: u64,
    prefix: String,
}

impl FmtBaseline {
    fn new(json: bool) -> Self {
        Self {
            json,
            cached_sec: u64::MAX,
            prefix: String::with_capacity(32),
        }
    }

    fn refresh(&mut self, sec: u64) {
        use std::fmt::Write as _;
        let (y, m, d) = dplog::formatters::time::civil_from_days((sec / 86_400) as i64);
        let sod = sec % 86_400;
        self.prefix.clear();
        write!(
            self.prefix,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
            sod / 3600,
            (sod / 60) % 60,
            sod % 60
        )
        .unwrap();
        self.cached_sec = sec;
    }

    fn format(&mut self, r: &Nat44SessionRecord, out: &mut Vec<u8>) {
        let sec = r.timestamp_ns / 1_000_000_000;
        if sec != self.cached_sec {
            self.refresh(sec);
        }
        let us = (r.timestamp_ns % 1_000_000_000) / 1000;
        let ms = r.timestamp_ns / 1_000_000;
        let src = Ipv4Addr::from(r.src_addr);
        let post = Ipv4Addr::from(r.post_nat_src_addr);
        let dst = Ipv4Addr::from(r.dst_addr);
        let delete = r.nat_event == NatEvent::Nat44SessionDelete as u8;
        let res = if self.json {
            write!(
                out,
                "{{\"timestamp\":\"{}.{us:06}Z\",\"observationTimeMilliseconds\":{ms},\
                 \"natEvent\":{},\"protocolIdentifier\":{},\"sourceIPv4Address\":\"{src}\",\
                 \"sourceTransportPort\":{},\"postNATSourceIPv4Address\":\"{post}\",\
                 \"postNAPTSourceTransportPort\":{},\"destinationIPv4Address\":\"{dst}\",\
                 \"destinationTransportPort\":{},\"ingressVRFID\":{}",
                self.prefix,
                r.nat_event,
                r.protocol,
                r.src_port,
                r.post_napt_src_port,
                r.dst_port,
                r.ingress_vrf_id
            )
            .and_then(|()| {
                if delete {
                    write!(
                        out,
                        ",\"initiatorPackets\":{},\"responderPackets\":{},\
                         \"initiatorOctets\":{},\"responderOctets\":{}",
                        r.initiator_packets,
                        r.responder_packets,
                        r.initiator_octets,
                        r.responder_octets
                    )
                } else {
                    Ok(())
                }
            })
            .and_then(|()| out.write_all(b"}\n"))
        } else {
            write!(
                out,
                "{}.{us:06}Z observationTimeMilliseconds={ms} natEvent={} \
                 protocolIdentifier={} sourceIPv4Address={src} sourceTransportPort={} \
                 postNATSourceIPv4Address={post} postNAPTSourceTransportPort={} \
                 destinationIPv4Address={dst} destinationTransportPort={} ingressVRFID={}",
                self.prefix,
                r.nat_event,
                r.protocol,
                r.src_port,
                r.post_napt_src_port,
                r.dst_port,
                r.ingress_vrf_id
            )
            .and_then(|()| {
                if delete {
                    write!(
                        out,
                        " initiatorPackets={} responderPackets={} initiatorOctets={} \
                         responderOctets={}",
                        r.initiator_packets,
                        r.responder_packets,
                        r.initiator_octets,
                        r.responder_octets
                    )
                } else {
                    Ok(())
                }
            })
            .and_then(|()| out.write_all(b"\n"))
        };
        res.expect("writing to a Vec cannot fail");
    }
}

impl Formatter<Nat44SessionRecord> for FmtBaseline {
    fn format(&mut self, rec: &Nat44SessionRecord, out: &mut Vec<u8>) {
        FmtBaseline::format(self, rec, out)
    }
}

/// Formats every record of `pool` with `f` and returns the output.
fn format_all(pool: &[Nat44SessionRecord], f: &mut impl Formatter<Nat44SessionRecord>) -> Vec<u8> {
    let mut out = Vec::new();
    for r in pool {
        f.format(r, &mut out);
    }
    out
}

/// Bench one formatter on one pool. Generic so that dplog's formatters are
/// called statically (no `dyn`), as the consumer runtime calls them.
fn bench_case<F: Formatter<Nat44SessionRecord>>(
    c: &mut Criterion,
    name: &str,
    pool: &[Nat44SessionRecord],
    make: impl Fn() -> F,
) {
    let mean_len = format_all(pool, &mut make()).len() as u64 / pool.len() as u64;
    for (group, tp) in [
        ("format_elements", Throughput::Elements(1)),
        ("format_bytes", Throughput::Bytes(mean_len)),
    ] {
        let mut g = c.benchmark_group(group);
        g.throughput(tp);
        let mut f = make();
        let mut buf = Vec::with_capacity(CLEAR_EVERY * 1024);
        let mut i = 0usize;
        g.bench_function(name, |b| {
            b.iter(|| {
                if i % CLEAR_EVERY == 0 {
                    buf.clear();
                }
                f.format(black_box(&pool[i % POOL]), &mut buf);
                i = i.wrapping_add(1);
            })
        });
        black_box(&buf);
        g.finish();
    }
}

fn format(c: &mut Criterion) {
    let create = record_pool(POOL, NatEvent::Nat44SessionCreate);
    let delete = record_pool(POOL, NatEvent::Nat44SessionDelete);

    // The baseline must print exactly what dplog prints.
    for pool in [&create, &delete] {
        let text = format_all(pool, &mut TextFormatter::default());
        assert_eq!(
            String::from_utf8(format_all(pool, &mut FmtBaseline::new(false))).unwrap(),
            String::from_utf8(text).unwrap(),
            "write! text baseline differs from TextFormatter"
        );
        let json = format_all(pool, &mut JsonFormatter::default());
        assert_eq!(
            String::from_utf8(format_all(pool, &mut FmtBaseline::new(true))).unwrap(),
            String::from_utf8(json).unwrap(),
            "write! JSON baseline differs from JsonFormatter"
        );
    }
    for (kind, pool) in [("create", &create), ("delete", &delete)] {
        let lens: Vec<String> = [
            (
                "text",
                format_all(pool, &mut TextFormatter::default()).len(),
            ),
            (
                "json",
                format_all(pool, &mut JsonFormatter::default()).len(),
            ),
        ]
        .iter()
        .map(|(n, l)| format!("{n} {:.1} B", *l as f64 / POOL as f64))
        .collect();
        eprintln!("mean line length, {kind}: {}", lens.join(", "));
    }

    bench_case(c, "dplog_text/create", &create, TextFormatter::default);
    bench_case(c, "fmt_write_text/create", &create, || {
        FmtBaseline::new(false)
    });
    bench_case(c, "dplog_text/delete", &delete, TextFormatter::default);
    bench_case(c, "fmt_write_text/delete", &delete, || {
        FmtBaseline::new(false)
    });
    bench_case(c, "dplog_json/create", &create, JsonFormatter::default);
    bench_case(c, "fmt_write_json/create", &create, || {
        FmtBaseline::new(true)
    });
    bench_case(c, "dplog_json/delete", &delete, JsonFormatter::default);
    bench_case(c, "fmt_write_json/delete", &delete, || {
        FmtBaseline::new(true)
    });
}

criterion_group! {
    name = benches;
    config = criterion_config(Duration::from_millis(500), Duration::from_millis(1500));
    targets = format
}
criterion_main!(benches);
