//! Each manipulation of a sealed log is detected and located: a file sink
//! with `seal` writes known batches of lines, the test changes the file
//! (or its seal) as an attacker or a crash would, and both the verifier
//! library and the `dplog-verify` binary must name the problem, the
//! first record of the first write that fails and its byte offset.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use dplog_core::Sink;
use dplog_sinks::seal::{self, seal_path, SealOptions};
use dplog_sinks::verify::{verify_files, Finding, Problem, Report};
use dplog_sinks::{FileSink, FileSinkOptions};

const LINES_PER_BATCH: usize = 4;

struct Keys {
    key: PathBuf,
    public: PathBuf,
}

fn keys(dir: &Path, name: &str) -> Keys {
    let k = Keys {
        key: dir.join(format!("{name}.key")),
        public: dir.join(format!("{name}.pub")),
    };
    seal::generate_key_pair(&k.key, &k.public).unwrap();
    k
}

fn opts(k: &Keys) -> FileSinkOptions {
    FileSinkOptions {
        seal: Some(SealOptions {
            key_file: k.key.clone(),
            sign_every: None,
            hasher: seal::HasherMode::Thread,
            hasher_cpu: None,
        }),
        ..Default::default()
    }
}

/// Batch `b` of a run: four lines of a user's record (a firewall's flow
/// verdict), of slightly different lengths.
fn batch(b: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..LINES_PER_BATCH {
        let n = b * LINES_PER_BATCH + i;
        out.extend_from_slice(
            format!(
                "verdict seq={n} rule={} action={} src=10.0.{b}.{i}\n",
                n * 7 % 13,
                if n % 3 == 0 { "drop" } else { "pass" }
            )
            .as_bytes(),
        );
    }
    out
}

/// Writes batches `from..to` through a sealed sink at `path`, then closes
/// it (which signs the head). Returns the byte offset of each batch.
///
/// Each batch's buffer is handed over as the consumer does
/// (`write_batch_owned`), so the seal's hasher thread hashes it.
fn write(path: &Path, k: &Keys, from: usize, to: usize) -> Vec<u64> {
    let mut sink = FileSink::with_options(path, opts(k)).unwrap();
    let mut offs = Vec::new();
    let mut at = std::fs::metadata(path).unwrap().len();
    let mut buf = Vec::with_capacity(4096);
    for b in from..to {
        buf.clear();
        buf.extend_from_slice(&batch(b));
        offs.push(at);
        let len = buf.len() as u64;
        sink.write_batch_owned(&mut buf, &[]).unwrap();
        at += len;
    }
    sink.close().unwrap();
    offs
}

fn verify(files: &[PathBuf], k: &Keys) -> Report {
    let vk = seal::load_public_key(&k.public).unwrap();
    verify_files(files, &[vk]).unwrap()
}

/// Runs the binary; returns (exit code, stdout, stderr).
fn cli(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-verify"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn cli_verify(path: &Path, k: &Keys) -> (i32, String, String) {
    cli(&["--key", k.public.to_str().unwrap(), path.to_str().unwrap()])
}

/// The finding, checked against the binary's report of the same file.
fn found(path: &Path, k: &Keys) -> Finding {
    let r = verify(&[path.to_path_buf()], k);
    let f = r
        .finding
        .unwrap_or_else(|| panic!("no finding; notes {:?}", r.notes));
    let (code, _, err) = cli_verify(path, k);
    assert_eq!(code, 3, "{err}");
    let want = format!("{} at record {} (byte {})", f.problem, f.record, f.byte);
    assert!(err.contains(&want), "{err} lacks {want}");
    f
}

/// A 10-batch sealed log in a fresh directory.
fn log10() -> (tempfile::TempDir, PathBuf, Keys, Vec<u64>) {
    let dir = tempfile::tempdir().unwrap();
    let k = keys(dir.path(), "seal");
    let path = dir.path().join("verdicts.log");
    let offs = write(&path, &k, 0, 10);
    (dir, path, k, offs)
}

fn first_record_of(b: usize) -> u64 {
    (b * LINES_PER_BATCH + 1) as u64
}

#[test]
fn an_untouched_log_verifies_every_write_and_its_signature() {
    let (_d, path, k, offs) = log10();
    let r = verify(std::slice::from_ref(&path), &k);
    assert_eq!(r.finding, None);
    assert_eq!(r.writes, 10);
    assert_eq!(r.bytes, std::fs::metadata(&path).unwrap().len());
    assert_eq!(r.signatures, 1, "signed at close");
    assert!(r.notes.is_empty(), "{:?}", r.notes);
    assert_eq!(offs[0], 0);
    let (code, out, err) = cli_verify(&path, &k);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("verified 1 file(s), 10 write(s)"), "{out}");
}

#[test]
fn an_altered_record_is_found_at_the_first_record_of_its_write() {
    let (_d, path, k, offs) = log10();
    let mut data = std::fs::read(&path).unwrap();
    // One digit of the second line of batch 3: pass -> past.
    let line2 = offs[3] as usize + batch(3).iter().position(|&c| c == b'\n').unwrap() + 1;
    let at = line2
        + data[line2..]
            .windows(4)
            .position(|w| w == b"pass" || w == b"drop")
            .unwrap();
    data[at + 3] ^= 0x01;
    std::fs::write(&path, &data).unwrap();
    let f = found(&path, &k);
    assert_eq!(f.problem, Problem::Altered, "{f}");
    assert_eq!((f.record, f.byte), (first_record_of(3), offs[3]));
    assert_eq!(f.write, Some((offs[3], offs[4])));
}

#[test]
fn a_removed_record_and_a_removed_write_are_found() {
    let (_d, path, k, offs) = log10();
    let orig = std::fs::read(&path).unwrap();
    // The third line of batch 5.
    let b5 = &orig[offs[5] as usize..offs[6] as usize];
    let nl: Vec<usize> = b5
        .iter()
        .enumerate()
        .filter(|(_, &c)| c == b'\n')
        .map(|(i, _)| i)
        .collect();
    let (a, b) = (offs[5] as usize + nl[1] + 1, offs[5] as usize + nl[2] + 1);
    let mut data = orig.clone();
    data.drain(a..b);
    std::fs::write(&path, &data).unwrap();
    let f = found(&path, &k);
    assert_eq!(f.problem, Problem::Removed, "{f}");
    assert_eq!((f.record, f.byte), (first_record_of(5), offs[5]));
    assert!(
        f.detail.contains(&format!("{} bytes were removed", b - a)),
        "{f}"
    );

    // Batch 7 whole.
    let mut data = orig.clone();
    data.drain(offs[7] as usize..offs[8] as usize);
    std::fs::write(&path, &data).unwrap();
    let f = found(&path, &k);
    assert_eq!(f.problem, Problem::Removed, "{f}");
    assert_eq!((f.record, f.byte), (first_record_of(7), offs[7]));
}

#[test]
fn an_inserted_record_is_found() {
    let (_d, path, k, offs) = log10();
    let mut data = std::fs::read(&path).unwrap();
    // A forged line after the first line of batch 6.
    let at = offs[6] as usize + batch(6).iter().position(|&c| c == b'\n').unwrap() + 1;
    let forged = b"verdict seq=9999 rule=1 action=pass src=10.9.9.9\n";
    data.splice(at..at, forged.iter().copied());
    std::fs::write(&path, &data).unwrap();
    let f = found(&path, &k);
    assert_eq!(f.problem, Problem::Inserted, "{f}");
    assert_eq!((f.record, f.byte), (first_record_of(6), offs[6]));
    assert!(
        f.detail
            .contains(&format!("{} bytes were inserted", forged.len())),
        "{f}"
    );
}

#[test]
fn reordered_writes_are_found() {
    let (_d, path, k, offs) = log10();
    let orig = std::fs::read(&path).unwrap();
    let (b2, b3) = (
        &orig[offs[2] as usize..offs[3] as usize],
        &orig[offs[3] as usize..offs[4] as usize],
    );
    let mut data = orig[..offs[2] as usize].to_vec();
    data.extend_from_slice(b3);
    data.extend_from_slice(b2);
    data.extend_from_slice(&orig[offs[4] as usize..]);
    assert_eq!(data.len(), orig.len());
    std::fs::write(&path, &data).unwrap();
    let f = found(&path, &k);
    assert_eq!(f.problem, Problem::Reordered, "{f}");
    assert_eq!((f.record, f.byte), (first_record_of(2), offs[2]));
}

#[test]
fn a_truncated_tail_is_found_whether_signed_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let k = keys(dir.path(), "seal");
    let path = dir.path().join("verdicts.log");
    // Two runs: the first ends with a signature at batch 6, the second
    // appends batches 6..10, signed at its close.
    let mut offs = write(&path, &k, 0, 6);
    offs.extend(write(&path, &k, 6, 10));
    assert_eq!(verify(std::slice::from_ref(&path), &k).signatures, 2);
    let orig = std::fs::read(&path).unwrap();

    // Cut inside the second line of batch 8 (after the first signature).
    let cut = offs[8] as usize + batch(8).iter().position(|&c| c == b'\n').unwrap() + 5;
    std::fs::write(&path, &orig[..cut]).unwrap();
    let f = found(&path, &k);
    assert_eq!(f.problem, Problem::Truncated, "{f}");
    // The record cut in half, at its start.
    assert_eq!(
        (f.record, f.byte),
        (
            first_record_of(8) + 1,
            offs[8] + (batch(8).iter().position(|&c| c == b'\n').unwrap() + 1) as u64
        )
    );
    assert_eq!(f.write, Some((offs[8], offs[9])));

    // Cut before the first signature's end: batch 4 onwards gone.
    std::fs::write(&path, &orig[..offs[4] as usize]).unwrap();
    let f = found(&path, &k);
    assert_eq!(f.problem, Problem::Truncated, "{f}");
    assert_eq!((f.record, f.byte), (first_record_of(4), offs[4]));
}

#[test]
fn two_logs_spliced_are_found_where_the_second_begins() {
    let dir = tempfile::tempdir().unwrap();
    let k = keys(dir.path(), "seal");
    let (a, b) = (dir.path().join("a.log"), dir.path().join("b.log"));
    write(&a, &k, 0, 5);
    write(&b, &k, 5, 10);
    // Data and seals concatenated: b's bytes after a's, b's entries
    // (without its magic) after a's.
    let mut data = std::fs::read(&a).unwrap();
    let a_len = data.len() as u64;
    data.extend(std::fs::read(&b).unwrap());
    let mut sealf = std::fs::read(seal_path(&a)).unwrap();
    sealf.extend_from_slice(&std::fs::read(seal_path(&b)).unwrap()[seal::MAGIC.len()..]);
    let out = dir.path().join("spliced.log");
    std::fs::write(&out, &data).unwrap();
    std::fs::write(seal_path(&out), &sealf).unwrap();
    let f = found(&out, &k);
    assert_eq!(f.problem, Problem::Spliced, "{f}");
    assert_eq!((f.record, f.byte), (first_record_of(5), a_len));
}

#[test]
fn a_tail_re_signed_with_another_key_is_found_where_the_trusted_signature_ends() {
    let dir = tempfile::tempdir().unwrap();
    let k = keys(dir.path(), "seal");
    let other = keys(dir.path(), "attacker");
    let path = dir.path().join("verdicts.log");
    let mut offs = write(&path, &k, 0, 6);
    offs.extend(write(&path, &k, 6, 10));
    // The attacker rewrites the second run's records, cuts the seal back
    // to the first run's signature and seals the new tail with a key of
    // their own (through the sink itself, which records the key change).
    let data = std::fs::read(&path).unwrap();
    let mut forged = data[..offs[6] as usize].to_vec();
    forged.extend_from_slice(
        &String::from_utf8_lossy(&data[offs[6] as usize..])
            .replace("drop", "pass")
            .into_bytes(),
    );
    std::fs::write(&path, &forged).unwrap();
    let entries_end = first_signature_end(&seal_path(&path));
    let sf = std::fs::OpenOptions::new()
        .write(true)
        .open(seal_path(&path))
        .unwrap();
    sf.set_len(entries_end).unwrap();
    let mut sink = FileSink::with_options(&path, opts(&other)).unwrap();
    sink.close().unwrap();
    let f = found(&path, &k);
    assert_eq!(f.problem, Problem::ForeignKey, "{f}");
    assert_eq!((f.record, f.byte), (first_record_of(6), offs[6]));
    // With both keys trusted (a real key rotation), it verifies.
    let both = [
        seal::load_public_key(&k.public).unwrap(),
        seal::load_public_key(&other.public).unwrap(),
    ];
    let r = verify_files(std::slice::from_ref(&path), &both).unwrap();
    assert_eq!(r.finding, None);
    assert!(
        r.notes.iter().any(|n| n.contains("signing key changed")),
        "{:?}",
        r.notes
    );
}

#[test]
fn a_log_whose_signatures_were_stripped_is_not_proven() {
    let (_d, path, k, _) = log10();
    let len = std::fs::metadata(&path).unwrap().len();
    let (code, out, err) = cli_verify(&path, &k);
    assert_eq!(code, 0, "{out} {err}");
    let seal_bytes = std::fs::read(seal_path(&path)).unwrap();

    // The seal's chain has no key: whoever rewrites the file rebuilds it
    // (a record altered, every write's hash and link recomputed, as the
    // sink computes them); the signature cannot be rebuilt, so it is
    // left out. The forgery verifies, signed by nobody: exit 4, not 0.
    let mut data = std::fs::read(&path).unwrap();
    let at = data.windows(4).position(|w| w == b"drop").unwrap();
    data[at..at + 4].copy_from_slice(b"pass");
    std::fs::write(&path, &data).unwrap();
    let (entries, _) = seal::read_entries(&mut &seal_bytes[seal::MAGIC.len()..], 10_000).unwrap();
    let mut forged = seal::MAGIC.to_vec();
    let mut head = [0u8; 32];
    for (_, e) in entries {
        match e {
            seal::Entry::Start { prev, .. } => {
                head = prev;
                e.encode(&mut forged);
            }
            seal::Entry::Batch { late, off, len, .. } => {
                let content = *blake3::hash(&data[off as usize..(off + len) as usize]).as_bytes();
                head = seal::link(&head, e.tag(), off, len, &content);
                seal::Entry::Batch {
                    late,
                    off,
                    len,
                    content,
                    chain: head,
                }
                .encode(&mut forged);
            }
            _ => {}
        }
    }
    std::fs::write(seal_path(&path), &forged).unwrap();
    let r = verify(std::slice::from_ref(&path), &k);
    assert_eq!(
        (r.finding.is_none(), r.signatures),
        (true, 0),
        "{:?}",
        r.finding
    );
    assert_eq!(r.unproven, len);
    let (code, _, err) = cli_verify(&path, &k);
    assert_eq!(code, 4, "{err}");
    assert!(
        err.contains(&format!("{len} byte(s) not under a trusted signature")),
        "{err}"
    );
}

/// The tags of a seal file's entries, in order (`GBBSC`).
fn tags_of(data: &Path) -> String {
    let b = std::fs::read(seal_path(data)).unwrap();
    let (entries, stop) = seal::read_entries(&mut &b[seal::MAGIC.len()..], 10_000).unwrap();
    assert_eq!(stop, None);
    entries.iter().map(|(_, e)| e.tag() as char).collect()
}

/// Makes `data`'s seal what a sink before close and resume entries wrote
/// for the same writes: the same entries without its `C` and `R` ones
/// (every other entry's bytes are the same, and so are their chain and
/// signatures, which cover neither).
fn without_close_entries(data: &Path) {
    let b = std::fs::read(seal_path(data)).unwrap();
    let (entries, _) = seal::read_entries(&mut &b[seal::MAGIC.len()..], 10_000).unwrap();
    let mut out = seal::MAGIC.to_vec();
    for (_, e) in entries {
        if !matches!(e, seal::Entry::Close(_) | seal::Entry::Resume(_)) {
            e.encode(&mut out);
        }
    }
    std::fs::write(seal_path(data), out).unwrap();
}

fn append(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    std::io::Write::write_all(&mut f, bytes).unwrap();
}

const FORGED: &[u8] = b"verdict seq=9999 rule=1 action=pass src=10.9.9.9\n";

#[test]
fn a_line_appended_after_a_clean_close_is_tampering_at_the_first_appended_byte() {
    let (_d, path, k, _) = log10();
    let len = std::fs::metadata(&path).unwrap().len();
    // The close: the final signature, then the close entry.
    assert_eq!(tags_of(&path), format!("G{}SC", "B".repeat(10)));
    assert_eq!(cli_verify(&path, &k).0, 0);
    append(&path, FORGED);
    let f = found(&path, &k);
    assert_eq!(f.problem, Problem::AppendedAfterClose, "{f}");
    assert_eq!(
        (f.record, f.byte, f.write),
        (first_record_of(10), len, None)
    );
    assert!(
        f.detail
            .contains(&format!("{} bytes after that", FORGED.len())),
        "{f}"
    );

    // The same log as sealed before close entries existed: the appended
    // line is only not proven, as it was (a crash's tail looks the same).
    without_close_entries(&path);
    let r = verify(std::slice::from_ref(&path), &k);
    assert_eq!(
        (r.finding.is_none(), r.signatures, r.unproven),
        (true, 1, FORGED.len() as u64)
    );
    assert_eq!(cli_verify(&path, &k).0, 4);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len)
        .unwrap();
    assert_eq!(cli_verify(&path, &k).0, 0);
}

#[test]
fn a_sink_starting_again_on_a_closed_file_records_it_and_its_writes_verify() {
    let dir = tempfile::tempdir().unwrap();
    let k = keys(dir.path(), "seal");
    let path = dir.path().join("verdicts.log");
    let mut offs = write(&path, &k, 0, 5);
    offs.extend(write(&path, &k, 5, 10));
    let five = "B".repeat(5);
    assert_eq!(tags_of(&path), format!("G{five}SCR{five}SC"));
    let r = verify(std::slice::from_ref(&path), &k);
    assert_eq!(r.finding, None, "{:?}", r.finding);
    assert_eq!((r.writes, r.signatures, r.unproven), (10, 2, 0));
    assert!(r.notes.is_empty(), "{:?}", r.notes);
    let (code, _, err) = cli_verify(&path, &k);
    assert_eq!(code, 0, "{err}");

    // Grown after the second close.
    let len = std::fs::metadata(&path).unwrap().len();
    append(&path, FORGED);
    let f = found(&path, &k);
    assert_eq!(f.problem, Problem::AppendedAfterClose, "{f}");
    assert_eq!((f.record, f.byte), (first_record_of(10), len));

    // Two runs sealed before close entries existed verify as they did.
    without_close_entries(&path);
    assert_eq!(tags_of(&path), format!("G{five}S{five}S"));
    assert_eq!(cli_verify(&path, &k).0, 4);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len)
        .unwrap();
    let r = verify(std::slice::from_ref(&path), &k);
    assert_eq!((r.finding, r.writes, r.unproven), (None, 10, 0));
    assert_eq!(cli_verify(&path, &k).0, 0);
}

#[test]
fn a_line_appended_after_a_close_is_named_after_a_sink_started_again_on_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let k = keys(dir.path(), "seal");
    let path = dir.path().join("verdicts.log");
    write(&path, &k, 0, 5);
    let closed_at = std::fs::metadata(&path).unwrap().len();
    append(&path, FORGED);
    // The sink starts again: the appended bytes are not its own, so they
    // are sealed as found before its resume entry, and named.
    write(&path, &k, 5, 10);
    let five = "B".repeat(5);
    assert_eq!(tags_of(&path), format!("G{five}SCLR{five}SC"));
    let f = found(&path, &k);
    assert_eq!(f.problem, Problem::AppendedAfterClose, "{f}");
    assert_eq!(
        (f.record, f.byte, f.write),
        (
            first_record_of(5),
            closed_at,
            Some((closed_at, closed_at + FORGED.len() as u64))
        )
    );
    assert!(f.detail.contains("when a sink started again"), "{f}");

    // Entries for them added to the seal by hand, with no resume entry
    // (the close entry needs the key; a write entry does not): named too.
    let b = std::fs::read(seal_path(&path)).unwrap();
    let (entries, _) = seal::read_entries(&mut &b[seal::MAGIC.len()..], 100).unwrap();
    let mut forged = seal::MAGIC.to_vec();
    let mut head = [0u8; 32];
    for (_, e) in entries.iter().take(1 + 5 + 2) {
        e.encode(&mut forged);
        if let seal::Entry::Batch { chain, .. } = e {
            head = *chain;
        }
    }
    let content = *blake3::hash(FORGED).as_bytes();
    let chain = seal::link(
        &head,
        seal::TAG_BATCH,
        closed_at,
        FORGED.len() as u64,
        &content,
    );
    seal::Entry::Batch {
        late: false,
        off: closed_at,
        len: FORGED.len() as u64,
        content,
        chain,
    }
    .encode(&mut forged);
    std::fs::write(seal_path(&path), forged).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(closed_at + FORGED.len() as u64)
        .unwrap();
    let f = found(&path, &k);
    assert_eq!(f.problem, Problem::AppendedAfterClose, "{f}");
    assert_eq!((f.record, f.byte), (first_record_of(5), closed_at));
    assert!(f.detail.contains("with no resume entry"), "{f}");
}

/// Byte offset in a seal file just past its first signature entry.
fn first_signature_end(p: &Path) -> u64 {
    let b = std::fs::read(p).unwrap();
    let mut r = &b[seal::MAGIC.len()..];
    let (entries, _) = seal::read_entries(&mut r, 1000).unwrap();
    let (at, e) = entries
        .iter()
        .find(|(_, e)| matches!(e, seal::Entry::Sign(_)))
        .unwrap();
    at + 1 + seal::body_len(e.tag()).unwrap() as u64
}

#[test]
fn a_crash_mid_batch_leaves_a_log_that_verifies_up_to_its_last_sealed_write() {
    let (_d, path, k, offs) = log10();
    // The run crashed rather than closing: its seal has no close entry.
    let b = std::fs::read(seal_path(&path)).unwrap();
    std::fs::write(seal_path(&path), &b[..b.len() - 153]).unwrap();
    assert_eq!(tags_of(&path), format!("G{}S", "B".repeat(10)));
    // A crash: half a batch in the file, its seal entry never written,
    // and a torn seal entry after it.
    let mut data = std::fs::read(&path).unwrap();
    let half = &batch(10)[..70];
    data.extend_from_slice(half);
    std::fs::write(&path, &data).unwrap();
    let mut sf = std::fs::read(seal_path(&path)).unwrap();
    sf.extend_from_slice(&[b'B', 1, 2, 3]);
    std::fs::write(seal_path(&path), &sf).unwrap();
    let r = verify(std::slice::from_ref(&path), &k);
    assert_eq!(r.finding, None, "{:?}", r.finding);
    assert_eq!(r.writes, 10);
    let end = offs[9] + batch(9).len() as u64;
    let unsealed = format!(
        "bytes {end}..{} from record {} are not sealed",
        data.len(),
        first_record_of(10)
    );
    assert!(
        r.notes.iter().any(|n| n.contains(&unsealed)),
        "{:?}",
        r.notes
    );
    assert!(
        r.notes.iter().any(|n| n.contains("ends inside an entry")),
        "{:?}",
        r.notes
    );
    // Not tampering, but the unsealed bytes are not proven: exit 4.
    let (code, _, err) = cli_verify(&path, &k);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains(&unsealed), "{err}");
    assert_eq!(r.unproven, data.len() as u64 - end);
    let (code, _, _) = cli(&[
        "--strict",
        "--key",
        k.public.to_str().unwrap(),
        path.to_str().unwrap(),
    ]);
    assert_eq!(code, 3);

    // The sink restarted on it: the torn entry is cut, the unsealed bytes
    // sealed late (and said so), the torn line ended (a write of its own)
    // and new writes chain on.
    write(&path, &k, 11, 12);
    let r = verify(std::slice::from_ref(&path), &k);
    assert_eq!(r.finding, None, "{:?}", r.finding);
    assert_eq!(r.writes, 13);
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains(&format!("bytes {end}..{} were found unsealed", data.len()))),
        "{:?}",
        r.notes
    );
}

#[test]
fn a_rotated_set_verifies_as_one_chain_and_a_missing_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let k = keys(dir.path(), "seal");
    let path = dir.path().join("verdicts.log");
    let mut sink = FileSink::with_options(
        &path,
        FileSinkOptions {
            max_size_bytes: Some(600),
            ..opts(&k)
        },
    )
    .unwrap();
    for b in 0..12 {
        sink.write_batch(&batch(b)).unwrap();
    }
    sink.close().unwrap();
    let set = dplog_sinks::verify::set_of(&path).unwrap();
    assert!(set.len() >= 4, "{set:?}");
    for f in &set {
        assert!(seal_path(f).exists(), "{}", f.display());
    }
    let r = verify(&set, &k);
    assert_eq!(r.finding, None, "{:?}", r.finding);
    assert_eq!(
        r.writes as usize,
        set.iter().map(|f| entries_of(f)).sum::<usize>()
    );
    assert_eq!(
        r.bytes,
        set.iter()
            .map(|f| std::fs::metadata(f).unwrap().len())
            .sum::<u64>()
    );
    assert_eq!(r.signatures as usize, set.len(), "one signature per file");
    let (code, out, err) = cli_verify(&path, &k);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("verified {} file(s)", set.len())),
        "{out}"
    );

    // The oldest file's seal gone (as if written before sealing was
    // switched on): a note, the rest verifies.
    let seal0 = std::fs::read(seal_path(&set[0])).unwrap();
    std::fs::remove_file(seal_path(&set[0])).unwrap();
    let r = verify(&set, &k);
    assert_eq!(r.finding, None, "{:?}", r.finding);
    assert!(
        r.notes.iter().any(|n| n.contains("no seal file")),
        "{:?}",
        r.notes
    );
    std::fs::write(seal_path(&set[0]), seal0).unwrap();

    // The oldest file gone (as retention deletes it): a note, no finding.
    std::fs::remove_file(&set[0]).unwrap();
    std::fs::remove_file(seal_path(&set[0])).unwrap();
    let r = verify(&set[1..], &k);
    assert_eq!(r.finding, None);
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("earlier file(s) are not present")),
        "{:?}",
        r.notes
    );

    // A middle file's seal gone: named.
    let seal3 = std::fs::read(seal_path(&set[3])).unwrap();
    std::fs::remove_file(seal_path(&set[3])).unwrap();
    let r = verify(&set[1..], &k);
    let f = r.finding.unwrap();
    assert_eq!(
        (f.problem, &f.file, f.record, f.byte),
        (Problem::SealDamaged, &set[3], 1, 0),
        "{f}"
    );
    std::fs::write(seal_path(&set[3]), seal3).unwrap();

    // A middle file gone: named, at the start of the file after it.
    std::fs::remove_file(&set[2]).unwrap();
    let (code, _, err) = cli_verify(&path, &k);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains(&format!(
            "{}: missing file at record 1 (byte 0)",
            set[3].display()
        )),
        "{err}"
    );
}

/// The two oldest rotated files swapped, each with its seal (names
/// exchanged): the second is named, as a file out of order.
#[test]
fn two_rotated_files_swapped_with_their_seals_are_found_as_reordered() {
    let dir = tempfile::tempdir().unwrap();
    let k = keys(dir.path(), "seal");
    let path = dir.path().join("verdicts.log");
    let mut sink = FileSink::with_options(
        &path,
        FileSinkOptions {
            max_size_bytes: Some(600),
            ..opts(&k)
        },
    )
    .unwrap();
    for b in 0..12 {
        sink.write_batch(&batch(b)).unwrap();
    }
    sink.close().unwrap();
    let set = dplog_sinks::verify::set_of(&path).unwrap();
    assert!(set.len() >= 4, "{set:?}");
    let tmp = dir.path().join("swap");
    for (a, b) in [
        (set[0].clone(), set[1].clone()),
        (seal_path(&set[0]), seal_path(&set[1])),
    ] {
        std::fs::rename(&a, &tmp).unwrap();
        std::fs::rename(&b, &a).unwrap();
        std::fs::rename(&tmp, &b).unwrap();
    }
    let f = verify(&set, &k).finding.unwrap();
    assert_eq!(
        (f.problem, &f.file, f.record, f.byte),
        (Problem::Reordered, &set[1], 1, 0),
        "{f}"
    );
    let (code, _, err) = cli_verify(&path, &k);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("are out of order"), "{err}");
}

fn entries_of(f: &Path) -> usize {
    let b = std::fs::read(seal_path(f)).unwrap();
    let mut r = &b[seal::MAGIC.len()..];
    let (entries, _) = seal::read_entries(&mut r, 10_000).unwrap();
    entries
        .iter()
        .filter(|(_, e)| matches!(e, seal::Entry::Batch { .. }))
        .count()
}

#[test]
fn signing_every_n_seconds_adds_signatures_from_the_tick() {
    let dir = tempfile::tempdir().unwrap();
    let k = keys(dir.path(), "seal");
    let path = dir.path().join("verdicts.log");
    let mut o = opts(&k);
    o.seal.as_mut().unwrap().sign_every = Some(Duration::from_millis(1));
    let mut sink = FileSink::with_options(&path, o).unwrap();
    for b in 0..3 {
        sink.write_batch(&batch(b)).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        sink.tick(std::time::Instant::now()).unwrap();
    }
    // Nothing new since the last tick: no further signature.
    sink.tick(std::time::Instant::now()).unwrap();
    let r = verify(std::slice::from_ref(&path), &k);
    assert_eq!((r.signatures, r.finding), (3, None));
    sink.close().unwrap();
    assert_eq!(
        verify(std::slice::from_ref(&path), &k).signatures,
        3,
        "nothing unsigned at close"
    );
}

#[test]
fn a_missing_or_unprotected_or_malformed_key_file_refuses_the_sink() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let k = keys(dir.path(), "seal");
    let path = dir.path().join("out.log");
    let refused = |key: &Path| {
        let o = FileSinkOptions {
            seal: Some(SealOptions {
                key_file: key.to_path_buf(),
                sign_every: None,
                hasher: seal::HasherMode::Thread,
                hasher_cpu: None,
            }),
            ..Default::default()
        };
        FileSink::with_options(&path, o).unwrap_err().to_string()
    };
    let m = refused(&dir.path().join("nope.key"));
    assert!(m.contains("nope.key") && m.contains("No such file"), "{m}");
    std::fs::set_permissions(&k.key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let m = refused(&k.key);
    assert!(m.contains("mode 0644") && m.contains("must be 0600"), "{m}");
    let bad = dir.path().join("bad.key");
    std::fs::write(&bad, "not a key\n").unwrap();
    std::fs::set_permissions(&bad, std::fs::Permissions::from_mode(0o600)).unwrap();
    let m = refused(&bad);
    assert!(m.contains("not an Ed25519 private key"), "{m}");
    assert!(!path.exists(), "nothing created for a refused sink");
}

#[test]
fn keygen_writes_a_0600_private_key_and_a_public_key_and_refuses_to_overwrite() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("site");
    let (code, _, err) = cli(&["keygen", "--out", prefix.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let key = dir.path().join("site.key");
    let public = dir.path().join("site.pub");
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let sk = seal::load_signing_key(&key).unwrap();
    assert_eq!(seal::load_public_key(&public).unwrap(), sk.verifying_key());
    assert!(std::fs::read_to_string(&public)
        .unwrap()
        .starts_with("-----BEGIN PUBLIC KEY-----"));
    let (code, _, err) = cli(&["keygen", "--out", prefix.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("exists"), "{err}");
    // No key, no file: usage errors.
    assert_eq!(cli(&["x.log"]).0, 2);
    assert_eq!(cli(&["--key", public.to_str().unwrap()]).0, 2);
}

#[test]
fn keys_made_by_openssl_are_taken() {
    use std::os::unix::fs::PermissionsExt;
    if Command::new("openssl").arg("version").output().is_err() {
        eprintln!("SKIPPED: openssl not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = (dir.path().join("o.key"), dir.path().join("o.pub"));
    let ok = |args: &[&str]| {
        let st = Command::new("openssl").args(args).status().unwrap();
        assert!(st.success(), "openssl {args:?}");
    };
    ok(&[
        "genpkey",
        "-algorithm",
        "ed25519",
        "-out",
        key.to_str().unwrap(),
    ]);
    ok(&[
        "pkey",
        "-in",
        key.to_str().unwrap(),
        "-pubout",
        "-out",
        public.to_str().unwrap(),
    ]);
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let sk = seal::load_signing_key(&key).unwrap();
    assert_eq!(seal::load_public_key(&public).unwrap(), sk.verifying_key());
    // A log sealed with it verifies with openssl's public key file.
    let k = Keys { key, public };
    let path = dir.path().join("o.log");
    write(&path, &k, 0, 3);
    let (code, out, err) = cli_verify(&path, &k);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("3 write(s)"), "{out}");
}

#[test]
fn a_rotated_file_of_another_log_in_a_set_is_found_as_spliced() {
    let dir = tempfile::tempdir().unwrap();
    let k = keys(dir.path(), "seal");
    let rotated = |name: &str| {
        let path = dir.path().join(name);
        let mut sink = FileSink::with_options(
            &path,
            FileSinkOptions {
                max_size_bytes: Some(600),
                ..opts(&k)
            },
        )
        .unwrap();
        for b in 0..8 {
            sink.write_batch(&batch(b)).unwrap();
        }
        sink.close().unwrap();
        (path.clone(), dplog_sinks::verify::set_of(&path).unwrap())
    };
    let (a, set_a) = rotated("a.log");
    let (_, set_b) = rotated("b.log");
    assert_eq!(verify(&set_a, &k).finding, None);
    // A's second file replaced by B's second file (same sequence number,
    // another log), seal and all.
    std::fs::copy(&set_b[1], &set_a[1]).unwrap();
    std::fs::copy(seal_path(&set_b[1]), seal_path(&set_a[1])).unwrap();
    let f = verify(&set_a, &k).finding.unwrap();
    assert_eq!(f.problem, Problem::Spliced, "{f}");
    assert_eq!((&f.file, f.record, f.byte), (&set_a[1], 1, 0), "{f}");
    assert!(f.detail.contains("belongs to log"), "{f}");
    let (code, _, err) = cli_verify(&a, &k);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains(&format!(
            "{}: spliced at record 1 (byte 0)",
            set_a[1].display()
        )),
        "{err}"
    );
}

#[test]
fn a_forged_seal_with_absurd_lengths_or_garbage_is_named_not_trusted() {
    let (_d, path, k, offs) = log10();
    let orig = std::fs::read(seal_path(&path)).unwrap();
    let (entries, _) = seal::read_entries(&mut &orig[seal::MAGIC.len()..], 100).unwrap();
    // The third write's entry claims u64::MAX bytes from its offset.
    let (at, e) = entries
        .iter()
        .filter(|(_, e)| matches!(e, seal::Entry::Batch { .. }))
        .nth(2)
        .unwrap();
    let mut forged = orig.clone();
    if let seal::Entry::Batch { off, .. } = e {
        assert_eq!(*off, offs[2]);
        let len_at = *at as usize + 1 + 8;
        forged[len_at..len_at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    }
    std::fs::write(seal_path(&path), &forged).unwrap();
    let f = verify(std::slice::from_ref(&path), &k).finding.unwrap();
    // The link no longer holds (the length is part of it): named where
    // that write starts, nothing read past the file.
    assert_eq!(f.problem, Problem::Spliced, "{f}");
    assert_eq!((f.record, f.byte), (first_record_of(2), offs[2]));

    // Garbage after the first entries: an unknown tag stops the reading,
    // said as a note; what precedes is checked and the unsigned writes noted.
    let mut garbage = orig[..*at as usize].to_vec();
    garbage.extend_from_slice(&[0xee; 300]);
    std::fs::write(seal_path(&path), &garbage).unwrap();
    let r = verify(std::slice::from_ref(&path), &k);
    assert_eq!(r.finding, None);
    assert_eq!(r.writes, 2);
    assert!(
        r.notes.iter().any(|n| n.contains("unknown entry tag 0xee")),
        "{:?}",
        r.notes
    );
    assert!(
        r.notes.iter().any(|n| n.contains("not sealed")),
        "{:?}",
        r.notes
    );

    // Not a seal file at all.
    std::fs::write(seal_path(&path), b"hello, world\n").unwrap();
    let f = verify(std::slice::from_ref(&path), &k).finding.unwrap();
    assert_eq!((f.problem, f.record, f.byte), (Problem::SealDamaged, 1, 0));
}

#[test]
fn batches_the_hasher_thread_still_holds_at_a_crash_are_reported_as_not_sealed() {
    let dir = tempfile::tempdir().unwrap();
    let k = keys(dir.path(), "seal");
    let path = dir.path().join("verdicts.log");
    let mut sink = FileSink::with_options(&path, opts(&k)).unwrap();
    let mut buf = Vec::with_capacity(4096);
    for b in 0..6 {
        buf.clear();
        buf.extend_from_slice(&batch(b));
        sink.write_batch_owned(&mut buf, &[]).unwrap();
    }
    // A crash: the sink never closes, so whatever its hasher thread
    // still holds never gets its seal entry. The last batch is among
    // them (handed over, linked only at the next batch, tick or flush).
    std::mem::forget(sink);
    let data = std::fs::read(&path).unwrap();
    let r = verify(std::slice::from_ref(&path), &k);
    assert_eq!(r.finding, None, "{:?}", r.finding);
    assert!(r.writes < 6, "{} writes sealed", r.writes);
    let sealed_end = r.bytes;
    let unsealed = format!(
        "bytes {sealed_end}..{} from record {} are not sealed",
        data.len(),
        first_record_of(r.writes as usize)
    );
    assert!(
        r.notes.iter().any(|n| n.contains(&unsealed)),
        "{:?}",
        r.notes
    );
    // Started again, the sink seals them late.
    write(&path, &k, 6, 7);
    let r = verify(std::slice::from_ref(&path), &k);
    assert_eq!(r.finding, None, "{:?}", r.finding);
    assert_eq!(r.bytes, std::fs::metadata(&path).unwrap().len());
}

#[test]
fn flush_waits_for_the_hasher_thread_so_every_written_batch_is_sealed() {
    let dir = tempfile::tempdir().unwrap();
    let k = keys(dir.path(), "seal");
    let path = dir.path().join("verdicts.log");
    let mut sink = FileSink::with_options(&path, opts(&k)).unwrap();
    let mut buf = Vec::with_capacity(4096);
    for b in 0..6 {
        buf.clear();
        buf.extend_from_slice(&batch(b));
        sink.write_batch_owned(&mut buf, &[]).unwrap();
    }
    sink.flush().unwrap();
    // Before close: every batch has its entry, nothing is left unsealed.
    let r = verify(std::slice::from_ref(&path), &k);
    assert_eq!(r.finding, None, "{:?}", r.finding);
    assert_eq!(r.writes, 6);
    assert_eq!(r.bytes, std::fs::metadata(&path).unwrap().len());
    assert!(
        !r.notes.iter().any(|n| n.contains("not sealed")),
        "{:?}",
        r.notes
    );
    sink.close().unwrap();
}

#[test]
fn a_rotated_file_that_grows_is_tampering() {
    let dir = tempfile::tempdir().unwrap();
    let k = keys(dir.path(), "seal");
    let path = dir.path().join("verdicts.log");
    let mut sink = FileSink::with_options(
        &path,
        FileSinkOptions {
            max_size_bytes: Some(600),
            ..opts(&k)
        },
    )
    .unwrap();
    for b in 0..12 {
        sink.write_batch(&batch(b)).unwrap();
    }
    sink.close().unwrap();
    let set = dplog_sinks::verify::set_of(&path).unwrap();
    assert!(set.len() >= 3, "{set:?}");
    // Every file, rotated or not, is closed by the sink.
    for f in &set {
        assert!(
            tags_of(f).ends_with("SC"),
            "{}: {}",
            f.display(),
            tags_of(f)
        );
    }
    assert_eq!(verify(&set, &k).finding, None);
    let len = std::fs::metadata(&set[1]).unwrap().len();
    let lines = std::fs::read(&set[1])
        .unwrap()
        .iter()
        .filter(|&&c| c == b'\n')
        .count() as u64;
    append(&set[1], FORGED);
    let f = verify(&set, &k).finding.unwrap();
    assert_eq!(
        (f.problem, &f.file, f.record, f.byte),
        (Problem::AppendedAfterClose, &set[1], lines + 1, len),
        "{f}"
    );
    let (code, _, err) = cli_verify(&path, &k);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains(&format!(
            "{}: appended after close at record {} (byte {len})",
            set[1].display(),
            lines + 1
        )),
        "{err}"
    );
    // Sealed before close entries existed: found as before, as inserted.
    without_close_entries(&set[1]);
    let f = verify(&set, &k).finding.unwrap();
    assert_eq!(
        (f.problem, &f.file, f.record, f.byte),
        (Problem::Inserted, &set[1], lines + 1, len),
        "{f}"
    );
}

#[test]
fn bytes_removed_from_the_last_write_are_named_removed_or_truncated() {
    let (_d, path, k, offs) = log10();
    let orig = std::fs::read(&path).unwrap();
    let end = orig.len();
    let b9 = &orig[offs[9] as usize..];
    let nl: Vec<usize> = memchr_all(b9);
    // The third line of the last write.
    let (a, b) = (offs[9] as usize + nl[1] + 1, offs[9] as usize + nl[2] + 1);
    let mut data = orig.clone();
    data.drain(a..b);
    std::fs::write(&path, &data).unwrap();
    let f = found(&path, &k);
    assert_eq!(f.problem, Problem::RemovedOrTruncated, "{f}");
    assert_eq!(
        (f.record, f.byte, f.write),
        (first_record_of(9), offs[9], Some((offs[9], end as u64)))
    );
    assert!(f.detail.contains("the seal cannot tell which"), "{f}");
    // Cut inside it: the same, since the two cannot be told apart.
    std::fs::write(&path, &orig[..a + 3]).unwrap();
    let f = found(&path, &k);
    assert_eq!(f.problem, Problem::RemovedOrTruncated, "{f}");
    assert_eq!((f.record, f.byte), (first_record_of(9), offs[9]));
    // Cut where it starts: the whole write gone, truncated.
    std::fs::write(&path, &orig[..offs[9] as usize]).unwrap();
    let f = found(&path, &k);
    assert_eq!(f.problem, Problem::Truncated, "{f}");
    assert_eq!((f.record, f.byte), (first_record_of(9), offs[9]));
}

fn memchr_all(b: &[u8]) -> Vec<usize> {
    b.iter()
        .enumerate()
        .filter(|(_, &c)| c == b'\n')
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn bytes_removed_before_a_last_write_shorter_than_them_are_named_removed() {
    let dir = tempfile::tempdir().unwrap();
    let k = keys(dir.path(), "seal");
    let path = dir.path().join("verdicts.log");
    let offs = write(&path, &k, 0, 10);
    // A last write of one short line, after the ten.
    let mut sink = FileSink::with_options(&path, opts(&k)).unwrap();
    sink.write_batch(b"end\n").unwrap();
    sink.close().unwrap();
    let orig = std::fs::read(&path).unwrap();
    // Three lines of batch 9: more bytes than the write after it holds,
    // so the file ends before batch 9's sealed end.
    let nl = memchr_all(&orig[offs[9] as usize..]);
    let (a, b) = (offs[9] as usize + nl[0] + 1, offs[9] as usize + nl[3] + 1);
    assert!(b - a > 4);
    let mut data = orig.clone();
    data.drain(a..b);
    std::fs::write(&path, &data).unwrap();
    let f = found(&path, &k);
    assert_eq!(f.problem, Problem::Removed, "{f}");
    assert_eq!((f.record, f.byte), (first_record_of(9), offs[9]));
    assert!(
        f.detail.contains(&format!("{} bytes were removed", b - a)),
        "{f}"
    );
}

#[test]
fn a_line_inserted_into_the_last_write_is_named_inserted() {
    let (_d, path, k, offs) = log10();
    let orig = std::fs::read(&path).unwrap();
    let nl = memchr_all(&orig[offs[9] as usize..]);
    // After the second line of the last write.
    let at = offs[9] as usize + nl[1] + 1;
    let mut data = orig.clone();
    data.splice(at..at, FORGED.iter().copied());
    std::fs::write(&path, &data).unwrap();
    let f = found(&path, &k);
    assert_eq!(f.problem, Problem::Inserted, "{f}");
    assert_eq!((f.record, f.byte), (first_record_of(9), offs[9]));
    assert!(
        f.detail.contains(&format!(
            "{} bytes were inserted into this write (the last sealed one) at byte {at} (record {})",
            FORGED.len(),
            first_record_of(9) + 2
        )),
        "{f}"
    );
    // Before it (between the last two writes).
    let mut data = orig.clone();
    let at = offs[9] as usize;
    data.splice(at..at, FORGED.iter().copied());
    std::fs::write(&path, &data).unwrap();
    let f = found(&path, &k);
    assert_eq!(f.problem, Problem::Inserted, "{f}");
    assert_eq!((f.record, f.byte), (first_record_of(9), offs[9]));
}

#[test]
fn the_last_write_changed_is_altered_and_changed_with_bytes_after_it_altered_or_inserted() {
    let (_d, path, k, offs) = log10();
    let mut data = std::fs::read(&path).unwrap();
    let at = offs[9] as usize
        + data[offs[9] as usize..]
            .windows(4)
            .position(|w| w == b"pass" || w == b"drop")
            .unwrap();
    data[at] ^= 0x01;
    std::fs::write(&path, &data).unwrap();
    let f = found(&path, &k);
    assert_eq!(f.problem, Problem::Altered, "{f}");
    assert_eq!((f.record, f.byte), (first_record_of(9), offs[9]));
    // Changed, and a line after it: inserted into it, or changed and
    // appended to; nothing in the seal tells which.
    append(&path, FORGED);
    let f = found(&path, &k);
    assert_eq!(f.problem, Problem::AlteredOrInserted, "{f}");
    assert_eq!((f.record, f.byte), (first_record_of(9), offs[9]));
    assert!(
        f.detail
            .contains(&format!("and {} bytes follow it", FORGED.len())),
        "{f}"
    );
}

/// A `--key` that is none of the keys the seal records (its start entry,
/// its key changes) is a wrong key, said so with exit status 1, not
/// tampering ("re-signed with another key", exit 3); the seal's own key
/// verifies it.
#[test]
fn a_key_the_seal_does_not_record_is_a_wrong_key_not_tampering() {
    let dir = tempfile::tempdir().unwrap();
    let k = keys(dir.path(), "seal");
    let other = keys(dir.path(), "other");
    let path = dir.path().join("verdicts.log");
    write(&path, &k, 0, 4);
    let r = verify(std::slice::from_ref(&path), &other);
    let f = r.finding.expect("not verified with another key");
    assert_eq!(f.problem, Problem::KeyNotInSeal, "{f}");
    let seal_key = hex(seal::load_public_key(&k.public).unwrap().as_bytes());
    assert!(
        f.detail.contains(&format!(
            "the seal records key(s) {seal_key} and none of the keys given"
        )),
        "{f}"
    );
    let (code, _, err) = cli_verify(&path, &other);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("signed with a key not given (wrong --key?)"),
        "{err}"
    );
    assert!(!err.contains("re-signed"), "{err}");
    let (code, _, err) = cli_verify(&path, &k);
    assert_eq!(code, 0, "{err}");
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
