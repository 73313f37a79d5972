//! The NAT record types: fixed-size `#[repr(C)]` records, one per RFC 8158
//! event family, each starting with a [`RecordHeader`].

use dplog_core::record::{Record, RecordHeader, PRIORITY_HIGH, PRIORITY_NORMAL};

/// Schema id of [`Nat44SessionRecord`].
pub const SCHEMA_NAT44_SESSION: u16 = 1;

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
    /// Creates are [`PRIORITY_NORMAL`]; deletes (which carry the session's
    /// counters) are [`PRIORITY_HIGH`].
    fn priority(&self) -> u8 {
        if self.nat_event == NatEvent::Nat44SessionCreate as u8 {
            PRIORITY_NORMAL
        } else {
            PRIORITY_HIGH
        }
    }
    /// `timestamp_ns`.
    fn event_time(&self) -> u64 {
        self.timestamp_ns
    }
}

/// Schema id of [`NatPortBlockRecord`].
pub const SCHEMA_NAT_PORT_BLOCK: u16 = 2;
/// Schema id of [`NatAddressesExhaustedRecord`].
pub const SCHEMA_NAT_ADDRESSES_EXHAUSTED: u16 = 3;
/// Schema id of [`NatPortsExhaustedRecord`].
pub const SCHEMA_NAT_PORTS_EXHAUSTED: u16 = 4;
/// Schema id of [`NatQuotaExceededRecord`].
pub const SCHEMA_NAT_QUOTA_EXCEEDED: u16 = 5;

/// Every `natEvent` number (IANA "NAT Event Type" registry, RFC 8158
/// section 4.1) that dplog's NAT records carry, plus the historic 1/2.
///
/// [`NatEvent`] keeps only the session events 4/5 for compatibility; these
/// constants cover the rest.
pub mod nat_event {
    /// Historic NAT translation create (legacy numbering of 4).
    pub const LEGACY_CREATE: u8 = 1;
    /// Historic NAT translation delete (legacy numbering of 5).
    pub const LEGACY_DELETE: u8 = 2;
    /// NAT addresses exhausted.
    pub const ADDRESSES_EXHAUSTED: u8 = 3;
    /// NAT44 session create.
    pub const NAT44_SESSION_CREATE: u8 = 4;
    /// NAT44 session delete.
    pub const NAT44_SESSION_DELETE: u8 = 5;
    /// NAT ports exhausted.
    pub const PORTS_EXHAUSTED: u8 = 12;
    /// NAT quota exceeded (subtype in `natQuotaExceededEvent`).
    pub const QUOTA_EXCEEDED: u8 = 13;
    /// NAT port block allocation.
    pub const PORT_BLOCK_ALLOCATION: u8 = 16;
    /// NAT port block de-allocation.
    pub const PORT_BLOCK_DEALLOCATION: u8 = 17;

    /// Short names printed by the `name` converter, one per value above.
    pub const NAMES: [(u32, &str); 9] = [
        (1, "NAT_CREATE"),
        (2, "NAT_DELETE"),
        (3, "ADDRESSES_EXHAUSTED"),
        (4, "NAT44_SESSION_CREATE"),
        (5, "NAT44_SESSION_DELETE"),
        (12, "PORTS_EXHAUSTED"),
        (13, "QUOTA_EXCEEDED"),
        (16, "PORT_BLOCK_ALLOCATION"),
        (17, "PORT_BLOCK_DEALLOCATION"),
    ];
}

/// `natQuotaExceededEvent` (IANA IE 466) subtypes, RFC 8158 section 4.1.
pub mod quota_event {
    /// Maximum session entries (limit IE maxSessionEntries, 471).
    pub const MAX_SESSION_ENTRIES: u32 = 1;
    /// Maximum BIB entries (limit IE maxBIBEntries, 472).
    pub const MAX_BIB_ENTRIES: u32 = 2;
    /// Maximum entries per user (limit IE maxEntriesPerUser, 473).
    pub const MAX_ENTRIES_PER_USER: u32 = 3;
    /// Maximum active hosts or subscribers (limit IE maxSubscribers, 474).
    pub const MAX_SUBSCRIBERS: u32 = 4;
    /// Maximum fragments pending reassembly (limit IE
    /// maxFragmentsPendingReassembly, 475).
    pub const MAX_FRAGMENTS_PENDING_REASSEMBLY: u32 = 5;

    /// Names printed by the `name` converter.
    pub const NAMES: [(u32, &str); 5] = [
        (1, "MAX_SESSION_ENTRIES"),
        (2, "MAX_BIB_ENTRIES"),
        (3, "MAX_ENTRIES_PER_USER"),
        (4, "MAX_SUBSCRIBERS"),
        (5, "MAX_FRAGMENTS_PENDING_REASSEMBLY"),
    ];

    /// The IANA IPFIX element names of the limits, by subtype (the
    /// elements [`limit_ie`] gives: 471..=475).
    pub const LIMIT_NAMES: [(u32, &str); 5] = [
        (1, "maxSessionEntries"),
        (2, "maxBIBEntries"),
        (3, "maxEntriesPerUser"),
        (4, "maxSubscribers"),
        (5, "maxFragmentsPendingReassembly"),
    ];

    /// The IANA IPFIX element id of the limit that goes with `subtype`
    /// (471..=475), or `None` for an unknown subtype.
    pub const fn limit_ie(subtype: u32) -> Option<u16> {
        match subtype {
            1..=5 => Some(470 + subtype as u16),
            _ => None,
        }
    }
}

/// A port block allocation or release (RFC 8158 natEvent 16/17). 40 bytes.
///
/// | offset | field                 | IPFIX IE                          |
/// |--------|-----------------------|-----------------------------------|
/// | 0      | `header`              | –                                 |
/// | 8      | `timestamp_ns`        | observationTimeMilliseconds (323) |
/// | 16     | `src_addr`            | sourceIPv4Address (8)             |
/// | 20     | `post_nat_src_addr`   | postNATSourceIPv4Address (225)    |
/// | 24     | `port_range_start`    | portRangeStart (361)              |
/// | 26     | `port_range_end`      | portRangeEnd (362)                |
/// | 28     | `port_range_step`     | portRangeStepSize (363)           |
/// | 30     | `nat_event`           | natEvent (230)                    |
/// | 31     | `reserved`            | – (0)                             |
/// | 32     | `port_range_num_ports`| portRangeNumPorts (364)           |
/// | 34     | `reserved2`           | – (0)                             |
/// | 36     | `ingress_vrf_id`      | ingressVRFID (234)                |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NatPortBlockRecord {
    /// Record header; `schema_id` = [`SCHEMA_NAT_PORT_BLOCK`].
    pub header: RecordHeader,
    /// Time of the event, nanoseconds since the Unix epoch, UTC.
    pub timestamp_ns: u64,
    /// Inside (subscriber) address the block belongs to.
    pub src_addr: u32,
    /// Outside address of the block.
    pub post_nat_src_addr: u32,
    /// First port of the block.
    pub port_range_start: u16,
    /// Last port of the block (inclusive).
    pub port_range_end: u16,
    /// Step between ports; 1 for a contiguous block.
    pub port_range_step: u16,
    /// `natEvent`: 16 allocation, 17 release.
    pub nat_event: u8,
    /// Reserved; 0.
    pub reserved: u8,
    /// Number of ports in the block.
    pub port_range_num_ports: u16,
    /// Reserved; 0.
    pub reserved2: u16,
    /// Ingress VRF id; 0 for the default VRF.
    pub ingress_vrf_id: u32,
}

/// NAT addresses exhausted (RFC 8158 natEvent 3): the pool has no free
/// address. 24 bytes.
///
/// | offset | field          | IPFIX IE                          |
/// |--------|----------------|-----------------------------------|
/// | 8      | `timestamp_ns` | observationTimeMilliseconds (323) |
/// | 16     | `nat_pool_id`  | natPoolId (283)                   |
/// | 20     | `nat_event`    | natEvent (230), always 3          |
/// | 21     | `reserved`     | – (0)                             |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NatAddressesExhaustedRecord {
    /// Record header; `schema_id` = [`SCHEMA_NAT_ADDRESSES_EXHAUSTED`].
    pub header: RecordHeader,
    /// Time of the event, nanoseconds since the Unix epoch, UTC.
    pub timestamp_ns: u64,
    /// The exhausted pool.
    pub nat_pool_id: u32,
    /// `natEvent` 3.
    pub nat_event: u8,
    /// Reserved; 0.
    pub reserved: [u8; 3],
}

/// NAT ports exhausted (RFC 8158 natEvent 12): an outside address has no
/// free port for a protocol. 24 bytes.
///
/// | offset | field               | IPFIX IE                          |
/// |--------|---------------------|-----------------------------------|
/// | 8      | `timestamp_ns`      | observationTimeMilliseconds (323) |
/// | 16     | `post_nat_src_addr` | postNATSourceIPv4Address (225)    |
/// | 20     | `protocol`          | protocolIdentifier (4)            |
/// | 21     | `nat_event`         | natEvent (230), always 12         |
/// | 22     | `reserved`          | – (0)                             |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NatPortsExhaustedRecord {
    /// Record header; `schema_id` = [`SCHEMA_NAT_PORTS_EXHAUSTED`].
    pub header: RecordHeader,
    /// Time of the event, nanoseconds since the Unix epoch, UTC.
    pub timestamp_ns: u64,
    /// The outside address whose ports ran out.
    pub post_nat_src_addr: u32,
    /// IP protocol whose ports ran out.
    pub protocol: u8,
    /// `natEvent` 12.
    pub nat_event: u8,
    /// Reserved; 0.
    pub reserved: u16,
}

/// NAT quota exceeded (RFC 8158 natEvent 13) with its subtype
/// (`natQuotaExceededEvent`, see [`quota_event`]) and the limit reached.
/// 32 bytes.
///
/// | offset | field          | IPFIX IE                                   |
/// |--------|----------------|--------------------------------------------|
/// | 8      | `timestamp_ns` | observationTimeMilliseconds (323)          |
/// | 16     | `quota_event`  | natQuotaExceededEvent (466)                |
/// | 20     | `limit`        | 471..475 by subtype ([`quota_event::limit_ie`]) |
/// | 24     | `src_addr`     | sourceIPv4Address (8); 0 unless per user   |
/// | 28     | `nat_event`    | natEvent (230), always 13                  |
/// | 29     | `reserved`     | – (0)                                      |
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NatQuotaExceededRecord {
    /// Record header; `schema_id` = [`SCHEMA_NAT_QUOTA_EXCEEDED`].
    pub header: RecordHeader,
    /// Time of the event, nanoseconds since the Unix epoch, UTC.
    pub timestamp_ns: u64,
    /// Subtype, one of [`quota_event`].
    pub quota_event: u32,
    /// The limit that was reached (sessions, BIB entries, entries per
    /// user, subscribers or fragments, by subtype).
    pub limit: u32,
    /// The user (inside address) for subtype 3; 0 otherwise.
    pub src_addr: u32,
    /// `natEvent` 13.
    pub nat_event: u8,
    /// Reserved; 0.
    pub reserved: [u8; 3],
}

const _: () = assert!(core::mem::size_of::<NatPortBlockRecord>() == 40);
const _: () = assert!(core::mem::size_of::<NatAddressesExhaustedRecord>() == 24);
const _: () = assert!(core::mem::size_of::<NatPortsExhaustedRecord>() == 24);
const _: () = assert!(core::mem::size_of::<NatQuotaExceededRecord>() == 32);

macro_rules! record_impls {
    ($($ty:ty => $id:expr, $event:expr;)*) => {$(
        impl Record for $ty {
            const SCHEMA_ID: u16 = $id;
            fn header(&self) -> &RecordHeader {
                &self.header
            }
        }
        impl Default for $ty {
            /// Zeroed, with the header set and `nat_event` at its usual value.
            fn default() -> Self {
                // SAFETY: the type is repr(C) plain integers; all-zero is valid.
                let mut r: Self = unsafe { core::mem::zeroed() };
                r.header = RecordHeader::of::<Self>();
                r.nat_event = $event;
                r
            }
        }
    )*};
}

record_impls! {
    NatPortBlockRecord => SCHEMA_NAT_PORT_BLOCK, nat_event::PORT_BLOCK_ALLOCATION;
    NatAddressesExhaustedRecord => SCHEMA_NAT_ADDRESSES_EXHAUSTED, nat_event::ADDRESSES_EXHAUSTED;
    NatPortsExhaustedRecord => SCHEMA_NAT_PORTS_EXHAUSTED, nat_event::PORTS_EXHAUSTED;
    NatQuotaExceededRecord => SCHEMA_NAT_QUOTA_EXCEEDED, nat_event::QUOTA_EXCEEDED;
}

/// Any NAT record in one 64-byte ring slot: the header says which.
///
/// The NAT logs every record type through one ring of slots; the
/// consumer's formatter dispatches on `header.schema_id` to the schema of
/// the record inside, and the logger's
/// [`SchemaTable`](dplog_core::SchemaTable) (built from [`crate::all`])
/// gives each its priority and event time. Build one with `From` from any
/// of the typed records; bytes past the record's `header.len` are zero.
pub type NatRecord = dplog_core::Slot64;

macro_rules! into_nat_record {
    ($($ty:ty),*) => {$(
        impl From<$ty> for NatRecord {
            fn from(r: $ty) -> NatRecord {
                use dplog_core::HasSchema as _;
                // A NAT record is at most 64 bytes with its header's `len`
                // set (asserted at compile time and by the schema tests).
                NatRecord::from_bytes(r.as_bytes())
                    .expect("a NAT record fits a 64-byte slot")
            }
        }
    )*};
}

into_nat_record!(
    Nat44SessionRecord,
    NatPortBlockRecord,
    NatAddressesExhaustedRecord,
    NatPortsExhaustedRecord,
    NatQuotaExceededRecord
);

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
