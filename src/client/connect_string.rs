//! Connect strings, as every ZooKeeper client reads them: `host[:port],...[/chroot]`.
//!
//! Parsing resolves nothing (as the Java client's `ConnectStringParser`): names are resolved
//! when a connection is made ([`resolve_all`]), every time, so a host that does not resolve
//! yet (a StatefulSet member that is down has no DNS record) does not stop the others.

use std::net::{SocketAddr, ToSocketAddrs};

use crate::error::{Error, Result};

/// The form of a connect string, as error messages name it.
const FORM: &str = "host:port[,host:port...][/chroot]";

/// The hosts (`host:port`, port 2181 when omitted; not resolved) and the chroot of a
/// connect string `host[:port][,host[:port]...][/chroot]`, hosts in the order given.
pub(crate) fn parse(connect_string: &str) -> Result<(Vec<String>, Option<String>)> {
    // Every refusal names the form expected, whichever rule the string breaks.
    let connect_error = |reason: String| Error::Connect {
        hosts: connect_string.to_string(),
        reason: format!("{reason}; expected {FORM}"),
        source: None,
    };
    if let Some((scheme, _)) = connect_string.split_once("://") {
        return Err(Error::InvalidArgument {
            name: "connect_string",
            reason: format!(
                "{connect_string:?} is a URL ({scheme}://): a connect string has no scheme; expected {FORM}"
            ),
        });
    }
    let (hosts, chroot) = match connect_string.find('/') {
        Some(i) => connect_string.split_at(i),
        None => (connect_string, ""),
    };
    let chroot = match chroot {
        "" | "/" => None,
        c => {
            crate::paths::validate_path(c).map_err(|e| Error::InvalidArgument {
                name: "connect_string",
                reason: format!("bad chroot in {connect_string:?}: {e}; expected {FORM}"),
            })?;
            Some(c.to_string())
        }
    };
    let mut out = Vec::new();
    for host in hosts.split(',').map(str::trim) {
        if host.is_empty() {
            return Err(connect_error("empty host in the connect string".into()));
        }
        let with_port = if host.contains(':') && !host.ends_with(']') {
            host.to_string()
        } else {
            format!("{host}:2181")
        };
        // A port is syntax, not a name to resolve: checked here (the host name is not).
        match with_port.rsplit_once(':') {
            Some((name, port)) if !name.is_empty() && port.parse::<u16>().is_ok() => {}
            _ => return Err(connect_error(format!("bad host or port: {host:?}"))),
        }
        out.push(with_port);
    }
    Ok((out, chroot))
}

/// Every address `host` (`name:port`) resolves to now, or why none.
pub(crate) fn resolve_all(host: &str) -> std::result::Result<Vec<SocketAddr>, String> {
    let addrs: Vec<SocketAddr> = host
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host:?}: {e}"))?
        .collect();
    if addrs.is_empty() {
        return Err(format!("cannot resolve {host:?}: no address"));
    }
    Ok(addrs)
}

/// The first address `host` (a `host:port` of `connect_string`) resolves to (the test kit's
/// four-letter words).
#[cfg(feature = "testing")]
pub(crate) fn resolve(connect_string: &str, host: &str) -> Result<SocketAddr> {
    host.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| Error::Connect {
            hosts: connect_string.to_string(),
            reason: format!("cannot resolve {host:?}"),
            source: None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_in_order_with_default_ports_and_the_chroot() {
        let (hosts, chroot) = parse("127.0.0.1:2182,127.0.0.1/app/x").unwrap();
        assert_eq!(hosts, vec!["127.0.0.1:2182", "127.0.0.1:2181"]);
        assert_eq!(chroot.as_deref(), Some("/app/x"));
        assert_eq!(parse("127.0.0.1/").unwrap().1, None);
    }

    #[test]
    fn names_are_not_resolved_when_parsed() {
        let (hosts, _) = parse("no-such-host.invalid:2181,127.0.0.1").unwrap();
        assert_eq!(hosts, vec!["no-such-host.invalid:2181", "127.0.0.1:2181"]);
        assert!(resolve_all("no-such-host.invalid:2181").is_err());
        assert_eq!(resolve_all("127.0.0.1:2181").unwrap().len(), 1);
    }

    #[test]
    fn bad_connect_strings_are_typed_errors() {
        for bad in [
            "",
            "a:1,,b:2",
            "127.0.0.1:notaport",
            "127.0.0.1:99999",
            ":2181",
        ] {
            assert!(matches!(parse(bad), Err(Error::Connect { .. })), "{bad:?}");
        }
        for bad in ["127.0.0.1:2181/app/", "127.0.0.1:2181/a//b"] {
            assert!(
                matches!(parse(bad), Err(Error::InvalidArgument { .. })),
                "{bad:?}"
            );
        }
    }
}
