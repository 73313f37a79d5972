//! In-band drop reports on a capture-time record stream: a report sits on
//! the records' timeline (its `timestamp` is the time of the record line
//! just before it, 2013 here), and gives the wall-clock time of the drops
//! apart, labelled as such.

mod common;

use dplog_schema_nat::NatFormatSpec as _;
use std::time::Duration;

use common::*;
use dplog_core::{Backpressure, Formatter, Logger, LoggerConfig};
use dplog_formatters::{Format, FormatSpec};
use dplog_schema_nat::nat_event;
use dplog_schema_nat::Nat44SessionRecord;
use dplog_schema_nat::NatFormatter;
use dplog_sinks::FileSink;

/// 2013-05-02T20:20:36Z: capture time, years before the wall clock.
const CAPTURE_T0: u64 = 1_367_526_036_000_000_000;

/// The real JSON formatter, slowed (2 ms every 64 records) so a small
/// `drop_newest` ring overflows.
struct Slow {
    inner: NatFormatter,
    n: u64,
}

impl Formatter<Nat44SessionRecord> for Slow {
    fn format(&mut self, r: &Nat44SessionRecord, out: &mut Vec<u8>) {
        self.n += 1;
        if self.n % 64 == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
        self.inner.format(r, out);
    }
    fn format_drop_report(&mut self, r: &dplog_core::DropReport, out: &mut Vec<u8>) {
        Formatter::<Nat44SessionRecord>::format_drop_report(&mut self.inner, r, out);
    }
}

/// Parses `YYYY-MM-DDTHH:MM:SS.fffZ` (any number of fraction digits) to ns
/// since the Unix epoch.
fn ns(t: &str) -> u64 {
    let (date, rest) = t.split_once('T').unwrap();
    let d: Vec<i64> = date.split('-').map(|x| x.parse().unwrap()).collect();
    let (hms, frac) = rest.trim_end_matches('Z').split_once('.').unwrap();
    let h: Vec<u64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
    let frac_ns: u64 = format!("{frac:0<9}")[..9].parse().unwrap();
    // Days from civil (H. Hinnant).
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d[2] - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe - 719_468) as u64;
    (days * 86_400 + h[0] * 3600 + h[1] * 60 + h[2]) * 1_000_000_000 + frac_ns
}

#[test]
fn drop_reports_carry_the_time_of_the_record_before_them_and_the_wall_clock_apart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drops.jsonl");
    let logger = Logger::start(
        LoggerConfig {
            ring_capacity: 64,
            backpressure: Backpressure::Drop,
            shutdown_timeout_ms: 20_000,
            ..Default::default()
        },
        Slow {
            inner: FormatSpec {
                kind: Format::Json,
                ..Default::default()
            }
            .nat_formatter()
            .unwrap(),
            n: 0,
        },
        FileSink::open(&path).unwrap(),
    )
    .unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..4000u64 {
        if i % 256 == 0 {
            std::thread::sleep(Duration::from_micros(500));
        }
        let mut r = session(nat_event::NAT44_SESSION_CREATE);
        // One record per captured millisecond.
        r.timestamp_ns = CAPTURE_T0 + i * 1_000_000;
        p.log(r);
    }
    drop(p);
    let stats = logger.shutdown().unwrap();
    assert!(stats.dropped_full > 0, "nothing was dropped: {stats:?}");
    let body = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let wall_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let (mut reports, mut dropped) = (0u64, 0u64);
    let mut prev: Option<u64> = None;
    for l in &lines {
        let t = ns(l["timestamp"].as_str().unwrap());
        if l["dplogEvent"] == "recordsDropped" {
            reports += 1;
            dropped += l["dropped"].as_u64().unwrap();
            // A ring's drops: reason and ring number, as CSV and syslog
            // say; drop_newest drops only when the ring is full.
            assert_eq!(l["reason"], "full", "{l}");
            assert!(l["ring"].is_u64(), "{l}");
            // On the records' timeline: the record line just before it.
            assert_eq!(Some(t), prev, "{l}");
            assert!((CAPTURE_T0..CAPTURE_T0 + 4_000_000_000).contains(&t), "{l}");
            // The wall clock, labelled, is today's, not the capture's.
            for key in ["firstDropWallClock", "lastDropWallClock"] {
                let w = ns(l[key].as_str().unwrap());
                assert!(
                    w > wall_now - 600_000_000_000 && w <= wall_now,
                    "{key}: {l}"
                );
            }
            assert!(l.get("firstDrop").is_none());
        } else {
            prev = Some(t);
        }
    }
    assert!(reports > 0, "no drop report in the log");
    assert_eq!(dropped, stats.dropped_full + stats.dropped_degraded);
}

/// The fractional digits of an RFC 3339 time (`...:36.000000Z`: 6).
fn fraction_digits(t: &str) -> usize {
    t.rsplit_once('.')
        .map_or(0, |(_, f)| f.trim_end_matches('Z').len())
}

/// A drop report in each line format's own shape, between records: a JSON
/// object, a text line, a CSV row under the one header (same width), a
/// syslog message (checked field by field by a real rsyslogd in
/// `rsyslog.rs`).
#[test]
fn drop_reports_take_each_formats_own_shape() {
    use dplog_core::DropReport;
    use dplog_schema_nat::NatRecord;
    let wall = 1_796_024_955_000_000_123;
    let reports = [
        DropReport::new(2, 7, wall, wall + 1000)
            .with_reason(dplog_core::DropReason::Degraded)
            .with_record_time(CAPTURE_T0),
        DropReport::sink(3, wall, wall),
    ];
    let render = |kind: Format| {
        let mut f = FormatSpec {
            kind,
            ..Default::default()
        }
        .nat_formatter()
        .unwrap();
        let mut out = Vec::new();
        // A report before any record, then records and reports.
        Formatter::<NatRecord>::format_drop_report(&mut f, &reports[1], &mut out);
        for r in all_records() {
            f.format(&r, &mut out);
            Formatter::<NatRecord>::format_drop_report(&mut f, &reports[0], &mut out);
        }
        String::from_utf8(out).unwrap()
    };
    let csv = render(Format::Csv);
    let mut rd = csv::ReaderBuilder::new()
        .flexible(false)
        .from_reader(csv.as_bytes());
    let h: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
    let rows: Vec<csv::StringRecord> = rd.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 1 + 2 * all_records().len());
    let col = |row: &csv::StringRecord, name: &str| {
        row.get(h.iter().position(|c| c == name).unwrap())
            .unwrap()
            .to_string()
    };
    assert_eq!(col(&rows[0], "recordType"), "recordsDropped");
    assert_eq!(col(&rows[0], "dplogDropped"), "3");
    assert_eq!(col(&rows[0], "dplogDropRing"), "");
    assert_eq!(col(&rows[0], "dplogDropReason"), "sink");
    assert_eq!(col(&rows[0], "timestamp"), "");
    assert_eq!(col(&rows[1], "recordType"), "nat44Session");
    assert_eq!(col(&rows[2], "dplogDropped"), "7");
    assert_eq!(col(&rows[2], "dplogDropRing"), "2");
    assert_eq!(col(&rows[2], "dplogDropReason"), "degraded");
    // No time precision set: the records' default digits (microseconds),
    // as the record row before it prints its own.
    assert_eq!(col(&rows[2], "timestamp"), "2013-05-02T20:20:36.000000Z");
    assert_eq!(
        fraction_digits(&col(&rows[2], "timestamp")),
        fraction_digits(&col(&rows[1], "timestamp"))
    );
    assert_eq!(
        col(&rows[2], "dplogFirstDropWallClock"),
        "2026-11-30T07:49:15.000000123Z"
    );
    assert_eq!(
        col(&rows[2], "dplogLastDropWallClock"),
        "2026-11-30T07:49:15.000001123Z"
    );
    // A report fills no field column.
    for f in h
        .iter()
        .filter(|c| !c.starts_with("dplog") && !["recordType", "timestamp"].contains(&c.as_str()))
    {
        assert_eq!(col(&rows[2], f), "", "{f}");
    }
    // The counts stay exact: the sum of the reports' counts.
    let total: u64 = rows
        .iter()
        .filter(|r| col(r, "recordType") == "recordsDropped")
        .map(|r| col(r, "dplogDropped").parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, 3 + 7 * all_records().len() as u64);

    let json = render(Format::Json);
    let v: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(v[0]["dplogEvent"], "recordsDropped");
    assert_eq!(
        (&v[0]["reason"], &v[0]["ring"]),
        (&"sink".into(), &serde_json::Value::Null)
    );
    assert_eq!(
        (&v[2]["reason"], &v[2]["ring"]),
        (&"degraded".into(), &2.into())
    );
    assert_eq!(v[2]["dropped"], 7);
    // No time precision set: the records' default digits, as the record
    // line before it prints its own.
    assert_eq!(v[2]["timestamp"], "2013-05-02T20:20:36.000000Z");
    assert_eq!(
        fraction_digits(v[2]["timestamp"].as_str().unwrap()),
        fraction_digits(v[1]["timestamp"].as_str().unwrap())
    );

    let text = render(Format::Text);
    assert!(text.starts_with("dplog: 3 records dropped by the sink; wall clock "));
    let ring_line = text.lines().nth(2).unwrap();
    assert!(
        ring_line.starts_with(
            "dplog: 7 records dropped on ring 2 (degraded) after the record of 2013-05-02T20:20:36.000000000Z; wall clock "
        ),
        "{ring_line}"
    );

    for kind in [Format::Rfc5424, Format::Rfc3164] {
        let body = render(kind);
        let lines: Vec<&str> = body.lines().collect();
        assert_eq!(lines.len(), 1 + 2 * all_records().len());
        for l in lines.iter().step_by(2) {
            assert!(l.starts_with("<132>"), "{l}");
            assert!(l.contains("RECORDS_DROPPED"), "{l}");
        }
        let reason = if kind == Format::Rfc5424 {
            "reason=\"degraded\""
        } else {
            "reason=degraded"
        };
        assert!(lines[2].contains(reason), "{}", lines[2]);
    }
}

/// Through a real logger and file sink with drops (`drop_newest`: a full
/// ring; `degrade`: session creates shed above the high watermark), in
/// JSON, CSV, RFC 5424 and RFC 3164: every line is a record or a report
/// in the format's shape, the records counted written are the record
/// lines, and the reports of each reason add up to the drops counted for
/// it.
#[test]
fn reported_drops_add_up_to_the_counters_of_their_reason_in_every_line_format() {
    let policies = [Backpressure::Drop, Backpressure::Degrade];
    let kinds = [Format::Json, Format::Csv, Format::Rfc5424, Format::Rfc3164];
    for (policy, kind) in policies.into_iter().flat_map(|p| kinds.map(|k| (p, k))) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("drops.log");
        let logger = Logger::start(
            LoggerConfig {
                ring_capacity: 64,
                backpressure: policy,
                shutdown_timeout_ms: 20_000,
                ..Default::default()
            },
            Slow {
                inner: FormatSpec {
                    kind,
                    ..Default::default()
                }
                .nat_formatter()
                .unwrap(),
                n: 0,
            },
            FileSink::open(&path).unwrap(),
        )
        .unwrap();
        let mut p = logger.producer().unwrap();
        for i in 0..4000u64 {
            if i % 256 == 0 {
                std::thread::sleep(Duration::from_micros(500));
            }
            let mut r = session(nat_event::NAT44_SESSION_CREATE);
            r.timestamp_ns = CAPTURE_T0 + i * 1_000_000;
            p.log(r);
        }
        drop(p);
        let stats = logger.shutdown().unwrap();
        let what = format!("{policy:?} {kind:?}");
        match policy {
            Backpressure::Degrade => assert!(
                stats.dropped_degraded > 0,
                "{what}: nothing shed: {stats:?}"
            ),
            _ => assert!(stats.dropped_full > 0, "{what}: nothing dropped: {stats:?}"),
        }
        let body = std::fs::read_to_string(&path).unwrap();
        let (mut records, mut reports) = (0u64, 0u64);
        // Records reported dropped, by reason.
        let mut by_reason = std::collections::BTreeMap::<String, u64>::new();
        let mut report = |reason: &str, n: &str| {
            reports += 1;
            *by_reason.entry(reason.to_string()).or_default() += n.parse::<u64>().unwrap();
        };
        // `name=value` or `name="value"` of a syslog report.
        let param = |l: &str, name: &str| -> String {
            let v = l.split(&format!(" {name}=")).nth(1).unwrap();
            let v = v.trim_start_matches('"');
            v[..v.find(['"', ' ', ']']).unwrap_or(v.len())].to_string()
        };
        match kind {
            Format::Json => {
                for l in body.lines() {
                    let v: serde_json::Value = serde_json::from_str(l).unwrap();
                    if v["dplogEvent"] == "recordsDropped" {
                        report(v["reason"].as_str().unwrap(), &v["dropped"].to_string());
                    } else {
                        assert_eq!(v["natEvent"], 4, "{l}");
                        records += 1;
                    }
                }
            }
            Format::Csv => {
                let mut rd = csv::Reader::from_reader(body.as_bytes());
                let h = rd.headers().unwrap().clone();
                let at = |n: &str| h.iter().position(|c| c == n).unwrap();
                for row in rd.records() {
                    let row = row.unwrap();
                    assert_eq!(row.len(), h.len());
                    if &row[at("recordType")] == "recordsDropped" {
                        report(&row[at("dplogDropReason")], &row[at("dplogDropped")]);
                    } else {
                        assert_eq!(&row[at("recordType")], "nat44Session");
                        records += 1;
                    }
                }
            }
            _ => {
                for l in body.lines() {
                    if l.contains(" RECORDS_DROPPED ") {
                        assert!(l.starts_with("<132>"), "{l}");
                        report(&param(l, "reason"), &param(l, "dropped"));
                    } else {
                        assert!(l.starts_with("<134>") && l.contains(" SADD "), "{l}");
                        records += 1;
                    }
                }
            }
        }
        assert!(reports > 0, "{what}: no report");
        assert_eq!(records, stats.written_records, "{what}");
        // Each reason's reports add up to its counter; no other reason.
        let mut want = std::collections::BTreeMap::new();
        for (reason, n) in [
            ("full", stats.dropped_full),
            ("degraded", stats.dropped_degraded),
        ] {
            if n > 0 {
                want.insert(reason.to_string(), n);
            }
        }
        assert_eq!(by_reason, want, "{what}");
        assert_eq!(stats.drop_reports, reports, "{what}");
    }
}

/// Every key and column the formats write beside a record's fields (CSV's
/// lead and drop-report columns, JSON's `timestamp` and its drop-report
/// marker) is a name a schema refuses for a field, so no record can take
/// one over.
#[test]
fn the_formats_own_keys_and_columns_are_reserved_field_names() {
    use dplog_core::schema::reserved_field_name;
    use dplog_formatters::layouts::{CSV_DROP_COLUMNS, CSV_LEAD_COLUMNS};
    let mut mine: Vec<&str> = CSV_LEAD_COLUMNS.to_vec();
    mine.extend(CSV_DROP_COLUMNS);
    mine.extend(["timestamp", "dplogEvent"]);
    for k in mine {
        assert!(reserved_field_name(k).is_some(), "{k} is not reserved");
    }
}
