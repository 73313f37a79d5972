//! `dplog-verify --key seal.pub FILE...`: checks files a sealed file sink
//! wrote (`seal = { key_file = ... }`) against their seal files
//! (`FILE.seal`): every write's bytes against the BLAKE3 hash chain, and
//! every signature over the chain's head against the trusted public
//! keys. A rotated set (`FILE.<13-digit ms>` beside `FILE`) is checked
//! as one chain, oldest first, unless `--only` is given; so are the
//! segments of a directory given as FILE (an `archive` sink's, or one
//! prefix's `mmap` segments).
//!
//! The first place where the chain stops holding is named on stderr:
//! the file, the first record (line, binary frame or IPFIX message,
//! counted from 1 at the start of the file) and its byte offset, the
//! byte range of the write that fails, and why: removed, altered,
//! inserted, reordered, truncated (or, inside the last sealed write,
//! where the seal cannot tell them apart, removed or truncated, altered
//! or inserted), appended after the sink closed the file, spliced from
//! another log, re-signed with another key, a bad signature, a missing
//! file of the set. What
//! precedes it is proven; nothing after it is checked. The unit is one
//! write of the sink (a batch), so the record named is the first of the
//! first write that fails.
//!
//! Notes (stderr, `note:`) name what holds but is not proven by a
//! signature: bytes after the last signature (a crash before the next
//! one), bytes not sealed (a crash between a write and its seal entry;
//! bytes in the file before sealing started), a key change, earlier files
//! of a set that retention deleted. `--strict` turns a note into exit 3.
//!
//! Exit status, as `dplog-cat`'s: 0 verified, every byte under a trusted
//! signature; 1 error (an unreadable file or seal file, a bad key file, a
//! seal signed by a key none of `--key` is and that records none of them:
//! a wrong `--key`, said so, not tampering; 3 wins over it); 2
//! the command line does not parse; 3 tampering found (or, with
//! `--strict`, a note; bytes after a clean close included); 4 no
//! tampering found, but not every byte is proven: bytes after the last
//! signature or not sealed (a crash, a log still being written, bytes
//! after a seal without a close entry), or no signature at all. The chain has no key, so a log rewritten without the
//! private key, its seal rebuilt without signatures, exits 4, never 0;
//! `--anchors` tells a crash's tail from a cut one. With `--syslog`, 4
//! means messages no Signature Block covers. Over several FILEs, 3 wins
//! over 4.
//!
//! `--anchors FILE` (repeatable) reads the anchor messages a remote
//! receiver got (a file sink's `[sink.seal.anchor]` sends one per
//! signature): every anchored head of the checked log must be its chain's
//! head at that point, which catches a log rewritten and re-signed with
//! the stolen key, a tail cut off after an anchored signature, and files
//! removed from the end of a set. Other lines of that file (records the
//! same receiver got) are skipped, even when a value in them holds an
//! anchor's text: an anchor line is the anchor message's text ending its
//! line, right after the message's RFC 5424 header or its syslog tag, or
//! a JSON object of exactly a seal head's fields
//! (`dplog_sinks::verify::read_anchors`).
//!
//! `--syslog` checks instead a syslog receiver's file (one message a
//! line, as received: rsyslog's `%rawmsg%`) against the RFC 5848
//! Signature Blocks a syslog sink with `sign = { ... }` sent with its
//! records: every message against the signed hashes, in order, per
//! reboot session; the first message removed, altered, inserted or
//! reordered, a block altered or signed by another key, a Signature
//! Block removed, is named by line and byte offset (exit 3). Messages
//! after the last Signature Block are a note. `--host` checks only the
//! lines of one HOSTNAME; `--max-bytes` and `--max-line` bound what is
//! read (a larger file or line is an error, exit 1, as is a malformed
//! block, named by its line).
//!
//! `dplog-verify keygen --out PREFIX` writes a new Ed25519 key pair:
//! `PREFIX.key` (private, PKCS#8 PEM, mode 0600, for the sink's
//! `seal.key_file`) and `PREFIX.pub` (public, PEM, for verifiers).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use dplog_sinks::{seal, verify, verify_syslog};

/// Checks sealed dplog output files, or makes a seal key pair.
#[derive(Parser, Debug)]
#[command(
    name = "dplog-verify",
    version,
    args_conflicts_with_subcommands = true,
    after_help = "Exit status: 0 verified, every byte signed; 1 an error (unreadable file or seal, bad --key); \
                  2 the command line does not parse; 3 tampering found (or a note, with --strict); \
                  4 no tampering found, but bytes after the last signature, unsealed or unsigned \
                  (a crash, a live log, or a rewrite without the key): not proven."
)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// A trusted public key (PEM); repeat for the keys of a key rotation.
    /// Signatures by any other key are reported as re-signed.
    #[arg(long = "key", value_name = "PUB")]
    keys: Vec<PathBuf>,
    /// Check only the files named, not the rotated set beside them.
    #[arg(long)]
    only: bool,
    /// A note (unsigned or unsealed tail, key change) fails too (exit 3).
    #[arg(long)]
    strict: bool,
    /// A file a remote receiver wrote the seal's anchor messages to (an
    /// rsyslog file; `[sink.seal.anchor]`); repeatable. Every anchored
    /// head of the checked log must match its chain.
    #[arg(long = "anchors", value_name = "FILE")]
    anchors: Vec<PathBuf>,
    /// FILE is a syslog receiver's file (one message a line, as
    /// received) to check against the RFC 5848 Signature Blocks in it.
    #[arg(long, conflicts_with_all = ["only", "anchors"])]
    syslog: bool,
    /// With --syslog: check only lines with this HOSTNAME.
    #[arg(long, value_name = "NAME", requires = "syslog")]
    host: Option<String>,
    /// With --syslog: the largest file read, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 4 << 30, requires = "syslog")]
    max_bytes: u64,
    /// With --syslog: the longest line read, in bytes.
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 65_537,
        requires = "syslog"
    )]
    max_line: usize,
    /// Output files to check (their seals are FILE.seal), or with
    /// --syslog the receiver's files.
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Generates an Ed25519 key pair: PREFIX.key (0600) and PREFIX.pub.
    Keygen {
        /// Where to write them: PREFIX.key and PREFIX.pub.
        #[arg(long, value_name = "PREFIX")]
        out: PathBuf,
    },
}

fn with_ext(p: &std::path::Path, ext: &str) -> PathBuf {
    let mut s = p.as_os_str().to_os_string();
    s.push(ext);
    PathBuf::from(s)
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(Command::Keygen { out }) = &args.command {
        let (k, p) = (with_ext(out, ".key"), with_ext(out, ".pub"));
        return match seal::generate_key_pair(&k, &p) {
            Ok(_) => {
                println!(
                    "private key {} (0600), public key {}",
                    k.display(),
                    p.display()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("dplog-verify: {e}");
                ExitCode::from(1)
            }
        };
    }
    if args.files.is_empty() {
        eprintln!("dplog-verify: no FILE given (dplog-verify --key seal.pub FILE)");
        return ExitCode::from(2);
    }
    if args.keys.is_empty() {
        eprintln!(
            "dplog-verify: no --key given: name the public key(s) the signatures must verify with"
        );
        return ExitCode::from(2);
    }
    let mut trusted = Vec::new();
    for k in &args.keys {
        match seal::load_public_key(k) {
            Ok(vk) => trusted.push(vk),
            Err(e) => {
                eprintln!("dplog-verify: --key {e}");
                return ExitCode::from(1);
            }
        }
    }
    if args.syslog {
        return check_syslog(&args, &trusted);
    }
    let mut anchors = Vec::new();
    for a in &args.anchors {
        match verify::read_anchors(a, &trusted) {
            Ok((mut got, bad)) => {
                if bad > 0 {
                    eprintln!(
                        "note: {}: {bad} anchor line(s) ignored (malformed, or not signed by a --key)",
                        a.display()
                    );
                }
                anchors.append(&mut got);
            }
            Err(e) => {
                eprintln!("dplog-verify: --anchors {e}");
                return ExitCode::from(1);
            }
        }
    }
    let (mut tampered, mut unproven, mut wrong_key) = (false, false, false);
    for f in &args.files {
        let set = if args.only {
            vec![f.clone()]
        } else {
            match verify::set_of(f) {
                Ok(s) if !s.is_empty() => s,
                Ok(_) => vec![f.clone()],
                Err(e) => {
                    eprintln!("dplog-verify: {}: {e}", f.display());
                    return ExitCode::from(1);
                }
            }
        };
        let report = match verify::verify_anchored(&set, &trusted, &anchors) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("dplog-verify: {e}");
                return ExitCode::from(1);
            }
        };
        for n in &report.notes {
            eprintln!("note: {n}");
        }
        match &report.finding {
            // No key given is one the seal records: most likely a wrong
            // --key, an error of the command, not tampering.
            Some(finding) if finding.problem == verify::Problem::KeyNotInSeal => {
                eprintln!("dplog-verify: {finding}");
                wrong_key = true;
            }
            Some(finding) => {
                eprintln!("dplog-verify: {finding}");
                tampered = true;
            }
            None => {
                println!(
                    "{}: verified {} file(s), {} write(s), {} bytes, {} signature(s)",
                    f.display(),
                    set.len(),
                    report.writes,
                    report.bytes,
                    report.signatures
                );
                if args.strict && !report.notes.is_empty() {
                    tampered = true;
                } else if report.unproven > 0 {
                    eprintln!(
                        "dplog-verify: {}: {} byte(s) not under a trusted signature: not proven (exit 4)",
                        f.display(),
                        report.unproven
                    );
                    unproven = true;
                }
            }
        }
    }
    if wrong_key && !tampered {
        return ExitCode::from(1);
    }
    exit_status(tampered, unproven)
}

/// 3 if tampering was found (or a note, with `--strict`), else 4 if
/// something was not proven, else 0.
fn exit_status(tampered: bool, unproven: bool) -> ExitCode {
    if tampered {
        ExitCode::from(3)
    } else if unproven {
        ExitCode::from(4)
    } else {
        ExitCode::SUCCESS
    }
}

/// `--syslog`: each FILE against the RFC 5848 blocks in it.
fn check_syslog(args: &Args, trusted: &[verify_syslog::VerifyingKey]) -> ExitCode {
    let limits = verify_syslog::SyslogLimits {
        max_bytes: args.max_bytes,
        max_line: args.max_line,
    };
    let (mut tampered, mut unproven) = (false, false);
    for f in &args.files {
        let report =
            match verify_syslog::verify_syslog_file(f, trusted, args.host.as_deref(), limits) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("dplog-verify: {e}");
                    return ExitCode::from(1);
                }
            };
        for n in &report.notes {
            eprintln!("note: {}: {n}", f.display());
        }
        match &report.finding {
            Some(finding) => {
                eprintln!("dplog-verify: {finding}");
                tampered = true;
            }
            None => {
                println!(
                    "{}: verified {} message(s) against {} signature block(s) in {} session(s); \
                     {} unsigned",
                    f.display(),
                    report.verified,
                    report.blocks,
                    report.sessions.len(),
                    report.unsigned
                );
                if args.strict && !report.notes.is_empty() {
                    tampered = true;
                } else if report.unsigned > 0 {
                    unproven = true;
                }
            }
        }
    }
    exit_status(tampered, unproven)
}
