//! pcapng written by hand (little-endian), for tests that need blocks that
//! lie (undescribed interfaces, captured lengths above the wire or snap
//! length), which pcap-file's writer refuses to write. Shared by the
//! integration tests and, through `#[path]`, the input module's unit tests.
#![allow(dead_code)]

/// A pcapng block: type, total length, body padded to 32 bits, length.
pub fn ng_block(block_type: u32, body: &[u8]) -> Vec<u8> {
    let mut body = body.to_vec();
    while body.len() % 4 != 0 {
        body.push(0);
    }
    let len = (12 + body.len()) as u32;
    let mut b = block_type.to_le_bytes().to_vec();
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(&body);
    b.extend_from_slice(&len.to_le_bytes());
    b
}

/// Section Header Block, version 1.0, section length unknown.
pub fn shb() -> Vec<u8> {
    let mut body = 0x1A2B_3C4Du32.to_le_bytes().to_vec();
    body.extend_from_slice(&1u16.to_le_bytes());
    body.extend_from_slice(&0u16.to_le_bytes());
    body.extend_from_slice(&(-1i64).to_le_bytes());
    ng_block(0x0A0D_0D0A, &body)
}

/// Interface Description Block: Ethernet, `snaplen` (0: none), no options
/// (timestamps in microseconds).
pub fn idb(snaplen: u32) -> Vec<u8> {
    let mut body = 1u16.to_le_bytes().to_vec();
    body.extend_from_slice(&0u16.to_le_bytes());
    body.extend_from_slice(&snaplen.to_le_bytes());
    ng_block(1, &body)
}

/// Enhanced Packet Block (type 6) on interface `if_id` at timestamp `ts`
/// (in the interface's units), `data` whole, with the given captured and
/// wire lengths.
pub fn epb(if_id: u32, ts: u64, data: &[u8], caplen: u32, origlen: u32) -> Vec<u8> {
    let mut body = if_id.to_le_bytes().to_vec();
    body.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
    body.extend_from_slice(&(ts as u32).to_le_bytes());
    body.extend_from_slice(&caplen.to_le_bytes());
    body.extend_from_slice(&origlen.to_le_bytes());
    body.extend_from_slice(data);
    ng_block(6, &body)
}
