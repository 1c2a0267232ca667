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
use common::{Backend, TestClient};
use tokio::task::JoinHandle;
use zk_locks::locks::{InterProcessLock, InterProcessMutex, OwnedLockGuard};
use zk_locks::testing::harness::eventually;
use zk_locks::LockState;

type Guard = OwnedLockGuard<InterProcessMutex>;

/// A holder and a waiter on sessions of their own: the holder's guard taken, the waiter's
/// future waiting as a tokio task, queued behind it.
struct Queued {
    rt: tokio::runtime::Runtime,
    holder_session: TestClient,
    waiter_session: TestClient,
    holder: Arc<InterProcessMutex>,
    held: Guard,
    waiting: JoinHandle<zk_locks::Result<Guard>>,
}

fn queued(b: &dyn Backend) -> Queued {
    let path = format!("{}/lock", b.root());
    let (holder_session, waiter_session) = (b.connect(), b.connect());
    let holder = Arc::new(InterProcessMutex::new(holder_session.client.clone(), &path).unwrap());
    let waiter = Arc::new(InterProcessMutex::new(waiter_session.client.clone(), &path).unwrap());
    let rt = runtime();
    let held = rt.block_on(holder.lock_owned_async()).unwrap();
    let waiting = rt.spawn(async move { waiter.lock_owned_async().await });
    eventually(b.patience(), "the waiter queued", || queue(&holder) == 2);
    Queued {
        rt,
        holder_session,
        waiter_session,
        holder,
        held,
        waiting,
    }
}

fn queue(lock: &InterProcessMutex) -> usize {
    lock.participant_nodes().unwrap().len()
}

/// The waiter's guard, once it has the lock.
fn granted(rt: &tokio::runtime::Runtime, waiting: JoinHandle<zk_locks::Result<Guard>>) -> Guard {
    let patience = Duration::from_secs(30);
    rt.block_on(async { tokio::time::timeout(patience, waiting).await })
        .expect("the waiter never acquired")
        .unwrap()
        .unwrap()
}

/// A waiter's session expires while it waits: it queues again on its new session and gets
/// the lock once the holder lets go.
fn an_expired_waiter_queues_again_and_acquires(b: &dyn Backend) {
    let q = queued(b);
    q.waiter_session.faults.expire();
    eventually(
        b.patience(),
        "the waiter queued again on its new session",
        || queue(&q.holder) == 2,
    );
    drop(q.held);
    let guard = granted(&q.rt, q.waiting);
    assert_eq!(guard.state(), LockState::Held);
    assert_eq!(queue(&q.holder), 1);
}

/// The holder's session expires: its guard reads `Lost`, the lock passes to the waiting future
/// with a larger fencing token, and the old guard's release leaves the new holder's node.
fn an_expired_holder_is_lost_and_the_lock_passes_on(b: &dyn Backend) {
    let q = queued(b);
    let token = q.held.fencing_token().unwrap();
    q.holder_session.faults.expire();
    assert_eq!(q.held.state(), LockState::Lost);
    let guard = granted(&q.rt, q.waiting);
    assert!(
        guard.fencing_token().unwrap() > token,
        "fencing tokens grow"
    );
    q.rt.block_on(q.held.unlock_async()).unwrap();
    assert_eq!(
        q.holder.participant_nodes().unwrap(),
        vec![guard.node_path().unwrap().to_string()]
    );
    assert!(guard.is_valid());
}

/// A waiter's link blips (the `zookeeper` crate drops its watch, our client restores it): it
/// still acquires when the holder lets go.
fn a_waiter_whose_link_blips_still_acquires(b: &dyn Backend) {
    let q = queued(b);
    q.waiter_session.faults.blip();
    drop(q.held);
    assert_eq!(granted(&q.rt, q.waiting).state(), LockState::Held);
}

/// Waiters queued one after another, each on a session of its own, are served in that order.
fn waiters_are_served_in_the_order_they_queued(b: &dyn Backend) {
    let path = format!("{}/lock", b.root());
    let holder_session = b.connect();
    let holder = Arc::new(InterProcessMutex::new(holder_session.client.clone(), &path).unwrap());
    let patience = b.patience();
    let rt = runtime();
    let held = rt.block_on(holder.lock_owned_async()).unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let sessions: Vec<_> = (0..4).map(|_| b.connect()).collect();
    let mut tasks = Vec::new();
    for (i, session) in sessions.iter().enumerate() {
        let mutex = Arc::new(InterProcessMutex::new(session.client.clone(), &path).unwrap());
        let order = order.clone();
        tasks.push(rt.spawn(async move {
            let guard = mutex.lock_owned_async().await.unwrap();
            order.lock().unwrap().push(i);
            tokio::time::sleep(Duration::from_millis(1)).await;
            guard.unlock_async().await.unwrap();
        }));
        eventually(patience, "queued in turn", || queue(&holder) == i + 2);
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
