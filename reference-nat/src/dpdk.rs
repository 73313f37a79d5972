//! `dplog-nat --dpdk -- <EAL args>`: the NAT on DPDK ports (feature
//! `dpdk`, Debian's DPDK 22.11 through the workspace's `dpdk-sys`).
//!
//! One worker on the calling lcore polls port 0, queue 0, in bursts of
//! [`BURST`]: each received single-segment frame goes through [`Nat44`]
//! in place in its mbuf; translated frames are sent back out of port 0 with
//! `rte_eth_tx_burst`, the rest are freed and counted by verdict. Time is
//! the driver's Rx timestamp when it gives one (net_pcap does: the capture
//! time), else the wall clock. The run ends after `max_packets` packets or
//! `idle_ms` without any, then every session is deleted and logged as with
//! a capture. Works with real ports and with vdevs under `--no-huge
//! --no-pci`: `net_pcap` (replay a capture, write the translated packets),
//! `net_null` (pure throughput), `net_ring`.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::ringlog::{RingLog, NAT_BURST};

use crate::app::{AppConfig, RunError, Summary};
use crate::nat::Nat44;
use crate::packet::LINKTYPE_ETHERNET;

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

/// Initialises the EAL with `eal_args` (without the program name), runs
/// the NAT on port 0 until `limits`, logs through dplog as [`crate::app::run`]
/// does, and returns the summary (the `input` field names the port).
///
/// Errors: [`RunError::Dataplane`] when the EAL, the mempool or the port
/// cannot be set up (with DPDK's message), or there is no port; the other
/// [`RunError`]s as in [`crate::app::run`]. The EAL can be initialised
/// once per process, so call this once.
pub fn run_dpdk(
    cfg: &AppConfig,
    eal_args: &[String],
    limits: DpdkLimits,
) -> Result<(Summary, PortCounters), RunError> {
    let mut nat = Nat44::new(cfg.nat_config()).map_err(RunError::Nat)?;
    let mut argv = vec!["dplog-nat".to_string()];
    argv.extend_from_slice(eal_args);
    dpdk_sys::eal_init(&argv).map_err(RunError::Dataplane)?;
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
        dpdk_sys::dplog_rte_pktmbuf_pool_create(name.as_ptr(), 8191, 256, dpdk_sys::SOCKET_ID_ANY)
    };
    if pool.is_null() {
        // SAFETY: reads this thread's rte_errno.
        let e = unsafe { dpdk_sys::dplog_rte_errno() };
        return Err(RunError::Dataplane(format!(
            "rte_pktmbuf_pool_create: {}",
            dpdk_sys::strerror(e)
        )));
    }
    // SAFETY: port 0 exists (count > 0) and pool is a valid mempool.
    let rc = unsafe { dpdk_sys::dplog_port_init(0, 1, 1, 1024, pool) };
    if rc != 0 {
        return Err(RunError::Dataplane(format!(
            "port 0 set-up: {}",
            dpdk_sys::strerror(rc)
        )));
    }
    if let Some(cpu) = cfg
        .dataplane
        .worker_cpus
        .first()
        .copied()
        .or(cfg.producer_cpu)
    {
        let _ = dplog::affinity::pin_current_thread(cpu);
    }
    let logger = match cfg.dataplane.logging {
        true => Some(cfg.start_logger()?),
        false => None,
    };
    let mut producer = match &logger {
        Some(l) => {
            let mut p = l
                .producer()
                .map_err(|e| RunError::Config(dplog::config::ConfigError::Logger(e)))?;
            // Flushed once per rx burst below.
            p.set_publish_every(cfg.log_config().ring.publish_every.unwrap_or(NAT_BURST));
            Some(p)
        }
        None => None,
    };
    // Deterministic NAT: the whole mapping, once, at configuration time.
    let config_records = nat.deterministic_mapping(crate::app::wall_clock_ns(), |r| {
        if let Some(p) = producer.as_mut() {
            p.log(r.into());
        }
    });
    let mut log = RingLog::new(producer.as_mut());
    let started = Instant::now();
    let mut last_rx = Instant::now();
    let mut rx: [*mut dpdk_sys::rte_mbuf; BURST] = [std::ptr::null_mut(); BURST];
    let mut tx: [*mut dpdk_sys::rte_mbuf; BURST] = [std::ptr::null_mut(); BURST];
    let mut received = 0u64;
    loop {
        if crate::app::stop_requested() {
            break;
        }
        // SAFETY: port 0 / queue 0 are set up and polled by this thread
        // only; rx has room for BURST pointers.
        let n = usize::from(unsafe {
            dpdk_sys::dplog_rte_eth_rx_burst(0, 0, rx.as_mut_ptr(), BURST as u16)
        });
        if n == 0 {
            if limits.idle_ms > 0 && last_rx.elapsed() >= Duration::from_millis(limits.idle_ms) {
                break;
            }
            std::hint::spin_loop();
            continue;
        }
        last_rx = Instant::now();
        let mut ntx = 0usize;
        for &m in &rx[..n] {
            // SAFETY: m is an mbuf the driver just handed us; we own it
            // until we free it or pass it to tx_burst. Its first segment
            // holds data_len bytes at mtod.
            let verdict = unsafe {
                let mut ts = 0u64;
                if dpdk_sys::dplog_rte_mbuf_rx_timestamp(m, &mut ts) == 0 {
                    ts = wall_ns();
                } else {
                    ts = ts.saturating_mul(limits.rx_timestamp_unit_ns);
                }
                let len = usize::from(dpdk_sys::dplog_rte_pktmbuf_data_len(m));
                let data = dpdk_sys::dplog_rte_pktmbuf_mtod(m) as *mut u8;
                let frame = std::slice::from_raw_parts_mut(data, len);
                // A multi-segment frame is seen through its first segment
                // only: headers beyond it count as truncated.
                nat.process(ts, LINKTYPE_ETHERNET, frame, &mut log)
            };
            if verdict.is_translated() {
                tx[ntx] = m;
                ntx += 1;
            } else {
                // SAFETY: we own m (see above) and drop it here.
                unsafe { dpdk_sys::dplog_rte_pktmbuf_free(m) };
            }
        }
        received += n as u64;
        if ntx > 0 {
            // SAFETY: tx[..ntx] are owned mbufs; those sent belong to the
            // driver afterwards, the rest are freed below.
            let sent = usize::from(unsafe {
                dpdk_sys::dplog_rte_eth_tx_burst(0, 0, tx.as_mut_ptr(), ntx as u16)
            });
            for &m in &tx[sent..ntx] {
                // SAFETY: not accepted by the driver: still ours.
                unsafe { dpdk_sys::dplog_rte_pktmbuf_free(m) };
            }
        }
        // One ring publication per rx burst.
        log.flush();
        if limits.max_packets > 0 && received >= limits.max_packets {
            break;
        }
    }
    let busy = started.elapsed();
    let end = nat.now_ns();
    nat.finish(end, &mut log);
    let dropped_at_stop = log.dropped_at_stop();
    drop(producer);
    let mut st = [0u64; 6];
    // SAFETY: port 0 is valid; st has room for the 6 counters.
    unsafe {
        let _ = dpdk_sys::dplog_port_stats(0, st.as_mut_ptr());
        let _ = dpdk_sys::rte_eth_dev_stop(0);
        let _ = dpdk_sys::rte_eth_dev_close(0);
    }
    let port = PortCounters {
        ipackets: st[0],
        opackets: st[1],
        imissed: st[4],
    };
    let (stats, shutdown_err) = match logger {
        Some(l) => match l.shutdown() {
            Ok(s) => (s, None),
            Err((s, e)) => (s, Some(e.to_string())),
        },
        None => (dplog::Stats::default(), None),
    };
    let mut summary = crate::app::summary_of(
        cfg,
        nat.stats(),
        stats,
        "dpdk port 0".into(),
        started.elapsed().as_secs_f64(),
        busy.as_secs_f64(),
    );
    summary.records_logged += config_records;
    summary.config_records = config_records;
    summary.records.dropped_at_stop = dropped_at_stop;
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
