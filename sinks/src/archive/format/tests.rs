//! Tests of the archive's format: names, frames, blocks, key hashes.

use super::*;

#[test]
fn names_round_trip() {
    assert_eq!(
        parse_name(&sealed_name(7, 1, u64::MAX)),
        Some((7, Some((1, u64::MAX))))
    );
    assert_eq!(parse_name(&open_name(42)), Some((42, None)));
    assert_eq!(parse_name("seg-1-2-3.dpa"), None);
    assert_eq!(parse_name(".seg-00000000x1.dpa.open"), None);
}

#[test]
fn index_pages_round_trip() {
    let mut pairs: Vec<(u32, u32)> = (0..10_000u32)
        .map(|i| (key_hash32(&i.to_le_bytes()), i / 100))
        .collect();
    pairs.push(pairs[5]);
    let pages = index_pages(&mut pairs);
    assert_eq!(pages.len(), 3);
    let mut back = Vec::new();
    for (first, p) in &pages {
        let v = parse_index_page(p).unwrap();
        assert_eq!(v[0].0, *first);
        back.extend(v);
    }
    assert_eq!(back, pairs);
    assert!(parse_index_page(&pages[0].1[..100]).is_err());
    let mut long = pages[0].1.clone();
    long.push(0);
    assert!(parse_index_page(&long).is_err());
    // Sparse and repeated hashes, far-apart blocks, one pair.
    for mut pairs in [
        vec![
            (0, 0),
            (0, 7),
            (5, 1 << 20),
            (u32::MAX - 1, 3),
            (u32::MAX, u32::MAX),
        ],
        vec![(12345, 9)],
        (0..300u32).map(|i| (i * 7, i % 3)).collect(),
    ] {
        let want = {
            let mut w = pairs.clone();
            w.sort_unstable();
            w.dedup();
            w
        };
        let pages = index_pages(&mut pairs);
        let back: Vec<(u32, u32)> = pages
            .iter()
            .flat_map(|(_, p)| parse_index_page(p).unwrap())
            .collect();
        assert_eq!(back, want);
    }
}

#[test]
fn the_block_encoder_writes_the_frames_of_data_body() {
    use dplog_core::schema::FieldKind;
    let s = Schema::new(
        301,
        "t",
        40,
        vec![
            FieldDef::new("time", 8, 8, FieldKind::NsTimestamp, 0),
            FieldDef::new("addr", 16, 4, FieldKind::Ipv4, 0),
            FieldDef::new("port", 20, 2, FieldKind::Port, 0),
            FieldDef::new("tag", 22, 3, FieldKind::Bytes, 0),
            FieldDef::new("big", 32, 8, FieldKind::U64, 0),
        ],
    )
    .unwrap();
    let cols = schema_columns(&s);
    let mut enc = BlockEncoder::new(3).unwrap();
    let mut x = 7u64;
    // Blocks of several sizes through one encoder: its buffers kept
    // from a larger block change nothing in a smaller one.
    for n in [1000usize, 3, 1, 2, 517] {
        let mut recs = Vec::new();
        for i in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut r = [0u8; 40];
            r[8..16].copy_from_slice(&(1_000_000 + i as u64 * 10 + x % 3).to_le_bytes());
            r[16..20].copy_from_slice(&[198, 51, 100, (x % 4) as u8]);
            r[20..22].copy_from_slice(&(x as u16).to_le_bytes());
            r[22..25].copy_from_slice(&[1, 2, (x >> 20) as u8]);
            let big = [7, 1 << 40, u64::MAX][(x % 3) as usize];
            r[32..40].copy_from_slice(&big.to_le_bytes());
            recs.extend_from_slice(&r);
        }
        let want = block_frame(KIND_DATA, &data_body(&s, &cols, &recs, n, 5, 9, 3).unwrap());
        let got = enc.data_frame(&s, &cols, &recs, n, 5, 9).unwrap();
        assert_eq!(got, want, "{n} rows");
        let h = frame_header(&got).unwrap();
        h.check(&got[BLOCK_HEADER..]).unwrap();
        let (dh, back) = decode_data(&s, &got[BLOCK_HEADER..], VERSION).unwrap();
        assert_eq!((dh.rows as usize, dh.min, dh.max), (n, 5, 9));
        assert_eq!(back, recs);
    }
}

#[test]
fn a_record_key_hashes_as_its_key_bytes() {
    let a = FieldDef::new("a", 8, 4, dplog_core::schema::FieldKind::Ipv4, 0);
    let p = FieldDef::new("p", 14, 2, dplog_core::schema::FieldKind::Port, 0);
    let rec: Vec<u8> = (0..32u8).collect();
    let f = [&a, &p];
    assert_eq!(record_key_hash32(&f, &rec), key_hash32(&key_of(&f, &rec)));
    assert_eq!(key_of(&f, &rec), vec![8, 9, 10, 11, 14, 15]);
    // RecordKeys gives the same hashes, with the names' state
    // computed once: the composite key's, or each field's.
    let mut got = vec![];
    RecordKeys::new(&f, false).each(&rec, |h| got.push(h));
    assert_eq!(got, [record_key_hash32(&f, &rec)]);
    got.clear();
    RecordKeys::new(&f, true).each(&rec, |h| got.push(h));
    assert_eq!(
        got,
        [
            field_key_hash32(&a, &[8, 9, 10, 11]),
            field_key_hash32(&p, &[14, 15])
        ]
    );
    // A per-field hash is the name's FNV-1a, a 0 byte, the value's,
    // then the finalizer's top half (the format's definition).
    let mut by_hand = Vec::from(*b"p");
    by_hand.extend([0, 14, 15]);
    assert_eq!(got[1], key_hash32(&by_hand));
    got.clear();
    RecordKeys::new(&[], true).each(&rec, |h| got.push(h));
    assert!(got.is_empty());
}

#[test]
fn frame_checksum_catches_a_flipped_bit() {
    let f = block_frame(KIND_SCHEMA, b"hello");
    let h = frame_header(&f).unwrap();
    h.check(&f[BLOCK_HEADER..]).unwrap();
    let mut g = f.clone();
    g[BLOCK_HEADER + 1] ^= 4;
    assert!(h.check(&g[BLOCK_HEADER..]).is_err());
}
