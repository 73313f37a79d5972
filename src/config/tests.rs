use super::*;
#[cfg(feature = "kafka")]
use crate::sinks::KafkaKey;
use crate::sinks::{FsyncPolicy, SyslogTransport};

#[test]
fn addresses_a_sink_cannot_use_are_errors_at_their_line() {
    let err = |text: &str| match LogConfig::from_toml_str(text) {
        Err(ConfigError::Parse(m)) => m,
        other => panic!("{text}: {other:?}"),
    };
    for (table, line, says) in [
        (
            "type = \"syslog\"\naddress = \"127.0.0.1:notaport\"",
            3,
            "[sink] address = \"127.0.0.1:notaport\": not an IP address and port",
        ),
        (
            "type = \"syslog\"\ntransport = \"tcp\"\naddress = \"loghost:514\"",
            4,
            "not an IP address and port",
        ),
        (
            "type = \"ipfix\"\naddress = \"collector\"",
            3,
            "[sink] address = \"collector\": no port",
        ),
        (
            "type = \"ipfix\"\naddress = \"2001:db8::1:4739\"",
            3,
            "an IPv6 address takes brackets",
        ),
        (
            "type = \"kafka\"\nbrokers = \"127.0.0.1:9092,127.0.0.1:notaport\"",
            3,
            "port \"notaport\" is not a number in 1..65535",
        ),
        (
            "type = \"kafka\"\nbrokers = \"k1:9092,,k2\"",
            3,
            "no host in \"\"",
        ),
        (
            "type = \"kafka\"\nbrokers = \"k 1:9092\"",
            3,
            "\"k 1\" is not a host name or address",
        ),
        (
            "type = \"ipfix\"\naddress = \"300.1.1.1:4739\"",
            3,
            "[sink] address = \"300.1.1.1:4739\": \"300.1.1.1\" is not an IPv4 address \
             (four numbers 0 to 255 separated by dots, e.g. 192.0.2.10) (e.g. \
             \"192.0.2.10:4739\")",
        ),
        (
            "type = \"ipfix\"\ntransport = \"tcp\"\naddress = \"10.1:4739\"",
            4,
            "\"10.1\" is not an IPv4 address",
        ),
        (
            "type = \"syslog\"\naddress = \"300.1.1.1:514\"",
            3,
            "[sink] address = \"300.1.1.1:514\": not an IP address and port: \
             \"300.1.1.1\" is not an IPv4 address",
        ),
        (
            "type = \"kafka\"\nbrokers = \"127.0.0.1:9092,192.168.1.256\"",
            3,
            "\"192.168.1.256\" is not an IPv4 address",
        ),
    ] {
        if table.contains("kafka") && !cfg!(feature = "kafka") {
            // Refused for want of the feature instead (tested apart).
            continue;
        }
        let text = if table.contains("ipfix") {
            format!("[format]\ntype = \"ipfix\"\n[sink]\n{table}\n")
        } else {
            format!("[sink]\n{table}\n")
        };
        let line = if table.contains("ipfix") {
            line + 2
        } else {
            line
        };
        let m = err(&text);
        assert!(
            m.starts_with(&format!("config line {line}, column 1: ")),
            "{text}: {m}"
        );
        assert!(m.contains(says), "{text}: {m}");
    }
    // What works: IP literals, names with ports, a port-less broker.
    for table in [
        "type = \"syslog\"\naddress = \"[::1]:514\"",
        "type = \"syslog\"\ntransport = \"unix_dgram\"\naddress = \"/dev/log\"",
        "type = \"kafka\"\nbrokers = \"127.0.0.1:9092, kafka-2.example:9093,k3\"",
    ] {
        if table.contains("kafka") && !cfg!(feature = "kafka") {
            continue;
        }
        LogConfig::from_toml_str(&format!("[sink]\n{table}\n"))
            .unwrap_or_else(|e| panic!("{table}: {e}"));
    }
    for a in [
        "[2001:db8::1]:4739",
        "collector.example:4739",
        "192.0.2.10:4739",
        "1.example:4739",
        "host-1.2:4739",
    ] {
        LogConfig::from_toml_str(&format!(
            "[format]\ntype = \"ipfix\"\n[sink]\ntype = \"ipfix\"\naddress = \"{a}\"\n"
        ))
        .unwrap_or_else(|e| panic!("{a}: {e}"));
    }
}

#[test]
fn formats_a_sink_cannot_carry_are_errors_at_the_sink_type_line() {
    let err = |text: &str| match LogConfig::from_toml_str(text) {
        Err(ConfigError::Parse(m)) => m,
        other => panic!(
            "expected a parse error for {text:?}, got {:?}",
            other.map(|_| ())
        ),
    };
    let mut bad = vec![
        ("ipfix", "type = \"syslog\"\ntransport = \"udp\"", "syslog"),
        ("binary", "type = \"syslog\"\ntransport = \"tcp\"", "syslog"),
        ("json", "type = \"ipfix\"", "ipfix"),
        ("text", "type = \"ipfix\"\ntransport = \"tcp\"", "ipfix"),
        ("csv", "type = \"ipfix\"", "ipfix"),
        ("rfc5424", "type = \"ipfix\"", "ipfix"),
        ("rfc3164", "type = \"ipfix\"", "ipfix"),
        ("binary", "type = \"ipfix\"", "ipfix"),
    ];
    if cfg!(feature = "kafka") {
        bad.push(("ipfix", "type = \"kafka\"\ntopic = \"t\"", "kafka"));
        bad.push(("binary", "type = \"kafka\"", "kafka"));
    }
    for (kind, table, sink) in bad {
        let text = format!("[format]\ntype = \"{kind}\"\n\n[sink]\n{table}\n");
        let m = err(&text);
        assert!(m.starts_with("config line 5, column 1: "), "{text}: {m}");
        assert!(
            m.contains(&format!(
                "[sink] type = \"{sink}\" with [format] type = \"{kind}\""
            )),
            "{m}"
        );
        // The message says what works.
        if sink == "ipfix" {
            assert!(m.contains("takes [format] type = \"ipfix\" only"), "{m}");
        } else {
            assert!(
                m.contains("takes the line formats (text, json, csv, rfc5424, rfc3164)"),
                "{m}"
            );
        }
    }
    // No [format]: text, which the exporter cannot carry.
    let m = err("[sink]\ntype = \"ipfix\"\n");
    assert!(m.starts_with("config line 2, column 1: "), "{m}");
    // In a set, at the line of the table concerned.
    let m = err(
        "[format]\ntype = \"ipfix\"\n[[sink]]\ntype = \"ipfix\"\n[[sink]]\ntype = \"file\"\npath = \"x\"\n[[sink]]\nrole = \"failover\"\ntype = \"syslog\"\n",
    );
    assert!(m.starts_with("config line 10, column 1: "), "{m}");
    // ... and named as the third of the set.
    assert!(
        m.contains("[[sink]] #3 type = \"syslog\" with [format] type = \"ipfix\""),
        "{m}"
    );
    // The same rule for a format chosen after loading names the sink of
    // the set too.
    let cfg = LogConfig::from_toml_str(
        "[[sink]]\ntype = \"file\"\npath = \"x\"\n[[sink]]\nrole = \"failover\"\ntype = \"syslog\"\n",
    )
    .expect("a text config with file and syslog sinks loads");
    let m = cfg
        .sink
        .check_framing(crate::formatters::Format::Binary)
        .expect_err("binary into syslog is refused")
        .to_string();
    assert!(
        m.contains("[[sink]] #2 type = \"syslog\" with [format] type = \"binary\""),
        "{m}"
    );
    // What works.
    for (kind, table) in [
        ("ipfix", "type = \"ipfix\"\naddress = \"127.0.0.1:4739\""),
        ("ipfix", "type = \"file\"\npath = \"x\""),
        ("binary", "type = \"file\"\npath = \"x\""),
        ("rfc5424", "type = \"syslog\""),
        ("json", "type = \"syslog\""),
        ("json", "type = \"mmap\"\ndir = \"d\""),
    ] {
        let text = format!("[format]\ntype = \"{kind}\"\n[sink]\n{table}\n");
        assert!(LogConfig::from_toml_str(&text).is_ok(), "{text}");
    }
    let c = LogConfig::from_toml_str(
        "[format]\ntype = \"ipfix\"\n[sink]\ntype = \"ipfix\"\ntransport = \"tcp\"\naddress = \"[::1]:4739\"\nmax_message_bytes = 1200\nobservation_domain_id = 5\n",
    )
    .unwrap();
    let SinkConfig::Ipfix(i) = &c.sink else {
        panic!("{:?}", c.sink)
    };
    let o = i.options().unwrap();
    assert_eq!(
        o.transport,
        crate::sinks::IpfixTransport::Tcp("[::1]:4739".parse().unwrap())
    );
    assert_eq!(
        (o.max_message_bytes, o.observation_domain_id),
        (1200, Some(5))
    );
    assert_eq!(c.sink.describe(), "ipfix tcp [::1]:4739");
}

#[test]
fn settings_that_would_cut_a_binary_stream_are_errors_at_their_line() {
    let err = |text: &str| match LogConfig::from_toml_str(text) {
        Err(ConfigError::Parse(m)) => m,
        other => panic!(
            "expected a parse error for {text:?}, got {:?}",
            other.map(|_| ())
        ),
    };
    for (kind, key, value) in [
        ("binary", "max_size_bytes", "1000000"),
        ("binary", "rotate_interval_ms", "60000"),
        ("ipfix", "reopen_on_sighup", "true"),
    ] {
        let m = err(&format!(
            "[format]\ntype = \"{kind}\"\n[sink]\ntype = \"file\"\npath = \"x\"\n{key} = {value}\n"
        ));
        assert!(m.starts_with("config line 6, column 1: "), "{m}");
        assert!(
            m.contains(&format!("`{key}` with [format] type = \"{kind}\"")),
            "{m}"
        );
    }
    let m = err("[format]\ntype = \"ipfix\"\n[[sink]]\ntype = \"mmap\"\ndir = \"d\"\n");
    assert!(m.starts_with("config line 4, column 1: "), "{m}");
    // What stays allowed: no rotation, reopen off, binary into mmap,
    // rotation of a line format.
    for ok in [
        "[format]\ntype = \"binary\"\n[sink]\ntype = \"file\"\nreopen_on_sighup = false\n",
        "[format]\ntype = \"binary\"\n[sink]\ntype = \"mmap\"\ndir = \"d\"\n",
        "[format]\ntype = \"csv\"\n[sink]\ntype = \"file\"\nmax_size_bytes = 1000\n",
    ] {
        assert!(LogConfig::from_toml_str(ok).is_ok(), "{ok}");
    }
    let m = err("[ring]\npublish_every = 0\n");
    assert!(
        m.starts_with("config line 2, column 1: [ring] `publish_every` = 0"),
        "{m}"
    );
    let m = err("[format]\ntemplate = \"\"\n");
    assert!(
        m.contains("line 2, column 1: [format] `template` is empty"),
        "{m}"
    );
}

#[test]
fn a_failover_secondary_of_a_stream_with_a_header_is_an_error_at_its_role() {
    // The binary stream's schema frames (IPFIX's templates) go to the
    // primary in the first batch; a secondary taking over later would
    // hold records nothing describes.
    for (format, kind, place) in [
        ("binary", "file", "path = \"b.bin\""),
        ("binary", "mmap", "dir = \"m\""),
        ("binary", "archive", "dir = \"a\""),
        ("ipfix", "file", "path = \"b.ipfix\""),
    ] {
        let text = format!(
            "[format]\ntype = \"{format}\"\n[[sink]]\ntype = \"file\"\npath = \"p\"\n\
             [[sink]]\ntype = \"{kind}\"\n{place}\nrole = \"failover\"\n"
        );
        let m = match LogConfig::from_toml_str(&text) {
            Err(ConfigError::Parse(m)) => m,
            other => panic!("{text:?} not refused: {:?}", other.map(|_| ())),
        };
        assert!(m.starts_with("config line 9, column 1: "), "{m}");
        assert!(
            m.contains(&format!(
                "role = \"failover\" on a {kind} sink with [format] type = \"{format}\""
            )),
            "{m}"
        );
    }
    // Allowed: a fan-out of binary (both get every batch, header
    // included), a failover file of a line format.
    for ok in [
        "[format]\ntype = \"binary\"\n[[sink]]\ntype = \"file\"\npath = \"p\"\n[[sink]]\ntype = \"file\"\npath = \"s\"\n",
        "[format]\ntype = \"json\"\n[[sink]]\ntype = \"file\"\npath = \"p\"\n[[sink]]\ntype = \"file\"\npath = \"s\"\nrole = \"failover\"\n",
    ] {
        assert!(LogConfig::from_toml_str(ok).is_ok(), "{ok}");
    }
}

#[test]
fn two_file_sinks_on_one_file_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.log");
    let same = dir.path().join(".").join("a.log");
    let text = format!(
        "[[sink]]\ntype = \"file\"\npath = \"{}\"\n[[sink]]\ntype = \"file\"\npath = \"{}\"\n",
        a.display(),
        same.display()
    );
    let cfg = LogConfig::from_toml_str(&text).unwrap();
    let e = cfg.sink.build().err().expect("refused");
    assert!(
        e.to_string()
            .contains("every record would be written twice"),
        "{e}"
    );
    assert!(!a.exists(), "nothing opened");
}

#[test]
fn a_bad_mmap_segment_size_is_refused_before_any_sink_opens() {
    // Refused when the file is read: refused only when the mmap sink
    // opened, it left the file of the sink listed before it behind.
    let text = "[[sink]]\ntype = \"file\"\npath = \"x.log\"\n\
                [[sink]]\ntype = \"mmap\"\ndir = \"d\"\nsegment_bytes = 4096\n";
    let m = match LogConfig::from_toml_str(text) {
        Err(ConfigError::Parse(m)) => m,
        other => panic!("expected a parse error, got {:?}", other.map(|_| ())),
    };
    assert!(m.contains("line 7"), "{m}");
    assert!(
        m.contains("`segment_bytes` = 4096 must be a multiple of 4096 and at least 65536"),
        "{m}"
    );
    for bad in [0, 65536 + 1, 61440] {
        let t = format!("[sink]\ntype = \"mmap\"\nsegment_bytes = {bad}\n");
        assert!(LogConfig::from_toml_str(&t).is_err(), "{bad}");
    }
    let ok = "[sink]\ntype = \"mmap\"\nsegment_bytes = 65536\n";
    assert!(LogConfig::from_toml_str(ok).is_ok());
}

#[test]
fn a_set_whose_later_sink_cannot_open_leaves_no_file_behind() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    // An existing (empty) file of the set is kept; the one the first
    // sink created is removed.
    std::fs::write(dir.path().join("kept.log"), b"").unwrap();
    for second in [
        format!("type = \"mmap\"\ndir = \"{d}/no/such/dir\"\n"),
        format!("type = \"file\"\npath = \"{d}/no/such/x.log\"\n"),
    ] {
        let text = format!(
            "[[sink]]\ntype = \"file\"\npath = \"{d}/out.log\"\n\
             [[sink]]\ntype = \"file\"\npath = \"{d}/kept.log\"\n\
             [[sink]]\n{second}"
        );
        let cfg = LogConfig::from_toml_str(&text).unwrap();
        assert!(cfg.sink.build().is_err(), "{second}");
        assert!(!dir.path().join("out.log").exists(), "{second}");
        assert!(dir.path().join("kept.log").exists(), "{second}");
        assert!(!dir.path().join("no").exists(), "{second}");
    }
    // An address no sink could use is refused at load, before any sink
    // of the set opens.
    let text = format!(
        "[[sink]]\ntype = \"file\"\npath = \"{d}/out.log\"\n\
         [[sink]]\ntype = \"syslog\"\ntransport = \"tcp\"\naddress = \"nohost:99\"\n"
    );
    let e = LogConfig::from_toml_str(&text).err().unwrap().to_string();
    assert!(e.contains("[[sink]] #2 address = \"nohost:99\""), "{e}");
    assert!(!dir.path().join("out.log").exists());
}

#[test]
fn an_unknown_key_in_a_sink_table_is_reported_at_its_own_line() {
    let err = |text: &str| match LogConfig::from_toml_str(text) {
        Err(ConfigError::Parse(m)) => m,
        other => panic!("expected a parse error, got {:?}", other.map(|_| ())),
    };
    let m = err("[ring]\ncapacity = 64\n[sink]\ntype = \"file\"\npath = \"x.log\"\nbogus = 1\n");
    assert!(m.starts_with("config line 6, column 1: "), "{m}");
    assert!(m.contains("6 | bogus = 1\n  | ^^^^^"), "{m}");
    assert!(m.contains("[sink] bogus: unknown field `bogus`"), "{m}");
    assert!(!m.contains("[ring] setting"), "{m}");
    // A consumer setting put in a sink table: where it belongs.
    for key in ["sink_retry_timeout_ms = 2000", "shutdown_timeout_ms = 500"] {
        let m = err(&format!(
            "[[sink]]\ntype = \"archive\"\ndir = \"a\"\n{key}\n"
        ));
        let name = key.split(' ').next().unwrap();
        assert!(m.starts_with("config line 4, column 1: "), "{m}");
        assert!(
            m.contains(&format!("unknown field `{name}`, expected one of"))
                && m.contains(&format!(
                    "(`{name}` is a [ring] setting, for every sink: put it under [ring])"
                )),
            "{m}"
        );
    }
    let m = err(concat!(
        "[[sink]]\ntype = \"file\"\npath = \"a.log\"\n\n",
        "[[sink]]\ntype = \"file\"\npath = \"b.log\"\n  colour = \"red\"\n"
    ));
    assert!(m.starts_with("config line 8, column 3: "), "{m}");
    assert!(
        m.contains("[[sink]] #2 colour: unknown field `colour`"),
        "{m}"
    );
    let m = err("[sink]\ntype = \"file\"\npath = \"x.log\"\nkeep_files = 0\n");
    assert!(m.starts_with("config line 4, column 1: "), "{m}");
    assert!(
        m.contains("`keep_files` = 0 would delete every rotated file"),
        "{m}"
    );
    let m = err("[sink]\ntype = \"file\"\nkeep_days = 0\n");
    assert!(m.starts_with("config line 3, column 1: "), "{m}");
    assert!(m.contains("`keep_days` = 0"), "{m}");
    let ok = "[sink]\ntype = \"file\"\nkeep_files = 3\nkeep_days = 7\n";
    match LogConfig::from_toml_str(ok).unwrap().sink {
        SinkConfig::File(f) => assert_eq!((f.keep_files, f.keep_days), (Some(3), Some(7))),
        _ => panic!("a file sink"),
    }
    // Other errors keep toml's own position.
    let m = err("[ring]\ncapacity = \"big\"\n");
    assert!(m.contains("line 2"), "{m}");
}

/// The parse error of `text`, which must not load.
fn parse_err(text: &str) -> String {
    match LogConfig::from_toml_str(text) {
        Err(ConfigError::Parse(m)) => m,
        other => panic!("expected a parse error, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn a_bad_value_in_a_sink_table_is_reported_at_its_key() {
    // The third sink of a set, its type misspelt: at `type`, line 9.
    let m = parse_err(concat!(
        "[[sink]]\ntype = \"file\"\npath = \"a.log\"\n",
        "[[sink]]\ntype = \"file\"\npath = \"b.log\"\n",
        "[[sink]]\npath = \"c.log\"\ntype = \"sylsog\"\n",
    ));
    assert_eq!(
        m,
        "config line 9, column 1: [[sink]] #3 type: unknown variant `sylsog`, expected one of \
         `file`, `mmap`, `syslog`, `archive`, `ipfix`, `clickhouse`, `kafka`\n  |\n9 | type = \"sylsog\"\n  | ^^^^"
    );
    // An unknown variant of another key, indented: its own column.
    let m = parse_err(concat!(
        "[sink]\ntype = \"syslog\"\naddress = \"127.0.0.1:514\"\n",
        "  transport = \"tpc\"\n",
    ));
    assert_eq!(
        m,
        "config line 4, column 3: [sink] transport: unknown variant `tpc`, expected one of \
         `udp`, `tcp`, `unix_dgram`, `unix_stream`, `relp`\n  |\n4 |   transport = \"tpc\"\n  |   \
         ^^^^^^^^^"
    );
    // Wrong types and values out of range, in a set and alone.
    let m = parse_err(concat!(
        "[[sink]]\ntype = \"file\"\npath = \"a.log\"\n\n",
        "[[sink]]\ntype = \"file\"\npath = \"b.log\"\nfsync = \"sometimes\"\n",
    ));
    assert!(m.starts_with("config line 8, column 1: "), "{m}");
    assert!(m.ends_with("8 | fsync = \"sometimes\"\n  | ^^^^^"), "{m}");
    assert!(
        m.contains("[[sink]] #2 fsync: unknown variant `sometimes`"),
        "{m}"
    );
    let m = parse_err("[sink]\ntype = \"file\"\n\npath = 3\n");
    assert!(m.starts_with("config line 4, column 1: "), "{m}");
    assert!(
        m.contains("[sink] path: invalid type: integer `3`, expected path string\n"),
        "{m}"
    );
    let m = parse_err("[sink]\ntype = \"file\"\nkeep_files = -1\n");
    assert!(m.starts_with("config line 3, column 1: "), "{m}");
    assert!(
        m.contains("[sink] keep_files: invalid value: integer `-1`, expected usize\n"),
        "{m}"
    );
    let m = parse_err("[[sink]]\ntype = \"file\"\n[[sink]]\ntype = \"mmap\"\nrole = \"backup\"\n");
    assert!(m.starts_with("config line 5, column 1: "), "{m}");
    assert!(
        m.contains("[[sink]] #2 role: unknown variant `backup`"),
        "{m}"
    );
    // A `type` that is not a string: at `type`.
    let m = parse_err("[sink]\npath = \"a.log\"\ntype = 3\n");
    assert!(m.starts_with("config line 3, column 1: "), "{m}");
    // Two bad values: the message is the one the place points at, the
    // first in the file (not the first by name).
    let m = parse_err(concat!(
        "[sink]\ntype = \"syslog\"\ntransport = \"tpc\"\n",
        "address = 5\n",
    ));
    assert!(m.starts_with("config line 3, column 1: "), "{m}");
    assert!(m.contains("[sink] transport: unknown variant `tpc`"), "{m}");
    assert!(!m.contains("integer"), "{m}");
}

#[cfg(feature = "kafka")]
#[test]
fn a_bad_value_in_a_nested_sink_table_is_reported_at_its_own_key() {
    // `[sink.properties]`: at the key inside it, not at the header.
    let m = parse_err(concat!(
        "[sink]\ntype = \"kafka\"\ntopic = \"nat\"\n\n",
        "[sink.properties]\n\"socket.timeout.ms\" = \"100\"\n\"linger.ms\" = 5\n",
    ));
    assert_eq!(
        m,
        "config line 7, column 1: [sink.properties] linger.ms: invalid type: integer `5`, \
         expected a string\n  |\n7 | \"linger.ms\" = 5\n  | ^^^^^^^^^^^"
    );
    // The same as a dotted key and in an inline table of a set.
    let m = parse_err("[sink]\ntype = \"kafka\"\nproperties.acks = 1\n");
    assert!(m.starts_with("config line 3, column 12: "), "{m}");
    assert!(
        m.contains("[sink.properties] acks: invalid type: integer `1`, expected a string\n  |\n3 | properties.acks = 1\n  |            ^^^^"),
        "{m}"
    );
    let m = parse_err(concat!(
        "[[sink]]\ntype = \"file\"\n",
        "[[sink]]\ntype = \"kafka\"\nproperties = { acks = \"all\", \"retries\" = true }\n",
    ));
    assert!(m.starts_with("config line 5, column 30: "), "{m}");
    assert!(
        m.contains(
            "[[sink]] #2 properties.retries: invalid type: boolean `true`, expected a string"
        ),
        "{m}"
    );
}

#[test]
fn a_template_with_a_format_that_ignores_it_is_an_error_naming_key_and_line() {
    for (kind, key) in [
        ("json", "template"),
        ("csv", "template"),
        ("rfc5424", "templates"),
    ] {
        let body = if key == "template" {
            "template = \"{sourceIPv4Address}\"\n".to_string()
        } else {
            "[format.templates]\nnatPortBlock = \"{portRangeStart}\"\n".to_string()
        };
        let text = format!("[ring]\ncapacity = 1024\n[format]\ntype = \"{kind}\"\n{body}");
        let e = LogConfig::from_toml_str(&text).unwrap_err().to_string();
        // `template = ...`, or the `[format.templates]` header.
        assert!(
            e.contains("line 5, column ")
                && e.contains(&format!("`{key}`"))
                && e.contains(&format!("type = \"{kind}\"")),
            "{kind}: {e}"
        );
    }
    // The same settings built in code: the formatter refuses them too.
    let spec = crate::formatters::FormatSpec {
        kind: crate::formatters::Format::Json,
        template: Some("{sourceIPv4Address}".into()),
        ..Default::default()
    };
    let e = spec.nat_formatter().err().unwrap().to_string();
    assert!(
        e.contains("`template` applies only to type \"text\"; this format is \"json\""),
        "{e}"
    );
    // With type text (or no type: text is the default) it is accepted.
    for text in [
        "[format]\ntype = \"text\"\ntemplate = \"{sourceIPv4Address}\"\n",
        "[format]\ntemplate = \"{sourceIPv4Address}\"\n",
    ] {
        let c = LogConfig::from_toml_str(text).unwrap();
        assert!(c.format.nat_formatter().is_ok());
    }
    // read_toml names the file as well.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j.toml");
    std::fs::write(&p, "[format]\ntype = \"json\"\ntemplate = \"x\"\n").unwrap();
    let e = read_toml::<LogConfig>(&p).unwrap_err().to_string();
    assert!(e.contains("j.toml: config line 3, column 12"), "{e}");
}

#[test]
fn format_section_reads_template_profile_syslog_and_ipfix() {
    let c = LogConfig::from_toml_str(
        r#"
        [format]
        type = "rfc5424"
        profile = "legacy"
        [format.syslog]
        hostname = "cgnat-1"
        sd_id = "nsess@32473"
        profile = "vpp"
        [format.ipfix]
        mtu = 9000
        export_clock = "record"
        "#,
    )
    .unwrap();
    let s = c.format.spec();
    assert_eq!(s.kind, crate::formatters::Format::Rfc5424);
    assert_eq!(s.template, None);
    assert_eq!(s.renumber, crate::nat::EventProfile::Legacy.renumber());
    assert_eq!(s.syslog.hostname.as_deref(), Some("cgnat-1"));
    assert_eq!(s.syslog.app_name, None);
    assert_eq!(s.syslog.profile.as_deref(), Some("vpp"));
    // RFC 5424 section 6.3.2 SD-IDs, refused at their line.
    for (bad, why) in [
        ("nsess", "not an IANA-registered SD-ID"),
        ("nsess@abc", "private enterprise number"),
        ("a b@1", "contains ' '"),
    ] {
        let e = LogConfig::from_toml_str(&format!(
            "[format]
type = \"rfc5424\"
[format.syslog]
sd_id = \"{bad}\"
"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("line 4") && e.contains(why), "{bad}: {e}");
    }
    let e = LogConfig::from_toml_str(
        "[format.syslog]
profile = \"cisco\"
",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("line 2") && e.contains("profiles: vpp"), "{e}");
    assert_eq!(s.ipfix.mtu, 9000);
    assert_eq!(s.ipfix.template_refresh_secs, 20);
    assert!(c.format.nat_formatter().is_ok());
    let e = LogConfig::from_toml_str("[format]\ntype = \"text\"\ntemplate = \"x {nope}\"\n")
        .unwrap()
        .format
        .nat_formatter()
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("column 3") && e.contains("nope"), "{e}");
    // An MTU the exporter cannot use is refused at load (at its line;
    // see bad_ipfix_settings_are_refused_at_load_naming_the_key_and_line).
    let e = LogConfig::from_toml_str("[format]\ntype = \"ipfix\"\n[format.ipfix]\nmtu = 100\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("mtu = 100"), "{e}");
}

#[test]
fn empty_document_gives_defaults() {
    let c = LogConfig::from_toml_str("").unwrap();
    assert_eq!(c, LogConfig::default());
    assert_eq!(c.ring.capacity, crate::runtime::DEFAULT_RING_CAPACITY);
    assert_eq!(c.ring.capacity, 16384);
    assert_eq!(c.format.kind, Format::Text);
}

#[test]
fn every_key_is_read() {
    let c = LogConfig::from_toml_str(
        r#"
        [ring]
        capacity = 16
        backpressure = "drop"
        burst = 8
        batch_bytes = 65536
        consumer_cpu = 1
        poll_gap_max_us = 0
        [format]
        type = "json"
        [sink]
        type = "file"
        path = "/tmp/x.jsonl"
        "#,
    )
    .unwrap();
    let l = c.logger_config();
    assert_eq!(
        (
            l.ring_capacity,
            l.backpressure,
            l.burst,
            l.batch_bytes,
            l.consumer_cpu,
            l.poll_gap_max_us
        ),
        (16, Backpressure::Drop, 8, 65536, Some(1), 0)
    );
    assert_eq!(c.format.kind, Format::Json);
    assert_eq!(
        c.sink,
        SinkConfig::File(FileSinkConfig {
            path: "/tmp/x.jsonl".into(),
            ..Default::default()
        })
    );
}

#[test]
fn backpressure_names_and_degrade_watermarks() {
    for (name, want) in [
        ("block", Backpressure::Block),
        ("drop_newest", Backpressure::Drop),
        ("drop", Backpressure::Drop),
        ("degrade", Backpressure::Degrade),
    ] {
        let c = LogConfig::from_toml_str(&format!("[ring]\nbackpressure = \"{name}\"\n")).unwrap();
        assert_eq!(c.logger_config().backpressure, want, "{name}");
    }
    let c = LogConfig::from_toml_str(
        "[ring]\nbackpressure = \"degrade\"\nblock_spins = 7\ndrop_reports = false\n\
         [ring.degrade]\nhigh_watermark_pct = 90\nlow_watermark_pct = 40\nmin_priority = 3\n",
    )
    .unwrap();
    let l = c.logger_config();
    assert_eq!(
        l.degrade,
        DegradeConfig {
            high_watermark_pct: 90,
            low_watermark_pct: 40,
            min_priority: 3
        }
    );
    assert_eq!((l.block_spins, l.drop_reports), (7, false));
    assert_eq!(l.reorder_window_ns, None);
    let c = LogConfig::from_toml_str("[ring]\nreorder_window_ns = 250000\n").unwrap();
    assert_eq!(c.logger_config().reorder_window_ns, Some(250_000));
    let c = LogConfig::from_toml_str("[ring]\nshutdown_timeout_ms = 750\n").unwrap();
    assert_eq!(c.logger_config().shutdown_timeout_ms, 750);
    assert_eq!(
        LogConfig::default().logger_config().shutdown_timeout_ms,
        5000
    );
    let c = LogConfig::from_toml_str("[ring]\nsink_retry_timeout_ms = 1500\n").unwrap();
    assert_eq!(c.logger_config().sink_retry_timeout_ms, Some(1500));
    assert_eq!(
        LogConfig::default().logger_config().sink_retry_timeout_ms,
        None,
        "off by default: a failing sink is retried forever"
    );
    // Only the keys given change; the others keep their defaults.
    let c = LogConfig::from_toml_str("[ring.degrade]\nlow_watermark_pct = 10\n").unwrap();
    assert_eq!(c.ring.degrade.high_watermark_pct, 80);
    assert_eq!(c.ring.degrade.low_watermark_pct, 10);
    let e = LogConfig::from_toml_str("[ring.degrade]\nhigh = 1\n").unwrap_err();
    assert!(e.to_string().contains("high"), "{e}");
}

#[test]
fn unknown_keys_and_values_are_named() {
    let e = LogConfig::from_toml_str("[ring]\ncapacity = 16\nsize = 4\n").unwrap_err();
    assert!(e.to_string().contains("size"), "{e}");
    assert!(e.to_string().contains("line 3"), "{e}");
    let e = LogConfig::from_toml_str("[sink]\ntype = \"file\"\npth = \"a\"\n").unwrap_err();
    assert!(e.to_string().contains("pth"), "{e}");
    let e = LogConfig::from_toml_str("[sink]\ntype = \"carrier-pigeon\"\n").unwrap_err();
    assert!(e.to_string().contains("carrier-pigeon"), "{e}");
    let e = LogConfig::from_toml_str("[ring]\nbackpressure = \"maybe\"\n").unwrap_err();
    assert!(e.to_string().contains("maybe"), "{e}");
    let e = LogConfig::from_toml_str("[format]\ntype = \"xml\"\n").unwrap_err();
    assert!(e.to_string().contains("xml"), "{e}");
    let e = LogConfig::from_toml_str("color = 1\n").unwrap_err();
    assert!(e.to_string().contains("color"), "{e}");
}

/// A ring size no ring can have is refused when the configuration is
/// loaded (from a string and from a file), at its line, so no program gets
/// as far as opening its sink.
#[test]
fn a_bad_ring_capacity_is_refused_at_load_naming_the_key_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("lb-conns.log");
    for (cap, why) in [
        ("3", "must be a power of two from 1 to 16777216"),
        ("0", "must be a power of two from 1 to 16777216"),
        ("1000", "must be a power of two from 1 to 16777216"),
        ("33554432", "is above the limit of 16777216"),
    ] {
        let text = format!(
            "[format]\ntype = \"csv\"\n[ring]\ncapacity = {cap}\n[sink]\ntype = \"file\"\npath = \"{}\"\n",
            log.display()
        );
        let e = LogConfig::from_toml_str(&text).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "bad config: config line 4, column 1: [ring] capacity = {cap} {why} slots per ring\n"
            )),
            "{e}"
        );
        let path = dir.path().join("lb.toml");
        std::fs::write(&path, &text).unwrap();
        let e = crate::config::read_toml::<LogConfig>(&path)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("[ring] capacity = {cap} {why}")), "{e}");
        assert!(!log.exists());
    }
    for cap in [1, 2, 16384, 16777216] {
        let c = LogConfig::from_toml_str(&format!("[ring]\ncapacity = {cap}\n")).unwrap();
        assert_eq!(c.ring.capacity, cap);
    }
}

#[test]
fn ring_sizes_past_their_bounds_are_refused_with_the_memory_and_open_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("a.log");
    let start = |ring: &str| {
        let text = format!(
            "[ring]\n{ring}\n[sink]\ntype = \"file\"\npath = \"{}\"\n",
            log.display()
        );
        let e = LogConfig::from_toml_str(&text)
            .unwrap()
            .start_nat44()
            .err()
            .unwrap()
            .to_string();
        assert!(
            !log.exists(),
            "{ring}: refused, yet {} exists",
            log.display()
        );
        e
    };
    assert_eq!(
        start("batch_bytes = 1099511627776"),
        "invalid logger config: batch_bytes ([ring] batch_bytes) = 1099511627776 (1 TiB) is outside \
         65536 (64 KiB) to 268435456 (256 MiB)"
    );
    assert!(start("batch_bytes = 4096").contains("= 4096 (4 KiB) is outside"));
    assert!(start("burst = 0").contains("[ring] burst"));
    assert_eq!(
        start("poll_gap_max_us = 1001"),
        "invalid logger config: poll_gap_max_us ([ring] poll_gap_max_us) = 1001 is above the \
         limit of 1000 µs (the longest a record may wait while the consumer is awake)"
    );
    // The bounds themselves are accepted, and the Rust API refuses what
    // the TOML refuses, with an error rather than an abort.
    let c =
        LogConfig::from_toml_str("[ring]\ncapacity = 16777216\nbatch_bytes = 268435456\n").unwrap();
    c.check_ring(64).unwrap();
    let lc = crate::LoggerConfig {
        batch_bytes: 1 << 40,
        ..Default::default()
    };
    let e = Logger::<Nat44SessionRecord>::start(
        lc,
        FormatConfig::default().nat_formatter().unwrap(),
        crate::sinks::FileSink::open(&log).unwrap(),
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("1 TiB"), "{e}");
    // A ring size set in code (the TOML refuses it at load) is refused at
    // start with the memory it would take.
    let lc = crate::LoggerConfig {
        ring_capacity: 1000,
        ..Default::default()
    };
    assert_eq!(
        lc.validate(64).unwrap_err().to_string(),
        "invalid logger config: ring_capacity ([ring] capacity) = 1000 slots x 64 B = 62.5 KiB per ring \
         must be a power of two from 1 to 16777216 slots (1 GiB)"
    );
    assert_eq!(
        crate::runtime::ring_memory(16384, 64),
        "16384 slots x 64 B = 1 MiB per ring"
    );
}

#[test]
fn metrics_section_refuses_non_loopback_unless_allowed_and_serves() {
    let c = LogConfig::from_toml_str("[metrics]\nprometheus_listen = \"127.0.0.1:0\"\n").unwrap();
    assert_eq!(
        c.metrics.prometheus_listen,
        Some("127.0.0.1:0".parse().unwrap())
    );
    assert!(c.metrics.check().is_ok());
    assert_eq!(LogConfig::default().metrics.prometheus_listen, None);
    let far = "[metrics]\nprometheus_listen = \"0.0.0.0:9464\"\n";
    let e = LogConfig::from_toml_str(far)
        .unwrap()
        .metrics
        .check()
        .unwrap_err();
    assert!(e.to_string().contains("allow_non_loopback"), "{e}");
    let ok = format!("{far}allow_non_loopback = true\n");
    assert!(LogConfig::from_toml_str(&ok)
        .unwrap()
        .metrics
        .check()
        .is_ok());
    let e = LogConfig::from_toml_str("[metrics]\nprometheus_listen = \"localhost\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("prometheus_listen"), "{e}");
    assert!(LogConfig::from_toml_str("[metrics]\nport = 1\n").is_err());
    // Started from the config: a real GET over loopback.
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[metrics]\nprometheus_listen = \"127.0.0.1:0\"\n[sink]\ntype = \"file\"\npath = \"{}\"\n",
        dir.path().join("m.log").display()
    );
    let c = LogConfig::from_toml_str(&text).unwrap();
    let logger = c.start_nat44().unwrap();
    let server = c.metrics.start(&logger).unwrap().expect("configured");
    let mut p = logger.producer().unwrap();
    for port in 0..10u16 {
        assert!(p.log(Nat44SessionRecord {
            nat_event: 4,
            src_port: port,
            ..Default::default()
        }));
    }
    drop(p);
    let s = logger.shutdown().unwrap();
    use std::io::{Read, Write};
    let mut t = std::net::TcpStream::connect(server.local_addr()).unwrap();
    write!(t, "GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut body = String::new();
    t.read_to_string(&mut body).unwrap();
    assert!(
        body.contains(&format!(
            "dplog_consumer_written_total {}\n",
            s.written_records
        )),
        "{body}"
    );
    assert_eq!(s.written_records, 10);
    server.stop();
}

#[test]
fn start_nat44_writes_json_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let text = format!(
        "[format]\ntype = \"json\"\n[sink]\ntype = \"file\"\npath = \"{}\"\n",
        path.display()
    );
    let logger = LogConfig::from_toml_str(&text)
        .unwrap()
        .start_nat44()
        .unwrap();
    let mut p = logger.producer().unwrap();
    for port in 0..100u16 {
        assert!(p.log(Nat44SessionRecord {
            nat_event: 4,
            src_port: port,
            ..Default::default()
        }));
    }
    drop(p);
    let s = logger.shutdown().unwrap();
    assert_eq!(s.written_records, 100);
    let body = std::fs::read_to_string(&path).unwrap();
    let ports: Vec<u64> = body
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["sourceTransportPort"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(ports, (0..100).collect::<Vec<_>>());
}

#[test]
fn sink_tables_fan_out_and_fail_over() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.log");
    let b = dir.path().join("b.log");
    let spill = dir.path().join("spill.log");
    let text = format!(
        "[[sink]]\ntype = \"file\"\npath = \"{}\"\nfsync = \"interval\"\nfsync_interval_ms = 50\n\
         max_size_bytes = 1048576\nrotate_interval_ms = 60000\nkeep_files = 3\nkeep_days = 2\n\
         [[sink]]\ntype = \"file\"\npath = \"/dev/full\"\n\
         [[sink]]\ntype = \"file\"\npath = \"{}\"\nrole = \"failover\"\n\
         [[sink]]\ntype = \"file\"\npath = \"{}\"\nfsync = \"batch\"\n",
        a.display(),
        spill.display(),
        b.display()
    );
    let c = LogConfig::from_toml_str(&text).unwrap();
    let SinkConfig::Set(items) = &c.sink else {
        panic!("not a set: {:?}", c.sink)
    };
    assert_eq!(items.len(), 4);
    let SinkConfig::File(f) = &items[0] else {
        panic!()
    };
    let o = f.options();
    assert_eq!(o.fsync, FsyncPolicy::EveryMs(50));
    assert_eq!(o.max_size_bytes, Some(1 << 20));
    assert_eq!(o.rotate_interval_ms, Some(60_000));
    assert_eq!((o.keep_files, o.keep_days), (Some(3), Some(2)));
    let logger = c.start_nat44().unwrap();
    let mut p = logger.producer().unwrap();
    for port in 0..50u16 {
        assert!(p.log(Nat44SessionRecord {
            src_port: port,
            ..Default::default()
        }));
    }
    drop(p);
    let s = logger.shutdown().unwrap();
    assert_eq!(s.written_records, 50);
    // a and b got every line; /dev/full failed over to spill.
    let a_body = std::fs::read(&a).unwrap();
    assert_eq!(a_body.iter().filter(|&&x| x == b'\n').count(), 50);
    assert_eq!(std::fs::read(&b).unwrap(), a_body);
    assert_eq!(std::fs::read(&spill).unwrap(), a_body);
}

#[test]
fn a_failover_sink_with_no_sink_before_it_is_refused_at_load_at_its_role() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.log");
    let text = format!(
        "[format]\ntype = \"json\"\n\n[[sink]]\ntype = \"file\"\npath = \"{}\"\n  \
         role = \"failover\"\n[[sink]]\ntype = \"file\"\npath = \"{}\"\n",
        a.display(),
        dir.path().join("b.log").display()
    );
    let m = parse_err(&text);
    assert_eq!(
        m,
        "config line 7, column 3: [[sink]] #1 role = \"failover\" needs a sink \
         before it, the one it takes over from; list the primary [[sink]] first, or remove \
         `role`\n  |\n7 |   role = \"failover\"\n  |   ^^^^"
    );
    let m = parse_err("[sink]\ntype = \"file\"\nrole = \"failover\"\n");
    assert!(
        m.starts_with(
            "config line 3, column 1: [sink] role = \"failover\": a failover sink \
             needs a sink before it"
        ),
        "{m}"
    );
    // A failover sink after another loads.
    let ok =
        "[[sink]]\ntype = \"file\"\n[[sink]]\ntype = \"file\"\npath = \"b\"\nrole = \"failover\"\n";
    LogConfig::from_toml_str(ok).unwrap();
    // A set made in code is refused before any sink opens.
    let set = SinkConfig::Set(vec![
        SinkConfig::File(FileSinkConfig {
            path: a.clone(),
            role: SinkRole::Failover,
            ..Default::default()
        }),
        SinkConfig::File(FileSinkConfig {
            path: dir.path().join("b.log"),
            ..Default::default()
        }),
    ]);
    let e = set.build().err().unwrap();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert_eq!(
        e.to_string(),
        "[[sink]] #1: role = \"failover\" needs a sink before it"
    );
    assert!(!a.exists());
}

#[test]
fn a_sink_of_a_set_that_cannot_open_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let text = format!(
        "[[sink]]\ntype = \"file\"\npath = \"{d}/a.log\"\n\
         [[sink]]\ntype = \"file\"\npath = \"{d}/b.log\"\n\
         [[sink]]\ntype = \"file\"\npath = \"{d}/nodir/c.log\"\n"
    );
    let e = LogConfig::from_toml_str(&text)
        .unwrap()
        .start_nat44()
        .err()
        .unwrap();
    let ConfigError::Sink(io) = &e else {
        panic!("{e}")
    };
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    let m = e.to_string();
    let head = format!("cannot open sink: [[sink]] #3 (file {d}/nodir/c.log): ");
    assert!(m.starts_with(&head), "{m}");
    assert!(m.contains("No such file or directory"), "{m}");
    // The files the first two sinks created are gone again.
    assert!(!dir.path().join("a.log").exists());
    assert!(!dir.path().join("b.log").exists());
    // An archive whose directory is missing, second of its set.
    let text = format!(
        "[format]\ntype = \"binary\"\n\
         [[sink]]\ntype = \"mmap\"\ndir = \"{d}\"\n\
         [[sink]]\ntype = \"archive\"\ndir = \"{d}/nodir\"\n"
    );
    let e = LogConfig::from_toml_str(&text)
        .unwrap()
        .start_nat44()
        .err()
        .unwrap();
    let m = e.to_string();
    let head = format!("cannot open sink: [[sink]] #2 (archive {d}/nodir): ");
    assert!(m.starts_with(&head), "{m}");
    assert!(m.contains("No such file or directory"), "{m}");
    // A single sink keeps its own error: there is no set to place it in.
    let text = format!("[sink]\ntype = \"file\"\npath = \"{d}/nodir/c.log\"\n");
    let e = LogConfig::from_toml_str(&text)
        .unwrap()
        .start_nat44()
        .err()
        .unwrap();
    let m = e.to_string();
    assert!(
        m.starts_with(&format!("cannot open sink: {d}/nodir/c.log: ")),
        "{m}"
    );
}

#[test]
fn sink_table_errors_are_named() {
    let e = LogConfig::from_toml_str("[[sink]]\ntype = \"file\"\nmax_size = 5\n").unwrap_err();
    assert!(e.to_string().contains("max_size"), "{e}");
    assert!(e.to_string().contains("#1"), "{e}");
    let e = LogConfig::from_toml_str("[sink]\ntype = \"file\"\nrole = \"backup\"\n").unwrap_err();
    assert!(e.to_string().contains("backup"), "{e}");
    let e = LogConfig::from_toml_str(
        "[[sink]]\ntype = \"file\"\npath = \"/tmp/x\"\nrole = \"failover\"\n",
    )
    .unwrap_err();
    assert!(e.to_string().contains("failover"), "{e}");
    let c = LogConfig::from_toml_str("sink = []\n").unwrap();
    assert!(c.start_nat44().is_err());
}

#[cfg(not(feature = "kafka"))]
#[test]
fn a_kafka_sink_without_the_kafka_feature_is_refused_naming_the_feature_and_line() {
    let e = LogConfig::from_toml_str(
        "[[sink]]\ntype = \"file\"\npath = \"a.log\"\n[[sink]]\ntopic = \"nat\"\ntype = \"kafka\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains(
            "[[sink]] #2 type: `type` = \"kafka\": this build has no Kafka support: rebuild with feature `kafka`"
        ),
        "{e}"
    );
    assert!(e.contains("line 6, column 1"), "{e}");
    assert!(!std::path::Path::new("a.log").exists());
}

#[cfg(feature = "kafka")]
#[test]
fn every_sink_type_parses_and_builds() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        r#"
        [[sink]]
        type = "mmap"
        dir = "{d}"
        prefix = "seg"
        segment_bytes = 131072
        msync_interval_ms = 0
        [[sink]]
        type = "syslog"
        transport = "udp"
        address = "127.0.0.1:5514"
        max_datagram_bytes = 1024
        [[sink]]
        type = "syslog"
        transport = "unix_stream"
        address = "{d}/none.sock"
        role = "failover"
        [[sink]]
        type = "kafka"
        brokers = "127.0.0.1:1"
        topic = "nat"
        key_field = "sourceIPv4Address"
        linger_ms = 1
        message_max_bytes = 10000
        lines_per_message = 8
        ack_timeout_ms = 750
        properties = {{ "client.id" = "dplog-test" }}
        "#,
        d = dir.path().display()
    );
    let c = LogConfig::from_toml_str(&text).unwrap();
    let SinkConfig::Set(items) = &c.sink else {
        panic!("{:?}", c.sink)
    };
    let SinkConfig::Kafka(k) = &items[3] else {
        panic!()
    };
    let o = k.options();
    assert_eq!(o.key, KafkaKey::Field("sourceIPv4Address".into()));
    assert_eq!(
        o.properties,
        vec![("client.id".into(), "dplog-test".into())]
    );
    assert_eq!(o.message_max_bytes, Some(10000));
    assert_eq!(o.lines_per_message, 8);
    assert_eq!(o.ack_timeout_ms, 750);
    assert_eq!(KafkaSinkConfig::default().options().ack_timeout_ms, 5000);
    let SinkConfig::Syslog(s) = &items[1] else {
        panic!()
    };
    assert_eq!(
        s.options().unwrap().transport,
        SyslogTransport::Udp("127.0.0.1:5514".parse().unwrap())
    );
    let mut sink = c.sink.build().unwrap();
    sink.close().unwrap();
    assert!(dplog_sinks::mmap::list_segments(dir.path(), "seg")
        .unwrap()
        .is_empty());
    let e = LogConfig::from_toml_str("[sink]\ntype = \"syslog\"\naddress = \"nohost\"\n")
        .err()
        .unwrap();
    assert!(e.to_string().contains("nohost"), "{e}");
    let e = LogConfig::from_toml_str("[sink]\ntype = \"kafka\"\nkey = \"x\"\n").unwrap_err();
    assert!(e.to_string().contains("key"), "{e}");
}

#[test]
fn syslog_relp_transport_and_window_parse() {
    let c = LogConfig::from_toml_str(
        "[sink]\ntype = \"syslog\"\ntransport = \"relp\"\naddress = \"127.0.0.1:2514\"\nrelp_window = 32\n",
    )
    .unwrap();
    let SinkConfig::Syslog(s) = &c.sink else {
        panic!("{:?}", c.sink)
    };
    let o = s.options().unwrap();
    assert_eq!(
        o.transport,
        SyslogTransport::Relp("127.0.0.1:2514".parse().unwrap())
    );
    assert_eq!(o.relp_window, 32);
    assert_eq!(c.sink.describe_each(), vec!["syslog relp 127.0.0.1:2514"]);
    assert_eq!(
        SyslogSinkConfig::default().options().unwrap().relp_window,
        128
    );
    // A window the sink refuses is an error naming it.
    let bad = LogConfig::from_toml_str(
        "[sink]\ntype = \"syslog\"\ntransport = \"relp\"\nrelp_window = 0\n",
    )
    .unwrap();
    let e = bad.sink.build().err().unwrap();
    assert!(e.to_string().contains("relp_window"), "{e}");
    let e = LogConfig::from_toml_str("[sink]\ntype = \"syslog\"\ntransport = \"reliable\"\n")
        .unwrap_err();
    assert!(e.to_string().contains("relp"), "{e}");
}

/// A bad value in every section is reported with its key path and its
/// exact line and column, on the first line of the message.
#[test]
fn a_bad_value_in_each_section_names_its_key_path_line_and_column() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "ring",
            "[ring]\ncapacity = 1024\nburst = \"many\"\n",
            "config line 3, column 9: [ring] burst: invalid type: string \"many\", expected usize",
        ),
        (
            "ring.degrade",
            "[ring]\nbackpressure = \"degrade\"\n[ring.degrade]\nlow_watermark_pct = 50\nhigh_watermark_pct = true\n",
            "config line 5, column 22: [ring.degrade] high_watermark_pct: invalid type: boolean `true`",
        ),
        (
            "ring.priorities",
            "[ring.priorities]\n  aclDrop = 300\n",
            "config line 2, column 13: [ring.priorities] aclDrop: invalid value: integer `300`, expected u8",
        ),
        (
            "format",
            "[format]\ntype = \"txt\"\n",
            "config line 2, column 8: [format] type: unknown variant `txt`",
        ),
        (
            "format.syslog",
            "[format]\ntype = \"rfc5424\"\n[format.syslog]\nfacility = \"kitchen\"\n",
            "config line 4, column 12: [format.syslog] facility: ",
        ),
        (
            "format.bytes_fields",
            "[format.bytes_fields]\nqname = \"octal\"\n",
            "config line 2, column 9: [format.bytes_fields] qname: unknown variant `octal`",
        ),
        (
            "sink",
            "[ring]\ncapacity = 1024\n\n[sink]\ntype = \"file\"\npath = \"a.log\"\n  keep_files = \"ten\"\n",
            "config line 7, column 3: [sink] keep_files: invalid type: string \"ten\", expected usize",
        ),
        (
            "sink type",
            "[format]\ntype = \"json\"\n\n\n\n[sink]\n        type = \"kafak\"\n",
            "config line 7, column 9: [sink] type: unknown variant `kafak`, expected one of `file`",
        ),
        (
            "[[sink]] address",
            "[[sink]]\ntype = \"file\"\npath = \"a.log\"\n[[sink]]\ntype = \"ipfix\"\naddress = \"10.1:4739\"\n[format]\ntype = \"ipfix\"\n",
            "config line 6, column 1: [[sink]] #2 address = \"10.1:4739\": \"10.1\" is not an IPv4 address",
        ),
        (
            "schemas",
            "[schemas]\nnat = \"yes\"\n",
            "config line 2, column 7: [schemas] nat: invalid type: string \"yes\", expected a boolean",
        ),
        (
            "consumers",
            "[consumers]\ncpus = [1, \"two\"]\n",
            "config line 2, column 12: [consumers] cpus: invalid type: string \"two\", expected usize",
        ),
        (
            "metrics",
            "[metrics]\nprometheus_listen = \"localhost\"\n",
            "config line 2, column 21: [metrics] prometheus_listen: invalid socket address syntax",
        ),
        (
            "top level",
            "[ring]\ncapacity = 1024\n[rign]\nburst = 3\n",
            "config line 3, column 2: rign: unknown field `rign`",
        ),
    ];
    for (section, text, head) in cases {
        let m = match LogConfig::from_toml_str(text) {
            Err(ConfigError::Parse(m)) => m,
            other => panic!("{section}: {:?}", other.map(|_| ())),
        };
        let first = m.lines().next().unwrap_or("");
        assert!(first.starts_with(head), "{section}: {m}");
    }
}

/// The place is the key's even when the format is checked against the
/// sink after deserializing (a sink rule, owned by the sink), and a
/// syntax error has its own place.
#[test]
fn a_sink_rule_and_a_syntax_error_point_at_their_place() {
    let m = parse_err("[format]\ntype = \"binary\"\n[sink]\n  type = \"syslog\"\n");
    assert!(
        m.starts_with(
            "config line 4, column 3: [sink] type = \"syslog\" with [format] type = \"binary\": \
             the syslog sink sends one message per line"
        ),
        "{m}"
    );
    assert!(m.ends_with("4 |   type = \"syslog\"\n  |   ^^^^"), "{m}");
    let m = parse_err("[ring]\ncapacity = = 3\n");
    assert!(m.starts_with("config line 2, column 12: "), "{m}");
}

#[test]
fn an_empty_path_or_dir_is_an_error_at_its_key() {
    for (table, key, says) in [
        (
            "type = \"file\"\npath = \"\"",
            "path",
            "`path` is empty: name the file",
        ),
        (
            "type = \"mmap\"\ndir = \"\"",
            "dir",
            "`dir` is empty: name the directory",
        ),
        (
            "type = \"archive\"\ndir = \"\"",
            "dir",
            "`dir` is empty: name the directory",
        ),
    ] {
        let text = format!("[format]\ntype = \"binary\"\n\n[sink]\n{table}\n");
        let m = match LogConfig::from_toml_str(&text) {
            Err(ConfigError::Parse(m)) => m,
            other => panic!("{text}: {other:?}"),
        };
        // At the key's own line (the table's second line).
        let caret = "^".repeat(key.len());
        assert_eq!(
            m,
            format!("config line 6, column 1: [sink] {says}\n  |\n6 | {key} = \"\"\n  | {caret}"),
            "{key}"
        );
    }
}

/// `[format.ipfix]` values the IPFIX exporter cannot use are refused when
/// the configuration is loaded, at their line.
#[test]
fn bad_ipfix_settings_are_refused_at_load_naming_the_key_and_line() {
    for (setting, why) in [
        ("mtu = 10", "[format.ipfix] mtu = 10: at least 256 bytes"),
        (
            "enterprise_number = 0",
            "[format.ipfix] enterprise_number = 0 is reserved",
        ),
    ] {
        let text = format!("[format]\ntype = \"ipfix\"\n[format.ipfix]\n{setting}\n");
        let e = LogConfig::from_toml_str(&text).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("bad config: config line 4, column 1: {why}")),
            "{e}"
        );
    }
    LogConfig::from_toml_str(
        "[format]\ntype = \"ipfix\"\n[format.ipfix]\nmtu = 256\nenterprise_number = 1\n",
    )
    .unwrap();
}
