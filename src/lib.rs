//! # dplog
//!
//! A pluggable logging-sink SDK for high-rate dataplanes. A forwarding core
//! copies a fixed-size binary record into a lock-free ring; a consumer thread
//! formats records with table-driven formatters and writes them in large
//! batches to a sink.
//!
//! This crate re-exports the workspace crates:
//! - [`dplog_core`] at the root (records, rings, producers, consumer runtime);
//! - [`formatters`] (feature `formatters`, on by default);
//! - [`sinks`] (feature `sinks`, on by default);
//! - [`nat`] (feature `nat`, on by default): the NAT schema package
//!   (`dplog-schema-nat`), one record package among any a user declares;
//! - [`config`] (feature `config`, on by default): TOML that chooses ring,
//!   format and sink, and starts loggers of any record type.
#![warn(missing_docs)]

pub use dplog_core::*;

/// Table-driven formatters (text, JSON lines). Feature `formatters`.
#[cfg(feature = "formatters")]
pub use dplog_formatters as formatters;

/// Sinks (file). Feature `sinks`.
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
