//! The wait of [`super::wait_on`] as a future: ready once the worst state over the nodes
//! leaves `Held` (`Suspect` or `Lost`), with no thread waiting. What wakes it is what wakes the
//! blocking wait: the nodes' own watches, the clients' session changes, the moment a proof
//! turns stale, and a pause after a failed request; the requests that arm a watch or verify a
//! node after a reconnect are submitted ([`ZkClient::submit`](crate::ZkClient::submit)),
//! their answers recorded by the same code the blocking wait uses.
//!
//! Rules kept here, as in the blocking wait:
//! - at most one request per node in flight; a failed one is tried again after
//!   [`super::TRY_AGAIN_AFTER`];
//! - a node not read since the last reconnect is verified before it counts as `Held`; a
//!   verification that fails ends the wait `Suspect`;
//! - a signal that arrives while the future looks is kept (the round starts first), so no
//!   wake-up is lost between a look and the next poll;
//! - dropped, the future leaves nothing registered (session listeners, the nodes' waiter
//!   lists, the timer).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use parking_lot::Mutex;

use super::{look_again_by, worst, Armed, TRY_AGAIN_AFTER};
use crate::client::{Request, Response, SharedClient, Submission, ZkError};
use crate::locks::held::{HeldNode, LockState};
use crate::locks::internals::{wake_on_session_change, Waiter};
use crate::primitives::timer::{sleep_until, Sleep};
use crate::session::ListenerId;

/// What a request of one node (arming or verifying) found, once answered.
type Answer = Arc<Mutex<Option<Outcome>>>;

#[derive(Debug, Clone, Copy)]
enum Outcome {
    Armed(Armed),
    Verified(LockState),
}

/// One node's part in the wait.
struct Node {
    node: Arc<HeldNode>,
    /// The request in flight, if one is.
    pending: Option<Answer>,
    /// After a failed request: no other before then.
    quiet_until: Option<Instant>,
}

/// The future of [`OwnedLockGuard::wait_while_held_async`](crate::locks::OwnedLockGuard::wait_while_held_async):
/// ready with the state once it is no longer `Held` (`Suspect` or `Lost`).
#[must_use = "a future does nothing unless polled"]
pub struct WhileHeld {
    nodes: Vec<Node>,
    waiter: Arc<Waiter>,
    /// One session listener per client, from the first poll.
    listeners: Option<Vec<(SharedClient, ListenerId)>>,
    timer: Option<Sleep>,
}

impl WhileHeld {
    pub(crate) fn new(nodes: &[Arc<HeldNode>]) -> WhileHeld {
        WhileHeld {
            nodes: nodes
                .iter()
                .map(|node| Node {
                    node: node.clone(),
                    pending: None,
                    quiet_until: None,
                })
                .collect(),
            waiter: Arc::default(),
            listeners: None,
            timer: None,
        }
    }

    fn subscribe(&mut self) {
        if self.listeners.is_some() {
            return;
        }
        let mut listeners: Vec<(SharedClient, ListenerId)> = Vec::new();
        for n in &self.nodes {
            let client = n.node.client();
            if !listeners.iter().any(|(c, _)| Arc::ptr_eq(c, client)) {
                listeners.push((client.clone(), wake_on_session_change(client, &self.waiter)));
            }
        }
        self.listeners = Some(listeners);
    }

    /// One look: the state when the wait is over, else `None` with the requests it needs
    /// sent and the time to look again by.
    fn look(&mut self, now: Instant) -> (Option<LockState>, Option<Instant>) {
        let mut states = Vec::with_capacity(self.nodes.len());
        let mut unverified = Vec::new();
        for (i, n) in self.nodes.iter_mut().enumerate() {
            let answered = n.pending.as_ref().and_then(|a| a.lock().take());
            if answered.is_some() {
                n.pending = None;
            }
            match answered {
                Some(Outcome::Verified(LockState::Suspect)) => {
                    return (Some(LockState::Suspect), None);
                }
                Some(Outcome::Armed(Armed::Failed)) => n.quiet_until = Some(now + TRY_AGAIN_AFTER),
                _ => {}
            }
            match n.node.believed_state().1 {
                Some(state) => states.push(state),
                None => unverified.push(i),
            }
        }
        // Only nodes not read since a reconnect: they are verified first (`worst` of none is
        // `Lost`).
        let all_unverified = states.is_empty() && !unverified.is_empty();
        let state = worst(&states);
        if state != LockState::Held && !all_unverified {
            return (Some(state), None);
        }
        let mut wake: Option<Instant> = None;
        for (i, n) in self.nodes.iter_mut().enumerate() {
            if n.pending.is_some() {
                continue;
            }
            if let Some(quiet) = n.quiet_until.filter(|q| *q > now) {
                wake = Some(wake.map_or(quiet, |w| w.min(quiet)));
                continue;
            }
            let answer = Answer::default();
            let sent = match unverified.contains(&i) {
                true => verify_submitted(&n.node, &self.waiter, answer.clone()),
                false => {
                    let into = answer.clone();
                    n.node.arm_submitted(&self.waiter, move |armed| {
                        *into.lock() = Some(Outcome::Armed(armed));
                    })
                }
            };
            if sent {
                n.pending = Some(answer);
            }
        }
        let clients = self.listeners.iter().flatten().map(|(c, _)| c);
        (None, look_again_by(wake, clients))
    }
}

/// Verifies `node` after a reconnect without waiting: an `exists` submitted, its answer
/// recorded on the node (as a blocking verification does) and in `answer`, then `waiter`
/// signalled. Always sent.
fn verify_submitted(node: &Arc<HeldNode>, waiter: &Arc<Waiter>, answer: Answer) -> bool {
    let client = node.client();
    let epoch = client.session().epoch();
    let weak = Arc::downgrade(node);
    let signal = Arc::downgrade(waiter);
    let request = Request::Exists {
        path: node.path().to_string(),
    };
    client.submit(
        vec![Submission::new(request)],
        Box::new(move |mut results| {
            let read = match results.pop() {
                Some(Ok(Response::Exists(stat))) => Ok(stat.map(|s| s.ephemeral_owner)),
                Some(Err(code)) => Err(code),
                _ => Err(ZkError::MarshallingError),
            };
            if let Some(node) = weak.upgrade() {
                *answer.lock() = Some(Outcome::Verified(node.verify_answered(epoch, read)));
            }
            if let Some(waiter) = signal.upgrade() {
                waiter.signal(None);
            }
        }),
    );
    true
}

impl Future for WhileHeld {
    type Output = LockState;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<LockState> {
        let this = &mut *self;
        this.subscribe();
        this.waiter.set_waker(cx.waker());
        loop {
            // The round starts before the look: a signal during it is kept.
            this.waiter.next_round();
            let (done, wake) = this.look(Instant::now());
            if let Some(state) = done {
                return Poll::Ready(state);
            }
            if this.waiter.signalled() {
                continue;
            }
            this.timer = wake.map(sleep_until);
            if let Some(timer) = this.timer.as_mut() {
                if Pin::new(timer).poll(cx).is_ready() {
                    continue;
                }
            }
            return Poll::Pending;
        }
    }
}

impl Drop for WhileHeld {
    fn drop(&mut self) {
        for (client, id) in self.listeners.take().into_iter().flatten() {
            client.session().unsubscribe(id);
        }
        for n in &self.nodes {
            n.node.watch().unregister(&self.waiter);
        }
    }
}

impl std::fmt::Debug for WhileHeld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WhileHeld")
            .field("nodes", &self.nodes.len())
            .finish_non_exhaustive()
    }
}
