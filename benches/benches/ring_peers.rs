//! dplog SPSC and MPSC rings against DPDK's `rte_ring` (elem API, through
//! `dpdk-sys`, feature `dpdk`, EAL started with `--no-huge --no-pci`),
//! rtrb, crossbeam `ArrayQueue` and `Mutex<VecDeque>`, all in one run, for
//! 32- and 64-byte records, single and burst-32.
//!
//! Producer: the criterion thread, pinned to CPU 0. Consumer: a persistent
//! thread pinned to CPU 1 (`dplog_benches::CrossCore`) that takes records in
//! bursts of up to 32. One iteration = one record end to end, so `time` is
//! wall ns per record and `thrpt` records/s. Every queue holds 2048 records.
//! The producer stamps record `i` with sequence `i`; the consumer checks the
//! sum.
//!
//! MPSC cases run the multi-producer ring from one producer thread with
//! one handle (`single`, `burst32`: a handle alone claims without the CAS),
//! with a second, idle handle alive (`single_2handles`: the CAS claim and
//! ordered publish on every push), and, for burst-32, from
//! two producer threads (`burst32_2p`: dplog MPSC and `rte_ring` MP/SC,
//! the criterion thread and a second producer thread, each pushing half of
//! the records). With two CPUs, one for the consumer, both producers are
//! pinned to CPU 0 and *time-slice* on it (the kernel switches between
//! them; they never run at the same instant), so `burst32_2p` measures the
//! MP protocol with two live producers and their context switches,
//! including a producer preempted between claim and publish holding up
//! the other (the same for both rings), not two-core producer contention.
//! They run only with `DPLOG_BENCH_TWO_PRODUCERS=1`: on an otherwise idle
//! machine a preempted `rte_ring` producer makes the other spin away whole
//! scheduler slices (DPDK's ordered tail wait never yields), and the
//! warm-up alone ran for over 5 minutes without finishing.
//!
//! `producer_cost`: the producer-side cost of one 64-byte `try_push` into a
//! ring that is not full, timed on the producer core in runs of 1024 while
//! the consumer drains a 65536-slot ring on CPU 1.
//!
//! `cargo bench -p dplog-benches --features dpdk --bench ring_peers`

#![allow(missing_docs)] // criterion_main! generates main

use std::collections::VecDeque;
use std::hint::{black_box, spin_loop};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use dplog::{mpsc_ring, ring, Record, RecordHeader};
use dplog_benches::{
    check_two_cpus, criterion_config, expected_sum, pin, CrossCore, CONSUMER_CPU, PRODUCER_CPU,
};
use dplog_schema_nat::Nat44SessionRecord;

const CAP: usize = 2048;
const BURST: usize = 32;

/// A 32-byte record: header, sequence, two payload words.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Rec32 {
    header: RecordHeader,
    seq: u64,
    a: u64,
    b: u64,
}

impl Record for Rec32 {
    const SCHEMA_ID: u16 = 0x7E32;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

/// What the bench needs of a record type.
trait BenchRec: Record + std::fmt::Debug {
    const NAME: &'static str;
    fn template() -> Self;
    fn set_seq(&mut self, i: u64);
    fn seq(&self) -> u64;
}

impl BenchRec for Rec32 {
    const NAME: &'static str = "32B";
    fn template() -> Self {
        Rec32 {
            header: RecordHeader::of::<Rec32>(),
            seq: 0,
            a: 0xA5A5,
            b: 0x5A5A,
        }
    }
    fn set_seq(&mut self, i: u64) {
        self.seq = i;
    }
    fn seq(&self) -> u64 {
        self.seq
    }
}

impl BenchRec for Nat44SessionRecord {
    const NAME: &'static str = "64B";
    fn template() -> Self {
        dplog_benches::nat44(1, dplog_schema_nat::NatEvent::Nat44SessionCreate, 0)
    }
    fn set_seq(&mut self, i: u64) {
        self.timestamp_ns = i;
    }
    fn seq(&self) -> u64 {
        self.timestamp_ns
    }
}

fn check(what: &str, n: u64, sum: u64) {
    assert_eq!(sum, expected_sum(n), "{what}: consumer saw wrong records");
}

#[inline(always)]
fn produce_single<R: BenchRec>(n: u64, mut try_push: impl FnMut(R) -> bool) {
    let mut rec = R::template();
    for i in 0..n {
        rec.set_seq(i);
        while !try_push(rec) {
            spin_loop();
        }
    }
}

#[inline(always)]
fn produce_burst<R: BenchRec>(n: u64, push_burst: impl FnMut(&[R]) -> usize) {
    produce_burst_range::<R>(0, n, push_burst)
}

/// A consumer closure over `take(max, f) -> n` that reads up to `max`
/// records calling `f` on each.
fn consumer<R: BenchRec>(
    what: &'static str,
    mut take: impl FnMut(usize, &mut dyn FnMut(&R)) -> usize + Send + 'static,
) -> CrossCore {
    CrossCore::spawn(CONSUMER_CPU, move |n| {
        let (mut got, mut sum) = (0u64, 0u64);
        while got < n {
            let k = take(BURST, &mut |r: &R| sum = sum.wrapping_add(r.seq()));
            if k == 0 {
                spin_loop();
            }
            got += k as u64;
        }
        check(what, n, sum);
    })
}

fn bench<M: criterion::measurement::Measurement<Value = Duration>>(
    g: &mut BenchmarkGroup<'_, M>,
    id: String,
    cc: &mut CrossCore,
    mut produce: impl FnMut(u64),
) {
    g.bench_function(id, |b| b.iter_custom(|iters| cc.run(iters, &mut produce)));
}

fn peers_for<R: BenchRec, M: criterion::measurement::Measurement<Value = Duration>>(
    g: &mut BenchmarkGroup<'_, M>,
) {
    let sz = R::NAME;
    // dplog SPSC: single pushes publishing every record, single pushes
    // publishing once per 32 (`set_publish_every(32)`, flushed at the end
    // of the run, as a forwarding loop flushes per rx burst), and bursts.
    for mode in ["single", "single_publish32", "burst32"] {
        let (mut p, mut c) = ring::<R>(CAP).unwrap();
        if mode == "single_publish32" {
            p.set_publish_every(BURST);
        }
        let mut cc = consumer::<R>("dplog spsc", move |max, f| c.read_burst(max, f));
        let id = format!("{sz}/dplog_spsc/{mode}");
        bench(g, id, &mut cc, |n| {
            if mode == "burst32" {
                produce_burst::<R>(n, |s| p.try_push_burst(s))
            } else {
                produce_single::<R>(n, |r| p.try_push(r).is_ok());
                p.flush();
            }
        });
    }
    // dplog MPSC (one producer thread; see the module docs).
    for mode in ["single", "single_2handles", "burst32"] {
        let (mut p, mut c) = mpsc_ring::<R>(CAP).unwrap();
        // Kept alive, never used: the pushing handle is not alone.
        let idle = (mode == "single_2handles").then(|| p.clone());
        let mut cc = consumer::<R>("dplog mpsc", move |max, f| c.read_burst(max, f));
        let id = format!("{sz}/dplog_mpsc/{mode}");
        bench(g, id, &mut cc, |n| {
            if mode == "burst32" {
                produce_burst::<R>(n, |s| p.try_push_burst(s))
            } else {
                produce_single::<R>(n, |r| p.try_push(r).is_ok())
            }
        });
        drop(idle);
    }
    // rtrb: push / push_partial_slice; consumer reads chunks in place.
    for burst in [false, true] {
        let (mut p, mut c) = rtrb::RingBuffer::<R>::new(CAP);
        let mut cc = consumer::<R>("rtrb", move |max, f| {
            let k = c.slots().min(max);
            if k == 0 {
                return 0;
            }
            let chunk = c.read_chunk(k).expect("k slots are readable");
            let (a, b) = chunk.as_slices();
            a.iter().chain(b).for_each(&mut *f);
            chunk.commit_all();
            k
        });
        let id = format!("{sz}/rtrb/{}", if burst { "burst32" } else { "single" });
        bench(g, id, &mut cc, |n| {
            if burst {
                produce_burst::<R>(n, |s| p.push_partial_slice(s).0.len())
            } else {
                produce_single::<R>(n, |r| p.push(r).is_ok())
            }
        });
    }
    // crossbeam ArrayQueue (MPMC).
    {
        let q = Arc::new(crossbeam_queue::ArrayQueue::<R>::new(CAP));
        let qc = q.clone();
        let mut cc = consumer::<R>("ArrayQueue", move |max, f| {
            let mut k = 0;
            while k < max {
                match qc.pop() {
                    Some(r) => {
                        f(&r);
                        k += 1;
                    }
                    None => break,
                }
            }
            k
        });
        bench(
            g,
            format!("{sz}/crossbeam_ArrayQueue/single"),
            &mut cc,
            |n| produce_single::<R>(n, |r| q.push(r).is_ok()),
        );
    }
    // Mutex<VecDeque>, bounded by the producer.
    {
        let q = Arc::new(Mutex::new(VecDeque::<R>::with_capacity(CAP)));
        let qc = q.clone();
        let mut cc = consumer::<R>("Mutex<VecDeque>", move |max, f| {
            let mut g = qc.lock().unwrap();
            let k = g.len().min(max);
            g.drain(..k).for_each(|r| f(&r));
            k
        });
        bench(g, format!("{sz}/mutex_vecdeque/single"), &mut cc, |n| {
            produce_single::<R>(n, |r| {
                let mut g = q.lock().unwrap();
                if g.len() < CAP {
                    g.push_back(r);
                    true
                } else {
                    false
                }
            })
        });
    }
    // Opt-in: see the module docs (on an idle 2-CPU machine rte_ring's
    // two time-sliced producers can spin whole scheduler slices away).
    let two_producers = std::env::var_os("DPLOG_BENCH_TWO_PRODUCERS").is_some();
    if two_producers {
        mpsc_two_producers::<R, M>(g);
    }
    #[cfg(feature = "dpdk")]
    dpdk::peers::<R, M>(g);
    #[cfg(feature = "dpdk")]
    if two_producers {
        dpdk::mp_two_producers::<R, M>(g);
    }
}

/// Pushes records with sequences `from..to` in bursts of up to 32 (as
/// [`produce_burst`], from an offset), for the two-producer MPSC cases.
#[inline(always)]
fn produce_burst_range<R: BenchRec>(from: u64, to: u64, mut push_burst: impl FnMut(&[R]) -> usize) {
    let mut burst = [R::template(); BURST];
    let mut i = from;
    while i < to {
        let k = (to - i).min(BURST as u64) as usize;
        for (j, r) in burst[..k].iter_mut().enumerate() {
            r.set_seq(i + j as u64);
        }
        let mut done = 0;
        while done < k {
            let m = push_burst(&burst[done..k]);
            if m == 0 {
                spin_loop();
            }
            done += m;
        }
        i += k as u64;
    }
}

/// The second producer thread of the `burst32_2p` cases, pinned to
/// `PRODUCER_CPU` like the criterion thread (see the module docs: the two
/// time-slice CPU 0). `start(from, to)` has it push sequences `from..to`;
/// `wait` yields until it has.
struct SecondProducer {
    cmd: Option<std::sync::mpsc::Sender<(u64, u64)>>,
    done: Arc<std::sync::atomic::AtomicU64>,
    epoch: u64,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SecondProducer {
    fn spawn(mut produce: impl FnMut(u64, u64) + Send + 'static) -> Self {
        let (tx, rx) = std::sync::mpsc::channel::<(u64, u64)>();
        let done = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let d = done.clone();
        let thread = std::thread::Builder::new()
            .name("bench-producer-2".into())
            .spawn(move || {
                pin(PRODUCER_CPU);
                let mut epoch = 0;
                while let Ok((from, to)) = rx.recv() {
                    produce(from, to);
                    epoch += 1;
                    // Release pairs with the Acquire load in `wait`: this
                    // thread's pushes happen before the run is timed done.
                    d.store(epoch, std::sync::atomic::Ordering::Release);
                }
            })
            .expect("spawn second producer");
        Self {
            cmd: Some(tx),
            done,
            epoch: 0,
            thread: Some(thread),
        }
    }

    fn start(&mut self, from: u64, to: u64) {
        self.epoch += 1;
        self.cmd
            .as_ref()
            .expect("running")
            .send((from, to))
            .expect("second producer thread is gone");
    }

    fn wait(&self) {
        // Acquire pairs with the Release store after its pushes. Yield, not
        // spin: the second producer needs this CPU to finish.
        while self.done.load(std::sync::atomic::Ordering::Acquire) != self.epoch {
            if self.thread.as_ref().is_some_and(|t| t.is_finished()) {
                panic!("second producer thread died");
            }
            std::thread::yield_now();
        }
    }
}

impl Drop for SecondProducer {
    fn drop(&mut self) {
        drop(self.cmd.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Records per timed run of the two-producer cases, at least: criterion
/// sizes samples from its warm-up, and a warm-up that hit a preempted-
/// producer stall picks runs of a few hundred records, which fit in the
/// 2048-slot ring and would time only the pushes, not the end-to-end rate.
const MIN_2P_RUN: u64 = 65_536;

/// As [`bench`], but every timed run moves at least [`MIN_2P_RUN`] records
/// and the time is scaled back to criterion's iteration count (ns per
/// record are unchanged; only the sample is long enough to be end to end).
fn bench_min_run<M: criterion::measurement::Measurement<Value = Duration>>(
    g: &mut BenchmarkGroup<'_, M>,
    id: String,
    cc: &mut CrossCore,
    mut produce: impl FnMut(u64),
) {
    g.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let n = iters.max(MIN_2P_RUN);
            cc.run(n, &mut produce).mul_f64(iters as f64 / n as f64)
        })
    });
}

/// dplog MPSC, burst-32, two producer threads on CPU 0 (see the module
/// docs), each pushing half of every run.
fn mpsc_two_producers<R: BenchRec, M: criterion::measurement::Measurement<Value = Duration>>(
    g: &mut BenchmarkGroup<'_, M>,
) {
    let (mut p, mut c) = mpsc_ring::<R>(CAP).unwrap();
    let mut p2 = p.clone();
    let mut second =
        SecondProducer::spawn(move |a, b| produce_burst_range::<R>(a, b, |s| p2.try_push_burst(s)));
    let mut cc = consumer::<R>("dplog mpsc 2p", move |max, f| c.read_burst(max, f));
    let id = format!("{}/dplog_mpsc/burst32_2p", R::NAME);
    bench_min_run(g, id, &mut cc, |n| {
        let half = n / 2;
        second.start(half, n);
        produce_burst_range::<R>(0, half, |s| p.try_push_burst(s));
        second.wait();
    });
}

#[cfg(feature = "dpdk")]
mod dpdk {
    //! DPDK 22.11 `rte_ring` elem API through `dpdk-sys`'s C shim.
    use super::*;
    use core::ffi::{c_uint, c_void};
    use std::ffi::CString;
    use std::sync::Once;

    static EAL: Once = Once::new();

    /// Starts EAL once: no hugepages, no PCI, no shared config, main lcore 0.
    pub fn eal() {
        EAL.call_once(|| {
            let args = [
                "dplog-bench",
                "--no-huge",
                "--no-pci",
                "-m",
                "256",
                "--no-shconf",
                "-l",
                "0",
                "--log-level=3",
            ];
            dpdk_sys::eal_init(&args).expect("rte_eal_init --no-huge --no-pci");
        });
    }

    /// An `rte_ring` of `R`-sized elements, shareable with the consumer.
    struct Ring(*mut dpdk_sys::rte_ring);
    // SAFETY: rte_ring is designed for cross-thread use; the bench keeps
    // one producer and one consumer per ring (SP/SC), or uses the MP calls.
    unsafe impl Send for Ring {}
    // SAFETY: as above.
    unsafe impl Sync for Ring {}

    fn create<R>(name: &str, mp: bool) -> Arc<Ring> {
        eal();
        let name = CString::new(name).unwrap();
        let flags = dpdk_sys::RING_F_SC_DEQ
            | dpdk_sys::RING_F_EXACT_SZ
            | if mp { 0 } else { dpdk_sys::RING_F_SP_ENQ };
        // SAFETY: EAL is initialised; name is NUL-terminated; the element
        // size is a multiple of 4 as rte_ring_create_elem requires.
        let r = unsafe {
            dpdk_sys::dplog_rte_ring_create_elem(
                name.as_ptr(),
                core::mem::size_of::<R>() as c_uint,
                CAP as c_uint,
                dpdk_sys::SOCKET_ID_ANY,
                flags,
            )
        };
        assert!(!r.is_null(), "rte_ring_create_elem failed");
        Arc::new(Ring(r))
    }

    pub fn peers<R: BenchRec, M: criterion::measurement::Measurement<Value = Duration>>(
        g: &mut BenchmarkGroup<'_, M>,
    ) {
        let sz = R::NAME;
        let esize = core::mem::size_of::<R>() as c_uint;
        for (mp, burst) in [(false, false), (false, true), (true, false), (true, true)] {
            let ring = create::<R>(&format!("b{sz}{}{}", mp as u8, burst as u8), mp);
            let rc = ring.clone();
            let mut cc = consumer::<R>("rte_ring", move |max, f| {
                let mut buf = [R::template(); BURST];
                // SAFETY: buf has room for max <= BURST elements of esize.
                let k = unsafe {
                    dpdk_sys::dplog_rte_ring_sc_dequeue_burst_elem(
                        rc.0,
                        buf.as_mut_ptr().cast::<c_void>(),
                        esize,
                        max.min(BURST) as c_uint,
                        core::ptr::null_mut(),
                    )
                } as usize;
                buf[..k].iter().for_each(&mut *f);
                k
            });
            let r = ring.0;
            let enq = move |s: &[R]| -> usize {
                // SAFETY: s holds s.len() elements of esize bytes; the ring
                // lives in `ring` for the whole case.
                unsafe {
                    if mp {
                        dpdk_sys::dplog_rte_ring_mp_enqueue_burst_elem(
                            r,
                            s.as_ptr().cast(),
                            esize,
                            s.len() as c_uint,
                            core::ptr::null_mut(),
                        ) as usize
                    } else {
                        dpdk_sys::dplog_rte_ring_sp_enqueue_burst_elem(
                            r,
                            s.as_ptr().cast(),
                            esize,
                            s.len() as c_uint,
                            core::ptr::null_mut(),
                        ) as usize
                    }
                }
            };
            let id = format!(
                "{sz}/rte_ring_{}/{}",
                if mp { "mp_sc" } else { "sp_sc" },
                if burst { "burst32" } else { "single" }
            );
            bench(g, id, &mut cc, |n| {
                if burst {
                    produce_burst::<R>(n, enq)
                } else {
                    produce_single::<R>(n, |x| enq(core::slice::from_ref(&x)) == 1)
                }
            });
            drop(cc);
            // SAFETY: the consumer thread is joined (CrossCore dropped).
            unsafe { dpdk_sys::dplog_rte_ring_free(ring.0) };
        }
    }

    /// `rte_ring_mp_enqueue_burst_elem` of `s` into `ring`.
    fn mp_enqueue<R>(ring: &Ring, s: &[R]) -> usize {
        // SAFETY: s holds s.len() elements of size_of::<R>() bytes, the
        // ring's element size; the ring outlives every caller (freed after
        // both producers and the consumer are joined).
        unsafe {
            dpdk_sys::dplog_rte_ring_mp_enqueue_burst_elem(
                ring.0,
                s.as_ptr().cast(),
                core::mem::size_of::<R>() as c_uint,
                s.len() as c_uint,
                core::ptr::null_mut(),
            ) as usize
        }
    }

    /// `rte_ring` MP/SC, burst-32, two producer threads on CPU 0, as
    /// `mpsc_two_producers`.
    pub fn mp_two_producers<
        R: BenchRec,
        M: criterion::measurement::Measurement<Value = Duration>,
    >(
        g: &mut BenchmarkGroup<'_, M>,
    ) {
        let sz = R::NAME;
        let esize = core::mem::size_of::<R>() as c_uint;
        let ring = create::<R>(&format!("b{sz}mp2"), true);
        let rc = ring.clone();
        let mut cc = consumer::<R>("rte_ring mp 2p", move |max, f| {
            let mut buf = [R::template(); BURST];
            // SAFETY: buf has room for max <= BURST elements of esize.
            let k = unsafe {
                dpdk_sys::dplog_rte_ring_sc_dequeue_burst_elem(
                    rc.0,
                    buf.as_mut_ptr().cast::<c_void>(),
                    esize,
                    max.min(BURST) as c_uint,
                    core::ptr::null_mut(),
                )
            } as usize;
            buf[..k].iter().for_each(&mut *f);
            k
        });
        let r2 = ring.clone();
        let mut second = SecondProducer::spawn(move |a, b| {
            produce_burst_range::<R>(a, b, |s| mp_enqueue(&r2, s))
        });
        let id = format!("{sz}/rte_ring_mp_sc/burst32_2p");
        bench_min_run(g, id, &mut cc, |n| {
            let half = n / 2;
            second.start(half, n);
            produce_burst_range::<R>(0, half, |s| mp_enqueue(&ring, s));
            second.wait();
        });
        drop(second);
        drop(cc);
        // SAFETY: both producer threads and the consumer are joined.
        unsafe { dpdk_sys::dplog_rte_ring_free(ring.0) };
    }
}

fn cross_core(c: &mut Criterion) {
    check_two_cpus();
    #[cfg(feature = "dpdk")]
    dpdk::eal();
    pin(PRODUCER_CPU);
    let mut g = c.benchmark_group("ring_peers");
    g.throughput(Throughput::Elements(1));
    peers_for::<Rec32, _>(&mut g);
    peers_for::<Nat44SessionRecord, _>(&mut g);
    g.finish();
}

/// Producer-side cost of `try_push` of 64 bytes into a ring that is not
/// full, timed on the producer core while CPU 1 drains it.
fn producer_cost(c: &mut Criterion) {
    pin(PRODUCER_CPU);
    let mut g = c.benchmark_group("producer_cost");
    g.throughput(Throughput::Elements(1));
    const BIG: usize = dplog::DEFAULT_RING_CAPACITY;
    const RUN: u64 = 1024;
    let (mut p, mut cons) = ring::<Nat44SessionRecord>(BIG).unwrap();
    let mut cc = CrossCore::spawn(CONSUMER_CPU, move |n| {
        let mut got = 0u64;
        while got < n {
            let k = cons.read_burst(BURST, |r| {
                black_box(r.timestamp_ns);
            });
            if k == 0 {
                spin_loop();
            }
            got += k as u64;
        }
    });
    for (name, every) in [
        ("64B/dplog_spsc/try_push_not_full", 1usize),
        ("64B/dplog_spsc/try_push_not_full_publish_every_32", 32),
    ] {
        p.set_publish_every(every);
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                cc.run(iters, |n| {
                    let mut rec = Nat44SessionRecord::template();
                    let mut i = 0;
                    while i < n {
                        // Keep the ring far from full: wait (untimed) while
                        // more than half of it is in use.
                        while p.fill_upper_bound() > BIG / 2 && p.fill() > BIG / 2 {
                            spin_loop();
                        }
                        let k = RUN.min(n - i);
                        let t0 = Instant::now();
                        for j in 0..k {
                            // black_box on the sequence, not the record: a
                            // record forced through memory is re-read with
                            // wider loads than it was stored with (a
                            // store-forwarding stall a real producer, which
                            // builds the record in registers, does not pay).
                            rec.timestamp_ns = black_box(i + j);
                            if p.try_push(rec).is_err() {
                                panic!("ring full");
                            }
                        }
                        // A forwarding loop flushes once per rx burst; the
                        // flush is timed with the pushes it publishes.
                        p.flush();
                        timed += t0.elapsed();
                        i += k;
                    }
                });
                timed
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = criterion_config(Duration::from_millis(500), Duration::from_millis(1500));
    targets = producer_cost, cross_core
}
criterion_main!(benches);
