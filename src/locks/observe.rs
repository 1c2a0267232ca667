//! Seeing locks from outside: [`LockObserver`] (the counterpart of Curator's `TracerDriver`)
//! and `Observe`, the one place the engine reports a lock's life from.
//!
//! Rules kept here:
//! - **One reporter.** Every event goes through `Observe`: the engine's attempt (queued,
//!   acquired, timed out, cancelled, failed), the semaphore's lease loop (its grant and its wait for
//!   room), the release of a hold (`cleanup::release_held`, which every recipe's release and
//!   every guard's drop ends in) and the state of a held node (`HeldNode`: suspect, held
//!   again, lost, as the library observes them). Recipes report nothing themselves.
//! - **Each event is a debug log line** under the module path (`zk_locks::locks::observe`,
//!   so `RUST_LOG=zk_locks::locks=debug` shows them) naming the lock, the node and the
//!   session id in hex (as ZooKeeper prints it), observer or not.
//! - **No observer, no cost.** Without an observer (and with this module's debug log off)
//!   a grant is an `Option` check and a log-level check: the hold keeps no reporter and
//!   records no time, so its later events cost one `Option` check each; nothing is
//!   allocated or formatted. A hold granted while nobody listened reports nothing later.
//! - **Per hold, each event once, in order**: `queued` (once per node that waits; a
//!   semaphore's admission wait and its wait for room count as one) before `acquired`; `suspect`/`held_again` as seen; `lost` at most once (also reported on
//!   release when the hold was lost and nobody looked); `released` once.
//! - **An acquire ends as it returns**: `timed_out` for "not acquired" at its deadline,
//!   `cancelled` for `Error::Cancelled` (the thread's token is cancelled: `gave_up` asks
//!   `locks::cancel`) and for an acquire future dropped before it was ready, `failed` for
//!   any other error.
//! - **User code never derails the library.** Every call into the observer is made under
//!   `catch_unwind` (`tell`): a panic is logged and the event dropped, so an acquire still
//!   returns (and records) its hold and a release still deletes its node; no observer call
//!   runs on a thread that wakes waiters.

use std::any::Any;
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use crate::error::Error;
use crate::session::session_hex;

// The observer trait, its event and the client options' slot are beneath the client and the
// locks (`primitives/observer.rs`): the client carries the observer, the engine reports to it.
pub(crate) use crate::primitives::observer::ObserverSlot;
pub use crate::primitives::observer::{LockEvent, LockObserver};

use super::participants::ParticipantKind;

/// The message a panic was raised with, when it is a string.
fn panic_message(panic: &(dyn Any + Send)) -> &str {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(s), _) => s,
        (_, Some(s)) => s,
        _ => "no message",
    }
}

thread_local! {
    /// How many `queued` events this thread reported: a semaphore whose admission waited
    /// does not report its lease's wait for room again (one `queued` per queue entry).
    static QUEUED: Cell<u64> = const { Cell::new(0) };
}

/// The number of `queued` events this thread has reported so far.
pub(crate) fn queued_mark() -> u64 {
    QUEUED.get()
}

/// Puts `count` as the calling thread's count of `queued` events and returns the count it
/// replaces: a future carries its own count across its polls (`internals::context`).
pub(crate) fn swap_queued(count: u64) -> u64 {
    QUEUED.replace(count)
}

/// What reports the events of one recipe's nodes: its observer (or none) and its name.
#[derive(Clone)]
pub(crate) struct Observe {
    observer: Option<Arc<dyn LockObserver>>,
    lock: Arc<str>,
    kind: ParticipantKind,
    /// False for a semaphore's admission mutex: its wait is the semaphore's (`queued`), its
    /// hold is not a lock the user took (nothing else is reported).
    grants: bool,
}

impl std::fmt::Debug for Observe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observe")
            .field("lock", &self.lock)
            .field("kind", &self.kind)
            .field("observer", &self.observer.is_some())
            .field("grants", &self.grants)
            .finish()
    }
}

impl Observe {
    pub(crate) fn new(
        observer: Option<Arc<dyn LockObserver>>,
        lock: &str,
        kind: ParticipantKind,
    ) -> Observe {
        Observe {
            observer,
            lock: lock.into(),
            kind,
            grants: true,
        }
    }

    /// The same, reporting only `queued` (a semaphore's admission).
    pub(crate) fn queue_only(mut self) -> Observe {
        self.grants = false;
        self
    }

    /// Whether anyone listens: an observer, or a logger that takes this module's debug
    /// lines. A hold granted while nobody listens reports nothing later either.
    pub(crate) fn listened(&self) -> bool {
        self.observer.is_some() || log::log_enabled!(log::Level::Debug)
    }

    pub(crate) fn observer(&self) -> Option<&Arc<dyn LockObserver>> {
        self.observer.as_ref()
    }

    /// Whether holds are reported (false: only `queued`).
    pub(crate) fn grants(&self) -> bool {
        self.grants
    }

    pub(crate) fn kind(&self) -> ParticipantKind {
        self.kind
    }

    pub(crate) fn lock(&self) -> &str {
        &self.lock
    }

    /// Calls the observer, if any. A panic in it is caught and logged (`error`) and the
    /// event is dropped: the library goes on as if the observer had returned, so a buggy
    /// observer never leaves a node that nobody owns (an `acquired` that unwound would have
    /// left a granted node unrecorded; a `released`, a hold forgotten and not deleted).
    fn tell(&self, event: &str, call: impl FnOnce(&dyn LockObserver)) {
        let Some(o) = &self.observer else {
            return;
        };
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| call(o.as_ref()))) {
            log::error!(
                "{} {}: the lock observer panicked in `{event}` ({}); the event is dropped",
                self.kind,
                self.lock,
                panic_message(panic.as_ref())
            );
        }
    }

    fn event<'a>(&'a self, node: &'a str, session_id: Option<i64>) -> LockEvent<'a> {
        LockEvent {
            lock: &self.lock,
            kind: self.kind,
            node,
            session_id,
        }
    }

    pub(crate) fn queued(&self, node: &str, session_id: Option<i64>) {
        QUEUED.set(QUEUED.get().wrapping_add(1));
        log::debug!(
            "{} {}: queued as {node} (session {})",
            self.kind,
            self.lock,
            session_hex(session_id)
        );
        self.tell("queued", |o| o.queued(&self.event(node, session_id)));
    }

    pub(crate) fn acquired(&self, node: &str, session_id: Option<i64>, wait: Duration) {
        log::debug!(
            "{} {}: acquired as {node} (session {}) after {wait:?}",
            self.kind,
            self.lock,
            session_hex(session_id)
        );
        self.tell("acquired", |o| {
            o.acquired(&self.event(node, session_id), wait)
        });
    }

    /// An acquire that ended without the lock and without an error, after `wait`: cancelled
    /// when the calling thread's token is (the call returns `Error::Cancelled`,
    /// `locks::cancel::run`), else timed out.
    pub(crate) fn gave_up(&self, wait: Duration) {
        match super::cancel::requested() {
            true => self.cancelled(wait),
            false => self.timed_out(wait),
        }
    }

    fn timed_out(&self, wait: Duration) {
        log::debug!("{} {}: timed out after {wait:?}", self.kind, self.lock);
        self.tell("timed_out", |o| o.timed_out(&self.lock, self.kind, wait));
    }

    /// An acquire given up by its caller: the cancel of a token, or its future dropped.
    pub(crate) fn cancelled(&self, wait: Duration) {
        log::debug!("{} {}: cancelled after {wait:?}", self.kind, self.lock);
        self.tell("cancelled", |o| o.cancelled(&self.lock, self.kind, wait));
    }

    pub(crate) fn failed(&self, error: &Error) {
        log::debug!("{} {}: acquire failed: {error}", self.kind, self.lock);
        self.tell("failed", |o| o.failed(&self.lock, self.kind, error));
    }

    pub(crate) fn released(&self, node: &str, session_id: Option<i64>, held: Duration) {
        log::debug!(
            "{} {}: released {node} (session {}) after {held:?}",
            self.kind,
            self.lock,
            session_hex(session_id)
        );
        self.tell("released", |o| {
            o.released(&self.event(node, session_id), held)
        });
    }

    pub(crate) fn suspect(&self, node: &str, session_id: Option<i64>) {
        log::debug!(
            "{} {}: {node} (session {}) suspect",
            self.kind,
            self.lock,
            session_hex(session_id)
        );
        self.tell("suspect", |o| o.suspect(&self.event(node, session_id)));
    }

    pub(crate) fn held_again(&self, node: &str, session_id: Option<i64>) {
        log::debug!(
            "{} {}: {node} (session {}) held again",
            self.kind,
            self.lock,
            session_hex(session_id)
        );
        self.tell("held_again", |o| {
            o.held_again(&self.event(node, session_id))
        });
    }

    pub(crate) fn lost(&self, node: &str, session_id: Option<i64>) {
        log::debug!(
            "{} {}: {node} (session {}) lost",
            self.kind,
            self.lock,
            session_hex(session_id)
        );
        self.tell("lost", |o| o.lost(&self.event(node, session_id)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_print_as_zookeeper_prints_them() {
        assert_eq!(
            session_hex(Some(0x1000_23a8_b2c0_0000)),
            "0x100023a8b2c00000"
        );
        assert_eq!(session_hex(Some(-1)), "0xffffffffffffffff");
        assert_eq!(session_hex(None), "none");
    }
}
