//! `[sink.sign]` of a syslog sink from the TOML config, with a record
//! type a user declares (a badge reader's door event): the messages and
//! the RFC 5848 blocks a UDP receiver gets verify with
//! `dplog::sinks::verify_syslog`; then the config's refusals: a format
//! other than rfc5424, a key file others can read, an unknown setting.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use dplog::config::LogConfig;
use dplog::schema::{HasSchema, Schema};
use dplog::sinks::{seal, verify_syslog};
use dplog::{schema, Record, RecordHeader};

/// A door opened (or refused) by a badge reader: 24 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct DoorEvent {
    header: RecordHeader,
    time_ns: u64,
    badge: u32,
    door: u16,
    granted: u8,
    _pad: u8,
}
const _: () = assert!(std::mem::size_of::<DoorEvent>() == 24);

impl Record for DoorEvent {
    const SCHEMA_ID: u16 = 733;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 4 + 2 + 1 + 1 = 24 bytes without implicit
// padding (size asserted above); the schema is built from its own
// offset_of! values and size_of.
unsafe impl HasSchema for DoorEvent {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(DoorEvent, id = 733, name = "doorEvent", [
                time_ns => "eventTime": NsTimestamp, ie 0;
                badge => "badgeId": U32, ie 0;
                door => "doorId": U16, ie 0;
                granted => "granted": U8, ie 0;
            ])
            .unwrap()
        })
    }
}

fn event(i: u32) -> DoorEvent {
    DoorEvent {
        header: RecordHeader::of::<DoorEvent>(),
        time_ns: 1_767_225_600_000_000_000 + u64::from(i) * 1_000_000_000,
        badge: 4000 + i,
        door: (i % 4) as u16,
        granted: u8::from(i % 5 != 0),
        _pad: 0,
    }
}

fn config_text(format: &str, addr: &str, key: &Path, rsid: &Path) -> String {
    format!(
        "[format]\ntype = \"{format}\"\n[sink]\ntype = \"syslog\"\ntransport = \"udp\"\n\
         address = \"{addr}\"\n[sink.sign]\nkey_file = \"{}\"\nrsid_file = \"{}\"\n\
         every_messages = 4\n",
        key.display(),
        rsid.display()
    )
}

fn start_err(text: &str) -> String {
    let cfg = match LogConfig::from_toml_str(text) {
        Ok(c) => c,
        Err(e) => return e.to_string(),
    };
    match cfg.start::<DoorEvent>() {
        Ok(_) => panic!("started: {text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_signing_syslog_sink_from_the_config_sends_blocks_that_verify() {
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = (dir.path().join("sign.key"), dir.path().join("sign.pub"));
    let vk = seal::generate_key_pair(&key, &public).unwrap();
    let rsid = dir.path().join("sign.rsid");
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = rx.local_addr().unwrap().to_string();
    let cfg = LogConfig::from_toml_str(&config_text("rfc5424", &addr, &key, &rsid)).unwrap();
    let logger = cfg.start::<DoorEvent>().unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..10 {
        assert!(p.log(event(i)));
    }
    drop(p);
    let st = logger.shutdown().unwrap();
    assert_eq!(st.written_records, 10, "{st:?}");
    // 10 events, blocks of 4, 4 and (at the drain) 2, one Certificate
    // Block first: 14 datagrams.
    rx.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut file = Vec::new();
    let mut buf = [0u8; 4096];
    for _ in 0..14 {
        let n = rx.recv(&mut buf).unwrap();
        file.extend_from_slice(&buf[..n]);
        file.push(b'\n');
    }
    rx.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    assert!(rx.recv(&mut buf).is_err(), "more than 14 datagrams");
    let text = String::from_utf8(file.clone()).unwrap();
    assert!(text.starts_with("<110>1 "), "{text}");
    assert_eq!(
        text.matches("[ssign-cert VER=\"0129\" RSID=\"1\"").count(),
        1
    );
    assert_eq!(text.matches("[ssign VER=\"0129\" RSID=\"1\"").count(), 3);
    assert!(
        text.contains(" GBC=\"3\" FMN=\"9\" CNT=\"2\" HB=\""),
        "{text}"
    );
    let received = dir.path().join("received.log");
    std::fs::write(&received, &file).unwrap();
    let r = verify_syslog::verify_syslog_file(
        &received,
        &[vk],
        None,
        verify_syslog::SyslogLimits::default(),
    )
    .unwrap();
    assert!(r.finding.is_none(), "{:?}", r.finding);
    assert_eq!((r.verified, r.blocks, r.unsigned), (10, 3, 0));
    assert_eq!(std::fs::read_to_string(&rsid).unwrap(), "1\n");
}

#[test]
fn a_signing_syslog_sink_is_refused_for_another_format_a_bad_key_or_a_typo() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = (dir.path().join("sign.key"), dir.path().join("sign.pub"));
    seal::generate_key_pair(&key, &public).unwrap();
    let rsid = dir.path().join("sign.rsid");
    let addr = "127.0.0.1:9";
    let m = start_err(&config_text("json", addr, &key, &rsid));
    assert!(m.contains("sign") && m.contains("rfc5424"), "{m}");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let m = start_err(&config_text("rfc5424", addr, &key, &rsid));
    assert!(m.contains("mode 0644") && m.contains("must be 0600"), "{m}");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let typo = config_text("rfc5424", addr, &key, &rsid).replace("every_messages", "every_msgs");
    let m = start_err(&typo);
    assert!(m.contains("every_msgs"), "{m}");
    let too_many = config_text("rfc5424", addr, &key, &rsid)
        .replace("every_messages = 4", "every_messages = 100");
    let m = start_err(&too_many);
    assert!(m.contains("every_messages 100 is outside 1..=99"), "{m}");
    assert!(!rsid.exists(), "no session taken by a refused sink");
}
