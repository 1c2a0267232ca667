//! The records of ZooKeeper's client protocol (`zookeeper.jute`) this client speaks: the
//! connect handshake, request and reply headers, the request bodies and their responses,
//! watch notifications, and the error codes.
//!
//! Table of contents: this file holds the opcodes, the reserved xids, the connect handshake,
//! the reply header and the error codes; `requests` the request bodies ([`WireRequest`],
//! a `multi`'s operations) and their encoding; `responses` the reply bodies (a `multi`'s results, `Stat`,
//! notifications) and their decoding.

mod requests;
mod responses;

pub use requests::WireRequest;
pub use responses::{
    decode_all, read_acl, read_create2, read_data, read_multi, read_stat, read_watcher_event,
};

use super::jute::{DecodeResult, Reader, Writer};
use crate::client::ZkError;

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
    /// getACL (reply: the ACL and the stat).
    pub const GET_ACL: i32 = 6;
    /// getChildren.
    pub const GET_CHILDREN: i32 = 8;
    /// sync.
    pub const SYNC: i32 = 9;
    /// ping.
    pub const PING: i32 = 11;
    /// check (inside multi).
    pub const CHECK: i32 = 13;
    /// multi.
    pub const MULTI: i32 = 14;
    /// create2 (reply: path and stat).
    pub const CREATE2: i32 = 15;
    /// removeWatches (reply: an empty body, or `NoWatcher` when the server holds no such
    /// watch for this connection).
    pub const REMOVE_WATCHES: i32 = 18;
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
    /// Its length on the wire: xid, zxid, err.
    pub const LEN: usize = 16;

    /// Reads the header at the start of a reply.
    pub fn decode(r: &mut Reader<'_>) -> DecodeResult<ReplyHeader> {
        Ok(ReplyHeader {
            xid: r.i32()?,
            zxid: r.i64()?,
            err: r.i32()?,
        })
    }
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
        -6 => ZkError::Unimplemented,
        -122 => ZkError::RequestTimeout,
        -125 => ZkError::QuotaExceeded,
        -127 => ZkError::Throttled,
        -2 => ZkError::RuntimeInconsistency,
        -1 | -3 | -100 | -113 | -120 | -121 => ZkError::SystemError,
        // Reconfiguration and codes newer than this client: the number is kept.
        code => ZkError::Other(code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code the server can send comes back with its number: named codes map to their
    /// variant and back, and codes this client does not name keep theirs.
    #[test]
    fn server_codes_keep_their_number() {
        for code in [-2, -4, -6, -7, -101, -110, -112, -118, -122, -125, -127] {
            assert_eq!(error_from_code(code).code(), Some(code), "code {code}");
        }
        assert_eq!(error_from_code(-124), ZkError::Other(-124));
        assert_eq!(error_from_code(-999).code(), Some(-999));
        assert!(error_from_code(-127).is_retryable());
        assert!(!error_from_code(-125).is_retryable());
    }

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
}
