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
mod hasher;

use hasher::{HashThread, Piece};
pub use hasher::{BUFFERS as HASHER_BUFFERS, DIED as HASHER_DIED};

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{Signer, SigningKey, VerifyingKey};

/// The first 8 bytes of a seal file: `DPLSEAL` and the format version, 1.
pub const MAGIC: &[u8; 8] = b"DPLSEAL\x01";

/// What is appended to an output file's name to name its seal file.
pub const SEAL_SUFFIX: &str = ".seal";

/// How long a sealed sink's close waits for its anchor sink to deliver
/// the last heads (a Kafka producer's queue, a ClickHouse insert).
pub const ANCHOR_DRAIN: Duration = Duration::from_secs(10);

/// Largest key file read (a PEM key is under 200 bytes).
const MAX_KEY_FILE: u64 = 64 * 1024;

/// Tag of a file's start entry.
pub const TAG_START: u8 = b'G';
/// Tag of a write's entry.
pub const TAG_BATCH: u8 = b'B';
/// Tag of bytes found unsealed at start, sealed late.
pub const TAG_LATE: u8 = b'L';
/// Tag of a signature entry.
pub const TAG_SIGN: u8 = b'S';
/// Tag of a key change entry.
pub const TAG_KEY: u8 = b'K';

/// Bytes after the tag of an entry with tag `tag`; `None` for an unknown
/// tag.
pub fn body_len(tag: u8) -> Option<usize> {
    match tag {
        TAG_START => Some(104),
        TAG_BATCH | TAG_LATE => Some(80),
        TAG_SIGN => Some(152),
        TAG_KEY => Some(168),
        _ => None,
    }
}

/// The seal file of output file `data`: `<data>.seal`.
pub fn seal_path(data: &Path) -> PathBuf {
    let mut s = data.as_os_str().to_os_string();
    s.push(SEAL_SUFFIX);
    PathBuf::from(s)
}

/// One entry of a seal file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// `G`: the start of an output file's seal.
    Start {
        /// Random id shared by every file of one log.
        log_id: [u8; 16],
        /// 0 for a log's first file, one more for each rotated file.
        seq: u64,
        /// Byte offset in the output file where sealing starts (bytes
        /// before it were there when sealing began and are not sealed).
        start: u64,
        /// The chain head this file continues from.
        prev: [u8; 32],
        /// The writer's public key.
        pubkey: [u8; 32],
        /// Unix milliseconds.
        time_ms: u64,
    },
    /// `B` (a write) or `L` (found unsealed at start, sealed late).
    Batch {
        /// `true` for `L`.
        late: bool,
        /// Byte offset of the write in the output file.
        off: u64,
        /// Bytes written.
        len: u64,
        /// BLAKE3 of those bytes.
        content: [u8; 32],
        /// The chain value after this write.
        chain: [u8; 32],
    },
    /// `S`: a signature over the chain head.
    Sign {
        /// `B`/`L` entries of this file so far.
        batches: u64,
        /// Byte offset where the sealed bytes end.
        end: u64,
        /// Unix milliseconds.
        time_ms: u64,
        /// The chain head signed.
        head: [u8; 32],
        /// The signer's public key.
        pubkey: [u8; 32],
        /// Ed25519 signature of [`sign_message`].
        sig: [u8; 64],
    },
    /// `K`: the writer's key changed (a restart with another key).
    Key {
        /// The key of the entries before.
        old: [u8; 32],
        /// The key of the entries after.
        new: [u8; 32],
        /// The chain head at the change.
        head: [u8; 32],
        /// Unix milliseconds.
        time_ms: u64,
        /// Signature by `new` of [`key_message`].
        sig: [u8; 64],
    },
}

fn put(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(b);
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn arr<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[at..at + N]);
    a
}

impl Entry {
    /// The entry's tag.
    pub fn tag(&self) -> u8 {
        match self {
            Entry::Start { .. } => TAG_START,
            Entry::Batch { late: false, .. } => TAG_BATCH,
            Entry::Batch { late: true, .. } => TAG_LATE,
            Entry::Sign { .. } => TAG_SIGN,
            Entry::Key { .. } => TAG_KEY,
        }
    }

    /// Appends the entry's bytes (tag included) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.tag());
        match self {
            Entry::Start {
                log_id,
                seq,
                start,
                prev,
                pubkey,
                time_ms,
            } => {
                put(out, log_id);
                put(out, &seq.to_le_bytes());
                put(out, &start.to_le_bytes());
                put(out, prev);
                put(out, pubkey);
                put(out, &time_ms.to_le_bytes());
            }
            Entry::Batch {
                off,
                len,
                content,
                chain,
                ..
            } => {
                put(out, &off.to_le_bytes());
                put(out, &len.to_le_bytes());
                put(out, content);
                put(out, chain);
            }
            Entry::Sign {
                batches,
                end,
                time_ms,
                head,
                pubkey,
                sig,
            } => {
                put(out, &batches.to_le_bytes());
                put(out, &end.to_le_bytes());
                put(out, &time_ms.to_le_bytes());
                put(out, head);
                put(out, pubkey);
                put(out, sig);
            }
            Entry::Key {
                old,
                new,
                head,
                time_ms,
                sig,
            } => {
                put(out, old);
                put(out, new);
                put(out, head);
                put(out, &time_ms.to_le_bytes());
                put(out, sig);
            }
        }
    }

    /// Decodes the body `b` (exactly [`body_len`]`(tag)` bytes) of an
    /// entry with `tag`; `None` for an unknown tag or a wrong length.
    pub fn decode(tag: u8, b: &[u8]) -> Option<Entry> {
        if body_len(tag) != Some(b.len()) {
            return None;
        }
        Some(match tag {
            TAG_START => Entry::Start {
                log_id: arr(b, 0),
                seq: u64_at(b, 16),
                start: u64_at(b, 24),
                prev: arr(b, 32),
                pubkey: arr(b, 64),
                time_ms: u64_at(b, 96),
            },
            TAG_BATCH | TAG_LATE => Entry::Batch {
                late: tag == TAG_LATE,
                off: u64_at(b, 0),
                len: u64_at(b, 8),
                content: arr(b, 16),
                chain: arr(b, 48),
            },
            TAG_SIGN => Entry::Sign {
                batches: u64_at(b, 0),
                end: u64_at(b, 8),
                time_ms: u64_at(b, 16),
                head: arr(b, 24),
                pubkey: arr(b, 56),
                sig: arr(b, 88),
            },
            TAG_KEY => Entry::Key {
                old: arr(b, 0),
                new: arr(b, 32),
                head: arr(b, 64),
                time_ms: u64_at(b, 96),
                sig: arr(b, 104),
            },
            _ => return None,
        })
    }
}

/// Where and why reading a seal file stopped before its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stop {
    /// Byte offset in the seal file of the entry not read.
    pub at: u64,
    /// The file ends inside that entry (a crash while it was written),
    /// as opposed to an unknown tag or too many entries.
    pub torn: bool,
    /// What was found, for people.
    pub why: String,
}

/// An entry with its byte offset in the seal file.
pub type Placed = (u64, Entry);

/// Reads a seal file's entries one at a time from `r` (positioned after
/// its magic): each a tag and the body length the tag decides, so
/// nothing read decides how much is read.
#[derive(Debug)]
pub struct EntryReader<R> {
    r: R,
    pos: u64,
    stop: Option<Stop>,
}

impl<R: Read> EntryReader<R> {
    /// A reader of the entries in `r`, which starts just after the magic.
    pub fn new(r: R) -> Self {
        Self {
            r,
            pos: MAGIC.len() as u64,
            stop: None,
        }
    }

    /// The next entry with its byte offset in the seal file; `None` at
    /// the end, or where reading stopped (then [`stop`](Self::stop) says
    /// where and why: the file ends inside an entry, or an unknown tag).
    ///
    /// # Errors
    /// The read error.
    pub fn next_entry(&mut self) -> io::Result<Option<Placed>> {
        if self.stop.is_some() {
            return Ok(None);
        }
        let mut tag = [0u8; 1];
        loop {
            match self.r.read(&mut tag) {
                Ok(0) => return Ok(None),
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let Some(n) = body_len(tag[0]) else {
            self.stop = Some(Stop {
                at: self.pos,
                torn: false,
                why: format!("unknown entry tag 0x{:02x}", tag[0]),
            });
            return Ok(None);
        };
        let mut body = [0u8; 168];
        match self.r.read_exact(&mut body[..n]) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                self.stop = Some(Stop {
                    at: self.pos,
                    torn: true,
                    why: "the seal file ends inside an entry".to_string(),
                });
                return Ok(None);
            }
            Err(e) => return Err(e),
        }
        let e = Entry::decode(tag[0], &body[..n]).expect("length checked by body_len");
        let at = self.pos;
        self.pos += 1 + n as u64;
        Ok(Some((at, e)))
    }

    /// Where and why reading stopped before the end, once it did.
    pub fn stop(&self) -> Option<&Stop> {
        self.stop.as_ref()
    }
}

/// Reads the entries of a seal file from `r` (after its magic), at most
/// `max_entries`. Returns them with the byte offset in the seal file of
/// each, and, when the file ends inside an entry or at an unknown tag,
/// the offset where reading stopped and why.
///
/// # Errors
/// The read error.
pub fn read_entries(
    r: &mut impl Read,
    max_entries: usize,
) -> io::Result<(Vec<Placed>, Option<Stop>)> {
    let mut rd = EntryReader::new(r);
    let mut out = Vec::new();
    while let Some(e) = rd.next_entry()? {
        if out.len() >= max_entries {
            let stop = Stop {
                at: e.0,
                torn: false,
                why: format!("more than {max_entries} entries"),
            };
            return Ok((out, Some(stop)));
        }
        out.push(e);
    }
    Ok((out, rd.stop.take()))
}

/// The head a log's chain starts from.
pub fn genesis(log_id: &[u8; 16]) -> [u8; 32] {
    let mut h = blake3::Hasher::new_derive_key("dplog-seal v1 genesis");
    h.update(log_id);
    *h.finalize().as_bytes()
}

/// The chain value after a write: `prev` linked with the write's tag,
/// offset, length and content hash.
pub fn link(prev: &[u8; 32], tag: u8, off: u64, len: u64, content: &[u8; 32]) -> [u8; 32] {
    let mut h = blake3::Hasher::new_derive_key("dplog-seal v1 link");
    h.update(prev);
    h.update(&[tag]);
    h.update(&off.to_le_bytes());
    h.update(&len.to_le_bytes());
    h.update(content);
    *h.finalize().as_bytes()
}

/// The bytes a signature entry signs.
pub fn sign_message(
    log_id: &[u8; 16],
    seq: u64,
    batches: u64,
    end: u64,
    time_ms: u64,
    head: &[u8; 32],
) -> Vec<u8> {
    let mut m = Vec::with_capacity(120);
    m.extend_from_slice(b"dplog-seal v1 sign");
    m.extend_from_slice(log_id);
    m.extend_from_slice(&seq.to_le_bytes());
    m.extend_from_slice(&batches.to_le_bytes());
    m.extend_from_slice(&end.to_le_bytes());
    m.extend_from_slice(&time_ms.to_le_bytes());
    m.extend_from_slice(head);
    m
}

/// The bytes a key change entry signs (with the new key).
pub fn key_message(old: &[u8; 32], new: &[u8; 32], head: &[u8; 32], time_ms: u64) -> Vec<u8> {
    let mut m = Vec::with_capacity(120);
    m.extend_from_slice(b"dplog-seal v1 key");
    m.extend_from_slice(old);
    m.extend_from_slice(new);
    m.extend_from_slice(head);
    m.extend_from_slice(&time_ms.to_le_bytes());
    m
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_millis() as u64
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

fn read_bounded(path: &Path) -> io::Result<String> {
    let f = File::open(path)?;
    let mut s = String::new();
    f.take(MAX_KEY_FILE).read_to_string(&mut s)?;
    Ok(s)
}

/// Loads the Ed25519 private key of a seal from a PKCS#8 PEM file.
///
/// # Errors
/// `NotFound` (missing), `PermissionDenied` (unreadable), or
/// `InvalidInput` when the file is readable by anyone but its owner (its
/// mode must be 0600 or 0400) or is not an Ed25519 PKCS#8 PEM key; each
/// message names the file and says what to do.
pub fn load_signing_key(path: &Path) -> io::Result<SigningKey> {
    let meta = std::fs::metadata(path)
        .map_err(|e| io::Error::new(e.kind(), format!("seal key_file {}: {e}", path.display())))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(invalid(format!(
            "seal key_file {}: mode {mode:04o} lets others read the private key; it must be 0600 \
             (chmod 600 {})",
            path.display(),
            path.display()
        )));
    }
    let pem = read_bounded(path)
        .map_err(|e| io::Error::new(e.kind(), format!("seal key_file {}: {e}", path.display())))?;
    SigningKey::from_pkcs8_pem(&pem).map_err(|e| {
        invalid(format!(
            "seal key_file {}: not an Ed25519 private key in PKCS#8 PEM ({e}); make one with \
             `dplog-verify keygen`",
            path.display()
        ))
    })
}

/// Loads an Ed25519 public key from a SubjectPublicKeyInfo PEM file
/// (`-----BEGIN PUBLIC KEY-----`).
///
/// # Errors
/// The read error, or `InvalidInput` when it is not such a key.
pub fn load_public_key(path: &Path) -> io::Result<VerifyingKey> {
    let pem = read_bounded(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    VerifyingKey::from_public_key_pem(&pem).map_err(|e| {
        invalid(format!(
            "{}: not an Ed25519 public key in PEM ({e})",
            path.display()
        ))
    })
}

/// Generates an Ed25519 key pair from the OS's random source: the private
/// key to `private` (PKCS#8 PEM, created with mode 0600, refused if it
/// exists) and the public key to `public` (PEM, mode 0644, for
/// verifiers). Returns the public key.
///
/// # Errors
/// `AlreadyExists` for an existing private key file, or the write error.
///
/// # Examples
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let (key, pub_) = (dir.path().join("seal.key"), dir.path().join("seal.pub"));
/// let vk = dplog_sinks::seal::generate_key_pair(&key, &pub_).unwrap();
/// assert_eq!(dplog_sinks::seal::load_public_key(&pub_).unwrap(), vk);
/// assert_eq!(dplog_sinks::seal::load_signing_key(&key).unwrap().verifying_key(), vk);
/// ```
pub fn generate_key_pair(private: &Path, public: &Path) -> io::Result<VerifyingKey> {
    let key = SigningKey::generate(&mut rand_core::OsRng);
    let pem = key
        .to_pkcs8_pem(Default::default())
        .map_err(|e| invalid(format!("encoding the private key: {e}")))?;
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(private)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", private.display())))?;
    f.write_all(pem.as_bytes())?;
    f.sync_all()?;
    let vk = key.verifying_key();
    let pub_pem = vk
        .to_public_key_pem(Default::default())
        .map_err(|e| invalid(format!("encoding the public key: {e}")))?;
    let mut p = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .open(public)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", public.display())))?;
    p.write_all(pub_pem.as_bytes())?;
    p.sync_all()?;
    Ok(vk)
}

/// Where a sealed sink computes the BLAKE3 of what it writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HasherMode {
    /// On a hasher thread of the sink's own (`dplog-seal-hash`), while
    /// the consumer formats the next batch: the consumer hands each
    /// written batch buffer over and takes a spare one back (no copy),
    /// and the batch's seal entry is written once it is hashed (by the
    /// consumer, at its next batch, tick, flush, rotation or close). The
    /// default: it takes the hashing (~0.18 ns per byte with AVX-512) off
    /// the consumer thread, which is what limits a binary stream. Used by
    /// file sinks, for the batches the consumer hands over
    /// ([`dplog_core::Sink::write_batch_owned`]); a batch lent
    /// (`write_batch`, as a fan-out lends it to each child) is hashed
    /// inline.
    #[default]
    Thread,
    /// On the thread that writes, as it writes: no second thread, the
    /// seal entry right after the write.
    Inline,
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
    /// sinks hash inline). Default: [`HasherMode::Thread`].
    pub hasher: HasherMode,
    /// The CPU the hasher thread is pinned to (a core the producers and
    /// the consumer do not use); `None`: not pinned. A CPU that cannot
    /// be pinned to leaves the thread unpinned.
    pub hasher_cpu: Option<usize>,
}

impl SealOptions {
    /// Sealing with `key_file`, signing every 60 s, hashing on a hasher
    /// thread, not pinned.
    ///
    /// # Examples
    /// ```
    /// use dplog_sinks::seal::{HasherMode, SealOptions};
    /// let o = SealOptions::new("/etc/dplog/seal.key");
    /// assert_eq!(o.hasher, HasherMode::Thread);
    /// assert_eq!(o.sign_every, Some(std::time::Duration::from_secs(60)));
    /// ```
    pub fn new(key_file: impl Into<PathBuf>) -> Self {
        Self {
            key_file: key_file.into(),
            sign_every: Some(Duration::from_secs(60)),
            hasher: HasherMode::Thread,
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
                started = true;
            }
            Entry::Batch {
                off, len, chain, ..
            } => {
                st.end = off.saturating_add(*len);
                st.head = *chain;
                st.batches += 1;
            }
            Entry::Sign { pubkey, .. } => st.last_key = *pubkey,
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
}

/// The second sink signed heads go to, and what to do when it fails.
struct Anchor {
    sink: Box<dyn dplog_core::Sink>,
    on_error: Box<dyn FnMut(&dplog_core::SinkError) + Send>,
    /// Heads as [`anchor::SealHead`] records in this format; `None`: the
    /// RFC 5424 line of a syslog anchor.
    records: Option<dplog_formatters::SchemaFormatter>,
    /// Scratch for one head's bytes.
    out: Vec<u8>,
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

fn open_side(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .mode(0o644)
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
    /// than the one that signed last is recorded in a `K` entry. Without a
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

    /// Signs the current file's head, syncs its seal and renames it to
    /// `renamed`'s (its output file was renamed there: a sealed archive
    /// segment).
    ///
    /// # Errors
    /// The signature's write, `fdatasync` or `rename(2)`.
    pub fn finish_file(&mut self, renamed: &Path) -> io::Result<()> {
        self.sign(true)?;
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
        if data_size > self.end {
            self.seal_late(data, data_size)?;
        }
        Ok(())
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
        let msg = sign_message(
            &self.log_id,
            self.seq,
            self.batches,
            self.end,
            time_ms,
            &self.head,
        );
        let sig = self.key.sign(&msg).to_bytes();
        self.unsigned = false;
        self.last_sign = Instant::now();
        let r = self.put(&Entry::Sign {
            batches: self.batches,
            end: self.end,
            time_ms,
            head: self.head,
            pubkey: self.pubkey,
            sig,
        });
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
        self.anchor = Some(Anchor {
            sink,
            on_error,
            records: None,
            out: Vec::new(),
        });
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
        self.anchor = Some(Anchor {
            sink,
            on_error,
            records: Some(formatter),
            out: Vec::with_capacity(1024),
        });
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
    /// final signature; call [`start_next`](Self::start_next) once the
    /// new output file is open.
    ///
    /// # Errors
    /// The signature's write or the `rename(2)` error.
    pub fn rotate_to(&mut self, rotated: &Path) -> io::Result<()> {
        self.sign(true)?;
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

    /// Signs the head if anything is unsigned and syncs the seal file
    /// (at the sink's close).
    ///
    /// # Errors
    /// The write or `fdatasync(2)` error.
    pub fn close(&mut self) -> io::Result<()> {
        let signed = self.sign(false);
        if let Some(mut h) = self.hasher.take() {
            h.stop();
        }
        if let Some(mut a) = self.anchor.take() {
            // The last head delivered (a Kafka producer or a ClickHouse
            // insert still holding it), for at most ANCHOR_DRAIN.
            let deadline = Instant::now() + ANCHOR_DRAIN;
            let sent = a.sink.flush().and_then(|()| a.sink.drain(deadline));
            if a.sink.poll().failed_records > 0 {
                let e = io::Error::other("the anchor sink failed to deliver a head");
                (a.on_error)(&dplog_core::SinkError::Permanent(e));
            }
            if let Err(e) = sent.and_then(|()| a.sink.close()) {
                (a.on_error)(&e);
            }
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
