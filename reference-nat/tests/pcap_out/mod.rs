//! Writing the captures the tests build (legacy microsecond pcap,
//! Ethernet), with the `pcap-file` crate.

use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::{PcapPacket, PcapWriter};

/// Writes `frames` (timestamp in µs since the epoch, bytes) to `path` as a
/// legacy microsecond pcap with link type Ethernet.
pub fn write_pcap<F: AsRef<[u8]>>(path: &Path, frames: impl IntoIterator<Item = (u64, F)>) {
    let file = std::fs::File::create(path).expect("create pcap");
    let mut w = PcapWriter::new(file).expect("pcap header");
    for (us, f) in frames {
        let f = f.as_ref();
        w.write_packet(&PcapPacket::new(
            Duration::from_micros(us),
            f.len() as u32,
            f,
        ))
        .expect("pcap record");
    }
}
