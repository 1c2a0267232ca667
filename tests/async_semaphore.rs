//! The semaphore's async acquires (`acquire_async`, `acquire_with_async`,
//! `acquire_many_with_async`) and the semaphore mutex's owned futures, on every backend: the
//! acquire the blocking calls run, polled by an executor. Must hold: at most `max` leases;
//! a future dropped while it waits for room or for admission, or right after its first poll,
//! leaves no lease and no admission node; a timeout and a cancel token end it with nothing
//! left; the leases it returns are given back on drop.

#[macro_use]
mod common;
#[path = "support/awaiting.rs"]
mod awaiting;

use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use awaiting::{off_runtime, poll_once, runtime};
use common::Backend;
use zk_locks::locks::{
    Acquire, CancelToken, InterProcessLock, InterProcessSemaphoreMutex, InterProcessSemaphoreV2,
};
use zk_locks::testing::harness::{children, eventually};
use zk_locks::{Error, LockState};

/// Every node under the semaphore: leases and admission.
fn nodes(b: &common::TestClient, path: &str) -> (usize, usize) {
    (
        children(b.client.as_ref(), &format!("{path}/leases")).len(),
        children(b.client.as_ref(), &format!("{path}/locks")).len(),
    )
}

/// Two leases of two are taken; a third waits, is dropped (no node left), and one that waits
/// after it gets the lease once one is given back.
fn leases_wait_for_room_and_a_dropped_wait_leaves_nothing(b: &dyn Backend) {
    let (a, c) = (b.connect(), b.connect());
    let path = format!("{}/pool", b.root());
    let ours = Arc::new(InterProcessSemaphoreV2::new(a.client.clone(), &path, 2).unwrap());
    let theirs = Arc::new(InterProcessSemaphoreV2::new(c.client.clone(), &path, 2).unwrap());
    let patience = b.patience();
    runtime().block_on(async {
        let first = ours.acquire_async().await.unwrap();
        let second = theirs.acquire_async().await.unwrap();
        assert_eq!(first.state(), LockState::Held);
        let waiting = tokio::spawn({
            let theirs = theirs.clone();
            async move { theirs.acquire_async().await }
        });
        let how = Acquire::new().timeout(Duration::from_millis(100));
        assert!(ours.acquire_with_async(how).await.unwrap().is_none());
        waiting.abort(); // dropped while it waits for room (or for admission)
        let _ = waiting.await;
        let last = tokio::spawn({
            let theirs = theirs.clone();
            async move { theirs.acquire_async().await }
        });
        drop(first);
        let third = tokio::time::timeout(patience, last)
            .await
            .expect("no lease after one was given back")
            .unwrap()
            .unwrap();
        drop((second, third));
    });
    eventually(patience, "every lease and admission node gone", || {
        nodes(&a, &path) == (0, 0)
    });
}

/// Polled once and dropped at once, many times over, while the semaphore is full: nothing is
/// left; then a cancel ends a wait with `Cancelled` and nothing left.
fn dropped_early_and_cancelled_waits_leave_nothing(b: &dyn Backend) {
    let (a, c) = (b.connect(), b.connect());
    let path = format!("{}/pool", b.root());
    let full = Arc::new(InterProcessSemaphoreV2::new(a.client.clone(), &path, 1).unwrap());
    let waiter = Arc::new(InterProcessSemaphoreV2::new(c.client.clone(), &path, 1).unwrap());
    let patience = b.patience();
    let held = full.acquire().unwrap();
    for _ in 0..50 {
        let mut future = pin!(waiter.acquire_async());
        let _ = poll_once(future.as_mut());
    }
    eventually(patience, "only the holder's lease left", || {
        nodes(&a, &path) == (1, 0)
    });
    runtime().block_on(async {
        let token = CancelToken::new();
        let cancelled = tokio::spawn(waiter.acquire_with_async(Acquire::new().cancel(&token)));
        let looker = full.clone();
        off_runtime(patience, "waiting", move || {
            looker.participant_nodes().unwrap().len() == 2
        })
        .await;
        token.cancel();
        let outcome = tokio::time::timeout(patience, cancelled)
            .await
            .expect("the cancel did not end the wait")
            .unwrap();
        assert!(
            matches!(outcome, Err(Error::Cancelled { .. })),
            "{outcome:?}"
        );
    });
    eventually(patience, "only the holder's lease left", || {
        nodes(&a, &path) == (1, 0)
    });
    drop(held);
}

/// The semaphore mutex's owned futures exclude each other and hand over; a multi-lease
/// acquire that cannot get all its leases gives back the ones it took.
fn semaphore_mutex_and_many_leases(b: &dyn Backend) {
    let (a, c) = (b.connect(), b.connect());
    let root = b.root();
    let m1 =
        Arc::new(InterProcessSemaphoreMutex::new(a.client.clone(), &format!("{root}/m")).unwrap());
    let m2 =
        Arc::new(InterProcessSemaphoreMutex::new(c.client.clone(), &format!("{root}/m")).unwrap());
    let pool_path = format!("{root}/pool");
    let pool = Arc::new(InterProcessSemaphoreV2::new(a.client.clone(), &pool_path, 3).unwrap());
    let other = Arc::new(InterProcessSemaphoreV2::new(c.client.clone(), &pool_path, 3).unwrap());
    let patience = b.patience();
    runtime().block_on(async {
        let g1 = m1.lock_owned_async().await.unwrap();
        let how = Acquire::new().timeout(Duration::from_millis(100));
        assert!(m2
            .try_lock_owned_async(how.clone())
            .await
            .unwrap()
            .is_none());
        let next = tokio::spawn({
            let m2 = m2.clone();
            async move { m2.lock_owned_async().await }
        });
        drop(g1);
        let g2 = tokio::time::timeout(patience, next)
            .await
            .expect("the semaphore mutex did not hand over")
            .unwrap()
            .unwrap();
        drop(g2);
        let mut two = other
            .acquire_many_with_async(2, Acquire::new())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(two.len(), 2);
        // `close_async` reports the return once its delete was answered.
        two.pop().unwrap().close_async().await.unwrap();
        assert_eq!(other.participant_nodes().unwrap().len(), 1);
        two.push(other.acquire_async().await.unwrap());
        // Two of three are taken: asking for two gets one, waits, times out, gives it back.
        assert!(pool
            .acquire_many_with_async(2, how)
            .await
            .unwrap()
            .is_none());
        drop(two);
    });
    eventually(patience, "every lease given back", || {
        nodes(&a, &pool_path) == (0, 0)
    });
}

suite!(tls [
    leases_wait_for_room_and_a_dropped_wait_leaves_nothing,
    dropped_early_and_cancelled_waits_leave_nothing,
    semaphore_mutex_and_many_leases,
]);
