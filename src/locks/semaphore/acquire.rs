//! The semaphore's acquire: admission, the lease node, the wait for room, as one future that
//! the blocking calls run on their thread and the lease futures on their executor.
//!
//! Rules kept here (beside those of the module docs):
//! - **admission is an owned hold**, known by its node, not by a thread: the future that takes
//!   it may be polled on any thread; it is given back (unawaited) when the future is dropped;
//! - **a wait's registrations leave with it**: the session listener and the shared count's
//!   listener are removed when the wait ends, its future dropped included.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::{Request, Response, Submission, ZkError};
use crate::error::{Error, Result};
use crate::paths;
use crate::retry::{Retries, RetryStep};
use crate::session::{ListenerId, SessionSnapshot};

use super::{InterProcessSemaphoreV2, Lease, MaxLeases};
use crate::locks::cleanup::{give_back, BackgroundMark};
use crate::locks::deadline_after;
use crate::locks::default_node_data;
use crate::locks::held::{HeldNode, LockState};
use crate::locks::internals::awaits::{self, next_retry};
use crate::locks::internals::{
    past, wake_on_session_change, Created, NodeCleanup, NodeKind, OutcomeOwed, Resume, Wait, Waiter,
};
use crate::locks::mutex::InterProcessMutex;
use crate::locks::observe::queued_mark;

impl InterProcessSemaphoreV2 {
    /// `qty` leases within `timeout` (`None`: no limit), one at a time; the ones taken are
    /// returned when the call ends without all of them. The blocking calls run it on their
    /// thread; the lease futures on their executor.
    pub(super) async fn acquire_inner_async(
        &self,
        qty: usize,
        timeout: Option<Duration>,
    ) -> Result<Option<Vec<Lease>>> {
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
            // Dropped here (the future given up), the acquire is reported `cancelled`.
            let owed = OutcomeOwed::new(self.leases.observe(), started);
            let outcome = self.acquire_one(deadline).await;
            owed.done();
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
    async fn acquire_one(&self, deadline: Option<Instant>) -> Result<Option<Lease>> {
        let start = Instant::now();
        let mut retries = Retries::new(self.leases.retry_policy().as_ref(), start, deadline);
        let data = self.data.clone().unwrap_or_else(default_node_data);
        // One `queued` per acquisition: the admission's, else the lease's wait for room.
        let queued = queued_mark();
        loop {
            let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            // Admission is an owned hold (not the thread's): the future that takes it may be
            // polled on any thread. Given back, unawaited, if the future is dropped.
            let Some(admitted) = self.admission.acquire_owned_async(remaining).await? else {
                return Ok(None);
            };
            let admission = Admission {
                mutex: &self.admission,
                node: Some(admitted),
            };
            let mark = BackgroundMark::now();
            let outcome = self
                .lease_while_admitted(deadline, &data, start, queued, &admission)
                .await;
            // With the lease granted, the caller does not wait for the admission delete:
            // holding admission a little longer keeps others out a little longer, nothing
            // more, and it is sent after the leases listing was answered (see the module
            // docs). Otherwise it is bounded by the deadline: a timed call returns by it even
            // during an outage (the delete goes on in the background), and one past its
            // deadline with its link in trouble makes no more requests.
            let released = match &outcome {
                Ok(Granted::Yes(_)) => admission.release(Wait::Unawaited),
                Ok(Granted::TimedOut { link_trouble: true }) => admission.release(Wait::Background),
                // No request once the lease's delete (done by now) went to the background.
                _ => admission.release(mark.wait(deadline)),
            };
            if let Err(e) = released {
                log::warn!("releasing the admission mutex of {}: {e}", self.path);
            }
            match outcome? {
                Granted::Yes(lease) => return Ok(Some(lease)),
                Granted::TimedOut { .. } => return Ok(None),
                Granted::NodeGone => match next_retry(&mut retries).await {
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

    async fn lease_while_admitted(
        &self,
        deadline: Option<Instant>,
        data: &[u8],
        start: Instant,
        queued: u64,
        admission: &Admission<'_>,
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
            .create_protected(data, NodeKind::Sequential, deadline, start)
            .await?
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
        // the first listing that sets a watch (an uncontended lease never subscribes), and
        // unsubscribed when the wait ends (its future dropped included).
        let mut listeners = Listeners {
            semaphore: self,
            ids: None,
        };
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
            let listed = match (listing.take(), watcher) {
                (Some(listed), None) => listed,
                (_, watcher) => {
                    let read = Request::GetChildren {
                        path: leases_path.clone(),
                    };
                    let submission = match watcher {
                        Some(w) => Submission::watched(read, w).wake_only(),
                        None => Submission::new(read),
                    };
                    let answers = awaits::submit(client, vec![submission]).await;
                    match answers.into_iter().next() {
                        Some(Ok(Response::GetChildren(children))) => Ok(children),
                        Some(Err(code)) => Err(code),
                        _ => Err(ZkError::MarshallingError),
                    }
                }
            };
            let children = match listed {
                Ok(c) => c,
                Err(ZkError::NoNode) => break Ok(Granted::NodeGone),
                // Our lease node died with the session: retry under the policy, as the mutex's
                // wait loop does.
                Err(ZkError::SessionExpired) => break Ok(Granted::NodeGone),
                Err(code) if code.is_retryable() => {
                    match self.leases.retry_when_connected_async(&mut retries).await {
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
                    unawaited: false,
                }));
            }
            if !watch {
                // Before waiting, the admission must be known to the server as ours (see
                // `admission_state`); only a waiting lease needs it: a lease within the maximum
                // is granted whoever is admitted, so the uncontended path asks nothing more.
                match admission.state(&before).await {
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
                    LockState::Suspect => {
                        match self.leases.retry_when_connected_async(&mut retries).await {
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
                        }
                    }
                }
                if queued_mark() == queued {
                    self.leases.observe().queued(&our_path, before.session_id);
                }
                watch = true;
                listeners.wake(&waiter);
                continue;
            }
            awaits::signalled(&waiter, deadline).await;
            if past(deadline, Instant::now()) {
                break Ok(Granted::TimedOut {
                    link_trouble: false,
                });
            }
        };
        drop(listeners);
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
}

/// How one lease's wait ended.
enum Granted {
    Yes(Lease),
    /// `link_trouble`: a request failed with an unknown outcome at the end (no more requests on
    /// the caller's thread then).
    TimedOut {
        link_trouble: bool,
    },
    NodeGone,
}

/// This acquire's admission: an owned hold of the admission mutex, given back (unawaited)
/// when dropped unless released before.
pub(super) struct Admission<'a> {
    mutex: &'a InterProcessMutex,
    node: Option<Arc<HeldNode>>,
}

impl Admission<'_> {
    /// Whether this acquire's admission still holds, asked of the server (one `exists`)
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
    /// listing sees. `Lost`: the lease is deleted and the acquire queues for admission again;
    /// `Suspect`: the answer is unknown (the link failed), ask again.
    async fn state(&self, before: &SessionSnapshot) -> LockState {
        match &self.node {
            Some(admission) if admission.losses() == before.losses => {
                admission.confirm_async().await
            }
            _ => LockState::Lost,
        }
    }

    /// Gives the admission back, keeping the caller only as long as `wait` allows.
    fn release(mut self, wait: Wait) -> Result<()> {
        match self.node.take() {
            Some(node) => self.mutex.release_owned(&[node], wait),
            None => Ok(()),
        }
    }
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        if let Some(node) = self.node.take() {
            if let Err(e) = self.mutex.release_owned(&[node], Wait::Unawaited) {
                log::info!("giving back the admission of {}: {e}", self.mutex.path());
            }
        }
    }
}

/// A waiting lease's listeners: the session's and the shared maximum's, removed when dropped.
struct Listeners<'a> {
    semaphore: &'a InterProcessSemaphoreV2,
    ids: Option<(ListenerId, Option<ListenerId>)>,
}

impl Listeners<'_> {
    /// Session changes and changes of a shared maximum wake `waiter` from now on.
    fn wake(&mut self, waiter: &Arc<Waiter>) {
        if self.ids.is_some() {
            return;
        }
        let s = self.semaphore;
        let session_listener = wake_on_session_change(s.leases.client(), waiter);
        let count_listener = match &s.max {
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
        self.ids = Some((session_listener, count_listener));
    }
}

impl Drop for Listeners<'_> {
    fn drop(&mut self) {
        if let Some((session_listener, count_listener)) = self.ids.take() {
            let s = self.semaphore;
            s.leases.client().session().unsubscribe(session_listener);
            if let (Some(id), MaxLeases::Shared(c)) = (count_listener, &s.max) {
                c.unsubscribe(id);
            }
        }
    }
}
