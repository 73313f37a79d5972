//! The Prometheus listener (feature `metrics`): a real logger, a real
//! HTTP GET over loopback, the numbers the logger counted.
#![cfg(feature = "metrics")]

use std::io::{Read, Write};
use std::net::TcpStream;

use dplog_core::metrics::MetricsServer;
use dplog_core::*;
use dplog_schema_nat::*;

struct Null;
impl Formatter<Nat44SessionRecord> for Null {
    fn format(&mut self, _: &Nat44SessionRecord, out: &mut Vec<u8>) {
        out.push(b'.');
    }
}
struct Discard;
impl Sink for Discard {
    fn write_batch(&mut self, _: &[u8]) -> Result<Accepted, SinkError> {
        Ok(Accepted::Delivered)
    }
    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
    fn close(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
}

fn get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}

#[test]
fn serves_the_snapshot_on_loopback_only() {
    let logger = Logger::start(LoggerConfig::default(), Null, Discard).unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..1000 {
        assert!(p.log(Nat44SessionRecord {
            timestamp_ns: i,
            ..Default::default()
        }));
    }
    logger.flush().unwrap();
    while logger.stats().written_records < 1000 {
        std::thread::yield_now();
        logger.flush().unwrap();
    }
    let server =
        MetricsServer::serve("127.0.0.1:0".parse().unwrap(), logger.snapshot_source()).unwrap();
    let body = get(server.local_addr(), "/metrics");
    assert!(
        body.starts_with("HTTP/1.1 200") || body.starts_with("HTTP/1.0 200"),
        "{body}"
    );
    assert!(
        body.contains("dplog_ring_enqueued_total{ring=\"0\"} 1000"),
        "{body}"
    );
    assert!(body.contains("dplog_consumer_written_total 1000"), "{body}");
    assert!(get(server.local_addr(), "/other").contains(" 404 "));
    server.stop();
    let e = MetricsServer::serve("192.0.2.1:9187".parse().unwrap(), logger.snapshot_source())
        .err()
        .unwrap();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    drop(p);
    logger.shutdown().unwrap();
}
