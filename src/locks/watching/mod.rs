//! Waiting on held nodes: the watch a waited-on holder keeps on its own node, and the wait
//! loop every guard kind shares (`HeldNode`, `LockGuard`, `Lease`); `awaited.rs`: the same
//! wait as a future (no thread waits; the watch is armed by a submitted request).
//!
//! Rules kept here:
//! - **Only a waited-on holder watches.** Nothing is armed at acquisition: the uncontended
//!   acquire+release cycle sends no more requests than before. The first wait arms one
//!   `get_data` watch on the node (which also verifies it: gone or another session's means
//!   `Lost`); later waits reuse it while the server keeps it (until it fires, or until a
//!   reconnect on a backend that does not restore watches).
//! - **`get_data`, never `exists`** (CURATOR-107): a node already gone answers `NoNode`
//!   (`Lost`), and no watch waits on a path that will never come back.
//! - **A deletion ends the wait.** The watch's callback records a `NodeDeleted` (the node is
//!   then `Lost` for every reader of the state) and wakes every waiter of the node; any other
//!   event (a data change: a revocation request) only spends the watch, and the waiter arms it
//!   again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::client::{
    EventType, Request, Response, SharedClient, Submission, WatchedEvent, ZkError,
};
use crate::session::ListenerId;

mod awaited;

pub use awaited::WhileHeld;

use super::held::{HeldNode, LockState};
use super::internals::{past, wake_on_session_change, Waiter};

/// How long a wait sits on a failed verification or arming (a timed-out request while
/// connected: no session transition may come to wake it) before trying again.
const TRY_AGAIN_AFTER: Duration = Duration::from_millis(250);

/// The watch a held node keeps on itself while someone waits on it.
#[derive(Debug, Default)]
pub(crate) struct NodeWatch {
    /// A watch of ours saw the node deleted.
    deleted: AtomicBool,
    slot: Mutex<Slot>,
}

#[derive(Debug, Default)]
struct Slot {
    /// The watch the server holds for us: its number and the session epoch it was armed in.
    armed: Option<(u64, u64)>,
    /// The number of the last watch armed.
    last: u64,
    /// The last watch that fired (a reply can come after its watch fired).
    fired: u64,
    waiters: Vec<Weak<Waiter>>,
}

/// What arming found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Armed {
    /// The node exists, is ours, and a watch on it is armed.
    Yes,
    /// The node is gone or not ours.
    Lost,
    /// The request failed (link trouble): try again later.
    Failed,
}

impl NodeWatch {
    /// Whether a watch of ours saw the node deleted.
    pub(crate) fn saw_deletion(&self) -> bool {
        self.deleted.load(Ordering::SeqCst)
    }

    fn register(&self, waiter: &Arc<Waiter>) {
        let mut slot = self.slot.lock();
        slot.waiters.retain(|w| w.strong_count() > 0);
        if !slot
            .waiters
            .iter()
            .any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(waiter)))
        {
            slot.waiters.push(Arc::downgrade(waiter));
        }
    }

    fn unregister(&self, waiter: &Arc<Waiter>) {
        self.slot
            .lock()
            .waiters
            .retain(|w| w.strong_count() > 0 && !std::ptr::eq(w.as_ptr(), Arc::as_ptr(waiter)));
    }

    /// The number of a new watch to arm in `epoch`, or `None` when one is armed already (kept
    /// across reconnects only where the backend restores watches).
    fn to_arm(&self, epoch: u64, restores: bool) -> Option<u64> {
        let mut slot = self.slot.lock();
        match slot.armed {
            Some((_, armed_in)) if restores || armed_in == epoch => None,
            _ => {
                slot.last += 1;
                Some(slot.last)
            }
        }
    }

    /// The reply to watch `number`'s `get_data` said it is armed (unless it fired already).
    fn armed(&self, number: u64, epoch: u64) {
        let mut slot = self.slot.lock();
        if slot.fired < number {
            slot.armed = Some((number, epoch));
        }
    }

    /// Watch callback: records the event and wakes the node's waiters.
    fn fired(&self, number: u64, event: &WatchedEvent) {
        if event.event_type == EventType::NodeDeleted {
            self.deleted.store(true, Ordering::SeqCst);
        }
        let mut slot = self.slot.lock();
        slot.fired = slot.fired.max(number);
        if slot.armed.is_some_and(|(n, _)| n == number) {
            slot.armed = None;
        }
        for w in slot.waiters.iter().filter_map(Weak::upgrade) {
            w.signal(None);
        }
    }
}

impl HeldNode {
    /// Makes sure a watch on the node is armed (one `get_data` when none is), with `waiter`
    /// woken by its events.
    fn arm(&self, waiter: &Arc<Waiter>) -> Armed {
        let watch = self.watch().clone();
        watch.register(waiter);
        let client = self.client();
        let epoch = client.session().epoch();
        let Some(number) = watch.to_arm(epoch, client.restores_watches()) else {
            return Armed::Yes;
        };
        let w = Arc::downgrade(&watch);
        let watcher = Box::new(move |event: WatchedEvent| {
            if let Some(w) = w.upgrade() {
                w.fired(number, &event);
            }
        });
        // The callback only records and signals: it runs on the reader thread, so a user's
        // callback blocking the event thread does not hide a deletion from the holder.
        let read = crate::client::native::watches::wake_only(|| {
            client.get_data(self.path(), Some(watcher))
        });
        self.arm_answered(
            &watch,
            number,
            epoch,
            read.map(|(_, stat)| stat.ephemeral_owner),
        )
    }

    /// [`Self::arm`] without waiting (a future's): the `get_data` is submitted
    /// ([`ZkClient::submit`](crate::ZkClient::submit)) and its outcome goes to `done`, then
    /// `waiter` is signalled. False when a watch is armed already (nothing sent).
    pub(crate) fn arm_submitted(
        self: &Arc<Self>,
        waiter: &Arc<Waiter>,
        done: impl FnOnce(Armed) + Send + 'static,
    ) -> bool {
        let watch = self.watch().clone();
        watch.register(waiter);
        let client = self.client();
        let epoch = client.session().epoch();
        let Some(number) = watch.to_arm(epoch, client.restores_watches()) else {
            return false;
        };
        let w = Arc::downgrade(&watch);
        let watcher = Box::new(move |event: WatchedEvent| {
            if let Some(w) = w.upgrade() {
                w.fired(number, &event);
            }
        });
        let node = Arc::downgrade(self);
        let signal = Arc::downgrade(waiter);
        let request = Request::GetData {
            path: self.path().to_string(),
        };
        client.submit(
            vec![Submission::watched(request, watcher).wake_only()],
            Box::new(move |mut results| {
                let read = match results.pop() {
                    Some(Ok(Response::GetData(_, stat))) => Ok(stat.ephemeral_owner),
                    Some(Err(code)) => Err(code),
                    _ => Err(ZkError::MarshallingError),
                };
                if let Some(node) = node.upgrade() {
                    let watch = node.watch().clone();
                    done(node.arm_answered(&watch, number, epoch, read));
                }
                if let Some(waiter) = signal.upgrade() {
                    waiter.signal(None);
                }
            }),
        );
        true
    }

    /// What the `get_data` that arms watch `number` (in `epoch`) found: the node's owner, or
    /// why it failed. Recorded on the node (verified, or lost) and the watch.
    fn arm_answered(
        &self,
        watch: &NodeWatch,
        number: u64,
        epoch: u64,
        read: std::result::Result<i64, ZkError>,
    ) -> Armed {
        match read {
            Ok(owner) if self.owned_by_us(owner) => {
                watch.armed(number, epoch);
                self.verified_in(epoch);
                Armed::Yes
            }
            Ok(_) | Err(ZkError::NoNode) | Err(ZkError::SessionExpired) | Err(ZkError::Closed) => {
                self.mark_lost();
                Armed::Lost
            }
            Err(_) => Armed::Failed,
        }
    }
}

/// Blocks while `waiting(state)`, the state being the worst over `nodes` (`Lost` when there
/// are none), or until the timeout passes; returns the state then. Wakes on every session
/// change of the nodes' clients (a multi-lock can span clients) and on the nodes' own
/// watches, armed here. Past the deadline no node is read, except on the wait's first look.
pub(crate) fn wait_on(
    nodes: &[&HeldNode],
    timeout: Option<Duration>,
    waiting: impl Fn(LockState) -> bool,
) -> LockState {
    let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
    let waiter = Arc::new(Waiter::default());
    // A wait run under a cancel token (a leadership's) ends when it is cancelled.
    let _cancel = super::cancel::wake_on_cancel(&waiter);
    let mut clients: Vec<(&SharedClient, ListenerId)> = Vec::new();
    for node in nodes {
        let client = node.client();
        if !clients.iter().any(|(c, _)| Arc::ptr_eq(c, client)) {
            clients.push((client, wake_on_session_change(client, &waiter)));
        }
    }
    let mut first = true;
    let state = loop {
        // The round starts before the state is read and the watches armed: a change landing
        // in between ends the wait at once instead of being missed until the next one.
        waiter.next_round();
        // Each node is read only while the deadline has not passed (a read that ended late
        // keeps the next node from being read), except on the first look.
        let states: Vec<LockState> = nodes
            .iter()
            .map(|n| {
                let ask = std::mem::take(&mut first) || !past(deadline, Instant::now());
                n.state_asking(ask)
            })
            .collect();
        let state = worst(&states);
        if !waiting(state) || past(deadline, Instant::now()) {
            break state;
        }
        // Someone waits: each node that looks held watches itself.
        let mut try_again = false;
        let mut lost = false;
        for (node, s) in nodes.iter().zip(&states) {
            if *s == LockState::Held {
                match node.arm(&waiter) {
                    Armed::Yes => {}
                    Armed::Lost => lost = true,
                    Armed::Failed => try_again = true,
                }
            }
        }
        if lost {
            continue;
        }
        // A `Suspect` left by a verification that failed while connected, or a watch that
        // could not be armed, has no transition to come: try again after a pause.
        let connected = clients
            .iter()
            .any(|(c, _)| c.session().state().is_connected());
        try_again |= state == LockState::Suspect && connected;
        let wake = match try_again {
            true => {
                let soon = Instant::now() + TRY_AGAIN_AFTER;
                Some(deadline.map_or(soon, |d| d.min(soon)))
            }
            false => deadline,
        };
        waiter.wait(look_again_by(wake, clients.iter().map(|(c, _)| *c)));
    };
    for (client, id) in clients {
        client.session().unsubscribe(id);
    }
    for node in nodes {
        node.watch().unregister(&waiter);
    }
    state
}

/// The earlier of `wake` and the moment a proof of one of `clients`' sessions turns stale: a
/// stale proof makes a holder `Suspect` with no transition (`session/quorum.rs`), so a wait
/// looks again then.
pub(super) fn look_again_by<'a>(
    wake: Option<Instant>,
    clients: impl Iterator<Item = &'a SharedClient>,
) -> Option<Instant> {
    let stale_at = clients.filter_map(|c| c.session().quorum_stale_at()).min();
    match (wake, stale_at) {
        (Some(w), Some(s)) => Some(w.min(s)),
        (w, s) => w.or(s),
    }
}

/// The worst of `states`: `Lost` over `Suspect` over `Held`; `Lost` when there are none.
pub(super) fn worst(states: &[LockState]) -> LockState {
    if states.is_empty() || states.contains(&LockState::Lost) {
        LockState::Lost
    } else if states.contains(&LockState::Suspect) {
        LockState::Suspect
    } else {
        LockState::Held
    }
}
