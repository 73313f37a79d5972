//! [`RingLog`]: the [`NatLog`] a forwarding worker hands its records to,
//! one dplog ring per worker, published every [`PUBLISH_BURSTS`] rx bursts
//! (or `publish_every` records) and whenever the worker idles.

use std::time::{Duration, Instant};

use dplog::nat::{Nat44SessionRecord, NatEvent, NatRecord};
use dplog::shm::ShmLogProducer;
use dplog::{Backpressure, LogProducer, WaitSteps};

use crate::nat::NatLog;
use crate::signals::SessionTally;

/// A worker's dplog producer: a ring of this process's logger, or a
/// shared-memory ring that `dplogd` drains (`--log-ring`), so the records
/// pushed survive a crash of `dplog-nat`. The same calls on both.
#[derive(Debug)]
pub enum NatProducer {
    /// A ring of the in-process logger.
    Local(LogProducer<NatRecord>),
    /// A shared-memory ring (`dplog::shm`).
    Shm(ShmLogProducer<NatRecord>),
}

impl NatProducer {
    /// The backpressure policy.
    pub fn policy(&self) -> Backpressure {
        match self {
            Self::Local(p) => p.policy(),
            Self::Shm(p) => p.policy(),
        }
    }

    /// Logs under the policy; whether the record was enqueued.
    #[inline]
    pub fn log(&mut self, rec: NatRecord) -> bool {
        match self {
            Self::Local(p) => p.log(rec),
            Self::Shm(p) => p.log(rec),
        }
    }

    /// One slot write, or the record back when the ring is full.
    #[inline]
    pub fn try_push(&mut self, rec: NatRecord) -> Result<(), NatRecord> {
        match self {
            Self::Local(p) => p.try_push(rec),
            Self::Shm(p) => p.try_push(rec),
        }
    }

    /// Publishes the pending records.
    #[inline]
    pub fn flush(&mut self) {
        match self {
            Self::Local(p) => p.flush(),
            Self::Shm(p) => p.flush(),
        }
    }

    /// The consumer is gone (in-process) or quarantined the ring
    /// (shared memory; a daemon that is away is not gone).
    pub fn is_disconnected(&self) -> bool {
        match self {
            Self::Local(p) => p.is_disconnected(),
            Self::Shm(p) => p.is_quarantined(),
        }
    }

    /// Fill level (one Acquire load of the consumer index).
    pub fn fill(&mut self) -> usize {
        match self {
            Self::Local(p) => p.fill(),
            Self::Shm(p) => p.fill(),
        }
    }

    /// See `Producer::set_publish_every`.
    pub fn set_publish_every(&mut self, n: usize) {
        match self {
            Self::Local(p) => p.set_publish_every(n),
            Self::Shm(p) => p.set_publish_every(n),
        }
    }

    /// Records pushed but not yet published.
    pub fn pending(&self) -> usize {
        match self {
            Self::Local(p) => p.pending(),
            Self::Shm(p) => (p.enqueued() - p.committed()) as usize,
        }
    }
}

/// Packets a worker translates between two ring publications, and the
/// default `[ring] publish_every` of `dplog-nat`: one rx burst, as
/// `rte_eth_rx_burst` returns at most 32 packets in DPDK's examples.
pub const NAT_BURST: usize = 32;

/// Default stop timeout of a [`RingLog`] in milliseconds, as dplog's
/// default `[ring] shutdown_timeout_ms`.
pub const DEFAULT_STOP_TIMEOUT_MS: u64 = 5000;

/// Hands every record of a [`Nat44`](crate::Nat44) to the worker's dplog
/// [`LogProducer`] under the logger's backpressure policy, or discards it
/// when logging is off (`None`).
///
/// The producer publishes its ring index once per
/// [`LoggerConfig::publish_every`](dplog::LoggerConfig::publish_every)
/// records, so the forwarding loop must call [`flush`](Self::flush) once
/// per rx burst (as a DPDK application calls `rte_eth_tx_buffer_flush`):
/// without it the last records of a burst would wait for the next burst.
///
/// Under the `block` policy a full ring is waited on (lossless). After a
/// stop is requested ([`crate::app::request_stop`], SIGINT/SIGTERM) a
/// record that finds the ring full still waits while the consumer makes
/// progress (a busy but healthy sink loses nothing); only when the
/// consumer has freed no slot for the stop timeout (`[ring]
/// shutdown_timeout_ms`, see [`with_stop_timeout`](Self::with_stop_timeout))
/// is the sink taken as stuck (e.g. retrying ENOSPC): that record and every
/// later one that finds the ring full are not logged and are counted in
/// [`dropped_at_stop`](Self::dropped_at_stop), so the worker still ends.
#[derive(Debug)]
pub struct RingLog<'a> {
    producer: Option<&'a mut NatProducer>,
    dropped_at_stop: u64,
    /// After a stop: how long a wait may see no consumer progress before
    /// the sink is taken as stuck.
    stop_timeout: Duration,
    /// Set when a wait after a stop timed out: later full-ring records are
    /// dropped at once.
    stuck: bool,
    /// Pause-spins of a blocked push before it yields between tries
    /// (`[ring] block_spins`).
    block_spins: u32,
    waits: u64,
    wait_spins: u64,
    wait_yields: u64,
    wait_sleeps: u64,
    /// Rx bursts ended since the last publication.
    bursts: u32,
    /// Where the session creates and deletes enqueued are published.
    tally: Option<&'a SessionTally>,
    creates: u64,
    deletes: u64,
}

/// Rx bursts after which [`RingLog::end_burst`] publishes what is pending:
/// records reach the consumer at most 16 bursts (512 packets) after they
/// were logged, or sooner when `publish_every` of them are pending or the
/// worker idles. Publishing after every burst cost the worker a cache-line
/// transfer of the ring's tail index per burst: about 1.3 points of the
/// 3 % logging cost at 10 % new sessions (`nat_sweep`, benches/RESULTS.md).
pub const PUBLISH_BURSTS: u32 = 16;

/// What one try of a blocked push gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Try {
    /// Pushed, or handed to dplog to count as dropped (consumer gone).
    Done,
    /// A stop was requested and the consumer made no progress for the stop
    /// timeout (or already had not, earlier): the record is dropped and
    /// counted.
    Stopped,
    /// The ring is still full.
    Full,
}

/// The wait of a blocked push: calls `attempt` until it is not
/// [`Try::Full`], taking a [`WaitSteps`] step between tries (pause spins
/// up to `block_spins`, then yields, then sleeps, as dplog's own
/// `Producer::push`: a worker whose sink stalls stops burning its CPU in
/// `sched_yield`). Returns the last outcome and the steps taken.
#[inline]
fn wait_loop(block_spins: u32, mut attempt: impl FnMut() -> Try) -> (Try, WaitSteps) {
    let mut steps = WaitSteps::new();
    loop {
        let t = attempt();
        if t != Try::Full {
            return (t, steps);
        }
        steps.step(block_spins);
    }
}

/// Waits for a slot for `rec` (ring full, `block` policy) until it is
/// pushed or the consumer is gone (counted by dplog as
/// `dropped_disconnected`), pause-spinning `block_spins` times before it
/// yields. After a stop request it keeps waiting while the consumer frees
/// slots, and gives up once `stop_timeout` has passed since the stop was
/// seen (or since the consumer last freed a slot) without progress, or at
/// once if `*stuck` (an earlier wait timed out); giving up sets `*stuck`.
/// Returns whether `rec` was dropped for the stop, and the cost.
#[cold]
fn wait_or_stop(
    p: &mut NatProducer,
    rec: NatRecord,
    block_spins: u32,
    stop_timeout: Duration,
    stuck: &mut bool,
) -> (bool, WaitSteps) {
    // Publish what is pending: the consumer can only free slots it sees.
    p.flush();
    let mut rec = Some(rec);
    // After the stop: (when progress was last seen, the fill then).
    let mut progress: Option<(Instant, usize)> = None;
    let (t, cost) = wait_loop(block_spins, || {
        let Some(r) = rec.take() else {
            return Try::Done;
        };
        match p.try_push(r) {
            Ok(()) => Try::Done,
            Err(r) if p.is_disconnected() => {
                // `log` counts it as dropped for a gone consumer.
                p.log(r);
                Try::Done
            }
            Err(r) => {
                rec = Some(r);
                if !crate::app::stop_requested() {
                    return Try::Full;
                }
                if *stuck {
                    return Try::Stopped;
                }
                // One Acquire load of the consumer index (pairs with the
                // consumer's Release store as it frees slots, in dplog's
                // ring): a lower fill is consumer progress.
                let (now, fill) = (Instant::now(), p.fill());
                match progress {
                    Some((_, last)) if fill < last => progress = Some((now, fill)),
                    Some((since, _)) if now.duration_since(since) >= stop_timeout => {
                        *stuck = true;
                        return Try::Stopped;
                    }
                    Some(_) => {}
                    None => progress = Some((now, fill)),
                }
                Try::Full
            }
        }
    });
    (t == Try::Stopped, cost)
}

impl<'a> RingLog<'a> {
    /// Logs into `producer`, or nowhere when it is `None` (logging off).
    ///
    /// A blocked push pause-spins dplog's default
    /// [`DEFAULT_BLOCK_SPINS`](dplog::ring::DEFAULT_BLOCK_SPINS) times
    /// before it yields; see [`with_block_spins`](Self::with_block_spins).
    pub fn new(producer: Option<&'a mut NatProducer>) -> Self {
        Self {
            producer,
            dropped_at_stop: 0,
            stop_timeout: Duration::from_millis(DEFAULT_STOP_TIMEOUT_MS),
            stuck: false,
            block_spins: dplog::ring::DEFAULT_BLOCK_SPINS,
            bursts: 0,
            waits: 0,
            wait_spins: 0,
            wait_yields: 0,
            wait_sleeps: 0,
            tally: None,
            creates: 0,
            deletes: 0,
        }
    }

    /// Sets how many times a push that finds the ring full (`block`
    /// policy) spins with a pause instruction before it yields the CPU
    /// between tries: `[ring] block_spins` (`LoggerConfig::block_spins`,
    /// the same limit dplog's `Producer::push` uses); 0 yields at once.
    pub fn with_block_spins(mut self, spins: u32) -> Self {
        self.block_spins = spins;
        self
    }

    /// Sets how long, after a stop request, a push that finds the ring full
    /// waits with no consumer progress (no slot freed) before it takes the
    /// sink as stuck and drops the record (counted in
    /// [`dropped_at_stop`](Self::dropped_at_stop)): `[ring]
    /// shutdown_timeout_ms`. Default [`DEFAULT_STOP_TIMEOUT_MS`] ms.
    pub fn with_stop_timeout(mut self, timeout: Duration) -> Self {
        self.stop_timeout = timeout;
        self
    }

    /// The stop timeout (see [`with_stop_timeout`](Self::with_stop_timeout)).
    pub fn stop_timeout(&self) -> Duration {
        self.stop_timeout
    }

    /// The pause-spin limit of a blocked push (see
    /// [`with_block_spins`](Self::with_block_spins)).
    pub fn block_spins(&self) -> u32 {
        self.block_spins
    }

    /// Pushes that found the ring full and waited (`block` policy).
    pub fn waits(&self) -> u64 {
        self.waits
    }

    /// Pause-spins over all waits (each wait spins at most
    /// [`block_spins`](Self::block_spins) times).
    pub fn wait_spins(&self) -> u64 {
        self.wait_spins
    }

    /// CPU yields over all waits (a wait yields up to 256 times once
    /// spinning is over).
    pub fn wait_yields(&self) -> u64 {
        self.wait_yields
    }

    /// Sleeps (50 µs doubling to 1 ms) over all waits, after the yields.
    pub fn wait_sleeps(&self) -> u64 {
        self.wait_sleeps
    }

    /// Records not logged because, after a stop was requested, the ring was
    /// full and the consumer had freed no slot for the stop timeout (`block`
    /// policy only; other policies count their drops in dplog's
    /// [`Stats`](dplog::Stats)).
    pub fn dropped_at_stop(&self) -> u64 {
        self.dropped_at_stop
    }

    /// Hands `rec` to the ring; returns whether it was enqueued.
    #[inline]
    fn push(&mut self, rec: NatRecord) -> bool {
        let Some(p) = self.producer.as_mut() else {
            return false;
        };
        if p.policy() != Backpressure::Block {
            return p.log(rec);
        }
        match p.try_push(rec) {
            Ok(()) => true,
            Err(rec) => {
                // What the ring holds is published (by `wait_or_stop`), and
                // so are the tallies: a second signal counts them exactly.
                if let Some(t) = self.tally {
                    t.store(self.creates, self.deletes);
                }
                let (stopped, cost) =
                    wait_or_stop(p, rec, self.block_spins, self.stop_timeout, &mut self.stuck);
                self.dropped_at_stop += u64::from(stopped);
                self.waits += 1;
                self.wait_spins += u64::from(cost.spins());
                self.wait_yields += u64::from(cost.yields());
                self.wait_sleeps += u64::from(cost.sleeps());
                !stopped
            }
        }
    }

    /// Stores the session creates and deletes enqueued so far into
    /// `tally` at every publication of the ring index (and before every
    /// wait on a full ring), for the second-signal watcher
    /// ([`crate::signals`]).
    pub fn with_tally(mut self, tally: Option<&'a SessionTally>) -> Self {
        self.tally = tally;
        self
    }

    /// Publishes the records logged since the last publication (one Release
    /// store of the ring index; nothing if none is pending). Call before
    /// the worker goes idle and at its end; after each rx burst call
    /// [`end_burst`](Self::end_burst).
    #[inline]
    pub fn flush(&mut self) {
        self.bursts = 0;
        if let Some(p) = self.producer.as_mut() {
            p.flush();
        }
        if let Some(t) = self.tally {
            t.store(self.creates, self.deletes);
        }
    }

    /// Ends an rx burst: publishes what is pending once every
    /// [`PUBLISH_BURSTS`] bursts (a deferred publication, as DPDK's
    /// `rte_eth_tx_buffer` defers a transmit).
    #[inline]
    pub fn end_burst(&mut self) {
        self.bursts += 1;
        if self.bursts >= PUBLISH_BURSTS {
            self.flush();
        }
    }
}

impl NatLog for RingLog<'_> {
    #[inline]
    fn session(&mut self, rec: Nat44SessionRecord) {
        let event = rec.nat_event;
        if self.push(NatRecord::from(rec)) {
            if event == NatEvent::Nat44SessionCreate as u8 {
                self.creates += 1;
            } else if event == NatEvent::Nat44SessionDelete as u8 {
                self.deletes += 1;
            }
        }
    }

    #[inline]
    fn event(&mut self, rec: NatRecord) {
        self.push(rec);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dplog::config::FormatConfig;
    use dplog::nat::NatEvent;
    use dplog::sinks::FileSink;
    use dplog::{Logger, LoggerConfig};

    fn session(i: u32) -> Nat44SessionRecord {
        Nat44SessionRecord {
            header: dplog::RecordHeader::of::<Nat44SessionRecord>(),
            src_addr: 0x0A00_0000 + i,
            nat_event: NatEvent::Nat44SessionCreate as u8,
            ..Default::default()
        }
    }

    /// A logger of NAT records to a file sink at `path`, publishing every
    /// `NAT_BURST` records.
    fn burst_logger(path: impl AsRef<std::path::Path>) -> Logger<NatRecord> {
        Logger::<NatRecord>::start(
            LoggerConfig {
                publish_every: NAT_BURST,
                ..Default::default()
            },
            FormatConfig::default().nat_formatter().unwrap(),
            FileSink::open(path).unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn a_burst_end_publishes_once_every_publish_bursts_bursts() {
        let dir = tempfile::tempdir().unwrap();
        let logger = burst_logger(dir.path().join("bursts.log"));
        let mut producer = NatProducer::Local(logger.producer().unwrap());
        {
            let mut log = RingLog::new(Some(&mut producer));
            // One record per burst: unpublished until the 16th burst ends.
            for i in 0..PUBLISH_BURSTS {
                log.session(session(i));
                log.end_burst();
                let want = if i + 1 < PUBLISH_BURSTS {
                    0
                } else {
                    u64::from(PUBLISH_BURSTS)
                };
                assert_eq!(logger.stats().enqueued, want, "after burst {}", i + 1);
            }
            // A flush (the worker going idle) publishes at once and starts
            // the count again.
            log.session(session(100));
            log.end_burst();
            assert_eq!(logger.stats().enqueued, u64::from(PUBLISH_BURSTS));
            log.flush();
            assert_eq!(logger.stats().enqueued, u64::from(PUBLISH_BURSTS) + 1);
            log.session(session(101));
            for _ in 1..PUBLISH_BURSTS {
                log.end_burst();
            }
            assert_eq!(logger.stats().enqueued, u64::from(PUBLISH_BURSTS) + 1);
            log.end_burst();
            assert_eq!(logger.stats().enqueued, u64::from(PUBLISH_BURSTS) + 2);
        }
        drop(producer);
        let s = logger.shutdown().unwrap_or_else(|(_, e)| panic!("{e}"));
        assert_eq!(s.written_records, u64::from(PUBLISH_BURSTS) + 2);
    }

    #[test]
    fn records_are_published_at_the_burst_or_the_flush_and_all_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ringlog.log");
        let logger = burst_logger(&path);
        let mut producer = NatProducer::Local(logger.producer().unwrap());
        {
            let mut log = RingLog::new(Some(&mut producer));
            for i in 0..3 {
                log.session(session(i));
            }
        }
        assert_eq!(producer.pending(), 3);
        assert_eq!(logger.stats().enqueued, 0, "not yet published");
        {
            let mut log = RingLog::new(Some(&mut producer));
            log.flush();
            // A full burst publishes itself; 3 more stay pending.
            for i in 3..6 + NAT_BURST as u32 {
                log.session(session(i));
            }
        }
        assert_eq!(logger.stats().enqueued, 3 + NAT_BURST as u64);
        assert_eq!(producer.pending(), 3);
        drop(producer);
        let st = logger.shutdown().unwrap();
        assert_eq!(
            st.written_records,
            6 + NAT_BURST as u64,
            "drop flushes the rest"
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 6 + NAT_BURST);
        assert!(text
            .lines()
            .next()
            .unwrap()
            .contains("sourceIPv4Address=10.0.0.0 "));
        assert!(text
            .lines()
            .last()
            .unwrap()
            .contains("sourceIPv4Address=10.0.0.37 "));
    }

    #[test]
    fn a_wait_spins_the_configured_limit_then_yields() {
        // A ring that stays full for 10 tries, then has room.
        let full_for = |n: u32| {
            let mut left = n;
            move || {
                if left == 0 {
                    Try::Done
                } else {
                    left -= 1;
                    Try::Full
                }
            }
        };
        for (limit, spins, yields) in [(3, 3, 7), (0, 0, 10), (7, 7, 3), (1024, 10, 0)] {
            let (t, cost) = wait_loop(limit, full_for(10));
            assert_eq!(t, Try::Done);
            assert_eq!(
                (cost.spins(), cost.yields(), cost.sleeps()),
                (spins, yields, 0),
                "block_spins {limit}"
            );
        }
        // Past its spins and 256 yields a wait sleeps (50, 100, 200 µs).
        let (t, cost) = wait_loop(5, full_for(5 + 256 + 3));
        assert_eq!(t, Try::Done);
        assert_eq!((cost.spins(), cost.yields(), cost.sleeps()), (5, 256, 3));
        // A stop ends the wait where it is.
        let mut tries = 0;
        let (t, cost) = wait_loop(2, || {
            tries += 1;
            if tries == 5 {
                Try::Stopped
            } else {
                Try::Full
            }
        });
        assert_eq!(t, Try::Stopped);
        assert_eq!((cost.spins(), cost.yields(), cost.sleeps()), (2, 2, 0));
    }

    #[test]
    fn the_configured_block_spins_reach_the_worker_wait() {
        // `[ring] block_spins` from dplog-nat's TOML is the limit a
        // worker's RingLog waits with (app::AppConfig::ring_log, which
        // every worker loop and the DPDK poll loop use).
        let cfg = crate::app::AppConfig::from_toml_str("[ring]\nblock_spins = 7\n").unwrap();
        assert_eq!(cfg.ring.block_spins, 7);
        assert_eq!(cfg.ring_log(None).block_spins(), 7);
        let cfg = crate::app::AppConfig::default();
        assert_eq!(
            cfg.ring_log(None).block_spins(),
            dplog::ring::DEFAULT_BLOCK_SPINS
        );
        assert_eq!(RingLog::new(None).with_block_spins(0).block_spins(), 0);
    }

    #[test]
    fn a_full_ring_with_the_consumer_gone_ends_the_wait_and_is_counted() {
        let dir = tempfile::tempdir().unwrap();
        let logger = Logger::<NatRecord>::start(
            LoggerConfig {
                ring_capacity: 64,
                block_spins: 5,
                ..Default::default()
            },
            FormatConfig::default().nat_formatter().unwrap(),
            FileSink::open(dir.path().join("gone.log")).unwrap(),
        )
        .unwrap();
        let mut producer = NatProducer::Local(logger.producer().unwrap());
        let st = logger.shutdown().unwrap();
        assert_eq!(st.written_records, 0);
        let mut log = RingLog::new(Some(&mut producer)).with_block_spins(5);
        // 64 fill the ring; the 65th waits, sees the consumer gone and
        // hands the record to dplog, which counts it dropped.
        for i in 0..65 {
            log.session(session(i));
        }
        assert_eq!(
            (
                log.waits(),
                log.wait_spins(),
                log.wait_yields(),
                log.wait_sleeps()
            ),
            (1, 0, 0, 0)
        );
        assert_eq!(log.dropped_at_stop(), 0);
    }

    #[test]
    fn session_creates_and_deletes_enqueued_reach_the_tally_at_each_publication() {
        let dir = tempfile::tempdir().unwrap();
        let logger = burst_logger(dir.path().join("tally.log"));
        let mut producer = NatProducer::Local(logger.producer().unwrap());
        let tally = SessionTally::default();
        {
            let mut log = RingLog::new(Some(&mut producer)).with_tally(Some(&tally));
            let delete = |i| Nat44SessionRecord {
                nat_event: NatEvent::Nat44SessionDelete as u8,
                ..session(i)
            };
            for i in 0..5 {
                log.session(session(i));
            }
            log.session(delete(0));
            assert_eq!(tally.open_sessions(), 0, "nothing published yet");
            log.flush();
            assert_eq!(tally.open_sessions(), 4);
            log.session(delete(1));
            log.session(delete(2));
            log.flush();
            assert_eq!(tally.open_sessions(), 2);
        }
        drop(producer);
        let st = logger.shutdown().unwrap();
        assert_eq!(st.written_records, 8);
    }

    #[test]
    fn logging_off_discards_and_flush_is_a_no_op() {
        let mut log = RingLog::new(None);
        log.session(session(1));
        log.flush();
    }
}
