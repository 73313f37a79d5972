//! Anchors as records through any sink: the signed heads of a sealed log
//! of a user's records go, as `SealHead` records in JSON lines, to a
//! second file sink (standing for the other host's copy of a Kafka topic
//! or a ClickHouse table read back), and `dplog-verify --anchors` reads
//! that file. A record rewritten and the log re-sealed with a fresh key
//! the verifier also trusts passes without the anchors and is found,
//! at the first anchored head that no longer matches, with them.

use std::path::Path;
use std::process::Command;

use dplog_core::Sink;
use dplog_formatters::Format;
use dplog_sinks::seal::{self, anchor, HasherMode, SealOptions};
use dplog_sinks::{FileSink, FileSinkCounters, FileSinkOptions};

#[path = "../../../testkit/fixtures/reseal.rs"]
mod reseal;

/// Batch `b`: four lines of a user's record (a door controller's events).
fn batch(b: usize) -> Vec<u8> {
    (0..4)
        .map(|i| format!("door=d{b} badge=b{i}{b} event=open\n"))
        .collect::<String>()
        .into_bytes()
}

/// One run: batches `from..to` through a sealed sink whose heads go to
/// the JSON-lines file `heads`; returns each batch's offset.
fn run(path: &Path, key: &Path, heads: &Path, from: usize, to: usize) -> Vec<u64> {
    let mut sink = FileSink::with_options(
        path,
        FileSinkOptions {
            seal: Some(SealOptions {
                sign_every: None,
                hasher: HasherMode::Thread,
                ..SealOptions::new(key)
            }),
            ..Default::default()
        },
    )
    .unwrap();
    let anchor_sink = FileSink::open(heads).unwrap();
    sink.set_seal_anchor_records(
        Box::new(anchor_sink),
        anchor::formatter(Format::Json).unwrap(),
    )
    .unwrap();
    let mut offs = Vec::new();
    let mut at = std::fs::metadata(path).map_or(0, |m| m.len());
    let mut buf = Vec::new();
    for b in from..to {
        offs.push(at);
        buf.clear();
        buf.extend_from_slice(&batch(b));
        at += buf.len() as u64;
        sink.write_batch_owned(&mut buf, &[]).unwrap();
    }
    let counters = sink.counters();
    sink.close().unwrap();
    assert_eq!(FileSinkCounters::get(&counters.anchor_failed), 0);
    offs
}

fn cli(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-verify"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn heads_as_json_records_in_any_sink_catch_a_log_re_sealed_with_a_fresh_key() {
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = (dir.path().join("seal.key"), dir.path().join("seal.pub"));
    seal::generate_key_pair(&key, &public).unwrap();
    let (fresh, fresh_pub) = (dir.path().join("fresh.key"), dir.path().join("fresh.pub"));
    seal::generate_key_pair(&fresh, &fresh_pub).unwrap();
    let path = dir.path().join("doors.log");
    let heads = dir.path().join("heads.jsonl");
    let mut offs = run(&path, &key, &heads, 0, 6);
    offs.extend(run(&path, &key, &heads, 6, 10));
    let text = std::fs::read_to_string(&heads).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(text.starts_with("{\"timeMs\":"), "{text}");
    assert!(
        text.lines().next().unwrap().contains("\"writes\":6,"),
        "{text}"
    );
    let (p, k, f, a) = (
        path.to_str().unwrap(),
        public.to_str().unwrap(),
        fresh_pub.to_str().unwrap(),
        heads.to_str().unwrap(),
    );
    let (code, err) = cli(&["--key", k, "--anchors", a, p]);
    assert_eq!(code, 0, "{err}");

    let mut forged = std::fs::read(&path).unwrap();
    forged[offs[8] as usize + 7] = b'X';
    std::fs::write(&path, &forged).unwrap();
    reseal::reseal(
        std::slice::from_ref(&path),
        &seal::load_signing_key(&fresh).unwrap(),
    );
    // Both keys trusted (a key rotation): the seal alone verifies.
    let (code, err) = cli(&["--key", k, "--key", f, p]);
    assert_eq!(code, 0, "{err}");
    // The anchors, signed with the first key, name the second head.
    let (code, err) = cli(&["--key", k, "--key", f, "--anchors", a, p]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains(&format!(
            "differs from the anchored head at record 25 (byte {})",
            offs[6]
        )),
        "{err}"
    );
}
