//! Per-call producer latency: each 64-byte push timed on its own on the
//! producer core with the TSC, the consumer draining on the other core,
//! reported as percentiles (p50, p99, p99.9, p99.99, max), the way Quill's
//! and NanoLog's latency benches publish theirs.
//!
//! Cases, one 64-byte `Nat44SessionRecord` per call, in one run:
//!
//! - `ring SPSC try_push`, `ring MPSC try_push (one handle)`: the bare
//!   rings (`dplog::ring`, `dplog::mpsc_ring`, 16384 slots), a consumer
//!   thread on CPU 1 reading bursts of 32 and discarding them;
//! - `logger SPSC LogProducer::log`, `logger MPSC SharedProducer::log`
//!   and `logger SPSC LogProducer::log, unpaced` (`[ring]
//!   poll_gap_max_us = 0`: the consumer polls the producer's index again
//!   at once): a `Logger` from the TOML of the ffi benches (16384 slots, `block`,
//!   text to /dev/null, consumer on CPU 1);
//! - `C dplog_log (inline)`: the same configuration through the C ABI,
//!   `dplog_log` as C code calls it (the inline path of
//!   `include/dplog_inline.h`, in `benches/c/log_loop.c`, `cc -O2`),
//!   timed in C around each call;
//! - `C dplog_now_ns + dplog_log`, `C dplog_now_ticks + dplog_log`: the
//!   same with the record's time read inside each timed call, from
//!   `CLOCK_REALTIME` or the inline TSC read (the cost of each clock on
//!   the C path; see `docs/time-and-clocks.md`).
//!
//! Method: the producer (this thread) is pinned to CPU 0. Each call is
//! bracketed by two `rdtsc` reads (an asm block the compiler may not move
//! memory accesses across; no fence, as Quill and NanoLog); the timer's own
//! cost, the median of 1,000,000 back-to-back pairs, is printed and
//! subtracted from every sample (floored at 0). Ticks become ns with the
//! TSC rate calibrated over 100 ms. Calls are timed in chunks of 8192 (half
//! the ring); between chunks the producer waits, untimed, until the
//! consumer has read everything, so no timed call finds the ring full
//! (the numbers are the producer's cost with the consumer reading right
//! behind it, not backpressure). 2,000,000 calls per case after 200,000
//! untimed warm-up calls.
//!
//! What the tail is made of: for each case the bench also prints the
//! producer thread's involuntary context switches and minor page faults
//! during the timed chunks (`getrusage(RUSAGE_THREAD)`), and how many
//! samples exceed 1 µs (a preemption or an interrupt, not the ring).
//!
//! Run: `cargo build --release -p dplog-ffi && cargo bench -p dplog-ffi
//! --bench latency` (x86-64; `cargo bench` does not rebuild the cdylib
//! itself). Needs two CPUs.

#![allow(missing_docs)] // a bench binary

use std::ffi::CString;
use std::hint::{black_box, spin_loop};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dplog::config::LogConfig;
use dplog::nat::Nat44SessionRecord;

#[allow(dead_code)]
mod common;
use common::{record, TOML};

const CAPACITY: usize = 16384;
const CHUNK: usize = CAPACITY / 2;
const SAMPLES: usize = 2_000_000;
const WARMUP: usize = 200_000;
const PRODUCER_CPU: usize = 0;
const CONSUMER_CPU: usize = 1;

/// The time-stamp counter; without `nomem` the asm block is a compiler
/// barrier, so the push is not moved across it.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn tsc() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: rdtsc reads the counter into eax:edx and has no other effect.
    unsafe {
        core::arch::asm!("rdtsc", out("eax") lo, out("edx") hi, options(nostack, preserves_flags));
    }
    (u64::from(hi) << 32) | u64::from(lo)
}

/// The median cost of two back-to-back timer reads, in ticks.
#[cfg(target_arch = "x86_64")]
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

/// The calling thread's involuntary context switches and minor faults.
fn rusage() -> (i64, i64) {
    // SAFETY: getrusage fills the zeroed struct; RUSAGE_THREAD is Linux's.
    unsafe {
        let mut u: libc::rusage = core::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut u);
        (u.ru_nivcsw, u.ru_minflt)
    }
}

/// Samples (raw ticks per call) and what happened on the thread meanwhile.
struct Run {
    ticks: Vec<u32>,
    preempted: i64,
    faults: i64,
}

impl Run {
    fn new() -> Self {
        // Written once before timing, so no sample pays a first-touch fault.
        Run {
            ticks: vec![1; SAMPLES],
            preempted: 0,
            faults: 0,
        }
    }

    /// Fills `ticks` chunk by chunk with `chunk(from, out)`, which times
    /// `out.len()` calls starting at sequence `from`; `drained` waits,
    /// untimed, until the consumer has read everything pushed.
    fn measure(&mut self, mut chunk: impl FnMut(u64, &mut [u32]), mut drained: impl FnMut()) {
        let mut warm = vec![0u32; CHUNK];
        let mut seq = 0u64;
        let mut done = 0;
        while done < WARMUP {
            chunk(seq, &mut warm);
            seq += CHUNK as u64;
            done += CHUNK;
            drained();
        }
        let mut at = 0;
        while at < SAMPLES {
            let k = (SAMPLES - at).min(CHUNK);
            let (c0, f0) = rusage();
            chunk(seq, &mut self.ticks[at..at + k]);
            let (c1, f1) = rusage();
            self.preempted += c1 - c0;
            self.faults += f1 - f0;
            seq += k as u64;
            at += k;
            drained();
        }
    }

    fn report(mut self, name: &str, cost: u64, ns_per_tick: f64) -> (String, [Tail; 2]) {
        for t in &mut self.ticks {
            *t = t.saturating_sub(cost as u32);
        }
        let in_order = self.ticks.clone();
        self.ticks.sort_unstable();
        let n = self.ticks.len();
        let at = |q: f64| {
            let i = ((n as f64 * q).ceil() as usize).clamp(1, n) - 1;
            self.ticks[i] as f64 * ns_per_tick
        };
        let over_1us = self
            .ticks
            .iter()
            .rev()
            .take_while(|&&t| t as f64 * ns_per_tick > 1000.0)
            .count();
        println!(
            "{name:<36} {:>7.1} {:>7.1} {:>8.1} {:>9.1} {:>10.1}   {over_1us:>6} {:>9} {:>6}",
            at(0.50),
            at(0.99),
            at(0.999),
            at(0.9999),
            self.ticks[n - 1] as f64 * ns_per_tick,
            self.preempted,
            self.faults,
        );
        (
            name.to_string(),
            [
                attribute(&in_order, ns_per_tick, TAIL_NS),
                attribute(&in_order, ns_per_tick, FAR_NS),
            ],
        )
    }
}

/// Where the slow calls of one case sit in the call sequence: how many of
/// the calls over [`TAIL_NS`] are among the first [`CHUNK_HEAD`] calls of a
/// chunk (the producer has just waited, untimed, for the consumer: the
/// ring's index lines were last written by the other core), within
/// [`AFTER_STALL`] calls after a call over 1 µs (an interrupt or a
/// hypervisor exit: caches and TLB disturbed), at a latency-sampled index
/// (the push reads the TSC for the enqueue-time sample), at the slot that opens a
/// 4 KiB page of 64-byte slots or the one `try_push` prefetches a new page
/// from (2 KiB ahead), and the rest.
#[derive(Default)]
struct Tail {
    over: usize,
    chunk_head: usize,
    after_stall: usize,
    sampled: usize,
    page: usize,
    other: usize,
}

/// Calls slower than this count as the tail (the p99.9 target).
const TAIL_NS: f64 = 15.0;
/// Calls slower than this (about one cross-core cache-line transfer on
/// this class of machine) make the p99.9 where it is far above target.
const FAR_NS: f64 = 100.0;
const CHUNK_HEAD: usize = 32;
const AFTER_STALL: usize = 64;

fn attribute(ticks: &[u32], ns_per_tick: f64, over_ns: f64) -> Tail {
    let mut t = Tail::default();
    let mut last_stall: Option<usize> = None;
    for (i, &x) in ticks.iter().enumerate() {
        let ns = x as f64 * ns_per_tick;
        if ns > 1000.0 {
            last_stall = Some(i);
            continue;
        }
        if ns <= over_ns {
            continue;
        }
        t.over += 1;
        // Samples start at a chunk boundary and a multiple of 64 slots
        // (the warm-up is whole chunks).
        if i % CHUNK < CHUNK_HEAD {
            t.chunk_head += 1;
        } else if last_stall.is_some_and(|s| i - s <= AFTER_STALL) {
            t.after_stall += 1;
        } else if i % dplog::ring::SAMPLE_EVERY == 0 {
            t.sampled += 1;
        } else if i % 64 == 0 || i % 64 == 32 {
            t.page += 1;
        } else {
            t.other += 1;
        }
    }
    t
}

/// A consumer thread on CPU 1 reading bursts of 32 until stopped.
fn drain_thread(
    mut take: impl FnMut() -> usize + Send + 'static,
) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let h = std::thread::spawn(move || {
        if let Err(e) = dplog::affinity::pin_current_thread(CONSUMER_CPU) {
            eprintln!("warning: consumer unpinned: {e}");
        }
        // Relaxed: a stop flag; the join orders everything after it.
        while !s.load(Ordering::Relaxed) {
            if take() == 0 {
                spin_loop();
            }
        }
    });
    (stop, h)
}

#[cfg(target_arch = "x86_64")]
fn main() {
    if std::env::args().any(|a| a == "--list") {
        // `cargo bench -- --list` and `cargo test --benches` probes.
        return;
    }
    if let Err(e) = dplog::affinity::pin_current_thread(PRODUCER_CPU) {
        eprintln!("warning: producer unpinned: {e}");
    }
    let clock = dplog::tsc::TscClock::new(Duration::from_millis(100));
    let ns_per_tick = 1e9 / clock.ticks_per_second();
    let cost = timer_cost();
    println!(
        "producer CPU {PRODUCER_CPU}, consumer CPU {CONSUMER_CPU}; TSC {:.3} GHz; timer cost {cost} ticks ({:.1} ns), subtracted; {SAMPLES} calls per case",
        clock.ticks_per_second() / 1e9,
        cost as f64 * ns_per_tick
    );
    println!(
        "{:<36} {:>7} {:>7} {:>8} {:>9} {:>10}   {:>6} {:>9} {:>6}",
        "ns per call", "p50", "p99", "p99.9", "p99.99", "max", ">1us", "preempted", "faults"
    );
    let rec = record();
    let mut tails = Vec::new();

    // The bare rings, SPSC and MPSC with one handle: the same timed loop
    // over each ring's own `try_push` (a macro, so each is monomorphic and
    // inlined as in a dataplane).
    macro_rules! bare_ring_case {
        ($ring:expr, $label:expr $(, publish_every $every:expr)?) => {{
            #[allow(unused_mut)]
            let (mut p, mut c) = $ring.unwrap();
            $( p.set_publish_every($every); )?
            let p = std::cell::RefCell::new(p);
            let (stop, h) = drain_thread(move || {
                c.read_burst(32, |r| {
                    black_box(r.timestamp_ns);
                })
            });
            let mut run = Run::new();
            let mut r = rec;
            run.measure(
                |seq, out| {
                    let mut p = p.borrow_mut();
                    for (i, t) in out.iter_mut().enumerate() {
                        r.timestamp_ns = black_box(seq + i as u64);
                        let t0 = tsc();
                        let ok = p.try_push(r).is_ok();
                        $(
                            if (seq as usize + i + 1) % $every == 0 {
                                // As a forwarding loop flushes once per rx burst.
                                p.flush();
                            }
                        )?
                        let t1 = tsc();
                        assert!(ok, "ring full");
                        *t = (t1 - t0).min(u64::from(u32::MAX)) as u32;
                    }
                },
                || {
                    while p.borrow_mut().fill() > 0 {
                        std::thread::yield_now();
                    }
                },
            );
            tails.push(run.report($label, cost, ns_per_tick));
            stop.store(true, Ordering::Relaxed);
            h.join().unwrap();
        }};
    }
    bare_ring_case!(
        dplog::ring::<Nat44SessionRecord>(CAPACITY),
        "ring SPSC try_push"
    );
    bare_ring_case!(
        dplog::ring::<Nat44SessionRecord>(CAPACITY),
        "ring SPSC try_push, publish every 32",
        publish_every 32
    );
    bare_ring_case!(
        dplog::mpsc_ring::<Nat44SessionRecord>(CAPACITY),
        "ring MPSC try_push (one handle)"
    );

    // Logger, SPSC producer and MPSC shared producer; the SPSC one again
    // with the consumer's poll pacing off (it polls the producer's index
    // again at once: the cost its polls put on the producer).
    for (shared, paced) in [(false, true), (true, true), (false, false)] {
        let toml = if paced {
            TOML.to_string()
        } else {
            TOML.replace(
                "consumer_cpu = 1\n",
                "consumer_cpu = 1\npoll_gap_max_us = 0\n",
            )
        };
        let logger = LogConfig::from_toml_str(&toml)
            .unwrap()
            .start_nat44()
            .unwrap();
        let mut run = Run::new();
        let mut r = rec;
        let drained = || {
            let s = logger.stats();
            while logger.stats().dequeued < s.enqueued {
                std::thread::yield_now();
            }
        };
        if shared {
            let mut p = logger.shared_producer().unwrap();
            run.measure(
                |seq, out| {
                    for (i, t) in out.iter_mut().enumerate() {
                        r.timestamp_ns = black_box(seq + i as u64);
                        let t0 = tsc();
                        let ok = p.log(r);
                        let t1 = tsc();
                        assert!(ok);
                        *t = (t1 - t0).min(u64::from(u32::MAX)) as u32;
                    }
                },
                drained,
            );
            tails.push(run.report("logger MPSC SharedProducer::log", cost, ns_per_tick));
        } else {
            let mut p = logger.producer().unwrap();
            run.measure(
                |seq, out| {
                    for (i, t) in out.iter_mut().enumerate() {
                        r.timestamp_ns = black_box(seq + i as u64);
                        let t0 = tsc();
                        let ok = p.log(r);
                        let t1 = tsc();
                        assert!(ok);
                        *t = (t1 - t0).min(u64::from(u32::MAX)) as u32;
                    }
                },
                drained,
            );
            let label = if paced {
                "logger SPSC LogProducer::log"
            } else {
                "logger SPSC LogProducer::log, unpaced"
            };
            tails.push(run.report(label, cost, ns_per_tick));
        }
        // /dev/null refuses the final fsync (EINVAL); everything was written.
        let s = match logger.shutdown() {
            Ok(s) | Err((s, _)) => s,
        };
        assert_eq!(s.written_records, s.produced);
    }

    // C: dplog_log's inline path, timed in C.
    let api = common::load();
    let c_latency = api.loop_latency.expect("x86-64");
    let toml = CString::new(TOML).unwrap();
    let mut h = core::ptr::null_mut();
    let mut cp = core::ptr::null_mut();
    // SAFETY: the signatures of include/dplog.h; out-params point at locals.
    unsafe {
        assert_eq!((api.open_str)(toml.as_ptr(), &mut h), 0);
        assert_eq!((api.start)(h, core::ptr::null(), 0), 0);
        assert_eq!((api.producer_new)(h, 0, &mut cp), 0);
    }
    // struct dplog_stats is 22 u64 today; 64 leaves room.
    let mut stats = [0u64; 64];
    let mut run = Run::new();
    let mut pushed = 0u64;
    run.measure(
        |seq, out| {
            // SAFETY: cp is a live producer used by this thread only; out
            // has room for out.len() samples.
            let rc = unsafe { c_latency(cp, out.len() as u64, seq, out.as_mut_ptr()) };
            assert_eq!(rc, 0);
            pushed += out.len() as u64;
        },
        || loop {
            // SAFETY: h is live; stats has room for struct dplog_stats.
            assert_eq!(unsafe { (api.stats)(h, stats.as_mut_ptr()) }, 0);
            // enqueued is field 1, dequeued field 5.
            if stats[5] >= stats[1] {
                break;
            }
            std::thread::yield_now();
        },
    );
    tails.push(run.report("C dplog_log (inline)", cost, ns_per_tick));
    // The record's time read inside the timed call, with each clock.
    let clock_loop = api.loop_latency_clock.expect("x86-64");
    for (clock, label) in [
        (0u32, "C dplog_now_ns + dplog_log"),
        (1, "C dplog_now_ticks + dplog_log"),
    ] {
        let mut run = Run::new();
        run.measure(
            |_, out| {
                // SAFETY: as above.
                let rc = unsafe { clock_loop(cp, out.len() as u64, clock, out.as_mut_ptr()) };
                assert_eq!(rc, 0);
                pushed += out.len() as u64;
            },
            || loop {
                // SAFETY: h is live; stats has room for struct dplog_stats.
                assert_eq!(unsafe { (api.stats)(h, stats.as_mut_ptr()) }, 0);
                if stats[5] >= stats[1] {
                    break;
                }
                std::thread::yield_now();
            },
        );
        tails.push(run.report(label, cost, ns_per_tick));
    }
    // SAFETY: live handles, freed once.
    unsafe {
        assert_eq!((api.producer_free)(cp), 0);
        // DPLOG_OK, or DPLOG_ERR_IO (6) for the refused fsync of /dev/null.
        let r = (api.close)(h, stats.as_mut_ptr());
        assert!(r == 0 || r == 6, "dplog_close: {r}");
    }
    // written_records (field 6) == produced (field 0) == every record.
    assert_eq!(stats[6], stats[0]);
    assert_eq!(stats[0], pushed);

    for (k, over) in [TAIL_NS, FAR_NS].into_iter().enumerate() {
        println!();
        println!(
            "calls over {over} ns and under 1 us, by where they sit: first {CHUNK_HEAD} of a chunk, within {AFTER_STALL} after a call over 1 us, a latency-sampled index (1 in {}), a new-page slot (64-byte slots), other",
            dplog::ring::SAMPLE_EVERY
        );
        println!(
            "{:<36} {:>8} {:>11} {:>12} {:>8} {:>9} {:>9}",
            "case", "calls", "chunk head", "after >1us", "sampled", "new page", "other"
        );
        for (name, t) in &tails {
            let t = &t[k];
            println!(
                "{name:<36} {:>8} {:>11} {:>12} {:>8} {:>9} {:>9}",
                t.over, t.chunk_head, t.after_stall, t.sampled, t.page, t.other
            );
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    eprintln!("latency: x86-64 only (rdtsc)");
}
