//! ICMP errors (RFC 5508 section 4): the quoted packet is matched to its
//! session and, outbound, translated along with the outer source.

use super::rewrite::{get16, put16, put32, rewrite_ip_src};
use super::session::FlowKey;
use super::{Nat44, Verdict};
use crate::checksum::{internet_checksum, update16, update32};
use crate::packet::{ParsedPacket, PROTO_ICMP, PROTO_TCP, PROTO_UDP};

impl Nat44 {
    /// An ICMP error (RFC 5508 section 4): the quoted packet (IPv4 header
    /// and at least 8 bytes of its transport header, RFC 792) travelled the
    /// other way, so an outbound error quotes a packet *to* the inside host.
    /// Outbound: the outer source, the quoted destination address and port
    /// (or echo identifier) are translated, with the quoted IPv4 header
    /// checksum, the quoted transport checksum (when quoted) and the ICMP
    /// checksum. Inbound: matched and left as is. Errors do not refresh
    /// the session. Quotes that are truncated, fragments, of another
    /// protocol, or ICMP errors themselves are dropped and counted.
    pub(super) fn icmp_error(
        &mut self,
        p: &ParsedPacket,
        outbound: bool,
        frame: &mut [u8],
    ) -> Verdict {
        if p.ip.is_fragment() {
            return Verdict::IcmpErrorBadQuote;
        }
        let l4 = p.l4_offset();
        let end = p.l3_end().min(frame.len());
        let q = l4 + 8; // quoted IPv4 header
        let Some(quote) = frame.get(q..end) else {
            return Verdict::IcmpErrorBadQuote;
        };
        if quote.len() < 20 || quote[0] >> 4 != 4 {
            return Verdict::IcmpErrorBadQuote;
        }
        let ihl = usize::from(quote[0] & 0x0F) * 4;
        if ihl < 20 || quote.len() < ihl + 8 {
            return Verdict::IcmpErrorBadQuote;
        }
        if u16::from_be_bytes([quote[6], quote[7]]) & 0x1FFF != 0 {
            return Verdict::IcmpErrorBadQuote;
        }
        let iproto = quote[9];
        let isrc = u32::from_be_bytes([quote[12], quote[13], quote[14], quote[15]]);
        let idst = u32::from_be_bytes([quote[16], quote[17], quote[18], quote[19]]);
        let t = q + ihl; // quoted transport header
        let (isport, idport, echo) = match iproto {
            PROTO_TCP | PROTO_UDP => (
                get16(frame, t).unwrap_or(0),
                get16(frame, t + 2).unwrap_or(0),
                false,
            ),
            PROTO_ICMP => match frame[t] {
                0 | 8 => {
                    let id = get16(frame, t + 4).unwrap_or(0);
                    (id, id, true)
                }
                ty if is_icmp_error(ty) => return Verdict::IcmpErrorQuotesError,
                _ => return Verdict::IcmpErrorBadQuote,
            },
            _ => return Verdict::IcmpErrorBadQuote,
        };
        let key = if outbound {
            FlowKey {
                inside_addr: idst,
                remote_addr: isrc,
                inside_port: idport,
                remote_port: if echo { 0 } else { isport },
                proto: iproto,
            }
        } else {
            FlowKey {
                inside_addr: isrc,
                remote_addr: idst,
                inside_port: isport,
                remote_port: if echo { 0 } else { idport },
                proto: iproto,
            }
        };
        let Some(&slot) = self.flows.get(&key) else {
            return Verdict::IcmpErrorNoSession;
        };
        if !outbound {
            return Verdict::IcmpErrorIn;
        }
        let s = &self.slots[slot as usize];
        let (ext_addr, ext_port) = (s.ext_addr, s.ext_port);
        // Outer source: the session's external address if the inside host
        // itself reports, else the reporting host's paired address.
        let outer = if p.ip.src == idst {
            ext_addr
        } else {
            self.paired_address(p.ip.src)
        };
        rewrite_ip_src(frame, p.l3_offset, p.ip.src, outer);
        // Quoted destination address and its header checksum.
        if let Some(c) = get16(frame, q + 10) {
            put16(frame, q + 10, update32(c, idst, ext_addr));
        }
        put32(frame, q + 16, ext_addr);
        match iproto {
            PROTO_UDP => {
                if let Some(c) = get16(frame, t + 6).filter(|&c| c != 0) {
                    let mut c = update16(update32(c, idst, ext_addr), idport, ext_port);
                    if c == 0 {
                        c = 0xFFFF;
                    }
                    put16(frame, t + 6, c);
                }
                put16(frame, t + 2, ext_port);
            }
            PROTO_TCP => {
                if t + 18 <= end {
                    if let Some(c) = get16(frame, t + 16) {
                        put16(
                            frame,
                            t + 16,
                            update16(update32(c, idst, ext_addr), idport, ext_port),
                        );
                    }
                }
                put16(frame, t + 2, ext_port);
            }
            _ => {
                // Quoted echo: the identifier and the quoted ICMP checksum.
                if let Some(c) = get16(frame, t + 2) {
                    put16(frame, t + 2, update16(c, idport, ext_port));
                }
                put16(frame, t + 4, ext_port);
            }
        }
        // The ICMP checksum covers the whole message: recompute it.
        put16(frame, l4 + 2, 0);
        let c = internet_checksum(&frame[l4..end]);
        put16(frame, l4 + 2, c);
        Verdict::IcmpErrorOut
    }
}

/// ICMP error types translated per RFC 5508: destination unreachable (3),
/// source quench (4), time exceeded (11), parameter problem (12).
pub(super) fn is_icmp_error(icmp_type: u8) -> bool {
    matches!(icmp_type, 3 | 4 | 11 | 12)
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::nat::testutil::*;

    #[test]
    fn outbound_icmp_error_translates_the_quoted_packet() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let mut f = udp_frame(H1, 1111, R1, 53);
        run(&mut n, &mut log, T0, &mut f);
        let (ext, ext_port) = src_of(&f);
        // R1's reply (inside form) that H1 answers with port unreachable.
        let reply = ipv4(R1, H1, PROTO_UDP, &[], &udp(53, 1111, b"answer"));
        let mut err = icmp_error_frame(H1, R1, 3, &reply);
        assert_eq!(
            run(&mut n, &mut log, T0 + SEC, &mut err),
            Verdict::IcmpErrorOut
        );
        let p = packet::parse(LINKTYPE_ETHERNET, &err).unwrap();
        assert_eq!((p.ip.src, p.ip.dst), (ext, R1));
        let ip = &err[p.l3_offset..p.l3_end()];
        assert_eq!(internet_checksum(&ip[..20]), 0, "outer IPv4 header");
        assert_eq!(internet_checksum(&ip[20..]), 0, "ICMP message");
        let q = &ip[28..];
        assert_eq!(internet_checksum(&q[..20]), 0, "quoted IPv4 header");
        assert_eq!(u32::from_be_bytes(q[16..20].try_into().unwrap()), ext);
        assert_eq!(u16::from_be_bytes([q[22], q[23]]), ext_port);
        assert_eq!(transport_checksum(R1, ext, 17, &q[20..]), 0, "quoted UDP");
        // Errors do not count as session packets.
        n.finish(T0 + 2 * SEC, &mut log.f());
        assert_eq!(log.events(5)[0].initiator_packets, 1);
        assert_eq!(log.events(5)[0].responder_packets, 0);
    }

    #[test]
    fn outbound_icmp_error_about_tcp_and_echo() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let mut f = tcp_frame(H1, 2222, R1, 80, TCP_SYN);
        run(&mut n, &mut log, T0, &mut f);
        let (ext, ext_port) = src_of(&f);
        // A whole TCP segment quoted (so its checksum is checkable).
        let seg = ipv4(
            R1,
            H1,
            PROTO_TCP,
            &[],
            &tcp(80, 2222, TCP_SYN | TCP_ACK, b""),
        );
        let mut err = icmp_error_frame(H1, R1, 11, &seg);
        assert_eq!(run(&mut n, &mut log, T0, &mut err), Verdict::IcmpErrorOut);
        let p = packet::parse(LINKTYPE_ETHERNET, &err).unwrap();
        let ip = &err[p.l3_offset..p.l3_end()];
        assert_eq!(internet_checksum(&ip[20..]), 0, "ICMP message");
        let q = &ip[28..];
        assert_eq!(u16::from_be_bytes([q[22], q[23]]), ext_port);
        assert_eq!(transport_checksum(R1, ext, 6, &q[20..]), 0, "quoted TCP");
        // Only 8 bytes of TCP quoted (RFC 792 minimum): ports still done.
        let mut err = icmp_error_frame(H1, R1, 3, &seg[..28]);
        assert_eq!(run(&mut n, &mut log, T0, &mut err), Verdict::IcmpErrorOut);
        // Echo: H1 pings, R1's reply comes back, H1 reports it.
        let mut ping = eth_ipv4(&ipv4(H1, R1, PROTO_ICMP, &[], &icmp_echo(false, 77, 1)));
        run(&mut n, &mut log, T0, &mut ping);
        let (_, ext_id) = src_of(&ping);
        let pong = ipv4(R1, H1, PROTO_ICMP, &[], &icmp_echo(true, 77, 1));
        let mut err = icmp_error_frame(H1, R1, 3, &pong);
        assert_eq!(run(&mut n, &mut log, T0, &mut err), Verdict::IcmpErrorOut);
        let p = packet::parse(LINKTYPE_ETHERNET, &err).unwrap();
        let ip = &err[p.l3_offset..p.l3_end()];
        assert_eq!(internet_checksum(&ip[20..]), 0);
        let q = &ip[28..];
        assert_eq!(u16::from_be_bytes([q[24], q[25]]), ext_id);
        assert_eq!(internet_checksum(&q[20..]), 0, "quoted echo checksum");
    }

    #[test]
    fn inbound_and_bad_icmp_errors_are_counted() {
        let mut n = nat();
        let mut log = Log(vec![]);
        let mut f = udp_frame(H1, 1111, R1, 53);
        let orig = f.clone();
        run(&mut n, &mut log, T0, &mut f);
        // A router's time exceeded about H1's packet (inside form): matched.
        let quoted = &orig[14..14 + 28];
        let mut err = icmp_error_frame(R2, H1, 11, quoted);
        let before = err.clone();
        assert_eq!(run(&mut n, &mut log, T0, &mut err), Verdict::IcmpErrorIn);
        assert_eq!(err, before, "inbound packets are left as they are");
        // No session for the quoted flow.
        let other = ipv4(H2, R1, PROTO_UDP, &[], &udp(9, 53, b""));
        let mut err = icmp_error_frame(R2, H2, 3, &other);
        assert_eq!(
            run(&mut n, &mut log, T0, &mut err),
            Verdict::IcmpErrorNoSession
        );
        // Quoting GRE, IP-in-IP, a truncated packet, an error.
        for quoted in [
            ipv4(H1, R1, 47, &[], &[0; 8]),
            ipv4(H1, R1, 4, &[], &[0; 8]),
            quoted[..24].to_vec(),
        ] {
            let mut err = icmp_error_frame(R2, H1, 3, &quoted);
            assert_eq!(
                run(&mut n, &mut log, T0, &mut err),
                Verdict::IcmpErrorBadQuote
            );
        }
        let inner_err = ipv4(H1, R1, PROTO_ICMP, &[], &[11, 0, 0, 0, 0, 0, 0, 0]);
        let mut err = icmp_error_frame(R2, H1, 3, &inner_err);
        assert_eq!(
            run(&mut n, &mut log, T0, &mut err),
            Verdict::IcmpErrorQuotesError
        );
        assert_eq!(n.stats().sessions_created, 1);
    }
}
