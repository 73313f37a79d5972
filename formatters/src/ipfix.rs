//! IPFIX export (RFC 7011) of records by their schemas (e.g. the RFC 8158
//! NAT templates).
//!
//! Every schema becomes one template (a schema whose element for one field
//! depends on another field's value, [`SchemaMeta::ipfix_ie_by`](dplog_core::schema::SchemaMeta::ipfix_ie_by), one per
//! value: e.g. RFC 8158's quota-exceeded record per
//! `natQuotaExceededEvent` subtype): the fields that have an IANA
//! element id, in schema order, each with its schema size (reduced-size
//! encoding, RFC 7011 section 6.2), in network byte order. Every data record
//! carries observationTimeMilliseconds (323); a schema without it gets the
//! export time.
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

use dplog_core::schema::{read_uint, FieldKind, Schema};

use crate::conv::TscCalibration;
use crate::template::{Options, Renumber};

/// observationTimeMilliseconds, IANA element 323 (dateTimeMilliseconds).
pub const IE_OBSERVATION_TIME_MS: u16 = 323;
/// natQuotaExceededEvent, IANA element 466.
pub const IE_QUOTA_EVENT: u16 = 466;
/// Bytes of IPv4 and UDP headers under an IPFIX message.
pub const IP_UDP_OVERHEAD: usize = 28;
/// First template id (RFC 7011 section 3.4.1: 256 and above).
pub const FIRST_TEMPLATE_ID: u16 = 256;

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

/// IPFIX settings.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields, default))]
pub struct IpfixOptions {
    /// Path MTU in bytes; a message is at most `mtu - 28` bytes. Default
    /// 1500; at least 256.
    pub mtu: usize,
    /// Seconds between template re-sends. Default 20.
    pub template_refresh_secs: u32,
    /// Observation Domain ID in every message header. Default 1.
    pub observation_domain_id: u32,
    /// Export-time source. Default `system`.
    pub export_clock: ExportClock,
}

impl Default for IpfixOptions {
    fn default() -> Self {
        Self {
            mtu: 1500,
            template_refresh_secs: 20,
            observation_domain_id: 1,
            export_clock: ExportClock::System,
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Enc {
    /// Big-endian integer of `size` bytes read from the record.
    Uint { off: u16, size: u8, event: bool },
    /// Raw bytes (IPv6, MAC, strings).
    Raw { off: u16, size: u8 },
    /// ns timestamp -> 8-byte ms.
    Ms { off: u16, tsc: bool },
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
    /// An MTU below 256, or a schema whose data record would not fit one
    /// message.
    pub fn new(schemas: &[&Schema], opts: Options, ipfix: IpfixOptions) -> Result<Self, String> {
        if ipfix.mtu < 256 {
            return Err(format!("ipfix mtu {} is below 256", ipfix.mtu));
        }
        let mut e = IpfixEncoder {
            opts: ipfix,
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
        Ok(e)
    }

    fn max_message(&self) -> usize {
        self.opts.mtu - IP_UDP_OVERHEAD
    }

    fn add(&mut self, s: &Schema, subtype: Option<u32>) -> Result<(), String> {
        let id = FIRST_TEMPLATE_ID + self.templates.len() as u16;
        let mut encs = Vec::new();
        let mut ies: Vec<(u16, u16)> = Vec::new();
        let mut time_off = None;
        let has_time = s.fields().iter().any(|f| {
            f.ie_id == IE_OBSERVATION_TIME_MS
                && matches!(f.kind, FieldKind::NsTimestamp | FieldKind::TscTimestamp)
        });
        if !has_time {
            encs.push(Enc::ExportMs);
            ies.push((IE_OBSERVATION_TIME_MS, 8));
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
            if ie == 0 {
                continue;
            }
            let (off, size) = (f.offset, f.size as u8);
            let enc = match f.kind {
                FieldKind::NsTimestamp => Enc::Ms { off, tsc: false },
                // Converted with the calibration (identity until one is
                // set, see `set_tsc_calibration`).
                FieldKind::TscTimestamp => Enc::Ms { off, tsc: true },
                FieldKind::Ipv6 | FieldKind::Mac | FieldKind::Bytes => Enc::Raw { off, size },
                _ => Enc::Uint {
                    off,
                    size,
                    event: self.renumber.is_some_and(|r| r.ie_id == ie),
                },
            };
            if let Enc::Ms { off, tsc } = enc {
                if ie == IE_OBSERVATION_TIME_MS && time_off.is_none() {
                    time_off = Some((off, tsc));
                }
            }
            let len = if matches!(enc, Enc::Ms { .. }) {
                8
            } else {
                size as u16
            };
            encs.push(enc);
            ies.push((ie, len));
        }
        let rec_len: usize = ies.iter().map(|&(_, l)| l as usize).sum();
        if 16 + 4 + rec_len > self.max_message() {
            return Err(format!(
                "schema {}: a {rec_len}-byte data record does not fit a {}-byte message",
                s.name(),
                self.max_message()
            ));
        }
        let mut def = Vec::with_capacity(4 + 4 * ies.len());
        def.extend_from_slice(&id.to_be_bytes());
        def.extend_from_slice(&(ies.len() as u16).to_be_bytes());
        for (ie, len) in ies {
            def.extend_from_slice(&ie.to_be_bytes());
            def.extend_from_slice(&len.to_be_bytes());
        }
        let needed = encs
            .iter()
            .map(|e| match *e {
                Enc::Uint { off, size, .. } | Enc::Raw { off, size } => {
                    off as usize + size as usize
                }
                Enc::Ms { off, .. } => off as usize + 8,
                Enc::ExportMs => 0,
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
        let continuing = self.open && out.len() == self.msg_end && self.msg_start < out.len();
        let every = self.opts.template_refresh_secs as u64;
        let refresh_due =
            |now_s: u64, last: Option<u64>| last.map_or(true, |l| now_s >= l.saturating_add(every));
        let (t_id, rec_len) = (t.id, t.rec_len);
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
                Enc::ExportMs => {
                    buf[n..n + 8].copy_from_slice(&export_ms.to_be_bytes());
                    n += 8;
                }
            }
        }
        out.extend_from_slice(&buf[..n]);
        self.seq = self.seq.wrapping_add(1);
        self.patch(out);
        true
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
