//! [`RingLog`]: the [`NatLog`] a forwarding worker hands its records to,
//! one dplog ring per worker, published once per rx burst.

use dplog::{LogProducer, Nat44SessionRecord, NatRecord};

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
pub struct RingLog<'a> {
    producer: Option<&'a mut LogProducer<NatRecord>>,
}

impl<'a> RingLog<'a> {
    /// Logs into `producer`, or nowhere when it is `None` (logging off).
    pub fn new(producer: Option<&'a mut LogProducer<NatRecord>>) -> Self {
        Self { producer }
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
        if let Some(p) = self.producer.as_mut() {
            p.log(NatRecord::from(rec));
        }
    }

    #[inline]
    fn event(&mut self, rec: NatRecord) {
        if let Some(p) = self.producer.as_mut() {
            p.log(rec);
        }
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
