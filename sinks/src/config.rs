//! What every sink's settings provide to a configuration (feature
//! `config`): each sink folder has a `config` module with its
//! `type = "<sink>"` table (a serde struct with defaults and validation)
//! implementing [`SinkSettings`]; `dplog::config` dispatches a `[sink]` /
//! `[[sink]]` table on its `type` to one of them and builds sets with
//! [`build_set`]. Each sink also owns the rules about its own table
//! ([`SinkSettings::check`]: which formats it carries, its addresses), so
//! the configuration reports them at the key they are about.

pub use crate::route::config::{build_set, FAILOVER_PROBE};
pub use crate::settings::{SettingsError, SinkRole, SinkSettings};

/// The formats made of lines, which message-per-line sinks (syslog,
/// Kafka) carry.
pub const LINE_FORMATS: &str = "text, json, csv, rfc5424, rfc3164";

/// `type = "<sink>"` with a `binary` or `ipfix` format, for sinks that
/// send one message per line (syslog, Kafka): that stream is not lines and
/// would be cut at every 0x0A byte. `None` for the line formats.
pub fn lines_only(sink: &str, format: &str) -> Option<SettingsError> {
    if !matches!(format, "binary" | "ipfix") {
        return None;
    }
    Some(SettingsError::new(
        "type",
        format!(
            "type = \"{sink}\" with [format] type = \"{format}\": the {sink} sink sends one \
             message per line, and {an} {format} stream is not lines (it would be cut at every \
             0x0A byte); {sink} takes the line formats ({LINE_FORMATS}); send ipfix to a sink of \
             type = \"ipfix\" (an IPFIX exporter) or a file, binary to a file or mmap sink",
            an = if format == "ipfix" { "an" } else { "a" },
        ),
    ))
}

/// Why `host`, made only of digits and dots, is not an IPv4 address
/// (`300.1.1.1`, `10.1`, `12345`); `None` for an IPv4 address or a host
/// with other characters. A resolver would take such a host as a name
/// (or, `getaddrinfo` after `inet_aton`, `10.1` as 10.0.0.1), so it is
/// refused instead.
pub fn dotted_why(host: &str) -> Option<String> {
    if host.is_empty()
        || !host.bytes().all(|c| c.is_ascii_digit() || c == b'.')
        || host.parse::<std::net::Ipv4Addr>().is_ok()
    {
        return None;
    }
    Some(format!(
        "{host:?} is not an IPv4 address (four numbers 0 to 255 separated by dots, e.g. \
         192.0.2.10)"
    ))
}

/// Why `a` is not `host:port` (`[v6]:port` for IPv6), with the port
/// optional unless `port_needed`; `None` when it is. A host of digits and
/// dots must be an IPv4 address ([`dotted_why`]).
pub fn host_port_why(a: &str, port_needed: bool) -> Option<String> {
    if a.parse::<std::net::SocketAddr>().is_ok() {
        return None;
    }
    let (host, port) = match a.rsplit_once(':') {
        // An IPv6 address without brackets would be cut at its last ':'.
        Some((h, p)) if !h.contains(':') || h.starts_with('[') => (h, Some(p)),
        Some(_) if a.parse::<std::net::Ipv6Addr>().is_ok() => {
            return Some(format!("an IPv6 address takes brackets: \"[{a}]:port\""));
        }
        Some(_) => return Some("not host:port".into()),
        None => (a, None),
    };
    if host.is_empty() {
        return Some(format!("no host in {a:?}"));
    }
    if let Some(w) = dotted_why(host) {
        return Some(w);
    }
    if let Some(h) = host.strip_prefix('[') {
        if h.strip_suffix(']')
            .and_then(|v| v.parse::<std::net::Ipv6Addr>().ok())
            .is_none()
        {
            return Some(format!("{host:?} is not a bracketed IPv6 address"));
        }
    } else if !host
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_'))
    {
        return Some(format!("{host:?} is not a host name or address"));
    }
    match port {
        Some(p) if p.parse::<u16>().map_or(true, |p| p == 0) => {
            Some(format!("port {p:?} is not a number in 1..65535"))
        }
        None if port_needed => Some("no port".into()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::ArchiveSinkConfig;
    use crate::file::FileSinkConfig;
    use crate::ipfix::IpfixSinkConfig;
    use crate::mmap::MmapSinkConfig;
    use crate::syslog::SyslogSinkConfig;

    /// The key each sink's own rule names, or `None` when it takes the
    /// settings with the format.
    fn key(s: &dyn SinkSettings, format: &str) -> Option<&'static str> {
        s.check(format).err().map(|e| e.key)
    }

    #[test]
    fn each_sink_checks_the_formats_it_carries_and_names_the_key() {
        let file = FileSinkConfig::default();
        let rotating = FileSinkConfig {
            rotate_interval_ms: Some(1000),
            ..Default::default()
        };
        assert_eq!(key(&file, "binary"), None);
        assert_eq!(key(&rotating, "text"), None);
        assert_eq!(key(&rotating, "ipfix"), Some("rotate_interval_ms"));
        assert_eq!(key(&MmapSinkConfig::default(), "binary"), None);
        assert_eq!(key(&MmapSinkConfig::default(), "ipfix"), Some("type"));
        assert_eq!(key(&ArchiveSinkConfig::default(), "binary"), None);
        assert_eq!(key(&ArchiveSinkConfig::default(), "json"), Some("type"));
        assert_eq!(key(&IpfixSinkConfig::default(), "ipfix"), None);
        let e = IpfixSinkConfig::default().check("csv").unwrap_err();
        assert_eq!(e.key, "type");
        assert!(
            e.why
                .starts_with("type = \"ipfix\" with [format] type = \"csv\": "),
            "{e}"
        );
        assert_eq!(key(&SyslogSinkConfig::default(), "rfc5424"), None);
        assert_eq!(key(&SyslogSinkConfig::default(), "binary"), Some("type"));
    }

    #[test]
    fn addresses_are_checked_by_their_sink() {
        let syslog = SyslogSinkConfig {
            address: "300.1.1.1:514".into(),
            ..Default::default()
        };
        let e = syslog.check("text").unwrap_err();
        assert_eq!(e.key, "address");
        assert!(
            e.why.contains("\"300.1.1.1\" is not an IPv4 address"),
            "{e}"
        );
        let ipfix = IpfixSinkConfig {
            address: "collector".into(),
            ..Default::default()
        };
        let e = ipfix.check("ipfix").unwrap_err();
        assert_eq!(
            (e.key, e.why.as_str()),
            (
                "address",
                "address = \"collector\": no port (e.g. \"192.0.2.10:4739\")"
            )
        );
        assert_eq!(host_port_why("[::1]:4739", true), None);
        assert_eq!(
            host_port_why("::1", false).as_deref(),
            Some("an IPv6 address takes brackets: \"[::1]:port\"")
        );
    }

    #[cfg(feature = "kafka")]
    #[test]
    fn kafka_checks_lines_and_brokers() {
        let k = crate::kafka::KafkaSinkConfig {
            brokers: "127.0.0.1:9092, 10.1:9092".into(),
            ..Default::default()
        };
        assert_eq!(key(&k, "ipfix"), Some("type"));
        assert_eq!(key(&k, "json"), Some("brokers"));
        assert_eq!(key(&crate::kafka::KafkaSinkConfig::default(), "json"), None);
    }
}
