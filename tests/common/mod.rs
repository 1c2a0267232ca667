//! Test harness shared by the lock suites: one test body runs against the in-memory ensemble
//! and against a real ZooKeeper server, through the `Backend` trait.
#![allow(dead_code, unused_macros)]

/// One `#[test]` per case and backend: `suite!([case, ...])` runs each
/// `fn case(b: &dyn Backend)` of the test file as `memory::case` (in-memory ensemble),
/// `real::case` (a real server through the `zookeeper`-crate backend) and `native::case` (a
/// real server through our own client); the real-server ones are skipped when no server can
/// run here, a failure under `ZK_LOCKS_REQUIRE_SERVER=1`. `suite!(tls [case, ...])` adds
/// `native_tls::case` (feature `tls`): our own client over TLS to a TLS server's
/// `secureClientPort`, with the same faults (the proxy forwards TLS bytes as they come).
macro_rules! suite {
    (tls [$($case:ident),* $(,)?]) => {
        suite!([$($case),*]);
        #[cfg(feature = "tls")]
        mod native_tls {
            $(
                #[test]
                fn $case() {
                    if let Some(b) = crate::common::Real::native_tls() {
                        super::$case(&b);
                    }
                }
            )*
        }
    };
    ([$($case:ident),* $(,)?]) => {
        mod memory {
            $(
                #[test]
                fn $case() {
                    super::$case(&crate::common::Memory::new());
                }
            )*
        }
        mod real {
            $(
                #[test]
                fn $case() {
                    if let Some(b) = crate::common::Real::new() {
                        super::$case(&b);
                    }
                }
            )*
        }
        mod native {
            $(
                #[test]
                fn $case() {
                    if let Some(b) = crate::common::Real::native() {
                        super::$case(&b);
                    }
                }
            )*
        }
    };
}

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_locks::client::memory::{MemoryClient, MemoryEnsemble};
use zk_locks::{ConnectionState, SharedClient, ZkClient};

/// Faults a test can cause on one client's session.
pub trait Faults: Send + Sync {
    /// The server expires the session; returns once the client has reported `Lost` and is
    /// connected again on a new session.
    fn expire(&self);
    /// A connection blip: the link drops and comes back with the same session (the
    /// `zookeeper` crate loses every watch; our own client restores them); returns once
    /// reconnected.
    fn blip(&self);
}

/// A client plus the faults that can be injected into it.
pub struct TestClient {
    pub client: SharedClient,
    pub faults: Arc<dyn Faults>,
}

/// Where a test runs.
pub trait Backend: Sync {
    /// A new client with its own session.
    fn connect(&self) -> TestClient;
    /// A fresh path no other test uses.
    fn root(&self) -> String;
    /// Watches registered on the server on paths under `prefix`, all sessions (a real server is
    /// shared by tests running in parallel, so counts are taken per test path).
    fn watches_under(&self, prefix: &str) -> usize;
    /// A deadline generous enough for this backend.
    fn patience(&self) -> Duration;
}

static NEXT_ROOT: AtomicU64 = AtomicU64::new(0);

/// A unique path for one test.
pub fn unique_root(prefix: &str) -> String {
    format!(
        "/{prefix}-{}-{}",
        std::process::id(),
        NEXT_ROOT.fetch_add(1, Ordering::SeqCst)
    )
}

/// The in-memory ensemble.
pub struct Memory {
    pub ensemble: MemoryEnsemble,
}

impl Memory {
    pub fn new() -> Memory {
        Memory {
            ensemble: MemoryEnsemble::new(),
        }
    }

    pub fn connect_memory(&self) -> Arc<MemoryClient> {
        self.ensemble.connect()
    }
}

struct MemoryFaults(Arc<MemoryClient>);

impl Faults for MemoryFaults {
    fn expire(&self) {
        self.0.expire();
        wait_connected(self.0.as_ref());
    }

    fn blip(&self) {
        self.0.suspend();
        self.0.resume();
        wait_connected(self.0.as_ref());
    }
}

impl Backend for Memory {
    fn connect(&self) -> TestClient {
        let c = self.ensemble.connect();
        TestClient {
            client: c.clone(),
            faults: Arc::new(MemoryFaults(c)),
        }
    }

    fn root(&self) -> String {
        unique_root("mem")
    }

    fn watches_under(&self, _prefix: &str) -> usize {
        self.ensemble.watch_count() // one ensemble per test
    }

    fn patience(&self) -> Duration {
        // Generous: a loaded 2-core machine can stall a thread for seconds.
        Duration::from_secs(30)
    }
}

/// Blocks until the client is connected (any state that serves requests), or panics after 30 s.
pub fn wait_connected(c: &dyn ZkClient) {
    let s = c
        .session()
        .wait_until_connected(Some(Instant::now() + Duration::from_secs(30)));
    assert!(s.state.is_connected(), "client did not reconnect: {s:?}");
}

/// Polls `cond` until it holds (a state the test cannot be notified of, such as another
/// process's node appearing); panics with `what` after `patience`.
pub fn eventually(patience: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + patience;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Children of `path` through `client` (empty when missing).
pub fn children(client: &dyn ZkClient, path: &str) -> Vec<String> {
    client.get_children(path, None).unwrap_or_default()
}

/// True when the state is Lost.
pub fn is_lost(state: ConnectionState) -> bool {
    state == ConnectionState::Lost
}

/// A real ZooKeeper 3.8 server (shared by the tests of one process); each client reaches it
/// through its own `FaultProxy`, so faults hit one session only.
pub struct Real {
    server: &'static zk_locks::testing::TestingServer,
    native: bool,
    tls: bool,
}

impl Real {
    /// Clients on the `zookeeper`-crate backend. `None` (the test is skipped) when no server
    /// can run here, unless `ZK_LOCKS_REQUIRE_SERVER=1`, which makes that a failure.
    pub fn new() -> Option<Real> {
        zk_locks::testing::shared_server().map(|server| Real {
            server,
            native: false,
            tls: false,
        })
    }

    /// Clients on our own client (`client::native`); `None` as for [`Real::new`].
    pub fn native() -> Option<Real> {
        zk_locks::testing::shared_server().map(|server| Real {
            server,
            native: true,
            tls: false,
        })
    }

    /// Our own client over TLS, to the secure port of a TLS server (one per test process);
    /// `None` as for [`Real::new`].
    #[cfg(feature = "tls")]
    pub fn native_tls() -> Option<Real> {
        zk_locks::testing::shared_tls_server().map(|server| Real {
            server,
            native: true,
            tls: true,
        })
    }
}

/// Session timeout of the real-server test clients: short enough for quick expiry tests, long
/// enough that a loaded 2-core machine does not expire sessions by accident.
pub const REAL_SESSION_TIMEOUT: Duration = Duration::from_secs(6);

struct RealFaults {
    proxy: zk_locks::testing::FaultProxy,
    client: SharedClient,
    /// Over TLS the proxy cannot read the session off the wire: the session is taken from
    /// the client and closed through this plain port of the same server.
    expire_via: Option<(
        std::net::SocketAddr,
        Arc<zk_locks::client::native::NativeClient>,
    )>,
}

impl Faults for RealFaults {
    fn expire(&self) {
        let before = self.client.session().snapshot();
        match &self.expire_via {
            None => self.proxy.expire_session().map(drop),
            Some((via, native)) => {
                let (id, password) = native.session_credentials().expect("a session");
                self.proxy
                    .expire_session_with(*via, id, &password, native.negotiated_timeout())
                    .map(drop)
            }
        }
        .expect("targeted expiry");
        let deadline = Instant::now() + REAL_SESSION_TIMEOUT * 3;
        loop {
            let s = self.client.session().snapshot();
            if s.losses > before.losses && s.state.is_connected() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "client did not notice its expiry: {s:?}"
            );
            self.client
                .session()
                .wait_for_change(s.epoch, Some(deadline));
        }
    }

    fn blip(&self) {
        let before = self.client.session().snapshot();
        self.proxy.cut();
        let deadline = Instant::now() + REAL_SESSION_TIMEOUT * 3;
        loop {
            let s = self.client.session().snapshot();
            if s.epoch > before.epoch && s.state.is_connected() {
                return;
            }
            assert!(Instant::now() < deadline, "client did not reconnect: {s:?}");
            self.client
                .session()
                .wait_for_change(s.epoch, Some(deadline));
        }
    }
}

impl Backend for Real {
    fn connect(&self) -> TestClient {
        if self.tls {
            return self.connect_tls();
        }
        let proxy = zk_locks::testing::FaultProxy::start(self.server.addr()).expect("proxy");
        let client: SharedClient = if self.native {
            zk_locks::client::native::NativeClient::connect(
                &proxy.connect_string(),
                REAL_SESSION_TIMEOUT,
            )
            .expect("connect to the test server")
        } else {
            zk_locks::client::zookeeper::ZookeeperClient::connect(
                &proxy.connect_string(),
                REAL_SESSION_TIMEOUT,
            )
            .expect("connect to the test server")
        };
        TestClient {
            client: client.clone(),
            faults: Arc::new(RealFaults {
                proxy,
                client,
                expire_via: None,
            }),
        }
    }

    fn root(&self) -> String {
        unique_root(match (self.native, self.tls) {
            (_, true) => "native-tls",
            (true, false) => "native",
            (false, false) => "real",
        })
    }

    fn watches_under(&self, prefix: &str) -> usize {
        let wchp = self.server.four_letter("wchp").unwrap_or_default();
        zk_locks::testing::watches::watches_under(&wchp, prefix)
    }

    fn patience(&self) -> Duration {
        Duration::from_secs(30)
    }
}

impl Real {
    #[cfg(not(feature = "tls"))]
    fn connect_tls(&self) -> TestClient {
        unreachable!("Real::native_tls needs the `tls` feature")
    }

    /// A native client over TLS through its own proxy to the server's secure port.
    #[cfg(feature = "tls")]
    fn connect_tls(&self) -> TestClient {
        use zk_locks::client::native::{NativeClient, NativeOptions, TlsOptions};
        let secure =
            std::net::SocketAddr::from(([127, 0, 0, 1], self.server.secure_port().unwrap()));
        let proxy = zk_locks::testing::FaultProxy::start(secure).expect("proxy");
        let files = self.server.tls_files().expect("a TLS server");
        let options = NativeOptions::new(proxy.connect_string())
            .session_timeout(REAL_SESSION_TIMEOUT)
            .tls(TlsOptions::from_ca_file(&files.ca).expect("the test CA"));
        let native = NativeClient::connect_with(options).expect("connect over TLS");
        let client: SharedClient = native.clone();
        TestClient {
            client: client.clone(),
            faults: Arc::new(RealFaults {
                proxy,
                client,
                expire_via: Some((self.server.addr(), native)),
            }),
        }
    }
}
