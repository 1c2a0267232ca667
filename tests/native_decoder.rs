//! The native client's decoder on malformed input: random bytes and truncated valid records
//! give errors, never panics, and lengths from the wire never exceed the bytes present.

use proptest::prelude::*;

use zk_locks::client::native::jute::{frame_length, Reader, Writer};
use zk_locks::client::native::records::{
    decode_all, read_acl, read_create2, read_data, read_multi, read_stat, read_watcher_event,
    ConnectResponse, ReplyHeader,
};

/// Runs every decoder on `bytes`; returns how many succeeded (each must return, not panic).
fn decode_everything(bytes: &[u8]) -> usize {
    [
        ConnectResponse::decode(bytes).is_ok(),
        ReplyHeader::decode(&mut Reader::new(bytes)).is_ok(),
        decode_all(bytes, read_stat).is_ok(),
        decode_all(bytes, read_create2).is_ok(),
        decode_all(bytes, read_data).is_ok(),
        decode_all(bytes, read_multi).is_ok(),
        decode_all(bytes, read_acl).is_ok(),
        decode_all(bytes, read_watcher_event).is_ok(),
        decode_all(bytes, |r| r.strings()).is_ok(),
    ]
    .iter()
    .filter(|ok| **ok)
    .count()
}

/// A valid GetDataResponse body with `data`.
fn get_data_body(data: &[u8]) -> Vec<u8> {
    let mut w = Writer::new();
    w.buffer(data);
    for _ in 0..4 {
        w.i64(7);
    }
    for _ in 0..3 {
        w.i32(1);
    }
    w.i64(0).i32(data.len() as i32).i32(0).i64(9);
    w.finish()[4..].to_vec()
}

/// A valid multi reply body: check ok, then an error result, then the end marker.
fn multi_body() -> Vec<u8> {
    let mut w = Writer::new();
    w.i32(13).bool(false).i32(0);
    w.i32(-1).bool(false).i32(-1).i32(-101);
    w.i32(-1).bool(true).i32(-1);
    w.finish()[4..].to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        decode_everything(&bytes);
    }

    #[test]
    fn huge_lengths_are_errors_not_allocations(len in any::<i32>(), tail in proptest::collection::vec(any::<u8>(), 0..64)) {
        let mut bytes = len.to_be_bytes().to_vec();
        bytes.extend_from_slice(&tail);
        let fits = len >= 0 && (len as usize) <= tail.len();
        prop_assert_eq!(Reader::new(&bytes).buffer().is_ok(), fits || len == -1);
        if len >= 4 && (len as usize) * 4 > tail.len() {
            prop_assert!(Reader::new(&bytes).strings().is_err());
        }
    }

    #[test]
    fn frame_lengths_are_checked(prefix in any::<[u8; 4]>(), limit in 1usize..(1 << 21)) {
        let n = i32::from_be_bytes(prefix);
        match frame_length(prefix, limit) {
            Ok(len) => prop_assert!(n >= 0 && len == n as usize && len < limit),
            Err(_) => prop_assert!(n < 0 || n as usize >= limit),
        }
    }

    #[test]
    fn truncated_records_are_errors(data in proptest::collection::vec(any::<u8>(), 0..64), cut in any::<prop::sample::Index>()) {
        let body = get_data_body(&data);
        prop_assert!(decode_all(&body, read_data).is_ok());
        let cut = cut.index(body.len());
        prop_assert!(decode_all(&body[..cut], read_data).is_err());
        let multi = multi_body();
        prop_assert!(decode_all(&multi, read_multi).is_ok());
        let cut = cut % multi.len();
        prop_assert!(decode_all(&multi[..cut], read_multi).is_err());
    }

    #[test]
    fn flipped_bytes_never_panic(index in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut body = multi_body();
        let i = index.index(body.len());
        body[i] = byte;
        decode_everything(&body);
        let mut body = get_data_body(b"abc");
        let i = index.index(body.len());
        body[i] = byte;
        decode_everything(&body);
    }
}
