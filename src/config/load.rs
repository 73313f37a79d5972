//! Reading a configuration: the TOML document is parsed once
//! ([`toml_edit::ImDocument`], which keeps every key's and value's place),
//! deserialized from that parse, and checked on it for settings that do
//! not go together. Every error names its key and points at the key's (or
//! value's) line and column:
//!
//! ```text
//! config line 2, column 1: [ring] capacityy: unknown field `capacityy`, expected one of ...
//!   |
//! 2 | capacityy = 1024
//!   | ^^^^^^^^^
//! ```

use std::ops::Range;

use serde::Deserialize;
use toml_edit::{ImDocument, Item, Table, TableLike};

use super::sink::{settings_check, settings_error};
use super::{ConfigError, SLOT_SIZES};

/// The parsed document.
pub(super) type Doc<'a> = ImDocument<&'a str>;

/// Parses `text` into `T` with one TOML parse, then applies the load-time
/// checks ([`check`]) to the same parse.
pub(super) fn parse<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, ConfigError> {
    let doc = ImDocument::parse(text).map_err(|e| match e.span() {
        Some(span) => at(text, span, e.message().trim_end()),
        None => ConfigError::Parse(e.message().trim_end().to_string()),
    })?;
    // The deserializer takes the parsed document by value; cloning it
    // copies the tree, it does not parse the text again.
    let v = T::deserialize(toml_edit::de::Deserializer::from(doc.clone()))
        .map_err(|e| serde_error(text, &doc, &e))?;
    check(text, &doc)?;
    Ok(v)
}

/// [`ConfigError::Parse`] at byte range `span` of `text`: `config line
/// L, column C: what`, then the line with the range marked.
pub(super) fn at(text: &str, span: Range<usize>, what: &str) -> ConfigError {
    let (line, col) = line_col(text, span.start);
    let src = text.lines().nth(line - 1).unwrap_or("");
    let width = line.to_string().len();
    let pad = " ".repeat(width);
    let room = (src.len() + 1).saturating_sub(col).max(1);
    let marks = "^".repeat(span.len().clamp(1, room));
    ConfigError::Parse(format!(
        "config line {line}, column {col}: {what}\n{pad} |\n{line} | {src}\n{pad} | {}{marks}",
        " ".repeat(col - 1)
    ))
}

/// 1-based line and column of byte `at` in `text`.
pub(super) fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = text.get(..at).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

/// A deserialization error (unknown key, wrong type, bad value) at its
/// key, named by its path (`[ring] capacityy`, `[format.syslog] sd_id`).
/// A sink table's error comes from its tagged deserialization, which has
/// no places below the table: [`sink_error`] finds its key.
fn serde_error(text: &str, doc: &Doc<'_>, e: &toml_edit::de::Error) -> ConfigError {
    let msg = e.message().trim_end();
    if let Some(err) = sink_error(text, doc, msg) {
        return err;
    }
    match e.span() {
        Some(span) => match path_at(doc.as_table(), span.start) {
            Some(path) => at(text, span, &format!("{path}: {msg}")),
            None => at(text, span, msg),
        },
        None => ConfigError::Parse(msg.to_string()),
    }
}

/// One step of a key path: a key, or the element of an array of tables.
enum Step {
    Key(String),
    Index(usize),
}

/// The path of the innermost key of `table` whose key or value covers
/// byte `pos`, as an error names it: `[ring] capacity`, `[ring.degrade]
/// min_priority`, `[[sink]] #2 transport`, `[[sink]] #2 properties.acks`,
/// `schemas` (a top-level key).
fn path_at(table: &dyn TableLike, pos: usize) -> Option<String> {
    let steps = steps_at(table, pos)?;
    let (key, tables) = steps.split_last()?;
    let Step::Key(key) = key else { return None };
    let mut label = String::new();
    let mut dotted: Vec<&str> = Vec::new();
    for s in tables {
        match s {
            Step::Key(k) => dotted.push(k),
            Step::Index(i) => {
                label = format!("{label}[[{}]] #{} ", dotted.join("."), i + 1);
                dotted.clear();
            }
        }
    }
    // Keys below an array element are dotted onto the key
    // (`[[sink]] #2 properties.retries`), below a table follow its header
    // (`[sink.properties] retries`).
    Some(match (label.is_empty(), dotted.is_empty()) {
        (_, true) => format!("{label}{key}"),
        (true, false) => format!("[{}] {key}", dotted.join(".")),
        (false, false) => format!("{label}{}.{key}", dotted.join(".")),
    })
}

fn steps_at(table: &dyn TableLike, pos: usize) -> Option<Vec<Step>> {
    let covers = |s: Option<Range<usize>>| s.is_some_and(|s| s.contains(&pos));
    for (name, item) in table.iter() {
        let key = table.key(name);
        let inner = match item {
            Item::ArrayOfTables(a) => a.iter().enumerate().find_map(|(i, t)| {
                let mut v = steps_at(t, pos)?;
                v.insert(0, Step::Index(i));
                Some(v)
            }),
            _ => item.as_table_like().and_then(|t| steps_at(t, pos)),
        };
        if let Some(mut v) = inner {
            v.insert(0, Step::Key(name.to_string()));
            return Some(v);
        }
        if covers(key.and_then(|k| k.span())) || covers(item.span()) {
            return Some(vec![Step::Key(name.to_string())]);
        }
    }
    None
}

/// A `[sink]` / `[[sink]]` error about one key (unknown, or a bad value:
/// an unknown variant, a wrong type, a value out of range), which the
/// tagged sink tables report at the table's header (they go through
/// `toml::Value`, which keeps no places), at the key's own line and
/// column; in a nested table (`[sink.x]`, `x = { ... }`, `x.y = ...`) at
/// the innermost key. `None` for other errors.
///
/// The key is found by deserializing the failing table's settings from
/// the parsed document's items, which keep their places
/// ([`sink_error_at`]); an error that names no place there falls back to
/// the first key named in backquotes.
fn sink_error(text: &str, doc: &Doc<'_>, msg: &str) -> Option<ConfigError> {
    // "[sink]: unknown field `bogus`, ..." or "[sink]: `keep_files` = 0 ...".
    let detail = msg
        .lines()
        .find(|l| l.starts_with("[sink]") || l.starts_with("[[sink]]"))?;
    let (label, _) = detail.split_once(": ")?;
    let table = match doc.get("sink")? {
        Item::Table(t) if label == "[sink]" => t,
        Item::ArrayOfTables(a) => {
            let n: usize = label.strip_prefix("[[sink]] #")?.parse().ok()?;
            a.get(n.checked_sub(1)?)?
        }
        _ => return None,
    };
    let why = detail[label.len() + 2..].to_string();
    let (span, why) = match sink_error_at(table) {
        Some((span, Some(own))) => (span, own),
        Some((span, None)) => (span, why),
        None => {
            let key = detail.split('`').nth(1)?;
            (table.key(key)?.span()?, why)
        }
    };
    let why = with_section_hint(table, why);
    // Named by its path: `[sink] transport`, `[[sink]] #3 type`,
    // `[sink.properties] linger.ms`.
    let detail = match path_at(doc.as_table(), span.start) {
        Some(path) => format!("{path}: {why}"),
        None => format!("{label}: {why}"),
    };
    Some(at(text, span, &detail))
}

/// `why` with a hint when it is an unknown key of the sink table that is
/// a `[ring]` setting (`sink_retry_timeout_ms`, `shutdown_timeout_ms`
/// and the other consumer settings live there, for every sink at once).
fn with_section_hint(table: &Table, why: String) -> String {
    let Some(key) = why
        .strip_prefix("unknown field `")
        .and_then(|r| r.split('`').next())
    else {
        return why;
    };
    // A `[ring]` table of this key alone: a ring setting if it is not
    // unknown there.
    let mut ring = Table::new();
    if let Some(item) = table.get(key) {
        ring.insert(key, item.clone());
    }
    let known = match Item::Table(ring).into_value() {
        Ok(v) => {
            match super::RingConfig::deserialize(serde::de::IntoDeserializer::into_deserializer(v))
            {
                Ok(_) => true,
                Err(e) => !e.to_string().contains("unknown field"),
            }
        }
        Err(_) => false,
    };
    if known {
        format!("{why} (`{key}` is a [ring] setting, for every sink: put it under [ring])")
    } else {
        why
    }
}

/// Where the first error of one sink table is: the span of the key it
/// is about, and the error's own message when it came from deserializing
/// the table's settings again here (`None`: the message stands, e.g. for
/// a missing or unknown `type`). `None` when no key can be named.
///
/// The table, without its `type`, is deserialized into that type's
/// settings from the parsed document's items, which keep their places,
/// so the error's span is the bad value's (or the unknown key's); the key
/// whose value holds that span is the one to point at.
fn sink_error_at(table: &Table) -> Option<(Range<usize>, Option<String>)> {
    let (type_key, kind) = table.get_key_value("type")?;
    let type_span = type_key.span()?;
    let Some(kind) = kind.as_str() else {
        return Some((type_span, None));
    };
    let mut rest = table.clone();
    rest.remove("type");
    let rest = Item::Table(rest).into_value().ok()?;
    match settings_error(kind, rest) {
        // Unknown type (or one this build lacks): the message names it.
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
fn key_at(table: &dyn TableLike, pos: usize) -> Option<Range<usize>> {
    for (name, _) in table.iter() {
        let Some((key, item)) = table.get_key_value(name) else {
            continue;
        };
        if let Some(inner) = item.as_table_like().and_then(|t| key_at(t, pos)) {
            return Some(inner);
        }
        let covers = |s: Option<Range<usize>>| s.is_some_and(|s| s.contains(&pos));
        if covers(key.span()) || covers(item.span()) {
            return key.span();
        }
    }
    None
}

/// [`ConfigError::Parse`] at the key `key` of `table` (the table's header
/// if the key is not there) with `why`: valid TOML whose settings do not
/// go together.
fn key_error(text: &str, table: &Table, key: &str, why: &str) -> ConfigError {
    let span = table
        .key(key)
        .and_then(|k| k.span())
        .or_else(|| table.span())
        .unwrap_or(0..0);
    at(text, span, why)
}

/// The load-time checks, on the parsed document: `[ring]` a `capacity`
/// that is not a power of two from 1 to
/// [`MAX_LOGGER_RING_CAPACITY`](dplog_core::MAX_LOGGER_RING_CAPACITY)
/// (refused here, before any sink is opened or file created),
/// `publish_every = 0` and a `slot_bytes` other than 32, 64 or 128;
/// `[format.ipfix]` an `mtu` below 256 or `enterprise_number = 0`; `[format]` an empty
/// `template`, or `template` / `[format.templates]` with a `type` other
/// than `text` (which would ignore them); each sink table's own rules
/// against the format ([`SinkSettings::check`]
/// (crate::sinks::config::SinkSettings::check): framing, addresses,
/// rotation of a binary stream); a first sink with `role = "failover"`.
fn check(text: &str, doc: &Doc<'_>) -> Result<(), ConfigError> {
    if let Some(ring) = doc.get("ring").and_then(Item::as_table) {
        if ring.get("publish_every").and_then(Item::as_integer) == Some(0) {
            return Err(key_error(
                text,
                ring,
                "publish_every",
                "[ring] `publish_every` = 0: give 1 (publish every record) or more, or leave it out",
            ));
        }
        if let Some(c) = ring.get("capacity").and_then(Item::as_integer) {
            let max = dplog_core::MAX_LOGGER_RING_CAPACITY as i64;
            if c <= 0 || c > max || c & (c - 1) != 0 {
                let why = if c > max {
                    "is above the limit of"
                } else {
                    "must be a power of two from 1 to"
                };
                return Err(key_error(
                    text,
                    ring,
                    "capacity",
                    &format!("[ring] capacity = {c} {why} {max} slots per ring"),
                ));
            }
        }
        if let Some(b) = ring.get("slot_bytes").and_then(Item::as_integer) {
            if !SLOT_SIZES.iter().any(|&s| s as i64 == b) {
                return Err(key_error(
                    text,
                    ring,
                    "slot_bytes",
                    &format!("[ring] slot_bytes = {b}: must be 32, 64 or 128"),
                ));
            }
        }
    }
    let format = doc.get("format").and_then(Item::as_table_like);
    let kind = format
        .and_then(|f| f.get("type"))
        .and_then(Item::as_str)
        .unwrap_or("text");
    if let Some(f) = format {
        check_format(text, f, kind)?;
    }
    check_sinks(text, doc, kind)
}

/// `[format]`: an empty `template`; `template` or `templates` with a
/// `type` other than `text`, at the value.
fn check_format(text: &str, f: &dyn TableLike, kind: &str) -> Result<(), ConfigError> {
    if f.get("template").and_then(Item::as_str) == Some("") {
        let span = f.key("template").and_then(|k| k.span()).unwrap_or(0..0);
        return Err(at(
            text,
            span,
            "[format] `template` is empty: every record would be an empty line",
        ));
    }
    if let Some(ip) = f.get("ipfix").and_then(Item::as_table_like) {
        let span = |k: &str| ip.key(k).and_then(|k| k.span()).unwrap_or(0..0);
        if let Some(m) = ip.get("mtu").and_then(Item::as_integer) {
            let min = crate::formatters::ipfix::MIN_MTU;
            if m < min as i64 {
                return Err(at(
                    text,
                    span("mtu"),
                    &format!(
                        "[format.ipfix] mtu = {m}: at least {min} bytes (a message holds a \
                         template record or a whole data record)"
                    ),
                ));
            }
        }
        if ip.get("enterprise_number").and_then(Item::as_integer) == Some(0) {
            return Err(at(
                text,
                span("enterprise_number"),
                "[format.ipfix] enterprise_number = 0 is reserved (IANA PEN registry): give your \
                 organisation's PEN, or leave it out for 32473 (the documentation PEN)",
            ));
        }
    }
    if kind == "text" {
        return Ok(());
    }
    for key in ["template", "templates"] {
        if let Some(v) = f.get(key) {
            let span = v
                .span()
                .or_else(|| f.key(key).and_then(|k| k.span()))
                .unwrap_or(0..0);
            return Err(at(
                text,
                span,
                &format!(
                    "[format] `{key}` applies only to type = \"text\", but type = \"{kind}\" \
                     would ignore it (remove `{key}` or set type = \"text\")"
                ),
            ));
        }
    }
    Ok(())
}

/// Each sink table's own rules ([`settings_check`]) at the key they are
/// about, then the set's: a first (or only) sink with `role =
/// "failover"` has no sink before it to take over from.
fn check_sinks(text: &str, doc: &Doc<'_>, kind: &str) -> Result<(), ConfigError> {
    // Each sink table with the name an error calls it by: `[sink]`, or
    // `[[sink]] #N` (1-based) when the config lists several.
    let tables: Vec<(String, &Table)> = match doc.get("sink") {
        Some(Item::Table(t)) => vec![("[sink]".into(), t)],
        Some(Item::ArrayOfTables(a)) => a
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("[[sink]] #{}", i + 1), t))
            .collect(),
        _ => Vec::new(),
    };
    for (label, t) in &tables {
        let Some(sink) = t.get("type").and_then(Item::as_str) else {
            continue;
        };
        let mut rest = (*t).clone();
        rest.remove("type");
        let Ok(rest) = Item::Table(rest).into_value() else {
            continue;
        };
        if let Some(Err(e)) = settings_check(sink, rest, kind) {
            return Err(key_error(text, t, e.key, &format!("{label} {}", e.why)));
        }
    }
    let Some((label, t)) = tables.first() else {
        return Ok(());
    };
    if t.get("role").and_then(Item::as_str) != Some("failover") {
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
    Err(key_error(text, t, "role", &why))
}
