//! A fuzz target for the packet parser and the translator that runs on
//! stable Rust, plus a small mutation-based driver for CI smoke runs.
//!
//! [`one_input`] is the target: `cargo fuzz` can call it from
//! `reference-nat/fuzz/fuzz_targets/nat.rs` (nightly, libFuzzer), and
//! [`smoke`] drives it on stable from a seed corpus of valid and malformed
//! frames with bit flips, truncations, insertions and splices.
//!
//! Input layout: byte 0 picks the link type, the rest is cut at every
//! `0xFF 0xFE` pair into up to 8 frames that one engine processes in turn
//! (so later frames meet sessions, fragments and timers of earlier ones).

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

use dplog::nat::NatRecord;

use crate::nat::{AllRecords, Nat44, NatConfig, PortAllocation, Verdict};
use crate::packet::{
    self, LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2, LINKTYPE_NULL, LINKTYPE_RAW,
};

const LINKTYPES: [u32; 5] = [
    LINKTYPE_ETHERNET,
    LINKTYPE_RAW,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2,
    LINKTYPE_NULL,
];

/// Runs one fuzz input through [`packet::parse`] and a fresh [`Nat44`] and
/// checks the engine's bookkeeping. Panics (which a fuzzer reports) only if
/// an invariant breaks: every packet gets one verdict, every create is
/// matched by a delete after `finish`, and one record is logged per event.
pub fn one_input(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let linktype = LINKTYPES[usize::from(sel) % LINKTYPES.len()];
    // The input's length picks the port allocation, so every allocator
    // and the session limit meet fuzzed frames.
    let mode = rest.len() % 4;
    let inside = if mode == 3 {
        "10.0.0.0/24"
    } else {
        "10.0.0.0/8"
    };
    let mut cfg = NatConfig::new(
        vec![inside.parse().expect("literal")],
        "198.51.100.0/30".parse().expect("literal"),
    );
    cfg.fragment_table_size = 4;
    // A narrow port range so that exhaustion paths are reachable.
    cfg.port_range = (1024, 1024 + u16::from(sel >> 4));
    match mode {
        1 => cfg.max_sessions_per_user = 2,
        2 => {
            cfg.port_allocation = PortAllocation::PortBlock {
                size: 2,
                max_blocks: 2,
            };
            cfg.port_range = (1024, 1031);
        }
        3 => {
            cfg.port_allocation = PortAllocation::Deterministic;
            cfg.port_range = (1024, 65535);
        }
        _ => {}
    }
    let mut nat = Nat44::new(cfg).expect("valid config");
    let (mut sessions, mut events) = (0u64, 0u64);
    let mut log = AllRecords(|r: NatRecord| {
        if r.header().schema_id == dplog::nat::SCHEMA_NAT44_SESSION {
            sessions += 1;
        } else {
            events += 1;
        }
    });
    let mut frames = 0u64;
    let mut ts = 1_700_000_000_000_000_000u64;
    for chunk in split(rest).take(8) {
        let mut buf = chunk.to_vec();
        let parsed = packet::parse(linktype, &buf).is_ok();
        let v = nat.process(ts, linktype, &mut buf, &mut log);
        assert!(
            parsed || !v.is_translated(),
            "a frame that does not parse was translated"
        );
        assert_eq!(buf.len(), chunk.len(), "translation keeps the length");
        ts += u64::from(sel) * 1_000_000_000;
        frames += 1;
    }
    nat.finish(ts, &mut log);
    let s = nat.stats();
    assert_eq!(s.packets, frames);
    assert_eq!(s.verdicts.iter().sum::<u64>(), frames);
    assert_eq!(s.sessions_created, s.sessions_deleted);
    assert_eq!(s.sessions_live, 0);
    assert_eq!(s.port_blocks_live, 0);
    assert_eq!(s.port_blocks_allocated, s.port_blocks_released);
    let logged_sessions = matches!(mode, 0 | 1);
    assert_eq!(
        sessions,
        if logged_sessions {
            2 * s.sessions_created
        } else {
            0
        }
    );
    assert_eq!(
        events,
        s.limit_events_logged + s.port_blocks_allocated + s.port_blocks_released
    );
    assert_eq!(s.records_logged, sessions + events);
    let _ = Verdict::from_index(0);
}

fn split(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(data);
    std::iter::from_fn(move || {
        let d = rest?;
        match d.windows(2).position(|w| w == [0xFF, 0xFE]) {
            Some(i) => {
                rest = Some(&d[i + 2..]);
                Some(&d[..i])
            }
            None => {
                rest = None;
                Some(d)
            }
        }
    })
}

/// The seed corpus: valid TCP, UDP, ICMP echo and fragment frames (in both
/// directions, with options) and the malformed shapes of the bad-input
/// tests, each prefixed with the Ethernet link-type selector.
pub fn seed_corpus() -> Vec<Vec<u8>> {
    let eth = |ip: &[u8]| {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
        f.extend_from_slice(ip);
        f
    };
    let ip = |src: [u8; 4], dst: [u8; 4], proto: u8, opts: &[u8], frag: u16, l4: &[u8]| {
        let ihl = 5 + opts.len() / 4;
        let total = (ihl * 4 + l4.len()) as u16;
        let mut h = vec![0x40 | ihl as u8, 0];
        h.extend_from_slice(&total.to_be_bytes());
        h.extend_from_slice(&[0x12, 0x34]);
        h.extend_from_slice(&frag.to_be_bytes());
        h.extend_from_slice(&[64, proto, 0, 0]);
        h.extend_from_slice(&src);
        h.extend_from_slice(&dst);
        h.extend_from_slice(opts);
        h.extend_from_slice(l4);
        h
    };
    let (a, b) = ([10, 0, 0, 1], [203, 0, 113, 5]);
    let udp = [0x13, 0x88, 0, 53, 0, 12, 0, 0, 1, 2, 3, 4];
    let tcp = [
        0x04, 0xD2, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xFF, 0xFF, 0, 0, 0, 0,
    ];
    let echo = [8, 0, 0, 0, 0, 7, 0, 1, 9, 9];
    let quoted = ip(b, a, 1, &[], 0, &[3, 3, 0, 0, 0, 0, 0, 0]);
    let mut icmp_err = vec![3, 1, 0, 0, 0, 0, 0, 0];
    icmp_err.extend_from_slice(&quoted);
    let frames: Vec<Vec<u8>> = vec![
        eth(&ip(a, b, 17, &[], 0, &udp)),
        eth(&ip(
            b,
            a,
            17,
            &[],
            0,
            &[0, 53, 0x13, 0x88, 0, 12, 0, 0, 1, 2, 3, 4],
        )),
        eth(&ip(a, b, 6, &[1, 1, 1, 0], 0, &tcp)),
        eth(&ip(a, b, 1, &[], 0, &echo)),
        eth(&ip(a, b, 17, &[], 0x2000, &udp)),
        eth(&ip(a, b, 17, &[], 0x0002, &[0; 16])),
        eth(&ip(b, a, 1, &[], 0, &icmp_err)),
        eth(&ip(a, b, 17, &[], 0, &[0x13, 0x88, 0, 53, 0, 0, 0, 0])),
    ];
    let mut corpus: Vec<Vec<u8>> = frames
        .iter()
        .map(|f| {
            let mut v = vec![0u8];
            v.extend_from_slice(f);
            v
        })
        .collect();
    // Multi-frame inputs: a session opened then used and fragmented.
    let mut multi = vec![0x10u8];
    for f in &frames {
        multi.extend_from_slice(f);
        multi.extend_from_slice(&[0xFF, 0xFE]);
    }
    corpus.push(multi);
    corpus
}

/// Runs `iterations` mutated inputs from [`seed_corpus`] through
/// [`one_input`], deterministically from `seed`. Returns how many inputs
/// ran. Any invariant failure panics with the input in hex.
pub fn smoke(iterations: u64, seed: u64) -> u64 {
    let corpus = seed_corpus();
    let mut rng = Pcg64::seed_from_u64(seed);
    for i in 0..iterations {
        let mut input = corpus[rng.gen_range(0..corpus.len())].clone();
        for _ in 0..rng.gen_range(1..=8) {
            mutate(&mut rng, &mut input, &corpus);
        }
        let r = std::panic::catch_unwind(|| one_input(&input));
        if let Err(e) = r {
            let hex: String = input.iter().map(|b| format!("{b:02x}")).collect();
            panic!("fuzz input {i} failed ({e:?}): {hex}");
        }
    }
    iterations
}

fn mutate(rng: &mut Pcg64, v: &mut Vec<u8>, corpus: &[Vec<u8>]) {
    match rng.gen_range(0..7) {
        0 if !v.is_empty() => {
            let i = rng.gen_range(0..v.len());
            v[i] ^= 1 << rng.gen_range(0..8);
        }
        1 if !v.is_empty() => {
            let i = rng.gen_range(0..v.len());
            v[i] = rng.gen();
        }
        2 => {
            let n = rng.gen_range(0..=v.len());
            v.truncate(n);
        }
        3 => {
            let i = rng.gen_range(0..=v.len());
            v.insert(i, rng.gen());
        }
        4 if v.len() > 1 => {
            let i = rng.gen_range(0..v.len());
            v.remove(i);
        }
        5 => {
            let other = &corpus[rng.gen_range(0..corpus.len())];
            v.extend_from_slice(&[0xFF, 0xFE]);
            v.extend_from_slice(&other[1..]);
        }
        _ if v.len() > 17 => {
            // Interesting values in the IPv4 length / offset / IHL bytes.
            let i = rng.gen_range(14..v.len().min(60));
            v[i] = [0, 1, 4, 5, 0x0F, 0x3F, 0x40, 0x45, 0x7F, 0x80, 0xFF][rng.gen_range(0..11)];
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_frames_are_valid_and_translated() {
        let c = seed_corpus();
        let mut nat = Nat44::new(NatConfig::new(
            vec!["10.0.0.0/8".parse().unwrap()],
            "198.51.100.0/30".parse().unwrap(),
        ))
        .unwrap();
        let mut buf = c[0][1..].to_vec();
        let v = nat.process(1, LINKTYPE_ETHERNET, &mut buf, &mut |_| {});
        assert_eq!(v, Verdict::TranslatedOut);
        for input in &c {
            one_input(input);
        }
    }

    /// The CI smoke run: a few thousand mutated inputs, seconds at most.
    #[test]
    fn fuzz_smoke() {
        assert_eq!(smoke(20_000, 0xD1_06), 20_000);
    }
}
