//! The ClickHouse sink: records of one record type inserted into one
//! ClickHouse table over the HTTP interface as `INSERT INTO t (...)
//! FORMAT RowBinary`, each row encoded from the record's bytes by its
//! schema ([`RowEncoder`]), with no text in between.
//!
//! # What it receives
//!
//! As the archive sink, the stream of the `binary` format (`[format] type
//! = "binary"`: schemas in `S` frames, records in `R` frames, TSC
//! calibrations in `C` frames; drop reports, `D`, are skipped: drops are
//! in the logger's counters). Records of the record type named
//! [`ClickHouseOptions::record_type`] (default: the first type the
//! stream declares) go to [`ClickHouseOptions::table`]; records of other
//! types are not this sink's: they are counted in
//! `clickhouse.skipped_records` and reported as taken (give each type
//! its own sink in a `[[sink]]` set; the configuration refuses a logger
//! whose sinks are all ClickHouse sinks and leave a type it serves to
//! none of them).
//!
//! # The table
//!
//! When the stream declares the record type, the sink reads the table's
//! columns (`DESCRIBE TABLE`) and builds the row encoder for them; a
//! table that is missing, or whose columns do not hold the record's
//! fields (see [`RowEncoder::for_table`]), is refused with a permanent
//! error naming the table and each mismatched column, and so is every
//! later batch. The configuration (`dplog::config`) runs the same check
//! when the logger starts, so such a table stops the start. A server that
//! cannot be reached then is not an error: the check runs again when it
//! answers, before the first insert; meanwhile batches are refused with
//! a retryable error (producers see their ring policy).
//!
//! # Batches and delivery
//!
//! Rows collect in one insert until it holds
//! [`ClickHouseOptions::batch_rows`] rows or
//! [`ClickHouseOptions::batch_bytes`] bytes of RowBinary, or its first
//! row is [`ClickHouseOptions::batch_age_ms`] old (checked on every
//! tick), or on `flush`/`drain`. Batches are [`Accepted::Pending`]: their
//! records count as written (`written_records`) only when the server
//! answered the insert with HTTP 200, reported through [`Sink::poll`].
//!
//! An insert that fails (no connection, a timeout, a server error) is
//! kept and sent again, the same bytes, after a backoff that doubles from
//! [`ClickHouseOptions::retry_initial_ms`] to
//! [`ClickHouseOptions::retry_max_ms`] (each attempt counted in
//! `clickhouse.retries`); new rows meanwhile fill the next insert, and
//! once that one is full too `write_batch` refuses batches with a
//! retryable error until the kept insert goes. An answer of HTTP 400
//! (the server cannot parse the insert) fails its records for good
//! (`dropped_sink`, with the server's message on stderr). At shutdown,
//! what is not delivered by the drain deadline is reported by the runtime
//! as `dropped_shutdown`.
//!
//! # Duplicates
//!
//! A retried insert whose first attempt the server committed but whose
//! answer was lost (the connection cut after the commit) arrives twice.
//! ClickHouse drops the second copy where it deduplicates inserts: for
//! `Replicated*MergeTree` tables (an identical block, by its checksum,
//! among the last `replicated_deduplication_window` ones; the sink
//! resends identical bytes, so the block is identical), and on current
//! servers for plain `MergeTree` tables with the table setting
//! `non_replicated_deduplication_window`. Where the server knows the
//! `insert_deduplication_token` setting (checked once per connection
//! through `system.settings`), each insert carries a token unique to it
//! and kept across its retries, so the server matches retries by it. A
//! plain `MergeTree` on ClickHouse 18.16 (Debian 12's) does not
//! deduplicate: such a retry leaves the insert's rows twice (whole
//! inserts, never part of one); `SELECT DISTINCT` or a
//! `ReplacingMergeTree` table removes them.
//!
//! # Credentials and TLS
//!
//! The user and password go in the `X-ClickHouse-User` and
//! `X-ClickHouse-Key` headers, from the settings or (password) from a
//! file ([`ClickHouseOptions::password_file`], its first line), never
//! from a command line and never logged ([`ClickHouseOptions`]'s `Debug`
//! hides the password). `https://` URLs need the feature `clickhouse-tls`
//! (rustls with the webpki roots); without it they are refused when the
//! sink is built.

pub mod columns;
#[cfg(feature = "config")]
pub mod config;
#[cfg(feature = "config")]
pub use config::ClickHouseSinkConfig;

pub use columns::{
    column_type, create_table, lookup_at, time_sql, value_sql, RowEncoder, Server, TableOptions,
};

use std::io;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::accounting::{bump, named};
use dplog_core::schema::Schema;
use dplog_core::{Accepted, Progress, Sink, SinkError};
use dplog_formatters::binary::{parse_schema, Frame, StreamDecoder};
use dplog_formatters::TscCalibration;

/// The ClickHouse sink's settings.
#[derive(Clone, PartialEq, Eq)]
pub struct ClickHouseOptions {
    /// The HTTP interface, `http://host:port` (8123 by default on a
    /// server) or `https://host:port` (feature `clickhouse-tls`).
    pub url: String,
    /// The table (`table` or `db.table`).
    pub table: String,
    /// The record type (schema name) whose records go to the table;
    /// `None`: the first the stream declares.
    pub record_type: Option<String>,
    /// User; `None`: the server's `default`.
    pub user: Option<String>,
    /// Password; see also `password_file`.
    pub password: Option<String>,
    /// A file whose first line is the password (read when the sink is
    /// built).
    pub password_file: Option<PathBuf>,
    /// Rows per insert. Default 100,000.
    pub batch_rows: usize,
    /// RowBinary bytes per insert. Default 16 MiB.
    pub batch_bytes: usize,
    /// An insert goes once its first row is this old. Default 1000.
    pub batch_age_ms: u64,
    /// First backoff after a failed insert. Default 100.
    pub retry_initial_ms: u64,
    /// Longest backoff. Default 5000.
    pub retry_max_ms: u64,
    /// Connect timeout. Default 2000.
    pub connect_timeout_ms: u64,
    /// Whole-request timeout. Default 30000.
    pub timeout_ms: u64,
}

impl std::fmt::Debug for ClickHouseOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClickHouseOptions")
            .field("url", &self.url)
            .field("table", &self.table)
            .field("record_type", &self.record_type)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "<hidden>"))
            .field("password_file", &self.password_file)
            .field("batch_rows", &self.batch_rows)
            .field("batch_bytes", &self.batch_bytes)
            .field("batch_age_ms", &self.batch_age_ms)
            .finish_non_exhaustive()
    }
}

impl ClickHouseOptions {
    /// Defaults for `url` and `table`.
    pub fn new(url: impl Into<String>, table: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            table: table.into(),
            record_type: None,
            user: None,
            password: None,
            password_file: None,
            batch_rows: 100_000,
            batch_bytes: 16 << 20,
            batch_age_ms: 1000,
            retry_initial_ms: 100,
            retry_max_ms: 5000,
            connect_timeout_ms: 2000,
            timeout_ms: 30_000,
        }
    }
}

/// Counters of one ClickHouse sink (single writer, the consumer thread).
#[derive(Debug, Default)]
pub struct ClickHouseCounters {
    /// Inserts the server answered with 200.
    pub inserts: AtomicU64,
    /// Rows in those.
    pub rows: AtomicU64,
    /// RowBinary bytes in those.
    pub rowbinary_bytes: AtomicU64,
    /// Insert attempts that failed and are retried (connection, timeout,
    /// server error).
    pub retries: AtomicU64,
    /// Inserts the server refused for good (HTTP 400); their rows are
    /// failed.
    pub refused_inserts: AtomicU64,
    /// Records of other record types than the table's (not sent).
    pub skipped_records: AtomicU64,
    /// `DESCRIBE TABLE` checks that passed.
    pub table_checks: AtomicU64,
}

impl dplog_core::SinkCounters for ClickHouseCounters {
    fn named(&self) -> Vec<(String, u64)> {
        named(
            "clickhouse",
            &[
                ("inserts", &self.inserts),
                ("rows", &self.rows),
                ("rowbinary_bytes", &self.rowbinary_bytes),
                ("retries", &self.retries),
                ("refused_inserts", &self.refused_inserts),
                ("skipped_records", &self.skipped_records),
                ("table_checks", &self.table_checks),
            ],
        )
    }
}

/// A connection to a server's HTTP interface with the sink's
/// credentials: queries and inserts. Also what the configuration's start
/// check uses ([`Client::check_table`]).
#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    url: String,
    user: Option<String>,
    password: Option<String>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("url", &self.url)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// How a request failed.
#[derive(Debug)]
pub enum RequestError {
    /// No answer (connection refused or cut, timeout): try again later.
    Transport(String),
    /// The server answered with this HTTP status and message.
    Status(u16, String),
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestError::Transport(m) => write!(f, "no answer: {m}"),
            RequestError::Status(c, m) => write!(f, "HTTP {c}: {}", m.trim()),
        }
    }
}

impl Client {
    /// A client for `o.url` with `o`'s credentials (the password file
    /// read now).
    ///
    /// # Errors
    /// `InvalidInput` for a URL that is not `http://` (or `https://` with
    /// the feature `clickhouse-tls`); the password file's read error.
    pub fn new(o: &ClickHouseOptions) -> io::Result<Self> {
        let bad = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
        let url = o.url.trim_end_matches('/').to_string();
        if url.starts_with("https://") {
            if !cfg!(feature = "clickhouse-tls") {
                return Err(bad(format!(
                    "url = {url:?}: this build has no TLS: rebuild dplog-sinks with feature \
                     `clickhouse-tls`, or use http://"
                )));
            }
        } else if !url.starts_with("http://") {
            return Err(bad(format!(
                "url = {url:?}: not an http:// or https:// URL of a ClickHouse HTTP interface \
                 (e.g. http://127.0.0.1:8123)"
            )));
        }
        let password = match (&o.password, &o.password_file) {
            (Some(p), _) => Some(p.clone()),
            (None, Some(f)) => {
                let text = std::fs::read_to_string(f).map_err(|e| {
                    io::Error::new(e.kind(), format!("password_file {}: {e}", f.display()))
                })?;
                Some(text.lines().next().unwrap_or("").to_string())
            }
            (None, None) => None,
        };
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_millis(o.connect_timeout_ms))
            .timeout(Duration::from_millis(o.timeout_ms))
            .build();
        Ok(Self {
            agent,
            url,
            user: o.user.clone(),
            password,
        })
    }

    /// POSTs `body` to the interface with URL parameters `params`;
    /// returns the answer's body on 200.
    ///
    /// # Errors
    /// [`RequestError`].
    pub fn post(&self, params: &[(&str, &str)], body: &[u8]) -> Result<String, RequestError> {
        let mut r = self.agent.post(&format!("{}/", self.url));
        for (k, v) in params {
            r = r.query(k, v);
        }
        if let Some(u) = &self.user {
            r = r.set("X-ClickHouse-User", u);
        }
        if let Some(p) = &self.password {
            r = r.set("X-ClickHouse-Key", p);
        }
        match r.send_bytes(body) {
            Ok(resp) => resp
                .into_string()
                .map_err(|e| RequestError::Transport(e.to_string())),
            Err(ureq::Error::Status(code, resp)) => Err(RequestError::Status(
                code,
                resp.into_string().unwrap_or_default(),
            )),
            Err(ureq::Error::Transport(t)) => Err(RequestError::Transport(t.to_string())),
        }
    }

    /// Runs `sql` (a query) and returns its text answer.
    ///
    /// # Errors
    /// [`RequestError`].
    pub fn query(&self, sql: &str) -> Result<String, RequestError> {
        self.post(&[], sql.as_bytes())
    }

    /// The columns of `table` as `DESCRIBE TABLE` lists them: `(name,
    /// type, default kind)`.
    ///
    /// # Errors
    /// [`RequestError`] (a missing table is HTTP 404 with the server's
    /// message).
    pub fn describe(&self, table: &str) -> Result<Vec<(String, String, String)>, RequestError> {
        let text = self.query(&format!(
            "DESCRIBE TABLE {} FORMAT TabSeparated",
            columns::table_ident(table)
        ))?;
        Ok(text
            .lines()
            .map(|l| {
                let mut c = l.split('\t').map(unescape_tsv);
                let name = c.next().unwrap_or_default();
                let ty = c.next().unwrap_or_default();
                let default = c.next().unwrap_or_default();
                (name, ty, default)
            })
            .collect())
    }

    /// Checks that `table` can take the records of `s` and returns their
    /// encoder ([`RowEncoder::for_table`]).
    ///
    /// # Errors
    /// `Err(Ok(message))`: the table is missing or does not match `s`, the
    /// message naming the table and each mismatched column, or the server
    /// refused the credentials (HTTP 401/403); `Err(Err(e))`: the server
    /// could not be asked.
    pub fn check_table(
        &self,
        table: &str,
        s: &Schema,
    ) -> Result<RowEncoder, Result<String, RequestError>> {
        let cols = match self.describe(table) {
            Ok(c) => c,
            Err(RequestError::Status(404, m)) | Err(RequestError::Status(400, m))
                if m.contains("doesn't exist") || m.contains("does not exist") =>
            {
                return Err(Ok(format!(
                    "ClickHouse table {table} at {}: it does not exist (create it with \
                     `dplog-query ddl --clickhouse`): {}",
                    self.url,
                    m.trim()
                )))
            }
            Err(RequestError::Status(c @ (401 | 403), m)) => {
                return Err(Ok(format!(
                    "ClickHouse at {}: user {} refused (HTTP {c}): {}",
                    self.url,
                    self.user.as_deref().unwrap_or("default"),
                    m.trim()
                )))
            }
            Err(e) => return Err(Err(e)),
        };
        RowEncoder::for_table(s, &cols).map_err(|w| {
            Ok(format!(
                "ClickHouse table {table} at {} does not match record type {}: {w}",
                self.url,
                s.name()
            ))
        })
    }

    /// Whether the server knows the setting `name` (`system.settings`).
    ///
    /// # Errors
    /// [`RequestError`].
    pub fn has_setting(&self, name: &str) -> Result<bool, RequestError> {
        let n = self.query(&format!(
            "SELECT count() FROM system.settings WHERE name = {}",
            columns::literal(name)
        ))?;
        Ok(n.trim() != "0")
    }
}

/// TabSeparated's escapes (`\t`, `\n`, `\\`, `\'`, ...) undone.
fn unescape_tsv(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            o.push(c);
            continue;
        }
        match it.next() {
            Some('t') => o.push('\t'),
            Some('n') => o.push('\n'),
            Some('0') => o.push('\0'),
            Some(x) => o.push(x),
            None => o.push('\\'),
        }
    }
    o
}

/// An insert being built or waiting to go.
#[derive(Debug, Default)]
struct Insert {
    body: Vec<u8>,
    rows: u64,
    /// Bytes of the records' `R` frames (what the runtime counts as the
    /// batch's bytes).
    frame_bytes: u64,
    /// When its first row came.
    since: Option<Instant>,
}

/// An insert sent at least once and not yet answered with 200.
#[derive(Debug)]
struct Held {
    insert: Insert,
    token: String,
    next_try: Instant,
    backoff: Duration,
    last_error: String,
}

/// The record type's table, once checked.
#[derive(Debug)]
struct Target {
    /// The record type's name.
    name: String,
    /// The schema's `S` frame payload it was checked for.
    raw: Vec<u8>,
    enc: RowEncoder,
    query: String,
}

/// The ClickHouse sink; see the module docs.
#[derive(Debug)]
pub struct ClickHouseSink {
    opts: ClickHouseOptions,
    client: Client,
    counters: Arc<ClickHouseCounters>,
    decoder: StreamDecoder,
    cal: TscCalibration,
    /// Index into the decoder's schemas of the record type's schema.
    target_schema: Option<usize>,
    target: Option<Target>,
    /// Set once the table was refused: every batch fails with it.
    refused: Option<String>,
    building: Insert,
    held: Option<Held>,
    progress: Progress,
    /// `Some(yes)` once the server was asked about
    /// `insert_deduplication_token`.
    dedup_token: Option<bool>,
    token_base: String,
    seq: u64,
    closed: bool,
    last_notice: Option<Instant>,
}

fn permanent(m: String) -> SinkError {
    SinkError::Permanent(io::Error::new(io::ErrorKind::InvalidData, m))
}

fn retryable(m: String) -> SinkError {
    SinkError::Retryable(io::Error::new(io::ErrorKind::NotConnected, m))
}

impl ClickHouseSink {
    /// A sink with settings `opts`. Opens no connection: the table is
    /// checked when the stream declares the record type (see the module
    /// docs).
    ///
    /// # Errors
    /// As [`Client::new`]; `InvalidInput` for `batch_rows` or
    /// `batch_bytes` of 0.
    pub fn new(opts: ClickHouseOptions) -> io::Result<Self> {
        if opts.batch_rows == 0 || opts.batch_bytes == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "clickhouse: batch_rows and batch_bytes must be at least 1",
            ));
        }
        let client = Client::new(&opts)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Ok(Self {
            token_base: format!("dplog-{}-{}", std::process::id(), now.as_nanos()),
            opts,
            client,
            counters: Arc::default(),
            decoder: StreamDecoder::new(),
            cal: TscCalibration::IDENTITY,
            target_schema: None,
            target: None,
            refused: None,
            building: Insert::default(),
            held: None,
            progress: Progress::default(),
            dedup_token: None,
            seq: 0,
            closed: false,
            last_notice: None,
        })
    }

    /// The sink's counters.
    pub fn counters(&self) -> Arc<ClickHouseCounters> {
        self.counters.clone()
    }

    /// Checks the table for every schema frame of `batch` that declares
    /// the record type (`record_type`, else the first type of the stream)
    /// with a layout not checked yet, before anything of the batch is
    /// taken.
    fn check_schemas(&mut self, batch: &[u8]) -> Result<(), SinkError> {
        let mut want = self
            .opts
            .record_type
            .clone()
            .or_else(|| self.target.as_ref().map(|t| t.name.clone()));
        let mut p = 0;
        while p + 4 <= batch.len() {
            let len = u16::from_le_bytes([batch[p + 2], batch[p + 3]]) as usize;
            let end = (p + 4 + len).min(batch.len());
            if batch[p] == b'S' {
                let raw = &batch[p + 4..end];
                if let Ok(s) = parse_schema(raw) {
                    if want.as_deref().map_or(true, |n| n == s.name()) {
                        want = Some(s.name().to_string());
                        if self.target.as_ref().map_or(true, |t| t.raw != raw) {
                            self.check(&s, raw)?;
                        }
                    }
                }
            }
            p = end;
        }
        Ok(())
    }

    fn check(&mut self, s: &Schema, raw: &[u8]) -> Result<(), SinkError> {
        match self.client.check_table(&self.opts.table, s) {
            Ok(enc) => {
                bump(&self.counters.table_checks, 1);
                let query = format!(
                    "INSERT INTO {} {} FORMAT RowBinary",
                    columns::table_ident(&self.opts.table),
                    enc.column_list()
                );
                self.target = Some(Target {
                    name: s.name().to_string(),
                    raw: raw.to_vec(),
                    enc,
                    query,
                });
                Ok(())
            }
            Err(Ok(m)) => {
                eprintln!("dplog: clickhouse: {m}");
                self.refused = Some(m.clone());
                Err(permanent(m))
            }
            Err(Err(e)) => Err(retryable(format!(
                "clickhouse {}: cannot check table {}: {e}",
                self.opts.url, self.opts.table
            ))),
        }
    }

    fn building_full(&self) -> bool {
        self.building.rows as usize >= self.opts.batch_rows
            || self.building.body.len() >= self.opts.batch_bytes
    }

    /// The insert being built becomes the held one (if none is held).
    fn cut(&mut self, now: Instant) {
        if self.held.is_some() || self.building.rows == 0 {
            return;
        }
        self.seq += 1;
        self.held = Some(Held {
            insert: std::mem::take(&mut self.building),
            token: format!("{}-{}", self.token_base, self.seq),
            next_try: now,
            backoff: Duration::from_millis(self.opts.retry_initial_ms),
            last_error: String::new(),
        });
    }

    /// Sends the held insert if its time has come; true when none is held
    /// afterwards.
    fn try_send(&mut self, now: Instant) -> bool {
        let Some(h) = &mut self.held else {
            return true;
        };
        if now < h.next_try {
            return false;
        }
        let Some(t) = &self.target else {
            return false;
        };
        if self.dedup_token.is_none() {
            match self.client.has_setting("insert_deduplication_token") {
                Ok(yes) => self.dedup_token = Some(yes),
                Err(e) => {
                    h.last_error = e.to_string();
                    Self::back_off(h, &self.counters, &self.opts, now);
                    return false;
                }
            }
        }
        let mut params = vec![("query", t.query.as_str())];
        if self.dedup_token == Some(true) {
            params.push(("insert_deduplication_token", h.token.as_str()));
        }
        match self.client.post(&params, &h.insert.body) {
            Ok(_) => {
                let c = &self.counters;
                bump(&c.inserts, 1);
                bump(&c.rows, h.insert.rows);
                bump(&c.rowbinary_bytes, h.insert.body.len() as u64);
                self.progress.delivered_records += h.insert.rows;
                self.progress.delivered_bytes += h.insert.frame_bytes;
                self.held = None;
                true
            }
            Err(RequestError::Status(400, m)) => {
                eprintln!(
                    "dplog: clickhouse {}: the server refused an insert of {} rows into {} \
                     (HTTP 400): {}; its records are dropped",
                    self.opts.url,
                    h.insert.rows,
                    self.opts.table,
                    m.trim()
                );
                bump(&self.counters.refused_inserts, 1);
                self.progress.failed_records += h.insert.rows;
                self.held = None;
                true
            }
            Err(e) => {
                h.last_error = e.to_string();
                // The server's version may have changed with a restart.
                self.dedup_token = None;
                Self::back_off(h, &self.counters, &self.opts, now);
                false
            }
        }
    }

    fn back_off(h: &mut Held, c: &ClickHouseCounters, o: &ClickHouseOptions, now: Instant) {
        bump(&c.retries, 1);
        h.next_try = now + h.backoff;
        h.backoff = (h.backoff * 2).min(Duration::from_millis(o.retry_max_ms.max(1)));
    }

    /// Announces the held insert's error on stderr, at most every 5 s.
    fn notice(&mut self, now: Instant) {
        let Some(h) = &self.held else { return };
        if h.last_error.is_empty()
            || self
                .last_notice
                .is_some_and(|t| now.duration_since(t) < Duration::from_secs(5))
        {
            return;
        }
        self.last_notice = Some(now);
        eprintln!(
            "dplog: clickhouse {}: insert of {} rows into {} not delivered yet, retrying: {}",
            self.opts.url, h.insert.rows, self.opts.table, h.last_error
        );
    }

    fn check_frames(batch: &[u8]) -> Result<(), SinkError> {
        for f in dplog_formatters::binary::frames(batch) {
            match f {
                Ok(_) => {}
                Err(e) if e.cut_short => {
                    return Err(permanent(format!(
                        "binary frame at byte {} cut short",
                        e.at
                    )))
                }
                Err(e) => {
                    return Err(permanent(format!(
                        "the clickhouse sink takes the binary format's frames (set [format] \
                         type = \"binary\"); byte {} of the batch is not one",
                        e.at
                    )))
                }
            }
        }
        Ok(())
    }
}

impl Sink for ClickHouseSink {
    fn write_batch(&mut self, batch: &[u8]) -> Result<Accepted, SinkError> {
        if self.closed {
            return Err(permanent("clickhouse sink closed".into()));
        }
        if let Some(m) = &self.refused {
            return Err(permanent(m.clone()));
        }
        Self::check_frames(batch)?;
        let now = Instant::now();
        self.try_send(now);
        if self.held.is_some() && self.building_full() {
            self.notice(now);
            let e = self.held.as_ref().map_or("", |h| &h.last_error).to_string();
            return Err(retryable(format!(
                "clickhouse {}: an insert into {} is waiting to be delivered and the next one \
                 is full: {e}",
                self.opts.url, self.opts.table
            )));
        }
        self.check_schemas(batch)?;
        let mark = (
            self.building.body.len(),
            self.building.rows,
            self.building.frame_bytes,
        );
        let mut skipped = 0u64;
        let mut p = 0;
        while p < batch.len() {
            let (f, n) = match self.decoder.next(&batch[p..]) {
                Ok(Some(x)) => x,
                bad => {
                    // Nothing of a refused batch stays: the runtime counts
                    // all of its records as dropped.
                    self.building.body.truncate(mark.0);
                    self.building.rows = mark.1;
                    self.building.frame_bytes = mark.2;
                    let why = bad.err().unwrap_or_else(|| "frame cut short".into());
                    return Err(permanent(format!(
                        "clickhouse sink: binary stream at byte {p}: {why}"
                    )));
                }
            };
            match f {
                Frame::Schema(i) => {
                    // `check_schemas` set the target for this batch's
                    // declaration of the record type.
                    let name = self.decoder.schemas()[i].name();
                    if self.target.as_ref().is_some_and(|t| t.name == name) {
                        self.target_schema = Some(i);
                    }
                }
                Frame::Calibration(c) => self.cal = c,
                Frame::Record(i, rec) => {
                    if Some(i) == self.target_schema {
                        if let Some(t) = &self.target {
                            t.enc.push(rec, &self.cal, &mut self.building.body);
                            self.building.rows += 1;
                            self.building.frame_bytes += n as u64;
                            self.building.since.get_or_insert(now);
                        }
                    } else {
                        skipped += 1;
                    }
                }
                Frame::Header | Frame::DropReport(_) => {}
            }
            p += n;
        }
        if skipped > 0 {
            bump(&self.counters.skipped_records, skipped);
            self.progress.delivered_records += skipped;
        }
        if self.building_full() {
            self.cut(now);
            self.try_send(now);
        }
        Ok(Accepted::Pending)
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        let now = Instant::now();
        self.cut(now);
        if let Some(h) = &mut self.held {
            h.next_try = now;
        }
        if self.try_send(now) {
            self.cut(now);
            self.try_send(now);
        }
        match &self.held {
            None => Ok(()),
            Some(h) => Err(retryable(format!(
                "clickhouse {}: insert into {} not delivered: {}",
                self.opts.url, self.opts.table, h.last_error
            ))),
        }
    }

    fn tick(&mut self, now: Instant) -> Result<(), SinkError> {
        if self.held.is_some() {
            if self.try_send(now) {
                self.cut(now);
            } else {
                self.notice(now);
            }
        }
        let aged = self.building.since.is_some_and(|t| {
            now.saturating_duration_since(t) >= Duration::from_millis(self.opts.batch_age_ms)
        });
        if self.held.is_none() && (aged || self.building_full()) {
            self.cut(now);
            self.try_send(now);
        }
        Ok(())
    }

    fn poll(&mut self) -> Progress {
        std::mem::take(&mut self.progress)
    }

    fn drain(&mut self, deadline: Instant) -> Result<(), SinkError> {
        loop {
            let now = Instant::now();
            self.cut(now);
            if self.held.is_none() {
                return Ok(());
            }
            if self.try_send(now) {
                continue;
            }
            let next = self.held.as_ref().map_or(now, |h| h.next_try);
            if next >= deadline {
                self.notice(now);
                return Err(retryable(format!(
                    "clickhouse {}: inserts into {} not delivered by the deadline",
                    self.opts.url, self.opts.table
                )));
            }
            std::thread::sleep(next.saturating_duration_since(now));
        }
    }

    fn close(&mut self) -> Result<(), SinkError> {
        self.closed = true;
        Ok(())
    }

    /// `clickhouse TABLE at URL`.
    fn describe(&self) -> String {
        format!("clickhouse {} at {}", self.opts.table, self.opts.url)
    }

    fn named_counters(&self) -> Option<Arc<dyn dplog_core::SinkCounters>> {
        Some(self.counters.clone())
    }
}
