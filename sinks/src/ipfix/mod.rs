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

mod pack;
mod tcp;
mod udp;

use pack::{template_messages, Msg, TemplateClock, Tmpl};
use tcp::Tcp;
use udp::Udp;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::accounting::{bump, named, read};
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
    /// formatter's (`[format.ipfix] observation_domain_id`). Sequence
    /// numbers count per Transport Session and Observation Domain (RFC
    /// 7011 sections 3.1, 10.3.2): each exporter (each run: a new UDP
    /// source port or TCP connection, a new Transport Session) starts its
    /// domains at 0. A collector that keys an exporter by its address and
    /// domain alone (nfcapd 1.7.1) takes two exporters of one host with one
    /// domain for one, whose sequence numbers jump at every message, and
    /// a restart for one sequence failure; exporters with domains of
    /// their own it keeps apart.
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
        read(c)
    }
}

impl dplog_core::SinkCounters for IpfixCounters {
    fn named(&self) -> Vec<(String, u64)> {
        named(
            "ipfix",
            &[
                ("messages", &self.messages),
                ("records", &self.records),
                ("template_messages", &self.template_messages),
                ("refused", &self.refused),
                ("too_large", &self.too_large),
                ("reconnects", &self.reconnects),
                ("connect_failures", &self.connect_failures),
                ("replayed", &self.replayed),
                ("acked", &self.acked),
                ("abandoned", &self.abandoned),
                ("resets", &self.resets),
            ],
        )
    }
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
        let fp = crate::accounting::fingerprint(batch);
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
        self.tcp_drop_if_peer_closed();
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
        } else if self.tcp.fp == Some(crate::accounting::fingerprint(batch)) {
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
