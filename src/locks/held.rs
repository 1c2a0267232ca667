//! `HeldNode`: what a holder knows about the node that gives it a lock (or a lease), and how
//! it finds out that it may have lost it.
//!
//! Curator never tells a holder that its lock is gone (CURATOR-206). Here every holder can ask:
//! - **Lost** once the client's session was lost after the node was created (its ephemeral node
//!   is gone or going), or the client was closed, or the node was found deleted;
//! - **Suspect** while the connection is suspended, or while no contact with the ensemble's
//!   leader was proven for `2T/3` (`Session::safe_until`: a member cut off from its ensemble
//!   answers our pings alone while the leader expires the session) — the session may expire
//!   soon;
//! - **Held** otherwise.
//!
//! When [`HeldNode::state`] asks the server: only on its first call after each reconnect (one
//! `exists` request, to check that the node still exists and still belongs to our session).
//! Otherwise it answers from what the client already knows, without a request: a deletion by
//! someone else (an operator, a peer with the open ACL) is known once a wait armed a watch on
//! the node and the watch fired, or at the next reconnect's re-read. The waits
//! ([`HeldNode::wait_while_held`], [`HeldNode::wait_until_lost`], and the guards' and leases'
//! waits) arm that watch, one `get_data` for all the waits on a node (see `watching.rs`);
//! a holder nobody waits on sends nothing.
//!
//! The fencing token is the node's `czxid`: globally increasing across the ensemble, unlike
//! the sequence number, which restarts when the lock's parent is deleted and recreated.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::client::{Request, Response, SharedClient, Submission, ZkError};
use crate::error::{Error, Result};
use crate::session::{ConnectionState, SessionSnapshot};

use super::internals::awaits;
use super::observe::Observe;
use super::watching::{wait_on, NodeWatch};

/// Whether a holder can still rely on its lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockState {
    /// The node exists and belongs to our live session.
    Held,
    /// The connection is suspended, or the session's last proven contact with the ensemble's
    /// leader is `2T/3` old: the session may expire soon (at the latest moment a holder may
    /// work, [`Session::safe_until`](crate::session::Session::safe_until)) and another process
    /// may then hold the lock. Stop doing work that needs exclusion until the state is `Held`
    /// again.
    Suspect,
    /// The lock is gone: the session was lost, the client closed, or the node deleted (known
    /// from a wait's watch on the node, or from the re-read after a reconnect).
    Lost,
}

/// A node this process holds a lock or lease through.
pub struct HeldNode {
    client: SharedClient,
    path: String,
    /// The session id that created the node (when the backend knows it).
    session_id: Option<i64>,
    /// The client's loss count before the node was created: any later loss means lost.
    losses: u64,
    /// The epoch at which the node was last known to be ours.
    verified_epoch: AtomicU64,
    lost: AtomicBool,
    czxid: OnceLock<i64>,
    /// The watch on the node, armed by the first wait (none while nobody waits).
    watch: Arc<NodeWatch>,
    /// Who reports this hold's events, and when the hold was granted (the hold time reported
    /// on release). Set by the engine when it grants and someone listens (an observer, or
    /// the debug log); none for a hold the user did not take (a semaphore's admission).
    observe: Option<(Arc<Observe>, Instant)>,
    /// The last state reported (`HELD`, `SUSPECT`, `LOST`, or `RELEASED`).
    reported: AtomicU8,
    /// While the node is held, its session keeps proving itself to the quorum; ended when
    /// the node is dropped or given up ([`HeldNode::end_interest`]), whichever comes first.
    interest: parking_lot::Mutex<Option<Interest>>,
}

/// A holder's or waiter's claim on its session's proof to the quorum
/// (`session/quorum.rs`): the backend proves the session while any claim lives.
pub(crate) struct Interest(SharedClient);

impl Interest {
    /// Claims the proof for `client`'s session until dropped.
    pub(crate) fn new(client: &SharedClient) -> Interest {
        client.session().begin_interest();
        Interest(client.clone())
    }
}

impl Drop for Interest {
    fn drop(&mut self) {
        self.0.session().end_interest();
    }
}

impl std::fmt::Debug for Interest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Interest")
    }
}

/// The states [`HeldNode`] reports, in `reported`.
const HELD: u8 = 0;
const SUSPECT: u8 = 1;
const LOST: u8 = 2;
const RELEASED: u8 = 3;

/// What a user reads: the node, its session, the state as far as the client knows without a
/// request (formatting never asks the server), and the fencing token once known.
impl std::fmt::Debug for HeldNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldNode")
            .field("node", &self.path)
            .field("session_id", &self.session_id.map(SessionIdHex))
            .field("state", &self.state_known())
            .field("token", &self.token_known())
            .finish()
    }
}

/// A session id as ZooKeeper's logs print it (`0x` and hex).
struct SessionIdHex(i64);

impl std::fmt::Debug for SessionIdHex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

impl HeldNode {
    /// Records a node acquired while the session looked like `before` (taken *before* the node
    /// was created, so a loss in between counts against it).
    pub(crate) fn new(client: SharedClient, path: String, before: SessionSnapshot) -> HeldNode {
        let now = client.session().snapshot();
        let lost = now.losses != before.losses;
        HeldNode {
            interest: parking_lot::Mutex::new(Some(Interest::new(&client))),
            client,
            path,
            session_id: before.session_id,
            losses: before.losses,
            verified_epoch: AtomicU64::new(now.epoch),
            lost: AtomicBool::new(lost),
            czxid: OnceLock::new(),
            watch: Arc::default(),
            observe: None,
            reported: AtomicU8::new(HELD),
        }
    }

    /// The hold is given up (its node deleted or lost): its session need no longer prove
    /// itself for it, though copies of the hold (a kept `Leadership`) live on. Once.
    pub(crate) fn end_interest(&self) {
        let ended = self.interest.lock().take();
        drop(ended);
    }

    /// Reports this hold's events through `observe` from now on (see `locks/observe.rs`).
    pub(crate) fn observed(mut self, observe: Arc<Observe>, granted: Instant) -> HeldNode {
        self.observe = Some((observe, granted));
        self
    }

    /// Reports `state` when it differs from the last one reported: `suspect`, `held_again`,
    /// `lost` (once; nothing after it). Without an observer this is one `Option` check.
    fn note(&self, state: LockState) -> LockState {
        let Some((observe, _)) = &self.observe else {
            return state;
        };
        let code = match state {
            LockState::Held => HELD,
            LockState::Suspect => SUSPECT,
            LockState::Lost => LOST,
        };
        let before = self
            .reported
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |last| {
                (last != code && last < LOST).then_some(code)
            });
        if let Ok(last) = before {
            match state {
                LockState::Suspect => observe.suspect(&self.path, self.session_id),
                LockState::Held if last == SUSPECT => {
                    observe.held_again(&self.path, self.session_id)
                }
                LockState::Held => {}
                LockState::Lost => observe.lost(&self.path, self.session_id),
            }
        }
        state
    }

    /// Reports the release of this hold, once: `lost` first when the client knows it was
    /// lost and that was not reported yet, then `released` with the hold time.
    pub(crate) fn note_released(&self) {
        let Some((observe, granted)) = &self.observe else {
            return;
        };
        // Reports a loss the client knows of (no request) that nobody looked at yet.
        let _ = self.believed();
        if self.reported.swap(RELEASED, Ordering::SeqCst) != RELEASED {
            observe.released(&self.path, self.session_id, granted.elapsed());
        }
    }

    /// Records the node's `czxid` as read from the create's own reply (or a look-up of the
    /// node in our session), so [`Self::fencing_token`] makes no request.
    pub(crate) fn with_czxid(self, czxid: Option<i64>) -> HeldNode {
        if let Some(czxid) = czxid {
            let _ = self.czxid.set(czxid);
        }
        self
    }

    /// The full path of the node.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The client the node was created with.
    pub fn client(&self) -> &SharedClient {
        &self.client
    }

    /// The session id that owns the node, when known.
    pub fn session_id(&self) -> Option<i64> {
        self.session_id
    }

    /// The client's loss count before the node was created.
    pub(crate) fn losses(&self) -> u64 {
        self.losses
    }

    /// Marks the lock lost (the node was found deleted).
    pub(crate) fn mark_lost(&self) {
        self.lost.store(true, Ordering::SeqCst);
    }

    /// The current state. Asks the server only on the first call after each reconnect (one
    /// `exists`: the node must still exist and be ours); otherwise answers without a request.
    /// A deletion of the node by someone else is seen once a wait armed a watch on it (see
    /// [`Self::wait_while_held`]) and the watch fired, or at the next reconnect's re-read.
    pub fn state(&self) -> LockState {
        match self.believed() {
            (_, Some(state)) => state,
            (epoch, None) => self.verify(epoch),
        }
    }

    /// [`Self::state`] when `ask`, else the state as far as the client knows without a request
    /// (`Suspect` while a reconnect has not been followed by a read of the node): for a timed
    /// wait past its deadline, where one more request could keep it a call timeout more.
    pub(crate) fn state_asking(&self, ask: bool) -> LockState {
        match self.believed() {
            (_, Some(state)) => state,
            (epoch, None) if ask => self.verify(epoch),
            (_, None) => LockState::Suspect,
        }
    }

    /// The state as far as the client knows, with no request and no report (`Suspect` while a
    /// reconnect has not been followed by a read of the node): what `Debug` shows.
    pub(crate) fn state_known(&self) -> LockState {
        self.believed_unreported().1.unwrap_or(LockState::Suspect)
    }

    /// The cached fencing token, when the create's reply or a read brought it.
    pub(crate) fn token_known(&self) -> Option<i64> {
        self.czxid.get().copied()
    }

    /// The state as far as the client knows without a request, and the epoch it was read at;
    /// `None` after a reconnect that no read of the node has followed yet.
    fn believed(&self) -> (u64, Option<LockState>) {
        let (epoch, state) = self.believed_unreported();
        (epoch, state.map(|state| self.note(state)))
    }

    /// [`Self::believed`] without reporting a change of state.
    fn believed_unreported(&self) -> (u64, Option<LockState>) {
        let s = self.client.session().snapshot();
        if self.lost.load(Ordering::SeqCst) || self.watch.saw_deletion() {
            return (s.epoch, Some(LockState::Lost));
        }
        if s.losses != self.losses
            || matches!(s.state, ConnectionState::Lost | ConnectionState::Closed)
        {
            self.mark_lost();
            return (s.epoch, Some(LockState::Lost));
        }
        // A link down, or no proof for 2T/3 that the leader renewed the session (a member
        // cut off from its ensemble answers our pings alone): the session may expire soon.
        if s.state == ConnectionState::Suspended || self.client.session().quorum_stale() {
            return (s.epoch, Some(LockState::Suspect));
        }
        if s.epoch != self.verified_epoch.load(Ordering::SeqCst) {
            return (s.epoch, None);
        }
        (s.epoch, Some(LockState::Held))
    }

    /// Whether the client knows, without a request, that the node is lost. For a decision
    /// that a [`Self::confirm`] follows: it makes no request of its own.
    pub(crate) fn believed_lost(&self) -> bool {
        self.believed().1 == Some(LockState::Lost)
    }

    /// Reads the node from the server now (one request), whatever the client believes: `Held`
    /// only when it exists and belongs to our session. For a decision that must not rest on a
    /// belief: the client may be in a session it has not reported yet, in which the node is
    /// gone.
    pub(crate) fn confirm(&self) -> LockState {
        match self.believed() {
            (_, Some(LockState::Lost)) => LockState::Lost,
            (epoch, _) => self.verify(epoch),
        }
    }

    /// [`Self::confirm`] as a future: the read submitted, its answer awaited.
    pub(crate) async fn confirm_async(&self) -> LockState {
        let epoch = match self.believed() {
            (_, Some(LockState::Lost)) => return LockState::Lost,
            (epoch, _) => epoch,
        };
        let read = Request::Exists {
            path: self.path.clone(),
        };
        let answers = awaits::submit(&self.client, vec![Submission::new(read)]).await;
        let read = match answers.into_iter().next() {
            Some(Ok(Response::Exists(stat))) => Ok(stat.map(|s| s.ephemeral_owner)),
            Some(Err(code)) => Err(code),
            _ => Err(ZkError::MarshallingError),
        };
        self.verify_answered(epoch, read)
    }

    /// Re-reads the node after a reconnect: gone or owned by another session means lost.
    fn verify(&self, epoch: u64) -> LockState {
        let state = self.verify_unreported(epoch);
        self.note(state)
    }

    /// [`Self::verify`] without reporting a change of state.
    fn verify_unreported(&self, epoch: u64) -> LockState {
        let read = self.client.exists(&self.path);
        self.verify_answered_unreported(epoch, read.map(|s| s.map(|s| s.ephemeral_owner)))
    }

    /// What a read of the node after the reconnect of `epoch` found (its owner, `None` when
    /// it is gone), as the state it means, reported: a future's [`Self::verify`].
    pub(super) fn verify_answered(
        &self,
        epoch: u64,
        read: std::result::Result<Option<i64>, ZkError>,
    ) -> LockState {
        let state = self.verify_answered_unreported(epoch, read);
        self.note(state)
    }

    fn verify_answered_unreported(
        &self,
        epoch: u64,
        read: std::result::Result<Option<i64>, ZkError>,
    ) -> LockState {
        match read {
            Ok(Some(owner)) if self.owned_by_us(owner) => {
                self.verified_in(epoch);
                LockState::Held
            }
            Ok(_) | Err(ZkError::NoNode) | Err(ZkError::SessionExpired) | Err(ZkError::Closed) => {
                self.mark_lost();
                LockState::Lost
            }
            Err(_) => LockState::Suspect,
        }
    }

    /// The state as far as the client knows without a request, reported, and the epoch it
    /// was read at (`None` after a reconnect no read of the node followed yet).
    pub(super) fn believed_state(&self) -> (u64, Option<LockState>) {
        self.believed()
    }

    /// Records that the node was read as ours at `epoch`.
    pub(super) fn verified_in(&self, epoch: u64) {
        self.verified_epoch.fetch_max(epoch, Ordering::SeqCst);
    }

    /// The watch the waits arm on the node.
    pub(super) fn watch(&self) -> &Arc<NodeWatch> {
        &self.watch
    }

    pub(super) fn owned_by_us(&self, owner: i64) -> bool {
        // Persistent nodes (owner 0) and backends that do not know the session id pass.
        owner == 0 || self.session_id.is_none_or(|id| id == owner)
    }

    /// `state() == Held`.
    pub fn is_valid(&self) -> bool {
        self.state() == LockState::Held
    }

    /// Blocks until the state is no longer `Held` (Suspect or Lost) or the timeout passes;
    /// returns the state then. While it waits, a watch on the node is armed (one `get_data`,
    /// kept for later waits), so a deletion of the node by someone else ends it as `Lost`.
    pub fn wait_while_held(&self, timeout: Option<Duration>) -> LockState {
        wait_on(&[self], timeout, |state| state == LockState::Held)
    }

    /// Blocks until the lock is `Lost` (a `Suspect` spell that ends in `Held` again does not
    /// count) or the timeout passes; returns the state then. Watches the node as
    /// [`Self::wait_while_held`] does.
    pub fn wait_until_lost(&self, timeout: Option<Duration>) -> LockState {
        wait_on(&[self], timeout, |state| state != LockState::Lost)
    }

    /// The fencing token: the node's creation zxid, from the create's reply (or read once with
    /// one `exists` request, and cached).
    /// Fails when the node is gone.
    pub fn fencing_token(&self) -> Result<i64> {
        if let Some(z) = self.czxid.get() {
            return Ok(*z);
        }
        match self.client.exists(&self.path) {
            Ok(Some(stat)) if self.owned_by_us(stat.ephemeral_owner) => {
                Ok(*self.czxid.get_or_init(|| stat.czxid))
            }
            Ok(_) => {
                self.mark_lost();
                Err(Error::SessionLost {
                    path: self.path.clone(),
                })
            }
            Err(code) => Err(Error::zk("exists", self.path.clone(), code)),
        }
    }
}
