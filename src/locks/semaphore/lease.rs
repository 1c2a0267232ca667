//! [`Lease`]: one lease of a semaphore, returned (its node deleted) on close or drop.

use std::sync::Arc;

use crate::client::{MultiOp, MultiResult};
use crate::error::Result;
use crate::locks::held::{HeldNode, LockState};
use crate::locks::internals::Wait;
use crate::paths;
use crate::retry::RetryPolicy;
use crate::Error;

/// One lease of a semaphore. Returned (its node deleted) on [`Lease::close`] or drop.
#[must_use = "the lease is returned as soon as it is dropped"]
pub struct Lease {
    pub(super) node: Arc<HeldNode>,
    pub(super) retry: Arc<dyn RetryPolicy>,
    pub(super) closed: bool,
    /// Taken by a future: dropped, it is given back without waiting for the delete's answer
    /// (async code must not stall its executor).
    pub(super) unawaited: bool,
}

impl Lease {
    /// Returns the lease now, reporting failure (drop only logs it).
    pub fn close(self) -> Result<()> {
        self.close_within(Wait::Until(None))
    }

    /// [`Self::close`], keeping the caller only as long as `wait` allows (the delete then goes
    /// on in the background and the error is returned).
    pub(crate) fn close_within(mut self, wait: Wait) -> Result<()> {
        self.close_inner(wait)
    }

    /// [`Self::close`] as a future: the delete's answer awaited, no thread blocked.
    pub async fn close_async(mut self) -> Result<()> {
        if std::mem::replace(&mut self.closed, true) {
            return Ok(());
        }
        crate::locks::cleanup::release_held_async(&self.node, self.retry.as_ref()).await
    }

    fn close_inner(&mut self, wait: Wait) -> Result<()> {
        if std::mem::replace(&mut self.closed, true) {
            return Ok(());
        }
        crate::locks::cleanup::release_held(&self.node, self.retry.as_ref(), wait)
    }

    /// The lease node's full path.
    pub fn node_path(&self) -> &str {
        self.node.path()
    }

    /// The lease node's name.
    pub fn node_name(&self) -> &str {
        paths::node_name(self.node.path())
    }

    /// The lease node's data (one read).
    pub fn data(&self) -> Result<Vec<u8>> {
        self.node
            .client()
            .get_data(self.node.path(), None)
            .map(|(d, _)| d)
            .map_err(|c| Error::zk("get_data", self.node.path(), c))
    }

    /// The node this lease is held through (state, fencing token).
    pub fn held_node(&self) -> &Arc<HeldNode> {
        &self.node
    }

    /// Held, Suspect or Lost (see [`LockState`]).
    pub fn state(&self) -> LockState {
        self.node.state()
    }

    /// `state() == Held`.
    pub fn is_valid(&self) -> bool {
        self.node.is_valid()
    }

    /// Blocks until the lease may be lost (Suspect or Lost) or the timeout passes, watching
    /// its node meanwhile (see [`HeldNode::wait_while_held`]); returns the state then.
    pub fn wait_while_held(&self, timeout: Option<std::time::Duration>) -> LockState {
        self.node.wait_while_held(timeout)
    }

    /// Blocks until the lease is `Lost` or the timeout passes, watching its node meanwhile
    /// (see [`HeldNode::wait_until_lost`]); returns the state then.
    pub fn wait_until_lost(&self, timeout: Option<std::time::Duration>) -> LockState {
        self.node.wait_until_lost(timeout)
    }

    /// Applies `ops` as one ZooKeeper transaction that commits only while this lease's node
    /// exists: a `check` of it (version -1) first, then `ops`, all or nothing. As
    /// [`LockGuard::fenced_multi`](crate::LockGuard::fenced_multi): [`Error::LockLost`] when
    /// the node is gone or the lease is known `Lost` (then without a request), `Error::Zk`
    /// for an operation of `ops` that fails.
    pub fn fenced_multi(&self, ops: &[MultiOp]) -> Result<Vec<MultiResult>> {
        crate::locks::fenced::fenced_multi(std::slice::from_ref(&self.node), ops)
    }

    /// The fencing token (the lease node's czxid).
    pub fn fencing_token(&self) -> Result<i64> {
        self.node.fencing_token()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let wait = match self.unawaited {
            true => Wait::Unawaited,
            false => Wait::Until(None),
        };
        if let Err(e) = self.close_inner(wait) {
            log::warn!("returning lease {}: {e}", self.node.path());
        }
    }
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        crate::locks::guard::debug_hold(f, "Lease", std::slice::from_ref(&self.node))
    }
}
