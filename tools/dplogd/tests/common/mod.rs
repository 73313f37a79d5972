//! Helpers of the dplogd tests: real `dplogd` and `dplogd-produce`
//! processes on a temporary directory.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const DPLOGD: &str = env!("CARGO_BIN_EXE_dplogd");
pub const PRODUCE: &str = env!("CARGO_BIN_EXE_dplogd-produce");

/// A temporary set-up: `rings/`, a config, the checkpoint and outputs.
pub struct Setup {
    pub dir: tempfile::TempDir,
    /// Processes started, killed at drop if still running (a failed
    /// assertion must not leave them behind).
    pids: std::cell::RefCell<Vec<u32>>,
}

impl Drop for Setup {
    fn drop(&mut self) {
        for &pid in self.pids.borrow().iter() {
            // SAFETY: waitpid/kill on our own children: WNOHANG returns 0
            // only for a child still running (never reaped, so the pid is
            // still ours).
            unsafe {
                if libc::waitpid(pid as i32, core::ptr::null_mut(), libc::WNOHANG) == 0 {
                    libc::kill(pid as i32, libc::SIGKILL);
                    libc::waitpid(pid as i32, core::ptr::null_mut(), 0);
                }
            }
        }
    }
}

impl Setup {
    pub fn new(sinks: &str) -> Self {
        Self::with_config(&format!(
            "[format]\ntype = \"json\"\n[ring]\nburst = 64\n{sinks}"
        ))
    }

    /// A set-up whose `dplogd.toml` is `cfg` (`@` stands for the
    /// temporary directory).
    pub fn with_config(cfg: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("rings")).unwrap();
        let cfg = cfg.replace("@", dir.path().to_str().unwrap());
        std::fs::write(dir.path().join("dplogd.toml"), cfg).unwrap();
        Self {
            dir,
            pids: Default::default(),
        }
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    pub fn rings(&self) -> PathBuf {
        self.path("rings")
    }

    /// Starts dplogd; its stderr goes to `dplogd.err` (appended).
    pub fn daemon(&self) -> Child {
        self.daemon_with(&[])
    }

    /// [`daemon`](Self::daemon) with `extra` flags.
    pub fn daemon_with(&self, extra: &[&str]) -> Child {
        self.daemon_wrapped(&[], extra)
    }

    /// Kills `c` at drop if still running, as the processes it starts.
    pub fn track(&self, c: Child) -> Child {
        self.pids.borrow_mut().push(c.id());
        c
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.path("dplogd.err")).unwrap_or_default()
    }

    /// Starts a producer with `extra` flags.
    pub fn producer(&self, name: &str, tag: u32, extra: &[&str]) -> Child {
        Command::new(PRODUCE)
            .arg("--dir")
            .arg(self.rings())
            .arg("--name")
            .arg(name)
            .arg("--tag")
            .arg(tag.to_string())
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .inspect(|c| self.pids.borrow_mut().push(c.id()))
            .unwrap()
    }
}

pub fn kill9(c: &mut Child) {
    // SAFETY: kill(2) on a child we started and have not reaped.
    unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
    let _ = c.wait();
}

/// SIGTERM, then waits; returns the exit code.
pub fn term(c: &mut Child) -> i32 {
    wait_catches_term(c);
    // SAFETY: kill(2) on a child we started and have not reaped.
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    let st = c.wait().unwrap();
    st.code().unwrap_or(-1)
}

/// Waits (at most 60 s) until `c` has its SIGTERM handler installed
/// (bit 15 of `SigCgt` in /proc/PID/status) or has exited: a SIGTERM
/// sent before then would kill it by the default action, however
/// briefly after its start.
fn wait_catches_term(c: &mut Child) {
    let bit = 1u64 << (libc::SIGTERM - 1);
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if c.try_wait().unwrap().is_some() {
            return;
        }
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", c.id())).unwrap_or_default();
        let caught = status
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0);
        if caught & bit != 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!(
        "process {} did not install a SIGTERM handler in 60 s",
        c.id()
    );
}

/// What an output holds: per tag the sequence numbers in order, and the
/// dplogd lines (`producer_exited` & co) by ring file.
#[derive(Debug, Default)]
pub struct Output {
    pub seqs: BTreeMap<u64, Vec<u64>>,
    pub ends: Vec<serde_json::Value>,
    /// In-band drop reports (`dplogEvent`).
    pub drops: Vec<serde_json::Value>,
}

pub fn parse(text: &str) -> Output {
    let mut o = Output::default();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line:?}"));
        if v.get("dplogd").is_some() {
            o.ends.push(v);
            continue;
        }
        if v.get("dplogEvent").is_some() {
            o.drops.push(v);
            continue;
        }
        let tag = v["responderOctets"].as_u64().unwrap();
        let seq = v["initiatorOctets"].as_u64().unwrap();
        o.seqs.entry(tag).or_default().push(seq);
    }
    o
}

/// The files in a ring directory but the daemon's lock (`.dplogd.lock`):
/// rings, consumer files, temporaries.
pub fn ring_dir_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name() != ".dplogd.lock")
        .map(|e| e.path())
        .collect()
}

pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// The whole lines of the output file at `p` (empty if it does not exist
/// yet). dplogd may be writing it: a last line without its newline is
/// cut off (the tests count records, so a line lost at the end still
/// shows).
pub fn read_lines(p: &Path) -> String {
    let mut b = std::fs::read(p).unwrap_or_default();
    b.truncate(b.iter().rposition(|&c| c == b'\n').map_or(0, |i| i + 1));
    String::from_utf8(b).unwrap_or_else(|e| panic!("{}: not UTF-8: {e}", p.display()))
}

/// Waits until `f` holds, polling every 10 ms; panics with `what` after
/// `secs` seconds.
pub fn wait_for(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(
            t.elapsed() < Duration::from_secs(secs),
            "timed out after {secs} s waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The end line of the ring of `tag`'s producer (matched by name prefix).
pub fn end_of<'a>(o: &'a Output, name: &str) -> Option<&'a serde_json::Value> {
    o.ends.iter().find(|v| {
        v["ring"]
            .as_str()
            .is_some_and(|r| r.starts_with(&format!("{name}.")))
    })
}

/// Asserts `seqs` is exactly `0..n`, in order.
pub fn assert_exactly(seqs: &[u64], n: u64, what: &str) {
    assert_eq!(
        seqs.len() as u64,
        n,
        "{what}: {} records, expected {n}",
        seqs.len()
    );
    for (i, s) in seqs.iter().enumerate() {
        assert_eq!(*s, i as u64, "{what}: record {i} has sequence {s}");
    }
}

/// `strace` on `PATH`, if installed.
pub fn strace_bin() -> Option<PathBuf> {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.join("strace"))
        .find(|p| p.is_file())
}

impl Setup {
    /// [`daemon_with`](Self::daemon_with) started through `wrapper` (a
    /// program and its arguments, e.g. `strace -o trace`), which runs
    /// dplogd as its child; an empty `wrapper` starts dplogd itself.
    pub fn daemon_wrapped(&self, wrapper: &[&str], extra: &[&str]) -> Child {
        let err = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path("dplogd.err"))
            .unwrap();
        let mut cmd = match wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(DPLOGD);
                c
            }
            None => Command::new(DPLOGD),
        };
        cmd.arg("--config")
            .arg(self.path("dplogd.toml"))
            .arg("--rings")
            .arg(self.rings())
            .arg("--checkpoint")
            .arg(self.path("dplogd.checkpoint"))
            .arg("--scan-ms")
            .arg("20")
            .args(extra)
            .stderr(err)
            .spawn()
            .inspect(|c| self.pids.borrow_mut().push(c.id()))
            .unwrap()
    }
}

/// How many times each of the sequence numbers `0..n` occurs in `seqs`;
/// panics naming the first few that never occur (a record lost).
pub fn arrivals(seqs: &[u64], n: u64) -> Vec<u32> {
    let mut seen = vec![0u32; n as usize];
    for &q in seqs {
        seen[q as usize] += 1;
    }
    let missing: Vec<usize> = (0..n as usize).filter(|&i| seen[i] == 0).collect();
    assert!(
        missing.is_empty(),
        "{} records never arrived: {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    seen
}

/// dplogd as uid and gid 65534 with no other group (`setpriv`, run by
/// root), on `config`, `rings` and `checkpoint`; the caller adds flags,
/// stdio and spawns it.
pub fn dplogd_as_nobody(config: &Path, rings: &Path, checkpoint: &Path) -> Command {
    let mut c = Command::new("setpriv");
    c.args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .arg(DPLOGD)
        .arg("--config")
        .arg(config)
        .arg("--rings")
        .arg(rings)
        .arg("--checkpoint")
        .arg(checkpoint);
    c
}

/// A NAT44 session record whose producer tag is `tag` and sequence
/// number `seq` (`ingress_vrf_id` and `initiator_octets`, as
/// `dplogd-produce` writes them).
pub fn tagged_record(tag: u32, seq: u64) -> dplog_schema_nat::NatRecord {
    dplog_schema_nat::NatRecord::from(dplog_schema_nat::Nat44SessionRecord {
        nat_event: 5,
        ingress_vrf_id: tag,
        initiator_octets: seq,
        responder_octets: u64::from(tag),
        ..dplog_schema_nat::Nat44SessionRecord::default()
    })
}

/// For [`dplogd_as_nobody`] in `dir`: `logs/` (owned by uid and gid
/// 65534, for its checkpoint and output) and `dplogd.toml` (mode 0644:
/// JSON to a file sink `logs/out.log`); returns both paths.
pub fn nobody_config(dir: &Path) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let logs = dir.join("logs");
    std::fs::create_dir(&logs).unwrap();
    std::os::unix::fs::chown(&logs, Some(65534), Some(65534)).unwrap();
    let cfg = dir.join("dplogd.toml");
    std::fs::write(
        &cfg,
        format!(
            "[format]\ntype = \"json\"\n[sink]\ntype = \"file\"\npath = \"{}/out.log\"\n",
            logs.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&cfg, PermissionsExt::from_mode(0o644)).unwrap();
    (cfg, logs)
}
