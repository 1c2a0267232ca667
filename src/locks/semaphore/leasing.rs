//! The semaphore's acquires as futures: [`InterProcessSemaphoreV2::acquire_async`] and its
//! siblings on an `Arc` of the semaphore, ready with [`Lease`]s. They run the acquire the
//! blocking calls run (`acquire`), with the operation's context in place on every poll.
//! Dropped, they leave nothing behind (the admission and the lease nodes are deleted, a
//! create still out is handled when its answer comes); the leases they return are given
//! back on drop without waiting for the delete.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::{InterProcessSemaphoreV2, Lease};
use crate::error::{Error, Result};
use crate::locks::acquiring::run_async;
use crate::locks::internals::context::InContext;
use crate::locks::Acquire;

/// The future of the semaphore's async acquires ([`InterProcessSemaphoreV2::acquire_async`],
/// [`InterProcessSemaphoreV2::acquire_with_async`],
/// [`InterProcessSemaphoreV2::acquire_many_with_async`]).
#[must_use = "a future does nothing unless polled"]
pub struct Leasing<T> {
    inner: Pin<Box<dyn Future<Output = Result<T>> + Send>>,
}

impl<T> Future for Leasing<T> {
    type Output = Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        self.inner.as_mut().poll(cx)
    }
}

impl<T> std::fmt::Debug for Leasing<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Leasing")
    }
}

/// `qty` leases of `semaphore` as `how` says, as a future; the leases released unawaited on
/// drop.
pub(super) fn leases(
    semaphore: Arc<InterProcessSemaphoreV2>,
    qty: usize,
    how: Acquire,
) -> Leasing<Option<Vec<Lease>>> {
    let token = how.cancel_token().cloned();
    let acquire = async move {
        let leases = run_async(&how, semaphore.path(), |timeout| {
            semaphore.acquire_inner_async(qty, timeout)
        });
        let mut leases = leases.await?;
        for lease in leases.iter_mut().flatten() {
            lease.unawaited = true;
        }
        Ok(leases)
    };
    Leasing {
        inner: Box::pin(InContext::new(token, acquire)),
    }
}

/// One lease, from [`leases`].
pub(super) fn one(semaphore: Arc<InterProcessSemaphoreV2>, how: Acquire) -> Leasing<Option<Lease>> {
    let mut many = leases(semaphore, 1, how);
    Leasing {
        inner: Box::pin(async move { Ok(Pin::new(&mut many).await?.map(|mut v| v.remove(0))) }),
    }
}

/// One lease, waiting without limit: only a closed client ends it without one.
pub(super) fn until_granted(semaphore: Arc<InterProcessSemaphoreV2>) -> Leasing<Lease> {
    let mut one = one(semaphore, Acquire::new());
    Leasing {
        inner: Box::pin(async move { Pin::new(&mut one).await?.ok_or(Error::Closed) }),
    }
}
