//! A sealed file sink (`[sink] seal = { key_file = ... }`) in every
//! format, with a record type a user declares (a storage array's I/O
//! latency sample): the output is byte for byte what the same config
//! writes without `seal`, `dplog::sinks::verify` proves it whole,
//! and a byte changed inside it is found at the first record of the
//! write that holds it. Then the config's refusals: a missing or
//! unprotected key file, `sign_every_s = 0`, `reopen_on_sighup`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use dplog::config::LogConfig;
use dplog::schema::{HasSchema, Schema};
use dplog::sinks::{seal, verify};
use dplog::{schema, Record, RecordHeader};

const T0: u64 = 1_767_225_600_000_000_000;

/// One latency sample of a storage volume: 32 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
struct IoSample {
    header: RecordHeader,
    time_ns: u64,
    volume: u32,
    latency_us: u32,
    op: u8,
    _pad: [u8; 3],
    queue_depth: u32,
}
const _: () = assert!(std::mem::size_of::<IoSample>() == 32);

impl Record for IoSample {
    const SCHEMA_ID: u16 = 377;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 4 + 4 + 1 + 3 + 4 = 32 bytes without implicit
// padding (size asserted above); the schema is built from its own
// offset_of! values and size_of.
unsafe impl HasSchema for IoSample {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(IoSample, id = 377, name = "ioSample", [
                time_ns => "eventTime": NsTimestamp, ie 0;
                volume => "volumeId": U32, ie 0;
                latency_us => "latencyMicros": U32, ie 0;
                op => "ioOp": Enum, ie 0, names &[(1, "READ"), (2, "WRITE")];
                queue_depth => "queueDepth": U32, ie 0;
            ])
            .unwrap()
        })
    }
}

fn sample(i: u64) -> IoSample {
    IoSample {
        header: RecordHeader::of::<IoSample>(),
        time_ns: T0 + i * 250_000,
        volume: 7 + (i % 5) as u32,
        latency_us: 90 + (i * 37 % 400) as u32,
        op: 1 + (i % 2) as u8,
        _pad: [0; 3],
        queue_depth: (i % 32) as u32,
    }
}

const FORMATS: [&str; 7] = [
    "text", "json", "csv", "rfc5424", "rfc3164", "binary", "ipfix",
];

fn config_text(format: &str, path: &Path, seal: Option<&Path>) -> String {
    let mut t = format!("[ring]\npublish_every = 16\n[format]\ntype = \"{format}\"\n");
    if format == "ipfix" {
        t.push_str("[format.ipfix]\nexport_clock = \"record\"\n");
    }
    if format.starts_with("rfc") {
        t.push_str("[format.syslog]\nhostname = \"array1\"\nprocid = \"7\"\n");
    }
    t.push_str(&format!(
        "[sink]\ntype = \"file\"\npath = \"{}\"\n",
        path.display()
    ));
    if let Some(k) = seal {
        t.push_str(&format!(
            "seal = {{ key_file = \"{}\", sign_every_s = 1 }}\n",
            k.display()
        ));
    }
    t
}

/// Logs 3 groups of 40 samples, each waited for in the file, so the
/// sink writes at least 3 batches; returns the file's bytes.
fn run(format: &str, path: &Path, seal: Option<&Path>) -> Vec<u8> {
    run_groups(format, path, seal, 3)
}

/// [`run`] with `groups` groups of 40.
fn run_groups(format: &str, path: &Path, seal: Option<&Path>, groups: u64) -> Vec<u8> {
    let cfg = LogConfig::from_toml_str(&config_text(format, path, seal)).unwrap();
    let logger = cfg.start::<IoSample>().unwrap();
    let mut p = logger.producer().unwrap();
    for g in 0..groups {
        let before = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        for i in 0..40 {
            assert!(p.log(sample(g * 40 + i)));
        }
        p.flush();
        let t = Instant::now();
        while std::fs::metadata(path).map(|m| m.len()).unwrap_or(0) == before {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "{format}: group {g} never written"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    drop(p);
    let stats = logger.shutdown().unwrap();
    assert_eq!(stats.written_records, groups * 40, "{format}");
    std::fs::read(path).unwrap()
}

/// The bytes of a run without the binary format's TSC calibration
/// frames (`C`: this run's clock), which differ between any two runs.
fn without_calibration(format: &str, b: &[u8]) -> Vec<u8> {
    if format != "binary" {
        return b.to_vec();
    }
    let mut out = Vec::new();
    let mut p = 0;
    while p < b.len() {
        let n = 4 + u16::from_le_bytes([b[p + 2], b[p + 3]]) as usize;
        if b[p] != b'C' {
            out.extend_from_slice(&b[p..p + n]);
        }
        p += n;
    }
    out
}

/// Records (lines, binary frames, IPFIX messages) starting before `off`.
fn records_before(format: &str, b: &[u8], off: usize) -> u64 {
    let mut n = 0u64;
    let mut p = 0usize;
    match format {
        "binary" => {
            while p < off {
                p += 4 + u16::from_le_bytes([b[p + 2], b[p + 3]]) as usize;
                n += 1;
            }
        }
        "ipfix" => {
            while p < off {
                p += u16::from_be_bytes([b[p + 2], b[p + 3]]) as usize;
                n += 1;
            }
        }
        _ => n = b[..off].iter().filter(|&&c| c == b'\n').count() as u64,
    }
    n
}

/// The sealed writes `(offset, length)` of `path`.
fn writes(path: &Path) -> Vec<(u64, u64)> {
    let b = std::fs::read(seal::seal_path(path)).unwrap();
    let mut r = &b[seal::MAGIC.len()..];
    let (entries, stop) = seal::read_entries(&mut r, 100_000).unwrap();
    assert_eq!(stop, None);
    entries
        .into_iter()
        .filter_map(|(_, e)| match e {
            seal::Entry::Batch { off, len, .. } => Some((off, len)),
            _ => None,
        })
        .collect()
}

#[test]
fn every_format_sealed_is_unchanged_verifies_and_locates_a_changed_byte() {
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = (dir.path().join("seal.key"), dir.path().join("seal.pub"));
    let vk = seal::generate_key_pair(&key, &public).unwrap();
    for format in FORMATS {
        let plain: PathBuf = dir.path().join(format!("plain.{format}"));
        let sealed: PathBuf = dir.path().join(format!("sealed.{format}"));
        let a = run(format, &plain, None);
        let b = run(format, &sealed, Some(&key));
        assert_eq!(
            a.len(),
            b.len(),
            "{format}: sealing changed the output's size"
        );
        assert!(
            without_calibration(format, &a) == without_calibration(format, &b),
            "{format}: sealing changed the output"
        );
        assert!(!seal::seal_path(&plain).exists());
        let w = writes(&sealed);
        assert!(w.len() >= 3, "{format}: {} writes", w.len());
        let r = verify::verify_files(std::slice::from_ref(&sealed), &[vk]).unwrap();
        assert_eq!(r.finding, None, "{format}");
        assert_eq!(r.bytes, b.len() as u64, "{format}");
        assert_eq!(r.writes, w.len() as u64, "{format}");
        assert!(r.signatures >= 1, "{format}");
        assert!(r.notes.is_empty(), "{format}: {:?}", r.notes);

        // A byte in the middle of the last write changed.
        let (off, len) = *w.last().unwrap();
        let at = (off + len / 2) as usize;
        let mut bad = b.clone();
        bad[at] ^= 0x20;
        std::fs::write(&sealed, &bad).unwrap();
        let r = verify::verify_files(std::slice::from_ref(&sealed), &[vk]).unwrap();
        let f = r.finding.unwrap_or_else(|| panic!("{format}: not found"));
        assert_eq!(f.problem, verify::Problem::Altered, "{format}: {f}");
        assert_eq!(f.byte, off, "{format}: {f}");
        assert_eq!(
            f.record,
            records_before(format, &b, off as usize) + 1,
            "{format}: {f}"
        );
        assert_eq!(f.write, Some((off, off + len)), "{format}");
    }
}

fn start_err(text: &str) -> String {
    let cfg = match LogConfig::from_toml_str(text) {
        Ok(c) => c,
        Err(e) => return e.to_string(),
    };
    match cfg.start::<IoSample>() {
        Ok(_) => panic!("started: {text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_sealed_sink_is_refused_for_a_bad_key_file_zero_interval_or_sighup_reopen() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = (dir.path().join("seal.key"), dir.path().join("seal.pub"));
    seal::generate_key_pair(&key, &public).unwrap();
    let out = dir.path().join("out.log");
    let missing = dir.path().join("missing.key");
    let m = start_err(&config_text("json", &out, Some(&missing)));
    assert!(
        m.contains("missing.key") && m.contains("No such file"),
        "{m}"
    );
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let m = start_err(&config_text("json", &out, Some(&key)));
    assert!(m.contains("mode 0640") && m.contains("must be 0600"), "{m}");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(!out.exists(), "no output for a refused sink");

    let zero =
        config_text("json", &out, Some(&key)).replace("sign_every_s = 1", "sign_every_s = 0");
    let m = start_err(&zero);
    assert!(m.contains("sign_every_s") && m.contains("1 or more"), "{m}");
    let hup = format!(
        "{}reopen_on_sighup = true\n",
        config_text("json", &out, Some(&key))
    );
    let m = start_err(&hup);
    assert!(m.contains("reopen_on_sighup") && m.contains("seal"), "{m}");
    let unknown = config_text("json", &out, Some(&key)).replace("sign_every_s", "sign_every");
    let m = start_err(&unknown);
    assert!(m.contains("sign_every"), "{m}");
}

#[test]
fn a_seal_anchor_table_is_a_syslog_sinks_settings() {
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = (dir.path().join("seal.key"), dir.path().join("seal.pub"));
    let vk = seal::generate_key_pair(&key, &public).unwrap();
    let out = dir.path().join("out.log");
    let port = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = port.local_addr().unwrap();
    let anchored = format!(
        "{}[sink.seal.anchor]\ntransport = \"udp\"\naddress = \"{addr}\"\n",
        config_text("json", &out, Some(&key)).replace(
            &format!(
                "seal = {{ key_file = \"{}\", sign_every_s = 1 }}\n",
                key.display()
            ),
            &format!("[sink.seal]\nkey_file = \"{}\"\n", key.display()),
        )
    );
    let cfg = LogConfig::from_toml_str(&anchored).unwrap();
    let logger = cfg.start::<IoSample>().unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..10 {
        assert!(p.log(sample(i)));
    }
    p.flush();
    drop(p);
    logger.shutdown().unwrap();
    // The signature at close reached the receiver as one anchor message.
    port.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut buf = [0u8; 2048];
    let n = port.recv(&mut buf).unwrap();
    let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(
        msg.starts_with("<110>1 - - dplog-seal - head - dplog-seal head log="),
        "{msg}"
    );
    let anchors_file = dir.path().join("anchors.log");
    std::fs::write(&anchors_file, &msg).unwrap();
    let (anchors, bad) = verify::read_anchors(&anchors_file, &[vk]).unwrap();
    assert_eq!((anchors.len(), bad), (1, 0));
    let r = verify::verify_anchored(std::slice::from_ref(&out), &[vk], &anchors).unwrap();
    assert_eq!((r.finding, r.signatures), (None, 1));
    assert_eq!(anchors[0].end, std::fs::metadata(&out).unwrap().len());

    let typo = anchored.replace("address =", "adress =");
    let m = start_err(&typo);
    assert!(m.contains("adress"), "{m}");
}

/// `[sink.seal.anchor]` on an mmap sink and an archive, from the config:
/// the signature at close reaches a receiver on loopback (UDP) as one
/// anchor message, which holds for the segments written; a segment sink
/// without a seal refuses an anchor from the library.
#[test]
fn mmap_and_archive_seals_take_an_anchor_table() {
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = (dir.path().join("seal.key"), dir.path().join("seal.pub"));
    let vk = seal::generate_key_pair(&key, &public).unwrap();
    for (format, sink) in [("json", "mmap"), ("binary", "archive")] {
        let out = dir.path().join(sink);
        std::fs::create_dir(&out).unwrap();
        let port = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let text = format!(
            "[ring]\npublish_every = 16\n[format]\ntype = \"{format}\"\n[sink]\ntype = \"{sink}\"\n\
             dir = \"{}\"\n[sink.seal]\nkey_file = \"{}\"\n[sink.seal.anchor]\n\
             transport = \"udp\"\naddress = \"{}\"\n",
            out.display(),
            key.display(),
            port.local_addr().unwrap()
        );
        let logger = LogConfig::from_toml_str(&text)
            .unwrap()
            .start::<IoSample>()
            .unwrap();
        let mut p = logger.producer().unwrap();
        for i in 0..10 {
            assert!(p.log(sample(i)));
        }
        p.flush();
        drop(p);
        logger.shutdown().unwrap();
        port.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut buf = [0u8; 2048];
        let n = port.recv(&mut buf).unwrap();
        let anchors_file = dir.path().join(format!("{sink}.anchors"));
        std::fs::write(&anchors_file, &buf[..n]).unwrap();
        let (anchors, bad) = verify::read_anchors(&anchors_file, &[vk]).unwrap();
        assert_eq!((anchors.len(), bad), (1, 0), "{sink}");
        let files = verify::set_of(&out).unwrap();
        let r = verify::verify_anchored(&files, &[vk], &anchors).unwrap();
        assert_eq!(
            (r.finding, r.signatures),
            (None, 1),
            "{sink}: {:?}",
            r.notes
        );
        // One segment: its sealed bytes end where the head says (after
        // the mmap segment's 4 KiB header, which is not sealed).
        let base = if sink == "mmap" { 4096 } else { 0 };
        assert_eq!((files.len(), anchors[0].end), (1, base + r.bytes), "{sink}");
    }
    let mut unsealed = dplog::sinks::MmapSink::open(dir.path(), Default::default()).unwrap();
    let udp = dplog::sinks::SyslogSink::new(dplog::sinks::SyslogSinkOptions::new(
        dplog::sinks::SyslogTransport::Udp("127.0.0.1:9".parse().unwrap()),
    ))
    .unwrap();
    let e = unsealed.set_seal_anchor(Box::new(udp)).unwrap_err();
    assert!(e.to_string().contains("an anchor needs a seal"), "{e}");
}

/// The sealed writes `(offset, length)` of every segment seal in `dir`,
/// with the segment, in sequence order.
fn segment_writes(dir: &Path) -> Vec<(PathBuf, Vec<(u64, u64)>)> {
    verify::set_of(dir)
        .unwrap()
        .into_iter()
        .map(|p| {
            let w = writes(&p);
            (p, w)
        })
        .collect()
}

#[test]
fn a_sealed_archive_chains_its_segments_across_a_restart_and_a_crash() {
    use dplog::sinks::{ArchiveSink, ArchiveSinkOptions};
    use dplog::Sink;
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = (dir.path().join("seal.key"), dir.path().join("seal.pub"));
    let vk = seal::generate_key_pair(&key, &public).unwrap();
    // A binary stream of the user's records (schemas, calibration,
    // records) to feed the archive as a logger's consumer would.
    let stream = run_groups("binary", &dir.path().join("stream.bin"), None, 12);
    let arch = dir.path().join("archive");
    std::fs::create_dir(&arch).unwrap();
    let opts = ArchiveSinkOptions {
        index: vec![],
        block_rows: 8,
        segment_bytes: 4096,
        seal: Some(seal::SealOptions {
            key_file: key.clone(),
            sign_every: None,
            hasher: seal::HasherMode::Thread,
            hasher_cpu: None,
        }),
        ..Default::default()
    };
    // Run 1, closed; run 2, "crashed" (dropped without close: its open
    // segment stays as it was).
    let mut a = ArchiveSink::open(&arch, opts.clone()).unwrap();
    a.write_batch(&stream).unwrap();
    a.close().unwrap();
    drop(a);
    let after_run1 = segment_writes(&arch).len();
    assert!(after_run1 >= 2, "{after_run1} segments");
    let mut a = ArchiveSink::open(&arch, opts.clone()).unwrap();
    a.write_batch(&stream).unwrap();
    drop(a);
    assert!(
        std::fs::read_dir(&arch).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".dpa.open.seal")),
        "an open segment's seal left"
    );
    // Run 3 recovers it (its footer sealed late), then writes and closes.
    let mut a = ArchiveSink::open(&arch, opts.clone()).unwrap();
    a.write_batch(&stream).unwrap();
    a.close().unwrap();

    let segs = segment_writes(&arch);
    let files: Vec<PathBuf> = segs.iter().map(|(p, _)| p.clone()).collect();
    let r = verify::verify_files(&files, &[vk]).unwrap();
    assert_eq!(r.finding, None, "{:?}", r.notes);
    assert_eq!(
        r.writes as usize,
        segs.iter().map(|(_, w)| w.len()).sum::<usize>()
    );
    assert_eq!(r.signatures as usize, files.len(), "one per segment");
    assert!(
        r.notes.iter().any(|n| n.contains("found unsealed")),
        "the recovered footer is named: {:?}",
        r.notes
    );
    // Bytes appended to the first segment, sealed and closed long ago (a
    // copy of its last block): found where they start.
    let (seg0, w0) = &segs[0];
    let orig = std::fs::read(seg0).unwrap();
    let (boff, blen) = w0[w0.len() - 2];
    let mut grown = orig.clone();
    grown.extend_from_slice(&orig[boff as usize..(boff + blen) as usize]);
    std::fs::write(seg0, &grown).unwrap();
    let f = verify::verify_files(&files, &[vk])
        .unwrap()
        .finding
        .unwrap();
    assert_eq!(
        (f.problem, &f.file, f.byte),
        (verify::Problem::AppendedAfterClose, seg0, orig.len() as u64),
        "{f}"
    );
    std::fs::write(seg0, &orig).unwrap();
    // A byte of a block in the second segment changed: found at that
    // block (record = the segment header and the blocks before it, + 1).
    let (seg, w) = &segs[1];
    let (k, (off, len)) = w.iter().enumerate().find(|(_, (_, l))| *l > 64).unwrap();
    let mut bytes = std::fs::read(seg).unwrap();
    bytes[(off + len - 3) as usize] ^= 0x40;
    std::fs::write(seg, &bytes).unwrap();
    let f = verify::verify_files(&files, &[vk])
        .unwrap()
        .finding
        .unwrap();
    assert_eq!(f.problem, verify::Problem::Altered, "{f}");
    assert_eq!(
        (&f.file, f.record, f.byte),
        (seg, k as u64 + 1, *off),
        "{f}"
    );
}

#[test]
fn sealed_mmap_segments_chain_across_segments_and_a_restart() {
    use dplog::sinks::{MmapSink, MmapSinkOptions};
    use dplog::Sink;
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = (dir.path().join("seal.key"), dir.path().join("seal.pub"));
    let vk = seal::generate_key_pair(&key, &public).unwrap();
    let stream = run_groups("binary", &dir.path().join("stream.bin"), None, 80);
    let segs_dir = dir.path().join("segments");
    std::fs::create_dir(&segs_dir).unwrap();
    let opts = MmapSinkOptions {
        segment_bytes: 64 * 1024,
        prefix: "io".into(),
        seal: Some(seal::SealOptions {
            key_file: key.clone(),
            sign_every: None,
            hasher: seal::HasherMode::Thread,
            hasher_cpu: None,
        }),
        ..Default::default()
    };
    // The stream in batches of whole frames, over two runs: the first
    // dropped without close (a crash: its last segment unsigned), the
    // second resuming that segment and going on.
    let mut frames = Vec::new();
    let mut p = 0;
    while p < stream.len() {
        let n = 4 + u16::from_le_bytes([stream[p + 2], stream[p + 3]]) as usize;
        frames.push(&stream[p..p + n]);
        p += n;
    }
    let half = frames.len() / 2;
    let mut s = MmapSink::open(&segs_dir, opts.clone()).unwrap();
    s.write_batch(&frames[..half].concat()).unwrap();
    drop(s);
    let mut s = MmapSink::open(&segs_dir, opts.clone()).unwrap();
    s.write_batch(&frames[half..].concat()).unwrap();
    s.close().unwrap();
    drop(s);

    let files = verify::set_of(&segs_dir).unwrap();
    assert!(files.len() >= 2, "{files:?}");
    let r = verify::verify_files(&files, &[vk]).unwrap();
    assert_eq!(r.finding, None, "{:?}", r.notes);
    assert!(r.notes.is_empty(), "{:?}", r.notes);
    // Every committed data byte is sealed, none of the headers.
    let committed: u64 = files
        .iter()
        .map(|f| {
            let b = std::fs::read(f).unwrap();
            u64::from_le_bytes(b[24..32].try_into().unwrap())
        })
        .sum();
    assert_eq!(r.bytes, committed);
    assert_eq!(r.signatures as usize, files.len(), "one per segment");

    // A frame appended to the last segment after the sink closed it (its
    // committed length raised to take it): found where it starts.
    let last = files.last().unwrap();
    let orig = std::fs::read(last).unwrap();
    let base = dplog::sinks::mmap::reader::HEADER_BYTES;
    let committed = u64::from_le_bytes(orig[24..32].try_into().unwrap()) as usize;
    let frame = frames[frames.len() - 1];
    assert!(base + committed + frame.len() <= orig.len());
    let mut grown = orig.clone();
    grown[base + committed..base + committed + frame.len()].copy_from_slice(frame);
    grown[24..32].copy_from_slice(&((committed + frame.len()) as u64).to_le_bytes());
    std::fs::write(last, &grown).unwrap();
    let f = verify::verify_files(&files, &[vk])
        .unwrap()
        .finding
        .unwrap();
    assert_eq!(
        (f.problem, &f.file, f.byte),
        (
            verify::Problem::AppendedAfterClose,
            last,
            (base + committed) as u64
        ),
        "{f}"
    );
    let before = records_before("binary", &grown[base..], committed);
    assert_eq!(f.record, before + 1, "{f}");
    std::fs::write(last, &orig).unwrap();

    // A byte of a record in the first segment changed: found at the
    // first frame of the write that holds it.
    let w = writes(&files[0]);
    let (off, len) = w[w.len() / 2];
    let mut b = std::fs::read(&files[0]).unwrap();
    b[(off + len / 2) as usize] ^= 0x01;
    std::fs::write(&files[0], &b).unwrap();
    let f = verify::verify_files(&files, &[vk])
        .unwrap()
        .finding
        .unwrap();
    assert_eq!(f.problem, verify::Problem::Altered, "{f}");
    assert_eq!(f.byte, off, "{f}");
    let before = records_before("binary", &b[base..], off as usize - base);
    assert_eq!(f.record, before + 1, "{f}");
}

/// The child half of `a_sealed_log_killed_mid_stream_verifies_up_to_its_last_sealed_write`:
/// logs samples through a text file sink whose seal hashes on its hasher
/// thread, as fast as the ring takes them, until killed (at most
/// 3,000,000 samples, ~180 MB, then it waits). Runs only when spawned by
/// that test.
#[test]
#[ignore = "helper process for the kill test"]
fn sealed_kill_child() {
    let (Ok(path), Ok(key)) = (
        std::env::var("DPLOG_SEAL_CHILD_PATH"),
        std::env::var("DPLOG_SEAL_CHILD_KEY"),
    ) else {
        return;
    };
    let text = format!(
        "[format]\ntype = \"text\"\n[sink]\ntype = \"file\"\npath = \"{path}\"\n\
         seal = {{ key_file = \"{key}\", hasher = \"thread\" }}\n"
    );
    let logger = LogConfig::from_toml_str(&text)
        .unwrap()
        .start::<IoSample>()
        .unwrap();
    let mut p = logger.producer().unwrap();
    for i in 0..3_000_000 {
        while !p.log(sample(i)) {
            std::thread::yield_now();
        }
    }
    p.flush();
    std::thread::sleep(Duration::from_secs(600));
}

#[test]
fn a_sealed_log_killed_mid_stream_verifies_up_to_its_last_sealed_write() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = (dir.path().join("seal.key"), dir.path().join("seal.pub"));
    let vk = seal::generate_key_pair(&key, &public).unwrap();
    let path = dir.path().join("io.log");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "sealed_kill_child", "--nocapture"])
        .env("DPLOG_SEAL_CHILD_PATH", &path)
        .env("DPLOG_SEAL_CHILD_KEY", &key)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed while it writes: once the file holds 4 MB and the seal some
    // entries, the sink is busy writing and hashing.
    let t0 = Instant::now();
    let len = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    while len(&path) < 4 << 20 || len(&seal::seal_path(&path)) < 1000 {
        if t0.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("the child wrote {} bytes in 120 s", len(&path));
        }
        assert!(child.try_wait().unwrap().is_none(), "child ended early");
        std::thread::sleep(Duration::from_millis(2));
    }
    // `Child::kill` is SIGKILL: no close, no final signature.
    child.kill().unwrap();
    assert!(!child.wait().unwrap().success());

    let data = std::fs::read(&path).unwrap();
    // A kill can land inside a write(2): the kernel stops a regular
    // file's write between pages on a fatal signal, so the file may end in
    // a torn line. No sealed write covers it.
    let whole = data.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let r = verify::verify_files(std::slice::from_ref(&path), &[vk]).unwrap();
    assert_eq!(r.finding, None, "{:?}", r.finding);
    assert!(r.writes > 0 && r.bytes > 0);
    let sealed_end = writes(&path).last().map(|&(o, l)| o + l).unwrap();
    assert_eq!(r.bytes, sealed_end);
    assert!(
        sealed_end <= whole as u64,
        "sealed to {sealed_end}, past the last whole line at {whole}"
    );
    // Bytes past the last sealed write (batches the hasher held, or whose
    // entry was not yet written) are named as not sealed, from the
    // record after the last sealed one.
    if sealed_end < data.len() as u64 {
        let note = format!(
            "bytes {sealed_end}..{} from record {} are not sealed",
            data.len(),
            records_before("text", &data, sealed_end as usize) + 1
        );
        assert!(r.notes.iter().any(|n| n.contains(&note)), "{:?}", r.notes);
    }
    eprintln!(
        "killed with {} of {} bytes sealed; notes {:?}",
        sealed_end,
        data.len(),
        r.notes
    );

    // A sink started again on it seals the tail late, and chains on.
    run_groups("text", &path, Some(&key), 1);
    let r = verify::verify_files(std::slice::from_ref(&path), &[vk]).unwrap();
    assert_eq!(r.finding, None, "{:?}", r.finding);
    assert_eq!(r.bytes, len(&path));
}

#[test]
fn a_seal_anchor_table_picks_its_sink_by_type_and_the_hasher_setting_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = (dir.path().join("seal.key"), dir.path().join("seal.pub"));
    seal::generate_key_pair(&key, &public).unwrap();
    let out = dir.path().join("out.log");
    let base = format!(
        "[format]\ntype = \"json\"\n[sink]\ntype = \"file\"\npath = \"{}\"\n[sink.seal]\n\
         key_file = \"{}\"\n",
        out.display(),
        key.display()
    );
    let with = |extra: &str| format!("{base}{extra}");
    // Each type takes its own sink's keys, and only those.
    for anchor in [
        "[sink.seal.anchor]\ntransport = \"udp\"\naddress = \"127.0.0.1:514\"\n",
        "[sink.seal.anchor]\ntype = \"syslog\"\ntransport = \"udp\"\naddress = \"127.0.0.1:514\"\n",
        "[sink.seal.anchor]\ntype = \"clickhouse\"\nurl = \"http://127.0.0.1:8123\"\ntable = \"heads\"\n",
        "[sink.seal.anchor]\ntype = \"kafka\"\nbrokers = \"127.0.0.1:9092\"\ntopic = \"heads\"\n",
    ] {
        LogConfig::from_toml_str(&with(anchor)).unwrap_or_else(|e| panic!("{anchor}: {e}"));
    }
    let m = start_err(&with(
        "[sink.seal.anchor]\ntype = \"clickhouse\"\nurl = \"http://127.0.0.1:8123\"\ntable = \"heads\"\ntopic = \"x\"\n",
    ));
    assert!(m.contains("topic"), "{m}");
    let m = start_err(&with("[sink.seal.anchor]\ntype = \"carrier-pigeon\"\n"));
    assert!(
        m.contains("carrier-pigeon") && m.contains("clickhouse"),
        "{m}"
    );
    let m = start_err(&with(
        "[sink.seal.anchor]\ntype = \"clickhouse\"\nurl = \"ftp://x\"\ntable = \"heads\"\n",
    ));
    assert!(m.contains("ftp://x"), "{m}");

    // hasher: "thread" or "inline" for a file sink; the mmap sink hashes
    // inline and refuses a thread.
    LogConfig::from_toml_str(&format!("{base}hasher = \"inline\"\nhasher_cpu = 1\n")).unwrap();
    let m = start_err(&format!("{base}hasher = \"sideways\"\n"));
    assert!(m.contains("sideways"), "{m}");
    let mmap = format!(
        "[format]\ntype = \"json\"\n[sink]\ntype = \"mmap\"\ndir = \"{}\"\n[sink.seal]\n\
         key_file = \"{}\"\nhasher = \"thread\"\n",
        dir.path().display(),
        key.display()
    );
    let m = start_err(&mmap);
    assert!(m.contains("hasher") && m.contains("inline"), "{m}");
}

/// A seal file is as readable as the log it seals, no more: a file sink's
/// log and an mmap sink's segments are 0640 (less the umask), and so are
/// their seals (they were 0644 beside them); a log whose mode the operator
/// set gets a seal of that mode.
#[test]
fn a_seal_file_takes_the_mode_of_its_log() {
    use dplog::sinks::{MmapSink, MmapSinkOptions};
    use dplog::Sink;
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = (dir.path().join("seal.key"), dir.path().join("seal.pub"));
    seal::generate_key_pair(&key, &public).unwrap();
    let log = dir.path().join("sealed.jsonl");
    run_groups("json", &log, Some(&key), 1);
    assert_eq!(mode(&log) & 0o007, 0, "{:o}", mode(&log));
    assert_eq!(mode(&seal::seal_path(&log)), mode(&log));
    // A log the operator made 0600 before the sink opened it.
    let own = dir.path().join("own.jsonl");
    std::fs::write(&own, b"").unwrap();
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o600)).unwrap();
    run_groups("json", &own, Some(&key), 1);
    assert_eq!(mode(&seal::seal_path(&own)), 0o600);
    // mmap segments.
    let segs = dir.path().join("segments");
    std::fs::create_dir(&segs).unwrap();
    let mut s = MmapSink::open(
        &segs,
        MmapSinkOptions {
            segment_bytes: 64 * 1024,
            prefix: "io".into(),
            seal: Some(seal::SealOptions {
                key_file: key.clone(),
                sign_every: None,
                hasher: seal::HasherMode::Thread,
                hasher_cpu: None,
            }),
            ..Default::default()
        },
    )
    .unwrap();
    s.write_batch(b"a line\n").unwrap();
    s.close().unwrap();
    let seg = dplog::sinks::mmap::list_segments(&segs, "io").unwrap()[0]
        .1
        .clone();
    assert_eq!(
        mode(&seal::seal_path(&seg)),
        mode(&seg),
        "{}",
        seg.display()
    );
    assert_eq!(mode(&seg) & 0o007, 0);
}
