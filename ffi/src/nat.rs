//! Everything NAT-specific in the C ABI: the built-in NAT schema ids
//! (`DPLOG_SCHEMA_NAT*`), the RFC 8158 natEvent values
//! (`DPLOG_NAT_EVENT_*`) and the NAT record structs (`dplog_nat44_session`
//! and the port-block, exhaustion and quota events), each checked at
//! compile time to be the core's record byte for byte, and
//! `dplog_register_nat_schemas`, which a handle needs before it serves
//! any of them.

use dplog::nat::{
    Nat44SessionRecord, NatAddressesExhaustedRecord, NatPortBlockRecord, NatPortsExhaustedRecord,
    NatQuotaExceededRecord,
};

use crate::handle::{dplog_t, logger};
use crate::result::{dplog_result, guard, DPLOG_OK};
use crate::tombstone::lock;
use crate::types::dplog_record_header;

/// Schema id of `struct dplog_nat44_session`.
pub const DPLOG_SCHEMA_NAT44_SESSION: u16 = 1;
const _: () = assert!(DPLOG_SCHEMA_NAT44_SESSION == dplog::nat::SCHEMA_NAT44_SESSION);
/// Schema id of `struct dplog_nat_port_block` (natEvent 16/17).
pub const DPLOG_SCHEMA_NAT_PORT_BLOCK: u16 = 2;
/// Schema id of `struct dplog_nat_addresses_exhausted` (natEvent 3).
pub const DPLOG_SCHEMA_NAT_ADDRESSES_EXHAUSTED: u16 = 3;
/// Schema id of `struct dplog_nat_ports_exhausted` (natEvent 12).
pub const DPLOG_SCHEMA_NAT_PORTS_EXHAUSTED: u16 = 4;
/// Schema id of `struct dplog_nat_quota_exceeded` (natEvent 13).
pub const DPLOG_SCHEMA_NAT_QUOTA_EXCEEDED: u16 = 5;

const _: () = {
    assert!(DPLOG_SCHEMA_NAT_PORT_BLOCK == dplog::nat::SCHEMA_NAT_PORT_BLOCK);
    assert!(DPLOG_SCHEMA_NAT_ADDRESSES_EXHAUSTED == dplog::nat::SCHEMA_NAT_ADDRESSES_EXHAUSTED);
    assert!(DPLOG_SCHEMA_NAT_PORTS_EXHAUSTED == dplog::nat::SCHEMA_NAT_PORTS_EXHAUSTED);
    assert!(DPLOG_SCHEMA_NAT_QUOTA_EXCEEDED == dplog::nat::SCHEMA_NAT_QUOTA_EXCEEDED);
};

/// Makes the handle serve the built-in NAT schemas (`DPLOG_SCHEMA_NAT*`,
/// the structs below) besides the types registered with
/// `dplog_schema_register`: those that fit the logger's slot (`[ring]
/// slot_bytes`; a 32-byte-slot logger takes the exhaustion and quota
/// events, 24 and 32 bytes, but not NAT44 sessions, 64, or port blocks,
/// 40). The same as `[schemas] nat = true` in the config. Call it between
/// `dplog_open` and `dplog_start` (or `dplog_attach`); calling it again
/// changes nothing.
///
/// A handle that does not ask serves only its registered types: a NAT
/// record logged there is `DPLOG_ERR_UNKNOWN_SCHEMA`, and no NAT column,
/// IPFIX template or schema appears in its output (CSV header, IPFIX
/// templates, binary and shared-memory ring schemas). With the NAT
/// schemas, the formats list them after the registered types; `[format]
/// template` applies to the first registered type, or to `nat44Session`
/// when none is registered.
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_STATE` (after `dplog_start`),
/// `DPLOG_ERR_CLOSED`. Thread-safety: any thread.
///
/// # Safety
/// `h` is NULL or returned by `dplog_open*`.
#[no_mangle]
pub unsafe extern "C" fn dplog_register_nat_schemas(h: *mut dplog_t) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        let l = match unsafe { logger(h) } {
            Ok(l) => l,
            Err(e) => return e,
        };
        let mut st = lock(&l.state);
        match st.opened("dplog_register_nat_schemas: call it before dplog_start") {
            Ok(p) => {
                p.nat = true;
                DPLOG_OK
            }
            Err(e) => e,
        }
    })
}

/// Size in bytes of `struct dplog_nat44_session` (one 64-byte ring slot).
pub const DPLOG_NAT44_SESSION_SIZE: usize = 64;

/// natEvent 1 (historic): NAT translation create (RFC 8158, IANA registry).
pub const DPLOG_NAT_EVENT_TRANSLATION_CREATE: u8 = 1;
/// natEvent 2 (historic): NAT translation delete.
pub const DPLOG_NAT_EVENT_TRANSLATION_DELETE: u8 = 2;
/// natEvent 3: NAT addresses exhausted.
pub const DPLOG_NAT_EVENT_ADDRESSES_EXHAUSTED: u8 = 3;
/// natEvent 4: NAT44 session create.
pub const DPLOG_NAT_EVENT_NAT44_SESSION_CREATE: u8 = 4;
/// natEvent 5: NAT44 session delete.
pub const DPLOG_NAT_EVENT_NAT44_SESSION_DELETE: u8 = 5;
/// natEvent 12: NAT ports exhausted.
pub const DPLOG_NAT_EVENT_PORTS_EXHAUSTED: u8 = 12;
/// natEvent 13: quota exceeded.
pub const DPLOG_NAT_EVENT_QUOTA_EXCEEDED: u8 = 13;
/// natEvent 16: port block allocation.
pub const DPLOG_NAT_EVENT_PORT_BLOCK_ALLOCATION: u8 = 16;
/// natEvent 17: port block de-allocation.
pub const DPLOG_NAT_EVENT_PORT_BLOCK_DEALLOCATION: u8 = 17;

/// A NAT44 session create or delete event (RFC 8158 natEvent 4 and 5);
/// schema `DPLOG_SCHEMA_NAT44_SESSION`, exactly 64 bytes.
///
/// Addresses are IPv4 addresses in host byte order (10.0.0.1 is
/// 0x0A000001); ports are host byte order. Counters are meaningful on
/// deletes (natEvent 5) and zero on creates.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct dplog_nat44_session {
    /// Filled by dplog (len 64, schema 1).
    pub header: dplog_record_header,
    /// Event time, nanoseconds since the Unix epoch (UTC, CLOCK_REALTIME).
    pub timestamp_ns: u64,
    /// sourceIPv4Address (IE 8): pre-NAT inside source address.
    pub src_addr: u32,
    /// postNATSourceIPv4Address (IE 225): outside address from the pool.
    pub post_nat_src_addr: u32,
    /// destinationIPv4Address (IE 12).
    pub dst_addr: u32,
    /// sourceTransportPort (IE 7), or the ICMP echo identifier.
    pub src_port: u16,
    /// postNAPTSourceTransportPort (IE 227).
    pub post_napt_src_port: u16,
    /// destinationTransportPort (IE 11); 0 for ICMP.
    pub dst_port: u16,
    /// protocolIdentifier (IE 4): 1 ICMP, 6 TCP, 17 UDP.
    pub protocol: u8,
    /// natEvent (IE 230): `DPLOG_NAT_EVENT_NAT44_SESSION_CREATE` or `_DELETE`.
    pub nat_event: u8,
    /// ingressVRFID (IE 234); 0 for the default VRF.
    pub ingress_vrf_id: u32,
    /// initiatorPackets (IE 298), deletes only.
    pub initiator_packets: u32,
    /// responderPackets (IE 299), deletes only.
    pub responder_packets: u32,
    /// initiatorOctets (IE 231), deletes only.
    pub initiator_octets: u64,
    /// responderOctets (IE 232), deletes only.
    pub responder_octets: u64,
}

// The C struct is the Rust record, byte for byte.
const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    type R = Nat44SessionRecord;
    type C = dplog_nat44_session;
    assert!(size_of::<C>() == size_of::<R>() && size_of::<C>() == DPLOG_NAT44_SESSION_SIZE);
    assert!(align_of::<C>() == align_of::<R>());
    assert!(offset_of!(C, timestamp_ns) == offset_of!(R, timestamp_ns));
    assert!(offset_of!(C, src_addr) == offset_of!(R, src_addr));
    assert!(offset_of!(C, post_nat_src_addr) == offset_of!(R, post_nat_src_addr));
    assert!(offset_of!(C, dst_addr) == offset_of!(R, dst_addr));
    assert!(offset_of!(C, src_port) == offset_of!(R, src_port));
    assert!(offset_of!(C, post_napt_src_port) == offset_of!(R, post_napt_src_port));
    assert!(offset_of!(C, dst_port) == offset_of!(R, dst_port));
    assert!(offset_of!(C, protocol) == offset_of!(R, protocol));
    assert!(offset_of!(C, nat_event) == offset_of!(R, nat_event));
    assert!(offset_of!(C, ingress_vrf_id) == offset_of!(R, ingress_vrf_id));
    assert!(offset_of!(C, initiator_packets) == offset_of!(R, initiator_packets));
    assert!(offset_of!(C, responder_packets) == offset_of!(R, responder_packets));
    assert!(offset_of!(C, initiator_octets) == offset_of!(R, initiator_octets));
    assert!(offset_of!(C, responder_octets) == offset_of!(R, responder_octets));
};

/// Port block allocation or release (natEvent 16/17, RFC 8158); schema
/// `DPLOG_SCHEMA_NAT_PORT_BLOCK`, 40 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct dplog_nat_port_block {
    /// Filled by dplog.
    pub header: dplog_record_header,
    /// Event time, ns since the Unix epoch.
    pub timestamp_ns: u64,
    /// sourceIPv4Address (IE 8): the subscriber.
    pub src_addr: u32,
    /// postNATSourceIPv4Address (IE 225).
    pub post_nat_src_addr: u32,
    /// portRangeStart (IE 361).
    pub port_range_start: u16,
    /// portRangeEnd (IE 362), inclusive.
    pub port_range_end: u16,
    /// portRangeStepSize (IE 363); 1 for a contiguous block.
    pub port_range_step: u16,
    /// natEvent: 16 allocation, 17 release.
    pub nat_event: u8,
    /// 0.
    pub reserved: u8,
    /// portRangeNumPorts (IE 364).
    pub port_range_num_ports: u16,
    /// 0.
    pub reserved2: u16,
    /// ingressVRFID (IE 234).
    pub ingress_vrf_id: u32,
}

/// NAT addresses exhausted (natEvent 3); schema
/// `DPLOG_SCHEMA_NAT_ADDRESSES_EXHAUSTED`, 24 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct dplog_nat_addresses_exhausted {
    /// Filled by dplog.
    pub header: dplog_record_header,
    /// Event time, ns since the Unix epoch.
    pub timestamp_ns: u64,
    /// natPoolId (IE 283).
    pub nat_pool_id: u32,
    /// natEvent: 3.
    pub nat_event: u8,
    /// 0.
    pub reserved: [u8; 3],
}

/// NAT ports exhausted (natEvent 12); schema
/// `DPLOG_SCHEMA_NAT_PORTS_EXHAUSTED`, 24 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct dplog_nat_ports_exhausted {
    /// Filled by dplog.
    pub header: dplog_record_header,
    /// Event time, ns since the Unix epoch.
    pub timestamp_ns: u64,
    /// postNATSourceIPv4Address (IE 225) whose ports ran out.
    pub post_nat_src_addr: u32,
    /// protocolIdentifier (IE 4).
    pub protocol: u8,
    /// natEvent: 12.
    pub nat_event: u8,
    /// 0.
    pub reserved: u16,
}

/// NAT quota exceeded (natEvent 13) with its subtype; schema
/// `DPLOG_SCHEMA_NAT_QUOTA_EXCEEDED`, 32 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct dplog_nat_quota_exceeded {
    /// Filled by dplog.
    pub header: dplog_record_header,
    /// Event time, ns since the Unix epoch.
    pub timestamp_ns: u64,
    /// natQuotaExceededEvent (IE 466): 1 max sessions, 2 max BIB entries,
    /// 3 max entries per user, 4 max subscribers, 5 max fragments pending.
    pub quota_event: u32,
    /// The limit that was hit (IE 471..475 by subtype).
    pub limit: u32,
    /// sourceIPv4Address (IE 8); 0 unless the quota is per user.
    pub src_addr: u32,
    /// natEvent: 13.
    pub nat_event: u8,
    /// 0.
    pub reserved: [u8; 3],
}

// The C structs are the Rust records, byte for byte.
const _: () = {
    use core::mem::{offset_of, size_of};
    type Pb = dplog_nat_port_block;
    type PbR = NatPortBlockRecord;
    assert!(size_of::<Pb>() == size_of::<PbR>());
    assert!(offset_of!(Pb, port_range_start) == offset_of!(PbR, port_range_start));
    assert!(offset_of!(Pb, nat_event) == offset_of!(PbR, nat_event));
    assert!(offset_of!(Pb, port_range_num_ports) == offset_of!(PbR, port_range_num_ports));
    assert!(offset_of!(Pb, ingress_vrf_id) == offset_of!(PbR, ingress_vrf_id));
    type Ae = dplog_nat_addresses_exhausted;
    type AeR = NatAddressesExhaustedRecord;
    assert!(size_of::<Ae>() == size_of::<AeR>());
    assert!(offset_of!(Ae, nat_pool_id) == offset_of!(AeR, nat_pool_id));
    assert!(offset_of!(Ae, nat_event) == offset_of!(AeR, nat_event));
    type Pe = dplog_nat_ports_exhausted;
    type PeR = NatPortsExhaustedRecord;
    assert!(size_of::<Pe>() == size_of::<PeR>());
    assert!(offset_of!(Pe, protocol) == offset_of!(PeR, protocol));
    assert!(offset_of!(Pe, nat_event) == offset_of!(PeR, nat_event));
    type Qe = dplog_nat_quota_exceeded;
    type QeR = NatQuotaExceededRecord;
    assert!(size_of::<Qe>() == size_of::<QeR>());
    assert!(offset_of!(Qe, limit) == offset_of!(QeR, limit));
    assert!(offset_of!(Qe, src_addr) == offset_of!(QeR, src_addr));
    assert!(offset_of!(Qe, nat_event) == offset_of!(QeR, nat_event));
};
