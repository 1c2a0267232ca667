//! The native client against a scripted fake server on loopback: protocol violations from the
//! network (a reply for the wrong xid, a negative or oversized frame length, a truncated
//! record, a garbage handshake) are connection errors or typed errors — never a panic — and
//! the client reconnects to the same session afterwards.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use zk_locks::client::native::jute::Writer;
use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::testing::harness::reach_state;
use zk_locks::{ConnectionState, Error, ZkClient, ZkError};

const SESSION_ID: i64 = 0x42;

/// What the fake server does with one request (after the handshake).
enum Answer {
    /// A well-formed reply to the request.
    Proper,
    /// These bytes, as they are (framing included).
    Raw(Vec<u8>),
}

fn read_frame(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    stream.read_exact(&mut body).ok()?;
    Some(body)
}

fn connect_response(session_id: i64) -> Vec<u8> {
    let mut w = Writer::new();
    w.i32(0)
        .i32(2000)
        .i64(session_id)
        .buffer(&[7; 16])
        .bool(false);
    w.finish()
}

fn stat_bytes(w: &mut Writer) {
    for _ in 0..4 {
        w.i64(1);
    }
    w.i32(0).i32(0).i32(0).i64(0).i32(0).i32(0).i64(1);
}

/// A well-formed reply to a request body (xid, opcode, ...): a `Stat` for exists, a header
/// alone for anything else (pings included).
fn proper_reply(request: &[u8]) -> Vec<u8> {
    let xid = i32::from_be_bytes(request[..4].try_into().unwrap());
    let opcode = i32::from_be_bytes(request[4..8].try_into().unwrap());
    let mut w = Writer::new();
    w.i32(xid).i64(1).i32(0);
    if opcode == 3 {
        stat_bytes(&mut w);
    }
    w.finish()
}

/// Serves connections one after another. On connection `n` (from 0), the first non-ping
/// request gets `script(n)`; every other request a proper reply. Returns the address and a
/// counter of accepted connections.
fn fake_server(script: impl Fn(usize) -> Answer + Send + 'static) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { return };
            count.fetch_add(1, Ordering::SeqCst);
            if read_frame(&mut stream).is_none() {
                continue;
            }
            if stream.write_all(&connect_response(SESSION_ID)).is_err() {
                continue;
            }
            let mut scripted = false;
            while let Some(request) = read_frame(&mut stream) {
                let xid = i32::from_be_bytes(request[..4].try_into().unwrap());
                let answer = if scripted || xid == -2 {
                    Answer::Proper
                } else {
                    scripted = true;
                    script(n)
                };
                let bytes = match answer {
                    Answer::Proper => proper_reply(&request),
                    Answer::Raw(bytes) => bytes,
                };
                if stream.write_all(&bytes).is_err() {
                    break;
                }
            }
        }
    });
    (addr, accepted)
}

fn connect(addr: &str) -> Arc<NativeClient> {
    NativeClient::connect_with(
        NativeOptions::new(addr)
            .session_timeout(Duration::from_secs(2))
            .call_timeout(Duration::from_secs(2)),
    )
    .expect("connect to the fake server")
}

/// The first call on the first connection gets `bad`; it must fail with `expected`, and the
/// client must come back on a second connection with the same session, where a call works.
fn violation_then_recovery(bad: Vec<u8>, expected: ZkError) {
    let (addr, accepted) = fake_server(move |n| {
        if n == 0 {
            Answer::Raw(bad.clone())
        } else {
            Answer::Proper
        }
    });
    let client = connect(&addr);
    let before = client.session().snapshot();
    assert_eq!(client.exists("/a").unwrap_err(), expected);
    let s = reach_state(
        client.as_ref(),
        ConnectionState::Reconnected,
        Duration::from_secs(10),
    );
    assert_eq!(s.session_id, Some(SESSION_ID));
    assert_eq!(s.losses, before.losses);
    assert!(client.exists("/a").unwrap().is_some());
    assert!(accepted.load(Ordering::SeqCst) >= 2);
}

#[test]
fn a_reply_for_another_xid_breaks_the_connection() {
    let mut w = Writer::new();
    w.i32(999_999).i64(1).i32(0);
    stat_bytes(&mut w);
    violation_then_recovery(w.finish(), ZkError::ConnectionLoss);
}

#[test]
fn a_negative_frame_length_breaks_the_connection() {
    violation_then_recovery((-5i32).to_be_bytes().to_vec(), ZkError::ConnectionLoss);
}

#[test]
fn a_frame_over_the_packet_limit_breaks_the_connection_without_allocating() {
    // 2 GiB announced: refused from the length alone.
    violation_then_recovery(i32::MAX.to_be_bytes().to_vec(), ZkError::ConnectionLoss);
}

#[test]
fn a_truncated_record_is_a_marshalling_error_and_a_reconnect() {
    // exists's xid is 1 on a new connection; the Stat is cut short.
    let mut w = Writer::new();
    w.i32(1).i64(1).i32(0).i64(1).i64(1);
    violation_then_recovery(w.finish(), ZkError::MarshallingError);
}

#[test]
fn a_garbage_handshake_is_a_connect_error() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let _ = read_frame(&mut stream);
            // A ConnectResponse that claims a 1 GiB password.
            let mut w = Writer::new();
            w.i32(0).i32(2000).i64(1).i32(1 << 30);
            let _ = stream.write_all(&w.finish());
        }
    });
    let started = Instant::now();
    let err = NativeClient::connect_with(
        NativeOptions::new(&addr)
            .session_timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_secs(1)),
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::Connect { reason, .. } if reason.contains("ConnectResponse")),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// Connection 0 serves properly until the client's first `exists`, which it answers by
/// closing. Every later connection accepts the session (a ConnectResponse with its id and a
/// live timeout), reads the client's first packet (its auth) and closes without answering.
/// Returns the address and how many ConnectResponses were sent.
fn accepts_then_drops_server() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let answered = Arc::new(AtomicUsize::new(0));
    let count = answered.clone();
    thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { return };
            if read_frame(&mut stream).is_none()
                || stream.write_all(&connect_response(SESSION_ID)).is_err()
            {
                continue;
            }
            count.fetch_add(1, Ordering::SeqCst);
            while let Some(request) = read_frame(&mut stream) {
                let opcode = i32::from_be_bytes(request[4..8].try_into().unwrap());
                if n > 0 || opcode == 3 {
                    break;
                }
                if stream.write_all(&proper_reply(&request)).is_err() {
                    break;
                }
            }
        }
    });
    (addr, answered)
}

/// A server that accepts the session restarts the client's expiry clock, even when the
/// connection then breaks before the client could use it: the ensemble still has the
/// session, so the client must not declare it lost by a clock that started earlier. And a
/// connection that broke after `Reconnected` was reported is reported `Suspended` again.
#[test]
fn a_server_that_accepts_the_session_restarts_the_expiry_clock() {
    let (addr, answered) = accepts_then_drops_server();
    let client = NativeClient::connect_with(
        NativeOptions::new(&addr)
            .session_timeout(Duration::from_secs(2))
            .digest_auth("user", "secret"),
    )
    .expect("connect to the fake server");
    let negotiated = client.negotiated_timeout();
    let states = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = states.clone();
    client
        .session()
        .subscribe(move |s| sink.lock().unwrap().push(s.state));
    assert!(client.exists("/a").is_err(), "the server closed instead");
    // Time is the subject: twice the client's own expiry clock (4/3 of the timeout) while
    // servers keep accepting the session.
    let until = Instant::now() + negotiated * 8 / 3;
    let mut s = client.session().snapshot();
    while Instant::now() < until {
        s = client.session().wait_for_change(s.epoch, Some(until));
    }
    let states = states.lock().unwrap().clone();
    assert!(
        answered.load(Ordering::SeqCst) >= 4,
        "{} ConnectResponses",
        answered.load(Ordering::SeqCst)
    );
    assert!(
        !states.contains(&ConnectionState::Lost),
        "lost while servers accepted the session: {states:?}"
    );
    assert!(
        states
            .windows(2)
            .all(|w| w != [ConnectionState::Reconnected, ConnectionState::Reconnected]),
        "reported Reconnected again without Suspended between: {states:?}"
    );
    assert_eq!(client.session().snapshot().losses, 0);
}
