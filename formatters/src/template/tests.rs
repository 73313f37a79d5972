use super::*;
use dplog_schema_nat as nat;

fn err(t: &str) -> TemplateError {
    Program::compile(t, nat::nat44_session(), Options::default(), Escape::Text).unwrap_err()
}

#[test]
fn bad_templates_name_the_column() {
    let e = err("ok {sourceIPv4Adress} x");
    assert_eq!(e.column, 4);
    assert!(
        e.message.contains("unknown field \"sourceIPv4Adress\""),
        "{e}"
    );
    assert!(
        e.to_string().starts_with("template error at column 4:"),
        "{e}"
    );
    let e = err("{natEvent:nome}");
    assert_eq!(e.column, 1);
    assert!(e.message.contains("unknown converter \"nome\""), "{e}");
    let e = err("ab {sourceIPv4Address:rfc3339}");
    assert_eq!(e.column, 4);
    assert_eq!(
        e.message,
        "converter rfc3339_ms does not suit field sourceIPv4Address of kind ipv4"
    );
    let e = err("x {natEvent");
    assert_eq!((e.column, e.message.contains("unclosed")), (3, true));
    let e = err("é }");
    assert_eq!((e.column, e.message.contains("unmatched")), (3, true));
    let e = err("{sourceTransportPort:name}");
    assert_eq!(
        e.message,
        "converter name does not suit field sourceTransportPort of kind port"
    );
}

#[test]
fn a_line_break_in_a_template_is_an_error_at_its_column() {
    let e = err("a {natEvent}\nb {sourceIPv4Address}");
    assert_eq!(e.column, 13, "{e}");
    assert!(e.message.contains("line break"), "{e}");
}

/// Literal fusion and the `{ipv4}:{dec}` superinstruction must not
/// move anything across the ends of a conditional body.
#[test]
fn fused_steps_keep_conditional_bodies_exact() {
    let s = nat::nat44_session();
    let f = |name: &str| s.field(name).unwrap().0;
    let mut p = Program::new(s, Options::default());
    p.lit(b"<");
    p.field(s, f("sourceIPv4Address"), None, Escape::Text)
        .unwrap();
    p.lit(b":");
    p.field(s, f("sourceTransportPort"), None, Escape::Text)
        .unwrap();
    p.when(s, f("natEvent"), 5, |p| {
        p.lit(b" del ");
        p.field(s, f("destinationIPv4Address"), None, Escape::Text)?;
        p.lit(b":");
        p.field(s, f("destinationTransportPort"), None, Escape::Text)?;
        p.lit(b" pk=");
        p.field(s, f("initiatorPackets"), None, Escape::Text)?;
        p.when(s, f("protocolIdentifier"), 17, |p| {
            p.lit(b" udp");
            Ok(())
        })
    })
    .unwrap();
    p.lit(b" | ");
    p.field(s, f("postNATSourceIPv4Address"), None, Escape::Text)
        .unwrap();
    p.lit(b":");
    p.field(s, f("postNAPTSourceTransportPort"), None, Escape::Text)
        .unwrap();
    p.lit(b" a literal longer than sixteen bytes>");
    let mut r = dplog_schema_nat::Nat44SessionRecord {
        nat_event: 4,
        protocol: 17,
        src_addr: 0x0A00_0001,
        src_port: 1234,
        dst_addr: 0xC000_0201,
        dst_port: 53,
        post_nat_src_addr: 0xC633_6405,
        post_napt_src_port: 40000,
        initiator_packets: 7,
        ..Default::default()
    };
    let run = |p: &mut Program, r: &dplog_schema_nat::Nat44SessionRecord| {
        let mut out = b"x".to_vec();
        assert!(p.run(dplog_core::HasSchema::as_bytes(r), &mut out));
        String::from_utf8(out).unwrap()
    };
    let tail = " | 198.51.100.5:40000 a literal longer than sixteen bytes>";
    assert_eq!(run(&mut p, &r), format!("x<10.0.0.1:1234{tail}"));
    r.nat_event = 5;
    assert_eq!(
        run(&mut p, &r),
        format!("x<10.0.0.1:1234 del 192.0.2.1:53 pk=7 udp{tail}")
    );
    r.protocol = 6;
    assert_eq!(
        run(&mut p, &r),
        format!("x<10.0.0.1:1234 del 192.0.2.1:53 pk=7{tail}")
    );
    // Adding to a program that already ran rebuilds its steps.
    p.lit(b"!");
    assert!(run(&mut p, &r).ends_with(">!"));
}

/// Fields in the last 8 bytes of a short record (read by the shifted
/// load), and rare converters that grow `out` in the middle of a line
/// appended after existing bytes with no spare capacity.
#[test]
fn tail_fields_and_rare_converters_grow_out_mid_line() {
    use dplog_core::schema::{FieldDef, FieldKind as K};
    let s = Schema::new(
        41,
        "tail",
        44,
        vec![
            FieldDef::new("a", 8, 4, K::Ipv4, 0),
            FieldDef::new("mac", 12, 6, K::Mac, 0),
            FieldDef::new("tag", 18, 20, K::Bytes, 0),
            FieldDef::new("b", 38, 1, K::U8, 0),
            FieldDef::new("c", 39, 1, K::Bool, 0),
            FieldDef::new("port", 40, 2, K::Port, 0),
            FieldDef::new("d", 42, 2, K::U16, 0),
        ],
    )
    .unwrap();
    let mut p = Program::compile(
        "{a}:{port} mac={mac} tag={tag} b={b:hex} c={c} d={d} {port:hex}",
        &s,
        Options::default(),
        Escape::Json,
    )
    .unwrap();
    let mut rec = [0u8; 44];
    rec[8..12].copy_from_slice(&0xC000_0201u32.to_ne_bytes());
    rec[12..18].copy_from_slice(&[0, 0x1b, 0x21, 0xaa, 0xbb, 0xff]);
    rec[18..38].copy_from_slice(b"\"q\\\n\x01long tail......");
    rec[38] = 0xab;
    rec[39] = 1;
    rec[40..42].copy_from_slice(&65535u16.to_ne_bytes());
    rec[42..44].copy_from_slice(&7u16.to_ne_bytes());
    let want = "192.0.2.1:65535 mac=00:1b:21:aa:bb:ff \
                tag=\\\"q\\\\\\n\\u0001long tail...... b=ab c=true d=7 ffff";
    for _ in 0..2 {
        let mut out = b"head|".to_vec();
        out.shrink_to_fit();
        assert!(p.run(&rec, &mut out));
        assert_eq!(std::str::from_utf8(&out).unwrap(), format!("head|{want}"));
    }
}

#[test]
fn braces_escape_and_short_records_are_refused() {
    let mut p = Program::compile(
        "{{{natEvent}}} }}",
        nat::nat44_session(),
        Options::default(),
        Escape::Text,
    )
    .unwrap();
    let r = dplog_schema_nat::Nat44SessionRecord {
        nat_event: 4,
        ..Default::default()
    };
    let mut out = Vec::new();
    assert!(p.run(dplog_core::HasSchema::as_bytes(&r), &mut out));
    assert_eq!(out, b"{4} }");
    assert!(!p.run(&dplog_core::HasSchema::as_bytes(&r)[..63], &mut out));
    assert_eq!(out, b"{4} }");
}

#[test]
fn every_converter_name_parses_back_to_its_converter() {
    use super::converters::Conv;
    let all = [
        Conv::Dec,
        Conv::Hex,
        Conv::Bool,
        Conv::Ipv4,
        Conv::Ipv6,
        Conv::Mac,
        Conv::Rfc3339(0),
        Conv::Rfc3339(3),
        Conv::Rfc3339(6),
        Conv::Rfc3339(9),
        Conv::Rfc3164,
        Conv::UnixS,
        Conv::UnixMs,
        Conv::UnixUs,
        Conv::UnixNs,
        Conv::Name,
        Conv::Str,
        Conv::Base64,
    ];
    for c in all {
        assert_eq!(Conv::parse(c.name()), Some(c), "{}", c.name());
    }
}
