//! Acquires as futures: [`InterProcessLock::lock_owned_async`] and
//! [`InterProcessLock::try_lock_owned_async`] on an `Arc` of any recipe, ready with an
//! [`OwnedLockGuard`]. They run the engine the blocking calls run (`internals`), on the
//! executor that polls them, with no thread of their own and no async runtime.
//!
//! Rules kept here:
//! - **one engine**: a recipe's hold future is its blocking acquire's code, awaited; the
//!   blocking call runs the same future on its own thread;
//! - **the operation's context travels with it** (`internals::context`): its cancel token and
//!   what it left to the background are its own, whichever thread polls it;
//! - **dropping is cancelling, and never blocks or leaks**: at any point its node is deleted
//!   (sent unawaited, finished in the background), a create still out is deleted when its
//!   answer comes or looked up by its prefix when none comes, and its watch and listeners go;
//! - **a guard it returns releases without blocking**: dropped, its delete is sent and not
//!   awaited (async code must not stall its executor).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use super::held::HeldNode;
use super::internals::context::InContext;
use super::{Acquire, InterProcessLock, OwnedLockGuard};
use crate::error::{Error, Result};

/// The future of a recipe's owned hold, borrowing the lock object (what
/// [`InterProcessLock::acquire_owned_hold_async`] returns). Not for use outside this crate's
/// recipes.
#[doc(hidden)]
pub type HoldFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Option<Vec<Arc<HeldNode>>>>> + Send + 'a>>;

/// The future of a recipe's async release of an owned hold (what
/// [`InterProcessLock::release_owned_hold_async`] returns). Not for use outside this crate's
/// recipes.
#[doc(hidden)]
pub type ReleaseFuture<'a> = Pin<Box<dyn Future<Output = Result<()>> + Send + 'a>>;

type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The future of [`OwnedLockGuard::unlock_async`]: the release's outcome, as
/// [`OwnedLockGuard::unlock`] reports it, without blocking a thread.
#[must_use = "a future does nothing unless polled (dropped, the release goes on unawaited)"]
pub struct Unlocking {
    pub(crate) inner: Boxed<Result<()>>,
}

impl Future for Unlocking {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        self.inner.as_mut().poll(cx)
    }
}

impl std::fmt::Debug for Unlocking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Unlocking")
    }
}

/// The future of [`InterProcessLock::try_lock_owned_async`]: the guard once held, `None` when
/// the [`Acquire`]'s timeout passed (nothing left behind), [`Error::Cancelled`] when its token
/// was cancelled.
#[must_use = "a future does nothing unless polled"]
pub struct TryLockOwned<L: InterProcessLock + ?Sized + 'static> {
    inner: Boxed<Result<Option<OwnedLockGuard<L>>>>,
}

/// The future of [`InterProcessLock::lock_owned_async`]: the guard once held.
#[must_use = "a future does nothing unless polled"]
pub struct LockOwned<L: InterProcessLock + ?Sized + 'static> {
    inner: TryLockOwned<L>,
}

impl<L: InterProcessLock + 'static> TryLockOwned<L> {
    pub(crate) fn new(lock: Arc<L>, how: Acquire) -> TryLockOwned<L> {
        let token = how.cancel_token().cloned();
        let acquire = async move {
            let nodes = lock.acquire_owned_hold_async(&how).await?;
            Ok(nodes.map(|nodes| OwnedLockGuard::released_unawaited(lock.clone(), nodes)))
        };
        TryLockOwned {
            inner: Box::pin(InContext::new(token, acquire)),
        }
    }
}

impl<L: InterProcessLock + 'static> LockOwned<L> {
    pub(crate) fn new(lock: Arc<L>) -> LockOwned<L> {
        LockOwned {
            inner: TryLockOwned::new(lock, Acquire::new()),
        }
    }
}

impl<L: InterProcessLock + ?Sized + 'static> Future for TryLockOwned<L> {
    type Output = Result<Option<OwnedLockGuard<L>>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl<L: InterProcessLock + ?Sized + 'static> Future for LockOwned<L> {
    type Output = Result<OwnedLockGuard<L>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match Pin::new(&mut self.inner).poll(cx) {
            Poll::Ready(Ok(Some(guard))) => Poll::Ready(Ok(guard)),
            // Only a closed client ends an untimed wait without the lock.
            Poll::Ready(Ok(None)) => Poll::Ready(Err(Error::Closed)),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<L: InterProcessLock + ?Sized + 'static> std::fmt::Debug for TryLockOwned<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TryLockOwned")
    }
}

impl<L: InterProcessLock + ?Sized + 'static> std::fmt::Debug for LockOwned<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LockOwned")
    }
}

/// [`super::cancel::run`] for a future: `acquire(timeout)` under `how`, its outcome mapped as
/// the blocking call maps it. The token is current during each poll (`InContext`).
pub(crate) async fn run_async<T, F>(
    how: &Acquire,
    path: &str,
    acquire: impl FnOnce(Option<Duration>) -> F,
) -> Result<Option<T>>
where
    F: Future<Output = Result<Option<T>>>,
{
    how.check(path)?;
    match acquire(how.timeout_value()).await? {
        Some(held) => Ok(Some(held)),
        None if how.cancel_token().is_some_and(|t| t.is_cancelled()) => Err(Error::Cancelled {
            path: path.to_string(),
        }),
        None if how.timeout_value().is_none() => Err(Error::Closed),
        None => Ok(None),
    }
}

/// The promise of the types: every acquire future can be spawned on a multi-threaded
/// executor (`Send + 'static`). A change that breaks it fails the build here.
const _: () = {
    fn send_static<T: Send + 'static>() {}
    #[allow(dead_code)]
    fn every_recipe() {
        use super::{
            InterProcessMultiLock, InterProcessMutex, InterProcessSemaphoreMutex, Lease, Leasing,
            ReadLock, WriteLock,
        };
        send_static::<LockOwned<InterProcessMutex>>();
        send_static::<TryLockOwned<ReadLock>>();
        send_static::<TryLockOwned<WriteLock>>();
        send_static::<LockOwned<InterProcessSemaphoreMutex>>();
        send_static::<LockOwned<InterProcessMultiLock>>();
        send_static::<Leasing<Lease>>();
        send_static::<Leasing<Option<Vec<Lease>>>>();
        send_static::<Unlocking>();
    }
};
