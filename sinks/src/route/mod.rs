//! Fan-out (one batch to several sinks) and failover (a primary sink and a
//! secondary that takes over while the primary fails).

#[cfg(feature = "config")]
pub mod config;

use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::accounting::bump;
use dplog_core::{Accepted, Progress, Sink, SinkCounters, SinkError};

/// The named counters of several sinks under prefixes
/// (`sink0.syslog.too_large`, `primary.file.rotations`), after the
/// router's own.
struct Nested {
    own: Vec<(String, Arc<dyn Fn() -> u64 + Send + Sync>)>,
    children: Vec<(String, Arc<dyn SinkCounters>)>,
}

impl SinkCounters for Nested {
    fn named(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = self.own.iter().map(|(n, f)| (n.clone(), f())).collect();
        for (prefix, c) in &self.children {
            v.extend(
                c.named()
                    .into_iter()
                    .map(|(n, x)| (format!("{prefix}.{n}"), x)),
            );
        }
        v
    }
}

/// A boxed sink, as built from configuration.
pub type BoxSink = Box<dyn Sink>;

/// Per-child counters of a [`FanOut`], indexed like its children; written
/// by the consumer thread only (Relaxed statistics).
#[derive(Debug, Default)]
pub struct ChildCounters {
    /// Batches each child took (`Delivered` or `Pending`).
    pub batches: Vec<AtomicU64>,
    /// Errors each child returned (retryable or permanent), from any call.
    pub errors: Vec<AtomicU64>,
    /// Batches each child refused for good (that child lost them).
    pub dropped_batches: Vec<AtomicU64>,
    /// Record lines each child wrote or had acknowledged (asynchronous
    /// children: as their delivery reports arrive); in-band drop-report
    /// lines are not counted.
    pub written_lines: Vec<AtomicU64>,
    /// Record lines each child lost for good (refused batches, failed
    /// deliveries); drop-report lines are not counted.
    pub failed_lines: Vec<AtomicU64>,
}

/// What one child did with the batch being written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Delivered,
    Pending,
    Refused,
}

/// Writes every batch to every child sink, in order.
///
/// Accounting: a record counts as written only when **every** child has
/// written it (an asynchronous child such as Kafka: acknowledged it), and
/// as dropped (`dropped_sink`) when any child lost it for good; until then
/// it is pending. A batch every child wrote at once is
/// [`Accepted::Delivered`]; otherwise it is [`Accepted::Pending`] and
/// [`Sink::poll`] reports, in lines, `written` = the fewest lines any child
/// has written and `failed` = the most lines any child has lost, so
/// `written + failed + pending` always equals what was handed over, and
/// when every child has settled each line, `written + failed` is exact.
/// Per-child figures are in [`ChildCounters`].
///
/// A retryable error from any child is returned (so the runtime retries);
/// children that already took the batch are skipped on the retry, so none
/// receives it twice. A batch every child refuses is a permanent error.
///
/// Lines are counted by newline, less the in-band drop-report lines the
/// runtime marks ([`Sink::write_batch_marked`]), which are passed on to
/// every child with their marks and never count as records. A batch of
/// the binary format (whole frames) counts its `R` frames instead, one
/// per record: its in-band drop reports are `D` frames, not records.
pub struct FanOut {
    children: Vec<BoxSink>,
    /// What each child did with the batch being retried (`None`: not yet
    /// taken).
    outcome: Vec<Option<Outcome>>,
    /// The first child's permanent error on the batch being written.
    first_refusal: Option<SinkError>,
    /// Fingerprint of the batch being retried.
    retrying: Option<u64>,
    counters: Arc<ChildCounters>,
    /// Per child, over `Pending` batches: lines written, lines lost, bytes
    /// written.
    pend_written: Vec<u64>,
    pend_failed: Vec<u64>,
    pend_bytes: Vec<u64>,
    /// Per child: lines of batches the runtime gave up on while this child
    /// held them pending; their later outcomes are not booked again.
    discount: Vec<u64>,
    /// Totals already reported through `poll`: written, failed, bytes.
    reported: (u64, u64, u64),
    /// Lines of the batch being retried.
    retrying_lines: u64,
}

impl std::fmt::Debug for FanOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let children: Vec<String> = self.children.iter().map(|c| c.describe()).collect();
        f.debug_struct("FanOut")
            .field("children", &children)
            .field("retrying_lines", &self.retrying_lines)
            .finish_non_exhaustive()
    }
}

impl FanOut {
    /// Calls `f` on every child, counting each child's error; returns the
    /// first error (every child is called whatever the others return).
    fn each(
        &mut self,
        mut f: impl FnMut(&mut BoxSink) -> Result<(), SinkError>,
    ) -> Result<(), SinkError> {
        let mut r = Ok(());
        for (i, c) in self.children.iter_mut().enumerate() {
            if let Err(e) = f(c) {
                bump(&self.counters.errors[i], 1);
                r = r.and(Err(e));
            }
        }
        r
    }

    /// Builds a fan-out over `children` (at least one).
    ///
    /// Errors: `InvalidInput` for an empty list.
    pub fn new(children: Vec<BoxSink>) -> io::Result<Self> {
        if children.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "fan-out needs at least one sink",
            ));
        }
        let n = children.len();
        let v = || (0..n).map(|_| AtomicU64::new(0)).collect();
        let counters = ChildCounters {
            batches: v(),
            errors: v(),
            dropped_batches: v(),
            written_lines: v(),
            failed_lines: v(),
        };
        Ok(Self {
            outcome: vec![None; n],
            children,
            first_refusal: None,
            retrying: None,
            counters: Arc::new(counters),
            pend_written: vec![0; n],
            pend_failed: vec![0; n],
            pend_bytes: vec![0; n],
            discount: vec![0; n],
            reported: (0, 0, 0),
            retrying_lines: 0,
        })
    }

    /// Per-child counters.
    pub fn counters(&self) -> Arc<ChildCounters> {
        self.counters.clone()
    }

    /// A new batch replaces the one being retried: the runtime gave up on
    /// it (and counted all its records); children holding it pending will
    /// still report on it, which must not be booked twice.
    fn forget_retried_batch(&mut self, lines: u64) {
        for (i, o) in self.outcome.iter_mut().enumerate() {
            if *o == Some(Outcome::Pending) {
                self.discount[i] += lines;
            }
            *o = None;
        }
        self.first_refusal = None;
    }
}

/// Lines in a batch (every record ends with a newline).
fn lines_in(batch: &[u8]) -> u64 {
    let n = memchr::memchr_iter(b'\n', batch).count();
    let unterminated = !batch.is_empty() && batch[batch.len() - 1] != b'\n';
    (n + usize::from(unterminated)) as u64
}

/// The `R` frames of `batch` if it is whole frames of the binary format
/// (`[kind][0][len u16 LE][len bytes]`, kinds `H`, `S`, `R`, `C`, `D`,
/// the last frame ending at the batch's end); `None` for any other batch.
/// A text format never puts a 0 byte second, so a text batch is never
/// taken for frames.
fn binary_records_in(batch: &[u8]) -> Option<u64> {
    let mut records = 0;
    for f in dplog_formatters::binary::frames(batch) {
        records += u64::from(f.ok()?.0 == b'R');
    }
    Some(records)
}

/// Records in a batch: of the binary format, its `R` frames (children
/// such as the archive and ClickHouse report records, and a binary batch
/// has no line structure); else every line less the drop-report lines in
/// `reports`.
fn record_lines_in(batch: &[u8], reports: &[Range<usize>]) -> u64 {
    if let Some(n) = binary_records_in(batch) {
        return n;
    }
    let marked: u64 = reports
        .iter()
        .filter_map(|r| batch.get(r.clone()))
        .map(lines_in)
        .sum();
    lines_in(batch).saturating_sub(marked)
}

impl Sink for FanOut {
    fn write_batch(&mut self, batch: &[u8]) -> Result<Accepted, SinkError> {
        self.write_batch_marked(batch, &[])
    }

    fn write_batch_marked(
        &mut self,
        batch: &[u8],
        reports: &[Range<usize>],
    ) -> Result<Accepted, SinkError> {
        let key = crate::accounting::fingerprint(batch);
        let lines = record_lines_in(batch, reports);
        if self.retrying.is_some_and(|k| k != key) {
            self.forget_retried_batch(self.retrying_lines);
        }
        if self.retrying != Some(key) {
            self.outcome.iter_mut().for_each(|o| *o = None);
            self.first_refusal = None;
        }
        let mut retry: Option<SinkError> = None;
        for (i, child) in self.children.iter_mut().enumerate() {
            if self.outcome[i].is_some() {
                continue;
            }
            match child.write_batch_marked(batch, reports) {
                Ok(a) => {
                    bump(&self.counters.batches[i], 1);
                    self.outcome[i] = Some(match a {
                        Accepted::Delivered => Outcome::Delivered,
                        Accepted::Pending => Outcome::Pending,
                    });
                }
                Err(e) => {
                    bump(&self.counters.errors[i], 1);
                    if e.is_retryable() {
                        retry.get_or_insert(e);
                    } else {
                        self.outcome[i] = Some(Outcome::Refused);
                        bump(&self.counters.dropped_batches[i], 1);
                        if self.first_refusal.is_none() {
                            self.first_refusal = Some(e);
                        }
                    }
                }
            }
        }
        if let Some(e) = retry {
            self.retrying = Some(key);
            self.retrying_lines = lines;
            return Err(e);
        }
        self.retrying = None;
        let outcomes: Vec<Outcome> = self.outcome.iter_mut().filter_map(|o| o.take()).collect();
        let refusal = self.first_refusal.take();
        for (i, o) in outcomes.iter().enumerate() {
            match o {
                Outcome::Delivered => bump(&self.counters.written_lines[i], lines),
                Outcome::Refused => bump(&self.counters.failed_lines[i], lines),
                Outcome::Pending => {}
            }
        }
        if outcomes.iter().all(|o| *o == Outcome::Delivered) {
            return Ok(Accepted::Delivered);
        }
        if outcomes.iter().all(|o| *o == Outcome::Refused) {
            return Err(refusal.unwrap_or_else(|| {
                SinkError::Permanent(io::Error::other(
                    "every sink of the fan-out refused the batch",
                ))
            }));
        }
        // Mixed: the batch settles line by line through `poll`.
        for (i, o) in outcomes.iter().enumerate() {
            match o {
                Outcome::Delivered => {
                    self.pend_written[i] += lines;
                    self.pend_bytes[i] += batch.len() as u64;
                }
                Outcome::Refused => self.pend_failed[i] += lines,
                Outcome::Pending => {}
            }
        }
        Ok(Accepted::Pending)
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        self.each(|c| c.flush())
    }

    fn write_out(&mut self) -> Result<(), SinkError> {
        self.each(|c| c.write_out())
    }

    fn sync_all(&mut self) -> Result<(), SinkError> {
        self.each(|c| c.sync_all())
    }

    fn tick(&mut self, now: Instant) -> Result<(), SinkError> {
        self.each(|c| c.tick(now))
    }

    fn poll(&mut self) -> Progress {
        for (i, c) in self.children.iter_mut().enumerate() {
            let mut q = c.poll();
            bump(&self.counters.written_lines[i], q.delivered_records);
            bump(&self.counters.failed_lines[i], q.failed_records);
            // Outcomes of batches the runtime already gave up on.
            let d = self.discount[i].min(q.delivered_records);
            q.delivered_records -= d;
            self.discount[i] -= d;
            let f = self.discount[i].min(q.failed_records);
            q.failed_records -= f;
            self.discount[i] -= f;
            self.pend_written[i] += q.delivered_records;
            self.pend_failed[i] += q.failed_records;
            self.pend_bytes[i] += q.delivered_bytes;
        }
        // Written everywhere: the fewest any child wrote; lost: the most any
        // child lost. Both only grow, so the deltas are never negative.
        let w = self.pend_written.iter().copied().min().unwrap_or(0);
        let f = self.pend_failed.iter().copied().max().unwrap_or(0);
        let b = self.pend_bytes.iter().copied().min().unwrap_or(0);
        let p = Progress {
            delivered_records: w - self.reported.0,
            failed_records: f - self.reported.1,
            delivered_bytes: b - self.reported.2,
        };
        self.reported = (w, f, b);
        p
    }

    fn drain(&mut self, deadline: Instant) -> Result<(), SinkError> {
        let mut r = Ok(());
        for (i, c) in self.children.iter_mut().enumerate() {
            if let Err(e) = c.drain(deadline) {
                // Every child's error is counted; the first is returned.
                bump(&self.counters.errors[i], 1);
                r = r.and(Err(e));
            }
        }
        r
    }

    fn reopen(&mut self) -> Result<(), SinkError> {
        let mut r = Ok(());
        for (i, c) in self.children.iter_mut().enumerate() {
            if let Err(e) = c.reopen() {
                // Every child's error is counted; the first is returned.
                bump(&self.counters.errors[i], 1);
                r = r.and(Err(e));
            }
        }
        r
    }

    fn close(&mut self) -> Result<(), SinkError> {
        let mut r = Ok(());
        for (i, c) in self.children.iter_mut().enumerate() {
            if let Err(e) = c.close() {
                // Every child's error is counted; the first is returned.
                bump(&self.counters.errors[i], 1);
                r = r.and(Err(e));
            }
        }
        r
    }
    fn abandon(&mut self) {
        if self.retrying.take().is_some() {
            self.forget_retried_batch(self.retrying_lines);
        }
        for c in &mut self.children {
            c.abandon();
        }
    }

    fn describe(&self) -> String {
        let names: Vec<String> = self.children.iter().map(|c| c.describe()).collect();
        format!("fan-out [{}]", names.join(", "))
    }

    /// Each child's counters, prefixed `sink0.`, `sink1.`, ... in child
    /// order.
    fn named_counters(&self) -> Option<Arc<dyn SinkCounters>> {
        let children: Vec<(String, Arc<dyn SinkCounters>)> = self
            .children
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.named_counters().map(|n| (format!("sink{i}"), n)))
            .collect();
        if children.is_empty() {
            return None;
        }
        Some(Arc::new(Nested {
            own: Vec::new(),
            children,
        }))
    }
}

/// Counters of a [`Failover`] (Relaxed statistics, consumer thread only).
#[derive(Debug, Default)]
pub struct FailoverCounters {
    /// Switches from the primary to the secondary.
    pub failovers: AtomicU64,
    /// Switches back to the primary after a successful probe.
    pub failbacks: AtomicU64,
    /// Batches written to the secondary.
    pub secondary_batches: AtomicU64,
    /// Errors of the primary (each failed write or probe, and the errors
    /// of its flush/tick/drain/close while the secondary is active, which
    /// are not returned).
    pub primary_errors: AtomicU64,
    /// Errors of the secondary's flush/tick/drain/close while the primary
    /// is active (not returned).
    pub secondary_errors: AtomicU64,
}

/// A primary sink and a secondary that takes every batch while the primary
/// fails (retryable or permanent error). Each switch, either way, is
/// announced on stderr once (`dplog: failover: ...`). An asynchronous primary fails by
/// refusing batches too: a Kafka sink whose cluster sends no delivery
/// report for its `ack_timeout_ms` refuses with a retryable error, so the
/// failover engages; what that primary already held stays pending (counted
/// as written when acknowledged, else `dropped_shutdown`). While on the secondary, the
/// primary is tried again with the next batch every `probe_interval`; the
/// first success switches back.
///
/// A batch the primary wrote in part before failing goes whole to the
/// secondary: across the two destinations delivery is at least once.
pub struct Failover {
    primary: BoxSink,
    secondary: BoxSink,
    on_secondary: bool,
    next_probe: Instant,
    probe_interval: Duration,
    counters: Arc<FailoverCounters>,
}

impl std::fmt::Debug for Failover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Failover")
            .field("primary", &self.primary.describe())
            .field("secondary", &self.secondary.describe())
            .field("on_secondary", &self.on_secondary)
            .field("probe_interval", &self.probe_interval)
            .finish_non_exhaustive()
    }
}

impl Failover {
    /// `primary` first, `secondary` while the primary fails; the primary is
    /// probed again every `probe_interval`.
    pub fn new(primary: BoxSink, secondary: BoxSink, probe_interval: Duration) -> Self {
        Self {
            primary,
            secondary,
            on_secondary: false,
            next_probe: Instant::now(),
            probe_interval,
            counters: Arc::new(FailoverCounters::default()),
        }
    }

    /// The counters.
    pub fn counters(&self) -> Arc<FailoverCounters> {
        self.counters.clone()
    }

    /// True while batches go to the secondary.
    pub fn on_secondary(&self) -> bool {
        self.on_secondary
    }
}

fn both(a: Result<(), SinkError>, b: Result<(), SinkError>) -> Result<(), SinkError> {
    a.and(b)
}

impl Failover {
    /// The active sink's result is returned; the other's error is counted.
    fn pick(&self, p: Result<(), SinkError>, s: Result<(), SinkError>) -> Result<(), SinkError> {
        if self.on_secondary {
            if p.is_err() {
                bump(&self.counters.primary_errors, 1);
            }
            s
        } else {
            if s.is_err() {
                bump(&self.counters.secondary_errors, 1);
            }
            p
        }
    }
}

impl Sink for Failover {
    fn write_batch(&mut self, batch: &[u8]) -> Result<Accepted, SinkError> {
        self.write_batch_marked(batch, &[])
    }

    fn write_batch_marked(
        &mut self,
        batch: &[u8],
        reports: &[Range<usize>],
    ) -> Result<Accepted, SinkError> {
        let now = Instant::now();
        if !self.on_secondary || now >= self.next_probe {
            match self.primary.write_batch_marked(batch, reports) {
                Ok(a) => {
                    if self.on_secondary {
                        self.on_secondary = false;
                        bump(&self.counters.failbacks, 1);
                        dplog_core::diag_line!(
                            "dplog: failover: {} works again; batches go back to it",
                            self.primary.describe()
                        );
                    }
                    return Ok(a);
                }
                Err(e) => {
                    bump(&self.counters.primary_errors, 1);
                    if !self.on_secondary {
                        self.on_secondary = true;
                        bump(&self.counters.failovers, 1);
                        // Once per switch, so an operator sees where the
                        // records go (the runtime does not see this error).
                        dplog_core::diag_line!(
                            "dplog: failover: {} failed ({}); writing to {} and retrying it every {} ms",
                            self.primary.describe(),
                            e.io(),
                            self.secondary.describe(),
                            self.probe_interval.as_millis()
                        );
                    }
                    self.next_probe = now + self.probe_interval;
                }
            }
        }
        let r = self.secondary.write_batch_marked(batch, reports);
        if r.is_ok() {
            bump(&self.counters.secondary_batches, 1);
        }
        r
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        let p = self.primary.flush();
        let s = self.secondary.flush();
        self.pick(p, s)
    }

    fn write_out(&mut self) -> Result<(), SinkError> {
        let p = self.primary.write_out();
        let s = self.secondary.write_out();
        self.pick(p, s)
    }

    fn sync_all(&mut self) -> Result<(), SinkError> {
        let p = self.primary.sync_all();
        let s = self.secondary.sync_all();
        self.pick(p, s)
    }

    fn tick(&mut self, now: Instant) -> Result<(), SinkError> {
        let p = self.primary.tick(now);
        let s = self.secondary.tick(now);
        self.pick(p, s)
    }

    fn poll(&mut self) -> Progress {
        let mut p = self.primary.poll();
        p += self.secondary.poll();
        p
    }

    fn drain(&mut self, deadline: Instant) -> Result<(), SinkError> {
        let p = self.primary.drain(deadline);
        let s = self.secondary.drain(deadline);
        self.pick(p, s)
    }

    fn reopen(&mut self) -> Result<(), SinkError> {
        both(self.primary.reopen(), self.secondary.reopen())
    }

    fn close(&mut self) -> Result<(), SinkError> {
        let p = self.primary.close();
        let s = self.secondary.close();
        self.pick(p, s)
    }
    fn abandon(&mut self) {
        self.primary.abandon();
        self.secondary.abandon();
    }

    fn describe(&self) -> String {
        format!(
            "failover [{} then {}]",
            self.primary.describe(),
            self.secondary.describe()
        )
    }

    /// `failover.failovers`, `failover.failbacks`, then the primary's
    /// counters prefixed `primary.` and the secondary's `secondary.`.
    fn named_counters(&self) -> Option<Arc<dyn SinkCounters>> {
        let c = self.counters.clone();
        let d = self.counters.clone();
        // Relaxed: statistics, exact after the consumer thread is joined.
        let own: Vec<(String, Arc<dyn Fn() -> u64 + Send + Sync>)> = vec![
            (
                "failover.failovers".into(),
                Arc::new(move || c.failovers.load(Ordering::Relaxed)),
            ),
            (
                "failover.failbacks".into(),
                Arc::new(move || d.failbacks.load(Ordering::Relaxed)),
            ),
        ];
        let children = [("primary", &self.primary), ("secondary", &self.secondary)]
            .into_iter()
            .filter_map(|(p, s)| s.named_counters().map(|n| (p.to_string(), n)))
            .collect();
        Some(Arc::new(Nested { own, children }))
    }
}
