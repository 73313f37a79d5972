//! The seal file's entries (their encoding, see the layout in the parent
//! module), a bounded reader of them, and the chain's hash and signed
//! messages.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::{MAGIC, SEAL_SUFFIX};

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
/// Tag of a close entry: the sink closed the file cleanly.
pub const TAG_CLOSE: u8 = b'C';
/// Tag of a resume entry: a sink started again on a closed file.
pub const TAG_RESUME: u8 = b'R';

/// Bytes after the tag of an entry with tag `tag`; `None` for an unknown
/// tag.
pub fn body_len(tag: u8) -> Option<usize> {
    match tag {
        TAG_START => Some(104),
        TAG_BATCH | TAG_LATE => Some(80),
        TAG_SIGN | TAG_CLOSE | TAG_RESUME => Some(152),
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

/// The fields a signature (`S`), a close (`C`) and a resume (`R`) entry
/// share: the chain head after so many writes of a file, signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signed {
    /// `B`/`L` entries of this file so far.
    pub batches: u64,
    /// Byte offset where the sealed bytes end (at a close: the file's
    /// length).
    pub end: u64,
    /// Unix milliseconds.
    pub time_ms: u64,
    /// The chain head signed.
    pub head: [u8; 32],
    /// The signer's public key.
    pub pubkey: [u8; 32],
    /// Ed25519 signature of [`message`](Self::message).
    pub sig: [u8; 64],
}

impl Signed {
    /// The bytes the entry with `tag` ([`TAG_SIGN`], [`TAG_CLOSE`] or
    /// [`TAG_RESUME`]) signs in file `seq` of log `log_id`:
    /// [`sign_message`] for a signature, [`mark_message`] for the others.
    pub fn message(&self, tag: u8, log_id: &[u8; 16], seq: u64) -> Vec<u8> {
        let (n, end, t, h) = (self.batches, self.end, self.time_ms, &self.head);
        if tag == TAG_SIGN {
            sign_message(log_id, seq, n, end, t, h)
        } else {
            mark_message(tag, log_id, seq, n, end, t, h)
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        put(out, &self.batches.to_le_bytes());
        put(out, &self.end.to_le_bytes());
        put(out, &self.time_ms.to_le_bytes());
        put(out, &self.head);
        put(out, &self.pubkey);
        put(out, &self.sig);
    }

    fn decode(b: &[u8]) -> Self {
        Signed {
            batches: u64_at(b, 0),
            end: u64_at(b, 8),
            time_ms: u64_at(b, 16),
            head: arr(b, 24),
            pubkey: arr(b, 56),
            sig: arr(b, 88),
        }
    }
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
    /// `S`: a signature over the chain head ([`sign_message`]).
    Sign(Signed),
    /// `C`: the sink closed the file cleanly (at its close, at a
    /// rotation, or when it moved on to the log's next file): nothing is
    /// written to it after this entry unless a [`Resume`](Entry::Resume)
    /// follows. Signed over [`mark_message`] with [`TAG_CLOSE`].
    Close(Signed),
    /// `R`: a sink started again on a file whose seal ends with a
    /// [`Close`](Entry::Close): the writes after it, from its head on,
    /// are the sink's. Signed over [`mark_message`] with [`TAG_RESUME`].
    Resume(Signed),
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
            Entry::Sign(_) => TAG_SIGN,
            Entry::Close(_) => TAG_CLOSE,
            Entry::Resume(_) => TAG_RESUME,
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
            Entry::Sign(s) | Entry::Close(s) | Entry::Resume(s) => s.encode(out),
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
            TAG_SIGN => Entry::Sign(Signed::decode(b)),
            TAG_CLOSE => Entry::Close(Signed::decode(b)),
            TAG_RESUME => Entry::Resume(Signed::decode(b)),
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
    signed_fields(
        b"dplog-seal v1 sign",
        log_id,
        seq,
        batches,
        end,
        time_ms,
        head,
    )
}

/// The bytes a close (`tag` [`TAG_CLOSE`]) or resume ([`TAG_RESUME`])
/// entry signs: `"dplog-seal v1 close"` or `"dplog-seal v1 resume"`, then
/// the fields of [`sign_message`]. A domain of their own, so neither can
/// be passed off as a signature entry, nor one as the other.
pub fn mark_message(
    tag: u8,
    log_id: &[u8; 16],
    seq: u64,
    batches: u64,
    end: u64,
    time_ms: u64,
    head: &[u8; 32],
) -> Vec<u8> {
    let domain: &[u8] = if tag == TAG_CLOSE {
        b"dplog-seal v1 close"
    } else {
        b"dplog-seal v1 resume"
    };
    signed_fields(domain, log_id, seq, batches, end, time_ms, head)
}

/// `domain`, then the signed fields, integers little-endian.
fn signed_fields(
    domain: &[u8],
    log_id: &[u8; 16],
    seq: u64,
    batches: u64,
    end: u64,
    time_ms: u64,
    head: &[u8; 32],
) -> Vec<u8> {
    let mut m = Vec::with_capacity(128);
    m.extend_from_slice(domain);
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
