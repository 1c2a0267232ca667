//! Who is listening: the server's sessions and the clients it knows, the one-shot watch
//! registry, and each client's event thread that runs watch callbacks in commit order.

use std::collections::{BTreeSet, HashSet, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Weak};
use std::thread;
use std::time::{Duration, Instant};

use super::client::MemoryClient;
use super::faults::Fault;
use super::tree::ServerState;
use crate::client::counting::AtomicCounters;
use crate::client::{EventType, WatchedEvent, Watcher, WatcherId};

/// First session id handed out; like a real server's (server id in the top byte), never 0.
pub(super) const FIRST_SESSION_ID: i64 = 0x0100_0000_0000_0001;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum WatchKind {
    Data,
    Child,
}

pub(super) struct WatchEntry {
    pub(super) session: i64,
    pub(super) watcher: Watcher,
    /// Its name, when its client may remove it unfired (`ZkClient::remove_watcher`).
    pub(super) id: Option<WatcherId>,
}

/// A fired watch on its way to the client's event thread.
pub(super) struct Delivery {
    pub(super) event: WatchedEvent,
    pub(super) watcher: Watcher,
    pub(super) fired_at: Instant,
}

/// A session as the server knows it.
pub(super) struct ServerSession {
    pub(super) client: u64,
    pub(super) ephemerals: BTreeSet<String>,
}

/// A client as the ensemble knows it: its current session and its link.
pub(super) struct ClientState {
    pub(super) session_id: i64,
    /// Link down by [`MemoryClient::suspend`].
    pub(super) suspended: bool,
    /// Link down for an injected fault's blip (until the blip is reported).
    pub(super) blipping: bool,
    /// The session the client still reports after an [`FaultTiming::InNewSession`] fault moved
    /// it to `session_id` silently; `None` once reported.
    pub(super) unreported: Option<i64>,
    /// The client gave up on `session_id` while the link was down and reported `Lost`
    /// ([`MemoryClient::give_up_session`]): the next reconnect opens a new session, whatever
    /// the server thinks of the old one.
    pub(super) given_up: bool,
    pub(super) keep_watches: bool,
    pub(super) faults: VecDeque<Fault>,
    pub(super) events: mpsc::Sender<Delivery>,
    /// Events fired while the link was down (delivered at reconnect if watches survive).
    pub(super) held: Vec<Delivery>,
    pub(super) handle: Weak<MemoryClient>,
    /// Who the client authenticated as (sent again after every reconnect, so kept per
    /// client, not per session).
    pub(super) identities: Vec<super::acl::Identity>,
}

/// How a client's link came back.
pub(super) enum Reconnect {
    /// Same session: `Reconnected`.
    Same,
    /// The session expired meanwhile: `Lost`, then `Connected` with this new session.
    New(i64),
}

impl ServerState {
    /// Opens a session for a client (a `createSession` transaction) and makes it current.
    pub(super) fn new_session(&mut self, client: u64) -> i64 {
        self.next_zxid();
        let id = self.next_session;
        self.next_session += 1;
        self.sessions.insert(
            id,
            ServerSession {
                client,
                ephemerals: BTreeSet::new(),
            },
        );
        if let Some(cs) = self.clients.get_mut(&client) {
            cs.session_id = id;
        }
        id
    }

    /// Ends a session (a `closeSession` transaction): its watches are discarded first (it will
    /// never see its own ephemerals go), then its ephemeral nodes are deleted, firing others'
    /// watches.
    pub(super) fn kill_session(&mut self, session: i64) {
        self.remove_watches(session);
        let Some(s) = self.sessions.remove(&session) else {
            return;
        };
        let zxid = self.next_zxid();
        for path in s.ephemerals {
            self.remove_node(&path, zxid);
        }
    }

    /// Discards every watch of a session (link closed without `SetWatches`, or session gone).
    pub(super) fn remove_watches(&mut self, session: i64) {
        let trash = &mut self.trash;
        for map in [&mut self.data_watches, &mut self.child_watches] {
            map.retain(|_, entries| {
                let mut i = 0;
                while i < entries.len() {
                    if entries[i].session == session {
                        trash.push(entries.swap_remove(i).watcher);
                    } else {
                        i += 1;
                    }
                }
                !entries.is_empty()
            });
        }
    }

    /// Fires (and removes) every watch of `kind` on `path`.
    pub(super) fn fire(&mut self, kind: WatchKind, path: &str, event_type: EventType) {
        let map = match kind {
            WatchKind::Data => &mut self.data_watches,
            WatchKind::Child => &mut self.child_watches,
        };
        if map.is_empty() {
            return;
        }
        let Some(entries) = map.remove(path) else {
            return;
        };
        if let Some(txn) = &mut self.txn {
            // Inside a `multi`: delivered once it commits, registered again if it fails.
            txn.fired
                .push((kind, path.to_string(), event_type, entries));
            return;
        }
        self.deliver(path, event_type, entries);
    }

    /// Hands fired watch entries to their clients (see [`Self::dispatch`]).
    pub(super) fn deliver(&mut self, path: &str, event_type: EventType, entries: Vec<WatchEntry>) {
        let fired_at = Instant::now();
        for entry in entries {
            let delivery = Delivery {
                event: WatchedEvent {
                    event_type,
                    path: path.to_string(),
                },
                watcher: entry.watcher,
                fired_at,
            };
            self.dispatch(entry.session, delivery);
        }
    }

    /// Hands a fired watch to its client's event thread (in commit order: the channel is
    /// FIFO and this runs under the ensemble lock), or holds it while the link is down.
    pub(super) fn dispatch(&mut self, session: i64, delivery: Delivery) {
        let cs = self
            .sessions
            .get(&session)
            .and_then(|s| self.clients.get_mut(&s.client));
        match cs {
            Some(cs) if cs.suspended || cs.blipping => cs.held.push(delivery),
            Some(cs) => {
                if let Err(mpsc::SendError(d)) = cs.events.send(delivery) {
                    self.trash.push(d.watcher);
                }
            }
            None => self.trash.push(delivery.watcher),
        }
    }

    pub(super) fn add_watch(
        &mut self,
        kind: WatchKind,
        path: &str,
        session: i64,
        watcher: Watcher,
        id: Option<WatcherId>,
    ) {
        let map = match kind {
            WatchKind::Data => &mut self.data_watches,
            WatchKind::Child => &mut self.child_watches,
        };
        let entry = WatchEntry {
            session,
            watcher,
            id,
        };
        match map.get_mut(path) {
            Some(entries) => entries.push(entry),
            None => {
                map.insert(path.to_string(), vec![entry]);
            }
        }
    }

    /// How many watches of `kind` are set on `path` (by every session).
    pub(super) fn watches_on(&self, kind: WatchKind, path: &str) -> usize {
        let map = match kind {
            WatchKind::Data => &self.data_watches,
            WatchKind::Child => &self.child_watches,
        };
        map.get(path).map_or(0, Vec::len)
    }

    /// Drops, uncalled, the watches of `kind` on `path` past the first `keep`: those a
    /// request just set (a new watch goes last), when its reply is lost.
    pub(super) fn drop_watches_past(&mut self, kind: WatchKind, path: &str, keep: usize) {
        let map = match kind {
            WatchKind::Data => &mut self.data_watches,
            WatchKind::Child => &mut self.child_watches,
        };
        if let Some(entries) = map.get_mut(path) {
            if entries.len() > keep {
                self.trash
                    .extend(entries.drain(keep..).map(|entry| entry.watcher));
            }
            if entries.is_empty() {
                map.remove(path);
            }
        }
    }

    /// Removes, uncalled, the watch named `id` on `path` (either kind): true when it was
    /// there. The model keeps no server watch apart from its callbacks, so the watch goes
    /// with it, and a session still watches the path while another of its callbacks is
    /// there: as the native client's removeWatches, sent only for a path's last callback.
    pub(super) fn remove_watcher(&mut self, path: &str, id: WatcherId) -> bool {
        for map in [&mut self.data_watches, &mut self.child_watches] {
            let Some(entries) = map.get_mut(path) else {
                continue;
            };
            if let Some(at) = entries.iter().position(|e| e.id == Some(id)) {
                let entry = entries.remove(at);
                if entries.is_empty() {
                    map.remove(path);
                }
                self.trash.push(entry.watcher);
                return true;
            }
        }
        false
    }

    /// Callbacks registered and not fired, every one counted (unlike `watch_count`).
    pub(super) fn watcher_count(&self) -> usize {
        [&self.data_watches, &self.child_watches]
            .iter()
            .flat_map(|map| map.values())
            .map(Vec::len)
            .sum()
    }

    pub(super) fn watch_count(&self) -> usize {
        [&self.data_watches, &self.child_watches]
            .iter()
            .flat_map(|map| map.values())
            .map(|entries| {
                let sessions: HashSet<i64> = entries.iter().map(|e| e.session).collect();
                sessions.len()
            })
            .sum()
    }

    /// Reconnects a client whose link was down: same session if it still lives, else a new
    /// one. Watches survive only with `keep_watches` (then the events held meanwhile go out).
    pub(super) fn reconnect(&mut self, client: u64) -> Option<Reconnect> {
        let cs = self.clients.get_mut(&client)?;
        let session = cs.session_id;
        let held = std::mem::take(&mut cs.held);
        if std::mem::take(&mut cs.given_up) {
            // The old session is no longer the client's: it lives on the server until expired.
            cs.unreported = None;
            self.trash.extend(held.into_iter().map(|d| d.watcher));
            return Some(Reconnect::New(self.new_session(client)));
        }
        if cs.unreported.take().is_some() && self.sessions.contains_key(&session) {
            // The session changed silently before the link went down: report it now.
            self.trash.extend(held.into_iter().map(|d| d.watcher));
            return Some(Reconnect::New(session));
        }
        if self.sessions.contains_key(&session) {
            if cs.keep_watches {
                for d in held {
                    if let Err(mpsc::SendError(d)) = cs.events.send(d) {
                        self.trash.push(d.watcher);
                    }
                }
            } else {
                self.trash.extend(held.into_iter().map(|d| d.watcher));
                self.remove_watches(session);
            }
            Some(Reconnect::Same)
        } else {
            self.trash.extend(held.into_iter().map(|d| d.watcher));
            Some(Reconnect::New(self.new_session(client)))
        }
    }
}

/// What a client shares with its event thread.
#[derive(Default)]
pub(super) struct EventThreadShared {
    pub(super) counters: AtomicCounters,
    pub(super) delay_nanos: AtomicU64,
}

/// Runs watch callbacks, one at a time, in the order they fired; ends when the client closes.
pub(super) fn event_loop(receiver: mpsc::Receiver<Delivery>, shared: Arc<EventThreadShared>) {
    while let Ok(delivery) = receiver.recv() {
        let delay = Duration::from_nanos(shared.delay_nanos.load(Ordering::Relaxed));
        if !delay.is_zero() {
            let due = delivery.fired_at + delay;
            let now = Instant::now();
            if due > now {
                thread::sleep(due - now);
            }
        }
        shared.counters.watch_event();
        let Delivery { event, watcher, .. } = delivery;
        let path = event.path.clone();
        if catch_unwind(AssertUnwindSafe(move || watcher(event))).is_err() {
            log::error!("a watcher on {path:?} panicked; ignored");
        }
    }
}
