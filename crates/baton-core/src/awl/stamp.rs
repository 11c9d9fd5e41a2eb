//! Timestamps as the AWL reference reads them: the `date-time` format check (RFC 3339 with
//! a required time zone, as ajv-formats checks it) and instants in milliseconds (as
//! JavaScript's `Date.parse` gives them), which may be "not a number" even for a string that
//! passed the format check (a leap second, an offset without minutes).

/// Python's `str.isspace` (which `\s` follows in a Unicode pattern).
fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

fn digits(s: Option<&str>, n: usize) -> Option<u32> {
    let s = s?;
    if s.len() == n && s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse().ok()
    } else {
        None
    }
}

fn leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// `YYYY-MM-DD` with a real day of a real month.
pub fn is_date(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    let [y, m, d] = parts.as_slice() else {
        return false;
    };
    let (Some(y), Some(m), Some(d)) = (digits(Some(y), 4), digits(Some(m), 2), digits(Some(d), 2))
    else {
        return false;
    };
    (1..=12).contains(&m) && d >= 1 && d <= days_in_month(i64::from(y), m)
}

/// `HH:MM:SS[.frac](Z|±HH[[:]MM])`, a zone required; a leap second only at 23:59 UTC.
fn is_time(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 8 || b[2] != b':' || b[5] != b':' {
        return false;
    }
    let (Some(hr), Some(min)) = (digits(s.get(0..2), 2), digits(s.get(3..5), 2)) else {
        return false;
    };
    let Some(sec_whole) = digits(s.get(6..8), 2) else {
        return false;
    };
    let Some(mut rest) = s.get(8..) else {
        return false;
    };
    let mut sec = f64::from(sec_whole);
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        sec = format!("{sec_whole}.{}", &frac[..n]).parse().unwrap_or(sec);
        rest = &frac[n..];
    }
    let (sign, tz_h, tz_m) = if rest.eq_ignore_ascii_case("z") {
        (1i64, 0i64, 0i64)
    } else if let Some(off) = rest.strip_prefix(['+', '-']) {
        let sign = if rest.starts_with('-') { -1 } else { 1 };
        let (h, m) = match off.len() {
            2 => (Some(off), None),
            4 => (off.get(..2), off.get(2..)),
            5 if off.as_bytes()[2] == b':' => (off.get(..2), off.get(3..)),
            _ => return false,
        };
        let Some(h) = digits(h, 2) else {
            return false;
        };
        let m = match m {
            Some(m) => match digits(Some(m), 2) {
                Some(m) => m,
                None => return false,
            },
            None => 0,
        };
        (sign, i64::from(h), i64::from(m))
    } else {
        return false;
    };
    if tz_h > 23 || tz_m > 59 {
        return false;
    }
    if hr <= 23 && min <= 59 && sec < 60.0 {
        return true;
    }
    let utc_min = i64::from(min) - tz_m * sign;
    let utc_hr = i64::from(hr) - tz_h * sign - i64::from(utc_min < 0);
    (utc_hr == 23 || utc_hr == -1) && (utc_min == 59 || utc_min == -1) && sec < 61.0
}

/// The `date-time` format: a date, one separator (`T`, `t` or any white space), a time.
pub fn is_date_time(s: &str) -> bool {
    let parts: Vec<&str> = s
        .split(|c: char| c == 't' || c == 'T' || is_py_space(c))
        .collect();
    parts.len() == 2 && is_date(parts[0]) && is_time(parts[1])
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Milliseconds since the epoch, or `None` where `Date.parse` would give NaN. Comparisons
/// with `None` are false, as comparisons with NaN are.
pub fn instant(s: &str) -> Option<i64> {
    // `$` in the reference's pattern also matches before one trailing newline.
    let s = s.strip_suffix('\n').unwrap_or(s);
    let b = s.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let y = i64::from(digits(s.get(0..4), 4)?);
    let mo = i64::from(digits(s.get(5..7), 2)?);
    let d = i64::from(digits(s.get(8..10), 2)?);
    let h = i64::from(digits(s.get(11..13), 2)?);
    let mi = i64::from(digits(s.get(14..16), 2)?);
    let se = i64::from(digits(s.get(17..19), 2)?);
    let mut rest = s.get(19..)?;
    let mut ms = 0i64;
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        let mut three: String = frac[..n].chars().take(3).collect();
        while three.len() < 3 {
            three.push('0');
        }
        ms = three.parse().ok()?;
        rest = &frac[n..];
    }
    let offset = if rest == "Z" || rest == "z" {
        0
    } else if let Some(off) = rest.strip_prefix(['+', '-']) {
        let sign = if rest.starts_with('+') { 1 } else { -1 };
        let (oh, om) = match off.len() {
            4 => (off.get(..2), off.get(2..)),
            5 if off.as_bytes()[2] == b':' => (off.get(..2), off.get(3..)),
            // An offset without minutes passes the format check but not Date.parse.
            _ => return None,
        };
        sign * (i64::from(digits(oh, 2)?) * 3600 + i64::from(digits(om, 2)?) * 60)
    } else {
        return None;
    };
    if se >= 60 {
        return None;
    }
    let seconds = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + se - offset;
    Some(seconds * 1000 + ms)
}

/// `a < b` with NaN semantics.
pub fn later(a: Option<i64>, b: Option<i64>) -> bool {
    matches!((a, b), (Some(a), Some(b)) if a > b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_accepts_what_ajv_accepts() {
        for ok in [
            "2025-01-01T00:00:00Z",
            "2025-01-01t00:00:00z",
            "2025-01-01 00:00:00+05",
            "2025-01-01\t00:00:00.123456+05:30",
            "2024-02-29T23:59:60Z",
            "2025-01-01T00:59:60+01:00",
        ] {
            assert!(is_date_time(ok), "{ok}");
        }
        for bad in [
            "2025-01-01T00:00:00",
            "2025-02-29T00:00:00Z",
            "2025-01-01T24:00:00Z",
            "2025-01-01T12:00:60Z",
            "2025-01-01TT00:00:00Z",
            "2025-1-01T00:00:00Z",
            "2025-01-01T00:00:00+24:00",
        ] {
            assert!(!is_date_time(bad), "{bad}");
        }
    }

    #[test]
    fn instants_are_nan_where_date_parse_is() {
        assert_eq!(instant("1970-01-01T00:00:01.5Z"), Some(1500));
        assert_eq!(instant("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(instant("1970-01-01T01:00:00+0100"), Some(0));
        assert_eq!(instant("1970-01-01T00:00:00+01"), None);
        assert_eq!(instant("2024-02-29T23:59:60Z"), None);
        assert_eq!(instant("1970-01-01\t00:00:00Z"), None);
        assert!(!later(None, Some(0)));
    }
}
