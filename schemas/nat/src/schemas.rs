//! The NAT record schemas (RFC 8158 templates): field names are the IANA
//! IPFIX information-element names, and each schema declares what the
//! generic runtime and formatters need:
//! - event time: `observationTimeMilliseconds` (the record's `timestamp_ns`);
//! - priority under `degrade`: [`PRIORITY_HIGH`], except a NAT44 session
//!   create (natEvent 4), which is [`PRIORITY_NORMAL`];
//! - syslog: APP-NAME `NAT` and MSGID by natEvent as VPP (SADD/SDEL,
//!   APMADD/APMDEL, event names); NAT44 sessions in VPP's NAT44 layout
//!   (SD-ID `nsess@32473`, VPP's parameter names and order); the syslog
//!   profile [`VPP_PROFILE`] is VPP's layout: SD-ID `nsess` for sessions
//!   and `[napmap ...]` for port blocks (a port block as one mapping:
//!   [`VPP_NAPMAP_PARAMS`]; every difference from VPP's messages is listed
//!   at [`dplog_formatters::SyslogOptions::profile`]);
//! - the NAT44 session's four counters only on deletes in the default text
//!   and JSON layouts;
//! - the quota record's limit named and exported as the IANA element of
//!   its subtype (maxSessionEntries 471 ... maxFragmentsPendingReassembly
//!   475) in every format; the field's own name, `quotaLimit`, is only
//!   the handle templates use;
//! - enum fields (natEvent, the quota subtype) as numbers in the default
//!   layouts, as collectors of VPP's logs expect;
//! - lifecycles (`dplog-query --at`): a NAT44 session opens on natEvent 4
//!   (create) and closes on 5 (delete), identified by every field but the
//!   time, natEvent and the four counters a delete alone carries; a port
//!   block (and a deterministic NAT mapping, RFC 7422) opens on 16 and
//!   closes on 17, identified by every field but the time and natEvent.

use std::sync::OnceLock;

use dplog_core::record::{PRIORITY_HIGH, PRIORITY_NORMAL};
use dplog_core::schema::{HasSchema, Schema, SchemaError, SyslogMeta};

use crate::records::*;

/// MSGIDs per natEvent: VPP's SADD/SDEL for sessions and APMADD/APMDEL for
/// port blocks; event names for the rest.
pub const MSGIDS: [(u64, &str); 7] = [
    (4, "SADD"),
    (5, "SDEL"),
    (16, "APMADD"),
    (17, "APMDEL"),
    (3, "ADDRESSES_EXHAUSTED"),
    (12, "PORTS_EXHAUSTED"),
    (13, "QUOTA_EXCEEDED"),
];

/// VPP's NAT44 session syslog parameters, in VPP's order (its
/// `nat_syslog_nat44_sess`): (PARAM-NAME, field or `=constant`). SSUBIX
/// is `0`, as VPP's NAT44-ED sends it (its NAT44-EI sends the subscriber
/// index, which the record does not carry); VPP's twice-NAT IDADDR and
/// IDPORT are not sent (the record has no such addresses).
pub const VPP_PARAMS: [(&str, &str); 11] = [
    ("SSUBIX", "=0"),
    ("SVLAN", "ingressVRFID"),
    ("IATYP", "=IPv4"),
    ("ISADDR", "sourceIPv4Address"),
    ("ISPORT", "sourceTransportPort"),
    ("XATYP", "=IPv4"),
    ("XSADDR", "postNATSourceIPv4Address"),
    ("XSPORT", "postNAPTSourceTransportPort"),
    ("PROTO", "protocolIdentifier"),
    ("XDADDR", "destinationIPv4Address"),
    ("XDPORT", "destinationTransportPort"),
];

/// VPP's address-and-port mapping parameters (SD-ID `napmap`, MSGID
/// APMADD/APMDEL; its `nat_syslog_nat44_apmap`), in VPP's order, for a port
/// block. VPP sends one such message per mapping of one inside address,
/// port and protocol, with their real ISPORT and PROTO; a block maps a
/// range of outside ports for every inside port and protocol of its
/// subscriber, so dplog sends ISPORT `0` and PROTO `0` (no single port or
/// protocol; 0 is reserved in both), and XSPORT is the block's first port
/// (VPP's layout has no place for the range's end, step or size; the
/// default layout has them). SSUBIX is `0` (no subscriber index in the
/// record); SVLAN always (VPP's DS-Lite SV6ENC never).
pub const VPP_NAPMAP_PARAMS: [(&str, &str); 9] = [
    ("SSUBIX", "=0"),
    ("SVLAN", "ingressVRFID"),
    ("IATYP", "=IPv4"),
    ("ISADDR", "sourceIPv4Address"),
    ("ISPORT", "=0"),
    ("XATYP", "=IPv4"),
    ("XSADDR", "postNATSourceIPv4Address"),
    ("XSPORT", "portRangeStart"),
    ("PROTO", "=0"),
];

/// The syslog profile name of VPP's layout (`[format.syslog] profile =
/// "vpp"`): SD-ID `nsess` (sessions) and `napmap` (port blocks) without an
/// enterprise number, as VPP sends them. What still differs from VPP's
/// messages (HOSTNAME, PROCID, TIMESTAMP, SSUBIX, twice-NAT, port blocks)
/// is listed at [`dplog_formatters::SyslogOptions::profile`].
pub const VPP_PROFILE: &str = "vpp";

/// What every NAT schema declares: high priority, APP-NAME `NAT`, MSGID
/// by natEvent.
fn common(s: Schema) -> Result<Schema, SchemaError> {
    let syslog = SyslogMeta::resolve(&s, Some("NAT"), Some(("natEvent", &MSGIDS)), None, &[])?;
    Ok(s.with_priority(PRIORITY_HIGH, None)?
        .with_syslog(syslog)
        .with_enum_numbers(true))
}

fn nat44_meta(s: Schema) -> Result<Schema, SchemaError> {
    let layout = |sd_id| {
        SyslogMeta::resolve(
            &s,
            Some("NAT"),
            Some(("natEvent", &MSGIDS)),
            Some(sd_id),
            &VPP_PARAMS,
        )
    };
    let syslog = layout("nsess@32473")?.with_profile(VPP_PROFILE, layout("nsess")?);
    s.with_priority(
        PRIORITY_HIGH,
        Some((
            "natEvent",
            &[(u64::from(nat_event::NAT44_SESSION_CREATE), PRIORITY_NORMAL)],
        )),
    )?
    .with_fields_only_when(
        "natEvent",
        u64::from(nat_event::NAT44_SESSION_DELETE),
        &COUNTERS,
    )
    .map(|s| s.with_syslog(syslog))?
    .with_lifecycle(
        "natEvent",
        &[u64::from(nat_event::NAT44_SESSION_CREATE)],
        &[u64::from(nat_event::NAT44_SESSION_DELETE)],
        &[
            "protocolIdentifier",
            "sourceIPv4Address",
            "sourceTransportPort",
            "postNATSourceIPv4Address",
            "postNAPTSourceTransportPort",
            "destinationIPv4Address",
            "destinationTransportPort",
            "ingressVRFID",
        ],
        &COUNTERS,
    )
}

/// The NAT44 session's counters: a delete alone carries them.
const COUNTERS: [&str; 4] = [
    "initiatorPackets",
    "responderPackets",
    "initiatorOctets",
    "responderOctets",
];

fn port_block_meta(s: Schema) -> Result<Schema, SchemaError> {
    let vpp = SyslogMeta::resolve(
        &s,
        Some("NAT"),
        Some(("natEvent", &MSGIDS)),
        Some("napmap"),
        &VPP_NAPMAP_PARAMS,
    )?;
    let syslog = s.meta().syslog.clone().with_profile(VPP_PROFILE, vpp);
    s.with_syslog(syslog).with_lifecycle(
        "natEvent",
        &[u64::from(nat_event::PORT_BLOCK_ALLOCATION)],
        &[u64::from(nat_event::PORT_BLOCK_DEALLOCATION)],
        &[
            "sourceIPv4Address",
            "postNATSourceIPv4Address",
            "portRangeStart",
            "portRangeEnd",
            "portRangeStepSize",
            "portRangeNumPorts",
            "ingressVRFID",
        ],
        &[],
    )
}

fn quota_meta(s: Schema) -> Result<Schema, SchemaError> {
    let ies: Vec<(u32, u16)> = (1..=5u32)
        .filter_map(|st| quota_event::limit_ie(st).map(|ie| (st, ie)))
        .collect();
    s.with_ipfix_ie_by("quotaLimit", "natQuotaExceededEvent", &ies)?
        .with_name_by(
            "quotaLimit",
            "natQuotaExceededEvent",
            &quota_event::LIMIT_NAMES,
        )
}

macro_rules! builtin {
    ($fn:ident, $ty:ty, $id:expr, $name:literal, [$($body:tt)*] $(, $meta:expr)?) => {
        /// The schema of the record type of the same name, with its
        /// metadata (priority, syslog layout; see the module docs).
        pub fn $fn() -> &'static Schema {
            static S: OnceLock<Schema> = OnceLock::new();
            S.get_or_init(|| {
                let s = dplog_core::schema!($ty, id = $id, name = $name, [$($body)*])
                    .and_then(common);
                $( let s = s.and_then($meta); )?
                s.expect("built-in schema is valid (checked by tests)")
            })
        }
        // SAFETY: repr(C) without padding (size asserted in records.rs,
        // checked field by field in this module's tests) and described
        // by the schema built from its own offset_of! values.
        unsafe impl HasSchema for $ty {
            fn schema() -> &'static Schema {
                $fn()
            }
        }
    };
}

builtin!(nat44_session, Nat44SessionRecord, SCHEMA_NAT44_SESSION, "nat44Session", [
    timestamp_ns => "observationTimeMilliseconds": NsTimestamp, ie 323;
    nat_event => "natEvent": Enum, ie 230, names &nat_event::NAMES;
    protocol => "protocolIdentifier": Protocol, ie 4;
    src_addr => "sourceIPv4Address": Ipv4, ie 8;
    src_port => "sourceTransportPort": Port, ie 7;
    post_nat_src_addr => "postNATSourceIPv4Address": Ipv4, ie 225;
    post_napt_src_port => "postNAPTSourceTransportPort": Port, ie 227;
    dst_addr => "destinationIPv4Address": Ipv4, ie 12;
    dst_port => "destinationTransportPort": Port, ie 11;
    ingress_vrf_id => "ingressVRFID": U32, ie 234;
    initiator_packets => "initiatorPackets": U32, ie 298;
    responder_packets => "responderPackets": U32, ie 299;
    initiator_octets => "initiatorOctets": U64, ie 231;
    responder_octets => "responderOctets": U64, ie 232;
], nat44_meta);

builtin!(nat_port_block, NatPortBlockRecord, SCHEMA_NAT_PORT_BLOCK, "natPortBlock", [
    timestamp_ns => "observationTimeMilliseconds": NsTimestamp, ie 323;
    nat_event => "natEvent": Enum, ie 230, names &nat_event::NAMES;
    src_addr => "sourceIPv4Address": Ipv4, ie 8;
    post_nat_src_addr => "postNATSourceIPv4Address": Ipv4, ie 225;
    port_range_start => "portRangeStart": Port, ie 361;
    port_range_end => "portRangeEnd": Port, ie 362;
    port_range_step => "portRangeStepSize": U16, ie 363;
    port_range_num_ports => "portRangeNumPorts": U16, ie 364;
    ingress_vrf_id => "ingressVRFID": U32, ie 234;
], port_block_meta);

builtin!(nat_addresses_exhausted, NatAddressesExhaustedRecord, SCHEMA_NAT_ADDRESSES_EXHAUSTED, "natAddressesExhausted", [
    timestamp_ns => "observationTimeMilliseconds": NsTimestamp, ie 323;
    nat_event => "natEvent": Enum, ie 230, names &nat_event::NAMES;
    nat_pool_id => "natPoolId": U32, ie 283;
]);

builtin!(nat_ports_exhausted, NatPortsExhaustedRecord, SCHEMA_NAT_PORTS_EXHAUSTED, "natPortsExhausted", [
    timestamp_ns => "observationTimeMilliseconds": NsTimestamp, ie 323;
    nat_event => "natEvent": Enum, ie 230, names &nat_event::NAMES;
    post_nat_src_addr => "postNATSourceIPv4Address": Ipv4, ie 225;
    protocol => "protocolIdentifier": Protocol, ie 4;
]);

builtin!(nat_quota_exceeded, NatQuotaExceededRecord, SCHEMA_NAT_QUOTA_EXCEEDED, "natQuotaExceeded", [
    timestamp_ns => "observationTimeMilliseconds": NsTimestamp, ie 323;
    nat_event => "natEvent": Enum, ie 230, names &nat_event::NAMES;
    quota_event => "natQuotaExceededEvent": Enum, ie 466, names &quota_event::NAMES;
    limit => "quotaLimit": U32, ie 0;
    src_addr => "sourceIPv4Address": Ipv4, ie 8;
], quota_meta);

/// Every built-in NAT schema, by ascending id (1..=5).
pub fn all() -> [&'static Schema; 5] {
    [
        nat44_session(),
        nat_port_block(),
        nat_addresses_exhausted(),
        nat_ports_exhausted(),
        nat_quota_exceeded(),
    ]
}

/// The built-in schema with id `id`.
pub fn by_id(id: u16) -> Option<&'static Schema> {
    all().into_iter().find(|s| s.id() == id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NatRecord;
    use dplog_core::{Record, SchemaTable};

    #[test]
    fn nat44_schema_matches_the_documented_layout_and_iana_ids() {
        let s = crate::nat44_session();
        assert_eq!((s.id(), s.size()), (SCHEMA_NAT44_SESSION, 64));
        let got: Vec<(&str, u16, u16, u16)> = s
            .fields()
            .iter()
            .map(|f| (&*f.name, f.offset, f.size, f.ie_id))
            .collect();
        assert_eq!(
            got,
            [
                ("observationTimeMilliseconds", 8, 8, 323),
                ("natEvent", 35, 1, 230),
                ("protocolIdentifier", 34, 1, 4),
                ("sourceIPv4Address", 16, 4, 8),
                ("sourceTransportPort", 28, 2, 7),
                ("postNATSourceIPv4Address", 20, 4, 225),
                ("postNAPTSourceTransportPort", 30, 2, 227),
                ("destinationIPv4Address", 24, 4, 12),
                ("destinationTransportPort", 32, 2, 11),
                ("ingressVRFID", 36, 4, 234),
                ("initiatorPackets", 40, 4, 298),
                ("responderPackets", 44, 4, 299),
                ("initiatorOctets", 48, 8, 231),
                ("responderOctets", 56, 8, 232),
            ]
        );
        assert_eq!(
            s.field("natEvent").unwrap().1.enum_name(16),
            Some("PORT_BLOCK_ALLOCATION")
        );
    }

    #[test]
    fn builtin_records_have_no_padding_and_read_back() {
        // Field sizes plus header and reserved bytes cover each record exactly.
        for (s, reserved) in [
            (crate::nat44_session(), 0),
            (crate::nat_port_block(), 3),
            (crate::nat_addresses_exhausted(), 3),
            (crate::nat_ports_exhausted(), 2),
            (crate::nat_quota_exceeded(), 3),
        ] {
            let used: usize = s.fields().iter().map(|f| f.size as usize).sum();
            assert_eq!(8 + used + reserved, s.size(), "{}", s.name());
        }
        let r = NatPortBlockRecord {
            src_addr: 0x0A00_0001,
            port_range_start: 1024,
            port_range_end: 1535,
            port_range_num_ports: 512,
            ingress_vrf_id: 9,
            ..Default::default()
        };
        let b = r.as_bytes();
        let s = NatPortBlockRecord::schema();
        let v = |n| s.field(n).unwrap().1.read_uint(b);
        assert_eq!(v("sourceIPv4Address"), 0x0A00_0001);
        assert_eq!(v("portRangeEnd"), 1535);
        assert_eq!(v("portRangeNumPorts"), 512);
        assert_eq!(v("ingressVRFID"), 9);
        assert_eq!(v("natEvent"), 16);
        let q = NatRecord::from(NatQuotaExceededRecord {
            quota_event: quota_event::MAX_ENTRIES_PER_USER,
            limit: 300,
            ..Default::default()
        });
        assert_eq!(q.header().schema_id, SCHEMA_NAT_QUOTA_EXCEEDED);
        assert_eq!(q.as_bytes().len(), 32);
        assert_eq!(NatRecord::from_bytes(q.as_bytes()), Some(q));
        assert_eq!(NatRecord::from_bytes(&q.as_bytes()[..20]), None);
        assert_eq!(crate::EventProfile::Legacy.map(4), 1);
        assert_eq!(crate::EventProfile::Legacy.map(17), 17);
    }

    #[test]
    fn the_quota_limit_is_named_as_the_ipfix_element_it_is_exported_as() {
        // IANA: 471 maxSessionEntries, 472 maxBIBEntries, 473
        // maxEntriesPerUser, 474 maxSubscribers, 475
        // maxFragmentsPendingReassembly.
        let m = crate::nat_quota_exceeded().meta();
        let names = &m.name_by.as_ref().unwrap().names;
        let ies = &m.ipfix_ie_by.as_ref().unwrap().ies;
        let iana = [
            (471, "maxSessionEntries"),
            (472, "maxBIBEntries"),
            (473, "maxEntriesPerUser"),
            (474, "maxSubscribers"),
            (475, "maxFragmentsPendingReassembly"),
        ];
        assert_eq!(names.len(), 5);
        for (v, n) in names {
            let ie = ies.iter().find(|(w, _)| w == v).unwrap().1;
            assert!(iana.contains(&(ie, n.as_ref())), "subtype {v}: {n} / {ie}");
        }
    }

    #[test]
    fn nat_priorities_and_event_times_through_the_table() {
        let t = SchemaTable::new(crate::all());
        let create = NatRecord::from(Nat44SessionRecord {
            nat_event: nat_event::NAT44_SESSION_CREATE,
            timestamp_ns: 42,
            ..Default::default()
        });
        let delete = NatRecord::from(Nat44SessionRecord {
            nat_event: nat_event::NAT44_SESSION_DELETE,
            ..Default::default()
        });
        let block = NatRecord::from(NatPortBlockRecord::default());
        assert_eq!(create.priority_in(&t), PRIORITY_NORMAL);
        assert_eq!(delete.priority_in(&t), PRIORITY_HIGH);
        assert_eq!(block.priority_in(&t), PRIORITY_HIGH);
        assert_eq!(create.event_time_in(&t), 42);
        let typed = Nat44SessionRecord::default();
        assert_eq!(
            typed.priority(),
            PRIORITY_HIGH,
            "natEvent 0 is not a create"
        );
    }

    #[test]
    fn sessions_and_port_blocks_declare_their_lifecycles() {
        let names = |s: &Schema, ix: &[usize]| -> Vec<String> {
            ix.iter().map(|&i| s.fields()[i].name.to_string()).collect()
        };
        let s = crate::nat44_session();
        let l = s.meta().lifecycle.as_ref().unwrap();
        assert_eq!(&*s.fields()[l.field].name, "natEvent");
        assert_eq!(
            (l.opens.as_slice(), l.closes.as_slice()),
            (&[4][..], &[5][..])
        );
        // Every field but the time, natEvent and the counters.
        assert_eq!(l.keys.len(), s.fields().len() - 2 - 4);
        assert_eq!(
            names(s, &l.close_only),
            [
                "initiatorPackets",
                "responderPackets",
                "initiatorOctets",
                "responderOctets"
            ]
        );
        let b = crate::nat_port_block();
        let l = b.meta().lifecycle.as_ref().unwrap();
        assert_eq!(
            (l.opens.as_slice(), l.closes.as_slice()),
            (&[16][..], &[17][..])
        );
        assert_eq!(l.keys.len(), b.fields().len() - 2);
        assert!(l.close_only.is_empty());
        assert!(!names(b, &l.keys).contains(&"natEvent".to_string()));
        for s in [
            crate::nat_addresses_exhausted(),
            crate::nat_ports_exhausted(),
            crate::nat_quota_exceeded(),
        ] {
            assert_eq!(s.meta().lifecycle, None, "{}", s.name());
        }
    }
}
