//! [`FaultProxy`]: a loopback TCP proxy a test puts between a client and a server to inject
//! connection loss, silent partitions, refused connections and targeted session expiry.
//!
//! Bytes are forwarded as they come, so the proxy works the same for TLS connections; only
//! [`FaultProxy::expire_session`] reads the stream (the session in the first ConnectResponse),
//! and over TLS [`FaultProxy::expire_session_with`] takes the session from the client instead.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::process::io_err;
use crate::error::{Error, Result};

/// How often blocked pump threads look at the stop flag.
const POLL: Duration = Duration::from_millis(100);

/// A session as the server announced it in a ConnectResponse.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SniffedSession {
    id: i64,
    password: Vec<u8>,
    timeout_ms: i32,
}

struct Connection {
    id: u64,
    client: TcpStream,
    server: TcpStream,
    session: Arc<Mutex<Option<SniffedSession>>>,
    blackholed: Arc<AtomicBool>,
}

struct Shared {
    target: Mutex<SocketAddr>,
    frozen: Mutex<bool>,
    thawed: Condvar,
    refuse: AtomicBool,
    /// Connections closed at once because of `refuse`, and its waiters.
    refusals: Mutex<u64>,
    refused: Condvar,
    stop: AtomicBool,
    next_id: AtomicU64,
    connections: Mutex<Vec<Connection>>,
    last_session: Mutex<Option<SniffedSession>>,
    pumps: Mutex<Vec<JoinHandle<()>>>,
}

/// A TCP proxy on 127.0.0.1 (std threads): `client ⇄ proxy ⇄ target`.
///
/// - [`cut`](Self::cut): closes every current connection (connection loss; the session
///   survives, new connections are accepted);
/// - [`freeze`](Self::freeze) / [`thaw`](Self::thaw): stops forwarding bytes but keeps the
///   sockets open (a silent partition: nobody sees an error);
/// - [`blackhole`](Self::blackhole): the current connections silently lose every byte and
///   close in both directions from now on, their sockets staying open (a partition of old
///   flows, as after a stateful firewall's failover); new connections work;
/// - [`refuse`](Self::refuse): closes new connections as soon as they are accepted;
/// - [`expire_session`](Self::expire_session): expires the proxied client's session on the
///   server for real, as Curator's `KillSession` does.
///
/// Dropping it stops every thread and closes every socket.
pub struct FaultProxy {
    shared: Arc<Shared>,
    addr: SocketAddr,
    acceptor: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultProxy")
            .field("addr", &self.addr)
            .field("target", &*self.shared.target.lock())
            .finish()
    }
}

impl FaultProxy {
    /// Starts a proxy on a free 127.0.0.1 port forwarding to `target`.
    pub fn start(target: SocketAddr) -> Result<FaultProxy> {
        let listener =
            TcpListener::bind("127.0.0.1:0").map_err(io_err("binding the fault proxy"))?;
        let addr = listener
            .local_addr()
            .map_err(io_err("reading the proxy address"))?;
        let shared = Arc::new(Shared {
            target: Mutex::new(target),
            frozen: Mutex::new(false),
            thawed: Condvar::new(),
            refuse: AtomicBool::new(false),
            refusals: Mutex::new(0),
            refused: Condvar::new(),
            stop: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
            connections: Mutex::new(Vec::new()),
            last_session: Mutex::new(None),
            pumps: Mutex::new(Vec::new()),
        });
        let accept_shared = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name("fault-proxy-accept".into())
            .spawn(move || accept_loop(listener, accept_shared))
            .map_err(io_err("spawning the proxy thread"))?;
        Ok(FaultProxy {
            shared,
            addr,
            acceptor: Some(acceptor),
        })
    }

    /// The proxy's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `127.0.0.1:<proxy port>`, to give to the client.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    /// Where new connections go from now on (current connections are untouched).
    pub fn set_target(&self, target: SocketAddr) {
        *self.shared.target.lock() = target;
    }

    /// Closes every current connection on both sides. New connections are accepted.
    pub fn cut(&self) {
        let connections = std::mem::take(&mut *self.shared.connections.lock());
        for c in connections {
            let _ = c.client.shutdown(Shutdown::Both);
            let _ = c.server.shutdown(Shutdown::Both);
        }
    }

    /// Stops forwarding bytes in both directions; sockets stay open (a silent partition).
    pub fn freeze(&self) {
        *self.shared.frozen.lock() = true;
    }

    /// Resumes forwarding (bytes held during the freeze are delivered).
    pub fn thaw(&self) {
        *self.shared.frozen.lock() = false;
        self.shared.thawed.notify_all();
    }

    /// Turns every current connection into a black hole: bytes and closes in either direction
    /// are dropped from now on, and both sockets stay open until [`cut`](Self::cut) or the
    /// proxy is dropped. New connections are not affected.
    pub fn blackhole(&self) {
        for c in self.shared.connections.lock().iter() {
            c.blackholed.store(true, Ordering::SeqCst);
        }
    }

    /// While `true`, new connections are closed as soon as they are accepted.
    pub fn refuse(&self, refuse: bool) {
        self.shared.refuse.store(refuse, Ordering::SeqCst);
    }

    /// How many connections were closed at once because of [`refuse`](Self::refuse).
    pub fn refusals(&self) -> u64 {
        *self.shared.refusals.lock()
    }

    /// Waits until at least `count` connections were refused or `timeout` passes; returns the
    /// number refused then.
    pub fn wait_for_refusals(&self, count: u64, timeout: Duration) -> u64 {
        let deadline = crate::testing::deadline_after(timeout);
        let mut refusals = self.shared.refusals.lock();
        while *refusals < count {
            if self
                .shared
                .refused
                .wait_until(&mut refusals, deadline)
                .timed_out()
            {
                break;
            }
        }
        *refusals
    }

    /// Number of open proxied connections.
    pub fn connection_count(&self) -> usize {
        self.shared.connections.lock().len()
    }

    /// The session ids of the open proxied connections, as their ConnectResponses said.
    pub fn session_ids(&self) -> Vec<i64> {
        self.shared
            .connections
            .lock()
            .iter()
            .filter_map(|c| c.session.lock().as_ref().map(|s| s.id))
            .collect()
    }

    /// The session id the server gave the most recent proxied connection, if seen.
    pub fn session_id(&self) -> Option<i64> {
        self.shared.last_session.lock().as_ref().map(|s| s.id)
    }

    /// Expires the session of the most recent proxied connection, on the server, for real:
    /// refuses new connections briefly (so the victim cannot win a race back), attaches a
    /// second raw connection to the session with the sniffed id and password, sends
    /// `closeSession`, then accepts again. The victim learns on its next request or reconnect.
    /// Returns the expired session id.
    pub fn expire_session(&self) -> Result<i64> {
        let session =
            self.shared
                .last_session
                .lock()
                .clone()
                .ok_or_else(|| Error::InvalidArgument {
                    name: "session",
                    reason: "no ConnectResponse seen through this proxy yet".into(),
                })?;
        let target = *self.shared.target.lock();
        self.close_while_refusing(target, &session)
    }

    /// Expires a session whose id and password the test took from the client (for instance
    /// [`NativeClient::session_credentials`](crate::client::native::NativeClient::session_credentials)),
    /// as [`expire_session`](Self::expire_session) does: new connections through this proxy
    /// are refused meanwhile, and `closeSession` is sent on a plaintext connection to `via`, a
    /// client port of the same server or ensemble. This is the way over TLS, where the proxy
    /// forwards the bytes opaquely and cannot read the session off the wire. Returns the
    /// expired session id.
    pub fn expire_session_with(
        &self,
        via: SocketAddr,
        session_id: i64,
        password: &[u8],
        timeout: Duration,
    ) -> Result<i64> {
        let session = SniffedSession {
            id: session_id,
            password: password.to_vec(),
            timeout_ms: i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX),
        };
        self.close_while_refusing(via, &session)
    }

    /// Sends closeSession for `session` to `target` while this proxy refuses new connections
    /// (so the victim cannot win a race back onto the session).
    fn close_while_refusing(&self, target: SocketAddr, session: &SniffedSession) -> Result<i64> {
        let was_refusing = self.shared.refuse.swap(true, Ordering::SeqCst);
        let result = close_session(target, session);
        self.shared.refuse.store(was_refusing, Ordering::SeqCst);
        result.map(|()| session.id)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.thaw();
        self.cut();
        // Wake the blocking accept().
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        let pumps = std::mem::take(&mut *self.shared.pumps.lock());
        for pump in pumps {
            let _ = pump.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for incoming in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = incoming else { continue };
        if shared.refuse.load(Ordering::SeqCst) {
            drop(client);
            *shared.refusals.lock() += 1;
            shared.refused.notify_all();
            continue;
        }
        let target = *shared.target.lock();
        let Ok(server) = TcpStream::connect_timeout(&target, Duration::from_secs(2)) else {
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        if let Err(e) = start_pumps(&shared, client, server) {
            log::warn!("fault proxy: {e}");
        }
    }
}

fn start_pumps(shared: &Arc<Shared>, client: TcpStream, server: TcpStream) -> std::io::Result<()> {
    let session = Arc::new(Mutex::new(None));
    let blackholed = Arc::new(AtomicBool::new(false));
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    shared.connections.lock().push(Connection {
        id,
        client: client.try_clone()?,
        server: server.try_clone()?,
        session: session.clone(),
        blackholed: blackholed.clone(),
    });
    let up = {
        let (shared, from, to) = (shared.clone(), client.try_clone()?, server.try_clone()?);
        let link = Link {
            id,
            blackholed: blackholed.clone(),
            sniff: None,
        };
        std::thread::Builder::new()
            .name("fault-proxy-up".into())
            .spawn(move || pump(&shared, &link, from, to))?
    };
    let down = {
        let shared = shared.clone();
        let link = Link {
            id,
            blackholed,
            sniff: Some(session),
        };
        std::thread::Builder::new()
            .name("fault-proxy-down".into())
            .spawn(move || pump(&shared, &link, server, client))?
    };
    let mut pumps = shared.pumps.lock();
    pumps.retain(|h| !h.is_finished());
    pumps.push(up);
    pumps.push(down);
    Ok(())
}

/// One direction of one proxied connection.
struct Link {
    id: u64,
    blackholed: Arc<AtomicBool>,
    /// Set on the server→client direction: its first frame is parsed as a ConnectResponse.
    sniff: Option<Arc<Mutex<Option<SniffedSession>>>>,
}

/// Copies `from` → `to` until either side closes or the proxy stops; holds bytes while frozen,
/// drops them (and the close) once black-holed.
fn pump(shared: &Shared, link: &Link, mut from: TcpStream, mut to: TcpStream) {
    let (id, sniff) = (link.id, &link.sniff);
    let _ = from.set_read_timeout(Some(POLL));
    let mut buf = vec![0u8; 64 * 1024];
    let mut first_frame: Option<Vec<u8>> = sniff.as_ref().map(|_| Vec::new());
    loop {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => break,
        };
        if link.blackholed.load(Ordering::SeqCst) {
            continue;
        }
        if let Some(frame) = first_frame.as_mut() {
            frame.extend_from_slice(&buf[..n]);
            if let Some(session) = parse_connect_response(frame) {
                if let Some(slot) = sniff {
                    *slot.lock() = Some(session.clone());
                }
                *shared.last_session.lock() = Some(session);
                first_frame = None;
            } else if frame.len() > 4096 {
                first_frame = None;
            }
        }
        {
            let mut frozen = shared.frozen.lock();
            while *frozen && !shared.stop.load(Ordering::SeqCst) {
                shared.thawed.wait_for(&mut frozen, POLL);
            }
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    if link.blackholed.load(Ordering::SeqCst) && !shared.stop.load(Ordering::SeqCst) {
        // The close is lost too: the sockets stay open (the connection list holds them).
        return;
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
    shared.connections.lock().retain(|c| c.id != id);
}

fn be_i32(b: &[u8]) -> i32 {
    i32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be_i64(b: &[u8]) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    i64::from_be_bytes(a)
}

/// ConnectResponse: int len, int protocolVersion, int timeout, long sessionId,
/// buffer passwd (int len + bytes), optional bool readOnly. `None` until the frame is complete
/// (or when the server refused the session: timeout 0).
fn parse_connect_response(frame: &[u8]) -> Option<SniffedSession> {
    if frame.len() < 4 {
        return None;
    }
    let len = usize::try_from(be_i32(frame)).ok()?;
    if frame.len() < 4 + len || len < 20 {
        return None;
    }
    let body = &frame[4..4 + len];
    let timeout_ms = be_i32(&body[4..]);
    let id = be_i64(&body[8..]);
    let pw_len = be_i32(&body[16..]).max(0) as usize;
    let password = body.get(20..20 + pw_len)?.to_vec();
    (timeout_ms > 0).then_some(SniffedSession {
        id,
        password,
        timeout_ms,
    })
}

/// Attaches a raw connection to `session` and sends closeSession (xid 1, type -11).
fn close_session(target: SocketAddr, session: &SniffedSession) -> Result<()> {
    let context = || format!("expiring session 0x{:x} on {target}", session.id);
    let mut stream =
        TcpStream::connect_timeout(&target, Duration::from_secs(2)).map_err(io_err(context()))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(io_err(context()))?;
    // ConnectRequest: protocolVersion, lastZxidSeen, timeout, sessionId, passwd, readOnly.
    let mut body = Vec::new();
    body.extend_from_slice(&0i32.to_be_bytes());
    body.extend_from_slice(&0i64.to_be_bytes());
    body.extend_from_slice(&session.timeout_ms.to_be_bytes());
    body.extend_from_slice(&session.id.to_be_bytes());
    body.extend_from_slice(&(session.password.len() as i32).to_be_bytes());
    body.extend_from_slice(&session.password);
    body.push(0);
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    stream.write_all(&frame).map_err(io_err(context()))?;
    let response = read_frame(&mut stream).map_err(io_err(context()))?;
    if response.len() < 8 || be_i32(&response[4..]) == 0 {
        // timeout 0: the server says the session is already gone.
        return Ok(());
    }
    // RequestHeader only: xid 1, type closeSession (-11).
    let mut close = 8i32.to_be_bytes().to_vec();
    close.extend_from_slice(&1i32.to_be_bytes());
    close.extend_from_slice(&(-11i32).to_be_bytes());
    stream.write_all(&close).map_err(io_err(context()))?;
    // ReplyHeader (xid, zxid, err); the server may also just close the socket.
    let _ = read_frame(&mut stream);
    Ok(())
}

fn read_frame(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let len = i32::from_be_bytes(len).clamp(0, 1 << 20) as usize;
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body)?;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_connect_response() {
        let mut body = Vec::new();
        body.extend_from_slice(&0i32.to_be_bytes());
        body.extend_from_slice(&4000i32.to_be_bytes());
        body.extend_from_slice(&0x1234i64.to_be_bytes());
        body.extend_from_slice(&3i32.to_be_bytes());
        body.extend_from_slice(b"pwd");
        body.push(0);
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        assert_eq!(parse_connect_response(&frame[..10]), None);
        // A negative length (any bytes may come first, e.g. a TLS record) is no frame.
        assert_eq!(parse_connect_response(&[0xff; 64]), None);
        assert_eq!(parse_connect_response(&[0x16, 3, 3, 0, 0x7a, 2]), None);
        let s = parse_connect_response(&frame).unwrap();
        assert_eq!(
            (s.id, s.password.as_slice(), s.timeout_ms),
            (0x1234, &b"pwd"[..], 4000)
        );
    }
}
