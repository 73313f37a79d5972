//! Link-layer, IPv4 and transport header parsing.
//!
//! [`parse`] takes a captured frame and its pcap link type and returns the
//! offsets and header fields the NAT needs, or a [`ParseError`] naming the
//! exact reason the frame cannot be handled. The parser never panics and
//! never indexes out of bounds, whatever the input.
//!
//! Supported link types (see <https://www.tcpdump.org/linktypes.html>):
//! Ethernet (1) with up to [`MAX_VLAN_TAGS`] 802.1Q / 802.1ad tags, Linux
//! "cooked" SLL (113) and SLL2 (276), raw IP (101, and 12 / 14 which some
//! systems use for raw IP), raw IPv4 (228), raw IPv6 (229, always "not
//! IPv4"), BSD NULL/loopback (0) and OpenBSD loopback (108).
//!
//! IPv4 validation (RFC 791): version 4, IHL ≥ 5, IHL·4 ≤ captured bytes,
//! IHL·4 ≤ total length ≤ captured bytes. Bytes beyond the total length
//! (Ethernet padding) are ignored. Transport headers start after the IPv4
//! options, at IHL·4.

/// LINKTYPE_NULL: BSD loopback, a 4-byte address family in the capturing
/// host's byte order.
pub const LINKTYPE_NULL: u32 = 0;
/// LINKTYPE_ETHERNET: IEEE 802.3 Ethernet.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// DLT_RAW as numbered on some BSDs; raw IP, no link header.
pub const LINKTYPE_RAW_BSD12: u32 = 12;
/// DLT_RAW as numbered on OpenBSD; raw IP, no link header.
pub const LINKTYPE_RAW_BSD14: u32 = 14;
/// LINKTYPE_RAW: raw IPv4 or IPv6, no link header.
pub const LINKTYPE_RAW: u32 = 101;
/// LINKTYPE_LOOP: OpenBSD loopback, a 4-byte address family in network order.
pub const LINKTYPE_LOOP: u32 = 108;
/// LINKTYPE_LINUX_SLL: Linux "cooked" capture v1, 16-byte header.
pub const LINKTYPE_LINUX_SLL: u32 = 113;
/// LINKTYPE_IPV4: raw IPv4, no link header.
pub const LINKTYPE_IPV4: u32 = 228;
/// LINKTYPE_IPV6: raw IPv6, no link header.
pub const LINKTYPE_IPV6: u32 = 229;
/// LINKTYPE_LINUX_SLL2: Linux "cooked" capture v2, 20-byte header.
pub const LINKTYPE_LINUX_SLL2: u32 = 276;

/// Maximum number of stacked VLAN tags (802.1Q / 802.1ad / legacy QinQ
/// 0x9100) accepted in an Ethernet frame; one more is
/// [`MalformedReason::TooManyVlanTags`].
pub const MAX_VLAN_TAGS: u8 = 4;

/// IP protocol number of ICMP.
pub const PROTO_ICMP: u8 = 1;
/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const PROTO_UDP: u8 = 17;

/// TCP flag bit FIN (RFC 793).
pub const TCP_FIN: u8 = 0x01;
/// TCP flag bit SYN.
pub const TCP_SYN: u8 = 0x02;
/// TCP flag bit RST.
pub const TCP_RST: u8 = 0x04;
/// TCP flag bit PSH.
pub const TCP_PSH: u8 = 0x08;
/// TCP flag bit ACK.
pub const TCP_ACK: u8 = 0x10;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_QINQ: u16 = 0x88A8;
const ETHERTYPE_QINQ_OLD: u16 = 0x9100;

/// Why a frame could not be parsed into an IPv4 packet with a usable
/// transport header. Every variant is a distinct counter in the NAT
/// statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParseError {
    /// The pcap link type is not one this parser understands.
    UnsupportedLinkType,
    /// A valid frame that does not carry IPv4 (IPv6, ARP, LLC, LLDP, ...).
    NotIpv4,
    /// The frame claims to carry IPv4 (or a header inside it) but the bytes
    /// do not form a valid packet.
    Malformed(MalformedReason),
}

impl ParseError {
    /// Short snake_case name for summaries, e.g. `"not_ipv4"` or the
    /// malformed reason's name.
    pub fn name(self) -> &'static str {
        match self {
            ParseError::UnsupportedLinkType => "unsupported_link_type",
            ParseError::NotIpv4 => "not_ipv4",
            ParseError::Malformed(r) => r.name(),
        }
    }
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::error::Error for ParseError {}

impl From<MalformedReason> for ParseError {
    fn from(r: MalformedReason) -> Self {
        ParseError::Malformed(r)
    }
}

/// The precise reason a frame is malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MalformedReason {
    /// Shorter than its link-layer header (Ethernet, VLAN tag, SLL, NULL).
    TruncatedLinkHeader,
    /// More than [`MAX_VLAN_TAGS`] VLAN tags.
    TooManyVlanTags,
    /// Fewer than 20 bytes where an IPv4 header should start.
    TruncatedIpv4Header,
    /// The link layer says IPv4 but the version nibble is not 4 (for raw IP:
    /// neither 4 nor 6).
    BadIpVersion,
    /// IHL below 5 (a header shorter than 20 bytes).
    Ipv4IhlTooSmall,
    /// IHL·4 is larger than the captured bytes.
    Ipv4HeaderPastEnd,
    /// Total length is smaller than IHL·4.
    Ipv4TotalLengthTooSmall,
    /// Total length is larger than the captured bytes (truncated capture or
    /// a lie).
    Ipv4TotalLengthPastEnd,
    /// Fragment offset·8 plus payload exceeds 65535 bytes.
    Ipv4FragmentTooLong,
    /// Fewer than 20 bytes of TCP header.
    TruncatedTcpHeader,
    /// TCP data offset below 5.
    TcpDataOffsetTooSmall,
    /// TCP data offset·4 beyond the IP payload.
    TcpDataOffsetPastEnd,
    /// Fewer than 8 bytes of UDP header.
    TruncatedUdpHeader,
    /// UDP length field below 8 (includes 0).
    UdpLengthTooSmall,
    /// UDP length field larger than the IP payload.
    UdpLengthPastEnd,
    /// Fewer than 8 bytes of ICMP header.
    TruncatedIcmpHeader,
}

impl MalformedReason {
    /// True for the reasons a capture's snap length explains (a header or
    /// a length that runs past the captured bytes), as opposed to header
    /// fields that are wrong in themselves.
    pub fn is_cut(self) -> bool {
        use MalformedReason as M;
        matches!(
            self,
            M::TruncatedLinkHeader
                | M::TruncatedIpv4Header
                | M::Ipv4HeaderPastEnd
                | M::Ipv4TotalLengthPastEnd
                | M::TruncatedTcpHeader
                | M::TcpDataOffsetPastEnd
                | M::TruncatedUdpHeader
                | M::UdpLengthPastEnd
                | M::TruncatedIcmpHeader
        )
    }

    /// Number of variants.
    pub const COUNT: usize = 16;
    /// Every variant, in declaration order (index = `self as usize`).
    pub const ALL: [MalformedReason; Self::COUNT] = [
        MalformedReason::TruncatedLinkHeader,
        MalformedReason::TooManyVlanTags,
        MalformedReason::TruncatedIpv4Header,
        MalformedReason::BadIpVersion,
        MalformedReason::Ipv4IhlTooSmall,
        MalformedReason::Ipv4HeaderPastEnd,
        MalformedReason::Ipv4TotalLengthTooSmall,
        MalformedReason::Ipv4TotalLengthPastEnd,
        MalformedReason::Ipv4FragmentTooLong,
        MalformedReason::TruncatedTcpHeader,
        MalformedReason::TcpDataOffsetTooSmall,
        MalformedReason::TcpDataOffsetPastEnd,
        MalformedReason::TruncatedUdpHeader,
        MalformedReason::UdpLengthTooSmall,
        MalformedReason::UdpLengthPastEnd,
        MalformedReason::TruncatedIcmpHeader,
    ];

    /// Short snake_case name, prefixed `malformed_`.
    pub fn name(self) -> &'static str {
        match self {
            MalformedReason::TruncatedLinkHeader => "malformed_truncated_link_header",
            MalformedReason::TooManyVlanTags => "malformed_too_many_vlan_tags",
            MalformedReason::TruncatedIpv4Header => "malformed_truncated_ipv4_header",
            MalformedReason::BadIpVersion => "malformed_bad_ip_version",
            MalformedReason::Ipv4IhlTooSmall => "malformed_ipv4_ihl_too_small",
            MalformedReason::Ipv4HeaderPastEnd => "malformed_ipv4_header_past_end",
            MalformedReason::Ipv4TotalLengthTooSmall => "malformed_ipv4_total_length_too_small",
            MalformedReason::Ipv4TotalLengthPastEnd => "malformed_ipv4_total_length_past_end",
            MalformedReason::Ipv4FragmentTooLong => "malformed_ipv4_fragment_too_long",
            MalformedReason::TruncatedTcpHeader => "malformed_truncated_tcp_header",
            MalformedReason::TcpDataOffsetTooSmall => "malformed_tcp_data_offset_too_small",
            MalformedReason::TcpDataOffsetPastEnd => "malformed_tcp_data_offset_past_end",
            MalformedReason::TruncatedUdpHeader => "malformed_truncated_udp_header",
            MalformedReason::UdpLengthTooSmall => "malformed_udp_length_too_small",
            MalformedReason::UdpLengthPastEnd => "malformed_udp_length_past_end",
            MalformedReason::TruncatedIcmpHeader => "malformed_truncated_icmp_header",
        }
    }
}

/// Fields of a validated IPv4 header. Addresses are host-order `u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Header {
    /// Source address.
    pub src: u32,
    /// Destination address.
    pub dst: u32,
    /// Protocol number (1 ICMP, 6 TCP, 17 UDP, ...).
    pub protocol: u8,
    /// Time to live.
    pub ttl: u8,
    /// Header length in bytes (IHL·4, 20..=60), options included.
    pub header_len: u16,
    /// Total length in bytes (header and payload) from the header.
    pub total_len: u16,
    /// Identification field.
    pub id: u16,
    /// DF flag.
    pub dont_fragment: bool,
    /// MF flag.
    pub more_fragments: bool,
    /// Fragment offset in 8-byte units.
    pub fragment_offset: u16,
}

impl Ipv4Header {
    /// True for any fragment (MF set or a non-zero offset).
    pub fn is_fragment(&self) -> bool {
        self.more_fragments || self.fragment_offset != 0
    }

    /// True for a fragment other than the first one (offset > 0): it carries
    /// no transport header.
    pub fn is_later_fragment(&self) -> bool {
        self.fragment_offset != 0
    }

    /// True for the first fragment of a fragmented datagram (offset 0, MF).
    pub fn is_first_fragment(&self) -> bool {
        self.fragment_offset == 0 && self.more_fragments
    }
}

/// TCP header fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpHeader {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Flag byte (see [`TCP_SYN`] and friends).
    pub flags: u8,
    /// Header length in bytes (data offset·4), options included.
    pub header_len: u16,
}

/// UDP header fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpHeader {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Length field (header and payload) in bytes.
    pub length: u16,
    /// Checksum field; 0 means "no checksum" (RFC 768).
    pub checksum: u16,
}

/// ICMP echo request (type 8) or echo reply (type 0), RFC 792.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IcmpEcho {
    /// True for an echo reply, false for an echo request.
    pub reply: bool,
    /// Identifier; plays the role of the port in NAPT (RFC 5508).
    pub identifier: u16,
    /// Sequence number.
    pub sequence: u16,
}

/// The transport part of a parsed packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// TCP (protocol 6).
    Tcp(TcpHeader),
    /// UDP (protocol 17).
    Udp(UdpHeader),
    /// ICMP echo request or reply.
    IcmpEcho(IcmpEcho),
    /// Any other ICMP message (type and code).
    IcmpOther {
        /// ICMP type.
        icmp_type: u8,
        /// ICMP code.
        code: u8,
    },
    /// A later fragment (offset > 0): no transport header to parse.
    Fragment,
    /// Another IP protocol (GRE, ESP, ...); see [`Ipv4Header::protocol`].
    Other,
}

/// A successfully parsed IPv4 packet: header fields and byte offsets into
/// the frame it was parsed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParsedPacket {
    /// Offset of the IPv4 header in the frame (the link-header length).
    pub l3_offset: usize,
    /// Number of VLAN tags skipped (Ethernet only).
    pub vlan_tags: u8,
    /// The IPv4 header.
    pub ip: Ipv4Header,
    /// The transport header.
    pub transport: Transport,
}

impl ParsedPacket {
    /// Offset of the transport header in the frame (after IPv4 options).
    pub fn l4_offset(&self) -> usize {
        self.l3_offset + usize::from(self.ip.header_len)
    }

    /// Offset one past the last IPv4 byte (total length); frame bytes
    /// beyond it are link padding.
    pub fn l3_end(&self) -> usize {
        self.l3_offset + usize::from(self.ip.total_len)
    }
}

#[inline]
fn be16(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

#[inline]
fn be32(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

const TRUNC_L2: ParseError = ParseError::Malformed(MalformedReason::TruncatedLinkHeader);

/// Parses `frame` of pcap link type `linktype` down to the transport header.
///
/// # Errors
///
/// [`ParseError::UnsupportedLinkType`] for link types not listed in the
/// module docs, [`ParseError::NotIpv4`] for non-IPv4 payloads, and
/// [`ParseError::Malformed`] with the reason for invalid headers.
pub fn parse(linktype: u32, frame: &[u8]) -> Result<ParsedPacket, ParseError> {
    parse_with(linktype, frame, false)
}

/// [`parse`] for a frame cut by a capture's snap length: the IPv4 total
/// length, the UDP length and the TCP data offset may point past the
/// captured bytes. The IPv4 header and the transport's fixed header (TCP
/// 20 bytes, UDP 8, ICMP 8) must still be there. [`ParsedPacket::l3_end`]
/// is then past the end of `frame`.
///
/// # Errors
///
/// As [`parse`], without the errors a cut explains
/// ([`MalformedReason::Ipv4TotalLengthPastEnd`],
/// [`MalformedReason::UdpLengthPastEnd`],
/// [`MalformedReason::TcpDataOffsetPastEnd`]).
pub fn parse_snapped(linktype: u32, frame: &[u8]) -> Result<ParsedPacket, ParseError> {
    parse_with(linktype, frame, true)
}

fn parse_with(linktype: u32, frame: &[u8], snapped: bool) -> Result<ParsedPacket, ParseError> {
    let (l3_offset, vlan_tags) = match linktype {
        LINKTYPE_ETHERNET => ethernet(frame)?,
        LINKTYPE_RAW | LINKTYPE_RAW_BSD12 | LINKTYPE_RAW_BSD14 => {
            let first = *frame
                .first()
                .ok_or(ParseError::Malformed(MalformedReason::TruncatedIpv4Header))?;
            match first >> 4 {
                4 => (0, 0),
                6 => return Err(ParseError::NotIpv4),
                _ => return Err(MalformedReason::BadIpVersion.into()),
            }
        }
        LINKTYPE_IPV4 => (0, 0),
        LINKTYPE_IPV6 => return Err(ParseError::NotIpv4),
        LINKTYPE_LINUX_SLL => {
            let proto = be16(frame, 14).ok_or(TRUNC_L2)?;
            ethertype_chain(frame, proto, 16, 0)?
        }
        LINKTYPE_LINUX_SLL2 => {
            if frame.len() < 20 {
                return Err(TRUNC_L2);
            }
            let proto = be16(frame, 0).ok_or(TRUNC_L2)?;
            ethertype_chain(frame, proto, 20, 0)?
        }
        LINKTYPE_NULL => {
            let af = frame.get(0..4).ok_or(TRUNC_L2)?;
            let le = u32::from_le_bytes([af[0], af[1], af[2], af[3]]);
            let be = u32::from_be_bytes([af[0], af[1], af[2], af[3]]);
            if le == 2 || be == 2 {
                (4, 0)
            } else {
                return Err(ParseError::NotIpv4);
            }
        }
        LINKTYPE_LOOP => {
            if be32(frame, 0).ok_or(TRUNC_L2)? == 2 {
                (4, 0)
            } else {
                return Err(ParseError::NotIpv4);
            }
        }
        _ => return Err(ParseError::UnsupportedLinkType),
    };
    let rest = frame.get(l3_offset..).unwrap_or(&[]);
    let (ip, transport) = parse_ipv4(rest, snapped)?;
    Ok(ParsedPacket {
        l3_offset,
        vlan_tags,
        ip,
        transport,
    })
}

fn ethernet(frame: &[u8]) -> Result<(usize, u8), ParseError> {
    let ethertype = be16(frame, 12).ok_or(TRUNC_L2)?;
    ethertype_chain(frame, ethertype, 14, 0)
}

/// Follows VLAN tags starting with `ethertype` whose payload starts at
/// `offset`; returns the IPv4 offset and the number of tags.
fn ethertype_chain(
    frame: &[u8],
    mut ethertype: u16,
    mut offset: usize,
    mut tags: u8,
) -> Result<(usize, u8), ParseError> {
    loop {
        match ethertype {
            ETHERTYPE_IPV4 => return Ok((offset, tags)),
            ETHERTYPE_VLAN | ETHERTYPE_QINQ | ETHERTYPE_QINQ_OLD => {
                if tags == MAX_VLAN_TAGS {
                    return Err(MalformedReason::TooManyVlanTags.into());
                }
                // 2 bytes TCI, 2 bytes inner ethertype.
                ethertype = be16(frame, offset + 2).ok_or(TRUNC_L2)?;
                offset += 4;
                tags += 1;
            }
            _ => return Err(ParseError::NotIpv4),
        }
    }
}

fn parse_ipv4(b: &[u8], snapped: bool) -> Result<(Ipv4Header, Transport), ParseError> {
    use MalformedReason as M;
    let first = *b.first().ok_or(M::TruncatedIpv4Header)?;
    if first >> 4 != 4 {
        return Err(M::BadIpVersion.into());
    }
    if b.len() < 20 {
        return Err(M::TruncatedIpv4Header.into());
    }
    let ihl = usize::from(first & 0x0F);
    if ihl < 5 {
        return Err(M::Ipv4IhlTooSmall.into());
    }
    let header_len = ihl * 4;
    if header_len > b.len() {
        return Err(M::Ipv4HeaderPastEnd.into());
    }
    let total_len = be16(b, 2).ok_or(M::TruncatedIpv4Header)?;
    let total = usize::from(total_len);
    if total < header_len {
        return Err(M::Ipv4TotalLengthTooSmall.into());
    }
    if total > b.len() && !snapped {
        return Err(M::Ipv4TotalLengthPastEnd.into());
    }
    let id = be16(b, 4).ok_or(M::TruncatedIpv4Header)?;
    let frag = be16(b, 6).ok_or(M::TruncatedIpv4Header)?;
    let ip = Ipv4Header {
        src: be32(b, 12).ok_or(M::TruncatedIpv4Header)?,
        dst: be32(b, 16).ok_or(M::TruncatedIpv4Header)?,
        protocol: *b.get(9).ok_or(M::TruncatedIpv4Header)?,
        ttl: *b.get(8).ok_or(M::TruncatedIpv4Header)?,
        header_len: header_len as u16,
        total_len,
        id,
        dont_fragment: frag & 0x4000 != 0,
        more_fragments: frag & 0x2000 != 0,
        fragment_offset: frag & 0x1FFF,
    };
    let payload = b
        .get(header_len..total.min(b.len()))
        .ok_or(M::Ipv4TotalLengthPastEnd)?;
    if usize::from(ip.fragment_offset) * 8 + (total - header_len) > 65535 {
        return Err(M::Ipv4FragmentTooLong.into());
    }
    if ip.is_later_fragment() {
        return Ok((ip, Transport::Fragment));
    }
    let transport = match ip.protocol {
        PROTO_TCP => {
            if payload.len() < 20 {
                return Err(M::TruncatedTcpHeader.into());
            }
            let data_offset = payload.get(12).map_or(0, |v| v >> 4);
            if data_offset < 5 {
                return Err(M::TcpDataOffsetTooSmall.into());
            }
            let hl = u16::from(data_offset) * 4;
            if usize::from(hl) > payload.len() && !snapped {
                return Err(M::TcpDataOffsetPastEnd.into());
            }
            Transport::Tcp(TcpHeader {
                src_port: be16(payload, 0).ok_or(M::TruncatedTcpHeader)?,
                dst_port: be16(payload, 2).ok_or(M::TruncatedTcpHeader)?,
                flags: *payload.get(13).ok_or(M::TruncatedTcpHeader)?,
                header_len: hl,
            })
        }
        PROTO_UDP => {
            if payload.len() < 8 {
                return Err(M::TruncatedUdpHeader.into());
            }
            let length = be16(payload, 4).ok_or(M::TruncatedUdpHeader)?;
            if length < 8 {
                return Err(M::UdpLengthTooSmall.into());
            }
            // In a first fragment the UDP length covers the whole datagram,
            // which is longer than this fragment's payload.
            if usize::from(length) > payload.len() && !ip.more_fragments && !snapped {
                return Err(M::UdpLengthPastEnd.into());
            }
            Transport::Udp(UdpHeader {
                src_port: be16(payload, 0).ok_or(M::TruncatedUdpHeader)?,
                dst_port: be16(payload, 2).ok_or(M::TruncatedUdpHeader)?,
                length,
                checksum: be16(payload, 6).ok_or(M::TruncatedUdpHeader)?,
            })
        }
        PROTO_ICMP => {
            if payload.len() < 8 {
                return Err(M::TruncatedIcmpHeader.into());
            }
            let icmp_type = *payload.first().ok_or(M::TruncatedIcmpHeader)?;
            let code = *payload.get(1).ok_or(M::TruncatedIcmpHeader)?;
            match icmp_type {
                0 | 8 => Transport::IcmpEcho(IcmpEcho {
                    reply: icmp_type == 0,
                    identifier: be16(payload, 4).ok_or(M::TruncatedIcmpHeader)?,
                    sequence: be16(payload, 6).ok_or(M::TruncatedIcmpHeader)?,
                }),
                _ => Transport::IcmpOther { icmp_type, code },
            }
        }
        _ => Transport::Other,
    };
    Ok((ip, transport))
}

/// Test helpers that build frames; shared with the NAT tests.
#[cfg(test)]
pub(crate) mod build {
    use crate::checksum::{internet_checksum, transport_checksum};

    /// Builds an IPv4 packet (no link header) with correct checksums.
    /// `l4` is the transport header and payload with its checksum field
    /// zero; the checksum is filled in for TCP, UDP (unless `udp_zero_csum`)
    /// and ICMP.
    pub fn ipv4(src: u32, dst: u32, proto: u8, options: &[u8], l4: &[u8]) -> Vec<u8> {
        ipv4_frag(src, dst, proto, options, l4, 0x1234, 0x4000)
    }

    /// Like [`ipv4`] with an explicit id and flags/fragment-offset word.
    pub fn ipv4_frag(
        src: u32,
        dst: u32,
        proto: u8,
        options: &[u8],
        l4: &[u8],
        id: u16,
        frag: u16,
    ) -> Vec<u8> {
        assert_eq!(options.len() % 4, 0);
        let hl = 20 + options.len();
        let total = hl + l4.len();
        let mut p = vec![0u8; total];
        p[0] = 0x40 | (hl / 4) as u8;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[4..6].copy_from_slice(&id.to_be_bytes());
        p[6..8].copy_from_slice(&frag.to_be_bytes());
        p[8] = 64;
        p[9] = proto;
        p[12..16].copy_from_slice(&src.to_be_bytes());
        p[16..20].copy_from_slice(&dst.to_be_bytes());
        p[20..hl].copy_from_slice(options);
        p[hl..].copy_from_slice(l4);
        let c = internet_checksum(&p[..hl]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        if frag & 0x1FFF == 0 && frag & 0x2000 == 0 {
            let seg = &mut p[hl..];
            match proto {
                6 if seg.len() >= 20 => {
                    let c = transport_checksum(src, dst, 6, seg);
                    seg[16..18].copy_from_slice(&c.to_be_bytes());
                }
                17 if seg.len() >= 8 => {
                    let mut c = transport_checksum(src, dst, 17, seg);
                    if c == 0 {
                        c = 0xFFFF;
                    }
                    seg[6..8].copy_from_slice(&c.to_be_bytes());
                }
                1 if seg.len() >= 8 => {
                    let c = internet_checksum(seg);
                    seg[2..4].copy_from_slice(&c.to_be_bytes());
                }
                _ => {}
            }
        }
        p
    }

    /// A TCP header (20 bytes, no options) followed by `payload`.
    pub fn tcp(sport: u16, dport: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
        let mut t = vec![0u8; 20];
        t[0..2].copy_from_slice(&sport.to_be_bytes());
        t[2..4].copy_from_slice(&dport.to_be_bytes());
        t[4..8].copy_from_slice(&1000u32.to_be_bytes());
        t[12] = 5 << 4;
        t[13] = flags;
        t[14..16].copy_from_slice(&65535u16.to_be_bytes());
        t.extend_from_slice(payload);
        t
    }

    /// A UDP header followed by `payload` (length field set, checksum 0).
    pub fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let mut u = vec![0u8; 8];
        u[0..2].copy_from_slice(&sport.to_be_bytes());
        u[2..4].copy_from_slice(&dport.to_be_bytes());
        u[4..6].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        u.extend_from_slice(payload);
        u
    }

    /// An ICMP echo request (`reply == false`) or reply.
    pub fn icmp_echo(reply: bool, id: u16, seq: u16) -> Vec<u8> {
        let mut i = vec![0u8; 16];
        i[0] = if reply { 0 } else { 8 };
        i[4..6].copy_from_slice(&id.to_be_bytes());
        i[6..8].copy_from_slice(&seq.to_be_bytes());
        i
    }

    /// Ethernet header with `vlans` tags (TPIDs given) before `ethertype`.
    pub fn ether(tpids: &[u16], ethertype: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
        for (i, t) in tpids.iter().enumerate() {
            f.extend_from_slice(&t.to_be_bytes());
            f.extend_from_slice(&(100 + i as u16).to_be_bytes());
        }
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    /// An Ethernet + IPv4 frame padded to the 60-byte Ethernet minimum.
    pub fn eth_ipv4(ip: &[u8]) -> Vec<u8> {
        let mut f = ether(&[], 0x0800, ip);
        if f.len() < 60 {
            f.resize(60, 0);
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::build::*;
    use super::*;
    use MalformedReason as M;

    const A: u32 = 0x0A00_0006; // 10.0.0.6
    const B: u32 = 0xCB00_7107; // 203.0.113.7

    fn udp_pkt() -> Vec<u8> {
        ipv4(A, B, PROTO_UDP, &[], &udp(5353, 53, b"hello"))
    }

    #[test]
    fn plain_ethernet_udp_with_padding_trimmed() {
        let f = eth_ipv4(&udp_pkt());
        assert_eq!(f.len(), 60);
        let p = parse(LINKTYPE_ETHERNET, &f).unwrap();
        assert_eq!(p.l3_offset, 14);
        assert_eq!(p.ip.src, A);
        assert_eq!(p.ip.dst, B);
        assert_eq!(p.ip.total_len, 33);
        assert_eq!(p.l3_end(), 47);
        assert_eq!(
            p.transport,
            Transport::Udp(UdpHeader {
                src_port: 5353,
                dst_port: 53,
                length: 13,
                checksum: u16::from_be_bytes([f[14 + 26], f[14 + 27]]),
            })
        );
    }

    #[test]
    fn vlan_and_qinq() {
        let ip = ipv4(A, B, PROTO_TCP, &[], &tcp(40000, 443, TCP_SYN, &[]));
        let f = ether(&[0x8100], 0x0800, &ip);
        let p = parse(LINKTYPE_ETHERNET, &f).unwrap();
        assert_eq!((p.l3_offset, p.vlan_tags), (18, 1));
        let f = ether(&[0x88A8, 0x8100], 0x0800, &ip);
        let p = parse(LINKTYPE_ETHERNET, &f).unwrap();
        assert_eq!((p.l3_offset, p.vlan_tags), (22, 2));
        match p.transport {
            Transport::Tcp(t) => {
                assert_eq!(
                    (t.src_port, t.dst_port, t.flags, t.header_len),
                    (40000, 443, TCP_SYN, 20)
                )
            }
            other => panic!("{other:?}"),
        }
        let f = ether(&[0x88A8, 0x9100, 0x8100, 0x8100], 0x0800, &ip);
        assert_eq!(parse(LINKTYPE_ETHERNET, &f).unwrap().l3_offset, 30);
        let f = ether(&[0x88A8, 0x9100, 0x8100, 0x8100, 0x8100], 0x0800, &ip);
        assert_eq!(parse(LINKTYPE_ETHERNET, &f), Err(M::TooManyVlanTags.into()));
        // A tag cut in the middle.
        let f = ether(&[], 0x8100, &[0x00]);
        assert_eq!(
            parse(LINKTYPE_ETHERNET, &f),
            Err(M::TruncatedLinkHeader.into())
        );
    }

    #[test]
    fn non_ipv4_ethertypes() {
        assert_eq!(
            parse(LINKTYPE_ETHERNET, &ether(&[], 0x86DD, &[0x60; 40])),
            Err(ParseError::NotIpv4)
        );
        assert_eq!(
            parse(LINKTYPE_ETHERNET, &ether(&[], 0x0806, &[0; 28])),
            Err(ParseError::NotIpv4)
        );
        assert_eq!(
            parse(LINKTYPE_ETHERNET, &ether(&[0x8100], 0x86DD, &[0x60; 40])),
            Err(ParseError::NotIpv4)
        );
        assert_eq!(
            parse(LINKTYPE_ETHERNET, &[0u8; 10]),
            Err(M::TruncatedLinkHeader.into())
        );
        assert_eq!(
            parse(LINKTYPE_ETHERNET, &[]),
            Err(M::TruncatedLinkHeader.into())
        );
        assert_eq!(parse(147, &udp_pkt()), Err(ParseError::UnsupportedLinkType));
    }

    #[test]
    fn linux_sll_and_sll2() {
        let ip = udp_pkt();
        let mut sll = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x08, 0x00];
        sll.extend_from_slice(&ip);
        let p = parse(LINKTYPE_LINUX_SLL, &sll).unwrap();
        assert_eq!(p.l3_offset, 16);
        assert_eq!(p.ip.dst, B);
        sll[14..16].copy_from_slice(&0x86DDu16.to_be_bytes());
        assert_eq!(parse(LINKTYPE_LINUX_SLL, &sll), Err(ParseError::NotIpv4));
        assert_eq!(
            parse(LINKTYPE_LINUX_SLL, &sll[..15]),
            Err(M::TruncatedLinkHeader.into())
        );

        let mut sll2 = vec![
            0x08, 0x00, 0, 0, 0, 0, 0, 3, 0, 1, 4, 6, 2, 0, 0, 0, 0, 1, 0, 0,
        ];
        sll2.extend_from_slice(&ip);
        let p = parse(LINKTYPE_LINUX_SLL2, &sll2).unwrap();
        assert_eq!(p.l3_offset, 20);
        assert_eq!(
            parse(LINKTYPE_LINUX_SLL2, &sll2[..19]),
            Err(M::TruncatedLinkHeader.into())
        );
    }

    #[test]
    fn raw_ip_and_null() {
        let ip = udp_pkt();
        for lt in [
            LINKTYPE_RAW,
            LINKTYPE_RAW_BSD12,
            LINKTYPE_RAW_BSD14,
            LINKTYPE_IPV4,
        ] {
            assert_eq!(parse(lt, &ip).unwrap().l3_offset, 0, "linktype {lt}");
        }
        let mut v6 = vec![0x60u8; 40];
        v6[0] = 0x60;
        assert_eq!(parse(LINKTYPE_RAW, &v6), Err(ParseError::NotIpv4));
        assert_eq!(parse(LINKTYPE_IPV6, &v6), Err(ParseError::NotIpv4));
        assert_eq!(
            parse(LINKTYPE_RAW, &[0x55; 30]),
            Err(M::BadIpVersion.into())
        );
        assert_eq!(parse(LINKTYPE_RAW, &[]), Err(M::TruncatedIpv4Header.into()));

        let mut null = 2u32.to_le_bytes().to_vec();
        null.extend_from_slice(&ip);
        assert_eq!(parse(LINKTYPE_NULL, &null).unwrap().l3_offset, 4);
        null[0..4].copy_from_slice(&2u32.to_be_bytes());
        assert_eq!(parse(LINKTYPE_NULL, &null).unwrap().l3_offset, 4);
        assert_eq!(parse(LINKTYPE_LOOP, &null).unwrap().l3_offset, 4);
        null[0..4].copy_from_slice(&30u32.to_le_bytes());
        assert_eq!(parse(LINKTYPE_NULL, &null), Err(ParseError::NotIpv4));
        assert_eq!(
            parse(LINKTYPE_NULL, &null[..3]),
            Err(M::TruncatedLinkHeader.into())
        );
    }

    #[test]
    fn ipv4_options_shift_the_ports() {
        // 8 bytes of options: NOP NOP, then a 4-byte-aligned dummy and EOL.
        let opts = [0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x00];
        let ip = ipv4(A, B, PROTO_TCP, &opts, &tcp(1111, 2222, TCP_ACK, b"xy"));
        let f = eth_ipv4(&ip);
        let p = parse(LINKTYPE_ETHERNET, &f).unwrap();
        assert_eq!(p.ip.header_len, 28);
        assert_eq!(p.l4_offset(), 14 + 28);
        match p.transport {
            Transport::Tcp(t) => {
                assert_eq!((t.src_port, t.dst_port, t.flags), (1111, 2222, TCP_ACK))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn ipv4_header_errors() {
        let good = udp_pkt();
        let mut ip = good.clone();
        ip[0] = 0x44; // IHL 4
        assert_eq!(parse(LINKTYPE_RAW, &ip), Err(M::Ipv4IhlTooSmall.into()));
        let mut ip = good.clone();
        ip[0] = 0x4F; // IHL 15 = 60 bytes > 33
        assert_eq!(parse(LINKTYPE_RAW, &ip), Err(M::Ipv4HeaderPastEnd.into()));
        let mut ip = good.clone();
        ip[2..4].copy_from_slice(&200u16.to_be_bytes());
        assert_eq!(
            parse(LINKTYPE_RAW, &ip),
            Err(M::Ipv4TotalLengthPastEnd.into())
        );
        let mut ip = good.clone();
        ip[2..4].copy_from_slice(&19u16.to_be_bytes());
        assert_eq!(
            parse(LINKTYPE_RAW, &ip),
            Err(M::Ipv4TotalLengthTooSmall.into())
        );
        assert_eq!(
            parse(LINKTYPE_RAW, &good[..19]),
            Err(M::TruncatedIpv4Header.into())
        );
        // Ethernet says IPv4, header says 6.
        let mut f = eth_ipv4(&good);
        f[14] = 0x65;
        assert_eq!(parse(LINKTYPE_ETHERNET, &f), Err(M::BadIpVersion.into()));
        // Ethernet frame cut inside the IP header.
        let f = eth_ipv4(&good);
        assert_eq!(
            parse(LINKTYPE_ETHERNET, &f[..30]),
            Err(M::TruncatedIpv4Header.into())
        );
        // Fragment that would end beyond 65535.
        let ip = ipv4_frag(A, B, PROTO_UDP, &[], &[0u8; 16], 7, 0x1FFF);
        assert_eq!(parse(LINKTYPE_RAW, &ip), Err(M::Ipv4FragmentTooLong.into()));
    }

    #[test]
    fn transport_errors() {
        // TCP data offset past the end.
        let mut t = tcp(1, 2, TCP_SYN, &[]);
        t[12] = 15 << 4;
        assert_eq!(
            parse(LINKTYPE_RAW, &ipv4(A, B, PROTO_TCP, &[], &t)),
            Err(M::TcpDataOffsetPastEnd.into())
        );
        t[12] = 4 << 4;
        assert_eq!(
            parse(LINKTYPE_RAW, &ipv4(A, B, PROTO_TCP, &[], &t)),
            Err(M::TcpDataOffsetTooSmall.into())
        );
        assert_eq!(
            parse(LINKTYPE_RAW, &ipv4(A, B, PROTO_TCP, &[], &t[..19])),
            Err(M::TruncatedTcpHeader.into())
        );
        // UDP length 0, length > payload, short header.
        let mut u = udp(1, 2, b"abcd");
        u[4..6].copy_from_slice(&0u16.to_be_bytes());
        assert_eq!(
            parse(LINKTYPE_RAW, &ipv4(A, B, PROTO_UDP, &[], &u)),
            Err(M::UdpLengthTooSmall.into())
        );
        u[4..6].copy_from_slice(&13u16.to_be_bytes());
        assert_eq!(
            parse(LINKTYPE_RAW, &ipv4(A, B, PROTO_UDP, &[], &u)),
            Err(M::UdpLengthPastEnd.into())
        );
        assert_eq!(
            parse(LINKTYPE_RAW, &ipv4(A, B, PROTO_UDP, &[], &u[..7])),
            Err(M::TruncatedUdpHeader.into())
        );
        // ICMP shorter than 8 bytes.
        assert_eq!(
            parse(LINKTYPE_RAW, &ipv4(A, B, PROTO_ICMP, &[], &[8, 0, 0, 0])),
            Err(M::TruncatedIcmpHeader.into())
        );
    }

    #[test]
    fn icmp_and_other_protocols() {
        let p = parse(
            LINKTYPE_RAW,
            &ipv4(A, B, PROTO_ICMP, &[], &icmp_echo(false, 0x4242, 7)),
        )
        .unwrap();
        assert_eq!(
            p.transport,
            Transport::IcmpEcho(IcmpEcho {
                reply: false,
                identifier: 0x4242,
                sequence: 7
            })
        );
        let mut unreach = icmp_echo(false, 0, 0);
        unreach[0] = 3;
        unreach[1] = 1;
        let p = parse(LINKTYPE_RAW, &ipv4(A, B, PROTO_ICMP, &[], &unreach)).unwrap();
        assert_eq!(
            p.transport,
            Transport::IcmpOther {
                icmp_type: 3,
                code: 1
            }
        );
        let p = parse(LINKTYPE_RAW, &ipv4(A, B, 47, &[], &[0u8; 8])).unwrap();
        assert_eq!((p.ip.protocol, p.transport), (47, Transport::Other));
    }

    #[test]
    fn fragments() {
        // First fragment: UDP length covers the whole datagram.
        let mut u = udp(1000, 53, &[0u8; 16]);
        u[4..6].copy_from_slice(&3000u16.to_be_bytes());
        let first = ipv4_frag(A, B, PROTO_UDP, &[], &u, 99, 0x2000);
        let p = parse(LINKTYPE_RAW, &first).unwrap();
        assert!(p.ip.is_first_fragment());
        assert!(matches!(p.transport, Transport::Udp(h) if h.src_port == 1000 && h.length == 3000));
        let later = ipv4_frag(A, B, PROTO_UDP, &[], &[0u8; 24], 99, 0x2000 | 3);
        let p = parse(LINKTYPE_RAW, &later).unwrap();
        assert!(p.ip.is_later_fragment());
        assert_eq!(p.ip.fragment_offset, 3);
        assert_eq!(p.ip.id, 99);
        assert_eq!(p.transport, Transport::Fragment);
    }

    #[test]
    fn every_prefix_of_a_frame_parses_or_errors_without_panic() {
        let opts = [1u8; 4];
        let frames = [
            eth_ipv4(&ipv4(A, B, PROTO_TCP, &opts, &tcp(1, 2, TCP_SYN, b"abc"))),
            ether(
                &[0x8100, 0x8100],
                0x0800,
                &ipv4(A, B, PROTO_UDP, &[], &udp(1, 2, b"q")),
            ),
            ether(
                &[],
                0x0800,
                &ipv4(A, B, PROTO_ICMP, &[], &icmp_echo(true, 1, 1)),
            ),
        ];
        for f in &frames {
            for n in 0..=f.len() {
                let _ = parse(LINKTYPE_ETHERNET, &f[..n]);
                let _ = parse(LINKTYPE_LINUX_SLL, &f[..n]);
                let _ = parse(LINKTYPE_LINUX_SLL2, &f[..n]);
                let _ = parse(LINKTYPE_RAW, &f[..n]);
                let _ = parse(LINKTYPE_NULL, &f[..n]);
            }
        }
        // And garbage of every first byte.
        for b0 in 0..=255u8 {
            let mut g = [b0; 64];
            g[2] = 0;
            let _ = parse(LINKTYPE_RAW, &g);
            let _ = parse(LINKTYPE_ETHERNET, &g);
        }
    }
}
