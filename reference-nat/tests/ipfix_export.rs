//! dplog-nat exporting IPFIX: `[format] type = "ipfix"` with `[sink] type =
//! "ipfix"` sends every record to the collector (a UDP socket of the test),
//! and a format the exporter cannot carry is refused at load.

use std::net::UdpSocket;
use std::process::Command;
use std::time::Duration;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dplog-nat"))
}

/// Data records (options records excluded) in `msgs`, checking that each
/// message's sequence number counts the data records before it.
fn data_records(msgs: &[Vec<u8>]) -> u64 {
    let be16 = |b: &[u8], o: usize| u16::from_be_bytes([b[o], b[o + 1]]);
    let mut lens = std::collections::HashMap::new();
    let (mut n, mut all) = (0u64, 0u32);
    for m in msgs {
        assert_eq!(be16(m, 0), 10);
        assert_eq!(u32::from_be_bytes(m[8..12].try_into().unwrap()), all);
        let mut o = 16;
        while o < m.len() {
            let (id, end) = (be16(m, o), o + be16(m, o + 2) as usize);
            let mut r = o + 4;
            if id == 2 || id == 3 {
                while end - r >= 4 {
                    let (tid, k) = (be16(m, r), be16(m, r + 2));
                    r += if id == 3 { 6 } else { 4 };
                    let mut l = 0usize;
                    for _ in 0..k {
                        l += be16(m, r + 2) as usize;
                        r += if be16(m, r) & 0x8000 != 0 { 8 } else { 4 };
                    }
                    lens.insert(tid, (l, id == 3));
                }
            } else {
                let (l, opt) = lens[&id];
                let k = (end - r) / l;
                all += k as u32;
                if !opt {
                    n += k as u64;
                }
            }
            o = end;
        }
    }
    n
}

#[test]
fn dplog_nat_exports_ipfix_to_a_collector() {
    let dir = tempfile::tempdir().unwrap();
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    std::fs::write(
        dir.path().join("ipfix.toml"),
        format!(
            "[format]\ntype = \"ipfix\"\n[sink]\ntype = \"ipfix\"\naddress = \"{}\"\n[synthetic]\npackets = 3000\n",
            rx.local_addr().unwrap()
        ),
    )
    .unwrap();
    // The collector reads while dplog-nat runs (its socket buffer may not
    // hold the whole run), until dplog-nat has exited and the socket is
    // empty (loopback delivers a datagram before its send returns), however
    // long a loaded machine takes to start it.
    let exited = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = std::thread::spawn({
        let exited = exited.clone();
        move || {
            let mut got = Vec::new();
            let mut buf = vec![0u8; 65_536];
            loop {
                // Acquire pairs with the Release store after dplog-nat's exit:
                // read before the recv, so a timeout after it means empty.
                let done = exited.load(std::sync::atomic::Ordering::Acquire);
                match rx.recv(&mut buf) {
                    Ok(n) => got.push(buf[..n].to_vec()),
                    Err(_) if done => break,
                    Err(_) => {}
                }
            }
            got
        }
    });
    let o = bin()
        .args(["--config", "ipfix.toml", "--summary", "json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    // Release pairs with the reader's Acquire load.
    exited.store(true, std::sync::atomic::Ordering::Release);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let written = s["records"]["written"].as_u64().unwrap();
    assert!(written > 0, "{s}");
    assert_eq!(s["records"]["produced"].as_u64().unwrap(), written, "{s}");
    let got = reader.join().unwrap();
    assert!(got.iter().all(|d| d.len() <= 1400));
    assert_eq!(data_records(&got), written);
}

#[test]
fn dplog_nat_refuses_a_line_format_into_the_ipfix_exporter() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bad.toml"),
        "[format]\ntype = \"json\"\n[sink]\ntype = \"ipfix\"\naddress = \"127.0.0.1:4739\"\n",
    )
    .unwrap();
    let o = bin()
        .args(["--config", "bad.toml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("line 4, column 1"), "{err}");
    assert!(
        err.contains("takes [format] type = \"ipfix\" only"),
        "{err}"
    );
}

/// `--format` changes the format after the config's sinks were checked
/// against its own: the same rules apply, and nothing is written.
#[test]
fn dplog_nat_refuses_a_command_line_format_its_sinks_cannot_carry() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[&str], &str); 3] = [
        (
            "[format]\ntype = \"ipfix\"\n[sink]\ntype = \"ipfix\"\naddress = \"127.0.0.1:4739\"\n",
            &["--format", "json"],
            "takes [format] type = \"ipfix\" only",
        ),
        (
            "[sink]\ntype = \"syslog\"\naddress = \"127.0.0.1:5514\"\n",
            &["--format", "binary"],
            "the syslog sink sends one message per line",
        ),
        (
            "[sink]\ntype = \"file\"\npath = \"out.log\"\nmax_size_bytes = 1048576\n",
            &["--format", "ipfix"],
            "rotates or reopens on SIGHUP",
        ),
    ];
    for (i, (toml, args, want)) in cases.iter().enumerate() {
        let cfg = format!("c{i}.toml");
        std::fs::write(dir.path().join(&cfg), toml).unwrap();
        let o = bin()
            .args(["--config", &cfg, "--packets", "1000"])
            .args(*args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "case {i}: {err}");
        assert!(
            err.contains(&format!("--format {}", &args[1])),
            "case {i}: {err}"
        );
        assert!(err.contains(want), "case {i}: {err}");
        assert!(!dir.path().join("out.log").exists(), "case {i}");
    }
}

/// `--output` replaces the config's sinks, and says so when they were
/// not one file: an IPFIX exporter's config with `-o` writes the IPFIX
/// stream into the file, and stderr names the sink it replaced.
#[test]
fn output_on_the_command_line_says_which_sinks_it_replaces() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("x.toml"),
        "[format]\ntype = \"ipfix\"\n[sink]\ntype = \"ipfix\"\naddress = \"127.0.0.1:9\"\n",
    )
    .unwrap();
    let o = bin()
        .args(["--config", "x.toml", "--packets", "2000", "-o", "out.ipfix"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("--output out.ipfix replaces the config's sinks (ipfix"),
        "{err}"
    );
    let bytes = std::fs::read(dir.path().join("out.ipfix")).unwrap();
    assert_eq!(&bytes[..2], &[0, 10], "an IPFIX message first");
}
