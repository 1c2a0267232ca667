//! A latch's leadership awaited by a future ([`LeaderLatch::await_leadership_async`]): no
//! thread waits; the latch's own thread wakes the future where it notifies blocking waiters.
//!
//! [`LeaderLatch::await_leadership_async`]: super::LeaderLatch::await_leadership_async

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::latch::Shared;
use super::leadership::Leadership;
use crate::error::Result;

/// The future of [`LeaderLatch::await_leadership_async`](super::LeaderLatch::await_leadership_async):
/// ready with this participant's spell of leadership once it leads.
#[must_use = "a future does nothing unless polled"]
pub struct AwaitLeadership {
    shared: Arc<Shared>,
    /// Where its waker is kept in the latch's status.
    key: Option<u64>,
}

impl AwaitLeadership {
    pub(super) fn new(shared: Arc<Shared>) -> AwaitLeadership {
        AwaitLeadership { shared, key: None }
    }
}

impl Future for AwaitLeadership {
    type Output = Result<Leadership>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<Leadership>> {
        let this = &mut *self;
        this.shared.poll_leadership(&mut this.key, cx.waker())
    }
}

impl Drop for AwaitLeadership {
    fn drop(&mut self) {
        self.shared.forget_waker(self.key.take());
    }
}

impl std::fmt::Debug for AwaitLeadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwaitLeadership").finish_non_exhaustive()
    }
}
