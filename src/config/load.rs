//! Load-time checks of settings that do not go together, each at its
//! key's line and column.

use super::*;

/// A `[sink]` / `[[sink]]` error about one key (unknown, or a bad value:
/// an unknown variant, a wrong type, a value out of range), which toml
/// reports at the table's header (the sink tables go through
/// `toml::Value`, which keeps no positions), rewritten to point at the
/// key's own line and column like every other key error; in a nested
/// table (`[sink.x]`, `x = { ... }`, `x.y = ...`) at the innermost key.
/// `None` for other errors.
///
/// The key is found by deserializing the failing table again from the
/// parsed document, which keeps every key's and value's place
/// ([`sink_error_at`]); an error that names no place there falls back to
/// the first key named in backquotes.
pub(super) fn point_at_sink_key(text: &str, msg: &str) -> Option<String> {
    // "[sink]: unknown field `bogus`, ..." or "[sink]: `keep_files` = 0 ...".
    let detail = msg
        .lines()
        .find(|l| l.starts_with("[sink]") || l.starts_with("[[sink]]"))?;
    let (label, _) = detail.split_once(": ")?;
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let table = match doc.get("sink")? {
        toml_edit::Item::Table(t) if label == "[sink]" => t,
        toml_edit::Item::ArrayOfTables(a) => {
            let n: usize = label.strip_prefix("[[sink]] #")?.parse().ok()?;
            a.get(n.checked_sub(1)?)?
        }
        _ => return None,
    };
    let (span, detail) = match sink_error_at(table) {
        Some((span, Some(why))) => (span, format!("{label}: {why}")),
        Some((span, None)) => (span, detail.to_string()),
        None => {
            let key = detail.split('`').nth(1)?;
            (table.key(key)?.span()?, detail.to_string())
        }
    };
    let (line, col) = line_col(text, span.start);
    let src = text.lines().nth(line - 1).unwrap_or("");
    let width = line.to_string().len();
    let pad = " ".repeat(width);
    let marks = "^".repeat(span.len().max(1));
    Some(format!(
        "TOML parse error at line {line}, column {col}\n{pad} |\n{line} | {src}\n{pad} | {}{marks}\n{detail}",
        " ".repeat(col - 1)
    ))
}

/// Where the first error of one sink table is: the span of the key it
/// is about, and the error's own message when it came from deserializing
/// the table's settings again here (`None`: toml's message stands, e.g.
/// for a missing or unknown `type`). `None` when no key can be named.
///
/// The table, without its `type`, is deserialized into that type's
/// settings from the parsed document's items, which keep their places
/// (unlike `toml::Value`, which the tagged sink tables go through), so the
/// error's span is the bad value's (or the unknown key's); the key whose
/// value holds that span is the one to point at.
pub(super) fn sink_error_at(
    table: &toml_edit::Table,
) -> Option<(std::ops::Range<usize>, Option<String>)> {
    let (type_key, kind) = table.get_key_value("type")?;
    let type_span = type_key.span()?;
    let Some(kind) = kind.as_str() else {
        return Some((type_span, None));
    };
    let mut rest = table.clone();
    rest.remove("type");
    let rest = toml_edit::Item::Table(rest).into_value().ok()?;
    match settings_error(kind, rest) {
        // Unknown type (or one this build lacks): toml's message names it.
        None => Some((type_span, None)),
        Some(None) => None,
        Some(Some(e)) => {
            let at = e.span()?;
            let key = key_at(table, at.start)?;
            Some((key, Some(e.message().trim_end().to_string())))
        }
    }
}

/// The span of the innermost key of `table` (through nested tables,
/// inline tables and dotted keys) whose key or value covers byte `pos`.
pub(super) fn key_at(
    table: &dyn toml_edit::TableLike,
    pos: usize,
) -> Option<std::ops::Range<usize>> {
    for (name, _) in table.iter() {
        let Some((key, item)) = table.get_key_value(name) else {
            continue;
        };
        if let Some(inner) = item.as_table_like().and_then(|t| key_at(t, pos)) {
            return Some(inner);
        }
        let covers = |s: Option<std::ops::Range<usize>>| s.is_some_and(|s| s.contains(&pos));
        if covers(key.span()) || covers(item.span()) {
            return key.span();
        }
    }
    None
}

/// The `[format]` keys [`check_format_keys`] looks at, with their places
/// in the text; every other key is ignored here (the real parse checks
/// them).
#[derive(Deserialize)]
pub(super) struct FormatKeys {
    format: Option<FormatKeysTable>,
}

#[derive(Deserialize)]
pub(super) struct FormatKeysTable {
    #[serde(rename = "type")]
    kind: Option<String>,
    template: Option<toml::Spanned<toml::Value>>,
    templates: Option<toml::Spanned<toml::Value>>,
}

/// 1-based line and column of byte `at` in `text`.
pub(super) fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = text.get(..at).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

/// A `template` / `templates` in `[format]` with a `type` other than
/// `text` is [`ConfigError::Parse`] naming the key, the type and the line.
pub(super) fn check_format_keys(text: &str) -> Result<(), ConfigError> {
    let Ok(FormatKeys { format: Some(f) }) = toml::from_str::<FormatKeys>(text) else {
        return Ok(());
    };
    let kind = f.kind.as_deref().unwrap_or("text");
    if kind == "text" {
        return Ok(());
    }
    for (key, v) in [("template", &f.template), ("templates", &f.templates)] {
        if let Some(v) = v {
            let (line, col) = line_col(text, v.span().start);
            return Err(ConfigError::Parse(format!(
                "config error at line {line}, column {col}: [format] `{key}` applies only to type = \"text\", \
                 but type = \"{kind}\" would ignore it (remove `{key}` or set type = \"text\")"
            )));
        }
    }
    Ok(())
}

/// A `config error at line L, column C` for the key `key` of `table` (a
/// toml_edit table of `text`), with `why`: valid TOML whose settings do
/// not go together.
pub(super) fn key_error(
    text: &str,
    table: &toml_edit::Table,
    key: &str,
    why: String,
) -> ConfigError {
    let at = table.key(key).and_then(|k| k.span()).map_or(0, |r| r.start);
    let (line, col) = line_col(text, at);
    ConfigError::Parse(format!("config error at line {line}, column {col}: {why}"))
}

/// Settings that would cut a binary stream (`binary`, `ipfix`) where its
/// reader cannot resume, each [`ConfigError::Parse`] at its line: a file
/// sink that rotates (`max_size_bytes`, `rotate_interval_ms`) or reopens
/// on SIGHUP starts a new file mid-stream without the stream's header
/// (schemas, IPFIX templates), and an mmap sink splits IPFIX messages
/// (binary logs are fine there: every segment carries the schemas). Also
/// `publish_every = 0`, a `slot_bytes` other than 32, 64 or 128 and an
/// empty `template`.
pub(super) fn check_stream_keys(text: &str) -> Result<(), ConfigError> {
    let Ok(doc) = toml_edit::ImDocument::parse(text) else {
        return Ok(());
    };
    if let Some(ring) = doc.get("ring").and_then(toml_edit::Item::as_table) {
        if ring
            .get("publish_every")
            .and_then(toml_edit::Item::as_integer)
            == Some(0)
        {
            return Err(key_error(
                text,
                ring,
                "publish_every",
                "[ring] `publish_every` = 0: give 1 (publish every record) or more, or leave it out".into(),
            ));
        }
        if let Some(b) = ring.get("slot_bytes").and_then(toml_edit::Item::as_integer) {
            if !SLOT_SIZES.iter().any(|&s| s as i64 == b) {
                return Err(key_error(
                    text,
                    ring,
                    "slot_bytes",
                    format!("[ring] slot_bytes = {b}: must be 32, 64 or 128"),
                ));
            }
        }
    }
    let format = doc.get("format").and_then(toml_edit::Item::as_table);
    if let Some(f) = format {
        if f.get("template").and_then(toml_edit::Item::as_str) == Some("") {
            return Err(key_error(
                text,
                f,
                "template",
                "[format] `template` is empty: every record would be an empty line".into(),
            ));
        }
    }
    let kind = format
        .and_then(|f| f.get("type"))
        .and_then(toml_edit::Item::as_str)
        .unwrap_or("text");
    // Each sink table with the name an error calls it by: `[sink]`, or
    // `[[sink]] #N` (1-based) when the config lists several.
    let tables: Vec<(String, &toml_edit::Table)> = match doc.get("sink") {
        Some(toml_edit::Item::Table(t)) => vec![("[sink]".into(), t)],
        Some(toml_edit::Item::ArrayOfTables(a)) => a
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("[[sink]] #{}", i + 1), t))
            .collect(),
        _ => Vec::new(),
    };
    check_framing(text, kind, &tables)?;
    check_roles(text, &tables)?;
    check_addresses(text, &tables)?;
    if !matches!(kind, "binary" | "ipfix") {
        return Ok(());
    }
    for (label, t) in tables {
        let sink = t
            .get("type")
            .and_then(toml_edit::Item::as_str)
            .unwrap_or("");
        if sink != "file" {
            continue;
        }
        for key in ["max_size_bytes", "rotate_interval_ms", "reopen_on_sighup"] {
            let set = match t.get(key) {
                Some(v) if key == "reopen_on_sighup" => v.as_bool() == Some(true),
                Some(_) => true,
                None => false,
            };
            if set {
                return Err(key_error(
                    text,
                    t,
                    key,
                    format!(
                        "{label} `{key}` with [format] type = \"{kind}\": a new file would start \
                         mid-stream without the stream's header, and could not be decoded; rotate \
                         line formats only, or write binary logs to an mmap sink (every segment \
                         carries the schemas)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A format whose framing a sink cannot carry, [`ConfigError::Parse`] at
/// the sink's `type` line, saying which combinations work:
/// - `syslog` and `kafka` send one message per line (`\n`): a `binary` or
///   `ipfix` stream is not lines and would be cut at every 0x0A byte (and,
///   over TCP syslog, framed per piece), so they take the line formats
///   only (`text`, `json`, `csv`, `rfc5424`, `rfc3164`);
/// - `ipfix` (the exporter) re-packs IPFIX records into messages: it takes
///   `[format] type = "ipfix"` only;
/// - `archive` stores the binary stream's raw records: `binary` only;
/// - `mmap` splits its segments where IPFIX messages cannot be cut.
///
/// File sinks take every format; mmap sinks every one but `ipfix` (see
/// [`check_stream_keys`]).
pub(super) fn check_framing(
    text: &str,
    kind: &str,
    tables: &[(String, &toml_edit::Table)],
) -> Result<(), ConfigError> {
    for (label, t) in tables {
        let sink = t
            .get("type")
            .and_then(toml_edit::Item::as_str)
            .unwrap_or("");
        if let Some(why) = framing_why(label, sink, kind) {
            return Err(key_error(text, t, "type", why));
        }
    }
    Ok(())
}

/// A first sink table with `role = "failover"`, [`ConfigError::Parse`] at
/// its `role`: a failover sink is the secondary of the sink listed before
/// it, and the first (or only) sink has none. Checked here, at load, so
/// the error has its line and nothing is opened.
pub(super) fn check_roles(
    text: &str,
    tables: &[(String, &toml_edit::Table)],
) -> Result<(), ConfigError> {
    let Some((label, t)) = tables.first() else {
        return Ok(());
    };
    if t.get("role").and_then(toml_edit::Item::as_str) != Some("failover") {
        return Ok(());
    }
    let why = if tables.len() == 1 && label == "[sink]" {
        format!(
            "{label} role = \"failover\": a failover sink needs a sink before it, the one it \
             takes over from, and a single [sink] has none; remove `role`, or list the primary \
             first as [[sink]] tables"
        )
    } else {
        format!(
            "{label} role = \"failover\" needs a sink before it, the one it takes over from; \
             list the primary [[sink]] first, or remove `role`"
        )
    };
    Err(key_error(text, t, "role", why))
}

/// Network addresses a sink would only reject when it opens (syslog, the
/// IPFIX exporter) or never (a Kafka broker list, which librdkafka retries
/// forever), [`ConfigError::Parse`] at their line:
/// - syslog over `udp`, `tcp` or `relp`: `address` an IP address and port
///   (`127.0.0.1:514`, `[::1]:514`);
/// - `ipfix`: `address` a `host:port` (the host may be a name, resolved
///   when the sink opens);
/// - `kafka`: `brokers` a comma-separated list of `host[:port]`.
pub(super) fn check_addresses(
    text: &str,
    tables: &[(String, &toml_edit::Table)],
) -> Result<(), ConfigError> {
    for (label, t) in tables {
        let get = |k: &str| t.get(k).and_then(toml_edit::Item::as_str);
        let (key, why) = match get("type").unwrap_or("") {
            "syslog" if matches!(get("transport").unwrap_or("udp"), "udp" | "tcp" | "relp") => {
                let Some(a) = get("address") else { continue };
                match a.parse::<std::net::SocketAddr>() {
                    Ok(_) => continue,
                    Err(_) => (
                        "address",
                        format!(
                            "{label} address = {a:?}: not an IP address and port{} (e.g. \
                             \"127.0.0.1:514\", \"[::1]:514\"); a local socket takes \
                             transport = \"unix_dgram\" or \"unix_stream\"",
                            a.rsplit_once(':')
                                .and_then(|(h, _)| dotted_why(h))
                                .map_or(String::new(), |w| format!(": {w}")),
                        ),
                    ),
                }
            }
            "ipfix" => {
                let Some(a) = get("address") else { continue };
                match host_port_why(a, true) {
                    None => continue,
                    Some(w) => (
                        "address",
                        format!("{label} address = {a:?}: {w} (e.g. \"192.0.2.10:4739\")"),
                    ),
                }
            }
            "kafka" => {
                let Some(b) = get("brokers") else { continue };
                match b.split(',').find_map(|h| host_port_why(h.trim(), false)) {
                    None => continue,
                    Some(w) => (
                        "brokers",
                        format!(
                            "{label} brokers = {b:?}: {w} (a comma-separated list of \
                             host[:port], e.g. \"127.0.0.1:9092,kafka-2:9092\")"
                        ),
                    ),
                }
            }
            _ => continue,
        };
        return Err(key_error(text, t, key, why));
    }
    Ok(())
}

/// Why `host`, made only of digits and dots, is not an IPv4 address
/// (`300.1.1.1`, `10.1`, `12345`); `None` for an IPv4 address or a host
/// with other characters. A resolver would take such a host as a name
/// (or, `getaddrinfo` after `inet_aton`, `10.1` as 10.0.0.1), so it is
/// refused instead.
pub(super) fn dotted_why(host: &str) -> Option<String> {
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
pub(super) fn host_port_why(a: &str, port_needed: bool) -> Option<String> {
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
