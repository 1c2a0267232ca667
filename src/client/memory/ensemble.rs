//! The ensemble handle: the shared server state, test inspection, and new clients.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;

use parking_lot::{Mutex, ReentrantMutex, RwLock};

use super::acl::{Identity, MemoryOptions};
use super::client::MemoryClient;
use super::tree::ServerState;
use super::watches::{event_loop, ClientState, EventThreadShared};
use crate::client::{Stat, ZkResult};
use crate::session::{ConnectionState, Session};

/// An in-memory ZooKeeper server: the shared state all its [`MemoryClient`]s talk to.
///
/// Cheap to clone (a handle); tests keep one to inspect the tree and to expire sessions.
#[derive(Clone, Default)]
pub struct MemoryEnsemble {
    pub(super) inner: Arc<Mutex<ServerState>>,
}

impl fmt::Debug for MemoryEnsemble {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.inner.lock();
        f.debug_struct("MemoryEnsemble")
            .field("nodes", &inner.nodes.len())
            .field("sessions", &inner.sessions.len())
            .field("zxid", &inner.zxid)
            .finish()
    }
}

impl MemoryEnsemble {
    /// A fresh ensemble holding only `/` and `/zookeeper` (with `quota` and `config`), like a
    /// new server.
    pub fn new() -> MemoryEnsemble {
        MemoryEnsemble::default()
    }

    /// Runs `f` under the ensemble lock, then drops the watchers it discarded, unlocked.
    pub(super) fn with_inner<R>(&self, f: impl FnOnce(&mut ServerState) -> R) -> R {
        let mut inner = self.inner.lock();
        let result = f(&mut inner);
        let trash = std::mem::take(&mut inner.trash);
        drop(inner);
        drop(trash);
        result
    }

    /// A new client with a new session, already `Connected` (session id known), with its own
    /// event thread for watch callbacks; no credentials, the open ACL.
    pub fn connect(&self) -> Arc<MemoryClient> {
        self.open_client(MemoryOptions::new(), Vec::new())
    }

    /// As [`connect`](Self::connect), with credentials and an ACL provider. Credentials of a
    /// scheme other than `digest` are refused with [`ZkError::AuthFailed`](crate::ZkError::AuthFailed).
    pub fn connect_with(&self, options: MemoryOptions) -> ZkResult<Arc<MemoryClient>> {
        let identities = options.identities()?;
        Ok(self.open_client(options, identities))
    }

    fn open_client(&self, options: MemoryOptions, identities: Vec<Identity>) -> Arc<MemoryClient> {
        let (events, receiver) = mpsc::channel();
        let shared = Arc::new(EventThreadShared::default());
        let thread_shared = shared.clone();
        thread::Builder::new()
            .name("zk-memory-events".to_string())
            .spawn(move || event_loop(receiver, thread_shared))
            .expect("cannot spawn the event thread of a MemoryClient");
        Arc::new_cyclic(|handle| {
            let (id, session_id) = self.with_inner(|inner| {
                let id = inner.next_client;
                inner.next_client += 1;
                inner.clients.insert(
                    id,
                    ClientState {
                        session_id: 0,
                        suspended: false,
                        blipping: false,
                        unreported: None,
                        given_up: false,
                        keep_watches: false,
                        faults: VecDeque::new(),
                        events,
                        held: Vec::new(),
                        handle: handle.clone(),
                        identities,
                    },
                );
                (id, inner.new_session(id))
            });
            MemoryClient {
                ensemble: self.clone(),
                id,
                session: Session::new(ConnectionState::Connected, Some(session_id)),
                shared,
                closed: AtomicBool::new(false),
                hook: RwLock::new(None),
                transitions: ReentrantMutex::new(()),
                acl: options.acl,
                auth: options.auth,
                lock_observer: options.lock_observer.0,
            }
        })
    }

    /// The sorted child names of a node, `None` if it does not exist (test inspection).
    pub fn children(&self, path: &str) -> Option<Vec<String>> {
        let inner = self.inner.lock();
        let mut names: Vec<String> = inner.nodes.get(path)?.children.iter().cloned().collect();
        names.sort_unstable();
        Some(names)
    }

    /// A node's data and `Stat`, `None` if it does not exist (test inspection).
    pub fn node(&self, path: &str) -> Option<(Vec<u8>, Stat)> {
        let inner = self.inner.lock();
        inner.nodes.get(path).map(|n| (n.data.clone(), n.stat))
    }

    /// Watches registered on the server, counted like `wchc`: distinct (session, path, kind)
    /// triples. Several callbacks of one session on one path count once, as on the server.
    pub fn watch_count(&self) -> usize {
        self.inner.lock().watch_count()
    }

    /// Watch callbacks registered and not fired, every one counted: several callbacks of one
    /// session on one path count once in [`Self::watch_count`], each here (what a client
    /// keeps for its waiters).
    pub fn watcher_count(&self) -> usize {
        self.inner.lock().watcher_count()
    }

    /// The server expires a session now: its ephemeral nodes are deleted (others' watches
    /// fire) and its watches are discarded. Its client, if connected, reports `Lost` then
    /// `Connected` with a new session; if its link is down, it learns at reconnect. Unknown
    /// or already expired ids are ignored.
    pub fn expire_session(&self, session_id: i64) {
        let client = self.with_inner(|inner| {
            inner
                .sessions
                .get(&session_id)
                .and_then(|s| inner.clients.get(&s.client))
                .and_then(|c| c.handle.upgrade())
        });
        match client {
            Some(client) => client.expire_session(session_id),
            None => self.with_inner(|inner| inner.kill_session(session_id)),
        }
    }

    /// Runs the container sweep now: every container that had a child and has none left is
    /// deleted (cascading). A real server sweeps every `znode.container.checkIntervalMs`
    /// (60 s by default), so a lock directory survives between a release and the next
    /// acquire; this ensemble sweeps only when asked, which keeps tests deterministic.
    pub fn reap_containers(&self) -> usize {
        self.with_inner(|inner| inner.reap_containers())
    }

    /// Sets a node's `cversion` (the next sequence number under it), to test the sequence
    /// wrap without 2³¹ creates. Returns false if the node does not exist. A test hook: with
    /// the `testing` feature only.
    #[cfg(feature = "testing")]
    #[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
    pub fn set_cversion_for_test(&self, path: &str, cversion: i32) -> bool {
        let mut inner = self.inner.lock();
        match inner.nodes.get_mut(path) {
            Some(node) => {
                node.stat.cversion = cversion;
                node.next_sequence = cversion;
                true
            }
            None => false,
        }
    }
}
