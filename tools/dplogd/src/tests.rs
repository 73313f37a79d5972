use super::*;

/// The start-up check knows no record type: every format's defaults
/// pass, a template for any type name passes (each ring's types are
/// checked when it opens), settings wrong for any type are refused.
#[test]
fn the_format_check_needs_no_schema() {
    use dplog_formatters::FormatSpec;
    for kind in [
        Format::Text,
        Format::Json,
        Format::Csv,
        Format::Rfc5424,
        Format::Rfc3164,
        Format::Ipfix,
        Format::Binary,
    ] {
        let spec = FormatSpec {
            kind,
            ..Default::default()
        };
        assert_eq!(check_format(&spec), Ok(()), "{kind:?}");
    }
    let mut spec = FormatSpec::default();
    spec.templates.insert("aclDrop".into(), "{ruleId}".into());
    assert_eq!(check_format(&spec), Ok(()));
    spec.kind = Format::Json;
    let e = check_format(&spec).unwrap_err();
    assert!(
        e.contains("`templates` applies only to type \"text\""),
        "{e}"
    );
    // A BYTES rendering by field name applies to the rings whose
    // types have that field: nothing to refuse before they declare.
    let mut spec = FormatSpec {
        kind: Format::Json,
        ..Default::default()
    };
    spec.bytes_fields
        .insert("qname".into(), dplog_formatters::BytesEncoding::Hex);
    assert_eq!(check_format(&spec), Ok(()));
    let mut spec = FormatSpec {
        kind: Format::Rfc5424,
        ..Default::default()
    };
    spec.syslog.facility = 24;
    assert_eq!(
        check_format(&spec).unwrap_err(),
        "syslog facility 24 / severity 6 out of range (0..=23 / 0..=7)"
    );
}

/// A ring file name no producer creates: a line break and a forged
/// syslog message, and each syntax's specials.
const HOSTILE: &str = "x\n<13>Jan  1 00:00:00 evil su: \"root\"]\\.1.00000000000000ab.ring";

fn end_line(format: &str, file: &str) -> Option<String> {
    let cfg = LogConfig::from_toml_str(&format!(
        "[format]\ntype = \"{format}\"\n[format.syslog]\nhostname = \"h\"\nprocid = \"p\"\n"
    ))
    .unwrap();
    let fmt = cfg.format.formatter(&dplog_schema_nat::all()).unwrap();
    let (mut buf, mut reports) = (b"record\n".to_vec(), Vec::new());
    let wrote = line(
        cfg.format.kind,
        &fmt,
        &mut buf,
        &mut reports,
        file,
        7,
        14,
        Ending::Closed,
    );
    assert_eq!(wrote, !reports.is_empty(), "{format}");
    if !wrote {
        assert_eq!(buf, b"record\n", "{format}");
        return None;
    }
    assert_eq!(reports.len(), 1, "{format}");
    assert_eq!(reports[0], 7..buf.len(), "{format}");
    let l = String::from_utf8(buf[7..].to_vec()).unwrap();
    // One line, no control character from the name.
    assert!(l.ends_with('\n'), "{format}: {l:?}");
    assert!(
        !l[..l.len() - 1].chars().any(char::is_control),
        "{format}: {l:?}"
    );
    Some(l)
}

#[test]
fn the_end_line_escapes_the_ring_name_as_records_are_in_every_format() {
    assert_eq!(
        end_line("text", HOSTILE).unwrap(),
        "dplogd: producer of ring x\\n<13>Jan\\x20\\x201\\x2000:00:00\\x20evil\\x20su:\\x20\"root\"]\\\\.1.00000000000000ab.ring (pid 7) closed its ring after 14 records\n"
    );
    let json: serde_json::Value =
        serde_json::from_str(&end_line("json", HOSTILE).unwrap()).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"dplogd": "producer_closed", "ring": HOSTILE, "pid": 7, "records": 14})
    );
    let l = end_line("rfc5424", HOSTILE).unwrap();
    assert!(l.starts_with("<134>1 "), "{l:?}");
    assert!(
        l.ends_with(
            "Z h NAT p RING_CLOSED [dplogRing@32473 ring=\"x\\x0a<13>Jan  1 00:00:00 evil su: \\\"root\\\"\\]\\\\.1.00000000000000ab.ring\" pid=\"7\" records=\"14\"]\n"
        ),
        "{l:?}"
    );
    let l = end_line("rfc3164", HOSTILE).unwrap();
    assert!(l.starts_with("<134>"), "{l:?}");
    assert!(
        l.ends_with(
            " h NAT: RING_CLOSED ring=x\\n<13>Jan\\x20\\x201\\x2000:00:00\\x20evil\\x20su:\\x20\"root\"]\\\\.1.00000000000000ab.ring pid=7 records=14\n"
        ),
        "{l:?}"
    );
    for f in ["csv", "binary", "ipfix"] {
        assert_eq!(end_line(f, HOSTILE), None, "{f}");
    }
}

#[test]
fn a_type_file_inserts_the_type_name_before_the_extension() {
    let p = |s: &str, n: &str| typed_path(Path::new(s), n);
    assert_eq!(
        p("/var/log/out.csv", "dnsQuery"),
        Path::new("/var/log/out.dnsQuery.csv")
    );
    assert_eq!(
        p("/var/log/out", "aclDrop"),
        Path::new("/var/log/out.aclDrop")
    );
    assert_eq!(p("out.x.csv", "t"), Path::new("out.x.t.csv"));
}

#[test]
fn stderr_shows_a_name_escaped() {
    assert_eq!(shown("a.1.ring"), "a.1.ring");
    assert_eq!(shown("a\n\u{1b}[2J b"), "a\\n\\x1b[2J\\x20b");
}
