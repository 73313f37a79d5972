//! Anchoring against a real rsyslogd on loopback: a sealed file sink, a
//! sealed mmap sink and a sealed archive send every signed head to it
//! over TCP; an attacker with root and the private key rewrites a record
//! and re-signs the whole seal, or cuts the last run (or segment) off
//! with its seal, or seals the log anew. Each passes a check without the
//! anchors, and each is found, at the right record and byte, with
//! `--anchors` (the receiver's file).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use dplog_core::schema::{HasSchema, Schema};
use dplog_core::{schema, Record, RecordHeader, Sink};
use dplog_formatters::binary::BinaryEncoder;
use dplog_formatters::{Format, FormatSpec};
use dplog_sinks::seal::{self, seal_path, Entry, HasherMode, SealOptions};
use dplog_sinks::verify::{self, read_anchors, verify_anchored, verify_files, Problem};
use dplog_sinks::{
    mmap, ArchiveSink, ArchiveSinkOptions, FileSink, FileSinkOptions, MmapSink, MmapSinkOptions,
    SyslogSink, SyslogSinkOptions, SyslogTransport,
};

#[path = "../../../testkit/fixtures/reseal.rs"]
mod reseal;

/// rsyslogd (the testkit's runner) with one TCP input writing each
/// message's raw text to `anchors.log` and its traditional line (time,
/// host, tag, MSG) to `anchors.trad.log`; None (said on stderr) when it
/// is not installed.
struct Rsyslog {
    d: dplog_testkit::rsyslog::Rsyslogd,
    port: u16,
}

impl Rsyslog {
    fn start() -> Option<Rsyslog> {
        if !dplog_testkit::rsyslog::installed() {
            eprintln!(
                "SKIPPED: {} not installed (run scripts/setup.sh)",
                dplog_testkit::rsyslog::RSYSLOGD
            );
            return None;
        }
        let d = dplog_testkit::rsyslog::Rsyslogd::start_tcp(
            r#"module(load="imtcp")
input(type="imtcp" address="127.0.0.1" port="{port}")
template(name="raw" type="string" string="%rawmsg%\n")
action(type="omfile" file="{dir}/anchors.log" template="raw" flushOnTXEnd="on" asyncWriting="off")
action(type="omfile" file="{dir}/anchors.trad.log" template="RSYSLOG_TraditionalFileFormat" flushOnTXEnd="on" asyncWriting="off")
"#,
        );
        let port = d.port();
        Some(Rsyslog { d, port })
    }

    fn out(&self) -> PathBuf {
        self.d.dir().join("anchors.log")
    }

    /// Waits (up to 60 s) until the receiver's file holds `n` anchors.
    fn wait_anchors(&self, n: usize) {
        let t0 = Instant::now();
        loop {
            let got = std::fs::read_to_string(self.out())
                .map(|s| s.matches("dplog-seal head ").count())
                .unwrap_or(0);
            if got >= n {
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "{got} of {n} anchors arrived"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (up to 60 s) until `file` of the receiver's directory holds
    /// `n` lines.
    fn wait_lines(&self, file: &str, n: usize) -> String {
        let t0 = Instant::now();
        loop {
            let text = std::fs::read_to_string(self.d.dir().join(file)).unwrap_or_default();
            let got = text.lines().count();
            if got >= n {
                return text;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "{file}: {got} of {n} lines arrived"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A firewall's drop record, declared by its user: the rule's reason
/// and two more strings (named `head` and `sig` by the firewall's own
/// convention) that may hold any text a packet carried.
#[repr(C)]
#[derive(Clone, Copy)]
struct FwDrop {
    header: RecordHeader,
    time_ns: u64,
    reason: [u8; 200],
    head: [u8; 240],
    sig: [u8; 16],
}

impl Record for FwDrop {
    const SCHEMA_ID: u16 = 620;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 200 + 240 + 16 = 472 bytes without padding,
// described by its own offset_of! values.
unsafe impl HasSchema for FwDrop {
    fn schema() -> &'static Schema {
        static S: std::sync::OnceLock<Schema> = std::sync::OnceLock::new();
        S.get_or_init(|| {
            schema!(FwDrop, id = 620, name = "fwDrop", [
                time_ns => "dropTime": NsTimestamp, ie 0;
                reason => "reason": Bytes, ie 0;
                head => "head": Bytes, ie 0;
                sig => "sig": Bytes, ie 0;
            ])
            .unwrap()
        })
    }
}

fn fw_drop(reason: &str, head: &str, sig: &str) -> FwDrop {
    fn text<const N: usize>(s: &str) -> [u8; N] {
        let mut b = [0u8; N];
        b[..s.len()].copy_from_slice(s.as_bytes());
        b
    }
    FwDrop {
        header: RecordHeader::of::<FwDrop>(),
        time_ns: 1_767_225_600_000_000_000,
        reason: text(reason),
        head: text(head),
        sig: text(sig),
    }
}

/// Formats `records` in `format` (the formatter a logger runs; records
/// this large fit no ring slot, so they are formatted here) and writes
/// them to `sink` in one batch, then closes it.
fn log_fw_drops(format: Format, mut sink: impl Sink, records: &[FwDrop]) {
    let mut f = FormatSpec {
        kind: format,
        ..FormatSpec::default()
    }
    .formatter(&[FwDrop::schema()])
    .unwrap();
    let mut out = Vec::new();
    for r in records {
        assert!(f.push_bytes(dplog_core::RecordBytes::record_bytes(r), &mut out));
    }
    assert_eq!(
        out.iter().filter(|&&b| b == b'\n').count(),
        records.len(),
        "one line per record"
    );
    sink.write_batch(&out).unwrap();
    sink.close().unwrap();
}

fn batch(b: usize) -> Vec<u8> {
    (0..4)
        .map(|i| format!("login user=u{b}{i} port={} result=ok\n", 1000 + b * 4 + i))
        .collect::<String>()
        .into_bytes()
}

/// One run of a sealed sink anchored at `port`: batches `from..to`, then
/// close (a signature, sent). Returns each batch's offset.
fn run(path: &Path, key: &Path, port: u16, from: usize, to: usize) -> Vec<u64> {
    let mut sink = FileSink::with_options(
        path,
        FileSinkOptions {
            seal: Some(SealOptions {
                key_file: key.to_path_buf(),
                sign_every: None,
                hasher: dplog_sinks::seal::HasherMode::Thread,
                hasher_cpu: None,
            }),
            ..Default::default()
        },
    )
    .unwrap();
    let anchor = SyslogSink::new(SyslogSinkOptions::new(SyslogTransport::Tcp(
        ([127, 0, 0, 1], port).into(),
    )))
    .unwrap();
    sink.set_seal_anchor(Box::new(anchor)).unwrap();
    let mut offs = Vec::new();
    let mut at = std::fs::metadata(path).map_or(0, |m| m.len());
    for b in from..to {
        offs.push(at);
        let bytes = batch(b);
        sink.write_batch(&bytes).unwrap();
        at += bytes.len() as u64;
    }
    let counters = sink.counters();
    sink.close().unwrap();
    assert_eq!(
        dplog_sinks::FileSinkCounters::get(&counters.anchor_failed),
        0
    );
    offs
}

#[test]
fn anchored_heads_catch_a_re_signed_rewrite_a_cut_tail_and_a_log_sealed_anew() {
    let Some(rs) = Rsyslog::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = (dir.path().join("seal.key"), dir.path().join("seal.pub"));
    let vk = seal::generate_key_pair(&key, &public).unwrap();
    let path = dir.path().join("logins.log");
    let mut offs = run(&path, &key, rs.port, 0, 6);
    offs.extend(run(&path, &key, rs.port, 6, 10));
    rs.wait_anchors(2);
    let (anchors, bad) = read_anchors(&rs.out(), &[vk]).unwrap();
    assert_eq!((anchors.len(), bad), (2, 0));
    assert_eq!((anchors[0].writes, anchors[0].end), (6, offs[6]));
    let clean = verify_anchored(std::slice::from_ref(&path), &[vk], &anchors).unwrap();
    assert_eq!((clean.finding, clean.signatures), (None, 2));
    let original = std::fs::read(&path).unwrap();
    let original_seal = std::fs::read(seal_path(&path)).unwrap();
    let cli = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_dplog-verify"))
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code().unwrap(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (p, k, a) = (path.to_str().unwrap(), public.to_str().unwrap(), rs.out());
    let a = a.to_str().unwrap();
    assert_eq!(cli(&["--key", k, "--anchors", a, p]).0, 0);

    // 1. A record of the second run rewritten, the seal re-signed with
    //    the stolen key: fine without anchors, found with them where the
    //    first anchored head still matches.
    let mut forged = original.clone();
    let at = offs[8] as usize + 12;
    forged[at] = b'X';
    std::fs::write(&path, &forged).unwrap();
    reseal::reseal(
        std::slice::from_ref(&path),
        &seal::load_signing_key(&key).unwrap(),
    );
    assert_eq!(
        verify_files(std::slice::from_ref(&path), &[vk])
            .unwrap()
            .finding,
        None
    );
    let f = verify_anchored(std::slice::from_ref(&path), &[vk], &anchors)
        .unwrap()
        .finding
        .unwrap();
    assert_eq!(f.problem, Problem::AnchorMismatch, "{f}");
    assert_eq!((f.record, f.byte), (6 * 4 + 1, offs[6]));
    let (code, err) = cli(&["--key", k, "--anchors", a, p]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains(&format!("at record 25 (byte {})", offs[6])),
        "{err}"
    );

    // 2. The second run cut off file and seal (back to the first
    //    signature): found where the file now ends.
    std::fs::write(&path, &original[..offs[6] as usize]).unwrap();
    let (entries, _) = seal::read_entries(&mut &original_seal[seal::MAGIC.len()..], 100).unwrap();
    let (s_at, s) = entries
        .iter()
        .find(|(_, e)| matches!(e, Entry::Sign(_)))
        .unwrap();
    let cut = (s_at + 1 + seal::body_len(s.tag()).unwrap() as u64) as usize;
    std::fs::write(seal_path(&path), &original_seal[..cut]).unwrap();
    assert_eq!(
        verify_files(std::slice::from_ref(&path), &[vk])
            .unwrap()
            .finding,
        None
    );
    let f = verify_anchored(std::slice::from_ref(&path), &[vk], &anchors)
        .unwrap()
        .finding
        .unwrap();
    assert_eq!(f.problem, Problem::Truncated, "{f}");
    assert_eq!((f.record, f.byte), (6 * 4 + 1, offs[6]));

    // 3. The whole log rewritten and sealed anew by the sink (a new log
    //    id): no anchor is of it.
    std::fs::write(&path, &forged).unwrap();
    std::fs::remove_file(seal_path(&path)).unwrap();
    std::fs::remove_file(&path).unwrap();
    let mut resealed = FileSink::with_options(
        &path,
        FileSinkOptions {
            seal: Some(SealOptions {
                key_file: key.clone(),
                sign_every: None,
                hasher: dplog_sinks::seal::HasherMode::Thread,
                hasher_cpu: None,
            }),
            ..Default::default()
        },
    )
    .unwrap();
    resealed.write_batch(&forged).unwrap();
    resealed.close().unwrap();
    assert_eq!(
        verify_files(std::slice::from_ref(&path), &[vk])
            .unwrap()
            .finding,
        None
    );
    let f = verify_anchored(std::slice::from_ref(&path), &[vk], &anchors)
        .unwrap()
        .finding
        .unwrap();
    assert_eq!(f.problem, Problem::AnchorMismatch, "{f}");
    assert_eq!((f.record, f.byte), (1, 0));
    assert!(f.detail.contains("sealed anew"), "{f}");
}

/// A user's records whose values hold an anchor's text — malformed, a
/// genuine anchor copied across two RFC 5424 SD-PARAM values (which keep
/// their spaces raw), the anchor's whole header and text — reach the
/// same receiver as the genuine anchor, and a JSON record has `head` and
/// `sig` keys. None of them is read as an anchor line, good or bad:
/// only the line the seal sink sent is, in the raw and the traditional
/// receiver file alike, and `dplog-verify` prints no note.
#[test]
fn a_record_holding_an_anchors_text_is_no_anchor_line() {
    let Some(rs) = Rsyslog::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = (dir.path().join("seal.key"), dir.path().join("seal.pub"));
    let vk = seal::generate_key_pair(&key, &public).unwrap();
    let path = dir.path().join("logins.log");
    run(&path, &key, rs.port, 0, 3);
    let raw = rs.wait_lines("anchors.log", 1);
    let genuine = raw.lines().next().unwrap();
    let text = &genuine[genuine.find("dplog-seal head ").unwrap()..];
    // The anchor's text, split before `key=`: each part ends with a
    // space, so a tokenizer of the whole line finds every field.
    let split = text.find(" key=").unwrap() + 1;
    let records = [
        fw_drop("dplog-seal head log=00 file=1 writes=2 end=3", "", "x"),
        fw_drop(&text[..split], &format!(" {} ", &text[split..]), ""),
        fw_drop(
            "dplog-seal - head - dplog-seal head log=0 file=0 writes=0",
            "end=0",
            "y",
        ),
    ];
    let to_rsyslog = SyslogSink::new(SyslogSinkOptions::new(SyslogTransport::Tcp(
        ([127, 0, 0, 1], rs.port).into(),
    )))
    .unwrap();
    log_fw_drops(Format::Rfc5424, to_rsyslog, &records);
    let raw = rs.wait_lines("anchors.log", 4);
    let trad = rs.wait_lines("anchors.trad.log", 4);
    // The records arrived with the anchor's text in their values.
    assert_eq!(raw.matches("dplog-seal head ").count(), 4, "{raw}");
    assert!(
        raw.contains(&format!("reason=\"{}\"", &text[..split])),
        "{raw}"
    );

    let (anchors, bad) = read_anchors(&rs.out(), &[vk]).unwrap();
    assert_eq!((anchors.len(), bad), (1, 0), "{anchors:?}\n{raw}");
    let trad_path = rs.d.dir().join("anchors.trad.log");
    let (trad_anchors, bad) = read_anchors(&trad_path, &[vk]).unwrap();
    assert_eq!((trad_anchors.len(), bad), (1, 0), "{trad}");
    assert_eq!(trad_anchors[0].head, anchors[0].head);

    // The same records in JSON, beside the anchor as a seal head's JSON.
    let json = dir.path().join("drops.jsonl");
    log_fw_drops(
        Format::Json,
        dplog_sinks::FileSink::open(&json).unwrap(),
        &records,
    );
    let (anchors_json, bad) = read_anchors(&json, &[vk]).unwrap();
    assert_eq!((anchors_json.len(), bad), (0, 0));

    let out = Command::new(env!("CARGO_BIN_EXE_dplog-verify"))
        .args(["--key", public.to_str().unwrap(), "--anchors"])
        .arg(rs.out())
        .arg("--anchors")
        .arg(&json)
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("note:"), "{err}");
}

/// `n` lines of a user's record (a VPN gateway's logins) for batch `b`.
fn lines(b: usize, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| format!("login user=u{b}-{i} port={} result=ok\n", 1000 + i))
        .collect::<String>()
        .into_bytes()
}

fn seal_inline(key: &Path) -> SealOptions {
    SealOptions {
        sign_every: None,
        hasher: HasherMode::Inline,
        ..SealOptions::new(key)
    }
}

/// A sealed set (an mmap sink's or an archive's segments in `dir`) as
/// its runs left it, with the anchors the receiver got and the files'
/// bytes and seals, to put back after each attack.
struct AnchoredSet {
    dir: PathBuf,
    public: PathBuf,
    vk: ed25519_dalek::VerifyingKey,
    anchors_file: PathBuf,
    files: Vec<PathBuf>,
    anchors: Vec<dplog_sinks::verify::Anchored>,
    originals: Vec<(Vec<u8>, Vec<u8>)>,
}

impl AnchoredSet {
    /// Checks the set in `dir`: it verifies whole with `heads(files)`
    /// signatures, the receiver got as many anchors, all of them match
    /// and `dplog-verify --anchors` exits 0.
    fn check(
        rs: &Rsyslog,
        dir: &Path,
        public: &Path,
        vk: ed25519_dalek::VerifyingKey,
        heads: impl Fn(usize) -> usize,
    ) -> AnchoredSet {
        let files = verify::set_of(dir).unwrap();
        assert!(files.len() >= 4, "{files:?}");
        let clean = verify_files(&files, &[vk]).unwrap();
        assert_eq!(clean.finding, None, "{:?}", clean.notes);
        let n = heads(files.len());
        assert_eq!(clean.signatures as usize, n);
        rs.wait_anchors(n);
        let (anchors, bad) = read_anchors(&rs.out(), &[vk]).unwrap();
        assert_eq!((anchors.len(), bad), (n, 0));
        assert_eq!(
            verify_anchored(&files, &[vk], &anchors).unwrap().finding,
            None
        );
        let originals = files
            .iter()
            .map(|f| {
                (
                    std::fs::read(f).unwrap(),
                    std::fs::read(seal_path(f)).unwrap(),
                )
            })
            .collect();
        let set = AnchoredSet {
            dir: dir.to_path_buf(),
            public: public.to_path_buf(),
            vk,
            anchors_file: rs.out(),
            files,
            anchors,
            originals,
        };
        assert_eq!(set.cli().0, 0);
        set
    }

    /// `dplog-verify --key PUBLIC --anchors RECEIVER DIR`: its exit code
    /// and stderr.
    fn cli(&self) -> (i32, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_dplog-verify"))
            .arg("--key")
            .arg(&self.public)
            .arg("--anchors")
            .arg(&self.anchors_file)
            .arg(&self.dir)
            .output()
            .unwrap();
        (
            out.status.code().unwrap(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// File `k` with byte `at` flipped, every seal of the set rewritten
    /// with `sk` (and `sk`'s key trusted too): the seal alone verifies;
    /// what the anchors find.
    fn forged(&self, k: usize, at: usize, sk: &ed25519_dalek::SigningKey) -> verify::Finding {
        let mut forged = self.originals[k].0.clone();
        forged[at] ^= 0x20;
        std::fs::write(&self.files[k], &forged).unwrap();
        reseal::reseal(&self.files, sk);
        let trusted = [self.vk, sk.verifying_key()];
        assert_eq!(verify_files(&self.files, &trusted).unwrap().finding, None);
        let f = verify_anchored(&self.files, &trusted, &self.anchors)
            .unwrap()
            .finding
            .unwrap();
        assert_eq!(f.problem, Problem::AnchorMismatch, "{f}");
        f
    }

    /// Puts every file and seal back as the runs left them.
    fn restore(&self) {
        for (f, (data, s)) in self.files.iter().zip(&self.originals) {
            std::fs::write(f, data).unwrap();
            std::fs::write(seal_path(f), s).unwrap();
        }
    }

    /// The newest segment removed with its seal: the rest verifies
    /// alone, and the anchors name the file missing after it.
    fn last_removed_is_missing(&self) {
        let last = self.files.last().unwrap();
        std::fs::remove_file(last).unwrap();
        std::fs::remove_file(seal_path(last)).unwrap();
        let rest = &self.files[..self.files.len() - 1];
        assert_eq!(verify_files(rest, &[self.vk]).unwrap().finding, None);
        let f = verify_anchored(rest, &[self.vk], &self.anchors)
            .unwrap()
            .finding
            .unwrap();
        assert_eq!(
            (f.problem, &f.file),
            (Problem::MissingFile, &rest[rest.len() - 1]),
            "{f}"
        );
        let (code, err) = self.cli();
        assert_eq!(code, 3, "{err}");
        assert!(err.contains("missing file"), "{err}");
    }
}

/// The committed data length in an mmap segment's header.
fn committed(segment: &Path) -> u64 {
    let b = std::fs::read(segment).unwrap();
    u64::from_le_bytes(b[24..32].try_into().unwrap())
}

/// One run of a sealed mmap sink anchored at `port`: `batches` batches
/// of 64 lines from batch `from` on, then close.
fn run_mmap(dir: &Path, key: &Path, port: u16, from: usize, batches: usize) {
    let mut sink = MmapSink::open(
        dir,
        MmapSinkOptions {
            segment_bytes: 64 * 1024,
            msync_interval_ms: None,
            prefix: "vpn".into(),
            seal: Some(seal_inline(key)),
            ..Default::default()
        },
    )
    .unwrap();
    let anchor = SyslogSink::new(SyslogSinkOptions::new(SyslogTransport::Tcp(
        ([127, 0, 0, 1], port).into(),
    )))
    .unwrap();
    sink.set_seal_anchor(Box::new(anchor)).unwrap();
    for b in from..from + batches {
        sink.write_batch(&lines(b, 64)).unwrap();
    }
    let counters = sink.counters();
    sink.close().unwrap();
    assert_eq!(counters.anchor_failed.load(Ordering::Relaxed), 0);
}

#[test]
fn anchored_mmap_segments_catch_a_re_signed_rewrite_across_segments_and_a_restart() {
    let Some(rs) = Rsyslog::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = (dir.path().join("seal.key"), dir.path().join("seal.pub"));
    let vk = seal::generate_key_pair(&key, &public).unwrap();
    let segs = dir.path().join("segments");
    std::fs::create_dir(&segs).unwrap();
    // Run 1 fills a segment and goes on into a second; run 2 resumes
    // that one (a sealer of its own seal file) and goes on.
    run_mmap(&segs, &key, rs.port, 0, 30);
    let run1 = verify::set_of(&segs).unwrap();
    assert_eq!(run1.len(), 2, "{run1:?}");
    let end1 = mmap::HEADER_BYTES as u64 + committed(&run1[1]);
    run_mmap(&segs, &key, rs.port, 30, 60);
    // A head at each move to the next segment and at each close.
    let set = AnchoredSet::check(&rs, &segs, &public, vk, |files| files + 1);
    assert_eq!(set.files[1], run1[1]);
    let sk = seal::load_signing_key(&key).unwrap();

    // 1. A line run 2 wrote into the resumed segment rewritten and every
    //    seal of the set re-signed with the stolen key: fine without the
    //    anchors, found with them after run 1's close, the last anchored
    //    head of that segment that still holds.
    let f = set.forged(1, end1 as usize + 12, &sk);
    let before = set.originals[1].0[mmap::HEADER_BYTES..end1 as usize]
        .iter()
        .filter(|&&c| c == b'\n')
        .count() as u64;
    assert_eq!(
        (&f.file, f.record, f.byte),
        (&set.files[1], before + 1, end1),
        "{f}"
    );
    let (code, err) = set.cli();
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains(&format!("at record {} (byte {end1})", before + 1)),
        "{err}"
    );
    set.restore();

    // 2. A line of the first segment rewritten and the whole set
    //    re-sealed with a fresh key the verifier also trusts (as after a
    //    key rotation): found at the first segment's start.
    let fresh = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    let f = set.forged(0, mmap::HEADER_BYTES + 100, &fresh);
    assert_eq!(
        (&f.file, f.record, f.byte),
        (&set.files[0], 1, mmap::HEADER_BYTES as u64),
        "{f}"
    );
    set.restore();

    // 3. The last segment removed with its seal: the anchors name it.
    set.last_removed_is_missing();
}

/// One run of a sealed archive anchored at `port`: `n` drop records from
/// record `from` on in batches of 10 (small blocks and segments: several
/// of each), then close.
fn run_archive(dir: &Path, key: &Path, port: u16, from: u64, n: u64) {
    let mut sink = ArchiveSink::open(
        dir,
        ArchiveSinkOptions {
            index: vec![],
            summary: vec![],
            block_rows: 8,
            segment_bytes: 4096,
            seal: Some(seal_inline(key)),
            ..Default::default()
        },
    )
    .unwrap();
    let anchor = SyslogSink::new(SyslogSinkOptions::new(SyslogTransport::Tcp(
        ([127, 0, 0, 1], port).into(),
    )))
    .unwrap();
    sink.set_seal_anchor(Box::new(anchor)).unwrap();
    let mut enc = BinaryEncoder::new(&[FwDrop::schema()]);
    for i in (from..from + n).step_by(10) {
        let mut batch = Vec::new();
        for j in i..i + 10 {
            let mut r = fw_drop(&format!("rule {j}: port scan"), "", "");
            r.time_ns += j * 1_000_000;
            assert!(enc.push(dplog_core::RecordBytes::record_bytes(&r), &mut batch));
        }
        sink.write_batch(&batch).unwrap();
    }
    let counters = sink.counters();
    sink.close().unwrap();
    assert_eq!(counters.anchor_failed.load(Ordering::Relaxed), 0);
}

#[test]
fn an_anchored_archive_catches_a_re_signed_rewrite_and_a_removed_segment() {
    let Some(rs) = Rsyslog::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = (dir.path().join("seal.key"), dir.path().join("seal.pub"));
    let vk = seal::generate_key_pair(&key, &public).unwrap();
    let arch = dir.path().join("archive");
    std::fs::create_dir(&arch).unwrap();
    run_archive(&arch, &key, rs.port, 0, 600);
    run_archive(&arch, &key, rs.port, 600, 600);
    // One head per segment, at its seal.
    let set = AnchoredSet::check(&rs, &arch, &public, vk, |files| files);

    // 1. A block of the third segment changed (a byte of its compressed
    //    rows) and every seal re-signed with the stolen key: fine without
    //    the anchors, found with them at that segment's start.
    let f = set.forged(
        2,
        set.originals[2].0.len() / 2,
        &seal::load_signing_key(&key).unwrap(),
    );
    assert_eq!((&f.file, f.record, f.byte), (&set.files[2], 1, 0), "{f}");
    let (code, err) = set.cli();
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("differs from the anchored head"), "{err}");
    set.restore();

    // 2. The newest segment removed with its seal: the anchors name it.
    set.last_removed_is_missing();
}
