//! The batch buffer handed to the sink: writes, retries, give-ups and
//! the sink's asynchronous outcomes.

use super::*;

impl<R: Record, F: Formatter<R>, S: Sink> ConsumerLoop<R, F, S> {
    /// Counts a failed sink call in `sink_errors` (and `sink_retries` when
    /// retryable).
    pub(super) fn count_err<T>(&self, r: &Result<T, SinkError>) {
        if let Err(e) = r {
            bump(&self.totals.sink_errors, 1);
            if e.is_retryable() {
                bump(&self.totals.sink_retries, 1);
            }
        }
    }

    /// Books asynchronous outcomes reported by `Sink::poll`.
    pub(super) fn absorb(&mut self, p: Progress) {
        if p == Progress::default() {
            return;
        }
        let t = &self.totals;
        bump(&t.written_records, p.delivered_records);
        bump(&t.written_bytes, p.delivered_bytes);
        bump(&t.dropped_sink, p.failed_records);
        // Signed: outcomes of a batch's records the sink sent before a
        // retryable error may arrive before the batch is accepted.
        self.pending -= (p.delivered_records + p.failed_records) as i64;
        // Relaxed: single-writer statistic (see `ConsumerTotals`).
        t.sink_pending
            .store(self.pending.max(0) as u64, Ordering::Relaxed);
    }

    /// Books the enqueue-to-write latency of the batch's sampled records,
    /// now that the sink has taken the batch.
    pub(super) fn record_latency(&mut self) {
        if self.batch_samples.is_empty() {
            return;
        }
        let now = now_ticks();
        let clock = &self.clock;
        self.latency.record_all(
            self.batch_samples
                .iter()
                .map(|&t| clock.ticks_to_ns(now.saturating_sub(t))),
        );
        self.batch_samples.clear();
    }

    /// Hands the batch buffer to the sink. A retryable error is retried
    /// with the same bytes after a backoff (1 ms doubling to 200 ms) until
    /// it succeeds, fails for good, or the shutdown deadline passes; the
    /// rings meanwhile fill up and producers see their backpressure policy.
    pub(super) fn write_batch(&mut self) {
        if self.buf.is_empty() {
            // Records that formatted to zero bytes (a formatter that skips
            // a record type): there is nothing for the sink to accept or
            // refuse, so they are done and count as written (see
            // `Stats::written_records`); their latency samples are not
            // booked, as no sink took them.
            if self.batch_records > 0 {
                bump(&self.totals.written_records, self.batch_records);
                self.batch_records = 0;
            }
            self.batch_empty = 0;
            self.batch_samples.clear();
            return;
        }
        // Past the shutdown deadline with the sink failing, every further
        // try could block for the sink's own I/O timeout (a receiver that
        // stopped reading): one such wait per batch left in the rings made
        // the shutdown last far beyond the deadline. The batch is given up
        // on without a try, as a tried one would be.
        if self.failing_since.is_some() && self.deadline.is_some_and(|d| Instant::now() >= d) {
            let dropped = self.batch_records;
            bump(&self.totals.dropped_shutdown, dropped);
            self.abandoned += dropped;
            self.clear_batch();
            return;
        }
        // Nothing but the report of earlier sink drops: one try while the
        // sink fails (it is placed again at the head of the next batch).
        let report_only = self.sink_report > 0 && self.buf.len() == self.sink_report;
        let mut backoff = RETRY_BACKOFF_MIN;
        // The sink may take the buffer on success (and give another back).
        let batch_len = self.buf.len();
        loop {
            let r = self
                .sink
                .write_batch_owned(&mut self.buf, &self.batch_reports);
            self.count_err(&r);
            if r.is_ok() {
                self.sink_recovered();
                self.sink_report_landed();
                self.written_event_time = self.last_event_time;
            }
            match r {
                Ok(Accepted::Delivered) => {
                    self.record_latency();
                    let t = &self.totals;
                    bump(&t.written_records, self.batch_records);
                    bump(&t.written_bytes, batch_len as u64);
                    bump(&t.batches, 1);
                    break;
                }
                Ok(Accepted::Pending) => {
                    self.record_latency();
                    let t = &self.totals;
                    bump(&t.batches, 1);
                    // Records that formatted to nothing have no line for
                    // the sink to report on: written with the batch.
                    bump(&t.written_records, self.batch_empty);
                    self.pending += (self.batch_records - self.batch_empty) as i64;
                    // Relaxed: single-writer statistic (see `ConsumerTotals`).
                    t.sink_pending
                        .store(self.pending.max(0) as u64, Ordering::Relaxed);
                    break;
                }
                Err(SinkError::Permanent(_)) => {
                    // Counted in sink_errors and dropped_sink; the sink
                    // refused this batch alone and may take the next.
                    let dropped = self.book_refused();
                    bump(&self.totals.dropped_sink, dropped);
                    self.note_sink_drops(dropped);
                    break;
                }
                Err(e @ SinkError::Retryable(_)) => {
                    let now = Instant::now();
                    let since = *self.failing_since.get_or_insert(now);
                    if self.deadline.is_some_and(|d| now >= d) {
                        let dropped = self.book_refused();
                        bump(&self.totals.dropped_shutdown, dropped);
                        self.abandon(&e, dropped);
                        break;
                    }
                    let give_up = report_only
                        || self.config.sink_retry_timeout_ms.is_some_and(|ms| {
                            now.duration_since(since) >= Duration::from_millis(ms)
                        });
                    if give_up {
                        let dropped = self.book_refused();
                        bump(&self.totals.dropped_sink, dropped);
                        self.note_sink_drops(dropped);
                        self.abandon(&e, dropped);
                    }
                    self.diagnose(&e, now.duration_since(since));
                    if give_up {
                        break;
                    }
                    self.wait_for_retry(backoff, &e);
                    backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
                }
            }
        }
        self.clear_batch();
    }

    /// Empties the batch after the sink took it or it was given up on,
    /// places a pending sink drop report at the head of the next one, and
    /// serves the sink's periodic work.
    pub(super) fn clear_batch(&mut self) {
        self.buf.clear();
        self.batch_reports.clear();
        self.batch_records = 0;
        self.batch_empty = 0;
        self.batch_samples.clear();
        self.sink_report = 0;
        self.place_sink_report();
        self.maintain();
    }

    /// Books the batch being given up on after retryable errors; `dropped`
    /// of its records are lost.
    pub(super) fn abandon(&mut self, e: &SinkError, dropped: u64) {
        self.sink.abandon();
        self.abandoned += dropped;
        self.lost_error = Some((e.io().kind(), e.io().to_string()));
    }

    /// The batch in `buf` is refused for good: counts what the sink kept
    /// of it ([`Sink::kept_of_refused`]) as written and returns how many of
    /// its records are dropped.
    pub(super) fn book_refused(&mut self) -> u64 {
        let kept = self.sink.kept_of_refused(&self.buf, &self.batch_reports);
        let records = kept.records.min(self.batch_records);
        let t = &self.totals;
        bump(&t.written_records, records);
        bump(&t.written_bytes, kept.bytes.min(self.buf.len()) as u64);
        if kept.bytes >= self.sink_report {
            // The drop report at the head of the batch is in the output.
            self.sink_report_landed();
        }
        self.batch_records - records
    }
}
