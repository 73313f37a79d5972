//! Shared helpers for the dplog criterion benches in `benches/benches`.
//!
//! - [`pin`]: pins the calling thread with `dplog::affinity`, warning (not
//!   failing) where pinning is impossible;
//! - [`CrossCore`]: a persistent consumer thread on another core, started
//!   once per bench case and signalled per measurement, so thread spawn and
//!   wake-up stay outside the measured time;
//! - [`nat44`] and [`record_pool`]: realistic NAT44 create/delete records;
//! - [`criterion_config`]: the shared, deliberately short criterion settings;
//! - [`format_peers`]: the `write!` and hand-specialised peers of the
//!   compiled template.

pub mod format_peers;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dplog::RecordHeader;
use dplog_schema_nat::{Nat44SessionRecord, NatEvent};

/// Criterion settings shared by the bench targets: 20 samples, the given
/// warm-up and measurement times, 20 000 bootstrap resamples, and no HTML
/// plots unless `DPLOG_BENCH_PLOTS` is set (plotting takes longer than
/// measuring here). Command-line flags (`--quick`, `--measurement-time`,
/// `--sample-size`, ...) still override these.
pub fn criterion_config(warm_up: Duration, measurement: Duration) -> criterion::Criterion {
    let c = criterion::Criterion::default()
        .sample_size(20)
        .nresamples(20_000)
        .warm_up_time(warm_up)
        .measurement_time(measurement);
    if std::env::var_os("DPLOG_BENCH_PLOTS").is_some() {
        c
    } else {
        c.without_plots()
    }
}

/// CPU of the producer (the criterion thread itself).
pub const PRODUCER_CPU: usize = 0;
/// CPU of the consumer thread.
pub const CONSUMER_CPU: usize = 1;

/// 2026-01-01T00:00:00Z in nanoseconds since the Unix epoch.
pub const EPOCH_2026_NS: u64 = 1_767_225_600_000_000_000;

/// Pins the calling thread to `cpu`; prints a warning instead of failing
/// (a machine with one CPU still runs the benches, unpinned).
pub fn pin(cpu: usize) {
    if let Err(e) = dplog::affinity::pin_current_thread(cpu) {
        eprintln!("warning: cannot pin thread to CPU {cpu}: {e}; running unpinned");
    }
}

/// Warns once per bench binary if fewer than two CPUs are usable: the
/// cross-core cases spin on both sides and need two.
pub fn check_two_cpus() {
    // Online CPUs, not this thread's affinity: a bench that already pinned
    // itself to one CPU would otherwise always see 1.
    // SAFETY: sysconf has no preconditions.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    let n = usize::try_from(online).unwrap_or(1);
    if n < 2 {
        eprintln!("warning: {n} CPU available; cross-core benches need 2 and will be slow");
    }
}

/// The `i`-th record of a synthetic NAT44 workload: addresses and ports vary
/// with `i`, `event` picks create (natEvent 4) or delete (natEvent 5, with
/// counters), the timestamp is `ts_ns`.
pub fn nat44(i: u64, event: NatEvent, ts_ns: u64) -> Nat44SessionRecord {
    let delete = event == NatEvent::Nat44SessionDelete;
    Nat44SessionRecord {
        header: RecordHeader::of::<Nat44SessionRecord>(),
        timestamp_ns: ts_ns,
        // 10.x.y.z inside, 198.51.100.x pool, 203.0.113.x / 192.0.2.x servers.
        src_addr: 0x0A00_0000 | (i.wrapping_mul(2_654_435_761) as u32 & 0x00FF_FFFF),
        post_nat_src_addr: 0xC633_6400 | (i as u32 & 0xFF),
        dst_addr: if i % 3 == 0 {
            0xC000_0200 | ((i / 3) as u32 & 0xFF)
        } else {
            0xCB00_7100 | ((i * 7) as u32 & 0xFF)
        },
        src_port: 1024 + (i.wrapping_mul(40_503) % 64_000) as u16,
        post_napt_src_port: 1024 + (i % 63_000) as u16,
        dst_port: [443, 80, 53, 8443][(i % 4) as usize],
        protocol: if i % 4 == 2 { 17 } else { 6 },
        nat_event: event as u8,
        ingress_vrf_id: (i % 5) as u32,
        initiator_packets: if delete { 3 + (i % 1000) as u32 } else { 0 },
        responder_packets: if delete { 2 + (i % 900) as u32 } else { 0 },
        initiator_octets: if delete { 180 + i % 1_500_000 } else { 0 },
        responder_octets: if delete {
            120 + (i * 13) % 90_000_000
        } else {
            0
        },
    }
}

/// `n` records of one event kind, timestamps 1 ms apart from 2026-01-01
/// plus half a second (so the formatters' per-second time cache refills
/// about once per 1000 records).
pub fn record_pool(n: usize, event: NatEvent) -> Vec<Nat44SessionRecord> {
    (0..n as u64)
        .map(|i| {
            nat44(
                i,
                event,
                EPOCH_2026_NS + 500_000_000 + i * 1_000_000 + i % 1000,
            )
        })
        .collect()
}

/// `n` records alternating create and delete (a session's two events).
pub fn mixed_pool(n: usize) -> Vec<Nat44SessionRecord> {
    (0..n as u64)
        .map(|i| {
            let ev = if i % 2 == 0 {
                NatEvent::Nat44SessionCreate
            } else {
                NatEvent::Nat44SessionDelete
            };
            nat44(i / 2, ev, EPOCH_2026_NS + 500_000_000 + i * 1_000_000)
        })
        .collect()
}

/// A consumer thread pinned to one CPU that lives for one bench case.
///
/// [`CrossCore::run`] hands it a record count `n`, waits until it is
/// spinning (ready), then runs the producer closure on the calling thread
/// and waits until the consumer has taken all `n` records. Only the span
/// from "consumer ready" to "consumer done" is timed, so thread creation
/// and the futex wake-up of the idle consumer are outside the measurement.
pub struct CrossCore {
    cmd: Option<mpsc::Sender<u64>>,
    ready: Arc<AtomicU64>,
    done: Arc<AtomicU64>,
    epoch: u64,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for CrossCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrossCore")
            .field("epoch", &self.epoch)
            .field("running", &self.thread.is_some())
            .finish_non_exhaustive()
    }
}

impl CrossCore {
    /// Starts the consumer thread on `cpu`. `consume(n)` must take exactly
    /// `n` records from its queue (spinning while it is empty) and should
    /// check what it took.
    pub fn spawn(cpu: usize, mut consume: impl FnMut(u64) + Send + 'static) -> Self {
        let (tx, rx) = mpsc::channel::<u64>();
        let ready = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicU64::new(0));
        let (r, d) = (ready.clone(), done.clone());
        let thread = std::thread::Builder::new()
            .name("bench-consumer".into())
            .spawn(move || {
                pin(cpu);
                let mut epoch = 0u64;
                while let Ok(n) = rx.recv() {
                    epoch += 1;
                    // Release: nothing to publish, but pairs with the
                    // Acquire spin in `run` for a clean hand-off.
                    r.store(epoch, Ordering::Release);
                    consume(n);
                    // Release pairs with the Acquire load in `run`: the
                    // consumer's reads of all n records happen before it.
                    d.store(epoch, Ordering::Release);
                }
            })
            .expect("spawn bench consumer thread");
        Self {
            cmd: Some(tx),
            ready,
            done,
            epoch: 0,
            thread: Some(thread),
        }
    }

    fn wait_for(&self, flag: &AtomicU64) {
        let mut spins = 0u32;
        while flag.load(Ordering::Acquire) != self.epoch {
            core::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins % 4096 == 0 && self.thread.as_ref().is_some_and(|t| t.is_finished()) {
                panic!("bench consumer thread died (see its panic message above)");
            }
        }
    }

    /// Moves `n` records end to end: the consumer takes `n`, `produce(n)`
    /// pushes `n` on the calling thread. Returns the wall time from the
    /// consumer being ready until it has taken the last record.
    pub fn run(&mut self, n: u64, produce: impl FnOnce(u64)) -> Duration {
        self.epoch += 1;
        self.cmd
            .as_ref()
            .expect("consumer running")
            .send(n)
            .expect("bench consumer thread is gone");
        self.wait_for(&self.ready);
        let t0 = Instant::now();
        produce(n);
        self.wait_for(&self.done);
        t0.elapsed()
    }
}

impl Drop for CrossCore {
    fn drop(&mut self) {
        drop(self.cmd.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Sum of the timestamps `0..n` (what a consumer of [`CrossCore::run`]
/// sees when the producer stamps record `i` with `timestamp_ns = i`).
pub fn expected_sum(n: u64) -> u64 {
    if n == 0 {
        0
    } else {
        // n(n-1)/2 without overflow for every n a bench can reach.
        let (a, b) = if n % 2 == 0 {
            (n / 2, n - 1)
        } else {
            (n, (n - 1) / 2)
        };
        a.wrapping_mul(b)
    }
}
