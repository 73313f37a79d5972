//! Raw-cursor writers for the hot loop of [`crate::Program::run`].
//!
//! `Program::run` reserves the template's maximum line length plus slack
//! in the output `Vec` once per record and writes through a `*mut u8`
//! cursor: no capacity check, `Vec` length update or slice bounds check
//! per operation. Each writer takes the cursor and returns it advanced
//! past what it wrote; each documents how many bytes it may touch.

use crate::conv::DIGITS2;

/// Dotted-quad pieces: the octet's decimal digits followed by `.`, left
/// aligned in 4 bytes (`"255."`, `"10.\0"`, `"7.\0\0"`).
static OCT_DOT: [[u8; 4]; 256] = {
    let mut t = [[0u8; 4]; 256];
    let mut i = 0;
    while i < 256 {
        let (h, te, o) = ((i / 100) as u8, ((i / 10) % 10) as u8, (i % 10) as u8);
        t[i] = if i >= 100 {
            [b'0' + h, b'0' + te, b'0' + o, b'.']
        } else if i >= 10 {
            [b'0' + te, b'0' + o, b'.', 0]
        } else {
            [b'0' + o, b'.', 0, 0]
        };
        i += 1;
    }
    t
};

/// [`OCT_DOT`] and [`OCT_LEN`] in one word: the 4 bytes of text in the
/// low half (little-endian), digits plus one (the dot) in the high half.
static OCT_WORD: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let d = OCT_DOT[i];
        t[i] = u32::from_le_bytes(d) as u64 | ((OCT_LEN[i] as u64 + 1) << 32);
        i += 1;
    }
    t
};

/// Number of decimal digits of each octet value (1..=3).
static OCT_LEN: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = if i >= 100 {
            3
        } else if i >= 10 {
            2
        } else {
            1
        };
        i += 1;
    }
    t
};

/// Writes two bytes.
///
/// # Safety
/// `p` must be valid for writes of 2 bytes.
#[inline(always)]
unsafe fn put2(p: *mut u8, d: [u8; 2]) {
    // SAFETY: the caller guarantees 2 writable bytes; unaligned write.
    unsafe { p.cast::<[u8; 2]>().write_unaligned(d) }
}

/// Writes `v` in decimal and returns the cursor past it (1 to 20 bytes).
///
/// # Safety
/// `p` must be valid for writes of 20 bytes.
#[inline(always)]
pub(crate) unsafe fn dec(p: *mut u8, v: u64) -> *mut u8 {
    // SAFETY: for the whole body: every write lands in p[0..dec_len(v)],
    // and dec_len(v) <= 20 bytes are writable (caller).
    unsafe {
        if v < 100 {
            if v < 10 {
                *p = b'0' + v as u8;
                return p.add(1);
            }
            put2(p, DIGITS2[v as usize]);
            return p.add(2);
        }
        if v < 100_000 {
            let v = v as usize;
            return if v < 1000 {
                *p = b'0' + (v / 100) as u8;
                put2(p.add(1), DIGITS2[v % 100]);
                p.add(3)
            } else if v < 10_000 {
                put2(p, DIGITS2[v / 100]);
                put2(p.add(2), DIGITS2[v % 100]);
                p.add(4)
            } else {
                *p = b'0' + (v / 10_000) as u8;
                put2(p.add(1), DIGITS2[(v / 100) % 100]);
                put2(p.add(3), DIGITS2[v % 100]);
                p.add(5)
            };
        }
        let end = p.add(crate::conv::dec_len(v));
        let (mut e, mut v) = (end, v);
        while v >= 100 {
            e = e.sub(2);
            put2(e, DIGITS2[(v % 100) as usize]);
            v /= 100;
        }
        if v >= 10 {
            put2(e.sub(2), DIGITS2[v as usize]);
        } else {
            *e.sub(1) = b'0' + v as u8;
        }
        end
    }
}

/// Writes a 16-bit `v` in decimal and returns the cursor past it (1 to 5
/// bytes). Tests from the longest form down (ports are mostly 4 or 5
/// digits) and takes the digits by fixed-point multiplication instead of
/// divisions: `v * ceil(2^32 / 10^k)` holds `v / 10^k` in its high 32 bits
/// and the rest as a 32-bit fraction, and each further `* 100` moves the
/// next two digits into the high bits (exact for every `u16`, checked
/// exhaustively in the tests).
///
/// # Safety
/// `p` must be valid for writes of 5 bytes.
#[inline(always)]
pub(crate) unsafe fn dec_u16(p: *mut u8, v: u16) -> *mut u8 {
    const LO: u64 = 0xffff_ffff;
    let v = v as u64;
    // SAFETY: for the whole body: every write lands in p[0..5] (caller).
    unsafe {
        if v >= 10_000 {
            let y = v * 429_497; // ceil(2^32 / 10^4)
            *p = b'0' + (y >> 32) as u8;
            let y = (y & LO) * 100;
            put2(p.add(1), DIGITS2[(y >> 32) as usize]);
            let y = (y & LO) * 100;
            put2(p.add(3), DIGITS2[(y >> 32) as usize]);
            p.add(5)
        } else if v >= 100 {
            let y = v * 42_949_673; // ceil(2^32 / 10^2)
            let hi = (y >> 32) as usize;
            let lo = DIGITS2[(((y & LO) * 100) >> 32) as usize];
            if v >= 1000 {
                put2(p, DIGITS2[hi]);
                put2(p.add(2), lo);
                p.add(4)
            } else {
                *p = b'0' + hi as u8;
                put2(p.add(1), lo);
                p.add(3)
            }
        } else if v >= 10 {
            put2(p, DIGITS2[v as usize]);
            p.add(2)
        } else {
            *p = b'0' + v as u8;
            p.add(1)
        }
    }
}

/// Writes `addr` (host order) as a dotted quad and returns the cursor past
/// it (7 to 15 bytes): one 4-byte table store per octet, dot included.
///
/// # Safety
/// `p` must be valid for writes of 16 bytes.
#[inline(always)]
pub(crate) unsafe fn ipv4(p: *mut u8, addr: u32) -> *mut u8 {
    let mut q = p;
    // SAFETY: each store writes 4 bytes at q, and q advances by at most 4
    // per octet, so every write lands in p[0..16] (caller: writable).
    unsafe {
        for shift in [24u32, 16, 8, 0] {
            let e = OCT_WORD[((addr >> shift) & 0xff) as usize];
            q.cast::<u32>().write_unaligned((e as u32).to_le());
            q = q.add((e >> 32) as usize);
        }
        // The last octet's '.' is not part of the address.
        q.sub(1)
    }
}

/// Copies `len` bytes from `src` in 16-byte blocks and returns the cursor
/// past them. May read and write up to 15 bytes past `len` (the extra
/// bytes written are garbage for the next writer to overwrite).
///
/// # Safety
/// `src` must be readable and `p` writable for `len` rounded up to a
/// multiple of 16 (at least 16) bytes, and they must not overlap.
#[inline(always)]
pub(crate) unsafe fn lit16(p: *mut u8, src: *const u8, len: usize) -> *mut u8 {
    let mut i = 0;
    // SAFETY: the caller guarantees the rounded-up ranges are valid and
    // disjoint.
    unsafe {
        loop {
            p.add(i)
                .cast::<[u8; 16]>()
                .write_unaligned(src.add(i).cast::<[u8; 16]>().read_unaligned());
            i += 16;
            if i >= len {
                break;
            }
        }
        p.add(len)
    }
}

/// Copies `len` bytes from `src` as two 16-byte blocks (one 32-byte copy,
/// no loop) and returns the cursor past them; longer strings continue in
/// [`lit16`], out of line. May read and write up to 31 bytes past `len`
/// (garbage for the next writer to overwrite). For enum names, which are
/// almost always at most 32 bytes.
///
/// # Safety
/// `src` must be readable and `p` writable for `len` rounded up to a
/// multiple of 16 (at least 32) bytes, and they must not overlap.
#[inline(always)]
pub(crate) unsafe fn lit32(p: *mut u8, src: *const u8, len: usize) -> *mut u8 {
    // SAFETY: the caller guarantees 32 readable/writable bytes and the
    // rounded-up ranges for the tail.
    unsafe {
        p.cast::<[u8; 32]>()
            .write_unaligned(src.cast::<[u8; 32]>().read_unaligned());
        if len > 32 {
            return lit_tail(p, src, len);
        }
        p.add(len)
    }
}

/// The part of a [`lit32`] copy past 32 bytes.
///
/// # Safety
/// As [`lit32`].
#[cold]
#[inline(never)]
unsafe fn lit_tail(p: *mut u8, src: *const u8, len: usize) -> *mut u8 {
    // SAFETY: as lit32; len > 32, so the tail starts inside both ranges.
    unsafe { lit16(p.add(32), src.add(32), len - 32) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn raw_writers_match_std() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut vals: Vec<u64> = (0..2000).chain([99_999, 100_000, u64::MAX]).collect();
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            vals.push(x >> (x % 64));
        }
        let mut buf = [0u8; 48];
        for v in vals {
            let p = buf.as_mut_ptr();
            // SAFETY: 48 writable bytes; dec writes at most 20 from p+2.
            let n = unsafe { dec(p.add(2), v).offset_from(p) } as usize;
            assert_eq!(&buf[2..n], v.to_string().as_bytes());
            // SAFETY: dec_u16 writes at most 5 bytes from p+3.
            let n = unsafe { dec_u16(p.add(3), v as u16).offset_from(p) } as usize;
            assert_eq!(&buf[3..n], (v as u16).to_string().as_bytes());
            let a = v as u32;
            // SAFETY: ipv4 writes at most 16 bytes from p+1.
            let n = unsafe { ipv4(p.add(1), a).offset_from(p) } as usize;
            assert_eq!(&buf[1..n], Ipv4Addr::from(a).to_string().as_bytes());
        }
        for v in 0..=u16::MAX {
            let p = buf.as_mut_ptr();
            // SAFETY: dec_u16 writes at most 5 bytes from p.
            let n = unsafe { dec_u16(p, v).offset_from(p) } as usize;
            assert_eq!(&buf[..n], v.to_string().as_bytes());
        }
        let src = *b"0123456789abcdefghijklmnopqrstuvwxyz!!!!!!!!!!!!";
        for len in [0usize, 1, 15, 16, 17, 31, 32, 33, 47, 48] {
            buf = [0; 48];
            let p = buf.as_mut_ptr();
            // SAFETY: len <= 48: at most 48 bytes read from src (48) and
            // written from p (48).
            let n = unsafe { lit16(p, src.as_ptr(), len).offset_from(p) } as usize;
            assert_eq!((n, &buf[..len]), (len, &src[..len]));
            buf = [0; 48];
            let p = buf.as_mut_ptr();
            // SAFETY: lit32 copies 32 bytes, then 16-byte blocks up to len
            // rounded up: at most 48 read and written.
            let n = unsafe { lit32(p, src.as_ptr(), len).offset_from(p) } as usize;
            assert_eq!((n, &buf[..len]), (len, &src[..len]));
        }
    }
}
