//! Proving the session to the quorum: which `sync` replies show that the leader renewed the
//! session, and when.
//!
//! Facts of ZooKeeper 3.8 this rests on (`Leader.lead`, `LearnerHandler`, `Learner.ping`,
//! `FollowerRequestProcessor`, `ExpiryQueue`):
//! 1. A follower touches a session in its own table for every request of it (a ping too),
//!    and forwards a `sync` (as every write) to the leader; it never answers one alone.
//! 2. The leader sends every follower a PING every `tick/2`; the follower answers each at once
//!    with the sessions touched since its last answer, and the leader renews each of those
//!    (`now + T`, rounded up to a tick) when it reads the answer. Nothing else renews a
//!    session held through a follower: not a forwarded request, not a ping.
//! 3. Between one follower and the leader each direction is one ordered stream, so the leader
//!    reads every PING answer the follower sent before a forwarded request before it reads
//!    that request, and the follower reads every PING the leader sent before a sync's answer
//!    before it reads that answer. A follower that loses its leader closes its clients, so one
//!    connection of ours is one follower–leader stream throughout.
//! 4. A session is at least two ticks long, so `tick/2 <= T/4` without knowing the server's
//!    configuration.
//!
//! The rule, for three syncs `i`, `j`, `m` answered on one connection, where `j` was sent at
//! least [`spacing`] (`T/4` plus a margin for the leader's loop) after `i`'s answer arrived and
//! `m` was sent after `j`'s answer arrived: when `m`'s answer arrives, the leader has renewed
//! the session at or after the moment `i` was sent. (The leader answered `i` and then `j` at
//! least `T/4` apart, so it sent a PING between them (2, 4); the follower read that PING after
//! `i`'s answer, so after touching us for `i` (1), and answered it with that touch before
//! reading `j`'s answer, so before forwarding `m`; the leader read that PING answer, and
//! renewed us, before it read `m` (3), which it must have to answer it.) The proof is `i`'s
//! send time, no earlier: the leader cannot expire the session before it plus `T`. On the
//! leader itself every request renews the session directly, so the rule holds there too, only
//! later than it could.
//!
//! A ConnectResponse that accepts the session is a proof by itself: a new session is created
//! by the leader, and a resumed one is revalidated with the leader (which renews it), both
//! after the ConnectRequest was sent.
//!
//! How often: a sync every `T/24` while the session holds or waits for a lock. Then a proof
//! is at most about `spacing + 3·T/24 + 3 round trips` (about `0.4T`) old in steady state,
//! under the `2T/3` at which holders turn `Suspect`; a member that answers pings but no sync
//! (cut off from the leader) is left once the proof is [`LEAVE_AFTER`] old, with `T/4` to
//! spare to take the session to another member before the leader could expire it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A sync every `T / SYNCS_PER_TIMEOUT` while proving.
const SYNCS_PER_TIMEOUT: u32 = 24;

/// The least time between two syncs (a very short session would flood its member).
const MIN_PERIOD: Duration = Duration::from_millis(20);

/// Syncs answered more than this many timeouts ago prove nothing new: dropped.
const KEEP_FOR_TIMEOUTS: u32 = 2;

/// The most answered syncs kept (a bound on memory whatever the timeout).
const KEEP_MAX: usize = 256;

/// The fraction of `T` without a proof after which a member is left for another: three
/// quarters, leaving `T/4` to move the session before the leader can expire it. Later than
/// the `2T/3` at which holders turn `Suspect`, so a holder stops trusting its lock first.
pub(in crate::client::native) fn leave_after(timeout: Duration) -> Duration {
    timeout * 3 / 4
}

/// How far apart the leader's answers to `i` and `j` must be for a PING between them: half a
/// tick (the stated `tick`, else at most `T/4` by fact 4), and `T/50` for the leader's loop
/// running late.
fn spacing(timeout: Duration, tick: Option<Duration>) -> Duration {
    tick.map_or(timeout / 4, |tick| tick / 2) + timeout / 50
}

/// The time between two syncs while proving.
pub(in crate::client::native) fn period(timeout: Duration) -> Duration {
    (timeout / SYNCS_PER_TIMEOUT).max(MIN_PERIOD)
}

/// The syncs of one connection and the proofs their answers make.
#[derive(Debug, Default)]
pub(in crate::client::native) struct ProofChain {
    /// The connection these syncs went on: answers from another are ignored.
    connection: u64,
    /// Answered syncs of this connection, `(sent, answered)`, oldest first.
    answered: VecDeque<(Instant, Instant)>,
    /// When the last sync was sent on this connection.
    last_sent: Option<Instant>,
    /// The ensemble's `tickTime`, when the operator stated it.
    tick: Option<Duration>,
}

impl ProofChain {
    /// A chain for an ensemble whose `tickTime` is `tick`, when stated.
    pub(in crate::client::native) fn new(tick: Option<Duration>) -> ProofChain {
        ProofChain {
            tick,
            ..ProofChain::default()
        }
    }

    /// Starts over for connection number `connection` (a chain never spans two members).
    pub(in crate::client::native) fn restart(&mut self, connection: u64) {
        *self = ProofChain {
            connection,
            ..ProofChain::new(self.tick)
        };
    }

    /// Whether a sync is due at `now`.
    pub(in crate::client::native) fn due(&self, now: Instant, timeout: Duration) -> bool {
        self.last_sent
            .is_none_or(|sent| now >= sent + period(timeout))
    }

    /// When the next sync is due (now, if none was sent).
    pub(in crate::client::native) fn next_due(&self, timeout: Duration) -> Option<Instant> {
        self.last_sent.map(|sent| sent + period(timeout))
    }

    /// Records a sync sent at `at` on the current connection.
    pub(in crate::client::native) fn sent(&mut self, at: Instant) {
        self.last_sent = Some(at);
    }

    /// Records the answer, at `answered`, to the sync sent at `sent` on connection
    /// `connection`; returns the instant the leader is then proven to have renewed the
    /// session at or after, if the chain proves one.
    pub(in crate::client::native) fn answered(
        &mut self,
        connection: u64,
        sent: Instant,
        answered: Instant,
        timeout: Duration,
    ) -> Option<Instant> {
        if connection != self.connection {
            return None;
        }
        let proof = self.prove(sent, timeout);
        while self.answered.len() >= KEEP_MAX
            || self.answered.front().is_some_and(|&(_, at)| {
                answered.saturating_duration_since(at) > timeout * KEEP_FOR_TIMEOUTS
            })
        {
            self.answered.pop_front();
        }
        self.answered.push_back((sent, answered));
        proof
    }

    /// The proof the answer to a sync sent at `m_sent` makes with the syncs answered before.
    fn prove(&self, m_sent: Instant, timeout: Duration) -> Option<Instant> {
        // j: the latest sync answered before m was sent.
        let &(j_sent, _) = self.answered.iter().rev().find(|&&(_, at)| at <= m_sent)?;
        // i: the latest sync answered at least `spacing` before j was sent.
        let &(i_sent, _) = self
            .answered
            .iter()
            .rev()
            .find(|&&(_, at)| at + spacing(timeout, self.tick) <= j_sent)?;
        Some(i_sent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(4);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn three_syncs_spaced_by_a_quarter_prove_the_first_send() {
        let t0 = Instant::now();
        let mut chain = ProofChain::default();
        chain.restart(7);
        // i: sent at 0, answered at 10.
        assert_eq!(chain.answered(7, t0, t0 + ms(10), T), None);
        // j: sent 1,090 ms after i's answer (spacing is 1,080 ms at T = 4 s), answered at 1,110.
        assert_eq!(chain.answered(7, t0 + ms(1100), t0 + ms(1110), T), None);
        // m: sent after j's answer: proves i's send.
        assert_eq!(chain.answered(7, t0 + ms(1120), t0 + ms(1130), T), Some(t0));
    }

    #[test]
    fn syncs_too_close_together_prove_nothing() {
        let t0 = Instant::now();
        let mut chain = ProofChain::default();
        for k in 0..10u64 {
            // Every 100 ms, answered 5 ms later: no pair is a quarter of T apart yet.
            let sent = t0 + ms(100 * k);
            assert_eq!(chain.answered(0, sent, sent + ms(5), T), None, "sync {k}");
        }
    }

    #[test]
    fn steady_syncs_keep_the_proof_under_half_the_timeout() {
        let t0 = Instant::now();
        let mut chain = ProofChain::default();
        let step = period(T);
        let mut worst = Duration::ZERO;
        let mut proof = None;
        for k in 0..200u32 {
            let sent = t0 + step * k;
            let answered = sent + ms(3);
            if let Some(p) = chain.answered(0, sent, answered, T) {
                proof = Some(p);
            }
            if k > 24 {
                worst = worst.max(answered - proof.expect("proven by now"));
            }
        }
        assert!(worst < T / 2, "a proof {worst:?} old in steady state");
    }

    #[test]
    fn answers_from_an_earlier_connection_are_ignored() {
        let t0 = Instant::now();
        let mut chain = ProofChain::default();
        chain.restart(1);
        chain.answered(1, t0, t0 + ms(1), T);
        chain.answered(1, t0 + ms(1200), t0 + ms(1201), T);
        chain.restart(2);
        assert_eq!(chain.answered(1, t0 + ms(1300), t0 + ms(1301), T), None);
        assert_eq!(chain.answered(2, t0 + ms(1300), t0 + ms(1301), T), None);
    }

    #[test]
    fn a_sync_sent_before_the_middle_one_was_answered_proves_nothing() {
        let t0 = Instant::now();
        let mut chain = ProofChain::default();
        chain.answered(0, t0, t0 + ms(1), T);
        // j sent at 1,100 ms; m sent at 1,105 ms while j was in flight; both answered at 1,110.
        chain.answered(0, t0 + ms(1100), t0 + ms(1110), T);
        assert_eq!(chain.answered(0, t0 + ms(1105), t0 + ms(1110), T), None);
        // The next sync, sent after j's answer, proves i.
        assert_eq!(chain.answered(0, t0 + ms(1111), t0 + ms(1112), T), Some(t0));
    }

    #[test]
    fn syncs_are_due_one_period_apart() {
        let t0 = Instant::now();
        let mut chain = ProofChain::default();
        assert!(chain.due(t0, T));
        chain.sent(t0);
        assert!(!chain.due(t0 + period(T) - ms(1), T));
        assert!(chain.due(t0 + period(T), T));
        assert_eq!(chain.next_due(T), Some(t0 + period(T)));
    }
}
