//! Logging your own record type from Rust: a software switch's ACL drops.
//!
//! ```sh
//! cargo run --example acl_drop
//! ```
//!
//! dplog knows no record type of its own. A record is a `#[repr(C)]`
//! struct that starts with a [`RecordHeader`], implements [`Record`] (its
//! schema id) and [`HasSchema`] (its [`Schema`]: every field's name,
//! offset, size and kind, built by the [`schema!`] macro from the struct
//! itself). The formatters compile the schema once; every format (text,
//! JSON, CSV, syslog, IPFIX, binary) then works for the new type.
//!
//! The example runs two loggers from TOML embedded below:
//! 1. `LogConfig::start::<AclDrop>()`: rings that carry one record type,
//!    written as JSON Lines;
//! 2. `LogConfig::start_slots::<Slot64>(&[..])`: rings of 64-byte slots
//!    that carry ACL drops and link events mixed, each type written with
//!    its own text template.
//!
//! and prints what each wrote.

use std::sync::OnceLock;

use dplog::config::LogConfig;
use dplog::schema::{HasSchema, Schema};
use dplog::{schema, Record, RecordHeader, Slot64, PRIORITY_HIGH, PRIORITY_NORMAL};

/// Why the switch dropped a packet; logged as a one-byte enum field whose
/// values print by name (`"DENY"`), or in decimal for a value without one.
#[repr(u8)]
#[derive(Clone, Copy)]
enum DropReason {
    /// No rule matched and the default action is drop.
    NoRule = 1,
    /// A deny rule matched.
    Deny = 2,
    /// A rate limit was exceeded.
    RateLimit = 3,
}

/// One ACL drop: 56 bytes, so it also fits a 64-byte slot.
///
/// Rules for a record type:
/// - `#[repr(C)]`, first field a [`RecordHeader`] (length and schema id, so
///   a consumer or a binary log tells record types apart);
/// - no implicit padding: every byte belongs to a field (`_pad` fills the
///   tail up to the struct's 8-byte alignment), so every byte written to
///   the ring is initialised;
/// - plain values only (integers, byte arrays), no pointers: a producer
///   copies the record into the ring by value;
/// - integers in host byte order; IPv6 and MAC addresses as their 16 and 6
///   bytes in network order, as on the wire.
#[repr(C)]
#[derive(Clone, Copy)]
struct AclDrop {
    header: RecordHeader,
    /// `dplog::tsc::now_ticks()` when the packet was dropped: TSC ticks,
    /// the cheapest clock on a forwarding core. The consumer calibrates the
    /// TSC against the wall clock and every format prints the time.
    ticks: u64,
    src_addr: [u8; 16],
    rule_id: u32,
    src_port: u16,
    dst_port: u16,
    src_mac: [u8; 6],
    vlan: u16,
    reason: u8,
    protocol: u8,
    _pad: [u8; 6],
}

// The layout the SAFETY comment below relies on.
const _: () = assert!(std::mem::size_of::<AclDrop>() == 56);

impl Record for AclDrop {
    /// Unique among the record types of one logger (and of one binary
    /// log); the NAT package uses 1..=5.
    const SCHEMA_ID: u16 = 300;

    fn header(&self) -> &RecordHeader {
        &self.header
    }
    // No `priority()`: under `backpressure = "degrade"` the logger reads
    // the schema's rule below (denies outrank the rest) from the record's
    // bytes; `[ring.priorities]` overrides it per type.
}

// SAFETY: AclDrop is repr(C) and its 8 + 8 + 16 + 4 + 2 + 2 + 6 + 2 + 1 + 1
// + 6 = 56 bytes have no padding (size asserted above); the schema is
// built from the struct's own offset_of! values and size_of, so it
// describes it.
unsafe impl HasSchema for AclDrop {
    fn schema() -> &'static Schema {
        static SCHEMA: OnceLock<Schema> = OnceLock::new();
        SCHEMA.get_or_init(|| {
            // One line per field, in output order: Rust field => output
            // name: kind, IANA IPFIX element id (0: none; IPFIX then
            // exports it as an enterprise-specific element).
            schema!(AclDrop, id = AclDrop::SCHEMA_ID, name = "aclDrop", [
                ticks => "dropTime": TscTimestamp, ie 0;
                src_mac => "sourceMacAddress": Mac, ie 56;
                vlan => "vlanId": U16, ie 58;
                src_addr => "sourceIPv6Address": Ipv6, ie 27;
                protocol => "protocolIdentifier": Protocol, ie 4;
                src_port => "sourceTransportPort": Port, ie 7;
                dst_port => "destinationTransportPort": Port, ie 11;
                reason => "dropReason": Enum, ie 0,
                    names &[(1, "NO_RULE"), (2, "DENY"), (3, "RATE_LIMIT")];
                rule_id => "ruleId": U32, ie 0;
            ])
            // A bad schema (kind and size disagree, fields overlap, ...) is
            // an error naming the field, at first use.
            .expect("the aclDrop schema")
            // Denies outrank other drops under `degrade`.
            .with_priority(
                PRIORITY_NORMAL,
                Some(("dropReason", &[(DropReason::Deny as u64, PRIORITY_HIGH)])),
            )
            .expect("dropReason is an integer field")
        })
    }
}

impl AclDrop {
    /// A drop stamped now.
    fn new(src: [u8; 16], src_port: u16, reason: DropReason, rule_id: u32) -> Self {
        AclDrop {
            header: RecordHeader::of::<AclDrop>(),
            ticks: dplog::tsc::now_ticks(),
            src_addr: src,
            rule_id,
            src_port,
            dst_port: 443,
            src_mac: [0x02, 0x00, 0x5e, 0x00, 0x53, src[15]],
            vlan: 10,
            reason: reason as u8,
            protocol: 6,
            _pad: [0; 6],
        }
    }
}

/// A second record type for the mixed ring: a port's link going up or
/// down. 24 bytes.
#[repr(C)]
#[derive(Clone, Copy)]
struct LinkEvent {
    header: RecordHeader,
    ticks: u64,
    port: u32,
    up: u8,
    _pad: [u8; 3],
}

const _: () = assert!(std::mem::size_of::<LinkEvent>() == 24);

impl Record for LinkEvent {
    const SCHEMA_ID: u16 = 301;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 4 + 1 + 3 = 24 bytes without padding (size
// asserted above); the schema is built from the struct's own offset_of!.
unsafe impl HasSchema for LinkEvent {
    fn schema() -> &'static Schema {
        static SCHEMA: OnceLock<Schema> = OnceLock::new();
        SCHEMA.get_or_init(|| {
            schema!(LinkEvent, id = LinkEvent::SCHEMA_ID, name = "linkEvent", [
                ticks => "eventTime": TscTimestamp, ie 0;
                port => "port": U32, ie 0;
                up => "up": Bool, ie 0;
            ])
            .expect("the linkEvent schema")
        })
    }
}

/// `2001:db8::<last>`.
fn v6(last: u8) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    a[15] = last;
    a
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;

    // 1. One record type per ring: `start::<AclDrop>()`.
    let path = dir.path().join("acl.jsonl");
    let cfg = LogConfig::from_toml_str(&format!(
        r#"
        [ring]
        capacity = 1024          # slots per producer ring
        [format]
        type = "json"            # or text, csv, rfc5424, rfc3164, ipfix, binary
        [sink]
        type = "file"
        path = "{}"
        "#,
        path.display()
    ))?;
    // Checks the settings, compiles the format for AclDrop's schema, opens
    // the file and starts the consumer thread.
    let logger = cfg.start::<AclDrop>()?;
    // One producer (one SPSC ring) per forwarding core.
    let mut producer = logger.producer()?;
    producer.log(AclDrop::new(v6(1), 40000, DropReason::Deny, 1000));
    producer.log(AclDrop::new(v6(2), 40001, DropReason::NoRule, 0));
    producer.log(AclDrop::new(v6(3), 40002, DropReason::RateLimit, 17));
    drop(producer);
    // Drains every ring, writes, fsyncs and returns the counters.
    let stats = logger.shutdown().map_err(|(_, e)| e)?;
    println!(
        "== start::<AclDrop>(), json: {} records written",
        stats.written_records
    );
    print!("{}", std::fs::read_to_string(&path)?);

    // 2. Two record types in one ring of 64-byte slots.
    let path = dir.path().join("switch.log");
    let cfg = LogConfig::from_toml_str(&format!(
        r#"
        [ring]
        slot_bytes = 64          # must match the program's Slot64
        [format]
        type = "text"
        [format.templates]       # by schema name; others: name=value pairs
        aclDrop = "{{dropTime:rfc3339}} DROP {{dropReason:name}} rule {{ruleId}} [{{sourceIPv6Address}}]:{{sourceTransportPort}} vlan {{vlanId}}"
        linkEvent = "{{eventTime:rfc3339}} LINK port {{port}} up={{up}}"
        [sink]
        type = "file"
        path = "{}"
        "#,
        path.display()
    ))?;
    // Every record type of the ring, each at most 64 bytes (a larger one,
    // or a `slot_bytes` that is not 64, is refused here with the sizes).
    let logger = cfg.start_slots::<Slot64>(&[AclDrop::schema(), LinkEvent::schema()])?;
    let mut producer = logger.producer()?;
    let link = |port, up: bool| LinkEvent {
        header: RecordHeader::of::<LinkEvent>(),
        ticks: dplog::tsc::now_ticks(),
        port,
        up: up.into(),
        _pad: [0; 3],
    };
    // `Slot64::pack` copies a record into a slot; its header says which
    // schema formats it.
    producer.log(Slot64::pack(&link(7, false))?);
    producer.log(Slot64::pack(&AclDrop::new(
        v6(4),
        40003,
        DropReason::Deny,
        1000,
    ))?);
    producer.log(Slot64::pack(&link(7, true))?);
    drop(producer);
    let stats = logger.shutdown().map_err(|(_, e)| e)?;
    println!(
        "== start_slots::<Slot64>(), text templates: {} records written",
        stats.written_records
    );
    print!("{}", std::fs::read_to_string(&path)?);
    Ok(())
}
