//! [`RingLog`]: the [`NatLog`] a forwarding worker hands its records to,
//! one dplog ring per worker, published once per rx burst.

use dplog::{Backpressure, LogProducer, Nat44SessionRecord, NatRecord};

use crate::nat::NatLog;

/// Packets a worker translates between two ring publications, and the
/// default `[ring] publish_every` of `dplog-nat`: one rx burst, as
/// `rte_eth_rx_burst` returns at most 32 packets in DPDK's examples.
pub const NAT_BURST: usize = 32;

/// Hands every record of a [`Nat44`](crate::Nat44) to the worker's dplog
/// [`LogProducer`] under the logger's backpressure policy, or discards it
/// when logging is off (`None`).
///
/// The producer publishes its ring index once per
/// [`LoggerConfig::publish_every`](dplog::LoggerConfig::publish_every)
/// records, so the forwarding loop must call [`flush`](Self::flush) once
/// per rx burst (as a DPDK application calls `rte_eth_tx_buffer_flush`):
/// without it the last records of a burst would wait for the next burst.
///
/// Under the `block` policy a full ring is waited on (lossless), but the
/// wait ends when a stop is requested ([`crate::app::request_stop`],
/// SIGINT/SIGTERM): from then on a record that finds the ring full is not
/// logged and is counted in [`dropped_at_stop`](Self::dropped_at_stop), so
/// a worker whose sink is stuck (e.g. retrying ENOSPC) still ends.
pub struct RingLog<'a> {
    producer: Option<&'a mut LogProducer<NatRecord>>,
    dropped_at_stop: u64,
}

/// Pause-spins of a blocked push before it yields the CPU between tries.
const BLOCK_SPINS: u32 = 1024;

/// Waits for a slot for `rec` (ring full, `block` policy) until it is
/// pushed, the consumer is gone (counted by dplog as `dropped_disconnected`)
/// or a stop is requested. Returns 1 if `rec` was dropped for the stop.
#[cold]
fn wait_or_stop(p: &mut LogProducer<NatRecord>, mut rec: NatRecord) -> u64 {
    // Publish what is pending: the consumer can only free slots it sees.
    p.flush();
    let mut spins = 0u32;
    loop {
        if crate::app::stop_requested() {
            return 1;
        }
        match p.try_push(rec) {
            Ok(()) => return 0,
            Err(r) => rec = r,
        }
        if p.is_disconnected() {
            // `log` counts it as dropped for a gone consumer.
            p.log(rec);
            return 0;
        }
        if spins < BLOCK_SPINS {
            spins += 1;
            core::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

impl<'a> RingLog<'a> {
    /// Logs into `producer`, or nowhere when it is `None` (logging off).
    pub fn new(producer: Option<&'a mut LogProducer<NatRecord>>) -> Self {
        Self {
            producer,
            dropped_at_stop: 0,
        }
    }

    /// Records not logged because the ring was full after a stop was
    /// requested (`block` policy only; other policies count their drops in
    /// dplog's [`Stats`](dplog::Stats)).
    pub fn dropped_at_stop(&self) -> u64 {
        self.dropped_at_stop
    }

    #[inline]
    fn push(&mut self, rec: NatRecord) {
        if let Some(p) = self.producer.as_mut() {
            if p.policy() != Backpressure::Block {
                p.log(rec);
            } else if let Err(rec) = p.try_push(rec) {
                self.dropped_at_stop += wait_or_stop(p, rec);
            }
        }
    }

    /// Publishes the records logged since the last publication (one Release
    /// store of the ring index; nothing if none is pending). Call once per
    /// rx burst and before the worker goes idle.
    #[inline]
    pub fn flush(&mut self) {
        if let Some(p) = self.producer.as_mut() {
            p.flush();
        }
    }
}

impl NatLog for RingLog<'_> {
    #[inline]
    fn session(&mut self, rec: Nat44SessionRecord) {
        self.push(NatRecord::from(rec));
    }

    #[inline]
    fn event(&mut self, rec: NatRecord) {
        self.push(rec);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dplog::config::FormatConfig;
    use dplog::sinks::FileSink;
    use dplog::{Logger, LoggerConfig, NatEvent};

    fn session(i: u32) -> Nat44SessionRecord {
        Nat44SessionRecord {
            header: dplog::RecordHeader::of::<Nat44SessionRecord>(),
            src_addr: 0x0A00_0000 + i,
            nat_event: NatEvent::Nat44SessionCreate as u8,
            ..Default::default()
        }
    }

    #[test]
    fn records_are_published_at_the_burst_or_the_flush_and_all_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ringlog.log");
        let logger = Logger::<NatRecord>::start(
            LoggerConfig {
                publish_every: NAT_BURST,
                ..Default::default()
            },
            FormatConfig::default().nat_formatter().unwrap(),
            FileSink::open(&path).unwrap(),
        )
        .unwrap();
        let mut producer = logger.producer().unwrap();
        {
            let mut log = RingLog::new(Some(&mut producer));
            for i in 0..3 {
                log.session(session(i));
            }
        }
        assert_eq!(producer.pending(), 3);
        assert_eq!(logger.stats().enqueued, 0, "not yet published");
        {
            let mut log = RingLog::new(Some(&mut producer));
            log.flush();
            // A full burst publishes itself; 3 more stay pending.
            for i in 3..6 + NAT_BURST as u32 {
                log.session(session(i));
            }
        }
        assert_eq!(logger.stats().enqueued, 3 + NAT_BURST as u64);
        assert_eq!(producer.pending(), 3);
        drop(producer);
        let st = logger.shutdown().unwrap();
        assert_eq!(
            st.written_records,
            6 + NAT_BURST as u64,
            "drop flushes the rest"
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 6 + NAT_BURST);
        assert!(text
            .lines()
            .next()
            .unwrap()
            .contains("sourceIPv4Address=10.0.0.0 "));
        assert!(text
            .lines()
            .last()
            .unwrap()
            .contains("sourceIPv4Address=10.0.0.37 "));
    }

    #[test]
    fn logging_off_discards_and_flush_is_a_no_op() {
        let mut log = RingLog::new(None);
        log.session(session(1));
        log.flush();
    }
}
