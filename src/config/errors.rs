//! [`ConfigError`].

use super::*;

/// A configuration that could not be read or used.
#[derive(Debug)]
pub enum ConfigError {
    /// The file could not be read.
    Read(PathBuf, std::io::Error),
    /// The TOML is malformed, has an unknown key or a wrong value; the
    /// message names the key and the line.
    Parse(String),
    /// The sink could not be opened.
    Sink(std::io::Error),
    /// The runtime refused the settings.
    Logger(LoggerError),
    /// The `[metrics]` listener could not be started on this address.
    Metrics(std::net::SocketAddr, std::io::Error),
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ConfigError::Read(p, e) => write!(f, "cannot read config {}: {e}", p.display()),
            ConfigError::Parse(m) => write!(f, "bad config: {m}"),
            ConfigError::Sink(e) => write!(f, "cannot open sink: {e}"),
            ConfigError::Logger(e) => write!(f, "{e}"),
            ConfigError::Metrics(a, e) => write!(f, "cannot serve metrics on {a}: {e}"),
        }
    }
}

impl std::error::Error for ConfigError {}
