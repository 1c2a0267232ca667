//! Cancellable waits: a [`CancelToken`] that any thread may trigger, and [`Acquire`], the
//! options of an acquire that a token (and a timeout) can end.
//!
//! The rule this module keeps: **a cancelled acquire is an acquire past its deadline.** While
//! a recipe runs a call given a token, that token is the calling thread's *current* token
//! ([`run`] enters a scope, restored when the call returns); from the moment it is cancelled,
//! `internals::past` says every deadline of that thread has passed, so the deadline rules hold
//! as they are: no new round of the wait loop, no create, no retry; one delete of each node the
//! call made, and none when its link is in trouble (the delete then goes to the background).
//! Every blocking wait of the acquiring thread wakes at once: the waiter's `Condvar` (through
//! [`wake_on_cancel`]), the session's (the client is registered by [`run`]), and the pause
//! between retries (slept on the token, [`sleep`]). A request already sent is waited for (at
//! most one call timeout), so a cancelled call returns within about one round trip.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::client::{SharedClient, ZkClient};
use crate::error::{Error, Result};

use super::internals::Waiter;

type Wake = Arc<dyn Fn() + Send + Sync>;

#[derive(Default)]
struct Inner {
    cancelled: AtomicBool,
    /// What to wake when cancelled; the `Condvar` wakes a pause between retries.
    wakers: Mutex<Wakers>,
    cond: Condvar,
}

#[derive(Default)]
struct Wakers {
    next: u64,
    list: Vec<(u64, Wake)>,
}

/// A handle that cancels waiting acquires: clone it, give it to an acquire through
/// [`Acquire::cancel`], and call [`CancelToken::cancel`] from any thread.
///
/// A cancelled acquire returns [`Error::Cancelled`] within about one round trip, its node
/// deleted (the queue behind it moves on), the session and every other lock of the client
/// untouched. A token cancelled before the call makes it return at once, without a request.
/// Cancelling is for good: a token, once cancelled, cancels every call given it.
///
/// ```
/// use std::time::Duration;
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::locks::{Acquire, CancelToken, InterProcessLock, InterProcessMutex};
/// use zk_locks::Error;
///
/// let ensemble = MemoryEnsemble::new();
/// let holder = InterProcessMutex::new(ensemble.connect(), "/locks/jobs")?;
/// let _held = holder.lock()?;
///
/// let waiter = InterProcessMutex::new(ensemble.connect(), "/locks/jobs")?;
/// let token = CancelToken::new();
/// let stop = token.clone();
/// std::thread::spawn(move || {
///     std::thread::sleep(Duration::from_millis(50));
///     stop.cancel(); // from a shutdown handler, another thread, ...
/// });
/// let outcome = waiter.try_lock_with(&Acquire::new().cancel(&token));
/// assert!(matches!(outcome, Err(Error::Cancelled { .. })));
/// assert_eq!(holder.participant_nodes()?.len(), 1); // the waiter's node is gone
/// # Ok::<(), zk_locks::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl CancelToken {
    /// A token not cancelled yet.
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// Cancels every acquire given this token, waiting now or later. Callable from any thread
    /// (it only records and wakes: also from a signal-handling thread or a callback).
    pub fn cancel(&self) {
        if self.inner.cancelled.swap(true, Ordering::SeqCst) {
            return;
        }
        let wakers: Vec<Wake> = {
            let w = self.inner.wakers.lock();
            self.inner.cond.notify_all();
            w.list.iter().map(|(_, f)| f.clone()).collect()
        };
        for wake in wakers {
            wake();
        }
    }

    /// True once [`Self::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// Calls `wake` when cancelled, until the registration drops. Registered before the flag
    /// is read, so a cancel is either seen by that read or wakes.
    pub(crate) fn on_cancel(&self, wake: impl Fn() + Send + Sync + 'static) -> Registration {
        let mut w = self.inner.wakers.lock();
        let id = w.next;
        w.next += 1;
        w.list.push((id, Arc::new(wake)));
        Registration {
            inner: Arc::downgrade(&self.inner),
            id,
        }
    }
}

/// Removes a waker from its token when dropped.
pub(crate) struct Registration {
    inner: Weak<Inner>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.upgrade() {
            inner.wakers.lock().list.retain(|(i, _)| *i != self.id);
        }
    }
}

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

thread_local! {
    /// The token of the cancellable acquire this thread is running, if any.
    static CURRENT: RefCell<Option<CancelToken>> = const { RefCell::new(None) };
}

/// The calling thread runs an acquire whose token is cancelled: every deadline has passed.
pub(crate) fn requested() -> bool {
    CURRENT.with(|c| c.borrow().as_ref().is_some_and(CancelToken::is_cancelled))
}

/// Sleeps `pause`, or less when the current token is cancelled meanwhile.
pub(crate) fn sleep(pause: Duration) {
    let token = CURRENT.with(|c| c.borrow().clone());
    let Some(token) = token else {
        std::thread::sleep(pause);
        return;
    };
    let Some(until) = Instant::now().checked_add(pause) else {
        // Longer than an `Instant` can say: until cancelled.
        let mut w = token.inner.wakers.lock();
        while !token.is_cancelled() {
            token.inner.cond.wait(&mut w);
        }
        return;
    };
    let mut w = token.inner.wakers.lock();
    while !token.is_cancelled() {
        if token.inner.cond.wait_until(&mut w, until).timed_out() {
            return;
        }
    }
}

/// Wakes `waiter` when the current token is cancelled (until the registration drops).
pub(crate) fn wake_on_cancel(waiter: &Arc<Waiter>) -> Option<Registration> {
    let token = CURRENT.with(|c| c.borrow().clone())?;
    let w = Arc::downgrade(waiter);
    Some(token.on_cancel(move || {
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
        let wake = token.on_cancel(move || {
            if let Some(c) = weak.upgrade() {
                c.session().wake();
            }
        });
        let previous = CURRENT.with(|c| c.borrow_mut().replace(token.clone()));
        Scope {
            previous,
            _wake: wake,
        }
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
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
