//! Fenced writes in ZooKeeper: a `multi` that commits only while the lock is ours.
//!
//! A fencing token protects a resource that checks it. For state kept in ZooKeeper itself
//! there is a stronger tool: one transaction whose first operations `check` (version -1)
//! that every node the hold stands on still exists, followed by the caller's writes. The
//! server applies all or nothing, so a holder that stalled past its session (or whose node
//! was deleted) cannot write, whatever it believes. The rules:
//!
//! - **Lost: refused without a request.** A hold the client already knows is lost
//!   ([`HeldNode`]'s belief: a session lost since the node was created, a closed client, a
//!   deletion seen) is [`Error::LockLost`] at once.
//! - **Past `safe_until`: refused without a request.** A hold whose session was last proven
//!   to the leader `T` ago or more (`Session::safe_until`) may have been given away: the
//!   write is [`Error::SessionUnproven`] at once, retryable once the session is proven again.
//! - **Suspect: the check decides.** A hold whose link is down, or not re-read since a
//!   reconnect, is written through: the server's check is the answer.
//! - **Every node is checked** (a multi-lock's guard holds several; a read/write lock's
//!   guard its own node), in the guard's order, then the caller's operations (their paths as
//!   the first node's client names them). The transaction runs on the first node's client;
//!   a node of another client (a multi-lock across sessions of one ensemble) is checked there
//!   too, at its path as that client names it ([`ZkClient::server_root`]: the same ensemble,
//!   under that client's chroot): existence is what counts, and a node's name (a fresh UUID)
//!   can only be ours.
//! - **A node the first client cannot name is refused up front**: another ensemble, a path
//!   outside the first client's chroot (two clients on `/app1` and `/app2`), or a client that
//!   cannot say where its paths lie is [`Error::InvalidArgument`] (`client`, saying which),
//!   without a request and not retryable; the hold is untouched (a check at a path that does
//!   not exist there would refuse the write as lost while every lock is held).
//! - **A backend without transactions** (`ZkClient::has_multi` false: the `zookeeper`-crate
//!   backend) is `Error::InvalidArgument` (`client`), without a request and not retryable.
//! - **The answer names the cause**: a check that fails with `NoNode` (or a session expired
//!   under the request) is [`Error::LockLost`] and the node is marked lost; a caller's
//!   operation that fails is [`Error::Zk`] (`op` `"multi"`, its path and code); an unknown
//!   outcome (connection loss) is that code, retryable: read back before writing again.

use std::sync::Arc;

use crate::client::multi::first_failure;
use crate::client::{MultiOp, MultiResult, SharedClient, ZkClient, ZkError};
use crate::error::{Error, Result};
use crate::paths;

use super::held::HeldNode;

/// Runs `ops` in one transaction behind a `check` of every node of `nodes`; the caller's
/// results on commit.
pub(crate) fn fenced_multi(nodes: &[Arc<HeldNode>], ops: &[MultiOp]) -> Result<Vec<MultiResult>> {
    let Some(first) = nodes.first() else {
        return Err(Error::NotAcquired {
            path: ops.first().map_or("", MultiOp::path).to_string(),
        });
    };
    if !first.client().has_multi() {
        // Not a condition that passes: say so instead of a retryable `Unimplemented`.
        return Err(Error::InvalidArgument {
            name: "client",
            reason: "this ZooKeeper client has no transactions (`ZkClient::has_multi` is false, \
                     as on the zookeeper-crate backend): fenced writes need NativeClient or the \
                     in-memory ensemble"
                .into(),
        });
    }
    if let Some(lost) = nodes.iter().find(|n| n.believed_lost()) {
        return Err(lost_error(lost));
    }
    // Past `safe_until` the leader may have expired the session and granted the lock to
    // another: nothing is sent (the member may not even reach the leader to refuse it).
    let now = std::time::Instant::now();
    if let Some(node) = nodes.iter().find(|n| {
        n.client()
            .session()
            .safe_until()
            .is_some_and(|until| now >= until)
    }) {
        return Err(Error::SessionUnproven {
            path: paths::parent(node.path()).unwrap_or("/").to_string(),
        });
    }
    let mut all = Vec::with_capacity(nodes.len() + ops.len());
    all.extend(
        paths_on(first.client(), nodes)?
            .into_iter()
            .map(|path| MultiOp::Check { path, version: -1 }),
    );
    all.extend_from_slice(ops);
    let mut results = match first.client().multi(&all) {
        Ok(results) => results,
        Err(ZkError::SessionExpired) => {
            // Our session is over, and with it the ephemeral node: nothing was applied.
            first.mark_lost();
            return Err(lost_error(first));
        }
        Err(code) => return Err(Error::zk("multi", first.path(), code)),
    };
    if results.len() != all.len() {
        return Err(Error::zk("multi", first.path(), ZkError::MarshallingError));
    }
    if let Some((at, code)) = first_failure(&results) {
        if let Some(node) = nodes.get(at) {
            if code == ZkError::NoNode {
                node.mark_lost();
                return Err(lost_error(node));
            }
            return Err(Error::zk("multi", node.path(), code));
        }
        let path = ops.get(at - nodes.len()).map_or("", MultiOp::path);
        return Err(Error::zk("multi", path, code));
    }
    Ok(results.split_off(nodes.len()))
}

/// Each node's path as `sender` names it: its own path for a node of `sender`, else its
/// path on the server seen under `sender`'s chroot. A node `sender` cannot name (another
/// ensemble, outside its chroot, or a client that cannot say) is `InvalidArgument`, before
/// any request: checked where it does not exist, a held node would read as lost.
fn paths_on(sender: &SharedClient, nodes: &[Arc<HeldNode>]) -> Result<Vec<String>> {
    let refuse = |node: &HeldNode, why: String| Error::InvalidArgument {
        name: "client",
        reason: format!(
            "a fenced write runs on the client of the guard's first node and checks every \
             node there, but {} cannot be named on that client: {why}; hold every lock of a \
             fenced multi-lock through clients of one ensemble whose nodes lie under the \
             first client's chroot (a client without a chroot names them all)",
            node.path()
        ),
    };
    let mut to = None;
    nodes
        .iter()
        .map(|node| {
            if Arc::ptr_eq(node.client(), sender) {
                return Ok(node.path().to_string());
            }
            let to = to.get_or_insert_with(|| sender.server_root());
            let (Some(to), Some(from)) = (to.as_ref(), node.client().server_root()) else {
                return Err(refuse(
                    node,
                    "its client cannot say where its paths lie".into(),
                ));
            };
            if to.ensemble() != from.ensemble() {
                return Err(refuse(
                    node,
                    format!(
                        "its client is on the ensemble {:?}, the first on {:?}",
                        from.ensemble(),
                        to.ensemble()
                    ),
                ));
            }
            let absolute = from.absolute(node.path());
            to.relative(&absolute).ok_or_else(|| {
                refuse(
                    node,
                    format!(
                        "it is {absolute:?} on the server, outside the first client's chroot {:?}",
                        to.chroot().unwrap_or("/")
                    ),
                )
            })
        })
        .collect()
}

fn lost_error(node: &HeldNode) -> Error {
    Error::LockLost {
        path: paths::parent(node.path()).unwrap_or("/").to_string(),
        node: node.path().to_string(),
    }
}
