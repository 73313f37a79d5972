//! Issue 4, "Speed": the NAT44 create record formatted as a ~120-byte text
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

use std::hint::black_box;
use std::io::Write;
use std::net::Ipv4Addr;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dplog::formatters::layouts::text_template;
use dplog::formatters::{Format, FormatSpec, NatFormatter, Options, Program};
use dplog::schema::nat;
use dplog::{Formatter, HasSchema, Nat44SessionRecord, NatEvent};
use dplog_benches::{criterion_config, pin, record_pool, PRODUCER_CPU};

/// The issue's example template, extended with protocol and destination to
/// about 120 bytes per line.
pub const TEMPLATE: &str = "{observationTimeMilliseconds:rfc3339} NAT44 {natEvent:name} \
{sourceIPv4Address}:{sourceTransportPort} -> {postNATSourceIPv4Address}:{postNAPTSourceTransportPort} \
proto={protocolIdentifier} dst={destinationIPv4Address}:{destinationTransportPort}";

const POOL: usize = 1024;
const CLEAR_EVERY: usize = 1024;

fn event_name(ev: u8) -> &'static str {
    dplog::record::nat_event::NAMES
        .iter()
        .find(|(v, _)| *v == ev as u32)
        .map_or("?", |(_, n)| n)
}

/// `write!` peer.
struct FmtWrite {
    sec: u64,
    prefix: String,
}

impl FmtWrite {
    fn new() -> Self {
        Self {
            sec: u64::MAX,
            prefix: String::with_capacity(32),
        }
    }
}

impl Formatter<Nat44SessionRecord> for FmtWrite {
    fn format(&mut self, r: &Nat44SessionRecord, out: &mut Vec<u8>) {
        let sec = r.timestamp_ns / 1_000_000_000;
        if sec != self.sec {
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
            self.sec = sec;
        }
        writeln!(
            out,
            "{}.{:03}Z NAT44 {} {}:{} -> {}:{} proto={} dst={}:{}",
            self.prefix,
            (r.timestamp_ns / 1_000_000) % 1000,
            event_name(r.nat_event),
            Ipv4Addr::from(r.src_addr),
            r.src_port,
            Ipv4Addr::from(r.post_nat_src_addr),
            r.post_napt_src_port,
            r.protocol,
            Ipv4Addr::from(r.dst_addr),
            r.dst_port
        )
        .expect("writing to a Vec cannot fail");
    }
}

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

/// "00".."99".
static DIGITS2: [[u8; 2]; 100] = {
    let mut t = [[0u8; 2]; 100];
    let mut i = 0;
    while i < 100 {
        t[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    t
};

/// Octet text (3 bytes, left-aligned) and its length.
static OCTETS: [([u8; 4], usize); 256] = {
    let mut t = [([0u8; 4], 0usize); 256];
    let mut i = 0;
    while i < 256 {
        let (h, te, o) = ((i / 100) as u8, ((i / 10) % 10) as u8, (i % 10) as u8);
        t[i] = if i >= 100 {
            ([b'0' + h, b'0' + te, b'0' + o, 0], 3)
        } else if i >= 10 {
            ([b'0' + te, b'0' + o, 0, 0], 2)
        } else {
            ([b'0' + o, 0, 0, 0], 1)
        };
        i += 1;
    }
    t
};

/// The hand-specialised peer: this one line, straight-line code into a
/// fixed buffer, then one copy into the output.
struct Hand {
    sec: u64,
    /// `YYYY-MM-DDTHH:MM:SS.`
    prefix: [u8; 20],
}

impl Hand {
    fn new() -> Self {
        Self {
            sec: u64::MAX,
            prefix: [0; 20],
        }
    }

    #[inline(always)]
    fn ipv4(b: &mut [u8; 160], mut n: usize, a: u32) -> usize {
        for (i, shift) in [24u32, 16, 8, 0].into_iter().enumerate() {
            let (t, len) = &OCTETS[((a >> shift) & 0xff) as usize];
            b[n..n + 4].copy_from_slice(t);
            n += len;
            if i < 3 {
                b[n] = b'.';
                n += 1;
            }
        }
        n
    }

    #[inline(always)]
    fn port(b: &mut [u8; 160], n: usize, p: u16) -> usize {
        let p = p as usize;
        if p >= 10_000 {
            b[n] = b'0' + (p / 10_000) as u8;
            b[n + 1..n + 3].copy_from_slice(&DIGITS2[(p / 100) % 100]);
            b[n + 3..n + 5].copy_from_slice(&DIGITS2[p % 100]);
            n + 5
        } else if p >= 1000 {
            b[n..n + 2].copy_from_slice(&DIGITS2[p / 100]);
            b[n + 2..n + 4].copy_from_slice(&DIGITS2[p % 100]);
            n + 4
        } else if p >= 100 {
            b[n] = b'0' + (p / 100) as u8;
            b[n + 1..n + 3].copy_from_slice(&DIGITS2[p % 100]);
            n + 3
        } else if p >= 10 {
            b[n..n + 2].copy_from_slice(&DIGITS2[p]);
            n + 2
        } else {
            b[n] = b'0' + p as u8;
            n + 1
        }
    }

    #[inline(always)]
    fn lit(b: &mut [u8; 160], n: usize, s: &[u8]) -> usize {
        b[n..n + s.len()].copy_from_slice(s);
        n + s.len()
    }
}

impl Formatter<Nat44SessionRecord> for Hand {
    #[inline]
    fn format(&mut self, r: &Nat44SessionRecord, out: &mut Vec<u8>) {
        let sec = r.timestamp_ns / 1_000_000_000;
        if sec != self.sec {
            let (y, m, d) = dplog::formatters::time::civil_from_days((sec / 86_400) as i64);
            let sod = (sec % 86_400) as usize;
            let y = y as usize;
            let p = &mut self.prefix;
            p[0..2].copy_from_slice(&DIGITS2[y / 100]);
            p[2..4].copy_from_slice(&DIGITS2[y % 100]);
            p[4] = b'-';
            p[5..7].copy_from_slice(&DIGITS2[m as usize]);
            p[7] = b'-';
            p[8..10].copy_from_slice(&DIGITS2[d as usize]);
            p[10] = b'T';
            p[11..13].copy_from_slice(&DIGITS2[sod / 3600]);
            p[13] = b':';
            p[14..16].copy_from_slice(&DIGITS2[(sod / 60) % 60]);
            p[16] = b':';
            p[17..19].copy_from_slice(&DIGITS2[sod % 60]);
            p[19] = b'.';
            self.sec = sec;
        }
        let mut b = [0u8; 160];
        b[..20].copy_from_slice(&self.prefix);
        let ms = ((r.timestamp_ns / 1_000_000) % 1000) as usize;
        b[20] = b'0' + (ms / 100) as u8;
        b[21..23].copy_from_slice(&DIGITS2[ms % 100]);
        let mut n = Self::lit(&mut b, 23, b"Z NAT44 ");
        n = Self::lit(&mut b, n, event_name(r.nat_event).as_bytes());
        b[n] = b' ';
        n = Self::ipv4(&mut b, n + 1, r.src_addr);
        b[n] = b':';
        n = Self::port(&mut b, n + 1, r.src_port);
        n = Self::lit(&mut b, n, b" -> ");
        n = Self::ipv4(&mut b, n, r.post_nat_src_addr);
        b[n] = b':';
        n = Self::port(&mut b, n + 1, r.post_napt_src_port);
        n = Self::lit(&mut b, n, b" proto=");
        n = Self::port(&mut b, n, r.protocol as u16);
        n = Self::lit(&mut b, n, b" dst=");
        n = Self::ipv4(&mut b, n, r.dst_addr);
        b[n] = b':';
        n = Self::port(&mut b, n + 1, r.dst_port);
        b[n] = b'\n';
        out.extend_from_slice(&b[..n + 1]);
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
