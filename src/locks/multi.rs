//! `InterProcessMultiLock`: several locks as one, all or nothing (Curator's
//! `InterProcessMultiLock`), with two differences that matter in production:
//! - a timed acquire shares **one deadline** across all locks (Curator gives each lock the full
//!   timeout, so its worst case is N × timeout);
//! - a release reports **every** failure (Curator keeps the first and a wrap count).
//!
//! An owned multi-lock guard ([`InterProcessLock::lock_owned`] on an `Arc` of it) takes an
//! owned hold of each lock, all or nothing under the same rules, and releases each lock's own
//! part in reverse order.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::SharedClient;
use crate::error::{Error, Result};

use super::cleanup::{give_back, BackgroundMark, Wait};
use super::held::HeldNode;
use super::mutex::InterProcessMutex;
use super::{deadline_after, Acquire, HoldFuture, InterProcessLock, ReleaseFuture};

/// All-or-nothing over any [`InterProcessLock`]s.
///
/// ```
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::locks::{InterProcessLock, InterProcessMultiLock};
///
/// let ensemble = MemoryEnsemble::new();
/// let both = InterProcessMultiLock::from_paths(ensemble.connect(), &["/locks/a", "/locks/b"])?
///     .ordered_by_path();
/// let guard = both.lock()?;          // both held, or neither
/// assert_eq!(guard.nodes().len(), 2);
/// # drop(guard);
/// # Ok::<(), zk_locks::Error>(())
/// ```
pub struct InterProcessMultiLock {
    locks: Vec<(String, Box<dyn InterProcessLock>)>,
}

impl std::fmt::Debug for InterProcessMultiLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.locks.iter().map(|(k, _)| k))
            .finish()
    }
}

impl InterProcessMultiLock {
    /// Locks acquired in list order and released in reverse.
    ///
    /// Two locks on one path (as told by [`InterProcessLock::lock_paths`]) are an
    /// [`Error::InvalidArgument`]: the second would wait for the first forever.
    pub fn new(locks: Vec<Box<dyn InterProcessLock>>) -> Result<Self> {
        let locks = locks
            .into_iter()
            .enumerate()
            .map(|(i, l)| (format!("#{i}"), l))
            .collect();
        Self::with_names(locks)
    }

    /// Named locks (the names order them with [`Self::ordered_by_path`]); two locks on one
    /// path are refused as by [`Self::new`].
    pub fn with_names(locks: Vec<(String, Box<dyn InterProcessLock>)>) -> Result<Self> {
        let mut seen: Vec<String> = Vec::new();
        for (_, lock) in &locks {
            for path in lock.lock_paths() {
                if seen.contains(&path) {
                    return Err(Error::InvalidArgument {
                        name: "locks",
                        reason: format!(
                            "two locks on {path:?}: the multi-lock would wait for itself"
                        ),
                    });
                }
                seen.push(path);
            }
        }
        Ok(InterProcessMultiLock { locks })
    }

    /// A mutex per path, acquired in the order given; a path listed twice is refused as by
    /// [`Self::new`].
    pub fn from_paths(client: SharedClient, paths: &[&str]) -> Result<Self> {
        let locks = paths
            .iter()
            .map(|p| {
                let m: Box<dyn InterProcessLock> =
                    Box::new(InterProcessMutex::new(client.clone(), p)?);
                Ok((p.to_string(), m))
            })
            .collect::<Result<Vec<_>>>()?;
        Self::with_names(locks)
    }

    /// Acquire in name (path) order instead of list order: two multi-locks over the same paths,
    /// listed in different orders, then cannot deadlock each other.
    pub fn ordered_by_path(mut self) -> Self {
        self.locks.sort_by(|a, b| a.0.cmp(&b.0));
        self
    }

    /// Acquires every lock before `deadline` (when `how` has a timeout) or none: on failure,
    /// timeout or cancel (each lock is given `how`'s token), what this call took is released in
    /// reverse order, within the deadline (see [`give_back`]); once cancelled, as past the
    /// deadline: one try each, none once one went to the background.
    fn acquire_all(&self, deadline: Option<Instant>, how: &Acquire) -> Result<bool> {
        let mark = BackgroundMark::now();
        let mut taken: Vec<&dyn InterProcessLock> = Vec::with_capacity(self.locks.len());
        let mut outcome = Ok(true);
        for (_, lock) in &self.locks {
            let step = lock.try_acquire_with(&how.with_timeout(left_of(deadline, how)));
            match step {
                Ok(true) => taken.push(lock.as_ref()),
                Ok(false) => {
                    outcome = Ok(false);
                    break;
                }
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
        }
        if !matches!(outcome, Ok(true)) {
            let deadline = given_back_by(deadline, how);
            let failures = give_back(taken.into_iter().rev(), deadline, mark, |lock, wait| {
                lock.release_within(wait)
            });
            for e in failures {
                log::info!("multi-lock: giving back a lock after a failed acquire: {e}");
            }
        }
        outcome
    }
}

impl InterProcessMultiLock {
    /// [`Self::acquire_all`] with owned holds: each lock's owned hold as `how` says, before
    /// `deadline` when it has a timeout, or none, what this call took given back in reverse
    /// order within the deadline (at once when cancelled); the nodes of every hold, in
    /// acquisition order.
    fn acquire_all_owned(
        &self,
        deadline: Option<Instant>,
        how: &Acquire,
    ) -> Result<Option<Vec<Arc<HeldNode>>>> {
        let mark = BackgroundMark::now();
        let mut taken: Vec<(&dyn InterProcessLock, Vec<Arc<HeldNode>>)> = Vec::new();
        let mut outcome = Ok(true);
        for (_, lock) in &self.locks {
            match lock.acquire_owned_hold(&how.with_timeout(left_of(deadline, how))) {
                Ok(Some(nodes)) => taken.push((lock.as_ref(), nodes)),
                Ok(None) => {
                    outcome = Ok(false);
                    break;
                }
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
        }
        match outcome {
            Ok(true) => Ok(Some(taken.into_iter().flat_map(|(_, n)| n).collect())),
            outcome => {
                let deadline = given_back_by(deadline, how);
                let failures = give_back(taken.iter().rev(), deadline, mark, |(lock, n), wait| {
                    lock.release_owned_hold_within(n, wait)
                });
                for e in failures {
                    log::info!("multi-lock: giving back a lock after a failed acquire: {e}");
                }
                outcome.map(|_| None)
            }
        }
    }

    /// [`Self::acquire_all_owned`] as a future: the locks' own hold futures in list order;
    /// what it took is given back in reverse order, without waiting for the deletes, when it
    /// fails, runs out of time or is dropped.
    async fn acquire_all_owned_async(
        &self,
        deadline: Option<Instant>,
        how: &Acquire,
    ) -> Result<Option<Vec<Arc<HeldNode>>>> {
        let mut taken = GivenBackOnDrop(Vec::new());
        for (_, lock) in &self.locks {
            let each = how.with_timeout(left_of(deadline, how));
            match lock.acquire_owned_hold_async(&each).await? {
                Some(nodes) => taken.0.push((lock.as_ref(), nodes)),
                None => return Ok(None),
            }
        }
        let all = std::mem::take(&mut taken.0);
        Ok(Some(all.into_iter().flat_map(|(_, n)| n).collect()))
    }

    /// Releases every lock in reverse order with `release`, going on after failures.
    fn release_each(&self, release: impl Fn(&dyn InterProcessLock) -> Result<()>) -> Result<()> {
        let mut failures = Vec::new();
        for (_, lock) in self.locks.iter().rev() {
            if let Err(e) = release(lock.as_ref()) {
                failures.push(e);
            }
        }
        match failures.len() {
            0 => Ok(()),
            _ => Err(Error::Multiple(failures)),
        }
    }
}

/// The owned holds an async multi-lock acquire took so far: given back in reverse order,
/// without waiting, unless handed to the guard.
struct GivenBackOnDrop<'a>(Vec<(&'a dyn InterProcessLock, Vec<Arc<HeldNode>>)>);

impl Drop for GivenBackOnDrop<'_> {
    fn drop(&mut self) {
        for (lock, nodes) in self.0.drain(..).rev() {
            if let Err(e) = lock.release_owned_hold_within(&nodes, Wait::Unawaited) {
                log::info!("multi-lock: giving back a lock after a failed acquire: {e}");
            }
        }
    }
}

/// What is left of `how`'s timeout for the next lock (`None`: `how` has none).
fn left_of(deadline: Option<Instant>, how: &Acquire) -> Option<Duration> {
    how.timeout_value().map(|_| {
        deadline.map_or(Duration::MAX, |d| {
            d.saturating_duration_since(Instant::now())
        })
    })
}

/// The deadline to give back by after a failed acquire: now once `how`'s token is cancelled
/// (one try each, none once one went to the background), else the acquire's own.
fn given_back_by(deadline: Option<Instant>, how: &Acquire) -> Option<Instant> {
    match how.cancel_token() {
        Some(token) if token.is_cancelled() => Some(Instant::now()),
        _ => deadline,
    }
}

impl InterProcessLock for InterProcessMultiLock {
    fn acquire(&self) -> Result<()> {
        self.acquire_all(None, &Acquire::new()).map(|_| ())
    }

    fn acquire_timeout(&self, timeout: Duration) -> Result<bool> {
        self.acquire_all(deadline_after(timeout), &Acquire::new().timeout(timeout))
    }

    /// Each lock waits with `how`'s token and what is left of its timeout; a cancel gives
    /// back, in reverse order, what the call took.
    fn try_acquire_with(&self, how: &Acquire) -> Result<bool> {
        how.check(&self.lock_paths().join(", "))?;
        let deadline = how.timeout_value().and_then(deadline_after);
        self.acquire_all(deadline, how)
    }

    /// Releases every lock in reverse order, going on after failures; the error lists them all.
    fn release(&self) -> Result<()> {
        self.release_each(|lock| lock.release())
    }

    fn release_within(&self, wait: Wait) -> Result<()> {
        self.release_each(|lock| lock.release_within(wait))
    }

    /// Like [`Self::release`], each lock releasing only its part of the guard's hold.
    fn release_hold(&self, nodes: &[Arc<HeldNode>]) -> Result<()> {
        self.release_each(|lock| lock.release_hold(nodes))
    }

    /// As [`Self::try_acquire_with`], with an owned hold of each lock.
    fn acquire_owned_hold(&self, how: &Acquire) -> Result<Option<Vec<Arc<HeldNode>>>> {
        how.check(&self.lock_paths().join(", "))?;
        let deadline = how.timeout_value().and_then(deadline_after);
        self.acquire_all_owned(deadline, how)
    }

    fn acquire_owned_hold_async<'a>(&'a self, how: &'a Acquire) -> HoldFuture<'a> {
        Box::pin(async move {
            how.check(&self.lock_paths().join(", "))?;
            let deadline = how.timeout_value().and_then(deadline_after);
            self.acquire_all_owned_async(deadline, how).await
        })
    }

    /// Each lock releases its own part of the guard's nodes, in reverse order.
    fn release_owned_hold(&self, nodes: &[Arc<HeldNode>]) -> Result<()> {
        self.release_each(|lock| lock.release_owned_hold(nodes))
    }

    fn release_owned_hold_within(&self, nodes: &[Arc<HeldNode>], wait: Wait) -> Result<()> {
        self.release_each(|lock| lock.release_owned_hold_within(nodes, wait))
    }

    /// Each lock's own part, in reverse order, each awaited; every failure reported.
    fn release_owned_hold_async<'a>(&'a self, nodes: &'a [Arc<HeldNode>]) -> ReleaseFuture<'a> {
        Box::pin(async move {
            let mut failures = Vec::new();
            for (_, lock) in self.locks.iter().rev() {
                if let Err(e) = lock.release_owned_hold_async(nodes).await {
                    failures.push(e);
                }
            }
            match failures.len() {
                0 => Ok(()),
                _ => Err(Error::Multiple(failures)),
            }
        })
    }

    fn is_acquired_in_this_process(&self) -> bool {
        self.locks
            .iter()
            .all(|(_, l)| l.is_acquired_in_this_process())
    }

    fn held_nodes(&self) -> Vec<Arc<HeldNode>> {
        self.locks
            .iter()
            .flat_map(|(_, l)| l.held_nodes())
            .collect()
    }

    fn lock_paths(&self) -> Vec<String> {
        self.locks
            .iter()
            .flat_map(|(_, l)| l.lock_paths())
            .collect()
    }
}
