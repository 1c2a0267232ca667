//! `OwnedLockGuard::wait_while_held_async`: the wait of `wait_while_held` as a future, on
//! every backend (memory, a real server through both clients): pending while the lock is
//! held, ready `Lost` when the node is deleted by another session or the session expires;
//! dropped, it can be made again and still ends the same way.

#[macro_use]
mod common;
#[path = "support/awaiting.rs"]
mod awaiting;

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Waker};

use awaiting::runtime;
use common::Backend;
use zk_locks::locks::{InterProcessLock, InterProcessMutex};
use zk_locks::LockState;

/// The holder's node deleted by another session: the future is ready `Lost`.
fn a_node_deleted_by_another_session_ends_the_wait_lost(b: &dyn Backend) {
    let (ours, theirs) = (b.connect(), b.connect());
    let path = format!("{}/lock", b.root());
    let mutex = Arc::new(InterProcessMutex::new(ours.client.clone(), &path).unwrap());
    let guard = mutex.lock_owned().unwrap();
    let node = guard.node_path().unwrap().to_string();
    let patience = b.patience();
    runtime().block_on(async {
        // A first future, polled and dropped: it leaves nothing that keeps the next one out.
        {
            let mut first = pin!(guard.wait_while_held_async());
            let noop = Waker::noop();
            assert!(first
                .as_mut()
                .poll(&mut Context::from_waker(noop))
                .is_pending());
        }
        let mut wait = pin!(guard.wait_while_held_async());
        let noop = Waker::noop();
        assert!(wait
            .as_mut()
            .poll(&mut Context::from_waker(noop))
            .is_pending());
        theirs.client.delete(&node, None).unwrap();
        let state = tokio::time::timeout(patience, wait)
            .await
            .expect("the wait did not end when the node went");
        assert_eq!(state, LockState::Lost);
    });
    assert_eq!(guard.state(), LockState::Lost);
}

/// The session expires while the future waits: ready `Lost` (or `Suspect` first, while the
/// link is down on the way: the wait ends at the first state that is not `Held`).
fn an_expired_session_ends_the_wait(b: &dyn Backend) {
    let ours = b.connect();
    let path = format!("{}/lock", b.root());
    let mutex = Arc::new(InterProcessMutex::new(ours.client.clone(), &path).unwrap());
    let guard = mutex.lock_owned().unwrap();
    let patience = b.patience();
    runtime().block_on(async {
        let waiting = tokio::spawn(guard.wait_while_held_async());
        tokio::task::yield_now().await;
        let faults = ours.faults.clone();
        tokio::task::spawn_blocking(move || faults.expire())
            .await
            .unwrap();
        let state = tokio::time::timeout(patience, waiting)
            .await
            .expect("the wait did not end when the session expired")
            .unwrap();
        assert_ne!(state, LockState::Held);
    });
    assert_eq!(guard.state(), LockState::Lost);
}

suite!([
    a_node_deleted_by_another_session_ends_the_wait_lost,
    an_expired_session_ends_the_wait,
]);
