//! The `dplog-nat` application: configuration, the run loop that feeds a
//! capture or the synthetic mix through [`Nat44`] into a dplog ring, and the
//! summary.
//!
//! Configuration is a TOML file (see `reference-nat/dplog-nat.toml`); every
//! key is optional, unknown keys are errors that name the key, and command
//! line flags override the file.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dplog::config::MetricsConfig;
use dplog::config::{ConfigError, FileSinkConfig, FormatConfig, LogConfig, RingConfig, SinkConfig};
use dplog::metrics::MetricsServer;
use dplog::{Backpressure, LogProducer, Logger, NatRecord, Stats};
use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use crate::input::{read_capture_max, InputError, InputStats};
use crate::nat::{
    worker_port_range, Nat44, NatConfig, NatError, NatStats, NatTimeouts, PortAllocation, Verdict,
};
use crate::ringlog::{RingLog, NAT_BURST};
use crate::signals::SessionTally;
use crate::synthetic::{
    Synthetic, SyntheticConfig, SyntheticError, SYNTHETIC_FRAME_LEN, SYNTHETIC_INSIDE,
};
use crate::workers::{
    sum_stats, translated, Batch, HairpinLinks, Handoff, LiveCounters, Sharder, WorkerCounters,
    BATCH_PACKETS,
};

/// Most workers a run may have.
pub const MAX_WORKERS: usize = 64;

/// `[nat]`: translation settings.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct NatSection {
    /// Inside prefixes. Default: the RFC 1918 ranges.
    pub inside: Vec<Ipv4Net>,
    /// External pool. Default `198.51.100.0/28` (TEST-NET-2, RFC 5737).
    pub pool: Ipv4Net,
    /// `ingressVRFID` of every record. Default 0.
    pub vrf_id: u32,
    /// UDP idle timeout in seconds. Default 300 (RFC 4787 REQ-5).
    pub udp_timeout_s: u64,
    /// Established TCP idle timeout in seconds. Default 7440 (RFC 5382).
    pub tcp_established_timeout_s: u64,
    /// Transitory TCP idle timeout in seconds. Default 240 (RFC 5382).
    pub tcp_transitory_timeout_s: u64,
    /// ICMP echo idle timeout in seconds. Default 60 (RFC 5508).
    pub icmp_timeout_s: u64,
    /// `"sequential"` (default), `"random"` (per-session randomized
    /// port, RFC 6056 style), `"pba"` (port blocks of `port_block_size`
    /// per subscriber, logged as natEvent 16/17) or `"deterministic"`
    /// (RFC 7422; the mapping is logged once at start).
    pub port_allocation: PortAllocationName,
    /// Seed of the randomized allocator. Default 1.
    pub port_seed: u64,
    /// Ports per block with `"pba"`. Default 256.
    pub port_block_size: u16,
    /// Most blocks per subscriber with `"pba"`, 1..=16. Default 4.
    pub max_blocks_per_user: u16,
    /// Most sessions per subscriber; 0 (default) = no limit. Beyond it new
    /// sessions are dropped and natEvent 13 (maxEntriesPerUser) is logged.
    pub max_sessions_per_user: u32,
    /// With `"pba"` or `"deterministic"`: also log natEvent 4/5 per
    /// session. Default false.
    pub log_sessions_in_blocks: bool,
    /// At most one natEvent 3, 12 and 13 record each per this many
    /// milliseconds of packet time per worker. Default 1000.
    pub event_log_interval_ms: u64,
}

/// `[nat] port_allocation` values.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum PortAllocationName {
    /// Next-fit.
    #[default]
    Sequential,
    /// Randomized per session.
    Random,
    /// Port block allocation.
    Pba,
    /// Deterministic NAT (RFC 7422).
    Deterministic,
}

/// `[dataplane]`: workers and measurement switches.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DataplaneSection {
    /// Forwarding workers, 1..=[`MAX_WORKERS`]. Default 1. Each has its own
    /// session table, port allocator (a disjoint slice of the port range)
    /// and dplog ring.
    pub workers: usize,
    /// CPU of each worker, in order; missing entries are not pinned. With
    /// one worker and no list, `producer_cpu` is used.
    pub worker_cpus: Vec<usize>,
    /// Log sessions through dplog. `false` runs the NAT with records
    /// discarded (for measuring the cost of logging). Default true.
    pub logging: bool,
    /// Print a one-line live view to stderr every this many milliseconds;
    /// 0 (default) = off.
    pub live_stats_ms: u64,
    /// Synthetic input: generate every frame into memory before the clock
    /// starts, so the timed loop measures the NAT, not the generator.
    /// Default false.
    pub preload: bool,
    /// Capacity in batches (of up to 64 frames) of each dispatcher → worker
    /// ring (pcap input). Default 64.
    pub handoff_batches: usize,
    /// `[dataplane.dpdk_net_ring]` (`--dpdk` as the primary process): make
    /// the port a net_ring port over two named rings this process creates,
    /// so a peer process (`--proc-type=secondary`, same `--file-prefix`)
    /// wires itself to dplog-nat by looking them up. Default: none (port 0
    /// of the EAL arguments).
    pub dpdk_net_ring: Option<NetRingPort>,
}

/// `[dataplane.dpdk_net_ring]`: the rings of dplog-nat's own net_ring port
/// (`rte_eth_from_rings` over two `rte_ring`s of mbuf pointers). The peer
/// enqueues mbufs (with an Rx timestamp in the dynamic field, as a driver
/// would, or none: the wall clock is used) on `rx` and dequeues the
/// translated frames from `tx`; it owns what it dequeues. Names follow
/// `rte_ring_create`'s limit (at most 28 bytes).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct NetRingPort {
    /// Ring dplog-nat receives from (the peer is its one producer).
    pub rx: String,
    /// Ring dplog-nat transmits to (the peer is its one consumer).
    pub tx: String,
    /// Slots per ring, a power of two. Default 4096.
    pub size: u32,
}

impl Default for NetRingPort {
    fn default() -> Self {
        Self {
            rx: "dplog_nat_rx".into(),
            tx: "dplog_nat_tx".into(),
            size: 4096,
        }
    }
}

impl Default for DataplaneSection {
    fn default() -> Self {
        Self {
            workers: 1,
            worker_cpus: Vec::new(),
            logging: true,
            live_stats_ms: 0,
            preload: false,
            handoff_batches: 64,
            dpdk_net_ring: None,
        }
    }
}

impl Default for NatSection {
    fn default() -> Self {
        let t = NatTimeouts::default();
        Self {
            inside: ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]
                .iter()
                .map(|s| s.parse().expect("static prefix"))
                .collect(),
            pool: "198.51.100.0/28".parse().expect("static prefix"),
            vrf_id: 0,
            udp_timeout_s: t.udp.as_secs(),
            tcp_established_timeout_s: t.tcp_established.as_secs(),
            tcp_transitory_timeout_s: t.tcp_transitory.as_secs(),
            icmp_timeout_s: t.icmp.as_secs(),
            port_allocation: PortAllocationName::Sequential,
            port_seed: 1,
            port_block_size: 256,
            max_blocks_per_user: 4,
            max_sessions_per_user: 0,
            log_sessions_in_blocks: false,
            event_log_interval_ms: 1000,
        }
    }
}

/// `[input]`: where packets come from.
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct InputSection {
    /// A pcap or pcapng file. Default: none, run the synthetic mix.
    pub pcap: Option<PathBuf>,
    /// Stop after this many packets of the capture (`--packets` with
    /// `--pcap`); 0 = the whole file. Default 0.
    pub max_packets: u64,
}

/// The whole `dplog-nat` configuration file.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AppConfig {
    /// `[ring]`: see [`dplog::config::RingConfig`].
    pub ring: RingConfig,
    /// `[format]`: `type = "text" | "json"`.
    pub format: FormatConfig,
    /// `[sink]`: `type = "file"`, `path`.
    pub sink: SinkConfig,
    /// `[nat]`.
    pub nat: NatSection,
    /// `[input]`.
    pub input: InputSection,
    /// `[synthetic]`.
    pub synthetic: SyntheticConfig,
    /// CPU to pin the producer (forwarding) thread to. Default: not pinned.
    pub producer_cpu: Option<usize>,
    /// `[dataplane]`.
    pub dataplane: DataplaneSection,
    /// `[metrics]`: the Prometheus listener, see
    /// [`dplog::config::MetricsConfig`] (`--metrics-listen`).
    pub metrics: MetricsConfig,
}

/// Set (by a SIGINT/SIGTERM handler, or by [`request_stop`]) to end the
/// input early: workers stop taking packets, every live session is deleted
/// and logged, the logger drains and the summary is printed as usual.
/// Relaxed is enough: it is a one-way flag polled per packet, and the
/// workers' thread joins order everything that follows.
static STOP: AtomicBool = AtomicBool::new(false);

/// When the first stop request was made (for the bounded waits after it).
static STOPPED_AT: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

/// Asks a running [`run`] to stop taking input and finish cleanly.
pub fn request_stop() {
    STOPPED_AT.get_or_init(Instant::now);
    STOP.store(true, Ordering::Relaxed);
}

/// How long ago the stop was requested; `None` without a stop request.
pub fn stopped_for() -> Option<Duration> {
    STOPPED_AT.get().map(Instant::elapsed)
}

/// The flag [`request_stop`] sets, for a signal handler to set directly
/// (`signal_hook::flag::register` takes an `Arc<AtomicBool>`; use
/// [`stop_flag_watcher`] with it).
pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Copies `flag` into the stop flag every 50 ms on a small thread of its
/// own, so a signal handler that can only set an `Arc<AtomicBool>` stops
/// the run. The thread ends with the process.
pub fn stop_flag_watcher(flag: std::sync::Arc<AtomicBool>) {
    std::thread::Builder::new()
        .name("dplog-nat-signals".into())
        .spawn(move || loop {
            // Relaxed: a one-way flag, see `STOP`.
            if flag.load(Ordering::Relaxed) {
                request_stop();
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        })
        .ok();
}

/// The summary's `input`: `synthetic`, `pcap PATH`, `pcap PATH (first N
/// packets)` with `--packets N` (`[input] max_packets`), or `pcap PATH
/// (--packets N, capture had M)` when the whole capture (`read`, read to its
/// end: `complete`, no stop request) held fewer than N.
pub fn input_name(cfg: &AppConfig, read: &InputStats, complete: bool) -> String {
    let max = cfg.input.max_packets;
    match &cfg.input.pcap {
        Some(path) if max > 0 && read.packets < max && complete && !stop_requested() => format!(
            "pcap {} (--packets {max}, capture had {})",
            path.display(),
            read.packets
        ),
        Some(path) if max > 0 => format!("pcap {} (first {max} packets)", path.display()),
        Some(path) => format!("pcap {}", path.display()),
        None => "synthetic".to_string(),
    }
}

/// Whether a SIGHUP makes some sink of `sink` reopen its file: a file sink
/// (alone or in a `[[sink]]` set) with `reopen_on_sighup = true`.
pub fn reopens_on_sighup(sink: &SinkConfig) -> bool {
    match sink {
        SinkConfig::File(f) => f.reopen_on_sighup,
        SinkConfig::Set(v) => v.iter().any(reopens_on_sighup),
        _ => false,
    }
}

/// The line [`sighup_watcher`] writes to stderr for a SIGHUP that no sink
/// reopens on.
pub const SIGHUP_NOTE: &str = "dplog-nat: SIGHUP received; nothing reopened (no file sink sets reopen_on_sighup = true, as an external logrotate needs); carrying on";

/// Watches `flag` (set by a SIGHUP handler) every 50 ms on a small thread
/// of its own. When `reopens` (see [`reopens_on_sighup`]) the file sink
/// handles the signal and nothing is written; otherwise each SIGHUP gives
/// one [`SIGHUP_NOTE`] line on stderr (write errors ignored), and the run
/// carries on either way. The thread ends with the process.
pub fn sighup_watcher(flag: std::sync::Arc<AtomicBool>, reopens: bool) {
    std::thread::Builder::new()
        .name("dplog-nat-sighup".into())
        .spawn(move || loop {
            // Relaxed: a flag with no data behind it (as `STOP`).
            if flag.swap(false, Ordering::Relaxed) && !reopens {
                crate::diag!("{SIGHUP_NOTE}");
            }
            std::thread::sleep(Duration::from_millis(50));
        })
        .ok();
}

/// The CPUs this process may run on (its affinity mask, read from
/// `Cpus_allowed_list` in `/proc/self/status`, see proc(5)), ascending.
/// Falls back to `0..available_parallelism` if that cannot be read.
pub fn allowed_cpus() -> Vec<usize> {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .and_then(|l| parse_cpu_list(l.trim()))
        })
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| (0..dplog::affinity::available_cpus()).collect())
}

/// Parses a kernel CPU list such as `0-3,6` (proc(5), cpuset(7)); `None`
/// if malformed.
pub fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b - a > 1 << 16 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// Parses a CPU list as `--worker-cpus` takes it: comma-separated CPUs
/// and ranges (`0-1`, `2,0`, `0-1,4-5`, the shape [`cpu_list`] prints),
/// expanded in the order given (worker `i` gets the `i`th CPU) and not
/// deduplicated (a CPU listed twice is refused later, by
/// [`check_worker_cpus`], with a clear error). Errors: an empty list, an
/// empty item, a non-number, a descending range, or a range of more than
/// 65 536 CPUs.
pub fn parse_cpu_sequence(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    let num = |t: &str| {
        t.trim()
            .parse::<usize>()
            .map_err(|_| format!("'{}' is not a CPU number", t.trim()))
    };
    if s.trim().is_empty() {
        return Err("empty CPU list (give CPUs like 0,1 or 0-1)".into());
    }
    for part in s.split(',') {
        if part.trim().is_empty() {
            return Err(format!("empty item in CPU list '{s}'"));
        }
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if b < a {
                    return Err(format!("CPU range '{}' runs backwards", part.trim()));
                }
                if b - a > 1 << 16 {
                    return Err(format!("CPU range '{}' is too long", part.trim()));
                }
                out.extend(a..=b);
            }
            None => out.push(num(part)?),
        }
    }
    Ok(out)
}

/// `cpus` as ranges, e.g. `0-3,6`.
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

/// Checks that `cpu`, set by `what` (a flag or a config key), is one this
/// process may run on.
///
/// Errors: a message naming `what`, the CPU and the CPUs available, e.g.
/// `--worker-cpus: CPU 99 is not available; this process may run on CPUs 0-1`.
pub fn check_cpu(what: &str, cpu: usize) -> Result<(), String> {
    let allowed = allowed_cpus();
    if allowed.contains(&cpu) {
        Ok(())
    } else {
        Err(format!(
            "{what}: CPU {cpu} is not available; this process may run on CPUs {}",
            cpu_list(&allowed)
        ))
    }
}

/// Default output file of `dplog-nat`.
pub const DEFAULT_OUTPUT: &str = "dplog-nat.log";

impl Default for AppConfig {
    fn default() -> Self {
        Self {
            ring: RingConfig::default(),
            format: FormatConfig::default(),
            sink: SinkConfig::File(FileSinkConfig {
                path: PathBuf::from(DEFAULT_OUTPUT),
                ..Default::default()
            }),
            nat: NatSection::default(),
            input: InputSection::default(),
            synthetic: SyntheticConfig::default(),
            producer_cpu: None,
            dataplane: DataplaneSection::default(),
            metrics: MetricsConfig::default(),
        }
    }
}

impl AppConfig {
    /// Parses a TOML document.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        dplog::config::parse_toml(text)
    }

    /// Reads a TOML file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, ConfigError> {
        dplog::config::read_toml(path)
    }

    /// The logging part of the configuration.
    pub fn log_config(&self) -> LogConfig {
        LogConfig {
            ring: self.ring.clone(),
            format: self.format.clone(),
            sink: self.sink.clone(),
            metrics: self.metrics.clone(),
        }
    }

    /// The NAT engine configuration. With the synthetic mix, the inside
    /// prefixes always include its subscribers' 10.0.0.0/8 (with
    /// `"deterministic"`, the inside is only the smallest prefix holding
    /// the subscribers).
    pub fn nat_config(&self) -> NatConfig {
        let mut inside = self.nat.inside.clone();
        if self.input.pcap.is_none() {
            let mut syn: Ipv4Net = SYNTHETIC_INSIDE.parse().expect("static prefix");
            if self.nat.port_allocation == PortAllocationName::Deterministic {
                // Deterministic NAT maps (and logs) every inside address:
                // with the synthetic mix the inside is just the prefix of
                // its subscribers (10.0.0.1 upwards).
                let n = u64::from(self.synthetic.subscribers) + 1;
                let bits = 64 - (n.max(2) - 1).leading_zeros();
                let len = 32u8.saturating_sub(bits as u8).max(8);
                syn = Ipv4Net::new(syn.network(), len).expect("prefix length <= 32");
                inside.clear();
            }
            if !inside.iter().any(|p| p.contains(&syn)) {
                inside.push(syn);
            }
        }
        let mut c = NatConfig::new(inside, self.nat.pool);
        c.vrf_id = self.nat.vrf_id;
        c.timeouts = NatTimeouts {
            udp: Duration::from_secs(self.nat.udp_timeout_s),
            tcp_established: Duration::from_secs(self.nat.tcp_established_timeout_s),
            tcp_transitory: Duration::from_secs(self.nat.tcp_transitory_timeout_s),
            icmp: Duration::from_secs(self.nat.icmp_timeout_s),
        };
        c.port_allocation = match self.nat.port_allocation {
            PortAllocationName::Sequential => PortAllocation::Sequential,
            PortAllocationName::Random => PortAllocation::Random {
                seed: self.nat.port_seed,
            },
            PortAllocationName::Pba => PortAllocation::PortBlock {
                size: self.nat.port_block_size,
                max_blocks: self.nat.max_blocks_per_user,
            },
            PortAllocationName::Deterministic => PortAllocation::Deterministic,
        };
        c.max_sessions_per_user = self.nat.max_sessions_per_user;
        c.log_sessions_in_blocks = self.nat.log_sessions_in_blocks;
        c.event_log_interval = Duration::from_millis(self.nat.event_log_interval_ms);
        c
    }

    /// Starts the consumer for every NAT record type: one ring per worker
    /// carries session, port block, exhaustion and quota records as
    /// [`NatRecord`] slots, formatted by the configured `[format]`.
    ///
    /// Errors: [`RunError::Config`] for a bad format, sink or ring setting.
    ///
    /// Every setting is checked before the sink opens, so a refused
    /// configuration creates no file. The sink opens on a thread of its
    /// own: `open(2)` may block (a FIFO without a reader, a stuck NFS
    /// server), and after a stop signal the wait ends within `[ring]
    /// shutdown_timeout_ms` with [`RunError::Stopped`].
    pub fn start_logger(&self) -> Result<Logger<NatRecord>, RunError> {
        let lc = self.log_config();
        lc.check_ring(std::mem::size_of::<NatRecord>())
            .map_err(RunError::Config)?;
        let formatter = lc.format.nat_formatter().map_err(RunError::Config)?;
        let sink = self.open_sink()?;
        Logger::start(lc.logger_config(), formatter, sink)
            .map_err(|e| RunError::Config(ConfigError::Logger(e)))
    }

    /// Opens the configured sink on a thread of its own and waits for it:
    /// as long as it takes without a stop request, at most `[ring]
    /// shutdown_timeout_ms` after one (the thread is then left blocked, and
    /// ends with the process).
    fn open_sink(&self) -> Result<dplog::sinks::BoxSink, RunError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let (sink, format) = (self.sink.clone(), self.format.clone());
        std::thread::Builder::new()
            .name("dplog-nat-open".into())
            .spawn(move || {
                let _ = tx.send(sink.build_for(&format));
            })
            .map_err(|e| RunError::Config(ConfigError::Sink(e)))?;
        let timeout = Duration::from_millis(self.ring.shutdown_timeout_ms);
        loop {
            match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(r) => return r.map_err(|e| RunError::Config(ConfigError::Sink(e))),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(RunError::Config(ConfigError::Sink(std::io::Error::other(
                        "the thread opening the sink ended without a result",
                    ))))
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            }
            if stopped_for().is_some_and(|d| d >= timeout) {
                let mut s = make_summary(
                    self,
                    &NatStats::default(),
                    Stats::default(),
                    input_name(self, &InputStats::default(), false),
                    &InputStats::default(),
                    0.0,
                    None,
                );
                s.logging = true;
                return Err(RunError::Stopped(
                    Box::new(s),
                    format!(
                        "stopped by a signal while the sink was opening: {} did not open within [ring] \
                         shutdown_timeout_ms = {} ms of the stop (open(2) blocks: a FIFO without a reader? \
                         a stuck NFS server?); no packet was read and nothing was logged",
                        self.sink.describe_each().join(", "),
                        self.ring.shutdown_timeout_ms
                    ),
                ));
            }
        }
    }

    /// A worker's [`RingLog`] over its dplog producer (`None`: logging
    /// off), waiting on a full ring (`block` policy) with the configured
    /// `[ring] block_spins` pause-spins before it yields, as dplog's own
    /// blocking push does, and after a stop request for as long as the
    /// consumer makes progress, giving up after `[ring] shutdown_timeout_ms`
    /// without any (see [`RingLog`]).
    pub fn ring_log<'a>(&self, producer: Option<&'a mut LogProducer<NatRecord>>) -> RingLog<'a> {
        RingLog::new(producer)
            .with_block_spins(self.ring.block_spins)
            .with_stop_timeout(Duration::from_millis(self.ring.shutdown_timeout_ms))
    }

    /// The synthetic generator configuration (`[synthetic]`, every
    /// subscriber: no shard).
    pub fn synthetic_config(&self) -> SyntheticConfig {
        SyntheticConfig {
            shard: None,
            ..self.synthetic.clone()
        }
    }

    /// The output path, for the summary.
    pub fn output_path(&self) -> Option<&std::path::Path> {
        match &self.sink {
            SinkConfig::File(f) => Some(&f.path),
            _ => None,
        }
    }
}

/// Why a run could not start or finish.
#[derive(Debug)]
pub enum RunError {
    /// Bad configuration (file, ring, sink).
    Config(ConfigError),
    /// Bad NAT settings.
    Nat(NatError),
    /// Bad synthetic settings.
    Synthetic(SyntheticError),
    /// Bad `[dataplane]` settings (worker count, port range too small to
    /// split, counters for another worker count).
    Dataplane(String),
    /// The capture could not be read to its end. Everything read before the
    /// failure was translated and logged; the summary says how much.
    Input(Box<Summary>, Box<InputError>),
    /// The logger failed at shutdown (e.g. the sink's fsync), or its sink
    /// made no progress for `[ring] shutdown_timeout_ms` (plus a second) of
    /// the shutdown (blocked in `write(2)`), when what it held is counted
    /// in `dropped_shutdown`. The summary's counters say what was written.
    Shutdown(Box<Summary>, String),
    /// A stop signal came while the sink was still opening and it did not
    /// open within `[ring] shutdown_timeout_ms` (`open(2)` blocked, e.g. a
    /// FIFO without a reader): nothing was read or logged.
    Stopped(Box<Summary>, String),
}

impl core::fmt::Display for RunError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RunError::Config(e) => write!(f, "{e}"),
            RunError::Nat(e) => write!(f, "bad [nat] settings: {e}"),
            RunError::Synthetic(e) => write!(f, "bad [synthetic] settings: {e}"),
            RunError::Dataplane(e) => write!(f, "bad [dataplane] settings: {e}"),
            RunError::Input(_, e) => write!(f, "{e}"),
            RunError::Shutdown(_, e) => write!(f, "logger shutdown failed: {e}"),
            RunError::Stopped(_, e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RunError {}

/// Logging counters of a run, from [`dplog::Stats`].
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct RecordSummary {
    /// Records handed to dplog (enqueued + dropped).
    pub produced: u64,
    /// Records copied into the ring.
    pub enqueued: u64,
    /// Records dropped by the producer, every reason (ring full under
    /// `drop_newest`, below priority under `degrade`, consumer gone).
    pub dropped: u64,
    /// Of `dropped`: records refused under `degrade`.
    pub dropped_degraded: u64,
    /// Records the consumer read.
    pub dequeued: u64,
    /// Records the sink accepted.
    pub written: u64,
    /// Bytes the sink accepted.
    pub written_bytes: u64,
    /// Records lost to permanent sink errors.
    pub dropped_sink: u64,
    /// Records the sink had not delivered when the shutdown timeout expired.
    pub dropped_shutdown: u64,
    /// Records the workers did not log because, after a stop signal, the
    /// ring stayed full with no consumer progress for `[ring]
    /// shutdown_timeout_ms` (`block` policy, the sink not taking records):
    /// never handed to dplog, so not in `produced`.
    pub dropped_at_stop: u64,
    /// Sink errors.
    pub sink_errors: u64,
    /// The ring's high-water mark, in records.
    pub ring_high_water: u64,
}

impl From<Stats> for RecordSummary {
    fn from(s: Stats) -> Self {
        Self {
            produced: s.produced,
            enqueued: s.enqueued,
            dropped: s.dropped(),
            dropped_degraded: s.dropped_degraded,
            dequeued: s.dequeued,
            written: s.written_records,
            written_bytes: s.written_bytes,
            dropped_sink: s.dropped_sink,
            dropped_shutdown: s.dropped_shutdown,
            dropped_at_stop: 0,
            sink_errors: s.sink_errors,
            ring_high_water: s.high_water,
        }
    }
}

/// What a run did; printed at exit as text or JSON.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    /// `pcap FILE` or `synthetic`.
    pub input: String,
    /// Packets read from the input.
    pub packets: u64,
    /// Packets per verdict, verdicts with a zero count left out.
    pub verdicts: Vec<(String, u64)>,
    /// Packets per verdict with every cross-worker hairpin handoff
    /// resolved to its outcome at the owner ([`NatStats::outcomes`]:
    /// `hairpin_handoff` becomes `hairpinned`, `hairpin_no_mapping`, ...),
    /// zero counts left out: the same for any worker count.
    pub outcomes: Vec<(String, u64)>,
    /// Sessions created (natEvent 4).
    pub sessions_created: u64,
    /// Sessions deleted (natEvent 5).
    pub sessions_deleted: u64,
    /// Largest number of sessions alive at once.
    pub peak_sessions: u64,
    /// Records the NAT handed to the logger.
    pub records_logged: u64,
    /// dplog counters.
    pub records: RecordSummary,
    /// Ring capacity in records.
    pub ring_capacity: usize,
    /// `block` or `drop`.
    pub backpressure: String,
    /// Output format name.
    pub format: String,
    /// Output path.
    pub output: Option<PathBuf>,
    /// Each configured sink's description (`file PATH`, `mmap DIR`,
    /// `syslog udp ADDR`, `kafka topic T at BROKERS`), in `[[sink]]` order.
    pub sinks: Vec<String>,
    /// The sinks' own counters by name ([`dplog::SinkCounters`]:
    /// `syslog.too_large`, `file.rotations`, ...; in a `[[sink]]` set
    /// prefixed `sink0.`, ...), final values after the logger's shutdown;
    /// the text summary lists the nonzero ones.
    pub sink_counters: Vec<(String, u64)>,
    /// Wall time from the first packet to the logger's shutdown, seconds.
    pub elapsed_s: f64,
    /// Packets per second of wall time.
    pub packets_per_s: f64,
    /// Records written per second of wall time.
    pub records_per_s: f64,
    /// Capture records skipped, not handed to the NAT (no verdict), because
    /// their captured length exceeds their wire length (a corrupt record
    /// header; pcap and pcapng). Input packets = `packets` + the two
    /// `capture_skipped_*` counts.
    pub capture_skipped_bad_caplen: u64,
    /// pcapng packets skipped, not handed to the NAT (no verdict), because
    /// they name an interface no Interface Description Block of their
    /// section describes (no link type to parse them with); a Simple
    /// Packet Block before the section's first interface counts here too.
    pub capture_skipped_unknown_interface: u64,
    /// Packets the capture cut short of their wire length (snap length);
    /// translated when their headers were captured, else counted under
    /// the `snapped` verdict.
    pub capture_snapped: u64,
    /// The input error, if the capture could not be read to its end.
    pub input_error: Option<String>,
    /// The run was stopped early by SIGINT/SIGTERM ([`request_stop`]);
    /// every session was still deleted and its delete logged, unless the
    /// sink was stuck ([`RecordSummary::dropped_at_stop`] and the other
    /// losses say how many records were not; see
    /// [`Summary::interrupted_line`]).
    pub interrupted: bool,
    /// Number of workers.
    pub workers: usize,
    /// Per-worker figures, in worker order.
    pub per_worker: Vec<WorkerSummary>,
    /// True when logging was on.
    pub logging: bool,
    /// Records logged once at start (the deterministic NAT mapping,
    /// natEvent 16 per inside address); included in `records_logged`.
    pub config_records: u64,
    /// Port blocks allocated and released (natEvent 16/17), all workers.
    pub port_blocks: (u64, u64),
    /// Limit and exhaustion records (natEvent 3/12/13) logged, and those
    /// suppressed by the rate limit.
    pub limit_events: (u64, u64),
    /// Two-stage hairpinning across workers: packets the owners of their
    /// destination ports received from the senders' workers (each counted
    /// there as the `hairpin_handoff` verdict), delivered (destination
    /// translated) and dropped (no mapping, or a later fragment whose first
    /// was not seen), all workers.
    pub hairpin_in: (u64, u64, u64),
}

/// One worker's figures in the [`Summary`].
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct WorkerSummary {
    /// Packets the worker processed.
    pub packets: u64,
    /// Of them, translated (out, in, matched fragments).
    pub translated: u64,
    /// Sessions the worker created.
    pub sessions_created: u64,
    /// The worker's peak of live sessions.
    pub peak_sessions: u64,
    /// Records the worker handed to dplog.
    pub records_logged: u64,
    /// Seconds spent in the packet loop (after any preload).
    pub busy_s: f64,
    /// Packets per second of busy time.
    pub packets_per_s: f64,
    /// Sessions created per second of busy time.
    pub sessions_per_s: f64,
}

impl WorkerSummary {
    /// The figures of a worker with counters `s` that spent `busy_s`
    /// seconds in its packet loop.
    pub fn of(s: &NatStats, busy_s: f64) -> Self {
        let rate = |x: u64| if busy_s > 0.0 { x as f64 / busy_s } else { 0.0 };
        WorkerSummary {
            packets: s.packets,
            translated: translated(s),
            sessions_created: s.sessions_created,
            peak_sessions: s.peak_sessions,
            records_logged: s.records_logged,
            busy_s,
            packets_per_s: rate(s.packets),
            sessions_per_s: rate(s.sessions_created),
        }
    }
}

impl Summary {
    /// Packets that got the verdict named `name` (0 if none).
    pub fn verdict(&self, name: &str) -> u64 {
        self.verdicts
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, c)| *c)
    }

    /// The human-readable summary printed at exit.
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let r = &self.records;
        let _ = writeln!(s, "dplog-nat summary");
        let _ = writeln!(s, "  input              {}", self.input);
        let _ = writeln!(s, "  packets            {}", self.packets);
        for (name, n) in &self.verdicts {
            let _ = writeln!(s, "    {name:<22} {n}");
        }
        let _ = writeln!(
            s,
            "  sessions           created {}  deleted {}  peak {}",
            self.sessions_created, self.sessions_deleted, self.peak_sessions
        );
        let _ = writeln!(
            s,
            "  records            produced {}  enqueued {}  dropped {}  written {}  ({} bytes)",
            r.produced, r.enqueued, r.dropped, r.written, r.written_bytes
        );
        if r.dropped_sink + r.dropped_shutdown + r.sink_errors > 0 {
            let _ = writeln!(
                s,
                "  sink errors        {}  records lost to them {}  undelivered at shutdown {}",
                r.sink_errors, r.dropped_sink, r.dropped_shutdown
            );
        }
        let nonzero: Vec<String> = self
            .sink_counters
            .iter()
            .filter(|(_, v)| *v != 0)
            .map(|(n, v)| format!("{n} {v}"))
            .collect();
        if !nonzero.is_empty() {
            let _ = writeln!(s, "  sink counters      {}", nonzero.join("  "));
        }
        if r.dropped_at_stop > 0 {
            let _ = writeln!(
                s,
                "  dropped at stop    {} {} not logged: after the stop signal the ring stayed full with no consumer progress for [ring] shutdown_timeout_ms (sink not taking records)",
                r.dropped_at_stop,
                plural(r.dropped_at_stop, "record", "records")
            );
        }
        let _ = writeln!(
            s,
            "  ring               {}, {}, high-water {}",
            dplog::runtime::ring_memory(self.ring_capacity, std::mem::size_of::<NatRecord>()),
            self.backpressure,
            r.ring_high_water
        );
        let _ = writeln!(
            s,
            "  output             {} ({})",
            self.output
                .as_ref()
                .map_or(self.sinks.join(", "), |p| p.display().to_string()),
            self.format
        );
        let _ = writeln!(
            s,
            "  rate               {:.0} packets/s, {:.0} log records/s over {:.3} s",
            self.packets_per_s, self.records_per_s, self.elapsed_s
        );
        for (i, w) in self.per_worker.iter().enumerate() {
            let _ = writeln!(
                s,
                "  worker {i:<11} {} packets, {} translated, {} sessions; {:.0} packets/s, {:.0} sessions/s over {:.3} s busy",
                w.packets, w.translated, w.sessions_created, w.packets_per_s, w.sessions_per_s, w.busy_s
            );
        }
        if self.port_blocks.0 > 0 || self.config_records > 0 {
            let _ = writeln!(
                s,
                "  port blocks        allocated {}  released {}  mapping records at start {}",
                self.port_blocks.0, self.port_blocks.1, self.config_records
            );
        }
        if self.limit_events.0 + self.limit_events.1 > 0 {
            let _ = writeln!(
                s,
                "  limit events       logged {}  rate-limited {}",
                self.limit_events.0, self.limit_events.1
            );
        }
        if self.hairpin_in.0 > 0 {
            let _ = writeln!(
                s,
                "  hairpin handoff    received {}  delivered {}  dropped {}",
                self.hairpin_in.0, self.hairpin_in.1, self.hairpin_in.2
            );
        }
        if !self.logging {
            let _ = writeln!(s, "  logging            off (records discarded)");
        }
        let skipped = self.capture_skipped_bad_caplen + self.capture_skipped_unknown_interface;
        if skipped > 0 {
            let _ = writeln!(
                s,
                "  skipped            {skipped} capture {} not translated: {} captured longer than on the wire (bad_caplen), {} for an undescribed pcapng interface (unknown_interface)",
                plural(skipped, "record", "records"),
                self.capture_skipped_bad_caplen,
                self.capture_skipped_unknown_interface
            );
        }
        if self.capture_snapped > 0 {
            let _ = writeln!(
                s,
                "  snapped            {} packets cut by the snap length; translated when their headers were captured, else counted as snapped",
                self.capture_snapped
            );
        }
        if let Some(e) = &self.input_error {
            let _ = writeln!(s, "  input error        {e}");
        }
        if let Some(line) = self.interrupted_line() {
            let _ = writeln!(s, "  interrupted        {line}");
        }
        s
    }

    /// The text summary's `interrupted` line (without its label), `None`
    /// when the run was not stopped by a signal. It says the live
    /// sessions were deleted (always true: the NAT deletes every one at
    /// the stop) and logged only when no record was lost; otherwise how
    /// many were not: not logged at the stop (the sink stuck, the ring full,
    /// [`RecordSummary::dropped_at_stop`]), not delivered by the sink, or
    /// dropped by the ring's backpressure policy.
    pub fn interrupted_line(&self) -> Option<String> {
        if !self.interrupted {
            return None;
        }
        let r = &self.records;
        let mut line = String::from("input stopped early by a signal; live sessions were deleted");
        let undelivered = r.dropped_sink + r.dropped_shutdown;
        if r.dropped_at_stop + undelivered + r.dropped == 0 {
            line.push_str(" and logged");
            return Some(line);
        }
        if r.dropped_at_stop > 0 {
            line.push_str(&format!(
                "; {} {} not logged at the stop (sink stuck)",
                r.dropped_at_stop,
                plural(r.dropped_at_stop, "record was", "records were")
            ));
        }
        if undelivered > 0 {
            line.push_str(&format!(
                "; {} logged {} not delivered by the sink",
                undelivered,
                plural(undelivered, "record was", "records were")
            ));
        }
        if r.dropped > 0 {
            line.push_str(&format!(
                "; {} {} dropped by the ring's backpressure policy",
                r.dropped,
                plural(r.dropped, "record was", "records were")
            ));
        }
        Some(line)
    }
}

/// `one` when `n` is 1, else `many`: "1 record", "2 records".
pub fn plural(n: u64, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 {
        one
    } else {
        many
    }
}

/// Checks every CPU the configuration pins a thread to (`producer_cpu`,
/// `[dataplane] worker_cpus`, `[ring] consumer_cpu`) with [`check_cpu`].
///
/// Errors: [`RunError::Dataplane`] naming the key, the CPU and the CPUs
/// available.
pub fn check_cpus(cfg: &AppConfig) -> Result<(), RunError> {
    if let Some(c) = cfg.producer_cpu {
        check_cpu("producer_cpu", c).map_err(RunError::Dataplane)?;
    }
    for &c in &cfg.dataplane.worker_cpus {
        check_cpu("worker_cpus", c).map_err(RunError::Dataplane)?;
    }
    check_worker_cpus(
        "worker_cpus",
        &cfg.dataplane.worker_cpus,
        cfg.dataplane.workers,
    )
    .map_err(RunError::Dataplane)?;
    if let Some(c) = cfg.ring.consumer_cpu {
        check_cpu("[ring] consumer_cpu", c).map_err(RunError::Dataplane)?;
    }
    Ok(())
}

/// Checks a worker CPU list (`what` names the flag or key) against the
/// worker count: empty (workers not pinned) or exactly one CPU per worker,
/// no CPU twice (two workers pinned to one CPU share it and defeat the
/// pinning).
///
/// Errors: a message naming `what` and the counts, or the repeated CPU.
pub fn check_worker_cpus(what: &str, cpus: &[usize], workers: usize) -> Result<(), String> {
    if !cpus.is_empty() && cpus.len() != workers {
        let plural = |n: usize, noun: &str| format!("{n} {noun}{}", if n == 1 { "" } else { "s" });
        return Err(format!(
            "{what}: {} for {}; give one CPU per worker (or none)",
            plural(cpus.len(), "CPU"),
            plural(workers, "worker")
        ));
    }
    for (i, c) in cpus.iter().enumerate() {
        if cpus[..i].contains(c) {
            return Err(format!(
                "{what}: CPU {c} is listed twice; each worker needs a CPU of its own"
            ));
        }
    }
    Ok(())
}

/// The summary of a run that stopped at its input before anything was
/// started (no logger, so no log file): every counter zero, the error in
/// `input_error`.
fn input_failed(cfg: &AppConfig, e: InputError) -> RunError {
    let name = match &cfg.input.pcap {
        Some(path) => format!("pcap {}", path.display()),
        None => "synthetic".to_string(),
    };
    let mut s = make_summary(
        cfg,
        &NatStats::default(),
        Stats::default(),
        name,
        &InputStats::default(),
        0.0,
        Some(e.to_string()),
    );
    s.logging = cfg.dataplane.logging;
    RunError::Input(Box::new(s), Box::new(e))
}

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
    let logger = if cfg.dataplane.logging {
        let l = cfg.start_logger()?;
        *metrics = cfg.metrics.start(&l).map_err(RunError::Config)?;
        if let Some(m) = metrics.as_ref() {
            crate::diag!("dplog-nat: metrics at http://{}/metrics", m.local_addr());
        }
        Some(l)
    } else {
        None
    };
    // Workers publish at least every PUBLISH_BURSTS rx bursts
    // (RingLog::end_burst), and at once after NAT_BURST pending records
    // unless `[ring] publish_every` says otherwise.
    let publish_every = cfg.log_config().ring.publish_every.unwrap_or(NAT_BURST);
    let mut producers = Vec::with_capacity(n);
    for _ in 0..n {
        producers.push(match &logger {
            Some(l) => {
                let mut p = l
                    .producer()
                    .map_err(|e| RunError::Config(ConfigError::Logger(e)))?;
                p.set_publish_every(publish_every);
                Some(p)
            }
            None => None,
        });
    }
    let tallies: std::sync::Arc<Vec<SessionTally>> =
        std::sync::Arc::new((0..n).map(|_| SessionTally::default()).collect());
    if let Some(l) = &logger {
        crate::signals::watch(crate::signals::LossView {
            stats: l.snapshot_source(),
            sessions: tallies.clone(),
        });
    }
    // Deterministic NAT: the whole mapping, once, at configuration time.
    let mut config_records = 0u64;
    if let Some(first) = nats.first() {
        let mut p0 = producers.first_mut().and_then(|p| p.as_mut());
        config_records = first.deterministic_mapping(wall_clock_ns(), |r| {
            if let Some(p) = p0.as_mut() {
                p.log(r.into());
            }
        });
        if let Some(p) = p0 {
            p.flush();
        }
    }
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

/// The memory the system can give without swapping, in bytes
/// (`MemAvailable` in `/proc/meminfo`, see proc(5)); `None` if unknown.
pub fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// Checks that the rings of `workers` workers, `capacity` slots each, fit
/// in `available` bytes of memory (unchecked when `None`): every ring's
/// slots are allocated and touched at start, so rings larger than the
/// memory would end in the OOM killer, not an error.
///
/// Errors: [`RunError::Config`] naming `[ring] capacity`, the memory per
/// ring, in all, and the memory available.
pub fn check_ring_memory(
    capacity: usize,
    workers: usize,
    available: Option<u64>,
) -> Result<(), RunError> {
    let slot = std::mem::size_of::<NatRecord>();
    let total = capacity as u128 * slot as u128 * workers as u128;
    match available {
        Some(avail) if total > u128::from(avail) => Err(RunError::Config(ConfigError::Parse(format!(
            "[ring] capacity = {} x {workers} {} = {} of rings, more than the {} of memory available \
             (MemAvailable in /proc/meminfo); give a smaller capacity",
            dplog::runtime::ring_memory(capacity, slot),
            plural(workers as u64, "worker", "workers"),
            dplog::runtime::human_bytes(total),
            dplog::runtime::human_bytes(u128::from(avail))
        )))),
        _ => Ok(()),
    }
}

/// Extra wait, past `[ring] shutdown_timeout_ms` without progress, before
/// [`shutdown_bounded`] gives up on the consumer: its own shutdown deadline
/// is `shutdown_timeout_ms`, and it needs a moment to report after it.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// Shuts `logger` down on a thread of its own and waits for it while its
/// consumer makes progress (reads, writes, drops or sink errors move);
/// gives up once nothing has moved for `timeout` plus [`SHUTDOWN_GRACE`]:
/// the consumer is blocked in the sink (`write(2)` on a FIFO nobody reads,
/// a stuck NFS server). Then every record not yet written or dropped is
/// counted in `dropped_shutdown` (part of the batch the sink is blocked
/// on may still reach the output), the error says so, and the consumer
/// thread is left behind, to end with the process.
///
/// Returns the final counters and the shutdown error, if any.
pub fn shutdown_bounded(logger: Logger<NatRecord>, timeout: Duration) -> (Stats, Option<String>) {
    use std::sync::mpsc::RecvTimeoutError;
    let source = logger.snapshot_source();
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("dplog-nat-shutdown".into())
        .spawn(move || {
            let _ = tx.send(logger.shutdown());
        });
    if let Err(e) = spawned {
        // The logger went with the closure; its drop shut it down.
        return (
            source.stats(),
            Some(format!("cannot spawn the shutdown thread: {e}")),
        );
    }
    let moved = |s: &Stats| {
        (
            s.dequeued,
            s.written_records,
            s.dropped_sink,
            s.dropped_shutdown,
            s.sink_pending,
            s.sink_errors,
        )
    };
    let mut last = moved(&source.stats());
    let mut since = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(Ok(s)) => return (s, None),
            Ok(Err((s, e))) => return (s, Some(e.to_string())),
            Err(RecvTimeoutError::Disconnected) => {
                return (source.stats(), Some("the shutdown thread panicked".into()))
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
        let mut s = source.stats();
        if moved(&s) != last {
            last = moved(&s);
            since = Instant::now();
        } else if since.elapsed() >= timeout + SHUTDOWN_GRACE {
            let undelivered = s.in_flight();
            s.dropped_shutdown += undelivered;
            s.sink_pending = 0;
            return (
                s,
                Some(format!(
                    "the sink made no progress for [ring] shutdown_timeout_ms = {} ms (+{} s) of the shutdown \
                     (blocked in open(2) or write(2)? a FIFO nobody reads, a stuck NFS server); its {undelivered} \
                     undelivered {} counted in dropped_shutdown; not waiting for it",
                    timeout.as_millis(),
                    SHUTDOWN_GRACE.as_secs(),
                    plural(undelivered, "record is", "records are")
                )),
            );
        }
    }
}

fn pin(cpu: Option<usize>) {
    if let Some(cpu) = cpu {
        // Best effort, like the consumer's pinning.
        let _ = dplog::affinity::pin_current_thread(cpu);
    }
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

/// Publish counters every this many packets.
const PUBLISH_EVERY: u64 = (BATCH_PACKETS as u64) * 16;

type Recs = Option<LogProducer<NatRecord>>;

/// Nanoseconds since the Unix epoch by the wall clock (0 if before it).
pub fn wall_clock_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn handoff_worker(
    cfg: &AppConfig,
    mut nat: Nat44,
    mut producer: Recs,
    // The worker's published counters and its session tally.
    (counters, tally): (&WorkerCounters, Option<&SessionTally>),
    mut rx: rtrb::Consumer<Handoff>,
    mut ret: rtrb::Producer<Batch>,
    mut links: HairpinLinks,
) -> (NatStats, u64, u64) {
    let mut log = cfg.ring_log(producer.as_mut()).with_tally(tally);
    let t0 = Instant::now();
    let mut since = 0u64;
    loop {
        // Stage two of hairpins other workers handed over.
        links.drain(&mut nat);
        match rx.pop() {
            Ok(Handoff::Batch(mut b)) => {
                let Batch {
                    frames,
                    data,
                    wire_lens,
                } = &mut b;
                for (i, &(ts, lt, start, end)) in frames.iter().enumerate() {
                    if let Some(f) = data.get_mut(start as usize..end as usize) {
                        // A frame cut by the snap length is translated when
                        // its headers were captured, else counted `snapped`.
                        let wire = wire_lens.get(i).map_or(f.len(), |&w| w as usize);
                        let v = nat.process_snapped(ts, lt, f, wire, &mut log);
                        links.set_clock(ts);
                        if v == Verdict::HairpinHandoff {
                            links.stage(nat.handoff_target(), ts, lt, f, wire as u32);
                        }
                    }
                }
                // A ring publication every PUBLISH_BURSTS batches (rx
                // bursts), and one handoff per peer with hairpin packets.
                log.end_burst();
                links.send();
                since += frames.len() as u64;
                if since >= PUBLISH_EVERY {
                    since = 0;
                    counters.publish(nat.stats());
                    counters.set_busy_ns(t0.elapsed().as_nanos() as u64);
                }
                let _ = ret.push(b);
            }
            Ok(Handoff::End(ts)) => {
                links.close(&mut nat);
                nat.finish(ts, &mut log);
                break;
            }
            Err(_) => {
                if rx.is_abandoned() {
                    links.close(&mut nat);
                    let now = nat.now_ns();
                    nat.finish(now, &mut log);
                    break;
                }
                // Idle: what the last bursts logged goes out now.
                log.flush();
                std::thread::yield_now();
            }
        }
    }
    let busy = t0.elapsed().as_nanos() as u64;
    counters.publish(nat.stats());
    counters.set_busy_ns(busy);
    (nat.stats().clone(), busy, log.dropped_at_stop())
}

/// Frames of a synthetic worker: its own generator (one worker), or its
/// share of the stream preloaded into an arena of
/// [`SYNTHETIC_FRAME_LEN`]-byte slots with `(timestamp, length)` each, and
/// the time of the stream's last packet (when every worker ends).
enum SynSource {
    Live(Box<Synthetic>),
    Preloaded(Vec<u8>, Vec<(u64, u8)>, u64),
}

/// Per-worker preloaded frames: arena of fixed-stride slots and
/// `(timestamp, length)` of each.
type Shards = Vec<(Vec<u8>, Vec<(u64, u8)>)>;

/// Generates every remaining frame of `gen` into arenas (fixed stride),
/// one per worker of `sharder` (one in all without it), and the last
/// frame's timestamp.
fn preload_shards(gen: &mut Synthetic, sharder: Option<&Sharder>) -> (Shards, u64) {
    let n = sharder.map_or(1, Sharder::workers);
    let mut out: Shards = (0..n).map(|_| Default::default()).collect();
    let mut end = 0;
    while let Some((ts, f)) = gen.next_frame() {
        end = ts;
        let w = sharder.map_or(0, |s| s.worker_of(crate::packet::LINKTYPE_ETHERNET, f));
        let (arena, meta) = &mut out[w];
        let mut slot = [0u8; SYNTHETIC_FRAME_LEN];
        slot[..f.len()].copy_from_slice(f);
        arena.extend_from_slice(&slot);
        meta.push((ts, f.len() as u8));
    }
    (out, end)
}

fn synthetic_worker(
    cfg: &AppConfig,
    mut nat: Nat44,
    mut producer: Recs,
    counters: &WorkerCounters,
    tally: Option<&SessionTally>,
    src: SynSource,
) -> (NatStats, u64, u64) {
    let mut log = cfg.ring_log(producer.as_mut()).with_tally(tally);
    let t0 = Instant::now();
    let mut since = 0u64;
    // Called after every packet: a burst ends every NAT_BURST packets, as
    // a DPDK worker's rx burst does.
    let mut tick = |nat: &Nat44, log: &mut RingLog<'_>| {
        since += 1;
        if since % NAT_BURST as u64 == 0 {
            log.end_burst();
        }
        if since >= PUBLISH_EVERY {
            since = 0;
            counters.publish(nat.stats());
            counters.set_busy_ns(t0.elapsed().as_nanos() as u64);
        }
    };
    let mut end = 0;
    match src {
        SynSource::Preloaded(mut arena, meta, stream_end) => {
            end = stream_end;
            for (frame, &(ts, len)) in arena.chunks_exact_mut(SYNTHETIC_FRAME_LEN).zip(meta.iter())
            {
                if stop_requested() {
                    break;
                }
                nat.process(
                    ts,
                    crate::packet::LINKTYPE_ETHERNET,
                    &mut frame[..usize::from(len)],
                    &mut log,
                );
                tick(&nat, &mut log);
            }
        }
        SynSource::Live(mut gen) => {
            while let Some((ts, frame)) = gen.next_frame() {
                if stop_requested() {
                    break;
                }
                nat.process(ts, crate::packet::LINKTYPE_ETHERNET, frame, &mut log);
                tick(&nat, &mut log);
            }
        }
    }
    // Every worker ends at the stream's last packet (as `Handoff::End`),
    // or at its own last packet when stopped early.
    let end = if stop_requested() {
        nat.now_ns()
    } else {
        end.max(nat.now_ns())
    };
    nat.finish(end, &mut log);
    let busy = t0.elapsed().as_nanos() as u64;
    counters.publish(nat.stats());
    counters.set_busy_ns(busy);
    (nat.stats().clone(), busy, log.dropped_at_stop())
}

/// The live view: one line per interval on stderr until `done`.
fn monitor(
    live: &LiveCounters,
    logger: Option<&Logger<NatRecord>>,
    done: &AtomicBool,
    every: Duration,
    ring_capacity: usize,
) {
    let start = Instant::now();
    let mut prev = live.total();
    let mut prev_written = 0u64;
    let mut last = Instant::now();
    // Relaxed: see the store in `run_live`.
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50).min(every));
        if last.elapsed() < every {
            continue;
        }
        let dt = last.elapsed().as_secs_f64();
        last = Instant::now();
        let now = live.total();
        let log = logger.map(|l| l.stats()).unwrap_or_default();
        crate::diag!(
            "{}",
            live_line(
                start.elapsed().as_secs_f64(),
                dt,
                &prev,
                &now,
                prev_written,
                &log,
                ring_capacity * live.len()
            )
        );
        prev = now;
        prev_written = log.written_records;
    }
}

/// Formats one line of the live view from two snapshots `dt` seconds
/// apart: pps in and out, live sessions, log records written per second,
/// packets not translated by reason, and ring fill (records in rings /
/// total slots, high-water mark).
pub fn live_line(
    t_s: f64,
    dt: f64,
    prev: &NatStats,
    now: &NatStats,
    prev_written: u64,
    log: &Stats,
    ring_slots: usize,
) -> String {
    use std::fmt::Write;
    let per_s = |a: u64, b: u64| b.saturating_sub(a) as f64 / dt.max(1e-9);
    let mut s = format!(
        "[{t_s:7.1}s] in {:.0} pps  out {:.0} pps  sessions {}  log {:.0} rec/s  ring {}/{} (hw {})",
        per_s(prev.packets, now.packets),
        // Out: translated here, plus hairpins delivered for another worker
        // (their sender counted them as `hairpin_handoff`).
        per_s(
            translated(prev) + prev.hairpin_in_delivered,
            translated(now) + now.hairpin_in_delivered
        ),
        now.sessions_live,
        per_s(prev_written, log.written_records),
        log.enqueued.saturating_sub(log.dequeued),
        ring_slots,
        log.high_water,
    );
    let mut first = true;
    for v in Verdict::all() {
        // A handoff is not a drop: its owner delivers or drops it.
        if v.is_translated() || v == Verdict::HairpinHandoff {
            continue;
        }
        let d = now.count(v).saturating_sub(prev.count(v));
        if d > 0 {
            let _ = write!(
                s,
                "{}{}={d}",
                if first { "  drops " } else { " " },
                v.name()
            );
            first = false;
        }
    }
    let d = now
        .hairpin_in_dropped
        .saturating_sub(prev.hairpin_in_dropped);
    if d > 0 {
        let _ = write!(
            s,
            "{}hairpin_in_dropped={d}",
            if first { "  drops " } else { " " }
        );
    }
    if log.dropped_full > 0 {
        let _ = write!(s, "  log-dropped {}", log.dropped_full);
    }
    s
}

/// The summary of a single-engine run (used by the DPDK mode): `stats`
/// from the logger, `busy_s` the packet loop's time.
pub fn summary_of(
    cfg: &AppConfig,
    nat: &NatStats,
    stats: Stats,
    input: String,
    elapsed_s: f64,
    busy_s: f64,
) -> Summary {
    let mut s = make_summary(
        cfg,
        nat,
        stats,
        input,
        &InputStats::default(),
        elapsed_s,
        None,
    );
    s.logging = cfg.dataplane.logging;
    let rate = |x: u64| if busy_s > 0.0 { x as f64 / busy_s } else { 0.0 };
    s.per_worker = vec![WorkerSummary {
        packets: nat.packets,
        translated: translated(nat),
        sessions_created: nat.sessions_created,
        peak_sessions: nat.peak_sessions,
        records_logged: nat.records_logged,
        busy_s,
        packets_per_s: rate(nat.packets),
        sessions_per_s: rate(nat.sessions_created),
    }];
    s
}

fn make_summary(
    cfg: &AppConfig,
    nat: &NatStats,
    stats: Stats,
    input: String,
    input_stats: &InputStats,
    elapsed_s: f64,
    input_error: Option<String>,
) -> Summary {
    let per_s = |n: u64| {
        if elapsed_s > 0.0 {
            n as f64 / elapsed_s
        } else {
            0.0
        }
    };
    Summary {
        input,
        packets: nat.packets,
        verdicts: nat
            .nonzero()
            .map(|(v, n)| (v.name().to_string(), n))
            .collect(),
        outcomes: crate::Verdict::all()
            .zip(nat.outcomes())
            .filter(|(_, n)| *n != 0)
            .map(|(v, n)| (v.name().to_string(), n))
            .collect(),
        sessions_created: nat.sessions_created,
        sessions_deleted: nat.sessions_deleted,
        peak_sessions: nat.peak_sessions,
        records_logged: nat.records_logged,
        records: stats.into(),
        ring_capacity: cfg.ring.capacity,
        backpressure: match cfg.ring.backpressure {
            Backpressure::Block => "block",
            Backpressure::Drop => "drop",
            Backpressure::Degrade => "degrade",
        }
        .into(),
        format: cfg.format.kind.name().into(),
        output: cfg.output_path().map(|p| p.to_path_buf()),
        sinks: cfg.sink.describe_each(),
        sink_counters: Vec::new(),
        elapsed_s,
        packets_per_s: per_s(nat.packets),
        records_per_s: per_s(stats.written_records),
        capture_skipped_bad_caplen: input_stats.bad_caplen,
        capture_skipped_unknown_interface: input_stats.unknown_interface,
        capture_snapped: input_stats.snapped,
        input_error,
        interrupted: stop_requested(),
        workers: 1,
        per_worker: Vec::new(),
        logging: true,
        config_records: 0,
        port_blocks: (nat.port_blocks_allocated, nat.port_blocks_released),
        limit_events: (nat.limit_events_logged, nat.limit_events_suppressed),
        hairpin_in: (
            nat.hairpin_in_received,
            nat.hairpin_in_delivered,
            nat.hairpin_in_dropped,
        ),
    }
}
