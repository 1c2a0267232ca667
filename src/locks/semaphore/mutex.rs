//! [`InterProcessSemaphoreMutex`]: a one-lease semaphore as a (non-reentrant) lock.

use std::sync::Arc;
use std::thread::{self, ThreadId};
use std::time::Duration;

use super::{InterProcessSemaphoreV2, Lease};
use crate::client::SharedClient;
use crate::error::{Error, Result};
use crate::locks::acquiring::run_async;
use crate::locks::cleanup::Wait;
use crate::locks::held::{HeldNode, LockState};
use crate::locks::owned::take_held_by;
use crate::locks::{Acquire, HoldFuture, InterProcessLock, LockGuard, Participant, ReleaseFuture};
use crate::retry::RetryPolicy;

/// A mutex made of a one-lease semaphore (Curator's `InterProcessSemaphoreMutex`).
///
/// **Not reentrant**: a second acquire by the holding thread waits (or times out) like any
/// other contender.
///
/// A lease taken with [`InterProcessLock::acquire`] may be released from any thread, as in
/// Curator. A lease taken with [`InterProcessLock::lock`] or
/// [`InterProcessLock::try_lock_for`] belongs to its guard: the guard returns that lease and
/// no other (after a session loss, this object may hold a newer lease by then), and
/// [`InterProcessLock::release`] from another thread is [`Error::NotOwner`] and leaves it
/// alone. A lease taken with [`InterProcessLock::lock_owned`] (on an `Arc` of the lock) belongs
/// to its [`crate::OwnedLockGuard`], which returns it from any thread; `release` never
/// touches it.
///
/// ```
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::{InterProcessLock, InterProcessSemaphoreMutex};
///
/// let ensemble = MemoryEnsemble::new();
/// let lock = InterProcessSemaphoreMutex::new(ensemble.connect(), "/locks/nightly")?;
/// let guard = lock.lock()?;
/// assert!(lock.try_lock()?.is_none()); // not reentrant: the holder's own second try fails
/// drop(guard);                         // the lease goes back
/// assert!(lock.try_lock()?.is_some());
/// # Ok::<(), zk_locks::Error>(())
/// ```
#[derive(Debug)]
pub struct InterProcessSemaphoreMutex {
    semaphore: InterProcessSemaphoreV2,
    lease: parking_lot::Mutex<Option<StoredLease>>,
    /// The leases of owned guards, each returned by its own guard (known by its node).
    owned: parking_lot::Mutex<Vec<Lease>>,
}

/// The lease this object holds, and the thread whose guard owns it (if a guard does).
#[derive(Debug)]
struct StoredLease {
    lease: Lease,
    guard_thread: Option<ThreadId>,
}

impl InterProcessSemaphoreMutex {
    /// A semaphore mutex at `path`.
    pub fn new(client: SharedClient, path: &str) -> Result<Self> {
        Ok(InterProcessSemaphoreMutex {
            semaphore: InterProcessSemaphoreV2::new(client, path, 1)?,
            lease: parking_lot::Mutex::new(None),
            owned: parking_lot::Mutex::new(Vec::new()),
        })
    }

    /// Stores `data` in the lease node instead of the default (`<host> <pid>`), as
    /// [`InterProcessSemaphoreV2::with_data`] does.
    pub fn with_data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.semaphore = self.semaphore.with_data(data);
        self
    }

    /// Reports this lock's events to `observer` instead of the client's, as
    /// [`InterProcessSemaphoreV2::with_observer`] does.
    pub fn with_observer(mut self, observer: Arc<dyn crate::locks::LockObserver>) -> Self {
        self.semaphore = self.semaphore.with_observer(observer);
        self
    }

    /// Replaces the retry policy, as [`InterProcessSemaphoreV2::with_retry_policy`] does.
    pub fn with_retry_policy(mut self, retry: Arc<dyn RetryPolicy>) -> Self {
        self.semaphore = self.semaphore.with_retry_policy(retry);
        self
    }

    /// The lock's path.
    pub fn path(&self) -> &str {
        self.semaphore.path()
    }

    /// The lease node names (see [`InterProcessSemaphoreV2::participant_nodes`]).
    pub fn participant_nodes(&self) -> Result<Vec<String>> {
        self.semaphore.participant_nodes()
    }

    /// The lease nodes (the holder's, and one waiting for room), see
    /// [`InterProcessSemaphoreV2::participants`].
    pub fn participants(&self) -> Result<Vec<Participant>> {
        self.semaphore.participants()
    }

    /// Keeps `lease` (owned by the calling thread's guard when `for_guard`); returns its node.
    fn store(&self, lease: Lease, for_guard: bool) -> Arc<HeldNode> {
        let node = lease.node.clone();
        let stored = StoredLease {
            lease,
            guard_thread: for_guard.then(|| thread::current().id()),
        };
        // A lease still stored here was lost with its session (one lease: nothing else lets
        // a second one be granted); dropping it deletes nothing of the new session.
        let _old = self.lease.lock().replace(stored);
        node
    }

    fn guard(&self, lease: Lease) -> LockGuard<'_, Self> {
        let node = self.store(lease, true);
        LockGuard::with_nodes(self, vec![node])
    }
}

impl InterProcessLock for InterProcessSemaphoreMutex {
    fn acquire(&self) -> Result<()> {
        let lease = self.semaphore.acquire()?;
        self.store(lease, false);
        Ok(())
    }

    fn acquire_timeout(&self, timeout: Duration) -> Result<bool> {
        match self.semaphore.acquire_timeout(timeout)? {
            Some(lease) => {
                self.store(lease, false);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn try_acquire_with(&self, how: &Acquire) -> Result<bool> {
        match self.semaphore.acquire_with(how)? {
            Some(lease) => {
                self.store(lease, false);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn release(&self) -> Result<()> {
        self.release_within(Wait::Until(None))
    }

    fn release_within(&self, wait: Wait) -> Result<()> {
        // Taken out before closing, so a concurrent acquire never sees a closed lease (CURATOR-376).
        let stored = {
            let mut slot = self.lease.lock();
            let guard_thread = slot.as_ref().and_then(|s| s.guard_thread);
            if guard_thread.is_some_and(|t| t != thread::current().id()) {
                return Err(Error::NotOwner {
                    path: self.path().to_string(),
                });
            }
            slot.take()
        };
        match stored {
            Some(s) => s.lease.close_within(wait),
            None => Err(Error::NotAcquired {
                path: self.path().to_string(),
            }),
        }
    }

    fn release_hold(&self, nodes: &[Arc<HeldNode>]) -> Result<()> {
        let stored = self
            .lease
            .lock()
            .take_if(|s| nodes.iter().any(|n| Arc::ptr_eq(n, &s.lease.node)));
        match stored {
            Some(s) => s.lease.close(),
            // Lost with its session: the server deleted it, nothing is left to return.
            None if nodes.iter().all(|n| n.state() == LockState::Lost) => Ok(()),
            None => Err(Error::NotAcquired {
                path: self.path().to_string(),
            }),
        }
    }

    /// True when a lease is held through this object (by [`Self::acquire`], a guard or an
    /// owned guard).
    fn is_acquired_in_this_process(&self) -> bool {
        self.lease.lock().is_some() || !self.owned.lock().is_empty()
    }

    fn acquire_owned_hold(&self, how: &Acquire) -> Result<Option<Vec<Arc<HeldNode>>>> {
        Ok(self.semaphore.acquire_with(how)?.map(|lease| {
            let node = lease.node.clone();
            self.owned.lock().push(lease);
            vec![node]
        }))
    }

    fn acquire_owned_hold_async<'a>(&'a self, how: &'a Acquire) -> HoldFuture<'a> {
        Box::pin(async move {
            let s = &self.semaphore;
            let leases = run_async(how, s.path(), |t| s.acquire_inner_async(1, t)).await?;
            Ok(leases.map(|mut leases| {
                let lease = leases.remove(0);
                let node = lease.node.clone();
                self.owned.lock().push(lease);
                vec![node]
            }))
        })
    }

    fn release_owned_hold(&self, nodes: &[Arc<HeldNode>]) -> Result<()> {
        self.release_owned_hold_within(nodes, Wait::Until(None))
    }

    /// Returns the owned leases among `nodes` (a multi-lock's other nodes are left alone),
    /// taken out before closing as [`Self::release`] does; [`Error::NotAcquired`] when none is.
    fn release_owned_hold_within(&self, nodes: &[Arc<HeldNode>], wait: Wait) -> Result<()> {
        let mut outcome = Ok(());
        for lease in self.take_owned(nodes)? {
            if let Err(e) = lease.close_within(wait) {
                outcome = Err(e);
            }
        }
        outcome
    }

    fn release_owned_hold_async<'a>(&'a self, nodes: &'a [Arc<HeldNode>]) -> ReleaseFuture<'a> {
        Box::pin(async move {
            let mut outcome = Ok(());
            for lease in self.take_owned(nodes)? {
                if let Err(e) = lease.close_async().await {
                    outcome = Err(e);
                }
            }
            outcome
        })
    }

    fn held_nodes(&self) -> Vec<Arc<HeldNode>> {
        self.lease
            .lock()
            .as_ref()
            .map(|s| s.lease.node.clone())
            .into_iter()
            .collect()
    }

    fn lock_paths(&self) -> Vec<String> {
        vec![self.path().to_string()]
    }

    fn lock(&self) -> Result<LockGuard<'_, Self>> {
        let lease = self.semaphore.acquire()?;
        Ok(self.guard(lease))
    }

    fn try_lock_for(&self, timeout: Duration) -> Result<Option<LockGuard<'_, Self>>> {
        Ok(self
            .semaphore
            .acquire_timeout(timeout)?
            .map(|lease| self.guard(lease)))
    }

    fn try_lock_with(&self, how: &Acquire) -> Result<Option<LockGuard<'_, Self>>> {
        Ok(self
            .semaphore
            .acquire_with(how)?
            .map(|lease| self.guard(lease)))
    }
}

impl InterProcessSemaphoreMutex {
    /// Takes the owned leases among `nodes` out (a multi-lock's other nodes are left alone),
    /// before they are returned; [`Error::NotAcquired`] when none is.
    fn take_owned(&self, nodes: &[Arc<HeldNode>]) -> Result<Vec<Lease>> {
        let mine = take_held_by(&mut self.owned.lock(), nodes, |l| &l.node);
        if mine.is_empty() {
            return Err(Error::NotAcquired {
                path: self.path().to_string(),
            });
        }
        Ok(mine)
    }
}
