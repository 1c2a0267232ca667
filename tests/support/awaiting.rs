//! What the tests of the async API share: a tokio runtime as a service would run one, a poll
//! with a waker that does nothing (a future left pending, then dropped), and a wait on a
//! condition run off the runtime's threads. Included with `#[path]`.

#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Two worker threads, timers on.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap()
}

/// Polls `future` once with a waker that does nothing.
pub fn poll_once<F: Future>(future: Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

/// Waits (bounded by `patience`) until `cond` holds, on a blocking thread: the condition may
/// ask the server with the blocking API.
pub async fn off_runtime(
    patience: Duration,
    what: &'static str,
    mut cond: impl FnMut() -> bool + Send + 'static,
) {
    tokio::task::spawn_blocking(move || {
        zk_locks::testing::harness::eventually(patience, what, &mut cond)
    })
    .await
    .unwrap()
}
