//! # libdplog: the C ABI of dplog
//!
//! Builds `libdplog.so` and `libdplog.a`; `include/dplog.h` is generated
//! from this file by cbindgen (pinned, see `cbindgen.toml`).
//!
//! Design:
//! - Every export runs inside [`guard`], which turns a Rust panic into
//!   [`DPLOG_ERR_PANIC`]: no unwind crosses the C boundary.
//! - Handles ([`dplog_t`], [`dplog_producer_t`]) carry a magic word. Closing
//!   or freeing one marks it dead and keeps its (small) allocation for the
//!   life of the process in a global tombstone list, so a later call with
//!   the same pointer reads valid memory and returns [`DPLOG_ERR_CLOSED`]
//!   instead of touching freed memory.
//! - The logger handle's state sits behind a mutex: every logger function is
//!   thread-safe, `dplog_close` included. A producer is used by one thread
//!   at a time (it owns one SPSC ring). Nothing on the producer's hot path
//!   enforces that; the consumer validates every ring index it reads
//!   instead, and stops a ring whose index breaks the protocol
//!   ([`DPLOG_ERR_RING_STOPPED`]).
#![allow(non_camel_case_types)]
#![warn(missing_docs)]

use std::cell::{RefCell, UnsafeCell};
use std::collections::{HashMap, HashSet};
use std::ffi::{c_char, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use dplog::config::{ConfigError, LogConfig};
use dplog::formatters::{Format, RecordEncoder};
use dplog::record::{
    NatAddressesExhaustedRecord, NatPortBlockRecord, NatPortsExhaustedRecord,
    NatQuotaExceededRecord,
};
use dplog::schema::{DplogEnumName, DplogFieldDesc};
use dplog::sinks::BoxSink;
use dplog::{
    DropReport, Formatter, LogProducer, Logger, LoggerError, Nat44SessionRecord, NatRecord,
    RecordHeader, Schema, Sink,
};

// ---------------------------------------------------------------------------
// Version
// ---------------------------------------------------------------------------

/// Major version of the library this header belongs to (Cargo.toml `version`).
pub const DPLOG_VERSION_MAJOR: u32 = 0;
/// Minor version of the library this header belongs to.
pub const DPLOG_VERSION_MINOR: u32 = 1;
/// Patch version of the library this header belongs to.
pub const DPLOG_VERSION_PATCH: u32 = 0;
/// `MAJOR * 10000 + MINOR * 100 + PATCH`, for `#if DPLOG_VERSION_NUMBER >= ...`.
pub const DPLOG_VERSION_NUMBER: u32 = 100;

const fn parse_u32(s: &str) -> u32 {
    let b = s.as_bytes();
    let mut i = 0;
    let mut v = 0u32;
    while i < b.len() {
        assert!(b[i].is_ascii_digit());
        v = v * 10 + (b[i] - b'0') as u32;
        i += 1;
    }
    v
}

// The header's macros must match Cargo.toml: a version bump that forgets
// them does not compile.
const _: () = assert!(DPLOG_VERSION_MAJOR == parse_u32(env!("CARGO_PKG_VERSION_MAJOR")));
const _: () = assert!(DPLOG_VERSION_MINOR == parse_u32(env!("CARGO_PKG_VERSION_MINOR")));
const _: () = assert!(DPLOG_VERSION_PATCH == parse_u32(env!("CARGO_PKG_VERSION_PATCH")));
const _: () = assert!(
    DPLOG_VERSION_NUMBER
        == DPLOG_VERSION_MAJOR * 10000 + DPLOG_VERSION_MINOR * 100 + DPLOG_VERSION_PATCH
);

// ---------------------------------------------------------------------------
// Result codes
// ---------------------------------------------------------------------------

/// Result of every dplog function: `DPLOG_OK` (0) or one of the
/// `DPLOG_ERR_*` codes. `dplog_strerror` gives a static message per code.
pub type dplog_result = i32;

/// Success.
pub const DPLOG_OK: dplog_result = 0;
/// A required pointer argument was NULL.
pub const DPLOG_ERR_NULL: dplog_result = 1;
/// An argument is out of range: a CPU that does not exist, a reserve of 0
/// or more than `DPLOG_RESERVE_MAX` records, a commit of more than was
/// reserved, a string that is not UTF-8, a pointer that is not a dplog
/// handle (wrong magic word).
pub const DPLOG_ERR_INVALID_ARG: dplog_result = 2;
/// A record length does not match the schema's record size.
pub const DPLOG_ERR_BAD_LENGTH: dplog_result = 3;
/// The schema id is not known to this library.
pub const DPLOG_ERR_UNKNOWN_SCHEMA: dplog_result = 4;
/// The configuration cannot be read or is invalid (unknown key, wrong type,
/// ring capacity not a power of two, ...); `dplog_last_error` names it.
pub const DPLOG_ERR_CONFIG: dplog_result = 5;
/// The sink failed: open, write, flush, reopen or close (errno text in
/// `dplog_last_error`).
pub const DPLOG_ERR_IO: dplog_result = 6;
/// The call is not valid in the handle's current state: a producer before
/// `dplog_start`, a second `dplog_start`, a second `dplog_reserve` before
/// `dplog_commit`, a `dplog_log`/`dplog_log_burst` while a reservation is
/// pending, a `dplog_commit` without a reservation; in debug builds of the
/// library also a producer call made while another thread is inside a
/// call on the same producer (nothing is done; a producer belongs to one
/// thread at a time).
pub const DPLOG_ERR_STATE: dplog_result = 7;
/// The handle was closed or freed (use after close, double free), or the
/// producer's logger was closed. Nothing was done.
pub const DPLOG_ERR_CLOSED: dplog_result = 8;
/// The ring was full under `backpressure = "drop"` (or, under `"degrade"`,
/// full or above its high watermark for the record's priority): the
/// record(s) were dropped and counted in `dplog_stats`.
pub const DPLOG_ERR_FULL: dplog_result = 9;
/// `dplog_producer_new`: this ring id already has a live producer.
pub const DPLOG_ERR_RING_IN_USE: dplog_result = 10;
/// `dplog_close`: the logger is closed, but some records were not
/// delivered (dropped because a ring was full, refused by the sink, or
/// still in a ring); the final stats say how many of each.
pub const DPLOG_ERR_UNDELIVERED: dplog_result = 11;
/// Valid request that this build does not support. No function of this
/// version returns it (more than one consumer core, its last use, is
/// supported since 0.1); kept so codes keep their numbers.
pub const DPLOG_ERR_UNSUPPORTED: dplog_result = 12;
/// The consumer thread stopped unexpectedly (it panicked): a producer
/// whose ring is full gets it (the record is dropped and counted in
/// `dropped_disconnected` under `"block"`, `dropped_full` otherwise), as
/// do `dplog_producer_new`, `dplog_flush`, `dplog_reopen` and
/// `dplog_close`. Nothing more is written; close the handle. Tests provoke
/// it with the environment variable `DPLOG_FAULT_CONSUMER_PANIC_AFTER=N`
/// (read by `dplog_start`): the consumer panics after formatting N records.
pub const DPLOG_ERR_CONSUMER_GONE: dplog_result = 13;
/// A Rust panic was caught at the boundary; the handle may be unusable
/// but the process is intact.
pub const DPLOG_ERR_PANIC: dplog_result = 14;
/// `dplog_schema_register`: a record type of that name is already
/// registered on the handle, or is a built-in NAT schema's name
/// (`nat44Session`, `natPortBlock`, `natAddressesExhausted`,
/// `natPortsExhausted`, `natQuotaExceeded`). Nothing was registered.
pub const DPLOG_ERR_EXISTS: dplog_result = 15;
/// The consumer stopped reading this producer's ring (from a producer
/// call), or one or more rings (from `dplog_close`), because a ring index
/// the producer published broke the ring protocol: a fill level above the
/// capacity, or an index that moved backwards. The usual cause is one
/// producer used by two threads at once, which is not allowed. The
/// records accepted before are written exactly once; nothing after them
/// is read, and what is lost is counted in `dropped_stopped` (see
/// `struct dplog_stats`). The consumer prints one line naming the ring on
/// stderr; the other rings go on. A producer of a stopped ring gets this
/// code once the ring's free slots are used up (the record is dropped and
/// counted); free it.
pub const DPLOG_ERR_RING_STOPPED: dplog_result = 16;
/// The highest `dplog_result` code (for tables indexed by code).
pub const DPLOG_ERR_LAST: dplog_result = 16;

const MESSAGES: [&CStr; 17] = [
    c"success",
    c"a required pointer argument was NULL",
    c"invalid argument",
    c"record length does not match the schema",
    c"unknown schema id",
    c"invalid configuration",
    c"sink I/O error",
    c"call not valid in the current state",
    c"handle is closed or freed",
    c"ring full: record dropped and counted",
    c"ring id already has a producer",
    c"closed, but some records were not delivered",
    c"not supported by this build",
    c"the consumer thread has stopped",
    c"internal error (panic caught at the C boundary)",
    c"a schema of that name is already registered",
    c"ring stopped: its producer broke the ring protocol (shared between threads?)",
];

// ---------------------------------------------------------------------------
// Records, schemas and constants shared with C
// ---------------------------------------------------------------------------

/// Schema id of `struct dplog_nat44_session`.
pub const DPLOG_SCHEMA_NAT44_SESSION: u16 = 1;
const _: () = assert!(DPLOG_SCHEMA_NAT44_SESSION == dplog::SCHEMA_NAT44_SESSION);
/// Schema id of `struct dplog_nat_port_block` (natEvent 16/17).
pub const DPLOG_SCHEMA_NAT_PORT_BLOCK: u16 = 2;
/// Schema id of `struct dplog_nat_addresses_exhausted` (natEvent 3).
pub const DPLOG_SCHEMA_NAT_ADDRESSES_EXHAUSTED: u16 = 3;
/// Schema id of `struct dplog_nat_ports_exhausted` (natEvent 12).
pub const DPLOG_SCHEMA_NAT_PORTS_EXHAUSTED: u16 = 4;
/// Schema id of `struct dplog_nat_quota_exceeded` (natEvent 13).
pub const DPLOG_SCHEMA_NAT_QUOTA_EXCEEDED: u16 = 5;
/// First schema id `dplog_schema_register` hands out (then 257, ...).
pub const DPLOG_SCHEMA_USER_FIRST: u16 = 256;
const _: () = {
    assert!(DPLOG_SCHEMA_NAT_PORT_BLOCK == dplog::record::SCHEMA_NAT_PORT_BLOCK);
    assert!(DPLOG_SCHEMA_NAT_ADDRESSES_EXHAUSTED == dplog::record::SCHEMA_NAT_ADDRESSES_EXHAUSTED);
    assert!(DPLOG_SCHEMA_NAT_PORTS_EXHAUSTED == dplog::record::SCHEMA_NAT_PORTS_EXHAUSTED);
    assert!(DPLOG_SCHEMA_NAT_QUOTA_EXCEEDED == dplog::record::SCHEMA_NAT_QUOTA_EXCEEDED);
};
/// Size in bytes of `struct dplog_nat44_session` (one 64-byte ring slot).
pub const DPLOG_NAT44_SESSION_SIZE: usize = 64;
/// Largest record, header included: one 64-byte ring slot.
pub const DPLOG_RECORD_MAX_SIZE: usize = 64;

/// Field kind (`struct dplog_field_desc.kind`): unsigned 8-bit integer, size 1.
pub const DPLOG_FIELD_U8: u32 = 1;
/// Unsigned 16-bit integer, host order, size 2.
pub const DPLOG_FIELD_U16: u32 = 2;
/// Unsigned 32-bit integer, host order, size 4.
pub const DPLOG_FIELD_U32: u32 = 3;
/// Unsigned 64-bit integer, host order, size 8.
pub const DPLOG_FIELD_U64: u32 = 4;
/// Boolean, one byte (0 false, anything else true).
pub const DPLOG_FIELD_BOOL: u32 = 5;
/// IPv4 address as a host-order `uint32_t`, size 4.
pub const DPLOG_FIELD_IPV4: u32 = 6;
/// IPv6 address, 16 bytes in network order.
pub const DPLOG_FIELD_IPV6: u32 = 7;
/// Transport port (or ICMP identifier), host-order `uint16_t`.
pub const DPLOG_FIELD_PORT: u32 = 8;
/// IP protocol number, one byte.
pub const DPLOG_FIELD_PROTOCOL: u32 = 9;
/// MAC address, 6 bytes in network order.
pub const DPLOG_FIELD_MAC: u32 = 10;
/// TSC timestamp (`uint64_t` cycles).
pub const DPLOG_FIELD_TSC_TIMESTAMP: u32 = 11;
/// Nanoseconds since the Unix epoch, `uint64_t`.
pub const DPLOG_FIELD_NS_TIMESTAMP: u32 = 12;
/// Enumeration (integer of size 1, 2 or 4) with a name table.
pub const DPLOG_FIELD_ENUM: u32 = 13;
/// Fixed-size byte string, NUL-padded.
pub const DPLOG_FIELD_BYTES: u32 = 14;
const _: () = {
    use dplog::FieldKind as K;
    assert!(DPLOG_FIELD_U8 == K::U8 as u32 && DPLOG_FIELD_U16 == K::U16 as u32);
    assert!(DPLOG_FIELD_U32 == K::U32 as u32 && DPLOG_FIELD_U64 == K::U64 as u32);
    assert!(DPLOG_FIELD_BOOL == K::Bool as u32 && DPLOG_FIELD_IPV4 == K::Ipv4 as u32);
    assert!(DPLOG_FIELD_IPV6 == K::Ipv6 as u32 && DPLOG_FIELD_PORT == K::Port as u32);
    assert!(DPLOG_FIELD_PROTOCOL == K::Protocol as u32 && DPLOG_FIELD_MAC == K::Mac as u32);
    assert!(DPLOG_FIELD_TSC_TIMESTAMP == K::TscTimestamp as u32);
    assert!(DPLOG_FIELD_NS_TIMESTAMP == K::NsTimestamp as u32);
    assert!(DPLOG_FIELD_ENUM == K::Enum as u32 && DPLOG_FIELD_BYTES == K::Bytes as u32);
};
/// Most consumer cores one `dplog_start` takes.
pub const DPLOG_CONSUMERS_MAX: usize = 64;
/// Most records one `dplog_reserve` hands out.
pub const DPLOG_RESERVE_MAX: usize = 64;

/// natEvent 1 (historic): NAT translation create (RFC 8158, IANA registry).
pub const DPLOG_NAT_EVENT_TRANSLATION_CREATE: u8 = 1;
/// natEvent 2 (historic): NAT translation delete.
pub const DPLOG_NAT_EVENT_TRANSLATION_DELETE: u8 = 2;
/// natEvent 3: NAT addresses exhausted.
pub const DPLOG_NAT_EVENT_ADDRESSES_EXHAUSTED: u8 = 3;
/// natEvent 4: NAT44 session create.
pub const DPLOG_NAT_EVENT_NAT44_SESSION_CREATE: u8 = 4;
/// natEvent 5: NAT44 session delete.
pub const DPLOG_NAT_EVENT_NAT44_SESSION_DELETE: u8 = 5;
/// natEvent 12: NAT ports exhausted.
pub const DPLOG_NAT_EVENT_PORTS_EXHAUSTED: u8 = 12;
/// natEvent 13: quota exceeded.
pub const DPLOG_NAT_EVENT_QUOTA_EXCEEDED: u8 = 13;
/// natEvent 16: port block allocation.
pub const DPLOG_NAT_EVENT_PORT_BLOCK_ALLOCATION: u8 = 16;
/// natEvent 17: port block de-allocation.
pub const DPLOG_NAT_EVENT_PORT_BLOCK_DEALLOCATION: u8 = 17;

/// Header at offset 0 of every record, 8 bytes. `dplog_log`,
/// `dplog_log_burst` and `dplog_commit` overwrite it with `len` and
/// `schema_id` from their arguments and zero `flags` and `reserved`, so C
/// code may leave it zeroed.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct dplog_record_header {
    /// Total record length in bytes, header included.
    pub len: u16,
    /// Schema id, e.g. `DPLOG_SCHEMA_NAT44_SESSION`.
    pub schema_id: u16,
    /// Record flags; 0.
    pub flags: u16,
    /// Reserved; 0.
    pub reserved: u16,
}

/// A NAT44 session create or delete event (RFC 8158 natEvent 4 and 5);
/// schema `DPLOG_SCHEMA_NAT44_SESSION`, exactly 64 bytes.
///
/// Addresses are IPv4 addresses in host byte order (10.0.0.1 is
/// 0x0A000001); ports are host byte order. Counters are meaningful on
/// deletes (natEvent 5) and zero on creates.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct dplog_nat44_session {
    /// Filled by dplog (len 64, schema 1).
    pub header: dplog_record_header,
    /// Event time, nanoseconds since the Unix epoch (UTC, CLOCK_REALTIME).
    pub timestamp_ns: u64,
    /// sourceIPv4Address (IE 8): pre-NAT inside source address.
    pub src_addr: u32,
    /// postNATSourceIPv4Address (IE 225): outside address from the pool.
    pub post_nat_src_addr: u32,
    /// destinationIPv4Address (IE 12).
    pub dst_addr: u32,
    /// sourceTransportPort (IE 7), or the ICMP echo identifier.
    pub src_port: u16,
    /// postNAPTSourceTransportPort (IE 227).
    pub post_napt_src_port: u16,
    /// destinationTransportPort (IE 11); 0 for ICMP.
    pub dst_port: u16,
    /// protocolIdentifier (IE 4): 1 ICMP, 6 TCP, 17 UDP.
    pub protocol: u8,
    /// natEvent (IE 230): `DPLOG_NAT_EVENT_NAT44_SESSION_CREATE` or `_DELETE`.
    pub nat_event: u8,
    /// ingressVRFID (IE 234); 0 for the default VRF.
    pub ingress_vrf_id: u32,
    /// initiatorPackets (IE 298), deletes only.
    pub initiator_packets: u32,
    /// responderPackets (IE 299), deletes only.
    pub responder_packets: u32,
    /// initiatorOctets (IE 231), deletes only.
    pub initiator_octets: u64,
    /// responderOctets (IE 232), deletes only.
    pub responder_octets: u64,
}

// The C struct is the Rust record, byte for byte.
const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    type R = Nat44SessionRecord;
    type C = dplog_nat44_session;
    assert!(size_of::<C>() == size_of::<R>() && size_of::<C>() == DPLOG_NAT44_SESSION_SIZE);
    assert!(align_of::<C>() == align_of::<R>());
    assert!(size_of::<dplog_record_header>() == size_of::<RecordHeader>());
    assert!(offset_of!(C, timestamp_ns) == offset_of!(R, timestamp_ns));
    assert!(offset_of!(C, src_addr) == offset_of!(R, src_addr));
    assert!(offset_of!(C, post_nat_src_addr) == offset_of!(R, post_nat_src_addr));
    assert!(offset_of!(C, dst_addr) == offset_of!(R, dst_addr));
    assert!(offset_of!(C, src_port) == offset_of!(R, src_port));
    assert!(offset_of!(C, post_napt_src_port) == offset_of!(R, post_napt_src_port));
    assert!(offset_of!(C, dst_port) == offset_of!(R, dst_port));
    assert!(offset_of!(C, protocol) == offset_of!(R, protocol));
    assert!(offset_of!(C, nat_event) == offset_of!(R, nat_event));
    assert!(offset_of!(C, ingress_vrf_id) == offset_of!(R, ingress_vrf_id));
    assert!(offset_of!(C, initiator_packets) == offset_of!(R, initiator_packets));
    assert!(offset_of!(C, responder_packets) == offset_of!(R, responder_packets));
    assert!(offset_of!(C, initiator_octets) == offset_of!(R, initiator_octets));
    assert!(offset_of!(C, responder_octets) == offset_of!(R, responder_octets));
};

/// Port block allocation or release (natEvent 16/17, RFC 8158); schema
/// `DPLOG_SCHEMA_NAT_PORT_BLOCK`, 40 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct dplog_nat_port_block {
    /// Filled by dplog.
    pub header: dplog_record_header,
    /// Event time, ns since the Unix epoch.
    pub timestamp_ns: u64,
    /// sourceIPv4Address (IE 8): the subscriber.
    pub src_addr: u32,
    /// postNATSourceIPv4Address (IE 225).
    pub post_nat_src_addr: u32,
    /// portRangeStart (IE 361).
    pub port_range_start: u16,
    /// portRangeEnd (IE 362), inclusive.
    pub port_range_end: u16,
    /// portRangeStepSize (IE 363); 1 for a contiguous block.
    pub port_range_step: u16,
    /// natEvent: 16 allocation, 17 release.
    pub nat_event: u8,
    /// 0.
    pub reserved: u8,
    /// portRangeNumPorts (IE 364).
    pub port_range_num_ports: u16,
    /// 0.
    pub reserved2: u16,
    /// ingressVRFID (IE 234).
    pub ingress_vrf_id: u32,
}

/// NAT addresses exhausted (natEvent 3); schema
/// `DPLOG_SCHEMA_NAT_ADDRESSES_EXHAUSTED`, 24 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct dplog_nat_addresses_exhausted {
    /// Filled by dplog.
    pub header: dplog_record_header,
    /// Event time, ns since the Unix epoch.
    pub timestamp_ns: u64,
    /// natPoolId (IE 283).
    pub nat_pool_id: u32,
    /// natEvent: 3.
    pub nat_event: u8,
    /// 0.
    pub reserved: [u8; 3],
}

/// NAT ports exhausted (natEvent 12); schema
/// `DPLOG_SCHEMA_NAT_PORTS_EXHAUSTED`, 24 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct dplog_nat_ports_exhausted {
    /// Filled by dplog.
    pub header: dplog_record_header,
    /// Event time, ns since the Unix epoch.
    pub timestamp_ns: u64,
    /// postNATSourceIPv4Address (IE 225) whose ports ran out.
    pub post_nat_src_addr: u32,
    /// protocolIdentifier (IE 4).
    pub protocol: u8,
    /// natEvent: 12.
    pub nat_event: u8,
    /// 0.
    pub reserved: u16,
}

/// NAT quota exceeded (natEvent 13) with its subtype; schema
/// `DPLOG_SCHEMA_NAT_QUOTA_EXCEEDED`, 32 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct dplog_nat_quota_exceeded {
    /// Filled by dplog.
    pub header: dplog_record_header,
    /// Event time, ns since the Unix epoch.
    pub timestamp_ns: u64,
    /// natQuotaExceededEvent (IE 466): 1 max sessions, 2 max BIB entries,
    /// 3 max entries per user, 4 max subscribers, 5 max fragments pending.
    pub quota_event: u32,
    /// The limit that was hit (IE 471..475 by subtype).
    pub limit: u32,
    /// sourceIPv4Address (IE 8); 0 unless the quota is per user.
    pub src_addr: u32,
    /// natEvent: 13.
    pub nat_event: u8,
    /// 0.
    pub reserved: [u8; 3],
}

// The C structs are the Rust records, byte for byte.
const _: () = {
    use core::mem::{offset_of, size_of};
    type Pb = dplog_nat_port_block;
    type PbR = NatPortBlockRecord;
    assert!(size_of::<Pb>() == size_of::<PbR>());
    assert!(offset_of!(Pb, port_range_start) == offset_of!(PbR, port_range_start));
    assert!(offset_of!(Pb, nat_event) == offset_of!(PbR, nat_event));
    assert!(offset_of!(Pb, port_range_num_ports) == offset_of!(PbR, port_range_num_ports));
    assert!(offset_of!(Pb, ingress_vrf_id) == offset_of!(PbR, ingress_vrf_id));
    type Ae = dplog_nat_addresses_exhausted;
    type AeR = NatAddressesExhaustedRecord;
    assert!(size_of::<Ae>() == size_of::<AeR>());
    assert!(offset_of!(Ae, nat_pool_id) == offset_of!(AeR, nat_pool_id));
    assert!(offset_of!(Ae, nat_event) == offset_of!(AeR, nat_event));
    type Pe = dplog_nat_ports_exhausted;
    type PeR = NatPortsExhaustedRecord;
    assert!(size_of::<Pe>() == size_of::<PeR>());
    assert!(offset_of!(Pe, protocol) == offset_of!(PeR, protocol));
    assert!(offset_of!(Pe, nat_event) == offset_of!(PeR, nat_event));
    type Qe = dplog_nat_quota_exceeded;
    type QeR = NatQuotaExceededRecord;
    assert!(size_of::<Qe>() == size_of::<QeR>());
    assert!(offset_of!(Qe, limit) == offset_of!(QeR, limit));
    assert!(offset_of!(Qe, src_addr) == offset_of!(QeR, src_addr));
    assert!(offset_of!(Qe, nat_event) == offset_of!(QeR, nat_event));
};

/// One field of a user record type, for `dplog_schema_register` (the C
/// view of `dplog::schema::DplogFieldDesc`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct dplog_field_desc {
    /// NUL-terminated UTF-8 field name, an identifier
    /// (`[A-Za-z_][A-Za-z0-9_]*`), the key in formatted output. Copied.
    pub name: *const c_char,
    /// Byte offset in the record (`offsetof`), at least 8 (after the header).
    pub offset: u32,
    /// Size in bytes (`sizeof` the member); must suit `kind`.
    pub size: u32,
    /// One of `DPLOG_FIELD_*`.
    pub kind: u32,
    /// IANA IPFIX information-element id; 0 for none.
    pub ie_id: u32,
    /// Name table of a `DPLOG_FIELD_ENUM` field (`enum_count` entries), or NULL.
    pub enum_names: *const dplog_enum_name,
    /// Entries in `enum_names`.
    pub enum_count: usize,
}

/// One entry of an enum field's name table. The name is copied.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct dplog_enum_name {
    /// The numeric value.
    pub value: u32,
    /// NUL-terminated UTF-8 name.
    pub name: *const c_char,
}

// Same layout as the core's descriptor types, so the array is passed as is.
const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    type F = dplog_field_desc;
    type D = DplogFieldDesc;
    assert!(size_of::<F>() == size_of::<D>() && align_of::<F>() == align_of::<D>());
    assert!(offset_of!(F, name) == offset_of!(D, name));
    assert!(offset_of!(F, offset) == offset_of!(D, offset));
    assert!(offset_of!(F, size) == offset_of!(D, size));
    assert!(offset_of!(F, kind) == offset_of!(D, kind));
    assert!(offset_of!(F, ie_id) == offset_of!(D, ie_id));
    assert!(offset_of!(F, enum_names) == offset_of!(D, enum_names));
    assert!(offset_of!(F, enum_count) == offset_of!(D, enum_count));
    assert!(size_of::<dplog_enum_name>() == size_of::<DplogEnumName>());
    assert!(offset_of!(dplog_enum_name, value) == offset_of!(DplogEnumName, value));
    assert!(offset_of!(dplog_enum_name, name) == offset_of!(DplogEnumName, name));
};

/// Every counter of one logger, summed over its rings, plus latency
/// percentiles. Filled by `dplog_stats` and `dplog_close`.
///
/// Accounting: `produced = enqueued + dropped_full + dropped_degraded +
/// dropped_disconnected + dropped_stopped`; `in_flight` is what is neither
/// written nor dropped, so after `dplog_close` `produced = written_records +
/// every dropped_* + in_flight`.
///
/// A stopped ring (`rings_stopped`, `DPLOG_ERR_RING_STOPPED`) counts as
/// `enqueued` the records its consumer accepted before the bad index, and
/// in `dropped_stopped` what its producer pushed past them plus what the
/// producer then refused. Records that two threads sharing one producer
/// overwrote in the ring before any index went wrong were never in the
/// ring and are in no counter: `produced` may then be below the number of
/// `DPLOG_OK` returns.
///
/// Latency is enqueue-to-write: from the producer's publish of a record to
/// the sink accepting its batch, in nanoseconds, measured by dplog's
/// runtime on a sample of the records (`latency_samples` of them); 0 when
/// there is no sample.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct dplog_stats {
    /// Records whose fate a producer decided (enqueued or dropped).
    pub produced: u64,
    /// Records copied into a ring.
    pub enqueued: u64,
    /// Records dropped because a ring was full (`backpressure = "drop"` or
    /// `"degrade"`).
    pub dropped_full: u64,
    /// Records dropped by `"degrade"` (ring above its high watermark and the
    /// record's priority too low).
    pub dropped_degraded: u64,
    /// Records dropped because the consumer was gone.
    pub dropped_disconnected: u64,
    /// Records read out of rings by the consumer.
    pub dequeued: u64,
    /// Records in batches the sink accepted.
    pub written_records: u64,
    /// Bytes in batches the sink accepted.
    pub written_bytes: u64,
    /// Records in batches the sink refused.
    pub dropped_sink: u64,
    /// Sink calls (write, flush, tick, drain, close) that failed,
    /// retryable or permanent.
    pub sink_errors: u64,
    /// Of `sink_errors`, the retryable ones (each retried after a backoff).
    pub sink_retries: u64,
    /// Records the sink accepted but has not acknowledged yet (asynchronous
    /// sinks; 0 for files).
    pub sink_pending: u64,
    /// Records not delivered when the shutdown timeout expired.
    pub dropped_shutdown: u64,
    /// Batches written to the sink.
    pub batches: u64,
    /// Highest fill level the consumer saw in any one ring, in records.
    pub high_water: u64,
    /// Rings registered (one per `dplog_producer_new`).
    pub rings: u64,
    /// Records produced but neither written nor dropped (still in a ring or
    /// in the consumer's batch).
    pub in_flight: u64,
    /// Records that contributed to the latency percentiles.
    pub latency_samples: u64,
    /// Median record age at formatting, in nanoseconds.
    pub latency_p50_ns: u64,
    /// 99th percentile, in nanoseconds.
    pub latency_p99_ns: u64,
    /// 99.9th percentile, in nanoseconds.
    pub latency_p999_ns: u64,
    /// Largest record age seen, in nanoseconds.
    pub latency_max_ns: u64,
    /// Records lost in rings the consumer stopped after a protocol
    /// violation (see above and `DPLOG_ERR_RING_STOPPED`).
    pub dropped_stopped: u64,
    /// Rings the consumer stopped after a protocol violation.
    pub rings_stopped: u64,
}

// ---------------------------------------------------------------------------
// Errors, panic guard, handles
// ---------------------------------------------------------------------------

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `msg` as the calling thread's last error and returns `code`.
#[cold]
#[inline(never)]
fn fail(code: dplog_result, msg: impl Into<String>) -> dplog_result {
    let mut m: String = msg.into();
    m.retain(|c| c != '\0');
    let c = CString::new(m).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|l| *l.borrow_mut() = c);
    code
}

/// Runs `f`; a panic becomes [`DPLOG_ERR_PANIC`] (with its message as the
/// last error) instead of unwinding into C.
#[inline(always)]
fn guard<F: FnOnce() -> dplog_result>(f: F) -> dplog_result {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => panicked(p),
    }
}

/// [`guard`] for a call on producer `p`. Debug builds also check that no
/// other thread is inside a library call on the same producer (a producer
/// is used by one thread at a time): the call then fails with
/// [`DPLOG_ERR_STATE`] and changes nothing. Release builds check nothing
/// (no cost on the hot path); the consumer's index validation is what
/// limits the damage there.
#[inline(always)]
fn guard_producer<F: FnOnce() -> dplog_result>(p: *mut dplog_producer_t, f: F) -> dplog_result {
    #[cfg(debug_assertions)]
    {
        guard(|| {
            // SAFETY: p is NULL or returned by dplog_producer_new (the
            // exported functions' contract); producers are never
            // deallocated.
            let _in_use = match unsafe { ProducerInUse::enter(p) } {
                Ok(u) => u,
                Err(e) => return e,
            };
            f()
        })
    }
    #[cfg(not(debug_assertions))]
    {
        let _ = p;
        guard(f)
    }
}

/// A token unique to the calling thread while it lives: the address of a
/// thread-local.
#[cfg(debug_assertions)]
fn thread_token() -> usize {
    thread_local! {
        static TOKEN: u8 = const { 0 };
    }
    TOKEN.with(|t| t as *const u8 as usize)
}

/// Debug builds: the calling thread's claim on a producer for one library
/// call; nested calls on the same thread (a refill calling the exported
/// function) share the outer claim.
#[cfg(debug_assertions)]
struct ProducerInUse<'a>(Option<&'a core::sync::atomic::AtomicUsize>);

#[cfg(debug_assertions)]
impl ProducerInUse<'_> {
    /// # Safety
    /// `p` is NULL or returned by `dplog_producer_new`.
    unsafe fn enter<'a>(p: *mut dplog_producer_t) -> Result<ProducerInUse<'a>, dplog_result> {
        if p.is_null() {
            return Ok(ProducerInUse(None));
        }
        // SAFETY: caller contract; producers are never deallocated.
        let obj = unsafe { &*p };
        // Relaxed: as `check_magic`; a foreign pointer is left to the
        // call's own checks.
        if obj.magic.load(Ordering::Relaxed) != MAGIC_LIVE {
            return Ok(ProducerInUse(None));
        }
        let me = thread_token();
        // Acquire pairs with the Release store of the thread leaving its
        // call, so its writes to the producer are visible to this one.
        match obj
            .user
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => Ok(ProducerInUse(Some(&obj.user))),
            Err(owner) if owner == me => Ok(ProducerInUse(None)),
            Err(_) => Err(fail(
                DPLOG_ERR_STATE,
                "the producer is in use by another thread at this moment (a producer belongs to one thread at a time; checked in debug builds)",
            )),
        }
    }
}

#[cfg(debug_assertions)]
impl Drop for ProducerInUse<'_> {
    fn drop(&mut self) {
        if let Some(u) = self.0 {
            // Release pairs with the next caller's Acquire exchange.
            u.store(0, Ordering::Release);
        }
    }
}

#[cold]
#[inline(never)]
fn panicked(p: Box<dyn std::any::Any + Send>) -> dplog_result {
    let msg = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    // Dropping the payload could itself panic; leak it instead.
    core::mem::forget(p);
    fail(
        DPLOG_ERR_PANIC,
        format!("panic caught at the C boundary: {msg}"),
    )
}

const MAGIC_LIVE: u32 = 0x6470_6c67; // "dplg"
const MAGIC_DEAD: u32 = 0xdead_0d0e;

/// Addresses of closed handles and freed producers. They are never freed:
/// a stale pointer keeps pointing at a dead-marked object. Holding them
/// here keeps them reachable (no leak report from LeakSanitizer/valgrind).
static TOMBSTONES: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn bury(addr: usize) {
    lock(&TOMBSTONES).push(addr);
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[inline(always)]
fn check_magic(m: &AtomicU32, what: &str) -> Result<(), dplog_result> {
    // Relaxed: the magic word only changes under the handle's own
    // discipline (close/free); its partner is the Release store in
    // close/free, which is ordered for the same handle by the state mutex
    // (logger) or by the single-thread rule (producer).
    match m.load(Ordering::Relaxed) {
        MAGIC_LIVE => Ok(()),
        other => Err(bad_magic(other, what)),
    }
}

#[cold]
#[inline(never)]
fn bad_magic(magic: u32, what: &str) -> dplog_result {
    if magic == MAGIC_DEAD {
        fail(DPLOG_ERR_CLOSED, format!("{what} is closed or freed"))
    } else {
        fail(
            DPLOG_ERR_INVALID_ARG,
            format!("pointer is not a {what} (bad magic word)"),
        )
    }
}

/// State shared by a logger and its producers.
struct Shared {
    /// Ring ids with a live producer.
    rings: Mutex<HashSet<u32>>,
    /// Set by `dplog_close`; producers check it before every record.
    closed: AtomicBool,
    /// Address of the `end` field of each live producer's inline window,
    /// by ring id: `dplog_close` empties every window (see
    /// [`dplog_log_window`]). Producers are never deallocated, so the
    /// addresses stay valid; a producer removes its entry when freed.
    windows: Mutex<HashMap<u32, usize>>,
    /// The C ring id of each ring ever created, by (consumer index, ring
    /// id within that consumer's logger): `dplog_close` names stopped
    /// rings by their C id.
    ring_names: Mutex<HashMap<(usize, u32), u32>>,
}

/// Opaque logger handle: one configuration, one sink, one consumer thread,
/// any number of producers. Created by `dplog_open`/`dplog_open_str`,
/// destroyed by `dplog_close`.
pub struct dplog_t {
    magic: AtomicU32,
    shared: Arc<Shared>,
    state: Mutex<State>,
}

enum State {
    Opened(Box<Pending>),
    Started(Box<Running>),
    Closed,
}

struct Pending {
    config: LogConfig,
    /// The sink, opened at `dplog_open` time (fail fast).
    sink: Option<BoxSink>,
    /// Record types registered with `dplog_schema_register`.
    schemas: Vec<Schema>,
}

struct Running {
    /// One logger (consumer thread + sink) per consumer core; ring `r`
    /// is drained by `loggers[r % loggers.len()]`.
    loggers: Vec<Logger<NatRecord>>,
    sizes: Arc<SchemaSizes>,
}

/// Record size by schema id, for the schemas the consumer can format.
struct SchemaSizes(Vec<u8>);

impl SchemaSizes {
    fn new<'a>(schemas: impl Iterator<Item = &'a Schema>) -> Self {
        let mut v = Vec::new();
        for s in schemas {
            let id = usize::from(s.id());
            if v.len() <= id {
                v.resize(id + 1, 0);
            }
            // Sizes above one slot are refused at registration; the
            // built-in NAT records are at most 64 bytes.
            v[id] = s.size().min(DPLOG_RECORD_MAX_SIZE) as u8;
        }
        Self(v)
    }

    /// The record size of `schema_id`; 0 if unknown.
    #[inline(always)]
    fn get(&self, schema_id: u16) -> usize {
        self.0
            .get(usize::from(schema_id))
            .map_or(0, |&n| usize::from(n))
    }
}

/// The consumer's formatter when user schemas are registered: the
/// configured format compiled for the NAT schemas plus the user's.
struct SlotFormatter {
    enc: RecordEncoder,
    kind: Format,
}

impl Formatter<NatRecord> for SlotFormatter {
    #[inline]
    fn format(&mut self, rec: &NatRecord, out: &mut Vec<u8>) {
        self.enc.push(rec.as_bytes(), out);
    }

    fn format_drop_report(&mut self, r: &DropReport, out: &mut Vec<u8>) {
        // As dplog's NatFormatter: an in-band line only where a foreign
        // line cannot corrupt the stream.
        match self.kind {
            Format::Json => r.write_json(out),
            Format::Text | Format::Rfc5424 | Format::Rfc3164 => r.write_text(out),
            _ => {}
        }
    }

    fn tsc_calibration(&mut self, cal: &dplog::tsc::Calibration) {
        // TSC timestamp fields of the user's schemas print as time with
        // the consumer's calibration.
        self.enc.set_tsc_calibration(cal.into());
    }
}

/// Test hook (`DPLOG_FAULT_CONSUMER_PANIC_AFTER=N` at `dplog_start`): the
/// consumer thread panics after formatting `N` records, so C tests can
/// reach `DPLOG_ERR_CONSUMER_GONE`, which no sound input provokes.
struct PanicAfter {
    inner: Box<dyn Formatter<NatRecord>>,
    left: u64,
}

impl Formatter<NatRecord> for PanicAfter {
    fn format(&mut self, rec: &NatRecord, out: &mut Vec<u8>) {
        if self.left == 0 {
            panic!("DPLOG_FAULT_CONSUMER_PANIC_AFTER: injected consumer panic");
        }
        self.left -= 1;
        self.inner.format(rec, out);
    }
    fn format_drop_report(&mut self, r: &DropReport, out: &mut Vec<u8>) {
        self.inner.format_drop_report(r, out);
    }
    fn tsc_calibration(&mut self, cal: &dplog::tsc::Calibration) {
        self.inner.tsc_calibration(cal);
    }
}

/// Opaque producer handle: one SPSC ring into one logger, for one
/// forwarding core. Created by `dplog_producer_new`, destroyed by
/// `dplog_producer_free`. It begins with its [`dplog_log_window`], which
/// the header's inline `dplog_log` reads; the rest is private.
///
/// cbindgen:ignore
#[repr(C)]
pub struct dplog_producer_t {
    window: UnsafeCell<dplog_log_window>,
    magic: AtomicU32,
    inner: UnsafeCell<Option<ProducerState>>,
    /// Debug builds: the thread inside a library call on this producer
    /// (its [`thread_token`]), 0 when none; see [`guard_producer`].
    #[cfg(debug_assertions)]
    user: core::sync::atomic::AtomicUsize,
}

/// The first bytes of every `struct dplog_producer`: a run of free ring
/// slots that the `static inline` `dplog_log` of `dplog.h` fills without a
/// call into the library, as DPDK's inline `rte_ring_sp_enqueue_elem`
/// writes `struct rte_ring` (layout part of the ABI; it changes only with
/// `DPLOG_VERSION_MAJOR`).
///
/// The inline path, on the producer's own thread: if `p`, `rec` are not
/// NULL, `len == 64`, `schema_id < 64` has its bit in `fast_schemas`, and
/// `cursor < end` (unsigned compare; `end` read with a relaxed atomic
/// load), it writes the 8-byte record header (`len` 64, `schema_id`,
/// little-endian) and bytes 8..64 of `rec` to the 64-byte slot at
/// `cursor`, advances `cursor` by 64 and `next_index` by 1 and, if
/// `publish`, stores `next_index` to `*ring_tail` with release ordering
/// (partner: the consumer's acquire load of the ring's tail). Anything else
/// calls `dplog_log_refill`, which logs the record as the exported
/// `dplog_log` does and opens a new window. `dplog_reserve` of one record
/// and its `dplog_commit` are inline the same way (`reservation`), with
/// `dplog_reserve_refill` and the exported `dplog_commit` behind them.
///
/// Every other call on the producer first takes the window back
/// (counting its records as enqueued) and leaves it empty (`cursor` and
/// `end` NULL); so does `dplog_close`, which sets `end` to NULL from its
/// own thread (hence the atomic access). A window never holds more than
/// 63 slots, never wraps, never covers a latency-sampled ring index (one
/// in 64, which the library stamps) and, with `[ring] publish_every` above
/// 1, never lets more than `publish_every - 1` records wait unpublished.
///
/// The consumer trusts no index published here: a `*ring_tail` more than
/// the ring's capacity ahead of what it has read, or behind what it has
/// already accepted, stops the ring (`DPLOG_ERR_RING_STOPPED`). A window
/// used by two threads at once is undefined behaviour (slots may be
/// written outside the window); the check only keeps the consumer from
/// reading a slot twice or looping on stale slots.
#[repr(C)]
pub struct dplog_log_window {
    /// Next slot to write (64 bytes, 8-byte aligned); NULL when no window
    /// is open. Written only by the producer's thread.
    pub cursor: *mut u8,
    /// One past the window's last slot; NULL when no window is open.
    /// Atomic (relaxed): `dplog_close` clears it from another thread.
    pub end: *mut u8,
    /// The ring's published tail index (a free-running count of records).
    pub ring_tail: *mut usize,
    /// Ring index of the slot at `cursor` (free-running).
    pub next_index: usize,
    /// Bit `s` set: schema id `s` (< 64) has 64-byte records, so the
    /// inline path may log it.
    pub fast_schemas: u64,
    /// 1: publish each record as it is written (`publish_every = 1`); 0:
    /// the library publishes the window's records when it takes it back.
    pub publish: u32,
    /// The inline `dplog_reserve` of one record: `0x10000 | schema_id`
    /// while the slot at `cursor` is reserved (zeroed and handed out), 0
    /// otherwise. The inline `dplog_commit` writes its header and
    /// publishes it; while it is set, the inline `dplog_log` and
    /// `dplog_reserve` call into the library (which reports
    /// `DPLOG_ERR_STATE`, as for any pending reservation).
    pub reservation: u32,
}

// The header's inline code casts a `struct dplog_producer *` to the window
// and reads these offsets (repr(C), first field).
const _: () = {
    assert!(core::mem::offset_of!(dplog_producer_t, window) == 0);
    assert!(core::mem::offset_of!(dplog_log_window, end) == size_of::<usize>());
};
#[cfg(target_pointer_width = "64")]
const _: () = assert!(
    core::mem::offset_of!(dplog_log_window, reservation) == 44
        && size_of::<dplog_log_window>() == 48
);

impl dplog_log_window {
    const EMPTY: Self = Self {
        cursor: core::ptr::null_mut(),
        end: core::ptr::null_mut(),
        ring_tail: core::ptr::null_mut(),
        next_index: 0,
        fast_schemas: 0,
        publish: 0,
        reservation: 0,
    };
}

/// The atomic view of a window's `end` field.
///
/// # Safety
/// `w` points at a live (never deallocated) window.
#[inline(always)]
unsafe fn window_end<'a>(w: *mut dplog_log_window) -> &'a AtomicPtr<u8> {
    // SAFETY: `end` is a pointer-aligned `*mut u8`, accessed only
    // atomically (here and in the header's inline code); the window is
    // never deallocated (caller contract).
    unsafe { AtomicPtr::from_ptr(core::ptr::addr_of_mut!((*w).end)) }
}

/// Takes the producer's inline window back, if one is open: the records
/// the inline `dplog_log` wrote count as enqueued (and are published per
/// `publish_every`), and the window is left empty. Called first by every
/// producer call.
///
/// # Safety
/// `obj` is a producer used by the calling thread only; `st` is its state.
#[inline]
unsafe fn take_window(obj: &dplog_producer_t, st: &mut ProducerState) {
    let w = obj.window.get();
    // SAFETY: single-thread rule: only this thread writes cursor and
    // next_index; `end` is accessed atomically.
    unsafe {
        if (*w).cursor.is_null() {
            return;
        }
        let written = (*w).next_index.wrapping_sub(st.window_first);
        let reserved = (*w).cursor;
        let reservation = core::mem::take(&mut (*w).reservation);
        // Relaxed: the owner's own store; close may have nulled it already.
        window_end(w).store(core::ptr::null_mut(), Ordering::Relaxed);
        (*w).cursor = core::ptr::null_mut();
        // The inline path wrote `written` records into the window that
        // open_window handed out, and nothing else touched the producer.
        st.prod.close_window(written);
        if reservation != 0 {
            // An inline dplog_reserve holds the next slot, which is now the
            // producer's write position, free (it was in the window) and
            // zeroed: exactly a reserve_raw(1), so it becomes the pending
            // reservation that dplog_commit (or free) completes.
            st.reservation = Reservation::Ring {
                slots: reserved.cast::<NatRecord>(),
                n: 1,
            };
            st.reserved_schema = reservation as u16;
            st.reserved_size = DPLOG_RECORD_MAX_SIZE;
            st.fast_path = false;
        }
    }
}

/// Opens a new inline window after `dplog_log_refill` logged a record of
/// `schema_id`, when the inline path can log that schema and the
/// producer's policy allows a window (`block` or `drop`, no reservation),
/// and the logger is not closed.
///
/// # Safety
/// As `take_window`; no window is open.
#[inline(never)]
unsafe fn open_window(obj: &dplog_producer_t, st: &mut ProducerState, schema_id: u16) {
    // Only for a record the inline path can log: a window that the next
    // call would give back at once costs more than it saves.
    if !st.fast_path || schema_id >= 64 || st.fast_schemas >> schema_id & 1 == 0 {
        return;
    }
    let Some(win) = st.prod.open_window(usize::MAX) else {
        return;
    };
    let w = obj.window.get();
    st.window_first = win.first;
    // SAFETY: single-thread rule (cursor, next_index, ring_tail, publish,
    // fast_schemas are only written by this thread); the slots are the
    // window's (open_window), `len` of them from `slots`.
    unsafe {
        (*w).ring_tail = win.tail.cast_mut().cast::<usize>();
        (*w).next_index = win.first;
        (*w).fast_schemas = st.fast_schemas;
        (*w).publish = u32::from(win.publish_each);
        let start = win.slots.as_ptr().cast::<u8>();
        (*w).cursor = start;
        // SeqCst, with the SeqCst load of `closed` below, against
        // dplog_close's SeqCst store of `closed` then of `end`: either this
        // thread sees `closed`, or close's NULL store comes after this one.
        window_end(w).store(start.add(win.len * DPLOG_RECORD_MAX_SIZE), Ordering::SeqCst);
    }
    if st.shared.closed.load(Ordering::SeqCst) {
        // SAFETY: the window just opened, nothing written.
        unsafe { take_window(obj, st) };
    }
}

struct ProducerState {
    prod: LogProducer<NatRecord>,
    ring_id: u32,
    shared: Arc<Shared>,
    sizes: Arc<SchemaSizes>,
    /// The policy may drop (`drop` or `degrade`), so a refused record means
    /// "full", not "consumer gone".
    drop_policy: bool,
    /// `block` or `drop`, and no reservation pending: a successful
    /// `try_push` is the whole of `log`.
    fast_path: bool,
    /// `block` or `drop` (what `fast_path` returns to after a commit).
    fast_path_policy: bool,
    /// Staging slots of `dplog_reserve` when it cannot hand out ring slots,
    /// allocated on first use.
    staging: Option<Box<Staging>>,
    /// The pending reservation, and its schema and record size.
    reservation: Reservation,
    reserved_schema: u16,
    reserved_size: usize,
    /// Bit `s`: schema `s` (< 64) has 64-byte records (the window's
    /// `fast_schemas`).
    fast_schemas: u64,
    /// Ring index of the first slot of the open inline window.
    window_first: usize,
}

impl Drop for ProducerState {
    fn drop(&mut self) {
        lock(&self.shared.windows).remove(&self.ring_id);
        lock(&self.shared.rings).remove(&self.ring_id);
    }
}

/// # Safety
/// `h` is NULL or a pointer returned by `dplog_open*` (live or closed).
unsafe fn logger<'a>(h: *const dplog_t) -> Result<&'a dplog_t, dplog_result> {
    if h.is_null() {
        return Err(fail(DPLOG_ERR_NULL, "dplog handle is NULL"));
    }
    // SAFETY: non-NULL and, by the caller's contract, returned by
    // dplog_open*; handles are never deallocated (see TOMBSTONES).
    let l = unsafe { &*h };
    check_magic(&l.magic, "dplog handle")?;
    Ok(l)
}

/// # Safety
/// `p` is NULL or a pointer returned by `dplog_producer_new`, used by one
/// thread at a time.
#[inline(always)]
unsafe fn producer<'a>(p: *mut dplog_producer_t) -> Result<&'a mut ProducerState, dplog_result> {
    if p.is_null() {
        return Err(fail(DPLOG_ERR_NULL, "producer is NULL"));
    }
    // SAFETY: non-NULL and returned by dplog_producer_new; producers are
    // never deallocated (see TOMBSTONES).
    let obj = unsafe { &*p };
    check_magic(&obj.magic, "dplog producer")?;
    // SAFETY: the producer is used by one thread at a time (documented
    // contract), so this is the only reference to its state.
    match unsafe { &mut *obj.inner.get() } {
        Some(st) => {
            // SAFETY: as above; st is obj's state.
            unsafe { take_window(obj, st) };
            // Relaxed: a hint; the partner is the Release store in
            // dplog_close. A record racing with close is either drained
            // or counted in in_flight.
            if st.shared.closed.load(Ordering::Relaxed) {
                return Err(fail(DPLOG_ERR_CLOSED, "the producer's logger is closed"));
            }
            Ok(st)
        }
        None => Err(fail(DPLOG_ERR_CLOSED, "dplog producer is freed")),
    }
}

/// # Safety
/// `out` is NULL or valid for a write of `T`.
unsafe fn write_out<T>(out: *mut T, v: T) {
    if !out.is_null() {
        // SAFETY: non-NULL, and the caller's contract says it is writable.
        unsafe { out.write(v) };
    }
}

fn config_error(e: ConfigError) -> dplog_result {
    let code = match &e {
        ConfigError::Sink(_) => DPLOG_ERR_IO,
        _ => DPLOG_ERR_CONFIG,
    };
    fail(code, e.to_string())
}

fn logger_error(e: LoggerError) -> dplog_result {
    let code = match &e {
        LoggerError::ConsumerGone => DPLOG_ERR_CONSUMER_GONE,
        LoggerError::Io(_) => DPLOG_ERR_IO,
        _ => DPLOG_ERR_CONFIG,
    };
    fail(code, e.to_string())
}

// ---------------------------------------------------------------------------
// Exports
// ---------------------------------------------------------------------------

/// Static, NUL-terminated English message for `code`; never NULL. Unknown
/// codes give "unknown dplog_result". The string is owned by the library.
///
/// Thread-safety: any thread, any time.
#[no_mangle]
pub extern "C" fn dplog_strerror(code: dplog_result) -> *const c_char {
    usize::try_from(code)
        .ok()
        .and_then(|i| MESSAGES.get(i))
        .map_or(c"unknown dplog_result".as_ptr(), |m| m.as_ptr())
}

/// Copies the detailed message of the last failed dplog call on the
/// calling thread (e.g. the config key and line, the errno text) into
/// `buf`, truncated to `buf_len - 1` bytes and NUL-terminated, and stores
/// the full message length (without NUL) in `*msg_len` if `msg_len` is not
/// NULL. An empty message if no call has failed on this thread.
///
/// Errors: `DPLOG_ERR_NULL` if `buf` is NULL while `buf_len > 0`.
/// `buf_len == 0` only reports the length.
///
/// Thread-safety: any thread; the message is per thread.
///
/// # Safety
/// `buf` is valid for `buf_len` bytes; `msg_len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_last_error(
    buf: *mut c_char,
    buf_len: usize,
    msg_len: *mut usize,
) -> dplog_result {
    guard(|| {
        if buf.is_null() && buf_len > 0 {
            return DPLOG_ERR_NULL;
        }
        let msg = LAST_ERROR
            .try_with(|l| l.borrow().as_bytes().to_vec())
            .unwrap_or_default();
        if buf_len > 0 {
            let n = msg.len().min(buf_len - 1);
            // SAFETY: buf is valid for buf_len > n bytes (caller contract);
            // msg is a separate Rust allocation, so they do not overlap.
            unsafe {
                core::ptr::copy_nonoverlapping(msg.as_ptr(), buf.cast::<u8>(), n);
                *buf.add(n) = 0;
            }
        }
        // SAFETY: msg_len is NULL or writable (caller contract).
        unsafe { write_out(msg_len, msg.len()) };
        DPLOG_OK
    })
}

/// Stores the library's own version (from its Cargo.toml) in the three
/// out-params, to compare with the header's `DPLOG_VERSION_*` macros.
///
/// Errors: `DPLOG_ERR_NULL` if any pointer is NULL (nothing written).
/// Thread-safety: any thread.
///
/// # Safety
/// The pointers are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_version(
    major: *mut u32,
    minor: *mut u32,
    patch: *mut u32,
) -> dplog_result {
    guard(|| {
        if major.is_null() || minor.is_null() || patch.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_version: NULL out-param");
        }
        let p = |s: &str| s.parse::<u32>().unwrap_or(u32::MAX);
        // SAFETY: non-NULL and writable (caller contract).
        unsafe {
            major.write(p(env!("CARGO_PKG_VERSION_MAJOR")));
            minor.write(p(env!("CARGO_PKG_VERSION_MINOR")));
            patch.write(p(env!("CARGO_PKG_VERSION_PATCH")));
        }
        DPLOG_OK
    })
}

fn open_config(config: LogConfig, out: *mut *mut dplog_t) -> dplog_result {
    // `[metrics]` is not served through the C ABI yet: refuse it rather
    // than accept a listener that never starts.
    if let Some(a) = config.metrics.prometheus_listen {
        return fail(
            DPLOG_ERR_CONFIG,
            format!(
                "metrics.prometheus_listen = \"{a}\": the C ABI does not serve [metrics] \
                 (use dplog::metrics::MetricsServer from Rust)"
            ),
        );
    }
    // Fail fast: the format compiles and the sink opens now, not at start.
    if let Err(e) = config.format.nat_formatter() {
        return config_error(e);
    }
    let sink = match config.sink.build() {
        Ok(s) => s,
        Err(e) => return fail(DPLOG_ERR_IO, format!("cannot open sink: {e}")),
    };
    let h = Box::new(dplog_t {
        magic: AtomicU32::new(MAGIC_LIVE),
        shared: Arc::new(Shared {
            rings: Mutex::new(HashSet::new()),
            closed: AtomicBool::new(false),
            windows: Mutex::new(HashMap::new()),
            ring_names: Mutex::new(HashMap::new()),
        }),
        state: Mutex::new(State::Opened(Box::new(Pending {
            config,
            sink: Some(sink),
            schemas: Vec::new(),
        }))),
    });
    // SAFETY: out is non-NULL (checked by the callers) and writable.
    unsafe { out.write(Box::into_raw(h)) };
    DPLOG_OK
}

/// Reads the TOML configuration file at `config_path` (keys: see the README
/// and `dplog::config`; every key optional), opens the sink (a file sink's
/// file is created now, mode 0640) and returns a new logger handle in
/// `*out`. No thread is started until `dplog_start`.
///
/// Errors: `DPLOG_ERR_NULL` (a NULL argument), `DPLOG_ERR_INVALID_ARG` (path
/// not UTF-8), `DPLOG_ERR_CONFIG` (file unreadable, bad TOML, unknown key,
/// wrong value; `dplog_last_error` names key and line), `DPLOG_ERR_IO`
/// (sink cannot be opened). `*out` is written only on success.
///
/// Ownership: the caller owns the handle and must release it with
/// `dplog_close`. Thread-safety: any thread.
///
/// # Safety
/// `config_path` is NULL or a NUL-terminated string; `out` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_open(
    config_path: *const c_char,
    out: *mut *mut dplog_t,
) -> dplog_result {
    guard(|| {
        if config_path.is_null() || out.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_open: NULL argument");
        }
        // SAFETY: non-NULL, NUL-terminated (caller contract).
        let path = match unsafe { CStr::from_ptr(config_path) }.to_str() {
            Ok(p) => p,
            Err(_) => return fail(DPLOG_ERR_INVALID_ARG, "config path is not UTF-8"),
        };
        match dplog::config::read_toml::<LogConfig>(std::path::Path::new(path)) {
            Ok(c) => open_config(c, out),
            Err(e) => config_error(e),
        }
    })
}

/// Like `dplog_open`, with the TOML document itself in `toml`
/// (NUL-terminated, UTF-8; an empty string gives every default).
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_INVALID_ARG` (not UTF-8),
/// `DPLOG_ERR_CONFIG`, `DPLOG_ERR_IO`; `*out` is written only on success.
/// Ownership and thread-safety as `dplog_open`.
///
/// # Safety
/// `toml` is NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_open_str(
    toml: *const c_char,
    out: *mut *mut dplog_t,
) -> dplog_result {
    guard(|| {
        if toml.is_null() || out.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_open_str: NULL argument");
        }
        // SAFETY: non-NULL, NUL-terminated (caller contract).
        let text = match unsafe { CStr::from_ptr(toml) }.to_str() {
            Ok(t) => t,
            Err(_) => return fail(DPLOG_ERR_INVALID_ARG, "config text is not UTF-8"),
        };
        match LogConfig::from_toml_str(text) {
            Ok(c) => open_config(c, out),
            Err(e) => config_error(e),
        }
    })
}

/// Registers a user record type described by `n_fields` field descriptors
/// and stores its new schema id (`DPLOG_SCHEMA_USER_FIRST`, then +1 per
/// call) in `*schema_id`. Records of that id are then logged like the
/// built-in ones (`dplog_log(p, id, &rec, record_size)`) and formatted by
/// the configured format with the field names given (text, JSON, ...).
/// `name` names the record type (e.g. in templates). Everything is copied;
/// the arrays may be freed after the call.
///
/// The record starts with a `struct dplog_record_header` (8 bytes, filled
/// by dplog), so fields lie in `8..record_size`; `record_size` is at most
/// `DPLOG_RECORD_MAX_SIZE` (one 64-byte slot).
///
/// Errors: `DPLOG_ERR_NULL` (handle, `name`, `schema_id`, or `fields` with
/// `n_fields > 0`), `DPLOG_ERR_BAD_LENGTH` (`record_size` not in 8..=64),
/// `DPLOG_ERR_INVALID_ARG` (a field out of bounds, overlapping, of a size
/// that does not suit its kind, an unknown kind, a bad or duplicate name;
/// `dplog_last_error` names the field), `DPLOG_ERR_EXISTS` (`name` is
/// already registered on this handle or is a built-in NAT schema's name;
/// schema ids are handed out by dplog, never chosen by the caller, so they
/// cannot collide), `DPLOG_ERR_STATE` (after `dplog_start`: register every
/// type first), `DPLOG_ERR_CLOSED`. On any error no id is used up.
/// Thread-safety: any thread.
///
/// # Safety
/// `name` and every string in the descriptors are NULL or NUL-terminated;
/// `fields` is valid for `n_fields` descriptors, each `enum_names` for
/// `enum_count` entries; `schema_id` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_schema_register(
    h: *mut dplog_t,
    name: *const c_char,
    record_size: usize,
    fields: *const dplog_field_desc,
    n_fields: usize,
    schema_id: *mut u16,
) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        let l = match unsafe { logger(h) } {
            Ok(l) => l,
            Err(e) => return e,
        };
        if name.is_null() || schema_id.is_null() || (fields.is_null() && n_fields > 0) {
            return fail(DPLOG_ERR_NULL, "dplog_schema_register: NULL argument");
        }
        if !(8..=DPLOG_RECORD_MAX_SIZE).contains(&record_size) {
            return fail(
                DPLOG_ERR_BAD_LENGTH,
                format!("record size {record_size}, must be 8..={DPLOG_RECORD_MAX_SIZE}"),
            );
        }
        let mut st = lock(&l.state);
        let pending = match &mut *st {
            State::Opened(p) => p,
            State::Started(_) => {
                return fail(
                    DPLOG_ERR_STATE,
                    "dplog_schema_register: register before dplog_start",
                )
            }
            State::Closed => return fail(DPLOG_ERR_CLOSED, "dplog handle is closed"),
        };
        let Ok(id) = u16::try_from(usize::from(DPLOG_SCHEMA_USER_FIRST) + pending.schemas.len())
        else {
            return fail(DPLOG_ERR_INVALID_ARG, "too many schemas");
        };
        // SAFETY: the caller's contract above; dplog_field_desc has the
        // layout of DplogFieldDesc (checked at compile time above).
        let schema =
            unsafe { Schema::from_c_descriptors(id, name, record_size, fields.cast(), n_fields) };
        match schema {
            Ok(s) => {
                // Names key templates and formatted output, so two types
                // of one name would be ambiguous. Ids are handed out here,
                // never chosen by the caller, so they cannot collide.
                let nat = dplog::schema::nat::all();
                if let Some(prev) = nat
                    .iter()
                    .copied()
                    .chain(pending.schemas.iter())
                    .find(|p| p.name() == s.name())
                {
                    return fail(
                        DPLOG_ERR_EXISTS,
                        format!(
                            "schema name \"{}\" is already registered (id {})",
                            s.name(),
                            prev.id()
                        ),
                    );
                }
                pending.schemas.push(s);
                // SAFETY: non-NULL (checked), writable (caller contract).
                unsafe { schema_id.write(id) };
                DPLOG_OK
            }
            Err(e) => fail(DPLOG_ERR_INVALID_ARG, format!("schema: {e}")),
        }
    })
}

/// Starts the consumer threads (named `dplog-consumer`): one per entry of
/// `cores`, pinned to that CPU, or one when `n_cores == 0` (`cores` may be
/// NULL), pinned to the config's `[ring] consumer_cpu` if set.
///
/// With several consumers, each has its own formatter and its own sink
/// instance and drains its own group of rings: the ring of
/// `dplog_producer_new(h, ring_id, ...)` goes to consumer
/// `ring_id % n_cores` (round-robin over ring ids; choose ids to balance
/// the forwarding cores). Consumer 0 writes the configured sink; consumer
/// `i > 0` writes a file sink's `path` with the suffix `.i` (`nat.log`,
/// `nat.log.1`, `nat.log.2`, ...; in every `[[sink]]` table), an mmap
/// sink's `dir` with the suffix `.i`, and opens its own connection for a
/// syslog or Kafka sink. Records of one ring stay in order; records of
/// rings on different consumers are not ordered with each other.
/// `dplog_stats` and `dplog_close` add the counters of all consumers up;
/// their latency percentiles are the largest of the consumers' (an upper
/// bound). `dplog_flush` and `dplog_reopen` act on every consumer.
///
/// Errors: `DPLOG_ERR_NULL` (handle NULL, or `cores` NULL with
/// `n_cores > 0`), `DPLOG_ERR_INVALID_ARG` (a CPU this process cannot run
/// on, or `n_cores > DPLOG_CONSUMERS_MAX`), `DPLOG_ERR_STATE` (already
/// started), `DPLOG_ERR_CLOSED`, `DPLOG_ERR_CONFIG` (ring settings
/// refused: capacity not a power of two, burst 0, batch below 64 KiB; or
/// the format does not compile for a registered schema), `DPLOG_ERR_IO`
/// (thread or sink failure, e.g. `nat.log.1` cannot be created). All or
/// nothing: on error no consumer runs and the handle stays as it was (not
/// started).
///
/// Thread-safety: any thread; serialized with other calls on the handle.
///
/// # Safety
/// `h` is NULL or returned by `dplog_open*`; `cores` is NULL or valid for
/// `n_cores` elements.
#[no_mangle]
pub unsafe extern "C" fn dplog_start(
    h: *mut dplog_t,
    cores: *const u32,
    n_cores: usize,
) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        let l = match unsafe { logger(h) } {
            Ok(l) => l,
            Err(e) => return e,
        };
        if n_cores > 0 && cores.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_start: cores is NULL");
        }
        if n_cores > DPLOG_CONSUMERS_MAX {
            return fail(
                DPLOG_ERR_INVALID_ARG,
                format!("dplog_start: {n_cores} consumer cores, at most {DPLOG_CONSUMERS_MAX}"),
            );
        }
        let cpus: Vec<usize> = if n_cores == 0 {
            Vec::new()
        } else {
            // SAFETY: cores is non-NULL (checked) and valid for n_cores
            // elements (caller contract).
            unsafe { core::slice::from_raw_parts(cores, n_cores) }
                .iter()
                .map(|&c| c as usize)
                .collect()
        };
        for &c in &cpus {
            if let Err(e) = cpu_allowed(c) {
                return e;
            }
        }
        let mut st = lock(&l.state);
        let pending = match &mut *st {
            State::Opened(p) => p,
            State::Started(_) => return fail(DPLOG_ERR_STATE, "dplog_start: already started"),
            State::Closed => return fail(DPLOG_ERR_CLOSED, "dplog handle is closed"),
        };
        let nat = dplog::schema::nat::all();
        let sizes = Arc::new(SchemaSizes::new(
            nat.iter().copied().chain(pending.schemas.iter()),
        ));
        let n_consumers = cpus.len().max(1);
        let mut loggers = Vec::with_capacity(n_consumers);
        for i in 0..n_consumers {
            let mut cfg = pending.config.clone();
            if let Some(&c) = cpus.get(i) {
                cfg.ring.consumer_cpu = Some(c);
            }
            let started = match consumer_parts(&cfg, &pending.schemas) {
                Ok(formatter) => {
                    // Consumer 0 writes to the sink opened by dplog_open;
                    // consumer i > 0 to its own instance (see dplog_start).
                    let sink = match (i, pending.sink.take()) {
                        (0, Some(s)) => Ok(s),
                        _ => per_consumer_sink(&cfg.sink, i)
                            .build()
                            .map_err(|e| fail(DPLOG_ERR_IO, format!("cannot open sink: {e}"))),
                    };
                    sink.and_then(|sink| {
                        Logger::start(cfg.logger_config(), formatter, sink).map_err(logger_error)
                    })
                }
                Err(e) => Err(e),
            };
            match started {
                Ok(logger) => loggers.push(logger),
                Err(e) => {
                    // All or nothing: stop the consumers already started.
                    // The sinks went down with them; the next start (or
                    // close) opens them again from the config.
                    for lg in loggers {
                        let _ = lg.shutdown();
                    }
                    return e;
                }
            }
        }
        *st = State::Started(Box::new(Running { loggers, sizes }));
        DPLOG_OK
    })
}

/// The formatter of one consumer: the configured format for the NAT
/// schemas and the registered ones (wrapped by the fault hook if set).
fn consumer_parts(
    cfg: &LogConfig,
    schemas: &[Schema],
) -> Result<Box<dyn Formatter<NatRecord>>, dplog_result> {
    let nat = dplog::schema::nat::all();
    let formatter: Box<dyn Formatter<NatRecord>> = if schemas.is_empty() {
        match cfg.format.nat_formatter() {
            Ok(f) => Box::new(f),
            Err(e) => return Err(config_error(e)),
        }
    } else {
        let all: Vec<&Schema> = nat.iter().copied().chain(schemas.iter()).collect();
        match cfg.format.spec().encoder(&all) {
            Ok(enc) => Box::new(SlotFormatter {
                enc,
                kind: cfg.format.kind,
            }),
            Err(e) => return Err(fail(DPLOG_ERR_CONFIG, format!("[format]: {e}"))),
        }
    };
    Ok(
        match std::env::var("DPLOG_FAULT_CONSUMER_PANIC_AFTER")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        {
            Some(left) => Box::new(PanicAfter {
                inner: formatter,
                left,
            }),
            None => formatter,
        },
    )
}

/// The sink configuration of consumer `i`: consumer 0 uses the
/// configured one; consumer `i > 0` appends `.i` to a file sink's `path`
/// and an mmap sink's `dir` (in every `[[sink]]` table); network sinks
/// (syslog, Kafka) get their own connection to the same destination.
fn per_consumer_sink(cfg: &dplog::config::SinkConfig, i: usize) -> dplog::config::SinkConfig {
    use dplog::config::SinkConfig as S;
    fn suffixed(p: &std::path::Path, i: usize) -> std::path::PathBuf {
        let mut s = p.as_os_str().to_owned();
        s.push(format!(".{i}"));
        s.into()
    }
    let mut c = cfg.clone();
    if i > 0 {
        match &mut c {
            S::File(f) => f.path = suffixed(&f.path, i),
            S::Mmap(m) => m.dir = suffixed(&m.dir, i),
            S::Set(v) => *v = v.iter().map(|s| per_consumer_sink(s, i)).collect(),
            _ => {}
        }
    }
    c
}

fn cpu_allowed(cpu: usize) -> Result<(), dplog_result> {
    // SAFETY: cpu_set_t is plain data (all-zero is valid); sched_getaffinity
    // writes at most size_of::<cpu_set_t>() bytes into it.
    let (rc, set) = unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        let rc = libc::sched_getaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &mut set);
        (rc, set)
    };
    let ok = cpu < libc::CPU_SETSIZE as usize
        && (rc != 0
            // SAFETY: cpu < CPU_SETSIZE, so CPU_ISSET reads inside `set`.
            || unsafe { libc::CPU_ISSET(cpu, &set) });
    if ok {
        Ok(())
    } else {
        Err(fail(
            DPLOG_ERR_INVALID_ARG,
            format!("CPU {cpu} is not in this process's affinity mask"),
        ))
    }
}

/// Creates a producer for ring `ring_id` (any number the caller chooses,
/// typically the lcore or worker index): a new SPSC ring of `[ring]
/// capacity` 64-byte slots drained by the logger's consumer. Use it from
/// one thread (core) at a time: a producer shared by two threads at once
/// loses records, and once its ring index breaks the protocol the consumer
/// stops the ring (see `DPLOG_ERR_RING_STOPPED`).
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_STATE` (not started yet),
/// `DPLOG_ERR_CLOSED`, `DPLOG_ERR_RING_IN_USE` (`ring_id` has a live
/// producer; free it first), `DPLOG_ERR_CONSUMER_GONE`. `*out` is written
/// only on success.
///
/// Ownership: the caller owns the producer and releases it with
/// `dplog_producer_free`, before or after `dplog_close` (after close it
/// only returns `DPLOG_ERR_CLOSED`). Thread-safety: any thread.
///
/// # Safety
/// `h` is NULL or returned by `dplog_open*`; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_producer_new(
    h: *mut dplog_t,
    ring_id: u32,
    out: *mut *mut dplog_producer_t,
) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        let l = match unsafe { logger(h) } {
            Ok(l) => l,
            Err(e) => return e,
        };
        if out.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_producer_new: out is NULL");
        }
        let st = lock(&l.state);
        let run = match &*st {
            State::Started(r) => r,
            State::Opened(_) => {
                return fail(
                    DPLOG_ERR_STATE,
                    "dplog_producer_new: call dplog_start first",
                )
            }
            State::Closed => return fail(DPLOG_ERR_CLOSED, "dplog handle is closed"),
        };
        if !lock(&l.shared.rings).insert(ring_id) {
            return fail(
                DPLOG_ERR_RING_IN_USE,
                format!("ring {ring_id} already has a producer"),
            );
        }
        let consumer_index = ring_id as usize % run.loggers.len();
        let consumer = &run.loggers[consumer_index];
        let prod = match consumer.producer() {
            Ok(p) => p,
            Err(e) => {
                lock(&l.shared.rings).remove(&ring_id);
                return logger_error(e);
            }
        };
        lock(&l.shared.ring_names).insert((consumer_index, prod.ring_id()), ring_id);
        let drop_policy = prod.policy() != dplog::Backpressure::Block;
        let fast_path = matches!(
            prod.policy(),
            dplog::Backpressure::Block | dplog::Backpressure::Drop
        );
        let fast_schemas = (0..64u16)
            .filter(|&id| run.sizes.get(id) == DPLOG_RECORD_MAX_SIZE)
            .fold(0u64, |bits, id| bits | 1 << id);
        let obj = Box::new(dplog_producer_t {
            window: UnsafeCell::new(dplog_log_window::EMPTY),
            magic: AtomicU32::new(MAGIC_LIVE),
            #[cfg(debug_assertions)]
            user: core::sync::atomic::AtomicUsize::new(0),
            inner: UnsafeCell::new(Some(ProducerState {
                prod,
                ring_id,
                shared: l.shared.clone(),
                sizes: run.sizes.clone(),
                drop_policy,
                fast_path,
                fast_path_policy: fast_path,
                staging: None,
                reservation: Reservation::None,
                reserved_schema: 0,
                reserved_size: 0,
                fast_schemas,
                window_first: 0,
            })),
        });
        lock(&l.shared.windows).insert(
            ring_id,
            // The window's `end` field, for dplog_close.
            obj.window.get() as usize,
        );
        // SAFETY: out is non-NULL (checked) and writable (caller contract).
        unsafe { out.write(Box::into_raw(obj)) };
        DPLOG_OK
    })
}

/// Releases a producer: its ring is drained by the consumer and then
/// removed, and its `ring_id` can be used again. A pending reservation is
/// discarded.
///
/// `p == NULL` is a no-op returning `DPLOG_OK`. A second free of the same
/// pointer is a no-op returning `DPLOG_ERR_CLOSED` (the pointer keeps
/// pointing at a dead-marked object, never at freed memory).
///
/// Thread-safety: not concurrently with any other call on the same
/// producer.
///
/// # Safety
/// `p` is NULL or returned by `dplog_producer_new`.
#[no_mangle]
pub unsafe extern "C" fn dplog_producer_free(p: *mut dplog_producer_t) -> dplog_result {
    guard_producer(p, || {
        if p.is_null() {
            return DPLOG_OK;
        }
        // SAFETY: returned by dplog_producer_new, never deallocated.
        let obj = unsafe { &*p };
        if let Err(e) = check_magic(&obj.magic, "dplog producer") {
            return e;
        }
        // SAFETY: single-thread rule for producers; no other reference.
        if let Some(st) = unsafe { &mut *obj.inner.get() } {
            // SAFETY: as above. The records of the inline window count
            // and are published before the ring's producer is dropped.
            unsafe { take_window(obj, st) };
        }
        // Release: partner of the Relaxed magic check of a later call on
        // the same thread (or one synchronised with it by the caller).
        obj.magic.store(MAGIC_DEAD, Ordering::Release);
        // SAFETY: single-thread rule for producers; no other reference.
        let state = unsafe { (*obj.inner.get()).take() };
        drop(state);
        bury(p as usize);
        DPLOG_OK
    })
}

/// Copies `len` bytes at `rec` into a 64-byte slot record with a fresh
/// header (`len`, `schema_id`).
///
/// # Safety
/// `rec` is valid for `len` bytes, `8 <= len <= 64`.
#[inline(always)]
unsafe fn slot_from_c(rec: *const u8, len: usize, schema_id: u16) -> NatRecord {
    if len == DPLOG_RECORD_MAX_SIZE {
        // Fast path (NAT44 and any 64-byte record): eight 8-byte words, the
        // header built in a register, so the slot write that follows needs
        // no second copy and no partial-store forwarding.
        let header = u64::from(len as u16) | (u64::from(schema_id) << 16);
        let mut words = [0u64; 8];
        words[0] = if cfg!(target_endian = "little") {
            header
        } else {
            header.swap_bytes()
        };
        for (i, w) in words.iter_mut().enumerate().skip(1) {
            // SAFETY: rec is valid for 64 bytes; word i is bytes 8i..8i+8.
            *w = unsafe { core::ptr::read_unaligned(rec.add(8 * i).cast::<u64>()) };
        }
        // SAFETY: NatRecord is repr(C, align(8)) around [u8; 64] (size and
        // alignment checked below), so any 64 initialised bytes with the
        // same alignment are a valid value; its invariant (bytes past
        // header.len are zero) holds trivially for len 64.
        return unsafe { core::mem::transmute::<[u64; 8], NatRecord>(words) };
    }
    let mut buf = [0u8; DPLOG_RECORD_MAX_SIZE];
    // SAFETY: rec is valid for len bytes (contract), buf holds 64 >= len;
    // distinct allocations, so no overlap.
    unsafe { core::ptr::copy_nonoverlapping(rec, buf.as_mut_ptr(), len) };
    buf[0..2].copy_from_slice(&(len as u16).to_ne_bytes());
    buf[2..4].copy_from_slice(&schema_id.to_ne_bytes());
    buf[4..8].fill(0);
    // The header now says `len`, which is what from_bytes checks.
    NatRecord::from_bytes(&buf[..len]).unwrap_or_else(|| unreachable!("header matches length"))
}

/// Copies the 64-byte record at `rec` into `dst` with its header set to
/// (64, `schema_id`, 0, 0).
///
/// # Safety
/// `rec` is valid for 64 bytes (any alignment); `dst` for 64 bytes,
/// 8-byte aligned, and not overlapping `rec`.
#[inline(always)]
unsafe fn copy_into_slot(rec: *const u8, dst: *mut u64, schema_id: u16) {
    let header = u64::from(DPLOG_RECORD_MAX_SIZE as u16) | (u64::from(schema_id) << 16);
    let header = if cfg!(target_endian = "little") {
        header
    } else {
        header.swap_bytes()
    };
    // SAFETY: dst is valid and aligned for 8 words (contract).
    unsafe { dst.write(header) };
    for i in 1..8 {
        // SAFETY: word i is bytes 8i..8i+8 of both 64-byte areas.
        unsafe {
            let w = core::ptr::read_unaligned(rec.add(8 * i).cast::<u64>());
            dst.add(i).write(w);
        }
    }
}

/// How far ahead of the slot just written `dplog_log` prefetches for
/// writing, as the ring's own `try_push` (dplog_core::ring).
const PREFETCH_AHEAD_BYTES: usize = 2048;

/// Hints the CPU to fetch the line at `p` for writing (`prefetchw` on
/// x86-64, nothing elsewhere), so a later slot write does not wait for the
/// consumer's core to give the line up. `p` may point anywhere.
#[inline(always)]
fn prefetch_write(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetchw` is a hint: it never faults (even on an unmapped
    // address) and changes no memory or register.
    unsafe {
        core::arch::asm!(
            "prefetchw [{p}]",
            p = in(reg) p,
            options(nostack, preserves_flags, readonly)
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

const _: () = {
    assert!(core::mem::size_of::<NatRecord>() == 64);
    assert!(core::mem::align_of::<NatRecord>() == 8);
};

/// The record size of `schema_id`, or the error for it and `len`.
#[inline(always)]
fn check_schema(st: &ProducerState, schema_id: u16, len: usize) -> Result<usize, dplog_result> {
    // The common case without the table lookup.
    if schema_id == DPLOG_SCHEMA_NAT44_SESSION && len == DPLOG_NAT44_SESSION_SIZE {
        return Ok(len);
    }
    let size = st.sizes.get(schema_id);
    if size == 0 {
        return Err(fail(
            DPLOG_ERR_UNKNOWN_SCHEMA,
            format!("unknown schema id {schema_id}"),
        ));
    }
    if len != size {
        return Err(fail(
            DPLOG_ERR_BAD_LENGTH,
            format!("record length {len}, schema {schema_id} records are {size} bytes"),
        ));
    }
    Ok(size)
}

#[cold]
#[inline(never)]
fn reservation_pending(what: &str) -> dplog_result {
    fail(
        DPLOG_ERR_STATE,
        format!("{what}: a dplog_reserve is pending; dplog_commit it first"),
    )
}

#[cold]
#[inline(never)]
fn not_enqueued(st: &ProducerState, n: usize) -> dplog_result {
    if st.prod.is_stopped() {
        fail(
            DPLOG_ERR_RING_STOPPED,
            format!(
                "ring {}: the consumer stopped reading this ring after its producer published an index that breaks the ring protocol (is the producer used by two threads?); {n} record(s) dropped",
                st.ring_id
            ),
        )
    } else if st.prod.is_disconnected() {
        fail(
            DPLOG_ERR_CONSUMER_GONE,
            format!(
                "ring {}: the consumer thread has stopped; {n} record(s) dropped",
                st.ring_id
            ),
        )
    } else if st.drop_policy {
        fail(
            DPLOG_ERR_FULL,
            format!(
                "ring {}: {n} record(s) dropped (ring full, or below the degrade priority)",
                st.ring_id
            ),
        )
    } else {
        fail(DPLOG_ERR_CLOSED, "the consumer is gone; record(s) dropped")
    }
}

/// Copies one record of schema `schema_id` (`len` bytes at `rec`, any
/// alignment) into the producer's ring. Its header is filled by dplog.
/// Under `backpressure = "block"` it waits (spin, then yield) while the
/// ring is full; under `"drop"` a full ring drops the record, counts it and
/// returns `DPLOG_ERR_FULL` (under `"degrade"` also a record below the
/// priority when the ring is above its high watermark).
///
/// Schemas: `DPLOG_SCHEMA_NAT44_SESSION` (`struct dplog_nat44_session`, 64
/// bytes), `DPLOG_SCHEMA_NAT_PORT_BLOCK` (40), `..._ADDRESSES_EXHAUSTED`
/// (24), `..._PORTS_EXHAUSTED` (24), `..._QUOTA_EXCEEDED` (32), and the ids
/// from `dplog_schema_register`.
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_UNKNOWN_SCHEMA`,
/// `DPLOG_ERR_BAD_LENGTH` (`len` is not the schema's record size),
/// `DPLOG_ERR_FULL`, `DPLOG_ERR_CLOSED` (producer freed or logger closed),
/// `DPLOG_ERR_CONSUMER_GONE` (the ring is full and the consumer thread has
/// died; the record is dropped and counted), `DPLOG_ERR_RING_STOPPED` (the
/// consumer stopped this ring after a protocol violation and it is full;
/// the record is dropped and counted), `DPLOG_ERR_STATE` (a
/// `dplog_reserve` is pending on this producer), `DPLOG_ERR_INVALID_ARG`
/// (not a producer). On an
/// argument error nothing is enqueued or counted.
///
/// Cost: a few nanoseconds, no allocation, no lock, no system call unless
/// the ring is full under "block". From C, the common case (a 64-byte
/// record, `block` or `drop`) is compiled inline by the `dplog_log` macro
/// at the end of this header (see `struct dplog_log_window`); this
/// function is what `DPLOG_NO_INLINE`, `(dplog_log)(...)` and other
/// languages call. Thread-safety: one thread at a time per producer;
/// different producers in parallel. Two threads logging on one producer at
/// once lose records without trace and can make its ring index move
/// backwards; the consumer then stops the ring (`DPLOG_ERR_RING_STOPPED`)
/// rather than read stale slots.
///
/// # Safety
/// `p` is NULL or returned by `dplog_producer_new`; `rec` is NULL or valid
/// for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn dplog_log(
    p: *mut dplog_producer_t,
    schema_id: u16,
    rec: *const c_void,
    len: usize,
) -> dplog_result {
    // SAFETY: caller contract on p and rec.
    guard_producer(p, || unsafe { log_one(p, schema_id, rec, len) })
}

/// The body of `dplog_log`: the fast path, else every check.
///
/// # Safety
/// As `dplog_log`.
#[inline(always)]
unsafe fn log_one(
    p: *mut dplog_producer_t,
    schema_id: u16,
    rec: *const c_void,
    len: usize,
) -> dplog_result {
    // SAFETY: caller contract on p and rec.
    if unsafe { log_fast(p, schema_id, rec, len) } {
        return DPLOG_OK;
    }
    // SAFETY: caller contract on p and rec.
    unsafe { log_slow(p, schema_id, rec, len) }
}

/// A live producer's object and state with its inline window taken back;
/// `None` for NULL, a freed or a foreign pointer (the caller's full path
/// then reports it).
///
/// # Safety
/// `p` is NULL or returned by `dplog_producer_new`, used by the calling
/// thread only.
#[inline(always)]
unsafe fn live_taken<'a>(
    p: *mut dplog_producer_t,
) -> Option<(&'a dplog_producer_t, &'a mut ProducerState)> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-NULL and returned by dplog_producer_new (caller
    // contract); producers are never deallocated (see TOMBSTONES).
    let obj = unsafe { &*p };
    // Relaxed: as `check_magic` (partner: the Release store in free).
    if obj.magic.load(Ordering::Relaxed) != MAGIC_LIVE {
        return None;
    }
    // SAFETY: single-thread rule: the only reference to the state.
    let st = unsafe { &mut *obj.inner.get() }.as_mut()?;
    // SAFETY: as above; st is obj's state.
    unsafe { take_window(obj, st) };
    Some((obj, st))
}

/// `dplog_log` for the header's inline `dplog_log`: called when its
/// window is used up or empty, or the record is not one it logs itself
/// (not 64 bytes, or a schema id without its bit in `fast_schemas`). Takes
/// the window back, logs the record exactly as the exported `dplog_log`
/// (same checks, errors and counting), and, when that succeeded with a
/// 64-byte record, opens the next window (see `struct dplog_log_window`).
///
/// C code calls `dplog_log`; with `DPLOG_NO_INLINE` defined (or from a
/// language that cannot use the header's inline code) `dplog_log` is the
/// exported function, which never opens a window.
///
/// Errors: as `dplog_log`. Thread-safety: as `dplog_log`.
///
/// # Safety
/// As `dplog_log`.
#[no_mangle]
pub unsafe extern "C" fn dplog_log_refill(
    p: *mut dplog_producer_t,
    schema_id: u16,
    rec: *const c_void,
    len: usize,
) -> dplog_result {
    guard_producer(p, || {
        // SAFETY: caller contract on p (the window is given back first).
        let _ = unsafe { live_taken(p) };
        // SAFETY: caller contract on p and rec; the window is empty.
        let r = unsafe { log_one(p, schema_id, rec, len) };
        if r == DPLOG_OK && len == DPLOG_RECORD_MAX_SIZE {
            // SAFETY: as above; r == OK means p is a live producer.
            if let Some((obj, st)) = unsafe { live_taken(p) } {
                // SAFETY: single-thread rule; the window is empty.
                unsafe { open_window(obj, st, schema_id) };
            }
        }
        r
    })
}

/// The whole of `dplog_log` in the common case — a live producer, a
/// 64-byte record of a known schema, `block` or `drop`, no reservation,
/// a ring with room: the record goes from the caller's memory straight
/// into its ring slot (eight 8-byte loads and stores, the header built in
/// a register; through a `NatRecord` value it took a trip through the
/// stack, stored in 8-byte and re-read in 16-byte pieces, a
/// store-forwarding stall per call). Returns false, having changed
/// nothing, in every other case, which `log_slow` then handles with the
/// full checks and their error codes. Kept free of anything that needs a
/// stack frame.
///
/// # Safety
/// As `dplog_log`.
#[inline(always)]
unsafe fn log_fast(
    p: *mut dplog_producer_t,
    schema_id: u16,
    rec: *const c_void,
    len: usize,
) -> bool {
    if p.is_null() || rec.is_null() || len != DPLOG_RECORD_MAX_SIZE {
        return false;
    }
    // SAFETY: non-NULL and returned by dplog_producer_new (caller
    // contract); producers are never deallocated (see TOMBSTONES).
    let obj = unsafe { &*p };
    // Relaxed: as `check_magic` (partner: the Release store in free).
    // An open inline window is taken back by log_slow first.
    // SAFETY: `cursor` is written only by this thread (single-thread rule).
    if obj.magic.load(Ordering::Relaxed) != MAGIC_LIVE
        || !unsafe { (*obj.window.get()).cursor }.is_null()
    {
        return false;
    }
    // SAFETY: one thread at a time per producer (documented contract), so
    // this is the only reference to its state.
    let Some(st) = (unsafe { &mut *obj.inner.get() }) else {
        return false;
    };
    // fast_path: `block` or `drop` and no reservation pending. Relaxed
    // `closed`: a hint, as in `producer()` (partner: the Release store in
    // dplog_close).
    if !st.fast_path
        || st.shared.closed.load(Ordering::Relaxed)
        || (schema_id != DPLOG_SCHEMA_NAT44_SESSION && st.sizes.get(schema_id) != len)
    {
        return false;
    }
    let Some(slot) = st.prod.reserve_raw(1) else {
        return false;
    };
    // SAFETY: rec is valid for 64 bytes (contract); reserve_raw handed out
    // one free 64-byte slot that only this producer writes until
    // commit_raw publishes it.
    unsafe { copy_into_slot(rec.cast(), slot.as_ptr().cast(), schema_id) };
    // SAFETY: the slot of reserve_raw(1) now holds a valid 64-byte record;
    // nothing touched the producer in between.
    unsafe { st.prod.commit_raw(1) };
    prefetch_write(
        slot.as_ptr()
            .cast::<u8>()
            .wrapping_add(PREFETCH_AHEAD_BYTES),
    );
    true
}

/// `dplog_log` with every check and error code, for what `log_fast` left.
///
/// # Safety
/// As `dplog_log`.
#[inline(never)]
unsafe fn log_slow(
    p: *mut dplog_producer_t,
    schema_id: u16,
    rec: *const c_void,
    len: usize,
) -> dplog_result {
    // SAFETY: caller contract on p.
    let st = match unsafe { producer(p) } {
        Ok(s) => s,
        Err(e) => return e,
    };
    if let Err(e) = check_schema(st, schema_id, len) {
        return e;
    }
    if rec.is_null() {
        return fail(DPLOG_ERR_NULL, "dplog_log: rec is NULL");
    }
    // fast_path is off while a reservation holds the slots at the write
    // position.
    if !matches!(st.reservation, Reservation::None) {
        return reservation_pending("dplog_log");
    }
    // SAFETY: rec is non-NULL and valid for len (checked 8..=64) bytes.
    let r = unsafe { slot_from_c(rec.cast(), len, schema_id) };
    if st.prod.log(r) {
        DPLOG_OK
    } else {
        not_enqueued(st, 1)
    }
}

/// Copies `n` records of `rec_len` bytes each, packed back to back at
/// `recs`, into the producer's ring with one index publish per chunk of 32.
/// `*n_enqueued` (if not NULL) receives how many were enqueued; under
/// `"drop"`/`"degrade"` the rest were dropped and counted, and the result
/// is `DPLOG_ERR_FULL`. Under `"block"` all are enqueued (or the logger is
/// closed: `DPLOG_ERR_CLOSED`). `n == 0` is `DPLOG_OK` (`recs` may be NULL).
///
/// Errors: as `dplog_log`, and `DPLOG_ERR_INVALID_ARG` when `n * rec_len`
/// overflows `size_t`, exceeds `PTRDIFF_MAX` or runs past the end of the
/// address space from `recs`; on an argument error nothing is enqueued
/// and `*n_enqueued` is not written.
///
/// Thread-safety: one thread at a time per producer.
///
/// # Safety
/// `recs` is NULL or valid for `n * rec_len` bytes; `n_enqueued` is NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_log_burst(
    p: *mut dplog_producer_t,
    schema_id: u16,
    recs: *const c_void,
    rec_len: usize,
    n: usize,
    n_enqueued: *mut usize,
) -> dplog_result {
    guard_producer(p, || {
        // SAFETY: caller contract on p.
        let st = match unsafe { producer(p) } {
            Ok(s) => s,
            Err(e) => return e,
        };
        if let Err(e) = check_schema(st, schema_id, rec_len) {
            return e;
        }
        if n > 0 && recs.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_log_burst: recs is NULL");
        }
        // n * rec_len bytes must be a real object: no overflow of size_t,
        // at most PTRDIFF_MAX (Rust's pointer-offset limit), and not past
        // the end of the address space.
        let fits = n
            .checked_mul(rec_len)
            .filter(|&total| total <= isize::MAX as usize)
            .and_then(|total| (recs as usize).checked_add(total));
        if fits.is_none() {
            return fail(
                DPLOG_ERR_INVALID_ARG,
                format!(
                    "dplog_log_burst: n = {n} records of {rec_len} bytes overflow the address space"
                ),
            );
        }
        if !matches!(st.reservation, Reservation::None) {
            return reservation_pending("dplog_log_burst");
        }
        let done = push_chunked(st, recs.cast(), rec_len, rec_len, n, schema_id);
        // SAFETY: NULL or writable (caller contract).
        unsafe { write_out(n_enqueued, done) };
        if done == n {
            DPLOG_OK
        } else {
            not_enqueued(st, n - done)
        }
    })
}

/// Pushes `n` records of `size` bytes, `stride` bytes apart from `base`,
/// in chunks of 32; returns how many were enqueued.
fn push_chunked(
    st: &mut ProducerState,
    base: *const u8,
    stride: usize,
    size: usize,
    n: usize,
    id: u16,
) -> usize {
    const CHUNK: usize = 32;
    let mut chunk = [NatRecord::from_bytes(&[8, 0, 0, 0, 0, 0, 0, 0])
        .unwrap_or_else(|| unreachable!("an 8-byte header-only record"));
        CHUNK];
    let mut done = 0usize;
    let mut i = 0usize;
    while i < n {
        let k = (n - i).min(CHUNK);
        for (j, slot) in chunk[..k].iter_mut().enumerate() {
            // SAFETY: (i + j) < n, so the record lies inside the caller's
            // n * stride bytes (the callers' contracts); 8 <= size <= 64,
            // size <= stride.
            *slot = unsafe { slot_from_c(base.add((i + j) * stride), size, id) };
        }
        done += st.prod.log_burst(&chunk[..k]);
        i += k;
    }
    done
}

/// Staging slots of a reservation that cannot be zero-copy (64-byte
/// aligned, one 64-byte slot per record, as the ring's).
#[repr(C, align(64))]
struct Staging([[u8; DPLOG_RECORD_MAX_SIZE]; DPLOG_RESERVE_MAX]);

/// Where a pending reservation lives.
enum Reservation {
    /// Nothing reserved.
    None,
    /// `n` slots of the ring itself, at the producer's write position
    /// (`Producer::reserve_raw`).
    Ring { slots: *mut NatRecord, n: usize },
    /// `n` slots of the producer's staging area, copied at commit.
    Staging { n: usize },
}

/// `dplog_reserve` for the header's inline `dplog_reserve`: called when
/// its window is used up or empty, or the call is not one it handles
/// itself (`n` other than 1, a schema id without its bit in
/// `fast_schemas`, NULL arguments). Takes the window back and, for one
/// 64-byte record with no reservation pending, opens a new window and
/// reserves its first slot inline (so the inline `dplog_commit` can
/// publish it); otherwise behaves exactly as the exported `dplog_reserve`.
///
/// Errors: as `dplog_reserve`. Thread-safety: as `dplog_reserve`.
///
/// # Safety
/// As `dplog_reserve`.
#[no_mangle]
pub unsafe extern "C" fn dplog_reserve_refill(
    p: *mut dplog_producer_t,
    schema_id: u16,
    n: usize,
    slots: *mut *mut c_void,
) -> dplog_result {
    guard_producer(p, || {
        // SAFETY: caller contract on p (the window is given back first).
        if let Some((obj, st)) = unsafe { live_taken(p) } {
            if n == 1
                && !slots.is_null()
                && matches!(st.reservation, Reservation::None)
                && !st.shared.closed.load(Ordering::Relaxed)
            {
                // SAFETY: single-thread rule; the window is empty.
                unsafe { open_window(obj, st, schema_id) };
                let w = obj.window.get();
                // SAFETY: single-thread rule; a non-NULL cursor is the
                // first of the window's free slots (open_window); slots is
                // non-NULL and writable (caller contract).
                unsafe {
                    let slot = (*w).cursor;
                    if !slot.is_null() {
                        slot.write_bytes(0, DPLOG_RECORD_MAX_SIZE);
                        (*w).reservation = 0x1_0000 | u32::from(schema_id);
                        slots.write(slot.cast());
                        return DPLOG_OK;
                    }
                }
            }
        }
        // SAFETY: caller contract.
        unsafe { dplog_reserve(p, schema_id, n, slots) }
    })
}

/// Reserves `n` (1..=`DPLOG_RESERVE_MAX`) records of schema `schema_id`
/// and stores in `*slots` a pointer to `n` zeroed 64-byte slots to fill in
/// place, then publish with `dplog_commit`. Record `i` starts at
/// `(char *)*slots + i * DPLOG_RECORD_MAX_SIZE` whatever the schema's
/// size (for NAT44 that is simply `struct dplog_nat44_session[n]`); only
/// its first record-size bytes are published (the rest of the slot is
/// zeroed at commit).
///
/// Zero-copy: when the ring has `n` free slots that do not wrap past the
/// end of its slot array, `*slots` points into the ring itself and
/// `dplog_commit` only writes the headers and publishes the tail index.
/// Under `backpressure = "block"` it waits (spin, then yield) for the
/// slots. Otherwise — the reservation would wrap (at most once per lap
/// of the ring), the ring is full under `"drop"`, or the policy is
/// `"degrade"` (which judges each record's priority) — `*slots` points
/// into a per-producer staging area that `dplog_commit` copies into the
/// ring under the policy, as `dplog_log_burst` does. Both look the same to
/// the caller.
///
/// Pointer: 64-byte aligned; valid for `n * DPLOG_RECORD_MAX_SIZE` bytes
/// until the next `dplog_commit` or `dplog_producer_free` on this
/// producer; it must not be used after either. While a reservation is
/// pending, `dplog_log`, `dplog_log_burst` and `dplog_reserve` on this
/// producer return `DPLOG_ERR_STATE`.
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_UNKNOWN_SCHEMA`,
/// `DPLOG_ERR_INVALID_ARG` (`n` is 0 or above `DPLOG_RESERVE_MAX`),
/// `DPLOG_ERR_STATE` (a reservation is pending), `DPLOG_ERR_CLOSED`,
/// `DPLOG_ERR_CONSUMER_GONE` (waiting for room under `"block"` while the
/// consumer thread has died). `*slots` is written only on success.
///
/// Thread-safety: one thread at a time per producer.
///
/// # Safety
/// `slots` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_reserve(
    p: *mut dplog_producer_t,
    schema_id: u16,
    n: usize,
    slots: *mut *mut c_void,
) -> dplog_result {
    guard_producer(p, || {
        // SAFETY: caller contract on p.
        let st = match unsafe { producer(p) } {
            Ok(s) => s,
            Err(e) => return e,
        };
        let size = st.sizes.get(schema_id);
        if size == 0 {
            return fail(
                DPLOG_ERR_UNKNOWN_SCHEMA,
                format!("unknown schema id {schema_id}"),
            );
        }
        if slots.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_reserve: slots is NULL");
        }
        if n == 0 || n > DPLOG_RESERVE_MAX {
            return fail(
                DPLOG_ERR_INVALID_ARG,
                format!("dplog_reserve: n = {n}, must be 1..={DPLOG_RESERVE_MAX}"),
            );
        }
        if !matches!(st.reservation, Reservation::None) {
            return fail(DPLOG_ERR_STATE, "dplog_reserve: a reservation is pending");
        }
        let policy = st.prod.policy();
        let mut ring_slots = None;
        if policy != dplog::Backpressure::Degrade && n <= st.prod.contiguous_slots() {
            let mut spins = 0u32;
            loop {
                if let Some(ptr) = st.prod.reserve_raw(n) {
                    ring_slots = Some(ptr.as_ptr());
                    break;
                }
                if policy == dplog::Backpressure::Drop {
                    break; // full: staged, and commit drops what does not fit
                }
                if st.prod.is_disconnected() {
                    return fail(
                        DPLOG_ERR_CONSUMER_GONE,
                        "dplog_reserve: the consumer thread has stopped",
                    );
                }
                if st.prod.is_stopped() {
                    return not_enqueued(st, 0);
                }
                // Relaxed: a hint, as in `producer()`; the partner is the
                // Release store in dplog_close (whose drain frees room).
                if st.shared.closed.load(Ordering::Relaxed) {
                    return fail(DPLOG_ERR_CLOSED, "the producer's logger is closed");
                }
                spins += 1;
                if spins < 1024 {
                    core::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
        let base: *mut u8 = match ring_slots {
            Some(ptr) => {
                // SAFETY: reserve_raw handed out n free, contiguous slots of
                // 64 bytes that only this producer may write until it
                // commits; zeroing makes them initialised records-to-be.
                unsafe { core::ptr::write_bytes(ptr, 0, n) };
                st.reservation = Reservation::Ring { slots: ptr, n };
                ptr.cast()
            }
            None => {
                let staging = st.staging.get_or_insert_with(|| {
                    Box::new(Staging([[0; DPLOG_RECORD_MAX_SIZE]; DPLOG_RESERVE_MAX]))
                });
                staging.0[..n].iter_mut().for_each(|s| s.fill(0));
                st.reservation = Reservation::Staging { n };
                staging.0.as_mut_ptr().cast()
            }
        };
        st.reserved_schema = schema_id;
        st.reserved_size = size;
        st.fast_path = false;
        // SAFETY: slots is non-NULL (checked) and writable (contract).
        unsafe { slots.write(base.cast()) };
        DPLOG_OK
    })
}

/// Makes every record this producer has logged visible to the consumer.
///
/// Needed only when the configuration sets `[ring] publish_every` above 1:
/// the producer then publishes its ring index once per that many records
/// (one shared-memory store per batch instead of per record), and records
/// logged since the last publication wait until the next one, a full ring,
/// this call or `dplog_producer_free`. Call it once per iteration of the
/// forwarding loop, after the rx burst is processed, as DPDK code calls
/// `rte_eth_tx_buffer_flush`. With the default (`publish_every = 1`) it
/// does nothing. A pending reservation is not affected (it is published by
/// `dplog_commit`).
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_CLOSED` (freed producer or closed
/// handle).
///
/// Thread-safety: one thread at a time per producer, like `dplog_log`.
///
/// # Safety
/// `p` is NULL or returned by `dplog_producer_new`.
#[no_mangle]
pub unsafe extern "C" fn dplog_producer_flush(p: *mut dplog_producer_t) -> dplog_result {
    guard_producer(p, || {
        // SAFETY: caller contract on p.
        let st = match unsafe { producer(p) } {
            Ok(s) => s,
            Err(e) => return e,
        };
        st.prod.flush();
        DPLOG_OK
    })
}

/// Publishes the first `n` records of the pending reservation (their
/// headers are filled by dplog) and ends it; the other reserved records
/// are discarded, so `n == 0` cancels. `*n_enqueued` (if not NULL)
/// receives how many were enqueued: `n` for a zero-copy reservation (its
/// slots were the ring's); for a staged one, backpressure as
/// `dplog_log_burst`.
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_STATE` (no reservation),
/// `DPLOG_ERR_INVALID_ARG` (`n` above the reserved count; the reservation
/// stays pending), `DPLOG_ERR_FULL`, `DPLOG_ERR_CLOSED`,
/// `DPLOG_ERR_CONSUMER_GONE`.
///
/// Thread-safety: one thread at a time per producer.
///
/// # Safety
/// `n_enqueued` is NULL or writable; the reserved slots were written only
/// within their `n * DPLOG_RECORD_MAX_SIZE` bytes.
#[no_mangle]
pub unsafe extern "C" fn dplog_commit(
    p: *mut dplog_producer_t,
    n: usize,
    n_enqueued: *mut usize,
) -> dplog_result {
    guard_producer(p, || {
        // SAFETY: caller contract on p.
        let st = match unsafe { producer(p) } {
            Ok(s) => s,
            Err(e) => return e,
        };
        let reserved = match st.reservation {
            Reservation::None => return fail(DPLOG_ERR_STATE, "dplog_commit: nothing reserved"),
            Reservation::Ring { n, .. } | Reservation::Staging { n } => n,
        };
        if n > reserved {
            return fail(
                DPLOG_ERR_INVALID_ARG,
                format!("dplog_commit: n = {n} but {reserved} reserved"),
            );
        }
        let (size, id) = (st.reserved_size, st.reserved_schema);
        let reservation = core::mem::replace(&mut st.reservation, Reservation::None);
        st.fast_path = st.fast_path_policy;
        let done = match reservation {
            Reservation::Ring { slots, .. } => {
                let header = (size as u16, id);
                for i in 0..n {
                    // SAFETY: slot i < n <= reserved lies in the reservation
                    // (64 initialised bytes, zeroed at reserve, written by
                    // C since); the slot is 64-byte aligned.
                    let bytes = unsafe { &mut *slots.add(i).cast::<[u8; DPLOG_RECORD_MAX_SIZE]>() };
                    bytes[0..2].copy_from_slice(&header.0.to_ne_bytes());
                    bytes[2..4].copy_from_slice(&header.1.to_ne_bytes());
                    bytes[4..8].fill(0);
                    // A record's bytes past its length are zero (NatRecord's
                    // invariant), whatever C wrote there.
                    bytes[size..].fill(0);
                }
                // SAFETY: reserve_raw(reserved) succeeded for these slots,
                // nothing was pushed or reserved since (fast_path was off and
                // dplog_log/log_burst/reserve refuse a pending reservation),
                // and slots 0..n now hold valid records.
                unsafe { st.prod.commit_raw(n) };
                n
            }
            Reservation::Staging { .. } => {
                let Some(staging) = st.staging.take() else {
                    return fail(DPLOG_ERR_STATE, "dplog_commit: nothing reserved");
                };
                let done = push_chunked(
                    st,
                    staging.0.as_ptr().cast(),
                    DPLOG_RECORD_MAX_SIZE,
                    size,
                    n,
                    id,
                );
                st.staging = Some(staging);
                done
            }
            Reservation::None => 0,
        };
        // SAFETY: NULL or writable (caller contract).
        unsafe { write_out(n_enqueued, done) };
        if done == n {
            DPLOG_OK
        } else {
            not_enqueued(st, n - done)
        }
    })
}

fn fill_stats(s: &dplog::Stats, lat: &dplog::LatencySummary) -> dplog_stats {
    dplog_stats {
        produced: s.produced,
        enqueued: s.enqueued,
        dropped_full: s.dropped_full,
        dropped_degraded: s.dropped_degraded,
        dropped_disconnected: s.dropped_disconnected,
        dequeued: s.dequeued,
        written_records: s.written_records,
        written_bytes: s.written_bytes,
        dropped_sink: s.dropped_sink,
        sink_errors: s.sink_errors,
        sink_retries: s.sink_retries,
        sink_pending: s.sink_pending,
        dropped_shutdown: s.dropped_shutdown,
        batches: s.batches,
        high_water: s.high_water,
        rings: s.rings,
        in_flight: s.in_flight(),
        latency_samples: lat.samples,
        latency_p50_ns: lat.p50_ns,
        latency_p99_ns: lat.p99_ns,
        latency_p999_ns: lat.p999_ns,
        latency_max_ns: lat.max_ns,
        dropped_stopped: s.dropped_stopped,
        rings_stopped: s.rings_stopped,
    }
}

/// The counters of several consumers added up; the latency percentiles
/// are the largest of theirs (an upper bound: percentiles do not add).
fn sum_stats(all: &[dplog_stats]) -> dplog_stats {
    let mut t = dplog_stats::default();
    for s in all {
        t.produced += s.produced;
        t.enqueued += s.enqueued;
        t.dropped_full += s.dropped_full;
        t.dropped_degraded += s.dropped_degraded;
        t.dropped_disconnected += s.dropped_disconnected;
        t.dequeued += s.dequeued;
        t.written_records += s.written_records;
        t.written_bytes += s.written_bytes;
        t.dropped_sink += s.dropped_sink;
        t.sink_errors += s.sink_errors;
        t.sink_retries += s.sink_retries;
        t.sink_pending += s.sink_pending;
        t.dropped_shutdown += s.dropped_shutdown;
        t.batches += s.batches;
        t.high_water = t.high_water.max(s.high_water);
        t.rings += s.rings;
        t.in_flight += s.in_flight;
        t.latency_samples += s.latency_samples;
        t.latency_p50_ns = t.latency_p50_ns.max(s.latency_p50_ns);
        t.latency_p99_ns = t.latency_p99_ns.max(s.latency_p99_ns);
        t.latency_p999_ns = t.latency_p999_ns.max(s.latency_p999_ns);
        t.latency_max_ns = t.latency_max_ns.max(s.latency_max_ns);
        t.dropped_stopped += s.dropped_stopped;
        t.rings_stopped += s.rings_stopped;
    }
    t
}

/// Stores a snapshot of every counter and the latency percentiles in
/// `*out` (see `struct dplog_stats`). Before `dplog_start` every field is 0.
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_CLOSED` (use `dplog_close`'s
/// final stats instead). Thread-safety: any thread.
///
/// # Safety
/// `h` is NULL or returned by `dplog_open*`; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_stats(h: *mut dplog_t, out: *mut dplog_stats) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        let l = match unsafe { logger(h) } {
            Ok(l) => l,
            Err(e) => return e,
        };
        if out.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_stats: out is NULL");
        }
        let st = lock(&l.state);
        let v = match &*st {
            State::Started(r) => {
                let all: Vec<dplog_stats> = r
                    .loggers
                    .iter()
                    .map(|lg| {
                        let snap = lg.snapshot();
                        fill_stats(&snap.consumer, &snap.latency)
                    })
                    .collect();
                sum_stats(&all)
            }
            State::Opened(_) => dplog_stats::default(),
            State::Closed => return fail(DPLOG_ERR_CLOSED, "dplog handle is closed"),
        };
        // SAFETY: non-NULL (checked), writable (caller contract).
        unsafe { out.write(v) };
        DPLOG_OK
    })
}

/// Makes the consumer write what it has batched and flush the sink, and
/// waits for that. Records still in rings are not waited for. Before
/// `dplog_start` it flushes the sink directly.
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_CLOSED`, `DPLOG_ERR_IO` (the sink's
/// flush failed), `DPLOG_ERR_CONSUMER_GONE`. Thread-safety: any thread;
/// blocks the caller (not the producers) for one consumer round trip.
///
/// # Safety
/// `h` is NULL or returned by `dplog_open*`.
#[no_mangle]
pub unsafe extern "C" fn dplog_flush(h: *mut dplog_t) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        let l = match unsafe { logger(h) } {
            Ok(l) => l,
            Err(e) => return e,
        };
        let mut st = lock(&l.state);
        match &mut *st {
            State::Started(r) => {
                // Every consumer flushes; the first error is reported.
                let res: Vec<_> = r.loggers.iter().map(|lg| lg.flush()).collect();
                match res.into_iter().find_map(Result::err) {
                    None => DPLOG_OK,
                    Some(e) => logger_error(e),
                }
            }
            State::Opened(p) => match p.sink.as_mut().map(|s| s.flush()) {
                Some(Err(e)) => fail(DPLOG_ERR_IO, e.to_string()),
                _ => DPLOG_OK,
            },
            State::Closed => fail(DPLOG_ERR_CLOSED, "dplog handle is closed"),
        }
    })
}

/// Asks the sink to reopen its destination, between two batches, and waits
/// for it. For a file sink (logrotate): after `mv dplog.log dplog.log.1`,
/// call this and new batches go to a new `dplog.log`, never to the renamed
/// file; what was batched before the call goes to the old file. Sinks
/// without a destination to reopen return `DPLOG_OK`.
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_CLOSED`, `DPLOG_ERR_IO` (the path
/// cannot be opened), `DPLOG_ERR_CONSUMER_GONE`. Thread-safety: any thread.
///
/// # Safety
/// `h` is NULL or returned by `dplog_open*`.
#[no_mangle]
pub unsafe extern "C" fn dplog_reopen(h: *mut dplog_t) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        let l = match unsafe { logger(h) } {
            Ok(l) => l,
            Err(e) => return e,
        };
        let mut st = lock(&l.state);
        match &mut *st {
            State::Started(r) => {
                let res: Vec<_> = r.loggers.iter().map(|lg| lg.reopen()).collect();
                match res.into_iter().find_map(Result::err) {
                    None => DPLOG_OK,
                    Some(LoggerError::Io(e)) => fail(DPLOG_ERR_IO, format!("reopen: {e}")),
                    Some(e) => logger_error(e),
                }
            }
            State::Opened(p) => match p.sink.as_mut().map(|s| s.reopen()) {
                Some(Err(e)) => fail(DPLOG_ERR_IO, format!("reopen: {e}")),
                _ => DPLOG_OK,
            },
            State::Closed => fail(DPLOG_ERR_CLOSED, "dplog handle is closed"),
        }
    })
}

/// Closes the logger: drains every ring, writes the last batch, flushes
/// and closes the sink (within `[ring] shutdown_timeout_ms`), joins the
/// consumer thread, and stores the final counters in `*final_stats` (if
/// not NULL) — written whenever the handle was live, even on
/// `DPLOG_ERR_UNDELIVERED` or `DPLOG_ERR_IO`. The latency fields cover
/// every sampled record, those written by the final drain included. The handle is released in
/// every case except `DPLOG_ERR_NULL` and `DPLOG_ERR_CLOSED`.
///
/// Free producers first (or at least stop using them): a record logged
/// concurrently with the close may stay in its ring and is reported in
/// `in_flight`, or, when it lands after the final count, is not counted
/// at all (its `dplog_log` may still have returned `DPLOG_OK`). Once the
/// close has begun, every producer's inline window is emptied, and
/// producers return `DPLOG_ERR_CLOSED`; they must still be freed with
/// `dplog_producer_free`.
/// With `[ring] publish_every` above 1, records a live producer logged
/// since its last publication are not seen by the consumer or counted
/// unless `dplog_producer_flush` or `dplog_producer_free` comes first.
///
/// Returns `DPLOG_OK` when every produced record was written;
/// `DPLOG_ERR_RING_STOPPED` when the consumer stopped one or more rings
/// after a protocol violation (`rings_stopped`, `dropped_stopped`; the
/// message names the ring ids); `DPLOG_ERR_UNDELIVERED` when some records
/// were not written (dropped for any reason, or
/// left in flight; the stats say which); `DPLOG_ERR_IO` when the sink's
/// final flush/close failed; `DPLOG_ERR_CONSUMER_GONE` if the consumer
/// died. `dplog_close(NULL, ...)` returns `DPLOG_ERR_NULL`; a second close
/// of the same handle is a no-op returning `DPLOG_ERR_CLOSED`.
///
/// Thread-safety: any thread; calls racing with it on the same handle
/// return `DPLOG_ERR_CLOSED` once it has begun.
///
/// # Safety
/// `h` is NULL or returned by `dplog_open*`; `final_stats` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_close(
    h: *mut dplog_t,
    final_stats: *mut dplog_stats,
) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        let l = match unsafe { logger(h) } {
            Ok(l) => l,
            Err(e) => return e,
        };
        let mut st = lock(&l.state);
        let prev = core::mem::replace(&mut *st, State::Closed);
        // SeqCst (a Release store for the Relaxed check in `producer()`):
        // ordered with open_window's SeqCst store of `end` then load of
        // `closed`, so no window opens unseen by the loop below.
        l.shared.closed.store(true, Ordering::SeqCst);
        for &w in lock(&l.shared.windows).values() {
            // SeqCst: see above. The inline dplog_log of every producer
            // now finds its window empty and calls into the library,
            // which returns DPLOG_ERR_CLOSED.
            // SAFETY: producers are never deallocated; a freed one
            // removed its entry under this lock.
            unsafe { window_end(w as *mut dplog_log_window) }
                .store(core::ptr::null_mut(), Ordering::SeqCst);
        }
        // Release: partner of the Relaxed magic check (same mutex order).
        l.magic.store(MAGIC_DEAD, Ordering::Release);
        // C ring ids of the rings the consumers stopped.
        let mut stopped: Vec<u32> = Vec::new();
        let (v, err) = match prev {
            State::Closed => return fail(DPLOG_ERR_CLOSED, "dplog handle is already closed"),
            State::Opened(mut p) => {
                let e = p.sink.as_mut().and_then(|s| s.close().err());
                (dplog_stats::default(), e.map(|e| LoggerError::Io(e.into())))
            }
            State::Started(r) => {
                // The snapshot source outlives the logger, so the latency
                // percentiles include the records written by the drain.
                let mut all = Vec::with_capacity(r.loggers.len());
                let mut first_err = None;
                for (i, lg) in r.loggers.into_iter().enumerate() {
                    let source = lg.snapshot_source();
                    let res = lg.shutdown();
                    let snap = source.snapshot();
                    let latency = snap.latency;
                    let names = lock(&l.shared.ring_names);
                    for ring in snap.rings.iter().filter(|r| r.stopped) {
                        stopped.push(names.get(&(i, ring.id)).copied().unwrap_or(ring.id));
                    }
                    match res {
                        Ok(s) => all.push(fill_stats(&s, &latency)),
                        Err((s, e)) => {
                            all.push(fill_stats(&s, &latency));
                            first_err.get_or_insert(e);
                        }
                    }
                }
                (sum_stats(&all), first_err)
            }
        };
        drop(st);
        bury(h as usize);
        // SAFETY: NULL or writable (caller contract).
        unsafe { write_out(final_stats, v) };
        if let Some(e) = err {
            return logger_error(e);
        }
        let dropped = v.dropped_full
            + v.dropped_degraded
            + v.dropped_disconnected
            + v.dropped_stopped
            + v.dropped_sink
            + v.dropped_shutdown;
        if !stopped.is_empty() {
            stopped.sort_unstable();
            return fail(
                DPLOG_ERR_RING_STOPPED,
                format!(
                    "ring(s) {stopped:?} stopped after a protocol violation (a producer index above the capacity or moving backwards: is a producer used by two threads?); {} record(s) lost there, {} written",
                    v.dropped_stopped, v.written_records
                ),
            );
        }
        if dropped + v.in_flight > 0 {
            return fail(
                DPLOG_ERR_UNDELIVERED,
                format!(
                    "{} record(s) not delivered: {} dropped (full {}, degraded {}, consumer gone {}, ring stopped {}, sink {}, shutdown timeout {}), {} in flight",
                    dropped + v.in_flight,
                    dropped,
                    v.dropped_full,
                    v.dropped_degraded,
                    v.dropped_disconnected,
                    v.dropped_stopped,
                    v.dropped_sink,
                    v.dropped_shutdown,
                    v.in_flight
                ),
            );
        }
        DPLOG_OK
    })
}

/// Nanoseconds since the Unix epoch (CLOCK_REALTIME), for `timestamp_ns`.
///
/// Errors: `DPLOG_ERR_NULL`. Thread-safety: any thread. Cost: one vDSO
/// clock read (~20 ns); hot loops may read it once per burst.
///
/// # Safety
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_now_ns(out: *mut u64) -> dplog_result {
    guard(|| {
        if out.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_now_ns: out is NULL");
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        // SAFETY: non-NULL, writable.
        unsafe { out.write(now) };
        DPLOG_OK
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dplog::Record;

    #[test]
    fn a_panic_becomes_an_error_code_with_its_message() {
        let r = guard(|| panic!("boom {}", 42));
        assert_eq!(r, DPLOG_ERR_PANIC);
        let mut buf = [0 as c_char; 128];
        let mut len = 0usize;
        // SAFETY: buf is 128 bytes, len is writable.
        assert_eq!(
            unsafe { dplog_last_error(buf.as_mut_ptr(), buf.len(), &mut len) },
            DPLOG_OK
        );
        // SAFETY: dplog_last_error NUL-terminates.
        let msg = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
        assert!(msg.contains("boom 42"), "{msg}");
        assert_eq!(len, msg.len());
    }

    #[test]
    fn the_64_byte_fast_path_builds_the_same_slot_as_from_bytes() {
        let mut raw = [0u8; 65];
        for (i, b) in raw.iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        // Unaligned source, garbage header: dplog rewrites the header.
        // SAFETY: raw[1..] holds 64 readable bytes.
        let fast = unsafe { slot_from_c(raw.as_ptr().add(1), 64, 300) };
        let mut want = [0u8; 64];
        want.copy_from_slice(&raw[1..]);
        want[0..2].copy_from_slice(&64u16.to_ne_bytes());
        want[2..4].copy_from_slice(&300u16.to_ne_bytes());
        want[4..8].fill(0);
        assert_eq!(fast, NatRecord::from_bytes(&want).unwrap());
        assert_eq!(fast.header().schema_id, 300);
        // The generic path: a 24-byte record, zero-padded to the slot.
        // SAFETY: raw holds 24 readable bytes.
        let small = unsafe { slot_from_c(raw.as_ptr(), 24, 3) };
        assert_eq!(small.as_bytes().len(), 24);
        assert_eq!(&small.as_bytes()[8..], &raw[8..24]);
        assert!(small.slot()[24..].iter().all(|&b| b == 0));
    }

    #[test]
    fn a_metrics_listener_in_the_config_is_refused_not_ignored() {
        let text = c"[metrics]\nprometheus_listen = \"127.0.0.1:9464\"\n";
        let mut h: *mut dplog_t = core::ptr::null_mut();
        // SAFETY: text is NUL-terminated, h is writable.
        let r = unsafe { dplog_open_str(text.as_ptr(), &mut h) };
        assert_eq!(r, DPLOG_ERR_CONFIG);
        assert!(h.is_null(), "*out written only on success");
        let mut buf = [0 as c_char; 256];
        let mut len = 0usize;
        // SAFETY: buf is 256 bytes, len is writable.
        unsafe { dplog_last_error(buf.as_mut_ptr(), buf.len(), &mut len) };
        // SAFETY: dplog_last_error NUL-terminates.
        let msg = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
        assert!(msg.contains("prometheus_listen"), "{msg}");
    }

    #[test]
    fn consumer_i_gets_its_own_file_and_mmap_dir() {
        let cfg = LogConfig::from_toml_str(
            "[[sink]]\ntype = \"file\"\npath = \"/var/log/nat.log\"\n\
             [[sink]]\ntype = \"mmap\"\ndir = \"/var/log/nat-mmap\"\n",
        )
        .unwrap();
        let paths = |c: &dplog::config::SinkConfig| -> Vec<String> {
            match c {
                dplog::config::SinkConfig::Set(v) => v
                    .iter()
                    .map(|s| match s {
                        dplog::config::SinkConfig::File(f) => f.path.display().to_string(),
                        dplog::config::SinkConfig::Mmap(m) => m.dir.display().to_string(),
                        _ => String::new(),
                    })
                    .collect(),
                _ => panic!("two [[sink]] tables make a set"),
            }
        };
        assert_eq!(
            paths(&per_consumer_sink(&cfg.sink, 0)),
            ["/var/log/nat.log", "/var/log/nat-mmap"]
        );
        assert_eq!(
            paths(&per_consumer_sink(&cfg.sink, 3)),
            ["/var/log/nat.log.3", "/var/log/nat-mmap.3"]
        );
    }

    #[test]
    fn every_code_has_its_own_message() {
        let mut seen = HashSet::new();
        assert_eq!(MESSAGES.len(), DPLOG_ERR_LAST as usize + 1);
        for code in DPLOG_OK..=DPLOG_ERR_LAST {
            // SAFETY: dplog_strerror returns a static C string.
            let m = unsafe { CStr::from_ptr(dplog_strerror(code)) };
            assert!(seen.insert(m.to_owned()), "duplicate message for {code}");
        }
        // SAFETY: as above.
        let m = unsafe { CStr::from_ptr(dplog_strerror(99)) };
        assert_eq!(m.to_str().unwrap(), "unknown dplog_result");
        // SAFETY: as above.
        let m = unsafe { CStr::from_ptr(dplog_strerror(-1)) };
        assert_eq!(m.to_str().unwrap(), "unknown dplog_result");
    }
}
