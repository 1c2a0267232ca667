//! A wait that ends without its watch firing leaves no watch callback on its client (issue
//! 39, item 6): a latch closed while it waits behind the leader, a timed-out mutex acquire
//! and a timed-out semaphore lease each used to keep one callback registered until the node ahead changed, so a
//! process that joins and leaves elections while one leader stays grew without bound (20
//! closes: 20 callbacks). Curator's `close()` removes its watchers. The count is the
//! client's own registry: every callback counted on the memory ensemble
//! (`MemoryEnsemble::watcher_count`), `NativeClient::watch_count` on a real server.

use std::sync::Arc;
use std::time::Duration;

use zk_locks::client::memory::MemoryEnsemble;
use zk_locks::client::native::NativeClient;
use zk_locks::locks::{InterProcessLock, InterProcessSemaphoreV2, LeaderLatch};
use zk_locks::testing::harness::eventually;
use zk_locks::{InterProcessMutex, SharedClient};

const ROUNDS: usize = 20;
const PATIENCE: Duration = Duration::from_secs(10);

/// `ROUNDS` latches on `waiting`, each started behind the leader, then closed: the callbacks
/// `count()` sees afterwards must not grow with the rounds.
fn closed_waiting_latches(
    leader_client: SharedClient,
    waiting: SharedClient,
    path: &str,
    count: impl Fn() -> usize,
) {
    let leader = LeaderLatch::new(leader_client, path, "leader").unwrap();
    leader.start().unwrap();
    leader.await_leadership_for(PATIENCE).unwrap().unwrap();
    let before = count();
    for i in 0..ROUNDS {
        let latch = LeaderLatch::new(waiting.clone(), path, format!("w{i}")).unwrap();
        latch.start().unwrap();
        eventually(PATIENCE, "the latch queued", || {
            latch.participants().map(|p| p.len() == 2).unwrap_or(false)
        });
        // Its watch on the leader's node is registered once its wait has begun.
        eventually(PATIENCE, "the latch waits", || count() > before);
        latch.close().unwrap();
    }
    let after = count();
    // One more at most: the leader's own watch on its node, which its thread may arm after
    // `before` was read (the memory ensemble counts every client's callbacks).
    assert!(
        after <= before + 1,
        "{after} callbacks left after {ROUNDS} closed waiting latches (before: {before})"
    );
    leader.close().unwrap();
}

/// `ROUNDS` timed-out acquires of a mutex held on another client.
fn timed_out_acquires(
    holder_client: SharedClient,
    waiting: SharedClient,
    path: &str,
    count: impl Fn() -> usize,
) {
    let held = InterProcessMutex::new(holder_client, path).unwrap();
    held.acquire().unwrap();
    let before = count();
    let mutex = InterProcessMutex::new(waiting, path).unwrap();
    for _ in 0..ROUNDS {
        let acquired = mutex.acquire_timeout(Duration::from_millis(20)).unwrap();
        assert!(!acquired);
    }
    let after = count();
    assert!(
        after <= before,
        "{after} callbacks left after {ROUNDS} timed-out acquires (before: {before})"
    );
    held.release().unwrap();
}

/// `ROUNDS` timed-out acquires of a one-lease semaphore whose lease is held on another
/// client (a waiting lease watches the lease directory's children).
fn timed_out_leases(
    holder_client: SharedClient,
    waiting: SharedClient,
    path: &str,
    count: impl Fn() -> usize,
) {
    let held = InterProcessSemaphoreV2::new(holder_client, path, 1).unwrap();
    let lease = held.acquire().unwrap();
    let before = count();
    let semaphore = InterProcessSemaphoreV2::new(waiting, path, 1).unwrap();
    for _ in 0..ROUNDS {
        let acquired = semaphore
            .acquire_timeout(Duration::from_millis(20))
            .unwrap();
        assert!(acquired.is_none());
    }
    let after = count();
    assert!(
        after <= before,
        "{after} callbacks left after {ROUNDS} timed-out leases (before: {before})"
    );
    drop(lease);
}

#[test]
fn timed_out_leases_leave_no_callback_on_the_memory_ensemble() {
    let e = Arc::new(MemoryEnsemble::new());
    let counted = e.clone();
    timed_out_leases(e.connect(), e.connect(), "/pool", move || {
        counted.watcher_count()
    });
}

#[test]
fn closed_waiting_latches_leave_no_callback_on_the_memory_ensemble() {
    let e = Arc::new(MemoryEnsemble::new());
    let counted = e.clone();
    closed_waiting_latches(e.connect(), e.connect(), "/election", move || {
        counted.watcher_count()
    });
}

#[test]
fn timed_out_acquires_leave_no_callback_on_the_memory_ensemble() {
    let e = Arc::new(MemoryEnsemble::new());
    let counted = e.clone();
    timed_out_acquires(e.connect(), e.connect(), "/lock", move || {
        counted.watcher_count()
    });
}

/// The same on a real server through our own client: its registry is what grew.
#[test]
fn closed_waiting_latches_and_timed_out_acquires_leave_no_callback_on_a_real_server() {
    let Some(server) = zk_locks::testing::shared_server() else {
        return;
    };
    let hosts = server.connect_string();
    let connect = || NativeClient::connect(&hosts, Duration::from_secs(10)).unwrap();
    let root = format!("/ended-waits-{}", std::process::id());
    let (leader, waiting) = (connect(), connect());
    let counted = waiting.clone();
    closed_waiting_latches(
        leader.clone(),
        waiting.clone(),
        &format!("{root}/election"),
        move || counted.watch_count(),
    );
    let counted = waiting.clone();
    timed_out_acquires(
        leader.clone(),
        waiting.clone(),
        &format!("{root}/lock"),
        move || counted.watch_count(),
    );
    let counted = waiting.clone();
    timed_out_leases(leader, waiting, &format!("{root}/pool"), move || {
        counted.watch_count()
    });
}
