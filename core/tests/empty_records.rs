//! Records that format to zero bytes (a formatter that skips a record
//! type) are counted as written, so `produced = written + dropped +
//! buffered` holds: with the batch they share with formatted records, and
//! on their own when a whole batch formats to nothing.

use std::sync::{Arc, Mutex};

use dplog_core::*;
use dplog_schema_nat::*;

/// Writes the timestamp (8 bytes) of records with an even timestamp and
/// nothing for odd ones; with `skip_all`, nothing for any record.
struct EvenOnly {
    skip_all: bool,
}
impl Formatter<Nat44SessionRecord> for EvenOnly {
    fn format(&mut self, r: &Nat44SessionRecord, out: &mut Vec<u8>) {
        if !self.skip_all && r.timestamp_ns % 2 == 0 {
            out.extend_from_slice(&r.timestamp_ns.to_le_bytes());
        }
    }
}

/// Collects batches in memory and counts sink calls.
#[derive(Clone, Default)]
struct Collect {
    bytes: Arc<Mutex<Vec<u8>>>,
    calls: Arc<Mutex<usize>>,
}
impl Sink for Collect {
    fn write_batch(&mut self, b: &[u8]) -> Result<Accepted, SinkError> {
        assert!(!b.is_empty(), "the runtime handed the sink an empty batch");
        self.bytes.lock().unwrap().extend_from_slice(b);
        *self.calls.lock().unwrap() += 1;
        Ok(Accepted::Delivered)
    }
    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
    fn close(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
}

fn run(skip_all: bool, n: u64) -> (Stats, Vec<u64>, usize, Stats) {
    let sink = Collect::default();
    let logger =
        Logger::start(LoggerConfig::default(), EvenOnly { skip_all }, sink.clone()).unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..n {
        assert!(p.log(Nat44SessionRecord {
            timestamp_ns: i,
            ..Default::default()
        }));
    }
    drop(p);
    // While the logger runs, flushes write the partial batch; once the
    // consumer has drained the ring the running counters must account for
    // every record (nothing left in flight). Bounded wait, then assert.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut mid = logger.stats();
    while (mid.dequeued < n || mid.in_flight() > 0) && std::time::Instant::now() < deadline {
        logger.flush().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1));
        mid = logger.stats();
    }
    let stats = logger.shutdown().map_err(|(_, e)| e).unwrap();
    let bytes = sink.bytes.lock().unwrap().clone();
    let ts = bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let calls = *sink.calls.lock().unwrap();
    (stats, ts, calls, mid)
}

#[test]
fn skipped_records_in_a_mixed_batch_count_as_written() {
    let (s, ts, calls, mid) = run(false, 1001);
    assert_eq!(s.produced, 1001);
    assert_eq!(s.formatted, 1001);
    assert_eq!(s.written_records, 1001);
    assert_eq!(s.written_bytes, 501 * 8);
    assert_eq!(s.in_flight(), 0);
    assert_eq!(mid.written_records, 1001, "after flush: {mid:?}");
    assert_eq!(ts, (0..1001).step_by(2).collect::<Vec<u64>>());
    assert!(calls >= 1);
}

#[test]
fn a_batch_of_only_skipped_records_counts_as_written_without_a_sink_call() {
    let (s, ts, calls, mid) = run(true, 700);
    assert_eq!(s.produced, 700);
    assert_eq!(s.formatted, 700);
    assert_eq!(s.written_records, 700, "{s:?}");
    assert_eq!(s.written_bytes, 0);
    assert_eq!(s.batches, 0);
    assert_eq!(s.dropped() + s.dropped_sink + s.dropped_shutdown, 0);
    assert_eq!(s.in_flight(), 0);
    assert_eq!(mid.written_records, 700, "after flush: {mid:?}");
    assert!(ts.is_empty());
    assert_eq!(calls, 0);
}
