//! `[format] time_precision`, `bytes` and `[format.bytes_fields]` as a user
//! writes them in a TOML configuration: a user-declared record with a
//! nanosecond time and a BYTES field holding a NUL, bytes after it and
//! invalid UTF-8, logged by `LogConfig::start::<R>()` to a file in JSON
//! and CSV, read back by python3 with every digit and every byte; bad
//! values are refused with the key's name.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use dplog::config::{ConfigError, LogConfig};
use dplog::schema::{HasSchema, Schema};
use dplog::{schema, Record, RecordHeader};

/// A user's tunnel event: a nanosecond time, an opaque key and a name.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Tunnel {
    header: RecordHeader,
    time_ns: u64,
    key: [u8; 8],
    name: [u8; 8],
}

impl Record for Tunnel {
    const SCHEMA_ID: u16 = 912;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 8 + 8 = 32 bytes without padding, described
// by the schema built from its own offset_of! values.
unsafe impl HasSchema for Tunnel {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(Tunnel, id = 912, name = "tunnelUp", [
                time_ns => "eventTime": NsTimestamp, ie 0;
                key => "tunnelKey": Bytes, ie 0;
                name => "tunnelName": Bytes, ie 0;
            ])
            .unwrap()
        })
    }
}

const RECORD: Tunnel = Tunnel {
    header: RecordHeader::of::<Tunnel>(),
    time_ns: 1_767_225_600_000_000_007,
    key: *b"\xde\0\xad\xff\n\"\0\x01",
    name: *b"gre-1\0\x7fz",
};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Logs `RECORD` with `format` (the `[format]` table's body) to a file;
/// python3 reads it (`json` or `csv`) and prints, per record, its
/// `timestamp`, `eventTime`, `tunnelKey` decoded from base64 and
/// `tunnelName` decoded from hex, as hex.
fn through(dir: &Path, kind: &str, format: &str) -> Vec<String> {
    let path = dir.join(format!("out.{kind}"));
    let text = format!(
        "[format]\ntype = \"{kind}\"\n{format}\n[sink]\ntype = \"file\"\npath = \"{}\"\n",
        path.display()
    );
    let logger = LogConfig::from_toml_str(&text)
        .unwrap()
        .start::<Tunnel>()
        .unwrap();
    let mut p = logger.producer().unwrap();
    assert!(p.log(RECORD));
    drop(p);
    assert_eq!(logger.shutdown().unwrap().written_records, 1);
    let out = Command::new("python3")
        .arg("-c")
        .arg(
            r#"
import base64, csv, io, json, sys
kind, path = sys.argv[1], sys.argv[2]
data = open(path, "rb").read().decode("utf-8")
if kind == "json":
    rows = [json.loads(l) for l in data.splitlines()]
else:
    r = list(csv.reader(io.StringIO(data, newline=""), strict=True))
    rows = [dict(zip(r[0], x)) for x in r[1:]]
for o in rows:
    print(o["timestamp"], o["eventTime"],
          base64.b64decode(o["tunnelKey"], validate=True).hex(),
          bytes.fromhex(o["tunnelName"]).hex())
"#,
        )
        .arg(kind)
        .arg(&path)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&std::fs::read(&path).unwrap())
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn config_keys_give_nanoseconds_and_every_byte_in_json_and_csv() {
    let dir = tempfile::tempdir().unwrap();
    let format = "time_precision = \"ns\"\nbytes = \"hex\"\n\
                  [format.bytes_fields]\ntunnelKey = \"base64\"\n";
    let want = format!(
        "2026-01-01T00:00:00.000000007Z 1767225600000000007 {} {}",
        hex(&RECORD.key),
        hex(&RECORD.name)
    );
    for kind in ["json", "csv"] {
        assert_eq!(
            through(dir.path(), kind, format),
            vec![want.clone()],
            "{kind}"
        );
    }
}

fn refused(r: Result<impl Sized, ConfigError>) -> String {
    match r {
        Err(ConfigError::Parse(m)) => m,
        Err(e) => panic!("expected a parse error, got {e}"),
        Ok(_) => panic!("expected a refusal"),
    }
}

#[test]
fn bad_values_are_refused_by_name() {
    let m = refused(LogConfig::from_toml_str(
        "[format]\ntype = \"json\"\ntime_precision = \"ps\"\n",
    ));
    assert!(m.contains("time_precision") && m.contains("ps"), "{m}");
    let m = refused(LogConfig::from_toml_str(
        "[format]\ntype = \"json\"\nbytes = \"utf8\"\n",
    ));
    assert!(m.contains("bytes") && m.contains("utf8"), "{m}");
    let cfg = LogConfig::from_toml_str(
        "[format]\ntype = \"json\"\n[format.bytes_fields]\neventTime = \"hex\"\n\
         [sink]\ntype = \"file\"\npath = \"/dev/null\"\n",
    )
    .unwrap();
    let m = refused(cfg.format.formatter(&[Tunnel::schema()]));
    assert!(
        m.contains("\"eventTime\" is no BYTES field") && m.contains("tunnelKey, tunnelName"),
        "{m}"
    );
}
