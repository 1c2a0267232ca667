//! The ZooKeeper session: connecting with the chosen credentials, ACL and TLS, and closing it.

use std::sync::Arc;
use std::time::Duration;

use zk_locks::client::native::{NativeClient, NativeOptions};
use zk_locks::Error;

use crate::cli::Security;

/// Opens a session to `hosts` with the credentials, ACL provider and TLS of `security`,
/// giving up after `connect_timeout` (`None`: the session timeout, the library's default);
/// `tick_time` is the ensemble's `tickTime`, when the user stated it.
pub(crate) fn connect(
    hosts: &str,
    session_timeout: Duration,
    tick_time: Option<Duration>,
    connect_timeout: Option<Duration>,
    security: &Security,
) -> Result<Arc<NativeClient>, Error> {
    let mut options = NativeOptions::new(hosts)
        .session_timeout(session_timeout)
        .acl_provider(security.acl.provider());
    if let Some(tick) = tick_time {
        options = options.ensemble_tick_time(tick);
    }
    if let Some(timeout) = connect_timeout {
        options = options.connect_timeout(timeout);
    }
    if let Some(credentials) = &security.credentials {
        options = options.auth("digest", credentials.as_bytes());
    }
    #[cfg(feature = "tls")]
    if let Some(ca) = &security.tls_ca {
        let mut tls = zk_locks::client::native::TlsOptions::from_ca_file(ca)?;
        if let (Some(cert), Some(key)) = (&security.tls_cert, &security.tls_key) {
            tls = tls.client_cert_files(cert, key)?;
        }
        options = options.tls(tls);
    }
    NativeClient::connect_with(options)
}

/// Not allowed (rather than broken): our credentials or ACL do not fit the lock, or the lock
/// directory lets others in while our ACL asks for protection.
pub(crate) fn not_allowed(e: &Error) -> bool {
    matches!(
        e,
        Error::NotAuthorized { .. } | Error::InvalidAcl { .. } | Error::UnprotectedLock { .. }
    )
}

/// Closes the session, if there is one; the server then deletes our ephemeral nodes.
pub(crate) fn close(client: &Option<Arc<NativeClient>>) {
    if let Some(c) = client {
        zk_locks::ZkClient::close(c.as_ref());
    }
}
