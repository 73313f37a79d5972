//! Shared-memory rings: producer and reader in one process over a real
//! file, the backpressure policy while nothing drains, and a fuzz of the
//! reader over arbitrary header and index bytes.

use std::os::unix::fs::{FileExt, PermissionsExt};

use dplog_core::schema::{FieldDef, FieldKind, Schema, SyslogMeta};
use dplog_core::shm::{
    check_slots, check_tail, consumer_path, decode_descriptions, decode_meta, encode_meta,
    parse_header, OpenRules, ProducerState, ShmError, ShmLogProducer, ShmOptions, ShmProducer,
    ShmReader, SHM_DROP_SLACK, SHM_HEADER_BYTES, SHM_MAX_DESC_BYTES, SHM_VERSION,
};
use dplog_core::{Backpressure, HasSchema, LoggerConfig, RecordRules, Slot64};
use dplog_schema_nat::{Nat44SessionRecord, NatRecord};
use proptest::prelude::*;

fn rec(seq: u64) -> NatRecord {
    NatRecord::from(Nat44SessionRecord {
        initiator_octets: seq,
        nat_event: 5,
        ..Nat44SessionRecord::default()
    })
}

fn seq_of(slot: &[u8]) -> u64 {
    // initiator_octets at offset 48 of the NAT44 session record.
    u64::from_ne_bytes(slot[48..56].try_into().unwrap())
}

fn opts(dir: &std::path::Path, cap: usize) -> ShmOptions {
    ShmOptions {
        dir: dir.to_path_buf(),
        name: "t".into(),
        capacity: cap,
        group: None,
        daemon_uid: None,
    }
}

fn producer(dir: &std::path::Path, cap: usize) -> ShmProducer<Slot64> {
    ShmProducer::create(&opts(dir, cap), &dplog_schema_nat::all()).unwrap()
}

#[test]
fn records_cross_in_order_through_wrap_around() {
    let d = tempfile::tempdir().unwrap();
    let mut p = producer(d.path(), 8);
    let md = std::fs::metadata(p.path()).unwrap();
    assert_eq!(md.permissions().mode() & 0o777, 0o600);
    let mut r = ShmReader::open(p.path(), &OpenRules::default()).unwrap();
    assert_eq!(r.info().capacity, 8);
    assert_eq!(r.info().slot_bytes, 64);
    assert_eq!(r.info().pid, std::process::id());
    assert_eq!(r.info().schemas.len(), 5);
    assert_eq!(
        r.info().schemas[0].name,
        Nat44SessionRecord::schema().name()
    );
    let mut out = Vec::new();
    let mut got = Vec::new();
    let mut next = 0u64;
    while got.len() < 100 {
        // As many of the next 3 as fit (the ring of 8 fills and wraps).
        let burst: Vec<_> = (next..next + 3).map(rec).collect();
        next += p.try_push_burst(&burst) as u64;
        assert!(next - got.len() as u64 <= 8);
        let n = r.poll(5, &mut out).unwrap();
        got.extend(out.chunks_exact(64).map(seq_of));
        r.consume(n);
        r.publish_head();
    }
    for (i, s) in got.iter().enumerate() {
        assert_eq!(*s, i as u64);
    }
    assert_eq!(r.producer_state(), ProducerState::Running);
    drop(p);
    assert_eq!(r.producer_state(), ProducerState::Closed);
}

/// Under `degrade`, a shared-memory ring's drops reach the reader by
/// reason: session creates (normal priority) shed above the high
/// watermark, deletes (high) dropped once the ring is full. A reader that
/// resumes from the consumer file's reported count gives later drops to
/// their own reason.
#[test]
fn degrade_drops_reach_the_reader_by_reason_across_a_resume() {
    let d = tempfile::tempdir().unwrap();
    let cfg = LoggerConfig {
        ring_capacity: 16,
        backpressure: Backpressure::Degrade,
        // The NAT schemas' priorities: deletes high, creates normal.
        schemas: dplog_core::SchemaTable::new(dplog_schema_nat::all()),
        ..LoggerConfig::default()
    };
    let mut p = ShmLogProducer::<NatRecord>::create(
        &opts(d.path(), 16),
        &cfg,
        &dplog_schema_nat::all(),
        RecordRules::own(),
    )
    .unwrap();
    let create = |seq| {
        NatRecord::from(Nat44SessionRecord {
            initiator_octets: seq,
            nat_event: 4,
            ..Nat44SessionRecord::default()
        })
    };
    // 13 creates reach the high watermark (80 % of 16).
    assert_eq!((0..13).filter(|&i| p.log(create(i))).count(), 13);
    assert_eq!((13..18).filter(|&i| p.log(create(i))).count(), 0, "shed");
    assert_eq!((18..21).filter(|&i| p.log(rec(i))).count(), 3, "kept");
    assert_eq!((21..23).filter(|&i| p.log(rec(i))).count(), 0, "full");
    let mut r = ShmReader::open(p.path(), &OpenRules::default()).unwrap();
    let d1 = r.take_drops().unwrap().unwrap();
    assert_eq!((d1.dropped, d1.by_reason), (7, [2, 5, 0, 0]));
    r.publish_reported();
    drop(r);
    // A new reader resumes at 7 reported; it frees two slots (fill 14,
    // still above the watermark) and the next create is shed.
    let mut r = ShmReader::open(p.path(), &OpenRules::default()).unwrap();
    assert_eq!(r.drops_reported(), 7);
    assert!(r.take_drops().unwrap().is_none());
    let mut out = Vec::new();
    assert_eq!(r.poll(2, &mut out).unwrap(), 2);
    r.consume(2);
    r.publish_head();
    assert!(!p.log(create(23)));
    let d2 = r.take_drops().unwrap().unwrap();
    assert_eq!((d2.dropped, d2.by_reason), (1, [0, 1, 0, 0]));
}

#[test]
fn drop_newest_counts_while_nothing_drains_and_the_reader_gets_the_counts() {
    let d = tempfile::tempdir().unwrap();
    let cfg = LoggerConfig {
        ring_capacity: 16,
        backpressure: Backpressure::Drop,
        ..LoggerConfig::default()
    };
    let mut p = ShmLogProducer::<NatRecord>::create(
        &opts(d.path(), 16),
        &cfg,
        &dplog_schema_nat::all(),
        RecordRules::own(),
    )
    .unwrap();
    let ok = (0..40).filter(|&i| p.log(rec(i))).count();
    assert_eq!(ok, 16);
    assert_eq!(p.log_burst(&[rec(1); 5]), 0);
    assert_eq!(p.dropped(), 29);
    let mut r = ShmReader::open(p.path(), &OpenRules::default()).unwrap();
    let d1 = r.take_drops().unwrap().unwrap();
    assert_eq!((d1.dropped, d1.by_reason), (29, [29, 0, 0, 0]));
    assert!(d1.first_ns <= d1.last_ns);
    assert!(r.take_drops().unwrap().is_none());
    r.publish_reported();
    let mut out = Vec::new();
    assert_eq!(r.poll(100, &mut out).unwrap(), 16);
    assert_eq!(seq_of(&out[15 * 64..]), 15);
}

/// Offset of the drop total in the ring file (module docs' layout).
const OFF_DROPPED_TOTAL: u64 = 416;
/// Offset of the creation time in the ring file.
const OFF_CREATED_NS: u64 = 48;

fn write_u64(path: &std::path::Path, off: u64, v: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .write_all_at(&v.to_ne_bytes(), off)
        .unwrap();
}

/// The drop total is the producer's word, checked as its index is: a
/// total that moves backwards, or grows by more than a drop per
/// nanosecond (plus the slack), is a violation naming the value, and
/// nothing is marked reported.
#[test]
fn a_drop_total_backwards_or_beyond_a_drop_per_nanosecond_is_a_violation() {
    let d = tempfile::tempdir().unwrap();
    let mut p = producer(d.path(), 16);
    p.count_dropped(dplog_core::DropReason::Full, 7, 1);
    let path = p.path().to_path_buf();
    let mut r = ShmReader::open(&path, &OpenRules::default()).unwrap();
    assert_eq!(r.take_drops().unwrap().unwrap().dropped, 7);
    assert_eq!(r.drops_reported(), 7);
    for (bad, says) in [
        (u64::MAX, "drop counter 18446744073709551615 is more than one drop per nanosecond of the ring's age"),
        (3, "drop counter moved backwards from 7 to 3"),
    ] {
        write_u64(&path, OFF_DROPPED_TOTAL, bad);
        match r.take_drops() {
            Err(ShmError::Protocol(m)) => assert!(m.contains(says), "{m}"),
            other => panic!("total {bad}: {other:?}"),
        }
        assert_eq!(r.drops_reported(), 7, "nothing marked reported");
    }
    // Within the ring's age but more than a drop per nanosecond since the
    // last read: an old ring (created 100 s ago) whose total jumps.
    let mut p = producer(d.path(), 16);
    let path = p.path().to_path_buf();
    let created = dplog_core::tsc::realtime_ns() - 100_000_000_000;
    write_u64(&path, OFF_CREATED_NS, created);
    let mut r = ShmReader::open(&path, &OpenRules::default()).unwrap();
    p.count_dropped(dplog_core::DropReason::Full, 5, 1);
    assert_eq!(r.take_drops().unwrap().unwrap().dropped, 5);
    let jump = 5 + SHM_DROP_SLACK + 50_000_000_000;
    write_u64(&path, OFF_DROPPED_TOTAL, jump);
    match r.take_drops() {
        Err(ShmError::Protocol(m)) => {
            assert!(
                m.contains(&format!("drop counter grew by {} to {jump}", jump - 5)),
                "{m}"
            )
        }
        other => panic!("{other:?}"),
    }
    // A creation time in the future counts as the open: the bound is
    // then the slack and the time since.
    let p = producer(d.path(), 16);
    let path = p.path().to_path_buf();
    write_u64(&path, OFF_CREATED_NS, u64::MAX);
    let mut r = ShmReader::open(&path, &OpenRules::default()).unwrap();
    write_u64(&path, OFF_DROPPED_TOTAL, SHM_DROP_SLACK);
    assert_eq!(r.take_drops().unwrap().unwrap().dropped, SHM_DROP_SLACK);
    write_u64(&path, OFF_DROPPED_TOTAL, 3 * SHM_DROP_SLACK);
    assert!(matches!(r.take_drops(), Err(ShmError::Protocol(_))));
}

#[test]
fn block_waits_for_the_reader_and_stops_when_quarantined() {
    let d = tempfile::tempdir().unwrap();
    let cfg = LoggerConfig {
        ring_capacity: 4,
        backpressure: Backpressure::Block,
        block_spins: 0,
        ..LoggerConfig::default()
    };
    let mut p = ShmLogProducer::<NatRecord>::create(
        &opts(d.path(), 4),
        &cfg,
        &dplog_schema_nat::all(),
        RecordRules::own(),
    )
    .unwrap();
    let path = p.path().to_path_buf();
    let t = std::thread::spawn(move || {
        let n = (0..20).filter(|&i| p.log(rec(i))).count();
        (n, p.dropped())
    });
    let mut r = ShmReader::open(&path, &OpenRules::default()).unwrap();
    let mut out = Vec::new();
    let mut got = 0;
    while got < 10 {
        let n = r.poll(3.min(10 - got as usize), &mut out).unwrap();
        for s in out.chunks_exact(64) {
            assert_eq!(seq_of(s), got);
            got += 1;
        }
        r.consume(n);
        r.publish_head();
    }
    // The producer now waits on a full ring; a quarantine releases it.
    while r.poll(64, &mut out).unwrap() < 4 {}
    r.quarantine();
    let (n, dropped) = t.join().unwrap();
    assert_eq!(n, 14);
    assert_eq!(dropped, 6);
}

/// A push on a full, quarantined ring returns at once: with an unbounded
/// wait (`block_spins = u32::MAX`) one that waited out its spins first
/// would not return.
#[test]
fn block_on_a_quarantined_full_ring_returns_at_once() {
    let d = tempfile::tempdir().unwrap();
    let cfg = LoggerConfig {
        ring_capacity: 4,
        backpressure: Backpressure::Block,
        block_spins: u32::MAX,
        ..LoggerConfig::default()
    };
    let mut p = ShmLogProducer::<NatRecord>::create(
        &opts(d.path(), 4),
        &cfg,
        &dplog_schema_nat::all(),
        RecordRules::own(),
    )
    .unwrap();
    let r = ShmReader::open(p.path(), &OpenRules::default()).unwrap();
    // The producer looks for its consumer file at most once a millisecond.
    std::thread::sleep(std::time::Duration::from_millis(3));
    assert_eq!((0..4).filter(|&i| p.log(rec(i))).count(), 4);
    r.quarantine();
    assert_eq!((4..20).filter(|&i| p.log(rec(i))).count(), 0);
    assert_eq!(p.dropped(), 16);
}

#[test]
fn a_group_ring_is_0640_and_another_owner_is_refused() {
    let d = tempfile::tempdir().unwrap();
    // SAFETY: getegid cannot fail.
    let gid = unsafe { libc::getegid() };
    let mut o = opts(d.path(), 4);
    o.group = Some(gid);
    let p = ShmProducer::<Slot64>::create(&o, &dplog_schema_nat::all()).unwrap();
    assert_eq!(
        std::fs::metadata(p.path()).unwrap().permissions().mode() & 0o777,
        0o640
    );
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        // Give the file to another user: refused unless accepted.
        std::os::unix::fs::chown(p.path(), Some(4242), None).unwrap();
        match ShmReader::open(p.path(), &OpenRules::default()) {
            Err(ShmError::Owner { uid: 4242 }) => {}
            other => panic!("{other:?}"),
        }
        let rules = OpenRules {
            allow_uids: vec![4242],
        };
        assert!(ShmReader::open(p.path(), &rules).is_ok());
    }
}

/// The consumer's position lives in its own file: until it exists the
/// producer sees no consumer (a full ring stays full), a consumer file of
/// another lifetime (nonce) is never used, and the ring file is never
/// written by the reader.
#[test]
fn the_consumer_file_carries_the_position_and_only_its_lifetime_counts() {
    let d = tempfile::tempdir().unwrap();
    // SAFETY: getegid cannot fail.
    let gid = unsafe { libc::getegid() };
    let mut o = opts(d.path(), 4);
    o.group = Some(gid);
    let mut p = ShmProducer::<Slot64>::create(&o, &dplog_schema_nat::all()).unwrap();
    let cpath = consumer_path(p.path());
    for i in 0..4 {
        p.try_push(rec(i)).unwrap();
    }
    assert!(p.try_push(rec(4)).is_err());
    assert!(!p.consumer_attached());
    // A consumer file of another lifetime: the producer ignores it.
    let mut fake = vec![0u8; 4096];
    fake[0..8].copy_from_slice(b"DPLOGCON");
    fake[8..12].copy_from_slice(&1u32.to_ne_bytes());
    fake[16..24].copy_from_slice(&0x1234u64.to_ne_bytes());
    fake[128..136].copy_from_slice(&4u64.to_ne_bytes());
    std::fs::write(&cpath, &fake).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2));
    assert!(p.try_push(rec(4)).is_err());
    assert!(!p.consumer_attached());
    let before = std::fs::read(p.path()).unwrap();
    // The reader replaces it with one of this lifetime.
    let mut r = ShmReader::open(p.path(), &OpenRules::default()).unwrap();
    let md = std::fs::metadata(&cpath).unwrap();
    assert_eq!(md.permissions().mode() & 0o777, 0o640);
    assert_eq!(std::os::unix::fs::MetadataExt::gid(&md), gid);
    let mut out = Vec::new();
    assert_eq!(r.poll(3, &mut out).unwrap(), 3);
    r.consume(3);
    r.publish_head();
    std::thread::sleep(std::time::Duration::from_millis(2));
    assert_eq!(p.try_push_burst(&[rec(4), rec(5), rec(6), rec(7)]), 3);
    assert!(p.consumer_attached());
    // The reader wrote nothing into the ring file: only the producer's
    // tail and slots changed.
    let after = std::fs::read(p.path()).unwrap();
    assert_eq!(before[..128], after[..128]);
    assert_eq!(before[136..SHM_HEADER_BYTES], after[136..SHM_HEADER_BYTES]);
    // A second reader (a restarted daemon) keeps the same consumer file.
    let ino = std::os::unix::fs::MetadataExt::ino(&md);
    drop(r);
    let r2 = ShmReader::open(p.path(), &OpenRules::default()).unwrap();
    assert_eq!(
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&cpath).unwrap()),
        ino
    );
    r2.quarantine();
    assert!(p.is_quarantined());
    r2.remove_files();
    assert!(!cpath.exists() && !p.path().exists());
}

#[test]
fn bad_rings_are_refused_with_the_field_named() {
    let d = tempfile::tempdir().unwrap();
    let p = producer(d.path(), 8);
    let path = p.path().to_path_buf();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let cases: [(usize, &[u8], &str); 4] = [
        (16, &4096u32.to_ne_bytes(), "slot size 4096"),
        (20, &3u32.to_ne_bytes(), "capacity 3"),
        (20, &(1u32 << 30).to_ne_bytes(), "capacity 1073741824"),
        (0, b"NOTDPLOG", "magic"),
    ];
    for (off, bytes, msg) in cases {
        let mut orig = vec![0u8; bytes.len()];
        f.read_at(&mut orig, off as u64).unwrap();
        f.write_all_at(bytes, off as u64).unwrap();
        let e = ShmReader::open(&path, &OpenRules::default()).unwrap_err();
        assert!(e.to_string().contains(msg), "{e}");
        f.write_all_at(&orig, off as u64).unwrap();
    }
    // A file cut short of its slots.
    f.set_len(SHM_HEADER_BYTES as u64 + 64).unwrap();
    let e = ShmReader::open(&path, &OpenRules::default()).unwrap_err();
    assert!(e.to_string().contains("shorter"), "{e}");
}

#[test]
fn a_tail_past_the_capacity_or_backwards_and_bad_records_are_violations() {
    assert!(check_tail(0, 0, 8, 8).is_ok());
    assert!(check_tail(0, 0, 9, 8).is_err());
    assert!(check_tail(5, 10, 9, 8).is_err());
    assert!(check_tail(5, 10, u64::MAX, 8).is_err());
    let schemas = vec![dplog_core::shm::SchemaDesc::of(Nat44SessionRecord::schema())];
    let good = rec(1);
    let mut slots = Vec::new();
    // SAFETY: a Slot64 is 64 plain bytes.
    let bytes: [u8; 64] = unsafe { core::mem::transmute(good) };
    slots.extend_from_slice(&bytes);
    slots.extend_from_slice(&bytes);
    assert_eq!(check_slots(&slots, 64, &schemas).0, 2);
    slots[64] = 0xff; // length 0x??ff
    slots[65] = 0xff;
    let (n, e) = check_slots(&slots, 64, &schemas);
    assert_eq!(n, 1);
    assert!(e.unwrap().to_string().contains("length 65535"));
    slots[64..66].copy_from_slice(&64u16.to_ne_bytes());
    slots[66..68].copy_from_slice(&999u16.to_ne_bytes());
    let (n, e) = check_slots(&slots, 64, &schemas);
    assert_eq!(n, 1);
    assert!(e.unwrap().to_string().contains("schema id 999"));
}

/// A record type of the user's own, not the NAT package's: an ACL drop
/// with an enum of named reasons, a MAC and an IPv6 address.
fn acl_schema() -> Schema {
    Schema::new(
        300,
        "aclDrop",
        56,
        vec![
            FieldDef::new("ticks", 8, 8, FieldKind::TscTimestamp, 0),
            FieldDef::new("sourceIPv6Address", 16, 16, FieldKind::Ipv6, 27),
            FieldDef::new("ruleId", 32, 4, FieldKind::U32, 0),
            FieldDef::new("sourceMacAddress", 40, 6, FieldKind::Mac, 56),
            FieldDef::new("reason", 46, 1, FieldKind::Enum, 0).with_names(&[
                (1, "NO_RULE"),
                (2, "DENY"),
                (3, "RATE_LIMIT"),
            ]),
        ],
    )
    .unwrap()
}

#[test]
fn a_ring_carries_its_schemas_whole_and_a_bad_description_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let acl = acl_schema();
    let nat = Nat44SessionRecord::schema();
    let p = ShmProducer::<Slot64>::create(&opts(d.path(), 8), &[nat, &acl]).unwrap();
    let r = ShmReader::open(p.path(), &OpenRules::default()).unwrap();
    let got = &r.info().schemas;
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].schema.fields(), nat.fields());
    assert_eq!((got[1].schema.id(), got[1].schema.name()), (300, "aclDrop"));
    assert_eq!(got[1].schema.fields(), acl.fields());
    assert_eq!(got[1].schema.fields()[4].enum_name(2), Some("DENY"));
    // The first description starts at 8192 + 2: id, size, name length,
    // "nat44Session" ... ; the ACL description's enum name "DENY" is
    // changed to "DENZ": the fingerprint no longer matches.
    let path = p.path().to_path_buf();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let mut region = vec![0u8; 4096];
    f.read_at(&mut region, 8192).unwrap();
    let at = region.windows(4).position(|w| w == b"DENY").unwrap();
    f.write_all_at(b"DENZ", 8192 + at as u64).unwrap();
    let e = ShmReader::open(&path, &OpenRules::default()).unwrap_err();
    assert!(
        e.to_string()
            .contains("schema aclDrop (id 300): fingerprint of its description"),
        "{e}"
    );
    assert!(matches!(e, ShmError::Schema(_)), "{e}");
    // Refused and quarantined: the producer sees it.
    assert!(p.is_quarantined());
    f.write_all_at(b"DENY", 8192 + at as u64).unwrap();
    assert!(ShmReader::open(&path, &OpenRules::default()).is_ok());
    // A description length past the region, and a region length past
    // its bound.
    let first = u16::from_le_bytes([region[0], region[1]]);
    f.write_all_at(&60000u16.to_le_bytes(), 8192).unwrap();
    let e = ShmReader::open(&path, &OpenRules::default()).unwrap_err();
    assert!(
        e.to_string()
            .contains("schema description 0: 60000 bytes declared"),
        "{e}"
    );
    f.write_all_at(&first.to_le_bytes(), 8192).unwrap();
    f.write_all_at(&u32::MAX.to_ne_bytes(), 60).unwrap();
    let e = ShmReader::open(&path, &OpenRules::default()).unwrap_err();
    assert!(
        e.to_string().contains(&format!(
            "4294967295 bytes of schema descriptions, at most {SHM_MAX_DESC_BYTES}"
        )),
        "{e}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any metadata bytes, or a real NAT type's metadata with bytes
    /// overwritten: decoded or refused, never a panic; what is accepted
    /// encodes again to the same bytes.
    #[test]
    fn decode_meta_takes_any_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 0..512),
        real in any::<bool>(),
        at in any::<usize>(),
    ) {
        let mut b = bytes;
        if real {
            let mut m = encode_meta(dplog_schema_nat::all()[0].meta()).unwrap();
            if !b.is_empty() {
                let i = at % m.len();
                let n = b.len().min(m.len() - i);
                m[i..i + n].copy_from_slice(&b[..n]);
            }
            b = m;
        }
        if let Ok(m) = decode_meta(&b) {
            prop_assert_eq!(encode_meta(&m).unwrap(), b);
        }
    }

    /// Any description bytes: decoded or refused, never a panic; what is
    /// accepted is `count` valid schemas that fit the bytes.
    #[test]
    fn decode_descriptions_takes_any_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 0..2048),
        count in 0usize..80,
        valid_prefix in any::<bool>(),
    ) {
        let mut b = bytes;
        if valid_prefix {
            // A real description first, so the fuzz reaches its insides.
            let e = acl_schema().encode().unwrap();
            let mut v = (e.len() as u16).to_le_bytes().to_vec();
            v.extend_from_slice(&e);
            let cut = b.len().min(v.len());
            b[..cut].copy_from_slice(&v[..cut]);
        }
        if let Ok(schemas) = decode_descriptions(&b, count) {
            prop_assert_eq!(schemas.len(), count);
            prop_assert!(count * 8 <= b.len());
            for s in &schemas {
                prop_assert!(s.size() >= 8);
                let back = Schema::decode(&s.encode().unwrap()).unwrap();
                prop_assert_eq!(&back, s);
            }
        }
    }

    /// Any header bytes: parsed or refused, never a panic; what is
    /// accepted is within bounds.
    #[test]
    fn parse_header_takes_any_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 0..SHM_HEADER_BYTES + 64),
        magic in any::<bool>(),
        file_len in any::<u64>(),
    ) {
        let mut b = bytes;
        if magic && b.len() >= 16 {
            b[..8].copy_from_slice(b"DPLOGSHM");
            b[8..12].copy_from_slice(&SHM_VERSION.to_ne_bytes());
        }
        if let Ok(info) = parse_header(&b, file_len) {
            prop_assert!(matches!(info.slot_bytes, 32 | 64 | 128));
            prop_assert!(info.capacity.is_power_of_two());
            prop_assert!(info.needed_bytes() <= file_len);
        }
    }

    /// A real ring whose header, indices and slots are overwritten with
    /// arbitrary bytes: the reader opens it or refuses it, and every poll
    /// returns at most the burst of checked records or a violation.
    #[test]
    fn the_reader_survives_arbitrary_header_and_index_bytes(
        writes in proptest::collection::vec(
            (
                prop_oneof![0usize..1024 + 5 * 64, 8192usize..8192 + 1024, SHM_HEADER_BYTES..SHM_HEADER_BYTES + 8 * 64],
                proptest::collection::vec(any::<u8>(), 1..16),
            ),
            1..24,
        ),
        tail in prop_oneof![any::<u64>(), 0u64..20],
        pushes in 0usize..8,
    ) {
        let d = tempfile::tempdir().unwrap();
        let mut p = producer(d.path(), 8);
        for i in 0..pushes {
            p.try_push(rec(i as u64)).unwrap();
        }
        let path = p.path().to_path_buf();
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        // Open before or after the damage, both ways.
        let early = ShmReader::open(&path, &OpenRules::default()).ok();
        for (off, b) in &writes {
            f.write_all_at(b, *off as u64).unwrap();
        }
        f.write_all_at(&tail.to_ne_bytes(), 128).unwrap();
        let late = ShmReader::open(&path, &OpenRules::default()).ok();
        for mut r in [early, late].into_iter().flatten() {
            let mut out = Vec::new();
            for _ in 0..4 {
                match r.poll(5, &mut out) {
                    Ok(n) => {
                        prop_assert!(n <= 5);
                        prop_assert_eq!(out.len(), n * r.info().slot_bytes as usize);
                        prop_assert!(r.tail() - r.head() <= u64::from(r.info().capacity));
                        r.consume(n);
                        r.publish_head();
                    }
                    Err(_) => {
                        prop_assert!(out.len() <= 5 * r.info().slot_bytes as usize);
                        break;
                    }
                }
            }
            // Whatever the bytes, a reported count is within the bound.
            if let Ok(Some(d)) = r.take_drops() {
                prop_assert!(r.drops_reported() < SHM_DROP_SLACK + (1 << 62));
                prop_assert!(d.first_ns <= d.last_ns);
            }
            let _ = r.producer_state();
        }
    }
}

/// A file cut short under the reader's mapping between its size check and
/// its copy: the SIGBUS guard turns the fault into a reported violation.
#[test]
fn a_file_cut_under_the_mapping_is_a_violation_not_a_crash() {
    dplog_core::shm::install_sigbus_guard().unwrap();
    let d = tempfile::tempdir().unwrap();
    let mut p = producer(d.path(), 64);
    for i in 0..10 {
        p.try_push(rec(i)).unwrap();
    }
    // The producer goes first: its own mapping is not guarded.
    let path = p.path().to_path_buf();
    drop(p);
    let mut r = ShmReader::open(&path, &OpenRules::default()).unwrap();
    r.skip_size_check();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(0)
        .unwrap();
    let mut out = Vec::new();
    let e = r.poll(64, &mut out).unwrap_err();
    assert!(e.to_string().contains("SIGBUS"), "{e}");
    assert!(out.is_empty());
    // The reader stays usable (zero pages), and says so again.
    assert!(r.poll(64, &mut out).is_err());
}

/// The ring carries each record type's metadata (priority, syslog layout
/// and profiles, fields shown only when, names and IPFIX elements by
/// value, event time): the reader rebuilds exactly the producer's.
#[test]
fn the_ring_carries_each_schemas_metadata() {
    let d = tempfile::tempdir().unwrap();
    let p = producer(d.path(), 8);
    let r = ShmReader::open(p.path(), &OpenRules::default()).unwrap();
    let all = dplog_schema_nat::all();
    assert_eq!(r.info().schemas.len(), all.len());
    let mut rich = 0;
    for (got, want) in r.info().schemas.iter().zip(all.iter()) {
        assert_eq!(got.schema.meta(), want.meta(), "{}", want.name());
        assert_eq!(got.schema, **want, "{}", want.name());
        rich += usize::from(want.meta() != &dplog_core::schema::SchemaMeta::default());
    }
    assert!(rich >= 2, "the NAT types declare metadata");
    // A syslog layout of a type of one's own, with a profile and a
    // constant; no event time; enum numbers.
    let own = Schema::new(
        400,
        "own",
        24,
        vec![
            FieldDef::new("a", 8, 8, FieldKind::U64, 0),
            FieldDef::new("b", 16, 4, FieldKind::U32, 0),
        ],
    )
    .unwrap();
    let layout = SyslogMeta::resolve(
        &own,
        Some("own-app"),
        Some(("b", &[(1, "ONE"), (2, "TWO")])),
        Some("own@32473"),
        &[("A", "a"), ("K", "=k v")],
    )
    .unwrap();
    let vpp = SyslogMeta::resolve(&own, None, None, Some("x@1"), &[("B", "b")]).unwrap();
    let own = own
        .with_priority(3, Some(("b", &[(2, 9)])))
        .unwrap()
        .with_syslog(layout.with_profile("vpp", vpp))
        .with_event_time(None)
        .unwrap()
        .with_enum_numbers(true);
    let p = ShmProducer::<Slot64>::create(&opts(d.path(), 8), &[&own]).unwrap();
    let r = ShmReader::open(p.path(), &OpenRules::default()).unwrap();
    assert_eq!(r.info().schemas[0].schema.meta(), own.meta());
    assert_eq!(r.info().schemas[0].schema.meta().priority, 3);
}

/// Metadata a formatter would write unescaped is refused: by the producer
/// at create, and by the reader in a file (a hostile producer).
#[test]
fn metadata_with_bad_syslog_strings_is_refused() {
    let s = Schema::new(
        401,
        "bad",
        16,
        vec![FieldDef::new("a", 8, 8, FieldKind::U64, 0)],
    )
    .unwrap();
    let l = SyslogMeta::resolve(&s, Some("app\nname"), None, None, &[]).unwrap();
    let s = s.with_syslog(l);
    let d = tempfile::tempdir().unwrap();
    let e = ShmProducer::<Slot64>::create(&opts(d.path(), 8), &[&s]).unwrap_err();
    assert!(
        e.to_string().contains("would be refused by a reader"),
        "{e}"
    );
    // The same bytes in a file: refused by the decoder, naming them.
    let m = encode_meta(s.meta()).unwrap();
    let e = decode_meta(&m).unwrap_err();
    assert!(
        e.contains("syslog app name \"app\\nname\" contains '\\n'"),
        "{e}"
    );
    // Out-of-range field indexes: refused by Schema::with_meta.
    let mut bad = s.meta().clone();
    bad.syslog = SyslogMeta::default();
    bad.priority_by = Some(dplog_core::schema::FieldValues {
        field: 7,
        values: vec![(1, 1)],
    });
    let e = s.clone().with_meta(bad).unwrap_err();
    assert!(e.to_string().contains("#7"), "{e}");
    // Arbitrary bytes: decoded or refused, never a panic.
    for len in 0..m.len() {
        let _ = decode_meta(&m[..len]);
    }
}

/// The schema-description region of a ring whose producer ran the code
/// before the lifecycle (its metadata is version 1): the NAT44 session's
/// description, bytes of that code. It decodes to the same schema, with
/// every metadata it carried and no lifecycle.
#[test]
fn a_description_of_metadata_version_1_still_decodes() {
    const OLD: &[&str] = &[
    "ac04010040000c6e6174343453657373696f6e0e001b6f62736572766174696f6e54696d654d696c6c697365636f6e64",
    "73080008000c43010000086e61744576656e74230001000de6000900010000000a4e41545f435245415445020000000a",
    "4e41545f44454c45544503000000134144445245535345535f45584841555354454404000000144e415434345f534553",
    "53494f4e5f43524541544505000000144e415434345f53455353494f4e5f44454c4554450c0000000f504f5254535f45",
    "58484155535445440d0000000e51554f54415f45584345454445441000000015504f52545f424c4f434b5f414c4c4f43",
    "4154494f4e1100000017504f52545f424c4f434b5f4445414c4c4f434154494f4e1270726f746f636f6c4964656e7469",
    "6669657222000100090400000011736f75726365495076344164647265737310000400060800000013736f7572636554",
    "72616e73706f7274506f72741c000200080700000018706f73744e4154536f7572636549507634416464726573731400",
    "040006e10000001b706f73744e415054536f757263655472616e73706f7274506f72741e00020008e300000016646573",
    "74696e6174696f6e495076344164647265737318000400060c0000001864657374696e6174696f6e5472616e73706f72",
    "74506f727420000200080b0000000c696e677265737356524649442400040003ea00000010696e69746961746f725061",
    "636b65747328000400032a01000010726573706f6e6465725061636b6574732c000400032b0100000f696e6974696174",
    "6f724f63746574733000080004e70000000f726573706f6e6465724f63746574733800080004e8000000010000020101",
    "000100040000000000000001010100050000000000000004000a000b000c000d0001034e415401010007000400000000",
    "00000004534144440500000000000000045344454c10000000000000000641504d41444411000000000000000641504d",
    "44454c0300000000000000134144445245535345535f4558484155535445440c000000000000000f504f5254535f4558",
    "484155535445440d000000000000000e51554f54415f4558434545444544010b6e736573734033323437330b00065353",
    "554249580101300553564c414e00090005494154595001044950763406495341444452000300064953504f5254000400",
    "05584154595001044950763406585341444452000500065853504f52540006000550524f544f00020006584441444452",
    "000700065844504f525400080001000376707001034e4154010100070004000000000000000453414444050000000000",
    "0000045344454c10000000000000000641504d41444411000000000000000641504d44454c0300000000000000134144",
    "445245535345535f4558484155535445440c000000000000000f504f5254535f4558484155535445440d000000000000",
    "000e51554f54415f455843454544454401056e736573730b00065353554249580101300553564c414e00090005494154",
    "595001044950763406495341444452000300064953504f52540004000558415459500104495076340658534144445200",
    "0500065853504f52540006000550524f544f00020006584441444452000700065844504f52540008000000000001",
    ];
    let hex = OLD.concat();
    let region: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    assert_eq!(region.len(), 1198);
    let got = decode_descriptions(&region, 1).unwrap().remove(0);
    let now = dplog_schema_nat::nat44_session();
    let mut want = now.meta().clone();
    want.lifecycle = None;
    // Version 1 carries no enterprise element ids: its fields keep the
    // ids by position that its writer exported.
    want.ipfix_enterprise.by_position = true;
    assert_eq!(got.meta(), &want);
    assert_eq!(got.fields(), now.fields());
    assert_eq!(got.meta().syslog.app_name.as_deref(), Some("NAT"));
    assert!(got.meta().priority_by.is_some() && got.meta().only_when.is_some());
}
