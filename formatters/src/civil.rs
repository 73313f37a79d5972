//! Days since the Unix epoch to a civil (proleptic Gregorian) date and
//! back (H. Hinnant's algorithms): the one calendar computation the time
//! converters ([`crate::conv`]), [`crate::time`], the syslog sink's
//! RFC 5848 blocks and the tools' time arguments share.

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

/// Days since 1970-01-01 of civil date `y`-`m`-`d` (month 1-12, day
/// 1-31; not checked: a day past the month's end counts on into the next).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 } as i64;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_day_for_four_centuries_round_trips() {
        // Inverse check: days_from_civil(civil_from_days(d)) == d.
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
