//! [`Verdict`]: what [`Nat44::process`](super::Nat44::process) did with a
//! packet, one per packet, each with its own counter.

use std::fmt;

use crate::packet::{MalformedReason, ParseError};

#[cfg(doc)]
use super::{Nat44, NatStats};

/// What [`Nat44::process`] did with a packet. Every packet gets exactly one
/// verdict and each verdict has its own counter in [`NatStats`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Outbound packet translated (source address and port rewritten).
    TranslatedOut,
    /// Inbound packet matched to its session (already in inside form).
    TranslatedIn,
    /// A later fragment (offset > 0) matched through the fragment table;
    /// outbound ones get their source address rewritten.
    FragmentMatched,
    /// A later fragment whose first fragment was not seen (or expired).
    FragmentNoSession,
    /// Inbound packet without a session (unsolicited, or after expiry).
    InboundNoSession,
    /// Outbound ICMP echo reply without a session (an answer to a ping from
    /// outside); not translated.
    IcmpReplyNoSession,
    /// No external port left on the inside host's pool address; dropped.
    PoolExhausted,
    /// Destination is multicast (224.0.0.0/4).
    Multicast,
    /// Destination is the limited broadcast 255.255.255.255.
    Broadcast,
    /// Source or destination in 0.0.0.0/8 ("this network").
    ThisNetwork,
    /// Source or destination in loopback 127.0.0.0/8.
    Loopback,
    /// Source or destination in link-local 169.254.0.0/16.
    LinkLocal,
    /// Source multicast, or source or destination in reserved 240.0.0.0/4.
    Reserved,
    /// Both ends inside: routed, not translated.
    InsideToInside,
    /// Neither end inside: not for this NAT.
    Transit,
    /// IP protocol other than TCP, UDP and ICMP (GRE, ESP, ...).
    UnsupportedProtocol,
    /// ICMP other than echo request / reply and the errors of
    /// [`Verdict::IcmpErrorOut`] (timestamp, router advertisement...).
    IcmpNotEcho,
    /// Not an IPv4 packet (IPv6, ARP, ...).
    NotIpv4,
    /// Link type the parser does not handle.
    UnsupportedLinkType,
    /// The subscriber reached `max_sessions_per_user` (or, with port
    /// blocks, filled all its blocks); dropped, natEvent 13 logged.
    SessionLimit,
    /// Hairpinning (RFC 4787 REQ-9): an inside host reached another inside
    /// host through its external address; source and destination were both
    /// translated.
    Hairpinned,
    /// Sent to a pool address and port with no mapping in this engine
    /// (nothing to hairpin to; with several workers a TCP/UDP packet to
    /// another worker's port is handed to it instead,
    /// [`Verdict::HairpinHandoff`], see [`crate::workers`]), or an ICMP
    /// echo to a pool address; dropped. A TCP/UDP packet gets (or
    /// refreshes) the sender's session before it is dropped, natEvent 4
    /// logged when new: the source mapping is endpoint-independent
    /// (RFC 4787 REQ-1), allocated whatever the destination, and the
    /// two-stage path allocates it on the sender's worker before the
    /// owner finds no mapping; so the sessions and records are the same
    /// for any worker count. A session limit or pool exhaustion on the
    /// sender gives that verdict instead.
    HairpinNoMapping,
    /// Outbound ICMP error (RFC 5508) about a session: outer source and the
    /// quoted packet's destination translated, checksums fixed.
    IcmpErrorOut,
    /// Inbound ICMP error whose quoted packet matches a session.
    IcmpErrorIn,
    /// ICMP error whose quoted packet matches no session; dropped.
    IcmpErrorNoSession,
    /// ICMP error whose quoted packet is truncated, malformed, a later
    /// fragment or of a protocol other than TCP, UDP and ICMP echo (GRE,
    /// IP-in-IP...); dropped.
    IcmpErrorBadQuote,
    /// ICMP error quoting an ICMP error (RFC 1122 3.2.2 forbids sending
    /// one); dropped.
    IcmpErrorQuotesError,
    /// A later fragment that partly overlaps bytes already seen of its
    /// datagram (RFC 5722 treats overlaps as an attack); dropped. A
    /// fragment whose bytes were all seen before is a duplicate: it is
    /// forwarded as [`Verdict::FragmentMatched`] and counted in
    /// [`NatStats::fragments_duplicate`] (without buffering, the NAT
    /// cannot compare contents).
    FragmentOverlap,
    /// Cut by the capture's snap length (captured length below the wire
    /// length) before the headers the NAT needs (the IPv4 header and the
    /// TCP/UDP/ICMP fixed header), or an ICMP error whose quote was cut
    /// (its checksum covers bytes not captured); not translated. A cut
    /// packet whose headers are all there is translated as usual (see
    /// [`Nat44::process_snapped`]).
    Snapped,
    /// Hairpinning across workers (see [`Nat44::set_hairpin_handoff`]):
    /// the source was translated here with the sender's own
    /// endpoint-independent mapping (a session created or refreshed, as
    /// any outbound packet), but the destination pool port belongs to
    /// worker [`Nat44::handoff_target`], which translates the destination
    /// ([`Nat44::hairpin_in`]) and emits the packet; its outcome is counted
    /// there in [`NatStats::hairpin_in_delivered`] /
    /// [`NatStats::hairpin_in_dropped`]. Later fragments of such a
    /// datagram get this verdict too.
    HairpinHandoff,
    /// Malformed frame, with the reason.
    Malformed(MalformedReason),
}

const SIMPLE_VERDICTS: [Verdict; 30] = [
    Verdict::TranslatedOut,
    Verdict::TranslatedIn,
    Verdict::FragmentMatched,
    Verdict::FragmentNoSession,
    Verdict::InboundNoSession,
    Verdict::IcmpReplyNoSession,
    Verdict::PoolExhausted,
    Verdict::Multicast,
    Verdict::Broadcast,
    Verdict::ThisNetwork,
    Verdict::Loopback,
    Verdict::LinkLocal,
    Verdict::Reserved,
    Verdict::InsideToInside,
    Verdict::Transit,
    Verdict::UnsupportedProtocol,
    Verdict::IcmpNotEcho,
    Verdict::NotIpv4,
    Verdict::UnsupportedLinkType,
    Verdict::SessionLimit,
    Verdict::Hairpinned,
    Verdict::HairpinNoMapping,
    Verdict::IcmpErrorOut,
    Verdict::IcmpErrorIn,
    Verdict::IcmpErrorNoSession,
    Verdict::IcmpErrorBadQuote,
    Verdict::IcmpErrorQuotesError,
    Verdict::FragmentOverlap,
    Verdict::Snapped,
    Verdict::HairpinHandoff,
];

impl Verdict {
    /// Number of distinct verdicts (each malformed reason counts as one).
    pub const COUNT: usize = SIMPLE_VERDICTS.len() + MalformedReason::COUNT;

    /// Dense index in `0..Verdict::COUNT`, for counter arrays.
    pub fn index(self) -> usize {
        match self {
            Verdict::TranslatedOut => 0,
            Verdict::TranslatedIn => 1,
            Verdict::FragmentMatched => 2,
            Verdict::FragmentNoSession => 3,
            Verdict::InboundNoSession => 4,
            Verdict::IcmpReplyNoSession => 5,
            Verdict::PoolExhausted => 6,
            Verdict::Multicast => 7,
            Verdict::Broadcast => 8,
            Verdict::ThisNetwork => 9,
            Verdict::Loopback => 10,
            Verdict::LinkLocal => 11,
            Verdict::Reserved => 12,
            Verdict::InsideToInside => 13,
            Verdict::Transit => 14,
            Verdict::UnsupportedProtocol => 15,
            Verdict::IcmpNotEcho => 16,
            Verdict::NotIpv4 => 17,
            Verdict::UnsupportedLinkType => 18,
            Verdict::SessionLimit => 19,
            Verdict::Hairpinned => 20,
            Verdict::HairpinNoMapping => 21,
            Verdict::IcmpErrorOut => 22,
            Verdict::IcmpErrorIn => 23,
            Verdict::IcmpErrorNoSession => 24,
            Verdict::IcmpErrorBadQuote => 25,
            Verdict::IcmpErrorQuotesError => 26,
            Verdict::FragmentOverlap => 27,
            Verdict::Snapped => 28,
            Verdict::HairpinHandoff => 29,
            Verdict::Malformed(r) => SIMPLE_VERDICTS.len() + r as usize,
        }
    }

    /// Inverse of [`Verdict::index`]; `None` when `i >= Verdict::COUNT`.
    pub fn from_index(i: usize) -> Option<Verdict> {
        match SIMPLE_VERDICTS.get(i) {
            Some(v) => Some(*v),
            None => MalformedReason::ALL
                .get(i - SIMPLE_VERDICTS.len())
                .map(|r| Verdict::Malformed(*r)),
        }
    }

    /// Every verdict in index order.
    pub fn all() -> impl Iterator<Item = Verdict> {
        (0..Self::COUNT).filter_map(Self::from_index)
    }

    /// True when the packet was handled by the NAT (translated or matched to
    /// a session); all other verdicts mean "not translated, dropped or left
    /// to the router".
    pub fn is_translated(self) -> bool {
        matches!(
            self,
            Verdict::TranslatedOut
                | Verdict::TranslatedIn
                | Verdict::FragmentMatched
                | Verdict::Hairpinned
                | Verdict::IcmpErrorOut
                | Verdict::IcmpErrorIn
        )
    }

    /// Short snake_case name for summaries, e.g. `"translated_out"` or
    /// `"malformed_tcp_data_offset_past_end"`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::TranslatedOut => "translated_out",
            Verdict::TranslatedIn => "translated_in",
            Verdict::FragmentMatched => "fragment_matched",
            Verdict::FragmentNoSession => "fragment_no_session",
            Verdict::InboundNoSession => "inbound_no_session",
            Verdict::IcmpReplyNoSession => "icmp_reply_no_session",
            Verdict::PoolExhausted => "pool_exhausted",
            Verdict::Multicast => "multicast",
            Verdict::Broadcast => "broadcast",
            Verdict::ThisNetwork => "this_network",
            Verdict::Loopback => "loopback",
            Verdict::LinkLocal => "link_local",
            Verdict::Reserved => "reserved",
            Verdict::InsideToInside => "inside_to_inside",
            Verdict::Transit => "transit",
            Verdict::UnsupportedProtocol => "unsupported_protocol",
            Verdict::IcmpNotEcho => "icmp_not_echo",
            Verdict::NotIpv4 => "not_ipv4",
            Verdict::UnsupportedLinkType => "unsupported_link_type",
            Verdict::SessionLimit => "session_limit",
            Verdict::Hairpinned => "hairpinned",
            Verdict::HairpinNoMapping => "hairpin_no_mapping",
            Verdict::IcmpErrorOut => "icmp_error_out",
            Verdict::IcmpErrorIn => "icmp_error_in",
            Verdict::IcmpErrorNoSession => "icmp_error_no_session",
            Verdict::IcmpErrorBadQuote => "icmp_error_bad_quote",
            Verdict::IcmpErrorQuotesError => "icmp_error_quotes_error",
            Verdict::FragmentOverlap => "fragment_overlap",
            Verdict::Snapped => "snapped",
            Verdict::HairpinHandoff => "hairpin_handoff",
            Verdict::Malformed(r) => r.name(),
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<ParseError> for Verdict {
    fn from(e: ParseError) -> Self {
        match e {
            ParseError::UnsupportedLinkType => Verdict::UnsupportedLinkType,
            ParseError::NotIpv4 => Verdict::NotIpv4,
            ParseError::Malformed(r) => Verdict::Malformed(r),
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_index_roundtrip() {
        let all: Vec<Verdict> = Verdict::all().collect();
        assert_eq!(all.len(), Verdict::COUNT);
        for (i, v) in all.iter().enumerate() {
            assert_eq!(v.index(), i);
            assert_eq!(Verdict::from_index(i), Some(*v));
        }
        assert_eq!(Verdict::from_index(Verdict::COUNT), None);
        let names: std::collections::HashSet<_> = all.iter().map(|v| v.name()).collect();
        assert_eq!(names.len(), Verdict::COUNT, "names are unique");
    }
}
