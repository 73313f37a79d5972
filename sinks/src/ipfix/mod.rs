//! The IPFIX exporter: an IPFIX Exporting Process (RFC 7011) that sends
//! the `ipfix` format's records to a Collecting Process over UDP (RFC 7011
//! section 10.3) or TCP (section 10.4).
//!
//! # Where the messages come from
//!
//! A sink receives formatted batches, and the consumer's `[format] type =
//! "ipfix"` formatter already turns records into RFC 7011 messages (its
//! templates, enterprise elements and event-time stamping, the bytes of
//! an IPFIX file). The exporter does not format a second time: it takes
//! that byte stream apart at record boundaries (message header, sets,
//! template records, data records, whose lengths the templates give) and
//! packs the records again into messages of its own, so that what goes on
//! the wire is the exporter's business and the file format stays one:
//! - one message per datagram, at most
//!   [`IpfixExporterOptions::max_message_bytes`] (a record is never split;
//!   a record longer than a whole message is refused and counted,
//!   [`IpfixCounters::too_large`]);
//! - the message header (section 3.1) is the exporter's: the export time
//!   of the formatter's message the first record came from, the
//!   Observation Domain ID of the settings (or the formatter's), and a
//!   sequence number per Observation Domain that counts the Data Records
//!   (options data records included) put in messages before this one;
//! - templates go out as the transport asks (section 8.4), not where the
//!   formatter put them: over UDP at the start of the first message, then
//!   again once [`IpfixExporterOptions::template_refresh_secs`] have
//!   passed or [`IpfixExporterOptions::template_refresh_messages`]
//!   messages have been sent since the last time (and at once when the
//!   stream brings a template not sent yet, e.g. the drop reports' options
//!   template); over TCP once per connection, before the first message
//!   that uses them, and again on every new connection.
//!
//! Drop reports reach the exporter as the format writes them: Exporting
//! Process Reliability Statistics options records (RFC 7011 section 4.3,
//! `dplog_formatters::ipfix`), whose template is an options template (set
//! id 3). They are sent like data records but are not records of the log:
//! they count neither written nor dropped. They do advance the sequence
//! number (section 3.1 counts every Data Record; only template records do
//! not), which nfcapd 1.7.1 does not expect: it counts one sequence failure
//! per message after a drop report (and stores every record).
//!
//! # What "written" means
//!
//! - UDP: a connected socket, so that the kernel reports an ICMP port
//!   unreachable from the collector's host. A message counts written when
//!   `send(2)` took it and the socket holds no pending error afterwards
//!   (`SO_ERROR`, read after every datagram: on loopback the ICMP error of
//!   a closed port is already there). A datagram refused (ECONNREFUSED,
//!   ENOBUFS, EAGAIN) makes the batch retryable: the runtime retries it
//!   with backoff, the exporter resending from the refused message; a
//!   batch the runtime gives up on counts its messages sent before the
//!   refusal written ([`Sink::kept_of_refused`]) and the rest
//!   `dropped_sink`. A datagram refused for good (EMSGSIZE, ...) has its
//!   records counted dropped and the rest of the batch goes on. UDP itself
//!   still loses datagrams unseen (a full receive buffer at the collector;
//!   an ICMP error from a remote host that arrives after the next send is
//!   taken for that send's), and the sequence numbers let the collector
//!   see such gaps (records of refused messages leave a gap too).
//! - TCP: as the syslog sink's TCP path: a message counts written when the
//!   collector's TCP acknowledged all of its bytes (`ioctl(SIOCOUTQ)`, one
//!   per `poll`), not when `write(2)` took it. After a lost connection the
//!   messages not acknowledged whole are sent again on the next one,
//!   after the templates; still unacknowledged at the shutdown deadline
//!   they count `dropped_shutdown`; of a batch the runtime gives up on,
//!   the acknowledged messages count written and the rest are removed
//!   unsent (a connection carrying some is reset). IPFIX over TCP has no
//!   application acknowledgement: messages the collector's kernel took
//!   but the collector had not processed when it died are lost yet counted
//!   written.

#[cfg(feature = "config")]
pub mod config;
#[cfg(feature = "config")]
pub use config::IpfixSinkConfig;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dplog_core::{Accepted, Kept, Progress, Sink, SinkError};

use crate::tcp::{peer_closed, set_linger_zero, unacked_bytes};

/// IPFIX message header length (RFC 7011 section 3.1).
pub const MESSAGE_HEADER_LEN: usize = 16;
/// Set header length (RFC 7011 section 3.3.2).
pub const SET_HEADER_LEN: usize = 4;
/// Set id of a template set.
pub const TEMPLATE_SET_ID: u16 = 2;
/// Set id of an options template set.
pub const OPTIONS_TEMPLATE_SET_ID: u16 = 3;
/// The IANA port for IPFIX over UDP and TCP (RFC 7011 section 10).
pub const IPFIX_PORT: u16 = 4739;
/// Largest UDP payload over IPv4 (65535 - 20 - 8).
pub const MAX_UDP_PAYLOAD: usize = 65_507;

/// Where messages go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpfixTransport {
    /// One message per datagram (RFC 7011 section 10.3).
    Udp(SocketAddr),
    /// A stream of messages (RFC 7011 section 10.4).
    Tcp(SocketAddr),
}

/// Exporter settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpfixExporterOptions {
    /// Transport and collector address.
    pub transport: IpfixTransport,
    /// Largest IPFIX message (the UDP payload) in bytes, 256..=65507
    /// (UDP) or 256..=65535 (TCP); a template record longer than a whole
    /// message still goes out whole, in a message of its own. Default 1400, which fits a 1500-byte Ethernet
    /// MTU under IPv6 (40) or IPv4 (20) and UDP (8) headers with room for
    /// tunnels; RFC 7011 section 10.3.3 asks for messages within the path
    /// MTU.
    pub max_message_bytes: usize,
    /// UDP: templates are sent again once this many seconds have passed
    /// since they were last sent (RFC 7011 section 8.4,
    /// templateRefreshTimeout). Default 60; at least 1.
    pub template_refresh_secs: u64,
    /// UDP: templates are sent again after this many messages (RFC 6728's
    /// templateRefreshPacket); 0: by time only. Default 1000.
    pub template_refresh_messages: u64,
    /// The Observation Domain ID of every message; `None` (default): the
    /// formatter's (`[format.ipfix] observation_domain_id`).
    pub observation_domain_id: Option<u32>,
    /// TCP: first reconnect backoff, in ms (doubles up to
    /// `reconnect_max_ms`). Default 10.
    pub reconnect_min_ms: u64,
    /// TCP: longest reconnect backoff, in ms. Default 2000.
    pub reconnect_max_ms: u64,
    /// TCP: connect and write timeout in ms; a collector that stops
    /// reading this long makes the batch retryable. Default 1000.
    pub io_timeout_ms: u64,
}

impl IpfixExporterOptions {
    /// Defaults for `transport`.
    pub fn new(transport: IpfixTransport) -> Self {
        Self {
            transport,
            max_message_bytes: 1400,
            template_refresh_secs: 60,
            template_refresh_messages: 1000,
            observation_domain_id: None,
            reconnect_min_ms: 10,
            reconnect_max_ms: 2000,
            io_timeout_ms: 1000,
        }
    }
}

/// Counters of one exporter (written by the consumer thread only;
/// Relaxed statistics, exact after the logger's shutdown joined it).
#[derive(Debug, Default)]
pub struct IpfixCounters {
    /// Messages handed to the kernel whole (datagrams sent, messages
    /// written to a connection; first sends only).
    pub messages: AtomicU64,
    /// Data records in those messages (options records excluded).
    pub records: AtomicU64,
    /// Messages that carried templates (a template set or options
    /// template set).
    pub template_messages: AtomicU64,
    /// UDP datagrams the kernel refused (ECONNREFUSED after an ICMP port
    /// unreachable, ENOBUFS, EMSGSIZE, ...), each refusal once.
    pub refused: AtomicU64,
    /// Records longer than a whole message: never sent, counted dropped.
    pub too_large: AtomicU64,
    /// TCP: successful connects after the first.
    pub reconnects: AtomicU64,
    /// TCP: failed connect attempts.
    pub connect_failures: AtomicU64,
    /// TCP: messages sent again on a new connection because the last one
    /// broke before the collector's TCP acknowledged them.
    pub replayed: AtomicU64,
    /// TCP: messages the collector's TCP acknowledged whole.
    pub acked: AtomicU64,
    /// TCP: messages of batches the runtime gave up on, removed
    /// unacknowledged.
    pub abandoned: AtomicU64,
    /// TCP: connections reset (`SO_LINGER` 0) because their send queue
    /// held bytes that must not arrive (given up on, or closed
    /// unacknowledged).
    pub resets: AtomicU64,
}

impl IpfixCounters {
    /// Reads one counter (Relaxed).
    pub fn get(c: &AtomicU64) -> u64 {
        // Relaxed: statistic (see the type docs).
        c.load(Ordering::Relaxed)
    }
}

impl dplog_core::SinkCounters for IpfixCounters {
    fn named(&self) -> Vec<(String, u64)> {
        let g = IpfixCounters::get;
        [
            ("messages", g(&self.messages)),
            ("records", g(&self.records)),
            ("template_messages", g(&self.template_messages)),
            ("refused", g(&self.refused)),
            ("too_large", g(&self.too_large)),
            ("reconnects", g(&self.reconnects)),
            ("connect_failures", g(&self.connect_failures)),
            ("replayed", g(&self.replayed)),
            ("acked", g(&self.acked)),
            ("abandoned", g(&self.abandoned)),
            ("resets", g(&self.resets)),
        ]
        .into_iter()
        .map(|(n, v)| (format!("ipfix.{n}"), v))
        .collect()
    }
}

fn bump(c: &AtomicU64, n: u64) {
    // Relaxed: single-writer statistic (see `IpfixCounters`).
    c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn bad(m: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, m)
}

/// A template learned from the formatter's stream.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Tmpl {
    /// The template record as received (id, field count, [scope count,]
    /// field specifiers).
    rec: Vec<u8>,
    /// [`TEMPLATE_SET_ID`] or [`OPTIONS_TEMPLATE_SET_ID`].
    set_id: u16,
    /// Bytes of one data record.
    rec_len: usize,
}

/// Parses one template record at `b[at..end]` of a set with id `set_id`;
/// returns (template id, the template, offset past it).
fn parse_template(b: &[u8], at: usize, end: usize, set_id: u16) -> io::Result<(u16, Tmpl, usize)> {
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
struct Msg {
    bytes: Vec<u8>,
    /// Data records of the log in it (options records excluded).
    records: u64,
    /// Offset in the batch just past the last record (data or options
    /// record) it holds (0: none).
    in_end: usize,
    /// Template ids of its data sets.
    uses: Vec<u16>,
    /// It carries template sets.
    templates: bool,
    /// Batch it belongs to (TCP ledger).
    batch: u64,
    /// TCP: stream position just past it on the current connection.
    end: u64,
}

/// Packs records into messages of at most `max` bytes.
struct Packer<'a> {
    max: usize,
    out: Vec<Msg>,
    cur: Option<Msg>,
    set_start: usize,
    set_id: u16,
    domain: u32,
    seqs: &'a mut HashMap<u32, u32>,
}

impl Packer<'_> {
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
struct TemplateClock {
    /// Template ids sent on this stream (TCP: this connection).
    sent: BTreeSet<u16>,
    last: Option<Instant>,
    messages_since: u64,
}

/// UDP state: the batch being sent.
#[derive(Default)]
struct Udp {
    sock: Option<UdpSocket>,
    /// Messages of the batch being sent and the index of the next one.
    msgs: Vec<Msg>,
    next: usize,
    fp: Option<u64>,
    /// Outcomes of the batch so far: sent records and bytes, records
    /// refused for good.
    ok: u64,
    ok_bytes: u64,
    failed: u64,
    /// The first message refused for good, if any (the kept prefix of a
    /// batch given up on ends before it).
    first_failed: Option<usize>,
}

/// TCP state: the ledger of messages not yet acknowledged.
#[derive(Default)]
struct Tcp {
    conn: Option<TcpStream>,
    /// Packed, not yet (fully) written on the current connection.
    queue: VecDeque<Msg>,
    /// Bytes of `queue.front()` written on the current connection.
    head_written: usize,
    /// Written on the current connection, not yet acknowledged whole.
    inflight: VecDeque<Msg>,
    /// Bytes written on the current connection.
    written: u64,
    /// Sequence number of the batch being written, and its fingerprint.
    batch: u64,
    fp: Option<u64>,
    /// Acknowledged records of the batch being written (held until it is
    /// accepted) and the batch offset past the last of them.
    held: Progress,
    held_end: usize,
    ever_connected: bool,
    next_connect: Option<Instant>,
    backoff: Duration,
}

/// The IPFIX exporter sink; see the module docs.
pub struct IpfixExporter {
    opts: IpfixExporterOptions,
    templates: BTreeMap<u16, Tmpl>,
    /// UDP templates: sent on the socket, last time, messages since.
    clock: TemplateClock,
    seqs: HashMap<u32, u32>,
    udp: Udp,
    tcp: Tcp,
    backlog: Progress,
    /// UDP: a datagram was refused since templates were last sent whole:
    /// the collector may be a new one (restarted), so the next message
    /// sent is preceded by the templates.
    templates_lost: bool,
    closed: bool,
    counters: Arc<IpfixCounters>,
}

impl std::fmt::Debug for IpfixExporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IpfixExporter")
            .field("transport", &self.opts.transport)
            .finish_non_exhaustive()
    }
}

impl IpfixExporter {
    /// Creates the exporter: UDP binds and connects its socket now (an
    /// error is returned); TCP tries to connect once (a collector not up
    /// yet is not an error: the first batch retries).
    ///
    /// Errors: `InvalidInput` for `max_message_bytes` outside 256..=65507
    /// (UDP) or 256..=65535 (TCP), `template_refresh_secs` 0, or a zero
    /// backoff or timeout; the socket's error for UDP.
    pub fn new(opts: IpfixExporterOptions) -> io::Result<Self> {
        let max = match opts.transport {
            IpfixTransport::Udp(_) => MAX_UDP_PAYLOAD,
            IpfixTransport::Tcp(_) => 65_535,
        };
        if !(256..=max).contains(&opts.max_message_bytes) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "max_message_bytes {} is outside 256..={max}",
                    opts.max_message_bytes
                ),
            ));
        }
        if opts.template_refresh_secs == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "template_refresh_secs must be > 0",
            ));
        }
        if opts.reconnect_min_ms == 0 || opts.reconnect_max_ms == 0 || opts.io_timeout_ms == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "reconnect_min_ms, reconnect_max_ms and io_timeout_ms must be > 0",
            ));
        }
        let mut s = Self {
            tcp: Tcp {
                backoff: Duration::from_millis(opts.reconnect_min_ms),
                ..Tcp::default()
            },
            opts,
            templates: BTreeMap::new(),
            clock: TemplateClock {
                sent: BTreeSet::new(),
                last: None,
                messages_since: 0,
            },
            seqs: HashMap::new(),
            udp: Udp::default(),
            backlog: Progress::default(),
            templates_lost: false,
            closed: false,
            counters: Arc::new(IpfixCounters::default()),
        };
        match s.opts.transport {
            IpfixTransport::Udp(addr) => {
                let bind: SocketAddr = if addr.is_ipv4() {
                    "0.0.0.0:0".parse().expect("static address")
                } else {
                    "[::]:0".parse().expect("static address")
                };
                let sock = UdpSocket::bind(bind)?;
                sock.connect(addr)?;
                s.udp.sock = Some(sock);
            }
            IpfixTransport::Tcp(_) => {
                let _ = s.tcp_connect();
            }
        }
        Ok(s)
    }

    /// A handle on the counters.
    pub fn counters(&self) -> Arc<IpfixCounters> {
        self.counters.clone()
    }

    /// The local address of the UDP socket or TCP connection, if any.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match (&self.udp.sock, &self.tcp.conn) {
            (Some(s), _) => s.local_addr().ok(),
            (_, Some(c)) => c.local_addr().ok(),
            _ => None,
        }
    }

    fn is_udp(&self) -> bool {
        matches!(self.opts.transport, IpfixTransport::Udp(_))
    }

    /// UDP: templates are due at the start of the next message.
    fn udp_templates_due(&self, now: Instant) -> bool {
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

    /// Takes `batch` (whole IPFIX messages from the `ipfix` formatter)
    /// apart and packs its records into this exporter's messages. UDP
    /// messages carry the templates when due; TCP messages none (they are
    /// sent per connection). Records too long for a message are left out
    /// and returned as the second value.
    fn pack(&mut self, batch: &[u8]) -> io::Result<(Vec<Msg>, u64)> {
        let udp = self.is_udp();
        let now = Instant::now();
        let max = self.opts.max_message_bytes;
        let fixed_domain = self.opts.observation_domain_id;
        let mut templates_due = udp && self.udp_templates_due(now);
        let mut too_large = 0u64;
        let mut p = Packer {
            max,
            out: Vec::new(),
            cur: None,
            set_start: 0,
            set_id: 0,
            domain: 0,
            seqs: &mut self.seqs,
        };
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
fn template_messages(templates: &BTreeMap<u16, Tmpl>, before: &Msg, max: usize) -> Vec<Msg> {
    let (domain, export, seq) = (
        be32(&before.bytes, 12),
        be32(&before.bytes, 4),
        be32(&before.bytes, 8),
    );
    let mut seqs = HashMap::from([(domain, seq)]);
    let mut p = Packer {
        max,
        out: Vec::new(),
        cur: None,
        set_start: 0,
        set_id: 0,
        domain,
        seqs: &mut seqs,
    };
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

/// UDP.
impl IpfixExporter {
    fn write_udp(&mut self, batch: &[u8], fp: u64) -> Result<Accepted, SinkError> {
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
    fn udp_kept(&mut self, batch: &[u8]) -> Kept {
        if self.udp.fp != Some(crate::file::fingerprint(batch)) {
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

/// TCP.
impl IpfixExporter {
    fn tcp_addr(&self) -> SocketAddr {
        match self.opts.transport {
            IpfixTransport::Tcp(a) | IpfixTransport::Udp(a) => a,
        }
    }

    fn tcp_connect(&mut self) -> Result<(), SinkError> {
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
    fn tcp_acks(&mut self) {
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

    /// Drops the connection: the acknowledgements that arrived are booked,
    /// then every message not acknowledged whole goes back to the queue to
    /// be sent again on the next connection; a connection whose send queue
    /// still holds bytes is reset so they never arrive after their replay.
    fn tcp_disconnect(&mut self) {
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
    fn tcp_write(c: &mut TcpStream, bytes: &[u8]) -> (usize, Option<io::Error>) {
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
    fn tcp_flush_queue(&mut self) -> io::Result<()> {
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

    fn write_tcp(&mut self, batch: &[u8], fp: u64) -> Result<Accepted, SinkError> {
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
        if self
            .tcp
            .conn
            .as_ref()
            .is_some_and(|c| peer_closed(c.as_raw_fd()))
        {
            self.tcp_disconnect();
        }
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
    fn tcp_forget_batch(&mut self) -> Kept {
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

    fn tcp_drain(&mut self, deadline: Instant) -> Result<(), SinkError> {
        loop {
            if self
                .tcp
                .conn
                .as_ref()
                .is_some_and(|c| peer_closed(c.as_raw_fd()))
            {
                self.tcp_disconnect();
            }
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

impl Sink for IpfixExporter {
    fn describe(&self) -> String {
        match self.opts.transport {
            IpfixTransport::Udp(a) => format!("ipfix udp {a}"),
            IpfixTransport::Tcp(a) => format!("ipfix tcp {a}"),
        }
    }

    fn write_batch(&mut self, batch: &[u8]) -> Result<Accepted, SinkError> {
        self.write_batch_marked(batch, &[])
    }

    /// Drop reports need no ranges: they are the options records of the
    /// stream (see the module docs).
    fn write_batch_marked(
        &mut self,
        batch: &[u8],
        _reports: &[Range<usize>],
    ) -> Result<Accepted, SinkError> {
        if self.closed {
            return Err(SinkError::Permanent(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "ipfix sink is closed",
            )));
        }
        let fp = crate::file::fingerprint(batch);
        if self.is_udp() {
            self.write_udp(batch, fp)
        } else {
            self.write_tcp(batch, fp)
        }
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }

    /// TCP: notices a closed connection and reconnects in the background
    /// (messages waiting for a connection are sent as far as it takes
    /// them).
    fn tick(&mut self, _now: Instant) -> Result<(), SinkError> {
        if self.closed || self.is_udp() {
            return Ok(());
        }
        if self
            .tcp
            .conn
            .as_ref()
            .is_some_and(|c| peer_closed(c.as_raw_fd()))
        {
            self.tcp_disconnect();
        }
        if self.tcp.conn.is_none() && self.tcp_connect().is_ok() && self.tcp.fp.is_none() {
            if let Err(e) = self.tcp_flush_queue() {
                if e.kind() != io::ErrorKind::WouldBlock {
                    self.tcp_disconnect();
                }
            }
        }
        Ok(())
    }

    fn poll(&mut self) -> Progress {
        if !self.is_udp() {
            self.tcp_acks();
        }
        std::mem::take(&mut self.backlog)
    }

    /// TCP: until the collector's TCP acknowledged every message
    /// (reconnecting and resending as needed) or `deadline`.
    fn drain(&mut self, deadline: Instant) -> Result<(), SinkError> {
        if self.closed || self.is_udp() {
            return Ok(());
        }
        self.tcp_drain(deadline)
    }

    fn abandon(&mut self) {
        if self.is_udp() {
            self.udp.fp = None;
            self.udp.msgs.clear();
        } else {
            self.tcp_forget_batch();
        }
    }

    /// UDP: the messages sent before the refusal; TCP: the messages the
    /// collector's TCP acknowledged (the others are removed unsent).
    fn kept_of_refused(&mut self, batch: &[u8], _reports: &[Range<usize>]) -> Kept {
        if self.is_udp() {
            self.udp_kept(batch)
        } else if self.tcp.fp == Some(crate::file::fingerprint(batch)) {
            self.tcp_forget_batch()
        } else {
            Kept::default()
        }
    }

    /// TCP: books the last acknowledgements; a connection with messages
    /// still unacknowledged (counted `dropped_shutdown` by the runtime) is
    /// reset, otherwise shut down in order.
    fn close(&mut self) -> Result<(), SinkError> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        self.tcp_acks();
        if let Some(c) = self.tcp.conn.take() {
            if self.tcp.inflight.is_empty() {
                let _ = c.shutdown(std::net::Shutdown::Write);
            } else {
                bump(&self.counters.resets, 1);
                set_linger_zero(c.as_raw_fd());
            }
        }
        self.udp.sock = None;
        Ok(())
    }

    fn named_counters(&self) -> Option<Arc<dyn dplog_core::SinkCounters>> {
        Some(self.counters.clone())
    }
}
