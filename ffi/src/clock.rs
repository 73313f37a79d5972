//! `dplog_now_ns`: the wall clock for records' `timestamp_ns`.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::result::{dplog_result, fail, guard, DPLOG_ERR_NULL, DPLOG_OK};

/// Nanoseconds since the Unix epoch (CLOCK_REALTIME), for `timestamp_ns`.
///
/// Errors: `DPLOG_ERR_NULL`. Thread-safety: any thread. Cost: one vDSO
/// clock read (~20 ns); hot loops may read it once per burst.
///
/// # Safety
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_now_ns(out: *mut u64) -> dplog_result {
    guard(|| {
        if out.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_now_ns: out is NULL");
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        // SAFETY: non-NULL, writable.
        unsafe { out.write(now) };
        DPLOG_OK
    })
}
