//! Any record type a Rust user declares goes through the whole pipeline:
//! `LogConfig::start_slots` with a user schema of each slot size (a 32-byte
//! record in `Slot32`, a 64-byte one in `Slot64`, a 128-byte one in
//! `Slot128`) and `LogConfig::start::<R>()` with a typed record, each
//! through every format, compared whole with the exact expected output
//! (binary decoded with `dplog::formatters::binary::decode`, IPFIX decoded
//! field by field). Then the checks a user meets: a record too large for
//! its slot, a `[ring] slot_bytes` that is not the program's, per-type
//! priorities from `[ring.priorities]` and the schema's own rule under
//! `degrade`.

use std::path::Path;
use std::sync::OnceLock;

use dplog::config::{ConfigError, LogConfig};
use dplog::schema::{HasSchema, Schema, SyslogMeta};
use dplog::{schema, Record, RecordHeader, Slot, Slot128, Slot32, Slot64};

/// 2026-01-01T00:00:00Z in ns since the Unix epoch.
const T0: u64 = 1_767_225_600_000_000_000;

/// Zeroed record of type `R` with its header set.
///
/// # Safety
/// `R` must be a `#[repr(C)]` struct of integers and byte arrays that
/// starts with a `RecordHeader` (all-zero is a valid value).
unsafe fn zeroed<R: Record>() -> R {
    // SAFETY: the caller guarantees all-zero bytes are a valid `R`.
    let mut r: R = unsafe { std::mem::zeroed() };
    // SAFETY: `R` starts with a RecordHeader (the caller's guarantee), so
    // its first 8 bytes are one.
    unsafe { *(&mut r as *mut R).cast::<RecordHeader>() = RecordHeader::of::<R>() };
    r
}

// ---------------------------------------------------------------- 32 bytes

/// A link state change: 32 bytes, for `Slot32`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
struct LinkEvent {
    header: RecordHeader,
    time_ns: u64,
    if_index: u32,
    speed_mbps: u32,
    state: u8,
    full_duplex: u8,
    vlan: u16,
    mtu: u32,
}
const _: () = assert!(std::mem::size_of::<LinkEvent>() == 32);

impl Record for LinkEvent {
    const SCHEMA_ID: u16 = 301;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 4 + 4 + 1 + 1 + 2 + 4 = 32 bytes without
// padding (size asserted above); the schema is built from its own
// offset_of! values and size_of.
unsafe impl HasSchema for LinkEvent {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(LinkEvent, id = 301, name = "linkEvent", [
                time_ns => "eventTime": NsTimestamp, ie 0;
                if_index => "ingressInterface": U32, ie 10;
                speed_mbps => "speedMbps": U32, ie 0;
                state => "linkState": Enum, ie 0, names &[(1, "UP"), (2, "DOWN")];
                full_duplex => "fullDuplex": Bool, ie 0;
                vlan => "vlanId": U16, ie 58;
                mtu => "mtu": U32, ie 0;
            ])
            .unwrap()
            // Link downs outrank ups under `degrade`.
            .with_priority(1, Some(("linkState", &[(2, 3)])))
            .unwrap()
        })
    }
}

fn link(i: u64, state: u8) -> LinkEvent {
    LinkEvent {
        time_ns: T0 + i * 1_500_000,
        if_index: 3 + i as u32,
        speed_mbps: 25_000,
        state,
        full_duplex: u8::from(state == 1),
        vlan: 100,
        mtu: 9000,
        // SAFETY: LinkEvent is repr(C) integers after its header.
        ..unsafe { zeroed() }
    }
}

// ---------------------------------------------------------------- 64 bytes

/// An ACL drop of a software switch: 64 bytes, for `Slot64` and the typed
/// logger.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
struct AclDrop {
    header: RecordHeader,
    time_ns: u64,
    src_addr: [u8; 16],
    dst_addr: u32,
    rule: u32,
    octets: u32,
    src_port: u16,
    dst_port: u16,
    src_mac: [u8; 6],
    vlan: u16,
    reason: u8,
    protocol: u8,
    port_name: [u8; 6],
}
const _: () = assert!(std::mem::size_of::<AclDrop>() == 64);

impl Record for AclDrop {
    const SCHEMA_ID: u16 = 302;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 16 + 4 + 4 + 4 + 2 + 2 + 6 + 2 + 1 + 1 + 6 = 64
// bytes without padding (size asserted above); the schema is built from
// its own offset_of! values and size_of.
unsafe impl HasSchema for AclDrop {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(AclDrop, id = 302, name = "aclDrop", [
                time_ns => "observationTimeMilliseconds": NsTimestamp, ie 323;
                src_mac => "sourceMacAddress": Mac, ie 56;
                vlan => "vlanId": U16, ie 58;
                src_addr => "sourceIPv6Address": Ipv6, ie 27;
                dst_addr => "destinationIPv4Address": Ipv4, ie 12;
                protocol => "protocolIdentifier": Protocol, ie 4;
                src_port => "sourceTransportPort": Port, ie 7;
                dst_port => "destinationTransportPort": Port, ie 11;
                reason => "dropReason": Enum, ie 0,
                    names &[(1, "NO_RULE"), (2, "DENY"), (3, "RATE_LIMIT")];
                rule => "ruleId": U32, ie 0;
                octets => "octetDeltaCount": U32, ie 1;
                port_name => "portName": Bytes, ie 0;
            ])
            .unwrap()
        })
    }
}

fn acl(i: u64, reason: u8) -> AclDrop {
    AclDrop {
        time_ns: T0 + i * 250_000_000,
        src_addr: [
            0x20,
            0x01,
            0x0d,
            0xb8,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            1 + i as u8,
        ],
        dst_addr: 0xc633_6407 + i as u32,
        rule: 1000 + i as u32,
        octets: 60 + 40 * i as u32,
        src_port: 40_000 + i as u16,
        dst_port: 443,
        src_mac: [0x02, 0x00, 0x5e, 0x00, 0x53, i as u8],
        vlan: 10,
        reason,
        protocol: 6,
        port_name: *b"eth1\0\0",
        // SAFETY: AclDrop is repr(C) integers and byte arrays after its
        // header.
        ..unsafe { zeroed() }
    }
}

// --------------------------------------------------------------- 128 bytes

/// A tunnel session with a subscriber name: 128 bytes, for `Slot128`; its
/// event time is its end time (declared, not the first timestamp).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
struct TunnelSession {
    header: RecordHeader,
    start_ns: u64,
    end_ns: u64,
    inner_src: [u8; 16],
    inner_dst: [u8; 16],
    outer_src: u32,
    outer_dst: u32,
    packets: u64,
    octets: u64,
    tunnel_id: u32,
    subscriber: [u8; 32],
    state: u16,
    protocol: u8,
    encrypted: u8,
    vni: u32,
    mtu: u16,
    outer_port: u16,
}
const _: () = assert!(std::mem::size_of::<TunnelSession>() == 128);

impl Record for TunnelSession {
    const SCHEMA_ID: u16 = 303;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 8 + 16 + 16 + 4 + 4 + 8 + 8 + 4 + 32 + 2 + 1 +
// 1 + 4 + 2 + 2 = 128 bytes without padding (size asserted above; every
// field at a multiple of its alignment); the schema is built from its own
// offset_of! values and size_of.
unsafe impl HasSchema for TunnelSession {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            let s = schema!(TunnelSession, id = 303, name = "tunnelSession", [
                start_ns => "flowStartMilliseconds": NsTimestamp, ie 152;
                end_ns => "flowEndMilliseconds": NsTimestamp, ie 153;
                tunnel_id => "tunnelId": U32, ie 0;
                state => "tunnelState": Enum, ie 0,
                    names &[(1, "OPEN"), (2, "CLOSED"), (3, "EXPIRED")];
                subscriber => "subscriber": Bytes, ie 0;
                outer_src => "tunnelSourceIPv4Address": Ipv4, ie 0;
                outer_dst => "tunnelDestinationIPv4Address": Ipv4, ie 0;
                outer_port => "tunnelPort": Port, ie 0;
                vni => "vni": U32, ie 0;
                inner_src => "sourceIPv6Address": Ipv6, ie 27;
                inner_dst => "destinationIPv6Address": Ipv6, ie 28;
                protocol => "protocolIdentifier": Protocol, ie 4;
                encrypted => "encrypted": Bool, ie 0;
                mtu => "mtu": U16, ie 0;
                packets => "packetDeltaCount": U64, ie 2;
                octets => "octetDeltaCount": U64, ie 1;
            ])
            .unwrap()
            .with_event_time(Some("flowEndMilliseconds"))
            .unwrap();
            let sys = SyslogMeta::resolve(
                &s,
                Some("TUN"),
                Some(("tunnelState", &[(1, "TOPEN"), (2, "TCLOSE"), (3, "TEXP")])),
                Some("tun@32473"),
                &[
                    ("id", "tunnelId"),
                    ("sub", "subscriber"),
                    ("peer", "tunnelDestinationIPv4Address"),
                    ("v", "=1"),
                ],
            )
            .unwrap();
            s.with_syslog(sys)
        })
    }
}

fn tunnel(i: u64, state: u16) -> TunnelSession {
    let mut subscriber = [0u8; 32];
    let name = format!("subscriber-{i}@example.net");
    subscriber[..name.len()].copy_from_slice(name.as_bytes());
    TunnelSession {
        start_ns: T0 + i * 1_000_000_000,
        end_ns: T0 + i * 1_000_000_000 + 42_123_456_789,
        inner_src: [0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        inner_dst: [0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
        outer_src: 0xc000_0201,
        outer_dst: 0xc000_0264 + i as u32,
        packets: 1000 * (i + 1),
        octets: 1_400_000 * (i + 1),
        tunnel_id: 77 + i as u32,
        subscriber,
        state,
        protocol: 17,
        encrypted: u8::from(i % 2 == 0),
        vni: 5000 + i as u32,
        mtu: 1450,
        outer_port: 4789,
        // SAFETY: TunnelSession is repr(C) integers and byte arrays after
        // its header.
        ..unsafe { zeroed() }
    }
}

// ------------------------------------------------------------- the runs

/// Every format's `[format]` table; IPFIX stamps its messages with the
/// records' time so the output is the same on every run.
/// The records are published at once (`publish_every`, then `flush`), so
/// the consumer takes them in one pass: one batch, one IPFIX message.
fn format_toml(format: &str) -> String {
    let mut t = format!("[ring]\npublish_every = 64\n[format]\ntype = \"{format}\"\n");
    if format == "ipfix" {
        t.push_str("[format.ipfix]\nexport_clock = \"record\"\n");
    }
    if format.starts_with("rfc") {
        // Fixed header fields (by default this host's name and this
        // process's id).
        t.push_str("[format.syslog]\nhostname = \"sw1\"\nprocid = \"7\"\n");
    }
    t
}

fn config(dir: &Path, name: &str, body: &str) -> (LogConfig, std::path::PathBuf) {
    let path = dir.join(name);
    let text = format!(
        "{body}\n[sink]\ntype = \"file\"\npath = \"{}\"\n",
        path.display()
    );
    (LogConfig::from_toml_str(&text).unwrap(), path)
}

/// Logs `recs` packed in slots of `S` through a logger started with
/// `start_slots::<S>(schemas)` and returns the file.
fn through_slots<S: Slot, R: Record>(format: &str, schemas: &[&Schema], recs: &[R]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, path) = config(dir.path(), "out.log", &format_toml(format));
    let logger = cfg.start_slots::<S>(schemas).unwrap();
    let mut p = logger.producer().unwrap();
    for r in recs {
        assert!(p.log(S::pack_record(r).unwrap()));
    }
    p.flush();
    drop(p);
    let stats = logger.shutdown().unwrap();
    assert_eq!(stats.written_records, recs.len() as u64, "{format}");
    std::fs::read(path).unwrap()
}

/// Logs `recs` through a logger started with `start::<R>()`.
fn through_typed<R: HasSchema>(format: &str, recs: &[R]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, path) = config(dir.path(), "out.log", &format_toml(format));
    let logger = cfg.start::<R>().unwrap();
    let mut p = logger.producer().unwrap();
    for r in recs {
        assert!(p.log(*r));
    }
    p.flush();
    drop(p);
    let stats = logger.shutdown().unwrap();
    assert_eq!(stats.written_records, recs.len() as u64, "{format}");
    std::fs::read(path).unwrap()
}

fn links() -> Vec<LinkEvent> {
    vec![link(0, 1), link(1, 2), link(2, 7)]
}

fn acls() -> Vec<AclDrop> {
    vec![acl(0, 1), acl(1, 2), acl(2, 3)]
}

fn tunnels() -> Vec<TunnelSession> {
    vec![tunnel(0, 1), tunnel(1, 2), tunnel(2, 3)]
}

// ------------------------------------------------- line formats, exactly

/// `(format, expected file)` for the link events (`Slot32`). A value
/// without a name (`linkState` 7) prints in decimal; CSV lines end in
/// CRLF (RFC 4180).
const LINK_OUT: [(&str, &str); 5] = [
    (
        "text",
        "2026-01-01T00:00:00.000000Z eventTime=1767225600000 ingressInterface=3 speedMbps=25000 linkState=UP fullDuplex=true vlanId=100 mtu=9000\n\
         2026-01-01T00:00:00.001500Z eventTime=1767225600001 ingressInterface=4 speedMbps=25000 linkState=DOWN fullDuplex=false vlanId=100 mtu=9000\n\
         2026-01-01T00:00:00.003000Z eventTime=1767225600003 ingressInterface=5 speedMbps=25000 linkState=7 fullDuplex=false vlanId=100 mtu=9000\n",
    ),
    (
        "json",
        "{\"timestamp\":\"2026-01-01T00:00:00.000000Z\",\"eventTime\":1767225600000,\"ingressInterface\":3,\"speedMbps\":25000,\"linkState\":\"UP\",\"fullDuplex\":true,\"vlanId\":100,\"mtu\":9000}\n\
         {\"timestamp\":\"2026-01-01T00:00:00.001500Z\",\"eventTime\":1767225600001,\"ingressInterface\":4,\"speedMbps\":25000,\"linkState\":\"DOWN\",\"fullDuplex\":false,\"vlanId\":100,\"mtu\":9000}\n\
         {\"timestamp\":\"2026-01-01T00:00:00.003000Z\",\"eventTime\":1767225600003,\"ingressInterface\":5,\"speedMbps\":25000,\"linkState\":\"7\",\"fullDuplex\":false,\"vlanId\":100,\"mtu\":9000}\n",
    ),
    (
        "csv",
        "recordType,timestamp,eventTime,ingressInterface,speedMbps,linkState,fullDuplex,vlanId,mtu,dplogDropped,dplogDropRing,dplogDropReason,dplogFirstDropWallClock,dplogLastDropWallClock\r\n\
         linkEvent,2026-01-01T00:00:00.000000Z,1767225600000,3,25000,UP,true,100,9000,,,,,\r\n\
         linkEvent,2026-01-01T00:00:00.001500Z,1767225600001,4,25000,DOWN,false,100,9000,,,,,\r\n\
         linkEvent,2026-01-01T00:00:00.003000Z,1767225600003,5,25000,7,false,100,9000,,,,,\r\n",
    ),
    (
        "rfc5424",
        "<134>1 2026-01-01T00:00:00.000000Z sw1 dplog 7 linkEvent [linkEvent@32473 eventTime=\"1767225600000\" ingressInterface=\"3\" speedMbps=\"25000\" linkState=\"UP\" fullDuplex=\"true\" vlanId=\"100\" mtu=\"9000\"]\n\
         <134>1 2026-01-01T00:00:00.001500Z sw1 dplog 7 linkEvent [linkEvent@32473 eventTime=\"1767225600001\" ingressInterface=\"4\" speedMbps=\"25000\" linkState=\"DOWN\" fullDuplex=\"false\" vlanId=\"100\" mtu=\"9000\"]\n\
         <134>1 2026-01-01T00:00:00.003000Z sw1 dplog 7 linkEvent [linkEvent@32473 eventTime=\"1767225600003\" ingressInterface=\"5\" speedMbps=\"25000\" linkState=\"7\" fullDuplex=\"false\" vlanId=\"100\" mtu=\"9000\"]\n",
    ),
    (
        "rfc3164",
        "<134>Jan  1 00:00:00 sw1 dplog: linkEvent eventTime=1767225600000 ingressInterface=3 speedMbps=25000 linkState=UP fullDuplex=true vlanId=100 mtu=9000\n\
         <134>Jan  1 00:00:00 sw1 dplog: linkEvent eventTime=1767225600001 ingressInterface=4 speedMbps=25000 linkState=DOWN fullDuplex=false vlanId=100 mtu=9000\n\
         <134>Jan  1 00:00:00 sw1 dplog: linkEvent eventTime=1767225600003 ingressInterface=5 speedMbps=25000 linkState=7 fullDuplex=false vlanId=100 mtu=9000\n",
    ),
];

/// The ACL drops (`Slot64` and the typed logger): enum by name, MAC, IPv6,
/// IPv4, a NUL-padded byte string.
const ACL_OUT: [(&str, &str); 5] = [
    (
        "text",
        "2026-01-01T00:00:00.000000Z observationTimeMilliseconds=1767225600000 sourceMacAddress=02:00:5e:00:53:00 vlanId=10 sourceIPv6Address=2001:db8::1 destinationIPv4Address=198.51.100.7 protocolIdentifier=6 sourceTransportPort=40000 destinationTransportPort=443 dropReason=NO_RULE ruleId=1000 octetDeltaCount=60 portName=eth1\n\
         2026-01-01T00:00:00.250000Z observationTimeMilliseconds=1767225600250 sourceMacAddress=02:00:5e:00:53:01 vlanId=10 sourceIPv6Address=2001:db8::2 destinationIPv4Address=198.51.100.8 protocolIdentifier=6 sourceTransportPort=40001 destinationTransportPort=443 dropReason=DENY ruleId=1001 octetDeltaCount=100 portName=eth1\n\
         2026-01-01T00:00:00.500000Z observationTimeMilliseconds=1767225600500 sourceMacAddress=02:00:5e:00:53:02 vlanId=10 sourceIPv6Address=2001:db8::3 destinationIPv4Address=198.51.100.9 protocolIdentifier=6 sourceTransportPort=40002 destinationTransportPort=443 dropReason=RATE_LIMIT ruleId=1002 octetDeltaCount=140 portName=eth1\n",
    ),
    (
        "json",
        "{\"timestamp\":\"2026-01-01T00:00:00.000000Z\",\"observationTimeMilliseconds\":1767225600000,\"sourceMacAddress\":\"02:00:5e:00:53:00\",\"vlanId\":10,\"sourceIPv6Address\":\"2001:db8::1\",\"destinationIPv4Address\":\"198.51.100.7\",\"protocolIdentifier\":6,\"sourceTransportPort\":40000,\"destinationTransportPort\":443,\"dropReason\":\"NO_RULE\",\"ruleId\":1000,\"octetDeltaCount\":60,\"portName\":\"eth1\"}\n\
         {\"timestamp\":\"2026-01-01T00:00:00.250000Z\",\"observationTimeMilliseconds\":1767225600250,\"sourceMacAddress\":\"02:00:5e:00:53:01\",\"vlanId\":10,\"sourceIPv6Address\":\"2001:db8::2\",\"destinationIPv4Address\":\"198.51.100.8\",\"protocolIdentifier\":6,\"sourceTransportPort\":40001,\"destinationTransportPort\":443,\"dropReason\":\"DENY\",\"ruleId\":1001,\"octetDeltaCount\":100,\"portName\":\"eth1\"}\n\
         {\"timestamp\":\"2026-01-01T00:00:00.500000Z\",\"observationTimeMilliseconds\":1767225600500,\"sourceMacAddress\":\"02:00:5e:00:53:02\",\"vlanId\":10,\"sourceIPv6Address\":\"2001:db8::3\",\"destinationIPv4Address\":\"198.51.100.9\",\"protocolIdentifier\":6,\"sourceTransportPort\":40002,\"destinationTransportPort\":443,\"dropReason\":\"RATE_LIMIT\",\"ruleId\":1002,\"octetDeltaCount\":140,\"portName\":\"eth1\"}\n",
    ),
    (
        "csv",
        "recordType,timestamp,observationTimeMilliseconds,sourceMacAddress,vlanId,sourceIPv6Address,destinationIPv4Address,protocolIdentifier,sourceTransportPort,destinationTransportPort,dropReason,ruleId,octetDeltaCount,portName,dplogDropped,dplogDropRing,dplogDropReason,dplogFirstDropWallClock,dplogLastDropWallClock\r\n\
         aclDrop,2026-01-01T00:00:00.000000Z,1767225600000,02:00:5e:00:53:00,10,2001:db8::1,198.51.100.7,6,40000,443,NO_RULE,1000,60,eth1,,,,,\r\n\
         aclDrop,2026-01-01T00:00:00.250000Z,1767225600250,02:00:5e:00:53:01,10,2001:db8::2,198.51.100.8,6,40001,443,DENY,1001,100,eth1,,,,,\r\n\
         aclDrop,2026-01-01T00:00:00.500000Z,1767225600500,02:00:5e:00:53:02,10,2001:db8::3,198.51.100.9,6,40002,443,RATE_LIMIT,1002,140,eth1,,,,,\r\n",
    ),
    (
        "rfc5424",
        "<134>1 2026-01-01T00:00:00.000000Z sw1 dplog 7 aclDrop [aclDrop@32473 observationTimeMilliseconds=\"1767225600000\" sourceMacAddress=\"02:00:5e:00:53:00\" vlanId=\"10\" sourceIPv6Address=\"2001:db8::1\" destinationIPv4Address=\"198.51.100.7\" protocolIdentifier=\"6\" sourceTransportPort=\"40000\" destinationTransportPort=\"443\" dropReason=\"NO_RULE\" ruleId=\"1000\" octetDeltaCount=\"60\" portName=\"eth1\"]\n\
         <134>1 2026-01-01T00:00:00.250000Z sw1 dplog 7 aclDrop [aclDrop@32473 observationTimeMilliseconds=\"1767225600250\" sourceMacAddress=\"02:00:5e:00:53:01\" vlanId=\"10\" sourceIPv6Address=\"2001:db8::2\" destinationIPv4Address=\"198.51.100.8\" protocolIdentifier=\"6\" sourceTransportPort=\"40001\" destinationTransportPort=\"443\" dropReason=\"DENY\" ruleId=\"1001\" octetDeltaCount=\"100\" portName=\"eth1\"]\n\
         <134>1 2026-01-01T00:00:00.500000Z sw1 dplog 7 aclDrop [aclDrop@32473 observationTimeMilliseconds=\"1767225600500\" sourceMacAddress=\"02:00:5e:00:53:02\" vlanId=\"10\" sourceIPv6Address=\"2001:db8::3\" destinationIPv4Address=\"198.51.100.9\" protocolIdentifier=\"6\" sourceTransportPort=\"40002\" destinationTransportPort=\"443\" dropReason=\"RATE_LIMIT\" ruleId=\"1002\" octetDeltaCount=\"140\" portName=\"eth1\"]\n",
    ),
    (
        "rfc3164",
        "<134>Jan  1 00:00:00 sw1 dplog: aclDrop observationTimeMilliseconds=1767225600000 sourceMacAddress=02:00:5e:00:53:00 vlanId=10 sourceIPv6Address=2001:db8::1 destinationIPv4Address=198.51.100.7 protocolIdentifier=6 sourceTransportPort=40000 destinationTransportPort=443 dropReason=NO_RULE ruleId=1000 octetDeltaCount=60 portName=eth1\n\
         <134>Jan  1 00:00:00 sw1 dplog: aclDrop observationTimeMilliseconds=1767225600250 sourceMacAddress=02:00:5e:00:53:01 vlanId=10 sourceIPv6Address=2001:db8::2 destinationIPv4Address=198.51.100.8 protocolIdentifier=6 sourceTransportPort=40001 destinationTransportPort=443 dropReason=DENY ruleId=1001 octetDeltaCount=100 portName=eth1\n\
         <134>Jan  1 00:00:00 sw1 dplog: aclDrop observationTimeMilliseconds=1767225600500 sourceMacAddress=02:00:5e:00:53:02 vlanId=10 sourceIPv6Address=2001:db8::3 destinationIPv4Address=198.51.100.9 protocolIdentifier=6 sourceTransportPort=40002 destinationTransportPort=443 dropReason=RATE_LIMIT ruleId=1002 octetDeltaCount=140 portName=eth1\n",
    ),
];

/// The tunnel sessions (`Slot128`): the line time is the declared event
/// time (the end), syslog uses the schema's declared layout (APP-NAME,
/// MSGID by state, SD-ID, parameters).
const TUNNEL_OUT: [(&str, &str); 5] = [
    (
        "text",
        "2026-01-01T00:00:42.123456Z flowStartMilliseconds=1767225600000 flowEndMilliseconds=1767225642123 tunnelId=77 tunnelState=OPEN subscriber=subscriber-0@example.net tunnelSourceIPv4Address=192.0.2.1 tunnelDestinationIPv4Address=192.0.2.100 tunnelPort=4789 vni=5000 sourceIPv6Address=2001:db8:1::1 destinationIPv6Address=2001:db8:2::2 protocolIdentifier=17 encrypted=true mtu=1450 packetDeltaCount=1000 octetDeltaCount=1400000\n\
         2026-01-01T00:00:43.123456Z flowStartMilliseconds=1767225601000 flowEndMilliseconds=1767225643123 tunnelId=78 tunnelState=CLOSED subscriber=subscriber-1@example.net tunnelSourceIPv4Address=192.0.2.1 tunnelDestinationIPv4Address=192.0.2.101 tunnelPort=4789 vni=5001 sourceIPv6Address=2001:db8:1::1 destinationIPv6Address=2001:db8:2::2 protocolIdentifier=17 encrypted=false mtu=1450 packetDeltaCount=2000 octetDeltaCount=2800000\n\
         2026-01-01T00:00:44.123456Z flowStartMilliseconds=1767225602000 flowEndMilliseconds=1767225644123 tunnelId=79 tunnelState=EXPIRED subscriber=subscriber-2@example.net tunnelSourceIPv4Address=192.0.2.1 tunnelDestinationIPv4Address=192.0.2.102 tunnelPort=4789 vni=5002 sourceIPv6Address=2001:db8:1::1 destinationIPv6Address=2001:db8:2::2 protocolIdentifier=17 encrypted=true mtu=1450 packetDeltaCount=3000 octetDeltaCount=4200000\n",
    ),
    (
        "json",
        "{\"timestamp\":\"2026-01-01T00:00:42.123456Z\",\"flowStartMilliseconds\":1767225600000,\"flowEndMilliseconds\":1767225642123,\"tunnelId\":77,\"tunnelState\":\"OPEN\",\"subscriber\":\"subscriber-0@example.net\",\"tunnelSourceIPv4Address\":\"192.0.2.1\",\"tunnelDestinationIPv4Address\":\"192.0.2.100\",\"tunnelPort\":4789,\"vni\":5000,\"sourceIPv6Address\":\"2001:db8:1::1\",\"destinationIPv6Address\":\"2001:db8:2::2\",\"protocolIdentifier\":17,\"encrypted\":true,\"mtu\":1450,\"packetDeltaCount\":1000,\"octetDeltaCount\":1400000}\n\
         {\"timestamp\":\"2026-01-01T00:00:43.123456Z\",\"flowStartMilliseconds\":1767225601000,\"flowEndMilliseconds\":1767225643123,\"tunnelId\":78,\"tunnelState\":\"CLOSED\",\"subscriber\":\"subscriber-1@example.net\",\"tunnelSourceIPv4Address\":\"192.0.2.1\",\"tunnelDestinationIPv4Address\":\"192.0.2.101\",\"tunnelPort\":4789,\"vni\":5001,\"sourceIPv6Address\":\"2001:db8:1::1\",\"destinationIPv6Address\":\"2001:db8:2::2\",\"protocolIdentifier\":17,\"encrypted\":false,\"mtu\":1450,\"packetDeltaCount\":2000,\"octetDeltaCount\":2800000}\n\
         {\"timestamp\":\"2026-01-01T00:00:44.123456Z\",\"flowStartMilliseconds\":1767225602000,\"flowEndMilliseconds\":1767225644123,\"tunnelId\":79,\"tunnelState\":\"EXPIRED\",\"subscriber\":\"subscriber-2@example.net\",\"tunnelSourceIPv4Address\":\"192.0.2.1\",\"tunnelDestinationIPv4Address\":\"192.0.2.102\",\"tunnelPort\":4789,\"vni\":5002,\"sourceIPv6Address\":\"2001:db8:1::1\",\"destinationIPv6Address\":\"2001:db8:2::2\",\"protocolIdentifier\":17,\"encrypted\":true,\"mtu\":1450,\"packetDeltaCount\":3000,\"octetDeltaCount\":4200000}\n",
    ),
    (
        "csv",
        "recordType,timestamp,flowStartMilliseconds,flowEndMilliseconds,tunnelId,tunnelState,subscriber,tunnelSourceIPv4Address,tunnelDestinationIPv4Address,tunnelPort,vni,sourceIPv6Address,destinationIPv6Address,protocolIdentifier,encrypted,mtu,packetDeltaCount,octetDeltaCount,dplogDropped,dplogDropRing,dplogDropReason,dplogFirstDropWallClock,dplogLastDropWallClock\r\n\
         tunnelSession,2026-01-01T00:00:42.123456Z,1767225600000,1767225642123,77,OPEN,subscriber-0@example.net,192.0.2.1,192.0.2.100,4789,5000,2001:db8:1::1,2001:db8:2::2,17,true,1450,1000,1400000,,,,,\r\n\
         tunnelSession,2026-01-01T00:00:43.123456Z,1767225601000,1767225643123,78,CLOSED,subscriber-1@example.net,192.0.2.1,192.0.2.101,4789,5001,2001:db8:1::1,2001:db8:2::2,17,false,1450,2000,2800000,,,,,\r\n\
         tunnelSession,2026-01-01T00:00:44.123456Z,1767225602000,1767225644123,79,EXPIRED,subscriber-2@example.net,192.0.2.1,192.0.2.102,4789,5002,2001:db8:1::1,2001:db8:2::2,17,true,1450,3000,4200000,,,,,\r\n",
    ),
    (
        "rfc5424",
        "<134>1 2026-01-01T00:00:42.123456Z sw1 TUN 7 TOPEN [tun@32473 id=\"77\" sub=\"subscriber-0@example.net\" peer=\"192.0.2.100\" v=\"1\"]\n\
         <134>1 2026-01-01T00:00:43.123456Z sw1 TUN 7 TCLOSE [tun@32473 id=\"78\" sub=\"subscriber-1@example.net\" peer=\"192.0.2.101\" v=\"1\"]\n\
         <134>1 2026-01-01T00:00:44.123456Z sw1 TUN 7 TEXP [tun@32473 id=\"79\" sub=\"subscriber-2@example.net\" peer=\"192.0.2.102\" v=\"1\"]\n",
    ),
    (
        "rfc3164",
        "<134>Jan  1 00:00:42 sw1 TUN: TOPEN id=77 sub=subscriber-0@example.net peer=192.0.2.100\n\
         <134>Jan  1 00:00:43 sw1 TUN: TCLOSE id=78 sub=subscriber-1@example.net peer=192.0.2.101\n\
         <134>Jan  1 00:00:44 sw1 TUN: TEXP id=79 sub=subscriber-2@example.net peer=192.0.2.102\n",
    ),
];

fn text(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap()
}

#[test]
fn a_32_byte_record_in_slot32_in_every_line_format() {
    for (f, want) in LINK_OUT {
        let got = through_slots::<Slot32, _>(f, &[LinkEvent::schema()], &links());
        assert_eq!(text(got), want, "{f}");
    }
}

#[test]
fn a_64_byte_record_in_slot64_and_typed_in_every_line_format() {
    for (f, want) in ACL_OUT {
        let got = through_slots::<Slot64, _>(f, &[AclDrop::schema()], &acls());
        assert_eq!(text(got), want, "{f} in Slot64");
        let got = through_typed::<AclDrop>(f, &acls());
        assert_eq!(text(got), want, "{f} typed");
    }
}

#[test]
fn a_128_byte_record_in_slot128_in_every_line_format() {
    for (f, want) in TUNNEL_OUT {
        let got = through_slots::<Slot128, _>(f, &[TunnelSession::schema()], &tunnels());
        assert_eq!(text(got), want, "{f}");
    }
}

#[test]
fn three_record_sizes_share_one_slot128_ring() {
    // Text with a template per type (`:name` prints an enum's name,
    // `:num` its number).
    let dir = tempfile::tempdir().unwrap();
    let (cfg, path) = config(
        dir.path(),
        "mixed.log",
        "[ring]\nslot_bytes = 128\n[format.templates]\n\
         linkEvent = \"link {ingressInterface} {linkState:name}\"\n\
         aclDrop = \"acl {ruleId} {dropReason:name} {sourceIPv6Address}\"\n\
         tunnelSession = \"tunnel {tunnelId} {subscriber} {tunnelState:num}\"\n",
    );
    let schemas = [
        LinkEvent::schema(),
        AclDrop::schema(),
        TunnelSession::schema(),
    ];
    let logger = cfg.start_slots::<Slot128>(&schemas).unwrap();
    let mut p = logger.producer().unwrap();
    for s in [
        Slot128::pack(&link(0, 2)).unwrap(),
        Slot128::pack(&acl(1, 2)).unwrap(),
        Slot128::pack(&tunnel(2, 3)).unwrap(),
        Slot128::pack(&link(1, 1)).unwrap(),
    ] {
        assert!(p.log(s));
    }
    drop(p);
    let stats = logger.shutdown().unwrap();
    assert_eq!((stats.written_records, stats.dropped()), (4, 0));
    assert_eq!(
        std::fs::read_to_string(path).unwrap(),
        "link 3 DOWN\nacl 1001 DENY 2001:db8::2\ntunnel 79 subscriber-2@example.net 3\nlink 4 UP\n"
    );
}

// ------------------------------------------------------------------ binary

/// The binary log decodes to the schemas (layouts) and the exact record
/// bytes that were logged.
fn check_binary<R: HasSchema>(file: &[u8], recs: &[R]) {
    let d = dplog::formatters::binary::decode(file);
    assert_eq!(d.stopped, None);
    let s = R::schema();
    assert_eq!(d.schemas.len(), 1);
    let got = &d.schemas[0];
    assert_eq!(
        (got.id(), got.name(), got.size(), got.fields()),
        (s.id(), s.name(), s.size(), s.fields())
    );
    let want: Vec<(usize, &[u8])> = recs.iter().map(|r| (0, r.as_bytes())).collect();
    assert_eq!(d.records, want);
}

#[test]
fn every_slot_size_and_the_typed_logger_write_binary_logs_that_decode_to_the_records() {
    let f = "binary";
    check_binary(
        &through_slots::<Slot32, _>(f, &[LinkEvent::schema()], &links()),
        &links(),
    );
    check_binary(
        &through_slots::<Slot64, _>(f, &[AclDrop::schema()], &acls()),
        &acls(),
    );
    check_binary(&through_typed::<AclDrop>(f, &acls()), &acls());
    check_binary(
        &through_slots::<Slot128, _>(f, &[TunnelSession::schema()], &tunnels()),
        &tunnels(),
    );
}

// ------------------------------------------------------------------- IPFIX

/// One field specifier of a template: element id (enterprise bit
/// cleared), length, enterprise number.
type Spec = (u16, u16, Option<u32>);

/// A decoded IPFIX message (RFC 7011 section 3): header, templates by id,
/// data records as their fields' bytes.
#[derive(Debug, PartialEq)]
struct Message {
    export_time: u32,
    sequence: u32,
    domain: u32,
    templates: Vec<(u16, Vec<Spec>)>,
    data: Vec<(u16, Vec<Vec<u8>>)>,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

/// Decodes a stream of IPFIX messages, asserting every length adds up.
fn decode_ipfix(mut b: &[u8]) -> Vec<Message> {
    let mut out = Vec::new();
    let mut templates: Vec<(u16, Vec<Spec>)> = Vec::new();
    while !b.is_empty() {
        assert_eq!(be16(b, 0), 10, "version");
        let len = be16(b, 2) as usize;
        let (msg, rest) = b.split_at(len);
        let mut m = Message {
            export_time: be32(msg, 4),
            sequence: be32(msg, 8),
            domain: be32(msg, 12),
            templates: Vec::new(),
            data: Vec::new(),
        };
        let mut p = 16;
        while p < len {
            let (id, slen) = (be16(msg, p), be16(msg, p + 2) as usize);
            let set = &msg[p + 4..p + slen];
            if id == 2 {
                let mut q = 0;
                while q + 4 <= set.len() {
                    let (tid, n) = (be16(set, q), be16(set, q + 2));
                    q += 4;
                    let mut specs = Vec::new();
                    for _ in 0..n {
                        let (ie, flen) = (be16(set, q), be16(set, q + 2));
                        q += 4;
                        let pen = (ie & 0x8000 != 0).then(|| {
                            q += 4;
                            be32(set, q - 4)
                        });
                        specs.push((ie & 0x7fff, flen, pen));
                    }
                    templates.retain(|(t, _)| *t != tid);
                    templates.push((tid, specs.clone()));
                    m.templates.push((tid, specs));
                }
                assert_eq!(q, set.len(), "template set padding");
            } else {
                assert!(id >= 256, "set id {id}");
                let specs = &templates.iter().find(|(t, _)| *t == id).unwrap().1;
                let mut q = 0;
                let rec_len: usize = specs.iter().map(|s| s.1 as usize).sum();
                while q + rec_len <= set.len() {
                    let mut fields = Vec::new();
                    for s in specs {
                        fields.push(set[q..q + s.1 as usize].to_vec());
                        q += s.1 as usize;
                    }
                    m.data.push((id, fields));
                }
                assert_eq!(q, set.len(), "data set padding");
            }
            p += slen;
        }
        assert_eq!(p, len);
        out.push(m);
        b = rest;
    }
    out
}

fn be(v: u64, n: usize) -> Vec<u8> {
    v.to_be_bytes()[8 - n..].to_vec()
}

const PEN: Option<u32> = Some(32473);

/// Every format but the line ones through IPFIX: one message (the three
/// records are published at once), the template, every field's bytes.
fn check_ipfix(file: &[u8], first_ms: u64, specs: Vec<Spec>, rows: Vec<Vec<Vec<u8>>>) {
    let msgs = decode_ipfix(file);
    assert_eq!(
        msgs,
        [Message {
            export_time: (first_ms / 1000) as u32,
            sequence: 0,
            domain: 1,
            templates: vec![(256, specs)],
            data: rows.into_iter().map(|r| (256, r)).collect(),
        }]
    );
}

#[test]
fn every_slot_size_and_the_typed_logger_export_ipfix_with_enterprise_elements() {
    let ms = |t: u64| be(t / 1_000_000, 8);
    // linkEvent: the event time has no IANA element, so it is the stamp
    // (323) and not exported again; fields without an element go out as
    // enterprise elements whose ids derive from their names and types.
    let link = |i: usize| LinkEvent::schema().enterprise_ie(i).unwrap();
    let acl = |i: usize| AclDrop::schema().enterprise_ie(i).unwrap();
    let tun = |i: usize| TunnelSession::schema().enterprise_ie(i).unwrap();
    let rows = links()
        .iter()
        .map(|r| {
            vec![
                ms(r.time_ns),
                be(r.if_index.into(), 4),
                be(r.speed_mbps.into(), 4),
                vec![r.state],
                vec![if r.full_duplex != 0 { 1 } else { 2 }],
                be(r.vlan.into(), 2),
                be(r.mtu.into(), 4),
            ]
        })
        .collect();
    check_ipfix(
        &through_slots::<Slot32, _>("ipfix", &[LinkEvent::schema()], &links()),
        T0 / 1_000_000,
        vec![
            (323, 8, None),
            (10, 4, None),
            (link(2), 4, PEN),
            (link(3), 1, PEN),
            (link(4), 1, PEN),
            (58, 2, None),
            (link(6), 4, PEN),
        ],
        rows,
    );

    // aclDrop: the event time is element 323 in its place.
    let acl_specs = vec![
        (323, 8, None),
        (56, 6, None),
        (58, 2, None),
        (27, 16, None),
        (12, 4, None),
        (4, 1, None),
        (7, 2, None),
        (11, 2, None),
        (acl(8), 1, PEN),
        (acl(9), 4, PEN),
        (1, 4, None),
        (acl(11), 6, PEN),
    ];
    let acl_rows = || -> Vec<Vec<Vec<u8>>> {
        acls()
            .iter()
            .map(|r| {
                vec![
                    ms(r.time_ns),
                    r.src_mac.to_vec(),
                    be(r.vlan.into(), 2),
                    r.src_addr.to_vec(),
                    be(r.dst_addr.into(), 4),
                    vec![r.protocol],
                    be(r.src_port.into(), 2),
                    be(r.dst_port.into(), 2),
                    vec![r.reason],
                    be(r.rule.into(), 4),
                    be(r.octets.into(), 4),
                    r.port_name.to_vec(),
                ]
            })
            .collect()
    };
    check_ipfix(
        &through_slots::<Slot64, _>("ipfix", &[AclDrop::schema()], &acls()),
        T0 / 1_000_000,
        acl_specs.clone(),
        acl_rows(),
    );
    check_ipfix(
        &through_typed::<AclDrop>("ipfix", &acls()),
        T0 / 1_000_000,
        acl_specs,
        acl_rows(),
    );

    // tunnelSession: the declared event time (the end, element 153) is the
    // stamp and is also exported in its place.
    let rows = tunnels()
        .iter()
        .map(|r| {
            vec![
                ms(r.end_ns),
                ms(r.start_ns),
                ms(r.end_ns),
                be(r.tunnel_id.into(), 4),
                be(r.state.into(), 2),
                r.subscriber.to_vec(),
                be(r.outer_src.into(), 4),
                be(r.outer_dst.into(), 4),
                be(r.outer_port.into(), 2),
                be(r.vni.into(), 4),
                r.inner_src.to_vec(),
                r.inner_dst.to_vec(),
                vec![r.protocol],
                vec![if r.encrypted != 0 { 1 } else { 2 }],
                be(r.mtu.into(), 2),
                be(r.packets, 8),
                be(r.octets, 8),
            ]
        })
        .collect();
    check_ipfix(
        &through_slots::<Slot128, _>("ipfix", &[TunnelSession::schema()], &tunnels()),
        tunnels()[0].end_ns / 1_000_000,
        vec![
            (323, 8, None),
            (152, 8, None),
            (153, 8, None),
            (tun(2), 4, PEN),
            (tun(3), 2, PEN),
            (tun(4), 32, PEN),
            (tun(5), 4, PEN),
            (tun(6), 4, PEN),
            (tun(7), 2, PEN),
            (tun(8), 4, PEN),
            (27, 16, None),
            (28, 16, None),
            (4, 1, None),
            (tun(12), 1, PEN),
            (tun(13), 2, PEN),
            (2, 8, None),
            (1, 8, None),
        ],
        rows,
    );
}

// --------------------------------------------------------- refused configs

/// A 136-byte record: larger than every slot.
#[repr(C)]
#[derive(Clone, Copy)]
struct Big {
    header: RecordHeader,
    words: [u64; 16],
}

impl Record for Big {
    const SCHEMA_ID: u16 = 304;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

fn big_schema() -> Schema {
    schema!(Big, id = 304, name = "bigRecord", [words => "words": Bytes, ie 0;]).unwrap()
}

fn refused(r: Result<impl Sized, ConfigError>) -> String {
    match r {
        Err(ConfigError::Parse(m)) => m,
        Err(e) => panic!("expected a parse error, got {e}"),
        Ok(_) => panic!("expected a refusal"),
    }
}

#[test]
fn a_record_larger_than_its_slot_is_refused_naming_type_sizes_and_slot_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, path) = config(dir.path(), "never.log", "");
    let m = refused(cfg.start_slots::<Slot32>(&[LinkEvent::schema(), AclDrop::schema()]));
    assert_eq!(
        m,
        "record type aclDrop is 64 bytes: it does not fit a 32-byte slot (set [ring] slot_bytes = 64)"
    );
    let m = refused(cfg.start_slots::<Slot64>(&[TunnelSession::schema()]));
    assert_eq!(
        m,
        "record type tunnelSession is 128 bytes: it does not fit a 64-byte slot (set [ring] slot_bytes = 128)"
    );
    let m = refused(cfg.start_slots::<Slot128>(&[&big_schema()]));
    assert_eq!(
        m,
        "record type bigRecord is 136 bytes: it does not fit a 128-byte slot \
         (no slot is that large: [ring] slot_bytes is at most 128)"
    );
    assert!(!path.exists(), "a refused logger creates no file");
    // What start_slots refuses, packing refuses too.
    let e = Slot32::pack(&acl(0, 1)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "record of 64 bytes does not fit a 32-byte slot"
    );
}

#[test]
fn a_slot_bytes_that_is_not_the_programs_or_not_a_slot_size_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, path) = config(dir.path(), "never.log", "[ring]\nslot_bytes = 128\n");
    let m = refused(cfg.start_slots::<Slot64>(&[AclDrop::schema()]));
    assert_eq!(
        m,
        "[ring] slot_bytes = 128, but this program's rings have 64-byte slots"
    );
    let (cfg, _) = config(dir.path(), "never.log", "[ring]\nslot_bytes = 64\n");
    let m = refused(cfg.start_slots::<Slot32>(&[LinkEvent::schema()]));
    assert_eq!(
        m,
        "[ring] slot_bytes = 64, but this program's rings have 32-byte slots"
    );
    assert!(!path.exists(), "a refused logger creates no file");
    // Values that are no slot size are refused when the file is read, at
    // their line.
    for v in ["48", "0", "256"] {
        let t = format!("[format]\ntype = \"json\"\n[ring]\nslot_bytes = {v}\n");
        let m = refused(LogConfig::from_toml_str(&t));
        assert_eq!(
            m,
            format!(
                "config line 4, column 1: [ring] slot_bytes = {v}: must be 32, 64 or 128\n  |\n\
                 4 | slot_bytes = {v}\n  | ^^^^^^^^^^"
            ),
        );
    }
    let m = refused(LogConfig::from_toml_str("[ring]\nslot_bytes = -64\n"));
    assert!(
        m.starts_with(
            "config line 2, column 14: [ring] slot_bytes: invalid value: integer `-64`, \
             expected usize\n"
        ),
        "{m}"
    );
    let m = refused(LogConfig::from_toml_str("[ring]\nslot_bytes = \"64\"\n"));
    assert!(
        m.contains("line 2") && m.contains("invalid type: string \"64\""),
        "{m}"
    );
    // A configuration built in code is checked at start.
    let mut cfg = cfg;
    cfg.ring.slot_bytes = Some(96);
    let m = refused(cfg.start_slots::<Slot64>(&[AclDrop::schema()]));
    assert_eq!(m, "[ring] slot_bytes = 96: must be 32, 64 or 128");
    for ok in [32, 64, 128] {
        let t = format!("[ring]\nslot_bytes = {ok}\n");
        assert!(LogConfig::from_toml_str(&t).is_ok(), "{ok}");
    }
}

// ------------------------------------------------- priorities under degrade

/// A sink that holds its first batch until released, so the consumer
/// stops draining and the ring fills exactly as the test logs; then it
/// writes through to the file sink the configuration built.
struct Gate {
    inner: dplog::sinks::BoxSink,
    entered: Option<std::sync::mpsc::Sender<()>>,
    release: std::sync::mpsc::Receiver<()>,
}

impl dplog::Sink for Gate {
    fn write_batch(&mut self, batch: &[u8]) -> Result<dplog::Accepted, dplog::SinkError> {
        if let Some(tx) = self.entered.take() {
            tx.send(()).unwrap();
            // The test releases the gate once the ring is where it wants
            // it (or gives up, dropping the sender).
            let _ = self.release.recv();
        }
        self.inner.write_batch(batch)
    }
    fn flush(&mut self) -> Result<(), dplog::SinkError> {
        self.inner.flush()
    }
    fn close(&mut self) -> Result<(), dplog::SinkError> {
        self.inner.close()
    }
}

/// How long the test waits for the consumer to reach the gate: a guard
/// against a hang, not a speed assertion.
const GATE_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// A `degrade` logger of 16-slot rings over `schemas`, as `start_slots`
/// (or `start` for one typed record) builds it from `ring` (extra `[ring]`
/// keys and tables) but with the gated file sink, its plug record logged
/// and held by the consumer in the gate: the ring is empty, nothing drains
/// it until `release` is sent.
#[allow(clippy::type_complexity)]
fn gated<R: dplog::RecordBytes>(
    dir: &Path,
    ring: &str,
    schemas: &[&Schema],
    plug: R,
    rules: dplog::RecordRules<R>,
) -> (
    dplog::Logger<R>,
    dplog::LogProducer<R>,
    std::sync::mpsc::Sender<()>,
    std::path::PathBuf,
) {
    // A short line per record; a template names only a logger's schemas.
    let mut templates = "linkEvent = \"link {ingressInterface} {linkState:name}\"\n".to_string();
    if schemas.iter().any(|s| s.name() == "aclDrop") {
        templates.push_str("aclDrop = \"acl {ruleId}\"\n");
    }
    let (cfg, path) = config(
        dir,
        "degrade.log",
        &format!(
            "[ring]\ncapacity = 16\nbackpressure = \"degrade\"\n{ring}\n[format.templates]\n{templates}"
        ),
    );
    let mut lc = cfg.logger_config();
    lc.schemas = cfg.schema_table(schemas).unwrap();
    let (entered_tx, entered) = std::sync::mpsc::channel();
    let (release, release_rx) = std::sync::mpsc::channel();
    let sink = Gate {
        inner: cfg.sink.build().unwrap(),
        entered: Some(entered_tx),
        release: release_rx,
    };
    let logger =
        dplog::Logger::start_with_rules(lc, rules, cfg.format.formatter(schemas).unwrap(), sink)
            .unwrap();
    let mut p = logger.producer().unwrap();
    assert!(p.log(plug));
    entered
        .recv_timeout(GATE_WAIT)
        .expect("the consumer reached the gate");
    (logger, p, release, path)
}

/// The file without the in-band drop reports, and the reports up to their
/// wall-clock times.
fn lines_and_report(path: &Path) -> (String, Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap();
    let (reports, lines): (Vec<&str>, Vec<&str>) =
        text.lines().partition(|l| l.starts_with("dplog: "));
    let mut out = lines.join("\n");
    out.push('\n');
    let reports = reports
        .iter()
        .map(|r| r.split("; wall clock").next().unwrap().to_string())
        .collect();
    (out, reports)
}

fn slot<R: Record>(r: R) -> Slot64 {
    Slot64::pack(&r).unwrap()
}

/// 13 link-ups fill the empty 16-slot ring to its 80 % high watermark
/// (13 slots): every further record is kept only at priority 2 or more.
fn fill_to_the_watermark(p: &mut dplog::LogProducer<Slot64>) {
    for i in 1..=13 {
        assert!(p.log(slot(link(i, 1))), "below the watermark: {i}");
    }
    assert!(!p.degraded());
}

const FILLED: &str = "link 3 UP\nlink 4 UP\nlink 5 UP\nlink 6 UP\nlink 7 UP\nlink 8 UP\n\
                      link 9 UP\nlink 10 UP\nlink 11 UP\nlink 12 UP\nlink 13 UP\nlink 14 UP\n\
                      link 15 UP\nlink 16 UP\n";

#[test]
fn ring_priorities_from_config_and_the_schemas_rule_decide_what_degrade_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let schemas = [LinkEvent::schema(), AclDrop::schema()];
    // aclDrop declares no priority (1); config raises it to 3. linkEvent
    // keeps its schema's rule: DOWN 3, UP 1.
    let (logger, mut p, release, path) = gated(
        dir.path(),
        "[ring.priorities]\naclDrop = 3",
        &schemas,
        slot(link(0, 1)),
        dplog::RecordRules::own(),
    );
    fill_to_the_watermark(&mut p);
    assert!(!p.log(slot(link(14, 1))), "UP (1) shed");
    assert!(p.degraded());
    assert!(p.log(slot(acl(0, 2))), "aclDrop (3 from config) kept");
    assert!(p.log(slot(link(15, 2))), "DOWN (3 by the schema) kept");
    assert!(!p.log(slot(link(16, 1))), "UP (1) shed");
    assert!(p.log(slot(acl(1, 2))), "aclDrop kept: the ring is full now");
    assert!(
        !p.log(slot(acl(2, 2))),
        "full: dropped whatever its priority"
    );
    release.send(()).unwrap();
    drop(p);
    let stats = logger.shutdown().unwrap();
    assert_eq!(
        (
            stats.produced,
            stats.written_records,
            stats.dropped_degraded,
            stats.dropped_full
        ),
        (20, 17, 2, 1)
    );
    let (lines, reports) = lines_and_report(&path);
    assert_eq!(lines, format!("{FILLED}acl 1000\nlink 18 DOWN\nacl 1001\n"));
    // The report follows the last record written before it, and gives its
    // event time (read from the slot with the schema's event-time field).
    // One report per reason, each with its own count.
    assert_eq!(
        reports,
        [
            "dplog: 1 record dropped on ring 0 (full) after the record of 2026-01-01T00:00:00.250000000Z",
            "dplog: 2 records dropped on ring 0 (degraded) after the record of 2026-01-01T00:00:00.250000000Z"
        ]
    );
}

#[test]
fn the_schemas_own_priority_rule_decides_what_degrade_keeps_without_config() {
    let dir = tempfile::tempdir().unwrap();
    let schemas = [LinkEvent::schema(), AclDrop::schema()];
    let (logger, mut p, release, path) = gated(
        dir.path(),
        "",
        &schemas,
        slot(link(0, 1)),
        dplog::RecordRules::own(),
    );
    fill_to_the_watermark(&mut p);
    assert!(!p.log(slot(link(14, 1))), "UP (1) shed");
    assert!(!p.log(slot(acl(0, 2))), "aclDrop (1, no rule) shed");
    assert!(p.log(slot(link(15, 2))), "DOWN (3) kept");
    assert!(!p.log(slot(acl(1, 2))), "aclDrop shed");
    assert!(p.log(slot(link(16, 2))), "DOWN kept");
    assert!(p.log(slot(link(17, 2))), "DOWN kept: the ring is full now");
    assert!(!p.log(slot(link(18, 2))), "full");
    release.send(()).unwrap();
    drop(p);
    let stats = logger.shutdown().unwrap();
    assert_eq!(
        (
            stats.produced,
            stats.written_records,
            stats.dropped_degraded,
            stats.dropped_full
        ),
        (21, 17, 3, 1)
    );
    let (lines, reports) = lines_and_report(&path);
    assert_eq!(
        lines,
        format!("{FILLED}link 18 DOWN\nlink 19 DOWN\nlink 20 DOWN\n")
    );
    assert_eq!(
        reports,
        [
            "dplog: 1 record dropped on ring 0 (full) after the record of 2026-01-01T00:00:00.025500000Z",
            "dplog: 3 records dropped on ring 0 (degraded) after the record of 2026-01-01T00:00:00.025500000Z"
        ]
    );
}

#[test]
fn ring_priorities_from_config_apply_to_a_typed_logger() {
    let dir = tempfile::tempdir().unwrap();
    let (logger, mut p, release, path) = gated(
        dir.path(),
        "[ring.priorities]\nlinkEvent = 2",
        &[LinkEvent::schema()],
        link(0, 1),
        dplog::RecordRules::by_schema(),
    );
    for i in 1..=13 {
        assert!(p.log(link(i, 1)));
    }
    // Degraded now; every link event has priority 2 from config, the
    // minimum kept, until the ring is full.
    for i in 14..=16 {
        assert!(p.log(link(i, 1)), "{i}");
    }
    assert!(p.degraded());
    assert!(!p.log(link(17, 1)), "full");
    release.send(()).unwrap();
    drop(p);
    let stats = logger.shutdown().unwrap();
    assert_eq!(
        (
            stats.written_records,
            stats.dropped_degraded,
            stats.dropped_full
        ),
        (17, 0, 1)
    );
    let (lines, reports) = lines_and_report(&path);
    assert_eq!(
        lines,
        format!("{FILLED}link 17 UP\nlink 18 UP\nlink 19 UP\n")
    );
    // The schema's event-time field places the report after the last
    // record written before the drop.
    assert_eq!(
        reports,
        ["dplog: 1 record dropped on ring 0 (full) after the record of 2026-01-01T00:00:00.024000000Z"]
    );
}

#[test]
fn the_schemas_own_priority_rule_applies_to_a_typed_logger() {
    let dir = tempfile::tempdir().unwrap();
    let (logger, mut p, release, _path) = gated(
        dir.path(),
        "",
        &[LinkEvent::schema()],
        link(0, 1),
        dplog::RecordRules::by_schema(),
    );
    for i in 1..=13 {
        assert!(p.log(link(i, 1)));
    }
    assert!(!p.log(link(14, 1)), "UP (1) shed");
    assert!(p.log(link(15, 2)), "DOWN (3 by the schema) kept");
    release.send(()).unwrap();
    drop(p);
    logger.shutdown().unwrap();
}

// ------------------------------------------------ a mistyped schema id

/// A record type whose `Record::SCHEMA_ID` (600) is not its schema's id
/// (601): a typo the two places invite.
#[repr(C)]
#[derive(Clone, Copy)]
struct Mistyped {
    header: RecordHeader,
    time_ns: u64,
}

impl Record for Mistyped {
    const SCHEMA_ID: u16 = 600;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 = 16 bytes without padding; the schema is
// built from its own offset_of! values and size_of.
unsafe impl HasSchema for Mistyped {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(Mistyped, id = 601, name = "mistyped", [
                time_ns => "eventTime": NsTimestamp, ie 0;
            ])
            .unwrap()
        })
    }
}

/// Every record of such a type would be written under id 600, which the
/// formatter does not know, and none printed: the logger refuses to
/// start, naming both ids, and creates no file.
/// The messages of `start` and `start_consumers` refusing record type
/// `R` with a file sink; checks that each is a `ConfigError::Parse` and
/// that no file was created.
fn refused_at_start<R: HasSchema>() -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.log");
    let cfg = LogConfig::from_toml_str(&format!(
        "[sink]\ntype = \"file\"\npath = \"{}\"\n",
        path.display()
    ))
    .unwrap();
    let ms = [
        cfg.start::<R>().expect_err("start refused"),
        cfg.start_consumers::<R>()
            .expect_err("start_consumers refused"),
    ]
    .into_iter()
    .map(|e| {
        let m = e.to_string();
        assert!(matches!(e, ConfigError::Parse(_)), "{m}");
        m
    })
    .collect();
    assert!(!path.exists(), "a refused logger creates no file");
    ms
}

#[test]
fn a_record_whose_schema_id_is_not_its_schemas_is_refused_at_start() {
    for m in refused_at_start::<Mistyped>() {
        assert!(
            m.contains("SCHEMA_ID is 600") && m.contains("\"mistyped\" has id 601"),
            "{m}"
        );
    }
}

/// A record type above a slot's 128 bytes (header included): 8 + 8 +
/// 120 = 136 bytes.
#[repr(C)]
#[derive(Clone, Copy)]
struct TooBig {
    header: RecordHeader,
    time_ns: u64,
    payload: [u8; 120],
}

impl Record for TooBig {
    const SCHEMA_ID: u16 = 602;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 120 = 136 bytes without padding; the schema
// is built from its own offset_of! values and size_of.
unsafe impl HasSchema for TooBig {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(TooBig, id = 602, name = "tooBig", [
                time_ns => "eventTime": NsTimestamp, ie 0;
            ])
            .unwrap()
        })
    }
}

/// A record type larger than a ring slot is refused when the logger
/// starts, naming its size and the limit, before the sink opens (no file
/// left behind), not at its first producer.
#[test]
fn a_record_type_above_128_bytes_is_refused_at_start() {
    for m in refused_at_start::<TooBig>() {
        assert!(
            m.contains("136 bytes, larger than the 128-byte limit"),
            "{m}"
        );
    }
}

/// An archive sink's `index` naming a field no record type has (a typo)
/// is refused when the logger starts, before the archive is opened.
#[test]
fn an_archive_index_naming_no_field_of_the_record_types_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = |index: &str| {
        LogConfig::from_toml_str(&format!(
            "[format]\ntype = \"binary\"\n[sink]\ntype = \"archive\"\ndir = \"{}\"\nindex = [{index}]\n",
            dir.path().display()
        ))
        .unwrap()
    };
    let e = cfg("\"ingressInterfac\"")
        .start_slots::<Slot32>(&[LinkEvent::schema()])
        .expect_err("a typo'd index is refused");
    let m = e.to_string();
    assert!(
        m.contains("[sink] index") && m.contains("ingressInterfac") && m.contains("linkEvent ("),
        "{m}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing opened"
    );
    // The field the type has: started, and shut down cleanly.
    let logger = cfg("\"ingressInterface\"")
        .start_slots::<Slot32>(&[LinkEvent::schema()])
        .unwrap();
    assert!(logger.shutdown().is_ok());
}

/// The same typo in a `[[sink]]` set is named by the set's table and
/// number, as a parse error there is (`[[sink]] #2 index`), not as a
/// `[sink]` table the file does not have.
#[test]
fn an_archive_index_typo_in_a_sink_set_names_the_sink_of_the_set() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig::from_toml_str(&format!(
        "[format]\ntype = \"binary\"\n[[sink]]\ntype = \"file\"\npath = \"{d}/a.bin\"\n[[sink]]\ntype = \"archive\"\ndir = \"{d}\"\nindex = [\"ingressInterfac\"]\n",
        d = dir.path().display()
    ))
    .unwrap();
    let m = cfg
        .start_slots::<Slot32>(&[LinkEvent::schema()])
        .expect_err("a typo'd index is refused")
        .to_string();
    assert!(
        m.contains("[[sink]] #2 index: ") && m.contains("ingressInterfac"),
        "{m}"
    );
    assert!(!m.contains("[sink] index"), "{m}");
}
