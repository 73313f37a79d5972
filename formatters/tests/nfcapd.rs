//! IPFIX messages decoded by nfdump's collector `nfcapd` (Debian package
//! `nfdump`, installed by scripts/setup.sh), the second real collector
//! after tshark (tests/ipfix.rs).
//!
//! Each test starts its own `nfcapd` on 127.0.0.1 with a fresh data
//! directory, sends the encoder's messages to it over UDP, waits until the
//! collector has decoded every record (its `-E` print), stops it with
//! SIGTERM (which flushes and closes the file) and reads the file back with
//! `nfdump`.
//!
//! nfdump 1.7.1 (Debian 12) decodes these RFC 8158 elements, and every one
//! is checked against the record: natEvent (230), sourceIPv4Address (8),
//! destinationIPv4Address (12), sourceTransportPort (7),
//! destinationTransportPort (11), protocolIdentifier (4),
//! postNATSourceIPv4Address (225), postNAPTSourceTransportPort (227),
//! ingressVRFID (234) and observationTimeMilliseconds (323, its event
//! time). It skips the rest without decoding them: initiatorOctets /
//! responderOctets (231/232), initiatorPackets / responderPackets
//! (298/299), natPoolId (283), portRangeStart/End/StepSize/NumPorts
//! (361-364), natQuotaExceededEvent (466) and the limit elements
//! (471-475); tshark checks those in tests/ipfix.rs.

mod acl;
mod common;

use dplog_schema_nat::NatFormatSpec as _;
use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use acl::*;
use common::*;
use dplog_core::schema::HasSchema;
use dplog_core::Formatter;
use dplog_formatters::ipfix::split_messages;
use dplog_formatters::{ExportClock, Format, FormatSpec, IpfixOptions};
use serde_json::Value;

/// A running `nfcapd` on 127.0.0.1; killed on drop if still running.
struct Nfcapd {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
    /// Flow records nfcapd has decoded so far (counted from its `-E`
    /// debug print on stdout).
    decoded: Arc<AtomicUsize>,
}

/// Bytes waiting in the receive queue of the UDP socket bound to
/// 127.0.0.1:`port`, from /proc/net/udp; `None` while no socket is bound.
fn rx_queue(port: u16) -> Option<u64> {
    let table = std::fs::read_to_string("/proc/net/udp").ok()?;
    let local = format!("0100007F:{port:04X}");
    table.lines().skip(1).find_map(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        if cols.get(1) == Some(&local.as_str()) {
            let rx = cols.get(4)?.split(':').nth(1)?;
            u64::from_str_radix(rx, 16).ok()
        } else {
            None
        }
    })
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "timed out waiting until {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Nfcapd {
    /// Starts nfcapd on a port below the ephemeral range (so no client
    /// socket of a test running in parallel can take it in between); a
    /// port in use makes nfcapd exit, and the next one is tried.
    fn start() -> Nfcapd {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        for _ in 0..50 {
            // Relaxed: only uniqueness of the counter values matters.
            let k = NEXT.fetch_add(1, Ordering::Relaxed);
            let port = 20_000 + ((std::process::id() as usize * 64 + k) % 10_000) as u16;
            if rx_queue(port).is_some() {
                continue;
            }
            if let Some(c) = Nfcapd::try_start(port) {
                return c;
            }
        }
        panic!("no free UDP port for nfcapd in 20000..30000");
    }

    fn try_start(port: u16) -> Option<Nfcapd> {
        let dir = tempfile::tempdir().unwrap();
        // -E: also print every decoded record on stdout, so the test knows
        // when nfcapd has processed everything it was sent. stdbuf
        // (coreutils): line-buffered stdout, else stdio holds the print in
        // its pipe buffer until exit.
        let mut child = Command::new("stdbuf")
            .args(["-oL", "nfcapd", "-E", "-b", "127.0.0.1", "-p"])
            .arg(port.to_string())
            .args(["-t", "3600", "-w"])
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("stdbuf (coreutils) not found");
        let decoded = Arc::new(AtomicUsize::new(0));
        let stdout = child.stdout.take().unwrap();
        let d = decoded.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.starts_with("Flow Record") {
                    // Relaxed: a counter polled by `finish`; the records
                    // themselves are read back from the file after exit.
                    d.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        let mut c = Nfcapd {
            child,
            port,
            dir,
            decoded,
        };
        let t0 = Instant::now();
        loop {
            if let Some(status) = c.child.try_wait().unwrap() {
                // 127 from stdbuf: nfcapd is not installed.
                assert_ne!(
                    status.code(),
                    Some(127),
                    "nfcapd not found: run scripts/setup.sh (Debian package nfdump)"
                );
                return None;
            }
            if rx_queue(port).is_some() {
                // Bound; still alive a moment later means the bind was its own.
                std::thread::sleep(Duration::from_millis(30));
                if c.child.try_wait().unwrap().is_none() {
                    return Some(c);
                }
                return None;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "nfcapd did not bind 127.0.0.1:{port}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends every message of `stream` as one datagram.
    fn send(&self, stream: &[u8]) -> usize {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let msgs = split_messages(stream);
        assert_eq!(
            msgs.iter().map(|m| m.len()).sum::<usize>(),
            stream.len(),
            "the stream is whole messages"
        );
        for m in &msgs {
            sock.send_to(m, ("127.0.0.1", self.port)).unwrap();
            // Stay well below the default socket buffer.
            wait_until("nfcapd reads its socket", || {
                rx_queue(self.port).map_or(true, |q| q < 64 * 1024)
            });
        }
        msgs.len()
    }

    /// Waits until nfcapd has decoded `records` flow records, stops it
    /// (SIGTERM flushes and renames the data file) and returns the file.
    fn finish(mut self, records: usize) -> (PathBuf, tempfile::TempDir) {
        wait_until("nfcapd decodes every record sent", || {
            self.decoded.load(Ordering::Relaxed) >= records
        });
        let st = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "nfcapd exit: {status}");
        let file = std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("nfcapd.2"))
            })
            .expect("nfcapd wrote a data file");
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap());
        (file, dir)
    }
}

impl Drop for Nfcapd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn nfdump(file: &Path, args: &[&str]) -> String {
    let out = Command::new("nfdump")
        .arg("-r")
        .arg(file)
        .args(args)
        .output()
        .expect("nfdump not found: run scripts/setup.sh (Debian package nfdump)");
    assert!(
        out.status.success(),
        "nfdump: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn flows(file: &Path) -> Vec<Value> {
    let text = nfdump(file, &["-o", "json"]);
    serde_json::from_str::<Vec<Value>>(&text)
        .unwrap_or_else(|e| panic!("nfdump -o json: {e}\n{text}"))
}

fn ipfix(mtu: usize) -> dplog_schema_nat::NatFormatter {
    FormatSpec {
        kind: Format::Ipfix,
        ipfix: IpfixOptions {
            mtu,
            export_clock: ExportClock::Record,
            ..Default::default()
        },
        ..Default::default()
    }
    .nat_formatter()
    .unwrap()
}

/// The value of `key` as text (nfdump prints some numbers as strings).
fn s(v: &Value, key: &str) -> String {
    match &v[key] {
        Value::String(s) => s.clone(),
        Value::Null => panic!("no {key:?} in {v}"),
        other => other.to_string(),
    }
}

#[test]
fn nfcapd_decodes_every_field_it_knows_of_every_nat_record() {
    let mut f = ipfix(1500);
    let mut out = Vec::new();
    for r in &all_records() {
        f.format(r, &mut out);
    }
    let c = Nfcapd::start();
    assert_eq!(c.send(&out), 1);
    let (file, _dir) = c.finish(7);
    let v = flows(&file);
    assert_eq!(v.len(), 7, "{v:#?}");

    // Session create and delete (common::session).
    for (r, event, name, t) in [
        (
            &v[0],
            "4",
            "NAT44 session create",
            "2026-01-01T00:00:00.123",
        ),
        (
            &v[1],
            "5",
            "NAT44 session delete",
            "2026-01-01T00:01:01.623",
        ),
    ] {
        assert_eq!(s(r, "nat_event_id"), event);
        assert_eq!(s(r, "nat_event"), name);
        assert_eq!(s(r, "proto"), "6");
        assert_eq!(s(r, "src4_addr"), "10.0.0.6");
        assert_eq!(s(r, "src_port"), "51234");
        assert_eq!(s(r, "src4_xlt_ip"), "198.51.100.3");
        assert_eq!(s(r, "src_xlt_port"), "1024");
        assert_eq!(s(r, "dst4_addr"), "203.0.113.5");
        assert_eq!(s(r, "dst_port"), "443");
        assert_eq!(s(r, "ingress_vrf"), "7");
        assert_eq!(s(r, "t_event"), t);
    }
    // Port block allocation / release.
    for (r, event, vrf, t) in [
        (&v[2], "16", "3", "2026-01-01T00:00:00.124"),
        (&v[3], "17", "0", "2026-01-01T00:00:00.125"),
    ] {
        assert_eq!(s(r, "nat_event_id"), event);
        assert_eq!(s(r, "src4_addr"), "10.0.0.7");
        assert_eq!(s(r, "src4_xlt_ip"), "198.51.100.4");
        assert_eq!(s(r, "ingress_vrf"), vrf);
        assert_eq!(s(r, "t_event"), t);
    }
    // Addresses exhausted: natEvent and time (natPoolId is not decoded).
    assert_eq!(s(&v[4], "nat_event_id"), "3");
    assert_eq!(s(&v[4], "t_event"), "2026-01-01T00:00:00.126");
    // Ports exhausted.
    assert_eq!(s(&v[5], "nat_event_id"), "12");
    assert_eq!(s(&v[5], "src4_xlt_ip"), "198.51.100.254");
    assert_eq!(s(&v[5], "proto"), "17");
    assert_eq!(s(&v[5], "t_event"), "2026-01-01T00:00:00.127");
    // Quota exceeded (max entries per user): the subtype and limit are
    // not decoded; the source address is.
    assert_eq!(s(&v[6], "nat_event_id"), "13");
    assert_eq!(s(&v[6], "src4_addr"), "10.0.0.9");
    assert_eq!(s(&v[6], "t_event"), "2026-01-01T00:00:00.128");
}

#[test]
fn nfcapd_sees_no_sequence_failure_across_many_messages() {
    // 300 creates at a 256-byte MTU: dozens of messages, templates re-sent
    // every 20 s of record time. nfcapd checks each message's sequence
    // number against the data records it has counted from that exporter;
    // a sequence that counted messages would show up as failures.
    let mut f = ipfix(256);
    let mut out = Vec::new();
    for i in 0..300u64 {
        let mut r = session(4);
        r.timestamp_ns = T0 + i * 250_000_000;
        r.src_port = 10_000 + i as u16;
        f.format(&r, &mut out);
    }
    let c = Nfcapd::start();
    let msgs = c.send(&out);
    assert!(msgs > 30, "{msgs} messages");
    let (file, _dir) = c.finish(300);
    assert_eq!(stat_field(&file, "Flows"), 300);
    assert_eq!(stat_field(&file, "Sequence failures"), 0);
    let ports: Vec<u64> = flows(&file)
        .iter()
        .map(|r| s(r, "src_port").parse().unwrap())
        .collect();
    assert_eq!(ports, (10_000..10_300).collect::<Vec<u64>>());

    // Control: the same stream with one message's sequence number off by
    // one is reported, so the zero above is nfcapd's check passing.
    let mut bad = out.clone();
    let mut at = 0;
    for (k, m) in split_messages(&out).iter().enumerate() {
        if k == 10 {
            let seq = u32::from_be_bytes(bad[at + 8..at + 12].try_into().unwrap());
            bad[at + 8..at + 12].copy_from_slice(&(seq + 1).to_be_bytes());
        }
        at += m.len();
    }
    let c = Nfcapd::start();
    c.send(&bad);
    let (file, _dir) = c.finish(300);
    assert!(stat_field(&file, "Sequence failures") >= 1);
}

#[test]
fn nfcapd_skips_enterprise_elements_and_decodes_the_iana_ones_around_them() {
    // tests/acl: dropReason, logged and ruleId go out as enterprise
    // elements between and after IANA ones. nfcapd does not know them; it
    // must skip each by its length to read the elements after it at the
    // right offset, and stamp the flow from the TSC event time.
    let mut f = FormatSpec {
        kind: Format::Ipfix,
        ipfix: IpfixOptions {
            export_clock: ExportClock::Record,
            ..Default::default()
        },
        ..Default::default()
    }
    .formatter(&[AclDrop::schema()])
    .unwrap();
    f.set_tsc_calibration(ACL_CAL);
    let mut out = Vec::new();
    for (i, r) in [
        acl_drop(1_234, 1, 7, true),
        acl_drop(2_500, 2, 0x0102_0304, false),
    ]
    .iter_mut()
    .enumerate()
    {
        r.dst_port = 53 + i as u16;
        f.format(&*r, &mut out);
    }
    let c = Nfcapd::start();
    assert_eq!(c.send(&out), 1);
    let (file, _dir) = c.finish(2);
    let v = flows(&file);
    assert_eq!(v.len(), 2, "{v:#?}");
    for (r, addr, t, dport, vlan) in [
        (&v[0], "2001:db8::1", "2026-01-01T00:00:01.234", "53", "101"),
        (&v[1], "2001:db8::2", "2026-01-01T00:00:02.500", "54", "102"),
    ] {
        assert_eq!(s(r, "src6_addr"), addr, "{r}");
        assert_eq!(s(r, "proto"), "17", "{r}");
        assert_eq!(s(r, "src_port"), "5353", "{r}");
        assert_eq!(s(r, "dst_port"), dport, "{r}");
        assert_eq!(s(r, "src_vlan"), vlan, "{r}");
        assert_eq!(s(r, "t_event"), t, "{r}");
    }
}

/// A counter of `nfdump -I` (file statistics), e.g. `Flows`.
fn stat_field(file: &Path, name: &str) -> u64 {
    let stat = nfdump(file, &["-I"]);
    stat.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|rest| rest.trim_start_matches([' ', ':']).trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name:?} in nfdump -I:\n{stat}"))
}
