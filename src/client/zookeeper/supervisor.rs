//! The session supervisor (watchdog and session-id probes) and the heartbeat.

use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use ::zookeeper as zk;

use super::convert::map_error;
use super::handle::{open_crate_handle, retire, Conn, LINK_CLOSED, LINK_CONNECTED};
use super::options::Target;
use super::pool::CallPool;
use super::security::Security;
use super::Shared;
use crate::client::{ZkError, ZkResult};
use crate::session::ConnectionState;

/// Learns the current session id: create an ephemeral probe, read its owner, delete it. One
/// pool job (one hand-off) for the three requests.
/// The client's credentials are sent first (after every reconnect the crate has forgotten
/// them), and a missing chroot gets the client's ACL.
pub(super) fn probe_session_id(
    pool: &CallPool,
    conn: &Arc<Conn>,
    target: &Target,
    security: &Security,
    deadline: Instant,
) -> ZkResult<i64> {
    let conn = conn.clone();
    let chroot = target.chroot.clone();
    let security = security.clone();
    let result = pool.run(deadline, move || -> zk::ZkResult<i64> {
        let zk = &conn.zk;
        security.authenticate(&conn, &conn.authed_at)?;
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
                    let chroot_acl = security
                        .acl_for(&path)
                        .map_err(|_| zk::ZkError::InvalidACL)?;
                    match zk.create(&path, Vec::new(), chroot_acl, zk::CreateMode::Persistent) {
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
pub(super) struct Supervisor {
    pub(super) shared: Arc<Shared>,
    pub(super) rx: mpsc::Receiver<()>,
    pub(super) seen_disconnects: u64,
    /// A reconnect happened (or may have): the session id must be probed before reporting
    /// Reconnected or Connected.
    pub(super) needs_check: bool,
    /// When the current handle was installed.
    pub(super) installed: Instant,
}

impl Supervisor {
    fn tick(&self) -> Duration {
        (self.shared.session_timeout / 20)
            .clamp(Duration::from_millis(10), Duration::from_millis(100))
    }

    pub(super) fn run(mut self) {
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
        shared.retiring.lock().retain_mut(|r| r.sweep(false));
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
        // A handle that has reported nothing yet may have reported `Connected` before its
        // listener was added: the probe tells.
        let link_up = link == LINK_CONNECTED || signals.reports() == 0;
        let silent = shared.since_last_reply();
        let state = shared.session.state();
        match state {
            ConnectionState::Connected
            | ConnectionState::Reconnected
            | ConnectionState::ReadOnly => {
                if silent > session_timeout / 2 {
                    log::info!("no reply for {silent:?}: Suspended");
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
                if link_up
                    && silent >= session_timeout
                    && self.installed.elapsed() >= session_timeout
                {
                    // A server accepted the connection, yet the handle answered nothing for a
                    // whole session timeout: it is wedged (or the server is); try another.
                    self.lose_and_replace("a new handle answered nothing for a session timeout");
                } else if link_up {
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
        let probed = probe_session_id(
            &shared.pool,
            &conn,
            &shared.target,
            &shared.security,
            Instant::now() + budget,
        );
        let id = match probed {
            Ok(id) => id,
            Err(ZkError::AuthFailed) => {
                // The server no longer accepts our credentials' scheme: terminal, as on the
                // native client (no reconnect storm).
                log::error!("authentication failed after a reconnect: closing");
                shared.shut_down();
                return;
            }
            Err(_) => return, // retried on the next tick
        };
        if conn.generation != shared.generation.load(Ordering::SeqCst) {
            return;
        }
        shared.touch();
        conn.signals.saw_link_up();
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
                    "session changed from {} to 0x{id:x} behind the client's back",
                    crate::session::session_hex(known)
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
            log::warn!("session lost: {reason}");
            shared.session.transition(ConnectionState::Lost, None);
        }
        // Retired first: from here on the old handle cannot move the session.
        let retiring = retire(shared.current(), shared.call_timeout);
        shared.retiring.lock().push(retiring);
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
                *shared.conn.write() = conn;
                shared.generation.store(generation, Ordering::SeqCst);
                self.installed = Instant::now();
            }
            Err(e) => log::warn!("could not open a new handle ({e}); retrying"),
        }
    }
}

/// The heartbeat: a cheap `exists` on the root whenever no reply came for a third of the
/// session timeout, so the watchdog's silence measure means "the server is unreachable", not
/// "the client is idle".
pub(super) fn heartbeat(shared: &Arc<Shared>) {
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
