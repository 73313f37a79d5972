//! ClickHouse (Debian's `clickhouse-server` 18.16, installed by
//! `scripts/setup.sh`) on 127.0.0.1, one per test, with its own
//! temporary configuration and data directory on free ports; queried with
//! `clickhouse-client`. Killed on drop.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{free_tcp_port, tcp_listening};

/// The password of the user `writer` every server has (the user
/// `default` has none).
pub const WRITER_PASSWORD: &str = "w-s3cret";

/// A running `clickhouse-server` on 127.0.0.1 (HTTP and native ports),
/// its data in a temporary directory; killed on drop.
#[derive(Debug)]
pub struct ClickHouse {
    child: Option<Child>,
    dir: tempfile::TempDir,
    http_port: u16,
    tcp_port: u16,
}

impl ClickHouse {
    /// Starts a server on free ports and returns once it answers.
    ///
    /// # Panics
    /// `clickhouse-server` missing, or not answering within 60 s.
    pub fn start() -> ClickHouse {
        Self::start_with("")
    }

    /// [`start`](Self::start) with `extra` XML inside the configuration's
    /// root element (e.g. `<remote_servers>` for a Distributed table).
    pub fn start_with(extra: &str) -> ClickHouse {
        let mut c = Self::unstarted();
        c.write_config(extra);
        c.spawn();
        c
    }

    /// `n` servers, each one shard of the cluster `shards` (one replica
    /// per shard, in `remote_servers` of every server's configuration),
    /// for a `Distributed(shards, default, table, key)` table.
    pub fn start_shards(n: usize) -> Vec<ClickHouse> {
        let mut v: Vec<ClickHouse> = (0..n).map(|_| Self::unstarted()).collect();
        let shards: String = v
            .iter()
            .map(|c| {
                format!(
                    "<shard><replica><host>127.0.0.1</host><port>{}</port></replica></shard>",
                    c.tcp_port
                )
            })
            .collect();
        let extra = format!("<remote_servers><shards>{shards}</shards></remote_servers>");
        for c in &mut v {
            c.write_config(&extra);
            c.spawn();
        }
        v
    }

    fn unstarted() -> ClickHouse {
        let dir = tempfile::Builder::new()
            .prefix("dplog-clickhouse-")
            .tempdir()
            .expect("a temporary directory for clickhouse-server");
        ClickHouse {
            child: None,
            http_port: free_tcp_port(),
            tcp_port: free_tcp_port(),
            dir,
        }
    }

    fn write_config(&self, extra: &str) {
        let d = self.dir.path().display();
        // Logs bounded (1 MB, one old file); the caches small: the
        // machine's memory is shared.
        let cfg = format!(
            r#"<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>{d}/log/server.log</log><errorlog>{d}/log/err.log</errorlog><size>1M</size><count>1</count></logger>
  <http_port>{http}</http_port>
  <tcp_port>{tcp}</tcp_port>
  <listen_host>127.0.0.1</listen_host>
  <path>{d}/data/</path>
  <tmp_path>{d}/tmp/</tmp_path>
  <user_files_path>{d}/user_files/</user_files_path>
  <format_schema_path>{d}/format_schemas/</format_schema_path>
  <mark_cache_size>67108864</mark_cache_size>
  <uncompressed_cache_size>67108864</uncompressed_cache_size>
  <timezone>UTC</timezone>
  <users>
    <default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default>
    <writer><password>{pw}</password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></writer>
  </users>
  <profiles><default></default></profiles>
  <quotas><default></default></quotas>
  {extra}
</yandex>
"#,
            http = self.http_port,
            tcp = self.tcp_port,
            pw = WRITER_PASSWORD,
        );
        std::fs::create_dir_all(self.dir.path().join("log")).expect("log directory");
        std::fs::write(self.config(), cfg).expect("write clickhouse config");
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("config.xml")
    }

    fn spawn(&mut self) {
        let child = Command::new("clickhouse-server")
            .arg(format!("--config-file={}", self.config().display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("clickhouse-server not found: run scripts/setup.sh (Debian clickhouse-server)");
        self.child = Some(child);
        let t0 = Instant::now();
        loop {
            if let Some(st) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                let log = std::fs::read_to_string(self.dir.path().join("log/err.log"))
                    .unwrap_or_default();
                panic!("clickhouse-server exited ({st}): {}", tail(&log));
            }
            if tcp_listening(self.http_port)
                && tcp_listening(self.tcp_port)
                && self.try_query("SELECT 1").is_some_and(|s| s.trim() == "1")
            {
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "clickhouse-server did not answer on 127.0.0.1:{} within 60 s",
                self.http_port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The HTTP interface, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    /// The native protocol's port (for `clickhouse-client` and
    /// `remote_servers`).
    pub fn tcp_port(&self) -> u16 {
        self.tcp_port
    }

    /// The server process's id while it runs (for a test that kills it
    /// from another thread; [`restart`](Self::restart) then starts it
    /// again).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The server's directory (configuration, data, logs).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Kills the server (SIGKILL: no flush, as a crash) and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        crate::wait_until(
            "the killed clickhouse-server's ports are closed",
            Duration::from_secs(30),
            || !tcp_listening(self.http_port) && !tcp_listening(self.tcp_port),
        );
    }

    /// Starts the server again on the same ports and data (after
    /// [`kill`](Self::kill)).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    fn try_query(&self, sql: &str) -> Option<String> {
        let out = Command::new("clickhouse-client")
            .args(["--host", "127.0.0.1", "--port"])
            .arg(self.tcp_port.to_string())
            .arg("--query")
            .arg(sql)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Runs `sql` with `clickhouse-client` and returns its output
    /// (TabSeparated unless the query says otherwise).
    ///
    /// # Panics
    /// The query fails (with clickhouse-client's message).
    pub fn query(&self, sql: &str) -> String {
        self.client(sql, None)
    }

    /// Runs `sql` with `clickhouse-client`, `stdin` its input (an
    /// `INSERT ... FORMAT` body); returns its output.
    ///
    /// # Panics
    /// The query fails (with clickhouse-client's message).
    pub fn client(&self, sql: &str, stdin: Option<&[u8]>) -> String {
        let mut child = Command::new("clickhouse-client")
            .args(["--host", "127.0.0.1", "--port"])
            .arg(self.tcp_port.to_string())
            .arg("--query")
            .arg(sql)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("clickhouse-client not found: run scripts/setup.sh");
        if let Some(b) = stdin {
            let mut i = child.stdin.take().expect("piped stdin");
            i.write_all(b).expect("write to clickhouse-client");
        }
        let out = child.wait_with_output().expect("clickhouse-client's exit");
        assert!(
            out.status.success(),
            "clickhouse-client --query {sql:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// The last 2 KB of `s`.
fn tail(s: &str) -> &str {
    let mut i = s.len().saturating_sub(2048);
    while !s.is_char_boundary(i) {
        i += 1;
    }
    &s[i..]
}

impl Drop for ClickHouse {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
