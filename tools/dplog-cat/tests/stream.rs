//! `dplog-cat` as a stream: a log larger than the child's address-space
//! limit, standard input, `--from`/`--to`/`--where` selection, TSC times
//! with the log's calibration, and drop reports with exact counts.

#[path = "../../../formatters/tests/common/mod.rs"]
mod common;

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};

use common::*;
use dplog_core::schema::{HasSchema, Schema};
use dplog_core::{
    schema, Accepted, Backpressure, Formatter, Logger, LoggerConfig, Record, RecordHeader, Sink,
    SinkError,
};
use dplog_formatters::{Format, FormatSpec, TscCalibration};
use dplog_schema_nat::NatFormatSpec as _;
use dplog_sinks::mmap::reader::preamble_len;

fn cat(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dplog-cat"));
    c.args(args);
    c
}

fn run(c: &mut Command) -> Output {
    c.output().unwrap()
}

fn binary_file() -> Vec<u8> {
    let mut f = FormatSpec {
        kind: Format::Binary,
        ..Default::default()
    }
    .nat_formatter()
    .unwrap();
    let mut out = Vec::new();
    for r in all_records() {
        f.format(&r, &mut out);
    }
    out
}

fn golden() -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../formatters/tests/golden/nat.jsonl"),
    )
    .unwrap()
}

#[test]
fn a_log_larger_than_the_memory_limit_streams_through() {
    // 32 MiB of address space for the child; a log of 48 MiB.
    const LIMIT: u64 = 32 << 20;
    let dir = tempfile::tempdir().unwrap();
    let one = binary_file();
    let pre = preamble_len(&one);
    let body = &one[pre..]; // the C frame and 7 R frames
    let reps = (48usize << 20) / body.len() + 1;
    let path = dir.path().join("big.bin");
    {
        use std::io::Write;
        let mut w = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        w.write_all(&one[..pre]).unwrap();
        for _ in 0..reps {
            w.write_all(body).unwrap();
        }
        w.flush().unwrap();
    }
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len > LIMIT + (16 << 20), "{len}");
    let mut c = cat(&["--format", "json"]);
    c.arg(&path).stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe; the closure touches nothing
    // else between fork and exec.
    unsafe {
        c.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: LIMIT,
                rlim_max: LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = c.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let (mut lines, mut bytes) = (0u64, 0u64);
    let mut tail = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = stdout.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        bytes += n as u64;
        tail.extend_from_slice(&buf[..n]);
        let keep = tail.len().saturating_sub(4096);
        tail.drain(..keep);
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let g = golden();
    assert_eq!(lines, 7 * reps as u64);
    assert_eq!(bytes, g.len() as u64 * reps as u64);
    assert!(tail.ends_with(g.as_bytes()));
}

#[test]
fn standard_input_and_selection_by_time_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nat.bin");
    std::fs::write(&path, binary_file()).unwrap();
    let g = golden();
    let lines: Vec<&str> = g.lines().collect();
    let json = |args: &[&str], stdin: bool| -> String {
        let mut c = cat(&[&["--format", "json"], args].concat());
        if stdin {
            c.arg("-")
                .stdin(Stdio::from(std::fs::File::open(&path).unwrap()));
        } else {
            c.arg(&path);
        }
        let o = run(&mut c);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    };
    // `-` is standard input; twice the same log: twice the records.
    assert_eq!(json(&[], true), g);
    let o = run(cat(&["--format", "json", "-"])
        .arg(&path)
        .stdin(Stdio::from(std::fs::File::open(&path).unwrap())));
    assert!(o.status.success());
    assert_eq!(String::from_utf8(o.stdout).unwrap(), g.repeat(2));

    // Event times: .123456, 61.623456, .124456, .125456, .126456,
    // .127456, .128456 s after 2026-01-01T00:00:00Z.
    let want =
        |idx: &[usize]| -> String { idx.iter().map(|&i| format!("{}\n", lines[i])).collect() };
    assert_eq!(
        json(
            &[
                "--from",
                "2026-01-01T00:00:00.125Z",
                "--to",
                "2026-01-01T00:00:00.128Z"
            ],
            false
        ),
        want(&[3, 4, 5])
    );
    // Inclusive from, exclusive to, to the nanosecond; ns integers too.
    assert_eq!(
        json(
            &[
                "--from",
                "2026-01-01T00:00:00.125456000Z",
                "--to",
                "1767225600126456000"
            ],
            true
        ),
        want(&[3])
    );
    assert_eq!(
        json(&["--from", "2026-01-01T00:01:00+00:00"], false),
        want(&[1])
    );
    assert_eq!(
        json(&["--to", "2026-01-01T00:00:00.124Z"], false),
        want(&[0])
    );
    // Fields as the text format prints them; every condition must hold.
    assert_eq!(
        json(&["--where", "sourceIPv4Address=10.0.0.7"], false),
        want(&[2, 3])
    );
    assert_eq!(
        json(
            &[
                "--where",
                "sourceIPv4Address=10.0.0.7",
                "--where",
                "natEvent=17"
            ],
            false
        ),
        want(&[3])
    );
    assert_eq!(json(&["--where", "natEvent=5"], false), want(&[1]));
    assert_eq!(
        json(
            &["--where", "observationTimeMilliseconds=1767225600127"],
            false
        ),
        want(&[5])
    );
    // A field no record type has: an error, not an empty answer.
    let o = run(cat(&["--where", "noSuchField=1"]).arg(&path));
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("no record type of this log has a field \"noSuchField\""));
    // Enum fields match their names as written: a name in another case
    // or misspelt is an error that lists the names.
    assert_eq!(
        json(&["--where", "natEvent=NAT44_SESSION_CREATE"], false),
        want(&[0])
    );
    let o = run(cat(&["--where", "natEvent=NAT44_create"]).arg(&path));
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim_end(),
        "dplog-cat: --where natEvent=NAT44_create: \"NAT44_create\" is not a value of natEvent \
         (give a number or one of the field's names, matched as written (case and all): \
         NAT_CREATE, NAT_DELETE, ADDRESSES_EXHAUSTED, NAT44_SESSION_CREATE, \
         NAT44_SESSION_DELETE, PORTS_EXHAUSTED, QUOTA_EXCEEDED, PORT_BLOCK_ALLOCATION, \
         PORT_BLOCK_DEALLOCATION)"
    );
    let o = run(cat(&["--where", "natEvent=nat44_session_delete"]).arg(&path));
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("(did you mean NAT44_SESSION_DELETE? give a number or one of"),
        "{err}"
    );
    // A time that is not one: a usage error naming it.
    let o = run(cat(&["--from", "yesterday"]).arg(&path));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("\"yesterday\" is not a time"));
}

/// A record with a TSC event time and a second TSC field.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Tick {
    header: RecordHeader,
    at: u64,
    seen: u64,
}

impl Record for Tick {
    const SCHEMA_ID: u16 = 910;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 8 = 24 bytes without padding, described by the
// schema built from its own offset_of! values.
unsafe impl HasSchema for Tick {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(Tick, id = 910, name = "tick", [
                at => "observationTimeMilliseconds": TscTimestamp, ie 323;
                seen => "flowEndMilliseconds": TscTimestamp, ie 153;
            ])
            .unwrap()
        })
    }
}

fn tick_bytes(t: &Tick) -> &[u8] {
    // SAFETY: repr(C) without padding: every byte is initialised.
    unsafe { std::slice::from_raw_parts((t as *const Tick).cast::<u8>(), 24) }
}

#[test]
fn tsc_times_print_as_wall_time_with_the_logs_calibration() {
    const T0: u64 = 1_767_225_600_000_000_000;
    let mut enc = FormatSpec {
        kind: Format::Binary,
        ..Default::default()
    }
    .encoder(&[Tick::schema()])
    .unwrap();
    let rec = |at: u64, seen: u64| Tick {
        header: RecordHeader::of::<Tick>(),
        at,
        seen,
    };
    let mut log = Vec::new();
    // 3 GHz, tick 1000 = T0; then a recalibration 1 s later that finds
    // the same rate and T0 + 1 s + 2 µs at tick 3e9 + 1000.
    enc.set_tsc_calibration(TscCalibration {
        hz: 3_000_000_000,
        tsc0: 1_000,
        ns0: T0,
    });
    assert!(enc.push(
        tick_bytes(&rec(1_000 + 1_500_000_000, 1_000 + 1_800_000_000)),
        &mut log
    ));
    enc.set_tsc_calibration(TscCalibration {
        hz: 3_000_000_000,
        tsc0: 3_000_001_000,
        ns0: T0 + 1_000_002_000,
    });
    assert!(enc.push(
        tick_bytes(&rec(3_000_001_000 + 300_000, 3_000_001_000 + 3_000_000)),
        &mut log
    ));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tick.bin");
    std::fs::write(&path, &log).unwrap();
    let want = "{\"timestamp\":\"2026-01-01T00:00:00.500000Z\",\"observationTimeMilliseconds\":1767225600500,\"flowEndMilliseconds\":1767225600600}\n\
                {\"timestamp\":\"2026-01-01T00:00:01.000102Z\",\"observationTimeMilliseconds\":1767225601000,\"flowEndMilliseconds\":1767225601001}\n";
    let o = run(cat(&["--format", "json"]).arg(&path));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8(o.stdout).unwrap(), want);
    // Through dplog-cat's own binary output (the calibrations pass on).
    let o = run(cat(&["--format", "binary"]).arg(&path));
    let again = dir.path().join("again.bin");
    std::fs::write(&again, &o.stdout).unwrap();
    let o = run(cat(&["--format", "json"]).arg(&again));
    assert_eq!(String::from_utf8(o.stdout).unwrap(), want);
    // Selection by the converted time.
    let o = run(cat(&["--format", "json", "--from", "2026-01-01T00:00:01Z"]).arg(&path));
    assert_eq!(
        String::from_utf8(o.stdout).unwrap(),
        want.lines().nth(1).unwrap().to_string() + "\n"
    );
}

/// Holds the consumer in its first write until the test opens the gate,
/// then appends every batch to a file.
struct Gated {
    file: std::fs::File,
    gate: Option<Receiver<()>>,
    entered: Sender<()>,
}

impl Sink for Gated {
    fn write_batch(&mut self, b: &[u8]) -> Result<Accepted, SinkError> {
        if let Some(g) = self.gate.take() {
            self.entered.send(()).unwrap();
            g.recv().unwrap();
        }
        std::io::Write::write_all(&mut self.file, b).unwrap();
        Ok(Accepted::Delivered)
    }
    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
    fn close(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
}

#[test]
fn drop_reports_in_a_binary_log_decode_with_exact_counts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drops.bin");
    let (open_tx, open_rx) = channel();
    let (entered_tx, entered_rx) = channel();
    let sink = Gated {
        file: std::fs::File::create(&path).unwrap(),
        gate: Some(open_rx),
        entered: entered_tx,
    };
    let fmt = FormatSpec {
        kind: Format::Binary,
        ..Default::default()
    }
    .nat_formatter()
    .unwrap();
    let cfg = LoggerConfig {
        ring_capacity: 64,
        backpressure: Backpressure::Drop,
        ..Default::default()
    };
    let logger = Logger::start(cfg, fmt, sink).unwrap();
    let mut p = logger.producer().unwrap();
    let recs = all_records();
    // A primer the consumer writes, then holds in the sink.
    assert!(p.log(recs[0]));
    entered_rx.recv().unwrap();
    let accepted = Arc::new(Mutex::new(0u64));
    for round in 0..3 {
        let mut ok = 0;
        for i in 0..500 {
            ok += u64::from(p.log(recs[(i + round) % recs.len()]));
        }
        *accepted.lock().unwrap() += ok;
        if round == 0 {
            open_tx.send(()).unwrap();
        }
        // Let the consumer drain before the next round overflows again.
        logger.flush().unwrap();
    }
    drop(p);
    let s = logger.shutdown().unwrap();
    let dropped = s.dropped();
    assert!(dropped > 0);
    assert_eq!(s.written_records, 1 + *accepted.lock().unwrap());
    assert_eq!(s.written_records + dropped, 1501);

    let o = run(cat(&["--format", "json"]).arg(&path));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    let (mut reports, mut reported, mut records) = (0u64, 0u64, 0u64);
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix(
            // drop_newest: every drop is a full ring's.
            "{\"dplogEvent\":\"recordsDropped\",\"reason\":\"full\",\"ring\":0,\"dropped\":",
        ) {
            reports += 1;
            reported += rest.split(',').next().unwrap().parse::<u64>().unwrap();
        } else {
            assert!(l.starts_with("{\"timestamp\":"), "{l}");
            records += 1;
        }
    }
    assert!(reports >= 1);
    assert_eq!(reported, dropped);
    assert_eq!(records, s.written_records);
    // Text prints them as lines; CSV as the library writes it: rows, or
    // none and a count on stderr.
    let o = run(cat(&[]).arg(&path));
    let text = String::from_utf8(o.stdout).unwrap();
    assert_eq!(
        text.lines().filter(|l| l.starts_with("dplog: ")).count() as u64,
        reports
    );
    let o = run(cat(&["--format", "csv"]).arg(&path));
    assert!(o.status.success());
    let err = String::from_utf8(o.stderr).unwrap();
    if err.is_empty() {
        // A CSV with rows for drop reports: one header, a row each.
        let csv = String::from_utf8(o.stdout).unwrap();
        assert_eq!(csv.lines().count() as u64, 1 + records + reports);
    } else {
        // A CSV without them: counted on stderr.
        assert_eq!(
            err,
            format!("dplog-cat: the log holds {reports} drop report(s) of {dropped} record(s) in all; csv output carries no drop reports\n")
        );
    }
}

#[test]
fn each_mmap_segment_decodes_alone_with_the_calibration_in_force_there() {
    use dplog_sinks::{MmapSink, MmapSinkOptions};
    const T0: u64 = 1_767_225_600_000_000_000;
    let dir = tempfile::tempdir().unwrap();
    let mut sink = MmapSink::open(
        dir.path(),
        MmapSinkOptions {
            segment_bytes: 64 * 1024,
            msync_interval_ms: None,
            prefix: "tick".into(),
            header: None,
            seal: None,
        },
    )
    .unwrap();
    let mut enc = FormatSpec {
        kind: Format::Binary,
        ..Default::default()
    }
    .encoder(&[Tick::schema()])
    .unwrap();
    // 20 batches of 500 records; each batch a new calibration whose wall
    // time at the same ticks is one more second: a record decoded with
    // another batch's calibration prints the wrong second.
    for b in 0..20u64 {
        enc.set_tsc_calibration(TscCalibration {
            hz: 1_000_000_000,
            tsc0: 0,
            ns0: T0 + b * 1_000_000_000,
        });
        let mut batch = Vec::new();
        for i in 0..500u64 {
            let t = Tick {
                header: RecordHeader::of::<Tick>(),
                at: i * 1_000_000,
                seen: i * 1_000_000,
            };
            assert!(enc.push(tick_bytes(&t), &mut batch));
        }
        sink.write_batch(&batch).unwrap();
    }
    sink.close().unwrap();
    let segs: Vec<_> = dplog_sinks::mmap::list_segments(dir.path(), "tick")
        .unwrap()
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    assert!(segs.len() >= 3, "{segs:?}");
    let whole = run(cat(&["--format", "json"]).args(&segs));
    assert!(
        whole.status.success(),
        "{}",
        String::from_utf8_lossy(&whole.stderr)
    );
    let whole = String::from_utf8(whole.stdout).unwrap();
    // Record i of batch b: T0 + b s + i ms.
    let mut want = String::new();
    for b in 0..20u64 {
        for i in 0..500u64 {
            let ms = T0 / 1_000_000 + b * 1000 + i;
            want.push_str(&format!(
                "{{\"timestamp\":\"2026-01-01T00:00:{:02}.{:03}000Z\",\"observationTimeMilliseconds\":{ms},\"flowEndMilliseconds\":{ms}}}\n",
                b,
                i
            ));
        }
    }
    assert_eq!(whole, want);
    let alone: String = segs
        .iter()
        .map(|s| {
            let o = run(cat(&["--format", "json"]).arg(s));
            assert!(o.status.success());
            String::from_utf8(o.stdout).unwrap()
        })
        .collect();
    assert_eq!(alone, want);
}

#[test]
fn progress_shows_on_a_terminal_only() {
    let dir = tempfile::tempdir().unwrap();
    let one = binary_file();
    let pre = preamble_len(&one);
    // 14,000 records; standard input (size unknown) shows progress.
    let mut log = one[..pre].to_vec();
    for _ in 0..2000 {
        log.extend_from_slice(&one[pre..]);
    }
    let path = dir.path().join("p.bin");
    std::fs::write(&path, &log).unwrap();
    let half = log.len() / 2;
    // The first half, a pause longer than the redraw period, the rest.
    let feed = format!(
        "{{ head -c {half} '{p}'; sleep 1; tail -c +{} '{p}'; }} | '{}' --format json - > /dev/null",
        half + 1,
        env!("CARGO_BIN_EXE_dplog-cat"),
        p = path.display()
    );
    // On a terminal (script(1) gives the command a pseudo-terminal).
    let o = run(Command::new("script").args(["-qfec", &feed, "/dev/null"]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tty = String::from_utf8_lossy(&o.stdout);
    assert!(tty.contains("\rdplog-cat: "), "{tty:?}");
    assert!(tty.contains(" records\x1b[K"), "{tty:?}");
    // Cleared at the end.
    assert!(tty.ends_with("\r\x1b[K"), "{tty:?}");
    // Not a terminal: nothing on stderr.
    let o = run(Command::new("sh").args(["-c", &feed]));
    assert!(o.status.success());
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
