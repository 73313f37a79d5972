//! Text and JSON-lines formatters for [`Nat44SessionRecord`], driven by one
//! field table.
//!
//! Each row of [`NAT44_FIELDS`] names an IANA IPFIX information element
//! (RFC 8158, IANA "IPFIX Information Elements" registry), how to read it
//! from the record and how to print it. A formatter walks the table; per
//! record there is no parsing, no allocation beyond the output buffer and
//! no `core::fmt`: integers go through `itoa`, addresses through a 256-entry
//! octet table, time through a per-second cached RFC 3339 prefix.

use dplog_core::{Formatter, Nat44SessionRecord, NatEvent};

use crate::ipv4::push_ipv4;
use crate::time::Rfc3339Micros;

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

/// A field compiled for one output syntax: the bytes printed before the
/// value (separator, quoted key, `:` or `=`), kept next to the accessor.
#[derive(Clone, Debug)]
struct Op {
    prefix: Vec<u8>,
    field: Field,
}

/// Compiles [`NAT44_FIELDS`] once into per-syntax operations.
fn compile(key: impl Fn(usize, &str) -> Vec<u8>) -> Vec<Op> {
    NAT44_FIELDS
        .iter()
        .enumerate()
        .map(|(i, f)| Op {
            prefix: key(i, f.name),
            field: *f,
        })
        .collect()
}

#[inline(always)]
fn push_value(out: &mut Vec<u8>, kind: FieldKind, v: u64, itoa: &mut itoa::Buffer) {
    match kind {
        FieldKind::Unsigned => out.extend_from_slice(itoa.format(v).as_bytes()),
        FieldKind::Ipv4 => push_ipv4(out, v as u32),
        FieldKind::EpochMillis => out.extend_from_slice(itoa.format(v / 1_000_000).as_bytes()),
    }
}

#[inline(always)]
fn walk(ops: &[Op], rec: &Nat44SessionRecord, out: &mut Vec<u8>, itoa: &mut itoa::Buffer) {
    let is_delete = rec.nat_event == NatEvent::Nat44SessionDelete as u8;
    for op in ops {
        if op.field.presence == Presence::DeleteOnly && !is_delete {
            continue;
        }
        out.extend_from_slice(&op.prefix);
        push_value(out, op.field.kind, (op.field.get)(rec), itoa);
    }
}

/// One line per record: an RFC 3339 UTC timestamp with microseconds, then
/// `name=value` pairs separated by single spaces, then `\n`:
///
/// ```text
/// 2026-01-01T00:00:00.000001Z observationTimeMilliseconds=1767225600000 natEvent=4 protocolIdentifier=6 sourceIPv4Address=10.0.0.1 sourceTransportPort=40000 postNATSourceIPv4Address=198.51.100.1 postNAPTSourceTransportPort=1024 destinationIPv4Address=203.0.113.1 destinationTransportPort=443 ingressVRFID=0
/// ```
#[derive(Clone)]
pub struct TextFormatter {
    ops: Vec<Op>,
    time: Rfc3339Micros,
    itoa: itoa::Buffer,
}

impl Default for TextFormatter {
    fn default() -> Self {
        Self {
            ops: compile(|_, name| format!(" {name}=").into_bytes()),
            time: Rfc3339Micros::default(),
            itoa: itoa::Buffer::new(),
        }
    }
}

impl Formatter<Nat44SessionRecord> for TextFormatter {
    #[inline]
    fn format(&mut self, rec: &Nat44SessionRecord, out: &mut Vec<u8>) {
        out.reserve(512);
        self.time.push(out, rec.timestamp_ns);
        walk(&self.ops, rec, out, &mut self.itoa);
        out.push(b'\n');
    }
}

/// One JSON object per line (JSON Lines; RFC 8259 syntax). Keys are the
/// IANA names plus `"timestamp"`, the RFC 3339 UTC time with microseconds;
/// every value but the timestamp is a JSON number, addresses are strings:
///
/// ```text
/// {"timestamp":"2026-01-01T00:00:00.000001Z","observationTimeMilliseconds":1767225600000,"natEvent":4,...,"ingressVRFID":0}
/// ```
/// No value needs escaping: timestamps and dotted quads are plain ASCII.
#[derive(Clone)]
pub struct JsonFormatter {
    ops: Vec<Op>,
    time: Rfc3339Micros,
    itoa: itoa::Buffer,
}

impl Default for JsonFormatter {
    fn default() -> Self {
        Self {
            ops: compile(|_, name| format!(",\"{name}\":").into_bytes()),
            time: Rfc3339Micros::default(),
            itoa: itoa::Buffer::new(),
        }
    }
}

impl Formatter<Nat44SessionRecord> for JsonFormatter {
    #[inline]
    fn format(&mut self, rec: &Nat44SessionRecord, out: &mut Vec<u8>) {
        out.reserve(640);
        out.extend_from_slice(b"{\"timestamp\":\"");
        self.time.push(out, rec.timestamp_ns);
        out.push(b'"');
        let is_delete = rec.nat_event == NatEvent::Nat44SessionDelete as u8;
        for op in &self.ops {
            if op.field.presence == Presence::DeleteOnly && !is_delete {
                continue;
            }
            out.extend_from_slice(&op.prefix);
            let v = (op.field.get)(rec);
            if op.field.kind == FieldKind::Ipv4 {
                out.push(b'"');
                push_ipv4(out, v as u32);
                out.push(b'"');
            } else {
                push_value(out, op.field.kind, v, &mut self.itoa);
            }
        }
        out.extend_from_slice(b"}\n");
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
