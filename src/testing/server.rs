//! [`TestingServer`]: one standalone ZooKeeper 3.8 on a free 127.0.0.1 port (like Curator's
//! `TestingServer`).

use std::net::SocketAddr;
use std::time::Duration;

use parking_lot::Mutex;

use super::process::{free_port, lost_a_port_race, Node, NodeConfig, Timing};
use crate::error::Result;

/// How long a (re)started server may take to answer `ruok` (a JVM on a loaded 2-core box).
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// A standalone ZooKeeper server for tests: Debian's ZooKeeper 3.8 run as a plain `java`
/// process (no service, no root) on a free loopback port with a temp data dir, `tickTime=500`
/// with ZooKeeper's own session bounds (2 to 20 ticks: sessions from 1 s to 10 s) unless
/// [`TestingServer::builder`] states others, every four-letter word enabled, no admin server,
/// no fsync.
///
/// The server logs to `zookeeper.log` in its temp dir. Dropping it kills the JVM and removes
/// the dir; the JVM also dies with the test process.
pub struct TestingServer {
    node: Mutex<Node>,
    port: u16,
    secure_port: Option<u16>,
}

impl std::fmt::Debug for TestingServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestingServer")
            .field("port", &self.port)
            .finish()
    }
}

/// How to start a [`TestingServer`]: a TLS port or not, and the session bounds. Defaults: no
/// TLS port, ZooKeeper's own session bounds (2 to 20 ticks of 500 ms: 1 s to 10 s).
///
/// ```no_run
/// use std::time::Duration;
/// use zk_locks::testing::TestingServer;
/// # fn main() -> zk_locks::Result<()> {
/// // Sessions of up to 30 s, for a test whose clients must outlive a long outage.
/// let server = TestingServer::builder()
///     .max_session_timeout(Duration::from_secs(30))
///     .start()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct ServerBuilder {
    tls: bool,
    timing: Timing,
}

impl ServerBuilder {
    /// A TLS port besides the plain one, as [`TestingServer::start_tls`].
    pub fn tls(mut self, on: bool) -> ServerBuilder {
        self.tls = on;
        self
    }

    /// `minSessionTimeout` (whole milliseconds): the shortest session the server grants.
    /// Unstated, ZooKeeper's own: two ticks (1 s).
    pub fn min_session_timeout(mut self, timeout: Duration) -> ServerBuilder {
        self.timing.min_session_timeout = Some(timeout);
        self
    }

    /// `maxSessionTimeout` (whole milliseconds): the longest session the server grants.
    /// Unstated, ZooKeeper's own: twenty ticks (10 s).
    pub fn max_session_timeout(mut self, timeout: Duration) -> ServerBuilder {
        self.timing.max_session_timeout = Some(timeout);
        self
    }

    /// Starts the server and waits until it serves (and its TLS port accepts connections).
    /// A start that lost one of its ports to another socket before the server bound it is
    /// made again on new ports (three times at most).
    ///
    /// Errors: [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a session bound
    /// of no whole millisecond or a least session above the longest;
    /// [`Error::Connect`](crate::Error::Connect) (carrying the log tail) when Java or the
    /// jars are missing or the server does not come up in time.
    pub fn start(self) -> Result<TestingServer> {
        if let Some((name, reason)) = self.timing.invalid() {
            return Err(crate::Error::InvalidArgument {
                name,
                reason: reason.into(),
            });
        }
        let mut tries = 0;
        loop {
            tries += 1;
            let secure_port = if self.tls { Some(free_port()?) } else { None };
            match TestingServer::start_once(secure_port, self.timing) {
                Err(e) if tries < 3 && lost_a_port_race(&e) => continue,
                done => return done,
            }
        }
    }
}

impl TestingServer {
    /// Starts a server and waits until it answers `ruok` with `imok` and serves requests:
    /// `TestingServer::builder().start()`.
    ///
    /// Fails with [`crate::Error::Connect`] (carrying the log tail) when Java or the jars are
    /// missing or the server does not come up in time.
    pub fn start() -> Result<TestingServer> {
        Self::builder().start()
    }

    /// A server to configure before [`ServerBuilder::start`].
    pub fn builder() -> ServerBuilder {
        ServerBuilder {
            tls: false,
            timing: Timing::default(),
        }
    }

    /// Starts a server that also listens with TLS on a second port ([`secure_port`]), with
    /// certificates made by the `openssl` command ([`tls_files`]); client certificates are
    /// wanted, not required. Waits until the TLS port accepts connections too.
    ///
    /// [`secure_port`]: TestingServer::secure_port
    /// [`tls_files`]: TestingServer::tls_files
    pub fn start_tls() -> Result<TestingServer> {
        Self::builder().tls(true).start()
    }

    fn start_once(secure_port: Option<u16>, timing: Timing) -> Result<TestingServer> {
        let port = free_port()?;
        let node = Node::create(NodeConfig {
            host: std::net::Ipv4Addr::LOCALHOST,
            netns: None,
            timing,
            client_port: port,
            quorum: None,
            secure_port,
        })?;
        let server = TestingServer {
            node: Mutex::new(node),
            port,
            secure_port,
        };
        server.restart()?;
        Ok(server)
    }

    /// The TLS port, on a server started with [`TestingServer::start_tls`].
    pub fn secure_port(&self) -> Option<u16> {
        self.secure_port
    }

    /// `127.0.0.1:<secure port>`, on a TLS server.
    pub fn secure_connect_string(&self) -> Option<String> {
        self.secure_port.map(|p| format!("127.0.0.1:{p}"))
    }

    /// The certificates, on a TLS server.
    pub fn tls_files(&self) -> Option<super::TlsFiles> {
        self.node.lock().tls.clone()
    }

    /// `127.0.0.1:<port>`.
    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The client address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Kills the server (SIGKILL) and waits for it to exit. The data dir is kept, so
    /// [`restart`](Self::restart) brings back every persistent node and unexpired session.
    pub fn stop(&self) {
        self.node.lock().kill();
    }

    /// Starts the server again (same port, same data) and waits for `imok`. A no-op wait when it
    /// already runs.
    pub fn restart(&self) -> Result<()> {
        let mut node = self.node.lock();
        node.spawn()?;
        node.wait_until("ruok", |r| r.trim() == "imok", STARTUP_TIMEOUT)?;
        // `imok` only means the process runs; `srvr` reports a mode once requests are served.
        node.wait_until("srvr", |r| r.contains("Mode: "), STARTUP_TIMEOUT)?;
        // The secure port binds after the plain one.
        match self.secure_port {
            Some(port) => node.wait_for_port(port, STARTUP_TIMEOUT),
            None => Ok(()),
        }
    }

    /// True while the server process runs.
    pub fn is_running(&self) -> bool {
        self.node.lock().is_running()
    }

    /// Sends a four-letter-word command (`ruok`, `srvr`, `cons`, `wchc`, `wchs`, `mntr`, ...)
    /// and returns the reply.
    pub fn four_letter(&self, cmd: &str) -> Result<String> {
        super::harness::four_letter(self.addr(), cmd)
    }

    /// The number of watches the server holds (all sessions), from `wchs`'s "Total watches:".
    pub fn watch_count(&self) -> Result<usize> {
        let reply = self.four_letter("wchs")?;
        Ok(super::harness::watches::total_watches(&reply))
    }

    /// The server's log so far (the last `max_bytes`), for assertions and failure messages.
    pub fn log_tail(&self, max_bytes: u64) -> String {
        super::process::log_tail(&self.node.lock().log_path(), max_bytes)
    }
}
