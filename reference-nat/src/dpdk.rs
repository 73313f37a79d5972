//! `dplog-nat --dpdk -- <EAL args>`: the NAT on DPDK ports (feature
//! `dpdk`, Debian's DPDK 22.11 through the workspace's `dpdk-sys`).
//!
//! N workers (`[dataplane] workers`, default 1), each on its own thread,
//! poll port 0's Rx queue of their index in bursts of
//! [`BURST`]: each received single-segment frame goes through [`Nat44`]
//! in place in its mbuf; translated frames are sent back out of port 0 on
//! the worker's Tx queue with `rte_eth_tx_burst`, the rest are freed and
//! counted by verdict. A hairpin packet to another worker's pool port is
//! handed to that worker (two-stage, see [`crate::workers`]), which sends
//! it on its own Tx queue. Time is
//! the driver's Rx timestamp when it gives one (net_pcap does: the capture
//! time), else the wall clock. The run ends after `max_packets` packets or
//! `idle_ms` without any, then every session is deleted and logged as with
//! a capture. Works with real ports and with vdevs under `--no-huge
//! --no-pci`: `net_pcap` (replay a capture, write the translated packets),
//! `net_null` (pure throughput), `net_ring` (as a secondary on a
//! primary's port, or as the primary of its own port over two named rings,
//! `[dataplane.dpdk_net_ring]`, which a peer process looks up).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::app::{AppConfig, RunError, Summary, WorkerSummary};
use crate::nat::{Nat44, NatStats, Verdict};
use crate::packet::LINKTYPE_ETHERNET;
use crate::pipeline::{Burst, Frame, Pipeline};
use crate::workers::{sum_stats, HairpinLinks};

/// Packets per `rte_eth_rx_burst`.
pub const BURST: usize = 32;

/// When a DPDK run stops.
#[derive(Clone, Copy, Debug)]
pub struct DpdkLimits {
    /// Stop after this many received packets (0 = no limit).
    pub max_packets: u64,
    /// Stop after this long without a packet (0 = never).
    pub idle_ms: u64,
    /// Nanoseconds per unit of the driver's Rx timestamp. The unit is the
    /// driver's choice: DPDK 22.11's net_pcap stamps microseconds (1000).
    pub rx_timestamp_unit_ns: u64,
}

fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Port counters after a DPDK run (`rte_eth_stats_get` on port 0).
#[derive(Clone, Copy, Debug, Default)]
pub struct PortCounters {
    /// Packets received.
    pub ipackets: u64,
    /// Packets transmitted.
    pub opackets: u64,
    /// Packets the NIC dropped for lack of Rx descriptors.
    pub imissed: u64,
}

/// dplog-nat's own net_ring port: its id and the two rings under it.
struct RingPort {
    port: u16,
    rx: *mut dpdk_sys::rte_ring,
    tx: *mut dpdk_sys::rte_ring,
}

/// Checks `[dataplane.dpdk_net_ring]` before the EAL starts: one worker
/// (the port has one queue pair), a power-of-two ring size of at least 2.
///
/// Errors: [`RunError::Dataplane`] naming the key.
fn check_net_ring(nr: &crate::app::NetRingPort, workers: usize) -> Result<(), RunError> {
    if workers != 1 {
        return Err(RunError::Dataplane(format!(
            "[dataplane.dpdk_net_ring] gives one Rx/Tx queue pair: workers must be 1, got {workers}"
        )));
    }
    if !nr.size.is_power_of_two() || nr.size < 2 {
        return Err(RunError::Dataplane(format!(
            "[dataplane.dpdk_net_ring] size must be a power of two of at least 2, got {}",
            nr.size
        )));
    }
    Ok(())
}

/// Creates the rings of `nr` (single producer, single consumer: the peer
/// and one worker) and a net_ring port over them (`rte_eth_from_rings`),
/// registers the Rx timestamp dynamic field (so the peer's timestamps are
/// read), and says so on stderr.
///
/// Errors: [`RunError::Dataplane`] naming the ring or port that could not
/// be made (with DPDK's message), or `workers` other than 1 (the port has
/// one queue pair).
fn net_ring_port(nr: &crate::app::NetRingPort, workers: usize) -> Result<RingPort, RunError> {
    check_net_ring(nr, workers)?;
    let errno = || {
        // SAFETY: reads this thread's rte_errno.
        dpdk_sys::strerror(unsafe { dpdk_sys::dplog_rte_errno() })
    };
    let mut made = Vec::new();
    for name in [&nr.rx, &nr.tx] {
        let c = std::ffi::CString::new(name.as_str())
            .map_err(|_| RunError::Dataplane(format!("ring name {name:?} holds a NUL")))?;
        // SAFETY: EAL initialised; c is NUL-terminated. Element size 8:
        // mbuf pointers, as net_ring expects.
        let r = unsafe {
            dpdk_sys::dplog_rte_ring_create_elem(
                c.as_ptr(),
                8,
                nr.size,
                dpdk_sys::SOCKET_ID_ANY,
                dpdk_sys::RING_F_SP_ENQ | dpdk_sys::RING_F_SC_DEQ,
            )
        };
        if r.is_null() {
            let e = errno();
            for &m in &made {
                // SAFETY: made here, not used by anything yet.
                unsafe { dpdk_sys::dplog_rte_ring_free(m) };
            }
            return Err(RunError::Dataplane(format!(
                "rte_ring_create {name:?} ({} slots): {e}",
                nr.size
            )));
        }
        made.push(r);
    }
    let (rx, tx) = (made[0], made[1]);
    // SAFETY: rx and tx are valid rings; the arrays hold one pointer each.
    let port =
        unsafe { dpdk_sys::rte_eth_from_rings(c"net_ring_dplog_nat".as_ptr(), &rx, 1, &tx, 1, 0) };
    let Ok(port) = u16::try_from(port) else {
        let e = errno();
        // SAFETY: no port uses them.
        unsafe {
            dpdk_sys::dplog_rte_ring_free(rx);
            dpdk_sys::dplog_rte_ring_free(tx);
        }
        return Err(RunError::Dataplane(format!("rte_eth_from_rings: {e}")));
    };
    // SAFETY: EAL initialised.
    let rc = unsafe { dpdk_sys::dplog_rte_mbuf_rx_timestamp_register() };
    if rc != 0 {
        return Err(RunError::Dataplane(format!(
            "rte_mbuf_dyn_rx_timestamp_register: {}",
            dpdk_sys::strerror(-rc)
        )));
    }
    crate::diag!(
        "dplog-nat: net_ring port {port}: Rx ring {:?}, Tx ring {:?}, {} slots each",
        nr.rx,
        nr.tx,
        nr.size
    );
    Ok(RingPort { port, rx, tx })
}

/// Initialises the EAL with `eal_args` (without the program name), runs
/// the NAT on port 0 until `limits`, logs through dplog as [`crate::app::run`]
/// does, and returns the summary (the `input` field names the port).
///
/// With `[dataplane.dpdk_net_ring]` ([`crate::app::NetRingPort`]) the
/// port is instead a net_ring port this process makes over two named
/// `rte_ring`s it creates (`rte_eth_from_rings`; one worker): run as the
/// primary, a peer process started with `--proc-type=secondary` and the
/// same `--file-prefix` finds the rings with `rte_ring_lookup`, enqueues
/// mbufs on `rx` and takes the translated frames from `tx`. A line on
/// stderr (`dplog-nat: net_ring port P: Rx ring "..", Tx ring "..", N
/// slots each`) says when the port is up. The rings are freed at exit:
/// the peer must be done by then (end the run with `--dpdk-idle-ms`).
///
/// With `[dataplane] workers = N` the port gets N Rx/Tx queue pairs and N
/// pinned worker threads (`worker_cpus`), worker `q` polling queue `q`
/// with its own [`Nat44`] (its slice of the port range), its own dplog
/// ring and no lock between them. Which packets reach which queue is the
/// port's choice (RSS on a NIC; a vdev's own queues, e.g. one `rx_pcap`
/// per queue for net_pcap): a session's packets must all reach one queue,
/// as the dispatcher of the capture input guarantees with
/// [`crate::workers::Sharder`] (a NIC needs a symmetric RSS key for that).
/// Every worker ends at the latest packet time any worker saw, as the
/// capture input does, so a capture split over the queues by the
/// `Sharder` logs the same records as the file with as many workers.
///
/// Errors: [`RunError::Dataplane`] when the EAL, the mempool or the port
/// cannot be set up (with DPDK's message), there is no port, or the worker
/// count is 0 or above [`crate::app::MAX_WORKERS`]; the other
/// [`RunError`]s as in [`crate::app::run`]. The EAL can be initialised
/// once per process, so call this once.
pub fn run_dpdk(
    cfg: &AppConfig,
    eal_args: &[String],
    limits: DpdkLimits,
) -> Result<(Summary, PortCounters), RunError> {
    let n = cfg.dataplane.workers;
    if n == 0 || n > crate::app::MAX_WORKERS {
        return Err(RunError::Dataplane(format!(
            "workers must be 1..={}, got {n}",
            crate::app::MAX_WORKERS
        )));
    }
    crate::app::check_cpus(cfg)?;
    if let Some(nr) = &cfg.dataplane.dpdk_net_ring {
        check_net_ring(nr, n)?;
    }
    let mut nats = crate::app::worker_engines(&cfg.nat_config(), n)?;
    let mut argv = vec!["dplog-nat".to_string()];
    argv.extend_from_slice(eal_args);
    dpdk_sys::eal_init(&argv).map_err(RunError::Dataplane)?;
    // `[dataplane.dpdk_net_ring]`: our own net_ring port over two rings
    // made here; else port 0 of the EAL arguments.
    let rings = match &cfg.dataplane.dpdk_net_ring {
        Some(nr) => Some(net_ring_port(nr, n)?),
        None => None,
    };
    let port = rings.as_ref().map_or(0, |r| r.port);
    // SAFETY: EAL initialised above; plain query.
    let ports = unsafe { dpdk_sys::rte_eth_dev_count_avail() };
    if ports == 0 {
        return Err(RunError::Dataplane(
            "no DPDK port (give one, e.g. --vdev net_null0)".into(),
        ));
    }
    let name = c"dplog_nat_mbufs";
    // SAFETY: EAL initialised; name is a NUL-terminated static string.
    let pool = unsafe {
        dpdk_sys::dplog_rte_pktmbuf_pool_create(
            name.as_ptr(),
            (8192 * n as u32) - 1,
            256,
            dpdk_sys::SOCKET_ID_ANY,
        )
    };
    if pool.is_null() {
        // SAFETY: reads this thread's rte_errno.
        let e = unsafe { dpdk_sys::dplog_rte_errno() };
        return Err(RunError::Dataplane(format!(
            "rte_pktmbuf_pool_create: {}",
            dpdk_sys::strerror(e)
        )));
    }
    // SAFETY: the port exists (count > 0, or made above) and pool is a
    // valid mempool.
    let rc = unsafe { dpdk_sys::dplog_port_init(port, n as u16, n as u16, 1024, pool) };
    if rc != 0 {
        return Err(RunError::Dataplane(format!(
            "port {port} set-up with {n} Rx/Tx queue pairs: {}",
            dpdk_sys::strerror(rc)
        )));
    }
    let cpu_of = |w: usize| {
        cfg.dataplane
            .worker_cpus
            .get(w)
            .copied()
            .or(if n == 1 { cfg.producer_cpu } else { None })
    };
    let logger = match cfg.dataplane.logging && cfg.log_ring.is_none() {
        true => Some(cfg.start_logger()?),
        false => None,
    };
    if let Some(l) = &logger {
        // No session tallies in this mode: the loss line counts records.
        crate::signals::watch(crate::signals::LossView {
            stats: l.snapshot_source(),
            sessions: std::sync::Arc::new(Vec::new()),
        });
    }
    // `[metrics]` / `--metrics-listen`: served for the length of the run
    // (this mode does not linger after it).
    let _metrics = match &logger {
        Some(l) => cfg.metrics.start(l).map_err(RunError::Config)?,
        None => None,
    };
    if let Some(m) = &_metrics {
        crate::diag!("dplog-nat: metrics at http://{}/metrics", m.local_addr());
    }
    // Published every PUBLISH_BURSTS rx bursts (`Pipeline::end_burst`).
    let mut producers = crate::app::worker_producers(cfg, logger.as_ref(), n)?;
    // Deterministic NAT: the whole mapping, once, at configuration time.
    // Stamped like this port's packets without an Rx timestamp: the wall
    // clock.
    let config_records = crate::app::log_deterministic_mapping(
        &nats[0],
        wall_ns(),
        producers.first_mut().and_then(|p| p.as_mut()),
    );
    let started = Instant::now();
    // Packets received by every queue (for `max_packets`), and the latest
    // packet time any worker saw (every worker ends there).
    let received = AtomicU64::new(0);
    let end_ns = AtomicU64::new(0);
    let barrier = Barrier::new(n);
    // Two-stage hairpinning across queues (see `crate::workers`): the
    // sender's worker translates the source, the owner of the destination
    // pool port the destination, and sends the frame in a fresh mbuf.
    let base_range = cfg.nat_config().port_range;
    for (w, nat) in nats.iter_mut().enumerate() {
        nat.set_hairpin_handoff(w, n, base_range);
    }
    let mut links = HairpinLinks::mesh(n, 64).into_iter();
    let shared_pool = Mempool(pool);
    let results: Vec<WorkerEnd> = std::thread::scope(|sc| {
        let handles: Vec<_> = nats
            .drain(..)
            .zip(producers.drain(..))
            .enumerate()
            .map(|(q, (nat, producer))| {
                let cpu = cpu_of(q);
                let (received, end_ns, barrier) = (&received, &end_ns, &barrier);
                let links = links.next().expect("one link set per worker");
                let pool = &shared_pool;
                let shared = Shared {
                    received,
                    end_ns,
                    barrier,
                    pool,
                };
                sc.spawn(move || {
                    if let Some(cpu) = cpu {
                        // Best effort, like the consumer's pinning.
                        let _ = dplog::affinity::pin_current_thread(cpu);
                    }
                    poll_queue(cfg, port, q as u16, nat, producer, limits, links, shared)
                })
            })
            .collect();
        handles
            .into_iter()
            // A worker panic is a bug; surface it rather than hide it.
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    let mut st = [0u64; 6];
    // SAFETY: the port is valid; st has room for the 6 counters.
    unsafe {
        let _ = dpdk_sys::dplog_port_stats(port, st.as_mut_ptr());
        let _ = dpdk_sys::rte_eth_dev_stop(port);
        let _ = dpdk_sys::rte_eth_dev_close(port);
    }
    if let Some(r) = rings {
        // SAFETY: the port over them is closed; no worker runs. The peer
        // must be done with them (it stops before our idle limit ends the
        // run).
        unsafe {
            dpdk_sys::dplog_rte_ring_free(r.rx);
            dpdk_sys::dplog_rte_ring_free(r.tx);
        }
    }
    let input = format!("dpdk port {port}");
    let port = PortCounters {
        ipackets: st[0],
        opackets: st[1],
        imissed: st[4],
    };
    let sink_counters = logger.as_ref().and_then(|l| l.sink_counters());
    let (stats, shutdown_err) = match logger {
        Some(l) => crate::app::shutdown_bounded(
            l,
            std::time::Duration::from_millis(cfg.ring.shutdown_timeout_ms),
        ),
        None => (dplog::Stats::default(), None),
    };
    crate::signals::unwatch();
    let per: Vec<NatStats> = results.iter().map(|r| r.stats.clone()).collect();
    let busy = results.iter().map(|r| r.busy).max().unwrap_or_default();
    let mut summary = crate::app::summary_of(
        cfg,
        &sum_stats(&per),
        stats,
        input,
        started.elapsed().as_secs_f64(),
        busy.as_secs_f64(),
    );
    summary.workers = n;
    summary.sink_counters = sink_counters.map(|c| c.named()).unwrap_or_default();
    summary.per_worker = results
        .iter()
        .map(|r| WorkerSummary::of(&r.stats, r.busy.as_secs_f64()))
        .collect();
    summary.records_logged += config_records;
    summary.config_records = config_records;
    summary.records.dropped_at_stop = results.iter().map(|r| r.dropped_at_stop).sum();
    summary.tx_dropped = results.iter().map(|r| r.tx_dropped).sum();
    // SAFETY: every DPDK object is released; no DPDK call follows.
    unsafe {
        dpdk_sys::rte_mempool_free(pool);
        let _ = dpdk_sys::rte_eal_cleanup();
    }
    if let Some(e) = shutdown_err {
        return Err(RunError::Shutdown(Box::new(summary), e));
    }
    Ok((summary, port))
}

/// The port's mempool, shared by the workers (a DPDK mempool is safe to
/// use from several threads: per-lcore caches, MP/MC ring behind them).
struct Mempool(*mut dpdk_sys::rte_mempool);

// SAFETY: rte_mempool get/put are multi-thread safe (MP/MC default ops);
// the pool outlives the worker scope (freed after it).
unsafe impl Sync for Mempool {}

/// What the workers of a DPDK run share.
#[derive(Clone, Copy)]
struct Shared<'a> {
    /// Packets received by every queue (for `max_packets`).
    received: &'a AtomicU64,
    /// The latest packet time any worker saw.
    end_ns: &'a AtomicU64,
    barrier: &'a Barrier,
    pool: &'a Mempool,
}

/// Sends `frames` (hairpins delivered for another worker) on `queue` of
/// `port`, each copied into a fresh mbuf of `pool`; frames that find no
/// mbuf or no room in the Tx queue are dropped (as a full Tx queue drops
/// any translated frame). Returns how many were dropped.
fn send_copies(
    port: u16,
    queue: u16,
    pool: &Mempool,
    frames: &mut Vec<u8>,
    lens: &mut Vec<usize>,
) -> u64 {
    let mut dropped = 0u64;
    let mut tx: [*mut dpdk_sys::rte_mbuf; BURST] = [std::ptr::null_mut(); BURST];
    let mut off = 0;
    for chunk in lens.chunks(BURST) {
        let mut n = 0;
        for &len in chunk {
            let f = &frames[off..off + len];
            off += len;
            // SAFETY: pool is the port's valid mempool; NULL is handled.
            let m = unsafe { dpdk_sys::dplog_rte_pktmbuf_alloc(pool.0) };
            if m.is_null() {
                dropped += 1;
                continue;
            }
            // SAFETY: m is ours (just allocated); append gives len
            // writable bytes or NULL (then m is freed).
            unsafe {
                let dst = dpdk_sys::dplog_rte_pktmbuf_append(m, len as u16) as *mut u8;
                if dst.is_null() {
                    dpdk_sys::dplog_rte_pktmbuf_free(m);
                    dropped += 1;
                    continue;
                }
                std::ptr::copy_nonoverlapping(f.as_ptr(), dst, len);
            }
            tx[n] = m;
            n += 1;
        }
        // SAFETY: this thread owns Tx queue `queue`; tx[..n] are owned
        // mbufs; those sent belong to the driver afterwards.
        let sent = usize::from(unsafe {
            dpdk_sys::dplog_rte_eth_tx_burst(port, queue, tx.as_mut_ptr(), n as u16)
        });
        for &m in &tx[sent..n] {
            // SAFETY: not accepted by the driver: still ours.
            unsafe { dpdk_sys::dplog_rte_pktmbuf_free(m) };
        }
        dropped += (n - sent) as u64;
    }
    frames.clear();
    lens.clear();
    dropped
}

/// Hairpin packets this worker delivered for other workers, to send on
/// its Tx queue in fresh mbufs: their bytes back to back, and lengths.
#[derive(Default)]
struct Copies {
    frames: Vec<u8>,
    lens: Vec<usize>,
    /// Copies dropped so far (no mbuf, or refused by the Tx queue).
    dropped: u64,
}

impl Copies {
    fn push(&mut self, f: &[u8]) {
        self.frames.extend_from_slice(f);
        self.lens.push(f.len());
    }

    /// Sends what was pushed (see [`send_copies`]).
    fn send(&mut self, port: u16, queue: u16, pool: &Mempool) {
        if !self.lens.is_empty() {
            self.dropped += send_copies(port, queue, pool, &mut self.frames, &mut self.lens);
        }
    }
}

/// One `rte_eth_rx_burst` as a [`Burst`]: each mbuf's frame (its first
/// segment) with the driver's Rx timestamp (else the wall clock); the
/// translated ones are queued for `rte_eth_tx_burst` in `tx[..ntx]`, the
/// others freed.
struct RxBurst<'b> {
    /// Mbufs the driver handed over; owned until freed or queued in `tx`.
    rx: &'b [*mut dpdk_sys::rte_mbuf],
    tx: &'b mut [*mut dpdk_sys::rte_mbuf; BURST],
    ntx: usize,
    /// Nanoseconds per unit of the Rx timestamp.
    unit_ns: u64,
}

impl Burst for RxBurst<'_> {
    #[inline]
    fn count(&self) -> usize {
        self.rx.len()
    }

    #[inline]
    fn frame(&mut self, i: usize) -> Option<Frame<'_>> {
        let &m = self.rx.get(i)?;
        // SAFETY: m is an mbuf the driver just handed us; we own it
        // until we free it or pass it to tx_burst in `verdict`, which
        // `Pipeline::burst` calls once per packet after this frame's borrow
        // ended (see `Burst`). Its first segment holds data_len bytes at
        // mtod.
        let (ts_ns, data) = unsafe {
            let mut ts = 0u64;
            if dpdk_sys::dplog_rte_mbuf_rx_timestamp(m, &mut ts) == 0 {
                ts = wall_ns();
            } else {
                ts = ts.saturating_mul(self.unit_ns);
            }
            let len = usize::from(dpdk_sys::dplog_rte_pktmbuf_data_len(m));
            let data = dpdk_sys::dplog_rte_pktmbuf_mtod(m) as *mut u8;
            (ts, std::slice::from_raw_parts_mut(data, len))
        };
        // A multi-segment frame is seen through its first segment only:
        // headers beyond it count as truncated.
        let wire_len = data.len();
        Some(Frame {
            ts_ns,
            linktype: LINKTYPE_ETHERNET,
            data,
            wire_len,
        })
    }

    #[inline]
    fn verdict(&mut self, i: usize, v: Verdict) {
        let m = self.rx[i];
        if v.is_translated() {
            self.tx[self.ntx] = m;
            self.ntx += 1;
        } else {
            // SAFETY: we own m (see `frame`) and drop it here.
            unsafe { dpdk_sys::dplog_rte_pktmbuf_free(m) };
        }
    }
}

/// What a worker reports when it ends.
struct WorkerEnd {
    /// The NAT's counters.
    stats: NatStats,
    /// Time spent polling.
    busy: Duration,
    /// Records dropped at stop.
    dropped_at_stop: u64,
    /// Frames the Tx queue refused, or copies that found no mbuf.
    tx_dropped: u64,
}

/// One worker: polls Rx queue `queue` of `port` in bursts, translates in
/// place through its [`Pipeline`], sends the translated frames on Tx queue
/// `queue`, until the limits or a stop; then waits for the other workers
/// and deletes every session at the latest packet time any of them saw.
/// Hairpin packets to another worker's pool port are handed to it through
/// `links` (copied; the mbuf is freed), and those handed to this worker
/// are sent on its Tx queue in fresh mbufs.
#[allow(clippy::too_many_arguments)]
fn poll_queue(
    cfg: &AppConfig,
    port: u16,
    queue: u16,
    nat: Nat44,
    mut producer: Option<crate::ringlog::NatProducer>,
    limits: DpdkLimits,
    links: HairpinLinks,
    shared: Shared<'_>,
) -> WorkerEnd {
    let Shared {
        received,
        end_ns,
        barrier,
        pool,
    } = shared;
    let mut pipe = Pipeline::new(nat, cfg.ring_log(producer.as_mut()), links);
    let mut copies = Copies::default();
    let mut tx_dropped = 0u64;
    let started = Instant::now();
    let mut last_rx = Instant::now();
    let mut rx: [*mut dpdk_sys::rte_mbuf; BURST] = [std::ptr::null_mut(); BURST];
    let mut tx: [*mut dpdk_sys::rte_mbuf; BURST] = [std::ptr::null_mut(); BURST];
    loop {
        if crate::app::stop_requested() {
            break;
        }
        // Relaxed: a shared packet count compared with a limit; nothing
        // else is published through it.
        if limits.max_packets > 0 && received.load(Ordering::Relaxed) >= limits.max_packets {
            break;
        }
        // Stage two of hairpins other workers handed over, sent here.
        pipe.drain(&mut |f: &[u8]| copies.push(f));
        copies.send(port, queue, pool);
        // SAFETY: the port / this queue are set up and polled by this thread
        // only; rx has room for BURST pointers.
        let n = usize::from(unsafe {
            dpdk_sys::dplog_rte_eth_rx_burst(port, queue, rx.as_mut_ptr(), BURST as u16)
        });
        if n == 0 {
            // Idle: what the last bursts logged goes out now.
            pipe.idle();
            if limits.idle_ms > 0 && last_rx.elapsed() >= Duration::from_millis(limits.idle_ms) {
                break;
            }
            std::hint::spin_loop();
            continue;
        }
        last_rx = Instant::now();
        let mut burst = RxBurst {
            rx: &rx[..n],
            tx: &mut tx,
            ntx: 0,
            unit_ns: limits.rx_timestamp_unit_ns,
        };
        pipe.burst(&mut burst);
        let ntx = burst.ntx;
        // Relaxed: see the load above.
        received.fetch_add(n as u64, Ordering::Relaxed);
        if ntx > 0 {
            // SAFETY: tx[..ntx] are owned mbufs; those sent belong to the
            // driver afterwards, the rest are freed below.
            let sent = usize::from(unsafe {
                dpdk_sys::dplog_rte_eth_tx_burst(port, queue, tx.as_mut_ptr(), ntx as u16)
            });
            for &m in &tx[sent..ntx] {
                // SAFETY: not accepted by the driver: still ours.
                unsafe { dpdk_sys::dplog_rte_pktmbuf_free(m) };
            }
            tx_dropped += (ntx - sent) as u64;
        }
    }
    // Hand over what is staged and deliver what the others hand us until
    // they are all done.
    pipe.close(&mut |f: &[u8]| copies.push(f));
    copies.send(port, queue, pool);
    let busy = started.elapsed();
    // Relaxed: the barrier below orders every worker's fetch_max before
    // any worker's load (Barrier::wait synchronizes).
    end_ns.fetch_max(pipe.nat().now_ns(), Ordering::Relaxed);
    barrier.wait();
    let end = if crate::app::stop_requested() {
        pipe.nat().now_ns()
    } else {
        end_ns.load(Ordering::Relaxed)
    };
    let (stats, dropped_at_stop) = pipe.finish(end);
    WorkerEnd {
        stats,
        busy,
        dropped_at_stop,
        tx_dropped: tx_dropped + copies.dropped,
    }
}
