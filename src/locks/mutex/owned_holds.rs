//! The mutex's owned holds: holds that belong to an `OwnedLockGuard`, not to a thread.
//!
//! Rules kept here:
//! - **Known by the node, not by a thread.** An owned hold is recorded by its node beside the
//!   per-thread owners; its release takes out exactly the nodes its guard stands for, from any
//!   thread, and nothing of a thread's hold or of another guard.
//! - **Never reentrant.** Every owned acquire queues a node of its own through the engine, so
//!   owned holds of one object exclude each other and the object's thread holds.
//! - **Forgotten before the delete** (as a thread's final release): keeping a hold whose delete
//!   failed could make two holders (CURATOR-678); the delete goes on in the background.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::locks::cleanup::release_held_async;
use crate::locks::deadline_after;
use crate::locks::held::HeldNode;
use crate::locks::internals::{past, NodeKind, Wait};
use crate::locks::owned::take_held_by;
use crate::locks::revocation::RevocationWatch;
use crate::primitives::block_on::block_on;

use super::InterProcessMutex;

/// One owned guard's hold on the mutex.
pub(super) struct OwnedHold {
    node: Arc<HeldNode>,
    /// Set when the lock was taken revocable; dropped (stops re-arming) with the hold.
    revocation: Option<RevocationWatch>,
}

impl InterProcessMutex {
    /// Queues a node of its own and waits for it (at most `timeout`; `None` without limit);
    /// the node once held, recorded as an owned hold.
    pub(crate) fn acquire_owned(&self, timeout: Option<Duration>) -> Result<Option<Arc<HeldNode>>> {
        block_on(self.acquire_owned_async(timeout))
    }

    /// [`Self::acquire_owned`] as a future (the blocking call runs it on its thread).
    pub(crate) async fn acquire_owned_async(
        &self,
        timeout: Option<Duration>,
    ) -> Result<Option<Arc<HeldNode>>> {
        let deadline = timeout.and_then(deadline_after);
        let revocation = self.revocation.lock().clone();
        let data = self.node_data(revocation.is_some());
        let Some(node) = self
            .internals
            .attempt_async(deadline, &data, NodeKind::Sequential)
            .await?
        else {
            return Ok(None);
        };
        let node = Arc::new(node);
        self.owned.lock().push(OwnedHold {
            node: node.clone(),
            revocation: None,
        });
        // Armed once the hold is recorded, as for a thread's hold: its listener may already
        // find the request written to our node.
        if let Some(listener) = revocation {
            let watch = RevocationWatch::start(
                self.internals.client().clone(),
                node.path().to_string(),
                listener,
                past(deadline, Instant::now()),
            );
            if let Some(hold) = self
                .owned
                .lock()
                .iter_mut()
                .find(|h| Arc::ptr_eq(&h.node, &node))
            {
                hold.revocation = Some(watch);
            }
        }
        Ok(Some(node))
    }

    /// Releases the owned holds among `nodes` (those of other locks in a multi-lock's list
    /// are left to them); [`Error::NotAcquired`] when none of them is an owned hold of this
    /// object (released already). Clears revocability, as a thread's final release does.
    pub(crate) fn release_owned(&self, nodes: &[Arc<HeldNode>], wait: Wait) -> Result<()> {
        let mut outcome = Ok(());
        for node in self.forget_owned(nodes)? {
            if let Err(e) = self.internals.release_within(&node, wait) {
                outcome = Err(e);
            }
        }
        outcome
    }

    /// [`Self::release_owned`] as a future: each delete submitted and its answer awaited.
    pub(crate) async fn release_owned_async(&self, nodes: &[Arc<HeldNode>]) -> Result<()> {
        let mut outcome = Ok(());
        for node in self.forget_owned(nodes)? {
            let retry = self.internals.retry_policy();
            if let Err(e) = release_held_async(&node, retry.as_ref()).await {
                outcome = Err(e);
            }
        }
        outcome
    }

    /// Takes the owned holds among `nodes` out of the table (before their deletes: a hold
    /// whose delete failed must not be kept, CURATOR-678) and stops their revocation watches.
    fn forget_owned(&self, nodes: &[Arc<HeldNode>]) -> Result<Vec<Arc<HeldNode>>> {
        let mine = take_held_by(&mut self.owned.lock(), nodes, |h| &h.node);
        if mine.is_empty() {
            return Err(Error::NotAcquired {
                path: self.path().to_string(),
            });
        }
        *self.revocation.lock() = None;
        Ok(mine
            .into_iter()
            .map(|OwnedHold { node, .. }| node)
            .collect())
    }
}
