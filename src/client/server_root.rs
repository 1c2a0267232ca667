//! [`ServerRoot`]: where a client's paths lie on the server (which ensemble, under which
//! chroot), so that a node one client made can be named on another client.

/// The ensemble a client talks to and the chroot its paths are under
/// ([`ZkClient::server_root`](super::ZkClient::server_root)).
///
/// Two clients name the same nodes when their ensembles are equal: a path of one is then
/// reachable from the other when it lies under the other's chroot. The ensemble is an
/// identity string: the sorted `host:port` list of the connect string for the real
/// backends (unresolved, so `localhost` and `127.0.0.1` count as two ensembles: a client
/// cannot tell they are one), an id of the in-memory ensemble for its clients.
///
/// ```
/// use zk_locks::client::ServerRoot;
///
/// let app1 = ServerRoot::new("zk1:2181,zk2:2181", Some("/app1"));
/// let plain = ServerRoot::new("zk1:2181,zk2:2181", None);
/// assert_eq!(app1.absolute("/locks/a"), "/app1/locks/a");
/// assert_eq!(plain.relative("/app1/locks/a").as_deref(), Some("/app1/locks/a"));
/// assert_eq!(app1.relative("/app2/locks/a"), None); // not reachable under /app1
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerRoot {
    ensemble: String,
    chroot: Option<String>,
}

impl ServerRoot {
    /// A root on `ensemble` (an identity string, equal for clients of one ensemble) under
    /// `chroot` (`None` or `/`: the server's root).
    pub fn new(ensemble: impl Into<String>, chroot: Option<&str>) -> ServerRoot {
        ServerRoot {
            ensemble: ensemble.into(),
            chroot: chroot
                .map(|c| c.trim_end_matches('/'))
                .filter(|c| !c.is_empty())
                .map(str::to_string),
        }
    }

    /// The ensemble's identity string.
    pub fn ensemble(&self) -> &str {
        &self.ensemble
    }

    /// The chroot, if any.
    pub fn chroot(&self) -> Option<&str> {
        self.chroot.as_deref()
    }

    /// The server's path for `path`, a path of a client at this root.
    pub fn absolute(&self, path: &str) -> String {
        match (&self.chroot, path) {
            (None, _) => path.to_string(),
            (Some(chroot), "/") => chroot.clone(),
            (Some(chroot), _) => format!("{chroot}{path}"),
        }
    }

    /// The path a client at this root uses for the server's path `absolute`; `None` when it
    /// lies outside this root's chroot (such a client cannot name it).
    pub fn relative(&self, absolute: &str) -> Option<String> {
        let Some(chroot) = &self.chroot else {
            return Some(absolute.to_string());
        };
        match absolute.strip_prefix(chroot.as_str()) {
            Some("") => Some("/".to_string()),
            Some(rest) if rest.starts_with('/') => Some(rest.to_string()),
            _ => None,
        }
    }
}

/// The ensemble identity of a connect string's hosts: sorted, without duplicates.
pub(crate) fn ensemble_of_hosts(hosts: &[String]) -> String {
    let mut hosts = hosts.to_vec();
    hosts.sort();
    hosts.dedup();
    hosts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_cross_roots_only_downwards() {
        let root = ServerRoot::new("e", Some("/app/x/"));
        assert_eq!(root.chroot(), Some("/app/x"));
        assert_eq!(root.absolute("/"), "/app/x");
        assert_eq!(root.relative("/app/x"), Some("/".to_string()));
        assert_eq!(root.relative("/app/x/l/n"), Some("/l/n".to_string()));
        assert_eq!(root.relative("/app/xy/l"), None);
        assert_eq!(root.relative("/app"), None);
        assert_eq!(ServerRoot::new("e", Some("/")).chroot(), None);
    }

    #[test]
    fn an_ensemble_is_its_set_of_hosts() {
        let a = ensemble_of_hosts(&["b:1".into(), "a:1".into(), "b:1".into()]);
        assert_eq!(a, ensemble_of_hosts(&["a:1".into(), "b:1".into()]));
    }
}
