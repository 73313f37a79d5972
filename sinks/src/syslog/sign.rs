//! RFC 5848 (Signed Syslog Messages) for the syslog sink: Signature
//! Blocks (SD-ID `ssign`) and Certificate Blocks (SD-ID `ssign-cert`)
//! sent as RFC 5424 messages of their own, interleaved with the records
//! over the sink's transport.
//!
//! What is signed, as RFC 5848 section 4 defines it:
//! - Every message the sink sends (each non-empty line of a batch, as
//!   formatted, without its `\n`; for datagram transports only lines that
//!   fit `max_datagram_bytes`, the others are never sent) gets a message
//!   number (1, 2, ... within the reboot session; one Signature Group,
//!   `SG="0"`) and its SHA-256 hash is taken over exactly those bytes,
//!   the whole syslog message from `<` of its PRI to its last octet.
//!   Signature and Certificate Block messages are not hashed. `SPRI` is
//!   0: one group holds every PRI value.
//! - A Signature Block carries the hashes of `CNT` (1..=99) consecutive
//!   messages, the first numbered `FMN`, each base64 (RFC 4648, with
//!   padding) in `HB`, separated by one space; `GBC`, the global block
//!   counter, counts every block sent in the session, Certificate and
//!   Signature Blocks, from 0 (a block's copies are one block). It is sent after `every_messages` messages,
//!   after `every_ms` with messages not yet signed, and when the sink
//!   drains or closes.
//! - `SIGN`, the last parameter, is the signature over the whole block
//!   message (header and structured data) as sent without the ` SIGN="..."`
//!   parameter (its leading space included), base64.
//! - A Certificate Block carries the Payload Block `TIMESTAMP SP K SP
//!   KEY`: the session's start (RFC 5424 TIMESTAMP, UTC), key blob type
//!   `K` (the public key itself) and the key, the DER SubjectPublicKeyInfo
//!   of the Ed25519 public key, base64. It fits one fragment, so `INDEX`
//!   is 1 and `FLEN` equals `TPBL`; `FRAG` is the Payload Block's text.
//!   It is sent first in each session, before any record, and again after
//!   every `cert_every_blocks` Signature Blocks (redundancy, RFC 5848
//!   section 8); a receiver that missed it can still check with the key
//!   it was given.
//! - `RSID`, the reboot session ID, is read from `rsid_file`, increased
//!   by one and written back (atomically) each time the sink starts, so
//!   it strictly increases across restarts; 9999999999 is the last one.
//! - `VER="0129"`: protocol version `01`, hash algorithm `2` (SHA-256),
//!   signature scheme `9`, Ed25519 (RFC 8032). RFC 5848 defines only
//!   scheme `1` (OpenPGP DSA); scheme `9` is dplog's extension, checked
//!   by `dplog-verify --syslog`, not by receivers that implement only
//!   DSA (which FIPS 186-5 no longer approves for new signatures; it
//!   approves EdDSA). The keys are the seal's (`dplog-verify keygen`).
//! - `copies` sends each Signature Block that many times in a row
//!   (RFC 5848 section 8: redundancy against datagram loss); a verifier
//!   takes identical copies (same `GBC`) once.
//!
//! The hot path per record is one SHA-256 over bytes the sink already
//! holds and a copy of the 32-byte digest into a fixed array; the block
//! messages (one per `every_messages` records) are the only allocations.

use std::collections::VecDeque;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use ed25519_dalek::pkcs8::EncodePublicKey;
use ed25519_dalek::{Signer as _, SigningKey};
use sha2::{Digest, Sha256};

/// `VER` of every block dplog sends: protocol `01`, SHA-256 (`2`),
/// Ed25519 (`9`, an extension of RFC 5848, which defines only `1`,
/// OpenPGP DSA).
pub const VER: &str = "0129";
/// Most hashes one Signature Block carries (`CNT` has two digits).
pub const MAX_HASHES: usize = 99;
/// Largest reboot session ID (`RSID` has at most 10 digits).
pub const MAX_RSID: u64 = 9_999_999_999;
/// Base64 length of one SHA-256 hash.
const HASH_B64: usize = 44;

/// RFC 5848 signing settings of a syslog sink
/// ([`SyslogSinkOptions::sign`](super::SyslogSinkOptions::sign)).
///
/// # Examples
///
/// A sink that signs what it sends to a UDP receiver (here a socket of
/// the example's own); the receiver's file is checked with
/// `dplog-verify --syslog` ([`crate::verify_syslog`]).
///
/// ```
/// use dplog_core::Sink;
/// use dplog_sinks::syslog::SyslogSignOptions;
/// use dplog_sinks::{seal, SyslogSink, SyslogSinkOptions, SyslogTransport};
///
/// let dir = tempfile::tempdir()?;
/// let (key, public) = (dir.path().join("sign.key"), dir.path().join("sign.pub"));
/// seal::generate_key_pair(&key, &public)?; // as `dplog-verify keygen` does
/// let receiver = std::net::UdpSocket::bind("127.0.0.1:0")?;
///
/// let mut opts = SyslogSinkOptions::new(SyslogTransport::Udp(receiver.local_addr()?));
/// opts.sign = Some(SyslogSignOptions::new(&key, dir.path().join("sign.rsid")));
/// let mut sink = SyslogSink::new(opts)?;
/// let record = "<134>1 2026-12-07T04:20:00Z gw1 doors 7 - - door 4 opened";
/// sink.write_batch(format!("{record}\n").as_bytes()).unwrap();
/// sink.close().unwrap(); // signs what is not signed yet
///
/// // The Certificate Block (session 1), the record, its Signature Block.
/// let mut got = Vec::new();
/// let mut buf = [0u8; 2048];
/// for _ in 0..3 {
///     let n = receiver.recv(&mut buf)?;
///     got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
/// }
/// assert!(got[0].contains("[ssign-cert VER=\"0129\" RSID=\"1\""));
/// assert_eq!(got[1], record);
/// assert!(got[2].contains("[ssign VER=\"0129\" RSID=\"1\" SG=\"0\" SPRI=\"0\" GBC=\"1\" FMN=\"1\" CNT=\"1\""));
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyslogSignOptions {
    /// The Ed25519 private key (PKCS#8 PEM, mode 0600 or 0400; made by
    /// `dplog-verify keygen`). A missing or unreadable file, a mode that
    /// lets others read it, or another key type is refused when the sink
    /// is made.
    pub key_file: PathBuf,
    /// Where the reboot session ID is kept (decimal text): read, increased
    /// by one and written back when the sink starts; created (RSID 1) when
    /// missing.
    pub rsid_file: PathBuf,
    /// Messages per Signature Block (1..=99). Default 25, which keeps a
    /// block under 1300 bytes (datagram transports need the whole block to
    /// fit `max_datagram_bytes`).
    pub every_messages: usize,
    /// Longest time, in milliseconds, a sent message waits for its
    /// Signature Block (checked on the sink's ticks); 0: only
    /// `every_messages`, drain and close. Default 10000.
    pub every_ms: u64,
    /// PRI of the block messages (0..=191). Default 110 (facility 13,
    /// log audit; severity 6, informational). Their `SPRI` is 0: one
    /// Signature Group (`SG="0"`) holds every PRI.
    pub pri: u8,
    /// HOSTNAME of the block messages; None: this host's name. Give the
    /// one the records carry, so a receiver filing by host keeps the
    /// blocks with them.
    pub hostname: Option<String>,
    /// APP-NAME of the block messages. Default `dplog`.
    pub app_name: String,
    /// The Certificate Block is sent again after this many Signature
    /// Blocks (0: only at the start of the session). Default 10.
    pub cert_every_blocks: u32,
    /// Times each Signature Block is sent (1..=4). Default 1; 2 over UDP
    /// makes a single lost datagram harmless.
    pub copies: u8,
}

impl SyslogSignOptions {
    /// Defaults with `key_file` and `rsid_file`.
    pub fn new(key_file: impl Into<PathBuf>, rsid_file: impl Into<PathBuf>) -> Self {
        Self {
            key_file: key_file.into(),
            rsid_file: rsid_file.into(),
            every_messages: 25,
            every_ms: 10_000,
            pri: 110,
            hostname: None,
            app_name: "dplog".into(),
            cert_every_blocks: 10,
            copies: 1,
        }
    }

    /// Length in bytes of the largest Signature Block message these
    /// settings make (99 hashes, 10-digit counters); a datagram transport
    /// refuses settings whose blocks would not fit `max_datagram_bytes`.
    pub fn max_block_len(&self) -> usize {
        // `<PRI>1 TIMESTAMP HOST APP PROCID - ` + the SD element with
        // 10-digit RSID, GBC, FMN + hashes + an Ed25519 signature (88
        // base64).
        let header = 5 + 2 + 27 + 1 + self.host().len() + 1 + self.app_name.len() + 1 + 10 + 3;
        let sd = "[ssign VER=\"0129\" RSID=\"9999999999\" SG=\"0\" SPRI=\"0\" \
                  GBC=\"9999999999\" FMN=\"9999999999\" CNT=\"99\" HB=\"\" SIGN=\"\"]"
            .len();
        header + sd + self.every_messages * (HASH_B64 + 1) + 88
    }

    fn host(&self) -> String {
        self.hostname.clone().unwrap_or_else(hostname)
    }
}

/// This host's name (`gethostname(2)`), `-` (NILVALUE) when it has none.
fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname(2) writes at most `buf.len()` bytes into the
    // live stack buffer.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match std::str::from_utf8(&buf[..n]) {
        Ok(s) if r == 0 && !s.is_empty() && s.bytes().all(|b| (33..=126).contains(&b)) => {
            s.to_string()
        }
        _ => "-".into(),
    }
}

/// Writes `t` as an RFC 5424 TIMESTAMP in UTC with microseconds
/// (`2026-12-07T04:20:00.123456Z`).
pub(super) fn timestamp(t: SystemTime, out: &mut Vec<u8>) {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = dplog_formatters::civil::civil_from_days(days);
    let _ = write!(
        out,
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        sod / 3600,
        sod / 60 % 60,
        sod % 60,
        d.subsec_micros()
    );
}

/// Reads the reboot session ID kept in `path` (0 when the file does not
/// exist), writes the next one back (a temporary file renamed over it,
/// both synced) and returns it.
///
/// Errors: the file holds no decimal number, the next one would exceed
/// [`MAX_RSID`] (a new key and a new file are needed), or it cannot be
/// written.
pub fn next_rsid(path: &Path) -> io::Result<u64> {
    let prev = match fs::read_to_string(path) {
        Ok(s) => s.trim().parse::<u64>().map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("rsid_file {}: not a reboot session ID: {e}", path.display()),
            )
        })?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("rsid_file {}: {e}", path.display()),
            ))
        }
    };
    let next = prev + 1;
    if next > MAX_RSID {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "rsid_file {}: reboot session IDs are used up ({MAX_RSID}); \
                 sign with a new key and a new rsid_file",
                path.display()
            ),
        ));
    }
    let mut tmp = path.as_os_str().to_os_string();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let write = || -> io::Result<()> {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .open(&tmp)?;
        writeln!(f, "{next}")?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    };
    write().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("rsid_file {}: cannot write: {e}", path.display()),
        )
    })?;
    Ok(next)
}

/// The signing state of one syslog sink: the hashes not yet in a
/// Signature Block and the block messages not yet sent.
pub(super) struct Signer {
    key: SigningKey,
    opts: SyslogSignOptions,
    host: String,
    pub(super) rsid: u64,
    /// Blocks queued in this session, Certificate and Signature Blocks:
    /// the next Signature Block's `GBC`.
    gbc: u64,
    /// Message number of the next message hashed.
    next_msg: u64,
    /// Hashes of the messages not yet in a block; the first is numbered
    /// `next_msg - n`.
    hashes: [[u8; 32]; MAX_HASHES],
    n: usize,
    /// When the first of those was hashed.
    oldest: Option<Instant>,
    /// The Certificate Block message, sent again every
    /// `cert_every_blocks` Signature Blocks.
    cert: Vec<u8>,
    since_cert: u32,
    /// Block messages (without `\n`) to send, in order; each is `(is a
    /// Certificate Block, message)`.
    pub(super) pending: VecDeque<(bool, Vec<u8>)>,
    /// Fingerprint of the batch whose lines were hashed and which is not
    /// yet accepted or given up (its retries are not hashed again).
    pub(super) batch_fp: Option<u64>,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("rsid", &self.rsid)
            .field("gbc", &self.gbc)
            .field("next_msg", &self.next_msg)
            .finish_non_exhaustive()
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

impl Signer {
    /// Checks `opts`, loads the key, takes the next reboot session ID and
    /// queues the Certificate Block. `max_datagram` is the transport's
    /// datagram limit (None for streams).
    pub(super) fn open(opts: &SyslogSignOptions, max_datagram: Option<usize>) -> io::Result<Self> {
        if !(1..=MAX_HASHES).contains(&opts.every_messages) {
            return Err(invalid(format!(
                "sign.every_messages {} is outside 1..={MAX_HASHES}",
                opts.every_messages
            )));
        }
        if opts.pri > 191 {
            return Err(invalid(format!("sign.pri {} is outside 0..=191", opts.pri)));
        }
        if !(1..=4).contains(&opts.copies) {
            return Err(invalid(format!(
                "sign.copies {} is outside 1..=4",
                opts.copies
            )));
        }
        let host = opts.host();
        let printable = |s: &str, max: usize| {
            !s.is_empty() && s.len() <= max && s.bytes().all(|b| (33..=126).contains(&b))
        };
        if !printable(&host, 255) || !printable(&opts.app_name, 48) {
            return Err(invalid(format!(
                "sign.hostname {host:?} / sign.app_name {:?}: RFC 5424 wants 1..=255 and 1..=48 \
                 printable ASCII characters without spaces",
                opts.app_name
            )));
        }
        if let Some(max) = max_datagram {
            let need = opts.max_block_len();
            if need > max {
                return Err(invalid(format!(
                    "sign.every_messages {} makes Signature Blocks of up to {need} bytes, \
                     above max_datagram_bytes {max}: lower every_messages or raise the limit",
                    opts.every_messages
                )));
            }
        }
        let key = crate::seal::load_signing_key(&opts.key_file).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("syslog sign: {e}").replace("seal key_file", "key_file"),
            )
        })?;
        let rsid = next_rsid(&opts.rsid_file)?;
        let mut s = Signer {
            key,
            opts: opts.clone(),
            host,
            rsid,
            gbc: 0,
            next_msg: 1,
            hashes: [[0; 32]; MAX_HASHES],
            n: 0,
            oldest: None,
            cert: Vec::new(),
            since_cert: 0,
            pending: VecDeque::new(),
            batch_fp: None,
        };
        s.cert = s.cert_block()?;
        s.pending.push_back((true, s.cert.clone()));
        s.gbc += 1;
        Ok(s)
    }

    fn header(&self, out: &mut Vec<u8>) {
        let _ = write!(out, "<{}>1 ", self.opts.pri);
        timestamp(SystemTime::now(), out);
        let _ = write!(
            out,
            " {} {} {} - ",
            self.host,
            self.opts.app_name,
            std::process::id()
        );
    }

    /// Ends the block message `m` (which ends with its last parameter
    /// before `SIGN`) with ` SIGN="<signature>"]`; the signature is over
    /// `m` followed by `]`: the message without the SIGN parameter.
    fn sign_into(&self, m: &mut Vec<u8>) {
        m.push(b']');
        let sig = self.key.sign(m);
        m.pop();
        m.extend_from_slice(b" SIGN=\"");
        b64_append(m, &sig.to_bytes());
        m.extend_from_slice(b"\"]");
    }

    fn cert_block(&self) -> io::Result<Vec<u8>> {
        let der = self
            .key
            .verifying_key()
            .to_public_key_der()
            .map_err(|e| io::Error::other(format!("public key: {e}")))?;
        let mut payload = Vec::new();
        timestamp(SystemTime::now(), &mut payload);
        payload.extend_from_slice(b" K ");
        b64_append(&mut payload, der.as_bytes());
        let mut m = Vec::with_capacity(256 + payload.len());
        self.header(&mut m);
        let _ = write!(
            m,
            "[ssign-cert VER=\"{VER}\" RSID=\"{}\" SG=\"0\" SPRI=\"0\" TPBL=\"{n}\" INDEX=\"1\" \
             FLEN=\"{n}\" FRAG=\"",
            self.rsid,
            n = payload.len()
        );
        m.extend_from_slice(&payload);
        m.push(b'"');
        self.sign_into(&mut m);
        Ok(m)
    }

    /// Hashes one message as sent; a full block is queued.
    pub(super) fn add(&mut self, msg: &[u8], now: Instant) {
        self.hashes[self.n] = Sha256::digest(msg).into();
        self.n += 1;
        self.next_msg += 1;
        self.oldest.get_or_insert(now);
        if self.n == self.opts.every_messages {
            self.block();
        }
    }

    /// Queues a Signature Block when the oldest unsigned message waited
    /// `every_ms`.
    pub(super) fn tick(&mut self, now: Instant) {
        if self.opts.every_ms == 0 {
            return;
        }
        if let Some(t) = self.oldest {
            if now.duration_since(t) >= Duration::from_millis(self.opts.every_ms) {
                self.block();
            }
        }
    }

    /// Queues a Signature Block for the messages not yet signed, if any.
    pub(super) fn finish(&mut self) {
        if self.n > 0 {
            self.block();
        }
    }

    fn block(&mut self) {
        if self.n == 0 {
            return;
        }
        let fmn = self.next_msg - self.n as u64;
        let mut m = Vec::with_capacity(self.opts.max_block_len());
        self.header(&mut m);
        let _ = write!(
            m,
            "[ssign VER=\"{VER}\" RSID=\"{}\" SG=\"0\" SPRI=\"0\" GBC=\"{}\" FMN=\"{fmn}\" \
             CNT=\"{}\" HB=\"",
            self.rsid, self.gbc, self.n
        );
        for (i, h) in self.hashes[..self.n].iter().enumerate() {
            if i > 0 {
                m.push(b' ');
            }
            b64_append(&mut m, h);
        }
        m.push(b'"');
        self.sign_into(&mut m);
        self.gbc += 1;
        self.n = 0;
        self.oldest = None;
        for _ in 1..self.opts.copies {
            self.pending.push_back((false, m.clone()));
        }
        self.pending.push_back((false, m));
        self.since_cert += 1;
        if self.opts.cert_every_blocks > 0 && self.since_cert >= self.opts.cert_every_blocks {
            self.since_cert = 0;
            self.pending.push_back((true, self.cert.clone()));
            self.gbc += 1;
        }
    }

    /// Messages hashed and not yet in a Signature Block.
    pub(super) fn unsigned(&self) -> usize {
        self.n
    }
}

/// Appends `data` in base64 (RFC 4648, with padding) to `out`.
fn b64_append(out: &mut Vec<u8>, data: &[u8]) {
    let at = out.len();
    out.resize(at + data.len().div_ceil(3) * 4, 0);
    let n = B64
        .encode_slice(data, &mut out[at..])
        .expect("sized for the padded encoding");
    debug_assert_eq!(at + n, out.len());
}

use super::stream::Frame;
use super::{bump, Conn, RelpMsg, SinkError, SyslogSink, SyslogTransport};
use std::sync::atomic::Ordering;

/// Signing in the sink: hashing each batch once, sending the block
/// messages between batches.
impl SyslogSink {
    /// True while a batch is part-way through its transport (a retry of
    /// it is due): block messages wait, so they never land inside it.
    fn batch_in_flight(&self) -> bool {
        self.resume.is_some() || self.st.resume.is_some() || self.relp.resume.is_some()
    }

    /// Before the transport takes `batch` (fingerprint `fp`): the block
    /// messages due are sent ahead of it and, unless this is a retry, its
    /// messages are hashed (each line the transport will send). Errors
    /// (retryable): a datagram block message could not be sent; nothing
    /// of the batch is hashed yet then.
    pub(super) fn sign_before(&mut self, batch: &[u8], fp: u64) -> Result<(), SinkError> {
        let Some(s) = self.sign.as_ref() else {
            return Ok(());
        };
        if s.batch_fp == Some(fp) {
            // A retry: its messages are hashed already.
            return Ok(());
        }
        self.sign_emit()?;
        let max = match self.opts.transport {
            SyslogTransport::Udp(_) | SyslogTransport::UnixDatagram(_) => {
                self.opts.max_datagram_bytes
            }
            _ => usize::MAX,
        };
        let now = Instant::now();
        let s = self.sign.as_mut().expect("checked above");
        let mut start = 0;
        let mut hashed = 0u64;
        while start < batch.len() {
            let end = memchr::memchr(b'\n', &batch[start..]).map_or(batch.len(), |i| start + i);
            let msg = &batch[start..end];
            // What the transport sends: every non-empty line (drop reports
            // too), for datagrams only those within the limit.
            if !msg.is_empty() && msg.len() <= max {
                s.add(msg, now);
                hashed += 1;
            }
            start = end + 1;
        }
        s.batch_fp = Some(fp);
        bump(&self.counters.signed_messages, hashed);
        Ok(())
    }

    /// The batch was accepted, or given up on: the next one with the same
    /// bytes is a new batch, hashed again. Block messages due go out now
    /// when they can (failures wait for the next chance).
    pub(super) fn sign_after(&mut self, accepted: bool) {
        if let Some(s) = self.sign.as_mut() {
            s.batch_fp = None;
            if accepted {
                let _ = self.sign_emit();
            }
        }
    }

    /// Ticks: a Signature Block for messages waiting `every_ms`, and the
    /// block messages still to send.
    pub(super) fn sign_tick(&mut self, now: Instant) {
        if let Some(s) = self.sign.as_mut() {
            s.tick(now);
            let _ = self.sign_emit();
        }
    }

    /// Drain and close: a last Signature Block for the messages not yet
    /// signed, handed to the transport with every block message still to
    /// send (streams and RELP then wait for them in their drain).
    pub(super) fn sign_finish(&mut self) {
        if self.batch_in_flight() {
            return;
        }
        if let Some(s) = self.sign.as_mut() {
            s.finish();
            if self.conn.is_none() {
                let _ = self.ensure_connected();
            }
            let _ = self.sign_emit();
        }
    }

    /// Whether block messages wait to be handed to the transport.
    pub(super) fn sign_pending(&self) -> bool {
        self.sign
            .as_ref()
            .is_some_and(|s| !s.pending.is_empty() || s.unsigned() > 0)
    }

    /// Hands the queued block messages to the transport, in order:
    /// datagrams are sent now (an error, or a UDP datagram the receiver's
    /// host refused, keeps it and the rest queued and is returned,
    /// retryable); stream frames join the ledger (sent with the
    /// next bytes, resent after a lost connection, never counted as
    /// records or written bytes); RELP messages join the window (resent
    /// on a new session), waiting up to `io_timeout_ms` for room.
    fn sign_emit(&mut self) -> Result<(), SinkError> {
        if self.batch_in_flight() {
            return Ok(());
        }
        let Some(s) = self.sign.as_mut() else {
            return Ok(());
        };
        let mut queue = std::mem::take(&mut s.pending);
        let r = self.sign_send(&mut queue);
        let s = self.sign.as_mut().expect("checked above");
        // Blocks made while sending (none today) stay after the unsent.
        queue.append(&mut s.pending);
        s.pending = queue;
        r
    }

    fn sign_send(&mut self, queue: &mut VecDeque<(bool, Vec<u8>)>) -> Result<(), SinkError> {
        while let Some((cert, m)) = queue.front() {
            let cert = *cert;
            match self.opts.transport {
                SyslogTransport::Udp(_) | SyslogTransport::UnixDatagram(_) => {
                    let r = match self.conn.as_ref() {
                        Some(Conn::Udp(s)) => s.send(m),
                        Some(Conn::UnixDgram(s)) => s.send(m),
                        _ => return Ok(()),
                    };
                    match r {
                        // UDP: a receiver that is down answers with an
                        // ICMP error the socket holds (on loopback before
                        // send returns; see `write_dgram`): the block
                        // stays queued and goes again after the reconnect.
                        Ok(_) => match self.udp_pending_error() {
                            Ok(None) => {}
                            Ok(Some(e)) | Err(e) => {
                                bump(&self.counters.refused, 1);
                                self.disconnect();
                                return Err(SinkError::Retryable(e));
                            }
                        },
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => {
                            if !matches!(e.raw_os_error(), Some(libc::ENOBUFS | libc::EAGAIN)) {
                                self.disconnect();
                            }
                            return Err(SinkError::Retryable(e));
                        }
                    }
                }
                SyslogTransport::Tcp(_) | SyslogTransport::UnixStream(_) => {
                    let st = &mut self.st;
                    let before = st.buf.len();
                    st.buf
                        .extend_from_slice(itoa::Buffer::new().format(m.len()).as_bytes());
                    st.buf.push(b' ');
                    st.buf.extend_from_slice(m);
                    st.frames.push_back(Frame {
                        end: st.base + st.buf.len() as u64,
                        len: (st.buf.len() - before) as u64,
                        line: 0,
                        line_end: 0,
                        record: false,
                        // Of the last accepted batch: reported (as nothing)
                        // with the backlog, never cut with a batch given up.
                        batch: st.batch.wrapping_sub(1),
                    });
                    self.counters
                        .unacked_frames
                        .store(st.frames.len() as u64, Ordering::Relaxed);
                }
                SyslogTransport::Relp(_) => {
                    let timeout = Duration::from_millis(self.opts.io_timeout_ms);
                    while self.relp.window.len() >= self.opts.relp_window {
                        match self.relp_await(timeout) {
                            Ok(true) => {}
                            Ok(false) => {
                                return Err(SinkError::Retryable(io::Error::new(
                                    io::ErrorKind::TimedOut,
                                    "RELP: window full, signature block waits",
                                )))
                            }
                            Err(e) => {
                                self.disconnect();
                                return Err(SinkError::Retryable(e));
                            }
                        }
                    }
                    let connected = self.conn.is_some();
                    let txnr = if connected { self.relp_next_txnr() } else { 0 };
                    self.relp.window.push_back(RelpMsg {
                        msg: m.clone(),
                        record: false,
                        control: true,
                        batch: self.relp.batch.wrapping_sub(1),
                        offset: 0,
                        txnr,
                    });
                    if connected {
                        let mut out = std::mem::take(&mut self.relp.out);
                        super::relp::relp_frame(&mut out, txnr, "syslog", m);
                        let r = self.relp_send(&out);
                        self.relp.out = out;
                        if let Err(e) = r {
                            // In the window: resent on the next session.
                            self.disconnect();
                            queue.pop_front();
                            self.count_block(cert);
                            return Err(SinkError::Retryable(e));
                        }
                    }
                }
            }
            queue.pop_front();
            self.count_block(cert);
        }
        Ok(())
    }

    fn count_block(&self, cert: bool) {
        if cert {
            bump(&self.counters.certificate_blocks, 1);
        } else {
            bump(&self.counters.signature_blocks, 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc5424_utc() {
        let mut out = Vec::new();
        timestamp(
            UNIX_EPOCH + Duration::from_micros(1_796_617_200_123_456),
            &mut out,
        );
        assert_eq!(out, b"2026-12-07T04:20:00.123456Z");
        out.clear();
        timestamp(UNIX_EPOCH + Duration::from_secs(951_782_400), &mut out);
        assert_eq!(out, b"2000-02-29T00:00:00.000000Z");
    }

    #[test]
    fn rsid_increases_across_starts_and_refuses_garbage() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("rsid");
        assert_eq!(next_rsid(&p).unwrap(), 1);
        assert_eq!(next_rsid(&p).unwrap(), 2);
        assert_eq!(fs::read_to_string(&p).unwrap(), "2\n");
        fs::write(&p, "9999999999\n").unwrap();
        assert!(next_rsid(&p).unwrap_err().to_string().contains("used up"));
        fs::write(&p, "abc").unwrap();
        assert!(next_rsid(&p)
            .unwrap_err()
            .to_string()
            .contains("not a reboot session ID"));
    }
}
