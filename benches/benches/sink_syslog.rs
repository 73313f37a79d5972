//! Syslog sink to a real rsyslogd on 127.0.0.1 (started here with a
//! throwaway config that writes every message raw to a file): 256 KiB
//! batches of RFC 5424-framed NAT44 text lines over TCP (RFC 6587 octet
//! counting) and UDP (RFC 5426). Each TCP iteration is timed until
//! rsyslogd has written every message (messages/s received); the UDP case
//! times the sends and prints how many rsyslogd received.

use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use dplog::formatters::TextFormatter;
use dplog::sinks::{SyslogSink, SyslogSinkOptions, SyslogTransport};
use dplog::{Formatter, Sink};
use dplog_benches::{criterion_config, mixed_pool, pin, PRODUCER_CPU};

const BATCH_BYTES: usize = 256 * 1024;
const BATCHES: usize = 8;
const HEADER: &[u8] = b"<134>1 2026-01-01T00:00:00Z dp NAT - - - ";

fn syslog_batch() -> (Vec<u8>, usize) {
    let pool = mixed_pool(4096);
    let mut f = TextFormatter::default();
    let mut batch = Vec::with_capacity(BATCH_BYTES);
    let mut line = Vec::with_capacity(512);
    let mut n = 0;
    for r in pool.iter().cycle() {
        line.clear();
        line.extend_from_slice(HEADER);
        f.format(r, &mut line);
        if batch.len() + line.len() > BATCH_BYTES {
            break;
        }
        batch.extend_from_slice(&line);
        n += 1;
    }
    (batch, n)
}

struct Rsyslog {
    dir: tempfile::TempDir,
    child: Child,
    tcp: u16,
    udp: u16,
}

impl Rsyslog {
    fn start() -> Option<Self> {
        if !std::path::Path::new("/usr/sbin/rsyslogd").exists() {
            eprintln!("rsyslogd not installed (scripts/setup.sh); syslog bench skipped");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let tcp = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let udp = UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let d = dir.path().display();
        let conf = format!(
            r#"global(workDirectory="{d}" maxMessageSize="64k")
module(load="imudp")
module(load="imtcp")
input(type="imudp" address="127.0.0.1" port="{udp}" rcvbufSize="16m")
input(type="imtcp" address="127.0.0.1" port="{tcp}")
template(name="raw" type="string" string="%rawmsg%\n")
action(type="omfile" file="{d}/out.log" template="raw" ioBufferSize="1m" flushOnTXEnd="on")
"#
        );
        std::fs::write(dir.path().join("rsyslog.conf"), conf).unwrap();
        let child = Command::new("/usr/sbin/rsyslogd")
            .args(["-n", "-f"])
            .arg(dir.path().join("rsyslog.conf"))
            .arg("-i")
            .arg(dir.path().join("pid"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", tcp)).is_err() {
            if t0.elapsed() > Duration::from_secs(15) {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(Self {
            dir,
            child,
            tcp,
            udp,
        })
    }

    fn out(&self) -> PathBuf {
        self.dir.path().join("out.log")
    }

    fn out_len(&self) -> u64 {
        std::fs::metadata(self.out()).map(|m| m.len()).unwrap_or(0)
    }

    /// Waits until the output file holds `len` bytes or `limit` passes.
    fn wait_len(&self, len: u64, limit: Duration) -> u64 {
        let t0 = Instant::now();
        loop {
            let n = self.out_len();
            if n >= len || t0.elapsed() > limit {
                return n;
            }
            std::thread::sleep(Duration::from_micros(500));
        }
    }
}

impl Drop for Rsyslog {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child, not yet reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

fn bench(c: &mut Criterion) {
    pin(PRODUCER_CPU);
    let Some(r) = Rsyslog::start() else { return };
    let (batch, lines) = syslog_batch();
    let per_iter = (lines * BATCHES) as u64;

    let mut g = c.benchmark_group("sink_syslog_messages");
    g.sampling_mode(SamplingMode::Flat);
    g.throughput(Throughput::Elements(per_iter));
    let tcp = SocketAddr::from(([127, 0, 0, 1], r.tcp));
    let mut sink = SyslogSink::new(SyslogSinkOptions::new(SyslogTransport::Tcp(tcp))).unwrap();
    g.bench_function("SyslogSink_tcp_to_rsyslogd_received", |b| {
        b.iter_custom(|iters| {
            let t0 = Instant::now();
            for _ in 0..iters {
                let target = r.out_len() + (batch.len() as u64) * BATCHES as u64;
                for _ in 0..BATCHES {
                    while sink.write_batch(&batch).is_err() {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                let got = r.wait_len(target, Duration::from_secs(30));
                assert!(got >= target, "rsyslogd received {got} of {target} bytes");
            }
            t0.elapsed()
        })
    });
    sink.close().unwrap();

    let udp = SocketAddr::from(([127, 0, 0, 1], r.udp));
    let mut sink = SyslogSink::new(SyslogSinkOptions::new(SyslogTransport::Udp(udp))).unwrap();
    let mut sent_bytes = 0u64;
    let start_len = r.out_len();
    g.bench_function("SyslogSink_udp_send", |b| {
        b.iter_custom(|iters| {
            let t0 = Instant::now();
            for _ in 0..iters {
                for _ in 0..BATCHES {
                    while sink.write_batch(&batch).is_err() {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    sent_bytes += batch.len() as u64;
                }
            }
            t0.elapsed()
        })
    });
    let got = r.wait_len(start_len + sent_bytes, Duration::from_secs(5)) - start_len;
    eprintln!(
        "udp: rsyslogd received {:.1}% of {} bytes sent",
        100.0 * got as f64 / sent_bytes.max(1) as f64,
        sent_bytes
    );
    sink.close().unwrap();
    g.finish();
}

criterion_group! {
    name = benches;
    config = criterion_config(Duration::from_millis(500), Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
