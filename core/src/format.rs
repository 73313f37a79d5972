//! The [`Formatter`] trait: how the consumer turns a record into bytes.

/// Turns one record into bytes. Implementations append exactly one
/// formatted record, line terminator included, to `out`, and must not
/// allocate per record beyond `out` growing.
pub trait Formatter<R>: Send + 'static {
    /// Appends `rec`, formatted, to `out`.
    fn format(&mut self, rec: &R, out: &mut Vec<u8>);

    /// Appends an in-band drop report ("N records dropped on ring R between
    /// t1 and t2", see [`crate::report`]) written by the consumer under the
    /// `drop_newest` and `degrade` policies. The default writes
    /// [`DropReport::write_text`](crate::report::DropReport::write_text);
    /// JSON formatters should override it with
    /// [`DropReport::write_json`](crate::report::DropReport::write_json).
    fn format_drop_report(&mut self, report: &crate::report::DropReport, out: &mut Vec<u8>) {
        report.write_text(out)
    }

    /// Called by the consumer with its TSC calibration at start and after
    /// every recalibration against `CLOCK_REALTIME` (about once a second),
    /// for formatters whose records carry raw TSC timestamps
    /// ([`crate::tsc::now_ticks`]). Default: ignored.
    fn tsc_calibration(&mut self, cal: &crate::tsc::Calibration) {
        let _ = cal;
    }

    /// Records this formatter could not format since the last call (e.g.
    /// a schema id it has no schema for, or a record shorter than its
    /// schema), appending nothing for them. The consumer calls it after
    /// every burst and counts them in
    /// [`Stats::dropped_format`](crate::Stats::dropped_format), not
    /// written. Default 0: a formatter that writes nothing for a record on
    /// purpose (a filter) has those records counted written.
    fn take_skipped(&mut self) -> u64 {
        0
    }
}

impl<R, F: Formatter<R> + ?Sized> Formatter<R> for Box<F> {
    fn format(&mut self, rec: &R, out: &mut Vec<u8>) {
        (**self).format(rec, out)
    }
    fn format_drop_report(&mut self, report: &crate::report::DropReport, out: &mut Vec<u8>) {
        (**self).format_drop_report(report, out)
    }
    fn tsc_calibration(&mut self, cal: &crate::tsc::Calibration) {
        (**self).tsc_calibration(cal)
    }
    fn take_skipped(&mut self) -> u64 {
        (**self).take_skipped()
    }
}
