//! The session: connect and reconnect across the hosts, keep the link alive with pings,
//! declare it dead and the session lost by the Java client's clocks, and report every change
//! through the crate's [`Session`] state machine.
//!
//! Clocks, all from the *negotiated* timeout `T`: a ping when nothing was sent for `T/3`; the
//! link is dead (→ `Suspended`) when nothing was received for `2T/3`; the session is `Lost`
//! when no server accepted it within `4T/3` of the last time a server spoke for it (its last
//! byte received, or a later ConnectResponse that accepted the session even if that
//! connection broke before it could be used: the server renewed the session then), or when a
//! server answers the resume with "expired" (`timeOut <= 0`) or another id. `4T/3` is the
//! Java client's own expiry clock (ZooKeeper 3.9.3): the server expires the session about `T`
//! after it last heard from us, and the extra third absorbs clock skew and a leader election
//! that takes about `T` (sessions do not expire without a leader, and a new leader gives every
//! session a fresh timeout). `Lost` is when the client may start over, not how long a holder
//! may work: a silent link is `Suspended` from `2T/3`, and a holder relies on its lock only
//! while the leader is *proven* to keep the session (below).
//!
//! Proving (`proving.rs`, `quorum.rs`): a member answers pings alone, so a live link proves
//! nothing about the session when the member is cut off from its ensemble. While the session
//! holds or waits for a lock, a `sync` goes out every `T/24`; chains of answered syncs prove
//! when the leader last renewed the session ([`Session::safe_until`] is that plus `T`), a
//! ConnectResponse proves it by itself; holders are `Suspect` once the proof is `2T/3` old,
//! and the member is left for another at `3T/4`, before the leader could expire the session.
//!
//! A silent member (`../silence.rs`): when a request has waited far longer than this
//! connection's answers take, with nothing received meanwhile, and another member is known,
//! the member is left at once rather than after `2T/3` of silence; a member left so is passed
//! over in outages for a while. Such a move is not a blip: when another member accepts the
//! session within the silence floor, the new connection is reported `Reconnected` with no
//! `Suspended` before it (holders stay `Held`: the proof says how long they may hold).
//!
//! Order on every new connection, which the lock layer's epoch guard relies on: the state
//! change (`Connected`, `Reconnected`, or `Lost` then `Connected`) is reported *before* the
//! reader thread reads anything from the new connection; then auth packets, then SetWatches
//! (last zxid seen, in batches under the packet limit); only then do callers' requests flow.
//!
//! The clocks run on the session thread, which never waits on a socket write: a ping is
//! skipped while a caller writes or the socket is full ([`Connection::try_ping`]), and a link
//! declared dead is shut down, which fails a caller's write blocked on it. A socket write
//! that makes no progress for `2T/3` fails too (negotiated `T`, never the requested one).
//!
//! The handshake (`handshake.rs`): one attempt on a host, TCP (and TLS), ConnectRequest,
//! ConnectResponse. Establishing (`establish.rs`): installing the accepted connection in the
//! order above.
//!
//! Pacing (`pacing.rs`): which member to try next in an outage and how long to pause before
//! it (a member that did not answer is passed over once; jittered pauses after members that
//! answered without accepting us, as electing members do: the first one long enough for an
//! election to end, then a steady pace).
//!
//! Reconnecting (`reconnecting.rs`): the members tried in turn until one accepts the session,
//! or the session declared lost.
//!
//! Closing (`closing.rs`): once the session is marked closed no connection is installed any
//! more, and `close()` leaves no socket of the client open.

use std::net::TcpStream;
use std::thread::ThreadId;

mod closing;
mod establish;
mod handshake;
mod pacing;
mod proving;
mod quorum;
mod reconnecting;
mod silent;

use proving::Proving;
use quorum::ProofChain;

use std::sync::atomic::{AtomicI64, AtomicU64};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::connection::{Connection, LinkObserver, XidCounter};
use super::failure::ConnectFailure;
use super::hosts;
use super::silence::{self, Silence};

use super::watches::Watches;
use crate::client::{ZkError, ZkResult};
use crate::session::{ConnectionState, Session};

/// Path text per SetWatches packet, well under the default packet limit (the Java client
/// uses the same budget).
const SET_WATCHES_BUDGET: usize = 128 * 1024;

/// The smallest socket timeout set (a zero timeout is refused by the socket).
const MIN_TIMEOUT: Duration = Duration::from_millis(1);

/// How many recent link events the journal keeps (oldest dropped first).
const JOURNAL_LEN: usize = 64;

/// Why the keep-alive loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// The member was left for silence (`silence.rs`): a move.
    LeftSilent,
    /// Anything else: the link broke, or proved nothing, or the client closed.
    Other,
}

/// What the session needs to know about its ensemble.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// `host:port` strings, in the order to try them (already shuffled).
    pub hosts: Vec<String>,
    /// Requested session timeout.
    pub session_timeout: Duration,
    /// The ensemble's `tickTime`, when the operator stated it (the proof's spacing).
    pub ensemble_tick: Option<Duration>,
    /// Frames at or over this size break the connection.
    pub packet_limit: usize,
    /// `(scheme, credentials)` sent after every connect.
    pub auth: Vec<(String, Vec<u8>)>,
    /// TLS on every connection, when set.
    #[cfg(feature = "tls")]
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

struct Link {
    conn: Option<Arc<Connection>>,
    /// Requests may flow on `conn` (auth and SetWatches are done).
    ready: bool,
    session_id: i64,
    password: Vec<u8>,
    negotiated: Duration,
    closed: bool,
    auth_failed: bool,
    next_host: usize,
    /// The last time a server spoke for the current session: the expiry clock starts here.
    heard: Instant,
    /// The socket of the connect attempt in progress, until its connection is installed or
    /// the attempt fails: closing shuts it down.
    connecting: Option<TcpStream>,
    /// The session thread runs (set before it is spawned, cleared when it ends).
    supervising: bool,
    /// The session thread's id, so that a close from one of its own callbacks (a session
    /// listener) does not wait for itself.
    supervisor: Option<ThreadId>,
    /// The number of the connection installed last (`quorum.rs`: a proof never spans two).
    connection: u64,
    /// A member left because it proved nothing to the quorum (`proving.rs`) or fell silent
    /// (`silence.rs`): the next outage passes it over first.
    left: Option<usize>,
    /// Silent members left, and how soon the next one is judged silent.
    silence: Silence,
}

/// The session shared by the client handle, the supervisor thread and the reader threads.
pub struct SessionCore {
    config: SessionConfig,
    /// The state machine the locks observe.
    pub session: Arc<Session>,
    /// The watch registry.
    pub watches: Arc<Watches>,
    /// The last zxid seen in the current session; 0 again once a session is lost, so a new
    /// session is never refused by a server behind the old one (a rebuilt ensemble).
    last_zxid: Arc<AtomicI64>,
    /// Request ids for every connection of the client: never reset on a reconnect.
    xids: Arc<XidCounter>,
    link: Mutex<Link>,
    changed: Condvar,
    /// The last [`JOURNAL_LEN`] link events (connect attempts and their outcome, a dead
    /// link, a loss), for diagnostics only: nothing decides on it.
    journal: Mutex<std::collections::VecDeque<(Instant, String)>>,
    /// Connect attempts made (one per host tried), for measurements only.
    attempts: AtomicU64,
    /// The syncs of the current connection that prove the session to the quorum.
    proof: Arc<Mutex<ProofChain>>,
}

impl LinkObserver for SessionCore {
    fn broken(&self) {
        let _link = self.link.lock();
        self.changed.notify_all();
    }
}

impl SessionCore {
    /// A session that is not connected yet.
    pub fn new(config: SessionConfig, watches: Watches) -> Arc<SessionCore> {
        let ensemble_tick = config.ensemble_tick;
        let negotiated = config.session_timeout;
        let hosts = config.hosts.len();
        let core = Arc::new(SessionCore {
            config,
            session: Arc::new(Session::proving(ConnectionState::Suspended, None)),
            watches: Arc::new(watches),
            last_zxid: Arc::new(AtomicI64::new(0)),
            xids: Arc::new(XidCounter::new()),
            link: Mutex::new(Link {
                conn: None,
                ready: false,
                session_id: 0,
                password: vec![0; 16],
                negotiated,
                closed: false,
                auth_failed: false,
                next_host: 0,
                heard: Instant::now(),
                connecting: None,
                supervising: false,
                supervisor: None,
                connection: 0,
                left: None,
                silence: Silence::new(hosts),
            }),
            changed: Condvar::new(),
            journal: Mutex::new(std::collections::VecDeque::new()),
            attempts: AtomicU64::new(0),
            proof: Arc::new(Mutex::new(ProofChain::new(ensemble_tick))),
        });
        // A holder or waiter after none: the session thread starts proving at once.
        let weak = Arc::downgrade(&core);
        core.session.on_proving(move || {
            if let Some(core) = weak.upgrade() {
                let _link = core.link.lock();
                core.changed.notify_all();
            }
        });
        core
    }

    fn note(&self, event: String) {
        let mut journal = self.journal.lock();
        if journal.len() == JOURNAL_LEN {
            journal.pop_front();
        }
        journal.push_back((Instant::now(), event));
    }

    /// The recent link events, oldest first: every connect attempt (host and outcome), a link
    /// declared dead, a session declared lost and why.
    #[cfg(feature = "testing")]
    pub fn journal(&self) -> Vec<(Instant, String)> {
        self.journal.lock().iter().cloned().collect()
    }

    /// How many connect attempts (one per host tried) this session's client made so far.
    #[cfg(feature = "testing")]
    pub fn connect_attempts(&self) -> u64 {
        self.attempts.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The negotiated session timeout (the requested one before the first connect).
    pub fn negotiated_timeout(&self) -> Duration {
        self.link.lock().negotiated
    }

    /// The current session's id and password (`None` before the first session and after a
    /// loss until the next one).
    #[cfg(feature = "testing")]
    pub fn credentials(&self) -> Option<(i64, Vec<u8>)> {
        let link = self.link.lock();
        (link.session_id != 0).then(|| (link.session_id, link.password.clone()))
    }

    /// The connection requests may be sent on, waiting until one is ready or `deadline`.
    pub fn connection(&self, deadline: Instant) -> ZkResult<Arc<Connection>> {
        let mut link = self.link.lock();
        loop {
            if link.closed {
                return Err(if link.auth_failed {
                    ZkError::AuthFailed
                } else {
                    ZkError::Closed
                });
            }
            if let (true, Some(conn)) = (link.ready, link.conn.as_ref()) {
                if !conn.is_broken() {
                    return Ok(conn.clone());
                }
            }
            if self.changed.wait_until(&mut link, deadline).timed_out() {
                return Err(ZkError::ConnectionLoss);
            }
        }
    }

    /// The connection requests may be sent on now, if one is ready (no wait).
    pub fn connection_now(&self) -> Option<Arc<Connection>> {
        let link = self.link.lock();
        match (link.ready, link.conn.as_ref()) {
            (true, Some(conn)) if !link.closed && !conn.is_broken() => Some(conn.clone()),
            _ => None,
        }
    }

    /// Connects the first session (the caller waits up to `deadline`), then starts the
    /// supervisor thread that keeps it.
    pub fn start(self: &Arc<Self>, deadline: Instant) -> Result<(), ConnectFailure> {
        let conn = self.connect_until(Some(deadline))?;
        let core = self.clone();
        self.link.lock().supervising = true;
        let spawned = std::thread::Builder::new()
            .name("zk-locks-native-session".into())
            .spawn(move || {
                core.link.lock().supervisor = Some(std::thread::current().id());
                core.supervise(conn);
                let mut link = core.link.lock();
                link.supervising = false;
                link.supervisor = None;
                core.changed.notify_all();
            });
        if let Err(e) = spawned {
            self.link.lock().supervising = false;
            return Err(ConnectFailure::io(
                hosts::Reach::Failed,
                "spawning the session thread",
                e,
            ));
        }
        Ok(())
    }

    fn is_closed(&self) -> bool {
        self.link.lock().closed
    }

    fn supervise(self: &Arc<Self>, mut conn: Arc<Connection>) {
        loop {
            let ended = self.keep_alive(&conn);
            if self.is_closed() {
                return;
            }
            // The old reader must be done before the watch list is read for SetWatches: a
            // registration it made later would be missing on the new server.
            conn.close();
            conn.wait_reader_stopped(Duration::from_secs(5));
            let heard = Instant::now()
                .checked_sub(conn.since_recv())
                .unwrap_or_else(Instant::now);
            {
                let mut link = self.link.lock();
                link.ready = false;
                link.heard = heard;
            }
            // Leaving a silent member is a move, not a blip: another member that accepts the
            // session within the silence floor takes it over with no `Suspended` between
            // (holders stay `Held`: the proof, not the link, says how long they may hold).
            if ended == Ended::LeftSilent {
                let deadline = Instant::now() + silence::FLOOR;
                if let Ok(next) = self.connect_until(Some(deadline)) {
                    conn = next;
                    continue;
                }
            }
            if self.session.state().is_connected() {
                self.session.transition(ConnectionState::Suspended, None);
            }
            match self.reconnect() {
                Some(next) => conn = next,
                None => return,
            }
        }
    }

    /// Pings while idle, proves the session to the quorum while it holds or waits for a lock
    /// (`proving.rs`); returns when the link is broken, silent too long, proves nothing to
    /// the quorum too long, or is closed, and why.
    fn keep_alive(&self, conn: &Arc<Connection>) -> Ended {
        loop {
            let (negotiated, connection) = {
                let link = self.link.lock();
                if link.closed || conn.is_broken() {
                    return Ended::Other;
                }
                (link.negotiated, link.connection)
            };
            let read_timeout = negotiated * 2 / 3;
            let ping_after = negotiated / 3;
            let silent = conn.since_recv();
            if silent >= read_timeout {
                log::info!("nothing received for {silent:?}: link dead");
                self.note(format!("link dead: nothing received for {silent:?}"));
                // Shuts the socket down: a caller's write blocked on it fails now.
                conn.close();
                return Ended::Other;
            }
            let mut next_ping = ping_after.saturating_sub(conn.since_send());
            if next_ping.is_zero() && !conn.try_ping() {
                // A caller is writing (perhaps blocked on a full socket) or the socket is
                // full: try again soon, never wait for it; the clock above judges the link.
                next_ping = (ping_after / 10).max(Duration::from_millis(10));
            } else if next_ping.is_zero() {
                next_ping = ping_after;
            }
            let next_proof = match self.prove(conn, connection, negotiated) {
                Proving::Idle => next_ping,
                Proving::Within(next) => next,
                Proving::Leave(unproven) => {
                    log::warn!(
                        "no answer from the leader through this member for {unproven:?} \
                         (it answers alone: cut off from its ensemble?); moving the session"
                    );
                    self.note(format!("left a member: nothing proven for {unproven:?}"));
                    let mut link = self.link.lock();
                    link.left = Some(self.current_host(&link));
                    drop(link);
                    conn.close();
                    return Ended::Other;
                }
            };
            let next_judged = match self.silent_member(conn, negotiated) {
                Ok(next) => next,
                Err(unanswered) => {
                    log::warn!(
                        "no answer from this member for {unanswered:?} and nothing received \
                         (frozen, or stalled?); moving the session"
                    );
                    self.note(format!(
                        "left a silent member: a request unanswered for {unanswered:?}"
                    ));
                    conn.close();
                    return Ended::LeftSilent;
                }
            };
            let wait = (read_timeout - silent)
                .min(next_ping)
                .min(next_proof)
                .min(next_judged)
                .max(Duration::from_millis(1));
            let mut link = self.link.lock();
            if link.closed || conn.is_broken() {
                return Ended::Other;
            }
            self.changed.wait_for(&mut link, wait);
        }
    }

    /// The index of the member the current connection is on.
    fn current_host(&self, link: &Link) -> usize {
        let n = self.config.hosts.len().max(1);
        (link.next_host + n - 1) % n
    }
}

fn closed_reason(link: &Link) -> String {
    if link.auth_failed {
        "authentication failed (the server refused the credentials)".into()
    } else {
        "the client was closed".into()
    }
}

/// A random index in `[0, n)` (0 when `n` is 0).
pub fn random_index(n: usize) -> usize {
    fastrand::usize(..n.max(1))
}

/// A random duration in `[0, cap)`.
pub fn random_below(cap: Duration) -> Duration {
    let nanos = u64::try_from(cap.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(if nanos == 0 {
        0
    } else {
        fastrand::u64(..nanos)
    })
}
