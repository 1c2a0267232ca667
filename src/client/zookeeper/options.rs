//! Options and the connect string.

use std::time::Duration;

use crate::error::Result;

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZkOptions {
    /// Comma-separated `host:port` list (port 2181 when omitted), optional `/chroot` suffix.
    pub connect_string: String,
    /// Requested session timeout (default 10 s). Also the watchdog's `Lost` deadline.
    pub session_timeout: Duration,
    /// How long [`ZookeeperClient::connect_with`](super::ZookeeperClient::connect_with) waits for the first session (default: the
    /// session timeout).
    pub connect_timeout: Option<Duration>,
    /// The longest any single call may block before it fails with
    /// [`ZkError::OperationTimeout`](crate::ZkError::OperationTimeout) (default: the session timeout).
    pub call_timeout: Option<Duration>,
}

impl ZkOptions {
    /// Options with the defaults for `connect_string`.
    pub fn new(connect_string: impl Into<String>) -> ZkOptions {
        ZkOptions {
            connect_string: connect_string.into(),
            session_timeout: Duration::from_secs(10),
            connect_timeout: None,
            call_timeout: None,
        }
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

/// A connect string taken apart: what the crate gets (resolved hosts, no chroot) and the chroot
/// this module applies itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    pub(super) crate_hosts: String,
    pub(super) chroot: Option<String>,
}

pub(super) fn parse_connect_string(connect_string: &str) -> Result<Target> {
    let (hosts, chroot) = crate::client::connect_string::parse(connect_string)?;
    // Parsing resolved every host once already; the crate wants the addresses.
    let resolved = hosts
        .iter()
        .map(|host| crate::client::connect_string::resolve(connect_string, host))
        .map(|addr| addr.map(|a| a.to_string()))
        .collect::<Result<Vec<_>>>()?;
    Ok(Target {
        crate_hosts: resolved.join(","),
        chroot,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn parses_connect_strings() {
        let t = parse_connect_string("127.0.0.1:2181,127.0.0.1:2182/app/x").unwrap();
        assert_eq!(t.crate_hosts, "127.0.0.1:2181,127.0.0.1:2182");
        assert_eq!(t.chroot.as_deref(), Some("/app/x"));
        let t = parse_connect_string("127.0.0.1/").unwrap();
        assert_eq!((t.crate_hosts.as_str(), t.chroot), ("127.0.0.1:2181", None));
        assert!(matches!(
            parse_connect_string(""),
            Err(Error::Connect { .. })
        ));
        assert!(matches!(
            parse_connect_string("a:1,,b:2"),
            Err(Error::Connect { .. })
        ));
        assert!(matches!(
            parse_connect_string("no-such-host.invalid:2181"),
            Err(Error::Connect { .. })
        ));
        assert!(matches!(
            parse_connect_string("127.0.0.1:2181/app/"),
            Err(Error::InvalidArgument { .. })
        ));
        assert!(matches!(
            parse_connect_string("127.0.0.1:2181/a//b"),
            Err(Error::InvalidArgument { .. })
        ));
    }
}
