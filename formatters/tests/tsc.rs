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
