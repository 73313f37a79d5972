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
