//! The consumer's optional reorder window: a bounded k-way merge by
//! [`Record::event_time`] across the rings one consumer serves.
//!
//! Order guarantees of the consumer runtime:
//! - **window off** (default): records of one ring are written in that
//!   ring's order (per-producer FIFO); rings are interleaved burst by burst
//!   (round robin, at most `burst` records per ring per pass), so records of
//!   different producers are not in time order.
//! - **window on** (`reorder_window_ns = W`): the consumer stages the
//!   records it reads (a heap by event time, equal times in the order
//!   read), and tracks per ring the newest
//!   event time read from it (its *watermark*) and when it last read a
//!   record from it. The staged record with the smallest event time `t`
//!   is written only once **every** ring either
//!   - has shown a time at least one window newer (watermark `>= t + W`),
//!   - or is *idle*: nothing read from it for `reorder_idle_ms` of wall
//!     time although the consumer had room to read it,
//!   - or is *finished* (its producers are gone and it is drained).
//!
//!   A ring counts from when the consumer takes it (the producer's
//!   registration reaches the consumer through its control channel;
//!   `Logger::flush` returns after every ring added before it is taken):
//!   records written before then are not held back for it.
//!
//!   So whenever the producers' stamps agree within `W` (a record stamped
//!   `t` is never pushed after its own ring showed `t + W`: clocks of
//!   different producers, and a producer's own steps back, within `W`),
//!   and no ring pauses longer than the idle bound, the output is in
//!   event-time order, across rings and within each. Records with equal
//!   times keep the order they were read in (so a ring's order among
//!   them).
//!
//! **Memory bound.** At most `max_staged` records (the ring capacity) are
//! staged per ring; a ring with that many staged is not read (its
//! producer sees its backpressure policy, as if the consumer were slow)
//! until some are written. If every ring that holds the oldest record
//! back is full so, nothing more can be learnt about them, and the oldest
//! staged record is written anyway (counted; the consumer prints the
//! count on stderr at shutdown); records still unread may then be older.
//!
//! **At idle.** A consumer that finds every ring empty keeps holding what
//! it staged: a staged record waits at most the idle bound (plus one
//! consumer sleep, `idle_sleep_us`) after the last record read from any
//! ring that holds it back.
//!
//! **At shutdown** (and when the consumer thread ends) every ring is read
//! to the end, past the per-ring bound (what rings hold is at most their
//! capacity), and every staged record is written in event-time order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use crate::record::Record;
use crate::table::SchemaTable;

/// What the window knows of one ring.
struct RingState {
    /// Records of this ring staged.
    staged: usize,
    /// Newest event time read from the ring (its watermark); `None`
    /// before the first record.
    newest: Option<u64>,
    /// When a record was last read from it (or when it was first seen).
    last_read: Instant,
    /// Its producers are gone and it is drained: it holds nothing back.
    finished: bool,
}

/// A staged record: ordered by event time, then by the order read.
struct Staged<R> {
    time: u64,
    seq: u64,
    ring: usize,
    rec: R,
}

impl<R> PartialEq for Staged<R> {
    fn eq(&self, o: &Self) -> bool {
        (self.time, self.seq) == (o.time, o.seq)
    }
}
impl<R> Eq for Staged<R> {}
impl<R> PartialOrd for Staged<R> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<R> Ord for Staged<R> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.time, self.seq).cmp(&(o.time, o.seq))
    }
}

/// Staged records of every ring (positions as in the consumer's ring
/// list), oldest first.
pub(crate) struct Reorder<R> {
    heap: BinaryHeap<Reverse<Staged<R>>>,
    rings: Vec<RingState>,
    window: u64,
    idle: Duration,
    max_staged: usize,
    seq: u64,
    forced: u64,
    /// Shutting down: no per-ring bound, records leave only through
    /// `emit(.., all = true, ..)`.
    closing: bool,
    /// Where each record type's event time is.
    schemas: SchemaTable,
    /// Reads a record's event time with `schemas`.
    event_time: fn(&R, &SchemaTable) -> u64,
}

impl<R: Record> Reorder<R> {
    /// A window of `window` (event-time units, normally ns), rings idle
    /// after `idle` without a record, at most `max_staged` records staged
    /// per ring.
    pub(crate) fn new(
        window: u64,
        idle: Duration,
        max_staged: usize,
        schemas: SchemaTable,
        event_time: fn(&R, &SchemaTable) -> u64,
    ) -> Self {
        Self {
            schemas,
            event_time,
            heap: BinaryHeap::new(),
            rings: Vec::new(),
            window,
            idle,
            max_staged: max_staged.max(1),
            seq: 0,
            forced: 0,
            closing: false,
        }
    }

    /// Records staged in all rings.
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Records written before every ring holding them back had shown a
    /// time one window newer, because those rings' queues were full (the
    /// memory bound).
    pub(crate) fn forced(&self) -> u64 {
        self.forced
    }

    /// Makes sure positions `0..n` exist; a new ring counts as read at
    /// `now` (it may hold records back for the idle bound).
    pub(crate) fn track(&mut self, n: usize, now: Instant) {
        while self.rings.len() < n {
            self.rings.push(RingState {
                staged: 0,
                newest: None,
                last_read: now,
                finished: false,
            });
        }
    }

    /// Shutdown: every ring is read to its end (what the rings hold is
    /// staged whatever the per-ring bound) and written in time order by
    /// `emit(.., true, ..)`; nothing leaves before.
    pub(crate) fn close(&mut self) {
        self.closing = true;
    }

    /// How many more records ring position `ring` may stage now.
    pub(crate) fn room(&self, ring: usize) -> usize {
        if self.closing {
            return usize::MAX;
        }
        let used = self.rings.get(ring).map_or(0, |r| r.staged);
        self.max_staged.saturating_sub(used)
    }

    /// Stages `rec`, read from ring position `ring` at `now`.
    #[inline]
    pub(crate) fn push(&mut self, ring: usize, rec: R, now: Instant) {
        self.track(ring + 1, now);
        let time = (self.event_time)(&rec, &self.schemas);
        let r = &mut self.rings[ring];
        r.newest = Some(r.newest.map_or(time, |n| n.max(time)));
        r.last_read = now;
        r.staged += 1;
        self.seq += 1;
        self.heap.push(Reverse(Staged {
            time,
            seq: self.seq,
            ring,
            rec,
        }));
    }

    /// Ring position `ring` will get no more records.
    pub(crate) fn finish(&mut self, ring: usize) {
        if let Some(r) = self.rings.get_mut(ring) {
            r.finished = true;
        }
    }

    /// Forgets ring position `ring` (it must have nothing staged); later
    /// positions shift down, as in the consumer's ring list.
    pub(crate) fn remove(&mut self, ring: usize) {
        if ring < self.rings.len() {
            debug_assert_eq!(self.rings[ring].staged, 0);
            self.rings.remove(ring);
            if self.heap.iter().any(|e| e.0.ring > ring) {
                let mut v = std::mem::take(&mut self.heap).into_vec();
                for e in &mut v {
                    if e.0.ring > ring {
                        e.0.ring -= 1;
                    }
                }
                self.heap = BinaryHeap::from(v);
            }
        }
    }

    /// True if ring position `ring` has records staged.
    pub(crate) fn has_staged(&self, ring: usize) -> bool {
        self.rings.get(ring).is_some_and(|r| r.staged > 0)
    }

    /// Whether the oldest staged record, stamped `t`, may be written at
    /// `now`: `Some(false)` if every ring lets it go, `Some(true)` if only
    /// full rings hold it back (the memory bound), `None` if a ring that
    /// can still be read holds it back.
    fn releasable(&self, t: u64, now: Instant) -> Option<bool> {
        let need = t.saturating_add(self.window);
        let mut forced = false;
        for r in &self.rings {
            if r.finished || r.newest.is_some_and(|n| n >= need) {
                continue;
            }
            if r.staged >= self.max_staged {
                forced = true;
            } else if now.saturating_duration_since(r.last_read) < self.idle {
                return None;
            }
        }
        Some(forced)
    }

    /// Writes staged records in event-time order (equal times in the order
    /// read) through `out` while the rule of the module docs lets the
    /// oldest go at `now`, or all of them if `all`; stops early after a
    /// record for which `out` returns false. Returns how many.
    pub(crate) fn emit(
        &mut self,
        now: Instant,
        all: bool,
        mut out: impl FnMut(&R) -> bool,
    ) -> usize {
        let mut n = 0;
        if self.closing && !all {
            return 0;
        }
        while let Some(top) = self.heap.peek() {
            if !all {
                match self.releasable(top.0.time, now) {
                    None => break,
                    Some(true) => self.forced += 1,
                    Some(false) => {}
                }
            }
            let e = self.heap.pop().expect("peeked above").0;
            self.rings[e.ring].staged -= 1;
            n += 1;
            if !out(&e.rec) {
                break;
            }
        }
        n
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::record::test_record::TestRecord;

    fn at(t: u64, p: u16) -> TestRecord {
        TestRecord {
            timestamp_ns: t,
            src_port: p,
            ..Default::default()
        }
    }

    fn window(w: u64, max: usize) -> Reorder<TestRecord> {
        Reorder::new(
            w,
            Duration::from_millis(100),
            max,
            SchemaTable::default(),
            crate::table::RecordRules::own().event_time,
        )
    }

    fn drain(r: &mut Reorder<TestRecord>, now: Instant, all: bool) -> Vec<(u64, u16)> {
        let mut v = vec![];
        r.emit(now, all, |x| {
            v.push((x.timestamp_ns, x.src_port));
            true
        });
        v
    }

    #[test]
    fn a_record_waits_until_every_ring_is_a_window_ahead() {
        let now = Instant::now();
        let mut r = window(10, 100);
        r.track(2, now);
        // Ring 0 is ahead in time, ring 1 lags.
        for t in [5, 12, 20, 31] {
            r.push(0, at(t, 0), now);
        }
        for t in [3, 11, 19] {
            r.push(1, at(t, 1), now);
        }
        // Ring 1 has shown 19: only what is stamped <= 9 may go.
        assert_eq!(drain(&mut r, now, false), vec![(3, 1), (5, 0)]);
        r.push(1, at(25, 1), now);
        // Ring 0 has shown 31, ring 1 25: up to 15.
        assert_eq!(drain(&mut r, now, false), vec![(11, 1), (12, 0)]);
        assert_eq!(r.len(), 4);
        // Ring 1 idle past the bound: it no longer holds ring 0 back, but
        // ring 0, read again, has shown only 40 (up to 30 may go).
        let later = now + Duration::from_millis(150);
        r.push(0, at(40, 0), later);
        assert_eq!(drain(&mut r, later, false), vec![(19, 1), (20, 0), (25, 1)]);
        // Finished rings hold nothing back; the rest in time order.
        r.finish(0);
        r.finish(1);
        assert_eq!(drain(&mut r, later, false), vec![(31, 0), (40, 0)]);
        assert_eq!(r.len(), 0);
        assert_eq!(r.forced(), 0);
    }

    #[test]
    fn a_ring_seen_but_silent_holds_records_until_idle() {
        let now = Instant::now();
        let mut r = window(10, 100);
        r.track(2, now);
        let later = now + Duration::from_millis(100);
        for t in [1, 2] {
            r.push(0, at(t, 0), now);
        }
        r.push(0, at(100, 0), later);
        // Ring 1 has shown nothing yet and is not idle.
        assert_eq!(
            drain(&mut r, now + Duration::from_millis(99), false),
            vec![]
        );
        // Now it is; ring 0 (read at `later`) has shown 100.
        assert_eq!(drain(&mut r, later, false), vec![(1, 0), (2, 0)]);
        // At shutdown everything goes, in order.
        assert_eq!(drain(&mut r, now, true), vec![(100, 0)]);
    }

    #[test]
    fn memory_bound_and_order_within_a_ring() {
        let now = Instant::now();
        let mut r = window(1_000, 2);
        r.track(1, now);
        for t in [50, 40] {
            r.push(0, at(t, 0), now); // a ring whose stamps go backwards
        }
        assert_eq!(r.room(0), 0);
        // Full, and only the full ring holds the oldest back: it goes,
        // counted; then the ring has room to be read again.
        assert_eq!(drain(&mut r, now, false), vec![(40, 0)]);
        assert_eq!(r.forced(), 1);
        assert_eq!(r.room(0), 1);
        // Equal times keep the order read.
        r.push(0, at(50, 7), now);
        assert_eq!(drain(&mut r, now, true), vec![(50, 0), (50, 7)]);
        r.remove(0);
        assert!(!r.has_staged(0));
    }
}
