//! What an operation carries as it moves between threads: the thread-local context a blocking
//! call keeps on its one thread (the current [`CancelToken`], the count of what it left to
//! the background, the count of `queued` events it reported, whether it may block) is put in place for each poll of its future and
//! taken back after, so each operation sees its own, on whatever thread polls it.
//!
//! Rules kept:
//! - the context is in place for exactly the span of one poll, and the thread's own context
//!   comes back after it, also when the poll panics;
//! - code that runs inside a future's poll knows it ([`in_future`]): it never blocks on a
//!   request or a delete, it submits them or leaves them to the background.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::locks::cleanup::swap_left_to_background;
use crate::locks::observe::swap_queued;
use crate::primitives::cancel::{enter, CancelToken};

thread_local! {
    /// True while a future of an operation is being polled on this thread.
    static IN_FUTURE: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling code runs inside a future's poll (it must not block the thread).
pub(crate) fn in_future() -> bool {
    IN_FUTURE.get()
}

/// A future with the context of its operation in place during each poll.
pub(crate) struct InContext<F> {
    token: Option<CancelToken>,
    left_to_background: u64,
    queued: u64,
    future: Pin<Box<F>>,
}

impl<F: Future> InContext<F> {
    /// `future`, run with `token` as its current cancel token.
    pub(crate) fn new(token: Option<CancelToken>, future: F) -> InContext<F> {
        InContext {
            token,
            left_to_background: 0,
            queued: 0,
            future: Box::pin(future),
        }
    }
}

/// The thread's own context, put back when dropped (a panicking poll included).
struct Restore<'a> {
    token: Option<CancelToken>,
    left_to_background: u64,
    queued: u64,
    in_future: bool,
    op_left: &'a mut u64,
    op_queued: &'a mut u64,
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        *self.op_left = swap_left_to_background(self.left_to_background);
        *self.op_queued = swap_queued(self.queued);
        enter(self.token.take());
        IN_FUTURE.set(self.in_future);
    }
}

impl<F: Future> Future for InContext<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let restore = Restore {
            token: enter(this.token.clone()),
            left_to_background: swap_left_to_background(this.left_to_background),
            queued: swap_queued(this.queued),
            in_future: IN_FUTURE.replace(true),
            op_left: &mut this.left_to_background,
            op_queued: &mut this.queued,
        };
        let out = this.future.as_mut().poll(cx);
        drop(restore);
        out
    }
}
