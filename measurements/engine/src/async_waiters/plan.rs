//! What one run does: how many waiters over how many locks and sessions, and which waiter goes
//! where (the same assignment on every side).

use std::time::Duration;

/// The sizes and bounds of one run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Waiting acquires at once (each phase starts this many).
    pub waiters: usize,
    /// Lock paths the waiters are spread over (each held by a holder while the queue forms).
    pub locks: usize,
    /// Waiter sessions per side (the holders have one more of their own).
    pub sessions: usize,
    /// The smaller queue, run before the full one: threads at two sizes.
    pub small_waiters: usize,
    /// Waiters given up with their sessions' link suspended (as many more are kept).
    pub suspended: usize,
    /// How long the waiters' link stays down once they are given up.
    pub suspension: Duration,
    /// Guards dropped at once while the executor's 1 ms timer is watched (one lock each).
    pub drops: usize,
    /// How long a kept waiter may take to acquire after the holders release, in the
    /// cancellation phases, before it counts as stalled.
    pub stall_bound: Duration,
    /// How long the server's count of nodes must stay the same to count as settled (the
    /// orphans are counted once it has).
    pub quiet: Duration,
    /// The bound of every other wait (the queue forming, the drain, joining the waiters).
    pub bound: Duration,
    /// Every session's timeout (longer than a loaded machine's pauses with 10,000 threads).
    pub session_timeout: Duration,
}

impl Plan {
    /// Issue 40's size: 10,000 waiters over 500 locks and 20 sessions.
    pub fn full() -> Plan {
        Plan {
            waiters: 10_000,
            locks: 500,
            sessions: 20,
            small_waiters: 1_000,
            suspended: 1_000,
            suspension: Duration::from_secs(2),
            drops: 5_000,
            stall_bound: Duration::from_secs(30),
            quiet: Duration::from_secs(1),
            bound: Duration::from_secs(600),
            session_timeout: Duration::from_secs(30),
        }
    }

    /// A smoke run: 200 waiters over 10 locks and 4 sessions (a smaller queue of 40), 20
    /// given up with the link suspended for 0.3 s, 100 guards dropped, a 2 s stall bound, the
    /// server's count settled after 0.4 s the same.
    pub fn tiny() -> Plan {
        Plan {
            waiters: 200,
            locks: 10,
            sessions: 4,
            small_waiters: 40,
            suspended: 20,
            suspension: Duration::from_millis(300),
            drops: 100,
            stall_bound: Duration::from_secs(2),
            quiet: Duration::from_millis(400),
            bound: Duration::from_secs(60),
            ..Plan::full()
        }
    }

    /// Refuses sizes the phases cannot run: every count at least one, and at least two
    /// waiters per lock, so that each lock has a cancelled waiter and a kept one.
    pub fn check(&self) -> Result<(), String> {
        if self.locks == 0 || self.sessions == 0 {
            return Err("--locks and --sessions must be at least 1".into());
        }
        if self.waiters < 2 * self.locks {
            return Err(format!(
                "--waiters ({}) must be at least twice --locks ({}): each lock needs a cancelled \
                 waiter and a kept one",
                self.waiters, self.locks
            ));
        }
        if self.suspended < self.locks {
            return Err(format!(
                "--suspended ({}) must be at least --locks ({}): each lock needs a cancelled \
                 waiter and a kept one",
                self.suspended, self.locks
            ));
        }
        if self.drops == 0 {
            return Err("--drops must be at least 1".into());
        }
        Ok(())
    }

    /// This plan with `waiters` waiters over `locks` locks (a phase's own layout).
    pub(super) fn sized(&self, waiters: usize, locks: usize) -> Plan {
        Plan {
            waiters,
            locks,
            ..self.clone()
        }
    }

    /// The smaller queue's layout: `small_waiters` (at most `waiters`) over as many locks as
    /// fit (at most `locks`).
    pub fn small(&self) -> Plan {
        let waiters = self.small_waiters.min(self.waiters);
        self.sized(waiters, self.locks.min(waiters))
    }

    /// The suspended cancels' layout: as many kept waiters as given-up ones, over `locks`.
    pub fn suspended_layout(&self) -> Plan {
        self.sized(2 * self.suspended, self.locks)
    }

    /// The dropped guards' layout: one waiter per lock.
    pub fn drops_layout(&self) -> Plan {
        self.sized(self.drops, self.drops)
    }

    /// The most waiters (so threads, on the blocking side) any phase has at once.
    pub fn most_waiters(&self) -> usize {
        self.waiters.max(self.drops).max(2 * self.suspended)
    }

    /// The lock directories of a phase under `root`.
    pub(super) fn dirs(&self, root: &str) -> Vec<String> {
        (0..self.locks)
            .map(|l| format!("{root}/lock-{l:04}"))
            .collect()
    }

    /// Waiter `i`'s round: waiters are started round by round, one per lock each round.
    fn round(&self, i: usize) -> usize {
        i / self.locks
    }

    /// Waiter `i`'s lock.
    pub(super) fn lock_of(&self, i: usize) -> usize {
        i % self.locks
    }

    /// Waiter `i`'s session: rotated by lock as well as by round, so a lock's waiters are on
    /// different sessions and a session carries cancelled and kept waiters alike.
    pub(super) fn session_of(&self, i: usize) -> usize {
        (self.round(i) + self.lock_of(i)) % self.sessions
    }

    /// In the cancellation phases, waiter `i` is cancelled (even rounds) or kept (odd rounds):
    /// on every lock cancelled and kept waiters alternate in queue order, so a kept waiter
    /// has cancelled ones ahead of it.
    pub(super) fn is_cancelled(&self, i: usize) -> bool {
        self.round(i) % 2 == 0
    }

    /// The delay after which cancelled waiter `i` of the mid-create phase is cancelled:
    /// 2 to 5 ms, spread over the waiters.
    pub(super) fn mid_create_delay(&self, i: usize) -> Duration {
        Duration::from_millis(2 + ((self.round(i) / 2 + self.lock_of(i)) % 4) as u64)
    }

    /// The number of cancelled waiters of a cancellation phase.
    pub fn cancelled(&self) -> usize {
        (0..self.waiters).filter(|&i| self.is_cancelled(i)).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every lock has as many cancelled waiters as kept ones, spread over several sessions.
    #[test]
    fn each_lock_alternates_cancelled_and_kept_waiters_over_sessions() {
        let plan = Plan::full();
        assert_eq!(plan.cancelled(), 5_000);
        for lock in [0, 7, 499] {
            let mine: Vec<usize> = (0..plan.waiters)
                .filter(|&i| plan.lock_of(i) == lock)
                .collect();
            assert_eq!(mine.len(), 20);
            let cancelled = mine.iter().filter(|&&i| plan.is_cancelled(i)).count();
            assert_eq!(cancelled, 10);
            let mut sessions: Vec<usize> = mine.iter().map(|&i| plan.session_of(i)).collect();
            sessions.sort_unstable();
            sessions.dedup();
            assert_eq!(sessions.len(), 20);
        }
        let delays: Vec<u128> = (0..plan.waiters)
            .map(|i| plan.mid_create_delay(i).as_millis())
            .collect();
        assert_eq!(delays.iter().min(), Some(&2));
        assert_eq!(delays.iter().max(), Some(&5));
        assert_eq!(plan.suspended_layout().cancelled(), 1_000);
        assert_eq!(Plan::tiny().suspended_layout().cancelled(), 20);
    }

    #[test]
    fn sizes_that_cannot_run_are_refused_with_a_reason() {
        let mut plan = Plan::tiny();
        plan.waiters = 15;
        assert!(plan.check().unwrap_err().contains("twice --locks"));
        plan.locks = 0;
        assert!(plan.check().is_err());
        let mut plan = Plan::tiny();
        plan.suspended = 5;
        assert!(plan.check().unwrap_err().contains("--suspended"));
        assert!(Plan::tiny().check().is_ok());
    }
}
