//! Dotted-quad IPv4 from a 256-entry octet table (no division per octet).

/// Decimal text of every octet value: up to 3 ASCII digits, then the length
/// in byte 3.
static OCTETS: [[u8; 4]; 256] = {
    let mut t = [[0u8; 4]; 256];
    let mut i = 0;
    while i < 256 {
        let (h, te, o) = ((i / 100) as u8, ((i / 10) % 10) as u8, (i % 10) as u8);
        t[i] = if i >= 100 {
            [b'0' + h, b'0' + te, b'0' + o, 3]
        } else if i >= 10 {
            [b'0' + te, b'0' + o, 0, 2]
        } else {
            [b'0' + o, 0, 0, 1]
        };
        i += 1;
    }
    t
};

/// Appends `addr` (host-order `u32`, `0x0A000001` = `10.0.0.1`) as a
/// dotted quad, 7 to 15 bytes.
#[inline]
pub fn push_ipv4(out: &mut Vec<u8>, addr: u32) {
    let mut tmp = [0u8; 16];
    let mut n = 0;
    for (i, shift) in [24u32, 16, 8, 0].into_iter().enumerate() {
        let e = &OCTETS[((addr >> shift) & 0xff) as usize];
        let len = e[3] as usize;
        tmp[n..n + 3].copy_from_slice(&e[..3]);
        n += len;
        if i < 3 {
            tmp[n] = b'.';
            n += 1;
        }
    }
    out.extend_from_slice(&tmp[..n]);
}

/// Writes `addr` (host order) as a dotted quad at `buf[n..]` and returns
/// the end index (7 to 15 bytes later). Each octet is one 4-byte table
/// copy; the byte after the digits is then overwritten by the `.`.
///
/// # Panics
/// If `buf` has fewer than 16 bytes after `n`.
#[inline(always)]
pub fn write_ipv4(buf: &mut [u8], n: usize, addr: u32) -> usize {
    let b = &mut buf[n..n + 16];
    let mut i = 0;
    for shift in [24u32, 16, 8] {
        let e = &OCTETS[((addr >> shift) & 0xff) as usize];
        b[i..i + 4].copy_from_slice(e);
        i += e[3] as usize;
        b[i] = b'.';
        i += 1;
    }
    let e = &OCTETS[(addr & 0xff) as usize];
    b[i..i + 4].copy_from_slice(e);
    n + i + e[3] as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn matches_std_display_on_edge_and_sampled_addresses() {
        let mut x: u32 = 0x9E37_79B9;
        let mut samples = vec![0u32, 1, 0x0A00_0001, 0xC633_6400, 0xFFFF_FFFF, 0x0109_6364];
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            samples.push(x);
        }
        let mut out = Vec::new();
        for a in samples {
            out.clear();
            push_ipv4(&mut out, a);
            assert_eq!(
                std::str::from_utf8(&out).unwrap(),
                Ipv4Addr::from(a).to_string()
            );
            let mut buf = [0xAAu8; 20];
            let end = write_ipv4(&mut buf, 1, a);
            assert_eq!(&buf[1..end], &out[..]);
        }
    }
}
