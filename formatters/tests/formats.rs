//! Every line format on one record of each built-in NAT type: golden files,
//! and each format read back by a real parser (serde_json, the csv crate,
//! syslog_loose).
//!
//! Regenerate the golden files with `DPLOG_UPDATE_GOLDEN=1 cargo test -p
//! dplog-formatters --test formats` and review the diff.

mod common;

use dplog_schema_nat::NatFormatSpec as _;
use std::collections::BTreeMap;
use std::path::PathBuf;

use common::*;
use dplog_core::{Formatter, RecordBytes as _};
use dplog_formatters::{Format, FormatSpec, SyslogOptions};
use dplog_schema_nat::nat_event;
use dplog_schema_nat::{EventProfile, TextFormatter};

fn render(spec: &FormatSpec) -> String {
    let mut f = spec.nat_formatter().unwrap();
    let mut out = Vec::new();
    for r in all_records() {
        f.format(&r, &mut out);
    }
    assert_eq!(f.skipped(), 0);
    String::from_utf8(out).unwrap()
}

fn spec(kind: Format) -> FormatSpec {
    FormatSpec {
        kind,
        ..Default::default()
    }
}

fn golden(name: &str, got: &str) {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("DPLOG_UPDATE_GOLDEN").is_some() {
        std::fs::write(&p, got).unwrap();
    }
    let want = std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e} (set DPLOG_UPDATE_GOLDEN=1 to create)", p.display()));
    assert_eq!(got, want, "{name} differs from its golden file");
}

/// A syslog format with fixed HOSTNAME and PROCID (the defaults are this
/// host's name and this process's id).
fn syslog_spec(kind: Format) -> FormatSpec {
    let mut s = spec(kind);
    s.syslog.hostname = Some("cgnat-1".into());
    s.syslog.procid = Some("4242".into());
    s
}

#[test]
fn golden_files() {
    golden("nat.txt", &render(&spec(Format::Text)));
    golden("nat.jsonl", &render(&spec(Format::Json)));
    golden("nat.csv", &render(&spec(Format::Csv)));
    golden("nat.rfc5424", &render(&syslog_spec(Format::Rfc5424)));
    golden("nat.rfc3164", &render(&syslog_spec(Format::Rfc3164)));
    let mut vpp = syslog_spec(Format::Rfc5424);
    vpp.syslog.profile = Some("vpp".into());
    golden("nat.vpp.rfc5424", &render(&vpp));
    let mut t = spec(Format::Text);
    t.template = Some(
        "{observationTimeMilliseconds:rfc3339} NAT44 {natEvent:name} {sourceIPv4Address}:{sourceTransportPort} -> {postNATSourceIPv4Address}:{postNAPTSourceTransportPort}".into(),
    );
    t.templates.insert(
        "natPortBlock".into(),
        "{observationTimeMilliseconds:rfc3339_us} {natEvent:name} {sourceIPv4Address} {postNATSourceIPv4Address}:{portRangeStart}-{portRangeEnd}".into(),
    );
    golden("nat.template.txt", &render(&t));
    t.renumber = EventProfile::Legacy.renumber();
    let legacy = render(&t);
    assert!(
        legacy.starts_with(
            "2026-01-01T00:00:00.123Z NAT44 NAT_CREATE 10.0.0.6:51234 -> 198.51.100.3:1024\n"
        ),
        "{legacy}"
    );
}

#[test]
fn default_text_is_the_original_text_formatter_line() {
    let mut new = spec(Format::Text).nat_formatter().unwrap();
    let mut old = TextFormatter::default();
    for ev in [4, 5] {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        new.format(&session(ev), &mut a);
        old.format(&session(ev), &mut b);
        assert_eq!(String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap());
    }
}

#[test]
fn json_lines_parse_with_serde_json_and_carry_every_value() {
    let body = render(&spec(Format::Json));
    let v: Vec<serde_json::Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(v.len(), 7);
    let c = &v[0];
    assert_eq!(c["observationTimeMilliseconds"], 1_767_225_600_123u64);
    assert_eq!(c["natEvent"], 4);
    assert_eq!(c["protocolIdentifier"], 6);
    assert_eq!(c["sourceIPv4Address"], "10.0.0.6");
    assert_eq!(c["sourceTransportPort"], 51234);
    assert_eq!(c["postNATSourceIPv4Address"], "198.51.100.3");
    assert_eq!(c["postNAPTSourceTransportPort"], 1024);
    assert_eq!(c["destinationIPv4Address"], "203.0.113.5");
    assert_eq!(c["destinationTransportPort"], 443);
    assert_eq!(c["ingressVRFID"], 7);
    assert_eq!(c["timestamp"], "2026-01-01T00:00:00.123456Z");
    // Creates carry no counters: timestamp plus ten elements.
    assert!(c.get("initiatorPackets").is_none());
    assert_eq!(c.as_object().unwrap().len(), 11);
    assert_eq!(v[1]["natEvent"], 5);
    assert_eq!(v[1]["timestamp"], "2026-01-01T00:01:01.623456Z");
    assert_eq!(v[1]["initiatorPackets"], 10);
    assert_eq!(v[1].as_object().unwrap().len(), 15);
    assert_eq!(v[1]["responderOctets"], 64000);
    assert_eq!(v[1]["observationTimeMilliseconds"], 1_767_225_661_623u64);
    assert_eq!(v[2]["natEvent"], 16);
    assert_eq!(v[2]["portRangeStart"], 2048);
    assert_eq!(v[2]["portRangeEnd"], 2559);
    assert_eq!(v[2]["portRangeNumPorts"], 512);
    assert_eq!(v[3]["natEvent"], 17);
    assert_eq!(v[4]["natPoolId"], 42);
    assert_eq!(v[4]["natEvent"], 3);
    assert_eq!(v[5]["postNATSourceIPv4Address"], "198.51.100.254");
    assert_eq!(v[5]["protocolIdentifier"], 17);
    assert_eq!(v[6]["natQuotaExceededEvent"], 3);
    // The limit under the IANA name of its subtype (3: IE 473).
    assert_eq!(v[6]["maxEntriesPerUser"], 300);
    assert!(v[6].get("quotaLimit").is_none());
    assert_eq!(v[6]["sourceIPv4Address"], "10.0.0.9");
    let mut legacy = spec(Format::Json);
    legacy.renumber = EventProfile::Legacy.renumber();
    let l: Vec<serde_json::Value> = render(&legacy)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        (
            l[0]["natEvent"].as_u64(),
            l[1]["natEvent"].as_u64(),
            l[2]["natEvent"].as_u64()
        ),
        (Some(1), Some(2), Some(16))
    );
}

#[test]
fn csv_reads_back_with_the_csv_crate() {
    let mut f = spec(Format::Csv).nat_formatter().unwrap();
    let mut out = Vec::new();
    for r in all_records() {
        f.format(&r, &mut out);
    }
    let mut rd = csv::Reader::from_reader(&out[..]);
    let h: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(
        h[..3],
        ["recordType", "timestamp", "observationTimeMilliseconds"]
    );
    // Every NAT field name once (the limit under its five IANA names),
    // then the drop-report columns.
    assert_eq!(h.len(), 2 + 14 + 4 + 1 + 1 + 5 + 5, "{h:?}");
    assert_eq!(
        h[h.len() - 5..],
        [
            "dplogDropped",
            "dplogDropRing",
            "dplogDropReason",
            "dplogFirstDropWallClock",
            "dplogLastDropWallClock"
        ]
    );
    let rows: Vec<BTreeMap<String, String>> = rd.deserialize().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 7);
    assert_eq!(rows[0]["recordType"], "nat44Session");
    assert_eq!(rows[0]["timestamp"], "2026-01-01T00:00:00.123456Z");
    assert_eq!(rows[0]["sourceIPv4Address"], "10.0.0.6");
    assert_eq!(rows[0]["natEvent"], "4");
    assert_eq!(rows[0]["portRangeStart"], "");
    assert_eq!(rows[1]["natEvent"], "5");
    assert_eq!(rows[1]["initiatorOctets"], "1500");
    assert_eq!(rows[2]["recordType"], "natPortBlock");
    assert_eq!(rows[2]["portRangeEnd"], "2559");
    assert_eq!(rows[2]["destinationTransportPort"], "");
    assert_eq!(rows[4]["natPoolId"], "42");
    assert_eq!(rows[6]["recordType"], "natQuotaExceeded");
    assert_eq!(rows[6]["maxEntriesPerUser"], "300");
    assert_eq!(rows[6]["maxSessionEntries"], "");
    assert_eq!(rows[6]["sourceIPv4Address"], "10.0.0.9");
    // Header once, CRLF line ends (RFC 4180 section 2).
    let s = String::from_utf8(out).unwrap();
    assert_eq!(s.matches("recordType").count(), 1);
    assert_eq!(s.matches("\r\n").count(), 8);
}

#[test]
fn rfc5424_parses_with_syslog_loose_in_vpp_layout() {
    let body = render(&spec(Format::Rfc5424));
    let lines: Vec<&str> = body.lines().collect();
    // Microseconds; this host's name and this process's id by default.
    let host = host_name();
    let pid = std::process::id().to_string();
    let head = format!(
        "<134>1 2026-01-01T00:00:00.123456Z {host} NAT {pid} SADD [nsess@32473 SSUBIX=\"0\" SVLAN=\"7\" IATYP=\"IPv4\" "
    );
    assert!(lines[0].starts_with(&head), "{}", lines[0]);
    for (i, l) in lines.iter().enumerate() {
        let m = syslog_loose::parse_message(l, syslog_loose::Variant::RFC5424);
        assert_eq!(m.protocol, syslog_loose::Protocol::RFC5424(1), "{l}");
        assert_eq!(m.facility, Some(syslog_loose::SyslogFacility::LOG_LOCAL0));
        assert_eq!(m.severity, Some(syslog_loose::SyslogSeverity::SEV_INFO));
        assert_eq!(m.appname, Some("NAT"));
        assert_eq!(m.hostname, Some(host.as_str()));
        assert_eq!(m.procid.map(|p| p.to_string()), Some(pid.clone()));
        assert_eq!(m.structured_data.len(), 1, "{l}");
        assert!(m.timestamp.is_some(), "{l}");
        if i < 2 {
            let sd = &m.structured_data[0];
            assert_eq!(sd.id, "nsess@32473");
            let p: BTreeMap<&str, String> = sd.params().map(|(k, v)| (*k, v.to_string())).collect();
            assert_eq!(m.msgid, Some(if i == 0 { "SADD" } else { "SDEL" }));
            assert_eq!(p["ISADDR"], "10.0.0.6");
            assert_eq!(p["ISPORT"], "51234");
            assert_eq!(p["XSADDR"], "198.51.100.3");
            assert_eq!(p["XSPORT"], "1024");
            assert_eq!(p["XDADDR"], "203.0.113.5");
            assert_eq!(p["XDPORT"], "443");
            assert_eq!(p["PROTO"], "6");
            assert_eq!(p["SVLAN"], "7");
            let ts = m.timestamp.unwrap();
            assert_eq!(
                ts.timestamp_millis() as u64,
                session(if i == 0 { 4 } else { 5 }).timestamp_ns / 1_000_000
            );
        }
    }
    let m = syslog_loose::parse_message(lines[2], syslog_loose::Variant::RFC5424);
    assert_eq!(m.msgid, Some("APMADD"));
    assert_eq!(m.structured_data[0].id, "natPortBlock@32473");
    let m = syslog_loose::parse_message(lines[6], syslog_loose::Variant::RFC5424);
    assert_eq!(m.msgid, Some("QUOTA_EXCEEDED"));
    let p: BTreeMap<&str, String> = m.structured_data[0]
        .params()
        .map(|(k, v)| (*k, v.to_string()))
        .collect();
    assert_eq!(p["natQuotaExceededEvent"], "3");
    assert_eq!(p["maxEntriesPerUser"], "300");
    assert!(!p.contains_key("quotaLimit"));
    // Configured header fields.
    let mut s = spec(Format::Rfc5424);
    s.syslog = SyslogOptions {
        hostname: Some("cgnat-1".into()),
        procid: Some("77".into()),
        sd_id: Some("nsess@9".into()),
        facility: 1,
        severity: 5,
        ..Default::default()
    };
    let l = render(&s);
    let m = syslog_loose::parse_message(l.lines().next().unwrap(), syslog_loose::Variant::RFC5424);
    assert_eq!(
        (m.hostname, m.procid.map(|p| p.to_string())),
        (Some("cgnat-1"), Some("77".to_string()))
    );
    assert!(l.starts_with("<13>1 "));
    assert_eq!(m.structured_data[0].id, "nsess@9");
    // RFC 5424 section 6.3.2: `@` and a private enterprise number, or an
    // IANA-registered name.
    for bad in ["bad id", "nsess", "nsess@abc", "nsess@", "@32473", "a@1@2"] {
        s.syslog.sd_id = Some(bad.into());
        let e = s.nat_formatter().err().unwrap();
        assert!(e.to_string().contains("sd_id"), "{bad}: {e}");
    }
    for good in ["x@32473.1.2", "origin", "meta"] {
        s.syslog.sd_id = Some(good.into());
        assert!(s.nat_formatter().is_ok(), "{good}");
    }
}

/// This host's name, as `hostname(1)` prints it.
fn host_name() -> String {
    let out = std::process::Command::new("hostname").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// VPP's NAT syslog messages, as its `nat_syslog.c` (the NAT's calls)
/// and `vnet/syslog/syslog.c` (the message) build them, modelled here from
/// their format strings: header `<%d>1 %U %U %s %d %s` (PRI local0 *
/// 8 + informational, TIMESTAMP `%4d-%02d-%02dT%02d:%02d:%02d.%06dZ`, the
/// sender's source address, APP-NAME `NAT`, its pid, MSGID), then one
/// SD-ELEMENT, ` NAME="value"` per parameter in the call's order, and no
/// MSG.
mod vpp {
    use std::net::Ipv4Addr;

    /// `set syslog sender ... src`, and VPP's pid.
    pub struct Sender {
        pub src: Ipv4Addr,
        pub pid: u32,
    }

    fn message(
        s: &Sender,
        ts: &str,
        msgid: &str,
        sd_id: &str,
        params: &[(&str, String)],
    ) -> String {
        let mut m = format!(
            "<{}>1 {ts} {} NAT {} {msgid} [{sd_id}",
            16 * 8 + 6,
            s.src,
            s.pid
        );
        for (name, value) in params {
            m += &format!(" {name}=\"{value}\"");
        }
        m + "]"
    }

    /// `nat_syslog_nat44_sadd` / `_sdel`: a session; `twice`: the
    /// twice-NAT destination (IDADDR, IDPORT), appended last.
    #[allow(clippy::too_many_arguments)]
    pub fn nat44_sess(
        s: &Sender,
        ts: &str,
        is_add: bool,
        ssubix: u32,
        table_id: u32,
        (isaddr, isport): (Ipv4Addr, u16),
        (xsaddr, xsport): (Ipv4Addr, u16),
        proto: u8,
        (xdaddr, xdport): (Ipv4Addr, u16),
        twice: Option<(Ipv4Addr, u16)>,
    ) -> String {
        let mut p = vec![
            ("SSUBIX", ssubix.to_string()),
            ("SVLAN", table_id.to_string()),
            ("IATYP", "IPv4".into()),
            ("ISADDR", isaddr.to_string()),
            ("ISPORT", isport.to_string()),
            ("XATYP", "IPv4".into()),
            ("XSADDR", xsaddr.to_string()),
            ("XSPORT", xsport.to_string()),
            ("PROTO", proto.to_string()),
            ("XDADDR", xdaddr.to_string()),
            ("XDPORT", xdport.to_string()),
        ];
        if let Some((idaddr, idport)) = twice {
            p.push(("IDADDR", idaddr.to_string()));
            p.push(("IDPORT", idport.to_string()));
        }
        message(s, ts, if is_add { "SADD" } else { "SDEL" }, "nsess", &p)
    }

    /// `nat_syslog_nat44_apmadd` / `_apmdel`: one address-and-port
    /// mapping.
    #[allow(clippy::too_many_arguments)]
    pub fn nat44_apmap(
        s: &Sender,
        ts: &str,
        is_add: bool,
        ssubix: u32,
        table_id: u32,
        (isaddr, isport): (Ipv4Addr, u16),
        (xsaddr, xsport): (Ipv4Addr, u16),
        proto: u8,
    ) -> String {
        let p = [
            ("SSUBIX", ssubix.to_string()),
            ("SVLAN", table_id.to_string()),
            ("IATYP", "IPv4".into()),
            ("ISADDR", isaddr.to_string()),
            ("ISPORT", isport.to_string()),
            ("XATYP", "IPv4".into()),
            ("XSADDR", xsaddr.to_string()),
            ("XSPORT", xsport.to_string()),
            ("PROTO", proto.to_string()),
        ];
        message(
            s,
            ts,
            if is_add { "APMADD" } else { "APMDEL" },
            "napmap",
            &p,
        )
    }
}

/// The `vpp` profile's lines are the messages VPP sends for the same
/// events, byte for byte, once HOSTNAME and PROCID are VPP's (the NAT's
/// address and its pid: SyslogOptions::profile lists what differs):
/// sessions as NAT44-ED's SADD/SDEL (SSUBIX 0, no twice-NAT), a port
/// block as the APMADD/APMDEL of a mapping of no single inside port or
/// protocol (ISPORT and PROTO 0) to its first outside port.
#[test]
fn vpp_profile_lines_are_vpps_messages_for_the_same_events() {
    use std::net::Ipv4Addr;
    let nat = vpp::Sender {
        src: Ipv4Addr::new(172, 16, 4, 1),
        pid: 5901,
    };
    let mut s = syslog_spec(Format::Rfc5424);
    s.syslog.hostname = Some(nat.src.to_string());
    s.syslog.procid = Some(nat.pid.to_string());
    s.syslog.profile = Some("vpp".into());
    let body = render(&s);
    let l: Vec<&str> = body.lines().collect();
    let inside = (Ipv4Addr::new(10, 0, 0, 6), 51234);
    let outside = (Ipv4Addr::new(198, 51, 100, 3), 1024);
    let dest = (Ipv4Addr::new(203, 0, 113, 5), 443);
    let sess = |ts, add| vpp::nat44_sess(&nat, ts, add, 0, 7, inside, outside, 6, dest, None);
    assert_eq!(l[0], sess("2026-01-01T00:00:00.123456Z", true));
    assert_eq!(l[1], sess("2026-01-01T00:01:01.623456Z", false));
    // The block 198.51.100.4:2048-2559 of 10.0.0.7, every inside port and
    // protocol: ISPORT 0 and PROTO 0, its first port as XSPORT.
    let block = |ts, add, vrf| {
        vpp::nat44_apmap(
            &nat,
            ts,
            add,
            0,
            vrf,
            (Ipv4Addr::new(10, 0, 0, 7), 0),
            (Ipv4Addr::new(198, 51, 100, 4), 2048),
            0,
        )
    };
    assert_eq!(l[2], block("2026-01-01T00:00:00.124456Z", true, 3));
    assert_eq!(l[3], block("2026-01-01T00:00:00.125456Z", false, 0));
    // VPP sends no syslog for exhaustion and quota events: they keep the
    // default layout (SD-ID with the enterprise number).
    assert!(
        l[4].contains(" ADDRESSES_EXHAUSTED [natAddressesExhausted@32473 "),
        "{}",
        l[4]
    );
    // Without `hostname`, HOSTNAME is this host's name where VPP sends an
    // address: the first documented difference.
    s.syslog.hostname = None;
    let body = render(&s);
    let first = body.lines().next().unwrap();
    assert!(
        first.starts_with(&format!(
            "<134>1 2026-01-01T00:00:00.123456Z {} NAT 5901 SADD [nsess ",
            host_name()
        )),
        "{first}"
    );
    // A profile no one knows is refused.
    s.syslog.profile = Some("cisco".into());
    assert!(s
        .nat_formatter()
        .err()
        .unwrap()
        .to_string()
        .contains("profile"));
}

#[test]
fn rfc5424_escapes_quote_backslash_and_bracket_in_param_values() {
    use dplog_core::schema::{FieldDef, FieldKind, Schema};
    let s = Schema::new(
        40,
        "tagged",
        32,
        vec![
            FieldDef::new(
                "observationTimeMilliseconds",
                8,
                8,
                FieldKind::NsTimestamp,
                323,
            ),
            FieldDef::new("tag", 16, 16, FieldKind::Bytes, 0),
        ],
    )
    .unwrap();
    let mut rec = [0u8; 32];
    rec[..2].copy_from_slice(&32u16.to_ne_bytes());
    rec[2..4].copy_from_slice(&40u16.to_ne_bytes());
    rec[8..16].copy_from_slice(&T0.to_ne_bytes());
    rec[16..27].copy_from_slice(br#"a"b\c]d e=f"#);
    let mut enc = spec(Format::Rfc5424).encoder(&[&s]).unwrap();
    let mut out = Vec::new();
    assert!(enc.push(&rec, &mut out));
    let line = String::from_utf8(out).unwrap();
    assert!(line.contains(r#"tag="a\"b\\c\]d e=f""#), "{line}");
    let m = syslog_loose::parse_message(line.trim_end(), syslog_loose::Variant::RFC5424);
    let p: Vec<(String, String)> = m.structured_data[0]
        .params()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(p[1], ("tag".to_string(), r#"a"b\c]d e=f"#.to_string()));
    // JSON and CSV of the same string read back with their parsers.
    let mut out = Vec::new();
    spec(Format::Json)
        .encoder(&[&s])
        .unwrap()
        .push(&rec, &mut out);
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["tag"], r#"a"b\c]d e=f"#);
}

#[test]
fn rfc3164_parses_with_syslog_loose() {
    let body = render(&spec(Format::Rfc3164));
    let first = body.lines().next().unwrap();
    // HOSTNAME: this host's name (a `-` would be taken for the TAG).
    assert_eq!(first, format!("<134>Jan  1 00:00:00 {} NAT: SADD SVLAN=7 ISADDR=10.0.0.6 ISPORT=51234 XSADDR=198.51.100.3 XSPORT=1024 PROTO=6 XDADDR=203.0.113.5 XDPORT=443", host_name()));
    for l in body.lines() {
        let m = syslog_loose::parse_message(l, syslog_loose::Variant::RFC3164);
        assert_eq!(m.protocol, syslog_loose::Protocol::RFC3164, "{l}");
        assert_eq!(m.facility, Some(syslog_loose::SyslogFacility::LOG_LOCAL0));
        assert_eq!(m.appname, Some("NAT"), "{l}");
        assert!(m.timestamp.is_some(), "{l}");
    }
    let m = syslog_loose::parse_message(first, syslog_loose::Variant::RFC3164);
    assert!(
        m.msg.starts_with("SADD SVLAN=7 ISADDR=10.0.0.6"),
        "{}",
        m.msg
    );
}

#[test]
fn bad_templates_fail_at_load_with_schema_and_column() {
    let mut s = spec(Format::Text);
    s.template = Some("{observationTimeMilliseconds:rfc3339} {srcAddr}".into());
    let e = s.nat_formatter().err().unwrap().to_string();
    assert!(
        e.contains("schema nat44Session") && e.contains("column 39") && e.contains("srcAddr"),
        "{e}"
    );
    s.template = None;
    s.templates
        .insert("natPortBlok".into(), "{natEvent}".into());
    let e = s.nat_formatter().err().unwrap().to_string();
    assert!(e.contains("natPortBlok"), "{e}");
}

#[test]
fn format_names_round_trip() {
    for (f, n) in Format::ALL {
        assert_eq!(n.parse::<Format>().unwrap(), f);
        assert_eq!(f.name(), n);
    }
    let e = "xml".parse::<Format>().unwrap_err();
    assert!(
        e.contains("text, json, csv, rfc5424, rfc3164, ipfix, binary"),
        "{e}"
    );
    // Every format builds with default settings and writes a record.
    for (f, _) in Format::ALL {
        let mut fm = FormatSpec {
            kind: f,
            ..FormatSpec::default()
        }
        .nat_formatter()
        .unwrap();
        let mut out = Vec::new();
        fm.format(&session(nat_event::NAT44_SESSION_CREATE), &mut out);
        assert!(!out.is_empty(), "{f:?}");
    }
}

/// A field named by another field's value, first in a record without a
/// time stamp: JSON stays an object (the field follows the first member
/// that is always there), and a value without a name leaves it out
/// everywhere.
#[test]
fn a_field_named_by_a_value_is_left_out_cleanly_in_every_line_format() {
    use dplog_core::schema::{FieldDef, FieldKind, Schema};
    let s = Schema::new(
        41,
        "limits",
        16,
        vec![
            FieldDef::new("limit", 8, 4, FieldKind::U32, 0),
            FieldDef::new("kind", 12, 1, FieldKind::U8, 0),
        ],
    )
    .unwrap()
    .with_name_by("limit", "kind", &[(1, "maxA"), (2, "maxB")])
    .unwrap();
    let rec = |kind: u8| {
        let mut r = [0u8; 16];
        r[..2].copy_from_slice(&16u16.to_ne_bytes());
        r[2..4].copy_from_slice(&41u16.to_ne_bytes());
        r[8..12].copy_from_slice(&500u32.to_ne_bytes());
        r[12] = kind;
        r
    };
    let out = |kind: Format| {
        let mut enc = spec(kind).encoder(&[&s]).unwrap();
        let mut out = Vec::new();
        for k in [2, 9] {
            assert!(enc.push(&rec(k), &mut out));
        }
        String::from_utf8(out).unwrap()
    };
    assert_eq!(
        out(Format::Json),
        "{\"kind\":2,\"maxB\":500}\n{\"kind\":9}\n"
    );
    assert_eq!(out(Format::Text), " maxB=500 kind=2\n kind=9\n");
    assert_eq!(
        out(Format::Csv),
        "recordType,timestamp,maxA,maxB,kind,dplogDropped,dplogDropRing,dplogDropReason,dplogFirstDropWallClock,dplogLastDropWallClock\r\n\
         limits,,,500,2,,,,,\r\n\
         limits,,,,9,,,,,\r\n"
    );
}

/// A user record type (not NAT): a tunnel event whose byte count means
/// something only when the tunnel closes (event 2), and whose limit is
/// named by its kind (kind 1 only).
fn tunnel_schema() -> dplog_core::schema::Schema {
    use dplog_core::schema::{FieldDef, FieldKind, Schema};
    Schema::new(
        41,
        "tunnelEvent",
        40,
        vec![
            FieldDef::new("eventTime", 8, 8, FieldKind::NsTimestamp, 0),
            FieldDef::new("event", 16, 1, FieldKind::Enum, 0)
                .with_names(&[(1, "OPEN"), (2, "CLOSE")]),
            FieldDef::new("kind", 17, 1, FieldKind::U8, 0),
            FieldDef::new("tunnelId", 20, 4, FieldKind::U32, 0),
            FieldDef::new("bytesIn", 24, 8, FieldKind::U64, 0),
            FieldDef::new("limit", 32, 4, FieldKind::U32, 0),
        ],
    )
    .unwrap()
    .with_fields_only_when("event", 2, &["bytesIn"])
    .unwrap()
    .with_name_by("limit", "kind", &[(1, "maxTunnels")])
    .unwrap()
}

/// A tunnel record: `event`, `kind`, id 9, 4096 bytes in, limit 300.
fn tunnel(event: u8, kind: u8) -> [u8; 40] {
    let mut r = [0u8; 40];
    r[..2].copy_from_slice(&40u16.to_ne_bytes());
    r[2..4].copy_from_slice(&41u16.to_ne_bytes());
    r[8..16].copy_from_slice(&T0.to_ne_bytes());
    r[16] = event;
    r[17] = kind;
    r[20..24].copy_from_slice(&9u32.to_ne_bytes());
    r[24..32].copy_from_slice(&4096u64.to_ne_bytes());
    r[32..36].copy_from_slice(&300u32.to_ne_bytes());
    r
}

/// README: a CSV record's cells are the values JSON gives under the same
/// names. Where JSON leaves a key out (a field shown only conditionally,
/// e.g. a session's counters before its delete; a name its selector does
/// not have), the cell is empty, not a 0 that reads as a real count.
#[test]
fn csv_cells_are_jsons_values_and_empty_where_json_has_no_key() {
    let tunnel_s = tunnel_schema();
    let mut schemas: Vec<&dplog_core::schema::Schema> = vec![&tunnel_s];
    schemas.extend(dplog_schema_nat::all());
    let mut recs: Vec<Vec<u8>> = vec![
        tunnel(1, 1).to_vec(),
        tunnel(2, 1).to_vec(),
        tunnel(2, 0).to_vec(),
    ];
    recs.extend(all_records().iter().map(|r| r.record_bytes().to_vec()));
    let mut json = spec(Format::Json).encoder(&schemas).unwrap();
    let mut csv_enc = spec(Format::Csv).encoder(&schemas).unwrap();
    let mut csv_out = Vec::new();
    let mut objs = Vec::new();
    for r in &recs {
        let mut o = Vec::new();
        assert!(json.push(r, &mut o));
        objs.push(serde_json::from_slice::<serde_json::Value>(&o).unwrap());
        assert!(csv_enc.push(r, &mut csv_out));
    }
    let mut rd = csv::Reader::from_reader(&csv_out[..]);
    let head: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
    let rows: Vec<csv::StringRecord> = rd.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), objs.len());
    for (row, obj) in rows.iter().zip(&objs) {
        let own = obj.as_object().unwrap();
        for (name, cell) in head.iter().zip(row.iter()).skip(1) {
            if name.starts_with("dplogDrop") {
                assert_eq!(cell, "", "{name} of a record: {row:?}");
                continue;
            }
            let want = match own.get(name) {
                None => String::new(),
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
            };
            assert_eq!(cell, want, "column {name} of {row:?} against {obj}");
        }
    }
    // The cases themselves, by name.
    let col = |row: &csv::StringRecord, name: &str| {
        row[head.iter().position(|h| h == name).unwrap()].to_string()
    };
    assert_eq!(col(&rows[0], "event"), "OPEN");
    assert_eq!(col(&rows[0], "bytesIn"), "");
    assert_eq!(col(&rows[0], "maxTunnels"), "300");
    assert_eq!(col(&rows[1], "bytesIn"), "4096");
    assert_eq!(col(&rows[2], "maxTunnels"), "");
    // The NAT44 session create (natEvent 4): no counters, as in JSON.
    assert_eq!(col(&rows[3], "natEvent"), "4");
    for c in [
        "initiatorPackets",
        "responderPackets",
        "initiatorOctets",
        "responderOctets",
    ] {
        assert_eq!(col(&rows[3], c), "", "{c} of a create");
    }
    assert_eq!(col(&rows[4], "initiatorOctets"), "1500");
}

/// A record's value never reaches a syslog header part: an integer MSGID
/// field without a declared name prints in decimal. The parts a schema
/// declares (MSGID names, SD-ID, PARAM-NAMEs, APP-NAME) are checked when
/// the format is built, and a declared constant PARAM-VALUE is escaped.
#[test]
fn declared_syslog_parts_are_checked_and_constants_escaped() {
    use dplog_core::schema::{FieldDef, FieldKind, Schema, SyslogMeta};
    let s = Schema::new(
        41,
        "verdicts",
        16,
        vec![FieldDef::new("verdict", 8, 1, FieldKind::U8, 0)],
    )
    .unwrap();
    let layout = |msgid: &'static str, sd_id, param, value| {
        SyslogMeta::resolve(
            &s,
            Some("fw"),
            Some(("verdict", &[(1, msgid)][..])),
            Some(sd_id),
            &[(param, "verdict"), ("c", value)],
        )
        .unwrap()
    };
    let build = |l: SyslogMeta, kind| {
        let s = s.clone().with_syslog(l);
        spec(kind)
            .encoder(&[&s])
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    for kind in [Format::Rfc5424, Format::Rfc3164] {
        assert_eq!(build(layout("DENY", "fw@32473", "v", "=k"), kind), Ok(()));
        for (bad, l) in [
            ("msgid", layout("DENY ALL", "fw@32473", "v", "=k")),
            ("msgid", layout("DENY\n[x]", "fw@32473", "v", "=k")),
            (
                "msgid",
                layout("A_MSGID_LONGER_THAN_32_CHARACTERS", "fw@32473", "v", "=k"),
            ),
            ("sd_id", layout("DENY", "fw x@32473", "v", "=k")),
            ("parameter name", layout("DENY", "fw@32473", "v]", "=k")),
        ] {
            let e = build(l, kind).unwrap_err();
            assert!(e.contains("schema verdicts") && e.contains(bad), "{e}");
        }
    }
    let s = s
        .clone()
        .with_syslog(layout("DENY", "fw@32473", "v", "=a\"b]\n"));
    let mut enc = syslog_spec(Format::Rfc5424).encoder(&[&s]).unwrap();
    let mut rec = [0u8; 16];
    rec[..2].copy_from_slice(&16u16.to_ne_bytes());
    rec[2..4].copy_from_slice(&41u16.to_ne_bytes());
    for (v, msgid) in [(1u8, "DENY"), (7, "7")] {
        rec[8] = v;
        let mut out = Vec::new();
        assert!(enc.push(&rec, &mut out));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("<134>1 - cgnat-1 fw 4242 {msgid} [fw@32473 v=\"{v}\" c=\"a\\\"b\\]\\x0a\"]\n")
        );
    }
}
