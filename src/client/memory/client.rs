//! One client of the ensemble: its request path (count, hook, faults, apply) and its
//! [`ZkClient`] implementation.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::{ReentrantMutex, RwLock};

use super::ensemble::MemoryEnsemble;
use super::faults::{FaultTiming, Hook};
use super::tree::ServerState;
use super::watches::{EventThreadShared, WatchKind};
use crate::client::acl::AclProvider;
use crate::client::counting::{Counters, Op};
use crate::client::{CreateMode, MultiOp, MultiResult, Stat, Watcher, ZkClient, ZkError, ZkResult};
use crate::session::{ConnectionState, Session};

/// One client of a [`MemoryEnsemble`], with one session at a time and fault injection.
///
/// Requests fail with [`ZkError::ConnectionLoss`] while the link is down, and with
/// [`ZkError::Closed`] after [`ZkClient::close`]. Dropping the last handle closes it.
pub struct MemoryClient {
    pub(super) ensemble: MemoryEnsemble,
    pub(super) id: u64,
    pub(super) session: Session,
    pub(super) shared: Arc<EventThreadShared>,
    pub(super) closed: AtomicBool,
    pub(super) hook: RwLock<Option<Hook>>,
    /// Serialises connection-state changes so they are reported in the order they happen.
    /// Reentrant: a session listener may call `expire`/`suspend` on its own thread.
    pub(super) transitions: ReentrantMutex<()>,
    /// The ACL of every node this client creates.
    pub(super) acl: AclProvider,
    /// Its credentials, for the client-side lock-out check.
    pub(super) auth: Vec<(String, Vec<u8>)>,
    /// The observer of the locks made on this client (`MemoryOptions::lock_observer`).
    pub(super) lock_observer: Option<Arc<dyn crate::primitives::observer::LockObserver>>,
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

    /// Requests made so far (failed ones included) and watch callbacks delivered.
    pub fn counters(&self) -> Counters {
        self.shared.counters.snapshot()
    }

    /// Sets every counter back to zero.
    pub fn reset_counters(&self) {
        self.shared.counters.reset();
    }

    /// The request path: count, hook, then one ensemble lock for checks, faults and apply.
    pub(super) fn request<T, F>(&self, op: Op, path: &str, apply: F) -> ZkResult<T>
    where
        F: FnOnce(&mut ServerState, i64) -> ZkResult<T>,
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
                        // Applied, but the reply is lost. A watch the read set dies with the
                        // connection it was set on: a client re-registers only the watches
                        // whose replies it got, so a read that failed leaves none.
                        let kind = watch_kind(op);
                        let before = kind.map_or(0, |k| inner.watches_on(k, path));
                        let _ = apply(inner, session);
                        if let Some(kind) = kind {
                            inner.drop_watches_past(kind, path, before);
                        }
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

/// The kind of watch a request of `op` may set.
fn watch_kind(op: Op) -> Option<WatchKind> {
    match op {
        Op::GetData => Some(WatchKind::Data),
        Op::GetChildren => Some(WatchKind::Child),
        _ => None,
    }
}

impl ZkClient for MemoryClient {
    /// With this client's ACL (refused before the request when it would lock the client out).
    fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> ZkResult<String> {
        let acl = self.acl.checked_acl_for(path, &self.auth)?;
        self.request(Op::Create, path, |inner, session| {
            let created = inner.create(session, path, data, mode, &acl);
            inner.write_outcome(created).map(|(actual, _)| actual)
        })
    }

    /// One request, as ZooKeeper's create2: the node's `Stat` comes with the create.
    fn create2(&self, path: &str, data: &[u8], mode: CreateMode) -> ZkResult<(String, Stat)> {
        let acl = self.acl.checked_acl_for(path, &self.auth)?;
        self.request(Op::Create, path, |inner, session| {
            let created = inner.create(session, path, data, mode, &acl);
            inner.write_outcome(created)
        })
    }

    fn delete(&self, path: &str, version: Option<i32>) -> ZkResult<()> {
        self.request(Op::Delete, path, |inner, session| {
            let deleted = inner.delete(session, path, version);
            inner.write_outcome(deleted)
        })
    }

    fn exists(&self, path: &str) -> ZkResult<Option<Stat>> {
        self.request(Op::Exists, path, |inner, _| inner.exists(path))
    }

    fn get_data(&self, path: &str, watcher: Option<Watcher>) -> ZkResult<(Vec<u8>, Stat)> {
        let id = crate::client::watcher_id::registering();
        self.request(Op::GetData, path, move |inner, session| {
            inner.get_data(session, path, watcher, id)
        })
    }

    fn get_children(&self, path: &str, watcher: Option<Watcher>) -> ZkResult<Vec<String>> {
        let id = crate::client::watcher_id::registering();
        self.request(Op::GetChildren, path, move |inner, session| {
            inner.get_children(session, path, watcher, id)
        })
    }

    /// No request: the model's watch goes with its callback (as the native client's
    /// removeWatches takes the server's).
    fn remove_watcher(&self, path: &str, id: crate::client::WatcherId) -> bool {
        self.ensemble
            .with_inner(|inner| inner.remove_watcher(path, id))
    }

    fn set_data(&self, path: &str, data: &[u8], version: Option<i32>) -> ZkResult<Stat> {
        self.request(Op::SetData, path, |inner, session| {
            let set = inner.set_data(session, path, data, version);
            inner.write_outcome(set)
        })
    }

    /// One request ([`Op::Multi`], matched by faults and hooks on its first operation's
    /// path), atomic as the server's. Every path is checked and every create's ACL made before
    /// the request, as the native client does before sending.
    fn multi(&self, ops: &[MultiOp]) -> ZkResult<Vec<MultiResult>> {
        let mut acls = Vec::new();
        for op in ops {
            match op {
                MultiOp::Create { path, mode, .. } => {
                    crate::paths::validate_create_path(path, mode.is_sequential())
                        .map_err(|_| ZkError::BadArguments)?;
                    acls.push(self.acl.checked_acl_for(path, &self.auth)?);
                }
                other => {
                    crate::paths::validate_path(other.path()).map_err(|_| ZkError::BadArguments)?
                }
            }
        }
        let first = ops.first().map_or("", MultiOp::path);
        self.request(Op::Multi, first, |inner, session| {
            inner.multi(session, ops, &acls)
        })
    }

    /// Transactions are modelled.
    fn has_multi(&self) -> bool {
        true
    }

    fn get_acl(&self, path: &str) -> ZkResult<(Vec<crate::client::acl::Acl>, Stat)> {
        self.request(Op::Exists, path, |inner, session| {
            inner.get_acl(session, path)
        })
    }

    fn acl_provider(&self) -> AclProvider {
        self.acl.clone()
    }

    fn own_digest_ids(&self) -> Vec<String> {
        crate::client::acl::own_digest_ids(&self.auth)
    }

    fn lock_observer(&self) -> Option<Arc<dyn crate::primitives::observer::LockObserver>> {
        self.lock_observer.clone()
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

    /// This ensemble (every client of it names the same nodes), no chroot.
    fn server_root(&self) -> Option<crate::client::ServerRoot> {
        let ensemble = Arc::as_ptr(&self.ensemble.inner);
        Some(crate::client::ServerRoot::new(
            format!("memory@{ensemble:p}"),
            None,
        ))
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
