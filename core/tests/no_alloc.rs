//! No allocation on the push path: a counting global allocator counts the
//! allocations made by this thread while it pushes through every producer
//! API (SPSC, MPSC, and `LogProducer::log` under each policy, drops
//! included).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use dplog_core::*;
use dplog_schema_nat::*;

struct Counting;

thread_local! {
    /// Allocations made by this thread while `COUNTING` is on.
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: forwards to the system allocator; the bookkeeping touches only
// const-initialised thread-locals (no allocation, no reentrancy).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCS.with(|a| a.set(a.get() + 1));
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCS.with(|a| a.set(a.get() + 1));
        }
        // SAFETY: same contract as ours.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by `f` on this thread.
fn allocs_in(f: impl FnOnce()) -> u64 {
    ALLOCS.with(|a| a.set(0));
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCS.with(Cell::get)
}

fn rec(i: u64) -> Nat44SessionRecord {
    Nat44SessionRecord {
        timestamp_ns: i,
        nat_event: 4 + (i % 2) as u8,
        ..Default::default()
    }
}

struct Null;
impl Formatter<Nat44SessionRecord> for Null {
    fn format(&mut self, _: &Nat44SessionRecord, out: &mut Vec<u8>) {
        out.push(b'.');
    }
}
struct Discard;
impl Sink for Discard {
    fn write_batch(&mut self, _: &[u8]) -> Result<Accepted, SinkError> {
        Ok(Accepted::Delivered)
    }
    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
    fn close(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
}

#[test]
fn counting_allocator_sees_allocations() {
    // The harness can fail: a Vec allocates.
    assert!(allocs_in(|| drop(std::hint::black_box(vec![1u8; 64]))) >= 1);
}

#[test]
fn ring_push_paths_do_not_allocate() {
    let (mut p, mut c) = ring::<Nat44SessionRecord>(64).unwrap();
    let (mut mp, mut mc) = mpsc_ring::<Nat44SessionRecord>(64).unwrap();
    let burst = [rec(0); 8];
    let n = allocs_in(|| {
        for i in 0..1000u64 {
            p.try_push(rec(i)).unwrap();
            p.push(rec(i)).unwrap();
            assert_eq!(p.try_push_burst(&burst), 8);
            assert_eq!(p.try_push_bulk(&burst), 8);
            let mut r = p.reserve(2).unwrap();
            r.push(rec(i)).unwrap();
            r.push(rec(i)).unwrap();
            r.commit();
            // Full ring: the failure paths too.
            while p.try_push(rec(i)).is_ok() {}
            p.count_dropped_full(1);
            assert_eq!(c.read_burst(usize::MAX, |_| {}), 64);

            mp.try_push(rec(i)).unwrap();
            mp.push(rec(i)).unwrap();
            assert_eq!(mp.try_push_burst(&burst), 8);
            assert!(mp.reserve_commit(2, |k| rec(k as u64)));
            while mp.try_push_bulk(&burst) == 8 {}
            mp.count_dropped(DropReason::Full, 1, tsc::now_ticks());
            let mut out = [rec(0); 64];
            while mc.pop_burst(&mut out) > 0 {}
        }
    });
    assert_eq!(n, 0, "allocations on the push path");
}

#[test]
fn log_does_not_allocate_under_any_policy() {
    for policy in [
        Backpressure::Block,
        Backpressure::Drop,
        Backpressure::Degrade,
    ] {
        let cfg = LoggerConfig {
            ring_capacity: 64,
            backpressure: policy,
            ..Default::default()
        };
        let logger = Logger::start(cfg, Null, Discard).unwrap();
        let mut prod = logger.producer().unwrap();
        let burst = [rec(1); 16];
        let n = allocs_in(|| {
            for i in 0..20_000u64 {
                prod.log(rec(i));
                prod.log_burst(&burst);
            }
        });
        assert_eq!(n, 0, "{policy:?}: allocations in log/log_burst");
        drop(prod);
        let s = logger.shutdown().unwrap();
        assert_eq!(s.produced, 20_000 * 17);
        assert_eq!(s.produced, s.written_records + s.dropped());
    }
}
