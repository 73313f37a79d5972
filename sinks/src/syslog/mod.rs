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
pub use config::{SyslogSinkConfig, SyslogTransportName};

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
    /// Connect and write timeout for stream transports, in milliseconds;
    /// a receiver that stops reading for this long makes the batch
    /// retryable. For RELP also the wait for the `open` answer, and the
    /// longest wait for an acknowledgement while the window is full before
    /// the batch is retried. Default 1000.
    pub io_timeout_ms: u64,
    /// RELP: messages sent and not yet acknowledged, at most (1..=65536).
    /// Default 128.
    pub relp_window: usize,
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
    /// again after the reconnect (each refusal counted once).
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
    /// records are the ones counted written.
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
    /// RELP messages the receiver acknowledged (`rsp 200`).
    pub relp_acked: AtomicU64,
    /// RELP messages sent again on a new session because the old one
    /// broke before their acknowledgement.
    pub relp_resent: AtomicU64,
    /// RELP messages the receiver answered with an error status (their
    /// records count as `dropped_sink`).
    pub relp_refused: AtomicU64,
    /// RELP sessions the receiver refused at `open`.
    pub relp_open_failures: AtomicU64,
}

impl dplog_core::SinkCounters for SyslogCounters {
    fn named(&self) -> Vec<(String, u64)> {
        let g = SyslogCounters::get;
        [
            ("messages", g(&self.messages)),
            ("too_large", g(&self.too_large)),
            ("refused", g(&self.refused)),
            ("refused_late", g(&self.refused_late)),
            ("reconnects", g(&self.reconnects)),
            ("connect_failures", g(&self.connect_failures)),
            ("disconnects", g(&self.disconnects)),
            ("replayed_frames", g(&self.replayed_frames)),
            ("replayed_bytes", g(&self.replayed_bytes)),
            ("acked_frames", g(&self.acked_frames)),
            ("unacked_frames", g(&self.unacked_frames)),
            ("abandoned_frames", g(&self.abandoned_frames)),
            ("resets", g(&self.resets)),
            ("relp_acked", g(&self.relp_acked)),
            ("relp_resent", g(&self.relp_resent)),
            ("relp_refused", g(&self.relp_refused)),
            ("relp_open_failures", g(&self.relp_open_failures)),
        ]
        .into_iter()
        .map(|(n, v)| (format!("syslog.{n}"), v))
        .collect()
    }
}

fn bump(c: &AtomicU64, n: u64) {
    // Relaxed: single-writer statistic (see `SyslogCounters`).
    c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}

impl SyslogCounters {
    /// Reads one counter (Relaxed).
    pub fn get(c: &AtomicU64) -> u64 {
        // Relaxed: statistic (see the type docs).
        c.load(Ordering::Relaxed)
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
}

/// Where a datagram batch stands: how far it got and its outcomes so far,
/// kept across the retries of a retryable error.
#[derive(Clone, Copy, Debug, Default)]
struct DgramResume {
    /// Fingerprint of the batch.
    fp: u64,
    /// Byte offset of the next line not taken yet.
    at: usize,
    /// Byte offset of a line sent before whose UDP datagram the
    /// receiver's host refused (ICMP port unreachable): sent again before
    /// the line at `at`. Set only with a new socket to come, so when it
    /// is set `last` is None.
    resend: Option<usize>,
    /// Byte offset of the last line of this batch sent on the current UDP
    /// socket and still counted sent (None: none, or taken back): the one
    /// an ICMP error reported by the socket is about.
    last: Option<usize>,
    /// Records sent (and empty lines), their bytes, and records refused as
    /// too large.
    ok: u64,
    ok_bytes: u64,
    too_large: u64,
    /// Byte offset of the first line of this batch refused as too large
    /// (a kept prefix of a batch given up on ends before it).
    first_too_large: Option<usize>,
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

/// One RELP `syslog` command sent and not yet acknowledged.
struct RelpMsg {
    /// The message (the line without its `\n`).
    msg: Vec<u8>,
    /// A record (false: an in-band drop report, not counted as a record).
    record: bool,
    /// Sequence number of the batch it belongs to (see `Relp::batch`).
    batch: u64,
    /// Byte offset of its line in that batch.
    offset: usize,
    /// Transaction number on the current session (0: not sent on it).
    txnr: u32,
}

/// RELP session state and delivery accounting.
#[derive(Default)]
struct Relp {
    /// Unacknowledged messages, in send order.
    window: VecDeque<RelpMsg>,
    /// Next transaction number (1..=999_999_999, then 1 again).
    next_txnr: u32,
    /// Received bytes not yet parsed into whole frames.
    rx: Vec<u8>,
    /// Frame being written (scratch).
    out: Vec<u8>,
    /// Sequence number of the batch being written (not yet accepted).
    batch: u64,
    /// `(fingerprint, byte offset of the next line)` after a retryable
    /// error.
    resume: Option<(u64, usize)>,
    /// Outcomes of the batch being written, held until it is accepted (so
    /// a batch the runtime abandons is not also reported written; its
    /// acknowledged records are reported by `kept_of_refused` instead).
    held: Progress,
    /// Byte offset of the first line of the batch being written that the
    /// receiver refused (`usize::MAX`: none).
    held_refused_at: usize,
    /// Outcomes of accepted batches not yet reported by `poll`.
    backlog: Progress,
    /// The last answer whose transaction number is not in the window
    /// (`open`, `close`): `(txnr, data)`.
    ctrl: Option<(u32, Vec<u8>)>,
}

/// One parsed RELP frame: bytes it took, transaction number, command,
/// data.
type RelpFrame<'a> = (usize, u32, &'a [u8], &'a [u8]);

/// Parses one RELP frame `TXNR SP COMMAND SP DATALEN [SP DATA] LF` at the
/// start of `buf`: `Ok(None)` while it is incomplete. Errors:
/// `InvalidData` for anything else.
fn relp_parse(buf: &[u8]) -> io::Result<Option<RelpFrame<'_>>> {
    let bad = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("RELP: malformed frame from the receiver ({what})"),
        )
    };
    // A number of at most 9 digits ending before `buf[i]`.
    let number = |from: usize| -> io::Result<Option<(usize, u32)>> {
        let digits = buf[from..]
            .iter()
            .take(10)
            .take_while(|b| b.is_ascii_digit())
            .count();
        if from + digits == buf.len() {
            return Ok(None);
        }
        if digits == 0 || digits > 9 {
            return Err(bad("number"));
        }
        let v = buf[from..from + digits]
            .iter()
            .fold(0u32, |v, &b| v * 10 + u32::from(b - b'0'));
        Ok(Some((from + digits, v)))
    };
    let Some((i, txnr)) = number(0)? else {
        return Ok(None);
    };
    if buf[i] != b' ' {
        return Err(bad("after the transaction number"));
    }
    let cmd_len = buf[i + 1..]
        .iter()
        .take(33)
        .take_while(|b| b.is_ascii_alphabetic())
        .count();
    let c = i + 1 + cmd_len;
    if c == buf.len() {
        return Ok(None);
    }
    if cmd_len == 0 || cmd_len > 32 || buf[c] != b' ' {
        return Err(bad("command"));
    }
    let cmd = &buf[i + 1..c];
    let Some((j, len)) = number(c + 1)? else {
        return Ok(None);
    };
    let len = len as usize;
    if len == 0 {
        return match buf[j] {
            b'\n' => Ok(Some((j + 1, txnr, cmd, &[]))),
            _ => Err(bad("trailer")),
        };
    }
    if buf[j] != b' ' {
        return Err(bad("after the data length"));
    }
    let end = j + 1 + len;
    if end >= buf.len() {
        return Ok(None);
    }
    if buf[end] != b'\n' {
        return Err(bad("trailer"));
    }
    Ok(Some((end + 1, txnr, cmd, &buf[j + 1..end])))
}

/// Writes the RELP frame `TXNR SP CMD SP LEN [SP DATA] LF` into `out`.
fn relp_frame(out: &mut Vec<u8>, txnr: u32, cmd: &str, data: &[u8]) {
    out.clear();
    out.extend_from_slice(itoa::Buffer::new().format(txnr).as_bytes());
    out.push(b' ');
    out.extend_from_slice(cmd.as_bytes());
    out.push(b' ');
    out.extend_from_slice(itoa::Buffer::new().format(data.len()).as_bytes());
    if !data.is_empty() {
        out.push(b' ');
        out.extend_from_slice(data);
    }
    out.push(b'\n');
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

/// Largest RELP transaction number (the spec's 9 digits); it wraps to 1.
const RELP_MAX_TXNR: u32 = 999_999_999;

/// One line of a stream batch in the ledger: framed and queued, sent,
/// or sent and not yet acknowledged by the receiver.
struct Frame {
    /// Stream position (bytes framed since the sink started) just past
    /// its last byte.
    end: u64,
    /// Framed bytes (`LEN SP MSG`); 0 for an empty line, which has no
    /// frame (nothing is sent) but whose record is reported with the
    /// frames around it.
    len: u64,
    /// Bytes of its line in the batch (message and `\n`).
    line: u64,
    /// Offset just past its line in its batch.
    line_end: usize,
    /// A record (false: an in-band drop report, not counted as a record).
    record: bool,
    /// Sequence number of its batch (see `Stream::batch`).
    batch: u64,
}

impl Frame {
    fn start(&self) -> u64 {
        self.end - self.len
    }
}

/// Stream (TCP, unix stream) delivery ledger: every frame not yet
/// acknowledged, its bytes, and how far the current connection got.
/// Positions count bytes framed since the sink started; the frames are
/// contiguous, the first starting at or after `base`.
#[derive(Default)]
struct Stream {
    /// Frames not yet acknowledged, in stream order.
    frames: VecDeque<Frame>,
    /// Their bytes; `buf[0]` is at position `base` (bytes before the first
    /// frame are acknowledged, kept until a compaction).
    buf: Vec<u8>,
    base: u64,
    /// Position up to which bytes were written to the current connection
    /// (while disconnected: the start of the first frame, where the next
    /// connection starts).
    sent: u64,
    /// Position up to which the receiver acknowledged them (`<= sent`).
    acked: u64,
    /// Sequence number of the batch being written (not yet accepted).
    batch: u64,
    /// Fingerprint of the batch being written after a retryable error:
    /// its frames are in the ledger, a retry continues sending them.
    resume: Option<u64>,
    /// Non-empty frames of the batch being written (`messages` counter).
    batch_msgs: u64,
    /// Acknowledged frames of the batch being written, held until it is
    /// accepted (so a batch the runtime gives up on is reported through
    /// `kept_of_refused`, never also by `poll`), and the offset just past
    /// the last of their lines in it.
    held: Progress,
    held_bytes: usize,
    /// Acknowledged frames of accepted batches not yet reported by `poll`.
    backlog: Progress,
}

impl Stream {
    /// Position just past the last framed byte.
    fn end(&self) -> u64 {
        self.base + self.buf.len() as u64
    }

    /// Frees the acknowledged bytes before the first frame: all of them
    /// once every frame is acknowledged (the usual case, O(1)), otherwise
    /// when they are more than half the buffer (amortised O(1) per byte).
    fn compact(&mut self) {
        let first = self.frames.front().map_or(self.end(), Frame::start);
        let done = (first - self.base) as usize;
        if done == self.buf.len() {
            self.buf.clear();
            self.base = first;
        } else if done > 64 << 10 && done > self.buf.len() / 2 {
            self.buf.drain(..done);
            self.base = first;
        }
    }
}

impl SyslogSink {
    /// Creates the sink and tries to connect once; a receiver that is not
    /// up yet is not an error (the first batch retries), but a bad option
    /// is.
    ///
    /// Errors: `InvalidInput` for `max_datagram_bytes` of 0 or above
    /// 65507, a zero backoff or timeout, or `relp_window` outside
    /// 1..=65536.
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
        let mut s = Self {
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

    /// [`disconnect`](Self::disconnect), counting as replayed only the
    /// frames that start before stream position `replay_below` (the rest
    /// are about to be given up on).
    fn disconnect_replaying(&mut self, replay_below: u64) {
        if self.conn.is_none() {
            return;
        }
        if matches!(self.conn, Some(Conn::Tcp(_) | Conn::UnixStream(_))) {
            self.stream_acks();
        }
        let Some(c) = self.conn.take() else { return };
        bump(&self.counters.disconnects, 1);
        if let Conn::Relp(_) = c {
            self.relp_session_lost();
            return;
        }
        if !matches!(c, Conn::Tcp(_) | Conn::UnixStream(_)) {
            return;
        }
        let st = &mut self.st;
        if st.sent > st.acked {
            bump(&self.counters.resets, 1);
            set_linger_zero(c.fd());
        }
        drop(c);
        let sent = st.sent;
        let restart = st.frames.front().map_or(st.end(), |f| f.start());
        let (mut frames, mut bytes) = (0u64, 0u64);
        for f in st.frames.iter() {
            let s = f.start();
            if s >= sent || s >= replay_below {
                break;
            }
            frames += u64::from(f.len > 0);
            bytes += f.len;
        }
        bump(&self.counters.replayed_frames, frames);
        bump(&self.counters.replayed_bytes, bytes);
        st.sent = restart;
        st.acked = restart;
    }

    /// Stream transports: books the frames the receiver took since the
    /// last call. TCP: one `ioctl(SIOCOUTQ)` gives the bytes written and
    /// not yet acknowledged by the receiver's TCP, so every frame that
    /// ends before `sent - unacknowledged` is acknowledged. A unix stream
    /// puts written bytes straight into the receiver's socket: written is
    /// taken. Frames of the batch being written are held until it is
    /// accepted (see `Stream::held`), the others go to the backlog `poll`
    /// reports.
    fn stream_acks(&mut self) {
        if self.st.frames.is_empty() {
            return;
        }
        let acked = match &self.conn {
            Some(Conn::Tcp(s)) => match unacked_bytes(s.as_raw_fd()) {
                Some(q) => self.st.sent.saturating_sub(q),
                None => return,
            },
            Some(Conn::UnixStream(_)) => self.st.sent,
            _ => return,
        };
        let st = &mut self.st;
        st.acked = st.acked.max(acked);
        let mut n = 0u64;
        while let Some(f) = st.frames.front() {
            if f.end > st.acked {
                break;
            }
            let f = st.frames.pop_front().expect("front exists");
            n += u64::from(f.len > 0);
            let p = Progress {
                delivered_records: u64::from(f.record),
                delivered_bytes: f.line,
                failed_records: 0,
            };
            if f.batch == st.batch {
                st.held += p;
                st.held_bytes = f.line_end;
            } else {
                st.backlog += p;
            }
        }
        if n > 0 {
            bump(&self.counters.acked_frames, n);
        }
        st.compact();
        // Relaxed: single-writer gauge (see `SyslogCounters`).
        self.counters
            .unacked_frames
            .store(st.frames.len() as u64, Ordering::Relaxed);
    }

    /// Writes the stream bytes not yet sent on the current connection
    /// (`Stream::sent` up to the end of the ledger). Blocking writes wait
    /// up to `io_timeout_ms` (`SO_SNDTIMEO`: `WouldBlock` when it
    /// expires); `nonblocking` ones return `WouldBlock` as soon as the
    /// socket is full.
    fn stream_send(&mut self, nonblocking: bool) -> io::Result<()> {
        let fd = match &self.conn {
            Some(c @ (Conn::Tcp(_) | Conn::UnixStream(_))) => c.fd(),
            _ => return Err(io::Error::from(io::ErrorKind::NotConnected)),
        };
        let flags = libc::MSG_NOSIGNAL | if nonblocking { libc::MSG_DONTWAIT } else { 0 };
        let st = &mut self.st;
        while st.sent < st.end() {
            let from = (st.sent - st.base) as usize;
            let chunk = &st.buf[from..];
            // SAFETY: send(2) reads `chunk.len()` bytes from a live slice;
            // the descriptor is open (owned by `self.conn`). MSG_NOSIGNAL:
            // a closed peer is an EPIPE error, never a SIGPIPE.
            let n = unsafe { libc::send(fd, chunk.as_ptr().cast(), chunk.len(), flags) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            st.sent += n as u64;
        }
        Ok(())
    }

    /// For stream transports: true when the receiver has closed the
    /// connection (readable and `recv(MSG_PEEK)` returns 0, or an error).
    fn peer_closed(&self) -> bool {
        let Some(c) = &self.conn else { return false };
        if !matches!(c, Conn::Tcp(_) | Conn::UnixStream(_)) {
            return false;
        }
        crate::tcp::peer_closed(c.fd())
    }

    /// Appends the frames of `batch` (one per line, `LEN SP MSG`; an empty
    /// line has no frame but a zero-length ledger entry, so its record is
    /// still reported) to the ledger, as batch `Stream::batch`.
    fn stream_frame(&mut self, batch: &[u8], reports: &[Range<usize>]) {
        let st = &mut self.st;
        st.batch_msgs = 0;
        let mut start = 0;
        while start < batch.len() {
            let end = memchr::memchr(b'\n', &batch[start..]).map_or(batch.len(), |i| start + i);
            let msg = &batch[start..end];
            let line_end = (end + 1).min(batch.len());
            let before = st.buf.len();
            if !msg.is_empty() {
                st.buf
                    .extend_from_slice(itoa::Buffer::new().format(msg.len()).as_bytes());
                st.buf.push(b' ');
                st.buf.extend_from_slice(msg);
                st.batch_msgs += 1;
            }
            st.frames.push_back(Frame {
                end: st.base + st.buf.len() as u64,
                len: (st.buf.len() - before) as u64,
                line: (line_end - start) as u64,
                line_end,
                record: !in_report(reports, start),
                batch: st.batch,
            });
            start = end + 1;
        }
        // Relaxed: single-writer gauge (see `SyslogCounters`).
        self.counters
            .unacked_frames
            .store(st.frames.len() as u64, Ordering::Relaxed);
    }

    /// Frames `batch` into the ledger (or, retrying it, continues where
    /// the last call stopped) and writes everything not yet sent on the
    /// connection: replayed frames first, then the batch. Always
    /// `Pending`: a frame counts written when the receiver acknowledged it
    /// (see `stream_acks`), reported by `poll`. A write timeout keeps the
    /// connection (the retry resumes there); any other error drops it,
    /// queueing what was not acknowledged for the next one.
    fn write_stream(
        &mut self,
        batch: &[u8],
        reports: &[Range<usize>],
        fp: u64,
    ) -> Result<Accepted, SinkError> {
        match self.st.resume.take() {
            Some(f) if f == fp => {}
            other => {
                if other.is_some() {
                    // A different batch: the runtime gave up on the old one.
                    self.stream_forget_batch();
                }
                self.stream_frame(batch, reports);
            }
        }
        if let Err(e) = self.stream_send(false) {
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) {
                self.stream_acks();
            } else {
                self.disconnect();
            }
            self.st.resume = Some(fp);
            return Err(SinkError::Retryable(e));
        }
        self.stream_acks();
        bump(&self.counters.messages, self.st.batch_msgs);
        let st = &mut self.st;
        let held = std::mem::take(&mut st.held);
        st.backlog += held;
        st.held_bytes = 0;
        st.batch += 1;
        Ok(Accepted::Pending)
    }

    /// Forgets the batch being written (the runtime counted its records
    /// dropped, or written up to what this returns): its frames the
    /// receiver acknowledged are returned as [`Kept`] and never reported
    /// by `poll`; the others leave the ledger unsent (counted in
    /// `abandoned_frames`). A connection that already carries bytes of
    /// them is reset first, so its kernel discards them and no frame of
    /// the batch, whole or cut, reaches the receiver later or heads the
    /// next connection's stream.
    fn stream_forget_batch(&mut self) -> Kept {
        self.stream_acks();
        let b = self.st.batch;
        if let Some(cut) = self
            .st
            .frames
            .iter()
            .find(|f| f.batch == b)
            .map(|f| f.start())
        {
            if self.conn.is_some() && self.st.sent > cut {
                self.disconnect_replaying(cut);
            }
        }
        let st = &mut self.st;
        let kept = Kept {
            bytes: st.held_bytes,
            records: st.held.delivered_records,
        };
        if let Some(i) = st.frames.iter().position(|f| f.batch == b) {
            let cut = st.frames[i].start();
            let dropped = st.frames.range(i..).filter(|f| f.len > 0).count() as u64;
            bump(&self.counters.abandoned_frames, dropped);
            st.frames.truncate(i);
            st.buf.truncate((cut - st.base) as usize);
            st.sent = st.sent.min(cut);
            st.acked = st.acked.min(cut);
        }
        st.held = Progress::default();
        st.held_bytes = 0;
        st.resume = None;
        st.batch += 1;
        st.compact();
        // Relaxed: single-writer gauge (see `SyslogCounters`).
        self.counters
            .unacked_frames
            .store(st.frames.len() as u64, Ordering::Relaxed);
        kept
    }

    /// Stream transports: waits until the receiver acknowledged every
    /// frame or `deadline` passes, reconnecting (with backoff) and
    /// resending unacknowledged frames as needed. Errors: `TimedOut` (as
    /// retryable) with frames still unacknowledged at the deadline.
    fn stream_drain(&mut self, deadline: Instant) -> Result<(), SinkError> {
        loop {
            if self.peer_closed() {
                self.disconnect();
            }
            if self.conn.is_some() {
                match self.stream_send(true) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(_) => self.disconnect(),
                }
                self.stream_acks();
            }
            if self.st.frames.is_empty() {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(SinkError::Retryable(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{} frames not acknowledged by the receiver at the shutdown deadline",
                        self.st.frames.len()
                    ),
                )));
            }
            let left = deadline - now;
            if self.conn.is_none() {
                if self.ensure_connected().is_err() {
                    let wait = self
                        .next_connect
                        .saturating_duration_since(now)
                        .min(left)
                        .max(Duration::from_millis(1));
                    std::thread::sleep(wait);
                }
                continue;
            }
            if self.st.sent < self.st.end() {
                let fd = self.conn.as_ref().map_or(-1, Conn::fd);
                if poll_fd(fd, libc::POLLOUT, left.min(Duration::from_millis(10))).is_err() {
                    self.disconnect();
                }
            } else {
                // Acknowledgements cannot be waited for with poll(2).
                std::thread::sleep(left.min(Duration::from_millis(1)));
            }
        }
    }

    /// Sends each line of `batch` as one datagram, from where a failed
    /// call stopped. A message above `max_datagram_bytes` is refused whole
    /// (counted in `too_large`). Returns `Delivered` when nothing was
    /// refused; otherwise `Pending`, the batch's outcomes (sent records,
    /// refused records) waiting in `dgram_backlog` for `poll`. Lines in
    /// `reports` (drop reports) are not records and are left out of those
    /// outcomes.
    ///
    /// UDP: the receiver's host answers a datagram to a port nobody listens
    /// on with an ICMP port unreachable, which the kernel books on the
    /// connected socket (`sk_err`), not on that datagram's `send(2)`: the
    /// next `send(2)` fails with ECONNREFUSED without sending its own
    /// datagram, or `SO_ERROR` returns it. Either way the datagram refused
    /// is the last one sent on the socket (on loopback the ICMP error is
    /// handled before `send(2)` returns): it is taken back (counted
    /// `refused`, no longer sent) and sent again first after the
    /// reconnect. `SO_ERROR` is read once per batch, after its last
    /// datagram, so that one is covered too before the batch counts
    /// written. A unix datagram socket refuses on the `send(2)` of the
    /// datagram itself, so none of this applies to it.
    fn write_dgram(
        &mut self,
        batch: &[u8],
        reports: &[Range<usize>],
        fp: u64,
    ) -> Result<Accepted, SinkError> {
        let mut d = match self.resume.take() {
            Some(d) if d.fp == fp => d,
            _ => DgramResume {
                fp,
                ..DgramResume::default()
            },
        };
        let udp = matches!(self.conn, Some(Conn::Udp(_)));
        let max = self.opts.max_datagram_bytes;
        // First sends (the `messages` counter); a datagram sent again is
        // not one.
        let mut sent = 0u64;
        loop {
            let (start, again) = match d.resend {
                Some(at) => (at, true),
                None if d.at < batch.len() => (d.at, false),
                None => break,
            };
            let (end, record, line_bytes) = dgram_line(batch, reports, start);
            let msg = &batch[start..end];
            if !again && msg.is_empty() {
                // A record formatted to an empty line: nothing to send.
                d.ok += record;
                d.ok_bytes += line_bytes;
                d.at = end + 1;
                continue;
            }
            if !again && msg.len() > max {
                bump(&self.counters.too_large, 1);
                d.too_large += record;
                d.first_too_large.get_or_insert(start);
                d.at = end + 1;
                continue;
            }
            let r = match self.conn.as_ref() {
                Some(Conn::Udp(s)) => s.send(msg),
                Some(Conn::UnixDgram(s)) => s.send(msg),
                _ => unreachable!("datagram transport"),
            };
            match r {
                Ok(_) => {
                    if again {
                        d.resend = None;
                    } else {
                        sent += 1;
                        d.at = end + 1;
                    }
                    d.ok += record;
                    d.ok_bytes += line_bytes;
                    d.last = Some(start);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    if udp && e.raw_os_error() == Some(libc::ECONNREFUSED) {
                        // Not this datagram's refusal (it was not sent): an
                        // earlier one's.
                        self.take_back_last(&mut d, batch, reports);
                    }
                    return Err(self.dgram_retry(d, sent, e));
                }
            }
        }
        if udp && d.last.is_some() {
            match self.udp_pending_error() {
                Ok(None) => {}
                Ok(Some(e)) => {
                    // Any pending error of a UDP socket is an ICMP error
                    // of a datagram it sent: the last one.
                    self.take_back_last(&mut d, batch, reports);
                    return Err(self.dgram_retry(d, sent, e));
                }
                Err(e) => return Err(self.dgram_retry(d, sent, e)),
            }
        }
        bump(&self.counters.messages, sent);
        if d.too_large == 0 {
            return Ok(Accepted::Delivered);
        }
        self.dgram_backlog += Progress {
            delivered_records: d.ok,
            delivered_bytes: d.ok_bytes,
            failed_records: d.too_large,
        };
        Ok(Accepted::Pending)
    }

    /// The UDP socket reported an ICMP error: the last datagram sent on it
    /// (`d.last`) was refused. It is no longer counted sent and is sent
    /// again before the rest of the batch. Without one (the socket's
    /// earlier datagrams belong to batches already counted written, the
    /// error came late) the refusal is only counted, in `refused_late`.
    /// The error a connected UDP socket holds (`SO_ERROR`, cleared by
    /// the read): an ICMP error of a datagram it sent. `Ok(None)` for
    /// other transports.
    fn udp_pending_error(&self) -> io::Result<Option<io::Error>> {
        match self.conn.as_ref() {
            Some(Conn::Udp(s)) => s.take_error(),
            _ => Ok(None),
        }
    }

    fn take_back_last(&self, d: &mut DgramResume, batch: &[u8], reports: &[Range<usize>]) {
        let Some(at) = d.last.take() else {
            bump(&self.counters.refused_late, 1);
            return;
        };
        debug_assert!(d.resend.is_none(), "a resend is the first send on a socket");
        let (_, record, bytes) = dgram_line(batch, reports, at);
        d.ok -= record;
        d.ok_bytes -= bytes;
        d.resend = Some(at);
        bump(&self.counters.refused, 1);
    }

    /// Keeps where the datagram batch `d` stands for its retry and drops
    /// the socket (the retry reconnects), except on ENOBUFS and EAGAIN (a
    /// full queue: the socket is fine).
    fn dgram_retry(&mut self, mut d: DgramResume, sent: u64, e: io::Error) -> SinkError {
        bump(&self.counters.messages, sent);
        // A unix receiver gone (ECONNREFUSED/ENOENT) or UDP's ICMP port
        // unreachable: reconnect on the retry.
        if !matches!(e.raw_os_error(), Some(libc::ENOBUFS | libc::EAGAIN)) {
            self.disconnect();
            // Nothing of this batch is sent on the next socket yet.
            d.last = None;
        }
        self.resume = Some(d);
        SinkError::Retryable(e)
    }

    /// What the receiver holds of the datagram batch being given up on
    /// (see `kept_of_refused` on the sink); forgets the batch. `records`
    /// counts every record whose datagram was handed to the kernel and not
    /// refused (and empty lines), also one sent after a line refused as
    /// too large; `bytes` is the gapless prefix of such lines, ending
    /// before the first line refused as too large and before a refused
    /// UDP datagram waiting to be sent again.
    ///
    /// UDP: the last datagram sent on a socket still open (a full send
    /// queue kept it, see `dgram_retry`) may have been refused since:
    /// `SO_ERROR` is read first (which clears it), and a pending error
    /// takes that datagram back, as `write_dgram` does.
    fn dgram_kept(&mut self, batch: &[u8], reports: &[Range<usize>]) -> Kept {
        let mut d = match self.resume.take() {
            Some(d) if d.fp == crate::file::fingerprint(batch) => d,
            _ => return Kept::default(),
        };
        if d.last.is_some() {
            if let Ok(Some(_)) = self.udp_pending_error() {
                self.take_back_last(&mut d, batch, reports);
            }
        }
        let end = d
            .resend
            .unwrap_or(d.at)
            .min(d.first_too_large.unwrap_or(usize::MAX))
            .min(batch.len());
        Kept {
            bytes: end,
            records: d.ok,
        }
    }
}

/// The datagram line of `batch` that starts at `start`: the offset of
/// the `\n` that ends it (the batch's length for a last line without
/// one), the records it counts (1, or 0 for an in-band report)
/// and the batch bytes it takes (with its `\n`).
fn dgram_line(batch: &[u8], reports: &[Range<usize>], start: usize) -> (usize, u64, u64) {
    let end = memchr::memchr(b'\n', &batch[start..]).map_or(batch.len(), |i| start + i);
    let record = u64::from(!in_report(reports, start));
    (end, record, ((end + 1).min(batch.len()) - start) as u64)
}

/// RELP: session, window and acknowledgements.
impl SyslogSink {
    fn relp_next_txnr(&mut self) -> u32 {
        let t = self.relp.next_txnr;
        self.relp.next_txnr = if t >= RELP_MAX_TXNR { 1 } else { t + 1 };
        t
    }

    /// The session is gone: every unacknowledged message is resent on the
    /// next one.
    fn relp_session_lost(&mut self) {
        self.relp.rx.clear();
        for m in self.relp.window.iter_mut() {
            m.txnr = 0;
        }
    }

    fn relp_fd(&self) -> io::Result<i32> {
        match &self.conn {
            Some(Conn::Relp(s)) => Ok(s.as_raw_fd()),
            _ => Err(io::Error::from(io::ErrorKind::NotConnected)),
        }
    }

    /// Writes `bytes` whole within `io_timeout_ms`, reading the receiver's
    /// answers meanwhile (so neither side's buffers fill up).
    fn relp_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        let deadline = Instant::now() + Duration::from_millis(self.opts.io_timeout_ms);
        let mut done = 0;
        while done < bytes.len() {
            let r = match &mut self.conn {
                Some(Conn::Relp(s)) => s.write(&bytes[done..]),
                _ => Err(io::Error::from(io::ErrorKind::NotConnected)),
            };
            match r {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "RELP receiver stopped reading",
                        ));
                    }
                    let ev = poll_fd(self.relp_fd()?, libc::POLLOUT | libc::POLLIN, left)?;
                    if ev & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                        self.relp_read()?;
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads whatever the receiver sent (never blocks) and books every
    /// whole answer. Errors: the connection is closed or broken, the
    /// receiver closed the session (`serverclose`), or sent a malformed
    /// frame.
    fn relp_read(&mut self) -> io::Result<()> {
        let mut buf = [0u8; 4096];
        loop {
            let r = match &mut self.conn {
                Some(Conn::Relp(s)) => io::Read::read(s, &mut buf),
                _ => return Err(io::Error::from(io::ErrorKind::NotConnected)),
            };
            match r {
                Ok(0) => {
                    self.relp_parse_rx()?;
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "RELP receiver closed the connection",
                    ));
                }
                Ok(n) => self.relp.rx.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        self.relp_parse_rx()
    }

    /// Books every whole frame in the receive buffer.
    fn relp_parse_rx(&mut self) -> io::Result<()> {
        let rx = std::mem::take(&mut self.relp.rx);
        let mut at = 0;
        let mut result = Ok(());
        while at < rx.len() {
            match relp_parse(&rx[at..]) {
                Ok(Some((n, txnr, cmd, data))) => {
                    at += n;
                    match cmd {
                        b"rsp" => self.relp_answer(txnr, data),
                        b"serverclose" => {
                            result = Err(io::Error::new(
                                io::ErrorKind::ConnectionAborted,
                                "RELP receiver closed the session (serverclose)",
                            ));
                            break;
                        }
                        // Commands a client need not serve.
                        _ => {}
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        self.relp.rx = rx;
        self.relp.rx.drain(..at);
        result
    }

    /// Books the answer `data` (`CODE [SP TEXT] [LF DATA]`) to transaction
    /// `txnr`: the message it acknowledges is delivered (code 200) or
    /// refused; an answer to no message in the window is kept in `ctrl`.
    fn relp_answer(&mut self, txnr: u32, data: &[u8]) {
        let Some(i) = self
            .relp
            .window
            .iter()
            .position(|m| m.txnr == txnr && txnr != 0)
        else {
            self.relp.ctrl = Some((txnr, data.to_vec()));
            return;
        };
        let m = self.relp.window.remove(i).expect("index from position");
        let ok = data.starts_with(b"200");
        if ok {
            bump(&self.counters.relp_acked, 1);
        } else {
            bump(&self.counters.relp_refused, 1);
        }
        let p = Progress {
            delivered_records: u64::from(ok && m.record),
            delivered_bytes: if ok { m.msg.len() as u64 + 1 } else { 0 },
            failed_records: u64::from(!ok && m.record),
        };
        if m.batch == self.relp.batch {
            self.relp.held += p;
            if !ok {
                self.relp.held_refused_at = self.relp.held_refused_at.min(m.offset);
            }
        } else {
            self.relp.backlog += p;
        }
    }

    /// Waits up to `timeout` for an answer that shrinks the window;
    /// returns whether one came.
    fn relp_await(&mut self, timeout: Duration) -> io::Result<bool> {
        let deadline = Instant::now() + timeout;
        let before = self.relp.window.len();
        loop {
            self.relp_read()?;
            if self.relp.window.len() < before {
                return Ok(true);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            poll_fd(self.relp_fd()?, libc::POLLIN, left)?;
        }
    }

    /// Opens a session on the new connection (`open` with
    /// `relp_version=0` and `commands=syslog`, answered `200`), then
    /// resends every unacknowledged message with new transaction numbers.
    fn relp_open(&mut self) -> io::Result<()> {
        self.relp.rx.clear();
        self.relp.ctrl = None;
        self.relp.next_txnr = 1;
        let txnr = self.relp_next_txnr();
        let offers = format!(
            "relp_version=0\nrelp_software=dplog,{},https://github.com/dplog\ncommands=syslog",
            env!("CARGO_PKG_VERSION")
        );
        let mut out = std::mem::take(&mut self.relp.out);
        relp_frame(&mut out, txnr, "open", offers.as_bytes());
        let r = self.relp_send(&out);
        self.relp.out = out;
        r?;
        let deadline = Instant::now() + Duration::from_millis(self.opts.io_timeout_ms);
        let answer = loop {
            self.relp_read()?;
            if let Some((t, data)) = self.relp.ctrl.take() {
                if t == txnr {
                    break data;
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "RELP receiver did not answer open",
                ));
            }
            poll_fd(self.relp_fd()?, libc::POLLIN, left)?;
        };
        if !answer.starts_with(b"200") {
            bump(&self.counters.relp_open_failures, 1);
            let text = String::from_utf8_lossy(&answer);
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!(
                    "RELP receiver refused the session: {}",
                    text.lines().next().unwrap_or("")
                ),
            ));
        }
        // Resend in the original order; answers read meanwhile only remove
        // messages already resent (txnr != 0).
        while let Some(i) = self.relp.window.iter().position(|m| m.txnr == 0) {
            let t = self.relp_next_txnr();
            self.relp.window[i].txnr = t;
            let mut out = std::mem::take(&mut self.relp.out);
            relp_frame(&mut out, t, "syslog", &self.relp.window[i].msg);
            let r = self.relp_send(&out);
            self.relp.out = out;
            r?;
            bump(&self.counters.relp_resent, 1);
        }
        Ok(())
    }

    /// Forgets the batch being written: the runtime counted its records
    /// as dropped, so its messages are neither resent nor reported.
    fn relp_abandon_batch(&mut self) {
        let b = self.relp.batch;
        self.relp.window.retain(|m| m.batch != b);
        self.relp.held = Progress::default();
        self.relp.held_refused_at = usize::MAX;
        self.relp.resume = None;
        self.relp.batch += 1;
    }

    /// What the receiver acknowledged of the batch being given up on (see
    /// `kept_of_refused` on the sink); forgets the batch.
    fn relp_kept(&mut self, batch: &[u8]) -> Kept {
        let at = match self.relp.resume {
            Some((fp, at)) if fp == crate::file::fingerprint(batch) => at.min(batch.len()),
            _ => return Kept::default(),
        };
        let b = self.relp.batch;
        let unacked = self
            .relp
            .window
            .iter()
            .filter(|m| m.batch == b)
            .map(|m| m.offset)
            .min()
            .unwrap_or(usize::MAX);
        let kept = Kept {
            bytes: at.min(unacked).min(self.relp.held_refused_at),
            records: self.relp.held.delivered_records,
        };
        self.relp_abandon_batch();
        kept
    }

    /// Sends each line of `batch` as a `syslog` command, from where a
    /// failed call stopped, keeping at most `relp_window` unacknowledged.
    /// Always `Pending`: outcomes come through `poll`.
    fn write_relp(
        &mut self,
        batch: &[u8],
        reports: &[Range<usize>],
        fp: u64,
    ) -> Result<Accepted, SinkError> {
        let mut at = match self.relp.resume.take() {
            Some((f, a)) if f == fp => a,
            Some(_) => {
                // A different batch: the runtime gave up on the old one.
                self.relp_abandon_batch();
                0
            }
            None => 0,
        };
        let timeout = Duration::from_millis(self.opts.io_timeout_ms);
        while at < batch.len() {
            let end = memchr::memchr(b'\n', &batch[at..]).map_or(batch.len(), |i| at + i);
            let record = !in_report(reports, at);
            if end == at {
                // A record formatted to an empty line: nothing to send.
                self.relp.held += Progress {
                    delivered_records: u64::from(record),
                    delivered_bytes: 1,
                    failed_records: 0,
                };
                at = end + 1;
                continue;
            }
            while self.relp.window.len() >= self.opts.relp_window {
                match self.relp_await(timeout) {
                    Ok(true) => {}
                    Ok(false) => {
                        self.relp.resume = Some((fp, at));
                        return Err(SinkError::Retryable(io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!(
                                "RELP: {} messages unacknowledged for {} ms",
                                self.relp.window.len(),
                                self.opts.io_timeout_ms
                            ),
                        )));
                    }
                    Err(e) => {
                        self.disconnect();
                        self.relp.resume = Some((fp, at));
                        return Err(SinkError::Retryable(e));
                    }
                }
            }
            let txnr = self.relp_next_txnr();
            self.relp.window.push_back(RelpMsg {
                msg: batch[at..end].to_vec(),
                record,
                batch: self.relp.batch,
                offset: at,
                txnr,
            });
            let mut out = std::mem::take(&mut self.relp.out);
            relp_frame(&mut out, txnr, "syslog", &batch[at..end]);
            let r = self.relp_send(&out);
            self.relp.out = out;
            // The message is in the window: sent, or resent after the
            // reconnect.
            at = end + 1;
            if let Err(e) = r {
                self.disconnect();
                self.relp.resume = Some((fp, at));
                return Err(SinkError::Retryable(e));
            }
            bump(&self.counters.messages, 1);
        }
        if self.relp_read().is_err() {
            // Resent on the next session; the batch is taken.
            self.disconnect();
        }
        let held = std::mem::take(&mut self.relp.held);
        self.relp.backlog += held;
        self.relp.held_refused_at = usize::MAX;
        self.relp.batch += 1;
        Ok(Accepted::Pending)
    }

    /// Waits until every message is acknowledged or `deadline` passes,
    /// reconnecting (with backoff) as needed.
    fn relp_drain(&mut self, deadline: Instant) -> Result<(), SinkError> {
        while !self.relp.window.is_empty() {
            let now = Instant::now();
            if now >= deadline {
                return Err(SinkError::Retryable(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "RELP: {} messages unacknowledged at the shutdown deadline",
                        self.relp.window.len()
                    ),
                )));
            }
            if self.conn.is_none() {
                if self.ensure_connected().is_err() {
                    let wait = self
                        .next_connect
                        .saturating_duration_since(now)
                        .min(deadline - now)
                        .max(Duration::from_millis(1));
                    std::thread::sleep(wait);
                }
                continue;
            }
            if self
                .relp_await((deadline - now).min(Duration::from_millis(100)))
                .is_err()
            {
                self.disconnect();
            }
        }
        Ok(())
    }

    /// Ends the session: `close`, waiting up to `io_timeout_ms` for its
    /// answer (answers to messages still in flight are booked meanwhile).
    fn relp_close(&mut self) {
        if self.conn.is_none() {
            return;
        }
        let txnr = self.relp_next_txnr();
        let mut out = std::mem::take(&mut self.relp.out);
        relp_frame(&mut out, txnr, "close", &[]);
        let r = self.relp_send(&out);
        self.relp.out = out;
        if r.is_ok() {
            let deadline = Instant::now() + Duration::from_millis(self.opts.io_timeout_ms);
            loop {
                if self.relp_read().is_err() {
                    break;
                }
                if matches!(self.relp.ctrl.take(), Some((t, _)) if t == txnr) {
                    break;
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                let Ok(fd) = self.relp_fd() else { break };
                if poll_fd(fd, libc::POLLIN, left).is_err() {
                    break;
                }
            }
        }
        if let Some(Conn::Relp(s)) = &self.conn {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        self.conn = None;
    }
}

/// True when the line starting at byte `pos` lies in one of `reports`
/// (ascending, disjoint ranges).
fn in_report(reports: &[Range<usize>], pos: usize) -> bool {
    let i = reports.partition_point(|r| r.end <= pos);
    reports.get(i).is_some_and(|r| r.start <= pos)
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
        let fp = crate::file::fingerprint(batch);
        match self.opts.transport {
            SyslogTransport::Tcp(_) | SyslogTransport::UnixStream(_) => {
                self.write_stream(batch, reports, fp)
            }
            SyslogTransport::Udp(_) | SyslogTransport::UnixDatagram(_) => {
                self.write_dgram(batch, reports, fp)
            }
            SyslogTransport::Relp(_) => self.write_relp(batch, reports, fp),
        }
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        // Every write goes straight to the socket.
        Ok(())
    }

    fn tick(&mut self, _now: Instant) -> Result<(), SinkError> {
        if self.closed {
            return Ok(());
        }
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
        match self.opts.transport {
            SyslogTransport::Relp(_) => self.relp_kept(batch),
            SyslogTransport::Tcp(_) | SyslogTransport::UnixStream(_) => match self.st.resume {
                Some(fp) if fp == crate::file::fingerprint(batch) => self.stream_forget_batch(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relp_frames_parse_whole_or_wait_for_more() {
        let mut out = Vec::new();
        relp_frame(&mut out, 7, "rsp", b"200 OK");
        assert_eq!(out, b"7 rsp 6 200 OK\n");
        let f = relp_parse(&out).unwrap().unwrap();
        assert_eq!(f, (out.len(), 7, &b"rsp"[..], &b"200 OK"[..]));
        for cut in 0..out.len() {
            assert_eq!(relp_parse(&out[..cut]).unwrap(), None, "cut at {cut}");
        }
        relp_frame(&mut out, 999_999_999, "serverclose", b"");
        assert_eq!(out, b"999999999 serverclose 0\n");
        assert_eq!(
            relp_parse(&out).unwrap(),
            Some((out.len(), 999_999_999, &b"serverclose"[..], &b""[..]))
        );
        // Two frames back to back: the first is taken alone.
        let two = b"1 rsp 3 200\n2 rsp 3 500\n";
        assert_eq!(relp_parse(two).unwrap().unwrap().0, 12);
        for bad in [
            &b"x rsp 0\n"[..],
            b"1  rsp 0\n",
            b"1 rsp 3 200X",
            b"1 rsp 0X",
            b"1234567890 rsp 0\n",
        ] {
            assert_eq!(
                relp_parse(bad).unwrap_err().kind(),
                io::ErrorKind::InvalidData,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
