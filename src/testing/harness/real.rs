//! Real servers: [`ClientKind`] (which client a session uses) and [`Real`], a [`Backend`]
//! whose sessions each reach the server through their own fault proxy (the shared test
//! server), or straight (an ensemble given by its connect string).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::admin::{first_server, four_letter};
use super::backend::{unique_root, Backend, Faults, TestClient};
use super::wait::wait_for_session;
use super::watches;
use crate::client::native::{NativeClient, NativeOptions};
#[cfg(feature = "zookeeper-crate")]
use crate::client::zookeeper::{ZkOptions, ZookeeperClient};
use crate::error::Result;
use crate::testing::{shared_server, FaultProxy};
use crate::SharedClient;

/// Session timeout of the sessions on the shared test server: short enough for quick expiry
/// tests, long enough that a loaded 2-core machine does not expire sessions by accident.
pub const REAL_SESSION_TIMEOUT: Duration = Duration::from_secs(6);

/// Which client a session on a real server uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    /// Our own client (`client::native`).
    Native,
    /// The `zookeeper`-crate backend (`client::zookeeper`, feature `zookeeper-crate`).
    #[cfg(feature = "zookeeper-crate")]
    Crate,
}

impl ClientKind {
    /// A client of this kind to `hosts` (a connect string), with the given session timeout
    /// and the client's default connect timeout.
    pub fn connect(self, hosts: &str, session_timeout: Duration) -> Result<SharedClient> {
        Ok(match self {
            ClientKind::Native => NativeClient::connect(hosts, session_timeout)?,
            #[cfg(feature = "zookeeper-crate")]
            ClientKind::Crate => ZookeeperClient::connect(hosts, session_timeout)?,
        })
    }

    /// Like [`ClientKind::connect`], waiting up to `connect_timeout` for the first connection.
    pub fn connect_within(
        self,
        hosts: &str,
        session_timeout: Duration,
        connect_timeout: Duration,
    ) -> Result<SharedClient> {
        Ok(match self {
            ClientKind::Native => NativeClient::connect_with(
                NativeOptions::new(hosts)
                    .session_timeout(session_timeout)
                    .connect_timeout(connect_timeout),
            )?,
            #[cfg(feature = "zookeeper-crate")]
            ClientKind::Crate => ZookeeperClient::connect_with(
                ZkOptions::new(hosts)
                    .session_timeout(session_timeout)
                    .connect_timeout(connect_timeout),
            )?,
        })
    }

    /// The kind's name in roots and logs: `native` or `real` (the crate backend's name in
    /// the test suites).
    pub fn name(self) -> &'static str {
        match self {
            ClientKind::Native => "native",
            #[cfg(feature = "zookeeper-crate")]
            ClientKind::Crate => "real",
        }
    }
}

/// A real ZooKeeper as a [`Backend`].
pub struct Real {
    hosts: String,
    kind: ClientKind,
    session_timeout: Duration,
    /// Where each session's own fault proxy forwards to; `None`: sessions connect straight.
    proxied: Option<SocketAddr>,
    /// Sessions speak TLS to the server's secure port (our own client only).
    tls: Option<TlsTarget>,
}

/// What a TLS session needs besides the secure port it is proxied to.
#[derive(Clone)]
struct TlsTarget {
    /// The CA the server's certificate is checked against.
    #[cfg(feature = "tls")]
    ca: std::path::PathBuf,
    /// The same server's plain port, for four-letter words, and because the proxy cannot read
    /// a TLS session off the wire: a targeted expiry closes the session (taken from the
    /// client) through this port.
    plain: SocketAddr,
}

impl Real {
    /// The shared test server (`testing::shared_server`) through the `zookeeper`-crate
    /// backend. `None` (the test is skipped) when no server can run here, unless
    /// `ZK_LOCKS_REQUIRE_SERVER=1`, which makes that a failure. Feature `zookeeper-crate`.
    #[cfg(feature = "zookeeper-crate")]
    pub fn new() -> Option<Real> {
        Real::shared(ClientKind::Crate)
    }

    /// The shared test server through our own client (`client::native`); `None` as for
    /// [`Real::new`].
    pub fn native() -> Option<Real> {
        Real::shared(ClientKind::Native)
    }

    /// The shared test server through `kind`: every session reaches it through its own
    /// [`FaultProxy`], so [`Faults`] hit that session only; sessions time out after
    /// [`REAL_SESSION_TIMEOUT`]. `None` as for [`Real::new`].
    pub fn shared(kind: ClientKind) -> Option<Real> {
        shared_server().map(|server| Real {
            hosts: server.connect_string(),
            kind,
            session_timeout: REAL_SESSION_TIMEOUT,
            proxied: Some(server.addr()),
            tls: None,
        })
    }

    /// Our own client over TLS to the secure port of the shared TLS test server
    /// (`testing::shared_tls_server`), each session through its own [`FaultProxy`] (which
    /// forwards the TLS bytes as they come); `None` as for [`Real::new`].
    #[cfg(feature = "tls")]
    pub fn native_tls() -> Option<Real> {
        crate::testing::shared_tls_server().map(|server| {
            let secure = SocketAddr::from(([127, 0, 0, 1], server.secure_port().expect("TLS")));
            let files = server.tls_files().expect("a TLS server has its files");
            Real {
                hosts: secure.to_string(),
                kind: ClientKind::Native,
                session_timeout: REAL_SESSION_TIMEOUT,
                proxied: Some(secure),
                tls: Some(TlsTarget {
                    ca: files.ca,
                    plain: server.addr(),
                }),
            }
        })
    }

    /// The ensemble at `hosts` (a connect string): sessions connect straight, so there is no
    /// fault to aim (their [`Faults`] panic); watches are counted on the first server.
    pub fn at(hosts: &str, kind: ClientKind, session_timeout: Duration) -> Real {
        Real {
            hosts: hosts.to_string(),
            kind,
            session_timeout,
            proxied: None,
            tls: None,
        }
    }

    /// The client kind of the sessions.
    pub fn kind(&self) -> ClientKind {
        self.kind
    }

    /// The session timeout the sessions ask for.
    pub fn session_timeout(&self) -> Duration {
        self.session_timeout
    }
}

impl Backend for Real {
    fn try_connect(&self) -> Result<TestClient> {
        let Some(server) = self.proxied else {
            let client = self.kind.connect(&self.hosts, self.session_timeout)?;
            return Ok(TestClient::without_faults(client));
        };
        let proxy = FaultProxy::start(server)?;
        let (client, expire_via) = match &self.tls {
            None => (
                self.kind
                    .connect(&proxy.connect_string(), self.session_timeout)?,
                None,
            ),
            Some(tls) => self.connect_tls(&proxy, tls)?,
        };
        let faults = ProxyFaults {
            proxy,
            client: client.clone(),
            patience: self.session_timeout * 3,
            expire_via,
        };
        Ok(TestClient::real(client, Arc::new(faults)))
    }

    fn root(&self) -> String {
        match self.tls {
            Some(_) => unique_root("native-tls"),
            None => unique_root(self.kind.name()),
        }
    }

    fn watches_under(&self, root: &str) -> usize {
        let server = match (&self.tls, self.proxied) {
            // Four-letter words are plain text: ask a TLS server on its plain port.
            (Some(tls), _) => tls.plain,
            (None, Some(server)) => server,
            (None, None) => match first_server(&self.hosts) {
                Ok((server, _)) => server,
                Err(_) => return 0,
            },
        };
        let wchp = four_letter(server, "wchp").unwrap_or_default();
        watches::watches_under(&wchp, root)
    }

    fn describe(&self) -> String {
        format!("the ZooKeeper ensemble at {}", self.hosts)
    }

    fn connect_string(&self) -> Option<String> {
        Some(self.hosts.clone())
    }
}

impl Real {
    /// Our own client over TLS through `proxy`, and what a targeted expiry of it needs.
    #[cfg(feature = "tls")]
    fn connect_tls(
        &self,
        proxy: &FaultProxy,
        tls: &TlsTarget,
    ) -> Result<(SharedClient, ExpireVia)> {
        use crate::client::native::TlsOptions;
        let options = NativeOptions::new(proxy.connect_string())
            .session_timeout(self.session_timeout)
            .tls(TlsOptions::from_ca_file(&tls.ca)?);
        let native = NativeClient::connect_with(options)?;
        Ok((native.clone(), Some((tls.plain, native))))
    }

    #[cfg(not(feature = "tls"))]
    fn connect_tls(&self, _: &FaultProxy, _: &TlsTarget) -> Result<(SharedClient, ExpireVia)> {
        unreachable!("a TLS backend is only made with the `tls` feature")
    }
}

/// Over TLS the proxy cannot read the session off the wire: the session is taken from the
/// client and closed through this plain port of the same server.
type ExpireVia = Option<(SocketAddr, Arc<NativeClient>)>;

/// Faults through the session's own proxy.
struct ProxyFaults {
    /// Declared before `proxy`, so dropped first: the session is closed (when this is its last
    /// handle) while its proxy still forwards, not sent into a proxy already gone, where a
    /// `zookeeper`-crate client's close waits out its call timeout.
    client: SharedClient,
    proxy: FaultProxy,
    /// How long the client may take to notice a fault and serve again.
    patience: Duration,
    expire_via: ExpireVia,
}

impl ProxyFaults {
    /// Waits until `done(session now)` holds, or panics with `what` after the patience.
    fn wait(&self, what: &str, done: impl Fn(&crate::SessionSnapshot) -> bool) {
        wait_for_session(self.client.as_ref(), self.patience, what, done);
    }
}

impl Faults for ProxyFaults {
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
        self.wait("client did not notice its expiry", |s| {
            s.losses > before.losses && s.state.is_connected()
        });
    }

    fn blip(&self) {
        let before = self.client.session().snapshot();
        self.proxy.cut();
        self.wait("client did not reconnect", |s| {
            s.epoch > before.epoch && s.state.is_connected()
        });
    }
}
