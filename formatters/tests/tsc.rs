//! TSC timestamp fields printed as time: identity until the consumer
//! passes its calibration through `Formatter::tsc_calibration`, then
//! converted with it (text template, JSON and IPFIX).

use std::sync::OnceLock;

use dplog_core::schema::{HasSchema, Schema};
use dplog_core::tsc::Calibration;
use dplog_core::{schema, Formatter, Record, RecordHeader};
use dplog_formatters::{Format, FormatSpec, RecordEncoder, TscCalibration};

/// A record stamped with raw TSC ticks.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct TscRec {
    header: RecordHeader,
    ticks: u64,
    port: u16,
    pad: [u8; 6],
}

impl Record for TscRec {
    const SCHEMA_ID: u16 = 900;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 2 + 6 = 24 bytes without padding, described by
// the schema built from its own offset_of! values.
unsafe impl HasSchema for TscRec {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(TscRec, id = 900, name = "tscEvent", [
                ticks => "observationTimeMilliseconds": TscTimestamp, ie 323;
                port => "sourceTransportPort": Port, ie 7;
            ])
            .unwrap()
        })
    }
}

fn rec(ticks: u64) -> TscRec {
    TscRec {
        header: RecordHeader::of::<TscRec>(),
        ticks,
        port: 80,
        pad: [0; 6],
    }
}

/// 2026-01-01T00:00:00Z in ns.
const T0: u64 = 1_767_225_600_000_000_000;

/// 2.5 GHz; tick 1000 is T0.
const CAL: Calibration = Calibration {
    hz: 2_500_000_000,
    tsc0: 1_000,
    ns0: T0,
};

/// 1.500001 s after T0 in CAL's ticks.
const TICKS: u64 = 1_000 + 3_750_002_500;

fn encoder(kind: Format, template: Option<&str>) -> RecordEncoder {
    FormatSpec {
        kind,
        template: template.map(String::from),
        ..FormatSpec::default()
    }
    .encoder(&[TscRec::schema()])
    .unwrap()
}

fn line(f: &mut impl Formatter<TscRec>, r: TscRec) -> String {
    let mut out = Vec::new();
    f.format(&r, &mut out);
    String::from_utf8(out).unwrap()
}

#[test]
fn template_converts_tsc_with_the_consumer_calibration() {
    // Compiles without a calibration in the config (an error before the
    // consumer hook existed).
    let mut f = encoder(
        Format::Text,
        Some("{observationTimeMilliseconds:rfc3339_us} {observationTimeMilliseconds:unix_ms} {observationTimeMilliseconds:dec} port={sourceTransportPort}"),
    );
    // No calibration yet: ticks are taken as ns (the realtime fallback).
    assert_eq!(
        line(&mut f, rec(T0 + 250_000_000)),
        format!(
            "2026-01-01T00:00:00.250000Z 1767225600250 {} port=80\n",
            T0 + 250_000_000
        )
    );
    // The consumer's calibration, through the Formatter hook.
    Formatter::<TscRec>::tsc_calibration(&mut f, &CAL);
    assert_eq!(
        line(&mut f, rec(TICKS)),
        format!("2026-01-01T00:00:01.500001Z 1767225601500 {TICKS} port=80\n")
    );
    // A recalibration replaces it: same ticks, 1 s later wall time.
    Formatter::<TscRec>::tsc_calibration(
        &mut f,
        &Calibration {
            ns0: T0 + 1_000_000_000,
            ..CAL
        },
    );
    assert!(line(&mut f, rec(TICKS)).starts_with("2026-01-01T00:00:02.500001Z "));
}

#[test]
fn json_and_ipfix_convert_tsc_with_the_consumer_calibration() {
    let mut f = encoder(Format::Json, None);
    Formatter::<TscRec>::tsc_calibration(&mut f, &CAL);
    let v: serde_json::Value = serde_json::from_str(&line(&mut f, rec(TICKS))).unwrap();
    assert_eq!(v["timestamp"], "2026-01-01T00:00:01.500001Z", "{v}");

    let mut f = encoder(Format::Ipfix, None);
    Formatter::<TscRec>::tsc_calibration(&mut f, &CAL);
    let mut out = Vec::new();
    f.format(&rec(TICKS), &mut out);
    let ms = 1_767_225_601_500u64.to_be_bytes();
    assert!(
        out.windows(8).any(|w| w == ms),
        "observationTimeMilliseconds {} not in the IPFIX message",
        1_767_225_601_500u64
    );
}

#[test]
fn calibration_converts_like_core() {
    let c = TscCalibration::from(&CAL);
    assert_eq!(c.to_ns(TICKS), T0 + 1_500_001_000);
    assert_eq!(TscCalibration::IDENTITY.to_ns(12_345), 12_345);
}

/// Two TSC fields: the event time and another one.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct TwoTsc {
    header: RecordHeader,
    start: u64,
    seen: u64,
}

impl Record for TwoTsc {
    const SCHEMA_ID: u16 = 901;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 8 = 24 bytes without padding, described by the
// schema built from its own offset_of! values.
unsafe impl HasSchema for TwoTsc {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(TwoTsc, id = 901, name = "twoTsc", [
                start => "flowStartMilliseconds": TscTimestamp, ie 152;
                seen => "flowEndMilliseconds": TscTimestamp, ie 153;
            ])
            .unwrap()
        })
    }
}

/// 2.4 GHz less one tick per second: ticks are not a whole number of
/// nanoseconds, so the conversion rounds.
const ODD: Calibration = Calibration {
    hz: 2_399_999_999,
    tsc0: 7_000,
    ns0: T0,
};

/// The exact wall time of `ticks` under `ODD`, in ns as a rational
/// (numerator over `ODD.hz`).
fn exact(ticks: u64) -> (u128, u128) {
    let num =
        u128::from(ODD.ns0) * u128::from(ODD.hz) + u128::from(ticks - ODD.tsc0) * 1_000_000_000;
    (num, u128::from(ODD.hz))
}

#[test]
fn every_tsc_field_converts_within_the_documented_bound_in_every_format() {
    // The bound (`TscCalibration::to_ns`): at most 1 ns below the exact
    // time on the calibration's line, never above; printing then
    // truncates to the format's digits.
    let cal = TscCalibration::from(&ODD);
    let mut worst = 0u128;
    for k in (0..2_000_000u64)
        .step_by(997)
        .chain([u64::from(u32::MAX) * 3])
    {
        let t = ODD.tsc0 + k * 1_234_567;
        let (num, den) = exact(t);
        let got = u128::from(cal.to_ns(t)) * den;
        assert!(got <= num && num - got < den, "tick {t}");
        worst = worst.max(num - got);
    }
    assert!(worst > 0, "the calibration was meant to round");

    // 1.5 s and 2.75 s after T0, to the nanosecond at 2.4 GHz.
    let start = ODD.tsc0 + 3_599_999_998; // 1.499999999 s: 1767225601499 ms
    let seen = ODD.tsc0 + 6_599_999_997; // 2.749999999 s
    let (s_ms, e_ms) = (1_767_225_601_499u64, 1_767_225_602_749u64);
    let r = TwoTsc {
        header: RecordHeader::of::<TwoTsc>(),
        start,
        seen,
    };
    let out = |kind: Format, template: Option<&str>| {
        let mut f = FormatSpec {
            kind,
            template: template.map(String::from),
            ..FormatSpec::default()
        }
        .encoder(&[TwoTsc::schema()])
        .unwrap();
        Formatter::<TwoTsc>::tsc_calibration(&mut f, &ODD);
        let mut o = Vec::new();
        f.format(&r, &mut o);
        String::from_utf8_lossy(&o).into_owned()
    };
    assert_eq!(
        out(Format::Text, None),
        format!(
            "2026-01-01T00:00:01.499999Z flowStartMilliseconds={s_ms} flowEndMilliseconds={e_ms}\n"
        )
    );
    let v: serde_json::Value = serde_json::from_str(&out(Format::Json, None)).unwrap();
    assert_eq!(v["timestamp"], "2026-01-01T00:00:01.499999Z", "{v}");
    assert_eq!(v["flowStartMilliseconds"], s_ms, "{v}");
    assert_eq!(v["flowEndMilliseconds"], e_ms, "{v}");
    // CSV: the data row holds both, each a whole field.
    let csv = out(Format::Csv, None);
    let row: Vec<&str> = csv.lines().last().unwrap().split(',').collect();
    for ms in [s_ms, e_ms] {
        assert!(
            row.contains(&ms.to_string().as_str()),
            "{ms} not a field of {csv:?}"
        );
    }
    let sd = out(Format::Rfc5424, None);
    assert!(sd.starts_with("<134>1 2026-01-01T00:00:01.499"), "{sd}");
    assert!(
        sd.contains(&format!(
            "flowStartMilliseconds=\"{s_ms}\" flowEndMilliseconds=\"{e_ms}\""
        )),
        "{sd}"
    );
    let bsd = out(Format::Rfc3164, None);
    assert!(bsd.starts_with("<134>Jan  1 00:00:01 "), "{bsd}");
    assert!(
        bsd.contains(&format!(
            "flowStartMilliseconds={s_ms} flowEndMilliseconds={e_ms}"
        )),
        "{bsd}"
    );
    // Template fields: the default converter converts too; `dec` keeps
    // the raw ticks.
    assert_eq!(
        out(
            Format::Text,
            Some("{flowEndMilliseconds} {flowEndMilliseconds:rfc3339_ns} {flowEndMilliseconds:unix_ns} {flowEndMilliseconds:dec}")
        ),
        format!("{e_ms} 2026-01-01T00:00:02.749999999Z 1767225602749999999 {seen}\n")
    );
    // IPFIX: both fields as dateTimeMilliseconds.
    let mut f = FormatSpec {
        kind: Format::Ipfix,
        ..FormatSpec::default()
    }
    .encoder(&[TwoTsc::schema()])
    .unwrap();
    Formatter::<TwoTsc>::tsc_calibration(&mut f, &ODD);
    let mut o = Vec::new();
    f.format(&r, &mut o);
    for ms in [s_ms, e_ms] {
        assert!(
            o.windows(8).any(|w| w == ms.to_be_bytes()),
            "{ms} not in IPFIX"
        );
    }
}
