//! The ZooKeeper operations the lock recipes need, as one small object-safe trait.
//!
//! Three backends implement [`ZkClient`]: `native::NativeClient` speaks ZooKeeper's protocol
//! itself (the recommended backend for real ensembles), `zookeeper::ZookeeperClient` talks to
//! a real ensemble through the `zookeeper` crate (with a session layer that works around that
//! crate's defects), and `memory::MemoryEnsemble` is an in-memory ZooKeeper with fault
//! injection, used by unit tests and as the embedded default of the demos.
//!
//! Beyond the plain calls, [`ZkClient::create2`] returns the created node's `Stat` and
//! [`ZkClient::pipeline`] sends several requests back to back and collects the replies in
//! order (one round trip on the native client; one call after another elsewhere).
//! [`ZkClient::multi`] applies several writes and checks as one transaction ([`MultiOp`],
//! [`MultiResult`]): the native and in-memory backends; the `zookeeper`-crate backend
//! answers [`ZkError::Unimplemented`].
//!
//! Every watch is one-shot and delivered at most once. Watch callbacks run on a backend thread:
//! they must only record and notify (set a flag, notify a `Condvar`), never call the client —
//! a callback that calls the `zookeeper` crate deadlocks its IO thread.

pub mod acl;
pub(crate) mod connect_string;
pub mod counting;
pub mod memory;
pub(crate) mod multi;
pub mod native;
mod pipeline;
pub(crate) mod server_root;
mod submit;
mod watcher_id;
#[cfg(feature = "zookeeper-crate")]
#[cfg_attr(docsrs, doc(cfg(feature = "zookeeper-crate")))]
pub mod zookeeper;

#[cfg(feature = "testing")]
pub use counting::CountingClient;
pub use counting::{Counters, Op};
pub use multi::{MultiOp, MultiResult};
use pipeline::run_one;
pub use pipeline::{Request, Response};
pub use server_root::ServerRoot;
pub use submit::{Submission, Submitted};
pub use watcher_id::{registering_as, WatcherId};

use std::fmt;
use std::sync::Arc;

use crate::session::Session;

/// How a node is created. All five of ZooKeeper's classic modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CreateMode {
    /// A node that lives until deleted.
    Persistent,
    /// A node deleted when the creating session ends.
    Ephemeral,
    /// Persistent, with the parent's 10-digit sequence number appended to the name.
    PersistentSequential,
    /// Ephemeral, with the parent's 10-digit sequence number appended to the name.
    EphemeralSequential,
    /// A persistent node that the server deletes once it had children and has none left.
    Container,
}

impl CreateMode {
    /// True for the modes whose node dies with the session.
    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }

    /// True for the modes where the server appends a sequence number.
    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential | CreateMode::EphemeralSequential
        )
    }
}

/// A node's metadata, as ZooKeeper's `Stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Stat {
    /// zxid of the transaction that created the node (globally increasing: a fencing token).
    pub czxid: i64,
    /// zxid of the last data change.
    pub mzxid: i64,
    /// Creation time, milliseconds since the epoch.
    pub ctime: i64,
    /// Last data change time, milliseconds since the epoch.
    pub mtime: i64,
    /// Number of data changes.
    pub version: i32,
    /// Number of child changes (the source of sequence numbers).
    pub cversion: i32,
    /// Number of ACL changes.
    pub aversion: i32,
    /// Session id of the owner for an ephemeral node, 0 otherwise.
    pub ephemeral_owner: i64,
    /// Length of the data in bytes.
    pub data_length: i32,
    /// Number of children.
    pub num_children: i32,
    /// zxid of the last change to the children.
    pub pzxid: i64,
}

/// The kind of change a watch reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventType {
    /// A node was created (exists watches only; recipes do not use them).
    NodeCreated,
    /// The watched node was deleted.
    NodeDeleted,
    /// The watched node's data changed.
    NodeDataChanged,
    /// A child was added to or removed from the watched node.
    NodeChildrenChanged,
}

/// A one-shot watch notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedEvent {
    /// What happened.
    pub event_type: EventType,
    /// The watched path (chroot-relative on a chrooted client).
    pub path: String,
}

/// A one-shot watch callback. Runs on a backend thread: record and notify only.
pub type Watcher = Box<dyn FnOnce(WatchedEvent) + Send>;

/// ZooKeeper's error codes, plus the client-side conditions this library adds.
///
/// New codes may be named in a minor release (`#[non_exhaustive]`); a code this client does not
/// name is [`ZkError::Other`] with its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum ZkError {
    /// The node does not exist.
    #[error("no node")]
    NoNode,
    /// The node already exists.
    #[error("node exists")]
    NodeExists,
    /// The node has children.
    #[error("node not empty")]
    NotEmpty,
    /// The expected version did not match.
    #[error("bad version")]
    BadVersion,
    /// Ephemeral nodes cannot have children.
    #[error("ephemeral nodes cannot have children")]
    NoChildrenForEphemerals,
    /// The server rejected the arguments (for example an invalid path).
    #[error("bad arguments")]
    BadArguments,
    /// The connection was lost; the outcome of the request is unknown.
    #[error("connection loss")]
    ConnectionLoss,
    /// The session expired; its ephemeral nodes are gone.
    #[error("session expired")]
    SessionExpired,
    /// The operation did not complete in time; its outcome is unknown.
    #[error("operation timeout")]
    OperationTimeout,
    /// Not authorised.
    #[error("not authenticated")]
    NoAuth,
    /// The server rejected the client's credentials. Terminal: the client is closed.
    #[error("authentication failed")]
    AuthFailed,
    /// The ACL is invalid.
    #[error("invalid ACL")]
    InvalidAcl,
    /// The session moved to another server.
    #[error("session moved")]
    SessionMoved,
    /// The server is read-only.
    #[error("server is read-only")]
    NotReadOnly,
    /// The server does not implement the operation (`UNIMPLEMENTED`, -6); outcome unknown.
    #[error("unimplemented")]
    Unimplemented,
    /// The server gave up on the request in its own time (`REQUESTTIMEOUT`, -122); outcome
    /// unknown.
    #[error("request timed out on the server")]
    RequestTimeout,
    /// The server is overloaded and dropped the request unapplied (`THROTTLEDOP`, -127).
    #[error("throttled by the server")]
    Throttled,
    /// A quota on the node's subtree forbids the change (`QUOTAEXCEEDED`, -125).
    #[error("quota exceeded")]
    QuotaExceeded,
    /// A code this client does not name, with its number; its outcome is taken as unknown.
    #[error("server error code {0}")]
    Other(i32),
    /// A response could not be decoded; outcome unknown.
    #[error("marshalling error")]
    MarshallingError,
    /// A server-side inconsistency.
    #[error("system error")]
    SystemError,
    /// In a failed `multi`: this operation was not tried, an earlier one failed
    /// (`RUNTIMEINCONSISTENCY`, -2). Nothing of the transaction was applied.
    #[error("not tried: an earlier operation of the transaction failed")]
    RuntimeInconsistency,
    /// The client was closed by its owner; nothing more will succeed.
    #[error("client closed")]
    Closed,
    /// The reply was at or over the client's packet limit (`NativeOptions::packet_limit`,
    /// ZooKeeper's `jute.maxbuffer`, 1 MiB by default): it was read and discarded, and the
    /// connection kept. Typically the listing of a directory with too many children (about
    /// 17,000 lock nodes); the request itself was applied if it changes anything.
    #[error("reply over the client's packet limit")]
    ReplyTooLarge,
}

impl ZkError {
    /// True when the outcome is unknown and the operation may be retried (after checking, for
    /// a create, whether it was applied).
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ZkError::ConnectionLoss
                | ZkError::OperationTimeout
                | ZkError::SessionMoved
                | ZkError::Unimplemented
                | ZkError::RequestTimeout
                | ZkError::Throttled
                | ZkError::Other(_)
                | ZkError::MarshallingError
        )
    }

    /// ZooKeeper's number for this code (`KeeperException.Code`), `None` for conditions only
    /// the client knows ([`ZkError::Closed`], [`ZkError::ReplyTooLarge`]).
    pub fn code(self) -> Option<i32> {
        Some(match self {
            ZkError::SystemError => -1,
            ZkError::RuntimeInconsistency => -2,
            ZkError::ConnectionLoss => -4,
            ZkError::MarshallingError => -5,
            ZkError::Unimplemented => -6,
            ZkError::OperationTimeout => -7,
            ZkError::BadArguments => -8,
            ZkError::NoNode => -101,
            ZkError::NoAuth => -102,
            ZkError::BadVersion => -103,
            ZkError::NoChildrenForEphemerals => -108,
            ZkError::NodeExists => -110,
            ZkError::NotEmpty => -111,
            ZkError::SessionExpired => -112,
            ZkError::InvalidAcl => -114,
            ZkError::AuthFailed => -115,
            ZkError::SessionMoved => -118,
            ZkError::NotReadOnly => -119,
            ZkError::RequestTimeout => -122,
            ZkError::QuotaExceeded => -125,
            ZkError::Throttled => -127,
            ZkError::Other(code) => code,
            ZkError::Closed | ZkError::ReplyTooLarge => return None,
        })
    }

    /// True when the session (and every ephemeral node it owned) is gone.
    pub fn is_session_loss(self) -> bool {
        matches!(self, ZkError::SessionExpired)
    }
}

/// Result of a [`ZkClient`] call.
pub type ZkResult<T> = Result<T, ZkError>;

/// What [`ZkClient::delete_unawaited`] does with the delete's outcome (on a backend thread:
/// it must not call the client).
pub type DeleteDone = Box<dyn FnOnce(ZkResult<()>) + Send>;

/// The operations recipes need from ZooKeeper. Object-safe, `Send + Sync`.
///
/// Paths are absolute and valid (see [`crate::paths`]); the backends still reject invalid ones
/// with [`ZkError::BadArguments`]. All calls block the calling thread.
pub trait ZkClient: Send + Sync {
    /// Creates a node and returns its actual path (with the sequence suffix for sequential modes).
    fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> ZkResult<String>;

    /// Deletes a node; `version: None` deletes whatever the version.
    fn delete(&self, path: &str, version: Option<i32>) -> ZkResult<()>;

    /// The node's `Stat`, or `None` when it does not exist. Sets no watch.
    fn exists(&self, path: &str) -> ZkResult<Option<Stat>>;

    /// The node's data and `Stat`; with a watcher, a one-shot data watch (fires on
    /// NodeDataChanged or NodeDeleted). No watch is left behind when the node does not exist.
    fn get_data(&self, path: &str, watcher: Option<Watcher>) -> ZkResult<(Vec<u8>, Stat)>;

    /// The node's child names (unsorted); with a watcher, a one-shot child watch (fires on
    /// NodeChildrenChanged or NodeDeleted).
    fn get_children(&self, path: &str, watcher: Option<Watcher>) -> ZkResult<Vec<String>>;

    /// Replaces the node's data; `version: None` writes whatever the version.
    fn set_data(&self, path: &str, data: &[u8], version: Option<i32>) -> ZkResult<Stat>;

    /// Creates a node and returns its actual path and its `Stat` (the `czxid` is a fencing
    /// token). Backends with ZooKeeper's create2 do it in one request; the default creates,
    /// then reads the `Stat` (an ephemeral node deleted in between reads as
    /// [`ZkError::NoNode`]).
    fn create2(&self, path: &str, data: &[u8], mode: CreateMode) -> ZkResult<(String, Stat)> {
        let actual = self.create(path, data, mode)?;
        let stat = self.exists(&actual)?.ok_or(ZkError::NoNode)?;
        Ok((actual, stat))
    }

    /// Sends several requests back to back and then collects every reply, in order: one
    /// round trip on a backend that pipelines (ZooKeeper serves one session's requests in
    /// order, so a listing after a create sees the created node). Each request succeeds or
    /// fails on its own; this is not a transaction. The default runs them one after another,
    /// as a pipelining backend would: once one request failed with an unknown outcome or a lost
    /// session (its connection is gone), the ones behind it fail with the same error unsent.
    fn pipeline(&self, requests: &[Request]) -> Vec<ZkResult<Response>> {
        pipeline::one_by_one(requests, |r| run_one(self, r))
    }

    /// Deletes `path` (any version) without the caller waiting for the reply; `done` gets the
    /// outcome. The delete is ordered with this client's later requests as any request is: on
    /// one connection the server applies it before whatever the session sends after it, and
    /// when that connection is lost before the reply, `done` gets an error with an unknown
    /// outcome ([`ZkError::is_retryable`]). `done` may run on a backend thread: it must not
    /// call the client. The default deletes synchronously and then calls `done`.
    fn delete_unawaited(&self, path: &str, done: DeleteDone) {
        done(self.delete(path, None))
    }

    /// Sends `submissions` back to back and returns without waiting for them: `done` gets
    /// their results, one per request in order, once all are answered (on a backend thread:
    /// it must only record and wake). The server applies one session's requests in order, so
    /// later requests of this client see their effects. With no connection ready now, each
    /// result is [`ZkError::ConnectionLoss`] at once. What a future waits on: nothing blocks
    /// while the requests are out.
    ///
    /// Default: the requests run through the blocking methods on the calling thread, which
    /// then waits for them (a backend that cannot send without waiting; `NativeClient`
    /// never waits).
    fn submit(&self, submissions: Vec<Submission>, done: Submitted) {
        done(submit::run_blocking(self, submissions))
    }

    /// Applies `ops` as one transaction (ZooKeeper's `multi`): all or none, one request.
    /// `Ok` carries one result per operation, in order; a transaction that failed is still
    /// `Ok`, its results saying where it stopped (see [`MultiResult`]: the failing
    /// operation's code, [`MultiResult::RolledBack`] before it, `Error(RuntimeInconsistency)`
    /// after it). `Err` is for the request as a whole: a connection loss (outcome unknown), a
    /// lost session, a path or ACL refused before anything is sent. Creates carry the
    /// client's ACL, as [`Self::create`] does.
    ///
    /// Default: [`ZkError::Unimplemented`] (a backend without transactions: the
    /// `zookeeper`-crate backend); nothing is sent.
    fn multi(&self, ops: &[MultiOp]) -> ZkResult<Vec<MultiResult>> {
        let _ = ops;
        Err(ZkError::Unimplemented)
    }

    /// True when [`Self::multi`] is implemented (native and memory); fenced writes
    /// ([`crate::LockGuard::fenced_multi`]) need it. The default is false.
    fn has_multi(&self) -> bool {
        false
    }

    /// True when [`Self::create2`] is one request (ZooKeeper's create2). The lock engine then
    /// sends it in a pipeline with the listing of the lock directory and takes the fencing
    /// token from its `Stat`; otherwise it creates with [`Self::create`] and reads the token
    /// only when asked. The default is false.
    fn has_create2(&self) -> bool {
        false
    }

    /// How long a blocking request waits for its answer before it fails with
    /// [`ZkError::OperationTimeout`] (`None`: the backend has no such bound). A request
    /// awaited through [`Self::submit`] gives up after as long, so a future waits no longer
    /// than the blocking call. The default is `None`.
    fn call_timeout(&self) -> Option<std::time::Duration> {
        None
    }

    /// Whether a request submitted now goes out on a connection ([`Self::submit`] answers
    /// `ConnectionLoss` at once otherwise). A backend whose link becomes ready after it
    /// reports the transition wakes the futures waiting for it with the session's
    /// `link_ready`. The default: the session is connected.
    fn ready_to_send(&self) -> bool {
        self.session().state().is_connected()
    }

    /// True when a reconnect with the same session re-registers every outstanding watch (and
    /// the server then fires those whose node changed while the link was down), as ZooKeeper's
    /// own clients do with SetWatches. Waiters then keep their watch across a reconnect
    /// instead of listing again. The default is false: watches are assumed dropped.
    fn restores_watches(&self) -> bool {
        false
    }

    /// Removes, uncalled, the watcher named `id` ([`registering_as`]) that a read of `path`
    /// registered, if it has not fired: true when it was still there. Never waits for the
    /// server: when no other watcher of this client needs the server's watch on `path` (the
    /// server keeps one per session, path and table: data, set by `get_data` and `exists`,
    /// or children), the native backend sends ZooKeeper 3.5's `removeWatches` without
    /// waiting for its answer; with the link down, nothing is sent and the watch is not
    /// restored on reconnect. The memory backend drops the watch with its callback. Default:
    /// false, nothing removed (the `zookeeper` crate cannot remove a callback; the server's
    /// watch then stays until its node changes).
    fn remove_watcher(&self, path: &str, id: WatcherId) -> bool {
        let _ = (path, id);
        false
    }

    /// The ACL of the node at `path` and its `Stat` (ZooKeeper's getACL; needs `READ` or
    /// `ADMIN` on the node). Default: `Unimplemented` (a backend that cannot read ACLs).
    fn get_acl(&self, path: &str) -> ZkResult<(Vec<acl::Acl>, Stat)> {
        let _ = path;
        Err(ZkError::Unimplemented)
    }

    /// The ACL provider this client applies to the nodes it creates (default: open).
    fn acl_provider(&self) -> acl::AclProvider {
        acl::AclProvider::open()
    }

    /// The `digest` ids of this client's own credentials ([`acl::digest_id`]), to tell its
    /// own ACL entries from others' (default: none).
    fn own_digest_ids(&self) -> Vec<String> {
        Vec::new()
    }

    /// The observer every lock recipe made on this client reports to, unless the recipe
    /// sets its own (see [`crate::primitives::observer::LockObserver`]; default: none).
    fn lock_observer(&self) -> Option<Arc<dyn crate::primitives::observer::LockObserver>> {
        None
    }

    /// Where this client's paths lie on the server: its ensemble and chroot, so that a node
    /// of this client can be named on another client of the same ensemble (a fenced write
    /// over a multi-lock across clients checks each node there). The three backends say;
    /// default: `None` (cannot tell: such a fenced write is then refused unless every node is
    /// this client's).
    fn server_root(&self) -> Option<ServerRoot> {
        None
    }

    /// The connection-state machine of this client: state, epoch, session id, listeners.
    fn session(&self) -> &Session;

    /// Ends the session: its ephemeral nodes are deleted, later calls fail with
    /// [`ZkError::Closed`]. Idempotent.
    fn close(&self);
}

/// A shared client handle, as the recipes hold it.
pub type SharedClient = Arc<dyn ZkClient>;

impl fmt::Debug for dyn ZkClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkClient")
            .field("session", self.session())
            .finish()
    }
}

/// Lets a shared handle (`Arc<MemoryClient>`, `Arc<dyn ZkClient>`) be used wherever a
/// `ZkClient` is expected, e.g. wrapped in a `CountingClient`.
impl<T: ZkClient + ?Sized> ZkClient for Arc<T> {
    fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> ZkResult<String> {
        (**self).create(path, data, mode)
    }

    fn delete(&self, path: &str, version: Option<i32>) -> ZkResult<()> {
        (**self).delete(path, version)
    }

    fn exists(&self, path: &str) -> ZkResult<Option<Stat>> {
        (**self).exists(path)
    }

    fn get_data(&self, path: &str, watcher: Option<Watcher>) -> ZkResult<(Vec<u8>, Stat)> {
        (**self).get_data(path, watcher)
    }

    fn get_children(&self, path: &str, watcher: Option<Watcher>) -> ZkResult<Vec<String>> {
        (**self).get_children(path, watcher)
    }

    fn remove_watcher(&self, path: &str, id: WatcherId) -> bool {
        (**self).remove_watcher(path, id)
    }

    fn set_data(&self, path: &str, data: &[u8], version: Option<i32>) -> ZkResult<Stat> {
        (**self).set_data(path, data, version)
    }

    fn create2(&self, path: &str, data: &[u8], mode: CreateMode) -> ZkResult<(String, Stat)> {
        (**self).create2(path, data, mode)
    }

    fn pipeline(&self, requests: &[Request]) -> Vec<ZkResult<Response>> {
        (**self).pipeline(requests)
    }

    fn delete_unawaited(&self, path: &str, done: DeleteDone) {
        (**self).delete_unawaited(path, done)
    }

    fn submit(&self, submissions: Vec<Submission>, done: Submitted) {
        (**self).submit(submissions, done)
    }

    fn multi(&self, ops: &[MultiOp]) -> ZkResult<Vec<MultiResult>> {
        (**self).multi(ops)
    }

    fn has_multi(&self) -> bool {
        (**self).has_multi()
    }

    fn has_create2(&self) -> bool {
        (**self).has_create2()
    }

    fn call_timeout(&self) -> Option<std::time::Duration> {
        (**self).call_timeout()
    }

    fn ready_to_send(&self) -> bool {
        (**self).ready_to_send()
    }

    fn restores_watches(&self) -> bool {
        (**self).restores_watches()
    }

    fn get_acl(&self, path: &str) -> ZkResult<(Vec<acl::Acl>, Stat)> {
        (**self).get_acl(path)
    }

    fn acl_provider(&self) -> acl::AclProvider {
        (**self).acl_provider()
    }

    fn own_digest_ids(&self) -> Vec<String> {
        (**self).own_digest_ids()
    }

    fn lock_observer(&self) -> Option<Arc<dyn crate::primitives::observer::LockObserver>> {
        (**self).lock_observer()
    }

    fn server_root(&self) -> Option<ServerRoot> {
        (**self).server_root()
    }

    fn session(&self) -> &Session {
        (**self).session()
    }

    fn close(&self) {
        (**self).close()
    }
}
