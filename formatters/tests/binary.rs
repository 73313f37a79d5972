//! Binary passthrough: written by the `binary` format, decoded back into
//! the schemas and records (`dplog-cat`'s own tests are in
//! `tools/dplog-cat/tests`).

mod common;
#[path = "../../testkit/fixtures/lb_conn.rs"]
mod lb_conn;

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
    // The preamble carries each schema whole: layout and metadata
    // (priorities, syslog layout, lifecycle).
    let want: Vec<dplog_core::Schema> = dplog_schema_nat::all()
        .iter()
        .map(|s| (*s).clone())
        .collect();
    assert_eq!(d.schemas, want);
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

/// A user's record type: its `S` frame carries its metadata (syslog
/// layout, priority, lifecycle), so the reader has the writer's schema.
#[test]
fn a_user_schemas_metadata_travels_in_its_s_frame() {
    let s = lb_conn::schema();
    let mut enc = binary::BinaryEncoder::try_new(&[&s]).unwrap();
    let mut out = Vec::new();
    for r in lb_conn::old_log_records() {
        assert!(enc.push(&r.bytes(), &mut out));
    }
    let d = binary::decode(&out);
    assert!(d.stopped.is_none(), "{:?}", d.stopped);
    assert_eq!(d.schemas, vec![s.clone()]);
    assert_eq!(d.schemas[0].meta().syslog.app_name.as_deref(), Some("lb"));
    assert_eq!(d.schemas[0].meta().lifecycle, s.meta().lifecycle);
    assert_eq!(d.records.len(), 3);
}

/// A binary log written before the metadata travelled (its `S` frame
/// holds the fields alone; bytes of that code) decodes as it did: the
/// schema with the default metadata, every record.
#[test]
fn a_log_of_the_old_encoding_decodes() {
    let old = lb_conn::old_binary_log();
    let d = binary::decode(&old);
    assert!(d.stopped.is_none(), "{:?}", d.stopped);
    assert_eq!(d.schemas.len(), 1);
    assert_eq!(d.schemas[0].fields(), lb_conn::fields_only().fields());
    // Its IPFIX enterprise element ids are the ones its writer exported:
    // the fields' positions.
    assert_eq!(
        d.schemas[0].meta(),
        &dplog_core::schema::SchemaMeta {
            event_time: Some(0),
            ipfix_enterprise: dplog_core::schema::EnterpriseIes {
                explicit: vec![],
                by_position: true,
                enums_as_unsigned: false,
            },
            ..Default::default()
        }
    );
    let want: Vec<Vec<u8>> = lb_conn::old_log_records()
        .iter()
        .map(|r| r.bytes())
        .collect();
    let got: Vec<Vec<u8>> = d.records.iter().map(|(_, r)| r.to_vec()).collect();
    assert_eq!(got, want);
    // Written again by this code: the same frames but the S frame, which
    // grows by the metadata.
    let mut enc = binary::BinaryEncoder::try_new(&[&lb_conn::fields_only()]).unwrap();
    let mut out = Vec::new();
    for r in &want {
        assert!(enc.push(r, &mut out));
    }
    let meta = dplog_core::schema::encode_meta(lb_conn::fields_only().meta()).unwrap();
    assert_eq!(out.len(), old.len() + meta.len());
    assert_eq!(&out[..15], &old[..15]);
    assert_eq!(&out[out.len() - (old.len() - 19 - 204)..], &old[19 + 204..]);
}

/// A schema whose metadata a reader would refuse is refused by the
/// format, with the reason, not written.
#[test]
fn a_schema_that_does_not_encode_is_refused_by_the_format() {
    let s = lb_conn::fields_only();
    let layout =
        dplog_core::schema::SyslogMeta::resolve(&s, Some("two words"), None, None, &[]).unwrap();
    let s = s.with_syslog(layout);
    let e = FormatSpec {
        kind: Format::Binary,
        ..Default::default()
    }
    .formatter(&[&s])
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("syslog app name \"two words\" contains ' '"),
        "{e}"
    );
}

#[test]
fn frames_walk_a_batch_and_stop_at_the_first_byte_that_is_no_frame() {
    let mut b = vec![b'H', 0, 2, 0, 7, 7, b'R', 0, 1, 0, 9];
    let got: Vec<_> = binary::frames(&b).collect();
    assert_eq!(got, [Ok((b'H', &[7u8, 7][..])), Ok((b'R', &[9u8][..]))]);
    assert_eq!(binary::frames(&[]).count(), 0);
    // A kind no frame has, a second byte other than 0, a short header:
    // the walk ends there.
    for (bad, at) in [(b'X', 11), (b'R', 11)] {
        let mut c = b.clone();
        c.extend([bad, u8::from(bad == b'R'), 0, 0]);
        let got: Vec<_> = binary::frames(&c).collect();
        assert_eq!(got.len(), 3);
        assert_eq!(
            got[2],
            Err(binary::FrameError {
                at,
                cut_short: false
            })
        );
    }
    b.extend([b'R', 0]);
    assert_eq!(
        binary::frames(&b).last(),
        Some(Err(binary::FrameError {
            at: 11,
            cut_short: false
        }))
    );
    // A frame whose body runs past the end.
    b.extend([5, 0, 1]);
    assert_eq!(
        binary::frames(&b).last(),
        Some(Err(binary::FrameError {
            at: 11,
            cut_short: true
        }))
    );
}
