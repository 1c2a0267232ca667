//! A wait that ends without its watch firing leaves no watch callback on its client (issue
//! 39, item 6): a latch closed while it waits behind the leader, a timed-out mutex acquire
//! and a timed-out semaphore lease each used to keep one callback registered until the node ahead changed, so a
//! process that joins and leaves elections while one leader stays grew without bound (20
//! closes: 20 callbacks). Curator's `close()` removes its watchers. The count is the
//! client's own registry: every callback counted on the memory ensemble
//! (`MemoryEnsemble::watcher_count`), `NativeClient::watch_count` on a real server.
//!
//! The server's side (issue 40, item 3): once a wait's callback is gone and no other callback
//! of this client needs the same server watch, the native client sends `removeWatches`, so the
//! server keeps no watch for the session either (counted with `wchp`, by session).

use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_locks::client::memory::MemoryEnsemble;
use zk_locks::client::native::NativeClient;
use zk_locks::locks::{
    InterProcessLock, InterProcessReadWriteLock, InterProcessSemaphoreV2, LeaderLatch,
};
use zk_locks::testing::harness::eventually;
use zk_locks::testing::harness::watches::watches_in;
use zk_locks::testing::TestingServer;
use zk_locks::{InterProcessMutex, SharedClient, ZkClient};

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

/// The paths the server watches for `client`'s session (`wchp`: every path, then the
/// sessions watching it), sorted; empty when the server does not answer.
fn server_watches(server: &TestingServer, client: &SharedClient) -> Vec<String> {
    let Some(session) = client.session().session_id() else {
        return Vec::new();
    };
    let me = format!("{session:#x}");
    let wchp = server.four_letter("wchp").unwrap_or_default();
    let mut paths: Vec<String> = watches_in(&wchp)
        .filter(|(_, s)| *s == me)
        .map(|(p, _)| p.to_string())
        .collect();
    paths.sort();
    paths
}

/// Polls the server every 20 ms until `cond` holds for `client`'s watches; fails after
/// `PATIENCE` with what the server last listed.
fn until_server_watches(
    server: &TestingServer,
    client: &SharedClient,
    what: &str,
    cond: impl Fn(&[String]) -> bool,
) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let watches = server_watches(server, client);
        if cond(&watches) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for: {what}; the server watches {watches:?} for the session"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A timed-out acquire behind a holder leaves no watch on the server for the waiting session:
/// its callback removed, the client sends `removeWatches` for the node it watched.
#[test]
fn a_timed_out_acquire_leaves_no_server_watch_for_its_session() {
    let Some(server) = zk_locks::testing::shared_server() else {
        return;
    };
    let hosts = server.connect_string();
    let connect = || NativeClient::connect(&hosts, Duration::from_secs(10)).unwrap();
    let path = format!("/ended-waits-server-{}/lock", std::process::id());
    let (holder_client, waiting): (SharedClient, SharedClient) = (connect(), connect());
    let held = InterProcessMutex::new(holder_client, &path).unwrap();
    held.acquire().unwrap();
    let mutex = InterProcessMutex::new(waiting.clone(), &path).unwrap();
    let wait = std::thread::spawn(move || mutex.acquire_timeout(Duration::from_secs(3)));
    until_server_watches(server, &waiting, "the waiter's watch on the server", |w| {
        !w.is_empty()
    });
    assert!(!wait.join().unwrap().unwrap(), "acquired behind a holder");
    until_server_watches(server, &waiting, "no server watch left", |w| w.is_empty());
    held.release().unwrap();
}

/// Two readers of one client wait behind the same writer (one server watch on its node for
/// the session, two callbacks): the one that times out must not remove the watch the other
/// still needs — it stays on the server (`server()` unchanged), and the other reader gets the
/// lock when the writer lets go. `settle` makes a round trip on the readers' session.
fn timed_out_reader_beside_a_patient_one(
    writer_client: SharedClient,
    readers: SharedClient,
    path: &str,
    server: impl Fn() -> usize,
    callbacks: impl Fn() -> usize,
) {
    let writer = InterProcessReadWriteLock::new(writer_client, path).unwrap();
    writer.write_lock().acquire().unwrap();
    let before = callbacks();
    let patient = InterProcessReadWriteLock::new(readers.clone(), path).unwrap();
    let patient = std::thread::spawn(move || {
        let got = patient.read_lock().acquire_timeout(PATIENCE * 3).unwrap();
        if got {
            patient.read_lock().release().unwrap();
        }
        got
    });
    eventually(PATIENCE, "the patient reader waits", || {
        callbacks() == before + 1
    });
    let watched = server();
    let hasty = InterProcessReadWriteLock::new(readers.clone(), path).unwrap();
    let hasty = std::thread::spawn(move || {
        hasty
            .read_lock()
            .acquire_timeout(Duration::from_secs(2))
            .unwrap()
    });
    eventually(PATIENCE, "both readers wait", || callbacks() == before + 2);
    assert!(!hasty.join().unwrap(), "read behind a writer");
    // A removeWatches would have been written before the hasty acquire returned; a round trip
    // on the session after it means the server has applied it.
    readers.exists("/").unwrap();
    assert_eq!(
        server(),
        watched,
        "the patient reader's watch on the server"
    );
    assert_eq!(callbacks(), before + 1, "the patient reader's callback");
    writer.write_lock().release().unwrap();
    assert!(
        patient.join().unwrap(),
        "the patient reader never got the lock"
    );
}

#[test]
fn a_timed_out_reader_keeps_the_server_watch_another_reader_of_its_client_needs() {
    let Some(server) = zk_locks::testing::shared_server() else {
        return;
    };
    let hosts = server.connect_string();
    let connect = || NativeClient::connect(&hosts, Duration::from_secs(10)).unwrap();
    let path = format!("/ended-waits-readers-{}/rw", std::process::id());
    let (writer, readers) = (connect(), connect());
    let (shared, counted): (SharedClient, _) = (readers.clone(), readers.clone());
    timed_out_reader_beside_a_patient_one(
        writer,
        readers,
        &path,
        move || server_watches(server, &shared).len(),
        move || counted.watch_count(),
    );
}

/// The memory ensemble keeps the server's watch as its callbacks' entries: one of two gone,
/// the session still watches (`watch_count` counts as `wchc` does).
#[test]
fn a_timed_out_reader_keeps_the_watch_another_reader_needs_on_the_memory_ensemble() {
    let e = Arc::new(MemoryEnsemble::new());
    let (watches, callbacks) = (e.clone(), e.clone());
    timed_out_reader_beside_a_patient_one(
        e.connect(),
        e.connect(),
        "/rw",
        move || watches.watch_count(),
        move || callbacks.watcher_count(),
    );
}

/// The memory ensemble's server-side count (as `wchc`) after timed-out acquires: no watch
/// left for the waiting session (the model's watch goes with its callback).
#[test]
fn timed_out_acquires_leave_no_server_watch_on_the_memory_ensemble() {
    let e = Arc::new(MemoryEnsemble::new());
    let counted = e.clone();
    timed_out_acquires(e.connect(), e.connect(), "/lock", move || {
        counted.watch_count()
    });
}
