//! The library's error type: typed, with the path (or input) and the ZooKeeper code in it, and
//! a way to tell whether retrying is safe.

use std::time::Duration;

use crate::client::ZkError;

/// Everything that can go wrong in this library.
///
/// Bad input is reported, never a panic:
///
/// ```
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::locks::InterProcessSemaphoreV2;
/// use zk_locks::{Error, InterProcessLock, InterProcessMutex};
///
/// let client = MemoryEnsemble::new().connect();
/// let bad_path = InterProcessMutex::new(client.clone(), "locks/no-leading-slash");
/// assert!(matches!(bad_path, Err(Error::InvalidPath { .. })));
/// let no_leases = InterProcessSemaphoreV2::new(client.clone(), "/pool", 0);
/// assert!(matches!(no_leases, Err(Error::InvalidArgument { .. })));
/// let mutex = InterProcessMutex::new(client, "/locks/a")?;
/// let not_held = mutex.release().unwrap_err();
/// assert!(!not_held.is_retryable());
/// # Ok::<(), zk_locks::Error>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A path breaks ZooKeeper's path rules.
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// The rule it breaks, in the server's words.
        reason: &'static str,
    },

    /// A ZooKeeper operation failed.
    #[error("zookeeper {op} {path:?} failed: {code}")]
    Zk {
        /// The operation (`create`, `delete`, `get_children`, ...).
        op: &'static str,
        /// The path it was applied to.
        path: String,
        /// ZooKeeper's error code (also the error's `source()`).
        #[source]
        code: ZkError,
    },

    /// The server refused an operation on a node's ACL (`NoAuth`). With digest credentials
    /// the usual cause is a wrong password: ZooKeeper accepts any password when it is sent and
    /// only the node's ACL tells identities apart.
    #[error("not allowed to {op} {path:?}: the ACL of the node or of its parent does not grant this client's identity (no credentials, a wrong password, or another user's lock)")]
    NotAuthorized {
        /// The operation (`create`, `delete`, `get_children`, ...).
        op: &'static str,
        /// The path it was applied to.
        path: String,
    },

    /// The ACL chosen for a new node is invalid or would lock this client out of it
    /// (`InvalidAcl`): nothing was created.
    #[error("refused to {op} {path:?}: its ACL is invalid or does not grant this client READ, CREATE and DELETE (the `auth` scheme needs credentials)")]
    InvalidAcl {
        /// The operation.
        op: &'static str,
        /// The path it was applied to.
        path: String,
    },

    /// With an ACL provider that restricts access, the lock directory, or a node above it whose
    /// ACL governs who may create or delete it, lets others create or delete there: anyone it
    /// lets in could delete the holder's node (or the directory, to make it again open) and
    /// take the lock. Nothing was created. Protect that node, or accept it with
    /// [`AclProvider::accept_unprotected_directories`](crate::client::acl::AclProvider::accept_unprotected_directories).
    #[error("refusing to lock {lock:?}: {path:?} has the ACL [{acl}], which lets others create or delete there, so the client's ACL provider would not protect the lock (restrict that node's ACL, or accept this with AclProvider::accept_unprotected_directories)")]
    UnprotectedLock {
        /// The lock directory.
        lock: String,
        /// The node whose ACL lets others in.
        path: String,
        /// That node's ACL (`scheme:id:perms`, comma-separated).
        acl: String,
    },

    /// An argument is out of range (a quantity of 0, a semaphore of 0 leases, ...).
    #[error("invalid argument {name}: {reason}")]
    InvalidArgument {
        /// Which argument.
        name: &'static str,
        /// Why it is rejected, naming the value.
        reason: String,
    },

    /// The current thread does not own the lock it tried to release.
    #[error("the current thread does not own the lock at {path:?}")]
    NotOwner {
        /// The lock's path.
        path: String,
    },

    /// Nothing is acquired (a release without an acquire, or a release twice).
    #[error("the lock at {path:?} is not acquired")]
    NotAcquired {
        /// The lock's path.
        path: String,
    },

    /// A read-lock holder asked for the write lock: that would wait forever (Curator blocks).
    #[error("upgrading a read lock to a write lock is not supported (lock {path:?}); release the read lock first")]
    UpgradeNotSupported {
        /// The lock's path.
        path: String,
    },

    /// The session was lost (expired or assumed expired) while the operation needed it.
    #[error("the ZooKeeper session was lost while working on {path:?}")]
    SessionLost {
        /// The lock's path.
        path: String,
    },

    /// A fenced write (`LockGuard::fenced_multi`, `Lease::fenced_multi`) was refused because
    /// the lock is no longer ours: its node is gone (deleted, or with its session), or the
    /// client already knew the hold was lost. Nothing of the write was applied. Not
    /// retryable: acquire the lock again, then read what the new holder wrote.
    #[error("the lock at {path:?} was lost (its node {node:?} is gone): the fenced write was not applied")]
    LockLost {
        /// The directory of the lost node.
        path: String,
        /// The lost node's full path.
        node: String,
    },

    /// A fenced write was not sent because the lock's session is past
    /// [`Session::safe_until`](crate::session::Session::safe_until): its contact with the
    /// ensemble's leader was last proven too long ago, so the leader may have expired it and
    /// granted the lock to another. Nothing was sent. Retryable: once the session is proven
    /// again (the guard is `Held`), write again; if it was lost, the guard says `Lost`.
    #[error("the lock at {path:?} may have been given away (its session was last proven alive too long ago): the fenced write was not sent")]
    SessionUnproven {
        /// The lock's path.
        path: String,
    },

    /// The lock directory holds the nodes of a lock of another kind (a mutex, a read/write
    /// lock and a semaphore name their nodes differently, and none excludes the others): a
    /// lock taken beside them would be held at the same time as theirs. Nothing of ours is
    /// left in the directory. Not retryable: use one kind of lock per path (a semaphore's
    /// `leases` directory counts until the server reaps it, a while after its last lease).
    /// zklock exits 69 with it.
    #[error(
        "{path} is in use by a {found} (its node {node}): a {wanted} on the same path would \
         not exclude it; use one kind of lock per path"
    )]
    OtherLockKind {
        /// The lock directory.
        path: String,
        /// The kind of lock that was asked for.
        wanted: LockKindName,
        /// The kind whose node was found.
        found: LockKindName,
        /// The name of that node.
        node: String,
    },

    /// The retry policy gave up on an operation whose outcome kept being unknown.
    #[error("gave up on {path:?} after {attempts} attempts in {elapsed:?}: {last}")]
    RetriesExhausted {
        /// The path being worked on.
        path: String,
        /// How many attempts were made.
        attempts: u32,
        /// How long it took.
        elapsed: Duration,
        /// The last ZooKeeper error (also the error's `source()`).
        #[source]
        last: ZkError,
    },

    /// Could not establish a session.
    #[error("could not connect to ZooKeeper at {hosts:?}: {reason}")]
    Connect {
        /// The connect string as given.
        hosts: String,
        /// What went wrong (every host's failure when several were tried).
        reason: String,
        /// The I/O error beneath the last failed attempt, when there was one (a refused
        /// connection, a time-out, a server that closed without answering, a failed TLS
        /// handshake: rustls's error is inside it, `get_ref()`); also the error's `source()`.
        #[source]
        source: Option<std::io::Error>,
    },

    /// The client was closed by its owner.
    #[error("the ZooKeeper client is closed")]
    Closed,

    /// An acquire was cancelled through its [`CancelToken`](crate::locks::CancelToken)
    /// before the lock was granted: nothing of it is left in the queue (its node was deleted,
    /// or goes in the background while the link is down); the session and the client's other
    /// locks are untouched.
    #[error("acquiring {path:?} was cancelled")]
    Cancelled {
        /// The lock's path.
        path: String,
    },

    /// A leader election call on a participant that is not in the election: a latch or
    /// selector not started yet, or closed.
    #[error("not taking part in the election at {path:?}: {reason}")]
    NotParticipating {
        /// The election's path.
        path: String,
        /// Why: `not started`, `closed`, `started already`.
        reason: &'static str,
    },

    /// Several locks failed to release (multi-lock): every failure, in release order.
    #[error("{} lock(s) failed to release: {}", .0.len(), .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; "))]
    Multiple(Vec<Error>),

    /// A test or backend I/O failure (starting a server, a proxy, a child process).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// A kind of lock as [`Error::OtherLockKind`] names it: `mutex`, `read/write lock`,
/// `semaphore`, `leader latch`. The error layer knows kinds by name only; the recipes' own
/// [`LockLayout`](crate::locks::LockLayout) converts into it (`From`) and compares with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LockKindName(&'static str);

impl LockKindName {
    /// The kind named `name` (a short lower-case name).
    pub const fn new(name: &'static str) -> LockKindName {
        LockKindName(name)
    }

    /// The name.
    pub const fn as_str(self) -> &'static str {
        self.0
    }
}

impl std::fmt::Display for LockKindName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl Error {
    /// Wraps a ZooKeeper error code with the operation and path.
    pub fn zk(op: &'static str, path: impl Into<String>, code: ZkError) -> Error {
        match code {
            ZkError::Closed => Error::Closed,
            ZkError::NoAuth => Error::NotAuthorized {
                op,
                path: path.into(),
            },
            ZkError::InvalidAcl => Error::InvalidAcl {
                op,
                path: path.into(),
            },
            code => Error::Zk {
                op,
                path: path.into(),
                code,
            },
        }
    }

    /// The ZooKeeper code, when this is a ZooKeeper failure.
    pub fn zk_code(&self) -> Option<ZkError> {
        match self {
            Error::Zk { code, .. } => Some(*code),
            Error::NotAuthorized { .. } => Some(ZkError::NoAuth),
            Error::InvalidAcl { .. } => Some(ZkError::InvalidAcl),
            Error::RetriesExhausted { last, .. } => Some(*last),
            _ => None,
        }
    }

    /// True when trying the same call again may succeed (connection trouble, not bad input).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Zk { code, .. } => code.is_retryable(),
            Error::RetriesExhausted { .. }
            | Error::SessionLost { .. }
            | Error::SessionUnproven { .. }
            | Error::Connect { .. } => true,
            _ => false,
        }
    }
}

/// `?` from a [`ZkClient`](crate::ZkClient) call into this crate's [`Result`]: the code is
/// kept ([`Error::zk_code`]) and mapped as [`Error::zk`] maps it; the operation is named
/// `request` and the path is empty (the call's own result does not carry them; use
/// [`Error::zk`] to name them).
///
/// ```
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::{SharedClient, ZkError};
///
/// fn names(client: &SharedClient) -> zk_locks::Result<Vec<String>> {
///     Ok(client.get_children("/nothing/here", None)?)
/// }
/// let client: SharedClient = MemoryEnsemble::new().connect();
/// let err = names(&client).unwrap_err();
/// assert_eq!(err.zk_code(), Some(ZkError::NoNode));
/// ```
impl From<ZkError> for Error {
    fn from(code: ZkError) -> Error {
        Error::zk("request", "", code)
    }
}

/// Result with this library's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    /// A ZooKeeper failure chains its code, so error reporters print the cause.
    #[test]
    fn a_zookeeper_failure_chains_its_code() {
        let err = Error::zk("create", "/a", ZkError::NodeExists);
        let source = err.source().expect("a source");
        assert_eq!(source.downcast_ref::<ZkError>(), Some(&ZkError::NodeExists));
        let gave_up = Error::RetriesExhausted {
            path: "/a".into(),
            attempts: 3,
            elapsed: Duration::from_secs(1),
            last: ZkError::Throttled,
        };
        let source = gave_up.source().expect("a source");
        assert_eq!(source.downcast_ref::<ZkError>(), Some(&ZkError::Throttled));
    }
}
