//! Crash semantics with real processes: producers SIGKILLed at random
//! points, dplogd SIGKILLed mid-stream and restarted.

mod common;

use std::io::Read;
use std::time::Duration;

use common::*;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

/// The last committed count a producer reported on stdout (0 if none).
fn reported(c: &mut std::process::Child) -> u64 {
    let mut s = String::new();
    c.stdout.take().unwrap().read_to_string(&mut s).unwrap();
    s.lines().last().map_or(0, |l| l.parse().unwrap())
}

/// The ring file of producer `name` in `dir`.
fn ring_file(dir: &std::path::Path, name: &str) -> Option<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let f = p.file_name().unwrap().to_string_lossy();
            f.starts_with(&format!("{name}.")) && f.ends_with(".ring")
        })
}

/// The producer index stored in a ring file (offset 128, the layout of
/// `dplog_core::shm`).
fn ring_tail(p: &std::path::Path) -> u64 {
    let b = std::fs::read(p).unwrap();
    u64::from_ne_bytes(b[128..136].try_into().unwrap())
}

struct Trial {
    name: String,
    tag: u32,
    reported: u64,
    burst: u64,
    /// The ring's committed index read from the file after the kill
    /// (trials run while no daemon drains).
    tail: Option<u64>,
}

fn run_trial(s: &Setup, seed: u64, daemon_running: bool) -> Trial {
    let mut rng = Pcg64::seed_from_u64(seed);
    let name = format!("t{seed}");
    let tag = seed as u32 + 1;
    let capacity = [16, 64, 256][rng.gen_range(0..3)];
    let burst = rng.gen_range(1..=32u64);
    let pause = [0, 50, 500][rng.gen_range(0..3)];
    let mut c = s.producer(
        &name,
        tag,
        &[
            "--records",
            "0",
            "--report",
            "--capacity",
            &capacity.to_string(),
            "--burst",
            &burst.to_string(),
            "--pause-us",
            &pause.to_string(),
            "--seed",
            &seed.to_string(),
        ],
    );
    wait_for(10, "the producer's ring file", || {
        ring_file(&s.rings(), &name).is_some()
    });
    std::thread::sleep(Duration::from_micros(rng.gen_range(0..15_000)));
    kill9(&mut c);
    let reported = reported(&mut c);
    let tail = (!daemon_running).then(|| ring_tail(&ring_file(&s.rings(), &name).unwrap()));
    Trial {
        name,
        tag,
        reported,
        burst,
        tail,
    }
}

/// 100 producers, each SIGKILLed at a random instant (its own seed: ring
/// size, burst size, pauses, kill time): 40 while no daemon drains (their
/// committed index is read from the ring file), 60 while dplogd drains.
/// The output holds, per producer, exactly the records its ring committed,
/// each once and in order, and one "exited" line with that count.
#[test]
fn producers_sigkilled_at_random_points_leave_exactly_their_committed_records() {
    let s = Setup::new("[sink]\ntype = \"file\"\npath = \"@/out.jsonl\"\n");
    let mut trials = Vec::new();
    for seed in 0..40 {
        trials.push(run_trial(&s, seed, false));
    }
    let mut d = s.daemon();
    for seed in 40..100 {
        trials.push(run_trial(&s, seed, true));
    }
    wait_for(120, "an end line for every producer", || {
        parse(&read_lines(&s.path("out.jsonl"))).ends.len() >= trials.len()
    });
    assert_eq!(
        term(&mut d),
        0,
        "dplogd exit status; stderr:\n{}",
        s.stderr()
    );
    let out = parse(&read_lines(&s.path("out.jsonl")));
    assert_eq!(out.ends.len(), trials.len());
    let mut with_records = 0;
    for t in &trials {
        let end = end_of(&out, &t.name).unwrap_or_else(|| panic!("no end line for {}", t.name));
        assert_eq!(end["dplogd"], "producer_exited", "{}", t.name);
        let n = end["records"].as_u64().unwrap();
        // A push returned (committed) before its report was written: the
        // report lags by at most the last burst.
        assert!(
            t.reported <= n && n <= t.reported + t.burst,
            "{}: {n} records committed, the producer reported {} (burst {})",
            t.name,
            t.reported,
            t.burst
        );
        if let Some(tail) = t.tail {
            assert_eq!(n, tail, "{}: the ring file's committed index", t.name);
        }
        let empty = Vec::new();
        let seqs = out.seqs.get(&u64::from(t.tag)).unwrap_or(&empty);
        assert_exactly(seqs, n, &t.name);
        with_records += u64::from(n > 0);
    }
    // The trials are not degenerate: most killed a producer mid-stream.
    assert!(
        with_records >= 80,
        "only {with_records} trials committed records"
    );
    // Every ring file is retired once drained.
    assert_eq!(ring_dir_files(&s.rings()), Vec::<std::path::PathBuf>::new());
}

/// dplogd SIGKILLed six times at random instants while two producers
/// stream, restarted each time: the file and the mmap outputs hold every
/// record exactly once, in order.
#[test]
fn dplogd_sigkilled_and_restarted_writes_every_record_exactly_once() {
    let s = Setup::new(
        "[[sink]]\ntype = \"file\"\npath = \"@/out.jsonl\"\n\
         [[sink]]\ntype = \"mmap\"\ndir = \"@/mm\"\nprefix = \"nat\"\nsegment_bytes = 1048576\n",
    );
    std::fs::create_dir(s.path("mm")).unwrap();
    const N: u64 = 40_000;
    let args = [
        "--records",
        &N.to_string(),
        "--capacity",
        "256",
        "--burst",
        "32",
    ]
    .map(String::from);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut p1 = s.producer("one", 1, &args);
    let mut p2 = s.producer("two", 2, &args);
    let mut rng = Pcg64::seed_from_u64(7);
    let mut kills = 0;
    for _ in 0..6 {
        let mut d = s.daemon();
        std::thread::sleep(Duration::from_millis(rng.gen_range(60..300)));
        kill9(&mut d);
        kills += 1;
    }
    let mut d = s.daemon();
    assert!(p1.wait().unwrap().success());
    assert!(p2.wait().unwrap().success());
    wait_for(120, "both producers' end lines", || {
        parse(&read_lines(&s.path("out.jsonl"))).ends.len() >= 2
    });
    assert_eq!(
        term(&mut d),
        0,
        "dplogd exit status; stderr:\n{}",
        s.stderr()
    );
    assert_eq!(kills, 6);
    let file = parse(&read_lines(&s.path("out.jsonl")));
    let mm = dplog_sinks::mmap::reader::read_all(&s.path("mm"), "nat").unwrap();
    let mm = parse(std::str::from_utf8(&mm).unwrap());
    for (what, o) in [("file", &file), ("mmap", &mm)] {
        for tag in [1, 2] {
            assert_exactly(&o.seqs[&tag], N, &format!("{what} output, producer {tag}"));
        }
        assert_eq!(o.ends.len(), 2, "{what}: {:?}", o.ends);
        for e in &o.ends {
            assert_eq!(e["dplogd"], "producer_closed");
            assert_eq!(e["records"], N);
        }
    }
    // The restarts did have something to cut back at least once (the
    // daemon was killed between a write and its checkpoint), or the test
    // exercised less than it claims; either way the outputs are exact.
    eprintln!("dplogd stderr:\n{}", s.stderr());
}

/// dplogd killed, then started again without its checkpoint (removed, as
/// an operator might after finding it damaged, or another `--checkpoint`
/// path): the new daemon resumes the ring where its consumer file says
/// the killed one freed it, so the head never moves backwards under the
/// producer, nothing is quarantined, and every record the producer
/// committed is in the output (those written after the last checkpoint
/// possibly twice: without a checkpoint nothing is cut back).
#[test]
fn dplogd_restarted_without_its_checkpoint_resumes_at_the_consumer_file_and_loses_nothing() {
    const N: u64 = 6_000;
    // The daemon must be killed while the producer still has records to
    // log. On a loaded machine the producer may finish first (the test's
    // polling is slower than the run); then the scenario is run again
    // with longer pauses between the producer's bursts, and each such
    // attempt is said.
    for pause_us in [400u64, 4_000, 40_000] {
        let s = Setup::new("[sink]\ntype = \"file\"\npath = \"@/out.jsonl\"\n");
        let mut p = s.producer(
            "lost",
            3,
            &[
                "--records",
                &N.to_string(),
                "--capacity",
                "1024",
                "--pause-us",
                &pause_us.to_string(),
            ],
        );
        let mut d = s.daemon();
        // Well into the run: more than a capacity consumed and checkpointed.
        wait_for(120, "over 2048 records written", || {
            parse(&read_lines(&s.path("out.jsonl")))
                .seqs
                .get(&3)
                .is_some_and(|v| v.len() > 2048)
        });
        kill9(&mut d);
        if !parse(&read_lines(&s.path("out.jsonl"))).ends.is_empty() {
            assert!(p.wait().unwrap().success());
            eprintln!(
                "the producer (pauses up to {pause_us} µs) ended before dplogd was killed; again with longer pauses"
            );
            continue;
        }
        std::fs::remove_file(s.path("dplogd.checkpoint")).unwrap();
        let mut d = s.daemon();
        assert!(p.wait().unwrap().success());
        wait_for(120, "the producer's end line", || {
            !parse(&read_lines(&s.path("out.jsonl"))).ends.is_empty()
        });
        assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
        let err = s.stderr();
        assert!(
            err.contains("no checkpoint names it; resuming at index"),
            "stderr:\n{err}"
        );
        assert!(!err.contains("quarantined"), "stderr:\n{err}");
        let o = parse(&read_lines(&s.path("out.jsonl")));
        let seen = arrivals(&o.seqs[&3], N);
        // At most the records after the last checkpoint come twice: fewer
        // than a capacity.
        let twice = seen.iter().filter(|&&c| c > 1).count();
        assert!(twice < 1024, "{twice} records written twice");
        assert!(seen.iter().all(|&c| c <= 2));
        let end = end_of(&o, "lost").expect("end line");
        assert_eq!(end["records"], N, "{end}");
        return;
    }
    panic!("the producer ended before dplogd was killed in every attempt");
}

/// The `(responderOctets, initiatorOctets)` (tag, sequence) of every
/// nat44Session row of the CSV file `path`, read by python's
/// csv.DictReader (strict) after checking that no row has a cell more or
/// less than the header and no header line repeats.
fn csv_tags_and_seqs(path: &std::path::Path) -> Vec<(u64, u64)> {
    const SCRIPT: &str = r#"
import csv, sys
with open(sys.argv[1], newline="") as f:
    r = csv.DictReader(f, strict=True)
    for row in r:
        if None in row or None in row.values():
            sys.exit(f"line {r.line_num}: not one cell per column: {row}")
        if row["recordType"] == "recordType":
            sys.exit(f"line {r.line_num}: a header line among the rows")
        if row["recordType"] == "nat44Session":
            print(row["responderOctets"], row["initiatorOctets"])
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", SCRIPT, path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (t, s) = l.split_once(' ').unwrap();
            (t.parse().unwrap(), s.parse().unwrap())
        })
        .collect()
}

/// CSV to one file per record type, dplogd SIGKILLed four times at random
/// instants while two producers stream, restarted each time: the type's
/// file (cut back to each checkpoint like any output file) holds every
/// record exactly once, in order, under one header.
#[test]
fn csv_files_per_type_hold_every_record_exactly_once_across_sigkills() {
    let s = Setup::with_config(
        "[format]\ntype = \"csv\"\n[ring]\nburst = 64\n[sink]\ntype = \"file\"\npath = \"@/out.csv\"\n",
    );
    const N: u64 = 20_000;
    let args = [
        "--records",
        &N.to_string(),
        "--capacity",
        "256",
        "--burst",
        "32",
    ]
    .map(String::from);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut p1 = s.producer("one", 1, &args);
    let mut p2 = s.producer("two", 2, &args);
    let mut rng = Pcg64::seed_from_u64(11);
    for _ in 0..4 {
        let mut d = s.daemon();
        std::thread::sleep(Duration::from_millis(rng.gen_range(60..300)));
        kill9(&mut d);
    }
    let mut d = s.daemon();
    assert!(p1.wait().unwrap().success());
    assert!(p2.wait().unwrap().success());
    let file = s.path("out.nat44Session.csv");
    let rows = || {
        read_lines(&file)
            .lines()
            .filter(|l| l.starts_with("nat44Session,"))
            .count() as u64
    };
    wait_for(120, "both producers' records", || rows() >= 2 * N);
    assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
    let mut seqs: std::collections::BTreeMap<u64, Vec<u64>> = Default::default();
    for (tag, seq) in csv_tags_and_seqs(&file) {
        seqs.entry(tag).or_default().push(seq);
    }
    for tag in [1, 2] {
        assert_exactly(
            &seqs[&tag],
            N,
            &format!("out.nat44Session.csv, producer {tag}"),
        );
    }
    assert!(!s.path("out.csv").exists());
}
