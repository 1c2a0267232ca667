//! Retry policies, as Curator's: how many times and how long to retry an operation whose
//! outcome was unknown (connection loss) or whose node vanished (session loss).

use std::time::{Duration, Instant};

/// Decides whether to retry after a retryable failure, and how long to sleep first.
pub trait RetryPolicy: Send + Sync + std::fmt::Debug {
    /// `attempt` counts the retries so far (0 for the first retry), `elapsed` is the time since
    /// the operation started. `Some(sleep)` to retry after sleeping, `None` to give up.
    fn next_retry(&self, attempt: u32, elapsed: Duration) -> Option<Duration>;
}

/// Exponential backoff with jitter: `base × random(1..=2^attempt)`, capped at `max_sleep`, for at
/// most `max_retries` retries (Curator's `ExponentialBackoffRetry`).
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::retry::{ExponentialBackoffRetry, RetryPolicy};
/// use zk_locks::InterProcessMutex;
///
/// let policy = ExponentialBackoffRetry::new(Duration::from_millis(100), 3);
/// let first = policy.next_retry(0, Duration::ZERO).unwrap();
/// assert!(first >= Duration::from_millis(100) && first <= Duration::from_millis(200));
/// assert_eq!(policy.next_retry(3, Duration::ZERO), None); // gave up
///
/// let mutex = InterProcessMutex::new(MemoryEnsemble::new().connect(), "/locks/x")?
///     .with_retry_policy(Arc::new(policy));
/// # Ok::<(), zk_locks::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ExponentialBackoffRetry {
    base_sleep: Duration,
    max_retries: u32,
    max_sleep: Duration,
}

impl ExponentialBackoffRetry {
    /// `base_sleep` (the first sleep) and `max_retries` (the most retries) with a 10 s cap per
    /// sleep.
    pub fn new(base_sleep: Duration, max_retries: u32) -> Self {
        ExponentialBackoffRetry {
            base_sleep,
            max_retries,
            max_sleep: Duration::from_secs(10),
        }
    }

    /// Caps every single sleep at `max_sleep` (Curator's `maxSleepMs`).
    pub fn max_sleep(mut self, max_sleep: Duration) -> Self {
        self.max_sleep = max_sleep;
        self
    }
}

impl Default for ExponentialBackoffRetry {
    /// 50 ms base, 10 retries, 2 s cap: rides out a leader election (a few seconds).
    fn default() -> Self {
        ExponentialBackoffRetry {
            base_sleep: Duration::from_millis(50),
            max_retries: 10,
            max_sleep: Duration::from_secs(2),
        }
    }
}

impl RetryPolicy for ExponentialBackoffRetry {
    fn next_retry(&self, attempt: u32, _elapsed: Duration) -> Option<Duration> {
        if attempt >= self.max_retries {
            return None;
        }
        let span = 1u64 << attempt.min(29);
        let factor = fastrand::u64(1..=span);
        let sleep = self
            .base_sleep
            .saturating_mul(factor.min(u32::MAX as u64) as u32);
        Some(sleep.min(self.max_sleep))
    }
}

/// A fixed number of retries with a fixed sleep (Curator's `RetryNTimes`).
#[derive(Debug, Clone)]
pub struct RetryNTimes {
    n: u32,
    sleep: Duration,
}

impl RetryNTimes {
    /// At most `n` retries, `sleep` apart.
    pub fn new(n: u32, sleep: Duration) -> Self {
        RetryNTimes { n, sleep }
    }
}

impl RetryPolicy for RetryNTimes {
    fn next_retry(&self, attempt: u32, _elapsed: Duration) -> Option<Duration> {
        (attempt < self.n).then_some(self.sleep)
    }
}

/// Retries with a fixed sleep until a total time has passed (Curator's `RetryUntilElapsed`).
#[derive(Debug, Clone)]
pub struct RetryUntilElapsed {
    max_elapsed: Duration,
    sleep: Duration,
}

impl RetryUntilElapsed {
    /// Retries `sleep` apart until `max_elapsed` has passed since the first try (no retry
    /// starts after it).
    pub fn new(max_elapsed: Duration, sleep: Duration) -> Self {
        RetryUntilElapsed { max_elapsed, sleep }
    }
}

impl RetryPolicy for RetryUntilElapsed {
    fn next_retry(&self, _attempt: u32, elapsed: Duration) -> Option<Duration> {
        // Saturating: a user's sleep (up to `Duration::MAX`) must not overflow.
        (elapsed.saturating_add(self.sleep) < self.max_elapsed).then_some(self.sleep)
    }
}

/// Never retries.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoRetry;

impl RetryPolicy for NoRetry {
    fn next_retry(&self, _attempt: u32, _elapsed: Duration) -> Option<Duration> {
        None
    }
}

/// One operation's retries: its policy, when it started, how many retries it made and the
/// deadline it must return by. [`Retries::next`] is the one call a retry site makes.
#[derive(Debug)]
pub(crate) struct Retries<'a> {
    policy: &'a dyn RetryPolicy,
    start: Instant,
    attempts: u32,
    deadline: Option<Instant>,
}

/// What [`Retries::next`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RetryStep {
    /// Slept as long as the policy asked: try again.
    Again {
        /// The sleep just taken.
        slept: Duration,
    },
    /// The policy gives up.
    Exhausted,
    /// The deadline has passed, or would pass before the next try could start (no sleep then).
    DeadlinePassed,
}

impl<'a> Retries<'a> {
    /// Retries of an operation that started at `start` and must end by `deadline` (`None`: only
    /// the policy limits it).
    pub(crate) fn new(
        policy: &'a dyn RetryPolicy,
        start: Instant,
        deadline: Option<Instant>,
    ) -> Retries<'a> {
        Retries {
            policy,
            start,
            attempts: 0,
            deadline,
        }
    }

    /// The retries made so far.
    pub(crate) fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The time since the operation started.
    pub(crate) fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// The deadline, if any.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Asks the policy for one more try and sleeps as it says; never sleeps past the deadline.
    pub(crate) fn next(&mut self) -> RetryStep {
        let step = self.decide();
        if let RetryStep::Again { slept } = step {
            // Cut short when a cancellable acquire on this thread is cancelled.
            crate::primitives::cancel::sleep(slept);
        }
        step
    }

    /// [`Self::next`] without the sleep: `Again { slept }` names the pause the caller takes
    /// before trying again (a future's pause, on the timer).
    pub(crate) fn decide(&mut self) -> RetryStep {
        // A cancelled acquire is past its deadline (`locks::cancel`).
        if crate::primitives::cancel::requested() {
            return RetryStep::DeadlinePassed;
        }
        let Some(sleep) = self.policy.next_retry(self.attempts, self.start.elapsed()) else {
            return RetryStep::Exhausted;
        };
        let wake = Instant::now().checked_add(sleep);
        if let Some(deadline) = self.deadline {
            if wake.is_none_or(|w| w >= deadline) {
                return RetryStep::DeadlinePassed;
            }
        }
        // A user's policy may never give up: the count saturates rather than overflows.
        self.attempts = self.attempts.saturating_add(1);
        RetryStep::Again { slept: sleep }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_is_bounded() {
        let p = ExponentialBackoffRetry::new(Duration::from_millis(10), 5);
        for attempt in 0..5 {
            let s = p.next_retry(attempt, Duration::ZERO).unwrap();
            assert!(
                s >= Duration::from_millis(10) && s <= Duration::from_millis(10 << attempt),
                "{s:?}"
            );
        }
        assert_eq!(p.next_retry(5, Duration::ZERO), None);
        let capped = p.max_sleep(Duration::from_millis(15));
        assert!(capped.next_retry(4, Duration::ZERO).unwrap() <= Duration::from_millis(15));
    }

    #[test]
    fn n_times_and_elapsed() {
        let n = RetryNTimes::new(2, Duration::from_millis(1));
        assert!(n.next_retry(1, Duration::ZERO).is_some());
        assert!(n.next_retry(2, Duration::ZERO).is_none());
        let e = RetryUntilElapsed::new(Duration::from_secs(1), Duration::from_millis(100));
        assert!(e.next_retry(50, Duration::from_millis(500)).is_some());
        assert!(e.next_retry(0, Duration::from_millis(950)).is_none());
        assert!(NoRetry.next_retry(0, Duration::ZERO).is_none());
    }

    /// A user's durations never overflow in a policy: a sleep too long to fit in the budget
    /// (up to `Duration::MAX`) is no retry, not a panic.
    #[test]
    fn policies_take_any_duration() {
        let e = RetryUntilElapsed::new(Duration::from_secs(10), Duration::MAX);
        assert_eq!(e.next_retry(0, Duration::from_secs(1)), None);
        let e = RetryUntilElapsed::new(Duration::MAX, Duration::from_millis(1));
        assert!(e.next_retry(0, Duration::MAX).is_none());
        let x = ExponentialBackoffRetry {
            base_sleep: Duration::MAX,
            max_retries: u32::MAX,
            max_sleep: Duration::MAX,
        };
        assert_eq!(
            x.next_retry(u32::MAX - 1, Duration::ZERO),
            Some(Duration::MAX)
        );
    }

    #[test]
    fn retries_count_and_stop_at_the_policy_or_the_deadline() {
        let policy = RetryNTimes::new(2, Duration::from_millis(1));
        let mut r = Retries::new(&policy, Instant::now(), None);
        assert!(matches!(r.next(), RetryStep::Again { .. }));
        assert!(matches!(r.next(), RetryStep::Again { .. }));
        assert_eq!(r.next(), RetryStep::Exhausted);
        assert_eq!(r.attempts(), 2);

        let long = RetryNTimes::new(5, Duration::from_secs(3600));
        let mut r = Retries::new(&long, Instant::now(), Some(Instant::now()));
        assert_eq!(r.next(), RetryStep::DeadlinePassed, "never sleeps past it");
        assert_eq!(r.attempts(), 0);
    }
}
