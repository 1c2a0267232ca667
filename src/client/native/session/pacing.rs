//! How reconnect attempts are paced and ordered during one outage (from a broken link to the
//! next accepted connection), so that a client is back soon after a leader election without
//! a herd of attempts against the members that are electing.
//!
//! Rules this file protects:
//! - a member that did not answer at all (refused the TCP connection, timed out, did not
//!   resolve) is passed over on the next pass while other members remain: no connect timeout
//!   is spent on a dead or frozen member twice in a row;
//! - after such a member the next one is tried at once: a dead member says nothing about the
//!   others;
//! - after an answer that was not an acceptance (a member that closed without a
//!   ConnectResponse because it is not serving: it is electing; or any other failure) the
//!   pause ceiling grows from [`BASE`], doubling per such failure up to [`ELECTION_CAP`]
//!   while the outage is younger than [`ELECTION_WINDOW`] (an election takes from a few
//!   hundred milliseconds to a second or two: the client must be back soon after it ends,
//!   and in a lock's queue the slowest client's lateness is everyone's), then doubling again
//!   per failure up to `min(1 s, T/10)` for a longer outage;
//!   each pause is drawn uniformly below its ceiling (full jitter), so a fleet of clients
//!   spreads its attempts over the election instead of hitting the new quorum at once;
//! - a new outage starts again from the first host in rotation with no pause and no marks.

use std::time::Duration;

use crate::client::native::hosts::Reach;

/// The ceiling of the first pause after a member that answered but did not accept us.
/// An election of a few hundred milliseconds is covered after four or five pauses.
pub(super) const BASE: Duration = Duration::from_millis(25);

/// The largest pause ceiling while the outage may be an election.
pub(super) const ELECTION_CAP: Duration = Duration::from_millis(200);

/// How long an outage is paced as an election (pauses under [`ELECTION_CAP`]). Counted in
/// time, not in pauses: full jitter makes some pauses very short, and a count would end the
/// window early in a long election.
pub(super) const ELECTION_WINDOW: Duration = Duration::from_secs(2);

/// The largest pause ceiling, whatever the session timeout.
const MAX_CAP: Duration = Duration::from_secs(1);

/// One outage's pacing: which member to try next and how long to pause before it.
#[derive(Debug)]
pub(super) struct Pacer {
    /// Members to pass over once: they did not answer at all on their last attempt.
    skip: Vec<bool>,
    /// Failures that grew the pause so far in this outage.
    grown: u32,
    /// Failures that grew the pause after the election window.
    late: u32,
    /// The largest pause ceiling: `min(1 s, T/10)`.
    cap: Duration,
}

impl Pacer {
    /// A new outage over `hosts` members, for a session of timeout `negotiated`.
    pub(super) fn new(hosts: usize, negotiated: Duration) -> Pacer {
        Pacer {
            skip: vec![false; hosts],
            grown: 0,
            late: 0,
            cap: (negotiated / 10).min(MAX_CAP),
        }
    }

    /// The member to try next, in rotation from `next`: the first one not to be passed over
    /// (that pass-over is then used up); `next` itself when every member is to be passed over.
    pub(super) fn pick(&mut self, next: usize) -> usize {
        let n = self.skip.len();
        if n == 0 {
            return 0;
        }
        if self.skip.iter().all(|&s| s) {
            // Every member is marked: none is better than another.
            self.skip.iter_mut().for_each(|s| *s = false);
            return next % n;
        }
        for i in 0..n {
            let host = next.wrapping_add(i) % n;
            if !self.skip[host] {
                return host;
            }
            // Passed over once: tried again on a later pass.
            self.skip[host] = false;
        }
        next % n
    }

    /// Records that the attempt on `host` failed as `reach` says, `age` into the outage,
    /// and returns the ceiling of the pause before the next attempt (the caller draws below
    /// it: [`Pacer::pause`]).
    pub(super) fn failed(&mut self, host: usize, reach: Reach, age: Duration) -> Duration {
        if reach == Reach::Unreachable {
            if let Some(s) = self.skip.get_mut(host) {
                *s = true;
            }
            if self.skip.iter().any(|&s| !s) {
                return Duration::ZERO;
            }
        }
        let doubled = |from: Duration, times: u32| {
            from.checked_mul(1u32.checked_shl(times).unwrap_or(u32::MAX))
                .unwrap_or(self.cap)
        };
        let ceiling = if age < ELECTION_WINDOW {
            doubled(BASE, self.grown).min(ELECTION_CAP)
        } else {
            self.late = self.late.saturating_add(1);
            doubled(ELECTION_CAP, self.late)
        }
        .min(self.cap);
        self.grown = self.grown.saturating_add(1);
        ceiling
    }

    /// The pause before the next attempt: uniform below `ceiling` (full jitter).
    pub(super) fn pause(ceiling: Duration) -> Duration {
        super::random_below(ceiling)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(10);
    /// An outage just begun.
    const Z: Duration = Duration::ZERO;

    #[test]
    fn a_member_that_did_not_answer_is_passed_over_once_while_others_remain() {
        let mut p = Pacer::new(3, T);
        assert_eq!(p.pick(0), 0);
        assert_eq!(p.failed(0, Reach::Unreachable, Z), Duration::ZERO);
        assert_eq!(p.pick(1), 1);
        assert!(p.failed(1, Reach::NotServing, Z) > Duration::ZERO);
        assert_eq!(p.pick(2), 2);
        assert!(p.failed(2, Reach::NotServing, Z) > Duration::ZERO);
        // The next pass starts at 0: passed over, 1 and 2 tried first.
        assert_eq!(p.pick(3), 1);
        p.failed(1, Reach::NotServing, Z);
        assert_eq!(p.pick(2), 2);
        p.failed(2, Reach::NotServing, Z);
        // The pass after that tries it again.
        assert_eq!(p.pick(3), 0);
    }

    #[test]
    fn two_dead_members_of_three_leave_the_live_one_tried_in_a_row() {
        let mut p = Pacer::new(3, T);
        assert_eq!(p.pick(0), 0);
        p.failed(0, Reach::Unreachable, Z);
        assert_eq!(p.pick(1), 1);
        assert_eq!(p.failed(1, Reach::Unreachable, Z), Duration::ZERO);
        assert_eq!(p.pick(2), 2);
        p.failed(2, Reach::NotServing, Z);
        assert_eq!(p.pick(3), 2, "0 and 1 are passed over once");
    }

    #[test]
    fn every_member_unreachable_pauses_and_tries_in_rotation() {
        let mut p = Pacer::new(2, T);
        assert_eq!(p.failed(0, Reach::Unreachable, Z), Duration::ZERO);
        let ceiling = p.failed(1, Reach::Unreachable, Z);
        assert_eq!(ceiling, BASE);
        assert_eq!(p.pick(2), 0);
        assert_eq!(p.pick(1), 1);
    }

    #[test]
    fn pauses_double_to_the_election_cap_in_the_window_then_to_a_tenth_of_the_timeout() {
        let mut p = Pacer::new(3, T);
        let in_window = Duration::from_millis(1900);
        let ceilings: Vec<u64> = (0..10)
            .map(|i| p.failed(i % 3, Reach::NotServing, in_window).as_millis() as u64)
            .collect();
        assert_eq!(ceilings, [25, 50, 100, 200, 200, 200, 200, 200, 200, 200]);
        let ceilings: Vec<u64> = (0..4)
            .map(|i| {
                p.failed(i % 3, Reach::NotServing, ELECTION_WINDOW)
                    .as_millis() as u64
            })
            .collect();
        assert_eq!(ceilings, [400, 800, 1000, 1000]);
        // A short session: never more than a tenth of its timeout.
        let mut short = Pacer::new(3, Duration::from_millis(1000));
        let ceilings: Vec<u64> = (0..6)
            .map(|i| {
                let age = Duration::from_millis(i * 500);
                short.failed(0, Reach::Failed, age).as_millis() as u64
            })
            .collect();
        assert_eq!(ceilings, [25, 50, 100, 100, 100, 100]);
        // Long outages never overflow.
        for _ in 0..100 {
            assert!(p.failed(0, Reach::NotServing, T) <= Duration::from_secs(1));
        }
        let mut tiny = Pacer::new(1, Duration::from_millis(100));
        assert_eq!(
            tiny.failed(0, Reach::NotServing, Z),
            Duration::from_millis(10)
        );
    }

    #[test]
    fn a_pause_is_drawn_below_its_ceiling() {
        for _ in 0..100 {
            assert!(Pacer::pause(BASE) < BASE);
        }
        assert_eq!(Pacer::pause(Duration::ZERO), Duration::ZERO);
        assert_eq!(Pacer::new(0, T).pick(5), 0);
    }
}
