//! `CancelToken::cancelled`: a future ready once the token is cancelled, on any executor (here
//! a hand-made waker, and tokio), woken by a cancel from another thread, unregistered when
//! dropped.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use zk_locks::locks::CancelToken;

/// Counts its wake-ups.
#[derive(Default)]
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn the_future_is_pending_until_cancelled_then_woken_once_and_ready() {
    let token = CancelToken::new();
    let count = Arc::new(Count::default());
    let waker = Waker::from(count.clone());
    let mut cx = Context::from_waker(&waker);
    let mut waiting = pin!(token.cancelled());
    assert_eq!(waiting.as_mut().poll(&mut cx), Poll::Pending);
    assert_eq!(
        waiting.as_mut().poll(&mut cx),
        Poll::Pending,
        "polled again"
    );
    token.clone().cancel();
    assert_eq!(count.0.load(Ordering::SeqCst), 1, "woken once");
    assert_eq!(waiting.as_mut().poll(&mut cx), Poll::Ready(()));
    // Cancelled before the first poll: ready at once, no waker kept.
    let mut late = pin!(token.cancelled());
    assert_eq!(late.as_mut().poll(&mut cx), Poll::Ready(()));
}

#[test]
fn a_dropped_future_is_not_woken_and_the_latest_waker_is_the_one_woken() {
    let token = CancelToken::new();
    let first = Arc::new(Count::default());
    let second = Arc::new(Count::default());
    let dropped = Arc::new(Count::default());
    {
        let waker = Waker::from(dropped.clone());
        let mut gone = Box::pin(token.cancelled());
        assert!(gone
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
    }
    let mut moved = pin!(token.cancelled());
    let waker = Waker::from(first.clone());
    assert!(moved
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    // Polled again by another task: that one is woken, not the first.
    let waker = Waker::from(second.clone());
    assert!(moved
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    token.cancel();
    assert_eq!(dropped.0.load(Ordering::SeqCst), 0);
    assert_eq!(first.0.load(Ordering::SeqCst), 0);
    assert_eq!(second.0.load(Ordering::SeqCst), 1);
}

#[test]
fn ten_thousand_tasks_wait_on_one_token_and_all_end_when_it_is_cancelled() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        let token = CancelToken::new();
        let tasks: Vec<_> = (0..10_000)
            .map(|_| {
                let token = token.clone();
                tokio::spawn(async move { token.cancelled().await })
            })
            .collect();
        // Half of them give up on their own first (dropped futures unregister).
        for task in tasks.iter().step_by(2) {
            task.abort();
        }
        let stop = token.clone();
        std::thread::spawn(move || stop.cancel());
        let mut ended = 0;
        for task in tasks {
            if tokio::time::timeout(Duration::from_secs(30), task)
                .await
                .is_ok()
            {
                ended += 1;
            }
        }
        assert_eq!(ended, 10_000);
    });
}
