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

use dplog_core::schema::{FieldKind, Schema, SdParam, SyslogMeta};

use crate::conv::Escape;
use crate::template::{Conv, Options, Program, TemplateError};

/// Syslog settings shared by RFC 5424 and RFC 3164.
///
/// Every string is checked against RFC 5424 section 6 when the options are
/// read from a configuration (the error names the key) and again when a
/// format is compiled ([`SyslogOptions::validate`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields, default))]
pub struct SyslogOptions {
    /// HOSTNAME. Default: this host's name (`gethostname(2)`, as rsyslog
    /// and VPP's pipelines expect a real one; RFC 3164 receivers take a
    /// `-` for the TAG); `-` (RFC 5424) or `localhost` (RFC 3164) if it
    /// has none. 1..=255 printable US-ASCII characters.
    #[cfg_attr(feature = "serde", serde(deserialize_with = "de::hostname"))]
    pub hostname: Option<String>,
    /// APP-NAME (RFC 5424) / TAG (RFC 3164). Default: the schema's own
    /// (the NAT schemas declare `NAT`, as VPP), else `dplog`. 1..=48
    /// printable US-ASCII characters.
    #[cfg_attr(feature = "serde", serde(deserialize_with = "de::app_name"))]
    pub app_name: Option<String>,
    /// PROCID. Default: this process's id, as VPP sends its own. 1..=128
    /// printable US-ASCII characters.
    #[cfg_attr(feature = "serde", serde(deserialize_with = "de::procid"))]
    pub procid: Option<String>,
    /// Facility 0..=23. Default 16 (local0), as VPP.
    pub facility: u8,
    /// Severity 0..=7. Default 6 (informational), as VPP.
    pub severity: u8,
    /// SD-ID of the schemas that declare a parameter layout (the NAT44
    /// session declares `nsess@32473`). Default: the schema's. Its
    /// `@enterprise` part (default 32473) also names the SD-ID `<schema
    /// name>@<enterprise>` of every other schema. RFC 5424 section 6.3.2:
    /// `name@<private enterprise number>` (digits, optionally
    /// `.`-separated sub-identifiers), or one of the IANA-registered
    /// names ([`IANA_SD_IDS`]); anything else is refused.
    #[cfg_attr(feature = "serde", serde(deserialize_with = "de::sd_id"))]
    pub sd_id: Option<String>,
    /// Layout profile: `None` (default) or `"vpp"`, VPP's NAT syslog
    /// layout (VPP's `nat_syslog.c`, RFC 5424) for the record types that
    /// declare it ([`SyslogMeta::profiles`]): MSGID SADD/SDEL with SD-ID
    /// `nsess` for NAT44 sessions, APMADD/APMDEL with `napmap` for port
    /// blocks, VPP's parameter names, order and value formats, PRI `<134>`
    /// (local0, informational), APP-NAME `NAT`, TIMESTAMP with
    /// microseconds, no MSG. VPP's bare SD-IDs are not IANA-registered and
    /// are accepted only there.
    ///
    /// What dplog cannot take from VPP, and writes instead:
    /// - HOSTNAME: VPP sends its syslog source address (`set syslog sender
    ///   ... src A`, IPv4); dplog sends [`hostname`](Self::hostname), this
    ///   host's name by default: set it to the NAT's address to match.
    /// - PROCID: VPP sends its own process id; dplog the formatting
    ///   process's (the application, dplogd or dplog-cat) unless
    ///   [`procid`](Self::procid) is set.
    /// - TIMESTAMP: VPP stamps the time it sends the message; dplog the
    ///   record's event time (in the same format).
    /// - SSUBIX: VPP's NAT44-ED sends `0`, as dplog; its NAT44-EI the
    ///   subscriber's (user's) index, which dplog's records do not carry:
    ///   dplog always sends `0`.
    /// - Twice-NAT sessions: VPP appends IDADDR and IDPORT; the NAT44
    ///   session record has no such addresses, so dplog never sends them.
    /// - APMADD/APMDEL: VPP sends one per address-and-port mapping (one
    ///   inside address, port and protocol to one outside address and
    ///   port, with their own ISPORT, XSPORT and PROTO). dplog sends one
    ///   per port block, which maps a range of outside ports for every
    ///   inside port and protocol of the subscriber: ISPORT `0` and PROTO
    ///   `0` (no single port or protocol; 0 is reserved in both), XSPORT
    ///   the block's first port; the range's end, step and size are not
    ///   sent (the default layout has them). Always SVLAN, never DS-Lite's
    ///   SV6ENC.
    /// - Records VPP does not send by syslog (address and port
    ///   exhaustion, quotas, drop reports) keep dplog's own layouts.
    /// - VPP cuts a message at its `max-msg-size` (480 bytes by default);
    ///   dplog cuts none (a NAT message with an IPv4 HOSTNAME is far
    ///   shorter; over UDP the syslog sink drops and counts a message too
    ///   large for a datagram).
    #[cfg_attr(feature = "serde", serde(deserialize_with = "de::profile"))]
    pub profile: Option<String>,
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
            profile: None,
        }
    }
}

/// The SD-IDs registered with IANA ("syslog Structured Data ID Values":
/// RFC 5424 section 7, RFC 5674, RFC 5675, RFC 5848): the only ones that
/// may appear without `@<enterprise number>`.
pub const IANA_SD_IDS: [&str; 7] = [
    "timeQuality",
    "origin",
    "meta",
    "alarm",
    "snmp",
    "ssign",
    "ssign-cert",
];

/// The syslog layout profiles a schema may declare ([`SyslogOptions::profile`]).
pub const SYSLOG_PROFILES: [&str; 1] = ["vpp"];

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

/// Checks a HOSTNAME (RFC 5424 section 6.2.4).
pub fn check_hostname(s: &str) -> Result<(), String> {
    printusascii(s, 255, "hostname", &[])
}

/// Checks an APP-NAME (RFC 5424 section 6.2.5).
pub fn check_app_name(s: &str) -> Result<(), String> {
    printusascii(s, 48, "app_name", &[])
}

/// Checks a PROCID (RFC 5424 section 6.2.6).
pub fn check_procid(s: &str) -> Result<(), String> {
    printusascii(s, 128, "procid", &[])
}

/// Checks an SD-ID (RFC 5424 sections 6.3.2 and 7.2.2): 1..=32
/// printable US-ASCII characters but `=`, `]`, `"`; either
/// `name@<enterprise>` with a non-empty name without `@` and an
/// enterprise number of digits with optional `.`-separated digit groups
/// (e.g. `nsess@32473`, `x@32473.1`), or an IANA-registered name
/// ([`IANA_SD_IDS`]).
pub fn check_sd_id(s: &str) -> Result<(), String> {
    printusascii(s, 32, "sd_id", &['=', ']', '"'])?;
    match s.split_once('@') {
        Some((name, pen)) => {
            let pen_ok = !pen.is_empty()
                && pen
                    .split('.')
                    .all(|g| !g.is_empty() && g.bytes().all(|b| b.is_ascii_digit()));
            if name.is_empty() || !pen_ok {
                return Err(format!(
                    "syslog sd_id {s:?}: RFC 5424 section 6.3.2 wants `name@<private enterprise number>` (digits, e.g. \"{}@32473\")",
                    if name.is_empty() { "name" } else { name }
                ));
            }
            Ok(())
        }
        None if IANA_SD_IDS.contains(&s) => Ok(()),
        None => Err(format!(
            "syslog sd_id {s:?} is not an IANA-registered SD-ID ({}); RFC 5424 section 6.3.2 wants `name@<private enterprise number>`, e.g. \"{s}@32473\" (profile = \"vpp\" sends VPP's own bare SD-IDs)",
            IANA_SD_IDS.join(", ")
        )),
    }
}

/// Checks a syslog profile name ([`SYSLOG_PROFILES`]).
pub fn check_profile(s: &str) -> Result<(), String> {
    if SYSLOG_PROFILES.contains(&s) {
        Ok(())
    } else {
        Err(format!(
            "unknown syslog profile {s:?}; profiles: {}",
            SYSLOG_PROFILES.join(", ")
        ))
    }
}

/// Deserializers that check each string key as it is read, so that a bad
/// value is refused at its own line of the configuration.
#[cfg(feature = "serde")]
mod de {
    use serde::{de::Error, Deserialize, Deserializer};

    fn checked<'de, D: Deserializer<'de>>(
        d: D,
        check: fn(&str) -> Result<(), String>,
    ) -> Result<Option<String>, D::Error> {
        let s = String::deserialize(d)?;
        check(&s).map_err(D::Error::custom)?;
        Ok(Some(s))
    }

    pub fn hostname<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        checked(d, super::check_hostname)
    }
    pub fn app_name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        checked(d, super::check_app_name)
    }
    pub fn procid<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        checked(d, super::check_procid)
    }
    pub fn sd_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        checked(d, super::check_sd_id)
    }
    pub fn profile<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        checked(d, super::check_profile)
    }
}

/// This host's name (`gethostname(2)`), if it has a valid one.
fn host_name() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its whole length, which is passed;
    // gethostname writes at most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let h = std::str::from_utf8(&buf[..n]).ok()?.to_string();
    check_hostname(&h).is_ok().then_some(h)
}

impl SyslogOptions {
    /// Checks every header value against RFC 5424 section 6 lengths and
    /// character sets, the SD-ID against section 6.3.2 and the profile
    /// name.
    pub fn validate(&self) -> Result<(), String> {
        if self.facility > 23 || self.severity > 7 {
            return Err(format!(
                "syslog facility {} / severity {} out of range (0..=23 / 0..=7)",
                self.facility, self.severity
            ));
        }
        if let Some(h) = &self.hostname {
            check_hostname(h)?;
        }
        if let Some(a) = &self.app_name {
            check_app_name(a)?;
        }
        if let Some(p) = &self.procid {
            check_procid(p)?;
        }
        if let Some(sd) = &self.sd_id {
            check_sd_id(sd)?;
        }
        if let Some(p) = &self.profile {
            check_profile(p)?;
        }
        Ok(())
    }

    /// HOSTNAME as printed: the configured one, else this host's name,
    /// else `fallback`.
    pub fn hostname_or(&self, fallback: &str) -> String {
        self.hostname
            .clone()
            .or_else(host_name)
            .unwrap_or_else(|| fallback.to_string())
    }

    /// PROCID as printed: the configured one, else this process's id.
    pub fn procid_or_pid(&self) -> String {
        self.procid
            .clone()
            .unwrap_or_else(|| std::process::id().to_string())
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

    /// The syslog layout of `s` under this profile.
    fn layout<'a>(&self, s: &'a Schema) -> &'a SyslogMeta {
        s.meta().syslog.for_profile(self.profile.as_deref())
    }
}

/// APP-NAME when neither the options nor the schema give one.
pub const DEFAULT_APP_NAME: &str = "dplog";

/// The schema's event-time field ([`dplog_core::schema::SchemaMeta::event_time`]).
fn time_field(s: &Schema) -> Option<usize> {
    s.meta().event_time
}

/// Fractional digits of the lead time (RFC 3339) of the text, JSON and
/// CSV layouts: [`Options::time`]'s, microseconds when it is not set.
fn lead_digits(opts: &Options) -> u8 {
    default_lead_digits(opts.time)
}

/// Fractional digits of the records' lead time in the text, JSON and CSV
/// default layouts for a time precision (`None`: not set, microseconds);
/// the JSON and CSV drop reports print their `timestamp` with the same.
pub(crate) fn default_lead_digits(time: Option<crate::TimePrecision>) -> u8 {
    time.map_or(6, |t| t.digits())
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

/// Adds field `i` under its output name with `emit(program, name)`: a
/// field the schema names by another field's value
/// ([`SchemaMeta::name_by`](dplog_core::schema::SchemaMeta::name_by), e.g.
/// the NAT quota record's limit, `maxEntriesPerUser` & co) once per name,
/// each only for records whose selector has that name's value (a value
/// without a name: nothing); any other field under its own name.
fn named(
    p: &mut Program,
    s: &Schema,
    i: usize,
    emit: &mut dyn FnMut(&mut Program, &str) -> Result<(), String>,
) -> Result<(), String> {
    match s.meta().name_by.as_ref().filter(|b| b.field == i) {
        Some(by) => {
            for (v, n) in &by.names {
                p.when(s, by.selector, *v, |p| emit(p, n))?;
            }
            Ok(())
        }
        None => emit(p, &s.fields()[i].name),
    }
}

/// The names field `i` is printed under (see [`named`]).
fn output_names(s: &Schema, i: usize) -> Vec<&str> {
    match s.meta().name_by.as_ref().filter(|b| b.field == i) {
        Some(by) => by.names.iter().map(|(_, n)| n.as_ref()).collect(),
        None => vec![&s.fields()[i].name],
    }
}

/// ` name=value` of field `i` (Text escaping).
fn text_pair(p: &mut Program, s: &Schema, i: usize) -> Result<(), String> {
    named(p, s, i, &mut |p, n| {
        p.lit(format!(" {n}=").as_bytes());
        p.field(s, i, conv_of(s, i), Escape::Text)
    })
}

/// The default text layout: the event time as RFC 3339 UTC with
/// microseconds (or [`Options::time`]'s digits), then ` name=value` for every field, then `\n`. Fields the
/// schema shows only conditionally ([`Schema::with_fields_only_when`], e.g.
/// the NAT44 session's counters on deletes) come last, when it holds; a
/// field named by another's value ([`Schema::with_name_by`]) under the
/// name of that value.
pub fn text_default(s: &Schema, opts: Options) -> Result<Program, TemplateError> {
    let mut p = Program::new(s, opts);
    // TSC fields convert too (see `template`), calibrated or not.
    if let Some(t) = time_field(s) {
        p.field(s, t, Some(Conv::Rfc3339(lead_digits(&opts))), Escape::Text)
            .map_err(e)?;
    }
    let only_when = s.meta().only_when.as_ref();
    let mut deferred = Vec::new();
    for i in 0..s.fields().len() {
        if only_when.is_some_and(|w| w.fields.contains(&i)) {
            deferred.push(i);
            continue;
        }
        text_pair(&mut p, s, i).map_err(e)?;
    }
    if let Some(w) = only_when.filter(|_| !deferred.is_empty()) {
        p.when(s, w.field, w.equals as u32, |p| {
            for i in deferred {
                text_pair(p, s, i)?;
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
/// the record's time as an RFC 3339 UTC string with microseconds, or
/// [`Options::time`]'s digits (when the schema has a nanosecond
/// timestamp, or a TSC one and a calibration), then every field under its
/// name; integers, enums asked as numbers and timestamps (ms since the
/// epoch, or [`Options::time`]'s unit) as numbers (a JSON number; a
/// reader that holds numbers as doubles, JavaScript's `JSON.parse`, keeps
/// only 53 bits, ~104 days of nanoseconds: read them as integers), booleans as `true`/`false`, addresses, byte strings
/// and enum names as escaped strings. Conditional fields and fields named
/// by another's value as in [`text_default`].
pub fn json(s: &Schema, opts: Options) -> Result<Program, TemplateError> {
    fn member(p: &mut Program, s: &Schema, i: usize, first: bool) -> Result<(), String> {
        let f = &s.fields()[i];
        let conv = conv_of(s, i);
        let quoted = conv.is_some()
            || matches!(
                f.kind,
                FieldKind::Ipv4 | FieldKind::Ipv6 | FieldKind::Mac | FieldKind::Bytes
            );
        named(p, s, i, &mut |p, n| {
            let mut key = Vec::new();
            if !first {
                key.push(b',');
            }
            key.push(b'"');
            crate::conv::push_escaped(&mut key, n.as_bytes(), Escape::Json);
            key.extend_from_slice(if quoted { b"\":\"" } else { b"\":" });
            p.lit(&key);
            p.field(s, i, conv, Escape::Json)?;
            if quoted {
                p.lit(b"\"");
            }
            Ok(())
        })
    }
    let mut p = Program::new(s, opts);
    p.lit(b"{");
    let mut first = true;
    // TSC fields convert too (see `template`), calibrated or not.
    if let Some(t) = time_field(s) {
        p.lit(b"\"timestamp\":\"");
        p.field(s, t, Some(Conv::Rfc3339(lead_digits(&opts))), Escape::Json)
            .map_err(e)?;
        p.lit(b"\"");
        first = false;
    }
    let only_when = s.meta().only_when.as_ref();
    let mut deferred = Vec::new();
    // A field named by another's value may be left out, so it never opens
    // the object: without a time stamp first, it waits for the first
    // member that is always there (its selector at the latest).
    let mut waiting = None;
    for i in 0..s.fields().len() {
        if only_when.is_some_and(|w| w.fields.contains(&i)) {
            deferred.push(i);
            continue;
        }
        let optional = s.meta().name_by.as_ref().is_some_and(|b| b.field == i);
        if first && optional {
            waiting = Some(i);
            continue;
        }
        member(&mut p, s, i, first).map_err(e)?;
        first = false;
        if let Some(w) = waiting.take() {
            member(&mut p, s, w, false).map_err(e)?;
        }
    }
    if let Some(w) = only_when.filter(|_| !deferred.is_empty()) {
        p.when(s, w.field, w.equals as u32, |p| {
            for i in deferred {
                member(p, s, i, false)?;
            }
            Ok(())
        })
        .map_err(e)?;
    }
    p.lit(b"}\n");
    Ok(p)
}

/// CSV columns before the fields: the record type (schema name, or
/// [`CSV_DROP_RECORD_TYPE`] for a drop report) and the event time as in
/// JSON's `timestamp`.
pub const CSV_LEAD_COLUMNS: [&str; 2] = ["recordType", "timestamp"];

/// CSV columns after every field, filled only by drop reports: records
/// dropped, the ring (empty for the sink's), why (JSON's `reason`: `full`,
/// `degraded`, `disconnected`, `stopped` or `ring` for a ring's drops,
/// `sink` for the sink's; [`dplog_core::drop_reason_name`]) and the
/// wall-clock time of the first and last drop. Prefixed `dplog`, as
/// JSON's `dplogEvent`, so they do not meet a record's own field names
/// (an ACL record's `dropReason`).
pub const CSV_DROP_COLUMNS: [&str; 5] = [
    "dplogDropped",
    "dplogDropRing",
    "dplogDropReason",
    "dplogFirstDropWallClock",
    "dplogLastDropWallClock",
];

/// `recordType` of a drop report's CSV row (JSON's `dplogEvent`).
pub const CSV_DROP_RECORD_TYPE: &str = "recordsDropped";

/// The CSV columns of a log of `schemas` (one header for every record
/// type, RFC 4180): [`CSV_LEAD_COLUMNS`], then every field's output name
/// in schema order, schema after schema, each name once (a name a schema
/// shares with one before it is the same column; a field named by another
/// field's value, [`Schema::with_name_by`], has a column per name), then
/// [`CSV_DROP_COLUMNS`]. A row fills the columns of its own record type
/// and leaves the others empty.
pub fn csv_columns(schemas: &[&Schema]) -> Vec<String> {
    let mut cols: Vec<String> = CSV_LEAD_COLUMNS.iter().map(|c| c.to_string()).collect();
    for s in schemas {
        for i in 0..s.fields().len() {
            for n in output_names(s, i) {
                if !cols[CSV_LEAD_COLUMNS.len()..].iter().any(|c| c == n) {
                    cols.push(n.to_string());
                }
            }
        }
    }
    cols.extend(CSV_DROP_COLUMNS.iter().map(|c| c.to_string()));
    cols
}

/// The CSV header line (RFC 4180) of `columns` ([`csv_columns`]),
/// comma-separated, CRLF.
pub fn csv_header(columns: &[String]) -> Vec<u8> {
    let mut h = Vec::new();
    for (i, c) in columns.iter().enumerate() {
        if i > 0 {
            h.push(b',');
        }
        crate::conv::push_escaped(&mut h, c.as_bytes(), Escape::Csv);
    }
    h.extend_from_slice(b"\r\n");
    h
}

/// One CSV row (RFC 4180) of a record of `s` under the header of
/// `columns` ([`csv_columns`]): its schema name, its event time (RFC 3339
/// UTC with microseconds or [`Options::time`]'s digits, empty without
/// one), then per column the value of
/// the field printed under that name with its default converter (byte
/// strings quoted when needed), empty if it has none; CRLF. A cell is
/// empty wherever [`json`] leaves the key out: a field the schema shows
/// only conditionally ([`Schema::with_fields_only_when`], e.g. the NAT44
/// session's counters, only on deletes) when the condition does not hold,
/// and a field named by another's value under the names it does not
/// have.
pub fn csv_row(s: &Schema, opts: Options, columns: &[String]) -> Result<Program, TemplateError> {
    let mut p = Program::new(s, opts);
    let mut name = Vec::new();
    crate::conv::push_escaped(&mut name, s.name().as_bytes(), Escape::Csv);
    name.push(b',');
    p.lit(&name);
    if let Some(t) = time_field(s) {
        p.field(s, t, Some(Conv::Rfc3339(lead_digits(&opts))), Escape::Csv)
            .map_err(e)?;
    }
    let by = s.meta().name_by.as_ref();
    let only_when = s.meta().only_when.as_ref();
    for c in &columns[CSV_LEAD_COLUMNS.len()..] {
        p.lit(b",");
        if let Some((i, _)) = s
            .field(c)
            .filter(|(i, _)| !by.is_some_and(|b| b.field == *i))
        {
            match only_when.filter(|w| w.fields.contains(&i)) {
                // Empty where JSON leaves the key out.
                Some(w) => p.when(s, w.field, w.equals as u32, |p| {
                    p.field(s, i, conv_of(s, i), Escape::Csv)
                }),
                None => p.field(s, i, conv_of(s, i), Escape::Csv),
            }
            .map_err(e)?;
        } else if let Some((b, v)) =
            by.and_then(|b| b.names.iter().find(|(_, n)| n == c).map(|(v, _)| (b, *v)))
        {
            p.when(s, b.selector, v, |p| {
                p.field(s, b.field, conv_of(s, b.field), Escape::Csv)
            })
            .map_err(e)?;
        }
    }
    p.lit(b"\r\n");
    Ok(p)
}

/// A drop report as one CSV row under the header of `columns`
/// ([`csv_columns`]): `recordType` [`CSV_DROP_RECORD_TYPE`], `timestamp`
/// the event time of the record before it (RFC 3339 with `time`'s
/// digits, microseconds when it is `None`, as the records' `timestamp`
/// with [`Options::time`]; empty if none), the field columns empty, then
/// [`CSV_DROP_COLUMNS`] (the wall clocks always with nanoseconds).
pub fn csv_drop_row(
    r: &dplog_core::DropReport,
    columns: usize,
    time: Option<crate::TimePrecision>,
    out: &mut Vec<u8>,
) {
    let mut t = crate::conv::Rfc3339Cache::default();
    out.extend_from_slice(CSV_DROP_RECORD_TYPE.as_bytes());
    out.push(b',');
    if r.record_time_ns != 0 {
        t.push(out, r.record_time_ns, default_lead_digits(time));
    }
    let empty = columns.saturating_sub(CSV_LEAD_COLUMNS.len() + CSV_DROP_COLUMNS.len());
    out.resize(out.len() + empty, b',');
    out.push(b',');
    crate::conv::push_dec(out, r.dropped);
    out.push(b',');
    if r.reason != dplog_core::report::DROP_REASON_SINK {
        crate::conv::push_dec(out, u64::from(r.ring));
    }
    out.push(b',');
    r.push_reason(out);
    out.push(b',');
    t.push(out, r.first_ns, 9);
    out.push(b',');
    t.push(out, r.last_ns, 9);
    out.extend_from_slice(b"\r\n");
}

/// The start both syslog layouts share: `sy` and the schema's declared
/// header parts checked, then a program for `s` that begins with the PRI.
/// Returns the program and the schema's syslog layout.
fn syslog_start<'a>(
    s: &'a Schema,
    opts: Options,
    sy: &SyslogOptions,
) -> Result<(Program, &'a SyslogMeta), TemplateError> {
    sy.validate().map_err(e)?;
    let layout = sy.layout(s);
    check_declared(s, sy, layout).map_err(e)?;
    let mut p = Program::new(s, opts);
    p.lit(sy.pri().as_bytes());
    Ok((p, layout))
}

/// Checks the syslog header parts a schema declares, which go into a
/// message unescaped: APP-NAME (unless the options set one), each MSGID
/// (RFC 5424 section 6.2.7: 1..=32 printable US-ASCII characters, no
/// space), the SD-ID (unless the options set one; VPP's bare ones are
/// allowed, so only its characters are checked) and the PARAM-NAMEs
/// (section 6.3.3: as an SD-ID's). A record's values never reach these
/// parts: an integer MSGID field without a declared name prints in
/// decimal.
fn check_declared(s: &Schema, sy: &SyslogOptions, layout: &SyslogMeta) -> Result<(), String> {
    if sy.app_name.is_none() {
        if let Some(a) = &s.meta().syslog.app_name {
            check_app_name(a)?;
        }
    }
    if let Some(by) = &layout.msgid_by {
        for (_, m) in &by.values {
            printusascii(m, 32, "msgid", &[])?;
        }
    }
    if sy.sd_id.is_none() {
        if let Some(id) = &layout.sd_id {
            printusascii(id, 32, "sd_id", &['=', ']', '"'])?;
        }
    }
    for (name, _) in &layout.params {
        printusascii(name, 32, "parameter name", &['=', ']', '"'])?;
    }
    Ok(())
}

/// MSGID: by the layout's declared field values (values not listed print
/// in decimal), else the schema name.
fn syslog_msgid(p: &mut Program, s: &Schema, layout: &SyslogMeta) -> Result<(), TemplateError> {
    match &layout.msgid_by {
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
/// <134>1 2026-01-01T00:00:00.123456Z cgnat-1 NAT 4242 SADD [nsess@32473 SSUBIX="0" SVLAN="0" IATYP="IPv4" ISADDR="10.0.0.6" ISPORT="51234" XATYP="IPv4" XSADDR="198.51.100.3" XSPORT="1024" PROTO="6" XDADDR="203.0.113.5" XDPORT="443"]
/// ```
///
/// TIMESTAMP in UTC with microseconds, or [`Options::time`]'s digits up
/// to 6 (TIME-SECFRAC has at most 6, RFC 5424 section 6.2.3: `ns` prints
/// microseconds; the parameters' timestamp values, Unix integers, keep
/// all of `ns`); HOSTNAME and PROCID as
/// [`SyslogOptions`] says (this host's name and this process's id by
/// default). A schema that declares a syslog layout
/// ([`dplog_core::schema::SyslogMeta`], per profile:
/// [`SyslogOptions::profile`]) gets its MSGID, SD-ID
/// ([`SyslogOptions::sd_id`] overrides it) and parameters: the NAT44
/// session record is VPP's NAT44 layout above (with `profile = "vpp"`
/// VPP's SD-ID `nsess` too; [`SyslogOptions::profile`] lists what still
/// differs from VPP's messages). Any other record has MSGID its schema
/// name (or the declared one), SD-ID `<schema name>@<enterprise>` and
/// every field as a parameter (a field named by another's value under
/// that name). No space between PRI and VERSION; values (and declared
/// constants) escaped as PARAM-VALUEs ([`Escape::SdParam`]: `"`, `\`
/// and `]` with a backslash, control characters as `\xNN`); no MSG.
/// Declared header parts are checked against RFC 5424 section 6 (an
/// error names the schema).
pub fn rfc5424(s: &Schema, opts: Options, sy: &SyslogOptions) -> Result<Program, TemplateError> {
    let (mut p, layout) = syslog_start(s, opts, sy)?;
    p.lit(b"1 ");
    match time_field(s) {
        Some(t) => p
            .field(
                s,
                t,
                Some(Conv::Rfc3339(lead_digits(&opts).min(6))),
                Escape::SdParam,
            )
            .map_err(e)?,
        _ => p.lit(b"-"),
    }
    p.lit(
        format!(
            " {} {} {} ",
            sy.hostname_or("-"),
            sy.app_name(s),
            sy.procid_or_pid()
        )
        .as_bytes(),
    );
    syslog_msgid(&mut p, s, layout)?;
    p.lit(b" [");
    if !layout.params.is_empty() {
        let sd_id = sy.sd_id.as_deref().or(layout.sd_id.as_deref()).map_or_else(
            || format!("{}@{}", s.name(), sy.enterprise()),
            str::to_string,
        );
        p.lit(sd_id.as_bytes());
        for (name, src) in &layout.params {
            p.lit(format!(" {name}=\"").as_bytes());
            match src {
                SdParam::Const(c) => {
                    let mut v = Vec::new();
                    crate::conv::push_escaped(&mut v, c.as_bytes(), Escape::SdParam);
                    p.lit(&v)
                }
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
        for i in 0..s.fields().len() {
            named(&mut p, s, i, &mut |p, n| {
                let pname: String = n.chars().take(32).collect();
                p.lit(format!(" {pname}=\"").as_bytes());
                p.field(s, i, conv_of(s, i), Escape::SdParam)?;
                p.lit(b"\"");
                Ok(())
            })
            .map_err(e)?;
        }
    }
    p.lit(b"]\n");
    Ok(p)
}

/// Syslog RFC 3164 (BSD syslog), for legacy receivers, one per line:
///
/// ```text
/// <134>Jan  1 00:00:00 cgnat-1 NAT: SADD SVLAN=0 ISADDR=10.0.0.6 ISPORT=51234 XSADDR=198.51.100.3 XSPORT=1024 PROTO=6 XDADDR=203.0.113.5 XDPORT=443
/// ```
///
/// TIMESTAMP is UTC, whole seconds whatever [`Options::time`] says (RFC
/// 3164 section 4.1.2 has no fraction; the MSG's timestamp values follow
/// it); HOSTNAME this host's name unless set (`localhost` if
/// it has none: a `-` would be taken for the TAG). The MSG is the RFC 5424
/// MSGID then `NAME=value` pairs (the layout's declared parameters without
/// the constant ones, e.g. VPP's names for NAT44 sessions; field names
/// otherwise), values escaped as in the text format ([`Escape::Text`]:
/// no whitespace or control character in a value).
pub fn rfc3164(s: &Schema, opts: Options, sy: &SyslogOptions) -> Result<Program, TemplateError> {
    let (mut p, layout) = syslog_start(s, opts, sy)?;
    match time_field(s) {
        Some(t) => p
            .field(s, t, Some(Conv::Rfc3164), Escape::Text)
            .map_err(e)?,
        _ => p.lit(b"Jan  1 00:00:00"),
    }
    let tag: String = sy.app_name(s).chars().take(32).collect();
    p.lit(format!(" {} {tag}: ", sy.hostname_or("localhost")).as_bytes());
    syslog_msgid(&mut p, s, layout)?;
    if !layout.params.is_empty() {
        for (name, src) in &layout.params {
            if let SdParam::Field(i) = src {
                p.lit(format!(" {name}=").as_bytes());
                p.field(s, *i, conv_of(s, *i), Escape::Text).map_err(e)?;
            }
        }
    } else {
        for i in 0..s.fields().len() {
            text_pair(&mut p, s, i).map_err(e)?;
        }
    }
    p.lit(b"\n");
    Ok(p)
}

/// MSGID of a drop report's syslog message.
pub const DROP_MSGID: &str = "RECORDS_DROPPED";

/// Severity of a drop report's syslog message: 4 (warning).
pub const DROP_SEVERITY: u8 = 4;

/// The syslog header values of drop reports, resolved once.
#[derive(Clone, Debug)]
pub struct SyslogDrops {
    rfc5424: bool,
    hostname: String,
    app_name: String,
    procid: String,
    facility: u8,
    enterprise: String,
}

impl SyslogDrops {
    /// Drop reports for a log of `first` (whose APP-NAME / TAG they take,
    /// so a receiver files them with the records) in RFC 5424 or RFC 3164.
    pub fn new(rfc5424: bool, sy: &SyslogOptions, first: Option<&Schema>) -> SyslogDrops {
        let app_name = match first {
            Some(s) => sy.app_name(s).to_string(),
            None => sy.app_name.clone().unwrap_or(DEFAULT_APP_NAME.into()),
        };
        SyslogDrops {
            rfc5424,
            hostname: sy.hostname_or(if rfc5424 { "-" } else { "localhost" }),
            app_name: app_name
                .chars()
                .take(if rfc5424 { 48 } else { 32 })
                .collect(),
            procid: sy.procid_or_pid(),
            facility: sy.facility,
            enterprise: sy.enterprise().to_string(),
        }
    }

    /// Appends the header of one of dplog's own messages of `severity`
    /// (0..=7, a larger value taken as 7) at `time_ns`: RFC 5424
    /// `<PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID [<sd_name>@<enterprise>`
    /// (the SD-ELEMENT left open for its parameters; TIMESTAMP with
    /// microseconds), RFC 3164 `<PRI>TIMESTAMP HOSTNAME TAG: MSGID`.
    fn header(&self, out: &mut Vec<u8>, severity: u8, time_ns: u64, msgid: &str, sd_name: &str) {
        let pri = u32::from(self.facility) * 8 + u32::from(severity.min(7));
        out.push(b'<');
        crate::conv::push_dec(out, u64::from(pri));
        out.push(b'>');
        if self.rfc5424 {
            out.extend_from_slice(b"1 ");
            crate::conv::Rfc3339Cache::default().push(out, time_ns, 6);
        } else {
            crate::conv::Rfc3164Cache::default().push(out, time_ns);
        }
        out.push(b' ');
        out.extend_from_slice(self.hostname.as_bytes());
        out.push(b' ');
        out.extend_from_slice(self.app_name.as_bytes());
        if self.rfc5424 {
            out.push(b' ');
            out.extend_from_slice(self.procid.as_bytes());
            out.push(b' ');
        } else {
            out.extend_from_slice(b": ");
        }
        out.extend_from_slice(msgid.as_bytes());
        if self.rfc5424 {
            out.extend_from_slice(b" [");
            out.extend_from_slice(sd_name.as_bytes());
            out.push(b'@');
            out.extend_from_slice(self.enterprise.as_bytes());
        }
    }

    /// Appends `n`, a message of dplog's own that is neither a record nor
    /// a drop report (dplogd's end of a ring), as one syslog message with
    /// the drop reports' header values (HOSTNAME, APP-NAME / TAG, PROCID,
    /// facility) and `n`'s severity.
    ///
    /// RFC 5424: PRI, TIMESTAMP `n.time_ns` (microseconds), MSGID
    /// `n.msgid`, SD-ELEMENT `<n.sd_name>@<enterprise>` with `n.params`
    /// (values escaped as PARAM-VALUEs, [`Escape::SdParam`]), no MSG:
    ///
    /// ```text
    /// <134>1 2026-11-30T07:49:15.100000Z cgnat-1 NAT 4242 RING_CLOSED [dplogRing@32473 ring="nat.7.00c0ffee00c0ffee.ring" pid="7" records="14"]
    /// ```
    ///
    /// RFC 3164: the same header fields, then the MSGID and the
    /// parameters as `name=value` pairs (values escaped as text,
    /// [`Escape::Text`]).
    /// `n.msgid`, `n.sd_name` and the parameter names are the caller's
    /// constants (printable US-ASCII without space, `=`, `]` or `"`).
    pub fn write_notice(&self, n: &SyslogNotice<'_>, out: &mut Vec<u8>) {
        use crate::conv::push_escaped;
        self.header(out, n.severity, n.time_ns, n.msgid, n.sd_name);
        // The two loops write the two syntaxes (an SD-PARAM, quoted and
        // escaped as a PARAM-VALUE; an unquoted `name=value` escaped as
        // text); they stay apart so each reads as its RFC's grammar.
        if self.rfc5424 {
            for (name, v) in n.params {
                out.push(b' ');
                out.extend_from_slice(name.as_bytes());
                out.extend_from_slice(b"=\"");
                push_escaped(out, v, Escape::SdParam);
                out.push(b'"');
            }
            out.push(b']');
        } else {
            for (name, v) in n.params {
                out.push(b' ');
                out.extend_from_slice(name.as_bytes());
                out.push(b'=');
                push_escaped(out, v, Escape::Text);
            }
        }
        out.push(b'\n');
    }

    /// Appends `r` as one syslog message, in the records' shape.
    ///
    /// RFC 5424: PRI of severity [`DROP_SEVERITY`], TIMESTAMP the event
    /// time of the record before it (else the last drop's wall clock),
    /// MSGID [`DROP_MSGID`], SD-ELEMENT `dplogDrop@<enterprise>` with
    /// `dropped`, `ring` (not for the sink's), `reason` (JSON's:
    /// [`dplog_core::drop_reason_name`]), `firstDropWallClock`,
    /// `lastDropWallClock`, then the text report as MSG:
    ///
    /// ```text
    /// <132>1 2013-05-02T20:20:36.616804Z cgnat-1 NAT 4242 RECORDS_DROPPED [dplogDrop@32473 dropped="12" ring="0" reason="degraded" firstDropWallClock="2026-11-30T07:49:15.000000123Z" lastDropWallClock="2026-11-30T07:49:15.100000123Z"] 12 records dropped on ring 0 (degraded) ...
    /// ```
    ///
    /// RFC 3164: the same header fields, then `RECORDS_DROPPED` and the
    /// parameters as `name=value` pairs.
    pub fn write(&self, r: &dplog_core::DropReport, out: &mut Vec<u8>) {
        let ns = if r.record_time_ns != 0 {
            r.record_time_ns
        } else {
            r.last_ns
        };
        let sink = r.reason == dplog_core::report::DROP_REASON_SINK;
        let mut t = crate::conv::Rfc3339Cache::default();
        self.header(out, DROP_SEVERITY, ns, DROP_MSGID, "dplogDrop");
        let (open, close, q) = if self.rfc5424 {
            (" ", "]", "\"")
        } else {
            (" ", "", "")
        };
        let param = |out: &mut Vec<u8>, name: &str, v: &mut dyn FnMut(&mut Vec<u8>)| {
            out.extend_from_slice(open.as_bytes());
            out.extend_from_slice(name.as_bytes());
            out.push(b'=');
            out.extend_from_slice(q.as_bytes());
            v(out);
            out.extend_from_slice(q.as_bytes());
        };
        param(out, "dropped", &mut |o| crate::conv::push_dec(o, r.dropped));
        if !sink {
            param(out, "ring", &mut |o| {
                crate::conv::push_dec(o, u64::from(r.ring))
            });
        }
        param(out, "reason", &mut |o| r.push_reason(o));
        param(out, "firstDropWallClock", &mut |o| t.push(o, r.first_ns, 9));
        param(out, "lastDropWallClock", &mut |o| t.push(o, r.last_ns, 9));
        out.extend_from_slice(close.as_bytes());
        if self.rfc5424 {
            // The text report without its `dplog: ` prefix, as MSG.
            let mut text = Vec::new();
            r.write_text(&mut text);
            out.push(b' ');
            out.extend_from_slice(text.strip_prefix(b"dplog: ").unwrap_or(&text));
        } else {
            out.push(b'\n');
        }
    }
}

/// A syslog message of dplog's own, for [`SyslogDrops::write_notice`].
#[derive(Clone, Copy, Debug)]
pub struct SyslogNotice<'a> {
    /// TIMESTAMP, ns since the Unix epoch.
    pub time_ns: u64,
    /// Severity 0..=7 (a larger value is taken as 7).
    pub severity: u8,
    /// MSGID (RFC 5424 section 6.2.7: 1..=32 printable US-ASCII).
    pub msgid: &'a str,
    /// The SD-ID's name: the element is `<sd_name>@<enterprise>`.
    pub sd_name: &'a str,
    /// Parameters: name, and the value's bytes (escaped when written).
    pub params: &'a [(&'a str, &'a [u8])],
}
