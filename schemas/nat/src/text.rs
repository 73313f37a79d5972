//! Text and JSON-lines formatters for [`Nat44SessionRecord`]: the first
//! formatters of dplog, kept as thin wrappers over the compiled `text` and
//! `json` layouts ([`dplog_formatters::layouts`], [`Program`]), so there is one
//! implementation of each line.
//!
//! [`NAT44_FIELDS`] lists the record's IANA IPFIX information elements
//! (RFC 8158, IANA "IPFIX Information Elements" registry) in output order,
//! how to read each from the record and how the layouts print it; a unit
//! test keeps it equal to the NAT44 session schema.

use dplog_core::{Formatter, HasSchema};
use dplog_formatters::layouts;
use dplog_formatters::template::{Options, Program};

use crate::records::Nat44SessionRecord;
use crate::schemas as nat;

/// How a field's value is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// Unsigned decimal integer.
    Unsigned,
    /// Dotted-quad IPv4 address from a host-order `u32`.
    Ipv4,
    /// Nanoseconds since the epoch printed as integer milliseconds
    /// (IPFIX dateTimeMilliseconds, RFC 7011 section 6.1.9).
    EpochMillis,
}

/// When a field is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presence {
    /// On every record.
    Always,
    /// Only on delete records (natEvent 5).
    DeleteOnly,
}

/// One row of the NAT44 field table.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    /// IANA information-element name, e.g. `sourceIPv4Address`.
    pub name: &'static str,
    /// Reads the value from a record.
    pub get: fn(&Nat44SessionRecord) -> u64,
    /// How the value is printed.
    pub kind: FieldKind,
    /// When it is printed.
    pub presence: Presence,
}

macro_rules! field {
    ($name:literal, $f:ident, $kind:ident, $pres:ident) => {
        Field {
            name: $name,
            get: |r| r.$f as u64,
            kind: FieldKind::$kind,
            presence: Presence::$pres,
        }
    };
}

/// The NAT44 session record's fields in output order, with their IANA
/// names (RFC 8158 section 4 templates; element ids in
/// [`Nat44SessionRecord`]'s docs).
pub static NAT44_FIELDS: [Field; 14] = [
    field!(
        "observationTimeMilliseconds",
        timestamp_ns,
        EpochMillis,
        Always
    ),
    field!("natEvent", nat_event, Unsigned, Always),
    field!("protocolIdentifier", protocol, Unsigned, Always),
    field!("sourceIPv4Address", src_addr, Ipv4, Always),
    field!("sourceTransportPort", src_port, Unsigned, Always),
    field!("postNATSourceIPv4Address", post_nat_src_addr, Ipv4, Always),
    field!(
        "postNAPTSourceTransportPort",
        post_napt_src_port,
        Unsigned,
        Always
    ),
    field!("destinationIPv4Address", dst_addr, Ipv4, Always),
    field!("destinationTransportPort", dst_port, Unsigned, Always),
    field!("ingressVRFID", ingress_vrf_id, Unsigned, Always),
    field!("initiatorPackets", initiator_packets, Unsigned, DeleteOnly),
    field!("responderPackets", responder_packets, Unsigned, DeleteOnly),
    field!("initiatorOctets", initiator_octets, Unsigned, DeleteOnly),
    field!("responderOctets", responder_octets, Unsigned, DeleteOnly),
];

/// One line per record: an RFC 3339 UTC timestamp with microseconds, then
/// `name=value` pairs separated by single spaces, then `\n`:
///
/// ```text
/// 2026-01-01T00:00:00.000001Z observationTimeMilliseconds=1767225600000 natEvent=4 protocolIdentifier=6 sourceIPv4Address=10.0.0.1 sourceTransportPort=40000 postNATSourceIPv4Address=198.51.100.1 postNAPTSourceTransportPort=1024 destinationIPv4Address=203.0.113.1 destinationTransportPort=443 ingressVRFID=0
/// ```
///
/// A thin wrapper over the compiled `text` layout
/// ([`dplog_formatters::layouts::text_default`] for the NAT44 session schema): the
/// same bytes as `FormatSpec { kind: Format::Text, .. }`.
#[derive(Clone, Debug)]
pub struct TextFormatter {
    prog: Program,
}

impl Default for TextFormatter {
    fn default() -> Self {
        Self {
            prog: layouts::text_default(nat::nat44_session(), Options::default())
                .expect("the built-in text layout compiles for the NAT44 schema"),
        }
    }
}

impl Formatter<Nat44SessionRecord> for TextFormatter {
    #[inline]
    fn format(&mut self, rec: &Nat44SessionRecord, out: &mut Vec<u8>) {
        self.prog.run(rec.as_bytes(), out);
    }
}

/// One JSON object per line (JSON Lines; RFC 8259 syntax). Keys are the
/// IANA names plus `"timestamp"`, the RFC 3339 UTC time with microseconds;
/// every value but the timestamp is a JSON number, addresses are strings:
///
/// ```text
/// {"timestamp":"2026-01-01T00:00:00.000001Z","observationTimeMilliseconds":1767225600000,"natEvent":4,...,"ingressVRFID":0}
/// ```
///
/// A thin wrapper over the compiled `json` layout ([`dplog_formatters::layouts::json`]
/// for the NAT44 session schema): the same bytes as
/// `FormatSpec { kind: Format::Json, .. }`.
#[derive(Clone, Debug)]
pub struct JsonFormatter {
    prog: Program,
}

impl Default for JsonFormatter {
    fn default() -> Self {
        Self {
            prog: layouts::json(nat::nat44_session(), Options::default())
                .expect("the built-in JSON layout compiles for the NAT44 schema"),
        }
    }
}

impl Formatter<Nat44SessionRecord> for JsonFormatter {
    #[inline]
    fn format(&mut self, rec: &Nat44SessionRecord, out: &mut Vec<u8>) {
        self.prog.run(rec.as_bytes(), out);
    }
    fn format_drop_report(&mut self, r: &dplog_core::DropReport, out: &mut Vec<u8>) {
        r.write_json(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dplog_core::RecordHeader;

    fn sample(event: u8) -> Nat44SessionRecord {
        Nat44SessionRecord {
            header: RecordHeader::of::<Nat44SessionRecord>(),
            timestamp_ns: 1_767_225_600_123_456_789,
            src_addr: 0x0A00_0006,
            post_nat_src_addr: 0xC633_6403,
            dst_addr: 0xCB00_7105,
            src_port: 51_234,
            post_napt_src_port: 1024,
            dst_port: 443,
            protocol: 6,
            nat_event: event,
            ingress_vrf_id: 7,
            initiator_packets: 10,
            responder_packets: 9,
            initiator_octets: 1_500,
            responder_octets: 64_000,
        }
    }

    /// The table lists the schema's fields, in order, with matching kinds
    /// and values.
    #[test]
    fn field_table_matches_the_schema() {
        use dplog_core::schema::{read_uint, FieldKind as K};
        let s = nat::nat44_session();
        assert_eq!(NAT44_FIELDS.len(), s.fields().len());
        let r = sample(5);
        for (t, f) in NAT44_FIELDS.iter().zip(s.fields()) {
            assert_eq!(t.name, &*f.name);
            assert_eq!(
                (t.get)(&r),
                read_uint(r.as_bytes(), f.offset as usize, f.size as usize),
                "{}",
                t.name
            );
            let kind = match f.kind {
                K::Ipv4 => FieldKind::Ipv4,
                K::NsTimestamp => FieldKind::EpochMillis,
                _ => FieldKind::Unsigned,
            };
            assert_eq!(t.kind, kind, "{}", t.name);
        }
    }

    #[test]
    fn text_create_line_is_exact() {
        let mut out = Vec::new();
        TextFormatter::default().format(&sample(4), &mut out);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "2026-01-01T00:00:00.123456Z observationTimeMilliseconds=1767225600123 natEvent=4 \
             protocolIdentifier=6 sourceIPv4Address=10.0.0.6 sourceTransportPort=51234 \
             postNATSourceIPv4Address=198.51.100.3 postNAPTSourceTransportPort=1024 \
             destinationIPv4Address=203.0.113.5 destinationTransportPort=443 ingressVRFID=7\n"
        );
    }

    #[test]
    fn text_delete_line_carries_counters() {
        let mut out = Vec::new();
        TextFormatter::default().format(&sample(5), &mut out);
        let s = std::str::from_utf8(&out).unwrap();
        assert!(s.ends_with(
            " ingressVRFID=7 initiatorPackets=10 responderPackets=9 initiatorOctets=1500 responderOctets=64000\n"
        ));
    }

    #[test]
    fn json_parses_with_serde_and_has_every_value() {
        let mut f = JsonFormatter::default();
        let mut out = Vec::new();
        f.format(&sample(4), &mut out);
        f.format(&sample(5), &mut out);
        let lines: Vec<&str> = std::str::from_utf8(&out).unwrap().lines().collect();
        assert_eq!(lines.len(), 2);
        let c: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(c["timestamp"], "2026-01-01T00:00:00.123456Z");
        assert_eq!(c["observationTimeMilliseconds"], 1_767_225_600_123u64);
        assert_eq!(c["natEvent"], 4);
        assert_eq!(c["protocolIdentifier"], 6);
        assert_eq!(c["sourceIPv4Address"], "10.0.0.6");
        assert_eq!(c["sourceTransportPort"], 51234);
        assert_eq!(c["postNATSourceIPv4Address"], "198.51.100.3");
        assert_eq!(c["postNAPTSourceTransportPort"], 1024);
        assert_eq!(c["destinationIPv4Address"], "203.0.113.5");
        assert_eq!(c["destinationTransportPort"], 443);
        assert_eq!(c["ingressVRFID"], 7);
        assert!(c.get("initiatorPackets").is_none());
        let d: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(d["natEvent"], 5);
        assert_eq!(d["initiatorPackets"], 10);
        assert_eq!(d["responderPackets"], 9);
        assert_eq!(d["initiatorOctets"], 1500);
        assert_eq!(d["responderOctets"], 64000);
        assert_eq!(d.as_object().unwrap().len(), 15);
    }
}
