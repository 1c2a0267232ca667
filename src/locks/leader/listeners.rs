//! A latch's listeners: told when this participant becomes leader and when it stops.
//!
//! Rules kept here:
//! - **One thread tells them, in order**: the latch's own thread, so `is_leader` and
//!   `not_leader` alternate as the leadership does, never overlapping.
//! - **A panicking listener is contained**: the panic is caught and logged, the other
//!   listeners are told, and the latch goes on.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use parking_lot::Mutex;

use super::leadership::Leadership;

/// Told of a [`LeaderLatch`](super::LeaderLatch)'s leadership (Curator's
/// `LeaderLatchListener`).
///
/// The methods run on the latch's own thread, one at a time, in the order the leadership
/// changes: keep them short (hand long work to a thread of your own, with the
/// [`Leadership`]). A panic in a listener is caught and logged. Closing the latch from a
/// listener, or dropping it there, is allowed: close then does not wait for the latch's
/// thread (the caller) and returns at once; with
/// [`CloseMode::NotifyLeader`](super::CloseMode::NotifyLeader) every listener told
/// `is_leader` is still told `not_leader` (once the listener returns, before the node is
/// deleted), as Curator's `close(NOTIFY_LEADER)` from `isLeader` does.
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::locks::{LeaderLatch, LeaderLatchListener, Leadership};
///
/// #[derive(Default)]
/// struct Flag(AtomicBool);
///
/// impl LeaderLatchListener for Flag {
///     fn is_leader(&self, leadership: &Leadership) {
///         println!("leading, term {}", leadership.term());
///         self.0.store(true, Ordering::SeqCst);
///     }
///     fn not_leader(&self) {
///         self.0.store(false, Ordering::SeqCst);
///     }
/// }
///
/// let latch = LeaderLatch::new(MemoryEnsemble::new().connect(), "/election/jobs", "a")?;
/// let flag = Arc::new(Flag::default());
/// latch.add_listener(flag.clone());
/// latch.start()?;
/// latch.await_leadership()?;
/// # while !flag.0.load(Ordering::SeqCst) { std::thread::yield_now(); }
/// # Ok::<(), zk_locks::Error>(())
/// ```
pub trait LeaderLatchListener: Send + Sync {
    /// This participant leads now (also again, with the same term, after a `Suspect` spell
    /// that ended with the node still ours). The spell can be over by the time this runs
    /// (the session can go between the latch's check and the call; `not_leader` follows):
    /// check [`Leadership::is_leading`] before acting on it or announcing its term.
    fn is_leader(&self, leadership: &Leadership);

    /// This participant no longer leads: its node's state left `Held` (`Suspect`: the
    /// session may expire; `Lost`), or the latch was closed with
    /// [`CloseMode::NotifyLeader`](super::CloseMode::NotifyLeader). Told before the node is
    /// deleted, so it can stop before another participant leads.
    fn not_leader(&self);
}

/// Identifies a listener added to a latch, to remove it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaderListenerId(u64);

/// The listeners of one latch.
#[derive(Default)]
pub(super) struct Listeners {
    inner: Mutex<Added>,
}

/// The listeners added, each with its number, and the last number given.
#[derive(Default)]
struct Added(u64, Vec<(u64, Arc<dyn LeaderLatchListener>)>);

impl Listeners {
    pub(super) fn add(&self, listener: Arc<dyn LeaderLatchListener>) -> LeaderListenerId {
        let mut inner = self.inner.lock();
        inner.0 += 1;
        let id = inner.0;
        inner.1.push((id, listener));
        LeaderListenerId(id)
    }

    pub(super) fn remove(&self, id: LeaderListenerId) -> bool {
        let mut inner = self.inner.lock();
        let before = inner.1.len();
        inner.1.retain(|(i, _)| *i != id.0);
        inner.1.len() != before
    }

    pub(super) fn clear(&self) {
        self.inner.lock().1.clear();
    }

    /// Tells every listener (outside the lock: a listener may add or remove listeners).
    pub(super) fn tell(&self, leading: Option<&Leadership>) {
        let listeners: Vec<Arc<dyn LeaderLatchListener>> =
            self.inner.lock().1.iter().map(|(_, l)| l.clone()).collect();
        for listener in listeners {
            let told = catch_unwind(AssertUnwindSafe(|| match leading {
                Some(leadership) => listener.is_leader(leadership),
                None => listener.not_leader(),
            }));
            if told.is_err() {
                log::error!("a leader latch listener panicked; the latch goes on");
            }
        }
    }
}
