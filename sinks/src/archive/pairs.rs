//! The key index of a segment being written: its (key hash, block)
//! pairs, kept in buckets by hash as blocks are written (and as the
//! recovery reads them), and the index pages the seal cuts from them
//! ([`format::index_page`]).

use super::format;

/// Top hash bits that pick a [`KeyPairs`] bucket.
const BUCKET_BITS: u32 = 10;

/// The (key hash, block index) pairs of a segment, kept in buckets by the
/// hash's top [`BUCKET_BITS`] bits as they arrive, each pair packed as
/// `hash << 32 | block`: sealing sorts buckets that fit in a cache, not
/// one array the size of the segment's index.
#[derive(Debug, Default)]
pub(super) struct KeyPairs {
    buckets: Vec<Vec<u64>>,
}

impl KeyPairs {
    pub(super) fn push(&mut self, hash: u32, block: u32) {
        if self.buckets.is_empty() {
            self.buckets.resize_with(1 << BUCKET_BITS, Vec::new);
        }
        self.buckets[(hash >> (32 - BUCKET_BITS)) as usize]
            .push(u64::from(hash) << 32 | u64::from(block));
    }

    /// Sorts every bucket and drops its duplicates; returns the pairs
    /// left. The pairs stay the same set, so a seal that fails can run
    /// this again.
    pub(super) fn sort(&mut self) -> usize {
        let mut n = 0;
        let mut tmp = Vec::new();
        for b in &mut self.buckets {
            sort_bucket(b, &mut tmp);
            b.dedup();
            n += b.len();
        }
        n
    }

    /// The pairs, sorted by hash then block (after [`KeyPairs::sort`]).
    pub(super) fn iter(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.buckets
            .iter()
            .flatten()
            .map(|&p| ((p >> 32) as u32, p as u32))
    }
}

/// The key index pages of `pairs` (full 32-bit hashes) placed from byte
/// `at` on: their directory, their bytes and the hash bits kept.
pub(super) fn index_tail(pairs: &mut KeyPairs, at: u64) -> (Vec<format::IndexPage>, Vec<u8>, u8) {
    let bits = format::index_bits_for(pairs.sort());
    let shift = 32 - u32::from(bits);
    let mut out = Pages {
        dir: Vec::new(),
        bytes: Vec::new(),
        page: Vec::with_capacity(format::PAGE_PAIRS),
        at,
    };
    // Cut hashes keep their order, but the blocks of hashes that become
    // equal need sorting again, and their repeats dropping.
    let mut run: Vec<u32> = Vec::new();
    let mut run_hash = 0;
    for (h, blk) in pairs.iter() {
        let h = h >> shift;
        if h != run_hash && !run.is_empty() {
            out.run(run_hash, &mut run);
        }
        run_hash = h;
        run.push(blk);
    }
    if !run.is_empty() {
        out.run(run_hash, &mut run);
    }
    out.flush();
    (out.dir, out.bytes, bits)
}

/// Sorts the packed pairs of one bucket: a stable radix sort on the
/// hash bits below the bucket's, which leaves them sorted whole when
/// they were pushed in block order (as the writer and the recovery push
/// them); any other order is sorted again by comparison.
fn sort_bucket(b: &mut Vec<u64>, tmp: &mut Vec<u64>) {
    const DIGIT: u32 = 11;
    if b.len() < 64 {
        b.sort_unstable();
        return;
    }
    for pass in 0..(32 - BUCKET_BITS).div_ceil(DIGIT) {
        let shift = 32 + pass * DIGIT;
        let digit = |p: u64| ((p >> shift) & ((1 << DIGIT) - 1)) as usize;
        let mut at = [0usize; 1 << DIGIT];
        for &p in b.iter() {
            at[digit(p)] += 1;
        }
        let mut sum = 0;
        for a in at.iter_mut() {
            let c = *a;
            *a = sum;
            sum += c;
        }
        tmp.clear();
        tmp.resize(b.len(), 0);
        for &p in b.iter() {
            let d = digit(p);
            tmp[at[d]] = p;
            at[d] += 1;
        }
        std::mem::swap(b, tmp);
    }
    if !b.windows(2).all(|w| w[0] <= w[1]) {
        b.sort_unstable();
    }
}

/// Index pages being cut from sorted pairs.
struct Pages {
    dir: Vec<format::IndexPage>,
    bytes: Vec<u8>,
    page: Vec<(u32, u32)>,
    at: u64,
}

impl Pages {
    /// The pairs of hash `h` and `blocks` (emptied).
    fn run(&mut self, h: u32, blocks: &mut Vec<u32>) {
        if blocks.len() > 1 {
            blocks.sort_unstable();
            blocks.dedup();
        }
        for &b in blocks.iter() {
            self.page.push((h, b));
            if self.page.len() == format::PAGE_PAIRS {
                self.flush();
            }
        }
        blocks.clear();
    }

    fn flush(&mut self) {
        if self.page.is_empty() {
            return;
        }
        let page = format::index_page(&self.page);
        self.dir.push(format::IndexPage {
            first: self.page[0].0,
            offset: self.at + self.bytes.len() as u64,
            len: page.len() as u32,
            crc: crc32fast::hash(&page),
        });
        self.bytes.extend_from_slice(&page);
        self.page.clear();
    }
}
