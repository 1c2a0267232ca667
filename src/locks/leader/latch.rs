//! `LeaderLatch`: Curator's leader latch on the lock engine. Every participant queues a
//! protected ephemeral sequential `latch-` node (`_c_<uuid>-latch-<seq>`) holding its id;
//! the lowest sequence leads; each other participant watches the one ahead of it.

use std::sync::{Arc, Weak};
use std::task::{Poll, Waker};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::client::SharedClient;
use crate::error::{Error, Result};
use crate::retry::{ExponentialBackoffRetry, RetryPolicy};

use super::super::cancel::{Acquire, CancelToken};
use super::super::driver::StandardDriver;
use super::super::internals::LockInternals;
use super::super::layout::LATCH_NAME;
use super::super::participants::{self as queue, Participant, ParticipantKind};
use super::super::{deadline_after, validate_lock_path, LockObserver};
use super::awaited::ClosingLatch;
use super::leadership::Leadership;
use super::listeners::{LeaderLatchListener, LeaderListenerId, Listeners};
use super::phase::{not_participating, Phase};
use crate::primitives::wakers::{wake, WakerSet};

/// What a latch tells its listeners when it is closed while leading (Curator's
/// `LeaderLatch.CloseMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CloseMode {
    /// Listeners are not told (Curator's default).
    #[default]
    Silent,
    /// Listeners are told `not_leader`.
    NotifyLeader,
}

/// A participant in a leader election, wire-compatible with Curator 5.4's `LeaderLatch`:
/// Rust and JVM participants on one path elect one leader among them.
///
/// [`Self::start`] queues this participant (on a thread the latch owns); the participant
/// whose node has the lowest sequence leads until its node is no longer `Held` — its session
/// suspended or lost, its node deleted — or it [closes](Self::close). Leadership is a
/// [`Leadership`] value: its state, its term (fencing token), a wait that returns when it
/// ends, fenced writes. Awaiting leadership can be untimed, timed or cancelled.
///
/// **Leading follows the node's state, as a lock holder's does.** When the session is
/// suspended the latch stops leading at once (Curator's default policy: SUSPENDED is an
/// error state), before the server can have expired the session and elected another; when
/// the link comes back and the node is still ours, it leads again with the same term; when
/// the node is lost, a new one queues.
///
/// ```
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::locks::LeaderLatch;
///
/// let ensemble = MemoryEnsemble::new();
/// let a = LeaderLatch::new(ensemble.connect(), "/election/indexer", "host-a")?;
/// let b = LeaderLatch::new(ensemble.connect(), "/election/indexer", "host-b")?;
/// a.start()?;
/// let leadership = a.await_leadership()?;
/// b.start()?;
/// # while b.participants()?.len() < 2 { std::thread::yield_now(); }
/// assert_eq!(b.leader()?.unwrap().id(), "host-a");
/// assert!(!b.has_leadership());
///
/// a.close()?;                                // leadership moves on
/// let next = b.await_leadership()?;
/// assert!(next.term() > leadership.term());  // terms only grow
/// # Ok::<(), zk_locks::Error>(())
/// ```
pub struct LeaderLatch {
    shared: Arc<Shared>,
}

/// What the latch and its thread share.
pub(super) struct Shared {
    pub(super) internals: LockInternals,
    pub(super) id: Arc<str>,
    pub(super) path: Arc<str>,
    close_mode: CloseMode,
    /// Cancelled by close: every wait of the latch's thread ends.
    pub(super) stop: CancelToken,
    status: Mutex<Status>,
    changed: Condvar,
    listeners: Listeners,
    thread: Mutex<Option<JoinHandle<()>>>,
}

struct Status {
    phase: Phase,
    /// The spell of leadership now, if leading.
    leading: Option<Leadership>,
    /// The latch's thread has ended (closed, or its client was).
    ended: bool,
    /// How the last give-back of a node went (what close reports).
    released: Option<Result<()>>,
    /// Futures awaiting leadership ([`super::awaited`]): woken where `changed` is notified.
    pub(super) wakers: WakerSet,
}

impl LeaderLatch {
    /// A participant with `id` (stored in its node: what [`Self::leader`] and
    /// [`Self::participants`] name it by, Curator's `getId()`) in the election at `path`. Not
    /// in the election until [`Self::start`].
    pub fn new(client: SharedClient, path: &str, id: impl Into<String>) -> Result<LeaderLatch> {
        validate_lock_path(path)?;
        let internals = LockInternals::new(
            client,
            path.to_string(),
            Arc::new(StandardDriver::new(LATCH_NAME, 1)),
            Arc::new(ExponentialBackoffRetry::default()),
        );
        Ok(LeaderLatch {
            shared: Arc::new(Shared {
                internals,
                id: id.into().into(),
                path: path.into(),
                close_mode: CloseMode::default(),
                stop: CancelToken::new(),
                status: Mutex::new(Status {
                    phase: Phase::Latent,
                    leading: None,
                    ended: false,
                    released: None,
                    wakers: WakerSet::default(),
                }),
                changed: Condvar::new(),
                listeners: Listeners::default(),
                thread: Mutex::new(None),
            }),
        })
    }

    /// What [`Self::close`] (and a drop) tells the listeners (default: [`CloseMode::Silent`]).
    pub fn with_close_mode(self, mode: CloseMode) -> Self {
        self.configure(|s| s.close_mode = mode)
    }

    /// Replaces the retry policy of the engine's requests (default: exponential backoff).
    pub fn with_retry_policy(self, retry: Arc<dyn RetryPolicy>) -> Self {
        self.configure(|s| {
            let i = &s.internals;
            let observe = i.observe().clone();
            s.internals = LockInternals::new(
                i.client().clone(),
                i.base_path().into(),
                i.driver().clone(),
                retry,
            )
            .with_observe(observe);
        })
    }

    /// Reports this latch's node events (queued, acquired — elected —, suspect, lost,
    /// released) to `observer` instead of the client's (see [`LockObserver`]; the kind is
    /// [`ParticipantKind::Latch`]).
    pub fn with_observer(self, observer: Arc<dyn LockObserver>) -> Self {
        self.configure(|s| {
            let observe = s.internals.observe_with(Some(observer));
            s.internals = s.internals.clone().with_observe(observe);
        })
    }

    /// Applies a builder change (only before the latch is shared with its thread: always, as
    /// the builders take the latch by value before `start`).
    fn configure(mut self, change: impl FnOnce(&mut Shared)) -> Self {
        match Arc::get_mut(&mut self.shared) {
            Some(shared) => change(shared),
            None => log::warn!(
                "leader latch {}: configured after start; ignored",
                self.path()
            ),
        }
        self
    }

    /// The election's path.
    pub fn path(&self) -> &str {
        &self.shared.path
    }

    /// This participant's id.
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// Joins the election: a thread of the latch's own queues a node and follows it.
    /// Returns at once; [`Self::await_leadership`] waits to lead. A latch starts once:
    /// again (or after close) is [`Error::NotParticipating`].
    pub fn start(&self) -> Result<()> {
        let mut status = self.shared.status.lock();
        if status.phase != Phase::Latent {
            return Err(not_participating(self.path(), "started already, or closed"));
        }
        let shared = self.shared.clone();
        let handle = thread::Builder::new()
            .name("zk-leader-latch".into())
            .spawn(move || super::campaign::run(shared))
            .map_err(|e| Error::Io {
                context: "starting the leader latch's thread".into(),
                source: e,
            })?;
        status.phase = Phase::Started;
        *self.shared.thread.lock() = Some(handle);
        Ok(())
    }

    /// Leaves the election as [`Self::with_close_mode`] says: stops leading (the current
    /// [`Leadership`]'s token is cancelled, its state turns `Lost`), deletes this
    /// participant's node (the next participant leads within about one round trip) and
    /// waits for the latch's thread to end. Closing twice, or a latch never started, is
    /// [`Error::NotParticipating`].
    ///
    /// A node that may still stand in the election is an error, as Curator's `close()`
    /// throws on a failed delete: the leader's node whose delete failed with its outcome
    /// unknown, or a queued node whose withdrawal went to the background because the link was
    /// down (a retryable error, [`Error::is_retryable`]). The delete goes on in the background
    /// (until the node is gone, the client closed, or its session over). `Ok` when the node
    /// is gone, or went with a lost session (nothing of this participant is left to block the
    /// election). Closed from a listener (or dropped there), close cannot wait for the
    /// latch's thread, which is the caller: it returns `Ok` at once, and the delete's outcome
    /// is only logged.
    pub fn close(&self) -> Result<()> {
        self.close_with(self.shared.close_mode)
    }

    /// [`Self::close`] with `mode` instead of the latch's close mode.
    pub fn close_with(&self, mode: CloseMode) -> Result<()> {
        // Closed from a listener (or dropped there), on the latch's thread: it cannot wait
        // for itself. The thread ends the spell once the listener returns, tells the
        // listeners (unless silent: cleared in `begin_close`), and clears them as it ends;
        // cleared here, a listener told `is_leader` would never hear `not_leader` while the
        // next participant leads.
        if let Some(handle) = self.begin_close(mode)? {
            if handle.thread().id() == thread::current().id() {
                return Ok(());
            }
            if handle.join().is_err() {
                log::error!("leader latch {}: its thread panicked", self.path());
            }
        }
        self.shared.listeners.clear();
        self.shared.status.lock().released.take().unwrap_or(Ok(()))
    }

    /// [`Self::close`] as a future, for async code: the latch's thread gives the node back
    /// and ends; the future is ready with the outcome then, no thread waiting for it (the
    /// latch's thread wakes it). Dropped, the close goes on all the same.
    pub fn close_async(&self) -> ClosingLatch {
        match self.begin_close(self.shared.close_mode) {
            Err(e) => ClosingLatch::done(Err(e)),
            // Closed from a listener: as `close`, `Ok` at once.
            Ok(Some(handle)) if handle.thread().id() == thread::current().id() => {
                ClosingLatch::done(Ok(()))
            }
            // The thread is left to end by itself: `thread_ended` wakes the future.
            Ok(_) => ClosingLatch::new(self.shared.clone()),
        }
    }

    /// Closes the participation (the phase, the token that ends the thread's waits) and
    /// returns the latch's thread to wait for, if it runs.
    fn begin_close(&self, mode: CloseMode) -> Result<Option<JoinHandle<()>>> {
        let wakers = {
            let mut status = self.shared.status.lock();
            if status.phase != Phase::Started {
                return Err(not_participating(
                    self.path(),
                    "not started, or closed already",
                ));
            }
            status.phase = Phase::Closed;
            self.shared.changed.notify_all();
            status.wakers.take()
        };
        wake(wakers);
        if mode == CloseMode::Silent {
            self.shared.listeners.clear();
        }
        self.shared.stop.cancel();
        Ok(self.shared.thread.lock().take())
    }

    /// Whether this participant leads now: a current [`Leadership`] whose node is `Held`
    /// (asks the server only on the first call after a reconnect, as
    /// [`HeldNode::state`](super::super::HeldNode::state)).
    pub fn has_leadership(&self) -> bool {
        self.leadership().is_some_and(|l| l.is_leading())
    }

    /// The current spell of leadership, if this participant leads.
    pub fn leadership(&self) -> Option<Leadership> {
        self.shared.status.lock().leading.clone()
    }

    /// Blocks until this participant leads, and returns its leadership. Fails when the latch
    /// is not started or is closed meanwhile ([`Error::NotParticipating`]), or its client is
    /// closed ([`Error::Closed`]).
    pub fn await_leadership(&self) -> Result<Leadership> {
        match self.await_leadership_with(&Acquire::new())? {
            Some(leadership) => Ok(leadership),
            None => Err(Error::Closed),
        }
    }

    /// [`Self::await_leadership`] as a future, for async code: ready with the spell once this
    /// participant leads, or with the error `await_leadership` returns. Runtime-agnostic
    /// (`std::task` only), `Send + 'static`, and holds no thread: the latch's own thread
    /// runs the election and wakes it. A timeout is the caller's (`tokio::time::timeout`);
    /// dropping the future ends only the wait (this participant stays in the election).
    ///
    /// ```
    /// use zk_locks::client::memory::MemoryEnsemble;
    /// use zk_locks::locks::LeaderLatch;
    ///
    /// # let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// # runtime.block_on(async {
    /// let ensemble = MemoryEnsemble::new();
    /// let latch = LeaderLatch::new(ensemble.connect(), "/election/jobs", "a")?;
    /// latch.start()?;
    /// let leadership = latch.await_leadership_async().await?;
    /// tokio::select! {
    ///     () = leadership.ended().cancelled() => println!("no longer leading"),
    ///     () = std::future::ready(()) => println!("leading with term {}", leadership.term()),
    /// }
    /// # Ok::<(), zk_locks::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn await_leadership_async(&self) -> super::awaited::AwaitLeadership {
        super::awaited::AwaitLeadership::new(self.shared.clone())
    }

    /// [`Self::await_leadership`] for at most `timeout`: `None` when it passed.
    pub fn await_leadership_for(&self, timeout: Duration) -> Result<Option<Leadership>> {
        self.await_leadership_with(&Acquire::new().timeout(timeout))
    }

    /// [`Self::await_leadership`] as `how` says: `None` when its timeout passed,
    /// [`Error::Cancelled`] when its [`CancelToken`] was cancelled. Only the wait ends: this
    /// participant stays in the election (close it to leave).
    pub fn await_leadership_with(&self, how: &Acquire) -> Result<Option<Leadership>> {
        how.check(self.path())?;
        let deadline = how.timeout_value().and_then(deadline_after);
        let _wake = how.cancel_token().map(|token| {
            let shared: Weak<Shared> = Arc::downgrade(&self.shared);
            token.wake_on(move || {
                if let Some(shared) = shared.upgrade() {
                    let _status = shared.status.lock();
                    shared.changed.notify_all();
                }
            })
        });
        let mut status = self.shared.status.lock();
        loop {
            match status.phase {
                Phase::Latent => return Err(not_participating(self.path(), "not started")),
                Phase::Closed => return Err(not_participating(self.path(), "closed")),
                Phase::Started => {}
            }
            if let Some(leadership) = &status.leading {
                return Ok(Some(leadership.clone()));
            }
            if status.ended {
                return Err(Error::Closed);
            }
            how.check(self.path())?;
            match deadline {
                Some(d) => {
                    if self.shared.changed.wait_until(&mut status, d).timed_out()
                        && status.leading.is_none()
                    {
                        return Ok(None);
                    }
                }
                // No timeout, or one too long to represent: untimed.
                None => self.shared.changed.wait(&mut status),
            }
        }
    }

    /// Adds a listener, told on the latch's thread when this participant becomes leader and
    /// when it stops (see [`LeaderLatchListener`]).
    pub fn add_listener(&self, listener: Arc<dyn LeaderLatchListener>) -> LeaderListenerId {
        self.shared.listeners.add(listener)
    }

    /// Removes a listener; false when it was not there.
    pub fn remove_listener(&self, id: LeaderListenerId) -> bool {
        self.shared.listeners.remove(id)
    }

    /// Every participant in queue order, the leader first and flagged (`is_holder`), each with
    /// its [`Participant::id`] (Curator's `getParticipants`: one listing and the nodes' data,
    /// pipelined; a node deleted meanwhile is left out). Asks the server: it may disagree with
    /// [`Self::has_leadership`] for a moment.
    pub fn participants(&self) -> Result<Vec<Participant>> {
        let driver = self.shared.internals.driver();
        queue::list(
            self.shared.internals.client(),
            self.path(),
            driver.as_ref(),
            |_, i| (ParticipantKind::Latch, i == 0),
        )
    }

    /// The leader as the server shows it: the first participant (Curator's `getLeader`);
    /// `None` when nobody takes part.
    pub fn leader(&self) -> Result<Option<Participant>> {
        Ok(self.participants()?.into_iter().next())
    }
}

impl Drop for LeaderLatch {
    fn drop(&mut self) {
        if self.shared.status.lock().phase == Phase::Started {
            if let Err(e) = self.close() {
                log::warn!("closing leader latch {} on drop: {e}", self.path());
            }
        }
    }
}

impl std::fmt::Debug for LeaderLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = self.shared.status.lock();
        f.debug_struct("LeaderLatch")
            .field("path", &self.shared.path)
            .field("id", &self.shared.id)
            .field("phase", &status.phase)
            .field("leading", &status.leading.is_some())
            .finish()
    }
}

impl Shared {
    /// One poll of a future awaiting leadership (`awaited.rs`): the spell once leading, the
    /// reason once it never will be (as [`LeaderLatch::await_leadership`]); else its waker
    /// is kept under `key` until the status changes.
    pub(super) fn poll_leadership(
        &self,
        key: &mut Option<u64>,
        waker: &std::task::Waker,
    ) -> std::task::Poll<Result<Leadership>> {
        use std::task::Poll;
        let mut status = self.status.lock();
        let done = match status.phase {
            Phase::Latent => Some(Err(not_participating(&self.path, "not started"))),
            Phase::Closed => Some(Err(not_participating(&self.path, "closed"))),
            Phase::Started => match (&status.leading, status.ended) {
                (Some(leadership), _) => Some(Ok(leadership.clone())),
                (None, true) => Some(Err(Error::Closed)),
                (None, false) => None,
            },
        };
        match done {
            Some(outcome) => {
                status.wakers.remove(key.take());
                Poll::Ready(outcome)
            }
            None => {
                status.wakers.register(key, waker);
                Poll::Pending
            }
        }
    }

    /// A future awaiting leadership is dropped: its waker goes.
    pub(super) fn forget_waker(&self, key: Option<u64>) {
        self.status.lock().wakers.remove(key);
    }

    /// A spell begins: recorded, awaiting threads woken, listeners told.
    pub(super) fn start_leading(&self, spell: Leadership) {
        let wakers = {
            let mut status = self.status.lock();
            status.leading = Some(spell.clone());
            self.changed.notify_all();
            status.wakers.take()
        };
        wake(wakers);
        log::info!(
            "leader latch {}: {} leads (term {})",
            self.path,
            self.id,
            spell.term()
        );
        self.listeners.tell(Some(&spell));
    }

    /// The current spell (if any) ends: its token cancelled, listeners told.
    pub(super) fn stop_leading(&self) {
        let Some(spell) = self.status.lock().leading.take() else {
            return;
        };
        spell.end();
        log::info!("leader latch {}: {} stops leading", self.path, self.id);
        self.listeners.tell(None);
    }

    /// How giving back a node went.
    pub(super) fn record_release(&self, released: Result<()>) {
        self.status.lock().released = Some(released);
    }

    /// A future awaiting the latch's close ([`LeaderLatch::close_async`]): the release's
    /// outcome once the thread is over, else `waker` registered under `key`.
    pub(super) fn poll_closed(&self, key: &mut Option<u64>, waker: &Waker) -> Poll<Result<()>> {
        let mut status = self.status.lock();
        if !status.ended {
            status.wakers.register(key, waker);
            return Poll::Pending;
        }
        status.wakers.remove(key.take());
        let released = status.released.take().unwrap_or(Ok(()));
        drop(status);
        self.listeners.clear();
        Poll::Ready(released)
    }

    /// The latch's thread is over. Closed, its listeners go (after they were told the spell
    /// ended: a close from a listener leaves them to this thread).
    pub(super) fn thread_ended(&self) {
        let (closed, wakers) = {
            let mut status = self.status.lock();
            status.ended = true;
            self.changed.notify_all();
            (status.phase == Phase::Closed, status.wakers.take())
        };
        wake(wakers);
        if closed {
            self.listeners.clear();
        }
    }
}
