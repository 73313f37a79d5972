//! Column encodings of the archive's data blocks.
//!
//! A block holds `n` records of one schema. Its record bytes are split
//! into columns: one per schema field, plus one per run of bytes no field
//! covers (the record header, padding), so the records are restored byte
//! for byte. A column of width 1, 2, 4 or 8 bytes is numeric (its bytes
//! read as a little-endian unsigned integer) and gets the smallest of:
//!
//! | tag | encoding | layout after the tag |
//! |---|---|---|
//! | 0 | constant | value u64 |
//! | 1 | frame of reference | min u64, bits u8, `n` packed `v - min` |
//! | 2 | delta | first u64, min delta i64, bits u8, `n - 1` packed `d - min` |
//! | 3 | delta of delta | first u64, first delta i64, min i64, bits u8, `n - 2` packed |
//! | 4 | dictionary | count u32, the sorted values as tag 1, index bits u8, `n` packed indexes |
//!
//! Differences are taken modulo 2^64 (wrapping), so every value of a
//! 64-bit column round-trips. Any other width is stored as byte planes
//! (tag 5: byte 0 of every record, then byte 1, ...). Packed values are
//! `bits` wide, least significant bit first, in 64-bit little-endian
//! words (the last word cut to the bytes it needs). Integers are
//! little-endian. The whole column buffer is then compressed (zstd) by the
//! block writer.

use std::io;

const CONST: u8 = 0;
const FOR: u8 = 1;
const DELTA: u8 = 2;
const DOD: u8 = 3;
const DICT: u8 = 4;
const PLANES: u8 = 5;

/// A column: `width` bytes at `offset` of each record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column {
    /// Byte offset in the record.
    pub offset: usize,
    /// Width in bytes.
    pub width: usize,
}

/// The columns of a record of `size` bytes whose fields cover the
/// `(offset, size)` ranges `fields` (in any order, not overlapping): the
/// fields and the gaps between them, in offset order.
pub fn columns(size: usize, fields: &[(usize, usize)]) -> Vec<Column> {
    let mut f: Vec<(usize, usize)> = fields.iter().copied().filter(|&(_, w)| w > 0).collect();
    f.sort_unstable();
    let mut out = Vec::new();
    let mut at = 0;
    for (off, w) in f {
        if off > at {
            out.push(Column {
                offset: at,
                width: off - at,
            });
        }
        if off >= at {
            out.push(Column {
                offset: off,
                width: w,
            });
            at = off + w;
        }
    }
    if at < size {
        out.push(Column {
            offset: at,
            width: size - at,
        });
    }
    out
}

fn is_numeric(width: usize) -> bool {
    matches!(width, 1 | 2 | 4 | 8)
}

fn bits_for(range: u64) -> u8 {
    (64 - range.leading_zeros()) as u8
}

fn packed_bytes(n: usize, bits: u8) -> usize {
    (n * bits as usize).div_ceil(8)
}

/// Appends `vals` packed `bits` wide.
fn pack(out: &mut Vec<u8>, vals: impl Iterator<Item = u64>, bits: u8, n: usize) {
    let need = packed_bytes(n, bits);
    if bits == 0 {
        return;
    }
    out.reserve(need);
    let start = out.len();
    if bits == 64 {
        for v in vals {
            out.extend_from_slice(&v.to_le_bytes());
        }
    } else {
        let bits = u32::from(bits);
        let mask = (1u64 << bits) - 1;
        let mut acc = 0u64;
        let mut have = 0u32;
        for v in vals {
            let v = v & mask;
            acc |= v << have;
            have += bits;
            if have >= 64 {
                out.extend_from_slice(&acc.to_le_bytes());
                have -= 64;
                // The high `have` bits of `v` did not fit.
                acc = if have > 0 { v >> (bits - have) } else { 0 };
            }
        }
        if have > 0 {
            out.extend_from_slice(&acc.to_le_bytes()[..(have as usize).div_ceil(8)]);
        }
    }
    debug_assert_eq!(out.len() - start, need);
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("bad column: {what}"))
}

/// A little-endian reader over a column buffer.
pub(crate) struct Cursor<'a> {
    pub(crate) b: &'a [u8],
    pub(crate) p: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        if self.b.len() - self.p < n {
            return Err(bad("ends early"));
        }
        let s = &self.b[self.p..self.p + n];
        self.p += n;
        Ok(s)
    }
    pub(crate) fn u8(&mut self) -> io::Result<u8> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn u32(&mut self) -> io::Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    pub(crate) fn u64(&mut self) -> io::Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn bits(&mut self) -> io::Result<u8> {
        let b = self.u8()?;
        if b > 64 {
            return Err(bad("bit width above 64"));
        }
        Ok(b)
    }
    /// `n` values packed `bits` wide, each passed to `f`.
    fn unpack(&mut self, n: usize, bits: u8, mut f: impl FnMut(u64)) -> io::Result<()> {
        let src = self.take(packed_bytes(n, bits))?;
        if bits == 0 {
            (0..n).for_each(|_| f(0));
            return Ok(());
        }
        let mask = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let mut bitpos = 0usize;
        for _ in 0..n {
            let byte = bitpos / 8;
            let shift = bitpos % 8;
            // Up to 9 bytes hold a 64-bit value at any bit offset; away
            // from the end a fixed 16-byte load, near it a copy.
            let w = match src.get(byte..byte + 16) {
                Some(s) => u128::from_le_bytes(s.try_into().expect("16 bytes")),
                None => {
                    let mut w = [0u8; 16];
                    w[..src.len() - byte].copy_from_slice(&src[byte..]);
                    u128::from_le_bytes(w)
                }
            };
            let v = (w >> shift) as u64 & mask;
            f(v);
            bitpos += bits as usize;
        }
        Ok(())
    }
}

/// Buffers [`encode_column_with`] reuses from column to column and block
/// to block, so encoding a block allocates nothing once they have grown
/// to the block's size.
#[derive(Debug, Default)]
pub struct ColumnScratch {
    vals: Vec<u64>,
    dict: Vec<u64>,
    table: ValueTable,
}

/// Slots of [`ValueTable`]: twice the largest dictionary.
const TABLE_SLOTS: usize = 8192;

/// An open-addressing map of up to [`TABLE_SLOTS`]` / 2` values to
/// their numbers, emptied in O(1) by a new generation.
#[derive(Debug, Default)]
struct ValueTable {
    keys: Vec<u64>,
    nums: Vec<u32>,
    stamp: Vec<u32>,
    gen: u32,
}

impl ValueTable {
    fn clear(&mut self) {
        if self.stamp.is_empty() {
            self.keys = vec![0; TABLE_SLOTS];
            self.nums = vec![0; TABLE_SLOTS];
            self.stamp = vec![0; TABLE_SLOTS];
        }
        self.gen = self.gen.wrapping_add(1);
        if self.gen == 0 {
            self.stamp.fill(0);
            self.gen = 1;
        }
    }

    /// The slot of `v`: where it is, or the empty one it would take.
    fn slot(&self, v: u64) -> usize {
        let mut i = (v.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 51) as usize;
        while self.stamp[i] == self.gen && self.keys[i] != v {
            i = (i + 1) % TABLE_SLOTS;
        }
        i
    }

    /// The distinct values of `vals` into `out` (in first-seen order),
    /// if there are at most `limit` (at most half the slots); `false`
    /// (`out` then partial) if there are more.
    fn distinct(&mut self, vals: &[u64], limit: usize, out: &mut Vec<u64>) -> bool {
        self.clear();
        for &v in vals {
            let i = self.slot(v);
            if self.stamp[i] != self.gen {
                if out.len() == limit {
                    return false;
                }
                out.push(v);
                self.stamp[i] = self.gen;
                self.keys[i] = v;
            }
        }
        true
    }

    /// Numbers the values of `dict` (distinct, at most half the slots).
    fn number(&mut self, dict: &[u64]) {
        self.clear();
        for (n, &v) in dict.iter().enumerate() {
            let i = self.slot(v);
            self.stamp[i] = self.gen;
            self.keys[i] = v;
            self.nums[i] = n as u32;
        }
    }

    /// The number of `v`, one of the values numbered.
    fn get(&self, v: u64) -> u64 {
        let i = self.slot(v);
        debug_assert_eq!(self.stamp[i], self.gen, "value is in its dictionary");
        u64::from(self.nums[i])
    }
}

/// [`encode_column_with`] from fresh buffers: the reference it is
/// tested against.
#[cfg(test)]
pub(crate) fn encode_column(out: &mut Vec<u8>, recs: &[u8], size: usize, n: usize, c: Column) {
    encode_column_with(&mut ColumnScratch::default(), out, recs, size, n, c);
}

/// The `n` values of numeric column `c` (width 1, 2, 4 or 8) into `vals`.
fn read_column(vals: &mut Vec<u64>, recs: &[u8], size: usize, n: usize, c: Column) {
    vals.clear();
    let rows = recs[..n * size].chunks_exact(size);
    let o = c.offset;
    match c.width {
        1 => vals.extend(rows.map(|r| u64::from(r[o]))),
        2 => vals.extend(rows.map(|r| u64::from(u16::from_le_bytes([r[o], r[o + 1]])))),
        4 => vals.extend(
            rows.map(|r| u64::from(u32::from_le_bytes(r[o..o + 4].try_into().expect("4 bytes")))),
        ),
        _ => {
            vals.extend(rows.map(|r| u64::from_le_bytes(r[o..o + 8].try_into().expect("8 bytes"))))
        }
    }
}

/// Appends column `c` of the `n` records in `recs` (each `size` bytes,
/// back to back), in the smallest encoding, with buffers kept in
/// `scratch` from column to column.
pub fn encode_column_with(
    scratch: &mut ColumnScratch,
    out: &mut Vec<u8>,
    recs: &[u8],
    size: usize,
    n: usize,
    c: Column,
) {
    if !is_numeric(c.width) || n == 0 {
        out.push(PLANES);
        let rows = &recs[..n * size];
        for b in 0..c.width {
            out.extend(rows.chunks_exact(size).map(|r| r[c.offset + b]));
        }
        return;
    }
    read_column(&mut scratch.vals, recs, size, n, c);
    let vals = &scratch.vals[..];
    // One pass for the frame, the deltas' frame and the delta of
    // deltas' frame (differences wrapping, as the decoder adds them).
    let (mut lo, mut hi) = (vals[0], vals[0]);
    let (mut dlo, mut dhi) = (i64::MAX, i64::MIN);
    let (mut ddlo, mut ddhi) = (i64::MAX, i64::MIN);
    let mut prev_d = 0i64;
    for i in 1..n {
        let v = vals[i];
        lo = lo.min(v);
        hi = hi.max(v);
        let d = v.wrapping_sub(vals[i - 1]) as i64;
        dlo = dlo.min(d);
        dhi = dhi.max(d);
        if i >= 2 {
            let dd = d.wrapping_sub(prev_d);
            ddlo = ddlo.min(dd);
            ddhi = ddhi.max(dd);
        }
        prev_d = d;
    }
    if lo == hi {
        out.push(CONST);
        out.extend_from_slice(&lo.to_le_bytes());
        return;
    }
    // Frame of `[a, b]` (none: `(0, 0)`).
    let frame = |a: i64, b: i64| -> (i64, u8) {
        if a > b {
            return (0, 0);
        }
        (
            a,
            bits_for((b as i128 - a as i128).min(u64::MAX as i128) as u64),
        )
    };
    let for_bits = bits_for(hi - lo);
    let mut best = (FOR, 9 + packed_bytes(n, for_bits));
    // n >= 2 here: one value is a constant.
    let (dmin, dbits) = frame(dlo, dhi);
    let dsize = 17 + packed_bytes(n - 1, dbits);
    if dsize < best.1 {
        best = (DELTA, dsize);
    }
    let (ddmin, ddbits) = frame(ddlo, ddhi);
    let ddsize = 25 + packed_bytes(n - 2, ddbits);
    if ddsize < best.1 {
        best = (DOD, ddsize);
    }
    // A dictionary pays when there are few distinct values far apart:
    // tried only for wide frames whose first 1024 values hold few
    // distinct ones (sorting a whole column per block costs more than
    // the rest of its encoding).
    let dict = &mut scratch.dict;
    dict.clear();
    if for_bits > 8 && best.1 > 9 + packed_bytes(n, 8) {
        let few = scratch.table.distinct(&vals[..n.min(1024)], 256, dict);
        dict.clear();
        // More than 4096 distinct values take no dictionary.
        if !few || !scratch.table.distinct(vals, 4096, dict) {
            dict.clear();
        }
        dict.sort_unstable();
    }
    if !dict.is_empty() && dict.len() <= 4096 {
        let ibits = bits_for(dict.len() as u64 - 1);
        let size = 4 + 9 + packed_bytes(dict.len(), for_bits) + 1 + packed_bytes(n, ibits);
        if size < best.1 {
            best = (DICT, size);
        }
    }
    out.push(best.0);
    match best.0 {
        FOR => {
            out.extend_from_slice(&lo.to_le_bytes());
            out.push(for_bits);
            pack(out, vals.iter().map(|v| v - lo), for_bits, n);
        }
        DELTA => {
            out.extend_from_slice(&vals[0].to_le_bytes());
            out.extend_from_slice(&dmin.to_le_bytes());
            out.push(dbits);
            pack(
                out,
                vals.windows(2)
                    .map(|w| (w[1].wrapping_sub(w[0]) as i64).wrapping_sub(dmin) as u64),
                dbits,
                n - 1,
            );
        }
        DOD => {
            let d0 = vals[1].wrapping_sub(vals[0]) as i64;
            out.extend_from_slice(&vals[0].to_le_bytes());
            out.extend_from_slice(&d0.to_le_bytes());
            out.extend_from_slice(&ddmin.to_le_bytes());
            out.push(ddbits);
            pack(
                out,
                vals.windows(3).map(|w| {
                    let d1 = w[1].wrapping_sub(w[0]) as i64;
                    let d2 = w[2].wrapping_sub(w[1]) as i64;
                    d2.wrapping_sub(d1).wrapping_sub(ddmin) as u64
                }),
                ddbits,
                n - 2,
            );
        }
        _ => {
            out.extend_from_slice(&(dict.len() as u32).to_le_bytes());
            out.extend_from_slice(&lo.to_le_bytes());
            out.push(for_bits);
            pack(out, dict.iter().map(|v| v - lo), for_bits, dict.len());
            let ibits = bits_for(dict.len() as u64 - 1);
            out.push(ibits);
            let table = &mut scratch.table;
            table.number(dict);
            pack(out, vals.iter().map(|&v| table.get(v)), ibits, n);
        }
    }
}

/// Decodes column `c` of `n` records from `cur` into `recs` (`n * size`
/// bytes, each record's column bytes overwritten).
///
/// Errors: `InvalidData` for an unknown tag, a bit width above 64, a
/// column that ends early or a dictionary index out of range.
pub(crate) fn decode_column(
    cur: &mut Cursor<'_>,
    recs: &mut [u8],
    size: usize,
    n: usize,
    c: Column,
) -> io::Result<()> {
    let tag = cur.u8()?;
    let w = c.width;
    // A fixed-size store per width (no length-generic copy per value).
    let mut put = |i: usize, v: u64| {
        let at = i * size + c.offset;
        match w {
            1 => recs[at] = v as u8,
            2 => recs[at..at + 2].copy_from_slice(&(v as u16).to_le_bytes()),
            4 => recs[at..at + 4].copy_from_slice(&(v as u32).to_le_bytes()),
            _ => recs[at..at + 8].copy_from_slice(&v.to_le_bytes()),
        }
    };
    if tag == PLANES {
        let src = cur.take(n * w)?;
        for b in 0..w {
            for i in 0..n {
                recs[i * size + c.offset + b] = src[b * n + i];
            }
        }
        return Ok(());
    }
    if !is_numeric(w) {
        return Err(bad("numeric encoding of a non-numeric column"));
    }
    match tag {
        CONST => {
            let v = cur.u64()?;
            (0..n).for_each(|i| put(i, v));
        }
        FOR => {
            let lo = cur.u64()?;
            let bits = cur.bits()?;
            let mut i = 0;
            cur.unpack(n, bits, |x| {
                put(i, lo.wrapping_add(x));
                i += 1;
            })?;
        }
        DELTA => {
            let mut v = cur.u64()?;
            let dmin = cur.u64()?;
            let bits = cur.bits()?;
            if n > 0 {
                put(0, v);
            }
            let mut i = 1;
            cur.unpack(n.saturating_sub(1), bits, |x| {
                v = v.wrapping_add(dmin.wrapping_add(x));
                put(i, v);
                i += 1;
            })?;
        }
        DOD => {
            let mut v = cur.u64()?;
            let mut d = cur.u64()?;
            let ddmin = cur.u64()?;
            let bits = cur.bits()?;
            if n > 0 {
                put(0, v);
            }
            if n > 1 {
                v = v.wrapping_add(d);
                put(1, v);
            }
            let mut i = 2;
            cur.unpack(n.saturating_sub(2), bits, |x| {
                d = d.wrapping_add(ddmin.wrapping_add(x));
                v = v.wrapping_add(d);
                put(i, v);
                i += 1;
            })?;
        }
        DICT => {
            let count = cur.u32()? as usize;
            if count == 0 || count > n.max(1) {
                return Err(bad("dictionary size"));
            }
            let lo = cur.u64()?;
            let bits = cur.bits()?;
            let mut dict = Vec::with_capacity(count);
            cur.unpack(count, bits, |x| dict.push(lo.wrapping_add(x)))?;
            let ibits = cur.bits()?;
            let mut i = 0;
            let mut oob = false;
            cur.unpack(n, ibits, |x| {
                match dict.get(x as usize) {
                    Some(&v) => put(i, v),
                    None => oob = true,
                }
                i += 1;
            })?;
            if oob {
                return Err(bad("dictionary index out of range"));
            }
        }
        t => return Err(bad(&format!("unknown encoding tag {t}"))),
    }
    Ok(())
}

/// The value packed `bits` wide (`mask` its low bits) at bit `bitpos` of
/// `src`.
fn bits_at(src: &[u8], bitpos: usize, mask: u64) -> u64 {
    let byte = bitpos / 8;
    let w = match src.get(byte..byte + 16) {
        Some(s) => u128::from_le_bytes(s.try_into().expect("16 bytes")),
        None => {
            let mut w = [0u8; 16];
            let end = src.len().min(byte + 16);
            w[..end - byte].copy_from_slice(&src[byte..end]);
            u128::from_le_bytes(w)
        }
    };
    (w >> (bitpos % 8)) as u64 & mask
}

/// A dictionary column's header, read up to its packed indexes: the
/// dictionary's size, the index of `target` among its values (each
/// masked by `mask`), if there, and the indexes' bit width.
fn dict_lookup(
    cur: &mut Cursor<'_>,
    n: usize,
    mask: u64,
    target: u64,
) -> io::Result<(usize, Option<u64>, u8)> {
    let count = cur.u32()? as usize;
    if count == 0 || count > n.max(1) {
        return Err(bad("dictionary size"));
    }
    let lo = cur.u64()?;
    let bits = cur.bits()?;
    let mut at = None;
    let mut k = 0u64;
    cur.unpack(count, bits, |x| {
        if lo.wrapping_add(x) & mask == target && at.is_none() {
            at = Some(k);
        }
        k += 1;
    })?;
    Ok((count, at, cur.bits()?))
}

/// [`rows_equal`] among the rows `among` (ascending) only: a frame of
/// reference, dictionary, constant or byte-plane column is read at those
/// rows alone (a delta column is decoded whole). `cur` ends after the
/// column either way.
///
/// Errors: as [`decode_column`].
pub(crate) fn rows_equal_among(
    cur: &mut Cursor<'_>,
    n: usize,
    c: Column,
    value: &[u8],
    among: &[u32],
) -> io::Result<Vec<u32>> {
    let w = c.width;
    if value.len() != w || among.last().is_some_and(|&r| r as usize >= n) {
        return Err(bad(
            "value of another width than its column, or a row past the end",
        ));
    }
    let tag = cur.u8()?;
    if tag == PLANES {
        let src = cur.take(n * w)?;
        return Ok(among
            .iter()
            .copied()
            .filter(|&i| (0..w).all(|b| src[b * n + i as usize] == value[b]))
            .collect());
    }
    if !is_numeric(w) {
        return Err(bad("numeric encoding of a non-numeric column"));
    }
    let mut le = [0u8; 8];
    le[..w].copy_from_slice(value);
    let target = u64::from_le_bytes(le);
    let vmask = if w == 8 {
        u64::MAX
    } else {
        (1u64 << (8 * w)) - 1
    };
    let bmask = |bits: u8| {
        if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        }
    };
    match tag {
        CONST => Ok(if cur.u64()? & vmask == target {
            among.to_vec()
        } else {
            Vec::new()
        }),
        FOR => {
            let lo = cur.u64()?;
            let bits = cur.bits()?;
            let src = cur.take(packed_bytes(n, bits))?;
            let x = target.wrapping_sub(lo);
            if bits < 64 && x >> bits != 0 {
                return Ok(Vec::new());
            }
            let m = bmask(bits);
            Ok(among
                .iter()
                .copied()
                .filter(|&r| bits_at(src, r as usize * bits as usize, m) == x)
                .collect())
        }
        DICT => {
            let (count, at, ibits) = dict_lookup(cur, n, vmask, target)?;
            let src = cur.take(packed_bytes(n, ibits))?;
            let Some(idx) = at else {
                return Ok(Vec::new());
            };
            let m = bmask(ibits);
            let mut out = Vec::new();
            for &r in among {
                let x = bits_at(src, r as usize * ibits as usize, m);
                if x >= count as u64 {
                    return Err(bad("dictionary index out of range"));
                }
                if x == idx {
                    out.push(r);
                }
            }
            Ok(out)
        }
        _ => {
            cur.p -= 1;
            let all = rows_equal(cur, n, c, value)?;
            Ok(among
                .iter()
                .copied()
                .filter(|r| all.binary_search(r).is_ok())
                .collect())
        }
    }
}

/// The rows (ascending) of column `c` of `n` records in `cur` whose
/// bytes are `value` (`c.width` bytes), without decoding the others where
/// the encoding tells: a constant or a dictionary without the value, or
/// a frame of reference whose range excludes it, answers without
/// unpacking; a dictionary compares indexes, not values.
///
/// Errors: as [`decode_column`].
pub(crate) fn rows_equal(
    cur: &mut Cursor<'_>,
    n: usize,
    c: Column,
    value: &[u8],
) -> io::Result<Vec<u32>> {
    let w = c.width;
    if value.len() != w {
        return Err(bad("value of another width than its column"));
    }
    let tag = cur.u8()?;
    let mut out = Vec::new();
    if tag == PLANES {
        let src = cur.take(n * w)?;
        out.extend(
            (0..n)
                .filter(|&i| (0..w).all(|b| src[b * n + i] == value[b]))
                .map(|i| i as u32),
        );
        return Ok(out);
    }
    if !is_numeric(w) {
        return Err(bad("numeric encoding of a non-numeric column"));
    }
    let mut le = [0u8; 8];
    le[..w].copy_from_slice(value);
    let target = u64::from_le_bytes(le);
    // Values are stored as their low `w` bytes: compare those.
    let mask = if w == 8 {
        u64::MAX
    } else {
        (1u64 << (8 * w)) - 1
    };
    let mut i = 0u32;
    match tag {
        CONST => {
            if cur.u64()? & mask == target {
                out.extend(0..n as u32);
            }
        }
        FOR => {
            let lo = cur.u64()?;
            let bits = cur.bits()?;
            let x = target.wrapping_sub(lo);
            if bits < 64 && x >> bits != 0 {
                cur.take(packed_bytes(n, bits))?;
            } else {
                cur.unpack(n, bits, |v| {
                    if v == x {
                        out.push(i);
                    }
                    i += 1;
                })?;
            }
        }
        DICT => {
            let (count, at, ibits) = dict_lookup(cur, n, mask, target)?;
            match at {
                None => {
                    cur.take(packed_bytes(n, ibits))?;
                }
                Some(idx) => {
                    let mut oob = false;
                    cur.unpack(n, ibits, |x| {
                        oob |= x >= count as u64;
                        if x == idx {
                            out.push(i);
                        }
                        i += 1;
                    })?;
                    if oob {
                        return Err(bad("dictionary index out of range"));
                    }
                }
            }
        }
        DELTA | DOD => {
            // Each value from the one before: decode, then compare.
            cur.p -= 1;
            let mut vals = vec![0u8; n * w];
            decode_column(
                cur,
                &mut vals,
                w,
                n,
                Column {
                    offset: 0,
                    width: w,
                },
            )?;
            out.extend(
                vals.chunks_exact(w)
                    .enumerate()
                    .filter(|(_, v)| *v == value)
                    .map(|(r, _)| r as u32),
            );
        }
        t => return Err(bad(&format!("unknown encoding tag {t}"))),
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(size: usize, cols: &[Column], recs: &[u8]) {
        let n = recs.len() / size;
        let mut buf = Vec::new();
        for &c in cols {
            encode_column(&mut buf, recs, size, n, c);
        }
        let mut back = vec![0xAAu8; recs.len()];
        let mut cur = Cursor { b: &buf, p: 0 };
        for &c in cols {
            decode_column(&mut cur, &mut back, size, n, c).unwrap();
        }
        assert_eq!(cur.p, buf.len());
        assert_eq!(back, recs);
        // Each column's rows of each value it holds (and of values it
        // does not hold) are those a decode finds, and the cursor ends
        // where the column does.
        let mut cur = Cursor { b: &buf, p: 0 };
        for &c in cols {
            let start = cur.p;
            let val = |r: usize| &recs[r * size + c.offset..r * size + c.offset + c.width];
            let mut probes: Vec<Vec<u8>> = (0..n.min(40)).map(|r| val(r).to_vec()).collect();
            probes.push(vec![0x5A; c.width]);
            probes.push(vec![0; c.width]);
            let mut end = None;
            for v in &probes {
                cur.p = start;
                let got = rows_equal(&mut cur, n, c, v).unwrap();
                let among: Vec<u32> = (0..n as u32).filter(|r| r % 3 != 1).collect();
                let end_all = cur.p;
                cur.p = start;
                let some = rows_equal_among(&mut cur, n, c, v, &among).unwrap();
                assert_eq!(cur.p, end_all, "column {c:?} ends");
                let want_some: Vec<u32> = got.iter().copied().filter(|r| r % 3 != 1).collect();
                assert_eq!(some, want_some, "column {c:?}, value {v:?}, among");
                cur.p = end_all;
                let want: Vec<u32> = (0..n)
                    .filter(|&r| val(r) == v.as_slice())
                    .map(|r| r as u32)
                    .collect();
                assert_eq!(got, want, "column {c:?}, value {v:?}");
                assert_eq!(*end.get_or_insert(cur.p), cur.p, "column {c:?} ends");
            }
        }
        assert_eq!(cur.p, buf.len());
    }

    #[test]
    fn columns_cover_fields_and_gaps() {
        let c = columns(16, &[(8, 4), (2, 2)]);
        let got: Vec<(usize, usize)> = c.iter().map(|c| (c.offset, c.width)).collect();
        assert_eq!(got, vec![(0, 2), (2, 2), (4, 4), (8, 4), (12, 4)]);
    }

    #[test]
    fn every_encoding_round_trips() {
        // Record: u64 time (increasing), u32 addr (few values), u16 port
        // (random), u8 const, 3-byte raw, u64 extremes.
        let size = 8 + 4 + 2 + 1 + 3 + 8;
        let cols = columns(size, &[(0, 8), (8, 4), (12, 2), (14, 1), (15, 3), (18, 8)]);
        let mut x: u64 = 12345;
        for n in [1usize, 2, 3, 17, 1000] {
            let mut recs = Vec::new();
            for i in 0..n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                recs.extend_from_slice(
                    &(1_700_000_000_000_000_000u64 + i as u64 * 1000 + x % 7).to_le_bytes(),
                );
                recs.extend_from_slice(&(0xC6336400u32 + (x % 5) as u32).to_le_bytes());
                recs.extend_from_slice(&(x as u16).to_le_bytes());
                recs.push(6);
                recs.extend_from_slice(&[x as u8, 0, 1]);
                recs.extend_from_slice(&(if i % 2 == 0 { u64::MAX } else { x }).to_le_bytes());
            }
            roundtrip(size, &cols, &recs);
        }
    }

    #[test]
    fn few_distinct_values_far_apart_take_a_dictionary() {
        let vals = [7u32, 0x7000_0000, 0xFFFF_FFF0];
        let recs: Vec<u8> = (0..500)
            .flat_map(|i| vals[i * 7 % 3].to_le_bytes())
            .collect();
        let c = Column {
            offset: 0,
            width: 4,
        };
        let mut buf = Vec::new();
        encode_column(&mut buf, &recs, 4, 500, c);
        assert_eq!(buf[0], DICT);
        assert!(buf.len() < 200, "{} bytes", buf.len());
        roundtrip(4, &[c], &recs);
    }

    #[test]
    fn a_short_or_bad_column_is_an_error() {
        let mut back = vec![0u8; 16];
        let c = Column {
            offset: 0,
            width: 8,
        };
        assert!(decode_column(&mut Cursor { b: &[9], p: 0 }, &mut back, 8, 2, c).is_err());
        assert!(decode_column(
            &mut Cursor {
                b: &[FOR, 0, 0],
                p: 0
            },
            &mut back,
            8,
            2,
            c
        )
        .is_err());
    }
}
