//! Seal anchors to Kafka and ClickHouse: a sealed file sink of a user's
//! record lines sends every signed chain head, as a `SealHead` record, to
//! a Kafka topic (librdkafka's mock cluster on loopback) or a ClickHouse
//! table (Debian's clickhouse-server 18.16 on loopback); the heads are
//! read back from the topic or the table, and the verifier compares the
//! log with them. Each test then rewrites a record, re-seals the whole
//! log with a fresh key (trusted, as after a key rotation: the seal alone
//! verifies) and checks that the verifier names the first anchored head
//! that no longer matches, with its record and byte.

mod common;
#[path = "../../testkit/fixtures/reseal.rs"]
mod reseal;

use std::path::{Path, PathBuf};

use dplog_core::Sink;
use dplog_sinks::seal::{self, anchor, HasherMode, SealOptions};
use dplog_sinks::verify::{read_anchors, verify_anchored, verify_files, Problem};
use dplog_sinks::{FileSink, FileSinkCounters, FileSinkOptions};
use ed25519_dalek::SigningKey;

/// Batch `b`: four lines of a user's record (a VPN gateway's logins).
fn batch(b: usize) -> Vec<u8> {
    (0..4)
        .map(|i| format!("login user=u{b}{i} port={} result=ok\n", 1000 + b * 4 + i))
        .collect::<String>()
        .into_bytes()
}

/// One run of a sealed sink (hashing on its thread, buffers handed over
/// as the consumer does) anchored to `anchor_sink` in `format`: batches
/// `from..to`, then close (a signature, sent). Returns each batch's
/// offset.
fn run(
    path: &Path,
    key: &Path,
    anchor_sink: Box<dyn Sink>,
    format: dplog_formatters::Format,
    from: usize,
    to: usize,
) -> Vec<u64> {
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
    sink.set_seal_anchor_records(anchor_sink, anchor::formatter(format).unwrap())
        .unwrap();
    let mut offs = Vec::new();
    let mut at = std::fs::metadata(path).map_or(0, |m| m.len());
    let mut buf = Vec::with_capacity(1024);
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

struct Setup {
    _dir: tempfile::TempDir,
    key: PathBuf,
    vk: ed25519_dalek::VerifyingKey,
    path: PathBuf,
    anchors: PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = (dir.path().join("seal.key"), dir.path().join("seal.pub"));
    let vk = seal::generate_key_pair(&key, &public).unwrap();
    Setup {
        path: dir.path().join("logins.log"),
        anchors: dir.path().join("anchors.jsonl"),
        key,
        vk,
        _dir: dir,
    }
}

/// With the heads read back into `s.anchors` (two runs: batches 0..6
/// and 6..10 at `offs`): the log verifies against them; then a record
/// of the second run rewritten and the log re-sealed with a fresh key is
/// found at the first anchored head that no longer matches, the second
/// (the first still does): record 25, byte `offs[6]`.
fn check_rewrite_is_found(s: &Setup, offs: &[u64]) {
    let (anchors, bad) = read_anchors(&s.anchors, &[s.vk]).unwrap();
    assert_eq!((anchors.len(), bad), (2, 0), "{anchors:?}");
    assert_eq!((anchors[0].writes, anchors[0].end), (6, offs[6]));
    assert_eq!(anchors[1].end, std::fs::metadata(&s.path).unwrap().len());
    let clean = verify_anchored(std::slice::from_ref(&s.path), &[s.vk], &anchors).unwrap();
    assert_eq!((clean.finding, clean.signatures), (None, 2));

    let mut forged = std::fs::read(&s.path).unwrap();
    forged[offs[8] as usize + 12] = b'X';
    std::fs::write(&s.path, &forged).unwrap();
    let fresh = SigningKey::generate(&mut rand_core::OsRng);
    reseal::reseal(std::slice::from_ref(&s.path), &fresh);
    let trusted = [s.vk, fresh.verifying_key()];
    // The seal alone holds: every write hashes, every signature verifies.
    let r = verify_files(std::slice::from_ref(&s.path), &trusted).unwrap();
    assert_eq!(r.finding, None, "{:?}", r.finding);
    // The anchored heads, signed by the original key, do not.
    let (anchors, _) = read_anchors(&s.anchors, &trusted).unwrap();
    let f = verify_anchored(std::slice::from_ref(&s.path), &trusted, &anchors)
        .unwrap()
        .finding
        .expect("the rewrite is not found");
    assert_eq!(f.problem, Problem::AnchorMismatch, "{f}");
    assert_eq!((f.record, f.byte), (6 * 4 + 1, offs[6]), "{f}");
}

#[cfg(feature = "kafka")]
#[test]
fn heads_anchored_to_a_kafka_topic_catch_a_log_rewritten_and_re_signed_with_a_fresh_key() {
    use dplog_formatters::Format;
    use dplog_sinks::{KafkaSink, KafkaSinkOptions};
    let m = rdkafka::mocking::MockCluster::new(1).expect("mock cluster");
    m.create_topic("seal-heads", 1, 1).expect("create topic");
    let brokers = m.bootstrap_servers();
    let s = setup();
    let kafka = || -> Box<dyn Sink> {
        Box::new(KafkaSink::new(KafkaSinkOptions::new(&brokers, "seal-heads")).unwrap())
    };
    let mut offs = run(&s.path, &s.key, kafka(), Format::Json, 0, 6);
    offs.extend(run(&s.path, &s.key, kafka(), Format::Json, 6, 10));
    // The topic read back: one JSON message per head.
    let msgs = common::consume_topic(&brokers, "seal-heads", 1, 2);
    let mut lines = Vec::new();
    for (_, v) in &msgs {
        assert!(v.starts_with(b"{"), "{}", String::from_utf8_lossy(v));
        lines.extend_from_slice(v);
        if !v.ends_with(b"\n") {
            lines.push(b'\n');
        }
    }
    std::fs::write(&s.anchors, &lines).unwrap();
    check_rewrite_is_found(&s, &offs);
}

#[test]
fn heads_anchored_to_a_clickhouse_table_catch_a_log_rewritten_and_re_signed_with_a_fresh_key() {
    use dplog_core::schema::HasSchema;
    use dplog_formatters::Format;
    use dplog_sinks::clickhouse::{create_table, ClickHouseOptions, Server, TableOptions};
    use dplog_sinks::ClickHouseSink;
    let ch = dplog_testkit::clickhouse::ClickHouse::start();
    ch.query(&create_table(
        anchor::SealHead::schema(),
        &TableOptions::new("seal_heads", Server::V18),
    ));
    let s = setup();
    let table = || -> Box<dyn Sink> {
        Box::new(ClickHouseSink::new(ClickHouseOptions::new(ch.url(), "seal_heads")).unwrap())
    };
    let mut offs = run(&s.path, &s.key, table(), Format::Binary, 0, 6);
    offs.extend(run(&s.path, &s.key, table(), Format::Binary, 6, 10));
    // The table read back, byte columns as hex, one JSON row per head.
    let rows = ch.query(
        "SELECT hex(`log`) AS `log`, `file`, `writes`, `end`, `timeMs`, hex(`head`) AS `head`, \
         hex(`key`) AS `key`, hex(`sig`) AS `sig` FROM seal_heads ORDER BY `end` \
         FORMAT JSONEachRow",
    );
    assert_eq!(rows.lines().count(), 2, "{rows}");
    std::fs::write(&s.anchors, &rows).unwrap();
    check_rewrite_is_found(&s, &offs);
}
