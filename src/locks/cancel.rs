//! Cancellable acquires: [`Acquire`], the options of an acquire that a timeout and a
//! [`CancelToken`] can end, and how a recipe runs one ([`run`]: the token current on the
//! acquiring thread for the call, the session's waits woken by a cancel).
//!
//! The token itself, the thread's current token and the rule that a cancelled acquire is an
//! acquire past its deadline are beneath both the client and the locks, in
//! `primitives/cancel.rs`; the old paths (`locks::cancel::requested`, `sleep`) still lead
//! there.

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::client::{SharedClient, ZkClient};
use crate::error::{Error, Result};
use crate::primitives::cancel::{current, enter, Registration};
pub use crate::primitives::cancel::{CancelToken, Cancelled};
// The old paths of the primitives, kept for the code that still names them here.
#[allow(unused_imports)]
pub(crate) use crate::primitives::cancel::{requested, sleep};

use super::internals::Waiter;

/// How an acquire may end without the lock: a timeout, a [`CancelToken`], both, or neither
/// (it then waits until it holds the lock or fails). Given to
/// [`InterProcessLock::try_acquire_with`](super::InterProcessLock::try_acquire_with),
/// [`InterProcessLock::try_lock_with`](super::InterProcessLock::try_lock_with) and the
/// semaphore's [`acquire_with`](super::InterProcessSemaphoreV2::acquire_with).
///
/// ```
/// use std::time::Duration;
/// use zk_locks::locks::{Acquire, CancelToken};
///
/// let token = CancelToken::new();
/// let how = Acquire::new().timeout(Duration::from_secs(30)).cancel(&token);
/// # let _ = how;
/// ```
#[derive(Debug, Clone, Default)]
pub struct Acquire {
    timeout: Option<Duration>,
    cancel: Option<CancelToken>,
}

impl Acquire {
    /// No timeout, no token: wait until held.
    pub fn new() -> Acquire {
        Acquire::default()
    }

    /// Gives up after `timeout` (the call then returns "not acquired", nothing left behind).
    pub fn timeout(mut self, timeout: Duration) -> Acquire {
        self.timeout = Some(timeout);
        self
    }

    /// Gives up when `token` is cancelled: the call returns [`Error::Cancelled`].
    pub fn cancel(mut self, token: &CancelToken) -> Acquire {
        self.cancel = Some(token.clone());
        self
    }

    /// The timeout, if any.
    pub fn timeout_value(&self) -> Option<Duration> {
        self.timeout
    }

    /// The token, if any.
    pub fn cancel_token(&self) -> Option<&CancelToken> {
        self.cancel.as_ref()
    }

    /// The same options with another timeout (`None`: none), the token kept.
    pub(crate) fn with_timeout(&self, timeout: Option<Duration>) -> Acquire {
        Acquire {
            timeout,
            cancel: self.cancel.clone(),
        }
    }

    /// [`Error::Cancelled`] for `path` when the token is cancelled.
    pub(crate) fn check(&self, path: &str) -> Result<()> {
        match &self.cancel {
            Some(t) if t.is_cancelled() => Err(cancelled(path)),
            _ => Ok(()),
        }
    }
}

fn cancelled(path: &str) -> Error {
    Error::Cancelled {
        path: path.to_string(),
    }
}

/// Wakes `waiter` when the current token is cancelled (until the registration drops).
pub(crate) fn wake_on_cancel(waiter: &Arc<Waiter>) -> Option<Registration> {
    let token = current()?;
    let w = Arc::downgrade(waiter);
    Some(token.wake_on(move || {
        if let Some(w) = w.upgrade() {
            w.signal(None);
        }
    }))
}

/// While alive, `token` is the calling thread's current token and a cancel wakes the waits on
/// `client`'s session; the previous token comes back when it drops.
struct Scope {
    previous: Option<CancelToken>,
    _wake: Registration,
}

impl Scope {
    fn enter(token: &CancelToken, client: &SharedClient) -> Scope {
        let weak: Weak<dyn ZkClient> = Arc::downgrade(client);
        let wake = token.wake_on(move || {
            if let Some(c) = weak.upgrade() {
                c.session().wake();
            }
        });
        let previous = enter(Some(token.clone()));
        Scope {
            previous,
            _wake: wake,
        }
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        enter(self.previous.take());
    }
}

/// Runs `f` with `token` as the calling thread's current token (as a cancellable acquire
/// does): every deadline of the thread passes once it is cancelled, and the waits on
/// `client`'s session and the thread's waiters wake. What a leader election's own thread runs
/// its waits under, so that closing the election (or ending a leadership) ends them.
pub(crate) fn within<T>(token: &CancelToken, client: &SharedClient, f: impl FnOnce() -> T) -> T {
    let _scope = Scope::enter(token, client);
    f()
}

/// Runs a recipe's acquire as `how` says: `acquire(timeout)` with the token current on this
/// thread. A token cancelled before the call: [`Error::Cancelled`] and no request; an acquire
/// that ends without the lock while the token is cancelled: [`Error::Cancelled`]; an untimed
/// one that ends without it otherwise: [`Error::Closed`] (only a closed client does that). An
/// error met on the way (the client closed, ...) is returned as it is, and a lock granted
/// before the cancel was seen is returned held.
pub(crate) fn run<T>(
    how: &Acquire,
    path: &str,
    client: &SharedClient,
    acquire: impl FnOnce(Option<Duration>) -> Result<Option<T>>,
) -> Result<Option<T>> {
    let _scope = how.cancel.as_ref().map(|t| Scope::enter(t, client));
    how.check(path)?;
    match acquire(how.timeout)? {
        Some(held) => Ok(Some(held)),
        None if how.cancel.as_ref().is_some_and(CancelToken::is_cancelled) => Err(cancelled(path)),
        None if how.timeout.is_none() => Err(Error::Closed),
        None => Ok(None),
    }
}
