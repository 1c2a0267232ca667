//! `multi` in the model: the operations applied one after another on the live tree, each
//! against the effects of those before it (as the server's prep processor checks them), then
//! committed, or undone as a whole when one fails. Every change of the transaction has its
//! zxid, spent even when it fails (as the server's); the watches it fired are delivered only
//! once it commits (a failed transaction fires nothing and leaves every watch registered).

use super::tree::{check_version, valid, Node, ServerState};
use super::watches::{WatchEntry, WatchKind};
use crate::client::acl::{perms, Acl};
use crate::client::{CreateMode, EventType, MultiOp, MultiResult, Stat, ZkError, ZkResult};

/// What a `multi` in progress changed, to undo it, and the watches it fired.
pub(super) struct Txn {
    /// The zxid of every change of the transaction.
    pub(super) zxid: i64,
    /// Each touched path as it was before its first change, oldest first.
    saved: Vec<(String, Option<Node>)>,
    /// Watches fired by the transaction's changes, in order.
    pub(super) fired: Vec<(WatchKind, String, EventType, Vec<WatchEntry>)>,
}

impl ServerState {
    /// Records `path` as it is now, before a change of the `multi` in progress (no-op
    /// outside one). Restoring in reverse order brings back the oldest copy.
    pub(super) fn save(&mut self, path: &str) {
        if let Some(txn) = &mut self.txn {
            txn.saved
                .push((path.to_string(), self.nodes.get(path).cloned()));
        }
    }

    /// ZooKeeper's `multi` of write operations, `acls` being the ACL of each create in order.
    /// The results are the server's: each operation's, or, when one fails, `RolledBack` for
    /// those before it, its code, and `RuntimeInconsistency` for those after it.
    pub(super) fn multi(
        &mut self,
        session: i64,
        ops: &[MultiOp],
        acls: &[Vec<Acl>],
    ) -> ZkResult<Vec<MultiResult>> {
        let before = self.zxid;
        self.txn = Some(Txn {
            zxid: before + 1,
            saved: Vec::new(),
            fired: Vec::new(),
        });
        let mut acls = acls.iter();
        let mut results = Vec::with_capacity(ops.len());
        let mut failed = None;
        for (i, op) in ops.iter().enumerate() {
            let result = match op {
                MultiOp::Create { path, data, mode } => {
                    let acl = acls.next().map(Vec::as_slice).unwrap_or(&[]);
                    // The server answers a create inside a multi with its path only (its
                    // `Op.create` for any create opcode), a container create with its stat.
                    self.create(session, path, data, *mode, acl)
                        .map(|(path, stat)| {
                            let stat = if *mode == CreateMode::Container {
                                stat
                            } else {
                                Stat::default()
                            };
                            MultiResult::Create(path, stat)
                        })
                }
                MultiOp::Delete { path, version } => self
                    .delete(session, path, Some(*version))
                    .map(|()| MultiResult::Delete),
                MultiOp::SetData {
                    path,
                    data,
                    version,
                } => self
                    .set_data(session, path, data, Some(*version))
                    .map(MultiResult::SetData),
                MultiOp::Check { path, version } => self
                    .check(session, path, *version)
                    .map(|()| MultiResult::Check),
            };
            match result {
                Ok(r) => results.push(r),
                Err(code) => {
                    failed = Some((i, code));
                    break;
                }
            }
        }
        let Some(txn) = self.txn.take() else {
            return Err(ZkError::SystemError);
        };
        match failed {
            None => {
                // Committed (an empty or check-only transaction takes its zxid too).
                self.zxid = txn.zxid;
                for (_, path, event_type, entries) in txn.fired {
                    self.deliver(&path, event_type, entries);
                }
                Ok(results)
            }
            Some((at, code)) => {
                self.undo(txn);
                Ok((0..ops.len())
                    .map(|i| match i.cmp(&at) {
                        std::cmp::Ordering::Less => MultiResult::RolledBack,
                        std::cmp::Ordering::Equal => MultiResult::Error(code),
                        std::cmp::Ordering::Greater => {
                            MultiResult::Error(ZkError::RuntimeInconsistency)
                        }
                    })
                    .collect())
            }
        }
    }

    /// `check` inside a `multi`: path, the node (`NoNode`), `READ` on it (`NoAuth`), its
    /// version (`BadVersion`; -1 matches any).
    fn check(&self, session: i64, path: &str, version: i32) -> ZkResult<()> {
        valid(path)?;
        self.check_acl(session, path, perms::READ)?;
        let node = self.nodes.get(path).ok_or(ZkError::NoNode)?;
        check_version(node.stat.version, Some(version)).map(drop)
    }

    /// Puts back every touched path as it was, with its session's ephemeral set, and
    /// re-registers the watches the transaction fired. The zxid stays spent: the server logs
    /// a failed transaction too (measured on 3.8: the next change's zxid is one further).
    fn undo(&mut self, txn: Txn) {
        for (path, old) in txn.saved.into_iter().rev() {
            if let Some(now) = self.nodes.remove(&path) {
                self.forget_ephemeral(&path, now.stat.ephemeral_owner);
            }
            if let Some(old) = old {
                let owner = old.stat.ephemeral_owner;
                self.nodes.insert(path.clone(), old);
                if let Some(s) = self.sessions.get_mut(&owner) {
                    s.ephemerals.insert(path);
                }
            }
        }
        for (kind, path, _, entries) in txn.fired {
            let map = match kind {
                WatchKind::Data => &mut self.data_watches,
                WatchKind::Child => &mut self.child_watches,
            };
            map.entry(path).or_default().extend(entries);
        }
        self.zxid = txn.zxid;
    }

    fn forget_ephemeral(&mut self, path: &str, owner: i64) {
        if let Some(s) = self.sessions.get_mut(&owner) {
            s.ephemerals.remove(path);
        }
    }
}
