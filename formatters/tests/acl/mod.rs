//! A user record type for the IPFIX tests (tests/ipfix.rs with tshark,
//! tests/nfcapd.rs with nfcapd): not NAT, with fields that have no IANA
//! element (exported as enterprise-specific elements) and a TSC event time.
#![allow(dead_code)]

use std::sync::OnceLock;

use dplog_core::schema::{HasSchema, Schema};
use dplog_core::{schema, Record, RecordHeader};
use dplog_formatters::TscCalibration;

/// A user record type, not NAT: an ACL drop stamped with TSC ticks, with
/// IANA elements and three fields without one (the drop reason, the rule
/// id and whether it was logged).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct AclDrop {
    pub header: RecordHeader,
    pub ticks: u64,
    pub src_addr: [u8; 16],
    pub src_mac: [u8; 6],
    pub vlan: u16,
    pub reason: u8,
    pub protocol: u8,
    pub src_port: u16,
    pub dst_port: u16,
    pub logged: u8,
    pub pad: u8,
    pub rule: u32,
    pub pad2: [u8; 4],
}

impl Record for AclDrop {
    const SCHEMA_ID: u16 = 700;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 16 + 6 + 2 + 1 + 1 + 2 + 2 + 1 + 1 + 4 + 4 = 56
// bytes without padding, described by the schema built from its own
// offset_of! values.
unsafe impl HasSchema for AclDrop {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(AclDrop, id = 700, name = "aclDrop", [
                ticks => "dropTime": TscTimestamp, ie 0;
                src_addr => "sourceIPv6Address": Ipv6, ie 27;
                src_mac => "sourceMacAddress": Mac, ie 56;
                vlan => "vlanId": U16, ie 58;
                reason => "dropReason": Enum, ie 0,
                    names &[(1, "NO_RULE"), (2, "DENY"), (3, "RATE_LIMIT")];
                protocol => "protocolIdentifier": Protocol, ie 4;
                src_port => "sourceTransportPort": Port, ie 7;
                dst_port => "destinationTransportPort": Port, ie 11;
                logged => "logged": Bool, ie 0;
                rule => "ruleId": U32, ie 0;
            ])
            .unwrap()
        })
    }
}

/// 2026-01-01T00:00:00Z in ns.
pub const ACL_T0: u64 = 1_767_225_600_000_000_000;

/// 2.5 GHz; tick 1000 is ACL_T0.
pub const ACL_CAL: TscCalibration = TscCalibration {
    hz: 2_500_000_000,
    tsc0: 1_000,
    ns0: ACL_T0,
};

/// A drop `ms` milliseconds (plus 0.4 ms, cut by the ms encoding) after
/// ACL_T0, in ticks of ACL_CAL.
pub fn acl_drop(ms: u64, reason: u8, rule: u32, logged: bool) -> AclDrop {
    let ns = ms * 1_000_000 + 400_000;
    AclDrop {
        header: RecordHeader::of::<AclDrop>(),
        ticks: 1_000 + ns * 5 / 2,
        src_addr: [
            0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, reason,
        ],
        src_mac: [0x02, 0x00, 0x5e, 0x10, 0x20, reason],
        vlan: 100 + u16::from(reason),
        reason,
        protocol: 17,
        src_port: 5353,
        dst_port: 53,
        logged: u8::from(logged),
        pad: 0,
        rule,
        pad2: [0; 4],
    }
}
