//! UDP transport (RFC 7011 section 10.3): one message a datagram,
//! templates resent on a timer, a refused batch resumed or kept in part.

use super::*;

/// UDP state: the batch being sent.
#[derive(Default)]
pub(super) struct Udp {
    pub(super) sock: Option<UdpSocket>,
    /// Messages of the batch being sent and the index of the next one.
    pub(super) msgs: Vec<Msg>,
    pub(super) next: usize,
    pub(super) fp: Option<u64>,
    /// Outcomes of the batch so far: sent records and bytes, records
    /// refused for good.
    pub(super) ok: u64,
    pub(super) ok_bytes: u64,
    pub(super) failed: u64,
    /// The first message refused for good, if any (the kept prefix of a
    /// batch given up on ends before it).
    pub(super) first_failed: Option<usize>,
}

/// UDP.
impl IpfixExporter {
    pub(super) fn write_udp(&mut self, batch: &[u8], fp: u64) -> Result<Accepted, SinkError> {
        if self.udp.fp != Some(fp) {
            let (msgs, too_large) = self.pack(batch).map_err(SinkError::Permanent)?;
            self.udp = Udp {
                sock: self.udp.sock.take(),
                msgs,
                next: 0,
                fp: Some(fp),
                failed: too_large,
                ..Udp::default()
            };
        }
        let sock = self.udp.sock.as_ref().expect("UDP socket");
        while self.udp.next < self.udp.msgs.len() {
            let m = &self.udp.msgs[self.udp.next];
            if self.templates_lost && !m.templates {
                // After a refusal: the templates first, in case the
                // collector restarted and lost them.
                let t = template_messages(&self.templates, m, self.opts.max_message_bytes);
                let at = self.udp.next;
                self.udp.msgs.splice(at..at, t);
                continue;
            }
            let r = sock.send(&m.bytes).and_then(|_| match sock.take_error()? {
                // The collector's host answered an earlier datagram or
                // this one with an ICMP error: this one is not counted
                // written.
                Some(e) => Err(e),
                None => Ok(()),
            });
            match r {
                Ok(()) => {
                    bump(&self.counters.messages, 1);
                    bump(&self.counters.records, m.records);
                    bump(&self.counters.template_messages, u64::from(m.templates));
                    if m.templates {
                        self.templates_lost = false;
                    }
                    self.udp.ok += m.records;
                    self.udp.ok_bytes += m.bytes.len() as u64;
                    self.udp.next += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    bump(&self.counters.refused, 1);
                    self.templates_lost = true;
                    let e = SinkError::classify(e);
                    if e.is_retryable() {
                        return Err(e);
                    }
                    // Refused for good (EMSGSIZE, ...): its records are
                    // dropped, the batch goes on.
                    self.udp.failed += m.records;
                    self.udp.first_failed.get_or_insert(self.udp.next);
                    if m.templates {
                        self.clock.last = None;
                    }
                    self.udp.next += 1;
                }
            }
        }
        self.udp.fp = None;
        if self.udp.failed == 0 {
            return Ok(Accepted::Delivered);
        }
        self.backlog += Progress {
            delivered_records: self.udp.ok,
            delivered_bytes: self.udp.ok_bytes,
            failed_records: self.udp.failed,
        };
        Ok(Accepted::Pending)
    }

    /// The messages of the refused batch sent before the refusal (and
    /// before any message refused for good).
    pub(super) fn udp_kept(&mut self, batch: &[u8]) -> Kept {
        if self.udp.fp != Some(crate::accounting::fingerprint(batch)) {
            return Kept::default();
        }
        let upto = self
            .udp
            .next
            .min(self.udp.first_failed.unwrap_or(usize::MAX));
        let sent = &self.udp.msgs[..upto];
        let kept = Kept {
            bytes: sent.iter().map(|m| m.in_end).max().unwrap_or(0),
            records: sent.iter().map(|m| m.records).sum(),
        };
        if self.udp.msgs[self.udp.next..].iter().any(|m| m.templates) {
            // The templates of the messages given up on were not sent.
            self.clock.last = None;
        }
        self.udp.fp = None;
        self.udp.msgs.clear();
        kept
    }
}

impl IpfixExporter {
    /// UDP: templates are due at the start of the next message.
    pub(super) fn udp_templates_due(&self, now: Instant) -> bool {
        let c = &self.clock;
        let every = self.opts.template_refresh_messages;
        self.templates_lost
            || self.templates.keys().any(|id| !c.sent.contains(id))
            || match c.last {
                None => true,
                Some(t) => {
                    now.duration_since(t) >= Duration::from_secs(self.opts.template_refresh_secs)
                }
            }
            || (every > 0 && c.messages_since >= every)
    }
}
