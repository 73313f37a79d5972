//! IPFIX export (RFC 7011) of records by their schemas (e.g. the RFC 8158
//! NAT templates).
//!
//! Every schema becomes one template (a schema whose element for one field
//! depends on another field's value, [`SchemaMeta::ipfix_ie_by`](dplog_core::schema::SchemaMeta::ipfix_ie_by), one per
//! value: e.g. RFC 8158's quota-exceeded record per
//! `natQuotaExceededEvent` subtype): every field in schema order, in
//! network byte order, each with its schema size (reduced-size encoding,
//! RFC 7011 section 6.2), except as said below.
//!
//! Elements:
//! - a field with an IANA element id (`FieldDef::ie_id` > 0) goes out as
//!   that element;
//! - a field without one (`ie_id` 0) goes out as an enterprise-specific
//!   element (RFC 7011 section 3.2: the field specifier's element id has
//!   the enterprise bit [`ENTERPRISE_BIT`] set and is followed by a 4-byte
//!   Private Enterprise Number, [`IpfixOptions::enterprise_number`],
//!   default [`DOCUMENTATION_PEN`]). Its element id
//!   ([`Schema::enterprise_ie`]) is the one its schema declares
//!   ([`Schema::with_ipfix_enterprise_ie`]), else one derived from the
//!   field's name and type class
//!   ([`derived_enterprise_ie`](dplog_core::schema::derived_enterprise_ie)):
//!   the same in every template, run and program, so a (PEN, id) pair
//!   means one field name and class wherever it appears (RFC 7011 sections
//!   3.2, 6.2), and two record types' `bytesIn: u64` share one element,
//!   while an enum (codes with names) and a count of one name do not.
//!   An exporter whose record types would give one id two names or
//!   classes, or two enums that name one value differently, is refused
//!   when it is built. A schema read from a log written before
//!   ids were derived keeps its writer's ids, the field's 1-based position
//!   (past position [`MAX_ENTERPRISE_IE`], 32767, refused). The
//!   field chosen by [`SchemaMeta::ipfix_ie_by`](dplog_core::schema::SchemaMeta::ipfix_ie_by)
//!   takes its element from that table only (a value without one leaves
//!   it out, never as an enterprise element).
//!
//! Encoding by field kind, the same for IANA and enterprise elements:
//! unsigned integers, ports, protocol, enums (their integer value) and
//! IPv4 addresses as big-endian unsigned integers of the schema size;
//! IPv6, MAC and byte strings as their raw bytes (every byte of the
//! field, NULs included: [`Options::bytes`] is for the line formats);
//! timestamps (nanosecond, or TSC converted with the calibration) as
//! their element's abstract data type says (RFC 7011 section 6.1.7-6.1.10),
//! see "Time precision" below; booleans as one byte in the RFC 7011 section
//! 6.1.5 encoding, [`BOOL_TRUE`] (1) for a non-zero field and
//! [`BOOL_FALSE`] (2) for zero.
//!
//! Time precision ([`Options::time`], `[format] time_precision`):
//! - the stamp element is observationTimeSeconds (322, 4-byte
//!   dateTimeSeconds) for `s`, observationTimeMilliseconds (323, 8-byte
//!   dateTimeMilliseconds, ms since the epoch) for `ms` and when no
//!   precision is set, observationTimeMicroseconds (324,
//!   dateTimeMicroseconds) for `us`, observationTimeNanoseconds (325,
//!   dateTimeNanoseconds) for `ns`; the last two in NTP format (RFC 7011
//!   sections 6.1.9 and 6.1.10, RFC 5905: 32-bit seconds since
//!   1900-01-01, 32-bit binary fraction; microseconds with the fraction's
//!   low 11 bits zero). The fraction is rounded up to the next 2^-32 s
//!   (2^-21 s for microseconds) so that a reader that truncates it to
//!   nanoseconds (microseconds), as Wireshark does, gets the recorded
//!   value back exactly;
//! - a timestamp field whose IANA element is one of the dateTime elements
//!   (flowStart/flowEnd Seconds 150/151, Milliseconds 152/153,
//!   Microseconds 154/155, Nanoseconds 156/157, systemInitTimeMilliseconds
//!   160, collectionTimeMilliseconds 258, observationTime 322..=325)
//!   goes out in that element's type, whatever the precision (a
//!   milliseconds element cannot carry nanoseconds: give the field a
//!   nanoseconds element to export them);
//! - any other timestamp field (enterprise-specific, or an element that
//!   is not a dateTime one) in the stamp's type;
//! - drop reports' options records keep observationTimeMilliseconds.
//!
//! Time stamp: every data record carries the stamp element
//! (observationTimeMilliseconds, [`IE_OBSERVATION_TIME_MS`], 323, unless
//! the time precision picks another, see above; "323" below stands for
//! the stamp element) taken from the schema's event-time
//! field ([`SchemaMeta::event_time`](dplog_core::schema::SchemaMeta::event_time),
//! by default its first timestamp field), whatever that field's own
//! element id:
//! - an event-time field with element 323 is that element, in its place;
//! - otherwise observationTimeMilliseconds is the template's first element,
//!   and the event-time field itself is also exported in its place as its
//!   IANA element if it has one, not at all if it has none (its value is
//!   the stamp already);
//! - a schema without an event-time field gets the export time (message
//!   export time, whole seconds, in ms) as its first element;
//! - element 323 appears once per template: another field that declares
//!   it goes out as an enterprise element.
//!
//! Messages (RFC 7011 section 3.1):
//! - the header sequence number counts data records sent before the
//!   message, not messages (section 3.1, "Sequence Number");
//! - messages grow record by record up to [`IpfixOptions::mtu`] minus 28
//!   bytes of IPv4 and UDP headers; consecutive records of one template
//!   share a data set;
//! - the template set is sent before the first data record and again at
//!   the start of the first message after [`IpfixOptions::template_refresh_secs`]
//!   (default 20 s; RFC 7011 section 8.4 for UDP).
//!
//! Through the [`Formatter`](dplog_core::Formatter) interface each call
//! appends one data record to `out`: while `out` still ends with the
//! message this encoder opened, the record is added to it in place (its
//! set and message lengths are patched); once the consumer has written and
//! cleared `out`, the next record opens a new message. So every batch the
//! sink sees is a sequence of whole messages.

use std::time::{SystemTime, UNIX_EPOCH};

use dplog_core::schema::{enterprise_class, read_uint, FieldDef, FieldKind, Schema};

use crate::conv::TscCalibration;
use crate::template::{Options, Renumber, TimePrecision};

/// observationTimeMilliseconds, IANA element 323 (dateTimeMilliseconds).
pub const IE_OBSERVATION_TIME_MS: u16 = 323;
/// exportingProcessId, IANA element 144 (unsigned32): the scope of the
/// reliability statistics options record.
pub const IE_EXPORTING_PROCESS_ID: u16 = 144;
/// notSentFlowTotalCount, IANA element 166 (unsigned64, totalCounter).
pub const IE_NOT_SENT_FLOW_TOTAL_COUNT: u16 = 166;
/// Bytes of one Exporting Process Reliability Statistics data record:
/// exportingProcessId (4), notSentFlowTotalCount (8) and two
/// observationTimeMilliseconds (8 each).
pub const RELIABILITY_RECORD_LEN: usize = 28;
/// natQuotaExceededEvent, IANA element 466.
pub const IE_QUOTA_EVENT: u16 = 466;
/// Bytes of IPv4 and UDP headers under an IPFIX message.
pub const IP_UDP_OVERHEAD: usize = 28;
/// First template id (RFC 7011 section 3.4.1: 256 and above).
pub const FIRST_TEMPLATE_ID: u16 = 256;
/// The enterprise bit of a field specifier's element id (RFC 7011
/// section 3.2): set, a 4-byte Private Enterprise Number follows.
pub const ENTERPRISE_BIT: u16 = 0x8000;
/// Highest enterprise-specific element id (15 bits): a schema's fields
/// past this position cannot go out as enterprise elements.
pub const MAX_ENTERPRISE_IE: u16 = 0x7fff;
/// The default [`IpfixOptions::enterprise_number`]: 32473, the IANA
/// Private Enterprise Number reserved for documentation (RFC 5612), as in
/// the syslog SD-IDs. A deployment should configure its own.
pub const DOCUMENTATION_PEN: u32 = 32473;
/// RFC 7011 section 6.1.5 boolean: true.
pub const BOOL_TRUE: u8 = 1;
/// RFC 7011 section 6.1.5 boolean: false.
pub const BOOL_FALSE: u8 = 2;

/// Where the export time (message header, template refresh) comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum ExportClock {
    /// The system clock when a message is started (live export).
    #[default]
    System,
    /// The observation time of the record that starts the message
    /// (replays, files, deterministic tests).
    Record,
}

/// The smallest [`IpfixOptions::mtu`]: a message must hold a template
/// record or a whole data record.
pub const MIN_MTU: usize = 256;

/// IPFIX settings.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields, default))]
pub struct IpfixOptions {
    /// Path MTU in bytes; a message is at most `mtu - 28` bytes. Default
    /// 1500; at least [`MIN_MTU`].
    pub mtu: usize,
    /// Seconds between template re-sends. Default 20.
    pub template_refresh_secs: u32,
    /// Observation Domain ID in every message header. Default 1. A
    /// collector tells exporters apart by it and their address (nfcapd by
    /// nothing else): one per exporter of a host, kept across its runs.
    pub observation_domain_id: u32,
    /// Export-time source. Default `system`.
    pub export_clock: ExportClock,
    /// Private Enterprise Number (IANA PEN registry, RFC 7011 section 3.2)
    /// of the enterprise-specific elements: the fields without an IANA
    /// element id (see the module docs). Default [`DOCUMENTATION_PEN`]
    /// (32473); not 0 (reserved).
    pub enterprise_number: u32,
    /// exportingProcessId (IE 144), the scope of the Exporting Process
    /// Reliability Statistics records that carry drop reports (RFC 7011
    /// section 4.3). Default 1.
    pub exporting_process_id: u32,
}

impl Default for IpfixOptions {
    fn default() -> Self {
        Self {
            mtu: 1500,
            template_refresh_secs: 20,
            observation_domain_id: 1,
            export_clock: ExportClock::System,
            enterprise_number: DOCUMENTATION_PEN,
            exporting_process_id: 1,
        }
    }
}

/// observationTimeSeconds, IANA element 322 (dateTimeSeconds).
pub const IE_OBSERVATION_TIME_S: u16 = 322;
/// observationTimeMicroseconds, IANA element 324 (dateTimeMicroseconds).
pub const IE_OBSERVATION_TIME_US: u16 = 324;
/// observationTimeNanoseconds, IANA element 325 (dateTimeNanoseconds).
pub const IE_OBSERVATION_TIME_NS: u16 = 325;
/// Seconds from the NTP epoch (1900-01-01) to the Unix epoch (RFC 5905).
pub const NTP_UNIX_OFFSET: u64 = 2_208_988_800;

/// An IPFIX time encoding (RFC 7011 sections 6.1.7-6.1.10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TimeEnc {
    /// dateTimeSeconds: 4-byte seconds since the Unix epoch.
    Secs,
    /// dateTimeMilliseconds: 8-byte ms since the Unix epoch.
    Ms,
    /// dateTimeMicroseconds: NTP format, fraction's low 11 bits zero.
    NtpUs,
    /// dateTimeNanoseconds: NTP format.
    NtpNs,
}

impl TimeEnc {
    /// The stamp's element and encoding for a precision.
    fn stamp(p: Option<TimePrecision>) -> (u16, TimeEnc) {
        match p {
            Some(TimePrecision::S) => (IE_OBSERVATION_TIME_S, TimeEnc::Secs),
            None | Some(TimePrecision::Ms) => (IE_OBSERVATION_TIME_MS, TimeEnc::Ms),
            Some(TimePrecision::Us) => (IE_OBSERVATION_TIME_US, TimeEnc::NtpUs),
            Some(TimePrecision::Ns) => (IE_OBSERVATION_TIME_NS, TimeEnc::NtpNs),
        }
    }

    /// The type of an IANA dateTime element (IANA "IPFIX Information
    /// Elements"), `None` for any other element.
    fn of_element(ie: u16) -> Option<TimeEnc> {
        Some(match ie {
            150 | 151 | 322 => TimeEnc::Secs,
            152 | 153 | 160 | 258 | 323 => TimeEnc::Ms,
            154 | 155 | 324 => TimeEnc::NtpUs,
            156 | 157 | 325 => TimeEnc::NtpNs,
            _ => return None,
        })
    }

    /// Bytes on the wire.
    fn len(self) -> u16 {
        if self == TimeEnc::Secs {
            4
        } else {
            8
        }
    }

    /// Writes `ns` (since the Unix epoch) at `buf[..8]` and returns the
    /// bytes that are the value ([`len`](Self::len)). Out of line: the
    /// data record loop keeps the default (ms) path small.
    #[cold]
    #[inline(never)]
    fn write(self, buf: &mut [u8], ns: u64) -> usize {
        let w = match self {
            TimeEnc::Secs => (ns / 1_000_000_000) << 32,
            TimeEnc::Ms => ns / 1_000_000,
            TimeEnc::NtpUs | TimeEnc::NtpNs => ntp(ns, self == TimeEnc::NtpUs),
        };
        buf[..8].copy_from_slice(&w.to_be_bytes());
        self.len() as usize
    }
}

/// `ns` since the Unix epoch in NTP format (RFC 5905 section 6, as RFC
/// 7011 sections 6.1.9/6.1.10 use it): seconds since 1900 (modulo 2^32,
/// NTP era 1 from 2036) in the high 32 bits, the binary fraction in the
/// low 32, rounded up so that truncating it back gives the nanosecond
/// (`micros`: the microsecond, in the fraction's high 21 bits, the low 11
/// zero).
pub fn ntp(ns: u64, micros: bool) -> u64 {
    let secs = (ns / 1_000_000_000 + NTP_UNIX_OFFSET) & 0xffff_ffff;
    let frac_ns = ns % 1_000_000_000;
    let frac = if micros {
        ((frac_ns / 1_000) << 21).div_ceil(1_000_000) << 11
    } else {
        (frac_ns << 32).div_ceil(1_000_000_000)
    };
    (secs << 32) | frac
}

#[derive(Clone, Copy, Debug)]
enum Enc {
    /// Big-endian integer of `size` bytes read from the record.
    Uint { off: u16, size: u8, event: bool },
    /// Raw bytes (IPv6, MAC, strings).
    Raw { off: u16, size: u8 },
    /// ns timestamp -> 8-byte ms.
    Ms { off: u16, tsc: bool },
    /// ns timestamp -> dateTimeSeconds or NTP format (not ms).
    Time { off: u16, tsc: bool, enc: TimeEnc },
    /// The export time (schemas without a time field) as dateTimeSeconds
    /// or NTP format (not ms).
    Export { enc: TimeEnc },
    /// Bool -> RFC 7011 section 6.1.5 boolean (1 true, 2 false).
    Bool { off: u16 },
    /// The export time in ms (schemas without a time field).
    ExportMs,
}

#[derive(Clone, Debug)]
struct Tmpl {
    id: u16,
    schema_id: u16,
    subtype: Option<u32>,
    encs: Vec<Enc>,
    rec_len: usize,
    /// Template record: id, count, (ie, len)*.
    def: Vec<u8>,
    time_off: Option<(u16, bool)>,
    /// Shortest record (bytes) that holds every field read.
    needed: usize,
}

/// An IPFIX exporter for a set of schemas; see the module docs.
#[derive(Clone, Debug)]
pub struct IpfixEncoder {
    opts: IpfixOptions,
    /// The stamp element and its encoding ([`Options::time`]).
    stamp: (u16, TimeEnc),
    renumber: Option<Renumber>,
    tsc: Option<TscCalibration>,
    templates: Vec<Tmpl>,
    quota_field: Option<(u16, u16)>,
    seq: u32,
    last_templates: Option<u64>,
    msg_start: usize,
    msg_end: usize,
    set_start: usize,
    set_template: u16,
    open: bool,
    /// One data record being encoded: the longest `rec_len` plus 8 bytes
    /// of slack for whole-word stores.
    scratch: Vec<u8>,
    /// Template id of the reliability statistics options template (the
    /// one after the schemas' templates).
    report_id: u16,
    /// The options template has been sent (it goes out with the first
    /// drop report, then with every template refresh).
    report_template: bool,
    /// notSentFlowTotalCount: records reported dropped so far.
    not_sent_total: u64,
    /// The enterprise elements of the templates, one field name and
    /// class per id.
    elements: Vec<Element>,
}

/// An enterprise element of an exporter's templates: its id, and the
/// first field (name, [`enterprise_class`], record type, enum names)
/// that claimed it.
#[derive(Clone, Debug)]
struct Element {
    id: u16,
    name: String,
    class: &'static str,
    record_type: String,
    enum_names: Vec<(u32, String)>,
}

impl IpfixEncoder {
    /// Replaces the calibration that converts TSC timestamp fields to
    /// observationTimeMilliseconds (the consumer's, from
    /// `Formatter::tsc_calibration`); without one they are taken as
    /// nanoseconds ([`TscCalibration::IDENTITY`]).
    pub fn set_tsc_calibration(&mut self, cal: TscCalibration) {
        self.tsc = Some(cal);
    }

    /// Builds the templates of `schemas`.
    ///
    /// # Errors
    /// An MTU below 256, an enterprise number of 0, a schema whose data
    /// record or template record would not fit one message, one read from
    /// an older log with a field without an IANA element past position
    /// 32767, or two fields (of one or two schemas) whose different names
    /// or types would take one enterprise element id.
    pub fn new(schemas: &[&Schema], opts: Options, ipfix: IpfixOptions) -> Result<Self, String> {
        if ipfix.mtu < MIN_MTU {
            return Err(format!("ipfix mtu {} is below {MIN_MTU}", ipfix.mtu));
        }
        if ipfix.enterprise_number == 0 {
            return Err("ipfix enterprise_number 0 is reserved (IANA PEN registry)".into());
        }
        let mut e = IpfixEncoder {
            opts: ipfix,
            stamp: TimeEnc::stamp(opts.time),
            renumber: opts.renumber,
            tsc: opts.tsc,
            templates: Vec::new(),
            quota_field: None,
            seq: 0,
            last_templates: None,
            msg_start: 0,
            msg_end: usize::MAX,
            set_start: 0,
            set_template: 0,
            open: false,
            scratch: Vec::new(),
            report_id: 0,
            report_template: false,
            not_sent_total: 0,
            elements: Vec::new(),
        };
        for s in schemas {
            match &s.meta().ipfix_ie_by {
                Some(by) => {
                    let q = &s.fields()[by.selector];
                    e.quota_field = Some((q.offset, q.size));
                    for &(st, _) in &by.ies {
                        e.add(s, Some(st))?;
                    }
                    e.add(s, Some(0))?;
                }
                None => e.add(s, None)?,
            }
        }
        e.report_id = FIRST_TEMPLATE_ID + e.templates.len() as u16;
        Ok(e)
    }

    /// The Exporting Process Reliability Statistics options template
    /// record (RFC 7011 section 4.3): template id, field count 4, scope
    /// field count 1, then exportingProcessId (scope), notSentFlowTotalCount
    /// and observationTimeMilliseconds twice (the first and the last drop).
    fn report_template_record(&self) -> [u8; 22] {
        let mut r = [0u8; 22];
        r[0..2].copy_from_slice(&self.report_id.to_be_bytes());
        r[2..4].copy_from_slice(&4u16.to_be_bytes());
        r[4..6].copy_from_slice(&1u16.to_be_bytes());
        for (i, (ie, len)) in [
            (IE_EXPORTING_PROCESS_ID, 4u16),
            (IE_NOT_SENT_FLOW_TOTAL_COUNT, 8),
            (IE_OBSERVATION_TIME_MS, 8),
            (IE_OBSERVATION_TIME_MS, 8),
        ]
        .into_iter()
        .enumerate()
        {
            r[6 + 4 * i..8 + 4 * i].copy_from_slice(&ie.to_be_bytes());
            r[8 + 4 * i..10 + 4 * i].copy_from_slice(&len.to_be_bytes());
        }
        r
    }

    /// Template id of the reliability statistics options template (drop
    /// reports), the id after the schemas' templates.
    pub fn report_template_id(&self) -> u16 {
        self.report_id
    }

    /// Appends a drop report as an Exporting Process Reliability
    /// Statistics options data record (RFC 7011 section 4.3), opening a
    /// message and sending its options template (id
    /// [`report_template_id`](Self::report_template_id), in an options
    /// template set, set id 3) as needed, like [`push`](Self::push) does
    /// for data records:
    /// - exportingProcessId (144, scope): [`IpfixOptions::exporting_process_id`];
    /// - notSentFlowTotalCount (166): every record reported dropped by this
    ///   encoder so far, this report's `dropped` included (a total
    ///   counter: the records of one report are the difference between
    ///   two consecutive values);
    /// - observationTimeMilliseconds (323) twice, RFC 7011's "time first
    ///   flow dropped" and "time last flow dropped": the report's
    ///   `first_ns` and `last_ns` (wall clock) in ms.
    ///
    /// The template has no element for the report's reason (RFC 7011's
    /// has none): the reports of one interval's reasons are one options
    /// record each, with the same times, counted in the same total.
    ///
    /// The options template goes out with the first report and then with
    /// every template refresh; a stream without drops has none. Like a data
    /// record, the report advances the sequence number (RFC 7011 section
    /// 3.1 counts all Data Records, options data records included).
    pub fn push_drop_report(&mut self, r: &dplog_core::DropReport, out: &mut Vec<u8>) {
        self.not_sent_total = self.not_sent_total.wrapping_add(r.dropped);
        let rec_ns = if r.record_time_ns != 0 {
            r.record_time_ns
        } else {
            r.last_ns
        };
        let id = self.report_id;
        let tmpl_len = if self.report_template { 0 } else { 4 + 22 };
        self.open_for(out, id, tmpl_len + RELIABILITY_RECORD_LEN, Some(rec_ns));
        if !self.report_template {
            self.push_report_template(out);
        }
        if self.set_template != id {
            self.set_start = out.len();
            self.set_template = id;
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&4u16.to_be_bytes());
        }
        out.extend_from_slice(&self.opts.exporting_process_id.to_be_bytes());
        out.extend_from_slice(&self.not_sent_total.to_be_bytes());
        out.extend_from_slice(&(r.first_ns / 1_000_000).to_be_bytes());
        out.extend_from_slice(&(r.last_ns / 1_000_000).to_be_bytes());
        self.seq = self.seq.wrapping_add(1);
        self.patch(out);
    }

    /// Appends the options template set of the drop reports to the open
    /// message.
    fn push_report_template(&mut self, out: &mut Vec<u8>) {
        let set_start = out.len();
        out.extend_from_slice(&3u16.to_be_bytes());
        out.extend_from_slice(&4u16.to_be_bytes());
        out.extend_from_slice(&self.report_template_record());
        self.finish_set(out, set_start);
        self.patch_message_len(out);
        self.set_template = 0;
        self.report_template = true;
    }

    fn max_message(&self) -> usize {
        self.opts.mtu - IP_UDP_OVERHEAD
    }

    /// Records that enterprise element `id` is field `f` of `s`: an id is
    /// one field name and class ([`enterprise_class`]: an enum is not a
    /// count) across every template of the exporter (RFC 7011 sections
    /// 3.2, 6.2), and for an enum one meaning per value: two enum fields
    /// that name one value differently are two elements (one may name
    /// values the other does not, as a table that grows).
    ///
    /// Errors: the id taken by another field name or class, or by an
    /// enum naming a value otherwise, naming both fields and how to
    /// resolve it.
    fn claim_element(&mut self, id: u16, s: &Schema, f: &FieldDef) -> Result<(), String> {
        let class = enterprise_class(f.kind);
        let names: Vec<(u32, String)> = f
            .enum_names
            .iter()
            .map(|e| (e.value, e.name.to_string()))
            .collect();
        let Some(e) = self.elements.iter_mut().find(|e| e.id == id) else {
            self.elements.push(Element {
                id,
                name: f.name.to_string(),
                class,
                record_type: s.name().to_string(),
                enum_names: names,
            });
            return Ok(());
        };
        let what = if e.name != f.name || e.class != class {
            None
        } else {
            let differ = names.iter().find_map(|(v, n)| {
                e.enum_names
                    .iter()
                    .find(|(w, m)| w == v && m != n)
                    .map(|(_, m)| (*v, m.clone(), n.clone()))
            });
            match differ {
                None => {
                    // The element's names: the union of its fields'.
                    for (v, n) in names {
                        if !e.enum_names.iter().any(|(w, _)| *w == v) {
                            e.enum_names.push((v, n));
                        }
                    }
                    return Ok(());
                }
                Some(d) => Some(d),
            }
        };
        let clash = match what {
            None => format!(
                "field {} ({}) of record type {} and field {} ({class}) of record type {}",
                e.name,
                e.class,
                e.record_type,
                f.name,
                s.name()
            ),
            Some((v, m, n)) => format!(
                "field {} (enum, value {v} named {m:?}) of record type {} and field {} \
                 (enum, value {v} named {n:?}) of record type {}",
                e.name,
                e.record_type,
                f.name,
                s.name()
            ),
        };
        Err(format!(
            "ipfix: enterprise element {}/{id} would be {clash}: declare an id of its own \
             for one of them (ie_id = 0x8000 | id, C DPLOG_IE_ENTERPRISE | id, or \
             Schema::with_ipfix_enterprise_ie; re-exporting a log: dplog-cat --ipfix-ie \
             {}.{}=0x8000|<id>) or rename it",
            self.opts.enterprise_number,
            s.name(),
            f.name,
        ))
    }

    fn add(&mut self, s: &Schema, subtype: Option<u32>) -> Result<(), String> {
        let id = FIRST_TEMPLATE_ID + self.templates.len() as u16;
        let pen = self.opts.enterprise_number;
        let mut encs = Vec::new();
        // (element id without the enterprise bit, length, enterprise number).
        let mut ies: Vec<(u16, u16, Option<u32>)> = Vec::new();
        let (stamp_ie, stamp_enc) = self.stamp;
        // A timestamp field in `enc`, and its length.
        let time = |f: &FieldDef, enc: TimeEnc| {
            let (off, tsc) = (f.offset, f.kind == FieldKind::TscTimestamp);
            match enc {
                TimeEnc::Ms => Enc::Ms { off, tsc },
                enc => Enc::Time { off, tsc, enc },
            }
        };
        // The event-time field (only a timestamp kind can stamp a record).
        let event = s.meta().event_time.filter(|&i| {
            s.fields()
                .get(i)
                .is_some_and(|f| matches!(f.kind, FieldKind::NsTimestamp | FieldKind::TscTimestamp))
        });
        let time_off = event.map(|i| {
            (
                s.fields()[i].offset,
                s.fields()[i].kind == FieldKind::TscTimestamp,
            )
        });
        // The stamp element goes first unless the event-time field is
        // itself that element, which then stays in its place.
        match event {
            Some(i) if s.fields()[i].ie_id == stamp_ie => {}
            Some(i) => {
                encs.push(time(&s.fields()[i], stamp_enc));
                ies.push((stamp_ie, stamp_enc.len(), None));
            }
            None => {
                encs.push(match stamp_enc {
                    TimeEnc::Ms => Enc::ExportMs,
                    enc => Enc::Export { enc },
                });
                ies.push((stamp_ie, stamp_enc.len(), None));
            }
        }
        let ie_by = s.meta().ipfix_ie_by.as_ref();
        for (i, f) in s.fields().iter().enumerate() {
            let mut ie = f.ie_id;
            if let Some(by) = ie_by.filter(|b| b.field == i) {
                ie = match by.ies.iter().find(|(v, _)| Some(*v) == subtype) {
                    Some(&(_, ie)) => ie,
                    None => continue,
                };
            }
            let is_event = event == Some(i);
            // The stamp element is the record's stamp only: another field
            // that claims it goes out as an enterprise element.
            let enterprise = ie == 0 || (ie == stamp_ie && !is_event);
            if is_event && ie == 0 {
                // Already exported as observationTimeMilliseconds.
                continue;
            }
            let (ie, pen) = if enterprise {
                let Some(id) = s.enterprise_ie(i) else {
                    return Err(format!(
                        "schema {}: field {} (#{}) has no IANA element and is past the \
                         {MAX_ENTERPRISE_IE} enterprise element ids",
                        s.name(),
                        f.name,
                        i + 1
                    ));
                };
                self.claim_element(id, s, f)?;
                (id, Some(pen))
            } else {
                (ie, None)
            };
            let (off, size) = (f.offset, f.size as u8);
            let enc = match f.kind {
                // Converted with the calibration (identity until one is
                // set, see `set_tsc_calibration`).
                // In its element's type; the stamp's if it has none.
                FieldKind::NsTimestamp | FieldKind::TscTimestamp => time(
                    f,
                    pen.map_or_else(|| TimeEnc::of_element(ie), |_| None)
                        .unwrap_or(stamp_enc),
                ),
                FieldKind::Ipv6 | FieldKind::Mac | FieldKind::Bytes => Enc::Raw { off, size },
                FieldKind::Bool => Enc::Bool { off },
                _ => Enc::Uint {
                    off,
                    size,
                    event: pen.is_none() && self.renumber.is_some_and(|r| r.ie_id == ie),
                },
            };
            let len = match enc {
                Enc::Ms { .. } => 8,
                Enc::Time { enc, .. } => enc.len(),
                _ => size as u16,
            };
            encs.push(enc);
            ies.push((ie, len, pen));
        }
        let rec_len: usize = ies.iter().map(|&(_, l, _)| l as usize).sum();
        if 16 + 4 + rec_len > self.max_message() {
            return Err(format!(
                "schema {}: a {rec_len}-byte data record does not fit a {}-byte message",
                s.name(),
                self.max_message()
            ));
        }
        let mut def = Vec::with_capacity(4 + 8 * ies.len());
        def.extend_from_slice(&id.to_be_bytes());
        def.extend_from_slice(&(ies.len() as u16).to_be_bytes());
        for (ie, len, pen) in ies {
            // RFC 7011 section 3.2: the enterprise bit on the element id,
            // then the 4-byte enterprise number.
            let bit = if pen.is_some() { ENTERPRISE_BIT } else { 0 };
            def.extend_from_slice(&(ie | bit).to_be_bytes());
            def.extend_from_slice(&len.to_be_bytes());
            if let Some(pen) = pen {
                def.extend_from_slice(&pen.to_be_bytes());
            }
        }
        // A template set header, the template record and a message header.
        if 16 + 4 + def.len() > self.max_message() {
            return Err(format!(
                "schema {}: its {}-byte template record does not fit a {}-byte message",
                s.name(),
                def.len(),
                self.max_message()
            ));
        }
        let needed = encs
            .iter()
            .map(|e| match *e {
                Enc::Uint { off, size, .. } | Enc::Raw { off, size } => {
                    off as usize + size as usize
                }
                Enc::Ms { off, .. } | Enc::Time { off, .. } => off as usize + 8,
                Enc::Bool { off } => off as usize + 1,
                Enc::ExportMs | Enc::Export { .. } => 0,
            })
            .max()
            .unwrap_or(0);
        if self.scratch.len() < rec_len + 8 {
            self.scratch.resize(rec_len + 8, 0);
        }
        self.templates.push(Tmpl {
            id,
            schema_id: s.id(),
            subtype,
            encs,
            rec_len,
            def,
            time_off,
            needed,
        });
        Ok(())
    }

    /// Data records exported so far (the next message's sequence number).
    pub fn sequence(&self) -> u32 {
        self.seq
    }

    /// Template ids and the schema id (and quota subtype) each describes.
    pub fn template_ids(&self) -> Vec<(u16, u16, Option<u32>)> {
        self.templates
            .iter()
            .map(|t| (t.id, t.schema_id, t.subtype))
            .collect()
    }

    fn ns(&self, rec: &[u8], off: u16, tsc: bool) -> u64 {
        let v = read_uint(rec, off as usize, 8);
        match (tsc, self.tsc) {
            (true, Some(c)) => c.to_ns(v),
            _ => v,
        }
    }

    fn find(&self, rec: &[u8]) -> Option<usize> {
        let sid = u16::from_ne_bytes([rec[2], rec[3]]);
        let sub = self
            .quota_field
            .map(|(o, s)| read_uint(rec, o as usize, s as usize) as u32);
        let hit = |sub: Option<u32>| {
            self.templates
                .iter()
                .position(|t| t.schema_id == sid && (t.subtype.is_none() || t.subtype == sub))
        };
        // A selector value without its own template takes the one without
        // the varying element (subtype 0).
        hit(sub).or_else(|| sub.and_then(|_| hit(Some(0))))
    }

    /// Appends one data record (opening a message, and sending templates,
    /// as needed). Returns `false` and appends nothing for a record whose
    /// schema has no template or that is shorter than its fields.
    pub fn push(&mut self, rec: &[u8], out: &mut Vec<u8>) -> bool {
        if rec.len() < 8 {
            return false;
        }
        let Some(ti) = self.find(rec) else {
            return false;
        };
        let t = &self.templates[ti];
        if rec.len() < t.needed {
            return false;
        }
        let rec_ns = t.time_off.map(|(o, tsc)| self.ns(rec, o, tsc));
        let (t_id, rec_len) = (t.id, t.rec_len);
        let export_s = self.open_for(out, t_id, rec_len, rec_ns);
        let t = &self.templates[ti];
        if self.set_template != t.id {
            self.set_start = out.len();
            self.set_template = t.id;
            out.extend_from_slice(&t.id.to_be_bytes());
            out.extend_from_slice(&4u16.to_be_bytes());
        }
        let export_ms = export_s * 1000;
        // The record is built in `scratch`: every integer is one 8-byte
        // big-endian store of the value shifted to the top, advanced by its
        // size (the next store overwrites the rest), then one copy out.
        let buf = &mut self.scratch[..];
        let mut n = 0usize;
        for enc in &t.encs {
            match *enc {
                Enc::Uint { off, size, event } => {
                    let mut v = read_uint(rec, off as usize, size as usize);
                    if event && v < 256 {
                        if let Some(r) = &self.renumber {
                            v = r.map(v);
                        }
                    }
                    let size = (size as usize).min(8);
                    let w = if size == 0 { 0 } else { v << (64 - 8 * size) };
                    buf[n..n + 8].copy_from_slice(&w.to_be_bytes());
                    n += size;
                }
                Enc::Raw { off, size } => {
                    let (o, len) = (off as usize, size as usize);
                    buf[n..n + len].copy_from_slice(&rec[o..o + len]);
                    n += len;
                }
                Enc::Ms { off, tsc } => {
                    let ns = match (tsc, self.tsc) {
                        (true, Some(c)) => c.to_ns(read_uint(rec, off as usize, 8)),
                        _ => read_uint(rec, off as usize, 8),
                    };
                    buf[n..n + 8].copy_from_slice(&(ns / 1_000_000).to_be_bytes());
                    n += 8;
                }
                Enc::Bool { off } => {
                    buf[n] = if rec[off as usize] != 0 {
                        BOOL_TRUE
                    } else {
                        BOOL_FALSE
                    };
                    n += 1;
                }
                Enc::ExportMs => {
                    buf[n..n + 8].copy_from_slice(&export_ms.to_be_bytes());
                    n += 8;
                }
                // Out of line: the default (ms) loop stays as small.
                Enc::Time { off, tsc, enc } => {
                    let ns = match (tsc, self.tsc) {
                        (true, Some(c)) => c.to_ns(read_uint(rec, off as usize, 8)),
                        _ => read_uint(rec, off as usize, 8),
                    };
                    n += enc.write(&mut buf[n..n + 8], ns);
                }
                Enc::Export { enc } => {
                    n += enc.write(&mut buf[n..n + 8], export_s * 1_000_000_000);
                }
            }
        }
        out.extend_from_slice(&buf[..n]);
        self.seq = self.seq.wrapping_add(1);
        self.patch(out);
        true
    }

    /// Makes `out` end with an open message that has room for a
    /// `rec_len`-byte record of template `t_id` (and its set header if the
    /// last set is another one): continues the message this encoder left
    /// at the end of `out`, or starts one, sending the templates first
    /// when they are due. Returns the export time (s) of the record: the
    /// continued message's, or the clock's for a new message.
    fn open_for(
        &mut self,
        out: &mut Vec<u8>,
        t_id: u16,
        rec_len: usize,
        rec_ns: Option<u64>,
    ) -> u64 {
        let continuing = self.open && out.len() == self.msg_end && self.msg_start < out.len();
        let every = self.opts.template_refresh_secs as u64;
        let refresh_due =
            |now_s: u64, last: Option<u64>| last.map_or(true, |l| now_s >= l.saturating_add(every));
        let add = rec_len
            + if continuing && self.set_template == t_id {
                0
            } else {
                4
            };
        let fits = continuing && out.len() - self.msg_start + add <= self.max_message();
        // The export time of a continued message is the one in its header.
        let export_s = if fits {
            u32::from_be_bytes(
                out[self.msg_start + 4..self.msg_start + 8]
                    .try_into()
                    .unwrap(),
            ) as u64
        } else {
            match self.opts.export_clock {
                ExportClock::System => SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
                ExportClock::Record => rec_ns.unwrap_or(0) / 1_000_000_000,
            }
        };
        if !fits || refresh_due(export_s, self.last_templates) {
            let now = if fits {
                match self.opts.export_clock {
                    ExportClock::System => SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs()),
                    ExportClock::Record => rec_ns.unwrap_or(0) / 1_000_000_000,
                }
            } else {
                export_s
            };
            self.start_message(out, now);
            if refresh_due(now, self.last_templates) {
                self.push_templates(out, now);
            }
        }
        export_s
    }

    fn start_message(&mut self, out: &mut Vec<u8>, export_s: u64) {
        self.msg_start = out.len();
        out.extend_from_slice(&10u16.to_be_bytes());
        out.extend_from_slice(&16u16.to_be_bytes());
        out.extend_from_slice(&(export_s as u32).to_be_bytes());
        out.extend_from_slice(&self.seq.to_be_bytes());
        out.extend_from_slice(&self.opts.observation_domain_id.to_be_bytes());
        self.open = true;
        self.set_template = 0;
        self.set_start = 0;
        self.msg_end = out.len();
    }

    fn push_templates(&mut self, out: &mut Vec<u8>, now: u64) {
        // Template sets (id 2) of at most one message each; extra template
        // sets go into messages of their own.
        let mut set_start = out.len();
        out.extend_from_slice(&2u16.to_be_bytes());
        out.extend_from_slice(&4u16.to_be_bytes());
        for i in 0..self.templates.len() {
            let def_len = self.templates[i].def.len();
            if out.len() - self.msg_start + def_len > self.max_message() {
                self.finish_set(out, set_start);
                self.patch_message_len(out);
                self.start_message(out, now);
                set_start = out.len();
                out.extend_from_slice(&2u16.to_be_bytes());
                out.extend_from_slice(&4u16.to_be_bytes());
            }
            out.extend_from_slice(&self.templates[i].def);
        }
        self.finish_set(out, set_start);
        self.patch_message_len(out);
        self.set_template = 0;
        self.last_templates = Some(now);
        if self.report_template {
            // The drop reports' options template, once it is in use.
            if out.len() - self.msg_start + 4 + 22 > self.max_message() {
                self.start_message(out, now);
            }
            self.push_report_template(out);
        }
    }

    fn finish_set(&self, out: &mut [u8], set_start: usize) {
        let len = (out.len() - set_start) as u16;
        out[set_start + 2..set_start + 4].copy_from_slice(&len.to_be_bytes());
    }

    fn patch_message_len(&mut self, out: &mut [u8]) {
        let len = (out.len() - self.msg_start) as u16;
        out[self.msg_start + 2..self.msg_start + 4].copy_from_slice(&len.to_be_bytes());
        self.msg_end = out.len();
    }

    fn patch(&mut self, out: &mut [u8]) {
        self.finish_set(out, self.set_start);
        self.patch_message_len(out);
    }
}

/// Splits a byte stream of IPFIX messages into messages (by the header's
/// length field); stops at the first malformed or truncated one.
pub fn split_messages(mut b: &[u8]) -> Vec<&[u8]> {
    let mut v = Vec::new();
    while b.len() >= 16 {
        let len = u16::from_be_bytes([b[2], b[3]]) as usize;
        if u16::from_be_bytes([b[0], b[1]]) != 10 || len < 16 || len > b.len() {
            break;
        }
        v.push(&b[..len]);
        b = &b[len..];
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use dplog_core::schema::derived_enterprise_ie;

    /// 2026-01-01T00:00:01.234567891Z.
    const T: u64 = 1_767_225_601_234_567_891;
    const T_MS: u64 = 1_767_225_601_234;

    /// An ACL-drop schema: IANA elements and five fields without one by
    /// default (the timestamp, which is the event time; reason, rule,
    /// logged, tag).
    fn acl(ts_ie: u16) -> Schema {
        Schema::new(
            300,
            "aclDrop",
            56,
            vec![
                FieldDef::new("ts", 8, 8, FieldKind::NsTimestamp, ts_ie),
                FieldDef::new("sourceIPv6Address", 16, 16, FieldKind::Ipv6, 27),
                FieldDef::new("sourceMacAddress", 32, 6, FieldKind::Mac, 56),
                FieldDef::new("vlanId", 38, 2, FieldKind::U16, 58),
                FieldDef::new("reason", 40, 1, FieldKind::Enum, 0),
                FieldDef::new("protocolIdentifier", 41, 1, FieldKind::Protocol, 4),
                FieldDef::new("sourceTransportPort", 42, 2, FieldKind::Port, 7),
                FieldDef::new("rule", 44, 4, FieldKind::U32, 0),
                FieldDef::new("logged", 48, 1, FieldKind::Bool, 0),
                FieldDef::new("tag", 49, 3, FieldKind::Bytes, 0),
            ],
        )
        .unwrap()
    }

    fn acl_record(logged: u8) -> Vec<u8> {
        let mut r = vec![0u8; 56];
        r[0..2].copy_from_slice(&56u16.to_ne_bytes());
        r[2..4].copy_from_slice(&300u16.to_ne_bytes());
        r[8..16].copy_from_slice(&T.to_ne_bytes());
        r[16..32].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        r[32..38].copy_from_slice(&[0x02, 0, 0x5e, 0x10, 0x20, 0x30]);
        r[38..40].copy_from_slice(&100u16.to_ne_bytes());
        r[40] = 3;
        r[41] = 17;
        r[42..44].copy_from_slice(&5353u16.to_ne_bytes());
        r[44..48].copy_from_slice(&0x0102_0304u32.to_ne_bytes());
        r[48] = logged;
        r[49..52].copy_from_slice(b"ab\0");
        r
    }

    fn encoder(s: &Schema, pen: u32) -> Result<IpfixEncoder, String> {
        IpfixEncoder::new(
            &[s],
            Options::default(),
            IpfixOptions {
                export_clock: ExportClock::Record,
                enterprise_number: pen,
                ..Default::default()
            },
        )
    }

    /// (element id with the enterprise bit, length, PEN) of the single
    /// template record in the first message of `out`.
    fn template_fields(out: &[u8]) -> Vec<(u16, u16, Option<u32>)> {
        let be16 = |o: usize| u16::from_be_bytes([out[o], out[o + 1]]);
        assert_eq!(be16(16), 2, "template set after the header");
        let count = be16(22) as usize;
        let mut o = 24;
        let mut v = Vec::new();
        for _ in 0..count {
            let (ie, len) = (be16(o), be16(o + 2));
            o += 4;
            let pen = (ie & ENTERPRISE_BIT != 0).then(|| {
                o += 4;
                u32::from_be_bytes(out[o - 4..o].try_into().unwrap())
            });
            v.push((ie, len, pen));
        }
        assert_eq!(o, 16 + be16(18) as usize, "template set length");
        v
    }

    #[test]
    fn fields_without_iana_element_are_enterprise_elements() {
        let s = acl(0);
        let mut e = encoder(&s, 32473).unwrap();
        let mut out = Vec::new();
        assert!(e.push(&acl_record(1), &mut out));
        let pen = 32473u32.to_be_bytes();
        let mut tmpl = vec![0x00, 0x02, 0x00, 0x00, 0x01, 0x00, 0x00, 10];
        for (ie, len, p) in [
            (323u16, 8u16, false),
            (27, 16, false),
            (56, 6, false),
            (58, 2, false),
            (ENTERPRISE_BIT | s.enterprise_ie(4).unwrap(), 1, true),
            (4, 1, false),
            (7, 2, false),
            (ENTERPRISE_BIT | s.enterprise_ie(7).unwrap(), 4, true),
            (ENTERPRISE_BIT | s.enterprise_ie(8).unwrap(), 1, true),
            (ENTERPRISE_BIT | s.enterprise_ie(9).unwrap(), 3, true),
        ] {
            tmpl.extend_from_slice(&ie.to_be_bytes());
            tmpl.extend_from_slice(&len.to_be_bytes());
            if p {
                tmpl.extend_from_slice(&pen);
            }
        }
        let tlen = tmpl.len() as u16;
        tmpl[2..4].copy_from_slice(&tlen.to_be_bytes());
        assert_eq!(tlen, 4 + 4 + 10 * 4 + 4 * 4);
        let mut data = vec![0x01, 0x00, 0x00, 4 + 44];
        data.extend_from_slice(&T_MS.to_be_bytes());
        data.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        data.extend_from_slice(&[0x02, 0, 0x5e, 0x10, 0x20, 0x30]);
        data.extend_from_slice(&[0, 100, 3, 17, 0x14, 0xe9, 1, 2, 3, 4, 1]);
        data.extend_from_slice(b"ab\0");
        let mut msg = vec![0x00, 0x0a, 0, 0];
        msg.extend_from_slice(&((T / 1_000_000_000) as u32).to_be_bytes());
        msg.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1]);
        msg.extend_from_slice(&tmpl);
        msg.extend_from_slice(&data);
        let mlen = msg.len() as u16;
        msg[2..4].copy_from_slice(&mlen.to_be_bytes());
        assert_eq!(out, msg);

        // A false bool is 2, in the same data set.
        let n = out.len();
        assert!(e.push(&acl_record(0), &mut out));
        assert_eq!(out.len(), n + 44);
        assert_eq!(out[n + 40], 2);
    }

    #[test]
    fn the_enterprise_number_is_configurable_and_not_zero() {
        let s = acl(0);
        let mut e = encoder(&s, 0xdead_beef).unwrap();
        let mut out = Vec::new();
        assert!(e.push(&acl_record(1), &mut out));
        let f = template_fields(&out);
        let ent: Vec<_> = f.iter().filter(|x| x.2.is_some()).collect();
        assert_eq!(ent.len(), 4);
        assert!(ent.iter().all(|x| x.2 == Some(0xdead_beef)));
        let err = encoder(&s, 0).unwrap_err();
        assert!(err.contains("enterprise_number 0"), "{err}");
    }

    #[test]
    fn the_event_time_field_stamps_the_record_whatever_its_element() {
        // ie 323 on the event-time field: in place, not twice.
        let s = acl(323);
        let mut out = Vec::new();
        encoder(&s, 32473).unwrap().push(&acl_record(1), &mut out);
        let f = template_fields(&out);
        assert_eq!(f.len(), 10);
        assert_eq!(f[0], (323, 8, None));
        assert_eq!(f.iter().filter(|x| x.0 == 323).count(), 1);
        assert_eq!(&out[out.len() - 44..out.len() - 36], &T_MS.to_be_bytes());

        // An IANA element other than 323 (flowStartMilliseconds): the
        // stamp first, then the field as its own element, same value.
        let s = acl(152);
        let mut out = Vec::new();
        encoder(&s, 32473).unwrap().push(&acl_record(1), &mut out);
        let f = template_fields(&out);
        assert_eq!(&f[..2], &[(323, 8, None), (152, 8, None)]);
        let d = &out[out.len() - 52..];
        assert_eq!(&d[..8], &T_MS.to_be_bytes());
        assert_eq!(&d[8..16], &T_MS.to_be_bytes());

        // No event time: the export time first; the timestamp field (no
        // IANA element) is an enterprise element of its own, in ms.
        let s = acl(0).with_event_time(None).unwrap();
        let mut e = IpfixEncoder::new(
            &[&s],
            Options::default(),
            IpfixOptions {
                export_clock: ExportClock::System,
                ..Default::default()
            },
        )
        .unwrap();
        let mut out = Vec::new();
        e.push(&acl_record(1), &mut out);
        let f = template_fields(&out);
        let id = ENTERPRISE_BIT | s.enterprise_ie(0).unwrap();
        assert_eq!(&f[..2], &[(323, 8, None), (id, 8, Some(32473))]);
        let export_s = u32::from_be_bytes(out[4..8].try_into().unwrap()) as u64;
        let d = &out[out.len() - 52..];
        assert_eq!(&d[..8], &(export_s * 1000).to_be_bytes());
        assert_eq!(&d[8..16], &T_MS.to_be_bytes());
    }

    #[test]
    fn a_second_field_claiming_element_323_is_an_enterprise_element() {
        let s = Schema::new(
            301,
            "twoTimes",
            24,
            vec![
                FieldDef::new("seen", 8, 8, FieldKind::NsTimestamp, 323),
                FieldDef::new("at", 16, 8, FieldKind::NsTimestamp, 323),
            ],
        )
        .unwrap()
        .with_event_time(Some("at"))
        .unwrap();
        let mut r = vec![0u8; 24];
        r[0..2].copy_from_slice(&24u16.to_ne_bytes());
        r[2..4].copy_from_slice(&301u16.to_ne_bytes());
        r[8..16].copy_from_slice(&(T - 5_000_000_000).to_ne_bytes());
        r[16..24].copy_from_slice(&T.to_ne_bytes());
        let mut out = Vec::new();
        assert!(encoder(&s, 32473).unwrap().push(&r, &mut out));
        let f = template_fields(&out);
        let seen = ENTERPRISE_BIT | derived_enterprise_ie("seen", FieldKind::NsTimestamp);
        assert_eq!(f, vec![(seen, 8, Some(32473)), (323, 8, None)]);
        let d = &out[out.len() - 16..];
        assert_eq!(&d[..8], &(T_MS - 5000).to_be_bytes());
        assert_eq!(&d[8..], &T_MS.to_be_bytes());
    }

    #[cfg(feature = "serde")]
    #[test]
    fn enterprise_number_is_a_config_key_with_its_default() {
        let o: IpfixOptions = serde_json::from_str(r#"{"enterprise_number": 12345}"#).unwrap();
        assert_eq!(o.enterprise_number, 12345);
        assert_eq!(o.mtu, 1500);
        let o: IpfixOptions = serde_json::from_str("{}").unwrap();
        assert_eq!(o.enterprise_number, DOCUMENTATION_PEN);
    }

    #[test]
    fn drop_reports_send_their_options_template_once_and_with_every_refresh() {
        let s = acl(0);
        let mut e = encoder(&s, 32473).unwrap();
        assert_eq!(e.report_template_id(), 257);
        let sets = |m: &[u8]| {
            let mut v = Vec::new();
            let mut o = 16;
            while o < m.len() {
                v.push(u16::from_be_bytes([m[o], m[o + 1]]));
                o += u16::from_be_bytes([m[o + 2], m[o + 3]]) as usize;
            }
            v
        };
        let mut out = Vec::new();
        assert!(e.push(&acl_record(1), &mut out));
        let rep = dplog_core::DropReport::new(0, 3, T, T + 1_000_000).with_record_time(T);
        e.push_drop_report(&rep, &mut out);
        e.push_drop_report(&rep, &mut out);
        // One message: templates, data, the options template once, two
        // reports in one set.
        let msgs = split_messages(&out);
        assert_eq!(msgs.len(), 1);
        assert_eq!(sets(msgs[0]), vec![2, 256, 3, 257]);
        let d = &out[out.len() - 56..];
        assert_eq!(&d[0..4], &1u32.to_be_bytes(), "exportingProcessId");
        assert_eq!(&d[4..12], &3u64.to_be_bytes(), "running total");
        assert_eq!(&d[12..20], &T_MS.to_be_bytes());
        assert_eq!(&d[20..28], &(T_MS + 1).to_be_bytes());
        assert_eq!(&d[32..40], &6u64.to_be_bytes(), "running total");
        // Reports count as data records in the sequence.
        assert_eq!(e.sequence(), 3);
        // The next batch (the consumer wrote and cleared the last), 30 s of
        // record time later: a new message with the refresh, the options
        // template included.
        let mut r = acl_record(1);
        r[8..16].copy_from_slice(&(T + 30_000_000_000).to_ne_bytes());
        let mut next = Vec::new();
        assert!(e.push(&r, &mut next));
        assert_eq!(sets(&next), vec![2, 3, 256]);
        assert_eq!(u32::from_be_bytes(next[8..12].try_into().unwrap()), 3);
    }

    #[test]
    fn a_template_too_big_for_a_message_is_refused() {
        // 60 one-byte fields without an IANA element: 8 bytes each in the
        // template (484 bytes with its header), 60 in a data record.
        let fields = (0..60)
            .map(|i| FieldDef::new(format!("f{i}"), 8 + i, 1, FieldKind::U8, 0))
            .collect();
        let s = Schema::new(302, "wide", 68, fields).unwrap();
        let opts = |mtu| IpfixOptions {
            mtu,
            ..Default::default()
        };
        let err = IpfixEncoder::new(&[&s], Options::default(), opts(256)).unwrap_err();
        assert!(err.contains("template record does not fit"), "{err}");
        assert!(IpfixEncoder::new(&[&s], Options::default(), opts(576)).is_ok());
    }

    /// NTP format: a reader that truncates the fraction gets back every
    /// nanosecond (microsecond, with the low 11 bits zero) exactly, and
    /// the seconds count from 1900.
    #[test]
    fn ntp_fraction_truncates_back_to_the_recorded_time() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut fracs = vec![0u64, 1, 999, 1_000, 999_999, 1_000_000, 999_999_999];
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            fracs.push(x % 1_000_000_000);
        }
        for frac in fracs {
            let ns = T / 1_000_000_000 * 1_000_000_000 + frac;
            let v = ntp(ns, false);
            assert_eq!(v >> 32, T / 1_000_000_000 + NTP_UNIX_OFFSET);
            assert_eq!(((v & 0xffff_ffff) * 1_000_000_000) >> 32, frac, "{frac}");
            let v = ntp(ns, true);
            assert_eq!(v & 0x7ff, 0, "{frac}");
            assert_eq!(
                ((v & 0xffff_ffff) * 1_000_000) >> 32,
                frac / 1_000,
                "{frac}"
            );
        }
    }
}
