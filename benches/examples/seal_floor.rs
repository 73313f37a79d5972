//! The floor of a sealed file sink's cost: what BLAKE3 alone costs on
//! this core, and what the seal costs beyond it, in this thread's CPU
//! time (`/proc/thread-self/schedstat`), the minimum over rounds, which
//! filters out the time other processes take from the core.
//!
//! 1. BLAKE3 (`blake3::hash`, the crate and features of Cargo.lock) over
//!    272 MB (the binary stream of `binary_throughput`: 4,000,000
//!    records of 68 bytes) in updates of 64 B to 1 MiB, from a 1 MiB
//!    buffer that stays in the core's cache, and in 256 KiB pieces of a
//!    272 MB buffer (from memory).
//! 2. The write loop of `binary_throughput`'s `sink_binary_*` cases:
//!    272 MB as 256 KiB batches, each copied into the buffer handed to a
//!    `FileSink` with `write_batch_owned`, in `/dev/shm`: plain; plain
//!    with `blake3::hash` of each batch after its write (the hash alone,
//!    no seal); sealed with `hasher = "inline"` (hash, chain link, an
//!    81-byte seal entry per write, Ed25519 at close). Sealed minus
//!    hashed is what the seal costs besides the hash. Last, sealed with
//!    the hasher thread pinned to CPU 0 (`hasher_cpu = 0`): this
//!    thread's CPU is then what a consumer keeps when the hash has a
//!    core of its own (run this on CPU 1). And, as a design not built,
//!    plain with a thread on CPU 0 that reads each write back from the
//!    file (`pread` into a buffer of its own) and hashes it: the
//!    consumer's buffer then never leaves its core.
//!
//! `cargo build --release -p dplog-benches --example seal_floor &&
//! taskset -c 1 target/release/examples/seal_floor [rounds [case]]`
//! (default 7 rounds; a case, `plain`, `hashed`, `sealed`, `thread` or
//! `read_back`,
//! runs only part 2 and only that case, for a profiler). Writes at most 272 MB at a time to `/dev/shm` (or
//! the temporary directory), deleted after each run.

use std::path::Path;

use dplog::sinks::seal::{generate_key_pair, seal_path, HasherMode, SealOptions};
use dplog::sinks::{FileSink, FileSinkOptions};
use dplog::Sink as _;

/// The binary stream of 4,000,000 records of 68 bytes.
const TOTAL: usize = 272_000_000;
const BATCH: usize = 256 * 1024;

fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// The least CPU ms of `rounds` runs of `f`.
fn min_cpu_ms(rounds: usize, mut f: impl FnMut()) -> f64 {
    (0..rounds)
        .map(|_| {
            let c0 = thread_cpu_ns();
            f();
            (thread_cpu_ns() - c0) as f64 / 1e6
        })
        .fold(f64::MAX, f64::min)
}

#[derive(Clone, Copy, PartialEq)]
enum Case {
    Plain,
    Hashed,
    Sealed,
    Thread,
    ReadBack,
}

/// One write loop of [`TOTAL`] bytes through a `FileSink` at `path`;
/// this thread's CPU ms.
fn sink_loop(path: &Path, key: &Path, batch: &[u8], case: Case) -> f64 {
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(seal_path(path));
    let opts = FileSinkOptions {
        seal: matches!(case, Case::Sealed | Case::Thread).then(|| SealOptions {
            hasher: if case == Case::Thread {
                HasherMode::Thread
            } else {
                HasherMode::Inline
            },
            hasher_cpu: (case == Case::Thread).then_some(0),
            sign_every: None,
            ..SealOptions::new(key)
        }),
        ..FileSinkOptions::default()
    };
    let mut sink = FileSink::with_options(path, opts).expect("open the file sink");
    let mut buf = Vec::with_capacity(BATCH);
    let mut sum = 0u8;
    let reader = (case == Case::ReadBack).then(|| read_back(path));
    let mut off = 0u64;
    let c0 = thread_cpu_ns();
    let mut left = TOTAL;
    while left > 0 {
        let k = batch.len().min(left);
        buf.clear();
        buf.extend_from_slice(&batch[..k]);
        sink.write_batch_owned(&mut buf, &[]).expect("write");
        if case == Case::Hashed {
            sum ^= blake3::hash(&buf).as_bytes()[0];
        }
        if let Some((to, _)) = &reader {
            to.send((off, k)).expect("reader thread");
        }
        off += k as u64;
        left -= k;
    }
    sink.flush().expect("flush");
    if let Some((to, h)) = reader {
        drop(to);
        sum ^= h.join().expect("reader thread");
    }
    sink.close().expect("close");
    let ms = (thread_cpu_ns() - c0) as f64 / 1e6;
    std::hint::black_box(sum);
    assert_eq!(
        std::fs::metadata(path).map(|m| m.len() as usize).ok(),
        Some(TOTAL)
    );
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(seal_path(path));
    ms
}

/// The read-back hasher of [`Case::ReadBack`]: a thread on CPU 0 that
/// reads each `(offset, length)` it is sent back from `path` and hashes
/// it; joined, it returns a byte of the hashes.
fn read_back(
    path: &Path,
) -> (
    crossbeam_channel::Sender<(u64, usize)>,
    std::thread::JoinHandle<u8>,
) {
    use std::os::unix::fs::FileExt as _;
    let (to, from) = crossbeam_channel::bounded::<(u64, usize)>(4);
    let file = std::fs::File::open(path).expect("open the output to read back");
    let h = std::thread::spawn(move || {
        dplog_benches::pin(0);
        let mut own = vec![0u8; BATCH];
        let mut sum = 0u8;
        for (off, len) in from {
            file.read_exact_at(&mut own[..len], off).expect("read back");
            sum ^= blake3::hash(&own[..len]).as_bytes()[0];
        }
        sum
    });
    (to, h)
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(7);
    let only = std::env::args().nth(2);
    let mut data = vec![0u8; 1 << 20];
    for (i, b) in data.iter_mut().enumerate() {
        *b = (i.wrapping_mul(2_654_435_761) >> 7) as u8;
    }
    if only.is_none() {
        blake3_alone(&data, rounds);
    }
    write_loops(&data, rounds, only.as_deref());
}

/// Part 1: BLAKE3 alone.
fn blake3_alone(data: &[u8], rounds: usize) {
    println!("1. BLAKE3 over {TOTAL} bytes, least CPU of {rounds} rounds");
    println!("| update | ms | GB/s | ns/byte |");
    println!("|---|---|---|---|");
    let mut sum = 0u8;
    for size in [64usize, 81, 1024, 4096, 16384, 65536, BATCH, 1 << 20] {
        let n = TOTAL / size;
        let ms = min_cpu_ms(rounds, || {
            let mut off = 0;
            for _ in 0..n {
                if off + size > data.len() {
                    off = 0;
                }
                sum ^= blake3::hash(&data[off..off + size]).as_bytes()[0];
                off += size;
            }
        });
        let bytes = (n * size) as f64;
        println!(
            "| {size} B | {ms:.1} | {:.2} | {:.3} |",
            bytes / ms / 1e6,
            ms * 1e6 / bytes
        );
    }
    let big: Vec<u8> = (0..TOTAL).map(|i| (i >> 9) as u8).collect();
    let ms = min_cpu_ms(rounds, || {
        for c in big.chunks(BATCH) {
            sum ^= blake3::hash(c).as_bytes()[0];
        }
    });
    println!(
        "| {BATCH} B pieces of a {TOTAL}-byte buffer (from memory) | {ms:.1} | {:.2} | {:.3} |",
        TOTAL as f64 / ms / 1e6,
        ms * 1e6 / TOTAL as f64
    );
    drop(big);
    std::hint::black_box(sum);
}

/// Part 2: the write loops, every case or `only` one.
fn write_loops(data: &[u8], rounds: usize, only: Option<&str>) {
    let dir = if Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm")
    } else {
        tempfile::tempdir()
    }
    .expect("temporary directory");
    let key = dir.path().join("seal.key");
    generate_key_pair(&key, &dir.path().join("seal.pub")).expect("seal key");
    let path = dir.path().join("floor.out");
    let batch = &data[..BATCH];
    // Rounds alternate the cases, so a busy spell of the machine hits
    // each alike; the least of each is kept.
    let mut best = [f64::MAX; 5];
    let cases = [
        Case::Plain,
        Case::Hashed,
        Case::Sealed,
        Case::Thread,
        Case::ReadBack,
    ];
    let names = ["plain", "hashed", "sealed", "thread", "read_back"];
    for _ in 0..rounds {
        for (i, case) in cases.into_iter().enumerate() {
            if only.is_some_and(|o| o != names[i]) {
                continue;
            }
            best[i] = best[i].min(sink_loop(&path, &key, batch, case));
        }
    }
    println!("\n2. {TOTAL} bytes in {BATCH}-byte batches through a FileSink, least CPU of {rounds} rounds");
    println!("| case | CPU ms | over plain |");
    println!("|---|---|---|");
    for (name, ms) in [
        ("plain", best[0]),
        ("plain + blake3::hash of each batch", best[1]),
        ("sealed inline", best[2]),
        (
            "sealed, hasher thread on CPU 0 (this thread's CPU)",
            best[3],
        ),
        (
            "plain, a thread on CPU 0 reading each write back and hashing it (this thread's CPU)",
            best[4],
        ),
    ] {
        if ms == f64::MAX {
            continue;
        }
        println!(
            "| {name} | {ms:.1} | {:+.1} ms ({:+.1} %) |",
            ms - best[0],
            (ms / best[0] - 1.0) * 100.0
        );
    }
    if only.is_none() {
        println!(
            "sealed minus hashed (the seal besides the hash): {:+.1} ms",
            best[2] - best[1]
        );
    }
}
