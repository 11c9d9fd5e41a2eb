//! Time as the store records it: milliseconds since the Unix epoch, passed in by callers
//! (the core reads no clock).

/// Milliseconds since the Unix epoch (UTC).
pub type Millis = i64;

/// RFC 3339 in UTC with milliseconds, e.g. `2026-11-29T13:40:00.123Z`.
pub fn rfc3339(ms: Millis) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| ms.to_string())
}

/// A short human age such as `42s`, `5m`, `3h` or `2d`; a future instant reads `0s`.
pub fn age(then: Millis, now: Millis) -> String {
    let secs = (now - then).max(0) / 1000;
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// What [`duration`] accepts, for the error an edge words when it refuses one.
pub const DURATION_FORMS: &str = "a length of time in s, m, h, d or w (a day is 24 hours, a week 7 days), alone or combined: 30s, 10m, 2h, 1d, 3d, 2w, 1h 30m";

/// What [`instant`] accepts, for the error an edge words when it refuses one.
pub const INSTANT_FORMS: &str = "an RFC 3339 time (2026-11-29T10:00:00Z) or an age in s, m, h, d or w meaning that long ago (30s, 10m, 2h, 1d, 3d, 2w, 1h 30m)";

/// The one parser for every age or duration Baton accepts (flags, config values, API and
/// MCP fields): a length of time such as `5s`, `10m`, `1h 30m`, `3d` or `2w` (a day is 24
/// hours, a week 7 days); `None` when it is not one, or is negative. Years and months are
/// refused: their length depends on the calendar.
pub fn duration(text: &str) -> Option<std::time::Duration> {
    let text = text.trim();
    // A bare number has no unit; say what it means instead of guessing seconds.
    if text.is_empty() || text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let span: jiff::Span = text.parse().ok()?;
    let exact = span
        .to_duration(jiff::SpanRelativeTo::days_are_24_hours())
        .ok()?;
    std::time::Duration::try_from(exact).ok()
}

/// An RFC 3339 time (`2026-11-29T10:00:00Z`, any offset, any fraction of a second) as
/// milliseconds, a finer fraction cut off; `None` when it is not one.
pub fn timestamp(text: &str) -> Option<Millis> {
    text.parse::<jiff::Timestamp>()
        .ok()
        .map(|ts| ts.as_millisecond())
}

/// An instant given as RFC 3339 (`2026-11-29T10:00:00Z`) or as an age (`2h`, `3d 4h`,
/// read by [`duration`]) meaning that long before `now`. `None` when it is neither (or a negative age).
pub fn instant(text: &str, now: Millis) -> Option<Millis> {
    if let Some(at) = timestamp(text) {
        return Some(at);
    }
    duration(text)
        .and_then(|d| i64::try_from(d.as_millis()).ok())
        .map(|ago| now.saturating_sub(ago))
}

#[cfg(test)]
mod tests {
    use super::{age, duration, instant, rfc3339, timestamp};

    #[test]
    fn instants_are_rfc_3339_or_ages() {
        let now = 10_000_000;
        assert_eq!(instant("2h", now), Some(now - 7_200_000));
        assert_eq!(instant("1970-01-01T00:00:01Z", now), Some(1000));
        assert_eq!(instant("soon", now), None);
        assert_eq!(instant("-2h", now), None);
        assert_eq!(instant("1d", now), Some(now - 86_400_000));
    }

    #[test]
    fn a_timestamp_is_rfc_3339_alone_and_reads_back_what_rfc3339_wrote() {
        assert_eq!(timestamp("1970-01-01T00:00:01.2349Z"), Some(1234));
        assert_eq!(timestamp("1970-01-01T01:00:01+01:00"), Some(1000));
        assert_eq!(timestamp("2h"), None);
        let at = 1_796_000_000_123;
        assert_eq!(timestamp(&rfc3339(at)), Some(at));
    }

    #[test]
    fn durations_take_days_and_weeks_as_24_hours_each() {
        use std::time::Duration;
        assert_eq!(duration("5s"), Some(Duration::from_secs(5)));
        assert_eq!(duration("1h 30m"), Some(Duration::from_secs(5400)));
        assert_eq!(duration("30d"), Some(Duration::from_secs(30 * 86_400)));
        assert_eq!(duration("2w"), Some(Duration::from_secs(14 * 86_400)));
        assert_eq!(duration("0s"), Some(Duration::ZERO));
        assert_eq!(duration("-5s"), None);
        assert_eq!(duration("soon"), None);
    }

    #[test]
    fn durations_accept_each_unit_and_refuse_what_has_no_fixed_length() {
        use std::time::Duration;
        let d = |s: u64| Some(Duration::from_secs(s));
        assert_eq!(duration("30s"), d(30));
        assert_eq!(duration("10m"), d(600));
        assert_eq!(duration("2h"), d(7200));
        assert_eq!(duration("1d"), d(86_400));
        assert_eq!(duration("3d"), d(3 * 86_400));
        assert_eq!(duration("1w"), d(7 * 86_400));
        assert_eq!(duration("1h30m"), d(5400));
        assert_eq!(duration("1w 2d"), d(9 * 86_400));
        assert_eq!(duration(" 2h "), d(7200));
        // No unit, no number, calendar units, overflow: refused, never guessed.
        assert_eq!(duration("5"), None);
        assert_eq!(duration(""), None);
        assert_eq!(duration("d"), None);
        assert_eq!(duration("1y"), None);
        assert_eq!(duration("1mo"), None);
        assert_eq!(duration("99999999999999999999w"), None);
        assert_eq!(duration("-1d"), None);
    }

    #[test]
    fn the_refusal_text_names_every_unit() {
        for forms in [super::DURATION_FORMS, super::INSTANT_FORMS] {
            for example in ["30s", "10m", "2h", "1d", "2w"] {
                assert!(forms.contains(example), "{forms} lacks {example}");
                assert!(
                    duration(example).is_some(),
                    "{example} is listed but refused"
                );
            }
        }
    }

    #[test]
    fn ages_in_days_and_weeks_are_instants_that_long_ago() {
        let now = 100 * 86_400_000;
        assert_eq!(instant("3d", now), Some(now - 3 * 86_400_000));
        assert_eq!(instant("2w", now), Some(now - 14 * 86_400_000));
        assert_eq!(instant("5", now), None);
    }

    #[test]
    fn times_print_as_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_500), "1970-01-01T00:00:01.5Z");
    }

    #[test]
    fn ages_round_down_to_the_largest_unit() {
        assert_eq!(age(0, 59_999), "59s");
        assert_eq!(age(0, 60_000), "1m");
        assert_eq!(age(0, 3_600_000 * 5 + 1), "5h");
        assert_eq!(age(0, 86_400_000 * 3), "3d");
        assert_eq!(age(10, 0), "0s");
    }
}
