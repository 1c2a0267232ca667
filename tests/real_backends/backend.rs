//! The two real backends as one test parameter (the harness's [`ClientKind`]): how each
//! connects here, the typed client it gives, and the few expectations that differ between
//! them, written down where they differ.

use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::client::zookeeper::{ZkOptions, ZookeeperClient};
use zk_locks::session::{ConnectionState, SessionSnapshot};
pub use zk_locks::testing::harness::{unique_root, ClientKind};
use zk_locks::testing::{shared_server, FaultProxy};
use zk_locks::{Error, SharedClient, ZkClient, ZkError};

/// The session timeout the tests ask for.
pub const SESSION: Duration = Duration::from_secs(2);

/// Options for one connect, for either backend.
#[derive(Debug, Clone)]
pub struct Connect {
    pub hosts: String,
    pub session_timeout: Duration,
    pub connect_timeout: Option<Duration>,
    pub call_timeout: Option<Duration>,
}

impl Connect {
    /// `hosts` with the tests' session timeout.
    pub fn new(hosts: impl Into<String>) -> Connect {
        Connect {
            hosts: hosts.into(),
            session_timeout: SESSION,
            connect_timeout: None,
            call_timeout: None,
        }
    }

    pub fn session_timeout(mut self, timeout: Duration) -> Connect {
        self.session_timeout = timeout;
        self
    }

    pub fn connect_timeout(mut self, timeout: Duration) -> Connect {
        self.connect_timeout = Some(timeout);
        self
    }

    pub fn call_timeout(mut self, timeout: Duration) -> Connect {
        self.call_timeout = Some(timeout);
        self
    }
}

/// Connects a `kind` client to `hosts` with the tests' session timeout; panics when it
/// cannot. The crate's connect timeout is generous: a freshly started server on a loaded
/// machine can take longer than one session timeout to create its first session.
pub fn connect(kind: ClientKind, hosts: &str) -> Client {
    let options = match kind {
        ClientKind::Crate => Connect::new(hosts).connect_timeout(SESSION * 5),
        ClientKind::Native => Connect::new(hosts),
    };
    try_connect(kind, options).expect("connect")
}

/// Connects a `kind` client with `options`.
pub fn try_connect(kind: ClientKind, options: Connect) -> Result<Client, Error> {
    match kind {
        ClientKind::Crate => {
            let mut o =
                ZkOptions::new(options.hosts.clone()).session_timeout(options.session_timeout);
            if let Some(t) = options.connect_timeout {
                o = o.connect_timeout(t);
            }
            if let Some(t) = options.call_timeout {
                o = o.call_timeout(t);
            }
            ZookeeperClient::connect_with(o).map(Client::Crate)
        }
        ClientKind::Native => {
            let mut o =
                NativeOptions::new(options.hosts.clone()).session_timeout(options.session_timeout);
            if let Some(t) = options.connect_timeout {
                o = o.connect_timeout(t);
            }
            if let Some(t) = options.call_timeout {
                o = o.call_timeout(t);
            }
            NativeClient::connect_with(o).map(Client::Native)
        }
    }
}

/// How far past the session timeout (the default call timeout) a call caught in a frozen
/// link may return: the bound each backend has been held to since its first test.
pub fn frozen_call_slack(kind: ClientKind) -> Duration {
    match kind {
        ClientKind::Crate => Duration::from_millis(300),
        ClientKind::Native => Duration::from_millis(500),
    }
}

/// A client of either backend.
#[derive(Clone)]
pub enum Client {
    Crate(Arc<ZookeeperClient>),
    Native(Arc<NativeClient>),
}

impl std::ops::Deref for Client {
    type Target = dyn ZkClient;

    fn deref(&self) -> &Self::Target {
        match self {
            Client::Crate(c) => c.as_ref(),
            Client::Native(c) => c.as_ref(),
        }
    }
}

impl Client {
    /// The client as the recipes take it.
    pub fn shared(&self) -> SharedClient {
        match self {
            Client::Crate(c) => c.clone(),
            Client::Native(c) => c.clone(),
        }
    }

    /// The chroot of the connect string.
    pub fn chroot(&self) -> Option<&str> {
        match self {
            Client::Crate(c) => c.chroot(),
            Client::Native(c) => c.chroot(),
        }
    }

    /// Our own client, when it is one.
    pub fn native(&self) -> Option<&NativeClient> {
        match self {
            Client::Native(c) => Some(c),
            Client::Crate(_) => None,
        }
    }
}

/// Our own client on `hosts`, with the tests' session timeout.
pub fn native(hosts: &str) -> Arc<NativeClient> {
    NativeClient::connect(hosts, SESSION).expect("connect")
}

/// Waits until the session reaches `state` (or the deadline passes); returns every snapshot
/// seen on the way, the last one being the final state.
pub fn wait_for_state(
    client: &dyn ZkClient,
    state: ConnectionState,
    within: Duration,
) -> Vec<SessionSnapshot> {
    let deadline = Instant::now() + within;
    let mut seen = vec![client.session().snapshot()];
    while seen.last().unwrap().state != state && Instant::now() < deadline {
        let epoch = seen.last().unwrap().epoch;
        let next = client.session().wait_for_change(epoch, Some(deadline));
        if next.epoch != epoch {
            seen.push(next);
        }
    }
    seen
}

/// Like [`wait_for_state`], and asserts that `state` was reached; returns the snapshots seen
/// (the last one in `state`).
pub fn reach(
    client: &dyn ZkClient,
    state: ConnectionState,
    within: Duration,
) -> Vec<SessionSnapshot> {
    let seen = wait_for_state(client, state, within);
    assert_eq!(seen.last().unwrap().state, state, "{:?}", states(&seen));
    seen
}

pub fn states(seen: &[SessionSnapshot]) -> Vec<ConnectionState> {
    seen.iter().map(|s| s.state).collect()
}

/// Lets time pass with no transition (time is the subject: the client ages).
pub fn age(client: &dyn ZkClient, by: Duration) {
    let before = client.session().snapshot();
    let after = client
        .session()
        .wait_for_change(before.epoch, Some(Instant::now() + by));
    assert_eq!(
        after.epoch, before.epoch,
        "no transition while idle: {after:?}"
    );
}

/// Waits until a call succeeds (the client may be reconnecting), with a deadline.
pub fn until_ok<T>(within: Duration, mut f: impl FnMut() -> Result<T, ZkError>) -> T {
    let deadline = Instant::now() + within;
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) if e.is_retryable() || e == ZkError::SessionExpired => {
                assert!(Instant::now() < deadline, "still failing: {e}");
                // Retry pacing for a client that is reconnecting on its own; not synchronisation.
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("call failed: {e}"),
        }
    }
}

/// A fault proxy in front of the shared server and the client `connect` makes to it through
/// the proxy; `None` (the case is skipped) when no server can run here.
pub fn behind_a_proxy<C>(connect: impl FnOnce(&str) -> C) -> Option<(FaultProxy, C)> {
    let server = shared_server()?;
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = connect(&proxy.connect_string());
    Some((proxy, client))
}

/// A port nothing listens on (bound, then released).
pub fn dead_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
