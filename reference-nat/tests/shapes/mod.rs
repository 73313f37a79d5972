//! The bad-input shapes (malformed packets) as frames and a legacy pcap, shared by
//! the pcap-path test (`bad_shapes.rs`) and the DPDK net_pcap-path test
//! (`dpdk.rs`), with the verdict each one must get.
#![allow(dead_code)]

pub fn pcap(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&4u16.to_le_bytes());
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&65535u32.to_le_bytes());
    f.extend_from_slice(&1u32.to_le_bytes());
    for (i, d) in frames.iter().enumerate() {
        f.extend_from_slice(&(1_700_000_000u32).to_le_bytes());
        f.extend_from_slice(&(i as u32 * 1000).to_le_bytes());
        f.extend_from_slice(&(d.len() as u32).to_le_bytes());
        f.extend_from_slice(&(d.len() as u32).to_le_bytes());
        f.extend_from_slice(d);
    }
    f
}

pub const H: [u8; 4] = [10, 1, 2, 3];
pub const R: [u8; 4] = [203, 0, 113, 9];

pub fn eth(ip: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(ip);
    f
}

/// IPv4 header with `opts`, fragment field `frag`, IP id `id`, then `l4`.
pub fn ip(
    src: [u8; 4],
    dst: [u8; 4],
    proto: u8,
    opts: &[u8],
    id: u16,
    frag: u16,
    l4: &[u8],
) -> Vec<u8> {
    let ihl = 5 + opts.len() / 4;
    let total = (ihl * 4 + l4.len()) as u16;
    let mut h = vec![0x40 | ihl as u8, 0];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&id.to_be_bytes());
    h.extend_from_slice(&frag.to_be_bytes());
    h.extend_from_slice(&[64, proto, 0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(opts);
    h.extend_from_slice(l4);
    h
}

pub fn udp(sport: u16, dport: u16, len_field: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&len_field.to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    u
}

/// Every bad shape, with good packets around them (a first fragment and a
/// packet with IPv4 options, both translated).
pub fn bad_frames() -> Vec<Vec<u8>> {
    let good = udp(5000, 53, 12, b"abcd");
    let mut frames = vec![
        // Truncated headers: link, IPv4, UDP, TCP, ICMP.
        eth(&[])[..10].to_vec(),
        eth(&ip(H, R, 17, &[], 1, 0, &good)[..12]),
        eth(&ip(H, R, 17, &[], 2, 0, &good[..5])),
        eth(&ip(H, R, 6, &[], 3, 0, &[0; 12])),
        eth(&ip(H, R, 1, &[], 4, 0, &[8, 0, 0])),
    ];
    // IHL < 5.
    let mut short = ip(H, R, 17, &[], 5, 0, &good);
    short[0] = 0x44;
    frames.push(eth(&short));
    // Total length larger than the frame.
    let mut long = ip(H, R, 17, &[], 6, 0, &good);
    long[2..4].copy_from_slice(&500u16.to_be_bytes());
    frames.push(eth(&long));
    // TCP data offset past the end (15 words = 60 bytes, 20 present).
    let mut tcp = vec![
        0x04, 0xD2, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0xF0, 0x10, 0xFF, 0xFF, 0, 0, 0, 0,
    ];
    frames.push(eth(&ip(H, R, 6, &[], 7, 0, &tcp)));
    tcp[12] = 0x50;
    // Zero-length UDP (length field 0) and a UDP length past the packet.
    frames.push(eth(&ip(H, R, 17, &[], 8, 0, &udp(5001, 53, 0, b"abcd"))));
    frames.push(eth(&ip(H, R, 17, &[], 9, 0, &udp(5002, 53, 400, b"abcd"))));
    // Fragments: a later fragment before its first (out of order), the
    // first, the later one again, an overlapping duplicate, one whose
    // offset runs past 65535 bytes, and one of an id never seen.
    frames.push(eth(&ip(H, R, 17, &[], 77, 2, &[0xAB; 16])));
    frames.push(eth(&ip(
        H,
        R,
        17,
        &[],
        77,
        0x2000,
        &udp(6000, 53, 40, &[1; 16]),
    )));
    frames.push(eth(&ip(H, R, 17, &[], 77, 3, &[0xCD; 16])));
    frames.push(eth(&ip(H, R, 17, &[], 77, 3, &[0xCD; 16])));
    // A fragment partly overlapping the bytes seen (24..56 vs 0..40).
    frames.push(eth(&ip(H, R, 17, &[], 77, 3 + 0x2000, &[0xCD; 32])));
    frames.push(eth(&ip(H, R, 17, &[], 77, 0x1FFF, &[0xEE; 16])));
    frames.push(eth(&ip(H, R, 17, &[], 78, 5, &[0; 8])));
    // ICMP error (port unreachable) from outside quoting an ICMP error.
    let inner_err = ip(H, R, 1, &[], 10, 0, &[3, 3, 0, 0, 0, 0, 0, 0]);
    let mut icmp = vec![3, 1, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&inner_err);
    frames.push(eth(&ip(R, H, 1, &[], 11, 0, &icmp)));
    // ICMP errors quoting GRE (another protocol) and a truncated quote.
    let inner_gre = ip(H, R, 47, &[], 14, 0, &[0; 8]);
    let mut icmp = vec![3, 1, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&inner_gre);
    frames.push(eth(&ip(R, H, 1, &[], 15, 0, &icmp)));
    let mut icmp = vec![11, 0, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&inner_gre[..10]);
    frames.push(eth(&ip(R, H, 1, &[], 16, 0, &icmp)));
    // IPv4 options (IHL 6): ports read after them; translated.
    frames.push(eth(&ip(H, R, 17, &[1, 1, 1, 0], 12, 0, &good)));
    // GRE: another protocol, counted.
    frames.push(eth(&ip(H, R, 47, &[], 13, 0, &[0; 8])));

    frames
}

/// The verdict counts [`bad_frames`] must give (summary verdict names).
pub fn expected_verdicts() -> Vec<(&'static str, u64)> {
    vec![
        ("malformed_truncated_link_header", 1),
        ("malformed_truncated_ipv4_header", 1),
        ("malformed_truncated_udp_header", 1),
        ("malformed_truncated_tcp_header", 1),
        ("malformed_truncated_icmp_header", 1),
        ("malformed_ipv4_ihl_too_small", 1),
        ("malformed_ipv4_total_length_past_end", 1),
        ("malformed_tcp_data_offset_past_end", 1),
        ("malformed_udp_length_too_small", 1),
        ("malformed_udp_length_past_end", 1),
        ("malformed_ipv4_fragment_too_long", 1),
        // Out-of-order later fragment and the unknown id.
        ("fragment_no_session", 2),
        // The later fragment and its duplicate (forwarded); the partial
        // overlap is dropped.
        ("fragment_matched", 2),
        ("fragment_overlap", 1),
        ("icmp_error_quotes_error", 1),
        ("icmp_error_bad_quote", 2),
        // First fragment and the packet with options.
        ("translated_out", 2),
        ("unsupported_protocol", 1),
    ]
}
