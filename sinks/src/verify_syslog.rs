//! Checks a syslog receiver's file against the RFC 5848 Signature
//! Blocks a signing syslog sink sent with its records
//! ([`SyslogSignOptions`](crate::syslog::SyslogSignOptions)):
//! `dplog-verify --syslog --key PUB FILE`.
//!
//! The file holds one message a line, as received (rsyslog:
//! `template(... string="%rawmsg%\n")`). Every line whose structured data
//! is an `ssign` or `ssign-cert` element is a block; every other line is
//! a message, hashed (SHA-256 of the line without its `\n`) and matched
//! against the hashes the Signature Blocks carry, in message-number order
//! within each reboot session (`RSID`). A session starts at the first
//! block line with its RSID (the Certificate Block the sink sends before
//! any record); lines before the first block belong to no session.
//!
//! The first place where the file stops matching what was signed is
//! reported with its line (from 1) and byte offset:
//! - a message signed but not in the file: [`SyslogProblem::Removed`],
//!   at the line where it should be;
//! - a line in the place of a signed message that hashes to nothing
//!   signed: [`SyslogProblem::Altered`] (the expected message is nowhere)
//!   or [`SyslogProblem::Inserted`] (the expected message follows);
//! - a signed message out of its place: [`SyslogProblem::Reordered`];
//! - a block whose signature does not verify with any `--key`:
//!   [`SyslogProblem::OtherKey`] when the session's Certificate Block
//!   carries the key that made it, [`SyslogProblem::BadSignature`]
//!   otherwise (an altered block); a Certificate Block with a key not
//!   given: `OtherKey`;
//! - a Signature Block missing from the session's sequence (the next
//!   one's `FMN` skips message numbers): [`SyslogProblem::BlockRemoved`];
//!   two different blocks with one `GBC`, or blocks whose messages
//!   overlap: [`SyslogProblem::BlockConflict`]; a session whose RSID does
//!   not increase: [`SyslogProblem::SessionOrder`].
//!
//! Notes (not tampering, but not proven): messages after a session's last
//! Signature Block (the signer stopped before signing them, or the last
//! blocks were cut off), lines before the first block, a duplicate of a
//! message already matched (a TCP or RELP resend; or a replayed line).
//!
//! Errors ([`io::Error`], `InvalidData`): a block line that is not a
//! well-formed block (named by line), a `VER` this verifier does not
//! implement (RFC 5848's scheme 1, OpenPGP DSA), a line longer than
//! [`SyslogLimits::max_line`], a file longer than
//! [`SyslogLimits::max_bytes`].

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use ed25519_dalek::pkcs8::DecodePublicKey;
/// The public keys the blocks are checked with ([`crate::seal::load_public_key`]).
pub use ed25519_dalek::VerifyingKey;
use ed25519_dalek::{Signature, Verifier};
use sha2::{Digest, Sha256};

use crate::syslog::sign::VER;

/// What went wrong, in the terms of the manipulation that explains it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyslogProblem {
    /// A signed message is not in the file.
    Removed,
    /// A line in a signed message's place hashes to no signed message,
    /// and that message is nowhere in the file.
    Altered,
    /// A line hashes to no signed message and the expected one follows.
    Inserted,
    /// A signed message sits out of its place.
    Reordered,
    /// Signed by a key that is not one of the trusted keys.
    OtherKey,
    /// A block's signature does not verify (the block was altered).
    BadSignature,
    /// A Signature Block of the session's sequence is missing: the next
    /// one starts after messages no block present signs.
    BlockRemoved,
    /// Two different Signature Blocks carry one `GBC`, or two sign the
    /// same message numbers.
    BlockConflict,
    /// A session's RSID does not increase over the one before it.
    SessionOrder,
}

impl fmt::Display for SyslogProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SyslogProblem::Removed => "removed",
            SyslogProblem::Altered => "altered",
            SyslogProblem::Inserted => "inserted",
            SyslogProblem::Reordered => "reordered",
            SyslogProblem::OtherKey => "signed by another key",
            SyslogProblem::BadSignature => "bad signature",
            SyslogProblem::BlockRemoved => "signature block removed",
            SyslogProblem::BlockConflict => "conflicting signature blocks",
            SyslogProblem::SessionOrder => "session out of order",
        })
    }
}

/// Where and why the check stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyslogFinding {
    /// What went wrong.
    pub problem: SyslogProblem,
    /// The receiver's file.
    pub file: PathBuf,
    /// The line where it stops holding, from 1.
    pub line: u64,
    /// Its byte offset in the file.
    pub byte: u64,
    /// The details (message numbers, the session).
    pub detail: String,
}

impl fmt::Display for SyslogFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} at line {} (byte {}): {}",
            self.file.display(),
            self.problem,
            self.line,
            self.byte,
            self.detail
        )
    }
}

/// The outcome of checking a receiver's file.
#[derive(Clone, Debug, Default)]
pub struct SyslogReport {
    /// The first problem, if any.
    pub finding: Option<SyslogFinding>,
    /// Remarks that are not tampering but limit what is proven.
    pub notes: Vec<String>,
    /// Messages matched against a signed hash.
    pub verified: u64,
    /// Messages not covered by any Signature Block.
    pub unsigned: u64,
    /// Distinct Signature Blocks whose signature verified.
    pub blocks: u64,
    /// Reboot sessions seen, in file order.
    pub sessions: Vec<u64>,
}

/// Bounds on what the check reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyslogLimits {
    /// Longest file, in bytes. Default 4 GiB. Memory is about 120 bytes
    /// per message line (its hash and place, and the signed hash).
    pub max_bytes: u64,
    /// Longest line, in bytes (rsyslog's `maxMessageSize` and its `\n`).
    /// Default 65537.
    pub max_line: usize,
}

impl Default for SyslogLimits {
    fn default() -> Self {
        Self {
            max_bytes: 4 << 30,
            max_line: 65_537,
        }
    }
}

/// A message line: its hash and where it is.
struct Line {
    hash: [u8; 32],
    line: u64,
    byte: u64,
    /// Line and byte just past it.
    next: (u64, u64),
}

/// A Signature Block: where it is and what it signs.
struct Block {
    line: u64,
    byte: u64,
    fmn: u64,
    hashes: Vec<[u8; 32]>,
}

/// One reboot session: its blocks by GBC and its message lines.
struct Session {
    rsid: u64,
    line: u64,
    byte: u64,
    blocks: HashMap<u64, Block>,
    /// Keys the session's Certificate Blocks carry.
    cert_keys: Vec<VerifyingKey>,
    msgs: Vec<Line>,
}

/// One SD-PARAM of a block line: name and the byte range of its value.
type Param<'a> = (&'a str, std::ops::Range<usize>);

fn malformed(path: &Path, line: u64, why: impl fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "{} line {line}: malformed RFC 5848 block: {why}",
            path.display()
        ),
    )
}

/// The SD-ID of `msg` when its structured data is an RFC 5848 block
/// (`ssign` or `ssign-cert`), and the offset of its `[`.
fn block_kind(msg: &[u8]) -> Option<(&'static str, usize)> {
    // HEADER: PRI VERSION SP TIMESTAMP SP HOSTNAME SP APP-NAME SP PROCID
    // SP MSGID SP, then STRUCTURED-DATA.
    if msg.first() != Some(&b'<') {
        return None;
    }
    let mut at = 0;
    for _ in 0..6 {
        at += memchr::memchr(b' ', &msg[at..])? + 1;
    }
    let sd = &msg[at..];
    if sd.starts_with(b"[ssign ") {
        Some(("ssign", at))
    } else if sd.starts_with(b"[ssign-cert ") {
        Some(("ssign-cert", at))
    } else {
        None
    }
}

/// The HOSTNAME field of an RFC 5424 message.
fn host_of(msg: &[u8]) -> Option<&[u8]> {
    let mut it = msg.splitn(4, |&b| b == b' ');
    it.next()?;
    it.next()?;
    it.next()
}

/// Parses the SD element of a block: `[ID NAME="VALUE" ...]` ending the
/// line, values without escapes (none of the block's values has `"`,
/// `\` or `]`). Returns the params in order.
fn params<'a>(msg: &'a [u8], at: usize, id: &str) -> Result<Vec<Param<'a>>, String> {
    let mut i = at + 1 + id.len();
    let mut out = Vec::new();
    loop {
        match msg.get(i) {
            Some(b']') if i + 1 == msg.len() => return Ok(out),
            Some(b']') => return Err("bytes after the structured data".into()),
            Some(b' ') => i += 1,
            _ => return Err(format!("expected a parameter at byte {i}")),
        }
        let eq = memchr::memchr(b'=', &msg[i..]).ok_or("a parameter without '='")? + i;
        let name = std::str::from_utf8(&msg[i..eq]).map_err(|_| "a parameter name not ASCII")?;
        if msg.get(eq + 1) != Some(&b'"') {
            return Err(format!("{name}: value not quoted"));
        }
        let v0 = eq + 2;
        let v1 =
            memchr::memchr(b'"', &msg[v0..]).ok_or(format!("{name}: unterminated value"))? + v0;
        if msg[v0..v1].iter().any(|&b| b == b'\\' || b == b']') {
            return Err(format!(
                "{name}: an escaped or ']' character in a block value"
            ));
        }
        out.push((name, v0..v1));
        i = v1 + 1;
    }
}

/// The params of `id` in RFC 5848's order, as text values; `SIGN`'s
/// range is returned too.
fn fields<'a>(
    msg: &'a [u8],
    at: usize,
    id: &str,
    names: &[&str],
) -> Result<(Vec<&'a str>, std::ops::Range<usize>), String> {
    let ps = params(msg, at, id)?;
    let got: Vec<&str> = ps.iter().map(|p| p.0).collect();
    if got != names {
        return Err(format!(
            "parameters {} (RFC 5848 wants {} in this order)",
            got.join(","),
            names.join(",")
        ));
    }
    let sign = ps.last().expect("names is not empty").1.clone();
    let vals = ps
        .iter()
        .map(|(n, r)| std::str::from_utf8(&msg[r.clone()]).map_err(|_| format!("{n}: not text")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((vals, sign))
}

fn num(name: &str, v: &str, digits: usize) -> Result<u64, String> {
    if v.is_empty() || v.len() > digits || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{name}={v:?}: not 1..={digits} decimal digits"));
    }
    v.parse().map_err(|e| format!("{name}={v:?}: {e}"))
}

/// The bytes a block's signature covers: the line without its
/// ` SIGN="..."` parameter (`sign`: the value's range; the parameter is
/// the last one, checked by [`fields`]).
fn signed_bytes(msg: &[u8], sign: &std::ops::Range<usize>) -> Vec<u8> {
    let mut b = Vec::with_capacity(msg.len());
    b.extend_from_slice(&msg[..sign.start - b" SIGN=\"".len()]);
    b.extend_from_slice(&msg[sign.end + 1..]);
    b
}

fn signature(v: &str) -> Result<Signature, String> {
    let raw = B64
        .decode(v)
        .map_err(|e| format!("SIGN: not base64: {e}"))?;
    Signature::from_slice(&raw)
        .map_err(|_| format!("SIGN: {} bytes, not an Ed25519 signature", raw.len()))
}

/// Checks the receiver's file `path` against its Signature Blocks with
/// the `trusted` public keys (the `.pub` files of `dplog-verify keygen`).
/// `host`: only lines with this HOSTNAME are checked (the signer's,
/// when the receiver writes other hosts to the same file); None: all.
///
/// Errors: the file cannot be read, exceeds `limits`, or holds a
/// malformed block (named by line); see the module docs.
///
/// # Examples
///
/// ```no_run
/// use dplog_sinks::{seal, verify_syslog};
/// let key = seal::load_public_key("syslog-sign.pub".as_ref())?;
/// let report = verify_syslog::verify_syslog_file(
///     "/var/log/remote/dataplane.log".as_ref(),
///     &[key],
///     None,
///     verify_syslog::SyslogLimits::default(),
/// )?;
/// match &report.finding {
///     Some(f) => eprintln!("{f}"),
///     None => println!("{} messages verified", report.verified),
/// }
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn verify_syslog_file(
    path: &Path,
    trusted: &[VerifyingKey],
    host: Option<&str>,
    limits: SyslogLimits,
) -> io::Result<SyslogReport> {
    let f = File::open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    let size = f.metadata()?.len();
    if size > limits.max_bytes {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: {size} bytes, above the limit of {} (--max-bytes)",
                path.display(),
                limits.max_bytes
            ),
        ));
    }
    let mut r = BufReader::with_capacity(1 << 16, f);
    let mut report = SyslogReport::default();
    let mut sessions: Vec<Session> = Vec::new();
    let mut before_first = 0u64;
    let mut buf = Vec::new();
    let (mut line, mut byte) = (0u64, 0u64);
    let finding = |problem, line, byte, detail: String| SyslogFinding {
        problem,
        file: path.to_path_buf(),
        line,
        byte,
        detail,
    };
    loop {
        buf.clear();
        let n = io::Read::take(&mut r, limits.max_line as u64 + 1).read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        line += 1;
        let at = byte;
        byte += n as u64;
        if byte > limits.max_bytes {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: grew past the limit of {} bytes while read",
                    path.display(),
                    limits.max_bytes
                ),
            ));
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        } else if n > limits.max_line {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} line {line}: longer than {} bytes (--max-line)",
                    path.display(),
                    limits.max_line
                ),
            ));
        }
        let msg = &buf[..];
        if let Some(h) = host {
            if host_of(msg) != Some(h.as_bytes()) {
                continue;
            }
        }
        let Some((id, sd)) = block_kind(msg) else {
            let hash: [u8; 32] = Sha256::digest(msg).into();
            let l = Line {
                hash,
                line,
                byte: at,
                next: (line + 1, byte),
            };
            match sessions.last_mut() {
                Some(s) => s.msgs.push(l),
                None => before_first += 1,
            }
            continue;
        };
        let bad = |why: String| malformed(path, line, why);
        let names: &[&str] = if id == "ssign" {
            &[
                "VER", "RSID", "SG", "SPRI", "GBC", "FMN", "CNT", "HB", "SIGN",
            ]
        } else {
            &[
                "VER", "RSID", "SG", "SPRI", "TPBL", "INDEX", "FLEN", "FRAG", "SIGN",
            ]
        };
        let (v, sign_at) = fields(msg, sd, id, names).map_err(bad)?;
        if v[0] != VER {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} line {line}: an RFC 5848 block with VER={:?}, which this verifier does \
                     not check: it checks {VER:?} (SHA-256, Ed25519) only{}",
                    path.display(),
                    v[0],
                    if v[0].ends_with('1') {
                        "; signature scheme 1 (OpenPGP DSA) is not implemented"
                    } else {
                        ""
                    }
                ),
            ));
        }
        let rsid = num("RSID", v[1], 10).map_err(bad)?;
        num("SG", v[2], 1).map_err(bad)?;
        num("SPRI", v[3], 3).map_err(bad)?;
        let sig = signature(v[8]).map_err(bad)?;
        let signed = signed_bytes(msg, &sign_at);
        // The session this block belongs to: a new RSID starts one.
        let cur = sessions.last().map(|s| s.rsid);
        if cur != Some(rsid) {
            if let Some(c) = cur {
                if rsid <= c || sessions.iter().any(|s| s.rsid == rsid) {
                    report.finding = Some(finding(
                        SyslogProblem::SessionOrder,
                        line,
                        at,
                        format!("a block of reboot session {rsid} after session {c}"),
                    ));
                    break;
                }
            }
            sessions.push(Session {
                rsid,
                line,
                byte: at,
                blocks: HashMap::new(),
                cert_keys: Vec::new(),
                msgs: Vec::new(),
            });
            report.sessions.push(rsid);
        }
        let s = sessions.last_mut().expect("pushed above");
        if id == "ssign-cert" {
            let tpbl = num("TPBL", v[4], 8).map_err(bad)?;
            let index = num("INDEX", v[5], 8).map_err(bad)?;
            let flen = num("FLEN", v[6], 4).map_err(bad)?;
            if index != 1 || flen != tpbl || v[7].len() as u64 != flen {
                return Err(bad(format!(
                    "a fragmented or inconsistent Payload Block (TPBL {tpbl}, INDEX {index}, FLEN \
                     {flen}, FRAG {} bytes); dplog sends it whole",
                    v[7].len()
                )));
            }
            let mut parts = v[7].split(' ');
            let (_ts, kind, blob) = (parts.next(), parts.next(), parts.next());
            if kind != Some("K") || parts.next().is_some() {
                return Err(bad("Payload Block: not `TIMESTAMP K KEY`".into()));
            }
            let der = B64
                .decode(blob.unwrap_or(""))
                .map_err(|e| bad(format!("Payload Block key: not base64: {e}")))?;
            let key = VerifyingKey::from_public_key_der(&der)
                .map_err(|e| bad(format!("Payload Block key: not an Ed25519 public key: {e}")))?;
            if key.verify(&signed, &sig).is_err() {
                report.finding = Some(finding(
                    SyslogProblem::BadSignature,
                    line,
                    at,
                    format!("the Certificate Block of session {rsid} is not signed by the key it carries"),
                ));
                break;
            }
            if !trusted.contains(&key) {
                report.finding = Some(finding(
                    SyslogProblem::OtherKey,
                    line,
                    at,
                    format!("the Certificate Block of session {rsid} carries a key not given with --key"),
                ));
                break;
            }
            if !s.cert_keys.contains(&key) {
                s.cert_keys.push(key);
            }
            continue;
        }
        let gbc = num("GBC", v[4], 10).map_err(bad)?;
        let fmn = num("FMN", v[5], 10).map_err(bad)?;
        let cnt = num("CNT", v[6], 2).map_err(bad)?;
        let hashes = v[7]
            .split(' ')
            .map(|h| {
                let raw = B64.decode(h).map_err(|e| format!("HB: not base64: {e}"))?;
                <[u8; 32]>::try_from(raw.as_slice())
                    .map_err(|_| format!("HB: a hash of {} bytes, not SHA-256", raw.len()))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(bad)?;
        if cnt == 0 || hashes.len() as u64 != cnt || fmn == 0 {
            return Err(bad(format!(
                "CNT {cnt} with {} hashes, GBC {gbc}, FMN {fmn}",
                hashes.len()
            )));
        }
        if !trusted.iter().any(|k| k.verify(&signed, &sig).is_ok()) {
            let other = s.cert_keys.iter().any(|k| k.verify(&signed, &sig).is_ok());
            report.finding = Some(finding(
                if other {
                    SyslogProblem::OtherKey
                } else {
                    SyslogProblem::BadSignature
                },
                line,
                at,
                format!(
                    "Signature Block {gbc} of session {rsid} (messages {fmn}..={}){}",
                    fmn + cnt - 1,
                    if other {
                        " is signed by a key not given with --key"
                    } else {
                        " does not verify: altered, or signed by an unknown key"
                    }
                ),
            ));
            break;
        }
        match s.blocks.get(&gbc) {
            Some(b) if b.fmn == fmn && b.hashes == hashes => {} // a copy
            Some(b) => {
                report.finding = Some(finding(
                    SyslogProblem::BlockConflict,
                    line,
                    at,
                    format!(
                        "Signature Block {gbc} of session {rsid} differs from the one at line {}",
                        b.line
                    ),
                ));
                break;
            }
            None => {
                s.blocks.insert(
                    gbc,
                    Block {
                        line,
                        byte: at,
                        fmn,
                        hashes,
                    },
                );
                report.blocks += 1;
            }
        }
    }
    if before_first > 0 {
        report.notes.push(format!(
            "{before_first} message line(s) before the first signature or certificate block: not signed"
        ));
        report.unsigned += before_first;
    }
    if report.finding.is_none() {
        for s in &sessions {
            if let Some(f) = check_session(s, &mut report) {
                report.finding = Some(SyslogFinding {
                    file: path.to_path_buf(),
                    ..f
                });
                break;
            }
        }
    }
    Ok(report)
}

/// Matches a session's message lines against its Signature Blocks;
/// the first problem (its `file` left empty), or None with the counts
/// and notes added to `report`.
fn check_session(s: &Session, report: &mut SyslogReport) -> Option<SyslogFinding> {
    let f = |problem, line, byte, detail: String| {
        Some(SyslogFinding {
            problem,
            file: PathBuf::new(),
            line,
            byte,
            detail,
        })
    };
    // The signed sequence: the Signature Blocks in GBC order, each
    // starting at the message after the last one's (one Signature Group:
    // message numbers are consecutive). GBC also counts Certificate
    // Blocks, which carry none, so gaps in it are normal; a gap in the
    // message numbers is a block that is not there.
    let mut gbcs: Vec<u64> = s.blocks.keys().copied().collect();
    gbcs.sort_unstable();
    let mut expected: Vec<[u8; 32]> = Vec::new();
    for g in &gbcs {
        let b = &s.blocks[g];
        let want = expected.len() as u64 + 1;
        if b.fmn > want {
            return f(
                SyslogProblem::BlockRemoved,
                b.line,
                b.byte,
                format!(
                    "session {}: Signature Block {g} starts at message {}; messages {want}..={} \
                     are in no Signature Block of the file (one was removed)",
                    s.rsid,
                    b.fmn,
                    b.fmn - 1
                ),
            );
        }
        if b.fmn < want {
            return f(
                SyslogProblem::BlockConflict,
                b.line,
                b.byte,
                format!(
                    "session {}: Signature Block {g} starts at message {}, signed already by \
                     the block before it (up to {})",
                    s.rsid,
                    b.fmn,
                    want - 1
                ),
            );
        }
        expected.extend_from_slice(&b.hashes);
    }
    // Matched in order; on the first mismatch, one scan each way tells
    // what happened (nothing is indexed ahead: memory stays the lines and
    // the signed hashes). The hashes matched so far are put in a set only
    // once a line repeats one (a resend), and kept up to date from then.
    let (mut i, mut j) = (0usize, 0usize);
    let mut dups = 0u64;
    let mut matched: Option<HashSet<[u8; 32]>> = None;
    while i < expected.len() && j < s.msgs.len() {
        let m = &s.msgs[j];
        if m.hash == expected[i] {
            if let Some(set) = matched.as_mut() {
                set.insert(m.hash);
            }
            i += 1;
            j += 1;
            continue;
        }
        let set = matched.get_or_insert_with(|| expected[..i].iter().copied().collect());
        if set.contains(&m.hash) {
            dups += 1;
            j += 1;
            continue;
        }
        let num = i as u64 + 1;
        // Signed later as message k + 1? Is the expected message further on?
        let m_signed_as = expected[i + 1..]
            .iter()
            .position(|h| *h == m.hash)
            .map(|p| p + i + 1);
        let exp_later = s.msgs[j + 1..].iter().any(|l| l.hash == expected[i]);
        return match (m_signed_as, exp_later) {
            (Some(k), true) => f(
                SyslogProblem::Reordered,
                m.line,
                m.byte,
                format!(
                    "session {}: message {} is here, where message {num} belongs",
                    s.rsid,
                    k + 1
                ),
            ),
            (Some(k), false) => f(
                SyslogProblem::Removed,
                m.line,
                m.byte,
                format!(
                    "session {}: message(s) {num}..={} are missing before this line",
                    s.rsid, k
                ),
            ),
            (None, true) => f(
                SyslogProblem::Inserted,
                m.line,
                m.byte,
                format!(
                    "session {}: this line was not signed; message {num} follows later",
                    s.rsid
                ),
            ),
            (None, false) => f(
                SyslogProblem::Altered,
                m.line,
                m.byte,
                format!(
                    "session {}: this line is not message {num} as signed (its hash differs)",
                    s.rsid
                ),
            ),
        };
    }
    if i < expected.len() {
        // Signed messages the file does not hold, at its end.
        let (line, byte) = match j.checked_sub(1).map(|k| &s.msgs[k]) {
            Some(m) => m.next,
            None => (s.line + 1, s.byte),
        };
        return f(
            SyslogProblem::Removed,
            line,
            byte,
            format!(
                "session {}: message(s) {}..={} are signed but not in the file",
                s.rsid,
                i + 1,
                expected.len()
            ),
        );
    }
    report.verified += i as u64;
    if dups > 0 {
        report.notes.push(format!(
            "session {}: {dups} duplicate(s) of messages already matched (a TCP or RELP resend, \
             or a replayed line)",
            s.rsid
        ));
    }
    let tail = &s.msgs[j..];
    if let Some(first) = tail.first() {
        report.unsigned += tail.len() as u64;
        report.notes.push(format!(
            "session {}: {} message line(s) from line {} (byte {}) are after its last Signature \
             Block: not signed",
            s.rsid,
            tail.len(),
            first.line,
            first.byte
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 5848's own example blocks (section 4.2.9 and 5.3.2.9, the
    /// lines joined as the RFC says): a Certificate Block with a `K` key
    /// (OpenPGP MPIs p, q, g, y) and a Signature Block, both DSA/SHA-1.
    const RFC_CERT: &[u8] = b"<110>1 2009-05-03T14:00:39.519307+02:00 host.example.org syslogd 2138 - \
[ssign-cert VER=\"0111\" RSID=\"1\" SG=\"0\" SPRI=\"0\" TPBL=\"587\" INDEX=\"1\" FLEN=\"587\" \
FRAG=\"2009-05-03T14:00:39.519005+02:00 K BACsLMZNCV2NUAwe4RAeAnSQuvv2KS51SnHFAaWJNU2XVDYvW1LjmJgg4vKvQPo3HEOD+2hEkt1z\
cXADe03u5pmHoWy5FGiyCbglYxJkUJJrQqlTSS6vID9yhsmEnh07w3pOsxmb4qYo0uWQrAAenBweVMlBgV3ZA5IMA8xq8l+i8wCgkWJjCjfLar7s+0X3HVrRroyARv8EAIYoxofh9m\
N8n821BTTuQnz5hp40d6Z3UudKePu2di5Mx3GFelwnV0Qh5mSs0YkuHJg0mcXyUAoeYry5X6482fUxbm+gOHVmYSDtBmZEB8PTEt8Os8aedWgKEt/E4dT+Hmod4omECLteLXxtScTM\
gDXyC+bSBMjRRCaeWhHrYYdYBACCWMdTc12hRLJTn8LX99kv1I7qwgieyna8GCJv/rEgCssS9E1qARM+h19KovIUOhl4VzBw3rK7v8Dlw/CJyYDd5kwSvCwjhO21LiReeS90VPYuZF\
RC1B82Sub152zOqIcAWsgd4myCCiZbWBsuJ8P0gtarFIpleNacCc6OV3i2Rg==\" \
SIGN=\"AKAQEUiQptgpd0lKcXbuggGXH/dCdQCgdysrTBLUlbeGAQ4vwrnLOqSL7+c=\"]";
    const RFC_SIG: &[u8] = b"<110>1 2009-05-03T14:00:39.529966+02:00 host.example.org syslogd 2138 - \
[ssign VER=\"0111\" RSID=\"1\" SG=\"0\" SPRI=\"0\" GBC=\"2\" FMN=\"1\" CNT=\"7\" \
HB=\"K6wzcombEvKJ+UTMcn9bPryAeaU= zrkDcIeaDluypaPCY8WWzwHpPok= zgrWOdpx16ADc7UmckyIFY53icE= \
XfopJ+S8/hODapiBBCgVQaLqBKg= J67gKMFl/OauTC20ibbydwIlJC8= M5GziVgB6KPY3ERU1HXdSi2vtdw= \
Wxd/lU7uG/ipEYT9xeqnsfohyH0=\" SIGN=\"AKBbX4J7QkrwuwdbV7Taujk2lvOf8gCgC62We1QYfnrNHz7FzAvdySuMyfM=\"]";

    /// Checks a DSA/SHA-1 signature (OpenPGP MPIs r, s) over `signed`
    /// with the key `k` (MPIs p, q, g, y) in python3's `cryptography`
    /// (a real implementation, not ours); None when it is not installed.
    fn dsa_sha1_verifies(k: &str, sig: &str, signed: &[u8]) -> Option<bool> {
        const PY: &str = r#"
import base64, sys
try:
    from cryptography.hazmat.primitives.asymmetric import dsa, utils
    from cryptography.hazmat.primitives import hashes
    from cryptography.exceptions import InvalidSignature
except ImportError:
    print("missing"); sys.exit(0)
def mpis(b):
    out, i = [], 0
    while i < len(b):
        n = (int.from_bytes(b[i:i+2], "big") + 7) // 8
        out.append(int.from_bytes(b[i+2:i+2+n], "big")); i += 2 + n
    return out
p, q, g, y = mpis(base64.b64decode(sys.argv[1]))
r, s = mpis(base64.b64decode(sys.argv[2]))
key = dsa.DSAPublicNumbers(y, dsa.DSAParameterNumbers(p, q, g)).public_key()
try:
    key.verify(utils.encode_dss_signature(r, s), sys.stdin.buffer.read(), hashes.SHA1())
    print("ok")
except InvalidSignature:
    print("bad")
"#;
        use std::io::Write as _;
        use std::process::{Command, Stdio};
        let mut c = match Command::new("python3")
            .args(["-c", PY, k, sig])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
        {
            Ok(c) => c,
            Err(_) => return None,
        };
        c.stdin.take().unwrap().write_all(signed).unwrap();
        let out = c.wait_with_output().unwrap();
        match String::from_utf8_lossy(&out.stdout).trim() {
            "ok" => Some(true),
            "bad" => Some(false),
            _ => None,
        }
    }

    /// The parser takes RFC 5848's own example blocks (parameters in
    /// order, a FRAG with spaces whose length is TPBL), and the bytes
    /// `signed_bytes` takes from them (the message without its ` SIGN=`
    /// parameter) are the bytes the RFC's signer signed: its DSA
    /// signatures verify over them, and not over the message with an
    /// empty SIGN value.
    #[test]
    fn rfc5848s_example_blocks_parse_and_sign_the_message_without_sign() {
        let cert_names = [
            "VER", "RSID", "SG", "SPRI", "TPBL", "INDEX", "FLEN", "FRAG", "SIGN",
        ];
        let sig_names = [
            "VER", "RSID", "SG", "SPRI", "GBC", "FMN", "CNT", "HB", "SIGN",
        ];
        let (id, at) = block_kind(RFC_CERT).unwrap();
        assert_eq!(id, "ssign-cert");
        let (cv, csign) = fields(RFC_CERT, at, id, &cert_names).unwrap();
        assert_eq!((cv[0], cv[4], cv[7].len()), ("0111", "587", 587));
        let key = cv[7].split(' ').nth(2).unwrap();
        let (id, at) = block_kind(RFC_SIG).unwrap();
        assert_eq!(id, "ssign");
        let (sv, ssign) = fields(RFC_SIG, at, id, &sig_names).unwrap();
        assert_eq!(
            (sv[4], sv[5], sv[6], sv[7].split(' ').count()),
            ("2", "1", "7", 7)
        );
        for (msg, v, sign) in [(RFC_CERT, &cv, &csign), (RFC_SIG, &sv, &ssign)] {
            let signed = signed_bytes(msg, sign);
            assert_eq!(signed.len(), msg.len() - b" SIGN=\"\"".len() - v[8].len());
            let Some(ok) = dsa_sha1_verifies(key, v[8], &signed) else {
                eprintln!("SKIPPED: python3 with cryptography not installed (scripts/setup.sh)");
                return;
            };
            assert!(ok, "{}", String::from_utf8_lossy(&signed));
            let mut empty = msg[..sign.start].to_vec();
            empty.extend_from_slice(&msg[sign.end..]);
            assert_eq!(dsa_sha1_verifies(key, v[8], &empty), Some(false));
        }
    }
}
