//! `dplog_log` from C against the Rust push, interleaved: the measurement
//! of `ffi_log`, but the sides alternate batch by batch in one run, and
//! each side's figure is the minimum and the median over batches. On a
//! shared machine other work only ever adds time to a batch, so the
//! minimum is the cost without interference, and the interleaving gives
//! every side the same machine state (criterion's one-after-the-other
//! cases drift by more than the differences measured).
//!
//! Sides: Rust `LogProducer::log`; C `dplog_log` as C code calls it (the
//! header's inline path), from `benches/c/log_loop.c` compiled with
//! `cc -O2`; and the same C loop through the exported function
//! (`(dplog_log)(...)`, what `DPLOG_NO_INLINE` and other languages get).
//! Each side builds its record in the loop from constants and a running
//! timestamp. Both loggers use the TOML of `ffi_log` (ring 16384, `block`,
//! text to /dev/null, consumer pinned to CPU 1); the producer thread is
//! pinned to CPU 0. One batch = [`BATCH`] records into a drained ring,
//! with both loggers drained before it (their consumers share CPU 1: a
//! consumer still formatting the previous batch would be timed with the
//! next side's).
//!
//! Run: `cargo build --release -p dplog-ffi && cargo bench -p dplog-ffi
//! --bench ffi_log_interleaved` (prints a table; `DPLOG_BENCH_BATCHES`
//! sets the batches per side, default 400).

use std::ffi::{c_void, CString};
use std::hint::black_box;
use std::time::Instant;

use dplog::config::LogConfig;
use dplog::nat::Nat44SessionRecord;

#[allow(dead_code)]
mod common;
use common::{record, TOML};

const BATCH: u64 = 8192;

/// One timed batch of Rust pushes (ns per record), in a function of its
/// own as criterion's closure is, so `LogProducer::log` is inlined into a
/// small loop. Each push builds its record from constants and the
/// sequence number, so the record can go from registers to the slot. (A
/// record edited in place through a `&mut` stays in memory, and each push
/// re-reads it with wider loads than the 8-byte store of the timestamp: a
/// store-forwarding stall, 8.7 ns instead of 4.)
#[inline(never)]
fn rust_batch(p: &mut dplog::LogProducer<Nat44SessionRecord>, seq: &mut u64) -> f64 {
    let mut n = *seq;
    let t = Instant::now();
    for _ in 0..BATCH {
        let mut r = record();
        r.timestamp_ns = black_box(n);
        n += 1;
        assert!(p.log(r));
    }
    let ns = t.elapsed().as_nanos() as f64 / BATCH as f64;
    *seq = n;
    ns
}

/// One timed batch of a C loop (ns per record).
fn c_batch(f: common::CLoop, cp: *mut c_void, seq: &mut u64) -> f64 {
    let t = Instant::now();
    // SAFETY: cp is a live producer used only by this thread.
    let rc = unsafe { f(cp, BATCH, *seq) };
    let ns = t.elapsed().as_nanos() as f64 / BATCH as f64;
    assert_eq!(rc, 0);
    *seq += BATCH;
    ns
}

fn min_median(v: &mut [f64]) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2])
}

fn main() {
    let batches: usize = std::env::var("DPLOG_BENCH_BATCHES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(400);
    dplog::affinity::pin_current_thread(0).expect("pin producer to CPU 0");

    let logger = LogConfig::from_toml_str(TOML)
        .unwrap()
        .start_nat44()
        .unwrap();
    let mut p = logger.producer().unwrap();

    let api = common::load();
    let toml = CString::new(TOML).unwrap();
    let mut ch = core::ptr::null_mut();
    let mut cp = core::ptr::null_mut();
    // SAFETY: the signatures of include/dplog.h; out-params point at locals.
    unsafe {
        assert_eq!((api.open_str)(toml.as_ptr(), &mut ch), 0);
        assert_eq!((api.start)(ch, core::ptr::null(), 0), 0);
        assert_eq!((api.producer_new)(ch, 0, &mut cp), 0);
    }
    // struct dplog_stats is 22 u64 today; 64 leaves room.
    let mut cstats = [0u64; 64];
    let mut c_drained = || loop {
        // SAFETY: ch is live; cstats has room for struct dplog_stats.
        assert_eq!(unsafe { (api.stats)(ch, cstats.as_mut_ptr()) }, 0);
        // enqueued is field 1, dequeued field 5.
        if cstats[5] >= cstats[1] {
            break;
        }
        std::thread::yield_now();
    };

    let mut rust_ns = Vec::with_capacity(batches);
    let mut inline_ns = Vec::with_capacity(batches);
    let mut call_ns = Vec::with_capacity(batches);
    let mut fields_ns = Vec::with_capacity(batches);
    let mut reserve_ns = Vec::with_capacity(batches);
    let mut seq = 0u64;
    // One warm-up round, then `batches` timed rounds.
    for round in 0..=batches {
        // The Rust ring was drained after its last batch (below).
        let r = rust_batch(&mut p, &mut seq);
        let s = logger.stats();
        while logger.stats().dequeued < s.enqueued {
            std::thread::yield_now();
        }
        c_drained();
        let i = c_batch(api.loop_inline, cp, &mut seq);
        c_drained();
        let c = c_batch(api.loop_call, cp, &mut seq);
        c_drained();
        let f = c_batch(api.loop_fields, cp, &mut seq);
        c_drained();
        let v = c_batch(api.loop_reserve, cp, &mut seq);
        if round > 0 {
            rust_ns.push(r);
            inline_ns.push(i);
            call_ns.push(c);
            fields_ns.push(f);
            reserve_ns.push(v);
        }
    }

    drop(p);
    let s = match logger.shutdown() {
        Ok(s) | Err((s, _)) => s,
    };
    assert_eq!(s.written_records, s.produced);
    // SAFETY: live handles, freed once.
    unsafe {
        assert_eq!((api.producer_free)(cp), 0);
        // DPLOG_OK, or DPLOG_ERR_IO (6) for the refused fsync of /dev/null.
        let rc = (api.close)(ch, cstats.as_mut_ptr());
        assert!(rc == 0 || rc == 6, "dplog_close: {rc}");
    }
    // Every C record written: written_records (field 6) == produced (0).
    assert_eq!(cstats[6], cstats[0]);
    assert_eq!(cstats[0], 4 * BATCH * (batches as u64 + 1));

    let (rmin, rmed) = min_median(&mut rust_ns);
    let (imin, imed) = min_median(&mut inline_ns);
    let (cmin, cmed) = min_median(&mut call_ns);
    let (fmin, fmed) = min_median(&mut fields_ns);
    let (vmin, vmed) = min_median(&mut reserve_ns);
    println!("log_64B_record, interleaved, {batches} batches of {BATCH} per side (ns/record)");
    println!("| side | min | median | / Rust (min) | / Rust (median) |");
    println!("|---|---:|---:|---:|---:|");
    println!("| Rust LogProducer::log | {rmin:.2} | {rmed:.2} | 1.00x | 1.00x |");
    println!(
        "| C dplog_log (inline, cc -O2) | {imin:.2} | {imed:.2} | {:.2}x | {:.2}x |",
        imin / rmin,
        imed / rmed
    );
    println!(
        "| C (dplog_log) exported call | {cmin:.2} | {cmed:.2} | {:.2}x | {:.2}x |",
        cmin / rmin,
        cmed / rmed
    );
    println!(
        "| C record rebuilt field by field, then dplog_log (inline) | {fmin:.2} | {fmed:.2} | {:.2}x | {:.2}x |",
        fmin / rmin,
        fmed / rmed
    );
    println!(
        "| C dplog_reserve, fields in the slot, dplog_commit | {vmin:.2} | {vmed:.2} | {:.2}x | {:.2}x |",
        vmin / rmin,
        vmed / rmed
    );
}
