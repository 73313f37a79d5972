//! The syslog sink: sends each formatted line (an RFC 5424 or RFC 3164
//! message from the formatters) to a syslog receiver over UDP (RFC 5426),
//! TCP with octet-counting framing (RFC 6587 section 3.4.1), a unix
//! socket (datagram, or stream with octet counting), or RELP (rsyslog's
//! Reliable Event Logging Protocol), reconnecting with backoff after the
//! receiver restarts.
//!
//! What "written" means per transport:
//! - Datagrams (UDP, unix datagram): handed to the kernel whole and not
//!   refused. A message longer than
//!   [`SyslogSinkOptions::max_datagram_bytes`] is never cut: it is
//!   refused, counted in [`SyslogCounters::too_large`], and its record is
//!   reported as failed (the runtime's `dropped_sink`), so the receiver
//!   never stores a cut message and `written` counts only whole messages
//!   sent. A unix datagram socket refuses a datagram on its own
//!   `send(2)` (e.g. the receiver's socket is gone); the batch is retried
//!   from it. Of a batch the runtime gives up on (`sink_retry_timeout_ms`,
//!   the shutdown deadline), the records whose datagrams were handed to
//!   the kernel and not refused count written, the rest dropped (see
//!   `kept_of_refused`).
//! - UDP: a datagram to a port nobody listens on is refused by an ICMP
//!   port unreachable, which the kernel reports on the (connected) socket
//!   afterwards: the next `send(2)` fails with ECONNREFUSED and does not
//!   send its own datagram, or `SO_ERROR` holds it (read once per batch,
//!   after its last datagram). The sink takes the refused datagram to be
//!   the last one sent on the socket: it does not count written
//!   ([`SyslogCounters::refused`]) and is sent again, first, after the
//!   reconnect; as it was not delivered, sending it again makes no
//!   duplicate. This is exact when the ICMP error arrives before the next
//!   `send(2)`: always on loopback, where the kernel handles it before
//!   `send(2)` returns and does not rate-limit it. From another host it
//!   may come later or never (ICMP errors are rate-limited per
//!   destination and host-wide, and firewalls drop them): then a refused
//!   datagram is lost unseen, and the one sent again may be a later one
//!   that was delivered and arrives twice (at most one per refusal, and
//!   only when the receiver came up within that round trip). A refusal
//!   reported by the first `send(2)` of a batch, whose datagram belongs to
//!   a batch already counted written, is counted in
//!   [`SyslogCounters::refused_late`]: lost, yet counted written. The
//!   receiver may also drop a datagram unseen (its socket buffer full).
//! - TCP: a message counts written when the receiver's TCP acknowledged
//!   every byte of its frame, not when `write(2)` took it: the sink keeps
//!   a ledger of the frames not yet acknowledged, and one
//!   `ioctl(SIOCOUTQ)` per `poll` (bytes sent and not yet acknowledged)
//!   turns the frames before that point into written records, so batches
//!   are `Pending` and their records are reported by `poll` (the stop's
//!   `drain` waits for the rest, reconnecting and resending as needed).
//!   After a lost connection the frames not acknowledged whole are resent
//!   on the next one ([`SyslogCounters::replayed_frames`]); still
//!   unacknowledged at the shutdown deadline, they count
//!   `dropped_shutdown`. Of a batch the runtime gives up on, the frames
//!   acknowledged count written and the others are dropped and never sent
//!   again (a connection carrying some is reset, so no cut frame starts
//!   the next connection). Plain TCP syslog has no application
//!   acknowledgement: messages the receiver's kernel acknowledged but the
//!   receiver had not yet processed when it died (SIGKILL, crash; its
//!   unread socket queue, its own queues) are lost yet counted written,
//!   and no sender can see that. Use RELP where that matters.
//! - Unix streams: as TCP, but a frame counts written once written to the
//!   socket (the bytes are then in the receiver's socket queue).
//! - RELP: a record counts written only when the receiver answered its
//!   `syslog` command with `rsp 200` (rsyslog's `imrelp` answers once the
//!   message is handed to its ruleset). The sink keeps a window of
//!   unacknowledged messages ([`SyslogSinkOptions::relp_window`]); after a
//!   lost connection it reconnects with backoff, opens a new session and
//!   resends every unacknowledged message, counted in
//!   [`SyslogCounters::relp_resent`]. A message the receiver had processed
//!   but whose answer was lost arrives twice (RELP is at-least-once): at
//!   most the window per broken connection. Records still unacknowledged
//!   at the shutdown deadline count as `dropped_shutdown`. While the
//!   window is full and the connection stays up, the batch is retried (a
//!   slow receiver is waited for, not reconnected to); of a batch the
//!   runtime gives up on, the records the receiver acknowledged count
//!   written and the rest dropped (see `kept_of_refused`).
//!
//! The `syslog` crate formats its own messages and frames TCP with a
//! trailing newline; dplog's formatters already produce the messages, and
//! RFC 6587 octet counting is needed for messages that may contain
//! newlines, so the transport and framing are written here.

#[cfg(feature = "config")]
pub mod config;
#[cfg(feature = "config")]
pub use config::{SyslogSignConfig, SyslogSinkConfig, SyslogTransportName};

mod dgram;
mod relp;
pub mod sign;
mod stream;

pub use sign::SyslogSignOptions;

use dgram::DgramResume;
use relp::{Relp, RelpMsg};
use stream::Stream;

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::ops::Range;

use crate::tcp::{set_linger_zero, unacked_bytes};

use crate::accounting::{bump, in_report, named, read};
use dplog_core::{Accepted, Kept, Progress, Sink, SinkError};

/// Where and how messages go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SyslogTransport {
    /// One UDP datagram per message (RFC 5426).
    Udp(SocketAddr),
    /// TCP, octet-counting framing `LEN SP MSG` (RFC 6587 3.4.1).
    Tcp(SocketAddr),
    /// One datagram per message to a unix datagram socket (`/dev/log`
    /// style).
    UnixDatagram(PathBuf),
    /// A unix stream socket, octet-counting framing.
    UnixStream(PathBuf),
    /// RELP over TCP (rsyslog `imrelp`): each message is a `syslog`
    /// command, written when the receiver acknowledges it.
    Relp(SocketAddr),
}

/// Syslog sink settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyslogSinkOptions {
    /// Transport and address.
    pub transport: SyslogTransport,
    /// Largest datagram payload (the whole syslog message, header
    /// included) for UDP and unix datagrams, in bytes; a longer message is
    /// refused whole (never cut), counted in [`SyslogCounters::too_large`]
    /// and its record dropped (`dropped_sink`). Default 2048 (RFC 5426
    /// section 3.2: receivers SHOULD accept 2048 octets).
    pub max_datagram_bytes: usize,
    /// First reconnect backoff, in milliseconds (doubles up to
    /// `reconnect_max_ms`). Default 10.
    pub reconnect_min_ms: u64,
    /// Longest reconnect backoff, in milliseconds. Default 2000.
    pub reconnect_max_ms: u64,
    /// Connect and write timeout for stream transports, and the write
    /// timeout of a unix datagram socket, in milliseconds; a receiver that
    /// stops reading for this long makes the batch retryable. For RELP also the wait for the `open` answer, and the
    /// longest wait for an acknowledgement while the window is full before
    /// the batch is retried. Default 1000.
    pub io_timeout_ms: u64,
    /// RELP: messages sent and not yet acknowledged, at most (1..=65536).
    /// Default 128.
    pub relp_window: usize,
    /// RFC 5848 Signature and Certificate Blocks sent with the records
    /// (see [`sign`]); None (default): nothing is signed.
    pub sign: Option<SyslogSignOptions>,
}

impl SyslogSinkOptions {
    /// Defaults for `transport`.
    pub fn new(transport: SyslogTransport) -> Self {
        Self {
            transport,
            max_datagram_bytes: 2048,
            reconnect_min_ms: 10,
            reconnect_max_ms: 2000,
            io_timeout_ms: 1000,
            relp_window: 128,
            sign: None,
        }
    }
}

/// Counters of one syslog sink (written by the consumer thread only;
/// Relaxed statistics, exact after the logger's shutdown joined it).
#[derive(Debug, Default)]
pub struct SyslogCounters {
    /// Messages handed to the kernel (datagrams sent, frames of batches
    /// written whole; for RELP, `syslog` commands sent; first sends only:
    /// a refused UDP datagram sent again counts once).
    pub messages: AtomicU64,
    /// Datagram messages refused whole because they exceed
    /// `max_datagram_bytes` (their records count as `dropped_sink`).
    pub too_large: AtomicU64,
    /// UDP datagrams the receiver's host refused (an ICMP error, such as
    /// port unreachable while no receiver listens) before their batch
    /// counted written: reported by the next `send(2)` (ECONNREFUSED) or
    /// by `SO_ERROR` after the batch's last datagram, taken back and sent
    /// again after the reconnect (each refusal counted once); with `sign`,
    /// also RFC 5848 block datagrams, kept and sent again the same way.
    pub refused: AtomicU64,
    /// UDP refusals reported by the first `send(2)` of a socket's batch,
    /// whose refused datagram is of a batch already counted written (its
    /// ICMP error came after that batch's `SO_ERROR` check: not on
    /// loopback): that datagram is lost, yet counted written.
    pub refused_late: AtomicU64,
    /// Successful connects after the first.
    pub reconnects: AtomicU64,
    /// Failed connect attempts.
    pub connect_failures: AtomicU64,
    /// Connections found broken (on write, or closed by the receiver).
    pub disconnects: AtomicU64,
    /// Stream frames sent (at least in part) on a connection that broke
    /// before the receiver's TCP acknowledged them whole (`SIOCOUTQ`),
    /// queued to be sent again on the next one.
    pub replayed_frames: AtomicU64,
    /// Bytes of those.
    pub replayed_bytes: AtomicU64,
    /// Stream frames the receiver took: over TCP acknowledged by its TCP
    /// (`SIOCOUTQ`), over a unix stream written to its socket. Their
    /// records are the ones counted written (with `sign`, the block
    /// frames are counted here too, as frames, never as records).
    pub acked_frames: AtomicU64,
    /// Stream frames framed and not yet acknowledged (sent, or waiting to
    /// be sent or resent), now: a gauge, not a count. After the logger's
    /// shutdown, the frames given up at the shutdown deadline.
    pub unacked_frames: AtomicU64,
    /// Stream frames of batches the runtime gave up on (retry timeout,
    /// shutdown deadline) removed unacknowledged (their records counted
    /// dropped, never written).
    pub abandoned_frames: AtomicU64,
    /// Stream connections reset (`SO_LINGER` 0) instead of closed because
    /// their send queue held bytes the receiver had not acknowledged: a
    /// broken connection whose frames are resent on the next, one carrying
    /// frames given up on, or one closed with frames still unacknowledged.
    pub resets: AtomicU64,
    /// RELP messages the receiver acknowledged (`rsp 200`; with `sign`,
    /// block messages included).
    pub relp_acked: AtomicU64,
    /// RELP messages sent again on a new session because the old one
    /// broke before their acknowledgement.
    pub relp_resent: AtomicU64,
    /// RELP messages the receiver answered with an error status (their
    /// records count as `dropped_sink`).
    pub relp_refused: AtomicU64,
    /// RELP sessions the receiver refused at `open`.
    pub relp_open_failures: AtomicU64,
    /// RFC 5848 (`sign`): messages hashed for a Signature Block.
    pub signed_messages: AtomicU64,
    /// RFC 5848: Signature Block messages handed to the transport (each
    /// copy counted).
    pub signature_blocks: AtomicU64,
    /// RFC 5848: Certificate Block messages handed to the transport.
    pub certificate_blocks: AtomicU64,
}

impl dplog_core::SinkCounters for SyslogCounters {
    fn named(&self) -> Vec<(String, u64)> {
        named(
            "syslog",
            &[
                ("messages", &self.messages),
                ("too_large", &self.too_large),
                ("refused", &self.refused),
                ("refused_late", &self.refused_late),
                ("reconnects", &self.reconnects),
                ("connect_failures", &self.connect_failures),
                ("disconnects", &self.disconnects),
                ("replayed_frames", &self.replayed_frames),
                ("replayed_bytes", &self.replayed_bytes),
                ("acked_frames", &self.acked_frames),
                ("unacked_frames", &self.unacked_frames),
                ("abandoned_frames", &self.abandoned_frames),
                ("resets", &self.resets),
                ("relp_acked", &self.relp_acked),
                ("relp_resent", &self.relp_resent),
                ("relp_refused", &self.relp_refused),
                ("relp_open_failures", &self.relp_open_failures),
                ("signed_messages", &self.signed_messages),
                ("signature_blocks", &self.signature_blocks),
                ("certificate_blocks", &self.certificate_blocks),
            ],
        )
    }
}

impl SyslogCounters {
    /// Reads one counter (Relaxed).
    pub fn get(c: &AtomicU64) -> u64 {
        read(c)
    }
}

enum Conn {
    Udp(UdpSocket),
    Tcp(TcpStream),
    UnixDgram(UnixDatagram),
    UnixStream(UnixStream),
    /// Non-blocking; the session is open.
    Relp(TcpStream),
}

impl Conn {
    fn fd(&self) -> i32 {
        match self {
            Conn::Udp(s) => s.as_raw_fd(),
            Conn::Tcp(s) => s.as_raw_fd(),
            Conn::UnixDgram(s) => s.as_raw_fd(),
            Conn::UnixStream(s) => s.as_raw_fd(),
            Conn::Relp(s) => s.as_raw_fd(),
        }
    }
}

/// Sends every line of each batch as one syslog message.
///
/// Stream transports append the batch's frames to a ledger of frames not
/// yet acknowledged and write them with as few `send(2)` calls as the
/// socket allows; a frame leaves the ledger, its record written, when the
/// receiver's TCP acknowledged it (`SIOCOUTQ`, read once per `poll` and
/// per batch). When a connection breaks (a write fails, or `poll(2)` +
/// `MSG_PEEK` shows the receiver closed it), the sink books the last
/// acknowledgements, resets the connection if its send queue still holds
/// bytes, and sends every frame left in the ledger again on the next
/// connection, from the start of the first (a cut frame is resent whole);
/// the batch being written gets a retryable error and its retry resumes
/// after the reconnect (with backoff; `tick` and the stop's `drain`
/// reconnect and resend too). Plain TCP syslog has no application
/// acknowledgement, so bytes the receiver's kernel acknowledged but the
/// receiver never processed before dying are still lost; those cannot be
/// seen from here.
pub struct SyslogSink {
    opts: SyslogSinkOptions,
    conn: Option<Conn>,
    ever_connected: bool,
    next_connect: Instant,
    backoff: Duration,
    /// The datagram batch being resumed after a retryable error.
    resume: Option<DgramResume>,
    /// Stream transports: the frames not yet acknowledged.
    st: Stream,
    closed: bool,
    counters: Arc<SyslogCounters>,
    /// Datagram outcomes not yet reported by `poll`: records sent, their
    /// bytes, records refused as too large. Only batches with a refusal
    /// are `Pending` and land here; the others are `Delivered`.
    dgram_backlog: Progress,
    relp: Relp,
    /// RFC 5848 signing state (`opts.sign`).
    sign: Option<sign::Signer>,
}

impl std::fmt::Debug for SyslogSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyslogSink")
            .field("opts", &self.opts)
            .field("connected", &self.conn.is_some())
            .field("ever_connected", &self.ever_connected)
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

/// `poll(2)` on one descriptor for `events`, up to `timeout`; returns the
/// events that occurred (0 on timeout).
fn poll_fd(fd: i32, events: i16, timeout: Duration) -> io::Result<i16> {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd on the stack; the descriptor is open (owned
    // by the caller's connection).
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    match n {
        n if n < 0 => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(0)
            } else {
                Err(e)
            }
        }
        0 => Ok(0),
        _ => Ok(p.revents),
    }
}

impl SyslogSink {
    /// Creates the sink and tries to connect once; a receiver that is not
    /// up yet is not an error (the first batch retries), but a bad option
    /// is.
    ///
    /// Errors: `InvalidInput` for `max_datagram_bytes` of 0 or above
    /// 65507, a zero backoff or timeout, or `relp_window` outside
    /// 1..=65536. With `sign`: a key file that is missing, unreadable,
    /// readable by others (not 0600/0400) or not an Ed25519 PKCS#8 PEM
    /// key; an `rsid_file` that cannot be read or written; settings out
    /// of range, or Signature Blocks larger than `max_datagram_bytes`
    /// over a datagram transport (see [`SyslogSignOptions`]).
    pub fn new(opts: SyslogSinkOptions) -> io::Result<Self> {
        if opts.max_datagram_bytes == 0 || opts.max_datagram_bytes > 65_507 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "max_datagram_bytes {} is outside 1..=65507",
                    opts.max_datagram_bytes
                ),
            ));
        }
        if opts.reconnect_min_ms == 0 || opts.reconnect_max_ms == 0 || opts.io_timeout_ms == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "reconnect_min_ms, reconnect_max_ms and io_timeout_ms must be > 0",
            ));
        }
        if opts.relp_window == 0 || opts.relp_window > 65_536 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("relp_window {} is outside 1..=65536", opts.relp_window),
            ));
        }
        let signer = match &opts.sign {
            Some(so) => {
                let dgram = matches!(
                    opts.transport,
                    SyslogTransport::Udp(_) | SyslogTransport::UnixDatagram(_)
                );
                Some(sign::Signer::open(
                    so,
                    dgram.then_some(opts.max_datagram_bytes),
                )?)
            }
            None => None,
        };
        let mut s = Self {
            sign: signer,
            backoff: Duration::from_millis(opts.reconnect_min_ms),
            opts,
            conn: None,
            ever_connected: false,
            next_connect: Instant::now(),
            resume: None,
            st: Stream::default(),
            closed: false,
            counters: Arc::new(SyslogCounters::default()),
            dgram_backlog: Progress::default(),
            relp: Relp {
                next_txnr: 1,
                held_refused_at: usize::MAX,
                ..Relp::default()
            },
        };
        let _ = s.ensure_connected();
        Ok(s)
    }

    /// A handle on the counters.
    pub fn counters(&self) -> Arc<SyslogCounters> {
        self.counters.clone()
    }

    /// True while a connection (or bound datagram socket) is up.
    pub fn is_connected(&self) -> bool {
        self.conn.is_some()
    }

    fn connect(&self) -> io::Result<Conn> {
        let timeout = Duration::from_millis(self.opts.io_timeout_ms);
        Ok(match &self.opts.transport {
            SyslogTransport::Udp(addr) => {
                let bind: SocketAddr = if addr.is_ipv4() {
                    "0.0.0.0:0".parse().expect("static address")
                } else {
                    "[::]:0".parse().expect("static address")
                };
                let s = UdpSocket::bind(bind)?;
                s.connect(addr)?;
                Conn::Udp(s)
            }
            SyslogTransport::Tcp(addr) => {
                let s = TcpStream::connect_timeout(addr, timeout)?;
                s.set_write_timeout(Some(timeout))?;
                Conn::Tcp(s)
            }
            SyslogTransport::UnixDatagram(path) => {
                let s = UnixDatagram::unbound()?;
                s.connect(path)?;
                // A receiver whose queue stays full (a stalled journald or
                // rsyslogd) would block send(2) for good: after the
                // timeout it fails with EAGAIN, and the batch is retried
                // and given up on like any failing sink's.
                s.set_write_timeout(Some(timeout))?;
                Conn::UnixDgram(s)
            }
            SyslogTransport::UnixStream(path) => {
                let s = UnixStream::connect(path)?;
                s.set_write_timeout(Some(timeout))?;
                Conn::UnixStream(s)
            }
            SyslogTransport::Relp(addr) => {
                let s = TcpStream::connect_timeout(addr, timeout)?;
                s.set_nodelay(true)?;
                s.set_nonblocking(true)?;
                Conn::Relp(s)
            }
        })
    }

    fn ensure_connected(&mut self) -> Result<(), SinkError> {
        if self.conn.is_some() {
            return Ok(());
        }
        let now = Instant::now();
        if now < self.next_connect {
            return Err(SinkError::Retryable(io::Error::new(
                io::ErrorKind::NotConnected,
                "syslog receiver unreachable; waiting to reconnect",
            )));
        }
        let connected = self.connect().and_then(|c| {
            self.conn = Some(c);
            if matches!(self.opts.transport, SyslogTransport::Relp(_)) {
                if let Err(e) = self.relp_open() {
                    self.conn = None;
                    self.relp_session_lost();
                    return Err(e);
                }
            }
            Ok(())
        });
        match connected {
            Ok(()) => {
                if self.ever_connected {
                    bump(&self.counters.reconnects, 1);
                }
                self.ever_connected = true;
                self.backoff = Duration::from_millis(self.opts.reconnect_min_ms);
                Ok(())
            }
            Err(e) => {
                bump(&self.counters.connect_failures, 1);
                self.next_connect = now + self.backoff;
                self.backoff =
                    (self.backoff * 2).min(Duration::from_millis(self.opts.reconnect_max_ms));
                // Every connect failure is worth retrying: the receiver may
                // come (back) up.
                Err(SinkError::Retryable(e))
            }
        }
    }

    /// Drops a broken connection. For streams, the acknowledgements that
    /// arrived are booked first (`SIOCOUTQ`), then every frame the
    /// receiver's TCP has not acknowledged whole is queued for replay on
    /// the next connection, from the start of the first such frame (a frame
    /// cut by the connection's end is resent whole). A connection whose
    /// send queue still holds bytes is reset (`SO_LINGER` 0) rather than
    /// closed, so the kernel discards them instead of delivering them after
    /// their replay.
    fn disconnect(&mut self) {
        self.disconnect_replaying(u64::MAX);
    }
}

impl Sink for SyslogSink {
    fn describe(&self) -> String {
        match &self.opts.transport {
            SyslogTransport::Udp(a) => format!("syslog udp {a}"),
            SyslogTransport::Tcp(a) => format!("syslog tcp {a}"),
            SyslogTransport::UnixDatagram(p) => format!("syslog unix-dgram {}", p.display()),
            SyslogTransport::UnixStream(p) => format!("syslog unix-stream {}", p.display()),
            SyslogTransport::Relp(a) => format!("syslog relp {a}"),
        }
    }

    fn write_batch(&mut self, batch: &[u8]) -> Result<Accepted, SinkError> {
        self.write_batch_marked(batch, &[])
    }

    /// Drop-report lines in `reports` are sent like records but left out
    /// of the record outcomes reported by `poll`.
    fn write_batch_marked(
        &mut self,
        batch: &[u8],
        reports: &[Range<usize>],
    ) -> Result<Accepted, SinkError> {
        if self.closed {
            return Err(SinkError::Permanent(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "syslog sink is closed",
            )));
        }
        if self.peer_closed() {
            self.disconnect();
        }
        if matches!(self.conn, Some(Conn::Relp(_))) && self.relp_read().is_err() {
            self.disconnect();
        }
        self.ensure_connected()?;
        let fp = crate::accounting::fingerprint(batch);
        self.sign_before(batch, fp)?;
        let r = match self.opts.transport {
            SyslogTransport::Tcp(_) | SyslogTransport::UnixStream(_) => {
                self.write_stream(batch, reports, fp)
            }
            SyslogTransport::Udp(_) | SyslogTransport::UnixDatagram(_) => {
                self.write_dgram(batch, reports, fp)
            }
            SyslogTransport::Relp(_) => self.write_relp(batch, reports, fp),
        };
        if r.is_ok() {
            self.sign_after(true);
        }
        r
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        // Every write goes straight to the socket.
        Ok(())
    }

    fn tick(&mut self, now: Instant) -> Result<(), SinkError> {
        if self.closed {
            return Ok(());
        }
        self.sign_tick(now);
        if self.peer_closed() {
            self.disconnect();
        }
        if matches!(self.conn, Some(Conn::Relp(_))) && self.relp_read().is_err() {
            self.disconnect();
        }
        if self.conn.is_none() {
            // Reconnect in the background so the next batch finds a
            // connection (for RELP, unacknowledged messages are resent);
            // failure is counted, not an error of the tick.
            let _ = self.ensure_connected();
        }
        if self.conn.is_some() && self.st.sent < self.st.end() {
            // Stream frames queued for replay, or the rest of a batch that
            // timed out: sent as far as the socket takes them now.
            match self.stream_send(true) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => self.disconnect(),
            }
        }
        Ok(())
    }

    /// Stream transports: one `SIOCOUTQ` per call books the frames the
    /// receiver's TCP acknowledged since the last one.
    fn poll(&mut self) -> Progress {
        if matches!(self.conn, Some(Conn::Relp(_))) && self.relp_read().is_err() {
            self.disconnect();
        }
        self.stream_acks();
        let mut p = std::mem::take(&mut self.relp.backlog);
        p += std::mem::take(&mut self.dgram_backlog);
        p += std::mem::take(&mut self.st.backlog);
        p
    }

    /// RELP: until every message is acknowledged; streams: until the
    /// receiver's TCP acknowledged every frame (reconnecting and resending
    /// as needed); or until `deadline`.
    fn drain(&mut self, deadline: Instant) -> Result<(), SinkError> {
        if self.closed {
            return Ok(());
        }
        self.sign_finish();
        match self.opts.transport {
            SyslogTransport::Relp(_) => self.relp_drain(deadline),
            SyslogTransport::Tcp(_) | SyslogTransport::UnixStream(_) => self.stream_drain(deadline),
            _ => Ok(()),
        }
    }

    /// RELP: the batch's messages are neither resent nor reported.
    /// Streams: its frames still unacknowledged leave the ledger (a
    /// connection carrying some of them is reset, see `kept_of_refused`).
    fn abandon(&mut self) {
        self.sign_after(false);
        match self.opts.transport {
            SyslogTransport::Relp(_) => self.relp_abandon_batch(),
            SyslogTransport::Tcp(_) | SyslogTransport::UnixStream(_)
                if self.st.resume.is_some() =>
            {
                self.stream_forget_batch();
            }
            _ => {}
        }
    }

    /// RELP: the records of the refused batch the receiver acknowledged
    /// (`rsp 200`), which the runtime counts written instead of dropped;
    /// the rest (unsent, unacknowledged, or refused by the receiver) is
    /// dropped. `records` counts every acknowledged record of the batch,
    /// also one acknowledged after a gap (a message still unacknowledged or
    /// refused before it; rsyslog answers in order, so in practice there is
    /// none), since the receiver has it; `bytes` is the gapless
    /// acknowledged prefix (whole lines), so an in-band drop report at the
    /// head of the batch counts delivered only when it was acknowledged.
    ///
    /// Streams: the frames of the batch the receiver's TCP acknowledged
    /// (a gapless prefix: TCP acknowledges in order) count written; the
    /// others are removed unsent, and a connection that already carries
    /// bytes of them is reset so its kernel discards them: none reaches
    /// the receiver later, and no cut frame heads the next connection.
    /// Frames of earlier batches on that connection are resent on the
    /// next.
    ///
    /// Datagrams (UDP, unix datagram): the records whose datagrams were
    /// handed to the kernel and not refused (for UDP: no ICMP error
    /// reported for them, see `write_dgram`) count written; the rest (not
    /// sent yet, a refused datagram waiting to be sent again, lines too
    /// large) is dropped and never sent.
    fn kept_of_refused(&mut self, batch: &[u8], reports: &[Range<usize>]) -> Kept {
        self.sign_after(false);
        match self.opts.transport {
            SyslogTransport::Relp(_) => self.relp_kept(batch),
            SyslogTransport::Tcp(_) | SyslogTransport::UnixStream(_) => match self.st.resume {
                Some(fp) if fp == crate::accounting::fingerprint(batch) => {
                    self.stream_forget_batch()
                }
                _ => Kept::default(),
            },
            SyslogTransport::Udp(_) | SyslogTransport::UnixDatagram(_) => {
                self.dgram_kept(batch, reports)
            }
        }
    }

    /// RELP: ends the session with `close`. Messages still unacknowledged
    /// are not reported (the runtime counts them `dropped_shutdown`).
    /// Streams: books the last acknowledgements (reported by the next
    /// `poll`); a connection with frames still unacknowledged (counted
    /// `dropped_shutdown` by the runtime) is reset, so they never arrive,
    /// otherwise it is shut down in order.
    fn close(&mut self) -> Result<(), SinkError> {
        if self.closed {
            return Ok(());
        }
        if self.sign_pending() {
            // The last Signature Block, waited for like the records (a
            // runtime's stop drained already; a direct close did not).
            let _ = self.drain(Instant::now() + Duration::from_millis(self.opts.io_timeout_ms));
        }
        self.closed = true;
        if matches!(self.conn, Some(Conn::Tcp(_) | Conn::UnixStream(_))) {
            self.stream_acks();
        }
        match &self.conn {
            Some(c @ (Conn::Tcp(_) | Conn::UnixStream(_))) => {
                if self.st.sent > self.st.acked {
                    bump(&self.counters.resets, 1);
                    set_linger_zero(c.fd());
                } else {
                    // SAFETY: shutdown(2) on the open descriptor of `c`.
                    unsafe { libc::shutdown(c.fd(), libc::SHUT_WR) };
                }
            }
            Some(Conn::Relp(_)) => self.relp_close(),
            _ => {}
        }
        self.conn = None;
        Ok(())
    }

    fn named_counters(&self) -> Option<Arc<dyn dplog_core::SinkCounters>> {
        Some(self.counters.clone())
    }
}
