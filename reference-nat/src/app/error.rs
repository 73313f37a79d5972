//! [`RunError`]: why a run could not start or finish.

use dplog::config::ConfigError;

use super::Summary;
use crate::input::InputError;
use crate::nat::NatError;
use crate::synthetic::SyntheticError;

/// Why a run could not start or finish.
#[derive(Debug)]
pub enum RunError {
    /// Bad configuration (file, ring, sink).
    Config(ConfigError),
    /// Bad NAT settings.
    Nat(NatError),
    /// Bad synthetic settings.
    Synthetic(SyntheticError),
    /// Bad `[dataplane]` settings (worker count, port range too small to
    /// split, counters for another worker count).
    Dataplane(String),
    /// The capture could not be read to its end. Everything read before the
    /// failure was translated and logged; the summary says how much.
    Input(Box<Summary>, Box<InputError>),
    /// The logger failed at shutdown (e.g. the sink's fsync), or its sink
    /// made no progress for `[ring] shutdown_timeout_ms` (plus a second) of
    /// the shutdown (blocked in `write(2)`), when what it held is counted
    /// in `dropped_shutdown`. The summary's counters say what was written.
    Shutdown(Box<Summary>, String),
    /// A stop signal came while the sink was still opening and it did not
    /// open within `[ring] shutdown_timeout_ms` (`open(2)` blocked, e.g. a
    /// FIFO without a reader): nothing was read or logged.
    Stopped(Box<Summary>, String),
}

impl core::fmt::Display for RunError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RunError::Config(e) => write!(f, "{e}"),
            RunError::Nat(e) => write!(f, "bad [nat] settings: {e}"),
            RunError::Synthetic(e) => write!(f, "bad [synthetic] settings: {e}"),
            RunError::Dataplane(e) => write!(f, "bad [dataplane] settings: {e}"),
            RunError::Input(_, e) => write!(f, "{e}"),
            RunError::Shutdown(_, e) => write!(f, "logger shutdown failed: {e}"),
            RunError::Stopped(_, e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RunError {}
