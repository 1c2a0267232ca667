//! Our own blocking ZooKeeper client: the recommended backend for real ensembles.
//!
//! No async runtime and no worker pool: a caller encodes and writes its request itself (under
//! a lock) and blocks until the connection's reader thread hands it the reply, or its deadline
//! passes. The session rules are the Java client's (`ClientCnxn`), which Curator users rely on:
//! a connection blip keeps the session and every lock (`Suspended` → `Reconnected`), watches
//! are restored with SetWatches after a reconnect, and the session is declared `Lost` by the
//! client itself when no server accepted it within 4/3 of its timeout (as the Java client).
//!
//! Table of contents, in reading order:
//! - `jute`: the wire encoding (big-endian, length-prefixed), a reader that never panics
//!   and never allocates past the bytes it was given;
//! - `records`: the protocol records (connect, headers, requests, responses, notifications,
//!   error codes);
//! - `connection`: one socket, one reader thread, callers' slots matched by xid (`xids`: the
//!   client's one counter of them); `frames`:
//!   reading a frame off it (an oversized reply fails its request, not the connection);
//! - `session`: connect, ping, dead-link and expiry clocks, reconnect, auth and SetWatches;
//!   `session/closing`: a close that leaves no connection behind; `silence`: when a member
//!   that stopped answering is left for another;
//! - `watches`: the one-shot callback registry and the thread callbacks run on;
//! - `options`: [`NativeOptions`] and the connect string; `hosts`: one host reached
//!   (resolved at every attempt, every address tried, a refusal explained); `failure`: why
//!   an attempt failed, the I/O error kept beneath the sentence;
//! - `pipelined`: a pipeline's requests as wire records, and their replies back;
//!   `submitted`: the same sent without a waiter, replies to a completion;
//! - `transport`: the byte stream, plain TCP or TLS; `tls` (feature `tls`): `TlsOptions`
//!   and the rustls configuration;
//! - this file: [`NativeClient`]; `zk_client`: its [`ZkClient`] implementation.
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_locks::client::native::NativeClient;
//! use zk_locks::{CreateMode, ZkClient};
//!
//! let client = NativeClient::connect("zk1:2181,zk2:2181,zk3:2181/app", Duration::from_secs(10))?;
//! let (path, stat) = client.create2("/jobs", b"", CreateMode::Container).unwrap();
//! println!("{path} created at zxid {} in session 0x{:x}", stat.czxid,
//!          client.session().session_id().unwrap());
//! # Ok::<(), zk_locks::Error>(())
//! ```

mod connection;
mod failure;
mod frames;
mod hosts;
// The wire codec is the client's own; the `testing` feature lets the decoder's property tests
// and scripted servers reach it, hidden from the docs (not part of the API).
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod jute;
#[cfg(not(feature = "testing"))]
mod jute;
mod options;
mod pipelined;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod records;
#[cfg(not(feature = "testing"))]
mod records;
mod session;
mod silence;
mod submitted;
#[cfg(feature = "tls")]
mod tls;
mod transport;
pub(crate) mod watches;
mod xids;
mod zk_client;

use std::sync::Arc;
use std::time::{Duration, Instant};

use self::connection::WatchRegistration;
use self::jute::{DecodeResult, Reader};
use self::options::parse_connect_string;
pub use self::options::{NativeOptions, DEFAULT_PACKET_LIMIT};
use self::records::{decode_all, read_acl, read_create2, read_data, read_stat, WireRequest};
use self::session::{SessionConfig, SessionCore};
#[cfg(feature = "tls")]
#[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
pub use self::tls::TlsOptions;
use self::watches::{from_server, to_server, WatchKind, Watches};
use crate::client::acl::{check_self_access, Acl, AclProvider};
use crate::client::{
    CreateMode, DeleteDone, Request, Response, Stat, Watcher, ZkClient, ZkError, ZkResult,
};
/// The `multi` operations and results ([`ZkClient::multi`]), also at their home
/// [`crate::client`].
pub use crate::client::{MultiOp, MultiResult};
use crate::error::{Error, Result};
use crate::session::Session;

/// A [`ZkClient`] on a real ensemble, speaking ZooKeeper's protocol itself. See the module
/// docs.
pub struct NativeClient {
    core: Arc<SessionCore>,
    chroot: Option<String>,
    call_timeout: Duration,
    connect_string: String,
    acl: AclProvider,
    auth: Vec<(String, Vec<u8>)>,
    /// The observer of the locks made on this client (`NativeOptions::lock_observer`).
    lock_observer: Option<Arc<dyn crate::primitives::observer::LockObserver>>,
}

impl std::fmt::Debug for NativeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeClient")
            .field("hosts", &self.connect_string)
            .field("session", &self.core.session)
            .finish()
    }
}

fn check_path(path: &str) -> ZkResult<()> {
    crate::paths::validate_path(path).map_err(|_| ZkError::BadArguments)
}

/// `now + timeout`; a timeout too long for an `Instant` (`Duration::MAX`) waits without limit.
fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 24 * 3600)))
        .unwrap_or(now)
}

fn version(v: Option<i32>) -> i32 {
    v.unwrap_or(-1)
}

impl NativeClient {
    /// Connects with [`NativeOptions::new`]`(connect_string)` and this session timeout.
    pub fn connect(connect_string: &str, session_timeout: Duration) -> Result<Arc<NativeClient>> {
        Self::connect_with(NativeOptions::new(connect_string).session_timeout(session_timeout))
    }

    /// Connects and waits for the first session (up to the connect timeout). A chroot that
    /// does not exist yet is created (persistent), as Curator creates its namespace.
    ///
    /// Hosts are resolved on every connection attempt, each of their addresses tried; a host
    /// that does not resolve is skipped (logged) while others are tried.
    ///
    /// Errors: [`Error::InvalidArgument`] for a bad chroot or timeout; [`Error::Connect`]
    /// (naming the hosts) for an empty connect string, failed authentication, or no session
    /// within the connect timeout (the reason names each host's latest failure: a name that
    /// does not resolve, a refused connection, a server that closed without answering, a TLS
    /// handshake that failed; the I/O error beneath is the error's `source()`, over TLS as
    /// over TCP, with rustls's error inside it where that is the cause, e.g. a certificate
    /// that does not verify: `io_error.get_ref()` downcasts to `rustls::Error`).
    pub fn connect_with(options: NativeOptions) -> Result<Arc<NativeClient>> {
        let millis = options.session_timeout.as_millis();
        if millis == 0 || millis > i32::MAX as u128 {
            return Err(Error::InvalidArgument {
                name: "session_timeout",
                reason: format!("{:?} is not in (0, i32::MAX ms]", options.session_timeout),
            });
        }
        if let Some(tick) = options.ensemble_tick {
            let millis = tick.as_millis();
            if millis == 0 || millis > i32::MAX as u128 {
                return Err(Error::InvalidArgument {
                    name: "ensemble_tick_time",
                    reason: format!("{tick:?} is not in [1 ms, i32::MAX ms] (zoo.cfg's tickTime)"),
                });
            }
        }
        let (hosts, chroot) = parse_connect_string(&options.connect_string)?;
        let connect_error = |reason: String, source: Option<std::io::Error>| Error::Connect {
            hosts: options.connect_string.clone(),
            reason,
            source,
        };
        let watches = Watches::new(chroot.clone()).map_err(|source| Error::Io {
            context: "spawning the watch thread".into(),
            source,
        })?;
        let core = SessionCore::new(
            SessionConfig {
                hosts,
                session_timeout: options.session_timeout,
                ensemble_tick: options.ensemble_tick,
                packet_limit: options.packet_limit.max(64),
                auth: options.auth.clone(),
                #[cfg(feature = "tls")]
                tls: match &options.tls {
                    Some(tls) => Some(tls.client_config()?),
                    None => None,
                },
            },
            watches,
        );
        let connect_timeout = options.connect_timeout.unwrap_or(options.session_timeout);
        let deadline = deadline_after(connect_timeout);
        if let Err(failure) = core.start(deadline) {
            core.mark_closed();
            core.shut_down();
            let (reason, source) = failure.into_parts();
            return Err(connect_error(reason, source));
        }
        let client = Arc::new(NativeClient {
            core,
            chroot,
            call_timeout: options.effective_call_timeout(),
            connect_string: options.connect_string.clone(),
            acl: options.acl.clone(),
            auth: options.auth.clone(),
            lock_observer: options.lock_observer.0.clone(),
        });
        if let Some(chroot) = client.chroot.clone() {
            client.create_chroot(&chroot).map_err(|e| {
                client.close();
                connect_error(
                    format!("cannot create the chroot {chroot:?}: {e}"),
                    Some(std::io::Error::other(e)),
                )
            })?;
        }
        Ok(client)
    }

    fn create_chroot(&self, chroot: &str) -> ZkResult<()> {
        let mut path = String::new();
        for part in chroot.split('/').filter(|p| !p.is_empty()) {
            path.push('/');
            path.push_str(part);
            let request = WireRequest::Create {
                acl: self.acl_for(&path)?,
                path: path.clone(),
                data: Vec::new(),
                mode: CreateMode::Persistent,
            };
            match self.call(request, None, read_create2) {
                Ok(_) | Err(ZkError::NodeExists) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The ACL for a node created at the client path `path`, refused when it would lock this
    /// client out (see [`check_self_access`]). Empty for the open ACL.
    fn acl_for(&self, path: &str) -> ZkResult<Vec<Acl>> {
        if self.acl.is_open() {
            return Ok(Vec::new());
        }
        let acl = self.acl.acl_for_path(path);
        check_self_access(&acl, &self.auth)?;
        Ok(acl)
    }

    /// The chroot applied to every path, if the connect string had one.
    pub fn chroot(&self) -> Option<&str> {
        self.chroot.as_deref()
    }

    /// The session timeout the server granted (the requested one before the first connect).
    pub fn negotiated_timeout(&self) -> Duration {
        self.core.negotiated_timeout()
    }

    /// The session's id and password as the server granted them (feature `testing`): what a
    /// test needs to expire this session for real
    /// ([`FaultProxy::expire_session_with`](crate::testing::FaultProxy::expire_session_with)),
    /// also over TLS where nothing can be read off the wire. `None` while no session is held.
    #[cfg(feature = "testing")]
    pub fn session_credentials(&self) -> Option<(i64, Vec<u8>)> {
        self.core.credentials()
    }

    /// The session's recent link events, oldest first, each with when it happened (feature
    /// `testing`): every connect attempt with its host and outcome, a link declared dead, a
    /// session declared lost and why. What a test prints when a session did something it
    /// should not have.
    #[cfg(feature = "testing")]
    pub fn link_journal(&self) -> Vec<(Instant, String)> {
        self.core.journal()
    }

    /// How many connect attempts (one per host tried, the first connect's included) this
    /// client made so far (feature `testing`: the failover measurement counts them).
    #[cfg(feature = "testing")]
    pub fn connect_attempts(&self) -> u64 {
        self.core.connect_attempts()
    }

    /// Number of watch callbacks registered and not fired yet.
    pub fn watch_count(&self) -> usize {
        self.core.watches.len()
    }

    fn server_path(&self, path: &str) -> String {
        to_server(self.chroot.as_deref(), path)
    }

    fn client_path(&self, path: &str) -> String {
        from_server(self.chroot.as_deref(), path)
    }

    /// Sends one request and decodes its reply. A reply that does not decode breaks the
    /// connection (the stream can no longer be trusted) and fails with MarshallingError.
    fn call<T>(
        &self,
        request: WireRequest,
        watch: Option<WatchRegistration>,
        decode: impl FnOnce(&mut Reader<'_>) -> DecodeResult<T>,
    ) -> ZkResult<T> {
        let deadline = deadline_after(self.call_timeout);
        let conn = self.core.connection(deadline)?;
        let slot = conn
            .send(vec![(request, watch)])
            .pop()
            .ok_or(ZkError::ConnectionLoss)?;
        let reply = slot.wait(deadline)?;
        decode_all(&reply.body, decode).map_err(|e| {
            log::warn!("undecodable reply ({e}); reconnecting");
            conn.close();
            ZkError::MarshallingError
        })
    }

    /// Flushes the leader's pending writes to the connected server (`sync`), so a read after
    /// it sees every write committed before it.
    pub fn sync(&self, path: &str) -> ZkResult<()> {
        check_path(path)?;
        let request = WireRequest::Sync {
            path: self.server_path(path),
        };
        self.call(request, None, |r| r.string().map(drop))
    }
}

impl Drop for NativeClient {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_connect_strings() {
        // The rules are `connect_string`'s; here, the shape our client keeps.
        let (hosts, chroot) = parse_connect_string("127.0.0.1:2181,127.0.0.1:2182/app/x").unwrap();
        let mut sorted = hosts.clone();
        sorted.sort();
        assert_eq!(sorted, vec!["127.0.0.1:2181", "127.0.0.1:2182"]);
        assert_eq!(chroot.as_deref(), Some("/app/x"));
        assert!(parse_connect_string("").is_err());
    }
}
