//! RFC 5424 and RFC 3164 output as a real receiver parses it: rsyslogd
//! (Debian's package rsyslog), started by each test on 127.0.0.1 with a
//! throwaway configuration, receives every NAT record type and drop
//! reports (a ring's and the sink's) over TCP (RFC 6587 octet counting)
//! and writes the properties it parsed (HOSTNAME, APP-NAME / TAG, PROCID,
//! MSGID, structured data, MSG, time) one line per message; every line is
//! compared exactly with the values the record holds.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use dplog_core::{DropReport, Formatter};
use dplog_formatters::{Format, FormatSpec};
use dplog_schema_nat::NatFormatSpec as _;
use dplog_testkit::rsyslog::Rsyslogd;

/// 2026-11-30T07:49:15.000000123Z: a drop's wall-clock time.
const WALL: u64 = 1_796_024_955_000_000_123;

struct Rsyslog(Rsyslogd);

impl Rsyslog {
    /// rsyslogd listening on a free TCP port of 127.0.0.1, writing
    /// `template` per message to `out.log`; `None` (with a message) if it
    /// is not installed.
    fn start(template: &str) -> Option<Rsyslog> {
        if !dplog_testkit::rsyslog::installed() {
            eprintln!("SKIPPED: rsyslogd not installed (run scripts/setup.sh)");
            return None;
        }
        Some(Rsyslog(Rsyslogd::start_tcp(&format!(
            r#"module(load="imtcp")
input(type="imtcp" address="127.0.0.1" port="{{port}}")
template(name="props" type="string" string="{template}\n")
action(type="omfile" file="{{dir}}/out.log" template="props" flushOnTXEnd="on" asyncWriting="off")
"#
        ))))
    }

    fn out(&self) -> PathBuf {
        self.0.dir().join("out.log")
    }

    /// Sends each line of `body` as one octet-counted frame (RFC 6587
    /// section 3.4.1), then waits until rsyslogd has written `n` lines
    /// (or 15 s) and returns them.
    fn send(&self, body: &[u8], n: usize) -> Vec<String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.0.port())).unwrap();
        for line in body.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            s.write_all(format!("{} ", line.len()).as_bytes()).unwrap();
            s.write_all(line).unwrap();
        }
        drop(s);
        let t0 = Instant::now();
        loop {
            let got = std::fs::read_to_string(self.out()).unwrap_or_default();
            if got.lines().count() >= n || t0.elapsed() > Duration::from_secs(15) {
                std::thread::sleep(Duration::from_millis(100));
                let got = std::fs::read_to_string(self.out()).unwrap_or_default();
                return got.lines().map(String::from).collect();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// This host's name, as `hostname(1)` prints it.
fn host_name() -> String {
    let out = Command::new("hostname").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Every NAT record, then a ring's drop report (on the records'
/// timeline) and a sink's, formatted in `kind` with default settings.
fn render(kind: Format) -> Vec<u8> {
    let mut f = FormatSpec {
        kind,
        ..Default::default()
    }
    .nat_formatter()
    .unwrap();
    let mut out = Vec::new();
    for r in all_records() {
        f.format(&r, &mut out);
    }
    let ring = DropReport::new(3, 12, WALL, WALL + 100_000_000)
        .with_reason(dplog_core::DropReason::Degraded)
        .with_record_time(T0 + 5_000_000);
    Formatter::<dplog_schema_nat::NatRecord>::format_drop_report(&mut f, &ring, &mut out);
    let sink = DropReport::sink(1, WALL, WALL);
    Formatter::<dplog_schema_nat::NatRecord>::format_drop_report(&mut f, &sink, &mut out);
    out
}

/// The structured data of the seven records of `all_records`.
fn record_sd() -> [&'static str; 7] {
    [
        r#"[nsess@32473 SSUBIX="0" SVLAN="7" IATYP="IPv4" ISADDR="10.0.0.6" ISPORT="51234" XATYP="IPv4" XSADDR="198.51.100.3" XSPORT="1024" PROTO="6" XDADDR="203.0.113.5" XDPORT="443"]"#,
        r#"[nsess@32473 SSUBIX="0" SVLAN="7" IATYP="IPv4" ISADDR="10.0.0.6" ISPORT="51234" XATYP="IPv4" XSADDR="198.51.100.3" XSPORT="1024" PROTO="6" XDADDR="203.0.113.5" XDPORT="443"]"#,
        r#"[natPortBlock@32473 observationTimeMilliseconds="1767225600124" natEvent="16" sourceIPv4Address="10.0.0.7" postNATSourceIPv4Address="198.51.100.4" portRangeStart="2048" portRangeEnd="2559" portRangeStepSize="1" portRangeNumPorts="512" ingressVRFID="3"]"#,
        r#"[natPortBlock@32473 observationTimeMilliseconds="1767225600125" natEvent="17" sourceIPv4Address="10.0.0.7" postNATSourceIPv4Address="198.51.100.4" portRangeStart="2048" portRangeEnd="2559" portRangeStepSize="1" portRangeNumPorts="512" ingressVRFID="0"]"#,
        r#"[natAddressesExhausted@32473 observationTimeMilliseconds="1767225600126" natEvent="3" natPoolId="42"]"#,
        r#"[natPortsExhausted@32473 observationTimeMilliseconds="1767225600127" natEvent="12" postNATSourceIPv4Address="198.51.100.254" protocolIdentifier="17"]"#,
        r#"[natQuotaExceeded@32473 observationTimeMilliseconds="1767225600128" natEvent="13" natQuotaExceededEvent="3" maxEntriesPerUser="300" sourceIPv4Address="10.0.0.9"]"#,
    ]
}

const MSGIDS: [&str; 7] = [
    "SADD",
    "SDEL",
    "APMADD",
    "APMDEL",
    "ADDRESSES_EXHAUSTED",
    "PORTS_EXHAUSTED",
    "QUOTA_EXCEEDED",
];

/// The records' times (µs) as rsyslog prints them (`date-rfc3339`).
const TIMES: [&str; 7] = [
    "2026-01-01T00:00:00.123456Z",
    "2026-01-01T00:01:01.623456Z",
    "2026-01-01T00:00:00.124456Z",
    "2026-01-01T00:00:00.125456Z",
    "2026-01-01T00:00:00.126456Z",
    "2026-01-01T00:00:00.127456Z",
    "2026-01-01T00:00:00.128456Z",
];

#[test]
fn rsyslogd_parses_every_rfc5424_record_and_drop_report() {
    let Some(r) = Rsyslog::start(
        "%pri%|%timereported:::date-rfc3339%|%hostname%|%app-name%|%procid%|%msgid%|%structured-data%|%msg%",
    ) else {
        return;
    };
    let got = r.send(&render(Format::Rfc5424), 9);
    let (host, pid) = (host_name(), std::process::id());
    let mut want: Vec<String> = (0..7)
        .map(|i| {
            format!(
                "134|{}|{host}|NAT|{pid}|{}|{}|",
                TIMES[i],
                MSGIDS[i],
                record_sd()[i]
            )
        })
        .collect();
    // Drop reports: severity warning (16 * 8 + 4), the time of the record
    // before the ring's report, the last drop's wall clock for the sink's.
    want.push(format!(
        "132|2026-01-01T00:00:00.128456Z|{host}|NAT|{pid}|RECORDS_DROPPED|\
         [dplogDrop@32473 dropped=\"12\" ring=\"3\" reason=\"degraded\" firstDropWallClock=\"2026-11-30T07:49:15.000000123Z\" lastDropWallClock=\"2026-11-30T07:49:15.100000123Z\"]|\
         12 records dropped on ring 3 (degraded) after the record of 2026-01-01T00:00:00.128456789Z; wall clock 2026-11-30T07:49:15.000000123Z to 2026-11-30T07:49:15.100000123Z"
    ));
    want.push(format!(
        "132|2026-11-30T07:49:15.000000Z|{host}|NAT|{pid}|RECORDS_DROPPED|\
         [dplogDrop@32473 dropped=\"1\" reason=\"sink\" firstDropWallClock=\"2026-11-30T07:49:15.000000123Z\" lastDropWallClock=\"2026-11-30T07:49:15.000000123Z\"]|\
         1 record dropped by the sink; wall clock 2026-11-30T07:49:15.000000123Z to 2026-11-30T07:49:15.000000123Z"
    ));
    assert_eq!(got, want);
}

#[test]
fn rsyslogd_parses_every_rfc3164_record_and_drop_report() {
    let Some(r) = Rsyslog::start(
        "%pri%|%timereported:::date-rfc3164%|%hostname%|%syslogtag%|%programname%|%msg%",
    ) else {
        return;
    };
    let got = r.send(&render(Format::Rfc3164), 9);
    let host = host_name();
    let msgs = [
        "SADD SVLAN=7 ISADDR=10.0.0.6 ISPORT=51234 XSADDR=198.51.100.3 XSPORT=1024 PROTO=6 XDADDR=203.0.113.5 XDPORT=443",
        "SDEL SVLAN=7 ISADDR=10.0.0.6 ISPORT=51234 XSADDR=198.51.100.3 XSPORT=1024 PROTO=6 XDADDR=203.0.113.5 XDPORT=443",
        "APMADD observationTimeMilliseconds=1767225600124 natEvent=16 sourceIPv4Address=10.0.0.7 postNATSourceIPv4Address=198.51.100.4 portRangeStart=2048 portRangeEnd=2559 portRangeStepSize=1 portRangeNumPorts=512 ingressVRFID=3",
        "APMDEL observationTimeMilliseconds=1767225600125 natEvent=17 sourceIPv4Address=10.0.0.7 postNATSourceIPv4Address=198.51.100.4 portRangeStart=2048 portRangeEnd=2559 portRangeStepSize=1 portRangeNumPorts=512 ingressVRFID=0",
        "ADDRESSES_EXHAUSTED observationTimeMilliseconds=1767225600126 natEvent=3 natPoolId=42",
        "PORTS_EXHAUSTED observationTimeMilliseconds=1767225600127 natEvent=12 postNATSourceIPv4Address=198.51.100.254 protocolIdentifier=17",
        "QUOTA_EXCEEDED observationTimeMilliseconds=1767225600128 natEvent=13 natQuotaExceededEvent=3 maxEntriesPerUser=300 sourceIPv4Address=10.0.0.9",
    ];
    let times = [
        "Jan  1 00:00:00",
        "Jan  1 00:01:01",
        "Jan  1 00:00:00",
        "Jan  1 00:00:00",
        "Jan  1 00:00:00",
        "Jan  1 00:00:00",
        "Jan  1 00:00:00",
    ];
    // rsyslog keeps the space after the TAG's colon in MSG.
    let mut want: Vec<String> = (0..7)
        .map(|i| format!("134|{}|{host}|NAT:|NAT| {}", times[i], msgs[i]))
        .collect();
    want.push(format!(
        "132|Jan  1 00:00:00|{host}|NAT:|NAT| RECORDS_DROPPED dropped=12 ring=3 reason=degraded firstDropWallClock=2026-11-30T07:49:15.000000123Z lastDropWallClock=2026-11-30T07:49:15.100000123Z"
    ));
    want.push(format!(
        "132|Nov 30 07:49:15|{host}|NAT:|NAT| RECORDS_DROPPED dropped=1 reason=sink firstDropWallClock=2026-11-30T07:49:15.000000123Z lastDropWallClock=2026-11-30T07:49:15.000000123Z"
    ));
    assert_eq!(got, want);
}

/// The `vpp` profile as rsyslogd parses VPP's own messages: SD-ID `nsess`
/// and `napmap`, VPP's parameter order, HOSTNAME and PROCID as set.
#[test]
fn rsyslogd_parses_the_vpp_profile_as_vpps_messages() {
    let Some(r) = Rsyslog::start("%hostname%|%app-name%|%procid%|%msgid%|%structured-data%") else {
        return;
    };
    let mut spec = FormatSpec {
        kind: Format::Rfc5424,
        ..Default::default()
    };
    spec.syslog.profile = Some("vpp".into());
    spec.syslog.hostname = Some("172.16.4.1".into());
    spec.syslog.procid = Some("5901".into());
    let mut f = spec.nat_formatter().unwrap();
    let mut out = Vec::new();
    for rec in &all_records()[..3] {
        f.format(rec, &mut out);
    }
    let got = r.send(&out, 3);
    let sess = r#"SSUBIX="0" SVLAN="7" IATYP="IPv4" ISADDR="10.0.0.6" ISPORT="51234" XATYP="IPv4" XSADDR="198.51.100.3" XSPORT="1024" PROTO="6" XDADDR="203.0.113.5" XDPORT="443""#;
    assert_eq!(
        got,
        [
            format!("172.16.4.1|NAT|5901|SADD|[nsess {sess}]"),
            format!("172.16.4.1|NAT|5901|SDEL|[nsess {sess}]"),
            r#"172.16.4.1|NAT|5901|APMADD|[napmap SSUBIX="0" SVLAN="3" IATYP="IPv4" ISADDR="10.0.0.7" ISPORT="0" XATYP="IPv4" XSADDR="198.51.100.4" XSPORT="2048" PROTO="0"]"#.to_string(),
        ]
    );
}
