//! What the engine waits on, as futures: submitted requests' answers, a waiter's signal, the
//! link coming back, a fresh proof, a retry's pause. The blocking calls run the same futures
//! on their own thread ([`crate::primitives::block_on`]); an async acquire runs them on its
//! executor. None of them needs a thread of its own: each is woken by what it waits on (the
//! reply on the client's reader thread, a watch, a session listener, a cancel, the timer).
//!
//! Rules kept:
//! - **dropped, a wait leaves nothing registered** (session listeners, proof wakers, timers);
//! - **answers nobody takes are handed on**: a submission dropped before its answers were
//!   taken gives them to its `abandoned` handler, on whatever thread has them (the reply's,
//!   or the dropping one's): what deletes the node of a create whose future went away;
//! - a wait with a deadline returns by it; a cancel (the operation's token) ends it as a
//!   deadline that passed.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use parking_lot::Mutex;

use super::{past, wake_on_session_change, Waiter};
use crate::client::{Response, SharedClient, Submission, ZkError, ZkResult};
use crate::locks::cancel::wake_on_cancel;
use crate::primitives::timer::{sleep_until, Sleep};
use crate::retry::{Retries, RetryStep};
use crate::session::{ConnectionState, ListenerId, SessionSnapshot};

/// What is done with answers nobody will take (the future that waited for them is gone).
pub(crate) type Abandoned = Box<dyn FnOnce(Vec<ZkResult<Response>>) + Send>;

#[derive(Default)]
struct Slot {
    answers: Option<Vec<ZkResult<Response>>>,
    waker: Option<Waker>,
    /// Set when the future went away before the answers came: they go here instead.
    abandoned: Option<Abandoned>,
}

/// The answers of one submission ([`crate::ZkClient::submit`]), awaited: one per request, in
/// order.
#[must_use = "a future does nothing unless polled"]
struct Answers {
    slot: Arc<Mutex<Slot>>,
    /// Run on the answers if this future is dropped before it took them.
    abandoned: Option<Abandoned>,
    taken: bool,
    /// Past it, the answers are given up: every request is answered `OperationTimeout` (its
    /// outcome unknown), and the real answers go to `abandoned` when they come.
    deadline: Option<Sleep>,
    len: usize,
}

/// Submits `submissions` on `client` and awaits their answers, as a blocking request waits:
/// for a connection first when there is none (a backend with a [`call_timeout`] waits for
/// one that long, as its blocking calls do), then for the answers at most as long (past it,
/// every request is answered `OperationTimeout`).
///
/// [`call_timeout`]: crate::ZkClient::call_timeout
pub(crate) fn submit(
    client: &SharedClient,
    submissions: Vec<Submission>,
) -> Boxed<'_, Vec<ZkResult<Response>>> {
    submit_abandoning(client, submissions, None)
}

/// A future on the heap: the rare or short waits of the engine are boxed, so that a waiting
/// acquire's own future stays small (its size is the largest of its states, kept for as long
/// as it waits: about a kilobyte less a waiter).
pub(crate) type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// [`submit`], handing the answers to `abandoned` if the future is dropped (or gives up at
/// its call timeout) before it takes them.
pub(crate) fn submit_abandoning(
    client: &SharedClient,
    submissions: Vec<Submission>,
    abandoned: Option<Abandoned>,
) -> Boxed<'_, Vec<ZkResult<Response>>> {
    Box::pin(submit_when_ready(client, submissions, abandoned))
}

async fn submit_when_ready(
    client: &SharedClient,
    submissions: Vec<Submission>,
    abandoned: Option<Abandoned>,
) -> Vec<ZkResult<Response>> {
    if let Some(timeout) = client.call_timeout() {
        if !client.ready_to_send() {
            let link = connected(client, Instant::now().checked_add(timeout)).await;
            if !link.state.is_connected() {
                // Nothing was sent: the outcome is known (not applied), as a blocking call's.
                let code = match link.state {
                    ConnectionState::Closed => ZkError::Closed,
                    _ => ZkError::ConnectionLoss,
                };
                return vec![Err(code); submissions.len()];
            }
        }
    }
    let mut answers = send(client, submissions);
    answers.abandoned = abandoned;
    answers.await
}

/// Submits `submissions` on `client` now and returns their answers' future. The wait for the
/// answers is bounded as a blocking request's is ([`crate::ZkClient::call_timeout`] from
/// now): past it, every request is answered `OperationTimeout`.
fn send(client: &SharedClient, submissions: Vec<Submission>) -> Answers {
    let deadline = client
        .call_timeout()
        .and_then(|t| Instant::now().checked_add(t));
    let slot = Arc::new(Mutex::new(Slot::default()));
    let len = submissions.len();
    // Strong: the slot outlives a dropped future, so its `abandoned` handler gets the answers.
    let filled = slot.clone();
    client.submit(
        submissions,
        Box::new(move |answers| {
            let mut s = filled.lock();
            if let Some(abandoned) = s.abandoned.take() {
                drop(s);
                abandoned(answers);
                return;
            }
            s.answers = Some(answers);
            let waker = s.waker.take();
            drop(s);
            if let Some(w) = waker {
                w.wake();
            }
        }),
    );
    Answers {
        slot,
        abandoned: None,
        taken: false,
        deadline: deadline.map(sleep_until),
        len,
    }
}

impl Future for Answers {
    type Output = Vec<ZkResult<Response>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        {
            let mut s = self.slot.lock();
            if let Some(answers) = s.answers.take() {
                drop(s);
                self.taken = true;
                return Poll::Ready(answers);
            }
            match &s.waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => s.waker = Some(cx.waker().clone()),
            }
        }
        if let Some(sleep) = self.deadline.as_mut() {
            if Pin::new(sleep).poll(cx).is_ready() {
                // Given up: the answers that come go to the handler (`Drop` hands it over).
                let len = self.len;
                return Poll::Ready(vec![Err(ZkError::OperationTimeout); len]);
            }
        }
        Poll::Pending
    }
}

impl Drop for Answers {
    fn drop(&mut self) {
        if self.taken {
            return;
        }
        let Some(abandoned) = self.abandoned.take() else {
            return;
        };
        let mut s = self.slot.lock();
        match s.answers.take() {
            // Answered, never taken: handled here, on the dropping thread.
            Some(answers) => {
                drop(s);
                abandoned(answers);
            }
            None => s.abandoned = Some(abandoned),
        }
    }
}

/// Waits for `waiter`'s next signal (or this round's watch), the deadline or a cancel; ready
/// with whether the node watched in this round was deleted (as [`Waiter::wait`]).
pub(crate) fn signalled(waiter: &Waiter, deadline: Option<Instant>) -> Signalled<'_> {
    Signalled {
        waiter,
        deadline,
        sleep: None,
    }
}

/// The future of [`signalled`].
#[must_use = "a future does nothing unless polled"]
pub(crate) struct Signalled<'a> {
    waiter: &'a Waiter,
    deadline: Option<Instant>,
    sleep: Option<Sleep>,
}

impl Future for Signalled<'_> {
    type Output = bool;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        // The waker first: a signal after the look below wakes it.
        self.waiter.set_waker(cx.waker());
        if self.waiter.signalled() || past(self.deadline, Instant::now()) {
            return Poll::Ready(self.waiter.deleted());
        }
        if let Some(d) = self.deadline {
            let sleep = self.sleep.get_or_insert_with(|| sleep_until(d));
            if Pin::new(sleep).poll(cx).is_ready() {
                return Poll::Ready(self.waiter.deleted());
            }
        }
        Poll::Pending
    }
}

/// A private wake-up for one wait: woken by every session transition and by the operation's
/// cancel; what it registered goes when it drops.
pub(crate) struct SessionWake {
    pub(crate) waiter: Arc<Waiter>,
    client: SharedClient,
    listener: Option<ListenerId>,
    _cancel: Option<crate::primitives::cancel::Registration>,
}

impl SessionWake {
    pub(crate) fn new(client: &SharedClient) -> SessionWake {
        let waiter = Arc::new(Waiter::default());
        SessionWake {
            listener: Some(wake_on_session_change(client, &waiter)),
            _cancel: wake_on_cancel(&waiter),
            client: client.clone(),
            waiter,
        }
    }
}

impl Drop for SessionWake {
    fn drop(&mut self) {
        if let Some(id) = self.listener.take() {
            self.client.session().unsubscribe(id);
        }
    }
}

/// Until the client is connected (and ready to send: [`crate::ZkClient::ready_to_send`]) or
/// closed, or the deadline passes (a cancel passes it); the snapshot then (as
/// [`crate::session::Session::wait_until_connected`], which a blocking request follows with
/// a wait for the link to be ready).
pub(crate) fn connected(
    client: &SharedClient,
    deadline: Option<Instant>,
) -> Boxed<'_, SessionSnapshot> {
    Box::pin(connected_inline(client, deadline))
}

async fn connected_inline(client: &SharedClient, deadline: Option<Instant>) -> SessionSnapshot {
    let session = client.session();
    let over = || {
        let s = session.snapshot();
        let ready = s.state.is_connected() && client.ready_to_send();
        (ready || s.state == ConnectionState::Closed).then_some(s)
    };
    session_wait(client, deadline, over, || session.snapshot()).await
}

/// Until `over()` says `Some`, the deadline passes (a cancel passes it: then `at_deadline()`),
/// looking again at every session transition, cancel and session event (a proof, the link
/// ready). No registration is made when it is over at once; all go when it ends or is
/// dropped.
async fn session_wait<T>(
    client: &SharedClient,
    deadline: Option<Instant>,
    mut over: impl FnMut() -> Option<T>,
    at_deadline: impl Fn() -> T,
) -> T {
    if let Some(out) = over() {
        return out;
    }
    // Transitions and the cancel wake it through this waker; events through the session's.
    let wake = SessionWake::new(client);
    let mut event = EventWaker { client, key: None };
    let mut sleep = deadline.map(sleep_until);
    std::future::poll_fn(|cx| {
        client
            .session()
            .register_event_waker(&mut event.key, cx.waker());
        wake.waiter.set_waker(cx.waker());
        if let Some(out) = over() {
            return Poll::Ready(out);
        }
        if past(deadline, Instant::now()) {
            return Poll::Ready(at_deadline());
        }
        if let Some(sleep) = sleep.as_mut() {
            if Pin::new(sleep).poll(cx).is_ready() {
                return Poll::Ready(at_deadline());
            }
        }
        Poll::Pending
    })
    .await
}

/// Sleeps until `until`, or less when the operation is cancelled.
pub(crate) async fn pause_until(until: Option<Instant>) {
    let Some(until) = until else {
        // Longer than an `Instant` can say: until cancelled.
        let waiter = Arc::new(Waiter::default());
        let _cancel = wake_on_cancel(&waiter);
        signalled(&waiter, None).await;
        return;
    };
    if crate::primitives::cancel::requested() || Instant::now() >= until {
        return;
    }
    let waiter = Arc::new(Waiter::default());
    let _cancel = wake_on_cancel(&waiter);
    signalled(&waiter, Some(until)).await;
}

/// [`Retries::next`], its pause on the timer.
pub(crate) async fn next_retry(retries: &mut Retries<'_>) -> RetryStep {
    let step = retries.decide();
    if let RetryStep::Again { slept } = step {
        Box::pin(pause_until(Instant::now().checked_add(slept))).await;
    }
    step
}

/// Waits while the proof of the session of `losses` is stale, until `deadline` (a cancel ends
/// it): an acquire granted on a session idle for long returns once the quorum confirmed it.
/// True when the proof is fresh (or there is none to wait for).
pub(crate) async fn quorum_fresh(
    client: &SharedClient,
    losses: u64,
    deadline: Option<Instant>,
) -> bool {
    let session = client.session();
    session_wait(
        client,
        deadline,
        || session.quorum_wait_over(losses),
        || false,
    )
    .await
}

/// A registration for the session's next event (a proof, the link ready), removed when
/// dropped.
struct EventWaker<'a> {
    client: &'a SharedClient,
    key: Option<u64>,
}

impl Drop for EventWaker<'_> {
    fn drop(&mut self) {
        self.client.session().remove_event_waker(self.key);
    }
}
