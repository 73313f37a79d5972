//! Draining the rings into the batch buffer, directly or through the
//! reorder window.

use super::*;

impl<R: Record, F: Formatter<R>, S: Sink> ConsumerLoop<R, F, S> {
    /// One round-robin pass: at most `burst` records from each ring.
    /// Returns the number of records read.
    pub(super) fn drain_once(&mut self) -> usize {
        let mut total = 0;
        self.pass_full = false;
        // A whole burst, or a whole ring smaller than a burst.
        let full_read = self.config.burst.min(self.config.ring_capacity);
        self.passes += 1;
        if self.passes % 64 == 0 {
            self.recalibrate();
        }
        if self.reorder.is_some() {
            return self.drain_reordered(total);
        }
        for i in 0..self.rings.len() {
            let buf = &mut self.buf;
            let fmt = &mut self.formatter;
            let samples = &mut self.batch_samples;
            let empty = &mut self.batch_empty;
            let last_time = &mut self.last_event_time;
            let schemas = &self.config.schemas;
            let event_time = self.event_time;
            let n = self.rings[i].read_burst_sampled(
                self.config.burst,
                |rec| {
                    let before = buf.len();
                    fmt.format(rec, buf);
                    *empty += u64::from(buf.len() == before);
                    *last_time = event_time(rec, schemas);
                },
                |t| samples.push(t),
            );
            self.batch_records += n as u64;
            self.pass_full |= n >= full_read;
            total += n;
            self.count_skipped();
            if self.config.drop_reports {
                self.report_drops(i);
            }
            if self.buf.len() >= self.config.batch_bytes {
                self.write_batch();
            }
        }
        if total > 0 {
            bump(&self.totals.formatted, total as u64);
        }
        total
    }

    /// Moves the records the formatter could not format out of the batch
    /// (they appended nothing, so they are among `batch_empty`) into
    /// `dropped_format`, with a line on stderr at most every 5 s.
    #[inline]
    pub(super) fn count_skipped(&mut self) {
        let skipped = self.formatter.take_skipped();
        if skipped == 0 {
            return;
        }
        self.skipped_count(skipped);
    }

    #[cold]
    pub(super) fn skipped_count(&mut self, skipped: u64) {
        self.batch_records -= skipped.min(self.batch_records);
        self.batch_empty -= skipped.min(self.batch_empty);
        bump(&self.totals.dropped_format, skipped);
        let now = Instant::now();
        if self
            .last_skip_diag
            .map_or(true, |t| now.duration_since(t) >= Duration::from_secs(5))
        {
            self.last_skip_diag = Some(now);
            crate::diag_line!(
                "dplog: {skipped} record(s) dropped: the formatter has no schema for their schema id, or they are shorter than their schema (dropped_format = {} so far)",
                self.totals.dropped_format.load(Ordering::Relaxed)
            );
        }
    }

    /// [`drain_once`](Self::drain_once) with the reorder window: stage one
    /// burst per ring, then format what the window lets out.
    pub(super) fn drain_reordered(&mut self, mut total: usize) -> usize {
        let full_read = self.config.burst.min(self.config.ring_capacity);
        let Some(mut ro) = self.reorder.take() else {
            return total;
        };
        let now = Instant::now();
        ro.track(self.rings.len(), now);
        for i in 0..self.rings.len() {
            let samples = &mut self.batch_samples;
            // A ring whose queue is full waits (see `crate::reorder`).
            let want = self.config.burst.min(ro.room(i));
            let n = self.rings[i].read_burst_sampled(
                want,
                |rec| ro.push(i, *rec, now),
                |t| samples.push(t),
            );
            self.pass_full |= n >= full_read;
            total += n;
            if self.config.drop_reports {
                self.report_drops(i);
            }
        }
        self.reorder = Some(ro);
        self.emit_reordered(false);
        total
    }

    /// Formats the records the reorder window releases (all of them if
    /// `all`), writing batches as they fill.
    pub(super) fn emit_reordered(&mut self, all: bool) {
        let Some(mut ro) = self.reorder.take() else {
            return;
        };
        loop {
            let buf = &mut self.buf;
            let fmt = &mut self.formatter;
            let limit = self.config.batch_bytes;
            let empty = &mut self.batch_empty;
            let last_time = &mut self.last_event_time;
            let schemas = &self.config.schemas;
            let event_time = self.event_time;
            // Stops after the record that fills the batch.
            let n = ro.emit(Instant::now(), all, |r| {
                let before = buf.len();
                fmt.format(r, buf);
                *empty += u64::from(buf.len() == before);
                *last_time = event_time(r, schemas);
                buf.len() < limit
            }) as u64;
            self.batch_records += n;
            bump(&self.totals.formatted, n);
            self.count_skipped();
            if self.buf.len() >= self.config.batch_bytes {
                self.write_batch();
            } else {
                break;
            }
        }
        self.reorder = Some(ro);
    }
}
