//! Fan-out (one batch to several sinks) and failover (a primary sink and a
//! secondary that takes over while the primary fails).

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dplog_core::{Accepted, Progress, Sink, SinkError};

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
}

fn bump(c: &AtomicU64) {
    // Relaxed: single-writer statistic (the consumer thread).
    c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// Writes every batch to every child sink, in order.
///
/// Accounting follows the **first** child: the runtime's
/// `written_records` / `sink_pending` and [`Sink::poll`] progress are the
/// first child's; the others' outcomes are counted per child in
/// [`ChildCounters`]. A retryable error from any child is returned (so the
/// runtime retries); children that already took the batch are skipped on
/// the retry, so none receives it twice. A permanent error from a
/// non-first child drops the batch for that child only (counted).
pub struct FanOut {
    children: Vec<BoxSink>,
    /// Which children took the batch being retried.
    done: Vec<bool>,
    first: Option<Result<Accepted, ()>>,
    /// Fingerprint of the batch being retried.
    retrying: Option<u64>,
    counters: Arc<ChildCounters>,
}

impl FanOut {
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
        let counters = ChildCounters {
            batches: (0..n).map(|_| AtomicU64::new(0)).collect(),
            errors: (0..n).map(|_| AtomicU64::new(0)).collect(),
            dropped_batches: (0..n).map(|_| AtomicU64::new(0)).collect(),
        };
        Ok(Self {
            done: vec![false; n],
            children,
            first: None,
            retrying: None,
            counters: Arc::new(counters),
        })
    }

    /// Per-child counters.
    pub fn counters(&self) -> Arc<ChildCounters> {
        self.counters.clone()
    }
}

impl Sink for FanOut {
    fn write_batch(&mut self, batch: &[u8]) -> Result<Accepted, SinkError> {
        let key = crate::file::fingerprint(batch);
        if self.retrying != Some(key) {
            self.done.iter_mut().for_each(|d| *d = false);
            self.first = None;
        }
        let mut retry: Option<SinkError> = None;
        let mut first_err: Option<SinkError> = None;
        for (i, child) in self.children.iter_mut().enumerate() {
            if self.done[i] {
                continue;
            }
            match child.write_batch(batch) {
                Ok(a) => {
                    self.done[i] = true;
                    bump(&self.counters.batches[i]);
                    if i == 0 {
                        self.first = Some(Ok(a));
                    }
                }
                Err(e) => {
                    bump(&self.counters.errors[i]);
                    if e.is_retryable() {
                        retry.get_or_insert(e);
                    } else {
                        self.done[i] = true;
                        bump(&self.counters.dropped_batches[i]);
                        if i == 0 {
                            self.first = Some(Err(()));
                            first_err = Some(e);
                        }
                    }
                }
            }
        }
        if let Some(e) = retry {
            self.retrying = Some(key);
            return Err(e);
        }
        self.retrying = None;
        match (self.first.take(), first_err) {
            (Some(Ok(a)), _) => Ok(a),
            (_, Some(e)) => Err(e),
            // The first child refused permanently on an earlier attempt.
            _ => Err(SinkError::Permanent(io::Error::other(
                "first sink of the fan-out refused the batch",
            ))),
        }
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        let mut r = Ok(());
        for (i, c) in self.children.iter_mut().enumerate() {
            if let Err(e) = c.flush() {
                // Every child's error is counted; the first is returned.
                bump(&self.counters.errors[i]);
                r = r.and(Err(e));
            }
        }
        r
    }

    fn tick(&mut self, now: Instant) -> Result<(), SinkError> {
        let mut r = Ok(());
        for (i, c) in self.children.iter_mut().enumerate() {
            if let Err(e) = c.tick(now) {
                // Every child's error is counted; the first is returned.
                bump(&self.counters.errors[i]);
                r = r.and(Err(e));
            }
        }
        r
    }

    fn poll(&mut self) -> Progress {
        let mut p = Progress::default();
        for (i, c) in self.children.iter_mut().enumerate() {
            let q = c.poll();
            if i == 0 {
                p = q;
            }
        }
        p
    }

    fn drain(&mut self, deadline: Instant) -> Result<(), SinkError> {
        let mut r = Ok(());
        for (i, c) in self.children.iter_mut().enumerate() {
            if let Err(e) = c.drain(deadline) {
                // Every child's error is counted; the first is returned.
                bump(&self.counters.errors[i]);
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
                bump(&self.counters.errors[i]);
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
                bump(&self.counters.errors[i]);
                r = r.and(Err(e));
            }
        }
        r
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
/// fails (retryable or permanent error). While on the secondary, the
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
                bump(&self.counters.primary_errors);
            }
            s
        } else {
            if s.is_err() {
                bump(&self.counters.secondary_errors);
            }
            p
        }
    }
}

impl Sink for Failover {
    fn write_batch(&mut self, batch: &[u8]) -> Result<Accepted, SinkError> {
        let now = Instant::now();
        if !self.on_secondary || now >= self.next_probe {
            match self.primary.write_batch(batch) {
                Ok(a) => {
                    if self.on_secondary {
                        self.on_secondary = false;
                        bump(&self.counters.failbacks);
                    }
                    return Ok(a);
                }
                Err(_) => {
                    bump(&self.counters.primary_errors);
                    if !self.on_secondary {
                        self.on_secondary = true;
                        bump(&self.counters.failovers);
                    }
                    self.next_probe = now + self.probe_interval;
                }
            }
        }
        let r = self.secondary.write_batch(batch);
        if r.is_ok() {
            bump(&self.counters.secondary_batches);
        }
        r
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        let p = self.primary.flush();
        let s = self.secondary.flush();
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
}
