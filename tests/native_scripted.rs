//! The native client's session rules at their edges, against scripted fake servers on
//! loopback: the dead-link and expiry clocks run on the *negotiated* timeout whatever callers'
//! writes are doing (a server that stops reading while callers write large requests); a read
//! that failed for its caller leaves no watch (a reply arriving after the call timed out, a
//! reply that does not decode); `close()` during a reconnect handshake leaves no connection.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use zk_locks::client::native::jute::Writer;
use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::client::{Request, Response, ZkResult};
use zk_locks::{ConnectionState, ZkClient, ZkError};

const SESSION_ID: i64 = 0x42;
const OP_EXISTS: i32 = 3;
const OP_GET_DATA: i32 = 4;
const OP_GET_CHILDREN: i32 = 8;

fn read_frame(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; usize::try_from(i32::from_be_bytes(len)).ok()?];
    stream.read_exact(&mut body).ok()?;
    Some(body)
}

fn connect_response(timeout_ms: i32) -> Vec<u8> {
    let mut w = Writer::new();
    w.i32(0)
        .i32(timeout_ms)
        .i64(SESSION_ID)
        .buffer(&[7; 16])
        .bool(false);
    w.finish()
}

fn xid_and_opcode(request: &[u8]) -> (i32, i32) {
    (
        i32::from_be_bytes(request[..4].try_into().unwrap()),
        i32::from_be_bytes(request[4..8].try_into().unwrap()),
    )
}

fn stat_bytes(w: &mut Writer) {
    for _ in 0..4 {
        w.i64(1);
    }
    w.i32(0).i32(0).i32(0).i64(0).i32(0).i32(0).i64(1);
}

/// A well-formed reply: data and a `Stat` for getData, one child for getChildren, a `Stat`
/// for exists, a header alone for anything else (pings, auth).
fn proper_reply(request: &[u8]) -> Vec<u8> {
    let (xid, opcode) = xid_and_opcode(request);
    let mut w = Writer::new();
    w.i32(xid).i64(1).i32(0);
    match opcode {
        OP_GET_DATA => {
            w.buffer(b"data");
            stat_bytes(&mut w);
        }
        OP_GET_CHILDREN => {
            w.strings(&["child"]);
        }
        OP_EXISTS => stat_bytes(&mut w),
        _ => {}
    }
    w.finish()
}

/// A listener on loopback and its address.
fn listener() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    (listener, addr)
}

/// Every session change of a client with the time it was reported.
#[derive(Default)]
struct Timeline {
    states: Mutex<Vec<(Instant, ConnectionState)>>,
    changed: Condvar,
}

impl Timeline {
    fn record(client: &NativeClient) -> Arc<Timeline> {
        let timeline = Arc::new(Timeline::default());
        let sink = timeline.clone();
        client.session().subscribe(move |s| {
            sink.states.lock().unwrap().push((Instant::now(), s.state));
            sink.changed.notify_all();
        });
        timeline
    }

    /// When `state` was first reported; panics if it is not within `within`.
    fn first(&self, state: ConnectionState, within: Duration) -> Instant {
        let deadline = Instant::now() + within;
        let mut states = self.states.lock().unwrap();
        loop {
            if let Some((at, _)) = states.iter().find(|(_, s)| *s == state) {
                return *at;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "no {state:?} within {within:?}: {states:?}"
            );
            states = self.changed.wait_timeout(states, left).unwrap().0;
        }
    }
}

/// A server that accepts one connection, grants `negotiated`, and never reads again (the
/// socket stays open until the returned sender is dropped); later connections are refused.
fn frozen_server(negotiated: Duration) -> (String, mpsc::Sender<()>, thread::JoinHandle<()>) {
    let (listener, addr) = listener();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let server = thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        drop(listener);
        read_frame(&mut stream).expect("ConnectRequest");
        stream
            .write_all(&connect_response(negotiated.as_millis() as i32))
            .unwrap();
        let _ = release_rx.recv();
    });
    (addr, release_tx, server)
}

/// Six threads each pipeline 4 × 500 KB `set_data` (2 MB in one write, 12 MB in all: far
/// more than the socket buffers of a peer that does not read). Each reports when its
/// pipeline returned, and the results.
fn big_writers(client: &Arc<NativeClient>) -> mpsc::Receiver<(Instant, Vec<ZkResult<Response>>)> {
    let (done_tx, done_rx) = mpsc::channel();
    for writer in 0..6 {
        let client = client.clone();
        let done_tx = done_tx.clone();
        thread::spawn(move || {
            let requests: Vec<Request> = (0..4)
                .map(|i| Request::SetData {
                    path: format!("/big-{writer}-{i}"),
                    data: vec![0x5a; 500_000],
                    version: None,
                })
                .collect();
            let results = client.pipeline(&requests);
            let _ = done_tx.send((Instant::now(), results));
        });
    }
    done_rx
}

/// Item 1 of issue 24. The server grants a timeout far shorter than requested, then stops
/// reading while several threads write large requests: their writes block on the full socket.
/// The client must still say `Suspended` 2/3 and `Lost` 4/3 of the *negotiated* timeout after
/// it last heard from the server, and the blocked writers must fail then — not when a socket
/// timeout taken from the requested timeout (two minutes here) runs out.
#[test]
fn a_writer_blocked_on_a_full_socket_does_not_stop_the_clocks() {
    let negotiated = Duration::from_secs(3);
    let requested = Duration::from_secs(120);
    let (addr, release_tx, server) = frozen_server(negotiated);
    let client = NativeClient::connect_with(
        NativeOptions::new(&addr)
            .session_timeout(requested)
            .call_timeout(requested),
    )
    .expect("connect to the fake server");
    let heard = Instant::now();
    assert_eq!(client.negotiated_timeout(), negotiated);
    let timeline = Timeline::record(&client);
    let done_rx = big_writers(&client);
    // Generous bounds for a loaded machine, far below anything taken from the requested
    // timeout.
    let slack = Duration::from_secs(10);
    let suspended = timeline.first(ConnectionState::Suspended, negotiated * 2 / 3 + slack);
    assert!(
        suspended < heard + negotiated * 2 / 3 + slack,
        "Suspended {:?} after the last reply",
        suspended - heard
    );
    // Every writer was unblocked by the link's end and failed.
    for _ in 0..6 {
        let (at, results) = done_rx
            .recv_timeout(slack)
            .expect("a writer still blocked after the link was declared dead");
        assert!(at < suspended + slack);
        for result in results {
            assert_eq!(result.unwrap_err(), ZkError::ConnectionLoss);
        }
    }
    let lost = timeline.first(ConnectionState::Lost, negotiated * 4 / 3 + slack);
    assert!(
        lost < heard + negotiated * 4 / 3 + slack,
        "Lost {:?} after the last reply",
        lost - heard
    );
    client.close();
    drop(release_tx);
    server.join().unwrap();
}

/// Item 1's neighbour: `close()` waits at most the call timeout even while a caller's write
/// is blocked on a full socket (closeSession is skipped when it cannot be written by then),
/// and the blocked writer fails. The server reads the start of the caller's 21 MB write (so
/// the caller holds the write lock), then stops reading. Negotiated 30 s: a close that waited
/// behind the writer would wait for its socket write timeout (20 s).
#[test]
fn close_does_not_wait_behind_a_writer_blocked_on_a_full_socket() {
    let negotiated = Duration::from_secs(30);
    let call_timeout = Duration::from_secs(1);
    let (listener, addr) = listener();
    let (writing_tx, writing_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let server = thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        read_frame(&mut stream).expect("ConnectRequest");
        stream
            .write_all(&connect_response(negotiated.as_millis() as i32))
            .unwrap();
        // The first bytes of the big write: its writer holds the write lock from now on.
        let mut start = [0u8; 12];
        stream.read_exact(&mut start).unwrap();
        writing_tx.send(()).unwrap();
        let _ = release_rx.recv();
    });
    let client = NativeClient::connect_with(
        NativeOptions::new(&addr)
            .session_timeout(negotiated)
            .call_timeout(call_timeout),
    )
    .expect("connect to the fake server");
    let writer = client.clone();
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || {
        let requests: Vec<Request> = (0..24)
            .map(|i| Request::SetData {
                path: format!("/big-{i}"),
                data: vec![0x5a; 900_000],
                version: None,
            })
            .collect();
        let _ = done_tx.send(writer.pipeline(&requests));
    });
    let slack = Duration::from_secs(8);
    writing_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the writer starts");
    let started = Instant::now();
    client.close();
    let took = started.elapsed();
    assert!(
        took < call_timeout + slack,
        "close() took {took:?} behind a blocked writer"
    );
    let results = done_rx
        .recv_timeout(slack)
        .expect("the writer still blocked after close()");
    for result in results {
        let e = result.unwrap_err();
        assert!(
            matches!(e, ZkError::ConnectionLoss | ZkError::Closed),
            "{e}"
        );
    }
    drop(release_tx);
    server.join().unwrap();
}

/// Serves one connection after another: the handshake (negotiating 10 s), then every request
/// to `script` (connection number, request, stream), which answers it itself; `false` drops
/// the connection.
fn scripted_server(
    script: impl Fn(usize, &[u8], &mut TcpStream) -> bool + Send + 'static,
) -> String {
    let (listener, addr) = listener();
    thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { return };
            if read_frame(&mut stream).is_none()
                || stream.write_all(&connect_response(10_000)).is_err()
            {
                continue;
            }
            while let Some(request) = read_frame(&mut stream) {
                if !script(n, &request, &mut stream) {
                    break;
                }
            }
        }
    });
    addr
}

/// Item 6 of issue 24: a watched read whose reply comes after the call timed out
/// (`OperationTimeout`) must not register its watch when the reply arrives.
#[test]
fn a_read_that_timed_out_leaves_no_watch() {
    let (late_tx, late_rx) = mpsc::channel::<()>();
    let late_rx = Mutex::new(late_rx);
    let addr = scripted_server(move |_, request, stream| {
        let (_, opcode) = xid_and_opcode(request);
        if opcode == OP_GET_DATA || opcode == OP_GET_CHILDREN {
            // Answered only once the caller has given up.
            let _ = late_rx.lock().unwrap().recv();
        }
        stream.write_all(&proper_reply(request)).is_ok()
    });
    let client = NativeClient::connect_with(
        NativeOptions::new(&addr)
            .session_timeout(Duration::from_secs(10))
            .call_timeout(Duration::from_millis(300)),
    )
    .expect("connect to the fake server");
    let fired = Arc::new(Mutex::new(Vec::new()));
    let sink = fired.clone();
    let err = client
        .get_data(
            "/n",
            Some(Box::new(move |e| sink.lock().unwrap().push(e.path))),
        )
        .unwrap_err();
    assert_eq!(err, ZkError::OperationTimeout);
    let sink = fired.clone();
    let err = client
        .get_children(
            "/n",
            Some(Box::new(move |e| sink.lock().unwrap().push(e.path))),
        )
        .unwrap_err();
    assert_eq!(err, ZkError::OperationTimeout);
    // The late replies go out, then exists is answered: replies come in order, so when it
    // returns the reader has handled both late replies.
    late_tx.send(()).unwrap();
    late_tx.send(()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match client.exists("/n") {
            Ok(_) => break,
            Err(ZkError::OperationTimeout) if Instant::now() < deadline => continue,
            Err(e) => panic!("exists: {e}"),
        }
    }
    assert_eq!(
        client.watch_count(),
        0,
        "a read that timed out registered its watch"
    );
    assert!(fired.lock().unwrap().is_empty());
    client.close();
}

/// Item 6's neighbour: a watched read whose reply does not decode fails with
/// `MarshallingError`, and leaves no watch either.
#[test]
fn a_read_whose_reply_does_not_decode_leaves_no_watch() {
    let addr = scripted_server(move |n, request, stream| {
        let (xid, opcode) = xid_and_opcode(request);
        let reply = if n == 0 && opcode == OP_GET_DATA {
            // A header saying success, then a data length past the end.
            let mut w = Writer::new();
            w.i32(xid).i64(1).i32(0).i32(1000);
            w.finish()
        } else {
            proper_reply(request)
        };
        stream.write_all(&reply).is_ok()
    });
    let client = NativeClient::connect_with(
        NativeOptions::new(&addr)
            .session_timeout(Duration::from_secs(10))
            .call_timeout(Duration::from_secs(10)),
    )
    .expect("connect to the fake server");
    let err = client.get_data("/n", Some(Box::new(|_| {}))).unwrap_err();
    assert_eq!(err, ZkError::MarshallingError);
    assert_eq!(
        client.watch_count(),
        0,
        "a failed read registered its watch"
    );
    client.close();
}

/// Item 7 of issue 24. The first connection breaks; the server holds the reconnect's
/// handshake until `close()` has returned, then (if `answer`) accepts the session. After
/// `close()` no frame may be sent (here: the credentials a new connection starts with) and
/// the client's socket must be closed: the server reads the end of the stream, long before
/// the client's own handshake timeout (a minute) would have closed it.
fn close_during_a_reconnect_handshake(answer: bool) {
    let timeout_ms = 60_000;
    let (listener, addr) = listener();
    let (held_tx, held_rx) = mpsc::channel::<()>();
    let (closed_tx, closed_rx) = mpsc::channel::<()>();
    let (verdict_tx, verdict_rx) = mpsc::channel::<Result<(), String>>();
    thread::spawn(move || {
        // Connection 0: serves until the client's first exists, then drops the link.
        let (mut first, _) = listener.accept().unwrap();
        read_frame(&mut first).expect("ConnectRequest");
        first.write_all(&connect_response(timeout_ms)).unwrap();
        while let Some(request) = read_frame(&mut first) {
            if xid_and_opcode(&request).1 == OP_EXISTS {
                break;
            }
            first.write_all(&proper_reply(&request)).unwrap();
        }
        drop(first);
        // Connection 1: the reconnect. Its ConnectRequest is held until close() returned.
        let (mut second, _) = listener.accept().unwrap();
        read_frame(&mut second).expect("ConnectRequest");
        held_tx.send(()).unwrap();
        closed_rx.recv().unwrap();
        if answer {
            let _ = second.write_all(&connect_response(timeout_ms));
        }
        second
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut byte = [0u8; 1];
        let verdict = match second.read(&mut byte) {
            Ok(0) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(()),
            Ok(_) => Err("the client sent a frame after close()".to_string()),
            Err(e) => Err(format!(
                "the client's socket is still open after close(): {e}"
            )),
        };
        let _ = second.shutdown(Shutdown::Both);
        verdict_tx.send(verdict).unwrap();
    });
    let client = NativeClient::connect_with(
        NativeOptions::new(&addr)
            .session_timeout(Duration::from_millis(timeout_ms as u64))
            .digest_auth("user", "secret"),
    )
    .expect("connect to the fake server");
    assert_eq!(client.exists("/a").unwrap_err(), ZkError::ConnectionLoss);
    held_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the client reconnects");
    client.close();
    assert_eq!(client.session().state(), ConnectionState::Closed);
    closed_tx.send(()).unwrap();
    let verdict = verdict_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the server's verdict");
    verdict.unwrap();
}

#[test]
fn close_during_a_reconnect_handshake_sends_nothing_when_the_server_answers_late() {
    close_during_a_reconnect_handshake(true);
}

#[test]
fn close_during_a_reconnect_handshake_closes_its_socket() {
    close_during_a_reconnect_handshake(false);
}
