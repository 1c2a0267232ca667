//! One path, one kind of lock: a mutex, a read/write lock and a semaphore name their nodes
//! differently and none excludes the others, so a recipe that finds another kind's nodes in
//! its directory refuses with `Error::OtherLockKind` (naming the path and the kind found)
//! instead of holding beside them, and leaves nothing behind. `participants()` names each
//! node by its own kind. On the memory backend (zklock as a process: `tests/zklock.rs`).

use zk_locks::client::memory::{MemoryClient, MemoryEnsemble};
use zk_locks::locks::{
    InterProcessLock, InterProcessReadWriteLock, InterProcessSemaphoreMutex,
    InterProcessSemaphoreV2, LockLayout, ParticipantKind,
};
use zk_locks::{CreateMode, Error, InterProcessMutex, SharedClient, ZkClient};

fn shared(c: &std::sync::Arc<MemoryClient>) -> SharedClient {
    c.clone()
}

#[track_caller]
fn assert_other_kind<T: std::fmt::Debug>(
    result: zk_locks::Result<T>,
    path: &str,
    wanted: LockLayout,
    found: LockLayout,
) {
    match result {
        Err(e @ Error::OtherLockKind { .. }) => {
            let Error::OtherLockKind {
                path: p,
                wanted: w,
                found: f,
                ..
            } = &e
            else {
                unreachable!()
            };
            assert_eq!(p.as_str(), path, "{e}");
            assert!(*w == wanted && *f == found, "{e}");
            assert_eq!((w.as_str(), f.as_str()), (wanted.as_str(), found.as_str()));
            let text = e.to_string();
            assert!(
                text.contains(path) && text.contains(found.as_str()),
                "{text}"
            );
            assert!(!e.is_retryable());
        }
        other => panic!("expected OtherLockKind({found}) at {path}, got {other:?}"),
    }
}

/// The lock nodes (not the semaphore's directories) left in `path`.
fn lock_nodes(e: &MemoryEnsemble, path: &str) -> Vec<String> {
    let mut nodes = e.children(path).unwrap_or_default();
    nodes.retain(|n| n != "locks" && n != "leases");
    nodes
}

#[test]
fn a_read_write_lock_refuses_a_path_a_mutex_holds_and_back() {
    let e = MemoryEnsemble::new();
    let (a, b) = (e.connect(), e.connect());
    let mutex = InterProcessMutex::new(shared(&a), "/p").unwrap();
    let held = mutex.lock().unwrap();
    let rw = InterProcessReadWriteLock::new(shared(&b), "/p").unwrap();
    let (rm, wm) = (LockLayout::ReadWrite, LockLayout::Mutex);
    assert_other_kind(rw.read_lock().lock().map(drop), "/p", rm, wm);
    assert_other_kind(rw.write_lock().lock().map(drop), "/p", rm, wm);
    assert_eq!(
        lock_nodes(&e, "/p"),
        [held.node_path().unwrap().rsplit('/').next().unwrap()]
    );
    assert!(held.is_valid());
    drop(held);

    let write = rw.write_lock().lock().unwrap();
    assert_other_kind(mutex.lock().map(drop), "/p", wm, rm);
    assert_eq!(lock_nodes(&e, "/p").len(), 1);
    drop(write);
    // Once the other kind is gone, the path is free for any kind.
    drop(mutex.lock().unwrap());
}

#[test]
fn a_mutex_and_a_read_write_lock_refuse_a_path_a_semaphore_holds() {
    let e = MemoryEnsemble::new();
    let (a, b) = (e.connect(), e.connect());
    let sem = InterProcessSemaphoreV2::new(shared(&a), "/p", 1).unwrap();
    let lease = sem.acquire().unwrap();
    let mutex = InterProcessMutex::new(shared(&b), "/p").unwrap();
    let (m, s) = (LockLayout::Mutex, LockLayout::Semaphore);
    assert_other_kind(mutex.lock().map(drop), "/p", m, s);
    let rw = InterProcessReadWriteLock::new(shared(&b), "/p").unwrap();
    assert_other_kind(
        rw.read_lock().lock().map(drop),
        "/p",
        LockLayout::ReadWrite,
        s,
    );
    assert_eq!(lock_nodes(&e, "/p"), Vec::<String>::new());
    assert!(lease.is_valid());
}

/// The semaphore, which lists its own directory only when it made its lease directory, finds
/// the mutex that took the path while no semaphore was there; it withdraws (lease, the lease
/// directory it made, admission) and the path works again as a semaphore once the mutex is
/// gone. A semaphore mutex is a semaphore.
#[test]
fn a_semaphore_refuses_a_path_a_mutex_or_a_reader_holds() {
    let e = MemoryEnsemble::new();
    let (a, b) = (e.connect(), e.connect());
    let mutex = InterProcessMutex::new(shared(&a), "/p").unwrap();
    let held = mutex.lock().unwrap();
    let sem = InterProcessSemaphoreV2::new(shared(&b), "/p", 1).unwrap();
    let (s, m) = (LockLayout::Semaphore, LockLayout::Mutex);
    assert_other_kind(sem.acquire(), "/p", s, m);
    assert_eq!(
        e.children("/p/leases"),
        None,
        "the lease directory it made is gone"
    );
    assert_eq!(
        e.children("/p/locks").unwrap_or_default(),
        Vec::<String>::new()
    );
    let semaphore_mutex = InterProcessSemaphoreMutex::new(shared(&b), "/p").unwrap();
    assert_other_kind(semaphore_mutex.lock().map(drop), "/p", s, m);
    assert!(held.is_valid());
    drop(held);
    drop(sem.acquire().unwrap());

    let rw = InterProcessReadWriteLock::new(shared(&a), "/q").unwrap();
    let read = rw.read_lock().lock().unwrap();
    let sem = InterProcessSemaphoreV2::new(shared(&b), "/q", 3).unwrap();
    assert_other_kind(sem.acquire(), "/q", s, LockLayout::ReadWrite);
    drop(read);
}

/// Nodes of the same kind are not another kind's: Curator's protected mutex nodes and bare
/// ones queue with ours; a semaphore's own `locks` and `leases` do not stop it.
#[test]
fn the_same_kind_by_another_client_is_queued_behind() {
    let e = MemoryEnsemble::new();
    let (a, b) = (e.connect(), e.connect());
    a.create("/p", b"", CreateMode::Persistent).unwrap();
    let bare = a
        .create("/p/lock-", b"", CreateMode::EphemeralSequential)
        .unwrap();
    let mutex = InterProcessMutex::new(shared(&b), "/p").unwrap();
    assert!(!mutex
        .acquire_timeout(std::time::Duration::from_millis(50))
        .unwrap());
    a.delete(&bare, None).unwrap();
    drop(mutex.lock().unwrap());

    let sem = InterProcessSemaphoreV2::new(shared(&b), "/s", 2).unwrap();
    let first = sem.acquire().unwrap();
    drop(sem.acquire().unwrap());
    drop(first);
}

/// `participants()` lists the nodes of its own kind only (a node of another kind is not in
/// its queue), so each node is named by its own kind.
#[test]
fn participants_name_each_node_by_its_own_kind() {
    let e = MemoryEnsemble::new();
    let (a, b) = (e.connect(), e.connect());
    let mutex = InterProcessMutex::new(shared(&a), "/p").unwrap();
    let held = mutex.lock().unwrap();
    // A reader of an older version (or another library) that queued beside it anyway.
    let reader = b
        .create("/p/_c_x-__READ__", b"", CreateMode::EphemeralSequential)
        .unwrap();
    let queue = mutex.participants().unwrap();
    assert_eq!(queue.len(), 1, "{queue:?}");
    assert_eq!(queue[0].path, held.node_path().unwrap());
    assert_eq!(queue[0].kind, ParticipantKind::Mutex);
    let rw = InterProcessReadWriteLock::new(shared(&b), "/p").unwrap();
    let queue = rw.participants().unwrap();
    assert_eq!(queue.len(), 1, "{queue:?}");
    assert_eq!(
        (queue[0].path.as_str(), queue[0].kind),
        (reader.as_str(), ParticipantKind::Read)
    );
}
