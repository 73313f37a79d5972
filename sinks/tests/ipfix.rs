//! The IPFIX exporter against real collectors on loopback: nfcapd (nfdump's
//! collector) and tshark read what it sends, record by record; a UDP or TCP
//! socket of the test parses its messages; a collector that is down is
//! counted, never written.

mod common;

use std::collections::HashMap;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::time::{Duration, Instant};

use common::{acl_hit, AclHit};
use dplog_core::{
    Backpressure, Formatter, HasSchema, Logger, LoggerConfig, RecordHeader, Sink, Stats,
};
use dplog_formatters::{ExportClock, Format, FormatSpec, IpfixOptions};
use dplog_schema_nat::{Nat44SessionRecord, NatFormatSpec as _, NatFormatter};
use dplog_sinks::{IpfixExporter, IpfixExporterOptions, IpfixTransport};
use dplog_testkit::nfcapd::{flows, stat_field, text, Nfcapd};
use dplog_testkit::tshark;
use serde_json::Value;

/// 2026-01-01T00:00:00.123456789Z.
const T0: u64 = 1_767_225_600_123_456_789;

fn spec(kind: Format) -> FormatSpec {
    FormatSpec {
        kind,
        ipfix: IpfixOptions {
            export_clock: ExportClock::Record,
            observation_domain_id: 9,
            ..Default::default()
        },
        ..Default::default()
    }
}

fn formatter(kind: Format) -> NatFormatter {
    spec(kind).nat_formatter().unwrap()
}

/// `n` NAT44 session records, creates and deletes, every field varying.
fn records(n: u64) -> Vec<Nat44SessionRecord> {
    (0..n)
        .map(|i| {
            let delete = i % 3 == 2;
            Nat44SessionRecord {
                header: RecordHeader::of::<Nat44SessionRecord>(),
                timestamp_ns: T0 + i * 7_000_000 + i,
                src_addr: 0x0A00_0000 + (i as u32 * 7919) % 65_000,
                post_nat_src_addr: 0xC633_6400 + (i as u32 % 250),
                dst_addr: 0xCB00_7100 + (i as u32 * 31) % 250,
                src_port: 1024 + (i as u16).wrapping_mul(13),
                post_napt_src_port: 1024 + i as u16,
                dst_port: [80, 443, 53, 8080][i as usize % 4],
                protocol: [6, 17][i as usize % 2],
                nat_event: if delete { 5 } else { 4 },
                ingress_vrf_id: (i % 5) as u32,
                initiator_packets: if delete { i as u32 } else { 0 },
                responder_packets: if delete { 2 * i as u32 } else { 0 },
                initiator_octets: if delete { 100 * i } else { 0 },
                responder_octets: if delete { 1000 * i } else { 0 },
            }
        })
        .collect()
}

/// The JSON format's values of `recs`.
fn json(recs: &[Nat44SessionRecord]) -> Vec<Value> {
    let mut f = formatter(Format::Json);
    recs.iter()
        .map(|r| {
            let mut out = Vec::new();
            f.format(r, &mut out);
            serde_json::from_slice(&out).unwrap()
        })
        .collect()
}

fn options(t: IpfixTransport) -> IpfixExporterOptions {
    IpfixExporterOptions::new(t)
}

/// Logs `recs` through a real logger (IPFIX format) into `sink`.
fn run(recs: &[Nat44SessionRecord], sink: IpfixExporter, cfg: LoggerConfig) -> Stats {
    let logger = Logger::start(cfg, formatter(Format::Ipfix), sink).unwrap();
    let mut p = logger.producer().unwrap();
    for r in recs {
        assert!(p.log(*r));
    }
    drop(p);
    match logger.shutdown() {
        Ok(s) => s,
        Err((s, _)) => s,
    }
}

// ---------------------------------------------------------------------------
// A minimal IPFIX reader for the test's own collectors.

#[derive(Debug, Default)]
struct Parsed {
    /// (sequence number, domain, data records of the log, options
    /// records, carries templates) per message.
    msgs: Vec<(u32, u32, u64, u64, bool)>,
    /// Data records: (template id, bytes).
    data: Vec<(u16, Vec<u8>)>,
    /// Options data records (reliability statistics).
    reports: Vec<Vec<u8>>,
}

/// Parses messages in order, learning templates as they come; panics on a
/// data set whose template was not sent before it on this stream.
fn parse(msgs: &[Vec<u8>]) -> Parsed {
    let be16 = |b: &[u8], o: usize| u16::from_be_bytes([b[o], b[o + 1]]);
    let be32 = |b: &[u8], o: usize| u32::from_be_bytes(b[o..o + 4].try_into().unwrap());
    let mut tmpl: HashMap<u16, (usize, bool)> = HashMap::new();
    let mut p = Parsed::default();
    for m in msgs {
        assert_eq!(be16(m, 0), 10, "version");
        assert_eq!(be16(m, 2) as usize, m.len(), "message length");
        let (seq, dom) = (be32(m, 8), be32(m, 12));
        let (mut recs, mut reps, mut has_t) = (0, 0, false);
        let mut o = 16;
        while o < m.len() {
            let (id, len) = (be16(m, o), be16(m, o + 2) as usize);
            let end = o + len;
            let mut r = o + 4;
            match id {
                2 | 3 => {
                    has_t = true;
                    while end - r >= 4 {
                        let (tid, n) = (be16(m, r), be16(m, r + 2) as usize);
                        r += if id == 3 { 6 } else { 4 };
                        let mut l = 0;
                        for _ in 0..n {
                            let (ie, fl) = (be16(m, r), be16(m, r + 2) as usize);
                            l += fl;
                            r += 4 + if ie & 0x8000 != 0 { 4 } else { 0 };
                        }
                        tmpl.insert(tid, (l, id == 3));
                    }
                }
                _ => {
                    let (l, opt) = *tmpl
                        .get(&id)
                        .unwrap_or_else(|| panic!("data set {id} before its template"));
                    while end - r >= l {
                        if opt {
                            reps += 1;
                            p.reports.push(m[r..r + l].to_vec());
                        } else {
                            recs += 1;
                            p.data.push((id, m[r..r + l].to_vec()));
                        }
                        r += l;
                    }
                }
            }
            o = end;
        }
        p.msgs.push((seq, dom, recs, reps, has_t));
    }
    p
}

/// Checks the sequence numbers: each message's is the count of data
/// records (options records included) before it.
fn check_sequence(p: &Parsed) {
    let mut next = p.msgs.first().map_or(0, |m| m.0);
    for (i, m) in p.msgs.iter().enumerate() {
        assert_eq!(m.0, next, "message {i}: {:?}", &p.msgs[..=i]);
        next = next.wrapping_add((m.2 + m.3) as u32);
    }
}

/// Receives datagrams on a UDP socket until `done` says so or 10 s pass.
fn receive(sock: &UdpSocket, mut done: impl FnMut(&[Vec<u8>]) -> bool) -> Vec<Vec<u8>> {
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let mut got = Vec::new();
    let t0 = Instant::now();
    let mut buf = vec![0u8; 65_536];
    while !done(&got) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "timed out: {} datagrams",
            got.len()
        );
        if let Ok(n) = sock.recv(&mut buf) {
            got.push(buf[..n].to_vec());
        }
    }
    got
}

/// The record fields of a NAT44 session data record (the NAT template's
/// layout: observationTimeMilliseconds first, then the schema's fields),
/// checked against the JSON of the same record.
fn check_session(rec: &[u8], j: &Value) {
    let ms = u64::from_be_bytes(rec[0..8].try_into().unwrap());
    assert_eq!(
        ms,
        j["observationTimeMilliseconds"].as_u64().unwrap(),
        "{j}"
    );
}

#[test]
fn udp_messages_fit_the_size_carry_templates_by_count_and_number_every_record() {
    let col = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut o = options(IpfixTransport::Udp(col.local_addr().unwrap()));
    o.max_message_bytes = 600;
    o.template_refresh_messages = 10;
    o.observation_domain_id = Some(77);
    let recs = records(500);
    let stats = run(
        &recs,
        IpfixExporter::new(o).unwrap(),
        LoggerConfig::default(),
    );
    assert_eq!(stats.written_records, 500);
    assert_eq!(stats.dropped_sink, 0);
    let got = receive(&col, |g| parse(g).data.len() >= 500);
    assert!(
        got.iter().all(|d| d.len() <= 600),
        "a datagram above 600 bytes"
    );
    let p = parse(&got);
    assert_eq!(p.data.len(), 500);
    assert!(p.msgs.iter().all(|m| m.1 == 77), "observation domain");
    assert_eq!(p.msgs[0].0, 0, "the first message has no record before it");
    assert!(p.msgs[0].4, "templates first");
    check_sequence(&p);
    // Templates in the first message and then at least every 10 messages.
    let with: Vec<usize> = (0..p.msgs.len()).filter(|&i| p.msgs[i].4).collect();
    assert!(
        with.len() >= p.msgs.len() / 11,
        "{with:?} of {}",
        p.msgs.len()
    );
    for w in with.windows(2) {
        assert!(w[1] - w[0] <= 11, "{with:?}");
    }
    for ((_, rec), j) in p.data.iter().zip(json(&recs)) {
        check_session(rec, &j);
    }
}

#[test]
fn ipv6_loopback_collector() {
    let Ok(col) = UdpSocket::bind("[::1]:0") else {
        eprintln!("no IPv6 loopback on this machine: skipped");
        return;
    };
    let o = options(IpfixTransport::Udp(col.local_addr().unwrap()));
    let recs = records(100);
    let stats = run(
        &recs,
        IpfixExporter::new(o).unwrap(),
        LoggerConfig::default(),
    );
    assert_eq!(stats.written_records, 100);
    let p = parse(&receive(&col, |g| parse(g).data.len() >= 100));
    assert_eq!(p.data.len(), 100);
    // The formatter's observation domain when the sink sets none.
    assert!(p.msgs.iter().all(|m| m.1 == 9));
    check_sequence(&p);
}

#[test]
fn a_collector_that_is_down_is_counted_never_written() {
    // A port nobody listens on, below the ephemeral range (the sink's own
    // socket is not given it, so it cannot send to itself).
    let port = std::net::SocketAddr::from(([127, 0, 0, 1], dplog_testkit::free_udp_port()));
    let mut s = IpfixExporter::new(options(IpfixTransport::Udp(port))).unwrap();
    let mut f = formatter(Format::Ipfix);
    let mut batch = Vec::new();
    for r in records(50) {
        f.format(&r, &mut batch);
    }
    // Every attempt is refused (the ICMP port unreachable of loopback is
    // there before the next send): nothing is ever counted written.
    for _ in 0..3 {
        let e = s.write_batch(&batch).unwrap_err();
        assert!(e.is_retryable(), "{e}");
        assert_eq!(e.raw_os_error(), Some(libc::ECONNREFUSED), "{e}");
    }
    let kept = s.kept_of_refused(&batch, &[]);
    assert_eq!(kept.records, 0);
    assert!(dplog_sinks::IpfixCounters::get(&s.counters().refused) >= 3);
    assert_eq!(dplog_sinks::IpfixCounters::get(&s.counters().messages), 0);

    // Through the runtime: given up after the retry timeout, every record
    // is dropped by the sink and none written.
    let stats = run(
        &records(300),
        IpfixExporter::new(options(IpfixTransport::Udp(port))).unwrap(),
        LoggerConfig {
            sink_retry_timeout_ms: Some(200),
            ..Default::default()
        },
    );
    assert_eq!(stats.written_records, 0, "{stats:?}");
    assert_eq!(stats.dropped_sink, 300, "{stats:?}");
    assert!(stats.sink_errors > 0, "{stats:?}");
}

#[test]
fn a_collector_that_goes_away_mid_stream_keeps_written_exact() {
    // Below the ephemeral range: the port is still free when the collector
    // comes back on it.
    let col = UdpSocket::bind(("127.0.0.1", dplog_testkit::free_udp_port())).unwrap();
    let addr = col.local_addr().unwrap();
    let mut o = options(IpfixTransport::Udp(addr));
    o.max_message_bytes = 400;
    let mut s = IpfixExporter::new(o).unwrap();
    let mut f = formatter(Format::Ipfix);
    let recs = records(40);
    let mut b1 = Vec::new();
    for r in &recs[..20] {
        f.format(r, &mut b1);
    }
    assert!(matches!(
        s.write_batch(&b1).unwrap(),
        dplog_core::Accepted::Delivered
    ));
    let got = parse(&receive(&col, |g| parse(g).data.len() >= 20));
    assert_eq!(got.data.len(), 20);
    drop(col);
    let mut b2 = Vec::new();
    for r in &recs[20..] {
        f.format(r, &mut b2);
    }
    assert!(s.write_batch(&b2).is_err());
    assert_eq!(s.kept_of_refused(&b2, &[]).records, 0);
    // Back on the same port: the next batch goes out, templates first
    // (the collector is a new one).
    let col = UdpSocket::bind(addr).unwrap();
    let mut b3 = Vec::new();
    for r in &recs[..5] {
        f.format(r, &mut b3);
    }
    s.write_batch(&b3).unwrap();
    let p = parse(&receive(&col, |g| parse(g).data.len() >= 5));
    assert_eq!(p.data.len(), 5);
    // Sequence numbers leave the gap of the 20 records never sent.
    assert_eq!(p.msgs[0].0, 40);
}

/// Splits a TCP stream into messages (by their length field).
fn split(s: &[u8]) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    let mut o = 0;
    while s.len() - o >= 16 {
        let len = u16::from_be_bytes([s[o + 2], s[o + 3]]) as usize;
        if o + len > s.len() {
            break;
        }
        v.push(s[o..o + len].to_vec());
        o += len;
    }
    v
}

/// Reads one connection until `done` says so (or EOF) and returns it.
fn read_conn(c: &mut std::net::TcpStream, mut done: impl FnMut(&[u8]) -> bool) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !done(&got) {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    got
}

#[test]
fn tcp_counts_acknowledged_messages_and_sends_templates_once() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let reader = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        read_conn(&mut c, |_| false)
    });
    let mut o = options(IpfixTransport::Tcp(addr));
    o.max_message_bytes = 1000;
    let recs = records(600);
    let sink = IpfixExporter::new(o).unwrap();
    let counters = sink.counters();
    let stats = run(&recs, sink, LoggerConfig::default());
    assert_eq!(stats.written_records, 600, "{stats:?}");
    assert_eq!(stats.dropped_shutdown, 0, "{stats:?}");
    let p = parse(&split(&reader.join().unwrap()));
    assert_eq!(p.data.len(), 600);
    assert!(p.msgs[0].4, "templates first");
    assert_eq!(p.msgs.iter().filter(|m| m.4).count(), 1, "templates once");
    assert!(p.msgs.iter().all(|m| m.0 as usize <= 600));
    check_sequence(&p);
    for ((_, rec), j) in p.data.iter().zip(json(&recs)) {
        check_session(rec, &j);
    }
    let acked = dplog_sinks::IpfixCounters::get(&counters.acked);
    assert_eq!(acked, p.msgs.len() as u64);
}

#[test]
fn tcp_sends_the_templates_again_on_a_new_connection() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (closed_tx, closed_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let first = read_conn(&mut c, |g| parse(&split(g)).data.len() >= 20);
        drop(c);
        closed_tx.send(()).unwrap();
        let (mut c, _) = l.accept().unwrap();
        let second = read_conn(&mut c, |_| false);
        (first, second)
    });
    let mut s = IpfixExporter::new(options(IpfixTransport::Tcp(addr))).unwrap();
    let mut f = formatter(Format::Ipfix);
    let recs = records(50);
    let deadline = || Instant::now() + Duration::from_secs(10);
    let mut b1 = Vec::new();
    for r in &recs[..20] {
        f.format(r, &mut b1);
    }
    assert_eq!(s.write_batch(&b1).unwrap(), dplog_core::Accepted::Pending);
    s.drain(deadline()).unwrap();
    assert_eq!(s.poll().delivered_records, 20);
    closed_rx.recv().unwrap();
    let mut b2 = Vec::new();
    for r in &recs[20..] {
        f.format(r, &mut b2);
    }
    // The closed connection is noticed before the write, or the write
    // fails and the batch is retried on a new connection.
    let mut tries = 0;
    while s.write_batch(&b2).is_err() {
        tries += 1;
        assert!(tries < 100);
        std::thread::sleep(Duration::from_millis(20));
    }
    s.drain(deadline()).unwrap();
    assert_eq!(s.poll().delivered_records, 30);
    s.close().unwrap();
    let (first, second) = reader.join().unwrap();
    let (p1, p2) = (parse(&split(&first)), parse(&split(&second)));
    assert_eq!(p1.data.len(), 20);
    assert_eq!(p2.data.len(), 30);
    for p in [&p1, &p2] {
        assert!(p.msgs[0].4, "templates first on each connection");
        assert_eq!(p.msgs.iter().filter(|m| m.4).count(), 1);
    }
    // The sequence goes on across connections.
    assert_eq!(p2.msgs.iter().find(|m| m.2 > 0).unwrap().0, 20);
    assert_eq!(dplog_sinks::IpfixCounters::get(&s.counters().reconnects), 1);
}

#[test]
fn drop_reports_reach_the_collector_as_reliability_statistics_with_exact_totals() {
    let col = UdpSocket::bind("127.0.0.1:0").unwrap();
    let sink = IpfixExporter::new(options(IpfixTransport::Udp(col.local_addr().unwrap()))).unwrap();
    // A slow formatter and a small drop_newest ring: producers drop.
    struct Slow(NatFormatter, u64);
    impl Formatter<Nat44SessionRecord> for Slow {
        fn format(&mut self, r: &Nat44SessionRecord, out: &mut Vec<u8>) {
            self.1 += 1;
            if self.1 % 64 == 0 {
                std::thread::sleep(Duration::from_millis(2));
            }
            self.0.format(r, out);
        }
        fn format_drop_report(&mut self, r: &dplog_core::DropReport, out: &mut Vec<u8>) {
            Formatter::<Nat44SessionRecord>::format_drop_report(&mut self.0, r, out);
        }
    }
    let logger = Logger::start(
        LoggerConfig {
            ring_capacity: 64,
            backpressure: Backpressure::Drop,
            ..Default::default()
        },
        Slow(formatter(Format::Ipfix), 0),
        sink,
    )
    .unwrap();
    let mut p = logger.producer().unwrap();
    for (i, r) in records(3000).iter().enumerate() {
        if i % 256 == 0 {
            std::thread::sleep(Duration::from_micros(500));
        }
        p.log(*r);
    }
    drop(p);
    let stats = logger.shutdown().unwrap();
    assert!(stats.dropped_full > 0, "nothing dropped: {stats:?}");
    let written = stats.written_records;
    let p = parse(&receive(&col, |g| {
        let p = parse(g);
        p.data.len() as u64 >= written && !p.reports.is_empty() && {
            let last = p.reports.last().unwrap();
            u64::from_be_bytes(last[4..12].try_into().unwrap()) >= stats.dropped_full
        }
    }));
    assert_eq!(p.data.len() as u64, written);
    // exportingProcessId 1, then notSentFlowTotalCount (a running total:
    // strictly growing, the last equal to every drop), first <= last drop.
    let mut prev = 0;
    for r in &p.reports {
        assert_eq!(r.len(), 28);
        assert_eq!(u32::from_be_bytes(r[0..4].try_into().unwrap()), 1);
        let total = u64::from_be_bytes(r[4..12].try_into().unwrap());
        assert!(total > prev);
        prev = total;
        let first = u64::from_be_bytes(r[12..20].try_into().unwrap());
        let last = u64::from_be_bytes(r[20..28].try_into().unwrap());
        assert!(first <= last && first > 1_700_000_000_000);
    }
    assert_eq!(prev, stats.dropped_full + stats.dropped_degraded);
    assert_eq!(stats.drop_reports, p.reports.len() as u64);
    check_sequence(&p);
}

// ---------------------------------------------------------------------------
// tshark.

fn ip4(v: &Value) -> String {
    v.as_str().unwrap().to_string()
}

#[test]
fn tshark_decodes_the_exported_datagrams_every_value_and_sequence_number() {
    let col = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = col.local_addr().unwrap().port();
    let mut o = options(IpfixTransport::Udp(col.local_addr().unwrap()));
    o.max_message_bytes = 700;
    o.template_refresh_messages = 5;
    let recs = records(300);
    let stats = run(
        &recs,
        IpfixExporter::new(o).unwrap(),
        LoggerConfig::default(),
    );
    assert_eq!(stats.written_records, 300);
    let got = receive(&col, |g| parse(g).data.len() >= 300);
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("export.pcap");
    tshark::write_udp_pcap(&pcap, &got, port);
    let rows = tshark::fields(
        &pcap,
        port,
        &[
            "_ws.malformed",
            "_ws.expert.severity",
            "cflow.sequence",
            "cflow.od_id",
            "cflow.nat_event",
            "cflow.srcaddr",
            "cflow.srcport",
            "cflow.post_natsource_ipv4_address",
            "cflow.post_naptsource_transport_port",
            "cflow.dstaddr",
            "cflow.dstport",
            "cflow.protocol",
            "cflow.ingress_vrfid",
            "cflow.template_id",
        ],
    );
    assert_eq!(rows.len(), got.len());
    let j = json(&recs);
    let mut k = 0usize;
    let mut seq = 0u64;
    let mut template_msgs = 0;
    for r in &rows {
        assert_eq!(r[0], "", "malformed: {r:?}");
        assert_eq!(r[1], "", "expert info (unknown or bad field): {r:?}");
        assert_eq!(r[2].parse::<u64>().unwrap(), seq, "{r:?}");
        assert_eq!(r[3], "9");
        template_msgs += usize::from(!r[13].is_empty());
        let events: Vec<&str> = r[4].split(',').filter(|s| !s.is_empty()).collect();
        let col = |i: usize| -> Vec<String> { r[i].split(',').map(String::from).collect() };
        let (src, sport, xip, xport, dst, dport, proto, vrf) = (
            col(5),
            col(6),
            col(7),
            col(8),
            col(9),
            col(10),
            col(11),
            col(12),
        );
        for (n, e) in events.iter().enumerate() {
            let v = &j[k];
            assert_eq!(e.to_string(), v["natEvent"].to_string(), "{k}");
            assert_eq!(src[n], ip4(&v["sourceIPv4Address"]), "{k}");
            assert_eq!(sport[n], v["sourceTransportPort"].to_string(), "{k}");
            assert_eq!(xip[n], ip4(&v["postNATSourceIPv4Address"]), "{k}");
            assert_eq!(
                xport[n],
                v["postNAPTSourceTransportPort"].to_string(),
                "{k}"
            );
            assert_eq!(dst[n], ip4(&v["destinationIPv4Address"]), "{k}");
            assert_eq!(dport[n], v["destinationTransportPort"].to_string(), "{k}");
            assert_eq!(proto[n], v["protocolIdentifier"].to_string(), "{k}");
            assert_eq!(vrf[n], v["ingressVRFID"].to_string(), "{k}");
            k += 1;
        }
        seq += events.len() as u64;
    }
    assert_eq!(k, 300);
    assert!(template_msgs >= 2, "a template resend: {template_msgs}");
}

// ---------------------------------------------------------------------------
// nfcapd.

#[test]
fn nfcapd_receives_the_exporter_and_nfdump_equals_the_json_record_by_record() {
    let c = Nfcapd::start(&["-B", "4194304"]);
    let mut o = options(IpfixTransport::Udp(c.addr()));
    // Several messages and, every 8 messages, the templates again.
    o.template_refresh_messages = 8;
    let recs = records(700);
    let sink = IpfixExporter::new(o).unwrap();
    let counters = sink.counters();
    let stats = run(&recs, sink, LoggerConfig::default());
    assert_eq!(stats.written_records, 700);
    let msgs = dplog_sinks::IpfixCounters::get(&counters.messages);
    assert!(msgs >= 20, "{msgs} messages");
    assert!(dplog_sinks::IpfixCounters::get(&counters.template_messages) >= 3);
    let (file, _dir) = c.finish(700);
    assert_eq!(stat_field(&file, "Flows"), 700);
    assert_eq!(stat_field(&file, "Sequence failures"), 0);
    let v = flows(&file);
    let j = json(&recs);
    assert_eq!(v.len(), j.len());
    for (k, (n, j)) in v.iter().zip(&j).enumerate() {
        assert_eq!(
            text(n, "nat_event_id"),
            j["natEvent"].to_string(),
            "{k}: {n}"
        );
        assert_eq!(text(n, "src4_addr"), ip4(&j["sourceIPv4Address"]), "{k}");
        assert_eq!(
            text(n, "src_port"),
            j["sourceTransportPort"].to_string(),
            "{k}"
        );
        assert_eq!(
            text(n, "src4_xlt_ip"),
            ip4(&j["postNATSourceIPv4Address"]),
            "{k}"
        );
        assert_eq!(
            text(n, "src_xlt_port"),
            j["postNAPTSourceTransportPort"].to_string(),
            "{k}"
        );
        assert_eq!(
            text(n, "dst4_addr"),
            ip4(&j["destinationIPv4Address"]),
            "{k}"
        );
        assert_eq!(
            text(n, "dst_port"),
            j["destinationTransportPort"].to_string(),
            "{k}"
        );
        assert_eq!(text(n, "proto"), j["protocolIdentifier"].to_string(), "{k}");
        assert_eq!(text(n, "ingress_vrf"), j["ingressVRFID"].to_string(), "{k}");
        // nfdump prints the event time with the milliseconds as a number
        // (5 ms as ".5"), so compare the parts.
        let ts = j["timestamp"].as_str().unwrap();
        let te = text(n, "t_event");
        let (secs, ms) = te.split_once('.').unwrap();
        assert_eq!(secs, &ts[..19], "{k}");
        assert_eq!(
            ms.parse::<u32>().unwrap(),
            ts[20..23].parse::<u32>().unwrap(),
            "{k}"
        );
    }
}

#[test]
fn nfcapd_stores_every_record_around_a_drop_report_and_counts_one_sequence_failure() {
    // Records, a drop report (an options data record), records: the
    // sequence numbers count the options record (RFC 7011 section 3.1
    // counts every Data Record; only template records do not), which
    // nfcapd 1.7.1 does not: it reports one sequence failure, at the
    // message after the report, and stores every record.
    let c = Nfcapd::start(&["-B", "4194304"]);
    let mut o = options(IpfixTransport::Udp(c.addr()));
    o.max_message_bytes = 500;
    let mut s = IpfixExporter::new(o).unwrap();
    let mut f = formatter(Format::Ipfix);
    let recs = records(60);
    let mut batch = Vec::new();
    for (i, r) in recs.iter().enumerate() {
        if i == 25 {
            let wall = 1_796_024_955_000_000_000;
            Formatter::<Nat44SessionRecord>::format_drop_report(
                &mut f,
                &dplog_core::DropReport::new(0, 4, wall, wall),
                &mut batch,
            );
        }
        f.format(r, &mut batch);
    }
    assert_eq!(
        s.write_batch(&batch).unwrap(),
        dplog_core::Accepted::Delivered
    );
    s.close().unwrap();
    let (file, _dir) = c.finish(60);
    assert_eq!(stat_field(&file, "Flows"), 60);
    assert_eq!(stat_field(&file, "Sequence failures"), 1);
}

#[test]
fn udp_templates_are_sent_again_once_the_refresh_time_has_passed() {
    let col = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut o = options(IpfixTransport::Udp(col.local_addr().unwrap()));
    o.template_refresh_secs = 1;
    o.template_refresh_messages = 0;
    let mut s = IpfixExporter::new(o).unwrap();
    let mut f = formatter(Format::Ipfix);
    let mut batch = |n: u64| {
        let mut b = Vec::new();
        for r in records(n) {
            f.format(&r, &mut b);
        }
        b
    };
    // Second batch at once: no templates; third after the refresh time:
    // templates first.
    let (b1, b2) = (batch(5), batch(5));
    s.write_batch(&b1).unwrap();
    s.write_batch(&b2).unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    let b3 = batch(5);
    s.write_batch(&b3).unwrap();
    let p = parse(&receive(&col, |g| parse(g).data.len() >= 15));
    let with: Vec<bool> = p.msgs.iter().map(|m| m.4).collect();
    assert_eq!(with, vec![true, false, true], "{:?}", p.msgs);
    check_sequence(&p);
}

/// No collector at first: each datagram refused (ICMP port unreachable,
/// seen by `SO_ERROR` or the next send) is sent again once nfcapd is up,
/// never counted written before: nfcapd then holds exactly the records
/// counted written, all of them, once each. A user's record type (not
/// NAT).
#[test]
fn udp_datagrams_refused_before_the_collector_is_up_are_sent_again_not_counted_written() {
    const N: u32 = 300;
    let port = dplog_testkit::free_udp_port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut o = options(IpfixTransport::Udp(addr));
    // Several messages per batch.
    o.max_message_bytes = 400;
    let sink = IpfixExporter::new(o).unwrap();
    let c = sink.counters();
    let cfg = LoggerConfig {
        ring_capacity: 1024,
        shutdown_timeout_ms: 60_000,
        ..LoggerConfig::default()
    };
    let f = spec(Format::Ipfix).formatter(&[AclHit::schema()]).unwrap();
    let logger = Logger::start(cfg, f, sink).unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..N {
        assert!(p.log(acl_hit(i)));
    }
    drop(p);
    let get = dplog_sinks::IpfixCounters::get;
    // Refused and retried with backoff, ten times (about half a second).
    dplog_testkit::wait_until("ten refusals", Duration::from_secs(60), || {
        get(&c.refused) >= 10
    });
    let st = logger.stats();
    assert_eq!(st.written_records, 0, "nobody listens yet: {st:?}");
    let col = Nfcapd::start_on(port, &["-B", "4194304"]).expect("nfcapd binds the free port");
    let st = logger.shutdown().unwrap();
    assert_eq!(st.produced, u64::from(N));
    assert_eq!(st.written_records, u64::from(N), "{st:?}");
    assert_eq!(st.dropped_sink + st.dropped_shutdown, 0, "{st:?}");
    assert_eq!(get(&c.records), u64::from(N));
    // Waits until nfcapd decoded as many records as were counted written.
    let (file, _dir) = col.finish(st.written_records as usize);
    assert_eq!(stat_field(&file, "Flows"), st.written_records);
    // The messages refused were sent again with their own sequence
    // numbers: none missing, none twice.
    assert_eq!(stat_field(&file, "Sequence failures"), 0);
    let ports: Vec<u32> = flows(&file)
        .iter()
        .map(|v| text(v, "src_port").parse().unwrap())
        .collect();
    assert_eq!(ports, (0..N).collect::<Vec<_>>(), "each once, in order");
}

/// Two runs of an exporter into one nfcapd (nfcapd keeps running). Each
/// run binds a new UDP source port, so each is a new Transport Session
/// (RFC 7011 section 2; sequence numbers count per Transport Session and
/// Observation Domain, section 10.3.2), and restarts its sequence at 0.
/// nfcapd 1.7.1 keys an exporter by its source address and Observation
/// Domain only, not the port: with one domain it takes the second run's
/// first message (sequence 0 where it expected 40) for one sequence
/// failure, and stores every record; each run with its own
/// `observation_domain_id` is two exporters to it, and no failure.
#[test]
fn two_runs_into_one_nfcapd_are_two_transport_sessions() {
    let recs = records(100);
    // One run: its records through a new exporter with `domain` (None:
    // the format's, 9); the UDP source port it sent from.
    let one_run = |addr: SocketAddr, domain: Option<u32>, recs: &[Nat44SessionRecord]| -> u16 {
        let mut o = options(IpfixTransport::Udp(addr));
        o.observation_domain_id = domain;
        let sink = IpfixExporter::new(o).unwrap();
        let port = sink.local_addr().unwrap().port();
        let stats = run(recs, sink, LoggerConfig::default());
        assert_eq!(stats.written_records, recs.len() as u64);
        port
    };
    // (Flows, sequence failures, exporters) nfcapd stored.
    let stored = |c: Nfcapd| {
        let (file, _dir) = c.finish(100);
        let e = std::process::Command::new("nfdump")
            .arg("-E")
            .arg(&file)
            .output()
            .unwrap();
        assert!(e.status.success(), "{}", String::from_utf8_lossy(&e.stderr));
        // Per exporter nfcapd knew: (IP, Observation Domain ID, sequence
        // failures, flows), from lines such as `SysID: 1, IP: 127.0.0.1,
        // version: 10, ID: 9, Sequence failures: 1, packets: 5, flows: 100`.
        let text = String::from_utf8(e.stdout).unwrap();
        let exporters: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with("SysID:"))
            .map(|l| {
                let kv: HashMap<&str, &str> = l
                    .split(',')
                    .filter_map(|p| p.split_once(':'))
                    .map(|(k, v)| (k.trim(), v.trim()))
                    .collect();
                format!(
                    "{} domain {} failures {} flows {}",
                    kv["IP"], kv["ID"], kv["Sequence failures"], kv["flows"]
                )
            })
            .collect();
        (
            stat_field(&file, "Flows"),
            stat_field(&file, "Sequence failures"),
            exporters,
        )
    };

    let c = Nfcapd::start(&["-B", "4194304"]);
    let p1 = one_run(c.addr(), None, &recs[..40]);
    let p2 = one_run(c.addr(), None, &recs[40..]);
    assert_ne!(p1, p2, "each run sends from a port of its own");
    let (flows_n, failures, exporters) = stored(c);
    assert_eq!((flows_n, failures), (100, 1));
    assert_eq!(exporters, ["127.0.0.1 domain 9 failures 1 flows 100"]);

    let c = Nfcapd::start(&["-B", "4194304"]);
    one_run(c.addr(), Some(1), &recs[..40]);
    one_run(c.addr(), Some(2), &recs[40..]);
    let (flows_n, failures, exporters) = stored(c);
    assert_eq!((flows_n, failures), (100, 0));
    assert_eq!(
        exporters,
        [
            "127.0.0.1 domain 1 failures 0 flows 40",
            "127.0.0.1 domain 2 failures 0 flows 60"
        ]
    );
}
