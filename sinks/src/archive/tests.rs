use super::*;

/// The index as built from one array: every pair sorted, repeats
/// dropped, hashes cut, then [`format::index_pages`].
fn reference(pairs: &[(u32, u32)], at: u64) -> (Vec<format::IndexPage>, Vec<u8>, u8) {
    let mut p = pairs.to_vec();
    p.sort_unstable();
    p.dedup();
    let bits = format::index_bits_for(p.len());
    for x in p.iter_mut() {
        x.0 >>= 32 - u32::from(bits);
    }
    let mut dir = Vec::new();
    let mut bytes = Vec::new();
    for (first, page) in format::index_pages(&mut p) {
        dir.push(format::IndexPage {
            first,
            offset: at + bytes.len() as u64,
            len: page.len() as u32,
            crc: crc32fast::hash(&page),
        });
        bytes.extend_from_slice(&page);
    }
    (dir, bytes, bits)
}

#[test]
fn bucketed_pairs_make_the_index_of_one_sorted_array() {
    let mut x = 99u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // Few pairs (hashes cut to 16 bits: many become equal), a
    // page and a half, many pages; repeats within and across blocks.
    // Buckets of 64 pairs and more are radix sorted: in block order
    // as the writer pushes them, and out of it.
    for (n, blocks, backwards) in [
        (0usize, 1u64, false),
        (1, 1, false),
        (700, 40, false),
        (6000, 3, false),
        (200_000, 500, false),
        (600_000, 1500, false),
        (600_000, 1500, true),
    ] {
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        let mut kp = KeyPairs::default();
        for i in 0..n {
            let h = if i % 5 == 0 && i > 0 {
                pairs[i / 2].0
            } else {
                next() as u32
            };
            let mut b = (i as u64 * blocks / n as u64) as u32;
            if backwards {
                b = blocks as u32 - 1 - b;
            }
            pairs.push((h, b));
            kp.push(h, b);
        }
        let want = reference(&pairs, 4096);
        assert_eq!(index_tail(&mut kp, 4096), want, "{n} pairs");
        // Sealing again (after a failed write) gives the same index.
        assert_eq!(index_tail(&mut kp, 4096), want, "{n} pairs again");
        let back: Vec<(u32, u32)> = want
            .0
            .iter()
            .flat_map(|p| {
                let at = (p.offset - 4096) as usize;
                format::parse_index_page(&want.1[at..at + p.len as usize]).unwrap()
            })
            .collect();
        let mut cut: Vec<(u32, u32)> = pairs
            .iter()
            .map(|&(h, b)| (h >> (32 - u32::from(want.2)), b))
            .collect();
        cut.sort_unstable();
        cut.dedup();
        assert_eq!(back, cut);
    }
}
