//! IPFIX datagrams decoded by Wireshark's `tshark`: written to a pcap as
//! UDP datagrams on loopback, then read back field by field.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use pcap_file::pcap::{PcapPacket, PcapWriter};

/// An Ethernet frame with IPv4 and UDP headers (127.0.0.1:`port` →
/// 127.0.0.1:`port`, IPv4 checksum set, UDP checksum 0) around `payload`.
pub fn udp_frame(payload: &[u8], port: u16) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (20 + 8 + payload.len()) as u16;
    let mut ip = vec![
        0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1,
    ];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    let sum: u32 = ip
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    let sum = (sum & 0xffff) + (sum >> 16);
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&port.to_be_bytes());
    f.extend_from_slice(&port.to_be_bytes());
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

/// Writes `datagrams` to `path` as a classic pcap (LINKTYPE_ETHERNET), one
/// [`udp_frame`] to `port` each, 1 ms apart.
pub fn write_udp_pcap<D: AsRef<[u8]>>(path: &Path, datagrams: &[D], port: u16) {
    let file = std::fs::File::create(path).expect("create the pcap");
    let mut w = PcapWriter::new(file).expect("write the pcap header");
    for (i, d) in datagrams.iter().enumerate() {
        let data = udp_frame(d.as_ref(), port);
        w.write_packet(&PcapPacket::new(
            Duration::from_millis(i as u64),
            data.len() as u32,
            &data,
        ))
        .expect("write a pcap record");
    }
}

/// `tshark` decoding UDP port `port` of the pcap at `path` as IPFIX
/// (`cflow`): per packet, the values of `fields` (several occurrences of a
/// field joined by `,`).
///
/// # Panics
/// tshark missing or failing (its stderr in the message).
pub fn fields(path: &Path, port: u16, fields: &[&str]) -> Vec<Vec<String>> {
    let mut c = Command::new("tshark");
    c.args(["-n", "-r"]).arg(path).args([
        "-d",
        &format!("udp.port=={port},cflow"),
        "-T",
        "fields",
        "-E",
        "separator=|",
        "-E",
        "occurrence=a",
        "-E",
        "aggregator=,",
    ]);
    for f in fields {
        c.args(["-e", f]);
    }
    let out = c
        .output()
        .expect("tshark not found: run scripts/setup.sh (Debian package tshark)");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("tshark prints UTF-8")
        .lines()
        .map(|l| l.split('|').map(String::from).collect())
        .collect()
}
