//! Cheap producer timestamps: the TSC (`rdtsc`) read into the record, and a
//! consumer-side [`TscClock`] that converts TSC ticks to UTC nanoseconds,
//! recalibrating against `CLOCK_REALTIME` every second.
//!
//! Where the CPU has no invariant TSC (CPUID leaf 0x8000_0007, EDX bit 8)
//! or is not x86-64, [`now_ticks`] returns `CLOCK_REALTIME` nanoseconds and
//! the conversion is the identity.
//!
//! # Error bound
//!
//! A calibration point is a pair (tsc, realtime) read back to back; the
//! pair with the narrowest `rdtsc … clock_gettime … rdtsc` window out of 8
//! tries is kept, and half that window is the pair's error `w`. The tick
//! rate is the slope between the previous and the current pair (1 s apart),
//! so its relative error is about `(w_prev + w_cur) / 1 s`. A timestamp
//! converted at most `d` after the last calibration is therefore off by at
//! most `w_cur + (w_prev + w_cur) · d / 1 s + |NTP slew during d|`, which
//! [`TscClock::error_bound_ns`] returns for `d` = the recalibration
//! interval (slew excluded; `adjtime` slews at most 500 ppm). With
//! `w` ≈ 20–100 ns on an idle core this is well under 1 µs; a preempted
//! calibration widens `w` and the bound says so. `core/src/tsc.rs` tests
//! the bound against `CLOCK_REALTIME` directly.

use core::sync::atomic::{AtomicU8, Ordering};

/// `CLOCK_REALTIME` now, nanoseconds since the Unix epoch (UTC).
#[inline]
pub fn realtime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_REALTIME always
    // exists on Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Reads the time-stamp counter (x86-64 `rdtsc`); on other targets
/// [`realtime_ns`].
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc exists on every x86-64 CPU and has no side effects.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        realtime_ns()
    }
}

/// True if the CPU reports an invariant TSC (constant rate across P-, C-
/// and T-states: CPUID 0x8000_0007 EDX bit 8).
pub fn invariant_tsc() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: cpuid is available on every x86-64 CPU (a safe fn on newer
        // toolchains, hence the allow); leaf 0x8000_0000
        // reports the highest extended leaf, checked before reading 0x8000_0007.
        #[allow(unused_unsafe)]
        unsafe {
            let max = core::arch::x86_64::__cpuid(0x8000_0000).eax;
            max >= 0x8000_0007 && core::arch::x86_64::__cpuid(0x8000_0007).edx & (1 << 8) != 0
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// 0 = not probed, 1 = TSC, 2 = realtime fallback. Relaxed: an idempotent
/// cache of a CPU property; every thread computes the same value.
static SOURCE: AtomicU8 = AtomicU8::new(0);

/// Where [`now_ticks`] reads time from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSource {
    /// Invariant TSC ticks.
    Tsc,
    /// `CLOCK_REALTIME` nanoseconds (no invariant TSC).
    Realtime,
}

/// The source [`now_ticks`] uses on this machine (probed once).
pub fn time_source() -> TimeSource {
    // Relaxed: see `SOURCE`.
    match SOURCE.load(Ordering::Relaxed) {
        1 => TimeSource::Tsc,
        2 => TimeSource::Realtime,
        _ => {
            let s = if invariant_tsc() {
                TimeSource::Tsc
            } else {
                TimeSource::Realtime
            };
            SOURCE.store(if s == TimeSource::Tsc { 1 } else { 2 }, Ordering::Relaxed);
            s
        }
    }
}

/// The producer's timestamp: TSC ticks, or realtime ns without an invariant
/// TSC. Convert with [`TscClock::to_utc_ns`] on the consumer.
///
/// The cheap clock for a record's `TscTimestamp` field: one `rdtsc` and a
/// relaxed load of the cached probe (10–25 ns), where
/// [`realtime_ns`] costs a vDSO `clock_gettime` (20–60 ns, more under a
/// hypervisor whose clocksource is not the TSC). The logger's consumer
/// converts the field to UTC with its [`TscClock`]; every format prints
/// it as wall time (see `docs/time-and-clocks.md`).
///
/// # Examples
///
/// ```
/// use dplog_core::tsc::{now_ticks, realtime_ns, TscClock};
///
/// let clock = TscClock::new(std::time::Duration::from_millis(10));
/// let before = realtime_ns();
/// let t = now_ticks();
/// let after = realtime_ns();
/// // Converted on the consumer side: within the calibration's error of
/// // the wall clock (a generous 1 ms here).
/// let utc = clock.to_utc_ns(t);
/// assert!(utc + 1_000_000 >= before && utc <= after + 1_000_000);
/// assert!(now_ticks() >= t);
/// ```
#[inline(always)]
pub fn now_ticks() -> u64 {
    // Relaxed: see `SOURCE`.
    if SOURCE.load(Ordering::Relaxed) == 1 {
        rdtsc()
    } else {
        match time_source() {
            TimeSource::Tsc => rdtsc(),
            TimeSource::Realtime => realtime_ns(),
        }
    }
}

/// One calibration point.
#[derive(Clone, Copy, Debug)]
struct Pair {
    tsc: u64,
    ns: u64,
    /// Half the sampling window, ns.
    half_width_ns: u64,
}

fn sample_pair() -> Pair {
    let mut best: Option<(u64, Pair)> = None;
    for _ in 0..8 {
        let t0 = rdtsc();
        let ns = realtime_ns();
        let t1 = rdtsc();
        let w = t1.wrapping_sub(t0);
        if best.map_or(true, |(bw, _)| w < bw) {
            best = Some((
                w,
                Pair {
                    tsc: t0 + w / 2,
                    ns,
                    half_width_ns: 0,
                },
            ));
        }
    }
    let (w, mut p) = best.expect("8 samples taken");
    p.half_width_ns = w / 2; // ticks; turned into ns by the caller
    p
}

/// Converts TSC ticks to UTC nanoseconds, consumer side.
///
/// Construct once per consumer; call [`maybe_recalibrate`](Self::maybe_recalibrate)
/// in the consumer loop (it is cheap unless a second has passed). Without an
/// invariant TSC, ticks are already realtime ns and pass through unchanged.
#[derive(Clone, Debug)]
pub struct TscClock {
    source: TimeSource,
    prev: Pair,
    cur: Pair,
    /// ns per tick in 32.32 fixed point.
    mult: u64,
    interval_ns: u64,
}

/// One calibration point and rate, for formatters that convert TSC
/// timestamps in records themselves: `ns = ns0 + (tsc - tsc0) * 1e9 / hz`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Calibration {
    /// Tick rate, ticks per second.
    pub hz: u64,
    /// A TSC reading...
    pub tsc0: u64,
    /// ...and `CLOCK_REALTIME` at that reading, ns since the Unix epoch.
    pub ns0: u64,
}

/// Recalibration interval, ns (1 s).
pub const RECALIBRATE_NS: u64 = 1_000_000_000;

impl TscClock {
    /// Calibrates: two points `warmup` apart (the first rate estimate;
    /// 10 ms is plenty for a ±1 µs start, the 1 s recalibrations refine
    /// it). Blocks the calling thread for `warmup`.
    pub fn new(warmup: std::time::Duration) -> Self {
        let source = time_source();
        let p0 = sample_pair();
        if source == TimeSource::Tsc {
            std::thread::sleep(warmup);
        }
        let p1 = sample_pair();
        let mut c = Self {
            source,
            prev: p0,
            cur: p1,
            mult: 1 << 32,
            interval_ns: RECALIBRATE_NS,
        };
        c.refit();
        c
    }

    fn refit(&mut self) {
        let dt = self.cur.tsc.wrapping_sub(self.prev.tsc);
        let dn = self.cur.ns.wrapping_sub(self.prev.ns);
        if self.source == TimeSource::Tsc && dt > 0 && dn > 0 {
            self.mult = ((u128::from(dn) << 32) / u128::from(dt)) as u64;
        }
    }

    /// The tick source this clock converts from.
    pub fn source(&self) -> TimeSource {
        self.source
    }

    /// Takes a new calibration point if `RECALIBRATE_NS` has passed since
    /// the last; returns true if it did. `now_ns` is `realtime_ns()`.
    pub fn maybe_recalibrate(&mut self, now_ns: u64) -> bool {
        if self.source != TimeSource::Tsc || now_ns.wrapping_sub(self.cur.ns) < self.interval_ns {
            return false;
        }
        self.prev = self.cur;
        self.cur = sample_pair();
        self.refit();
        true
    }

    /// Nominal tick rate, ticks per second (1e9 for the realtime fallback).
    pub fn ticks_per_second(&self) -> f64 {
        1e9 * (1u64 << 32) as f64 / self.mult as f64
    }

    /// UTC nanoseconds of `ticks` (a [`now_ticks`] value).
    #[inline]
    pub fn to_utc_ns(&self, ticks: u64) -> u64 {
        if self.source != TimeSource::Tsc {
            return ticks;
        }
        let d = ticks.wrapping_sub(self.cur.tsc) as i64;
        let off = (i128::from(d) * i128::from(self.mult)) >> 32;
        (i128::from(self.cur.ns) + off) as u64
    }

    /// The current calibration (latest point, fitted rate); `None` for the
    /// realtime fallback (ticks are already ns).
    pub fn calibration(&self) -> Option<Calibration> {
        if self.source != TimeSource::Tsc {
            return None;
        }
        Some(Calibration {
            hz: ((1u128 << 32) * 1_000_000_000 / u128::from(self.mult.max(1))) as u64,
            tsc0: self.cur.tsc,
            ns0: self.cur.ns,
        })
    }

    /// Nanoseconds in a span of `ticks` (a difference of two
    /// [`now_ticks`] values).
    #[inline]
    pub fn ticks_to_ns(&self, ticks: u64) -> u64 {
        if self.source != TimeSource::Tsc {
            return ticks;
        }
        ((u128::from(ticks) * u128::from(self.mult)) >> 32) as u64
    }

    /// The documented error bound in ns for timestamps taken up to one
    /// recalibration interval after the last calibration (see the module
    /// docs); 0 for the realtime fallback.
    pub fn error_bound_ns(&self) -> u64 {
        if self.source != TimeSource::Tsc {
            return 0;
        }
        let w = |p: &Pair| ((u128::from(p.half_width_ns) * u128::from(self.mult)) >> 32) as u64;
        let (wp, wc) = (w(&self.prev), w(&self.cur));
        let span = self.cur.ns.saturating_sub(self.prev.ns).max(1);
        wc + ((wp + wc) as u128 * u128::from(self.interval_ns) / u128::from(span)) as u64
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn conversion_stays_within_the_documented_bound() {
        let mut clock = TscClock::new(Duration::from_millis(20));
        // A second calibration 200 ms later refines the rate.
        std::thread::sleep(Duration::from_millis(200));
        clock.interval_ns = 200_000_000;
        assert!(clock.maybe_recalibrate(realtime_ns()) || clock.source() == TimeSource::Realtime);
        let bound = clock.error_bound_ns();
        // 300 ms after the calibration (within ~1.5 intervals), the best
        // of 20 samples (so preemption between the two reads is rare)
        // must sit within the bound plus the sample's own window.
        std::thread::sleep(Duration::from_millis(100));
        let mut best = u64::MAX;
        for _ in 0..20 {
            let t0 = realtime_ns();
            let ticks = now_ticks();
            let t1 = realtime_ns();
            let utc = clock.to_utc_ns(ticks);
            let mid = t0 + (t1 - t0) / 2;
            let err = utc.abs_diff(mid).saturating_sub((t1 - t0) / 2);
            best = best.min(err);
        }
        // 1.5 × the bound (we sampled up to 1.5 intervals after
        // calibrating) plus 2 µs for NTP slew and the realtime clock's own
        // granularity.
        assert!(
            best <= bound * 3 / 2 + 2_000,
            "error {best} ns above bound {bound} ns (source {:?})",
            clock.source()
        );
        if clock.source() == TimeSource::Tsc {
            let hz = clock.ticks_per_second();
            assert!((1e8..1e11).contains(&hz), "implausible TSC rate {hz}");
            // The calibration handed to formatters converts like the clock.
            let cal = clock.calibration().unwrap();
            let t = now_ticks();
            let via_cal =
                cal.ns0 as i128 + (t as i128 - cal.tsc0 as i128) * 1_000_000_000 / cal.hz as i128;
            assert!(
                (via_cal - clock.to_utc_ns(t) as i128).abs() < 1_000,
                "{via_cal}"
            );
        } else {
            assert!(clock.calibration().is_none());
        }
    }

    #[test]
    fn the_bound_of_a_known_calibration() {
        // Two points 1 s apart at exactly 3 GHz, sampled within windows of
        // 100 and 200 ticks (half-widths 50 and 100 ticks: 16 and 33 ns).
        const T0: u64 = 1_767_225_600_000_000_000;
        let mut c = TscClock {
            source: TimeSource::Tsc,
            prev: Pair {
                tsc: 1_000,
                ns: T0,
                half_width_ns: 50,
            },
            cur: Pair {
                tsc: 3_000_001_000,
                ns: T0 + 1_000_000_000,
                half_width_ns: 100,
            },
            mult: 0,
            interval_ns: RECALIBRATE_NS,
        };
        c.refit();
        assert_eq!(c.mult, (1u64 << 32) / 3);
        // w_cur + (w_prev + w_cur) x interval / span = 33 + (16 + 33) x 1.
        assert_eq!(c.error_bound_ns(), 82);
        // Half a second after the last point: the line itself, to 1 ns.
        let t = c.to_utc_ns(3_000_001_000 + 1_500_000_000);
        assert!(t.abs_diff(T0 + 1_500_000_000) <= 1, "{t}");
        // The calibration handed to the formatters: the same line.
        let cal = c.calibration().unwrap();
        assert_eq!(cal.hz, 3_000_000_000);
        assert_eq!((cal.tsc0, cal.ns0), (3_000_001_000, T0 + 1_000_000_000));
    }

    #[test]
    fn consecutive_reads_never_go_back_on_one_thread() {
        let clock = TscClock::new(Duration::from_millis(10));
        let mut last = now_ticks();
        let mut last_utc = clock.to_utc_ns(last);
        for _ in 0..100_000 {
            let t = now_ticks();
            let utc = clock.to_utc_ns(t);
            assert!(t >= last, "ticks went back: {last} then {t}");
            assert!(utc >= last_utc, "UTC went back: {last_utc} then {utc}");
            (last, last_utc) = (t, utc);
        }
        // The probe is cached and agrees with the CPU's report.
        assert_eq!(
            time_source() == TimeSource::Tsc,
            cfg!(target_arch = "x86_64") && invariant_tsc()
        );
    }

    #[test]
    fn conversion_is_monotonic_and_scales() {
        let clock = TscClock::new(Duration::from_millis(20));
        let a = now_ticks();
        std::thread::sleep(Duration::from_millis(10));
        let b = now_ticks();
        let (ua, ub) = (clock.to_utc_ns(a), clock.to_utc_ns(b));
        assert!(ub > ua);
        let d = ub - ua;
        assert!(
            (10_000_000..2_000_000_000).contains(&d),
            "10 ms sleep measured as {d} ns"
        );
    }
}
