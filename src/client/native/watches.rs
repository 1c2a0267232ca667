//! The watch registry: one-shot callbacks by server path and kind (data, exist, child), the
//! list re-registered with SetWatches after a reconnect, and the thread that runs callbacks.
//!
//! Rules: a notification fires (and removes) every callback its type concerns, as the Java
//! client's `ZKWatchManager` does — NodeCreated and NodeDataChanged: data and exist watches;
//! NodeChildrenChanged: child watches; NodeDeleted: all three. Callbacks run in notification
//! order on one thread of ours under `catch_unwind`, never on the reader thread. When the
//! session is lost the registry is emptied without firing anything: the node did not change.
//!
//! One exception: a waiter's wake-up (registered inside [`wake_only`]) runs on the reader
//! thread itself, as soon as its notification is read. It only sets a flag and signals
//! waiters' own `Condvar`s (a lock's or a semaphore's waiter, a held node's watch) or starts
//! a thread (a `SharedCount`'s re-read), never blocks and never calls the client; run there,
//! a hand-off does not wait for the event thread to be scheduled, nor behind a user's slow
//! callback on the same session (which used to stall every waiter of that session). Every
//! watch a recipe sets is registered so: no recipe's waiter depends on the event thread.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;

use parking_lot::Mutex;

use crate::client::{EventType, WatchedEvent, Watcher, WatcherId};

/// What a watch is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchKind {
    /// Set by getData.
    Data,
    /// Set by exists.
    Exist,
    /// Set by getChildren.
    Child,
}

type Delivery = Box<dyn FnOnce() + Send>;

thread_local! {
    /// Set while the lock engine registers a waiter's wake-up (see [`wake_only`]).
    static WAKE_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `register` (a read that sets a watch, on this thread) so that the watch's callback
/// runs on the reader thread when it fires, not on the event thread. Only for callbacks that
/// never block and never call the client: a waiter's wake-up (a flag and its own `Condvar`,
/// or a thread started), possibly wrapped by a counting client. Other backends ignore it.
pub(crate) fn wake_only<T>(register: impl FnOnce() -> T) -> T {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            WAKE_ONLY.with(|w| w.set(self.0));
        }
    }
    let _reset = Reset(WAKE_ONLY.with(|w| w.replace(true)));
    register()
}

/// True inside [`wake_only`] on this thread.
pub(super) fn wake_only_requested() -> bool {
    WAKE_ONLY.with(|w| w.get())
}

/// A registered callback; `inline`: a wake-up that runs on the reader thread; `id`: its
/// name, when it may be removed unfired.
struct Entry {
    watcher: Watcher,
    inline: bool,
    id: Option<WatcherId>,
}

#[derive(Default)]
struct Registry {
    data: HashMap<String, Vec<Entry>>,
    exist: HashMap<String, Vec<Entry>>,
    child: HashMap<String, Vec<Entry>>,
}

impl Registry {
    fn map(&mut self, kind: WatchKind) -> &mut HashMap<String, Vec<Entry>> {
        match kind {
            WatchKind::Data => &mut self.data,
            WatchKind::Exist => &mut self.exist,
            WatchKind::Child => &mut self.child,
        }
    }
}

/// The server paths with outstanding watches, by kind (for SetWatches).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WatchedPaths {
    /// Data watches.
    pub data: Vec<String>,
    /// Exist watches.
    pub exist: Vec<String>,
    /// Child watches.
    pub child: Vec<String>,
}

impl WatchedPaths {
    /// True when no watch is outstanding.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty() && self.exist.is_empty() && self.child.is_empty()
    }

    /// Splits into batches whose path text stays under `budget` bytes each (a batch always
    /// holds at least one path).
    pub fn batches(self, budget: usize) -> Vec<WatchedPaths> {
        let mut out = Vec::new();
        let mut current = WatchedPaths::default();
        let mut size = 0;
        let all = [
            (WatchKind::Data, self.data),
            (WatchKind::Exist, self.exist),
            (WatchKind::Child, self.child),
        ];
        for (kind, paths) in all {
            for path in paths {
                let cost = path.len() + 4;
                if size + cost > budget && !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                    size = 0;
                }
                size += cost;
                match kind {
                    WatchKind::Data => current.data.push(path),
                    WatchKind::Exist => current.exist.push(path),
                    WatchKind::Child => current.child.push(path),
                }
            }
        }
        if !current.is_empty() {
            out.push(current);
        }
        out
    }
}

/// The registry and its callback thread.
pub struct Watches {
    registry: Mutex<Registry>,
    chroot: Option<String>,
    deliveries: Mutex<Option<mpsc::Sender<Delivery>>>,
}

impl Watches {
    /// A registry for a client with this chroot, and its callback thread.
    pub fn new(chroot: Option<String>) -> std::io::Result<Watches> {
        let (tx, rx) = mpsc::channel::<Delivery>();
        std::thread::Builder::new()
            .name("zk-locks-native-events".into())
            .spawn(move || {
                for delivery in rx {
                    if catch_unwind(AssertUnwindSafe(delivery)).is_err() {
                        log::error!("a watcher panicked; ignored");
                    }
                }
            })?;
        Ok(Watches {
            registry: Mutex::new(Registry::default()),
            chroot,
            deliveries: Mutex::new(Some(tx)),
        })
    }

    /// Registers a one-shot callback; `inline`: a wake-up run on the reader thread (see
    /// [`wake_only`]); `id`: its name, to [`Self::remove`] it unfired.
    pub fn add(
        &self,
        kind: WatchKind,
        server_path: String,
        watcher: Watcher,
        inline: bool,
        id: Option<WatcherId>,
    ) {
        self.registry
            .lock()
            .map(kind)
            .entry(server_path)
            .or_default()
            .push(Entry {
                watcher,
                inline,
                id,
            });
    }

    /// Removes, uncalled, the callback named `id` on `server_path` (any kind): true when it
    /// was there. The server's watch stays; its notification then finds nothing to run. The
    /// callback is dropped outside the registry's lock (dropping it may drop a waiter).
    pub fn remove(&self, server_path: &str, id: WatcherId) -> bool {
        let removed = {
            let mut registry = self.registry.lock();
            let kinds = [WatchKind::Data, WatchKind::Exist, WatchKind::Child];
            kinds.iter().find_map(|kind| {
                let map = registry.map(*kind);
                let entries = map.get_mut(server_path)?;
                let at = entries.iter().position(|e| e.id == Some(id))?;
                let entry = entries.remove(at);
                if entries.is_empty() {
                    map.remove(server_path);
                }
                Some(entry)
            })
        };
        removed.is_some()
    }

    /// Fires (and removes) the callbacks a notification concerns.
    pub fn trigger(&self, event_type: EventType, server_path: &str) {
        let kinds: &[WatchKind] = match event_type {
            EventType::NodeCreated | EventType::NodeDataChanged => {
                &[WatchKind::Data, WatchKind::Exist]
            }
            EventType::NodeChildrenChanged => &[WatchKind::Child],
            EventType::NodeDeleted => &[WatchKind::Data, WatchKind::Exist, WatchKind::Child],
        };
        let (inline, queued): (Vec<Entry>, Vec<Entry>) = {
            let mut registry = self.registry.lock();
            kinds
                .iter()
                .filter_map(|k| registry.map(*k).remove(server_path))
                .flatten()
                .partition(|e| e.inline)
        };
        if inline.is_empty() && queued.is_empty() {
            return;
        }
        let path = from_server(self.chroot.as_deref(), server_path);
        let event = || WatchedEvent {
            event_type,
            path: path.clone(),
        };
        // Wake-ups first, here, outside every lock of the registry.
        for entry in inline {
            let (watcher, event) = (entry.watcher, event());
            if catch_unwind(AssertUnwindSafe(move || watcher(event))).is_err() {
                log::error!("a waiter's wake-up panicked; ignored");
            }
        }
        if queued.is_empty() {
            return;
        }
        let deliveries = self.deliveries.lock();
        let Some(tx) = deliveries.as_ref() else {
            return;
        };
        for entry in queued {
            let (watcher, event) = (entry.watcher, event());
            let _ = tx.send(Box::new(move || watcher(event)));
        }
    }

    /// The outstanding watches, for SetWatches.
    pub fn paths(&self) -> WatchedPaths {
        let registry = self.registry.lock();
        WatchedPaths {
            data: registry.data.keys().cloned().collect(),
            exist: registry.exist.keys().cloned().collect(),
            child: registry.child.keys().cloned().collect(),
        }
    }

    /// Number of outstanding callbacks.
    pub fn len(&self) -> usize {
        let registry = self.registry.lock();
        [&registry.data, &registry.exist, &registry.child]
            .iter()
            .map(|m| m.values().map(Vec::len).sum::<usize>())
            .sum()
    }

    /// Drops every callback without firing it (the session is gone).
    pub fn clear(&self) {
        let dropped = std::mem::take(&mut *self.registry.lock());
        drop(dropped);
    }

    /// Drops every callback and stops the callback thread once it has run what is queued.
    pub fn shutdown(&self) {
        self.clear();
        self.deliveries.lock().take();
    }
}

/// A server path as the client sees it under its chroot.
pub fn from_server(chroot: Option<&str>, path: &str) -> String {
    match chroot {
        None => path.to_string(),
        Some(chroot) => match path.strip_prefix(chroot) {
            Some("") => "/".to_string(),
            Some(rest) if rest.starts_with('/') => rest.to_string(),
            _ => path.to_string(),
        },
    }
}

/// A client path as the server sees it under `chroot`.
pub fn to_server(chroot: Option<&str>, path: &str) -> String {
    match chroot {
        None => path.to_string(),
        Some(chroot) if path == "/" => chroot.to_string(),
        Some(chroot) => format!("{chroot}{path}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_stay_under_budget() {
        let paths = WatchedPaths {
            data: vec!["/aaaa".into(), "/bbbb".into()],
            exist: vec![],
            child: vec!["/cccc".into()],
        };
        let batches = paths.clone().batches(20);
        assert_eq!(batches.len(), 2);
        assert_eq!(batches[0].data, vec!["/aaaa", "/bbbb"]);
        assert_eq!(batches[1].child, vec!["/cccc"]);
        assert_eq!(paths.batches(1).len(), 3);
    }

    #[test]
    fn chroot_mapping() {
        assert_eq!(from_server(Some("/app"), "/app"), "/");
        assert_eq!(from_server(Some("/app"), "/app/x"), "/x");
        assert_eq!(to_server(Some("/app"), "/"), "/app");
        assert_eq!(to_server(Some("/app"), "/x"), "/app/x");
        assert_eq!(to_server(None, "/x"), "/x");
    }
}
