//! Taking the formatter's IPFIX stream apart at record boundaries
//! (templates, data records) and packing the records again into the
//! exporter's own messages, for either transport.

use super::*;

pub(super) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

pub(super) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

pub(super) fn bad(m: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, m)
}

/// A template learned from the formatter's stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Tmpl {
    /// The template record as received (id, field count, [scope count,]
    /// field specifiers).
    pub(super) rec: Vec<u8>,
    /// [`TEMPLATE_SET_ID`] or [`OPTIONS_TEMPLATE_SET_ID`].
    pub(super) set_id: u16,
    /// Bytes of one data record.
    pub(super) rec_len: usize,
}

/// Parses one template record at `b[at..end]` of a set with id `set_id`;
/// returns (template id, the template, offset past it).
pub(super) fn parse_template(
    b: &[u8],
    at: usize,
    end: usize,
    set_id: u16,
) -> io::Result<(u16, Tmpl, usize)> {
    let head = if set_id == OPTIONS_TEMPLATE_SET_ID {
        6
    } else {
        4
    };
    if at + head > end {
        return Err(bad(format!("template record cut at byte {at}")));
    }
    let id = be16(b, at);
    let count = be16(b, at + 2) as usize;
    let mut o = at + head;
    let mut rec_len = 0usize;
    for _ in 0..count {
        if o + 4 > end {
            return Err(bad(format!(
                "template {id}: field specifier cut at byte {o}"
            )));
        }
        let ie = be16(b, o);
        let len = be16(b, o + 2);
        if len == 0xffff {
            return Err(bad(format!(
                "template {id}: variable-length element {} is not supported",
                ie & 0x7fff
            )));
        }
        rec_len += len as usize;
        o += 4 + if ie & 0x8000 != 0 { 4 } else { 0 };
    }
    if o > end {
        return Err(bad(format!("template {id}: enterprise number cut")));
    }
    if id < 256 || rec_len == 0 {
        return Err(bad(format!("template {id}: bad id or empty record")));
    }
    Ok((
        id,
        Tmpl {
            rec: b[at..o].to_vec(),
            set_id,
            rec_len,
        },
        o,
    ))
}

/// One message the exporter built.
#[derive(Clone, Debug, Default)]
pub(super) struct Msg {
    pub(super) bytes: Vec<u8>,
    /// Data records of the log in it (options records excluded).
    pub(super) records: u64,
    /// Offset in the batch just past the last record (data or options
    /// record) it holds (0: none).
    pub(super) in_end: usize,
    /// Template ids of its data sets.
    pub(super) uses: Vec<u16>,
    /// It carries template sets.
    pub(super) templates: bool,
    /// Batch it belongs to (TCP ledger).
    pub(super) batch: u64,
    /// TCP: stream position just past it on the current connection.
    pub(super) end: u64,
}

/// Packs records into messages of at most `max` bytes.
pub(super) struct Packer<'a> {
    pub(super) max: usize,
    pub(super) out: Vec<Msg>,
    pub(super) cur: Option<Msg>,
    pub(super) set_start: usize,
    pub(super) set_id: u16,
    pub(super) domain: u32,
    pub(super) seqs: &'a mut HashMap<u32, u32>,
}

impl<'a> Packer<'a> {
    /// An empty packer of messages of at most `max` bytes, starting in
    /// observation domain `domain`, numbering with `seqs`.
    pub(super) fn new(max: usize, domain: u32, seqs: &'a mut HashMap<u32, u32>) -> Self {
        Self {
            max,
            out: Vec::new(),
            cur: None,
            set_start: 0,
            set_id: 0,
            domain,
            seqs,
        }
    }

    fn finish(&mut self) {
        if let Some(mut m) = self.cur.take() {
            self.close_set(&mut m);
            let len = m.bytes.len() as u16;
            m.bytes[2..4].copy_from_slice(&len.to_be_bytes());
            self.out.push(m);
        }
    }

    fn close_set(&mut self, m: &mut Msg) {
        if self.set_id != 0 {
            let len = (m.bytes.len() - self.set_start) as u16;
            m.bytes[self.set_start + 2..self.set_start + 4].copy_from_slice(&len.to_be_bytes());
            self.set_id = 0;
        }
    }

    fn start(&mut self, domain: u32, export: u32) {
        self.finish();
        let seq = *self.seqs.entry(domain).or_insert(0);
        let mut b = Vec::with_capacity(self.max);
        b.extend_from_slice(&10u16.to_be_bytes());
        b.extend_from_slice(&16u16.to_be_bytes());
        b.extend_from_slice(&export.to_be_bytes());
        b.extend_from_slice(&seq.to_be_bytes());
        b.extend_from_slice(&domain.to_be_bytes());
        self.domain = domain;
        self.cur = Some(Msg {
            bytes: b,
            ..Msg::default()
        });
    }

    fn room(&self) -> usize {
        self.cur
            .as_ref()
            .map_or(0, |m| self.max.saturating_sub(m.bytes.len()))
    }

    /// Appends `body` to a set with id `set_id` of the open message
    /// (opening the set if the last one is another), which must have room.
    fn put(&mut self, set_id: u16, body: &[u8]) {
        let mut m = self.cur.take().expect("a message is open");
        if self.set_id != set_id {
            self.close_set(&mut m);
            self.set_start = m.bytes.len();
            self.set_id = set_id;
            m.bytes.extend_from_slice(&set_id.to_be_bytes());
            m.bytes.extend_from_slice(&4u16.to_be_bytes());
        }
        m.bytes.extend_from_slice(body);
        self.cur = Some(m);
    }

    /// Space `body` of set `set_id` takes in the open message.
    fn need(&self, set_id: u16, body: usize) -> usize {
        body + if self.set_id == set_id {
            0
        } else {
            SET_HEADER_LEN
        }
    }

    /// Writes every template (template sets, then options template sets)
    /// from the start of the open message on, continuing in new messages
    /// as needed; the last one stays open.
    fn templates(&mut self, tmpls: &BTreeMap<u16, Tmpl>, export: u32) {
        for set_id in [TEMPLATE_SET_ID, OPTIONS_TEMPLATE_SET_ID] {
            for t in tmpls.values().filter(|t| t.set_id == set_id) {
                let has_sets = self
                    .cur
                    .as_ref()
                    .is_some_and(|m| m.bytes.len() > MESSAGE_HEADER_LEN);
                if self.need(set_id, t.rec.len()) > self.room() && has_sets {
                    let d = self.domain;
                    self.start(d, export);
                }
                self.put(set_id, &t.rec);
                if let Some(m) = &mut self.cur {
                    m.templates = true;
                }
            }
        }
    }
}

/// Template sending state of one stream (UDP socket, TCP connection).
#[derive(Debug)]
pub(super) struct TemplateClock {
    /// Template ids sent on this stream (TCP: this connection).
    pub(super) sent: BTreeSet<u16>,
    pub(super) last: Option<Instant>,
    pub(super) messages_since: u64,
}

impl IpfixExporter {
    /// Takes `batch` (whole IPFIX messages from the `ipfix` formatter)
    /// apart and packs its records into this exporter's messages. UDP
    /// messages carry the templates when due; TCP messages none (they are
    /// sent per connection). Records too long for a message are left out
    /// and returned as the second value.
    pub(super) fn pack(&mut self, batch: &[u8]) -> io::Result<(Vec<Msg>, u64)> {
        let udp = self.is_udp();
        let now = Instant::now();
        let max = self.opts.max_message_bytes;
        let fixed_domain = self.opts.observation_domain_id;
        let mut templates_due = udp && self.udp_templates_due(now);
        let mut too_large = 0u64;
        let mut p = Packer::new(max, 0, &mut self.seqs);
        let mut at = 0usize;
        while at < batch.len() {
            if batch.len() - at < MESSAGE_HEADER_LEN || be16(batch, at) != 10 {
                return Err(bad(format!(
                    "not an IPFIX message at byte {at} of the batch: the ipfix sink takes [format] type = \"ipfix\" only"
                )));
            }
            let len = be16(batch, at + 2) as usize;
            if len < MESSAGE_HEADER_LEN || at + len > batch.len() {
                return Err(bad(format!("IPFIX message at byte {at}: bad length {len}")));
            }
            let export = be32(batch, at + 4);
            let domain = fixed_domain.unwrap_or(be32(batch, at + 12));
            let end = at + len;
            let mut o = at + MESSAGE_HEADER_LEN;
            while o + SET_HEADER_LEN <= end {
                let set_id = be16(batch, o);
                let set_len = be16(batch, o + 2) as usize;
                if set_len < SET_HEADER_LEN || o + set_len > end {
                    return Err(bad(format!("IPFIX set at byte {o}: bad length {set_len}")));
                }
                let set_end = o + set_len;
                let mut r = o + SET_HEADER_LEN;
                match set_id {
                    TEMPLATE_SET_ID | OPTIONS_TEMPLATE_SET_ID => {
                        while set_end - r >= 4 {
                            let (id, t, next) = parse_template(batch, r, set_end, set_id)?;
                            if self.templates.get(&id) != Some(&t) {
                                self.templates.insert(id, t);
                                self.clock.sent.remove(&id);
                                if udp {
                                    // Sent before the next record, which may
                                    // use it.
                                    templates_due = true;
                                    p.finish();
                                }
                            }
                            r = next;
                        }
                    }
                    id if id >= 256 => {
                        let Some(t) = self.templates.get(&id) else {
                            return Err(bad(format!(
                                "IPFIX data set {id} at byte {o} without its template"
                            )));
                        };
                        let (rec_len, report) = (t.rec_len, t.set_id == OPTIONS_TEMPLATE_SET_ID);
                        while set_end - r >= rec_len {
                            let rec = &batch[r..r + rec_len];
                            r += rec_len;
                            if MESSAGE_HEADER_LEN + SET_HEADER_LEN + rec_len > max {
                                too_large += u64::from(!report);
                                continue;
                            }
                            let open_other_domain = p.cur.is_some() && p.domain != domain;
                            if p.cur.is_none() || open_other_domain || templates_due {
                                p.start(domain, export);
                                if templates_due {
                                    p.templates(&self.templates, export);
                                    templates_due = false;
                                    self.clock.sent = self.templates.keys().copied().collect();
                                    self.clock.last = Some(now);
                                    // Counted from the message they head
                                    // (the batch's total is added below).
                                    self.clock.messages_since =
                                        0u64.wrapping_sub(p.out.len() as u64);
                                }
                            }
                            if p.need(id, rec_len) > p.room() {
                                p.start(domain, export);
                                let every = self.opts.template_refresh_messages;
                                let sent_since =
                                    self.clock.messages_since.wrapping_add(p.out.len() as u64);
                                if udp && every > 0 && sent_since >= every {
                                    // The message count of RFC 6728's
                                    // templateRefreshPacket.
                                    p.templates(&self.templates, export);
                                    self.clock.last = Some(now);
                                    self.clock.messages_since =
                                        0u64.wrapping_sub(p.out.len() as u64);
                                }
                            }
                            p.put(id, rec);
                            let seq = p.seqs.entry(domain).or_insert(0);
                            *seq = seq.wrapping_add(1);
                            let m = p.cur.as_mut().expect("open");
                            // Past its last record, a drop report's included
                            // (the runtime sees the report landed when a
                            // kept prefix covers it).
                            m.in_end = r;
                            m.records += u64::from(!report);
                            if m.uses.last() != Some(&id) && !m.uses.contains(&id) {
                                m.uses.push(id);
                            }
                        }
                    }
                    _ => {}
                }
                o = set_end;
            }
            at = end;
        }
        p.finish();
        let mut msgs = p.out;
        // A message without a record (templates only) keeps the batch
        // offset of the one before, so kept prefixes stay ordered.
        let mut last_end = 0;
        for m in &mut msgs {
            if m.in_end == 0 {
                m.in_end = last_end;
            }
            last_end = m.in_end;
        }
        if udp {
            self.clock.messages_since = self.clock.messages_since.wrapping_add(msgs.len() as u64);
        }
        if too_large > 0 {
            bump(&self.counters.too_large, too_large);
        }
        Ok((msgs, too_large))
    }
}

/// Every template (or those `only` names), in messages of their own with
/// the header of `before` (its export time, sequence number and domain:
/// templates do not advance the sequence), at most `max` bytes each.
pub(super) fn template_messages(
    templates: &BTreeMap<u16, Tmpl>,
    before: &Msg,
    max: usize,
) -> Vec<Msg> {
    let (domain, export, seq) = (
        be32(&before.bytes, 12),
        be32(&before.bytes, 4),
        be32(&before.bytes, 8),
    );
    let mut seqs = HashMap::from([(domain, seq)]);
    let mut p = Packer::new(max, domain, &mut seqs);
    p.start(domain, export);
    p.templates(templates, export);
    p.finish();
    for t in &mut p.out {
        t.batch = before.batch;
        // No record: they add nothing to a kept prefix.
        t.in_end = 0;
    }
    p.out
}
