//! Reading frames off a connection: a length prefix, then the body, checked against the
//! packet limit before anything is allocated.
//!
//! Rules this file protects:
//! - nothing read from the network allocates past the limit or panics;
//! - a reply at or over the limit (but under [`DISCARD_LIMIT`]) fails only its own request:
//!   its header is kept, the rest read through a small buffer and dropped, and the connection
//!   goes on (`connection.rs` answers the request with `ZkError::ReplyTooLarge`);
//! - the end of the stream between two frames is how every connection ends and is said as
//!   such; inside a frame it is a broken link.

use std::io::Read;

use super::jute::{frame_length, DecodeError};
use super::records::ReplyHeader;

/// A reply frame as the reader takes it.
pub(super) enum Frame {
    /// The body, under the limit.
    Whole(Vec<u8>),
    /// A reply at or over the limit: its header, the rest read and discarded.
    TooLong { header: Vec<u8>, len: usize },
}

/// The largest frame read and discarded rather than taken as a broken stream: a reply this
/// large is no reply of ZooKeeper's (its own servers cap their buffers far below).
const DISCARD_LIMIT: usize = 1 << 30;

/// Reads one reply frame. A frame at or over `limit` (and under [`DISCARD_LIMIT`]) is not
/// kept: its header is returned and the rest read into a small buffer and dropped, so one
/// oversized reply fails its own request instead of the connection (a lock directory with
/// too many children must not cut off every lock of the session, over and over).
pub(super) fn read_reply_frame(stream: &mut impl Read, limit: usize) -> Result<Frame, String> {
    let prefix = read_prefix(stream)?;
    let len = match frame_length(prefix, limit) {
        Ok(len) => len,
        Err(DecodeError::FrameTooLong) => {
            let len = i32::from_be_bytes(prefix) as usize;
            if len >= DISCARD_LIMIT {
                return Err(format!("a frame of {len} bytes"));
            }
            let mut header = vec![0u8; ReplyHeader::LEN.min(len)];
            let mut rest = len - header.len();
            let mut scratch = [0u8; 8192];
            let got = fill(stream, &mut header).map_err(|e| format!("read: {e}"))?;
            let mut short = got < header.len();
            while rest > 0 && !short {
                let want = rest.min(scratch.len());
                let got = fill(stream, &mut scratch[..want]).map_err(|e| format!("read: {e}"))?;
                short = got < want;
                rest -= got;
            }
            if short {
                return Err(format!(
                    "the connection closed inside a frame of {len} bytes"
                ));
            }
            return Ok(Frame::TooLong { header, len });
        }
        Err(e) => return Err(e.to_string()),
    };
    read_body(stream, len).map(Frame::Whole)
}

/// Reads a frame's length prefix. The end of the stream here, between two frames, is how
/// every connection ends (closeSession answered, or either side shut it down) and is said as
/// such; inside the prefix it is a broken link.
fn read_prefix(stream: &mut impl Read) -> Result<[u8; 4], String> {
    let mut prefix = [0u8; 4];
    match fill(stream, &mut prefix) {
        Ok(0) => Err("end of stream".into()),
        Ok(4) => Ok(prefix),
        Ok(n) => Err(format!(
            "the connection closed inside a frame ({n} of 4 length bytes)"
        )),
        Err(e) => Err(format!("read: {e}")),
    }
}

/// Reads a frame body of `len` bytes (already checked against the limit).
fn read_body(stream: &mut impl Read, len: usize) -> Result<Vec<u8>, String> {
    let mut body = vec![0u8; len];
    match fill(stream, &mut body) {
        Ok(n) if n == len => Ok(body),
        Ok(n) => Err(format!(
            "the connection closed inside a frame ({n} of {len} bytes)"
        )),
        Err(e) => Err(format!("read: {e}")),
    }
}

/// Reads one frame body, checked against the limit before allocating.
#[cfg(test)]
fn read_frame(stream: &mut impl Read, limit: usize) -> Result<Vec<u8>, String> {
    let prefix = read_prefix(stream)?;
    let len = frame_length(prefix, limit).map_err(|e: DecodeError| e.to_string())?;
    read_body(stream, len)
}

/// Reads until `buf` is full or the stream ends; returns how many bytes it got. A TLS peer
/// that closes without close_notify ends the stream too (the frames delimit the messages).
fn fill(stream: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match stream.read(&mut buf[got..]) {
            Ok(0) => break,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The end of the stream between frames is how every connection ends (after closeSession,
    /// or when either side shuts it): said as such, not as a failed read ("failed to fill
    /// whole buffer" once was logged on every normal close); inside a frame it is a break.
    #[test]
    fn the_end_of_the_stream_is_named_between_frames_and_inside_one() {
        let between = read_frame(&mut &[][..], 1024).unwrap_err();
        assert_eq!(between, "end of stream");
        let mut truncated: &[u8] = &[0, 0, 0, 8, 1, 2];
        let inside = read_frame(&mut truncated, 1024).unwrap_err();
        assert!(inside.contains("inside a frame"), "{inside}");
        assert!(!inside.contains("fill whole buffer"), "{inside}");
        let mut short_prefix: &[u8] = &[0, 0];
        let inside = read_frame(&mut short_prefix, 1024).unwrap_err();
        assert!(inside.contains("inside a frame"), "{inside}");
        let mut whole: &[u8] = &[0, 0, 0, 2, 7, 9];
        assert_eq!(read_frame(&mut whole, 1024), Ok(vec![7, 9]));
    }

    #[test]
    fn a_reply_over_the_limit_is_read_through_and_its_header_kept() {
        let mut frame = vec![0, 0, 0, 40];
        frame.extend_from_slice(&[0, 0, 0, 7]); // xid 7
        frame.extend_from_slice(&[0; 12]); // zxid, err
        frame.extend_from_slice(&[9; 24]); // the body, discarded
        frame.extend_from_slice(&[0, 0, 0, 1, 5]); // the next frame
        let mut stream = &frame[..];
        match read_reply_frame(&mut stream, 32) {
            Ok(Frame::TooLong { header, len }) => {
                assert_eq!(len, 40);
                assert_eq!(header[..4], [0, 0, 0, 7]);
                assert_eq!(header.len(), ReplyHeader::LEN);
            }
            _ => panic!("not refused as too long"),
        }
        assert!(matches!(read_reply_frame(&mut stream, 32), Ok(Frame::Whole(b)) if b == [5]));
        // Cut short inside the discarded part: a broken link.
        let mut short = &frame[..30];
        assert!(read_reply_frame(&mut short, 32).is_err());
        // A frame too large to be ZooKeeper's, or of a negative length: broken, unread.
        let mut huge: &[u8] = &[0x7f, 0xff, 0xff, 0xff, 1, 2];
        assert!(read_reply_frame(&mut huge, 32).is_err());
        let mut negative: &[u8] = &[0xff, 0xff, 0xff, 0xff];
        assert!(read_reply_frame(&mut negative, 32).is_err());
        // Shorter than a header and over a tiny limit: kept whole as the header.
        let mut tiny: &[u8] = &[0, 0, 0, 3, 1, 2, 3];
        assert!(matches!(
            read_reply_frame(&mut tiny, 2),
            Ok(Frame::TooLong { len: 3, .. })
        ));
    }
}
