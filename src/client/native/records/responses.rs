//! Reply bodies and their decoding: `Stat`, create2, getData, `multi` results ([`MultiResult`]s)
//! and watch notifications.

use super::{error_from_code, opcode};
use crate::client::acl::Acl;
use crate::client::native::jute::{DecodeError, DecodeResult, Reader};
use crate::client::{EventType, MultiResult, Stat};

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

/// `GetACLResponse` (the ACL, the stat). Each entry takes at least 12 bytes (perms and two
/// string lengths), which bounds the count by the bytes that remain.
pub fn read_acl(r: &mut Reader<'_>) -> DecodeResult<(Vec<Acl>, Stat)> {
    let n = r.count(12)?;
    let mut acl = Vec::with_capacity(n);
    for _ in 0..n {
        let perms = r.i32()?;
        let scheme = r.string()?;
        let id = r.string()?;
        acl.push(Acl { perms, scheme, id });
    }
    Ok((acl, read_stat(r)?))
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
                // ErrorResponse: the header's err is -1 and the body carries the code: 0 for
                // an operation before the failing one (rolled back), -2 for one after it.
                let _ = err;
                match r.i32()? {
                    0 => MultiResult::RolledBack,
                    code => MultiResult::Error(error_from_code(code)),
                }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::native::jute::Writer;
    use crate::client::ZkError;

    #[test]
    fn multi_results() {
        let mut w = Writer::new();
        w.i32(opcode::CHECK).bool(false).i32(0);
        w.i32(-1).bool(true).i32(-1);
        let frame = w.finish();
        let results = decode_all(&frame[4..], read_multi).unwrap();
        assert_eq!(results, vec![MultiResult::Check]);
        // A failed transaction: rolled back (0), the failing code, not tried (-2).
        let mut w = Writer::new();
        w.i32(-1).bool(false).i32(-1).i32(0);
        w.i32(-1).bool(false).i32(-1).i32(-101);
        w.i32(-1).bool(false).i32(-1).i32(-2);
        w.i32(-1).bool(true).i32(-1);
        let frame = w.finish();
        let results = decode_all(&frame[4..], read_multi).unwrap();
        assert_eq!(
            results,
            vec![
                MultiResult::RolledBack,
                MultiResult::Error(ZkError::NoNode),
                MultiResult::Error(ZkError::RuntimeInconsistency)
            ]
        );
    }
}
