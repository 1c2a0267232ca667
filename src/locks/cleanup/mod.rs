//! Deleting lock nodes: now, within a deadline, or in the background until they are gone.
//!
//! Deletes are by exact path, whatever happened to the session since the node was created:
//! lock node names carry a fresh UUID, so a node of that name can only be ours, and a create
//! may have run in a session the client had not reported yet (the node then lives on in a live
//! session; a delete answered `SessionExpired` is therefore sent again). A background delete
//! ends when the node is gone, the client is closed or dropped, or two more sessions were
//! lost. Releasing a hold that is `Lost` never waits for the link: its session is over, and
//! the background delete covers a node the server still has.
//!
//! - this file: deletes now or within a deadline, what a thread left to the background
//!   ([`BackgroundMark`]), the drop guard [`NodeCleanup`];
//! - `background`: what is left to the background, on one worker thread per client.

use std::cell::Cell;
use std::sync::{Arc, Weak};
use std::time::Instant;

use crate::client::{Request, SharedClient, Submission, ZkClient, ZkError};
use crate::error::{Error, Result};
use crate::retry::{Retries, RetryPolicy, RetryStep};
use crate::session::ConnectionState;

use super::held::{HeldNode, LockState};
use super::internals::{awaits, past, LockInternals};

mod background;

/// How long a delete may keep its caller.
///
/// `pub` in a private module: [`super::InterProcessLock::release_within`] names it, and no
/// other crate can (so none can call or override that method).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Retry until this deadline (`None`: as long as the retry policy allows; past it: one
    /// try).
    Until(Option<Instant>),
    /// Sent now, its answer not awaited; when its outcome stays unknown, finished in the
    /// background: a release from async code, which must not stall its executor.
    Unawaited,
    /// No request on the caller's thread: straight to the background. For a timed call past
    /// its deadline whose link is in trouble (a request of it failed with an unknown outcome,
    /// or the connection is down): one more request could keep it a whole call timeout more.
    Background,
}

impl Wait {
    /// `Until(deadline)`, or `Background` when the call's link is in trouble (a request of it
    /// failed with an unknown outcome). Past the deadline a link that is down counts as
    /// trouble anyway (see [`delete_guaranteed`]).
    pub(crate) fn after_timeout(deadline: Option<Instant>, link_trouble: bool) -> Wait {
        match link_trouble {
            true => Wait::Background,
            false => Wait::Until(deadline),
        }
    }
}

thread_local! {
    /// How many deletes (or look-ups for a node) this thread has left to the background: each
    /// one means a request's link was in trouble, or a call past its deadline made none.
    static LEFT_TO_BACKGROUND: Cell<u64> = const { Cell::new(0) };
}

/// What the calling thread had left to the background when it was taken: a call that gives
/// back several holds learns from it whether the calls it made met trouble (a timed acquire
/// does not say why it returned "not acquired").
#[derive(Debug, Clone, Copy)]
pub(crate) struct BackgroundMark(u64);

impl BackgroundMark {
    pub(crate) fn now() -> BackgroundMark {
        BackgroundMark(LEFT_TO_BACKGROUND.get())
    }

    /// True when this thread left something to the background since the mark.
    pub(crate) fn passed(self) -> bool {
        LEFT_TO_BACKGROUND.get() != self.0
    }

    /// `Until(deadline)`, or `Background` once this thread left something to the background
    /// since the mark (its link is in trouble).
    pub(crate) fn wait(self, deadline: Option<Instant>) -> Wait {
        match self.passed() {
            true => Wait::Background,
            false => Wait::Until(deadline),
        }
    }
}

/// Puts `count` as the calling thread's count of what it left to the background and returns
/// the count it replaces: an operation that runs on many threads (a future) carries its own
/// count across its polls (`internals::context`).
pub(crate) fn swap_left_to_background(count: u64) -> u64 {
    LEFT_TO_BACKGROUND.replace(count)
}

fn left_to_background() {
    LEFT_TO_BACKGROUND.set(LEFT_TO_BACKGROUND.get().wrapping_add(1));
}

/// Releases, one after another, holds that a call took before it failed or ran out of time,
/// each with the wait `release` is given: until `deadline` (past it, one try), and no request
/// at all once this thread left something to the background since `since` (the link is in
/// trouble: one more request could keep the caller a whole call timeout more). Returns the
/// failures (a release left to the background is one).
pub(crate) fn give_back<T>(
    holds: impl IntoIterator<Item = T>,
    deadline: Option<Instant>,
    since: BackgroundMark,
    release: impl Fn(T, Wait) -> Result<()>,
) -> Vec<Error> {
    let mut failures = Vec::new();
    for hold in holds {
        if let Err(e) = release(hold, since.wait(deadline)) {
            failures.push(e);
        }
    }
    failures
}

/// Deletes `path`, retrying while the outcome is unknown as long as `wait` allows; then hands
/// the delete to the background and returns the error. Past its deadline, with the
/// client not connected, it makes no request: the delete goes to the background at once. The
/// delete is by exact path, whatever happened to the session since the node was created: lock
/// node names carry a fresh UUID, so a node of that name can only be ours, and a session
/// change we were not told about yet may have left it alive.
pub(crate) fn delete_guaranteed(
    client: &SharedClient,
    path: &str,
    retry: &dyn RetryPolicy,
    wait: Wait,
) -> Result<()> {
    delete_node(client, path, retry, wait, &|| false)
}

/// Deletes the node of a hold being released, as [`delete_guaranteed`] while the hold may be
/// alive (`Held` or `Suspect`: the session may live, and the node with it, until the delete
/// is done). A hold that is `Lost`, or turns `Lost` while its release waits for the link, has
/// nothing left to protect: its node went with its session, or lives in a session the client
/// gave up on or has not reported yet, which the background delete by exact path covers. So
/// its release makes one try when connected (a gone node answers at once), never waits for
/// the link, and returns `Ok`: nothing of the hold is left that the caller could act on.
pub(crate) fn release_held(held: &HeldNode, retry: &dyn RetryPolicy, wait: Wait) -> Result<()> {
    // Every release of a hold ends here: the one place its `released` event is reported,
    // before the delete, so no successor's `acquired` can come before it.
    held.note_released();
    delete_node(held.client(), held.path(), retry, wait, &|| {
        known_lost(held)
    })
}

/// [`release_held`] as a future, for a caller that wants the outcome without blocking: the
/// delete submitted and its answer awaited, tried again under `retry` while its outcome is
/// unknown (each pause on the timer, then a wait for the link); a hold that is `Lost`, or
/// a policy that gives up, leaves the delete to the background (`Ok` for the lost hold, the
/// error otherwise), as the blocking release does.
pub(crate) async fn release_held_async(held: &HeldNode, retry: &dyn RetryPolicy) -> Result<()> {
    held.note_released();
    let (client, path) = (held.client(), held.path());
    let mut retries = Retries::new(retry, Instant::now(), None);
    // A `SessionExpired` answer came from a session that is over: the delete is owed once to
    // the session of now.
    let mut sent_in_session_of_now = false;
    loop {
        if client.session().state() == ConnectionState::Closed {
            return Ok(()); // closing ended the client's session, and its ephemeral nodes
        }
        if !client.session().state().is_connected() && known_lost(held) {
            delete_in_background(client, path);
            return Ok(());
        }
        let delete = Request::Delete {
            path: path.to_string(),
            version: None,
        };
        let answers = awaits::submit(client, vec![Submission::new(delete)]).await;
        let code = match answers.into_iter().next() {
            Some(Ok(_) | Err(ZkError::NoNode | ZkError::Closed)) => return Ok(()),
            Some(Err(code)) if fate_unknown(code) => code,
            Some(Err(code)) => return Err(Error::zk("delete", path, code)),
            None => ZkError::MarshallingError,
        };
        if code == ZkError::SessionExpired && !std::mem::replace(&mut sent_in_session_of_now, true)
        {
            continue;
        }
        if known_lost(held) {
            delete_in_background(client, path);
            return Ok(());
        }
        match awaits::next_retry(&mut retries).await {
            RetryStep::Again { slept } => {
                let until = Instant::now().checked_add(slept.saturating_mul(4));
                awaits::connected(client, until).await;
            }
            RetryStep::Exhausted | RetryStep::DeadlinePassed => {
                log::warn!("could not delete {path} yet ({code}); deleting in the background");
                delete_in_background(client, path);
                return Err(Error::zk("delete", path, code));
            }
        }
    }
}

/// Whether `held` is `Lost` as far as the client knows, without a request (a release with
/// [`Wait::Background`] makes none, and one that waits for the link has none to make): its
/// session is over, or, while not connected, it was found gone.
fn known_lost(held: &HeldNode) -> bool {
    let s = held.client().session().snapshot();
    s.losses != held.losses()
        || matches!(s.state, ConnectionState::Lost | ConnectionState::Closed)
        || (!s.state.is_connected() && held.state() == LockState::Lost)
}

/// [`delete_guaranteed`], ending with `Ok` (and the delete in the background) as soon as
/// `lost()` says the node has nothing left to protect and the outcome is unknown, or the link
/// is down.
fn delete_node(
    client: &SharedClient,
    path: &str,
    retry: &dyn RetryPolicy,
    wait: Wait,
    lost: &dyn Fn() -> bool,
) -> Result<()> {
    let down_past = |d| past(d, Instant::now()) && !client.session().state().is_connected();
    let wait = match wait {
        Wait::Until(d) if down_past(d) => Wait::Background,
        w => w,
    };
    // Inside a future's poll no delete blocks: it is sent, its answer not awaited.
    if wait == Wait::Unawaited || (super::internals::in_future() && wait != Wait::Background) {
        delete_unawaited(client, path);
        return Ok(());
    }
    let Wait::Until(deadline) = wait else {
        delete_in_background(client, path);
        return if lost() {
            Ok(())
        } else {
            Err(Error::zk("delete", path, ZkError::ConnectionLoss))
        };
    };
    let mut retries = Retries::new(retry, Instant::now(), deadline);
    // A `SessionExpired` answer came from a session that is over: the delete is owed once to
    // the session of now, in the foreground when the link is up (the answer is immediate).
    let mut sent_in_session_of_now = false;
    loop {
        if !client.session().state().is_connected() && lost() {
            delete_in_background(client, path);
            return Ok(());
        }
        let code = match try_delete(client, path) {
            Ok(None) => return Ok(()),
            Ok(Some(code)) => code,
            Err(code) => return Err(Error::zk("delete", path, code)),
        };
        if code == ZkError::SessionExpired && !sent_in_session_of_now {
            sent_in_session_of_now = true;
            continue;
        }
        if lost() {
            delete_in_background(client, path);
            return Ok(());
        }
        match retries.next() {
            RetryStep::Again { slept } => {
                // `slept` is the user's policy's sleep: no arithmetic on it may overflow.
                let until = Instant::now().checked_add(slept.saturating_mul(4));
                let until = match (deadline, until) {
                    (Some(d), Some(u)) => Some(d.min(u)),
                    (d, u) => d.or(u),
                };
                wait_for_link(client, until, lost);
            }
            RetryStep::Exhausted | RetryStep::DeadlinePassed => {
                log::warn!("could not delete {path} yet ({code}); deleting in the background");
                delete_in_background(client, path);
                return Err(Error::zk("delete", path, code));
            }
        }
    }
}

/// Blocks until the client is connected or closed, `lost()`, or `until` (`None`: no limit).
fn wait_for_link(client: &SharedClient, until: Option<Instant>, lost: &dyn Fn() -> bool) {
    let session = client.session();
    loop {
        let s = session.snapshot();
        if s.state.is_connected()
            || s.state == ConnectionState::Closed
            || past(until, Instant::now())
            || lost()
        {
            return;
        }
        session.wait_for_change(s.epoch, until);
    }
}

/// Deletes `path` in the background (see [`background`]).
fn delete_in_background(client: &SharedClient, path: &str) {
    left_to_background();
    let s = client.session().snapshot();
    if s.state == ConnectionState::Closed {
        return; // closing ended the client's session, and its ephemeral nodes
    }
    background::delete(Arc::downgrade(client), s.losses, path.to_string());
}

/// Deletes `path` without waiting for the reply ([`ZkClient::delete_unawaited`]): the
/// caller goes on at once. A delete whose outcome stays unknown ([`fate_unknown`]: its
/// connection was lost, or its session ended) goes on in the background, as [`delete_guaranteed`]'s does; the client's later requests
/// may then reach the server before it.
pub(crate) fn delete_unawaited(client: &SharedClient, path: &str) {
    let losses = client.session().snapshot().losses;
    // Weak: the outcome may be handled on the client's own thread, which must not be the one
    // that drops the last handle.
    let weak = Arc::downgrade(client);
    let p = path.to_string();
    client.delete_unawaited(
        path,
        Box::new(move |result| match result {
            Ok(()) | Err(ZkError::NoNode | ZkError::Closed) => {}
            Err(code) if fate_unknown(code) => {
                log::info!("delete of {p} interrupted ({code}); deleting in the background");
                background::delete(weak, losses, p);
            }
            Err(code) => log::warn!("could not delete {p}: {code}"),
        }),
    );
}

/// One delete of a lock node: `Ok(None)` when it is gone, `Ok(Some(code))` when the outcome
/// is unknown (try again), `Err` when it cannot be deleted.
pub(super) fn try_delete(
    client: &SharedClient,
    path: &str,
) -> std::result::Result<Option<ZkError>, ZkError> {
    if client.session().state() == ConnectionState::Closed {
        return Ok(None); // closing ended the client's session, and its ephemeral nodes
    }
    match client.delete(path, None) {
        Ok(()) | Err(ZkError::NoNode) | Err(ZkError::Closed) => Ok(None),
        Err(code) if fate_unknown(code) => Ok(Some(code)),
        Err(code) => Err(code),
    }
}

/// Whether an answer to a request about one of our nodes leaves the node's fate unknown, so
/// the request must be made again: a connection loss or a timeout, and `SessionExpired`. The
/// session that request was sent in is over, but the node may live in a newer one: a create
/// can run in a session the client had not reported yet. Asked again in the session of now,
/// the server answers for certain (`NoNode` when the node went with the old session).
pub(super) fn fate_unknown(code: ZkError) -> bool {
    code.is_retryable() || code == ZkError::SessionExpired
}

/// Runs `attempt` in the background whenever the client is connected (after every session
/// change, and every 250 ms) until it returns true (see [`background`]). Gives up when the
/// client is closed or dropped, or once two more sessions were lost: a node made in the
/// session of now, or in one the client has not reported yet, is gone with them.
pub(super) fn retry_in_background(
    client: &SharedClient,
    attempt: impl FnMut(&SharedClient) -> bool + Send + 'static,
) {
    left_to_background();
    let s = client.session().snapshot();
    if s.state == ConnectionState::Closed {
        return; // closing ended the client's session, and its ephemeral nodes
    }
    background::retry(Arc::downgrade(client), s.losses, Box::new(attempt));
}

/// [`delete_in_background`] from any thread, a backend's included (it never upgrades
/// `client`, so it can never drop the last handle there): what a future's abandoned create
/// hands on. `losses` is the client's count of lost sessions when the node was made.
pub(crate) fn delete_in_background_from(client: Weak<dyn ZkClient>, losses: u64, path: String) {
    background::delete(client, losses, path);
}

/// [`retry_in_background`] from any thread, a backend's included (see
/// [`delete_in_background_from`]).
pub(crate) fn retry_in_background_from(
    client: Weak<dyn ZkClient>,
    losses: u64,
    attempt: impl FnMut(&SharedClient) -> bool + Send + 'static,
) {
    background::retry(client, losses, Box::new(attempt));
}

/// Deletes `path` now as [`delete_guaranteed`] does on a blocking call; inside a future's
/// poll (`internals::context`) without waiting: sent unawaited, and in the background when
/// its outcome stays unknown.
pub(crate) fn delete_now_or_unawaited(
    client: &SharedClient,
    path: &str,
    retry: &dyn RetryPolicy,
    wait: Wait,
) -> Result<()> {
    if super::internals::in_future() {
        left_to_background();
        delete_unawaited(client, path);
        return Ok(());
    }
    delete_guaranteed(client, path, retry, wait)
}

/// Deletes our node unless disarmed: covers timeouts, errors and panics alike. With a
/// deadline, it tries until then (at least once, unless told the link is in trouble) and
/// leaves the rest to the background delete, so a timed call returns by its deadline plus at
/// most one call timeout even during an outage.
pub(crate) struct NodeCleanup<'a> {
    internals: &'a LockInternals,
    path: Option<String>,
    wait: Wait,
    /// Made inside a future's poll: dropped (the future cancelled, or done without the lock),
    /// it never blocks the dropping thread: the delete is sent unawaited.
    in_future: bool,
}

impl<'a> NodeCleanup<'a> {
    pub(crate) fn new(internals: &'a LockInternals, path: &str, deadline: Option<Instant>) -> Self {
        NodeCleanup {
            internals,
            path: Some(path.to_string()),
            wait: Wait::Until(deadline),
            in_future: super::internals::in_future(),
        }
    }

    pub(crate) fn disarm(mut self) {
        self.path = None;
    }

    /// Changes how long the delete may keep the caller.
    pub(crate) fn set_wait(&mut self, wait: Wait) {
        self.wait = wait;
    }

    fn delete(&mut self) {
        let Some(path) = self.path.take() else {
            return;
        };
        if self.in_future {
            left_to_background();
            delete_unawaited(self.internals.client(), &path);
            return;
        }
        let result = delete_guaranteed(
            self.internals.client(),
            &path,
            self.internals.retry_policy().as_ref(),
            self.wait,
        );
        if let Err(e) = result {
            log::warn!("cleanup of {path}: {e}");
        }
    }
}

impl Drop for NodeCleanup<'_> {
    fn drop(&mut self) {
        self.delete();
    }
}
