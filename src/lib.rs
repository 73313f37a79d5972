//! # dplog
//!
//! A logging SDK for high-rate dataplanes. A forwarding core copies a
//! fixed-size binary record into a lock-free ring; a consumer thread
//! formats records with table-driven formatters and writes them in large
//! batches to a sink (file, mmap segments, syslog, Kafka, IPFIX, archive).
//! dplog knows no record type of its own: you declare yours (a DNS query, an
//! ACL drop, a load balancer's pick, a NAT session) and every format works
//! for it. The guides are in the repository's `docs/` folder (`docs/README.md`
//! is their index); this page is where the API starts.
//!
//! # Quick start
//!
//! A record type is a `#[repr(C)]` struct without padding whose first field
//! is a [`RecordHeader`]; [`Record`] gives it a schema id, [`HasSchema`] its
//! [`Schema`], built with the [`schema!`] macro from the struct's own
//! offsets. A [`config::LogConfig`] (TOML) starts a [`Logger`] for it; each
//! forwarding thread takes a [`LogProducer`] (its own ring) and logs; the
//! logger counts every record ([`Stats`]) and drains everything on
//! [`Logger::shutdown`].
//!
//! ```
//! use std::sync::OnceLock;
//! use dplog::config::LogConfig;
//! use dplog::schema::{HasSchema, Schema};
//! use dplog::{schema, Record, RecordHeader};
//!
//! /// A packet an ACL dropped: 32 bytes, no padding.
//! #[repr(C)]
//! #[derive(Clone, Copy)]
//! struct AclDrop {
//!     header: RecordHeader, // length and schema id, set by RecordHeader::of
//!     time_ns: u64,         // ns since the Unix epoch
//!     src: u32,             // IPv4, host order
//!     rule: u32,
//!     reason: u8,
//!     _pad: [u8; 7],        // explicit, so every byte is initialised
//! }
//!
//! impl Record for AclDrop {
//!     const SCHEMA_ID: u16 = 300;
//!     fn header(&self) -> &RecordHeader {
//!         &self.header
//!     }
//! }
//!
//! // SAFETY: repr(C), 32 bytes without implicit padding; the schema is
//! // built from the struct's own offsets and size.
//! unsafe impl HasSchema for AclDrop {
//!     fn schema() -> &'static Schema {
//!         static S: OnceLock<Schema> = OnceLock::new();
//!         S.get_or_init(|| {
//!             schema!(AclDrop, id = 300, name = "aclDrop", [
//!                 time_ns => "time": NsTimestamp, ie 0;
//!                 src => "sourceIPv4Address": Ipv4, ie 8;
//!                 rule => "ruleId": U32, ie 0;
//!                 reason => "reason": Enum, ie 0, names &[(1, "deny"), (2, "rateLimit")];
//!             ])
//!             .expect("a valid schema")
//!         })
//!     }
//! }
//!
//! # let dir = tempfile::tempdir()?;
//! # let path = dir.path().join("acl.jsonl");
//! # let toml = format!("[format]\ntype = \"json\"\n[sink]\ntype = \"file\"\npath = {:?}\n", path);
//! # /*
//! let toml = "[format]\ntype = \"json\"\n[sink]\ntype = \"file\"\npath = \"acl.jsonl\"\n";
//! # */
//! let logger = LogConfig::from_toml_str(&toml)?.start::<AclDrop>()?;
//! let mut producer = logger.producer()?; // one per forwarding thread
//! let accepted = producer.log(AclDrop {
//!     header: RecordHeader::of::<AclDrop>(),
//!     time_ns: 1_767_225_600_000_000_000,
//!     src: 0x0A00_0001, // 10.0.0.1
//!     rule: 7,
//!     reason: 1,
//!     _pad: [0; 7],
//! });
//! assert!(accepted); // false: dropped by the backpressure policy, and counted
//! drop(producer);
//! let stats = logger.shutdown().map_err(|(_, e)| e)?; // drains, writes, closes
//! assert_eq!((stats.produced, stats.written_records, stats.dropped()), (1, 1, 0));
//! # let line = std::fs::read_to_string(&path)?;
//! # assert!(line.contains(r#""sourceIPv4Address":"10.0.0.1","ruleId":7,"reason":"deny""#), "{line}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! writes one JSON line, `{"timestamp":"2026-01-01T00:00:00.000000Z",
//! "time":1767225600000,"sourceIPv4Address":"10.0.0.1","ruleId":7,
//! "reason":"deny"}`. While it runs, [`Logger::snapshot`] gives the same
//! counters per ring with the enqueue-to-write latency.
//!
//! # Field kinds of `schema!`
//!
//! Each entry of [`schema!`] is `rust_field => "outputName": Kind, ie N`
//! (N: the IANA IPFIX element id, 0 for none), with `, names &[(value,
//! "name"), ...]` after an `Enum`. `Kind` is a [`FieldKind`]; the field's
//! Rust type must have the kind's size (checked when the schema is built):
//!
//! | kind | Rust field | value | printed by default as |
//! |---|---|---|---|
//! | `U8`, `U16`, `U32`, `U64` | `u8` .. `u64` | unsigned integer, host order | decimal |
//! | `Bool` | `u8` | 0 false, anything else true | `true` / `false` |
//! | `Ipv4` | `u32` | IPv4 address, host order (`0x0A000001` is 10.0.0.1) | dotted quad |
//! | `Ipv6` | `[u8; 16]` | IPv6 address, network order | RFC 5952 |
//! | `Port` | `u16` | transport port or ICMP identifier, host order | decimal |
//! | `Protocol` | `u8` | IP protocol number | decimal |
//! | `Mac` | `[u8; 6]` | MAC address, network order | `aa:bb:cc:dd:ee:ff` |
//! | `TscTimestamp` | `u64` | CPU ticks ([`tsc::now_ticks`]), converted with the consumer's calibration | ms since the epoch |
//! | `NsTimestamp` | `u64` | ns since the Unix epoch, UTC ([`tsc::realtime_ns`]) | ms since the epoch |
//! | `Enum` | `u8`, `u16`, `u32` | a number with a table of names | its name (text, JSON, ...), decimal in a template |
//! | `Bytes` | `[u8; N]`, N in 1..=255 | a byte string, NUL-padded | escaped text up to the first NUL |
//!
//! The first timestamp field is the record's event time. Priorities under
//! `backpressure = "degrade"`, syslog layouts, IPFIX elements by value and
//! fields shown only for some values are [`Schema`]'s `with_*` methods.
//!
//! # Template converters
//!
//! A `text` format's `template` (`[format] template`, or per record type
//! `[format.templates]`) is literal text with `{field}` or
//! `{field:converter}` placeholders (`{{` and `}}` are braces), compiled
//! once; a bad template is an error with its column. Converters by kind
//! (the first is the kind's default):
//!
//! | kind | converters |
//! |---|---|
//! | `U8`, `U16`, `U32`, `U64`, `Port`, `Protocol` | `dec` (alias `num`), `hex` |
//! | `Bool` | `bool`, `dec` |
//! | `Enum` | `dec`, `name`, `hex` |
//! | `Ipv4` | `ipv4`, `dec`, `hex` |
//! | `Ipv6` | `ipv6` |
//! | `Mac` | `mac` |
//! | `NsTimestamp` | `unix_ms`, `unix` (= `unix_s`), `unix_us`, `unix_ns`, `rfc3339` (= `rfc3339_ms`), `rfc3339_s`, `rfc3339_us`, `rfc3339_ns`, `rfc3164`, `dec`, `hex` |
//! | `TscTimestamp` | every `NsTimestamp` converter (wall time through the calibration); `dec` and `hex` print the raw ticks |
//! | `Bytes` | `str` (escaped for the output's syntax, up to the first NUL), `hex`, `base64` (every byte) |
//!
//! The table is [`formatters::template`]'s; this example uses each
//! converter once ([`formatters::Program`] is what the `text` format runs
//! per record type):
//!
//! ```
//! # use std::sync::OnceLock;
//! # use dplog::schema::{HasSchema, Schema};
//! # use dplog::{schema, Record, RecordHeader};
//! use dplog::formatters::{Escape, Options, Program};
//! # #[repr(C)]
//! # #[derive(Clone, Copy)]
//! # struct Every {
//! #     header: RecordHeader,
//! #     ns: u64,
//! #     tsc: u64,
//! #     count: u32,
//! #     v4: u32,
//! #     v6: [u8; 16],
//! #     port: u16,
//! #     mac: [u8; 6],
//! #     proto: u8,
//! #     flag: u8,
//! #     verdict: u8,
//! #     name: [u8; 5],
//! # }
//! # impl Record for Every {
//! #     const SCHEMA_ID: u16 = 900;
//! #     fn header(&self) -> &RecordHeader { &self.header }
//! # }
//! # // SAFETY: repr(C), 64 bytes without padding; schema from its offsets.
//! # unsafe impl HasSchema for Every {
//! #     fn schema() -> &'static Schema {
//! #         static S: OnceLock<Schema> = OnceLock::new();
//! #         S.get_or_init(|| schema!(Every, id = 900, name = "every", [
//! #             ns => "ns": NsTimestamp, ie 0;
//! #             tsc => "tsc": TscTimestamp, ie 0;
//! #             count => "count": U32, ie 0;
//! #             v4 => "v4": Ipv4, ie 0;
//! #             v6 => "v6": Ipv6, ie 0;
//! #             port => "port": Port, ie 0;
//! #             mac => "mac": Mac, ie 0;
//! #             proto => "proto": Protocol, ie 0;
//! #             flag => "flag": Bool, ie 0;
//! #             verdict => "verdict": Enum, ie 0, names &[(2, "deny")];
//! #             name => "name": Bytes, ie 0;
//! #         ]).unwrap())
//! #     }
//! # }
//! # let mut v6 = [0u8; 16];
//! # v6[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
//! # v6[15] = 1;
//! // A record with ns = tsc = 1767225600123456789, count 255, 10.0.0.1,
//! // 2001:db8::1, port 443, a MAC, TCP, true, deny and "a b".
//! # let rec = Every {
//! #     header: RecordHeader::of::<Every>(),
//! #     ns: 1_767_225_600_123_456_789,
//! #     tsc: 1_767_225_600_123_456_789,
//! #     count: 255,
//! #     v4: 0x0A00_0001,
//! #     v6,
//! #     port: 443,
//! #     mac: [0x02, 0, 0x5e, 0, 0x53, 1],
//! #     proto: 6,
//! #     flag: 1,
//! #     verdict: 2,
//! #     name: *b"a b\0\0",
//! # };
//! let template = "{ns} {ns:unix} {ns:unix_us} {ns:unix_ns} {ns:rfc3339} {ns:rfc3339_s} \
//!     {ns:rfc3339_us} {ns:rfc3339_ns} {ns:rfc3164} {tsc:rfc3339} {tsc:dec} \
//!     {count} {count:hex} {v4} {v4:dec} {v4:hex} {v6} {port} {mac} {proto} \
//!     {flag} {flag:dec} {verdict} {verdict:name} {name} {name:hex} {name:base64}";
//! let mut program = Program::compile(template, Every::schema(), Options::default(), Escape::Text)?;
//! let mut line = Vec::new();
//! assert!(program.run(rec.as_bytes(), &mut line));
//! assert_eq!(
//!     String::from_utf8(line)?,
//!     "1767225600123 1767225600 1767225600123456 1767225600123456789 2026-01-01T00:00:00.123Z \
//!      2026-01-01T00:00:00Z 2026-01-01T00:00:00.123456Z 2026-01-01T00:00:00.123456789Z \
//!      Jan  1 00:00:00 2026-01-01T00:00:00.123Z 1767225600123456789 \
//!      255 ff 10.0.0.1 167772161 a000001 2001:db8::1 443 02:00:5e:00:53:01 6 \
//!      true 1 2 deny a\\x20b 6120620000 YSBiAAA="
//! );
//! // A converter that does not suit the field's kind is refused, with its column.
//! let err = Program::compile("x {v4:mac}", Every::schema(), Options::default(), Escape::Text)
//!     .unwrap_err();
//! assert_eq!(err.column, 3);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! (`Options::default()` converts TSC ticks with the identity calibration,
//! ticks taken as ns; a logger passes the consumer's own.) How each format
//! escapes a byte string, and how to get its bytes back, is in
//! `docs/formats.md`.
//!
//! # Where a user starts
//!
//! - [`config::LogConfig`]: the TOML (ring, format, sink) and
//!   [`start::<R>()`](config::LogConfig::start) /
//!   [`start_slots::<S>()`](config::LogConfig::start_slots), the way in
//!   for most programs; its module docs list every key.
//! - [`Logger`] and [`LogProducer`]: the consumer thread and a forwarding
//!   thread's ring; [`SharedProducer`] and [`MpProducer`] for rings several
//!   threads share.
//! - [`Record`], [`RecordHeader`], [`HasSchema`], [`Schema`], [`schema!`]:
//!   your record type.
//! - [`Slot64`] (and [`Slot32`], [`Slot128`]): rings that mix record types,
//!   as `examples/acl_drop.rs` shows.
//! - [`Stats`], [`Snapshot`], [`RingStats`]: what was produced, written and
//!   lost, and why.
//!
//! # Crates
//!
//! This crate re-exports the workspace crates:
//! - [`dplog_core`] at the root (records, rings, producers, consumer runtime);
//! - [`formatters`] (feature `formatters`, on by default);
//! - [`sinks`] (feature `sinks`, on by default);
//! - [`nat`] (feature `nat`, on by default): the NAT schema package
//!   (`dplog-schema-nat`), one record package among any a user declares;
//! - [`config`] (feature `config`, on by default): TOML that chooses ring,
//!   format and sink, and starts loggers of any record type.
//!
//! Feature `kafka` (on by default) adds the Kafka sink, which builds
//! librdkafka; `default-features = false, features = ["config"]` leaves it
//! out.
#![warn(missing_docs)]

pub use dplog_core::*;

/// Table-driven formatters: text and templates, JSON, CSV, RFC 5424,
/// RFC 3164, IPFIX, binary. Feature `formatters`.
#[cfg(feature = "formatters")]
pub use dplog_formatters as formatters;

/// Sinks: file, mmap, syslog, IPFIX, archive, fan-out and failover, and
/// Kafka (feature `kafka`). Feature `sinks`.
#[cfg(feature = "sinks")]
pub use dplog_sinks as sinks;

/// The NAT schema package: records, schemas, natEvent profiles. Feature
/// `nat`.
#[cfg(feature = "nat")]
pub use dplog_schema_nat as nat;

#[cfg(feature = "config")]
pub mod config;

/// The README's Rust example, compiled and run as a doctest so it cannot
/// rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The Rust examples of `docs/rust.md`, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/rust.md")]
pub struct RustGuideDoctests;

/// The Rust examples of `docs/formats.md`, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/formats.md")]
pub struct FormatsGuideDoctests;

/// The Rust examples of `docs/schema-metadata.md`, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/schema-metadata.md")]
pub struct SchemaMetadataGuideDoctests;

/// The Rust examples of `docs/time-and-clocks.md`, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/time-and-clocks.md")]
pub struct TimeAndClocksGuideDoctests;

/// The Rust examples of `docs/nat-schemas.md`, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/nat-schemas.md")]
pub struct NatSchemasGuideDoctests;
