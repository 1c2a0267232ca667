//! Where a recipe is in its life, as both recipes keep it: latent until started once, closed
//! once; a call made in the wrong phase is [`Error::NotParticipating`], naming the election.

use crate::error::Error;

/// Where a latch or selector is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Latent,
    Started,
    Closed,
}

/// The error for a call on the election at `path` that its phase does not allow.
pub(super) fn not_participating(path: &str, reason: &'static str) -> Error {
    Error::NotParticipating {
        path: path.to_string(),
        reason,
    }
}
