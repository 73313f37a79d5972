//! Line-oriented output formats built as compiled templates: text (default
//! `name=value` layout or a user template), JSON lines, CSV and syslog
//! (RFC 5424 in VPP's NAT44 layout, RFC 3164).
//!
//! Each format is a [`Program`] per schema, assembled once from the schema
//! (or parsed from the user's template); formatting a record walks it.

use dplog_core::record::SCHEMA_NAT44_SESSION;
use dplog_core::schema::{FieldKind, Schema};

use crate::conv::Escape;
use crate::template::{Conv, Options, Program, TemplateError, IE_NAT_EVENT};

/// Syslog settings shared by RFC 5424 and RFC 3164.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields, default))]
pub struct SyslogOptions {
    /// HOSTNAME; `None` prints the NILVALUE `-` (RFC 5424) or `-` (RFC 3164).
    pub hostname: Option<String>,
    /// APP-NAME (RFC 5424) / TAG (RFC 3164). Default `NAT`, as VPP.
    pub app_name: String,
    /// PROCID; `None` prints `-`.
    pub procid: Option<String>,
    /// Facility 0..=23. Default 16 (local0), as VPP.
    pub facility: u8,
    /// Severity 0..=7. Default 6 (informational), as VPP.
    pub severity: u8,
    /// SD-ID of NAT44 session events. Default `nsess@32473`; VPP sends
    /// plain `nsess`.
    pub sd_id: String,
}

impl Default for SyslogOptions {
    fn default() -> Self {
        Self {
            hostname: None,
            app_name: "NAT".into(),
            procid: None,
            facility: 16,
            severity: 6,
            sd_id: "nsess@32473".into(),
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
        printusascii(&self.app_name, 48, "app_name", &[])?;
        if let Some(p) = &self.procid {
            printusascii(p, 128, "procid", &[])?;
        }
        printusascii(&self.sd_id, 32, "sd_id", &['=', ']', '"'])?;
        Ok(())
    }

    fn pri(&self) -> String {
        format!("<{}>", self.facility as u32 * 8 + self.severity as u32)
    }

    fn enterprise(&self) -> &str {
        self.sd_id.split_once('@').map_or("32473", |(_, e)| e)
    }
}

/// MSGIDs per natEvent: VPP's SADD/SDEL for sessions and APMADD/APMDEL for
/// port blocks; event names for the rest.
const MSGIDS: [(u32, &str); 7] = [
    (4, "SADD"),
    (5, "SDEL"),
    (16, "APMADD"),
    (17, "APMDEL"),
    (3, "ADDRESSES_EXHAUSTED"),
    (12, "PORTS_EXHAUSTED"),
    (13, "QUOTA_EXCEEDED"),
];

fn time_field(s: &Schema) -> Option<usize> {
    s.fields()
        .iter()
        .position(|f| matches!(f.kind, FieldKind::NsTimestamp | FieldKind::TscTimestamp))
}

fn event_field(s: &Schema) -> Option<usize> {
    s.fields()
        .iter()
        .position(|f| f.ie_id == IE_NAT_EVENT && f.kind.is_integer())
}

fn idx(s: &Schema, name: &str) -> usize {
    s.field(name).map(|(i, _)| i).unwrap_or(usize::MAX)
}

/// NAT44 counters printed only on deletes by the default text layout.
const DELETE_ONLY: [&str; 4] = [
    "initiatorPackets",
    "responderPackets",
    "initiatorOctets",
    "responderOctets",
];

fn e(m: String) -> TemplateError {
    TemplateError {
        column: 0,
        message: m,
    }
}

/// The default text layout: the first timestamp as RFC 3339 UTC with
/// microseconds, then ` name=value` for every field, then `\n`. For the
/// NAT44 session record the four counters appear only on deletes
/// (natEvent 5), as in [`crate::TextFormatter`].
pub fn text_default(s: &Schema, opts: Options) -> Result<Program, TemplateError> {
    let mut p = Program::new(s, opts);
    // TSC fields convert too (see `template`), calibrated or not.
    if let Some(t) = time_field(s) {
        p.field(s, t, Some(Conv::Rfc3339(6)), Escape::Text)
            .map_err(e)?;
    }
    let nat44 = s.id() == SCHEMA_NAT44_SESSION
        && s.field("natEvent").is_some()
        && DELETE_ONLY.iter().all(|n| s.field(n).is_some());
    let mut deferred = Vec::new();
    for (i, f) in s.fields().iter().enumerate() {
        if nat44 && DELETE_ONLY.contains(&&*f.name) {
            deferred.push(i);
            continue;
        }
        p.lit(format!(" {}=", f.name).as_bytes());
        p.field(s, i, None, Escape::Text).map_err(e)?;
    }
    if !deferred.is_empty() {
        let ev = idx(s, "natEvent");
        p.when(s, ev, 5, |p| {
            for i in deferred {
                p.lit(format!(" {}=", s.fields()[i].name).as_bytes());
                p.field(s, i, None, Escape::Text)?;
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
/// every field under its name; integers, enums and timestamps (ms since the
/// epoch) as numbers, booleans as `true`/`false`, addresses and byte strings
/// as escaped strings. For the NAT44 session record the four counters
/// appear only on deletes (natEvent 5), as in the text layout.
pub fn json(s: &Schema, opts: Options) -> Result<Program, TemplateError> {
    fn member(p: &mut Program, s: &Schema, i: usize, first: bool) -> Result<(), TemplateError> {
        let f = &s.fields()[i];
        let quoted = matches!(
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
        p.field(s, i, None, Escape::Json).map_err(e)?;
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
    let nat44 = s.id() == SCHEMA_NAT44_SESSION
        && s.field("natEvent").is_some()
        && DELETE_ONLY.iter().all(|n| s.field(n).is_some());
    let mut deferred = Vec::new();
    for (i, f) in s.fields().iter().enumerate() {
        if nat44 && DELETE_ONLY.contains(&&*f.name) {
            deferred.push(i);
            continue;
        }
        member(&mut p, s, i, first)?;
        first = false;
    }
    if !deferred.is_empty() {
        let ev = idx(s, "natEvent");
        p.when(s, ev, 5, |p| {
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
        p.field(s, i, None, Escape::Csv).map_err(e)?;
    }
    p.lit(b"\r\n");
    Ok(p)
}

fn syslog_msgid(p: &mut Program, s: &Schema) -> Result<(), TemplateError> {
    match event_field(s) {
        Some(ev) => p.field_mapped(s, ev, &MSGIDS, Escape::Text).map_err(e),
        None => {
            p.lit(s.name().as_bytes());
            Ok(())
        }
    }
}

/// VPP's NAT44 parameters: (PARAM-NAME, field or constant).
const VPP_PARAMS: [(&str, &str); 11] = [
    ("SVLAN", "ingressVRFID"),
    ("IATYP", "=IPv4"),
    ("ISADDR", "sourceIPv4Address"),
    ("ISPORT", "sourceTransportPort"),
    ("XATYP", "=IPv4"),
    ("XSADDR", "postNATSourceIPv4Address"),
    ("XSPORT", "postNAPTSourceTransportPort"),
    ("PROTO", "protocolIdentifier"),
    ("XDADDR", "destinationIPv4Address"),
    ("XDPORT", "destinationTransportPort"),
    ("SSUBIX", "=0"),
];

fn vpp_layout(s: &Schema) -> bool {
    s.id() == SCHEMA_NAT44_SESSION
        && VPP_PARAMS
            .iter()
            .all(|(_, f)| f.starts_with('=') || s.field(f).is_some())
}

/// Syslog RFC 5424 (section 6), one message per line:
///
/// ```text
/// <134>1 2026-01-01T00:00:00.123Z - NAT - SADD [nsess@32473 SVLAN="0" IATYP="IPv4" ISADDR="10.0.0.6" ISPORT="51234" XATYP="IPv4" XSADDR="198.51.100.3" XSPORT="1024" PROTO="6" XDADDR="203.0.113.5" XDPORT="443" SSUBIX="0"]
/// ```
///
/// NAT44 session records use VPP's NAT44 layout (MSGID SADD/SDEL, SD-ID
/// [`SyslogOptions::sd_id`]); other records use MSGID APMADD/APMDEL (port
/// blocks) or the event name, and SD-ID `<schema name>@<enterprise>` with
/// every field as a parameter. No space between PRI and VERSION; `"`, `\`
/// and `]` in values are escaped; unknown header fields are `-`.
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
    p.lit(sy.app_name.as_bytes());
    p.lit(b" ");
    p.lit(sy.procid.as_deref().unwrap_or("-").as_bytes());
    p.lit(b" ");
    syslog_msgid(&mut p, s)?;
    p.lit(b" [");
    if vpp_layout(s) {
        p.lit(sy.sd_id.as_bytes());
        for (name, src) in VPP_PARAMS {
            p.lit(format!(" {name}=\"").as_bytes());
            match src.strip_prefix('=') {
                Some(c) => p.lit(c.as_bytes()),
                None => p.field(s, idx(s, src), None, Escape::SdParam).map_err(e)?,
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
            p.field(s, i, None, Escape::SdParam).map_err(e)?;
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
/// (VPP names for NAT44 sessions, field names otherwise).
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
    let tag: String = sy.app_name.chars().take(32).collect();
    p.lit(tag.as_bytes());
    p.lit(b": ");
    syslog_msgid(&mut p, s)?;
    if vpp_layout(s) {
        for (name, src) in VPP_PARAMS {
            if src.starts_with('=') {
                continue;
            }
            p.lit(format!(" {name}=").as_bytes());
            p.field(s, idx(s, src), None, Escape::Text).map_err(e)?;
        }
    } else {
        for (i, f) in s.fields().iter().enumerate() {
            p.lit(format!(" {}=", f.name).as_bytes());
            p.field(s, i, None, Escape::Text).map_err(e)?;
        }
    }
    p.lit(b"\n");
    Ok(p)
}
