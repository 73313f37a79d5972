//! `[format]`: the output format.

use super::*;

/// `[format]`: the output format.
///
/// TSC timestamp fields need no key here: the consumer passes its
/// `TscClock` calibration to the formatter (`Formatter::tsc_calibration`,
/// at start and after each recalibration) and every format prints them as
/// time with it (identity, i.e. ticks taken as ns, on machines without an
/// invariant TSC, where the producer's ticks are realtime ns).
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct FormatConfig {
    /// `text`, `json`, `csv`, `rfc5424`, `rfc3164`, `ipfix` or `binary`.
    /// Default `text`.
    #[serde(rename = "type")]
    pub kind: Format,
    /// `text`: template for the first record type of the logger (the first
    /// schema given to `start_slots`, the type of `start::<R>()`; NAT44
    /// session records for the NAT), e.g.
    /// `"{observationTimeMilliseconds:rfc3339} {natEvent:name} {sourceIPv4Address}"`
    /// (syntax in `dplog::formatters::template`). Default: `name=value` line.
    pub template: Option<String>,
    /// `text`: templates by schema name (`[format.templates]`,
    /// e.g. `natPortBlock = "..."` or `aclDrop = "..."`).
    pub templates: std::collections::BTreeMap<String, String>,
    /// NAT records: natEvent numbering, `rfc8158` (default) or `legacy`
    /// (1/2).
    pub profile: crate::nat::EventProfile,
    /// `[format.syslog]`: hostname (default: this host's name), app_name,
    /// procid (default: this process's id), facility, severity, sd_id
    /// (RFC 5424 section 6.3.2: `name@<enterprise number>` or an
    /// IANA-registered name, checked at load), profile (`"vpp"`: VPP's NAT
    /// syslog layout; its differences from VPP's messages are listed at
    /// `SyslogOptions::profile`) (rfc5424 / rfc3164).
    pub syslog: crate::formatters::SyslogOptions,
    /// `[format.ipfix]`: mtu, template_refresh_secs,
    /// observation_domain_id, export_clock (`system` | `record`),
    /// enterprise_number (of the elements of fields without an IANA id),
    /// exporting_process_id (the scope of drop reports' reliability
    /// statistics records).
    pub ipfix: crate::formatters::IpfixOptions,
    /// `time_precision`: `"s"`, `"ms"`, `"us"` or `"ns"`: the digits of
    /// the lead RFC 3339 time (RFC 5424: at most 6, `ns` prints
    /// microseconds; RFC 3164: whole seconds), the unit of timestamp
    /// values, the IPFIX stamp element (`dplog::formatters::Options::time`
    /// has the table). Unset (default): each format's own (microseconds
    /// for the lead time, milliseconds for values and IPFIX).
    pub time_precision: Option<crate::formatters::TimePrecision>,
    /// `bytes`: how BYTES fields print in the line formats: `"text"`
    /// (default; escaped, up to the first NUL), `"hex"` or `"base64"`
    /// (every byte of the field, NULs included).
    pub bytes: crate::formatters::BytesEncoding,
    /// `[format.bytes_fields]`: `bytes` by field name (e.g. `qname =
    /// "hex"`), in every record type with a BYTES field of that name; a
    /// name that is no BYTES field is an error when the format is built.
    pub bytes_fields: std::collections::BTreeMap<String, crate::formatters::BytesEncoding>,
}

impl FormatConfig {
    /// The formatter settings.
    pub fn spec(&self) -> crate::formatters::FormatSpec {
        crate::formatters::FormatSpec {
            kind: self.kind,
            template: self.template.clone(),
            templates: self.templates.clone(),
            renumber: self.profile.renumber(),
            tsc: None,
            syslog: self.syslog.clone(),
            ipfix: self.ipfix.clone(),
            time_precision: self.time_precision,
            bytes: self.bytes,
            bytes_fields: self.bytes_fields.clone(),
        }
    }

    /// Compiles the format for `schemas` (the first takes `template`); a
    /// bad template or setting is [`ConfigError::Parse`] naming `[format]`,
    /// the schema and the template column.
    pub fn formatter(
        &self,
        schemas: &[&Schema],
    ) -> Result<crate::formatters::SchemaFormatter, ConfigError> {
        self.spec()
            .formatter(schemas)
            .map_err(|e| ConfigError::Parse(format!("[format]: {e}")))
    }

    /// [`formatter`](Self::formatter) for every NAT record type, NAT44
    /// session first.
    pub fn nat_formatter(&self) -> Result<crate::nat::NatFormatter, ConfigError> {
        self.formatter(&crate::nat::all())
    }
}
