//! The two real backends as one test parameter (the harness's [`ClientKind`]): how each
//! connects here, the typed client it gives, and the few expectations that differ between
//! them, written down where they differ. A case may also take the [`Link`] (plain TCP, or
//! TLS for our own client) as part of its [`On`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::client::zookeeper::{ZkOptions, ZookeeperClient};
use zk_locks::session::{ConnectionState, SessionSnapshot};
pub use zk_locks::testing::harness::{unique_root, ClientKind};
use zk_locks::testing::{shared_server, FaultProxy, TestingServer};
use zk_locks::{Error, SharedClient, ZkClient, ZkError};

/// The session timeout the tests ask for.
pub const SESSION: Duration = Duration::from_secs(2);

/// How a case's client reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// Plain TCP to the shared test server.
    Tcp,
    /// TLS to the secure port of the shared TLS test server (our own client only: the crate
    /// backend has no TLS). Its plain port serves the case's helper clients.
    #[cfg(feature = "tls")]
    Tls,
}

impl Link {
    /// The shared server of this link; `None` (the case is skipped) when no server can run
    /// here.
    pub fn server(self) -> Option<&'static TestingServer> {
        match self {
            Link::Tcp => shared_server(),
            #[cfg(feature = "tls")]
            Link::Tls => zk_locks::testing::shared_tls_server(),
        }
    }

    /// Where on `server` a client of this link (or a proxy in front of it) connects.
    pub fn addr(self, server: &TestingServer) -> SocketAddr {
        match self {
            Link::Tcp => server.addr(),
            #[cfg(feature = "tls")]
            Link::Tls => SocketAddr::from(([127, 0, 0, 1], server.secure_port().expect("TLS"))),
        }
    }
}

/// What a case runs on: a backend and its link. A [`ClientKind`] alone is plain TCP; a
/// [`Link`] alone is our own client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct On {
    pub kind: ClientKind,
    pub link: Link,
}

impl From<ClientKind> for On {
    fn from(kind: ClientKind) -> On {
        On {
            kind,
            link: Link::Tcp,
        }
    }
}

impl From<Link> for On {
    fn from(link: Link) -> On {
        On {
            kind: ClientKind::Native,
            link,
        }
    }
}

/// Options for one connect, for either backend.
#[derive(Debug, Clone)]
pub struct Connect {
    pub hosts: String,
    pub session_timeout: Duration,
    pub connect_timeout: Option<Duration>,
    pub call_timeout: Option<Duration>,
    pub link: Link,
}

impl Connect {
    /// `hosts` with the tests' session timeout, over plain TCP.
    pub fn new(hosts: impl Into<String>) -> Connect {
        Connect {
            hosts: hosts.into(),
            session_timeout: SESSION,
            connect_timeout: None,
            call_timeout: None,
            link: Link::Tcp,
        }
    }

    /// Over `link` (`hosts` must then lead to that link's port).
    pub fn over(mut self, link: Link) -> Connect {
        self.link = link;
        self
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
    connect_on(kind.into(), hosts)
}

/// Like [`connect`], over the link of `on`.
pub fn connect_on(on: On, hosts: &str) -> Client {
    let options = match on.kind {
        ClientKind::Crate => Connect::new(hosts).connect_timeout(SESSION * 5),
        ClientKind::Native => Connect::new(hosts),
    };
    try_connect(on.kind, options.over(on.link)).expect("connect")
}

/// Connects a `kind` client with `options`.
pub fn try_connect(kind: ClientKind, options: Connect) -> Result<Client, Error> {
    match kind {
        ClientKind::Crate => {
            assert_eq!(options.link, Link::Tcp, "the crate backend has no TLS");
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
            #[cfg(feature = "tls")]
            if options.link == Link::Tls {
                o = o.tls(tls_options());
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

/// Verifies the shared TLS server's certificate.
#[cfg(feature = "tls")]
fn tls_options() -> zk_locks::client::native::TlsOptions {
    let server = zk_locks::testing::shared_tls_server().expect("the shared TLS server");
    let files = server.tls_files().expect("a TLS server has its files");
    zk_locks::client::native::TlsOptions::from_ca_file(files.ca).expect("the CA file")
}

/// Our own client on `hosts`, with the tests' session timeout.
pub fn native(hosts: &str) -> Arc<NativeClient> {
    NativeClient::connect(hosts, SESSION).expect("connect")
}

/// Our own client with `options`, whose hosts lead to a port of `link`.
pub fn native_with(link: Link, options: NativeOptions) -> Arc<NativeClient> {
    #[cfg(feature = "tls")]
    let options = match link {
        Link::Tls => options.tls(tls_options()),
        Link::Tcp => options,
    };
    #[cfg(not(feature = "tls"))]
    let Link::Tcp = link;
    NativeClient::connect_with(options).expect("connect")
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

/// Lets the client age by `by` of quiet connected time (time is the subject). On a loaded
/// machine a reply can come late enough for a backend's watchdog to report `Suspended` while
/// the client idles (the crate backend's, at half a session timeout): that span does not
/// count, and a new one starts once the link is back, three at most. Losing the session
/// meanwhile fails: the test would no longer be about an aged session.
pub fn age(client: &dyn ZkClient, by: Duration) {
    let start = client.session().snapshot();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let quiet = client
            .session()
            .wait_until_connected(Some(Instant::now() + by * 5));
        let after = client
            .session()
            .wait_for_change(quiet.epoch, Some(Instant::now() + by));
        assert_eq!(
            after.losses, start.losses,
            "the session was lost while idle"
        );
        if after.epoch == quiet.epoch && after.state.is_connected() {
            return;
        }
        seen.push(after.state);
    }
    panic!("no quiet span of {by:?} in three tries: {seen:?}");
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
    behind_a_proxy_over(Link::Tcp, connect)
}

/// Like [`behind_a_proxy`], the proxy in front of `link`'s port of its shared server.
pub fn behind_a_proxy_over<C>(
    link: Link,
    connect: impl FnOnce(&str) -> C,
) -> Option<(FaultProxy, C)> {
    let server = link.server()?;
    let proxy = FaultProxy::start(link.addr(server)).unwrap();
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
