//! When to try again: the server's `retry-after` hints, which a 429 carries to the
//! session's retry loop (the backoff schedule is the session's).
//!
//! A pure function of its inputs (no clock reads, no randomness), so the same
//! failures give the same waits in every run and under simulation.

use std::time::Duration;

use http::HeaderMap;

/// The wait a response asks for: `retry-after-ms` (milliseconds, may be fractional)
/// when present and valid, else `retry-after` as seconds or as an HTTP date relative
/// to `now_unix_ms`. `None` when neither header gives a usable value.
pub(super) fn retry_after(headers: &HeaderMap, now_unix_ms: u64) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    if let Some(millis) = header("retry-after-ms").and_then(parse_non_negative) {
        if let Ok(wait) = Duration::try_from_secs_f64(millis / 1000.0) {
            return Some(wait);
        }
    }
    let value = header("retry-after")?.trim();
    if let Some(seconds) = parse_non_negative(value) {
        return Duration::try_from_secs_f64(seconds).ok();
    }
    let at_unix_secs = parse_http_date(value)?;
    let at_unix_ms = at_unix_secs.saturating_mul(1000);
    Some(Duration::from_millis(
        at_unix_ms.saturating_sub(now_unix_ms),
    ))
}

fn parse_non_negative(text: &str) -> Option<f64> {
    let text = text.trim();
    // `f64::from_str` also takes "inf", "NaN" and exponents; a delay is plain digits.
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    text.parse::<f64>().ok().filter(|value| value.is_finite())
}

/// Seconds since the Unix epoch of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`),
/// the only date form RFC 9110 requires senders to use.
fn parse_http_date(text: &str) -> Option<u64> {
    let (_weekday, rest) = text.split_once(", ")?;
    let fields: Vec<&str> = rest.split(' ').collect();
    let [day, month, year, time, "GMT"] = fields.as_slice() else {
        return None;
    };
    let day: u64 = parse_digits(day, 2)?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|name| name == month)? as u64
        + 1;
    let year: u64 = parse_digits(year, 4)?;
    let time: Vec<&str> = time.split(':').collect();
    let [hour, minute, second] = time.as_slice() else {
        return None;
    };
    let (hour, minute, second) = (
        parse_digits(hour, 2)?,
        parse_digits(minute, 2)?,
        parse_digits(second, 2)?,
    );
    if !(1..=31).contains(&day) || year < 1970 || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + hour * 3_600 + minute * 60 + second)
}

fn parse_digits(text: &str, width: usize) -> Option<u64> {
    if text.len() != width || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Days from 1970-01-01 to a proleptic Gregorian date, for years from 1970 on
/// (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year / 400;
    let year_of_era = year - era * 400;
    let shifted_month = (month + 9) % 12;
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn retry_after_headers() {
        let at = |pairs| retry_after(&headers(pairs), 0);
        assert_eq!(at(&[("retry-after", "7")]), Some(Duration::from_secs(7)));
        assert_eq!(
            at(&[("retry-after", "1.5")]),
            Some(Duration::from_millis(1_500))
        );
        assert_eq!(
            at(&[("retry-after", "7"), ("retry-after-ms", "250")]),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            at(&[("retry-after", "7"), ("retry-after-ms", "soon")]),
            Some(Duration::from_secs(7))
        );
        assert_eq!(at(&[("retry-after", "-3")]), None);
        assert_eq!(at(&[("retry-after", "inf")]), None);
        assert_eq!(at(&[]), None);
    }

    #[test]
    fn retry_after_http_date_is_relative_to_now() {
        let now_unix_ms = 784_111_777_000 - 10_000;
        let wait = retry_after(
            &headers(&[("retry-after", "Sun, 06 Nov 1994 08:49:37 GMT")]),
            now_unix_ms,
        );
        assert_eq!(wait, Some(Duration::from_secs(10)));
        // A date already past means "now".
        let late = retry_after(
            &headers(&[("retry-after", "Sun, 06 Nov 1994 08:49:37 GMT")]),
            now_unix_ms + 60_000,
        );
        assert_eq!(late, Some(Duration::ZERO));
        assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 UTC"), None);
        assert_eq!(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), None);
    }
}
