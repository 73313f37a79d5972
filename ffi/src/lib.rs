//! # libdplog: the C ABI of dplog
//!
//! Builds `libdplog.so` and `libdplog.a`; `include/dplog.h` is generated
//! from this crate (this file and the modules below) by cbindgen (pinned,
//! see `cbindgen.toml`); the header's `static inline` fast path is
//! `include/dplog_inline.h`, which `dplog.h` includes at its end.
//!
//! Design:
//! - Every export runs inside `guard` (`result.rs`), which turns a Rust
//!   panic into [`DPLOG_ERR_PANIC`]: no unwind crosses the C boundary.
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
//!
//! Modules: `result` (codes, last error, panic guard), `version`, `types`
//! (generic C types and constants), `nat` (everything NAT-specific),
//! `tombstone` (handle liveness), `slots` (the slot size a logger runs
//! with: 32, 64 or 128 bytes), `handle` (logger handle, open), `schema`
//! (user record types), `start` (consumers), `producer` (producer handle),
//! `window` (the inline window), `log` (`dplog_log*`), `reserve`
//! (reserve/commit, producer flush), `stats`, `control` (flush, reopen,
//! close), `clock`. Every export is re-exported here, at the crate root.
#![allow(non_camel_case_types)]
#![warn(missing_docs)]

// cbindgen writes constants and functions in the order it parses them:
// this file, then these modules in this order. The order keeps the one of
// include/dplog.h; keep it when adding a module (blank lines stop rustfmt
// from sorting them).
mod result;

mod version;

mod types;

mod nat;

mod tombstone;

mod slots;

mod handle;

mod schema;

mod schema_meta;

mod sizes;

mod start;

mod producer;

mod window;

mod log;

mod reserve;

mod stats;

mod control;
mod shm;

mod clock;
#[cfg(test)]
mod testutil;

mod metrics;

mod prometheus;

pub use clock::{
    dplog_clock_source, dplog_now_ns, dplog_now_ticks, DPLOG_CLOCK_REALTIME, DPLOG_CLOCK_TSC,
};
pub use control::{dplog_close, dplog_flush, dplog_reopen};
pub use handle::{dplog_open, dplog_open_str, dplog_slot_bytes, dplog_t};
pub use log::{dplog_log, dplog_log_burst, dplog_log_refill};
pub use metrics::{dplog_metrics_port, dplog_ring_stats};
pub use nat::{
    dplog_nat44_session, dplog_nat_addresses_exhausted, dplog_nat_port_block,
    dplog_nat_ports_exhausted, dplog_nat_quota_exceeded, DPLOG_NAT44_SESSION_SIZE,
    DPLOG_NAT_EVENT_ADDRESSES_EXHAUSTED, DPLOG_NAT_EVENT_NAT44_SESSION_CREATE,
    DPLOG_NAT_EVENT_NAT44_SESSION_DELETE, DPLOG_NAT_EVENT_PORTS_EXHAUSTED,
    DPLOG_NAT_EVENT_PORT_BLOCK_ALLOCATION, DPLOG_NAT_EVENT_PORT_BLOCK_DEALLOCATION,
    DPLOG_NAT_EVENT_QUOTA_EXCEEDED, DPLOG_NAT_EVENT_TRANSLATION_CREATE,
    DPLOG_NAT_EVENT_TRANSLATION_DELETE, DPLOG_SCHEMA_NAT44_SESSION,
    DPLOG_SCHEMA_NAT_ADDRESSES_EXHAUSTED, DPLOG_SCHEMA_NAT_PORTS_EXHAUSTED,
    DPLOG_SCHEMA_NAT_PORT_BLOCK, DPLOG_SCHEMA_NAT_QUOTA_EXCEEDED,
};
pub use producer::{dplog_producer_free, dplog_producer_new, dplog_producer_t};
pub use reserve::{dplog_commit, dplog_producer_flush, dplog_reserve, dplog_reserve_refill};
pub use result::{
    dplog_last_error, dplog_result, dplog_strerror, DPLOG_ERR_BAD_LENGTH, DPLOG_ERR_CLOSED,
    DPLOG_ERR_CONFIG, DPLOG_ERR_CONSUMER_GONE, DPLOG_ERR_EXISTS, DPLOG_ERR_FULL,
    DPLOG_ERR_INVALID_ARG, DPLOG_ERR_IO, DPLOG_ERR_LAST, DPLOG_ERR_NULL, DPLOG_ERR_PANIC,
    DPLOG_ERR_RING_IN_USE, DPLOG_ERR_RING_STOPPED, DPLOG_ERR_STATE, DPLOG_ERR_TIMEOUT,
    DPLOG_ERR_UNDELIVERED, DPLOG_ERR_UNKNOWN_SCHEMA, DPLOG_ERR_UNSUPPORTED, DPLOG_OK,
};
pub use schema::dplog_schema_register;
pub use shm::{
    dplog_attach, dplog_attach_daemon, dplog_attach_group, dplog_producer_consumer_attached,
    dplog_producer_set_block_timeout,
};
pub use start::dplog_start;
pub use stats::dplog_stats;
pub use types::{
    dplog_enum_name, dplog_field_desc, dplog_record_header, DPLOG_CONSUMERS_MAX, DPLOG_FIELD_BOOL,
    DPLOG_FIELD_BYTES, DPLOG_FIELD_ENUM, DPLOG_FIELD_IPV4, DPLOG_FIELD_IPV6, DPLOG_FIELD_MAC,
    DPLOG_FIELD_NS_TIMESTAMP, DPLOG_FIELD_PORT, DPLOG_FIELD_PROTOCOL, DPLOG_FIELD_TSC_TIMESTAMP,
    DPLOG_FIELD_U16, DPLOG_FIELD_U32, DPLOG_FIELD_U64, DPLOG_FIELD_U8, DPLOG_RECORD_MAX_SIZE,
    DPLOG_RESERVE_MAX, DPLOG_SCHEMA_USER_FIRST, DPLOG_SLOT_BYTES_DEFAULT,
};
pub use version::{
    dplog_version, DPLOG_VERSION_MAJOR, DPLOG_VERSION_MINOR, DPLOG_VERSION_NUMBER,
    DPLOG_VERSION_PATCH,
};
pub use window::dplog_log_window;
