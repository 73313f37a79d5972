//! Opening an archive directory: its writer lock, and the recovery of a
//! segment a crash left open.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use super::format::{Footer, KIND_DATA};
use super::reader::Segment;
use super::{format, index_tail, summary, ArchiveSinkOptions, KeyPairs};

pub(super) fn lock_dir(dir: &Path) -> io::Result<File> {
    let path = dir.join(".archive.lock");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o640)
        .custom_flags(libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    // SAFETY: flock on a descriptor we own; no memory is passed.
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!(
                "archive directory {}: another writer holds it (lock {}): {e}",
                dir.display(),
                path.display()
            ),
        ));
    }
    Ok(file)
}

/// Removes what a crash during a keyed rewrite ([`super::keyed::rewrite`])
/// left: its sorted file (the open segment it was made from is still
/// there), or an open segment whose sealed segment exists (the rewrite
/// was renamed before the open file was removed). Either is said on
/// stderr.
pub(super) fn clean_rewrites(dir: &Path) -> io::Result<()> {
    let segs = super::list_segments(dir)?;
    let mut removed = false;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let copy = format::parse_name(name).is_some_and(|(seq, range)| {
            range.is_none() && segs.iter().any(|s| s.seq == seq && s.range.is_some())
        });
        if copy || super::keyed::is_sort_name(name) {
            eprintln!(
                "dplog: archive recovery: {}: {}; removed",
                e.path().display(),
                if copy {
                    "a copy of its sealed segment (a crash ended its rewrite sorted by key)"
                } else {
                    "an unfinished rewrite sorted by key (its open segment is recovered)"
                }
            );
            std::fs::remove_file(e.path())?;
            removed = true;
        }
    }
    if removed {
        sync_dir(dir)?;
    }
    Ok(())
}

pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Recovers open segment `path` (seq `seq`): keeps its whole blocks that
/// pass their checksum and decode, cuts the rest (said on stderr),
/// seals it; removes it if it holds no record. Returns the torn blocks
/// cut off.
pub(super) fn recover(
    dir: &Path,
    path: &Path,
    seq: u64,
    opts: &ArchiveSinkOptions,
) -> io::Result<u64> {
    // A crash between creating the file and writing its header leaves
    // fewer bytes than the header: nothing to recover.
    if std::fs::metadata(path)?.len() < format::SEGMENT_HEADER as u64 {
        eprintln!(
            "dplog: archive recovery: {}: no segment header (a crash cut its creation short); removed",
            path.display()
        );
        std::fs::remove_file(path)?;
        sync_dir(dir)?;
        return Ok(0);
    }
    let seg = Segment::open(path)?;
    seg.read_in_order();
    let mut torn = seg.problems.len() as u64;
    for p in &seg.problems {
        eprintln!("dplog: archive recovery: {p}");
    }
    let mut blocks = Vec::new();
    let mut end = format::SEGMENT_HEADER as u64;
    let (mut min, mut max, mut rows) = (u64::MAX, 0u64, 0u64);
    let mut pairs = KeyPairs::default();
    let mut tuples = Vec::new();
    let mut types: Vec<summary::TypeEntry> = Vec::new();
    for (i, b) in seg.blocks.iter().enumerate() {
        let b = b.clone();
        if b.kind == KIND_DATA {
            match seg.read_block(i) {
                Ok((s, recs)) => {
                    let key = format::index_fields(s, &opts.index);
                    let per_field = format::index_per_field(&opts.index);
                    let hashes = format::RecordKeys::new(&key, per_field);
                    for r in recs.chunks_exact(s.size()) {
                        hashes.each(r, |h| pairs.push(h, i as u32));
                    }
                    let tf = format::tuple_fields(s, &opts.summary);
                    if !tf.is_empty() {
                        tuples.extend(
                            recs.chunks_exact(s.size())
                                .map(|r| format::record_tuple_hash(s.id(), &tf, r)),
                        );
                    }
                    let ty = summary::type_entry(s, &opts.summary);
                    if !types.contains(&ty) {
                        types.push(ty);
                    }
                    min = min.min(b.min);
                    max = max.max(b.max);
                    rows += b.rows as u64;
                }
                Err(e) => {
                    eprintln!("dplog: archive recovery: {}", seg.block_problem(i, &e));
                    torn += 1;
                    break;
                }
            }
        }
        end = b.offset + b.len as u64;
        blocks.push(b);
    }
    drop(seg);
    if rows == 0 {
        std::fs::remove_file(path)?;
        let _ = std::fs::remove_file(crate::seal::seal_path(path));
        sync_dir(dir)?;
        return Ok(torn);
    }
    let f = OpenOptions::new().write(true).open(path)?;
    f.set_len(end)?;
    // Its seal keeps the entries of the blocks kept.
    let had_seal = crate::seal::cut_seal(path, end)?;
    let (index, tail, index_bits) = index_tail(&mut pairs, end);
    let footer = Footer {
        seq,
        min,
        max,
        rows,
        max_lifetime_ms: opts.max_lifetime_ms,
        index_fields: opts.index.clone(),
        blocks,
        index,
        index_bits,
        key_ranges: Vec::new(),
    };
    let mut bytes = tail;
    bytes.extend_from_slice(&footer.to_bytes());
    f.write_all_at(&bytes, end)?;
    f.sync_all()?;
    let sealed = dir.join(format::sealed_name(seq, min, max));
    std::fs::rename(path, &sealed)?;
    if had_seal {
        std::fs::rename(
            crate::seal::seal_path(path),
            crate::seal::seal_path(&sealed),
        )?;
        if let Some(so) = &opts.seal {
            // The footer written here is sealed late (an `L` entry, said
            // so by the verifier) and the head signed.
            let size = end + bytes.len() as u64;
            let mut s = crate::seal::Sealer::open(&sealed, size, so)?;
            s.close()?;
        }
    }
    sync_dir(dir)?;
    let day = summary::day_of(min);
    let summarized = !opts.summary.is_empty();
    if let Err(e) = summarized
        .then(|| summary::append(dir, day, seq, (min, max), &types, &mut tuples))
        .transpose()
    {
        eprintln!(
            "dplog: archive recovery: {}: no summary entry (lookups read it whole): {e}",
            sealed.display()
        );
    }
    eprintln!(
        "dplog: archive recovery: {} sealed with {rows} records",
        path.display()
    );
    Ok(torn)
}
