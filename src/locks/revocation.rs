//! Cooperative revocation, as Curator's: anyone may ask a holder to release by writing
//! `__REVOKE__` to its node; a holder that made its lock revocable gets its listener called
//! and is expected to release. Wire-compatible in both directions with Curator's `Revoker`.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::client::{EventType, SharedClient, ZkClient, ZkError};
use crate::error::{Error, Result};

use super::rearm::{spawn, OnReconnect};

/// The exact bytes Curator writes to ask for revocation.
pub const REVOKE_MESSAGE: &[u8] = b"__REVOKE__";

/// Asks holders to release (Curator's `Revoker`).
///
/// ```
/// use std::sync::mpsc;
/// use std::time::Duration;
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::locks::Revoker;
/// use zk_locks::{InterProcessLock, InterProcessMutex};
///
/// let ensemble = MemoryEnsemble::new();
/// let holder = InterProcessMutex::new(ensemble.connect(), "/locks/batch")?;
/// let (asked, revoked) = mpsc::channel();
/// holder.make_revocable(move || { let _ = asked.send(()); }); // should lead to a release
/// let guard = holder.lock()?;
///
/// let other = ensemble.connect(); // any session may ask
/// let nodes = holder.participant_nodes()?;
/// Revoker::attempt_revoke(&other, &nodes[0])?;
/// revoked.recv_timeout(Duration::from_secs(5)).expect("the holder was asked");
/// drop(guard);
/// # Ok::<(), zk_locks::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Revoker;

impl Revoker {
    /// Writes `__REVOKE__` to `node_path` (from `participant_nodes()`). A node that is already
    /// gone is not an error. Any client handle will do: a [`SharedClient`], an
    /// `Arc<MemoryClient>` or `Arc<NativeClient>` as `connect` returns it, or the client itself.
    pub fn attempt_revoke(client: &(impl ZkClient + ?Sized), node_path: &str) -> Result<()> {
        crate::paths::validate_path(node_path)?;
        match client.set_data(node_path, REVOKE_MESSAGE, None) {
            Ok(_) | Err(ZkError::NoNode) => Ok(()),
            Err(code) => Err(Error::zk("set_data", node_path, code)),
        }
    }
}

/// The listener called when a revocation request arrives.
pub(crate) type RevocationListener = Arc<dyn Fn() + Send + Sync>;

/// Keeps a revocation watch on a held node for as long as it lives: armed when the hold is
/// recorded, armed again after a reconnect that dropped it. Dropping it stops the re-arming
/// and the listener calls.
///
/// Rules:
/// - **The listener never runs on the acquiring thread**, nor inside a watch or session
///   callback: each call gets a thread of its own (a listener may wait for the holder, or hand
///   off through a channel), and the mutex records its hold before the watch is armed.
/// - **One call per revoke request.** A request is known by the node's `mzxid` when it was
///   read: a read that sees a request already heard (the re-read after a reconnect, a watch
///   restored beside one armed again) calls nobody. Calls are made one at a time.
/// - **One watch.** A reconnect arms the watch again only when the backend dropped it (or it
///   was never armed): a restored watch is not doubled. An arming that failed while the link
///   stays up (a timed-out read: no reconnect will come) is tried again after a pause.
#[derive(Debug)]
pub(crate) struct RevocationWatch {
    shared: Arc<Revocation>,
    _rearm: OnReconnect,
}

impl RevocationWatch {
    /// Arms the watch on `node_path` (on the caller's thread, or on a thread of its own when
    /// `in_background`: a timed acquire past its deadline starts no request) and re-arms it
    /// after each reconnect that dropped it. Call it once the hold is recorded.
    pub(crate) fn start(
        client: SharedClient,
        node_path: String,
        listener: RevocationListener,
        in_background: bool,
    ) -> Self {
        let shared = Arc::new(Revocation {
            client: client.clone(),
            path: node_path,
            listener,
            heard: AtomicI64::new(i64::MIN),
            calling: Mutex::new(()),
            stopped: AtomicBool::new(false),
            slot: Mutex::new(Slot::default()),
        });
        let again = shared.clone();
        let rearm = OnReconnect::start(client, THREAD_NAME, Arc::new(move || again.arm()));
        match in_background {
            true => {
                let s = shared.clone();
                spawn(THREAD_NAME, move || s.arm());
            }
            false => shared.arm(),
        }
        RevocationWatch {
            shared,
            _rearm: rearm,
        }
    }
}

impl Drop for RevocationWatch {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
    }
}

const THREAD_NAME: &str = "zk-locks-revocation";

/// How long a failed arming waits before it tries again while the link stays up.
const TRY_AGAIN_AFTER: Duration = Duration::from_millis(250);

/// What the watch, its re-arming and the listener calls share.
struct Revocation {
    client: SharedClient,
    path: String,
    listener: RevocationListener,
    /// The `mzxid` of the last request the listener was called for.
    heard: AtomicI64,
    /// Held while the listener runs: one call at a time.
    calling: Mutex<()>,
    /// The hold is over: no more arming, no more calls.
    stopped: AtomicBool,
    slot: Mutex<Slot>,
}

#[derive(Default)]
struct Slot {
    /// The watch the server holds for us: its number and the session epoch it was armed in.
    armed: Option<(u64, u64)>,
    /// The number of the last watch armed.
    last: u64,
    /// The last watch that fired (a reply can come after its watch fired).
    fired: u64,
}

impl std::fmt::Debug for Revocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Revocation")
            .field("path", &self.path)
            .finish()
    }
}

impl Revocation {
    /// Reads the node and arms a watch on it, unless one is armed already (kept across a
    /// reconnect only where the backend restores watches); a request not heard yet calls the
    /// listener on a thread of its own. Watch callbacks never call the client: a fired watch
    /// hands off to a short-lived thread that comes back here.
    fn arm(self: &Arc<Self>) {
        if self.stopped.load(Ordering::SeqCst) {
            return;
        }
        let epoch = self.client.session().epoch();
        let number = {
            let mut slot = self.slot.lock();
            match slot.armed {
                Some((_, armed_in)) if self.client.restores_watches() || armed_in == epoch => {
                    return
                }
                _ => {
                    slot.last += 1;
                    slot.last
                }
            }
        };
        let me = Arc::downgrade(self);
        let watcher = Box::new(move |event: crate::client::WatchedEvent| {
            if let Some(me) = me.upgrade() {
                me.fired(number, event.event_type);
            }
        });
        // The callback only records and starts a thread: it runs on the reader thread, so a
        // request is heard (and the holder's waiters let in) while a user's callback blocks
        // the event thread.
        let read = crate::client::native::watches::wake_only(|| {
            self.client.get_data(&self.path, Some(watcher))
        });
        match read {
            Ok((data, stat)) => {
                {
                    let mut slot = self.slot.lock();
                    if slot.fired < number {
                        slot.armed = Some((number, epoch));
                    }
                }
                if data == REVOKE_MESSAGE {
                    self.heard_request(stat.mzxid);
                }
            }
            Err(ZkError::NoNode) => {}
            Err(code) => {
                log::warn!("revocation watch on {}: {code}", self.path);
                // A request that failed while the link stays up (a timed-out read) has no
                // reconnect to come and arm the watch: try again after a pause.
                if code.is_retryable() && self.client.session().state().is_connected() {
                    let me = self.clone();
                    spawn(THREAD_NAME, move || {
                        std::thread::sleep(TRY_AGAIN_AFTER);
                        me.arm();
                    });
                }
            }
        }
    }

    /// Watch callback: the watch is spent; unless the node is gone, read and watch again.
    fn fired(self: Arc<Self>, number: u64, event: EventType) {
        {
            let mut slot = self.slot.lock();
            slot.fired = slot.fired.max(number);
            if slot.armed.is_some_and(|(n, _)| n == number) {
                slot.armed = None;
            }
        }
        if event != EventType::NodeDeleted {
            spawn(THREAD_NAME, move || self.arm());
        }
    }

    /// A read saw a request written at `mzxid`: calls the listener on a thread of its own,
    /// unless that request was heard already.
    fn heard_request(self: &Arc<Self>, mzxid: i64) {
        if self.heard.fetch_max(mzxid, Ordering::SeqCst) >= mzxid {
            return;
        }
        let me = self.clone();
        spawn(THREAD_NAME, move || {
            let _one_at_a_time = me.calling.lock();
            if me.stopped.load(Ordering::SeqCst) {
                return;
            }
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (me.listener)())).is_err() {
                log::error!("revocation listener for {} panicked", me.path);
            }
        });
    }
}
