//! `LockInternals`: the engine of every lock recipe — create a protected ephemeral-sequential
//! node, list and sort the children, hold the lock or watch the one node that keeps us out,
//! wait on this waiter's own wake-up, repeat. The engine is a future
//! ([`LockInternals::attempt_async`]): a blocking call runs it on its thread, an async
//! acquire on its executor
//! (`awaits`: what it waits on; `context`: the operation's thread-locals across polls;
//! `create`: the node; `listing`: the directory; `waiter`: the wake-up).
//!
//! Invariants this module keeps:
//! - **No orphan node.** Every path out of [`LockInternals::attempt`] that does not return a
//!   held node deletes ours (timeout, error, panic: a drop guard does it), and a delete that
//!   cannot complete now is finished by a background "guaranteed delete" that runs until the
//!   node is gone, the client is closed or dropped, or two more sessions were lost. Deletes are
//!   by exact path whatever happened to the session: the name carries a fresh UUID, and a
//!   create may have run in a session the client has not reported yet.
//! - **Never a blind retry of a sequential create.** After a connection loss during create we
//!   list the parent and look for our `_c_<uuid>-` prefix; we adopt the node only when its
//!   `ephemeral_owner` is the session we are in (CURATOR-498), else delete it. While the
//!   look-up's own outcome is unknown, the look-up is repeated, never the create (CURATOR-45).
//! - **Nothing of a lost session counts as ours.** Once a session was lost since our create, a
//!   listing that still shows our node does not grant: the node is deleted and we queue again.
//! - **Deadlines hold.** Every retry goes through one `Retries` value, which never sleeps past
//!   the deadline. Past it, a timed call starts no request but one delete of its node, and none
//!   when its link is in trouble: the rest goes to the background. A cancelled call
//!   (`locks::cancel`) is past its deadline: `past()` says so, and its waits wake.
//! - **No herd.** A waiter watches only the node that keeps it out, with `get_data` (an `exists`
//!   watch on a node deleted in between would never fire and would leak, CURATOR-107), and
//!   only its own wake-up is signalled.
//! - **No lost wake-up.** Watches vanish on reconnect (the `zookeeper` crate does not re-arm
//!   them), so a waiter also wakes on every change of the session epoch and re-lists. On a
//!   backend that restores watches (`ZkClient::restores_watches`), a waiter whose session is
//!   unchanged (no loss since its create) keeps waiting on its restored watch instead.
//! - **One kind of lock per directory.** The first listing behind our create (no request
//!   of its own) refuses a directory holding another recipe's nodes (`layout::other_kind`):
//!   of two locks of different kinds, the later one's listing shows the earlier one's node,
//!   so the later one withdraws ([`Error::OtherLockKind`]) instead of holding beside it.
//! - **A wait leaves no callback behind.** The watcher a round registers is named, and
//!   removed from the client when the next round arms another or the wait ends without it
//!   firing (timed out, cancelled, closed), as Curator's waiters remove theirs: a process
//!   whose waits time out, or whose latches close while they wait, keeps nothing per wait.
//! - **One round trip to queue.** The create and the listing of the lock directory go out
//!   back to back (`ZkClient::pipeline`); the server applies one session's requests in order,
//!   so the listing includes our node. Only a listing whose create was answered is used; a
//!   create with an unknown outcome goes through the look-up above.

use std::sync::Arc;
use std::time::Instant;

use crate::client::{Request, SharedClient, Submission, WatcherId, ZkError};
use crate::error::{Error, Result};
use crate::paths;
use crate::retry::{Retries, RetryPolicy, RetryStep};
use crate::session::{ConnectionState, ListenerId, SessionSnapshot};

mod armed;
pub(crate) mod awaits;
pub(crate) mod context;
mod create;
mod listing;
mod observing;
mod protection;
mod waiter;

pub(crate) use armed::ArmedWatcher;
pub(crate) use context::in_future;
pub(crate) use create::Created;
pub use create::{is_protected, NodeKind, PROTECTED_PREFIX_LEN};
pub(crate) use observing::OutcomeOwed;
pub(crate) use waiter::Waiter;

pub(crate) use super::cleanup::{NodeCleanup, Wait};
use super::driver::{Decision, LockDriver};
use super::held::{HeldNode, Interest};
use super::layout::{other_kind, other_kind_error, LockLayout};
use super::observe::Observe;
use crate::primitives::block_on::block_on;

/// How a pause before a retry ended.
pub(crate) enum Resume {
    /// Connected again: retry now.
    Ready,
    /// The deadline passed.
    Deadline,
    /// The client was closed.
    Closed,
    /// The retry policy gives up.
    Exhausted,
}

/// Why the wait loop stopped without the lock.
enum LoopEnd {
    Acquired,
    /// The deadline passed; `link_trouble` when the last request failed with an unknown
    /// outcome (the cleanup then makes no request on the caller's thread).
    TimedOut {
        link_trouble: bool,
    },
    /// Our node is not among the children: the session that owned it was lost.
    OurNodeGone,
}

/// The shared engine behind a lock recipe.
#[derive(Debug, Clone)]
pub struct LockInternals {
    client: SharedClient,
    base_path: String,
    driver: Arc<dyn LockDriver>,
    retry: Arc<dyn RetryPolicy>,
    /// The directory's ACL guard, passed once per lock object (see `protection`).
    protection: Arc<protection::Protection>,
    /// Who reports this lock's events (the client's observer unless the recipe set one).
    observe: Arc<Observe>,
}

impl LockInternals {
    /// An engine for the lock directory `base_path` (validated by the caller).
    pub fn new(
        client: SharedClient,
        base_path: String,
        driver: Arc<dyn LockDriver>,
        retry: Arc<dyn RetryPolicy>,
    ) -> LockInternals {
        let observe = observing::observe_for(&client, &base_path, driver.as_ref());
        LockInternals {
            client,
            base_path,
            driver,
            retry,
            protection: Arc::default(),
            observe,
        }
    }

    /// The lock directory.
    pub fn base_path(&self) -> &str {
        &self.base_path
    }

    /// The client.
    pub fn client(&self) -> &SharedClient {
        &self.client
    }

    /// The driver.
    pub fn driver(&self) -> &Arc<dyn LockDriver> {
        &self.driver
    }

    /// The retry policy.
    pub fn retry_policy(&self) -> &Arc<dyn RetryPolicy> {
        &self.retry
    }

    /// Tries to take the lock until `deadline` (`None`: no limit). `Ok(None)` on timeout; our
    /// node is then deleted. A lost session while waiting makes a fresh attempt with a new
    /// node, as long as the retry policy allows.
    pub fn attempt(
        &self,
        deadline: Option<Instant>,
        data: &[u8],
        kind: NodeKind,
    ) -> Result<Option<HeldNode>> {
        // The blocking call runs the engine's future on the calling thread.
        block_on(self.attempt_async(deadline, data, kind))
    }

    /// [`Self::attempt`] as a future: the one engine, which a blocking call runs on its thread
    /// and an async acquire on its executor. Dropped before it is ready, it leaves nothing
    /// behind (see the module docs and `awaits`).
    pub(crate) async fn attempt_async(
        &self,
        deadline: Option<Instant>,
        data: &[u8],
        kind: NodeKind,
    ) -> Result<Option<HeldNode>> {
        let start = Instant::now();
        // While we wait or hold, the session proves itself to the quorum (`session/quorum.rs`).
        let _interest = Interest::new(&self.client);
        let owed = observing::OutcomeOwed::new(&self.observe, start);
        let result = self.attempt_from(start, deadline, data, kind).await;
        if let Ok(Some(held)) = &result {
            // Granted on a session idle for long, whose last proof is stale: returned once the
            // quorum confirmed it (a fraction of its timeout), or at the deadline, `Suspect`.
            Box::pin(awaits::quorum_fresh(&self.client, held.losses(), deadline)).await;
        }
        owed.done();
        self.report(result, start)
    }

    /// [`Self::attempt`], started at `start`, unreported.
    async fn attempt_from(
        &self,
        start: Instant,
        deadline: Option<Instant>,
        data: &[u8],
        kind: NodeKind,
    ) -> Result<Option<HeldNode>> {
        let mut retries = Retries::new(self.retry.as_ref(), start, deadline);
        loop {
            if self.client.session().state() == ConnectionState::Closed {
                return Err(Error::Closed);
            }
            // Boxed: its state is not kept while the node waits in the queue.
            let created = Box::pin(self.create_protected(data, kind, deadline, start)).await?;
            let Some(Created {
                path: our_path,
                before,
                czxid,
                listing,
                ..
            }) = created
            else {
                return Ok(None); // the deadline passed while the connection was down
            };
            let mut cleanup = NodeCleanup::new(self, &our_path, deadline);
            let end = Box::pin(self.wait_loop(&our_path, before, deadline, listing)).await;
            if let (Err(e), true) = (&end, past(deadline, Instant::now())) {
                // Past the deadline, a failure with an unknown outcome leaves the link in
                // trouble: the node goes in the background.
                cleanup.set_wait(Wait::after_timeout(deadline, e.is_retryable()));
            }
            match end? {
                LoopEnd::Acquired => {
                    cleanup.disarm();
                    let held = HeldNode::new(self.client.clone(), our_path, before);
                    return Ok(Some(held.with_czxid(czxid)));
                }
                LoopEnd::TimedOut { link_trouble } => {
                    cleanup.set_wait(Wait::after_timeout(deadline, link_trouble));
                    return Ok(None); // cleanup deletes our node
                }
                LoopEnd::OurNodeGone => {
                    // Our node belongs to a lost session: gone, or still listed until the
                    // server expires it, or alive in a session we were not told about. Its name
                    // is ours alone, so it is deleted by path before we queue again.
                    drop(cleanup);
                    match awaits::next_retry(&mut retries).await {
                        RetryStep::Again { .. } => {
                            log::info!("lock node {our_path} lost with its session; retrying");
                        }
                        RetryStep::DeadlinePassed => return Ok(None),
                        RetryStep::Exhausted => {
                            return Err(Error::SessionLost {
                                path: self.base_path.clone(),
                            })
                        }
                    }
                }
            }
        }
    }

    /// Sleeps as the retry policy says (never past the deadline), then waits for a connection.
    pub(crate) fn retry_when_connected(&self, retries: &mut Retries<'_>) -> Resume {
        if self.client.session().state() == ConnectionState::Closed {
            return Resume::Closed;
        }
        match retries.next() {
            RetryStep::Again { .. } => {}
            RetryStep::DeadlinePassed => return Resume::Deadline,
            RetryStep::Exhausted => return Resume::Exhausted,
        }
        let s = self
            .client
            .session()
            .wait_until_connected(retries.deadline());
        match s.state {
            ConnectionState::Closed => Resume::Closed,
            state if state.is_connected() => Resume::Ready,
            _ => Resume::Deadline,
        }
    }

    /// [`Self::retry_when_connected`] as a future: its pause on the timer, its wait for the
    /// link on a session listener.
    pub(crate) async fn retry_when_connected_async(&self, retries: &mut Retries<'_>) -> Resume {
        if self.client.session().state() == ConnectionState::Closed {
            return Resume::Closed;
        }
        match awaits::next_retry(retries).await {
            RetryStep::Again { .. } => {}
            RetryStep::DeadlinePassed => return Resume::Deadline,
            RetryStep::Exhausted => return Resume::Exhausted,
        }
        let s = awaits::connected(&self.client, retries.deadline()).await;
        match s.state {
            ConnectionState::Closed => Resume::Closed,
            state if state.is_connected() => Resume::Ready,
            _ => Resume::Deadline,
        }
    }

    /// The wait loop: list, decide, watch, wait — until acquired, timed out or our node gone.
    /// `before` is the session as it was before our node was created: once a session was lost
    /// since, our node no longer counts as ours, even while a listing still shows it.
    /// `listing`, when given, is the listing sent right behind our create: the first round
    /// decides from it (or handles its failure) instead of listing again.
    async fn wait_loop(
        &self,
        our_path: &str,
        before: SessionSnapshot,
        deadline: Option<Instant>,
        mut listing: Option<std::result::Result<Vec<String>, ZkError>>,
    ) -> Result<LoopEnd> {
        let our_name = paths::node_name(our_path);
        let waiter = Arc::new(Waiter::default());
        let _cancel = super::cancel::wake_on_cancel(&waiter);
        // Session transitions wake this waiter (watches do not survive a reconnect). The
        // listener is registered lazily, the first time we have to wait, and leaves with the
        // wait (also when its future is dropped).
        let mut listener = Listening::new(&self.client);
        let mut retries = Retries::new(self.retry.as_ref(), Instant::now(), deadline);
        let mut first_round = true;
        let mut queued = false;
        // Checked on the first listing behind our create only: of two locks of different
        // kinds on one directory, the later one's first listing shows the earlier one's node.
        let mut kind_to_check = LockLayout::of_child(self.driver.lock_name());
        // The watcher this wait registered last: removed when the wait ends (timed out,
        // cancelled, closed, granted by a listing), so a wait leaves no callback behind.
        let mut armed = ArmedWatcher::new(&self.client);
        let result = loop {
            // Past the deadline, no new round: it would start a request. (The first round's
            // listing belongs to the create: a call with no time left still looks once.)
            if !std::mem::take(&mut first_round) && past(deadline, Instant::now()) {
                break Ok(LoopEnd::TimedOut {
                    link_trouble: false,
                });
            }
            // A new round starts before the listing, so a signal that arrives at any time
            // after the listing is kept.
            let round = waiter.next_round();
            // The epoch as it was before the listing: for the listing sent behind our create,
            // the epoch before the create.
            let (epoch, listed) = match listing.take() {
                Some(listed) => (before.epoch, self.sorted(listed)),
                None => (
                    self.client.session().epoch(),
                    self.sorted(self.list().await),
                ),
            };
            let children = match listed {
                Ok(c) => c,
                Err(code) if code.is_retryable() => {
                    match self.retry_when_connected_async(&mut retries).await {
                        Resume::Ready => continue,
                        Resume::Deadline => break Ok(LoopEnd::TimedOut { link_trouble: true }),
                        Resume::Closed => break Err(Error::Closed),
                        Resume::Exhausted => {
                            break Err(Error::zk("get_children", self.base_path.clone(), code))
                        }
                    }
                }
                Err(ZkError::SessionExpired) => break Ok(LoopEnd::OurNodeGone),
                Err(code) => break Err(Error::zk("get_children", self.base_path.clone(), code)),
            };
            // A node of a lost session can still be listed (the server has not expired it yet,
            // or the listing ran before the loss was reported): it must not count for a grant.
            if self.client.session().snapshot().losses != before.losses {
                break Ok(LoopEnd::OurNodeGone);
            }
            match self.delete_copies(&children, our_name, deadline) {
                Ok(false) => {}
                Ok(true) => continue, // list again without them
                // The delete goes on in the background; its link is in trouble.
                Err(_) if past(deadline, Instant::now()) => {
                    break Ok(LoopEnd::TimedOut { link_trouble: true })
                }
                Err(e) => break Err(e),
            }
            let Some(our_index) = children.iter().position(|c| c == our_name) else {
                break Ok(LoopEnd::OurNodeGone);
            };
            if let Some(own) = kind_to_check.take() {
                if let Some((found, node)) = other_kind(&children, own) {
                    break Err(other_kind_error(&self.base_path, own, found, node));
                }
            }
            let (predecessor, last_ahead) = match self.driver.decide(&children, our_index) {
                Decision::Acquired => break Ok(LoopEnd::Acquired),
                Decision::Watch {
                    predecessor,
                    last_ahead,
                } => (predecessor, last_ahead),
            };
            if !std::mem::replace(&mut queued, true) {
                self.observe.queued(our_path, before.session_id);
            }
            // The listing holds the whole queue (~90 bytes a child): kept through the wait, it
            // made each waiter's memory grow with the queue length (1,000 waiters: ~90 MB).
            drop(children);
            if past(deadline, Instant::now()) {
                break Ok(LoopEnd::TimedOut {
                    link_trouble: false,
                });
            }
            listener.wake(&waiter);
            let w = Arc::downgrade(&waiter);
            let watcher = Box::new(move |event: crate::client::WatchedEvent| {
                if let Some(w) = w.upgrade() {
                    w.watch_fired(round, event.event_type);
                }
            });
            let pred_path = paths::join(&self.base_path, &predecessor);
            // The last round's watcher, if it has not fired, is of no use now.
            armed.remove();
            let id = WatcherId::new();
            // The wake-up runs where the notification is read (our own client's reader
            // thread), not behind the session's other callbacks.
            let read = Request::GetData {
                path: pred_path.clone(),
            };
            let arming = Submission::watched(read, watcher).named(id).wake_only();
            // Recorded before the answer: a future dropped meanwhile removes it.
            armed.set(&pred_path, id);
            let watched = awaits::submit(&self.client, vec![arming]).await;
            let watched = watched
                .into_iter()
                .next()
                .unwrap_or(Err(ZkError::MarshallingError));
            match watched {
                Ok(_) => {}
                // Already gone. If it was the last node ahead of us (and nothing changed in
                // the session), the lock is ours without listing again.
                Err(ZkError::NoNode) => {
                    if last_ahead && self.client.session().epoch() == epoch {
                        break Ok(LoopEnd::Acquired);
                    }
                    continue;
                }
                // The listing retries under the policy; past the deadline (the request may
                // have taken a whole call timeout), no new request is started.
                Err(code) if code.is_retryable() => match past(deadline, Instant::now()) {
                    true => break Ok(LoopEnd::TimedOut { link_trouble: true }),
                    false => continue,
                },
                Err(ZkError::SessionExpired) => break Ok(LoopEnd::OurNodeGone),
                Err(code) => break Err(Error::zk("get_data", pred_path, code)),
            }
            let deleted = self.wait_for_watch(&waiter, before.losses, deadline).await;
            // Hand-off without a re-list: the node that was the last one ahead of ours is
            // deleted, and no reconnect happened since our listing (an event from before a
            // reconnect, or a stale watch of an old session, must not count) — or, on a
            // backend that restores watches, the watch of this round saw it in our session.
            if deleted && last_ahead && self.same_link(epoch, before.losses, deadline).await {
                break Ok(LoopEnd::Acquired);
            }
            if past(deadline, Instant::now()) {
                break Ok(LoopEnd::TimedOut {
                    link_trouble: false,
                });
            }
        };
        drop(listener);
        armed.remove();
        result
    }

    /// Waits until this round's watch fires, the deadline passes or the session changes; true
    /// when the watched node was deleted. On a backend that restores watches, a reconnect of
    /// the session our node lives in (no loss since `losses`) does not end the wait: the
    /// watch is still armed and fires for a deletion made while the link was down.
    async fn wait_for_watch(
        &self,
        waiter: &Waiter,
        losses: u64,
        deadline: Option<Instant>,
    ) -> bool {
        let restores = self.client.restores_watches();
        loop {
            let deleted = awaits::signalled(waiter, deadline).await;
            if deleted || !restores || past(deadline, Instant::now()) {
                return deleted;
            }
            // Re-armed before the session is read: a transition after the read signals again.
            if let Some(deleted) = waiter.keep_waiting() {
                // Spent: a deletion hands over; a data change lists and watches again.
                return deleted;
            }
            let s = self.client.session().snapshot();
            let same_session = s.losses == losses
                && matches!(
                    s.state,
                    ConnectionState::Suspended
                        | ConnectionState::Reconnected
                        | ConnectionState::Connected
                );
            if !same_session {
                return false;
            }
        }
    }

    /// True when a watch set at `epoch` still speaks for the session our node lives in: no
    /// transition since (any backend), or, on a backend that restores watches, the link is up
    /// (waited for until `deadline`: a restored watch can fire before the reconnect is
    /// reported) and no session was lost since `losses`.
    async fn same_link(&self, epoch: u64, losses: u64, deadline: Option<Instant>) -> bool {
        let session = self.client.session();
        if session.epoch() == epoch {
            return true;
        }
        if !self.client.restores_watches() || session.snapshot().losses != losses {
            return false;
        }
        let s = awaits::connected(&self.client, deadline).await;
        s.state.is_connected() && s.losses == losses
    }

    /// Deletes a node we hold, by its exact path (even after a session loss: the node may live
    /// in a session the client had not reported when it was created), keeping the caller only
    /// as long as `wait` allows. `Ok` when it is gone. When the outcome stays unknown past the
    /// retry policy, a background delete keeps trying and the error is returned. A `Lost` hold
    /// never waits for the link: one try when connected, else the background delete, and `Ok`.
    pub(crate) fn release_within(&self, held: &HeldNode, wait: Wait) -> Result<()> {
        super::cleanup::release_held(held, self.retry.as_ref(), wait)
    }
}

/// A wait's session listener, registered the first time it has to wait and removed when the
/// wait ends (its future dropped included).
struct Listening<'a> {
    client: &'a SharedClient,
    id: Option<ListenerId>,
}

impl<'a> Listening<'a> {
    fn new(client: &'a SharedClient) -> Listening<'a> {
        Listening { client, id: None }
    }

    /// Session transitions wake `waiter` from now on.
    fn wake(&mut self, waiter: &Arc<Waiter>) {
        if self.id.is_none() {
            self.id = Some(wake_on_session_change(self.client, waiter));
        }
    }
}

impl Drop for Listening<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.client.session().unsubscribe(id);
        }
    }
}

/// Wakes `waiter` on every session transition (until unsubscribed).
pub(crate) fn wake_on_session_change(client: &SharedClient, waiter: &Arc<Waiter>) -> ListenerId {
    let w = Arc::downgrade(waiter);
    client.session().subscribe(move |_: &SessionSnapshot| {
        if let Some(w) = w.upgrade() {
            w.signal(None);
        }
    })
}

/// Whether a call with `deadline` is past it at `t`: so is every call of a thread whose
/// cancellable acquire was cancelled (`locks::cancel`: a cancel is a deadline that passed).
pub(crate) fn past(deadline: Option<Instant>, t: Instant) -> bool {
    deadline.is_some_and(|d| t >= d) || super::cancel::requested()
}

#[cfg(test)]
mod tests {
    use super::create::protected_prefix;
    use super::*;

    /// A waiting acquire's future is what a waiter costs an async service (its size is the
    /// largest of its states, kept for as long as it waits): the rare and short waits are
    /// boxed, and the states that last stay under a kilobyte each.
    #[test]
    fn a_waiting_acquire_future_stays_small() {
        let client = crate::client::memory::MemoryEnsemble::new().connect();
        let driver = Arc::new(crate::locks::driver::StandardDriver::new("lock-", 1));
        let retry = Arc::new(crate::retry::NoRetry);
        let internals = LockInternals::new(client.clone(), "/small".into(), driver, retry);
        let attempt = internals.attempt_async(None, b"", NodeKind::Sequential);
        let before = crate::client::ZkClient::session(client.as_ref()).snapshot();
        let waiting = internals.wait_loop("/small/x", before, None, None);
        let (attempt, waiting) = (
            std::mem::size_of_val(&attempt),
            std::mem::size_of_val(&waiting),
        );
        assert!(attempt <= 1024, "the acquire's future: {attempt} bytes");
        assert!(waiting <= 1024, "the wait loop's future: {waiting} bytes");
    }

    #[test]
    fn protected_names() {
        let p = protected_prefix();
        assert_eq!(p.len(), PROTECTED_PREFIX_LEN);
        assert!(p.starts_with("_c_") && p.ends_with('-'));
        assert_eq!(p, p.to_lowercase());
        assert!(is_protected(&format!("{p}lock-0000000001")));
        assert!(!is_protected("lock-0000000001"));
        assert!(!is_protected(&p)); // nothing after the prefix
    }
}
