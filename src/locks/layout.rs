//! Curator's node layout, in one place: the names the recipes give their nodes and
//! directories, and which recipe a lock directory belongs to.
//!
//! Every recipe names its nodes with these constants, and so does anything that reads a lock
//! directory from outside (`zklock holders`), so a rename can never leave a reader behind.
//! The names are Curator 5.4's: a JVM contender and a Rust one must agree on them to the byte.

use crate::client::{ZkClient, ZkError};
use crate::error::{Error, Result};

/// A mutex's node name (Curator's `InterProcessMutex.LOCK_NAME`):
/// `<path>/_c_<uuid>-lock-<seq>`.
pub const LOCK_NAME: &str = "lock-";
/// A leader latch's node name (Curator's `LeaderLatch.LOCK_NAME`):
/// `<path>/_c_<uuid>-latch-<seq>`. A leader selector queues with [`LOCK_NAME`] nodes (its
/// election is a mutex).
pub const LATCH_NAME: &str = "latch-";
/// A read/write lock's read node name (`<path>/_c_<uuid>-__READ__<seq>`).
pub const READ_LOCK_NAME: &str = "__READ__";
/// A read/write lock's write node name (`<path>/_c_<uuid>-__WRIT__<seq>`).
pub const WRITE_LOCK_NAME: &str = "__WRIT__";
/// A semaphore's admission directory (`<path>/locks`, a mutex of [`LOCK_NAME`] nodes).
pub const LOCK_PARENT: &str = "locks";
/// A semaphore's lease directory (`<path>/leases`).
pub const LEASE_PARENT: &str = "leases";
/// A semaphore's lease node name (`<path>/leases/_c_<uuid>-lease-<seq>`).
pub const LEASE_BASE_NAME: &str = "lease-";

/// The recipe whose nodes a lock directory holds, as told by its children's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockLayout {
    /// [`LOCK_NAME`] nodes, or nothing recognisable (an empty or missing directory).
    Mutex,
    /// [`READ_LOCK_NAME`] and [`WRITE_LOCK_NAME`] nodes in one queue.
    ReadWrite,
    /// A [`LEASE_PARENT`] directory (beside the [`LOCK_PARENT`] admission mutex).
    Semaphore,
    /// [`LATCH_NAME`] nodes: a leader latch's election.
    Latch,
}

impl LockLayout {
    /// Recognises the recipe from the children of a lock directory: a semaphore has a
    /// [`LEASE_PARENT`] child, a read/write lock read or write nodes, a leader latch
    /// [`LATCH_NAME`] nodes; anything else is read as a mutex (a leader selector's election
    /// is one).
    pub fn of_children(children: &[String]) -> LockLayout {
        if children.iter().any(|c| c == LEASE_PARENT) {
            LockLayout::Semaphore
        } else if children
            .iter()
            .any(|c| c.contains(READ_LOCK_NAME) || c.contains(WRITE_LOCK_NAME))
        {
            LockLayout::ReadWrite
        } else if children.iter().any(|c| c.contains(LATCH_NAME)) {
            LockLayout::Latch
        } else {
            LockLayout::Mutex
        }
    }

    /// Lists the directory at `path` (one request) and recognises its recipe; a missing
    /// directory is an empty mutex.
    pub fn of_path(client: &dyn ZkClient, path: &str) -> Result<LockLayout> {
        crate::paths::validate_path(path)?;
        match client.get_children(path, None) {
            Ok(children) => Ok(LockLayout::of_children(&children)),
            Err(ZkError::NoNode) => Ok(LockLayout::Mutex),
            Err(code) => Err(Error::zk("get_children", path, code)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_layout_is_told_by_the_children() {
        assert_eq!(LockLayout::of_children(&[]), LockLayout::Mutex);
        assert_eq!(
            LockLayout::of_children(&names(&["_c_a-lock-0000000001"])),
            LockLayout::Mutex
        );
        assert_eq!(
            LockLayout::of_children(&names(&["x", "_c_a-__WRIT__0000000001"])),
            LockLayout::ReadWrite
        );
        assert_eq!(
            LockLayout::of_children(&names(&["_c_a-__READ__0000000001"])),
            LockLayout::ReadWrite
        );
        assert_eq!(
            LockLayout::of_children(&names(&["_c_a-latch-0000000003"])),
            LockLayout::Latch
        );
        assert_eq!(
            LockLayout::of_children(&names(&["locks", "leases"])),
            LockLayout::Semaphore
        );
    }
}
