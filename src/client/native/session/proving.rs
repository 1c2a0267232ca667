//! The session thread's part in proving the session to the quorum (the rule is in
//! `quorum.rs`): a sync every period while the session holds or waits for a lock, their
//! answers turned into proofs on the reader thread, and the member left when it answers
//! nothing that proves (cut off from its leader).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::quorum::{leave_after, period};
use super::SessionCore;
use crate::client::native::connection::Connection;
use crate::client::native::records::WireRequest;

/// What the session thread does next about the proof.
pub(super) enum Proving {
    /// No holder or waiter: nothing to prove (the idle client pings as ever).
    Idle,
    /// Look again within this long (the next sync is due then).
    Within(Duration),
    /// No proof for this long while proving: the member cannot reach its leader. Leave it
    /// before the leader could expire the session, for a member that can.
    Leave(Duration),
}

impl SessionCore {
    /// A connection accepted the session (a ConnectResponse, the ConnectRequest having been
    /// sent at `asked_at`): that proves the session to the leader by itself, unless the
    /// member is read-only (it answers alone). Starts a new chain of syncs for `connection`.
    pub(super) fn accepted(
        &self,
        connection: u64,
        asked_at: Instant,
        negotiated: Duration,
        read_only: bool,
    ) {
        self.proof.lock().restart(connection);
        if !read_only {
            self.session.confirm_quorum(asked_at, negotiated);
        }
    }

    /// One step of proving on `conn` (connection number `connection`): sends the sync that
    /// is due (only if that cannot block: the session thread never waits on a write) and
    /// says when to look again, or that the member must be left.
    pub(super) fn prove(
        &self,
        conn: &Arc<Connection>,
        connection: u64,
        negotiated: Duration,
    ) -> Proving {
        let (wanted, unproven) = self.session.quorum_demand();
        if !wanted {
            return Proving::Idle;
        }
        if let Some(unproven) = unproven.filter(|&u| u >= leave_after(negotiated)) {
            return Proving::Leave(unproven);
        }
        let now = Instant::now();
        let mut chain = self.proof.lock();
        if chain.due(now, negotiated) {
            let proof = self.proof.clone();
            let session = self.session.clone();
            let sent = conn.try_send_unawaited(
                // The path is not looked up: "/" is valid under any chroot.
                WireRequest::Sync { path: "/".into() },
                Box::new(move |reply| {
                    if reply.is_err() {
                        return; // the connection broke: the next one starts a new chain
                    }
                    let answered = Instant::now();
                    let proven = proof.lock().answered(connection, now, answered, negotiated);
                    if let Some(at) = proven {
                        session.confirm_quorum(at, negotiated);
                    }
                }),
            );
            if sent {
                chain.sent(now);
            } else {
                // A caller is writing or the socket is full: soon again.
                return Proving::Within((period(negotiated) / 4).max(Duration::from_millis(5)));
            }
        }
        let next = chain
            .next_due(negotiated)
            .map_or(Duration::ZERO, |due| due.saturating_duration_since(now));
        // The leave threshold is judged on the clock too.
        let leave_in = leave_after(negotiated).saturating_sub(unproven.unwrap_or_default());
        Proving::Within(next.min(leave_in).max(Duration::from_millis(1)))
    }
}
