//! What a run did: [`Summary`] with its [`RecordSummary`] (dplog's
//! counters) and per-worker [`WorkerSummary`], printed at exit as text or
//! JSON.

use std::path::PathBuf;

use dplog::nat::NatRecord;
use dplog::{Backpressure, Stats};
use serde::Serialize;

#[cfg(doc)]
use super::request_stop;
use super::{stop_requested, AppConfig, RunError};
use crate::input::{InputError, InputStats};
use crate::nat::NatStats;
use crate::workers::translated;

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
    /// `--dpdk` runs: translated frames (and hairpin copies) the port's Tx
    /// queue refused (`rte_eth_tx_burst` took fewer than offered: the
    /// queue or the peer's ring was full) or that found no mbuf for their
    /// copy; they are freed, as a real port drops them. 0 otherwise.
    pub tx_dropped: u64,
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
        if self.tx_dropped > 0 {
            let _ = writeln!(
                s,
                "  tx dropped         {} translated frames refused by the port's Tx queue (full) and freed",
                self.tx_dropped
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

/// The summary of a run that stopped at its input before anything was
/// started (no logger, so no log file): every counter zero, the error in
/// `input_error`.
pub(super) fn input_failed(cfg: &AppConfig, e: InputError) -> RunError {
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

pub(super) fn make_summary(
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
        format: match &cfg.log_ring {
            Some(_) => "dplogd's [format]".into(),
            None => cfg.format.kind.name().into(),
        },
        // With --log-ring, dplogd writes the records (its own counters
        // count them; this process's logger runs no consumer).
        output: match &cfg.log_ring {
            Some(_) => None,
            None => cfg.output_path().map(|p| p.to_path_buf()),
        },
        sinks: match &cfg.log_ring {
            Some(dir) => vec![format!("dplogd rings in {}", dir.display())],
            None => cfg.sink.describe_each(),
        },
        sink_counters: Vec::new(),
        elapsed_s,
        packets_per_s: per_s(nat.packets),
        records_per_s: per_s(stats.written_records),
        capture_skipped_bad_caplen: input_stats.bad_caplen,
        capture_skipped_unknown_interface: input_stats.unknown_interface,
        capture_snapped: input_stats.snapped,
        tx_dropped: 0,
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
