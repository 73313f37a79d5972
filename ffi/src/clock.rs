//! `dplog_now_ns`: the wall clock for records' `timestamp_ns`;
//! `dplog_now_ticks`: the TSC clock of `DPLOG_FIELD_TSC_TIMESTAMP` fields.

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

/// The library's producer clock, for a record field of kind
/// `DPLOG_FIELD_TSC_TIMESTAMP`: the x86-64 time-stamp counter (`rdtsc`)
/// when the CPU reports an invariant TSC (CPUID 0x80000007 EDX bit 8),
/// else `CLOCK_REALTIME` nanoseconds, exactly as the consumer expects (it
/// converts with its own calibration against `CLOCK_REALTIME`,
/// recalibrated every second; a binary log records that calibration).
/// A raw `__rdtsc()` is the same on a machine with an invariant TSC;
/// this call is right on every machine.
///
/// Errors: `DPLOG_ERR_NULL`. Thread-safety: any thread. Cost: one `rdtsc`
/// (~10 ns) after the first call, which probes the CPU once.
///
/// # Safety
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_now_ticks(out: *mut u64) -> dplog_result {
    guard(|| {
        if out.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_now_ticks: out is NULL");
        }
        let now = dplog::tsc::now_ticks();
        // SAFETY: non-NULL, writable.
        unsafe { out.write(now) };
        DPLOG_OK
    })
}
