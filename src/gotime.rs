//! Timestamps as kodelet stores them: Go `time.Time.String()` text, and the other forms the Go
//! SQLite driver accepts on read (docs/stores.md, "Timestamps").
//!
//! Parsing never panics: an unparseable value is an error the caller attaches to the
//! conversation it came from. Formatting produces exactly the `time.Time.String()` layout
//! (without the monotonic `m=` part), used by `init` and the fixture generator.

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime, TimeZone, Utc};

/// Parse a stored timestamp. Accepted forms (fractional seconds optional everywhere):
/// - `2026-08-21 23:21:35.123456789 +0100 BST` (Go `String()`), with an optional ` m=+1.2` suffix
///   and any zone name (or none) after the numeric offset
/// - `2026-08-21 23:21:35.123456789+01:00`, `2026-08-21T23:21:35.123+01:00`, `...Z`
/// - `2026-08-21 23:21:35`, `2026-08-21T23:21:35`, `2026-08-21 23:21` (taken as UTC)
/// - `2026-08-21` (midnight UTC)
pub fn parse(text: &str) -> Result<DateTime<FixedOffset>, String> {
    let bad = || format!("unparseable timestamp {text:?}");
    let mut s = text.trim();
    // Strip Go's monotonic clock reading.
    if let Some(i) = s.find(" m=") {
        s = s[..i].trim_end();
    }
    if s.len() < 10 || !s.is_char_boundary(10) {
        return Err(bad());
    }
    let date = date_of(&s[..10]).ok_or_else(bad)?;
    let rest = &s[10..];
    if rest.is_empty() {
        let dt = date.and_hms_opt(0, 0, 0).ok_or_else(bad)?;
        return Ok(Utc.from_utc_datetime(&dt).fixed_offset());
    }
    let rest = rest
        .strip_prefix(' ')
        .or_else(|| rest.strip_prefix('T'))
        .ok_or_else(bad)?;
    // Clock part: HH:MM[:SS[.fff]]
    let clock_len = rest
        .find(|c: char| !(c.is_ascii_digit() || c == ':' || c == '.'))
        .unwrap_or(rest.len());
    let (clock, zone) = rest.split_at(clock_len);
    let time = parse_clock(clock).ok_or_else(bad)?;
    let naive = NaiveDateTime::new(date, time);
    let offset = parse_zone(zone.trim_start()).ok_or_else(bad)?;
    offset.from_local_datetime(&naive).single().ok_or_else(bad)
}

/// `NaiveDate::parse_from_str(d, "%Y-%m-%d")`, without parsing the format string for the
/// usual `YYYY-MM-DD` (same answer: a test compares both).
fn date_of(d: &str) -> Option<NaiveDate> {
    let b = d.as_bytes();
    let digits = |r: std::ops::Range<usize>| {
        b[r].iter().try_fold(0u32, |n, c| {
            c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
        })
    };
    if b.len() == 10 && b[4] == b'-' && b[7] == b'-' {
        if let (Some(y), Some(m), Some(day)) = (digits(0..4), digits(5..7), digits(8..10)) {
            return NaiveDate::from_ymd_opt(y as i32, m, day);
        }
    }
    NaiveDate::parse_from_str(d, "%Y-%m-%d").ok()
}

fn parse_clock(clock: &str) -> Option<chrono::NaiveTime> {
    let (hms, frac) = match clock.split_once('.') {
        Some((a, b)) => (a, Some(b)),
        None => (clock, None),
    };
    let mut parts = hms.split(':');
    let h: u32 = parts.next()?.parse().ok()?;
    let m: u32 = parts.next()?.parse().ok()?;
    let sec: u32 = match parts.next() {
        Some(x) => x.parse().ok()?,
        None => 0,
    };
    if parts.next().is_some() {
        return None;
    }
    let nanos = match frac {
        None => 0,
        Some(f) if !f.is_empty() && f.len() <= 9 && f.bytes().all(|b| b.is_ascii_digit()) => {
            f.parse::<u32>().ok()? * 10u32.pow(9 - f.len() as u32)
        }
        Some(_) => return None,
    };
    chrono::NaiveTime::from_hms_nano_opt(h, m, sec, nanos)
}

/// `Z`, `+01:00`, `+0100`, `-07`, optionally followed by a zone name; empty means UTC.
fn parse_zone(zone: &str) -> Option<FixedOffset> {
    if zone.is_empty() {
        return FixedOffset::east_opt(0);
    }
    let first = zone.split_whitespace().next()?;
    if first == "Z" || first == "UTC" {
        return FixedOffset::east_opt(0);
    }
    let sign = match first.as_bytes()[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits: String = first[1..].chars().filter(|c| *c != ':').collect();
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (h, m) = match digits.len() {
        2 => (digits.parse::<i32>().ok()?, 0),
        4 => (
            digits[..2].parse::<i32>().ok()?,
            digits[2..].parse::<i32>().ok()?,
        ),
        _ => return None,
    };
    FixedOffset::east_opt(sign * (h * 3600 + m * 60))
}

/// Format like Go's `time.Time.String()` without the monotonic part:
/// `2006-01-02 15:04:05.999999999 -0700 MST` (trailing zeros of the fraction trimmed; the zone
/// name is the given abbreviation, or the numeric offset as Go prints for unnamed zones).
pub fn format_go(t: &DateTime<FixedOffset>, zone_name: Option<&str>) -> String {
    let base = t.format("%Y-%m-%d %H:%M:%S").to_string();
    let nanos = t.timestamp_subsec_nanos();
    let frac = if nanos == 0 {
        String::new()
    } else {
        let f = format!("{nanos:09}");
        format!(".{}", f.trim_end_matches('0'))
    };
    let off = t.format("%z").to_string();
    let name = zone_name.map(str::to_string).unwrap_or_else(|| {
        if t.offset().local_minus_utc() == 0 {
            "UTC".to_string()
        } else {
            off.clone()
        }
    });
    format!("{base}{frac} {off} {name}")
}

/// Now, or the instant in `AGENT_DB_NOW` (RFC 3339 or any form [`parse`] accepts), so tests and
/// reproducible runs can pin the clock.
pub fn now() -> DateTime<FixedOffset> {
    if let Ok(v) = std::env::var("AGENT_DB_NOW") {
        if let Ok(t) = parse(&v) {
            return t;
        }
    }
    Utc::now().fixed_offset()
}

/// RFC 3339 UTC text with microseconds, used for agent-db's own tables.
pub fn rfc3339_utc(t: &DateTime<FixedOffset>) -> String {
    t.with_timezone(&Utc)
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The fast date path gives chrono's own answer on any ten characters of date shape,
        /// invalid dates included.
        #[test]
        fn date_of_is_chronos_parse(d in "[0-9+ -]{4}-[0-9 ]{2}-[0-9]{2}|[0-9]{4}-[0-9]{2}-[0-9]{2}") {
            prop_assert_eq!(date_of(&d), NaiveDate::parse_from_str(&d, "%Y-%m-%d").ok());
        }
    }

    fn ts(s: &str) -> i64 {
        parse(s).unwrap().timestamp_nanos_opt().unwrap()
    }

    #[test]
    fn go_string_forms() {
        let base = ts("2026-08-21T22:21:35.123456789Z");
        assert_eq!(ts("2026-08-21 23:21:35.123456789 +0100 BST"), base);
        assert_eq!(
            ts("2026-08-21 23:21:35.123456789 +0100 BST m=+12.3456789"),
            base
        );
        assert_eq!(ts("2026-08-21 23:21:35.123456789+01:00"), base);
        assert_eq!(ts("2026-08-21T23:21:35.123456789+01:00"), base);
        assert_eq!(ts("2026-08-21 22:21:35.123456789 +0000 UTC"), base);
        assert_eq!(ts("2026-08-21 15:21:35.123456789 -0700 PDT"), base);
        assert_eq!(ts("2026-08-22 03:51:35.123456789 +0530 +0530"), base);
    }

    #[test]
    fn sqlite_forms() {
        assert_eq!(ts("2026-08-21 22:21:35"), ts("2026-08-21T22:21:35Z"));
        assert_eq!(ts("2026-08-21T22:21:35"), ts("2026-08-21T22:21:35Z"));
        assert_eq!(ts("2026-08-21 22:21"), ts("2026-08-21T22:21:00Z"));
        assert_eq!(ts("2026-08-21"), ts("2026-08-21T00:00:00Z"));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for s in [
            "",
            "yesterday",
            "2026-13-01 00:00:00",
            "2026-08-21 25:00:00",
            "2026-08-21 10:00:00 +01:00:00:00",
            "2026-08-21 10:00:00.1234567891",
            "2026-08-21 10:00:00 BST",
            "2026-08-21Xfoo",
            "é2026-08-21",
            "2026-08-2é",
        ] {
            assert!(parse(s).is_err(), "{s:?} should not parse");
        }
    }

    #[test]
    fn format_round_trips() {
        let t = parse("2026-08-21 23:21:35.1234 +0100 BST").unwrap();
        assert_eq!(
            format_go(&t, Some("BST")),
            "2026-08-21 23:21:35.1234 +0100 BST"
        );
        assert_eq!(parse(&format_go(&t, None)).unwrap(), t);
        let z = parse("2026-08-21T10:00:00Z").unwrap();
        assert_eq!(format_go(&z, None), "2026-08-21 10:00:00 +0000 UTC");
    }
}
