//! `Leadership`: what an elected leader holds, whichever recipe elected it.
//!
//! Rules kept here:
//! - **Leadership is its node's hold.** Its state is the [`HeldNode`]'s state of the election
//!   node that leads (the same rules a lock holder learns a loss by: its node deleted, its
//!   session suspect or lost), never a flag of its own that could lag behind.
//! - **A term is the node's fencing token** (its `czxid`): a later leader's node was created
//!   later, so its term is larger, across sessions, processes and runtimes. A leader that
//!   resumes after a `Suspect` spell on the same node keeps its term: nobody can have led in
//!   between, since the node never left.
//! - **A leadership is one spell.** Its token is cancelled when the recipe stops counting it
//!   as leading (Curator's default policy: the session suspended or lost; the election
//!   closed; the selector's leadership interrupted) and is never reset; a spell that resumes
//!   is a new `Leadership` with the same term.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::client::{MultiOp, MultiResult, SharedClient};
use crate::error::Result;

use super::super::cancel::{self, CancelToken};
use super::super::held::{HeldNode, LockState};

/// One spell of leadership: the node that leads, its term (fencing token), and a token that
/// is cancelled when the spell ends. Owned, `Send`, `Sync` and cheap to clone: hand it to the
/// threads that do the leader's work.
///
/// Given by [`LeaderLatch::await_leadership`](super::LeaderLatch::await_leadership),
/// [`LeaderLatch::leadership`](super::LeaderLatch::leadership), a latch's listeners, and to a
/// [`LeaderSelector`](super::LeaderSelector)'s callback.
///
/// A leader checks [`Self::state`] (or blocks in [`Self::wait_while_leading`]) around work
/// that needs it to be the only leader, passes [`Self::term`] to the resources it writes
/// (they reject terms older than the newest they saw), and writes ZooKeeper state with
/// [`Self::fenced_multi`], which commits only while its node exists.
///
/// ```
/// use zk_locks::client::memory::MemoryEnsemble;
/// use zk_locks::locks::LeaderLatch;
/// use zk_locks::LockState;
///
/// let ensemble = MemoryEnsemble::new();
/// let latch = LeaderLatch::new(ensemble.connect(), "/election/indexer", "host-a")?;
/// latch.start()?;
/// let leadership = latch.await_leadership()?;
/// assert_eq!(leadership.state(), LockState::Held);
/// assert!(leadership.term() > 0);           // pass it with every write
/// latch.close()?;                           // the spell ends, the node goes
/// assert_eq!(leadership.state(), LockState::Lost);
/// assert!(leadership.ended().is_cancelled());
/// # Ok::<(), zk_locks::Error>(())
/// ```
#[derive(Clone)]
pub struct Leadership {
    inner: Arc<Spell>,
}

struct Spell {
    node: Arc<HeldNode>,
    /// Set by the recipe just before it deletes the node: from then on every copy of every
    /// spell of the node reads `Lost`, before any successor can lead.
    given_up: Arc<AtomicBool>,
    term: i64,
    id: Arc<str>,
    election: Arc<str>,
    ended: CancelToken,
}

impl Leadership {
    /// A spell of leadership through `node` (which leads), whose term is `term`; `given_up`
    /// is the node's flag the recipe sets before deleting it.
    pub(crate) fn new(
        node: Arc<HeldNode>,
        given_up: Arc<AtomicBool>,
        term: i64,
        id: Arc<str>,
        election: Arc<str>,
    ) -> Self {
        Leadership {
            inner: Arc::new(Spell {
                node,
                given_up,
                term,
                id,
                election,
                ended: CancelToken::new(),
            }),
        }
    }

    /// Ends the spell: its token is cancelled (waits on it return).
    pub(crate) fn end(&self) {
        self.inner.ended.cancel();
    }

    /// Held, Suspect or Lost: the state of the election node, by the rules of
    /// [`HeldNode::state`] (a request only on the first call after a reconnect); `Lost` from
    /// the moment the recipe gives the node up (before its delete is sent). `Held` means
    /// this process leads; `Suspect`, stop work that needs it to be the only leader until
    /// `Held` again; `Lost`, leadership is over (another participant may lead now).
    pub fn state(&self) -> LockState {
        if self.inner.given_up.load(Ordering::SeqCst) {
            return LockState::Lost;
        }
        self.inner.node.state()
    }

    /// `state() == Held` and the spell has not ended.
    pub fn is_leading(&self) -> bool {
        !self.inner.ended.is_cancelled() && self.state() == LockState::Held
    }

    /// The term: the election node's fencing token (its `czxid`). Every later leader of this
    /// election has a larger one; pass it to the resources the leader writes.
    pub fn term(&self) -> i64 {
        self.inner.term
    }

    /// The participant id this process leads as (its node's data).
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The election's path.
    pub fn election_path(&self) -> &str {
        &self.inner.election
    }

    /// The full path of the node that leads.
    pub fn node_path(&self) -> &str {
        self.inner.node.path()
    }

    /// The client the node was created with.
    pub fn client(&self) -> &SharedClient {
        self.inner.node.client()
    }

    /// Cancelled when this spell ends: the recipe no longer counts it as leading (the
    /// session suspended or lost, the node deleted, the election closed, a selector's
    /// leadership interrupted). Never reset. Give it to a cancellable acquire
    /// ([`Acquire::cancel`](super::super::Acquire::cancel)), poll it in a work loop, or in
    /// async code await [`CancelToken::cancelled`] beside the work (`select!`).
    pub fn ended(&self) -> &CancelToken {
        &self.inner.ended
    }

    /// Blocks until this process may no longer be the only leader — the state leaves `Held`
    /// (`Suspect` or `Lost`) — or the spell ends ([`Self::ended`]), or the timeout passes;
    /// returns the state then. While it waits, a watch on the node is armed (one
    /// `get_data`), so a deletion of the node ends it as `Lost`. A spell ended by the recipe
    /// (an interrupt, a close) can return `Held`: the node is still there until the recipe
    /// deletes it, but this process leads no longer — check [`Self::ended`].
    pub fn wait_while_leading(&self, timeout: Option<Duration>) -> LockState {
        let node = &self.inner.node;
        cancel::within(&self.inner.ended, node.client(), || {
            node.wait_while_held(timeout)
        })
    }

    /// A ZooKeeper transaction that commits only while the election node exists (a `check`
    /// of it, then `ops`), as [`LockGuard::fenced_multi`](super::super::LockGuard::fenced_multi):
    /// a leader that lost its node (its session expired while it stalled) cannot write.
    pub fn fenced_multi(&self, ops: &[MultiOp]) -> Result<Vec<MultiResult>> {
        super::super::fenced::fenced_multi(std::slice::from_ref(&self.inner.node), ops)
    }
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("election", &self.inner.election)
            .field("id", &self.inner.id)
            .field("node", &self.inner.node.path())
            .field("term", &self.inner.term)
            .field("ended", &self.inner.ended.is_cancelled())
            .finish()
    }
}

/// The promise of the type: a leadership can be stored and handed to other threads.
const _: () = {
    fn send_sync_static<T: Send + Sync + 'static>() {}
    #[allow(dead_code)]
    fn leadership() {
        send_sync_static::<Leadership>();
    }
};
