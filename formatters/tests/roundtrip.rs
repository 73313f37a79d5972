//! Proptest round trips for every converter: our output parsed by the
//! standard parser (std's Ipv4Addr/Ipv6Addr, chrono, u64::from_str_radix,
//! serde_json, the csv crate; CSV values then by `Escape::Csv`'s documented
//! unescape) must give back the input.

use std::net::{Ipv4Addr, Ipv6Addr};

use chrono::DateTime;
use dplog_formatters::conv::{
    push_dec, push_escaped, push_hex, push_ipv4, push_ipv6, push_mac, Escape, Rfc3339Cache,
};
use proptest::prelude::*;

fn s(f: impl FnOnce(&mut Vec<u8>)) -> String {
    let mut v = Vec::new();
    f(&mut v);
    String::from_utf8(v).unwrap()
}

proptest! {
    #[test]
    fn ipv4(a: u32) {
        let t = s(|o| push_ipv4(o, a));
        prop_assert_eq!(t.parse::<Ipv4Addr>().unwrap(), Ipv4Addr::from(a));
    }

    #[test]
    fn ipv6(a: [u8; 16], zeros in 0usize..8, at in 0usize..8) {
        let mut a = a;
        for i in at..(at + zeros).min(8) {
            a[2 * i] = 0;
            a[2 * i + 1] = 0;
        }
        let t = s(|o| push_ipv6(o, &a));
        prop_assert_eq!(t.parse::<Ipv6Addr>().unwrap(), Ipv6Addr::from(a));
        // std's Display follows RFC 5952 too.
        prop_assert_eq!(t, Ipv6Addr::from(a).to_string());
    }

    #[test]
    fn decimal_and_hex(v: u64) {
        prop_assert_eq!(s(|o| push_dec(o, v)).parse::<u64>().unwrap(), v);
        prop_assert_eq!(u64::from_str_radix(&s(|o| push_hex(o, v)), 16).unwrap(), v);
    }

    #[test]
    fn mac(m: [u8; 6]) {
        let t = s(|o| push_mac(o, &m));
        let back: Vec<u8> = t.split(':').map(|p| u8::from_str_radix(p, 16).unwrap()).collect();
        prop_assert_eq!(back, m.to_vec());
    }

    #[test]
    fn rfc3339_every_precision(ns: u64) {
        let mut c = Rfc3339Cache::default();
        for (digits, unit) in [(0u8, 1_000_000_000u64), (3, 1_000_000), (6, 1000), (9, 1)] {
            let t = s(|o| c.push(o, ns, digits));
            let d = DateTime::parse_from_rfc3339(&t).unwrap();
            let got = d.timestamp() as u64 * 1_000_000_000 + d.timestamp_subsec_nanos() as u64;
            prop_assert_eq!(got, ns / unit * unit, "{}", t);
        }
    }

    #[test]
    fn json_string_escaping(text in "\\PC*|[\"\\\\\\x00-\\x1f\\]\u{7f}-\u{9f}\u{2028}\u{2029}]*") {
        let mut o = b"\"".to_vec();
        push_escaped(&mut o, text.as_bytes(), Escape::Json);
        o.push(b'"');
        let want: String = text.split('\0').next().unwrap().to_string();
        prop_assert_eq!(serde_json::from_slice::<String>(&o).unwrap(), want);
        // No control character (C0, DEL, C1) and no U+2028 / U+2029 raw.
        let raw = std::str::from_utf8(&o).unwrap();
        let line_break = |c: char| c.is_control() || c == '\u{2028}' || c == '\u{2029}';
        prop_assert!(!raw.chars().any(line_break), "{}", raw);
    }

    #[test]
    fn csv_field_escaping(a in "[^\\x00]*", b in prop::collection::vec(1u8..=255, 0..40)) {
        let mut o = Vec::new();
        push_escaped(&mut o, a.as_bytes(), Escape::Csv);
        o.push(b',');
        push_escaped(&mut o, &b, Escape::Csv);
        o.extend_from_slice(b"\r\n");
        // One physical line, valid UTF-8, whatever the values hold.
        prop_assert_eq!(o.iter().position(|&c| c == b'\n' || c == b'\r'), Some(o.len() - 2));
        prop_assert!(std::str::from_utf8(&o).is_ok());
        let mut rd = csv::ReaderBuilder::new().has_headers(false).from_reader(&o[..]);
        let rec = rd.records().next().unwrap().unwrap();
        prop_assert_eq!(rec.len(), 2);
        prop_assert_eq!(unescape_csv(&rec[0]), a.as_bytes());
        prop_assert_eq!(unescape_csv(&rec[1]), b);
    }
}

/// The CSV unescape `Escape::Csv` documents: `\\` and `\xNN` back to
/// their byte.
fn unescape_csv(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let (mut out, mut i) = (Vec::new(), 0);
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
        } else if b[i + 1] == b'\\' {
            out.push(b'\\');
            i += 2;
        } else {
            assert_eq!(b[i + 1], b'x', "{s:?}");
            let h = std::str::from_utf8(&b[i + 2..i + 4]).unwrap();
            out.push(u8::from_str_radix(h, 16).unwrap());
            i += 4;
        }
    }
    out
}
