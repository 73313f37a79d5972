//! rsyslogd (Debian package `rsyslog`, installed by `scripts/setup.sh`)
//! started by a test on a free TCP port of 127.0.0.1, with the test's own
//! configuration, in a temporary directory; stopped when dropped.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The daemon's path on Debian.
pub const RSYSLOGD: &str = "/usr/sbin/rsyslogd";

/// Whether rsyslogd is installed.
pub fn installed() -> bool {
    Path::new(RSYSLOGD).exists()
}

/// A running rsyslogd; SIGKILLed and reaped on drop.
#[derive(Debug)]
pub struct Rsyslogd {
    dir: tempfile::TempDir,
    child: Child,
    port: u16,
}

impl Rsyslogd {
    /// Starts rsyslogd with `conf` (rsyslog's configuration language, the
    /// lines after its `global(...)`, which sets the work directory and
    /// 64 KiB messages), in which `{dir}` is replaced by its temporary
    /// directory and `{port}` by a free TCP port of 127.0.0.1; `conf`
    /// must listen there (`imtcp`). Returns once the port listens.
    ///
    /// # Panics
    /// rsyslogd not installed, exiting, or not listening within 30 s.
    pub fn start_tcp(conf: &str) -> Rsyslogd {
        assert!(
            installed(),
            "{RSYSLOGD} not installed (run scripts/setup.sh)"
        );
        // A port another test process took between our check and
        // rsyslogd's bind leaves rsyslogd without a listener: start
        // again on another port.
        for _ in 0..5 {
            let dir = tempfile::tempdir().unwrap();
            let port = crate::free_tcp_port();
            let d = dir.path().display().to_string();
            let conf = format!(
                "global(workDirectory=\"{d}\" maxMessageSize=\"64k\")\n{}",
                conf.replace("{dir}", &d)
                    .replace("{port}", &port.to_string())
            );
            let conf_path = dir.path().join("rsyslog.conf");
            std::fs::write(&conf_path, conf).unwrap();
            let mut child = Command::new(RSYSLOGD)
                .arg("-n")
                .arg("-f")
                .arg(&conf_path)
                .arg("-i")
                .arg(dir.path().join("rsyslogd.pid"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn rsyslogd");
            // Listening, by this rsyslogd (it does not fork with -n): a
            // connect before it binds could reach another socket, or the
            // client itself, and a port another process holds would
            // reach that process.
            let t0 = std::time::Instant::now();
            let mut other_since: Option<std::time::Instant> = None;
            loop {
                if let Some(st) = child.try_wait().unwrap() {
                    panic!("rsyslogd exited ({st})");
                }
                match crate::tcp_listener_is(port, child.id()) {
                    Some(true) => return Rsyslogd { dir, child, port },
                    Some(false) => {
                        let since = *other_since.get_or_insert_with(std::time::Instant::now);
                        if since.elapsed() > Duration::from_secs(2) {
                            break;
                        }
                    }
                    None => other_since = None,
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(30),
                    "timed out waiting until rsyslogd listens on 127.0.0.1:{port}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            eprintln!("rsyslogd: port {port} taken by another process; trying another");
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("rsyslogd could not listen: 5 ports taken by other processes");
    }

    /// Its temporary directory (`{dir}` of the configuration).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Its TCP port on 127.0.0.1 (`{port}` of the configuration).
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for Rsyslogd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
