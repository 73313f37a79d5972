//! Every `dplog-query` answer against a brute-force scan of the JSON log
//! of the same run.
//!
//! Each run is a real dplog-nat run (its library, in this process) whose
//! `[[sink]]` set writes the binary stream to an archive and to a binary
//! file; the file turned into JSON lines by the JSON formatter (what
//! `dplog-cat --format json` prints) is the log the brute force scans.
//! The JSON timestamp has microseconds; each line's exact event time (ns)
//! is taken from the same record of the binary file, so probes at exactly
//! a record's time are exact for records stamped in nanoseconds too.
//!
//! The brute force implements the documented semantics independently of
//! the tool: for `--at T` with lookback L, over the lines with times in
//! `[T - L, T]` in file order, an open (natEvent 4, 16) at or before T is
//! live unless a close (5, 17) of the same session or block (same
//! 5-tuple, post-NAT address and port, VRF; or same inside address, pool
//! address, port range, VRF) before T follows it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use dplog_core::Schema;
use dplog_formatters::{Format, FormatSpec};
use serde_json::Value;

/// One line of the JSON log.
#[derive(Clone, Debug)]
struct Line {
    line: String,
    t: u64,
    ev: u64,
    addr: Option<String>,
    port: Option<u64>,
    range: Option<(u64, u64)>,
    ident: Option<String>,
}

struct Run {
    _dir: tempfile::TempDir,
    arch: PathBuf,
    lines: Vec<Line>,
    interval_ns: u64,
}

fn s(v: &Value, k: &str) -> String {
    match v.get(k) {
        Some(Value::String(x)) => x.clone(),
        Some(x) => x.to_string(),
        None => String::new(),
    }
}

/// Runs dplog-nat with `nat_toml` into an archive and a binary file;
/// returns the archive and the JSON log.
fn run_nat(nat_toml: &str, block_rows: usize, interval_ms: u64) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let arch = dir.path().join("arch");
    std::fs::create_dir(&arch).unwrap();
    let bin = dir.path().join("nat.bin");
    let toml = format!(
        "[format]\ntype = \"binary\"\n\
         [[sink]]\ntype = \"archive\"\ndir = \"{}\"\nblock_rows = {block_rows}\nsegment_interval_ms = {interval_ms}\n\
         [[sink]]\ntype = \"file\"\npath = \"{}\"\n{nat_toml}",
        arch.display(),
        bin.display()
    );
    let cfg = dplog_nat::app::AppConfig::from_toml_str(&toml).unwrap();
    let summary = dplog_nat::app::run(&cfg).unwrap();
    let r = &summary.records;
    assert!(r.produced > 0 && r.written == r.produced, "{r:?}");
    let bytes = std::fs::read(&bin).unwrap();
    let d = dplog_formatters::binary::decode(&bytes);
    assert!(d.stopped.is_none(), "{:?}", d.stopped);
    let mut schemas: Vec<&Schema> = Vec::new();
    for s in &d.schemas {
        if !schemas.iter().any(|k| k.id() == s.id()) {
            schemas.push(s);
        }
    }
    let spec = FormatSpec {
        kind: Format::Json,
        ..Default::default()
    };
    let mut enc = spec.encoder(&schemas).unwrap();
    let mut lines = Vec::new();
    for (si, rec) in &d.records {
        let mut out = Vec::new();
        assert!(enc.push(rec, &mut out));
        let line = String::from_utf8(out).unwrap().trim_end().to_string();
        let v: Value = serde_json::from_str(&line).unwrap();
        let sch = &d.schemas[*si];
        let t = sch.fields()[sch.meta().event_time.unwrap()].read_uint(rec);
        let ev = v["natEvent"].as_u64().unwrap_or(0);
        let range = v
            .get("portRangeStart")
            .map(|a| (a.as_u64().unwrap(), v["portRangeEnd"].as_u64().unwrap()));
        let ident = if range.is_some() {
            Some(format!(
                "B {} {} {} {} {} {} {}",
                s(&v, "sourceIPv4Address"),
                s(&v, "postNATSourceIPv4Address"),
                s(&v, "portRangeStart"),
                s(&v, "portRangeEnd"),
                s(&v, "portRangeStepSize"),
                s(&v, "portRangeNumPorts"),
                s(&v, "ingressVRFID")
            ))
        } else if v.get("sourceTransportPort").is_some() {
            Some(format!(
                "S {} {} {} {} {} {} {} {}",
                s(&v, "protocolIdentifier"),
                s(&v, "sourceIPv4Address"),
                s(&v, "sourceTransportPort"),
                s(&v, "postNATSourceIPv4Address"),
                s(&v, "postNAPTSourceTransportPort"),
                s(&v, "destinationIPv4Address"),
                s(&v, "destinationTransportPort"),
                s(&v, "ingressVRFID")
            ))
        } else {
            None
        };
        lines.push(Line {
            t,
            ev,
            addr: v
                .get("postNATSourceIPv4Address")
                .and_then(Value::as_str)
                .map(str::to_string),
            port: v.get("postNAPTSourceTransportPort").and_then(Value::as_u64),
            range,
            ident,
            line,
        });
    }
    Run {
        _dir: dir,
        arch,
        lines,
        interval_ns: interval_ms * 1_000_000,
    }
}

/// Whether `l` matches address `a` and (if given) port `p`.
fn matches(l: &Line, a: &str, p: Option<u64>) -> bool {
    if l.addr.as_deref() != Some(a) {
        return false;
    }
    match (p, l.port, l.range) {
        (None, _, _) => true,
        (Some(p), Some(q), _) => p == q,
        (Some(p), None, Some((lo, hi))) => (lo..=hi).contains(&p),
        _ => false,
    }
}

fn brute_at(lines: &[Line], t: u64, a: &str, p: Option<u64>, lookback: u64) -> Vec<String> {
    let from = t.saturating_sub(lookback);
    let mut open: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut live = vec![false; lines.len()];
    for (i, l) in lines.iter().enumerate() {
        if l.t < from || l.t > t || !matches(l, a, p) {
            continue;
        }
        let Some(id) = l.ident.as_deref() else {
            continue;
        };
        if (l.ev == 4 || l.ev == 16) && l.t <= t {
            live[i] = true;
            open.entry(id).or_default().push(i);
        } else if (l.ev == 5 || l.ev == 17) && l.t < t {
            if let Some(j) = open.get_mut(id).and_then(Vec::pop) {
                live[j] = false;
            }
        }
    }
    let mut v: Vec<String> = lines
        .iter()
        .zip(live)
        .filter(|(_, x)| *x)
        .map(|(l, _)| l.line.clone())
        .collect();
    v.sort();
    v
}

fn brute_between(lines: &[Line], t1: u64, t2: u64, a: &str, p: Option<u64>) -> Vec<String> {
    let mut v: Vec<String> = lines
        .iter()
        .filter(|l| (t1..=t2).contains(&l.t) && matches(l, a, p))
        .map(|l| l.line.clone())
        .collect();
    v.sort();
    v
}

/// Runs dplog-query; (exit status, sorted output lines, stderr).
fn query(arch: &Path, args: &[String]) -> (i32, Vec<String>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-query"))
        .arg("--archive")
        .arg(arch)
        .args(["--format", "json"])
        .args(args)
        .output()
        .unwrap();
    let mut lines: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    (
        out.status.code().unwrap_or(-1),
        lines,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Probes `run` with about 300 `--at` and 30 `--between` queries and
/// compares each with the brute force; returns (probes, answers found,
/// answers whose open lies in an earlier segment slice than T).
fn probe(run: &Run, seed: u64) -> (usize, usize, usize) {
    let lines = &run.lines;
    assert!(!lines.is_empty());
    let keyed: Vec<&Line> = lines.iter().filter(|l| l.addr.is_some()).collect();
    assert!(!keyed.is_empty());
    let tmin = lines.iter().map(|l| l.t).min().unwrap();
    let tmax = lines.iter().map(|l| l.t).max().unwrap();
    let day = 86_400_000_000_000u64;
    let mut rng = Rng(seed | 1);
    let (mut probes, mut found, mut spanning) = (0, 0, 0);
    let mut check_at = |t: u64, a: &str, p: Option<u64>, lookback: Option<u64>| {
        let mut args = vec!["--at".to_string(), format!("{t}ns")];
        args.push("--where".into());
        args.push(format!("postNATSourceIPv4Address={a}"));
        if let Some(p) = p {
            args.push("--where".into());
            args.push(format!("postNAPTSourceTransportPort={p}"));
        }
        if let Some(l) = lookback {
            args.push("--lookback".into());
            args.push(format!("{l}ns"));
        }
        let want = brute_at(lines, t, a, p, lookback.unwrap_or(day));
        let (code, got, err) = query(&run.arch, &args);
        assert_eq!(got, want, "dplog-query {}: {err}", args.join(" "));
        assert_eq!(code, if want.is_empty() { 1 } else { 0 }, "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?}: {err}");
        probes += 1;
        found += want.len();
        let slice = |x: u64| x / run.interval_ns;
        spanning += lines
            .iter()
            .filter(|l| want.binary_search(&l.line).is_ok() && slice(l.t) < slice(t))
            .count();
    };
    for i in 0..300u64 {
        let r = keyed[rng.below(keyed.len() as u64) as usize];
        let a = r.addr.clone().unwrap();
        let p = r
            .port
            .or(r.range.map(|(lo, hi)| lo + rng.below(hi - lo + 1)));
        let span = tmax - tmin + 1;
        match i % 10 {
            // Exactly at a record (a create, a delete, a block), just
            // before and just after it.
            0..=2 => check_at(r.t, &a, p, None),
            3 => check_at(r.t.saturating_sub(1), &a, p, None),
            4 => check_at(r.t + 1, &a, p, None),
            // Anywhere in the run.
            5 => check_at(tmin + rng.below(span), &a, p, None),
            // Misses: any pool address and port, an address outside the
            // pool, before the first record.
            6 => {
                let a = format!("198.51.100.{}", rng.below(16));
                check_at(
                    tmin + rng.below(span),
                    &a,
                    Some(1024 + rng.below(64512)),
                    None,
                )
            }
            7 => {
                if i % 20 == 7 {
                    check_at(tmin + rng.below(span), "203.0.113.7", p, None)
                } else {
                    check_at(tmin.saturating_sub(1 + rng.below(1_000_000)), &a, p, None)
                }
            }
            // The address alone.
            8 => check_at(tmin + rng.below(span), &a, None, None),
            // A short lookback.
            _ => check_at(
                r.t + rng.below(span / 4 + 1),
                &a,
                p,
                Some(1 + rng.below(span / 2 + 1)),
            ),
        }
    }
    for i in 0..30u64 {
        let r = keyed[rng.below(keyed.len() as u64) as usize];
        let a = r.addr.clone().unwrap();
        let p = if i % 3 == 0 {
            None
        } else {
            r.port.or(r.range.map(|x| x.0))
        };
        let t1 = r.t.saturating_sub(rng.below((tmax - tmin) / 4 + 1));
        let t2 = r.t + rng.below((tmax - tmin) / 4 + 1);
        let mut args = vec![
            "--between".to_string(),
            format!("{t1}ns"),
            format!("{t2}ns"),
            "--where".into(),
            format!("postNATSourceIPv4Address={a}"),
        ];
        if let Some(p) = p {
            args.push("--where".into());
            args.push(format!("postNAPTSourceTransportPort={p}"));
        }
        let want = brute_between(lines, t1, t2, &a, p);
        let (code, got, err) = query(&run.arch, &args);
        assert_eq!(got, want, "dplog-query {}: {err}", args.join(" "));
        assert_eq!(code, if want.is_empty() { 1 } else { 0 });
        assert!(!want.is_empty(), "the record itself is in its interval");
        probes += 1;
    }
    (probes, found, spanning)
}

fn segments(arch: &Path) -> usize {
    dplog_sinks::archive::list_segments(arch).unwrap().len()
}

const SYNTHETIC: &str = "[synthetic]\npackets = 30000\nrate_pps = 3000\nsubscribers = 200\n\
    [nat]\nudp_timeout_s = 2\ntcp_transitory_timeout_s = 1\ntcp_established_timeout_s = 3\nicmp_timeout_s = 1\n";

fn synthetic(allocation: &str, extra: &str) {
    let run = run_nat(
        &format!("{SYNTHETIC}port_allocation = \"{allocation}\"\n{extra}"),
        256,
        1000,
    );
    let segs = segments(&run.arch);
    assert!(segs >= 8, "{segs} segments");
    let deletes = run.lines.iter().filter(|l| l.ev == 5 || l.ev == 17).count();
    assert!(deletes > 0);
    let (probes, found, spanning) = probe(&run, 0x9e37_79b9 ^ allocation.len() as u64);
    assert!(probes >= 330);
    assert!(found > 100, "{found} answers");
    assert!(
        spanning > 0,
        "no answer's open lay in an earlier segment than T"
    );
}

#[test]
fn sequential_allocation() {
    synthetic("sequential", "");
}

#[test]
fn random_allocation() {
    synthetic("random", "");
}

#[test]
fn port_block_allocation() {
    synthetic(
        "pba",
        "port_block_size = 64\nlog_sessions_in_blocks = true\n",
    );
}

#[test]
fn deterministic_allocation() {
    // The mapping (natEvent 16, never deleted) is logged once: probes at
    // its time, just before it, and an hour after the traffic.
    let run = run_nat(
        &format!("{SYNTHETIC}port_allocation = \"deterministic\"\nlog_sessions_in_blocks = true\n"),
        256,
        1000,
    );
    let maps: Vec<&Line> = run.lines.iter().filter(|l| l.ev == 16).collect();
    assert!(maps.len() >= 200, "{} mapping records", maps.len());
    let (probes, found, _) = probe(&run, 77);
    assert!(probes >= 330 && found > 100);
    let mut rng = Rng(5);
    for _ in 0..40 {
        let m = maps[rng.below(maps.len() as u64) as usize];
        let (lo, hi) = m.range.unwrap();
        let p = lo + rng.below(hi - lo + 1);
        let a = m.addr.clone().unwrap();
        for t in [m.t, m.t - 1, m.t + 3_600_000_000_000] {
            let args = vec![
                "--at".to_string(),
                format!("{t}ns"),
                "--where".into(),
                format!("postNATSourceIPv4Address={a}"),
                "--where".into(),
                format!("postNAPTSourceTransportPort={p}"),
                "--lookback".into(),
                "all".into(),
            ];
            let want = brute_at(&run.lines, t, &a, Some(p), u64::MAX);
            let (code, got, err) = query(&run.arch, &args);
            assert_eq!(got, want, "{args:?}: {err}");
            assert_eq!(code, if t < m.t { 1 } else { 0 });
            if t >= m.t {
                assert!(got.contains(&m.line));
            }
        }
    }
}

fn capture(name: &str, min_records: usize) {
    let pcap = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/pcaps")
        .join(name);
    let run = run_nat(
        &format!("[input]\npcap = \"{}\"\n", pcap.display()),
        16,
        2000,
    );
    assert!(
        run.lines.len() >= min_records,
        "{} records",
        run.lines.len()
    );
    assert!(segments(&run.arch) >= 3);
    let (probes, found, _) = probe(&run, name.len() as u64 * 7919);
    assert!(probes >= 330 && found > 50, "{found}");
}

#[test]
fn capture_example() {
    capture("example.pcap", 100);
}

#[test]
fn capture_many_protocols() {
    capture("many-protocols.pcap", 200);
}

#[test]
fn capture_4k_http_requests() {
    capture("4KHttpRequests.pcap", 200);
}
