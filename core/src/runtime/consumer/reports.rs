//! In-band drop reports (per ring and for the sink) and the
//! sink-failure diagnostics on stderr.

use super::*;

impl<R: Record, F: Formatter<R>, S: Sink> ConsumerLoop<R, F, S> {
    /// Writes in-band [`DropReport`]s for ring `i` if it has unreported
    /// drops: one per reason that has some ([`DropReport::with_reason`]),
    /// all of the same interval.
    pub(super) fn report_drops(&mut self, i: usize) {
        if let Some(d) = self.rings[i].take_drop_report() {
            let base = DropReport::new(
                self.rings[i].id(),
                0,
                self.clock.to_utc_ns(d.first_ns),
                self.clock.to_utc_ns(d.last_ns),
            )
            .with_record_time(self.last_event_time);
            for (reason, n) in d.reasons() {
                let rep = DropReport {
                    dropped: n,
                    ..base.with_reason(reason)
                };
                self.write_drop_report(&rep);
            }
            // Only a count no reason accounts for: reported as the ring's.
            if d.unattributed() > 0 {
                self.write_drop_report(&DropReport {
                    dropped: d.unattributed(),
                    ..base
                });
            }
        }
    }

    /// Formats one drop report into the batch.
    pub(super) fn write_drop_report(&mut self, rep: &DropReport) {
        let start = self.buf.len();
        self.formatter.format_drop_report(rep, &mut self.buf);
        if self.buf.len() > start {
            self.batch_reports.push(start..self.buf.len());
        }
        bump(&self.totals.drop_reports, 1);
    }

    /// Adds `n` records dropped in the sink to those the next in-band
    /// report announces.
    pub(super) fn note_sink_drops(&mut self, n: u64) {
        if n == 0 || !self.config.drop_reports {
            return;
        }
        let now = realtime_ns();
        match &mut self.sink_drops {
            Some(d) => {
                d.dropped += n;
                d.last_ns = now;
            }
            None => {
                self.sink_drops = Some(SinkDrops {
                    dropped: n,
                    first_ns: now,
                    last_ns: now,
                    after: self.written_event_time,
                })
            }
        }
    }

    /// Formats the report of the unreported sink drops at the head of the
    /// (empty) batch buffer, so it reaches the output with the first batch
    /// the sink takes.
    pub(super) fn place_sink_report(&mut self) {
        let Some(d) = self.sink_drops else {
            return;
        };
        debug_assert!(self.buf.is_empty());
        let rep = DropReport::sink(d.dropped, d.first_ns, d.last_ns).with_record_time(d.after);
        self.formatter.format_drop_report(&rep, &mut self.buf);
        if self.buf.is_empty() {
            // A format without in-band lines: the counters say it.
            self.sink_drops = None;
            bump(&self.totals.drop_reports, 1);
        } else {
            self.sink_report = self.buf.len();
            self.batch_reports.push(0..self.buf.len());
        }
    }

    /// The batch with the sink drop report at its head reached the output
    /// (whole, or the part with the report): those drops are reported.
    pub(super) fn sink_report_landed(&mut self) {
        if self.sink_report > 0 {
            self.sink_report = 0;
            self.sink_drops = None;
            bump(&self.totals.drop_reports, 1);
        }
    }

    /// True at most once per [`RETRY_BACKOFF_MAX`]: the idle loop may try a
    /// batch that holds only the sink drop report.
    pub(super) fn report_try_due(&mut self) -> bool {
        let now = Instant::now();
        if now < self.report_try_at {
            return false;
        }
        self.report_try_at = now + RETRY_BACKOFF_MAX;
        true
    }

    /// The sink took a batch: ends a failure episode (with a note on
    /// stderr if one was reported).
    pub(super) fn sink_recovered(&mut self) {
        if let Some(since) = self.failing_since.take() {
            if self.last_diag.is_some() {
                crate::diag_line!(
                    "dplog: sink {} recovered after failing for {:.1} s; {} records were dropped meanwhile",
                    self.sink.describe(),
                    since.elapsed().as_secs_f64(),
                    self.abandoned
                );
            }
        }
        self.last_diag = None;
        self.abandoned = 0;
    }

    /// Prints what is failing to stderr, at most once per [`DIAG_PERIOD`]:
    /// the sink, its OS error, for how long, how many records wait, and
    /// what happens next.
    pub(super) fn diagnose(&mut self, e: &SinkError, failing: Duration) {
        let now = Instant::now();
        if self
            .last_diag
            .is_some_and(|t| now.duration_since(t) < DIAG_PERIOD)
        {
            return;
        }
        self.last_diag = Some(now);
        let in_rings: usize = self.rings.iter().map(|r| r.len()).sum();
        let next = match self.config.sink_retry_timeout_ms {
            Some(ms) if failing >= Duration::from_millis(ms) => format!(
                "past sink_retry_timeout_ms = {ms}: batches are dropped (dropped_sink) until a write succeeds"
            ),
            Some(ms) => {
                format!("retrying with backoff; batches are dropped after sink_retry_timeout_ms = {ms}")
            }
            None => format!(
                "retrying with backoff until it recovers (sink_retry_timeout_ms is not set); producers see their backpressure policy ({})",
                self.config.backpressure.name()
            ),
        };
        crate::diag_line!(
            "dplog: sink {} failing for {:.1} s: {}; {} records waiting ({} in the batch, {} in rings), {} dropped since the failure began; {}",
            self.sink.describe(),
            failing.as_secs_f64(),
            e.io(),
            self.batch_records + in_rings as u64,
            self.batch_records,
            in_rings,
            self.abandoned,
            next
        );
    }
}
