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

mod directory;
mod lease;
mod mutex;

pub use lease::Lease;
pub use mutex::InterProcessSemaphoreMutex;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::{SharedClient, ZkError};
use crate::error::{Error, Result};
use crate::paths;
use crate::retry::{ExponentialBackoffRetry, Retries, RetryPolicy, RetryStep};
use crate::session::{ListenerId, SessionSnapshot};

use super::cleanup::{give_back, BackgroundMark};
use super::driver::{LockDriver, StandardDriver};
use super::held::{HeldNode, LockState};
use super::internals::{
    past, wake_on_session_change, Created, LockInternals, NodeCleanup, NodeKind, Resume, Wait,
    Waiter,
};
use super::layout::{LEASE_BASE_NAME, LEASE_PARENT, LOCK_PARENT};
use super::mutex::InterProcessMutex;
use super::observe::{queued_mark, LockObserver, Observe};
use super::participants::{self as queue, Participant, ParticipantKind};
use super::shared_count::SharedCount;
use super::{cancel, Acquire};
use super::{deadline_after, default_node_data, validate_lock_path, InterProcessLock};

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
        let mark = BackgroundMark::now();
        // Leases taken so far are returned on any failure or timeout, within the deadline.
        let mut taken = Vec::with_capacity(qty);
        for _ in 0..qty {
            let started = Instant::now();
            let outcome = self.acquire_one(deadline);
            // The semaphore's own engine reports its outcomes here (the grant in the loop).
            match &outcome {
                Ok(Some(_)) => {}
                Ok(None) => self.leases.observe().gave_up(started.elapsed()),
                Err(e) => self.leases.observe().failed(e),
            }
            let Ok(Some(lease)) = outcome else {
                let give = give_back(taken, deadline, mark, |lease: Lease, wait| {
                    lease.close_within(wait)
                });
                for e in give {
                    log::info!(
                        "returning a lease of {} after a failed acquire: {e}",
                        self.path
                    );
                }
                return outcome.map(|_| None);
            };
            taken.push(lease);
        }
        Ok(Some(taken))
    }

    /// One lease: admission, lease node, wait for room; the admission mutex is always released.
    fn acquire_one(&self, deadline: Option<Instant>) -> Result<Option<Lease>> {
        let start = Instant::now();
        let mut retries = Retries::new(self.leases.retry_policy().as_ref(), start, deadline);
        let data = self.data.clone().unwrap_or_else(default_node_data);
        // One `queued` per acquisition: the admission's, else the lease's wait for room.
        let queued = queued_mark();
        loop {
            let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if !self
                .admission
                .acquire_with(remaining, NodeKind::Sequential)?
            {
                return Ok(None);
            }
            let mark = BackgroundMark::now();
            let outcome = self.lease_while_admitted(deadline, &data, start, queued);
            // With the lease granted, the caller does not wait for the admission delete:
            // holding admission a little longer keeps others out a little longer, nothing
            // more, and it is sent after the leases listing was answered (see the module
            // docs). Otherwise it is bounded by the deadline: a timed call returns by it even
            // during an outage (the delete goes on in the background), and one past its
            // deadline with its link in trouble makes no more requests.
            let released = match &outcome {
                Ok(Granted::Yes(_)) => self.admission.release_unawaited(),
                Ok(Granted::TimedOut { link_trouble: true }) => {
                    self.admission.release_within(Wait::Background)
                }
                // No request once the lease's delete (done by now) went to the background.
                _ => self.admission.release_within(mark.wait(deadline)),
            };
            if let Err(e) = released {
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
        queued: u64,
    ) -> Result<Granted> {
        let client = self.leases.client();
        let Some(Created {
            path: our_path,
            before,
            czxid,
            mut listing,
            made_parents,
        }) = self
            .leases
            .create_protected(data, NodeKind::Sequential, deadline, start)?
        else {
            // The deadline passed with the link down.
            return Ok(Granted::TimedOut { link_trouble: true });
        };
        let mut cleanup = NodeCleanup::new(&self.leases, &our_path, deadline);
        if made_parents {
            if let Err(e) = self.refuse_other_kind(deadline, start) {
                self.withdraw_from_other_kind(|| drop(cleanup));
                return Err(e);
            }
        }
        let our_name = paths::node_name(&our_path).to_string();
        let leases_path = self.leases.base_path().to_string();
        let waiter = Arc::new(Waiter::default());
        let _cancel = super::cancel::wake_on_cancel(&waiter);
        // Session changes and changes of a shared maximum wake the waiter: subscribed before
        // the first listing that sets a watch (an uncontended lease never subscribes).
        let mut listeners = None;
        let mut watch = false;
        let mut retries = Retries::new(self.leases.retry_policy().as_ref(), start, deadline);
        let mut first_round = true;
        let result = loop {
            // Past the deadline, no new round: it would start a request.
            if !std::mem::take(&mut first_round) && past(deadline, Instant::now()) {
                break Ok(Granted::TimedOut {
                    link_trouble: false,
                });
            }
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
            // The first round decides from the listing sent behind our create (no watch). The
            // wake-up runs where the notification is read (our own client's reader thread),
            // not behind the session's other callbacks.
            let listed = match listing.take() {
                Some(listed) if watcher.is_none() => listed,
                _ => crate::client::native::watches::wake_only(|| {
                    client.get_children(&leases_path, watcher)
                }),
            };
            let children = match listed {
                Ok(c) => c,
                Err(ZkError::NoNode) => break Ok(Granted::NodeGone),
                // Our lease node died with the session: retry under the policy, as the mutex's
                // wait loop does.
                Err(ZkError::SessionExpired) => break Ok(Granted::NodeGone),
                Err(code) if code.is_retryable() => {
                    match self.leases.retry_when_connected(&mut retries) {
                        Resume::Ready => continue,
                        Resume::Deadline => break Ok(Granted::TimedOut { link_trouble: true }),
                        Resume::Exhausted => {
                            break Err(Error::zk("get_children", leases_path.clone(), code))
                        }
                        Resume::Closed => break Err(Error::Closed),
                    }
                }
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
                // The delete goes on in the background; its link is in trouble.
                Err(_) if past(deadline, Instant::now()) => {
                    break Ok(Granted::TimedOut { link_trouble: true })
                }
                Err(e) => break Err(e),
            }
            if children.len() <= self.max_leases() {
                let node =
                    HeldNode::new(client.clone(), our_path.clone(), before).with_czxid(czxid);
                break Ok(Granted::Yes(Lease {
                    node: Arc::new(self.leases.granted(node, start)),
                    retry: self.leases.retry_policy().clone(),
                    closed: false,
                }));
            }
            if !watch {
                // Before waiting, the admission must be known to the server as ours (see
                // `admission_state`); only a waiting lease needs it: a lease within the maximum
                // is granted whoever is admitted, so the uncontended path asks nothing more.
                match self.admission_state(&before) {
                    LockState::Held => {}
                    LockState::Lost => {
                        log::info!(
                            "admission to {} lost before the lease; queueing again",
                            self.path
                        );
                        break Ok(Granted::NodeGone); // `cleanup` deletes the lease
                    }
                    // Unknown (the check's link failed): asked again once the link is back,
                    // with a new listing; past the deadline, no more requests.
                    LockState::Suspect => match self.leases.retry_when_connected(&mut retries) {
                        Resume::Ready => continue,
                        Resume::Deadline => break Ok(Granted::TimedOut { link_trouble: true }),
                        Resume::Exhausted => {
                            break Err(Error::zk(
                                "exists",
                                self.admission.path(),
                                ZkError::ConnectionLoss,
                            ))
                        }
                        Resume::Closed => break Err(Error::Closed),
                    },
                }
                if queued_mark() == queued {
                    self.leases.observe().queued(&our_path, before.session_id);
                }
                watch = true;
                listeners = Some(self.wake_on_changes(&waiter));
                continue;
            }
            waiter.wait(deadline);
            if past(deadline, Instant::now()) {
                break Ok(Granted::TimedOut {
                    link_trouble: false,
                });
            }
        };
        if let Some((session_listener, count_listener)) = listeners {
            client.session().unsubscribe(session_listener);
            if let (Some(id), MaxLeases::Shared(c)) = (count_listener, &self.max) {
                c.unsubscribe(id);
            }
        }
        match result {
            Ok(Granted::Yes(lease)) => {
                cleanup.disarm();
                Ok(Granted::Yes(lease))
            }
            Ok(Granted::TimedOut { link_trouble }) => {
                cleanup.set_wait(Wait::after_timeout(deadline, link_trouble));
                Ok(Granted::TimedOut { link_trouble })
            }
            // Past the deadline, a failure with an unknown outcome leaves the link in trouble.
            Err(e) if past(deadline, Instant::now()) => {
                cleanup.set_wait(Wait::after_timeout(deadline, e.is_retryable()));
                Err(e)
            }
            // On `NodeGone` the lease is deleted by path all the same: it may still exist.
            other => other,
        }
    }

    /// Whether the calling thread's admission still holds, asked of the server (one `exists`)
    /// after the lease was created in the session `before` saw: not only believed by the client.
    ///
    /// Two leases over the maximum whose owners both count as admitted wait on each other for
    /// ever, and the one really admitted keeps everyone else out. A session lost between the
    /// admission and the lease create lets another client be admitted meanwhile; then the
    /// admission node is gone and the lease lives in another session. If the loss was reported,
    /// the loss count says so without a request. If not (a client can open a new session and
    /// run requests in it before it reports the change), the old session expired on the server
    /// before the new one was opened, and its ephemeral admission node went with it: `exists`
    /// says so. Asking once, before the first wait, is enough: from then on the admission and
    /// the lease live in one session, and a later loss takes the lease too, which the next
    /// listing sees. `Lost`: the lease is deleted and the thread queues for admission again;
    /// `Suspect`: the answer is unknown (the link failed), ask again.
    fn admission_state(&self, before: &SessionSnapshot) -> LockState {
        match self.admission.held_node() {
            Some(admission) if admission.losses() == before.losses => admission.confirm(),
            _ => LockState::Lost,
        }
    }

    /// Subscribes `waiter` to session changes and to the shared maximum's changes.
    fn wake_on_changes(&self, waiter: &Arc<Waiter>) -> (ListenerId, Option<ListenerId>) {
        let session_listener = wake_on_session_change(self.leases.client(), waiter);
        let count_listener = match &self.max {
            MaxLeases::Shared(c) => {
                let w = Arc::downgrade(waiter);
                Some(c.subscribe(move |_| {
                    if let Some(w) = w.upgrade() {
                        w.signal(None);
                    }
                }))
            }
            MaxLeases::Fixed(_) => None,
        };
        (session_listener, count_listener)
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

enum Granted {
    Yes(Lease),
    /// `link_trouble`: a request failed with an unknown outcome at the end (no more requests on
    /// the caller's thread then).
    TimedOut {
        link_trouble: bool,
    },
    NodeGone,
}
