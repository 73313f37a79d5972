//! Cost of logging one 64-byte NAT44 session record from C (`dplog_log`
//! as C code calls it: the inline path of `include/dplog.h`, in
//! `benches/c/log_loop.c` compiled with `cc -O2` and linked to the built
//! `libdplog.so`; and the exported function, `(dplog_log)(...)`, from the
//! same C loop) against the same push from Rust (`LogProducer::log`), in
//! the same run. Both build the record the same way: constant fields, a
//! running `timestamp_ns`.
//!
//! Both sides use the same TOML (ring of 16384 slots, `block`, text to
//! /dev/null), the producer pinned to CPU 0 and the consumer to CPU 1.
//! Only pushes into a ring with room are timed: each timed chunk is at most
//! half the ring, and between chunks the bench waits (untimed) until the
//! consumer has drained it, so the numbers are the producer's cost, not the
//! formatter's throughput. One criterion iteration = one record.
//!
//! Run: `cargo build --release -p dplog-ffi && cargo bench -p dplog-ffi
//! --bench ffi_log` (`cargo bench` does not rebuild the cdylib itself).

#![allow(missing_docs)] // criterion_main! generates main

use std::ffi::CString;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dplog::config::LogConfig;

const CAPACITY: u64 = 16384;
const CHUNK: u64 = CAPACITY / 2;

#[allow(dead_code)]
mod common;
use common::{record, TOML};

/// Times `iters` pushes in chunks of at most CHUNK; `drained` waits
/// (untimed) until the consumer has read everything pushed so far.
fn timed(iters: u64, mut push: impl FnMut(u64), mut drained: impl FnMut()) -> Duration {
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let k = (iters - done).min(CHUNK);
        let t = Instant::now();
        for i in done..done + k {
            push(i);
        }
        total += t.elapsed();
        done += k;
        drained();
    }
    total
}

fn bench(c: &mut Criterion) {
    dplog::affinity::pin_current_thread(0).expect("pin producer to CPU 0");
    let mut g = c.benchmark_group("log_64B_record");
    g.throughput(Throughput::Elements(1));
    g.sample_size(30).measurement_time(Duration::from_secs(3));

    // Rust: LogProducer::log.
    let logger = LogConfig::from_toml_str(TOML)
        .unwrap()
        .start_nat44()
        .unwrap();
    let mut p = logger.producer().unwrap();
    g.bench_function("rust LogProducer::log", |b| {
        b.iter_custom(|iters| {
            let mut rec = record();
            timed(
                iters,
                |i| {
                    // black_box on the sequence, not the record (as
                    // ring_peers' producer_cost): a record forced through
                    // memory by black_box is re-read with wider loads
                    // than it was stored with, a store-forwarding stall
                    // that a producer building its record does not pay.
                    rec.timestamp_ns = black_box(i);
                    assert!(p.log(rec));
                },
                || {
                    let s = logger.stats();
                    while logger.stats().dequeued < s.enqueued {
                        std::thread::yield_now();
                    }
                },
            )
        })
    });
    drop(p);
    // /dev/null refuses the final fsync (EINVAL); everything was written.
    let s = match logger.shutdown() {
        Ok(s) | Err((s, _)) => s,
    };
    assert_eq!(s.written_records, s.produced);

    // C: the loops of benches/c/log_loop.c over libdplog.so.
    let api = common::load();
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
    let mut seq = 0u64;
    for (name, f) in [
        ("C dplog_log (inline)", api.loop_inline),
        ("C (dplog_log) exported call", api.loop_call),
    ] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut done = 0;
                while done < iters {
                    let k = (iters - done).min(CHUNK);
                    let t = Instant::now();
                    // SAFETY: cp is a live producer used by this thread only.
                    let r = unsafe { f(cp, k, seq) };
                    total += t.elapsed();
                    assert_eq!(r, 0);
                    seq += k;
                    done += k;
                    loop {
                        // SAFETY: h is live; stats has room for struct dplog_stats.
                        assert_eq!(unsafe { (api.stats)(h, stats.as_mut_ptr()) }, 0);
                        // enqueued is field 1, dequeued field 5.
                        if stats[5] >= stats[1] {
                            break;
                        }
                        std::thread::yield_now();
                    }
                }
                total
            })
        });
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
    assert_eq!(stats[0], seq);
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
