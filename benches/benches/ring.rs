//! SPSC ring throughput across cores, against other bounded queues.
//!
//! Producer: the criterion thread, pinned to CPU 0. Consumer: a persistent
//! thread pinned to CPU 1 (see `dplog_benches::CrossCore`), told per
//! measurement how many records to take; thread start-up and wake-up are
//! outside the measured time. One criterion iteration = one 64-byte
//! `Nat44SessionRecord` moved end to end, so "time" is wall ns per record.
//! Every queue holds 2048 records. The producer stamps record `i` with
//! `timestamp_ns = i`; the consumer sums the stamps and checks the total.

#![allow(missing_docs)] // criterion_main! generates main

use std::collections::VecDeque;
use std::hint::{black_box, spin_loop};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dplog_benches::{
    check_two_cpus, criterion_config, expected_sum, nat44, pin, CrossCore, CONSUMER_CPU,
    PRODUCER_CPU,
};
use dplog_schema_nat::{Nat44SessionRecord, NatEvent};

const CAP: usize = 2048;
const BURST: usize = 32;

fn template() -> Nat44SessionRecord {
    nat44(1, NatEvent::Nat44SessionCreate, 0)
}

fn check(what: &str, n: u64, sum: u64) {
    assert_eq!(sum, expected_sum(n), "{what}: consumer saw wrong records");
}

/// Producer: single pushes of records `0..n`, spinning while `try` fails.
#[inline(always)]
fn produce_single(n: u64, mut try_push: impl FnMut(Nat44SessionRecord) -> bool) {
    let mut rec = template();
    for i in 0..n {
        rec.timestamp_ns = i;
        while !try_push(rec) {
            spin_loop();
        }
    }
}

/// Producer: bursts of up to 32 records `0..n`; `push_burst` returns how
/// many of the slice it took (a prefix).
#[inline(always)]
fn produce_burst(n: u64, mut push_burst: impl FnMut(&[Nat44SessionRecord]) -> usize) {
    let mut burst = [template(); BURST];
    let mut i = 0u64;
    while i < n {
        let k = (n - i).min(BURST as u64) as usize;
        for (j, r) in burst[..k].iter_mut().enumerate() {
            r.timestamp_ns = i + j as u64;
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

fn cross_core(c: &mut Criterion) {
    check_two_cpus();
    pin(PRODUCER_CPU);
    let mut g = c.benchmark_group("ring_cross_core");
    g.throughput(Throughput::Elements(1));

    // dplog ring, single try_push; consumer read_burst(32).
    for burst in [false, true] {
        let (mut p, mut cons) = dplog::ring::<Nat44SessionRecord>(CAP).unwrap();
        let mut cc = CrossCore::spawn(CONSUMER_CPU, move |n| {
            let (mut got, mut sum) = (0u64, 0u64);
            while got < n {
                let k = cons.read_burst(BURST, |r| sum = sum.wrapping_add(r.timestamp_ns));
                if k == 0 {
                    spin_loop();
                }
                got += k as u64;
            }
            check("dplog", n, sum);
        });
        let id = if burst {
            "dplog/burst32"
        } else {
            "dplog/single"
        };
        g.bench_function(id, |b| {
            b.iter_custom(|iters| {
                cc.run(iters, |n| {
                    if burst {
                        produce_burst(n, |s| p.try_push_burst(s))
                    } else {
                        produce_single(n, |r| p.try_push(r).is_ok())
                    }
                })
            })
        });
    }

    // crossbeam-channel bounded(2048): blocking send / recv (its normal use;
    // both spin briefly before parking) and try_send / try_recv spinning.
    for blocking in [true, false] {
        let (tx, rx) = crossbeam_channel::bounded::<Nat44SessionRecord>(CAP);
        let mut cc = CrossCore::spawn(CONSUMER_CPU, move |n| {
            let mut sum = 0u64;
            let mut got = 0u64;
            while got < n {
                let r = if blocking {
                    rx.recv().expect("sender alive")
                } else {
                    match rx.try_recv() {
                        Ok(r) => r,
                        Err(_) => {
                            spin_loop();
                            continue;
                        }
                    }
                };
                sum = sum.wrapping_add(r.timestamp_ns);
                got += 1;
            }
            check("crossbeam-channel", n, sum);
        });
        let id = if blocking {
            "crossbeam_channel/send_recv"
        } else {
            "crossbeam_channel/try_spin"
        };
        g.bench_function(id, |b| {
            b.iter_custom(|iters| {
                cc.run(iters, |n| {
                    if blocking {
                        let mut rec = template();
                        for i in 0..n {
                            rec.timestamp_ns = i;
                            tx.send(rec).expect("receiver alive");
                        }
                    } else {
                        produce_single(n, |r| tx.try_send(r).is_ok())
                    }
                })
            })
        });
    }

    // crossbeam-queue ArrayQueue (MPMC, bounded): push / pop, spinning.
    {
        let q = Arc::new(crossbeam_queue::ArrayQueue::<Nat44SessionRecord>::new(CAP));
        let qc = q.clone();
        let mut cc = CrossCore::spawn(CONSUMER_CPU, move |n| {
            let (mut got, mut sum) = (0u64, 0u64);
            while got < n {
                match qc.pop() {
                    Some(r) => {
                        sum = sum.wrapping_add(r.timestamp_ns);
                        got += 1;
                    }
                    None => spin_loop(),
                }
            }
            check("ArrayQueue", n, sum);
        });
        g.bench_function("crossbeam_queue_ArrayQueue/single", |b| {
            b.iter_custom(|iters| cc.run(iters, |n| produce_single(n, |r| q.push(r).is_ok())))
        });
    }

    // rtrb: single push / push_partial_slice bursts; the consumer reads
    // chunks of up to 32 in place (rtrb's equivalent of read_burst).
    for burst in [false, true] {
        let (mut p, mut cons) = rtrb::RingBuffer::<Nat44SessionRecord>::new(CAP);
        let mut cc = CrossCore::spawn(CONSUMER_CPU, move |n| {
            let (mut got, mut sum) = (0u64, 0u64);
            while got < n {
                let chunk = match cons.read_chunk(BURST) {
                    Ok(ch) => ch,
                    Err(rtrb::chunks::ChunkError::TooFewSlots(k)) if k > 0 => {
                        cons.read_chunk(k).expect("k slots are readable")
                    }
                    Err(_) => {
                        spin_loop();
                        continue;
                    }
                };
                let (a, b) = chunk.as_slices();
                for r in a.iter().chain(b) {
                    sum = sum.wrapping_add(r.timestamp_ns);
                }
                got += chunk.len() as u64;
                chunk.commit_all();
            }
            check("rtrb", n, sum);
        });
        let id = if burst { "rtrb/burst32" } else { "rtrb/single" };
        g.bench_function(id, |b| {
            b.iter_custom(|iters| {
                cc.run(iters, |n| {
                    if burst {
                        produce_burst(n, |s| p.push_partial_slice(s).0.len())
                    } else {
                        produce_single(n, |r| p.push(r).is_ok())
                    }
                })
            })
        });
    }

    // Mutex<VecDeque>, bounded at 2048 by the producer; the consumer takes
    // up to 32 per lock.
    {
        let q = Arc::new(Mutex::new(VecDeque::<Nat44SessionRecord>::with_capacity(
            CAP,
        )));
        let qc = q.clone();
        let mut cc = CrossCore::spawn(CONSUMER_CPU, move |n| {
            let (mut got, mut sum) = (0u64, 0u64);
            while got < n {
                let mut k = 0;
                {
                    let mut g = qc.lock().unwrap();
                    while k < BURST {
                        match g.pop_front() {
                            Some(r) => {
                                sum = sum.wrapping_add(r.timestamp_ns);
                                k += 1;
                            }
                            None => break,
                        }
                    }
                }
                if k == 0 {
                    spin_loop();
                }
                got += k as u64;
            }
            check("Mutex<VecDeque>", n, sum);
        });
        g.bench_function("mutex_vecdeque/single", |b| {
            b.iter_custom(|iters| {
                cc.run(iters, |n| {
                    produce_single(n, |r| {
                        let mut g = q.lock().unwrap();
                        if g.len() < CAP {
                            g.push_back(r);
                            true
                        } else {
                            false
                        }
                    })
                })
            })
        });
    }
    g.finish();
}

/// One thread, no contention: the cost of the ring operations themselves.
fn one_thread(c: &mut Criterion) {
    pin(PRODUCER_CPU);
    let mut g = c.benchmark_group("ring_one_thread");
    g.throughput(Throughput::Elements(1));

    // try_push into a ring that is never full: 2048 pushes are timed, then
    // the ring is drained (untimed) and the next 2048 follow.
    {
        let (mut p, mut cons) = dplog::ring::<Nat44SessionRecord>(CAP).unwrap();
        g.bench_function(BenchmarkId::new("dplog", "try_push"), |b| {
            b.iter_custom(|iters| {
                let mut rec = template();
                let mut total = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    let k = left.min(CAP as u64);
                    let t0 = Instant::now();
                    for i in 0..k {
                        rec.timestamp_ns = i;
                        if p.try_push(black_box(rec)).is_err() {
                            panic!("ring full after {i} of {k}");
                        }
                    }
                    total += t0.elapsed();
                    let mut sum = 0u64;
                    cons.read_burst(CAP, |r| sum = sum.wrapping_add(r.timestamp_ns));
                    check("dplog one-thread", k, sum);
                    left -= k;
                }
                total
            })
        });
    }

    // try_push then pop on the same thread, ring stays empty.
    {
        let (mut p, mut cons) = dplog::ring::<Nat44SessionRecord>(CAP).unwrap();
        let rec = template();
        g.bench_function(BenchmarkId::new("dplog", "try_push+pop"), |b| {
            b.iter(|| {
                p.try_push(black_box(rec)).unwrap();
                black_box(cons.pop())
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = criterion_config(Duration::from_millis(700), Duration::from_secs(2));
    targets = cross_core, one_thread
}
criterion_main!(benches);
