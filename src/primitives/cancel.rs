//! The cancellation primitive both layers use: a [`CancelToken`] that any thread may trigger,
//! and the calling thread's *current* token, which the session's waits (`session.rs`), the
//! retry pauses (`retry.rs`) and the lock engine's waits all read. It knows nothing of locks
//! or clients: the recipes' side (`Acquire`, running an acquire with its token current, waking
//! a waiter) is `locks/cancel.rs`.
//!
//! The rule it keeps: **a cancelled acquire is an acquire past its deadline.** While a token
//! is current on a thread ([`enter`]), [`requested`] says every deadline of that thread has
//! passed, and every blocking wait of the thread wakes at once: the ones registered with
//! [`CancelToken::wake_on`], and the pause between retries ([`sleep`]).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

type Wake = Arc<dyn Fn() + Send + Sync>;

#[derive(Default)]
struct Inner {
    cancelled: AtomicBool,
    /// What to wake when cancelled; the `Condvar` wakes a pause between retries.
    wakers: Mutex<Wakers>,
    cond: Condvar,
}

/// Keyed by registration: a registration leaves in `O(log n)`, so thousands of waits on one
/// token (each future of a service's shutdown token) cost nothing per wait that ends.
#[derive(Default)]
struct Wakers {
    next: u64,
    list: BTreeMap<u64, Wake>,
}

/// A handle that cancels waiting acquires: clone it, give it to an acquire through
/// [`Acquire::cancel`](crate::locks::Acquire::cancel), and call [`CancelToken::cancel`] from any thread.
///
/// A cancelled acquire returns [`Error::Cancelled`](crate::Error::Cancelled) within about one round trip, its node
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
            w.list.values().cloned().collect()
        };
        for wake in wakers {
            wake();
        }
    }

    /// True once [`Self::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// Runs `callback` once when the token is cancelled, on the thread that cancels it (at
    /// once, on this thread, when it is cancelled already). What drives an async runtime's own
    /// cancellation from this token, with no thread and no task: make this token the service's
    /// shutdown switch and let it cancel the runtime's. The callback must only record and
    /// notify (cancel another token, send on a channel), as [`Self::cancel`] does; it stays
    /// registered for the token's life.
    ///
    /// With tokio-util's `CancellationToken`, both ways:
    ///
    /// ```
    /// use zk_locks::CancelToken;
    /// use tokio_util::sync::CancellationToken;
    ///
    /// # let runtime = tokio::runtime::Builder::new_multi_thread().build().unwrap();
    /// # runtime.block_on(async {
    /// // This token drives the runtime's: no task, no thread.
    /// let locks = CancelToken::new();
    /// let tasks = CancellationToken::new();
    /// locks.on_cancel({
    ///     let tasks = tasks.clone();
    ///     move || tasks.cancel()
    /// });
    /// locks.cancel(); // the shutdown handler
    /// tasks.cancelled().await;
    ///
    /// // The runtime's token drives this one: one task waits for it.
    /// let shutdown = CancellationToken::new();
    /// let locks = CancelToken::new();
    /// tokio::spawn({
    ///     let (shutdown, locks) = (shutdown.clone(), locks.clone());
    ///     async move {
    ///         shutdown.cancelled().await;
    ///         locks.cancel(); // every blocking acquire given `locks` stops waiting
    ///     }
    /// });
    /// shutdown.cancel();
    /// # while !locks.is_cancelled() { tokio::task::yield_now().await; }
    /// # });
    /// ```
    pub fn on_cancel(&self, callback: impl FnOnce() + Send + 'static) {
        let once = Mutex::new(Some(callback));
        let run = move || {
            if let Some(callback) = once.lock().take() {
                callback();
            }
        };
        let run = Arc::new(run);
        // Registered before the flag is read: a cancel either runs it or is seen here (the
        // `Option` runs it once when both happen).
        std::mem::forget(self.wake_on({
            let run = run.clone();
            move || run()
        }));
        if self.is_cancelled() {
            run();
        }
    }

    /// A future that completes once the token is cancelled (at once when it is already):
    /// for `select!` beside other work, with any executor (it needs only the `std::task`
    /// waker it is polled with). `Send + 'static`; dropping it unregisters it.
    ///
    /// ```
    /// use zk_locks::CancelToken;
    ///
    /// # let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// # runtime.block_on(async {
    /// let shutdown = CancelToken::new();
    /// let stop = shutdown.clone();
    /// tokio::spawn(async move { stop.cancel() });
    /// tokio::select! {
    ///     () = shutdown.cancelled() => println!("shutting down"),
    ///     () = std::future::pending::<()>() => unreachable!(),
    /// }
    /// # });
    /// ```
    pub fn cancelled(&self) -> Cancelled {
        Cancelled {
            token: self.clone(),
            waiting: None,
        }
    }

    /// Calls `wake` when cancelled, until the registration drops. Registered before the flag
    /// is read, so a cancel is either seen by that read or wakes.
    pub(crate) fn wake_on(&self, wake: impl Fn() + Send + Sync + 'static) -> Registration {
        let mut w = self.inner.wakers.lock();
        let id = w.next;
        w.next += 1;
        w.list.insert(id, Arc::new(wake));
        Registration {
            inner: Arc::downgrade(&self.inner),
            id,
        }
    }
}

/// The future of [`CancelToken::cancelled`]: ready once the token is cancelled.
#[must_use = "a future does nothing unless polled"]
pub struct Cancelled {
    token: CancelToken,
    /// Once polled while not cancelled: where the latest waker is kept, and the registration
    /// that wakes it.
    waiting: Option<(Arc<Mutex<Option<Waker>>>, Registration)>,
}

impl std::fmt::Debug for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cancelled")
            .field("token", &self.token)
            .finish()
    }
}

impl Future for Cancelled {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.token.is_cancelled() {
            return Poll::Ready(());
        }
        match &self.waiting {
            Some((slot, _)) => {
                let mut slot = slot.lock();
                if !slot.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *slot = Some(cx.waker().clone());
                }
            }
            None => {
                let slot = Arc::new(Mutex::new(Some(cx.waker().clone())));
                let wakes = slot.clone();
                let registration = self.token.wake_on(move || {
                    if let Some(waker) = wakes.lock().take() {
                        waker.wake();
                    }
                });
                self.waiting = Some((slot, registration));
            }
        }
        // Read again after the waker is in place: a cancel in between either is seen here or
        // wakes it.
        match self.token.is_cancelled() {
            true => Poll::Ready(()),
            false => Poll::Pending,
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
            inner.wakers.lock().list.remove(&self.id);
        }
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

/// Makes `token` the calling thread's current token (`None`: none) and returns the previous
/// one, which the caller puts back when its cancellable call returns.
pub(crate) fn enter(token: Option<CancelToken>) -> Option<CancelToken> {
    CURRENT.with(|c| std::mem::replace(&mut *c.borrow_mut(), token))
}

/// The calling thread's current token, if any.
pub(crate) fn current() -> Option<CancelToken> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Sleeps `pause`, or less when the current token is cancelled meanwhile.
pub(crate) fn sleep(pause: Duration) {
    let Some(token) = current() else {
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
