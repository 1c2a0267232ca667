//! Fault injection: the one-shot [`Fault`]s and the client's fault API (link down and back,
//! a session given up by the client, session expiry, delayed watch delivery, a hook before
//! each request).

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::client::MemoryClient;
use super::watches::Reconnect;
use crate::client::counting::Op;
use crate::session::ConnectionState;

/// When an injected connection loss strikes, relative to applying the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultTiming {
    /// The request never reaches the server: it is not applied.
    BeforeApply,
    /// The server applies the request but the reply is lost (e.g. the sequential node exists
    /// and the caller does not know its name). A watch the read set goes with the connection
    /// (a client re-registers only watches whose replies it got).
    AfterApply,
    /// The client's session expires (its ephemerals go), the link comes back at once with a
    /// new session, and the request is applied and answered in that new session. The client
    /// does not report the change (its [`Session`](crate::session::Session) still shows the old session, no `Lost`) until
    /// [`MemoryClient::report_session_change`] or its next reconnect: requests made meanwhile
    /// run in the new session too. This is what the `zookeeper` crate can do when it opens a
    /// new session by itself and sends queued requests before the change is noticed.
    InNewSession,
    /// The request is not applied and fails with [`ZkError::OperationTimeout`](crate::client::ZkError::OperationTimeout); the link stays
    /// up and the connection state does not change (a client-side request deadline).
    Timeout,
}

/// A one-shot connection loss, injected with [`MemoryClient::inject`].
///
/// It fires on the next request of the client that matches `op` and `path_prefix`: that
/// request fails with [`ZkError::ConnectionLoss`](crate::client::ZkError::ConnectionLoss) (applied or not, per `timing`) and the
/// client goes through a connection blip: `Suspended`, then `Reconnected` with the same
/// session (watches dropped unless [`MemoryClient::set_watches_survive_reconnect`]).
#[derive(Debug, Clone)]
pub struct Fault {
    /// The operation to strike; `None` strikes any.
    pub op: Option<Op>,
    /// Only requests whose path starts with this; `None` matches every path.
    pub path_prefix: Option<String>,
    /// Whether the request is applied before the connection drops.
    pub timing: FaultTiming,
}

impl Fault {
    /// Connection loss on the next `op`, which is not applied.
    pub fn before(op: Op) -> Fault {
        Fault {
            op: Some(op),
            path_prefix: None,
            timing: FaultTiming::BeforeApply,
        }
    }

    /// Connection loss on the next `op`, after the server applied it.
    pub fn after(op: Op) -> Fault {
        Fault {
            op: Some(op),
            path_prefix: None,
            timing: FaultTiming::AfterApply,
        }
    }

    /// The next `op` runs in a new session that the client does not report yet
    /// ([`FaultTiming::InNewSession`]).
    pub fn in_new_session(op: Op) -> Fault {
        Fault {
            op: Some(op),
            path_prefix: None,
            timing: FaultTiming::InNewSession,
        }
    }

    /// The next `op` fails with [`ZkError::OperationTimeout`](crate::client::ZkError::OperationTimeout), not applied, with no change of
    /// connection state ([`FaultTiming::Timeout`]).
    pub fn timeout(op: Op) -> Fault {
        Fault {
            op: Some(op),
            path_prefix: None,
            timing: FaultTiming::Timeout,
        }
    }

    /// Connection loss on the next request of any kind, which is not applied.
    pub fn before_any() -> Fault {
        Fault {
            op: None,
            path_prefix: None,
            timing: FaultTiming::BeforeApply,
        }
    }

    /// Connection loss on the next request of any kind, after the server applied it.
    pub fn after_any() -> Fault {
        Fault {
            op: None,
            path_prefix: None,
            timing: FaultTiming::AfterApply,
        }
    }

    /// Restricts the fault to requests whose path starts with `prefix`.
    pub fn on_path(mut self, prefix: impl Into<String>) -> Fault {
        self.path_prefix = Some(prefix.into());
        self
    }

    pub(super) fn matches(&self, op: Op, path: &str) -> bool {
        self.op.is_none_or(|o| o == op)
            && self
                .path_prefix
                .as_deref()
                .is_none_or(|p| path.starts_with(p))
    }
}

/// A hook for [`MemoryClient::on_request`]: the operation and the path as requested.
pub type RequestHook = Box<dyn Fn(Op, &str) + Send + Sync>;

pub(super) type Hook = Arc<dyn Fn(Op, &str) + Send + Sync>;

thread_local! {
    /// Set while a request hook runs: requests the hook makes do not call it again.
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

impl MemoryClient {
    /// Queues a one-shot [`Fault`]; faults fire in the order they were queued.
    pub fn inject(&self, fault: Fault) {
        self.ensemble.with_inner(|inner| {
            if let Some(cs) = inner.clients.get_mut(&self.id) {
                cs.faults.push_back(fault);
            }
        });
    }

    /// Takes the link down: the session turns `Suspended` and every request fails with
    /// [`ZkError::ConnectionLoss`](crate::client::ZkError::ConnectionLoss) until [`resume`](Self::resume); the session stays alive on
    /// the server (its ephemeral nodes remain). Watches are dropped now unless they survive
    /// reconnects. No-op if already suspended or closed.
    pub fn suspend(&self) {
        let _order = self.transitions.lock();
        let changed = self.ensemble.with_inner(|inner| {
            let Some(cs) = inner.clients.get_mut(&self.id) else {
                return false;
            };
            if cs.suspended {
                return false;
            }
            cs.suspended = true;
            if !cs.keep_watches {
                let session = cs.session_id;
                inner.remove_watches(session);
            }
            true
        });
        if changed {
            self.session.transition(ConnectionState::Suspended, None);
        }
    }

    /// Brings the link back: `Reconnected` if the session still lives (watches kept or
    /// dropped per [`set_watches_survive_reconnect`](Self::set_watches_survive_reconnect));
    /// if it expired meanwhile, `Lost` then `Connected` with a new session id. No-op if not
    /// suspended.
    pub fn resume(&self) {
        let _order = self.transitions.lock();
        let outcome = self.ensemble.with_inner(|inner| {
            let cs = inner.clients.get_mut(&self.id)?;
            if !cs.suspended {
                return None;
            }
            cs.suspended = false;
            inner.reconnect(self.id)
        });
        self.report(outcome);
    }

    /// The server expires this client's session now: its ephemeral nodes are deleted
    /// (others' watches fire) and its watches discarded. If connected, the client reports
    /// `Lost` then `Connected` with a new session id; if suspended, it learns at `resume`.
    pub fn expire(&self) {
        let session = self
            .ensemble
            .with_inner(|inner| inner.clients.get(&self.id).map(|cs| cs.session_id));
        if let Some(session) = session {
            self.expire_session(session);
        }
    }

    /// While the link is down, the client gives up on its session and reports `Lost` at once,
    /// without the link coming back: what the native client does when no server accepted the
    /// session within 4/3 of its timeout. The server is not told: the session and its
    /// ephemeral nodes live on until the server expires it ([`expire`](Self::expire) while
    /// the link is down, [`MemoryEnsemble::expire_session`](super::MemoryEnsemble::expire_session)
    /// with the old id later), as a real server does about one timeout after it last heard
    /// from the client; its watches are gone for the client. [`resume`](Self::resume) then
    /// opens a new session (`Connected`). No-op unless suspended, or if given up already.
    pub fn give_up_session(&self) {
        let _order = self.transitions.lock();
        let gave_up = self.ensemble.with_inner(|inner| {
            let cs = inner.clients.get_mut(&self.id)?;
            if !cs.suspended || cs.given_up {
                return None;
            }
            cs.given_up = true;
            let session = cs.session_id;
            inner.remove_watches(session);
            Some(())
        });
        if gave_up.is_some() {
            self.session.transition(ConnectionState::Lost, None);
        }
    }

    /// Whether watches survive a reconnect of the same session (as with ZooKeeper's Java
    /// client, which re-sends them). Default false, like the `zookeeper` crate, which drops
    /// every watch on reconnect: recipes must be tested that way.
    pub fn set_watches_survive_reconnect(&self, keep: bool) {
        self.ensemble.with_inner(|inner| {
            if let Some(cs) = inner.clients.get_mut(&self.id) {
                cs.keep_watches = keep;
            }
        });
    }

    /// Delays every watch callback by `delay` after its event fired (order is kept), to
    /// widen the window between a change and its notification.
    pub fn set_event_delay(&self, delay: Duration) {
        let nanos = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
        self.shared.delay_nanos.store(nanos, Ordering::Relaxed);
    }

    /// Sets (or clears) a hook called on the caller's thread before each request is applied,
    /// with no internal lock held: tests use it to pause a thread or expire the session at
    /// an exact point. Requests made by the hook itself do not call it again. If the session
    /// is lost while the hook runs, the request fails with [`ZkError::SessionExpired`](crate::client::ZkError::SessionExpired); if
    /// the link is down after it, with [`ZkError::ConnectionLoss`](crate::client::ZkError::ConnectionLoss).
    pub fn on_request(&self, hook: Option<RequestHook>) {
        *self.hook.write() = hook.map(Hook::from);
    }

    /// Reports a session change made silently by an [`FaultTiming::InNewSession`] fault:
    /// `Lost`, then `Connected` with the new session id. No-op when none is pending.
    pub fn report_session_change(&self) {
        let _order = self.transitions.lock();
        let outcome = self.ensemble.with_inner(|inner| {
            let cs = inner.clients.get_mut(&self.id)?;
            cs.unreported.take()?;
            Some(Reconnect::New(cs.session_id))
        });
        self.report(outcome);
    }
    pub(super) fn report(&self, outcome: Option<Reconnect>) {
        match outcome {
            Some(Reconnect::Same) => {
                self.session.transition(ConnectionState::Reconnected, None);
            }
            Some(Reconnect::New(id)) => {
                // A session given up was reported `Lost` already.
                if self.session.state() != ConnectionState::Lost {
                    self.session.transition(ConnectionState::Lost, None);
                }
                self.session
                    .transition(ConnectionState::Connected, Some(id));
            }
            None => {}
        }
    }

    /// Expires `session` if it is still this client's current one.
    pub(super) fn expire_session(&self, session: i64) {
        let _order = self.transitions.lock();
        let outcome = self.ensemble.with_inner(|inner| {
            let cs = inner.clients.get(&self.id)?;
            if !inner.sessions.contains_key(&session) {
                return None;
            }
            if cs.session_id != session {
                // A session the client gave up on: it ends on the server, unheard by the client.
                inner.kill_session(session);
                return None;
            }
            inner.kill_session(session);
            let cs = inner.clients.get_mut(&self.id)?;
            let held = std::mem::take(&mut cs.held);
            let link_down = cs.suspended || cs.blipping;
            inner.trash.extend(held.into_iter().map(|d| d.watcher));
            if link_down {
                // The client learns at reconnect.
                return None;
            }
            Some(Reconnect::New(inner.new_session(self.id)))
        });
        self.report(outcome);
    }

    /// The connection blip after an injected fault: `Suspended`, then back.
    pub(super) fn blip(&self) {
        let _order = self.transitions.lock();
        let user_suspended = self.ensemble.with_inner(|inner| {
            let cs = inner.clients.get_mut(&self.id)?;
            if cs.suspended {
                // Already down (and reported) by `suspend`: `resume` brings it back.
                cs.blipping = false;
            }
            Some(cs.suspended)
        });
        if user_suspended != Some(false) {
            return;
        }
        self.session.transition(ConnectionState::Suspended, None);
        let outcome = self.ensemble.with_inner(|inner| {
            inner.clients.get_mut(&self.id)?.blipping = false;
            inner.reconnect(self.id)
        });
        self.report(outcome);
    }

    pub(super) fn call_hook(&self, op: Op, path: &str) {
        let hook = self.hook.read().clone();
        if let Some(hook) = hook {
            if !IN_HOOK.with(Cell::get) {
                IN_HOOK.with(|h| h.set(true));
                let result = catch_unwind(AssertUnwindSafe(|| hook(op, path)));
                IN_HOOK.with(|h| h.set(false));
                if let Err(panic) = result {
                    std::panic::resume_unwind(panic);
                }
            }
        }
    }
}
