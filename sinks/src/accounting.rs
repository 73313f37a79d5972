//! Bookkeeping the sinks share: the batch fingerprint of the retry
//! contract ([`fingerprint`]), and their counters, which are plain
//! `AtomicU64`s that only the consumer thread writes (the thread that
//! calls every `Sink` method, including the callbacks it runs from
//! `poll`), read from any thread for metrics and exactly once the
//! consumer thread is joined.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

/// Adds `n` to a counter only the consumer thread writes: a load and a
/// store, no read-modify-write.
pub(crate) fn bump(c: &AtomicU64, n: u64) {
    // Relaxed: single-writer statistic; the partner of a final read is
    // the consumer thread's join.
    c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}

/// Reads one counter.
pub(crate) fn read(c: &AtomicU64) -> u64 {
    // Relaxed: a statistic (see `bump`).
    c.load(Ordering::Relaxed)
}

/// A sink's counters for `SinkCounters::named`: each of `counters` read
/// once, named `prefix.name`.
pub(crate) fn named(prefix: &str, counters: &[(&str, &AtomicU64)]) -> Vec<(String, u64)> {
    counters
        .iter()
        .map(|(n, c)| (format!("{prefix}.{n}"), read(c)))
        .collect()
}

/// True when the line starting at byte `pos` of a batch lies in one of
/// `reports` (its in-band drop-report lines: ascending, disjoint ranges).
pub(crate) fn in_report(reports: &[Range<usize>], pos: usize) -> bool {
    let i = reports.partition_point(|r| r.end <= pos);
    reports.get(i).is_some_and(|r| r.start <= pos)
}

/// Identifies a batch for the retry contract: its length and FNV-1a of its
/// first and last 64 bytes (a different batch of the same length, e.g. after
/// a failover, starts from its beginning).
pub(crate) fn fingerprint(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ b.len() as u64;
    let head = &b[..b.len().min(64)];
    let tail = &b[b.len().saturating_sub(64)..];
    for &x in head.iter().chain(tail) {
        h = (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bump_adds_and_named_reads_each_counter_under_its_prefix() {
        let (a, b) = (AtomicU64::new(0), AtomicU64::new(7));
        bump(&a, 3);
        bump(&a, 2);
        bump(&b, 1);
        assert_eq!(read(&a), 5);
        assert_eq!(
            named("syslog", &[("messages", &a), ("refused", &b)]),
            [
                ("syslog.messages".to_string(), 5),
                ("syslog.refused".to_string(), 8)
            ]
        );
    }

    #[test]
    fn in_report_is_true_exactly_inside_the_ranges() {
        let reports = [2..5, 9..10];
        let inside: Vec<usize> = (0..12).filter(|&p| in_report(&reports, p)).collect();
        assert_eq!(inside, [2, 3, 4, 9]);
        assert!(!in_report(&[], 0));
    }
}
