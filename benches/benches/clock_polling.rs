//! The producer's clock and the consumer's polling, in one run: what a
//! record's timestamp costs the producer with `dplog::tsc::now_ticks`
//! (the TSC) against `dplog::tsc::realtime_ns` (`clock_gettime`, what C's
//! `dplog_now_ns` reads), and what the consumer's polls of the
//! producer's index cost it with pacing off (`[ring] poll_gap_max_us =
//! 0`, the consumer polls again at once) and on (the default).
//!
//! The record is a user-declared 64-byte flow event (not the NAT's), in
//! two record types that differ only in the kind of their time field
//! (`NsTimestamp`, `TscTimestamp`), logged by a `Logger` started from
//! TOML (16384 slots, `block`, `binary` format, a file sink, consumer on
//! CPU 1); this thread is the producer, on CPU 0.
//!
//! Per-call cases (p50, p99, p99.9 in ns): the stamp alone, then stamp +
//! `LogProducer::log` for each clock × pacing off/on, back to back and
//! (`work 300`) with 300 rounds of untimed dependent arithmetic before
//! each call (a dataplane's work per record, about 1 µs here: the
//! consumer keeps up and polls often). Each call is
//! bracketed by two `rdtsc` reads (the timer's median cost subtracted);
//! calls are timed in chunks of half the ring, and between chunks the
//! producer waits, untimed, until the consumer has read everything (so
//! the consumer is reading right behind the producer, polling its index:
//! the case pacing is for). 1,000,000 timed calls per case after 100,000
//! untimed ones. `polls/rec` is the ring's `tail_polls / dequeued` over
//! the case.
//!
//! Throughput cases: 4,000,000 records logged back to back (one `log` per
//! record), from the first call until the sink has taken the last
//! (`written_records`), in records/s, for each clock × pacing.
//!
//! Files go to a temporary directory under `DPLOG_BENCH_DIR` (default the
//! system's temporary directory), deleted after each case. Numbers from a
//! machine other programs share are rough: the bench prints the load
//! average before and after.
//!
//! `cargo bench -p dplog-benches --bench clock_polling` (x86-64; needs two
//! CPUs).

#![allow(missing_docs)] // a bench binary

use std::hint::black_box;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use dplog::config::LogConfig;
use dplog::tsc::{now_ticks, realtime_ns};
use dplog::{schema, HasSchema, Logger, Record, RecordHeader, Schema};
use dplog_benches::{check_two_cpus, pin, CONSUMER_CPU, PRODUCER_CPU};

const CAPACITY: usize = 16384;
const CHUNK: usize = CAPACITY / 2;
const SAMPLES: usize = 1_000_000;
const WARMUP: usize = 100_000;
const THROUGHPUT_RECORDS: u64 = 4_000_000;

/// Defines a 64-byte flow event whose `time` field is of `$kind`.
macro_rules! flow_event {
    ($name:ident, $id:expr, $schema_name:literal, $kind:ident) => {
        #[repr(C)]
        #[derive(Clone, Copy)]
        struct $name {
            header: RecordHeader,
            time: u64,
            src: u32,
            dst: u32,
            sport: u16,
            dport: u16,
            proto: u8,
            event: u8,
            _pad: [u8; 2],
            packets: u64,
            bytes: u64,
            vrf: u32,
            _pad2: [u8; 12],
        }
        const _: () = assert!(std::mem::size_of::<$name>() == 64);

        impl Record for $name {
            const SCHEMA_ID: u16 = $id;
            fn header(&self) -> &RecordHeader {
                &self.header
            }
        }

        // SAFETY: repr(C), 64 bytes with explicit padding fields (size
        // asserted above); the schema is built from the struct's own
        // offsets and size.
        unsafe impl HasSchema for $name {
            fn schema() -> &'static Schema {
                static S: OnceLock<Schema> = OnceLock::new();
                S.get_or_init(|| {
                    schema!($name, id = $id, name = $schema_name, [
                        time => "flowStartNanoseconds": $kind, ie 0;
                        src => "sourceIPv4Address": Ipv4, ie 8;
                        dst => "destinationIPv4Address": Ipv4, ie 12;
                        sport => "sourceTransportPort": Port, ie 7;
                        dport => "destinationTransportPort": Port, ie 11;
                        proto => "protocolIdentifier": Protocol, ie 4;
                        event => "flowEvent": U8, ie 0;
                        packets => "packetDeltaCount": U64, ie 2;
                        bytes => "octetDeltaCount": U64, ie 1;
                        vrf => "ingressVRFID": U32, ie 234;
                    ])
                    .expect("flow event schema")
                })
            }
        }

        impl Flow for $name {
            fn make(i: u64, time: u64) -> Self {
                $name {
                    header: RecordHeader::of::<$name>(),
                    time,
                    src: 0x0A00_0000 | (i as u32 & 0xFFFF),
                    dst: 0xC633_6400 | (i as u32 & 0xFF),
                    sport: 1024 + (i as u16 & 0x3FFF),
                    dport: 443,
                    proto: 6,
                    event: 1,
                    _pad: [0; 2],
                    packets: i & 0xFF,
                    bytes: (i & 0xFF) * 1200,
                    vrf: 0,
                    _pad2: [0; 12],
                }
            }
        }
    };
}

/// A flow event built from a sequence number and a time.
trait Flow: HasSchema + Record {
    fn make(i: u64, time: u64) -> Self;
}

flow_event!(FlowNs, 610, "flowEventNs", NsTimestamp);
flow_event!(FlowTsc, 611, "flowEventTsc", TscTimestamp);

/// The time-stamp counter; the asm block is a compiler barrier, so the
/// timed call is not moved across it.
#[inline(always)]
fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let (lo, hi): (u32, u32);
        // SAFETY: rdtsc reads the counter into eax:edx and has no other effect.
        unsafe {
            core::arch::asm!("rdtsc", out("eax") lo, out("edx") hi, options(nostack, preserves_flags));
        }
        (u64::from(hi) << 32) | u64::from(lo)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        realtime_ns()
    }
}

/// The median cost of two back-to-back timer reads, in ticks.
fn timer_cost() -> u64 {
    let mut d: Vec<u64> = (0..1_000_000)
        .map(|_| {
            let t0 = tsc();
            let t1 = tsc();
            t1.wrapping_sub(t0)
        })
        .collect();
    d.sort_unstable();
    d[d.len() / 2]
}

/// ns per tick of [`tsc`], measured over 100 ms.
fn ns_per_tick() -> f64 {
    let (t0, n0) = (tsc(), realtime_ns());
    std::thread::sleep(Duration::from_millis(100));
    let (t1, n1) = (tsc(), realtime_ns());
    (n1 - n0) as f64 / (t1 - t0) as f64
}

/// p50, p99, p99.9 of `ticks` less `cost`, in ns.
fn percentiles(ticks: &mut [u32], cost: u64, ns_per_tick: f64) -> [f64; 3] {
    for t in ticks.iter_mut() {
        *t = t.saturating_sub(cost as u32);
    }
    ticks.sort_unstable();
    let n = ticks.len();
    [0.50, 0.99, 0.999].map(|q| {
        let i = ((n as f64 * q).ceil() as usize).clamp(1, n) - 1;
        f64::from(ticks[i]) * ns_per_tick
    })
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn start<R: Flow>(dir: &Path, gap_us: u64) -> Logger<R> {
    let toml = format!(
        "[ring]\ncapacity = {CAPACITY}\nconsumer_cpu = {CONSUMER_CPU}\npoll_gap_max_us = {gap_us}\n\
         [format]\ntype = \"binary\"\n[sink]\ntype = \"file\"\npath = \"{}\"\n",
        dir.join("flows.bin").display()
    );
    LogConfig::from_toml_str(&toml)
        .expect("bench config")
        .start::<R>()
        .expect("logger starts")
}

/// Waits until the consumer has read `n` records of ring 0.
fn wait_read<R: Record>(logger: &Logger<R>, n: u64) {
    while logger.snapshot().rings[0].dequeued < n {
        std::hint::spin_loop();
    }
}

/// The stamp alone, per call.
fn stamp_case(name: &str, stamp: fn() -> u64, cost: u64, npt: f64) {
    let mut ticks = vec![0u32; SAMPLES];
    for _ in 0..WARMUP {
        black_box(stamp());
    }
    for t in ticks.iter_mut() {
        let t0 = tsc();
        black_box(stamp());
        let t1 = tsc();
        *t = t1.wrapping_sub(t0) as u32;
    }
    let [p50, p99, p999] = percentiles(&mut ticks, cost, npt);
    println!("{name:<44} {p50:>7.1} {p99:>7.1} {p999:>8.1}        -");
}

/// About `iters` rounds of dependent arithmetic: a dataplane's work per
/// record between two logging calls (untimed).
#[inline(always)]
fn work(iters: u32, x: &mut u64) {
    for _ in 0..iters {
        *x = black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
    }
}

/// The timer: its own cost (ticks) and ns per tick.
#[derive(Clone, Copy)]
struct Timer {
    cost: u64,
    npt: f64,
}

/// Stamp + `log` per call, with the consumer reading right behind;
/// `work_iters` rounds of [`work`] before each call, untimed.
fn log_case<R: Flow>(
    name: &str,
    dir: &Path,
    gap_us: u64,
    stamp: fn() -> u64,
    work_iters: u32,
    timer: Timer,
) {
    let Timer { cost, npt } = timer;
    let logger = start::<R>(dir, gap_us);
    let mut p = logger.producer().expect("producer");
    let mut seq = 0u64;
    let mut x = 1u64;
    let mut chunk = |out: &mut [u32], seq: &mut u64| {
        for t in out.iter_mut() {
            work(work_iters, &mut x);
            let t0 = tsc();
            let ok = p.log(R::make(*seq, stamp()));
            let t1 = tsc();
            debug_assert!(ok);
            *t = t1.wrapping_sub(t0) as u32;
            *seq += 1;
        }
    };
    let mut warm = vec![0u32; CHUNK];
    while (seq as usize) < WARMUP {
        chunk(&mut warm, &mut seq);
        wait_read(&logger, seq);
    }
    let before = logger.snapshot().rings[0];
    let mut ticks = vec![1u32; SAMPLES];
    let mut at = 0;
    while at < SAMPLES {
        let k = (SAMPLES - at).min(CHUNK);
        chunk(&mut ticks[at..at + k], &mut seq);
        at += k;
        wait_read(&logger, seq);
    }
    let after = logger.snapshot().rings[0];
    drop(p);
    let s = logger.shutdown().expect("clean shutdown");
    assert_eq!(s.written_records, seq, "every record written");
    let polls = (after.tail_polls - before.tail_polls) as f64
        / (after.dequeued - before.dequeued).max(1) as f64;
    let [p50, p99, p999] = percentiles(&mut ticks, cost, npt);
    println!("{name:<44} {p50:>7.1} {p99:>7.1} {p999:>8.1} {polls:>8.3}");
    let _ = std::fs::remove_file(dir.join("flows.bin"));
}

/// Records back to back into the ring and to the file.
fn throughput_case<R: Flow>(name: &str, dir: &Path, gap_us: u64, stamp: fn() -> u64) {
    let logger = start::<R>(dir, gap_us);
    let mut p = logger.producer().expect("producer");
    let t0 = Instant::now();
    for i in 0..THROUGHPUT_RECORDS {
        p.log(R::make(i, stamp()));
    }
    p.flush();
    while logger.stats().written_records < THROUGHPUT_RECORDS {
        std::thread::sleep(Duration::from_micros(100));
    }
    let secs = t0.elapsed().as_secs_f64();
    let ring = logger.snapshot().rings[0];
    drop(p);
    let s = logger.shutdown().expect("clean shutdown");
    assert_eq!(
        s.written_records, THROUGHPUT_RECORDS,
        "every record written"
    );
    println!(
        "{name:<44} {:>7.2} M rec/s   polls/rec {:.3}",
        THROUGHPUT_RECORDS as f64 / secs / 1e6,
        ring.tail_polls as f64 / ring.dequeued.max(1) as f64
    );
    let _ = std::fs::remove_file(dir.join("flows.bin"));
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs nothing.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    check_two_cpus();
    pin(PRODUCER_CPU);
    let base = std::env::var_os("DPLOG_BENCH_DIR").map_or_else(std::env::temp_dir, Into::into);
    std::fs::create_dir_all(&base).expect("bench dir");
    let dir = tempfile::tempdir_in(&base).expect("temporary directory");
    let cost = timer_cost();
    let npt = ns_per_tick();
    println!(
        "load average before: {}; clock source {:?}; timer cost {cost} ticks; {:.3} ns/tick",
        loadavg(),
        dplog::tsc::time_source(),
        npt
    );
    println!(
        "{:<44} {:>7} {:>7} {:>8} {:>8}",
        "per call (ns)", "p50", "p99", "p99.9", "polls/rec"
    );
    stamp_case("stamp: realtime_ns (clock_gettime)", realtime_ns, cost, npt);
    stamp_case("stamp: now_ticks (TSC)", now_ticks, cost, npt);
    let d = dir.path();
    let timer = Timer { cost, npt };
    for (gap, pacing) in [(0, "pacing off"), (20, "pacing on (20 us)")] {
        let name = format!("log + realtime_ns, {pacing}");
        log_case::<FlowNs>(&name, d, gap, realtime_ns, 0, timer);
        let name = format!("log + now_ticks, {pacing}");
        log_case::<FlowTsc>(&name, d, gap, now_ticks, 0, timer);
    }
    // A producer with work between its calls: the consumer keeps up and,
    // unpaced, polls the producer's index line every few records.
    for (gap, pacing) in [(0, "pacing off"), (20, "pacing on (20 us)")] {
        let name = format!("work 300 + log + now_ticks, {pacing}");
        log_case::<FlowTsc>(&name, d, gap, now_ticks, 300, timer);
    }
    println!("binary ring -> file, one log per record");
    for (gap, pacing) in [(0, "pacing off"), (20, "pacing on (20 us)")] {
        throughput_case::<FlowNs>(&format!("realtime_ns, {pacing}"), d, gap, realtime_ns);
        throughput_case::<FlowTsc>(&format!("now_ticks, {pacing}"), d, gap, now_ticks);
    }
    println!("load average after: {}", loadavg());
}
