//! The `nat` and `nat_sweep` benches' workload: 64-byte synthetic frames
//! preloaded in memory, translated by a fresh `Nat44` in bursts as a
//! `dplog-nat` worker does.

use dplog_nat::{
    Nat44, NatConfig, RingLog, Synthetic, SyntheticConfig, LINKTYPE_ETHERNET, NAT_BURST,
};

/// Frames per iteration.
pub const FRAMES: usize = 65_536;
/// Slot of one preloaded frame.
pub const SLOT: usize = dplog_nat::synthetic::SYNTHETIC_FRAME_LEN;
/// The synthetic mix at `share`, preloaded: frames in fixed 64-byte slots,
/// with (timestamp, length) of each.
pub fn preload(share: f64) -> (Vec<u8>, Vec<(u64, usize)>) {
    let mut gen = Synthetic::new(SyntheticConfig {
        packets: FRAMES as u64,
        new_session_share: share,
        ..Default::default()
    })
    .expect("valid synthetic mix");
    let mut arena = Vec::with_capacity(FRAMES * SLOT);
    let mut meta = Vec::with_capacity(FRAMES);
    while let Some((ts, f)) = gen.next_frame() {
        let mut slot = [0u8; SLOT];
        slot[..f.len()].copy_from_slice(f);
        arena.extend_from_slice(&slot);
        meta.push((ts, f.len()));
    }
    (arena, meta)
}

pub fn engine() -> Nat44 {
    Nat44::new(NatConfig::new(
        vec!["10.0.0.0/8".parse().expect("literal")],
        "198.51.100.0/28".parse().expect("literal"),
    ))
    .expect("valid NAT config")
}

/// Translates every frame of `arena` and ends all sessions; returns the
/// engine (dropped outside the timed part). Works as a `dplog-nat` worker does: bursts of [`NAT_BURST`] packets,
/// ending each burst with `RingLog::end_burst` (a publication every
/// `PUBLISH_BURSTS` bursts).
pub fn translate(
    mut nat: Nat44,
    arena: &mut [u8],
    meta: &[(u64, usize)],
    log: &mut RingLog,
) -> Nat44 {
    let mut last = 0;
    for (frames, meta) in arena
        .chunks_mut(SLOT * NAT_BURST)
        .zip(meta.chunks(NAT_BURST))
    {
        for (frame, &(ts, len)) in frames.chunks_exact_mut(SLOT).zip(meta) {
            nat.process(ts, LINKTYPE_ETHERNET, &mut frame[..len], log);
            last = ts;
        }
        log.end_burst();
    }
    nat.finish(last, log);
    log.flush();
    nat
}
