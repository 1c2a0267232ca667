//! Curator's lock tests as the mutex suite (`tests/mutex.rs`) holds them, run through the async
//! API: a waiter whose session expires queues again on its new session and acquires; a holder
//! whose session expires reads `Lost` and the lock passes on with a larger fencing token; a
//! waiter whose link blips (its watch dropped or restored) still acquires; waiters are served
//! in the order they queued. On every backend; the faults are injected from the test's thread
//! while the futures wait as tokio tasks.

#[macro_use]
mod common;
#[path = "support/awaiting.rs"]
mod awaiting;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use awaiting::runtime;
use common::Backend;
use zk_locks::locks::{InterProcessLock, InterProcessMutex};
use zk_locks::testing::harness::eventually;
use zk_locks::LockState;

/// A waiter's session expires while it waits: it queues again on its new session and gets
/// the lock once the holder lets go.
fn an_expired_waiter_queues_again_and_acquires(b: &dyn Backend) {
    let path = format!("{}/lock", b.root());
    let (c1, c2) = (b.connect(), b.connect());
    let holder = Arc::new(InterProcessMutex::new(c1.client.clone(), &path).unwrap());
    let waiter = Arc::new(InterProcessMutex::new(c2.client.clone(), &path).unwrap());
    let patience = b.patience();
    let rt = runtime();
    let held = rt.block_on(holder.lock_owned_async()).unwrap();
    let waiting = rt.spawn({
        let waiter = waiter.clone();
        async move { waiter.lock_owned_async().await }
    });
    eventually(patience, "the waiter queued", || {
        holder.participant_nodes().unwrap().len() == 2
    });
    c2.faults.expire();
    eventually(
        patience,
        "the waiter queued again on its new session",
        || holder.participant_nodes().unwrap().len() == 2,
    );
    drop(held);
    let guard = rt
        .block_on(async { tokio::time::timeout(patience, waiting).await })
        .expect("the waiter never acquired")
        .unwrap()
        .unwrap();
    assert_eq!(guard.state(), LockState::Held);
    assert_eq!(holder.participant_nodes().unwrap().len(), 1);
}

/// The holder's session expires: its guard reads `Lost`, the lock passes to a waiting future
/// with a larger fencing token, and the old guard's release leaves the new holder's node.
fn an_expired_holder_is_lost_and_the_lock_passes_on(b: &dyn Backend) {
    let path = format!("{}/lock", b.root());
    let (c1, c2) = (b.connect(), b.connect());
    let first = Arc::new(InterProcessMutex::new(c1.client.clone(), &path).unwrap());
    let second = Arc::new(InterProcessMutex::new(c2.client.clone(), &path).unwrap());
    let patience = b.patience();
    let rt = runtime();
    let g1 = rt.block_on(first.lock_owned_async()).unwrap();
    let token1 = g1.fencing_token().unwrap();
    let waiting = rt.spawn({
        let second = second.clone();
        async move { second.lock_owned_async().await }
    });
    eventually(patience, "the second queued", || {
        first.participant_nodes().unwrap().len() == 2
    });
    c1.faults.expire();
    assert_eq!(g1.state(), LockState::Lost);
    let g2 = rt
        .block_on(async { tokio::time::timeout(patience, waiting).await })
        .expect("the lock did not pass on")
        .unwrap()
        .unwrap();
    assert!(g2.fencing_token().unwrap() > token1, "fencing tokens grow");
    rt.block_on(g1.unlock_async()).unwrap();
    assert_eq!(
        first.participant_nodes().unwrap(),
        vec![g2.node_path().unwrap().to_string()]
    );
    assert!(g2.is_valid());
}

/// A waiter's link blips (the `zookeeper` crate drops its watch, our client restores it): it
/// still acquires when the holder lets go.
fn a_waiter_whose_link_blips_still_acquires(b: &dyn Backend) {
    let path = format!("{}/lock", b.root());
    let (c1, c2) = (b.connect(), b.connect());
    let holder = Arc::new(InterProcessMutex::new(c1.client.clone(), &path).unwrap());
    let waiter = Arc::new(InterProcessMutex::new(c2.client.clone(), &path).unwrap());
    let patience = b.patience();
    let rt = runtime();
    let held = rt.block_on(holder.lock_owned_async()).unwrap();
    let waiting = rt.spawn({
        let waiter = waiter.clone();
        async move { waiter.lock_owned_async().await }
    });
    eventually(patience, "the waiter queued", || {
        holder.participant_nodes().unwrap().len() == 2
    });
    c2.faults.blip();
    drop(held);
    let guard = rt
        .block_on(async { tokio::time::timeout(patience, waiting).await })
        .expect("the waiter never acquired after the blip")
        .unwrap()
        .unwrap();
    assert_eq!(guard.state(), LockState::Held);
}

/// Waiters queued one after another, each on a session of its own, are served in that order.
fn waiters_are_served_in_the_order_they_queued(b: &dyn Backend) {
    let path = format!("{}/lock", b.root());
    let holder_client = b.connect();
    let holder = Arc::new(InterProcessMutex::new(holder_client.client.clone(), &path).unwrap());
    let patience = b.patience();
    let rt = runtime();
    let held = rt.block_on(holder.lock_owned_async()).unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let clients: Vec<_> = (0..4).map(|_| b.connect()).collect();
    let mut tasks = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        let mutex = Arc::new(InterProcessMutex::new(c.client.clone(), &path).unwrap());
        let order = order.clone();
        tasks.push(rt.spawn(async move {
            let guard = mutex.lock_owned_async().await.unwrap();
            order.lock().unwrap().push(i);
            tokio::time::sleep(Duration::from_millis(1)).await;
            guard.unlock_async().await.unwrap();
        }));
        eventually(patience, "queued in turn", || {
            holder.participant_nodes().unwrap().len() == i + 2
        });
    }
    drop(held);
    rt.block_on(async {
        for task in tasks {
            tokio::time::timeout(patience, task)
                .await
                .expect("a waiter never acquired")
                .unwrap();
        }
    });
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);
}

suite!(tls [
    an_expired_waiter_queues_again_and_acquires,
    an_expired_holder_is_lost_and_the_lock_passes_on,
    a_waiter_whose_link_blips_still_acquires,
    waiters_are_served_in_the_order_they_queued,
]);
