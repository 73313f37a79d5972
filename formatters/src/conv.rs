//! Converters: the byte-level writers the compiled templates call.
//!
//! None of them goes through `core::fmt` or allocates beyond the output
//! `Vec` growing: integers use `itoa` or digit tables, IPv4 a 256-entry
//! octet table ([`crate::ipv4`]), time a per-second cached date prefix.

use crate::civil::civil_from_days;

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

/// Appends every byte of `b` as two lower-case hex digits (`00ff41`):
/// a byte string's lossless rendering ([`crate::template::BytesEncoding::Hex`]).
#[inline]
pub fn push_hex_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.reserve(b.len() * 2);
    for &x in b {
        out.extend_from_slice(&[HEX[(x >> 4) as usize], HEX[(x & 0xf) as usize]]);
    }
}

/// Appends every byte of `b` as base64 (RFC 4648 section 4: standard
/// alphabet `A-Z a-z 0-9 + /`, `=` padding): a byte string's lossless
/// rendering ([`crate::template::BytesEncoding::Base64`]).
#[inline]
pub fn push_base64(out: &mut Vec<u8>, b: &[u8]) {
    use base64::Engine as _;
    let at = out.len();
    out.resize(at + b.len().div_ceil(3) * 4, 0);
    let n = base64::engine::general_purpose::STANDARD
        .encode_slice(b, &mut out[at..])
        .unwrap_or(0);
    out.truncate(at + n);
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
        let mut t = [0u8; 30];
        let n = self.write(&mut t, 0, ns, digits);
        out.extend_from_slice(&t[..n]);
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
///
/// A value is the field's bytes up to its first NUL (a byte string is
/// NUL-padded); to show every byte of a field, NULs and invalid UTF-8
/// included, render it as hex or base64 instead
/// ([`crate::template::BytesEncoding`]), which need no escaping. Every line-framed format writes it so that the line holds
/// no raw control character from it: no C0 control (U+0000..U+001F), DEL
/// (U+007F), C1 control (U+0080..U+009F, e.g. NEL, which Python's
/// `splitlines` and some viewers take for a line break), LINE SEPARATOR
/// (U+2028) or PARAGRAPH SEPARATOR (U+2029), and no bidirectional
/// control (U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069),
/// which would reorder how the rest of the line is displayed. A record is
/// therefore one line for every line tool (grep, tail, a shipper, a syslog
/// sink that sends a line per message), shown as written, and a value
/// cannot forge a record, nor, in the text and syslog formats, a field.
/// The rules per syntax below are
/// lossless except where noted: the documented unescape gives back the
/// value's bytes.
///
/// `\xNN` is a byte in two lower-case hex digits; a character of more than
/// one byte (a C1 control, U+2028, U+2029, a bidirectional control) is
/// written a byte at a time (NEL U+0085 is `\xc2\x85`, RIGHT-TO-LEFT
/// OVERRIDE U+202E `\xe2\x80\xae`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Escape {
    /// Plain text (the text format, default layout and templates, and
    /// RFC 3164's MSG): `\` as `\\`, LF CR TAB as `\n` `\r` `\t`, the
    /// space as `\x20` and every other character `char::is_whitespace`
    /// accepts (NO-BREAK SPACE U+00A0 as `\xc2\xa0`, U+1680,
    /// U+2000..=U+200A, U+202F, U+205F, IDEOGRAPHIC SPACE U+3000) a byte
    /// at a time as `\xNN`, so a `name=value` pair ends at the next space
    /// and a value cannot forge another pair for any whitespace tokenizer
    /// (Python's `str.split()`, Go's `strings.Fields`, Rust's
    /// `split_whitespace`, `awk`); every other control character above
    /// and each byte of invalid UTF-8 as `\xNN`; all else (valid UTF-8)
    /// as is. Unescape: `\\`, `\n`, `\r`, `\t`, `\xNN` back to their
    /// byte; a backslash is never written alone.
    Text,
    /// Inside a JSON string (RFC 8259 section 7): `"` and `\` as `\"` and
    /// `\\`, LF CR TAB as `\n` `\r` `\t`, every other control character
    /// above as `\uXXXX` (C1, U+2028, U+2029 and the bidirectional
    /// controls too, so a JSON line is
    /// also safe to embed in JavaScript and for line tools); any JSON
    /// parser gives back the value. Invalid UTF-8 (which a JSON string
    /// cannot hold) becomes U+FFFD, one per maximal invalid sequence: the
    /// one lossy case.
    Json,
    /// A CSV field (RFC 4180): `\` as `\\` and every control character
    /// above (CR and LF included) and each byte of invalid UTF-8 as
    /// `\xNN`, so a record is one physical line; then the field is quoted
    /// (`"..."`, a `"` inside doubled) when it holds `,` or `"` or starts
    /// with a byte-order mark (U+FEFF, which readers drop at the start of
    /// the input). A leading `=`, `+`, `-` or `@` is written `\xNN` too,
    /// so a spreadsheet opening the file never reads a value as a formula
    /// (CSV injection, OWASP). A strict RFC 4180 reader gives the escaped
    /// value; its unescape is `\\` and `\xNN` back to their byte.
    Csv,
    /// A syslog RFC 5424 PARAM-VALUE (section 6.3.3): `"`, `\` and `]` as
    /// `\"`, `\\` and `\]`, as the RFC says; every control character above
    /// and each byte of invalid UTF-8 (a PARAM-VALUE is UTF-8) as `\xNN`.
    /// Unescape of the message as sent (what a file or rsyslog's
    /// `%structured-data%` holds): `\"`, `\\`, `\]` and `\xNN` back to
    /// their byte, lossless since a real backslash is always `\\`. An
    /// RFC 5424 parser that unescapes values itself (rsyslog's
    /// mmpstrucdata, syslog_loose) keeps a backslash before any other
    /// character, as the RFC says, so it delivers a control character as
    /// the four characters `\xNN`: the same as a value that held that
    /// text.
    SdParam,
}

/// U+FEFF (a byte-order mark at the start of a file) in UTF-8.
const BOM: &[u8] = "\u{FEFF}".as_bytes();

/// Bytes at which [`push_escaped`]'s scan stops for a syntax: every C0
/// control, DEL, every non-ASCII byte (a character checked for C1,
/// U+2028 and U+2029) and the syntax's own `specials`; the other bytes
/// are copied in runs.
const fn stops(specials: &[u8]) -> [bool; 256] {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = b < 0x20 || b >= 0x7f;
        b += 1;
    }
    let mut i = 0;
    while i < specials.len() {
        t[specials[i] as usize] = true;
        i += 1;
    }
    t
}

/// Each syntax's own bytes to escape (or, in CSV, to double); Text's
/// space is among the bytes below 0x21 of [`plain_word`].
const SPECIALS: [&[u8]; 4] = [b"\\", b"\\\"", b"\\\"", b"\\\"]"];
/// [`stops`] of each syntax, by [`Escape`] discriminant.
static STOPS: [[bool; 256]; 4] = [
    stops(b"\\ "),
    stops(SPECIALS[1]),
    stops(SPECIALS[2]),
    stops(SPECIALS[3]),
];

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// Whether none of the 8 bytes of `w` is one the scan of syntax `E`
/// stops at: no byte below 0x20 (Text: 0x21, the space), none from 0x7f
/// up, none of the syntax's specials. Exact (the classic "has a zero
/// byte" / "has a byte less than n" word tricks, which never miss one).
#[inline(always)]
fn plain_word<const E: u8>(w: u64) -> bool {
    let below = if E == Escape::Text as u8 { 0x21 } else { 0x20 };
    let has_zero = |x: u64| x.wrapping_sub(LO) & !x & HI;
    let mut m = (w.wrapping_sub(LO * below) & !w) | w | has_zero(w ^ (LO * 0x7f));
    let mut i = 0;
    while i < SPECIALS[E as usize].len() {
        m |= has_zero(w ^ (LO * SPECIALS[E as usize][i] as u64));
        i += 1;
    }
    m & HI == 0
}

/// The index of the first byte from `i` on that the scan of syntax `E`
/// stops at, or `v.len()`: 8 bytes at a time while they are plain, then
/// by table.
#[inline(always)]
fn next_stop<const E: u8>(v: &[u8], mut i: usize) -> usize {
    while let Some(w) = v.get(i..i + 8) {
        let w = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        if !plain_word::<E>(w) {
            break;
        }
        i += 8;
    }
    let stop = &STOPS[E as usize];
    v[i..]
        .iter()
        .position(|&b| stop[b as usize])
        .map_or(v.len(), |k| i + k)
}

/// The value of a BYTES field (or any NUL-padded byte string) `field`:
/// its bytes up to the first NUL, all of them when it has none. Bytes
/// after the first NUL (padding, or what a reused buffer left there) are
/// not part of the value.
#[inline]
pub fn bytes_value(field: &[u8]) -> &[u8] {
    match memchr::memchr(0, field) {
        Some(n) => &field[..n],
        None => field,
    }
}

/// Whether the BYTES field `field` holds `value`: [`bytes_value`] of it
/// equals `value` byte for byte (a `--where FIELD=VALUE` of `dplog-cat`
/// and `dplog-query`). A `value` longer than the field, or holding a
/// NUL, is no field's value.
#[inline]
pub fn bytes_field_is(field: &[u8], value: &[u8]) -> bool {
    bytes_value(field) == value
}

/// Appends `s` (a byte string, cut at its first NUL) escaped for `esc`;
/// see [`Escape`] for the rule of each syntax.
pub fn push_escaped(out: &mut Vec<u8>, s: &[u8], esc: Escape) {
    let s = bytes_value(s);
    match esc {
        Escape::Text => escape_as::<{ Escape::Text as u8 }>(out, s, esc),
        Escape::Json => escape_as::<{ Escape::Json as u8 }>(out, s, esc),
        Escape::Csv => escape_as::<{ Escape::Csv as u8 }>(out, s, esc),
        Escape::SdParam => escape_as::<{ Escape::SdParam as u8 }>(out, s, esc),
    }
}

/// [`push_escaped`] for syntax `E` (`esc as u8`), `s` without NUL. Runs
/// of plain bytes are copied whole; UTF-8 is checked only where a byte is
/// not ASCII.
#[inline(always)]
fn escape_as<const E: u8>(out: &mut Vec<u8>, s: &[u8], esc: Escape) {
    let quote =
        esc == Escape::Csv && (memchr::memchr2(b',', b'"', s).is_some() || s.starts_with(BOM));
    if quote {
        out.push(b'"');
    }
    let mut run = 0;
    if esc == Escape::Csv {
        if let Some(&b @ (b'=' | b'+' | b'-' | b'@')) = s.first() {
            push_x(out, b);
            run = 1;
        }
    }
    loop {
        let i = next_stop::<E>(s, run);
        out.extend_from_slice(&s[run..i]);
        if i == s.len() {
            break;
        }
        run = i + if s[i] < 0x80 {
            push_ascii(out, s[i], esc);
            1
        } else {
            push_non_ascii(out, &s[i..], esc)
        };
    }
    if quote {
        out.push(b'"');
    }
}

/// `\xNN`.
#[inline]
fn push_x(out: &mut Vec<u8>, b: u8) {
    out.extend_from_slice(&[b'\\', b'x', HEX[(b >> 4) as usize], HEX[(b & 0xf) as usize]]);
}

/// `\uXXXX` of a code point below U+10000.
fn push_u(out: &mut Vec<u8>, c: u16) {
    out.extend_from_slice(b"\\u");
    for sh in [12, 8, 4, 0] {
        out.push(HEX[((c >> sh) & 0xf) as usize]);
    }
}

/// Writes ASCII byte `b`, one the scan stops at, escaped for `esc`.
fn push_ascii(out: &mut Vec<u8>, b: u8, esc: Escape) {
    match (esc, b) {
        (_, b'\\') => out.extend_from_slice(b"\\\\"),
        (Escape::Json | Escape::SdParam, b'"') => out.extend_from_slice(b"\\\""),
        (Escape::Csv, b'"') => out.extend_from_slice(b"\"\""),
        (Escape::SdParam, b']') => out.extend_from_slice(b"\\]"),
        (Escape::Json | Escape::Text, b'\n') => out.extend_from_slice(b"\\n"),
        (Escape::Json | Escape::Text, b'\r') => out.extend_from_slice(b"\\r"),
        (Escape::Json | Escape::Text, b'\t') => out.extend_from_slice(b"\\t"),
        (Escape::Json, _) => push_u(out, u16::from(b)),
        // Text's space and every other syntax's controls and DEL.
        _ => push_x(out, b),
    }
}

/// Whether non-ASCII character `c` is whitespace that a tokenizer splits
/// fields at: every non-ASCII character `char::is_whitespace` accepts
/// (Unicode's White_Space: NEL U+0085, NO-BREAK SPACE U+00A0, OGHAM
/// SPACE MARK U+1680, U+2000..=U+200A, U+2028, U+2029, NARROW NO-BREAK
/// SPACE U+202F, MEDIUM MATHEMATICAL SPACE U+205F, IDEOGRAPHIC SPACE
/// U+3000), which Python's `str.split()`, Go's `strings.Fields`, Rust's
/// `split_whitespace` and JavaScript's `/\s+/` all split at. Escaped in
/// the syntaxes whose fields end at a space ([`Escape::Text`]), as the
/// space is, so a value cannot forge a field there.
#[inline]
fn splits_fields(c: char) -> bool {
    matches!(
        c,
        '\u{85}' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}'
    )
}

/// Whether non-ASCII character `c` is escaped in every line format: a C1
/// control (U+0080..=U+009F, NEL among them), a line or paragraph
/// separator (U+2028, U+2029), or a bidirectional control (U+061C,
/// U+200E, U+200F, U+202A..=U+202E, U+2066..=U+2069), which reorders how
/// the rest of a line is displayed: a value could make a terminal or
/// viewer show a line other than the one written (Unicode TR #9; the
/// "Trojan Source" spoofing, CVE-2021-42574).
#[inline]
fn needs_escape(c: char) -> bool {
    matches!(
        c,
        '\u{80}'..='\u{9f}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{61c}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
    )
}

/// Writes the character at the start of `v` (its first byte is not
/// ASCII) escaped for `esc`, or the invalid UTF-8 sequence there (the
/// longest that could start a character, as `String::from_utf8_lossy`
/// replaces); returns the bytes taken.
fn push_non_ascii(out: &mut Vec<u8>, v: &[u8], esc: Escape) -> usize {
    // The length a lead byte announces (1: no lead byte, invalid).
    let n = match v[0] {
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => 1,
    };
    let end = n.min(v.len());
    let taken = match std::str::from_utf8(&v[..end]) {
        Ok(s) => {
            let c = s.chars().next().unwrap_or('\0');
            if !(needs_escape(c) || esc == Escape::Text && splits_fields(c)) {
                out.extend_from_slice(&v[..n]);
            } else if esc == Escape::Json {
                // Every escaped character is below U+10000.
                push_u(out, c as u16);
            } else {
                v[..n].iter().for_each(|&b| push_x(out, b));
            }
            return n;
        }
        // An invalid sequence, or a character cut by the end of the value.
        Err(e) => e.error_len().unwrap_or(end),
    };
    if esc == Escape::Json {
        out.extend_from_slice("\u{FFFD}".as_bytes());
    } else {
        v[..taken].iter().for_each(|&b| push_x(out, b));
    }
    taken
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
    fn a_bytes_value_ends_at_its_first_nul() {
        let mut f = [0u8; 8];
        f[..2].copy_from_slice(b"ab");
        assert_eq!(bytes_value(&f), b"ab");
        assert!(bytes_field_is(&f, b"ab"));
        f[3..].copy_from_slice(b"stale");
        assert_eq!(bytes_value(&f), b"ab");
        assert!(bytes_field_is(&f, b"ab"));
        assert!(!bytes_field_is(&f, b"a"));
        assert!(!bytes_field_is(&f, b"ab\0stale"));
        let full = *b"12345678";
        assert!(bytes_field_is(&full, b"12345678"));
        assert!(!bytes_field_is(&full, b"123456789"));
        assert!(bytes_field_is(&[0u8; 4], b""));
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
            r#"a\"b\\c\]d,e\x0af\x01"#
        );
        assert_eq!(
            s(|o| push_escaped(o, raw, Escape::Csv)),
            r#""a""b\\c]d,e\x0af\x01""#
        );
        assert_eq!(s(|o| push_escaped(o, b"plain", Escape::Csv)), "plain");
        assert_eq!(
            s(|o| push_escaped(o, raw, Escape::Text)),
            r#"a"b\\c]d,e\nf\x01"#
        );
        assert_eq!(
            s(|o| push_escaped(o, b"x\xffy", Escape::Json)),
            "x\u{FFFD}y"
        );
        assert_eq!(s(|o| push_escaped(o, b"x\xffy", Escape::Text)), r"x\xffy");
    }

    /// DEL, C1 controls (NEL), U+2028, U+2029, ESC and invalid UTF-8 never
    /// come out raw; other non-ASCII characters (NBSP, é, a 4-byte emoji)
    /// do; Text alone escapes the space, and every other whitespace
    /// character (NBSP among them).
    #[test]
    fn no_syntax_lets_a_line_break_or_control_through() {
        let raw = "sp ace\x7f\u{85}\u{2028}\u{2029}\x1b[2J\r\n\u{a0}é\u{1F600}".as_bytes();
        let mut raw = raw.to_vec();
        raw.extend_from_slice(b"\xff\xe2\x80");
        let x = r"\x7f\xc2\x85\xe2\x80\xa8\xe2\x80\xa9\x1b[2J";
        assert_eq!(
            s(|o| push_escaped(o, &raw, Escape::Text)),
            format!(r"sp\x20ace{x}\r\n\xc2\xa0{}\xff\xe2\x80", "é\u{1F600}")
        );
        for esc in [Escape::Csv, Escape::SdParam] {
            assert_eq!(
                s(|o| push_escaped(o, &raw, esc)),
                format!(r"sp ace{x}\x0d\x0a{}\xff\xe2\x80", "\u{a0}é\u{1F600}"),
                "{esc:?}"
            );
        }
        assert_eq!(
            s(|o| push_escaped(o, &raw, Escape::Json)),
            format!(
                r"sp ace\u007f\u0085\u2028\u2029\u001b[2J\r\n{}",
                "\u{a0}é\u{1F600}\u{FFFD}\u{FFFD}"
            )
        );
        assert_eq!(
            s(|o| push_escaped(o, "\u{FEFF}x".as_bytes(), Escape::Csv)),
            "\"\u{FEFF}x\""
        );
    }

    /// The 8-byte scan agrees with the table: every byte at every
    /// position among plain ones, and random words (where several stop
    /// bytes and borrows meet).
    #[test]
    fn word_scan_matches_the_table() {
        fn check<const E: u8>() {
            let table = &STOPS[E as usize];
            let word = |w: u64| w.to_le_bytes().iter().any(|&b| table[b as usize]);
            for b in 0..=255u8 {
                for at in 0..8 {
                    let mut w = *b"abcdefgh";
                    w[at] = b;
                    let w = u64::from_le_bytes(w);
                    assert_eq!(plain_word::<E>(w), !word(w), "{E} {b:#x} at {at}");
                }
            }
            let mut x = 0x9E37_79B9_7F4A_7C15u64;
            for _ in 0..200_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Bias towards printable ASCII, where the tricks borrow.
                let w = x & 0x7f7f_7f7f_7f7f_7f7f | 0x2020_2020_2020_2020 & !(x >> 1);
                for w in [x, w] {
                    assert_eq!(plain_word::<E>(w), !word(w), "{E} {w:#x}");
                }
            }
        }
        check::<{ Escape::Text as u8 }>();
        check::<{ Escape::Json as u8 }>();
        check::<{ Escape::Csv as u8 }>();
        check::<{ Escape::SdParam as u8 }>();
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
