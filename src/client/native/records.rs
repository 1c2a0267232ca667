//! The records of ZooKeeper's client protocol (`zookeeper.jute`) this client speaks: the
//! connect handshake, request and reply headers, the request bodies and their responses,
//! watch notifications, and the error codes.

use super::jute::{DecodeError, DecodeResult, Reader, Writer};
use crate::client::acl::{perms, Acl};
use crate::client::{CreateMode, EventType, Stat, ZkError};

/// Operation codes (`ZooDefs.OpCode`).
pub mod opcode {
    /// create (reply: path).
    pub const CREATE: i32 = 1;
    /// delete.
    pub const DELETE: i32 = 2;
    /// exists.
    pub const EXISTS: i32 = 3;
    /// getData.
    pub const GET_DATA: i32 = 4;
    /// setData.
    pub const SET_DATA: i32 = 5;
    /// getChildren.
    pub const GET_CHILDREN: i32 = 8;
    /// sync.
    pub const SYNC: i32 = 9;
    /// ping.
    pub const PING: i32 = 11;
    /// getChildren2 (children and the parent's stat).
    pub const GET_CHILDREN2: i32 = 12;
    /// check (inside multi).
    pub const CHECK: i32 = 13;
    /// multi.
    pub const MULTI: i32 = 14;
    /// create2 (reply: path and stat).
    pub const CREATE2: i32 = 15;
    /// createContainer (reply: path and stat).
    pub const CREATE_CONTAINER: i32 = 19;
    /// closeSession.
    pub const CLOSE_SESSION: i32 = -11;
    /// auth.
    pub const AUTH: i32 = 100;
    /// setWatches.
    pub const SET_WATCHES: i32 = 101;
}

/// Reserved xids.
pub mod xid {
    /// A watch notification.
    pub const NOTIFICATION: i32 = -1;
    /// A ping.
    pub const PING: i32 = -2;
    /// An auth packet.
    pub const AUTH: i32 = -4;
    /// A SetWatches packet.
    pub const SET_WATCHES: i32 = -8;
}

/// `ConnectRequest`: opens or resumes a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectRequest {
    /// The last zxid this client saw (a server behind it refuses the client).
    pub last_zxid_seen: i64,
    /// Requested session timeout, ms.
    pub timeout_ms: i32,
    /// 0 for a new session, else the session to resume.
    pub session_id: i64,
    /// The session password (16 zero bytes for a new session).
    pub password: Vec<u8>,
}

impl ConnectRequest {
    /// The framed request.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.i32(0)
            .i64(self.last_zxid_seen)
            .i32(self.timeout_ms)
            .i64(self.session_id)
            .buffer(&self.password)
            .bool(false);
        w.finish()
    }
}

/// `ConnectResponse`: `timeout_ms <= 0` means the session asked for has expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectResponse {
    /// Negotiated session timeout, ms.
    pub timeout_ms: i32,
    /// The session id.
    pub session_id: i64,
    /// The session password.
    pub password: Vec<u8>,
    /// The server is read-only.
    pub read_only: bool,
}

impl ConnectResponse {
    /// Decodes a frame body. Old servers omit the trailing read-only flag.
    pub fn decode(body: &[u8]) -> DecodeResult<ConnectResponse> {
        let mut r = Reader::new(body);
        let _protocol_version = r.i32()?;
        let timeout_ms = r.i32()?;
        let session_id = r.i64()?;
        let password = r.buffer()?;
        let read_only = if r.remaining() > 0 { r.bool()? } else { false };
        r.finish()?;
        Ok(ConnectResponse {
            timeout_ms,
            session_id,
            password,
            read_only,
        })
    }
}

/// `ReplyHeader`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyHeader {
    /// The request's xid (or a reserved one).
    pub xid: i32,
    /// The zxid of the server's state when it replied.
    pub zxid: i64,
    /// 0 or an error code.
    pub err: i32,
}

impl ReplyHeader {
    /// Reads the header at the start of a reply.
    pub fn decode(r: &mut Reader<'_>) -> DecodeResult<ReplyHeader> {
        Ok(ReplyHeader {
            xid: r.i32()?,
            zxid: r.i64()?,
            err: r.i32()?,
        })
    }
}

/// One operation inside a `multi` transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiOp {
    /// Create a node (as create2: the result carries the stat).
    Create {
        /// Server path.
        path: String,
        /// Data.
        data: Vec<u8>,
        /// Mode.
        mode: CreateMode,
    },
    /// Delete a node.
    Delete {
        /// Server path.
        path: String,
        /// Expected version, -1 for any.
        version: i32,
    },
    /// Set a node's data.
    SetData {
        /// Server path.
        path: String,
        /// Data.
        data: Vec<u8>,
        /// Expected version, -1 for any.
        version: i32,
    },
    /// Fail the transaction unless the node has this version.
    Check {
        /// Server path.
        path: String,
        /// Expected version, -1 for any.
        version: i32,
    },
}

/// The result of one operation of a `multi`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiResult {
    /// The created node's server path and stat.
    Create(String, Stat),
    /// Deleted.
    Delete,
    /// The node's new stat.
    SetData(Stat),
    /// The version matched.
    Check,
    /// This operation failed (or was rolled back because another one did).
    Error(ZkError),
}

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
    /// sync.
    Sync {
        /// Server path.
        path: String,
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
            WireRequest::Sync { .. } => opcode::SYNC,
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
            WireRequest::Sync { path } => {
                w.string(path);
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

/// `Stat`.
pub fn read_stat(r: &mut Reader<'_>) -> DecodeResult<Stat> {
    Ok(Stat {
        czxid: r.i64()?,
        mzxid: r.i64()?,
        ctime: r.i64()?,
        mtime: r.i64()?,
        version: r.i32()?,
        cversion: r.i32()?,
        aversion: r.i32()?,
        ephemeral_owner: r.i64()?,
        data_length: r.i32()?,
        num_children: r.i32()?,
        pzxid: r.i64()?,
    })
}

/// Reads a whole reply body with `read`, failing on leftover bytes.
pub fn decode_all<T>(
    body: &[u8],
    read: impl FnOnce(&mut Reader<'_>) -> DecodeResult<T>,
) -> DecodeResult<T> {
    let mut r = Reader::new(body);
    let value = read(&mut r)?;
    r.finish()?;
    Ok(value)
}

/// `Create2Response` (path, stat).
pub fn read_create2(r: &mut Reader<'_>) -> DecodeResult<(String, Stat)> {
    Ok((r.string()?, read_stat(r)?))
}

/// `GetDataResponse` (data, stat).
pub fn read_data(r: &mut Reader<'_>) -> DecodeResult<(Vec<u8>, Stat)> {
    Ok((r.buffer()?, read_stat(r)?))
}

/// The results of a `multi`, in request order.
pub fn read_multi(r: &mut Reader<'_>) -> DecodeResult<Vec<MultiResult>> {
    let mut out = Vec::new();
    loop {
        let op = r.i32()?;
        let done = r.bool()?;
        let err = r.i32()?;
        if done {
            return Ok(out);
        }
        let result = match op {
            opcode::CREATE => {
                let path = r.string()?;
                MultiResult::Create(path, Stat::default())
            }
            opcode::CREATE2 | opcode::CREATE_CONTAINER => {
                let (path, stat) = read_create2(r)?;
                MultiResult::Create(path, stat)
            }
            opcode::DELETE => MultiResult::Delete,
            opcode::SET_DATA => MultiResult::SetData(read_stat(r)?),
            opcode::CHECK => MultiResult::Check,
            -1 => {
                // ErrorResponse: the header's err is -1 and the body carries the code.
                let _ = err;
                MultiResult::Error(error_from_code(r.i32()?))
            }
            _ => return Err(DecodeError::Malformed),
        };
        out.push(result);
    }
}

/// A watch notification (`WatcherEvent`): the event type and the server path. `None` for
/// a state-only event (type -1, "None"), which this client does not deliver.
pub fn read_watcher_event(r: &mut Reader<'_>) -> DecodeResult<Option<(EventType, String)>> {
    let kind = r.i32()?;
    let _state = r.i32()?;
    let path = r.optional_string()?;
    let kind = match kind {
        -1 => return Ok(None),
        1 => EventType::NodeCreated,
        2 => EventType::NodeDeleted,
        3 => EventType::NodeDataChanged,
        4 => EventType::NodeChildrenChanged,
        // Types a newer server may add (child watch removed, persistent...): not ours.
        _ => return Ok(None),
    };
    Ok(path.map(|p| (kind, p)))
}

/// The `ZkError` for a server error code.
pub fn error_from_code(code: i32) -> ZkError {
    match code {
        -101 => ZkError::NoNode,
        -110 => ZkError::NodeExists,
        -111 => ZkError::NotEmpty,
        -103 => ZkError::BadVersion,
        -108 => ZkError::NoChildrenForEphemerals,
        -8 => ZkError::BadArguments,
        -4 => ZkError::ConnectionLoss,
        -112 => ZkError::SessionExpired,
        -7 => ZkError::OperationTimeout,
        -102 => ZkError::NoAuth,
        -115 => ZkError::AuthFailed,
        -114 => ZkError::InvalidAcl,
        -118 => ZkError::SessionMoved,
        -119 => ZkError::NotReadOnly,
        -5 => ZkError::MarshallingError,
        -1 | -2 | -3 | -100 | -113 | -120 | -121 => ZkError::SystemError,
        // Throttling, request timeout, quota, reconfiguration, unknown: outcome unknown.
        _ => ZkError::Unimplemented,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_request_layout() {
        let frame = ConnectRequest {
            last_zxid_seen: 5,
            timeout_ms: 6000,
            session_id: 0,
            password: vec![0; 16],
        }
        .encode();
        // length, protocol, zxid, timeout, session, passwd(4 + 16), readOnly
        assert_eq!(frame.len(), 4 + 4 + 8 + 4 + 8 + 20 + 1);
        assert_eq!(&frame[..4], &(frame.len() as i32 - 4).to_be_bytes());
    }

    #[test]
    fn connect_response_with_and_without_read_only() {
        let mut w = Writer::new();
        w.i32(0).i32(4000).i64(0x42).buffer(&[1; 16]);
        let old = w.finish();
        let resp = ConnectResponse::decode(&old[4..]).unwrap();
        assert_eq!(
            (resp.timeout_ms, resp.session_id, resp.read_only),
            (4000, 0x42, false)
        );
        let mut w = Writer::new();
        w.i32(0).i32(4000).i64(0x42).buffer(&[1; 16]).bool(true);
        assert!(ConnectResponse::decode(&w.finish()[4..]).unwrap().read_only);
    }

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

    #[test]
    fn multi_results() {
        let mut w = Writer::new();
        w.i32(opcode::CHECK).bool(false).i32(0);
        w.i32(-1).bool(false).i32(-1).i32(-101);
        w.i32(-1).bool(true).i32(-1);
        let frame = w.finish();
        let results = decode_all(&frame[4..], read_multi).unwrap();
        assert_eq!(
            results,
            vec![MultiResult::Check, MultiResult::Error(ZkError::NoNode)]
        );
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
