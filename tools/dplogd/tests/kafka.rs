//! Kafka behind dplogd, against a real Kafka-protocol broker (Tansu,
//! crates.io `tansu`, installed by `scripts/setup.sh`, on a free 127.0.0.1
//! port with its in-memory storage): a daemon killed with SIGKILL and
//! restarted sends the records after its last checkpoint again, so
//! delivery is at least once. On the topic's one partition the sequence
//! numbers run up by one, except where a restarted daemon resumed: there
//! they jump back to exactly the checkpoint that daemon read. So every
//! committed record is there, and a record appears twice only if it lies
//! at or above the checkpoint of a kill (it was sent, maybe acknowledged,
//! but not yet checkpointed).

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::Message;

/// The `tansu` binary: on `PATH`, else in `$CARGO_HOME/bin` or
/// `~/.cargo/bin`.
fn tansu_bin() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(h) = std::env::var_os("CARGO_HOME") {
        dirs.push(PathBuf::from(h).join("bin"));
    }
    if let Some(h) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(h).join(".cargo/bin"));
    }
    dirs.into_iter()
        .map(|d| d.join("tansu"))
        .find(|p| p.is_file())
}

/// A running tansu broker, killed when dropped.
struct Tansu {
    child: Child,
    url: String,
    brokers: String,
}

impl Drop for Tansu {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_tansu(bin: &PathBuf, log: PathBuf) -> Tansu {
    start_tansu_on(bin, log, dplog_testkit::free_tcp_port())
}

/// [`start_tansu`] on a given port.
fn start_tansu_on(bin: &PathBuf, log: PathBuf, port: u16) -> Tansu {
    let url = format!("tcp://127.0.0.1:{port}");
    let log = std::fs::File::create(log).unwrap();
    let child = Command::new(bin)
        .args(["broker", "--listener-url", &url])
        .args(["--advertised-listener-url", &url])
        .args(["--storage-engine", "memory://tansu/"])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start tansu");
    let t = Tansu {
        child,
        url,
        brokers: format!("127.0.0.1:{port}"),
    };
    // Listening, not merely connectable: a connect before tansu binds
    // could reach another socket, or the client itself.
    wait_for(60, "tansu to listen", || dplog_testkit::tcp_listening(port));
    t
}

/// The consumer index the checkpoint at `path` holds for the ring named
/// `name` (0 when the checkpoint does not name it yet).
fn checkpointed_head(path: &std::path::Path, name: &str) -> u64 {
    read(path)
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            (w.len() == 6 && w[0] == "ring" && w[5].starts_with(&format!("{name}.")))
                .then(|| w[2].parse::<u64>().unwrap())
        })
        .next()
        .unwrap_or(0)
}

/// Every line of partition 0 of `topic`, from the start, until the line
/// holding `last` has been read and the partition's end reached (or 120 s).
fn consume_lines(brokers: &str, topic: &str, last: &str) -> Vec<String> {
    let c: BaseConsumer = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "dplogd-test")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, rdkafka::Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    let mut lines = Vec::new();
    let mut seen_last = false;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(120) {
        match c.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                let p = String::from_utf8(m.payload().unwrap_or_default().to_vec()).unwrap();
                for l in p.lines() {
                    seen_last |= l.contains(last);
                    lines.push(l.to_string());
                }
            }
            Some(Err(KafkaError::PartitionEOF(_))) if seen_last => return lines,
            _ => {}
        }
    }
    panic!(
        "no {last:?} line on {topic} within 120 s ({} lines read)",
        lines.len()
    );
}

fn create_topic(bin: &PathBuf, broker: &Tansu, topic: &str) {
    let out = Command::new(bin)
        .args(["topic", "create", "--broker", &broker.url])
        .args(["--partitions", "1", topic])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tansu topic create: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The broker is away when dplogd starts: its batch waits for the
/// acknowledgement, `shutdown_timeout_ms` (300 ms) at a time, and is not
/// checkpointed meanwhile (the checkpoint stays at 0 over several
/// timeouts). A daemon SIGKILLed while it waits has lost nothing: once
/// the broker is up and a new daemon runs, every record is on the topic.
/// (Checkpointing after one timeout would free the ring's slots of
/// records only librdkafka held, and the kill would lose them.)
#[test]
fn a_broker_away_holds_the_checkpoint_and_a_daemon_killed_meanwhile_loses_nothing() {
    let Some(bin) = tansu_bin() else {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("tansu is not installed: run scripts/setup.sh");
        }
        eprintln!("SKIPPED: tansu is not installed (scripts/setup.sh installs it)");
        return;
    };
    let topic = "away";
    let port = dplog_testkit::free_tcp_port();
    let s = Setup::with_config(&format!(
        "[format]\ntype = \"json\"\n[ring]\nburst = 64\nshutdown_timeout_ms = 300\n\
         [sink]\ntype = \"kafka\"\nbrokers = \"127.0.0.1:{port}\"\ntopic = \"{topic}\"\n"
    ));
    const N: u64 = 2_000;
    // The ring holds every record: the producer finishes while the
    // daemon waits.
    let mut p = s.producer(
        "away",
        7,
        &["--records", &N.to_string(), "--capacity", "4096"],
    );
    let ckpt = s.path("dplogd.checkpoint");
    let mut d = s.daemon();
    wait_for(60, "dplogd to say it waits for acknowledgement", || {
        s.stderr().contains("wait for acknowledgement")
    });
    // Several timeouts later the batch is still not checkpointed.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        checkpointed_head(&ckpt, "away"),
        0,
        "stderr:\n{}",
        s.stderr()
    );
    kill9(&mut d);
    assert!(p.wait().unwrap().success());

    let broker = start_tansu_on(&bin, s.path("tansu.log"), port);
    create_topic(&bin, &broker, topic);
    let mut d = s.daemon();
    let lines = consume_lines(&broker.brokers, topic, "\"producer_closed\"");
    assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
    let o = parse(&lines.join("\n"));
    let seqs = &o.seqs[&7];
    arrivals(seqs, N);
    assert_eq!(
        end_of(&o, "away").expect("the ring's end line")["records"],
        N
    );
}

#[test]
fn kafka_behind_a_killed_dplogd_gets_every_record_at_least_once_repeats_only_after_the_checkpoint()
{
    let Some(bin) = tansu_bin() else {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("tansu is not installed: run scripts/setup.sh");
        }
        eprintln!("SKIPPED: tansu is not installed (scripts/setup.sh installs it)");
        return;
    };
    let topic = "dplogd";
    let s0 = tempfile::tempdir().unwrap();
    let broker = start_tansu(&bin, s0.path().join("tansu.log"));
    create_topic(&bin, &broker, topic);
    let s = Setup::new(&format!(
        "[sink]\ntype = \"kafka\"\nbrokers = \"{}\"\ntopic = \"{topic}\"\n",
        broker.brokers
    ));
    const N: u64 = 20_000;
    let mut p = s.producer(
        "kfk",
        5,
        &[
            "--records",
            &N.to_string(),
            "--capacity",
            "256",
            "--burst",
            "32",
            "--pause-us",
            "200",
        ],
    );
    let ckpt = s.path("dplogd.checkpoint");
    let mut rng = Pcg64::seed_from_u64(23);
    // The checkpoint each restarted daemon resumes the ring from.
    let mut resumed_at = Vec::new();
    for _ in 0..3 {
        let mut d = s.daemon();
        std::thread::sleep(Duration::from_millis(rng.gen_range(300..800)));
        kill9(&mut d);
        resumed_at.push(checkpointed_head(&ckpt, "kfk"));
    }
    let mut d = s.daemon();
    assert!(p.wait().unwrap().success());
    let lines = consume_lines(&broker.brokers, topic, "\"producer_closed\"");
    assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
    let o = parse(&lines.join("\n"));
    let seqs = &o.seqs[&5];
    let end = end_of(&o, "kfk").expect("the ring's end line");
    assert_eq!(end["records"], N, "{end}");
    // Every committed record is there.
    let seen = arrivals(seqs, N);
    // In partition order the numbers run 0, 1, 2, … except at a restart,
    // where they go back to exactly a checkpoint a restarted daemon
    // resumed from: nothing below a checkpoint is sent twice.
    assert_eq!(seqs[0], 0);
    let mut jumps = Vec::new();
    for w in seqs.windows(2) {
        if w[1] != w[0] + 1 {
            assert!(
                w[1] <= w[0] && resumed_at.contains(&w[1]),
                "after {} comes {}: neither the next record nor a checkpoint a restart resumed from ({resumed_at:?})",
                w[0],
                w[1]
            );
            jumps.push(w[1]);
        }
    }
    assert!(jumps.len() <= resumed_at.len(), "{jumps:?} {resumed_at:?}");
    let repeats = seqs.len() as u64 - N;
    for (q, &c) in seen.iter().enumerate() {
        let bound = 1 + resumed_at.iter().filter(|&&h| q as u64 >= h).count() as u32;
        assert!(
            c <= bound,
            "record {q} arrived {c} times, at most {bound} expected"
        );
    }
    eprintln!(
        "{repeats} records sent twice after the restarts (checkpoints {resumed_at:?}, sent again from {jumps:?})"
    );
}
