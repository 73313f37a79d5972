//! `Logger::shutdown` says when records that `log()` accepted were never
//! written: logged while the shutdown ran, after its final drain, they
//! stay in their rings. It returns `LoggerError::Undelivered` with their
//! count (as the C `dplog_close` returns `DPLOG_ERR_UNDELIVERED`), never
//! `Ok`. The record is a user type (a load balancer's connection), the
//! sink a real in-memory one whose output is read back.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, Sender};
use dplog_core::{
    Accepted, Backpressure, Formatter, Logger, LoggerConfig, LoggerError, Record, RecordHeader,
    Sink, SinkError, Stats,
};

/// A load balancer's connection record.
#[repr(C)]
#[derive(Clone, Copy)]
struct Conn {
    header: RecordHeader,
    seq: u64,
    backend: u32,
    port: u16,
    _pad: u16,
}

impl Record for Conn {
    const SCHEMA_ID: u16 = 620;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

fn conn(seq: u64) -> Conn {
    Conn {
        header: RecordHeader::of::<Conn>(),
        seq,
        backend: 7,
        port: 443,
        _pad: 0,
    }
}

/// `conn <seq>` per record.
struct Line;
impl Formatter<Conn> for Line {
    fn format(&mut self, c: &Conn, out: &mut Vec<u8>) {
        out.extend_from_slice(format!("conn {}\n", c.seq).as_bytes());
    }
}

/// Keeps every batch; `close` can be held until the test lets it go.
struct Memory {
    out: Arc<Mutex<Vec<u8>>>,
    /// Told when `close` begins (the final drain is over), then waited on.
    gate: Option<(Sender<()>, Receiver<()>)>,
}

impl Sink for Memory {
    fn write_batch(&mut self, batch: &[u8]) -> Result<Accepted, SinkError> {
        self.out.lock().unwrap().extend_from_slice(batch);
        Ok(Accepted::Delivered)
    }
    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
    fn close(&mut self) -> Result<(), SinkError> {
        if let Some((closing, release)) = &self.gate {
            closing.send(()).unwrap();
            release.recv_timeout(Duration::from_secs(120)).unwrap();
        }
        Ok(())
    }
}

/// The `seq` of every record line the sink got, in order.
fn written(out: &Mutex<Vec<u8>>) -> Vec<u64> {
    String::from_utf8(out.lock().unwrap().clone())
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("conn "))
        .map(|s| s.parse().unwrap())
        .collect()
}

/// Records logged after the final drain (while the sink closes) were
/// accepted and are never written: the shutdown is an error naming them,
/// and the counters add up.
#[test]
fn records_logged_after_the_final_drain_make_the_shutdown_an_error() {
    let out = Arc::new(Mutex::new(Vec::new()));
    let (closing_tx, closing) = bounded(1);
    let (release, release_rx) = bounded(1);
    let sink = Memory {
        out: out.clone(),
        gate: Some((closing_tx, release_rx)),
    };
    let logger = Logger::<Conn>::start(LoggerConfig::default(), Line, sink).unwrap();
    let mut p = logger.producer().unwrap();
    for seq in 0..100 {
        assert!(p.log(conn(seq)));
    }
    let shutdown = std::thread::spawn(move || logger.shutdown().map_err(Box::new));
    closing
        .recv_timeout(Duration::from_secs(120))
        .expect("the sink's close begins");
    // The drain is over; the consumer is still there, so these are
    // accepted into the ring.
    for seq in 100..107 {
        assert!(p.log(conn(seq)));
    }
    release.send(()).unwrap();
    let (stats, e) = *shutdown.join().unwrap().unwrap_err();
    assert!(
        matches!(
            e,
            LoggerError::Undelivered {
                in_flight: 7,
                written_records: 100
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "7 record(s) accepted by log() were not written: logged after the shutdown's final drain, they stay in their rings (100 written; drop producers before shutdown)"
    );
    assert_eq!(
        (stats.produced, stats.enqueued, stats.written_records),
        (107, 107, 100)
    );
    assert_eq!(stats.in_flight(), 7);
    assert_eq!(written(&out), (0..100).collect::<Vec<_>>());
    drop(p);
}

/// Without a record after the drain, the shutdown is `Ok`.
#[test]
fn a_shutdown_that_wrote_every_accepted_record_is_ok() {
    let out = Arc::new(Mutex::new(Vec::new()));
    let sink = Memory {
        out: out.clone(),
        gate: None,
    };
    let logger = Logger::<Conn>::start(LoggerConfig::default(), Line, sink).unwrap();
    let mut p = logger.producer().unwrap();
    for seq in 0..50 {
        assert!(p.log(conn(seq)));
    }
    drop(p);
    let s = logger.shutdown().unwrap();
    assert_eq!((s.produced, s.written_records, s.in_flight()), (50, 50, 0));
    assert_eq!(written(&out), (0..50).collect::<Vec<_>>());
}

/// `produced = written + every drop by reason + in flight`.
fn accounted(s: &Stats) -> u64 {
    s.written_records
        + s.dropped()
        + s.dropped_format
        + s.dropped_sink
        + s.dropped_shutdown
        + s.in_flight()
}

/// As a user would hit it: two producers still logging (blocking
/// backpressure, small rings) while the shutdown runs. Whatever the
/// schedule, the shutdown is an error exactly when records stayed in
/// rings, with their number; every other accepted record was written,
/// and the sink holds exactly the records counted as written.
#[test]
fn producers_logging_through_the_shutdown_are_accounted_for() {
    let out = Arc::new(Mutex::new(Vec::new()));
    let sink = Memory {
        out: out.clone(),
        gate: None,
    };
    let config = LoggerConfig {
        ring_capacity: 256,
        backpressure: Backpressure::Block,
        ..LoggerConfig::default()
    };
    let logger = Logger::<Conn>::start(config, Line, sink).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let accepted = Arc::new(AtomicU64::new(0));
    let producers: Vec<_> = (0..2u64)
        .map(|k| {
            let mut p = logger.producer().unwrap();
            let (stop, accepted) = (stop.clone(), accepted.clone());
            std::thread::spawn(move || {
                let mut seq = k << 40;
                // Relaxed: a stop request; nothing else is published by it.
                while !stop.load(Ordering::Relaxed) {
                    if p.log(conn(seq)) {
                        // Relaxed: read after the threads are joined.
                        accepted.fetch_add(1, Ordering::Relaxed);
                    }
                    seq += 1;
                }
            })
        })
        .collect();
    dplog_testkit_wait(|| logger.stats().written_records >= 5_000);
    let res = logger.shutdown();
    // Relaxed: see above.
    stop.store(true, Ordering::Relaxed);
    for t in producers {
        t.join().unwrap();
    }
    let (stats, err) = match res {
        Ok(s) => (s, None),
        Err((s, e)) => (s, Some(e)),
    };
    assert_eq!(stats.produced, accounted(&stats), "{stats:?}");
    assert_eq!(
        stats.produced,
        stats.enqueued + stats.dropped(),
        "{stats:?}"
    );
    match err {
        None => assert_eq!(stats.in_flight(), 0, "{stats:?}"),
        Some(LoggerError::Undelivered {
            in_flight,
            written_records,
        }) => {
            assert!(in_flight > 0);
            assert_eq!(in_flight, stats.in_flight(), "{stats:?}");
            assert_eq!(written_records, stats.written_records);
        }
        Some(e) => panic!("{e}"),
    }
    // Only the ring and consumer-gone drops are possible here.
    assert_eq!(
        stats.dropped_format + stats.dropped_sink + stats.dropped_shutdown,
        0
    );
    let lines = written(&out);
    assert_eq!(lines.len() as u64, stats.written_records);
    // Every record counted was accepted; those accepted after the final
    // count are in no counter.
    // Relaxed: the producer threads are joined.
    assert!(accepted.load(Ordering::Relaxed) >= stats.enqueued);
    println!("{stats:?} in_flight {}", stats.in_flight());
}

/// Waits (generously) for `cond`, polling.
fn dplog_testkit_wait(cond: impl Fn() -> bool) {
    let end = std::time::Instant::now() + Duration::from_secs(120);
    while !cond() {
        assert!(
            std::time::Instant::now() < end,
            "condition not met in 120 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}
