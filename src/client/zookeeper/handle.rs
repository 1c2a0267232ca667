//! One crate handle: opening it, its state listener, and retiring it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use ::zookeeper as zk;

use super::convert::map_error;
use super::options::Target;
use crate::client::{ZkError, ZkResult};
use crate::session::{ConnectionState, Session};

/// What the crate's state listener last reported for one handle, written by the listener
/// (which must only record and notify) and read by the supervisor.
pub(super) struct LinkSignals {
    pub(super) state: AtomicU8,
    /// Incremented on every `Connecting`/`NotConnected`: a count, so a quick
    /// disconnect-reconnect is never coalesced away (each one lost every watch).
    pub(super) disconnects: AtomicU64,
    /// A call got `SessionExpired` from the server.
    pub(super) expired: AtomicBool,
}

pub(super) const LINK_CONNECTING: u8 = 0;
pub(super) const LINK_CONNECTED: u8 = 1;
pub(super) const LINK_CLOSED: u8 = 2;

/// One crate handle and its signals. Replaced as a whole after `Closed` or `Lost`.
pub(super) struct Conn {
    pub(super) zk: zk::ZooKeeper,
    pub(super) generation: u64,
    pub(super) signals: Arc<LinkSignals>,
}

/// Wakes the supervisor without flooding its channel (the crate can emit thousands of state
/// changes per second while a server refuses connections).
#[derive(Clone)]
pub(super) struct Waker {
    pub(super) pending: Arc<AtomicBool>,
    pub(super) tx: mpsc::Sender<()>,
    /// The client's session, so that a link going down is reported at once (see the listener).
    pub(super) session: Arc<Session>,
}

impl Waker {
    pub(super) fn wake(&self) {
        if !self.pending.swap(true, Ordering::SeqCst) {
            let _ = self.tx.send(());
        }
    }
}

pub(super) fn open_crate_handle(
    target: &Target,
    timeout: Duration,
    generation: u64,
    waker: &Waker,
) -> ZkResult<Conn> {
    let connected = catch_unwind(|| {
        zk::ZooKeeper::connect(&target.crate_hosts, timeout, |_: zk::WatchedEvent| {})
    });
    let zk = match connected {
        Ok(Ok(zk)) => zk,
        Ok(Err(e)) => return Err(map_error(e)),
        Err(_) => {
            log::warn!("zk-locks: the zookeeper crate panicked while connecting");
            return Err(ZkError::ConnectionLoss);
        }
    };
    let signals = Arc::new(LinkSignals {
        state: AtomicU8::new(LINK_CONNECTING),
        disconnects: AtomicU64::new(0),
        expired: AtomicBool::new(false),
    });
    let (listener_signals, listener_waker) = (signals.clone(), waker.clone());
    // Runs on the crate's IO thread with its listener mutex held: record and notify only.
    // Calling the client from here would deadlock the IO thread.
    zk.add_listener(move |state: zk::ZkState| {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            let link = match state {
                zk::ZkState::Connected | zk::ZkState::ConnectedReadOnly => LINK_CONNECTED,
                zk::ZkState::Closed => LINK_CLOSED,
                _ => {
                    listener_signals.disconnects.fetch_add(1, Ordering::SeqCst);
                    // Reported here, on the crate's IO thread, before it reads anything from a
                    // new connection: so the epoch has changed before any watch event of the
                    // new connection (a stale closure of an old session, say) can reach a
                    // waiter, which is what makes the lock's hand-off without a re-list safe.
                    // Only a state change with waiter notifications; no client call.
                    if listener_waker.session.state().is_connected() {
                        listener_waker
                            .session
                            .transition(ConnectionState::Suspended, None);
                    }
                    LINK_CONNECTING
                }
            };
            listener_signals.state.store(link, Ordering::SeqCst);
            listener_waker.wake();
        }));
    });
    Ok(Conn {
        zk,
        generation,
        signals,
    })
}

/// Drops a crate handle on a detached thread: the crate's `Drop` sends closeSession and waits
/// for the answer, forever on a frozen link.
pub(super) fn drop_detached(conn: Arc<Conn>) {
    let spawned = std::thread::Builder::new()
        .name("zk-locks-drop".into())
        .spawn(move || drop(conn));
    if let Err(e) = spawned {
        log::error!("zk-locks: could not spawn a thread to drop a dead handle ({e}); leaking it");
    }
}
