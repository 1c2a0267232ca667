//! The session thread's part in proving the session to the quorum (the rule is in
//! `quorum.rs`): a sync every period and a write every few while the session holds or waits
//! for a lock, their answers turned into proofs on the reader thread, and the member left when
//! it answers nothing that proves (cut off from its leader, or its leader from its quorum).

use std::sync::Arc;
use std::time::Duration;

use super::quorum::{leave_after, period};
use super::SessionCore;
use crate::client::native::connection::Connection;
use crate::client::native::records::WireRequest;
use crate::client::MultiOp;
use crate::primitives::boot_clock::BootInstant;

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
    /// sent at `asked_at`): the leader renewed the session then, unless the member is
    /// read-only (it answers alone). That is a proof once a write binds it (`quorum.rs`).
    /// Starts a new chain for `connection`.
    pub(super) fn accepted(&self, connection: u64, asked_at: BootInstant, read_only: bool) {
        self.proof
            .lock()
            .restart(connection, (!read_only).then_some(asked_at));
    }

    /// One step of proving on `conn` (connection number `connection`): sends the sync and the
    /// write that are due (only if that cannot block: the session thread never waits on a
    /// write) and says when to look again, or that the member must be left.
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
        let now = BootInstant::now();
        let mut chain = self.proof.lock();
        let unproven = chain.unproven(unproven, now);
        if let Some(unproven) = unproven.filter(|&u| u >= leave_after(negotiated)) {
            return Proving::Leave(unproven);
        }
        // Soon again when the socket could not take a request now (a caller is writing, or
        // it is full).
        let retry = Proving::Within((period(negotiated) / 4).max(Duration::from_millis(5)));
        if chain.write_due(now, negotiated) {
            if !self.send_quorum_write(conn, connection, now, negotiated) {
                return retry;
            }
            chain.write_sent(now);
        }
        if chain.due(now, negotiated) {
            if !self.send_sync(conn, connection, now, negotiated) {
                return retry;
            }
            chain.sent(now);
        }
        let next = chain
            .next_due(negotiated)
            .map_or(Duration::ZERO, |due| due.saturating_duration_since(now));
        // The leave threshold is judged on the clock too.
        let leave_in = leave_after(negotiated).saturating_sub(unproven.unwrap_or_default());
        Proving::Within(next.min(leave_in).max(Duration::from_millis(1)))
    }

    /// Sends a sync sent at `now` whose answer extends the chain (the renewal half of the
    /// rule). Returns whether it was sent.
    fn send_sync(
        &self,
        conn: &Arc<Connection>,
        connection: u64,
        now: BootInstant,
        negotiated: Duration,
    ) -> bool {
        let proof = self.proof.clone();
        let session = self.session.clone();
        conn.try_send_unawaited(
            // The path is not looked up: "/" is valid under any chroot.
            WireRequest::Sync { path: "/".into() },
            Box::new(move |reply| {
                if reply.is_err() {
                    return; // the connection broke: the next one starts a new chain
                }
                let answered = BootInstant::now();
                let proven = proof.lock().answered(connection, now, answered, negotiated);
                if let Some(at) = proven {
                    session.confirm_quorum(at, negotiated);
                }
            }),
        )
    }

    /// Sends the write sent at `now` that binds the renewals before it to a leader that still
    /// had its quorum (the epoch half of the rule): a `multi` of one `check` of `/`, which
    /// changes nothing and commits even if the check fails. Returns whether it was sent.
    fn send_quorum_write(
        &self,
        conn: &Arc<Connection>,
        connection: u64,
        now: BootInstant,
        negotiated: Duration,
    ) -> bool {
        let proof = self.proof.clone();
        let session = self.session.clone();
        conn.try_send_unawaited(
            WireRequest::Multi {
                ops: vec![MultiOp::Check {
                    path: "/".into(),
                    version: -1,
                }],
                create_acls: Vec::new(),
            },
            Box::new(move |reply| {
                // Answered without an error in its header: committed (a failed check is a
                // result inside the answer). An error header (the session moved or expired,
                // the connection broke) proves nothing.
                let proven = proof.lock().write_answered(connection, now, reply.is_ok());
                if let Some(at) = proven {
                    session.confirm_quorum(at, negotiated);
                }
            }),
        )
    }
}
