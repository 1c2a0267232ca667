//! `InterProcessMutex`: a mutex shared between processes, reentrant per (lock object,
//! thread), wire-compatible with Curator's `InterProcessMutex` (`_c_<uuid>-lock-<seq>` nodes).

use std::collections::HashMap;
use std::sync::Arc;
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::client::SharedClient;
use crate::error::{Error, Result};
use crate::retry::{ExponentialBackoffRetry, RetryPolicy};

use super::acquiring::run_async;
use super::driver::{LockDriver, StandardDriver};
use super::held::{HeldNode, LockState};
use super::internals::{past, LockInternals, NodeKind, Wait};
use super::layout::LOCK_NAME;
use super::participants::{self as queue, Participant, ParticipantKind};
use super::revocation::{RevocationListener, RevocationWatch};
use super::{cancel, Acquire, HoldFuture, ReleaseFuture};
use super::{deadline_after, default_node_data, validate_lock_path, InterProcessLock};

mod owned_holds;
use owned_holds::OwnedHold;

/// One thread's hold on the mutex.
struct Owner {
    count: usize,
    node: Arc<HeldNode>,
    /// Set when the lock was taken revocable; dropped (stops re-arming) with the hold.
    _revocation: Option<RevocationWatch>,
}

/// A reentrant mutex across processes (Curator's `InterProcessMutex`).
///
/// Reentrancy is per (object, thread): a thread that holds it may acquire it again (a count,
/// no ZooKeeper traffic but one read after a reconnect) and must release as often. Re-entering a hold that was lost with its
/// session is [`Error::SessionLost`]. Two objects on the same path are two contenders, even in
/// one thread. An owned hold ([`InterProcessLock::lock_owned`] on an `Arc` of the mutex)
/// belongs to its guard, not to a thread: each is a contender of its own, not reentrant.
///
/// ```
/// use std::sync::Arc;
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::locks::{InterProcessLock, InterProcessMutex};
///
/// let ensemble = MemoryEnsemble::new();
/// let mutex = InterProcessMutex::new(ensemble.connect(), "/locks/orders")?;
/// {
///     let guard = mutex.lock()?;              // blocks until held
///     assert!(guard.is_valid());
///     let _token = guard.fencing_token()?;    // pass to the resources you write
/// }                                           // released here
/// assert!(!mutex.is_acquired_in_this_process());
/// # Ok::<(), zk_locks::Error>(())
/// ```
pub struct InterProcessMutex {
    internals: LockInternals,
    data: Option<Vec<u8>>,
    owners: Mutex<HashMap<ThreadId, Owner>>,
    /// Holds of owned guards, known by their node (see `mutex/owned_holds.rs`).
    owned: Mutex<Vec<OwnedHold>>,
    revocation: Mutex<Option<RevocationListener>>,
}

impl InterProcessMutex {
    /// A mutex at `path` (validated: a typed error names a bad path).
    pub fn new(client: SharedClient, path: &str) -> Result<InterProcessMutex> {
        Self::with_driver(client, path, Arc::new(StandardDriver::new(LOCK_NAME, 1)))
    }

    /// A mutex with another driver (the read/write lock's sides).
    pub(crate) fn with_driver(
        client: SharedClient,
        path: &str,
        driver: Arc<dyn LockDriver>,
    ) -> Result<InterProcessMutex> {
        validate_lock_path(path)?;
        Ok(InterProcessMutex {
            internals: LockInternals::new(
                client,
                path.to_string(),
                driver,
                Arc::new(ExponentialBackoffRetry::default()),
            ),
            data: None,
            owners: Mutex::new(HashMap::new()),
            owned: Mutex::new(Vec::new()),
            revocation: Mutex::new(None),
        })
    }

    /// Stores `data` in the lock node instead of the default (`<host> <pid>`).
    pub fn with_data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.data = Some(data.into());
        self
    }

    /// Sets the data of the next nodes (a leader selector's id).
    pub(crate) fn set_data(&mut self, data: Vec<u8>) {
        self.data = Some(data);
    }

    /// Replaces the retry policy (default: exponential backoff, 50 ms base, 10 retries).
    pub fn with_retry_policy(mut self, retry: Arc<dyn RetryPolicy>) -> Self {
        let i = &self.internals;
        self.internals = LockInternals::new(
            i.client().clone(),
            i.base_path().to_string(),
            i.driver().clone(),
            retry,
        )
        .with_observe(i.observe().clone());
        self
    }

    /// Reports this mutex's events to `observer` instead of the client's (see
    /// [`LockObserver`](super::LockObserver)).
    pub fn with_observer(self, observer: Arc<dyn super::LockObserver>) -> Self {
        let observe = self.internals.observe_with(Some(observer));
        self.observed_as(observe)
    }

    /// Reports this mutex's events through `observe`.
    pub(crate) fn observed_as(mut self, observe: super::observe::Observe) -> Self {
        self.internals = self.internals.with_observe(observe);
        self
    }

    /// The observer this mutex reports to, if any.
    pub(crate) fn observer(&self) -> Option<Arc<dyn super::LockObserver>> {
        self.internals.observe().observer().cloned()
    }

    /// The lock's path.
    pub fn path(&self) -> &str {
        self.internals.base_path()
    }

    /// Like [`InterProcessLock::acquire_timeout`]; `None` waits without limit.
    pub(crate) fn acquire_with(&self, timeout: Option<Duration>, kind: NodeKind) -> Result<bool> {
        let me = thread::current().id();
        // Only this thread changes its own entry, so it cannot go between the two looks (the
        // state may cost one read after a reconnect: not under the lock).
        if let Some(node) = self.held_node() {
            // A hold lost with its session is not ours to re-enter: another client may hold
            // the lock now. The thread releases it (as often as it took it) and acquires again.
            if node.state() == LockState::Lost {
                return Err(Error::SessionLost {
                    path: self.path().to_string(),
                });
            }
            if let Some(owner) = self.owners.lock().get_mut(&me) {
                owner.count += 1;
            }
            return Ok(true);
        }
        let deadline = timeout.and_then(deadline_after);
        let revocation = self.revocation.lock().clone();
        let data = self.node_data(revocation.is_some());
        let Some(node) = self.internals.attempt(deadline, &data, kind)? else {
            return Ok(false);
        };
        let node = Arc::new(node);
        let owner = Owner {
            count: 1,
            node: node.clone(),
            _revocation: None,
        };
        self.owners.lock().insert(me, owner);
        // The revocation watch is armed once the hold is recorded: its listener (on a thread
        // of its own) may already find the request written to our node.
        if let Some(listener) = revocation {
            let watch = RevocationWatch::start(
                self.internals.client().clone(),
                node.path().to_string(),
                listener,
                past(deadline, Instant::now()),
            );
            if let Some(owner) = self.owners.lock().get_mut(&me) {
                owner._revocation = Some(watch);
            }
        }
        Ok(true)
    }

    /// The data of a new node: a revocable lock's node starts empty, so that only
    /// `__REVOKE__` means revoke.
    fn node_data(&self, revocable: bool) -> Vec<u8> {
        match (revocable, &self.data) {
            (true, _) => Vec::new(),
            (false, Some(d)) => d.clone(),
            (false, None) => default_node_data(),
        }
    }

    /// True when the calling thread holds the lock through this object.
    pub fn is_owned_by_current_thread(&self) -> bool {
        self.owners.lock().contains_key(&thread::current().id())
    }

    /// The calling thread's node, when it holds the lock.
    pub fn held_node(&self) -> Option<Arc<HeldNode>> {
        self.owners
            .lock()
            .get(&thread::current().id())
            .map(|o| o.node.clone())
    }

    /// All contenders' nodes, in queue order (the holder first), as full paths.
    pub fn participant_nodes(&self) -> Result<Vec<String>> {
        self.internals.participant_nodes()
    }

    /// Every contender in queue order (the order of [`Self::participant_nodes`]), with its
    /// node's data and whether it holds the lock (see [`Participant`]).
    pub fn participants(&self) -> Result<Vec<Participant>> {
        let driver = self.internals.driver();
        queue::list(self.client(), self.path(), driver.as_ref(), |sorted, i| {
            (ParticipantKind::Mutex, driver.holds(sorted, i))
        })
    }

    /// The driver that decides for this mutex's nodes.
    pub(crate) fn driver(&self) -> &Arc<dyn LockDriver> {
        self.internals.driver()
    }

    /// The client the mutex queues through.
    pub(crate) fn client(&self) -> &SharedClient {
        self.internals.client()
    }

    /// The data set with [`Self::with_data`], if any.
    pub(crate) fn data(&self) -> Option<&[u8]> {
        self.data.as_deref()
    }

    /// The retry policy in effect.
    pub(crate) fn retry_policy(&self) -> &Arc<dyn RetryPolicy> {
        self.internals.retry_policy()
    }

    /// Makes the next acquisitions revocable: when someone calls [`super::Revoker::attempt_revoke`]
    /// on our node, `listener` runs and should get the holder to release. Cleared by each
    /// final release, as in Curator.
    ///
    /// The listener runs on a thread of its own (never inside `lock()`: it may wait for the
    /// holder), once the hold is recorded, one call at a time, and once per revoke request
    /// whatever the reconnects, including a request already on the node when the lock is
    /// granted (a revoker that asked the whole queue). Releasing is the holding thread's job:
    /// `release()` from the listener's thread is [`Error::NotOwner`].
    pub fn make_revocable(&self, listener: impl Fn() + Send + Sync + 'static) {
        *self.revocation.lock() = Some(Arc::new(listener));
    }
}

impl InterProcessLock for InterProcessMutex {
    fn acquire(&self) -> Result<()> {
        match self.acquire_with(None, NodeKind::Sequential)? {
            true => Ok(()),
            // Only a closed client ends an untimed wait without the lock.
            false => Err(Error::Closed),
        }
    }

    fn acquire_timeout(&self, timeout: Duration) -> Result<bool> {
        self.acquire_with(Some(timeout), NodeKind::Sequential)
    }

    fn try_acquire_with(&self, how: &Acquire) -> Result<bool> {
        let held = cancel::run(how, self.path(), self.client(), |timeout| {
            Ok(self
                .acquire_with(timeout, NodeKind::Sequential)?
                .then_some(()))
        })?;
        Ok(held.is_some())
    }

    fn release(&self) -> Result<()> {
        self.release_within(Wait::Until(None))
    }

    fn release_within(&self, wait: Wait) -> Result<()> {
        match self.forget_hold()? {
            Some(node) => self.internals.release_within(&node, wait),
            None => Ok(()),
        }
    }

    /// Releases the calling thread's hold when it is the one `nodes` stand for. A guard whose
    /// hold is over (lost with its session and replaced by a newer hold of this thread, or
    /// released already) leaves the current hold alone.
    fn release_hold(&self, nodes: &[Arc<HeldNode>]) -> Result<()> {
        match self.held_node() {
            Some(node) if nodes.iter().any(|n| Arc::ptr_eq(n, &node)) => self.release(),
            // Lost with its session: the server deleted it, nothing is left to release.
            _ if nodes.iter().all(|n| n.state() == LockState::Lost) => Ok(()),
            _ => Err(Error::NotOwner {
                path: self.path().to_string(),
            }),
        }
    }

    /// True when a thread or an owned guard holds the lock through this object.
    fn is_acquired_in_this_process(&self) -> bool {
        !self.owners.lock().is_empty() || !self.owned.lock().is_empty()
    }

    fn acquire_owned_hold(&self, how: &Acquire) -> Result<Option<Vec<Arc<HeldNode>>>> {
        let held = cancel::run(how, self.path(), self.client(), |timeout| {
            self.acquire_owned(timeout)
        })?;
        Ok(held.map(|node| vec![node]))
    }

    fn acquire_owned_hold_async<'a>(&'a self, how: &'a Acquire) -> HoldFuture<'a> {
        Box::pin(async move {
            let held = run_async(how, self.path(), |timeout| {
                self.acquire_owned_async(timeout)
            });
            Ok(held.await?.map(|node| vec![node]))
        })
    }

    fn release_owned_hold(&self, nodes: &[Arc<HeldNode>]) -> Result<()> {
        self.release_owned(nodes, Wait::Until(None))
    }

    fn release_owned_hold_async<'a>(&'a self, nodes: &'a [Arc<HeldNode>]) -> ReleaseFuture<'a> {
        Box::pin(self.release_owned_async(nodes))
    }

    fn release_owned_hold_within(&self, nodes: &[Arc<HeldNode>], wait: Wait) -> Result<()> {
        self.release_owned(nodes, wait)
    }

    fn lock_paths(&self) -> Vec<String> {
        vec![self.path().to_string()]
    }

    fn held_nodes(&self) -> Vec<Arc<HeldNode>> {
        self.held_node().into_iter().collect()
    }
}

impl InterProcessMutex {
    /// Counts one release of the calling thread's hold; its node when that was the last.
    fn forget_hold(&self) -> Result<Option<Arc<HeldNode>>> {
        let me = thread::current().id();
        let node = {
            let mut owners = self.owners.lock();
            let Some(owner) = owners.get_mut(&me) else {
                return Err(Error::NotOwner {
                    path: self.path().to_string(),
                });
            };
            owner.count -= 1;
            if owner.count > 0 {
                return Ok(None);
            }
            // Forget the hold even if the delete fails: keeping it could make two holders
            // (CURATOR-678); the delete goes on in the background instead.
            owners.remove(&me).map(|o| o.node)
        };
        *self.revocation.lock() = None;
        Ok(node)
    }
}

impl std::fmt::Debug for InterProcessMutex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterProcessMutex")
            .field("path", &self.path())
            .field("holders_in_process", &self.owners.lock().len())
            .finish()
    }
}
