//! The connection-state machine every backend drives and every lock observes.
//!
//! Curator's vocabulary: [`ConnectionState::Connected`] (a session, new or first),
//! [`ConnectionState::Suspended`] (link down, the session may still live),
//! [`ConnectionState::Reconnected`] (the same session is back; every watch was lost),
//! [`ConnectionState::Lost`] (the session expired, or was assumed expired), plus `ReadOnly` and
//! `Closed` (closed by its owner, terminal).
//!
//! Every transition increments the **connection epoch**. Lock waiters re-check on every epoch
//! change (watches do not survive a reconnect on the `zookeeper` crate), and lock holders use
//! the count of lost sessions to know that their ephemeral node may be gone.
//!
//! Listeners run on the thread that reports the transition (a backend thread): like watchers,
//! they must only record and notify. A panicking listener is caught and logged.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

mod quorum;

use crate::primitives::boot_clock::BootInstant;
use crate::primitives::wakers::{wake, WakerSet};

use quorum::QuorumClock;

/// The state of a client's connection and session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectionState {
    /// Connected with a session (the first one, or a new one after `Lost`).
    Connected,
    /// The link is down; the session may still be alive on the server. Locks are suspect.
    Suspended,
    /// The link is back with the same session. Every watch set before was lost.
    Reconnected,
    /// The session is gone (expired or assumed expired): every ephemeral node of it is gone.
    Lost,
    /// Connected to a read-only server.
    ReadOnly,
    /// Closed by its owner. Terminal.
    Closed,
}

impl ConnectionState {
    /// True when requests can be served (Connected, Reconnected, ReadOnly).
    pub fn is_connected(self) -> bool {
        matches!(
            self,
            ConnectionState::Connected | ConnectionState::Reconnected | ConnectionState::ReadOnly
        )
    }
}

/// A consistent view of a [`Session`] at one instant. Its `Debug` shows the session id as
/// ZooKeeper prints it, in hex (`0x…`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SessionSnapshot {
    /// The current state.
    pub state: ConnectionState,
    /// Increments on every transition.
    pub epoch: u64,
    /// The current session id, when known.
    pub session_id: Option<i64>,
    /// How many times a session of this client was lost (or the client closed). A lock taken
    /// when this was `n` is lost once it is no longer `n`.
    pub losses: u64,
}

impl std::fmt::Debug for SessionSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionSnapshot")
            .field("state", &self.state)
            .field("epoch", &self.epoch)
            .field(
                "session_id",
                &format_args!("{}", session_hex(self.session_id)),
            )
            .field("losses", &self.losses)
            .finish()
    }
}

/// A session id as ZooKeeper prints it (`0x` and lower-case hex), or `none`: the one spelling
/// of every log line and message that names a session.
pub(crate) fn session_hex(id: Option<i64>) -> String {
    match id {
        Some(id) => format!("0x{id:x}"),
        None => "none".into(),
    }
}

/// Identifies a listener registered with [`Session::subscribe`] or
/// [`SharedCount::subscribe`](crate::locks::SharedCount::subscribe).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListenerId(pub(crate) u64);

type Listener = Arc<dyn Fn(&SessionSnapshot) + Send + Sync>;

struct Inner {
    snapshot: SessionSnapshot,
    next_listener: u64,
    /// By id, in registration order: a listener leaves in `O(log n)` (ten thousand waiting
    /// acquires subscribe and unsubscribe one each).
    listeners: BTreeMap<u64, Listener>,
    /// What the backend proved about the leader's view of the session (`quorum.rs`).
    quorum: QuorumClock,
    /// The backend's wake-up when proving starts (an interest after none).
    prove: Option<Arc<dyn Fn() + Send + Sync>>,
    /// The futures waiting on an event that is not a transition ([`Session::register_event_waker`]):
    /// a proof confirmed, the backend's link ready to send.
    event_wakers: WakerSet,
}

/// The connection-state machine of one client. Backends report transitions; locks observe.
///
/// ```
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::{ConnectionState, ZkClient};
///
/// let client = MemoryEnsemble::new().connect();
/// let before = client.session().snapshot();
/// client.suspend();
/// let after = client.session().wait_for_change(before.epoch, None); // returns at once here
/// assert_eq!(after.state, ConnectionState::Suspended);
/// client.resume();
/// assert_eq!(client.session().state(), ConnectionState::Reconnected);
/// assert_eq!(client.session().snapshot().losses, 0); // same session: no lock was lost
/// ```
pub struct Session {
    inner: Mutex<Inner>,
    changed: Condvar,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Session").field(&self.snapshot()).finish()
    }
}

impl Session {
    /// A session state machine starting in `state` (backends start in `Connected` once the
    /// first session exists).
    pub(crate) fn new(state: ConnectionState, session_id: Option<i64>) -> Session {
        Session {
            inner: Mutex::new(Inner {
                snapshot: SessionSnapshot {
                    state,
                    epoch: 0,
                    session_id,
                    losses: 0,
                },
                next_listener: 0,
                listeners: BTreeMap::new(),
                quorum: QuorumClock::default(),
                prove: None,
                event_wakers: WakerSet::default(),
            }),
            changed: Condvar::new(),
        }
    }

    /// As [`Self::new`], for a backend that proves its sessions to the quorum: until its first
    /// proof the session reads as unproven (stale, `safe_until` past), never as a backend
    /// without proofs.
    pub(crate) fn proving(state: ConnectionState, session_id: Option<i64>) -> Session {
        let session = Session::new(state, session_id);
        session.inner.lock().quorum = QuorumClock::expecting_proofs();
        session
    }

    /// State, epoch, session id and loss count, read together.
    pub fn snapshot(&self) -> SessionSnapshot {
        self.inner.lock().snapshot
    }

    /// The current state.
    pub fn state(&self) -> ConnectionState {
        self.snapshot().state
    }

    /// The connection epoch: changes on every transition.
    pub fn epoch(&self) -> u64 {
        self.snapshot().epoch
    }

    /// The current session id, when known.
    pub fn session_id(&self) -> Option<i64> {
        self.snapshot().session_id
    }

    /// Registers a listener called (on a backend thread) after every transition.
    pub fn subscribe(
        &self,
        listener: impl Fn(&SessionSnapshot) + Send + Sync + 'static,
    ) -> ListenerId {
        let mut inner = self.inner.lock();
        let id = inner.next_listener;
        inner.next_listener += 1;
        inner.listeners.insert(id, Arc::new(listener));
        ListenerId(id)
    }

    /// Removes a listener; unknown ids are ignored.
    pub fn unsubscribe(&self, id: ListenerId) {
        self.inner.lock().listeners.remove(&id.0);
    }

    /// Blocks until the epoch differs from `epoch` or the deadline passes; returns the
    /// snapshot then.
    pub fn wait_for_change(&self, epoch: u64, deadline: Option<Instant>) -> SessionSnapshot {
        self.wait_while(deadline, |s| s.epoch == epoch)
    }

    /// Blocks until the state is connected (Connected, Reconnected or ReadOnly), the client is
    /// closed, or the deadline passes; returns the snapshot then.
    pub fn wait_until_connected(&self, deadline: Option<Instant>) -> SessionSnapshot {
        self.wait_while(deadline, |s| {
            !s.state.is_connected() && s.state != ConnectionState::Closed
        })
    }

    fn wait_while(
        &self,
        deadline: Option<Instant>,
        blocked: impl Fn(&SessionSnapshot) -> bool,
    ) -> SessionSnapshot {
        let mut inner = self.inner.lock();
        // A cancelled acquire on this thread is past every deadline (`primitives::cancel`).
        while blocked(&inner.snapshot) && !crate::primitives::cancel::requested() {
            match deadline {
                Some(d) => {
                    if self.changed.wait_until(&mut inner, d).timed_out() {
                        break;
                    }
                }
                None => self.changed.wait(&mut inner),
            }
        }
        inner.snapshot
    }

    /// Wakes every thread waiting in [`Self::wait_for_change`] or [`Self::wait_until_connected`]
    /// without a transition: a cancelled acquire's wait (`primitives::cancel`) then returns, the
    /// others wait on. Under the lock, so a waiter between its check and its wait is reached.
    pub(crate) fn wake(&self) {
        let _inner = self.inner.lock();
        self.changed.notify_all();
    }

    /// Until when a holder may rely on a lock of this session: the earliest moment the
    /// ensemble's leader can have expired the session, `T` after the last contact the
    /// leader is proven to have renewed it. `None` when the backend keeps no such proof (the
    /// in-memory ensemble, the `zookeeper`-crate backend); [`NativeClient`] keeps it while the
    /// session holds or waits for a lock (see the crate docs, "What a holder is promised").
    ///
    /// [`NativeClient`]: crate::client::native::NativeClient
    pub fn safe_until(&self) -> Option<Instant> {
        let safe_until = self.inner.lock().quorum.safe_until();
        safe_until.map(BootInstant::to_instant)
    }

    /// Whether the last proven renewal is `2T/3` old or older (false without a proof): a
    /// holder is `Suspect` then, as when the link is down.
    pub(crate) fn quorum_stale(&self) -> bool {
        self.inner.lock().quorum.is_stale(BootInstant::now())
    }

    /// When the proof turns stale (`2T/3` after it), if it is fresh now: a wait on a held
    /// node wakes then, as no transition may come.
    pub(crate) fn quorum_stale_at(&self) -> Option<Instant> {
        let stale_at = self.inner.lock().quorum.stale_at(BootInstant::now());
        stale_at.map(BootInstant::to_instant)
    }

    /// Records that the leader renewed the session at `at` or later (backends only), under
    /// the negotiated timeout `timeout`; wakes the acquires that wait for a fresh proof.
    pub(crate) fn confirm_quorum(&self, at: BootInstant, timeout: Duration) {
        let mut inner = self.inner.lock();
        if inner.quorum.confirm(at, timeout, BootInstant::now()) {
            self.changed.notify_all();
            let wakers = inner.event_wakers.take();
            drop(inner);
            wake(wakers);
        }
    }

    /// Whether a wait for a fresh proof by the holder of a node made in the session of
    /// `losses` is over: `Some(fresh)` once the proof is fresh, the session is another or the
    /// client closed; `None` while it must go on (what an acquire granted on a stale proof waits on).
    pub(crate) fn quorum_wait_over(&self, losses: u64) -> Option<bool> {
        let inner = self.inner.lock();
        let stale = inner.quorum.is_stale(BootInstant::now());
        let waits = stale
            && inner.snapshot.losses == losses
            && inner.snapshot.state != ConnectionState::Closed;
        (!waits).then_some(!stale)
    }

    /// A future waits for the next event that is not a transition (a proof confirmed, the
    /// link ready to send): `waker` is woken by it (registered under `key`, as
    /// [`WakerSet::register`]); a transition wakes it through a session listener.
    pub(crate) fn register_event_waker(&self, key: &mut Option<u64>, waker: &Waker) {
        self.inner.lock().event_wakers.register(key, waker);
    }

    /// Removes a waker registered with [`Self::register_event_waker`].
    pub(crate) fn remove_event_waker(&self, key: Option<u64>) {
        self.inner.lock().event_wakers.remove(key);
    }

    /// The backend's link is ready to send (after the transition it reported, once its
    /// set-up requests went out): wakes the futures waiting for it.
    pub(crate) fn link_ready(&self) {
        let wakers = self.inner.lock().event_wakers.take();
        wake(wakers);
    }

    /// Whether the backend should keep proving the session to the quorum now, and how long
    /// it has gone unproven (counted from when proving last started, if later).
    pub(crate) fn quorum_demand(&self) -> (bool, Option<Duration>) {
        let inner = self.inner.lock();
        let now = BootInstant::now();
        (
            inner.quorum.wants_proof(now),
            inner.quorum.unproven_for(now),
        )
    }

    /// Sets the backend's wake-up, run (outside the lock) when proving starts.
    pub(crate) fn on_proving(&self, wake: impl Fn() + Send + Sync + 'static) {
        self.inner.lock().prove = Some(Arc::new(wake));
    }

    /// One more holder or waiter of a lock in this session, until [`Self::end_interest`].
    pub(crate) fn begin_interest(&self) {
        let wake = {
            let mut inner = self.inner.lock();
            let starts = inner.quorum.begin_interest(BootInstant::now());
            starts.then(|| inner.prove.clone()).flatten()
        };
        if let Some(wake) = wake {
            wake();
        }
    }

    /// One holder or waiter fewer.
    pub(crate) fn end_interest(&self) {
        self.inner.lock().quorum.end_interest(BootInstant::now());
    }

    /// Reports a transition (backends only). `Lost` and `Closed` count as losses; a new
    /// `session_id` replaces the old one (`None` keeps it). Closed is terminal: later
    /// transitions are ignored. Returns false when the transition was ignored.
    pub(crate) fn transition(&self, state: ConnectionState, session_id: Option<i64>) -> bool {
        let (snapshot, listeners) = {
            let mut inner = self.inner.lock();
            let s = &mut inner.snapshot;
            if s.state == ConnectionState::Closed {
                return false;
            }
            // Losing a session that is already lost is not a second loss.
            if matches!(state, ConnectionState::Lost | ConnectionState::Closed)
                && s.state != ConnectionState::Lost
            {
                s.losses += 1;
            }
            s.state = state;
            s.epoch += 1;
            if session_id.is_some() {
                s.session_id = session_id;
            }
            let snapshot = *s;
            let listeners: Vec<Listener> = inner.listeners.values().cloned().collect();
            (snapshot, listeners)
        };
        self.changed.notify_all();
        log::debug!("session transition: {:?}", snapshot);
        for listener in listeners {
            if catch_unwind(AssertUnwindSafe(|| listener(&snapshot))).is_err() {
                log::error!("a session listener panicked; ignored");
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ZooKeeper prints session ids in hex (`0x…`); so does every log line and `Debug` here.
    #[test]
    fn a_snapshot_shows_its_session_id_in_hex() {
        let snapshot = SessionSnapshot {
            state: ConnectionState::Connected,
            epoch: 3,
            session_id: Some(0x1000_0099_3cc0_0000),
            losses: 1,
        };
        let text = format!("{snapshot:?}");
        assert!(text.contains("0x100000993cc0000"), "{text}");
        assert!(
            !text.contains(&0x1000_0099_3cc0_0000_i64.to_string()),
            "{text}"
        );
        let none = SessionSnapshot {
            session_id: None,
            ..snapshot
        };
        assert!(format!("{none:?}").contains("session_id: none"), "{none:?}");
    }
}
