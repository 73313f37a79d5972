//! `dplog_now_ns`: the wall clock for records' `timestamp_ns`;
//! `dplog_now_ticks`: the TSC clock of `DPLOG_FIELD_TSC_TIMESTAMP` fields;
//! `dplog_clock_source`: which clock that is on this machine (the inline
//! `dplog_now_ticks` of `dplog_inline.h` asks it once).

use std::time::{SystemTime, UNIX_EPOCH};

use crate::result::{dplog_result, fail, guard, DPLOG_ERR_NULL, DPLOG_OK};

/// Nanoseconds since the Unix epoch (CLOCK_REALTIME), for `timestamp_ns`
/// and other `DPLOG_FIELD_NS_TIMESTAMP` fields.
///
/// Errors: `DPLOG_ERR_NULL`. Thread-safety: any thread. Cost: one vDSO
/// clock read (20–40 ns, more where the kernel's clocksource is not the
/// TSC); a hot loop stamps its own record types with `dplog_now_ticks`
/// (a `DPLOG_FIELD_TSC_TIMESTAMP` field, inline `rdtsc`), or reads this
/// once per burst (see `docs/time-and-clocks.md`).
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
/// Inline: with GCC or Clang on x86-64 (and without `DPLOG_NO_INLINE`),
/// `dplog.h` compiles `dplog_now_ticks(&t)` into the caller as one
/// `rdtsc` once `dplog_clock_source` (asked on the first call of each
/// translation unit) said `DPLOG_CLOCK_TSC`; otherwise it calls this
/// function. `(dplog_now_ticks)(&t)` always calls it.
///
/// Errors: `DPLOG_ERR_NULL`. Thread-safety: any thread. Cost: one `rdtsc`
/// (~10–20 ns on current CPUs, inline), or a vDSO clock read without an
/// invariant TSC; the first call probes the CPU once.
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

/// `dplog_clock_source`: `dplog_now_ticks` reads the invariant TSC
/// (`rdtsc` ticks; the consumer converts them to UTC).
pub const DPLOG_CLOCK_TSC: u32 = 1;
/// `dplog_clock_source`: `dplog_now_ticks` reads `CLOCK_REALTIME`
/// nanoseconds (no invariant TSC, or not x86-64; the consumer takes them
/// as they are).
pub const DPLOG_CLOCK_REALTIME: u32 = 2;

/// The clock `dplog_now_ticks` reads on this machine:
/// `DPLOG_CLOCK_TSC` or `DPLOG_CLOCK_REALTIME` (probed once per process,
/// CPUID 0x80000007 EDX bit 8). The inline `dplog_now_ticks` asks it once
/// per translation unit.
///
/// Errors: none. Thread-safety: any thread. Cost: a relaxed load after
/// the first call.
#[no_mangle]
pub extern "C" fn dplog_clock_source() -> u32 {
    match dplog::tsc::time_source() {
        dplog::tsc::TimeSource::Tsc => DPLOG_CLOCK_TSC,
        dplog::tsc::TimeSource::Realtime => DPLOG_CLOCK_REALTIME,
    }
}
