//! The consumer side: [`ShmReader`], and what it knows of ring files
//! and their producers.

use super::*;

/// `/proc/<pid>/stat` field 22 (start time, clock ticks since boot), or
/// `None` if there is no such process (or its stat cannot be parsed).
pub fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain any
    // byte: fields resume after the last ')'.
    let close = stat.iter().rposition(|&c| c == b')')?;
    let rest = core::str::from_utf8(&stat[close + 1..]).ok()?;
    // Field 3 (state) is the first after ')'; field 22 is the 20th.
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

/// Which ring files [`ShmReader::open`] accepts.
#[derive(Clone, Debug, Default)]
pub struct OpenRules {
    /// Owner uids accepted besides this process's effective uid.
    pub allow_uids: Vec<u32>,
}

/// The consumer side of a ring file, in another process than its
/// producer. It keeps its own copy of the consumer index and of the last
/// producer index it accepted, and checks everything it reads from the
/// file before use: the header once ([`parse_header`], on a copy), the
/// file size on every [`poll`](Self::poll) (a file truncated under it
/// would fault the mapping), every producer index ([`check_tail`]) and
/// every record header ([`check_slots`], on the copied-out slots).
pub struct ShmReader {
    /// The ring file, read-only.
    map: Mapping,
    /// The consumer file, read-write.
    cmap: Mapping,
    file: File,
    path: PathBuf,
    info: RingInfo,
    head: u64,
    last_tail: u64,
    drops_reported: u64,
    /// `drops_reported` per reason ([`split_by_reason`]).
    drops_reported_by_reason: [u64; 4],
    /// When [`take_drops`](Self::take_drops) last read the drop total.
    drops_checked: Option<Instant>,
    /// When the reader was opened, and the ring's age then (wall clock
    /// since its creation time, 0 if that lay in the future): the drop
    /// bound's clock.
    opened: Instant,
    age_at_open_ns: u64,
    size_check: bool,
}

impl core::fmt::Debug for ShmReader {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ShmReader")
            .field("path", &self.path)
            .field("info", &self.info)
            .field("head", &self.head)
            .finish_non_exhaustive()
    }
}

/// What the producer of a ring is doing, as far as the consumer can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProducerState {
    /// Its process runs (same pid and start time) and the ring is live.
    Running,
    /// It closed the ring (dropped its producer).
    Closed,
    /// Its process is gone (no such pid, or another process's start time).
    Dead,
}

impl ShmReader {
    /// Opens and maps a ring file read-only, checking its type, owner and
    /// header, and opens (or creates) its consumer file
    /// ([`consumer_path`]; see the module's layout).
    ///
    /// Errors: [`ShmError::Io`] (not a regular file, a symlink, open or
    /// map failure, the consumer file cannot be made), [`ShmError::Owner`]
    /// for a file of a uid neither this process's nor in `rules`,
    /// [`ShmError::BadHeader`] from [`parse_header`]; [`ShmError::Schema`]
    /// for a bad schema description behind a valid fixed header, after
    /// marking the ring quarantined in its consumer file (its producer
    /// stops waiting and counts drops); [`ShmError::Protocol`], also after
    /// marking it quarantined, when a consumer file kept from an earlier
    /// daemon holds an index the producer's contradicts.
    ///
    /// The consumer index starts where such a kept consumer file says an
    /// earlier daemon freed the ring (0 for a new file).
    pub fn open(path: &Path, rules: &OpenRules) -> Result<Self, ShmError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(path)?;
        let md = file.metadata()?;
        if !md.file_type().is_file() {
            return Err(ShmError::BadHeader("not a regular file".into()));
        }
        // SAFETY: geteuid cannot fail.
        let me = unsafe { libc::geteuid() };
        if md.uid() != me && !rules.allow_uids.contains(&md.uid()) {
            return Err(ShmError::Owner { uid: md.uid() });
        }
        let len = md.len();
        let mut hdr = vec![0u8; SHM_HEADER_BYTES];
        let got = std::os::unix::fs::FileExt::read_at(&file, &mut hdr, 0)?;
        hdr.truncate(got);
        let info = match parse_header(&hdr, len) {
            Err(ShmError::Schema(m)) => {
                // The fixed header is valid (and the file at least a header
                // long): mark the ring quarantined, so a producer blocked
                // on it stops waiting, as for a protocol violation.
                if let Ok(c) = consumer_open_rw(path, &file, rd_u64(&hdr, OFF_NONCE)) {
                    // Release pairs with the producer's Acquire load in
                    // `is_quarantined`.
                    c.u32_at(C_OFF_VERDICT)
                        .store(STATE_QUARANTINED, Ordering::Release);
                }
                return Err(ShmError::Schema(m));
            }
            r => r?,
        };
        // Whole blocks of the filesystem: a hugetlbfs mapping is unmapped
        // only in whole huge pages (the producer sized the file so).
        let block = block_size(&file);
        let map_len = usize::try_from(info.needed_bytes().div_ceil(block) * block)
            .map_err(|_| ShmError::BadHeader("ring larger than the address space".into()))?;
        let mut map = Mapping::new(&file, map_len, false)?;
        map.guard = guard_register(map.ptr as usize, map.len);
        let cmap = consumer_open_rw(path, &file, info.nonce)?;
        // A consumer file this daemon's uid kept from an earlier daemon of
        // the same ring lifetime holds the position that daemon freed (it
        // frees slots only once their records are written): start there,
        // not at 0, or the head would move backwards under the producer.
        // A checkpoint, if there is one, moves it again (`resume_at`).
        // Acquire pairs with the earlier daemon's Release stores
        // (`publish_head`, `publish_reported`).
        let head = cmap.u64_at(C_OFF_HEAD).load(Ordering::Acquire);
        let drops_reported = cmap.u64_at(C_OFF_DROPS_REPORTED).load(Ordering::Acquire);
        // A creation time in the future (a clock set back, or a lying
        // header) counts as now: the drop bound then starts at this open.
        let age_at_open_ns = now_ns().saturating_sub(info.created_ns);
        let mut reader = Self {
            map,
            cmap,
            file,
            path: path.to_path_buf(),
            info,
            head: 0,
            last_tail: 0,
            drops_reported: 0,
            drops_reported_by_reason: [0; 4],
            drops_checked: None,
            opened: Instant::now(),
            age_at_open_ns,
            size_check: true,
        };
        // (A ring already quarantined is not served again: no position.)
        if (head != 0 || drops_reported != 0) && !reader.quarantined() {
            if let Err(e) = reader.resume_at(head, drops_reported) {
                // A position the producer's index contradicts: stop the
                // ring, so a producer blocked on it stops waiting.
                reader.quarantine();
                return Err(ShmError::Protocol(format!(
                    "its consumer file's index {head}: {e}"
                )));
            }
        }
        Ok(reader)
    }

    /// Test hook: [`poll`](Self::poll) skips its file-size check, as if
    /// the file were cut between the check and the copy (the SIGBUS
    /// guard's case).
    #[doc(hidden)]
    pub fn skip_size_check(&mut self) {
        self.size_check = false;
    }

    /// The validated header.
    pub fn info(&self) -> &RingInfo {
        &self.info
    }

    /// The ring file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The consumer index: records below it are consumed.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// The last producer index accepted.
    pub fn tail(&self) -> u64 {
        self.last_tail
    }

    /// Sets the consumer index and the drops already reported (from a
    /// checkpoint), checked against the producer's index. The reported
    /// drops are given to their reasons by the counters as they are now,
    /// in the order of [`DropReason::ALL`]: when drops of several reasons
    /// were still unreported at the checkpoint, the first reports after it
    /// may split them between those reasons differently (their counts are
    /// exact; see [`crate::report`]).
    ///
    /// Errors: [`ShmError::Protocol`] if the producer's index is below
    /// `head` or more than a capacity above it.
    pub fn resume_at(&mut self, head: u64, drops_reported: u64) -> Result<(), ShmError> {
        self.check_size()?;
        // Acquire pairs with the producer's Release store of `tail`.
        let tail = self.map.u64_at(OFF_TAIL).load(Ordering::Acquire);
        check_tail(head, head, tail, self.info.capacity)?;
        self.head = head;
        self.last_tail = head;
        self.drops_reported = drops_reported;
        self.drops_reported_by_reason = [0; 4];
        split_by_reason(
            drops_reported,
            self.drop_counters(),
            &mut self.drops_reported_by_reason,
        );
        Ok(())
    }

    /// The producer's drop counters, in the order of [`DropReason::ALL`].
    fn drop_counters(&self) -> [u64; 4] {
        // Relaxed: statistics; a caller that needs them to cover a total
        // loads the total first, with Acquire (the producer stores each
        // counter before it publishes the total).
        DropReason::ALL.map(|r| self.map.u64_at(drop_offset(r)).load(Ordering::Relaxed))
    }

    /// Drops reported in-band so far (checkpointed with the head).
    pub fn drops_reported(&self) -> u64 {
        self.drops_reported
    }

    fn check_size(&self) -> Result<(), ShmError> {
        let len = self.file.metadata()?.len();
        if len < self.info.needed_bytes() {
            return Err(ShmError::Protocol(format!(
                "file shrank to {len} bytes, below the {} its header declares",
                self.info.needed_bytes()
            )));
        }
        Ok(())
    }

    /// Copies up to `max` published records after the consumer index into
    /// `out` (cleared first; `n × slot_bytes` bytes) and checks them;
    /// returns `n`. The index does not move: call
    /// [`consume`](Self::consume) once they are written.
    ///
    /// Errors: [`ShmError::Protocol`] for a bad producer index or record;
    /// the records before a bad one are left in `out` (whole slots) so the
    /// caller may write them before it quarantines the ring: `Err` then
    /// comes with `out.len() / slot_bytes` good records.
    pub fn poll(&mut self, max: usize, out: &mut Vec<u8>) -> Result<usize, ShmError> {
        out.clear();
        if self.size_check {
            self.check_size()?;
        }
        // Acquire pairs with the producer's Release store of `tail`.
        let tail = self.map.u64_at(OFF_TAIL).load(Ordering::Acquire);
        if self.map.faulted() {
            return Err(ShmError::Protocol(
                "the file was cut short under the mapping (SIGBUS)".into(),
            ));
        }
        check_tail(self.head, self.last_tail, tail, self.info.capacity)?;
        self.last_tail = tail;
        let n = (tail - self.head).min(max as u64) as usize;
        let sb = self.info.slot_bytes as usize;
        out.resize(n * sb, 0);
        let cap = u64::from(self.info.capacity);
        // Two runs: to the end of the slot array, then from its start.
        let first = (
            (self.head & (cap - 1)) as usize,
            n.min((cap - (self.head & (cap - 1))) as usize),
        );
        self.map
            .copy_out(SHM_HEADER_BYTES + first.0 * sb, &mut out[..first.1 * sb]);
        if first.1 < n {
            self.map
                .copy_out(SHM_HEADER_BYTES, &mut out[first.1 * sb..n * sb]);
        }
        if self.map.faulted() {
            out.clear();
            return Err(ShmError::Protocol(
                "the file was cut short under the mapping (SIGBUS)".into(),
            ));
        }
        let (good, err) = check_slots(out, self.info.slot_bytes, &self.info.schemas);
        match err {
            None => Ok(n),
            Some(e) => {
                out.truncate(good * sb);
                Err(e)
            }
        }
    }

    /// Advances the consumer's own index by `n` records (of the last
    /// [`poll`](Self::poll)); the producer sees the room only after
    /// [`publish_head`](Self::publish_head).
    pub fn consume(&mut self, n: usize) {
        self.head = (self.head + n as u64).min(self.last_tail);
    }

    /// Publishes the consumer index to the producer (Release; pairs with
    /// the producer's Acquire load of `head`): the slots below it may be
    /// overwritten. Call after the records are written and checkpointed.
    pub fn publish_head(&self) {
        self.cmap
            .u64_at(C_OFF_HEAD)
            .store(self.head, Ordering::Release);
    }

    /// The ring's state word (any value: a hostile producer writes any).
    pub fn state_word(&self) -> u32 {
        // Acquire pairs with the producer's Release store at drop.
        self.map.u32_at(OFF_STATE).load(Ordering::Acquire)
    }

    /// Whether the producer is running, closed or dead. Read the state
    /// before the last [`poll`](Self::poll) that drains a closed or dead
    /// ring: a producer's records are all published before it closes, and
    /// a dead one publishes nothing more.
    pub fn producer_state(&self) -> ProducerState {
        if self.state_word() == STATE_CLOSED {
            return ProducerState::Closed;
        }
        match process_start_time(self.info.pid) {
            Some(t) if t == self.info.start_time => ProducerState::Running,
            _ => ProducerState::Dead,
        }
    }

    /// Marks the ring quarantined (Release; pairs with the producer's
    /// Acquire load in `is_quarantined`: a producer blocked on it stops
    /// waiting and counts its records dropped).
    pub fn quarantine(&self) {
        self.cmap
            .u32_at(C_OFF_VERDICT)
            .store(STATE_QUARANTINED, Ordering::Release);
    }

    /// True if the consumer file says the ring is quarantined: marked by
    /// [`quarantine`](Self::quarantine), or found so when
    /// [`open`](Self::open) reused the file of this ring lifetime (a
    /// verdict of this user, before a restart: it is never cleared).
    pub fn quarantined(&self) -> bool {
        // Acquire pairs with the Release store in `quarantine`.
        self.cmap.u32_at(C_OFF_VERDICT).load(Ordering::Acquire) == STATE_QUARANTINED
    }

    /// Removes the ring file and its consumer file (once the ring is
    /// drained and its end written).
    pub fn remove_files(&self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(consumer_path(&self.path));
    }

    /// The ring's age in nanoseconds now: wall-clock time since its
    /// creation time as read at [`open`](Self::open) (0 if that lay in
    /// the future), plus monotonic time since then.
    fn age_ns(&self, now: Instant) -> u64 {
        let since_open =
            u64::try_from(now.duration_since(self.opened).as_nanos()).unwrap_or(u64::MAX);
        self.age_at_open_ns.saturating_add(since_open)
    }

    /// The producer's drops not yet reported in-band, split by reason
    /// (drops the reason counters do not cover, corrupted too, are
    /// [`DropDelta::unattributed`]), marking them reported in this reader (the caller checkpoints
    /// [`drops_reported`](Self::drops_reported) and calls
    /// [`publish_reported`](Self::publish_reported) after writing the
    /// report); `Ok(None)` if there are none. The first and last drop
    /// times are the producer's ticks, `first_ns <= last_ns`; the caller
    /// bounds them by the ring's creation and its own clock.
    ///
    /// The drop total is the producer's word, checked as its index is
    /// (see the module's "Drop counters"): it may not move backwards, may
    /// not exceed one drop per nanosecond of the ring's age plus
    /// [`SHM_DROP_SLACK`], and may not grow by more than one drop per
    /// nanosecond since the previous call (since the ring's creation at
    /// the first call) plus [`SHM_DROP_SLACK`].
    ///
    /// Errors: [`ShmError::Protocol`] naming the total and the bound it
    /// broke; nothing is marked reported (quarantine the ring).
    pub fn take_drops(&mut self) -> Result<Option<DropDelta>, ShmError> {
        let now = Instant::now();
        // Acquire pairs with the producer's Release store of the total.
        let total = self.map.u64_at(OFF_DROPPED_TOTAL).load(Ordering::Acquire);
        let since = self.drops_checked.replace(now);
        if total < self.drops_reported {
            return Err(ShmError::Protocol(format!(
                "drop counter moved backwards from {} to {total}",
                self.drops_reported
            )));
        }
        if total == self.drops_reported {
            return Ok(None);
        }
        let age = self.age_ns(now);
        if total > age.saturating_add(SHM_DROP_SLACK) {
            return Err(ShmError::Protocol(format!(
                "drop counter {total} is more than one drop per nanosecond of the ring's age ({age} ns) plus {SHM_DROP_SLACK}"
            )));
        }
        let delta = total - self.drops_reported;
        let elapsed = since.map_or(age, |t| {
            u64::try_from(now.duration_since(t).as_nanos()).unwrap_or(u64::MAX)
        });
        if delta > elapsed.saturating_add(SHM_DROP_SLACK) {
            return Err(ShmError::Protocol(format!(
                "drop counter grew by {delta} to {total} in {elapsed} ns, more than one drop per nanosecond plus {SHM_DROP_SLACK}"
            )));
        }
        // Relaxed: ordered by the Acquire load above.
        let first = self.map.u64_at(OFF_FIRST_DROP).load(Ordering::Relaxed);
        let last = self.map.u64_at(OFF_LAST_DROP).load(Ordering::Relaxed);
        let d = DropDelta {
            dropped: delta,
            by_reason: split_by_reason(
                delta,
                self.drop_counters(),
                &mut self.drops_reported_by_reason,
            ),
            first_ns: first.min(last),
            last_ns: last,
        };
        self.drops_reported = total;
        Ok(Some(d))
    }

    /// Publishes the reported-drops count to the producer (Release; pairs
    /// with its Acquire load when it counts a drop).
    pub fn publish_reported(&self) {
        self.cmap
            .u64_at(C_OFF_DROPS_REPORTED)
            .store(self.drops_reported, Ordering::Release);
    }
}

/// The name part of a ring file name `<name>.<pid>.<nonce>.ring`, if the
/// file name has that shape. The name part is not checked: a consumer
/// checks it with [`ring_name_ok`] before it serves the ring.
pub fn ring_file_name(path: &Path) -> Option<&str> {
    let f = path.file_name()?.to_str()?;
    let stem = f.strip_suffix(SHM_SUFFIX)?;
    if f.starts_with('.') {
        return None;
    }
    let mut parts = stem.rsplitn(3, '.');
    let nonce = parts.next()?;
    let pid = parts.next()?;
    let name = parts.next()?;
    (nonce.len() == 16
        && nonce.bytes().all(|c| c.is_ascii_hexdigit())
        && pid.parse::<u32>().is_ok()
        && !name.is_empty())
    .then_some(name)
}
