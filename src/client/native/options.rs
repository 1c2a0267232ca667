//! [`NativeOptions`] (what a client is told) and the connect string (hosts and chroot).

use std::time::Duration;

use crate::client::acl::AclProvider;
use crate::error::Result;

/// ZooKeeper's default packet limit (`jute.maxbuffer`): frames this long or longer are refused.
pub const DEFAULT_PACKET_LIMIT: usize = 0xfffff;

/// Options for [`NativeClient::connect_with`](super::NativeClient::connect_with).
///
/// ```
/// use std::time::Duration;
/// use zk_locks::client::native::NativeOptions;
/// let options = NativeOptions::new("127.0.0.1:2181,127.0.0.1:2182/app")
///     .session_timeout(Duration::from_secs(6))
///     .digest_auth("app", "secret")
///     .acl_provider(zk_locks::client::acl::AclProvider::creator_all());
/// assert_eq!(options.effective_call_timeout(), Duration::from_secs(6));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct NativeOptions {
    /// Comma-separated `host:port` list (port 2181 when omitted), optional `/chroot` suffix.
    pub(crate) connect_string: String,
    /// Requested session timeout (default 10 s); the server clamps it to `[2, 20] × tickTime`.
    pub(crate) session_timeout: Duration,
    /// How long [`NativeClient::connect_with`](super::NativeClient::connect_with) waits for the first session (default: the
    /// session timeout).
    pub(crate) connect_timeout: Option<Duration>,
    /// The longest a call may block, waiting for a connection and then for its reply, before
    /// it fails with [`ZkError::OperationTimeout`](crate::ZkError::OperationTimeout) or [`ZkError::ConnectionLoss`](crate::ZkError::ConnectionLoss) (default: the
    /// session timeout).
    pub(crate) call_timeout: Option<Duration>,
    /// Frames at or over this many bytes break the connection (default
    /// [`DEFAULT_PACKET_LIMIT`], the server's own default).
    pub(crate) packet_limit: usize,
    /// `(scheme, credentials)` pairs sent after every connect.
    pub(crate) auth: Vec<(String, Vec<u8>)>,
    /// The ACL of every node the client creates (default [`AclProvider::open`]).
    pub(crate) acl: AclProvider,
    /// TLS on every connection (feature `tls`); `None`: plain TCP.
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<super::TlsOptions>,
    /// The observer every lock recipe made on this client reports to (set with
    /// [`NativeOptions::lock_observer()`]; default: none).
    pub(crate) lock_observer: crate::primitives::observer::ObserverSlot,
    /// The ensemble's `tickTime` as the operator configured it, if stated: the session proof
    /// waits for half of it between the syncs that prove a renewal (docs/lock-loss.md).
    pub(crate) ensemble_tick: Option<Duration>,
}

impl std::fmt::Debug for NativeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut f = f.debug_struct("NativeOptions");
        f.field("connect_string", &self.connect_string)
            .field("session_timeout", &self.session_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("call_timeout", &self.call_timeout)
            .field("packet_limit", &self.packet_limit)
            .field(
                "auth_schemes",
                &self.auth.iter().map(|a| &a.0).collect::<Vec<_>>(),
            )
            .field("acl", &self.acl)
            .field("lock_observer", &self.lock_observer)
            .field("ensemble_tick", &self.ensemble_tick);
        #[cfg(feature = "tls")]
        f.field("tls", &self.tls);
        f.finish()
    }
}

impl NativeOptions {
    /// Options with the defaults for `connect_string`.
    pub fn new(connect_string: impl Into<String>) -> NativeOptions {
        NativeOptions {
            connect_string: connect_string.into(),
            session_timeout: Duration::from_secs(10),
            connect_timeout: None,
            call_timeout: None,
            packet_limit: DEFAULT_PACKET_LIMIT,
            auth: Vec::new(),
            acl: AclProvider::open(),
            #[cfg(feature = "tls")]
            tls: None,
            lock_observer: crate::primitives::observer::ObserverSlot::default(),
            ensemble_tick: None,
        }
    }

    /// Sets the observer every lock recipe made on this client reports its events to (a
    /// recipe's own `with_observer` replaces it for that recipe).
    pub fn lock_observer(
        mut self,
        observer: std::sync::Arc<dyn crate::primitives::observer::LockObserver>,
    ) -> NativeOptions {
        self.lock_observer = crate::primitives::observer::ObserverSlot(Some(observer));
        self
    }

    /// States the ensemble's `tickTime` (its `zoo.cfg` setting; with observers behind a
    /// follower's `observerMasterPort`, twice it). The session proof that keeps a holder
    /// `Held` counts on the leader renewing the session within half a tick of a request:
    /// stated, the proof waits exactly that long between the syncs that prove a renewal, under
    /// any session bounds the servers are given. Unstated, it assumes ZooKeeper's default
    /// bounds (a session is at least two ticks, so half a tick is at most `T/4`); see
    /// docs/lock-loss.md for what that costs when it is not true. A tick so long that half of
    /// it is `T/2` or more proves nothing: holders turn `Suspect` and are stopped by
    /// [`Session::safe_until`](crate::session::Session::safe_until).
    pub fn ensemble_tick_time(mut self, tick: Duration) -> NativeOptions {
        self.ensemble_tick = Some(tick);
        self
    }

    /// Sets the requested session timeout.
    pub fn session_timeout(mut self, timeout: Duration) -> NativeOptions {
        self.session_timeout = timeout;
        self
    }

    /// Sets the connect timeout.
    pub fn connect_timeout(mut self, timeout: Duration) -> NativeOptions {
        self.connect_timeout = Some(timeout);
        self
    }

    /// Sets the per-call timeout.
    pub fn call_timeout(mut self, timeout: Duration) -> NativeOptions {
        self.call_timeout = Some(timeout);
        self
    }

    /// Adds `digest` credentials (`user:password`), sent after every connect.
    pub fn digest_auth(mut self, user: &str, password: &str) -> NativeOptions {
        self.auth
            .push(("digest".into(), format!("{user}:{password}").into_bytes()));
        self
    }

    /// Adds credentials of any scheme, sent after every connect.
    pub fn auth(mut self, scheme: &str, credentials: &[u8]) -> NativeOptions {
        self.auth.push((scheme.into(), credentials.to_vec()));
        self
    }

    /// Sets the ACL provider applied to every node the client creates (lock directories,
    /// lock nodes, the chroot). An ACL that would not grant this client `READ`, `CREATE` and
    /// `DELETE` is refused with [`ZkError::InvalidAcl`](crate::ZkError::InvalidAcl) before
    /// anything is sent.
    pub fn acl_provider(mut self, provider: AclProvider) -> NativeOptions {
        self.acl = provider;
        self
    }

    /// Connects with TLS (feature `tls`): the connect string names the servers'
    /// `secureClientPort`s.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls(mut self, tls: super::TlsOptions) -> NativeOptions {
        self.tls = Some(tls);
        self
    }

    /// The largest frame taken (default [`DEFAULT_PACKET_LIMIT`], the server's own
    /// `jute.maxbuffer`); set it to the servers' value when they raise theirs. A reply of
    /// `bytes` or more (the listing of a directory with too many children) is read through
    /// and discarded, and its request fails with
    /// [`ZkError::ReplyTooLarge`](crate::ZkError::ReplyTooLarge); the connection
    /// stays. Any other frame that large breaks the connection.
    pub fn packet_limit(mut self, bytes: usize) -> NativeOptions {
        self.packet_limit = bytes;
        self
    }

    /// The call timeout in effect.
    pub fn effective_call_timeout(&self) -> Duration {
        self.call_timeout.unwrap_or(self.session_timeout)
    }
}

/// Hosts (shuffled) and the chroot of a connect string.
pub(super) fn parse_connect_string(connect_string: &str) -> Result<(Vec<String>, Option<String>)> {
    let (mut out, chroot) = crate::client::connect_string::parse(connect_string)?;
    // So that clients spread over the ensemble.
    fastrand::shuffle(&mut out);
    Ok((out, chroot))
}
