//! Helpers of the engine's unit tests: a standard engine, frame builders,
//! record collectors and checksum checks.

pub(super) use dplog::nat::{Nat44SessionRecord, NatRecord};
pub(super) use dplog::RecordHeader;

pub(super) use super::*;
pub(super) use crate::checksum::{internet_checksum, transport_checksum};
pub(super) use crate::packet::build::*;
pub(super) use crate::packet::{
    self, Transport, LINKTYPE_ETHERNET, LINKTYPE_RAW, PROTO_ICMP, PROTO_TCP, PROTO_UDP, TCP_ACK,
    TCP_SYN,
};

pub(super) const SEC: u64 = 1_000_000_000;
pub(super) const T0: u64 = 1_767_225_600 * SEC;
pub(super) const H1: u32 = 0x0A00_0001; // 10.0.0.1
pub(super) const H2: u32 = 0x0A00_0002; // 10.0.0.2
pub(super) const R1: u32 = 0xCB00_7101; // 203.0.113.1
pub(super) const R2: u32 = 0xCB00_7102; // 203.0.113.2

pub(super) fn nat() -> Nat44 {
    Nat44::new(NatConfig::new(
        vec!["10.0.0.0/8".parse().unwrap()],
        "198.51.100.0/28".parse().unwrap(),
    ))
    .unwrap()
}

pub(super) struct Log(pub(super) Vec<Nat44SessionRecord>);
impl Log {
    pub(super) fn f(&mut self) -> impl FnMut(Nat44SessionRecord) + '_ {
        |r| self.0.push(r)
    }
    pub(super) fn events(&self, e: u8) -> Vec<&Nat44SessionRecord> {
        self.0.iter().filter(|r| r.nat_event == e).collect()
    }
}

pub(super) fn run(n: &mut Nat44, log: &mut Log, ts: u64, frame: &mut [u8]) -> Verdict {
    n.process(ts, LINKTYPE_ETHERNET, frame, &mut log.f())
}

pub(super) fn udp_frame(src: u32, sport: u16, dst: u32, dport: u16) -> Vec<u8> {
    eth_ipv4(&ipv4(
        src,
        dst,
        PROTO_UDP,
        &[],
        &udp(sport, dport, b"payload!"),
    ))
}

pub(super) fn tcp_frame(src: u32, sport: u16, dst: u32, dport: u16, flags: u8) -> Vec<u8> {
    eth_ipv4(&ipv4(
        src,
        dst,
        PROTO_TCP,
        &[],
        &tcp(sport, dport, flags, b"data"),
    ))
}

pub(super) fn src_of(f: &[u8]) -> (u32, u16) {
    let p = packet::parse(LINKTYPE_ETHERNET, f).unwrap();
    let port = match p.transport {
        Transport::Tcp(t) => t.src_port,
        Transport::Udp(u) => u.src_port,
        Transport::IcmpEcho(e) => e.identifier,
        _ => 0,
    };
    (p.ip.src, port)
}

/// Verifies IPv4 and transport checksums of an Ethernet frame.
pub(super) fn verify_checksums(f: &[u8]) {
    let p = packet::parse(LINKTYPE_ETHERNET, f).unwrap();
    let ip = &f[p.l3_offset..p.l3_end()];
    let hl = usize::from(p.ip.header_len);
    assert_eq!(internet_checksum(&ip[..hl]), 0, "IPv4 header checksum");
    let seg = &ip[hl..];
    match p.transport {
        Transport::Tcp(_) => {
            assert_eq!(transport_checksum(p.ip.src, p.ip.dst, 6, seg), 0, "TCP")
        }
        Transport::Udp(u) if u.checksum != 0 => {
            assert_eq!(transport_checksum(p.ip.src, p.ip.dst, 17, seg), 0, "UDP")
        }
        Transport::IcmpEcho(_) => assert_eq!(internet_checksum(seg), 0, "ICMP"),
        _ => {}
    }
}

/// Every record, of any type, as a NatRecord slot.
#[derive(Default)]
pub(super) struct All(pub(super) Vec<NatRecord>);
impl All {
    pub(super) fn f(&mut self) -> AllRecords<impl FnMut(NatRecord) + '_> {
        AllRecords(|r| self.0.push(r))
    }
    /// (natEvent, schema) of every record in order.
    pub(super) fn kinds(&self) -> Vec<(u8, u16)> {
        self.0
            .iter()
            .map(|r| (event_of(r), r.header().schema_id))
            .collect()
    }
    pub(super) fn of_event(&self, e: u8) -> Vec<&NatRecord> {
        self.0.iter().filter(|r| event_of(r) == e).collect()
    }
}

pub(super) fn u16_at(r: &NatRecord, at: usize) -> u16 {
    u16::from_ne_bytes([r.as_bytes()[at], r.as_bytes()[at + 1]])
}
pub(super) fn u32_at(r: &NatRecord, at: usize) -> u32 {
    u32::from_ne_bytes(r.as_bytes()[at..at + 4].try_into().unwrap())
}
/// natEvent byte of a record by schema (see core/src/record.rs).
pub(super) fn event_of(r: &NatRecord) -> u8 {
    let at = match r.header().schema_id {
        dplog::nat::SCHEMA_NAT44_SESSION => 35,
        dplog::nat::SCHEMA_NAT_PORT_BLOCK => 30,
        dplog::nat::SCHEMA_NAT_ADDRESSES_EXHAUSTED => 20,
        dplog::nat::SCHEMA_NAT_PORTS_EXHAUSTED => 21,
        dplog::nat::SCHEMA_NAT_QUOTA_EXCEEDED => 28,
        s => panic!("schema {s}"),
    };
    r.as_bytes()[at]
}
/// (src_addr, post_nat_src_addr, start, end, num_ports) of a block record.
pub(super) fn block_of(r: &NatRecord) -> (u32, u32, u16, u16, u16) {
    assert_eq!(r.header().schema_id, dplog::nat::SCHEMA_NAT_PORT_BLOCK);
    (
        u32_at(r, 16),
        u32_at(r, 20),
        u16_at(r, 24),
        u16_at(r, 26),
        u16_at(r, 32),
    )
}

pub(super) fn pba(size: u16, max_blocks: u16, pool: &str) -> Nat44 {
    let mut c = NatConfig::new(vec!["10.0.0.0/8".parse().unwrap()], pool.parse().unwrap());
    c.port_allocation = PortAllocation::PortBlock { size, max_blocks };
    Nat44::new(c).unwrap()
}

/// An ICMP error of `icmp_type` from `src` to `dst` quoting `quoted`.
pub(super) fn icmp_error_frame(src: u32, dst: u32, icmp_type: u8, quoted: &[u8]) -> Vec<u8> {
    let mut m = vec![icmp_type, 3, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(quoted);
    eth_ipv4(&ipv4(src, dst, PROTO_ICMP, &[], &m))
}
