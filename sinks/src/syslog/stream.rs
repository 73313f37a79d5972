//! Stream transports (TCP, RFC 6587 octet counting; unix stream): the
//! ledger of frames not yet acknowledged, sending, acknowledgements
//! (`SIOCOUTQ`), replay after a lost connection and the stop's drain.

use super::*;

/// One line of a stream batch in the ledger: framed and queued, sent,
/// or sent and not yet acknowledged by the receiver.
pub(super) struct Frame {
    /// Stream position (bytes framed since the sink started) just past
    /// its last byte.
    pub(super) end: u64,
    /// Framed bytes (`LEN SP MSG`); 0 for an empty line, which has no
    /// frame (nothing is sent) but whose record is reported with the
    /// frames around it.
    pub(super) len: u64,
    /// Bytes of its line in the batch (message and `\n`).
    pub(super) line: u64,
    /// Offset just past its line in its batch.
    pub(super) line_end: usize,
    /// A record (false: an in-band drop report, not counted as a record).
    pub(super) record: bool,
    /// Sequence number of its batch (see `Stream::batch`).
    pub(super) batch: u64,
}

impl Frame {
    pub(super) fn start(&self) -> u64 {
        self.end - self.len
    }
}

/// Stream (TCP, unix stream) delivery ledger: every frame not yet
/// acknowledged, its bytes, and how far the current connection got.
/// Positions count bytes framed since the sink started; the frames are
/// contiguous, the first starting at or after `base`.
#[derive(Default)]
pub(super) struct Stream {
    /// Frames not yet acknowledged, in stream order.
    pub(super) frames: VecDeque<Frame>,
    /// Their bytes; `buf[0]` is at position `base` (bytes before the first
    /// frame are acknowledged, kept until a compaction).
    pub(super) buf: Vec<u8>,
    pub(super) base: u64,
    /// Position up to which bytes were written to the current connection
    /// (while disconnected: the start of the first frame, where the next
    /// connection starts).
    pub(super) sent: u64,
    /// Position up to which the receiver acknowledged them (`<= sent`).
    pub(super) acked: u64,
    /// Sequence number of the batch being written (not yet accepted).
    pub(super) batch: u64,
    /// Fingerprint of the batch being written after a retryable error:
    /// its frames are in the ledger, a retry continues sending them.
    pub(super) resume: Option<u64>,
    /// Non-empty frames of the batch being written (`messages` counter).
    pub(super) batch_msgs: u64,
    /// Acknowledged frames of the batch being written, held until it is
    /// accepted (so a batch the runtime gives up on is reported through
    /// `kept_of_refused`, never also by `poll`), and the offset just past
    /// the last of their lines in it.
    pub(super) held: Progress,
    pub(super) held_bytes: usize,
    /// Acknowledged frames of accepted batches not yet reported by `poll`.
    pub(super) backlog: Progress,
}

impl Stream {
    /// Position just past the last framed byte.
    pub(super) fn end(&self) -> u64 {
        self.base + self.buf.len() as u64
    }

    /// Frees the acknowledged bytes before the first frame: all of them
    /// once every frame is acknowledged (the usual case, O(1)), otherwise
    /// when they are more than half the buffer (amortised O(1) per byte).
    pub(super) fn compact(&mut self) {
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

/// Stream transports: the ledger, sending and acknowledgements.
impl SyslogSink {
    /// [`disconnect`](Self::disconnect), counting as replayed only the
    /// frames that start before stream position `replay_below` (the rest
    /// are about to be given up on).
    pub(super) fn disconnect_replaying(&mut self, replay_below: u64) {
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
    pub(super) fn stream_acks(&mut self) {
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
    pub(super) fn stream_send(&mut self, nonblocking: bool) -> io::Result<()> {
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
    pub(super) fn peer_closed(&self) -> bool {
        let Some(c) = &self.conn else { return false };
        if !matches!(c, Conn::Tcp(_) | Conn::UnixStream(_)) {
            return false;
        }
        crate::tcp::peer_closed(c.fd())
    }

    /// Appends the frames of `batch` (one per line, `LEN SP MSG`; an empty
    /// line has no frame but a zero-length ledger entry, so its record is
    /// still reported) to the ledger, as batch `Stream::batch`.
    pub(super) fn stream_frame(&mut self, batch: &[u8], reports: &[Range<usize>]) {
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
    pub(super) fn write_stream(
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
    pub(super) fn stream_forget_batch(&mut self) -> Kept {
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
    pub(super) fn stream_drain(&mut self, deadline: Instant) -> Result<(), SinkError> {
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
}
