//! [`CutOffMember`]: a stand-in for a ZooKeeper member that loses its leader while its
//! clients still reach it.
//!
//! What a real follower does when it is cut off from the other members (ZooKeeper 3.8's
//! `FollowerRequestProcessor` and `CommitProcessor`): it goes on answering what it can answer
//! alone, a session's pings, but a `sync` or a write must travel to the leader and never
//! comes back, and every later request of that session (pings included) waits behind it,
//! since a member answers a session in order. It hears no more from the leader: no
//! notification, no commit. The leader meanwhile hears no touch of the session and expires it
//! `T` after the last one. Until its own read of the leader times out (`syncLimit × tick`) the
//! member keeps its clients' connections open; a new connection's handshake, which needs
//! the leader to revalidate the session, is never answered.
//!
//! The stand-in forwards a client's frames to a real server until [`CutOffMember::cut_off`],
//! then plays that member: the real server (the leader's side) hears nothing more from the
//! client, so it expires the session on its own clock, and the client is answered pings
//! alone, in order, until it sends anything else.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::error::{Error, Result};

/// The reserved xid of a ping and a notification.
const PING_XID: i32 = -2;
const NOTIFICATION_XID: i32 = -1;

/// How often blocked threads look at the stop flag.
const POLL: Duration = Duration::from_millis(50);

#[derive(Default)]
struct Shared {
    cut: AtomicBool,
    stop: AtomicBool,
    pings_alone: AtomicU64,
    accepted: AtomicU64,
    sockets: Mutex<Vec<TcpStream>>,
}

/// A member that can be cut off from its leader: a frame-aware proxy to a real server (see
/// the module docs). Dropping it closes every socket.
pub struct CutOffMember {
    shared: Arc<Shared>,
    addr: SocketAddr,
}

impl std::fmt::Debug for CutOffMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CutOffMember")
            .field("addr", &self.addr)
            .field("cut", &self.shared.cut.load(Ordering::SeqCst))
            .finish()
    }
}

impl CutOffMember {
    /// Starts serving on a free 127.0.0.1 port, forwarding to `target` (a real server).
    pub fn start(target: SocketAddr) -> Result<CutOffMember> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(io("binding"))?;
        let addr = listener.local_addr().map_err(io("reading the address"))?;
        listener.set_nonblocking(true).map_err(io("configuring"))?;
        let shared = Arc::new(Shared::default());
        let accept = shared.clone();
        std::thread::Builder::new()
            .name("cut-off-member".into())
            .spawn(move || accept_loop(&listener, target, &accept))
            .map_err(io("spawning"))?;
        Ok(CutOffMember { shared, addr })
    }

    /// The member's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `127.0.0.1:<port>`, to give to a client (with the other members after it).
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    /// Cuts the member off from its leader from now on (for good).
    pub fn cut_off(&self) {
        self.shared.cut.store(true, Ordering::SeqCst);
    }

    /// Client connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Pings answered alone since the cut.
    pub fn pings_answered_alone(&self) -> u64 {
        self.shared.pings_alone.load(Ordering::SeqCst)
    }
}

impl Drop for CutOffMember {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for socket in self.shared.sockets.lock().drain(..) {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
}

fn io(context: &'static str) -> impl Fn(std::io::Error) -> Error {
    move |source| Error::Io {
        context: format!("cut-off member: {context}"),
        source,
    }
}

fn accept_loop(listener: &TcpListener, target: SocketAddr, shared: &Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        let client = match listener.accept() {
            Ok((client, _)) => client,
            Err(_) => {
                std::thread::sleep(POLL);
                continue;
            }
        };
        let _ = client.set_nonblocking(false);
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        if let Ok(copy) = client.try_clone() {
            shared.sockets.lock().push(copy);
        }
        // Cut off, the member cannot revalidate a session: the handshake is never answered.
        if shared.cut.load(Ordering::SeqCst) {
            continue;
        }
        let Ok(server) = TcpStream::connect(target) else {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        if let Ok(copy) = server.try_clone() {
            shared.sockets.lock().push(copy);
        }
        let _ = serve(client, server, shared);
    }
}

/// One client connection: a thread each way, frame by frame.
fn serve(client: TcpStream, server: TcpStream, shared: &Arc<Shared>) -> std::io::Result<()> {
    // Xids forwarded and not answered yet, in order: a ping is answered alone only when
    // nothing is ahead of it.
    let outstanding = Arc::new(Mutex::new(VecDeque::<i32>::new()));
    let writer = Arc::new(Mutex::new(client.try_clone()?));
    {
        let (shared, outstanding, writer) = (shared.clone(), outstanding.clone(), writer.clone());
        let (mut from, to) = (client, server.try_clone()?);
        std::thread::Builder::new()
            .name("cut-off-member-up".into())
            .spawn(move || up(&shared, &outstanding, &writer, &mut from, to))?;
    }
    let shared = shared.clone();
    std::thread::Builder::new()
        .name("cut-off-member-down".into())
        .spawn(move || down(&shared, &outstanding, &writer, server))?;
    Ok(())
}

/// Client → member: forwarded until the cut; after it, pings answered alone while nothing is
/// waiting ahead of them, everything else waits for ever (and so does all that follows it).
fn up(
    shared: &Shared,
    outstanding: &Mutex<VecDeque<i32>>,
    writer: &Mutex<TcpStream>,
    from: &mut TcpStream,
    mut to: TcpStream,
) {
    let mut first = true;
    while let Some(frame) = read_frame(shared, from) {
        // The first frame is the ConnectRequest: no header.
        let xid = (!std::mem::take(&mut first) && frame.len() >= 8)
            .then(|| i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]));
        if !shared.cut.load(Ordering::SeqCst) {
            if let Some(xid) = xid {
                outstanding.lock().push_back(xid);
            }
            if write_frame(&mut to, &frame).is_err() {
                return;
            }
            continue;
        }
        let mut waiting = outstanding.lock();
        if xid == Some(PING_XID) && waiting.is_empty() {
            let mut reply = Vec::with_capacity(16);
            reply.extend_from_slice(&PING_XID.to_be_bytes());
            reply.extend_from_slice(&0i64.to_be_bytes());
            reply.extend_from_slice(&0i32.to_be_bytes());
            if write_frame(&mut writer.lock(), &reply).is_err() {
                return;
            }
            shared.pings_alone.fetch_add(1, Ordering::SeqCst);
        } else if let Some(xid) = xid {
            waiting.push_back(xid);
        }
    }
}

/// Member → client: forwarded until the cut (each answer retires its xid); nothing after.
fn down(
    shared: &Shared,
    outstanding: &Mutex<VecDeque<i32>>,
    writer: &Mutex<TcpStream>,
    mut from: TcpStream,
) {
    let mut first = true;
    while let Some(frame) = read_frame(shared, &mut from) {
        if shared.cut.load(Ordering::SeqCst) {
            continue; // the leader's side is gone: its answers never arrive
        }
        let xid = (!std::mem::take(&mut first) && frame.len() >= 4)
            .then(|| i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]));
        let mut waiting = outstanding.lock();
        if xid.is_some_and(|x| x != NOTIFICATION_XID) {
            waiting.pop_front();
        }
        if write_frame(&mut writer.lock(), &frame).is_err() {
            return;
        }
    }
}

/// One frame body (at most 1 MiB), `None` once the socket closed or the member stopped.
fn read_frame(shared: &Shared, stream: &mut TcpStream) -> Option<Vec<u8>> {
    let _ = stream.set_read_timeout(Some(POLL));
    let mut len = [0u8; 4];
    read_all(shared, stream, &mut len)?;
    let len = usize::try_from(i32::from_be_bytes(len)).ok()?.min(1 << 20);
    let mut body = vec![0u8; len];
    read_all(shared, stream, &mut body)?;
    Some(body)
}

fn read_all(shared: &Shared, stream: &mut TcpStream, buf: &mut [u8]) -> Option<()> {
    let mut at = 0;
    while at < buf.len() {
        if shared.stop.load(Ordering::SeqCst) {
            return None;
        }
        match stream.read(&mut buf[at..]) {
            Ok(0) => return None,
            Ok(n) => at += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return None,
        }
    }
    Some(())
}

fn write_frame(stream: &mut TcpStream, body: &[u8]) -> std::io::Result<()> {
    let len = i32::try_from(body.len()).unwrap_or(i32::MAX);
    let mut frame = Vec::with_capacity(body.len() + 4);
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(body);
    stream.write_all(&frame)
}
