//! In-place header rewrites of a translated frame: addresses, ports and
//! ICMP echo identifiers, with every checksum that covers them patched
//! incrementally (RFC 1624).

use crate::checksum::{update16, update32};
use crate::packet::{ParsedPacket, Transport};

#[inline]
pub(super) fn get16(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

#[inline]
pub(super) fn put16(b: &mut [u8], at: usize, v: u16) {
    if let Some(s) = at.checked_add(2).and_then(|end| b.get_mut(at..end)) {
        s.copy_from_slice(&v.to_be_bytes());
    }
}

#[inline]
pub(super) fn put32(b: &mut [u8], at: usize, v: u32) {
    if let Some(s) = at.checked_add(4).and_then(|end| b.get_mut(at..end)) {
        s.copy_from_slice(&v.to_be_bytes());
    }
}

/// Rewrites the IPv4 source address of the packet at `l3` and patches the
/// header checksum (RFC 1624).
pub(super) fn rewrite_ip_src(frame: &mut [u8], l3: usize, old: u32, new: u32) {
    if let Some(c) = get16(frame, l3 + 10) {
        put16(frame, l3 + 10, update32(c, old, new));
    }
    put32(frame, l3 + 12, new);
}

/// Rewrites the IPv4 destination address of the packet at `l3` and patches
/// the header checksum (RFC 1624): a later fragment of a hairpinned
/// datagram, which carries no transport header.
pub(super) fn rewrite_ip_dst(frame: &mut [u8], l3: usize, old: u32, new: u32) {
    if let Some(c) = get16(frame, l3 + 10) {
        put16(frame, l3 + 10, update32(c, old, new));
    }
    put32(frame, l3 + 16, new);
}

/// Source NAT of an outbound packet: address, port / ICMP identifier and
/// every checksum that covers them.
pub(super) fn rewrite_outbound(frame: &mut [u8], p: &ParsedPacket, new_addr: u32, new_port: u16) {
    let l3 = p.l3_offset;
    let l4 = p.l4_offset();
    let old_addr = p.ip.src;
    rewrite_ip_src(frame, l3, old_addr, new_addr);
    match p.transport {
        Transport::Tcp(t) => {
            if let Some(c) = get16(frame, l4 + 16) {
                let c = update16(update32(c, old_addr, new_addr), t.src_port, new_port);
                put16(frame, l4 + 16, c);
            }
            put16(frame, l4, new_port);
        }
        Transport::Udp(u) => {
            if u.checksum != 0 {
                let mut c = update16(
                    update32(u.checksum, old_addr, new_addr),
                    u.src_port,
                    new_port,
                );
                if c == 0 {
                    c = 0xFFFF; // RFC 768: a computed 0 is sent as all ones.
                }
                put16(frame, l4 + 6, c);
            }
            put16(frame, l4, new_port);
        }
        Transport::IcmpEcho(e) => {
            if let Some(c) = get16(frame, l4 + 2) {
                put16(frame, l4 + 2, update16(c, e.identifier, new_port));
            }
            put16(frame, l4 + 4, new_port);
        }
        Transport::IcmpOther { .. } | Transport::Fragment | Transport::Other => {}
    }
}

/// Destination NAT of a hairpinned packet: destination address and port
/// from the external form to the inside host `new_addr:new_port`,
/// checksums patched (RFC 1624). TCP and UDP only.
pub(super) fn rewrite_destination(
    frame: &mut [u8],
    p: &ParsedPacket,
    new_addr: u32,
    new_port: u16,
) {
    let (l3, l4) = (p.l3_offset, p.l4_offset());
    let old_addr = p.ip.dst;
    if let Some(c) = get16(frame, l3 + 10) {
        put16(frame, l3 + 10, update32(c, old_addr, new_addr));
    }
    put32(frame, l3 + 16, new_addr);
    match p.transport {
        Transport::Tcp(t) => {
            if let Some(c) = get16(frame, l4 + 16) {
                put16(
                    frame,
                    l4 + 16,
                    update16(update32(c, old_addr, new_addr), t.dst_port, new_port),
                );
            }
            put16(frame, l4 + 2, new_port);
        }
        Transport::Udp(u) => {
            if let Some(c) = get16(frame, l4 + 6).filter(|&c| c != 0) {
                let mut c = update16(update32(c, old_addr, new_addr), u.dst_port, new_port);
                if c == 0 {
                    c = 0xFFFF;
                }
                put16(frame, l4 + 6, c);
            }
            put16(frame, l4 + 2, new_port);
        }
        _ => {}
    }
}
#[cfg(test)]
mod tests {
    use crate::nat::testutil::*;

    #[test]
    fn outbound_udp_is_translated_with_valid_checksums() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let mut f = udp_frame(H1, 5000, R1, 53);
        let orig = f.clone();
        assert_eq!(run(&mut n, &mut log, T0, &mut f), Verdict::TranslatedOut);
        let (a, port) = src_of(&f);
        assert_eq!(a, n.paired_address(H1));
        assert!((0xC633_6401..=0xC633_640E).contains(&a));
        assert_eq!(port, 1024);
        verify_checksums(&f);
        // Only the source address, source port and checksums changed.
        let changed: Vec<usize> = (0..f.len()).filter(|&i| f[i] != orig[i]).collect();
        assert!(!changed.is_empty());
        assert!(
            changed
                .iter()
                .all(|&i| (24..30).contains(&i) || (34..36).contains(&i) || (40..42).contains(&i)),
            "changed bytes {changed:?}"
        );
        assert_eq!(log.0.len(), 1);
        let r = log.0[0];
        assert_eq!(r.header, RecordHeader::of::<Nat44SessionRecord>());
        assert_eq!(
            (
                r.nat_event,
                r.timestamp_ns,
                r.src_addr,
                r.src_port,
                r.post_nat_src_addr,
                r.post_napt_src_port
            ),
            (4, T0, H1, 5000, a, 1024)
        );
        assert_eq!(
            (r.dst_addr, r.dst_port, r.protocol, r.ingress_vrf_id),
            (R1, 53, 17, 0)
        );
        assert_eq!((r.initiator_packets, r.initiator_octets), (0, 0));
    }

    #[test]
    fn udp_checksum_zero_stays_zero_and_tcp_icmp_checksums_stay_valid() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let mut ip = ipv4(H1, R1, PROTO_UDP, &[], &udp(7, 9, b"x"));
        ip[26..28].copy_from_slice(&[0, 0]);
        let mut f = eth_ipv4(&ip);
        assert_eq!(run(&mut n, &mut log, T0, &mut f), Verdict::TranslatedOut);
        assert_eq!(&f[14 + 26..14 + 28], &[0, 0]);
        verify_checksums(&f);

        // TCP with IPv4 options: ports and checksum after the options.
        let opts = [1u8, 1, 1, 0];
        let mut f = eth_ipv4(&ipv4(
            H2,
            R1,
            PROTO_TCP,
            &opts,
            &tcp(33333, 80, TCP_SYN, b""),
        ));
        assert_eq!(run(&mut n, &mut log, T0, &mut f), Verdict::TranslatedOut);
        verify_checksums(&f);
        assert_eq!(src_of(&f), (n.paired_address(H2), 1024));

        let mut f = eth_ipv4(&ipv4(H1, R2, PROTO_ICMP, &[], &icmp_echo(false, 0x77, 1)));
        assert_eq!(run(&mut n, &mut log, T0, &mut f), Verdict::TranslatedOut);
        verify_checksums(&f);
        let r = log.0.last().unwrap();
        assert_eq!((r.protocol, r.src_port, r.dst_port), (1, 0x77, 0));
        assert_eq!(src_of(&f).1, r.post_napt_src_port);
    }

    #[test]
    fn exhaustive_checksum_equivalence_over_many_ports() {
        // Random-ish inside ports and addresses; the incremental result must
        // equal a full recomputation every time.
        let mut n = nat();
        let mut log = Log(vec![]);
        for i in 0..2000u32 {
            let src = 0x0A00_0000 | (i.wrapping_mul(2_654_435_761) & 0x00FF_FFFF).max(1);
            let sport = (i.wrapping_mul(40503) & 0xFFFF) as u16;
            for mut f in [
                udp_frame(src, sport, R1, 443),
                tcp_frame(src, sport, R2, 443, TCP_ACK),
                eth_ipv4(&ipv4(src, R1, PROTO_ICMP, &[], &icmp_echo(false, sport, 3))),
            ] {
                assert_eq!(run(&mut n, &mut log, T0, &mut f), Verdict::TranslatedOut);
                verify_checksums(&f);
            }
        }
    }
}
