//! RELP (rsyslog's Reliable Event Logging Protocol) over TCP: frames,
//! the session, the window of unacknowledged messages and its
//! acknowledgements.

use super::*;

/// One RELP `syslog` command sent and not yet acknowledged.
pub(super) struct RelpMsg {
    /// The message (the line without its `\n`).
    pub(super) msg: Vec<u8>,
    /// A record (false: an in-band drop report, not counted as a record).
    pub(super) record: bool,
    /// An RFC 5848 block message (`sign`): neither a record nor bytes of
    /// a batch.
    pub(super) control: bool,
    /// Sequence number of the batch it belongs to (see `Relp::batch`).
    pub(super) batch: u64,
    /// Byte offset of its line in that batch.
    pub(super) offset: usize,
    /// Transaction number on the current session (0: not sent on it).
    pub(super) txnr: u32,
}

/// RELP session state and delivery accounting.
#[derive(Default)]
pub(super) struct Relp {
    /// Unacknowledged messages, in send order.
    pub(super) window: VecDeque<RelpMsg>,
    /// Next transaction number (1..=999_999_999, then 1 again).
    pub(super) next_txnr: u32,
    /// Received bytes not yet parsed into whole frames.
    pub(super) rx: Vec<u8>,
    /// Frame being written (scratch).
    pub(super) out: Vec<u8>,
    /// Sequence number of the batch being written (not yet accepted).
    pub(super) batch: u64,
    /// `(fingerprint, byte offset of the next line)` after a retryable
    /// error.
    pub(super) resume: Option<(u64, usize)>,
    /// Outcomes of the batch being written, held until it is accepted (so
    /// a batch the runtime abandons is not also reported written; its
    /// acknowledged records are reported by `kept_of_refused` instead).
    pub(super) held: Progress,
    /// Byte offset of the first line of the batch being written that the
    /// receiver refused (`usize::MAX`: none).
    pub(super) held_refused_at: usize,
    /// Outcomes of accepted batches not yet reported by `poll`.
    pub(super) backlog: Progress,
    /// The last answer whose transaction number is not in the window
    /// (`open`, `close`): `(txnr, data)`.
    pub(super) ctrl: Option<(u32, Vec<u8>)>,
}

/// One parsed RELP frame: bytes it took, transaction number, command,
/// data.
pub(super) type RelpFrame<'a> = (usize, u32, &'a [u8], &'a [u8]);

/// Parses one RELP frame `TXNR SP COMMAND SP DATALEN [SP DATA] LF` at the
/// start of `buf`: `Ok(None)` while it is incomplete. Errors:
/// `InvalidData` for anything else.
pub(super) fn relp_parse(buf: &[u8]) -> io::Result<Option<RelpFrame<'_>>> {
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
pub(super) fn relp_frame(out: &mut Vec<u8>, txnr: u32, cmd: &str, data: &[u8]) {
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

/// Largest RELP transaction number (the spec's 9 digits); it wraps to 1.
pub(super) const RELP_MAX_TXNR: u32 = 999_999_999;

/// RELP: session, window and acknowledgements.
impl SyslogSink {
    pub(super) fn relp_next_txnr(&mut self) -> u32 {
        let t = self.relp.next_txnr;
        self.relp.next_txnr = if t >= RELP_MAX_TXNR { 1 } else { t + 1 };
        t
    }

    /// The session is gone: every unacknowledged message is resent on the
    /// next one.
    pub(super) fn relp_session_lost(&mut self) {
        self.relp.rx.clear();
        for m in self.relp.window.iter_mut() {
            m.txnr = 0;
        }
    }

    pub(super) fn relp_fd(&self) -> io::Result<i32> {
        match &self.conn {
            Some(Conn::Relp(s)) => Ok(s.as_raw_fd()),
            _ => Err(io::Error::from(io::ErrorKind::NotConnected)),
        }
    }

    /// Writes `bytes` whole within `io_timeout_ms`, reading the receiver's
    /// answers meanwhile (so neither side's buffers fill up).
    pub(super) fn relp_send(&mut self, bytes: &[u8]) -> io::Result<()> {
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
    pub(super) fn relp_read(&mut self) -> io::Result<()> {
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
    pub(super) fn relp_parse_rx(&mut self) -> io::Result<()> {
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
    pub(super) fn relp_answer(&mut self, txnr: u32, data: &[u8]) {
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
            delivered_bytes: if ok && !m.control {
                m.msg.len() as u64 + 1
            } else {
                0
            },
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
    pub(super) fn relp_await(&mut self, timeout: Duration) -> io::Result<bool> {
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
    pub(super) fn relp_open(&mut self) -> io::Result<()> {
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
    pub(super) fn relp_abandon_batch(&mut self) {
        let b = self.relp.batch;
        self.relp.window.retain(|m| m.batch != b);
        self.relp.held = Progress::default();
        self.relp.held_refused_at = usize::MAX;
        self.relp.resume = None;
        self.relp.batch += 1;
    }

    /// What the receiver acknowledged of the batch being given up on (see
    /// `kept_of_refused` on the sink); forgets the batch.
    pub(super) fn relp_kept(&mut self, batch: &[u8]) -> Kept {
        let at = match self.relp.resume {
            Some((fp, at)) if fp == crate::accounting::fingerprint(batch) => at.min(batch.len()),
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
    pub(super) fn write_relp(
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
                control: false,
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
    pub(super) fn relp_drain(&mut self, deadline: Instant) -> Result<(), SinkError> {
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
    pub(super) fn relp_close(&mut self) {
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
