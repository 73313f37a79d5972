//! The SIGBUS guard and the file mappings under it: a reader's mapping
//! of a ring or consumer file that is cut short reads as zeros instead of
//! killing the process.

use super::*;

/// Reader mappings the SIGBUS guard may replace: start address, length
/// and a hit flag per entry (0 start: free). A signal handler cannot lock,
/// so the registry is a fixed array of atomics.
pub(super) struct GuardEntry {
    start: AtomicUsize,
    len: AtomicUsize,
    hit: AtomicBool,
}

pub(super) const GUARD_ENTRIES: usize = 4096;
#[allow(clippy::declare_interior_mutable_const)]
pub(super) const GUARD_FREE: GuardEntry = GuardEntry {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    hit: AtomicBool::new(false),
};
pub(super) static GUARD: [GuardEntry; GUARD_ENTRIES] = [GUARD_FREE; GUARD_ENTRIES];

extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler;
    // si_addr is the faulting address for SIGBUS.
    let addr = unsafe { (*info).si_addr() } as usize;
    for e in &GUARD {
        // Acquire pairs with the Release store of `start` at registration
        // (after `len`).
        let start = e.start.load(Ordering::Acquire);
        let len = e.len.load(Ordering::Relaxed);
        if start != 0 && addr >= start && addr < start + len {
            // SAFETY: replaces exactly a registered reader mapping with
            // anonymous zero pages at the same address (MAP_FIXED): the
            // faulting access is retried on them and the reader finds the
            // hit flag. mmap is a plain system call, safe in a handler.
            unsafe {
                libc::mmap(
                    start as *mut libc::c_void,
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                );
            }
            // Release pairs with the reader's Acquire load after its copy.
            e.hit.store(true, Ordering::Release);
            return;
        }
    }
    // Not a ring's page: the handler installed before the guard, if it
    // was one, else the default action (the process dies as it would
    // have without the guard) when the access is retried.
    // Acquire pairs with the Release stores in `install_sigbus_guard`,
    // made before the guard was installed.
    let prev = PREV_HANDLER.load(Ordering::Acquire);
    let flags = PREV_FLAGS.load(Ordering::Acquire);
    if prev != libc::SIG_DFL && prev != libc::SIG_IGN {
        if flags & libc::SA_SIGINFO != 0 {
            // SAFETY: `prev` is the three-argument handler the process had
            // installed (SA_SIGINFO); called as the kernel would call it.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { core::mem::transmute(prev) };
            f(_sig, info, _ctx);
        } else {
            // SAFETY: `prev` is the one-argument handler the process had
            // installed; called as the kernel would call it.
            let f: extern "C" fn(libc::c_int) = unsafe { core::mem::transmute(prev) };
            f(_sig);
        }
        return;
    }
    // SAFETY: resetting a signal's disposition is async-signal-safe.
    unsafe { libc::signal(libc::SIGBUS, libc::SIG_DFL) };
}

/// The SIGBUS handler (`sa_sigaction`) and flags the process had before
/// [`install_sigbus_guard`]; the guard passes it a fault outside the
/// mappings it guards.
pub(super) static PREV_HANDLER: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);
pub(super) static PREV_FLAGS: core::sync::atomic::AtomicI32 = core::sync::atomic::AtomicI32::new(0);

/// Installs the SIGBUS guard of [`ShmReader`]s (once per process; later
/// calls do nothing): a producer that truncates its ring file under a
/// reader's mapping makes the reader's next access fault with SIGBUS,
/// which would kill the consuming process. With the guard the faulting
/// mapping is replaced by zero pages and the reader's
/// [`poll`](ShmReader::poll) reports the ring as broken instead. A SIGBUS
/// elsewhere goes to the handler the process had installed before, or
/// keeps its default action. A daemon serving rings of other processes
/// calls this at start; a [`ShmProducer`] calls it when it maps its
/// consumer file (the daemon's file, which it reads).
///
/// Errors: the `sigaction` error.
pub fn install_sigbus_guard() -> io::Result<()> {
    static DONE: AtomicBool = AtomicBool::new(false);
    // AcqRel: one installer; nothing else is published through the flag.
    if DONE.swap(true, Ordering::AcqRel) {
        return Ok(());
    }
    // SAFETY: a zeroed sigaction with an SA_SIGINFO handler of the right
    // signature and an empty mask; the previous action is read into a
    // zeroed struct.
    let r = unsafe {
        let mut sa: libc::sigaction = core::mem::zeroed();
        let mut prev: libc::sigaction = core::mem::zeroed();
        sa.sa_sigaction = on_sigbus as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut sa.sa_mask);
        // The previous action is stored before the guard is installed,
        // so the handler always finds it.
        let mut r = libc::sigaction(libc::SIGBUS, core::ptr::null(), &mut prev);
        if r == 0 && prev.sa_sigaction != on_sigbus as *const () as usize {
            // Release pairs with the handler's Acquire loads.
            PREV_FLAGS.store(prev.sa_flags, Ordering::Release);
            PREV_HANDLER.store(prev.sa_sigaction, Ordering::Release);
            r = libc::sigaction(libc::SIGBUS, &sa, core::ptr::null_mut());
        }
        r
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Registers a reader mapping with the guard; the entry index, or `None`
/// when the registry is full (the mapping is then unguarded).
pub(super) fn guard_register(start: usize, len: usize) -> Option<usize> {
    for (i, e) in GUARD.iter().enumerate() {
        // Relaxed: the slot is claimed by the CAS below.
        if e.start.load(Ordering::Relaxed) == 0 {
            e.len.store(len, Ordering::Relaxed);
            e.hit.store(false, Ordering::Relaxed);
            // Release pairs with the handler's Acquire load of `start`:
            // `len` is visible with it.
            if e.start
                .compare_exchange(0, start, Ordering::Release, Ordering::Relaxed)
                .is_ok()
            {
                return Some(i);
            }
        }
    }
    None
}

/// A `MAP_SHARED` mapping of a whole ring file.
pub(super) struct Mapping {
    pub(super) ptr: *mut u8,
    pub(super) len: usize,
    /// Its entry in the SIGBUS guard's registry (readers only).
    pub(super) guard: Option<usize>,
}

// SAFETY: the mapping is plain shared memory; every access through it is
// an atomic, a volatile read or a write to slots the owner holds under the
// ring protocol.
unsafe impl Send for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `file` shared, writable or read-only.
    pub(super) fn new(file: &File, len: usize, writable: bool) -> io::Result<Self> {
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: a fresh shared mapping of `len` bytes of `file`; the
        // kernel picks the address; checked for MAP_FAILED below.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            ptr: p.cast(),
            len,
            guard: None,
        })
    }

    /// True once the SIGBUS guard replaced this mapping (the file was cut
    /// short under it): its contents are zeros since.
    pub(super) fn faulted(&self) -> bool {
        // Acquire pairs with the handler's Release store.
        self.guard
            .is_some_and(|i| GUARD[i].hit.load(Ordering::Acquire))
    }

    /// The 8-byte-aligned atomic at `off` (`off + 8 <= len`, a multiple of
    /// 8: every caller passes a layout constant below the header size).
    #[inline(always)]
    pub(super) fn u64_at(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off % 8 == 0 && off + 8 <= self.len);
        // SAFETY: the mapping is page aligned and at least the header long
        // (checked at creation and open), so `off` is in bounds and 8-byte
        // aligned; AtomicU64 has u64's layout and any bits are valid.
        unsafe { &*self.ptr.add(off).cast::<AtomicU64>() }
    }

    #[inline(always)]
    pub(super) fn u32_at(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off % 4 == 0 && off + 4 <= self.len);
        // SAFETY: as `u64_at`, 4-byte aligned.
        unsafe { &*self.ptr.add(off).cast::<AtomicU32>() }
    }

    /// Copies `out.len()` bytes from offset `off` with volatile 8-byte
    /// reads (another process may write them at the same time: the copy
    /// may be torn, never undefined), `off` and `out.len()` multiples of 8
    /// and `off + out.len() <= len`.
    pub(super) fn copy_out(&self, off: usize, out: &mut [u8]) {
        assert!(off % 8 == 0 && out.len() % 8 == 0 && off + out.len() <= self.len);
        for (i, chunk) in out.chunks_exact_mut(8).enumerate() {
            // SAFETY: in bounds and 8-byte aligned (asserted above; the
            // mapping is page aligned); a volatile read of plain memory.
            let v = unsafe { self.ptr.add(off + i * 8).cast::<u64>().read_volatile() };
            chunk.copy_from_slice(&v.to_ne_bytes());
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if let Some(i) = self.guard {
            // Release: the entry is free for another mapping; the handler
            // no longer matches this range.
            GUARD[i].start.store(0, Ordering::Release);
        }
        // SAFETY: unmaps exactly the mapping made in `new`; no reference
        // into it outlives `self` (all borrow `&self`).
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}
