//! The durations zklock takes, each parsed with `humantime` (`500ms`, `30s`, `1m30s`, `2h`; a
//! bare number is seconds, as for `timeout(1)`) and checked against what it is used for, so
//! that a duration zklock cannot use is a usage error (exit 64) rather than a failure later:
//!
//! - `--timeout` and `--grace` become deadlines (`now + d`): at most [`MAX_WAIT`], far below
//!   what an `Instant` can hold, so no deadline computed from them can overflow;
//! - `--connect-timeout` bounds the first connect (a deadline too): from 1 ms (0 would give
//!   up before trying) to [`MAX_WAIT`];
//! - `--session-timeout` is sent to ZooKeeper as an `int` of milliseconds: from 1 ms to
//!   `i32::MAX` ms (about 24.8 days); the server then fits it to its own bounds.

use std::time::{Duration, Instant};

/// The longest `--timeout` or `--grace` (one year; to wait without limit, leave `--timeout`
/// out).
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(365 * 24 * 3600);

/// The shortest and longest `--session-timeout`: ZooKeeper takes whole milliseconds in an
/// `int`.
pub(crate) const MIN_SESSION_TIMEOUT: Duration = Duration::from_millis(1);
pub(crate) const MAX_SESSION_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);

/// Parses `text`, the value of `option`: `humantime`'s syntax, or a bare (decimal) number of
/// seconds.
fn parse(option: &str, text: &str) -> Result<Duration, String> {
    let bare_seconds = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && text.bytes().filter(|&b| b == b'.').count() <= 1;
    let parsed = if bare_seconds {
        humantime::parse_duration(&format!("{text}s"))
    } else {
        humantime::parse_duration(text)
    };
    parsed.map_err(|e| {
        format!("{option}: invalid duration {text:?} ({e}; expected e.g. 500ms, 30s, 1m30s)")
    })
}

/// A duration in `[min, max]`, or the usage message saying the range (`range`, in words).
fn within(
    option: &str,
    text: &str,
    (min, max): (Duration, Duration),
    range: &str,
) -> Result<Duration, String> {
    let d = parse(option, text)?;
    if d < min || d > max {
        return Err(format!("{option} must be {range}, not {text:?}"));
    }
    Ok(d)
}

/// `--timeout` and `--grace`: from 0 to [`MAX_WAIT`].
pub(crate) fn wait(option: &str, text: &str) -> Result<Duration, String> {
    let range = "from 0 to 365days (leave --timeout out to wait without limit)";
    within(option, text, (Duration::ZERO, MAX_WAIT), range)
}

/// `--connect-timeout`: from 1 ms to [`MAX_WAIT`].
pub(crate) fn connect_timeout(option: &str, text: &str) -> Result<Duration, String> {
    let range = "from 1ms to 365days";
    within(option, text, (Duration::from_millis(1), MAX_WAIT), range)
}

/// `--session-timeout`: from [`MIN_SESSION_TIMEOUT`] to [`MAX_SESSION_TIMEOUT`].
pub(crate) fn session_timeout(option: &str, text: &str) -> Result<Duration, String> {
    let range = "from 1ms to 2147483647ms (about 24.8days: ZooKeeper's int of milliseconds)";
    within(
        option,
        text,
        (MIN_SESSION_TIMEOUT, MAX_SESSION_TIMEOUT),
        range,
    )
}

/// `now + d`, or `None` (no deadline) if an `Instant` cannot hold it. The options are bounded
/// at parsing, so `None` does not happen with them; the arithmetic cannot panic regardless.
pub(crate) fn deadline_after(d: Duration) -> Option<Instant> {
    Instant::now().checked_add(d)
}

/// What is left until `deadline` (`None`: no deadline).
pub(crate) fn remaining(deadline: Option<Instant>) -> Option<Duration> {
    deadline.map(|d| d.saturating_duration_since(Instant::now()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn humantime_spellings_and_bare_seconds() {
        assert_eq!(wait("-t", "1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(wait("-t", "2m 5s"), Ok(Duration::from_secs(125)));
        assert_eq!(wait("-t", "500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(wait("-t", "1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(wait("-t", "0"), Ok(Duration::ZERO));
        assert_eq!(wait("-t", "365days"), Ok(MAX_WAIT));
    }

    #[test]
    fn out_of_range_and_malformed_are_refused() {
        for bad in [
            "",
            ".",
            "1..2",
            "-5s",
            "5 parsecs",
            "9999999999999999999",
            "366days",
        ] {
            let e = wait("--grace", bad).unwrap_err();
            assert!(e.starts_with("--grace"), "{bad:?}: {e}");
        }
        for bad in ["0", "0.5ms", "999us", "1000h", "25days"] {
            assert!(
                session_timeout("--session-timeout", bad).is_err(),
                "{bad:?}"
            );
        }
        for bad in ["0", "0.5ms", "366days", "soon"] {
            let e = connect_timeout("--connect-timeout", bad).unwrap_err();
            assert!(e.starts_with("--connect-timeout"), "{bad:?}: {e}");
        }
        assert_eq!(
            connect_timeout("--connect-timeout", "1ms"),
            Ok(Duration::from_millis(1))
        );
        assert_eq!(
            session_timeout("--session-timeout", "24days"),
            Ok(Duration::from_secs(24 * 86400))
        );
        assert_eq!(
            session_timeout("--session-timeout", "1ms"),
            Ok(MIN_SESSION_TIMEOUT)
        );
    }
}
