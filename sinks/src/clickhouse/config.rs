//! `type = "clickhouse"` settings (feature `config`):
//! [`ClickHouseSinkConfig`].

use std::io;
use std::path::PathBuf;

use serde::Deserialize;

use super::{ClickHouseOptions, ClickHouseSink};
use crate::config::{SettingsError, SinkRole, SinkSettings};
use crate::route::BoxSink;

/// `type = "clickhouse"` settings; see [`ClickHouseOptions`] and the
/// sink's module docs.
///
/// ```toml
/// [format]
/// type = "binary"
///
/// [sink]
/// type = "clickhouse"
/// url = "http://127.0.0.1:8123"
/// table = "dns_queries"
/// record_type = "dnsQuery"
/// user = "dplog"
/// password_file = "/etc/dplog/clickhouse.password"
/// ```
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ClickHouseSinkConfig {
    /// The HTTP interface. Default `http://127.0.0.1:8123`.
    pub url: String,
    /// The table (`table` or `db.table`). Required.
    pub table: String,
    /// The record type whose records go to the table. Default: the first
    /// the stream declares (name it when the logger serves several).
    pub record_type: Option<String>,
    /// User. Default: the server's `default`.
    pub user: Option<String>,
    /// Password (prefer `password_file`: a config file is often more
    /// readable than a secret should be).
    pub password: Option<String>,
    /// A file whose first line is the password.
    pub password_file: Option<PathBuf>,
    /// Rows per insert. Default 100000.
    pub batch_rows: usize,
    /// RowBinary bytes per insert. Default 16777216.
    pub batch_bytes: usize,
    /// An insert goes once its first row is this old (ms). Default 1000.
    pub batch_age_ms: u64,
    /// First backoff after a failed insert (ms). Default 100.
    pub retry_initial_ms: u64,
    /// Longest backoff (ms). Default 5000.
    pub retry_max_ms: u64,
    /// Connect timeout (ms). Default 2000.
    pub connect_timeout_ms: u64,
    /// Whole-request timeout (ms). Default 30000.
    pub timeout_ms: u64,
    /// `fanout` (default) or `failover`.
    pub role: SinkRole,
}

impl std::fmt::Debug for ClickHouseSinkConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The password stays out of every print.
        f.debug_struct("ClickHouseSinkConfig")
            .field("options", &self.options())
            .field("role", &self.role)
            .finish()
    }
}

impl Default for ClickHouseSinkConfig {
    fn default() -> Self {
        let d = ClickHouseOptions::new("http://127.0.0.1:8123", "");
        Self {
            url: d.url,
            table: d.table,
            record_type: None,
            user: None,
            password: None,
            password_file: None,
            batch_rows: d.batch_rows,
            batch_bytes: d.batch_bytes,
            batch_age_ms: d.batch_age_ms,
            retry_initial_ms: d.retry_initial_ms,
            retry_max_ms: d.retry_max_ms,
            connect_timeout_ms: d.connect_timeout_ms,
            timeout_ms: d.timeout_ms,
            role: SinkRole::Fanout,
        }
    }
}

impl ClickHouseSinkConfig {
    /// The sink options these settings describe.
    pub fn options(&self) -> ClickHouseOptions {
        ClickHouseOptions {
            url: self.url.clone(),
            table: self.table.clone(),
            record_type: self.record_type.clone(),
            user: self.user.clone(),
            password: self.password.clone(),
            password_file: self.password_file.clone(),
            batch_rows: self.batch_rows,
            batch_bytes: self.batch_bytes,
            batch_age_ms: self.batch_age_ms,
            retry_initial_ms: self.retry_initial_ms,
            retry_max_ms: self.retry_max_ms,
            connect_timeout_ms: self.connect_timeout_ms,
            timeout_ms: self.timeout_ms,
        }
    }
}

impl SinkSettings for ClickHouseSinkConfig {
    /// The sink inserts records, not lines: `binary` only; a `table`;
    /// an `http://` (or, with TLS built in, `https://`) URL; not both
    /// `password` and `password_file`; batches of at least one row and
    /// byte.
    fn check(&self, format: &str) -> Result<(), SettingsError> {
        if format != "binary" {
            return Err(SettingsError::new(
                "type",
                format!(
                    "type = \"clickhouse\" with [format] type = \"{format}\": the sink inserts \
                     the records themselves (RowBinary from their schema), not formatted lines; \
                     set [format] type = \"binary\""
                ),
            ));
        }
        if self.table.is_empty() {
            return Err(SettingsError::new(
                "table",
                "table = \"\": name the ClickHouse table (e.g. table = \"dns_queries\" or \
                 \"logs.dns_queries\")"
                    .into(),
            ));
        }
        let tls = cfg!(feature = "clickhouse-tls");
        if !(self.url.starts_with("http://") || self.url.starts_with("https://") && tls) {
            let why = if self.url.starts_with("https://") {
                "this build has no TLS (feature `clickhouse-tls` of dplog-sinks); use http://"
            } else {
                "not the URL of a ClickHouse HTTP interface (e.g. \"http://127.0.0.1:8123\")"
            };
            return Err(SettingsError::new(
                "url",
                format!("url = {:?}: {why}", self.url),
            ));
        }
        if self.password.is_some() && self.password_file.is_some() {
            return Err(SettingsError::new(
                "password_file",
                "password_file with password: give one of them".into(),
            ));
        }
        if self.batch_rows == 0 || self.batch_bytes == 0 {
            return Err(SettingsError::new(
                "batch_rows",
                format!(
                    "batch_rows = {}, batch_bytes = {}: both must be at least 1",
                    self.batch_rows, self.batch_bytes
                ),
            ));
        }
        Ok(())
    }

    fn role(&self) -> SinkRole {
        self.role
    }

    /// `clickhouse TABLE at URL`.
    fn describe(&self) -> String {
        format!("clickhouse {} at {}", self.table, self.url)
    }

    /// A [`ClickHouseSink`]; `header` is not used.
    fn build(&self, _header: Option<&[u8]>) -> io::Result<BoxSink> {
        Ok(Box::new(ClickHouseSink::new(self.options())?))
    }
}
