//! The ClickHouse sink's RowBinary rows, byte for byte, for every field
//! kind a schema declares, on the types of both server generations and
//! on the other column types a table may have; the table check's
//! refusals, naming the column. No server: the bytes are ClickHouse's
//! documented RowBinary layout (integers LE, FixedString raw, String
//! LEB128 length first, DateTime UInt32 s, DateTime64(P) Int64 10^-P s).

use dplog_core::schema::{FieldDef, FieldKind, Schema};
use dplog_formatters::TscCalibration;
use dplog_sinks::clickhouse::{column_type, create_table, RowEncoder, Server, TableOptions};

/// One field of every kind (a user's record, not the NAT's): 80 bytes.
fn every_kind() -> Schema {
    Schema::new(
        700,
        "everyKind",
        80,
        vec![
            FieldDef::new("u8", 8, 1, FieldKind::U8, 0),
            FieldDef::new("flag", 9, 1, FieldKind::Bool, 0),
            FieldDef::new("proto", 10, 1, FieldKind::Protocol, 0),
            FieldDef::new("state", 11, 1, FieldKind::Enum, 0).with_names(&[(1, "UP")]),
            FieldDef::new("u16", 12, 2, FieldKind::U16, 0),
            FieldDef::new("port", 14, 2, FieldKind::Port, 0),
            FieldDef::new("u32", 16, 4, FieldKind::U32, 0),
            FieldDef::new("v4", 20, 4, FieldKind::Ipv4, 0),
            FieldDef::new("u64", 24, 8, FieldKind::U64, 0),
            FieldDef::new("t", 32, 8, FieldKind::NsTimestamp, 0),
            FieldDef::new("ticks", 40, 8, FieldKind::TscTimestamp, 0),
            FieldDef::new("v6", 48, 16, FieldKind::Ipv6, 0),
            FieldDef::new("mac", 64, 6, FieldKind::Mac, 0),
            FieldDef::new("name", 70, 5, FieldKind::Bytes, 0),
            FieldDef::new("e16", 76, 2, FieldKind::Enum, 0),
        ],
    )
    .unwrap()
}

const T: u64 = 1_767_225_600_123_456_789;

fn record() -> Vec<u8> {
    let mut r = vec![0u8; 80];
    r[8] = 200;
    r[9] = 7; // any non-zero is true
    r[10] = 17;
    r[11] = 9; // a value without a name
    r[12..14].copy_from_slice(&0x1234u16.to_ne_bytes());
    r[14..16].copy_from_slice(&53u16.to_ne_bytes());
    r[16..20].copy_from_slice(&0xDEAD_BEEFu32.to_ne_bytes());
    r[20..24].copy_from_slice(&0xC000_0201u32.to_ne_bytes()); // 192.0.2.1
    r[24..32].copy_from_slice(&0x0102_0304_0506_0708u64.to_ne_bytes());
    r[32..40].copy_from_slice(&T.to_ne_bytes());
    r[40..48].copy_from_slice(&5_000u64.to_ne_bytes()); // ticks
    r[48..64].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    r[64..70].copy_from_slice(&[0x02, 0, 0x5e, 0, 0x53, 0x01]);
    r[70..73].copy_from_slice(b"abc"); // two bytes of NUL padding
    r[76..78].copy_from_slice(&300u16.to_ne_bytes());
    r
}

/// 2 GHz ticks from tsc0 = 1000 at ns0 = T: tick 5000 is T + 2000 ns.
const CAL: TscCalibration = TscCalibration {
    hz: 2_000_000_000,
    tsc0: 1000,
    ns0: T,
};

/// The row's bytes common to every column choice, up to `u64`.
fn ints() -> Vec<u8> {
    let mut v = vec![200, 1, 17, 9];
    v.extend_from_slice(&[0x34, 0x12, 53, 0]);
    v.extend_from_slice(&[0xEF, 0xBE, 0xAD, 0xDE]);
    v.extend_from_slice(&[0x01, 0x02, 0x00, 0xC0]);
    v.extend_from_slice(&[8, 7, 6, 5, 4, 3, 2, 1]);
    v
}

fn tail() -> Vec<u8> {
    let mut v = vec![0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    v.extend_from_slice(&[0x02, 0, 0x5e, 0, 0x53, 0x01]);
    v
}

#[test]
fn every_kind_encodes_to_clickhouse_rowbinary_on_18_16_types() {
    let s = every_kind();
    let enc = RowEncoder::for_schema(&s, Server::V18);
    let mut row = Vec::new();
    enc.push(&record(), &CAL, &mut row);
    let mut want = ints();
    want.extend_from_slice(&T.to_le_bytes()); // UInt64 ns
    want.extend_from_slice(&(T + 2000).to_le_bytes()); // ticks as ns
    want.extend(tail());
    want.extend_from_slice(b"abc\0\0"); // FixedString(5)
    want.extend_from_slice(&[0x2C, 0x01]); // UInt16 300
    assert_eq!(row, want);
    // A second row appends.
    enc.push(&record(), &CAL, &mut row);
    assert_eq!(row.len(), 2 * want.len());
    assert_eq!(&row[want.len()..], &want[..]);
}

#[test]
fn every_kind_encodes_to_clickhouse_rowbinary_on_current_types() {
    let s = every_kind();
    let enc = RowEncoder::for_schema(&s, Server::Current);
    let mut row = Vec::new();
    enc.push(&record(), &CAL, &mut row);
    // DateTime64(9) is an Int64 of ns, IPv4 a UInt32, IPv6 16 bytes: the
    // same bytes as on 18.16.
    let mut want = ints();
    want.extend_from_slice(&(T as i64).to_le_bytes());
    want.extend_from_slice(&((T + 2000) as i64).to_le_bytes());
    want.extend(tail());
    want.extend_from_slice(b"abc\0\0");
    want.extend_from_slice(&[0x2C, 0x01]);
    assert_eq!(row, want);
    let types: Vec<String> = s
        .fields()
        .iter()
        .map(|f| column_type(f, Server::Current))
        .collect();
    assert_eq!(
        types,
        [
            "UInt8",
            "UInt8",
            "UInt8",
            "UInt8",
            "UInt16",
            "UInt16",
            "UInt32",
            "IPv4",
            "UInt64",
            "DateTime64(9, 'UTC')",
            "DateTime64(9, 'UTC')",
            "IPv6",
            "FixedString(6)",
            "FixedString(5)",
            "UInt16"
        ]
    );
}

fn describe(s: &Schema, over: &[(&str, &str)]) -> Vec<(String, String, String)> {
    s.fields()
        .iter()
        .map(|f| {
            let ty = over
                .iter()
                .find(|o| o.0 == f.name)
                .map_or(column_type(f, Server::V18), |o| o.1.to_string());
            (f.name.to_string(), ty, String::new())
        })
        .collect()
}

#[test]
fn a_table_of_other_lossless_or_chosen_types_gets_its_own_encoding() {
    let s = every_kind();
    let cols = describe(
        &s,
        &[
            ("t", "DateTime('UTC')"),
            ("ticks", "DateTime64(3, 'UTC')"),
            ("name", "String"),
            ("flag", "Bool"),
        ],
    );
    let enc = RowEncoder::for_table(&s, &cols).unwrap();
    let mut row = Vec::new();
    enc.push(&record(), &CAL, &mut row);
    let mut want = ints();
    want.extend_from_slice(&((T / 1_000_000_000) as u32).to_le_bytes()); // DateTime: s
    want.extend_from_slice(&(((T + 2000) / 1_000_000) as i64).to_le_bytes()); // ms
    want.extend(tail());
    want.extend_from_slice(&[3, b'a', b'b', b'c']); // String without padding
    want.extend_from_slice(&[0x2C, 0x01]);
    assert_eq!(row, want);
    // A column order other than the fields': the INSERT names its columns.
    assert!(enc.column_list().starts_with("(`u8`, `flag`, `proto`"));
}

#[test]
fn a_table_that_does_not_hold_the_fields_is_refused_naming_each_column() {
    let s = every_kind();
    let mut cols = describe(&s, &[("port", "UInt32"), ("v6", "String")]);
    cols.retain(|c| c.0 != "mac");
    cols.push(("extra".into(), "UInt8".into(), String::new()));
    cols.push(("filled".into(), "UInt8".into(), "DEFAULT".into()));
    let e = RowEncoder::for_table(&s, &cols).unwrap_err();
    assert!(
        e.contains(
            "column `port` is UInt32, which cannot hold field port (Port, 2 bytes): make it UInt16"
        ),
        "{e}"
    );
    assert!(e.contains("column `v6` is String"), "{e}");
    assert!(e.contains("make it IPv6 (or FixedString(16))"), "{e}");
    assert!(
        e.contains("field mac has no column (add `mac` FixedString(6))"),
        "{e}"
    );
    assert!(
        e.contains("column `extra` (UInt8) is no field of everyKind and has no DEFAULT"),
        "{e}"
    );
    assert!(!e.contains("filled"), "{e}");
}

#[test]
fn create_table_orders_by_the_lifecycle_keys_and_time_and_partitions_by_day() {
    let s = every_kind()
        .with_lifecycle("state", &[1], &[2], &["v4", "port"], &["u64"])
        .unwrap();
    let v18 = create_table(&s, &TableOptions::new("logs.every", Server::V18));
    assert_eq!(
        v18,
        "CREATE TABLE `logs`.`every`\n(\n    `u8` UInt8,\n    `flag` UInt8,\n    `proto` UInt8,\n    \
         `state` UInt8,\n    `u16` UInt16,\n    `port` UInt16,\n    `u32` UInt32,\n    `v4` UInt32,\n    \
         `u64` UInt64,\n    `t` UInt64,\n    `ticks` UInt64,\n    `v6` FixedString(16),\n    \
         `mac` FixedString(6),\n    `name` FixedString(5),\n    `e16` UInt16\n)\nENGINE = MergeTree\n\
         PARTITION BY toYYYYMMDD(toDateTime(intDiv(`t`, 1000000000)))\nORDER BY (`v4`, `port`, `t`);\n"
    );
    let mut o = TableOptions::new("every", Server::Current);
    o.ttl_days = Some(90);
    let cur = create_table(&s, &o);
    assert!(
        cur.contains("    `t` DateTime64(9, 'UTC') CODEC(Delta, ZSTD(1)),\n"),
        "{cur}"
    );
    assert!(cur.contains("    `v4` IPv4 CODEC(ZSTD(1)),\n"), "{cur}");
    assert!(
        cur.contains("PARTITION BY toYYYYMMDD(toDateTime(`t`))\n"),
        "{cur}"
    );
    assert!(
        cur.ends_with("ORDER BY (`v4`, `port`, `t`)\nTTL toDateTime(`t`) + INTERVAL 90 DAY;\n"),
        "{cur}"
    );
}
