//! Seeing locks from outside, the part the client layer carries: the [`LockObserver`] trait,
//! the [`LockEvent`] it is told, the [`ParticipantKind`] events name, and [`ObserverSlot`], the
//! client options' field. The reporting itself (`Observe`) is the engine's, in
//! `locks/observe.rs`, which re-exports these at their public paths (`zk_locks::locks::...`).

use std::sync::Arc;
use std::time::Duration;

use crate::error::Error;

/// Which kind of node a participant queues with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParticipantKind {
    /// A mutex node ([`crate::locks::LOCK_NAME`]).
    Mutex,
    /// A read/write lock's read node ([`crate::locks::READ_LOCK_NAME`]).
    Read,
    /// A read/write lock's write node ([`crate::locks::WRITE_LOCK_NAME`]).
    Write,
    /// A semaphore's lease node ([`crate::locks::LEASE_BASE_NAME`]).
    Lease,
    /// A leader latch's node ([`crate::locks::LATCH_NAME`]).
    Latch,
}

impl ParticipantKind {
    /// A short lower-case name: `mutex`, `read`, `write`, `lease`, `latch`.
    pub fn as_str(self) -> &'static str {
        match self {
            ParticipantKind::Mutex => "mutex",
            ParticipantKind::Read => "read",
            ParticipantKind::Write => "write",
            ParticipantKind::Lease => "lease",
            ParticipantKind::Latch => "latch",
        }
    }
}

impl std::fmt::Display for ParticipantKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Told of every lock event of the recipes it is set on: a place to export wait and hold
/// times, lost locks and timeouts to a service's own metrics. Every method has a default
/// that does nothing, so an observer implements only what it exports.
///
/// Set it on a client ([`crate::client::native::NativeOptions::lock_observer()`],
/// [`crate::client::memory::MemoryOptions::lock_observer()`]: every recipe made on that client
/// reports to it) or on one recipe (`with_observer` on [`crate::locks::InterProcessMutex`],
/// [`crate::locks::InterProcessReadWriteLock`], [`crate::locks::InterProcessSemaphoreV2`],
/// [`crate::locks::InterProcessSemaphoreMutex`]; it replaces the client's for that recipe). A
/// multi-lock reports through the locks it is made of.
///
/// The methods run on the thread that acquires, releases or looks at the state (a guard's
/// drop, a wait), or on a background thread for a release left to the background, never on a
/// thread that wakes waiters (watch and session callbacks): an observer that blocks holds up
/// only the call it runs in (a blocked `released` delays that hold's delete, so its
/// successor), no other lock or session. Keep them short and never block on a lock of this
/// crate there.
///
/// **A panic in an observer is caught**, logged at `error` level and the event dropped, as
/// the crate does with every callback of user code (session, watch, revocation and
/// `SharedCount` listeners): the library goes on as if the method had returned, so the
/// acquire still returns its hold, the release still deletes its node, and no node is left
/// that nobody owns. (Under `panic = "abort"` the process ends, and its session with it.)
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
/// use zk_locks::client::memory::{MemoryEnsemble, MemoryOptions};
/// use zk_locks::locks::{LockEvent, LockObserver};
/// use zk_locks::{InterProcessLock, InterProcessMutex};
///
/// #[derive(Default)]
/// struct Metrics {
///     acquisitions: AtomicU64,
///     held_micros: AtomicU64,
/// }
///
/// impl LockObserver for Metrics {
///     fn acquired(&self, _event: &LockEvent<'_>, _wait: Duration) {
///         self.acquisitions.fetch_add(1, Ordering::Relaxed); // or a wait histogram
///     }
///     fn released(&self, _event: &LockEvent<'_>, held: Duration) {
///         self.held_micros.fetch_add(held.as_micros() as u64, Ordering::Relaxed);
///     }
/// }
///
/// let metrics = Arc::new(Metrics::default());
/// let ensemble = MemoryEnsemble::new();
/// // For every recipe of this client:
/// let client = ensemble.connect_with(MemoryOptions::new().lock_observer(metrics.clone()))?;
/// let mutex = InterProcessMutex::new(client, "/locks/report")?;
/// drop(mutex.lock()?);
/// assert_eq!(metrics.acquisitions.load(Ordering::Relaxed), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait LockObserver: Send + Sync {
    /// The acquisition had to wait: its node is in the queue behind a holder. Once per
    /// node that waits, before the acquisition's `acquired`, `timed_out`, `cancelled` or
    /// `failed` (an acquisition that queues anew because its session was lost reports it
    /// again). A semaphore reports it for its admission node when it waits to be admitted, else for
    /// its lease node when it waits for room, never both.
    fn queued(&self, event: &LockEvent<'_>) {
        let _ = event;
    }

    /// The lock (or lease) is held; `wait` is the time since the acquire started (for a
    /// semaphore, admission included). A reentrant acquire of a mutex hold the thread has
    /// already is no new hold: it reports nothing (nor does its release).
    fn acquired(&self, event: &LockEvent<'_>, wait: Duration) {
        let _ = (event, wait);
    }

    /// A timed acquire reached its deadline after `wait` without the lock (it returned "not
    /// acquired"); nothing of it is left in the queue. A cancelled one is
    /// [`Self::cancelled`], never this.
    fn timed_out(&self, lock: &str, kind: ParticipantKind, wait: Duration) {
        let _ = (lock, kind, wait);
    }

    /// An acquire was cancelled through its [`CancelToken`](crate::locks::CancelToken) after
    /// `wait` without the lock (it returned [`Error::Cancelled`](crate::Error::Cancelled));
    /// nothing of it is left in the queue. A token cancelled before the call makes no request
    /// and reports nothing.
    fn cancelled(&self, lock: &str, kind: ParticipantKind, wait: Duration) {
        let _ = (lock, kind, wait);
    }

    /// An acquire failed with `error` (see [`Error`](crate::Error)).
    fn failed(&self, lock: &str, kind: ParticipantKind, error: &Error) {
        let _ = (lock, kind, error);
    }

    /// The hold is being given back (reported as the release starts, before the delete of
    /// its node: a successor's `acquired` never comes before it); `held` is the time since
    /// it was acquired. Once per hold, lost or not.
    fn released(&self, event: &LockEvent<'_>, held: Duration) {
        let _ = (event, held);
    }

    /// The hold became `Suspect` (the connection is suspended: the session may expire), as
    /// observed by a state query or a wait on it.
    fn suspect(&self, event: &LockEvent<'_>) {
        let _ = event;
    }

    /// A `Suspect` hold is `Held` again (the session came back with the node).
    fn held_again(&self, event: &LockEvent<'_>) {
        let _ = event;
    }

    /// The hold is `Lost` (session lost, client closed, or node deleted), as observed by a
    /// state query, a wait, or at the latest by its release. Once per hold.
    fn lost(&self, event: &LockEvent<'_>) {
        let _ = event;
    }
}

/// What an event is about: one node of one lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockEvent<'a> {
    /// The recipe's path (the mutex's, the read/write lock's, the semaphore's).
    pub lock: &'a str,
    /// The kind of node (a semaphore's are `Lease`, its admission node included).
    pub kind: ParticipantKind,
    /// The node's full path.
    pub node: &'a str,
    /// The session the node was created in, when the backend knows it (ZooKeeper prints it
    /// in hex: `format!("0x{id:x}")`).
    pub session_id: Option<i64>,
}

/// A client option's observer: compared by identity, so the options stay comparable.
#[derive(Clone, Default)]
pub(crate) struct ObserverSlot(pub(crate) Option<Arc<dyn LockObserver>>);

impl PartialEq for ObserverSlot {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (a, b) => a.is_none() && b.is_none(),
        }
    }
}

impl Eq for ObserverSlot {}

impl std::fmt::Debug for ObserverSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Some(..)" } else { "None" })
    }
}
