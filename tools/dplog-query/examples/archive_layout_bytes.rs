//! Measures what a segment's row order does to the archive's data
//! blocks, on an existing archive (the bytes of `benches/RESULTS.md`'s
//! "Bytes per event: what a key-sorted segment would hold").
//!
//! `archive_layout_bytes DIR [KEY_FIELD...]`: reads every record of the
//! archive `DIR` whose record type declares a lifecycle, slices them
//! into hours of event time (the sink's default segments), and encodes
//! each hour as data blocks of 16,384 rows with the archive's own block
//! encoder (zstd level 3) in three row orders, printing the bytes per
//! event of each and of its columns:
//!
//! - `time order`: as the sink writes them (the blocks of `DIR`);
//! - `key sorted`: the hour sorted by the `KEY_FIELD`s (default the NAT
//!   lookup's `postNATSourceIPv4Address postNAPTSourceTransportPort`),
//!   then time, encoded as they are;
//! - `key sorted, paired`: the same rows, where a row whose lifecycle
//!   keys equal the previous row's (a session's close after its open)
//!   is flagged (a 1-byte column, bit-packed) and stores only its own
//!   fields; the key fields of the other rows are one column (their
//!   values packed big-endian into a u64, non-decreasing in this order:
//!   `key`), the other lifecycle keys a column each of those rows.
//!
//! Nothing is written; memory is one hour of records. The key fields
//! must fit in 8 bytes together.

#![allow(missing_docs)] // an example's main

use std::path::Path;

use dplog_core::schema::Schema;
use dplog_sinks::archive::encode::Column;
use dplog_sinks::archive::format::{
    event_time, schema_columns, BlockEncoder, BLOCK_HEADER, COLUMN_ENTRY, DATA_HEADER,
};
use dplog_sinks::archive::ArchiveReader;

const HOUR_NS: u64 = 3_600_000_000_000;
const BLOCK_ROWS: usize = 16_384;

/// Bytes of one row order: whole frames, and stored bytes by name.
struct Tally {
    frames: u64,
    cols: Vec<(String, u64)>,
}

impl Tally {
    fn add(&mut self, name: &str, n: u64) {
        match self.cols.iter_mut().find(|(c, _)| c == name) {
            Some(c) => c.1 += n,
            None => self.cols.push((name.to_string(), n)),
        }
    }
}

/// The name of the field at `c` (or the gap it is).
fn col_name(s: &Schema, c: Column) -> String {
    s.fields()
        .iter()
        .find(|f| f.offset as usize == c.offset)
        .map(|f| f.name.to_string())
        .unwrap_or_else(|| format!("(gap at byte {})", c.offset))
}

/// Encodes `n` records `recs` of `s` as one frame of columns `cols`,
/// adding each column's stored bytes under `names` (or its field's).
#[allow(clippy::too_many_arguments)]
fn frame(
    enc: &mut BlockEncoder,
    s: &Schema,
    cols: &[Column],
    names: Option<&[&str]>,
    recs: &[u8],
    n: usize,
    t: &mut Tally,
) {
    if cols.is_empty() || n == 0 {
        return;
    }
    let f = enc
        .data_frame(s, cols, recs, n, 0, 0)
        .expect("zstd compresses");
    t.frames += f.len() as u64;
    for (k, &c) in cols.iter().enumerate() {
        let e = BLOCK_HEADER + DATA_HEADER + k * COLUMN_ENTRY;
        let stored = u32::from_le_bytes(f[e..e + 4].try_into().expect("4 bytes"));
        let name = names.map_or_else(|| col_name(s, c), |v| v[k].to_string());
        t.add(&name, u64::from(stored));
    }
}

struct Layout<'a> {
    s: &'a Schema,
    cols: Vec<Column>,
    key: Vec<usize>,
    /// Lifecycle keys that are not key fields.
    tuple: Vec<usize>,
    /// The event-time field's offset: the packed key's column.
    time_off: usize,
    /// The lifecycle field's offset: the flags' column.
    flag_off: usize,
}

impl Layout<'_> {
    fn sort(&self, recs: &mut [Vec<u8>]) {
        let s = self.s;
        recs.sort_by_key(|r| {
            let k: Vec<u64> = self
                .key
                .iter()
                .map(|&i| s.fields()[i].read_uint(r))
                .collect();
            (k, event_time(s, r))
        });
    }

    fn plain(&self, enc: &mut BlockEncoder, recs: &[Vec<u8>], t: &mut Tally) {
        for ch in recs.chunks(BLOCK_ROWS) {
            frame(enc, self.s, &self.cols, None, &ch.concat(), ch.len(), t);
        }
    }

    fn paired(&self, enc: &mut BlockEncoder, recs: &[Vec<u8>], t: &mut Tally) {
        let s = self.s;
        let f = s.fields();
        let lc = s.meta().lifecycle.as_ref().expect("a lifecycle");
        let col_at = |off: usize| {
            *self
                .cols
                .iter()
                .find(|c| c.offset == off)
                .expect("a column")
        };
        let tuple_offs: Vec<usize> = self.tuple.iter().map(|&i| f[i].offset as usize).collect();
        let key_offs: Vec<usize> = self.key.iter().map(|&i| f[i].offset as usize).collect();
        let every: Vec<Column> = self
            .cols
            .iter()
            .copied()
            .filter(|c| !tuple_offs.contains(&c.offset) && !key_offs.contains(&c.offset))
            .collect();
        let tuple_cols: Vec<Column> = tuple_offs.iter().map(|&o| col_at(o)).collect();
        for ch in recs.chunks(BLOCK_ROWS) {
            let (mut flags, mut fresh, mut keys) = (Vec::new(), Vec::new(), Vec::new());
            let mut nf = 0;
            for (i, r) in ch.iter().enumerate() {
                let same = i > 0
                    && lc
                        .keys
                        .iter()
                        .all(|&k| f[k].read_uint(r) == f[k].read_uint(&ch[i - 1]));
                let mut fl = r.clone();
                fl[self.flag_off..self.flag_off + f[lc.field].size as usize].fill(0);
                fl[self.flag_off] = u8::from(same);
                flags.extend_from_slice(&fl);
                if !same {
                    fresh.extend_from_slice(r);
                    let mut packed = 0u64;
                    for &k in &self.key {
                        packed = packed << (8 * f[k].size) | f[k].read_uint(r);
                    }
                    let mut kr = r.clone();
                    kr[self.time_off..self.time_off + 8].copy_from_slice(&packed.to_le_bytes());
                    keys.extend_from_slice(&kr);
                    nf += 1;
                }
            }
            let all = ch.concat();
            frame(enc, s, &every, None, &all, ch.len(), t);
            frame(
                enc,
                s,
                &[col_at(self.flag_off)],
                Some(&["flags"]),
                &flags,
                ch.len(),
                t,
            );
            frame(enc, s, &tuple_cols, None, &fresh, nf, t);
            frame(
                enc,
                s,
                &[col_at(self.time_off)],
                Some(&["key"]),
                &keys,
                nf,
                t,
            );
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 2 {
        eprintln!("usage: archive_layout_bytes DIR [KEY_FIELD...]");
        std::process::exit(2);
    }
    let key_names: Vec<String> = if args.len() > 2 {
        args[2..].to_vec()
    } else {
        vec![
            "postNATSourceIPv4Address".into(),
            "postNAPTSourceTransportPort".into(),
        ]
    };
    let mut reader = ArchiveReader::open(Path::new(&args[1])).expect("an archive");
    let schemas: Vec<Schema> = reader
        .schemas()
        .into_iter()
        .filter(|s| s.meta().lifecycle.is_some() && s.meta().event_time.is_some())
        .collect();
    let mut enc = BlockEncoder::new(3).expect("zstd level 3");
    for s in &schemas {
        let f = s.fields();
        let idx = |n: &str| f.iter().position(|x| x.name == n);
        let Some(key) = key_names
            .iter()
            .map(|n| idx(n))
            .collect::<Option<Vec<usize>>>()
        else {
            continue;
        };
        assert!(
            key.iter().map(|&i| f[i].size as usize).sum::<usize>() <= 8,
            "the key fields fit in 8 bytes"
        );
        let lc = s.meta().lifecycle.as_ref().expect("filtered");
        let time_field = &f[s.meta().event_time.expect("filtered")];
        assert_eq!(time_field.size, 8, "an 8-byte event time");
        let l = Layout {
            s,
            cols: schema_columns(s),
            tuple: lc
                .keys
                .iter()
                .copied()
                .filter(|k| !key.contains(k))
                .collect(),
            key,
            time_off: time_field.offset as usize,
            flag_off: f[lc.field].offset as usize,
        };
        let mut tallies: Vec<(&str, Tally)> = ["time order", "key sorted", "key sorted, paired"]
            .into_iter()
            .map(|n| {
                (
                    n,
                    Tally {
                        frames: 0,
                        cols: Vec::new(),
                    },
                )
            })
            .collect();
        let mut hour: Vec<Vec<u8>> = Vec::new();
        let mut cur = u64::MAX;
        let mut events = 0u64;
        let mut flush = |hour: &mut Vec<Vec<u8>>, t: &mut Vec<(&str, Tally)>| {
            l.plain(&mut enc, hour, &mut t[0].1);
            l.sort(hour);
            l.plain(&mut enc, hour, &mut t[1].1);
            l.paired(&mut enc, hour, &mut t[2].1);
            hour.clear();
        };
        reader
            .for_each(0, u64::MAX, |rs, r| {
                if rs.id() == s.id() {
                    let h = event_time(s, r).unwrap_or(0) / HOUR_NS;
                    if h != cur && !hour.is_empty() {
                        flush(&mut hour, &mut tallies);
                    }
                    cur = h;
                    hour.push(r.to_vec());
                    events += 1;
                }
                true
            })
            .expect("read");
        flush(&mut hour, &mut tallies);
        let n = events.max(1) as f64;
        println!("{} ({} records), B/event:", s.name(), events);
        for (name, t) in &tallies {
            let cols: Vec<String> = t
                .cols
                .iter()
                .filter(|(_, b)| *b as f64 / n >= 0.005)
                .map(|(c, b)| format!("{c} {:.2}", *b as f64 / n))
                .collect();
            println!(
                "  {name:<20} {:.3}: {}",
                t.frames as f64 / n,
                cols.join(", ")
            );
        }
    }
    if !reader.problems().is_empty() {
        eprintln!("{} damaged parts skipped", reader.problems().len());
    }
}
