//! Sample records shared by the formatter tests.
#![allow(dead_code)]

use dplog_core::RecordHeader;
use dplog_schema_nat::{nat_event, quota_event};
use dplog_schema_nat::{
    Nat44SessionRecord, NatAddressesExhaustedRecord, NatPortBlockRecord, NatPortsExhaustedRecord,
    NatQuotaExceededRecord, NatRecord,
};

/// 2026-01-01T00:00:00.123456789Z.
pub const T0: u64 = 1_767_225_600_123_456_789;

pub fn session(event: u8) -> Nat44SessionRecord {
    let delete = event == nat_event::NAT44_SESSION_DELETE;
    Nat44SessionRecord {
        header: RecordHeader::of::<Nat44SessionRecord>(),
        timestamp_ns: if delete { T0 + 61_500_000_000 } else { T0 },
        src_addr: 0x0A00_0006,
        post_nat_src_addr: 0xC633_6403,
        dst_addr: 0xCB00_7105,
        src_port: 51_234,
        post_napt_src_port: 1024,
        dst_port: 443,
        protocol: 6,
        nat_event: event,
        ingress_vrf_id: 7,
        initiator_packets: if delete { 10 } else { 0 },
        responder_packets: if delete { 9 } else { 0 },
        initiator_octets: if delete { 1_500 } else { 0 },
        responder_octets: if delete { 64_000 } else { 0 },
    }
}

/// One of every built-in NAT record.
pub fn all_records() -> Vec<NatRecord> {
    vec![
        session(nat_event::NAT44_SESSION_CREATE).into(),
        session(nat_event::NAT44_SESSION_DELETE).into(),
        NatPortBlockRecord {
            timestamp_ns: T0 + 1_000_000,
            src_addr: 0x0A00_0007,
            post_nat_src_addr: 0xC633_6404,
            port_range_start: 2048,
            port_range_end: 2559,
            port_range_step: 1,
            port_range_num_ports: 512,
            ingress_vrf_id: 3,
            ..Default::default()
        }
        .into(),
        NatPortBlockRecord {
            timestamp_ns: T0 + 2_000_000,
            src_addr: 0x0A00_0007,
            post_nat_src_addr: 0xC633_6404,
            port_range_start: 2048,
            port_range_end: 2559,
            port_range_step: 1,
            port_range_num_ports: 512,
            nat_event: nat_event::PORT_BLOCK_DEALLOCATION,
            ..Default::default()
        }
        .into(),
        NatAddressesExhaustedRecord {
            timestamp_ns: T0 + 3_000_000,
            nat_pool_id: 42,
            ..Default::default()
        }
        .into(),
        NatPortsExhaustedRecord {
            timestamp_ns: T0 + 4_000_000,
            post_nat_src_addr: 0xC633_64FE,
            protocol: 17,
            ..Default::default()
        }
        .into(),
        NatQuotaExceededRecord {
            timestamp_ns: T0 + 5_000_000,
            quota_event: quota_event::MAX_ENTRIES_PER_USER,
            limit: 300,
            src_addr: 0x0A00_0009,
            ..Default::default()
        }
        .into(),
    ]
}
