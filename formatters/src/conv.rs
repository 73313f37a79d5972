//! Converters: the byte-level writers the compiled templates call.
//!
//! None of them goes through `core::fmt` or allocates beyond the output
//! `Vec` growing: integers use `itoa` or digit tables, IPv4 a 256-entry
//! octet table ([`crate::ipv4`]), time a per-second cached date prefix.

use crate::time::civil_from_days;

pub use crate::ipv4::push_ipv4;

/// "00".."99".
pub(crate) static DIGITS2: [[u8; 2]; 100] = {
    let mut t = [[0u8; 2]; 100];
    let mut i = 0;
    while i < 100 {
        t[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    t
};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `v` in decimal.
#[inline(always)]
pub fn push_dec(out: &mut Vec<u8>, v: u64) {
    let mut b = itoa::Buffer::new();
    out.extend_from_slice(b.format(v).as_bytes());
}

/// 10^0 ..= 10^19.
static POW10: [u64; 20] = {
    let mut t = [1u64; 20];
    let mut i = 1;
    while i < 20 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

/// Number of decimal digits of `v` (1 for 0), 1..=20, without a loop:
/// the bit length times log10(2) (1233/4096) is the digit count or one
/// less, and one comparison with a power of ten settles it.
#[inline(always)]
pub fn dec_len(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    let t = (bits * 1233) >> 12;
    // t <= 19 for bits <= 64, so POW10[t] exists.
    t + usize::from((v | 1) >= POW10[t])
}

/// Writes `v` in decimal at `buf[n..]` and returns the end index
/// (`n + dec_len(v)`), two digits per step from a table.
///
/// # Panics
/// If `buf` has fewer than `dec_len(v)` bytes after `n` (callers size
/// their buffer from [`crate::Program::max_output`]-style bounds: 20 bytes
/// suffice for any `u64`).
#[inline(always)]
pub fn write_dec(buf: &mut [u8], n: usize, v: u64) -> usize {
    if v < 10 {
        buf[n] = b'0' + v as u8;
        return n + 1;
    }
    if v < 100 {
        buf[n..n + 2].copy_from_slice(&DIGITS2[v as usize]);
        return n + 2;
    }
    // Ports, protocols and most counters: straight-line code.
    if v < 100_000 {
        let v = v as usize;
        let b = &mut buf[n..n + 5];
        return if v < 1000 {
            b[0] = b'0' + (v / 100) as u8;
            b[1..3].copy_from_slice(&DIGITS2[v % 100]);
            n + 3
        } else if v < 10_000 {
            b[0..2].copy_from_slice(&DIGITS2[v / 100]);
            b[2..4].copy_from_slice(&DIGITS2[v % 100]);
            n + 4
        } else {
            b[0] = b'0' + (v / 10_000) as u8;
            b[1..3].copy_from_slice(&DIGITS2[(v / 100) % 100]);
            b[3..5].copy_from_slice(&DIGITS2[v % 100]);
            n + 5
        };
    }
    let end = n + dec_len(v);
    let (mut e, mut v) = (end, v);
    while v >= 100 {
        e -= 2;
        buf[e..e + 2].copy_from_slice(&DIGITS2[(v % 100) as usize]);
        v /= 100;
    }
    if v >= 10 {
        buf[e - 2..e].copy_from_slice(&DIGITS2[v as usize]);
    } else {
        buf[e - 1] = b'0' + v as u8;
    }
    end
}

/// Copies `lits[start..start + len]` to `buf[n..]` in 16-byte blocks and
/// returns `n + len`. The blocks may copy up to 15 bytes past the end of
/// the literal: `lits` must hold 15 readable bytes after every literal
/// (pad it) and `buf` 15 writable bytes after `n + len`; the extra bytes
/// written are garbage that the caller overwrites or cuts off.
#[inline(always)]
pub fn write_lit16(buf: &mut [u8], n: usize, lits: &[u8], start: usize, len: usize) -> usize {
    let mut i = 0;
    while i < len {
        buf[n + i..n + i + 16].copy_from_slice(&lits[start + i..start + i + 16]);
        i += 16;
    }
    n + len
}

/// Appends `v` in lower-case hexadecimal without prefix or leading zeros
/// (`0` for zero).
#[inline]
pub fn push_hex(out: &mut Vec<u8>, v: u64) {
    let mut tmp = [0u8; 16];
    let digits = (16 - (v.leading_zeros() as usize) / 4).max(1);
    for (i, slot) in tmp[..digits].iter_mut().enumerate() {
        *slot = HEX[((v >> ((digits - 1 - i) * 4)) & 0xf) as usize];
    }
    out.extend_from_slice(&tmp[..digits]);
}

/// Appends a MAC address (6 bytes, network order) as `aa:bb:cc:dd:ee:ff`.
#[inline]
pub fn push_mac(out: &mut Vec<u8>, mac: &[u8]) {
    let mut tmp = [0u8; 17];
    for (i, b) in mac.iter().take(6).enumerate() {
        tmp[i * 3] = HEX[(b >> 4) as usize];
        tmp[i * 3 + 1] = HEX[(b & 0xf) as usize];
        if i < 5 {
            tmp[i * 3 + 2] = b':';
        }
    }
    out.extend_from_slice(&tmp);
}

/// Appends an IPv6 address (16 bytes, network order) in RFC 5952 canonical
/// text: lower-case hex, no leading zeros, the longest run of two or more
/// zero groups (the first of equals) as `::`, and IPv4-mapped addresses
/// (`::ffff:0:0/96`) with a dotted-quad tail (RFC 5952 section 5).
pub fn push_ipv6(out: &mut Vec<u8>, a: &[u8; 16]) {
    let mut g = [0u16; 8];
    for (i, w) in g.iter_mut().enumerate() {
        *w = u16::from_be_bytes([a[2 * i], a[2 * i + 1]]);
    }
    if g[..5] == [0; 5] && g[5] == 0xffff {
        out.extend_from_slice(b"::ffff:");
        push_ipv4(out, u32::from_be_bytes([a[12], a[13], a[14], a[15]]));
        return;
    }
    // Longest run of zero groups (length >= 2).
    let (mut best, mut best_len, mut i) = (8usize, 0usize, 0usize);
    while i < 8 {
        if g[i] == 0 {
            let start = i;
            while i < 8 && g[i] == 0 {
                i += 1;
            }
            if i - start > best_len {
                best = start;
                best_len = i - start;
            }
        } else {
            i += 1;
        }
    }
    if best_len < 2 {
        best = 8;
    }
    let mut i = 0;
    while i < 8 {
        if i == best {
            out.extend_from_slice(b"::");
            i += best_len;
            continue;
        }
        if i > 0 && i != best + best_len {
            out.push(b':');
        }
        push_hex(out, g[i] as u64);
        i += 1;
    }
}

/// RFC 3339 UTC time with a per-second cached `YYYY-MM-DDTHH:MM:SS` prefix
/// and 0, 3, 6 or 9 fractional digits, e.g. `2026-01-01T00:00:00.123Z`.
/// Years print with four digits (1970..=9999).
#[derive(Clone, Debug)]
pub struct Rfc3339Cache {
    sec: u64,
    /// `YYYY-MM-DDTHH:MM:SS.` and 4 zero bytes, so the hot path copies it
    /// as one 24-byte block.
    prefix: [u8; 24],
}

impl Default for Rfc3339Cache {
    fn default() -> Self {
        let mut c = Self {
            sec: 0,
            prefix: [0; 24],
        };
        c.fill(0);
        c
    }
}

impl Rfc3339Cache {
    #[cold]
    #[inline(never)]
    fn fill(&mut self, sec: u64) {
        let (y, m, d) = civil_from_days((sec / 86_400) as i64);
        let sod = (sec % 86_400) as usize;
        let y = y.clamp(0, 9999) as usize;
        let p = &mut self.prefix;
        p[0..2].copy_from_slice(&DIGITS2[y / 100]);
        p[2..4].copy_from_slice(&DIGITS2[y % 100]);
        p[4] = b'-';
        p[5..7].copy_from_slice(&DIGITS2[m as usize]);
        p[7] = b'-';
        p[8..10].copy_from_slice(&DIGITS2[d as usize]);
        p[10] = b'T';
        p[11..13].copy_from_slice(&DIGITS2[sod / 3600]);
        p[13] = b':';
        p[14..16].copy_from_slice(&DIGITS2[(sod / 60) % 60]);
        p[16] = b':';
        p[17..19].copy_from_slice(&DIGITS2[sod % 60]);
        p[19] = b'.';
        self.sec = sec;
    }

    /// Appends `ns` (nanoseconds since the Unix epoch) with `digits`
    /// (0, 3, 6 or 9; others act as 9) fractional digits, truncated, then `Z`.
    #[inline]
    pub fn push(&mut self, out: &mut Vec<u8>, ns: u64, digits: u8) {
        let sec = ns / 1_000_000_000;
        if sec != self.sec {
            self.fill(sec);
        }
        let frac = (ns % 1_000_000_000) as usize;
        let mut t = [0u8; 31];
        t[..19].copy_from_slice(&self.prefix[..19]);
        let n = match digits {
            0 => 19,
            3 => {
                let ms = frac / 1_000_000;
                t[19] = b'.';
                t[20] = b'0' + (ms / 100) as u8;
                t[21..23].copy_from_slice(&DIGITS2[ms % 100]);
                23
            }
            6 => {
                let us = frac / 1000;
                t[19] = b'.';
                t[20..22].copy_from_slice(&DIGITS2[us / 10_000]);
                t[22..24].copy_from_slice(&DIGITS2[(us / 100) % 100]);
                t[24..26].copy_from_slice(&DIGITS2[us % 100]);
                26
            }
            _ => {
                t[19] = b'.';
                t[20] = b'0' + (frac / 100_000_000) as u8;
                let r = frac % 100_000_000;
                t[21..23].copy_from_slice(&DIGITS2[r / 1_000_000]);
                t[23..25].copy_from_slice(&DIGITS2[(r / 10_000) % 100]);
                t[25..27].copy_from_slice(&DIGITS2[(r / 100) % 100]);
                t[27..29].copy_from_slice(&DIGITS2[r % 100]);
                29
            }
        };
        t[n] = b'Z';
        out.extend_from_slice(&t[..n + 1]);
    }
}

impl Rfc3339Cache {
    /// Writes `ns` like [`Rfc3339Cache::push`] at `buf[n..]` and returns the
    /// end index (20 to 30 bytes later).
    ///
    /// # Panics
    /// If `buf` has fewer than 30 bytes after `n`.
    #[inline(always)]
    pub fn write(&mut self, buf: &mut [u8], n: usize, ns: u64, digits: u8) -> usize {
        let sec = ns / 1_000_000_000;
        if sec != self.sec {
            self.fill(sec);
        }
        let frac = (ns % 1_000_000_000) as usize;
        let t = &mut buf[n..n + 30];
        t[..19].copy_from_slice(&self.prefix[..19]);
        t[19] = b'.';
        let z = match digits {
            0 => 19,
            3 => {
                let ms = frac / 1_000_000;
                t[20] = b'0' + (ms / 100) as u8;
                t[21..23].copy_from_slice(&DIGITS2[ms % 100]);
                23
            }
            6 => {
                let us = frac / 1000;
                t[20..22].copy_from_slice(&DIGITS2[us / 10_000]);
                t[22..24].copy_from_slice(&DIGITS2[(us / 100) % 100]);
                t[24..26].copy_from_slice(&DIGITS2[us % 100]);
                26
            }
            _ => {
                t[20] = b'0' + (frac / 100_000_000) as u8;
                let r = frac % 100_000_000;
                t[21..23].copy_from_slice(&DIGITS2[r / 1_000_000]);
                t[23..25].copy_from_slice(&DIGITS2[(r / 10_000) % 100]);
                t[25..27].copy_from_slice(&DIGITS2[(r / 100) % 100]);
                t[27..29].copy_from_slice(&DIGITS2[r % 100]);
                29
            }
        };
        t[z] = b'Z';
        n + z + 1
    }

    /// Writes `ns` like [`Rfc3339Cache::push`] through a raw cursor and
    /// returns the cursor past it (20 to 30 bytes). The hot path compares
    /// only the whole-second value with the cached one.
    ///
    /// # Safety
    /// `p` must be valid for writes of 32 bytes.
    #[inline(always)]
    pub(crate) unsafe fn write_raw(&mut self, p: *mut u8, ns: u64, digits: u8) -> *mut u8 {
        let sec = ns / 1_000_000_000;
        if sec != self.sec {
            self.fill(sec);
        }
        let frac = (ns - sec * 1_000_000_000) as usize;
        // SAFETY: for the whole body: the prefix store covers p[0..24], the
        // fraction p[20..29] and the 'Z' one byte at most at p[29]; the
        // caller guarantees 32 writable bytes.
        unsafe {
            p.cast::<[u8; 24]>().write_unaligned(self.prefix);
            let z = match digits {
                0 => 19,
                3 => {
                    let ms = frac / 1_000_000;
                    *p.add(20) = b'0' + (ms / 100) as u8;
                    p.add(21)
                        .cast::<[u8; 2]>()
                        .write_unaligned(DIGITS2[ms % 100]);
                    23
                }
                6 => {
                    let us = frac / 1000;
                    p.add(20)
                        .cast::<[u8; 2]>()
                        .write_unaligned(DIGITS2[us / 10_000]);
                    p.add(22)
                        .cast::<[u8; 2]>()
                        .write_unaligned(DIGITS2[(us / 100) % 100]);
                    p.add(24)
                        .cast::<[u8; 2]>()
                        .write_unaligned(DIGITS2[us % 100]);
                    26
                }
                _ => {
                    *p.add(20) = b'0' + (frac / 100_000_000) as u8;
                    let r = frac % 100_000_000;
                    for (i, d) in [r / 1_000_000, (r / 10_000) % 100, (r / 100) % 100, r % 100]
                        .into_iter()
                        .enumerate()
                    {
                        p.add(21 + 2 * i)
                            .cast::<[u8; 2]>()
                            .write_unaligned(DIGITS2[d]);
                    }
                    29
                }
            };
            *p.add(z) = b'Z';
            p.add(z + 1)
        }
    }
}

/// RFC 3164 section 4.1.2 TIMESTAMP, `Mmm dd hh:mm:ss` (day space-padded),
/// UTC, cached per second.
#[derive(Clone, Debug)]
pub struct Rfc3164Cache {
    sec: u64,
    text: [u8; 15],
}

impl Default for Rfc3164Cache {
    fn default() -> Self {
        let mut c = Self {
            sec: 0,
            text: [0; 15],
        };
        c.fill(0);
        c
    }
}

impl Rfc3164Cache {
    const MONTHS: [&'static [u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];

    fn fill(&mut self, sec: u64) {
        let (_, m, d) = civil_from_days((sec / 86_400) as i64);
        let sod = (sec % 86_400) as usize;
        let t = &mut self.text;
        t[0..3].copy_from_slice(Self::MONTHS[m as usize - 1]);
        t[3] = b' ';
        t[4] = if d >= 10 { b'0' + (d / 10) as u8 } else { b' ' };
        t[5] = b'0' + (d % 10) as u8;
        t[6] = b' ';
        t[7..9].copy_from_slice(&DIGITS2[sod / 3600]);
        t[9] = b':';
        t[10..12].copy_from_slice(&DIGITS2[(sod / 60) % 60]);
        t[12] = b':';
        t[13..15].copy_from_slice(&DIGITS2[sod % 60]);
        self.sec = sec;
    }

    /// Appends the timestamp of `ns` nanoseconds since the epoch (15 bytes).
    #[inline]
    pub fn push(&mut self, out: &mut Vec<u8>, ns: u64) {
        let sec = ns / 1_000_000_000;
        if sec != self.sec {
            self.fill(sec);
        }
        out.extend_from_slice(&self.text);
    }
}

/// How byte strings (and enum names) are escaped for an output syntax.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Escape {
    /// Plain text: printable ASCII and valid UTF-8 as is; `\\`, control
    /// bytes and invalid UTF-8 as `\\`, `\n`, `\t`, `\r` or `\xNN`.
    Text,
    /// Inside a JSON string (RFC 8259 section 7): `"` `\\` and control
    /// characters escaped; invalid UTF-8 bytes become U+FFFD.
    Json,
    /// A CSV field (RFC 4180): the value is quoted when it holds `,`, `"`,
    /// CR or LF, with `"` doubled; invalid UTF-8 bytes become U+FFFD.
    Csv,
    /// A syslog RFC 5424 PARAM-VALUE (section 6.3.3): `"`, `\\` and `]`
    /// are preceded by `\\`; invalid UTF-8 bytes become U+FFFD.
    SdParam,
}

/// Appends `s` (a byte string, cut at its first NUL) escaped for `esc`.
pub fn push_escaped(out: &mut Vec<u8>, s: &[u8], esc: Escape) {
    let s = match memchr::memchr(0, s) {
        Some(n) => &s[..n],
        None => s,
    };
    if esc == Escape::Csv {
        // A leading U+FEFF is quoted too: readers drop a byte-order mark at
        // the start of the input.
        if memchr::memchr3(b',', b'"', b'\n', s).is_some()
            || memchr::memchr(b'\r', s).is_some()
            || s.starts_with("\u{FEFF}".as_bytes())
        {
            out.push(b'"');
            for chunk in s.utf8_chunks() {
                for &b in chunk.valid().as_bytes() {
                    if b == b'"' {
                        out.push(b'"');
                    }
                    out.push(b);
                }
                if !chunk.invalid().is_empty() {
                    out.extend_from_slice("\u{FFFD}".as_bytes());
                }
            }
            out.push(b'"');
        } else {
            push_lossy(out, s);
        }
        return;
    }
    for chunk in s.utf8_chunks() {
        for &b in chunk.valid().as_bytes() {
            match (esc, b) {
                (Escape::Json, b'"') => out.extend_from_slice(b"\\\""),
                (Escape::Json | Escape::Text, b'\\') => out.extend_from_slice(b"\\\\"),
                (Escape::Json | Escape::Text, b'\n') => out.extend_from_slice(b"\\n"),
                (Escape::Json | Escape::Text, b'\r') => out.extend_from_slice(b"\\r"),
                (Escape::Json | Escape::Text, b'\t') => out.extend_from_slice(b"\\t"),
                (Escape::Json, 0..=0x1f) => {
                    out.extend_from_slice(b"\\u00");
                    out.push(HEX[(b >> 4) as usize]);
                    out.push(HEX[(b & 0xf) as usize]);
                }
                (Escape::Text, 0..=0x1f | 0x7f) => {
                    out.extend_from_slice(b"\\x");
                    out.push(HEX[(b >> 4) as usize]);
                    out.push(HEX[(b & 0xf) as usize]);
                }
                (Escape::SdParam, b'"' | b'\\' | b']') => {
                    out.push(b'\\');
                    out.push(b);
                }
                _ => out.push(b),
            }
        }
        for &b in chunk.invalid() {
            if esc == Escape::Text {
                out.extend_from_slice(b"\\x");
                out.push(HEX[(b >> 4) as usize]);
                out.push(HEX[(b & 0xf) as usize]);
            } else {
                out.extend_from_slice("\u{FFFD}".as_bytes());
            }
        }
    }
}

fn push_lossy(out: &mut Vec<u8>, s: &[u8]) {
    for chunk in s.utf8_chunks() {
        out.extend_from_slice(chunk.valid().as_bytes());
        if !chunk.invalid().is_empty() {
            out.extend_from_slice("\u{FFFD}".as_bytes());
        }
    }
}

/// A TSC calibration: converts `rdtsc` ticks to nanoseconds since the
/// epoch as `ns0 + (tsc - tsc0) * 1e9 / hz` (exact, in 128-bit arithmetic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TscCalibration {
    /// TSC frequency in Hz (ticks per second), > 0.
    pub hz: u64,
    /// A TSC reading...
    pub tsc0: u64,
    /// ...and the wall time at that reading, ns since the Unix epoch.
    pub ns0: u64,
}

impl TscCalibration {
    /// The identity (`to_ns(t) == t`): what the formatters use until a
    /// calibration arrives, right for records stamped by
    /// `dplog_core::tsc::now_ticks` on a machine without an invariant TSC
    /// (ticks are then `CLOCK_REALTIME` nanoseconds and the consumer's
    /// `TscClock` has no calibration to pass).
    pub const IDENTITY: TscCalibration = TscCalibration {
        hz: 1_000_000_000,
        tsc0: 0,
        ns0: 0,
    };

    /// Nanoseconds since the epoch of tick count `tsc`; readings before
    /// `tsc0` clamp to `ns0`.
    ///
    /// Error bound: the result is the exact time on the calibration's line
    /// rounded down, so never above it and less than 1 ns below; the
    /// calibration's own error against `CLOCK_REALTIME` is
    /// `TscClock::error_bound_ns` (see `dplog_core::tsc`), and a format
    /// then truncates to its digits (milliseconds for `unix_ms`, ...).
    #[inline]
    pub fn to_ns(&self, tsc: u64) -> u64 {
        let d = tsc.saturating_sub(self.tsc0) as u128;
        let ns = d * 1_000_000_000 / self.hz.max(1) as u128;
        self.ns0.saturating_add(ns.min(u64::MAX as u128) as u64)
    }
}

impl Default for TscCalibration {
    /// [`TscCalibration::IDENTITY`].
    fn default() -> Self {
        Self::IDENTITY
    }
}

impl From<&dplog_core::tsc::Calibration> for TscCalibration {
    /// The consumer's calibration (`TscClock::calibration`, passed to
    /// formatters through `Formatter::tsc_calibration`).
    fn from(c: &dplog_core::tsc::Calibration) -> Self {
        TscCalibration {
            hz: c.hz.max(1),
            tsc0: c.tsc0,
            ns0: c.ns0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;

    fn s(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut v = Vec::new();
        f(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn ipv6_known_forms_match_rfc5952_examples() {
        for (a, want) in [
            ("2001:db8::1", "2001:db8::1"),
            ("2001:0db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"),
            ("2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"),
            ("::", "::"),
            ("::1", "::1"),
            ("1::", "1::"),
            ("::ffff:192.0.2.1", "::ffff:192.0.2.1"),
            (
                "2001:DB8:AAAA:BBBB:CCCC:DDDD:EEEE:0001",
                "2001:db8:aaaa:bbbb:cccc:dddd:eeee:1",
            ),
        ] {
            let ip: Ipv6Addr = a.parse().unwrap();
            assert_eq!(s(|o| push_ipv6(o, &ip.octets())), want);
        }
    }

    #[test]
    fn time_and_hex_and_mac() {
        let mut c = Rfc3339Cache::default();
        let ns = 1_767_225_600_123_456_789;
        assert_eq!(s(|o| c.push(o, ns, 3)), "2026-01-01T00:00:00.123Z");
        assert_eq!(s(|o| c.push(o, ns, 6)), "2026-01-01T00:00:00.123456Z");
        assert_eq!(s(|o| c.push(o, ns, 9)), "2026-01-01T00:00:00.123456789Z");
        assert_eq!(s(|o| c.push(o, ns, 0)), "2026-01-01T00:00:00Z");
        let mut t = Rfc3164Cache::default();
        assert_eq!(s(|o| t.push(o, ns)), "Jan  1 00:00:00");
        assert_eq!(
            s(|o| t.push(o, 1_700_000_000_000_000_000)),
            "Nov 14 22:13:20"
        );
        assert_eq!(s(|o| push_hex(o, 0)), "0");
        assert_eq!(s(|o| push_hex(o, 0xdead_beef)), "deadbeef");
        assert_eq!(s(|o| push_hex(o, u64::MAX)), "ffffffffffffffff");
        assert_eq!(
            s(|o| push_mac(o, &[0, 0x1b, 0x21, 0xab, 0xcd, 0xef])),
            "00:1b:21:ab:cd:ef"
        );
    }

    #[test]
    fn escapes_per_syntax() {
        let raw = b"a\"b\\c]d,e\nf\x01\0ignored";
        assert_eq!(
            s(|o| push_escaped(o, raw, Escape::Json)),
            r#"a\"b\\c]d,e\nf\u0001"#
        );
        assert_eq!(
            s(|o| push_escaped(o, raw, Escape::SdParam)),
            "a\\\"b\\\\c\\]d,e\nf\x01"
        );
        assert_eq!(
            s(|o| push_escaped(o, raw, Escape::Csv)),
            "\"a\"\"b\\c]d,e\nf\x01\""
        );
        assert_eq!(s(|o| push_escaped(o, b"plain", Escape::Csv)), "plain");
        assert_eq!(
            s(|o| push_escaped(o, raw, Escape::Text)),
            "a\"b\\\\c]d,e\\nf\\x01"
        );
        assert_eq!(
            s(|o| push_escaped(o, b"x\xffy", Escape::Json)),
            "x\u{FFFD}y"
        );
        assert_eq!(s(|o| push_escaped(o, b"x\xffy", Escape::Text)), "x\\xffy");
    }

    #[test]
    fn write_dec_matches_itoa_at_every_length() {
        let mut vals: Vec<u64> = (0..200_000).collect();
        for p in 1..20u32 {
            let t = 10u64.pow(p);
            vals.extend([t - 1, t, t + 1]);
        }
        vals.push(u64::MAX);
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            vals.push(x >> (x % 64));
        }
        let mut buf = [0xAAu8; 32];
        for v in vals {
            let want = itoa::Buffer::new().format(v).to_string();
            assert_eq!(dec_len(v), want.len(), "{v}");
            let end = write_dec(&mut buf, 3, v);
            assert_eq!(&buf[3..end], want.as_bytes(), "{v}");
        }
    }

    #[test]
    fn rfc3339_write_matches_push() {
        let mut a = Rfc3339Cache::default();
        let mut b = Rfc3339Cache::default();
        for ns in [0u64, 1_767_225_600_123_456_789, 951_782_400_000_001_999] {
            for digits in [0u8, 3, 6, 9] {
                let mut buf = [0u8; 40];
                let end = a.write(&mut buf, 2, ns, digits);
                assert_eq!(&buf[2..end], s(|o| b.push(o, ns, digits)).as_bytes());
                let p = buf.as_mut_ptr();
                // SAFETY: write_raw writes at most 32 bytes from p+3 (40).
                let end = unsafe { a.write_raw(p.add(3), ns, digits).offset_from(p) } as usize;
                assert_eq!(&buf[3..end], s(|o| b.push(o, ns, digits)).as_bytes());
            }
        }
    }

    #[test]
    fn tsc_calibration_converts_ticks() {
        let c = TscCalibration {
            hz: 2_500_000_000,
            tsc0: 1000,
            ns0: 1_000_000_000,
        };
        assert_eq!(c.to_ns(1000), 1_000_000_000);
        assert_eq!(c.to_ns(1000 + 2_500_000_000), 2_000_000_000);
        assert_eq!(c.to_ns(0), 1_000_000_000);
    }
}
