//! Time precision and lossless byte strings, as a user who declares a
//! record of their own (not the NAT) meets them: a DNS query record with a
//! nanosecond event time, a second nanosecond timestamp and two BYTES
//! fields holding a NUL, bytes after it, invalid UTF-8 and line-forging
//! bytes. With `time_precision = "ns"`, `bytes = "hex"` and `tag` as
//! base64, every format's real reader gives back the exact nanoseconds and
//! every byte of both fields:
//!
//! - text (default layout and a template), JSON, CSV: written by a logger
//!   through the file sink, read by python3 (`json`, `csv` strict, the
//!   text split at spaces), hex and base64 decoded by python3's
//!   `bytes.fromhex` and `base64.b64decode(validate=True)`;
//! - RFC 5424 and RFC 3164: sent through the syslog sink (TCP) to
//!   rsyslogd on 127.0.0.1, which writes what it parsed (mmpstrucdata's
//!   parameter values, its own TIMESTAMP); RFC 5424's TIMESTAMP holds
//!   microseconds (TIME-SECFRAC has at most 6 digits);
//! - IPFIX: tshark decodes observationTimeNanoseconds (325) and
//!   flowStartNanoseconds (156) in NTP format, and the byte strings.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use dplog_core::schema::{HasSchema, Schema};
use dplog_core::{schema, DropReport, Formatter, Logger, LoggerConfig, Record, RecordHeader, Sink};
use dplog_formatters::ipfix::split_messages;
use dplog_formatters::{BytesEncoding, Format, FormatSpec, TimePrecision};
use dplog_sinks::{FileSink, SyslogSink, SyslogSinkOptions, SyslogTransport};
use dplog_testkit::rsyslog::Rsyslogd;
use dplog_testkit::tshark;
use serde_json::{json, Value};

/// A DNS query seen on the wire; `qname` and `tag` are the sender's bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Query {
    header: RecordHeader,
    time_ns: u64,
    seen_ns: u64,
    qname: [u8; 24],
    tag: [u8; 8],
}

impl Record for Query {
    const SCHEMA_ID: u16 = 911;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 8 + 24 + 8 = 56 bytes without padding,
// described by the schema built from its own offset_of! values.
unsafe impl HasSchema for Query {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(Query, id = 911, name = "dnsQuery", [
                time_ns => "eventTime": NsTimestamp, ie 0;
                seen_ns => "flowStartNanoseconds": NsTimestamp, ie 156;
                // dataLinkFrameSection, mplsLabelStackSection: octetArray
                // elements tshark prints in hex.
                qname => "queryName": Bytes, ie 315;
                tag => "tag": Bytes, ie 316;
            ])
            .unwrap()
        })
    }
}

/// 2026-01-01T00:00:00.123456789Z.
const T: u64 = 1_767_225_600_123_456_789;

/// Records whose times use all nine digits and whose byte strings hold a
/// NUL with bytes after it, invalid UTF-8, a forged line, quotes,
/// separators, a C1 control; the last fills both fields without a NUL.
fn records() -> Vec<Query> {
    let q = |qname: &[u8], tag: &[u8], i: u64| {
        let mut r = Query {
            header: RecordHeader::of::<Query>(),
            time_ns: T + i * 1_000_000_007,
            seen_ns: 1_767_225_599_000_000_001 + i * 10_101,
            qname: [0; 24],
            tag: [0; 8],
        };
        r.qname[..qname.len()].copy_from_slice(qname);
        r.tag[..tag.len()].copy_from_slice(tag);
        r
    };
    vec![
        q(b"a.b\0after\xff\xfe\n<1>1 x", b"\0\x01\xff=\n\0\x80\"", 0),
        q(b"\"],\\ \xc2\x85\r\nforged=1\0\x1b[2J", b"a,b\0\0\0z", 1),
        q(b"full.field.no.nul.here!!", b"12345678", 2),
        q(b"", b"", 3),
    ]
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// RFC 3339 with `digits` fractional digits, by chrono.
fn rfc3339(ns: u64, digits: u8) -> String {
    use chrono::SecondsFormat as F;
    let f = match digits {
        0 => F::Secs,
        3 => F::Millis,
        6 => F::Micros,
        _ => F::Nanos,
    };
    chrono::DateTime::from_timestamp_nanos(ns as i64).to_rfc3339_opts(f, true)
}

/// The settings under test: nanoseconds, BYTES in hex, `tag` in base64.
fn spec(kind: Format) -> FormatSpec {
    FormatSpec {
        kind,
        time_precision: Some(TimePrecision::Ns),
        bytes: BytesEncoding::Hex,
        bytes_fields: [("tag".to_string(), BytesEncoding::Base64)].into(),
        ..Default::default()
    }
}

/// `(name, value)` of each field as the reader gives it back: times as
/// ns integers, byte strings as the hex of every byte.
fn fields(r: &Query) -> Vec<(&'static str, Value)> {
    vec![
        ("eventTime", json!(r.time_ns.to_string())),
        ("flowStartNanoseconds", json!(r.seen_ns.to_string())),
        ("queryName", json!(hex(&r.qname))),
        ("tag", json!(hex(&r.tag))),
    ]
}

/// Reads a file as the format's reader does and prints
/// `{"lines": <splitlines count>, "rows": [{name: value}]}`: hex and
/// base64 values (by the codecs given) decoded and given as hex, every
/// other value as its text (numbers too).
const READER: &str = r#"
import base64, csv, io, json, sys

mode, path, codecs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])

def dec(k, v):
    v = v if isinstance(v, str) else json.dumps(v)
    c = codecs.get(k)
    if c == "hex":
        return bytes.fromhex(v).hex()
    if c == "base64":
        return base64.b64decode(v, validate=True).hex()
    return v

def obj(pairs):
    return {k: dec(k, v) for k, v in pairs}

data = open(path, "rb").read().decode("utf-8")
lines = data.splitlines()
rows = []
if mode == "json":
    rows = [obj(json.loads(l).items()) for l in lines]
elif mode == "csv":
    r = list(csv.reader(io.StringIO(data, newline=""), strict=True))
    rows = [obj((k, v) for k, v in zip(r[0], x) if v != "") for x in r[1:]]
elif mode == "text":
    for l in lines:
        t = l.split(" ")
        rows.append(obj([("timestamp", t[0])] + [p.split("=", 1) for p in t[1:]]))
elif mode == "template":
    names = sys.argv[4].split(" ")
    rows = [obj(zip(names, l.split(" "))) for l in lines]
elif mode == "rfc5424":
    for l in lines:
        m = json.loads(l)
        sd = json.loads(m["parsed"])
        (params,) = sd.values()
        rows.append(dict(obj(params.items()), timestamp=m["time"]))
elif mode == "rfc3164":
    for l in lines:
        t = json.loads(l)["msg"].lstrip(" ").split(" ")
        rows.append(obj([("msgid", t[0])] + [p.split("=", 1) for p in t[1:]]))
print(json.dumps({"lines": len(lines), "rows": rows}))
"#;

/// `READER` on `path`: (line count, rows).
fn read_back(mode: &str, path: &Path, extra: &[&str]) -> (usize, Vec<Value>) {
    let codecs = json!({"queryName": "hex", "tag": "base64"}).to_string();
    let out = Command::new("python3")
        .args(["-c", READER, mode])
        .arg(path)
        .arg(codecs)
        .args(extra)
        .output()
        .expect("python3 (run scripts/setup.sh)");
    let file = String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned();
    assert!(
        out.status.success(),
        "{mode} reader: {}\n--- file ---\n{file}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    (
        v["lines"].as_u64().unwrap() as usize,
        v["rows"].as_array().unwrap().clone(),
    )
}

/// Runs `recs` through a logger with `spec`'s formatter into `sink`;
/// returns the records the logger counts as written.
fn log_through<S: Sink>(spec: &FormatSpec, sink: S, recs: &[Query]) -> u64 {
    let f = spec.formatter(&[Query::schema()]).unwrap();
    let logger = Logger::start(LoggerConfig::default(), f, sink).unwrap();
    let mut p = logger.producer().unwrap();
    for r in recs {
        assert!(p.log(*r));
    }
    drop(p);
    let stats = logger.shutdown().unwrap();
    assert_eq!(stats.dropped_sink + stats.dropped_full, 0, "{stats:?}");
    stats.written_records
}

fn write_file(dir: &Path, name: &str, spec: &FormatSpec, recs: &[Query]) -> PathBuf {
    let path = dir.join(name);
    let written = log_through(spec, FileSink::open(&path).unwrap(), recs);
    assert_eq!(written, recs.len() as u64, "{name}");
    path
}

/// The row a reader should give back for `r`, with `timestamp` first.
fn want(r: &Query, timestamp: Option<String>) -> Value {
    let mut m = serde_json::Map::new();
    if let Some(t) = timestamp {
        m.insert("timestamp".into(), json!(t));
    }
    for (k, v) in fields(r) {
        m.insert(k.into(), v);
    }
    Value::Object(m)
}

#[test]
fn text_json_and_csv_give_back_nanoseconds_and_every_byte() {
    let dir = tempfile::tempdir().unwrap();
    let recs = records();
    let all: Vec<Value> = recs
        .iter()
        .map(|r| want(r, Some(rfc3339(r.time_ns, 9))))
        .collect();

    let p = write_file(dir.path(), "q.log", &spec(Format::Text), &recs);
    assert_eq!(read_back("text", &p, &[]), (recs.len(), all.clone()));

    let p = write_file(dir.path(), "q.jsonl", &spec(Format::Json), &recs);
    assert_eq!(read_back("json", &p, &[]), (recs.len(), all.clone()));

    let p = write_file(dir.path(), "q.csv", &spec(Format::Csv), &recs);
    let mut rows = all.clone();
    for r in &mut rows {
        let mut m = serde_json::Map::new();
        m.insert("recordType".into(), json!("dnsQuery"));
        m.extend(r.as_object().unwrap().clone());
        *r = Value::Object(m);
    }
    assert_eq!(read_back("csv", &p, &[]), (recs.len() + 1, rows));
}

#[test]
fn template_time_converters_follow_the_precision() {
    let dir = tempfile::tempdir().unwrap();
    let recs = records();
    let mut s = spec(Format::Text);
    // `{t}` and `{t:rfc3339}` take the precision; `unix_us`, `rfc3339_ms`
    // and `{f:str}` name their own.
    s.template = Some(
        "{eventTime:rfc3339} {eventTime} {flowStartNanoseconds:unix_us} \
         {eventTime:rfc3339_ms} {queryName} {tag} {tag:hex}"
            .into(),
    );
    let p = write_file(dir.path(), "q.tpl", &s, &recs);
    let names = "timestamp eventTime us ms queryName tag taghex";
    let rows: Vec<Value> = recs
        .iter()
        .map(|r| {
            json!({
                "timestamp": rfc3339(r.time_ns, 9),
                "eventTime": r.time_ns.to_string(),
                "us": (r.seen_ns / 1000).to_string(),
                "ms": rfc3339(r.time_ns, 3),
                "queryName": hex(&r.qname),
                "tag": hex(&r.tag),
                "taghex": hex(&r.tag),
            })
        })
        .collect();
    assert_eq!(read_back("template", &p, &[names]), (recs.len(), rows));
}

/// Without the settings the formats print what they always did: RFC 3339
/// with microseconds, values in ms, byte strings escaped up to the first
/// NUL.
#[test]
fn without_the_settings_nothing_changes() {
    let recs = records();
    let mut out = Vec::new();
    let mut f = FormatSpec {
        kind: Format::Json,
        ..Default::default()
    }
    .formatter(&[Query::schema()])
    .unwrap();
    f.format(&recs[0], &mut out);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "{\"timestamp\":\"2026-01-01T00:00:00.123456Z\",\"eventTime\":1767225600123,\
         \"flowStartNanoseconds\":1767225599000,\"queryName\":\"a.b\",\"tag\":\"\"}\n"
    );
}

#[test]
fn each_precision_in_json_and_the_json_and_csv_drop_reports() {
    let r = records()[0];
    let report = DropReport::sink(3, 5, 6).with_record_time(r.time_ns);
    for (p, d, unit) in [
        (TimePrecision::S, 0, 1_000_000_000),
        (TimePrecision::Ms, 3, 1_000_000),
        (TimePrecision::Us, 6, 1_000),
        (TimePrecision::Ns, 9, 1),
    ] {
        let mut s = spec(Format::Json);
        s.time_precision = Some(p);
        let mut f = s.formatter(&[Query::schema()]).unwrap();
        let mut out = Vec::new();
        f.format(&r, &mut out);
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["timestamp"], json!(rfc3339(r.time_ns, d)), "{p:?}");
        assert_eq!(v["eventTime"], json!(r.time_ns / unit), "{p:?}");
        assert_eq!(v["flowStartNanoseconds"], json!(r.seen_ns / unit), "{p:?}");
        out.clear();
        Formatter::<Query>::format_drop_report(&mut f, &report, &mut out);
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["timestamp"], json!(rfc3339(r.time_ns, d)), "{p:?}");
        assert_eq!(v["dropped"], json!(3));

        // CSV: the drop report's row has the records' `timestamp` too.
        let mut s = spec(Format::Csv);
        s.time_precision = Some(p);
        let mut f = s.formatter(&[Query::schema()]).unwrap();
        let mut out = Vec::new();
        Formatter::<Query>::format_drop_report(&mut f, &report, &mut out);
        let rows: Vec<Vec<String>> = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(&out[..])
            .records()
            .map(|r| r.unwrap().iter().map(String::from).collect())
            .collect();
        assert_eq!(rows.len(), 2, "{out:?}");
        assert_eq!(rows[0][1], "timestamp");
        assert_eq!(rows[1][0], "recordsDropped");
        assert_eq!(rows[1][1], rfc3339(r.time_ns, d), "{p:?}");
    }
}

#[test]
fn bad_bytes_fields_are_refused_by_name() {
    let mut s = spec(Format::Json);
    s.bytes_fields
        .insert("eventTime".into(), BytesEncoding::Hex);
    let e = s.formatter(&[Query::schema()]).unwrap_err().to_string();
    assert!(
        e.contains("\"eventTime\" is no BYTES field") && e.contains("queryName, tag"),
        "{e}"
    );
}

/// rsyslogd on 127.0.0.1 (TCP) writing, per message, its TIMESTAMP (as
/// it parsed it, RFC 3339), mmpstrucdata's parameters and the MSG, as
/// one JSON object per line to `<APP-NAME>.log`.
struct Rsyslog(Rsyslogd);

impl Rsyslog {
    fn start() -> Rsyslog {
        Rsyslog(Rsyslogd::start_tcp(
            r#"module(load="imtcp")
module(load="mmpstrucdata")
input(type="imtcp" address="127.0.0.1" port="{port}")
template(name="props" type="list" option.jsonf="on") {
  property(outname="time" name="timereported" dateFormat="rfc3339" format="jsonf")
  property(outname="parsed" name="$!rfc5424-sd" format="jsonf")
  property(outname="msg" name="msg" format="jsonf")
}
template(name="file" type="string" string="{dir}/%app-name%.log")
action(type="mmpstrucdata" sd_name.lowercase="off")
action(type="omfile" dynaFile="file" template="props" flushOnTXEnd="on" asyncWriting="off")
"#,
        ))
    }

    /// Sends `recs` then a marker record (its query name `marker`); once
    /// rsyslogd has written the marker (the stream is in order), returns
    /// its file.
    fn send(&self, spec: &FormatSpec, recs: &[Query], marker: &[u8]) -> PathBuf {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.0.port()));
        let sink = SyslogSink::new(SyslogSinkOptions::new(SyslogTransport::Tcp(addr))).unwrap();
        let mut all = recs.to_vec();
        let mut end = recs[0];
        end.qname = [0; 24];
        end.qname[..marker.len()].copy_from_slice(marker);
        all.push(end);
        assert_eq!(log_through(spec, sink, &all), all.len() as u64);
        let app = spec.syslog.app_name.clone().unwrap();
        let path = self.0.dir().join(format!("{app}.log"));
        // The marker as it arrives: in hex.
        let wire = hex(&end.qname);
        dplog_testkit::wait_until(
            "rsyslogd writes the marker",
            Duration::from_secs(60),
            || {
                std::fs::read(&path)
                    .is_ok_and(|b| memchr::memmem::find(&b, wire.as_bytes()).is_some())
            },
        );
        path
    }
}

#[test]
fn syslog_gives_back_nanosecond_values_and_every_byte_through_rsyslogd() {
    let rs = Rsyslog::start();
    let recs = records();

    let mut s = spec(Format::Rfc5424);
    s.syslog.app_name = Some("tb5424".into());
    let path = rs.send(&s, &recs, b"end-5424");
    let (lines, rows) = read_back("rfc5424", &path, &[]);
    assert_eq!(lines, recs.len() + 1);
    for (r, row) in recs.iter().zip(&rows) {
        // TIMESTAMP: microseconds at most (RFC 5424 section 6.2.3), as
        // rsyslogd parsed it; the parameters keep every digit.
        assert_eq!(row, &want(r, Some(rfc3339(r.time_ns, 6))), "{r:?}");
    }

    let mut s = spec(Format::Rfc3164);
    s.syslog.app_name = Some("tb3164".into());
    let path = rs.send(&s, &recs, b"end-3164");
    let (lines, rows) = read_back("rfc3164", &path, &[]);
    assert_eq!(lines, recs.len() + 1);
    for (r, row) in recs.iter().zip(&rows) {
        let mut w = want(r, None);
        w.as_object_mut()
            .unwrap()
            .insert("msgid".into(), json!("dnsQuery"));
        assert_eq!(row, &w, "{r:?}");
    }
}

#[test]
fn ipfix_nanoseconds_in_ntp_format_and_raw_bytes_through_tshark() {
    let dir = tempfile::tempdir().unwrap();
    let recs = records();
    let mut s = spec(Format::Ipfix);
    s.ipfix.export_clock = dplog_formatters::ExportClock::Record;
    let mut f = s.formatter(&[Query::schema()]).unwrap();
    let mut out = Vec::new();
    for r in &recs {
        f.format(r, &mut out);
    }
    let pcap = dir.path().join("q.pcap");
    tshark::write_udp_pcap(&pcap, &split_messages(&out), 4739);
    let rows = tshark::fields(
        &pcap,
        4739,
        &[
            "cflow.template_ipfix_field_type",
            "cflow.observation_time_nanoseconds",
            "cflow.abstimestart",
            "cflow.data_link_frame_section",
            "cflow.mpls_label_stack_section",
        ],
    );
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0];
    // The stamp first, then the fields but the event time (the stamp's
    // value): flowStartNanoseconds, the two byte strings.
    assert_eq!(r[0], "325,156,315,316");
    // tshark prints absolute times in UTC, to the nanosecond.
    // (The dates hold a comma too: compare the joined column.)
    let tshark_times = |ns: &dyn Fn(&Query) -> u64| {
        recs.iter()
            .map(|r| {
                chrono::DateTime::from_timestamp_nanos(ns(r) as i64)
                    .format("%b %e, %Y %H:%M:%S%.9f UTC")
                    .to_string()
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    assert_eq!(r[1], tshark_times(&|r| r.time_ns));
    assert_eq!(r[2], tshark_times(&|r| r.seen_ns));
    let col = |i: usize| r[i].split(',').map(String::from).collect::<Vec<_>>();
    assert_eq!(
        col(3),
        recs.iter().map(|r| hex(&r.qname)).collect::<Vec<_>>()
    );
    assert_eq!(col(4), recs.iter().map(|r| hex(&r.tag)).collect::<Vec<_>>());
}

/// Microseconds: observationTimeMicroseconds (324), NTP format with the
/// fraction's low 11 bits zero; seconds: observationTimeSeconds (322).
/// flowStartNanoseconds keeps its element's nanoseconds either way.
#[test]
fn ipfix_stamp_element_follows_the_precision() {
    let dir = tempfile::tempdir().unwrap();
    let recs = records();
    for (p, ie, field, digits) in [
        (
            TimePrecision::Us,
            "324",
            "cflow.observation_time_microseconds",
            6,
        ),
        (TimePrecision::S, "322", "cflow.observation_time_seconds", 0),
    ] {
        let mut s = spec(Format::Ipfix);
        s.time_precision = Some(p);
        s.ipfix.export_clock = dplog_formatters::ExportClock::Record;
        let mut f = s.formatter(&[Query::schema()]).unwrap();
        let mut out = Vec::new();
        for r in &recs {
            f.format(r, &mut out);
        }
        let pcap = dir.path().join(format!("{ie}.pcap"));
        tshark::write_udp_pcap(&pcap, &split_messages(&out), 4739);
        let rows = tshark::fields(
            &pcap,
            4739,
            &[
                "cflow.template_ipfix_field_type",
                field,
                "cflow.abstimestart",
            ],
        );
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0][0], format!("{ie},156,315,316"));
        let times = |ns: &dyn Fn(&Query) -> u64, digits: u32| {
            let unit = 10u64.pow(9 - digits);
            recs.iter()
                .map(|r| {
                    chrono::DateTime::from_timestamp_nanos((ns(r) / unit * unit) as i64)
                        .format("%b %e, %Y %H:%M:%S%.9f UTC")
                        .to_string()
                })
                .collect::<Vec<_>>()
                .join(",")
        };
        // Wireshark prints the NTP fraction truncated to nanoseconds: the
        // microsecond's digits are exact, the 3 after them what 2^-21 s
        // steps leave (below 477 ns); keep the unit's digits.
        let kept: String = rows[0][1]
            .split(" UTC")
            .map(|t| match t.find('.') {
                Some(dot) => {
                    let d = dot + 1 + digits as usize;
                    format!("{}{}", &t[..d], "0".repeat(dot + 10 - d))
                }
                None => t.to_string(),
            })
            .collect::<Vec<_>>()
            .join(" UTC");
        assert_eq!(kept, times(&|r| r.time_ns, digits), "{p:?}");
        assert_eq!(rows[0][2], times(&|r| r.seen_ns, 9), "{p:?}");
    }
}
