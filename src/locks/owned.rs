//! `OwnedLockGuard`: a guard that owns what it needs (an `Arc` of the lock and its nodes), so
//! it can be stored in a struct, moved to another thread, kept across an `.await` (taken
//! through `spawn_blocking`) and dropped anywhere.
//!
//! Rules kept here and in each recipe's owned hold:
//! - **An owned hold belongs to its guard, not to a thread.** Each recipe records it by its
//!   node (the mutex and both read/write sides: a table of owned nodes beside the per-thread
//!   owners; the semaphore mutex: its owned leases; the multi-lock: each lock's own part), and
//!   releases exactly the nodes the guard stands for, from whatever thread drops the guard.
//! - **An owned hold is a contender of its own, never reentrant.** Each `lock_owned` queues a
//!   node of its own, so owned guards of one object exclude each other as two processes do,
//!   and exclude the object's thread holds (in both directions). A second owned acquire while
//!   holding one waits for the first (`try_lock_owned_for` times out), as tokio's
//!   `Mutex::lock_owned` does: there is no thread to recognise the holder by, and tasks that
//!   share one lock object must exclude each other. No downgrade nor upgrade between owned
//!   read/write guards: an owned reader waits for an owned writer as any reader does.
//! - **An owned acquire waits as a thread's does**: each recipe's `acquire_owned_hold` takes an
//!   `Acquire` and runs through `cancel::run`, so a cancelled owned wait is a wait past its
//!   deadline (its node deleted, no owned hold recorded, `Error::Cancelled`).
//! - **The borrowed `LockGuard` is unchanged**: thread holds stay reentrant per thread.

use std::sync::Arc;
use std::time::Duration;

use crate::client::{MultiOp, MultiResult};
use crate::error::Result;

use super::acquiring::Unlocking;
use super::guard::{fencing_token_of, state_of, wait_while_on};
use super::held::{HeldNode, LockState};
use super::watching::WhileHeld;
use super::InterProcessLock;

/// Holds a lock for as long as it lives, owning an `Arc` of the lock object: `Send`, `Sync`
/// and `'static` (for a `'static` lock type), so it can be stored in a struct, moved to a
/// worker thread or an async task, and released on drop by whichever thread drops it.
///
/// Taken with [`InterProcessLock::lock_owned`], [`InterProcessLock::try_lock_owned_for`] or
/// [`InterProcessLock::try_lock_owned_with`] (a timeout and/or a
/// [`CancelToken`](super::CancelToken)) on an `Arc` of any recipe. It answers as [`super::LockGuard`] does: [`Self::state`] (no
/// request unless after a reconnect), [`Self::is_valid`], [`Self::wait_while_held`],
/// [`Self::wait_until_lost`], [`Self::fencing_token`], [`Self::unlock`].
///
/// **Not reentrant**: an owned hold belongs to its guard, not to a thread. Each owned acquire
/// queues a node of its own, so owned guards taken from one shared lock object exclude each
/// other (as guards of two processes do) and exclude the object's thread holds; a second
/// owned acquire while holding one waits for the first (as tokio's `Mutex::lock_owned`). On a
/// read/write lock, owned guards neither downgrade nor upgrade.
///
/// ```
/// use std::sync::Arc;
/// use std::thread;
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::{InterProcessLock, InterProcessMutex, LockState, OwnedLockGuard};
///
/// struct Leader {
///     guard: OwnedLockGuard<InterProcessMutex>, // stored, no lifetime
/// }
///
/// let ensemble = MemoryEnsemble::new();
/// let mutex = Arc::new(InterProcessMutex::new(ensemble.connect(), "/locks/leader")?);
/// let leader = Leader { guard: mutex.lock_owned()? };
/// // Owned guards of one object exclude each other: this one times out.
/// assert!(mutex.try_lock_owned_for(std::time::Duration::ZERO)?.is_none());
/// let worker = thread::spawn(move || {
///     assert_eq!(leader.guard.state(), LockState::Held);
///     leader.guard.unlock() // released from another thread
/// });
/// worker.join().unwrap()?;
/// assert!(!mutex.is_acquired_in_this_process());
/// # Ok::<(), zk_locks::Error>(())
/// ```
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct OwnedLockGuard<L: InterProcessLock + ?Sized> {
    lock: Arc<L>,
    nodes: Vec<Arc<HeldNode>>,
    released: bool,
    /// Taken by a future: dropped, it sends its delete without waiting for the answer (async
    /// code must not stall its executor).
    unawaited: bool,
}

impl<L: InterProcessLock + ?Sized> OwnedLockGuard<L> {
    /// A guard over the owned hold that `nodes` stand for (from
    /// [`InterProcessLock::acquire_owned_hold`]).
    pub(crate) fn new(lock: Arc<L>, nodes: Vec<Arc<HeldNode>>) -> Self {
        OwnedLockGuard {
            lock,
            nodes,
            released: false,
            unawaited: false,
        }
    }

    /// A guard taken by a future: dropped, it releases without waiting for the delete.
    pub(crate) fn released_unawaited(lock: Arc<L>, nodes: Vec<Arc<HeldNode>>) -> Self {
        let mut guard = OwnedLockGuard::new(lock, nodes);
        guard.unawaited = true;
        guard
    }

    /// The lock object this guard holds.
    pub fn lock_object(&self) -> &Arc<L> {
        &self.lock
    }

    /// The lock node's full path (the first one, for a multi-lock).
    pub fn node_path(&self) -> Option<&str> {
        self.nodes.first().map(|n| n.path())
    }

    /// The nodes this guard holds the lock through.
    pub fn nodes(&self) -> &[Arc<HeldNode>] {
        &self.nodes
    }

    /// Held, Suspect (connection suspended) or Lost; the worst over all nodes held. Asks the
    /// server only on the first call after each reconnect, as [`super::LockGuard::state`].
    pub fn state(&self) -> LockState {
        state_of(&self.nodes)
    }

    /// `state() == Held`.
    pub fn is_valid(&self) -> bool {
        self.state() == LockState::Held
    }

    /// Blocks until the lock may be lost (Suspect or Lost) or the timeout passes; returns the
    /// state then, watching each node meanwhile (see [`super::LockGuard::wait_while_held`]).
    pub fn wait_while_held(&self, timeout: Option<Duration>) -> LockState {
        wait_while_on(&self.nodes, timeout, |state| state == LockState::Held)
    }

    /// [`Self::wait_while_held`] as a future, for async code: ready with the state once it is
    /// no longer `Held` (`Suspect` or `Lost`). No thread waits: the node's watch (armed by a
    /// request that nobody blocks on), the session's changes and a proof turning stale wake
    /// it. Runtime-agnostic, `Send + 'static`; `select!` it beside the work the lock guards,
    /// and stop that work when it is ready. A timeout is the caller's; dropping it leaves
    /// nothing registered.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use zk_locks::client::memory::MemoryEnsemble;
    /// use zk_locks::locks::{InterProcessLock, InterProcessMutex, LockState};
    ///
    /// # let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// # runtime.block_on(async {
    /// let ensemble = MemoryEnsemble::new();
    /// let mutex = Arc::new(InterProcessMutex::new(ensemble.connect(), "/locks/jobs")?);
    /// let guard = mutex.lock_owned()?;
    /// tokio::select! {
    ///     state = guard.wait_while_held_async() => println!("stop: the lock is {state:?}"),
    ///     () = async { /* the work the lock guards */ } => {}
    /// }
    /// # Ok::<(), zk_locks::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn wait_while_held_async(&self) -> WhileHeld {
        WhileHeld::new(&self.nodes)
    }

    /// Blocks until the lock is `Lost` or the timeout passes; returns the state then (see
    /// [`super::LockGuard::wait_until_lost`]).
    pub fn wait_until_lost(&self, timeout: Option<Duration>) -> LockState {
        wait_while_on(&self.nodes, timeout, |state| state != LockState::Lost)
    }

    /// The fencing token (the lock node's czxid; the largest one for a multi-lock).
    pub fn fencing_token(&self) -> Result<i64> {
        fencing_token_of(&self.nodes)
    }

    /// A `multi` that commits only while every node of the hold exists, as
    /// [`LockGuard::fenced_multi`](super::LockGuard::fenced_multi).
    pub fn fenced_multi(&self, ops: &[MultiOp]) -> Result<Vec<MultiResult>> {
        super::fenced::fenced_multi(&self.nodes, ops)
    }

    /// Releases now and reports a failure (dropping the guard only logs it). A `Lost` guard
    /// releases without waiting for the link, with `Ok`, as [`super::LockGuard::unlock`].
    pub fn unlock(mut self) -> Result<()> {
        self.released = true;
        self.lock.release_owned_hold(&self.nodes)
    }
}

impl<L: InterProcessLock + ?Sized + 'static> OwnedLockGuard<L> {
    /// [`Self::unlock`] as a future, for async code that wants the outcome: each delete's
    /// answer awaited, no thread blocked. (Dropping the guard releases too, without waiting
    /// for the answer.) Dropped before it is ready, the release goes on unawaited.
    pub fn unlock_async(mut self) -> Unlocking {
        self.released = true;
        let (lock, nodes) = (self.lock.clone(), std::mem::take(&mut self.nodes));
        Unlocking {
            inner: Box::pin(async move { lock.release_owned_hold_async(&nodes).await }),
        }
    }
}

impl<L: InterProcessLock + ?Sized> Drop for OwnedLockGuard<L> {
    fn drop(&mut self) {
        if !self.released {
            let released = match self.unawaited {
                true => self
                    .lock
                    .release_owned_hold_within(&self.nodes, super::cleanup::Wait::Unawaited),
                false => self.lock.release_owned_hold(&self.nodes),
            };
            if let Err(e) = released {
                log::warn!("releasing lock on owned guard drop: {e}");
            }
        }
    }
}

impl<L: InterProcessLock + ?Sized> std::fmt::Debug for OwnedLockGuard<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        super::guard::debug_hold(f, "OwnedLockGuard", &self.nodes)
    }
}

/// Takes out of `holds` those that `nodes` stand for (by node identity), leaving the others:
/// how each recipe finds the owned holds a guard releases.
pub(crate) fn take_held_by<T>(
    holds: &mut Vec<T>,
    nodes: &[Arc<HeldNode>],
    node_of: impl Fn(&T) -> &Arc<HeldNode>,
) -> Vec<T> {
    let (mine, rest) = std::mem::take(holds)
        .into_iter()
        .partition(|h| nodes.iter().any(|n| Arc::ptr_eq(n, node_of(h))));
    *holds = rest;
    mine
}

/// The promise of the type: every recipe's owned guard can be stored, moved to another thread
/// and shared (`Send + Sync + 'static`). A change that breaks it fails the build here.
const _: () = {
    fn send_sync_static<T: Send + Sync + 'static>() {}
    #[allow(dead_code)]
    fn every_recipe() {
        use super::{
            InterProcessMultiLock, InterProcessMutex, InterProcessSemaphoreMutex, ReadLock,
            WriteLock,
        };
        send_sync_static::<OwnedLockGuard<InterProcessMutex>>();
        send_sync_static::<OwnedLockGuard<ReadLock>>();
        send_sync_static::<OwnedLockGuard<WriteLock>>();
        send_sync_static::<OwnedLockGuard<InterProcessSemaphoreMutex>>();
        send_sync_static::<OwnedLockGuard<InterProcessMultiLock>>();
    }
};
