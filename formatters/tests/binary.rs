//! Binary passthrough: written by the `binary` format, decoded back into
//! the schemas and records (`dplog-cat`'s own tests are in
//! `tools/dplog-cat/tests`).

mod common;

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
    let want: Vec<&dplog_core::Schema> = dplog_core::schema::nat::all().to_vec();
    assert_eq!(d.schemas.iter().collect::<Vec<_>>(), want);
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
