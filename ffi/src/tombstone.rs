//! Liveness of C handles: the magic word every logger and producer
//! carries, its check, and the tombstone list that keeps closed handles'
//! memory valid for the life of the process (so use after close and double
//! free are detectable errors).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::result::{dplog_result, fail, DPLOG_ERR_CLOSED, DPLOG_ERR_INVALID_ARG};

pub(crate) const MAGIC_LIVE: u32 = 0x6470_6c67; // "dplg"
pub(crate) const MAGIC_DEAD: u32 = 0xdead_0d0e;

/// Addresses of closed handles and freed producers. They are never freed:
/// a stale pointer keeps pointing at a dead-marked object. Holding them
/// here keeps them reachable (no leak report from LeakSanitizer/valgrind).
static TOMBSTONES: Mutex<Vec<usize>> = Mutex::new(Vec::new());

pub(crate) fn bury(addr: usize) {
    lock(&TOMBSTONES).push(addr);
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[inline(always)]
pub(crate) fn check_magic(m: &AtomicU32, what: &str) -> Result<(), dplog_result> {
    // Relaxed: the magic word only changes under the handle's own
    // discipline (close/free); its partner is the Release store in
    // close/free, which is ordered for the same handle by the state mutex
    // (logger) or by the single-thread rule (producer).
    match m.load(Ordering::Relaxed) {
        MAGIC_LIVE => Ok(()),
        other => Err(bad_magic(other, what)),
    }
}

#[cold]
#[inline(never)]
fn bad_magic(magic: u32, what: &str) -> dplog_result {
    if magic == MAGIC_DEAD {
        fail(DPLOG_ERR_CLOSED, format!("{what} is closed or freed"))
    } else {
        fail(
            DPLOG_ERR_INVALID_ARG,
            format!("pointer is not a {what} (bad magic word)"),
        )
    }
}
