//! IPFIX messages decoded by nfdump's collector `nfcapd` (Debian package
//! `nfdump`, installed by scripts/setup.sh), the second real collector
//! after tshark (tests/ipfix.rs).
//!
//! Each test starts its own `nfcapd` on 127.0.0.1 with a fresh data
//! directory, sends the encoder's messages to it over UDP, waits until the
//! collector has decoded every record (its `-E` print), stops it with
//! SIGTERM (which flushes and closes the file) and reads the file back with
//! `nfdump`.
//!
//! nfdump 1.7.1 (Debian 12) decodes these RFC 8158 elements, and every one
//! is checked against the record: natEvent (230), sourceIPv4Address (8),
//! destinationIPv4Address (12), sourceTransportPort (7),
//! destinationTransportPort (11), protocolIdentifier (4),
//! postNATSourceIPv4Address (225), postNAPTSourceTransportPort (227),
//! ingressVRFID (234) and observationTimeMilliseconds (323, its event
//! time). It skips the rest without decoding them: initiatorOctets /
//! responderOctets (231/232), initiatorPackets / responderPackets
//! (298/299), natPoolId (283), portRangeStart/End/StepSize/NumPorts
//! (361-364), natQuotaExceededEvent (466) and the limit elements
//! (471-475); tshark checks those in tests/ipfix.rs.

mod acl;
mod common;

use dplog_schema_nat::NatFormatSpec as _;

use acl::*;
use common::*;
use dplog_core::schema::HasSchema;
use dplog_core::Formatter;
use dplog_formatters::ipfix::split_messages;
use dplog_formatters::{ExportClock, Format, FormatSpec, IpfixOptions};
use dplog_testkit::nfcapd::{flows, stat_field, text, Nfcapd};

/// Sends every IPFIX message of `stream` to `c` as one datagram; returns
/// how many.
fn send(c: &Nfcapd, stream: &[u8]) -> usize {
    let msgs = split_messages(stream);
    assert_eq!(
        msgs.iter().map(|m| m.len()).sum::<usize>(),
        stream.len(),
        "the stream is whole messages"
    );
    c.send(&msgs)
}

fn ipfix(mtu: usize) -> dplog_schema_nat::NatFormatter {
    FormatSpec {
        kind: Format::Ipfix,
        ipfix: IpfixOptions {
            mtu,
            export_clock: ExportClock::Record,
            ..Default::default()
        },
        ..Default::default()
    }
    .nat_formatter()
    .unwrap()
}

#[test]
fn nfcapd_decodes_every_field_it_knows_of_every_nat_record() {
    let mut f = ipfix(1500);
    let mut out = Vec::new();
    for r in &all_records() {
        f.format(r, &mut out);
    }
    let c = Nfcapd::start(&[]);
    assert_eq!(send(&c, &out), 1);
    let (file, _dir) = c.finish(7);
    let v = flows(&file);
    assert_eq!(v.len(), 7, "{v:#?}");

    // Session create and delete (common::session).
    for (r, event, name, t) in [
        (
            &v[0],
            "4",
            "NAT44 session create",
            "2026-01-01T00:00:00.123",
        ),
        (
            &v[1],
            "5",
            "NAT44 session delete",
            "2026-01-01T00:01:01.623",
        ),
    ] {
        assert_eq!(text(r, "nat_event_id"), event);
        assert_eq!(text(r, "nat_event"), name);
        assert_eq!(text(r, "proto"), "6");
        assert_eq!(text(r, "src4_addr"), "10.0.0.6");
        assert_eq!(text(r, "src_port"), "51234");
        assert_eq!(text(r, "src4_xlt_ip"), "198.51.100.3");
        assert_eq!(text(r, "src_xlt_port"), "1024");
        assert_eq!(text(r, "dst4_addr"), "203.0.113.5");
        assert_eq!(text(r, "dst_port"), "443");
        assert_eq!(text(r, "ingress_vrf"), "7");
        assert_eq!(text(r, "t_event"), t);
    }
    // Port block allocation / release.
    for (r, event, vrf, t) in [
        (&v[2], "16", "3", "2026-01-01T00:00:00.124"),
        (&v[3], "17", "0", "2026-01-01T00:00:00.125"),
    ] {
        assert_eq!(text(r, "nat_event_id"), event);
        assert_eq!(text(r, "src4_addr"), "10.0.0.7");
        assert_eq!(text(r, "src4_xlt_ip"), "198.51.100.4");
        assert_eq!(text(r, "ingress_vrf"), vrf);
        assert_eq!(text(r, "t_event"), t);
    }
    // Addresses exhausted: natEvent and time (natPoolId is not decoded).
    assert_eq!(text(&v[4], "nat_event_id"), "3");
    assert_eq!(text(&v[4], "t_event"), "2026-01-01T00:00:00.126");
    // Ports exhausted.
    assert_eq!(text(&v[5], "nat_event_id"), "12");
    assert_eq!(text(&v[5], "src4_xlt_ip"), "198.51.100.254");
    assert_eq!(text(&v[5], "proto"), "17");
    assert_eq!(text(&v[5], "t_event"), "2026-01-01T00:00:00.127");
    // Quota exceeded (max entries per user): the subtype and limit are
    // not decoded; the source address is.
    assert_eq!(text(&v[6], "nat_event_id"), "13");
    assert_eq!(text(&v[6], "src4_addr"), "10.0.0.9");
    assert_eq!(text(&v[6], "t_event"), "2026-01-01T00:00:00.128");
}

#[test]
fn nfcapd_sees_no_sequence_failure_across_many_messages() {
    // 300 creates at a 256-byte MTU: dozens of messages, templates re-sent
    // every 20 s of record time. nfcapd checks each message's sequence
    // number against the data records it has counted from that exporter;
    // a sequence that counted messages would show up as failures.
    let mut f = ipfix(256);
    let mut out = Vec::new();
    for i in 0..300u64 {
        let mut r = session(4);
        r.timestamp_ns = T0 + i * 250_000_000;
        r.src_port = 10_000 + i as u16;
        f.format(&r, &mut out);
    }
    let c = Nfcapd::start(&[]);
    let msgs = send(&c, &out);
    assert!(msgs > 30, "{msgs} messages");
    let (file, _dir) = c.finish(300);
    assert_eq!(stat_field(&file, "Flows"), 300);
    assert_eq!(stat_field(&file, "Sequence failures"), 0);
    let ports: Vec<u64> = flows(&file)
        .iter()
        .map(|r| text(r, "src_port").parse().unwrap())
        .collect();
    assert_eq!(ports, (10_000..10_300).collect::<Vec<u64>>());

    // Control: the same stream with one message's sequence number off by
    // one is reported, so the zero above is nfcapd's check passing.
    let mut bad = out.clone();
    let mut at = 0;
    for (k, m) in split_messages(&out).iter().enumerate() {
        if k == 10 {
            let seq = u32::from_be_bytes(bad[at + 8..at + 12].try_into().unwrap());
            bad[at + 8..at + 12].copy_from_slice(&(seq + 1).to_be_bytes());
        }
        at += m.len();
    }
    let c = Nfcapd::start(&[]);
    send(&c, &bad);
    let (file, _dir) = c.finish(300);
    assert!(stat_field(&file, "Sequence failures") >= 1);
}

#[test]
fn nfcapd_skips_enterprise_elements_and_decodes_the_iana_ones_around_them() {
    // tests/acl: dropReason, logged and ruleId go out as enterprise
    // elements between and after IANA ones. nfcapd does not know them; it
    // must skip each by its length to read the elements after it at the
    // right offset, and stamp the flow from the TSC event time.
    let mut f = FormatSpec {
        kind: Format::Ipfix,
        ipfix: IpfixOptions {
            export_clock: ExportClock::Record,
            ..Default::default()
        },
        ..Default::default()
    }
    .formatter(&[AclDrop::schema()])
    .unwrap();
    f.set_tsc_calibration(ACL_CAL);
    let mut out = Vec::new();
    for (i, r) in [
        acl_drop(1_234, 1, 7, true),
        acl_drop(2_500, 2, 0x0102_0304, false),
    ]
    .iter_mut()
    .enumerate()
    {
        r.dst_port = 53 + i as u16;
        f.format(&*r, &mut out);
    }
    let c = Nfcapd::start(&[]);
    assert_eq!(send(&c, &out), 1);
    let (file, _dir) = c.finish(2);
    let v = flows(&file);
    assert_eq!(v.len(), 2, "{v:#?}");
    for (r, addr, t, dport, vlan) in [
        (&v[0], "2001:db8::1", "2026-01-01T00:00:01.234", "53", "101"),
        (&v[1], "2001:db8::2", "2026-01-01T00:00:02.500", "54", "102"),
    ] {
        assert_eq!(text(r, "src6_addr"), addr, "{r}");
        assert_eq!(text(r, "proto"), "17", "{r}");
        assert_eq!(text(r, "src_port"), "5353", "{r}");
        assert_eq!(text(r, "dst_port"), dport, "{r}");
        assert_eq!(text(r, "src_vlan"), vlan, "{r}");
        assert_eq!(text(r, "t_event"), t, "{r}");
    }
}
