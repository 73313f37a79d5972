//! Files in the ring directory that are not rings.

mod common;

use common::*;

/// Files whose names do not parse as rings are said once each on stderr
/// (dot files, the producers' temporaries and the lock, not at all) and
/// ignored and left alone; a real ring next to them is served whole.
#[test]
fn files_that_are_not_rings_are_said_once_each() {
    let s = Setup::new("[sink]\ntype = \"file\"\npath = \"@/out.jsonl\"\n");
    let strays = ["junk.1.abc.ring", "notes.txt", "x.ring.consumer"];
    for f in strays {
        std::fs::write(s.rings().join(f), b"not a ring").unwrap();
    }
    std::fs::write(s.rings().join(".hidden.tmp"), b"").unwrap();
    let mut d = s.daemon();
    let said = |f: &str| {
        s.stderr()
            .matches(&format!(
                "dplogd: {}: not a ring file",
                s.rings().join(f).display()
            ))
            .count()
    };
    wait_for(30, "the stray files said", || {
        strays.iter().all(|f| said(f) >= 1)
    });
    // Many scans later (a producer served whole, at 20 ms a scan), each
    // was said once.
    let mut p = s.producer(
        "real",
        5,
        &["--records", "3000", "--capacity", "64", "--pause-us", "300"],
    );
    assert!(p.wait().unwrap().success());
    wait_for(60, "the producer's end line", || {
        parse(&read_lines(&s.path("out.jsonl"))).ends.len() == 1
    });
    assert_exactly(
        &parse(&read_lines(&s.path("out.jsonl"))).seqs[&5],
        3000,
        "output",
    );
    for f in strays {
        assert_eq!(said(f), 1, "{f}: {}", s.stderr());
        assert!(s.rings().join(f).exists(), "{f} is left alone");
    }
    assert!(!s.stderr().contains(".hidden.tmp"), "{}", s.stderr());
    assert!(!s.stderr().contains(".dplogd.lock"), "{}", s.stderr());
    assert_eq!(term(&mut d), 0, "{}", s.stderr());
}
