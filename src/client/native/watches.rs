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
//!
//! Removing a callback unfired ([`Watches::remove`]) also owes the server a `removeWatches`
//! when nothing of this client needs that server watch any more. The server keeps one watch
//! per connection, path and table — data (set by getData *and* exists) or children — so the
//! rule kept is: **a removeWatches for a table and path goes on the wire only when no callback
//! of that table is registered on the path and no request that may set one is in flight**
//! ([`InFlight`]); the server answers in order, so otherwise it would drop a watch a
//! callback waits on, and that callback would never fire. [`Watches::take_owed`] checks it
//! under the connection's write lock, so no such request can be written in between.

use std::collections::{HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Arc};

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

/// The server's watch table a removeWatches names: data (getData's and exists' watches share
/// it on the server) or children.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerTable {
    /// Data and exist watches.
    Data,
    /// Child watches.
    Children,
}

impl ServerTable {
    /// The table a kind of watch lives in on the server.
    pub fn of(kind: WatchKind) -> ServerTable {
        match kind {
            WatchKind::Data | WatchKind::Exist => ServerTable::Data,
            WatchKind::Child => ServerTable::Children,
        }
    }

    /// Its `Watcher.WatcherType` number in a removeWatches: Children 1, Data 2.
    pub fn watcher_type(self) -> i32 {
        match self {
            ServerTable::Children => 1,
            ServerTable::Data => 2,
        }
    }

    fn kinds(self) -> &'static [WatchKind] {
        match self {
            ServerTable::Data => &[WatchKind::Data, WatchKind::Exist],
            ServerTable::Children => &[WatchKind::Child],
        }
    }

    fn index(self) -> usize {
        match self {
            ServerTable::Data => 0,
            ServerTable::Children => 1,
        }
    }
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
struct Callbacks {
    data: HashMap<String, Vec<Entry>>,
    exist: HashMap<String, Vec<Entry>>,
    child: HashMap<String, Vec<Entry>>,
}

#[derive(Default)]
struct Registry {
    callbacks: Callbacks,
    /// Requests that may set a watch, by table (see [`ServerTable::index`]) and path: counted
    /// from before they are written until their watch is registered or given up.
    in_flight: [HashMap<String, usize>; 2],
    /// Server watches whose last callback was removed, not yet covered by a removeWatches.
    owed: HashSet<(ServerTable, String)>,
}

impl Registry {
    fn map(&mut self, kind: WatchKind) -> &mut HashMap<String, Vec<Entry>> {
        match kind {
            WatchKind::Data => &mut self.callbacks.data,
            WatchKind::Exist => &mut self.callbacks.exist,
            WatchKind::Child => &mut self.callbacks.child,
        }
    }

    /// True while this client may need the server's watch of `table` on `path`.
    fn needs(&mut self, table: ServerTable, path: &str) -> bool {
        self.in_flight[table.index()].contains_key(path)
            || table
                .kinds()
                .iter()
                .any(|k| self.map(*k).contains_key(path))
    }
}

/// A request in flight that may set a watch of its table on its path: while one lives, no
/// removeWatches is sent for them (see the module docs). Made before the request is written
/// and dropped once its watch is registered or given up; never dropped under the registry's
/// lock (its drop takes it).
pub struct InFlight {
    watches: Arc<Watches>,
    table: ServerTable,
    path: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut registry = self.watches.registry.lock();
        let counts = &mut registry.in_flight[self.table.index()];
        if let Some(n) = counts.get_mut(&self.path) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.path);
            }
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

    /// Counts a request that may set a watch of `kind` on `server_path` as in flight until
    /// the returned token is dropped (see [`InFlight`]).
    pub fn in_flight(self: &Arc<Self>, kind: WatchKind, server_path: &str) -> InFlight {
        let table = ServerTable::of(kind);
        *self.registry.lock().in_flight[table.index()]
            .entry(server_path.to_string())
            .or_default() += 1;
        InFlight {
            watches: self.clone(),
            table,
            path: server_path.to_string(),
        }
    }

    /// Removes, uncalled, the callback named `id` on `server_path` (any kind): true when it
    /// was there. When nothing else of this client needs the server's watch of its table on
    /// that path, a removeWatches is owed ([`Self::take_owed`]); until one is sent, the
    /// server's notification finds nothing to run. The callback is dropped outside the
    /// registry's lock (dropping it may drop a waiter).
    pub fn remove(&self, server_path: &str, id: WatcherId) -> bool {
        let removed = {
            let mut registry = self.registry.lock();
            let kinds = [WatchKind::Data, WatchKind::Exist, WatchKind::Child];
            let removed = kinds.iter().find_map(|kind| {
                let map = registry.map(*kind);
                let entries = map.get_mut(server_path)?;
                let at = entries.iter().position(|e| e.id == Some(id))?;
                let entry = entries.remove(at);
                if entries.is_empty() {
                    map.remove(server_path);
                }
                Some((*kind, entry))
            });
            if let Some((kind, _)) = &removed {
                let table = ServerTable::of(*kind);
                if !registry.needs(table, server_path) {
                    registry.owed.insert((table, server_path.to_string()));
                }
            }
            removed
        };
        removed.is_some()
    }

    /// The removeWatches owed whose watch nothing of this client needs now, taken out of the
    /// owed list. To be called under the connection's write lock, and their requests written
    /// before it is released: a request that may set one of these watches and was written
    /// before is still counted in flight, so it is left owed, not sent.
    pub fn take_owed(&self) -> Vec<(ServerTable, String)> {
        let mut registry = self.registry.lock();
        let owed = std::mem::take(&mut registry.owed);
        owed.into_iter()
            .filter(|(table, path)| !registry.needs(*table, path))
            .collect()
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

    /// The outstanding watches, for SetWatches on a new connection: the paths that have a
    /// callback now, so a removed one is never restored. The removeWatches owed are dropped:
    /// their watches went with the old connection, and SetWatches leaves them out.
    pub fn paths(&self) -> WatchedPaths {
        let mut registry = self.registry.lock();
        registry.owed.clear();
        let callbacks = &registry.callbacks;
        WatchedPaths {
            data: callbacks.data.keys().cloned().collect(),
            exist: callbacks.exist.keys().cloned().collect(),
            child: callbacks.child.keys().cloned().collect(),
        }
    }

    /// Number of outstanding callbacks.
    pub fn len(&self) -> usize {
        let registry = self.registry.lock();
        let callbacks = &registry.callbacks;
        [&callbacks.data, &callbacks.exist, &callbacks.child]
            .iter()
            .map(|m| m.values().map(Vec::len).sum::<usize>())
            .sum()
    }

    /// Drops every callback without firing it, and every removeWatches owed (the session is
    /// gone). Requests in flight stay counted: their tokens uncount them.
    pub fn clear(&self) {
        let dropped = {
            let mut registry = self.registry.lock();
            registry.owed.clear();
            std::mem::take(&mut registry.callbacks)
        };
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

    fn registry() -> Arc<Watches> {
        Arc::new(Watches::new(None).unwrap())
    }

    fn add(watches: &Watches, kind: WatchKind, path: &str) -> WatcherId {
        let id = WatcherId::new();
        watches.add(kind, path.into(), Box::new(|_| {}), false, Some(id));
        id
    }

    /// Data and exist watches are one table on the server: removing the one leaves the
    /// other's watch needed; the last callback of a table owes its removal, once.
    #[test]
    fn a_removal_is_owed_when_the_table_has_no_callback_left_on_the_path() {
        let watches = registry();
        let data = add(&watches, WatchKind::Data, "/a");
        let exist = add(&watches, WatchKind::Exist, "/a");
        let child = add(&watches, WatchKind::Child, "/a");
        assert!(watches.remove("/a", data));
        assert_eq!(watches.take_owed(), vec![]);
        assert!(watches.remove("/a", exist));
        assert_eq!(watches.take_owed(), vec![(ServerTable::Data, "/a".into())]);
        assert_eq!(watches.take_owed(), vec![]);
        assert!(!watches.remove("/a", exist));
        assert!(watches.remove("/a", child));
        assert_eq!(
            watches.take_owed(),
            vec![(ServerTable::Children, "/a".into())]
        );
    }

    /// A request that may set the watch, in flight, keeps the removal from being sent: the
    /// server would apply it after that request and drop the watch its callback waits on.
    #[test]
    fn nothing_is_sent_while_a_request_that_may_set_the_watch_is_in_flight() {
        let watches = registry();
        let id = add(&watches, WatchKind::Data, "/a");
        let in_flight = watches.in_flight(WatchKind::Exist, "/a");
        assert!(watches.remove("/a", id));
        assert_eq!(watches.take_owed(), vec![]);
        drop(in_flight);
        let id = add(&watches, WatchKind::Child, "/a");
        let other_table = watches.in_flight(WatchKind::Data, "/a");
        assert!(watches.remove("/a", id));
        assert_eq!(
            watches.take_owed(),
            vec![(ServerTable::Children, "/a".into())]
        );
        drop(other_table);
    }

    /// SetWatches' list is what has a callback now, and reading it (a new connection) drops
    /// the removals owed on the old one, as does a lost session.
    #[test]
    fn set_watches_leaves_out_a_removed_watch_and_drops_the_owed() {
        let watches = registry();
        let gone = add(&watches, WatchKind::Data, "/gone");
        add(&watches, WatchKind::Child, "/kept");
        assert!(watches.remove("/gone", gone));
        let paths = watches.paths();
        assert!(paths.data.is_empty() && paths.exist.is_empty());
        assert_eq!(paths.child, vec!["/kept"]);
        assert_eq!(watches.take_owed(), vec![]);
        let id = add(&watches, WatchKind::Data, "/b");
        assert!(watches.remove("/b", id));
        watches.clear();
        assert_eq!(watches.take_owed(), vec![]);
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
