//! `SharedCount`: an integer in a node that every process can read, change and watch —
//! Curator's `SharedCount` (4-byte big-endian), used as a semaphore's maximum number of leases.

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::client::{CreateMode, SharedClient, ZkError};
use crate::error::{Error, Result};
use crate::paths;
use crate::session::{ConnectionState, ListenerId};

use super::rearm::{spawn, OnReconnect};

type CountListener = Arc<dyn Fn(i32) + Send + Sync>;

/// The listeners' side of the count (see [`notify`]).
struct Told {
    value: i32,
    telling: bool,
}

const THREAD_NAME: &str = "zk-locks-shared-count";

/// The longest pause between two tries of a failed read.
const MAX_PAUSE: Duration = Duration::from_secs(2);

struct Shared {
    client: SharedClient,
    path: String,
    value: AtomicI32,
    /// The `mzxid` the cached value was read at: a late reply to an older read (two reads
    /// can race after a reconnect) never replaces a newer value.
    applied_mzxid: Mutex<i64>,
    /// Numbers the reads that arm a watch; `armed` is the newest that succeeded. A watch
    /// refreshes unless a newer read succeeded (that read saw the change, or its own watch
    /// fires for it): watches of older reads that are still set (a reconnect that kept them)
    /// would otherwise each start a refresh of their own, one more after every reconnect.
    /// `armed` is recorded only after the read returns, so a watch may fire before its own
    /// read is recorded: it must refresh then, never be taken for an older one.
    next_read: AtomicU64,
    armed: AtomicU64,
    listeners: Mutex<Vec<(u64, CountListener)>>,
    /// What the listeners were last told, and whether a thread is telling them now: they
    /// are told in turn, and the last value they hear is the cached one.
    told: Mutex<Told>,
    next_listener: Mutex<u64>,
    /// Reads (and re-arms) the count after every reconnect; dropped with the count.
    _rearm: OnReconnect,
}

/// A shared integer (Curator's `SharedCount`, same encoding: 4 bytes, big-endian).
///
/// The value is cached and kept current by a data watch, armed again after every reconnect
/// and retried when a read fails. A notification is never dropped for a change the count has
/// not read, however close together the changes come; listeners are told of changes (values
/// that came and went between two reads may be skipped), and the last value they hear is the
/// cached one.
///
/// ```
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::locks::{InterProcessSemaphoreV2, SharedCount};
///
/// let ensemble = MemoryEnsemble::new();
/// let client = ensemble.connect();
/// let max = SharedCount::new(client.clone(), "/pools/db-max", 2)?; // seeds 2 when missing
/// let pool = InterProcessSemaphoreV2::with_shared_count(client, "/pools/db", max.clone())?;
/// assert_eq!(pool.max_leases(), 2);
/// max.set_count(5)?; // every process sharing the count sees 5 (waiters wake up)
/// assert_eq!(max.get_count(), 5);
/// # Ok::<(), zk_locks::Error>(())
/// ```
#[derive(Clone)]
pub struct SharedCount {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for SharedCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedCount")
            .field("path", &self.shared.path)
            .field("value", &self.get_count())
            .finish()
    }
}

/// Decodes Curator's encoding; anything but 4 bytes is rejected.
pub fn decode_count(bytes: &[u8]) -> Option<i32> {
    <[u8; 4]>::try_from(bytes).ok().map(i32::from_be_bytes)
}

impl SharedCount {
    /// Opens the count at `path`, creating it (and its parents) with `seed` when missing.
    pub fn new(client: SharedClient, path: &str, seed: i32) -> Result<SharedCount> {
        paths::validate_path(path)?;
        ensure_node(&client, path, &seed.to_be_bytes())?;
        let shared = Arc::new_cyclic(|weak: &Weak<Shared>| {
            let weak = weak.clone();
            Shared {
                client: client.clone(),
                path: path.to_string(),
                value: AtomicI32::new(seed),
                applied_mzxid: Mutex::new(i64::MIN),
                next_read: AtomicU64::new(0),
                armed: AtomicU64::new(0),
                listeners: Mutex::new(Vec::new()),
                told: Mutex::new(Told {
                    value: seed,
                    telling: false,
                }),
                next_listener: Mutex::new(0),
                _rearm: OnReconnect::start(
                    client,
                    THREAD_NAME,
                    Arc::new(move || keep_current(&weak)),
                ),
            }
        });
        refresh(&shared)?;
        Ok(SharedCount { shared })
    }

    /// The latest value seen.
    pub fn get_count(&self) -> i32 {
        self.shared.value.load(Ordering::SeqCst)
    }

    /// Writes a new value (whatever the current version).
    pub fn set_count(&self, value: i32) -> Result<()> {
        let s = &self.shared;
        let stat = s
            .client
            .set_data(&s.path, &value.to_be_bytes(), None)
            .map_err(|c| Error::zk("set_data", s.path.clone(), c))?;
        apply(s, stat.mzxid, value);
        Ok(())
    }

    /// Calls `listener` with each new value (on a background thread, or the thread of a
    /// `set_count`; keep it short). Calls do not overlap; a change made while the listeners
    /// are being told is told next, so they always end on the current value. A listener that
    /// panics is logged and does not stop the others.
    pub fn subscribe(&self, listener: impl Fn(i32) + Send + Sync + 'static) -> ListenerId {
        let mut next = self.shared.next_listener.lock();
        *next += 1;
        self.shared
            .listeners
            .lock()
            .push((*next, Arc::new(listener)));
        ListenerId(*next)
    }

    /// Removes a listener.
    pub fn unsubscribe(&self, id: ListenerId) {
        self.shared.listeners.lock().retain(|(i, _)| *i != id.0);
    }
}

fn ensure_node(client: &SharedClient, path: &str, data: &[u8]) -> Result<()> {
    let mut missing = vec![path.to_string()];
    let mut at = paths::parent(path);
    while let Some(p) = at.filter(|p| *p != "/") {
        match client.exists(p) {
            Ok(Some(_)) => break,
            Ok(None) => missing.push(p.to_string()),
            Err(c) => return Err(Error::zk("exists", p, c)),
        }
        at = paths::parent(p);
    }
    for (i, p) in missing.iter().enumerate().rev() {
        let bytes: &[u8] = if i == 0 { data } else { &[] };
        match client.create(p, bytes, CreateMode::Persistent) {
            Ok(_) | Err(ZkError::NodeExists) => {}
            Err(c) => return Err(Error::zk("create", p.clone(), c)),
        }
    }
    Ok(())
}

/// Reads the value and arms a watch whose firing reads it again (from a thread: watch
/// callbacks never call the client).
fn refresh(shared: &Arc<Shared>) -> Result<()> {
    let read = shared.next_read.fetch_add(1, Ordering::SeqCst) + 1;
    let weak = Arc::downgrade(shared);
    let watcher = Box::new(move |_event: crate::client::WatchedEvent| {
        let Some(shared) = weak.upgrade() else { return };
        // Not `== read`: this watch can fire before `armed` records its read (a change
        // right after the read), and dropping it would leave no watch at all.
        if shared.armed.load(Ordering::SeqCst) <= read {
            let weak = Arc::downgrade(&shared);
            spawn(THREAD_NAME, move || keep_current(&weak));
        }
    });
    // The callback only starts a thread: it runs on the reader thread, so a semaphore waiting
    // for a larger maximum does not hear of it only after a user's blocked callback returns.
    let (data, stat) = crate::client::native::watches::wake_only(|| {
        shared.client.get_data(&shared.path, Some(watcher))
    })
    .map_err(|c| Error::zk("get_data", shared.path.clone(), c))?;
    shared.armed.fetch_max(read, Ordering::SeqCst);
    let Some(value) = decode_count(&data) else {
        return Err(Error::InvalidArgument {
            name: "shared count",
            reason: format!(
                "{} holds {} bytes, not a 4-byte count",
                shared.path,
                data.len()
            ),
        });
    };
    apply(shared, stat.mzxid, value);
    Ok(())
}

/// Caches `value`, read at `mzxid`, unless a newer one is cached; tells the listeners when it
/// changed.
fn apply(shared: &Shared, mzxid: i64, value: i32) {
    {
        let mut applied = shared.applied_mzxid.lock();
        if mzxid < *applied {
            return;
        }
        *applied = mzxid;
        if shared.value.swap(value, Ordering::SeqCst) == value {
            return;
        }
    }
    notify(shared);
}

/// Tells the listeners the cached value until what they last heard is the cached value. One
/// thread tells at a time; a change made meanwhile (by another thread, or by a listener's own
/// `set_count`) is told by that thread's next turn, so two changes racing never leave the
/// listeners on the older value.
fn notify(shared: &Shared) {
    {
        let mut told = shared.told.lock();
        if told.telling {
            return; // the thread telling now reads the value again before it stops
        }
        told.telling = true;
    }
    loop {
        let value = {
            let mut told = shared.told.lock();
            // Read under the lock: a change stored before another thread's `notify` found
            // `telling` set is seen here.
            let value = shared.value.load(Ordering::SeqCst);
            if told.value == value {
                told.telling = false;
                return;
            }
            told.value = value;
            value
        };
        let listeners: Vec<CountListener> = shared
            .listeners
            .lock()
            .iter()
            .map(|(_, l)| l.clone())
            .collect();
        for l in listeners {
            // A panicking listener must not leave `telling` set (no listener would hear again).
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| l(value))).is_err() {
                log::error!("shared count {}: a listener panicked", shared.path);
            }
        }
    }
}

/// Reads the count until a read succeeds (and so arms the watch), pausing between tries until
/// the next session change or a growing delay. A failed read sets no watch: without a retry the
/// count would stay frozen. Stops when the count is dropped, the client closed, or the error
/// cannot go away by retrying (the watch is then armed, or a new session re-arms it).
fn keep_current(weak: &Weak<Shared>) {
    let mut pause = Duration::from_millis(50);
    loop {
        let Some(shared) = weak.upgrade() else { return };
        let before = shared.client.session().snapshot();
        if before.state == ConnectionState::Closed {
            return;
        }
        let code = match refresh(&shared) {
            Ok(()) => return,
            Err(Error::Zk { code, .. }) if code.is_retryable() || code == ZkError::NoNode => code,
            Err(e) => {
                log::warn!("shared count {}: {e}", shared.path);
                return;
            }
        };
        log::debug!("shared count {}: {code}; reading again", shared.path);
        let client = shared.client.clone();
        drop(shared); // waiting must not keep a dropped count alive
        client
            .session()
            .wait_for_change(before.epoch, Some(Instant::now() + pause));
        pause = (pause * 2).min(MAX_PAUSE);
    }
}
