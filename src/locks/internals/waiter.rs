//! One waiter's private wake-up: its watch and session changes signal it, and only its own
//! thread (or its own future) waits on it (no herd).

use std::task::Waker;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use crate::client::EventType;

/// What one waiter is told by its watch and by session changes.
#[derive(Default)]
struct WakeState {
    /// Which watch is current: a watch left armed by an earlier round (after a reconnect that
    /// kept watches) must not pass for the deletion of the node we watch now.
    round: u64,
    /// The node watched in this round was deleted.
    deleted: bool,
    /// The watch of this round fired (any event): it is spent.
    fired: bool,
    /// Anything happened (data change, deletion, session transition): re-check.
    signalled: bool,
    /// The future waiting on it, if a future waits: woken where the `Condvar` is notified.
    waker: Option<Waker>,
}

/// One waiter's private wake-up: only this waiter's thread ever waits on it (no herd).
#[derive(Default)]
pub(crate) struct Waiter {
    state: Mutex<WakeState>,
    cond: Condvar,
}

impl Waiter {
    /// Wakes the waiter; `deleted_in_round` is the round of a watch that saw its node deleted.
    pub(crate) fn signal(&self, deleted_in_round: Option<u64>) {
        let mut s = self.state.lock();
        s.signalled = true;
        s.deleted |= deleted_in_round == Some(s.round);
        self.cond.notify_one();
        let waker = s.waker.clone();
        drop(s);
        // Outside the lock: a waker may run its executor's code.
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// A future waits on this waiter: `waker` is woken by every later signal.
    pub(crate) fn set_waker(&self, waker: &Waker) {
        let mut s = self.state.lock();
        if !s.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            s.waker = Some(waker.clone());
        }
    }

    /// Whether the node watched in this round was deleted (what [`Self::wait`] returns).
    pub(crate) fn deleted(&self) -> bool {
        self.state.lock().deleted
    }

    /// Whether a signal came since the last [`Self::next_round`] (a future's poll: look again).
    pub(crate) fn signalled(&self) -> bool {
        self.state.lock().signalled
    }

    /// Wakes the waiter for the watch set in `round`, which saw `event`.
    pub(super) fn watch_fired(&self, round: u64, event: EventType) {
        let mut s = self.state.lock();
        s.signalled = true;
        if s.round == round {
            s.fired = true;
            s.deleted |= event == EventType::NodeDeleted;
        }
        self.cond.notify_one();
        let waker = s.waker.clone();
        drop(s);
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Starts a new round (before the listing it acts on) and returns its number.
    pub(crate) fn next_round(&self) -> u64 {
        let mut s = self.state.lock();
        s.round += 1;
        s.deleted = false;
        s.fired = false;
        s.signalled = false;
        s.round
    }

    /// Goes back to waiting in the same round, unless this round's watch fired: `None` when
    /// the watch is still armed (a later signal wakes [`Self::wait`] again), else whether it
    /// saw its node deleted. The watch may fire between [`Self::wait`] returning for a session
    /// transition and this call: its deletion then counts, read under the same lock.
    pub(super) fn keep_waiting(&self) -> Option<bool> {
        let mut s = self.state.lock();
        if s.fired {
            return Some(s.deleted);
        }
        s.signalled = false;
        None
    }

    /// Blocks until signalled in this round, the deadline passes or the acquire is cancelled
    /// (`locks::cancel`, which signals the waiter); true when the watched node was deleted in
    /// this round.
    pub(crate) fn wait(&self, deadline: Option<Instant>) -> bool {
        let mut wake = self.state.lock();
        while !wake.signalled && !crate::locks::cancel::requested() {
            match deadline {
                Some(d) => {
                    if self.cond.wait_until(&mut wake, d).timed_out() {
                        break;
                    }
                }
                None => self.cond.wait(&mut wake),
            }
        }
        wake.deleted
    }
}
