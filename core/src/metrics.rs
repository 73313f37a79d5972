//! Prometheus text exposition of a logger's [`Snapshot`] on a loopback
//! HTTP listener (feature `metrics`).
//!
//! The exposition is built with `prometheus-client` (OpenMetrics text,
//! which Prometheus scrapes natively) and served by `tiny_http` on its own
//! thread, `dplog-metrics`, never on a producer or consumer core: the
//! thread is unpinned (its CPU set is reset to every CPU the process may
//! use), and a scrape only reads Relaxed counters and locks the latency
//! histogram for a moment.
//!
//! ```no_run
//! # fn f(logger: &dplog_core::Logger<dplog_core::Slot64>) -> std::io::Result<()> {
//! let server = dplog_core::metrics::MetricsServer::serve(
//!     "127.0.0.1:9187".parse().unwrap(),
//!     logger.snapshot_source(),
//! )?;
//! // curl http://127.0.0.1:9187/metrics
//! server.stop();
//! # Ok(()) }
//! ```

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::record::Record;
use crate::runtime::SnapshotSource;
use crate::stats::Snapshot;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RingLabel {
    ring: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DropLabel {
    ring: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QuantileLabel {
    quantile: String,
}

/// Encodes `s` as OpenMetrics text (`# EOF` terminated). Metric names:
/// `dplog_ring_{produced,enqueued,dequeued}_total{ring}`,
/// `dplog_ring_dropped_total{ring,reason="full|degraded|disconnected|stopped"}`,
/// `dplog_ring_{high_water,fill}{ring}`, `dplog_ring_stopped{ring}` (1 once
/// the consumer stopped the ring after a protocol violation), `dplog_consumer_{dequeued,
/// formatted,written,written_bytes,dropped_sink,sink_errors,sink_retries,
/// dropped_shutdown,drop_reports}_total` (the logger's [`Stats`](crate::Stats)), and
/// `dplog_enqueue_to_write_seconds{quantile="0.5|0.99|0.999|1"}` with
/// `dplog_enqueue_to_write_samples_total`.
pub fn encode(s: &Snapshot) -> String {
    let mut reg = Registry::with_prefix("dplog");
    let ring_counter = |reg: &mut Registry, name: &str, help: &str, f: &dyn Fn(usize) -> u64| {
        let fam = Family::<RingLabel, Counter>::default();
        reg.register(name, help, fam.clone());
        for (i, r) in s.rings.iter().enumerate() {
            fam.get_or_create(&RingLabel {
                ring: r.id.to_string(),
            })
            .inc_by(f(i));
        }
    };
    ring_counter(
        &mut reg,
        "ring_produced",
        "Records a producer handled (enqueued or dropped)",
        &|i| s.rings[i].produced,
    );
    ring_counter(
        &mut reg,
        "ring_enqueued",
        "Records copied into the ring",
        &|i| s.rings[i].enqueued,
    );
    ring_counter(
        &mut reg,
        "ring_dequeued",
        "Records the consumer read",
        &|i| s.rings[i].dequeued,
    );
    let drops = Family::<DropLabel, Counter>::default();
    reg.register("ring_dropped", "Records dropped, by reason", drops.clone());
    let hw = Family::<RingLabel, Gauge>::default();
    reg.register(
        "ring_high_water",
        "Highest fill level seen, records",
        hw.clone(),
    );
    let fill = Family::<RingLabel, Gauge>::default();
    reg.register(
        "ring_fill",
        "Records in the ring at the snapshot",
        fill.clone(),
    );
    let stopped = Family::<RingLabel, Gauge>::default();
    reg.register(
        "ring_stopped",
        "1 once the consumer stopped the ring after a protocol violation",
        stopped.clone(),
    );
    for r in &s.rings {
        let ring = r.id.to_string();
        for (reason, v) in [
            ("full", r.dropped_full),
            ("degraded", r.dropped_degraded),
            ("disconnected", r.dropped_disconnected),
            ("stopped", r.dropped_stopped),
        ] {
            drops
                .get_or_create(&DropLabel {
                    ring: ring.clone(),
                    reason: reason.into(),
                })
                .inc_by(v);
        }
        let l = RingLabel { ring };
        hw.get_or_create(&l).set(r.high_water as i64);
        fill.get_or_create(&l).set(r.fill as i64);
        stopped.get_or_create(&l).set(i64::from(r.stopped));
    }
    let c = &s.consumer;
    for (name, help, v) in [
        ("consumer_dequeued", "Records read out of rings", c.dequeued),
        ("consumer_formatted", "Records formatted", c.formatted),
        (
            "consumer_written",
            "Records the sink accepted",
            c.written_records,
        ),
        (
            "consumer_written_bytes",
            "Bytes the sink accepted",
            c.written_bytes,
        ),
        (
            "consumer_dropped_sink",
            "Records lost to sink errors",
            c.dropped_sink,
        ),
        ("consumer_sink_errors", "Failed sink calls", c.sink_errors),
        (
            "consumer_sink_retries",
            "Failed sink calls that were retried",
            c.sink_retries,
        ),
        (
            "consumer_dropped_shutdown",
            "Records not delivered by the shutdown deadline",
            c.dropped_shutdown,
        ),
        (
            "consumer_dropped_format",
            "Records the formatter could not format (no schema for their id)",
            c.dropped_format,
        ),
        (
            "consumer_drop_reports",
            "In-band drop reports written",
            c.drop_reports,
        ),
        (
            "enqueue_to_write_samples",
            "Records in the latency histogram",
            s.latency.samples,
        ),
    ] {
        let m = Counter::<u64>::default();
        m.inc_by(v);
        reg.register(name, help, m);
    }
    let q = Family::<QuantileLabel, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    reg.register(
        "enqueue_to_write_seconds",
        "Enqueue-to-write latency of sampled records, by quantile",
        q.clone(),
    );
    let l = &s.latency;
    for (k, v) in [
        ("0.5", l.p50_ns),
        ("0.99", l.p99_ns),
        ("0.999", l.p999_ns),
        ("1", l.max_ns),
    ] {
        q.get_or_create(&QuantileLabel { quantile: k.into() })
            .set(v as f64 / 1e9);
    }
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &reg)
        .expect("writing to a String cannot fail");
    out
}

/// A running metrics listener; see the module docs.
pub struct MetricsServer {
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

impl std::fmt::Debug for MetricsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsServer")
            .field("addr", &self.addr)
            .field("running", &self.thread.is_some())
            .finish_non_exhaustive()
    }
}

impl MetricsServer {
    /// Listens on `addr`, which must be a loopback address (127.0.0.0/8 or
    /// ::1; port 0 picks a free port), and answers `GET /metrics` with
    /// [`encode`] of a fresh snapshot, anything else with 404.
    ///
    /// Errors: `InvalidInput` for a non-loopback address, the bind error
    /// otherwise.
    pub fn serve<R: Record>(addr: SocketAddr, source: SnapshotSource<R>) -> io::Result<Self> {
        Self::serve_with(addr, source, false)
    }

    /// As [`serve`](Self::serve), but with `allow_non_loopback` a
    /// non-loopback address (e.g. `0.0.0.0:9464`, every interface) is
    /// accepted too. The listener has no authentication: only for a
    /// management network the operator chose explicitly.
    ///
    /// Errors: `InvalidInput` for a non-loopback address without
    /// `allow_non_loopback`; the bind error (`AddrNotAvailable`) otherwise.
    pub fn serve_with<R: Record>(
        addr: SocketAddr,
        source: SnapshotSource<R>,
        allow_non_loopback: bool,
    ) -> io::Result<Self> {
        Self::serve_snapshots(addr, allow_non_loopback, move || source.snapshot())
    }

    /// As [`serve_with`](Self::serve_with), with each scrape's snapshot
    /// from `snapshot` (called on the listener thread): for a program that
    /// serves several loggers as one (the C ABI's consumers), or a logger
    /// started after the listener.
    ///
    /// Errors: as [`serve_with`](Self::serve_with).
    pub fn serve_snapshots(
        addr: SocketAddr,
        allow_non_loopback: bool,
        snapshot: impl Fn() -> Snapshot + Send + 'static,
    ) -> io::Result<Self> {
        if !allow_non_loopback && !addr.ip().is_loopback() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "metrics address {addr} is not a loopback address \
                     (127.0.0.0/8 or ::1; set allow_non_loopback to serve on it)"
                ),
            ));
        }
        let server = Arc::new(
            tiny_http::Server::http(addr)
                .map_err(|e| io::Error::new(io::ErrorKind::AddrNotAvailable, e.to_string()))?,
        );
        let addr = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| io::Error::other("listener has no IP address"))?;
        let srv = server.clone();
        let thread = std::thread::Builder::new()
            .name("dplog-metrics".into())
            .spawn(move || {
                unpin();
                for req in srv.incoming_requests() {
                    let resp = if req.method() == &tiny_http::Method::Get
                        && req.url().split('?').next() == Some("/metrics")
                    {
                        let body = encode(&snapshot());
                        let ct = tiny_http::Header::from_bytes(
                            &b"Content-Type"[..],
                            &b"application/openmetrics-text; version=1.0.0; charset=utf-8"[..],
                        )
                        .expect("static header is valid");
                        tiny_http::Response::from_string(body).with_header(ct)
                    } else {
                        tiny_http::Response::from_string("not found\n").with_status_code(404)
                    };
                    // A client that hung up is not our error.
                    let _ = req.respond(resp);
                }
            })?;
        Ok(Self {
            server,
            thread: Some(thread),
            addr,
        })
    }

    /// The address actually bound (with the port chosen for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops listening and joins the thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Resets the calling thread's CPU set to every CPU the process may use, so
/// a listener spawned from a pinned producer or consumer thread does not
/// inherit its core.
fn unpin() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: cpu_set_t is plain data (all-zero = empty set); CPU_SET
        // writes inside it for every index below CPU_SETSIZE;
        // sched_setaffinity reads size_of::<cpu_set_t>() bytes.
        unsafe {
            let mut set: libc::cpu_set_t = core::mem::zeroed();
            for cpu in 0..crate::affinity::available_cpus().min(libc::CPU_SETSIZE as usize) {
                libc::CPU_SET(cpu, &mut set);
            }
            // Best effort: failure leaves the inherited set.
            let _ = libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
}

impl Snapshot {
    /// The snapshot as Prometheus/OpenMetrics text exposition: the same
    /// text the metrics listener serves, from [`encode`] (one encoder,
    /// built on `prometheus-client`; feature `metrics`).
    pub fn to_prometheus(&self) -> String {
        encode(self)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::stats::{LatencySummary, RingStats};

    #[test]
    fn exposition_names_every_counter() {
        let s = Snapshot {
            rings: vec![RingStats {
                id: 3,
                produced: 10,
                enqueued: 7,
                dropped_full: 2,
                dropped_degraded: 1,
                high_water: 5,
                ..Default::default()
            }],
            latency: LatencySummary {
                samples: 4,
                p50_ns: 1500,
                max_ns: 9000,
                ..Default::default()
            },
            ..Default::default()
        };
        let t = encode(&s);
        for line in [
            "dplog_ring_produced_total{ring=\"3\"} 10",
            "dplog_ring_enqueued_total{ring=\"3\"} 7",
            "dplog_ring_dropped_total{ring=\"3\",reason=\"full\"} 2",
            "dplog_ring_dropped_total{ring=\"3\",reason=\"degraded\"} 1",
            "dplog_ring_high_water{ring=\"3\"} 5",
            "dplog_enqueue_to_write_samples_total 4",
            "dplog_enqueue_to_write_seconds{quantile=\"0.5\"} 0.0000015",
        ] {
            assert!(t.lines().any(|l| l == line), "missing {line:?} in\n{t}");
        }
        assert!(t.ends_with("# EOF\n"));
        // prometheus-client ends HELP text with a period itself.
        assert!(t.contains("# HELP dplog_ring_fill Records in the ring at the snapshot.\n"));
        // One encoder (label order within a family may vary between calls).
        let sorted = |t: &str| {
            let mut v: Vec<String> = t.lines().map(String::from).collect();
            v.sort();
            v
        };
        assert_eq!(sorted(&s.to_prometheus()), sorted(&t), "one encoder");
    }
}
