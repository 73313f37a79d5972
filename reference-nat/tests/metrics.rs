//! `dplog-nat --metrics-listen`: the Prometheus listener started from the
//! command line (or `[metrics]` in the config), scraped with a real HTTP
//! GET over 127.0.0.1 after the run, and its counters equal to the
//! summary's.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};

fn get(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}

/// The value of the sample `name` (exact metric name and labels), summed
/// over every line that starts with `prefix` when `prefix` ends in `{`.
fn sum(body: &str, prefix: &str) -> u64 {
    let mut found = false;
    let mut total = 0;
    for l in body.lines().filter(|l| !l.starts_with('#')) {
        let Some((name, v)) = l.rsplit_once(' ') else {
            continue;
        };
        let hit = if prefix.ends_with('{') {
            name.starts_with(prefix)
        } else {
            name == prefix
        };
        if hit {
            found = true;
            total += v.parse::<f64>().unwrap() as u64;
        }
    }
    assert!(found, "no {prefix} in\n{body}");
    total
}

#[test]
fn scrape_after_the_run_equals_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_dplog-nat"))
        .args(["--packets", "20000", "--summary", "json"])
        .args([
            "--metrics-listen",
            "127.0.0.1:0",
            "--metrics-linger-ms",
            "30000",
        ])
        .arg("--output")
        .arg(dir.path().join("nat.log"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let mut addr: Option<SocketAddr> = None;
    let mut during = None;
    loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "dplog-nat ended before serving the final metrics; stderr:\n{seen}"
        );
        seen.push_str(&line);
        if let Some(rest) = line.strip_prefix("dplog-nat: metrics at http://") {
            let a: SocketAddr = rest
                .trim_end()
                .trim_end_matches("/metrics")
                .parse()
                .unwrap();
            assert!(a.ip().is_loopback() && a.port() != 0, "{a}");
            addr = Some(a);
            // Scraped while the run may still be going: a valid exposition.
            during = Some(get(a, "/metrics"));
        }
        if line.contains("run finished; serving the final metrics") {
            break;
        }
    }
    let addr = addr.expect("address line before the linger line");
    let during = during.unwrap();
    assert!(during.contains(" 200 "), "{during}");
    let body = get(addr, "/metrics");
    assert!(
        body.starts_with("HTTP/1.1 200") || body.starts_with("HTTP/1.0 200"),
        "{body}"
    );
    assert!(body.ends_with("# EOF\n"), "{body}");
    assert!(get(addr, "/nope").contains(" 404 "));
    // End the linger early, as an operator's SIGINT would.
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}\n{seen}");
    let s: serde_json::Value = serde_json::from_str(&out).unwrap();
    let r = &s["records"];
    let field = |k: &str| {
        r[k].as_u64()
            .unwrap_or_else(|| panic!("records.{k} in {out}"))
    };
    assert!(field("produced") > 1000, "{out}");
    assert_eq!(sum(&body, "dplog_ring_produced_total{"), field("produced"));
    assert_eq!(sum(&body, "dplog_ring_enqueued_total{"), field("enqueued"));
    assert_eq!(sum(&body, "dplog_ring_dropped_total{"), field("dropped"));
    assert_eq!(sum(&body, "dplog_ring_dequeued_total{"), field("dequeued"));
    assert_eq!(sum(&body, "dplog_consumer_written_total"), field("written"));
    assert_eq!(
        sum(&body, "dplog_consumer_written_bytes_total"),
        field("written_bytes")
    );
    assert_eq!(
        sum(&body, "dplog_consumer_dropped_sink_total"),
        field("dropped_sink")
    );
    assert_eq!(
        sum(&body, "dplog_consumer_dropped_shutdown_total"),
        field("dropped_shutdown")
    );
    assert_eq!(
        sum(&body, "dplog_consumer_sink_errors_total"),
        field("sink_errors")
    );
    // The log file holds what the listener says was written.
    let log = std::fs::read(dir.path().join("nat.log")).unwrap();
    assert_eq!(log.len() as u64, field("written_bytes"));
    assert_eq!(
        log.iter().filter(|&&b| b == b'\n').count() as u64,
        field("written")
    );
}

#[test]
fn a_non_loopback_address_is_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-nat"))
        .args(["--packets", "10", "--metrics-listen", "192.0.2.1:9464"])
        .arg("--output")
        .arg(dir.path().join("nat.log"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("192.0.2.1:9464") && err.contains("allow_non_loopback"),
        "{err}"
    );
    assert!(!dir.path().join("nat.log").exists(), "nothing ran");
    // The same from the config file, which can also name the listener.
    let cfg = dir.path().join("nat.toml");
    std::fs::write(
        &cfg,
        "[metrics]\nprometheus_listen = \"[2001:db8::1]:9464\"\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-nat"))
        .args(["--packets", "10", "--config"])
        .arg(&cfg)
        .arg("--output")
        .arg(dir.path().join("nat.log"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("metrics.prometheus_listen"));
    // A loopback address in the config starts it.
    std::fs::write(&cfg, "[metrics]\nprometheus_listen = \"127.0.0.1:0\"\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-nat"))
        .args(["--packets", "10", "--summary", "none", "--config"])
        .arg(&cfg)
        .arg("--output")
        .arg(dir.path().join("nat.log"))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("dplog-nat: metrics at http://127.0.0.1:")
    );
}
