//! Line-oriented output formats built as compiled templates: text (default
//! `name=value` layout or a user template), JSON lines, CSV and syslog
//! (RFC 5424, RFC 3164; a schema may declare its own syslog layout, as the
//! NAT schema declares VPP's).
//!
//! Each format is a [`Program`] per schema, assembled once from the schema
//! (or parsed from the user's template); formatting a record walks it.
//! Enum fields print by name (a value without a name in decimal), unless
//! the schema asks for numbers ([`Schema::with_enum_numbers`], as the NAT
//! schemas do).

use dplog_core::schema::{FieldKind, Schema, SdParam};

use crate::conv::Escape;
use crate::template::{Conv, Options, Program, TemplateError};

/// Syslog settings shared by RFC 5424 and RFC 3164.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields, default))]
pub struct SyslogOptions {
    /// HOSTNAME; `None` prints the NILVALUE `-` (RFC 5424) or `-` (RFC 3164).
    pub hostname: Option<String>,
    /// APP-NAME (RFC 5424) / TAG (RFC 3164). Default: the schema's own
    /// (the NAT schemas declare `NAT`, as VPP), else `dplog`.
    pub app_name: Option<String>,
    /// PROCID; `None` prints `-`.
    pub procid: Option<String>,
    /// Facility 0..=23. Default 16 (local0), as VPP.
    pub facility: u8,
    /// Severity 0..=7. Default 6 (informational), as VPP.
    pub severity: u8,
    /// SD-ID of the schemas that declare a parameter layout (the NAT44
    /// session declares `nsess@32473`; VPP sends plain `nsess`). Default:
    /// the schema's. Its `@enterprise` part (default 32473) also names the
    /// SD-ID `<schema name>@<enterprise>` of every other schema.
    pub sd_id: Option<String>,
}

impl Default for SyslogOptions {
    fn default() -> Self {
        Self {
            hostname: None,
            app_name: None,
            procid: None,
            facility: 16,
            severity: 6,
            sd_id: None,
        }
    }
}

fn printusascii(s: &str, max: usize, what: &str, extra_forbidden: &[char]) -> Result<(), String> {
    if s.is_empty() || s.len() > max {
        return Err(format!("syslog {what} {s:?} must be 1..={max} characters"));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(33..=126).contains(&(*c as u32)) || extra_forbidden.contains(c))
    {
        return Err(format!("syslog {what} {s:?} contains {c:?}"));
    }
    Ok(())
}

impl SyslogOptions {
    /// Checks every header value against RFC 5424 section 6 lengths and
    /// character sets.
    pub fn validate(&self) -> Result<(), String> {
        if self.facility > 23 || self.severity > 7 {
            return Err(format!(
                "syslog facility {} / severity {} out of range (0..=23 / 0..=7)",
                self.facility, self.severity
            ));
        }
        if let Some(h) = &self.hostname {
            printusascii(h, 255, "hostname", &[])?;
        }
        if let Some(a) = &self.app_name {
            printusascii(a, 48, "app_name", &[])?;
        }
        if let Some(p) = &self.procid {
            printusascii(p, 128, "procid", &[])?;
        }
        if let Some(sd) = &self.sd_id {
            printusascii(sd, 32, "sd_id", &['=', ']', '"'])?;
        }
        Ok(())
    }

    fn pri(&self) -> String {
        format!("<{}>", self.facility as u32 * 8 + self.severity as u32)
    }

    fn enterprise(&self) -> &str {
        self.sd_id
            .as_deref()
            .and_then(|s| s.split_once('@'))
            .map_or("32473", |(_, e)| e)
    }

    /// APP-NAME / TAG for records of `s`.
    fn app_name<'a>(&'a self, s: &'a Schema) -> &'a str {
        self.app_name
            .as_deref()
            .or(s.meta().syslog.app_name.as_deref())
            .unwrap_or(DEFAULT_APP_NAME)
    }
}

/// APP-NAME when neither the options nor the schema give one.
pub const DEFAULT_APP_NAME: &str = "dplog";

/// The schema's event-time field ([`dplog_core::schema::SchemaMeta::event_time`]).
fn time_field(s: &Schema) -> Option<usize> {
    s.meta().event_time
}

/// The default layouts' converter for field `i`: an enum field's name
/// (unless the schema asks for numbers), else the kind's default.
fn conv_of(s: &Schema, i: usize) -> Option<Conv> {
    let f = &s.fields()[i];
    (f.kind == FieldKind::Enum && !f.enum_names.is_empty() && !s.meta().enum_numbers)
        .then_some(Conv::Name)
}

fn e(m: String) -> TemplateError {
    TemplateError {
        column: 0,
        message: m,
    }
}

/// The default text layout: the event time as RFC 3339 UTC with
/// microseconds, then ` name=value` for every field, then `\n`. Fields the
/// schema shows only conditionally ([`Schema::with_fields_only_when`], e.g.
/// the NAT44 session's counters on deletes) come last, when it holds.
pub fn text_default(s: &Schema, opts: Options) -> Result<Program, TemplateError> {
    let mut p = Program::new(s, opts);
    // TSC fields convert too (see `template`), calibrated or not.
    if let Some(t) = time_field(s) {
        p.field(s, t, Some(Conv::Rfc3339(6)), Escape::Text)
            .map_err(e)?;
    }
    let only_when = s.meta().only_when.as_ref();
    let mut deferred = Vec::new();
    for (i, f) in s.fields().iter().enumerate() {
        if only_when.is_some_and(|w| w.fields.contains(&i)) {
            deferred.push(i);
            continue;
        }
        p.lit(format!(" {}=", f.name).as_bytes());
        p.field(s, i, conv_of(s, i), Escape::Text).map_err(e)?;
    }
    if let Some(w) = only_when.filter(|_| !deferred.is_empty()) {
        p.when(s, w.field, w.equals as u32, |p| {
            for i in deferred {
                p.lit(format!(" {}=", s.fields()[i].name).as_bytes());
                p.field(s, i, conv_of(s, i), Escape::Text)?;
            }
            Ok(())
        })
        .map_err(e)?;
    }
    p.lit(b"\n");
    Ok(p)
}

/// A user template plus `\n`.
pub fn text_template(template: &str, s: &Schema, opts: Options) -> Result<Program, TemplateError> {
    let mut p = Program::compile(template, s, opts, Escape::Text)?;
    p.lit(b"\n");
    Ok(p)
}

/// One JSON object per line (RFC 8259, JSON Lines): first `"timestamp"`,
/// the record's time as an RFC 3339 UTC string with microseconds (when the
/// schema has a nanosecond timestamp, or a TSC one and a calibration), then
/// every field under its name; integers, enums asked as numbers and timestamps (ms since the
/// epoch) as numbers, booleans as `true`/`false`, addresses, byte strings
/// and enum names as escaped strings. Conditional fields as in [`text_default`].
pub fn json(s: &Schema, opts: Options) -> Result<Program, TemplateError> {
    fn member(p: &mut Program, s: &Schema, i: usize, first: bool) -> Result<(), TemplateError> {
        let f = &s.fields()[i];
        let conv = conv_of(s, i);
        let quoted = conv.is_some()
            || matches!(
                f.kind,
                FieldKind::Ipv4 | FieldKind::Ipv6 | FieldKind::Mac | FieldKind::Bytes
            );
        let mut key = Vec::new();
        if !first {
            key.push(b',');
        }
        key.push(b'"');
        crate::conv::push_escaped(&mut key, f.name.as_bytes(), Escape::Json);
        key.extend_from_slice(if quoted { b"\":\"" } else { b"\":" });
        p.lit(&key);
        p.field(s, i, conv, Escape::Json).map_err(e)?;
        if quoted {
            p.lit(b"\"");
        }
        Ok(())
    }
    let mut p = Program::new(s, opts);
    p.lit(b"{");
    let mut first = true;
    // TSC fields convert too (see `template`), calibrated or not.
    if let Some(t) = time_field(s) {
        p.lit(b"\"timestamp\":\"");
        p.field(s, t, Some(Conv::Rfc3339(6)), Escape::Json)
            .map_err(e)?;
        p.lit(b"\"");
        first = false;
    }
    let only_when = s.meta().only_when.as_ref();
    let mut deferred = Vec::new();
    for (i, _) in s.fields().iter().enumerate() {
        if only_when.is_some_and(|w| w.fields.contains(&i)) {
            deferred.push(i);
            continue;
        }
        member(&mut p, s, i, first)?;
        first = false;
    }
    if let Some(w) = only_when.filter(|_| !deferred.is_empty()) {
        p.when(s, w.field, w.equals as u32, |p| {
            for i in deferred {
                member(p, s, i, false).map_err(|e| e.message)?;
            }
            Ok(())
        })
        .map_err(e)?;
    }
    p.lit(b"}\n");
    Ok(p)
}

/// The CSV header line (RFC 4180): field names, comma-separated, CRLF.
pub fn csv_header(s: &Schema) -> Vec<u8> {
    let mut h = Vec::new();
    for (i, f) in s.fields().iter().enumerate() {
        if i > 0 {
            h.push(b',');
        }
        crate::conv::push_escaped(&mut h, f.name.as_bytes(), Escape::Csv);
    }
    h.extend_from_slice(b"\r\n");
    h
}

/// One CSV row (RFC 4180): the values in field order with their default
/// converters, byte strings quoted when needed, CRLF.
pub fn csv_row(s: &Schema, opts: Options) -> Result<Program, TemplateError> {
    let mut p = Program::new(s, opts);
    for i in 0..s.fields().len() {
        if i > 0 {
            p.lit(b",");
        }
        p.field(s, i, conv_of(s, i), Escape::Csv).map_err(e)?;
    }
    p.lit(b"\r\n");
    Ok(p)
}

/// MSGID: by the schema's declared field values (values not listed print
/// in decimal), else the schema name.
fn syslog_msgid(p: &mut Program, s: &Schema) -> Result<(), TemplateError> {
    match &s.meta().syslog.msgid_by {
        Some(by) => {
            let names: Vec<(u32, &str)> = by
                .values
                .iter()
                .map(|(v, n)| (*v as u32, n.as_ref()))
                .collect();
            p.field_mapped(s, by.field, &names, Escape::Text).map_err(e)
        }
        None => {
            p.lit(s.name().as_bytes());
            Ok(())
        }
    }
}

/// Syslog RFC 5424 (section 6), one message per line:
///
/// ```text
/// <134>1 2026-01-01T00:00:00.123Z - NAT - SADD [nsess@32473 SVLAN="0" IATYP="IPv4" ISADDR="10.0.0.6" ISPORT="51234" XATYP="IPv4" XSADDR="198.51.100.3" XSPORT="1024" PROTO="6" XDADDR="203.0.113.5" XDPORT="443" SSUBIX="0"]
/// ```
///
/// A schema that declares a syslog layout ([`dplog_core::schema::SyslogMeta`])
/// gets its MSGID, SD-ID ([`SyslogOptions::sd_id`] overrides it) and
/// parameters: the NAT44 session record is VPP's NAT44 layout above. Any
/// other record has MSGID its schema name (or the declared one), SD-ID
/// `<schema name>@<enterprise>` and every field as a parameter. No space
/// between PRI and VERSION; `"`, `\` and `]` in values are escaped; unknown
/// header fields are `-`.
pub fn rfc5424(s: &Schema, opts: Options, sy: &SyslogOptions) -> Result<Program, TemplateError> {
    sy.validate().map_err(e)?;
    let mut p = Program::new(s, opts);
    p.lit(sy.pri().as_bytes());
    p.lit(b"1 ");
    match time_field(s) {
        Some(t) => p
            .field(s, t, Some(Conv::Rfc3339(3)), Escape::SdParam)
            .map_err(e)?,
        _ => p.lit(b"-"),
    }
    p.lit(b" ");
    p.lit(sy.hostname.as_deref().unwrap_or("-").as_bytes());
    p.lit(b" ");
    p.lit(sy.app_name(s).as_bytes());
    p.lit(b" ");
    p.lit(sy.procid.as_deref().unwrap_or("-").as_bytes());
    p.lit(b" ");
    syslog_msgid(&mut p, s)?;
    p.lit(b" [");
    let meta = &s.meta().syslog;
    if !meta.params.is_empty() {
        let sd_id = sy.sd_id.as_deref().or(meta.sd_id.as_deref()).map_or_else(
            || format!("{}@{}", s.name(), sy.enterprise()),
            str::to_string,
        );
        p.lit(sd_id.as_bytes());
        for (name, src) in &meta.params {
            p.lit(format!(" {name}=\"").as_bytes());
            match src {
                SdParam::Const(c) => p.lit(c.as_bytes()),
                SdParam::Field(i) => p.field(s, *i, conv_of(s, *i), Escape::SdParam).map_err(e)?,
            }
            p.lit(b"\"");
        }
    } else {
        let sdname: String = s
            .name()
            .chars()
            .take(32 - 1 - sy.enterprise().len().min(20))
            .collect();
        p.lit(format!("{sdname}@{}", sy.enterprise()).as_bytes());
        for (i, f) in s.fields().iter().enumerate() {
            let pname: String = f.name.chars().take(32).collect();
            p.lit(format!(" {pname}=\"").as_bytes());
            p.field(s, i, conv_of(s, i), Escape::SdParam).map_err(e)?;
            p.lit(b"\"");
        }
    }
    p.lit(b"]\n");
    Ok(p)
}

/// Syslog RFC 3164 (BSD syslog), for legacy receivers, one per line:
///
/// ```text
/// <134>Jan  1 00:00:00 - NAT: SADD SVLAN=0 ISADDR=10.0.0.6 ISPORT=51234 XSADDR=198.51.100.3 XSPORT=1024 PROTO=6 XDADDR=203.0.113.5 XDPORT=443
/// ```
///
/// TIMESTAMP is UTC. The MSG is the RFC 5424 MSGID then `NAME=value` pairs
/// (the schema's declared parameters without the constant ones, e.g. VPP's
/// names for NAT44 sessions; field names otherwise).
pub fn rfc3164(s: &Schema, opts: Options, sy: &SyslogOptions) -> Result<Program, TemplateError> {
    sy.validate().map_err(e)?;
    let mut p = Program::new(s, opts);
    p.lit(sy.pri().as_bytes());
    match time_field(s) {
        Some(t) => p
            .field(s, t, Some(Conv::Rfc3164), Escape::Text)
            .map_err(e)?,
        _ => p.lit(b"Jan  1 00:00:00"),
    }
    p.lit(b" ");
    p.lit(sy.hostname.as_deref().unwrap_or("-").as_bytes());
    p.lit(b" ");
    let tag: String = sy.app_name(s).chars().take(32).collect();
    p.lit(tag.as_bytes());
    p.lit(b": ");
    syslog_msgid(&mut p, s)?;
    let meta = &s.meta().syslog;
    if !meta.params.is_empty() {
        for (name, src) in &meta.params {
            if let SdParam::Field(i) = src {
                p.lit(format!(" {name}=").as_bytes());
                p.field(s, *i, conv_of(s, *i), Escape::Text).map_err(e)?;
            }
        }
    } else {
        for (i, f) in s.fields().iter().enumerate() {
            p.lit(format!(" {}=", f.name).as_bytes());
            p.field(s, i, conv_of(s, i), Escape::Text).map_err(e)?;
        }
    }
    p.lit(b"\n");
    Ok(p)
}
