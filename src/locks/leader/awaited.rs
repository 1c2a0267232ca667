//! A latch's leadership and its close awaited by futures
//! ([`LeaderLatch::await_leadership_async`], [`LeaderLatch::close_async`]): no thread waits;
//! the latch's own thread wakes the futures where it notifies blocking waiters.
//!
//! [`LeaderLatch::await_leadership_async`]: super::LeaderLatch::await_leadership_async
//! [`LeaderLatch::close_async`]: super::LeaderLatch::close_async

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

/// The future of [`LeaderLatch::close_async`](super::LeaderLatch::close_async): ready with the
/// close's outcome (as [`LeaderLatch::close`](super::LeaderLatch::close) returns it) once the
/// latch's thread gave the node back and ended.
#[must_use = "a future does nothing unless polled (dropped, the close goes on)"]
pub struct ClosingLatch {
    /// `None` once known at the call (not started, closed already, closed from a listener).
    shared: Option<Arc<Shared>>,
    done: Option<Result<()>>,
    key: Option<u64>,
}

impl ClosingLatch {
    pub(super) fn new(shared: Arc<Shared>) -> ClosingLatch {
        ClosingLatch {
            shared: Some(shared),
            done: None,
            key: None,
        }
    }

    pub(super) fn done(outcome: Result<()>) -> ClosingLatch {
        ClosingLatch {
            shared: None,
            done: Some(outcome),
            key: None,
        }
    }
}

impl Future for ClosingLatch {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let this = &mut *self;
        if let Some(done) = this.done.take() {
            return Poll::Ready(done);
        }
        match &this.shared {
            Some(shared) => shared.poll_closed(&mut this.key, cx.waker()),
            None => Poll::Ready(Ok(())),
        }
    }
}

impl Drop for ClosingLatch {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            shared.forget_waker(self.key.take());
        }
    }
}

impl std::fmt::Debug for ClosingLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClosingLatch").finish_non_exhaustive()
    }
}
