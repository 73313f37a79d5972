//! Table-driven formatters for dplog records.
//!
//! Every format is built from record [`Schema`]s: once, at configuration
//! time, each schema is compiled into a [`Program`], a table of operations
//! ("copy this literal", "print field F with converter C"); formatting a
//! record walks the table without parsing, allocating (beyond the output
//! `Vec` growing) or calling `core::fmt`.
//!
//! Formats, by the name used on the command line and in config files
//! ([`Format`]): `text` (default `name=value` layout or a user template,
//! see [`template`]), `json` (JSON Lines, RFC 8259), `csv` (RFC 4180, one
//! header for every record type, see [`layouts::csv_columns`]), `rfc5424` (syslog; a schema may declare its layout, as
//! the NAT's declares VPP's), `rfc3164` (BSD syslog), `ipfix` (RFC 7011,
//! see [`ipfix`]) and
//! `binary` (length-prefixed records with a schema header, see [`binary`]).
//!
//! [`RecordEncoder`] formats records given as bytes (header first) and
//! dispatches on the header's schema id; [`SchemaFormatter`] wraps it as
//! the consumer's [`Formatter`] for any record type with a schema and for
//! slots ([`Slot64`](dplog_core::Slot64) & co) holding records of several
//! schemas, with in-band drop reports. Nothing here knows a record type:
//! schemas (and their metadata: event time, syslog layout, IPFIX elements)
//! say everything, e.g. the NAT schema package `dplog-schema-nat`.
//!
//! # Templates and their converters
//!
//! The `text` format prints a `name=value` line per record, or a template:
//! literal text with `{field}` or `{field:converter}` placeholders (`{{`
//! and `}}` are literal braces), compiled once into a [`Program`]. The
//! converters by field kind ([`FieldKind`](dplog_core::FieldKind); the
//! first is the kind's default; the full table is in [`template`]):
//!
//! | kind | converters |
//! |---|---|
//! | `U8`, `U16`, `U32`, `U64`, `Port`, `Protocol` | `dec` (alias `num`), `hex` |
//! | `Bool` | `bool`, `dec` |
//! | `Enum` | `dec`, `name`, `hex` |
//! | `Ipv4` | `ipv4`, `dec`, `hex` |
//! | `Ipv6` | `ipv6` |
//! | `Mac` | `mac` |
//! | `NsTimestamp` | `unix_ms`, `unix` (= `unix_s`), `unix_us`, `unix_ns`, `rfc3339` (= `rfc3339_ms`), `rfc3339_s`, `rfc3339_us`, `rfc3339_ns`, `rfc3164`, `dec`, `hex` |
//! | `TscTimestamp` | every `NsTimestamp` converter (through the [`TscCalibration`]); `dec` and `hex` print the raw ticks |
//! | `Bytes` | `str` (escaped for the output syntax, see [`Escape`]) |
//!
//! ```
//! use dplog_core::{schema, RecordHeader};
//! use dplog_formatters::{Escape, Options, Program};
//!
//! #[repr(C)]
//! #[derive(Clone, Copy)]
//! struct LbPick {
//!     header: RecordHeader,
//!     time_ns: u64,
//!     backend: u32,
//!     port: u16,
//!     verdict: u8,
//!     _pad: u8,
//! }
//! let schema = schema!(LbPick, id = 600, name = "lbPick", [
//!     time_ns => "time": NsTimestamp, ie 0;
//!     backend => "backendAddress": Ipv4, ie 0;
//!     port => "backendPort": Port, ie 0;
//!     verdict => "verdict": Enum, ie 0, names &[(0, "picked"), (1, "noBackend")];
//! ])?;
//! let mut program = Program::compile(
//!     "{time:rfc3339_s} {verdict:name} {backendAddress}:{backendPort} ({verdict})",
//!     &schema,
//!     Options::default(),
//!     Escape::Text,
//! )?;
//! // The record's bytes: header, then the fields at the schema's offsets.
//! let mut rec = [0u8; 24];
//! rec[..2].copy_from_slice(&24u16.to_ne_bytes());
//! rec[2..4].copy_from_slice(&600u16.to_ne_bytes());
//! rec[8..16].copy_from_slice(&1_767_225_600_000_000_000u64.to_ne_bytes());
//! rec[16..20].copy_from_slice(&0x0A00_0105u32.to_ne_bytes());
//! rec[20..22].copy_from_slice(&8080u16.to_ne_bytes());
//! let mut line = Vec::new();
//! assert!(program.run(&rec, &mut line));
//! assert_eq!(line, b"2026-01-01T00:00:00Z picked 10.0.1.5:8080 (0)");
//!
//! // A placeholder that does not suit its field is refused, with its column.
//! let err = Program::compile("{backendPort:ipv4}", &schema, Options::default(), Escape::Text)
//!     .unwrap_err();
//! assert_eq!(err.column, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod binary;
pub mod civil;
pub mod conv;
pub mod ipfix;
pub mod ipv4;
pub mod layouts;
mod raw;
pub mod template;
pub mod time;

use std::collections::BTreeMap;

use dplog_core::schema::Schema;
use dplog_core::{Formatter, RecordBytes};

pub use conv::{Escape, TscCalibration};
pub use ipfix::{ExportClock, IpfixEncoder, IpfixOptions};
pub use layouts::{SyslogNotice, SyslogOptions};
pub use template::{BytesEncoding, Conv, Options, Program, Renumber, TemplateError, TimePrecision};

/// Output formats by name, as used on the command line and in config files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Format {
    /// `text`: the default `name=value` line or a template.
    #[default]
    Text,
    /// `json`: JSON Lines.
    Json,
    /// `csv`: RFC 4180, one header line for every record type.
    Csv,
    /// `rfc5424`: syslog (RFC 5424).
    Rfc5424,
    /// `rfc3164`: BSD syslog.
    Rfc3164,
    /// `ipfix`: RFC 7011 messages, RFC 8158 templates.
    Ipfix,
    /// `binary`: length-prefixed records with a schema header.
    Binary,
}

impl Format {
    /// Every format with its name.
    pub const ALL: [(Format, &'static str); 7] = [
        (Format::Text, "text"),
        (Format::Json, "json"),
        (Format::Csv, "csv"),
        (Format::Rfc5424, "rfc5424"),
        (Format::Rfc3164, "rfc3164"),
        (Format::Ipfix, "ipfix"),
        (Format::Binary, "binary"),
    ];

    /// The format's name (`text`, `json`, `csv`, `rfc5424`, `rfc3164`,
    /// `ipfix`, `binary`).
    pub fn name(self) -> &'static str {
        Format::ALL
            .iter()
            .find(|(f, _)| *f == self)
            .map_or("text", |(_, n)| n)
    }
}

impl core::str::FromStr for Format {
    type Err = String;
    /// Parses a format name; the error lists the known names.
    fn from_str(s: &str) -> Result<Self, String> {
        Format::ALL
            .iter()
            .find(|(_, n)| *n == s)
            .map(|(f, _)| *f)
            .ok_or_else(|| {
                format!(
                    "unknown format {s:?}; known formats: {}",
                    Format::ALL.map(|(_, n)| n).join(", ")
                )
            })
    }
}

/// Everything that chooses and tunes a format.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FormatSpec {
    /// The format.
    pub kind: Format,
    /// `text` only: template for the first schema given to
    /// [`FormatSpec::encoder`] / [`FormatSpec::formatter`].
    pub template: Option<String>,
    /// `text` only: templates by schema name (e.g. `aclDrop`); a schema
    /// without one uses the default layout.
    pub templates: BTreeMap<String, String>,
    /// Value renumbering of one element (e.g. the NAT schema's legacy
    /// natEvent profile); `None`: values as recorded.
    pub renumber: Option<Renumber>,
    /// TSC calibration for TSC timestamp fields until the consumer passes
    /// its own (`Formatter::tsc_calibration`, which [`SchemaFormatter`]
    /// forwards); `None`: the identity until then.
    pub tsc: Option<TscCalibration>,
    /// `rfc5424` / `rfc3164` settings.
    pub syslog: SyslogOptions,
    /// `ipfix` settings.
    pub ipfix: IpfixOptions,
    /// Time precision (`[format] time_precision`); `None`: each format's
    /// own (see [`Options::time`] for what each format does with it).
    pub time_precision: Option<TimePrecision>,
    /// BYTES fields in the line formats (`[format] bytes`): `text`
    /// (default, escaped up to the first NUL), `hex` or `base64` (every
    /// byte); see [`BytesEncoding`].
    pub bytes: BytesEncoding,
    /// Per-field overrides of [`FormatSpec::bytes`] by field name
    /// (`[format.bytes_fields]`, e.g. `qname = "hex"`), in every record
    /// type that has a BYTES field of that name. A name that is no BYTES
    /// field of any schema is an error.
    pub bytes_fields: BTreeMap<String, BytesEncoding>,
}

/// A format that could not be built: a bad template (with its column) or
/// bad settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatError {
    /// The schema concerned, if any.
    pub schema: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl core::fmt::Display for FormatError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.schema {
            Some(s) => write!(f, "schema {s}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for FormatError {}

/// CSV state: the one header of the log and whether it was written.
struct Csv {
    header: Vec<u8>,
    columns: usize,
    written: bool,
}

enum Kind {
    Lines {
        progs: Vec<Program>,
        /// CSV: the union header ([`layouts::csv_columns`]).
        csv: Option<Csv>,
    },
    Ipfix(Box<IpfixEncoder>),
    Binary(BinaryEncoder),
}

pub use binary::BinaryEncoder;

/// Formats records given as bytes (starting with their
/// [`RecordHeader`](dplog_core::RecordHeader)) in one [`Format`],
/// dispatching on the header's schema id.
pub struct RecordEncoder {
    kind: Kind,
    ids: Vec<u16>,
    last: usize,
    /// [`Options::time`], for drop reports.
    time: Option<TimePrecision>,
}

impl std::fmt::Debug for RecordEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.kind {
            Kind::Lines { csv: Some(_), .. } => "csv",
            Kind::Lines { csv: None, .. } => "lines",
            Kind::Ipfix(_) => "ipfix",
            Kind::Binary(_) => "binary",
        };
        f.debug_struct("RecordEncoder")
            .field("kind", &kind)
            .field("schema_ids", &self.ids)
            .finish_non_exhaustive()
    }
}

/// Whether `schema` has a BYTES field `name`: what a `bytes_fields` entry
/// must name.
fn has_bytes_field(schema: &Schema, name: &str) -> bool {
    schema
        .field(name)
        .is_some_and(|(_, f)| f.kind == dplog_core::schema::FieldKind::Bytes)
}

impl FormatSpec {
    /// The encoding options.
    pub fn options(&self) -> Options {
        Options {
            renumber: self.renumber,
            tsc: self.tsc,
            time: self.time_precision,
            bytes: self.bytes,
        }
    }

    /// This format with only the settings that apply to `schemas`: the
    /// `[format.templates]` of their names and the `bytes_fields` that
    /// name a BYTES field of one of them. For a consumer serving several
    /// producers with one configuration (dplogd), where each ring
    /// declares some of the types the configuration names: a ring is
    /// formatted with what applies to its types, not refused for the
    /// others'. The plain `template` (the first type's) is kept.
    ///
    /// # Examples
    /// ```
    /// use dplog_core::schema::{FieldDef, FieldKind, Schema};
    /// use dplog_formatters::{BytesEncoding, FormatSpec};
    ///
    /// let dns = Schema::new(300, "dnsQuery", 24, vec![
    ///     FieldDef::new("qname", 8, 16, FieldKind::Bytes, 0),
    /// ])?;
    /// let mut spec = FormatSpec::default();
    /// spec.templates.insert("dnsQuery".into(), "{qname}".into());
    /// spec.templates.insert("aclDrop".into(), "{rule}".into());
    /// spec.bytes_fields.insert("qname".into(), BytesEncoding::Hex);
    /// spec.bytes_fields.insert("payload".into(), BytesEncoding::Base64);
    /// let mine = spec.for_types(&[&dns]);
    /// assert_eq!(mine.templates.keys().collect::<Vec<_>>(), ["dnsQuery"]);
    /// assert_eq!(mine.bytes_fields.keys().collect::<Vec<_>>(), ["qname"]);
    /// // The full spec is refused for this one type: it has no aclDrop.
    /// assert!(spec.formatter(&[&dns]).is_err());
    /// assert!(mine.formatter(&[&dns]).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn for_types(&self, schemas: &[&Schema]) -> FormatSpec {
        let mut spec = self.clone();
        spec.templates
            .retain(|name, _| schemas.iter().any(|s| s.name() == name));
        spec.bytes_fields
            .retain(|name, _| schemas.iter().any(|s| has_bytes_field(s, name)));
        spec
    }

    /// Compiles this format for `schemas`.
    ///
    /// # Errors
    /// A template that does not compile (with schema and column), two
    /// schemas with one id, a template for an unknown schema name, a template (or templates) with
    /// a format other than `text` (which would ignore it), bad syslog or
    /// IPFIX settings.
    pub fn encoder(&self, schemas: &[&Schema]) -> Result<RecordEncoder, FormatError> {
        let opts = self.options();
        let err = |s: Option<&Schema>, m: String| FormatError {
            schema: s.map(|s| s.name().to_string()),
            message: m,
        };
        if self.kind != Format::Text && (self.template.is_some() || !self.templates.is_empty()) {
            let key = if self.template.is_some() {
                "template"
            } else {
                "templates"
            };
            return Err(err(
                None,
                format!(
                    "`{key}` applies only to type \"text\"; this format is \"{}\" (remove `{key}` or use type \"text\")",
                    self.kind.name()
                ),
            ));
        }
        for (i, s) in schemas.iter().enumerate() {
            if let Some(o) = schemas[..i].iter().find(|o| o.id() == s.id()) {
                return Err(err(
                    None,
                    format!(
                        "record types {} and {} share schema id {}: a record could not be told apart",
                        o.name(),
                        s.name(),
                        s.id()
                    ),
                ));
            }
        }
        for name in self.templates.keys() {
            if !schemas.iter().any(|s| s.name() == name) {
                return Err(err(
                    None,
                    format!(
                        "template for unknown schema {name:?}; schemas: {}",
                        schemas
                            .iter()
                            .map(|s| s.name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
        for name in self.bytes_fields.keys() {
            if !schemas.iter().any(|s| has_bytes_field(s, name)) {
                let known: Vec<&str> = schemas
                    .iter()
                    .flat_map(|s| s.fields())
                    .filter(|f| f.kind == dplog_core::schema::FieldKind::Bytes)
                    .map(|f| &*f.name)
                    .collect();
                return Err(err(
                    None,
                    format!(
                        "bytes_fields: {name:?} is no BYTES field of any record type; BYTES fields: {}",
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    ),
                ));
            }
        }
        let lines = |f: &dyn Fn(&Schema) -> Result<Program, TemplateError>| {
            schemas
                .iter()
                .map(|s| {
                    let mut p = f(s).map_err(|e| err(Some(s), e.to_string()))?;
                    for (name, enc) in &self.bytes_fields {
                        p.set_bytes_encoding(s, name, *enc);
                    }
                    Ok(p)
                })
                .collect::<Result<Vec<_>, _>>()
        };
        let kind = match self.kind {
            Format::Text => Kind::Lines {
                progs: lines(&|s| {
                    let t = self
                        .templates
                        .get(s.name())
                        .or(if s.id() == schemas[0].id() {
                            self.template.as_ref()
                        } else {
                            None
                        });
                    match t {
                        Some(t) => layouts::text_template(t, s, opts),
                        None => layouts::text_default(s, opts),
                    }
                })?,
                csv: None,
            },
            Format::Json => Kind::Lines {
                progs: lines(&|s| layouts::json(s, opts))?,
                csv: None,
            },
            Format::Csv => {
                let columns = layouts::csv_columns(schemas);
                Kind::Lines {
                    progs: lines(&|s| layouts::csv_row(s, opts, &columns))?,
                    csv: Some(Csv {
                        header: layouts::csv_header(&columns),
                        columns: columns.len(),
                        written: false,
                    }),
                }
            }
            Format::Rfc5424 => Kind::Lines {
                progs: lines(&|s| layouts::rfc5424(s, opts, &self.syslog))?,
                csv: None,
            },
            Format::Rfc3164 => Kind::Lines {
                progs: lines(&|s| layouts::rfc3164(s, opts, &self.syslog))?,
                csv: None,
            },
            Format::Ipfix => Kind::Ipfix(Box::new(
                IpfixEncoder::new(schemas, opts, self.ipfix.clone()).map_err(|m| err(None, m))?,
            )),
            Format::Binary => {
                Kind::Binary(BinaryEncoder::try_new(schemas).map_err(|e| err(None, e.to_string()))?)
            }
        };
        Ok(RecordEncoder {
            kind,
            ids: schemas.iter().map(|s| s.id()).collect(),
            last: 0,
            time: self.time_precision,
        })
    }

    /// The header line a log file in this format starts with: for `csv`,
    /// the one header of every record type of `schemas` and drop reports
    /// ([`layouts::csv_columns`]), for a file sink's `header` option so
    /// that a file appended to by several runs, or rotated, has it once at
    /// its top; `None` for every other format.
    pub fn file_header(&self, schemas: &[&Schema]) -> Option<Vec<u8>> {
        match self.kind {
            Format::Csv => Some(layouts::csv_header(&layouts::csv_columns(schemas))),
            _ => None,
        }
    }

    /// The consumer's formatter for records of `schemas` (the first one
    /// takes [`FormatSpec::template`]).
    ///
    /// # Errors
    /// As [`FormatSpec::encoder`].
    pub fn formatter(&self, schemas: &[&Schema]) -> Result<SchemaFormatter, FormatError> {
        let enc = self.encoder(schemas)?;
        let syslog = matches!(self.kind, Format::Rfc5424 | Format::Rfc3164).then(|| {
            layouts::SyslogDrops::new(
                self.kind == Format::Rfc5424,
                &self.syslog,
                schemas.first().copied(),
            )
        });
        Ok(SchemaFormatter {
            enc,
            skipped: 0,
            format: self.kind,
            syslog,
        })
    }
}

impl RecordEncoder {
    /// Passes a TSC calibration (the consumer's, from
    /// [`Formatter::tsc_calibration`]) to every compiled program and the
    /// IPFIX encoder: TSC timestamp fields printed as time convert with it
    /// from the next record on. The binary format carries raw ticks and
    /// records the calibration in a `C` frame before the next record.
    pub fn set_tsc_calibration(&mut self, cal: TscCalibration) {
        match &mut self.kind {
            Kind::Lines { progs, .. } => progs.iter_mut().for_each(|p| p.set_tsc_calibration(cal)),
            Kind::Ipfix(e) => e.set_tsc_calibration(cal),
            Kind::Binary(e) => e.set_tsc_calibration(cal),
        }
    }

    /// Appends a drop report as a binary `D` frame; `false`, appending
    /// nothing, for every other format.
    pub fn push_binary_drop_report(
        &mut self,
        r: &dplog_core::DropReport,
        out: &mut Vec<u8>,
    ) -> bool {
        match &mut self.kind {
            Kind::Binary(e) => {
                e.push_drop_report(r, out);
                true
            }
            _ => false,
        }
    }

    /// Appends `rec` formatted. Returns `false`, appending nothing, if its
    /// schema id is not one this encoder was built for or it is shorter
    /// than its schema says.
    #[inline]
    pub fn push(&mut self, rec: &[u8], out: &mut Vec<u8>) -> bool {
        if rec.len() < 8 {
            return false;
        }
        let sid = u16::from_ne_bytes([rec[2], rec[3]]);
        let i = if self.ids.get(self.last) == Some(&sid) {
            self.last
        } else {
            match self.ids.iter().position(|&id| id == sid) {
                Some(i) => {
                    self.last = i;
                    i
                }
                None => return false,
            }
        };
        match &mut self.kind {
            Kind::Lines { progs, csv } => {
                if let Some(c) = csv.as_mut().filter(|c| !c.written) {
                    if rec.len() < progs[i].min_len() {
                        return false;
                    }
                    c.write_header(out);
                }
                progs[i].run(rec, out)
            }
            Kind::Ipfix(e) => e.push(rec, out),
            // Schema `i` of `ids` is schema `i` of the encoder (both in
            // the order of `schemas`): no second lookup.
            Kind::Binary(e) => e.push_schema(i, rec, out),
        }
    }
}

impl Csv {
    fn write_header(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.header);
        self.written = true;
    }
}

impl RecordEncoder {
    /// CSV: the output this encoder appends to is headed already (by a
    /// file sink's `header` option, [`FormatSpec::file_header`]), so no
    /// header line precedes the first row or drop report. Nothing changes
    /// in the other formats.
    pub fn csv_header_written(&mut self) {
        if let Kind::Lines { csv: Some(c), .. } = &mut self.kind {
            c.written = true;
        }
    }

    /// Appends drop report `r` as a CSV row in the header's shape
    /// ([`layouts::csv_drop_row`]), after the header if nothing was
    /// written yet; `false` (nothing appended) if this is not CSV.
    pub fn push_csv_drop_report(&mut self, r: &dplog_core::DropReport, out: &mut Vec<u8>) -> bool {
        match &mut self.kind {
            Kind::Lines { csv: Some(c), .. } => {
                if !c.written {
                    c.write_header(out);
                }
                layouts::csv_drop_row(r, c.columns, self.time, out);
                true
            }
            _ => false,
        }
    }
}

/// A [`RecordEncoder`] is the consumer's formatter for any record type
/// with a schema it was built for, or slots holding such records (records
/// of other schemas append nothing); it takes the consumer's TSC
/// calibration.
impl<R: RecordBytes> Formatter<R> for RecordEncoder {
    #[inline]
    fn format(&mut self, rec: &R, out: &mut Vec<u8>) {
        self.push(rec.record_bytes(), out);
    }
    fn tsc_calibration(&mut self, cal: &dplog_core::tsc::Calibration) {
        self.set_tsc_calibration(cal.into())
    }
}

/// The consumer's formatter in any [`Format`] for records of the schemas
/// it was built for ([`FormatSpec::formatter`]): typed records with a
/// schema, or slots ([`Slot64`](dplog_core::Slot64) & co) holding records
/// of several schemas (dispatch on the header's schema id). Records of an
/// unknown schema are skipped and counted ([`SchemaFormatter::skipped`]).
#[derive(Debug)]
pub struct SchemaFormatter {
    enc: RecordEncoder,
    skipped: u64,
    /// Output format, for the in-band drop report.
    format: Format,
    /// RFC 5424 / RFC 3164: the drop reports' header values.
    syslog: Option<layouts::SyslogDrops>,
}

impl SchemaFormatter {
    /// In-band drop report (dplog_core::report) in the format's own
    /// shape: a JSON object for `json` (its `timestamp` with the records'
    /// digits: [`FormatSpec::time_precision`]'s, microseconds when it is
    /// not set), a text line for `text`, a syslog
    /// message with PRI, MSGID and structured data for `rfc5424` and
    /// `rfc3164` ([`layouts::SyslogDrops`]), a row under the header for
    /// `csv` ([`layouts::csv_drop_row`]), a `D` frame for `binary`
    /// (dplog-cat decodes it), an Exporting Process Reliability Statistics
    /// options record for `ipfix` ([`IpfixEncoder::push_drop_report`]).
    fn drop_report(&mut self, r: &dplog_core::DropReport, out: &mut Vec<u8>) {
        match self.format {
            // The `timestamp` on the records' timeline with their digits
            // (microseconds when no precision is set, as the records).
            Format::Json => {
                r.write_json_with_time_digits(out, layouts::default_lead_digits(self.enc.time))
            }
            Format::Text => r.write_text(out),
            Format::Rfc5424 | Format::Rfc3164 => {
                if let Some(s) = &self.syslog {
                    s.write(r, out)
                }
            }
            Format::Binary => {
                self.enc.push_binary_drop_report(r, out);
            }
            Format::Csv => {
                self.enc.push_csv_drop_report(r, out);
            }
            Format::Ipfix => {
                if let Kind::Ipfix(e) = &mut self.enc.kind {
                    e.push_drop_report(r, out)
                }
            }
        }
    }

    /// Passes a TSC calibration to every compiled format; see
    /// [`RecordEncoder::set_tsc_calibration`].
    pub fn set_tsc_calibration(&mut self, cal: TscCalibration) {
        self.enc.set_tsc_calibration(cal)
    }

    /// Appends `n` as a syslog message in this log's header
    /// ([`layouts::SyslogDrops::write_notice`]) when the format is
    /// `rfc5424` or `rfc3164`; returns whether it did (nothing is
    /// written in any other format).
    pub fn format_syslog_notice(&self, n: &layouts::SyslogNotice<'_>, out: &mut Vec<u8>) -> bool {
        match &self.syslog {
            Some(s) => {
                s.write_notice(n, out);
                true
            }
            None => false,
        }
    }

    /// See [`RecordEncoder::csv_header_written`]: CSV rows follow a header
    /// the output already has (a file per record type, each headed once).
    pub fn csv_header_written(&mut self) {
        self.enc.csv_header_written()
    }

    /// Records skipped because their schema id or length was not valid,
    /// since the consumer last took the count
    /// ([`Formatter::take_skipped`]).
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Appends a record given as bytes; see [`RecordEncoder::push`].
    // Inline: the consumer's per-record call (through `Formatter::format`)
    // then inlines the encoder's dispatch, and the binary frame copy sits
    // in the consumer's burst loop instead of behind a call.
    #[inline]
    pub fn push_bytes(&mut self, rec: &[u8], out: &mut Vec<u8>) -> bool {
        let ok = self.enc.push(rec, out);
        self.skipped += u64::from(!ok);
        ok
    }
}

impl<R: RecordBytes> Formatter<R> for SchemaFormatter {
    #[inline]
    fn format(&mut self, rec: &R, out: &mut Vec<u8>) {
        self.push_bytes(rec.record_bytes(), out);
    }
    fn format_drop_report(&mut self, r: &dplog_core::DropReport, out: &mut Vec<u8>) {
        self.drop_report(r, out)
    }
    fn tsc_calibration(&mut self, cal: &dplog_core::tsc::Calibration) {
        self.enc.set_tsc_calibration(cal.into())
    }
    fn take_skipped(&mut self) -> u64 {
        std::mem::take(&mut self.skipped)
    }
}
