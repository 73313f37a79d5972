//! The slot array of a ring: one 128-byte-aligned allocation, or a
//! huge-page-backed mapping for large rings; under loom, one cell a slot.

use core::mem::MaybeUninit;
#[cfg(not(loom))]
use core::ptr::NonNull;
#[cfg(not(loom))]
use std::alloc::{alloc, dealloc, Layout};

use super::RingError;

/// How far ahead of the write position `try_push` prefetches, in bytes.
pub(super) const PREFETCH_AHEAD_BYTES: usize = 2048;

/// Slot arrays of at least this many bytes are mapped on their own and
/// backed by transparent huge pages where the kernel allows it.
///
/// With 4 KiB pages a producer walks the page tables once per 4 KiB of
/// slots (64 records of 64 bytes); measured on the per-call latency bench,
/// that walk is the slowest push of every 64 (100–300 ns under a
/// hypervisor's nested paging). One 2 MiB page covers 32,768 such slots.
/// DPDK rings live in huge-page memzones for the same reason.
#[cfg(all(not(loom), target_os = "linux"))]
const HUGE_FROM_BYTES: usize = 1 << 20;
/// The transparent huge page size on x86-64 and aarch64 (4 KiB granule).
#[cfg(all(not(loom), target_os = "linux"))]
const HUGE_PAGE_BYTES: usize = 2 << 20;

/// The slot array. Outside loom it is one raw 128-byte-aligned allocation;
/// under `--cfg loom` every slot is a `loom::cell::UnsafeCell` so the model
/// checker sees each slot access.
pub(crate) struct Slots<T> {
    #[cfg(not(loom))]
    ptr: NonNull<core::cell::UnsafeCell<MaybeUninit<T>>>,
    /// Length of the anonymous mapping behind `ptr` (a huge-page backed
    /// array), or 0 when `ptr` came from the global allocator.
    #[cfg(not(loom))]
    mapped: usize,
    #[cfg(loom)]
    cells: Box<[loom::cell::UnsafeCell<MaybeUninit<T>>]>,
    pub(super) mask: usize,
    #[cfg_attr(loom, allow(dead_code))]
    pub(super) capacity: usize,
}

impl<T> Slots<T> {
    #[cfg(not(loom))]
    fn layout(capacity: usize) -> Layout {
        Layout::from_size_align(capacity * size_of::<T>().max(1), 128)
            .expect("capacity was validated against MAX_CAPACITY")
    }

    /// Allocates the slot array; `OutOfMemory` instead of aborting when the
    /// allocator refuses (a huge configured capacity).
    pub(super) fn new(capacity: usize) -> Result<Self, RingError> {
        #[cfg(not(loom))]
        {
            let layout = Self::layout(capacity);
            #[cfg(target_os = "linux")]
            if size_of::<T>() != 0 && layout.size() >= HUGE_FROM_BYTES {
                if let Some((ptr, mapped)) = map_huge(layout.size()) {
                    return Ok(Self {
                        ptr: ptr.cast(),
                        mapped,
                        mask: capacity - 1,
                        capacity,
                    });
                }
            }
            let ptr = if size_of::<T>() == 0 {
                NonNull::dangling()
            } else {
                // SAFETY: the layout has non-zero size (capacity ≥ 1, T non-ZST).
                let p = unsafe { alloc(layout) };
                if p.is_null() {
                    return Err(RingError::OutOfMemory(layout.size()));
                }
                // Fault every page in now (zeroing it), as DPDK's memzones
                // are populated at creation: otherwise the producer takes
                // one page fault per 4 KiB of slots (64 records) during
                // the ring's first lap, on the forwarding core, at a few
                // microseconds each.
                // SAFETY: p is a fresh allocation of layout.size() bytes.
                unsafe { p.write_bytes(0, layout.size()) };
                match NonNull::new(p.cast()) {
                    Some(p) => p,
                    None => return Err(RingError::OutOfMemory(layout.size())),
                }
            };
            Ok(Self {
                ptr,
                mapped: 0,
                mask: capacity - 1,
                capacity,
            })
        }
        #[cfg(loom)]
        {
            Ok(Self {
                cells: (0..capacity)
                    .map(|_| loom::cell::UnsafeCell::new(MaybeUninit::uninit()))
                    .collect(),
                mask: capacity - 1,
                capacity,
            })
        }
    }

    /// Pointer to slot `index & mask`.
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) fn ptr(&self, index: usize) -> *mut MaybeUninit<T> {
        // SAFETY: `index & mask < capacity`, so the offset stays inside the
        // allocation made in `new`.
        unsafe { (*self.ptr.as_ptr().add(index & self.mask)).get() }
    }

    /// Hints the CPU to fetch slot `index & mask` for writing
    /// (`prefetchw` on x86-64; nothing elsewhere). Never faults.
    #[inline(always)]
    pub(crate) fn prefetch_write(&self, index: usize) {
        #[cfg(all(not(loom), target_arch = "x86_64"))]
        // SAFETY: `prefetchw` only hints the cache; it cannot fault or
        // change memory, and the address is inside the slot array.
        unsafe {
            core::arch::asm!(
                "prefetchw [{p}]",
                p = in(reg) self.ptr(index),
                options(nostack, preserves_flags, readonly)
            );
        }
        #[cfg(not(all(not(loom), target_arch = "x86_64")))]
        let _ = index;
    }

    /// Writes `v` into slot `index & mask`.
    ///
    /// # Safety
    /// The caller owns the slot under the ring protocol (no reader, no
    /// other writer).
    #[inline(always)]
    pub(crate) unsafe fn write(&self, index: usize, v: T) {
        #[cfg(not(loom))]
        // SAFETY: the caller owns the slot; the pointer is in bounds.
        unsafe {
            self.ptr(index).write(MaybeUninit::new(v))
        };
        #[cfg(loom)]
        self.cells[index & self.mask].with_mut(|p| {
            // SAFETY: the caller owns the slot; loom checks the access.
            unsafe { p.write(MaybeUninit::new(v)) }
        });
    }

    /// Calls `f` on the record in slot `index & mask`.
    ///
    /// # Safety
    /// The slot holds a record published to the caller, and no writer
    /// touches it until the caller releases it.
    #[inline(always)]
    pub(crate) unsafe fn with<R>(&self, index: usize, f: impl FnOnce(&T) -> R) -> R {
        #[cfg(not(loom))]
        {
            // SAFETY: the caller guarantees the slot is initialised and
            // stable for the duration of `f`.
            f(unsafe { (*self.ptr(index)).assume_init_ref() })
        }
        #[cfg(loom)]
        {
            self.cells[index & self.mask].with(|p| {
                // SAFETY: as above; loom checks the access.
                f(unsafe { (*p).assume_init_ref() })
            })
        }
    }
}

impl<T> Drop for Slots<T> {
    fn drop(&mut self) {
        #[cfg(all(not(loom), target_os = "linux"))]
        if self.mapped != 0 {
            // SAFETY: `map_huge` mapped exactly `mapped` bytes at `ptr`;
            // `T: Copy` for every ring element so no destructors are owed.
            unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.mapped) };
            return;
        }
        #[cfg(not(loom))]
        if size_of::<T>() != 0 {
            // SAFETY: allocated in `new` with exactly this layout; `T: Copy`
            // for every ring element so no element destructors are owed.
            unsafe { dealloc(self.ptr.as_ptr().cast(), Self::layout(self.capacity)) }
        }
    }
}

/// Maps `size` bytes (rounded up to whole huge pages) of zeroed anonymous
/// memory aligned to [`HUGE_PAGE_BYTES`], asks for transparent huge pages
/// (`madvise(MADV_HUGEPAGE)`: honoured when
/// `/sys/kernel/mm/transparent_hugepage/enabled` is `madvise` or `always`,
/// ignored under `never`, where 4 KiB pages back it as before) and faults
/// every page in, as [`Slots::new`] does for allocator memory. Returns the
/// aligned start and the mapping's length, or `None` when the kernel
/// refuses the mapping (the caller falls back to the allocator).
#[cfg(all(not(loom), target_os = "linux"))]
fn map_huge(size: usize) -> Option<(NonNull<u8>, usize)> {
    let len = size.checked_next_multiple_of(HUGE_PAGE_BYTES)?;
    let reserve = len.checked_add(HUGE_PAGE_BYTES)?;
    // SAFETY: a fresh private anonymous mapping; no existing memory is
    // touched.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            reserve,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    let start = p as usize;
    let aligned = start.next_multiple_of(HUGE_PAGE_BYTES);
    let head = aligned - start;
    let tail = reserve - head - len;
    // SAFETY: both ranges lie inside the mapping made above, outside
    // [aligned, aligned + len), and are page-aligned (mmap returns
    // page-aligned memory; `aligned` and `len` are huge-page multiples).
    unsafe {
        if head != 0 {
            libc::munmap(p, head);
        }
        if tail != 0 {
            libc::munmap((aligned + len) as *mut libc::c_void, tail);
        }
        // A hint: an error (THP compiled out) leaves 4 KiB pages.
        libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        // Fault every page in now, as the allocator path does (the memory
        // is already zero; the stores take the faults off the record path).
        core::ptr::write_bytes(aligned as *mut u8, 0, len);
    }
    NonNull::new(aligned as *mut u8).map(|p| (p, len))
}

#[cfg(test)]
mod tests {
    use core::mem::size_of;

    use super::*;
    use crate::record::test_record::TestRecord;
    use crate::ring::ring;
    use crate::ring::tests::rec;

    #[cfg(target_os = "linux")]
    #[test]
    fn a_ring_of_a_mebibyte_or_more_is_mapped_on_huge_page_bounds_and_round_trips() {
        let size = size_of::<TestRecord>();
        let cap = (HUGE_FROM_BYTES / size).next_power_of_two();
        let (mut p, mut c) = ring::<TestRecord>(cap).unwrap();
        let slots = &p.shared.slots;
        assert_eq!(slots.ptr(0) as usize % HUGE_PAGE_BYTES, 0, "2 MiB aligned");
        assert_eq!(slots.mapped, (cap * size).next_multiple_of(HUGE_PAGE_BYTES));
        // Two laps and a bit: every slot written and read back in order.
        let n = 2 * cap as u64 + 17;
        let mut next = 0;
        for i in 0..n {
            while p.try_push(rec(i)).is_err() {
                assert_eq!(c.pop().unwrap().timestamp_ns, next);
                next += 1;
            }
        }
        while let Some(r) = c.pop() {
            assert_eq!(r.timestamp_ns, next);
            next += 1;
        }
        assert_eq!(next, n);
        // A small ring stays with the allocator.
        let (p, _c) = ring::<TestRecord>(64).unwrap();
        assert_eq!(p.shared.slots.mapped, 0);
    }
}
