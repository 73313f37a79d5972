//! `dplog-nat`: the reference NAT44 dataplane. Translates a pcap/pcapng
//! capture or a built-in synthetic traffic mix and logs every session
//! (RFC 8158 natEvent 4 and 5) through dplog.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::builder::TypedValueParser as _;
use clap::{Parser, ValueEnum};
use dplog::config::{FileSinkConfig, SinkConfig};
use dplog::formatters::Format;
use dplog::Backpressure;
use dplog_nat::app::{plural, run_serving, AppConfig, PortAllocationName, RunError, Summary};
use ipnet::Ipv4Net;

/// Printed after the flags by `--help`; the sink types are the config's
/// own list ([`SinkConfig::type_names`]), so none is left out.
fn after_help() -> String {
    format!(
        "Every other setting is chosen in the --config TOML file, which the flags \
override: the ring; the format's options ([format] template and templates, [format.syslog] \
hostname/app_name/procid/sd_id/profile, [format.ipfix]); sinks other than a file ([[sink]] \
type = {}; rotation, fan-out, failover); NAT, input, dataplane and metrics. \
reference-nat/dplog-nat.toml lists them with their defaults.",
        SinkConfig::type_names().join(", ")
    )
}

/// `--format`: every format name the config's `[format] type` takes.
fn format_parser() -> impl clap::builder::TypedValueParser<Value = Format> {
    clap::builder::PossibleValuesParser::new(Format::ALL.map(|(_, n)| n))
        .map(|s| s.parse::<Format>().expect("a listed format name"))
}

/// `--worker-cpus`, expanded in order ([`dplog_nat::app::parse_cpu_sequence`]).
#[derive(Clone, Debug)]
struct WorkerCpus(Vec<usize>);

/// A group by numeric id or by name (`getgrnam_r(3)`).
fn parse_group(s: &str) -> Result<u32, String> {
    if let Ok(gid) = s.parse::<u32>() {
        return Ok(gid);
    }
    let name = std::ffi::CString::new(s).map_err(|_| format!("{s:?}: not a group name"))?;
    let mut buf = vec![0u8; 16384];
    loop {
        // SAFETY: getgrnam_r writes the group into `grp` and its strings
        // into `buf` (its length passed); `out` points to `grp` or is null.
        // Nothing is read from `grp` unless `out` is non-null.
        let (rc, gid) = unsafe {
            let mut grp: libc::group = core::mem::zeroed();
            let mut out: *mut libc::group = core::ptr::null_mut();
            let rc = libc::getgrnam_r(
                name.as_ptr(),
                &mut grp,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut out,
            );
            (rc, (!out.is_null()).then_some(grp.gr_gid))
        };
        match (rc, gid) {
            (0, Some(gid)) => return Ok(gid),
            (0, None) => {
                return Err(format!(
                    "no group named {s:?} (give a group name from /etc/group or a numeric gid)"
                ))
            }
            (libc::ERANGE, _) if buf.len() < 1 << 20 => buf.resize(buf.len() * 4, 0),
            (e, _) => {
                return Err(format!(
                    "looking up group {s:?}: {}",
                    std::io::Error::from_raw_os_error(e)
                ))
            }
        }
    }
}

fn parse_worker_cpus(s: &str) -> Result<WorkerCpus, String> {
    dplog_nat::app::parse_cpu_sequence(s).map(WorkerCpus)
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum BackpressureArg {
    /// Wait for a slot (lossless).
    Block,
    /// Drop the newest record when the ring is full (counted); `drop` is
    /// an alias, as in the TOML `[ring] backpressure`.
    #[value(name = "drop_newest", alias = "drop")]
    Drop,
    /// Watermarks: above `[ring.degrade] high_watermark_pct` only records
    /// of `min_priority` and above (deletes, port blocks, exhaustion).
    Degrade,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
enum SummaryArg {
    Text,
    Json,
    None,
}

/// Reference NAT44 that logs every session through dplog.
///
/// Without --pcap it translates a built-in synthetic traffic mix
/// (deterministic seed). Flags override the --config file, which holds
/// every other setting: ring, format options, sinks, NAT, input and
/// metrics (reference-nat/dplog-nat.toml lists them).
#[derive(Parser, Debug)]
#[command(name = "dplog-nat", version, about, long_about = None, after_help = after_help())]
struct Args {
    /// TOML configuration file (see reference-nat/dplog-nat.toml).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Read packets from this pcap or pcapng file (taken on the inside).
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// Inside prefix; repeat for several. Default: the RFC 1918 ranges.
    #[arg(long, value_name = "CIDR")]
    inside: Vec<Ipv4Net>,
    /// External address pool. Default 198.51.100.0/28.
    #[arg(long, value_name = "CIDR")]
    pool: Option<Ipv4Net>,
    /// Output format, as `[format] type`. Its settings (template,
    /// `[format.syslog]`, `[format.ipfix]`) and other sinks than a file
    /// are chosen in the --config file (reference-nat/dplog-nat.toml).
    #[arg(long, value_parser = format_parser())]
    format: Option<Format>,
    /// Output file (a file sink), replacing every sink of the config
    /// (it says so on stderr when those were not one file). Default
    /// dplog-nat.log.
    #[arg(long, short, value_name = "PATH")]
    output: Option<PathBuf>,
    /// Ring capacity in records, a power of two. Default 16384.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    ring_size: Option<usize>,
    /// What the NAT does when the ring is full.
    #[arg(long, value_enum)]
    backpressure: Option<BackpressureArg>,
    /// Synthetic mix: inside hosts.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    subscribers: Option<u32>,
    /// Synthetic mix: outside hosts.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    destinations: Option<u32>,
    /// Synthetic mix: share of packets that open a session, 0..=1.
    #[arg(long, value_name = "F", allow_negative_numbers = true)]
    new_session_share: Option<f64>,
    /// Packets to generate (synthetic mix), or to read from the start of
    /// the --pcap capture (the rest is not read).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    packets: Option<u64>,
    /// Synthetic mix: random seed.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    seed: Option<u64>,
    /// Pin the NAT (producer) thread to this CPU.
    #[arg(long, value_name = "CPU", allow_negative_numbers = true)]
    producer_cpu: Option<usize>,
    /// Pin the dplog consumer thread to this CPU.
    #[arg(long, value_name = "CPU", allow_negative_numbers = true)]
    consumer_cpu: Option<usize>,
    /// How to print the summary on stdout.
    #[arg(long, value_enum, default_value = "text")]
    summary: SummaryArg,
    /// Forwarding workers, each pinned, with its own session table, port
    /// slice and dplog ring.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    workers: Option<usize>,
    /// CPU of each worker, in worker order: comma-separated CPUs and
    /// ranges (e.g. 0,1 or 0-1).
    #[arg(
        long,
        value_name = "LIST",
        value_parser = parse_worker_cpus,
        allow_negative_numbers = true
    )]
    worker_cpus: Option<WorkerCpus>,
    /// Print a one-line live view to stderr every second.
    #[arg(long)]
    live: bool,
    /// Run without logging (records discarded): the baseline of the
    /// logging-cost measurement.
    #[arg(long)]
    no_logging: bool,
    /// Log through dplogd: each worker's ring is a shared-memory file in
    /// DIR (e.g. /dev/shm/dplog) that `dplogd --rings DIR` drains, so the
    /// records pushed survive a crash of dplog-nat; [format] and [sink]
    /// are dplogd's.
    #[arg(long, value_name = "DIR")]
    log_ring: Option<PathBuf>,
    /// With --log-ring: give the ring files this group, a name or a
    /// numeric id (mode 0640), so a dplogd of another user in that group
    /// can serve them (that dplogd needs --allow-uid with this process's
    /// uid); without it, mode 0600 (dplogd runs as this user or is given
    /// --allow-uid).
    #[arg(long, value_name = "GROUP", requires = "log_ring", value_parser = parse_group)]
    log_ring_group: Option<u32>,
    /// With --log-ring: the uid dplogd runs as, when it is neither this
    /// user nor root (e.g. the dplog user of a systemd service): the rings
    /// use a consumer file (`<ring>.consumer`) only if it is owned by this
    /// user, root or this uid, and writable by its owner only.
    #[arg(long, value_name = "UID", requires = "log_ring")]
    log_ring_daemon_uid: Option<u32>,
    /// Synthetic mix: generate every frame into memory before timing.
    #[arg(long)]
    preload: bool,
    /// External port choice.
    #[arg(long, value_enum)]
    port_allocation: Option<PortAllocArg>,
    /// Ports per block with `--port-allocation pba`.
    #[arg(long, value_name = "K", allow_negative_numbers = true)]
    port_block_size: Option<u16>,
    /// Most sessions per subscriber (0 = no limit); beyond it packets are
    /// dropped and natEvent 13 is logged.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    max_sessions_per_user: Option<u32>,
    /// Run on DPDK port 0 (feature `dpdk`); EAL arguments follow `--`, e.g.
    /// `-- --no-huge --no-pci --vdev net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap`.
    #[arg(long)]
    dpdk: bool,
    /// DPDK: stop after this many packets (0 = no limit).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        requires = "dpdk",
        allow_negative_numbers = true
    )]
    dpdk_packets: u64,
    /// DPDK: stop after this many milliseconds without a packet (0 = never).
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 500,
        requires = "dpdk",
        allow_negative_numbers = true
    )]
    dpdk_idle_ms: u64,
    /// DPDK: nanoseconds per unit of the driver's Rx timestamp (net_pcap:
    /// microseconds, 1000).
    #[arg(
        long,
        value_name = "NS",
        default_value_t = 1000,
        requires = "dpdk",
        allow_negative_numbers = true
    )]
    dpdk_ts_unit_ns: u64,
    /// Serve Prometheus metrics (OpenMetrics text of the logger's counters)
    /// at http://ADDR/metrics, e.g. 127.0.0.1:9464; loopback addresses only
    /// unless the config sets `[metrics] allow_non_loopback = true`.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<std::net::SocketAddr>,
    /// Keep serving the final metrics this many milliseconds after the run
    /// (a second SIGINT/SIGTERM ends the wait).
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    metrics_linger_ms: Option<u64>,
    /// EAL arguments (after `--`).
    #[arg(last = true)]
    eal: Vec<String>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum PortAllocArg {
    Sequential,
    Random,
    Pba,
    Deterministic,
}

fn build_config(args: &Args) -> Result<AppConfig, String> {
    use dplog_nat::app::check_cpu;
    for (flag, cpu) in [
        ("--producer-cpu", args.producer_cpu),
        ("--consumer-cpu", args.consumer_cpu),
    ] {
        if let Some(c) = cpu {
            check_cpu(flag, c)?;
        }
    }
    for &c in args.worker_cpus.iter().flat_map(|w| &w.0) {
        check_cpu("--worker-cpus", c)?;
    }
    let mut cfg = match &args.config {
        Some(p) => AppConfig::from_file(p).map_err(|e| e.to_string())?,
        None => AppConfig::default(),
    };
    if let Some(p) = &args.pcap {
        cfg.input.pcap = Some(p.clone());
    }
    if !args.inside.is_empty() {
        cfg.nat.inside = args.inside.clone();
    }
    if let Some(p) = args.pool {
        cfg.nat.pool = p;
    }
    if let (Some(dir), true) = (
        &args.log_ring,
        args.format.is_some() || args.output.is_some(),
    ) {
        let flag = match (args.format.is_some(), args.output.is_some()) {
            (true, true) => "--format and --output",
            (true, false) => "--format",
            _ => "--output",
        };
        return Err(format!(
            "{flag} with --log-ring {}: dplogd writes these records, and its config ([format], [sink]) chooses the format and the outputs; drop {flag}, or drop --log-ring to log from this process",
            dir.display()
        ));
    }
    if let (Some(dir), Some(file)) = (&args.log_ring, &args.config) {
        // [ring] still applies (the ring files' capacity and backpressure);
        // [format] and [sink] would be silently unused.
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let table: toml::Table = text
            .parse()
            .map_err(|e| format!("{}: {e}", file.display()))?;
        let unused: Vec<&str> = ["format", "sink"]
            .into_iter()
            .filter(|k| table.contains_key(*k))
            .collect();
        if !unused.is_empty() {
            let tables = unused
                .iter()
                .map(|k| format!("[{k}]"))
                .collect::<Vec<_>>()
                .join(" and ");
            return Err(format!(
                "{tables} in {} with --log-ring {}: dplogd writes these records, and its config chooses the format and the outputs; move {tables} to dplogd's config, or drop --log-ring to log from this process",
                file.display(),
                dir.display()
            ));
        }
    }
    if let Some(f) = args.format {
        cfg.format.kind = f;
    }
    if let Some(o) = &args.output {
        if args.config.is_some() && !matches!(cfg.sink, SinkConfig::File(_)) {
            eprintln!(
                "dplog-nat: --output {} replaces the config's sinks ({}): records go to this file only",
                o.display(),
                cfg.sink.describe_each().join(", ")
            );
        }
        cfg.sink = SinkConfig::File(FileSinkConfig {
            path: o.clone(),
            ..Default::default()
        });
    }
    if args.format.is_some() || args.output.is_some() {
        // The config file's sinks were checked against its own format.
        cfg.sink
            .check_framing(cfg.format.kind)
            .map_err(|e| format!("--format {}: {e}", cfg.format.kind.name()))?;
    }
    if let Some(n) = args.ring_size {
        cfg.ring.capacity = n;
    }
    if let Some(b) = args.backpressure {
        cfg.ring.backpressure = match b {
            BackpressureArg::Block => Backpressure::Block,
            BackpressureArg::Drop => Backpressure::Drop,
            BackpressureArg::Degrade => Backpressure::Degrade,
        };
    }
    let s = &mut cfg.synthetic;
    s.subscribers = args.subscribers.unwrap_or(s.subscribers);
    s.destinations = args.destinations.unwrap_or(s.destinations);
    s.new_session_share = args.new_session_share.unwrap_or(s.new_session_share);
    s.packets = args.packets.unwrap_or(s.packets);
    if let (Some(_), Some(n)) = (&cfg.input.pcap, args.packets) {
        if n == 0 {
            return Err("--packets 0 with --pcap reads nothing; leave --packets out to read the whole capture".into());
        }
        cfg.input.max_packets = n;
    }
    s.seed = args.seed.unwrap_or(s.seed);
    if args.producer_cpu.is_some() {
        cfg.producer_cpu = args.producer_cpu;
    }
    if args.consumer_cpu.is_some() {
        cfg.ring.consumer_cpu = args.consumer_cpu;
    }
    let d = &mut cfg.dataplane;
    d.workers = args.workers.unwrap_or(d.workers);
    if let Some(WorkerCpus(cpus)) = &args.worker_cpus {
        d.worker_cpus = cpus.clone();
        dplog_nat::app::check_worker_cpus("--worker-cpus", &d.worker_cpus, d.workers)?;
    }
    if args.live {
        d.live_stats_ms = 1000;
    }
    if args.no_logging {
        d.logging = false;
    }
    if let Some(dir) = &args.log_ring {
        cfg.log_ring = Some(dir.clone());
    }
    cfg.log_ring_group = args.log_ring_group;
    cfg.log_ring_daemon_uid = args.log_ring_daemon_uid;
    if args.preload {
        d.preload = true;
    }
    if let Some(p) = args.port_allocation {
        cfg.nat.port_allocation = match p {
            PortAllocArg::Sequential => PortAllocationName::Sequential,
            PortAllocArg::Random => PortAllocationName::Random,
            PortAllocArg::Pba => PortAllocationName::Pba,
            PortAllocArg::Deterministic => PortAllocationName::Deterministic,
        };
    }
    if let Some(k) = args.port_block_size {
        if cfg.nat.port_allocation != PortAllocationName::Pba {
            return Err(format!(
                "--port-block-size {k} applies only to port blocks: add --port-allocation pba (or port_allocation = \"pba\" in [nat])"
            ));
        }
        cfg.nat.port_block_size = k;
    }
    if let Some(n) = args.max_sessions_per_user {
        cfg.nat.max_sessions_per_user = n;
    }
    if args.metrics_listen.is_some() {
        cfg.metrics.prometheus_listen = args.metrics_listen;
    }
    if let Some(ms) = args.metrics_linger_ms {
        cfg.metrics.linger_ms = ms;
    }
    cfg.metrics.check().map_err(|e| e.to_string())?;
    Ok(cfg)
}

fn print_summary(s: &Summary, how: SummaryArg) {
    match how {
        // A closed stdout loses the summary, not the run's exit code.
        SummaryArg::Text => {
            dplog_nat::stdio::print_out(&s.to_text());
        }
        SummaryArg::Json => match serde_json::to_string_pretty(s) {
            Ok(j) => {
                dplog_nat::stdio::print_out(&(j + "\n"));
            }
            Err(e) => dplog_nat::diag!("dplog-nat: cannot encode summary: {e}"),
        },
        SummaryArg::None => {}
    }
}

/// SIGINT and SIGTERM end the input early and let the run finish cleanly
/// (every live session deleted and logged, the logger drained, the summary
/// printed); with a sink that stops taking records, within about twice
/// `[ring] shutdown_timeout_ms` (the workers' wait for ring slots, then the
/// consumer's drain) plus a second; a second one ends the process at once with status 130,
/// after one line on stderr saying what it loses
/// ([`dplog_nat::signals`]).
///
/// SIGHUP never ends the run (a logrotate `kill -HUP` must not lose the
/// live sessions): a file sink with `reopen_on_sighup = true` reopens its
/// path, otherwise [`dplog_nat::app::sighup_watcher`] notes it on stderr.
/// Returns the SIGHUP flag for that watcher.
fn handle_signals() -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    use signal_hook::consts::SIGHUP;
    use signal_hook::flag;
    if let Err(e) = dplog_nat::signals::install() {
        dplog_nat::diag!("dplog-nat: cannot install the SIGINT/SIGTERM handlers: {e}");
    }
    // Installed before anything else, so a SIGHUP during start-up is no
    // exit either; the file sink adds its own handler (signal-hook chains
    // them).
    let hup = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let _ = flag::register(SIGHUP, hup.clone());
    hup
}

fn main() -> ExitCode {
    let args = Args::parse();
    let hup = handle_signals();
    let cfg = match build_config(&args) {
        Ok(c) => c,
        Err(e) => {
            dplog_nat::diag!("dplog-nat: {e}");
            return ExitCode::from(2);
        }
    };
    dplog_nat::app::sighup_watcher(hup, dplog_nat::app::reopens_on_sighup(&cfg.sink));
    if args.dpdk {
        return run_dpdk(&cfg, &args);
    }
    let mut metrics = None;
    let code = match run_serving(&cfg, &mut metrics) {
        Ok(s) => {
            print_summary(&s, args.summary);
            undelivered_exit(&s)
        }
        Err(RunError::Input(s, e)) => {
            print_summary(&s, args.summary);
            dplog_nat::diag!("dplog-nat: {e}");
            if e.stats.format.is_none() {
                // Refused at its file header, before the logger started.
                dplog_nat::diag!("dplog-nat: no packet was read and no log was opened");
            } else {
                dplog_nat::diag!(
                    "dplog-nat: {} read before the error {} translated and all {} {} written",
                    counted(s.packets, "the packet", "the packets"),
                    plural(s.packets, "was", "were"),
                    s.records.written,
                    plural(s.records.written, "record", "records")
                );
            }
            ExitCode::from(1)
        }
        Err(RunError::Shutdown(s, e)) => {
            print_summary(&s, args.summary);
            dplog_nat::diag!("dplog-nat: {e}");
            let _ = undelivered_exit(&s);
            ExitCode::from(1)
        }
        Err(RunError::Stopped(s, e)) => {
            print_summary(&s, args.summary);
            dplog_nat::diag!("dplog-nat: {e}");
            ExitCode::from(1)
        }
        Err(e) => {
            dplog_nat::diag!("dplog-nat: {e}");
            ExitCode::from(2)
        }
    };
    if let Some(m) = metrics {
        linger(m, cfg.metrics.linger_ms);
    }
    code
}

/// `n` followed by `one` or `many`: "1 log record was", "2 log records were";
/// `"the packet"` reads "the 1 packet" (the article goes first).
fn counted(n: u64, one: &'static str, many: &'static str) -> String {
    let word = plural(n, one, many);
    match word.strip_prefix("the ") {
        Some(rest) => format!("the {n} {rest}"),
        None => format!("{n} {word}"),
    }
}

/// Success only if every record the sinks were given was delivered: a
/// record lost to a failing sink (`dropped_sink`), left undelivered at
/// shutdown (`dropped_shutdown`) or not logged at a stop is an audit gap,
/// so the run exits 1 and says how many. Drops by the configured
/// backpressure policy (`drop_newest`, `degrade`) are the operator's choice:
/// counted in the summary, exit 0.
fn undelivered_exit(s: &dplog_nat::app::Summary) -> ExitCode {
    let r = &s.records;
    let lost = r.dropped_sink + r.dropped_shutdown + r.dropped_at_stop;
    if lost == 0 {
        return ExitCode::SUCCESS;
    }
    dplog_nat::diag!(
        "dplog-nat: {lost} of {} not delivered ({} refused by the sink, {} undelivered at shutdown, {} not logged at stop)",
        counted(r.produced + r.dropped_at_stop, "log record was", "log records were"),
        r.dropped_sink,
        r.dropped_shutdown,
        r.dropped_at_stop
    );
    ExitCode::from(1)
}

/// Keeps the metrics listener serving the final counters for `ms`
/// milliseconds (ended early by SIGINT/SIGTERM), then stops it.
fn linger(m: dplog::metrics::MetricsServer, ms: u64) {
    if ms > 0 {
        dplog_nat::diag!(
            "dplog-nat: run finished; serving the final metrics at http://{}/metrics for {ms} ms",
            m.local_addr()
        );
        let end = std::time::Instant::now() + std::time::Duration::from_millis(ms);
        while std::time::Instant::now() < end && !dplog_nat::app::stop_requested() {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    m.stop();
}

#[cfg(feature = "dpdk")]
fn run_dpdk(cfg: &AppConfig, args: &Args) -> ExitCode {
    let limits = dplog_nat::dpdk::DpdkLimits {
        max_packets: args.dpdk_packets,
        idle_ms: args.dpdk_idle_ms,
        rx_timestamp_unit_ns: args.dpdk_ts_unit_ns,
    };
    match dplog_nat::dpdk::run_dpdk(cfg, &args.eal, limits) {
        Ok((s, port)) => {
            print_summary(&s, args.summary);
            dplog_nat::diag!(
                "dplog-nat: port 0 received {} sent {} missed {}",
                port.ipackets,
                port.opackets,
                port.imissed
            );
            undelivered_exit(&s)
        }
        Err(RunError::Shutdown(s, e)) => {
            print_summary(&s, args.summary);
            dplog_nat::diag!("dplog-nat: {e}");
            let _ = undelivered_exit(&s);
            ExitCode::from(1)
        }
        Err(e) => {
            dplog_nat::diag!("dplog-nat: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(not(feature = "dpdk"))]
fn run_dpdk(_cfg: &AppConfig, _args: &Args) -> ExitCode {
    dplog_nat::diag!("dplog-nat: --dpdk needs a build with the `dpdk` feature (cargo build -p dplog-nat --features dpdk)");
    ExitCode::from(2)
}
