//! The producer side: [`ShmProducer`] and [`ShmLogProducer`].

use super::*;
use crate::ring::block::{push_burst_waiting, push_waiting, waiting_push};

/// How [`ShmProducer::create`] makes a ring file.
#[derive(Clone, Debug)]
pub struct ShmOptions {
    /// Directory of the ring files (a tmpfs such as `/dev/shm/dplog`, or a
    /// hugetlbfs mount); it must exist.
    pub dir: PathBuf,
    /// Ring name: the file is `<name>.<pid>.<nonce>.ring`. An identifier
    /// (letters, digits, `_`, `-`), at most 32 bytes.
    pub name: String,
    /// Slots, a power of two up to [`SHM_MAX_CAPACITY`].
    pub capacity: usize,
    /// A group that may serve the ring: file mode 0640 and this gid (the
    /// consumer only reads the ring; it writes its position into a
    /// consumer file of its own, which it gives this group too, so the
    /// producer must be a member). `None`: mode 0600.
    pub group: Option<u32>,
    /// The uid the daemon (`dplogd`) runs as, when it is neither this
    /// process's uid nor root: the producer uses a consumer file only if
    /// its owner is this process's effective uid, root or this uid, and
    /// it is writable by its owner only; another file is refused (the
    /// ring is seen as not served: [`ShmProducer::consumer_refusal`],
    /// [`consumer_status`]).
    pub daemon_uid: Option<u32>,
}

pub(super) fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

pub(super) fn random_nonce() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most `b.len()` bytes into `b`.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n == 8 {
        u64::from_ne_bytes(b)
    } else {
        now_ns() ^ (u64::from(std::process::id()) << 32)
    }
}

/// The producer half of a shared-memory ring; the same calls as
/// [`crate::ring::Producer`] (`try_push`, `push`, `try_push_burst`,
/// `push_burst`, `try_push_bulk`, `flush`, `set_publish_every`). One per
/// producer thread: `Send`, not `Sync` or `Clone`.
///
/// `push` waits while the ring is full, for as long as no consumer frees a
/// slot (a consumer that is away is not an error: the daemon may restart),
/// or at most the block timeout ([`set_block_timeout`](Self::set_block_timeout));
/// it gives up (`Err(Disconnected)`) when the consumer quarantined the
/// ring or the timeout passed. A wait of a second with no consumer
/// attached says so once on stderr.
pub struct ShmProducer<T: Record> {
    map: Mapping,
    path: PathBuf,
    slots: *mut u8,
    mask: u64,
    capacity: u64,
    tail: u64,
    published: u64,
    publish_every: u64,
    cached_head: u64,
    block_spins: u32,
    /// The ring's lifetime nonce (its consumer file must carry it).
    nonce: u64,
    /// The daemon's uid, trusted as a consumer file's owner
    /// ([`ShmOptions::daemon_uid`]).
    daemon_uid: Option<u32>,
    /// Why the consumer file found last was refused (`None`: none was).
    refusal: core::cell::RefCell<Option<String>>,
    /// The consumer file, mapped read-only once it exists.
    consumer: core::cell::OnceCell<Mapping>,
    /// No attempt to map the consumer file before this instant (an absent
    /// daemon costs one `open` per millisecond, not one per record).
    next_attach: core::cell::Cell<Option<Instant>>,
    /// The longest a blocked push waits with no slot freed (`None`: for
    /// as long as it takes).
    block_timeout: Option<Duration>,
    /// When the current wait began and the consumer index then: a wait
    /// that sees the same index again goes on from that instant.
    wait_since: core::cell::Cell<Option<(Instant, u64)>>,
    /// The warning that no consumer is attached was printed.
    warned: core::cell::Cell<bool>,
    /// The last push gave up on the block timeout (not a quarantine).
    timed_out: core::cell::Cell<bool>,
    _marker: PhantomData<T>,
}

// SAFETY: the producer owns its mapping; it is used from one thread at a
// time (`&mut self` for every push), as the SPSC protocol requires.
unsafe impl<T: Record> Send for ShmProducer<T> {}

impl<T: Record> core::fmt::Debug for ShmProducer<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ShmProducer")
            .field("path", &self.path)
            .field("capacity", &self.capacity)
            .field("tail", &self.tail)
            .field("cached_head", &self.cached_head)
            .finish_non_exhaustive()
    }
}

impl<T: Record> ShmProducer<T> {
    /// Creates a ring file for records (or slots) of type `T` declaring
    /// `schemas`, mapped and ready: `<dir>/<name>.<pid>.<nonce>.ring`,
    /// mode 0600 (0640 with `group`), its pages faulted in.
    ///
    /// Errors: [`ShmError::Config`] for a name, capacity, slot size
    /// (`size_of::<T>()` must be 32, 64 or 128), a schema larger than the
    /// slot, too many schemas or descriptions larger than
    /// [`SHM_MAX_DESC_BYTES`]; [`ShmError::Io`] for the file (the
    /// directory missing, no space: hugetlbfs without free pages).
    pub fn create(opts: &ShmOptions, schemas: &[&Schema]) -> Result<Self, ShmError> {
        let slot_bytes = size_of::<T>();
        let cfg = |m: String| Err(ShmError::Config(m));
        if !matches!(slot_bytes, 32 | 64 | 128) || core::mem::align_of::<T>() > 128 {
            return cfg(format!(
                "records of {slot_bytes} bytes: a shared-memory ring takes 32-, 64- or 128-byte slots"
            ));
        }
        if !ring_name_ok(&opts.name) {
            return cfg(format!(
                "ring name {:?}: letters, digits, '_' and '-', 1 to {SHM_RING_NAME_MAX} bytes",
                opts.name
            ));
        }
        let cap = opts.capacity;
        if cap == 0 || !cap.is_power_of_two() || cap > SHM_MAX_CAPACITY as usize {
            return cfg(format!(
                "capacity {cap}: a power of two between 1 and {SHM_MAX_CAPACITY}"
            ));
        }
        if schemas.len() > SHM_MAX_SCHEMAS {
            return cfg(format!(
                "{} schemas, a ring declares at most {SHM_MAX_SCHEMAS}",
                schemas.len()
            ));
        }
        for s in schemas {
            if s.size() > slot_bytes || !name_ok(s.name()) {
                return cfg(format!(
                    "schema {} ({} bytes) does not fit a {slot_bytes}-byte slot",
                    s.name(),
                    s.size()
                ));
            }
        }
        let descriptions = encode_descriptions(schemas)?;
        let pid = std::process::id();
        let start_time = process_start_time(pid).ok_or_else(|| {
            ShmError::Io(io::Error::other(
                "cannot read this process's /proc/self/stat",
            ))
        })?;
        let nonce = random_nonce();
        let base = format!("{}.{pid}.{nonce:016x}{SHM_SUFFIX}", opts.name);
        let path = opts.dir.join(&base);
        let tmp = opts.dir.join(format!(".{base}.tmp"));
        let mode = if opts.group.is_some() { 0o640 } else { 0o600 };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        let made = (|| -> Result<Self, ShmError> {
            if let Some(gid) = opts.group {
                // SAFETY: fchown on a descriptor we own; -1 keeps the owner.
                if unsafe { libc::fchown(file.as_raw_fd(), u32::MAX, gid) } != 0 {
                    return Err(io::Error::last_os_error().into());
                }
                // The umask may have cleared the group bit of `mode`.
                std::fs::set_permissions(
                    &tmp,
                    std::os::unix::fs::PermissionsExt::from_mode(0o640),
                )?;
            }
            let need = SHM_HEADER_BYTES as u64 + (cap * slot_bytes) as u64;
            let block = block_size(&file);
            let len = need.div_ceil(block) * block;
            let room = |e: io::Error| no_room(e, len, block, &opts.dir);
            file.set_len(len).map_err(room)?;
            if block <= 4096 {
                // tmpfs allocates on first touch: the fault-in below would
                // die of SIGBUS on a full one. Allocated here, a lack of
                // room is an error (a filesystem without fallocate is
                // left to the fault-in). hugetlbfs reserves at mmap.
                // SAFETY: fallocate on a descriptor we own; no memory passed.
                let r = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len as libc::off_t) };
                if r != 0 && r != libc::EOPNOTSUPP && r != libc::EINVAL {
                    return Err(room(io::Error::from_raw_os_error(r)).into());
                }
            }
            let map = Mapping::new(&file, len as usize, true).map_err(room)?;
            // Fault in every page now (as the in-process ring does), so the
            // producer takes no page fault on its first lap.
            // SAFETY: the mapping is `len` bytes, fresh, not yet shared.
            unsafe { map.ptr.write_bytes(0, len as usize) };
            let mut hdr = vec![0u8; OFF_DESCS + descriptions.len()];
            hdr[OFF_DESC_BYTES..OFF_DESC_BYTES + 4]
                .copy_from_slice(&(descriptions.len() as u32).to_ne_bytes());
            hdr[OFF_DESCS..].copy_from_slice(&descriptions);
            hdr[OFF_VERSION..OFF_VERSION + 4].copy_from_slice(&SHM_VERSION.to_ne_bytes());
            hdr[OFF_HEADER_BYTES..OFF_HEADER_BYTES + 4]
                .copy_from_slice(&(SHM_HEADER_BYTES as u32).to_ne_bytes());
            hdr[OFF_SLOT_BYTES..OFF_SLOT_BYTES + 4]
                .copy_from_slice(&(slot_bytes as u32).to_ne_bytes());
            hdr[OFF_CAPACITY..OFF_CAPACITY + 4].copy_from_slice(&(cap as u32).to_ne_bytes());
            hdr[OFF_PID..OFF_PID + 4].copy_from_slice(&pid.to_ne_bytes());
            hdr[OFF_SCHEMA_COUNT..OFF_SCHEMA_COUNT + 4]
                .copy_from_slice(&(schemas.len() as u32).to_ne_bytes());
            hdr[OFF_START_TIME..OFF_START_TIME + 8].copy_from_slice(&start_time.to_ne_bytes());
            hdr[OFF_NONCE..OFF_NONCE + 8].copy_from_slice(&nonce.to_ne_bytes());
            hdr[OFF_CREATED_NS..OFF_CREATED_NS + 8].copy_from_slice(&now_ns().to_ne_bytes());
            hdr[OFF_STATE..OFF_STATE + 4].copy_from_slice(&STATE_LIVE.to_ne_bytes());
            for (i, s) in schemas.iter().enumerate() {
                let d = &mut hdr[OFF_SCHEMAS + i * DESC_BYTES..OFF_SCHEMAS + (i + 1) * DESC_BYTES];
                d[0..2].copy_from_slice(&s.id().to_ne_bytes());
                d[4..8].copy_from_slice(&(s.size() as u32).to_ne_bytes());
                d[8..16].copy_from_slice(&schema_fingerprint(s).to_ne_bytes());
                d[16..16 + s.name().len()].copy_from_slice(s.name().as_bytes());
            }
            // SAFETY: `hdr` fits the header (the descriptor table is
            // asserted at compile time, the descriptions are bounded by
            // SHM_MAX_DESC_BYTES); nobody else maps the file yet.
            unsafe { core::ptr::copy_nonoverlapping(hdr.as_ptr(), map.ptr, hdr.len()) };
            // The magic last: a reader that sees it sees the whole header
            // (the rename below publishes the file; this orders the bytes
            // for a reader that maps the temporary name anyway).
            core::sync::atomic::fence(Ordering::Release);
            // SAFETY: 8 bytes at offset 0 of the mapping.
            unsafe { core::ptr::copy_nonoverlapping(SHM_MAGIC.as_ptr(), map.ptr, 8) };
            std::fs::rename(&tmp, &path)?;
            // SAFETY: the slots start at SHM_HEADER_BYTES, inside the
            // mapping of at least header + slots bytes.
            let slots = unsafe { map.ptr.add(SHM_HEADER_BYTES) };
            Ok(Self {
                map,
                path: path.clone(),
                slots,
                mask: cap as u64 - 1,
                capacity: cap as u64,
                tail: 0,
                published: 0,
                publish_every: 1,
                cached_head: 0,
                block_spins: crate::ring::DEFAULT_BLOCK_SPINS,
                nonce,
                daemon_uid: opts.daemon_uid,
                refusal: core::cell::RefCell::new(None),
                consumer: core::cell::OnceCell::new(),
                next_attach: core::cell::Cell::new(None),
                block_timeout: None,
                wait_since: core::cell::Cell::new(None),
                warned: core::cell::Cell::new(false),
                timed_out: core::cell::Cell::new(false),
                _marker: PhantomData,
            })
        })();
        if made.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        made
    }

    /// The ring file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Ring capacity in records.
    pub fn capacity(&self) -> usize {
        self.capacity as usize
    }

    /// Records pushed so far (the producer's index).
    pub fn enqueued(&self) -> u64 {
        self.tail
    }

    /// Records published to the consumer so far (the shared tail).
    pub fn committed(&self) -> u64 {
        self.published
    }

    #[inline(always)]
    fn tail_atomic(&self) -> &AtomicU64 {
        self.map.u64_at(OFF_TAIL)
    }

    /// The consumer file's mapping, mapped on first success; `None` while
    /// no valid one exists (the consumer is away). Tries at most once a
    /// millisecond.
    fn consumer(&self) -> Option<&Mapping> {
        if let Some(m) = self.consumer.get() {
            return Some(m);
        }
        let now = Instant::now();
        if self.next_attach.get().is_some_and(|t| now < t) {
            return None;
        }
        self.next_attach.set(Some(now + Duration::from_millis(1)));
        match consumer_open_ro(&self.path, self.nonce, self.daemon_uid) {
            Ok(m) => {
                *self.refusal.borrow_mut() = None;
                Some(self.consumer.get_or_init(|| m))
            }
            Err(why) => {
                if why.is_some() {
                    *self.refusal.borrow_mut() = why;
                }
                None
            }
        }
    }

    /// Forgets a consumer mapping whose file was cut short under it (the
    /// SIGBUS guard replaced it with zeros): the producer sees the
    /// consumer as away until a valid file exists again. One atomic load;
    /// called only where the head is refreshed, never per record.
    fn drop_faulted_consumer(&mut self) {
        if self.consumer.get().is_some_and(Mapping::faulted) {
            self.consumer.take();
            *self.refusal.borrow_mut() = Some(format!(
                "consumer file {} was cut short under the producer's mapping; the ring is not served until dplogd replaces it",
                consumer_path(&self.path).display()
            ));
        }
    }

    /// Why the consumer file of this ring is refused, if the last one
    /// found was (see [`ShmOptions::daemon_uid`]): a message naming the
    /// file, its owner and mode and what is expected. `None` once a
    /// trusted one is mapped. The ring is then not served: the producer
    /// follows its policy as when no daemon runs.
    pub fn consumer_refusal(&self) -> Option<String> {
        // Try to attach now (at most once a millisecond).
        let _ = self.consumer();
        self.refusal.borrow().clone()
    }

    /// The consumer's index: 0 while it has no consumer file.
    fn consumer_head(&self) -> u64 {
        // Acquire pairs with the consumer's Release store of `head`: it
        // has copied out every slot below it.
        self.consumer()
            .map_or(0, |m| m.u64_at(C_OFF_HEAD).load(Ordering::Acquire))
    }

    /// True once a consumer file of this ring exists and is mapped.
    pub fn consumer_attached(&self) -> bool {
        self.consumer().is_some()
    }

    #[inline(always)]
    fn free_slots(&mut self, want: usize) -> usize {
        let mut free = self
            .capacity
            .wrapping_sub(self.tail.wrapping_sub(self.cached_head));
        if free < want as u64 {
            self.flush();
            self.refresh_head();
            free = self
                .capacity
                .wrapping_sub(self.tail.wrapping_sub(self.cached_head));
        }
        free as usize
    }

    /// Refreshes the cached consumer index from the consumer file. A head
    /// outside `tail - capacity ..= tail` (one the consumer never wrote:
    /// memory corruption, a file cut short and read as zeros) is not
    /// taken: the cache keeps the last sane one, so `tail - cached_head`
    /// stays within the capacity and no unread slot is overwritten, now
    /// or on a later push's fast path.
    fn refresh_head(&mut self) {
        self.drop_faulted_consumer();
        let head = self.consumer_head();
        if self.tail.wrapping_sub(head) <= self.capacity {
            self.cached_head = head;
        }
    }

    /// Makes every record pushed so far visible to the consumer (one
    /// Release store of the tail, or nothing if none is pending).
    #[inline]
    pub fn flush(&mut self) {
        if self.tail != self.published {
            self.published = self.tail;
            // Release pairs with the consumer's Acquire load of `tail`.
            self.tail_atomic().store(self.tail, Ordering::Release);
        }
    }

    /// Publishes the tail once every `n` records (see
    /// [`crate::ring::Producer::set_publish_every`]); clamped to
    /// `1..=capacity`. A record a crash catches unpublished is not
    /// committed: only published records survive the producer.
    pub fn set_publish_every(&mut self, n: usize) {
        self.publish_every = (n as u64).clamp(1, self.capacity);
        if self.tail - self.published >= self.publish_every {
            self.flush();
        }
    }

    /// Pause-instruction spins before a waiting push yields (see
    /// [`crate::ring::Producer::set_block_spins`]).
    pub fn set_block_spins(&mut self, spins: u32) {
        self.block_spins = spins;
    }

    #[inline(always)]
    fn write(&mut self, index: u64, rec: T) {
        let off = (index & self.mask) as usize * size_of::<T>();
        // SAFETY: slot `index & mask` is inside the slot array and free
        // (the caller checked `tail - head < capacity`); only this producer
        // writes slots. Slots are size_of::<T>()-aligned (page-aligned
        // array of 32/64/128-byte slots), so an unaligned write is not
        // needed, but `write_unaligned` costs the same and needs no
        // alignment proof.
        unsafe { self.slots.add(off).cast::<T>().write_unaligned(rec) };
    }

    #[inline(always)]
    fn publish(&mut self, n: usize) {
        self.tail += n as u64;
        if self.tail - self.published >= self.publish_every {
            self.published = self.tail;
            // Release pairs with the consumer's Acquire load of `tail`.
            self.tail_atomic().store(self.tail, Ordering::Release);
        }
    }

    /// Copies `rec` into the next slot; `Err(rec)` when the ring is full.
    #[inline]
    pub fn try_push(&mut self, rec: T) -> Result<(), T> {
        if self.free_slots(1) == 0 {
            return Err(rec);
        }
        self.write(self.tail, rec);
        self.publish(1);
        Ok(())
    }

    /// As many of `recs` as fit; one publish. Returns how many.
    #[inline]
    pub fn try_push_burst(&mut self, recs: &[T]) -> usize {
        let n = self.free_slots(recs.len()).min(recs.len());
        for (i, r) in recs[..n].iter().enumerate() {
            self.write(self.tail + i as u64, *r);
        }
        if n > 0 {
            self.publish(n);
        }
        n
    }

    /// All of `recs` or none; returns `recs.len()` or 0.
    #[inline]
    pub fn try_push_bulk(&mut self, recs: &[T]) -> usize {
        if recs.is_empty() || self.free_slots(recs.len()) < recs.len() {
            return 0;
        }
        self.try_push_burst(recs)
    }

    /// True once the consumer quarantined the ring.
    pub fn is_quarantined(&self) -> bool {
        // Acquire pairs with the consumer's Release store of the verdict.
        self.consumer()
            .is_some_and(|m| m.u32_at(C_OFF_VERDICT).load(Ordering::Acquire) == STATE_QUARANTINED)
    }

    /// True once the ring stopped taking records: for a shared-memory
    /// ring, once the consumer quarantined it ([`is_quarantined`](Self::is_quarantined)),
    /// as an in-process ring stops on a protocol violation.
    pub fn is_stopped(&self) -> bool {
        self.is_quarantined()
    }

    /// One wait step of a blocked push; true, before any step, once the
    /// consumer quarantined the ring (it will free no slot) or the block
    /// timeout passed with no slot freed. A consumer that is not attached,
    /// or went away, is waited for: one may attach and drain the file
    /// later.
    fn wait(&self, steps: &mut WaitSteps) -> bool {
        if self.is_quarantined() {
            return true;
        }
        // The clock is read only once the pause spins are used up (the
        // yields and sleeps of a wait that lasts).
        if steps.spun(self.block_spins) && self.waited_out() {
            self.timed_out.set(true);
            return true;
        }
        steps.step(self.block_spins);
        false
    }

    /// Whether this wait has lasted the block timeout with no slot freed;
    /// after a second with no consumer attached, says so once on stderr.
    #[cold]
    fn waited_out(&self) -> bool {
        let now = Instant::now();
        let since = match self.wait_since.get() {
            Some((t, head)) if head == self.cached_head => t,
            _ => {
                self.wait_since.set(Some((now, self.cached_head)));
                now
            }
        };
        let waited = now.duration_since(since);
        if !self.warned.get() && waited >= Duration::from_secs(1) && !self.consumer_attached() {
            self.warned.set(true);
            eprintln!(
                "dplog: ring {}: full for {} ms and no consumer attached (no dplogd serves {}{}); waiting under block{}",
                self.path.display(),
                waited.as_millis(),
                self.path.parent().map_or(Path::new("."), |d| d).display(),
                self.refusal
                    .borrow()
                    .as_ref()
                    .map_or(String::new(), |r| format!(": {r}")),
                if self.block_timeout.is_some() {
                    " until the block timeout"
                } else {
                    " for as long as it takes (no block timeout set)"
                }
            );
        }
        self.block_timeout.is_some_and(|t| waited >= t)
    }

    /// The longest a blocked push ([`push`](Self::push),
    /// [`push_burst`](Self::push_burst), a `block` policy's log) waits
    /// while no slot is freed before it gives up (`Err(Disconnected)`);
    /// `None` (the default): for as long as it takes. Later pushes that
    /// find the ring still full, with no slot freed since, give up after
    /// the pause spins (the timeout has passed for them too); a slot freed
    /// starts the count again. Measured from the end of the pause spins,
    /// with up to 1 ms more (the sleep between tries).
    pub fn set_block_timeout(&mut self, timeout: Option<Duration>) {
        self.block_timeout = timeout;
    }

    /// The block timeout ([`set_block_timeout`](Self::set_block_timeout)).
    pub fn block_timeout(&self) -> Option<Duration> {
        self.block_timeout
    }

    /// Whether the last push that gave up did so on the block timeout;
    /// cleared by [`take_timed_out`](Self::take_timed_out).
    pub fn take_timed_out(&self) -> bool {
        self.timed_out.replace(false)
    }

    /// Pushes `rec`, waiting while the ring is full (spin, yield, then
    /// sleep up to 1 ms between tries). `Err(Disconnected(rec))` only if
    /// the consumer quarantined the ring or the block timeout passed
    /// ([`set_block_timeout`](Self::set_block_timeout)).
    #[inline]
    pub fn push(&mut self, rec: T) -> Result<(), Disconnected<T>> {
        push_waiting(self, rec)
    }

    /// Pushes all of `recs`, waiting while full; `Err(Disconnected(k))`
    /// after `k` if the consumer quarantined the ring or the block timeout
    /// passed.
    pub fn push_burst(&mut self, recs: &[T]) -> Result<(), Disconnected<usize>> {
        push_burst_waiting(self, recs)
    }

    /// Fill level, refreshing the consumer index (one Acquire load).
    pub fn fill(&mut self) -> usize {
        self.refresh_head();
        self.tail.wrapping_sub(self.cached_head).min(self.capacity) as usize
    }

    /// Fill level from the cached consumer index (an upper bound).
    pub fn fill_upper_bound(&self) -> usize {
        self.tail.wrapping_sub(self.cached_head).min(self.capacity) as usize
    }

    /// Counts `n` records dropped for `reason` at `now`
    /// ([`crate::tsc::now_ticks`]); the consumer reports them in-band when
    /// it next drains the ring.
    pub fn count_dropped(&mut self, reason: DropReason, n: u64, now: u64) {
        let m = &self.map;
        let c = m.u64_at(drop_offset(reason));
        // Relaxed: single-writer statistic; published by the Release
        // store of the total below.
        c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
        let total = m.u64_at(OFF_DROPPED_TOTAL).load(Ordering::Relaxed);
        // Acquire pairs with the consumer's Release store of
        // `drops_reported`: every earlier drop reported, this one opens a
        // new interval (0 reported while there is no consumer file mapped;
        // attaching is `free_slots`'s, so a drop reads no clock).
        let reported = self.consumer.get().map_or(0, |c| {
            c.u64_at(C_OFF_DROPS_REPORTED).load(Ordering::Acquire)
        });
        if reported == total {
            m.u64_at(OFF_FIRST_DROP).store(now, Ordering::Relaxed);
        }
        // Relaxed: published by the Release store of the total below.
        m.u64_at(OFF_LAST_DROP).store(now, Ordering::Relaxed);
        // Release pairs with the consumer's Acquire load of the total.
        m.u64_at(OFF_DROPPED_TOTAL)
            .store(total + n, Ordering::Release);
    }

    /// Records dropped so far, every reason.
    pub fn dropped(&self) -> u64 {
        // Relaxed: own single-writer counter.
        self.map.u64_at(OFF_DROPPED_TOTAL).load(Ordering::Relaxed)
    }

    /// Records dropped so far for `reason` (the ring's own per-reason
    /// counter; they add up to [`dropped`](Self::dropped)).
    pub fn dropped_for(&self, reason: DropReason) -> u64 {
        // Relaxed: own single-writer counter.
        self.map.u64_at(drop_offset(reason)).load(Ordering::Relaxed)
    }
}

// The ring producers' one waiting push loop ([`push_waiting`],
// [`push_burst_waiting`]) with the shared-memory wait step.
waiting_push!(ShmProducer, |p, steps| p.wait(steps));

impl<T: Record> Drop for ShmProducer<T> {
    fn drop(&mut self) {
        self.flush();
        // Release pairs with the consumer's Acquire load of the state:
        // once it sees CLOSED it sees the last tail.
        let _ = self.map.u32_at(OFF_STATE).compare_exchange(
            STATE_LIVE,
            STATE_CLOSED,
            Ordering::Release,
            Ordering::Relaxed,
        );
    }
}

/// A shared-memory producer with the logger's backpressure policy: the
/// same [`log`](Self::log) / [`log_burst`](Self::log_burst) as
/// [`LogProducer`](crate::LogProducer). Dereferences to [`ShmProducer`].
pub struct ShmLogProducer<R: Record> {
    inner: ShmProducer<R>,
    policy: Policy<R>,
}

impl<R: Record> core::fmt::Debug for ShmLogProducer<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ShmLogProducer")
            .field("inner", &self.inner)
            .field("policy", &self.policy.policy)
            .finish_non_exhaustive()
    }
}

// `log`, `log_burst` and the `Deref` to the ring producer are one-line
// delegations to the one `Policy` in each policy front end (`LogProducer`,
// `SharedProducer`, `ShmLogProducer`); they are written out per kind
// because each one's docs say what its own ring does when full or
// disconnected, which a shared macro would have to take as arguments.
impl<R: Record> ShmLogProducer<R> {
    /// Creates the ring file ([`ShmProducer::create`]) with `opts`, the
    /// capacity taken from `cfg.ring_capacity` when `opts.capacity` is 0,
    /// and the policy, block spins and publish interval of `cfg`; records
    /// of `schemas`, priorities under `degrade` by `rules`.
    ///
    /// Errors: as [`ShmProducer::create`].
    pub fn create(
        opts: &ShmOptions,
        cfg: &LoggerConfig,
        schemas: &[&Schema],
        rules: RecordRules<R>,
    ) -> Result<Self, ShmError> {
        let mut opts = opts.clone();
        if opts.capacity == 0 {
            opts.capacity = cfg.ring_capacity;
        }
        let mut inner = ShmProducer::create(&opts, schemas)?;
        inner.set_block_spins(cfg.block_spins);
        inner.set_publish_every(cfg.publish_every);
        let mut pcfg = cfg.clone();
        pcfg.ring_capacity = opts.capacity;
        Ok(Self {
            inner,
            policy: Policy::new(&pcfg, rules.priority),
        })
    }

    /// Hands `rec` to the ring under the policy: `block` waits (while no
    /// consumer drains, for as long as it takes, or up to the block
    /// timeout, then drops and counts it as disconnected), `drop_newest` drops and
    /// counts, `degrade` sheds low priorities above the watermark. Returns
    /// `false` if the record was not enqueued.
    #[inline]
    pub fn log(&mut self, rec: R) -> bool {
        self.policy.log(&mut self.inner, rec)
    }

    /// [`log`](Self::log) for a burst; returns how many were enqueued.
    #[inline]
    pub fn log_burst(&mut self, recs: &[R]) -> usize {
        self.policy.log_burst(&mut self.inner, recs)
    }

    /// The policy applied.
    pub fn policy(&self) -> Backpressure {
        self.policy.policy
    }
}

impl<R: Record> core::ops::Deref for ShmLogProducer<R> {
    type Target = ShmProducer<R>;
    fn deref(&self) -> &ShmProducer<R> {
        &self.inner
    }
}

impl<R: Record> core::ops::DerefMut for ShmLogProducer<R> {
    fn deref_mut(&mut self) -> &mut ShmProducer<R> {
        &mut self.inner
    }
}
