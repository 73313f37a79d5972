//! Test support shared by the workspace's tests (a dev-dependency only):
//! the real IPFIX collectors the formatter and exporter tests check their
//! output with, started on loopback and read back.
//!
//! - [`nfcapd`]: nfdump's collector `nfcapd` (Debian package `nfdump`,
//!   installed by `scripts/setup.sh`) on 127.0.0.1, its data file read
//!   back with `nfdump`.
//! - [`clickhouse`]: Debian's `clickhouse-server` (18.16) on 127.0.0.1
//!   with a temporary configuration and data directory, queried with
//!   `clickhouse-client`; killed on drop.
//! - [`tshark`]: IPFIX datagrams written to a pcap as UDP on loopback and
//!   decoded by Wireshark's `tshark` (Debian package `tshark`).
//! - [`rsyslog`]: rsyslogd on 127.0.0.1 with a test's own configuration.
//! - [`tmpfs`]: a small tmpfs mounted for full-disk tests (root only).
//! - Ports for servers a test starts ([`free_tcp_port`], [`free_udp_port`]),
//!   below the ephemeral range, and readiness read from the kernel's
//!   socket tables ([`tcp_listening`], [`udp_rx_queue`]) rather than from a
//!   connect that might reach another socket or the client itself.
//!
//! `fixtures/tsc_archive.rs` (the archive tests' stream under three TSC
//! calibrations) and `fixtures/reseal.rs` (a sealed log's seals rewritten
//! as an attacker with a key would) are not part of this library: the
//! tests of `dplog-sinks`, `dplog-cat`, `dplog-query` and `dplog-verify`
//! include them by path, since they need crates whose own tests depend on
//! this one.
//!
//! Everything here panics with a message naming the missing tool or the
//! step that failed: it serves tests only.

pub mod clickhouse;
pub mod nfcapd;
pub mod rsyslog;
pub mod tmpfs;
pub mod tshark;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Bytes waiting in the receive queue of the UDP socket bound to
/// 127.0.0.1:`port`, from `/proc/net/udp`; `None` while no socket is bound
/// there.
pub fn udp_rx_queue(port: u16) -> Option<u64> {
    let table = std::fs::read_to_string("/proc/net/udp").ok()?;
    let local = format!("0100007F:{port:04X}");
    table.lines().skip(1).find_map(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        if cols.get(1) == Some(&local.as_str()) {
            let rx = cols.get(4)?.split(':').nth(1)?;
            u64::from_str_radix(rx, 16).ok()
        } else {
            None
        }
    })
}

/// Polls `ok` every 20 ms until it holds; panics naming `what` after
/// `limit`.
pub fn wait_until(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(t0.elapsed() < limit, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// True while a TCP socket listens on 127.0.0.1:`port` (a `LISTEN`
/// entry, state `0A`, in `/proc/net/tcp`). Unlike a successful
/// `connect`, this cannot be fooled by a client socket that happened to
/// get `port` as its own ephemeral port and connected to itself.
pub fn tcp_listening(port: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let local = format!("0100007F:{port:04X}");
    table.lines().skip(1).any(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        cols.get(1) == Some(&local.as_str()) && cols.get(3) == Some(&"0A")
    })
}

/// Who listens on TCP port `port` of 127.0.0.1: `None` if nobody,
/// `Some(true)` if a socket of process `pid` (one of its descriptors),
/// `Some(false)` if another process's. A server that could not bind a
/// port a concurrent test process took meanwhile keeps running without
/// its listener; a test that only checked that the port listens would
/// then talk to the other process's server.
pub fn tcp_listener_is(port: u16, pid: u32) -> Option<bool> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let local = format!("0100007F:{port:04X}");
    let inodes: Vec<String> = table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            (cols.get(1) == Some(&local.as_str()) && cols.get(3) == Some(&"0A"))
                .then(|| cols.get(9).map(|i| format!("socket:[{i}]")))
                .flatten()
        })
        .collect();
    if inodes.is_empty() {
        return None;
    }
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    let ours = fds.filter_map(Result::ok).any(|fd| {
        std::fs::read_link(fd.path())
            .is_ok_and(|t| inodes.iter().any(|i| t.as_os_str() == i.as_str()))
    });
    Some(ours)
}

/// A TCP port of 127.0.0.1 for a server a test starts: below Linux's
/// ephemeral range (32768 and up), so no client socket of this or another
/// test takes it before the server binds it, distinct per call within
/// this process (pid and a counter), and not listened on right now.
///
/// # Panics
/// No such port among 50 tried.
pub fn free_tcp_port() -> u16 {
    free_port("TCP", |port| {
        !tcp_listening(port) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
    })
}

/// A UDP port of 127.0.0.1 for a receiver a test starts (a collector, a
/// syslog daemon), chosen like [`free_tcp_port`]: below the ephemeral
/// range, so no client socket is given it, and not bound right now.
/// Ready once [`udp_rx_queue`] sees it bound.
///
/// # Panics
/// No such port among 50 tried.
pub fn free_udp_port() -> u16 {
    free_port("UDP", |port| {
        udp_rx_queue(port).is_none() && std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok()
    })
}

/// The first of up to 50 candidate ports ([`candidate_port`]) that `free`
/// accepts.
fn free_port(proto: &str, mut free: impl FnMut(u16) -> bool) -> u16 {
    for _ in 0..50 {
        let port = candidate_port();
        if free(port) {
            return port;
        }
    }
    panic!("no free {proto} port of 127.0.0.1 in {TEST_PORTS:?}");
}

/// The ports servers started by tests are given: below Linux's ephemeral
/// range (32768 and up), so no client socket takes one in between.
const TEST_PORTS: std::ops::Range<u16> = 20_000..32_000;

/// The next port of [`TEST_PORTS`] to try for a server, from the pid and
/// one counter for every caller in this process ([`free_tcp_port`],
/// [`free_udp_port`], [`nfcapd::Nfcapd::start`]), so two of them never
/// hand out the same port and processes start far apart.
fn candidate_port() -> u16 {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    // Relaxed: only uniqueness of the counter values matters.
    let k = NEXT.fetch_add(1, Ordering::Relaxed);
    let span = usize::from(TEST_PORTS.end - TEST_PORTS.start);
    TEST_PORTS.start + ((std::process::id() as usize * 64 + k) % span) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_is_told_apart_from_another_process_s() {
        let port = free_tcp_port();
        assert_eq!(tcp_listener_is(port, std::process::id()), None);
        let l = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
        assert_eq!(tcp_listener_is(port, std::process::id()), Some(true));
        // pid 1 (init) holds none of this process's sockets.
        assert_eq!(tcp_listener_is(port, 1), Some(false));
        drop(l);
        assert_eq!(tcp_listener_is(port, std::process::id()), None);
    }
}
