//! Proving the session to the quorum: which answers show that the ensemble's leader renewed
//! the session, when, and that it still led a quorum then.
//!
//! Facts of ZooKeeper 3.8 this rests on, each with where its source makes it true:
//! 1. A follower touches a session in its own table for every packet of it, a ping too
//!    (`ZooKeeperServer.submitRequestNow` → `touch`), and forwards every `sync` and every
//!    write to its leader (`FollowerRequestProcessor`); it answers neither alone.
//! 2. The leader sends every follower a PING every `tickTime/2` (`Leader.lead`); the follower
//!    answers each at once with the sessions touched since its last answer (`Learner.ping`),
//!    and the leader renews each of those when it reads the answer (`LearnerHandler`, case
//!    `PING` → `touch`; `ExpiryQueue.update`: `now + T`, rounded up to a tick). Nothing else
//!    renews a session held through a follower but a reconnect (`REVALIDATE`): not a
//!    forwarded request, not a ping.
//! 3. Between one follower and its leader each direction is one ordered stream, so the leader
//!    reads every PING answer the follower sent before a forwarded request before it reads
//!    that request, and the follower reads every PING the leader sent before an answer before
//!    it reads that answer. A follower that loses its leader closes its clients, so one
//!    connection of ours is one follower–leader stream throughout.
//! 4. Half a tick: the operator states `tickTime` ([`NativeOptions::ensemble_tick_time`]);
//!    unstated, a session is taken to be at least two ticks long, so `tick/2 <= T/4`. That is
//!    ZooKeeper's default `minSessionTimeout` (`QuorumPeerConfig`: `2 × tickTime`), not a
//!    rule: an operator may set it lower, and must then state the tick.
//! 5. A write is answered only once a quorum of its leader's epoch has accepted it
//!    (`ProposalRequestProcessor` proposes every request that has a transaction, and
//!    `PrepRequestProcessor` gives a `multi` one even when its operations fail: an error
//!    transaction). A leader of a later epoch starts its session tracker only after a quorum
//!    has accepted its epoch (`Leader.lead`: `waitForEpochAck`, later `startZkServer` →
//!    `createSessionTracker`), and that tracker sets every session to expire `T` after it
//!    starts (`SessionTrackerImpl`'s constructor). A member that has accepted a later epoch
//!    never follows an earlier leader again (`Learner.registerWithLeader` refuses a smaller
//!    epoch). The two quorums share a member, which accepted our write before it accepted the
//!    later epoch: every later leader starts its tracker after our write was sent.
//!
//! The rule has two halves.
//!
//! **Renewal.** For three syncs `i`, `j`, `m` answered on one connection, where `j` was sent
//! at least [`spacing`] (half a tick plus a margin for the leader's loop) after `i`'s answer
//! arrived and `m` was sent after `j`'s answer arrived: when `m`'s answer arrives, the leader
//! of this connection has renewed the session at or after the moment `i` was sent. (The
//! leader answered `i` and then `j` at least half a tick apart, so it sent a PING between
//! them (2, 4); the follower read that PING after `i`'s answer, so after touching us for `i`
//! (1), and answered it with that touch before reading `j`'s answer, so before forwarding
//! `m`; the leader read that PING answer, and renewed us, before it read `m` (3), which it
//! must have to answer it.) On the leader itself every request renews the session directly,
//! so the rule holds there too, only later than it could. A ConnectResponse that accepts the
//! session is a renewal by itself at the moment the ConnectRequest was sent: a new session is
//! created by the leader, a resumed one revalidated with it (which renews it).
//!
//! **Epoch.** A renewal at `r` is a proof only once a write sent on the same connection at
//! or after `r` has been answered. A leader cut off from its followers goes on answering
//! syncs and revalidating sessions alone until its learners time out (`syncLimit × tick`),
//! while the others elect a leader that may expire the session meanwhile: its renewals are
//! real but no longer count. The write ties them to a leader that still had its quorum after
//! `r` (5): the leader that renewed cannot expire the session before `r + T`, and every later
//! leader started its tracker after `r`. The write is a `multi` of one `check` of `/` (any
//! version): it changes nothing and commits even where the check fails (an ACL that hides
//! `/`).
//!
//! How often: a sync every `T/24` and the write every `T/6` while the session holds or waits
//! for a lock. Then a proof is at most about `spacing + 3·T/24 + 3 round trips` (about
//! `0.4T` unstated) old in steady state, under the `2T/3` at which holders turn `Suspect`;
//! a member that answers pings but proves nothing (cut off from the leader, or a leader
//! without its quorum) is left once the proof is [`leave_after`] old, with `T/4` to spare to
//! take the session to another member before a leader could expire it.
//!
//! [`NativeOptions::ensemble_tick_time`]: crate::client::native::NativeOptions::ensemble_tick_time

use std::collections::VecDeque;
use std::time::Duration;

use crate::primitives::boot_clock::BootInstant;

/// A sync every `T / SYNCS_PER_TIMEOUT` while proving.
const SYNCS_PER_TIMEOUT: u32 = 24;

/// A write every `T / WRITES_PER_TIMEOUT` while proving: often enough that a renewal waits
/// for its write less than the chain that proves it takes (`spacing` plus two syncs).
const WRITES_PER_TIMEOUT: u32 = 6;

/// The least time between two syncs (a very short session would flood its member).
const MIN_PERIOD: Duration = Duration::from_millis(20);

/// Syncs answered more than this many timeouts ago prove nothing new: dropped.
const KEEP_FOR_TIMEOUTS: u32 = 2;

/// The most answered syncs, and renewals awaiting their write, kept (a bound on memory
/// whatever the timeout).
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

/// The time between two writes while proving.
fn write_period(timeout: Duration) -> Duration {
    (timeout / WRITES_PER_TIMEOUT).max(MIN_PERIOD)
}

/// The requests of one connection and the proofs their answers make.
#[derive(Debug, Default)]
pub(in crate::client::native) struct ProofChain {
    /// The connection these requests went on: answers from another are ignored.
    connection: u64,
    /// Answered syncs of this connection, `(sent, answered)`, oldest first.
    answered: VecDeque<(BootInstant, BootInstant)>,
    /// When the last sync was sent on this connection.
    last_sent: Option<BootInstant>,
    /// Renewals proven on this connection and not yet bound to a write, oldest first.
    unbound: VecDeque<BootInstant>,
    /// When the latest write answered on this connection was sent.
    write_answered: Option<BootInstant>,
    /// When the last write was sent on this connection, and whether it is still unanswered.
    write_sent: Option<(BootInstant, bool)>,
    /// The ensemble's `tickTime`, when the operator stated it.
    tick: Option<Duration>,
    /// When this connection's ConnectRequest was sent: a member gets `leave_after` from then
    /// to prove, as it renewed the session then (only its epoch is unproven).
    started: Option<BootInstant>,
}

impl ProofChain {
    /// A chain for an ensemble whose `tickTime` is `tick`, when stated.
    pub(in crate::client::native) fn new(tick: Option<Duration>) -> ProofChain {
        ProofChain {
            tick,
            ..ProofChain::default()
        }
    }

    /// Starts over for connection number `connection` (a chain never spans two members),
    /// which accepted the session for a ConnectRequest sent at `asked_at` (a renewal, once a
    /// write binds it; `None`: nothing renewed, a read-only member).
    pub(in crate::client::native) fn restart(
        &mut self,
        connection: u64,
        asked_at: Option<BootInstant>,
    ) {
        *self = ProofChain {
            connection,
            unbound: asked_at.into_iter().collect(),
            started: asked_at,
            ..ProofChain::new(self.tick)
        };
    }

    /// How long this connection has gone without a proof at `now`, given the session's
    /// `unproven` time: no longer than since its ConnectRequest (which renewed the session).
    pub(in crate::client::native) fn unproven(
        &self,
        unproven: Option<Duration>,
        now: BootInstant,
    ) -> Option<Duration> {
        let since_connect = self.started.map(|at| now.saturating_duration_since(at));
        match (unproven, since_connect) {
            (Some(u), Some(c)) => Some(u.min(c)),
            (u, _) => u,
        }
    }

    /// Whether a sync is due at `now`.
    pub(in crate::client::native) fn due(&self, now: BootInstant, timeout: Duration) -> bool {
        self.last_sent
            .is_none_or(|sent| now >= sent + period(timeout))
    }

    /// Whether the write is due at `now`: one at a time, the first at once.
    pub(in crate::client::native) fn write_due(&self, now: BootInstant, timeout: Duration) -> bool {
        match self.write_sent {
            None => true,
            Some((_, true)) => false,
            Some((sent, false)) => now >= sent + write_period(timeout),
        }
    }

    /// When the next sync or write is due (now, if none was sent).
    pub(in crate::client::native) fn next_due(&self, timeout: Duration) -> Option<BootInstant> {
        let sync = self.last_sent.map(|sent| sent + period(timeout))?;
        match self.write_sent {
            None => None,
            Some((_, true)) => Some(sync),
            Some((sent, false)) => Some(sync.min(sent + write_period(timeout))),
        }
    }

    /// Records a sync sent at `at` on the current connection.
    pub(in crate::client::native) fn sent(&mut self, at: BootInstant) {
        self.last_sent = Some(at);
    }

    /// Records the write sent at `at` on the current connection.
    pub(in crate::client::native) fn write_sent(&mut self, at: BootInstant) {
        self.write_sent = Some((at, true));
    }

    /// Records the outcome of the write sent at `sent` on connection `connection`:
    /// `committed` when it was answered (by a quorum of its leader's epoch), false when the
    /// connection broke. Returns the proof it makes, if any: the latest renewal at or before
    /// `sent`.
    pub(in crate::client::native) fn write_answered(
        &mut self,
        connection: u64,
        sent: BootInstant,
        committed: bool,
    ) -> Option<BootInstant> {
        if connection != self.connection {
            return None;
        }
        if let Some((at, in_flight)) = &mut self.write_sent {
            if *at == sent {
                *in_flight = false;
            }
        }
        if !committed {
            return None;
        }
        self.write_answered = Some(self.write_answered.map_or(sent, |w| w.max(sent)));
        let mut proof = None;
        while self.unbound.front().is_some_and(|&r| r <= sent) {
            proof = self.unbound.pop_front();
        }
        proof
    }

    /// Records the answer, at `answered`, to the sync sent at `sent` on connection
    /// `connection`; returns the instant the leader is then proven to have renewed the
    /// session at or after, if the chain proves one and a write already binds it.
    pub(in crate::client::native) fn answered(
        &mut self,
        connection: u64,
        sent: BootInstant,
        answered: BootInstant,
        timeout: Duration,
    ) -> Option<BootInstant> {
        if connection != self.connection {
            return None;
        }
        let renewal = self.renewal(sent, timeout);
        while self.answered.len() >= KEEP_MAX
            || self.answered.front().is_some_and(|&(_, at)| {
                answered.saturating_duration_since(at) > timeout * KEEP_FOR_TIMEOUTS
            })
        {
            self.answered.pop_front();
        }
        self.answered.push_back((sent, answered));
        let renewal = renewal?;
        if self.write_answered.is_some_and(|w| renewal <= w) {
            return Some(renewal);
        }
        if self.unbound.back().is_none_or(|&last| last < renewal) {
            if self.unbound.len() >= KEEP_MAX {
                self.unbound.pop_front();
            }
            self.unbound.push_back(renewal);
        }
        None
    }

    /// The renewal the answer to a sync sent at `m_sent` proves with the syncs answered
    /// before (the first half of the rule).
    fn renewal(&self, m_sent: BootInstant, timeout: Duration) -> Option<BootInstant> {
        // j: the latest sync answered before m was sent.
        let &(j_sent, _) = self.answered.iter().rev().find(|&&(_, at)| at <= m_sent)?;
        // i: the latest sync answered at least `spacing` before j was sent.
        let spacing = spacing(timeout, self.tick);
        let &(i_sent, _) = self
            .answered
            .iter()
            .rev()
            .find(|&&(_, at)| at + spacing <= j_sent)?;
        Some(i_sent)
    }
}

#[cfg(test)]
mod tests;
