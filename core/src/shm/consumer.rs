//! The consumer file (`<ring file>.consumer`): its path, the producer's
//! trust in it, and the consumer's creation and opening of it.

use super::*;

/// The consumer file of the ring file at `ring`: `<ring>.consumer`.
pub fn consumer_path(ring: &Path) -> PathBuf {
    let mut p = ring.as_os_str().to_owned();
    p.push(SHM_CONSUMER_SUFFIX);
    PathBuf::from(p)
}

/// Why a producer refuses the consumer file `path` whose `fstat` is `md`,
/// or `None` if it trusts it: a regular file, writable by its owner only
/// (no group or other write bit), owned by this process's effective uid,
/// root, or `daemon_uid` (the uid the daemon runs as,
/// [`ShmOptions::daemon_uid`]). Anyone who may create files in the ring
/// directory could otherwise plant a consumer file (the ring's nonce is
/// in its name) that moves the producer's view of the consumer index
/// (unread records overwritten) or sets the verdict (logging stops).
pub(super) fn consumer_untrusted(
    path: &Path,
    md: &std::fs::Metadata,
    daemon_uid: Option<u32>,
) -> Option<String> {
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    let mode = md.mode() & 0o7777;
    let owner_ok = md.uid() == me || md.uid() == 0 || Some(md.uid()) == daemon_uid;
    if md.file_type().is_file() && mode & 0o022 == 0 && owner_ok {
        return None;
    }
    let daemon = match daemon_uid {
        Some(u) => format!("the daemon's uid {u}"),
        None => "the daemon's uid if one is given (ShmOptions::daemon_uid, dplog-nat --log-ring-daemon-uid, dplog_attach_daemon)".into(),
    };
    Some(format!(
        "consumer file {} refused: {}owned by uid {} with mode {mode:04o}; a producer uses only a regular file owned by itself (uid {me}), root or {daemon}, and not writable by group or others; the ring is not served until dplogd replaces it (remove the file)",
        path.display(),
        if md.file_type().is_file() { "" } else { "not a regular file, " },
        md.uid(),
    ))
}

/// The lifetime nonce in a ring file's name `<name>.<pid>.<nonce>.ring`.
pub(super) fn nonce_of_name(ring: &Path) -> Option<u64> {
    ring_file_name(ring)?;
    let stem = ring.file_name()?.to_str()?.strip_suffix(SHM_SUFFIX)?;
    u64::from_str_radix(stem.rsplit('.').next()?, 16).ok()
}

/// What the consumer file of a ring says, as [`consumer_status`] reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConsumerStatus {
    /// No complete consumer file of this ring's lifetime: no daemon serves
    /// the ring (yet).
    Absent,
    /// A consumer file exists but the producer refuses it (owner or mode;
    /// see [`ShmOptions::daemon_uid`]): the ring is not served. The
    /// message names the file, its owner and mode and what is expected.
    Refused(String),
    /// The daemon serves the ring.
    Served,
    /// The daemon quarantined the ring (verdict [`STATE_QUARANTINED`]).
    Quarantined,
}

/// What the consumer file of the ring file at `ring` says, checked as
/// the producer checks it before mapping it: the owner and mode of the
/// opened file (`fstat`; see [`ConsumerStatus::Refused`]), then magic,
/// version and the lifetime nonce of the ring's file name, so a verdict
/// of another lifetime never counts. `daemon_uid` as
/// [`ShmOptions::daemon_uid`]. Reads the file with `pread(2)` instead
/// of mapping it, for a watcher beside the producer (a dataplane's
/// monitor thread) that has only the ring's path; the producer itself
/// asks [`ShmProducer::is_quarantined`] and
/// [`ShmProducer::consumer_refusal`].
pub fn consumer_status(ring: &Path, daemon_uid: Option<u32>) -> ConsumerStatus {
    use std::os::unix::fs::FileExt;
    let path = consumer_path(ring);
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(&path)
    else {
        return ConsumerStatus::Absent;
    };
    let Ok(md) = f.metadata() else {
        return ConsumerStatus::Absent;
    };
    if let Some(why) = consumer_untrusted(&path, &md, daemon_uid) {
        return ConsumerStatus::Refused(why);
    }
    let mut b = [0u8; C_OFF_VERDICT + 4];
    if f.read_exact_at(&mut b, 0).is_err() {
        return ConsumerStatus::Absent;
    }
    let valid = b[C_OFF_MAGIC..C_OFF_MAGIC + 8] == SHM_CONSUMER_MAGIC
        && rd_u32(&b, C_OFF_VERSION) == SHM_CONSUMER_VERSION
        && Some(rd_u64(&b, C_OFF_NONCE)) == nonce_of_name(ring);
    if !valid {
        ConsumerStatus::Absent
    } else if rd_u32(&b, C_OFF_VERDICT) == STATE_QUARANTINED {
        ConsumerStatus::Quarantined
    } else {
        ConsumerStatus::Served
    }
}

/// Whether the consumer file of the ring file at `ring` says its consumer
/// quarantined the ring (verdict [`STATE_QUARANTINED`]); `false` while
/// there is no complete, trusted consumer file of the ring's lifetime.
/// [`consumer_status`] with `daemon_uid` as [`ShmOptions::daemon_uid`].
pub fn consumer_quarantined(ring: &Path, daemon_uid: Option<u32>) -> bool {
    consumer_status(ring, daemon_uid) == ConsumerStatus::Quarantined
}

/// `e` of sizing or mapping a ring file of `len` bytes in `dir` (whose
/// filesystem's pages are `block` bytes), with the size and what to do
/// when it is a lack of memory or room (`ENOMEM`, `ENOSPC`): on hugetlbfs
/// (pages above 4 KiB) reserve huge pages or raise the mount's `size=`,
/// on tmpfs raise its `size=`. Other errors are returned as they are.
pub(super) fn no_room(e: io::Error, len: u64, block: u64, dir: &Path) -> io::Error {
    if !matches!(e.raw_os_error(), Some(libc::ENOMEM | libc::ENOSPC)) {
        return e;
    }
    let hint = if block > 4096 {
        format!(
            "{dir} is hugetlbfs with {block}-byte pages: this ring takes {} of them, and dplogd's consumer file one more; reserve enough free huge pages (sysctl vm.nr_hugepages=N; see HugePages_Free in /proc/meminfo) and check the mount's size= option, or use a smaller [ring] capacity",
            len / block,
            dir = dir.display()
        )
    } else {
        format!(
            "check the free memory and the size= option of the filesystem of {} (e.g. tmpfs /dev/shm), or use a smaller [ring] capacity",
            dir.display()
        )
    };
    io::Error::new(e.kind(), format!("a ring file of {len} bytes: {e}; {hint}"))
}

/// The block size of `file`'s filesystem (the huge page size on
/// hugetlbfs), 4096 if it cannot be read.
pub(super) fn block_size(file: &File) -> u64 {
    // SAFETY: fstatfs fills the zeroed struct for our descriptor.
    unsafe {
        let mut st: libc::statfs = core::mem::zeroed();
        if libc::fstatfs(file.as_raw_fd(), &mut st) == 0 && st.f_bsize > 0 {
            st.f_bsize as u64
        } else {
            4096
        }
    }
}

/// Whether the mapped consumer file `m` is a valid one of the ring
/// lifetime `nonce` (magic, version, nonce).
pub(super) fn consumer_valid(m: &Mapping, nonce: u64) -> bool {
    // Acquire pairs with the creator's Release store of the magic:
    // the fields below are the ones written before it.
    let magic = m.u64_at(C_OFF_MAGIC).load(Ordering::Acquire);
    // Relaxed: ordered by the Acquire load of the magic.
    magic == u64::from_ne_bytes(SHM_CONSUMER_MAGIC)
        && m.u32_at(C_OFF_VERSION).load(Ordering::Relaxed) == SHM_CONSUMER_VERSION
        && m.u64_at(C_OFF_NONCE).load(Ordering::Relaxed) == nonce
}

/// Opens the consumer file of the ring at `ring` (whose open file is
/// `ring_file`, of lifetime `nonce`) for the consumer, read-write: the
/// existing one if it is this user's and of this lifetime, else a new one
/// (mode 0640, the ring file's group), made under a temporary name and
/// renamed over any other.
///
/// A reused file keeps its head, reported drops and verdict: all three
/// are of this ring lifetime (the nonce), written by this user.
///
/// Errors: [`ShmError::Io`] creating, sizing, chown-ing, mapping or
/// renaming it (the ring's directory not writable by the consumer, the
/// consumer not in the ring's group, no space; another user's file in
/// its place in a sticky directory), the message naming the file.
pub(super) fn consumer_open_rw(
    ring: &Path,
    ring_file: &File,
    nonce: u64,
) -> Result<Mapping, ShmError> {
    consumer_open_rw_unnamed(ring, ring_file, nonce).map_err(|e| match e {
        // `Other`: the message is complete (`rename_refused`).
        ShmError::Io(e) if e.kind() != io::ErrorKind::Other => ShmError::Io(io::Error::new(
            e.kind(),
            format!(
                "the consumer file {} (the daemon needs write access to the ring directory): {e}",
                consumer_path(ring).display()
            ),
        )),
        other => other,
    })
}

/// [`consumer_open_rw`] but for the file's name in its errors.
pub(super) fn consumer_open_rw_unnamed(
    ring: &Path,
    ring_file: &File,
    nonce: u64,
) -> Result<Mapping, ShmError> {
    let path = consumer_path(ring);
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(&path)
    {
        let md = f.metadata()?;
        // Only its own file, writable by itself only: a verdict or head
        // someone else could have written is not reused (the file is
        // replaced, zeroed).
        if md.file_type().is_file()
            && md.uid() == me
            && md.mode() & 0o022 == 0
            && md.len() >= SHM_CONSUMER_BYTES as u64
            && md.len() <= CONSUMER_MAX_BYTES
        {
            let mut m = Mapping::new(&f, md.len() as usize, true)?;
            m.guard = guard_register(m.ptr as usize, m.len);
            if consumer_valid(&m, nonce) && !m.faulted() {
                return Ok(m);
            }
        }
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o640)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)?;
    let made = (|| -> Result<Mapping, ShmError> {
        let gid = ring_file.metadata()?.gid();
        // SAFETY: fchown on a descriptor we own; -1 keeps the owner.
        if unsafe { libc::fchown(f.as_raw_fd(), u32::MAX, gid) } != 0 {
            let e = io::Error::last_os_error();
            return Err(ShmError::Io(io::Error::new(
                e.kind(),
                format!("giving the consumer file the ring's group {gid}: {e}"),
            )));
        }
        // The umask may have cleared the group bit.
        std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o640))?;
        let block = block_size(&f);
        let len = (SHM_CONSUMER_BYTES as u64).div_ceil(block) * block;
        // One ftruncate, then only the mapping: hugetlbfs takes no write.
        f.set_len(len)?;
        let mut m = Mapping::new(&f, len as usize, true)?;
        m.guard = guard_register(m.ptr as usize, m.len);
        // Relaxed: nobody maps the file yet; the fence below orders these
        // before the magic.
        m.u32_at(C_OFF_VERSION)
            .store(SHM_CONSUMER_VERSION, Ordering::Relaxed);
        m.u64_at(C_OFF_NONCE).store(nonce, Ordering::Relaxed);
        // Release pairs with the producer's Acquire load of the magic in
        // `consumer_valid`.
        m.u64_at(C_OFF_MAGIC)
            .store(u64::from_ne_bytes(SHM_CONSUMER_MAGIC), Ordering::Release);
        std::fs::rename(&tmp, &path).map_err(|e| rename_refused(&path, me, e))?;
        Ok(m)
    })();
    if made.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    made
}

/// The error of renaming the daemon's new consumer file over `path`: on
/// `EPERM`/`EACCES` with a file of another user at `path` in a sticky
/// directory (mode 1777 or 1770: only a file's owner, the directory's
/// owner or root may replace it), a message naming the file, its owner
/// and mode and the way out; else `e` with the file named. Kind
/// [`io::ErrorKind::Other`] when the message is complete.
pub(super) fn rename_refused(path: &Path, me: u32, e: io::Error) -> ShmError {
    let dir = path.parent().unwrap_or(Path::new("."));
    if matches!(e.raw_os_error(), Some(libc::EPERM | libc::EACCES)) {
        if let (Ok(old), Ok(d)) = (std::fs::symlink_metadata(path), std::fs::metadata(dir)) {
            if old.uid() != me && d.mode() & libc::S_ISVTX != 0 {
                return ShmError::Io(io::Error::other(format!(
                    "cannot replace the consumer file {} ({e}): it is owned by uid {} (mode {:04o}), not by this daemon (uid {me}), and {} is sticky (mode {:04o}), so only its owner, the directory's owner or root may replace it; the ring is not served until that file is removed",
                    path.display(),
                    old.uid(),
                    old.mode() & 0o7777,
                    dir.display(),
                    d.mode() & 0o7777,
                )));
            }
        }
    }
    ShmError::Io(e)
}

/// The producer's read-only mapping of the consumer file of the ring at
/// `ring` of lifetime `nonce`: `Ok` if it exists, is trusted
/// ([`consumer_untrusted`], on the opened descriptor: no race with a
/// rename), is a regular file of [`SHM_CONSUMER_BYTES`] to 1 GiB and
/// carries the magic, version and nonce; `Err(None)` while there is no
/// such file (the daemon is away or still making it), `Err(Some(why))`
/// when the file there is refused. The mapping is under the SIGBUS
/// guard: a file cut short under it reads as zeros and
/// [`Mapping::faulted`] says so, instead of the producer dying.
pub(super) fn consumer_open_ro(
    ring: &Path,
    nonce: u64,
    daemon_uid: Option<u32>,
) -> Result<Mapping, Option<String>> {
    let path = consumer_path(ring);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(&path)
        .map_err(|_| None)?;
    let md = f.metadata().map_err(|_| None)?;
    if let Some(why) = consumer_untrusted(&path, &md, daemon_uid) {
        return Err(Some(why));
    }
    if md.len() < SHM_CONSUMER_BYTES as u64 || md.len() > CONSUMER_MAX_BYTES {
        return Err(None);
    }
    // Without the guard a cut file would kill the process on the next
    // read of the head: refuse to map it unguarded.
    install_sigbus_guard().map_err(|e| {
        Some(format!(
            "consumer file {}: installing the SIGBUS guard: {e}",
            path.display()
        ))
    })?;
    let mut m = Mapping::new(&f, md.len() as usize, false).map_err(|_| None)?;
    m.guard = guard_register(m.ptr as usize, m.len);
    if m.guard.is_none() {
        return Err(Some(format!(
            "consumer file {}: the SIGBUS guard has no free entry ({GUARD_ENTRIES} mappings guarded)",
            path.display()
        )));
    }
    if consumer_valid(&m, nonce) && !m.faulted() {
        Ok(m)
    } else {
        Err(None)
    }
}
