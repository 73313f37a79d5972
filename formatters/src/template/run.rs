//! [`Program::run`]: the per-record loop over the compiled steps, writing
//! through a raw cursor, and the record reader and writers it inlines.

use super::*;

impl Program {
    /// Appends the formatted record. Returns `false` (appending nothing) if
    /// `rec` is shorter than the schema's record size.
    ///
    /// Reserves [`Program::max_output`] bytes (plus slack for 16-byte
    /// literal blocks) in `out` once per record and writes the line through
    /// a raw cursor: no per-operation capacity check, length update or
    /// bounds check, no allocation once `out` has grown, no `core::fmt`.
    #[inline]
    pub fn run(&mut self, rec: &[u8], out: &mut Vec<u8>) -> bool {
        if rec.len() < self.min_len {
            return false;
        }
        if !self.ready {
            self.build();
        }
        let Program {
            steps,
            padded,
            tmp,
            names,
            rfc3339,
            rfc3164,
            renumber,
            tsc,
            max_out,
            min_len,
            ..
        } = self;
        let (renumber, tsc, max_out, self_min_len) = (*renumber, *tsc, *max_out, *min_len);
        out.reserve(max_out + SLACK);
        let len0 = out.len();
        let lits = padded.as_ptr();
        // Fields are read as one 8-byte load at min(offset, hi): every
        // field lies in 8..min_len and records are at least 8 bytes, so
        // the load stays inside `rec` (checked against min_len above).
        let rp = Rec {
            p: rec.as_ptr(),
            hi: self_min_len - 8,
        };
        // Bound kept by the loop below: from `p`, the bytes `out` can take
        // are at least SLACK plus the `max_out` shares (see `field`/`lit`)
        // of the steps not yet run; every writer touches at most its share
        // plus 16 bytes (32 for RFC 3339, whose share is 30, and for a
        // step's 32-byte literal suffix, whose share is `post_len`; a fused
        // pair's parts write one after the other, each within its own
        // share plus 16), < SLACK.
        // SAFETY: `reserve` made `len0 + max_out + SLACK` bytes allocated.
        let mut base = unsafe { out.as_mut_ptr().add(len0) };
        let mut p = base;
        // Steps walked by pointer: `sp` and `end` stay in registers (a
        // `Vec` length would be reloaded after every byte store).
        let mut sp = steps.as_ptr();
        // SAFETY: one past the end of `steps`.
        let end = unsafe { sp.add(steps.len()) };
        while sp < end {
            // SAFETY: `sp` is in `steps` (below `end`); skip counts never
            // run past the last step (`build`), so `sp <= end` always.
            let st = unsafe { &*sp };
            // SAFETY: `sp < end`, so one step further is at most `end`.
            sp = unsafe { sp.add(1) };
            // SAFETY: every writer call below stays within the bound above;
            // literal and name sources are in `padded`, which holds 32
            // readable bytes past every literal.
            p = unsafe {
                match st.op {
                    Op::Lit { start, len } => raw::lit16(p, lits.add(start as usize), len as usize),
                    Op::Dec { off, size } => raw::dec(p, rp.rd(off, size)),
                    Op::Event { off, size } => raw::dec(p, map_event(renumber, rp.rd(off, size))),
                    Op::Ipv4 { off } => raw::ipv4(p, rp.ld::<u32>(off)),
                    Op::Dec1 { off } => raw::dec_u16(p, rp.ld::<u8>(off) as u16),
                    Op::Dec2 { off } => raw::dec_u16(p, rp.ld::<u16>(off)),
                    Op::Dec4 { off } => raw::dec(p, rp.ld::<u32>(off) as u64),
                    Op::Dec8 { off } => raw::dec(p, rp.ld::<u64>(off)),
                    Op::Ipv4Port { off, sep, off2 } => ipv4_port(p, rp, off, sep, off2),
                    Op::Ipv4Dec {
                        off,
                        sep,
                        off2,
                        size2,
                    } => {
                        let q = raw::ipv4(p, rp.ld::<u32>(off));
                        *q = sep;
                        raw::dec(q.add(1), rp.uint(off2, size2))
                    }
                    Op::Rfc3339 {
                        off,
                        cache,
                        digits,
                        tsc: is_tsc,
                    } => {
                        let ns = ns_of(&tsc, rp, off, is_tsc);
                        rfc3339[cache as usize].write_raw(p, ns, digits)
                    }
                    Op::Rfc3339Ms { off, cache } => {
                        rfc3339[cache as usize].write_raw(p, rp.ld::<u64>(off), 3)
                    }
                    Op::Unix {
                        off,
                        div,
                        tsc: is_tsc,
                    } => {
                        let ns = ns_of(&tsc, rp, off, is_tsc);
                        // Constant divisors become multiplications; a
                        // division by the runtime `div` would be a hardware
                        // divide.
                        let v = match div {
                            1_000_000 => ns / 1_000_000,
                            1 => ns,
                            1_000 => ns / 1_000,
                            1_000_000_000 => ns / 1_000_000_000,
                            d => ns / d as u64,
                        };
                        raw::dec(p, v)
                    }
                    Op::Name {
                        off,
                        size,
                        table,
                        event,
                    } => {
                        let mut v = rp.uint(off, size);
                        if event {
                            v = map_event(renumber, v);
                        }
                        name(p, lits, &names[table as usize], v)
                    }
                    Op::Bool { off } => {
                        let s: &[u8] = if rec[off as usize] != 0 {
                            b"true"
                        } else {
                            b"false"
                        };
                        std::ptr::copy_nonoverlapping(s.as_ptr(), p, s.len());
                        p.add(s.len())
                    }
                    Op::SkipUnless {
                        off,
                        size,
                        value,
                        skip,
                    } => {
                        if rp.rd(off, size) != value as u64 {
                            sp = sp.add(skip as usize);
                        }
                        p
                    }
                    // The rarer converters, out of line.
                    op @ (Op::Hex { .. }
                    | Op::Ipv6 { .. }
                    | Op::Mac { .. }
                    | Op::Rfc3164 { .. }
                    | Op::Str { .. }
                    | Op::Bytes { .. }) => {
                        let at = len0 + p.offset_from(base) as usize;
                        // The bytes up to `at` are written (initialised).
                        let end = rare(op, rec, rp, &tsc, tmp, rfc3164, out, at, max_out);
                        base = out.as_mut_ptr().add(len0);
                        out.as_mut_ptr().add(end)
                    }
                }
            };
            // The second half of a fused pair: the middle literal as one
            // 16-byte store, then the tail field.
            // SAFETY: as above (the middle's share is `mid_len`).
            unsafe {
                match st.tail {
                    Tail::None => {}
                    Tail::Ipv4Port { off, sep, off2 } => {
                        p.cast::<[u8; 16]>().write_unaligned(st.mid);
                        p = ipv4_port(p.add(st.mid_len as usize), rp, off, sep, off2);
                    }
                    Tail::Name {
                        off,
                        size,
                        table,
                        event,
                    } => {
                        p.cast::<[u8; 16]>().write_unaligned(st.mid);
                        let mut v = rp.uint(off, size);
                        if event {
                            v = map_event(renumber, v);
                        }
                        p = name(p.add(st.mid_len as usize), lits, &names[table as usize], v);
                    }
                }
            }
            // The suffix fused by `build`: always all 32 bytes of `post`
            // (two 16-byte stores, no loop); the bytes past `post_len`
            // are overwritten by the next write.
            // SAFETY: as above (32 bytes, within the writer's slack).
            p = unsafe {
                p.cast::<[u8; POST_MAX]>().write_unaligned(st.post);
                p.add(st.post_len as usize)
            };
        }
        // SAFETY: `p - base` bytes from `len0` were written above, within
        // the reserved capacity.
        unsafe { out.set_len(len0 + p.offset_from(base) as usize) };
        true
    }
}

/// Low-byte masks of 0..=8-byte integers (16 entries so that `size & 15`
/// indexes without a bounds check; 9..=15 never occur).
const MASKS: [u64; 16] = [
    0,
    0xff,
    0xffff,
    0xff_ffff,
    0xffff_ffff,
    0xff_ffff_ffff,
    0xffff_ffff_ffff,
    0xff_ffff_ffff_ffff,
    u64::MAX,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
];

/// Value `v` of a renumbered field.
#[inline(always)]
fn map_event(renumber: Renumber, v: u64) -> u64 {
    renumber.map(v)
}

/// The rarer converters (hex, IPv6, MAC, RFC 3164 time, escaped strings),
/// out of the hot loop: `op` is appended to `tmp`, `out` is cut to `at`
/// bytes, grown by `tmp` plus a fresh `max_out + SLACK` reserve (so their
/// output needs no bound) and `tmp` copied in; returns the new end index.
///
/// # Safety
/// `out`'s first `at` bytes must be initialised and `at <= out.capacity()`.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn rare(
    op: Op,
    rec: &[u8],
    rp: Rec,
    tsc: &TscCalibration,
    tmp: &mut Vec<u8>,
    rfc3164: &mut [Rfc3164Cache],
    out: &mut Vec<u8>,
    at: usize,
    max_out: usize,
) -> usize {
    tmp.clear();
    match op {
        Op::Hex { off, size } => push_hex(tmp, rp.rd(off, size)),
        Op::Ipv6 { off } => {
            let o = off as usize;
            let a: [u8; 16] = rec[o..o + 16].try_into().unwrap_or([0; 16]);
            push_ipv6(tmp, &a)
        }
        Op::Mac { off } => push_mac(tmp, &rec[off as usize..off as usize + 6]),
        Op::Rfc3164 {
            off,
            cache,
            tsc: is_tsc,
        } => {
            let ns = ns_of(tsc, rp, off, is_tsc);
            rfc3164[cache as usize].push(tmp, ns)
        }
        Op::Str { off, len, esc } => {
            push_escaped(tmp, &rec[off as usize..off as usize + len as usize], esc)
        }
        Op::Bytes { off, len, enc } => {
            let b = &rec[off as usize..off as usize + len as usize];
            match enc {
                BytesEncoding::Base64 => push_base64(tmp, b),
                _ => push_hex_bytes(tmp, b),
            }
        }
        _ => {}
    }
    // SAFETY: the caller guarantees `at` initialised bytes within capacity.
    unsafe { out.set_len(at) };
    out.reserve(tmp.len() + max_out + SLACK);
    out.extend_from_slice(tmp);
    at + tmp.len()
}

/// Writes an enum name from `t` (escaped, in `lits`), or `v` in decimal if
/// it has none, and returns the cursor past it.
///
/// # Safety
/// `p` writable for the name rounded up to 16 bytes, and for at least 32
/// (a name is one 32-byte copy) and 20 (a number) bytes; `lits` is the
/// padded literal pool `t` points into.
#[inline(always)]
unsafe fn name(p: *mut u8, lits: *const u8, t: &NameTable, v: u64) -> *mut u8 {
    let (start, len) = if v < 256 {
        t.dense[v as usize]
    } else {
        t.sparse
            .iter()
            .find(|e| e.0 as u64 == v)
            .map_or((0, 0), |e| (e.1, e.2))
    };
    // SAFETY: the caller's bounds; names lie in `lits` with 32 readable
    // bytes past each.
    unsafe {
        if len == 0 {
            raw::dec(p, v)
        } else {
            raw::lit32(p, lits.add(start as usize), len as usize)
        }
    }
}

/// Writes the IPv4 address at `off`, `sep` and the 2-byte port at `off2`
/// (`10.0.0.1:1234`) and returns the cursor past them (9 to 21 bytes).
///
/// # Safety
/// `p` writable for 22 bytes; `off`/`off2` fields of 4/2 bytes inside the
/// record (see [`Rec::ld`]).
#[inline(always)]
unsafe fn ipv4_port(p: *mut u8, rp: Rec, off: u32, sep: u8, off2: u32) -> *mut u8 {
    // SAFETY: ipv4 writes at most 16 bytes, then 1 + 5 more: 22 in all.
    unsafe {
        let q = raw::ipv4(p, rp.ld::<u32>(off));
        *q = sep;
        raw::dec_u16(q.add(1), rp.ld::<u16>(off2))
    }
}

/// A record being formatted: its start and the highest offset at which an
/// 8-byte load stays inside it (record length - 8).
#[derive(Clone, Copy)]
struct Rec {
    p: *const u8,
    hi: usize,
}

impl Rec {
    /// The `size`-byte host-order integer at `off`: one exact load for 1,
    /// 2, 4 and 8 bytes (the branch on `size` is predicted per step),
    /// [`Rec::rd`] otherwise.
    #[inline(always)]
    fn uint(self, off: u32, size: u8) -> u64 {
        // SAFETY: fields of `size` bytes lie inside the record (see `ld`).
        unsafe {
            match size {
                1 => self.ld::<u8>(off) as u64,
                2 => self.ld::<u16>(off) as u64,
                4 => self.ld::<u32>(off) as u64,
                8 => self.ld::<u64>(off),
                _ => self.rd(off, size),
            }
        }
    }

    /// The host-order `T` at `off`: one exact unaligned load.
    ///
    /// # Safety
    /// `off + size_of::<T>()` must be within the schema's record size (true
    /// for every field of the schema the program was built for, with `T`
    /// the field's size).
    #[inline(always)]
    unsafe fn ld<T: Copy>(self, off: u32) -> T {
        // SAFETY: the caller's bound; `Program::run` checked the record is
        // at least the schema's size; an unaligned read.
        unsafe { self.p.add(off as usize).cast::<T>().read_unaligned() }
    }

    /// The `size`-byte host-order integer at `off` (like [`read_uint`]):
    /// one unaligned 8-byte load at `min(off, hi)`, shifted and masked on
    /// little-endian targets.
    #[inline(always)]
    fn rd(self, off: u32, size: u8) -> u64 {
        let off = off as usize;
        if cfg!(target_endian = "little") && off <= self.hi {
            // SAFETY: `off + 8 <= hi + 8`, the record's length (`Rec` is
            // built by `Program::run` from a record of at least min_len
            // bytes, hi = min_len - 8); an unaligned read.
            let w = unsafe { self.p.add(off).cast::<u64>().read_unaligned() };
            return w & MASKS[size as usize & 15];
        }
        let at = off.min(self.hi);
        if cfg!(target_endian = "little") {
            // SAFETY: `at + 8 <= hi + 8`, the record's length (`Rec` is
            // built by `Program::run` from a record of at least min_len
            // bytes, hi = min_len - 8); an unaligned read.
            let w = unsafe { self.p.add(at).cast::<u64>().read_unaligned() };
            // off - at <= 8 - size (the field ends inside the record), so
            // the shift is below 64.
            (w >> ((off - at) * 8)) & MASKS[size as usize & 15]
        } else {
            // SAFETY: as above, `hi + 8` bytes are readable.
            let rec = unsafe { std::slice::from_raw_parts(self.p, self.hi + 8) };
            read_uint(rec, off, size as usize)
        }
    }
}

/// The nanosecond time of the 8-byte field at `off` (TSC ticks converted).
#[inline(always)]
fn ns_of(tsc: &TscCalibration, rec: Rec, off: u32, is_tsc: bool) -> u64 {
    // SAFETY: time fields are 8 bytes inside the record (the converter
    // only suits 8-byte timestamp kinds).
    let v = unsafe { rec.ld::<u64>(off) };
    if is_tsc {
        tsc.to_ns(v)
    } else {
        v
    }
}
