//! Backend for real ensembles over the `zookeeper` crate (0.8), made safe for locks.
//!
//! The crate is used as a transport only. Its measured defects and what this module does
//! about each:
//!
//! | crate defect | neutralised by |
//! |---|---|
//! | `connect` returns before a session exists; panics on a synchronous connect failure | [`ZookeeperClient::connect_with`] waits for a session (a probe succeeds) up to the connect timeout; `catch_unwind` around the crate's `connect` |
//! | its request channel (mio-extras 2.0) loses its wake-up when the first request is sent while the IO thread registers it: no request or ping ever leaves that handle (about 1 connect in 400 failed) | no request is sent on a new handle before its IO thread has reported a first state (`handle.rs`); after a loss, a new handle whose link is up but that answers nothing for a session timeout is replaced as well |
//! | no read timeout: a silent link keeps calls blocked and the state `Connected` | every call runs on a worker pool with a deadline (see `pool`); a heartbeat + watchdog declares `Suspended` after ½ and `Lost` after 1 session timeout without a reply |
//! | expiry never reported: permanent `Closed`, or a silent new session | the session id is probed after every reconnect; a new id ⇒ `Lost` then `Connected`; `Closed` ⇒ `Lost`, and a fresh crate handle replaces the dead one |
//! | a dropped handle lives on: its IO thread reconnects, keeps its session (or opens a new one after an expiry) alive with pings, and its state reports keep coming; the close sent by `Drop` is lost if a reconnect clears the queue | a handle given up on is *retired*: its reports no longer move the client's session, and a thread closes its session whenever the crate has a link, until the crate reports `Closed` or the close is answered |
//! | `Drop`/`close()` block on a silent link; a handle cannot be ended before TCP gives up (its IO and event threads and every call stuck in it stay) | a retired handle whose close has not ended within the call timeout has its socket shut down, found through the handle's epoll instance (`socket.rs`, Linux); [`ZkClient::close`] waits at most the call timeout |
//! | watches silently dropped on every reconnect | every reconnect is reported as `Reconnected` (epoch bump), so waiters re-check |
//! | a panicking watcher kills the client; a listener calling the client deadlocks it | crate watchers and the listener are wrapped in `catch_unwind` and only record and notify |
//! | client-side watch kept after `NoNode` | the watcher is disarmed when `get_data`/`get_children` fails |
//! | `Container` creates persistent nodes | `Container` is sent as `Persistent` on purpose (same result, stated) |
//! | chroot quirks (watch on the chroot root never fires, trailing `/`) | the chroot is applied by this module, not the crate; the crate always sees absolute server paths |
//! | credentials forgotten on every reconnect (the server keeps `addAuth` per connection, the crate never sends it again) | `security.rs`: the client's credentials are sent again before the first request on a handle whose link changed since they were last sent (the probe after a reconnect does it first); a scheme the server refuses is `AuthFailed` at connect and closes the client for good after a reconnect |
//! | `AuthFailed` and `NoAuth` are one code to the lock layer | mapped apart: [`ZkError::AuthFailed`], [`ZkError::NoAuth`] |
//! | unknown server codes | mapped to [`ZkError::Unimplemented`] (retryable) |
//! | a reconnect gives up (`Closed`) when the crate's own last ping is older than the session timeout, and it pings only when idle for ⅔ of it: a client older than its session loses the session on a mere cut | not neutralised: reported as `Lost` then a new session (a limitation of this backend) |
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
//!
//! **Layout**, one job per file:
//! - `mod.rs` (this file): [`ZookeeperClient`] — connect, the calls of [`ZkClient`], close;
//! - `options.rs`: [`ZkOptions`] and the connect string;
//! - `handle.rs`: one crate handle — opening it, its state listener, retiring it;
//! - `socket.rs`: reaching a crate handle's socket to shut a silent link down;
//! - `supervisor.rs`: the supervisor (watchdog, session-id probes, handle replacement) and the
//!   heartbeat;
//! - `pool.rs`: the worker pool that gives crate calls a deadline;
//! - `convert.rs`: errors, stats, modes, paths and watchers between the crate and this library;
//! - `security.rs`: credentials sent again after reconnects, the ACL provider's `Acl`s.

mod convert;
mod handle;
mod options;
mod pool;
mod security;
mod socket;
mod supervisor;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use ::zookeeper as zk;
use parking_lot::{Condvar, Mutex, RwLock};

use self::convert::{check_path, crate_watcher, from_server, map_error, map_mode, map_stat};
use self::handle::{open_crate_handle, retire, Conn, Retiring, Waker, LINK_CONNECTED};
use self::options::{parse_connect_string, Target};
use self::pool::CallPool;
use self::security::Security;
use self::supervisor::{heartbeat, probe_session_id, Supervisor};
use crate::client::{CreateMode, Stat, Watcher, ZkClient, ZkError, ZkResult};
use crate::error::{Error, Result};
use crate::session::{ConnectionState, Session};

pub use self::options::ZkOptions;

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
    /// Handles given up on whose closing has not ended (swept by the supervisor).
    retiring: Mutex<Vec<Retiring>>,
    /// Credentials (sent again on every reconnected handle) and the ACL provider.
    security: Security,
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
    /// [`Error::Connect`] (naming the hosts) for an empty connect string, one none of whose
    /// hosts resolves (hosts that do not are skipped and logged), or
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
                source: None,
            }
        })?;
        let conn = Arc::new(conn);
        let pool = CallPool::new();
        let security = Security {
            auth: Arc::new(options.auth.clone()),
            acl: options.acl.clone(),
        };
        // The probe queues behind the crate's ConnectRequest, so it succeeds as soon as a
        // session exists; while servers refuse, it fails fast and is retried on the next
        // state change (or every 100 ms).
        let session_id = loop {
            let attempt = probe_session_id(&pool, &conn, &target, &security, deadline);
            match attempt {
                Ok(id) => {
                    conn.signals.saw_link_up();
                    break id;
                }
                Err(e) if Instant::now() >= deadline => {
                    let link = match conn.signals.state.load(Ordering::SeqCst) {
                        LINK_CONNECTED => "the server accepted the connection",
                        _ => "no connection accepted",
                    };
                    // Nothing answered in time: end the link rather than wait for TCP.
                    retire(conn, options.effective_call_timeout()).sweep(true);
                    return Err(Error::Connect {
                        hosts: options.connect_string.clone(),
                        reason: format!(
                            "no session within {connect_timeout:?} (last error: {e}; {link})"
                        ),
                        source: None,
                    });
                }
                Err(ZkError::AuthFailed) => {
                    retire(conn, options.effective_call_timeout());
                    return Err(Error::Connect {
                        hosts: options.connect_string.clone(),
                        reason: "authentication failed: the server refused the credentials' scheme"
                            .into(),
                        source: None,
                    });
                }
                Err(ZkError::NoAuth) | Err(ZkError::BadArguments) | Err(ZkError::InvalidAcl) => {
                    retire(conn, options.effective_call_timeout());
                    return Err(Error::Connect {
                        hosts: options.connect_string.clone(),
                        reason: "cannot create the session probe node under the chroot (ACL?)"
                            .into(),
                        source: None,
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
            retiring: Mutex::new(Vec::new()),
            security,
        });
        let supervisor = Supervisor {
            shared: shared.clone(),
            rx,
            seen_disconnects: conn.signals.disconnects.load(Ordering::SeqCst),
            needs_check: false,
            installed: Instant::now(),
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
        let security = self.security.clone();
        let result = self.pool.run(deadline, move || {
            let result = security
                .authenticate(&conn, &conn.authed_at)
                .and_then(|()| security.unless_refused_by_a_new_link(&conn, op(&conn.zk)));
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

impl ZkClient for ZookeeperClient {
    fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> ZkResult<String> {
        crate::paths::validate_create_path(path, mode.is_sequential())
            .map_err(|_| ZkError::BadArguments)?;
        let acl = self.shared.security.acl_for(path)?;
        let (full, data) = (self.shared.to_server(path), data.to_vec());
        let created = self.call(move |zk| zk.create(&full, data, acl, map_mode(mode)))?;
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

    fn get_acl(&self, path: &str) -> ZkResult<(Vec<crate::client::acl::Acl>, Stat)> {
        check_path(path)?;
        let full = self.shared.to_server(path);
        let (acl, stat) = self.call(move |zk| zk.get_acl(&full))?;
        Ok((
            acl.iter().map(security::from_crate).collect(),
            map_stat(&stat),
        ))
    }

    fn acl_provider(&self) -> crate::client::acl::AclProvider {
        self.shared.security.acl.clone()
    }

    fn own_digest_ids(&self) -> Vec<String> {
        crate::client::acl::own_digest_ids(&self.shared.security.auth)
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

    /// The connect string's hosts (sorted) and its chroot.
    fn server_root(&self) -> Option<crate::client::ServerRoot> {
        let target = &self.shared.target;
        Some(crate::client::ServerRoot::new(
            crate::client::server_root::ensemble_of_hosts(&target.hosts),
            target.chroot.as_deref(),
        ))
    }

    fn session(&self) -> &Session {
        &self.shared.session
    }

    fn close(&self) {
        self.shared.shut_down();
    }
}

impl Shared {
    /// Closes the client for good: `Closed`, the session closed, every handle ended.
    fn shut_down(&self) {
        let shared = self;
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
        // silent one the crate would block until the link heals, so wait at most the call
        // timeout, then shut the silent links down. With the link down there is nothing to
        // wait for. Either way the retiring thread finishes the close if the crate reconnects.
        let current = shared.current();
        let link_up = current.signals.state.load(Ordering::SeqCst) == LINK_CONNECTED;
        let mut last = retire(current, shared.call_timeout);
        if link_up && !last.wait(shared.call_timeout) {
            last.sweep(true);
        }
        for mut retiring in std::mem::take(&mut *shared.retiring.lock()) {
            retiring.sweep(true);
        }
        shared.pool.shutdown();
    }
}

impl Drop for ZookeeperClient {
    fn drop(&mut self) {
        self.close();
    }
}
