//! `[ring]`: ring and consumer settings, and the slot sizes of rings of
//! several record types.

use super::*;

/// `[ring]`: ring and consumer settings; see [`LoggerConfig`].
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RingConfig {
    /// Slots per producer ring; a power of two, at most 2^24
    /// (`MAX_LOGGER_RING_CAPACITY`). Each ring takes `capacity` times the
    /// record size, allocated when it is created. Default 16384
    /// (`DEFAULT_RING_CAPACITY`, from the ring-size sweep). Another value
    /// (0, 3, 2^25) is refused when the configuration is loaded
    /// ([`LogConfig::from_toml_str`], [`read_toml`], the C ABI's
    /// `dplog_open`), before any sink is opened, with an error naming
    /// `[ring] capacity` at its line.
    pub capacity: usize,
    /// `block`, `drop_newest` (alias `drop`) or `degrade`. Default `block`.
    pub backpressure: Backpressure,
    /// Records per ring per consumer pass. Default 1024
    /// (`dplog_core::DEFAULT_BURST`).
    pub burst: usize,
    /// Bytes per sink write, 65536 to 268435456 (256 MiB,
    /// `MAX_BATCH_BYTES`). Default 262144.
    pub batch_bytes: usize,
    /// CPU to pin the consumer thread to. Default: not pinned.
    pub consumer_cpu: Option<usize>,
    /// `block`: pause-instruction spins before a waiting producer yields.
    /// Default 1024.
    pub block_spins: u32,
    /// Write in-band drop reports. Default true.
    pub drop_reports: bool,
    /// `[ring.degrade]`: watermarks (percent) and minimum priority.
    pub degrade: DegradeConfig,
    /// Reorder window in ns of event time; unset = off (see
    /// `dplog::reorder`).
    pub reorder_window_ns: Option<u64>,
    /// With the reorder window: a ring silent this long (ms) no longer
    /// holds other rings' records back. Default 500.
    pub reorder_idle_ms: u64,
    /// How long shutdown waits for the sink to deliver what is still
    /// buffered or in flight, in ms; what is left is counted in
    /// `dropped_shutdown`. Default 5000.
    pub shutdown_timeout_ms: u64,
    /// How long a batch a sink keeps failing with retryable errors (ENOSPC,
    /// EIO, ...) is retried, in ms, before it is counted in `dropped_sink`
    /// and the consumer moves on (`LoggerConfig::sink_retry_timeout_ms`).
    /// Unset (default): retry forever, lossless under `block`.
    pub sink_retry_timeout_ms: Option<u64>,
    /// Producers publish their ring index once per this many records
    /// (`LoggerConfig::publish_every`); unset = the program's default (1
    /// for the library: every record at once; `dplog-nat`, whose workers
    /// publish every 16 rx bursts and when idle, uses its burst size).
    pub publish_every: Option<usize>,
    /// Longest pause between two polls of the rings while the consumer
    /// is awake, in µs (`LoggerConfig::poll_gap_max_us`): the longest a
    /// published record then waits before it is read. 0 polls again at
    /// once (no pacing). Default 20, at most 1000.
    pub poll_gap_max_us: u64,
    /// Ring slot size in bytes for loggers of several record types
    /// ([`LogConfig::start_slots`], the C ABI): 32, 64 or 128; every
    /// record type must fit it. Unset: 64 (the C ABI), or the slot type the
    /// Rust program chose.
    pub slot_bytes: Option<usize>,
    /// `[ring.priorities]`: priority under `degrade` by record type
    /// (schema name), e.g. `aclDrop = 2`; replaces the schema's own rule
    /// for that type.
    pub priorities: std::collections::BTreeMap<String, u8>,
}

impl Default for RingConfig {
    fn default() -> Self {
        let d = LoggerConfig::default();
        Self {
            capacity: d.ring_capacity,
            backpressure: d.backpressure,
            burst: d.burst,
            batch_bytes: d.batch_bytes,
            consumer_cpu: d.consumer_cpu,
            block_spins: d.block_spins,
            drop_reports: d.drop_reports,
            degrade: d.degrade,
            reorder_window_ns: d.reorder_window_ns,
            reorder_idle_ms: d.reorder_idle_ms,
            shutdown_timeout_ms: d.shutdown_timeout_ms,
            sink_retry_timeout_ms: d.sink_retry_timeout_ms,
            publish_every: None,
            poll_gap_max_us: d.poll_gap_max_us,
            slot_bytes: None,
            priorities: Default::default(),
        }
    }
}

/// The slot sizes a ring can have.
pub const SLOT_SIZES: [usize; 3] = [32, 64, 128];

/// Checks a configured slot size against the slot type's `bytes` and
/// every schema against it.
///
/// Errors: [`ConfigError::Parse`] naming `[ring] slot_bytes`.
pub fn check_slots(
    configured: Option<usize>,
    bytes: usize,
    schemas: &[&Schema],
) -> Result<(), ConfigError> {
    if let Some(b) = configured {
        if !SLOT_SIZES.contains(&b) {
            return Err(ConfigError::Parse(format!(
                "[ring] slot_bytes = {b}: must be 32, 64 or 128"
            )));
        }
        if b != bytes {
            return Err(ConfigError::Parse(format!(
                "[ring] slot_bytes = {b}, but this program's rings have {bytes}-byte slots"
            )));
        }
    }
    for s in schemas {
        if s.size() > bytes {
            let hint = match SLOT_SIZES.iter().find(|&&x| x >= s.size()) {
                Some(x) => format!("set [ring] slot_bytes = {x}"),
                None => format!(
                    "no slot is that large: [ring] slot_bytes is at most {}",
                    SLOT_SIZES[SLOT_SIZES.len() - 1]
                ),
            };
            return Err(ConfigError::Parse(format!(
                "record type {} is {} bytes: it does not fit a {bytes}-byte slot ({hint})",
                s.name(),
                s.size(),
            )));
        }
    }
    Ok(())
}
