//! An in-memory ZooKeeper ensemble with fault injection.
//!
//! [`MemoryEnsemble`] models one ZooKeeper 3.8 server faithfully enough for the lock recipes to
//! be tested against it deterministically: a tree of nodes with full [`Stat`]s from one global
//! zxid counter, sessions owning ephemeral nodes, per-parent sequence numbers taken from the
//! parent's child-creation counter, container nodes, one-shot data/child watches delivered in commit order
//! on a per-client event thread, and the server's error codes in the server's order of checks.
//! The tests in `tests/conformance` run the same bodies against this model and a real server.
//!
//! Each [`MemoryClient`] (from [`MemoryEnsemble::connect`]) is one client with one session at
//! a time. Faults are injected per client: a one-shot connection loss before or after a request
//! is applied ([`Fault`]), a link that goes down and comes back ([`MemoryClient::suspend`] /
//! [`MemoryClient::resume`]), server-side session expiry ([`MemoryClient::expire`]), delayed
//! watch delivery, and a hook that runs before each request ([`MemoryClient::on_request`]).
//! Every connection-state change goes through the client's [`Session`], exactly as the real
//! backend reports them, and is reported synchronously (before the faulting call returns) so
//! tests stay deterministic.
//!
//! Like the `zookeeper` crate, a client by default loses every watch when its connection comes
//! back ([`MemoryClient::set_watches_survive_reconnect`]); recipes must cope with that.
//!
//! ```
//! use zk_locks::client::memory::MemoryEnsemble;
//! use zk_locks::{CreateMode, ZkClient};
//!
//! let ensemble = MemoryEnsemble::new();
//! let client = ensemble.connect();
//! client.create("/app", b"hello", CreateMode::Persistent)?;
//! let node = client.create("/app/lock-", b"", CreateMode::EphemeralSequential)?;
//! assert_eq!(node, "/app/lock-0000000000");
//! let (data, stat) = client.get_data("/app", None)?;
//! assert_eq!((data.as_slice(), stat.num_children), (&b"hello"[..], 1));
//! client.close(); // the ephemeral node goes with the session
//! assert_eq!(ensemble.children("/app"), Some(vec![]));
//! # Ok::<(), zk_locks::ZkError>(())
//! ```

use std::cell::Cell;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Weak};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::{Mutex, ReentrantMutex, RwLock};

use super::counting::AtomicCounters;
pub use super::counting::{Counters, Op};
use super::{CreateMode, EventType, Stat, WatchedEvent, Watcher, ZkClient, ZkError, ZkResult};
use crate::paths;
use crate::session::{ConnectionState, Session};

/// `ephemeralOwner` of a container node (ZooKeeper's `EphemeralType.CONTAINER_EPHEMERAL_OWNER`).
const CONTAINER_OWNER: i64 = i64::MIN;

/// First session id handed out; like a real server's (server id in the top byte), never 0.
const FIRST_SESSION_ID: i64 = 0x0100_0000_0000_0001;

/// Paths the server refuses to delete (`DataTree.isSpecialPath`).
const SPECIAL_PATHS: [&str; 4] = ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"];

/// When an injected connection loss strikes, relative to applying the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultTiming {
    /// The request never reaches the server: it is not applied.
    BeforeApply,
    /// The server applies the request but the reply is lost (e.g. the sequential node exists
    /// and the caller does not know its name).
    AfterApply,
    /// The client's session expires (its ephemerals go), the link comes back at once with a
    /// new session, and the request is applied and answered in that new session. The client
    /// does not report the change (its [`Session`] still shows the old session, no `Lost`) until
    /// [`MemoryClient::report_session_change`] or its next reconnect: requests made meanwhile
    /// run in the new session too. This is what the `zookeeper` crate can do when it opens a
    /// new session by itself and sends queued requests before the change is noticed.
    InNewSession,
    /// The request is not applied and fails with [`ZkError::OperationTimeout`]; the link stays
    /// up and the connection state does not change (a client-side request deadline).
    Timeout,
}

/// A one-shot connection loss, injected with [`MemoryClient::inject`].
///
/// It fires on the next request of the client that matches `op` and `path_prefix`: that
/// request fails with [`ZkError::ConnectionLoss`] (applied or not, per `timing`) and the
/// client goes through a connection blip: `Suspended`, then `Reconnected` with the same
/// session (watches dropped unless [`MemoryClient::set_watches_survive_reconnect`]).
#[derive(Debug, Clone)]
pub struct Fault {
    /// The operation to strike; `None` strikes any.
    pub op: Option<Op>,
    /// Only requests whose path starts with this; `None` matches every path.
    pub path_prefix: Option<String>,
    /// Whether the request is applied before the connection drops.
    pub timing: FaultTiming,
}

impl Fault {
    /// Connection loss on the next `op`, which is not applied.
    pub fn before(op: Op) -> Fault {
        Fault {
            op: Some(op),
            path_prefix: None,
            timing: FaultTiming::BeforeApply,
        }
    }

    /// Connection loss on the next `op`, after the server applied it.
    pub fn after(op: Op) -> Fault {
        Fault {
            op: Some(op),
            path_prefix: None,
            timing: FaultTiming::AfterApply,
        }
    }

    /// The next `op` runs in a new session that the client does not report yet
    /// ([`FaultTiming::InNewSession`]).
    pub fn in_new_session(op: Op) -> Fault {
        Fault {
            op: Some(op),
            path_prefix: None,
            timing: FaultTiming::InNewSession,
        }
    }

    /// The next `op` fails with [`ZkError::OperationTimeout`], not applied, with no change of
    /// connection state ([`FaultTiming::Timeout`]).
    pub fn timeout(op: Op) -> Fault {
        Fault {
            op: Some(op),
            path_prefix: None,
            timing: FaultTiming::Timeout,
        }
    }

    /// Connection loss on the next request of any kind, which is not applied.
    pub fn before_any() -> Fault {
        Fault {
            op: None,
            path_prefix: None,
            timing: FaultTiming::BeforeApply,
        }
    }

    /// Connection loss on the next request of any kind, after the server applied it.
    pub fn after_any() -> Fault {
        Fault {
            op: None,
            path_prefix: None,
            timing: FaultTiming::AfterApply,
        }
    }

    /// Restricts the fault to requests whose path starts with `prefix`.
    pub fn on_path(mut self, prefix: impl Into<String>) -> Fault {
        self.path_prefix = Some(prefix.into());
        self
    }

    fn matches(&self, op: Op, path: &str) -> bool {
        self.op.is_none_or(|o| o == op)
            && self
                .path_prefix
                .as_deref()
                .is_none_or(|p| path.starts_with(p))
    }
}

struct Node {
    data: Vec<u8>,
    stat: Stat,
    /// The next sequence number for a sequential child. Measured on ZooKeeper 3.8: creates
    /// advance both it and `stat.cversion`, deletes advance only `stat.cversion` — so after
    /// deletes the reported cversion runs ahead of the sequence numbers.
    next_sequence: i32,
    /// Unordered, like the server's `HashSet`: `get_children` order is not sorted.
    children: HashSet<String>,
}

impl Node {
    fn new(data: Vec<u8>, stat: Stat) -> Node {
        Node {
            next_sequence: 0,
            data,
            stat,
            children: HashSet::new(),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum WatchKind {
    Data,
    Child,
}

struct WatchEntry {
    session: i64,
    watcher: Watcher,
}

/// A fired watch on its way to the client's event thread.
struct Delivery {
    event: WatchedEvent,
    watcher: Watcher,
    fired_at: Instant,
}

/// A session as the server knows it.
struct ServerSession {
    client: u64,
    ephemerals: BTreeSet<String>,
}

/// A client as the ensemble knows it: its current session and its link.
struct ClientState {
    session_id: i64,
    /// Link down by [`MemoryClient::suspend`].
    suspended: bool,
    /// Link down for an injected fault's blip (until the blip is reported).
    blipping: bool,
    /// The session the client still reports after an [`FaultTiming::InNewSession`] fault moved
    /// it to `session_id` silently; `None` once reported.
    unreported: Option<i64>,
    keep_watches: bool,
    faults: VecDeque<Fault>,
    events: mpsc::Sender<Delivery>,
    /// Events fired while the link was down (delivered at reconnect if watches survive).
    held: Vec<Delivery>,
    handle: Weak<MemoryClient>,
}

/// How a client's link came back.
enum Reconnect {
    /// Same session: `Reconnected`.
    Same,
    /// The session expired meanwhile: `Lost`, then `Connected` with this new session.
    New(i64),
}

struct Inner {
    nodes: HashMap<String, Node>,
    zxid: i64,
    next_session: i64,
    next_client: u64,
    sessions: HashMap<i64, ServerSession>,
    clients: HashMap<u64, ClientState>,
    data_watches: HashMap<String, Vec<WatchEntry>>,
    child_watches: HashMap<String, Vec<WatchEntry>>,
    /// Watchers discarded under the lock, dropped after it is released (their captures may
    /// run arbitrary `Drop` code, e.g. close the last handle of a client).
    trash: Vec<Watcher>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Parent path and node name of a valid absolute path (`"/"` is its own parent).
fn split(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(0) | None => ("/", path.get(1..).unwrap_or("")),
        Some(i) => (&path[..i], &path[i + 1..]),
    }
}

/// The server's `checkAndIncVersion`: `-1` matches any version, and the version skips `-1`
/// when it wraps (ZOOKEEPER-4743).
fn check_version(current: i32, expected: Option<i32>) -> ZkResult<i32> {
    match expected {
        Some(v) if v != -1 && v != current => Err(ZkError::BadVersion),
        _ => Ok(match current.wrapping_add(1) {
            -1 => 0,
            next => next,
        }),
    }
}

fn valid(path: &str) -> ZkResult<()> {
    paths::validate_path(path).map_err(|_| ZkError::BadArguments)
}

impl Default for Inner {
    fn default() -> Inner {
        let now = now_ms();
        let stat = |num_children| Stat {
            ctime: now,
            mtime: now,
            num_children,
            ..Stat::default()
        };
        let mut nodes = HashMap::new();
        let mut root = Node::new(Vec::new(), stat(1));
        root.children.insert("zookeeper".to_string());
        let mut zk = Node::new(Vec::new(), stat(2));
        zk.children.insert("quota".to_string());
        zk.children.insert("config".to_string());
        nodes.insert("/".to_string(), root);
        nodes.insert("/zookeeper".to_string(), zk);
        nodes.insert(
            "/zookeeper/quota".to_string(),
            Node::new(Vec::new(), stat(0)),
        );
        nodes.insert(
            "/zookeeper/config".to_string(),
            Node::new(Vec::new(), stat(0)),
        );
        Inner {
            nodes,
            zxid: 0,
            next_session: FIRST_SESSION_ID,
            next_client: 1,
            sessions: HashMap::new(),
            clients: HashMap::new(),
            data_watches: HashMap::new(),
            child_watches: HashMap::new(),
            trash: Vec::new(),
        }
    }
}

impl Inner {
    fn next_zxid(&mut self) -> i64 {
        self.zxid += 1;
        self.zxid
    }

    /// Opens a session for a client (a `createSession` transaction) and makes it current.
    fn new_session(&mut self, client: u64) -> i64 {
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
    fn kill_session(&mut self, session: i64) {
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
    fn remove_watches(&mut self, session: i64) {
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
    fn fire(&mut self, kind: WatchKind, path: &str, event_type: EventType) {
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
    fn dispatch(&mut self, session: i64, delivery: Delivery) {
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

    fn add_watch(&mut self, kind: WatchKind, path: &str, session: i64, watcher: Watcher) {
        let map = match kind {
            WatchKind::Data => &mut self.data_watches,
            WatchKind::Child => &mut self.child_watches,
        };
        let entry = WatchEntry { session, watcher };
        match map.get_mut(path) {
            Some(entries) => entries.push(entry),
            None => {
                map.insert(path.to_string(), vec![entry]);
            }
        }
    }

    fn watch_count(&self) -> usize {
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
    fn reconnect(&mut self, client: u64) -> Option<Reconnect> {
        let cs = self.clients.get_mut(&client)?;
        let session = cs.session_id;
        let held = std::mem::take(&mut cs.held);
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

    /// `create`, with the checks in `PrepRequestProcessor`'s order.
    fn create(
        &mut self,
        session: i64,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> ZkResult<String> {
        paths::validate_create_path(path, mode.is_sequential())
            .map_err(|_| ZkError::BadArguments)?;
        let slash = path.rfind('/').ok_or(ZkError::BadArguments)?;
        let parent_path = if slash == 0 { "/" } else { &path[..slash] };
        let parent = self.nodes.get(parent_path).ok_or(ZkError::NoNode)?;
        let sequence = parent.next_sequence;
        let parent_owner = parent.stat.ephemeral_owner;
        let full = if mode.is_sequential() {
            // `%010d` of a signed int: after the wrap, `-000000005` and `-2147483648`.
            format!("{path}{sequence:010}")
        } else {
            path.to_string()
        };
        if self.nodes.contains_key(&full) {
            return Err(ZkError::NodeExists);
        }
        if parent_owner != 0 && parent_owner != CONTAINER_OWNER {
            return Err(ZkError::NoChildrenForEphemerals);
        }
        let owner = match mode {
            CreateMode::Container => CONTAINER_OWNER,
            m if m.is_ephemeral() => {
                if !self.sessions.contains_key(&session) {
                    return Err(ZkError::SessionExpired);
                }
                session
            }
            _ => 0,
        };
        let zxid = self.next_zxid();
        let now = now_ms();
        let name = full[slash + 1..].to_string();
        if let Some(parent) = self.nodes.get_mut(parent_path) {
            parent.children.insert(name);
            // Real 3.6+ servers stop updating the stored cversion once it wraps (DataTree only
            // raises it), so names repeat there; we model the wrap the prep processor computes.
            parent.next_sequence = sequence.wrapping_add(1);
            parent.stat.cversion = parent.stat.cversion.wrapping_add(1);
            parent.stat.pzxid = zxid;
            parent.stat.num_children += 1;
        }
        let stat = Stat {
            czxid: zxid,
            mzxid: zxid,
            ctime: now,
            mtime: now,
            version: 0,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: owner,
            data_length: data.len() as i32,
            num_children: 0,
            pzxid: zxid,
        };
        self.nodes
            .insert(full.clone(), Node::new(data.to_vec(), stat));
        if mode.is_ephemeral() {
            if let Some(s) = self.sessions.get_mut(&session) {
                s.ephemerals.insert(full.clone());
            }
        }
        self.fire(
            WatchKind::Child,
            parent_path,
            EventType::NodeChildrenChanged,
        );
        Ok(full)
    }

    fn delete(&mut self, path: &str, version: Option<i32>) -> ZkResult<()> {
        valid(path)?;
        if SPECIAL_PATHS.contains(&path) {
            return Err(ZkError::BadArguments);
        }
        let node = self.nodes.get(path).ok_or(ZkError::NoNode)?;
        check_version(node.stat.version, version)?;
        if !node.children.is_empty() {
            return Err(ZkError::NotEmpty);
        }
        let zxid = self.next_zxid();
        self.remove_node(path, zxid);
        Ok(())
    }

    /// Removes a childless node in transaction `zxid` and fires its watches.
    fn remove_node(&mut self, path: &str, zxid: i64) {
        let Some(node) = self.nodes.remove(path) else {
            return;
        };
        let (parent_path, name) = split(path);
        if let Some(parent) = self.nodes.get_mut(parent_path) {
            parent.children.remove(name);
            parent.stat.num_children -= 1;
            // A delete is a child change too: it bumps the reported cversion (measured on
            // ZooKeeper 3.8) but not the sequence numbers.
            parent.stat.cversion = parent.stat.cversion.wrapping_add(1);
            if zxid > parent.stat.pzxid {
                parent.stat.pzxid = zxid;
            }
        }
        let owner = node.stat.ephemeral_owner;
        if owner != 0 && owner != CONTAINER_OWNER {
            if let Some(s) = self.sessions.get_mut(&owner) {
                s.ephemerals.remove(path);
            }
        }
        self.fire(WatchKind::Data, path, EventType::NodeDeleted);
        self.fire(WatchKind::Child, path, EventType::NodeDeleted);
        self.fire(
            WatchKind::Child,
            parent_path,
            EventType::NodeChildrenChanged,
        );
    }

    /// ZooKeeper's ContainerManager sweep: deletes every container that had a child and has
    /// none left, repeatedly (a reaped container can empty its container parent). Returns how
    /// many were deleted.
    fn reap_containers(&mut self) -> usize {
        let mut reaped = 0;
        loop {
            let empty: Vec<String> = self
                .nodes
                .iter()
                .filter(|(_, n)| {
                    n.stat.ephemeral_owner == CONTAINER_OWNER
                        && n.children.is_empty()
                        && n.stat.cversion != 0
                })
                .map(|(p, _)| p.clone())
                .collect();
            if empty.is_empty() {
                return reaped;
            }
            for path in empty {
                let zxid = self.next_zxid();
                self.remove_node(&path, zxid);
                reaped += 1;
            }
        }
    }

    fn set_data(&mut self, path: &str, data: &[u8], version: Option<i32>) -> ZkResult<Stat> {
        valid(path)?;
        let zxid = self.zxid + 1;
        let node = self.nodes.get_mut(path).ok_or(ZkError::NoNode)?;
        let new_version = check_version(node.stat.version, version)?;
        self.zxid = zxid;
        node.data = data.to_vec();
        node.stat.version = new_version;
        node.stat.mzxid = zxid;
        node.stat.mtime = now_ms();
        node.stat.data_length = data.len() as i32;
        let stat = node.stat;
        self.fire(WatchKind::Data, path, EventType::NodeDataChanged);
        Ok(stat)
    }

    fn exists(&self, path: &str) -> ZkResult<Option<Stat>> {
        valid(path)?;
        Ok(self.nodes.get(path).map(|n| n.stat))
    }

    fn get_data(
        &mut self,
        session: i64,
        path: &str,
        watcher: Option<Watcher>,
    ) -> ZkResult<(Vec<u8>, Stat)> {
        let found = valid(path).and_then(|()| self.nodes.get(path).ok_or(ZkError::NoNode));
        match found {
            Ok(node) => {
                let result = (node.data.clone(), node.stat);
                if let Some(w) = watcher {
                    self.add_watch(WatchKind::Data, path, session, w);
                }
                Ok(result)
            }
            Err(e) => {
                self.trash.extend(watcher);
                Err(e)
            }
        }
    }

    fn get_children(
        &mut self,
        session: i64,
        path: &str,
        watcher: Option<Watcher>,
    ) -> ZkResult<Vec<String>> {
        let found = valid(path).and_then(|()| self.nodes.get(path).ok_or(ZkError::NoNode));
        match found {
            Ok(node) => {
                let result = node.children.iter().cloned().collect();
                if let Some(w) = watcher {
                    self.add_watch(WatchKind::Child, path, session, w);
                }
                Ok(result)
            }
            Err(e) => {
                self.trash.extend(watcher);
                Err(e)
            }
        }
    }
}

/// An in-memory ZooKeeper server: the shared state all its [`MemoryClient`]s talk to.
///
/// Cheap to clone (a handle); tests keep one to inspect the tree and to expire sessions.
#[derive(Clone, Default)]
pub struct MemoryEnsemble {
    inner: Arc<Mutex<Inner>>,
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
    fn with_inner<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        let mut inner = self.inner.lock();
        let result = f(&mut inner);
        let trash = std::mem::take(&mut inner.trash);
        drop(inner);
        drop(trash);
        result
    }

    /// A new client with a new session, already `Connected` (session id known), with its own
    /// event thread for watch callbacks.
    pub fn connect(&self) -> Arc<MemoryClient> {
        let (events, receiver) = mpsc::channel();
        let shared = Arc::new(Shared::default());
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
                        keep_watches: false,
                        faults: VecDeque::new(),
                        events,
                        held: Vec::new(),
                        handle: handle.clone(),
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
    /// wrap without 2³¹ creates. Returns false if the node does not exist.
    #[doc(hidden)]
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

/// What a client shares with its event thread.
#[derive(Default)]
struct Shared {
    counters: AtomicCounters,
    delay_nanos: AtomicU64,
}

/// Runs watch callbacks, one at a time, in the order they fired; ends when the client closes.
fn event_loop(receiver: mpsc::Receiver<Delivery>, shared: Arc<Shared>) {
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

/// A hook for [`MemoryClient::on_request`]: the operation and the path as requested.
pub type RequestHook = Box<dyn Fn(Op, &str) + Send + Sync>;

type Hook = Arc<dyn Fn(Op, &str) + Send + Sync>;

thread_local! {
    /// Set while a request hook runs: requests the hook makes do not call it again.
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

/// One client of a [`MemoryEnsemble`], with one session at a time and fault injection.
///
/// Requests fail with [`ZkError::ConnectionLoss`] while the link is down, and with
/// [`ZkError::Closed`] after [`ZkClient::close`]. Dropping the last handle closes it.
pub struct MemoryClient {
    ensemble: MemoryEnsemble,
    id: u64,
    session: Session,
    shared: Arc<Shared>,
    closed: AtomicBool,
    hook: RwLock<Option<Hook>>,
    /// Serialises connection-state changes so they are reported in the order they happen.
    /// Reentrant: a session listener may call `expire`/`suspend` on its own thread.
    transitions: ReentrantMutex<()>,
}

impl fmt::Debug for MemoryClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryClient")
            .field("session", &self.session)
            .finish()
    }
}

impl Drop for MemoryClient {
    fn drop(&mut self) {
        self.close();
    }
}

impl MemoryClient {
    /// The current session id (it changes after the session is lost).
    pub fn session_id(&self) -> i64 {
        self.session.session_id().unwrap_or(0)
    }

    /// Queues a one-shot [`Fault`]; faults fire in the order they were queued.
    pub fn inject(&self, fault: Fault) {
        self.ensemble.with_inner(|inner| {
            if let Some(cs) = inner.clients.get_mut(&self.id) {
                cs.faults.push_back(fault);
            }
        });
    }

    /// Takes the link down: the session turns `Suspended` and every request fails with
    /// [`ZkError::ConnectionLoss`] until [`resume`](Self::resume); the session stays alive on
    /// the server (its ephemeral nodes remain). Watches are dropped now unless they survive
    /// reconnects. No-op if already suspended or closed.
    pub fn suspend(&self) {
        let _order = self.transitions.lock();
        let changed = self.ensemble.with_inner(|inner| {
            let Some(cs) = inner.clients.get_mut(&self.id) else {
                return false;
            };
            if cs.suspended {
                return false;
            }
            cs.suspended = true;
            if !cs.keep_watches {
                let session = cs.session_id;
                inner.remove_watches(session);
            }
            true
        });
        if changed {
            self.session.transition(ConnectionState::Suspended, None);
        }
    }

    /// Brings the link back: `Reconnected` if the session still lives (watches kept or
    /// dropped per [`set_watches_survive_reconnect`](Self::set_watches_survive_reconnect));
    /// if it expired meanwhile, `Lost` then `Connected` with a new session id. No-op if not
    /// suspended.
    pub fn resume(&self) {
        let _order = self.transitions.lock();
        let outcome = self.ensemble.with_inner(|inner| {
            let cs = inner.clients.get_mut(&self.id)?;
            if !cs.suspended {
                return None;
            }
            cs.suspended = false;
            inner.reconnect(self.id)
        });
        self.report(outcome);
    }

    /// The server expires this client's session now: its ephemeral nodes are deleted
    /// (others' watches fire) and its watches discarded. If connected, the client reports
    /// `Lost` then `Connected` with a new session id; if suspended, it learns at `resume`.
    pub fn expire(&self) {
        let session = self
            .ensemble
            .with_inner(|inner| inner.clients.get(&self.id).map(|cs| cs.session_id));
        if let Some(session) = session {
            self.expire_session(session);
        }
    }

    /// Whether watches survive a reconnect of the same session (as with ZooKeeper's Java
    /// client, which re-sends them). Default false, like the `zookeeper` crate, which drops
    /// every watch on reconnect: recipes must be tested that way.
    pub fn set_watches_survive_reconnect(&self, keep: bool) {
        self.ensemble.with_inner(|inner| {
            if let Some(cs) = inner.clients.get_mut(&self.id) {
                cs.keep_watches = keep;
            }
        });
    }

    /// Delays every watch callback by `delay` after its event fired (order is kept), to
    /// widen the window between a change and its notification.
    pub fn set_event_delay(&self, delay: Duration) {
        let nanos = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
        self.shared.delay_nanos.store(nanos, Ordering::Relaxed);
    }

    /// Sets (or clears) a hook called on the caller's thread before each request is applied,
    /// with no internal lock held: tests use it to pause a thread or expire the session at
    /// an exact point. Requests made by the hook itself do not call it again. If the session
    /// is lost while the hook runs, the request fails with [`ZkError::SessionExpired`]; if
    /// the link is down after it, with [`ZkError::ConnectionLoss`].
    pub fn on_request(&self, hook: Option<RequestHook>) {
        *self.hook.write() = hook.map(Hook::from);
    }

    /// Reports a session change made silently by an [`FaultTiming::InNewSession`] fault:
    /// `Lost`, then `Connected` with the new session id. No-op when none is pending.
    pub fn report_session_change(&self) {
        let _order = self.transitions.lock();
        let outcome = self.ensemble.with_inner(|inner| {
            let cs = inner.clients.get_mut(&self.id)?;
            cs.unreported.take()?;
            Some(Reconnect::New(cs.session_id))
        });
        self.report(outcome);
    }

    /// Requests made so far (failed ones included) and watch callbacks delivered.
    pub fn counters(&self) -> Counters {
        self.shared.counters.snapshot()
    }

    /// Sets every counter back to zero.
    pub fn reset_counters(&self) {
        self.shared.counters.reset();
    }

    fn report(&self, outcome: Option<Reconnect>) {
        match outcome {
            Some(Reconnect::Same) => {
                self.session.transition(ConnectionState::Reconnected, None);
            }
            Some(Reconnect::New(id)) => {
                self.session.transition(ConnectionState::Lost, None);
                self.session
                    .transition(ConnectionState::Connected, Some(id));
            }
            None => {}
        }
    }

    /// Expires `session` if it is still this client's current one.
    fn expire_session(&self, session: i64) {
        let _order = self.transitions.lock();
        let outcome = self.ensemble.with_inner(|inner| {
            let cs = inner.clients.get(&self.id)?;
            if cs.session_id != session || !inner.sessions.contains_key(&session) {
                return None;
            }
            inner.kill_session(session);
            let cs = inner.clients.get_mut(&self.id)?;
            let held = std::mem::take(&mut cs.held);
            let link_down = cs.suspended || cs.blipping;
            inner.trash.extend(held.into_iter().map(|d| d.watcher));
            if link_down {
                // The client learns at reconnect.
                return None;
            }
            Some(Reconnect::New(inner.new_session(self.id)))
        });
        self.report(outcome);
    }

    /// The connection blip after an injected fault: `Suspended`, then back.
    fn blip(&self) {
        let _order = self.transitions.lock();
        let user_suspended = self.ensemble.with_inner(|inner| {
            let cs = inner.clients.get_mut(&self.id)?;
            if cs.suspended {
                // Already down (and reported) by `suspend`: `resume` brings it back.
                cs.blipping = false;
            }
            Some(cs.suspended)
        });
        if user_suspended != Some(false) {
            return;
        }
        self.session.transition(ConnectionState::Suspended, None);
        let outcome = self.ensemble.with_inner(|inner| {
            inner.clients.get_mut(&self.id)?.blipping = false;
            inner.reconnect(self.id)
        });
        self.report(outcome);
    }

    fn call_hook(&self, op: Op, path: &str) {
        let hook = self.hook.read().clone();
        if let Some(hook) = hook {
            if !IN_HOOK.with(Cell::get) {
                IN_HOOK.with(|h| h.set(true));
                let result = catch_unwind(AssertUnwindSafe(|| hook(op, path)));
                IN_HOOK.with(|h| h.set(false));
                if let Err(panic) = result {
                    std::panic::resume_unwind(panic);
                }
            }
        }
    }

    /// The request path: count, hook, then one ensemble lock for checks, faults and apply.
    fn request<T, F>(&self, op: Op, path: &str, apply: F) -> ZkResult<T>
    where
        F: FnOnce(&mut Inner, i64) -> ZkResult<T>,
    {
        self.shared.counters.request(op);
        if self.closed.load(Ordering::Acquire) {
            return Err(ZkError::Closed);
        }
        let session_before = self.session.session_id();
        self.call_hook(op, path);
        let (result, unused, blip) = self.ensemble.with_inner(|inner| {
            let Some(cs) = inner.clients.get_mut(&self.id) else {
                return (Err(ZkError::Closed), Some(apply), false);
            };
            if cs.suspended || cs.blipping {
                return (Err(ZkError::ConnectionLoss), Some(apply), false);
            }
            let session = cs.session_id;
            // The session the client believes it has (an unreported change keeps the old one).
            let reported = cs.unreported.unwrap_or(session);
            if session_before != Some(reported) || !inner.sessions.contains_key(&session) {
                return (Err(ZkError::SessionExpired), Some(apply), false);
            }
            let fault = cs
                .faults
                .iter()
                .position(|f| f.matches(op, path))
                .and_then(|i| cs.faults.remove(i));
            match fault {
                None => (apply(inner, session), None, false),
                Some(fault) if fault.timing == FaultTiming::Timeout => {
                    (Err(ZkError::OperationTimeout), Some(apply), false)
                }
                Some(fault) if fault.timing == FaultTiming::InNewSession => {
                    cs.unreported.get_or_insert(session);
                    inner.kill_session(session);
                    let new = inner.new_session(self.id);
                    (apply(inner, new), None, false)
                }
                Some(fault) => {
                    cs.blipping = true;
                    if fault.timing == FaultTiming::AfterApply {
                        // Applied, but the reply is lost.
                        let _ = apply(inner, session);
                        (Err(ZkError::ConnectionLoss), None, true)
                    } else {
                        (Err(ZkError::ConnectionLoss), Some(apply), true)
                    }
                }
            }
        });
        // An unapplied request may own a watcher: drop it unlocked.
        drop(unused);
        if blip {
            self.blip();
        }
        result
    }
}

impl ZkClient for MemoryClient {
    fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> ZkResult<String> {
        self.request(Op::Create, path, |inner, session| {
            inner.create(session, path, data, mode)
        })
    }

    /// One request, as ZooKeeper's create2: the node's `Stat` comes with the create.
    fn create2(&self, path: &str, data: &[u8], mode: CreateMode) -> ZkResult<(String, Stat)> {
        self.request(Op::Create, path, |inner, session| {
            let actual = inner.create(session, path, data, mode)?;
            let stat = inner.exists(&actual)?.ok_or(ZkError::SystemError)?;
            Ok((actual, stat))
        })
    }

    fn delete(&self, path: &str, version: Option<i32>) -> ZkResult<()> {
        self.request(Op::Delete, path, |inner, _| inner.delete(path, version))
    }

    fn exists(&self, path: &str) -> ZkResult<Option<Stat>> {
        self.request(Op::Exists, path, |inner, _| inner.exists(path))
    }

    fn get_data(&self, path: &str, watcher: Option<Watcher>) -> ZkResult<(Vec<u8>, Stat)> {
        self.request(Op::GetData, path, move |inner, session| {
            inner.get_data(session, path, watcher)
        })
    }

    fn get_children(&self, path: &str, watcher: Option<Watcher>) -> ZkResult<Vec<String>> {
        self.request(Op::GetChildren, path, move |inner, session| {
            inner.get_children(session, path, watcher)
        })
    }

    fn set_data(&self, path: &str, data: &[u8], version: Option<i32>) -> ZkResult<Stat> {
        self.request(Op::SetData, path, |inner, _| {
            inner.set_data(path, data, version)
        })
    }

    /// Create2 is one request here, as on ZooKeeper.
    fn has_create2(&self) -> bool {
        true
    }

    /// As set by [`MemoryClient::set_watches_survive_reconnect`].
    fn restores_watches(&self) -> bool {
        self.ensemble.with_inner(|inner| {
            inner
                .clients
                .get(&self.id)
                .is_some_and(|cs| cs.keep_watches)
        })
    }

    fn session(&self) -> &Session {
        &self.session
    }

    /// Ends the session at once (ephemerals deleted, watches removed, even while the link is
    /// down: the server would expire it anyway) and reports `Closed`. The event thread ends
    /// after delivering the events already fired; it is not joined (close may run on it).
    fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let _order = self.transitions.lock();
        self.ensemble.with_inner(|inner| {
            if let Some(cs) = inner.clients.remove(&self.id) {
                inner.trash.extend(cs.held.into_iter().map(|d| d.watcher));
                inner.kill_session(cs.session_id);
            }
        });
        self.session.transition(ConnectionState::Closed, None);
    }
}
