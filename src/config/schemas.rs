//! `[schemas]`: the built-in record types a logger serves.

use super::*;

/// `[schemas]`: which of dplog's built-in record types a logger serves
/// besides the types the program declares. A logger serves only what it
/// is given: its CSV header has only their columns, its IPFIX output only
/// their templates. The NAT schemas (NAT44 session, port block, addresses
/// and ports exhausted, quota exceeded; `dplog::nat`) come only with
/// `nat = true`.
///
/// ```toml
/// [schemas]
/// nat = true   # also serve the NAT schemas (default false)
/// ```
///
/// Who reads it: [`LogConfig::start_slots`] and
/// [`LogConfig::start_slot_consumers`] (the NAT schemas that fit the slot
/// come after the program's types), the C ABI's `dplog_open` (as
/// `dplog_register_nat_schemas`) and dplogd (its CSV file header).
/// [`LogConfig::start_nat`], [`LogConfig::start_nat44`] and
/// [`FormatConfig::nat_formatter`] are NAT loggers by name and serve the
/// NAT schemas whatever this says.
///
/// # Examples
///
/// ```
/// use dplog::config::LogConfig;
///
/// let plain = LogConfig::from_toml_str("").unwrap();
/// assert!(!plain.schemas.nat);
/// assert!(plain.record_types(&[], 64).is_empty());
///
/// let nat = LogConfig::from_toml_str("[schemas]\nnat = true\n").unwrap();
/// let names: Vec<&str> = nat.record_types(&[], 32).iter().map(|s| s.name()).collect();
/// // The NAT types that fit a 32-byte slot.
/// assert_eq!(names, ["natAddressesExhausted", "natPortsExhausted", "natQuotaExceeded"]);
/// ```
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct SchemasConfig {
    /// Serve the NAT schemas (`dplog::nat::all`) that fit the slot, after
    /// the program's own types. Default `false`.
    pub nat: bool,
}
