//! While no daemon drains, a producer follows its ring's policy; the
//! drops it counted reach the log when the daemon comes back.

mod common;

use common::*;

#[test]
fn drop_newest_counts_while_the_daemon_is_away_and_the_count_reaches_the_log() {
    let s = Setup::new("[sink]\ntype = \"file\"\npath = \"@/out.jsonl\"\n");
    // No daemon yet: 16 records fit, the other 984 are dropped and counted.
    let mut p = s.producer(
        "away",
        5,
        &[
            "--records",
            "1000",
            "--capacity",
            "16",
            "--backpressure",
            "drop_newest",
        ],
    );
    assert!(p.wait().unwrap().success());
    let mut d = s.daemon();
    wait_for(60, "the ring's end line", || {
        !parse(&read_lines(&s.path("out.jsonl"))).ends.is_empty()
    });
    assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
    let out = parse(&read_lines(&s.path("out.jsonl")));
    assert_exactly(&out.seqs[&5], 16, "the records that fit");
    assert_eq!(out.drops.len(), 1, "{:?}", out.drops);
    assert_eq!(out.drops[0]["dropped"], 984, "{:?}", out.drops[0]);
    // Under drop_newest every drop is a full ring's, and says so.
    assert_eq!(out.drops[0]["reason"], "full", "{:?}", out.drops[0]);
    assert_eq!(out.ends[0]["dplogd"], "producer_closed");
    assert_eq!(out.ends[0]["records"], 16);
}

#[test]
fn block_waits_while_the_daemon_is_away_and_loses_nothing() {
    let s = Setup::new("[sink]\ntype = \"file\"\npath = \"@/out.jsonl\"\n");
    let mut p = s.producer("wait", 6, &["--records", "500", "--capacity", "16"]);
    // The producer fills its ring and waits.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(p.try_wait().unwrap().is_none(), "the producer did not wait");
    let mut d = s.daemon();
    assert!(p.wait().unwrap().success());
    wait_for(60, "the ring's end line", || {
        !parse(&read_lines(&s.path("out.jsonl"))).ends.is_empty()
    });
    assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
    let out = parse(&read_lines(&s.path("out.jsonl")));
    assert_exactly(&out.seqs[&6], 500, "a block ring");
    assert!(out.drops.is_empty());
}

/// The counters over HTTP (OpenMetrics, as a logger's) and in the stats
/// file at exit.
#[test]
fn the_counters_are_served_and_written_at_exit() {
    use std::io::{Read, Write};
    let s = Setup::new("[sink]\ntype = \"file\"\npath = \"@/out.jsonl\"\n");
    // Below the ephemeral range: no scrape's client socket (which would
    // then connect to itself and keep dplogd from binding) is given it.
    let port = dplog_testkit::free_tcp_port();
    let addr = format!("127.0.0.1:{port}");
    let stats = s.path("stats.txt");
    let mut d = s.daemon_with(&["--metrics", &addr, "--stats-file", stats.to_str().unwrap()]);
    let mut p = s.producer("count", 7, &["--records", "700", "--capacity", "64"]);
    assert!(p.wait().unwrap().success());
    wait_for(60, "the ring's end line", || {
        !parse(&read_lines(&s.path("out.jsonl"))).ends.is_empty()
    });
    let scrape = || {
        let mut c = std::net::TcpStream::connect(&addr).ok()?;
        c.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
            .ok()?;
        let mut body = String::new();
        c.read_to_string(&mut body).ok()?;
        Some(body)
    };
    // The snapshot is refreshed every --scan-ms.
    wait_for(30, "the served counters to count 700 records", || {
        scrape().is_some_and(|b| b.contains("dplog_consumer_written_total 700\n"))
    });
    let body = scrape().unwrap();
    assert!(
        body.contains("dplog_ring_enqueued_total{ring=\"0\"} 700"),
        "{body}"
    );
    assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
    let text = read(&stats);
    assert!(
        text.contains("dplog_consumer_written_total 700\n"),
        "{text}"
    );
    assert!(
        text.contains("dplog_consumer_dropped_format_total 0\n"),
        "{text}"
    );
}
