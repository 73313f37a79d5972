//! The formatter speed target: the NAT44 create record formatted as a ~120-byte text
//! line by four peers in one run, plus the other formats in records/s.
//!
//! The line (template [`TEMPLATE`], then `\n`):
//!
//! ```text
//! 2026-01-01T00:00:00.500Z NAT44 NAT44_SESSION_CREATE 10.121.60.177:41527 -> 198.51.100.1:1025 proto=6 dst=203.0.113.7:80
//! ```
//!
//! Group `format_template` (records/s, one record per iteration, taken
//! round-robin from a pool of 1024 varied records 1 ms apart, into a reused
//! `Vec<u8>` cleared every 1024 records):
//!
//! - `fmt_write`: `write!` (core::fmt through `std::io::Write` on the Vec),
//!   `Ipv4Addr` Display, the `YYYY-MM-DDTHH:MM:SS` prefix cached per second;
//! - `c_snprintf`: one `snprintf` per line in `benches/c/format_line.c`
//!   (prefix cached per second with `gmtime_r` + `strftime`), writing
//!   straight into the Vec's spare capacity;
//! - `hand`: a formatter written by hand for exactly this line (cached
//!   prefix, two-digit and octet tables, straight-line code, one copy out);
//! - `template`: the compiled [`Program`] ([`Program::run`]);
//! - `template_nat_formatter`: the same template behind [`NatFormatter`], the
//!   consumer's `Formatter` (adds the schema-id dispatch).
//!
//! Group `format_layouts` (records/s): the built-in `text`, `json`,
//! `rfc5424` and `ipfix` formats through [`NatFormatter`] on the same pool
//! (IPFIX: records appended to open messages up to the 1500-byte MTU; a new
//! message whenever the Vec is cleared).
//!
//! Before measuring, every peer's output is checked byte for byte against
//! the template's.

#![allow(missing_docs)] // criterion_main! generates main

use dplog_schema_nat::NatFormatSpec as _;
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dplog::formatters::layouts::text_template;
use dplog::formatters::{Format, FormatSpec, Options, Program};
use dplog::nat;
use dplog::nat::NatFormatter;
use dplog::{Formatter, HasSchema};
use dplog_benches::format_peers::{FmtWrite, Hand, TEMPLATE};
use dplog_benches::{criterion_config, pin, record_pool, PRODUCER_CPU};
use dplog_schema_nat::{Nat44SessionRecord, NatEvent};

const POOL: usize = 1024;
const CLEAR_EVERY: usize = 1024;

/// Opaque `struct dplog_bench_c_cache` of `c/format_line.c` (an `int64_t`
/// and 32 chars; 48 bytes leave room).
#[repr(C, align(8))]
struct CCache([u8; 48]);

extern "C" {
    fn dplog_bench_c_cache_init(c: *mut CCache);
    fn dplog_bench_c_cache_size() -> usize;
    #[allow(clippy::too_many_arguments)]
    fn dplog_bench_c_format(
        c: *mut CCache,
        buf: *mut u8,
        cap: usize,
        ts_ns: u64,
        event: u8,
        proto: u8,
        src: u32,
        sport: u16,
        post: u32,
        pport: u16,
        dst: u32,
        dport: u16,
    ) -> usize;
}

/// `snprintf` peer.
struct CSnprintf(Box<CCache>);

impl CSnprintf {
    fn new() -> Self {
        // SAFETY: a pure function returning sizeof(struct dplog_bench_c_cache).
        let size = unsafe { dplog_bench_c_cache_size() };
        assert!(
            size <= std::mem::size_of::<CCache>(),
            "C cache is {size} bytes"
        );
        let mut c = Box::new(CCache([0; 48]));
        // SAFETY: `c` is a live, 8-aligned, writable buffer at least as
        // large as the C struct (checked above).
        unsafe { dplog_bench_c_cache_init(&mut *c) };
        Self(c)
    }
}

impl Formatter<Nat44SessionRecord> for CSnprintf {
    fn format(&mut self, r: &Nat44SessionRecord, out: &mut Vec<u8>) {
        const MAX: usize = 256;
        out.reserve(MAX);
        let len = out.len();
        // SAFETY: `reserve` guarantees MAX writable bytes after `len`; the C
        // function writes at most `cap` bytes (snprintf's NUL included) and
        // returns the number of line bytes it wrote (< cap), so exactly
        // `n` more bytes are initialised when `set_len` runs. The cache
        // pointer is our live, exclusively borrowed box.
        unsafe {
            let n = dplog_bench_c_format(
                &mut *self.0,
                out.as_mut_ptr().add(len),
                MAX,
                r.timestamp_ns,
                r.nat_event,
                r.protocol,
                r.src_addr,
                r.src_port,
                r.post_nat_src_addr,
                r.post_napt_src_port,
                r.dst_addr,
                r.dst_port,
            );
            out.set_len(len + n);
        }
    }
}

/// The compiled template, called directly.
struct Template(Program);

impl Formatter<Nat44SessionRecord> for Template {
    #[inline]
    fn format(&mut self, r: &Nat44SessionRecord, out: &mut Vec<u8>) {
        self.0.run(r.as_bytes(), out);
    }
}

fn template_program() -> Program {
    text_template(TEMPLATE, nat::nat44_session(), Options::default())
        .expect("bench template compiles")
}

fn nat_formatter(kind: Format, template: Option<&str>) -> NatFormatter {
    FormatSpec {
        kind,
        template: template.map(String::from),
        ..FormatSpec::default()
    }
    .nat_formatter()
    .expect("format builds")
}

fn format_all(pool: &[Nat44SessionRecord], f: &mut impl Formatter<Nat44SessionRecord>) -> Vec<u8> {
    let mut out = Vec::new();
    for r in pool {
        f.format(r, &mut out);
    }
    out
}

/// One record per iteration, round-robin over `pool`, into a Vec cleared
/// every `CLEAR_EVERY` records. Generic: the formatter is called statically.
fn bench<F: Formatter<Nat44SessionRecord>>(
    c: &mut Criterion,
    group: &str,
    name: &str,
    pool: &[Nat44SessionRecord],
    mut f: F,
) {
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(1));
    let mut buf = Vec::with_capacity(CLEAR_EVERY * 512);
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

fn format_template(c: &mut Criterion) {
    pin(PRODUCER_CPU);
    let pool = record_pool(POOL, NatEvent::Nat44SessionCreate);

    let want = String::from_utf8(format_all(&pool, &mut Template(template_program()))).unwrap();
    for (name, got) in [
        ("write!", format_all(&pool, &mut FmtWrite::new())),
        ("snprintf", format_all(&pool, &mut CSnprintf::new())),
        ("hand", format_all(&pool, &mut Hand::new())),
        (
            "NatFormatter",
            format_all(&pool, &mut nat_formatter(Format::Text, Some(TEMPLATE))),
        ),
    ] {
        assert_eq!(
            String::from_utf8(got).unwrap(),
            want,
            "{name} peer differs from the compiled template"
        );
    }
    eprintln!(
        "template line: {:?}; mean length {:.1} B",
        want.lines().next().unwrap_or(""),
        want.len() as f64 / POOL as f64
    );
    for (name, kind) in [
        ("text", Format::Text),
        ("json", Format::Json),
        ("rfc5424", Format::Rfc5424),
        ("ipfix", Format::Ipfix),
    ] {
        let n = format_all(&pool, &mut nat_formatter(kind, None)).len();
        eprintln!("{name}: {:.1} B per record", n as f64 / POOL as f64);
    }

    let g = "format_template";
    bench(c, g, "fmt_write", &pool, FmtWrite::new());
    bench(c, g, "c_snprintf", &pool, CSnprintf::new());
    bench(c, g, "hand", &pool, Hand::new());
    bench(c, g, "template", &pool, Template(template_program()));
    bench(
        c,
        g,
        "template_nat_formatter",
        &pool,
        nat_formatter(Format::Text, Some(TEMPLATE)),
    );

    let g = "format_layouts";
    for (name, kind) in [
        ("text", Format::Text),
        ("json", Format::Json),
        ("rfc5424", Format::Rfc5424),
        ("ipfix", Format::Ipfix),
    ] {
        bench(c, g, name, &pool, nat_formatter(kind, None));
    }
}

criterion_group! {
    name = benches;
    config = criterion_config(Duration::from_millis(500), Duration::from_millis(2000));
    targets = format_template
}
criterion_main!(benches);
