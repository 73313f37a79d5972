//! The `dplog-nat` application: configuration, the run loop that feeds a
//! capture or the synthetic mix through [`Nat44`] into a dplog ring, and the
//! summary.
//!
//! Configuration is a TOML file (see `reference-nat/dplog-nat.toml`); every
//! key is optional, unknown keys are errors that name the key, and command
//! line flags override the file.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use dplog::config::{ConfigError, FileSinkConfig, FormatConfig, LogConfig, RingConfig, SinkConfig};
use dplog::{Backpressure, Stats};
use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use crate::input::{read_capture, InputError, InputStats};
use crate::nat::{Nat44, NatConfig, NatError, NatStats, NatTimeouts};
use crate::synthetic::{Synthetic, SyntheticConfig, SyntheticError, SYNTHETIC_INSIDE};

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
        }
    }
}

/// `[input]`: where packets come from.
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct InputSection {
    /// A pcap or pcapng file. Default: none, run the synthetic mix.
    pub pcap: Option<PathBuf>,
}

/// `[synthetic]`: the built-in traffic mix, used when no capture is given.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SyntheticSection {
    /// Inside hosts, 10.0.0.1 upwards. Default 1000.
    pub subscribers: u32,
    /// Outside hosts. Default 256.
    pub destinations: u32,
    /// Share of packets that open a new session, 0..=1. Default 0.1.
    pub new_session_share: f64,
    /// Packets to generate. Default 1 000 000.
    pub packets: u64,
    /// Random seed. Default 1.
    pub seed: u64,
    /// Virtual packet rate that sets packet timestamps. Default 1 000 000.
    pub rate_pps: u64,
}

impl Default for SyntheticSection {
    fn default() -> Self {
        let d = SyntheticConfig::default();
        Self {
            subscribers: d.subscribers,
            destinations: d.destinations,
            new_session_share: d.new_session_share,
            packets: d.packets,
            seed: d.seed,
            rate_pps: d.rate_pps,
        }
    }
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
    pub synthetic: SyntheticSection,
    /// CPU to pin the producer (forwarding) thread to. Default: not pinned.
    pub producer_cpu: Option<usize>,
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
            }),
            nat: NatSection::default(),
            input: InputSection::default(),
            synthetic: SyntheticSection::default(),
            producer_cpu: None,
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
        }
    }

    /// The NAT engine configuration. With the synthetic mix, the inside
    /// prefixes always include its subscribers' 10.0.0.0/8.
    pub fn nat_config(&self) -> NatConfig {
        let mut inside = self.nat.inside.clone();
        if self.input.pcap.is_none() {
            let syn: Ipv4Net = SYNTHETIC_INSIDE.parse().expect("static prefix");
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
        c
    }

    /// The synthetic generator configuration.
    pub fn synthetic_config(&self) -> SyntheticConfig {
        let s = &self.synthetic;
        SyntheticConfig {
            subscribers: s.subscribers,
            destinations: s.destinations,
            new_session_share: s.new_session_share,
            packets: s.packets,
            seed: s.seed,
            rate_pps: s.rate_pps,
        }
    }

    /// The output path, for the summary.
    pub fn output_path(&self) -> Option<&std::path::Path> {
        match &self.sink {
            SinkConfig::File(f) => Some(&f.path),
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
    /// The capture could not be read to its end. Everything read before the
    /// failure was translated and logged; the summary says how much.
    Input(Box<Summary>, Box<InputError>),
    /// The logger failed at shutdown (e.g. the sink's fsync). The summary's
    /// counters say what was written.
    Shutdown(Box<Summary>, String),
}

impl core::fmt::Display for RunError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RunError::Config(e) => write!(f, "{e}"),
            RunError::Nat(e) => write!(f, "bad [nat] settings: {e}"),
            RunError::Synthetic(e) => write!(f, "bad [synthetic] settings: {e}"),
            RunError::Input(_, e) => write!(f, "{e}"),
            RunError::Shutdown(_, e) => write!(f, "logger shutdown failed: {e}"),
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
    /// Records dropped because the ring was full (`drop` policy).
    pub dropped: u64,
    /// Records the consumer read.
    pub dequeued: u64,
    /// Records the sink accepted.
    pub written: u64,
    /// Bytes the sink accepted.
    pub written_bytes: u64,
    /// Records lost to sink errors.
    pub dropped_sink: u64,
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
            dropped: s.dropped_full,
            dequeued: s.dequeued,
            written: s.written_records,
            written_bytes: s.written_bytes,
            dropped_sink: s.dropped_sink,
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
    /// Wall time from the first packet to the logger's shutdown, seconds.
    pub elapsed_s: f64,
    /// Packets per second of wall time.
    pub packets_per_s: f64,
    /// Records written per second of wall time.
    pub records_per_s: f64,
    /// Capture reader counters (pcap input only).
    pub capture_skipped_bad_caplen: u64,
    /// The input error, if the capture could not be read to its end.
    pub input_error: Option<String>,
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
        if r.dropped_sink + r.sink_errors > 0 {
            let _ = writeln!(
                s,
                "  sink errors        {}  records lost to them {}",
                r.sink_errors, r.dropped_sink
            );
        }
        let _ = writeln!(
            s,
            "  ring               {} slots, {}, high-water {}",
            self.ring_capacity, self.backpressure, r.ring_high_water
        );
        let _ = writeln!(
            s,
            "  output             {} ({})",
            self.output
                .as_ref()
                .map_or("-".into(), |p| p.display().to_string()),
            self.format
        );
        let _ = writeln!(
            s,
            "  rate               {:.0} packets/s, {:.0} log records/s over {:.3} s",
            self.packets_per_s, self.records_per_s, self.elapsed_s
        );
        if let Some(e) = &self.input_error {
            let _ = writeln!(s, "  input error        {e}");
        }
        s
    }
}

/// Runs the NAT over the configured input, logging through dplog, and
/// returns the summary once every record is written and the sink closed.
///
/// Errors: [`RunError::Config`], [`RunError::Nat`] and
/// [`RunError::Synthetic`] before any packet; [`RunError::Input`] when the
/// capture breaks off (what was read is still translated, logged and
/// flushed); [`RunError::Shutdown`] if the sink fails at close.
pub fn run(cfg: &AppConfig) -> Result<Summary, RunError> {
    let mut nat = Nat44::new(cfg.nat_config()).map_err(RunError::Nat)?;
    let mut synthetic = match cfg.input.pcap {
        None => Some(Synthetic::new(cfg.synthetic_config()).map_err(RunError::Synthetic)?),
        Some(_) => None,
    };
    let log_cfg = cfg.log_config();
    let logger = log_cfg.start_nat44().map_err(RunError::Config)?;
    let mut producer = logger
        .producer()
        .map_err(|e| RunError::Config(ConfigError::Logger(e)))?;
    if let Some(cpu) = cfg.producer_cpu {
        // Best effort, like the consumer's pinning.
        let _ = dplog::affinity::pin_current_thread(cpu);
    }

    let started = Instant::now();
    let mut log = |rec| {
        producer.log(rec);
    };
    let mut input_stats = InputStats::default();
    let mut input_error = None;
    let input_name;
    match (&cfg.input.pcap, synthetic.as_mut()) {
        (Some(path), _) => {
            input_name = format!("pcap {}", path.display());
            let mut scratch = Vec::with_capacity(2048);
            let res = read_capture(path, |pkt| {
                scratch.clear();
                scratch.extend_from_slice(pkt.data);
                nat.process(pkt.ts_ns, pkt.linktype, &mut scratch, &mut log);
            });
            match res {
                Ok(s) => input_stats = s,
                Err(e) => {
                    input_stats = e.stats.clone();
                    input_error = Some(e);
                }
            }
        }
        (None, Some(gen)) => {
            input_name = "synthetic".to_string();
            gen.run(|ts, linktype, frame| {
                nat.process(ts, linktype, frame, &mut log);
            });
        }
        (None, None) => unreachable!("synthetic generator is built when no capture is given"),
    }
    // End of input: every live session is deleted and logged at the
    // engine's clock (the last packet's time).
    let end = nat.now_ns();
    nat.finish(end, &mut log);
    drop(producer);
    let shutdown = logger.shutdown();
    let elapsed = started.elapsed().as_secs_f64();
    let (stats, shutdown_err) = match shutdown {
        Ok(s) => (s, None),
        Err((s, e)) => (s, Some(e.to_string())),
    };
    let summary = make_summary(
        cfg,
        nat.stats(),
        stats,
        input_name,
        &input_stats,
        elapsed,
        input_error.as_ref().map(|e| e.to_string()),
    );
    if let Some(e) = input_error {
        return Err(RunError::Input(Box::new(summary), Box::new(e)));
    }
    if let Some(e) = shutdown_err {
        return Err(RunError::Shutdown(Box::new(summary), e));
    }
    Ok(summary)
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
        sessions_created: nat.sessions_created,
        sessions_deleted: nat.sessions_deleted,
        peak_sessions: nat.peak_sessions,
        records_logged: nat.records_logged,
        records: stats.into(),
        ring_capacity: cfg.ring.capacity,
        backpressure: match cfg.ring.backpressure {
            Backpressure::Block => "block",
            Backpressure::Drop => "drop",
        }
        .into(),
        format: cfg.format.kind.name().into(),
        output: cfg.output_path().map(|p| p.to_path_buf()),
        elapsed_s,
        packets_per_s: per_s(nat.packets),
        records_per_s: per_s(stats.written_records),
        capture_skipped_bad_caplen: input_stats.bad_caplen,
        input_error,
    }
}
