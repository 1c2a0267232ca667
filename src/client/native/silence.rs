//! A silent member: one that has stopped answering while the session waits on it (a frozen
//! process, a long GC pause, a stalled VM, a disk that blocks its threads). The kernel says
//! nothing about it, as it would about a dead member, so the client judges it by time: when
//! its oldest unanswered request has waited far longer than the connection's answers have
//! taken, and nothing at all has arrived meanwhile, the session moves to another member.
//!
//! Rules this file protects:
//! - a member is silent only if *both* hold for the threshold: a request of ours is
//!   unanswered (so the member owes us an answer) and not a byte has arrived (so it is not
//!   merely slow to answer that one request while it streams others);
//! - the threshold is `max(FLOOR, FACTOR × the slowest of the last WINDOW answers)`: a link
//!   that has shown slow answers is given room in proportion, and no link is judged sooner
//!   than [`FLOOR`], well above a routine pause of a healthy member (a 100–300 ms GC pause);
//! - leaving in quick succession means the ensemble, not a member, is slow (a commit that
//!   waits for a slow quorum silences every member alike): each leave within
//!   [`CHURN_WINDOW`] of the one before doubles the threshold, up to where the dead-link
//!   rule (`2T/3`) takes over;
//! - the rule never claims more than the dead-link rule does: it only moves the session
//!   sooner. Moving is a reconnect with the same session (the locks stay), and ZooKeeper
//!   refuses the old connection's later writes with `SessionMoved` once the session is
//!   elsewhere (`PrepRequestProcessor.pRequest2Txn` → `SessionTrackerImpl.checkSession`).

use std::time::{Duration, Instant};

/// No member is judged silent sooner than this.
pub(crate) const FLOOR: Duration = Duration::from_millis(600);

/// How many times the slowest recent answer a request may wait before the member is silent.
pub(crate) const FACTOR: u32 = 4;

/// How many recent answers the slowest is taken from.
pub(crate) const WINDOW: usize = 32;

/// A leave within this long of the one before doubles the threshold.
pub(crate) const CHURN_WINDOW: Duration = Duration::from_secs(30);

/// A member left for silence is passed over in every outage for this long (while another
/// member remains to try).
pub(crate) const AVOID: Duration = Duration::from_secs(60);

/// The most doublings of the threshold.
const MAX_DOUBLINGS: u32 = 6;

/// The answer times of one connection's latest [`WINDOW`] answers.
#[derive(Debug, Default)]
pub(crate) struct AnswerTimes {
    /// Microseconds, a ring; `len` of them are filled.
    times: [u32; WINDOW],
    next: usize,
    len: usize,
}

impl AnswerTimes {
    /// Records that a request was answered `took` after it was sent.
    pub(crate) fn record(&mut self, took: Duration) {
        self.times[self.next] = u32::try_from(took.as_micros()).unwrap_or(u32::MAX);
        self.next = (self.next + 1) % WINDOW;
        self.len = (self.len + 1).min(WINDOW);
    }

    /// The slowest of the recorded answers (`None` before the first).
    pub(crate) fn slowest(&self) -> Option<Duration> {
        self.times[..self.len]
            .iter()
            .max()
            .map(|&us| Duration::from_micros(u64::from(us)))
    }
}

/// How the session stands toward silent members: how recently and how often it left one.
#[derive(Debug)]
pub(crate) struct Silence {
    /// Leaves in quick succession, each within [`CHURN_WINDOW`] of the one before.
    doublings: u32,
    /// When the session last left a silent member.
    last_left: Option<Instant>,
    /// Per host: passed over in outages until then.
    avoid_until: Vec<Option<Instant>>,
}

impl Silence {
    /// Nothing left yet, over `hosts` members.
    pub(crate) fn new(hosts: usize) -> Silence {
        Silence {
            doublings: 0,
            last_left: None,
            avoid_until: vec![None; hosts],
        }
    }

    /// How long a request may wait, with nothing received, before the member is left:
    /// `None` when no sooner than the dead-link rule (`2T/3` of silence) or when no other
    /// member is known. `slowest` is the slowest recent answer of this connection.
    pub(crate) fn threshold(
        &self,
        slowest: Option<Duration>,
        negotiated: Duration,
        hosts: usize,
    ) -> Option<Duration> {
        if hosts < 2 {
            return None;
        }
        let base = slowest
            .and_then(|s| s.checked_mul(FACTOR))
            .map_or(FLOOR, |s| s.max(FLOOR));
        let threshold = base
            .checked_mul(1 << self.doublings.min(MAX_DOUBLINGS))
            .unwrap_or(Duration::MAX);
        (threshold < negotiated * 2 / 3).then_some(threshold)
    }

    /// The session leaves `host` for silence `now`.
    pub(crate) fn left(&mut self, host: usize, now: Instant) {
        let quick = self
            .last_left
            .is_some_and(|t| now.saturating_duration_since(t) < CHURN_WINDOW);
        self.doublings = match quick {
            true => (self.doublings + 1).min(MAX_DOUBLINGS),
            false => 0,
        };
        self.last_left = Some(now);
        if let Some(until) = self.avoid_until.get_mut(host) {
            *until = Some(now + AVOID);
        }
    }

    /// The members to pass over in an outage starting `now`.
    pub(crate) fn avoided(&self, now: Instant) -> impl Iterator<Item = usize> + '_ {
        self.avoid_until
            .iter()
            .enumerate()
            .filter(move |(_, until)| until.is_some_and(|u| now < u))
            .map(|(host, _)| host)
    }
}

/// Whether the member has been silent past `threshold`: the oldest unanswered request has
/// waited `unanswered` and nothing was received for `since_recv`.
pub(crate) fn is_silent(
    unanswered: Option<Duration>,
    since_recv: Duration,
    threshold: Option<Duration>,
) -> bool {
    match (unanswered, threshold) {
        (Some(waited), Some(limit)) => waited.min(since_recv) >= limit,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(10);
    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn the_threshold_is_the_floor_on_a_fast_link_and_grows_with_slow_answers() {
        let s = Silence::new(3);
        assert_eq!(s.threshold(None, T, 3), Some(FLOOR));
        assert_eq!(s.threshold(Some(MS(2)), T, 3), Some(FLOOR));
        assert_eq!(s.threshold(Some(MS(300)), T, 3), Some(MS(1200)));
        // No sooner than the dead-link rule: not used.
        assert_eq!(s.threshold(Some(MS(2000)), T, 3), None);
        assert_eq!(s.threshold(None, MS(900), 3), None);
        // One member: nowhere to go.
        assert_eq!(s.threshold(None, T, 1), None);
    }

    #[test]
    fn leaves_in_quick_succession_double_the_threshold_and_calm_resets_it() {
        let mut s = Silence::new(3);
        let t0 = Instant::now();
        s.left(0, t0);
        assert_eq!(s.threshold(None, T, 3), Some(FLOOR), "a first leave");
        s.left(1, t0 + MS(5_000));
        assert_eq!(s.threshold(None, T, 3), Some(FLOOR * 2));
        s.left(2, t0 + MS(10_000));
        assert_eq!(s.threshold(None, T, 3), Some(FLOOR * 4));
        s.left(0, t0 + MS(15_000));
        // 4.8 s: still under 2T/3 = 6.67 s.
        assert_eq!(s.threshold(None, T, 3), Some(FLOOR * 8));
        s.left(1, t0 + MS(20_000));
        assert_eq!(
            s.threshold(None, T, 3),
            None,
            "9.6 s: the dead-link rule's turn"
        );
        for i in 0..100 {
            s.left(0, t0 + MS(20_000 + i));
        }
        assert_eq!(s.threshold(None, Duration::MAX / 2, 3), Some(FLOOR * 64));
        s.left(2, t0 + MS(60_000));
        assert_eq!(s.threshold(None, T, 3), Some(FLOOR), "after a calm spell");
    }

    #[test]
    fn a_left_member_is_avoided_for_a_while() {
        let mut s = Silence::new(3);
        let t0 = Instant::now();
        assert_eq!(s.avoided(t0).count(), 0);
        s.left(1, t0);
        assert_eq!(s.avoided(t0 + MS(1)).collect::<Vec<_>>(), vec![1]);
        assert_eq!(s.avoided(t0 + AVOID).count(), 0);
        s.left(7, t0); // a host index out of range is ignored
    }

    #[test]
    fn silence_needs_an_unanswered_request_and_nothing_received() {
        let limit = Some(FLOOR);
        assert!(is_silent(Some(MS(700)), MS(700), limit));
        assert!(
            !is_silent(Some(MS(700)), MS(10), limit),
            "answers stream in"
        );
        assert!(!is_silent(None, MS(5_000), limit), "nothing owed");
        assert!(
            !is_silent(Some(MS(100)), MS(5_000), limit),
            "asked just now"
        );
        assert!(!is_silent(Some(MS(5_000)), MS(5_000), None));
    }

    #[test]
    fn the_slowest_of_the_latest_answers_is_kept() {
        let mut a = AnswerTimes::default();
        assert_eq!(a.slowest(), None);
        a.record(MS(50));
        for _ in 0..WINDOW - 1 {
            a.record(MS(1));
        }
        assert_eq!(a.slowest(), Some(MS(50)));
        a.record(MS(2));
        assert_eq!(a.slowest(), Some(MS(2)), "the slow one aged out");
        a.record(Duration::MAX);
        assert_eq!(
            a.slowest(),
            Some(Duration::from_micros(u64::from(u32::MAX)))
        );
    }
}
