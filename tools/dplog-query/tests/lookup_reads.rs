//! What one `dplog-query` process reads for a lookup, counted by its
//! `--stats` line (files opened, reads, bytes, over the whole process):
//! the archive's first and last segments once (their record types serve
//! the output and the lookup), the summary of the window's day, and the
//! one segment that holds the tuple asked. Never timed. The record type
//! is declared here (a tunnel session keyed by tunnel id and peer).

use std::path::Path;
use std::process::Command;

use dplog_core::schema::{FieldDef, FieldKind, Schema};
use dplog_core::Sink;
use dplog_formatters::binary::BinaryEncoder;
use dplog_sinks::archive::{list_segments, ArchiveSink, ArchiveSinkOptions};

const T0: u64 = 1_767_225_600_000_000_000;
const MS: u64 = 1_000_000;

fn tunnel_schema() -> Schema {
    Schema::new(
        421,
        "tunnelSession",
        32,
        vec![
            FieldDef::new("eventTime", 8, 8, FieldKind::NsTimestamp, 0),
            FieldDef::new("tunnelId", 16, 4, FieldKind::U32, 0),
            FieldDef::new("peerAddress", 20, 4, FieldKind::Ipv4, 0),
            FieldDef::new("tunnelEvent", 24, 1, FieldKind::U8, 0),
            FieldDef::new("octets", 28, 4, FieldKind::U32, 0),
        ],
    )
    .unwrap()
    .with_lifecycle(
        "tunnelEvent",
        &[1],
        &[2],
        &["tunnelId", "peerAddress"],
        &["octets"],
    )
    .unwrap()
}

fn rec(ms: u64, tunnel: u32, peer: u32, event: u8) -> Vec<u8> {
    let mut r = vec![0u8; 32];
    r[0..2].copy_from_slice(&32u16.to_ne_bytes());
    r[2..4].copy_from_slice(&421u16.to_ne_bytes());
    r[8..16].copy_from_slice(&(T0 + ms * MS).to_ne_bytes());
    r[16..20].copy_from_slice(&tunnel.to_ne_bytes());
    r[20..24].copy_from_slice(&peer.to_ne_bytes());
    r[24] = event;
    r[28..32].copy_from_slice(&(tunnel * 10).to_ne_bytes());
    r
}

/// Ten one-second segments: in second k, tunnels 100k..100k+40 from peer
/// 192.0.2.1 open and close; tunnel 7 from peer 192.0.2.9 opens at 2.5 s
/// and closes at 7.5 s.
fn archive(dir: &Path) {
    let s = tunnel_schema();
    let mut recs = Vec::new();
    for k in 0..10u64 {
        for i in 0..40u64 {
            let t = (k * 100 + i) as u32 + 1000;
            recs.push(rec(k * 1000 + i * 10, t, 0xC000_0201, 1));
            recs.push(rec(k * 1000 + i * 10 + 500, t, 0xC000_0201, 2));
        }
    }
    recs.push(rec(2500, 7, 0xC000_0209, 1));
    recs.push(rec(7500, 7, 0xC000_0209, 2));
    recs.sort_by_key(|r| u64::from_ne_bytes(r[8..16].try_into().unwrap()));
    let opts = ArchiveSinkOptions {
        block_rows: 32,
        segment_interval_ms: Some(1000),
        ..Default::default()
    };
    let mut sink = ArchiveSink::open(dir, opts).unwrap();
    let mut enc = BinaryEncoder::new(&[&s]);
    let mut b = Vec::new();
    for r in &recs {
        enc.push(r, &mut b);
    }
    sink.write_batch(&b).unwrap();
    sink.close().unwrap();
}

/// `--stats` of one lookup: (stdout lines, [window, ruled out, opened,
/// blocks decoded, skipped, files opened, reads, bytes]).
fn lookup(dir: &Path, args: &[&str]) -> (usize, Vec<u64>) {
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-query"))
        .arg("--archive")
        .arg(dir)
        .args(args)
        .arg("--stats")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err
        .lines()
        .find(|l| l.contains("segments in window"))
        .unwrap_or_else(|| panic!("no --stats line: {err}"));
    let nums: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse().unwrap())
        .collect();
    assert_eq!(nums.len(), 8, "{line}");
    (String::from_utf8_lossy(&out.stdout).lines().count(), nums)
}

#[test]
fn a_lookup_opens_the_first_and_last_segments_once_and_only_the_segment_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    archive(dir.path());
    assert_eq!(list_segments(dir.path()).unwrap().len(), 10);
    let at = format!("{}ns", T0 + 5000 * MS);
    let (lines, n) = lookup(
        dir.path(),
        &[
            "--at",
            &at,
            "--lookback",
            "all",
            "--where",
            "tunnelId=7",
            "--where",
            "peerAddress=192.0.2.9",
        ],
    );
    assert_eq!(lines, 1);
    // Six segments in the window, five ruled out, one opened, one block.
    assert_eq!(&n[..4], &[6, 5, 1, 1]);
    // Files: the first and last segments (record types), the day's
    // summary (.dps and .dpb), the segment holding the open: five.
    assert_eq!(n[5], 5);

    // A lookup the summary cannot answer (not the whole tuple): every
    // segment of the window, each once, besides the first and last.
    let (lines, n) = lookup(
        dir.path(),
        &["--at", &at, "--lookback", "all", "--where", "tunnelId=7"],
    );
    assert_eq!(lines, 1);
    assert_eq!(&n[..3], &[6, 0, 6]);
    assert_eq!(n[5], 2 + 2 + 6);
}

#[test]
fn a_one_segment_archive_is_opened_once_for_its_record_types() {
    let dir = tempfile::tempdir().unwrap();
    let s = tunnel_schema();
    let mut sink = ArchiveSink::open(dir.path(), ArchiveSinkOptions::default()).unwrap();
    let mut enc = BinaryEncoder::new(&[&s]);
    let mut b = Vec::new();
    enc.push(&rec(10, 7, 0xC000_0209, 1), &mut b);
    sink.write_batch(&b).unwrap();
    sink.close().unwrap();
    let at = format!("{}ns", T0 + 20 * MS);
    // The window is that segment: opened for the record types, then by
    // the lookup; and the summary's two files.
    let (lines, n) = lookup(
        dir.path(),
        &[
            "--at",
            &at,
            "--where",
            "tunnelId=7",
            "--where",
            "peerAddress=192.0.2.9",
        ],
    );
    assert_eq!(lines, 1);
    assert_eq!(&n[..3], &[1, 0, 1]);
    assert_eq!(n[5], 1 + 2 + 1);
}
