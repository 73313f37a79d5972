//! RFC 5848 signature blocks end to end: a user's record type (a DHCP
//! server's lease, not NAT) logged through a real `Logger` into a signing
//! syslog sink, received by a real rsyslogd on loopback (UDP, TCP, RELP,
//! unix datagram and unix stream, each into its own file, raw), and the
//! receiver's file checked by the verifier library and the `dplog-verify
//! --syslog` binary. Then each manipulation of a received file is found
//! at its line and byte.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use dplog_core::schema::{HasSchema, Schema};
use dplog_core::{schema, Logger, LoggerConfig, Record, RecordHeader};
use dplog_formatters::{Format, FormatSpec};
use dplog_sinks::seal;
use dplog_sinks::syslog::SyslogSignOptions;
use dplog_sinks::verify_syslog::{verify_syslog_file, SyslogLimits, SyslogProblem, SyslogReport};
use dplog_sinks::{SyslogCounters, SyslogSink, SyslogSinkOptions, SyslogTransport};

/// A DHCP server's lease grant: a record type a user declares.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Lease {
    header: RecordHeader,
    time_ns: u64,
    lease_s: u64,
    client: u32,
    seq: u32,
    relay_port: u16,
    protocol: u8,
    pad: [u8; 5],
}
const _: () = assert!(std::mem::size_of::<Lease>() == 40);

impl Record for Lease {
    const SCHEMA_ID: u16 = 710;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 8 + 4 + 4 + 2 + 1 + 5 = 40 bytes without
// padding (size asserted above); the schema is built from its own
// offset_of! values and size_of.
unsafe impl HasSchema for Lease {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(Lease, id = 710, name = "dhcpLease", [
                time_ns => "observationTimeMilliseconds": NsTimestamp, ie 323;
                lease_s => "leaseSeconds": U64, ie 0;
                client => "clientAddress": Ipv4, ie 0;
                seq => "leaseSeq": U32, ie 0;
                relay_port => "relayPort": Port, ie 0;
                protocol => "protocolIdentifier": Protocol, ie 4;
            ])
            .unwrap()
        })
    }
}

fn lease(seq: u32) -> Lease {
    Lease {
        header: RecordHeader::of::<Lease>(),
        time_ns: 1_767_225_600_000_000_000 + u64::from(seq) * 1_000_000,
        lease_s: 3600 + u64::from(seq % 7) * 600,
        client: 0x0A01_0000 + seq,
        seq,
        relay_port: 67,
        protocol: 17,
        pad: [0; 5],
    }
}

const IMRELP: &str = "/usr/lib/x86_64-linux-gnu/rsyslog/imrelp.so";

/// rsyslogd with one input per transport, each into its own file,
/// every message raw on one line.
struct Rsyslog {
    d: dplog_testkit::rsyslog::Rsyslogd,
    udp: u16,
    relp: Option<u16>,
}

impl Rsyslog {
    fn start() -> Option<Rsyslog> {
        Self::start_on(dplog_testkit::free_udp_port())
    }

    /// As `start`, its UDP input on port `udp`.
    fn start_on(udp: u16) -> Option<Rsyslog> {
        if !dplog_testkit::rsyslog::installed() {
            eprintln!(
                "SKIPPED: {} not installed (run scripts/setup.sh)",
                dplog_testkit::rsyslog::RSYSLOGD
            );
            return None;
        }
        let relp = Path::new(IMRELP)
            .exists()
            .then(dplog_testkit::free_tcp_port);
        if relp.is_none() {
            eprintln!("note: {IMRELP} not installed: no RELP case (rsyslog-relp)");
        }
        let relp_conf = relp.map_or(String::new(), |p| {
            format!(
                "module(load=\"imrelp\")\n\
                 input(type=\"imrelp\" address=\"127.0.0.1\" port=\"{p}\" ruleset=\"relp\")\n"
            )
        });
        let mut conf = format!(
            r#"module(load="imudp")
module(load="imtcp")
module(load="imptcp")
module(load="imuxsock" SysSock.Use="off")
template(name="raw" type="string" string="%rawmsg%\n")
input(type="imudp" address="127.0.0.1" port="{udp}" rcvbufSize="8m" ruleset="udp")
input(type="imtcp" address="127.0.0.1" port="{{port}}" ruleset="tcp")
input(type="imptcp" path="{{dir}}/stream.sock" unlink="on" ruleset="unix_stream")
input(type="imuxsock" Socket="{{dir}}/dgram.sock" RateLimit.Interval="0" ruleset="unix_dgram")
{relp_conf}"#
        );
        for r in ["udp", "tcp", "relp", "unix_stream", "unix_dgram"] {
            conf.push_str(&format!(
                "ruleset(name=\"{r}\" queue.type=\"Direct\") {{\n  action(type=\"omfile\" \
                 file=\"{{dir}}/{r}.log\" template=\"raw\" flushOnTXEnd=\"on\" \
                 asyncWriting=\"off\")\n}}\n"
            ));
        }
        let d = dplog_testkit::rsyslog::Rsyslogd::start_tcp(&conf);
        let dir = d.dir().to_path_buf();
        dplog_testkit::wait_until("rsyslogd's inputs", Duration::from_secs(30), || {
            dplog_testkit::udp_rx_queue(udp).is_some()
                && relp.map_or(true, dplog_testkit::tcp_listening)
                && dir.join("stream.sock").exists()
                && dir.join("dgram.sock").exists()
        });
        Some(Rsyslog { d, udp, relp })
    }

    fn transports(&self) -> Vec<(&'static str, SyslogTransport)> {
        let lo = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
        let mut t = vec![
            ("udp", SyslogTransport::Udp(lo(self.udp))),
            ("tcp", SyslogTransport::Tcp(lo(self.d.port()))),
            (
                "unix_stream",
                SyslogTransport::UnixStream(self.d.dir().join("stream.sock")),
            ),
            (
                "unix_dgram",
                SyslogTransport::UnixDatagram(self.d.dir().join("dgram.sock")),
            ),
        ];
        if let Some(p) = self.relp {
            t.push(("relp", SyslogTransport::Relp(lo(p))));
        }
        t
    }

    fn out(&self, name: &str) -> PathBuf {
        self.d.dir().join(format!("{name}.log"))
    }

    /// Waits (up to 60 s) until `name`'s file holds `lines` lines; then
    /// returns its bytes.
    fn wait_lines(&self, name: &str, lines: usize) -> Vec<u8> {
        let t0 = Instant::now();
        loop {
            let b = std::fs::read(self.out(name)).unwrap_or_default();
            let n = b.iter().filter(|&&c| c == b'\n').count();
            if n >= lines {
                return b;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "{name}: {n} of {lines} lines arrived"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

struct Keys {
    key: PathBuf,
    public: PathBuf,
    rsid: PathBuf,
}

fn keys(dir: &Path, name: &str) -> Keys {
    let k = Keys {
        key: dir.join(format!("{name}.key")),
        public: dir.join(format!("{name}.pub")),
        rsid: dir.join(format!("{name}.rsid")),
    };
    seal::generate_key_pair(&k.key, &k.public).unwrap();
    k
}

fn sign_opts(k: &Keys, every: usize) -> SyslogSignOptions {
    SyslogSignOptions {
        every_messages: every,
        // Only the count, drain and close make blocks: the file's layout
        // does not depend on the machine's speed.
        every_ms: 0,
        ..SyslogSignOptions::new(&k.key, &k.rsid)
    }
}

/// Logs leases `from..to` through a real `Logger` into a signing sink
/// over `t`, and stops it (the last Signature Block is sent at the
/// drain). Returns the sink's counters.
fn run(t: SyslogTransport, k: &Keys, every: usize, from: u32, to: u32) -> (u64, u64, u64) {
    let mut o = SyslogSinkOptions::new(t);
    o.sign = Some(sign_opts(k, every));
    let sink = SyslogSink::new(o).unwrap();
    let c = sink.counters();
    let f = FormatSpec {
        kind: Format::Rfc5424,
        ..FormatSpec::default()
    }
    .formatter(&[Lease::schema()])
    .unwrap();
    let cfg = LoggerConfig {
        ring_capacity: 1024,
        shutdown_timeout_ms: 60_000,
        drop_reports: false,
        ..LoggerConfig::default()
    };
    let logger = Logger::start(cfg, f, sink).unwrap();
    let mut p = logger.producer().unwrap();
    for i in from..to {
        assert!(p.log(lease(i)));
    }
    drop(p);
    let st = logger.shutdown().unwrap();
    assert_eq!(st.written_records, u64::from(to - from), "{st:?}");
    assert_eq!(st.dropped_sink + st.dropped_shutdown, 0, "{st:?}");
    let g = SyslogCounters::get;
    (
        g(&c.signed_messages),
        g(&c.signature_blocks),
        g(&c.certificate_blocks),
    )
}

fn check(path: &Path, k: &Keys) -> SyslogReport {
    let vk = seal::load_public_key(&k.public).unwrap();
    verify_syslog_file(path, &[vk], None, SyslogLimits::default()).unwrap()
}

fn bin(path: &Path, k: &Keys, extra: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-verify"))
        .arg("--syslog")
        .arg("--key")
        .arg(&k.public)
        .args(extra)
        .arg(path)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The lines of a received file with their byte offsets.
fn lines(b: &[u8]) -> Vec<(u64, Vec<u8>)> {
    let mut at = 0u64;
    b.split_inclusive(|&c| c == b'\n')
        .map(|l| {
            let o = at;
            at += l.len() as u64;
            (o, l.to_vec())
        })
        .collect()
}

fn is_block(l: &[u8]) -> bool {
    l.windows(7).any(|w| w == b"[ssign ") || l.windows(12).any(|w| w == b"[ssign-cert ")
}

fn is_sig(l: &[u8]) -> bool {
    l.windows(7).any(|w| w == b"[ssign ")
}

/// Every transport: N leases, one block per 25, into rsyslogd; the
/// receiver's file verifies whole, by the library and the binary, and
/// holds each lease once in order with the blocks between them.
#[test]
fn every_transport_delivers_a_file_that_verifies() {
    let Some(r) = Rsyslog::start() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    const N: u32 = 300;
    for (name, t) in r.transports() {
        let k = keys(d.path(), name);
        let (hashed, sigs, certs) = run(t, &k, 25, 0, N);
        assert_eq!(hashed, u64::from(N), "{name}");
        assert_eq!(sigs, 12, "{name}: 300 messages, 25 a block");
        // At the start, and again after ten Signature Blocks.
        assert_eq!(certs, 2, "{name}");
        let body = r.wait_lines(name, N as usize + 14);
        let ls = lines(&body);
        let leases: Vec<&(u64, Vec<u8>)> = ls.iter().filter(|(_, l)| !is_block(l)).collect();
        assert_eq!(leases.len(), N as usize, "{name}");
        for (i, (_, l)) in leases.iter().enumerate() {
            let s = String::from_utf8_lossy(l);
            assert!(
                s.contains(&format!("leaseSeq=\"{i}\"")),
                "{name}: lease {i} out of place: {s}"
            );
        }
        // The Certificate Block comes first, before any record.
        assert!(
            ls[0].1.windows(12).any(|w| w == b"[ssign-cert "),
            "{name}: {}",
            String::from_utf8_lossy(&ls[0].1)
        );
        let rep = check(&r.out(name), &k);
        assert!(rep.finding.is_none(), "{name}: {:?}", rep.finding);
        assert_eq!(rep.verified, u64::from(N), "{name}");
        assert_eq!(rep.blocks, 12, "{name}");
        assert_eq!(rep.unsigned, 0, "{name}");
        assert_eq!(rep.sessions, vec![1], "{name}");
        assert!(rep.notes.is_empty(), "{name}: {:?}", rep.notes);
        let (code, out, err) = bin(&r.out(name), &k, &["--strict"]);
        assert_eq!(code, 0, "{name}: {out} {err}");
        assert!(
            out.contains("verified 300 message(s) against 12 signature block(s) in 1 session(s)"),
            "{name}: {out}"
        );
    }
}

/// A TCP run of 100 leases (blocks of 10), the received file kept for
/// the manipulations; then a second session (restart: RSID 2).
struct Received {
    _r: Rsyslog,
    _d: tempfile::TempDir,
    k: Keys,
    body: Vec<u8>,
    dir: PathBuf,
}

fn received() -> Option<Received> {
    let r = Rsyslog::start()?;
    let d = tempfile::tempdir().unwrap();
    let k = keys(d.path(), "tcp");
    let t = r.transports().remove(1).1;
    run(t, &k, 10, 0, 100);
    // 100 leases, 10 Signature Blocks, 2 Certificate Blocks.
    let body = r.wait_lines("tcp", 112);
    let dir = d.path().to_path_buf();
    Some(Received {
        _r: r,
        _d: d,
        k,
        body,
        dir,
    })
}

impl Received {
    /// Writes `ls` as a manipulated copy and checks it.
    fn check(&self, name: &str, ls: &[(u64, Vec<u8>)]) -> (PathBuf, SyslogReport) {
        let p = self.dir.join(name);
        std::fs::write(
            &p,
            ls.iter().flat_map(|(_, l)| l.clone()).collect::<Vec<u8>>(),
        )
        .unwrap();
        let rep = check(&p, &self.k);
        (p, rep)
    }

    /// Index in the file's lines of the `n`-th lease (from 0).
    fn lease_line(&self, n: usize) -> usize {
        lines(&self.body)
            .iter()
            .enumerate()
            .filter(|(_, (_, l))| !is_block(l))
            .nth(n)
            .unwrap()
            .0
    }
}

fn assert_found(rep: &SyslogReport, problem: SyslogProblem, line: usize, byte: u64) {
    let f = rep
        .finding
        .as_ref()
        .unwrap_or_else(|| panic!("no finding: {rep:?}"));
    assert_eq!(
        (f.problem, f.line, f.byte),
        (problem, line as u64 + 1, byte),
        "{f}"
    );
}

#[test]
fn manipulations_of_the_received_file_are_found_at_their_line_and_byte() {
    let Some(rx) = received() else {
        return;
    };
    let orig = lines(&rx.body);
    let (p, rep) = rx.check("orig.log", &orig);
    assert!(rep.finding.is_none(), "{:?}", rep.finding);
    assert_eq!(rep.verified, 100);
    let _ = p;

    // 1. A lease removed: found at the line that now holds its place.
    let i = rx.lease_line(37);
    let mut ls = orig.clone();
    ls.remove(i);
    let (p, rep) = rx.check("removed.log", &ls);
    assert_found(&rep, SyslogProblem::Removed, i, orig[i].0);
    let (code, _, err) = bin(&p, &rx.k, &[]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains(&format!("removed at line {} (byte {})", i + 1, orig[i].0)),
        "{err}"
    );

    // 2. A lease altered (one digit of its lease time).
    let i = rx.lease_line(52);
    let mut ls = orig.clone();
    let l = &mut ls[i].1;
    let at = l.windows(13).position(|w| w == b"leaseSeconds=").unwrap() + 14;
    l[at] = if l[at] == b'9' { b'8' } else { b'9' };
    let (p, rep) = rx.check("altered.log", &ls);
    assert_found(&rep, SyslogProblem::Altered, i, orig[i].0);
    let (code, _, err) = bin(&p, &rx.k, &[]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains(&format!("altered at line {}", i + 1)), "{err}");

    // 3. A forged lease inserted before lease 64.
    let i = rx.lease_line(64);
    let mut ls = orig.clone();
    let mut forged = orig[i].1.clone();
    let at = forged.windows(9).position(|w| w == b"leaseSeq=").unwrap() + 10;
    forged.splice(at..at, b"9".iter().copied());
    ls.insert(i, (0, forged));
    let (_, rep) = rx.check("inserted.log", &ls);
    assert_found(&rep, SyslogProblem::Inserted, i, orig[i].0);

    // 4. Two leases swapped.
    let n = (20..90)
        .find(|&n| rx.lease_line(n + 1) == rx.lease_line(n) + 1)
        .unwrap();
    let (a, b) = (rx.lease_line(n), rx.lease_line(n + 1));
    let mut ls = orig.clone();
    ls.swap(a, b);
    let (_, rep) = rx.check("reordered.log", &ls);
    assert_found(&rep, SyslogProblem::Reordered, a, orig[a].0);

    // 5. A Signature Block removed, with its leases (an attacker who
    //    removes ten records and the block that signs them): the next
    //    block's FMN shows it.
    let sigs: Vec<usize> = (0..orig.len()).filter(|&j| is_sig(&orig[j].1)).collect();
    assert_eq!(sigs.len(), 10);
    let mut ls = orig.clone();
    let from = rx.lease_line(30);
    ls.drain(from..=sigs[3]);
    let (_, rep) = rx.check("block_removed.log", &ls);
    let next = sigs[4] - (sigs[3] + 1 - from);
    assert_found(
        &rep,
        SyslogProblem::BlockRemoved,
        next,
        orig[sigs[4]].0 - (orig[sigs[3] + 1].0 - orig[from].0),
    );

    // 6. A Signature Block altered (a hash changed to fit an altered
    //    record): its signature no longer verifies.
    let mut ls = orig.clone();
    let j = sigs[6];
    let l = &mut ls[j].1;
    let at = l.windows(4).position(|w| w == b"HB=\"").unwrap() + 4;
    l[at] = if l[at] == b'A' { b'B' } else { b'A' };
    let (_, rep) = rx.check("block_altered.log", &ls);
    assert_found(&rep, SyslogProblem::BadSignature, j, orig[j].0);

    // 7. The tail cut after the 8th block: the leases after it are
    //    unsigned (a note, not proven: exit 4; --strict fails).
    let mut ls = orig.clone();
    ls.retain(|(o, l)| *o <= orig[sigs[7]].0 || !is_sig(l));
    let (p, rep) = rx.check("tail_cut.log", &ls);
    assert!(rep.finding.is_none(), "{:?}", rep.finding);
    assert_eq!((rep.verified, rep.unsigned), (80, 20));
    let first_unsigned = rx.lease_line(80);
    assert!(
        rep.notes[0].contains(&format!(
            "20 message line(s) from line {} (byte {})",
            first_unsigned + 1,
            orig[first_unsigned].0
        )),
        "{:?}",
        rep.notes
    );
    assert_eq!(bin(&p, &rx.k, &[]).0, 4);
    assert_eq!(bin(&p, &rx.k, &["--strict"]).0, 3);

    // 8. Another host's message in the same file: inserted, unless
    //    --host names the signer's HOSTNAME (the records' and the
    //    blocks', this host's name by default).
    let host = String::from_utf8_lossy(&orig[0].1)
        .split(' ')
        .nth(2)
        .unwrap()
        .to_string();
    let i = rx.lease_line(70);
    let mut ls = orig.clone();
    ls.insert(
        i,
        (
            0,
            b"<13>1 2026-12-07T04:20:00Z printer-3 lpd 99 - - paper jam\n".to_vec(),
        ),
    );
    let (p, rep) = rx.check("other_host.log", &ls);
    assert_found(&rep, SyslogProblem::Inserted, i, orig[i].0);
    let (code, out, err) = bin(&p, &rx.k, &["--host", &host, "--strict"]);
    assert_eq!(code, 0, "{out} {err}");
    assert!(out.contains("verified 100 message(s)"), "{out}");

    // 9. A malformed block: an error naming its line, exit 1, no panic.
    let mut ls = orig.clone();
    let j = sigs[2];
    let s = String::from_utf8(ls[j].1.clone()).unwrap();
    ls[j].1 = s.replacen(" CNT=\"10\"", "", 1).into_bytes();
    let (p, _) = (rx.dir.join("malformed.log"), ());
    std::fs::write(
        &p,
        ls.iter().flat_map(|(_, l)| l.clone()).collect::<Vec<u8>>(),
    )
    .unwrap();
    let vk = seal::load_public_key(&rx.k.public).unwrap();
    let e = verify_syslog_file(&p, &[vk], None, SyslogLimits::default()).unwrap_err();
    assert!(
        e.to_string()
            .contains(&format!("line {}: malformed RFC 5848 block", j + 1)),
        "{e}"
    );
    let (code, _, err) = bin(&p, &rx.k, &[]);
    assert_eq!(code, 1, "{err}");
    // A DSA block (RFC 5848's scheme 1): refused, not passed unchecked.
    let mut ls = orig.clone();
    let s = String::from_utf8(ls[j].1.clone()).unwrap();
    ls[j].1 = s.replacen("VER=\"0129\"", "VER=\"0111\"", 1).into_bytes();
    std::fs::write(
        &p,
        ls.iter().flat_map(|(_, l)| l.clone()).collect::<Vec<u8>>(),
    )
    .unwrap();
    let (code, _, err) = bin(&p, &rx.k, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "line {}: an RFC 5848 block with VER=\"0111\"",
            j + 1
        )) && err.contains("OpenPGP DSA) is not implemented"),
        "{err}"
    );
    // A line above --max-line: an error too.
    let (code, _, err) = bin(&rx.dir.join("orig.log"), &rx.k, &["--max-line", "100"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("line 1: longer than 100 bytes"), "{err}");
}

/// A restart is a new reboot session (RSID 2) that verifies on its own;
/// a session signed by another key is reported at its Certificate Block.
#[test]
fn sessions_across_restarts_and_another_signer() {
    let Some(r) = Rsyslog::start() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let k = keys(d.path(), "a");
    let tcp = || r.transports().remove(1).1;
    run(tcp(), &k, 10, 0, 30);
    run(tcp(), &k, 10, 30, 45);
    // 45 leases, 3 + 2 Signature Blocks, 2 Certificate Blocks.
    let body = r.wait_lines("tcp", 52);
    let rep = check(&r.out("tcp"), &k);
    assert!(rep.finding.is_none(), "{:?}", rep.finding);
    assert_eq!(rep.sessions, vec![1, 2]);
    assert_eq!((rep.verified, rep.blocks), (45, 5));
    assert_eq!(std::fs::read_to_string(&k.rsid).unwrap(), "2\n");

    // Another signer (its own key) to the same receiver: its Certificate
    // Block names it.
    let other = keys(d.path(), "b");
    std::fs::copy(&k.rsid, &other.rsid).unwrap();
    run(tcp(), &other, 10, 45, 50);
    let body2 = r.wait_lines("tcp", 52 + 7);
    let cert_line = lines(&body2).len() - 7;
    let rep = check(&r.out("tcp"), &k);
    assert_found(&rep, SyslogProblem::OtherKey, cert_line, body.len() as u64);
    // Both keys given: it verifies.
    let vks = [
        seal::load_public_key(&k.public).unwrap(),
        seal::load_public_key(&other.public).unwrap(),
    ];
    let rep = verify_syslog_file(&r.out("tcp"), &vks, None, SyslogLimits::default()).unwrap();
    assert!(rep.finding.is_none(), "{:?}", rep.finding);
    assert_eq!(rep.sessions, vec![1, 2, 3]);

    // A session replayed after a later one (an old run copied to the end
    // of the file) has an RSID that does not increase.
    let ls = lines(&body);
    let mut replay = body2.clone();
    for (_, l) in &ls[..ls.len() / 2] {
        replay.extend_from_slice(l);
    }
    let p = d.path().join("replayed.log");
    std::fs::write(&p, &replay).unwrap();
    let rep = verify_syslog_file(&p, &vks, None, SyslogLimits::default()).unwrap();
    assert_found(
        &rep,
        SyslogProblem::SessionOrder,
        lines(&body2).len(),
        body2.len() as u64,
    );
}

/// The key is checked when the sink is made: missing, readable by
/// others, or not a key.
#[test]
fn a_bad_key_file_is_refused_with_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    let k = keys(d.path(), "k");
    let make = |key: &Path| {
        let mut o = SyslogSinkOptions::new(SyslogTransport::Udp(([127, 0, 0, 1], 9).into()));
        o.sign = Some(SyslogSignOptions::new(key, d.path().join("rsid")));
        SyslogSink::new(o).map(|_| ()).unwrap_err().to_string()
    };
    let e = make(&d.path().join("nope.key"));
    assert!(e.contains("nope.key"), "{e}");
    std::fs::set_permissions(&k.key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = make(&k.key);
    assert!(e.contains("it must be 0600"), "{e}");
    let e = make(&k.public);
    assert!(e.contains("k.pub"), "{e}");
    // Blocks that would not fit a datagram are refused too.
    std::fs::set_permissions(&k.key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut o = SyslogSinkOptions::new(SyslogTransport::Udp(([127, 0, 0, 1], 9).into()));
    o.sign = Some(SyslogSignOptions {
        every_messages: 99,
        ..SyslogSignOptions::new(&k.key, d.path().join("rsid"))
    });
    let e = SyslogSink::new(o).map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("above max_datagram_bytes 2048"), "{e}");
    assert!(
        !d.path().join("rsid").exists(),
        "no session taken by a refused sink"
    );
}

/// `every_ms`: leases that wait for a block get one from the runtime's
/// ticks, before any count is reached; and a sink used without a
/// `Logger` (write, then close) signs the rest at its close.
#[test]
fn a_block_comes_after_every_ms_and_at_a_direct_close() {
    let Some(r) = Rsyslog::start() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let k = keys(d.path(), "t");
    // 1. Through a Logger: 3 leases, a block made by a tick (25 never
    //    reached), then 2 more and the stop.
    let mut o = SyslogSinkOptions::new(r.transports().remove(1).1);
    o.sign = Some(SyslogSignOptions {
        every_messages: 25,
        every_ms: 1,
        ..SyslogSignOptions::new(&k.key, &k.rsid)
    });
    let sink = SyslogSink::new(o).unwrap();
    let c = sink.counters();
    let f = FormatSpec {
        kind: Format::Rfc5424,
        ..FormatSpec::default()
    }
    .formatter(&[Lease::schema()])
    .unwrap();
    let logger = Logger::start(LoggerConfig::default(), f, sink).unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..3 {
        assert!(p.log(lease(i)));
    }
    p.flush();
    let g = SyslogCounters::get;
    dplog_testkit::wait_until("a block by time", Duration::from_secs(60), || {
        g(&c.signed_messages) == 3 && g(&c.signature_blocks) >= 1
    });
    let by_time = g(&c.signature_blocks);
    for i in 3..5 {
        assert!(p.log(lease(i)));
    }
    drop(p);
    logger.shutdown().unwrap();
    let blocks = g(&c.signature_blocks);
    assert!(blocks > by_time, "{by_time} then {blocks}");
    let body = r.wait_lines("tcp", 5 + 1 + blocks as usize);
    let rep = check(&r.out("tcp"), &k);
    assert!(rep.finding.is_none(), "{:?}", rep.finding);
    assert_eq!((rep.verified, rep.blocks), (5, blocks));
    // The first block came before lease 3 was logged.
    let ls = lines(&body);
    let first_sig = ls.iter().position(|(_, l)| is_sig(l)).unwrap();
    let lease3 = ls
        .iter()
        .position(|(_, l)| l.windows(12).any(|w| w == b"leaseSeq=\"3\""))
        .unwrap();
    assert!(first_sig < lease3, "{}", String::from_utf8_lossy(&body));

    // 2. Without a Logger: one batch of 3 leases over UDP, then close.
    let k2 = keys(d.path(), "direct");
    let mut o = SyslogSinkOptions::new(r.transports().remove(0).1);
    o.sign = Some(SyslogSignOptions {
        every_ms: 0,
        ..SyslogSignOptions::new(&k2.key, &k2.rsid)
    });
    let mut sink = SyslogSink::new(o).unwrap();
    let c = sink.counters();
    let mut f = FormatSpec {
        kind: Format::Rfc5424,
        ..FormatSpec::default()
    }
    .formatter(&[Lease::schema()])
    .unwrap();
    let mut batch = Vec::new();
    for i in 10..13 {
        dplog_core::Formatter::format(&mut f, &lease(i), &mut batch);
    }
    dplog_core::Sink::write_batch(&mut sink, &batch).unwrap();
    assert_eq!(g(&c.signature_blocks), 0, "3 of 25: no block yet");
    dplog_core::Sink::close(&mut sink).unwrap();
    assert_eq!((g(&c.signature_blocks), g(&c.certificate_blocks)), (1, 1));
    r.wait_lines("udp", 5);
    let rep = check(&r.out("udp"), &k2);
    assert!(rep.finding.is_none(), "{:?}", rep.finding);
    assert_eq!((rep.verified, rep.blocks, rep.unsigned), (3, 1, 0));
}

/// A UDP receiver that is down when the sink starts: the Certificate
/// Block and the first Signature Blocks are refused (ICMP port
/// unreachable) like the records, kept and sent again once it is up; the
/// file then verifies whole, each lease and block once.
#[test]
fn udp_blocks_refused_while_the_receiver_is_down_are_sent_again() {
    if !dplog_testkit::rsyslog::installed() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let k = keys(d.path(), "late");
    let port = dplog_testkit::free_udp_port();
    let mut o = SyslogSinkOptions::new(SyslogTransport::Udp(SocketAddr::from((
        [127, 0, 0, 1],
        port,
    ))));
    o.sign = Some(sign_opts(&k, 10));
    let sink = SyslogSink::new(o).unwrap();
    let c = sink.counters();
    let f = FormatSpec {
        kind: Format::Rfc5424,
        ..FormatSpec::default()
    }
    .formatter(&[Lease::schema()])
    .unwrap();
    let cfg = LoggerConfig {
        ring_capacity: 1024,
        shutdown_timeout_ms: 60_000,
        ..LoggerConfig::default()
    };
    let logger = Logger::start(cfg, f, sink).unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..30 {
        assert!(p.log(lease(i)));
    }
    p.flush();
    let g = SyslogCounters::get;
    dplog_testkit::wait_until("refusals", Duration::from_secs(60), || g(&c.refused) >= 3);
    let r = Rsyslog::start_on(port).unwrap();
    dplog_testkit::wait_until("all written", Duration::from_secs(60), || {
        logger.stats().written_records == 30
    });
    drop(p);
    let st = logger.shutdown().unwrap();
    assert_eq!(st.written_records, 30, "{st:?}");
    assert_eq!(g(&c.refused_late), 0);
    // 30 leases, 3 Signature Blocks, 1 Certificate Block: each once.
    let body = r.wait_lines("udp", 34);
    let ls = lines(&body);
    assert_eq!(ls.len(), 34, "{}", String::from_utf8_lossy(&body));
    assert!(ls[0].1.windows(12).any(|w| w == b"[ssign-cert "));
    let rep = check(&r.out("udp"), &k);
    assert!(rep.finding.is_none(), "{:?}", rep.finding);
    assert_eq!((rep.verified, rep.blocks, rep.unsigned), (30, 3, 0));
    assert!(rep.notes.is_empty(), "{:?}", rep.notes);
}

/// Random damage to the received file's block lines (a byte changed,
/// a line cut short): every case is an error naming a line, a finding,
/// or a note; never a panic, never a clean pass.
#[test]
fn damaged_blocks_never_pass_and_never_panic() {
    let Some(rx) = received() else {
        return;
    };
    let orig = lines(&rx.body);
    let blocks: Vec<usize> = (0..orig.len()).filter(|&j| is_block(&orig[j].1)).collect();
    let vk = seal::load_public_key(&rx.k.public).unwrap();
    let p = rx.dir.join("damaged.log");
    // xorshift64: reproducible without a dependency.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    let mut outcomes = [0u32; 3];
    for round in 0..60 {
        let mut ls = orig.clone();
        let j = blocks[next(blocks.len())];
        let l = &mut ls[j].1;
        let body = l.len() - 1; // keep its '\n'
        if round % 5 == 0 {
            l.truncate(next(body));
            l.push(b'\n');
        } else {
            let at = next(body);
            let was = l[at];
            l[at] = [b'"', b']', b'\\', b' ', b'=', b'A', b'0', 0xff][next(8)];
            if l[at] == was {
                l[at] = was ^ 1;
            }
        }
        std::fs::write(
            &p,
            ls.iter().flat_map(|(_, l)| l.clone()).collect::<Vec<u8>>(),
        )
        .unwrap();
        match verify_syslog_file(&p, &[vk], None, SyslogLimits::default()) {
            Err(e) => {
                assert!(e.to_string().contains(" line "), "{e}");
                outcomes[0] += 1;
            }
            Ok(r) if r.finding.is_some() => outcomes[1] += 1,
            Ok(r) => {
                assert!(!r.notes.is_empty(), "damaged line {} passed: {r:?}", j + 1);
                outcomes[2] += 1;
            }
        }
    }
    // Each kind of outcome happened.
    assert!(outcomes[0] > 0 && outcomes[1] > 0, "{outcomes:?}");
}
