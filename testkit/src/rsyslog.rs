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
        // Listening, not merely connectable: a connect before rsyslogd
        // binds could reach another socket, or the client itself.
        crate::wait_until("rsyslogd listens", Duration::from_secs(30), || {
            if let Some(st) = child.try_wait().unwrap() {
                panic!("rsyslogd exited ({st})");
            }
            crate::tcp_listening(port)
        });
        Rsyslogd { dir, child, port }
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
