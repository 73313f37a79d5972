//! The in-band drop report: "N records dropped on ring R between t1 and t2".
//!
//! Under the `drop_newest` and `degrade` policies the consumer writes one
//! [`DropReport`] into the output as soon as it sees new drops on a ring
//! (checked once per ring per consumer pass), so the log itself shows the
//! gap, at the place in the stream where it happened. The counts also stay
//! in the counters ([`Stats`](crate::Stats)).
//!
//! Records the sink refused (a permanent error, or a retryable one given up
//! on after `sink_retry_timeout_ms`, counted in `dropped_sink`) get a report
//! too, with the reason [`DROP_REASON_SINK`]: it heads the next batch
//! after the drop, so it lands in the output once the sink takes writes
//! again, at the place of the gap ("N records dropped by the sink").
//!
//! Two clocks: a report is placed on the records' own timeline by
//! `record_time_ns`, the event time ([`Record::event_time`]) of the last
//! record the consumer read before it took the report, so a log of a
//! capture (records stamped with capture time) shows the gap between the
//! records it fell between, whatever the wall clock of the replay; and it
//! gives the wall-clock time of the first and last drop (`first_ns`,
//! `last_ns`, the producer's clock when it dropped), labelled as such.
//! `record_time_ns` is 0 when no record was read yet or the records carry
//! no event time; the lines then leave it out.
//!
//! Each report names why its records were dropped: a ring's drops are
//! reported per reason ([`DropReason`]: ring full, shed by `degrade`,
//! consumer gone, ring stopped), one report for each reason that has
//! drops, all of the same interval; a sink's have the reason
//! [`DROP_REASON_SINK`].
//!
//! Precision: `dropped` is exact and every drop is reported exactly once
//! (the reports of a ring sum to its drop counters once the ring is
//! drained, reason by reason). `[first_ns, last_ns]` always contains the
//! reported drops; when a drop races with the consumer taking a report,
//! `first_ns` can be as early as the first drop of the previous report
//! (never later than the true first drop). When drops of two reasons race
//! with it, a report can give one of them a drop of the other, and the
//! next report gives it back: the counts per reason are exact summed over
//! the reports, and the total of each report is exact.

use crate::record::{Record, RecordHeader};
use crate::ring::DropReason;

/// Schema id of [`DropReport`]: 0xFF01, in the range 0xFF00..=0xFFFF that
/// dplog keeps for its own in-band records.
pub const SCHEMA_DROP_REPORT: u16 = 0xFF01;

/// [`DropReport::reason`]: records dropped by a producer on its ring, for
/// a reason the report does not say (logs written before reports named
/// it; drops a corrupted shared-memory ring's counters do not account
/// for). Printed as `ring`.
pub const DROP_REASON_RING: u32 = 0;

/// [`DropReport::reason`]: records of batches the sink refused
/// (`dropped_sink`); `ring` is 0 and not shown. Printed as `sink`.
pub const DROP_REASON_SINK: u32 = 1;

/// [`DropReport::reason`]: the ring was full ([`DropReason::Full`]:
/// `drop_newest`, or `degrade` at 100% fill). Printed as `full`.
pub const DROP_REASON_FULL: u32 = 2;

/// [`DropReport::reason`]: shed by `degrade`, the ring above its high
/// watermark and the record below the minimum priority
/// ([`DropReason::Degraded`]). Printed as `degraded`.
pub const DROP_REASON_DEGRADED: u32 = 3;

/// [`DropReport::reason`]: the consumer was gone
/// ([`DropReason::Disconnected`]). Printed as `disconnected`.
pub const DROP_REASON_DISCONNECTED: u32 = 4;

/// [`DropReport::reason`]: the consumer had stopped reading the ring after
/// a protocol violation ([`DropReason::Stopped`]). Printed as `stopped`.
pub const DROP_REASON_STOPPED: u32 = 5;

/// The [`DropReport::reason`] code of a ring's drops for `reason`.
pub fn drop_reason_code(reason: DropReason) -> u32 {
    match reason {
        DropReason::Full => DROP_REASON_FULL,
        DropReason::Degraded => DROP_REASON_DEGRADED,
        DropReason::Disconnected => DROP_REASON_DISCONNECTED,
        DropReason::Stopped => DROP_REASON_STOPPED,
    }
}

/// The name a report's `reason` code is printed under (`ring`, `sink`,
/// `full`, `degraded`, `disconnected`, `stopped`); `None` for a code no
/// report is written with (a damaged or newer log), which the writers
/// print in decimal.
pub fn drop_reason_name(reason: u32) -> Option<&'static str> {
    Some(match reason {
        DROP_REASON_RING => "ring",
        DROP_REASON_SINK => "sink",
        DROP_REASON_FULL => "full",
        DROP_REASON_DEGRADED => "degraded",
        DROP_REASON_DISCONNECTED => "disconnected",
        DROP_REASON_STOPPED => "stopped",
        _ => return None,
    })
}

/// An in-band report of records dropped on one ring. 48 bytes.
///
/// | offset | field            | meaning                                         |
/// |--------|------------------|-------------------------------------------------|
/// | 0      | `header`         | `len` 48, `schema_id` [`SCHEMA_DROP_REPORT`]    |
/// | 8      | `ring`           | ring id (registration order in its logger, 0..) |
/// | 12     | `reason`         | [`DROP_REASON_RING`] (0), [`DROP_REASON_SINK`] (1), [`DROP_REASON_FULL`] (2), [`DROP_REASON_DEGRADED`] (3), [`DROP_REASON_DISCONNECTED`] (4), [`DROP_REASON_STOPPED`] (5) |
/// | 16     | `dropped`        | records dropped in the interval for that reason |
/// | 24     | `first_ns`       | first drop, wall clock, ns since the Unix epoch |
/// | 32     | `last_ns`        | last drop, wall clock, ns since the Unix epoch  |
/// | 40     | `record_time_ns` | event time of the last record read before the report (the records' timeline, normally ns since the Unix epoch); 0 = none |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DropReport {
    /// Record header.
    pub header: RecordHeader,
    /// Ring id within its logger (registration order, from 0); 0 for a
    /// sink report.
    pub ring: u32,
    /// Why the records were dropped: on `ring`, [`DROP_REASON_FULL`],
    /// [`DROP_REASON_DEGRADED`], [`DROP_REASON_DISCONNECTED`],
    /// [`DROP_REASON_STOPPED`] (or [`DROP_REASON_RING`], reason not
    /// known); [`DROP_REASON_SINK`] for records the sink refused. See
    /// [`drop_reason_name`].
    pub reason: u32,
    /// Records dropped in the interval for `reason`.
    pub dropped: u64,
    /// First drop, ns since the Unix epoch (UTC).
    pub first_ns: u64,
    /// Last drop, ns since the Unix epoch (UTC).
    pub last_ns: u64,
    /// [`Record::event_time`] of the last record the consumer read before
    /// it took this report: where the gap sits on the records' timeline
    /// (capture time for a replayed capture); 0 = unknown.
    pub record_time_ns: u64,
}

const _: () = assert!(core::mem::size_of::<DropReport>() == 48);

impl Record for DropReport {
    const SCHEMA_ID: u16 = SCHEMA_DROP_REPORT;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

impl DropReport {
    /// A report for `dropped` records on `ring` between `first_ns` and
    /// `last_ns`, without a reason ([`DROP_REASON_RING`]; see
    /// [`DropReport::with_reason`]).
    pub fn new(ring: u32, dropped: u64, first_ns: u64, last_ns: u64) -> Self {
        Self {
            header: RecordHeader::of::<Self>(),
            ring,
            reason: DROP_REASON_RING,
            dropped,
            first_ns,
            last_ns,
            record_time_ns: 0,
        }
    }

    /// A report for `dropped` records the sink refused, the first and
    /// last given up on at `first_ns` and `last_ns` (wall clock).
    pub fn sink(dropped: u64, first_ns: u64, last_ns: u64) -> Self {
        Self {
            reason: DROP_REASON_SINK,
            ..Self::new(0, dropped, first_ns, last_ns)
        }
    }

    /// The report for the drops of `reason` ([`drop_reason_code`]).
    pub fn with_reason(mut self, reason: DropReason) -> Self {
        self.reason = drop_reason_code(reason);
        self
    }

    /// Appends the report's reason as printed ([`drop_reason_name`], or
    /// the code in decimal).
    pub fn push_reason(&self, out: &mut Vec<u8>) {
        match drop_reason_name(self.reason) {
            Some(n) => out.extend_from_slice(n.as_bytes()),
            None => out.extend_from_slice(itoa::Buffer::new().format(self.reason).as_bytes()),
        }
    }

    /// The report placed on the records' timeline at `ns` (see
    /// [`DropReport::record_time_ns`]).
    pub fn with_record_time(mut self, ns: u64) -> Self {
        self.record_time_ns = ns;
        self
    }

    /// Appends the report as one text line:
    /// `dplog: 12 records dropped on ring 0 (degraded) after the record of 2013-05-02T20:20:36.616804000Z; wall clock 2026-11-30T07:49:15.123456789Z to 2026-11-30T07:49:15.223456789Z\n`
    /// (the reason in parentheses, none for [`DROP_REASON_RING`]; without
    /// `after the record of …` when `record_time_ns` is 0; `1 record
    /// dropped` for one; `dropped by the sink` instead of `on ring 0 (…)`
    /// for a sink report).
    pub fn write_text(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"dplog: ");
        out.extend_from_slice(itoa::Buffer::new().format(self.dropped).as_bytes());
        out.extend_from_slice(if self.dropped == 1 {
            b" record dropped ".as_slice()
        } else {
            b" records dropped ".as_slice()
        });
        if self.reason == DROP_REASON_SINK {
            out.extend_from_slice(b"by the sink");
        } else {
            out.extend_from_slice(b"on ring ");
            out.extend_from_slice(itoa::Buffer::new().format(self.ring).as_bytes());
            if self.reason != DROP_REASON_RING {
                out.extend_from_slice(b" (");
                self.push_reason(out);
                out.push(b')');
            }
        }
        if self.record_time_ns != 0 {
            out.extend_from_slice(b" after the record of ");
            write_rfc3339(self.record_time_ns, out);
        }
        out.extend_from_slice(b"; wall clock ");
        write_rfc3339(self.first_ns, out);
        out.extend_from_slice(b" to ");
        write_rfc3339(self.last_ns, out);
        out.push(b'\n');
    }

    /// Appends the report as one JSON line:
    /// `{"dplogEvent":"recordsDropped","reason":"degraded","ring":0,"dropped":12,"timestamp":"2013-05-02T20:20:36.616804000Z","firstDropWallClock":"…Z","lastDropWallClock":"…Z"}\n`:
    /// `timestamp` (the key NAT records use for their own time) is
    /// `record_time_ns`, left out when it is 0; the wall-clock times are
    /// labelled as such. `reason` is a ring's drops' reason (`full`,
    /// `degraded`, `disconnected`, `stopped`, or `ring` when not known),
    /// with the ring's number, or `sink` (a sink's, with no `ring`), as in
    /// the CSV and syslog reports ([`drop_reason_name`]).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        self.write_json_with_time_digits(out, 9)
    }

    /// [`write_json`](Self::write_json) with `timestamp` (the records'
    /// timeline) printed with `digits` fractional digits (0 to 9,
    /// truncated; 0: no fraction), as a format that prints its records'
    /// time with that precision does; the wall-clock times keep 9.
    pub fn write_json_with_time_digits(&self, out: &mut Vec<u8>, digits: u8) {
        out.extend_from_slice(b"{\"dplogEvent\":\"recordsDropped\",\"reason\":\"");
        self.push_reason(out);
        out.push(b'"');
        if self.reason != DROP_REASON_SINK {
            out.extend_from_slice(b",\"ring\":");
            out.extend_from_slice(itoa::Buffer::new().format(self.ring).as_bytes());
        }
        out.extend_from_slice(b",\"dropped\":");
        out.extend_from_slice(itoa::Buffer::new().format(self.dropped).as_bytes());
        if self.record_time_ns != 0 {
            out.extend_from_slice(b",\"timestamp\":\"");
            write_rfc3339_digits(self.record_time_ns, digits, out);
            out.push(b'"');
        }
        out.extend_from_slice(b",\"firstDropWallClock\":\"");
        write_rfc3339(self.first_ns, out);
        out.extend_from_slice(b"\",\"lastDropWallClock\":\"");
        write_rfc3339(self.last_ns, out);
        out.extend_from_slice(b"\"}\n");
    }
}

/// Appends `ns` (since the Unix epoch) as RFC 3339 UTC with nanoseconds.
fn write_rfc3339(ns: u64, out: &mut Vec<u8>) {
    write_rfc3339_digits(ns, 9, out)
}

/// Appends `ns` (since the Unix epoch) as RFC 3339 UTC with `digits`
/// (at most 9) fractional digits, truncated; no `.` for 0.
fn write_rfc3339_digits(ns: u64, digits: u8, out: &mut Vec<u8>) {
    let digits = usize::from(digits.min(9));
    let secs = ns / 1_000_000_000;
    let frac = ns % 1_000_000_000;
    let days = (secs / 86_400) as i64;
    let sod = secs % 86_400;
    // Civil from days (H. Hinnant's algorithm), proleptic Gregorian.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let two = |v: u64, out: &mut Vec<u8>| {
        out.push(b'0' + (v / 10) as u8);
        out.push(b'0' + (v % 10) as u8);
    };
    out.extend_from_slice(itoa::Buffer::new().format(y).as_bytes());
    out.push(b'-');
    two(m as u64, out);
    out.push(b'-');
    two(d as u64, out);
    out.push(b'T');
    two(sod / 3600, out);
    out.push(b':');
    two(sod / 60 % 60, out);
    out.push(b':');
    two(sod % 60, out);
    if digits > 0 {
        out.push(b'.');
        let mut all = [b'0'; 9];
        let mut f = frac;
        for i in (0..9).rev() {
            all[i] = b'0' + (f % 10) as u8;
            f /= 10;
        }
        out.extend_from_slice(&all[..digits]);
    }
    out.push(b'Z');
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn one_dropped_record_reads_singular() {
        let t1 = 1_796_024_955_000_000_123;
        let mut out = Vec::new();
        DropReport::new(3, 1, t1, t1).write_text(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "dplog: 1 record dropped on ring 3; wall clock 2026-11-30T07:49:15.000000123Z to 2026-11-30T07:49:15.000000123Z\n"
        );
    }

    #[test]
    fn a_rings_drops_name_their_reason_in_text_and_json() {
        let t1 = 1_796_024_955_000_000_123;
        let line = |r: DropReport| {
            let (mut text, mut json) = (Vec::new(), Vec::new());
            r.write_text(&mut text);
            r.write_json(&mut json);
            (
                String::from_utf8(text).unwrap(),
                String::from_utf8(json).unwrap(),
            )
        };
        for (reason, name) in [
            (DropReason::Full, "full"),
            (DropReason::Degraded, "degraded"),
            (DropReason::Disconnected, "disconnected"),
            (DropReason::Stopped, "stopped"),
        ] {
            let r = DropReport::new(3, 12, t1, t1).with_reason(reason);
            assert_eq!(drop_reason_name(r.reason), Some(name));
            let (text, json) = line(r);
            assert_eq!(
                text,
                format!("dplog: 12 records dropped on ring 3 ({name}); wall clock 2026-11-30T07:49:15.000000123Z to 2026-11-30T07:49:15.000000123Z\n")
            );
            assert_eq!(
                json,
                format!("{{\"dplogEvent\":\"recordsDropped\",\"reason\":\"{name}\",\"ring\":3,\"dropped\":12,\"firstDropWallClock\":\"2026-11-30T07:49:15.000000123Z\",\"lastDropWallClock\":\"2026-11-30T07:49:15.000000123Z\"}}\n")
            );
        }
        // A code no report is written with (a damaged log) prints as is.
        let r = DropReport {
            reason: 77,
            ..DropReport::new(3, 1, t1, t1)
        };
        let (text, json) = line(r);
        assert!(
            text.starts_with("dplog: 1 record dropped on ring 3 (77);"),
            "{text}"
        );
        assert!(json.contains("\"reason\":\"77\",\"ring\":3"), "{json}");
    }

    #[test]
    fn text_and_json_lines() {
        // 2026-11-30T07:49:15.000000123Z
        let t1 = 1_796_024_955_000_000_123;
        let r = DropReport::new(3, 12, t1, t1 + 100_000_000);
        let mut out = Vec::new();
        r.write_text(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "dplog: 12 records dropped on ring 3; wall clock 2026-11-30T07:49:15.000000123Z to 2026-11-30T07:49:15.100000123Z\n"
        );
        let mut out = Vec::new();
        r.write_json(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"dplogEvent\":\"recordsDropped\",\"reason\":\"ring\",\"ring\":3,\"dropped\":12,\"firstDropWallClock\":\"2026-11-30T07:49:15.000000123Z\",\"lastDropWallClock\":\"2026-11-30T07:49:15.100000123Z\"}\n"
        );
        // On a capture's timeline: 2013-05-02T20:20:36.616804Z.
        let r = r.with_record_time(1_367_526_036_616_804_000);
        let mut out = Vec::new();
        r.write_text(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "dplog: 12 records dropped on ring 3 after the record of 2013-05-02T20:20:36.616804000Z; wall clock 2026-11-30T07:49:15.000000123Z to 2026-11-30T07:49:15.100000123Z\n"
        );
        let mut out = Vec::new();
        r.write_json(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"dplogEvent\":\"recordsDropped\",\"reason\":\"ring\",\"ring\":3,\"dropped\":12,\"timestamp\":\"2013-05-02T20:20:36.616804000Z\",\"firstDropWallClock\":\"2026-11-30T07:49:15.000000123Z\",\"lastDropWallClock\":\"2026-11-30T07:49:15.100000123Z\"}\n"
        );
        // A sink report: the reason in place of the ring.
        let s = DropReport::sink(1, t1, t1).with_record_time(1_367_526_036_616_804_000);
        let mut out = Vec::new();
        s.write_text(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "dplog: 1 record dropped by the sink after the record of 2013-05-02T20:20:36.616804000Z; wall clock 2026-11-30T07:49:15.000000123Z to 2026-11-30T07:49:15.000000123Z\n"
        );
        let mut out = Vec::new();
        DropReport::sink(12, t1, t1).write_json(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"dplogEvent\":\"recordsDropped\",\"reason\":\"sink\",\"dropped\":12,\"firstDropWallClock\":\"2026-11-30T07:49:15.000000123Z\",\"lastDropWallClock\":\"2026-11-30T07:49:15.000000123Z\"}\n"
        );
        let mut out = Vec::new();
        write_rfc3339(0, &mut out);
        assert_eq!(out, b"1970-01-01T00:00:00.000000000Z");
        let mut out = Vec::new();
        write_rfc3339(951_782_400_000_000_000, &mut out); // leap day
        assert_eq!(out, b"2000-02-29T00:00:00.000000000Z");
    }
}
