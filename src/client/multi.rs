//! ZooKeeper's `multi`: several writes (and version checks) applied as one transaction, all
//! or none ([`ZkClient::multi`](super::ZkClient::multi)).
//!
//! The shape of a reply is the server's: one [`MultiResult`] per operation, in order. When
//! the transaction fails, nothing is applied and the results say where it stopped: the
//! operations before the failing one are [`MultiResult::RolledBack`] (they would have
//! applied), the failing one is [`MultiResult::Error`] with its code, and those after it are
//! `Error(`[`ZkError::RuntimeInconsistency`]`)` (not tried). ZooKeeper checks each
//! operation against the effects of the ones before it (a create of `/a` then of `/a/b`
//! works) and gives every change of a committed transaction the same zxid; watches fire
//! only once it committed.
//!
//! ```
//! use zk_locks::client::memory::MemoryEnsemble;
//! use zk_locks::client::{MultiOp, MultiResult};
//! use zk_locks::{CreateMode, ZkClient, ZkError};
//!
//! let client = MemoryEnsemble::new().connect();
//! client.create("/config", b"v1", CreateMode::Persistent)?;
//! let results = client.multi(&[
//!     MultiOp::Check { path: "/config".into(), version: 0 },
//!     MultiOp::SetData { path: "/config".into(), data: b"v2".to_vec(), version: -1 },
//!     MultiOp::Check { path: "/missing".into(), version: -1 },
//! ])?;
//! assert_eq!(results[0], MultiResult::RolledBack);
//! assert_eq!(results[1], MultiResult::RolledBack);
//! assert_eq!(results[2], MultiResult::Error(ZkError::NoNode));
//! assert_eq!(client.get_data("/config", None)?.0, b"v1"); // nothing applied
//! # Ok::<(), zk_locks::ZkError>(())
//! ```

use super::{CreateMode, Stat, ZkError};

/// One operation inside a `multi` transaction. Paths are the client's paths (a chrooted
/// client adds its chroot).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MultiOp {
    /// Create a node (as create2: the result carries the stat).
    Create {
        /// Path (with the sequence prefix for sequential modes).
        path: String,
        /// Data.
        data: Vec<u8>,
        /// Mode.
        mode: CreateMode,
    },
    /// Delete a node.
    Delete {
        /// Path.
        path: String,
        /// Expected version, -1 for any.
        version: i32,
    },
    /// Set a node's data.
    SetData {
        /// Path.
        path: String,
        /// Data.
        data: Vec<u8>,
        /// Expected version, -1 for any.
        version: i32,
    },
    /// Fail the transaction unless the node exists and has this version (-1: any version,
    /// so the node only has to exist).
    Check {
        /// Path.
        path: String,
        /// Expected version, -1 for any.
        version: i32,
    },
}

impl MultiOp {
    /// The path the operation applies to.
    pub fn path(&self) -> &str {
        match self {
            MultiOp::Create { path, .. }
            | MultiOp::Delete { path, .. }
            | MultiOp::SetData { path, .. }
            | MultiOp::Check { path, .. } => path,
        }
    }
}

/// The result of one operation of a `multi`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MultiResult {
    /// The created node's path, and its stat for a container create only: ZooKeeper (3.8)
    /// answers any other create inside a `multi` with the path alone (the stat is then all
    /// zeros; read the node for it).
    Create(String, Stat),
    /// Deleted.
    Delete,
    /// The node's new stat.
    SetData(Stat),
    /// The node exists with the expected version.
    Check,
    /// The transaction failed after this operation, which would have applied: it was rolled
    /// back (the server's error result with code 0).
    RolledBack,
    /// This operation failed (its code), or an earlier one did and this one was not tried
    /// ([`ZkError::RuntimeInconsistency`]): nothing of the transaction was applied.
    Error(ZkError),
}

impl MultiResult {
    /// True for the result of an operation that applied (the transaction committed).
    pub fn is_ok(&self) -> bool {
        !matches!(self, MultiResult::RolledBack | MultiResult::Error(_))
    }
}

/// The position and code of the operation a failed transaction stopped at; `None` when it
/// committed.
pub(crate) fn first_failure(results: &[MultiResult]) -> Option<(usize, ZkError)> {
    results.iter().enumerate().find_map(|(i, r)| match r {
        MultiResult::Error(code) => Some((i, *code)),
        _ => None,
    })
}
