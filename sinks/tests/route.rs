//! Fan-out and failover over real file sinks, and with a Kafka sink
//! against librdkafka's mock cluster (the real Kafka protocol on loopback),
//! a real broker (tansu, see `tests/kafka.rs`) or a loopback port nothing
//! listens on.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use dplog_core::{Logger, LoggerConfig, Sink, Stats};
use dplog_sinks::{
    BoxSink, Failover, FanOut, FileSink, KafkaCounters, KafkaKey, KafkaSink, KafkaSinkOptions,
};
use rdkafka::mocking::MockCluster;

#[test]
fn compliance_fanout_and_failover() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.log");
    let b = dir.path().join("b.log");
    compliance(
        || {
            FanOut::new(vec![
                Box::new(FileSink::open(&a).unwrap()) as BoxSink,
                Box::new(FileSink::open(&b).unwrap()),
            ])
            .unwrap()
        },
        |_| {
            // Both copies are complete and identical.
            let x = std::fs::read(&a).unwrap();
            assert_eq!(x, std::fs::read(&b).unwrap());
            x
        },
        None,
    );
    let c = dir.path().join("c.log");
    compliance(
        || {
            Failover::new(
                Box::new(FileSink::open("/dev/full").unwrap()),
                Box::new(FileSink::open(&c).unwrap()),
                Duration::from_millis(50),
            )
        },
        |_| std::fs::read(&c).unwrap(),
        None,
    );
}

#[test]
fn fanout_child_that_refuses_loses_alone_and_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.log");
    let mut closed = FileSink::open(dir.path().join("closed.log")).unwrap();
    closed.close().unwrap();
    let fan = FanOut::new(vec![
        Box::new(FileSink::open(&a).unwrap()) as BoxSink,
        Box::new(closed),
    ])
    .unwrap();
    let counters = fan.counters();
    let logger = dplog_core::Logger::start(
        dplog_core::LoggerConfig::default(),
        SeqLine { line_len: 50 },
        fan,
    )
    .unwrap();
    // The closed child's flush/close errors are reported, not swallowed.
    let (s, err) = run_logger_any(logger, 2, 1000);
    assert!(err.unwrap().contains("closed"));
    // A record counts as written only when every child wrote it: the
    // closed child lost all of them, so they are dropped (the healthy
    // child's copy is complete all the same).
    assert_eq!(s.written_records, 0, "{s:?}");
    assert_eq!(s.dropped_sink, 2000, "{s:?}");
    assert_eq!(s.sink_pending, 0);
    assert_complete_and_ordered(&parse_lines(&std::fs::read(&a).unwrap()), 2, 1000);
    assert_eq!(counters.written_lines[0].load(Ordering::Relaxed), 2000);
    assert_eq!(counters.failed_lines[1].load(Ordering::Relaxed), 2000);
    let batches = counters.batches[0].load(Ordering::Relaxed);
    assert!(batches >= 1);
    assert_eq!(counters.batches[1].load(Ordering::Relaxed), 0);
    assert_eq!(counters.dropped_batches[1].load(Ordering::Relaxed), batches);
    // Its flush and close errors are counted too, not only the writes.
    assert!(counters.errors[1].load(Ordering::Relaxed) > batches);
    assert_eq!(counters.errors[0].load(Ordering::Relaxed), 0);
    assert!(FanOut::new(vec![]).is_err());
}

#[test]
fn failover_switches_and_counts() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("c.log");
    let mut f = Failover::new(
        Box::new(FileSink::open("/dev/full").unwrap()),
        Box::new(FileSink::open(&c).unwrap()),
        Duration::from_secs(3600),
    );
    let k = f.counters();
    f.write_batch(b"p0 s0000000000 a\n").unwrap();
    f.write_batch(b"p0 s0000000001 b\n").unwrap();
    assert!(f.on_secondary());
    assert_eq!(k.failovers.load(Ordering::Relaxed), 1);
    assert_eq!(k.primary_errors.load(Ordering::Relaxed), 1);
    assert_eq!(k.secondary_batches.load(Ordering::Relaxed), 2);
    f.close().unwrap();
    assert_eq!(
        parse_lines(&std::fs::read(&c).unwrap()),
        vec![(0, 0), (0, 1)]
    );
}

fn kafka(brokers: &str, topic: &str, ack_timeout_ms: u64) -> KafkaSink {
    let mut o = KafkaSinkOptions::new(brokers, topic);
    o.key = KafkaKey::Token(0);
    o.ack_timeout_ms = ack_timeout_ms;
    KafkaSink::new(o).unwrap()
}

/// A loopback address nothing listens on, at a port below the ephemeral
/// range (no client socket, the sink's own included, is given it).
fn dead_broker() -> String {
    format!("127.0.0.1:{}", dplog_testkit::free_tcp_port())
}

fn log_range(
    p: &mut dplog_core::LogProducer<dplog_schema_nat::Nat44SessionRecord>,
    r: std::ops::Range<u64>,
) {
    for i in r {
        assert!(p.log(rec(0, i)));
    }
}

/// written + dropped (every reason) + pending in the sink + still in the
/// consumer's batch or a ring = produced.
fn assert_books_balance(s: &Stats) {
    assert_eq!(
        s.written_records + s.dropped() + s.dropped_sink + s.dropped_shutdown + s.in_flight(),
        s.produced,
        "{s:?}"
    );
    assert!(s.sink_pending <= s.in_flight(), "{s:?}");
}

#[test]
fn fanout_counts_a_record_written_only_when_kafka_acknowledges_it() {
    let m = MockCluster::new(1).unwrap();
    m.create_topic("f", 3, 1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.log");
    m.broker_down(1).unwrap();
    let fan = FanOut::new(vec![
        Box::new(FileSink::open(&a).unwrap()) as BoxSink,
        Box::new(kafka(&m.bootstrap_servers(), "f", 0)),
    ])
    .unwrap();
    let counters = fan.counters();
    let logger = Logger::start(
        LoggerConfig {
            shutdown_timeout_ms: 20_000,
            ..Default::default()
        },
        SeqLine { line_len: 60 },
        fan,
    )
    .unwrap();
    let mut p = logger.producer().unwrap();
    log_range(&mut p, 0..1000);
    // The file has every line; Kafka has acknowledged none: nothing is
    // written yet, all 1000 are pending in the sink.
    let mid = wait_for(&logger, 10, |s| s.sink_pending == 1000);
    std::thread::sleep(Duration::from_millis(300));
    let mid2 = logger.stats();
    assert_eq!(mid.sink_pending, 1000, "{mid:?}");
    assert_eq!(mid2.written_records, 0, "{mid2:?}");
    assert_eq!(mid2.sink_pending, 1000, "{mid2:?}");
    assert_books_balance(&mid2);
    assert_eq!(counters.written_lines[0].load(Ordering::Relaxed), 1000);
    assert_eq!(counters.written_lines[1].load(Ordering::Relaxed), 0);
    // The broker comes back: the acknowledgements make them written.
    m.broker_up(1).unwrap();
    let s = wait_for(&logger, 20, |s| s.written_records == 1000);
    assert_eq!(s.written_records, 1000, "{s:?}");
    assert_eq!(s.sink_pending, 0, "{s:?}");
    log_range(&mut p, 1000..2000);
    drop(p);
    let s = logger.shutdown().unwrap();
    assert_eq!(s.written_records, 2000, "{s:?}");
    assert_eq!(s.dropped_sink + s.dropped_shutdown, 0, "{s:?}");
    assert_books_balance(&s);
    assert_eq!(counters.written_lines[1].load(Ordering::Relaxed), 2000);
    assert_complete_and_ordered(&parse_lines(&std::fs::read(&a).unwrap()), 1, 2000);
}

#[test]
fn fanout_with_a_dead_kafka_broker_reports_its_records_undelivered() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.log");
    let fan = FanOut::new(vec![
        Box::new(FileSink::open(&a).unwrap()) as BoxSink,
        Box::new(kafka(&dead_broker(), "d", 0)),
    ])
    .unwrap();
    let logger = Logger::start(
        LoggerConfig {
            shutdown_timeout_ms: 300,
            ..Default::default()
        },
        SeqLine { line_len: 60 },
        fan,
    )
    .unwrap();
    let (s, _err) = run_logger_any(logger, 2, 500);
    // Before: the file sink's delivery made all 1000 "written".
    assert_eq!(s.written_records, 0, "{s:?}");
    assert_eq!(s.dropped_shutdown, 1000, "{s:?}");
    assert_eq!(s.sink_pending, 0);
    assert_books_balance(&s);
    assert_complete_and_ordered(&parse_lines(&std::fs::read(&a).unwrap()), 2, 500);
}

#[test]
fn failover_engages_when_the_kafka_broker_is_dead() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("c.log");
    let f = Failover::new(
        Box::new(kafka(&dead_broker(), "d", 200)),
        Box::new(FileSink::open(&c).unwrap()),
        Duration::from_millis(50),
    );
    let k = f.counters();
    let logger = Logger::start(
        LoggerConfig {
            shutdown_timeout_ms: 300,
            ..Default::default()
        },
        SeqLine { line_len: 60 },
        f,
    )
    .unwrap();
    let mut p = logger.producer().unwrap();
    // Taken by Kafka, which never acknowledges them.
    log_range(&mut p, 0..500);
    wait_for(&logger, 10, |s| s.sink_pending == 500);
    // Longer than ack_timeout_ms: the next batches go to the file.
    std::thread::sleep(Duration::from_millis(400));
    log_range(&mut p, 500..1000);
    drop(p);
    let s = match logger.shutdown() {
        Ok(s) => s,
        Err((s, _)) => s,
    };
    assert_eq!(k.failovers.load(Ordering::Relaxed), 1);
    assert!(k.secondary_batches.load(Ordering::Relaxed) >= 1);
    // Kafka holds 0..k (k = 500 unless a loaded machine delayed part of the
    // first records past the ack timeout), the file k..1000, in order.
    let got = parse_lines(&std::fs::read(&c).unwrap());
    let k0 = 1000 - got.len() as u64;
    assert!((1..=500).contains(&k0), "{got:?}");
    assert_eq!(got, (k0..1000).map(|i| (0, i)).collect::<Vec<_>>());
    assert_eq!(s.written_records, 1000 - k0, "{s:?}");
    assert_eq!(s.dropped_shutdown, k0, "{s:?}");
    assert_eq!(s.dropped_sink, 0, "{s:?}");
    assert_books_balance(&s);
}

#[test]
fn failover_engages_when_the_mock_broker_stops_and_fails_back_without_loss() {
    let m = MockCluster::new(1).unwrap();
    m.create_topic("t", 3, 1).unwrap();
    let b = m.bootstrap_servers();
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("c.log");
    let f = Failover::new(
        Box::new(kafka(&b, "t", 300)),
        Box::new(FileSink::open(&c).unwrap()),
        Duration::from_millis(100),
    );
    let k = f.counters();
    let logger = Logger::start(
        LoggerConfig {
            shutdown_timeout_ms: 20_000,
            ..Default::default()
        },
        SeqLine { line_len: 60 },
        f,
    )
    .unwrap();
    let mut p = logger.producer().unwrap();
    log_range(&mut p, 0..1000);
    let s = wait_for(&logger, 20, |s| s.written_records == 1000);
    assert_eq!(s.written_records, 1000, "acknowledged by the mock: {s:?}");
    m.broker_down(1).unwrap();
    // Taken by Kafka (nothing was in flight), never acknowledged while the
    // broker is down.
    log_range(&mut p, 1000..2000);
    wait_for(&logger, 10, |s| s.sink_pending == 1000);
    std::thread::sleep(Duration::from_millis(600));
    log_range(&mut p, 2000..3000);
    let s = wait_for(&logger, 10, |s| s.written_records == 2000);
    assert_eq!(k.failovers.load(Ordering::Relaxed), 1);
    assert_eq!(s.written_records, 2000, "the file took 2000..3000: {s:?}");
    assert_eq!(s.sink_pending, 1000, "{s:?}");
    assert_books_balance(&s);
    m.broker_up(1).unwrap();
    let s = wait_for(&logger, 20, |s| s.written_records == 3000);
    assert_eq!(s.written_records, 3000, "{s:?}");
    // The next batch after a probe interval goes to Kafka again.
    std::thread::sleep(Duration::from_millis(200));
    log_range(&mut p, 3000..4000);
    drop(p);
    let s = logger.shutdown().unwrap();
    assert_eq!(k.failbacks.load(Ordering::Relaxed), 1);
    assert_eq!(s.written_records, 4000, "{s:?}");
    assert_eq!(s.dropped_sink + s.dropped_shutdown, 0, "{s:?}");
    assert_books_balance(&s);
    let file = parse_lines(&std::fs::read(&c).unwrap());
    assert_eq!(file, (2000..3000).map(|i| (0, i)).collect::<Vec<_>>());
}

/// A real broker killed (SIGKILL) and never restarted: the records it
/// acknowledged are written (and were on the broker), the ones Kafka held
/// when it stalled are counted `dropped_shutdown` (never acknowledged, not
/// re-sent to the secondary), and every later one is in the file.
#[test]
fn failover_to_a_file_when_the_real_broker_is_killed_counts_every_record() {
    let Some(mut broker) = Tansu::start() else {
        return;
    };
    broker.create_topic("fo", 3);
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("c.log");
    let primary = kafka(&broker.brokers, "fo", 300);
    let kc = primary.counters();
    let f = Failover::new(
        Box::new(primary),
        Box::new(FileSink::open(&c).unwrap()),
        Duration::from_millis(100),
    );
    let k = f.counters();
    let logger = Logger::start(
        LoggerConfig {
            shutdown_timeout_ms: 1_000,
            ..Default::default()
        },
        SeqLine { line_len: 60 },
        f,
    )
    .unwrap();
    let mut p = logger.producer().unwrap();
    log_range(&mut p, 0..1000);
    let s = wait_for(&logger, 60, |s| s.written_records == 1000);
    assert_eq!(s.written_records, 1000, "acknowledged by the broker: {s:?}");
    let on_broker = parse_lines(
        &consume_topic(&broker.brokers, "fo", 3, 1000)
            .into_iter()
            .flat_map(|(_, mut v)| {
                v.push(b'\n');
                v
            })
            .collect::<Vec<u8>>(),
    );
    assert_complete_and_ordered(&on_broker, 1, 1000);
    broker.kill();
    // Taken by Kafka (nothing was in flight), never acknowledged.
    log_range(&mut p, 1000..2000);
    let s = wait_for(&logger, 30, |s| s.sink_pending == 1000);
    assert_eq!(s.sink_pending, 1000, "{s:?}");
    // Longer than ack_timeout_ms: the next batches go to the file.
    std::thread::sleep(Duration::from_millis(600));
    log_range(&mut p, 2000..3000);
    let s = wait_for(&logger, 30, |s| s.written_records == 2000);
    assert_eq!(s.written_records, 2000, "the file took 2000..3000: {s:?}");
    assert_books_balance(&s);
    drop(p);
    let s = match logger.shutdown() {
        Ok(s) => s,
        Err((s, _)) => s,
    };
    assert_eq!(k.failovers.load(Ordering::Relaxed), 1);
    assert_eq!(k.failbacks.load(Ordering::Relaxed), 0);
    assert_eq!(s.written_records, 2000, "{s:?}");
    assert_eq!(s.dropped_shutdown, 1000, "held by Kafka: {s:?}");
    assert_eq!(s.dropped_sink, 0, "{s:?}");
    assert_books_balance(&s);
    assert_eq!(KafkaCounters::get(&kc.acked), 1000);
    let file = parse_lines(&std::fs::read(&c).unwrap());
    assert_eq!(file, (2000..3000).map(|i| (0, i)).collect::<Vec<_>>());
}

#[test]
fn fanout_of_file_and_kafka_does_not_count_drop_reports_as_records() {
    let m = MockCluster::new(1).unwrap();
    m.create_topic("r", 3, 1).unwrap();
    let b = m.bootstrap_servers();
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.log");
    let fan = FanOut::new(vec![
        Box::new(FileSink::open(&a).unwrap()) as BoxSink,
        Box::new(kafka(&b, "r", 0)),
    ])
    .unwrap();
    let counters = fan.counters();
    const N: u64 = 8_000;
    let s = run_dropping(fan, N);
    assert_eq!(s.produced, N, "{s:?}");
    assert!(s.dropped_full > 0, "the ring never overflowed: {s:?}");
    assert!(s.drop_reports > 0, "no drop report written: {s:?}");
    // Exact: drop-report lines are not records.
    assert_eq!(s.written_records + s.dropped_full, N, "{s:?}");
    assert_eq!(
        s.dropped_sink + s.dropped_shutdown + s.sink_pending,
        0,
        "{s:?}"
    );
    assert_books_balance(&s);
    assert_eq!(s.in_flight(), 0, "{s:?}");
    // Each child wrote exactly the written records (reports not counted).
    for (i, c) in counters.written_lines.iter().enumerate() {
        assert_eq!(c.load(Ordering::Relaxed), s.written_records, "child {i}");
    }
    // The file and the topic each hold the written records plus the
    // reports, and the reports account for every drop.
    let file = std::fs::read(&a).unwrap();
    let msgs = consume_topic(&b, "r", 3, s.written_records + s.drop_reports);
    let mut topic = Vec::new();
    for (_, v) in &msgs {
        topic.extend_from_slice(v);
        topic.push(b'\n');
    }
    for body in [&file, &topic] {
        let (records, reports, dropped) = split_reports(body);
        assert_eq!(reports, s.drop_reports, "{s:?}");
        assert_eq!(dropped, s.dropped_full, "{s:?}");
        let got = parse_lines(&records);
        assert_eq!(got.len() as u64, s.written_records, "{s:?}");
        assert!(got.windows(2).all(|w| w[0].1 < w[1].1), "out of order");
    }
}

/// A sink that takes every batch of the binary format as `Pending` and
/// reports its records (`R` frames) delivered at the next poll, as an
/// archive or a ClickHouse sink does once it has written them.
struct DeliversLater {
    due: u64,
}

impl Sink for DeliversLater {
    fn write_batch(&mut self, batch: &[u8]) -> Result<dplog_core::Accepted, dplog_core::SinkError> {
        let mut p = 0;
        while p + 4 <= batch.len() {
            self.due += u64::from(batch[p] == b'R');
            p += 4 + usize::from(u16::from_le_bytes([batch[p + 2], batch[p + 3]]));
        }
        Ok(dplog_core::Accepted::Pending)
    }
    fn poll(&mut self) -> dplog_core::Progress {
        dplog_core::Progress {
            delivered_records: std::mem::take(&mut self.due),
            ..Default::default()
        }
    }
    fn flush(&mut self) -> Result<(), dplog_core::SinkError> {
        Ok(())
    }
    fn close(&mut self) -> Result<(), dplog_core::SinkError> {
        Ok(())
    }
}

/// Binary records beside a child that reports them later: the fan-out
/// counts a binary batch's records by its `R` frames (its records' bytes
/// hold newline bytes, which are no record ends), so the logger counts
/// each record written once, when both children have it.
#[test]
fn fanout_of_binary_records_counts_records_not_newline_bytes() {
    use dplog_core::schema::HasSchema;
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.bin");
    let fan = FanOut::new(vec![
        Box::new(FileSink::open(&a).unwrap()) as BoxSink,
        Box::new(DeliversLater { due: 0 }),
    ])
    .unwrap();
    let counters = fan.counters();
    let spec = dplog_formatters::FormatSpec {
        kind: dplog_formatters::Format::Binary,
        ..Default::default()
    };
    let logger = Logger::start(
        LoggerConfig::default(),
        spec.formatter(&[AclHit::schema()]).unwrap(),
        fan,
    )
    .unwrap();
    const N: u32 = 20_000;
    let mut p = logger.producer().unwrap();
    for i in 0..N {
        assert!(p.log(acl_hit(i)));
    }
    drop(p);
    let s = logger.shutdown().unwrap();
    assert_eq!(s.written_records, u64::from(N), "{s:?}");
    assert_eq!(
        s.dropped_sink + s.dropped_shutdown + s.sink_pending,
        0,
        "{s:?}"
    );
    for (i, c) in counters.written_lines.iter().enumerate() {
        assert_eq!(c.load(Ordering::Relaxed), u64::from(N), "child {i}");
    }
    let bytes = std::fs::read(&a).unwrap();
    let d = dplog_formatters::binary::decode(&bytes);
    assert_eq!(d.records.len() as u64, u64::from(N));
    // Newline bytes in the records: counting lines would miscount.
    assert!(bytes.iter().filter(|&&b| b == b'\n').count() > 1000);
}
