//! Pacing of the consumer's polls of the producers' published indices.
//!
//! Every load of a ring's `tail` may pull the producer's index line over
//! to the consumer's core; the producer's next release store then waits
//! for the line to come back (a cross-core round trip, 100–300 ns on a
//! distant placement). A consumer that polls again as soon as it has
//! formatted what it read does so every few records when it keeps up,
//! and so puts that round trip on a large share of the producer's calls.
//! [`Pacer`] spaces the polls out: after a pass that found less than a
//! whole burst in every ring it pauses, with a pause that doubles per such
//! pass up to `poll_gap_max_us` and halves after a pass that read a whole
//! burst somewhere, so at a steady rate the polls settle near one per
//! burst of records.
//!
//! A pause never lasts longer than a ring takes to fill at
//! [`FILL_NS_PER_SLOT`] per record (faster than one producer core
//! writes), so no ring can fill, and no `drop_newest` producer drop a
//! record, because the consumer was pausing: small rings get short
//! pauses (1024 slots: 1.28 µs), the default 16384 slots the whole
//! 20 µs.

use std::time::{Duration, Instant};

/// Shortest pause after a pass that did not read a whole burst, ns.
pub(super) const MIN_GAP_NS: u64 = 500;

/// A pause yields the CPU while more than this is left of it.
const YIELD_ABOVE: Duration = Duration::from_micros(4);

/// The fill rate a pause is bounded by, ns per record: 800 M records/s,
/// above what one producer core reaches (a push costs several ns).
pub(super) const FILL_NS_PER_SLOT: f64 = 1.25;

/// The pause schedule (see the module docs).
#[derive(Debug)]
pub(super) struct Pacer {
    /// The next pause, ns (0 after whole-burst passes).
    gap_ns: u64,
    /// Upper bound of a pause, ns; 0: pacing off.
    max_ns: u64,
}

impl Pacer {
    /// A pacer whose pauses never exceed `max_us` microseconds (0: off)
    /// nor the time rings of `capacity` slots take to fill at
    /// [`FILL_NS_PER_SLOT`].
    pub(super) fn new(max_us: u64, capacity: usize) -> Self {
        let fill_ns = (capacity as f64 * FILL_NS_PER_SLOT) as u64;
        Self {
            gap_ns: 0,
            max_ns: max_us.saturating_mul(1000).min(fill_ns),
        }
    }

    /// True when the consumer pauses between polls at all.
    pub(super) fn enabled(&self) -> bool {
        self.max_ns >= MIN_GAP_NS
    }

    /// After a pass over the rings: how long to wait before the next
    /// poll. `full`: some ring gave a whole burst (more may be waiting),
    /// so poll again at once and halve the pause; otherwise wait the
    /// current pause and double it, within `MIN_GAP_NS..=max`.
    pub(super) fn after_pass(&mut self, full: bool) -> Option<Duration> {
        if self.max_ns == 0 {
            return None;
        }
        if self.max_ns < MIN_GAP_NS {
            // A ring too small to pause for: poll again at once.
            return None;
        }
        if full {
            self.gap_ns /= 2;
            return None;
        }
        let wait = self.gap_ns.clamp(MIN_GAP_NS, self.max_ns);
        self.gap_ns = (wait * 2).min(self.max_ns);
        Some(Duration::from_nanos(wait))
    }

    /// True once the pauses have grown to their bound: passes in a row
    /// that read less than a burst (a low rate).
    pub(super) fn at_max(&self) -> bool {
        self.enabled() && self.gap_ns >= self.max_ns
    }

    /// Waits `d`, reading only the clock (no line a producer writes):
    /// yields the CPU while more than [`YIELD_ABOVE`] is left (on a core
    /// of its own the yield returns at once; on a shared one, another
    /// thread, perhaps a producer, runs meanwhile), then spins with pause
    /// instructions.
    pub(super) fn pause(d: Duration) {
        let until = Instant::now() + d;
        loop {
            let now = Instant::now();
            if now >= until {
                return;
            }
            if until - now > YIELD_ABOVE {
                std::thread::yield_now();
            } else {
                for _ in 0..8 {
                    core::hint::spin_loop();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_to_the_bound_and_halve_after_full_passes() {
        let mut p = Pacer::new(20, 16384);
        let waits: Vec<u64> = (0..8)
            .map(|_| p.after_pass(false).unwrap().as_nanos() as u64)
            .collect();
        assert_eq!(waits, [500, 1000, 2000, 4000, 8000, 16_000, 20_000, 20_000]);
        assert!(p.at_max());
        // Two whole-burst passes: no wait, the pause halves twice.
        assert_eq!(p.after_pass(true), None);
        assert_eq!(p.after_pass(true), None);
        assert!(!p.at_max());
        assert_eq!(p.after_pass(false), Some(Duration::from_nanos(5000)));
        // Many whole-burst passes: back to the shortest pause.
        for _ in 0..64 {
            assert_eq!(p.after_pass(true), None);
        }
        assert_eq!(p.after_pass(false), Some(Duration::from_nanos(MIN_GAP_NS)));
    }

    #[test]
    fn zero_turns_pacing_off() {
        let mut p = Pacer::new(0, 16384);
        assert!(!p.enabled());
        assert_eq!(p.after_pass(false), None);
        assert_eq!(p.after_pass(true), None);
    }

    #[test]
    fn a_small_ring_bounds_the_pause_by_its_fill_time() {
        // 1024 slots fill in 1280 ns at 1.25 ns per record.
        let mut p = Pacer::new(20, 1024);
        let waits: Vec<u64> = (0..4)
            .map(|_| p.after_pass(false).unwrap().as_nanos() as u64)
            .collect();
        assert_eq!(waits, [500, 1000, 1280, 1280]);
        // 128 slots fill in 160 ns, below the shortest pause: no pacing.
        let mut p = Pacer::new(20, 128);
        assert_eq!(p.after_pass(false), None);
        assert!(!p.enabled());
    }
}
