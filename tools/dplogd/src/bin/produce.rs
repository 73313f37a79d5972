//! `dplogd-produce`: creates a shared-memory ring and pushes
//! sequence-numbered NAT44 session-delete records into it (sequence in
//! `initiatorOctets`, the run's tag in `responderOctets` and
//! `ingressVRFID`), in bursts of random size with random pauses from a
//! seed. A stand-in dataplane for dplogd's tests and its README set-up.
//!
//! With `--record acl` it pushes records of a type of its own instead, an
//! ACL drop ([`AclDrop`], schema `aclDrop`, id 300) that dplogd was not
//! built with: the ring file's schema description is all dplogd knows of
//! it. Record `seq` (from 0) has `sequence` seq, `ruleId` the tag,
//! `dropTime` 1767225600000000000 ns + seq ms, `sourceIPv6Address`
//! 2001:db8::<seq % 256>, `sourceTransportPort` 1024 + seq % 1000,
//! `destinationTransportPort` 443, `sourceMacAddress`
//! 02:00:5e:00:53:<seq % 256>, `vlanId` 10, `dropReason` 1 + seq % 3
//! (NO_RULE, DENY, RATE_LIMIT) and `protocolIdentifier` 6. The type
//! declares metadata that the ring file carries to dplogd: priority 2
//! (DENY 5) under `degrade`, and a syslog layout: APP-NAME `acl`, MSGID
//! by dropReason (`NORULE`, `DENY`, `RATELIMIT`), SD-ID `acl@32473` with
//! the parameters `rule` (ruleId), `src` (sourceIPv6Address), `sport`
//! (sourceTransportPort) and `v="1"`.
//!
//! With `--report`, after every push that returned it writes the number of
//! records committed so far as one line to stdout, unbuffered (one
//! `write(2)`), so a process killed at any instant has reported at most
//! one committed push less than it made.

use std::io::Write;
use std::path::PathBuf;

use clap::Parser;
use dplog::nat::{Nat44SessionRecord, NatRecord};
use dplog_core::schema::SyslogMeta;
use dplog_core::shm::{ShmLogProducer, ShmOptions};
use dplog_core::{
    schema, Backpressure, LoggerConfig, Record, RecordHeader, RecordRules, Schema, Slot64,
};

/// An ACL drop: a record type of the producer's own, 64 bytes (one
/// `Slot64`), no padding.
#[repr(C)]
#[derive(Clone, Copy)]
struct AclDrop {
    header: RecordHeader,
    time_ns: u64,
    seq: u64,
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

const _: () = assert!(std::mem::size_of::<AclDrop>() == 64);

impl Record for AclDrop {
    const SCHEMA_ID: u16 = 300;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

/// The schema of [`AclDrop`], from its own offsets and sizes.
fn acl_schema() -> Schema {
    let s = schema!(AclDrop, id = AclDrop::SCHEMA_ID, name = "aclDrop", [
        time_ns => "dropTime": NsTimestamp, ie 0;
        seq => "sequence": U64, ie 0;
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
    .expect("the aclDrop schema");
    let layout = SyslogMeta::resolve(
        &s,
        Some("acl"),
        Some((
            "dropReason",
            &[(1, "NORULE"), (2, "DENY"), (3, "RATELIMIT")],
        )),
        Some("acl@32473"),
        &[
            ("rule", "ruleId"),
            ("src", "sourceIPv6Address"),
            ("sport", "sourceTransportPort"),
            ("v", "=1"),
        ],
    )
    .expect("the aclDrop syslog layout");
    s.with_priority(2, Some(("dropReason", &[(2, 5)])))
        .expect("the aclDrop priorities")
        .with_syslog(layout)
}

/// ACL drop record `seq` of the run tagged `tag` (see the module doc).
fn acl_drop(seq: u64, tag: u32) -> Slot64 {
    let mut src_addr = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    src_addr[15] = seq as u8;
    let r = AclDrop {
        header: RecordHeader::of::<AclDrop>(),
        time_ns: 1_767_225_600_000_000_000 + seq * 1_000_000,
        seq,
        src_addr,
        rule_id: tag,
        src_port: 1024 + (seq % 1000) as u16,
        dst_port: 443,
        src_mac: [0x02, 0x00, 0x5e, 0x00, 0x53, seq as u8],
        vlan: 10,
        reason: 1 + (seq % 3) as u8,
        protocol: 6,
        _pad: [0; 6],
    };
    Slot64::pack(&r).expect("64 bytes fit a Slot64")
}

/// Pushes sequence-numbered records into a new shared-memory ring.
#[derive(Parser, Debug)]
struct Args {
    /// Ring directory (the one dplogd serves).
    #[arg(long)]
    dir: PathBuf,
    /// Ring name.
    #[arg(long, default_value = "produce")]
    name: String,
    /// Records to push; 0: until killed.
    #[arg(long, default_value_t = 1000)]
    records: u64,
    /// Ring capacity (slots, a power of two).
    #[arg(long, default_value_t = 1024)]
    capacity: usize,
    /// `block` or `drop_newest`.
    #[arg(long, default_value = "block")]
    backpressure: String,
    /// Largest burst; each burst is 1..=this records (seeded).
    #[arg(long, default_value_t = 16)]
    burst: usize,
    /// Largest pause between bursts, µs (seeded; 0: none).
    #[arg(long, default_value_t = 0)]
    pause_us: u64,
    /// Seed of the burst sizes and pauses.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Tag written into every record.
    #[arg(long, default_value_t = 0)]
    tag: u32,
    /// Report the committed count on stdout after every push.
    #[arg(long)]
    report: bool,
    /// Record type: `nat` (NAT44 session deletes) or `acl` (the
    /// producer's own ACL-drop type).
    #[arg(long, default_value = "nat")]
    record: String,
    /// Give the ring file this group (mode 0640) so a daemon of another
    /// user in that group can serve it; without it, mode 0600.
    #[arg(long)]
    group: Option<u32>,
    /// The uid dplogd runs as, when it is neither this user nor root: the
    /// producer trusts a consumer file of that owner too.
    #[arg(long)]
    daemon_uid: Option<u32>,
}

/// xorshift64*: a seeded sequence without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn main() {
    let a = Args::parse();
    let backpressure = match a.backpressure.as_str() {
        "block" => Backpressure::Block,
        "drop_newest" | "drop" => Backpressure::Drop,
        other => {
            eprintln!("dplogd-produce: --backpressure {other}: block or drop_newest");
            std::process::exit(2);
        }
    };
    let cfg = LoggerConfig {
        ring_capacity: a.capacity,
        backpressure,
        ..LoggerConfig::default()
    };
    let opts = ShmOptions {
        dir: a.dir.clone(),
        name: a.name.clone(),
        capacity: a.capacity,
        group: a.group,
        daemon_uid: a.daemon_uid,
    };
    match a.record.as_str() {
        "nat" => {}
        "acl" => return acl(&a, &opts, &cfg),
        other => {
            eprintln!("dplogd-produce: --record {other}: nat or acl");
            std::process::exit(2);
        }
    }
    let mut p = match ShmLogProducer::<NatRecord>::create(
        &opts,
        &cfg,
        &dplog::nat::all(),
        RecordRules::own(),
    ) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("dplogd-produce: {e}");
            std::process::exit(1);
        }
    };
    eprintln!("dplogd-produce: ring {}", p.path().display());
    let mut rng = Rng(a.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut seq = 0u64;
    let mut burst = Vec::with_capacity(a.burst.max(1));
    let stdout = std::io::stdout();
    while a.records == 0 || seq < a.records {
        let mut n = 1 + (rng.next() % a.burst.max(1) as u64);
        if a.records > 0 {
            n = n.min(a.records - seq);
        }
        burst.clear();
        for i in 0..n {
            let r = Nat44SessionRecord {
                nat_event: 5,
                protocol: 6,
                src_addr: 0x0a00_0001,
                post_nat_src_addr: 0xc633_6401,
                dst_addr: 0xcb00_7101,
                src_port: 1024,
                post_napt_src_port: 2048,
                dst_port: 80,
                ingress_vrf_id: a.tag,
                timestamp_ns: 1_767_225_600_000_000_000 + seq + i,
                initiator_octets: seq + i,
                responder_octets: u64::from(a.tag),
                ..Nat44SessionRecord::default()
            };
            burst.push(NatRecord::from(r));
        }
        let pushed = p.log_burst(&burst) as u64;
        seq += n;
        if a.report {
            let mut out = stdout.lock();
            // One write per line: a line is whole or absent.
            let _ = out.write_all(format!("{}\n", p.committed()).as_bytes());
            let _ = out.flush();
        }
        let _ = pushed;
        if a.pause_us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(rng.next() % a.pause_us));
        }
    }
    eprintln!(
        "dplogd-produce: {} records committed, {} dropped",
        p.committed(),
        p.dropped()
    );
}

/// `--record acl`: `a.records` ACL drops (at least one), in bursts of up
/// to `a.burst`.
fn acl(a: &Args, opts: &ShmOptions, cfg: &LoggerConfig) {
    let schema = acl_schema();
    let mut p = match ShmLogProducer::<Slot64>::create(opts, cfg, &[&schema], RecordRules::own()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("dplogd-produce: {e}");
            std::process::exit(1);
        }
    };
    eprintln!("dplogd-produce: ring {}", p.path().display());
    let mut seq = 0u64;
    let mut burst = Vec::with_capacity(a.burst.max(1));
    while seq < a.records.max(1) {
        let n = (a.burst.max(1) as u64).min(a.records.max(1) - seq);
        burst.clear();
        burst.extend((seq..seq + n).map(|i| acl_drop(i, a.tag)));
        p.log_burst(&burst);
        seq += n;
    }
    eprintln!(
        "dplogd-produce: {} records committed, {} dropped",
        p.committed(),
        p.dropped()
    );
}
