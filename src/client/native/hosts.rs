//! How one host of the connect string is reached, as the Java client's `StaticHostProvider`
//! reads a connect string, and what a server that will not talk to us means.
//!
//! Rules this file protects:
//! - a host is resolved again on every connection attempt (a name's addresses change: a
//!   StatefulSet member that was down has a record again, round-robin DNS moves);
//! - a host that does not resolve is skipped (logged) and the session tries the next one;
//! - every address a name resolves to is tried, starting at a random one so that clients
//!   spread over a round-robin name, within the attempt's connect timeout;
//! - a server that closes the connection instead of answering the ConnectRequest is
//!   explained: it may refuse our last zxid (it is behind what this client has seen, as
//!   after an ensemble was rebuilt), expect TLS on this port, or not serve yet. A TLS record
//!   in place of a ConnectResponse says the port expects TLS.
//! - every failed attempt says how far it got ([`Reach`]), which the session's reconnect
//!   pacing reads: a member that did not answer is passed over, one not serving is retried
//!   soon.

use std::io::{self, ErrorKind, Read};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::failure::ConnectFailure;
use super::jute::frame_length;

/// How far a failed attempt on a host got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Nothing answered: the name did not resolve, the connection was refused, or nothing
    /// came back within the connect timeout (a dead or frozen member).
    Unreachable,
    /// The member took the connection and closed it without a ConnectResponse: it does not
    /// serve (it is electing or has not joined a quorum yet), or it refuses our last zxid.
    NotServing,
    /// Anything else (a TLS error, a reply that does not decode, a socket error).
    Failed,
}

impl Reach {
    /// The more hopeful of two outcomes (a host's addresses tried in turn).
    pub fn best(self, other: Reach) -> Reach {
        use Reach::*;
        match (self, other) {
            (NotServing, _) | (_, NotServing) => NotServing,
            (Failed, _) | (_, Failed) => Failed,
            _ => Unreachable,
        }
    }
}

/// The shortest time one address is given, however many a name has.
const MIN_PER_ADDRESS: Duration = Duration::from_millis(100);

/// Resolves `host` (`name:port`) now and runs `attempt` on its addresses in turn, each with
/// its share of what remains of `timeout`, until one succeeds. The error names every
/// address's failure (or the failed resolution).
pub fn try_addresses<T>(
    host: &str,
    timeout: Duration,
    attempt: impl FnMut(SocketAddr, Duration) -> Result<T, ConnectFailure>,
) -> Result<T, ConnectFailure> {
    let addrs = crate::client::connect_string::resolve_all(host).map_err(|e| {
        log::warn!("{e}: host skipped");
        ConnectFailure::new(Reach::Unreachable, e)
    })?;
    let start = super::session::random_index(addrs.len());
    try_each(&addrs, start, timeout, attempt)
}

fn try_each<T>(
    addrs: &[SocketAddr],
    start: usize,
    timeout: Duration,
    mut attempt: impl FnMut(SocketAddr, Duration) -> Result<T, ConnectFailure>,
) -> Result<T, ConnectFailure> {
    let deadline = Instant::now().checked_add(timeout);
    let mut errors = Vec::new();
    for i in 0..addrs.len() {
        let addr = addrs[(start + i) % addrs.len()];
        let remaining = deadline.map_or(timeout, |d| d.saturating_duration_since(Instant::now()));
        if i > 0 && remaining.is_zero() {
            break;
        }
        let left = u32::try_from(addrs.len() - i).unwrap_or(u32::MAX);
        let share = (remaining / left)
            .max(MIN_PER_ADDRESS)
            .min(remaining)
            .max(Duration::from_millis(1));
        match attempt(addr, share) {
            Ok(done) => return Ok(done),
            Err(e) if addrs.len() == 1 => errors.push(e),
            Err(e) => errors.push(e.at(addr)),
        }
    }
    Err(ConnectFailure::joined(errors))
}

/// Reads the ConnectResponse's frame body (checked against `limit` before allocating). A
/// connection closed before any answer, or a TLS record instead of one, is explained;
/// `last_zxid` is the zxid our ConnectRequest carried. A failure says how far it got: a
/// close before any answer is [`Reach::NotServing`], no answer in time [`Reach::Unreachable`].
pub fn read_connect_response(
    stream: &mut impl Read,
    limit: usize,
    last_zxid: i64,
) -> Result<Vec<u8>, ConnectFailure> {
    let mut prefix = [0u8; 4];
    if let Err(e) = stream.read_exact(&mut prefix) {
        return Err(read_failure("read", e, Reach::NotServing, |e| {
            closed_without_answer(last_zxid, e)
        }));
    }
    if is_tls_record(prefix) {
        return Err(ConnectFailure::explained(
            Reach::Failed,
            "the server answered with TLS: this port expects TLS \
             (NativeOptions::tls, feature `tls`)"
                .into(),
            io::Error::new(
                ErrorKind::InvalidData,
                "a TLS record in place of a ConnectResponse",
            ),
        ));
    }
    let len = frame_length(prefix, limit).map_err(|e| {
        ConnectFailure::explained(
            Reach::Failed,
            format!("ConnectResponse: {e}"),
            io::Error::new(ErrorKind::InvalidData, e),
        )
    })?;
    let mut body = vec![0u8; len];
    stream
        .read_exact(&mut body)
        .map_err(|e| ConnectFailure::io(Reach::Failed, "read", e))?;
    Ok(body)
}

/// What a read (or a TLS handshake) that failed during an attempt says of the member, the
/// error kept beneath: nothing back within the socket's timeout is [`Reach::Unreachable`] (a
/// dead or frozen member, over TCP and inside a TLS handshake alike: pacing passes it over);
/// a close is `closed`, in the words of `explain`; anything else is [`Reach::Failed`].
pub fn read_failure(
    what: &str,
    error: io::Error,
    closed: Reach,
    explain: impl FnOnce(&io::Error) -> String,
) -> ConnectFailure {
    match error.kind() {
        ErrorKind::UnexpectedEof
        | ErrorKind::ConnectionReset
        | ErrorKind::ConnectionAborted
        | ErrorKind::BrokenPipe => ConnectFailure::explained(closed, explain(&error), error),
        ErrorKind::WouldBlock | ErrorKind::TimedOut => {
            ConnectFailure::io(Reach::Unreachable, &format!("{what}: no answer"), error)
        }
        _ => ConnectFailure::io(Reach::Failed, what, error),
    }
}

fn closed_without_answer(last_zxid: i64, e: &io::Error) -> String {
    if last_zxid > 0 {
        let why = format!(
            "the server closed the connection without answering ({e}): it may refuse our last \
             zxid 0x{last_zxid:x} (it is behind what this client has seen, as after an \
             ensemble was rebuilt), expect TLS on this port, or not serve yet"
        );
        log::warn!("{why}; trying the next host");
        why
    } else {
        format!(
            "the server closed the connection without answering ({e}): this port may expect \
             TLS, or the server may not serve yet"
        )
    }
}

/// A TLS record header (content type 20..=23, protocol major version 3). A ConnectResponse's
/// length prefix never starts so: its first byte is 0 for any frame under 16 MiB.
fn is_tls_record(prefix: [u8; 4]) -> bool {
    (0x14..=0x17).contains(&prefix[0]) && prefix[1] == 3
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    /// A name with several addresses: the ones that do not answer are passed over, from
    /// whichever address the attempt starts at.
    #[test]
    fn every_address_is_tried() {
        let live = TcpListener::bind("127.0.0.1:0").unwrap();
        let dead = TcpListener::bind("127.0.0.1:0").unwrap();
        let dead_addr = dead.local_addr().unwrap();
        drop(dead);
        let addrs = [dead_addr, live.local_addr().unwrap(), dead_addr];
        for start in 0..addrs.len() {
            let got = try_each(&addrs, start, Duration::from_secs(10), |addr, t| {
                TcpStream::connect_timeout(&addr, t)
                    .map(|_| addr)
                    .map_err(|e| ConnectFailure::io(Reach::Unreachable, "connect", e))
            });
            assert_eq!(got.ok(), Some(live.local_addr().unwrap()), "from {start}");
        }
        let err = try_each(
            &[dead_addr, dead_addr],
            0,
            Duration::from_secs(10),
            |a, t| {
                TcpStream::connect_timeout(&a, t)
                    .map_err(|e| ConnectFailure::io(Reach::Unreachable, "connect", e))
            },
        )
        .unwrap_err();
        assert_eq!(
            err.text().matches(&dead_addr.to_string()).count(),
            2,
            "{err}"
        );
        assert_eq!(err.reach(), Reach::Unreachable);
        assert!(
            err.into_parts().1.is_some(),
            "the last refusal is kept beneath the text"
        );
    }

    #[test]
    fn an_unresolvable_host_is_an_error_naming_it() {
        let err = try_addresses(
            "no-such-host.invalid:2181",
            Duration::from_secs(1),
            |_, _| Ok(()),
        )
        .unwrap_err();
        assert!(err.text().contains("no-such-host.invalid"), "{err}");
    }

    #[test]
    fn a_closed_connection_or_a_tls_record_is_explained() {
        let err = read_connect_response(&mut &[][..], 1 << 20, 0x5000).unwrap_err();
        assert_eq!(err.reach(), Reach::NotServing);
        let err = err.text();
        assert!(err.contains("0x5000") && err.contains("TLS"), "{err}");
        let err = read_connect_response(&mut &[][..], 1 << 20, 0).unwrap_err();
        let err = err.text();
        assert!(!err.contains("zxid") && err.contains("TLS"), "{err}");
        // A TLS alert record (handshake failure).
        let alert = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28];
        let err = read_connect_response(&mut &alert[..], 1 << 20, 0).unwrap_err();
        assert!(err.text().contains("expects TLS"), "{err}");
        assert_eq!(err.reach(), Reach::Failed);
        assert!(err.into_parts().1.is_some(), "an error kept beneath");
        let mut frame = 3i32.to_be_bytes().to_vec();
        frame.extend_from_slice(&[1, 2, 3]);
        assert_eq!(
            read_connect_response(&mut &frame[..], 1 << 20, 0).ok(),
            Some(vec![1, 2, 3])
        );
    }
}
