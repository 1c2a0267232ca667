//! Why an attempt to reach a server failed: the sentence a user reads, and the I/O error
//! beneath it, kept so that [`Error::Connect`](crate::Error::Connect) can chain it as its
//! `source()` (a caller tells a refused connection from a time-out without parsing text).

use std::fmt;
use std::io;

/// A failed connection attempt (or a failed pass over several addresses or hosts).
#[derive(Debug)]
pub(crate) struct ConnectFailure {
    text: String,
    io: Option<io::Error>,
}

impl ConnectFailure {
    /// `what` failed with `error` (e.g. `connect`, `read`): the error's text follows `what`.
    pub fn io(what: &str, error: io::Error) -> ConnectFailure {
        ConnectFailure {
            text: format!("{what}: {error}"),
            io: Some(error),
        }
    }

    /// An explanation of our own in place of the error's text, the error kept beneath it.
    pub fn explained(text: String, error: io::Error) -> ConnectFailure {
        ConnectFailure {
            text,
            io: Some(error),
        }
    }

    /// The same failure, its text prefixed by where it happened (`host: …`).
    pub fn at(self, place: impl fmt::Display) -> ConnectFailure {
        ConnectFailure {
            text: format!("{place}: {}", self.text),
            io: self.io,
        }
    }

    /// Several failures as one: every text, in order; the last I/O error beneath.
    pub fn joined(failures: Vec<ConnectFailure>) -> ConnectFailure {
        let text = failures
            .iter()
            .map(|f| f.text.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        let io = failures.into_iter().rev().find_map(|f| f.io);
        ConnectFailure { text, io }
    }

    /// The sentence a user reads.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The text and the I/O error beneath it.
    pub fn into_parts(self) -> (String, Option<io::Error>) {
        (self.text, self.io)
    }
}

impl From<String> for ConnectFailure {
    fn from(text: String) -> ConnectFailure {
        ConnectFailure { text, io: None }
    }
}

impl From<&str> for ConnectFailure {
    fn from(text: &str) -> ConnectFailure {
        ConnectFailure::from(text.to_string())
    }
}

impl fmt::Display for ConnectFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joined_failures_name_every_text_and_keep_the_last_io_error() {
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        let eof = io::Error::from(io::ErrorKind::UnexpectedEof);
        let all = ConnectFailure::joined(vec![
            ConnectFailure::io("connect", refused).at("a:1"),
            ConnectFailure::explained("closed without answering".into(), eof).at("b:2"),
            ConnectFailure::from("cannot resolve \"c\""),
        ]);
        assert!(all.text().starts_with("a:1: connect: "), "{all}");
        assert!(all
            .text()
            .contains("; b:2: closed without answering; cannot resolve"));
        let (_, io) = all.into_parts();
        assert_eq!(io.map(|e| e.kind()), Some(io::ErrorKind::UnexpectedEof));
    }
}
