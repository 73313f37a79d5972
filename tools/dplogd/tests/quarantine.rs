//! A ring whose header, indices or records are corrupted while dplogd
//! serves it is quarantined, named on stderr; the other rings keep being
//! drained and the daemon stays up.

mod common;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use common::*;
use dplog_core::shm::{ShmOptions, ShmProducer, SHM_HEADER_BYTES, SHM_VERSION};
use dplog_core::Slot64;
use dplog_schema_nat::NatRecord;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

/// A ring created by this process (so its producer is alive), holding
/// `n` records of `tag`.
fn ring(dir: &Path, name: &str, tag: u32, n: u64) -> ShmProducer<Slot64> {
    let mut p = ShmProducer::create(
        &ShmOptions {
            dir: dir.to_path_buf(),
            name: name.into(),
            capacity: 64,
            group: None,
            daemon_uid: None,
        },
        &dplog_schema_nat::all(),
    )
    .unwrap();
    for i in 0..n {
        p.try_push(tagged_record(tag, i)).unwrap();
    }
    p
}

fn write_at(p: &Path, off: u64, b: &[u8]) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(p)
        .unwrap()
        .write_all_at(b, off)
        .unwrap();
}

fn count(s: &Setup, tag: u64) -> usize {
    parse(&read_lines(&s.path("out.jsonl")))
        .seqs
        .get(&tag)
        .map_or(0, Vec::len)
}

#[test]
fn corrupted_rings_are_quarantined_and_the_others_still_drained() {
    let s = Setup::new("[sink]\ntype = \"file\"\npath = \"@/out.jsonl\"\n");
    let mut d = s.daemon();
    // A healthy producer process streaming throughout; a second one is
    // started once every corrupted ring is quarantined.
    const N: u64 = 3000;
    let healthy = [
        "--records",
        "3000",
        "--capacity",
        "64",
        "--pause-us",
        "2000",
    ];
    let mut a = s.producer("healthya", 101, &healthy);
    // Rings this process corrupts, each holding 10 good records first.
    let mut rng = Pcg64::seed_from_u64(17);
    let mut bad: Vec<(ShmProducer<Slot64>, &str)> = Vec::new();
    for (i, how) in [
        "tail_past_capacity",
        "tail_huge",
        "tail_backwards",
        "record_length_huge",
        "record_schema_unknown",
        "random_header_and_indices",
        "file_truncated",
    ]
    .into_iter()
    .enumerate()
    {
        bad.push((
            ring(
                &s.rings(),
                how.split('_').next().unwrap(),
                10 + i as u32,
                10,
            ),
            how,
        ));
        let _ = i;
    }
    wait_for(60, "the good records of the rings to be corrupted", || {
        (10..17).all(|t| count(&s, t) == 10)
    });
    for (i, (p, how)) in bad.iter_mut().enumerate() {
        let path: PathBuf = p.path().to_path_buf();
        let slot = |k: u64| SHM_HEADER_BYTES as u64 + (k % 64) * 64;
        match *how {
            "tail_past_capacity" => write_at(&path, 128, &(10u64 + 65).to_ne_bytes()),
            "tail_huge" => write_at(&path, 128, &u64::MAX.to_ne_bytes()),
            "tail_backwards" => write_at(&path, 128, &3u64.to_ne_bytes()),
            "record_length_huge" => {
                // Record 10 with a length of 65535, then published.
                p.try_push(tagged_record(10 + i as u32, 10)).unwrap();
                write_at(&path, slot(10), &u16::MAX.to_ne_bytes());
                // Publish it again after the damage (the push published
                // it already; the daemon may or may not have read it).
                write_at(&path, 128, &12u64.to_ne_bytes());
                write_at(&path, slot(11), &u16::MAX.to_ne_bytes());
            }
            "record_schema_unknown" => {
                let mut r = tagged_record(10 + i as u32, 10);
                // SAFETY: a Slot64 is 64 plain bytes.
                let b: &mut [u8; 64] = unsafe { &mut *(&mut r as *mut NatRecord).cast() };
                b[2..4].copy_from_slice(&999u16.to_ne_bytes());
                write_at(&path, slot(10), b);
                write_at(&path, 128, &11u64.to_ne_bytes());
            }
            "random_header_and_indices" => {
                let mut junk = vec![0u8; 8192];
                rng.fill(&mut junk[..]);
                // Keep the tail strictly invalid so the outcome is certain:
                // random bytes elsewhere (header, head, counters) too.
                junk[128..136].copy_from_slice(&(1u64 << 40).to_ne_bytes());
                write_at(&path, 0, &junk);
            }
            "file_truncated" => {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .unwrap()
                    .set_len(4096)
                    .unwrap();
            }
            _ => unreachable!(),
        }
    }
    // Files that were never valid rings: refused at open.
    let junk_path = s.rings().join("junk.1.00000000000000aa.ring");
    let mut junk = vec![0u8; SHM_HEADER_BYTES + 64 * 64];
    rng.fill(&mut junk[..]);
    std::fs::write(&junk_path, &junk).unwrap();
    let mut lying = vec![0u8; SHM_HEADER_BYTES];
    lying[..8].copy_from_slice(b"DPLOGSHM");
    lying[8..12].copy_from_slice(&SHM_VERSION.to_ne_bytes());
    lying[12..16].copy_from_slice(&(SHM_HEADER_BYTES as u32).to_ne_bytes());
    lying[16..20].copy_from_slice(&64u32.to_ne_bytes());
    lying[20..24].copy_from_slice(&(1u32 << 20).to_ne_bytes()); // 64 MiB of slots claimed
    std::fs::write(s.rings().join("liar.1.00000000000000bb.ring"), &lying).unwrap();
    // A live ring whose first schema description (at 8192: a length, id,
    // size, then the name's length and bytes) names another schema than
    // its descriptor: made aside, damaged, then moved in, so the daemon
    // only ever sees the damage.
    let aside = s.path("aside");
    std::fs::create_dir(&aside).unwrap();
    let described = ring(&aside, "described", 30, 10);
    let dpath = described.path().to_path_buf();
    let mut c0 = [0u8; 1];
    std::fs::File::open(&dpath)
        .unwrap()
        .read_exact_at(&mut c0, 8192 + 7)
        .unwrap();
    write_at(&dpath, 8192 + 7, &[c0[0] ^ 1]);
    let dfile = dpath.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::rename(&dpath, s.rings().join(&dfile)).unwrap();

    wait_for(60, "a quarantine line per corrupted ring", || {
        let e = s.stderr();
        bad.iter().all(|(p, _)| {
            let f = p.path().file_name().unwrap().to_string_lossy().into_owned();
            e.contains(&format!("ring {f}: quarantined"))
        }) && e.contains("ring junk.1.00000000000000aa.ring: refused: bad ring header")
            && e.contains(&format!(
                "ring {dfile}: quarantined: bad schema description"
            ))
            && e.contains("ring liar.1.00000000000000bb.ring: refused: bad ring header")
    });
    // Rings are still served after the quarantines: a new one whole.
    let mut c = s.producer("healthyc", 103, &healthy);
    assert!(a.wait().unwrap().success());
    assert!(c.wait().unwrap().success());
    wait_for(60, "both healthy producers' end lines", || {
        let o = parse(&read_lines(&s.path("out.jsonl")));
        end_of(&o, "healthya").is_some() && end_of(&o, "healthyc").is_some()
    });
    // SAFETY: kill(2) with signal 0 only checks that the process exists.
    assert_eq!(unsafe { libc::kill(d.id() as i32, 0) }, 0, "dplogd died");
    assert_eq!(
        term(&mut d),
        0,
        "dplogd exit status; stderr:\n{}",
        s.stderr()
    );
    // A restarted daemon does not serve the quarantined rings again (their
    // files remain; the ones with a broken header are refused at open): the output
    // does not change.
    let before = read(&s.path("out.jsonl"));
    let mut d = s.daemon();
    wait_for(
        60,
        "the restarted daemon to pass over the quarantined rings",
        || {
            s.stderr()
                .matches("quarantined before the restart; not served")
                .count()
                >= 5
        },
    );
    assert_eq!(
        term(&mut d),
        0,
        "dplogd exit status; stderr:\n{}",
        s.stderr()
    );
    assert_eq!(read(&s.path("out.jsonl")), before);
    let out = parse(&read_lines(&s.path("out.jsonl")));
    assert_exactly(&out.seqs[&101], N, "healthy ring a");
    assert_exactly(&out.seqs[&103], N, "healthy ring c");
    // Every corrupted ring: its 10 good records once, then its
    // quarantine line, and nothing of the damage.
    for (i, (p, how)) in bad.iter().enumerate() {
        let tag = 10 + i as u64;
        let seqs = &out.seqs[&tag];
        assert_eq!(seqs[..10], (0..10).collect::<Vec<_>>()[..], "{how}");
        // The damaged record was refused; a good record pushed before the
        // damage (record_length_huge's 11th) may have been read first.
        assert!(seqs.len() <= 11, "{how}: {seqs:?}");
        let f = p.path().file_name().unwrap().to_string_lossy().into_owned();
        let end = out
            .ends
            .iter()
            .find(|v| v["ring"] == f.as_str())
            .unwrap_or_else(|| panic!("{how}: no quarantine line"));
        assert_eq!(end["dplogd"], "ring_quarantined", "{how}");
    }
    // The ring with the bad description: not served, marked quarantined
    // (its producer stops waiting), the damage named.
    assert!(!out.seqs.contains_key(&30));
    // (The producer made the file aside and looks for the consumer file
    // there: the verdict is read from the daemon's consumer file itself.)
    let verdict = std::fs::read(s.rings().join(format!("{dfile}.consumer"))).unwrap();
    assert_eq!(verdict[384..388], 3u32.to_ne_bytes());
    drop(described);
    let e = s.stderr();
    assert!(e.contains("is described as"), "{e}");
    assert!(e.contains("more than the capacity 64"), "{e}");
    assert!(e.contains("moved backwards"), "{e}");
    assert!(e.contains("length 65535"), "{e}");
    assert!(e.contains("schema id 999"), "{e}");
    assert!(e.contains("file shrank"), "{e}");
}

/// `name{ring="i"} v` lines of an OpenMetrics text: value by ring id.
fn per_ring(text: &str, name: &str) -> std::collections::BTreeMap<u64, u64> {
    let prefix = format!("{name}{{ring=\"");
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(&prefix)?;
            let (id, v) = rest.split_once("\"} ")?;
            Some((id.parse().ok()?, v.parse().ok()?))
        })
        .collect()
}

/// A ring's drop counters are its producer's word, checked as its index
/// is: a total of u64::MAX, or one below the drops already reported,
/// quarantines that ring with a line naming the counter; the bogus count
/// is never reported, the other rings are still served, and the daemon's
/// counters stay coherent (each ring's produced = enqueued + dropped,
/// nothing wrapped).
#[test]
fn a_ring_whose_drop_counter_lies_is_quarantined_and_the_counters_stay_coherent() {
    const OFF_DROPPED_TOTAL: u64 = 416;
    let s = Setup::new("[sink]\ntype = \"file\"\npath = \"@/out.jsonl\"\n");
    let stats = s.path("stats.txt");
    let mut d = s.daemon_with(&["--stats-file", stats.to_str().unwrap()]);
    let maxed = ring(&s.rings(), "maxed", 41, 10);
    let mut back = ring(&s.rings(), "back", 42, 10);
    back.count_dropped(
        dplog_core::DropReason::Full,
        5,
        dplog_core::tsc::now_ticks(),
    );
    wait_for(60, "the good records and the 5 drops reported", || {
        let o = parse(&read_lines(&s.path("out.jsonl")));
        count(&s, 41) == 10 && count(&s, 42) == 10 && o.drops.len() == 1
    });
    write_at(maxed.path(), OFF_DROPPED_TOTAL, &u64::MAX.to_ne_bytes());
    write_at(back.path(), OFF_DROPPED_TOTAL, &2u64.to_ne_bytes());
    let file =
        |p: &ShmProducer<Slot64>| p.path().file_name().unwrap().to_string_lossy().into_owned();
    wait_for(60, "a quarantine line per lying ring", || {
        let e = s.stderr();
        e.contains(&format!("ring {}: quarantined: drop counter", file(&maxed)))
            && e.contains(&format!("ring {}: quarantined: drop counter", file(&back)))
    });
    // Rings are still served after the quarantines: a new one whole.
    let mut c = s.producer(
        "after",
        43,
        &["--records", "1000", "--capacity", "64", "--pause-us", "500"],
    );
    assert!(c.wait().unwrap().success());
    wait_for(60, "the new producer's end line", || {
        end_of(&parse(&read_lines(&s.path("out.jsonl"))), "after").is_some()
    });
    assert_eq!(
        term(&mut d),
        0,
        "dplogd exit status; stderr:\n{}",
        s.stderr()
    );
    let e = s.stderr();
    assert!(
        e.contains(
            "quarantined: drop counter 18446744073709551615 is more than one drop per nanosecond"
        ),
        "{e}"
    );
    assert!(
        e.contains("quarantined: drop counter moved backwards from 5 to 2"),
        "{e}"
    );
    let out = parse(&read_lines(&s.path("out.jsonl")));
    assert_exactly(&out.seqs[&41], 10, "the maxed ring's records");
    assert_exactly(&out.seqs[&42], 10, "the backwards ring's records");
    assert_exactly(&out.seqs[&43], 1000, "the ring served after");
    // The one true drop report, and nothing of the bogus counts.
    assert_eq!(out.drops.len(), 1, "{:?}", out.drops);
    assert_eq!(out.drops[0]["dropped"], 5, "{:?}", out.drops[0]);
    for p in [&maxed, &back] {
        let end = out
            .ends
            .iter()
            .find(|v| v["ring"] == file(p).as_str())
            .unwrap_or_else(|| panic!("{}: no quarantine line", file(p)));
        assert_eq!(end["dplogd"], "ring_quarantined");
        assert_eq!(end["records"], 10);
    }
    // The counters written at exit: per ring, produced = enqueued + the
    // drops reported; over the three rings 10 + (10 + 5) + 1000.
    let text = read(&stats);
    let produced = per_ring(&text, "dplog_ring_produced_total");
    let enqueued = per_ring(&text, "dplog_ring_enqueued_total");
    assert_eq!(produced.len(), 3, "{text}");
    assert_eq!(
        produced.keys().collect::<Vec<_>>(),
        enqueued.keys().collect::<Vec<_>>()
    );
    for (id, p) in &produced {
        let full = text
            .lines()
            .find_map(|l| {
                l.strip_prefix(&format!(
                    "dplog_ring_dropped_total{{ring=\"{id}\",reason=\"full\"}} "
                ))
            })
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("ring {id}: no full drops counter in\n{text}"));
        assert_eq!(*p, enqueued[id] + full, "ring {id}:\n{text}");
    }
    assert_eq!(produced.values().sum::<u64>(), 1025, "{text}");
    assert_eq!(enqueued.values().sum::<u64>(), 1020, "{text}");
    assert!(!text.contains("18446744073709551615"), "{text}");
}
