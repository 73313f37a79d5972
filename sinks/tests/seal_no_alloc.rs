//! A sealed file sink hashing on its hasher thread takes each batch's
//! buffer and gives a spare one back without allocating per batch once
//! the spares have grown to the batch size: a counting global allocator counts the
//! allocations of this thread (the consumer's part) while it hands over
//! batches of a user's record lines, and the sealed log then verifies.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use dplog_core::Sink;
use dplog_sinks::seal::{self, HasherMode, SealOptions, HASHER_BUFFERS};
use dplog_sinks::{FileSink, FileSinkOptions};

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

/// Fills `buf` with batch `b`: 200 lines of a user's record (a load
/// balancer's backend health checks), formatted in place.
fn fill(buf: &mut Vec<u8>, b: u64) {
    use std::io::Write;
    buf.clear();
    for i in 0..200 {
        writeln!(
            buf,
            "check backend=10.1.{}.{} status=up rtt_us={}",
            b % 250,
            i,
            b * 7 + i
        )
        .unwrap();
    }
}

#[test]
fn handing_batches_to_the_hasher_thread_allocates_nothing_once_warm() {
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = (dir.path().join("seal.key"), dir.path().join("seal.pub"));
    let vk = seal::generate_key_pair(&key, &public).unwrap();
    let path = dir.path().join("health.log");
    let mut sink = FileSink::with_options(
        &path,
        FileSinkOptions {
            seal: Some(SealOptions {
                sign_every: None,
                hasher: HasherMode::Thread,
                ..SealOptions::new(&key)
            }),
            ..Default::default()
        },
    )
    .unwrap();
    let mut buf = Vec::with_capacity(64 * 1024);
    // Warm: every spare buffer has been handed back once and grown.
    let warm = 2 * (HASHER_BUFFERS as u64 + 1);
    for b in 0..warm {
        fill(&mut buf, b);
        sink.write_batch_owned(&mut buf, &[]).unwrap();
    }
    let mut n = 0u64;
    ALLOCS.with(|a| a.set(0));
    COUNTING.with(|c| c.set(true));
    for b in warm..warm + 200 {
        fill(&mut buf, b);
        n += u64::from(sink.write_batch_owned(&mut buf, &[]).is_ok());
    }
    COUNTING.with(|c| c.set(false));
    let allocs = ALLOCS.with(Cell::get);
    assert_eq!(n, 200);
    // The first time this thread waits on the hasher's channel (a spare
    // not back yet), crossbeam-channel sets its waiter up once (its
    // context and a slot in the waiters' list): a few allocations, once.
    // Anything per batch would be 200 or more.
    assert!(allocs <= 4, "{allocs} allocations in 200 hand-overs");
    sink.close().unwrap();
    let r = dplog_sinks::verify::verify_files(std::slice::from_ref(&path), &[vk]).unwrap();
    assert_eq!(r.finding, None, "{:?}", r.finding);
    assert_eq!(r.writes, warm + 200);
    assert_eq!(r.bytes, std::fs::metadata(&path).unwrap().len());
}
