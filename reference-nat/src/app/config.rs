//! The `dplog-nat` configuration file: [`AppConfig`] and its sections,
//! their defaults, and the NAT engine and synthetic generator settings
//! derived from them.

use std::path::PathBuf;
use std::time::Duration;

use dplog::config::{
    ConfigError, FileSinkConfig, FormatConfig, LogConfig, MetricsConfig, RingConfig, SinkConfig,
};
use ipnet::Ipv4Net;
use serde::Deserialize;

use crate::nat::{NatConfig, NatTimeouts, PortAllocation};
use crate::synthetic::{SyntheticConfig, SYNTHETIC_INSIDE};

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
    /// `--log-ring DIR`: log through `dplogd` instead of this process's
    /// own consumer: each worker's ring is a shared-memory file in `DIR`
    /// (`dplog-nat-w<i>.<pid>.<nonce>.ring`, `[ring] capacity` and
    /// `backpressure`) that a `dplogd --rings DIR` drains, formats and
    /// writes; `[format]` and `[sink]` are then dplogd's. Not a TOML key.
    #[serde(skip)]
    pub log_ring: Option<PathBuf>,
    /// `--log-ring-group GID`: the ring files' group (mode 0640; `None`:
    /// mode 0600). Not a TOML key.
    #[serde(skip)]
    pub log_ring_group: Option<u32>,
    /// `--log-ring-daemon-uid UID`: dplogd's uid, trusted as the owner of
    /// the rings' consumer files besides this user and root. Not a TOML
    /// key.
    #[serde(skip)]
    pub log_ring_daemon_uid: Option<u32>,
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
            log_ring: None,
            log_ring_group: None,
            log_ring_daemon_uid: None,
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
            // dplog-nat runs one consumer ([ring] consumer_cpu).
            consumers: Default::default(),
            // A NAT: it asks for dplog's NAT schemas (a logger serves
            // only the record types it is asked for).
            schemas: dplog::config::SchemasConfig { nat: true },
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
