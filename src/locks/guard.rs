//! `LockGuard`: holds a lock for a scope and releases it on drop, like `std::sync::MutexGuard`,
//! and tells the holder whether the lock can still be relied on.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crate::client::{MultiOp, MultiResult};
use crate::error::Result;

use super::held::{HeldNode, LockState};
use super::watching::{wait_on, worst};
use super::InterProcessLock;

/// Releases its lock when dropped. Not `Send`: a reentrant mutex is released by the thread
/// that took it.
///
/// **Moving it to another thread or task** (`spawn_blocking(move || mutex.lock())`, holding it
/// across an `.await` in a spawned task, storing it in a struct) fails to compile with
/// "`*const ()` cannot be sent between threads safely" (or "borrowed value does not live long
/// enough"): take an [`OwnedLockGuard`](super::OwnedLockGuard) instead, on an `Arc` of the
/// lock, with [`lock_owned`](super::InterProcessLock::lock_owned),
/// [`try_lock_owned`](super::InterProcessLock::try_lock_owned) or
/// [`try_lock_owned_with`](super::InterProcessLock::try_lock_owned_with) (a timeout and/or a
/// [`CancelToken`](super::CancelToken)). It is `Send + Sync + 'static`:
///
/// ```
/// use std::sync::Arc;
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::{InterProcessLock, InterProcessMutex};
///
/// # tokio::runtime::Builder::new_multi_thread().build().unwrap().block_on(async {
/// let mutex = Arc::new(InterProcessMutex::new(MemoryEnsemble::new().connect(), "/locks/job")?);
/// let guard = tokio::task::spawn_blocking(move || mutex.lock_owned()).await.unwrap()?;
/// tokio::task::yield_now().await; // held across awaits, in any task
/// drop(guard);
/// # Ok::<(), zk_locks::Error>(())
/// # }).unwrap();
/// ```
///
/// A holder should check [`LockGuard::is_valid`] (or wait with [`LockGuard::wait_while_held`])
/// before and after work that needs exclusion, and pass [`LockGuard::fencing_token`] to the
/// resources it writes, which reject tokens older than the newest they saw. State kept in
/// ZooKeeper itself is written with [`LockGuard::fenced_multi`]: the write commits only while
/// the lock node exists.
///
/// ```
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::{InterProcessLock, InterProcessMutex, LockState};
///
/// let ensemble = MemoryEnsemble::new();
/// let mutex = InterProcessMutex::new(ensemble.connect(), "/locks/report")?;
/// let guard = mutex.lock()?;
/// assert_eq!(guard.state(), LockState::Held);
/// assert!(guard.node_path().unwrap().starts_with("/locks/report/_c_"));
/// let token = guard.fencing_token()?; // the node's czxid
/// assert!(token > 0);
/// guard.unlock()?;                     // or drop it (a failure is then only logged)
/// # Ok::<(), zk_locks::Error>(())
/// ```
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct LockGuard<'a, L: InterProcessLock + ?Sized> {
    lock: &'a L,
    nodes: Vec<Arc<HeldNode>>,
    released: bool,
    _not_send: PhantomData<*const ()>,
}

impl<'a, L: InterProcessLock + ?Sized> LockGuard<'a, L> {
    pub(crate) fn new(lock: &'a L) -> Self {
        let nodes = lock.held_nodes();
        Self::with_nodes(lock, nodes)
    }

    /// A guard over the hold that `nodes` stand for.
    pub(crate) fn with_nodes(lock: &'a L, nodes: Vec<Arc<HeldNode>>) -> Self {
        LockGuard {
            lock,
            nodes,
            released: false,
            _not_send: PhantomData,
        }
    }

    /// The lock node's full path (the first one, for a multi-lock).
    pub fn node_path(&self) -> Option<&str> {
        self.nodes.first().map(|n| n.path())
    }

    /// The nodes this guard holds the lock through.
    pub fn nodes(&self) -> &[Arc<HeldNode>] {
        &self.nodes
    }

    /// Held, Suspect (connection suspended) or Lost; the worst over all nodes held (`Lost` when
    /// there are none). Asks the server only as [`HeldNode::state`] does: on the first call
    /// after each reconnect; a deletion of a node by someone else is seen once a wait armed a
    /// watch on it.
    pub fn state(&self) -> LockState {
        state_of(&self.nodes)
    }

    /// `state() == Held`.
    pub fn is_valid(&self) -> bool {
        self.state() == LockState::Held
    }

    /// Blocks until the lock may be lost (Suspect or Lost) or the timeout passes; returns the
    /// state then. While it waits, a watch on each node is armed (one `get_data` per node,
    /// kept for later waits), so a deletion of a node by someone else ends it as `Lost`.
    pub fn wait_while_held(&self, timeout: Option<Duration>) -> LockState {
        self.wait_while(timeout, |state| state == LockState::Held)
    }

    /// Blocks until the lock is `Lost` (a `Suspect` spell that ends in `Held` again does not
    /// count) or the timeout passes; returns the state then. Watches the nodes as
    /// [`Self::wait_while_held`] does.
    pub fn wait_until_lost(&self, timeout: Option<Duration>) -> LockState {
        self.wait_while(timeout, |state| state != LockState::Lost)
    }

    /// Blocks while `waiting(self.state())`, over every node of the guard (a multi-lock's
    /// nodes may belong to different clients: each of those sessions wakes the wait).
    fn wait_while(
        &self,
        timeout: Option<Duration>,
        waiting: impl Fn(LockState) -> bool,
    ) -> LockState {
        wait_while_on(&self.nodes, timeout, waiting)
    }

    /// The fencing token (the lock node's czxid; the largest one for a multi-lock).
    pub fn fencing_token(&self) -> Result<i64> {
        fencing_token_of(&self.nodes)
    }

    /// Applies `ops` as one ZooKeeper transaction that commits only while this guard's lock is
    /// ours: a `check` (version -1) of each of its nodes goes first, then `ops`, all or
    /// nothing. `Ok` holds the results of `ops`, all applied. [`Error::LockLost`](crate::Error::LockLost) when a node
    /// is gone (nothing applied; the guard is `Lost` from then on), or at once, without a
    /// request, when the guard already knows it is `Lost`; a `Suspect` guard writes through
    /// and the check decides. An operation of `ops` that fails is `Error::Zk` (`op`
    /// `"multi"`, its path and code: nothing applied); a connection loss leaves the outcome
    /// unknown (retryable: read back first). One request on the native and in-memory
    /// backends; on a backend without transactions (the `zookeeper` crate's,
    /// `ZkClient::has_multi` false) it is `Error::InvalidArgument` without a request.
    ///
    /// The transaction runs on the client of the guard's first node, and `ops` name paths as
    /// that client does (its chroot). A multi-lock's node of another client is checked at its
    /// path as the first client names it (`ZkClient::server_root`); one it cannot name
    /// (another ensemble, outside its chroot) is `Error::InvalidArgument` (`client`) without a
    /// request, the guard still `Held`.
    ///
    /// ```
    /// use zk_locks::client::memory::MemoryEnsemble;
    /// use zk_locks::client::MultiOp;
    /// use zk_locks::{CreateMode, Error, InterProcessLock, InterProcessMutex, ZkClient};
    ///
    /// let ensemble = MemoryEnsemble::new();
    /// let client = ensemble.connect();
    /// client.create("/config", b"v1", CreateMode::Persistent)?;
    /// let mutex = InterProcessMutex::new(client.clone(), "/locks/config")?;
    /// let guard = mutex.lock()?;
    /// let write = [MultiOp::SetData { path: "/config".into(), data: b"v2".to_vec(), version: -1 }];
    /// guard.fenced_multi(&write)?;                       // committed: the lock was ours
    ///
    /// client.delete(guard.node_path().unwrap(), None)?;  // the lock node goes (an operator)
    /// let refused = guard.fenced_multi(&write).unwrap_err();
    /// assert!(matches!(refused, Error::LockLost { .. }));
    /// assert_eq!(client.get_data("/config", None)?.0, b"v2");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fenced_multi(&self, ops: &[MultiOp]) -> Result<Vec<MultiResult>> {
        super::fenced::fenced_multi(&self.nodes, ops)
    }

    /// Releases now and reports a failure (dropping the guard only logs it). A `Lost` guard
    /// releases without waiting for the link, with `Ok`: its session is over, and a node of
    /// it that the server still has is deleted in the background once the link is back.
    pub fn unlock(mut self) -> Result<()> {
        self.released = true;
        self.lock.release_hold(&self.nodes)
    }
}

impl<L: InterProcessLock + ?Sized> Drop for LockGuard<'_, L> {
    fn drop(&mut self) {
        if !self.released {
            if let Err(e) = self.lock.release_hold(&self.nodes) {
                log::warn!("releasing lock on guard drop: {e}");
            }
        }
    }
}

impl<L: InterProcessLock + ?Sized> std::fmt::Debug for LockGuard<'_, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        debug_hold(f, "LockGuard", &self.nodes)
    }
}

/// How every guard (and lease) shows itself: what a user reads, not the internals. The lock's
/// path (the node's directory), its node (several for a multi-lock), the state as far as the
/// client knows (formatting makes no request), and the fencing token once known.
pub(crate) fn debug_hold(
    f: &mut std::fmt::Formatter<'_>,
    name: &str,
    nodes: &[Arc<HeldNode>],
) -> std::fmt::Result {
    fn directory(n: &Arc<HeldNode>) -> &str {
        n.path().rsplit_once('/').map_or("/", |(d, _)| d)
    }
    let mut s = f.debug_struct(name);
    match nodes {
        [node] => s
            .field("path", &directory(node))
            .field("node", &node.path()),
        _ => s
            .field("paths", &nodes.iter().map(directory).collect::<Vec<_>>())
            .field("nodes", &nodes.iter().map(|n| n.path()).collect::<Vec<_>>()),
    };
    let state = worst(&nodes.iter().map(|n| n.state_known()).collect::<Vec<_>>());
    let token = match nodes {
        [node] => node.token_known(),
        _ => nodes.iter().filter_map(|n| n.token_known()).max(),
    };
    s.field("state", &state).field("token", &token).finish()
}

// What a guard answers from the nodes it holds through, whoever holds the lock object: the
// borrowed `LockGuard` and the `OwnedLockGuard` (`owned.rs`) answer with these, so both keep
// one rule for each.

/// The worst state over `nodes` (`Lost` when there are none), stopping at the first `Lost`.
pub(crate) fn state_of(nodes: &[Arc<HeldNode>]) -> LockState {
    let mut states = Vec::with_capacity(nodes.len());
    for n in nodes {
        match n.state() {
            LockState::Lost => return LockState::Lost,
            state => states.push(state),
        }
    }
    worst(&states)
}

/// Blocks while `waiting(state)` over every node (a multi-lock's nodes may belong to
/// different clients: each of those sessions wakes the wait).
pub(crate) fn wait_while_on(
    nodes: &[Arc<HeldNode>],
    timeout: Option<Duration>,
    waiting: impl Fn(LockState) -> bool,
) -> LockState {
    let nodes: Vec<&HeldNode> = nodes.iter().map(|n| n.as_ref()).collect();
    wait_on(&nodes, timeout, waiting)
}

/// The largest czxid over `nodes` (the lock node's, for a single lock).
pub(crate) fn fencing_token_of(nodes: &[Arc<HeldNode>]) -> Result<i64> {
    let mut token = i64::MIN;
    for n in nodes {
        token = token.max(n.fencing_token()?);
    }
    Ok(token)
}
