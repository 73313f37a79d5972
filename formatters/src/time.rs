//! RFC 3339 UTC timestamps with microseconds, e.g.
//! `2026-01-01T00:00:00.123456Z` (27 bytes), without `core::fmt`.
//!
//! The `YYYY-MM-DDTHH:MM:SS.` prefix is computed once per second (civil
//! date from days since the epoch, H. Hinnant's algorithm) and cached.

/// Civil date (year, month 1-12, day 1-31) of `days` since 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Formats RFC 3339 UTC timestamps with microsecond precision, caching the
/// per-second prefix: [`crate::conv::Rfc3339Cache`] at six digits. Years
/// are printed with four digits (valid for 1970..=9999; a `u64` of
/// nanoseconds ends in 2554).
#[derive(Clone, Debug, Default)]
pub struct Rfc3339Micros(crate::conv::Rfc3339Cache);

impl Rfc3339Micros {
    /// Appends `ns` (nanoseconds since the Unix epoch) as
    /// `YYYY-MM-DDTHH:MM:SS.ffffffZ`, 27 bytes, truncating to microseconds.
    #[inline]
    pub fn push(&mut self, out: &mut Vec<u8>, ns: u64) {
        self.0.push(out, ns, 6);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        let mut f = Rfc3339Micros::default();
        let cases = [
            (0u64, "1970-01-01T00:00:00.000000Z"),
            (951_782_400_000_001_999, "2000-02-29T00:00:00.000001Z"),
            (1_767_225_599_999_999_999, "2025-12-31T23:59:59.999999Z"),
            (1_767_225_600_123_456_789, "2026-01-01T00:00:00.123456Z"),
            (4_102_444_800_000_000_000, "2100-01-01T00:00:00.000000Z"),
        ];
        for (ns, want) in cases {
            let mut out = Vec::new();
            f.push(&mut out, ns);
            assert_eq!(std::str::from_utf8(&out).unwrap(), want, "{ns}");
        }
    }

    #[test]
    fn every_day_for_four_centuries_round_trips() {
        // Inverse check: days_from_civil(civil_from_days(d)) == d.
        fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
            let y = if m <= 2 { y - 1 } else { y };
            let era = y.div_euclid(400);
            let yoe = y.rem_euclid(400);
            let mp = if m > 2 { m - 3 } else { m + 9 } as i64;
            let doy = (153 * mp + 2) / 5 + d as i64 - 1;
            let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
            era * 146_097 + doe - 719_468
        }
        let mut prev = (1969, 12, 31);
        for days in 0..146_097i64 {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
            assert!((y, m, d) > prev);
            assert!((1..=12).contains(&m) && (1..=31).contains(&d));
            prev = (y, m, d);
        }
    }
}
