//! The step specialisations and pair superinstructions built by
//! `Program::build` (exact-size decimal loads, `{ipv4}:{port}`,
//! any field + `<lit>{ipv4}:{port}` or `<lit>{name}` as one step) must print exactly
//! what the unfused program prints, for random records, and must really
//! cut the steps per line.

use dplog_core::{HasSchema, RecordHeader};
use dplog_formatters::conv::Escape;
use dplog_formatters::{Options, Program};
use dplog_schema_nat::Nat44SessionRecord;
use dplog_schema_nat::{self as nat, EventProfile};
use proptest::prelude::*;

/// The benchmark line (`benches/src/format_peers.rs`).
const BENCH: &str = "{observationTimeMilliseconds:rfc3339} NAT44 {natEvent:name} \
{sourceIPv4Address}:{sourceTransportPort} -> {postNATSourceIPv4Address}:{postNAPTSourceTransportPort} \
proto={protocolIdentifier} dst={destinationIPv4Address}:{destinationTransportPort}";

/// Templates and their step counts (fused, unfused).
const CASES: &[(&str, usize, usize)] = &[
    (BENCH, 3, 6),
    // Tails: {ipv4}:{port} after {ipv4}:{port}; a name after a time
    // (generic RFC 3339 and the specialised ms one) and after a port.
    (
        "{sourceIPv4Address}:{sourceTransportPort} -> {postNATSourceIPv4Address}:{postNAPTSourceTransportPort}",
        1,
        2,
    ),
    ("{observationTimeMilliseconds:rfc3339_us} {natEvent:name}.", 1, 2),
    ("{observationTimeMilliseconds:rfc3339} {natEvent:name}", 1, 2),
    ("{sourceTransportPort}={natEvent:name} {natEvent}", 2, 3),
    // DecIpv4Port with a 1-, 2- and 4-byte decimal; Ipv4Port alone.
    (
        "{protocolIdentifier} {sourceIPv4Address}:{sourceTransportPort}",
        1,
        2,
    ),
    (
        "{sourceTransportPort}->{destinationIPv4Address}:{destinationTransportPort}!",
        1,
        2,
    ),
    (
        "vrf={ingressVRFID}|{postNATSourceIPv4Address}/{postNAPTSourceTransportPort}",
        2,
        3,
    ),
    // Empty middle literal; a 16-byte one (fuses) and a 17-byte one (not).
    (
        "{natEvent:name}{sourceIPv4Address}:{sourceTransportPort}",
        1,
        2,
    ),
    (
        "{natEvent:name}0123456789abcdef{destinationIPv4Address}:{destinationTransportPort}",
        1,
        2,
    ),
    (
        "{natEvent:name}0123456789abcdefg{destinationIPv4Address}:{destinationTransportPort}",
        2,
        2,
    ),
    // 8-byte decimals (Dec8, never paired); natEvent in decimal through
    // the profile (Event, not fused); a 4-byte port-less address.
    (
        "{initiatorOctets} {responderOctets} {natEvent} {destinationIPv4Address}",
        4,
        4,
    ),
    // A literal longer than 32 bytes after a field stays its own step.
    (
        "{sourceTransportPort} is a literal of more than thirty-two bytes {protocolIdentifier}",
        3,
        3,
    ),
];

fn rec(v: (u64, [u32; 3], [u16; 3], u8, u8, u32, [u64; 2])) -> Nat44SessionRecord {
    let (ts, a, p, proto, ev, vrf, oct) = v;
    Nat44SessionRecord {
        header: RecordHeader::of::<Nat44SessionRecord>(),
        timestamp_ns: ts,
        src_addr: a[0],
        post_nat_src_addr: a[1],
        dst_addr: a[2],
        src_port: p[0],
        post_napt_src_port: p[1],
        dst_port: p[2],
        protocol: proto,
        nat_event: ev,
        ingress_vrf_id: vrf,
        initiator_octets: oct[0],
        responder_octets: oct[1],
        ..Default::default()
    }
}

fn run(p: &mut Program, r: &Nat44SessionRecord) -> String {
    // Existing bytes in `out`: the line is appended after them.
    let mut out = b"prefix|".to_vec();
    assert!(p.run(r.as_bytes(), &mut out));
    String::from_utf8(out).unwrap()
}

/// Programs for every compiling case, fused and unfused, in both profiles.
fn programs() -> Vec<(Program, Program)> {
    let s = nat::nat44_session();
    let mut v = Vec::new();
    for &(t, _, _) in CASES {
        for profile in [EventProfile::default(), EventProfile::Legacy] {
            let opts = Options {
                renumber: profile.renumber(),
                ..Default::default()
            };
            let p = Program::compile(t, s, opts, Escape::Text).unwrap();
            let u = p.clone().unfused();
            v.push((p, u));
        }
    }
    v.push((conditional(), conditional().unfused()));
    v
}

/// A program whose conditional bodies start with a fusable pair, end
/// with one, and end between the two halves of a would-be pair (which
/// must not fuse across the body's end).
fn conditional() -> Program {
    let s = nat::nat44_session();
    let f = |name: &str| s.field(name).unwrap().0;
    let mut p = Program::new(s, Options::default());
    let t = Escape::Text;
    p.lit(b"[");
    p.when(s, f("natEvent"), 4, |p| {
        p.field(s, f("natEvent"), Some(dplog_formatters::Conv::Name), t)?;
        p.lit(b" ");
        p.field(s, f("sourceIPv4Address"), None, t)?;
        p.lit(b":");
        p.field(s, f("sourceTransportPort"), None, t)?;
        p.lit(b" p=");
        p.field(s, f("protocolIdentifier"), None, t)?;
        p.lit(b" ");
        p.field(s, f("destinationIPv4Address"), None, t)?;
        p.lit(b":");
        p.field(s, f("destinationTransportPort"), None, t)
    })
    .unwrap();
    p.when(s, f("protocolIdentifier"), 17, |p| {
        p.lit(b" udp ");
        p.field(s, f("natEvent"), Some(dplog_formatters::Conv::Name), t)
    })
    .unwrap();
    // Right after a body ending in a name: no pair across the end.
    p.field(s, f("postNATSourceIPv4Address"), None, t).unwrap();
    p.lit(b":");
    p.field(s, f("postNAPTSourceTransportPort"), None, t)
        .unwrap();
    p.when(s, f("natEvent"), 5, |p| {
        p.lit(b" vrf=");
        p.field(s, f("ingressVRFID"), None, t)
    })
    .unwrap();
    p.lit(b" ");
    p.field(s, f("destinationIPv4Address"), None, t).unwrap();
    p.lit(b":");
    p.field(s, f("destinationTransportPort"), None, t).unwrap();
    p
}

#[test]
fn superinstructions_cut_steps() {
    let s = nat::nat44_session();
    for &(t, fused, unfused) in CASES {
        let p = Program::compile(t, s, Options::default(), Escape::Text).unwrap();
        let mut u = p.clone().unfused();
        let mut p = p;
        assert_eq!((p.step_count(), u.step_count()), (fused, unfused), "{t}");
    }
    // The conditional program: pairs fuse inside bodies only.
    let mut p = conditional();
    let mut u = conditional().unfused();
    assert_eq!((p.step_count(), u.step_count()), (13, 15));
}

#[test]
fn known_lines() {
    let r = rec((
        1_767_225_600_123_456_789,
        [0x0A00_0001, 0xC633_6405, 0xCB00_7107],
        [1234, 40000, 443],
        6,
        4,
        7,
        [99, 100_000_000_000],
    ));
    let s = nat::nat44_session();
    let mut p = Program::compile(BENCH, s, Options::default(), Escape::Text).unwrap();
    assert_eq!(
        run(&mut p, &r),
        "prefix|2026-01-01T00:00:00.123Z NAT44 NAT44_SESSION_CREATE 10.0.0.1:1234 -> \
198.51.100.5:40000 proto=6 dst=203.0.113.7:443"
    );
    let mut c = conditional();
    assert_eq!(
        run(&mut c, &r),
        "prefix|[NAT44_SESSION_CREATE 10.0.0.1:1234 p=6 203.0.113.7:443198.51.100.5:40000 \
203.0.113.7:443"
    );
    let r = rec((
        0,
        [0, u32::MAX, 0],
        [0, 65535, 9],
        17,
        5,
        4_294_967_295,
        [0, 0],
    ));
    assert_eq!(
        run(&mut c, &r),
        "prefix|[ udp NAT44_SESSION_DELETE255.255.255.255:65535 vrf=4294967295 0.0.0.0:9"
    );
}

/// Names of 32 bytes and longer (one 32-byte copy, then 16-byte blocks),
/// alone and fused with `{ipv4}:{port}`.
#[test]
fn long_names() {
    let s = nat::nat44_session();
    let f = |name: &str| s.field(name).unwrap().0;
    let n32 = "a-name-of-exactly-thirty-two-byt";
    let n41 = "a-protocol-name-of-forty-one-bytes-012345";
    assert_eq!((n32.len(), n41.len()), (32, 41));
    let mut p = Program::new(s, Options::default());
    let names = [(6, n32), (17, n41)];
    let t = Escape::Text;
    p.field_mapped(s, f("protocolIdentifier"), &names, t)
        .unwrap();
    p.lit(b" ");
    p.field(s, f("sourceIPv4Address"), None, t).unwrap();
    p.lit(b":");
    p.field(s, f("sourceTransportPort"), None, t).unwrap();
    p.lit(b"|");
    p.field_mapped(s, f("protocolIdentifier"), &names, t)
        .unwrap();
    p.lit(b"|");
    let mut u = p.clone().unfused();
    assert_eq!((p.step_count(), u.step_count()), (2, 3));
    for (proto, name) in [(6u8, n32), (17, n41), (1, "1")] {
        let r = rec((0, [0x0A00_0001, 0, 0], [80, 0, 0], proto, 4, 0, [0, 0]));
        let want = format!("prefix|{name} 10.0.0.1:80|{name}|");
        assert_eq!(run(&mut p, &r), want);
        assert_eq!(run(&mut u, &r), want);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn fused_equals_unfused(
        ts: u64,
        a: [u32; 3],
        p: [u16; 3],
        proto in prop_oneof![Just(6u8), Just(17u8), any::<u8>()],
        ev in prop_oneof![Just(4u8), Just(5u8), Just(1u8), any::<u8>()],
        vrf: u32,
        oct: [u64; 2],
    ) {
        let r = rec((ts, a, p, proto, ev, vrf, oct));
        for (mut f, mut u) in programs() {
            prop_assert_eq!(run(&mut f, &r), run(&mut u, &r));
        }
    }
}
