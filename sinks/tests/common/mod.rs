//! Shared test helpers and the sink compliance harness: every sink runs the
//! same cases through a real `Logger` (ordering within a consumer,
//! accounting at shutdown, error counters).
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::OnceLock;

use dplog_core::schema::{HasSchema, Schema};
use dplog_core::{schema, Formatter, Logger, LoggerConfig, Record, RecordHeader, Sink, Stats};
use dplog_schema_nat::Nat44SessionRecord;

/// A record type a user declares, not NAT: a hit of an ACL rule. Its
/// `seq` (`hitSeq`, enterprise-specific) and its source port (the same
/// number) tell the records apart at a receiver; its other fields have
/// IANA elements, so an IPFIX collector stores it as a flow.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct AclHit {
    pub header: RecordHeader,
    pub time_ns: u64,
    pub octets: u64,
    pub src_addr: u32,
    pub dst_addr: u32,
    pub seq: u32,
    pub src_port: u16,
    pub dst_port: u16,
    pub protocol: u8,
    pub pad: [u8; 7],
}
const _: () = assert!(std::mem::size_of::<AclHit>() == 48);

impl Record for AclHit {
    const SCHEMA_ID: u16 = 640;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 8 + 4 + 4 + 4 + 2 + 2 + 1 + 7 = 48 bytes without
// padding (size asserted above); the schema is built from its own
// offset_of! values and size_of.
unsafe impl HasSchema for AclHit {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(AclHit, id = 640, name = "aclHit", [
                time_ns => "observationTimeMilliseconds": NsTimestamp, ie 323;
                octets => "octetDeltaCount": U64, ie 1;
                src_addr => "sourceIPv4Address": Ipv4, ie 8;
                dst_addr => "destinationIPv4Address": Ipv4, ie 12;
                seq => "hitSeq": U32, ie 0;
                src_port => "sourceTransportPort": Port, ie 7;
                dst_port => "destinationTransportPort": Port, ie 11;
                protocol => "protocolIdentifier": Protocol, ie 4;
            ])
            .unwrap()
        })
    }
}

/// Hit number `seq` (below 65536: it is also the source port), 1 ms after
/// the one before, from 2026-01-01T00:00:00Z.
pub fn acl_hit(seq: u32) -> AclHit {
    assert!(seq <= u32::from(u16::MAX), "seq {seq} is also a port");
    AclHit {
        header: RecordHeader::of::<AclHit>(),
        time_ns: 1_767_225_600_000_000_000 + u64::from(seq) * 1_000_000,
        octets: 64 + u64::from(seq % 1400),
        src_addr: 0x0A00_0001 + seq % 250,
        dst_addr: 0xC633_6407,
        seq,
        src_port: seq as u16,
        dst_port: 443,
        protocol: 6,
        pad: [0; 7],
    }
}

/// Formats a record as `p<producer> s<seq, 10 digits> <pad>\n` where the
/// producer is `src_port` and the sequence `timestamp_ns`; `pad` makes the
/// line `line_len` bytes long (at least 16).
pub struct SeqLine {
    pub line_len: usize,
}

/// Prefix of every line when `DPLOG_TEST_SYSLOG_PREFIX` style framing is
/// wanted: an RFC 5424 header (facility local0, severity info, app `DT`).
pub const RFC5424_PREFIX: &str = "<134>1 - - DT - - - ";

/// [`SeqLine`] behind an RFC 5424 header, for syslog receivers.
pub struct SyslogSeqLine {
    pub line_len: usize,
}

impl Formatter<Nat44SessionRecord> for SyslogSeqLine {
    fn format(&mut self, r: &Nat44SessionRecord, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(RFC5424_PREFIX.as_bytes());
        let rest = self.line_len - RFC5424_PREFIX.len();
        SeqLine { line_len: rest }.format(r, out);
        debug_assert_eq!(out.len() - start, self.line_len);
    }
}

impl Formatter<Nat44SessionRecord> for SeqLine {
    fn format(&mut self, r: &Nat44SessionRecord, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(format!("p{} s{:010} ", r.src_port, r.timestamp_ns).as_bytes());
        while out.len() - start + 1 < self.line_len {
            out.push(b'x');
        }
        out.push(b'\n');
    }
}

pub fn rec(producer: u16, seq: u64) -> Nat44SessionRecord {
    Nat44SessionRecord {
        timestamp_ns: seq,
        src_port: producer,
        ..Default::default()
    }
}

/// Parses `p<producer> s<seq>` lines; panics on a malformed line (which a
/// test must treat as a failure: garbage, torn or NUL-filled output).
pub fn parse_lines(body: &[u8]) -> Vec<(u16, u64)> {
    let text = std::str::from_utf8(body).expect("output is UTF-8");
    text.lines()
        .map(|l| {
            let l = l.trim_start_matches(|c: char| c != 'p');
            let mut it = l.split_whitespace();
            let p = it.next().and_then(|s| s.strip_prefix('p')).expect(l);
            let s = it.next().and_then(|s| s.strip_prefix('s')).expect(l);
            (p.parse().expect(l), s.parse().expect(l))
        })
        .collect()
}

/// Asserts that `got` holds exactly `per` records of each of `producers`
/// producers, each producer's in order 0..per, none duplicated.
pub fn assert_complete_and_ordered(got: &[(u16, u64)], producers: u16, per: u64) {
    let mut next: HashMap<u16, u64> = HashMap::new();
    for &(p, s) in got {
        let n = next.entry(p).or_insert(0);
        assert_eq!(s, *n, "producer {p}: expected seq {n}, got {s}");
        *n += 1;
    }
    for p in 0..producers {
        assert_eq!(
            next.get(&p).copied().unwrap_or(0),
            per,
            "producer {p} count"
        );
    }
    assert_eq!(got.len() as u64, per * u64::from(producers));
}

/// Runs `producers` threads logging `per` records each (Block policy)
/// through a Logger into `sink`, shuts down and returns the final stats.
pub fn run_logger<S: Sink>(sink: S, producers: u16, per: u64, line_len: usize) -> Stats {
    run_logger_cfg(sink, producers, per, line_len, LoggerConfig::default())
}

pub fn run_logger_cfg<S: Sink>(
    sink: S,
    producers: u16,
    per: u64,
    line_len: usize,
    cfg: LoggerConfig,
) -> Stats {
    let logger = Logger::start(cfg, SeqLine { line_len }, sink).expect("start logger");
    match run_logger_any(logger, producers, per) {
        (s, None) => s,
        (s, Some(e)) => panic!("shutdown failed: {e}; stats {s:?}"),
    }
}

pub fn run_logger_any(
    logger: Logger<Nat44SessionRecord>,
    producers: u16,
    per: u64,
) -> (Stats, Option<String>) {
    let handles: Vec<_> = (0..producers)
        .map(|p| {
            let mut prod = logger.producer().unwrap();
            std::thread::spawn(move || {
                for i in 0..per {
                    assert!(prod.log(rec(p, i)));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    match logger.shutdown() {
        Ok(s) => (s, None),
        Err((s, e)) => (s, Some(e.to_string())),
    }
}

/// The compliance cases every sink must pass.
///
/// - `make`: a fresh sink writing to a working destination;
/// - `read_back`: everything that destination received (waits as needed);
/// - `make_broken`: a sink whose destination refuses every write, or
///   `None` when the sink type cannot be broken this way.
pub fn compliance<S: Sink>(
    make: impl Fn() -> S,
    read_back: impl Fn(u64) -> Vec<u8>,
    make_broken: Option<Box<dyn Fn() -> S>>,
) {
    compliance_with(make, read_back, make_broken, false)
}

/// [`compliance`], with lines behind an RFC 5424 header when `syslog`.
pub fn compliance_with<S: Sink>(
    make: impl Fn() -> S,
    read_back: impl Fn(u64) -> Vec<u8>,
    make_broken: Option<Box<dyn Fn() -> S>>,
    syslog: bool,
) {
    // 1. Ordering within a consumer, three producers, and exact accounting.
    const PER: u64 = 3000;
    let stats = if syslog {
        let logger = Logger::start(
            LoggerConfig::default(),
            SyslogSeqLine { line_len: 100 },
            make(),
        )
        .unwrap();
        let (s, e) = run_logger_any(logger, 3, PER);
        assert!(e.is_none(), "{e:?}");
        s
    } else {
        run_logger(make(), 3, PER, 100)
    };
    assert_eq!(stats.produced, 3 * PER);
    assert_eq!(stats.written_records, 3 * PER, "{stats:?}");
    assert_eq!(
        stats.written_records + stats.dropped_full + stats.dropped_sink + stats.dropped_shutdown,
        stats.produced
    );
    assert_eq!(stats.in_flight(), 0);
    assert_eq!(stats.sink_pending, 0);
    assert_eq!(stats.sink_errors, 0, "{stats:?}");
    assert_eq!(stats.written_bytes, 3 * PER * 100);
    let body = read_back(3 * PER);
    assert_complete_and_ordered(&parse_lines(&body), 3, PER);

    // 2. Error counters: a destination that refuses everything. Records end
    //    as dropped (permanent) or dropped at the shutdown deadline
    //    (retryable), never as written, and every refusal is counted.
    if let Some(broken) = make_broken {
        let cfg = LoggerConfig {
            shutdown_timeout_ms: 300,
            ..LoggerConfig::default()
        };
        let logger = Logger::start(cfg, SeqLine { line_len: 100 }, broken()).unwrap();
        // Shutdown may report the sink's close error; the counters matter.
        let (stats, _err) = run_logger_any(logger, 1, 500);
        assert_eq!(stats.produced, 500);
        assert_eq!(stats.written_records, 0, "{stats:?}");
        assert_eq!(
            stats.dropped_sink + stats.dropped_shutdown,
            500,
            "{stats:?}"
        );
        assert!(stats.sink_errors >= 1, "{stats:?}");
        assert_eq!(stats.in_flight(), 0);
    }
}

/// A consumed Kafka message: `(key, payload)`.
pub type Msg = (Vec<u8>, Vec<u8>);

/// Every message of `topic` (partitions `0..partitions`, from the start), as
/// `(key, payload)`, partition by partition: waits for `n` lines (or 30 s),
/// then reads on until every partition reports its end, so messages beyond
/// the `n` expected (duplicates) are returned too.
#[cfg(feature = "kafka")]
pub fn consume_topic(brokers: &str, topic: &str, partitions: i32, n: u64) -> Vec<Msg> {
    use rdkafka::consumer::Consumer;
    use rdkafka::error::KafkaError;
    use rdkafka::Message;
    use std::collections::HashSet;
    use std::time::{Duration, Instant};
    let c: rdkafka::consumer::BaseConsumer = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "dplog-test")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, rdkafka::Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).unwrap();
    let mut by_part: HashMap<i32, Vec<Msg>> = HashMap::new();
    // Partitions read to their end (since their last message).
    let mut at_end: HashSet<i32> = HashSet::new();
    let mut got = 0u64;
    let t0 = Instant::now();
    let mut reached: Option<Instant> = None;
    loop {
        if got >= n {
            let r = *reached.get_or_insert_with(Instant::now);
            if at_end.len() as i32 == partitions || r.elapsed() > Duration::from_secs(10) {
                break;
            }
        } else if t0.elapsed() > Duration::from_secs(30) {
            break;
        }
        match c.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                at_end.remove(&m.partition());
                by_part.entry(m.partition()).or_default().push((
                    m.key().unwrap_or_default().to_vec(),
                    m.payload().unwrap_or_default().to_vec(),
                ));
                // Lines, not messages: a packed message holds several.
                got += m
                    .payload()
                    .map_or(0, |p| memchr::memchr_iter(b'\n', p).count() as u64 + 1);
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            _ => {}
        }
    }
    let mut parts: Vec<_> = by_part.into_iter().collect();
    parts.sort_by_key(|(p, _)| *p);
    parts.into_iter().flat_map(|(_, v)| v).collect()
}

/// [`SeqLine`] that sleeps 2 ms every 64 records: a consumer slower than
/// the producer, so a small `drop_newest` ring overflows and the consumer
/// writes in-band drop reports between the records.
pub struct SlowSeqLine {
    pub inner: SeqLine,
    pub n: u64,
}

impl Formatter<Nat44SessionRecord> for SlowSeqLine {
    fn format(&mut self, r: &Nat44SessionRecord, out: &mut Vec<u8>) {
        self.n += 1;
        if self.n % 64 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        self.inner.format(r, out);
    }
}

/// Splits output into its record lines and its in-band drop-report lines
/// (`dplog: N records dropped on ring R ...`): returns the record
/// lines, the number of reports and the sum of their drop counts.
pub fn split_reports(body: &[u8]) -> (Vec<u8>, u64, u64) {
    let mut records = Vec::new();
    let (mut reports, mut dropped) = (0u64, 0u64);
    for line in body.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix(b"dplog: ") {
            let n = rest.split(|&b| b == b' ').next().unwrap();
            dropped += std::str::from_utf8(n).unwrap().parse::<u64>().unwrap();
            reports += 1;
        } else {
            records.extend_from_slice(line);
            records.push(b'\n');
        }
    }
    (records, reports, dropped)
}

/// Runs `n` records of one producer through a 64-slot `drop_newest` ring
/// and a [`SlowSeqLine`] (40-byte lines) into `sink`, so records are
/// dropped and reported in-band; returns the shutdown stats.
pub fn run_dropping<S: Sink>(sink: S, n: u64) -> Stats {
    run_dropping_with(dplog_core::Backpressure::Drop, sink, n)
}

/// [`run_dropping`] under `policy` (`Drop` or `Degrade`; under `Degrade`
/// the even records are session creates, normal priority).
pub fn run_dropping_with<S: Sink>(policy: dplog_core::Backpressure, sink: S, n: u64) -> Stats {
    let logger = Logger::start(
        LoggerConfig {
            ring_capacity: 64,
            backpressure: policy,
            shutdown_timeout_ms: 20_000,
            ..Default::default()
        },
        SlowSeqLine {
            inner: SeqLine { line_len: 40 },
            n: 0,
        },
        sink,
    )
    .unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..n {
        // Pace the producer a little so drops come in several episodes
        // (several reports) rather than one long one.
        if i % 256 == 0 {
            std::thread::sleep(std::time::Duration::from_micros(500));
        }
        let mut r = rec(0, i);
        if matches!(policy, dplog_core::Backpressure::Degrade) && i % 2 == 0 {
            // Even records are session creates, shed above the watermark.
            r.nat_event = dplog_schema_nat::NatEvent::Nat44SessionCreate as u8;
        }
        p.log(r);
    }
    drop(p);
    logger.shutdown().unwrap()
}

/// A real Kafka-protocol broker for the tests: Tansu (crates.io `tansu`,
/// installed by `scripts/setup.sh`) on 127.0.0.1 with its in-memory
/// storage, killed (SIGKILL) when dropped.
pub struct Tansu {
    bin: std::path::PathBuf,
    child: Option<std::process::Child>,
    /// TCP port on 127.0.0.1.
    pub port: u16,
    /// `bootstrap.servers` for librdkafka: `127.0.0.1:PORT`.
    pub brokers: String,
    /// Where the broker's stdout and stderr go (kept for failures).
    dir: tempfile::TempDir,
}

/// The `tansu` binary: on `PATH`, else in `$CARGO_HOME/bin` or
/// `~/.cargo/bin` (where `cargo install` puts it).
fn tansu_bin() -> Option<std::path::PathBuf> {
    let mut dirs: Vec<std::path::PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(h) = std::env::var_os("CARGO_HOME") {
        dirs.push(std::path::PathBuf::from(h).join("bin"));
    }
    if let Some(h) = std::env::var_os("HOME") {
        dirs.push(std::path::PathBuf::from(h).join(".cargo/bin"));
    }
    dirs.into_iter()
        .map(|d| d.join("tansu"))
        .find(|p| p.is_file())
}

/// A loopback TCP port nothing listens on, below the ephemeral range (see
/// [`dplog_testkit::free_tcp_port`]): a broker started there later finds
/// it still free, and a client connecting to it meanwhile is refused.
pub use dplog_testkit::free_tcp_port as free_port;

impl Tansu {
    /// The broker for a test, or `None` after printing why it is skipped:
    /// tansu is not installed. Under `CI=true` a missing tansu fails the
    /// test instead (CI runs `scripts/setup.sh`, which installs it).
    pub fn available() -> Option<std::path::PathBuf> {
        match tansu_bin() {
            Some(b) => Some(b),
            None if std::env::var("CI").is_ok_and(|v| v == "true") => panic!(
                "tansu (the Kafka broker of the real-broker tests) is not installed: \
                 run scripts/setup.sh (cargo install tansu --features dynostore --locked)"
            ),
            None => {
                eprintln!(
                    "SKIPPED: tansu is not installed (scripts/setup.sh installs it); \
                     the real-broker Kafka test did not run"
                );
                None
            }
        }
    }

    /// Starts a broker on a free loopback port; `None` when tansu is not
    /// installed (see [`Tansu::available`]).
    pub fn start() -> Option<Tansu> {
        let bin = Self::available()?;
        let mut t = Tansu::stopped(bin, free_port());
        t.restart();
        Some(t)
    }

    /// A broker on `port` that is not running yet ([`Tansu::restart`]
    /// starts it).
    pub fn stopped(bin: std::path::PathBuf, port: u16) -> Tansu {
        Tansu {
            bin,
            child: None,
            port,
            brokers: format!("127.0.0.1:{port}"),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn url(&self) -> String {
        format!("tcp://127.0.0.1:{}", self.port)
    }

    /// Starts the broker (again, with empty storage) and waits until it
    /// listens (up to 60 s).
    pub fn restart(&mut self) {
        use std::time::{Duration, Instant};
        assert!(self.child.is_none(), "tansu is already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("tansu.log"))
            .unwrap();
        let child = std::process::Command::new(&self.bin)
            .args(["broker", "--listener-url", &self.url()])
            .args(["--advertised-listener-url", &self.url()])
            .args(["--storage-engine", "memory://tansu/"])
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start tansu broker");
        self.child = Some(child);
        let t0 = Instant::now();
        loop {
            // Listening, not merely connectable: a connect before tansu
            // binds could reach another socket, or the client itself.
            if dplog_testkit::tcp_listening(self.port) {
                return;
            }
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("tansu exited ({st}) before listening:\n{}", self.log());
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "tansu did not listen on {} within 60 s:\n{}",
                self.brokers,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the broker with SIGKILL (no clean shutdown) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Creates `topic` with `partitions` partitions (`tansu topic create`).
    pub fn create_topic(&self, topic: &str, partitions: i32) {
        let out = std::process::Command::new(&self.bin)
            .args(["topic", "create", "--broker", &self.url()])
            .args(["--partitions", &partitions.to_string(), topic])
            .output()
            .expect("run tansu topic create");
        assert!(
            out.status.success(),
            "tansu topic create {topic}: {}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The broker's output so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("tansu.log")).unwrap_or_default()
    }
}

impl Drop for Tansu {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Which broker a Kafka scenario runs against.
#[derive(Clone, Copy, Debug)]
pub enum BrokerKind {
    /// librdkafka's mock cluster: the Kafka protocol on loopback, in this
    /// process.
    Mock,
    /// A real broker: [`Tansu`].
    Tansu,
}

/// A running Kafka broker of either kind, with one topic of `partitions`
/// partitions created; stopped when dropped.
#[cfg(feature = "kafka")]
pub enum Broker {
    Mock(rdkafka::mocking::MockCluster<'static, rdkafka::producer::DefaultProducerContext>),
    Tansu(Tansu),
}

#[cfg(feature = "kafka")]
impl Broker {
    /// Starts a broker of `kind` and creates `topic` on it; `None` (after
    /// printing why) when `kind` is [`BrokerKind::Tansu`] and tansu is not
    /// installed, a panic instead under `CI=true` (see [`Tansu::available`]).
    pub fn start(kind: BrokerKind, topic: &str, partitions: i32) -> Option<Broker> {
        let b = match kind {
            BrokerKind::Mock => {
                Broker::Mock(rdkafka::mocking::MockCluster::new(1).expect("mock cluster"))
            }
            BrokerKind::Tansu => Broker::Tansu(Tansu::start()?),
        };
        b.create_topic(topic, partitions);
        Some(b)
    }

    /// `bootstrap.servers` for librdkafka.
    pub fn brokers(&self) -> String {
        match self {
            Broker::Mock(m) => m.bootstrap_servers(),
            Broker::Tansu(t) => t.brokers.clone(),
        }
    }

    /// Creates `topic` with `partitions` partitions.
    pub fn create_topic(&self, topic: &str, partitions: i32) {
        match self {
            Broker::Mock(m) => m
                .create_topic(topic, partitions, 1)
                .expect("create mock topic"),
            Broker::Tansu(t) => t.create_topic(topic, partitions),
        }
    }
}

/// Waits up to `secs` for `cond` on the logger's counters (polling every
/// 20 ms); the last counters read, whether or not `cond` held.
pub fn wait_for(
    logger: &Logger<Nat44SessionRecord>,
    secs: u64,
    cond: impl Fn(&Stats) -> bool,
) -> Stats {
    let t0 = std::time::Instant::now();
    loop {
        let s = logger.stats();
        if cond(&s) || t0.elapsed() > std::time::Duration::from_secs(secs) {
            return s;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
