//! Why an attempt to reach a server failed: the sentence a user reads, how far the attempt
//! got (which paces the next one, `session/pacing`), and the I/O error beneath it, kept so
//! that [`Error::Connect`](crate::Error::Connect) can chain it as its `source()` (a caller
//! tells a refused connection from a time-out without parsing text).

use std::fmt;
use std::io;

use super::hosts::Reach;

/// A failed connection attempt (or a failed pass over several addresses or hosts).
#[derive(Debug)]
pub(crate) struct ConnectFailure {
    text: String,
    reach: Reach,
    io: Option<io::Error>,
}

impl ConnectFailure {
    /// `what` failed with `error` (e.g. `connect`, `read`), having got as far as `reach`:
    /// the error's text follows `what`.
    pub fn io(reach: Reach, what: &str, error: io::Error) -> ConnectFailure {
        ConnectFailure {
            text: format!("{what}: {error}"),
            reach,
            io: Some(error),
        }
    }

    /// An explanation of our own in place of the error's text, the error kept beneath it.
    pub fn explained(reach: Reach, text: String, error: io::Error) -> ConnectFailure {
        ConnectFailure {
            text,
            reach,
            io: Some(error),
        }
    }

    /// A failure with no I/O error beneath it.
    pub fn new(reach: Reach, text: impl Into<String>) -> ConnectFailure {
        ConnectFailure {
            text: text.into(),
            reach,
            io: None,
        }
    }

    /// The same failure, its text prefixed by where it happened (`host: …`).
    pub fn at(self, place: impl fmt::Display) -> ConnectFailure {
        ConnectFailure {
            text: format!("{place}: {}", self.text),
            ..self
        }
    }

    /// Several failures as one: every text, in order; the most hopeful reach
    /// ([`Reach::best`]); the last I/O error beneath.
    pub fn joined(failures: Vec<ConnectFailure>) -> ConnectFailure {
        let text = failures
            .iter()
            .map(|f| f.text.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        let reach = failures
            .iter()
            .map(|f| f.reach)
            .reduce(Reach::best)
            .unwrap_or(Reach::Unreachable);
        let io = failures.into_iter().rev().find_map(|f| f.io);
        ConnectFailure { text, reach, io }
    }

    /// The sentence a user reads.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// How far the attempt got.
    pub fn reach(&self) -> Reach {
        self.reach
    }

    /// The text and the I/O error beneath it.
    pub fn into_parts(self) -> (String, Option<io::Error>) {
        (self.text, self.io)
    }
}

/// A failure of our own words with no error beneath it (a closed client): [`Reach::Failed`].
impl From<String> for ConnectFailure {
    fn from(text: String) -> ConnectFailure {
        ConnectFailure::new(Reach::Failed, text)
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
            ConnectFailure::io(Reach::Unreachable, "connect", refused).at("a:1"),
            ConnectFailure::explained(Reach::NotServing, "closed without answering".into(), eof)
                .at("b:2"),
            ConnectFailure::new(Reach::Unreachable, "cannot resolve c"),
        ]);
        assert!(all.text().starts_with("a:1: connect: "), "{all}");
        assert!(all
            .text()
            .contains("; b:2: closed without answering; cannot resolve"));
        assert_eq!(all.reach(), Reach::NotServing);
        let (_, io) = all.into_parts();
        assert_eq!(io.map(|e| e.kind()), Some(io::ErrorKind::UnexpectedEof));
    }
}
