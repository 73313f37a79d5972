//! Tests of the SPSC ring through its public and crate API: producer,
//! consumer, windows, stop protocol and drop reports.

use super::*;
use crate::record::test_record::TestRecord;
use crate::record::RecordHeader;

pub(super) fn rec(i: u64) -> TestRecord {
    TestRecord {
        timestamp_ns: i,
        header: RecordHeader::of::<TestRecord>(),
        ..Default::default()
    }
}

#[test]
fn drop_reports_split_the_drops_by_reason_exactly_once() {
    let (mut p, mut c) = ring::<TestRecord>(4).unwrap();
    p.count_dropped(DropReason::Degraded, 3, 10);
    p.count_dropped(DropReason::Full, 2, 20);
    let d = c.take_drop_report().unwrap();
    assert_eq!(
        (d.dropped, d.by_reason, d.unattributed()),
        (5, [2, 3, 0, 0], 0)
    );
    assert_eq!(
        d.reasons().collect::<Vec<_>>(),
        [(DropReason::Full, 2), (DropReason::Degraded, 3)]
    );
    assert!(c.take_drop_report().is_none(), "reported once");
    p.count_dropped(DropReason::Degraded, 1, 30);
    let d = c.take_drop_report().unwrap();
    assert_eq!((d.dropped, d.by_reason), (1, [0, 1, 0, 0]));
}

#[test]
fn a_drop_counted_but_not_yet_in_the_total_goes_to_a_later_report() {
    // The total says 4 new drops; the counters already hold a fifth,
    // of another reason, still on its way to the total.
    let mut reported = [1, 0, 0, 0];
    assert_eq!(
        split_by_reason(4, [3, 2, 0, 1], &mut reported),
        [2, 2, 0, 0]
    );
    assert_eq!(reported, [3, 2, 0, 0]);
    // It reaches the total: the next report gives it to its reason.
    assert_eq!(
        split_by_reason(1, [3, 2, 0, 1], &mut reported),
        [0, 0, 0, 1]
    );
    assert_eq!(reported, [3, 2, 0, 1]);
    // Counters that cover less than the total (a corrupted file)
    // leave the rest to no reason.
    let d = DropDelta {
        dropped: 5,
        by_reason: split_by_reason(5, [5, 2, 0, 1], &mut reported),
        ..Default::default()
    };
    assert_eq!((d.by_reason, d.unattributed()), ([2, 0, 0, 0], 3));
}

/// CPU time of the calling thread.
fn thread_cpu() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[test]
fn a_producer_blocked_on_a_stalled_consumer_sleeps_instead_of_burning_its_cpu() {
    let (mut p, mut c) = ring::<TestRecord>(4).unwrap();
    for i in 0..4 {
        p.try_push(rec(i)).unwrap();
    }
    let blocked = std::thread::spawn(move || {
        let (cpu0, wall0) = (thread_cpu(), std::time::Instant::now());
        p.push(rec(4)).unwrap();
        (thread_cpu() - cpu0, wall0.elapsed(), p)
    });
    // The consumer stalls for 400 ms, then makes room.
    std::thread::sleep(std::time::Duration::from_millis(400));
    assert_eq!(c.pop().unwrap().timestamp_ns, 0);
    let (cpu, wall, _p) = blocked.join().unwrap();
    assert!(
        wall >= std::time::Duration::from_millis(390),
        "it waited: {wall:?}"
    );
    // Spinning or yielding the whole time would use about all of it.
    assert!(
        cpu < wall / 4,
        "blocked producer used {cpu:?} of CPU in {wall:?}"
    );
    for i in 1..5 {
        assert_eq!(c.pop().unwrap().timestamp_ns, i);
    }
}

/// Writes `n` records into `w` as the inline C `dplog_log` does: slot
/// by slot, each published with a Release store of its index + 1.
fn fill_window(w: &RawWindow<TestRecord>, n: usize, ts0: u64) {
    for i in 0..n {
        // SAFETY: slot i < w.len of a window just opened; `tail` points
        // at the ring's live tail index.
        unsafe {
            w.slots.as_ptr().add(i).write(rec(ts0 + i as u64));
            if w.publish_each {
                (*w.tail).store(w.first + i + 1, Ordering::Release);
            }
        }
    }
}

#[test]
fn a_window_stops_before_sampled_indexes_and_its_records_reach_the_consumer_in_order() {
    const S: usize = SAMPLE_EVERY;
    let (mut p, mut c) = ring::<TestRecord>(2 * S).unwrap();
    assert!(
        p.open_window(2 * S).is_none(),
        "index 0 is sampled: a push takes it"
    );
    p.try_push(rec(0)).unwrap();
    let w = p.open_window(2 * S).unwrap();
    assert_eq!(
        (w.first, w.len),
        (1, S - 1),
        "up to the next sampled index, SAMPLE_EVERY"
    );
    assert!(w.publish_each);
    fill_window(&w, 40, 1);
    assert_eq!(c.len(), 41, "each window record is published as written");
    // SAFETY: 40 of the window's slots were written, nothing else ran.
    unsafe { p.close_window(40) };
    assert_eq!(p.pending(), 0);
    let w = p.open_window(5).unwrap();
    assert_eq!((w.first, w.len), (41, 5), "max caps the window");
    fill_window(&w, 5, 41);
    // SAFETY: as above.
    unsafe { p.close_window(5) };
    for i in 46..S as u64 {
        p.try_push(rec(i)).unwrap();
    }
    assert!(p.open_window(8).is_none(), "index SAMPLE_EVERY is sampled");
    p.try_push(rec(S as u64)).unwrap();
    for i in 0..=S as u64 {
        assert_eq!(c.pop().unwrap().timestamp_ns, i);
    }
    assert!(c.pop().is_none());
    assert_eq!(
        p.enqueued(),
        S as u64 + 1,
        "window records count as enqueued"
    );
}

#[test]
fn a_window_never_wraps_nor_passes_the_free_room_nor_the_publication_batch() {
    let (mut p, mut c) = ring::<TestRecord>(64).unwrap();
    for i in 0..60 {
        p.try_push(rec(i)).unwrap();
    }
    for _ in 0..50 {
        c.pop().unwrap();
    }
    let w = p.open_window(100).unwrap();
    assert_eq!(
        (w.first, w.len),
        (60, 4),
        "cut at the end of the slot array"
    );
    fill_window(&w, 4, 60);
    // SAFETY: the four slots were written.
    unsafe { p.close_window(4) };
    p.try_push(rec(64)).unwrap();
    // 65 pushed, 50 popped: 49 free, but the window is also cut at
    // sampled index 128.
    let w = p.open_window(100).unwrap();
    assert_eq!((w.first, w.len), (65, 49), "cut at the free room");
    // SAFETY: nothing written.
    unsafe { p.close_window(0) };

    let (mut p, c) = ring::<TestRecord>(256).unwrap();
    p.set_publish_every(8);
    p.try_push(rec(0)).unwrap();
    p.try_push(rec(1)).unwrap();
    let w = p.open_window(100).unwrap();
    assert!(!w.publish_each);
    assert_eq!(w.len, 5, "2 pending + 5 = 7 < publish_every");
    fill_window(&w, 5, 2);
    assert_eq!(c.len(), 0, "deferred: nothing published by the writer");
    // SAFETY: five slots written.
    unsafe { p.close_window(5) };
    assert_eq!(p.pending(), 7);
    p.try_push(rec(7)).unwrap();
    assert_eq!(c.len(), 8, "the eighth record publishes the batch");
}

#[test]
fn deferred_publication_is_invisible_until_batch_flush_full_or_drop() {
    let (mut p, mut c) = ring::<TestRecord>(8).unwrap();
    p.set_publish_every(4);
    for i in 0..3 {
        p.try_push(rec(i)).unwrap();
    }
    assert_eq!(p.pending(), 3);
    assert_eq!(c.len(), 0, "three of four: nothing published yet");
    p.try_push(rec(3)).unwrap();
    assert_eq!(p.pending(), 0);
    assert_eq!(c.len(), 4, "the fourth push publishes the batch");
    p.try_push(rec(4)).unwrap();
    assert_eq!(c.len(), 4);
    p.flush();
    assert_eq!(c.len(), 5, "flush publishes the pending record");
    p.flush();
    assert_eq!(c.len(), 5, "a second flush is a no-op");
    // Fill the ring: 3 more fit (capacity 8); the push that finds it
    // full publishes what is pending before it fails.
    for i in 5..8 {
        p.try_push(rec(i)).unwrap();
    }
    assert_eq!(c.len(), 5);
    assert!(p.try_push(rec(8)).is_err());
    assert_eq!(c.len(), 8, "a full ring publishes the pending records");
    let mut seen = Vec::new();
    c.read_burst(8, |r| seen.push(r.timestamp_ns));
    assert_eq!(seen, (0..8).collect::<Vec<_>>());
    p.try_push(rec(8)).unwrap();
    assert_eq!(c.len(), 0);
    drop(p);
    assert_eq!(c.pop().map(|r| r.timestamp_ns), Some(8), "drop flushes");
    assert!(c.is_finished());
}

#[test]
fn publish_every_is_clamped_and_lowering_it_publishes() {
    let (mut p, c) = ring::<TestRecord>(4).unwrap();
    p.set_publish_every(1000);
    for i in 0..3 {
        p.try_push(rec(i)).unwrap();
    }
    assert_eq!(c.len(), 0);
    p.try_push(rec(3)).unwrap();
    assert_eq!(c.len(), 4, "clamped to the capacity (4)");
    let (mut p, c) = ring::<TestRecord>(4).unwrap();
    p.set_publish_every(4);
    p.try_push(rec(0)).unwrap();
    p.try_push(rec(1)).unwrap();
    assert_eq!(c.len(), 0);
    p.set_publish_every(2);
    assert_eq!(
        c.len(),
        2,
        "lowering the batch below the pending count publishes"
    );
    p.set_publish_every(0);
    p.try_push(rec(2)).unwrap();
    assert_eq!(c.len(), 3, "0 means every push");
}

/// Publishes `index` as the ring's tail, as a misbehaving writer of the
/// shared index would.
fn publish_raw(p: &Producer<TestRecord>, index: usize) {
    p.shared.tail.store(index, Ordering::Release);
}

#[test]
fn a_fill_above_the_capacity_stops_the_ring_after_the_records_accepted_before() {
    let (mut p, mut c) = ring::<TestRecord>(8).unwrap();
    for i in 0..5 {
        p.try_push(rec(i)).unwrap();
    }
    let mut seen = vec![];
    assert_eq!(c.read_burst(3, |r| seen.push(r.timestamp_ns)), 3);
    // Consumer at 3, indices up to 5 accepted: 3 + 8 = 11 is the
    // highest valid tail.
    publish_raw(&p, 12);
    while c.read_burst(8, |r| seen.push(r.timestamp_ns)) > 0 {}
    assert_eq!(seen, vec![0, 1, 2, 3, 4], "each accepted record once");
    assert!(c.is_stopped() && p.is_stopped());
    assert_eq!(
        c.read_burst(8, |_| panic!("a stopped ring is never read")),
        0
    );
    // Every later call fails at once, though the producer's own view
    // still has room for 3 (it cached the consumer index 0): with an
    // unbounded wait, a push that waited would never return.
    p.set_block_spins(u32::MAX);
    for i in 5..13 {
        assert_eq!(p.try_push(rec(i)), Err(rec(i)));
        assert_eq!(p.push(rec(i)), Err(Disconnected(rec(i))));
    }
    assert_eq!(p.try_push_burst(&[rec(13), rec(14)]), 0);
    assert_eq!(p.try_push_bulk(&[rec(13)]), 0);
    assert_eq!(p.push_burst(&[rec(13), rec(14)]), Err(Disconnected(0)));
    assert!(p.reserve(1).is_none());
    assert!(p.reserve(usize::MAX).is_none());
    assert!(p.reserve_burst(usize::MAX).is_empty());
    assert!(p.reserve_raw(1).is_none());
    assert_eq!(p.enqueued(), 5);
    assert_eq!(
        c.read_burst(8, |_| panic!("a stopped ring is never read")),
        0
    );
    let s = crate::stats::RingStats::read(0, &p.shared);
    assert!(s.stopped);
    assert_eq!(
        (s.enqueued, s.dequeued, s.dropped_stopped, s.fill, s.produced),
        (5, 5, 0, 0, 5),
        "enqueued is what the consumer accepted; nothing was written after it (the refused records are the caller's, counted by the policy layer)"
    );
    assert_eq!(c.shared().bad_tail.load(Ordering::Relaxed), 12);
}

#[test]
fn records_written_after_the_stop_point_count_as_dropped_stopped_once() {
    let (mut p, mut c) = ring::<TestRecord>(2 * SAMPLE_EVERY).unwrap();
    for i in 0..5 {
        p.try_push(rec(i)).unwrap();
    }
    // An inline window open before the stop, as the C header's
    // dplog_log holds one.
    let w = p.open_window(16).unwrap();
    assert_eq!(w.first, 5);
    assert_eq!(c.read_burst(8, |_| {}), 5);
    // A bad index breaks the protocol: the consumer, which accepted
    // 5, stops the ring at its next look.
    p.publish_raw_index(5 + 2 * SAMPLE_EVERY + 1);
    assert_eq!(c.read_burst(8, |_| panic!("nothing more is read")), 0);
    assert!(c.is_stopped());
    let stats = |p: &Producer<TestRecord>| crate::stats::RingStats::read(0, &p.shared);
    assert_eq!(
        stats(&p).dropped_stopped,
        0,
        "the published tail is still the bad index: nothing counted from it"
    );
    // The window's writer goes on, unaware: 3 records after the stop
    // point, published, never read.
    fill_window(&w, 3, 5);
    let s = stats(&p);
    assert_eq!(
        (s.enqueued, s.dropped_stopped, s.produced),
        (5, 3, 8),
        "estimated from the published tail before the producer knows"
    );
    // SAFETY: 3 of the window's slots were written, nothing else ran.
    unsafe { p.close_window(3) };
    assert_eq!(p.try_push(rec(8)), Err(rec(8)), "the next call fails");
    let s = stats(&p);
    assert_eq!((s.enqueued, s.dropped_stopped, s.produced), (5, 3, 8));
    assert_eq!(p.shared.stranded.load(Ordering::Relaxed), 3, "settled");
    assert!(p.open_window(16).is_none());
    assert_eq!(p.try_push(rec(8)), Err(rec(8)));
    let shared = p.shared.clone();
    drop(p);
    let s = crate::stats::RingStats::read(0, &shared);
    assert_eq!(
        (s.enqueued, s.dequeued, s.dropped_stopped, s.produced),
        (5, 5, 3, 8),
        "the drop settles again: each record counted once"
    );
    assert!(c.is_finished());
}

#[test]
fn a_tail_that_moves_backwards_stops_the_ring_and_nothing_is_read_twice() {
    let (mut p, mut c) = ring::<TestRecord>(8).unwrap();
    for i in 0..6 {
        p.try_push(rec(i)).unwrap();
    }
    let mut seen = vec![];
    while c.read_burst(4, |r| seen.push(r.timestamp_ns)) > 0 {}
    assert_eq!(seen, (0..6).collect::<Vec<_>>());
    // Behind the consumer: without the check, 2 - 6 wraps to a huge
    // fill and the consumer reads stale slots for ever.
    publish_raw(&p, 2);
    assert_eq!(c.read_burst(8, |r| seen.push(r.timestamp_ns)), 0);
    assert!(c.is_stopped());
    assert!(p.is_stopped());
    assert!(!c.is_finished(), "its producer is live");
    assert_eq!(seen.len(), 6);
    // Behind what the consumer accepted but not behind its head: also
    // a violation.
    let (mut p, mut c) = ring::<TestRecord>(8).unwrap();
    for i in 0..6 {
        p.try_push(rec(i)).unwrap();
    }
    assert_eq!(c.read_burst(2, |_| {}), 2);
    publish_raw(&p, 4);
    let mut n = 2;
    while c.read_burst(8, |_| n += 1) > 0 {}
    assert!(c.is_stopped(), "the reload sees 4 < 6");
    assert_eq!(n, 6, "2..6 were accepted before: read, once");
    drop(p);
    assert!(c.is_finished(), "a stopped ring ends with its producer");
}

#[test]
fn a_valid_tail_at_exactly_the_capacity_is_accepted() {
    let (mut p, mut c) = ring::<TestRecord>(4).unwrap();
    for round in 0..3u64 {
        for i in 0..4 {
            p.try_push(rec(round * 4 + i)).unwrap();
        }
        let mut n = 0;
        while c.read_burst(3, |_| n += 1) > 0 {}
        assert_eq!(n, 4);
    }
    assert!(!c.is_stopped());
}

#[test]
fn bad_capacities_are_errors() {
    for c in [0usize, 3, 6, 1000, MAX_CAPACITY * 2] {
        assert_eq!(ring::<TestRecord>(c).err(), Some(RingError::BadCapacity(c)));
    }
    assert!(ring::<TestRecord>(1).is_ok());
}

#[test]
fn a_ring_of_n_holds_exactly_n() {
    for cap in [1usize, 2, 16, 1024] {
        let (mut p, mut c) = ring::<TestRecord>(cap).unwrap();
        for i in 0..cap as u64 {
            assert!(p.try_push(rec(i)).is_ok(), "slot {i} of {cap}");
        }
        assert_eq!(p.try_push(rec(999)).unwrap_err().timestamp_ns, 999);
        assert_eq!(c.len(), cap);
        assert_eq!(c.pop().unwrap().timestamp_ns, 0);
        assert!(p.try_push(rec(cap as u64)).is_ok());
        let mut seen = vec![];
        c.read_burst(usize::MAX, |r| seen.push(r.timestamp_ns));
        assert_eq!(seen, (1..=cap as u64).collect::<Vec<_>>());
    }
}

#[test]
fn burst_pushes_a_prefix_and_wraps() {
    let (mut p, mut c) = ring::<TestRecord>(8).unwrap();
    let batch: Vec<_> = (0..5).map(rec).collect();
    assert_eq!(p.try_push_burst(&batch), 5);
    assert_eq!(p.try_push_burst(&batch), 3);
    assert_eq!(c.read_burst(6, |_| {}), 6);
    let more: Vec<_> = (10..20).map(rec).collect();
    assert_eq!(p.try_push_burst(&more), 6);
    let mut seen = vec![];
    while c.read_burst(3, |r| seen.push(r.timestamp_ns)) > 0 {}
    // The second burst pushed the prefix 0, 1, 2; six were read: 0..5 and 0.
    assert_eq!(seen, vec![1, 2, 10, 11, 12, 13, 14, 15]);
    assert_eq!(p.enqueued(), 14);
}

#[test]
fn cross_thread_fifo_no_loss() {
    const N: u64 = 200_000;
    let (mut p, mut c) = ring::<TestRecord>(64).unwrap();
    let t = std::thread::spawn(move || {
        let mut i = 0;
        while i < N {
            if i % 3 == 0 {
                let b: Vec<_> = (i..(i + 7).min(N)).map(rec).collect();
                p.push_burst(&b).unwrap();
                i += b.len() as u64;
            } else {
                p.push(rec(i)).unwrap();
                i += 1;
            }
        }
    });
    let mut next = 0;
    while !c.is_finished() {
        c.read_burst(32, |r| {
            assert_eq!(r.timestamp_ns, next);
            next += 1;
        });
    }
    t.join().unwrap();
    assert_eq!(next, N);
}

#[test]
fn push_to_a_dropped_consumer_returns_the_record() {
    let (mut p, c) = ring::<TestRecord>(1).unwrap();
    p.push(rec(1)).unwrap();
    drop(c);
    assert_eq!(p.push(rec(2)), Err(Disconnected(rec(2))));
}

#[test]
fn bulk_is_all_or_nothing_and_reserve_commit_publishes_once() {
    let (mut p, mut c) = ring::<TestRecord>(8).unwrap();
    let six: Vec<_> = (0..6).map(rec).collect();
    assert_eq!(p.try_push_bulk(&six), 6);
    assert_eq!(p.try_push_bulk(&six[..3]), 0, "only 2 free: nothing pushed");
    assert_eq!(c.len(), 6);
    assert!(p.reserve(3).is_none());
    {
        let mut r = p.reserve(2).unwrap();
        assert_eq!(r.len(), 2);
        r.push(rec(100)).unwrap();
        r.get_mut(0).unwrap().src_port = 7;
        assert!(r.get_mut(1).is_none());
        // Dropped uncommitted: nothing published.
    }
    assert_eq!(c.len(), 6);
    let mut r = p.reserve(2).unwrap();
    r.push(rec(6)).unwrap();
    r.get_mut(0).unwrap().src_port = 7;
    r.push(rec(7)).unwrap();
    assert_eq!(r.push(rec(8)), Err(rec(8)));
    assert_eq!(r.commit(), 2);
    assert_eq!(p.enqueued(), 8);
    let mut out = [TestRecord::default(); 5];
    assert_eq!(c.pop_bulk(&mut out), 5);
    let mut out9 = [TestRecord::default(); 9];
    assert_eq!(c.pop_bulk(&mut out9), 0, "only 3 left: nothing popped");
    assert_eq!(c.pop_burst(&mut out9), 3);
    assert_eq!(
        out9[..3].iter().map(|r| r.timestamp_ns).collect::<Vec<_>>(),
        vec![5, 6, 7]
    );
    assert_eq!(out9[1].src_port, 7, "edited in its slot before commit");
}

#[test]
fn zero_copy_read_spans_the_wrap_and_releases_once() {
    let (mut p, mut c) = ring::<TestRecord>(4).unwrap();
    assert_eq!(p.try_push_burst(&[rec(0), rec(1), rec(2)]), 3);
    assert_eq!(c.read_burst(3, |_| {}), 3);
    assert_eq!(p.try_push_burst(&[rec(3), rec(4), rec(5), rec(6)]), 4);
    {
        let b = c.read(10);
        assert_eq!(b.len(), 4);
        let (x, y) = b.as_slices();
        assert_eq!(
            x.iter().map(|r| r.timestamp_ns).collect::<Vec<_>>(),
            vec![3]
        );
        assert_eq!(
            y.iter().map(|r| r.timestamp_ns).collect::<Vec<_>>(),
            vec![4, 5, 6]
        );
        // Not released at the end of this scope.
    }
    assert_eq!(c.len(), 4, "not released: records stay");
    assert!(p.try_push(rec(9)).is_err());
    let b = c.read(2);
    assert_eq!(b.release(), 2);
    assert_eq!(p.try_push_burst(&[rec(7), rec(8), rec(9)]), 2);
    let mut seen = vec![];
    c.read_burst(10, |r| seen.push(r.timestamp_ns));
    assert_eq!(seen, vec![5, 6, 7, 8]);
    assert!(c.read(4).is_empty());
}

#[test]
fn the_consumer_counts_each_load_of_the_producers_index() {
    let (mut p, mut c) = ring::<TestRecord>(64).unwrap();
    assert_eq!(c.tail_polls(), 0);
    // An empty ring: each read finds nothing cached and loads the index.
    assert_eq!(c.read_burst(32, |_| {}), 0);
    assert_eq!(c.read_burst(32, |_| {}), 0);
    assert_eq!(c.tail_polls(), 2);
    for i in 0..40 {
        p.try_push(rec(i)).unwrap();
    }
    // 40 published: one load sees them all; the next reads of at most
    // what is cached load nothing.
    assert_eq!(c.read_burst(8, |_| {}), 8);
    assert_eq!(c.tail_polls(), 3);
    assert_eq!(c.read_burst(16, |_| {}), 16);
    assert_eq!(c.read_burst(16, |_| {}), 16);
    assert_eq!(c.tail_polls(), 3, "32 cached records read without a poll");
    // Cache empty, asked for more: one load.
    assert_eq!(c.read_burst(32, |_| {}), 0);
    assert_eq!(c.tail_polls(), 4);
    // The snapshot reports the same count.
    let s = crate::stats::RingStats::read(c.id(), c.shared());
    assert_eq!((s.tail_polls, s.dequeued), (4, 40));
}
