//! One crate handle: opening it, its state listener, and retiring it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use ::zookeeper as zk;
use parking_lot::{Condvar, Mutex};

use super::convert::map_error;
use super::options::Target;
use super::socket::{self, CrateSocket};
use crate::client::{ZkError, ZkResult};
use crate::session::{ConnectionState, Session};

/// What the crate's state listener last reported for one handle, written by the listener
/// (which must only record and notify) and read by the supervisor and the retirer.
pub(super) struct LinkSignals {
    pub(super) state: AtomicU8,
    /// Incremented on every `Connecting`/`NotConnected`: a count, so a quick
    /// disconnect-reconnect is never coalesced away (each one lost every watch).
    pub(super) disconnects: AtomicU64,
    /// A call got `SessionExpired` from the server.
    pub(super) expired: AtomicBool,
    gate: Mutex<Gate>,
    /// Notified on every report.
    reported: Condvar,
    /// Notified when the link comes up or the crate closes the handle.
    settled: Condvar,
}

struct Gate {
    /// State reports received so far (any state).
    reports: u64,
    /// Reports of the link coming up or of the handle's end (`Closed`).
    settles: u64,
    /// Set once the handle is retired: its reports no longer drive the client's `Session`.
    retired: bool,
}

impl LinkSignals {
    fn new() -> LinkSignals {
        LinkSignals {
            state: AtomicU8::new(LINK_CONNECTING),
            disconnects: AtomicU64::new(0),
            expired: AtomicBool::new(false),
            gate: Mutex::new(Gate {
                reports: 0,
                settles: 0,
                retired: false,
            }),
            reported: Condvar::new(),
            settled: Condvar::new(),
        }
    }

    /// State reports received so far.
    pub(super) fn reports(&self) -> u64 {
        self.gate.lock().reports
    }

    /// Waits until more than `seen` reports were received or `timeout` passes; returns the
    /// count then.
    pub(super) fn wait_for_report(&self, seen: u64, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        let mut gate = self.gate.lock();
        while gate.reports == seen {
            if self.reported.wait_until(&mut gate, deadline).timed_out() {
                break;
            }
        }
        gate.reports
    }

    fn settles(&self) -> u64 {
        self.gate.lock().settles
    }

    /// Like [`wait_for_report`](Self::wait_for_report), for reports of the link coming up or
    /// of the handle's end only (a crate reconnecting to a refusing server reports thousands
    /// of disconnects per second; the retirer need not wake for each).
    fn wait_for_settle(&self, seen: u64, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        let mut gate = self.gate.lock();
        while gate.settles == seen {
            if self.settled.wait_until(&mut gate, deadline).timed_out() {
                break;
            }
        }
        gate.settles
    }

    /// Records that the link is up, as a request on it just succeeded, unless the IO thread
    /// has reported something already. Its first report can come before the listener is
    /// added, and would be missed.
    pub(super) fn saw_link_up(&self) {
        let mut gate = self.gate.lock();
        if gate.reports == 0 && self.state.load(Ordering::SeqCst) != LINK_CONNECTED {
            self.state.store(LINK_CONNECTED, Ordering::SeqCst);
            gate.settles += 1;
            self.settled.notify_all();
        }
    }
}

pub(super) const LINK_CONNECTING: u8 = 0;
pub(super) const LINK_CONNECTED: u8 = 1;
pub(super) const LINK_CLOSED: u8 = 2;

/// How long [`open_crate_handle`] waits for the crate's IO thread to report a first state
/// before it lets requests through anyway (see there).
const FIRST_REPORT_WAIT: Duration = Duration::from_millis(200);

/// One crate handle and its signals. Replaced as a whole after `Closed` or `Lost`.
pub(super) struct Conn {
    pub(super) zk: zk::ZooKeeper,
    pub(super) generation: u64,
    pub(super) signals: Arc<LinkSignals>,
    /// The way to the handle's socket, to end it when its link went silent.
    pub(super) socket: CrateSocket,
    /// `signals.disconnects` when the client's credentials were last sent on this handle
    /// ([`NEVER`](super::security::NEVER) before the first time).
    pub(super) authed_at: AtomicU64,
}

/// Wakes the supervisor without flooding its channel (the crate can emit thousands of state
/// changes per second while a server refuses connections).
#[derive(Clone)]
pub(super) struct Waker {
    pub(super) pending: Arc<AtomicBool>,
    pub(super) tx: mpsc::Sender<()>,
    /// The client's session, so that a link going down is reported at once (see the listener).
    pub(super) session: Arc<Session>,
}

impl Waker {
    pub(super) fn wake(&self) {
        if !self.pending.swap(true, Ordering::SeqCst) {
            let _ = self.tx.send(());
        }
    }
}

/// Opens a crate handle whose state reports drive `waker.session` until it is retired.
///
/// Returns only once the crate's IO thread has reported a first state (or after
/// [`FIRST_REPORT_WAIT`]): the crate's request channel (mio-extras 2.0) loses its wake-up
/// when the first request is sent while the IO thread is registering that channel
/// (`ReceiverCtl::register` reads the pending count before it publishes the readiness handle),
/// and then no request or ping ever leaves the handle again; that wedged about 1 connect in
/// 400. The IO thread registers the channel before it does anything else, so a request sent
/// after its first report is safe. If that report came before our listener was added, the
/// wait runs out once, long after the registration.
pub(super) fn open_crate_handle(
    target: &Target,
    timeout: Duration,
    generation: u64,
    waker: &Waker,
) -> ZkResult<Conn> {
    // Names are resolved again for every handle (as the Java client resolves on every
    // connection attempt).
    let crate_hosts = target.crate_hosts().map_err(|e| {
        log::warn!("no host of the connect string resolves: {e}");
        ZkError::ConnectionLoss
    })?;
    let (connected, socket) = socket::open(|| {
        catch_unwind(|| zk::ZooKeeper::connect(&crate_hosts, timeout, |_: zk::WatchedEvent| {}))
    });
    let zk = match connected {
        Ok(Ok(zk)) => zk,
        Ok(Err(e)) => return Err(map_error(e)),
        Err(_) => {
            log::warn!("the zookeeper crate panicked while connecting");
            return Err(ZkError::ConnectionLoss);
        }
    };
    let signals = Arc::new(LinkSignals::new());
    let (listener_signals, listener_waker) = (signals.clone(), waker.clone());
    // Runs on the crate's IO thread with its listener mutex held: record and notify only.
    // Calling the client from here would deadlock the IO thread.
    zk.add_listener(move |state: zk::ZkState| {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            on_report(&listener_signals, &listener_waker, state)
        }));
    });
    signals.wait_for_report(0, FIRST_REPORT_WAIT);
    Ok(Conn {
        zk,
        generation,
        signals,
        socket,
        authed_at: AtomicU64::new(super::security::NEVER),
    })
}

/// One state report of a handle's IO thread.
fn on_report(signals: &LinkSignals, waker: &Waker, state: zk::ZkState) {
    let link = match state {
        zk::ZkState::Connected | zk::ZkState::ConnectedReadOnly => LINK_CONNECTED,
        zk::ZkState::Closed => LINK_CLOSED,
        _ => LINK_CONNECTING,
    };
    if link == LINK_CONNECTING {
        signals.disconnects.fetch_add(1, Ordering::SeqCst);
    }
    signals.state.store(link, Ordering::SeqCst);
    let retired = {
        // Under the gate, so that once `retire` returns, this handle can no longer move the
        // client's session (a late disconnect of a replaced handle would suspend a healthy
        // one).
        let mut gate = signals.gate.lock();
        gate.reports += 1;
        if link != LINK_CONNECTING {
            gate.settles += 1;
        }
        // Reported here, on the crate's IO thread, before it reads anything from a new
        // connection: so the epoch has changed before any watch event of the new connection
        // (a stale closure of an old session, say) can reach a waiter, which is what makes the
        // lock's hand-off without a re-list safe. Only a state change with waiter
        // notifications; no client call.
        if link == LINK_CONNECTING && !gate.retired && waker.session.state().is_connected() {
            waker.session.transition(ConnectionState::Suspended, None);
        }
        gate.retired
    };
    signals.reported.notify_all();
    if link != LINK_CONNECTING {
        signals.settled.notify_all();
    }
    if !retired {
        waker.wake();
    }
}

/// Retires a handle the client gave up on: from now on its reports are ignored, and a
/// `zk-locks-retire` thread closes its session — at once if the link is up, else as soon as
/// the crate reconnects it (the crate silently reconnects, and even opens a new session after
/// an expiry; an unclosed handle would keep that session and its ephemerals alive with its
/// pings). The thread ends when the crate reports `Closed` (its IO thread then exits) or the
/// close was answered.
///
/// The returned [`Retiring`] must be swept until it reports the end: on a link that went
/// silent with its socket open, the close would block until TCP gives up, and the sweep shuts
/// the socket down instead (see `socket.rs`).
pub(super) fn retire(conn: Arc<Conn>, patience: Duration) -> Retiring {
    let (done_tx, done) = mpsc::channel();
    let retiring = Retiring {
        conn: conn.clone(),
        done,
        next_shutdown: Instant::now() + patience,
        patience,
    };
    if std::mem::replace(&mut conn.signals.gate.lock().retired, true) {
        return retiring; // already retiring: `done` is disconnected, the first one sweeps
    }
    let spawned = std::thread::Builder::new()
        .name("zk-locks-retire".into())
        .spawn(move || {
            close_until_closed(&conn, patience);
            drop(conn);
            let _ = done_tx.send(());
        });
    if let Err(e) = spawned {
        log::error!("could not spawn a thread to close a dead handle ({e}); leaking it");
    }
    retiring
}

/// A retired handle whose closing has not ended yet.
pub(super) struct Retiring {
    conn: Arc<Conn>,
    done: mpsc::Receiver<()>,
    next_shutdown: Instant,
    patience: Duration,
}

impl Retiring {
    /// Waits up to `timeout` for the closing to end; returns whether it did.
    pub(super) fn wait(&self, timeout: Duration) -> bool {
        !matches!(
            self.done.recv_timeout(timeout),
            Err(mpsc::RecvTimeoutError::Timeout)
        )
    }

    /// Returns false once the closing has ended. Otherwise shuts the handle's socket down when
    /// the closing took longer than its patience (or at once with `now`), so that a silent
    /// link ends instead of holding the crate's threads and the close until TCP gives up.
    pub(super) fn sweep(&mut self, now: bool) -> bool {
        if self.wait(Duration::ZERO) {
            return false;
        }
        if now || Instant::now() >= self.next_shutdown {
            if self.conn.socket.shutdown() {
                log::info!("a retired handle's link stayed silent; socket shut down");
            }
            self.next_shutdown = Instant::now() + self.patience;
        }
        true
    }
}

/// Closes the handle's session whenever its link is up, until the crate reports `Closed` or
/// answers the close. A handle still reported up `patience` after a close failed is assumed
/// gone (its IO thread died without a report).
fn close_until_closed(conn: &Conn, patience: Duration) {
    let signals = &conn.signals;
    loop {
        let seen = signals.settles();
        let failed = match signals.state.load(Ordering::SeqCst) {
            LINK_CLOSED => return,
            LINK_CONNECTED => match conn.zk.close() {
                Ok(()) => return,
                Err(_) => true,
            },
            _ => false,
        };
        let now = signals.wait_for_settle(seen, patience);
        if failed && now == seen && signals.state.load(Ordering::SeqCst) == LINK_CONNECTED {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    use super::*;

    fn waker_for(session: &Arc<Session>) -> (Waker, mpsc::Receiver<()>) {
        let (tx, rx) = mpsc::channel();
        let waker = Waker {
            pending: Arc::new(AtomicBool::new(false)),
            tx,
            session: session.clone(),
        };
        (waker, rx)
    }

    fn target(addr: std::net::SocketAddr) -> Target {
        Target {
            hosts: vec![addr.to_string()],
            chroot: None,
        }
    }

    /// Waits until the handle reports `link` (bounded); returns whether it did.
    fn wait_for_link(signals: &LinkSignals, link: u8, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            let seen = signals.reports();
            if signals.state.load(Ordering::SeqCst) == link {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            signals.wait_for_report(seen, left);
        }
    }

    /// Waits until the link is up, after the test has seen the server answer the connect. The
    /// crate's first report can come before our listener is added (then nothing is reported):
    /// the test then stands in for the supervisor's successful probe, as `saw_link_up` is meant.
    fn wait_for_link_up(signals: &LinkSignals) -> bool {
        if wait_for_link(signals, LINK_CONNECTED, Duration::from_secs(1)) {
            return true;
        }
        signals.saw_link_up();
        signals.state.load(Ordering::SeqCst) == LINK_CONNECTED
    }

    /// Accepts one connection and answers its ConnectRequest with session 0x77 (timeout
    /// 1 s); hands the socket to the test.
    fn answer_one_connect(listener: TcpListener) -> std::thread::JoinHandle<TcpStream> {
        std::thread::spawn(move || {
            let (mut sock, _) = listener.accept().unwrap();
            let mut len = [0u8; 4];
            sock.read_exact(&mut len).unwrap();
            let mut request = vec![0u8; i32::from_be_bytes(len) as usize];
            sock.read_exact(&mut request).unwrap();
            let mut body = Vec::new();
            body.extend_from_slice(&0i32.to_be_bytes());
            body.extend_from_slice(&1000i32.to_be_bytes());
            body.extend_from_slice(&0x77i64.to_be_bytes());
            body.extend_from_slice(&16i32.to_be_bytes());
            body.extend_from_slice(&[7u8; 16]);
            body.push(0);
            let mut frame = (body.len() as i32).to_be_bytes().to_vec();
            frame.extend_from_slice(&body);
            sock.write_all(&frame).unwrap();
            sock
        })
    }

    #[test]
    fn a_retired_handle_no_longer_moves_the_session() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = answer_one_connect(listener);
        let session = Arc::new(Session::new(ConnectionState::Suspended, None));
        let (waker, _wakes) = waker_for(&session);
        let conn =
            Arc::new(open_crate_handle(&target(addr), Duration::from_secs(1), 0, &waker).unwrap());
        let sock = server.join().unwrap();
        assert!(wait_for_link_up(&conn.signals));
        // The client has moved on to a healthy session on another handle.
        session.transition(ConnectionState::Connected, Some(0x99));
        let signals = conn.signals.clone();
        let done = retire(conn, Duration::from_secs(1));
        // The old handle's link now drops: a late disconnect report.
        let seen = signals.reports();
        drop(sock);
        assert_ne!(signals.wait_for_report(seen, Duration::from_secs(5)), seen);
        assert_eq!(session.state(), ConnectionState::Connected);
        assert_eq!(session.session_id(), Some(0x99));
        // With nobody answering, the crate gives up on its own and the retirer ends.
        assert!(done.wait(Duration::from_secs(10)));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_handles_socket_is_found_and_shut_down() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = answer_one_connect(listener);
        let session = Arc::new(Session::new(ConnectionState::Suspended, None));
        let (waker, _wakes) = waker_for(&session);
        let conn = open_crate_handle(&target(addr), Duration::from_secs(1), 0, &waker).unwrap();
        let _sock = server.join().unwrap();
        assert!(wait_for_link_up(&conn.signals));
        // The server stays silent, its socket open: only the shutdown ends the link.
        assert!(conn.socket.shutdown());
        assert!(wait_for_link(
            &conn.signals,
            LINK_CONNECTING,
            Duration::from_secs(5)
        ));
    }

    #[cfg(feature = "testing")]
    #[test]
    fn a_retired_handle_closes_its_session_once_the_crate_reconnects_it() {
        use crate::testing::{shared_server, FaultProxy};
        let Some(server) = shared_server() else {
            return;
        };
        let timeout = Duration::from_secs(4);
        let proxy = FaultProxy::start(server.addr()).unwrap();
        let session = Arc::new(Session::new(ConnectionState::Suspended, None));
        let (waker, _wakes) = waker_for(&session);
        let conn = Arc::new(open_crate_handle(&target(proxy.addr()), timeout, 0, &waker).unwrap());
        // A missed first report is covered by a request that succeeds, as the supervisor does.
        let up = wait_for_link(&conn.signals, LINK_CONNECTED, timeout)
            || conn.zk.exists("/", false).is_ok() && wait_for_link_up(&conn.signals);
        assert!(up);
        let path = format!("/retire-{}", uuid::Uuid::new_v4());
        let acl = zk::Acl::open_unsafe().clone();
        conn.zk
            .create(&path, Vec::new(), acl, zk::CreateMode::Ephemeral)
            .unwrap();
        // Opened through `socket::open` like every handle, so that no other test's handle
        // mistakes this one's epoll for its own.
        let (observer, _) =
            socket::open(|| zk::ZooKeeper::connect(&server.connect_string(), timeout, |_| {}));
        let observer = observer.unwrap();
        let (deleted_tx, deleted) = mpsc::channel();
        let deleted_tx = std::sync::Mutex::new(deleted_tx);
        observer
            .exists_w(&path, move |e: zk::WatchedEvent| {
                let _ = deleted_tx.lock().unwrap().send(e.event_type);
            })
            .unwrap()
            .expect("the ephemeral node exists");
        // The link drops and the crate cannot reconnect yet: a close now cannot go out.
        proxy.refuse(true);
        proxy.cut();
        assert!(wait_for_link(&conn.signals, LINK_CONNECTING, timeout));
        let done = retire(conn, timeout);
        // A few more refused reconnects: each one drops whatever requests the crate had queued.
        let refusals = proxy.refusals() + 3;
        assert!(proxy.wait_for_refusals(refusals, timeout) >= refusals);
        // The crate reconnects the same (young) session: the retirer must close it now, well
        // before the server would expire it.
        proxy.refuse(false);
        assert_eq!(
            deleted.recv_timeout(timeout / 2),
            Ok(zk::WatchedEventType::NodeDeleted),
            "the retired handle's session is still alive"
        );
        assert!(done.wait(timeout));
    }
}
