//! Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! All values are the 16-bit checksum field *as stored in the header*, read
//! as a big-endian (network order) `u16`. The incremental functions implement
//! RFC 1624 equation 3, `HC' = ~(~HC + ~m + m')`, in one's-complement
//! arithmetic, where `m` is the old value of a 16-bit field and `m'` the new
//! one. A 32-bit field (an IPv4 address) is two 16-bit words.

/// Folds a 32-bit accumulator of 16-bit words into a 16-bit one's-complement
/// sum (end-around carry). The result is not inverted.
#[inline]
pub fn fold(mut sum: u32) -> u16 {
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    sum as u16
}

/// Adds `data`, read as big-endian 16-bit words (an odd trailing byte is
/// padded with a zero byte, RFC 1071 section 4.1), to the partial sum
/// `initial`. Returns the unfolded partial sum; finish with [`fold`].
///
/// The accumulator is 64 bits wide internally, so any slice length is safe.
pub fn sum_words(initial: u32, data: &[u8]) -> u32 {
    let mut sum = u64::from(initial);
    let mut chunks = data.chunks_exact(2);
    for w in &mut chunks {
        sum += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u64::from(u16::from_be_bytes([*last, 0]));
    }
    while sum > 0xFFFF_FFFF {
        sum = (sum & 0xFFFF_FFFF) + (sum >> 32);
    }
    sum as u32
}

/// Full internet checksum of `data` (RFC 1071): the one's complement of the
/// one's-complement sum of all 16-bit words. Compute it over a header whose
/// checksum field is zero to get the value to store; computed over a header
/// that carries a correct checksum it returns 0.
pub fn internet_checksum(data: &[u8]) -> u16 {
    !fold(sum_words(0, data))
}

/// Partial sum of the IPv4 pseudo-header used by TCP and UDP (RFC 793
/// section 3.1, RFC 768): source and destination address (host-order `u32`),
/// zero byte, protocol, and the transport length in bytes.
pub fn pseudo_header_sum(src: u32, dst: u32, protocol: u8, length: u16) -> u32 {
    (src >> 16)
        + (src & 0xFFFF)
        + (dst >> 16)
        + (dst & 0xFFFF)
        + u32::from(protocol)
        + u32::from(length)
}

/// Full TCP or UDP checksum over the pseudo-header and `segment` (header and
/// payload, checksum field zeroed). For UDP a result of 0 must be sent as
/// `0xFFFF` (RFC 768); this function returns the raw value and leaves that
/// mapping to the caller.
pub fn transport_checksum(src: u32, dst: u32, protocol: u8, segment: &[u8]) -> u16 {
    let len = u16::try_from(segment.len()).unwrap_or(u16::MAX);
    !fold(sum_words(
        pseudo_header_sum(src, dst, protocol, len),
        segment,
    ))
}

/// RFC 1624 equation 3 for one changed 16-bit word: returns the new checksum
/// field when the word `old` covered by checksum `hc` becomes `new`.
#[inline]
pub fn update16(hc: u16, old: u16, new: u16) -> u16 {
    let sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
    !fold(sum)
}

/// RFC 1624 equation 3 for one changed 32-bit value (two 16-bit words), e.g.
/// an IPv4 address given as a host-order `u32`.
#[inline]
pub fn update32(hc: u16, old: u32, new: u32) -> u16 {
    let sum = u32::from(!hc)
        + u32::from(!(old >> 16) as u16)
        + u32::from(!(old as u16))
        + (new >> 16)
        + (new & 0xFFFF);
    !fold(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 1071 section 3 example words.
    #[test]
    fn rfc1071_example_sum() {
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum_words(0, &data)), 0xddf2);
        assert_eq!(internet_checksum(&data), !0xddf2);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(
            internet_checksum(&[0x12, 0x34, 0x56]),
            !(0x1234u16 + 0x5600)
        );
    }

    /// A real IPv4 header (from the Wikipedia IPv4 checksum example).
    #[test]
    fn ipv4_header_checksum_and_incremental_address_change() {
        let mut h: [u8; 20] = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(internet_checksum(&h), 0, "stored checksum verifies");
        let hc = u16::from_be_bytes([h[10], h[11]]);
        assert_eq!(hc, 0xb861);
        let old = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
        let new: u32 = 0xC633_6405; // 198.51.100.5
        h[12..16].copy_from_slice(&new.to_be_bytes());
        let inc = update32(hc, old, new);
        h[10..12].copy_from_slice(&[0, 0]);
        let full = internet_checksum(&h);
        assert_eq!(inc, full);
        h[10..12].copy_from_slice(&inc.to_be_bytes());
        assert_eq!(internet_checksum(&h), 0);
    }

    #[test]
    fn update16_matches_recompute_for_many_values() {
        // Deterministic pseudo-random words; every result must equal a full
        // recomputation (modulo the +0/-0 ambiguity, which eqn. 3 avoids
        // except when the whole data is zero).
        let mut x: u32 = 12345;
        for _ in 0..10_000 {
            let mut words = [0u16; 6];
            for w in &mut words {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                *w = (x >> 8) as u16;
            }
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
            let hc = internet_checksum(&bytes);
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let new = (x >> 8) as u16;
            let mut changed = bytes.clone();
            changed[4..6].copy_from_slice(&new.to_be_bytes());
            let full = internet_checksum(&changed);
            let inc = update16(hc, words[2], new);
            assert_eq!(inc, full, "words {words:?} new {new:#x}");
        }
    }

    #[test]
    fn update32_matches_recompute_for_tcp_segment() {
        // TCP SYN from 10.0.0.6:50000 to 203.0.113.7:80.
        let src = 0x0A00_0006u32;
        let dst = 0xCB00_7107u32;
        let mut seg = [0u8; 20];
        seg[0..2].copy_from_slice(&50000u16.to_be_bytes());
        seg[2..4].copy_from_slice(&80u16.to_be_bytes());
        seg[4..8].copy_from_slice(&0x1234_5678u32.to_be_bytes());
        seg[12] = 5 << 4;
        seg[13] = 0x02;
        seg[14..16].copy_from_slice(&64240u16.to_be_bytes());
        let c = transport_checksum(src, dst, 6, &seg);
        seg[16..18].copy_from_slice(&c.to_be_bytes());
        assert_eq!(transport_checksum(src, dst, 6, &seg), 0, "verifies");

        let new_src = 0xC633_6401u32;
        let new_port = 1024u16;
        let mut hc = update32(c, src, new_src);
        hc = update16(hc, 50000, new_port);
        seg[0..2].copy_from_slice(&new_port.to_be_bytes());
        seg[16..18].copy_from_slice(&[0, 0]);
        assert_eq!(hc, transport_checksum(new_src, dst, 6, &seg));
    }
}
