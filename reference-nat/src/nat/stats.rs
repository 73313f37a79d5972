//! [`NatStats`]: the counters of a [`Nat44`].

use super::verdict::Verdict;

#[cfg(doc)]
use super::{Nat44, NatConfig};

/// Counters of a [`Nat44`]. All counts are since [`Nat44::new`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NatStats {
    /// Packets per verdict, indexed by [`Verdict::index`].
    pub verdicts: [u64; Verdict::COUNT],
    /// Packets given to [`Nat44::process`].
    pub packets: u64,
    /// Sessions created (natEvent 4 records).
    pub sessions_created: u64,
    /// Sessions deleted (natEvent 5 records), for any reason.
    pub sessions_deleted: u64,
    /// Of the deletes: idle timeouts.
    pub sessions_expired: u64,
    /// Of the deletes: by [`Nat44::finish`] at end of input.
    pub sessions_flushed: u64,
    /// Of the deletes: a closing TCP session replaced by a new SYN on the
    /// same 5-tuple.
    pub sessions_replaced: u64,
    /// Sessions alive now.
    pub sessions_live: u64,
    /// Highest `sessions_live` seen.
    pub peak_sessions: u64,
    /// Endpoint-independent mappings (inside addr:port → external
    /// addr:port) alive now.
    pub mappings_live: u64,
    /// Records passed to the `log` callback.
    pub records_logged: u64,
    /// First fragments entered into the fragment table.
    pub fragments_tracked: u64,
    /// Fragment table entries evicted because the table was full.
    pub fragments_evicted: u64,
    /// Fragment table entries removed after the fragment timeout.
    pub fragments_expired: u64,
    /// Later fragments whose bytes were all seen before (forwarded).
    pub fragments_duplicate: u64,
    /// Port blocks reserved (natEvent 16 records).
    pub port_blocks_allocated: u64,
    /// Port blocks released (natEvent 17 records).
    pub port_blocks_released: u64,
    /// Port blocks held now.
    pub port_blocks_live: u64,
    /// Limit and exhaustion records (natEvent 3, 12, 13) logged.
    pub limit_events_logged: u64,
    /// Limit and exhaustion events not logged because of the rate limit
    /// ([`NatConfig::event_log_interval`]).
    pub limit_events_suppressed: u64,
    /// Packets another worker handed over for destination translation
    /// ([`Nat44::hairpin_in`]); not in `packets` (the sender counted them,
    /// as [`Verdict::HairpinHandoff`]).
    pub hairpin_in_received: u64,
    /// Of them, translated to the inside host (destination address, and
    /// port but for later fragments) and emitted.
    pub hairpin_in_delivered: u64,
    /// Of them, dropped: no mapping for the destination pool port, or a
    /// later fragment whose first fragment was not seen here.
    pub hairpin_in_dropped: u64,
    /// Of `hairpin_in_delivered`, later fragments
    /// ([`Verdict::FragmentMatched`]); the rest were
    /// [`Verdict::Hairpinned`].
    pub hairpin_in_fragments_delivered: u64,
    /// Of `hairpin_in_dropped`, later fragments whose first was not seen
    /// ([`Verdict::FragmentNoSession`]); the rest were
    /// [`Verdict::HairpinNoMapping`] (or, never from a well-behaved sender,
    /// a frame that no longer parses).
    pub hairpin_in_fragments_dropped: u64,
}

impl Default for NatStats {
    fn default() -> Self {
        Self {
            verdicts: [0; Verdict::COUNT],
            packets: 0,
            sessions_created: 0,
            sessions_deleted: 0,
            sessions_expired: 0,
            sessions_flushed: 0,
            sessions_replaced: 0,
            sessions_live: 0,
            peak_sessions: 0,
            mappings_live: 0,
            records_logged: 0,
            fragments_tracked: 0,
            fragments_evicted: 0,
            fragments_expired: 0,
            fragments_duplicate: 0,
            port_blocks_allocated: 0,
            port_blocks_released: 0,
            port_blocks_live: 0,
            limit_events_logged: 0,
            limit_events_suppressed: 0,
            hairpin_in_received: 0,
            hairpin_in_delivered: 0,
            hairpin_in_dropped: 0,
            hairpin_in_fragments_delivered: 0,
            hairpin_in_fragments_dropped: 0,
        }
    }
}

impl NatStats {
    /// Packets that got verdict `v`.
    pub fn count(&self, v: Verdict) -> u64 {
        self.verdicts[v.index()]
    }

    /// `(verdict, packets)` for every verdict with a non-zero count, in
    /// index order.
    pub fn nonzero(&self) -> impl Iterator<Item = (Verdict, u64)> + '_ {
        Verdict::all()
            .map(|v| (v, self.count(v)))
            .filter(|(_, n)| *n != 0)
    }

    /// Packets per verdict with every cross-worker handoff resolved to its
    /// outcome at the owner: [`Verdict::HairpinHandoff`] less the packets
    /// the owners received, moved to [`Verdict::Hairpinned`] /
    /// [`Verdict::FragmentMatched`] (delivered) or
    /// [`Verdict::HairpinNoMapping`] / [`Verdict::FragmentNoSession`]
    /// (dropped). Summed over all workers after the run, this is what one
    /// worker would count for the same input. Indexed by [`Verdict::index`].
    pub fn outcomes(&self) -> [u64; Verdict::COUNT] {
        let mut v = self.verdicts;
        let mut add = |k: Verdict, n: u64| v[k.index()] = v[k.index()].saturating_add(n);
        add(
            Verdict::Hairpinned,
            self.hairpin_in_delivered
                - self
                    .hairpin_in_fragments_delivered
                    .min(self.hairpin_in_delivered),
        );
        add(
            Verdict::FragmentMatched,
            self.hairpin_in_fragments_delivered,
        );
        add(
            Verdict::HairpinNoMapping,
            self.hairpin_in_dropped
                - self
                    .hairpin_in_fragments_dropped
                    .min(self.hairpin_in_dropped),
        );
        add(
            Verdict::FragmentNoSession,
            self.hairpin_in_fragments_dropped,
        );
        let h = Verdict::HairpinHandoff.index();
        v[h] = v[h].saturating_sub(self.hairpin_in_received);
        v
    }
}
