//! Binary passthrough: written by the `binary` format, decoded back into
//! the schemas and records (`dplog-cat`'s own tests are in
//! `tools/dplog-cat/tests`).

mod common;

use dplog_schema_nat::NatFormatSpec as _;

use common::*;
use dplog_core::Formatter;
use dplog_formatters::{binary, Format, FormatSpec};

fn binary_file() -> Vec<u8> {
    let mut f = FormatSpec {
        kind: Format::Binary,
        ..Default::default()
    }
    .nat_formatter()
    .unwrap();
    let mut out = Vec::new();
    for r in all_records() {
        f.format(&r, &mut out);
    }
    out
}

#[test]
fn decode_gives_back_the_schemas_and_records() {
    let b = binary_file();
    let d = binary::decode(&b);
    assert!(d.stopped.is_none(), "{:?}", d.stopped);
    // The preamble carries the layout (ids, names, fields), not the
    // metadata (priorities, syslog layout), which the reader's schema
    // package supplies.
    let layout =
        |s: &dplog_core::Schema| (s.id(), s.name().to_string(), s.size(), s.fields().to_vec());
    let want: Vec<_> = dplog_schema_nat::all().iter().map(|s| layout(s)).collect();
    assert_eq!(d.schemas.iter().map(layout).collect::<Vec<_>>(), want);
    let recs: Vec<Vec<u8>> = all_records()
        .iter()
        .map(|r| r.as_bytes().to_vec())
        .collect();
    assert_eq!(
        d.records
            .iter()
            .map(|(_, r)| r.to_vec())
            .collect::<Vec<_>>(),
        recs
    );
}

#[test]
fn calibration_and_drop_report_frames_decode_exactly() {
    use dplog_core::{DropReport, Formatter};
    use dplog_formatters::TscCalibration;
    let mut f = FormatSpec {
        kind: Format::Binary,
        ..Default::default()
    }
    .nat_formatter()
    .unwrap();
    let recs = all_records();
    let mut out = Vec::new();
    let cal = dplog_core::tsc::Calibration {
        hz: 2_500_000_000,
        tsc0: 77,
        ns0: 1_767_225_600_000_000_000,
    };
    Formatter::<dplog_schema_nat::NatRecord>::tsc_calibration(&mut f, &cal);
    // A report before any record: the header and calibration come first.
    let r1 = DropReport::new(3, 12, 100, 200).with_record_time(150);
    Formatter::<dplog_schema_nat::NatRecord>::format_drop_report(&mut f, &r1, &mut out);
    f.format(&recs[0], &mut out);
    let r2 = DropReport::sink(5, 300, 400);
    Formatter::<dplog_schema_nat::NatRecord>::format_drop_report(&mut f, &r2, &mut out);
    f.format(&recs[1], &mut out);
    // The same calibration again writes no new frame; a new one does.
    Formatter::<dplog_schema_nat::NatRecord>::tsc_calibration(&mut f, &cal);
    f.format(&recs[2], &mut out);
    let cal2 = dplog_core::tsc::Calibration {
        ns0: cal.ns0 + 1,
        ..cal
    };
    Formatter::<dplog_schema_nat::NatRecord>::tsc_calibration(&mut f, &cal2);
    f.format(&recs[3], &mut out);

    let d = binary::decode(&out);
    assert!(d.stopped.is_none(), "{:?}", d.stopped);
    assert_eq!(d.records.len(), 4);
    assert_eq!(d.drop_reports, vec![(0, r1), (1, r2)]);
    assert_eq!(d.calibration, TscCalibration::from(&cal2));
    let mut dec = binary::StreamDecoder::new();
    let (mut p, mut cals) = (0, Vec::new());
    while p < out.len() {
        let (frame, n) = dec.next(&out[p..]).unwrap().unwrap();
        if let binary::Frame::Calibration(c) = frame {
            cals.push(c);
        }
        p += n;
    }
    assert_eq!(
        cals,
        vec![TscCalibration::from(&cal), TscCalibration::from(&cal2)]
    );
}
