//! Fixed-size binary records and their header.
//!
//! Every record starts with a [`RecordHeader`] that carries the record's total
//! length in bytes and its schema id, so a consumer (or a file of binary
//! records) can tell record types apart without out-of-band knowledge.
//! Records are `#[repr(C)]`, `Copy` and contain no pointers: a producer copies
//! them into ring slots by value.

/// Schema id of [`Nat44SessionRecord`].
pub const SCHEMA_NAT44_SESSION: u16 = 1;

/// Header at offset 0 of every record. 8 bytes.
///
/// | offset | size | field       | meaning                                        |
/// |--------|------|-------------|------------------------------------------------|
/// | 0      | 2    | `len`       | total record length in bytes, header included  |
/// | 2      | 2    | `schema_id` | which schema describes the bytes that follow   |
/// | 4      | 2    | `flags`     | reserved for record-level flags, 0 today       |
/// | 6      | 2    | `reserved`  | must be 0                                      |
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RecordHeader {
    /// Total record length in bytes, this header included.
    pub len: u16,
    /// Schema id, e.g. [`SCHEMA_NAT44_SESSION`].
    pub schema_id: u16,
    /// Record flags; 0 today.
    pub flags: u16,
    /// Reserved; 0.
    pub reserved: u16,
}

impl RecordHeader {
    /// The header for a record of type `R`.
    pub const fn of<R: Record>() -> Self {
        Self {
            len: core::mem::size_of::<R>() as u16,
            schema_id: R::SCHEMA_ID,
            flags: 0,
            reserved: 0,
        }
    }
}

/// A fixed-size record that can travel through a dplog ring.
///
/// Implementors are `#[repr(C)]`, `Copy`, pointer-free, start with a
/// [`RecordHeader`] and are at most 128 bytes long.
pub trait Record: Copy + Send + 'static {
    /// The schema id written into [`RecordHeader::schema_id`].
    const SCHEMA_ID: u16;
    /// The record's header.
    fn header(&self) -> &RecordHeader;
}

/// `natEvent` values of RFC 8158 section 4.1 (IANA "NAT Event Type" registry)
/// that the NAT44 session record carries.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NatEvent {
    /// natEvent 4: NAT44 session create.
    Nat44SessionCreate = 4,
    /// natEvent 5: NAT44 session delete.
    Nat44SessionDelete = 5,
}

impl NatEvent {
    /// Decodes a `natEvent` number; `None` for values this record does not carry.
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            4 => Some(Self::Nat44SessionCreate),
            5 => Some(Self::Nat44SessionDelete),
            _ => None,
        }
    }
}

/// A NAT44 session create or delete event (RFC 8158 natEvent 4 and 5).
/// Exactly 64 bytes: one cache line, one ring slot.
///
/// Addresses are IPv4 addresses as host-order `u32` (so `10.0.0.1` is
/// `0x0A00_0001`); ports are host-order `u16`. Field names in formatted
/// output are the IANA IPFIX information-element names given per field.
///
/// | offset | field                    | IPFIX IE (RFC 8158, IANA)          |
/// |--------|--------------------------|------------------------------------|
/// | 0      | `header`                 | –                                  |
/// | 8      | `timestamp_ns`           | observationTimeMilliseconds (323)  |
/// | 16     | `src_addr`               | sourceIPv4Address (8)              |
/// | 20     | `post_nat_src_addr`      | postNATSourceIPv4Address (225)     |
/// | 24     | `dst_addr`               | destinationIPv4Address (12)        |
/// | 28     | `src_port`               | sourceTransportPort (7)            |
/// | 30     | `post_napt_src_port`     | postNAPTSourceTransportPort (227)  |
/// | 32     | `dst_port`               | destinationTransportPort (11)      |
/// | 34     | `protocol`               | protocolIdentifier (4)             |
/// | 35     | `nat_event`              | natEvent (230)                     |
/// | 36     | `ingress_vrf_id`         | ingressVRFID (234)                 |
/// | 40     | `initiator_packets`      | initiatorPackets (298)             |
/// | 44     | `responder_packets`      | responderPackets (299)             |
/// | 48     | `initiator_octets`       | initiatorOctets (231)              |
/// | 56     | `responder_octets`       | responderOctets (232)              |
///
/// The four counters are meaningful on delete records (natEvent 5) and zero
/// on creates. Packet counters saturate at `u32::MAX`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Nat44SessionRecord {
    /// Record header; `len` = 64, `schema_id` = [`SCHEMA_NAT44_SESSION`].
    pub header: RecordHeader,
    /// Time of the event, nanoseconds since the Unix epoch, UTC.
    pub timestamp_ns: u64,
    /// Pre-NAT (inside) source address.
    pub src_addr: u32,
    /// Post-NAT (outside) source address, from the pool.
    pub post_nat_src_addr: u32,
    /// Destination address (not translated by NAT44 source NAT).
    pub dst_addr: u32,
    /// Pre-NAT source port, or the ICMP echo identifier.
    pub src_port: u16,
    /// Post-NAPT source port, or the translated ICMP echo identifier.
    pub post_napt_src_port: u16,
    /// Destination port; 0 for ICMP.
    pub dst_port: u16,
    /// IP protocol number (1 ICMP, 6 TCP, 17 UDP).
    pub protocol: u8,
    /// `natEvent`: 4 create, 5 delete (see [`NatEvent`]).
    pub nat_event: u8,
    /// Ingress VRF id; 0 for the default VRF.
    pub ingress_vrf_id: u32,
    /// Packets from the initiator (inside host), delete records only.
    pub initiator_packets: u32,
    /// Packets from the responder, delete records only.
    pub responder_packets: u32,
    /// Octets (IP total length) from the initiator, delete records only.
    pub initiator_octets: u64,
    /// Octets (IP total length) from the responder, delete records only.
    pub responder_octets: u64,
}

const _: () = assert!(core::mem::size_of::<Nat44SessionRecord>() == 64);
const _: () = assert!(core::mem::size_of::<RecordHeader>() == 8);

impl Default for Nat44SessionRecord {
    fn default() -> Self {
        Self {
            header: RecordHeader::of::<Self>(),
            timestamp_ns: 0,
            src_addr: 0,
            post_nat_src_addr: 0,
            dst_addr: 0,
            src_port: 0,
            post_napt_src_port: 0,
            dst_port: 0,
            protocol: 0,
            nat_event: 0,
            ingress_vrf_id: 0,
            initiator_packets: 0,
            responder_packets: 0,
            initiator_octets: 0,
            responder_octets: 0,
        }
    }
}

impl Record for Nat44SessionRecord {
    const SCHEMA_ID: u16 = SCHEMA_NAT44_SESSION;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::offset_of;

    #[test]
    fn nat44_layout_matches_the_documented_offsets() {
        assert_eq!(offset_of!(Nat44SessionRecord, timestamp_ns), 8);
        assert_eq!(offset_of!(Nat44SessionRecord, src_addr), 16);
        assert_eq!(offset_of!(Nat44SessionRecord, post_nat_src_addr), 20);
        assert_eq!(offset_of!(Nat44SessionRecord, dst_addr), 24);
        assert_eq!(offset_of!(Nat44SessionRecord, src_port), 28);
        assert_eq!(offset_of!(Nat44SessionRecord, post_napt_src_port), 30);
        assert_eq!(offset_of!(Nat44SessionRecord, dst_port), 32);
        assert_eq!(offset_of!(Nat44SessionRecord, protocol), 34);
        assert_eq!(offset_of!(Nat44SessionRecord, nat_event), 35);
        assert_eq!(offset_of!(Nat44SessionRecord, ingress_vrf_id), 36);
        assert_eq!(offset_of!(Nat44SessionRecord, initiator_packets), 40);
        assert_eq!(offset_of!(Nat44SessionRecord, responder_packets), 44);
        assert_eq!(offset_of!(Nat44SessionRecord, initiator_octets), 48);
        assert_eq!(offset_of!(Nat44SessionRecord, responder_octets), 56);
    }

    #[test]
    fn default_header_carries_length_and_schema() {
        let r = Nat44SessionRecord::default();
        assert_eq!(r.header().len, 64);
        assert_eq!(r.header().schema_id, SCHEMA_NAT44_SESSION);
        assert_eq!(NatEvent::from_u8(4), Some(NatEvent::Nat44SessionCreate));
        assert_eq!(NatEvent::from_u8(5), Some(NatEvent::Nat44SessionDelete));
        assert_eq!(NatEvent::from_u8(16), None);
    }
}
