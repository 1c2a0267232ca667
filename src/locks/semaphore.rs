//! `InterProcessSemaphoreV2`: at most N leases across processes, wire-compatible with Curator's
//! (`<path>/locks` admission mutex, `<path>/leases/_c_<uuid>-lease-<seq>` lease nodes).
//!
//! Admission is FIFO through the mutex: only the head waiter holds it, and only it watches the
//! `leases` directory. A lease is granted when the number of lease nodes (ours included) is at
//! most the maximum; the admission mutex is released after each lease.

use std::sync::Arc;
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use crate::client::{SharedClient, ZkError};
use crate::error::{Error, Result};
use crate::paths;
use crate::retry::{ExponentialBackoffRetry, Retries, RetryPolicy, RetryStep};
use crate::session::ConnectionState;

use super::driver::StandardDriver;
use super::held::{HeldNode, LockState};
use super::internals::{
    past, wake_on_session_change, Created, LockInternals, NodeCleanup, NodeKind, Wait, Waiter,
};
use super::mutex::InterProcessMutex;
use super::shared_count::SharedCount;
use super::{deadline_after, default_node_data, validate_lock_path, InterProcessLock, LockGuard};

/// Curator's admission directory name.
pub const LOCK_PARENT: &str = "locks";
/// Curator's lease directory name.
pub const LEASE_PARENT: &str = "leases";
/// Curator's lease node name.
pub const LEASE_BASE_NAME: &str = "lease-";

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

    /// A semaphore whose maximum is the value of a [`SharedCount`]; changing the count wakes
    /// waiters.
    pub fn with_shared_count(client: SharedClient, path: &str, count: SharedCount) -> Result<Self> {
        Self::build(client, path, MaxLeases::Shared(count))
    }

    fn build(client: SharedClient, path: &str, max: MaxLeases) -> Result<Self> {
        validate_lock_path(path)?;
        let admission = InterProcessMutex::new(client.clone(), &paths::join(path, LOCK_PARENT))?;
        let leases = LockInternals::new(
            client,
            paths::join(path, LEASE_PARENT),
            Arc::new(StandardDriver::new(LEASE_BASE_NAME, 1)),
            Arc::new(ExponentialBackoffRetry::default()),
        );
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
        );
        self.admission = self.admission.with_retry_policy(retry);
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
    pub fn acquire(&self) -> Result<Lease> {
        let mut leases = self.acquire_many(1)?;
        Ok(leases.remove(0))
    }

    /// One lease within `timeout`, or `None`.
    pub fn acquire_timeout(&self, timeout: Duration) -> Result<Option<Lease>> {
        Ok(self
            .acquire_many_timeout(1, timeout)?
            .map(|mut v| v.remove(0)))
    }

    /// Blocks until `qty` leases are granted (taken one at a time, as Curator does).
    pub fn acquire_many(&self, qty: usize) -> Result<Vec<Lease>> {
        self.acquire_inner(qty, None)?.ok_or(Error::Closed)
    }

    /// `qty` leases within `timeout` (one deadline for all), or `None`; then every lease this
    /// call took is returned.
    pub fn acquire_many_timeout(
        &self,
        qty: usize,
        timeout: Duration,
    ) -> Result<Option<Vec<Lease>>> {
        self.acquire_inner(qty, Some(timeout))
    }

    fn acquire_inner(&self, qty: usize, timeout: Option<Duration>) -> Result<Option<Vec<Lease>>> {
        if qty == 0 {
            return Err(Error::InvalidArgument {
                name: "qty",
                reason: "0: ask for at least one lease".into(),
            });
        }
        if let MaxLeases::Fixed(max) = self.max {
            if qty > max {
                return Err(Error::InvalidArgument {
                    name: "qty",
                    reason: format!(
                        "{qty} is more than the {max} leases of {}: it would wait forever",
                        self.path
                    ),
                });
            }
        }
        let deadline = timeout.and_then(deadline_after);
        // Leases taken so far are returned (dropped) on any failure or timeout.
        let mut taken = Vec::with_capacity(qty);
        for _ in 0..qty {
            match self.acquire_one(deadline)? {
                Some(lease) => taken.push(lease),
                None => return Ok(None),
            }
        }
        Ok(Some(taken))
    }

    /// One lease: admission, lease node, wait for room; the admission mutex is always released.
    fn acquire_one(&self, deadline: Option<Instant>) -> Result<Option<Lease>> {
        let start = Instant::now();
        let mut retries = Retries::new(self.leases.retry_policy().as_ref(), start, deadline);
        let data = self.data.clone().unwrap_or_else(default_node_data);
        loop {
            let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if !self
                .admission
                .acquire_with(remaining, NodeKind::Sequential)?
            {
                return Ok(None);
            }
            let outcome = self.lease_while_admitted(deadline, &data, start);
            // Bounded by the deadline too: a timed call returns by it even during an outage
            // (the delete goes on in the background).
            // A timed call past its deadline with its link in trouble makes no more requests.
            let wait = match &outcome {
                Ok(Granted::TimedOut { link_trouble }) => {
                    Wait::after_timeout(self.leases.client(), deadline, *link_trouble)
                }
                _ => Wait::Until(deadline),
            };
            if let Err(e) = self.admission.release_within(wait) {
                log::warn!("releasing the admission mutex of {}: {e}", self.path);
            }
            match outcome? {
                Granted::Yes(lease) => return Ok(Some(lease)),
                Granted::TimedOut { .. } => return Ok(None),
                Granted::NodeGone => match retries.next() {
                    RetryStep::Again { .. } => {
                        log::info!("lease under {} lost with its session; retrying", self.path);
                    }
                    RetryStep::DeadlinePassed => return Ok(None),
                    RetryStep::Exhausted => {
                        return Err(Error::SessionLost {
                            path: self.path.clone(),
                        })
                    }
                },
            }
        }
    }

    fn lease_while_admitted(
        &self,
        deadline: Option<Instant>,
        data: &[u8],
        start: Instant,
    ) -> Result<Granted> {
        let client = self.leases.client();
        let Some(Created {
            path: our_path,
            before,
            czxid,
            mut listing,
        }) = self
            .leases
            .create_protected(data, NodeKind::Sequential, deadline, start)?
        else {
            // The deadline passed with the link down.
            return Ok(Granted::TimedOut { link_trouble: true });
        };
        let mut cleanup = NodeCleanup::new(&self.leases, &our_path, deadline);
        // The admission must still be ours, held in the session the lease was created in: a
        // session lost in between let another client be admitted, and two admitted clients
        // whose leases are both over the maximum wait on each other for ever.
        let admitted = self.admission.held_node().is_some_and(|admission| {
            admission.losses() == before.losses && admission.state() != LockState::Lost
        });
        if !admitted {
            log::info!(
                "admission to {} lost before the lease; queueing again",
                self.path
            );
            return Ok(Granted::NodeGone); // `cleanup` deletes the lease
        }
        let our_name = paths::node_name(&our_path).to_string();
        let leases_path = self.leases.base_path().to_string();
        let waiter = Arc::new(Waiter::default());
        let session_listener = wake_on_session_change(client, &waiter);
        let count_listener = match &self.max {
            MaxLeases::Shared(c) => {
                let w = Arc::downgrade(&waiter);
                Some(c.subscribe(move |_| {
                    if let Some(w) = w.upgrade() {
                        w.signal(None);
                    }
                }))
            }
            MaxLeases::Fixed(_) => None,
        };
        let mut watch = false;
        let mut retries = Retries::new(self.leases.retry_policy().as_ref(), start, deadline);
        let result = loop {
            let round = waiter.next_round();
            // The first listing sets no watch: an uncontended lease must not leave one behind.
            let watcher: Option<crate::client::Watcher> = watch.then(|| {
                let w = Arc::downgrade(&waiter);
                Box::new(move |_: crate::client::WatchedEvent| {
                    if let Some(w) = w.upgrade() {
                        w.signal(Some(round));
                    }
                }) as crate::client::Watcher
            });
            // The first round decides from the listing sent behind our create (no watch).
            let listed = match listing.take() {
                Some(children) if watcher.is_none() => Ok(children),
                _ => client.get_children(&leases_path, watcher),
            };
            let children = match listed {
                Ok(c) => c,
                Err(ZkError::NoNode) => break Ok(Granted::NodeGone),
                // Our lease node died with the session: retry under the policy, as the mutex's
                // wait loop does.
                Err(ZkError::SessionExpired) => break Ok(Granted::NodeGone),
                Err(code) if code.is_retryable() => match retries.next() {
                    RetryStep::Again { .. } => {
                        let s = client.session().wait_until_connected(deadline);
                        match s.state {
                            ConnectionState::Closed => break Err(Error::Closed),
                            state if state.is_connected() => continue,
                            _ => break Ok(Granted::TimedOut { link_trouble: true }),
                        }
                    }
                    RetryStep::DeadlinePassed => {
                        break Ok(Granted::TimedOut { link_trouble: true })
                    }
                    RetryStep::Exhausted => {
                        break Err(Error::zk("get_children", leases_path.clone(), code))
                    }
                },
                Err(code) => break Err(Error::zk("get_children", leases_path.clone(), code)),
            };
            // A lease of a lost session can still be listed (until the server expires it): it
            // must not count as ours.
            if !children.contains(&our_name) || client.session().snapshot().losses != before.losses
            {
                break Ok(Granted::NodeGone);
            }
            match self.leases.delete_copies(&children, &our_name, deadline) {
                Ok(false) => {}
                Ok(true) => continue, // list again without them
                Err(e) => break Err(e),
            }
            if children.len() <= self.max_leases() {
                let node =
                    HeldNode::new(client.clone(), our_path.clone(), before).with_czxid(czxid);
                break Ok(Granted::Yes(Lease {
                    node: Arc::new(node),
                    retry: self.leases.retry_policy().clone(),
                    closed: false,
                }));
            }
            if !watch {
                watch = true;
                continue;
            }
            waiter.wait(deadline);
            if past(deadline, Instant::now()) {
                break Ok(Granted::TimedOut {
                    link_trouble: false,
                });
            }
        };
        client.session().unsubscribe(session_listener);
        if let (Some(id), MaxLeases::Shared(c)) = (count_listener, &self.max) {
            c.unsubscribe(id);
        }
        match result {
            Ok(Granted::Yes(lease)) => {
                cleanup.disarm();
                Ok(Granted::Yes(lease))
            }
            Ok(Granted::TimedOut { link_trouble }) => {
                cleanup.set_wait(Wait::after_timeout(client, deadline, link_trouble));
                // A delete left to the background means trouble for the admission's too.
                let deleted = cleanup.finish();
                Ok(Granted::TimedOut {
                    link_trouble: link_trouble || !deleted,
                })
            }
            // On `NodeGone` the lease is deleted by path all the same: it may still exist.
            other => other,
        }
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

enum Granted {
    Yes(Lease),
    /// `link_trouble`: a request failed with an unknown outcome at the end (no more requests on
    /// the caller's thread then).
    TimedOut {
        link_trouble: bool,
    },
    NodeGone,
}

/// One lease of a semaphore. Returned (its node deleted) on [`Lease::close`] or drop.
#[derive(Debug)]
pub struct Lease {
    node: Arc<HeldNode>,
    retry: Arc<dyn RetryPolicy>,
    closed: bool,
}

impl Lease {
    /// Returns the lease now, reporting failure (drop only logs it).
    pub fn close(mut self) -> Result<()> {
        self.close_inner()
    }

    fn close_inner(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.closed, true) {
            return Ok(());
        }
        super::cleanup::release_held(&self.node, self.retry.as_ref(), Wait::Until(None))
    }

    /// The lease node's full path.
    pub fn node_path(&self) -> &str {
        self.node.path()
    }

    /// The lease node's name.
    pub fn node_name(&self) -> &str {
        paths::node_name(self.node.path())
    }

    /// The lease node's data (one read).
    pub fn data(&self) -> Result<Vec<u8>> {
        self.node
            .client()
            .get_data(self.node.path(), None)
            .map(|(d, _)| d)
            .map_err(|c| Error::zk("get_data", self.node.path(), c))
    }

    /// The node this lease is held through (state, fencing token).
    pub fn held_node(&self) -> &Arc<HeldNode> {
        &self.node
    }

    /// Held, Suspect or Lost (see [`LockState`]).
    pub fn state(&self) -> LockState {
        self.node.state()
    }

    /// `state() == Held`.
    pub fn is_valid(&self) -> bool {
        self.node.is_valid()
    }

    /// The fencing token (the lease node's czxid).
    pub fn fencing_token(&self) -> Result<i64> {
        self.node.fencing_token()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Err(e) = self.close_inner() {
            log::warn!("returning lease {}: {e}", self.node.path());
        }
    }
}

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
/// alone.
#[derive(Debug)]
pub struct InterProcessSemaphoreMutex {
    semaphore: InterProcessSemaphoreV2,
    lease: parking_lot::Mutex<Option<StoredLease>>,
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
        })
    }

    /// The lock's path.
    pub fn path(&self) -> &str {
        self.semaphore.path()
    }

    /// The lease node names (see [`InterProcessSemaphoreV2::participant_nodes`]).
    pub fn participant_nodes(&self) -> Result<Vec<String>> {
        self.semaphore.participant_nodes()
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

    fn release(&self) -> Result<()> {
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
            Some(s) => s.lease.close(),
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

    fn is_acquired_in_this_process(&self) -> bool {
        self.lease.lock().is_some()
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
}
