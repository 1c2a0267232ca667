//! Jute, ZooKeeper's wire encoding: big-endian integers, length-prefixed buffers and strings,
//! count-prefixed vectors, and 4-byte length framing.
//!
//! The reader never panics and never allocates more than the bytes it was given: every length
//! read from the wire is checked against the bytes that remain before anything is allocated.

use std::fmt;
use std::io::Read;

/// Why bytes could not be decoded. Any of these means the connection is broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// The record ends before its last field.
    Truncated,
    /// A length or count below -1.
    NegativeLength,
    /// A string that is not UTF-8.
    BadUtf8,
    /// A length or count that is null (-1) where the record needs a value.
    UnexpectedNull,
    /// A frame longer than the packet limit.
    FrameTooLong,
    /// Bytes left over after the record, or a value outside its domain.
    Malformed,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self {
            DecodeError::Truncated => "record truncated",
            DecodeError::NegativeLength => "negative length",
            DecodeError::BadUtf8 => "string is not UTF-8",
            DecodeError::UnexpectedNull => "null where a value is required",
            DecodeError::FrameTooLong => "frame over the packet limit",
            DecodeError::Malformed => "malformed record",
        };
        f.write_str(what)
    }
}

impl std::error::Error for DecodeError {}

/// Result of decoding.
pub type DecodeResult<T> = Result<T, DecodeError>;

/// Reads jute values from a byte slice.
#[derive(Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over `bytes`.
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len()
    }

    fn take(&mut self, n: usize) -> DecodeResult<&'a [u8]> {
        if n > self.bytes.len() {
            return Err(DecodeError::Truncated);
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> DecodeResult<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// A jute `int`.
    pub fn i32(&mut self) -> DecodeResult<i32> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    /// A jute `long`.
    pub fn i64(&mut self) -> DecodeResult<i64> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// A jute `boolean` (any non-zero byte is true, as Java reads it).
    pub fn bool(&mut self) -> DecodeResult<bool> {
        Ok(self.take(1)?[0] != 0)
    }

    /// A length or count: -1 is null (`None`); below -1 is an error; a length that claims
    /// more than `min_item_size` bytes per item beyond what remains is truncation.
    fn length(&mut self, min_item_size: usize) -> DecodeResult<Option<usize>> {
        let n = self.i32()?;
        if n == -1 {
            return Ok(None);
        }
        let n = usize::try_from(n).map_err(|_| DecodeError::NegativeLength)?;
        if n.saturating_mul(min_item_size) > self.remaining() {
            return Err(DecodeError::Truncated);
        }
        Ok(Some(n))
    }

    /// A jute `buffer`; null reads as empty.
    pub fn buffer(&mut self) -> DecodeResult<Vec<u8>> {
        match self.length(1)? {
            None => Ok(Vec::new()),
            Some(n) => Ok(self.take(n)?.to_vec()),
        }
    }

    /// A jute `ustring` that must not be null.
    pub fn string(&mut self) -> DecodeResult<String> {
        self.optional_string()?.ok_or(DecodeError::UnexpectedNull)
    }

    /// A jute `ustring` that may be null.
    pub fn optional_string(&mut self) -> DecodeResult<Option<String>> {
        match self.length(1)? {
            None => Ok(None),
            Some(n) => {
                let bytes = self.take(n)?;
                let s = std::str::from_utf8(bytes).map_err(|_| DecodeError::BadUtf8)?;
                Ok(Some(s.to_string()))
            }
        }
    }

    /// A jute `vector<ustring>`; null reads as empty. Each string takes at least 4 bytes,
    /// which bounds the allocation by the bytes that remain.
    pub fn strings(&mut self) -> DecodeResult<Vec<String>> {
        let Some(n) = self.length(4)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.string()?);
        }
        Ok(out)
    }

    /// The count of a jute `vector` whose items take at least `min_item_size` bytes each
    /// (null reads as 0): the count is bounded by the bytes that remain.
    pub fn count(&mut self, min_item_size: usize) -> DecodeResult<usize> {
        Ok(self.length(min_item_size)?.unwrap_or(0))
    }

    /// Fails unless every byte was read.
    pub fn finish(&self) -> DecodeResult<()> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::Malformed)
        }
    }
}

/// Writes jute values into a frame: [`Writer::new`] reserves the 4-byte length prefix and
/// [`Writer::finish`] fills it in.
#[derive(Debug)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Default for Writer {
    fn default() -> Self {
        Writer::new()
    }
}

impl Writer {
    /// A new frame (length prefix reserved).
    pub fn new() -> Writer {
        Writer {
            buf: vec![0, 0, 0, 0],
        }
    }

    /// A jute `int`.
    pub fn i32(&mut self, v: i32) -> &mut Writer {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// A jute `long`.
    pub fn i64(&mut self, v: i64) -> &mut Writer {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// A jute `boolean`.
    pub fn bool(&mut self, v: bool) -> &mut Writer {
        self.buf.push(u8::from(v));
        self
    }

    /// A jute `buffer`.
    pub fn buffer(&mut self, v: &[u8]) -> &mut Writer {
        self.i32(len_i32(v.len()));
        self.buf.extend_from_slice(v);
        self
    }

    /// A jute `ustring`.
    pub fn string(&mut self, v: &str) -> &mut Writer {
        self.buffer(v.as_bytes())
    }

    /// A jute `vector<ustring>`.
    pub fn strings<S: AsRef<str>>(&mut self, v: &[S]) -> &mut Writer {
        self.i32(len_i32(v.len()));
        for s in v {
            self.string(s.as_ref());
        }
        self
    }

    /// The frame, with its length prefix filled in.
    pub fn finish(mut self) -> Vec<u8> {
        let body = len_i32(self.buf.len() - 4);
        self.buf[..4].copy_from_slice(&body.to_be_bytes());
        self.buf
    }
}

/// Lengths this client writes are bounded by the packet limit (checked before sending);
/// saturate rather than wrap if a caller ever bypasses that.
fn len_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The body length announced by a 4-byte frame prefix, checked against the packet limit: a
/// negative length or one at or over `limit` is a broken connection (as the Java client).
pub fn frame_length(prefix: [u8; 4], limit: usize) -> DecodeResult<usize> {
    let n = i32::from_be_bytes(prefix);
    let n = usize::try_from(n).map_err(|_| DecodeError::NegativeLength)?;
    if n >= limit {
        return Err(DecodeError::FrameTooLong);
    }
    Ok(n)
}

/// Reads one frame body, checked against the limit before allocating. The end of the stream
/// between two frames is how every connection ends (closeSession answered, or either side
/// shut it down) and is said as such; inside a frame it is a broken link.
pub(crate) fn read_frame(stream: &mut impl Read, limit: usize) -> Result<Vec<u8>, String> {
    let mut prefix = [0u8; 4];
    match fill(stream, &mut prefix) {
        Ok(0) => return Err("end of stream".into()),
        Ok(4) => {}
        Ok(n) => {
            return Err(format!(
                "the connection closed inside a frame ({n} of 4 length bytes)"
            ))
        }
        Err(e) => return Err(format!("read: {e}")),
    }
    let len = frame_length(prefix, limit).map_err(|e| e.to_string())?;
    let mut body = vec![0u8; len];
    match fill(stream, &mut body) {
        Ok(n) if n == len => Ok(body),
        Ok(n) => Err(format!(
            "the connection closed inside a frame ({n} of {len} bytes)"
        )),
        Err(e) => Err(format!("read: {e}")),
    }
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
    fn round_trips_values() {
        let mut w = Writer::new();
        w.i32(-7).i64(1 << 40).bool(true).buffer(b"ab").string("é");
        w.strings(&["x", "yz"]);
        let frame = w.finish();
        let len = frame_length(frame[..4].try_into().unwrap(), 1 << 20).unwrap();
        assert_eq!(len, frame.len() - 4);
        let mut r = Reader::new(&frame[4..]);
        assert_eq!(r.i32().unwrap(), -7);
        assert_eq!(r.i64().unwrap(), 1 << 40);
        assert!(r.bool().unwrap());
        assert_eq!(r.buffer().unwrap(), b"ab");
        assert_eq!(r.string().unwrap(), "é");
        assert_eq!(r.strings().unwrap(), vec!["x", "yz"]);
        r.finish().unwrap();
    }

    #[test]
    fn rejects_bad_lengths_before_allocating() {
        let huge = i32::MAX.to_be_bytes();
        assert_eq!(Reader::new(&huge).buffer(), Err(DecodeError::Truncated));
        assert_eq!(Reader::new(&huge).strings(), Err(DecodeError::Truncated));
        let neg = (-2i32).to_be_bytes();
        assert_eq!(Reader::new(&neg).buffer(), Err(DecodeError::NegativeLength));
        let null = (-1i32).to_be_bytes();
        assert_eq!(
            Reader::new(&null).string(),
            Err(DecodeError::UnexpectedNull)
        );
        assert_eq!(Reader::new(&null).buffer(), Ok(Vec::new()));
        assert_eq!(frame_length(huge, 1 << 20), Err(DecodeError::FrameTooLong));
        assert_eq!(frame_length(neg, 1 << 20), Err(DecodeError::NegativeLength));
        assert_eq!(
            Reader::new(&[0xff, 0xfe]).string(),
            Err(DecodeError::Truncated)
        );
        let bad_utf8 = [0, 0, 0, 1, 0xff];
        assert_eq!(Reader::new(&bad_utf8).string(), Err(DecodeError::BadUtf8));
    }
}
