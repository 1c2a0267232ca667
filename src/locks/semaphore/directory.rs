//! The semaphore's own directory: one kind of lock per path.
//!
//! A mutex or a read/write lock refuses a directory holding the semaphore's `locks` or
//! `leases` (their first listing shows them). The semaphore lists its own directory only when
//! it had to make its lease directory: a lock of another kind taken while no lease directory
//! existed is then in the listing, and the semaphore withdraws — its lease deleted, then the
//! lease directory it made (so the next semaphore makes it again, and looks again), then its
//! admission. While a lease directory exists, nobody of another kind gets in, so an
//! uncontended lease on a directory already in use by semaphores sends nothing more.

use std::time::Instant;

use crate::client::ZkError;
use crate::error::{Error, Result};
use crate::locks::internals::Resume;
use crate::locks::layout::{other_kind, other_kind_error, LockLayout};
use crate::retry::Retries;

use super::InterProcessSemaphoreV2;

impl InterProcessSemaphoreV2 {
    /// `Err(OtherLockKind)` when the semaphore's directory holds another kind's node (one
    /// listing, retried under the policy while its outcome is unknown; a failure by the
    /// deadline is that listing's error).
    pub(super) fn refuse_other_kind(
        &self,
        deadline: Option<Instant>,
        start: Instant,
    ) -> Result<()> {
        let mut retries = Retries::new(self.leases.retry_policy().as_ref(), start, deadline);
        loop {
            let code = match self.leases.client().get_children(&self.path, None) {
                Ok(children) => {
                    return match other_kind(&children, LockLayout::Semaphore) {
                        Some((found, node)) => Err(other_kind_error(
                            &self.path,
                            LockLayout::Semaphore,
                            found,
                            node,
                        )),
                        None => Ok(()),
                    }
                }
                Err(code) => code,
            };
            if code.is_retryable() {
                if let Resume::Ready = self.leases.retry_when_connected(&mut retries) {
                    continue;
                }
            }
            return match code {
                ZkError::NoNode => Ok(()),
                code => Err(Error::zk("get_children", &self.path, code)),
            };
        }
    }

    /// Withdraws a lease refused by [`Self::refuse_other_kind`]: `delete_lease` (the lease
    /// node), then the lease directory this call made, when nobody else's lease is in it.
    pub(super) fn withdraw_from_other_kind(&self, delete_lease: impl FnOnce()) {
        delete_lease();
        let leases = self.leases.base_path();
        match self.leases.client().delete(leases, None) {
            Ok(()) | Err(ZkError::NoNode | ZkError::NotEmpty) => {}
            Err(code) => log::info!("deleting {leases}, made by a refused lease: {code:?}"),
        }
    }
}
