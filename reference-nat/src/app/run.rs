//! The run modes: checks before anything is allocated or opened, one
//! [`Nat44`] per worker, the logger, the worker threads, and the
//! dispatcher that shards a capture or the synthetic mix to them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dplog::metrics::MetricsServer;
use dplog::nat::NatRecord;
use dplog::Stats;

use super::host::pin;
use super::live::monitor;
use super::summary::{input_failed, make_summary};
use super::worker::{handoff_worker, preload_shards, synthetic_worker, SynSource};
use super::{
    check_cpus, check_ring_memory, input_name, input_start_ns, log_deterministic_mapping,
    mem_available, shutdown_bounded, stop_requested, worker_producers, AppConfig, RunError,
    Summary, WorkerSummary, MAX_WORKERS,
};
use crate::input::{read_capture_max, InputStats};
use crate::nat::{worker_port_range, Nat44, NatConfig, NatStats, PortAllocation};
use crate::signals::SessionTally;
use crate::synthetic::Synthetic;
use crate::workers::{
    sum_stats, Batch, HairpinLinks, Handoff, LiveCounters, Sharder, BATCH_PACKETS,
};

/// One [`Nat44`] per worker of `n` from `base`: each on its own slice of
/// the port range ([`worker_port_range`]; deterministic NAT keeps the
/// whole range, a subscriber living on one worker), random allocation
/// seeded per worker.
///
/// Errors: [`RunError::Dataplane`] when the range cannot be split,
/// [`RunError::Nat`] for bad NAT settings.
pub fn worker_engines(base: &NatConfig, n: usize) -> Result<Vec<Nat44>, RunError> {
    let mut nats = Vec::with_capacity(n);
    for w in 0..n {
        let mut c = base.clone();
        // Deterministic NAT gives every subscriber a fixed block of the
        // whole range, and a subscriber lives on one worker: no split.
        if c.port_allocation != PortAllocation::Deterministic {
            c.port_range = worker_port_range(base.port_range, w, n).ok_or_else(|| {
                RunError::Dataplane(format!(
                    "port range {}..={} cannot be split over {n} workers",
                    base.port_range.0, base.port_range.1
                ))
            })?;
        }
        if let PortAllocation::Random { seed } = c.port_allocation {
            c.port_allocation = PortAllocation::Random {
                seed: seed ^ (w as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            };
        }
        nats.push(Nat44::new(c).map_err(RunError::Nat)?);
    }
    Ok(nats)
}

/// Runs the NAT over the configured input, logging through dplog, and
/// returns the summary once every record is written and the sink closed.
///
/// With `[dataplane] workers = N`, N pinned worker threads each own a
/// [`Nat44`] (session table, port allocator on a disjoint port slice) and
/// a dplog ring. Capture input is read by the calling thread and sharded to
/// the workers by [`Sharder`]; so is the synthetic mix, generated once by
/// the calling thread (or preloaded and sharded before the clock), so the
/// packets are the same whatever the number of workers. One worker
/// generates the mix itself.
///
/// Errors: [`RunError::Config`], [`RunError::Nat`],
/// [`RunError::Synthetic`] and [`RunError::Dataplane`] before any packet;
/// [`RunError::Input`] when the capture breaks off (what was read is still
/// translated, logged and flushed); [`RunError::Shutdown`] if the sink fails
/// at close.
pub fn run(cfg: &AppConfig) -> Result<Summary, RunError> {
    // Clamped: the worker count is checked (with its error) in run_live.
    let live = LiveCounters::new(cfg.dataplane.workers.clamp(1, MAX_WORKERS));
    run_live(cfg, &live)
}

/// [`run`], publishing every worker's counters into `live` while it runs,
/// so that another thread can read them (see [`LiveCounters::total`]).
///
/// Errors: as [`run`]; [`RunError::Dataplane`] when `live` was made for a
/// different number of workers.
pub fn run_live(cfg: &AppConfig, live: &LiveCounters) -> Result<Summary, RunError> {
    run_live_serving(cfg, live, &mut None)
}

/// [`run`] with the `[metrics]` listener: started (if
/// `metrics.prometheus_listen` is set and logging is on) as soon as the
/// logger is, and left in `metrics` when the run returns, still serving the
/// final counters, so the caller decides how long to keep it
/// (`metrics.linger_ms` in `dplog-nat`). The bound address is printed on
/// stderr: `dplog-nat: metrics at http://127.0.0.1:9464/metrics`.
///
/// Errors: as [`run`]; [`RunError::Config`] if the listener cannot start.
pub fn run_serving(
    cfg: &AppConfig,
    metrics: &mut Option<MetricsServer>,
) -> Result<Summary, RunError> {
    // Clamped: the worker count is checked (with its error) in
    // run_live_serving; an absurd one must not be allocated first.
    let live = LiveCounters::new(cfg.dataplane.workers.clamp(1, MAX_WORKERS));
    run_live_serving(cfg, &live, metrics)
}

/// [`run_live`] with the `[metrics]` listener, as [`run_serving`].
pub fn run_live_serving(
    cfg: &AppConfig,
    live: &LiveCounters,
    metrics: &mut Option<MetricsServer>,
) -> Result<Summary, RunError> {
    let n = cfg.dataplane.workers;
    if n == 0 || n > MAX_WORKERS {
        return Err(RunError::Dataplane(format!(
            "workers must be 1..={MAX_WORKERS}, got {n}"
        )));
    }
    if live.len() != n {
        return Err(RunError::Dataplane(format!(
            "live counters are for {} workers, the run has {n}",
            live.len()
        )));
    }
    if cfg.dataplane.handoff_batches == 0 {
        return Err(RunError::Dataplane(
            "handoff_batches must be at least 1".into(),
        ));
    }
    check_cpus(cfg)?;
    // Ring sizes are checked before anything is allocated or opened.
    if cfg.dataplane.logging {
        cfg.log_config()
            .check_ring(std::mem::size_of::<NatRecord>())
            .map_err(RunError::Config)?;
        check_ring_memory(cfg.ring.capacity, n, mem_available())?;
    }
    // The capture is opened and its file header checked before the logger
    // (and so the sink's log file) exists: a missing or broken capture
    // leaves no empty log behind.
    if let Some(path) = &cfg.input.pcap {
        crate::input::check_capture(path).map_err(|e| input_failed(cfg, e))?;
    }
    let base = cfg.nat_config();
    let mut nats = worker_engines(&base, n)?;
    // The synthetic mix is one stream whatever the worker count: generated
    // once, then sharded by the same `Sharder` as a capture (RSS). One
    // worker runs the generator itself; several get their share through
    // the handoff rings, or preloaded before the clock.
    let mut generator = None;
    let mut sources: Vec<SynSource> = Vec::new();
    if cfg.input.pcap.is_none() {
        let mut gen = Synthetic::new(cfg.synthetic_config()).map_err(RunError::Synthetic)?;
        if n == 1 {
            sources.push(if cfg.dataplane.preload {
                let (mut shards, end) = preload_shards(&mut gen, None);
                let (arena, meta) = shards.pop().unwrap_or_default();
                SynSource::Preloaded(arena, meta, end)
            } else {
                SynSource::Live(Box::new(gen))
            });
        } else if cfg.dataplane.preload {
            let sharder = Sharder::new(&base.inside, n);
            let (shards, end) = preload_shards(&mut gen, Some(&sharder));
            sources = shards
                .into_iter()
                .map(|(a, m)| SynSource::Preloaded(a, m, end))
                .collect();
        } else {
            generator = Some(gen);
        }
    }
    let logger = if cfg.dataplane.logging && cfg.log_ring.is_none() {
        let l = cfg.start_logger()?;
        *metrics = cfg.metrics.start(&l).map_err(RunError::Config)?;
        if let Some(m) = metrics.as_ref() {
            crate::diag!("dplog-nat: metrics at http://{}/metrics", m.local_addr());
        }
        Some(l)
    } else {
        None
    };
    let mut producers = worker_producers(cfg, logger.as_ref(), n)?;
    let tallies: std::sync::Arc<Vec<SessionTally>> =
        std::sync::Arc::new((0..n).map(|_| SessionTally::default()).collect());
    if let Some(l) = &logger {
        crate::signals::watch(crate::signals::LossView {
            stats: l.snapshot_source(),
            sessions: tallies.clone(),
        });
    }
    // Deterministic NAT: the whole mapping, once, at configuration time.
    let config_records = match nats.first() {
        Some(first) => {
            // The capture's first packet is read only when it is needed.
            let ts = if cfg.nat.port_allocation == super::PortAllocationName::Deterministic {
                input_start_ns(cfg)
            } else {
                0
            };
            log_deterministic_mapping(first, ts, producers.first_mut().and_then(|p| p.as_mut()))
        }
        None => 0,
    };
    let cpu_of = |w: usize| {
        cfg.dataplane
            .worker_cpus
            .get(w)
            .copied()
            .or(if n == 1 { cfg.producer_cpu } else { None })
    };

    let started = Instant::now();
    let done = AtomicBool::new(false);
    let mut input_stats = InputStats::default();
    let mut input_error = None;
    // (counters, busy ns, records dropped at stop) per worker.
    let mut results: Vec<(NatStats, u64, u64)> = Vec::with_capacity(n);
    std::thread::scope(|sc| {
        let monitor = (cfg.dataplane.live_stats_ms > 0).then(|| {
            let (done, logger) = (&done, logger.as_ref());
            let every = Duration::from_millis(cfg.dataplane.live_stats_ms);
            sc.spawn(move || monitor(live, logger, done, every, cfg.ring.capacity))
        });
        let mut handles = Vec::with_capacity(n);
        if sources.is_empty() {
            let mut txs = Vec::with_capacity(n);
            let mut rets = Vec::with_capacity(n);
            // Two-stage hairpinning across workers (see `workers`).
            let mut links = HairpinLinks::mesh(n, cfg.dataplane.handoff_batches).into_iter();
            for (w, (mut nat, producer)) in nats.drain(..).zip(producers.drain(..)).enumerate() {
                nat.set_hairpin_handoff(w, n, base.port_range);
                let links = links.next().expect("one link set per worker");
                let (tx, rx) = rtrb::RingBuffer::<Handoff>::new(cfg.dataplane.handoff_batches);
                let (ret_tx, ret_rx) =
                    rtrb::RingBuffer::<Batch>::new(cfg.dataplane.handoff_batches + 2);
                txs.push(tx);
                rets.push(ret_rx);
                let counters = live.worker(w).expect("one counter per worker");
                let tally = tallies.get(w);
                let cpu = cpu_of(w);
                handles.push(sc.spawn(move || {
                    pin(cpu);
                    handoff_worker(cfg, nat, producer, (counters, tally), rx, ret_tx, links)
                }));
            }
            // Every packet from an inside host goes to that host's worker,
            // hairpin packets too: its worker translates the source and
            // hands the packet to the owner of the destination port.
            let sharder = Sharder::new(&base.inside, n);
            let mut cur: Vec<Batch> = (0..n).map(|_| Batch::new()).collect();
            let mut last_ts = 0u64;
            let mut dispatch = |ts_ns: u64, linktype: u32, data: &[u8], wire_len: u32| {
                let w = sharder.worker_of(linktype, data);
                cur[w].push_wire(ts_ns, linktype, data, wire_len);
                last_ts = last_ts.max(ts_ns);
                if cur[w].len() >= BATCH_PACKETS {
                    let mut fresh = rets[w].pop().unwrap_or_default();
                    fresh.clear();
                    let full = std::mem::replace(&mut cur[w], fresh);
                    send(&mut txs[w], Handoff::Batch(full));
                }
            };
            let res = match (&cfg.input.pcap, generator.as_mut()) {
                (Some(path), _) => read_capture_max(path, cfg.input.max_packets, |pkt| {
                    if !stop_requested() {
                        dispatch(pkt.ts_ns, pkt.linktype, pkt.data, pkt.orig_len);
                    }
                }),
                (None, Some(gen)) => {
                    while let Some((ts, f)) = gen.next_frame() {
                        if stop_requested() {
                            break;
                        }
                        let len = f.len() as u32;
                        dispatch(ts, crate::packet::LINKTYPE_ETHERNET, f, len);
                    }
                    Ok(InputStats::default())
                }
                (None, None) => Ok(InputStats::default()),
            };
            for (w, b) in cur.into_iter().enumerate() {
                if !b.is_empty() {
                    send(&mut txs[w], Handoff::Batch(b));
                }
                send(&mut txs[w], Handoff::End(last_ts));
            }
            match res {
                Ok(s) => input_stats = s,
                Err(e) => {
                    input_stats = e.stats.clone();
                    input_error = Some(e);
                }
            }
        } else {
            for (w, ((nat, producer), src)) in nats
                .drain(..)
                .zip(producers.drain(..))
                .zip(sources.drain(..))
                .enumerate()
            {
                let counters = live.worker(w).expect("one counter per worker");
                let tally = tallies.get(w);
                let cpu = cpu_of(w);
                handles.push(sc.spawn(move || {
                    pin(cpu);
                    synthetic_worker(cfg, nat, producer, counters, tally, src)
                }));
            }
        }
        for h in handles {
            // A worker panic is a bug; surface it rather than hide it.
            results.push(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
        // Relaxed: a flag polled by the monitor; the scope's join is the
        // real synchronization.
        done.store(true, Ordering::Relaxed);
        if let Some(m) = monitor {
            let _ = m.join();
        }
    });
    let sink_counters = logger.as_ref().and_then(|l| l.sink_counters());
    let (stats, shutdown_err) = match logger {
        Some(l) => shutdown_bounded(l, Duration::from_millis(cfg.ring.shutdown_timeout_ms)),
        None => (Stats::default(), None),
    };
    crate::signals::unwatch();
    let elapsed = started.elapsed().as_secs_f64();
    let input_name = input_name(cfg, &input_stats, input_error.is_none());
    let per: Vec<NatStats> = results.iter().map(|(s, _, _)| s.clone()).collect();
    let total = sum_stats(&per);
    let mut summary = make_summary(
        cfg,
        &total,
        stats,
        input_name,
        &input_stats,
        elapsed,
        input_error.as_ref().map(|e| e.to_string()),
    );
    summary.workers = n;
    summary.logging = cfg.dataplane.logging;
    summary.sink_counters = sink_counters.map(|c| c.named()).unwrap_or_default();
    summary.records_logged += config_records;
    summary.config_records = config_records;
    summary.records.dropped_at_stop = results.iter().map(|r| r.2).sum();
    summary.per_worker = results
        .iter()
        .map(|(s, busy_ns, _)| WorkerSummary::of(s, *busy_ns as f64 / 1e9))
        .collect();
    if let Some(e) = input_error {
        return Err(RunError::Input(Box::new(summary), Box::new(e)));
    }
    if let Some(e) = shutdown_err {
        return Err(RunError::Shutdown(Box::new(summary), e));
    }
    Ok(summary)
}

/// Hands `m` to a worker, waiting while its ring is full; gives up if the
/// worker is gone.
fn send(tx: &mut rtrb::Producer<Handoff>, mut m: Handoff) {
    loop {
        match tx.push(m) {
            Ok(()) => return,
            Err(rtrb::PushError::Full(back)) => {
                if tx.is_abandoned() {
                    return;
                }
                m = back;
                std::thread::yield_now();
            }
        }
    }
}
