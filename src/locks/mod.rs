//! Curator's lock recipes on one engine.
//!
//! - [`InterProcessMutex`]: a reentrant mutex (Curator's `InterProcessMutex`);
//! - [`InterProcessReadWriteLock`]: readers/writer, with downgrade;
//! - [`InterProcessSemaphoreV2`] and [`InterProcessSemaphoreMutex`]: N leases, and one;
//! - [`InterProcessMultiLock`]: all or nothing over any of them;
//! - [`LeaderLatch`] and [`LeaderSelector`]: leader election (Curator's), leadership as a
//!   [`Leadership`] value with a term.
//!
//! Each recipe's `participants()` lists its queue with the holders flagged ([`Participant`]);
//! the names of its nodes and directories are the constants of Curator's layout
//! ([`LOCK_NAME`], [`READ_LOCK_NAME`], [`WRITE_LOCK_NAME`], [`LOCK_PARENT`], [`LEASE_PARENT`],
//! [`LEASE_BASE_NAME`]), and [`LockLayout`] tells which recipe a directory belongs to.
//!
//! Every recipe implements [`InterProcessLock`]; [`InterProcessLock::lock`] returns a
//! [`LockGuard`] that releases on drop and tells the holder whether it may have lost the lock
//! ([`LockState`]) and which fencing token guards its writes. On an `Arc` of any recipe,
//! [`InterProcessLock::lock_owned`] returns an [`OwnedLockGuard`] instead: `Send`, `Sync` and
//! `'static`, for a hold that outlives a scope or crosses threads; an owned hold belongs to
//! its guard and is not reentrant. In async code, [`InterProcessLock::lock_owned_async`] and
//! [`InterProcessLock::try_lock_owned_async`] (and the semaphore's
//! [`InterProcessSemaphoreV2::acquire_async`]) await the same engine without a thread;
//! dropping the future cancels the acquire and leaves nothing behind.
//!
//! Every blocking acquire can also be cancelled from another thread: give it a
//! [`CancelToken`] through [`Acquire`] ([`InterProcessLock::try_lock_with`],
//! [`InterProcessLock::try_lock_owned_with`] for an owned guard,
//! [`InterProcessSemaphoreV2::acquire_with`]) and call [`CancelToken::cancel`].

mod acquiring;
pub(crate) mod cancel;
mod cleanup;
mod driver;
mod fenced;
mod guard;
#[cfg(test)]
mod handoff_model;
mod held;
pub(crate) mod internals;
mod layout;
mod leader;
mod multi;
mod mutex;
mod observe;
mod owned;
mod participants;
mod read_write;
mod rearm;
mod revocation;
mod semaphore;
mod shared_count;
mod watching;

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use acquiring::{HoldFuture, LockOwned, ReleaseFuture, TryLockOwned, Unlocking};
pub use cancel::{Acquire, CancelToken, Cancelled};
pub use driver::standard_sort_key;
pub use guard::LockGuard;
pub use held::{HeldNode, LockState};
pub use layout::{
    LockLayout, LATCH_NAME, LEASE_BASE_NAME, LEASE_PARENT, LOCK_NAME, LOCK_PARENT, READ_LOCK_NAME,
    WRITE_LOCK_NAME,
};
pub use leader::{
    AwaitLeadership, CloseMode, ClosingLatch, LeaderLatch, LeaderLatchListener, LeaderListenerId,
    LeaderSelector, Leadership,
};
pub use multi::InterProcessMultiLock;
pub use mutex::InterProcessMutex;
pub use watching::WhileHeld;
// The old path of the slot (now in `primitives/observer.rs`).
#[allow(unused_imports)]
pub(crate) use observe::ObserverSlot;
pub use observe::{LockEvent, LockObserver};
pub use owned::OwnedLockGuard;
pub use participants::{Participant, ParticipantKind};
pub use read_write::{InterProcessReadWriteLock, ReadLock, WriteLock};
pub use revocation::{Revoker, REVOKE_MESSAGE};
pub use semaphore::{InterProcessSemaphoreMutex, InterProcessSemaphoreV2, Lease, Leasing};
pub use shared_count::SharedCount;

use crate::error::Result;
use cleanup::Wait;

/// A lock shared between processes. Implemented by every recipe, so code (and
/// `InterProcessMultiLock`) can hold any of them.
///
/// To implement it for a lock of your own, write [`Self::acquire`],
/// [`Self::acquire_timeout`], [`Self::release`], [`Self::is_acquired_in_this_process`] and
/// [`Self::held_nodes`] (empty when the lock has no nodes a guard could watch), and
/// [`Self::lock_paths`] and [`Self::try_acquire_with`] when you can do better than the
/// defaults. A wrapper around a recipe of this crate forwards every method to it, the hidden
/// ones included (the plumbing of guards and owned holds), so that its guards release exactly
/// their own hold.
///
/// Curator's calls (`acquire`, `acquire_timeout`, `release`) and guard-returning ones
/// (`lock`, `try_lock_for`) work on the same lock:
///
/// ```
/// use std::time::Duration;
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::locks::InterProcessSemaphoreMutex;
/// use zk_locks::InterProcessLock;
///
/// fn with_lock(lock: &impl InterProcessLock) -> zk_locks::Result<bool> {
///     match lock.try_lock_for(Duration::from_secs(1))? {
///         Some(_guard) => Ok(true), // released when `_guard` drops
///         None => Ok(false),        // timed out, nothing left behind
///     }
/// }
///
/// let ensemble = MemoryEnsemble::new();
/// let lock = InterProcessSemaphoreMutex::new(ensemble.connect(), "/locks/nightly")?;
/// assert!(with_lock(&lock)?);
/// lock.acquire()?;                 // Curator style
/// assert!(lock.is_acquired_in_this_process());
/// lock.release()?;
/// # Ok::<(), zk_locks::Error>(())
/// ```
pub trait InterProcessLock: Send + Sync {
    /// Blocks until the lock is held (or fails: session lost past the retry policy, closed
    /// client, ...).
    fn acquire(&self) -> Result<()>;

    /// Waits at most `timeout`; `Ok(false)` when it passed (nothing is left behind then).
    fn acquire_timeout(&self, timeout: Duration) -> Result<bool>;

    /// Releases one hold of the lock. A hold that is [`LockState::Lost`] is released without
    /// waiting for the link: `Ok`, its node (if the server still has it) deleted in the
    /// background once the link is back.
    fn release(&self) -> Result<()>;

    /// [`Self::release`], keeping the caller only as long as `wait` allows: a delete that
    /// cannot complete by then goes on in the background, and the error is returned. What
    /// [`InterProcessMultiLock`] and the semaphore give back when a timed acquire fails or
    /// runs out of time, so that it returns by its deadline plus at most one call timeout.
    /// Only this crate can name `Wait`: a lock of another crate releases as
    /// [`Self::release`] does (the default).
    #[doc(hidden)]
    fn release_within(&self, wait: Wait) -> Result<()> {
        let _ = wait;
        self.release()
    }

    /// True when some thread of this process holds it through this object.
    fn is_acquired_in_this_process(&self) -> bool;

    /// The nodes through which the calling thread holds the lock (empty when it does not).
    fn held_nodes(&self) -> Vec<Arc<HeldNode>>;

    /// Releases the one hold that `nodes` stand for (the nodes a [`LockGuard`] took the lock
    /// through), and no other: this is what a guard calls. A lock whose holds belong to
    /// threads releases the calling thread's hold (the default: [`Self::release`]); a lock
    /// that any thread may release releases that hold only, and nothing when it is gone.
    #[doc(hidden)]
    fn release_hold(&self, nodes: &[Arc<HeldNode>]) -> Result<()> {
        let _ = nodes;
        self.release()
    }

    /// The lock directories this lock takes its nodes in (for a multi-lock, those of all its
    /// locks); empty when unknown (the default). [`InterProcessMultiLock`] refuses two locks
    /// that share one: the second would wait for the first forever.
    fn lock_paths(&self) -> Vec<String> {
        Vec::new()
    }

    /// Acquires and returns a guard that releases on drop.
    fn lock(&self) -> Result<LockGuard<'_, Self>>
    where
        Self: Sized,
    {
        self.acquire()?;
        Ok(LockGuard::new(self))
    }

    /// Acquires within `timeout` and returns a guard, or `None` when the time passed.
    fn try_lock_for(&self, timeout: Duration) -> Result<Option<LockGuard<'_, Self>>>
    where
        Self: Sized,
    {
        Ok(self.acquire_timeout(timeout)?.then(|| LockGuard::new(self)))
    }

    /// One attempt that does not wait, as `std`'s and tokio's `try_lock`: the lock if it is
    /// free now, `None` when it is held elsewhere (its node is deleted then, so nothing is left
    /// in the queue). What [`Self::try_lock_for`] with [`Duration::ZERO`] does, at its cost:
    /// on an uncontended lock the acquire's usual requests, on a contended one the create and
    /// listing (one round trip) and the delete of our node.
    ///
    /// ```
    /// use zk_locks::client::memory::MemoryEnsemble;
    /// use zk_locks::{InterProcessLock, InterProcessMutex};
    ///
    /// let ensemble = MemoryEnsemble::new();
    /// let ours = InterProcessMutex::new(ensemble.connect(), "/locks/report")?;
    /// let theirs = InterProcessMutex::new(ensemble.connect(), "/locks/report")?;
    /// let guard = ours.try_lock()?.expect("free");
    /// assert!(theirs.try_lock()?.is_none()); // held elsewhere: no wait, no node left
    /// assert_eq!(ours.participant_nodes()?.len(), 1);
    /// drop(guard);
    /// # Ok::<(), zk_locks::Error>(())
    /// ```
    fn try_lock(&self) -> Result<Option<LockGuard<'_, Self>>>
    where
        Self: Sized,
    {
        self.try_lock_for(Duration::ZERO)
    }

    /// Acquires as `how` says: until held, or its timeout passed (`Ok(false)`, nothing left
    /// behind), or its [`CancelToken`] cancelled ([`Error::Cancelled`](crate::Error::Cancelled):
    /// the wait ends within about one round trip, its node is deleted so the queue behind it
    /// moves on, and the session and the client's other locks are untouched). A token
    /// cancelled before the call makes no request. A cancel that comes after the lock was
    /// granted is too late: the lock is held (release it).
    ///
    /// Every recipe of this crate waits cancellably. The default, for a lock of another crate,
    /// checks the token before the call only, then waits as [`Self::acquire_timeout`] or
    /// [`Self::acquire`] does.
    fn try_acquire_with(&self, how: &Acquire) -> Result<bool> {
        let path = self.lock_paths().join(", ");
        how.check(&path)?;
        match how.timeout_value() {
            Some(t) => self.acquire_timeout(t),
            None => self.acquire().map(|()| true),
        }
    }

    /// [`Self::try_acquire_with`] returning a guard (`None`: the timeout passed).
    ///
    /// ```
    /// use zk_locks::client::memory::MemoryEnsemble;
    /// use zk_locks::locks::{Acquire, CancelToken, InterProcessLock, InterProcessMutex};
    ///
    /// let mutex = InterProcessMutex::new(MemoryEnsemble::new().connect(), "/locks/report")?;
    /// let shutdown = CancelToken::new(); // cancelled by the service's shutdown handler
    /// if let Some(guard) = mutex.try_lock_with(&Acquire::new().cancel(&shutdown))? {
    ///     assert!(guard.is_valid());
    /// }
    /// # Ok::<(), zk_locks::Error>(())
    /// ```
    fn try_lock_with(&self, how: &Acquire) -> Result<Option<LockGuard<'_, Self>>>
    where
        Self: Sized,
    {
        Ok(self.try_acquire_with(how)?.then(|| LockGuard::new(self)))
    }

    /// Acquires, as `how` says, a hold that belongs to no thread (what an [`OwnedLockGuard`]
    /// is made of) and returns the nodes it holds through: `Ok(None)` when `how`'s timeout
    /// passed, [`Error::Cancelled`](crate::Error::Cancelled) when its [`CancelToken`] was
    /// cancelled (nothing left behind either way, as [`Self::try_acquire_with`]); without
    /// either it waits until held. Each call is a contender of its own: it queues a node even
    /// when this object is held already (by a thread or another owned hold). Every recipe of
    /// this crate implements it; the default (a lock of another crate) refuses with
    /// [`crate::Error::InvalidArgument`].
    #[doc(hidden)]
    fn acquire_owned_hold(&self, how: &Acquire) -> Result<Option<Vec<Arc<HeldNode>>>> {
        let _ = how;
        Err(owned_holds_unsupported())
    }

    /// [`Self::acquire_owned_hold`] as a future: the same engine, awaited (what the async
    /// acquires run). Dropped before it is ready, it leaves nothing behind. The default (a
    /// lock of another crate) refuses with [`crate::Error::InvalidArgument`].
    #[doc(hidden)]
    fn acquire_owned_hold_async<'a>(&'a self, how: &'a Acquire) -> HoldFuture<'a> {
        let _ = how;
        Box::pin(std::future::ready(Err(owned_holds_unsupported())))
    }

    /// Releases the owned hold that `nodes` stand for (from [`Self::acquire_owned_hold`]),
    /// from any thread, and nothing else; a lost hold releases without waiting for the link,
    /// as [`Self::release`]. What an [`OwnedLockGuard`] calls.
    #[doc(hidden)]
    fn release_owned_hold(&self, nodes: &[Arc<HeldNode>]) -> Result<()> {
        let _ = nodes;
        Err(owned_holds_unsupported())
    }

    /// [`Self::release_owned_hold`] as a future: each delete's answer awaited, no thread
    /// blocked (what [`OwnedLockGuard::unlock_async`] runs). The default (a lock of another
    /// crate) releases as [`Self::release_owned_hold`] does, on the polling thread.
    #[doc(hidden)]
    fn release_owned_hold_async<'a>(&'a self, nodes: &'a [Arc<HeldNode>]) -> ReleaseFuture<'a> {
        Box::pin(std::future::ready(self.release_owned_hold(nodes)))
    }

    /// [`Self::release_owned_hold`], keeping the caller only as long as `wait` allows (as
    /// [`Self::release_within`]): what a multi-lock gives back after a failed owned acquire.
    #[doc(hidden)]
    fn release_owned_hold_within(&self, nodes: &[Arc<HeldNode>], wait: Wait) -> Result<()> {
        let _ = wait;
        self.release_owned_hold(nodes)
    }

    /// Acquires (blocking) and returns an [`OwnedLockGuard`]: it owns an `Arc` of this lock,
    /// is `Send + Sync + 'static`, can be stored and moved, and releases on drop from any
    /// thread. Not reentrant: each call queues as a contender of its own (see
    /// [`OwnedLockGuard`]).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use zk_locks::client::memory::MemoryEnsemble;
    /// use zk_locks::locks::{InterProcessLock, InterProcessReadWriteLock};
    ///
    /// let ensemble = MemoryEnsemble::new();
    /// let rw = InterProcessReadWriteLock::new(ensemble.connect(), "/locks/catalog")?;
    /// let reads = rw.read_lock_arc();
    /// let a = reads.lock_owned()?;
    /// let b = std::thread::spawn(move || reads.lock_owned()).join().unwrap()?; // readers share
    /// assert!(rw.write_lock_arc().try_lock_owned_for(std::time::Duration::ZERO)?.is_none());
    /// drop((a, b));
    /// # Ok::<(), zk_locks::Error>(())
    /// ```
    fn lock_owned(self: &Arc<Self>) -> Result<OwnedLockGuard<Self>>
    where
        Self: Sized,
    {
        match self.acquire_owned_hold(&Acquire::new())? {
            Some(nodes) => Ok(OwnedLockGuard::new(self.clone(), nodes)),
            // Only a closed client ends an untimed wait without the lock.
            None => Err(crate::Error::Closed),
        }
    }

    /// [`Self::try_lock`] returning an [`OwnedLockGuard`]: one attempt that does not wait,
    /// `None` (nothing left behind) when the lock is held elsewhere, as
    /// [`Self::try_lock_owned_for`] with [`Duration::ZERO`].
    fn try_lock_owned(self: &Arc<Self>) -> Result<Option<OwnedLockGuard<Self>>>
    where
        Self: Sized,
    {
        self.try_lock_owned_for(Duration::ZERO)
    }

    /// Acquires within `timeout` and returns an [`OwnedLockGuard`], or `None` when the time
    /// passed (nothing left behind).
    fn try_lock_owned_for(
        self: &Arc<Self>,
        timeout: Duration,
    ) -> Result<Option<OwnedLockGuard<Self>>>
    where
        Self: Sized,
    {
        self.try_lock_owned_with(&Acquire::new().timeout(timeout))
    }

    /// Acquires as `how` says and returns an [`OwnedLockGuard`]: the owned counterpart of
    /// [`Self::try_lock_with`]. Until held (`Some`), or `how`'s timeout passed (`None`,
    /// nothing left behind), or its [`CancelToken`] cancelled
    /// ([`Error::Cancelled`](crate::Error::Cancelled): the wait ends within about one round
    /// trip, its node is deleted so the queue behind it moves on, no owned hold is recorded,
    /// and the session and the client's other locks are untouched). A token cancelled before
    /// the call makes no request; a cancel that comes after the grant is too late (the guard
    /// holds: drop it). Not reentrant, as every owned acquire (see [`OwnedLockGuard`]).
    ///
    /// Async code awaits [`Self::try_lock_owned_async`] instead (no thread waits); this
    /// blocking form serves threads, and `spawn_blocking` where a blocking wait is wanted.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use zk_locks::client::memory::MemoryEnsemble;
    /// use zk_locks::locks::{Acquire, CancelToken, InterProcessLock, InterProcessMutex};
    /// use zk_locks::Error;
    ///
    /// let ensemble = MemoryEnsemble::new();
    /// let holder = Arc::new(InterProcessMutex::new(ensemble.connect(), "/locks/jobs")?);
    /// let held = holder.lock_owned()?;
    ///
    /// let waiter = Arc::new(InterProcessMutex::new(ensemble.connect(), "/locks/jobs")?);
    /// let shutdown = CancelToken::new();
    /// let how = Acquire::new().cancel(&shutdown);
    /// let waiting = std::thread::spawn(move || waiter.try_lock_owned_with(&how));
    /// while holder.participant_nodes()?.len() < 2 {
    ///     std::thread::sleep(Duration::from_millis(1)); // until the waiter queues
    /// }
    /// shutdown.cancel(); // from a shutdown handler, another thread, ...
    /// let outcome = waiting.join().unwrap();
    /// assert!(matches!(outcome, Err(Error::Cancelled { .. })));
    /// assert_eq!(holder.participant_nodes()?.len(), 1); // the waiter's node is gone
    /// drop(held);
    /// # Ok::<(), zk_locks::Error>(())
    /// ```
    fn try_lock_owned_with(self: &Arc<Self>, how: &Acquire) -> Result<Option<OwnedLockGuard<Self>>>
    where
        Self: Sized,
    {
        Ok(self
            .acquire_owned_hold(how)?
            .map(|nodes| OwnedLockGuard::new(self.clone(), nodes)))
    }

    /// [`Self::lock_owned`] as a future, for async code: waits without a thread (the engine
    /// the blocking call runs, woken by the lock's watch, the session and the timer; no async
    /// runtime needed), `Send + 'static`. Not reentrant, as every owned acquire.
    ///
    /// **Dropping it cancels it**, at any point, without blocking and without leaving
    /// anything behind: a queued node is deleted, a create still out is deleted when its
    /// answer comes, a grant not yet taken passes to the next in line. A timeout is the
    /// caller's (`tokio::time::timeout`), or [`Self::try_lock_owned_async`]'s [`Acquire`].
    /// The guard it returns releases on drop without waiting for the delete's answer.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use zk_locks::client::memory::MemoryEnsemble;
    /// use zk_locks::locks::{InterProcessLock, InterProcessMutex};
    ///
    /// # let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    /// # runtime.block_on(async {
    /// let ensemble = MemoryEnsemble::new();
    /// let mutex = Arc::new(InterProcessMutex::new(ensemble.connect(), "/locks/tenant-7")?);
    /// let guard = mutex.lock_owned_async().await?;
    /// // Another task's acquire waits without a thread; dropped (here by the timeout), it
    /// // leaves no node behind.
    /// let other = mutex.lock_owned_async();
    /// let waited = tokio::time::timeout(std::time::Duration::from_millis(50), other).await;
    /// assert!(waited.is_err());
    /// assert_eq!(mutex.participant_nodes()?.len(), 1);
    /// drop(guard);
    /// # Ok::<(), zk_locks::Error>(())
    /// # }).unwrap();
    /// ```
    fn lock_owned_async(self: &Arc<Self>) -> LockOwned<Self>
    where
        Self: Sized + 'static,
    {
        LockOwned::new(self.clone())
    }

    /// [`Self::try_lock_owned_with`] as a future: held (`Some`), `how`'s timeout passed
    /// (`None`, nothing left behind) or its [`CancelToken`] cancelled
    /// ([`Error::Cancelled`](crate::Error::Cancelled)). Dropping it cancels it, as
    /// [`Self::lock_owned_async`].
    fn try_lock_owned_async(self: &Arc<Self>, how: Acquire) -> TryLockOwned<Self>
    where
        Self: Sized + 'static,
    {
        TryLockOwned::new(self.clone(), how)
    }
}

/// What a lock that does not implement owned holds answers.
fn owned_holds_unsupported() -> crate::Error {
    crate::Error::InvalidArgument {
        name: "lock",
        reason: "this lock type does not implement owned holds (acquire_owned_hold)".into(),
    }
}

/// Checks a lock's directory: a valid path, and not the root (a lock needs a directory of its
/// own; its nodes would sit beside the whole tree).
pub(crate) fn validate_lock_path(path: &str) -> Result<()> {
    crate::paths::validate_path(path)?;
    if path == "/" {
        return Err(crate::Error::InvalidPath {
            path: path.into(),
            reason: "a lock needs its own directory, not the root",
        });
    }
    Ok(())
}

/// The deadline for a timeout; `None` (wait forever) when it is too far to represent
/// (`Duration::MAX`).
pub(crate) fn deadline_after(timeout: Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}

/// Default node data when a recipe is given none: `<host> <pid>`, so an operator listing the
/// lock directory sees who waits (Curator stores the local IP; nothing reads it).
///
/// Computed once per process: `gethostname` and `getpid` are syscalls, and on the in-memory
/// backend they were a fifth of an uncontended acquire+release. (A forked child keeps its
/// parent's text; the data is informational only.)
pub(crate) fn default_node_data() -> Vec<u8> {
    static DATA: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    DATA.get_or_init(|| format!("{} {}", hostname(), std::process::id()).into_bytes())
        .clone()
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it or
    // truncates, and we stop at the first NUL either way.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown-host".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}
