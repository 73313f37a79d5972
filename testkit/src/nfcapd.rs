//! nfdump's collector `nfcapd` on 127.0.0.1, one per test, with its own
//! data directory; its records read back with `nfdump`.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{candidate_port, udp_rx_queue, wait_until, TEST_PORTS};

/// A running `nfcapd` on 127.0.0.1; killed on drop if still running.
#[derive(Debug)]
pub struct Nfcapd {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
    /// Flow records nfcapd has decoded so far (counted from its `-E`
    /// print on stdout).
    decoded: Arc<AtomicUsize>,
}

impl Nfcapd {
    /// Starts nfcapd on a free port of 20000..32000 with `extra` arguments
    /// (e.g. `["-B", "4194304"]` for a larger socket buffer) and returns
    /// once it has bound the port. A port in use makes nfcapd exit, and the
    /// next one is tried.
    ///
    /// # Panics
    /// nfcapd or stdbuf missing, or no port bound after 50 tries.
    pub fn start(extra: &[&str]) -> Nfcapd {
        for _ in 0..50 {
            // Shared with free_tcp_port and free_udp_port: never a port one
            // of them handed out in this process.
            let port = candidate_port();
            if udp_rx_queue(port).is_some() {
                continue;
            }
            if let Some(c) = Nfcapd::try_start(port, extra) {
                return c;
            }
        }
        panic!("no free UDP port for nfcapd in {TEST_PORTS:?}");
    }

    /// Starts nfcapd on 127.0.0.1:`port` (one from
    /// [`free_udp_port`](crate::free_udp_port), for a collector that must
    /// come up after its exporter started sending there) and returns once
    /// it has bound the port; None if the port was taken meanwhile.
    ///
    /// # Panics
    /// As [`start`](Self::start).
    pub fn start_on(port: u16, extra: &[&str]) -> Option<Nfcapd> {
        Nfcapd::try_start(port, extra)
    }

    fn try_start(port: u16, extra: &[&str]) -> Option<Nfcapd> {
        let dir = tempfile::tempdir().expect("a temporary directory for nfcapd");
        // -E: also print every decoded record on stdout, so the test knows
        // when nfcapd has processed everything it was sent. stdbuf
        // (coreutils): line-buffered stdout, else stdio holds the print in
        // its pipe buffer until exit.
        let mut child = Command::new("stdbuf")
            .args(["-oL", "nfcapd", "-E"])
            .args(extra)
            .args(["-b", "127.0.0.1", "-p"])
            .arg(port.to_string())
            .args(["-t", "3600", "-w"])
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("stdbuf (coreutils) not found");
        let decoded = Arc::new(AtomicUsize::new(0));
        let stdout = child.stdout.take().expect("nfcapd's stdout is piped");
        let d = decoded.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.starts_with("Flow Record") {
                    // Relaxed: a counter polled by `finish`; the records
                    // themselves are read back from the file after exit.
                    d.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        let mut c = Nfcapd {
            child,
            port,
            dir,
            decoded,
        };
        let t0 = Instant::now();
        loop {
            if let Some(status) = c.child.try_wait().expect("nfcapd's status") {
                // 127 from stdbuf: nfcapd is not installed.
                assert_ne!(
                    status.code(),
                    Some(127),
                    "nfcapd not found: run scripts/setup.sh (Debian package nfdump)"
                );
                return None;
            }
            if udp_rx_queue(port).is_some() {
                // Bound; still alive a moment later means the bind was its own.
                std::thread::sleep(Duration::from_millis(30));
                if c.child.try_wait().expect("nfcapd's status").is_none() {
                    return Some(c);
                }
                return None;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "nfcapd did not bind 127.0.0.1:{port}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The collector's address, 127.0.0.1:port.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Flow records nfcapd has decoded so far.
    pub fn decoded(&self) -> usize {
        // Relaxed: a counter; see `try_start`.
        self.decoded.load(Ordering::Relaxed)
    }

    /// Sends each of `datagrams` (whole IPFIX messages) as one UDP
    /// datagram, waiting after each until nfcapd's socket holds less than
    /// 64 KiB, so that none is lost to a full socket buffer. Returns how
    /// many were sent.
    pub fn send<D: AsRef<[u8]>>(&self, datagrams: &[D]) -> usize {
        let sock = UdpSocket::bind("127.0.0.1:0").expect("a UDP socket on loopback");
        for m in datagrams {
            sock.send_to(m.as_ref(), self.addr())
                .expect("send to nfcapd on loopback");
            wait_until("nfcapd reads its socket", Duration::from_secs(10), || {
                udp_rx_queue(self.port).map_or(true, |q| q < 64 * 1024)
            });
        }
        datagrams.len()
    }

    /// Waits (up to 20 s) until nfcapd has decoded `records` flow records,
    /// stops it with SIGTERM (which flushes and renames its data file) and
    /// returns the file, with the directory that holds it.
    ///
    /// # Panics
    /// Fewer records decoded in time, nfcapd failing, or no data file.
    pub fn finish(mut self, records: usize) -> (PathBuf, tempfile::TempDir) {
        let t0 = Instant::now();
        while self.decoded() < records {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "nfcapd decoded {} of {records}",
                self.decoded()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let st = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill(1)");
        assert!(st.success());
        let status = self.child.wait().expect("nfcapd's exit");
        assert!(status.success(), "nfcapd exit: {status}");
        let file = std::fs::read_dir(self.dir.path())
            .expect("nfcapd's data directory")
            .map(|e| e.expect("a directory entry").path())
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("nfcapd.2"))
            })
            .expect("nfcapd wrote a data file");
        let dir = std::mem::replace(
            &mut self.dir,
            tempfile::tempdir().expect("a temporary directory"),
        );
        (file, dir)
    }
}

impl Drop for Nfcapd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `nfdump -r file args...`: its stdout.
///
/// # Panics
/// nfdump missing or failing (its stderr in the message).
pub fn nfdump(file: &Path, args: &[&str]) -> String {
    let out = Command::new("nfdump")
        .arg("-r")
        .arg(file)
        .args(args)
        .output()
        .expect("nfdump not found: run scripts/setup.sh (Debian package nfdump)");
    assert!(
        out.status.success(),
        "nfdump: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("nfdump prints UTF-8")
}

/// Every flow record of `file`, as `nfdump -o json` prints it.
pub fn flows(file: &Path) -> Vec<Value> {
    let text = nfdump(file, &["-o", "json"]);
    serde_json::from_str::<Vec<Value>>(&text)
        .unwrap_or_else(|e| panic!("nfdump -o json: {e}\n{text}"))
}

/// A counter of `nfdump -I` (the file's statistics), e.g. `"Sequence
/// failures"`.
pub fn stat_field(file: &Path, name: &str) -> u64 {
    let stat = nfdump(file, &["-I"]);
    stat.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|rest| rest.trim_start_matches([' ', ':']).trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name:?} in nfdump -I:\n{stat}"))
}

/// The value of `key` of an nfdump JSON record as text (nfdump prints some
/// numbers as strings).
pub fn text(v: &Value, key: &str) -> String {
    match &v[key] {
        Value::String(s) => s.clone(),
        Value::Null => panic!("no {key:?} in {v}"),
        other => other.to_string(),
    }
}
