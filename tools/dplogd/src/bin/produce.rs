//! `dplogd-produce`: creates a shared-memory ring and pushes
//! sequence-numbered NAT44 session-delete records into it (sequence in
//! `initiatorOctets`, the run's tag in `responderOctets` and
//! `ingressVRFID`), in bursts of random size with random pauses from a
//! seed. A stand-in dataplane for dplogd's tests and its README set-up.
//!
//! With `--report`, after every push that returned it writes the number of
//! records committed so far as one line to stdout, unbuffered (one
//! `write(2)`), so a process killed at any instant has reported at most
//! one committed push less than it made.

use std::io::Write;
use std::path::PathBuf;

use clap::Parser;
use dplog_core::shm::{ShmLogProducer, ShmOptions};
use dplog_core::{Backpressure, LoggerConfig, RecordRules};
use dplog_schema_nat::{Nat44SessionRecord, NatRecord};

/// Pushes sequence-numbered records into a new shared-memory ring.
#[derive(Parser, Debug)]
struct Args {
    /// Ring directory (the one dplogd serves).
    #[arg(long)]
    dir: PathBuf,
    /// Ring name.
    #[arg(long, default_value = "produce")]
    name: String,
    /// Records to push; 0: until killed.
    #[arg(long, default_value_t = 1000)]
    records: u64,
    /// Ring capacity (slots, a power of two).
    #[arg(long, default_value_t = 1024)]
    capacity: usize,
    /// `block` or `drop_newest`.
    #[arg(long, default_value = "block")]
    backpressure: String,
    /// Largest burst; each burst is 1..=this records (seeded).
    #[arg(long, default_value_t = 16)]
    burst: usize,
    /// Largest pause between bursts, µs (seeded; 0: none).
    #[arg(long, default_value_t = 0)]
    pause_us: u64,
    /// Seed of the burst sizes and pauses.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Tag written into every record.
    #[arg(long, default_value_t = 0)]
    tag: u32,
    /// Report the committed count on stdout after every push.
    #[arg(long)]
    report: bool,
}

/// xorshift64*: a seeded sequence without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn main() {
    let a = Args::parse();
    let backpressure = match a.backpressure.as_str() {
        "block" => Backpressure::Block,
        "drop_newest" | "drop" => Backpressure::Drop,
        other => {
            eprintln!("dplogd-produce: --backpressure {other}: block or drop_newest");
            std::process::exit(2);
        }
    };
    let cfg = LoggerConfig {
        ring_capacity: a.capacity,
        backpressure,
        ..LoggerConfig::default()
    };
    let opts = ShmOptions {
        dir: a.dir.clone(),
        name: a.name.clone(),
        capacity: a.capacity,
        group: None,
    };
    let mut p = match ShmLogProducer::<NatRecord>::create(
        &opts,
        &cfg,
        &dplog_schema_nat::all(),
        RecordRules::own(),
    ) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("dplogd-produce: {e}");
            std::process::exit(1);
        }
    };
    eprintln!("dplogd-produce: ring {}", p.path().display());
    let mut rng = Rng(a.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut seq = 0u64;
    let mut burst = Vec::with_capacity(a.burst.max(1));
    let stdout = std::io::stdout();
    while a.records == 0 || seq < a.records {
        let mut n = 1 + (rng.next() % a.burst.max(1) as u64);
        if a.records > 0 {
            n = n.min(a.records - seq);
        }
        burst.clear();
        for i in 0..n {
            let r = Nat44SessionRecord {
                nat_event: 5,
                protocol: 6,
                src_addr: 0x0a00_0001,
                post_nat_src_addr: 0xc633_6401,
                dst_addr: 0xcb00_7101,
                src_port: 1024,
                post_napt_src_port: 2048,
                dst_port: 80,
                ingress_vrf_id: a.tag,
                timestamp_ns: 1_767_225_600_000_000_000 + seq + i,
                initiator_octets: seq + i,
                responder_octets: u64::from(a.tag),
                ..Nat44SessionRecord::default()
            };
            burst.push(NatRecord::from(r));
        }
        let pushed = p.log_burst(&burst) as u64;
        seq += n;
        if a.report {
            let mut out = stdout.lock();
            // One write per line: a line is whole or absent.
            let _ = out.write_all(format!("{}\n", p.committed()).as_bytes());
            let _ = out.flush();
        }
        let _ = pushed;
        if a.pause_us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(rng.next() % a.pause_us));
        }
    }
    eprintln!(
        "dplogd-produce: {} records committed, {} dropped",
        p.committed(),
        p.dropped()
    );
}
