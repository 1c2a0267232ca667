//! Request bodies ([`WireRequest`], a `multi`'s [`MultiOp`]s) and their encoding, as `zookeeper.jute`
//! lays them out.

use super::{opcode, xid};
use crate::client::acl::{perms, Acl};
use crate::client::native::jute::Writer;
use crate::client::{CreateMode, MultiOp};

/// A request body, with the opcode it goes under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireRequest {
    /// create2 or createContainer (containers get their own opcode).
    Create {
        /// Server path.
        path: String,
        /// Data.
        data: Vec<u8>,
        /// Mode.
        mode: CreateMode,
        /// ACL (empty: open).
        acl: Vec<Acl>,
    },
    /// delete.
    Delete {
        /// Server path.
        path: String,
        /// Expected version, -1 for any.
        version: i32,
    },
    /// exists.
    Exists {
        /// Server path.
        path: String,
        /// Leave a watch.
        watch: bool,
    },
    /// getData.
    GetData {
        /// Server path.
        path: String,
        /// Leave a watch.
        watch: bool,
    },
    /// setData.
    SetData {
        /// Server path.
        path: String,
        /// Data.
        data: Vec<u8>,
        /// Expected version, -1 for any.
        version: i32,
    },
    /// getChildren.
    GetChildren {
        /// Server path.
        path: String,
        /// Leave a watch.
        watch: bool,
    },
    /// getACL.
    GetAcl {
        /// Server path.
        path: String,
    },
    /// sync.
    Sync {
        /// Server path.
        path: String,
    },
    /// removeWatches (`RemoveWatchesRequest`): the server drops this connection's watch of one
    /// table on a path.
    RemoveWatches {
        /// Server path.
        path: String,
        /// `Watcher.WatcherType`: 1 the children table, 2 the data table (getData's and
        /// exists' watches), 3 both.
        watcher_type: i32,
    },
    /// multi.
    Multi {
        /// The operations (server paths).
        ops: Vec<MultiOp>,
        /// The ACL of each create among `ops`, in order (empty: open).
        create_acls: Vec<Vec<Acl>>,
    },
    /// ping (xid -2).
    Ping,
    /// closeSession.
    CloseSession,
    /// auth (xid -4).
    Auth {
        /// Scheme, e.g. `digest`.
        scheme: String,
        /// Credentials, e.g. `user:password`.
        auth: Vec<u8>,
    },
    /// setWatches (xid -8).
    SetWatches {
        /// The last zxid seen: the server fires what changed after it.
        relative_zxid: i64,
        /// Server paths with data watches.
        data: Vec<String>,
        /// Server paths with exist watches.
        exist: Vec<String>,
        /// Server paths with child watches.
        child: Vec<String>,
    },
}

/// Create flags of a mode (`CreateMode.toFlag`).
pub fn create_flags(mode: CreateMode) -> i32 {
    match mode {
        CreateMode::Persistent => 0,
        CreateMode::Ephemeral => 1,
        CreateMode::PersistentSequential => 2,
        CreateMode::EphemeralSequential => 3,
        CreateMode::Container => 4,
    }
}

fn create_opcode(mode: CreateMode) -> i32 {
    if mode == CreateMode::Container {
        opcode::CREATE_CONTAINER
    } else {
        opcode::CREATE2
    }
}

/// `CreateRequest`; an empty `acl` stands for the open ACL (`world:anyone`, all permissions).
fn write_create(w: &mut Writer, path: &str, data: &[u8], mode: CreateMode, acl: &[Acl]) {
    w.string(path).buffer(data);
    if acl.is_empty() {
        w.i32(1).i32(perms::ALL).string("world").string("anyone");
    } else {
        w.i32(i32::try_from(acl.len()).unwrap_or(i32::MAX));
        for entry in acl {
            w.i32(entry.perms).string(&entry.scheme).string(&entry.id);
        }
    }
    w.i32(create_flags(mode));
}

impl WireRequest {
    /// The opcode this request goes under.
    pub fn opcode(&self) -> i32 {
        match self {
            WireRequest::Create { mode, .. } => create_opcode(*mode),
            WireRequest::Delete { .. } => opcode::DELETE,
            WireRequest::Exists { .. } => opcode::EXISTS,
            WireRequest::GetData { .. } => opcode::GET_DATA,
            WireRequest::SetData { .. } => opcode::SET_DATA,
            WireRequest::GetChildren { .. } => opcode::GET_CHILDREN,
            WireRequest::GetAcl { .. } => opcode::GET_ACL,
            WireRequest::Sync { .. } => opcode::SYNC,
            WireRequest::RemoveWatches { .. } => opcode::REMOVE_WATCHES,
            WireRequest::Multi { .. } => opcode::MULTI,
            WireRequest::Ping => opcode::PING,
            WireRequest::CloseSession => opcode::CLOSE_SESSION,
            WireRequest::Auth { .. } => opcode::AUTH,
            WireRequest::SetWatches { .. } => opcode::SET_WATCHES,
        }
    }

    /// The reserved xid of this request, if it has one.
    pub fn reserved_xid(&self) -> Option<i32> {
        match self {
            WireRequest::Ping => Some(xid::PING),
            WireRequest::Auth { .. } => Some(xid::AUTH),
            WireRequest::SetWatches { .. } => Some(xid::SET_WATCHES),
            _ => None,
        }
    }

    /// The framed request (header and body) under `xid`.
    pub fn encode(&self, xid: i32) -> Vec<u8> {
        let mut w = Writer::new();
        w.i32(xid).i32(self.opcode());
        match self {
            WireRequest::Create {
                path,
                data,
                mode,
                acl,
            } => write_create(&mut w, path, data, *mode, acl),
            WireRequest::Delete { path, version } => {
                w.string(path).i32(*version);
            }
            WireRequest::Exists { path, watch }
            | WireRequest::GetData { path, watch }
            | WireRequest::GetChildren { path, watch } => {
                w.string(path).bool(*watch);
            }
            WireRequest::SetData {
                path,
                data,
                version,
            } => {
                w.string(path).buffer(data).i32(*version);
            }
            WireRequest::Sync { path } | WireRequest::GetAcl { path } => {
                w.string(path);
            }
            WireRequest::RemoveWatches { path, watcher_type } => {
                w.string(path).i32(*watcher_type);
            }
            WireRequest::Multi { ops, create_acls } => write_multi(&mut w, ops, create_acls),
            WireRequest::Ping | WireRequest::CloseSession => {}
            WireRequest::Auth { scheme, auth } => {
                w.i32(0).string(scheme).buffer(auth);
            }
            WireRequest::SetWatches {
                relative_zxid,
                data,
                exist,
                child,
            } => {
                w.i64(*relative_zxid)
                    .strings(data)
                    .strings(exist)
                    .strings(child);
            }
        }
        w.finish()
    }
}

fn write_multi(w: &mut Writer, ops: &[MultiOp], create_acls: &[Vec<Acl>]) {
    let mut acls = create_acls.iter();
    for op in ops {
        match op {
            MultiOp::Create { path, data, mode } => {
                w.i32(create_opcode(*mode)).bool(false).i32(-1);
                let acl = acls.next().map(Vec::as_slice).unwrap_or(&[]);
                write_create(w, path, data, *mode, acl);
            }
            MultiOp::Delete { path, version } => {
                w.i32(opcode::DELETE).bool(false).i32(-1);
                w.string(path).i32(*version);
            }
            MultiOp::SetData {
                path,
                data,
                version,
            } => {
                w.i32(opcode::SET_DATA).bool(false).i32(-1);
                w.string(path).buffer(data).i32(*version);
            }
            MultiOp::Check { path, version } => {
                w.i32(opcode::CHECK).bool(false).i32(-1);
                w.string(path).i32(*version);
            }
        }
    }
    w.i32(-1).bool(true).i32(-1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_carries_its_acl_and_an_empty_one_is_open() {
        let create = |acl| {
            WireRequest::Create {
                path: "/a".into(),
                data: vec![7],
                mode: CreateMode::Ephemeral,
                acl,
            }
            .encode(1)
        };
        let tail = |acl: &[(i32, &str, &str)]| {
            let mut w = Writer::new();
            w.i32(acl.len() as i32);
            for (perms, scheme, id) in acl {
                w.i32(*perms).string(scheme).string(id);
            }
            w.i32(1);
            w.finish()[4..].to_vec()
        };
        assert!(create(vec![]).ends_with(&tail(&[(31, "world", "anyone")])));
        let creator_read = vec![Acl::creator(perms::ALL), Acl::world(perms::READ)];
        assert!(create(creator_read).ends_with(&tail(&[(31, "auth", ""), (1, "world", "anyone")])));
    }

    /// `RemoveWatchesRequest { ustring path; int type }` under opcode 18 (zookeeper.jute,
    /// `ZooDefs.OpCode.removeWatches`).
    #[test]
    fn remove_watches_layout() {
        let frame = WireRequest::RemoveWatches {
            path: "/a".into(),
            watcher_type: 2,
        }
        .encode(7);
        let mut w = Writer::new();
        w.i32(7).i32(18).string("/a").i32(2);
        assert_eq!(frame, w.finish());
    }

    #[test]
    fn container_creates_use_their_opcode() {
        let create = |mode| WireRequest::Create {
            path: "/a".into(),
            data: vec![],
            mode,
            acl: vec![],
        };
        assert_eq!(create(CreateMode::Container).opcode(), 19);
        assert_eq!(create(CreateMode::EphemeralSequential).opcode(), 15);
    }
}
