//! RFC 3339 UTC timestamps with microseconds, e.g.
//! `2026-01-01T00:00:00.123456Z` (27 bytes), without `core::fmt`.
//!
//! The `YYYY-MM-DDTHH:MM:SS.` prefix is computed once per second (civil
//! date from days since the epoch, H. Hinnant's algorithm) and cached.

pub use crate::civil::civil_from_days;

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
}
