//! The data tree: nodes with their `Stat`s, the zxid counter, per-parent sequence numbers,
//! container nodes, and the server's checks for each request, in the server's order.

use std::collections::{HashMap, HashSet};
use std::fmt::Write;
use std::hash::{BuildHasherDefault, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

use super::watches::{ClientState, ServerSession, WatchEntry, WatchKind, FIRST_SESSION_ID};
use crate::client::acl::{perms, Acl};
use crate::client::{CreateMode, EventType, Stat, Watcher, WatcherId, ZkError, ZkResult};
use crate::paths;

/// `ephemeralOwner` of a container node (ZooKeeper's `EphemeralType.CONTAINER_EPHEMERAL_OWNER`).
const CONTAINER_OWNER: i64 = i64::MIN;

/// Paths the server refuses to delete (`DataTree.isSpecialPath`).
const SPECIAL_PATHS: [&str; 4] = ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"];

/// The hasher of the model's maps: a multiply-rotate over 8-byte words (FxHash's). The keys
/// are paths and ids the application itself chooses, not an adversary's, and SipHash was a
/// sixth of a lock cycle on this backend.
#[derive(Default, Clone, Copy)]
pub(super) struct ModelHasher(u64);

impl ModelHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for ModelHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            self.add(u64::from_le_bytes(w));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    fn write_i64(&mut self, i: i64) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map of the model.
pub(super) type ModelMap<K, V> = HashMap<K, V, BuildHasherDefault<ModelHasher>>;
/// A set of the model.
pub(super) type ModelSet<K> = HashSet<K, BuildHasherDefault<ModelHasher>>;

#[derive(Clone)]
pub(super) struct Node {
    pub(super) data: Vec<u8>,
    pub(super) stat: Stat,
    /// The next sequence number for a sequential child. Measured on ZooKeeper 3.8: creates
    /// advance both it and `stat.cversion`, deletes advance only `stat.cversion` — so after
    /// deletes the reported cversion runs ahead of the sequence numbers.
    pub(super) next_sequence: i32,
    /// Unordered, like the server's `HashSet`: `get_children` order is not sorted.
    pub(super) children: ModelSet<String>,
    /// As stored by the create (`auth` entries already replaced by identities).
    pub(super) acl: Vec<Acl>,
}

impl Node {
    pub(super) fn new(data: Vec<u8>, stat: Stat) -> Node {
        Node {
            next_sequence: 0,
            data,
            stat,
            children: ModelSet::default(),
            acl: super::acl::open(),
        }
    }
}

pub(super) struct ServerState {
    pub(super) nodes: ModelMap<String, Node>,
    pub(super) zxid: i64,
    pub(super) next_session: i64,
    pub(super) next_client: u64,
    pub(super) sessions: ModelMap<i64, ServerSession>,
    pub(super) clients: ModelMap<u64, ClientState>,
    pub(super) data_watches: ModelMap<String, Vec<WatchEntry>>,
    pub(super) child_watches: ModelMap<String, Vec<WatchEntry>>,
    /// Watchers discarded under the lock, dropped after it is released (their captures may
    /// run arbitrary `Drop` code, e.g. close the last handle of a client).
    pub(super) trash: Vec<Watcher>,
    /// The `multi` being applied: its zxid, what it changed (to undo) and the watches it
    /// fired (delivered only once it commits). `None` outside a `multi`.
    pub(super) txn: Option<super::multi::Txn>,
}

pub(super) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Parent path and node name of a valid absolute path (`"/"` is its own parent).
pub(super) fn split(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(0) | None => ("/", path.get(1..).unwrap_or("")),
        Some(i) => (&path[..i], &path[i + 1..]),
    }
}

/// The server's `checkAndIncVersion`: `-1` matches any version, and the version skips `-1`
/// when it wraps (ZOOKEEPER-4743).
pub(super) fn check_version(current: i32, expected: Option<i32>) -> ZkResult<i32> {
    match expected {
        Some(v) if v != -1 && v != current => Err(ZkError::BadVersion),
        _ => Ok(match current.wrapping_add(1) {
            -1 => 0,
            next => next,
        }),
    }
}

pub(super) fn valid(path: &str) -> ZkResult<()> {
    paths::validate_path(path).map_err(|_| ZkError::BadArguments)
}

impl Default for ServerState {
    fn default() -> ServerState {
        let now = now_ms();
        let stat = |num_children| Stat {
            ctime: now,
            mtime: now,
            num_children,
            ..Stat::default()
        };
        let mut nodes = ModelMap::default();
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
        ServerState {
            nodes,
            zxid: 0,
            next_session: FIRST_SESSION_ID,
            next_client: 1,
            sessions: ModelMap::default(),
            clients: ModelMap::default(),
            data_watches: ModelMap::default(),
            child_watches: ModelMap::default(),
            trash: Vec::new(),
            txn: None,
        }
    }
}

impl ServerState {
    /// The zxid of the next change: every change of a `multi` shares the transaction's.
    pub(super) fn next_zxid(&mut self) -> i64 {
        self.zxid = self.peek_zxid();
        self.zxid
    }

    /// A write's outcome, with the server's rule for a refusal: 3.8 takes the write's zxid
    /// before its checks and logs a refused write as an error transaction, so the zxid is
    /// spent (measured: `memory_backend::model::a_refused_write_spends_its_zxid_as_on_the_server`).
    /// A bad path spends none: our clients refuse it before sending.
    pub(super) fn write_outcome<T>(&mut self, result: ZkResult<T>) -> ZkResult<T> {
        if matches!(&result, Err(code) if *code != ZkError::BadArguments) {
            self.next_zxid();
        }
        result
    }

    /// The zxid [`Self::next_zxid`] would give, without taking it.
    pub(super) fn peek_zxid(&self) -> i64 {
        match &self.txn {
            Some(txn) => txn.zxid,
            None => self.zxid + 1,
        }
    }

    /// `create`, with the checks in `PrepRequestProcessor`'s order: path, ACL (`InvalidAcl`),
    /// parent (`NoNode`), the parent's `CREATE` (`NoAuth`), `NodeExists`, ephemeral parent.
    /// Returns the node's actual path and its `Stat` (create2's reply).
    pub(super) fn create(
        &mut self,
        session: i64,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        acl: &[Acl],
    ) -> ZkResult<(String, Stat)> {
        paths::validate_create_path(path, mode.is_sequential())
            .map_err(|_| ZkError::BadArguments)?;
        let slash = path.rfind('/').ok_or(ZkError::BadArguments)?;
        let parent_path = if slash == 0 { "/" } else { &path[..slash] };
        let acl = super::acl::fixup(acl, self.identities(session))?;
        self.check_acl(session, parent_path, perms::CREATE)?;
        let parent = self.nodes.get(parent_path).ok_or(ZkError::NoNode)?;
        let sequence = parent.next_sequence;
        let parent_owner = parent.stat.ephemeral_owner;
        let full = if mode.is_sequential() {
            // `%010d` of a signed int: after the wrap, `-000000005` and `-2147483648`.
            let mut full = String::with_capacity(path.len() + 11);
            full.push_str(path);
            let _ = write!(full, "{sequence:010}");
            full
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
        self.save(parent_path);
        self.save(&full);
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
        let mut node = Node::new(data.to_vec(), stat);
        node.acl = acl;
        self.nodes.insert(full.clone(), node);
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
        Ok((full, stat))
    }

    /// `delete`: path, the parent's `DELETE` (`NoAuth`, even when the node is missing), the
    /// node, its version, its children.
    pub(super) fn delete(
        &mut self,
        session: i64,
        path: &str,
        version: Option<i32>,
    ) -> ZkResult<()> {
        valid(path)?;
        if SPECIAL_PATHS.contains(&path) {
            return Err(ZkError::BadArguments);
        }
        self.check_acl(session, split(path).0, perms::DELETE)?;
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
    pub(super) fn remove_node(&mut self, path: &str, zxid: i64) {
        let (parent_path, name) = split(path);
        if self.nodes.contains_key(path) {
            self.save(path);
            self.save(parent_path);
        }
        let Some(node) = self.nodes.remove(path) else {
            return;
        };
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
    pub(super) fn reap_containers(&mut self) -> usize {
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

    pub(super) fn set_data(
        &mut self,
        session: i64,
        path: &str,
        data: &[u8],
        version: Option<i32>,
    ) -> ZkResult<Stat> {
        valid(path)?;
        self.check_acl(session, path, perms::WRITE)?;
        let node = self.nodes.get(path).ok_or(ZkError::NoNode)?;
        let new_version = check_version(node.stat.version, version)?;
        self.save(path);
        let zxid = self.next_zxid();
        let node = self.nodes.get_mut(path).ok_or(ZkError::NoNode)?;
        node.data = data.to_vec();
        node.stat.version = new_version;
        node.stat.mzxid = zxid;
        node.stat.mtime = now_ms();
        node.stat.data_length = data.len() as i32;
        let stat = node.stat;
        self.fire(WatchKind::Data, path, EventType::NodeDataChanged);
        Ok(stat)
    }

    pub(super) fn exists(&self, path: &str) -> ZkResult<Option<Stat>> {
        valid(path)?;
        Ok(self.nodes.get(path).map(|n| n.stat))
    }

    pub(super) fn get_data(
        &mut self,
        session: i64,
        path: &str,
        watcher: Option<Watcher>,
        id: Option<WatcherId>,
    ) -> ZkResult<(Vec<u8>, Stat)> {
        let found = valid(path)
            .and_then(|()| self.check_acl(session, path, perms::READ))
            .and_then(|()| self.nodes.get(path).ok_or(ZkError::NoNode));
        match found {
            Ok(node) => {
                let result = (node.data.clone(), node.stat);
                if let Some(w) = watcher {
                    self.add_watch(WatchKind::Data, path, session, w, id);
                }
                Ok(result)
            }
            Err(e) => {
                self.trash.extend(watcher);
                Err(e)
            }
        }
    }

    /// getACL: the stored ACL (`auth` already replaced by identities) and the `Stat`; needs
    /// `READ` or `ADMIN`, as ZooKeeper 3.8 checks it.
    pub(super) fn get_acl(&self, session: i64, path: &str) -> ZkResult<(Vec<Acl>, Stat)> {
        valid(path)?;
        self.check_acl(session, path, perms::READ)
            .or_else(|_| self.check_acl(session, path, perms::ADMIN))?;
        let node = self.nodes.get(path).ok_or(ZkError::NoNode)?;
        Ok((node.acl.clone(), node.stat))
    }

    pub(super) fn get_children(
        &mut self,
        session: i64,
        path: &str,
        watcher: Option<Watcher>,
        id: Option<WatcherId>,
    ) -> ZkResult<Vec<String>> {
        let found = valid(path)
            .and_then(|()| self.check_acl(session, path, perms::READ))
            .and_then(|()| self.nodes.get(path).ok_or(ZkError::NoNode));
        match found {
            Ok(node) => {
                let result = node.children.iter().cloned().collect();
                if let Some(w) = watcher {
                    self.add_watch(WatchKind::Child, path, session, w, id);
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
