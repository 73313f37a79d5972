//! The syslog sink: sends each formatted line (an RFC 5424 or RFC 3164
//! message from the formatters) to a syslog receiver over UDP (RFC 5426),
//! TCP with octet-counting framing (RFC 6587 section 3.4.1), or a unix
//! socket (datagram, or stream with octet counting), reconnecting with
//! backoff after the receiver restarts.
//!
//! The `syslog` crate formats its own messages and frames TCP with a
//! trailing newline; dplog's formatters already produce the messages, and
//! RFC 6587 octet counting is needed for messages that may contain
//! newlines, so the transport and framing are written here.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dplog_core::{Accepted, Sink, SinkError};

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
}

/// Syslog sink settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyslogSinkOptions {
    /// Transport and address.
    pub transport: SyslogTransport,
    /// Largest datagram payload (the whole syslog message, header
    /// included) for UDP and unix datagrams; longer messages are truncated
    /// to it and counted in [`SyslogCounters::truncated`]. Default 2048
    /// (RFC 5426 section 3.2: receivers SHOULD accept 2048 octets).
    pub max_datagram_bytes: usize,
    /// First reconnect backoff, in milliseconds (doubles up to
    /// `reconnect_max_ms`). Default 10.
    pub reconnect_min_ms: u64,
    /// Longest reconnect backoff, in milliseconds. Default 2000.
    pub reconnect_max_ms: u64,
    /// Connect and write timeout for stream transports, in milliseconds;
    /// a receiver that stops reading for this long makes the batch
    /// retryable. Default 1000.
    pub io_timeout_ms: u64,
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
        }
    }
}

/// Counters of one syslog sink (written by the consumer thread only;
/// Relaxed statistics, exact after the logger's shutdown joined it).
#[derive(Debug, Default)]
pub struct SyslogCounters {
    /// Messages handed to the kernel (datagrams sent, frames written).
    pub messages: AtomicU64,
    /// Datagram messages truncated to `max_datagram_bytes`.
    pub truncated: AtomicU64,
    /// Successful connects after the first.
    pub reconnects: AtomicU64,
    /// Failed connect attempts.
    pub connect_failures: AtomicU64,
    /// Connections found broken (on write, or closed by the receiver).
    pub disconnects: AtomicU64,
    /// Frames replayed on a new connection because the receiver's TCP never
    /// acknowledged them on the old one (`SIOCOUTQ`), or they were cut.
    pub replayed_frames: AtomicU64,
    /// Bytes of those.
    pub replayed_bytes: AtomicU64,
    /// Unacknowledged bytes that could not be replayed (older than the
    /// replay history).
    pub unacked_bytes_lost: AtomicU64,
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
}

impl Conn {
    fn fd(&self) -> i32 {
        match self {
            Conn::Udp(s) => s.as_raw_fd(),
            Conn::Tcp(s) => s.as_raw_fd(),
            Conn::UnixDgram(s) => s.as_raw_fd(),
            Conn::UnixStream(s) => s.as_raw_fd(),
        }
    }
}

/// Sends every line of each batch as one syslog message.
///
/// Stream transports build the batch's frames in one buffer and write it
/// with as few `write(2)` calls as the socket allows. When a connection
/// breaks (a write fails, or before a batch `poll` + `MSG_PEEK` shows the
/// receiver closed it), the sink reads how many bytes the receiver's TCP
/// never acknowledged (`SIOCOUTQ`), keeps them, from the start of the
/// first frame they touch, for replay on the next connection, and returns
/// a retryable error; the retry reconnects (after the backoff), replays,
/// and resumes the batch where it stopped. Plain TCP syslog has no
/// application acknowledgement, so bytes the receiver's kernel acknowledged
/// but the receiver never processed before dying are still lost; those
/// cannot be seen from here.
pub struct SyslogSink {
    opts: SyslogSinkOptions,
    conn: Option<Conn>,
    ever_connected: bool,
    next_connect: Instant,
    backoff: Duration,
    /// Framed batch (stream) and frame start offsets.
    framed: Vec<u8>,
    frames: Vec<usize>,
    /// `(batch fingerprint, bytes of `framed` written)` (stream), or
    /// `(fingerprint, byte offset of the next message in the batch)`
    /// (datagram), after a failure.
    resume: Option<(u64, usize)>,
    /// Stream bytes written on the current connection (the last
    /// [`HISTORY_BYTES`] or so), with frame starts and the end of the last
    /// complete frame, to replay what the receiver never acknowledged.
    hist: Vec<u8>,
    hist_frames: VecDeque<usize>,
    hist_complete: usize,
    /// Bytes (whole frames, the last possibly continued by the batch being
    /// retried) to send first on the next connection, and frame starts.
    replay: Vec<u8>,
    replay_frames: Vec<usize>,
    closed: bool,
    counters: Arc<SyslogCounters>,
}

/// Stream history kept for replay: more than the largest TCP send buffer
/// Linux grants by default (4 MiB).
const HISTORY_BYTES: usize = 8 << 20;

impl SyslogSink {
    /// Creates the sink and tries to connect once; a receiver that is not
    /// up yet is not an error (the first batch retries), but a bad option
    /// is.
    ///
    /// Errors: `InvalidInput` for `max_datagram_bytes` of 0 or above
    /// 65507, or a zero backoff or timeout.
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
        let mut s = Self {
            backoff: Duration::from_millis(opts.reconnect_min_ms),
            opts,
            conn: None,
            ever_connected: false,
            next_connect: Instant::now(),
            framed: Vec::new(),
            frames: Vec::new(),
            resume: None,
            hist: Vec::new(),
            hist_frames: VecDeque::new(),
            hist_complete: 0,
            replay: Vec::new(),
            replay_frames: Vec::new(),
            closed: false,
            counters: Arc::new(SyslogCounters::default()),
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
        match self.connect() {
            Ok(c) => {
                self.conn = Some(c);
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

    /// Drops a broken connection. For streams, the bytes its send queue
    /// still held (`SIOCOUTQ`: never acknowledged by the receiver's TCP)
    /// are queued for replay on the next connection, from the start of the
    /// first frame they touch; whatever of them fell out of the history is
    /// counted as lost.
    fn disconnect(&mut self) {
        let Some(c) = self.conn.take() else { return };
        bump(&self.counters.disconnects, 1);
        if !matches!(c, Conn::Tcp(_) | Conn::UnixStream(_)) {
            return;
        }
        let mut queued: libc::c_int = 0;
        // SAFETY: SIOCOUTQ (= TIOCOUTQ) writes one int through the valid
        // pointer; the descriptor is open (owned by `c`).
        let r = unsafe { libc::ioctl(c.fd(), libc::TIOCOUTQ, &mut queued) };
        let queued = if r == 0 { queued.max(0) as usize } else { 0 };
        drop(c);
        let len = self.hist.len();
        if queued > len {
            bump(&self.counters.unacked_bytes_lost, (queued - len) as u64);
        }
        let acked = len.saturating_sub(queued);
        // Replay from the frame containing the first unacknowledged byte;
        // an incomplete last frame is replayed whole (the receiver drops a
        // frame cut by the connection's end).
        let start = if acked >= self.hist_complete {
            self.hist_complete
        } else {
            let i = self.hist_frames.partition_point(|&f| f <= acked);
            if i == 0 {
                self.hist_frames.front().copied().unwrap_or(len)
            } else {
                self.hist_frames[i - 1]
            }
        };
        let mut replay: Vec<u8> = self.hist[start..].to_vec();
        let mut frames: Vec<usize> = self
            .hist_frames
            .iter()
            .filter(|&&f| f >= start)
            .map(|&f| f - start)
            .collect();
        if !replay.is_empty() {
            bump(&self.counters.replayed_bytes, replay.len() as u64);
            bump(&self.counters.replayed_frames, frames.len() as u64);
        }
        // Anything not yet sent from an earlier replay follows.
        let base = replay.len();
        frames.extend(self.replay_frames.iter().map(|&f| f + base));
        replay.extend_from_slice(&self.replay);
        self.replay = replay;
        self.replay_frames = frames;
        self.hist.clear();
        self.hist_frames.clear();
        self.hist_complete = 0;
    }

    /// Appends `bytes[from..to]` (written to the connection) to the
    /// history; `frames` are the frame starts within `bytes`, whose last
    /// frame ends at `bytes.len()`.
    fn record(&mut self, bytes: &[u8], frames: &[usize], from: usize, to: usize) {
        let base = self.hist.len();
        let lo = frames.partition_point(|&f| f < from);
        let hi = frames.partition_point(|&f| f < to);
        self.hist_frames
            .extend(frames[lo..hi].iter().map(|&f| base + f - from));
        self.hist.extend_from_slice(&bytes[from..to]);
        // End of the last complete frame within what is written so far.
        let complete = if to == bytes.len() {
            Some(to)
        } else {
            frames[..hi].last().copied()
        };
        if let Some(c) = complete.filter(|&c| c >= from) {
            self.hist_complete = base + c - from;
        }
        if self.hist.len() > HISTORY_BYTES {
            // Keep the newest half, cut at a frame start.
            let want = self.hist.len() - HISTORY_BYTES / 2;
            let i = self.hist_frames.partition_point(|&f| f < want);
            if let Some(&cut) = self.hist_frames.get(i) {
                self.hist.drain(..cut);
                self.hist_frames.drain(..i);
                for f in self.hist_frames.iter_mut() {
                    *f -= cut;
                }
                self.hist_complete = self.hist_complete.saturating_sub(cut);
            }
        }
    }

    /// Writes all of `bytes` to the stream connection, recording what was
    /// written. Returns the bytes written and the error that stopped it.
    fn send_stream(
        &mut self,
        bytes: &[u8],
        frames: &[usize],
        mut done: usize,
    ) -> (usize, io::Result<()>) {
        while done < bytes.len() {
            let r = match self.conn.as_mut() {
                Some(Conn::Tcp(s)) => s.write(&bytes[done..]),
                Some(Conn::UnixStream(s)) => s.write(&bytes[done..]),
                _ => Err(io::Error::from(io::ErrorKind::NotConnected)),
            };
            match r {
                Ok(0) => return (done, Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => {
                    self.record(bytes, frames, done, done + n);
                    done += n;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return (done, Err(e)),
            }
        }
        (done, Ok(()))
    }

    /// For stream transports: true when the receiver has closed the
    /// connection (readable and `recv(MSG_PEEK)` returns 0, or an error).
    fn peer_closed(&self) -> bool {
        let Some(c) = &self.conn else { return false };
        if !matches!(c, Conn::Tcp(_) | Conn::UnixStream(_)) {
            return false;
        }
        let mut p = libc::pollfd {
            fd: c.fd(),
            events: libc::POLLIN | libc::POLLRDHUP,
            revents: 0,
        };
        // SAFETY: one valid pollfd, zero timeout.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        if n <= 0 {
            return false;
        }
        if p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0 {
            return true;
        }
        let mut b = [0u8; 1];
        // SAFETY: recv into a 1-byte stack buffer we own; MSG_PEEK leaves
        // the data queued, MSG_DONTWAIT never blocks.
        let r = unsafe {
            libc::recv(
                c.fd(),
                b.as_mut_ptr().cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        r == 0
    }

    fn frame(&mut self, batch: &[u8]) {
        self.framed.clear();
        self.frames.clear();
        let mut start = 0;
        while start < batch.len() {
            let end = memchr::memchr(b'\n', &batch[start..]).map_or(batch.len(), |i| start + i);
            let msg = &batch[start..end];
            if !msg.is_empty() {
                self.frames.push(self.framed.len());
                self.framed
                    .extend_from_slice(itoa::Buffer::new().format(msg.len()).as_bytes());
                self.framed.push(b' ');
                self.framed.extend_from_slice(msg);
            }
            start = end + 1;
        }
    }

    fn write_stream(&mut self, batch: &[u8], fp: u64) -> Result<Accepted, SinkError> {
        let start = match self.resume.take() {
            Some((f, done)) if f == fp => done,
            _ => 0,
        };
        if start == 0 {
            self.frame(batch);
        }
        if !self.replay.is_empty() {
            let replay = std::mem::take(&mut self.replay);
            let frames = std::mem::take(&mut self.replay_frames);
            let (n, r) = self.send_stream(&replay, &frames, 0);
            if let Err(e) = r {
                // Keep the unsent rest; `disconnect` puts the unacknowledged
                // part of what was sent in front of it.
                let k = frames.partition_point(|&f| f < n);
                self.replay_frames = frames[k..].iter().map(|&f| f - n).collect();
                self.replay = replay[n..].to_vec();
                return self.stream_broke(fp, start, e);
            }
        }
        let framed = std::mem::take(&mut self.framed);
        let frames = std::mem::take(&mut self.frames);
        let (done, r) = self.send_stream(&framed, &frames, start);
        self.framed = framed;
        self.frames = frames;
        if let Err(e) = r {
            return self.stream_broke(fp, done, e);
        }
        bump(&self.counters.messages, self.frames.len() as u64);
        Ok(Accepted::Delivered)
    }

    /// A stream write failed after `done` bytes of `framed`. A timeout
    /// keeps the connection and resumes exactly there; anything else drops
    /// the connection (queueing the unacknowledged bytes for replay) and
    /// resumes there on the next one.
    fn stream_broke(&mut self, fp: u64, done: usize, e: io::Error) -> Result<Accepted, SinkError> {
        let timed_out = matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        );
        if !timed_out {
            self.disconnect();
        }
        self.resume = Some((fp, done));
        Err(SinkError::Retryable(e))
    }

    fn write_dgram(&mut self, batch: &[u8], fp: u64) -> Result<Accepted, SinkError> {
        let mut start = match self.resume.take() {
            Some((f, at)) if f == fp => at,
            _ => 0,
        };
        let max = self.opts.max_datagram_bytes;
        let mut sent = 0u64;
        while start < batch.len() {
            let end = memchr::memchr(b'\n', &batch[start..]).map_or(batch.len(), |i| start + i);
            let mut msg = &batch[start..end];
            if msg.is_empty() {
                start = end + 1;
                continue;
            }
            if msg.len() > max {
                msg = &msg[..max];
                bump(&self.counters.truncated, 1);
            }
            let r = match self.conn.as_ref() {
                Some(Conn::Udp(s)) => s.send(msg),
                Some(Conn::UnixDgram(s)) => s.send(msg),
                _ => unreachable!("datagram transport"),
            };
            match r {
                Ok(_) => {
                    sent += 1;
                    start = end + 1;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    bump(&self.counters.messages, sent);
                    self.resume = Some((fp, start));
                    // A unix receiver gone (ECONNREFUSED/ENOENT) or UDP's
                    // ICMP port unreachable: reconnect on the retry.
                    if !matches!(e.raw_os_error(), Some(libc::ENOBUFS | libc::EAGAIN)) {
                        self.disconnect();
                    }
                    return Err(SinkError::Retryable(e));
                }
            }
        }
        bump(&self.counters.messages, sent);
        Ok(Accepted::Delivered)
    }
}

impl Sink for SyslogSink {
    fn describe(&self) -> String {
        match &self.opts.transport {
            SyslogTransport::Udp(a) => format!("syslog udp {a}"),
            SyslogTransport::Tcp(a) => format!("syslog tcp {a}"),
            SyslogTransport::UnixDatagram(p) => format!("syslog unix-dgram {}", p.display()),
            SyslogTransport::UnixStream(p) => format!("syslog unix-stream {}", p.display()),
        }
    }

    fn write_batch(&mut self, batch: &[u8]) -> Result<Accepted, SinkError> {
        if self.closed {
            return Err(SinkError::Permanent(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "syslog sink is closed",
            )));
        }
        if self.peer_closed() {
            self.disconnect();
        }
        self.ensure_connected()?;
        let fp = crate::file::fingerprint(batch);
        match self.opts.transport {
            SyslogTransport::Tcp(_) | SyslogTransport::UnixStream(_) => {
                self.write_stream(batch, fp)
            }
            SyslogTransport::Udp(_) | SyslogTransport::UnixDatagram(_) => {
                self.write_dgram(batch, fp)
            }
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
        if self.conn.is_none() {
            // Reconnect in the background so the next batch finds a
            // connection; failure is counted, not an error of the tick.
            let _ = self.ensure_connected();
        }
        Ok(())
    }

    fn close(&mut self) -> Result<(), SinkError> {
        self.closed = true;
        if let Some(Conn::Tcp(s)) = &self.conn {
            let _ = s.shutdown(std::net::Shutdown::Write);
        }
        self.conn = None;
        Ok(())
    }
}
