//! TCP transport (RFC 7011 section 10.4): the ledger of messages not
//! yet acknowledged (`SIOCOUTQ`), reconnects and replay, the stop's
//! drain.

use super::*;

/// TCP state: the ledger of messages not yet acknowledged.
#[derive(Default)]
pub(super) struct Tcp {
    pub(super) conn: Option<TcpStream>,
    /// Packed, not yet (fully) written on the current connection.
    pub(super) queue: VecDeque<Msg>,
    /// Bytes of `queue.front()` written on the current connection.
    pub(super) head_written: usize,
    /// Written on the current connection, not yet acknowledged whole.
    pub(super) inflight: VecDeque<Msg>,
    /// Bytes written on the current connection.
    pub(super) written: u64,
    /// Sequence number of the batch being written, and its fingerprint.
    pub(super) batch: u64,
    pub(super) fp: Option<u64>,
    /// Acknowledged records of the batch being written (held until it is
    /// accepted) and the batch offset past the last of them.
    pub(super) held: Progress,
    pub(super) held_end: usize,
    pub(super) ever_connected: bool,
    pub(super) next_connect: Option<Instant>,
    pub(super) backoff: Duration,
}

/// TCP.
impl IpfixExporter {
    pub(super) fn tcp_addr(&self) -> SocketAddr {
        match self.opts.transport {
            IpfixTransport::Tcp(a) | IpfixTransport::Udp(a) => a,
        }
    }

    pub(super) fn tcp_connect(&mut self) -> Result<(), SinkError> {
        if self.tcp.conn.is_some() {
            return Ok(());
        }
        let now = Instant::now();
        if self.tcp.next_connect.is_some_and(|t| now < t) {
            return Err(SinkError::Retryable(io::Error::new(
                io::ErrorKind::NotConnected,
                "IPFIX collector unreachable; waiting to reconnect",
            )));
        }
        let timeout = Duration::from_millis(self.opts.io_timeout_ms);
        let r = TcpStream::connect_timeout(&self.tcp_addr(), timeout).and_then(|s| {
            s.set_write_timeout(Some(timeout))?;
            s.set_nodelay(true)?;
            Ok(s)
        });
        match r {
            Ok(s) => {
                if self.tcp.ever_connected {
                    bump(&self.counters.reconnects, 1);
                }
                self.tcp.ever_connected = true;
                self.tcp.conn = Some(s);
                self.tcp.written = 0;
                self.tcp.head_written = 0;
                self.clock.sent.clear();
                self.tcp.backoff = Duration::from_millis(self.opts.reconnect_min_ms);
                self.tcp.next_connect = None;
                Ok(())
            }
            Err(e) => {
                bump(&self.counters.connect_failures, 1);
                self.tcp.next_connect = Some(now + self.tcp.backoff);
                self.tcp.backoff =
                    (self.tcp.backoff * 2).min(Duration::from_millis(self.opts.reconnect_max_ms));
                Err(SinkError::Retryable(e))
            }
        }
    }

    /// Books the messages the collector's TCP acknowledged whole.
    pub(super) fn tcp_acks(&mut self) {
        let Some(c) = &self.tcp.conn else { return };
        if self.tcp.inflight.is_empty() {
            return;
        }
        let Some(q) = unacked_bytes(c.as_raw_fd()) else {
            return;
        };
        let acked = self.tcp.written.saturating_sub(q);
        let mut n = 0;
        while self.tcp.inflight.front().is_some_and(|m| m.end <= acked) {
            let m = self.tcp.inflight.pop_front().expect("front exists");
            n += 1;
            let p = Progress {
                delivered_records: m.records,
                delivered_bytes: m.bytes.len() as u64,
                failed_records: 0,
            };
            if self.tcp.fp.is_some() && m.batch == self.tcp.batch {
                self.tcp.held += p;
                self.tcp.held_end = self.tcp.held_end.max(m.in_end);
            } else {
                self.backlog += p;
            }
        }
        bump(&self.counters.acked, n);
    }

    /// Drops the connection if the collector closed it (`poll(2)` and
    /// `MSG_PEEK`, see `crate::tcp::peer_closed`), so what follows
    /// reconnects instead of writing into a dead socket.
    pub(super) fn tcp_drop_if_peer_closed(&mut self) {
        if self
            .tcp
            .conn
            .as_ref()
            .is_some_and(|c| peer_closed(c.as_raw_fd()))
        {
            self.tcp_disconnect();
        }
    }

    /// Drops the connection: the acknowledgements that arrived are booked,
    /// then every message not acknowledged whole goes back to the queue to
    /// be sent again on the next connection; a connection whose send queue
    /// still holds bytes is reset so they never arrive after their replay.
    pub(super) fn tcp_disconnect(&mut self) {
        self.tcp_acks();
        let Some(c) = self.tcp.conn.take() else {
            return;
        };
        if !self.tcp.inflight.is_empty() || self.tcp.head_written > 0 {
            bump(&self.counters.resets, 1);
            set_linger_zero(c.as_raw_fd());
        }
        let replay = self.tcp.inflight.len() as u64 + u64::from(self.tcp.head_written > 0);
        bump(&self.counters.replayed, replay);
        while let Some(m) = self.tcp.inflight.pop_back() {
            self.tcp.queue.push_front(m);
        }
        self.tcp.head_written = 0;
        self.tcp.written = 0;
        self.clock.sent.clear();
    }

    /// Writes `bytes[from..]` to the connection; returns the bytes written
    /// (all, or fewer with the error that stopped it).
    pub(super) fn tcp_write(c: &mut TcpStream, bytes: &[u8]) -> (usize, Option<io::Error>) {
        let mut n = 0;
        while n < bytes.len() {
            match c.write(&bytes[n..]) {
                Ok(0) => return (n, Some(io::ErrorKind::WriteZero.into())),
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return (n, Some(e)),
            }
        }
        (n, None)
    }

    /// Writes the queued messages to the connection, each preceded by the
    /// templates it uses that this connection has not had yet.
    pub(super) fn tcp_flush_queue(&mut self) -> io::Result<()> {
        while let Some(front) = self.tcp.queue.front() {
            if self.tcp.conn.is_none() {
                return Err(io::ErrorKind::NotConnected.into());
            }
            let missing = self.tcp.head_written == 0
                && front.uses.iter().any(|id| !self.clock.sent.contains(id));
            if missing {
                // Every template the exporter knows and the connection
                // lacks, in messages of their own before it.
                let tm: BTreeMap<u16, Tmpl> = self
                    .templates
                    .iter()
                    .filter(|(id, _)| !self.clock.sent.contains(id))
                    .map(|(id, t)| (*id, t.clone()))
                    .collect();
                let t = template_messages(&tm, front, self.opts.max_message_bytes);
                for m in t.into_iter().rev() {
                    self.tcp.queue.push_front(m);
                }
                self.clock.sent.extend(tm.keys());
                continue;
            }
            let from = self.tcp.head_written;
            let c = self.tcp.conn.as_mut().expect("connected");
            let (n, err) = Self::tcp_write(c, &front.bytes[from..]);
            self.tcp.head_written += n;
            self.tcp.written += n as u64;
            if let Some(e) = err {
                return Err(e);
            }
            let mut m = self.tcp.queue.pop_front().expect("front exists");
            self.tcp.head_written = 0;
            m.end = self.tcp.written;
            bump(&self.counters.messages, 1);
            bump(&self.counters.records, m.records);
            bump(&self.counters.template_messages, u64::from(m.templates));
            self.tcp.inflight.push_back(m);
        }
        Ok(())
    }

    pub(super) fn write_tcp(&mut self, batch: &[u8], fp: u64) -> Result<Accepted, SinkError> {
        if self.tcp.fp != Some(fp) {
            let (msgs, too_large) = self.pack(batch).map_err(SinkError::Permanent)?;
            self.tcp.batch += 1;
            self.tcp.fp = Some(fp);
            self.tcp.held = Progress {
                failed_records: too_large,
                ..Progress::default()
            };
            self.tcp.held_end = 0;
            let b = self.tcp.batch;
            self.tcp.queue.extend(msgs.into_iter().map(|mut m| {
                m.batch = b;
                m
            }));
        }
        self.tcp_drop_if_peer_closed();
        self.tcp_connect()?;
        if let Err(e) = self.tcp_flush_queue() {
            if e.kind() != io::ErrorKind::WouldBlock {
                self.tcp_disconnect();
            }
            return Err(SinkError::Retryable(e));
        }
        // Accepted: its acknowledged records are reported by `poll`.
        self.tcp.fp = None;
        self.backlog += std::mem::take(&mut self.tcp.held);
        self.tcp_acks();
        Ok(Accepted::Pending)
    }

    /// The acknowledged messages of the refused batch; its others leave
    /// the ledger unsent (a connection carrying some is reset).
    pub(super) fn tcp_forget_batch(&mut self) -> Kept {
        if self.tcp.fp.is_none() {
            return Kept::default();
        }
        self.tcp_acks();
        let b = self.tcp.batch;
        let on_wire = self.tcp.inflight.iter().any(|m| m.batch == b)
            || (self.tcp.head_written > 0 && self.tcp.queue.front().is_some_and(|m| m.batch == b));
        if on_wire {
            if let Some(c) = &self.tcp.conn {
                set_linger_zero(c.as_raw_fd());
            }
            // The other batches' unacknowledged messages are replayed.
            self.tcp_disconnect();
        }
        let before = self.tcp.queue.len();
        self.tcp.queue.retain(|m| m.batch != b);
        bump(
            &self.counters.abandoned,
            (before - self.tcp.queue.len()) as u64,
        );
        let held = std::mem::take(&mut self.tcp.held);
        let kept = Kept {
            bytes: self.tcp.held_end,
            records: held.delivered_records,
        };
        self.tcp.fp = None;
        kept
    }

    pub(super) fn tcp_drain(&mut self, deadline: Instant) -> Result<(), SinkError> {
        loop {
            self.tcp_drop_if_peer_closed();
            if !self.tcp.queue.is_empty() && self.tcp_connect().is_ok() {
                if let Err(e) = self.tcp_flush_queue() {
                    if e.kind() != io::ErrorKind::WouldBlock {
                        self.tcp_disconnect();
                    }
                }
            }
            self.tcp_acks();
            if self.tcp.queue.is_empty() && self.tcp.inflight.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(SinkError::Retryable(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "IPFIX collector did not acknowledge every message before the deadline",
                )));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
