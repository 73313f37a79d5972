//! Datagram transports (UDP, RFC 5426; unix datagram): one message a
//! datagram, resumed after a retryable error, ICMP refusals taken back.

use super::*;

/// Where a datagram batch stands: how far it got and its outcomes so far,
/// kept across the retries of a retryable error.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct DgramResume {
    /// Fingerprint of the batch.
    pub(super) fp: u64,
    /// Byte offset of the next line not taken yet.
    pub(super) at: usize,
    /// Byte offset of a line sent before whose UDP datagram the
    /// receiver's host refused (ICMP port unreachable): sent again before
    /// the line at `at`. Set only with a new socket to come, so when it
    /// is set `last` is None.
    pub(super) resend: Option<usize>,
    /// Byte offset of the last line of this batch sent on the current UDP
    /// socket and still counted sent (None: none, or taken back): the one
    /// an ICMP error reported by the socket is about.
    pub(super) last: Option<usize>,
    /// Records sent (and empty lines), their bytes, and records refused as
    /// too large.
    pub(super) ok: u64,
    pub(super) ok_bytes: u64,
    pub(super) too_large: u64,
    /// Byte offset of the first line of this batch refused as too large
    /// (a kept prefix of a batch given up on ends before it).
    pub(super) first_too_large: Option<usize>,
}

/// The datagram line of `batch` that starts at `start`: the offset of
/// the `\n` that ends it (the batch's length for a last line without
/// one), the records it counts (1, or 0 for an in-band report)
/// and the batch bytes it takes (with its `\n`).
pub(super) fn dgram_line(
    batch: &[u8],
    reports: &[Range<usize>],
    start: usize,
) -> (usize, u64, u64) {
    let end = memchr::memchr(b'\n', &batch[start..]).map_or(batch.len(), |i| start + i);
    let record = u64::from(!in_report(reports, start));
    (end, record, ((end + 1).min(batch.len()) - start) as u64)
}

/// Datagram transports: sending, refusals and what a given-up batch kept.
impl SyslogSink {
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
    pub(super) fn write_dgram(
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
    pub(super) fn udp_pending_error(&self) -> io::Result<Option<io::Error>> {
        match self.conn.as_ref() {
            Some(Conn::Udp(s)) => s.take_error(),
            _ => Ok(None),
        }
    }

    pub(super) fn take_back_last(
        &self,
        d: &mut DgramResume,
        batch: &[u8],
        reports: &[Range<usize>],
    ) {
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
    pub(super) fn dgram_retry(&mut self, mut d: DgramResume, sent: u64, e: io::Error) -> SinkError {
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
    pub(super) fn dgram_kept(&mut self, batch: &[u8], reports: &[Range<usize>]) -> Kept {
        let mut d = match self.resume.take() {
            Some(d) if d.fp == crate::accounting::fingerprint(batch) => d,
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
