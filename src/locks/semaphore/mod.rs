//! `InterProcessSemaphoreV2`: at most N leases across processes, wire-compatible with Curator's
//! (`<path>/locks` admission mutex, `<path>/leases/_c_<uuid>-lease-<seq>` lease nodes).
//!
//! Admission is FIFO through the mutex: only the head waiter holds it, and only it watches the
//! `leases` directory. A lease is granted when the number of lease nodes (ours included) is at
//! most the maximum; the admission mutex is released after each lease.
//!
//! Round trips on a pipelining backend: the admission create and its listing go together,
//! then the lease create and the leases listing; once the lease is granted the admission
//! delete is sent without waiting for its reply (it is still applied before this session's
//! later requests, and finished in the background if its connection is lost), so an
//! uncontended acquire is two round trips and the release one.
//!
//! Table of contents: this file holds [`InterProcessSemaphoreV2`] (admission, the lease
//! node, the wait for room); `lease` the [`Lease`] it hands out; `mutex`
//! [`InterProcessSemaphoreMutex`], a one-lease semaphore as a lock; `directory` the refusal
//! of a directory holding another kind of lock.

mod acquire;
mod directory;
mod lease;
mod leasing;
mod mutex;

pub use lease::Lease;
pub use leasing::Leasing;
pub use mutex::InterProcessSemaphoreMutex;

use std::sync::Arc;
use std::time::Duration;

use crate::client::{SharedClient, ZkError};
use crate::error::{Error, Result};
use crate::paths;
use crate::primitives::block_on::block_on;
use crate::retry::{ExponentialBackoffRetry, RetryPolicy};

use super::driver::{LockDriver, StandardDriver};
use super::internals::LockInternals;
use super::layout::{LEASE_BASE_NAME, LEASE_PARENT, LOCK_PARENT};
use super::mutex::InterProcessMutex;
use super::observe::{LockObserver, Observe};
use super::participants::{self as queue, Participant, ParticipantKind};
use super::shared_count::SharedCount;
use super::validate_lock_path;
use super::{cancel, Acquire};

/// Where the maximum number of leases comes from.
#[derive(Debug, Clone)]
enum MaxLeases {
    Fixed(usize),
    Shared(SharedCount),
}

/// A counting semaphore across processes (Curator's `InterProcessSemaphoreV2`).
///
/// ```
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::locks::InterProcessSemaphoreV2;
///
/// let ensemble = MemoryEnsemble::new();
/// let pool = InterProcessSemaphoreV2::new(ensemble.connect(), "/pools/db", 3)?;
/// let lease = pool.acquire()?;                 // one of 3
/// assert!(lease.is_valid());
/// lease.close()?;                              // or drop it
/// # Ok::<(), zk_locks::Error>(())
/// ```
#[derive(Debug)]
pub struct InterProcessSemaphoreV2 {
    path: String,
    admission: InterProcessMutex,
    leases: LockInternals,
    max: MaxLeases,
    data: Option<Vec<u8>>,
}

impl InterProcessSemaphoreV2 {
    /// A semaphore at `path` with `max_leases` leases (must be ≥ 1). Every process must use the
    /// same maximum (nothing checks it; [`Self::with_shared_count`] keeps them in agreement).
    pub fn new(client: SharedClient, path: &str, max_leases: usize) -> Result<Self> {
        if max_leases == 0 {
            return Err(Error::InvalidArgument {
                name: "max_leases",
                reason: "0: a semaphore needs at least one lease".into(),
            });
        }
        Self::build(client, path, MaxLeases::Fixed(max_leases))
    }

    /// The driver of the admission mutex (for the hand-off model, `locks::handoff_model`).
    #[cfg(test)]
    pub(in crate::locks) fn admission_driver(&self) -> Arc<dyn LockDriver> {
        self.admission.driver().clone()
    }

    /// A semaphore whose maximum is the value of a [`SharedCount`]; changing the count wakes
    /// waiters.
    pub fn with_shared_count(client: SharedClient, path: &str, count: SharedCount) -> Result<Self> {
        Self::build(client, path, MaxLeases::Shared(count))
    }

    fn build(client: SharedClient, path: &str, max: MaxLeases) -> Result<Self> {
        validate_lock_path(path)?;
        // Events name the semaphore: its lease's, and its admission's wait (`queued` only).
        let observe = Observe::new(client.lock_observer(), path, ParticipantKind::Lease);
        let admission = InterProcessMutex::new(client.clone(), &paths::join(path, LOCK_PARENT))?
            .observed_as(observe.clone().queue_only());
        let leases = LockInternals::new(
            client,
            paths::join(path, LEASE_PARENT),
            Arc::new(StandardDriver::new(LEASE_BASE_NAME, 1)),
            Arc::new(ExponentialBackoffRetry::default()),
        )
        .with_observe(observe);
        Ok(InterProcessSemaphoreV2 {
            path: path.to_string(),
            admission,
            leases,
            max,
            data: None,
        })
    }

    /// Stores `data` in each lease node instead of the default (`<host> <pid>`).
    pub fn with_data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.data = Some(data.into());
        self
    }

    /// Replaces the retry policy for lost lease nodes and connection trouble.
    pub fn with_retry_policy(mut self, retry: Arc<dyn RetryPolicy>) -> Self {
        let l = &self.leases;
        self.leases = LockInternals::new(
            l.client().clone(),
            l.base_path().to_string(),
            l.driver().clone(),
            retry.clone(),
        )
        .with_observe(l.observe().clone());
        self.admission = self.admission.with_retry_policy(retry);
        self
    }

    /// Reports this semaphore's events to `observer` instead of the client's (see
    /// [`LockObserver`]): each lease's, and the wait for admission as its `queued`.
    pub fn with_observer(mut self, observer: Arc<dyn LockObserver>) -> Self {
        let observe = Observe::new(Some(observer), &self.path, ParticipantKind::Lease);
        self.admission = self.admission.observed_as(observe.clone().queue_only());
        self.leases = self.leases.with_observe(observe);
        self
    }

    /// The semaphore's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The current maximum number of leases.
    pub fn max_leases(&self) -> usize {
        match &self.max {
            MaxLeases::Fixed(n) => *n,
            MaxLeases::Shared(c) => c.get_count().max(0) as usize,
        }
    }

    /// Blocks until one lease is granted.
    #[must_use = "the leases are returned as soon as they are dropped"]
    pub fn acquire(&self) -> Result<Lease> {
        let mut leases = self.acquire_many(1)?;
        Ok(leases.remove(0))
    }

    /// One lease within `timeout`, or `None`.
    #[must_use = "the leases are returned as soon as they are dropped"]
    pub fn acquire_timeout(&self, timeout: Duration) -> Result<Option<Lease>> {
        Ok(self
            .acquire_many_timeout(1, timeout)?
            .map(|mut v| v.remove(0)))
    }

    /// Blocks until `qty` leases are granted (taken one at a time, as Curator does).
    #[must_use = "the leases are returned as soon as they are dropped"]
    pub fn acquire_many(&self, qty: usize) -> Result<Vec<Lease>> {
        self.acquire_inner(qty, None)?.ok_or(Error::Closed)
    }

    /// `qty` leases within `timeout` (one deadline for all), or `None`; then every lease this
    /// call took is returned.
    #[must_use = "the leases are returned as soon as they are dropped"]
    pub fn acquire_many_timeout(
        &self,
        qty: usize,
        timeout: Duration,
    ) -> Result<Option<Vec<Lease>>> {
        self.acquire_inner(qty, Some(timeout))
    }

    /// One lease as `how` says: until granted, or its timeout passed (`None`, nothing left
    /// behind), or its [`CancelToken`](super::CancelToken) cancelled ([`Error::Cancelled`]:
    /// the wait, for admission or for room, ends within about one round trip and the nodes it
    /// made are deleted). A token cancelled before the call makes no request.
    ///
    /// ```
    /// use zk_locks::client::memory::MemoryEnsemble;
    /// use zk_locks::locks::{Acquire, CancelToken, InterProcessSemaphoreV2};
    /// use zk_locks::Error;
    ///
    /// let pool = InterProcessSemaphoreV2::new(MemoryEnsemble::new().connect(), "/pools/gpu", 1)?;
    /// let token = CancelToken::new();
    /// token.cancel();
    /// let refused = pool.acquire_with(&Acquire::new().cancel(&token));
    /// assert!(matches!(refused, Err(Error::Cancelled { .. })));
    /// # Ok::<(), zk_locks::Error>(())
    /// ```
    #[must_use = "the leases are returned as soon as they are dropped"]
    pub fn acquire_with(&self, how: &Acquire) -> Result<Option<Lease>> {
        Ok(self.acquire_many_with(1, how)?.map(|mut v| v.remove(0)))
    }

    /// `qty` leases as `how` says (one deadline for all); when it ends without them, every
    /// lease this call took is returned (see [`Self::acquire_with`]).
    #[must_use = "the leases are returned as soon as they are dropped"]
    pub fn acquire_many_with(&self, qty: usize, how: &Acquire) -> Result<Option<Vec<Lease>>> {
        cancel::run(how, &self.path, self.leases.client(), |timeout| {
            self.acquire_inner(qty, timeout)
        })
    }

    /// [`Self::acquire`] as a future, for async code: waits without a thread (the engine the
    /// blocking call runs; no async runtime needed), `Send + 'static`. Dropping it cancels it
    /// without blocking and without leaving a node behind (its admission and lease nodes are
    /// deleted, a create still out is deleted when its answer comes). The lease it returns is
    /// given back on drop without waiting for the delete's answer.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use zk_locks::client::memory::MemoryEnsemble;
    /// use zk_locks::locks::InterProcessSemaphoreV2;
    ///
    /// # let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    /// # runtime.block_on(async {
    /// let ensemble = MemoryEnsemble::new();
    /// let pool = Arc::new(InterProcessSemaphoreV2::new(ensemble.connect(), "/pools/db", 2)?);
    /// let (a, b) = (pool.acquire_async().await?, pool.acquire_async().await?);
    /// let third = tokio::time::timeout(std::time::Duration::from_millis(50), pool.acquire_async());
    /// assert!(third.await.is_err()); // both leases taken; the dropped wait left nothing
    /// drop((a, b));
    /// # Ok::<(), zk_locks::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn acquire_async(self: &Arc<Self>) -> Leasing<Lease> {
        leasing::until_granted(self.clone())
    }

    /// [`Self::acquire_with`] as a future (see [`Self::acquire_async`]): the lease, `None` when
    /// `how`'s timeout passed, [`Error::Cancelled`] when its token was cancelled.
    pub fn acquire_with_async(self: &Arc<Self>, how: Acquire) -> Leasing<Option<Lease>> {
        leasing::one(self.clone(), how)
    }

    /// [`Self::acquire_many_with`] as a future (see [`Self::acquire_async`]): the leases this
    /// call took are given back when it ends without all of them, or is dropped.
    pub fn acquire_many_with_async(
        self: &Arc<Self>,
        qty: usize,
        how: Acquire,
    ) -> Leasing<Option<Vec<Lease>>> {
        leasing::leases(self.clone(), qty, how)
    }

    fn acquire_inner(&self, qty: usize, timeout: Option<Duration>) -> Result<Option<Vec<Lease>>> {
        block_on(self.acquire_inner_async(qty, timeout))
    }

    /// The lease nodes' names, unsorted (as Curator's `getParticipantNodes` for semaphores).
    pub fn participant_nodes(&self) -> Result<Vec<String>> {
        let p = self.leases.base_path();
        match self.leases.client().get_children(p, None) {
            Ok(c) => Ok(c),
            Err(ZkError::NoNode) => Ok(Vec::new()),
            Err(code) => Err(Error::zk("get_children", p, code)),
        }
    }
}

impl InterProcessSemaphoreV2 {
    /// The lease nodes in queue order, with their data; a lease holds when it is among the
    /// first [`Self::max_leases`] (only the newest lease, its owner still admitted, waits for
    /// room; after the maximum was lowered, leases granted under the old one show as waiting).
    pub fn participants(&self) -> Result<Vec<Participant>> {
        let rule = StandardDriver::new(LEASE_BASE_NAME, self.max_leases());
        let leases = &self.leases;
        queue::list(
            leases.client(),
            leases.base_path(),
            leases.driver().as_ref(),
            |sorted, i| (ParticipantKind::Lease, rule.holds(sorted, i)),
        )
    }
}
