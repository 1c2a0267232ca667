//! The native client's handshake and request ids against a scripted server on loopback:
//! xids never repeat within a session (one counter across its connections), a new session
//! never carries the old session's last zxid, and connect strings are read as the Java
//! client reads them (an unresolvable host is skipped while another one answers).

#[cfg(feature = "tls")]
#[path = "support/tls_member.rs"]
mod tls_member;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use zk_locks::client::native::jute::Writer;
use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::testing::harness::{eventually, reach_state};
use zk_locks::{ConnectionState, Error, ZkClient};

const SESSION_ID: i64 = 0x42;
const NEW_SESSION_ID: i64 = 0x43;
/// The zxid the scripted server puts in its reply headers.
const SERVER_ZXID: i64 = 0x5000;

/// What the server saw on one connection: the ConnectRequest's session and last zxid seen,
/// then the xid of every request (pings included).
#[derive(Debug, Clone, Default)]
struct Seen {
    session_id: i64,
    last_zxid: i64,
    xids: Vec<i32>,
}

/// How the server treats connection `n` (from 0), given its ConnectRequest.
enum Handshake {
    /// A ConnectResponse with this session id and timeout (ms); then it serves requests.
    Accept(i64, i32),
    /// Closes the connection without answering (as a server refusing a client whose last
    /// zxid is ahead of its own).
    Refuse,
}

type Log = Arc<Mutex<Vec<Seen>>>;

fn read_frame(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; usize::try_from(i32::from_be_bytes(len)).ok()?];
    stream.read_exact(&mut body).ok()?;
    Some(body)
}

fn connect_response(session_id: i64, timeout_ms: i32) -> Vec<u8> {
    let mut w = Writer::new();
    w.i32(0)
        .i32(timeout_ms)
        .i64(session_id)
        .buffer(&[7; 16])
        .bool(false);
    w.finish()
}

/// A reply with the server's zxid: a `Stat` for exists, the header alone for anything else.
fn reply(xid: i32, opcode: i32) -> Vec<u8> {
    let mut w = Writer::new();
    w.i32(xid).i64(SERVER_ZXID).i32(0);
    if opcode == 3 {
        for _ in 0..4 {
            w.i64(1);
        }
        w.i32(0).i32(0).i32(0).i64(0).i32(0).i32(0).i64(1);
    }
    w.finish()
}

/// Serves connections one after another: connection `n` gets `handshake(n, connect)`; an
/// accepted connection answers every request, and is closed by the server after answering
/// `close_after(n)` requests other than pings (never when `None`).
fn scripted_server(
    handshake: impl Fn(usize, &Seen) -> Handshake + Send + 'static,
    close_after: impl Fn(usize) -> Option<usize> + Send + 'static,
) -> (String, Log) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let log: Log = Arc::default();
    let seen_log = log.clone();
    thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { return };
            let Some(connect) = read_frame(&mut stream) else {
                continue;
            };
            // ConnectRequest: protocol version, last zxid seen, timeout, session id, password.
            let seen = Seen {
                session_id: i64::from_be_bytes(connect[16..24].try_into().unwrap()),
                last_zxid: i64::from_be_bytes(connect[4..12].try_into().unwrap()),
                xids: Vec::new(),
            };
            let answer = handshake(n, &seen);
            seen_log.lock().unwrap().push(seen);
            let Handshake::Accept(session_id, timeout_ms) = answer else {
                continue;
            };
            if stream
                .write_all(&connect_response(session_id, timeout_ms))
                .is_err()
            {
                continue;
            }
            let mut answered = 0;
            while let Some(request) = read_frame(&mut stream) {
                let xid = i32::from_be_bytes(request[..4].try_into().unwrap());
                let opcode = i32::from_be_bytes(request[4..8].try_into().unwrap());
                seen_log.lock().unwrap()[n].xids.push(xid);
                if stream.write_all(&reply(xid, opcode)).is_err() {
                    break;
                }
                if xid != -2 {
                    answered += 1;
                    if close_after(n) == Some(answered) {
                        break;
                    }
                }
            }
        }
    });
    (addr, log)
}

/// A loopback address whose port was free a moment ago: a connection there is refused.
fn address_nobody_listens_on() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").to_string()
}

fn options(connect_string: &str) -> NativeOptions {
    NativeOptions::new(connect_string)
        .session_timeout(Duration::from_secs(2))
        .call_timeout(Duration::from_secs(20))
        .connect_timeout(Duration::from_secs(20))
}

/// ZooKeeper matches a write committed after the session moved to its pending request by
/// (session id, xid): the first requests on a session's second connection must not reuse
/// the xids of the first connection's.
#[test]
fn xids_continue_across_the_connections_of_a_session() {
    // Connection 0 answers three requests and closes; later ones resume the session.
    let (addr, log) = scripted_server(
        |_, _| Handshake::Accept(SESSION_ID, 6000),
        |n| (n == 0).then_some(3),
    );
    let client = NativeClient::connect_with(options(&addr)).expect("connect");
    for _ in 0..3 {
        client
            .exists("/a")
            .expect("answered on the first connection");
    }
    reach_state(
        client.as_ref(),
        ConnectionState::Reconnected,
        Duration::from_secs(30),
    );
    for _ in 0..2 {
        client
            .exists("/a")
            .expect("answered on the second connection");
    }
    let seen = log.lock().unwrap().clone();
    assert!(seen.len() >= 2, "{seen:?}");
    assert_eq!(seen[1].session_id, SESSION_ID, "a resume: {seen:?}");
    let callers = |s: &Seen| {
        s.xids
            .iter()
            .copied()
            .filter(|x| *x > 0)
            .collect::<Vec<_>>()
    };
    let (first, later): (Vec<i32>, Vec<i32>) = (
        callers(&seen[0]),
        seen[1..].iter().flat_map(callers).collect(),
    );
    assert_eq!(first.len(), 3, "{seen:?}");
    assert!(later.len() >= 2, "{seen:?}");
    let last_first = *first.iter().max().unwrap();
    assert!(
        later.iter().all(|x| *x > last_first),
        "xids of the first connection {first:?} reused after the reconnect: {later:?}"
    );
    client.close();
}

/// After the session is lost, the next ConnectRequest opens a new session from zxid 0: a
/// rebuilt ensemble (behind the zxid the old session saw) refuses anything else, for ever.
/// `expire`: the old session ends with an "expired" answer to its resume; otherwise every
/// server closes the connection (refuses the zxid) until the client's own expiry clock ends it.
fn a_new_session_starts_from_zxid_0(expire: bool) {
    let (addr, log) = scripted_server(
        move |n, seen| match (n, seen.session_id, seen.last_zxid) {
            (0, _, _) => Handshake::Accept(SESSION_ID, 2000),
            (_, SESSION_ID, _) if expire => Handshake::Accept(0, 0),
            // The rebuilt ensemble: a client ahead of its zxid is refused.
            (_, _, zxid) if zxid > 0 => Handshake::Refuse,
            (_, 0, _) => Handshake::Accept(NEW_SESSION_ID, 2000),
            _ => Handshake::Refuse,
        },
        |n| (n == 0).then_some(1),
    );
    let client = NativeClient::connect_with(options(&addr)).expect("connect");
    client
        .exists("/a")
        .expect("answered on the first connection");
    // Lost, then Connected with the new session, within a generous bound.
    eventually(
        Duration::from_secs(60),
        "a new session after the old one was lost",
        || client.session().snapshot().session_id == Some(NEW_SESSION_ID),
    );
    let s = reach_state(
        client.as_ref(),
        ConnectionState::Connected,
        Duration::from_secs(30),
    );
    assert_eq!(s.losses, 1);
    client.exists("/a").expect("the new session works");
    let seen = log.lock().unwrap().clone();
    let new_sessions: Vec<&Seen> = seen.iter().skip(1).filter(|s| s.session_id == 0).collect();
    assert!(!new_sessions.is_empty(), "{seen:?}");
    assert!(
        new_sessions.iter().all(|s| s.last_zxid == 0),
        "a new session carried the old session's zxid: {seen:?}"
    );
    if !expire {
        // The refusals are told as what they may be: a server behind our zxid.
        let journal = client.link_journal();
        assert!(
            journal
                .iter()
                .any(|(_, e)| e.contains(&format!("0x{SERVER_ZXID:x}"))),
            "no refusal naming our last zxid in {journal:?}"
        );
    }
    client.close();
}

#[test]
fn after_a_session_expired_the_next_session_starts_from_zxid_0() {
    a_new_session_starts_from_zxid_0(true);
}

#[test]
fn after_every_server_refused_our_zxid_the_next_session_starts_from_zxid_0() {
    a_new_session_starts_from_zxid_0(false);
}

/// A connect string naming a host that does not resolve (a StatefulSet member that is down
/// has no DNS record) still connects to the hosts that do.
#[test]
fn an_unresolvable_host_is_skipped_while_another_answers() {
    let (addr, _log) = scripted_server(|_, _| Handshake::Accept(SESSION_ID, 6000), |_| None);
    for connect_string in [
        format!("no-such-host.invalid:2181,{addr}"),
        format!("{addr},no-such-host.invalid"),
    ] {
        let client = NativeClient::connect_with(options(&connect_string))
            .unwrap_or_else(|e| panic!("{connect_string}: {e}"));
        client.exists("/a").expect("a call works");
        client.close();
    }
}

/// Nothing resolves: `Error::Connect` once the connect timeout passed, naming the cause.
#[test]
fn a_connect_string_where_nothing_resolves_is_a_connect_error() {
    let err = NativeClient::connect_with(
        NativeOptions::new("no-such-host.invalid:2181,also-not.invalid")
            .session_timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_secs(1)),
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::Connect { reason, .. } if reason.contains("resolve")),
        "{err}"
    );
}

/// The I/O error beneath a failed connection is kept as the error's `source()`, so a caller
/// can tell a refused connection from a time-out without reading the message.
#[test]
fn a_refused_connection_keeps_its_io_error_as_the_source() {
    let err = NativeClient::connect_with(
        NativeOptions::new(address_nobody_listens_on())
            .session_timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_secs(1)),
    )
    .unwrap_err();
    assert!(matches!(&err, Error::Connect { .. }), "{err}");
    let io = std::error::Error::source(&err)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .unwrap_or_else(|| panic!("no io::Error beneath {err:?}"));
    assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
}

/// A server that closes without answering: the explanation stays in the message, the
/// end-of-stream beneath it is the source.
#[test]
fn a_server_closing_during_the_handshake_keeps_its_io_error_as_the_source() {
    let (addr, _log) = scripted_server(|_, _| Handshake::Refuse, |_| None);
    let err = NativeClient::connect_with(
        NativeOptions::new(&addr)
            .session_timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_secs(1)),
    )
    .unwrap_err();
    let io = std::error::Error::source(&err)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .unwrap_or_else(|| panic!("no io::Error beneath {err:?}"));
    assert!(
        matches!(
            io.kind(),
            std::io::ErrorKind::UnexpectedEof
                | std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::ConnectionAborted
        ),
        "{io:?} beneath {err}"
    );
}

/// Every host that failed is named in the error, not only the last one tried: an operator
/// sees the refused member and the one that closed without answering side by side.
#[test]
fn a_connect_error_names_every_host_that_failed() {
    let refusing = address_nobody_listens_on();
    let (closing, _log) = scripted_server(|_, _| Handshake::Refuse, |_| None);
    let err = NativeClient::connect_with(
        NativeOptions::new(format!("{refusing},{closing}"))
            .session_timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_secs(2)),
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::Connect { reason, .. }
            if reason.contains(&refusing) && reason.contains(&closing)),
        "{err}"
    );
}

/// `localhost` is read like any name: every address it resolves to is tried (only
/// loopback addresses), so a server listening on 127.0.0.1 is reached whatever order the
/// resolver gives (`::1` first is common).
#[test]
fn localhost_reaches_a_server_on_127_0_0_1() {
    let (addr, _log) = scripted_server(|_, _| Handshake::Accept(SESSION_ID, 6000), |_| None);
    let port = addr.rsplit_once(':').unwrap().1;
    let client = NativeClient::connect_with(options(&format!("localhost:{port}")))
        .expect("connect through localhost");
    client.exists("/a").expect("a call works");
    client.close();
}

/// A server that closes the connection without a ConnectResponse (a plaintext client on a
/// TLS port, a server behind our zxid) is named as such, not "failed to fill whole buffer".
#[test]
fn a_server_that_closes_during_the_handshake_is_explained() {
    let (addr, _log) = scripted_server(|_, _| Handshake::Refuse, |_| None);
    let err = NativeClient::connect_with(
        NativeOptions::new(&addr)
            .session_timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_secs(1)),
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::Connect { reason, .. } if reason.contains("TLS")),
        "{err}"
    );
}

/// The same against a real server's TLS port: a plaintext client is told the port may
/// expect TLS.
#[test]
fn a_plaintext_client_on_a_real_tls_port_is_told_so() {
    let Some(server) = zk_locks::testing::shared_tls_server() else {
        return;
    };
    let hosts = server.secure_connect_string().expect("a TLS port");
    let err = NativeClient::connect_with(
        NativeOptions::new(&hosts)
            .session_timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_secs(2)),
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::Connect { reason, .. } if reason.contains("TLS")),
        "{err}"
    );
}

/// The I/O error beneath `err`, an `Error::Connect`.
fn io_source(err: &Error) -> &std::io::Error {
    assert!(matches!(err, Error::Connect { .. }), "{err}");
    std::error::Error::source(err)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .unwrap_or_else(|| panic!("no io::Error beneath {err:?}"))
}

/// A member that takes the connection (the kernel's backlog) and never says anything: the
/// time-out is the source. The listener lives as long as the returned guard.
fn frozen_member() -> (String, TcpListener) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    (listener.local_addr().unwrap().to_string(), listener)
}

fn is_time_out(kind: std::io::ErrorKind) -> bool {
    matches!(
        kind,
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

#[test]
fn a_frozen_member_keeps_its_time_out_as_the_source() {
    let (addr, _frozen) = frozen_member();
    let err = NativeClient::connect_with(
        NativeOptions::new(&addr)
            .session_timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_secs(1)),
    )
    .unwrap_err();
    assert!(is_time_out(io_source(&err).kind()), "{err:?}");
}

/// Over TLS every failed handshake keeps what is beneath it as the `source()` (it was once
/// flattened into the message, with no source): a time-out, a close, and a certificate that
/// does not verify (rustls's error, inside the `io::Error`).
#[cfg(feature = "tls")]
mod over_tls {
    use super::*;
    use zk_locks::client::native::TlsOptions;

    fn tls_options(addr: &str) -> NativeOptions {
        NativeOptions::new(addr)
            .session_timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_secs(1))
            .tls(tls_member::client_options())
    }

    /// Accepts connections and hands each to `serve` on a thread of its own.
    fn server(serve: impl Fn(TcpStream) + Send + Sync + 'static) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let serve = Arc::new(serve);
        thread::spawn(move || {
            for tcp in listener.incoming().flatten() {
                let serve = serve.clone();
                thread::spawn(move || serve(tcp));
            }
        });
        addr
    }

    #[test]
    fn a_handshake_that_times_out_keeps_its_time_out_as_the_source() {
        let (addr, _frozen) = frozen_member();
        let err = NativeClient::connect_with(tls_options(&addr)).unwrap_err();
        assert!(is_time_out(io_source(&err).kind()), "{err:?}");
    }

    #[test]
    fn a_server_closing_the_handshake_keeps_its_io_error_as_the_source() {
        let addr = server(drop);
        let err = NativeClient::connect_with(tls_options(&addr)).unwrap_err();
        let kind = io_source(&err).kind();
        assert!(
            matches!(
                kind,
                std::io::ErrorKind::UnexpectedEof
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::BrokenPipe
            ),
            "{kind:?} beneath {err}"
        );
    }

    #[test]
    fn a_certificate_that_does_not_verify_keeps_the_rustls_error_beneath() {
        let addr = server(|tcp| {
            let mut stream = tls_member::accept(tcp);
            let _ = std::io::Read::read(&mut stream, &mut [0; 1]);
        });
        let err = NativeClient::connect_with(
            tls_options(&addr)
                .tls(TlsOptions::from_ca_file(&tls_member::files().other_ca).unwrap()),
        )
        .unwrap_err();
        assert!(
            matches!(&err, Error::Connect { reason, .. } if reason.contains("certificate")),
            "{err}"
        );
        let rustls = io_source(&err)
            .get_ref()
            .and_then(|e| e.downcast_ref::<rustls::Error>());
        assert!(
            matches!(rustls, Some(rustls::Error::InvalidCertificate(_))),
            "{rustls:?} beneath {err:?}"
        );
    }
}
