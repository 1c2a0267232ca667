//! Installing a connection the server accepted, in the order the lock layer relies on: the
//! proof of the session to the quorum and the state change first, then the reader thread,
//! then auth packets and SetWatches (in batches under the packet limit); only then do
//! callers' requests flow, and the removeWatches owed for callbacks removed since SetWatches'
//! list was read go out.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{closed_reason, SessionCore, SET_WATCHES_BUDGET};
use crate::client::native::connection::{Connection, LinkObserver};
use crate::client::native::failure::ConnectFailure;
use crate::client::native::hosts;
use crate::client::native::records::{ConnectResponse, WireRequest};
use crate::client::native::transport::Transport;
use crate::client::native::watches::ServerTable;
use crate::client::ZkError;
use crate::primitives::boot_clock::BootInstant;
use crate::session::ConnectionState;

/// How long a removal waits for the connection's write lock and for room in its socket: the
/// end of a lock wait must not wait for a caller's write blocked on a full socket. A removal
/// not sent then stays owed and goes with the next one sent on the connection (a new
/// connection's SetWatches leaves its watch out; until either, the watch fires into nothing).
const REMOVAL_WAIT: Duration = Duration::from_millis(10);

impl SessionCore {
    /// Takes a connection the server accepted: reports the state change, starts the reader,
    /// re-sends auth and watches, then lets requests flow.
    pub(super) fn establish(
        self: &Arc<Self>,
        stream: Transport,
        response: ConnectResponse,
        asked: i64,
        asked_at: BootInstant,
    ) -> Result<Arc<Connection>, ConnectFailure> {
        if asked != 0 && response.session_id != asked {
            self.lose("the server answered the resume with another session");
        }
        let resumed = asked != 0 && response.session_id == asked;
        let conn = Connection::new(stream, self.config.packet_limit, self.xids.clone())
            .map_err(|e| ConnectFailure::io(hosts::Reach::Failed, "socket", e))?;
        let negotiated = Duration::from_millis(response.timeout_ms as u64);
        {
            let mut link = self.link.lock();
            // Installed only while the client is open: a handshake that completes after
            // close() leaves nothing behind (no reader, no auth, the socket closed).
            link.connecting = None;
            if link.closed {
                drop(link);
                conn.close();
                return Err(closed_reason(&self.link.lock()).into());
            }
            link.session_id = response.session_id;
            link.password = response.password.clone();
            link.negotiated = negotiated;
            link.conn = Some(conn.clone());
            link.ready = false;
            link.connection += 1;
            // Before the state change: a holder never sees the new connection with an old
            // proof.
            self.accepted(link.connection, asked_at, response.read_only);
        }
        let state = match (resumed, response.read_only) {
            (_, true) => ConnectionState::ReadOnly,
            (true, false) => ConnectionState::Reconnected,
            (false, false) => ConnectionState::Connected,
        };
        self.session.transition(state, Some(response.session_id));
        let observer: Arc<dyn LinkObserver> = self.clone();
        conn.start_reader(self.watches.clone(), self.last_zxid.clone(), observer)
            .map_err(|e| ConnectFailure::io(hosts::Reach::Failed, "spawning the reader", e))?;
        self.restore(&conn, negotiated)?;
        {
            let mut link = self.link.lock();
            link.ready = true;
            self.changed.notify_all();
        }
        // Futures waiting to send (`ZkClient::ready_to_send`) wake as blocked callers do.
        self.session.link_ready();
        // A callback removed after SetWatches' list was read had its watch restored: its
        // removal is owed. One removed from now on finds this connection ready and sends its
        // own (`send_owed_removals`), so none is left behind.
        self.send_owed_on(&conn);
        Ok(conn)
    }

    /// Sends the removeWatches owed (`Watches::take_owed`) on the connection of now, if there
    /// is one; none now: they wait for the next connection, whose SetWatches leaves their
    /// watches out.
    pub(crate) fn send_owed_removals(&self) {
        if let Ok(conn) = self.connection(Instant::now()) {
            self.send_owed_on(&conn);
        }
    }

    /// The owed removals on `conn`, taken under its write lock (see `watches.rs`), waiting at
    /// most [`REMOVAL_WAIT`] for it and for room in the socket; those not sent then stay owed.
    fn send_owed_on(&self, conn: &Connection) {
        conn.send_built_unawaited(Instant::now() + REMOVAL_WAIT, || {
            let removals = self.watches.take_owed().into_iter();
            removals
                .map(
                    |(table, path): (ServerTable, String)| WireRequest::RemoveWatches {
                        path,
                        watcher_type: table.watcher_type(),
                    },
                )
                .collect()
        });
    }

    /// Auth packets, then SetWatches batches; waits for every reply.
    fn restore(&self, conn: &Arc<Connection>, negotiated: Duration) -> Result<(), ConnectFailure> {
        let mut requests: Vec<_> = self
            .config
            .auth
            .iter()
            .map(|(scheme, auth)| {
                (
                    WireRequest::Auth {
                        scheme: scheme.clone(),
                        auth: auth.clone(),
                    },
                    None,
                )
            })
            .collect();
        let relative_zxid = self.last_zxid.load(Ordering::SeqCst);
        for batch in self.watches.paths().batches(SET_WATCHES_BUDGET) {
            requests.push((
                WireRequest::SetWatches {
                    relative_zxid,
                    data: batch.data,
                    exist: batch.exist,
                    child: batch.child,
                },
                None,
            ));
        }
        if requests.is_empty() {
            return Ok(());
        }
        let deadline = Instant::now() + negotiated * 2 / 3;
        for slot in conn.send(requests) {
            match slot.wait(deadline) {
                Ok(_) => {}
                Err(ZkError::AuthFailed) => {
                    log::error!("authentication failed; closing the client");
                    let mut link = self.link.lock();
                    link.closed = true;
                    link.auth_failed = true;
                    self.changed.notify_all();
                    drop(link);
                    conn.close();
                    self.watches.shutdown();
                    self.session.transition(ConnectionState::Closed, None);
                    return Err(ConnectFailure::explained(
                        hosts::Reach::Failed,
                        "authentication failed".into(),
                        std::io::Error::new(
                            std::io::ErrorKind::PermissionDenied,
                            ZkError::AuthFailed,
                        ),
                    ));
                }
                Err(e) => {
                    conn.close();
                    return Err(ConnectFailure::io(
                        hosts::Reach::Failed,
                        "restoring auth and watches",
                        std::io::Error::other(e),
                    ));
                }
            }
        }
        Ok(())
    }
}
