//! Fan-out and failover over real file sinks.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use dplog_core::Sink;
use dplog_sinks::{BoxSink, Failover, FanOut, FileSink};

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
    assert_eq!(s.written_records, 2000);
    assert_complete_and_ordered(&parse_lines(&std::fs::read(&a).unwrap()), 2, 1000);
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
