//! What a library must do for the phases ([`Side`]): hold every lock on a holder session,
//! release them all, start one waiter that keeps its acquire or gives it up; and what a
//! waiter is to the driver ([`Waiter`]: a way to cancel it, a handle to join it; [`Gate`]:
//! what a holding waiter waits for before it drops its guard).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Opened once: holding waiters then drop their guards, all at once. Waited for by tasks
/// ([`Gate::wait`]) and by blocking threads ([`Gate::wait_blocking`]) alike.
#[derive(Default)]
pub(super) struct Gate {
    open: AtomicBool,
    tasks: Notify,
    lock: Mutex<()>,
    threads: Condvar,
    /// Every release call's time a holding waiter made once the gate opened.
    releases: Mutex<Vec<Duration>>,
}

impl Gate {
    pub(super) fn new() -> Arc<Gate> {
        Arc::new(Gate::default())
    }

    /// Opens the gate for every waiter, tasks and threads.
    pub(super) fn open(&self) {
        self.open.store(true, Ordering::SeqCst);
        self.tasks.notify_waiters();
        let _held = self.lock.lock();
        self.threads.notify_all();
    }

    /// Waits in a task until the gate opens.
    pub(super) async fn wait(&self) {
        loop {
            // Created before the check: a `notify_waiters` after it reaches this future.
            let opened = self.tasks.notified();
            if self.open.load(Ordering::SeqCst) {
                return;
            }
            opened.await;
        }
    }

    /// Notes how long one waiter's release call took (dropping its guard, or `unlock`).
    pub(super) fn released(&self, took: Duration) {
        self.releases.lock().push(took);
    }

    /// The release calls' times noted, sorted.
    pub(super) fn releases(&self) -> Vec<Duration> {
        let mut releases = self.releases.lock().clone();
        releases.sort_unstable();
        releases
    }

    /// Waits on a blocking thread until the gate opens.
    pub(super) fn wait_blocking(&self) {
        let mut held = self.lock.lock();
        while !self.open.load(Ordering::SeqCst) {
            self.threads.wait(&mut held);
        }
    }
}

/// What a waiter does with its acquire.
#[derive(Clone)]
pub(super) enum How {
    /// Waits until it holds the lock, then releases it at once. Its cancel (a stalled kept
    /// waiter, once the stall bound has passed) ends the wait the side's own way.
    Keep,
    /// Waits until its cancel: by the side's way of giving up a queued acquire (ours: the
    /// acquire's `CancelToken`; an async client: dropping the lock future).
    Cancellable,
    /// Gives up this long after it started, whatever it is doing then (ours: the token
    /// cancelled by a timer task; an async client: `tokio::time::timeout`).
    CancelAfter(Duration),
    /// Waits until it holds the lock, then holds it until the gate opens and drops its guard
    /// (from its task, or its blocking thread).
    Hold(Arc<Gate>),
}

impl How {
    pub(super) fn is_keep(&self) -> bool {
        matches!(self, How::Keep)
    }
}

/// How a waiter ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Outcome {
    /// It held the lock (and released it).
    Acquired,
    /// It gave up without the lock.
    Cancelled,
    /// The library answered an error.
    Failed(String),
}

impl Outcome {
    /// How an async waiter ends once its acquire answered: held (counted on `tally`, kept
    /// until the gate opens when `how` says so, then released by dropping the guard), or the
    /// library's error.
    pub(super) async fn of<G, E: std::fmt::Display>(
        acquired: Result<G, E>,
        how: &How,
        tally: &Tally,
    ) -> Outcome {
        let guard = match acquired {
            Ok(guard) => guard,
            Err(e) => return Outcome::Failed(e.to_string()),
        };
        tally.acquired();
        if let How::Hold(gate) = how {
            gate.wait().await;
            let started = Instant::now();
            drop(guard);
            gate.released(started.elapsed());
        }
        Outcome::Acquired
    }
}

/// Counts the acquisitions of one group of waiters and notes when the last one came.
pub(super) struct Tally {
    acquired: AtomicUsize,
    target: usize,
    last_at: Mutex<Option<Instant>>,
}

impl Tally {
    /// A tally complete at `target` acquisitions.
    pub(super) fn new(target: usize) -> Arc<Tally> {
        Arc::new(Tally {
            acquired: AtomicUsize::new(0),
            target,
            last_at: Mutex::new(None),
        })
    }

    /// Called by a waiter holding the lock, before it releases.
    pub(super) fn acquired(&self) {
        if self.acquired.fetch_add(1, Ordering::SeqCst) + 1 == self.target {
            *self.last_at.lock() = Some(Instant::now());
        }
    }

    pub(super) fn count(&self) -> usize {
        self.acquired.load(Ordering::SeqCst)
    }

    /// When the target was reached, if it was.
    pub(super) fn completed_at(&self) -> Option<Instant> {
        *self.last_at.lock()
    }

    /// Waits until the target is reached or `bound` has passed; the acquisitions so far.
    pub(super) async fn wait(&self, bound: Duration) -> usize {
        let deadline = Instant::now() + bound;
        while self.count() < self.target && Instant::now() < deadline {
            // The waiters run on other threads and tasks; a 1 ms poll costs the drain's
            // timing at most 1 ms.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        self.count()
    }
}

/// One started waiter.
pub(super) struct Waiter {
    cancel: Option<Box<dyn FnOnce() + Send>>,
    handle: JoinHandle<Outcome>,
}

impl Waiter {
    pub(super) fn new(cancel: Box<dyn FnOnce() + Send>, handle: JoinHandle<Outcome>) -> Waiter {
        Waiter {
            cancel: Some(cancel),
            handle,
        }
    }

    /// Gives the acquire up (nothing once it has ended).
    pub(super) fn cancel(&mut self) {
        if let Some(cancel) = self.cancel.take() {
            cancel();
        }
    }
}

/// Joins every waiter of `waiters` within `bound` (from now): the outcomes in order, a
/// waiter not ended by then `Failed`.
pub(super) async fn join_all(waiters: Vec<Waiter>, bound: Duration) -> Vec<Outcome> {
    let deadline = tokio::time::Instant::now() + bound;
    let mut outcomes = Vec::with_capacity(waiters.len());
    for w in waiters {
        let outcome = match tokio::time::timeout_at(deadline, w.handle).await {
            Ok(Ok(outcome)) => outcome,
            // Aborting a task drops its future: how an async lock is given up.
            Ok(Err(e)) if e.is_cancelled() => Outcome::Cancelled,
            Ok(Err(e)) => Outcome::Failed(format!("waiter panicked: {e}")),
            Err(_) => Outcome::Failed(format!("not ended within {bound:?}")),
        };
        outcomes.push(outcome);
    }
    outcomes
}

/// One library under measurement.
pub(super) trait Side {
    /// The row's name.
    fn name(&self) -> &'static str;
    /// Opens the holder's session at `holder` and the waiters' (`sessions` of them) at
    /// `waiters` (the same server, perhaps through a proxy).
    async fn open(
        &mut self,
        holder: &str,
        waiters: &str,
        sessions: usize,
        timeout: Duration,
    ) -> Result<(), String>;
    /// Takes the lock at every path of `dirs` on the holder's session.
    async fn hold(&mut self, dirs: &[String]) -> Result<(), String>;
    /// Releases every holder's lock, all at once; returns once the releases are under way.
    async fn release(&mut self) -> Result<(), String>;
    /// Starts one waiter for the lock at `dir` on waiter session `session`, counting its
    /// acquisition in `tally`.
    fn start(&self, dir: &str, session: usize, how: How, tally: &Arc<Tally>) -> Waiter;
    /// Closes every session.
    async fn close(&mut self);
}
