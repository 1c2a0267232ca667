//! A holder whose node someone else deletes (an operator, a peer with the open ACL) turns
//! `Lost` while it is waited on: every guard kind (mutex, multi-lock, semaphore lease, a bare
//! `HeldNode` as zklock waits on it) arms a watch on its own node when someone waits, and the
//! deletion ends the wait. On the memory backend and on a real server (both clients).

#[macro_use]
mod common;

use std::sync::Arc;
use std::thread;

use common::{eventually, Backend, Memory, TestClient};
use zk_locks::client::memory::Fault;
use zk_locks::client::Op;
use zk_locks::locks::{
    InterProcessLock, InterProcessMultiLock, InterProcessMutex, InterProcessSemaphoreV2, LockState,
    Revoker,
};

/// Deletes `node` through `other` once a watch is armed at or below `dir` (the waiting
/// holder's own: nobody else watches there).
fn delete_once_watched(b: &dyn Backend, other: &TestClient, dir: &str, node: &str) {
    eventually(b.patience(), "the holder watches its node", || {
        b.watches_under(dir) >= 1
    });
    other.client.delete(node, None).unwrap();
}

fn mutex_guard_turns_lost(b: &dyn Backend) {
    let (c, other) = (b.connect(), b.connect());
    let path = format!("{}/lock", b.root());
    let m = InterProcessMutex::new(c.client.clone(), &path).unwrap();
    let g = m.lock().unwrap();
    let node = g.node_path().unwrap().to_string();
    thread::scope(|s| {
        s.spawn(|| delete_once_watched(b, &other, &path, &node));
        assert_eq!(g.wait_until_lost(Some(b.patience())), LockState::Lost);
    });
    assert_eq!(g.state(), LockState::Lost);
    // A lost hold needs no release, and the next acquisition is a fresh one.
    g.unlock().unwrap();
    let g = m.lock().unwrap();
    assert_eq!(g.state(), LockState::Held);
}

/// zklock's supervision waits on the bare `HeldNode` from a thread of its own.
fn held_node_wait_while_held_turns_lost(b: &dyn Backend) {
    let (c, other) = (b.connect(), b.connect());
    let path = format!("{}/lock", b.root());
    let m = InterProcessMutex::new(c.client.clone(), &path).unwrap();
    m.acquire().unwrap();
    let node = m.held_node().unwrap();
    let waiting = {
        let node = node.clone();
        let patience = b.patience();
        thread::spawn(move || node.wait_while_held(Some(patience)))
    };
    delete_once_watched(b, &other, &path, node.path());
    assert_eq!(waiting.join().unwrap(), LockState::Lost);
    m.release().unwrap();
}

fn multi_lock_guard_turns_lost(b: &dyn Backend) {
    let (c, other) = (b.connect(), b.connect());
    let root = b.root();
    let (pa, pb) = (format!("{root}/a"), format!("{root}/b"));
    let both = InterProcessMultiLock::from_paths(c.client.clone(), &[&pa, &pb]).unwrap();
    let g = both.lock().unwrap();
    let second = g.nodes()[1].path().to_string();
    thread::scope(|s| {
        s.spawn(|| {
            // Both nodes are watched while the guard is waited on.
            eventually(b.patience(), "the holder watches both nodes", || {
                b.watches_under(&pa) >= 1 && b.watches_under(&pb) >= 1
            });
            delete_once_watched(b, &other, &pb, &second)
        });
        assert_eq!(g.wait_while_held(Some(b.patience())), LockState::Lost);
    });
    assert_eq!(g.state(), LockState::Lost);
}

fn semaphore_lease_turns_lost(b: &dyn Backend) {
    let (c, other) = (b.connect(), b.connect());
    let path = format!("{}/sem", b.root());
    let sem = InterProcessSemaphoreV2::new(c.client.clone(), &path, 2).unwrap();
    let lease = Arc::new(sem.acquire().unwrap());
    let node = lease.node_path().to_string();
    thread::scope(|s| {
        s.spawn(|| delete_once_watched(b, &other, &format!("{path}/leases"), &node));
        assert_eq!(
            lease.held_node().wait_until_lost(Some(b.patience())),
            LockState::Lost
        );
    });
    assert_eq!(lease.state(), LockState::Lost);
}

/// A change of the node's data (a revocation request) fires the watch too: the holder keeps
/// waiting, watching again, and the deletion after it still ends the wait.
fn a_data_change_keeps_the_holder_watching(b: &dyn Backend) {
    let (c, other) = (b.connect(), b.connect());
    let path = format!("{}/lock", b.root());
    let m = InterProcessMutex::new(c.client.clone(), &path).unwrap();
    let g = m.lock().unwrap();
    let node = g.node_path().unwrap().to_string();
    thread::scope(|s| {
        s.spawn(|| {
            eventually(b.patience(), "the holder watches its node", || {
                b.watches_under(&path) >= 1
            });
            Revoker::attempt_revoke(&other.client, &node).unwrap();
            delete_once_watched(b, &other, &path, &node);
        });
        assert_eq!(g.wait_while_held(Some(b.patience())), LockState::Lost);
    });
}

/// A node deleted before anyone waits is found gone by the wait's first arming.
fn a_node_deleted_before_the_wait_is_lost_at_once(b: &dyn Backend) {
    let (c, other) = (b.connect(), b.connect());
    let path = format!("{}/lock", b.root());
    let m = InterProcessMutex::new(c.client.clone(), &path).unwrap();
    let g = m.lock().unwrap();
    other.client.delete(g.node_path().unwrap(), None).unwrap();
    assert_eq!(
        g.state(),
        LockState::Held,
        "state() alone reads nothing while connected"
    );
    assert_eq!(g.wait_while_held(Some(b.patience())), LockState::Lost);
    assert_eq!(g.state(), LockState::Lost);
}

/// The watch is kept across a reconnect (restored, or armed again where the backend drops
/// watches): a deletion after the blip still ends the wait.
fn deleted_after_a_reconnect(b: &dyn Backend) {
    let (c, other) = (b.connect(), b.connect());
    let path = format!("{}/lock", b.root());
    let m = InterProcessMutex::new(c.client.clone(), &path).unwrap();
    m.acquire().unwrap();
    let node = m.held_node().unwrap();
    let waiting = {
        let node = node.clone();
        let patience = b.patience();
        thread::spawn(move || node.wait_until_lost(Some(patience)))
    };
    eventually(b.patience(), "the holder watches its node", || {
        b.watches_under(&path) >= 1
    });
    c.faults.blip();
    assert!(!waiting.is_finished(), "a blip is not a loss");
    delete_once_watched(b, &other, &path, node.path());
    assert_eq!(waiting.join().unwrap(), LockState::Lost);
    m.release().unwrap();
}

suite!([
    mutex_guard_turns_lost,
    held_node_wait_while_held_turns_lost,
    multi_lock_guard_turns_lost,
    semaphore_lease_turns_lost,
    a_data_change_keeps_the_holder_watching,
    a_node_deleted_before_the_wait_is_lost_at_once,
    deleted_after_a_reconnect
]);

/// The wait's arming times out while the link stays up (no session change will come): the
/// wait arms again after a pause, and the deletion after it still ends the wait.
#[test]
fn a_timed_out_arming_is_tried_again() {
    let b = Memory::new();
    let (c, other) = (b.connect(), b.connect());
    let path = format!("{}/lock", b.root());
    let m = InterProcessMutex::new(c.client.clone(), &path).unwrap();
    let g = m.lock().unwrap();
    let node = g.node_path().unwrap().to_string();
    let memory = c.memory().unwrap();
    memory.inject(Fault::timeout(Op::GetData).on_path(&node));
    thread::scope(|s| {
        s.spawn(|| delete_once_watched(&b, &other, &path, &node));
        assert_eq!(g.wait_until_lost(Some(b.patience())), LockState::Lost);
    });
    assert_eq!(memory.counters().get_data, 2, "armed twice");
}

/// The arming's connection is lost (the watch was never set): after the reconnect the wait
/// verifies the node, arms again, and the deletion ends it.
#[test]
fn an_arming_lost_with_the_connection_is_armed_after_the_reconnect() {
    for restore in [false, true] {
        let b = Memory::new();
        let (c, other) = (b.connect(), b.connect());
        c.memory().unwrap().set_watches_survive_reconnect(restore);
        let path = format!("{}/lock", b.root());
        let m = InterProcessMutex::new(c.client.clone(), &path).unwrap();
        let g = m.lock().unwrap();
        let node = g.node_path().unwrap().to_string();
        c.memory()
            .unwrap()
            .inject(Fault::before(Op::GetData).on_path(&node));
        thread::scope(|s| {
            s.spawn(|| delete_once_watched(&b, &other, &path, &node));
            assert_eq!(g.wait_until_lost(Some(b.patience())), LockState::Lost);
        });
    }
}
