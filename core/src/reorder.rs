//! The consumer's optional reorder window: a bounded k-way merge by
//! [`Record::event_time`] across the rings one consumer serves.
//!
//! Order guarantees of the consumer runtime:
//! - **window off** (default): records of one ring are written in that
//!   ring's order (per-producer FIFO); rings are interleaved burst by burst
//!   (round robin, at most `burst` records per ring per pass), so records of
//!   different producers are not in time order.
//! - **window on** (`reorder_window_ns = W`): the consumer stages records
//!   and writes the oldest staged one only once some record at least `W`
//!   newer has been read (from any ring), or its ring has `max_staged`
//!   records staged (the memory bound), or the consumer goes idle (every
//!   ring empty) or shuts down. So the output is in event-time order except
//!   for records that reach the consumer more than `W` later than a record
//!   stamped `W` after them, or that were pushed out by the memory bound;
//!   per-ring order is kept in every case (a ring's records are emitted
//!   from the front of its queue only), so a ring whose own stamps go
//!   backwards stays in ring order.

use std::collections::VecDeque;

use crate::record::Record;
use crate::table::SchemaTable;

/// Staged records, one FIFO per ring (same index as the consumer's rings).
pub(crate) struct Reorder<R> {
    staged: Vec<VecDeque<R>>,
    window: u64,
    max_staged: usize,
    /// Newest event time read so far.
    newest: u64,
    len: usize,
    /// Where each record type's event time is.
    schemas: SchemaTable,
    /// Reads a record's event time with `schemas`.
    event_time: fn(&R, &SchemaTable) -> u64,
}

impl<R: Record> Reorder<R> {
    pub(crate) fn new(
        window: u64,
        max_staged: usize,
        schemas: SchemaTable,
        event_time: fn(&R, &SchemaTable) -> u64,
    ) -> Self {
        Self {
            schemas,
            event_time,
            staged: Vec::new(),
            window,
            max_staged: max_staged.max(1),
            newest: 0,
            len: 0,
        }
    }

    /// Records staged in all rings.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Stages `rec`, read from ring position `ring`.
    #[inline]
    pub(crate) fn push(&mut self, ring: usize, rec: R) {
        if self.staged.len() <= ring {
            self.staged
                .resize_with(ring + 1, || VecDeque::with_capacity(self.max_staged));
        }
        self.newest = self.newest.max((self.event_time)(&rec, &self.schemas));
        self.staged[ring].push_back(rec);
        self.len += 1;
    }

    /// Forgets ring position `ring` (it must have nothing staged); later
    /// positions shift down, as in the consumer's ring list.
    pub(crate) fn remove(&mut self, ring: usize) {
        if ring < self.staged.len() {
            debug_assert!(self.staged[ring].is_empty());
            self.staged.remove(ring);
        }
    }

    /// True if ring position `ring` has records staged.
    pub(crate) fn has_staged(&self, ring: usize) -> bool {
        self.staged.get(ring).is_some_and(|q| !q.is_empty())
    }

    /// Writes staged records in event-time order through `out`: those at
    /// least `window` older than the newest read, those over a ring's
    /// `max_staged` bound, or all of them if `all`; stops early after a
    /// record for which `out` returns false. Returns how many.
    pub(crate) fn emit(&mut self, all: bool, mut out: impl FnMut(&R) -> bool) -> usize {
        let mut n = 0;
        loop {
            // Linear k-way scan: k (rings per consumer) is small.
            let mut best: Option<(u64, usize)> = None;
            let mut over = None;
            for (i, q) in self.staged.iter().enumerate() {
                if let Some(r) = q.front() {
                    let t = (self.event_time)(r, &self.schemas);
                    if best.map_or(true, |(bt, _)| t < bt) {
                        best = Some((t, i));
                    }
                    if q.len() > self.max_staged && over.is_none() {
                        over = Some(i);
                    }
                }
            }
            let Some((t, i)) = best else { break };
            let ready = all || t.saturating_add(self.window) <= self.newest;
            let i = if ready {
                i
            } else if let Some(j) = over {
                // Memory bound: the full ring's oldest goes out, in its
                // ring order.
                j
            } else {
                break;
            };
            let r = self.staged[i].pop_front().expect("front seen above");
            self.len -= 1;
            n += 1;
            if !out(&r) {
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

    fn drain(r: &mut Reorder<TestRecord>, all: bool) -> Vec<(u64, u16)> {
        let mut v = vec![];
        r.emit(all, |x| {
            v.push((x.timestamp_ns, x.src_port));
            true
        });
        v
    }

    #[test]
    fn merges_rings_by_time_within_the_window() {
        let mut r = Reorder::new(
            10,
            100,
            SchemaTable::default(),
            crate::table::RecordRules::own().event_time,
        );
        // Ring 0 is ahead in time, ring 1 lags.
        for t in [5, 12, 20, 31] {
            r.push(0, at(t, 0));
        }
        for t in [3, 11, 19] {
            r.push(1, at(t, 1));
        }
        // Newest is 31: everything stamped <= 21 may go, in time order.
        assert_eq!(
            drain(&mut r, false),
            vec![(3, 1), (5, 0), (11, 1), (12, 0), (19, 1), (20, 0)]
        );
        assert_eq!(r.len(), 1);
        r.push(1, at(25, 1));
        assert_eq!(drain(&mut r, false), vec![]);
        assert_eq!(drain(&mut r, true), vec![(25, 1), (31, 0)]);
        assert_eq!(r.len(), 0);
    }

    #[test]
    fn memory_bound_and_per_ring_order_hold() {
        let mut r = Reorder::new(
            1_000,
            2,
            SchemaTable::default(),
            crate::table::RecordRules::own().event_time,
        );
        for t in [50, 40, 60] {
            r.push(0, at(t, 0)); // a ring whose stamps go backwards
        }
        // Over the bound (3 > 2): ring 0's front goes out, in ring order.
        assert_eq!(drain(&mut r, false), vec![(50, 0)]);
        assert_eq!(drain(&mut r, true), vec![(40, 0), (60, 0)]);
        r.remove(0);
        assert!(!r.has_staged(0));
    }
}
