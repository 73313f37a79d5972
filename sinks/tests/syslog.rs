//! Syslog sink against a real rsyslogd (Debian's packages rsyslog and
//! rsyslog-relp, installed by scripts/setup.sh), started by each test on
//! 127.0.0.1 with a throwaway configuration that writes every received
//! message, raw, to a file. RELP messages go through a ruleset with a
//! direct queue, so imrelp answers `rsp 200` only after the message is in
//! the file.

mod common;

use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use dplog_core::{Accepted, Formatter, HasSchema, Logger, LoggerConfig, Progress, Sink};
use dplog_formatters::{Format, FormatSpec};
use dplog_schema_nat::Nat44SessionRecord;
use dplog_sinks::{SyslogCounters, SyslogSink, SyslogSinkOptions, SyslogTransport};

const RSYSLOGD: &str = "/usr/sbin/rsyslogd";
const IMRELP: &str = "/usr/lib/x86_64-linux-gnu/rsyslog/imrelp.so";

struct Rsyslog {
    dir: tempfile::TempDir,
    child: Option<Child>,
    udp: u16,
    tcp: u16,
    relp: u16,
}

impl Rsyslog {
    /// Starts rsyslogd, or returns None (with a message) if it is not
    /// installed.
    fn start() -> Option<Self> {
        let mut r = Self::stopped()?;
        r.spawn();
        Some(r)
    }

    /// Ports and directory chosen, rsyslogd not started yet ([`spawn`]);
    /// None (with a message) if rsyslogd or imrelp is not installed.
    fn stopped() -> Option<Self> {
        if !Path::new(RSYSLOGD).exists() {
            eprintln!("SKIPPED: {RSYSLOGD} not installed (run scripts/setup.sh)");
            return None;
        }
        if !Path::new(IMRELP).exists() {
            eprintln!("SKIPPED: {IMRELP} not installed (rsyslog-relp; run scripts/setup.sh)");
            return None;
        }
        Some(Self {
            dir: tempfile::tempdir().unwrap(),
            child: None,
            udp: dplog_testkit::free_udp_port(),
            tcp: dplog_testkit::free_tcp_port(),
            relp: dplog_testkit::free_tcp_port(),
        })
    }

    fn relp_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.relp))
    }

    /// SIGKILL (no chance to flush or answer anything more) and wait.
    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) on the pid of a child we spawned and have not
            // reaped yet.
            unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
            let _ = c.wait();
        }
    }

    /// SIGSTOP: the process stops reading and answering; its kernel still
    /// accepts TCP data up to the socket buffers.
    /// SIGSTOP, then waits until every thread of rsyslogd is stopped:
    /// kill(2) returns before a thread running on another CPU has
    /// stopped, and such a thread could still read and write a record
    /// sent after this returns.
    fn freeze(&self) {
        if let Some(c) = &self.child {
            // SAFETY: kill(2) on the pid of our unreaped child.
            unsafe { libc::kill(c.id() as i32, libc::SIGSTOP) };
            let tasks = format!("/proc/{}/task", c.id());
            let stopped = || {
                std::fs::read_dir(&tasks).is_ok_and(|d| {
                    d.flatten().all(|t| {
                        // The state follows the command name's ')'.
                        std::fs::read_to_string(t.path().join("stat")).is_ok_and(|st| {
                            st.rsplit_once(')')
                                .and_then(|(_, rest)| rest.trim_start().chars().next())
                                .is_some_and(|c| c == 'T' || c == 't')
                        })
                    })
                })
            };
            let t0 = Instant::now();
            while !stopped() {
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "rsyslogd not stopped 10 s after SIGSTOP"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    fn dgram_sock(&self) -> PathBuf {
        self.dir.path().join("dgram.sock")
    }
    fn stream_sock(&self) -> PathBuf {
        self.dir.path().join("stream.sock")
    }
    fn out(&self) -> PathBuf {
        self.dir.path().join("out.log")
    }
    fn udp_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.udp))
    }
    fn tcp_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.tcp))
    }

    fn spawn(&mut self) {
        let d = self.dir.path().display();
        let conf = format!(
            r#"global(workDirectory="{d}" maxMessageSize="64k")
module(load="imudp")
module(load="imtcp")
module(load="imptcp")
module(load="imuxsock" SysSock.Use="off")
module(load="imrelp")
input(type="imudp" address="127.0.0.1" port="{udp}" rcvbufSize="8m")
input(type="imtcp" address="127.0.0.1" port="{tcp}")
input(type="imptcp" path="{stream}" unlink="on")
input(type="imuxsock" Socket="{dgram}" RateLimit.Interval="0" UseSysTimeStamp="on")
template(name="raw" type="string" string="%rawmsg%\n")
action(type="omfile" file="{out}" template="raw" flushOnTXEnd="on" asyncWriting="off")
ruleset(name="relp" queue.type="Direct") {{
  action(type="omfile" file="{out}" template="raw" flushOnTXEnd="on" asyncWriting="off")
}}
input(type="imrelp" address="127.0.0.1" port="{relp}" ruleset="relp")
"#,
            udp = self.udp,
            tcp = self.tcp,
            relp = self.relp,
            stream = self.stream_sock().display(),
            dgram = self.dgram_sock().display(),
            out = self.out().display(),
        );
        let conf_path = self.dir.path().join("rsyslog.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let child = Command::new(RSYSLOGD)
            .arg("-n")
            .arg("-f")
            .arg(&conf_path)
            .arg("-i")
            .arg(self.dir.path().join("rsyslogd.pid"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn rsyslogd");
        self.child = Some(child);
        // Ready when both TCP ports listen, the UDP port is bound and both
        // sockets exist. Listening, not merely connectable: a connect
        // before rsyslogd binds could reach another socket, or the client
        // itself.
        let t0 = Instant::now();
        loop {
            // Listening by this rsyslogd, not another process that took
            // a port meanwhile.
            let pid = self.child.as_ref().unwrap().id();
            let net_up = dplog_testkit::tcp_listener_is(self.tcp, pid) == Some(true)
                && dplog_testkit::tcp_listener_is(self.relp, pid) == Some(true)
                && dplog_testkit::udp_rx_queue(self.udp).is_some();
            if net_up && self.stream_sock().exists() && self.dgram_sock().exists() {
                break;
            }
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                let mut err = String::new();
                use std::io::Read;
                let _ = self
                    .child
                    .as_mut()
                    .unwrap()
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err);
                panic!("rsyslogd exited ({st}): {err}");
            }
            assert!(t0.elapsed() < Duration::from_secs(15), "rsyslogd not ready");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until `out.log` contains `needle` (or 15 s), then a little
    /// longer for stragglers; returns its bytes.
    fn wait_contains(&self, needle: &str) -> Vec<u8> {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(15) {
            let body = std::fs::read(self.out()).unwrap_or_default();
            if memchr::memmem::find(&body, needle.as_bytes()).is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(100));
        std::fs::read(self.out()).unwrap_or_default()
    }

    /// SIGTERM (after SIGCONT, in case it is frozen) and wait.
    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) on the pid of a child we spawned and have not
            // reaped yet.
            unsafe {
                libc::kill(c.id() as i32, libc::SIGCONT);
                libc::kill(c.id() as i32, libc::SIGTERM);
            }
            let _ = c.wait();
        }
    }

    fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Waits until `out.log` holds `n` lines (or 15 s), returns its bytes.
    fn wait_lines(&self, n: u64) -> Vec<u8> {
        let t0 = Instant::now();
        loop {
            let body = std::fs::read(self.out()).unwrap_or_default();
            let lines = body.iter().filter(|&&b| b == b'\n').count() as u64;
            if lines >= n || t0.elapsed() > Duration::from_secs(15) {
                // A little longer, to catch duplicates arriving late.
                std::thread::sleep(Duration::from_millis(50));
                return std::fs::read(self.out()).unwrap_or_default();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Rsyslog {
    fn drop(&mut self) {
        self.stop();
    }
}

fn sink(t: SyslogTransport) -> SyslogSink {
    SyslogSink::new(SyslogSinkOptions::new(t)).unwrap()
}

fn compliance_over(t: impl Fn(&Rsyslog) -> SyslogTransport) {
    let Some(r) = Rsyslog::start() else { return };
    let dead = SocketAddr::from(([127, 0, 0, 1], dplog_testkit::free_tcp_port()));
    compliance_with(
        || sink(t(&r)),
        |n| r.wait_lines(n),
        Some(Box::new(move || sink(SyslogTransport::Tcp(dead)))),
        true,
    );
}

#[test]
fn compliance_udp() {
    compliance_over(|r| SyslogTransport::Udp(r.udp_addr()));
}

#[test]
fn compliance_tcp_octet_counting() {
    compliance_over(|r| SyslogTransport::Tcp(r.tcp_addr()));
}

#[test]
fn compliance_unix_datagram() {
    compliance_over(|r| SyslogTransport::UnixDatagram(r.dgram_sock()));
}

#[test]
fn compliance_unix_stream() {
    compliance_over(|r| SyslogTransport::UnixStream(r.stream_sock()));
}

/// The formatters' RFC 5424 messages arrive byte for byte.
#[test]
fn rfc5424_messages_from_the_formatters_arrive_intact_over_tcp() {
    let Some(r) = Rsyslog::start() else { return };
    let recs: Vec<Nat44SessionRecord> = (0..500u64)
        .map(|i| Nat44SessionRecord {
            timestamp_ns: 1_700_000_000_000_000_000 + i * 1_000_000,
            src_port: (i % 60000) as u16,
            nat_event: 4,
            ..Default::default()
        })
        .collect();
    let mut expect = Vec::new();
    let mut f = dplog_schema_nat::boxed_formatter(dplog_formatters::Format::Rfc5424);
    for rec in &recs {
        f.format(rec, &mut expect);
    }
    let logger = Logger::start(
        LoggerConfig::default(),
        dplog_schema_nat::boxed_formatter(dplog_formatters::Format::Rfc5424),
        sink(SyslogTransport::Tcp(r.tcp_addr())),
    )
    .unwrap();
    let mut p = logger.producer().unwrap();
    for rec in &recs {
        assert!(p.log(*rec));
    }
    drop(p);
    let s = logger.shutdown().unwrap();
    assert_eq!(s.written_records, 500);
    let got = r.wait_lines(500);
    assert!(expect.starts_with(b"<134>1 "), "{:?}", &expect[..20]);
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&expect)
    );
}

/// The formatters' RFC 3164 messages arrive byte for byte over UDP.
#[test]
fn rfc3164_messages_from_the_formatters_arrive_intact_over_udp() {
    let Some(r) = Rsyslog::start() else { return };
    let recs: Vec<Nat44SessionRecord> = (0..300u64)
        .map(|i| Nat44SessionRecord {
            timestamp_ns: 1_700_000_000_000_000_000 + i * 1_000_000,
            src_port: i as u16,
            nat_event: 5,
            ..Default::default()
        })
        .collect();
    let mut expect = Vec::new();
    let mut f = dplog_schema_nat::boxed_formatter(dplog_formatters::Format::Rfc3164);
    for rec in &recs {
        f.format(rec, &mut expect);
    }
    let logger = Logger::start(
        LoggerConfig::default(),
        dplog_schema_nat::boxed_formatter(dplog_formatters::Format::Rfc3164),
        sink(SyslogTransport::Udp(r.udp_addr())),
    )
    .unwrap();
    let mut p = logger.producer().unwrap();
    for rec in &recs {
        assert!(p.log(*rec));
    }
    drop(p);
    assert_eq!(logger.shutdown().unwrap().written_records, 300);
    let got = r.wait_lines(300);
    assert!(expect.starts_with(b"<134>"), "{:?}", &expect[..20]);
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&expect)
    );
}

#[test]
fn udp_size_limit_covers_the_whole_datagram() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut o = SyslogSinkOptions::new(SyslogTransport::Udp(rx.local_addr().unwrap()));
    o.max_datagram_bytes = 64;
    let mut s = SyslogSink::new(o).unwrap();
    // Failure diagnostics name the sink by transport and address.
    assert_eq!(
        s.describe(),
        format!("syslog udp {}", rx.local_addr().unwrap())
    );
    let c = s.counters();
    // 64 bytes fit (header + body together); 65 do not and are refused
    // whole, never cut.
    let fits = format!("{RFC5424_PREFIX}{}", "f".repeat(64 - RFC5424_PREFIX.len()));
    let long = format!("{RFC5424_PREFIX}{}", "y".repeat(65 - RFC5424_PREFIX.len()));
    let short = format!("{RFC5424_PREFIX}short");
    let ok = s.write_batch(format!("{short}\n{fits}\n").as_bytes());
    assert_eq!(ok.unwrap(), Accepted::Delivered);
    assert_eq!(s.poll(), Progress::default());
    let batch = format!("{short}\n{long}\n{fits}\n");
    assert_eq!(s.write_batch(batch.as_bytes()).unwrap(), Accepted::Pending);
    assert_eq!(
        s.poll(),
        Progress {
            delivered_records: 2,
            delivered_bytes: (short.len() + fits.len() + 2) as u64,
            failed_records: 1,
        }
    );
    assert_eq!(s.poll(), Progress::default());
    let mut buf = [0u8; 1024];
    for want in [&short, &fits, &short, &fits] {
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], want.as_bytes());
    }
    rx.set_nonblocking(true).unwrap();
    assert!(rx.recv(&mut buf).is_err(), "nothing else was sent");
    assert_eq!(SyslogCounters::get(&c.too_large), 1);
    assert_eq!(SyslogCounters::get(&c.messages), 4);
    let mut bad = SyslogSinkOptions::new(SyslogTransport::Udp(rx.local_addr().unwrap()));
    bad.max_datagram_bytes = 70_000;
    assert!(SyslogSink::new(bad).is_err());
}

/// rsyslogd is restarted in the middle of the stream: the sink notices,
/// reconnects with backoff, and every record arrives exactly once.
#[test]
fn tcp_survives_an_rsyslogd_restart() {
    let Some(mut r) = Rsyslog::start() else {
        return;
    };
    let s = sink(SyslogTransport::Tcp(r.tcp_addr()));
    let c = s.counters();
    let logger = Logger::start(LoggerConfig::default(), SyslogSeqLine { line_len: 80 }, s).unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..2000 {
        assert!(p.log(rec(0, i)));
    }
    r.wait_lines(2000);
    r.restart();
    for i in 2000..4000 {
        assert!(p.log(rec(0, i)));
    }
    drop(p);
    let st = logger.shutdown().unwrap();
    assert_eq!(st.written_records, 4000, "{st:?}");
    // Both rsyslogd runs appended to the same file.
    let got = parse_lines(&r.wait_lines(4000));
    assert_complete_and_ordered(&got, 1, 4000);
    assert!(SyslogCounters::get(&c.disconnects) >= 1);
    assert!(SyslogCounters::get(&c.reconnects) >= 1);
}

/// A restart while records keep flowing: nothing torn, order kept, the
/// stream resumes. The sink replays the tail its TCP connection had not
/// had acknowledged, so records rsyslogd had already read arrive twice
/// (each duplicate must be a replayed record). What rsyslogd's kernel had
/// acknowledged but rsyslogd itself had not yet written when it stopped
/// is lost, and no sender can see that over plain TCP syslog (RFC 6587;
/// RELP exists for this): at most one contiguous gap, at the restart, and
/// it is reported. Everything before and after it arrives in order.
#[test]
fn tcp_restart_under_load_keeps_order_and_recovers() {
    let Some(mut r) = Rsyslog::start() else {
        return;
    };
    let s = sink(SyslogTransport::Tcp(r.tcp_addr()));
    let c = s.counters();
    let logger = Logger::start(LoggerConfig::default(), SyslogSeqLine { line_len: 80 }, s).unwrap();
    let mut p = logger.producer().unwrap();
    const N: u64 = 20_000;
    let w = std::thread::spawn(move || {
        for i in 0..N {
            assert!(p.log(rec(0, i)));
            if i % 100 == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
    std::thread::sleep(Duration::from_millis(50));
    r.restart();
    w.join().unwrap();
    let st = logger.shutdown().unwrap();
    assert_eq!(st.written_records, N);
    let got = parse_lines(&r.wait_contains(&format!("s{:010}", N - 1)));
    let mut next = 0u64;
    let mut duplicates = 0u64;
    let mut gaps = Vec::new();
    for &(p, s) in &got {
        assert_eq!(p, 0);
        if s < next {
            duplicates += 1; // a replayed record rsyslogd had already read
        } else {
            if s != next {
                gaps.push((next, s - next));
            }
            next = s + 1;
        }
    }
    assert_eq!(next, N, "the last record arrived");
    assert!(gaps.len() <= 1, "records lost in several places: {gaps:?}");
    let lost: u64 = gaps.iter().map(|g| g.1).sum();
    assert!(
        lost <= N / 10,
        "{lost} records lost at the restart: {gaps:?}"
    );
    let replayed = SyslogCounters::get(&c.replayed_frames);
    eprintln!(
        "restart under load: {duplicates} duplicates, {lost} lost in rsyslogd {gaps:?}; disconnects {}, reconnects {}, replayed {replayed} frames / {} bytes, resets {}",
        SyslogCounters::get(&c.disconnects),
        SyslogCounters::get(&c.reconnects),
        SyslogCounters::get(&c.replayed_bytes),
        SyslogCounters::get(&c.resets)
    );
    assert!(
        duplicates <= replayed,
        "{duplicates} duplicates but only {replayed} frames replayed"
    );
}

/// Waits (up to 60 s, polling) until `cond` holds; panics naming `what`.
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < Duration::from_secs(60), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Lines of 100 bytes, except every fourth record's (seq % 4 == 3), of
/// 300: above a 200-byte datagram limit.
struct MixedLen;

impl Formatter<Nat44SessionRecord> for MixedLen {
    fn format(&mut self, r: &Nat44SessionRecord, out: &mut Vec<u8>) {
        let line_len = if r.timestamp_ns % 4 == 3 { 300 } else { 100 };
        SyslogSeqLine { line_len }.format(r, out);
    }
}

/// A message larger than `max_datagram_bytes` is refused whole and its
/// record counted dropped: rsyslogd stores exactly the records counted
/// written, each whole, none cut.
#[test]
fn udp_records_too_large_for_a_datagram_are_dropped_whole_never_cut() {
    let Some(r) = Rsyslog::start() else { return };
    let mut o = SyslogSinkOptions::new(SyslogTransport::Udp(r.udp_addr()));
    o.max_datagram_bytes = 200;
    let s = SyslogSink::new(o).unwrap();
    let c = s.counters();
    let logger = Logger::start(LoggerConfig::default(), MixedLen, s).unwrap();
    let named = logger
        .sink_counters()
        .expect("the syslog sink names its counters");
    let mut p = logger.producer().unwrap();
    const N: u64 = 400;
    for i in 0..N {
        assert!(p.log(rec(0, i)));
    }
    drop(p);
    let st = logger.shutdown().unwrap();
    let named = named.named();
    assert!(
        named.contains(&("syslog.too_large".into(), 100)),
        "{named:?}"
    );
    assert!(
        named.contains(&("syslog.messages".into(), 300)),
        "{named:?}"
    );
    assert_eq!(st.produced, N);
    assert_eq!(st.written_records, 300, "{st:?}");
    assert_eq!(st.dropped_sink, 100, "{st:?}");
    assert_eq!(st.dropped_shutdown, 0, "{st:?}");
    assert_eq!(st.in_flight(), 0);
    assert_eq!(st.sink_pending, 0);
    assert_eq!(st.written_bytes, 300 * 100);
    assert_eq!(SyslogCounters::get(&c.too_large), 100);
    assert_eq!(SyslogCounters::get(&c.messages), 300);
    let body = r.wait_lines(300);
    let lines: Vec<&[u8]> = body
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    assert!(
        lines.iter().all(|l| l.len() == 99),
        "a stored message is not whole: {:?}",
        lines
            .iter()
            .find(|l| l.len() != 99)
            .map(|l| String::from_utf8_lossy(l))
    );
    let want: Vec<(u16, u64)> = (0..N).filter(|i| i % 4 != 3).map(|i| (0, i)).collect();
    assert_eq!(parse_lines(&body), want);
}

/// The `hitSeq` of each `aclHit` line of `body` (rfc5424 format), in
/// order; panics on a line without one.
fn hit_seqs(body: &[u8]) -> Vec<u32> {
    let text = std::str::from_utf8(body).expect("UTF-8");
    text.lines()
        .map(|l| {
            let v = l.split_once("hitSeq=\"").expect(l).1;
            v[..v.find('"').expect(l)].parse().expect(l)
        })
        .collect()
}

/// No receiver at first: each datagram the receiver's host refused (ICMP
/// port unreachable) is sent again once rsyslogd is up, never counted
/// written before, whether the refusal was reported by the socket's next
/// send (a batch of many records) or by `SO_ERROR` after the batch's last
/// datagram (a batch of one record, while rsyslogd is stopped again):
/// rsyslogd then holds exactly the records counted written, all of them,
/// once each. A user's record type (not NAT), formatted by the rfc5424
/// format.
#[test]
fn udp_datagrams_refused_before_the_receiver_is_up_are_sent_again_not_counted_written() {
    let Some(mut r) = Rsyslog::stopped() else {
        return;
    };
    const N: u32 = 400;
    let s = sink(SyslogTransport::Udp(r.udp_addr()));
    let c = s.counters();
    let cfg = LoggerConfig {
        ring_capacity: 1024,
        shutdown_timeout_ms: 60_000,
        ..LoggerConfig::default()
    };
    let f = FormatSpec {
        kind: Format::Rfc5424,
        ..FormatSpec::default()
    }
    .formatter(&[AclHit::schema()])
    .unwrap();
    let logger = Logger::start(cfg, f, s).unwrap();
    let named = logger
        .sink_counters()
        .expect("the syslog sink names its counters");
    let mut p = logger.producer().unwrap();
    let get = SyslogCounters::get;
    // 1. Many records, nobody listening: refused, then retried on a new
    //    socket, ten times (about a second of backoff).
    for i in 0..N - 1 {
        assert!(p.log(acl_hit(i)));
    }
    wait_until("ten reconnects", || get(&c.reconnects) >= 10);
    let st = logger.stats();
    assert_eq!(st.written_records, 0, "nobody listens yet: {st:?}");
    r.spawn();
    wait_until("all but one written", || {
        logger.stats().written_records == u64::from(N - 1)
    });
    // 2. rsyslogd stopped (once it has stored them all: a datagram it had
    //    not read yet would go with it), one record: a batch whose only
    //    datagram is refused, seen by `SO_ERROR` after it; rsyslogd
    //    started again.
    let stored = hit_seqs(&r.wait_lines(u64::from(N - 1))).len();
    assert_eq!(
        stored as u64,
        u64::from(N - 1),
        "rsyslogd holds {stored} of {} records counted written",
        N - 1
    );
    r.stop();
    let before = get(&c.reconnects);
    assert!(p.log(acl_hit(N - 1)));
    wait_until(
        "three more reconnects, or the record counted written",
        || get(&c.reconnects) >= before + 3 || logger.stats().written_records == u64::from(N),
    );
    let st = logger.stats();
    assert_eq!(
        st.written_records,
        u64::from(N - 1),
        "nobody listens: {st:?}"
    );
    r.spawn();
    drop(p);
    let st = logger.shutdown().unwrap();
    assert_eq!(st.produced, u64::from(N));
    assert_eq!(st.written_records, u64::from(N), "{st:?}");
    assert_eq!(st.dropped_sink + st.dropped_shutdown, 0, "{st:?}");
    assert_eq!(st.in_flight(), 0);
    assert_eq!(st.sink_pending, 0);
    let got = hit_seqs(&r.wait_lines(u64::from(N)));
    assert_eq!(
        got.len() as u64,
        st.written_records,
        "rsyslogd holds {} of {} records counted written",
        got.len(),
        st.written_records
    );
    assert_eq!(got, (0..N).collect::<Vec<_>>(), "each once, in order");
    // Every refusal taken back and sent again on a new socket: one
    // reconnect and one retry each, none reported too late to take back.
    let named = named.named();
    let n = |k: &str| {
        named
            .iter()
            .find(|(name, _)| name == k)
            .unwrap_or_else(|| panic!("{k} in {named:?}"))
            .1
    };
    let refused = n("syslog.refused");
    assert!(refused >= 13, "{named:?}");
    assert_eq!(n("syslog.refused_late"), 0, "{named:?}");
    assert_eq!(n("syslog.reconnects"), refused, "{named:?}");
    assert_eq!(n("syslog.disconnects"), refused, "{named:?}");
    assert_eq!(st.sink_retries, refused, "{st:?} {named:?}");
    // First sends only: each message once.
    assert_eq!(n("syslog.messages"), u64::from(N), "{named:?}");
}

/// Logs `n` user-declared records (`aclHit`, rfc5424) in one batch to
/// `s`, whose retries the runtime gives up on after 300 ms; `cut` runs
/// once they are logged and returns, once the runtime has given up on the
/// batch or written it whole, the datagrams the receiver holds. Returns
/// the logger's final stats, the sink's named counters and those
/// datagrams.
fn one_dgram_batch(
    s: SyslogSink,
    n: u32,
    cut: impl FnOnce(&Logger<AclHit>) -> Vec<Vec<u8>>,
) -> (dplog_core::Stats, Vec<(String, u64)>, Vec<Vec<u8>>) {
    let cfg = LoggerConfig {
        ring_capacity: 1024,
        // One batch of all `n` records: they become visible at one flush.
        publish_every: 4096,
        batch_bytes: 1 << 20,
        sink_retry_timeout_ms: Some(300),
        shutdown_timeout_ms: 60_000,
        drop_reports: false,
        ..LoggerConfig::default()
    };
    let f = FormatSpec {
        kind: Format::Rfc5424,
        ..FormatSpec::default()
    }
    .formatter(&[AclHit::schema()])
    .unwrap();
    let logger = Logger::start(cfg, f, s).unwrap();
    let named = logger
        .sink_counters()
        .expect("the syslog sink names its counters");
    let mut p = logger.producer().unwrap();
    for i in 0..n {
        assert!(p.log(acl_hit(i)));
    }
    p.flush();
    let held = cut(&logger);
    drop(p);
    let st = match logger.shutdown() {
        Ok(st) => st,
        Err((st, _)) => st,
    };
    (st, named.named(), held)
}

/// Checks a datagram batch of `n` records the runtime gave up on after
/// the receiver took its first `held.len()` datagrams: those, each once
/// and in order, are exactly the records counted written (and their
/// lines the bytes), the rest `dropped_sink`.
fn assert_kept_exact(st: &dplog_core::Stats, named: &[(String, u64)], held: &[Vec<u8>], n: u32) {
    let mut body = held.join(&b'\n');
    body.push(b'\n');
    let got = if held.is_empty() {
        Vec::new()
    } else {
        hit_seqs(&body)
    };
    let k = got.len() as u64;
    assert!(
        k > 0 && k < u64::from(n),
        "held {k} of {n}: not cut mid-batch"
    );
    assert_eq!(
        got,
        (0..k as u32).collect::<Vec<_>>(),
        "each once, in order"
    );
    assert_eq!(st.produced, u64::from(n), "{st:?}");
    assert_eq!(
        st.written_records, k,
        "the receiver holds {k} records, counted written: {st:?}"
    );
    assert_eq!(st.dropped_sink, u64::from(n) - k, "{st:?}");
    assert_eq!(st.dropped_shutdown + st.dropped(), 0, "{st:?}");
    assert_eq!(st.in_flight(), 0, "{st:?}");
    assert_eq!(st.sink_pending, 0, "{st:?}");
    // Each datagram is its line without the newline.
    let bytes: u64 = held.iter().map(|d| d.len() as u64 + 1).sum();
    assert_eq!(st.written_bytes, bytes, "{st:?}");
    // First sends handed to the kernel: the datagrams held (for UDP, a
    // refused one sent first counts too, once).
    let messages = named
        .iter()
        .find(|(name, _)| name == "syslog.messages")
        .expect("syslog.messages")
        .1;
    assert!(messages >= k, "{named:?}");
}

/// UDP: the receiver takes the first datagrams of a batch, then refuses
/// the rest (its socket connects elsewhere: the kernel answers the sink's
/// datagrams with ICMP port unreachable, and keeps those it had queued,
/// which the receiver reads) until the runtime gives up on the batch
/// (`sink_retry_timeout_ms`). The receiver holds exactly the records
/// counted written; the others count `dropped_sink`. Where the cut falls
/// depends on when the receiver's thread runs: a run whose batch was
/// written whole before it is tried again (the counts are exact either
/// way). The batch fits in the receiver's socket buffer, so the receiver
/// drops none unseen (checked).
#[test]
fn udp_datagrams_delivered_of_a_batch_given_up_on_count_written() {
    const N: u32 = 100;
    for attempt in 1..=20 {
        // Below the ephemeral range: not the sink's own port.
        let port = dplog_testkit::free_udp_port();
        let rx = UdpSocket::bind(("127.0.0.1", port)).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let s = sink(SyslogTransport::Udp(rx.local_addr().unwrap()));
        let (st, named, held) = one_dgram_batch(s, N, |logger| {
            let mut buf = vec![0u8; 65_536];
            let len = rx.recv(&mut buf).expect("the batch's first datagram");
            // From now on only datagrams from 127.0.0.1:9 are taken: the
            // sink's are refused.
            rx.connect(("127.0.0.1", 9)).unwrap();
            let mut held = vec![buf[..len].to_vec()];
            wait_until("the batch written or given up on", || {
                let st = logger.stats();
                st.written_records + st.dropped_sink == u64::from(N)
            });
            rx.set_nonblocking(true).unwrap();
            loop {
                match rx.recv(&mut buf) {
                    Ok(len) => held.push(buf[..len].to_vec()),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => panic!("receive: {e}"),
                }
            }
            let drops = udp_drops(port);
            assert_eq!(drops, 0, "the receiver's socket dropped {drops} datagrams");
            held
        });
        if held.len() == N as usize {
            assert_eq!(st.written_records, u64::from(N), "{st:?}");
            eprintln!("attempt {attempt}: the batch was sent whole before the cut; again");
            continue;
        }
        assert_kept_exact(&st, &named, &held, N);
        let n = |k: &str| named.iter().find(|(name, _)| name == k).unwrap().1;
        assert!(n("syslog.refused") >= 1, "{named:?}");
        assert_eq!(n("syslog.refused_late"), 0, "{named:?}");
        return;
    }
    panic!("in 20 runs the receiver never took part of the batch only");
}

/// Datagrams the UDP socket on 127.0.0.1:`port` dropped because its
/// receive buffer was full (`/proc/net/udp`, `drops`).
fn udp_drops(port: u16) -> u64 {
    let table = std::fs::read_to_string("/proc/net/udp").unwrap();
    let local = format!("0100007F:{port:04X}");
    table
        .lines()
        .skip(1)
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // sl, local_address, ..., pointer, drops: the 13th column.
            (f.get(1) == Some(&local.as_str())).then(|| f[12].parse().unwrap())
        })
        .expect("the receiver's socket in /proc/net/udp")
}

/// Unix datagram: the receiver reads one datagram, then nothing, so the
/// sink's `send(2)` waits once the receiver's queue is full, in the
/// middle of the batch; the receiver shuts down its reading side (its queue stays
/// readable, every later datagram is refused with EPIPE) and the runtime
/// gives up on the batch (`sink_retry_timeout_ms`). The receiver holds
/// exactly the records counted written; the others count `dropped_sink`.
#[test]
fn unix_datagrams_delivered_of_a_batch_given_up_on_count_written() {
    use std::os::unix::net::UnixDatagram;
    const N: u32 = 100;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dgram.sock");
    let rx = UnixDatagram::bind(&path).unwrap();
    let s = sink(SyslogTransport::UnixDatagram(path));
    let (st, named, held) = one_dgram_batch(s, N, |logger| {
        let mut buf = vec![0u8; 65_536];
        rx.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let len = rx.recv(&mut buf).expect("the batch's first datagram");
        let mut held = vec![buf[..len].to_vec()];
        rx.shutdown(std::net::Shutdown::Read).unwrap();
        rx.set_nonblocking(true).unwrap();
        // If the sink's send(2) waits for room in the queue, taking one
        // wakes it; it then finds the reading side shut.
        if let Ok(len) = rx.recv(&mut buf) {
            held.push(buf[..len].to_vec());
        }
        wait_until("the batch given up on", || logger.stats().dropped_sink > 0);
        loop {
            match rx.recv(&mut buf) {
                Ok(0) => break,
                Ok(len) => held.push(buf[..len].to_vec()),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("receive: {e}"),
            }
        }
        held
    });
    assert_kept_exact(&st, &named, &held, N);
    let n = |k: &str| named.iter().find(|(name, _)| name == k).unwrap().1;
    assert_eq!(n("syslog.messages"), held.len() as u64, "{named:?}");
}

/// Unix datagram: the receiver stops reading (a stalled journald), so its
/// queue fills and send(2) waits for room. The wait is bounded by
/// `io_timeout_ms`: the runtime gives up on the batch
/// (`sink_retry_timeout_ms`) instead of the consumer hanging for good, and
/// the datagrams the queue took are exactly the records counted written.
#[test]
fn unix_datagrams_to_a_receiver_that_stopped_reading_are_given_up_not_waited_on_forever() {
    use std::os::unix::net::UnixDatagram;
    const N: u32 = 100;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dgram.sock");
    let rx = UnixDatagram::bind(&path).unwrap();
    let mut o = SyslogSinkOptions::new(SyslogTransport::UnixDatagram(path));
    o.io_timeout_ms = 200;
    let s = SyslogSink::new(o).unwrap();
    let (st, named, held) = one_dgram_batch(s, N, |logger| {
        // Nothing read until the runtime has given up on the batch.
        wait_until("the batch given up on", || logger.stats().dropped_sink > 0);
        let mut buf = vec![0u8; 65_536];
        rx.set_nonblocking(true).unwrap();
        let mut held = Vec::new();
        loop {
            match rx.recv(&mut buf) {
                Ok(len) => held.push(buf[..len].to_vec()),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("receive: {e}"),
            }
        }
        held
    });
    assert_kept_exact(&st, &named, &held, N);
}

fn relp_sink(addr: SocketAddr, window: usize) -> SyslogSink {
    let mut o = SyslogSinkOptions::new(SyslogTransport::Relp(addr));
    o.relp_window = window;
    SyslogSink::new(o).unwrap()
}

/// Three producers over RELP: every record exactly once and in order,
/// counts exact; a receiver that is not there drops everything at the
/// shutdown deadline, nothing counted written.
#[test]
fn compliance_relp() {
    let Some(r) = Rsyslog::start() else { return };
    let dead = SocketAddr::from(([127, 0, 0, 1], dplog_testkit::free_tcp_port()));
    compliance_with(
        || relp_sink(r.relp_addr(), 128),
        |n| r.wait_lines(n),
        Some(Box::new(move || relp_sink(dead, 128))),
        true,
    );
}

/// Drop-report lines travel over RELP but are not counted as records.
#[test]
fn relp_drop_reports_are_not_counted_as_records() {
    let Some(r) = Rsyslog::start() else { return };
    let s = relp_sink(r.relp_addr(), 128);
    let c = s.counters();
    const N: u64 = 20_000;
    let st = run_dropping(s, N);
    assert_eq!(st.produced, N);
    assert!(st.dropped_full > 0 && st.drop_reports > 0, "{st:?}");
    assert_eq!(st.written_records + st.dropped_full, N, "{st:?}");
    assert_eq!(st.dropped_sink + st.dropped_shutdown, 0, "{st:?}");
    let lines = st.written_records + st.drop_reports;
    assert_eq!(SyslogCounters::get(&c.relp_acked), lines);
    let (records, reports, dropped) = split_reports(&r.wait_lines(lines));
    assert_eq!(reports, st.drop_reports);
    assert_eq!(dropped, st.dropped_full);
    assert_eq!(parse_lines(&records).len() as u64, st.written_records);
}

/// rsyslogd is frozen (SIGSTOP) with a full window of unanswered messages,
/// killed (SIGKILL), then restarted on the same port and file; see
/// [`relp_kill`].
#[test]
fn relp_receiver_frozen_then_killed_loses_nothing_acknowledged() {
    relp_kill(true);
}

/// rsyslogd is killed (SIGKILL) while records flow, then restarted on the
/// same port and file; see [`relp_kill`].
#[test]
fn relp_receiver_killed_mid_stream_loses_nothing_acknowledged() {
    relp_kill(false);
}

/// Every record counted written before the kill is in the file; after the
/// restart the sink resends the unacknowledged window, and in the end
/// every record is in the file at least once and counted written once;
/// duplicates are at most the window. `freeze`: stop rsyslogd first and
/// kill it once a full window is unanswered (so the resend is certain).
fn relp_kill(freeze: bool) {
    let Some(mut r) = Rsyslog::start() else {
        return;
    };
    const WINDOW: usize = 64;
    const N: u64 = 6000;
    let s = relp_sink(r.relp_addr(), WINDOW);
    let c = s.counters();
    let cfg = LoggerConfig {
        shutdown_timeout_ms: 60_000,
        ..LoggerConfig::default()
    };
    let logger = Logger::start(cfg, SyslogSeqLine { line_len: 80 }, s).unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..1000 {
        assert!(p.log(rec(0, i)));
    }
    wait_until("the first 1000 records acknowledged", || {
        logger.stats().written_records == 1000
    });
    if freeze {
        r.freeze();
    }
    let w = std::thread::spawn(move || {
        for i in 1000..N {
            assert!(p.log(rec(0, i)));
            if i % 20 == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
    let get = SyslogCounters::get;
    if freeze {
        wait_until("a full window unanswered", || {
            get(&c.messages) - get(&c.relp_acked) >= WINDOW as u64
        });
    } else {
        wait_until("2000 records in the file", || {
            let body = std::fs::read(r.out()).unwrap_or_default();
            body.iter().filter(|&&b| b == b'\n').count() >= 2000
        });
    }
    r.kill9();
    let acked = get(&c.relp_acked);
    let written = logger.stats().written_records;
    assert!(
        (1000..N).contains(&written) && written <= acked,
        "written {written}, acknowledged {acked}"
    );
    let in_file: std::collections::HashSet<u64> = parse_lines(&std::fs::read(r.out()).unwrap())
        .into_iter()
        .map(|(_, s)| s)
        .collect();
    let missing: Vec<u64> = (0..written).filter(|s| !in_file.contains(s)).collect();
    assert!(
        missing.is_empty(),
        "counted written but not in the file: {missing:?}"
    );
    let failures = get(&c.connect_failures);
    wait_until("a failed reconnect", || get(&c.connect_failures) > failures);
    r.spawn();
    w.join().unwrap();
    let st = logger.shutdown().unwrap();
    assert_eq!(st.produced, N);
    assert_eq!(st.written_records, N, "{st:?}");
    assert_eq!(st.dropped_sink + st.dropped_shutdown + st.dropped(), 0);
    assert_eq!(st.in_flight(), 0);
    assert_eq!(st.written_bytes, N * 80);
    assert_eq!(get(&c.relp_acked), N, "each record acknowledged once");
    let resent = get(&c.relp_resent);
    if freeze {
        assert!(resent >= WINDOW as u64, "resent {resent}");
    }
    let got = parse_lines(&r.wait_lines(N));
    let mut seen = vec![0u32; N as usize];
    for &(_, s) in &got {
        seen[s as usize] += 1;
    }
    let absent: Vec<usize> = (0..N as usize).filter(|&i| seen[i] == 0).collect();
    assert!(absent.is_empty(), "records never stored: {absent:?}");
    let duplicates = got.len() as u64 - N;
    eprintln!(
        "relp kill (freeze {freeze}): {written} written before the kill, {resent} resent, {duplicates} duplicates"
    );
    assert!(
        duplicates <= WINDOW as u64 && duplicates <= resent,
        "{duplicates} duplicates, window {WINDOW}, resent {resent}"
    );
}

/// No receiver at start: the sink retries with backoff, counts nothing
/// written, and delivers everything once rsyslogd comes up.
#[test]
fn relp_receiver_down_at_start_delivers_once_it_is_up() {
    let Some(mut r) = Rsyslog::stopped() else {
        return;
    };
    const N: u64 = 2000;
    let s = relp_sink(r.relp_addr(), 128);
    let c = s.counters();
    let cfg = LoggerConfig {
        ring_capacity: 4096,
        shutdown_timeout_ms: 60_000,
        ..LoggerConfig::default()
    };
    let logger = Logger::start(cfg, SyslogSeqLine { line_len: 80 }, s).unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..N {
        assert!(p.log(rec(0, i)));
    }
    let get = SyslogCounters::get;
    wait_until("three failed connects", || get(&c.connect_failures) >= 3);
    let st = logger.stats();
    assert_eq!(st.written_records, 0, "{st:?}");
    assert!(st.sink_retries >= 1, "{st:?}");
    r.spawn();
    drop(p);
    let st = logger.shutdown().unwrap();
    assert_eq!(st.written_records, N, "{st:?}");
    assert_eq!(st.dropped_sink + st.dropped_shutdown, 0, "{st:?}");
    assert_eq!(get(&c.relp_acked), N);
    assert_eq!(get(&c.messages), N);
    assert_eq!(get(&c.relp_resent), 0);
    assert_complete_and_ordered(&parse_lines(&r.wait_lines(N)), 1, N);
}

/// One RELP frame `TXNR SP CMD SP LEN [SP DATA] LF` at the start of `buf`:
/// `(bytes it took, txnr, command, data)`, or None while incomplete.
fn fake_relp_frame(buf: &[u8]) -> Option<(usize, u32, String, Vec<u8>)> {
    let sp1 = buf.iter().position(|&b| b == b' ')?;
    let sp2 = sp1 + 1 + buf[sp1 + 1..].iter().position(|&b| b == b' ')?;
    let len_end = sp2
        + 1
        + buf[sp2 + 1..]
            .iter()
            .position(|&b| b == b' ' || b == b'\n')?;
    let txnr: u32 = std::str::from_utf8(&buf[..sp1]).unwrap().parse().unwrap();
    let cmd = String::from_utf8(buf[sp1 + 1..sp2].to_vec()).unwrap();
    let len: usize = std::str::from_utf8(&buf[sp2 + 1..len_end])
        .unwrap()
        .parse()
        .unwrap();
    let (data, end) = if len == 0 {
        (Vec::new(), len_end)
    } else {
        let d = len_end + 1;
        (buf.get(d..d + len)?.to_vec(), d + len)
    };
    assert_eq!(*buf.get(end)?, b'\n', "frame ends with LF");
    Some((end + 1, txnr, cmd, data))
}

/// A RELP receiver for one connection: answers `open`, acknowledges
/// (`rsp 200`) the first `ack` `syslog` messages, then reads `more`
/// further ones without answering, closes its side and waits for the
/// sender to close; the listener is gone by then, so reconnects are
/// refused. Returns the acknowledged messages.
fn fake_relp_receiver(listener: TcpListener, ack: usize, more: usize) -> Vec<Vec<u8>> {
    use std::io::{Read, Write};
    let (mut s, _) = listener.accept().unwrap();
    drop(listener);
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let (mut rx, mut buf, mut acked, mut seen) = (Vec::new(), [0u8; 4096], Vec::new(), 0);
    while seen < ack + more {
        let n = s.read(&mut buf).expect("the sender keeps sending");
        assert!(n > 0, "sender closed after {seen} messages");
        rx.extend_from_slice(&buf[..n]);
        while let Some((used, txnr, cmd, data)) = fake_relp_frame(&rx) {
            rx.drain(..used);
            match cmd.as_str() {
                "open" => s
                    .write_all(format!("{txnr} rsp 6 200 OK\n").as_bytes())
                    .unwrap(),
                "syslog" => {
                    seen += 1;
                    if seen <= ack {
                        s.write_all(format!("{txnr} rsp 6 200 OK\n").as_bytes())
                            .unwrap();
                        acked.push(data);
                    }
                }
                other => panic!("unexpected command {other}"),
            }
        }
    }
    s.shutdown(std::net::Shutdown::Write).unwrap();
    // Until the sender drops the connection (or resets it).
    while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
    acked
}

/// The receiver acknowledges the first K messages of a batch, then stops
/// answering and goes away; the runtime gives up on the batch after
/// `sink_retry_timeout_ms`: exactly the K acknowledged records count
/// written (bytes too), the rest `dropped_sink`, none both.
#[test]
fn relp_acknowledged_part_of_a_batch_given_up_on_counts_written() {
    relp_partly_acknowledged(false);
}

/// As above, but no retry timeout: the shutdown deadline gives up on the
/// batch, and the rest counts `dropped_shutdown`.
#[test]
fn relp_acknowledged_part_of_a_batch_at_the_shutdown_deadline_counts_written() {
    relp_partly_acknowledged(true);
}

/// A fake receiver (the cut point must be exact) acknowledges the first K
/// of one batch of N records and goes away; `at_shutdown`: the runtime
/// gives up at the shutdown deadline instead of `sink_retry_timeout_ms`.
fn relp_partly_acknowledged(at_shutdown: bool) {
    const N: u64 = 1000;
    const K: usize = 300;
    const WINDOW: usize = 16;
    // Below the ephemeral range: once the receiver drops the listener, the
    // sink's reconnects are refused (an ephemeral port could be given to
    // the sink's own socket, which would then connect to itself).
    let listener = TcpListener::bind(("127.0.0.1", dplog_testkit::free_tcp_port())).unwrap();
    let addr = listener.local_addr().unwrap();
    let receiver = std::thread::spawn(move || fake_relp_receiver(listener, K, WINDOW));
    let s = relp_sink(addr, WINDOW);
    let c = s.counters();
    let cfg = LoggerConfig {
        // One batch of all N records: they become visible at one flush.
        publish_every: 4096,
        sink_retry_timeout_ms: if at_shutdown { None } else { Some(500) },
        shutdown_timeout_ms: if at_shutdown { 1000 } else { 60_000 },
        drop_reports: false,
        ..LoggerConfig::default()
    };
    let logger = Logger::start(cfg, SyslogSeqLine { line_len: 80 }, s).unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..N {
        assert!(p.log(rec(0, i)));
    }
    p.flush();
    let acked = receiver.join().unwrap();
    if !at_shutdown {
        wait_until("the batch given up on", || logger.stats().dropped_sink > 0);
    }
    drop(p);
    let (st, _) = logger.shutdown().expect_err("records were dropped");
    let get = SyslogCounters::get;
    assert_eq!(acked.len(), K);
    assert_eq!(get(&c.relp_acked), K as u64);
    assert_eq!(get(&c.messages), (K + WINDOW) as u64);
    let mut body = acked.join(&b'\n');
    body.push(b'\n');
    assert_complete_and_ordered(&parse_lines(&body), 1, K as u64);
    assert_eq!(st.produced, N);
    assert_eq!(st.written_records, K as u64, "{st:?}");
    assert_eq!(st.written_bytes, K as u64 * 80, "{st:?}");
    let (lost, other) = if at_shutdown {
        (st.dropped_shutdown, st.dropped_sink)
    } else {
        (st.dropped_sink, st.dropped_shutdown)
    };
    assert_eq!(lost, N - K as u64, "{st:?}");
    assert_eq!(other + st.dropped(), 0, "{st:?}");
    assert_eq!(st.in_flight(), 0, "{st:?}");
}

/// A TCP listener on 127.0.0.1 whose accepted sockets have a receive
/// buffer of `rcvbuf` bytes (set before `listen`, so the window is small
/// from the handshake on and a receiver that stops reading closes it
/// soon). Its port is below the ephemeral range, so once it is dropped a
/// reconnect is refused (never a connect of the sink's socket to itself).
fn listener_with_rcvbuf(rcvbuf: i32) -> TcpListener {
    use std::os::fd::FromRawFd;
    let port = dplog_testkit::free_tcp_port();
    // SAFETY: plain socket calls on a descriptor this function creates and
    // hands to TcpListener (which closes it); every pointer is to a live
    // stack value of the size passed.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let r = libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&rcvbuf as *const i32).cast(),
            4,
        );
        assert_eq!(r, 0, "SO_RCVBUF: {}", std::io::Error::last_os_error());
        // As std's TcpListener::bind (which free_tcp_port probes with):
        // a TIME_WAIT left on the port by an earlier run does not block it.
        let one: i32 = 1;
        let r = libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const i32).cast(),
            4,
        );
        assert_eq!(r, 0, "SO_REUSEADDR: {}", std::io::Error::last_os_error());
        let mut sa: libc::sockaddr_in = std::mem::zeroed();
        sa.sin_family = libc::AF_INET as libc::sa_family_t;
        sa.sin_addr.s_addr = u32::from_be_bytes([127, 0, 0, 1]).to_be();
        sa.sin_port = port.to_be();
        let r = libc::bind(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        assert_eq!(r, 0, "bind: {}", std::io::Error::last_os_error());
        assert_eq!(libc::listen(fd, 8), 0);
        TcpListener::from_raw_fd(fd)
    }
}

/// Bytes waiting in the receive queue of `s` (`ioctl(FIONREAD)`).
fn fionread(s: &TcpStream) -> usize {
    use std::os::fd::AsRawFd;
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the valid pointer; `s` is
    // open.
    let r = unsafe { libc::ioctl(s.as_raw_fd(), libc::FIONREAD, &mut n) };
    assert_eq!(r, 0);
    n as usize
}

/// Everything in the receive queue of `s`, left there (`MSG_PEEK`):
/// reading nothing, the receiver does not open its window.
fn peek_queue(s: &TcpStream) -> Vec<u8> {
    let mut buf = vec![0u8; fionread(s) + 1];
    let n = s.peek(&mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// Closes `s` abortively (`SO_LINGER` 0): a reset, and whatever its
/// receive queue holds is discarded, as when a receiver dies.
fn close_hard(s: TcpStream) {
    use std::os::fd::AsRawFd;
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt reads a live linger of the size passed; `s` is
    // open.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0);
    drop(s);
}

/// RFC 6587 octet-counting parser, strict: every frame is `LEN SP MSG`
/// with LEN a decimal without leading zero; anything else panics.
#[derive(Clone, Default)]
struct Octets {
    /// Bytes not yet parsed into a whole frame (a cut frame at the end).
    rest: Vec<u8>,
    /// Whole messages, in order.
    msgs: Vec<Vec<u8>>,
}

impl Octets {
    fn feed(&mut self, bytes: &[u8]) {
        self.rest.extend_from_slice(bytes);
        let mut at = 0;
        loop {
            let buf = &self.rest[at..];
            let Some(sp) = buf.iter().position(|&b| b == b' ') else {
                assert!(
                    buf.len() < 10 && buf.iter().all(u8::is_ascii_digit),
                    "not an octet-counted frame: {:?}",
                    String::from_utf8_lossy(&buf[..buf.len().min(40)])
                );
                break;
            };
            let len = &buf[..sp];
            assert!(
                !len.is_empty() && len[0] != b'0' && len.iter().all(u8::is_ascii_digit),
                "bad frame length {:?} at {:?}",
                String::from_utf8_lossy(len),
                String::from_utf8_lossy(&buf[..buf.len().min(40)])
            );
            let len: usize = std::str::from_utf8(len).unwrap().parse().unwrap();
            if buf.len() < sp + 1 + len {
                break;
            }
            self.msgs.push(buf[sp + 1..sp + 1 + len].to_vec());
            at += sp + 1 + len;
        }
        self.rest.drain(..at);
    }

    /// Sequence numbers of the whole messages (see `SyslogSeqLine`).
    fn seqs(&self) -> Vec<u64> {
        let mut body = self.msgs.join(&b'\n');
        body.push(b'\n');
        if self.msgs.is_empty() {
            return Vec::new();
        }
        parse_lines(&body).into_iter().map(|(_, s)| s).collect()
    }
}

/// Reads `s` until the sender closes it (or resets it), parsing frames.
fn read_to_end(mut s: TcpStream) -> Octets {
    use std::io::Read;
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut o = Octets::default();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => o.feed(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("receiver read: {e}"),
        }
    }
    o
}

/// `n` lines of `line_len` bytes for records `from..from + n`.
fn seq_batch(from: u64, n: u64, line_len: usize) -> Vec<u8> {
    let mut f = SyslogSeqLine { line_len };
    let mut out = Vec::new();
    for i in from..from + n {
        f.format(&rec(0, i), &mut out);
    }
    out
}

/// A receiver reads 1000 frames and stops reading: its window closes
/// while the sink's socket still holds frames; then it dies hard (a reset,
/// its unread queue discarded). Over TCP a frame counts written only once
/// the receiver's TCP acknowledged it, so the sink never counts more than
/// the receiver got, and the frames it never acknowledged go to a second
/// receiver; see [`tcp_receiver_dies`].
#[test]
fn tcp_counts_written_only_what_the_receiver_acknowledged_and_replays_the_rest() {
    tcp_receiver_dies(true);
}

/// As above, with no receiver after the first: the frames it never
/// acknowledged count `dropped_shutdown`, never written.
#[test]
fn tcp_frames_never_acknowledged_count_dropped_when_no_receiver_comes_back() {
    tcp_receiver_dies(false);
}

/// `second`: a second receiver accepts the reconnect and reads to the
/// end; otherwise the listener is gone and the stop's deadline comes.
fn tcp_receiver_dies(second: bool) {
    use std::io::Read;
    const N: u64 = 20_000;
    const LINE: usize = 100;
    let listener = listener_with_rcvbuf(32 << 10);
    let addr = listener.local_addr().unwrap();
    let mut o = SyslogSinkOptions::new(SyslogTransport::Tcp(addr));
    o.io_timeout_ms = 100;
    let s = SyslogSink::new(o).unwrap();
    let c = s.counters();
    let get = SyslogCounters::get;
    // The sink connected in `new`.
    let (mut r1, _) = listener.accept().unwrap();
    let listener = second.then_some(listener);
    let cfg = LoggerConfig {
        ring_capacity: 32 * 1024,
        shutdown_timeout_ms: if second { 60_000 } else { 500 },
        drop_reports: false,
        ..LoggerConfig::default()
    };
    let logger = Logger::start(cfg, SyslogSeqLine { line_len: LINE }, s).unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..N {
        assert!(p.log(rec(0, i)));
    }
    drop(p);
    let mut got = Octets::default();
    let mut buf = vec![0u8; 4096];
    while got.msgs.len() < 1000 {
        let n = r1.read(&mut buf).unwrap();
        assert!(n > 0, "the sink closed the connection");
        got.feed(&buf[..n]);
    }
    // Whole frames the receiver got: read, or in its queue.
    let got_now = |r: &TcpStream, got: &Octets| {
        let mut g = got.clone();
        g.feed(&peek_queue(r));
        g.msgs.len() as u64
    };
    // The receiver reads no more: written never exceeds what it got.
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(300) {
        let w = logger.stats().written_records;
        let g = got_now(&r1, &got);
        assert!(w <= g, "{w} counted written, the receiver got {g}");
        std::thread::sleep(Duration::from_millis(2));
    }
    wait_until("written catches up with what the receiver got", || {
        logger.stats().written_records == got_now(&r1, &got)
    });
    // Its queue is full and the sink's socket holds more frames, written
    // to the kernel but never acknowledged (once counted written).
    let mut all = got.clone();
    all.feed(&peek_queue(&r1));
    let got1 = all.msgs.len() as u64;
    assert!(
        get(&c.messages) > got1 + 1000,
        "messages {} got {got1}",
        get(&c.messages)
    );
    assert_eq!(logger.stats().written_records, got1);
    assert_eq!(all.seqs(), (0..got1).collect::<Vec<_>>());
    close_hard(r1);
    let r2 = listener.map(|l| {
        std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            read_to_end(s)
        })
    });
    let st = match logger.shutdown() {
        Ok(st) => st,
        Err((st, e)) => {
            assert!(!second, "shutdown failed: {e}");
            st
        }
    };
    eprintln!(
        "receiver dies (second {second}): got {got1}; replayed {} frames, resets {}, disconnects {}; {st:?}",
        get(&c.replayed_frames),
        get(&c.resets),
        get(&c.disconnects)
    );
    assert_eq!(st.produced, N);
    assert_eq!(st.in_flight(), 0, "{st:?}");
    assert_eq!(st.sink_pending, 0, "{st:?}");
    assert_eq!(st.dropped() + st.dropped_sink, 0, "{st:?}");
    assert!(get(&c.disconnects) >= 1);
    assert!(get(&c.resets) >= 1, "the broken connection held frames");
    assert_eq!(get(&c.acked_frames), st.written_records);
    if let Some(r2) = r2 {
        let got2 = r2.join().unwrap();
        assert!(got2.rest.is_empty(), "a cut frame on the second connection");
        // The second receiver gets exactly the frames the first never
        // acknowledged, from the first of them on.
        assert_eq!(got2.seqs(), (got1..N).collect::<Vec<_>>());
        assert_eq!(st.written_records, got1 + got2.msgs.len() as u64);
        assert_eq!(st.written_records, N, "{st:?}");
        assert_eq!(st.written_bytes, N * LINE as u64);
        assert_eq!(st.dropped_shutdown, 0, "{st:?}");
        assert!(get(&c.replayed_frames) >= 1);
        assert_eq!(get(&c.unacked_frames), 0);
    } else {
        assert_eq!(st.written_records, got1, "{st:?}");
        assert_eq!(st.written_bytes, got1 * LINE as u64);
        assert_eq!(st.written_records + st.dropped_shutdown, N, "{st:?}");
    }
}

/// A batch larger than both socket buffers times out part way (the
/// receiver stopped reading) and is given up on: the frames of it the
/// receiver's TCP acknowledged are kept (written), the rest dropped and
/// never sent again; the connection, which may end inside a frame, is
/// reset, and the next connection's stream holds whole frames only.
#[test]
fn tcp_batch_given_up_mid_stream_leaves_no_cut_frame_on_the_next_connection() {
    const LINE: usize = 211;
    const B: u64 = 40_000;
    let listener = listener_with_rcvbuf(32 << 10);
    let addr = listener.local_addr().unwrap();
    let mut o = SyslogSinkOptions::new(SyslogTransport::Tcp(addr));
    o.io_timeout_ms = 100;
    let mut s = SyslogSink::new(o).unwrap();
    let c = s.counters();
    let get = SyslogCounters::get;
    let (r1, _) = listener.accept().unwrap();
    let mut written = Progress::default();
    // A: 100 records, acknowledged (they fit the receiver's window).
    let a = seq_batch(0, 100, LINE);
    assert_eq!(s.write_batch(&a).unwrap(), Accepted::Pending);
    wait_until("A acknowledged", || {
        written += s.poll();
        written.delivered_records == 100
    });
    // B: 8 MiB, more than the receiver's window and the sink's socket
    // buffer take while the receiver does not read.
    let b = seq_batch(100, B, LINE);
    for _ in 0..3 {
        let e = s.write_batch(&b).expect_err("8 MiB do not fit");
        assert!(e.is_retryable(), "{e}");
    }
    written += s.poll();
    assert_eq!(written.delivered_records, 100, "B is not accepted yet");
    let resets = get(&c.resets);
    // The runtime gives up on B.
    let kept = s.kept_of_refused(&b, &[]);
    s.abandon();
    assert_eq!(get(&c.resets), resets + 1, "the connection carried B");
    assert!(kept.records < B);
    assert_eq!(kept.bytes, kept.records as usize * LINE);
    assert_eq!(get(&c.abandoned_frames), B - kept.records);
    // The first receiver has A and the acknowledged head of B whole (the
    // reset may leave a cut frame after them, on this connection only).
    let got1 = read_to_end(r1);
    assert_eq!(
        got1.seqs(),
        (0..100 + kept.records).collect::<Vec<_>>(),
        "cut frame left on the first connection: {} bytes",
        got1.rest.len()
    );
    eprintln!(
        "given up mid-stream: {} of B kept, {} bytes of a cut frame ended the first connection",
        kept.records,
        got1.rest.len()
    );
    let r2 = std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        read_to_end(s)
    });
    // C: 100 records, on a new connection.
    let cb = seq_batch(100 + B, 100, LINE);
    assert_eq!(s.write_batch(&cb).unwrap(), Accepted::Pending);
    s.drain(Instant::now() + Duration::from_secs(30)).unwrap();
    written += s.poll();
    s.close().unwrap();
    written += s.poll();
    let got2 = r2.join().unwrap();
    assert!(got2.rest.is_empty(), "a cut frame at the end");
    assert_eq!(got2.seqs(), (100 + B..200 + B).collect::<Vec<_>>());
    // Written: A, C, and B's acknowledged head; B's rest dropped.
    assert_eq!(written.delivered_records, 200);
    assert_eq!(written.delivered_bytes, 200 * LINE as u64);
    assert_eq!(written.failed_records, 0);
    assert_eq!(
        written.delivered_records + kept.records,
        (got1.msgs.len() + got2.msgs.len()) as u64
    );
    assert_eq!(get(&c.acked_frames), 200 + kept.records);
    assert_eq!(get(&c.unacked_frames), 0);
    assert_eq!(get(&c.messages), 200);
}

/// rsyslogd is killed (SIGKILL) while records flow, then restarted on the
/// same port and file; see [`tcp_kill`].
#[test]
fn tcp_receiver_killed_mid_stream_resumes_at_the_first_record_not_counted_written() {
    tcp_kill(false);
}

/// rsyslogd is frozen (SIGSTOP) while records flow, then killed
/// (SIGKILL) and not restarted, and dplog stops; see [`tcp_kill`].
#[test]
fn tcp_receiver_frozen_then_killed_counts_unacknowledged_records_dropped() {
    tcp_kill(true);
}

/// What a plain TCP sender can know exactly: which frames the receiver's
/// TCP acknowledged. Those are the records counted written when the kill
/// is noticed (`w`), and the sink resends exactly the others: after a
/// restart the second rsyslogd's records are `w..N`, whole and in order,
/// and all N count written; without one, `w` stay written and the rest
/// count `dropped_shutdown`. What rsyslogd's kernel acknowledged but
/// rsyslogd never wrote to its file before SIGKILL (its unread socket
/// queue, its in-memory queue) is counted written yet missing: plain TCP
/// syslog has no application acknowledgement (RELP has). The first
/// rsyslogd's records are `0..a` in order, `a <= w` up to the race of a
/// reset overtaking the acknowledgement of bytes it had read; the test
/// prints the gap. `freeze`: SIGSTOP first (its window closes while the
/// sink's socket still holds frames, the case where they used to count
/// written), kill, no restart.
fn tcp_kill(freeze: bool) {
    let Some(mut r) = Rsyslog::start() else {
        return;
    };
    const N: u64 = 20_000;
    const LINE: usize = 80;
    let mut o = SyslogSinkOptions::new(SyslogTransport::Tcp(r.tcp_addr()));
    o.io_timeout_ms = 100;
    let s = SyslogSink::new(o).unwrap();
    let c = s.counters();
    let get = SyslogCounters::get;
    let cfg = LoggerConfig {
        ring_capacity: 32 * 1024,
        shutdown_timeout_ms: if freeze { 1000 } else { 60_000 },
        drop_reports: false,
        ..LoggerConfig::default()
    };
    let logger = Logger::start(cfg, SyslogSeqLine { line_len: LINE }, s).unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..1000 {
        assert!(p.log(rec(0, i)));
    }
    wait_until("the first 1000 records acknowledged", || {
        logger.stats().written_records == 1000
    });
    r.wait_lines(1000);
    if freeze {
        r.freeze();
    }
    let w = std::thread::spawn(move || {
        for i in 1000..N {
            assert!(p.log(rec(0, i)));
            if i % 20 == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
    // Frozen: bytes in rsyslogd's socket queue, acknowledged by its kernel
    // and never read, once its window closed (stable over 200 ms while the
    // sink's socket holds frames it has not acknowledged).
    let mut unread = 0;
    if freeze {
        wait_until("frames written but not acknowledged", || {
            get(&c.messages) >= get(&c.acked_frames) + 2000
        });
        let mut last = usize::MAX;
        wait_until("rsyslogd's socket queue stable", || {
            std::thread::sleep(Duration::from_millis(200));
            let q = tcp_rx_queue(r.tcp);
            std::mem::replace(&mut last, q) == q && q > 0
        });
        unread = last;
    } else {
        wait_until("5000 records in the file", || {
            let body = std::fs::read(r.out()).unwrap_or_default();
            body.iter().filter(|&&b| b == b'\n').count() >= 5000
        });
    }
    r.kill9();
    let failures = get(&c.connect_failures);
    wait_until("a failed reconnect", || get(&c.connect_failures) > failures);
    // The acknowledgements booked at the disconnect reach the counters
    // with the consumer's next poll.
    wait_until("the disconnect's acknowledgements booked", || {
        logger.stats().written_records == get(&c.acked_frames)
    });
    let written_at_kill = logger.stats().written_records;
    let first = parse_lines(&std::fs::read(r.out()).unwrap_or_default());
    let a = first.len() as u64;
    assert_eq!(
        first,
        (0..a).map(|s| (0, s)).collect::<Vec<_>>(),
        "the first rsyslogd's records"
    );
    assert!((1000..N).contains(&written_at_kill));
    if !freeze {
        r.spawn();
    }
    w.join().unwrap();
    let st = match logger.shutdown() {
        Ok(st) => st,
        Err((st, e)) => {
            assert!(freeze, "shutdown failed: {e}");
            st
        }
    };
    eprintln!(
        "tcp kill (freeze {freeze}): {written_at_kill} acknowledged at the kill, {a} in the first rsyslogd's file (acknowledged by its kernel, never written: {}); replayed {}, resets {}; {st:?}",
        written_at_kill as i64 - a as i64,
        get(&c.replayed_frames),
        get(&c.resets)
    );
    assert_eq!(st.produced, N);
    assert_eq!(st.in_flight(), 0, "{st:?}");
    assert_eq!(st.dropped() + st.dropped_sink, 0, "{st:?}");
    assert_eq!(get(&c.acked_frames), st.written_records);
    let body = if freeze {
        std::fs::read(r.out()).unwrap()
    } else {
        r.wait_lines(a + N - written_at_kill)
    };
    let all = parse_lines(&body);
    if freeze {
        assert_eq!(
            all.len() as u64,
            a,
            "nobody wrote to the file after the kill"
        );
        // Frozen idle (it had written the first 1000 records and read
        // nothing since), rsyslogd lost exactly the whole frames in its
        // socket queue: `LEN SP MSG`, MSG the line without its `\n`.
        let frame = (LINE - 1 + 3) as u64;
        assert_eq!(a, 1000);
        assert_eq!(
            written_at_kill - a,
            unread as u64 / frame,
            "unread {unread} bytes"
        );
        assert_eq!(st.written_records, written_at_kill, "{st:?}");
        assert_eq!(st.written_records + st.dropped_shutdown, N, "{st:?}");
        assert!(get(&c.resets) >= 1, "the frozen connection held frames");
    } else {
        assert_eq!(st.written_records, N, "{st:?}");
        assert_eq!(st.dropped_shutdown, 0, "{st:?}");
        // The second rsyslogd got exactly the records not counted written
        // at the kill, each once, in order: no record counted written is
        // sent again, none not counted written is skipped.
        let second: Vec<u64> = all[a as usize..].iter().map(|&(_, s)| s).collect();
        assert_eq!(second, (written_at_kill..N).collect::<Vec<_>>());
    }
}

/// Bytes unread in the receive queues of the established TCP sockets on
/// 127.0.0.1 whose local port is `port` (`/proc/net/tcp`, `rx_queue`).
fn tcp_rx_queue(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let local = format!("0100007F:{port:04X}");
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // sl, local_address, rem_address, st, tx_queue:rx_queue, ...
            (f.len() > 4 && f[1] == local && f[3] == "01").then(|| {
                let rx = f[4].split(':').nth(1).unwrap();
                usize::from_str_radix(rx, 16).unwrap()
            })
        })
        .sum()
}
