//! Curator's node layout, in one place: the names the recipes give their nodes and
//! directories, and which recipe a lock directory belongs to.
//!
//! Every recipe names its nodes with these constants, and so does anything that reads a lock
//! directory from outside (`zklock holders`), so a rename can never leave a reader behind.
//! The names are Curator 5.4's: a JVM contender and a Rust one must agree on them to the byte.

use crate::client::{ZkClient, ZkError};
use crate::error::{Error, LockKindName, Result};

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
    /// The recipe a child of a lock directory belongs to, by its name: a [`LOCK_NAME`] node a
    /// mutex's (Curator's `_c_<uuid>-lock-` included), a [`READ_LOCK_NAME`] or
    /// [`WRITE_LOCK_NAME`] node a read/write lock's, the [`LOCK_PARENT`] and [`LEASE_PARENT`]
    /// directories a semaphore's, a [`LATCH_NAME`] node a leader latch's; `None` for a name no
    /// recipe makes.
    pub fn of_child(child: &str) -> Option<LockLayout> {
        if child == LEASE_PARENT || child == LOCK_PARENT {
            Some(LockLayout::Semaphore)
        } else if child.contains(READ_LOCK_NAME) || child.contains(WRITE_LOCK_NAME) {
            Some(LockLayout::ReadWrite)
        } else if child.contains(LATCH_NAME) {
            Some(LockLayout::Latch)
        } else if child.contains(LOCK_NAME) {
            Some(LockLayout::Mutex)
        } else {
            None
        }
    }

    /// Every recipe whose nodes `children` hold, each once, in the order mutex, read/write,
    /// semaphore, leader latch (empty when no child is a recipe's).
    pub fn all_of_children(children: &[String]) -> Vec<LockLayout> {
        let found: Vec<LockLayout> = children.iter().filter_map(|c| Self::of_child(c)).collect();
        [
            LockLayout::Mutex,
            LockLayout::ReadWrite,
            LockLayout::Semaphore,
            LockLayout::Latch,
        ]
        .into_iter()
        .filter(|kind| found.contains(kind))
        .collect()
    }

    /// A short lower-case name: `mutex`, `read/write lock`, `semaphore`, `leader latch`.
    pub fn as_str(self) -> &'static str {
        match self {
            LockLayout::Mutex => "mutex",
            LockLayout::ReadWrite => "read/write lock",
            LockLayout::Semaphore => "semaphore",
            LockLayout::Latch => "leader latch",
        }
    }

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

impl std::fmt::Display for LockLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What [`Error::OtherLockKind`] names a layout by (the error layer knows no layouts).
impl From<LockLayout> for LockKindName {
    fn from(layout: LockLayout) -> LockKindName {
        LockKindName::new(layout.as_str())
    }
}

/// A reported kind is a layout when their names agree.
impl PartialEq<LockLayout> for LockKindName {
    fn eq(&self, layout: &LockLayout) -> bool {
        self.as_str() == layout.as_str()
    }
}

/// The first child of `children` that belongs to a recipe other than `own` (a lock of
/// another kind on the same directory, which `own`'s rule would not exclude), with its kind.
/// A semaphore's [`LOCK_PARENT`] alone does not count: its holders have leases in
/// [`LEASE_PARENT`] (which counts until the server reaps it, once empty), and an admitted
/// semaphore that has to make that directory looks for other kinds itself; an admission
/// directory left by a semaphore that withdrew must not keep other kinds out.
pub(crate) fn other_kind(children: &[String], own: LockLayout) -> Option<(LockLayout, &str)> {
    children
        .iter()
        .filter(|c| *c != LOCK_PARENT)
        .find_map(|child| {
            LockLayout::of_child(child)
                .filter(|kind| *kind != own)
                .map(|kind| (kind, child.as_str()))
        })
}

/// The error of a lock of kind `own` that found `node`, of kind `found`, in its directory.
pub(crate) fn other_kind_error(
    path: &str,
    own: LockLayout,
    found: LockLayout,
    node: &str,
) -> Error {
    Error::OtherLockKind {
        path: path.to_string(),
        wanted: own.into(),
        found: found.into(),
        node: node.to_string(),
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

    /// Each node is named by its own kind: Curator's protected mutex nodes and bare ones are a
    /// mutex's, a semaphore's two directories are its own (not lock nodes), other names none.
    #[test]
    fn each_child_is_of_its_own_kind() {
        for (child, kind) in [
            (
                "_c_0b1c2d3e-0000-4000-8000-000000000000-lock-0000000001",
                Some(LockLayout::Mutex),
            ),
            ("lock-0000000001", Some(LockLayout::Mutex)),
            ("_c_a-__READ__0000000002", Some(LockLayout::ReadWrite)),
            ("_c_a-__WRIT__0000000003", Some(LockLayout::ReadWrite)),
            ("leases", Some(LockLayout::Semaphore)),
            ("locks", Some(LockLayout::Semaphore)),
            ("config", None),
        ] {
            assert_eq!(LockLayout::of_child(child), kind, "{child}");
        }
        let mixed = names(&["leases", "x", "_c_a-lock-0000000001", "locks"]);
        assert_eq!(
            LockLayout::all_of_children(&mixed),
            [LockLayout::Mutex, LockLayout::Semaphore]
        );
        assert_eq!(
            other_kind(&mixed, LockLayout::Semaphore),
            Some((LockLayout::Mutex, "_c_a-lock-0000000001"))
        );
        assert_eq!(other_kind(&mixed[2..3], LockLayout::Mutex), None);
        assert_eq!(other_kind(&mixed[1..], LockLayout::Mutex), None);
        assert_eq!(
            other_kind(&mixed, LockLayout::Mutex),
            Some((LockLayout::Semaphore, "leases"))
        );
    }
}
