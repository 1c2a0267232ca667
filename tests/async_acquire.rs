//! The async acquires (`lock_owned_async`, `try_lock_owned_async`): the engine the blocking
//! calls run, polled by an executor, on every backend (memory, a real server through both
//! clients). What must hold at each point a future can be dropped:
//! - **queued** (waiting behind a holder): its node goes, the queue behind it moves on;
//! - **mid-create** (polled once, its create out, no answer yet): the node the create makes is
//!   deleted when the answer comes (a frozen link holds the answer back), or found by its
//!   prefix when none comes;
//! - **suspended** (its link down): its node is deleted once the link is back;
//! - **granted, not polled again** (the lock passed to it, the future not polled since): the
//!   grant passes on to the next in line;
//!
//! and that a timeout (the `Acquire`'s or the caller's) and a cancel token end it with nothing
//! left, that both read/write sides and the multi-lock queue as the blocking calls do, and
//! that the guard it returns releases on drop.

#[macro_use]
mod common;
#[path = "support/awaiting.rs"]
mod awaiting;

use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use awaiting::{off_runtime, poll_once, runtime};
use common::Backend;
use zk_locks::client::native::NativeClient;
use zk_locks::locks::{
    Acquire, CancelToken, InterProcessLock, InterProcessMultiLock, InterProcessMutex,
    InterProcessReadWriteLock,
};
use zk_locks::testing::harness::{children, eventually, unique_root};
use zk_locks::testing::{shared_server, FaultProxy};
use zk_locks::{Error, LockState, ZkClient};

/// Taken, held against a second future, handed over when the first guard drops.
fn an_async_acquire_excludes_and_hands_over(b: &dyn Backend) {
    let (a, c) = (b.connect(), b.connect());
    let path = format!("{}/lock", b.root());
    let first = Arc::new(InterProcessMutex::new(a.client.clone(), &path).unwrap());
    let second = Arc::new(InterProcessMutex::new(c.client.clone(), &path).unwrap());
    let patience = b.patience();
    runtime().block_on(async {
        let held = first.lock_owned_async().await.unwrap();
        assert_eq!(held.state(), LockState::Held);
        let waiting = tokio::spawn({
            let second = second.clone();
            async move { second.lock_owned_async().await }
        });
        let queued = first.clone();
        off_runtime(patience, "the second queued", move || {
            queued.participant_nodes().unwrap().len() == 2
        })
        .await;
        assert!(!waiting.is_finished(), "two holders");
        drop(held);
        let taken = tokio::time::timeout(patience, waiting)
            .await
            .expect("the waiter was not handed the lock")
            .unwrap()
            .unwrap();
        assert_eq!(taken.state(), LockState::Held);
    });
    // The guard of the second was dropped with the runtime's task: released unawaited.
    eventually(patience, "the last guard's node deleted", || {
        children(a.client.as_ref(), &path).is_empty()
    });
}

/// `unlock_async` reports the release once its delete was answered: the node is gone then.
fn unlock_async_reports_the_release(b: &dyn Backend) {
    let a = b.connect();
    let path = format!("{}/lock", b.root());
    let mutex = Arc::new(InterProcessMutex::new(a.client.clone(), &path).unwrap());
    runtime().block_on(async {
        let guard = mutex.lock_owned_async().await.unwrap();
        assert_eq!(mutex.participant_nodes().unwrap().len(), 1);
        guard.unlock_async().await.unwrap();
        assert!(mutex.participant_nodes().unwrap().is_empty());
        assert!(!mutex.is_acquired_in_this_process());
    });
}

/// Dropped while queued: its node goes, and the one queued behind it gets the lock next.
fn dropped_while_queued_leaves_no_node(b: &dyn Backend) {
    let (a, c, d) = (b.connect(), b.connect(), b.connect());
    let path = format!("{}/lock", b.root());
    let holder = Arc::new(InterProcessMutex::new(a.client.clone(), &path).unwrap());
    let dropped = Arc::new(InterProcessMutex::new(c.client.clone(), &path).unwrap());
    let behind = Arc::new(InterProcessMutex::new(d.client.clone(), &path).unwrap());
    let patience = b.patience();
    let held = holder.lock_owned().unwrap();
    runtime().block_on(async {
        let queued = tokio::spawn({
            let dropped = dropped.clone();
            async move { dropped.lock_owned_async().await }
        });
        let count = holder.clone();
        off_runtime(patience, "queued", move || {
            count.participant_nodes().unwrap().len() == 2
        })
        .await;
        let last = tokio::spawn({
            let behind = behind.clone();
            async move { behind.lock_owned_async().await }
        });
        let count = holder.clone();
        off_runtime(patience, "the third queued", move || {
            count.participant_nodes().unwrap().len() == 3
        })
        .await;
        queued.abort(); // dropped while queued
        let count = holder.clone();
        off_runtime(patience, "the dropped waiter's node deleted", move || {
            count.participant_nodes().unwrap().len() == 2
        })
        .await;
        drop(held);
        let guard = tokio::time::timeout(patience, last)
            .await
            .expect("the one behind the dropped waiter was not handed the lock")
            .unwrap()
            .unwrap();
        assert_eq!(guard.state(), LockState::Held);
    });
}

/// The lock passes to a future that is not polled again before it is dropped: the grant
/// passes on to the next in line.
fn granted_but_not_polled_passes_the_grant_on(b: &dyn Backend) {
    let (a, c, d) = (b.connect(), b.connect(), b.connect());
    let path = format!("{}/lock", b.root());
    let holder = Arc::new(InterProcessMutex::new(a.client.clone(), &path).unwrap());
    let granted = Arc::new(InterProcessMutex::new(c.client.clone(), &path).unwrap());
    let next = Arc::new(InterProcessMutex::new(d.client.clone(), &path).unwrap());
    let patience = b.patience();
    let held = holder.lock_owned().unwrap();
    let mut future = Box::pin(granted.lock_owned_async());
    // Polled until it waits behind the holder.
    eventually(patience, "the future queued", || {
        assert!(poll_once(future.as_mut()).is_pending());
        holder.participant_nodes().unwrap().len() == 2
    });
    let node = holder.participant_nodes().unwrap()[1].clone();
    drop(held); // the lock is the future's now; it is not polled again
    eventually(patience, "the holder's node deleted", || {
        holder.participant_nodes().unwrap().first() == Some(&node)
    });
    drop(future);
    let guard = next
        .try_lock_owned_for(patience)
        .unwrap()
        .expect("the grant did not pass on");
    assert_eq!(holder.participant_nodes().unwrap().len(), 1);
    drop(guard);
}

/// Polled once (its create sent) and dropped at once, many times over: no node is left.
fn dropped_right_after_the_first_poll_leaves_no_node(b: &dyn Backend) {
    let (a, c) = (b.connect(), b.connect());
    let path = format!("{}/lock", b.root());
    let holder = Arc::new(InterProcessMutex::new(a.client.clone(), &path).unwrap());
    let dropped = Arc::new(InterProcessMutex::new(c.client.clone(), &path).unwrap());
    let held = holder.lock_owned().unwrap();
    for _ in 0..100 {
        let mut future = pin!(dropped.lock_owned_async());
        assert!(poll_once(future.as_mut()).is_pending());
    }
    eventually(b.patience(), "every dropped future's node deleted", || {
        children(a.client.as_ref(), &path).len() == 1
    });
    drop(held);
}

/// A timeout in the `Acquire` and the caller's own timeout both end the wait with nothing
/// left; a cancelled token ends it with `Cancelled`.
fn timeouts_and_cancels_leave_nothing(b: &dyn Backend) {
    let (a, c) = (b.connect(), b.connect());
    let path = format!("{}/lock", b.root());
    let holder = Arc::new(InterProcessMutex::new(a.client.clone(), &path).unwrap());
    let waiter = Arc::new(InterProcessMutex::new(c.client.clone(), &path).unwrap());
    let patience = b.patience();
    let held = holder.lock_owned().unwrap();
    runtime().block_on(async {
        let how = Acquire::new().timeout(Duration::from_millis(100));
        assert!(waiter.try_lock_owned_async(how).await.unwrap().is_none());
        let theirs = tokio::time::timeout(Duration::from_millis(100), waiter.lock_owned_async());
        assert!(theirs.await.is_err());
        let token = CancelToken::new();
        let cancelled = tokio::spawn(waiter.try_lock_owned_async(Acquire::new().cancel(&token)));
        let count = holder.clone();
        off_runtime(patience, "queued", move || {
            count.participant_nodes().unwrap().len() == 2
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
    eventually(patience, "only the holder's node left", || {
        children(a.client.as_ref(), &path).len() == 1
    });
    drop(held);
}

/// Both read/write sides and the multi-lock: readers share, a writer waits for them, a
/// multi-lock takes all its locks or, dropped, gives back what it took.
fn read_write_and_multi_lock_queue_as_the_blocking_calls(b: &dyn Backend) {
    let (a, c) = (b.connect(), b.connect());
    let root = b.root();
    let rw_a = InterProcessReadWriteLock::new(a.client.clone(), &format!("{root}/rw")).unwrap();
    let rw_c = InterProcessReadWriteLock::new(c.client.clone(), &format!("{root}/rw")).unwrap();
    let (reads_a, reads_c, writes_c) = (
        rw_a.read_lock_arc(),
        rw_c.read_lock_arc(),
        rw_c.write_lock_arc(),
    );
    let patience = b.patience();
    let paths = [format!("{root}/x"), format!("{root}/y")];
    let path_refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    let multi = Arc::new(InterProcessMultiLock::from_paths(c.client.clone(), &path_refs).unwrap());
    let y_holder = Arc::new(InterProcessMutex::new(a.client.clone(), &paths[1]).unwrap());
    runtime().block_on(async {
        let r1 = reads_a.lock_owned_async().await.unwrap();
        let r2 = reads_c.lock_owned_async().await.unwrap(); // readers share
        let how = Acquire::new().timeout(Duration::from_millis(100));
        assert!(writes_c
            .try_lock_owned_async(how.clone())
            .await
            .unwrap()
            .is_none());
        drop((r1, r2));
        let w = tokio::time::timeout(patience, writes_c.lock_owned_async())
            .await
            .expect("the writer did not get the lock once the readers left")
            .unwrap();
        drop(w);
        // The multi-lock: y is held elsewhere, so it takes x and waits on y; dropped, x goes.
        let y = y_holder.lock_owned_async().await.unwrap();
        assert!(multi.try_lock_owned_async(how).await.unwrap().is_none());
        let waiting = tokio::time::timeout(Duration::from_millis(100), multi.lock_owned_async());
        assert!(waiting.await.is_err());
        drop(y);
        let both = tokio::time::timeout(patience, multi.lock_owned_async())
            .await
            .expect("the multi-lock did not take both")
            .unwrap();
        assert_eq!(both.nodes().len(), 2);
    });
    eventually(patience, "every node released", || {
        paths
            .iter()
            .all(|p| children(a.client.as_ref(), p).is_empty())
    });
}

/// Dropped while its link is down (the memory ensemble's suspended client): its node is
/// deleted once the link is back.
fn dropped_while_suspended_leaves_no_node(b: &dyn Backend) {
    let (a, c) = (b.connect(), b.connect());
    let Some(memory) = c.memory() else {
        return; // the real servers' version is `native_dropped_while_cut_off`
    };
    let path = format!("{}/lock", b.root());
    let holder = Arc::new(InterProcessMutex::new(a.client.clone(), &path).unwrap());
    let dropped = Arc::new(InterProcessMutex::new(c.client.clone(), &path).unwrap());
    let held = holder.lock_owned().unwrap();
    let mut future = Box::pin(dropped.lock_owned_async());
    eventually(b.patience(), "queued", || {
        assert!(poll_once(future.as_mut()).is_pending());
        holder.participant_nodes().unwrap().len() == 2
    });
    memory.suspend();
    assert!(poll_once(future.as_mut()).is_pending());
    drop(future);
    assert_eq!(
        holder.participant_nodes().unwrap().len(),
        2,
        "deleted while down?"
    );
    memory.resume();
    eventually(b.patience(), "the node deleted once back", || {
        holder.participant_nodes().unwrap().len() == 1
    });
    drop(held);
}

suite!(tls [
    an_async_acquire_excludes_and_hands_over,
    unlock_async_reports_the_release,
    dropped_while_queued_leaves_no_node,
    granted_but_not_polled_passes_the_grant_on,
    dropped_right_after_the_first_poll_leaves_no_node,
    timeouts_and_cancels_leave_nothing,
    read_write_and_multi_lock_queue_as_the_blocking_calls,
    dropped_while_suspended_leaves_no_node,
]);

const PATIENCE: Duration = Duration::from_secs(30);

/// A native client on a shared server through a fault proxy, and a plain one for looking.
fn through_proxy() -> Option<(FaultProxy, Arc<NativeClient>, Arc<NativeClient>)> {
    let server = shared_server()?;
    let proxy = FaultProxy::start(server.addr()).unwrap();
    let client = NativeClient::connect(&proxy.connect_string(), Duration::from_secs(10)).unwrap();
    let looker = NativeClient::connect(&server.connect_string(), Duration::from_secs(10)).unwrap();
    Some((proxy, client, looker))
}

/// Mid-create: the create is out on a frozen link when the future is dropped; once the link
/// thaws, the node the create made is deleted.
#[test]
fn native_dropped_mid_create_leaves_no_node() {
    let Some((proxy, client, looker)) = through_proxy() else {
        return;
    };
    let path = format!("{}/lock", unique_root("async-mid-create"));
    let holder = Arc::new(InterProcessMutex::new(looker.clone(), &path).unwrap());
    let held = holder.lock_owned().unwrap();
    let dropped = Arc::new(InterProcessMutex::new(client.clone(), &path).unwrap());
    proxy.freeze();
    {
        let mut future = pin!(dropped.lock_owned_async());
        assert!(poll_once(future.as_mut()).is_pending()); // the create is out, unanswered
    }
    assert_eq!(holder.participant_nodes().unwrap().len(), 1);
    proxy.thaw();
    // Applied once it gets through; deleted once its answer comes back.
    eventually(PATIENCE, "the abandoned create's node deleted", || {
        holder.participant_nodes().unwrap().len() == 1
            && children(looker.as_ref(), &path).len() == 1
    });
    drop(held);
    eventually(PATIENCE, "the lock directory empty", || {
        children(looker.as_ref(), &path).is_empty()
    });
    client.close();
}

/// Suspended: the future waits in the queue, the link is cut and kept down, the future is
/// dropped; once the link is back, its node is deleted and the lock passes on.
#[test]
fn native_dropped_while_cut_off_leaves_no_node() {
    let Some((proxy, client, looker)) = through_proxy() else {
        return;
    };
    let path = format!("{}/lock", unique_root("async-cut-off"));
    let holder = Arc::new(InterProcessMutex::new(looker.clone(), &path).unwrap());
    let held = holder.lock_owned().unwrap();
    let dropped = Arc::new(InterProcessMutex::new(client.clone(), &path).unwrap());
    let mut future = Box::pin(dropped.lock_owned_async());
    eventually(PATIENCE, "queued", || {
        assert!(poll_once(future.as_mut()).is_pending());
        holder.participant_nodes().unwrap().len() == 2
    });
    proxy.refuse(true);
    proxy.cut();
    eventually(PATIENCE, "the client sees the link down", || {
        !client.session().state().is_connected()
    });
    drop(future);
    assert_eq!(holder.participant_nodes().unwrap().len(), 2);
    proxy.refuse(false);
    eventually(PATIENCE, "the node deleted once the link is back", || {
        holder.participant_nodes().unwrap().len() == 1
    });
    drop(held);
    client.close();
}

/// With the link down, an acquire waits for it as a blocking request does (up to the call
/// timeout) instead of failing at once: with no retries allowed, it still gets the lock once
/// the link is back, through either API.
#[test]
fn native_acquire_waits_for_the_link_as_a_blocking_request_does() {
    let Some((proxy, client, _looker)) = through_proxy() else {
        return;
    };
    let path = format!("{}/lock", unique_root("async-link-wait"));
    let mutex = Arc::new(
        InterProcessMutex::new(client.clone(), &path)
            .unwrap()
            .with_retry_policy(Arc::new(zk_locks::retry::NoRetry)),
    );
    for asynchronous in [false, true] {
        proxy.refuse(true);
        proxy.cut();
        eventually(PATIENCE, "the client sees the link down", || {
            !client.session().state().is_connected()
        });
        let taking = std::thread::spawn({
            let mutex = mutex.clone();
            move || match asynchronous {
                false => mutex.lock_owned(),
                true => runtime().block_on(mutex.lock_owned_async()),
            }
        });
        // Not granted while the link is down, and not failed either.
        std::thread::sleep(Duration::from_millis(200));
        assert!(!taking.is_finished(), "gave up while the link was down");
        proxy.refuse(false);
        let guard = taking
            .join()
            .unwrap()
            .expect("no lock once the link was back");
        assert_eq!(guard.state(), LockState::Held);
    }
    client.close();
}
