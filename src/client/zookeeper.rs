//! Backend for real ensembles over the `zookeeper` crate (0.8), made safe for locks.
//!
//! The crate is used as a transport only. Its measured defects (see
//! `reference/rust-zk.md`) and what this module does about each:
//!
//! | crate defect | neutralised by |
//! |---|---|
//! | `connect` returns before a session exists; panics on a synchronous connect failure | [`ZookeeperClient::connect_with`] waits for a session (a probe succeeds) up to the connect timeout; `catch_unwind` around the crate's `connect` |
//! | no read timeout: a silent link keeps calls blocked and the state `Connected` | every call runs on a worker pool with a deadline (see `pool`); a heartbeat + watchdog declares `Suspended` after ½ and `Lost` after 1 session timeout without a reply |
//! | expiry never reported: permanent `Closed`, or a silent new session | the session id is probed after every reconnect; a new id ⇒ `Lost` then `Connected`; `Closed` ⇒ `Lost`, and a fresh crate handle replaces the dead one |
//! | `Drop`/`close()` block on a frozen link | dead handles are dropped on a detached thread; [`ZkClient::close`] waits at most the call timeout |
//! | watches silently dropped on every reconnect | every reconnect is reported as `Reconnected` (epoch bump), so waiters re-check |
//! | a panicking watcher kills the client; a listener calling the client deadlocks it | crate watchers and the listener are wrapped in `catch_unwind` and only record and notify |
//! | client-side watch kept after `NoNode` | the watcher is disarmed when `get_data`/`get_children` fails |
//! | `Container` creates persistent nodes | `Container` is sent as `Persistent` on purpose (same result, stated) |
//! | chroot quirks (watch on the chroot root never fires, trailing `/`) | the chroot is applied by this module, not the crate; the crate always sees absolute server paths |
//! | unknown server codes | mapped to [`ZkError::Unimplemented`] (retryable) |
//!
//! **How the session id is learned.** The crate hides it. After the first connect and after
//! every reconnect, the supervisor creates an *ephemeral* probe node
//! `<chroot>/.zk-locks-session-<uuid>`, reads its `Stat.ephemeral_owner` (the session id) and
//! deletes it: three requests per (re)connect, nothing left behind (if the delete is lost the
//! node dies with the session). The chroot node itself is created (persistent) when missing,
//! as Curator creates its namespace. Lock nodes' own `ephemeral_owner` is checked by the lock
//! layer on top of this.
//!
//! **Liveness rule.** The session timeout used for the watchdog is the *requested* one (the
//! negotiated value is invisible through the crate); it must lie in the server's
//! `[2, 20] × tickTime` window, otherwise the server may expire the session earlier than this
//! client declares it `Lost`.

mod pool;

use std::net::ToSocketAddrs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use ::zookeeper as zk;
use parking_lot::{Condvar, Mutex, RwLock};

use self::pool::CallPool;
use crate::client::{
    CreateMode, EventType, Stat, WatchedEvent, Watcher, ZkClient, ZkError, ZkResult,
};
use crate::error::{Error, Result};
use crate::session::{ConnectionState, Session};

/// Options for [`ZookeeperClient::connect_with`].
///
/// ```
/// use std::time::Duration;
/// use zk_locks::client::zookeeper::ZkOptions;
/// let options = ZkOptions::new("127.0.0.1:2181/app")
///     .session_timeout(Duration::from_secs(6))
///     .connect_timeout(Duration::from_secs(3));
/// assert_eq!(options.effective_connect_timeout(), Duration::from_secs(3));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZkOptions {
    /// Comma-separated `host:port` list (port 2181 when omitted), optional `/chroot` suffix.
    pub connect_string: String,
    /// Requested session timeout (default 10 s). Also the watchdog's `Lost` deadline.
    pub session_timeout: Duration,
    /// How long [`ZookeeperClient::connect_with`] waits for the first session (default: the
    /// session timeout).
    pub connect_timeout: Option<Duration>,
    /// The longest any single call may block before it fails with
    /// [`ZkError::OperationTimeout`] (default: the session timeout).
    pub call_timeout: Option<Duration>,
}

impl ZkOptions {
    /// Options with the defaults for `connect_string`.
    pub fn new(connect_string: impl Into<String>) -> ZkOptions {
        ZkOptions {
            connect_string: connect_string.into(),
            session_timeout: Duration::from_secs(10),
            connect_timeout: None,
            call_timeout: None,
        }
    }

    /// Sets the session timeout.
    pub fn session_timeout(mut self, timeout: Duration) -> ZkOptions {
        self.session_timeout = timeout;
        self
    }

    /// Sets the connect timeout.
    pub fn connect_timeout(mut self, timeout: Duration) -> ZkOptions {
        self.connect_timeout = Some(timeout);
        self
    }

    /// Sets the per-call timeout.
    pub fn call_timeout(mut self, timeout: Duration) -> ZkOptions {
        self.call_timeout = Some(timeout);
        self
    }

    /// The connect timeout in effect.
    pub fn effective_connect_timeout(&self) -> Duration {
        self.connect_timeout.unwrap_or(self.session_timeout)
    }

    /// The call timeout in effect (never longer than the session timeout).
    pub fn effective_call_timeout(&self) -> Duration {
        self.call_timeout
            .unwrap_or(self.session_timeout)
            .min(self.session_timeout)
    }
}

/// A connect string taken apart: what the crate gets (resolved hosts, no chroot) and the chroot
/// this module applies itself.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    crate_hosts: String,
    chroot: Option<String>,
}

fn parse_connect_string(connect_string: &str) -> Result<Target> {
    let connect_error = |reason: String| Error::Connect {
        hosts: connect_string.to_string(),
        reason,
    };
    let (hosts, chroot) = match connect_string.find('/') {
        Some(i) => (&connect_string[..i], &connect_string[i..]),
        None => (connect_string, ""),
    };
    let chroot = match chroot {
        "" | "/" => None,
        c => {
            crate::paths::validate_path(c).map_err(|e| Error::InvalidArgument {
                name: "connect_string",
                reason: format!("bad chroot in {connect_string:?}: {e}"),
            })?;
            Some(c.to_string())
        }
    };
    let mut resolved = Vec::new();
    for host in hosts.split(',').map(str::trim) {
        if host.is_empty() {
            return Err(connect_error("empty host in the connect string".into()));
        }
        let with_port = if host.contains(':') && !host.ends_with(']') {
            host.to_string()
        } else {
            format!("{host}:2181")
        };
        let addr = with_port
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| connect_error(format!("cannot resolve {host:?}")))?;
        resolved.push(addr.to_string());
    }
    Ok(Target {
        crate_hosts: resolved.join(","),
        chroot,
    })
}

/// What the crate's state listener last reported for one handle, written by the listener
/// (which must only record and notify) and read by the supervisor.
struct LinkSignals {
    state: AtomicU8,
    /// Incremented on every `Connecting`/`NotConnected`: a count, so a quick
    /// disconnect-reconnect is never coalesced away (each one lost every watch).
    disconnects: AtomicU64,
    /// A call got `SessionExpired` from the server.
    expired: AtomicBool,
}

const LINK_CONNECTING: u8 = 0;
const LINK_CONNECTED: u8 = 1;
const LINK_CLOSED: u8 = 2;

/// One crate handle and its signals. Replaced as a whole after `Closed` or `Lost`.
struct Conn {
    zk: zk::ZooKeeper,
    generation: u64,
    signals: Arc<LinkSignals>,
}

/// Wakes the supervisor without flooding its channel (the crate can emit thousands of state
/// changes per second while a server refuses connections).
#[derive(Clone)]
struct Waker {
    pending: Arc<AtomicBool>,
    tx: mpsc::Sender<()>,
    /// The client's session, so that a link going down is reported at once (see the listener).
    session: Arc<Session>,
}

impl Waker {
    fn wake(&self) {
        if !self.pending.swap(true, Ordering::SeqCst) {
            let _ = self.tx.send(());
        }
    }
}

/// State shared by the client handle, its supervisor and heartbeat threads, and call jobs.
struct Shared {
    display_hosts: String,
    target: Target,
    session_timeout: Duration,
    call_timeout: Duration,
    session: Arc<Session>,
    conn: RwLock<Arc<Conn>>,
    generation: AtomicU64,
    pool: CallPool,
    base: Instant,
    /// Nanoseconds after `base` of the last reply from the server on the current handle.
    last_reply: AtomicU64,
    closed: AtomicBool,
    waker: Waker,
    stop_lock: Mutex<()>,
    stop: Condvar,
}

/// A [`ZkClient`] on a real ensemble, over the `zookeeper` crate, with this library's session
/// layer (see the module docs for what it fixes).
///
/// ```no_run
/// use std::time::Duration;
/// use zk_locks::client::zookeeper::ZookeeperClient;
/// use zk_locks::{CreateMode, ZkClient};
/// let client = ZookeeperClient::connect("127.0.0.1:2181/app", Duration::from_secs(10))?;
/// client.create("/locks", b"", CreateMode::Persistent).ok();
/// println!("session 0x{:x}", client.session().session_id().unwrap());
/// client.close();
/// # Ok::<(), zk_locks::Error>(())
/// ```
pub struct ZookeeperClient {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ZookeeperClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZookeeperClient")
            .field("hosts", &self.shared.display_hosts)
            .field("session", &self.shared.session)
            .finish()
    }
}

fn open_crate_handle(
    target: &Target,
    timeout: Duration,
    generation: u64,
    waker: &Waker,
) -> ZkResult<Conn> {
    let connected = catch_unwind(|| {
        zk::ZooKeeper::connect(&target.crate_hosts, timeout, |_: zk::WatchedEvent| {})
    });
    let zk = match connected {
        Ok(Ok(zk)) => zk,
        Ok(Err(e)) => return Err(map_error(e)),
        Err(_) => {
            log::warn!("zk-locks: the zookeeper crate panicked while connecting");
            return Err(ZkError::ConnectionLoss);
        }
    };
    let signals = Arc::new(LinkSignals {
        state: AtomicU8::new(LINK_CONNECTING),
        disconnects: AtomicU64::new(0),
        expired: AtomicBool::new(false),
    });
    let (listener_signals, listener_waker) = (signals.clone(), waker.clone());
    // Runs on the crate's IO thread with its listener mutex held: record and notify only.
    // Calling the client from here would deadlock the IO thread.
    zk.add_listener(move |state: zk::ZkState| {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            let link = match state {
                zk::ZkState::Connected | zk::ZkState::ConnectedReadOnly => LINK_CONNECTED,
                zk::ZkState::Closed => LINK_CLOSED,
                _ => {
                    listener_signals.disconnects.fetch_add(1, Ordering::SeqCst);
                    // Reported here, on the crate's IO thread, before it reads anything from a
                    // new connection: so the epoch has changed before any watch event of the
                    // new connection (a stale closure of an old session, say) can reach a
                    // waiter, which is what makes the lock's hand-off without a re-list safe.
                    // Only a state change with waiter notifications; no client call.
                    if listener_waker.session.state().is_connected() {
                        listener_waker
                            .session
                            .transition(ConnectionState::Suspended, None);
                    }
                    LINK_CONNECTING
                }
            };
            listener_signals.state.store(link, Ordering::SeqCst);
            listener_waker.wake();
        }));
    });
    Ok(Conn {
        zk,
        generation,
        signals,
    })
}

/// Drops a crate handle on a detached thread: the crate's `Drop` sends closeSession and waits
/// for the answer, forever on a frozen link.
fn drop_detached(conn: Arc<Conn>) {
    let spawned = std::thread::Builder::new()
        .name("zk-locks-drop".into())
        .spawn(move || drop(conn));
    if let Err(e) = spawned {
        log::error!("zk-locks: could not spawn a thread to drop a dead handle ({e}); leaking it");
    }
}

impl ZookeeperClient {
    /// Connects with [`ZkOptions::new`]`(connect_string)` and this session timeout.
    pub fn connect(
        connect_string: &str,
        session_timeout: Duration,
    ) -> Result<Arc<ZookeeperClient>> {
        Self::connect_with(ZkOptions::new(connect_string).session_timeout(session_timeout))
    }

    /// Connects and waits for a session (up to the connect timeout).
    ///
    /// Errors: [`Error::InvalidArgument`] for a bad chroot or a zero timeout;
    /// [`Error::Connect`] (naming the hosts) for an empty or unresolvable connect string, or
    /// when no session was established in time.
    pub fn connect_with(options: ZkOptions) -> Result<Arc<ZookeeperClient>> {
        if options.session_timeout.is_zero() {
            return Err(Error::InvalidArgument {
                name: "session_timeout",
                reason: "must be > 0".into(),
            });
        }
        // The wire format carries milliseconds in an i32; the crate overflows (and panics)
        // on anything longer.
        if options.session_timeout.as_millis() > i32::MAX as u128 {
            return Err(Error::InvalidArgument {
                name: "session_timeout",
                reason: format!(
                    "{:?} is longer than ZooKeeper's limit of i32::MAX ms",
                    options.session_timeout
                ),
            });
        }
        let target = parse_connect_string(&options.connect_string)?;
        let connect_timeout = options.effective_connect_timeout();
        // `Duration::MAX` (or anything past what an `Instant` can hold) waits without limit.
        let deadline = Instant::now()
            .checked_add(connect_timeout)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600));
        let (tx, rx) = mpsc::channel();
        // Suspended until the first session exists (nobody can observe it before we return).
        let session = Arc::new(Session::new(ConnectionState::Suspended, None));
        let waker = Waker {
            pending: Arc::new(AtomicBool::new(false)),
            tx,
            session: session.clone(),
        };
        let conn = open_crate_handle(&target, options.session_timeout, 0, &waker).map_err(|e| {
            Error::Connect {
                hosts: options.connect_string.clone(),
                reason: format!("the zookeeper crate refused to connect: {e}"),
            }
        })?;
        let conn = Arc::new(conn);
        let pool = CallPool::new();
        // The probe queues behind the crate's ConnectRequest, so it succeeds as soon as a
        // session exists; while servers refuse, it fails fast and is retried on the next
        // state change (or every 100 ms).
        let session_id = loop {
            let attempt = probe_session_id(&pool, &conn, &target, deadline);
            match attempt {
                Ok(id) => break id,
                Err(e) if Instant::now() >= deadline => {
                    drop_detached(conn);
                    return Err(Error::Connect {
                        hosts: options.connect_string.clone(),
                        reason: format!("no session within {connect_timeout:?} (last error: {e})"),
                    });
                }
                Err(ZkError::NoAuth) | Err(ZkError::BadArguments) | Err(ZkError::InvalidAcl) => {
                    drop_detached(conn);
                    return Err(Error::Connect {
                        hosts: options.connect_string.clone(),
                        reason: "cannot create the session probe node under the chroot (ACL?)"
                            .into(),
                    });
                }
                Err(_) => {
                    let wait = deadline
                        .saturating_duration_since(Instant::now())
                        .min(Duration::from_millis(100));
                    waker.pending.store(false, Ordering::SeqCst);
                    let _ = rx.recv_timeout(wait);
                }
            }
        };
        // Events so far belong to the first connect, already accounted for.
        while rx.try_recv().is_ok() {}
        waker.pending.store(false, Ordering::SeqCst);
        session.transition(ConnectionState::Connected, Some(session_id));
        let base = Instant::now();
        let shared = Arc::new(Shared {
            display_hosts: options.connect_string.clone(),
            session_timeout: options.session_timeout,
            call_timeout: options.effective_call_timeout(),
            session,
            conn: RwLock::new(conn.clone()),
            generation: AtomicU64::new(0),
            pool,
            base,
            last_reply: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            waker,
            target,
            stop_lock: Mutex::new(()),
            stop: Condvar::new(),
        });
        let supervisor = Supervisor {
            shared: shared.clone(),
            rx,
            seen_disconnects: conn.signals.disconnects.load(Ordering::SeqCst),
            needs_check: false,
        };
        std::thread::Builder::new()
            .name("zk-locks-supervisor".into())
            .spawn(move || supervisor.run())
            .map_err(|source| Error::Io {
                context: "spawning the session supervisor".into(),
                source,
            })?;
        let heartbeat_shared = shared.clone();
        std::thread::Builder::new()
            .name("zk-locks-heartbeat".into())
            .spawn(move || heartbeat(&heartbeat_shared))
            .map_err(|source| Error::Io {
                context: "spawning the heartbeat".into(),
                source,
            })?;
        Ok(Arc::new(ZookeeperClient { shared }))
    }

    /// The chroot applied to every path, if the connect string had one.
    pub fn chroot(&self) -> Option<&str> {
        self.shared.target.chroot.as_deref()
    }

    /// The session timeout this client assumes (the requested one).
    pub fn session_timeout(&self) -> Duration {
        self.shared.session_timeout
    }

    /// Runs one crate call on the pool with the call deadline, counting replies as liveness.
    fn call<T, F>(&self, op: F) -> ZkResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&zk::ZooKeeper) -> zk::ZkResult<T> + Send + 'static,
    {
        if self.shared.closed.load(Ordering::SeqCst) {
            return Err(ZkError::Closed);
        }
        let deadline = Instant::now() + self.shared.call_timeout;
        self.shared.call_on_current(deadline, op)
    }
}

impl Shared {
    fn now_nanos(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    fn touch(&self) {
        self.last_reply
            .fetch_max(self.now_nanos(), Ordering::SeqCst);
    }

    fn since_last_reply(&self) -> Duration {
        Duration::from_nanos(
            self.now_nanos()
                .saturating_sub(self.last_reply.load(Ordering::SeqCst)),
        )
    }

    fn current(&self) -> Arc<Conn> {
        self.conn.read().clone()
    }

    fn call_on_current<T, F>(self: &Arc<Self>, deadline: Instant, op: F) -> ZkResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&zk::ZooKeeper) -> zk::ZkResult<T> + Send + 'static,
    {
        let conn = self.current();
        let shared = Arc::downgrade(self);
        let result = self.pool.run(deadline, move || {
            let result = op(&conn.zk);
            if let Some(shared) = shared.upgrade() {
                shared.after_reply(&conn, &result);
            }
            result
        });
        match result {
            Some(result) => result.map_err(map_error),
            None => Err(ZkError::OperationTimeout),
        }
    }

    /// Liveness bookkeeping after a crate call on `conn` returned.
    fn after_reply<T>(&self, conn: &Conn, result: &zk::ZkResult<T>) {
        if conn.generation != self.generation.load(Ordering::SeqCst) {
            return; // a reply on a replaced handle proves nothing about the current session
        }
        match result {
            Err(zk::ZkError::ConnectionLoss) | Err(zk::ZkError::MarshallingError) => {}
            Err(zk::ZkError::SessionExpired) => {
                conn.signals.expired.store(true, Ordering::SeqCst);
                self.waker.wake();
            }
            _ => self.touch(),
        }
    }

    fn to_server(&self, path: &str) -> String {
        match &self.target.chroot {
            None => path.to_string(),
            Some(chroot) if path == "/" => chroot.clone(),
            Some(chroot) => format!("{chroot}{path}"),
        }
    }
}

fn from_server(chroot: Option<&str>, path: &str) -> String {
    match chroot {
        None => path.to_string(),
        Some(chroot) => match path.strip_prefix(chroot) {
            Some("") => "/".to_string(),
            Some(rest) if rest.starts_with('/') => rest.to_string(),
            _ => path.to_string(),
        },
    }
}

/// Learns the current session id: create an ephemeral probe, read its owner, delete it. One
/// pool job (one hand-off) for the three requests.
fn probe_session_id(
    pool: &CallPool,
    conn: &Arc<Conn>,
    target: &Target,
    deadline: Instant,
) -> ZkResult<i64> {
    let conn = conn.clone();
    let chroot = target.chroot.clone();
    let result = pool.run(deadline, move || -> zk::ZkResult<i64> {
        let zk = &conn.zk;
        let root = chroot.clone().unwrap_or_default();
        let probe = format!("{root}/.zk-locks-session-{}", uuid::Uuid::new_v4());
        let acl = zk::Acl::open_unsafe().clone();
        match zk.create(&probe, Vec::new(), acl.clone(), zk::CreateMode::Ephemeral) {
            Err(zk::ZkError::NoNode) if chroot.is_some() => {
                // The chroot does not exist yet: create it (persistent), as Curator does for
                // its namespace, then retry.
                let mut path = String::new();
                for part in root.split('/').filter(|p| !p.is_empty()) {
                    path.push('/');
                    path.push_str(part);
                    match zk.create(&path, Vec::new(), acl.clone(), zk::CreateMode::Persistent) {
                        Ok(_) | Err(zk::ZkError::NodeExists) => {}
                        Err(e) => return Err(e),
                    }
                }
                zk.create(&probe, Vec::new(), acl, zk::CreateMode::Ephemeral)?;
            }
            Err(e) => return Err(e),
            Ok(_) => {}
        }
        let owner = zk.exists(&probe, false)?.map(|s| s.ephemeral_owner);
        let _ = zk.delete(&probe, None);
        match owner {
            Some(id) if id != 0 => Ok(id),
            _ => Err(zk::ZkError::ConnectionLoss),
        }
    });
    match result {
        Some(r) => r.map_err(map_error),
        None => Err(ZkError::OperationTimeout),
    }
}

/// The thread that owns the [`Session`] transitions: it turns the crate's signals, the
/// watchdog's deadlines and session-id probes into Curator's states.
struct Supervisor {
    shared: Arc<Shared>,
    rx: mpsc::Receiver<()>,
    seen_disconnects: u64,
    /// A reconnect happened (or may have): the session id must be probed before reporting
    /// Reconnected or Connected.
    needs_check: bool,
}

impl Supervisor {
    fn tick(&self) -> Duration {
        (self.shared.session_timeout / 20)
            .clamp(Duration::from_millis(10), Duration::from_millis(100))
    }

    fn run(mut self) {
        loop {
            if self.shared.closed.load(Ordering::SeqCst) {
                return;
            }
            if let Err(mpsc::RecvTimeoutError::Disconnected) = self.rx.recv_timeout(self.tick()) {
                return;
            }
            self.shared.waker.pending.store(false, Ordering::SeqCst);
            if self.shared.closed.load(Ordering::SeqCst) {
                return;
            }
            self.evaluate();
        }
    }

    fn evaluate(&mut self) {
        let shared = self.shared.clone();
        let session_timeout = shared.session_timeout;
        let conn = shared.current();
        let signals = &conn.signals;
        let state = shared.session.state();

        let disconnects = signals.disconnects.load(Ordering::SeqCst);
        if disconnects != self.seen_disconnects {
            self.seen_disconnects = disconnects;
            self.needs_check = true;
            if state.is_connected() {
                shared.session.transition(ConnectionState::Suspended, None);
            }
        }
        let link = signals.state.load(Ordering::SeqCst);
        if link == LINK_CLOSED {
            return self.lose_and_replace("the zookeeper crate closed its session");
        }
        if signals.expired.load(Ordering::SeqCst) {
            return self.lose_and_replace("the server reported the session expired");
        }
        let link_up = link == LINK_CONNECTED;
        let silent = shared.since_last_reply();
        let state = shared.session.state();
        match state {
            ConnectionState::Connected
            | ConnectionState::Reconnected
            | ConnectionState::ReadOnly => {
                if silent > session_timeout / 2 {
                    log::info!("zk-locks: no reply for {silent:?}: Suspended");
                    shared.session.transition(ConnectionState::Suspended, None);
                } else if self.needs_check && link_up {
                    self.check_session(state);
                }
            }
            ConnectionState::Suspended => {
                if silent >= session_timeout {
                    self.lose_and_replace("no reply from the server for a whole session timeout");
                } else if link_up && (self.needs_check || silent < session_timeout / 2) {
                    self.check_session(state);
                }
            }
            ConnectionState::Lost => {
                if link_up {
                    self.check_session(state);
                }
            }
            ConnectionState::Closed => {}
        }
    }

    /// Probes the session id on the current handle and reports what it means.
    fn check_session(&mut self, state: ConnectionState) {
        let shared = self.shared.clone();
        // Never probe past the moment the watchdog would declare the session lost.
        let until_lost = shared
            .session_timeout
            .saturating_sub(shared.since_last_reply());
        let budget = (shared.session_timeout / 3)
            .min(until_lost)
            .max(Duration::from_millis(10));
        let conn = shared.current();
        let Ok(id) = probe_session_id(&shared.pool, &conn, &shared.target, Instant::now() + budget)
        else {
            return; // retried on the next tick
        };
        if conn.generation != shared.generation.load(Ordering::SeqCst) {
            return;
        }
        shared.touch();
        self.needs_check = false;
        let known = shared.session.session_id();
        match state {
            ConnectionState::Lost => {
                shared
                    .session
                    .transition(ConnectionState::Connected, Some(id));
            }
            _ if known == Some(id) => {
                shared
                    .session
                    .transition(ConnectionState::Reconnected, Some(id));
            }
            _ => {
                // The crate silently opened a new session: the old one (and its ephemerals) is
                // gone.
                log::warn!(
                    "zk-locks: session changed from {known:x?} to 0x{id:x} behind the client's back"
                );
                shared.session.transition(ConnectionState::Lost, None);
                shared
                    .session
                    .transition(ConnectionState::Connected, Some(id));
            }
        }
    }

    /// Reports `Lost` and replaces the crate handle with a fresh one (new session).
    fn lose_and_replace(&mut self, reason: &str) {
        let shared = self.shared.clone();
        if shared.session.state() != ConnectionState::Lost {
            log::warn!("zk-locks: session lost: {reason}");
            shared.session.transition(ConnectionState::Lost, None);
        }
        let generation = shared.generation.load(Ordering::SeqCst) + 1;
        match open_crate_handle(
            &shared.target,
            shared.session_timeout,
            generation,
            &shared.waker,
        ) {
            Ok(conn) => {
                let conn = Arc::new(conn);
                self.seen_disconnects = conn.signals.disconnects.load(Ordering::SeqCst);
                self.needs_check = true;
                let old = std::mem::replace(&mut *shared.conn.write(), conn);
                shared.generation.store(generation, Ordering::SeqCst);
                drop_detached(old);
            }
            Err(e) => log::warn!("zk-locks: could not open a new handle ({e}); retrying"),
        }
    }
}

/// The heartbeat: a cheap `exists` on the root whenever no reply came for a third of the
/// session timeout, so the watchdog's silence measure means "the server is unreachable", not
/// "the client is idle".
fn heartbeat(shared: &Arc<Shared>) {
    let interval = shared.session_timeout / 3;
    let min_gap = (shared.session_timeout / 10).max(Duration::from_millis(10));
    let root = shared.to_server("/");
    loop {
        let wait = {
            let silent = shared.since_last_reply();
            if silent < interval {
                interval - silent
            } else {
                let root = root.clone();
                let deadline = Instant::now() + interval;
                let ok = shared
                    .call_on_current(deadline, move |zk| zk.exists(&root, false))
                    .is_ok();
                if ok {
                    interval
                } else {
                    min_gap
                }
            }
        };
        let mut guard = shared.stop_lock.lock();
        if shared.closed.load(Ordering::SeqCst) {
            return;
        }
        shared.stop.wait_for(&mut guard, wait);
        if shared.closed.load(Ordering::SeqCst) {
            return;
        }
    }
}

fn map_error(e: zk::ZkError) -> ZkError {
    use zk::ZkError as C;
    match e {
        C::NoNode => ZkError::NoNode,
        C::NodeExists => ZkError::NodeExists,
        C::NotEmpty => ZkError::NotEmpty,
        C::BadVersion => ZkError::BadVersion,
        C::NoChildrenForEphemerals => ZkError::NoChildrenForEphemerals,
        C::BadArguments => ZkError::BadArguments,
        C::ConnectionLoss => ZkError::ConnectionLoss,
        C::SessionExpired => ZkError::SessionExpired,
        C::OperationTimeout => ZkError::OperationTimeout,
        C::NoAuth | C::AuthFailed => ZkError::NoAuth,
        C::InvalidACL => ZkError::InvalidAcl,
        C::SessionMoved => ZkError::SessionMoved,
        C::NotReadOnly => ZkError::NotReadOnly,
        C::MarshallingError => ZkError::MarshallingError,
        // Codes the crate does not know decode as Unimplemented (throttling, request timeout,
        // quota...): the outcome is unknown, so it stays retryable.
        C::Unimplemented => ZkError::Unimplemented,
        C::APIError
        | C::DataInconsistency
        | C::EphemeralOnLocalSession
        | C::InvalidCallback
        | C::NoWatcher
        | C::RuntimeInconsistency
        | C::SystemError => ZkError::SystemError,
    }
}

fn map_stat(s: &zk::Stat) -> Stat {
    Stat {
        czxid: s.czxid,
        mzxid: s.mzxid,
        ctime: s.ctime,
        mtime: s.mtime,
        version: s.version,
        cversion: s.cversion,
        aversion: s.aversion,
        ephemeral_owner: s.ephemeral_owner,
        data_length: s.data_length,
        num_children: s.num_children,
        pzxid: s.pzxid,
    }
}

fn map_mode(mode: CreateMode) -> zk::CreateMode {
    match mode {
        CreateMode::Persistent => zk::CreateMode::Persistent,
        CreateMode::Ephemeral => zk::CreateMode::Ephemeral,
        CreateMode::PersistentSequential => zk::CreateMode::PersistentSequential,
        CreateMode::EphemeralSequential => zk::CreateMode::EphemeralSequential,
        // Deliberate: the crate's Container creates a persistent node anyway (measured:
        // ephemeral_owner 0, never reaped). Saying Persistent makes that explicit; recipes
        // that want their parents reaped must delete them themselves.
        CreateMode::Container => zk::CreateMode::Persistent,
    }
}

/// A one-shot watcher as the crate wants it (`Fn`, called on its event thread), plus the
/// handle to disarm it. Panics are caught: a panicking watcher kills the crate's event thread
/// and, with it, the client.
type WatchSlot = Arc<Mutex<Option<Watcher>>>;

fn crate_watcher(
    watcher: Watcher,
    chroot: Option<String>,
) -> (impl Fn(zk::WatchedEvent) + Send, WatchSlot) {
    let slot: WatchSlot = Arc::new(Mutex::new(Some(watcher)));
    let fire_slot = slot.clone();
    let fire = move |event: zk::WatchedEvent| {
        let event_type = match event.event_type {
            zk::WatchedEventType::NodeCreated => EventType::NodeCreated,
            zk::WatchedEventType::NodeDeleted => EventType::NodeDeleted,
            zk::WatchedEventType::NodeDataChanged => EventType::NodeDataChanged,
            zk::WatchedEventType::NodeChildrenChanged => EventType::NodeChildrenChanged,
            _ => return,
        };
        let Some(watcher) = fire_slot.lock().take() else {
            return;
        };
        let path = from_server(chroot.as_deref(), event.path.as_deref().unwrap_or("/"));
        let delivered = catch_unwind(AssertUnwindSafe(move || {
            watcher(WatchedEvent { event_type, path })
        }));
        if delivered.is_err() {
            log::error!("zk-locks: a watcher panicked; ignored");
        }
    };
    (fire, slot)
}

fn check_path(path: &str) -> ZkResult<()> {
    crate::paths::validate_path(path).map_err(|_| ZkError::BadArguments)
}

impl ZkClient for ZookeeperClient {
    fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> ZkResult<String> {
        crate::paths::validate_create_path(path, mode.is_sequential())
            .map_err(|_| ZkError::BadArguments)?;
        let (full, data) = (self.shared.to_server(path), data.to_vec());
        let created = self.call(move |zk| {
            zk.create(&full, data, zk::Acl::open_unsafe().clone(), map_mode(mode))
        })?;
        Ok(from_server(self.chroot(), &created))
    }

    fn delete(&self, path: &str, version: Option<i32>) -> ZkResult<()> {
        check_path(path)?;
        let full = self.shared.to_server(path);
        self.call(move |zk| zk.delete(&full, version))
    }

    fn exists(&self, path: &str) -> ZkResult<Option<Stat>> {
        check_path(path)?;
        let full = self.shared.to_server(path);
        Ok(self
            .call(move |zk| zk.exists(&full, false))?
            .as_ref()
            .map(map_stat))
    }

    fn get_data(&self, path: &str, watcher: Option<Watcher>) -> ZkResult<(Vec<u8>, Stat)> {
        check_path(path)?;
        let full = self.shared.to_server(path);
        let (data, stat) = match watcher {
            None => self.call(move |zk| zk.get_data(&full, false))?,
            Some(watcher) => {
                let (fire, slot) = crate_watcher(watcher, self.shared.target.chroot.clone());
                let result = self.call(move |zk| zk.get_data_w(&full, fire));
                if result.is_err() {
                    // The crate keeps its client-side watch even when the server set none
                    // (NoNode): disarm ours so it never fires on an unrelated later event.
                    slot.lock().take();
                }
                result?
            }
        };
        Ok((data, map_stat(&stat)))
    }

    fn get_children(&self, path: &str, watcher: Option<Watcher>) -> ZkResult<Vec<String>> {
        check_path(path)?;
        let full = self.shared.to_server(path);
        match watcher {
            None => self.call(move |zk| zk.get_children(&full, false)),
            Some(watcher) => {
                let (fire, slot) = crate_watcher(watcher, self.shared.target.chroot.clone());
                let result = self.call(move |zk| zk.get_children_w(&full, fire));
                if result.is_err() {
                    slot.lock().take();
                }
                result
            }
        }
    }

    fn set_data(&self, path: &str, data: &[u8], version: Option<i32>) -> ZkResult<Stat> {
        check_path(path)?;
        let (full, data) = (self.shared.to_server(path), data.to_vec());
        Ok(map_stat(
            &self.call(move |zk| zk.set_data(&full, data, version))?,
        ))
    }

    fn session(&self) -> &Session {
        &self.shared.session
    }

    fn close(&self) {
        let shared = &self.shared;
        if shared.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        shared.session.transition(ConnectionState::Closed, None);
        {
            let _guard = shared.stop_lock.lock();
            shared.stop.notify_all();
        }
        shared.waker.wake();
        // closeSession deletes the ephemerals. On a healthy link this takes a round trip; on a
        // frozen one the crate would block until the link heals, so wait at most the call
        // timeout and leave the rest to a detached thread.
        let conn = shared.current();
        let (done_tx, done_rx) = mpsc::channel();
        let closer = std::thread::Builder::new()
            .name("zk-locks-close".into())
            .spawn(move || {
                let _ = conn.zk.close();
                let _ = done_tx.send(());
                drop(conn);
            });
        if closer.is_ok() {
            let _ = done_rx.recv_timeout(shared.call_timeout);
        }
        shared.pool.shutdown();
    }
}

impl Drop for ZookeeperClient {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_connect_strings() {
        let t = parse_connect_string("127.0.0.1:2181,127.0.0.1:2182/app/x").unwrap();
        assert_eq!(t.crate_hosts, "127.0.0.1:2181,127.0.0.1:2182");
        assert_eq!(t.chroot.as_deref(), Some("/app/x"));
        let t = parse_connect_string("127.0.0.1/").unwrap();
        assert_eq!((t.crate_hosts.as_str(), t.chroot), ("127.0.0.1:2181", None));
        assert!(matches!(
            parse_connect_string(""),
            Err(Error::Connect { .. })
        ));
        assert!(matches!(
            parse_connect_string("a:1,,b:2"),
            Err(Error::Connect { .. })
        ));
        assert!(matches!(
            parse_connect_string("no-such-host.invalid:2181"),
            Err(Error::Connect { .. })
        ));
        assert!(matches!(
            parse_connect_string("127.0.0.1:2181/app/"),
            Err(Error::InvalidArgument { .. })
        ));
        assert!(matches!(
            parse_connect_string("127.0.0.1:2181/a//b"),
            Err(Error::InvalidArgument { .. })
        ));
    }

    #[test]
    fn maps_paths_through_the_chroot() {
        assert_eq!(from_server(Some("/app"), "/app"), "/");
        assert_eq!(from_server(Some("/app"), "/app/x"), "/x");
        assert_eq!(from_server(None, "/x"), "/x");
    }

    #[test]
    fn unknown_codes_are_retryable() {
        assert!(map_error(zk::ZkError::Unimplemented).is_retryable());
        assert!(map_error(zk::ZkError::ConnectionLoss).is_retryable());
        assert!(!map_error(zk::ZkError::NoNode).is_retryable());
    }
}
