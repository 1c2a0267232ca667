//! Options and the connect string.

use std::time::Duration;

use crate::client::acl::AclProvider;
use crate::error::{Error, Result};

/// Options for [`ZookeeperClient::connect_with`](super::ZookeeperClient::connect_with).
///
/// ```
/// use std::time::Duration;
/// use zk_locks::client::zookeeper::ZkOptions;
/// let options = ZkOptions::new("127.0.0.1:2181/app")
///     .session_timeout(Duration::from_secs(6))
///     .connect_timeout(Duration::from_secs(3));
/// assert_eq!(options.effective_connect_timeout(), Duration::from_secs(3));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct ZkOptions {
    /// Comma-separated `host:port` list (port 2181 when omitted), optional `/chroot` suffix.
    pub(crate) connect_string: String,
    /// Requested session timeout (default 10 s). Also the watchdog's `Lost` deadline.
    pub(crate) session_timeout: Duration,
    /// How long [`ZookeeperClient::connect_with`](super::ZookeeperClient::connect_with) waits for the first session (default: the
    /// session timeout).
    pub(crate) connect_timeout: Option<Duration>,
    /// The longest any single call may block before it fails with
    /// [`ZkError::OperationTimeout`](crate::ZkError::OperationTimeout) (default: the session timeout).
    pub(crate) call_timeout: Option<Duration>,
    /// `(scheme, credentials)` pairs sent after every connect and reconnect.
    pub(crate) auth: Vec<(String, Vec<u8>)>,
    /// The ACL of every node the client creates (default [`AclProvider::open`]).
    pub(crate) acl: AclProvider,
}

impl std::fmt::Debug for ZkOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkOptions")
            .field("connect_string", &self.connect_string)
            .field("session_timeout", &self.session_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("call_timeout", &self.call_timeout)
            .field(
                "auth_schemes",
                &self.auth.iter().map(|a| &a.0).collect::<Vec<_>>(),
            )
            .field("acl", &self.acl)
            .finish()
    }
}

impl ZkOptions {
    /// Options with the defaults for `connect_string`.
    pub fn new(connect_string: impl Into<String>) -> ZkOptions {
        ZkOptions {
            connect_string: connect_string.into(),
            session_timeout: Duration::from_secs(10),
            connect_timeout: None,
            call_timeout: None,
            auth: Vec::new(),
            acl: AclProvider::open(),
        }
    }

    /// Adds `digest` credentials (`user:password`), sent after every connect and reconnect.
    pub fn digest_auth(mut self, user: &str, password: &str) -> ZkOptions {
        self.auth
            .push(("digest".into(), format!("{user}:{password}").into_bytes()));
        self
    }

    /// Adds credentials of any scheme, sent after every connect and reconnect.
    pub fn auth(mut self, scheme: &str, credentials: &[u8]) -> ZkOptions {
        self.auth.push((scheme.into(), credentials.to_vec()));
        self
    }

    /// Sets the ACL provider applied to every node the client creates (lock directories,
    /// lock nodes, the chroot). An ACL that would not grant this client `READ`, `CREATE` and
    /// `DELETE` is refused with [`ZkError::InvalidAcl`](crate::ZkError::InvalidAcl) before
    /// anything is sent.
    pub fn acl_provider(mut self, provider: AclProvider) -> ZkOptions {
        self.acl = provider;
        self
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

/// A connect string taken apart: the hosts (names, resolved for each new crate handle) and
/// the chroot this module applies itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    pub(super) hosts: Vec<String>,
    pub(super) chroot: Option<String>,
}

impl Target {
    /// What the crate gets: every address of every host that resolves now (a host that does
    /// not is skipped and logged), or why none does.
    pub(super) fn crate_hosts(&self) -> std::result::Result<String, String> {
        let mut addrs = Vec::new();
        let mut failures = Vec::new();
        for host in &self.hosts {
            match crate::client::connect_string::resolve_all(host) {
                Ok(resolved) => addrs.extend(resolved.iter().map(|a| a.to_string())),
                Err(e) => {
                    log::warn!("{e}: host skipped");
                    failures.push(e);
                }
            }
        }
        if addrs.is_empty() {
            return Err(failures.join("; "));
        }
        Ok(addrs.join(","))
    }
}

/// The target of `connect_string`; [`Error::Connect`] when it is malformed or none of its
/// hosts resolves now (the crate needs addresses to start).
pub(super) fn parse_connect_string(connect_string: &str) -> Result<Target> {
    let (hosts, chroot) = crate::client::connect_string::parse(connect_string)?;
    let target = Target { hosts, chroot };
    target.crate_hosts().map_err(|reason| Error::Connect {
        hosts: connect_string.to_string(),
        reason,
        source: None,
    })?;
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_connect_strings() {
        // The rules are `connect_string`'s; here, the shape the crate is given.
        let t = parse_connect_string("127.0.0.1:2181,127.0.0.1:2182/app/x").unwrap();
        assert_eq!(t.crate_hosts().unwrap(), "127.0.0.1:2181,127.0.0.1:2182");
        assert_eq!(t.chroot.as_deref(), Some("/app/x"));
        let t = parse_connect_string("127.0.0.1/").unwrap();
        assert_eq!(t.crate_hosts().unwrap(), "127.0.0.1:2181");
        assert_eq!(t.chroot, None);
        assert!(parse_connect_string("").is_err());
        // A host that does not resolve is skipped while another one does.
        let t = parse_connect_string("no-such-host.invalid:2181,127.0.0.1:2182").unwrap();
        assert_eq!(t.crate_hosts().unwrap(), "127.0.0.1:2182");
        assert!(matches!(
            parse_connect_string("no-such-host.invalid:2181"),
            Err(Error::Connect { .. })
        ));
    }
}
