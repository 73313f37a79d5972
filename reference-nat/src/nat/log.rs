//! Where a [`Nat44`]'s records go ([`NatLog`], [`AllRecords`]), and the
//! builders of its session (natEvent 4/5) and port block (natEvent 16/17)
//! records.

use dplog::nat::nat_event;
use dplog::nat::{Nat44SessionRecord, NatEvent, NatPortBlockRecord, NatRecord};
use dplog::RecordHeader;

use super::session::Session;
use super::Nat44;

/// Receives every record a [`Nat44`] produces, in event order.
///
/// Any `FnMut(Nat44SessionRecord)` closure is a `NatLog` that gets the
/// session records (natEvent 4/5) and discards the others; wrap a
/// `FnMut(NatRecord)` in [`AllRecords`] to receive every record type in one
/// 64-byte slot type (what the `dplog-nat` workers push into their ring).
pub trait NatLog {
    /// A NAT44 session create (natEvent 4) or delete (natEvent 5).
    fn session(&mut self, rec: Nat44SessionRecord);
    /// Any other NAT record: port block allocation / release (16/17),
    /// addresses or ports exhausted (3/12), quota exceeded (13). The
    /// default discards it.
    fn event(&mut self, rec: NatRecord) {
        let _ = rec;
    }
}

impl<F: FnMut(Nat44SessionRecord)> NatLog for F {
    #[inline]
    fn session(&mut self, rec: Nat44SessionRecord) {
        self(rec)
    }
}

/// A [`NatLog`] that hands every record, of any type, to `F` as a
/// [`NatRecord`] slot.
pub struct AllRecords<F>(pub F);

impl<F> std::fmt::Debug for AllRecords<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AllRecords").finish_non_exhaustive()
    }
}

impl<F: FnMut(NatRecord)> NatLog for AllRecords<F> {
    #[inline]
    fn session(&mut self, rec: Nat44SessionRecord) {
        (self.0)(NatRecord::from(rec))
    }
    #[inline]
    fn event(&mut self, rec: NatRecord) {
        (self.0)(rec)
    }
}

impl Nat44 {
    pub(super) fn record(&self, s: &Session, event: NatEvent, ts: u64) -> Nat44SessionRecord {
        Nat44SessionRecord {
            header: RecordHeader::of::<Nat44SessionRecord>(),
            timestamp_ns: ts,
            src_addr: s.key.inside_addr,
            post_nat_src_addr: s.ext_addr,
            dst_addr: s.key.remote_addr,
            src_port: s.key.inside_port,
            post_napt_src_port: s.ext_port,
            dst_port: s.key.remote_port,
            protocol: s.key.proto,
            nat_event: event as u8,
            ingress_vrf_id: self.cfg.vrf_id,
            initiator_packets: s.init_packets,
            responder_packets: s.resp_packets,
            initiator_octets: s.init_octets,
            responder_octets: s.resp_octets,
        }
    }

    pub(super) fn block_record(
        &self,
        inside: u32,
        ext_addr: u32,
        block: u16,
        size: u16,
        ts: u64,
        allocation: bool,
    ) -> NatPortBlockRecord {
        let start = u32::from(self.cfg.port_range.0) + u32::from(block) * u32::from(size);
        NatPortBlockRecord {
            timestamp_ns: ts,
            src_addr: inside,
            post_nat_src_addr: ext_addr,
            port_range_start: start as u16,
            port_range_end: (start + u32::from(size) - 1) as u16,
            port_range_step: 1,
            nat_event: if allocation {
                nat_event::PORT_BLOCK_ALLOCATION
            } else {
                nat_event::PORT_BLOCK_DEALLOCATION
            },
            port_range_num_ports: size,
            ingress_vrf_id: self.cfg.vrf_id,
            ..Default::default()
        }
    }
}
