//! The consumer thread: one loop that serves control messages, drains
//! every ring round-robin ([`drain`]), hands batches to the sink
//! ([`batch`]) and writes in-band drop reports and diagnostics
//! ([`reports`]).

use core::sync::atomic::{AtomicU64, Ordering};
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};

use super::LoggerConfig;
use crate::format::Formatter;
use crate::record::Record;
use crate::reorder::Reorder;
use crate::report::DropReport;
use crate::ring::Consumer;
use crate::sink::{Accepted, Progress, Sink, SinkError};
use crate::stats::LatencyHistogram;
use crate::table::{RecordRules, SchemaTable};
use crate::tsc::{now_ticks, realtime_ns, TscClock};

mod batch;
mod drain;
mod pace;
mod reports;

/// Consumer-side totals; single writer (the consumer thread), Relaxed
/// load+store. The partner for final reads is the thread join in
/// [`Logger::shutdown`].
#[derive(Default)]
pub(super) struct ConsumerTotals {
    pub(super) written_records: AtomicU64,
    pub(super) written_bytes: AtomicU64,
    pub(super) dropped_sink: AtomicU64,
    pub(super) sink_errors: AtomicU64,
    pub(super) sink_retries: AtomicU64,
    pub(super) sink_pending: AtomicU64,
    pub(super) dropped_shutdown: AtomicU64,
    pub(super) dropped_format: AtomicU64,
    pub(super) batches: AtomicU64,
    pub(super) formatted: AtomicU64,
    pub(super) drop_reports: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    // Relaxed: single-writer statistic (see `ConsumerTotals`).
    c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}

pub(super) enum Control<R: Record> {
    AddRing(Consumer<R>),
    Flush(Sender<io::Result<()>>),
    Reopen(Sender<io::Result<()>>),
    Shutdown(Sender<io::Result<()>>),
}

pub(super) struct ConsumerLoop<R: Record, F, S> {
    rx: Receiver<Control<R>>,
    rings: Vec<Consumer<R>>,
    formatter: F,
    sink: S,
    buf: Vec<u8>,
    batch_records: u64,
    /// Of `batch_records`, those the formatter turned into zero bytes: no
    /// line of theirs reaches the sink, so an asynchronous sink never
    /// reports on them; they count as written with their batch.
    batch_empty: u64,
    /// Byte ranges of the drop-report lines in `buf`, handed to
    /// `Sink::write_batch_marked` so asynchronous sinks leave them out of
    /// their record counts.
    batch_reports: Vec<core::ops::Range<usize>>,
    totals: Arc<ConsumerTotals>,
    config: LoggerConfig,
    /// [`Record::event_time`] of the last record formatted: where an
    /// in-band drop report sits on the records' timeline
    /// ([`DropReport::record_time_ns`]).
    last_event_time: u64,
    /// Reads a record's event time with `config.schemas`.
    event_time: fn(&R, &SchemaTable) -> u64,
    /// When the last "records dropped by the formatter" line was printed.
    last_skip_diag: Option<Instant>,
    /// A shutdown request seen while retrying a batch; served by `run`.
    stop: Option<Sender<io::Result<()>>>,
    /// Set once shutdown starts: retries and drains end here.
    deadline: Option<Instant>,
    /// When `maintain` next calls `Sink::tick` and `Sink::poll`.
    next_tick: Instant,
    /// Records accepted by the sink as `Pending`, not yet resolved.
    pending: i64,
    /// TSC → UTC conversion for drop reports and latency.
    clock: TscClock,
    /// Enqueue timestamps (ticks) of the sampled records in `buf`.
    batch_samples: Vec<u64>,
    latency: Arc<LatencyHistogram>,
    /// Drain passes, to recalibrate the clock every 1024 passes or idle.
    passes: u64,
    /// The reorder window, when configured.
    reorder: Option<Reorder<R>>,
    /// First retryable write error since the sink last took a batch.
    failing_since: Option<Instant>,
    /// When the last sink-failure diagnostic was printed.
    last_diag: Option<Instant>,
    /// Records given up on (retry timeout or shutdown deadline) while the
    /// sink failed, since it last took a batch.
    abandoned: u64,
    /// The retryable write error (ENOSPC, ...) of the last batch given up
    /// on, reported by `finish` when the sink's flush and close succeed.
    lost_error: Option<(io::ErrorKind, String)>,
    /// Records dropped in the sink and not yet reported in-band.
    sink_drops: Option<SinkDrops>,
    /// Bytes of the in-band report of `sink_drops` at the head of `buf`
    /// (0: none there).
    sink_report: usize,
    /// [`Record::event_time`] of the last record of the last batch the
    /// sink took: where a sink drop report sits on the records' timeline.
    written_event_time: u64,
    /// Earliest next try of a batch that holds nothing but the sink drop
    /// report, while idle.
    report_try_at: Instant,
    /// Pauses between polls of the rings while awake.
    pacer: pace::Pacer,
    /// The last pass read a whole burst from some ring.
    pass_full: bool,
}

/// Records dropped in the sink since the last in-band report of them.
#[derive(Clone, Copy)]
struct SinkDrops {
    dropped: u64,
    /// Wall clock (ns since the Unix epoch) of the first and last give-up.
    first_ns: u64,
    last_ns: u64,
    /// `written_event_time` at the first drop.
    after: u64,
}

/// Period of `Sink::tick` / `Sink::poll` calls.
const TICK_PERIOD: Duration = Duration::from_millis(2);
/// First and longest backoff between retries of a batch.
const RETRY_BACKOFF_MIN: Duration = Duration::from_millis(1);
const RETRY_BACKOFF_MAX: Duration = Duration::from_millis(200);
/// Shortest interval between two sink-failure diagnostics on stderr.
const DIAG_PERIOD: Duration = Duration::from_secs(5);

fn sink_io(e: SinkError) -> io::Error {
    e.into_io()
}

impl<R: Record, F, S> ConsumerLoop<R, F, S> {
    /// A loop that reads control messages from `rx`, formats with
    /// `formatter` into `buf` (sized by the caller) and writes to `sink`,
    /// booking into `totals` and `latency`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        rx: Receiver<Control<R>>,
        formatter: F,
        sink: S,
        buf: Vec<u8>,
        totals: Arc<ConsumerTotals>,
        config: LoggerConfig,
        latency: Arc<LatencyHistogram>,
        rules: RecordRules<R>,
    ) -> Self {
        Self {
            rx,
            rings: Vec::new(),
            formatter,
            sink,
            buf,
            batch_records: 0,
            batch_empty: 0,
            batch_reports: Vec::new(),
            totals,
            config: config.clone(),
            last_event_time: 0,
            stop: None,
            deadline: None,
            next_tick: Instant::now(),
            pending: 0,
            clock: TscClock::new(Duration::from_millis(5)),
            batch_samples: Vec::with_capacity(4096),
            latency,
            passes: 0,
            reorder: config.reorder_window_ns.map(|w| {
                Reorder::new(
                    w,
                    Duration::from_millis(config.reorder_idle_ms),
                    config.ring_capacity,
                    config.schemas.clone(),
                    rules.event_time,
                )
            }),
            event_time: rules.event_time,
            last_skip_diag: None,
            failing_since: None,
            last_diag: None,
            abandoned: 0,
            lost_error: None,
            sink_drops: None,
            sink_report: 0,
            written_event_time: 0,
            report_try_at: Instant::now(),
            pacer: pace::Pacer::new(config.poll_gap_max_us, config.ring_capacity),
            pass_full: false,
        }
    }
}

impl<R: Record, F: Formatter<R>, S: Sink> ConsumerLoop<R, F, S> {
    pub(super) fn run(mut self) {
        if let Some(cpu) = self.config.consumer_cpu {
            // Best effort: an invalid CPU leaves the thread unpinned.
            let _ = crate::affinity::pin_current_thread(cpu);
        }
        if let Some(cal) = self.clock.calibration() {
            self.formatter.tsc_calibration(&cal);
        }
        let mut idle_rounds = 0u32;
        loop {
            if let Some(ack) = self.stop.take() {
                let r = self.finish();
                let _ = ack.send(r);
                return;
            }
            while let Ok(msg) = self.rx.try_recv() {
                if self.control(msg) {
                    return;
                }
            }
            if self.drain_once() > 0 {
                idle_rounds = 0;
                // Not a whole burst anywhere: the consumer has caught up;
                // let records gather before polling the indices again.
                if let Some(wait) = self.pacer.after_pass(self.pass_full) {
                    // Lean passes in a row (a low rate that never leaves
                    // the rings empty): write the partial batch, as an idle
                    // consumer does, so records do not sit in it until it
                    // fills.
                    if self.pacer.at_max() && self.buf.len() > self.sink_report {
                        self.write_batch();
                    }
                    pace::Pacer::pause(wait);
                }
                continue;
            }
            // Idle: every ring is empty; the reorder window keeps what it
            // staged until the rings holding it back show newer times or
            // go idle (see `crate::reorder`).
            if self.reorder.as_ref().is_some_and(|r| r.len() > 0) {
                self.emit_reordered(false);
            }
            // Idle: do not sit on a partial batch while nothing arrives. A
            // batch of nothing but the sink drop report is tried at most
            // every RETRY_BACKOFF_MAX: the sink may still be failing.
            if self.buf.len() > self.sink_report || (!self.buf.is_empty() && self.report_try_due())
            {
                self.write_batch();
            }
            self.maintain();
            if idle_rounds == 0 {
                self.recalibrate();
            }
            // Drop finished rings, writing their last drop report first
            // (after `is_finished`, every drop of their producers is seen).
            let mut i = 0;
            while i < self.rings.len() {
                if self.rings[i].is_finished() {
                    if self.config.drop_reports {
                        self.report_drops(i);
                    }
                    if let Some(ro) = &mut self.reorder {
                        // Kept until its staged records are written; it
                        // holds no other ring's back meanwhile.
                        ro.finish(i);
                        if ro.has_staged(i) {
                            i += 1;
                            continue;
                        }
                        ro.remove(i);
                    }
                    self.rings.remove(i);
                } else {
                    i += 1;
                }
            }
            idle_rounds = idle_rounds.saturating_add(1);
            // Paced, the spinning phase is 8 polls (the pauses add up to
            // at most 8 × the bound) instead of 64 back to back.
            let spin_rounds = if self.pacer.enabled() { 8 } else { 64 };
            if idle_rounds < spin_rounds {
                match self.pacer.after_pass(false) {
                    Some(wait) => pace::Pacer::pause(wait),
                    None => core::hint::spin_loop(),
                }
            } else if idle_rounds < spin_rounds + 64 {
                std::thread::yield_now();
            } else {
                let wait = Duration::from_micros(
                    (u64::from(idle_rounds - spin_rounds - 63) * 10).min(self.config.idle_sleep_us),
                );
                match self.rx.recv_timeout(wait) {
                    Ok(msg) => {
                        if self.control(msg) {
                            return;
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => {
                        // The Logger is gone without a shutdown; the error
                        // is counted in sink_errors by `finish`.
                        let _ = self.finish();
                        return;
                    }
                }
            }
        }
    }

    /// Handles one control message; true when the loop must end.
    fn control(&mut self, msg: Control<R>) -> bool {
        match msg {
            Control::AddRing(c) => {
                self.rings.push(c);
                false
            }
            Control::Flush(ack) => {
                self.write_batch();
                let r = self.sink.flush();
                self.count_err(&r);
                // What the flush wrote of pending records (an archive's
                // partial blocks) is booked before the caller sees the
                // answer, so its stats include them.
                let p = self.sink.poll();
                self.absorb(p);
                let _ = ack.send(r.map_err(sink_io));
                false
            }
            Control::Reopen(ack) => {
                self.write_batch();
                let r = self.sink.reopen();
                self.count_err(&r);
                let _ = ack.send(r.map_err(sink_io));
                false
            }
            Control::Shutdown(ack) => {
                let r = self.finish();
                let _ = ack.send(r);
                true
            }
        }
    }

    /// Periodic sink work (`tick`, then `poll`), at most every
    /// [`TICK_PERIOD`].
    fn maintain(&mut self) {
        let now = Instant::now();
        if now < self.next_tick {
            return;
        }
        self.next_tick = now + TICK_PERIOD;
        let r = self.sink.tick(now);
        self.count_err(&r);
        let p = self.sink.poll();
        self.absorb(p);
    }

    /// Waits up to `backoff` before a retry, serving control messages
    /// meanwhile: rings are added, flush and reopen are answered, and a
    /// shutdown request starts the shutdown deadline (served by `run`).
    fn wait_for_retry(&mut self, backoff: Duration, last: &SinkError) {
        let until = Instant::now() + backoff;
        loop {
            let now = Instant::now();
            if now >= until {
                break;
            }
            match self.rx.recv_timeout(until - now) {
                Ok(Control::AddRing(c)) => self.rings.push(c),
                Ok(Control::Flush(ack)) => {
                    let _ = ack.send(Err(io::Error::new(
                        last.io().kind(),
                        format!("sink is retrying a batch: {last}"),
                    )));
                }
                Ok(Control::Reopen(ack)) => {
                    let r = self.sink.reopen();
                    self.count_err(&r);
                    let _ = ack.send(r.map_err(sink_io));
                }
                Ok(Control::Shutdown(ack)) => {
                    self.stop_requested(ack);
                    break;
                }
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => {
                    // The Logger is gone without a shutdown: stop as if
                    // asked, with nobody to answer.
                    let (tx, _rx) = bounded(1);
                    self.stop_requested(tx);
                    break;
                }
            }
        }
        self.next_tick = Instant::now();
        self.maintain();
    }

    fn stop_requested(&mut self, ack: Sender<io::Result<()>>) {
        self.deadline.get_or_insert_with(|| {
            Instant::now() + Duration::from_millis(self.config.shutdown_timeout_ms)
        });
        if self.stop.is_none() {
            self.stop = Some(ack);
        } else {
            let _ = ack.send(Ok(()));
        }
    }

    /// Recalibrates the TSC clock if a second has passed and hands the new
    /// calibration to the formatter.
    fn recalibrate(&mut self) {
        if self.clock.maybe_recalibrate(realtime_ns()) {
            if let Some(cal) = self.clock.calibration() {
                self.formatter.tsc_calibration(&cal);
            }
        }
    }

    /// Drains until every ring is empty, writes, flushes, waits for pending
    /// deliveries until the shutdown deadline, closes; what is still
    /// undelivered is counted in `dropped_shutdown`.
    fn finish(&mut self) -> io::Result<()> {
        let deadline = *self.deadline.get_or_insert_with(|| {
            Instant::now() + Duration::from_millis(self.config.shutdown_timeout_ms)
        });
        while let Ok(msg) = self.rx.try_recv() {
            match msg {
                Control::AddRing(c) => self.rings.push(c),
                Control::Flush(ack) | Control::Shutdown(ack) | Control::Reopen(ack) => {
                    let _ = ack.send(Ok(()));
                }
            }
        }
        // The reorder window stages everything the rings hold, then
        // writes it in time order.
        if let Some(ro) = &mut self.reorder {
            ro.close();
        }
        while self.drain_once() > 0 {}
        self.emit_reordered(true);
        if let Some(n) = self.reorder.as_ref().map(|r| r.forced()).filter(|&n| n > 0) {
            crate::diag_line!(
                "dplog: reorder window: {n} record(s) written while a ring holding them back had a full staged queue (ring capacity) without showing a time one window newer; they are in order unless that ring later wrote older records (a larger [ring] capacity holds more)"
            );
        }
        self.write_batch();
        // The last batch was dropped: its drop report gets one try alone.
        if self.sink_report > 0 {
            self.write_batch();
        }
        let flushed = self.sink.flush();
        self.count_err(&flushed);
        let drained = self.sink.drain(deadline);
        self.count_err(&drained);
        let p = self.sink.poll();
        self.absorb(p);
        let closed = self.sink.close();
        self.count_err(&closed);
        let p = self.sink.poll();
        self.absorb(p);
        if self.pending > 0 {
            bump(&self.totals.dropped_shutdown, self.pending as u64);
            self.pending = 0;
            // Relaxed: single-writer statistic (see `ConsumerTotals`).
            self.totals.sink_pending.store(0, Ordering::Relaxed);
        }
        let r = flushed.and(drained).and(closed).map_err(sink_io);
        match (r, self.lost_error.take()) {
            // The sink closed cleanly but records were lost to a write
            // error: report that error, not a silent success.
            (Ok(()), Some((kind, msg))) => Err(io::Error::new(
                kind,
                format!(
                    "sink {}: records were not written: {msg}",
                    self.sink.describe()
                ),
            )),
            (r, _) => r,
        }
    }
}
