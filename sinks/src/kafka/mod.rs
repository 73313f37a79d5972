//! The Kafka sink, through the `rdkafka` crate (librdkafka): each line is
//! one Kafka message, keyed so one subscriber's records stay in one
//! partition and in order.
//!
//! - The dplog ring is the backpressure: librdkafka's "Local: Queue full"
//!   makes the sink serve delivery reports and retry, never drop; after
//!   about 100 ms it returns a retryable error and the runtime retries the
//!   rest of the batch (producers then see their ring policy).
//! - A record counts as written only when Kafka acknowledges it: batches
//!   are [`Accepted::Pending`] and [`Sink::poll`] reports acknowledgements
//!   and failures from the delivery reports, served on every tick.
//! - In-band drop-report lines (marked by the runtime through
//!   [`Sink::write_batch_marked`]) go as messages of their own and are not
//!   records: their outcomes are counted in
//!   [`KafkaCounters::reports_acked`] / [`KafkaCounters::reports_failed`]
//!   and never reported through `poll`, so `written_records` stays exact
//!   under `drop_newest` and `degrade`.
//! - The idempotent producer is on by default (`enable.idempotence`), and
//!   `message.timeout.ms` defaults to 0 (no local timeout), so a broker
//!   outage delays records instead of failing them.
//! - A record larger than `message.max.bytes` is rejected alone (counted as
//!   failed); the rest of its batch goes on.
//! - Records that fail for good (rejected, or a delivery error such as
//!   `Local: Unknown topic` once librdkafka stops waiting for a missing
//!   topic) are announced on stderr with the reason, at most every 5 s,
//!   and kept in [`KafkaSink::last_error`]. Client-wide errors (a broker
//!   connection lost) are counted in [`KafkaCounters::client_errors`]; the
//!   records stay queued and are retried.
//! - A fatal producer error (the idempotent producer can no longer keep
//!   its guarantee, e.g. a restarted broker forgot its producer id while a
//!   batch was being retried) fails what the producer holds (counted as
//!   failed, with the reason) and makes `write_batch` fail with a
//!   permanent error.
//! - Shutdown flushes until the runtime's deadline; what is still
//!   unacknowledged is reported by the runtime as `dropped_shutdown`.
//! - A stalled cluster is a sink failure: when messages are in flight and
//!   no delivery report (acknowledgement or failure) has arrived for
//!   [`KafkaSinkOptions::ack_timeout_ms`], `write_batch` refuses new
//!   batches with a retryable `TimedOut` error instead of queueing more.
//!   The runtime then backs off (producers see their ring policy) and a
//!   [`Failover`](crate::Failover) switches to its secondary; the first
//!   delivery report ends the stall. What is already queued stays pending
//!   (delivered if the cluster comes back, else `dropped_shutdown`).

#[cfg(feature = "config")]
pub mod config;
#[cfg(feature = "config")]
pub use config::KafkaSinkConfig;

use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::accounting::{bump, in_report, named, read};
use dplog_core::{Accepted, Progress, Sink, SinkError};
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;

/// Which bytes of a line become the Kafka message key.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum KafkaKey {
    /// No key: librdkafka spreads records over partitions.
    #[default]
    None,
    /// The value of field `name`: `name=value` in text lines, `"name":value`
    /// or `"name":"value"` in JSON lines; e.g. `sourceIPv4Address`, the
    /// inside address. A line without the field gets no key.
    Field(String),
    /// The n-th (0-based) whitespace-separated token of the line.
    Token(usize),
}

impl KafkaKey {
    /// The key bytes of `line`, if any.
    pub fn extract<'a>(&self, line: &'a [u8]) -> Option<&'a [u8]> {
        match self {
            KafkaKey::None => None,
            KafkaKey::Token(n) => line
                .split(|b| *b == b' ' || *b == b'\t')
                .filter(|t| !t.is_empty())
                .nth(*n),
            KafkaKey::Field(name) => field_value(line, name.as_bytes()),
        }
    }
}

fn field_value<'a>(line: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let finder = memchr::memmem::find_iter(line, name);
    for at in finder {
        let before_ok = at == 0 || matches!(line[at - 1], b' ' | b'"' | b'{' | b',' | b'\t');
        let rest = &line[at + name.len()..];
        if !before_ok {
            continue;
        }
        if let Some(v) = rest.strip_prefix(b"=") {
            let end = memchr::memchr2(b' ', b'\t', v).unwrap_or(v.len());
            return Some(&v[..end]);
        }
        if let Some(v) = rest.strip_prefix(b"\":") {
            let v = v.strip_prefix(b" ").unwrap_or(v);
            if let Some(q) = v.strip_prefix(b"\"") {
                let end = memchr::memchr(b'"', q)?;
                return Some(&q[..end]);
            }
            let end = memchr::memchr2(b',', b'}', v).unwrap_or(v.len());
            return Some(&v[..end]);
        }
    }
    None
}

/// Kafka sink settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaSinkOptions {
    /// `bootstrap.servers`, e.g. `127.0.0.1:9092`.
    pub brokers: String,
    /// Topic to produce to.
    pub topic: String,
    /// Message key. Default none.
    pub key: KafkaKey,
    /// `enable.idempotence`. Default true.
    pub idempotent: bool,
    /// `linger.ms`. Default 5.
    pub linger_ms: u64,
    /// `message.timeout.ms`; 0 = never time out locally. Default 0.
    pub message_timeout_ms: u64,
    /// `queue.buffering.max.messages`. Default 1 000 000.
    pub queue_max_messages: u64,
    /// `message.max.bytes`, if set. Default: librdkafka's (1 000 000).
    pub message_max_bytes: Option<u64>,
    /// Pack up to this many consecutive lines with the same key into one
    /// Kafka message, newline-separated (1 = one line per message). A pack
    /// larger than `message.max.bytes` is sent line by line. Default 1.
    pub lines_per_message: usize,
    /// Other librdkafka properties, applied last.
    pub properties: Vec<(String, String)>,
    /// Longest wait, in ms, for any delivery report while messages are in
    /// flight before the sink counts the cluster as stalled and refuses
    /// new batches with a retryable `TimedOut` error (see the module
    /// docs); 0 = never. Default 5000.
    pub ack_timeout_ms: u64,
}

impl KafkaSinkOptions {
    /// Defaults for `brokers` and `topic`.
    pub fn new(brokers: impl Into<String>, topic: impl Into<String>) -> Self {
        Self {
            brokers: brokers.into(),
            topic: topic.into(),
            key: KafkaKey::None,
            idempotent: true,
            linger_ms: 5,
            message_timeout_ms: 0,
            queue_max_messages: 1_000_000,
            message_max_bytes: None,
            lines_per_message: 1,
            properties: Vec::new(),
            ack_timeout_ms: 5000,
        }
    }
}

/// Counters of one Kafka sink (Relaxed statistics; the delivery callback
/// runs on the consumer thread inside `poll`).
#[derive(Debug, Default)]
pub struct KafkaCounters {
    /// Records Kafka acknowledged (lines; with `lines_per_message` > 1 a
    /// message carries several).
    pub acked: AtomicU64,
    /// Formatted bytes of those (payload plus the line's newline, which is
    /// not sent), comparable with the other sinks' `written_bytes`.
    pub acked_bytes: AtomicU64,
    /// Records whose delivery failed for good.
    pub failed: AtomicU64,
    /// Records rejected alone at produce time (too large, ...).
    pub rejected: AtomicU64,
    /// "Queue full" answers (each followed by serving delivery reports and
    /// a retry).
    pub queue_full: AtomicU64,
    /// Batches refused because no delivery report arrived within
    /// `ack_timeout_ms` while messages were in flight.
    pub stalled: AtomicU64,
    /// In-band drop-report lines Kafka acknowledged. They are not records:
    /// they are left out of `acked` and of the runtime's
    /// `written_records` (their bytes count in `acked_bytes`).
    pub reports_acked: AtomicU64,
    /// Drop-report lines whose delivery failed or that were rejected at
    /// produce time (left out of `failed` and `rejected`).
    pub reports_failed: AtomicU64,
    /// Client-wide errors librdkafka reported (a broker connection lost,
    /// all brokers down, ...); the records stay queued and are retried.
    pub client_errors: AtomicU64,
}

impl KafkaCounters {
    /// Reads one counter (Relaxed).
    pub fn get(c: &AtomicU64) -> u64 {
        read(c)
    }
}

/// Packs a message's record count (< 2^24) and formatted bytes (< 2^40)
/// into the delivery opaque (64-bit targets). A record count of 0 marks a
/// message holding one in-band drop-report line.
fn pack_opaque(records: u64, bytes: u64) -> usize {
    ((records << 40) | (bytes & ((1 << 40) - 1))) as usize
}

fn unpack_opaque(v: usize) -> (u64, u64) {
    let v = v as u64;
    (v >> 40, v & ((1 << 40) - 1))
}

struct Ctx {
    counters: Arc<KafkaCounters>,
    /// The last reason a record failed (delivery error or rejection).
    last_error: Mutex<Option<String>>,
    /// The last client-wide error.
    last_client_error: Mutex<Option<String>>,
    /// Callbacks run (delivery reports, client errors): `serve` polls until
    /// a poll runs none.
    served: AtomicU64,
    /// librdkafka reported a fatal error: 1 until `serve` purged the
    /// producer's queues, then 2.
    fatal: AtomicU64,
}

impl ClientContext for Ctx {
    /// librdkafka's log lines are counted as served events only (the
    /// errors that matter arrive through `error` and the delivery reports).
    fn log(&self, _level: rdkafka::config::RDKafkaLogLevel, _fac: &str, _msg: &str) {
        bump(&self.served, 1);
    }
    /// Client-wide errors (broker connection lost, all brokers down, ...):
    /// counted, and kept as the last error.
    fn error(&self, error: KafkaError, reason: &str) {
        bump(&self.served, 1);
        bump(&self.counters.client_errors, 1);
        if matches!(error, KafkaError::Global(RDKafkaErrorCode::Fatal))
            && KafkaCounters::get(&self.fatal) == 0
        {
            // Relaxed: read by the same (consumer) thread in `serve`.
            self.fatal.store(1, Ordering::Relaxed);
        }
        if let Ok(mut g) = self.last_client_error.lock() {
            *g = Some(format!("{error}: {reason}"));
        }
    }
}

impl ProducerContext for Ctx {
    /// Records in the message and their formatted bytes (payload plus the
    /// final newline), packed by [`pack_opaque`].
    type DeliveryOpaque = usize;

    fn delivery(&self, r: &DeliveryResult<'_>, opaque: usize) {
        bump(&self.served, 1);
        let (records, bytes) = unpack_opaque(opaque);
        match r {
            Ok(_) if records == 0 => {
                bump(&self.counters.reports_acked, 1);
                bump(&self.counters.acked_bytes, bytes);
            }
            Err(_) if records == 0 => bump(&self.counters.reports_failed, 1),
            Ok(_) => {
                bump(&self.counters.acked, records);
                bump(&self.counters.acked_bytes, bytes);
            }
            Err((e, _)) => {
                bump(&self.counters.failed, records);
                // After a fatal error its reason stays the last error (the
                // purge that follows fails the rest as "purged").
                if KafkaCounters::get(&self.fatal) != 2 {
                    if let Ok(mut g) = self.last_error.lock() {
                        *g = Some(e.to_string());
                    }
                }
            }
        }
    }
}

/// Produces every line of each batch as one Kafka message (or packs of
/// lines, see [`KafkaSinkOptions::lines_per_message`]).
pub struct KafkaSink {
    producer: BaseProducer<Ctx>,
    opts: KafkaSinkOptions,
    counters: Arc<KafkaCounters>,
    /// Counter totals already taken in by `poll`: acked, acked bytes,
    /// failed.
    reported: (u64, u64, u64),
    /// Outcomes taken in but not yet reported: delivered lines, their
    /// bytes, failed lines. `poll` reports no more lines than batches the
    /// sink accepted hold (`accepted`), so the outcomes of a batch sent in
    /// part before a retryable error wait until the retry accepts it.
    backlog: (u64, u64, u64),
    /// Lines of the batches accepted as `Pending` (sent or rejected).
    accepted: u64,
    /// Lines reported through `poll` (delivered + failed).
    reported_lines: u64,
    /// `(batch fingerprint, byte offset of the next line, lines of the
    /// batch already handed to librdkafka)` after a retryable error.
    resume: Option<(u64, usize, u64)>,
    /// Lines of abandoned batches (see [`Sink::abandon`]) that librdkafka
    /// still reports on: their outcomes are not reported again.
    discount: u64,
    closed: bool,
    /// Since when messages have been in flight with no delivery report
    /// (`None` while nothing is in flight).
    waiting_since: Option<Instant>,
    /// Delivery reports seen (acked + failed) at the last stall check.
    reports_seen: u64,
    /// When failed records were last announced on stderr, and how many
    /// failed since.
    fail_note: (Option<Instant>, u64),
}

impl std::fmt::Debug for KafkaSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSink")
            .field("opts", &self.opts)
            .field("accepted", &self.accepted)
            .field("reported_lines", &self.reported_lines)
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

/// `bytes * part / whole` without overflow (`whole` > 0): the bytes of
/// `part` of `whole` lines, pro rata.
fn share(bytes: u64, part: u64, whole: u64) -> u64 {
    (u128::from(bytes) * u128::from(part) / u128::from(whole)) as u64
}

/// Most librdkafka events one `serve` handles (each a delivery report of
/// one or more messages, or an error), so a flood cannot hold the consumer
/// thread.
const MAX_EVENTS_PER_SERVE: usize = 10_000;

/// librdkafka's error `e` while `doing` something, naming the sink's
/// topic and brokers (librdkafka's own text, e.g. `Flush error:
/// OperationTimedOut (Local: Timed out)`, names neither).
fn kerr(opts: &KafkaSinkOptions, doing: &str, e: KafkaError) -> io::Error {
    io::Error::other(format!(
        "kafka topic {} at {}: {doing}: {e}",
        opts.topic, opts.brokers
    ))
}

impl KafkaSink {
    /// Creates the producer (no connection is made until the first
    /// message).
    ///
    /// Errors: `InvalidInput` for an empty topic or broker list, or a
    /// property librdkafka refuses (its message).
    pub fn new(opts: KafkaSinkOptions) -> io::Result<Self> {
        if opts.topic.is_empty() || opts.brokers.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "kafka sink needs brokers and a topic",
            ));
        }
        if opts.lines_per_message == 0 || opts.lines_per_message >= 1 << 24 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "lines_per_message must be in 1..16777216",
            ));
        }
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &opts.brokers)
            .set("enable.idempotence", opts.idempotent.to_string())
            .set("linger.ms", opts.linger_ms.to_string())
            .set("message.timeout.ms", opts.message_timeout_ms.to_string())
            .set(
                "queue.buffering.max.messages",
                opts.queue_max_messages.to_string(),
            );
        if let Some(m) = opts.message_max_bytes {
            c.set("message.max.bytes", m.to_string());
        }
        for (k, v) in &opts.properties {
            c.set(k, v);
        }
        let counters = Arc::new(KafkaCounters::default());
        let ctx = Ctx {
            counters: counters.clone(),
            last_error: Mutex::new(None),
            last_client_error: Mutex::new(None),
            served: AtomicU64::new(0),
            fatal: AtomicU64::new(0),
        };
        let producer: BaseProducer<Ctx> = c
            .create_with_context(ctx)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        Ok(Self {
            producer,
            opts,
            counters,
            reported: (0, 0, 0),
            backlog: (0, 0, 0),
            accepted: 0,
            reported_lines: 0,
            resume: None,
            discount: 0,
            closed: false,
            waiting_since: None,
            reports_seen: 0,
            fail_note: (None, 0),
        })
    }

    /// Serves every delivery report and client error librdkafka has queued,
    /// without waiting (one `poll` serves one event).
    ///
    /// After a fatal error the producer will never deliver what it holds:
    /// its queues are purged once, so those records fail now (counted, with
    /// the reason) instead of waiting for the shutdown deadline.
    fn serve(&self) {
        let ctx = self.producer.context();
        for _ in 0..MAX_EVENTS_PER_SERVE {
            let before = KafkaCounters::get(&ctx.served);
            self.producer.poll(Duration::ZERO);
            if KafkaCounters::get(&ctx.served) == before {
                break;
            }
        }
        if KafkaCounters::get(&ctx.fatal) == 1 {
            // Relaxed: consumer thread only (see `Ctx::fatal`).
            ctx.fatal.store(2, Ordering::Relaxed);
            if let Some((code, why)) = self.producer.client().fatal_error() {
                if let Ok(mut g) = ctx.last_error.lock() {
                    *g = Some(format!("fatal producer error: {code}: {why}"));
                }
            }
            self.producer
                .purge(rdkafka::producer::PurgeConfig::default().queue().inflight());
            self.serve();
        }
    }

    /// Serves delivery reports and updates the stall clock: it restarts on
    /// every new delivery report and stops while nothing is in flight.
    /// Returns how long the in-flight messages have waited for a report.
    fn stall_check(&mut self, now: Instant) -> Duration {
        self.serve();
        let c = &self.counters;
        let seen = KafkaCounters::get(&c.acked)
            + KafkaCounters::get(&c.failed)
            + KafkaCounters::get(&c.reports_acked)
            + KafkaCounters::get(&c.reports_failed);
        if self.producer.in_flight_count() == 0 {
            self.waiting_since = None;
        } else if seen != self.reports_seen || self.waiting_since.is_none() {
            self.waiting_since = Some(now);
        }
        self.reports_seen = seen;
        self.waiting_since
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t))
    }

    /// Announces records that failed for good on stderr with librdkafka's
    /// reason (e.g. `Local: Unknown topic`), at most every 5 s.
    fn note_failures(&mut self, new: u64) {
        self.fail_note.1 += new;
        let now = Instant::now();
        let due = self
            .fail_note
            .0
            .map_or(true, |t| now.duration_since(t) >= Duration::from_secs(5));
        if self.fail_note.1 > 0 && due {
            dplog_core::diag_line!(
                "dplog: sink {}: {} records not delivered (dropped): {}",
                self.describe(),
                self.fail_note.1,
                self.producer.client().fatal_error().map_or_else(
                    || self.last_error().unwrap_or_default(),
                    |(c, m)| format!("fatal producer error: {c}: {m}")
                )
            );
            self.fail_note = (Some(now), 0);
        }
    }

    /// A handle on the counters.
    pub fn counters(&self) -> Arc<KafkaCounters> {
        self.counters.clone()
    }

    /// The last delivery error librdkafka reported, if any.
    pub fn last_error(&self) -> Option<String> {
        self.producer
            .context()
            .last_error
            .lock()
            .ok()
            .and_then(|g| g.clone())
    }

    /// The last client-wide error librdkafka reported (a broker
    /// connection lost, all brokers down, ...), if any.
    pub fn last_client_error(&self) -> Option<String> {
        self.producer
            .context()
            .last_client_error
            .lock()
            .ok()
            .and_then(|g| g.clone())
    }

    /// Messages librdkafka still holds (queued or in flight).
    pub fn in_flight(&self) -> i32 {
        self.producer.in_flight_count()
    }
}

impl Sink for KafkaSink {
    fn write_batch(&mut self, batch: &[u8]) -> Result<Accepted, SinkError> {
        self.write_batch_marked(batch, &[])
    }

    /// Every drop-report line in `reports` goes as a message of its own
    /// (never packed with records) whose outcome is counted in
    /// [`KafkaCounters::reports_acked`] / [`KafkaCounters::reports_failed`],
    /// not in the records `poll` reports.
    fn write_batch_marked(
        &mut self,
        batch: &[u8],
        reports: &[Range<usize>],
    ) -> Result<Accepted, SinkError> {
        if self.closed {
            return Err(SinkError::Permanent(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "kafka sink is closed",
            )));
        }
        if self.opts.ack_timeout_ms > 0 {
            let waited = self.stall_check(Instant::now());
            if waited >= Duration::from_millis(self.opts.ack_timeout_ms) {
                bump(&self.counters.stalled, 1);
                return Err(SinkError::Retryable(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "kafka: no delivery report for {} ms with {} messages in flight (brokers {} unreachable?)",
                        waited.as_millis(),
                        self.producer.in_flight_count(),
                        self.opts.brokers
                    ),
                )));
            }
        }
        let fp = crate::accounting::fingerprint(batch);
        let (mut at, mut sent) = match self.resume.take() {
            Some((f, a, n)) if f == fp => (a, n),
            Some((_, _, n)) => {
                // A different batch: the runtime gave up on the old one.
                self.discount += n;
                (0, 0)
            }
            None => (0, 0),
        };
        let mut full_since: Option<Instant> = None;
        // Lines up to here go one per message (a pack was too large).
        let mut single_until = 0usize;
        while at < batch.len() {
            let end = memchr::memchr(b'\n', &batch[at..]).map_or(batch.len(), |i| at + i);
            // An empty line is a record that formatted to just `\n`: it
            // goes as an empty message (skipping it left the runtime
            // waiting for an outcome that never came, counted
            // `dropped_shutdown`).
            let report = in_report(reports, at);
            let key = self.opts.key.extract(&batch[at..end]);
            // Pack following lines with the same key, contiguous in the
            // batch: the payload is a slice, no copy. A drop-report line
            // travels alone.
            let mut last = end;
            let mut lines = 1u64;
            if at >= single_until && !report {
                while (lines as usize) < self.opts.lines_per_message && last + 1 < batch.len() {
                    let next_end = memchr::memchr(b'\n', &batch[last + 1..])
                        .map_or(batch.len(), |i| last + 1 + i);
                    let next = &batch[last + 1..next_end];
                    if next.is_empty()
                        || in_report(reports, last + 1)
                        || self.opts.key.extract(next) != key
                    {
                        break;
                    }
                    last = next_end;
                    lines += 1;
                }
            }
            let payload = &batch[at..last];
            // Records in the message: 0 for a drop report (not a record).
            let records = if report { 0 } else { lines };
            let opaque = pack_opaque(records, payload.len() as u64 + 1);
            let mut rec = BaseRecord::with_opaque_to(&self.opts.topic, opaque).payload(payload);
            if let Some(k) = key {
                rec = rec.key(k);
            }
            match self.producer.send(rec) {
                Ok(()) => {
                    at = last + 1;
                    sent += records;
                    full_since = None;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    bump(&self.counters.queue_full, 1);
                    let since = *full_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > Duration::from_millis(100) {
                        self.resume = Some((fp, at, sent));
                        return Err(SinkError::Retryable(io::Error::new(
                            io::ErrorKind::WouldBlock,
                            "Local: Queue full",
                        )));
                    }
                    self.producer.poll(Duration::from_millis(5));
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge), _))
                    if lines > 1 =>
                {
                    // Too large as a pack: send these lines one by one.
                    single_until = last;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge), _)) => {
                    // Rejected alone; a record is reported as failed by
                    // the next poll, a drop report only counted.
                    if report {
                        bump(&self.counters.reports_failed, 1);
                    } else {
                        bump(&self.counters.rejected, 1);
                        sent += 1;
                    }
                    if let Ok(mut g) = self.producer.context().last_error.lock() {
                        *g = Some(format!(
                            "a {}-byte record is larger than message.max.bytes",
                            payload.len()
                        ));
                    }
                    at = last + 1;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::Fatal), _)) => {
                    // The producer is unusable for good (an idempotence
                    // guarantee it can no longer keep): retrying would
                    // never end.
                    self.resume = Some((fp, at, sent));
                    let why = self
                        .producer
                        .client()
                        .fatal_error()
                        .map_or_else(|| "unknown".to_string(), |(c, m)| format!("{c}: {m}"));
                    return Err(SinkError::Permanent(io::Error::other(format!(
                        "kafka producer failed for good: {why}"
                    ))));
                }
                Err((e, _)) => {
                    self.resume = Some((fp, at, sent));
                    return Err(SinkError::Retryable(kerr(&self.opts, "producing", e)));
                }
            }
        }
        // Serve delivery reports without waiting; start the stall clock if
        // these are the first messages in flight.
        self.stall_check(Instant::now());
        self.accepted += sent;
        Ok(Accepted::Pending)
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        self.serve();
        Ok(())
    }

    fn tick(&mut self, _now: Instant) -> Result<(), SinkError> {
        self.serve();
        Ok(())
    }

    fn poll(&mut self) -> Progress {
        self.serve();
        let c = &self.counters;
        let acked = KafkaCounters::get(&c.acked);
        let bytes = KafkaCounters::get(&c.acked_bytes);
        let failed = KafkaCounters::get(&c.failed) + KafkaCounters::get(&c.rejected);
        self.note_failures(failed - self.reported.2);
        let b = &mut self.backlog;
        b.0 += acked - self.reported.0;
        b.1 += bytes - self.reported.1;
        b.2 += failed - self.reported.2;
        self.reported = (acked, bytes, failed);
        // Outcomes of abandoned batches: the runtime counted those records
        // as dropped already.
        let d = self.discount.min(b.0);
        if d > 0 {
            b.1 -= share(b.1, d, b.0);
            b.0 -= d;
            self.discount -= d;
        }
        let f = self.discount.min(b.2);
        b.2 -= f;
        self.discount -= f;
        // At most the lines of accepted batches.
        let room = self.accepted - self.reported_lines;
        let d = b.0.min(room);
        let f = b.2.min(room - d);
        let bytes = if d == b.0 { b.1 } else { share(b.1, d, b.0) };
        b.0 -= d;
        b.1 -= bytes;
        b.2 -= f;
        self.reported_lines += d + f;
        Progress {
            delivered_records: d,
            delivered_bytes: bytes,
            failed_records: f,
        }
    }

    fn abandon(&mut self) {
        if let Some((_, _, n)) = self.resume.take() {
            self.discount += n;
        }
    }

    fn drain(&mut self, deadline: Instant) -> Result<(), SinkError> {
        let left = deadline.saturating_duration_since(Instant::now());
        self.producer.flush(left).map_err(|e| {
            let doing = format!(
                "{} message(s) undelivered when the deadline passed (brokers unreachable?)",
                self.producer.in_flight_count()
            );
            SinkError::Retryable(kerr(&self.opts, &doing, e))
        })
    }

    fn close(&mut self) -> Result<(), SinkError> {
        // What is still queued is reported by the runtime as not delivered
        // at shutdown (`dropped_shutdown`); dropping the producer purges it.
        self.closed = true;
        self.serve();
        Ok(())
    }

    fn describe(&self) -> String {
        format!("kafka topic {} at {}", self.opts.topic, self.opts.brokers)
    }

    fn named_counters(&self) -> Option<Arc<dyn dplog_core::SinkCounters>> {
        Some(self.counters.clone())
    }
}

impl dplog_core::SinkCounters for KafkaCounters {
    fn named(&self) -> Vec<(String, u64)> {
        named(
            "kafka",
            &[
                ("acked", &self.acked),
                ("acked_bytes", &self.acked_bytes),
                ("failed", &self.failed),
                ("rejected", &self.rejected),
                ("queue_full", &self.queue_full),
                ("stalled", &self.stalled),
                ("reports_acked", &self.reports_acked),
                ("reports_failed", &self.reports_failed),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flush that cannot finish (no broker listens) names the topic,
    /// the brokers and what is left in flight.
    #[test]
    fn a_flush_error_names_the_brokers_and_the_topic() {
        let mut o = KafkaSinkOptions::new("127.0.0.1:1", "natlog");
        o.ack_timeout_ms = 0;
        let mut sink = KafkaSink::new(o).unwrap();
        assert!(sink.write_batch(b"a=1\nb=2\n").is_ok());
        let e = match sink.drain(Instant::now() + std::time::Duration::from_millis(200)) {
            Err(SinkError::Retryable(e)) => e.to_string(),
            other => panic!("expected a flush error, got {other:?}"),
        };
        assert_eq!(
            e,
            "kafka topic natlog at 127.0.0.1:1: 2 message(s) undelivered when the deadline \
             passed (brokers unreachable?): Flush error: OperationTimedOut (Local: Timed out)"
        );
        sink.close().unwrap();
    }
}
