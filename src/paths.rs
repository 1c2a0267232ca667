//! ZooKeeper path rules exactly as the server enforces them (`PathUtils.validatePath`), and the
//! small helpers recipes need: join, parent, node name, sequence suffix.

use crate::error::Error;

/// Length of the sequence suffix the server appends (`%010d`).
pub const SEQUENCE_LEN: usize = 10;

/// Checks a path the way the ZooKeeper server does; `Err` names the path and the rule.
///
/// ```
/// use zk_locks::paths::validate_path;
/// assert!(validate_path("/locks/my-lock").is_ok());
/// assert!(validate_path("locks").is_err());
/// assert!(validate_path("/locks/").is_err());
/// assert!(validate_path("/a//b").is_err());
/// assert!(validate_path("/a/../b").is_err());
/// ```
pub fn validate_path(path: &str) -> Result<(), Error> {
    validate(path, false)
}

/// Like [`validate_path`], for the path given to a sequential create: the server accepts a
/// trailing `/` there (the sequence number becomes the node name).
pub fn validate_create_path(path: &str, sequential: bool) -> Result<(), Error> {
    validate(path, sequential)
}

fn validate(path: &str, sequential: bool) -> Result<(), Error> {
    let fail = |reason: &'static str| {
        Err(Error::InvalidPath {
            path: path.to_string(),
            reason,
        })
    };
    if path.is_empty() {
        return fail("path length must be > 0");
    }
    if !path.starts_with('/') {
        return fail("path must start with / character");
    }
    if path.len() == 1 {
        return Ok(());
    }
    // With a sequential create the server validates `path + "1"`: a trailing slash is fine.
    let checked = if sequential && path.ends_with('/') {
        &path[..path.len() - 1]
    } else {
        path
    };
    if checked.ends_with('/') {
        return fail("path must not end with / character");
    }
    // This runs on every request of every backend: one pass tells whether any character
    // needs a look (all ASCII from 0x1f up is fine), then the path is split on the byte `/`
    // (ASCII, so every segment is valid UTF-8 on its own).
    let bytes = checked.as_bytes();
    let plain = bytes.iter().all(|&b| (0x1f..0x80).contains(&b));
    for segment in bytes[1..].split(|&b| b == b'/') {
        if segment.is_empty() {
            return fail("empty node name specified");
        }
        if segment == b"." || segment == b".." {
            return fail("relative paths not allowed");
        }
        if plain {
            continue;
        }
        let first_bad = String::from_utf8_lossy(segment)
            .chars()
            .find(|&c| c == '\0' || is_rejected_char(c));
        match first_bad {
            None => {}
            Some('\0') => return fail("null character not allowed"),
            Some(_) => return fail("invalid character"),
        }
    }
    Ok(())
}

/// The character ranges `PathUtils.validatePath` rejects (bounds exclusive, as the server has them).
fn is_rejected_char(c: char) -> bool {
    let c = c as u32;
    (c > 0x0000 && c < 0x001f)
        || (c > 0x007f && c < 0x009f)
        || (c > 0xd800 && c < 0xf8ff)
        || (c > 0xfff0 && c < 0xffff)
}

/// Joins a parent path and a child name: `join("/a", "b") == "/a/b"`, `join("/", "b") == "/b"`.
pub fn join(parent: &str, child: &str) -> String {
    let mut path = String::with_capacity(parent.len() + 1 + child.len());
    path.push_str(parent);
    if !parent.ends_with('/') {
        path.push('/');
    }
    path.push_str(child);
    path
}

/// The parent of a path: `parent("/a/b") == Some("/a")`, `parent("/a") == Some("/")`,
/// `parent("/") == None`.
pub fn parent(path: &str) -> Option<&str> {
    if path == "/" || path.is_empty() {
        return None;
    }
    match path.rfind('/') {
        Some(0) => Some("/"),
        Some(i) => Some(&path[..i]),
        None => None,
    }
}

/// The last segment of a path: `node_name("/a/b") == "b"`.
pub fn node_name(path: &str) -> &str {
    match path.rfind('/') {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

/// Parses a sequence suffix as the server writes it (`%010d` of a signed 32-bit counter):
/// ten digits, or a minus sign and digits once the counter has wrapped.
///
/// ```
/// use zk_locks::paths::parse_sequence;
/// assert_eq!(parse_sequence("0000000007"), Some(7));
/// assert_eq!(parse_sequence("-2147483648"), Some(i32::MIN));
/// assert_eq!(parse_sequence("-000000005"), Some(-5));
/// assert_eq!(parse_sequence("7"), None);
/// ```
pub fn parse_sequence(suffix: &str) -> Option<i32> {
    let digits = suffix.strip_prefix('-').unwrap_or(suffix);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if suffix.len() != SEQUENCE_LEN
        && !(suffix.starts_with('-') && suffix.len() == SEQUENCE_LEN + 1)
    {
        return None;
    }
    suffix.parse::<i32>().ok()
}

/// Formats a sequence number as the server does (`%010d`).
pub fn format_sequence(seq: i32) -> String {
    format!("{seq:010}")
}

/// The sequence number at the end of a node name created with `base` (the text the creator
/// passed, e.g. `_c_<uuid>-lock-`): the text after the **last** occurrence of `base`.
pub fn sequence_after(name: &str, base: &str) -> Option<i32> {
    let at = name.rfind(base)?;
    parse_sequence(&name[at + base.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_rules() {
        for ok in [
            "/",
            "/a",
            "/a/b",
            "/zk-locks/_c_x-lock-0000000001",
            "/a.b/..c/c..",
            "/ü",
        ] {
            assert!(validate_path(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "a",
            "/a/",
            "//",
            "/a//b",
            "/.",
            "/..",
            "/a/./b",
            "/a/..",
            "/a\0b",
            "/a\u{1}b",
            "/\u{80}x",
            "/\u{e000}",
        ] {
            let err = validate_path(bad).unwrap_err();
            assert!(
                matches!(err, Error::InvalidPath { ref path, .. } if path == bad),
                "{bad:?}"
            );
        }
        // The reason names the first bad character, in ASCII and non-ASCII segments alike.
        let reason = |p: &str| match validate_path(p) {
            Err(Error::InvalidPath { reason, .. }) => reason,
            other => panic!("{p:?}: {other:?}"),
        };
        assert_eq!(reason("/a\0b"), "null character not allowed");
        assert_eq!(reason("/ü\0\u{1}"), "null character not allowed");
        assert_eq!(reason("/ü\u{e000}\0"), "invalid character");
        assert_eq!(reason("/a/b\u{1f}/\u{1e}"), "invalid character");
        assert!(validate_create_path("/a/", true).is_ok());
        assert!(validate_create_path("/a/", false).is_err());
        assert!(validate_create_path("/a//", true).is_err());
    }

    #[test]
    fn helpers() {
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/a", "b"), "/a/b");
        assert_eq!(parent("/a/b"), Some("/a"));
        assert_eq!(parent("/a"), Some("/"));
        assert_eq!(parent("/"), None);
        assert_eq!(node_name("/a/b"), "b");
        assert_eq!(node_name("/"), "");
    }

    #[test]
    fn sequences() {
        assert_eq!(parse_sequence("2147483647"), Some(i32::MAX));
        assert_eq!(parse_sequence("2147483648"), None);
        assert_eq!(parse_sequence("-000000001"), Some(-1));
        assert_eq!(parse_sequence("00000000a1"), None);
        assert_eq!(parse_sequence("-"), None);
        assert_eq!(format_sequence(7), "0000000007");
        assert_eq!(format_sequence(-5), "-000000005");
        assert_eq!(format_sequence(i32::MIN), "-2147483648");
        assert_eq!(sequence_after("_c_x-lock-0000000007", "lock-"), Some(7));
        assert_eq!(sequence_after("_c_x-lock--000000007", "lock-"), Some(-7));
        assert_eq!(sequence_after("foo", "lock-"), None);
    }
}
