//! Kafka sink against librdkafka's mock cluster (the real Kafka protocol on
//! loopback), and against a real broker: Tansu (crates.io `tansu`, a
//! Kafka-protocol broker, installed by `scripts/setup.sh`), started by each
//! `real_broker_*` test on a free 127.0.0.1 port with its in-memory
//! storage. Without tansu those tests print why they are skipped (and fail
//! under `CI=true`). A scenario run against both brokers is one body taking
//! the [`BrokerKind`], called by one test per broker.

mod common;

use std::time::{Duration, Instant};

use common::*;
use dplog_core::{Logger, LoggerConfig, Sink};
use dplog_sinks::{KafkaCounters, KafkaKey, KafkaSink, KafkaSinkOptions};
use rdkafka::mocking::MockCluster;
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};

const PARTITIONS: i32 = 3;

fn mock(topic: &str) -> MockCluster<'static, rdkafka::producer::DefaultProducerContext> {
    let m = MockCluster::new(1).expect("mock cluster");
    m.create_topic(topic, PARTITIONS, 1).expect("create topic");
    m
}

fn opts(brokers: &str, topic: &str) -> KafkaSinkOptions {
    let mut o = KafkaSinkOptions::new(brokers, topic);
    // Key by producer ("p0", "p1", ...): one producer's records stay in
    // one partition, in order.
    o.key = KafkaKey::Token(0);
    o
}

/// Every message of `topic` (all partitions, from the start), as
/// `(key, payload)`, partition by partition; waits for `n` lines (or 20 s).
fn consume(brokers: &str, topic: &str, n: u64) -> Vec<Msg> {
    consume_topic(brokers, topic, PARTITIONS, n)
}

/// Payloads joined with newlines, and every line's key checked against its
/// producer token (a packed message holds several lines of one key).
fn check_keys_and_join(msgs: &[Msg]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in msgs {
        for line in v.split(|&b| b == b'\n') {
            let token = line.split(|&b| b == b' ').next().unwrap();
            assert_eq!(
                k.as_slice(),
                token,
                "wrong key for {}",
                String::from_utf8_lossy(line)
            );
        }
        out.extend_from_slice(v);
        out.push(b'\n');
    }
    out
}

/// A logger over `sink` formatting with `formatter`, waiting up to
/// `shutdown_timeout_ms` at shutdown.
fn start_logger<F: dplog_core::Formatter<dplog_schema_nat::Nat44SessionRecord>, S: Sink>(
    shutdown_timeout_ms: u64,
    formatter: F,
    sink: S,
) -> Logger<dplog_schema_nat::Nat44SessionRecord> {
    let config = LoggerConfig {
        shutdown_timeout_ms,
        ..Default::default()
    };
    Logger::start(config, formatter, sink).unwrap()
}

#[test]
fn compliance_kafka_mock_with_keys() {
    let m = mock("dplog");
    let b = m.bootstrap_servers();
    let b2 = b.clone();
    compliance(
        || KafkaSink::new(opts(&b, "dplog")).unwrap(),
        |n| check_keys_and_join(&consume(&b2, "dplog", n)),
        None,
    );
}

#[test]
fn broker_down_and_up_mid_stream_loses_nothing_in_block_policy() {
    let m = mock("t");
    let b = m.bootstrap_servers();
    let sink = KafkaSink::new(opts(&b, "t")).unwrap();
    let counters = sink.counters();
    let logger = start_logger(20_000, SeqLine { line_len: 60 }, sink);
    let mut p = logger.producer().unwrap();
    const N: u64 = 20_000;
    for i in 0..N / 2 {
        assert!(p.log(rec(0, i)));
    }
    m.broker_down(1).unwrap();
    for i in N / 2..N {
        assert!(p.log(rec(0, i)));
    }
    std::thread::sleep(Duration::from_millis(500));
    let mid = logger.stats();
    assert!(
        mid.written_records < N,
        "acked while the broker was down: {mid:?}"
    );
    m.broker_up(1).unwrap();
    drop(p);
    let s = logger.shutdown().unwrap();
    assert_eq!(s.written_records, N, "{s:?}");
    assert_eq!(s.dropped_sink + s.dropped_shutdown, 0);
    assert_eq!(KafkaCounters::get(&counters.acked), N);
    let got = parse_lines(&check_keys_and_join(&consume(&b, "t", N)));
    assert_complete_and_ordered(&got, 1, N);
}

#[test]
fn injected_request_errors_are_retried_without_loss_or_duplicates() {
    let m = mock("e");
    let b = m.bootstrap_servers();
    m.request_errors(
        RDKafkaApiKey::Produce,
        &[
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE,
        ],
    );
    let s = run_logger(KafkaSink::new(opts(&b, "e")).unwrap(), 2, 3000, 50);
    assert_eq!(s.written_records, 6000, "{s:?}");
    let got = parse_lines(&check_keys_and_join(&consume(&b, "e", 6000)));
    assert_complete_and_ordered(&got, 2, 3000);
}

#[test]
fn a_permanent_produce_error_fails_records_and_is_counted() {
    let m = mock("x");
    let b = m.bootstrap_servers();
    m.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED; 50],
    );
    let mut o = opts(&b, "x");
    o.idempotent = false;
    let s = run_logger(KafkaSink::new(o).unwrap(), 1, 200, 50);
    assert!(s.dropped_sink >= 1, "{s:?}");
    assert_eq!(s.written_records + s.dropped_sink + s.dropped_shutdown, 200);
}

/// A record larger than `message.max.bytes` is refused alone and counted
/// as failed; the records around it reach the broker.
fn an_oversized_record_is_refused_alone(kind: BrokerKind) {
    let Some(broker) = Broker::start(kind, "big", PARTITIONS) else {
        return;
    };
    let b = broker.brokers();
    let mut o = src_opts(&b, "big");
    o.message_max_bytes = Some(2000);
    let mut sink = KafkaSink::new(o).unwrap();
    let mut batch = Vec::new();
    batch.extend_from_slice(b"src=p0 s0000000000 small\n");
    batch.extend_from_slice(format!("src=p0 s0000000001 {}\n", "L".repeat(5000)).as_bytes());
    batch.extend_from_slice(b"src=p0 s0000000002 small\n");
    sink.write_batch(&batch).unwrap();
    let t0 = Instant::now();
    let mut acc = dplog_core::Progress::default();
    while acc.delivered_records + acc.failed_records < 3 {
        acc += sink.poll();
        assert!(t0.elapsed() < Duration::from_secs(60), "{acc:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!((acc.delivered_records, acc.failed_records), (2, 1));
    assert_eq!(KafkaCounters::get(&sink.counters().rejected), 1);
    sink.close().unwrap();
    let got = check_src_keys(&consume(&b, "big", 2));
    assert_eq!(got, vec![(0, 0), (0, 2)]);
}

#[test]
fn an_oversized_record_is_rejected_alone() {
    an_oversized_record_is_refused_alone(BrokerKind::Mock);
}

#[test]
fn real_broker_refuses_an_oversized_record_alone() {
    an_oversized_record_is_refused_alone(BrokerKind::Tansu);
}

#[test]
fn packed_lines_keep_keys_order_and_reject_an_oversized_line_alone() {
    let m = mock("pk");
    let b = m.bootstrap_servers();
    let mut o = opts(&b, "pk");
    o.lines_per_message = 10;
    o.message_max_bytes = Some(3000);
    let sink = KafkaSink::new(o).unwrap();
    let s = run_logger(sink, 3, 2000, 100);
    assert_eq!(s.written_records, 6000, "{s:?}");
    let msgs = consume(&b, "pk", 6000);
    assert!(msgs.len() < 6000, "nothing was packed");
    let got = parse_lines(&check_keys_and_join(&msgs));
    assert_complete_and_ordered(&got, 3, 2000);

    // A pack holding a too-large line falls back to single lines: only that
    // line is rejected.
    let mut o = opts(&b, "pk2");
    o.lines_per_message = 10;
    o.message_max_bytes = Some(3000);
    let mut sink = KafkaSink::new(o).unwrap();
    let mut batch = Vec::new();
    for i in 0..5u64 {
        batch.extend_from_slice(format!("p0 s{i:010} ok\n").as_bytes());
    }
    batch.extend_from_slice(format!("p0 s0000000005 {}\n", "L".repeat(5000)).as_bytes());
    for i in 6..9u64 {
        batch.extend_from_slice(format!("p0 s{i:010} ok\n").as_bytes());
    }
    sink.write_batch(&batch).unwrap();
    let t0 = Instant::now();
    let mut acc = dplog_core::Progress::default();
    while acc.delivered_records + acc.failed_records < 9 {
        acc += sink.poll();
        assert!(t0.elapsed() < Duration::from_secs(20), "{acc:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!((acc.delivered_records, acc.failed_records), (8, 1));
    sink.close().unwrap();
    let got = parse_lines(&check_keys_and_join(&consume(&b, "pk2", 8)));
    let seqs: Vec<u64> = got.iter().map(|&(_, s)| s).collect();
    assert_eq!(seqs, vec![0, 1, 2, 3, 4, 6, 7, 8]);
    assert!(KafkaSink::new(KafkaSinkOptions {
        lines_per_message: 0,
        ..KafkaSinkOptions::new("127.0.0.1:1", "t")
    })
    .is_err());
}

#[test]
fn shutdown_with_the_broker_down_reports_undelivered_records() {
    let m = mock("d");
    let b = m.bootstrap_servers();
    m.broker_down(1).unwrap();
    let logger = start_logger(
        300,
        SeqLine { line_len: 40 },
        KafkaSink::new(opts(&b, "d")).unwrap(),
    );
    let mut p = logger.producer().unwrap();
    for i in 0..100 {
        assert!(p.log(rec(0, i)));
    }
    drop(p);
    let t0 = Instant::now();
    let s = match logger.shutdown() {
        Ok(s) => s,
        Err((s, _)) => s,
    };
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(s.written_records, 0, "{s:?}");
    assert_eq!(s.dropped_shutdown, 100, "{s:?}");
    assert_eq!(s.sink_pending, 0);
}

#[test]
fn key_extraction_from_text_and_json() {
    let k = KafkaKey::Field("sourceIPv4Address".into());
    assert_eq!(
        k.extract(b"t=1 sourceIPv4Address=10.0.0.7 x=2"),
        Some(&b"10.0.0.7"[..])
    );
    assert_eq!(
        k.extract(br#"{"a":1,"sourceIPv4Address":"10.0.0.8","b":2}"#),
        Some(&b"10.0.0.8"[..])
    );
    assert_eq!(k.extract(b"postNATSourceIPv4Address=1.2.3.4"), None);
    assert_eq!(
        KafkaKey::Field("vrf".into()).extract(br#"{"vrf":7}"#),
        Some(&b"7"[..])
    );
    assert_eq!(KafkaKey::Token(1).extract(b"a  b c"), Some(&b"b"[..]));
    assert!(KafkaSink::new(KafkaSinkOptions::new("", "t")).is_err());
}

/// [`SeqLine`] behind `src=`: `src=p<producer> s<seq> ...`, keyed by the
/// `src` field (`key_field = "src"`).
struct SrcLine(SeqLine);

impl dplog_core::Formatter<dplog_schema_nat::Nat44SessionRecord> for SrcLine {
    fn format(&mut self, r: &dplog_schema_nat::Nat44SessionRecord, out: &mut Vec<u8>) {
        out.extend_from_slice(b"src=");
        self.0.format(r, out);
    }
}

fn src_opts(brokers: &str, topic: &str) -> KafkaSinkOptions {
    let mut o = KafkaSinkOptions::new(brokers, topic);
    o.key = KafkaKey::Field("src".into());
    o
}

/// Every line of every message as `(producer, seq)`, each line's `src`
/// field checked against its message's key, and each key's lines checked
/// to lie in one partition (messages come partition by partition).
fn check_src_keys(msgs: &[Msg]) -> Vec<(u16, u64)> {
    let mut out = Vec::new();
    for (k, v) in msgs {
        for line in v.split(|&b| b == b'\n') {
            let src = line
                .strip_prefix(b"src=")
                .and_then(|l| l.split(|&b| b == b' ').next())
                .unwrap_or_else(|| panic!("no src: {}", String::from_utf8_lossy(line)));
            assert_eq!(
                k.as_slice(),
                src,
                "wrong key for {}",
                String::from_utf8_lossy(line)
            );
        }
        out.extend_from_slice(v);
        out.push(b'\n');
    }
    parse_lines(&out)
}

/// Logs `per` records of each of `keys` keys (`p0`, `p1`, ...), round
/// robin, through one producer, from `from` on.
fn log_keys(
    p: &mut dplog_core::LogProducer<dplog_schema_nat::Nat44SessionRecord>,
    keys: u16,
    seqs: std::ops::Range<u64>,
) {
    for i in seqs {
        for k in 0..keys {
            assert!(p.log(rec(k, i)));
        }
    }
}

fn log_keys_of(
    p: &mut dplog_core::LogProducer<dplog_schema_nat::Nat44SessionRecord>,
    key: u16,
    seqs: std::ops::Range<u64>,
) {
    for i in seqs {
        assert!(p.log(rec(key, i)));
    }
}

/// `o` waiting up to 120 s (instead of librdkafka's 30 s) for a topic the
/// broker does not know yet: a restarted in-memory broker has no topics
/// until the test creates them again, which a loaded machine may delay.
fn patient(mut o: KafkaSinkOptions) -> KafkaSinkOptions {
    o.properties
        .push(("topic.metadata.propagation.max.ms".into(), "120000".into()));
    o
}

#[test]
fn real_broker_gets_every_record_once_in_order_with_its_key() {
    let Some(broker) = Tansu::start() else {
        return;
    };
    broker.create_topic("nat", PARTITIONS);
    broker.create_topic("packed", PARTITIONS);
    let b = &broker.brokers;
    for (topic, lines_per_message) in [("nat", 1), ("packed", 16)] {
        let mut o = src_opts(b, topic);
        o.lines_per_message = lines_per_message;
        let sink = KafkaSink::new(o).unwrap();
        let counters = sink.counters();
        let logger = start_logger(60_000, SrcLine(SeqLine { line_len: 80 }), sink);
        let mut p = logger.producer().unwrap();
        const KEYS: u16 = 4;
        const PER: u64 = 2_000;
        // Runs of 50 records per key, so consecutive lines share a key
        // and can be packed.
        for run in (0..PER).step_by(50) {
            for k in 0..KEYS {
                log_keys_of(&mut p, k, run..run + 50);
            }
        }
        drop(p);
        let s = logger.shutdown().unwrap();
        let n = u64::from(KEYS) * PER;
        assert_eq!(s.written_records, n, "{topic}: {s:?}");
        assert_eq!(s.dropped_sink + s.dropped_shutdown, 0, "{topic}: {s:?}");
        assert_eq!(KafkaCounters::get(&counters.acked), n, "{topic}");
        let msgs = consume(b, topic, n);
        if lines_per_message > 1 {
            assert!((msgs.len() as u64) < n, "{topic}: nothing was packed");
        } else {
            assert_eq!(msgs.len() as u64, n, "{topic}: one line per message");
        }
        assert_complete_and_ordered(&check_src_keys(&msgs), KEYS, PER);
    }
}

/// The broker is killed (SIGKILL) while records stream under `block`, and
/// restarted on the same port. Tansu's in-memory storage loses what the
/// first broker stored, so what this checks is the producer's side: every
/// record is counted written once; the records the first broker
/// acknowledged are not sent again, and every other record reaches the
/// restarted broker exactly once, in order per key. (That the first
/// broker kept what it acknowledged is the broker's durability, which a
/// memory store cannot show.)
fn killed_and_restarted_mid_stream(idempotent: bool) {
    let Some(mut broker) = Tansu::start() else {
        return;
    };
    broker.create_topic("kr", PARTITIONS);
    let mut o = patient(src_opts(&broker.brokers, "kr"));
    o.idempotent = idempotent;
    // The restarted broker has no topic until the test creates it again,
    // and tansu answers a produce to a topic it lacks with UNKNOWN (-1),
    // which librdkafka takes as final: a reconnect backoff of 3 s (at
    // least 2.25 s with librdkafka's jitter) keeps the producer away
    // until the topic exists (a restart and a create take well under 1 s).
    o.properties
        .push(("reconnect.backoff.ms".into(), "3000".into()));
    o.properties
        .push(("reconnect.backoff.max.ms".into(), "10000".into()));
    let sink = KafkaSink::new(o).unwrap();
    let counters = sink.counters();
    let logger = start_logger(20_000, SrcLine(SeqLine { line_len: 80 }), sink);
    const KEYS: u16 = 3;
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut p = logger.producer().unwrap();
    let (per, acked_first) = std::thread::scope(|sc| {
        let stream = sc.spawn(|| {
            // Keep about 2000 records beyond what the broker acknowledged
            // (queued or in flight) until the broker is back, then 500 more
            // per key.
            let mut next = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if next * u64::from(KEYS) < logger.stats().written_records + 2_000 {
                    log_keys(&mut p, KEYS, next..next + 100);
                    next += 100;
                } else {
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
            log_keys(&mut p, KEYS, next..next + 500);
            next + 500
        });
        let mid = wait_for(&logger, 60, |s| s.written_records >= 3_000);
        assert!(mid.written_records >= 3_000, "{mid:?}");
        let errors_before = KafkaCounters::get(&counters.client_errors);
        broker.kill();
        // librdkafka reports the lost connection after the acknowledgements
        // the broker had already sent: from here on `acked` counts the
        // first broker's acknowledgements only, until the second one runs.
        let t0 = Instant::now();
        while KafkaCounters::get(&counters.client_errors) == errors_before {
            assert!(t0.elapsed() < Duration::from_secs(60), "no client error");
            std::thread::sleep(Duration::from_millis(10));
        }
        let acked_first = KafkaCounters::get(&counters.acked);
        broker.restart();
        broker.create_topic("kr", PARTITIONS);
        // Relaxed: a flag; the records themselves go through the ring.
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (stream.join().unwrap(), acked_first)
    });
    drop(p);
    let n = u64::from(KEYS) * per;
    assert!(acked_first < n);
    let s = match logger.shutdown() {
        Ok(s) => s,
        Err((s, _)) => s,
    };
    // Every record is counted once: written (acknowledged), dropped by the
    // sink (failed for good) or, still held at the shutdown deadline,
    // dropped at shutdown.
    assert_eq!(
        s.written_records + s.dropped_sink + s.dropped_shutdown,
        n,
        "{s:?}"
    );
    assert_eq!(s.sink_pending, 0, "{s:?}");
    assert_eq!(KafkaCounters::get(&counters.acked), s.written_records);
    if !idempotent {
        assert_eq!(s.written_records, n, "{s:?}");
    }
    // The second broker holds exactly the records acknowledged after the
    // restart, once each; for each key a run of its sequence.
    let second = s.written_records - acked_first;
    eprintln!(
        "kill and restart, idempotent {idempotent}: {n} records, {acked_first} acknowledged \
         by the first broker, {second} by the second, {} failed, {} still held at shutdown",
        s.dropped_sink, s.dropped_shutdown
    );
    let got = check_src_keys(&consume(&broker.brokers, "kr", second));
    assert_eq!(
        got.len() as u64,
        second,
        "acknowledged by the first broker: {acked_first} of {n}"
    );
    let mut by_key: std::collections::HashMap<u16, Vec<u64>> = Default::default();
    for (k, seq) in got {
        by_key.entry(k).or_default().push(seq);
    }
    for (k, mut seqs) in by_key {
        if !idempotent {
            // Without idempotence librdkafka may reorder on retries.
            seqs.sort_unstable();
        }
        let first = seqs[0];
        assert_eq!(
            seqs,
            (first..first + seqs.len() as u64).collect::<Vec<_>>(),
            "key p{k}: a run of its records, once each, in order"
        );
        if s.dropped_sink == 0 {
            assert_eq!(
                *seqs.last().unwrap(),
                per - 1,
                "key p{k}: up to its last record"
            );
        }
    }
}

/// Idempotent (the default): the restarted in-memory broker no longer
/// knows the producer id. Seen here: when a retried batch meets that,
/// librdkafka stops with a fatal error rather than risk a duplicate
/// (`Unknown Producer Id ... unable to retry without risking
/// duplication/reordering`) and the records it held are counted as
/// `dropped_sink`; otherwise it may deliver nothing more to the new broker,
/// and what it holds is counted `dropped_shutdown`. Either way no record
/// goes uncounted. A broker that keeps its producer state across a restart
/// (Kafka with its log on disk) does not lead here.
#[test]
fn real_broker_killed_and_restarted_mid_stream_idempotent_counts_every_record() {
    killed_and_restarted_mid_stream(true);
}

/// Not idempotent: every record reaches a broker; the second one holds all
/// the first did not acknowledge.
#[test]
fn real_broker_killed_and_restarted_mid_stream_loses_nothing_under_block() {
    killed_and_restarted_mid_stream(false);
}

#[test]
fn real_broker_down_at_start_gets_the_records_once_it_comes_up() {
    let Some(bin) = Tansu::available() else {
        return;
    };
    let mut broker = Tansu::stopped(bin, free_port());
    let sink = KafkaSink::new(patient(src_opts(&broker.brokers, "late"))).unwrap();
    let logger = start_logger(60_000, SrcLine(SeqLine { line_len: 80 }), sink);
    let mut p = logger.producer().unwrap();
    log_keys(&mut p, 3, 0..500);
    // Taken by the sink, acknowledged by nobody.
    let mid = wait_for(&logger, 30, |s| s.sink_pending == 1_500);
    assert_eq!(mid.sink_pending, 1_500, "{mid:?}");
    assert_eq!(mid.written_records, 0, "{mid:?}");
    broker.restart();
    broker.create_topic("late", PARTITIONS);
    drop(p);
    let s = logger.shutdown().unwrap();
    assert_eq!(s.written_records, 1_500, "{s:?}");
    assert_eq!(s.dropped_sink + s.dropped_shutdown, 0, "{s:?}");
    let got = check_src_keys(&consume(&broker.brokers, "late", 1_500));
    assert_complete_and_ordered(&got, 3, 500);
}

/// A topic the broker does not have: the records fail (counted as
/// `dropped_sink`, with librdkafka's reason) once librdkafka stops waiting
/// for the topic to appear (`topic.metadata.propagation.max.ms`, 30 s by
/// default, 2 s here); shutdown does not hang.
#[test]
fn real_broker_topic_missing_counts_the_records_dropped_not_a_hang() {
    let Some(broker) = Tansu::start() else {
        return;
    };
    let mut o = src_opts(&broker.brokers, "nosuch");
    o.properties
        .push(("topic.metadata.propagation.max.ms".into(), "2000".into()));
    let sink = KafkaSink::new(o).unwrap();
    let counters = sink.counters();
    let logger = start_logger(60_000, SrcLine(SeqLine { line_len: 80 }), sink);
    let mut p = logger.producer().unwrap();
    log_keys(&mut p, 3, 0..100);
    drop(p);
    let t0 = Instant::now();
    let s = match logger.shutdown() {
        Ok(s) => s,
        Err((s, _)) => s,
    };
    assert!(t0.elapsed() < Duration::from_secs(50), "{:?}", t0.elapsed());
    assert_eq!(s.written_records, 0, "{s:?}");
    assert_eq!(s.dropped_sink, 300, "{s:?}");
    assert_eq!(KafkaCounters::get(&counters.failed), 300);
    assert_eq!(s.dropped_shutdown + s.sink_pending, 0, "{s:?}");
}

/// A batch Kafka took in part ("Local: Queue full" after 100 messages with
/// the broker down) and the runtime then gave up on
/// (`sink_retry_timeout_ms`): the runtime counts all its records as
/// `dropped_sink`, so the acknowledgements of the part librdkafka sent,
/// arriving once the broker is back, must not count them again. The books
/// balance exactly and `written` is what the topic received.
#[test]
fn a_batch_given_up_after_a_partial_send_is_counted_once() {
    let m = mock("g");
    let b = m.bootstrap_servers();
    m.broker_down(1).unwrap();
    let mut o = opts(&b, "g");
    o.queue_max_messages = 100;
    o.ack_timeout_ms = 0;
    let sink = KafkaSink::new(o).unwrap();
    let counters = sink.counters();
    let logger = Logger::start(
        LoggerConfig {
            sink_retry_timeout_ms: Some(300),
            shutdown_timeout_ms: 20_000,
            // The 1000 records published together when the producer is
            // dropped: the consumer takes them as one batch, which Kafka
            // takes in part. (Published one by one, a consumer that ran
            // between the producer's calls on a loaded machine took a
            // first small batch that fit the queue whole and was rightly
            // counted written once the broker came back.)
            publish_every: 1024,
            ..Default::default()
        },
        SeqLine { line_len: 40 },
        sink,
    )
    .unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..1000 {
        assert!(p.log(rec(0, i)));
    }
    drop(p);
    // Every batch but the 100 queued messages is given up on.
    let t0 = Instant::now();
    while logger.stats().dropped_sink < 900 && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mid = logger.stats();
    // On a loaded machine the mock broker has been seen to take a few
    // messages of the first batch before it went down: `w0` records,
    // acknowledged and counted written before any batch was given up on.
    let w0 = mid.written_records;
    assert!(w0 < 100, "{mid:?}");
    assert!(mid.dropped_sink >= 900 - w0, "{mid:?}");
    m.broker_up(1).unwrap();
    // Shutdown says records were lost, and why.
    let (s, e) = logger.shutdown().unwrap_err();
    assert!(e.to_string().contains("Queue full"), "{e}");
    let acked = KafkaCounters::get(&counters.acked);
    // The queue's 100 messages arrive, with the `w0` before them (some
    // of which may have left the queue before it filled).
    assert!((100..=100 + w0).contains(&acked), "{acked} acked, w0 {w0}");
    let got = consume(&b, "g", acked);
    assert_eq!(got.len() as u64, acked);
    assert_eq!(
        s.written_records + s.dropped_sink + s.dropped_shutdown,
        1000,
        "counted once: {s:?}"
    );
    // What was written is exactly what was acknowledged for accepted
    // batches: the 100 messages queued after them belonged to a batch
    // given up on, and their late acknowledgements count nothing more.
    assert_eq!(s.written_records, w0, "{s:?}");
    assert_eq!(s.dropped_sink, 1000 - w0, "{s:?}");
    assert_eq!(s.sink_pending, 0);
}

#[test]
fn drop_reports_are_not_counted_as_written_records() {
    let m = mock("r");
    let b = m.bootstrap_servers();
    let sink = KafkaSink::new(opts(&b, "r")).unwrap();
    let counters = sink.counters();
    const N: u64 = 8_000;
    let s = run_dropping(sink, N);
    assert_eq!(s.produced, N, "{s:?}");
    assert!(s.dropped_full > 0, "the ring never overflowed: {s:?}");
    assert!(s.drop_reports > 0, "no drop report written: {s:?}");
    // The identity holds exactly: reports are not records.
    assert_eq!(s.written_records + s.dropped_full, N, "{s:?}");
    assert_eq!(
        s.dropped_sink + s.dropped_shutdown + s.sink_pending,
        0,
        "{s:?}"
    );
    assert_eq!(s.in_flight(), 0, "{s:?}");
    assert_eq!(KafkaCounters::get(&counters.acked), s.written_records);
    assert_eq!(KafkaCounters::get(&counters.reports_acked), s.drop_reports);
    assert_eq!(KafkaCounters::get(&counters.reports_failed), 0);
    // The topic holds the written records plus the report lines, and the
    // reports account for every drop.
    let msgs = consume(&b, "r", s.written_records + s.drop_reports);
    let (records, reports, dropped) = split_reports(&check_keys_and_join(&msgs));
    assert_eq!(reports, s.drop_reports, "{s:?}");
    assert_eq!(dropped, s.dropped_full, "{s:?}");
    let got = parse_lines(&records);
    assert_eq!(got.len() as u64, s.written_records, "{s:?}");
    // Every record line is a distinct record, in order (one producer, one
    // key, one partition).
    assert!(got.windows(2).all(|w| w[0].1 < w[1].1), "out of order");
}

#[test]
fn packed_unkeyed_lines_never_pack_a_drop_report_with_records() {
    let m = mock("pr");
    let b = m.bootstrap_servers();
    // No key: every line would pack with its neighbours, reports included,
    // if the sink did not send each report alone.
    let mut o = KafkaSinkOptions::new(&b, "pr");
    o.lines_per_message = 16;
    let sink = KafkaSink::new(o).unwrap();
    let counters = sink.counters();
    const N: u64 = 8_000;
    let s = run_dropping(sink, N);
    assert!(s.drop_reports > 0, "no drop report written: {s:?}");
    assert_eq!(s.written_records + s.dropped_full, N, "{s:?}");
    assert_eq!(
        s.dropped_sink + s.dropped_shutdown + s.sink_pending,
        0,
        "{s:?}"
    );
    assert_eq!(KafkaCounters::get(&counters.acked), s.written_records);
    assert_eq!(KafkaCounters::get(&counters.reports_acked), s.drop_reports);
    let msgs = consume(&b, "pr", s.written_records + s.drop_reports);
    let mut packed = 0;
    for (_, v) in &msgs {
        let lines = v.split(|&b| b == b'\n').count();
        packed += usize::from(lines > 1);
        if v.starts_with(b"dplog: ") {
            assert_eq!(lines, 1, "report packed: {}", String::from_utf8_lossy(v));
        } else {
            assert!(
                !v.windows(7).any(|w| w == b"dplog: "),
                "report packed with records: {}",
                String::from_utf8_lossy(v)
            );
        }
    }
    assert!(packed > 0, "no message was packed");
    let mut all = Vec::new();
    for (_, v) in &msgs {
        all.extend_from_slice(v);
        all.push(b'\n');
    }
    let (records, reports, dropped) = split_reports(&all);
    assert_eq!(
        (reports, dropped),
        (s.drop_reports, s.dropped_full),
        "{s:?}"
    );
    assert_eq!(parse_lines(&records).len() as u64, s.written_records);
}

#[test]
fn degrade_drop_reports_are_not_counted_as_written_records() {
    let m = mock("dg");
    let b = m.bootstrap_servers();
    let sink = KafkaSink::new(opts(&b, "dg")).unwrap();
    let counters = sink.counters();
    const N: u64 = 8_000;
    let s = run_dropping_with(dplog_core::Backpressure::Degrade, sink, N);
    assert_eq!(s.produced, N, "{s:?}");
    assert!(s.dropped_degraded > 0, "nothing shed: {s:?}");
    assert!(s.drop_reports > 0, "no drop report written: {s:?}");
    assert_eq!(s.written_records + s.dropped(), N, "{s:?}");
    assert_eq!(
        s.dropped_sink + s.dropped_shutdown + s.sink_pending,
        0,
        "{s:?}"
    );
    assert_eq!(KafkaCounters::get(&counters.acked), s.written_records);
    assert_eq!(KafkaCounters::get(&counters.reports_acked), s.drop_reports);
    let msgs = consume(&b, "dg", s.written_records + s.drop_reports);
    let (records, reports, dropped) = split_reports(&check_keys_and_join(&msgs));
    assert_eq!(reports, s.drop_reports, "{s:?}");
    assert_eq!(dropped, s.dropped(), "{s:?}");
    assert_eq!(parse_lines(&records).len() as u64, s.written_records);
}

/// [`SeqLine`] for even sequence numbers; odd records format to nothing
/// (a formatter that skips a record type).
struct EvenOnly(SeqLine);

impl dplog_core::Formatter<dplog_schema_nat::Nat44SessionRecord> for EvenOnly {
    fn format(&mut self, r: &dplog_schema_nat::Nat44SessionRecord, out: &mut Vec<u8>) {
        if r.timestamp_ns % 2 == 0 {
            self.0.format(r, out);
        }
    }
}

#[test]
fn records_formatted_to_nothing_count_as_written_not_pending() {
    let m = mock("z");
    let b = m.bootstrap_servers();
    let sink = KafkaSink::new(opts(&b, "z")).unwrap();
    let counters = sink.counters();
    let logger = start_logger(20_000, EvenOnly(SeqLine { line_len: 40 }), sink);
    let mut p = logger.producer().unwrap();
    const N: u64 = 1_000;
    for i in 0..N {
        assert!(p.log(rec(0, i)));
    }
    drop(p);
    let t0 = Instant::now();
    let s = logger.shutdown().unwrap();
    // Shutdown did not wait for acknowledgements that can never come.
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert_eq!(s.written_records, N, "{s:?}");
    assert_eq!(
        s.dropped_sink + s.dropped_shutdown + s.sink_pending,
        0,
        "{s:?}"
    );
    assert_eq!(KafkaCounters::get(&counters.acked), N / 2);
    let got = parse_lines(&check_keys_and_join(&consume(&b, "z", N / 2)));
    assert_eq!(got.len() as u64, N / 2);
    assert!(got.iter().all(|&(_, seq)| seq % 2 == 0));
}

/// [`SeqLine`] for even sequence numbers; odd records format to an empty
/// line (`\n` alone).
struct BlankOdd(SeqLine);

impl dplog_core::Formatter<dplog_schema_nat::Nat44SessionRecord> for BlankOdd {
    fn format(&mut self, r: &dplog_schema_nat::Nat44SessionRecord, out: &mut Vec<u8>) {
        if r.timestamp_ns % 2 == 0 {
            self.0.format(r, out);
        } else {
            out.push(b'\n');
        }
    }
}

#[test]
fn a_record_formatted_to_an_empty_line_is_an_empty_message() {
    let m = mock("bl");
    let b = m.bootstrap_servers();
    let sink = KafkaSink::new(KafkaSinkOptions::new(&b, "bl")).unwrap();
    let counters = sink.counters();
    let logger = start_logger(20_000, BlankOdd(SeqLine { line_len: 40 }), sink);
    let mut p = logger.producer().unwrap();
    const N: u64 = 1_000;
    for i in 0..N {
        assert!(p.log(rec(0, i)));
    }
    drop(p);
    let s = logger.shutdown().unwrap();
    assert_eq!(s.written_records, N, "{s:?}");
    assert_eq!(
        s.dropped_sink + s.dropped_shutdown + s.sink_pending,
        0,
        "{s:?}"
    );
    assert_eq!(KafkaCounters::get(&counters.acked), N);
    let msgs = consume(&b, "bl", N);
    let empty = msgs.iter().filter(|(_, v)| v.is_empty()).count() as u64;
    assert_eq!(empty, N / 2);
    let mut all = Vec::new();
    for (_, v) in msgs.iter().filter(|(_, v)| !v.is_empty()) {
        all.extend_from_slice(v);
        all.push(b'\n');
    }
    let got = parse_lines(&all);
    assert_eq!(got.len() as u64, N / 2);
    assert!(got.iter().all(|&(_, seq)| seq % 2 == 0));
}

/// The librdkafka linked in is the bundled current one (Debian's 2.0.2
/// cannot talk to a current broker), built with TLS and SASL.
#[test]
fn librdkafka_is_the_bundled_one_with_tls_and_sasl() {
    let (hex, version) = rdkafka::util::get_rdkafka_version();
    assert!(
        hex >= 0x020c_0000,
        "librdkafka {version} is older than 2.12"
    );
    let mut o = KafkaSinkOptions::new("127.0.0.1:1", "t");
    for (k, v) in [
        ("security.protocol", "sasl_ssl"),
        ("sasl.mechanisms", "SCRAM-SHA-512"),
        ("sasl.username", "u"),
        ("sasl.password", "p"),
    ] {
        o.properties.push((k.into(), v.into()));
    }
    if let Err(e) = KafkaSink::new(o) {
        panic!("TLS + SASL/SCRAM refused by librdkafka {version}: {e}");
    }
}
