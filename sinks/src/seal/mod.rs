//! Tamper-evident sealing of what a sink writes: a BLAKE3 hash chain over
//! every write, Ed25519 signatures over the chain's head, kept in a *seal
//! file* beside each output file (`<file>.seal`), and the verifier that
//! reads them back ([`crate::verify`]).
//!
//! The output file itself is unchanged, byte for byte: every reader of a
//! text, JSON, CSV, syslog, binary or IPFIX file reads it as before.
//!
//! # Seal file layout (version 1)
//!
//! An 8-byte magic `DPLSEAL` followed by the version byte `1`, then
//! entries, each a one-byte tag followed by a fixed number of bytes that
//! the tag alone decides (so a reader never trusts a length it read).
//! Integers are little-endian; times are Unix milliseconds.
//!
//! | tag | entry | bytes after the tag |
//! |---|---|---|
//! | `G` | start of a file: log id (16), file sequence number (u64), byte offset in the output file where sealing starts (u64), chain head it continues from (32), public key of the writer (32), time (u64) | 104 |
//! | `B` | one write: byte offset (u64), length (u64), BLAKE3 of the bytes (32), chain value (32) | 80 |
//! | `L` | bytes found unsealed when the sink started (a crash between a write and its entry), sealed late: same fields as `B` | 80 |
//! | `S` | signature: writes sealed in this file (u64), end offset (u64), time (u64), chain head (32), public key (32), Ed25519 signature (64) | 152 |
//! | `K` | key change: old public key (32), new public key (32), chain head (32), time (u64), signature by the new key (64) | 168 |
//! | `C` | close: the sink closed the file cleanly (at its close, a rotation, or moving on to the next file); fields as `S`, signed over `"dplog-seal v1 close"` and `S`'s fields | 152 |
//! | `R` | resume: a sink started again on a file whose seal ends with `C`; fields as `S`, signed over `"dplog-seal v1 resume"` and `S`'s fields | 152 |
//!
//! A reader stops at a tag it does not know (its body length is
//! unknown): the verifier notes it, having checked the entries before
//! it, and a sink refuses to continue such a seal. `C` and `R` came after
//! the first five tags; a dplog older than them refuses to continue a
//! seal that has them.
//!
//! The chain: a log's first head is `BLAKE3-derive-key("dplog-seal v1
//! genesis", log id)`; each write `i` links
//! `h_i = BLAKE3-derive-key("dplog-seal v1 link", h_{i-1} | tag | offset | length | BLAKE3(bytes))`.
//! A rotated file's seal ends with a signature; the next file's `G`
//! entry carries the same log id, the next sequence number and the head
//! the previous file ended with, so a rotated set verifies as one chain.
//! A signature signs `"dplog-seal v1 sign" | log id | sequence | writes |
//! end | time | head`.
//!
//! Keys are PKCS#8 PEM (private) and SubjectPublicKeyInfo PEM (public),
//! the files `openssl genpkey -algorithm ed25519` and `openssl pkey
//! -pubout` write, or [`generate_key_pair`] (`dplog-verify keygen`).

pub mod anchor;
mod entry;
mod hasher;
mod keys;

pub use entry::{
    body_len, genesis, key_message, link, mark_message, read_entries, seal_path, sign_message,
    Entry, EntryReader, Placed, Signed, Stop, TAG_BATCH, TAG_CLOSE, TAG_KEY, TAG_LATE, TAG_RESUME,
    TAG_SIGN, TAG_START,
};
pub use keys::{generate_key_pair, load_public_key, load_signing_key};

use hasher::{HashThread, Piece};
pub use hasher::{BUFFERS as HASHER_BUFFERS, DIED as HASHER_DIED};

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ed25519_dalek::{Signer, SigningKey, VerifyingKey};

/// The first 8 bytes of a seal file: `DPLSEAL` and the format version, 1.
pub const MAGIC: &[u8; 8] = b"DPLSEAL\x01";

/// What is appended to an output file's name to name its seal file.
pub const SEAL_SUFFIX: &str = ".seal";

/// How long a sealed sink's close waits for its anchor sink to deliver
/// the last heads (a Kafka producer's queue, a ClickHouse insert).
pub const ANCHOR_DRAIN: Duration = Duration::from_secs(10);

fn now_ms() -> u64 {
    dplog_core::tsc::realtime_ns() / 1_000_000
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Where a sealed sink computes the BLAKE3 of what it writes.
///
/// [`SealOptions::new`] and a `seal` table without `hasher` take
/// [`HasherMode::for_this_machine`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HasherMode {
    /// On a hasher thread of the sink's own (`dplog-seal-hash`), while
    /// the consumer formats the next batch: the consumer hands each
    /// written batch buffer over and takes a spare one back (no copy),
    /// and the batch's seal entry is written once it is hashed (by the
    /// consumer, at its next batch, tick, flush, rotation or close). It
    /// takes the hashing (~0.18 ns per byte with AVX-512) off the
    /// consumer thread, which is what limits a binary stream, when a
    /// core is free for it. Used by file sinks, for the batches the
    /// consumer hands over ([`dplog_core::Sink::write_batch_owned`]); a
    /// batch lent (`write_batch`, as a fan-out lends it to each child)
    /// is hashed inline.
    Thread,
    /// On the thread that writes, as it writes: no second thread, the
    /// seal entry right after the write.
    Inline,
}

impl HasherMode {
    /// The mode for a process that may run on `cpus` CPUs: [`Thread`]
    /// from 3 CPUs (one left for the hasher beside a producer and the
    /// consumer), [`Inline`] below. On two CPUs the hasher thread takes
    /// turns with the producer or the consumer and adds the hand-over to
    /// the hash: measured 1.5-2.5x the inline mode's cost of a sealed
    /// binary ring -> file (`benches/RESULTS.md`, the seal's cost).
    ///
    /// [`Thread`]: HasherMode::Thread
    /// [`Inline`]: HasherMode::Inline
    ///
    /// # Examples
    /// ```
    /// use dplog_sinks::seal::HasherMode;
    /// assert_eq!(HasherMode::for_cpus(2), HasherMode::Inline);
    /// assert_eq!(HasherMode::for_cpus(4), HasherMode::Thread);
    /// ```
    pub fn for_cpus(cpus: usize) -> Self {
        if cpus >= 3 {
            HasherMode::Thread
        } else {
            HasherMode::Inline
        }
    }

    /// [`HasherMode::for_cpus`] of the CPUs this process may run on
    /// (`std::thread::available_parallelism`: its affinity mask and
    /// cgroup CPU quota; 1 if unknown).
    pub fn for_this_machine() -> Self {
        Self::for_cpus(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

/// Sealing settings of a sink.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealOptions {
    /// The Ed25519 private key file (PKCS#8 PEM, mode 0600).
    pub key_file: PathBuf,
    /// Sign the chain head this often while writes come in (besides at
    /// every rotation and at close). `None`: only at rotation and close.
    pub sign_every: Option<Duration>,
    /// Where the writes are hashed (file sinks; the mmap and archive
    /// sinks hash inline). Default: [`HasherMode::for_this_machine`].
    pub hasher: HasherMode,
    /// The CPU the hasher thread is pinned to (a core the producers and
    /// the consumer do not use); `None`: not pinned. A CPU that cannot
    /// be pinned to leaves the thread unpinned.
    pub hasher_cpu: Option<usize>,
}

impl SealOptions {
    /// Sealing with `key_file`, signing every 60 s, hashing where
    /// [`HasherMode::for_this_machine`] says (a hasher thread, not
    /// pinned, from 3 CPUs).
    ///
    /// # Examples
    /// ```
    /// use dplog_sinks::seal::{HasherMode, SealOptions};
    /// let o = SealOptions::new("/etc/dplog/seal.key");
    /// assert_eq!(o.hasher, HasherMode::for_this_machine());
    /// assert_eq!(o.sign_every, Some(std::time::Duration::from_secs(60)));
    /// ```
    pub fn new(key_file: impl Into<PathBuf>) -> Self {
        Self {
            key_file: key_file.into(),
            sign_every: Some(Duration::from_secs(60)),
            hasher: HasherMode::for_this_machine(),
            hasher_cpu: None,
        }
    }
}

/// A log's state at the end of one of its seal files.
struct LogState {
    log_id: [u8; 16],
    seq: u64,
    head: [u8; 32],
    end: u64,
    batches: u64,
    last_key: [u8; 32],
    /// The seal ends with a close entry (no resume after it).
    closed: bool,
    stop: Option<Stop>,
}

/// Cuts the seal file of `data` back to the entries of bytes before
/// `end` (and everything else before the first write past it): what an
/// archive recovery keeps of a segment a crash left open. Returns whether
/// there was a seal file.
///
/// # Errors
/// Reading or truncating it.
pub fn cut_seal(data: &Path, end: u64) -> io::Result<bool> {
    let path = seal_path(data);
    let f = match OpenOptions::new().read(true).write(true).open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(ctx(&path, e)),
    };
    let mut r = io::BufReader::new(&f);
    let mut magic = [0u8; 8];
    if r.read_exact(&mut magic).is_err() || &magic != MAGIC {
        return Ok(true);
    }
    let mut rd = EntryReader::new(&mut r);
    let mut keep = MAGIC.len() as u64;
    while let Some((at, e)) = rd.next_entry()? {
        if let Entry::Batch { off, len, .. } = e {
            if off.saturating_add(len) > end {
                break;
            }
        }
        keep = at + 1 + body_len(e.tag()).unwrap_or(0) as u64;
    }
    f.set_len(keep).map_err(|e| ctx(&path, e))?;
    Ok(true)
}

/// Reads seal file `path` through (streamed) to its end state.
fn read_state(path: &Path) -> io::Result<LogState> {
    let bad = |m: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {m}", path.display()),
        )
    };
    let mut r = io::BufReader::new(File::open(path).map_err(|e| ctx(path, e))?);
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic)
        .map_err(|_| bad("not a dplog seal file (too short)"))?;
    if &magic != MAGIC {
        return Err(bad("not a dplog seal file (bad magic)"));
    }
    let mut rd = EntryReader::new(&mut r);
    let mut st = LogState {
        log_id: [0; 16],
        seq: 0,
        head: [0; 32],
        end: 0,
        batches: 0,
        last_key: [0; 32],
        closed: false,
        stop: None,
    };
    let mut started = false;
    while let Some((_, e)) = rd.next_entry()? {
        match &e {
            Entry::Start {
                log_id,
                seq,
                start,
                prev,
                pubkey,
                ..
            } => {
                (st.log_id, st.seq, st.end, st.head) = (*log_id, *seq, *start, *prev);
                st.batches = 0;
                st.last_key = *pubkey;
                st.closed = false;
                started = true;
            }
            Entry::Batch {
                off, len, chain, ..
            } => {
                st.end = off.saturating_add(*len);
                st.head = *chain;
                st.batches += 1;
                st.closed = false;
            }
            Entry::Sign(s) => st.last_key = s.pubkey,
            Entry::Close(s) => {
                st.last_key = s.pubkey;
                st.closed = true;
            }
            Entry::Resume(s) => {
                st.last_key = s.pubkey;
                st.closed = false;
            }
            Entry::Key { new, .. } => st.last_key = *new,
        }
    }
    if !started {
        return Err(bad("no start entry"));
    }
    st.stop = rd.stop().cloned();
    Ok(st)
}

/// Writes the seal file of one output file, entry by entry, as the sink
/// writes: [`sealed`](Self::sealed) after each write of the output,
/// [`sign`](Self::sign) at rotation, close and every `sign_every`.
///
/// An entry whose write to the seal file fails is kept and written before
/// the next one: the output never waits for its seal.
pub struct Sealer {
    key: SigningKey,
    pubkey: [u8; 32],
    sign_every: Option<Duration>,
    path: PathBuf,
    side: File,
    log_id: [u8; 16],
    seq: u64,
    head: [u8; 32],
    /// `B`/`L` entries of the current file.
    batches: u64,
    /// Where the sealed bytes of the output end.
    end: u64,
    /// Writes since the last signature.
    unsigned: bool,
    last_sign: Instant,
    /// Entry bytes not yet in the seal file (a failed write).
    pending: Vec<u8>,
    /// Scratch for one entry.
    buf: Vec<u8>,
    /// Where each signed head also goes ([`set_anchor`](Self::set_anchor)).
    anchor: Option<Anchor>,
    /// The hasher thread, in [`HasherMode::Thread`].
    hasher: Option<HashThread>,
    /// Pieces of the batch being written, to hand over with its buffer.
    deferred: Vec<Piece>,
    /// Where the bytes handed to the hasher end (past `end` while some
    /// are in flight).
    ahead: u64,
    /// The hasher died: said once ([`take_hasher_death`](Self::take_hasher_death)).
    hasher_died: bool,
    /// The current file's seal ends with a close entry: a write after it
    /// is preceded by a resume entry.
    closed: bool,
}

/// The second sink signed heads go to, and what to do when it fails.
/// A sink whose seal moves from one [`Sealer`] to another (an mmap
/// segment resumed with its own seal) moves its anchor along
/// ([`Sealer::close_keeping_anchor`], [`Sealer::take_anchor`],
/// [`Sealer::adopt_anchor`]).
pub(crate) struct Anchor {
    sink: Box<dyn dplog_core::Sink>,
    on_error: Box<dyn FnMut(&dplog_core::SinkError) + Send>,
    /// Heads as [`anchor::SealHead`] records in this format; `None`: the
    /// RFC 5424 line of a syslog anchor.
    records: Option<dplog_formatters::SchemaFormatter>,
    /// Scratch for one head's bytes.
    out: Vec<u8>,
}

impl std::fmt::Debug for Anchor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Anchor")
            .field("sink", &self.sink.describe())
            .field("records", &self.records.is_some())
            .finish_non_exhaustive()
    }
}

impl Anchor {
    /// Heads to `sink`: as [`anchor::SealHead`] records formatted by
    /// `records`, or (`None`) as the RFC 5424 line of a syslog anchor;
    /// `on_error` hears of every head not sent or not delivered.
    pub(crate) fn new(
        sink: Box<dyn dplog_core::Sink>,
        records: Option<dplog_formatters::SchemaFormatter>,
        on_error: Box<dyn FnMut(&dplog_core::SinkError) + Send>,
    ) -> Self {
        Anchor {
            sink,
            on_error,
            out: Vec::with_capacity(if records.is_some() { 1024 } else { 0 }),
            records,
        }
    }

    /// Delivers the last heads (a Kafka producer or a ClickHouse insert
    /// still holding them, for at most [`ANCHOR_DRAIN`]) and closes the
    /// anchor sink.
    pub(crate) fn finish(mut self) {
        let deadline = Instant::now() + ANCHOR_DRAIN;
        let sent = self.sink.flush().and_then(|()| self.sink.drain(deadline));
        if self.sink.poll().failed_records > 0 {
            let e = io::Error::other("the anchor sink failed to deliver a head");
            (self.on_error)(&dplog_core::SinkError::Permanent(e));
        }
        if let Err(e) = sent.and_then(|()| self.sink.close()) {
            (self.on_error)(&e);
        }
    }
}

/// `fmt::Write` into a byte buffer.
struct Utf8<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Utf8<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer")
            .field("path", &self.path)
            .field("seq", &self.seq)
            .field("batches", &self.batches)
            .field("end", &self.end)
            .field("anchor", &self.anchor.as_ref().map(|a| a.sink.describe()))
            .finish_non_exhaustive()
    }
}

/// Lower-case hex of `b`.
pub fn hex(b: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        s.push(D[(x >> 4) as usize] as char);
        s.push(D[(x & 15) as usize] as char);
    }
    s
}

/// Opens (creating) the seal file `path`; a new one gets the mode of the
/// output it seals (the path without `.seal`), or the sinks' own
/// [`FILE_MODE`](crate::FILE_MODE) if that is not there: a seal is as
/// readable as its log, no more.
fn open_side(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::PermissionsExt;
    let data = path
        .to_str()
        .and_then(|p| p.strip_suffix(SEAL_SUFFIX))
        .map(Path::new);
    let mode = data
        .and_then(|d| std::fs::metadata(d).ok())
        .map_or(crate::FILE_MODE, |m| m.permissions().mode() & 0o666);
    OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .mode(mode)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)
}

/// BLAKE3 of bytes `from..to` of file `data`, read in 1 MiB pieces.
fn hash_file_range(data: &Path, from: u64, to: u64) -> io::Result<[u8; 32]> {
    let f = File::open(data).map_err(|e| ctx(data, e))?;
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut at = from;
    while at < to {
        let n = buf.len().min((to - at) as usize);
        f.read_exact_at(&mut buf[..n], at)
            .map_err(|e| ctx(data, e))?;
        h.update(&buf[..n]);
        at += n as u64;
    }
    Ok(*h.finalize().as_bytes())
}

fn ctx(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

impl Sealer {
    /// Opens the seal of output file `data`, which is `data_size` bytes
    /// long now. A seal file already there is continued: its chain
    /// head, log id and end are read back, a torn last entry is cut off,
    /// bytes the output has past the sealed end (a crash between a write
    /// and its entry) are sealed late in an `L` entry, and a key other
    /// than the one that signed last is recorded in a `K` entry. A seal
    /// that ends with a close entry gets a resume entry (`R`), after
    /// which this sink's writes follow; bytes found past its sealed end
    /// were appended by something else and are sealed late before it,
    /// where the verifier names them. Without a
    /// seal file a new log starts (a random log id), at `data_size`.
    ///
    /// # Errors
    /// The key file's ([`load_signing_key`]), the seal file's I/O, or
    /// `InvalidData` when the seal file is not one or records more bytes
    /// than the output holds (the output was truncated since).
    pub fn open(data: &Path, data_size: u64, opts: &SealOptions) -> io::Result<Self> {
        let key = load_signing_key(&opts.key_file)?;
        let pubkey = key.verifying_key().to_bytes();
        let path = seal_path(data);
        let side = open_side(&path).map_err(|e| ctx(&path, e))?;
        let side_len = side.metadata().map_err(|e| ctx(&path, e))?.len();
        let mut s = Sealer {
            key,
            pubkey,
            sign_every: opts.sign_every,
            path,
            side,
            log_id: [0; 16],
            seq: 0,
            head: [0; 32],
            batches: 0,
            end: data_size,
            unsigned: false,
            last_sign: Instant::now(),
            pending: Vec::new(),
            buf: Vec::with_capacity(256),
            anchor: None,
            hasher: None,
            deferred: Vec::with_capacity(4),
            ahead: 0,
            hasher_died: false,
            closed: false,
        };
        if side_len == 0 {
            rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut s.log_id);
            s.head = genesis(&s.log_id);
            s.start_file(data_size)?;
        } else {
            s.resume(data, data_size)?;
        }
        Ok(s)
    }

    /// Starts the seal of `data`, a new file (`start` bytes long) of the
    /// log whose previous file is `prev_data`: its seal's log id, next
    /// sequence number and final head (the archive sink's next segment
    /// after a restart). A seal file already at `data`'s is replaced.
    ///
    /// # Errors
    /// As [`open`](Self::open), and reading `prev_data`'s seal.
    pub fn open_after(
        prev_data: &Path,
        data: &Path,
        start: u64,
        opts: &SealOptions,
    ) -> io::Result<Self> {
        let st = read_state(&seal_path(prev_data))?;
        let key = load_signing_key(&opts.key_file)?;
        let path = seal_path(data);
        let side = open_side(&path).map_err(|e| ctx(&path, e))?;
        side.set_len(0).map_err(|e| ctx(&path, e))?;
        let mut s = Sealer {
            pubkey: key.verifying_key().to_bytes(),
            key,
            sign_every: opts.sign_every,
            path,
            side,
            log_id: st.log_id,
            seq: st.seq + 1,
            head: st.head,
            batches: 0,
            end: start,
            unsigned: false,
            last_sign: Instant::now(),
            pending: Vec::new(),
            buf: Vec::with_capacity(256),
            anchor: None,
            hasher: None,
            deferred: Vec::with_capacity(4),
            ahead: 0,
            hasher_died: false,
            closed: false,
        };
        s.start_file(start)?;
        Ok(s)
    }

    /// Starts the seal of the log's next file at a new path `data` (an
    /// empty file): a new seal file `<data>.seal` whose `G` entry carries
    /// the next sequence number and the head so far. The previous seal
    /// file should be finished ([`finish_file`](Self::finish_file)).
    ///
    /// # Errors
    /// Creating the seal file.
    pub fn next_file(&mut self, data: &Path) -> io::Result<()> {
        self.next_file_at(data, 0)
    }

    /// [`next_file`](Self::next_file) for a file whose sealed bytes start
    /// at `start` (an mmap segment's data area, after its header).
    ///
    /// # Errors
    /// Creating the seal file.
    pub fn next_file_at(&mut self, data: &Path, start: u64) -> io::Result<()> {
        let path = seal_path(data);
        let side = open_side(&path).map_err(|e| ctx(&path, e))?;
        side.set_len(0).map_err(|e| ctx(&path, e))?;
        self.path = path;
        self.side = side;
        self.seq += 1;
        self.unsigned = false;
        self.start_file(start)
    }

    /// The output file whose seal is being written (its seal path less
    /// [`SEAL_SUFFIX`]).
    pub fn data_path(&self) -> PathBuf {
        let s = self.path.as_os_str().to_string_lossy();
        PathBuf::from(s.strip_suffix(SEAL_SUFFIX).unwrap_or(&s).to_string())
    }

    /// Signs the current file's head, closes its seal (a `C` entry: the
    /// file is never written again), syncs it and renames it to
    /// `renamed`'s (its output file was renamed there: a sealed archive
    /// segment).
    ///
    /// # Errors
    /// The signature's write, `fdatasync` or `rename(2)`.
    pub fn finish_file(&mut self, renamed: &Path) -> io::Result<()> {
        self.sign_and_close(true)?;
        self.side.sync_data().map_err(|e| ctx(&self.path, e))?;
        let to = seal_path(renamed);
        std::fs::rename(&self.path, &to).map_err(|e| ctx(&self.path, e))?;
        self.path = to;
        Ok(())
    }

    fn bad(&self, msg: String) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {msg}", self.path.display()),
        )
    }

    /// Continues an existing seal file.
    fn resume(&mut self, data: &Path, data_size: u64) -> io::Result<()> {
        let st = read_state(&self.path)?;
        if let Some(stop) = &st.stop {
            if stop.torn {
                // A crash while an entry was written: cut it off.
                self.side.set_len(stop.at).map_err(|e| ctx(&self.path, e))?;
            } else {
                return Err(self.bad(format!("at byte {}: {}", stop.at, stop.why)));
            }
        }
        (self.log_id, self.seq, self.head, self.end, self.batches) =
            (st.log_id, st.seq, st.head, st.end, st.batches);
        let last_key = st.last_key;
        if data_size < self.end {
            return Err(self.bad(format!(
                "records {} sealed bytes but {} holds {data_size}: the output was truncated \
                 after it was sealed (run dplog-verify on it; move both files away to start a \
                 new log)",
                self.end,
                data.display()
            )));
        }
        if st.closed && data_size > self.end {
            // Bytes after a clean close are none of this sink's: sealed
            // as found, before the resume entry, where the verifier
            // names them (appended after close).
            eprintln!(
                "dplog: {}: bytes {}..{data_size} were appended after the sink closed it \
                 (not by the sink); sealed as found: dplog-verify reports them as appended \
                 after close",
                data.display(),
                self.end
            );
            self.seal_late(data, data_size)?;
        }
        if last_key != self.pubkey {
            let time_ms = now_ms();
            let sig = self
                .key
                .sign(&key_message(&last_key, &self.pubkey, &self.head, time_ms))
                .to_bytes();
            self.put(&Entry::Key {
                old: last_key,
                new: self.pubkey,
                head: self.head,
                time_ms,
                sig,
            })?;
        }
        if st.closed {
            // This sink's writes from here on: after the resume entry.
            self.put_mark(TAG_RESUME)?;
        } else if data_size > self.end {
            self.seal_late(data, data_size)?;
        }
        Ok(())
    }

    /// Writes a close ([`TAG_CLOSE`]) or resume ([`TAG_RESUME`]) entry
    /// over the current head, signed.
    fn put_mark(&mut self, tag: u8) -> io::Result<()> {
        let s = self.signed(tag, now_ms());
        self.closed = tag == TAG_CLOSE;
        self.put(&if tag == TAG_CLOSE {
            Entry::Close(s)
        } else {
            Entry::Resume(s)
        })
    }

    /// The current head after this file's writes, signed at `time_ms` as
    /// the entry with `tag` signs it ([`Signed::message`]).
    fn signed(&self, tag: u8, time_ms: u64) -> Signed {
        let mut s = Signed {
            batches: self.batches,
            end: self.end,
            time_ms,
            head: self.head,
            pubkey: self.pubkey,
            sig: [0; 64],
        };
        s.sig = self
            .key
            .sign(&s.message(tag, &self.log_id, self.seq))
            .to_bytes();
        s
    }

    /// Signs the head and closes the current file's seal (a `C` entry):
    /// the sink writes no more to this file.
    fn sign_and_close(&mut self, always: bool) -> io::Result<()> {
        let signed = self.sign(always);
        if self.closed {
            return signed;
        }
        // Written even when the signature's write failed: both are kept
        // and written with the next entry.
        let closed = self.put_mark(TAG_CLOSE);
        signed.and(closed)
    }

    /// Seals bytes `[end, data_size)` of the output, read back from it.
    fn seal_late(&mut self, data: &Path, data_size: u64) -> io::Result<()> {
        let content = hash_file_range(data, self.end, data_size)?;
        self.link_and_put(true, self.end, data_size - self.end, content)
    }

    fn start_file(&mut self, start: u64) -> io::Result<()> {
        let mut b = Vec::with_capacity(128);
        b.extend_from_slice(MAGIC);
        Entry::Start {
            log_id: self.log_id,
            seq: self.seq,
            start,
            prev: self.head,
            pubkey: self.pubkey,
            time_ms: now_ms(),
        }
        .encode(&mut b);
        self.end = start;
        self.ahead = start;
        self.batches = 0;
        self.closed = false;
        self.pending.clear();
        self.write_bytes(&b)
    }

    fn write_bytes(&mut self, b: &[u8]) -> io::Result<()> {
        if !self.pending.is_empty() {
            self.pending.extend_from_slice(b);
            let p = std::mem::take(&mut self.pending);
            let r = self.write_now(&p);
            return r;
        }
        self.write_now(b)
    }

    fn write_now(&mut self, b: &[u8]) -> io::Result<()> {
        let mut done = 0;
        while done < b.len() {
            match self.side.write(&b[done..]) {
                Ok(0) => {
                    self.pending.extend_from_slice(&b[done..]);
                    return Err(io::Error::from(io::ErrorKind::WriteZero));
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.pending.extend_from_slice(&b[done..]);
                    return Err(ctx(&self.path, e));
                }
            }
        }
        Ok(())
    }

    fn put(&mut self, e: &Entry) -> io::Result<()> {
        let mut b = std::mem::take(&mut self.buf);
        b.clear();
        e.encode(&mut b);
        let r = self.write_bytes(&b);
        self.buf = b;
        r
    }

    fn link_and_put(
        &mut self,
        late: bool,
        off: u64,
        len: u64,
        content: [u8; 32],
    ) -> io::Result<()> {
        if self.closed {
            // A write after the close, by this sink: said so first.
            self.put_mark(TAG_RESUME)?;
        }
        let tag = if late { TAG_LATE } else { TAG_BATCH };
        self.head = link(&self.head, tag, off, len, &content);
        self.batches += 1;
        self.end = off + len;
        self.ahead = self.ahead.max(self.end);
        self.unsigned = true;
        self.put(&Entry::Batch {
            late,
            off,
            len,
            content,
            chain: self.head,
        })
    }

    /// Seals one write: `bytes` were just written at byte `off` of the
    /// output (hashed in place, not copied). Its entry goes to the seal
    /// file after the bytes are in the output, so a crash between the two
    /// leaves bytes the verifier reports as unsealed, never an entry
    /// without its bytes.
    ///
    /// # Errors
    /// The seal file's write error; the entry is kept and written with the
    /// next one.
    ///
    /// With a hasher thread, the writes handed over before are linked
    /// first (waiting for them), so the chain stays in file order.
    pub fn sealed(&mut self, off: u64, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        debug_assert!(self.deferred.is_empty(), "deferred pieces not sealed");
        let caught = self.catch_up();
        let content = *blake3::hash(bytes).as_bytes();
        let r = self.link_and_put(false, off, bytes.len() as u64, content);
        caught.and(r)
    }

    /// Starts the hasher thread of [`HasherMode::Thread`] (pinned to
    /// `cpu` when given): from then on the sink [`defer`](Self::defer)s
    /// the pieces of a batch it writes and [`hand_over`](Self::hand_over)s
    /// the batch's buffer once written.
    ///
    /// # Errors
    /// The thread could not be spawned.
    pub fn start_hasher(&mut self, cpu: Option<usize>) -> io::Result<()> {
        self.start_hasher_with(cpu, |b| *blake3::hash(b).as_bytes())
    }

    fn start_hasher_with(&mut self, cpu: Option<usize>, hash: hasher::HashFn) -> io::Result<()> {
        if self.hasher.is_none() {
            self.hasher = Some(HashThread::spawn(cpu, hash)?);
        }
        Ok(())
    }

    /// Whether writes go to a hasher thread ([`start_hasher`](Self::start_hasher),
    /// and it has not died).
    pub fn threaded(&self) -> bool {
        self.hasher.is_some()
    }

    /// Batches handed to the hasher thread and not yet sealed.
    pub fn in_flight(&self) -> usize {
        self.hasher.as_ref().map_or(0, HashThread::in_flight)
    }

    /// Notes that bytes `start..start + len` of the batch being written
    /// were just written at byte `off` of the output; they are sealed when
    /// the batch's buffer is handed over ([`hand_over`](Self::hand_over)),
    /// or on this thread by [`seal_deferred`](Self::seal_deferred).
    pub fn defer(&mut self, off: u64, start: usize, len: usize) {
        if len > 0 {
            self.deferred.push(Piece { off, start, len });
        }
    }

    /// Seals the [`defer`](Self::defer)red pieces of `batch` on this
    /// thread, after the batches in flight (a write that failed part-way,
    /// a rotation inside a batch, a batch that is only lent).
    ///
    /// # Errors
    /// The seal file's write error (the entries are kept for the next
    /// write), or the hasher's death (its batches sealed from the file).
    pub fn seal_deferred(&mut self, batch: &[u8]) -> io::Result<()> {
        if self.deferred.is_empty() {
            return Ok(());
        }
        let caught = self.catch_up();
        let mut r = Ok(());
        for i in 0..self.deferred.len() {
            let p = self.deferred[i];
            let content = *blake3::hash(&batch[p.start..p.start + p.len]).as_bytes();
            if let Err(e) = self.link_and_put(false, p.off, p.len as u64, content) {
                r = Err(e);
            }
        }
        self.deferred.clear();
        caught.and(r)
    }

    /// Hands the buffer of the batch just written (its pieces
    /// [`defer`](Self::defer)red) to the hasher thread and puts a spare
    /// buffer in `buf`'s place; first links the batches the thread has
    /// hashed, waiting for the oldest when all [`HASHER_BUFFERS`] are in
    /// flight. Without a hasher (or when it died) the pieces are sealed
    /// here and `buf` is left alone.
    ///
    /// # Errors
    /// As [`seal_deferred`](Self::seal_deferred); the batch is sealed
    /// either way.
    pub fn hand_over(&mut self, buf: &mut Vec<u8>) -> io::Result<()> {
        if self.deferred.is_empty() {
            return Ok(());
        }
        let mut r = self.collect(false);
        if self.hasher.as_ref().is_some_and(|h| !h.has_spare()) {
            r = r.and(self.collect_one());
        }
        let handed = match self.hasher.as_mut() {
            Some(h) => h.hand_over(buf, &self.deferred),
            None => return r.and(self.seal_deferred(buf)),
        };
        match handed {
            Ok(()) => {
                let last = self.deferred[self.deferred.len() - 1];
                self.ahead = last.off + last.len as u64;
                self.deferred.clear();
                r
            }
            Err(_) => {
                let gone = self.lost_hasher();
                r.and(gone).and(self.seal_deferred(buf))
            }
        }
    }

    /// Links the batches the hasher thread has hashed: every one in
    /// flight when `wait`, else those done now.
    fn collect(&mut self, wait: bool) -> io::Result<()> {
        let mut r = Ok(());
        loop {
            let next = match self.hasher.as_mut() {
                Some(h) => h.next_done(wait),
                None => return r,
            };
            match next {
                Ok(Some(job)) => {
                    r = r.and(self.link_job(job));
                }
                Ok(None) => return r,
                Err(_) => return r.and(self.lost_hasher()),
            }
        }
    }

    /// Waits for the oldest batch in flight and links it.
    fn collect_one(&mut self) -> io::Result<()> {
        let next = match self.hasher.as_mut() {
            Some(h) => h.next_done(true),
            None => return Ok(()),
        };
        match next {
            Ok(Some(job)) => self.link_job(job),
            Ok(None) => Ok(()),
            Err(_) => self.lost_hasher(),
        }
    }

    fn link_job(&mut self, job: hasher::Job) -> io::Result<()> {
        let mut r = Ok(());
        for (p, h) in job.pieces.iter().zip(&job.hashes) {
            if let Err(e) = self.link_and_put(false, p.off, p.len as u64, *h) {
                r = Err(e);
            }
        }
        if let Some(t) = self.hasher.as_mut() {
            t.recycle(job);
        }
        r
    }

    /// Links every batch handed to the hasher thread (waits for them):
    /// what flush, rotation, signatures and close do first.
    ///
    /// # Errors
    /// The hasher's death (its batches sealed from the file instead), or
    /// the seal file's write error.
    pub fn catch_up(&mut self) -> io::Result<()> {
        if self.in_flight() == 0 {
            return Ok(());
        }
        self.collect(true)
    }

    /// The hasher thread is gone with the batches it held: their bytes
    /// (`end..ahead` of the output) are read back from the output and
    /// sealed in one entry, and the sink hashes inline from now on.
    fn lost_hasher(&mut self) -> io::Result<()> {
        self.hasher = None;
        self.hasher_died = true;
        if self.ahead > self.end {
            let data = self.data_path();
            let (from, to) = (self.end, self.ahead);
            let content = hash_file_range(&data, from, to)?;
            self.link_and_put(false, from, to - from, content)?;
        }
        Err(hasher::died())
    }

    /// Signs the chain head (an `S` entry), if anything was sealed since
    /// the last signature or `always`.
    ///
    /// # Errors
    /// The seal file's write error (the entry is kept for the next write).
    ///
    /// The batches handed to the hasher thread are linked first (waited
    /// for), so the head signed covers every byte written.
    pub fn sign(&mut self, always: bool) -> io::Result<()> {
        let caught = self.catch_up();
        let r = self.sign_linked(always);
        caught.and(r)
    }

    fn sign_linked(&mut self, always: bool) -> io::Result<()> {
        if !self.unsigned && !always {
            return Ok(());
        }
        let time_ms = now_ms();
        let signed = self.signed(TAG_SIGN, time_ms);
        let sig = signed.sig;
        self.unsigned = false;
        self.last_sign = Instant::now();
        let r = self.put(&Entry::Sign(signed));
        if let Some(a) = self.anchor.as_mut() {
            let mut out = std::mem::take(&mut a.out);
            out.clear();
            match a.records.as_mut() {
                Some(f) => {
                    let rec = anchor::SealHead {
                        header: dplog_core::RecordHeader::of::<anchor::SealHead>(),
                        time_ms,
                        seq: self.seq,
                        writes: self.batches,
                        end: self.end,
                        log_id: self.log_id,
                        head: self.head,
                        key: self.pubkey,
                        sig,
                    };
                    f.push_bytes(dplog_core::RecordBytes::record_bytes(&rec), &mut out);
                }
                None => {
                    // An RFC 5424 message (facility 13, log audit;
                    // severity 6): NIL timestamp and host (the receiver
                    // stamps them), APP-NAME dplog-seal, MSGID head; its
                    // text `dplog-seal head` and the signature entry's
                    // fields as key=value, in lower-case hex.
                    use std::fmt::Write as _;
                    let _ = writeln!(
                        Utf8(&mut out),
                        "<110>1 - - dplog-seal - head - dplog-seal head log={} file={} writes={} end={} time={time_ms} head={} key={} sig={}",
                        hex(&self.log_id),
                        self.seq,
                        self.batches,
                        self.end,
                        hex(&self.head),
                        hex(&self.pubkey),
                        hex(&sig)
                    );
                }
            }
            if let Err(e) = a.sink.write_batch(&out) {
                a.sink.abandon();
                (a.on_error)(&e);
            }
            a.out = out;
        }
        r
    }

    /// Sends every signed head, as it is signed, also to `sink` (a syslog
    /// sink, another host's): one RFC 5424 line per signature
    /// (`dplog-seal head log=.. file=.. writes=.. end=.. time=.. head=..
    /// key=.. sig=..`), which `dplog-verify --anchors` compares with the
    /// seal. An attacker who rewrites the output and its seal, even
    /// re-signing with the stolen key, cannot change what the other host
    /// received. A failed send is not retried: `on_error` hears of it
    /// (the file sink counts it) and the next signature is sent as usual.
    pub fn set_anchor(
        &mut self,
        sink: Box<dyn dplog_core::Sink>,
        on_error: Box<dyn FnMut(&dplog_core::SinkError) + Send>,
    ) {
        self.anchor = Some(Anchor::new(sink, None, on_error));
    }

    /// Sends every signed head, as it is signed, also to `sink` as one
    /// [`SealHead`](anchor::SealHead) record formatted by `formatter` (one
    /// of [`anchor::formatter`]: JSON lines for a Kafka topic, the binary
    /// stream for a ClickHouse table, ...): what
    /// [`set_anchor`](Self::set_anchor) does for a syslog receiver, for
    /// any sink. Failures (refused writes, and deliveries the sink
    /// reports failed through [`poll`](dplog_core::Sink::poll)) reach
    /// `on_error`; none is retried here (the sink retries as it does for
    /// any record).
    pub fn set_anchor_records(
        &mut self,
        sink: Box<dyn dplog_core::Sink>,
        formatter: dplog_formatters::SchemaFormatter,
        on_error: Box<dyn FnMut(&dplog_core::SinkError) + Send>,
    ) {
        self.anchor = Some(Anchor::new(sink, Some(formatter), on_error));
    }

    /// The anchor, taken out to go on with the seal's next sealer.
    pub(crate) fn take_anchor(&mut self) -> Option<Anchor> {
        self.anchor.take()
    }

    /// Takes the anchor waiting in `pending`, if any (a sink's anchor
    /// set before its first sealer, or taken from the one before).
    pub(crate) fn adopt_anchor(&mut self, pending: &mut Option<Anchor>) {
        if let Some(a) = pending.take() {
            self.anchor = Some(a);
        }
    }

    /// The anchor of a sink (`path`'s, `sealed` when it has a seal): heads
    /// go to `sink`, as lines or as records formatted by `records` (see
    /// [`set_anchor`](Self::set_anchor),
    /// [`set_anchor_records`](Self::set_anchor_records)), failures to
    /// `on_error`. Put on `sealer`, or, while the sink has none yet (one
    /// whose seal goes from segment to segment), in `pending` for the
    /// first ([`adopt_anchor`](Self::adopt_anchor)).
    ///
    /// # Errors
    /// `InvalidInput` when the sink has no seal.
    pub(crate) fn place_anchor(
        sealed: bool,
        path: &Path,
        sealer: Option<&mut Sealer>,
        pending: &mut Option<Anchor>,
        sink: Box<dyn dplog_core::Sink>,
        records: Option<dplog_formatters::SchemaFormatter>,
        on_error: Box<dyn FnMut(&dplog_core::SinkError) + Send>,
    ) -> io::Result<()> {
        if !sealed {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: an anchor needs a seal", path.display()),
            ));
        }
        let anchor = Anchor::new(sink, records, on_error);
        match sealer {
            Some(s) => s.anchor = Some(anchor),
            None => *pending = Some(anchor),
        }
        Ok(())
    }

    /// Signs when `sign_every` has passed since the last signature and
    /// something was sealed since.
    ///
    /// # Errors
    /// As [`sign`](Self::sign).
    ///
    /// Links the batches the hasher thread has hashed since (without
    /// waiting), first.
    pub fn tick(&mut self, now: Instant) -> io::Result<()> {
        if let Some(a) = self.anchor.as_mut() {
            if let Err(e) = a.sink.tick(now) {
                (a.on_error)(&e);
            }
            // Asynchronous sinks (Kafka, ClickHouse) report deliveries.
            if a.sink.poll().failed_records > 0 {
                let e = io::Error::other("the anchor sink failed to deliver a head");
                (a.on_error)(&dplog_core::SinkError::Permanent(e));
            }
        }
        let collected = self.collect(false);
        let r = match self.sign_every {
            Some(d)
                if now.duration_since(self.last_sign) >= d
                    && (self.unsigned || self.in_flight() > 0) =>
            {
                self.sign(false)
            }
            _ => Ok(()),
        };
        collected.and(r)
    }

    /// Whether the hasher thread died since the last call (its batches
    /// were sealed from the file; the sink hashes inline since): the
    /// sink reports it as an error, once.
    pub fn take_hasher_death(&mut self) -> bool {
        std::mem::take(&mut self.hasher_died)
    }

    /// Renames the seal file to `rotated`'s ([`seal_path`]) after a
    /// final signature and a close entry (a rotated file never grows
    /// again); call [`start_next`](Self::start_next) once the
    /// new output file is open.
    ///
    /// # Errors
    /// The signature's write or the `rename(2)` error.
    pub fn rotate_to(&mut self, rotated: &Path) -> io::Result<()> {
        self.sign_and_close(true)?;
        self.side.sync_data().map_err(|e| ctx(&self.path, e))?;
        std::fs::rename(&self.path, seal_path(rotated)).map_err(|e| ctx(&self.path, e))
    }

    /// Undoes [`rotate_to`](Self::rotate_to) (the new output could not be
    /// opened and the old one was put back).
    pub fn unrotate(&mut self, rotated: &Path) {
        let _ = std::fs::rename(seal_path(rotated), &self.path);
    }

    /// Starts the seal of the next file of the log (the output path holds
    /// a new file, `start` bytes long: bytes before `start` are not sealed): a new seal file whose `G` entry carries the
    /// next sequence number and the head the previous file ended with.
    ///
    /// # Errors
    /// Creating the seal file.
    pub fn start_next(&mut self, start: u64) -> io::Result<()> {
        let side = open_side(&self.path).map_err(|e| ctx(&self.path, e))?;
        side.set_len(0).map_err(|e| ctx(&self.path, e))?;
        self.side = side;
        self.seq += 1;
        self.unsigned = false;
        self.start_file(start)
    }

    /// Signs the head if anything is unsigned, closes the seal (a `C`
    /// entry: bytes the file gets after it are not the sink's, unless a
    /// sink starting again on it writes a resume entry first) and syncs
    /// the seal file (at the sink's close).
    ///
    /// # Errors
    /// The write or `fdatasync(2)` error.
    pub fn close(&mut self) -> io::Result<()> {
        let r = self.close_keeping_anchor();
        if let Some(a) = self.anchor.take() {
            a.finish();
        }
        r
    }

    /// [`close`](Self::close), the final head anchored as usual, but the
    /// anchor sink left open, to [`take`](Self::take_anchor) to the
    /// sealer that goes on with the log.
    ///
    /// # Errors
    /// As [`close`](Self::close).
    pub(crate) fn close_keeping_anchor(&mut self) -> io::Result<()> {
        let signed = self.sign_and_close(false);
        if let Some(mut h) = self.hasher.take() {
            h.stop();
        }
        let synced = self.side.sync_data().map_err(|e| ctx(&self.path, e));
        signed.and(synced)
    }

    /// `fdatasync(2)` of the seal file.
    ///
    /// # Errors
    /// The `fdatasync` error.
    pub fn sync(&mut self) -> io::Result<()> {
        self.side.sync_data().map_err(|e| ctx(&self.path, e))
    }

    /// The seal file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The chain head after the last sealed write.
    pub fn head(&self) -> [u8; 32] {
        self.head
    }

    /// The signing key's public half.
    pub fn public_key(&self) -> VerifyingKey {
        self.key.verifying_key()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fails on a batch starting with `!`, as a hasher thread that dies.
    fn dies_on_bang(b: &[u8]) -> [u8; 32] {
        assert!(b.first() != Some(&b'!'), "hasher fails on purpose");
        *blake3::hash(b).as_bytes()
    }

    #[test]
    fn a_hasher_that_dies_is_reported_once_and_its_batches_are_sealed_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (key, public) = (dir.path().join("k.key"), dir.path().join("k.pub"));
        let vk = generate_key_pair(&key, &public).unwrap();
        let data = dir.path().join("log");
        let mut f = File::create(&data).unwrap();
        let mut s = Sealer::open(&data, 0, &SealOptions::new(&key)).unwrap();
        s.start_hasher_with(None, dies_on_bang).unwrap();
        let mut off = 0u64;
        let mut buf = Vec::with_capacity(64);
        for line in ["one\n", "two\n", "!three\n", "four\n", "five\n"] {
            buf.clear();
            buf.extend_from_slice(line.as_bytes());
            f.write_all(&buf).unwrap();
            s.defer(off, 0, buf.len());
            off += buf.len() as u64;
            // The death shows here or at the catch-up below; never a hang.
            let _ = s.hand_over(&mut buf);
        }
        let e = s.catch_up().err();
        assert!(!s.threaded(), "still threaded after the death ({e:?})");
        assert!(s.take_hasher_death());
        assert!(!s.take_hasher_death(), "reported once");
        // Writes after the death are hashed inline.
        f.write_all(b"six\n").unwrap();
        s.sealed(off, b"six\n").unwrap();
        s.close().unwrap();
        let r = crate::verify::verify_files(&[data], &[vk]).unwrap();
        assert_eq!(r.finding, None, "{:?}", r.finding);
        assert_eq!(r.bytes, off + 4);
        assert!(r.notes.is_empty(), "{:?}", r.notes);
    }
}
