//! Closing the session so that nothing outlives `close()`: once [`SessionCore::mark_closed`]
//! returns, no connection is installed any more and the socket of a connect attempt in
//! progress is shut down (each attempt registers its socket with [`SessionCore::track_attempt`]
//! as soon as TCP connects, refused once closed); [`SessionCore::shut_down`] then breaks the
//! current connection and waits for the session thread to stop, so that no socket of the
//! client is left open and no frame is sent after `close()` returns.

use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{closed_reason, SessionCore};
use crate::client::native::connection::Connection;
use crate::client::native::failure::ConnectFailure;
use crate::client::native::hosts::Reach;
use crate::session::ConnectionState;

impl SessionCore {
    /// Marks the session closed: callers get [`ZkError::Closed`](crate::ZkError::Closed),
    /// the supervisor stops, no connection is installed any more, and a connect attempt in
    /// progress has its socket shut down. Returns the connection to send closeSession on, if
    /// one is ready.
    pub fn mark_closed(&self) -> Option<Arc<Connection>> {
        let mut link = self.link.lock();
        link.closed = true;
        if let Some(attempt) = link.connecting.take() {
            let _ = attempt.shutdown(Shutdown::Both);
        }
        self.changed.notify_all();
        link.conn.clone().filter(|_| link.ready)
    }

    /// Breaks the current connection and stops everything (after closeSession), then waits
    /// for the session thread to end (unless this is that thread), so that no connection
    /// of this client is opened or left open after `close()`.
    pub fn shut_down(&self) {
        let conn = self.link.lock().conn.take();
        if let Some(conn) = conn {
            conn.close();
        }
        self.watches.shutdown();
        self.session.transition(ConnectionState::Closed, None);
        let mut link = self.link.lock();
        if link.supervisor == Some(std::thread::current().id()) {
            return;
        }
        // The session thread sees `closed` at its next step; the longest step it cannot be
        // woken from is one TCP connect, bounded by the per-host connect timeout (`≤ T`).
        let bound = link.negotiated.saturating_add(Duration::from_secs(5));
        let deadline = Instant::now().checked_add(bound);
        while link.supervising {
            let timed_out = match deadline {
                Some(deadline) => self.changed.wait_until(&mut link, deadline).timed_out(),
                None => {
                    self.changed.wait(&mut link);
                    false
                }
            };
            if timed_out && link.supervising {
                log::warn!("zk-locks native: the session thread did not stop in {bound:?}");
                return;
            }
        }
    }

    /// Records the socket of a connect attempt, so that closing can shut it down; refused
    /// once the client is closed (the socket is then dropped, nothing sent on it).
    pub(super) fn track_attempt(&self, tcp: &TcpStream) -> Result<(), ConnectFailure> {
        let handle = tcp
            .try_clone()
            .map_err(|e| ConnectFailure::io(Reach::Failed, "socket", e))?;
        let mut link = self.link.lock();
        if link.closed {
            return Err(closed_reason(&link).into());
        }
        link.connecting = Some(handle);
        Ok(())
    }
}
