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
//!   client pauses before its next attempt. While the outage is younger than
//!   [`ELECTION_WINDOW`] (an election takes from a few hundred milliseconds to a second or
//!   two) the first such pause of the outage is drawn below [`FIRST`] and every later one
//!   below [`ELECTION_CAP`]: the members dropped us when they began to elect, and an election
//!   lasts at least ZooKeeper's `finalizeWait` (200 ms) from then, so an attempt sooner is
//!   wasted; after that the pace stays steady rather than growing, because the end of an
//!   election is the moment every client waits for and in a lock's queue the slowest
//!   client's lateness is everyone's. After the window the ceiling doubles per failure from
//!   [`ELECTION_CAP`] up to `min(1 s, T/10)`; no ceiling exceeds `min(1 s, T/10)`;
//! - each pause is drawn uniformly between half its ceiling and its ceiling (equal jitter):
//!   a fleet of clients spreads its attempts over the election instead of hitting the new
//!   quorum at once, and no client spends attempts in quick succession on members that are
//!   still electing (drawn below the ceiling from zero, a third of the pauses would be
//!   shorter than a third of it);
//! - a new outage starts again from the first host in rotation with no pause and no marks.

use std::time::Duration;

use crate::client::native::hosts::Reach;

/// The ceiling of the first pause of an outage after a member that answered but did not
/// accept us: that member is electing, and the election lasts at least `finalizeWait`
/// (200 ms) from when the members dropped their clients.
pub(super) const FIRST: Duration = Duration::from_millis(300);

/// The ceiling of every later pause while the outage may be an election: the most a client
/// can be late after the election ends.
pub(super) const ELECTION_CAP: Duration = Duration::from_millis(200);

/// How long an outage is paced as an election (pauses under [`FIRST`], then
/// [`ELECTION_CAP`]). Counted in time, not in pauses: a long election is paced as one.
pub(super) const ELECTION_WINDOW: Duration = Duration::from_secs(2);

/// The largest pause ceiling, whatever the session timeout.
const MAX_CAP: Duration = Duration::from_secs(1);

/// One outage's pacing: which member to try next and how long to pause before it.
#[derive(Debug)]
pub(super) struct Pacer {
    /// Members to pass over once: they did not answer at all on their last attempt.
    skip: Vec<bool>,
    /// Pauses so far in this outage.
    paused: u32,
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
            paused: 0,
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

    /// Passes `host` over on the next pass, as a member that did not answer: the session left
    /// it because it could not reach its leader.
    pub(super) fn pass_over(&mut self, host: usize) {
        if let Some(s) = self.skip.get_mut(host) {
            *s = true;
        }
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
            if self.paused == 0 {
                FIRST
            } else {
                ELECTION_CAP
            }
        } else {
            self.late = self.late.saturating_add(1);
            doubled(ELECTION_CAP, self.late)
        }
        .min(self.cap);
        self.paused = self.paused.saturating_add(1);
        ceiling
    }

    /// The pause before the next attempt: uniform in `[ceiling/2, ceiling)` (equal jitter).
    pub(super) fn pause(ceiling: Duration) -> Duration {
        let half = ceiling / 2;
        half + super::random_below(ceiling - half)
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
        assert_eq!(ceiling, FIRST);
        assert_eq!(p.pick(2), 0);
        assert_eq!(p.pick(1), 1);
    }

    #[test]
    fn first_pause_covers_the_election_start_then_a_steady_cap_then_doubling_to_a_tenth_of_t() {
        let mut p = Pacer::new(3, T);
        let in_window = Duration::from_millis(1900);
        let ceilings: Vec<u64> = (0..6)
            .map(|i| p.failed(i % 3, Reach::NotServing, in_window).as_millis() as u64)
            .collect();
        assert_eq!(ceilings, [300, 200, 200, 200, 200, 200]);
        let ceilings: Vec<u64> = (0..4)
            .map(|i| {
                p.failed(i % 3, Reach::NotServing, ELECTION_WINDOW)
                    .as_millis() as u64
            })
            .collect();
        assert_eq!(ceilings, [400, 800, 1000, 1000]);
        // An outage past the window from its first pause doubles from the election cap.
        let mut late = Pacer::new(3, T);
        assert_eq!(
            late.failed(0, Reach::NotServing, ELECTION_WINDOW),
            Duration::from_millis(400)
        );
        // A short session: never more than a tenth of its timeout.
        let mut short = Pacer::new(3, Duration::from_millis(1000));
        let ceilings: Vec<u64> = (0..6)
            .map(|i| {
                let age = Duration::from_millis(i * 500);
                short.failed(0, Reach::Failed, age).as_millis() as u64
            })
            .collect();
        assert_eq!(ceilings, [100, 100, 100, 100, 100, 100]);
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
    fn a_new_pacer_starts_from_the_first_pause_again() {
        let mut p = Pacer::new(2, T);
        p.failed(0, Reach::NotServing, Z);
        assert_eq!(p.failed(1, Reach::NotServing, Z), ELECTION_CAP);
        let mut fresh = Pacer::new(2, T);
        assert_eq!(fresh.failed(0, Reach::NotServing, Z), FIRST);
    }

    #[test]
    fn a_pause_is_drawn_between_half_its_ceiling_and_its_ceiling() {
        for ceiling in [FIRST, ELECTION_CAP, Duration::from_nanos(3)] {
            for _ in 0..100 {
                let pause = Pacer::pause(ceiling);
                assert!(
                    pause >= ceiling / 2 && pause < ceiling,
                    "{pause:?} {ceiling:?}"
                );
            }
        }
        assert_eq!(Pacer::pause(Duration::from_nanos(1)), Duration::ZERO);
        assert_eq!(Pacer::pause(Duration::ZERO), Duration::ZERO);
        assert_eq!(Pacer::new(0, T).pick(5), 0);
    }
}
