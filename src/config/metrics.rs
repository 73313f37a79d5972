//! `[metrics]`: the Prometheus listener.

use super::*;

/// `[metrics]`: the Prometheus listener (`dplog_core::metrics`): OpenMetrics
/// text of [`Logger::snapshot`] at `GET /metrics`, served by `tiny_http` on
/// its own unpinned thread (never a producer or consumer core).
///
/// # Examples
///
/// Port 0 picks a free port on loopback; the listener serves the logger's
/// counters until it is stopped:
///
/// ```
/// # use std::sync::OnceLock;
/// # use dplog::schema::{HasSchema, Schema};
/// # use dplog::{schema, Record, RecordHeader};
/// # #[repr(C)]
/// # #[derive(Clone, Copy)]
/// # struct Probe { header: RecordHeader, time_ns: u64, seq: u32, ttl: u8, _pad: [u8; 3] }
/// # impl Record for Probe {
/// #     const SCHEMA_ID: u16 = 500;
/// #     fn header(&self) -> &RecordHeader { &self.header }
/// # }
/// # // SAFETY: repr(C), 24 bytes without padding; schema from its offsets.
/// # unsafe impl HasSchema for Probe {
/// #     fn schema() -> &'static Schema {
/// #         static S: OnceLock<Schema> = OnceLock::new();
/// #         S.get_or_init(|| schema!(Probe, id = 500, name = "probe", [
/// #             time_ns => "time": NsTimestamp, ie 0;
/// #             seq => "seq": U32, ie 0;
/// #             ttl => "ttl": U8, ie 0;
/// #         ]).unwrap())
/// #     }
/// # }
/// # fn probe(seq: u32) -> Probe {
/// #     Probe { header: RecordHeader::of::<Probe>(), time_ns: 1_767_225_600_000_000_000, seq, ttl: 64, _pad: [0; 3] }
/// # }
/// # let dir = tempfile::tempdir()?;
/// # std::env::set_current_dir(dir.path())?;
/// use std::io::{Read, Write};
/// use dplog::config::LogConfig;
///
/// let cfg = LogConfig::from_toml_str("[metrics]\nprometheus_listen = \"127.0.0.1:0\"\n[sink]\ntype = \"file\"\npath = \"probes.log\"\n")?;
/// let logger = cfg.start::<Probe>()?;
/// let server = cfg.metrics.start(&logger)?.expect("prometheus_listen is set");
/// let mut http = std::net::TcpStream::connect(server.local_addr())?;
/// http.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")?;
/// let mut page = String::new();
/// http.read_to_string(&mut page)?;
/// assert!(page.contains("dplog_"), "{page}");
/// server.stop();
/// logger.shutdown().map_err(|(_, e)| e)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Address and port to listen on, e.g. `"127.0.0.1:9464"` (port 0
    /// picks a free port). Default: unset, no listener.
    pub prometheus_listen: Option<std::net::SocketAddr>,
    /// Accept a `prometheus_listen` address outside 127.0.0.0/8 and ::1.
    /// The listener has no authentication, so it is refused unless this is
    /// `true`. Default `false`.
    pub allow_non_loopback: bool,
    /// For programs that end (`dplog-nat`): keep serving the final counters
    /// this long after the logger shut down, so a scraper can collect them.
    /// Milliseconds, default 0.
    pub linger_ms: u64,
}

impl MetricsConfig {
    /// Checks the settings without binding.
    ///
    /// Errors: [`ConfigError::Parse`] naming `metrics.prometheus_listen` if
    /// the address is not a loopback address and `allow_non_loopback` is
    /// not set.
    pub fn check(&self) -> Result<(), ConfigError> {
        match self.prometheus_listen {
            Some(a) if !a.ip().is_loopback() && !self.allow_non_loopback => {
                Err(ConfigError::Parse(format!(
                    "metrics.prometheus_listen = \"{a}\" is not a loopback address \
                     (127.0.0.0/8 or ::1); set metrics.allow_non_loopback = true to serve \
                     the unauthenticated listener on it"
                )))
            }
            _ => Ok(()),
        }
    }

    /// Starts the listener for `logger` if `prometheus_listen` is set
    /// (`None` otherwise). The server serves until it is stopped or
    /// dropped, and keeps serving the last counters after the logger shut
    /// down.
    ///
    /// Errors: as [`check`](Self::check); [`ConfigError::Metrics`] if the
    /// address cannot be bound.
    pub fn start<R: crate::Record>(
        &self,
        logger: &Logger<R>,
    ) -> Result<Option<crate::metrics::MetricsServer>, ConfigError> {
        self.check()?;
        let Some(addr) = self.prometheus_listen else {
            return Ok(None);
        };
        crate::metrics::MetricsServer::serve_with(
            addr,
            logger.snapshot_source(),
            self.allow_non_loopback,
        )
        .map(Some)
        .map_err(|e| ConfigError::Metrics(addr, e))
    }
}
