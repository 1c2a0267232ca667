//! `SharedCount`: an integer in a node that every process can read, change and watch —
//! Curator's `SharedCount` (4-byte big-endian), used as a semaphore's maximum number of leases.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::thread;

use parking_lot::Mutex;

use crate::client::{CreateMode, SharedClient, ZkError};
use crate::error::{Error, Result};
use crate::paths;

type CountListener = Arc<dyn Fn(i32) + Send + Sync>;

struct Shared {
    client: SharedClient,
    path: String,
    value: AtomicI32,
    listeners: Mutex<Vec<(u64, CountListener)>>,
    next_listener: Mutex<u64>,
}

/// A shared integer (Curator's `SharedCount`, same encoding: 4 bytes, big-endian).
///
/// The value is cached and kept current by a data watch; listeners are told of each change.
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
        let shared = Arc::new(Shared {
            client,
            path: path.to_string(),
            value: AtomicI32::new(seed),
            listeners: Mutex::new(Vec::new()),
            next_listener: Mutex::new(0),
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
        s.client
            .set_data(&s.path, &value.to_be_bytes(), None)
            .map_err(|c| Error::zk("set_data", s.path.clone(), c))?;
        refresh(s)
    }

    /// Calls `listener` with each new value (on a background thread; keep it short).
    pub fn subscribe(&self, listener: impl Fn(i32) + Send + Sync + 'static) -> u64 {
        let mut next = self.shared.next_listener.lock();
        *next += 1;
        self.shared
            .listeners
            .lock()
            .push((*next, Arc::new(listener)));
        *next
    }

    /// Removes a listener.
    pub fn unsubscribe(&self, id: u64) {
        self.shared.listeners.lock().retain(|(i, _)| *i != id);
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

/// Re-reads the value with a watch; the watch hands off to a thread that refreshes again
/// (watch callbacks never call the client).
fn refresh(shared: &Arc<Shared>) -> Result<()> {
    let weak = Arc::downgrade(shared);
    let watcher = Box::new(move |_event: crate::client::WatchedEvent| {
        let Some(shared) = weak.upgrade() else { return };
        let spawned = thread::Builder::new()
            .name("zk-locks-shared-count".into())
            .spawn(move || {
                if let Err(e) = refresh(&shared) {
                    log::warn!("shared count {}: {e}", shared.path);
                }
            });
        if let Err(e) = spawned {
            log::error!("shared count: cannot start a thread: {e}");
        }
    });
    let (data, _) = shared
        .client
        .get_data(&shared.path, Some(watcher))
        .map_err(|c| Error::zk("get_data", shared.path.clone(), c))?;
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
    if shared.value.swap(value, Ordering::SeqCst) != value {
        let listeners: Vec<CountListener> = shared
            .listeners
            .lock()
            .iter()
            .map(|(_, l)| l.clone())
            .collect();
        for l in listeners {
            l(value);
        }
    }
    Ok(())
}
