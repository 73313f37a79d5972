//! The dplog side of a run: the logger and its sink (opened on a thread
//! of its own), one producer per worker, each worker's [`RingLog`], the
//! deterministic NAT mapping logged once at start, and the shutdown that
//! gives up on a stuck sink.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use dplog::config::ConfigError;
use dplog::nat::NatRecord;
use dplog::shm::{ShmLogProducer, ShmOptions};
use dplog::{Logger, RecordRules, Stats};

use super::summary::make_summary;
use super::{input_name, plural, stopped_for, AppConfig, RunError};
use crate::input::InputStats;
use crate::nat::{Nat44, NatStats};
use crate::ringlog::{NatProducer, RingLog, NAT_BURST};

impl AppConfig {
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
        // The NAT schemas, which `log_config` asks for.
        let schemas = lc.record_types(&[], std::mem::size_of::<NatRecord>());
        let formatter = lc.format.formatter(&schemas).map_err(RunError::Config)?;
        // The NAT schemas' priorities (creates below deletes under
        // `degrade`) and event times, with `[ring.priorities]` applied.
        let mut cfg = lc.logger_config();
        cfg.schemas = lc.schema_table(&schemas).map_err(RunError::Config)?;
        let sink = self.open_sink()?;
        Logger::start(cfg, formatter, sink).map_err(|e| RunError::Config(ConfigError::Logger(e)))
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
    pub fn ring_log<'a>(&self, producer: Option<&'a mut NatProducer>) -> RingLog<'a> {
        RingLog::new(producer)
            .with_block_spins(self.ring.block_spins)
            .with_stop_timeout(Duration::from_millis(self.ring.shutdown_timeout_ms))
    }
}

/// One dplog producer per worker of `n` from `logger` (all `None` when
/// logging is off), or with `--log-ring DIR` one shared-memory ring per
/// worker in `DIR`, drained by dplogd. Each publishes its ring at least every
/// [`PUBLISH_BURSTS`](crate::ringlog::PUBLISH_BURSTS) rx bursts
/// ([`RingLog::end_burst`]), and at once after [`NAT_BURST`] pending
/// records unless `[ring] publish_every` says otherwise.
///
/// Errors: [`RunError::Config`] when the logger refuses a producer.
pub(crate) fn worker_producers(
    cfg: &AppConfig,
    logger: Option<&Logger<NatRecord>>,
    n: usize,
) -> Result<Vec<Option<NatProducer>>, RunError> {
    let lc = cfg.log_config();
    let publish_every = lc.ring.publish_every.unwrap_or(NAT_BURST);
    let mut producers = Vec::with_capacity(n);
    for w in 0..n {
        let p = match (&cfg.log_ring, logger) {
            (Some(dir), _) if cfg.dataplane.logging => {
                let opts = ShmOptions {
                    dir: dir.clone(),
                    name: format!("dplog-nat-w{w}"),
                    capacity: lc.ring.capacity,
                    group: cfg.log_ring_group,
                    daemon_uid: cfg.log_ring_daemon_uid,
                };
                let p = ShmLogProducer::create(
                    &opts,
                    &lc.logger_config(),
                    &lc.record_types(&[], std::mem::size_of::<NatRecord>()),
                    RecordRules::own(),
                )
                .map_err(|e| {
                    RunError::Config(ConfigError::Parse(format!(
                        "--log-ring {}: {e}",
                        dir.display()
                    )))
                })?;
                Some(NatProducer::Shm(p))
            }
            (_, Some(l)) => Some(NatProducer::Local(
                l.producer()
                    .map_err(|e| RunError::Config(ConfigError::Logger(e)))?,
            )),
            _ => None,
        };
        producers.push(p.map(|mut p| {
            p.set_publish_every(publish_every);
            p
        }));
    }
    if let Some(dir) = &cfg.log_ring {
        let rings: Vec<PathBuf> = producers
            .iter()
            .filter_map(|p| match p {
                Some(NatProducer::Shm(p)) => Some(p.path().to_path_buf()),
                _ => None,
            })
            .collect();
        if !rings.is_empty() {
            watch_daemon(
                dir.clone(),
                rings,
                lc.ring.backpressure,
                cfg.log_ring_daemon_uid,
            );
        }
    }
    Ok(producers)
}

/// The directory of the ring file `r`, for messages.
fn dir_name(r: &std::path::Path) -> String {
    r.parent()
        .map_or_else(String::new, |d| d.display().to_string())
}

/// How long the rings may wait for a daemon before [`watch_daemon`] says
/// so.
const DAEMON_WAIT: Duration = Duration::from_secs(1);

/// Says once on stderr when no daemon serves the rings `rings` (in `dir`)
/// [`DAEMON_WAIT`] after their creation: no consumer file
/// (`<ring>.consumer`, which dplogd creates when it takes a ring) exists
/// for one of them, so the daemon is not running on `dir` or refused the
/// ring. Says once per ring why a consumer file there is refused (its
/// owner or mode: `dplog::shm::consumer_status`, the check the producer
/// makes; such a ring is not served either). Says once more when every
/// ring has one, and once per ring the daemon quarantines (its workers'
/// records are then dropped and counted). A thread of its own, polling
/// the files every 100 ms, off the workers' path; it ends when every ring
/// is gone (served and removed) or quarantined.
fn watch_daemon(
    dir: PathBuf,
    rings: Vec<PathBuf>,
    policy: dplog::Backpressure,
    daemon_uid: Option<u32>,
) {
    use dplog::shm::{consumer_status, ConsumerStatus};
    let mut refused_said = std::collections::HashSet::new();
    let mut unserved = move |rings: &[PathBuf]| {
        rings
            .iter()
            .filter(|r| {
                if !r.exists() {
                    return false;
                }
                match consumer_status(r, daemon_uid) {
                    ConsumerStatus::Served | ConsumerStatus::Quarantined => false,
                    ConsumerStatus::Absent => true,
                    ConsumerStatus::Refused(why) => {
                        if refused_said.insert((*r).clone()) {
                            eprintln!("dplog-nat: --log-ring {}: {why}", dir_name(r));
                        }
                        true
                    }
                }
            })
            .count()
    };
    let spawned = std::thread::Builder::new()
        .name("dplog-nat-ringwatch".into())
        .spawn(move || {
            let start = Instant::now();
            // 0: nothing said; 1: "not served" said; 2: served (said, or in
            // time).
            let mut said = 0;
            let mut watched = rings;
            loop {
                std::thread::sleep(Duration::from_millis(100));
                watched.retain(|r| {
                    if consumer_status(r, daemon_uid) != ConsumerStatus::Quarantined {
                        return true;
                    }
                    eprintln!(
                        "dplog-nat: --log-ring {}: dplogd quarantined ring {} (its stderr says why); that worker's records are dropped and counted from now on",
                        dir.display(),
                        r.display()
                    );
                    false
                });
                if watched.iter().all(|r| !r.exists()) {
                    return;
                }
                if said == 2 {
                    continue;
                }
                let n = unserved(&watched);
                if said == 1 && n == 0 {
                    eprintln!(
                        "dplog-nat: --log-ring {}: dplogd serves the rings now",
                        dir.display()
                    );
                    said = 2;
                } else if said == 0 && start.elapsed() >= DAEMON_WAIT {
                    if n == 0 {
                        // Served in time: nothing to say.
                        said = 2;
                        continue;
                    }
                    let what = match policy {
                        dplog::Backpressure::Block => {
                            "the workers wait for it once their rings are full (backpressure block)"
                        }
                        _ => "records are dropped and counted once the rings are full",
                    };
                    eprintln!(
                        "dplog-nat: --log-ring {d}: {n} ring(s) not served after {}s: is dplogd running with --rings {d}? (if it is, its stderr says why it refused them, e.g. --allow-uid for a ring of another user); {what}",
                        DAEMON_WAIT.as_secs(),
                        d = dir.display()
                    );
                    said = 1;
                }
            }
        });
    // Only a message is lost if the thread cannot start.
    drop(spawned);
}

/// Deterministic NAT (RFC 7422): logs the whole mapping of `nat` once,
/// at configuration time, through `producer` (none: logging off, the
/// records are counted only), stamped with `ts_ns` (the start of the
/// input's timeline, [`input_start_ns`], so that the mapping and the
/// sessions of one log share one timebase), and flushes it. Returns the
/// number of records (0 unless `nat` uses deterministic NAT).
pub(crate) fn log_deterministic_mapping(
    nat: &Nat44,
    ts_ns: u64,
    mut producer: Option<&mut NatProducer>,
) -> u64 {
    let n = nat.deterministic_mapping(ts_ns, |r| {
        if let Some(p) = producer.as_mut() {
            p.log(r.into());
        }
    });
    if let Some(p) = producer {
        p.flush();
    }
    n
}

/// Extra wait, past `[ring] shutdown_timeout_ms` without progress, before
/// [`shutdown_bounded`] gives up on the consumer: its own shutdown deadline
/// is `shutdown_timeout_ms`, and it needs a moment to report after it.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// Shuts `logger` down on a thread of its own and waits for it while its
/// consumer makes progress (reads, writes, drops or sink errors move);
/// gives up once nothing has moved for `timeout` plus `SHUTDOWN_GRACE` (1 s):
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

/// When the input's timeline starts, for records logged before its first
/// packet (the deterministic-NAT mapping): the time of a capture's first
/// packet (records carry capture time; the wall clock if the capture has
/// none), the synthetic mix's start ([`SYNTHETIC_START_NS`], its first
/// packet's time). Live DPDK traffic is stamped by the wall clock, as its
/// packets without an Rx timestamp.
///
/// [`SYNTHETIC_START_NS`]: crate::synthetic::SYNTHETIC_START_NS
pub(crate) fn input_start_ns(cfg: &AppConfig) -> u64 {
    match &cfg.input.pcap {
        Some(path) => {
            let mut first = None;
            // Errors are the real read's to report; one packet is read.
            let _ = crate::input::read_capture_max(path, 1, |p| first = Some(p.ts_ns));
            first.unwrap_or_else(wall_clock_ns)
        }
        None => crate::synthetic::SYNTHETIC_START_NS,
    }
}

/// Nanoseconds since the Unix epoch by the wall clock (0 if before it).
pub fn wall_clock_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
