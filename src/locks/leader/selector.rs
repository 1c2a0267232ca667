//! `LeaderSelector`: Curator's leader selector on the crate's mutex. Every participant queues
//! for one `InterProcessMutex` (`_c_<uuid>-lock-<seq>` nodes, the id as data); the holder's
//! callback runs on the selector's own thread, and leadership is given up when it returns.
//!
//! Rules kept here:
//! - **Leadership ends for others only when the node goes**: the callback returned (the
//!   node is then deleted), or the session was lost (the server deleted it). A callback that
//!   ignores its leadership's token keeps the node, as a Curator `takeLeadership` that
//!   ignores its interrupt keeps the mutex.
//! - **The token fires by Curator's default policy**: the node's state leaves `Held`
//!   (`Suspect`: the session suspended; `Lost`), the leadership is interrupted
//!   ([`LeaderSelector::interrupt_leadership`]), or the selector is closed.
//! - **Requeueing is explicit or automatic**: after the callback returns the selector
//!   queues again only when [`LeaderSelector::requeue`] was called since, or with auto
//!   requeue.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::client::SharedClient;
use crate::error::{Error, Result};
use crate::session::ConnectionState;

use super::super::cancel::{self, Acquire, CancelToken};
use super::super::held::{HeldNode, LockState};
use super::super::participants::Participant;
use super::super::watching::wait_on;
use super::super::{default_node_data, InterProcessLock, InterProcessMutex};
use super::leadership::Leadership;
use super::phase::{not_participating, Phase};

/// The pause before queueing again after an acquire that failed, with auto requeue.
const PAUSE_AFTER_FAILURE: Duration = Duration::from_secs(1);

/// What the selector runs while this participant leads.
type Callback = Box<dyn FnMut(&Leadership) + Send>;

/// A participant in a leader election that runs a callback while it leads, wire-compatible
/// with Curator 5.4's `LeaderSelector` (its election is an `InterProcessMutex` whose nodes
/// hold the participant id).
///
/// [`Self::start`] queues the participant on a thread the selector owns; when it leads, the
/// callback runs there with the [`Leadership`], and leadership is given up when the callback
/// returns. [`Self::requeue`] (or [`Self::auto_requeue`]) queues it again afterwards.
///
/// **Stopping cooperatively.** Rust has no thread interrupt: the callback watches
/// [`Leadership::ended`] (or blocks in [`Leadership::wait_while_leading`]), cancelled as
/// Curator's default policy cancels `takeLeadership` — the session suspended or lost (the
/// node's state leaves `Held`), [`Self::interrupt_leadership`], or [`Self::close`] — and
/// returns. **A callback that ignores it keeps the leadership for others** (its node stays)
/// until it returns or the session is lost; its leadership then reads `Suspect` or `Lost`,
/// which the callback may not notice: it must not write without checking the state, the
/// term, or through [`Leadership::fenced_multi`].
///
/// **A call is not a spell.** The callback can start after its spell already ended: the
/// session can go between the grant and the call, and a later participant may lead by then
/// with a larger term. Check [`Leadership::is_leading`] before acting on the leadership (or
/// announcing its term); a spell that was never leading was never leadership.
///
/// ```
/// use std::sync::mpsc;
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::locks::LeaderSelector;
///
/// let ensemble = MemoryEnsemble::new();
/// let (led, terms) = mpsc::channel();
/// let selector = LeaderSelector::new(ensemble.connect(), "/election/reports", move |leadership| {
///     let _ = led.send(leadership.term());
///     // Lead until told to stop (the session in doubt, interrupted, closed).
///     leadership.wait_while_leading(None);
/// })?
/// .with_id("host-a");
/// selector.start()?;
/// let term = terms.recv().unwrap();
/// assert!(term > 0);
/// assert_eq!(selector.leader()?.unwrap().id(), "host-a");
/// selector.interrupt_leadership(); // the callback returns, leadership is given up
/// selector.close()?;
/// # Ok::<(), zk_locks::Error>(())
/// ```
pub struct LeaderSelector {
    shared: Arc<Shared>,
}

struct Shared {
    mutex: InterProcessMutex,
    id: Arc<str>,
    path: Arc<str>,
    auto_requeue: AtomicBool,
    callback: Mutex<Callback>,
    /// Cancelled by close: the queueing ends.
    stop: CancelToken,
    status: Mutex<Status>,
    changed: Condvar,
    thread: Mutex<Option<JoinHandle<()>>>,
}

struct Status {
    phase: Phase,
    /// Asked to queue (and not leading yet): Curator's `isQueued`.
    queued: bool,
    leading: Option<Leadership>,
}

impl LeaderSelector {
    /// A participant in the election at `path` that runs `callback` while it leads. Until
    /// [`Self::with_id`] its id is `<host> <pid>` (where Curator's default is the IP
    /// address): what its node holds, [`Self::id`] and [`Leadership::id`] say.
    pub fn new(
        client: SharedClient,
        path: &str,
        callback: impl FnMut(&Leadership) + Send + 'static,
    ) -> Result<LeaderSelector> {
        let mutex = InterProcessMutex::new(client, path)?;
        Ok(LeaderSelector {
            shared: Arc::new(Shared {
                mutex,
                id: node_id(&default_node_data()),
                path: path.into(),
                auto_requeue: AtomicBool::new(false),
                callback: Mutex::new(Box::new(callback)),
                stop: CancelToken::new(),
                status: Mutex::new(Status {
                    phase: Phase::Latent,
                    queued: false,
                    leading: None,
                }),
                changed: Condvar::new(),
                thread: Mutex::new(None),
            }),
        })
    }

    /// The participant id, stored in its node (Curator's `setId`); an empty id is the
    /// default, `<host> <pid>`.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        let id: String = id.into();
        match Arc::get_mut(&mut self.shared) {
            Some(shared) => {
                let data = match id.is_empty() {
                    true => default_node_data(),
                    false => id.into_bytes(),
                };
                // The id the leadership names is the node's data, byte for byte.
                shared.id = node_id(&data);
                shared.mutex.set_data(data);
            }
            None => log::warn!(
                "leader selector {}: id set after start; ignored",
                self.path()
            ),
        }
        self
    }

    /// Queues again by itself each time the callback returns (Curator's `autoRequeue`), and
    /// after an acquire that failed.
    pub fn auto_requeue(&self) {
        self.shared.auto_requeue.store(true, Ordering::SeqCst);
    }

    /// The election's path.
    pub fn path(&self) -> &str {
        &self.shared.path
    }

    /// The participant id: its node's data (`<host> <pid>` unless [`Self::with_id`]).
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// Joins the election (queues once). Starting twice, or after close, is
    /// [`Error::NotParticipating`].
    pub fn start(&self) -> Result<()> {
        let mut status = self.shared.status.lock();
        if status.phase != Phase::Latent {
            return Err(not_participating(self.path(), "started already, or closed"));
        }
        let shared = self.shared.clone();
        let handle = thread::Builder::new()
            .name("zk-leader-selector".into())
            .spawn(move || run(&shared))
            .map_err(|e| Error::Io {
                context: "starting the leader selector's thread".into(),
                source: e,
            })?;
        status.phase = Phase::Started;
        status.queued = true;
        *self.shared.thread.lock() = Some(handle);
        Ok(())
    }

    /// Queues again once the callback has returned (Curator's `requeue`): true when it was
    /// not queued or leading already. After close, [`Error::NotParticipating`].
    pub fn requeue(&self) -> Result<bool> {
        let mut status = self.shared.status.lock();
        if status.phase != Phase::Started {
            return Err(not_participating(self.path(), "not started, or closed"));
        }
        if status.queued || status.leading.is_some() {
            return Ok(false);
        }
        status.queued = true;
        self.shared.changed.notify_all();
        Ok(true)
    }

    /// Ends the current leadership's token (the callback should return; see the type's
    /// docs). Nothing when not leading.
    pub fn interrupt_leadership(&self) {
        if let Some(leadership) = self.leadership() {
            leadership.end();
        }
    }

    /// Whether this participant leads now: its callback runs and its node is `Held`.
    pub fn has_leadership(&self) -> bool {
        self.leadership().is_some_and(|l| l.is_leading())
    }

    /// The current leadership, while the callback runs.
    pub fn leadership(&self) -> Option<Leadership> {
        self.shared.status.lock().leading.clone()
    }

    /// Leaves the election: a queued node is withdrawn, a running callback's token is
    /// cancelled, and close waits until the callback returns and the node is deleted (the
    /// next participant then leads). Closed from the callback, it returns at once (the
    /// selector's thread ends once the callback returns). Twice, or never started:
    /// [`Error::NotParticipating`].
    pub fn close(&self) -> Result<()> {
        {
            let mut status = self.shared.status.lock();
            if status.phase != Phase::Started {
                return Err(not_participating(
                    self.path(),
                    "not started, or closed already",
                ));
            }
            status.phase = Phase::Closed;
            if let Some(leadership) = &status.leading {
                leadership.end();
            }
            self.shared.changed.notify_all();
        }
        self.shared.stop.cancel();
        let handle = self.shared.thread.lock().take();
        if let Some(handle) = handle {
            if handle.thread().id() != thread::current().id() && handle.join().is_err() {
                log::error!("leader selector {}: its thread panicked", self.path());
            }
        }
        Ok(())
    }

    /// Every participant in queue order, the leader first and flagged (`is_holder`), with
    /// its [`Participant::id`] (Curator's `getParticipants`).
    pub fn participants(&self) -> Result<Vec<Participant>> {
        self.shared.mutex.participants()
    }

    /// The leader as the server shows it (Curator's `getLeader`); `None` when nobody takes
    /// part.
    pub fn leader(&self) -> Result<Option<Participant>> {
        Ok(self.participants()?.into_iter().next())
    }
}

impl Drop for LeaderSelector {
    fn drop(&mut self) {
        if self.shared.status.lock().phase == Phase::Started {
            if let Err(e) = self.close() {
                log::warn!("closing leader selector {} on drop: {e}", self.path());
            }
        }
    }
}

impl std::fmt::Debug for LeaderSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = self.shared.status.lock();
        f.debug_struct("LeaderSelector")
            .field("path", &self.shared.path)
            .field("id", &self.shared.id)
            .field("phase", &status.phase)
            .field("leading", &status.leading.is_some())
            .finish()
    }
}

/// The id a node's data names (`<host> <pid>` is UTF-8 on every host we run on; lossy
/// otherwise).
fn node_id(data: &[u8]) -> Arc<str> {
    String::from_utf8_lossy(data).into()
}

/// The selector's thread: wait to be queued, acquire, lead (run the callback), give back;
/// until closed or the client is.
fn run(shared: &Shared) {
    let client = shared.mutex.client().clone();
    while wait_queued(shared) {
        let how = Acquire::new().cancel(&shared.stop);
        match shared.mutex.acquire_owned_hold(&how) {
            Ok(Some(nodes)) => lead(shared, nodes),
            Ok(None) | Err(Error::Closed) | Err(Error::Cancelled { .. }) => break,
            Err(_) if client.session().state() == ConnectionState::Closed => break,
            Err(e) => {
                let again = shared.auto_requeue.load(Ordering::SeqCst);
                log::warn!("leader selector {}: queueing failed ({e})", shared.path);
                shared.status.lock().queued = again;
                if again {
                    cancel::within(&shared.stop, &client, || cancel::sleep(PAUSE_AFTER_FAILURE));
                }
            }
        }
    }
    shared.status.lock().queued = false;
}

/// Blocks until queued (true) or closed (false).
fn wait_queued(shared: &Shared) -> bool {
    let mut status = shared.status.lock();
    loop {
        if status.phase != Phase::Started {
            return false;
        }
        if status.queued {
            return true;
        }
        shared.changed.wait(&mut status);
    }
}

/// Leads through the owned hold `nodes`: the callback runs while a watcher ends the
/// leadership's token when the node leaves `Held`; then the hold is given back.
fn lead(shared: &Shared, nodes: Vec<Arc<HeldNode>>) {
    let Some(node) = nodes.first().cloned() else {
        return;
    };
    let term = match node.fencing_token() {
        Ok(term) => term,
        Err(e) => {
            log::warn!(
                "leader selector {}: no term for {}: {e}",
                shared.path,
                node.path()
            );
            give_back(shared, &nodes, &node);
            return;
        }
    };
    let given_up = Arc::new(AtomicBool::new(false));
    let spell = Leadership::new(
        node.clone(),
        given_up.clone(),
        term,
        shared.id.clone(),
        shared.path.clone(),
    );
    {
        let mut status = shared.status.lock();
        status.queued = false;
        status.leading = Some(spell.clone());
        if status.phase != Phase::Started {
            spell.end(); // closed while the acquire was granted
        }
    }
    log::info!(
        "leader selector {}: {} leads (term {term})",
        shared.path,
        shared.id
    );
    thread::scope(|s| {
        // The policy: the token ends when the node leaves `Held` (or the spell ends).
        let watcher = thread::Builder::new()
            .name("zk-leader-policy".into())
            .spawn_scoped(s, || {
                let state = cancel::within(spell.ended(), node.client(), || {
                    wait_on(&[node.as_ref()], None, |s| s == LockState::Held)
                });
                if state != LockState::Held {
                    log::info!("leader selector {}: leadership {state:?}", shared.path);
                }
                spell.end();
            });
        if let Err(e) = watcher {
            // Without it nothing would end the token on a lost session: do not lead.
            log::error!(
                "leader selector {}: cannot watch the leadership: {e}",
                shared.path
            );
            spell.end();
            return;
        }
        let mut callback = shared.callback.lock();
        if catch_unwind(AssertUnwindSafe(|| (*callback)(&spell))).is_err() {
            log::error!("leader selector {}: the callback panicked", shared.path);
        }
        spell.end();
    });
    {
        let mut status = shared.status.lock();
        status.leading = None;
        status.queued = status.phase == Phase::Started
            && (status.queued || shared.auto_requeue.load(Ordering::SeqCst));
    }
    // Every copy of the leadership reads `Lost` before the delete can let a successor lead.
    given_up.store(true, Ordering::SeqCst);
    give_back(shared, &nodes, &node);
}

/// Gives back an owned hold (its node deleted) and marks the leadership over.
fn give_back(shared: &Shared, nodes: &[Arc<HeldNode>], node: &HeldNode) {
    if let Err(e) = shared.mutex.release_owned_hold(nodes) {
        log::warn!(
            "leader selector {}: giving back {}: {e}",
            shared.path,
            node.path()
        );
    }
    node.mark_lost();
    // The spell is over: a leadership kept by the user no longer keeps the session proving.
    node.end_interest();
}
