//! The quorum clock: how long the ensemble's leader is proven to keep this session alive.
//!
//! A reply a member can give alone (a ping, a read) proves the link, not the session: a
//! follower cut off from the other members answers pings until its own read of the leader
//! times out (`syncLimit × tickTime`), while the leader, hearing no touch for the session,
//! expires it `T` after the last touch it heard and grants its locks elsewhere. So a backend
//! that can prove more (the native client, `client/native/session/quorum.rs`) reports here
//! the latest instant `c` at which the leader is *proven* to have renewed the session: the
//! leader cannot expire it before `c + T` (its expiry queue sets `now + T`, rounded up to a
//! tick). From that one number:
//!
//! - **stale** from `c + 2T/3`: holders are `Suspect` (the same fraction as a silent link);
//! - **safe until** `c + T`: the earliest moment the session can be gone on the leader, so
//!   the moment by which a holder must have stopped (zklock kills its command's group by
//!   then).
//!
//! Only sessions that hold or wait for a lock pay for the proof: lock holders and waiters
//! register an [`Interest`], and the backend keeps proving while there is one, and for `T`
//! after the last one ended (back-to-back acquisitions stay confirmed). A backend that keeps
//! no proof (the in-memory ensemble, the `zookeeper`-crate backend) never reports one: its
//! holders are judged by the connection state alone, as before.

use std::time::Duration;

use crate::primitives::boot_clock::BootInstant;

/// The quorum clock's state, kept under the session's lock.
#[derive(Debug, Default)]
pub(super) struct QuorumClock {
    /// The latest instant the leader is proven to have renewed the session; `None` for a
    /// backend that keeps no proof. A backend that keeps one starts at boot
    /// ([`QuorumClock::expecting_proofs`]): stale, with `safe_until` long past, until its first
    /// proof, so that a session never reads as proven before it is.
    confirmed: Option<BootInstant>,
    /// Whether a proof was recorded (the timeout below is then a negotiated one).
    proven: bool,
    /// The session timeout `T` the proof is judged by: the shortest negotiated on any of the
    /// session's connections. A member with other session bounds negotiates another `T`, and
    /// the leader takes each touch with the timeout of the member that reported it, so a late
    /// touch from a member the session left can bring its expiry nearer (`ExpiryQueue.update`
    /// sets the new time, earlier or not): the shortest is the one the leader may apply.
    timeout: Duration,
    /// Holders and waiters registered now.
    interest: usize,
    /// When the last interest ended (proofs go on for `T` after).
    interest_ended: Option<BootInstant>,
    /// When proving started again after a time without interest: the proof a session made
    /// long ago is stale, and the backend gets until `started + 2T/3` to renew it before it
    /// counts the member as cut off.
    proving_since: Option<BootInstant>,
}

impl QuorumClock {
    /// The clock of a backend that proves its sessions: nothing proven yet.
    pub(super) fn expecting_proofs() -> QuorumClock {
        QuorumClock {
            confirmed: Some(BootInstant::BOOT),
            ..QuorumClock::default()
        }
    }

    /// Records a proof: the leader renewed the session at `at` or later, with timeout `T`.
    /// Returns whether the clock went from stale to fresh (waiters to wake).
    pub(super) fn confirm(&mut self, at: BootInstant, timeout: Duration, now: BootInstant) -> bool {
        let was_stale = self.is_stale(now);
        self.timeout = if self.proven {
            self.timeout.min(timeout)
        } else {
            timeout
        };
        self.proven = true;
        self.confirmed = Some(self.confirmed.map_or(at, |c| c.max(at)));
        was_stale && !self.is_stale(now)
    }

    /// The earliest instant the leader can have expired the session; `None` when nothing is
    /// proven (a backend that keeps no proof).
    pub(super) fn safe_until(&self) -> Option<BootInstant> {
        self.confirmed.map(|c| c + self.timeout)
    }

    /// Whether the proof is older than `2T/3` at `now` (never, without a proof).
    pub(super) fn is_stale(&self, now: BootInstant) -> bool {
        self.confirmed.is_some() && self.stale_at(now).is_none()
    }

    /// When the proof turns stale, if it is fresh at `now`.
    pub(super) fn stale_at(&self, now: BootInstant) -> Option<BootInstant> {
        let at = self.confirmed? + self.timeout * 2 / 3;
        (at > now).then_some(at)
    }

    /// Whether the backend should keep proving now.
    pub(super) fn wants_proof(&self, now: BootInstant) -> bool {
        self.interest > 0
            || self
                .interest_ended
                .is_some_and(|ended| now < ended + self.timeout)
    }

    /// How old the proof is at `now`, counted from when proving last started if that is
    /// later (a backend gets a fresh `2T/3` to renew an old proof); `None` without a proof.
    pub(super) fn unproven_for(&self, now: BootInstant) -> Option<Duration> {
        let since = match (self.confirmed, self.proving_since) {
            (Some(c), Some(p)) => c.max(p),
            (c, p) => c.or(p)?,
        };
        Some(now.saturating_duration_since(since))
    }

    /// One more holder or waiter. Returns whether proving starts now (the backend to wake).
    pub(super) fn begin_interest(&mut self, now: BootInstant) -> bool {
        let starts = !self.wants_proof(now);
        if starts {
            self.proving_since = Some(now);
        }
        self.interest += 1;
        starts
    }

    /// One holder or waiter fewer.
    pub(super) fn end_interest(&mut self, now: BootInstant) {
        self.interest = self.interest.saturating_sub(1);
        if self.interest == 0 {
            self.interest_ended = Some(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(6);

    #[test]
    fn stale_from_two_thirds_safe_until_one_timeout() {
        let now = BootInstant::now();
        let mut clock = QuorumClock::default();
        assert!(!clock.is_stale(now + T * 10), "no proof: never stale");
        assert_eq!(clock.safe_until(), None);
        clock.confirm(now, T, now);
        assert!(!clock.is_stale(now + Duration::from_millis(3999)));
        assert!(clock.is_stale(now + Duration::from_secs(4)));
        assert_eq!(clock.safe_until(), Some(now + T));
        // An older proof never moves the clock back.
        clock.confirm(now - T, T, now);
        assert_eq!(clock.safe_until(), Some(now + T));
    }

    #[test]
    fn a_proving_backend_is_stale_until_its_first_proof() {
        let now = BootInstant::now();
        let mut clock = QuorumClock::expecting_proofs();
        assert!(clock.is_stale(now), "nothing proven yet reads as stale");
        assert!(
            clock.safe_until().is_some_and(|u| u < now),
            "safe_until long past"
        );
        clock.confirm(now, T, now);
        assert!(!clock.is_stale(now));
        assert_eq!(clock.safe_until(), Some(now + T));
    }

    #[test]
    fn the_shortest_negotiated_timeout_judges_the_session() {
        let now = BootInstant::now();
        let mut clock = QuorumClock::expecting_proofs();
        clock.confirm(now, T, now);
        clock.confirm(now, T * 2, now);
        assert_eq!(
            clock.safe_until(),
            Some(now + T),
            "a longer timeout later changes nothing"
        );
        clock.confirm(now, T / 2, now);
        assert_eq!(
            clock.safe_until(),
            Some(now + T / 2),
            "a member with a shorter timeout shortens what every proof is worth"
        );
        clock.confirm(now + T, T, now + T);
        assert_eq!(
            clock.safe_until(),
            Some(now + T + T / 2),
            "and it stays shortest"
        );
    }

    #[test]
    fn proofs_go_on_for_one_timeout_after_the_last_interest() {
        let now = BootInstant::now();
        let mut clock = QuorumClock::default();
        clock.confirm(now, T, now);
        assert!(!clock.wants_proof(now));
        assert!(
            clock.begin_interest(now),
            "the first interest starts proving"
        );
        assert!(!clock.begin_interest(now), "the second does not");
        clock.end_interest(now);
        clock.end_interest(now + T);
        assert!(clock.wants_proof(now + T * 2 - Duration::from_millis(1)));
        assert!(!clock.wants_proof(now + T * 2));
    }

    #[test]
    fn an_old_proof_gets_a_fresh_span_when_proving_starts_again() {
        let now = BootInstant::now();
        let mut clock = QuorumClock::default();
        clock.confirm(now, T, now);
        let later = now + T * 10;
        clock.begin_interest(later);
        assert_eq!(clock.unproven_for(later + T), Some(T));
        assert!(
            clock.is_stale(later),
            "the holder's view stays honest meanwhile"
        );
    }
}
