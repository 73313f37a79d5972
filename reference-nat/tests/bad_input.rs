//! Bad input through the whole program: a clear error or a counted verdict,
//! never a panic, and nothing that was read is lost.

use std::path::{Path, PathBuf};
use std::process::Command;

use dplog::config::{FileSinkConfig, SinkConfig};
use dplog::formatters::Format;
use dplog_nat::app::{run, AppConfig, RunError, Summary};
use dplog_nat::InputErrorKind;

mod pcapng;
use pcapng::{epb, idb, ng_block, shb};

fn shared(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/pcaps")
        .join(name)
}

fn cfg(pcap: &Path, out: &Path) -> AppConfig {
    let mut c = AppConfig::default();
    c.input.pcap = Some(pcap.to_path_buf());
    c.nat.inside = vec!["10.0.0.0/8".parse().unwrap()];
    c.format.kind = Format::Json;
    c.sink = SinkConfig::File(FileSinkConfig {
        path: out.to_path_buf(),
        ..Default::default()
    });
    c
}

/// A legacy pcap (microsecond, little-endian, Ethernet) from
/// `(caplen, orig_len, bytes)` records, written by hand because the test
/// needs records that lie about their lengths.
fn pcap(records: &[(u32, u32, Vec<u8>)]) -> Vec<u8> {
    pcap_snap(records, 65535)
}

/// [`pcap`] with snap length `snaplen`.
fn pcap_snap(records: &[(u32, u32, Vec<u8>)], snaplen: u32) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&4u16.to_le_bytes());
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&snaplen.to_le_bytes());
    f.extend_from_slice(&1u32.to_le_bytes());
    for (i, (caplen, orig, data)) in records.iter().enumerate() {
        f.extend_from_slice(&(1_700_000_000u32 + i as u32).to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&caplen.to_le_bytes());
        f.extend_from_slice(&orig.to_le_bytes());
        f.extend_from_slice(data);
    }
    f
}

/// Ethernet + IPv4 (with `options`) + `l4` bytes; 10.1.2.3 → 203.0.113.9.
fn frame(proto: u8, options: &[u8], l4: &[u8]) -> Vec<u8> {
    let ihl = 5 + options.len() / 4;
    let total = (ihl * 4 + l4.len()) as u16;
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.push(0x40 | ihl as u8);
    f.push(0);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0x12, 0x34, 0x40, 0x00, 64, proto, 0, 0]);
    f.extend_from_slice(&[10, 1, 2, 3, 203, 0, 113, 9]);
    f.extend_from_slice(options);
    f.extend_from_slice(l4);
    f
}

fn udp(sport: u16, dport: u16) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&12u16.to_be_bytes());
    u.extend_from_slice(&[0, 0, b'a', b'b', b'c', b'd']);
    u
}

fn rec(data: Vec<u8>) -> (u32, u32, Vec<u8>) {
    (data.len() as u32, data.len() as u32, data)
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn input_error(r: Result<Summary, RunError>) -> (Summary, dplog_nat::InputError) {
    match r {
        Err(RunError::Input(s, e)) => (*s, *e),
        Err(e) => panic!("expected an input error, got {e}"),
        Ok(s) => panic!("expected an input error, got {s:?}"),
    }
}

fn lines(p: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn truncated_capture_keeps_everything_before_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let whole = std::fs::read(shared("example.pcap")).unwrap();
    let cut = write(dir.path(), "cut.pcap", &whole[..whole.len() - 10]);
    let out = dir.path().join("cut.jsonl");
    let (s, e) = input_error(run(&cfg(&cut, &out)));
    assert!(
        matches!(e.kind, InputErrorKind::Truncated { packets_read: 4630 }),
        "{e}"
    );
    assert!(e.to_string().contains("truncated"), "{e}");
    assert_eq!(s.packets, 4630);
    // Every session of the packets read was created, deleted and written.
    assert_eq!(s.sessions_created, s.sessions_deleted);
    assert!(s.sessions_created >= 64, "{}", s.sessions_created);
    assert_eq!(s.records.written, 2 * s.sessions_created);
    assert_eq!(lines(&out).len() as u64, s.records.written);
}

#[test]
fn a_record_longer_than_the_rest_of_the_file_is_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = pcap(&[rec(frame(17, &[], &udp(4000, 53)))]);
    // Header of a second record that claims 1000 bytes; 20 follow.
    bytes.extend_from_slice(&1_700_000_009u32.to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.extend_from_slice(&1000u32.to_le_bytes());
    bytes.extend_from_slice(&1000u32.to_le_bytes());
    bytes.extend_from_slice(&[0u8; 20]);
    let p = write(dir.path(), "long.pcap", &bytes);
    let out = dir.path().join("long.jsonl");
    let (s, e) = input_error(run(&cfg(&p, &out)));
    assert!(
        matches!(e.kind, InputErrorKind::Truncated { packets_read: 1 }),
        "{e}"
    );
    assert_eq!(e.offset, 24 + 16 + 46, "{e}");
    assert_eq!(s.sessions_created, 1);
    assert_eq!(lines(&out).len(), 2);
}

#[test]
fn a_record_longer_than_its_wire_length_is_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let good = frame(17, &[], &udp(4000, 53));
    let liar = frame(17, &[], &udp(4001, 53));
    let n = liar.len() as u32;
    let p = write(
        dir.path(),
        "liar.pcap",
        &pcap(&[rec(good), (n, n - 10, liar)]),
    );
    let s = run(&cfg(&p, &dir.path().join("o.jsonl"))).unwrap();
    assert_eq!(s.capture_skipped_bad_caplen, 1);
    assert_eq!(s.packets, 1);
    assert_eq!(s.sessions_created, 1);
}

#[test]
fn a_zero_length_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "empty.pcap", b"");
    let (s, e) = input_error(run(&cfg(&p, &dir.path().join("o.jsonl"))));
    assert!(matches!(e.kind, InputErrorKind::Empty));
    assert!(e.to_string().contains("empty file"), "{e}");
    assert_eq!(s.packets, 0);
}

#[test]
fn not_a_capture_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "notes.txt", b"hello, this is not a pcap\n");
    let (_, e) = input_error(run(&cfg(&p, &dir.path().join("o.jsonl"))));
    assert!(matches!(e.kind, InputErrorKind::BadMagic(_)), "{e}");
}

#[test]
fn ports_are_read_after_ipv4_options() {
    let dir = tempfile::tempdir().unwrap();
    // IHL 7: a record-route-like option of 8 bytes (NOP NOP + 6 padding).
    let opts = [1u8, 1, 0, 0, 0, 0, 0, 0];
    let p = write(
        dir.path(),
        "opts.pcap",
        &pcap(&[rec(frame(17, &opts, &udp(5555, 53)))]),
    );
    let out = dir.path().join("opts.jsonl");
    let s = run(&cfg(&p, &out)).unwrap();
    assert_eq!(s.verdict("translated_out"), 1);
    let l = lines(&out);
    assert_eq!(l.len(), 2);
    assert_eq!(l[0]["natEvent"], 4);
    assert_eq!(l[0]["sourceIPv4Address"], "10.1.2.3");
    assert_eq!(l[0]["sourceTransportPort"], 5555);
    assert_eq!(l[0]["destinationTransportPort"], 53);
    assert_eq!(l[1]["initiatorOctets"], 40);
}

#[test]
fn a_tcp_header_longer_than_the_packet_is_counted_malformed() {
    let dir = tempfile::tempdir().unwrap();
    let mut tcp = vec![0x9c, 0x40, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0];
    tcp.push(15 << 4); // data offset 15: a 60-byte header, 20 present
    tcp.extend_from_slice(&[0x02, 0xff, 0xff, 0, 0, 0, 0]);
    let p = write(
        dir.path(),
        "tcp.pcap",
        &pcap(&[rec(frame(6, &[], &tcp)), rec(frame(17, &[], &udp(1, 2)))]),
    );
    let s = run(&cfg(&p, &dir.path().join("o.jsonl"))).unwrap();
    assert_eq!(s.packets, 2);
    assert_eq!(s.verdict("malformed_tcp_data_offset_past_end"), 1);
    assert_eq!(
        s.sessions_created, 1,
        "the good packet after it still works"
    );
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dplog-nat"))
}

#[test]
fn cli_reports_a_truncated_capture_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let whole = std::fs::read(shared("http-packets.pcap")).unwrap();
    let cut = write(dir.path(), "cut.pcap", &whole[..whole.len() / 2]);
    let out = dir.path().join("o.log");
    let o = bin()
        .args([
            "--inside",
            "172.16.30.190/32",
            "--summary",
            "json",
            "--pcap",
        ])
        .arg(&cut)
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("truncated file"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let written = s["records"]["written"].as_u64().unwrap();
    assert!(written > 0);
    assert_eq!(
        std::fs::read_to_string(&out).unwrap().lines().count() as u64,
        written
    );
}

#[test]
fn cli_rejects_bad_config_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let c = write(dir.path(), "c.toml", b"[ring]\ncapacity = 64\nslots = 3\n");
    let o = bin().arg("--config").arg(&c).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("unknown field `slots`") && err.contains("line 3"),
        "{err}"
    );

    let o = bin()
        .args(["--ring-size", "1000", "--packets", "10"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("1000") && err.contains("power of two"),
        "{err}"
    );

    let o = bin()
        .args(["--pcap", "/nonexistent.pcap"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("/nonexistent.pcap"), "{err}");

    let o = bin()
        .args(["--pool", "10.0.0.0/28", "--packets", "10"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("10.0.0.0/28"));
}

#[test]
fn cli_reports_a_corrupt_caplen_as_such_not_as_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = pcap(&[
        rec(frame(17, &[], &udp(4000, 53))),
        rec(frame(17, &[], &udp(4001, 53))),
    ]);
    let bad_at = bytes.len();
    // Third record header: caplen 0x7fff_0000, far above the snap length
    // 65535, then a few bytes.
    bytes.extend_from_slice(&1_700_000_009u32.to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.extend_from_slice(&0x7fff_0000u32.to_le_bytes());
    bytes.extend_from_slice(&60u32.to_le_bytes());
    bytes.extend_from_slice(&[0u8; 60]);
    let p = write(dir.path(), "badcap.pcap", &bytes);
    let out = dir.path().join("o.log");
    let o = bin()
        .args(["--inside", "10.0.0.0/8", "--summary", "json", "--pcap"])
        .arg(&p)
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "at byte offset {bad_at}: corrupt record header: packet 3 claims a captured length of {} bytes, more than the snap length of 65535 bytes; 2 packets were read before it",
            0x7fff_0000u32
        )),
        "{err}"
    );
    assert!(!err.contains("truncated"), "{err}");
    // The two packets before it were translated and logged.
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["sessions_created"], 2);
    assert_eq!(s["records"]["written"], 4);
}

#[test]
fn an_input_refused_at_its_header_opens_no_log() {
    let dir = tempfile::tempdir().unwrap();
    let full = std::fs::read(shared("example.pcap")).unwrap();
    let cut = write(dir.path(), "cut.pcap", &full[..12]);
    let empty = write(dir.path(), "empty.pcap", b"");
    let notes = write(dir.path(), "notes.txt", b"hello, this is not a pcap\n");
    for (i, p) in [dir.path().join("missing.pcap"), cut, empty, notes]
        .iter()
        .enumerate()
    {
        let out = dir.path().join(format!("o{i}.jsonl"));
        let (s, e) = input_error(run(&cfg(p, &out)));
        assert_eq!(e.path, *p);
        assert!(e.to_string().starts_with(&p.display().to_string()), "{e}");
        assert_eq!(s.packets, 0);
        assert_eq!(s.records.produced, 0);
        assert_eq!(s.input_error.as_deref(), Some(&*e.to_string()));
        assert!(!out.exists(), "{}: the log must not be created", e);
    }
    // A capture whose header is whole but that is cut in its first record
    // still opens the log (the reader got that far) and says so.
    let p = write(dir.path(), "rec.pcap", &full[..30]);
    let out = dir.path().join("rec.jsonl");
    let (_, e) = input_error(run(&cfg(&p, &out)));
    assert!(
        matches!(e.kind, InputErrorKind::Truncated { packets_read: 0 }),
        "{e}"
    );
    assert!(out.exists());
}

// --- pcapng, written by hand (see `pcapng`).

/// Obsolete Packet Block (type 2): 16-bit interface id, drops count.
fn obsolete_pb(if_id: u16, sec: u64, data: &[u8]) -> Vec<u8> {
    let ts = sec * 1_000_000;
    let mut body = if_id.to_le_bytes().to_vec();
    body.extend_from_slice(&0u16.to_le_bytes());
    body.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
    body.extend_from_slice(&(ts as u32).to_le_bytes());
    body.extend_from_slice(&(data.len() as u32).to_le_bytes());
    body.extend_from_slice(&(data.len() as u32).to_le_bytes());
    body.extend_from_slice(data);
    ng_block(2, &body)
}

/// Simple Packet Block (type 3): wire length, data; interface 0.
fn spb(data: &[u8]) -> Vec<u8> {
    let mut body = (data.len() as u32).to_le_bytes().to_vec();
    body.extend_from_slice(data);
    ng_block(3, &body)
}

/// Runs the dplog-nat binary on `capture`; returns its JSON summary and
/// the number of lines in its log.
fn nat_json(capture: &Path, out: &Path) -> (serde_json::Value, u64) {
    let o = bin()
        .args(["--inside", "10.0.0.0/8", "--summary", "json", "--pcap"])
        .arg(capture)
        .arg("--output")
        .arg(out)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let n = std::fs::read_to_string(out).unwrap().lines().count() as u64;
    assert_eq!(s["records"]["written"], n);
    (s, n)
}

/// The counts of a JSON summary every packet of a capture must land in:
/// (packets, verdicts, skipped with a bad caplen, skipped for an unknown
/// interface).
fn accounting(s: &serde_json::Value) -> (u64, Vec<(String, u64)>, u64, u64) {
    let verdicts: Vec<(String, u64)> = serde_json::from_value(s["verdicts"].clone()).unwrap();
    (
        s["packets"].as_u64().unwrap(),
        verdicts,
        s["capture_skipped_bad_caplen"].as_u64().unwrap(),
        s["capture_skipped_unknown_interface"].as_u64().unwrap(),
    )
}

#[test]
fn pcapng_and_pcap_count_a_caplen_above_the_snap_or_wire_length_alike() {
    let dir = tempfile::tempdir().unwrap();
    // Snap length 40 below the 46-byte frames: a record holding all 46
    // bytes is read (as libpcap does) and translated; one that claims
    // more than its wire length is skipped and counted.
    let f1 = frame(17, &[], &udp(4001, 53));
    let liar = frame(17, &[], &udp(4002, 53));
    let f3 = frame(17, &[], &udp(4003, 53));
    let n = f1.len() as u32;
    assert_eq!(n, 46);
    let classic = write(
        dir.path(),
        "snap.pcap",
        &pcap_snap(
            &[rec(f1.clone()), (n, n - 6, liar.clone()), rec(f3.clone())],
            40,
        ),
    );
    let mut ng = shb();
    ng.extend(idb(40));
    ng.extend(epb(0, 1_700_000_000_000_000, &f1, n, n));
    ng.extend(epb(0, 1_700_000_001_000_000, &liar, n, n - 6));
    ng.extend(epb(0, 1_700_000_002_000_000, &f3, n, n));
    let ng = write(dir.path(), "snap.pcapng", &ng);
    let want = (2, vec![("translated_out".to_string(), 2)], 1, 0);
    for p in [classic, ng] {
        let out = dir
            .path()
            .join(format!("{}.log", p.file_name().unwrap().to_string_lossy()));
        let (s, lines) = nat_json(&p, &out);
        assert_eq!(accounting(&s), want, "{}", p.display());
        assert_eq!(s["sessions_created"], 2, "{}", p.display());
        assert_eq!(lines, 4, "{}", p.display());
    }
}

#[test]
fn every_pcapng_packet_block_is_translated_or_counted_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let f = |sport: u16| frame(17, &[], &udp(sport, 53));
    let n = f(0).len() as u32;
    let mut b = shb();
    // Before any interface: a Simple Packet Block has no interface 0.
    b.extend(spb(&f(4100)));
    b.extend(idb(0));
    b.extend(epb(0, 1_700_000_000_000_000, &f(4001), n, n));
    b.extend(epb(5, 1_700_000_001_000_000, &f(4101), n, n)); // interface 5: none
    b.extend(epb(0, 1_700_000_002_000_000, &f(4102), n, n - 6)); // caplen > wire
    b.extend(obsolete_pb(0, 1_700_000_003, &f(4002)));
    b.extend(obsolete_pb(3, 1_700_000_004, &f(4103))); // interface 3: none
                                                       // A new section forgets the interfaces of the first.
    b.extend(shb());
    b.extend(epb(0, 1_700_000_005_000_000, &f(4104), n, n));
    b.extend(idb(0));
    b.extend(epb(0, 1_700_000_006_000_000, &f(4003), n, n));
    b.extend(spb(&f(4004)));
    let p = write(dir.path(), "mixed.pcapng", &b);
    let out = dir.path().join("mixed.log");
    let (s, lines) = nat_json(&p, &out);
    // 9 packet blocks: 4 translated, 1 with a bad caplen, 4 of an
    // undescribed interface (the first SPB, interfaces 5 and 3, the EPB
    // before the second section's IDB).
    assert_eq!(
        accounting(&s),
        (4, vec![("translated_out".to_string(), 4)], 1, 4)
    );
    assert_eq!(s["sessions_created"], 4);
    assert_eq!(lines, 8);
    // The log holds the four translated flows and no other.
    let mut ports: Vec<u64> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let (_, rest) = l.split_once(" sourceTransportPort=")?;
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .collect();
    ports.sort();
    ports.dedup();
    assert_eq!(ports, [4001, 4002, 4003, 4004]);
    // The text summary names what was skipped and why.
    let o = bin()
        .args(["--inside", "10.0.0.0/8", "--pcap"])
        .arg(&p)
        .arg("--output")
        .arg(dir.path().join("text.log"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("  skipped            5 capture records not translated: 1 captured longer than on the wire (bad_caplen), 4 for an undescribed pcapng interface (unknown_interface)"),
        "{text}"
    );
}
