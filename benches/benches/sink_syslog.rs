//! Syslog sink to a real rsyslogd on 127.0.0.1 (started here with a
//! throwaway config that writes every message raw to a file): 256 KiB
//! batches of RFC 5424-framed NAT44 text lines over TCP (RFC 6587 octet
//! counting) and UDP (RFC 5426). Each TCP iteration is timed until
//! rsyslogd has written every message (messages/s received); the UDP case
//! times the sends and prints how many rsyslogd received.
//!
//! Two rsyslogd configurations run one after the other, each with its own
//! rsyslogd: `stock` (imtcp, default main queue, omfile with a 1 MiB
//! buffer flushed per transaction: the configuration of the first
//! measurements), `tuned` (a 1 M-message main queue dequeued in batches
//! of 4096, omfile with a 4 MiB buffer, no fsync) and `tuned_imptcp` (the
//! same with rsyslog's epoll-based plain-TCP input `imptcp` instead of
//! `imtcp`). Two line shapes: the
//! issue's ~120-byte template line and the ~350-byte default text layout,
//! each behind the same RFC 5424 header (~42 bytes).
//!
//! Bounded: rsyslogd's output file is truncated at the start of every
//! iteration (after the previous one fully arrived; omfile appends with
//! `O_APPEND`, which the exact-size check after each iteration verifies),
//! so it never holds more than one iteration (2 MiB).

#![allow(missing_docs)] // criterion_main! generates main

use dplog_schema_nat::NatFormatSpec as _;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use dplog::formatters::{Format, FormatSpec};
use dplog::nat::TextFormatter;
use dplog::sinks::{SyslogSink, SyslogSinkOptions, SyslogTransport};
use dplog::{Formatter, Sink};
use dplog_benches::format_peers::TEMPLATE;
use dplog_benches::{criterion_config, mixed_pool, pin, PRODUCER_CPU};

const BATCH_BYTES: usize = 256 * 1024;
const BATCHES: usize = 8;
const HEADER: &[u8] = b"<134>1 2026-01-01T00:00:00Z dp NAT - - - ";

/// Whole messages (header + line) of at most 256 KiB and their count:
/// `template` picks the ~120-byte [`TEMPLATE`] line, else the default
/// text layout.
fn syslog_batch(template: bool) -> (Vec<u8>, usize) {
    let pool = mixed_pool(4096);
    let mut f: Box<dyn Formatter<dplog_schema_nat::Nat44SessionRecord>> = if template {
        Box::new(
            FormatSpec {
                kind: Format::Text,
                template: Some(TEMPLATE.to_string()),
                ..FormatSpec::default()
            }
            .nat_formatter()
            .expect("template compiles"),
        )
    } else {
        Box::new(TextFormatter::default())
    };
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

/// rsyslogd settings of the first measurements.
const STOCK: &str = r#"
template(name="raw" type="string" string="%rawmsg%\n")
action(type="omfile" file="{out}" template="raw" ioBufferSize="1m" flushOnTXEnd="on")
"#;

/// rsyslogd settings for throughput: a main queue big enough to absorb
/// 256 KiB bursts (1 M messages, in-memory FixedArray) dequeued in
/// batches of 4096 (one omfile transaction each), omfile writing through
/// a 4 MiB buffer once per transaction, never fsyncing. `flushOnTXEnd`
/// stays on: off, the last messages wait for the 1 s `flushInterval`.
const TUNED: &str = r#"
main_queue(queue.type="FixedArray" queue.size="1000000" queue.dequeueBatchSize="4096" queue.workerThreads="1")
template(name="raw" type="string" string="%rawmsg%\n")
action(type="omfile" file="{out}" template="raw" ioBufferSize="4m" flushOnTXEnd="on" asyncWriting="off")
"#;

impl Rsyslog {
    /// Starts rsyslogd with `outputs` (a config fragment; `{out}` is the
    /// output file) after the global settings and inputs.
    /// `tcp_module` is `imtcp` or `imptcp` (rsyslog's "plain TCP" input,
    /// epoll-based, octet-counted framing on by default).
    fn start(tcp_module: &str, outputs: &str) -> Option<Self> {
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
module(load="{tcp_module}")
input(type="imudp" address="127.0.0.1" port="{udp}" rcvbufSize="16m")
input(type="{tcp_module}" address="127.0.0.1" port="{tcp}")
{}"#,
            outputs.replace("{out}", &format!("{d}/out.log"))
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

    /// Empties the output file (omfile appends with `O_APPEND`, so its
    /// next write lands at offset 0).
    fn truncate(&self) {
        if let Ok(f) = std::fs::OpenOptions::new().write(true).open(self.out()) {
            let _ = f.set_len(0);
        }
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

/// CPU time of each thread of process `pid` (user + system, in clock
/// ticks of `sysconf(_SC_CLK_TCK)`), by thread name, from
/// `/proc/<pid>/task/*/stat`.
fn thread_ticks(pid: u32) -> Vec<(String, u64)> {
    let mut v = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return v;
    };
    for t in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        // "tid (comm) state ... utime stime ...": fields 14 and 15, counted
        // after the closing parenthesis (comm may hold spaces).
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let name = stat[stat.find('(').map_or(0, |i| i + 1)..close].to_string();
        let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let ticks = f.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
            + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
        v.push((name, ticks));
    }
    v
}

/// Prints rsyslogd's CPU time per message between two [`thread_ticks`]
/// snapshots, per thread (busiest first) and in total: what each thread
/// would sustain on a dedicated core, independent of other load.
fn report_cpu(label: &str, before: &[(String, u64)], after: &[(String, u64)], msgs: u64) {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut per: Vec<(String, f64)> = after
        .iter()
        .enumerate()
        .map(|(i, (n, t))| {
            let t0 = before.get(i).filter(|b| b.0 == *n).map_or(0, |b| b.1);
            (
                n.clone(),
                (t - t0.min(*t)) as f64 / hz * 1e6 / msgs.max(1) as f64,
            )
        })
        .filter(|(_, us)| *us > 0.0)
        .collect();
    per.sort_by(|a, b| b.1.total_cmp(&a.1));
    let total: f64 = per.iter().map(|p| p.1).sum();
    let threads: Vec<String> = per.iter().map(|(n, us)| format!("{n} {:.2}", us)).collect();
    eprintln!(
        "{label}: rsyslogd CPU {total:.2} µs/message over {msgs} messages (threads: {})",
        threads.join(", ")
    );
}

/// CPU time of the calling thread (user + system) in µs
/// (`getrusage(RUSAGE_THREAD)`).
fn own_cpu_us() -> u64 {
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one rusage through the valid pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) } != 0 {
        return 0;
    }
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    us(u.ru_utime) + us(u.ru_stime)
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
    let mut g = c.benchmark_group("sink_syslog_messages");
    g.sampling_mode(SamplingMode::Flat);
    for (conf, module, outputs) in [
        ("stock", "imtcp", STOCK),
        ("tuned", "imtcp", TUNED),
        ("tuned_imptcp", "imptcp", TUNED),
    ] {
        let Some(r) = Rsyslog::start(module, outputs) else {
            return;
        };
        for (shape, template) in [("120B", true), ("350B", false)] {
            let (batch, lines) = syslog_batch(template);
            eprintln!(
                "{conf} {shape}: {lines} messages per batch, mean {:.1} B with header",
                batch.len() as f64 / lines as f64
            );
            g.throughput(Throughput::Elements((lines * BATCHES) as u64));
            let tcp = SocketAddr::from(([127, 0, 0, 1], r.tcp));
            let mut sink =
                SyslogSink::new(SyslogSinkOptions::new(SyslogTransport::Tcp(tcp))).unwrap();
            // rsyslogd writes each message raw plus "\n": the octet-count
            // prefix is gone, the batch's newline stays.
            let expect = (batch.len() * BATCHES) as u64;
            let mut msgs = 0u64;
            let before = thread_ticks(r.child.id());
            let own0 = own_cpu_us();
            g.bench_function(format!("tcp_{conf}_{shape}_received"), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        r.truncate();
                        let t0 = Instant::now();
                        for _ in 0..BATCHES {
                            while sink.write_batch(&batch).is_err() {
                                std::thread::sleep(Duration::from_millis(1));
                            }
                        }
                        let got = r.wait_len(expect, Duration::from_secs(30));
                        total += t0.elapsed();
                        assert_eq!(got, expect, "rsyslogd wrote {got} of {expect} bytes");
                        msgs += (lines * BATCHES) as u64;
                    }
                    total
                })
            });
            eprintln!(
                "tcp_{conf}_{shape}: SyslogSink (sending thread) CPU {:.3} µs/message",
                (own_cpu_us() - own0) as f64 / msgs.max(1) as f64
            );
            report_cpu(
                &format!("tcp_{conf}_{shape}"),
                &before,
                &thread_ticks(r.child.id()),
                msgs,
            );
            sink.close().unwrap();
        }
        if conf == "tuned" {
            udp(&mut g, &r);
        }
        r.truncate();
    }
    g.finish();
}

/// UDP sends of ~120-byte template messages (timed: the send rate), then
/// one untimed run of the same size that counts what rsyslogd received.
fn udp(g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>, r: &Rsyslog) {
    let (batch, lines) = syslog_batch(true);
    g.throughput(Throughput::Elements((lines * BATCHES) as u64));
    let udp = SocketAddr::from(([127, 0, 0, 1], r.udp));
    let mut sink = SyslogSink::new(SyslogSinkOptions::new(SyslogTransport::Udp(udp))).unwrap();
    let send = |sink: &mut SyslogSink| {
        for _ in 0..BATCHES {
            while sink.write_batch(&batch).is_err() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    };
    g.bench_function("udp_tuned_120B_send", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                r.wait_len(u64::MAX, Duration::from_millis(50));
                r.truncate();
                let t0 = Instant::now();
                send(&mut sink);
                total += t0.elapsed();
            }
            total
        })
    });
    r.wait_len(u64::MAX, Duration::from_millis(500));
    r.truncate();
    send(&mut sink);
    let sent = (batch.len() * BATCHES) as u64;
    let got = r.wait_len(sent, Duration::from_secs(2));
    eprintln!(
        "udp: rsyslogd received {:.1}% of {sent} bytes sent in one untimed run",
        100.0 * got as f64 / sent as f64
    );
    sink.close().unwrap();
}

criterion_group! {
    name = benches;
    config = criterion_config(Duration::from_millis(500), Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
