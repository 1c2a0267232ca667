//! Owned guards (`lock_owned` / `try_lock_owned_for` on an `Arc` of a recipe): stored, moved
//! to another thread and released there, for every recipe; owned holds are contenders of
//! their own (not reentrant) and release their own hold and nothing else; through a
//! connection blip and a lost session. One body per backend (`suite!`: memory, a real server
//! through both clients); the exact link-down cases on the in-memory ensemble are in
//! `owned_guards_memory` below.

#[macro_use]
mod common;

use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use common::{children, Backend};
use zk_locks::locks::{
    InterProcessLock, InterProcessMultiLock, InterProcessMutex, InterProcessReadWriteLock,
    InterProcessSemaphoreMutex,
};
use zk_locks::{Error, LockState, OwnedLockGuard};

/// How long a contender that must not get in tries (it fails the test only if it gets in).
const KEPT_OUT: Duration = Duration::from_millis(200);

/// The promise of the type, as a user's code needs it: storable, movable, shareable.
#[allow(dead_code)]
fn owned_guards_are_send_sync_static() {
    fn check<T: Send + Sync + 'static>() {}
    check::<OwnedLockGuard<InterProcessMutex>>();
    check::<OwnedLockGuard<zk_locks::locks::ReadLock>>();
    check::<OwnedLockGuard<zk_locks::locks::WriteLock>>();
    check::<OwnedLockGuard<InterProcessSemaphoreMutex>>();
    check::<OwnedLockGuard<InterProcessMultiLock>>();
}

/// A service's state holding a lock: what a borrowed guard cannot be part of.
struct Worker<L: InterProcessLock> {
    guard: OwnedLockGuard<L>,
}

/// Moves `guard` to a new thread, checks it there and drops it there; returns its state seen
/// from that thread.
fn drop_on_another_thread<L: InterProcessLock + 'static>(guard: OwnedLockGuard<L>) -> LockState {
    let worker = Worker { guard };
    thread::spawn(move || {
        let state = worker.guard.state();
        drop(worker);
        state
    })
    .join()
    .expect("the worker thread panicked")
}

fn mutex_guard_moves_and_releases_on_another_thread(b: &dyn Backend) {
    let (ours, theirs) = (b.connect(), b.connect());
    let path = format!("{}/lock", b.root());
    let mutex = Arc::new(InterProcessMutex::new(ours.client.clone(), &path).unwrap());
    let rival = InterProcessMutex::new(theirs.client.clone(), &path).unwrap();

    let guard = mutex.lock_owned().unwrap();
    assert_eq!(guard.state(), LockState::Held);
    assert!(guard.fencing_token().unwrap() > 0);
    assert!(mutex.is_acquired_in_this_process());
    assert!(
        !mutex.is_owned_by_current_thread() && mutex.held_nodes().is_empty(),
        "an owned hold belongs to its guard, not to the thread that took it"
    );
    assert!(rival.try_lock_for(KEPT_OUT).unwrap().is_none());

    assert_eq!(drop_on_another_thread(guard), LockState::Held);
    assert!(children(ours.client.as_ref(), &path).is_empty());
    assert!(!mutex.is_acquired_in_this_process());
    assert!(rival.try_lock_for(b.patience()).unwrap().is_some());
}

fn owned_holds_are_contenders_of_their_own(b: &dyn Backend) {
    let c = b.connect();
    let path = format!("{}/lock", b.root());
    let mutex = Arc::new(InterProcessMutex::new(c.client.clone(), &path).unwrap());

    // Not reentrant: a second owned acquire on the same object waits for the first, and so
    // does the object's thread hold; nothing is left behind by the ones that gave up.
    let first = mutex.lock_owned().unwrap();
    assert!(mutex.try_lock_owned_for(KEPT_OUT).unwrap().is_none());
    assert!(mutex.try_lock_for(KEPT_OUT).unwrap().is_none());
    assert_eq!(children(c.client.as_ref(), &path).len(), 1);

    // Another task sharing the object queues behind it and gets in once it is dropped.
    let (tx, rx) = mpsc::channel();
    let shared = mutex.clone();
    let waiter = thread::spawn(move || {
        let guard = shared.lock_owned();
        tx.send(()).unwrap();
        guard
    });
    assert!(
        rx.recv_timeout(KEPT_OUT).is_err(),
        "got in beside the holder"
    );
    drop(first);
    rx.recv_timeout(b.patience()).expect("the waiter got in");
    let second = waiter.join().unwrap().unwrap();
    assert_eq!(second.state(), LockState::Held);

    // A thread hold keeps owned acquires out too, and stays reentrant for its thread.
    drop(second);
    let thread_hold = mutex.lock().unwrap();
    assert!(mutex.try_lock_owned_for(KEPT_OUT).unwrap().is_none());
    mutex.acquire().unwrap();
    mutex.release().unwrap();
    thread_hold.unlock().unwrap();
    assert!(children(c.client.as_ref(), &path).is_empty());
}

fn read_write_sides(b: &dyn Backend) {
    let c = b.connect();
    let path = format!("{}/rw", b.root());
    let rw = InterProcessReadWriteLock::new(c.client.clone(), &path).unwrap();
    let (reads, writes) = (rw.read_lock_arc(), rw.write_lock_arc());

    // Readers share, from two threads; a writer waits for them.
    let a = reads.lock_owned().unwrap();
    let shared = reads.clone();
    let b_read = thread::spawn(move || shared.lock_owned())
        .join()
        .unwrap()
        .unwrap();
    assert!(writes.try_lock_owned_for(KEPT_OUT).unwrap().is_none());
    // An owned read hold and the thread's read hold of one object are two holds: releasing
    // the owned one leaves the thread's alone.
    let thread_read = rw.read_lock().lock().unwrap();
    assert_eq!(drop_on_another_thread(a), LockState::Held);
    assert_eq!(thread_read.state(), LockState::Held);
    assert!(rw.read_lock().is_owned_by_current_thread());
    thread_read.unlock().unwrap();
    drop(b_read);

    // A writer alone; no downgrade for owned guards: an owned reader waits for it.
    let w = writes.lock_owned().unwrap();
    assert!(reads.try_lock_owned_for(KEPT_OUT).unwrap().is_none());
    assert!(writes.try_lock_owned_for(KEPT_OUT).unwrap().is_none());
    assert_eq!(drop_on_another_thread(w), LockState::Held);
    assert!(reads.try_lock_owned_for(b.patience()).unwrap().is_some());
    assert!(children(c.client.as_ref(), &path).is_empty());
}

fn semaphore_mutex(b: &dyn Backend) {
    let c = b.connect();
    let path = format!("{}/sem", b.root());
    let lock = Arc::new(InterProcessSemaphoreMutex::new(c.client.clone(), &path).unwrap());
    let guard = lock.lock_owned().unwrap();
    assert!(lock.is_acquired_in_this_process());
    assert!(lock.try_lock_owned_for(KEPT_OUT).unwrap().is_none());
    // `release` is for leases taken with `acquire`: it leaves the owned lease alone.
    assert!(matches!(lock.release(), Err(Error::NotAcquired { .. })));
    assert_eq!(guard.state(), LockState::Held);
    let lease = guard.node_path().unwrap().to_string();
    assert_eq!(drop_on_another_thread(guard), LockState::Held);
    assert_eq!(c.client.exists(&lease).unwrap(), None);
    assert!(!lock.is_acquired_in_this_process());
    let again = lock.try_lock_owned_for(b.patience()).unwrap().unwrap();
    again.unlock().unwrap();
}

fn multi_lock_all_or_nothing(b: &dyn Backend) {
    let (ours, theirs) = (b.connect(), b.connect());
    let (pa, pb) = (format!("{}/a", b.root()), format!("{}/b", b.root()));
    let both = Arc::new(
        InterProcessMultiLock::from_paths(ours.client.clone(), &[pa.as_str(), pb.as_str()])
            .unwrap(),
    );
    let rival = InterProcessMutex::new(theirs.client.clone(), &pb).unwrap();

    // The rival holds b: the owned multi-lock times out and gives a back.
    let rival_guard = rival.lock().unwrap();
    assert!(both.try_lock_owned_for(KEPT_OUT).unwrap().is_none());
    assert!(children(ours.client.as_ref(), &pa).is_empty());
    assert!(!both.is_acquired_in_this_process());
    drop(rival_guard);

    let guard = both.lock_owned().unwrap();
    assert_eq!(guard.nodes().len(), 2);
    assert!(both.is_acquired_in_this_process());
    assert!(rival.try_lock_for(KEPT_OUT).unwrap().is_none());
    assert_eq!(drop_on_another_thread(guard), LockState::Held);
    assert!(children(ours.client.as_ref(), &pa).is_empty());
    assert!(children(ours.client.as_ref(), &pb).is_empty());
    assert!(rival.try_lock_for(b.patience()).unwrap().is_some());
}

/// A blip keeps the session: the guard is `Held` again once the link is back, still keeps the
/// rival out, and is released from another thread.
fn through_a_connection_blip(b: &dyn Backend) {
    let (ours, theirs) = (b.connect(), b.connect());
    let path = format!("{}/lock", b.root());
    let mutex = Arc::new(InterProcessMutex::new(ours.client.clone(), &path).unwrap());
    let rival = InterProcessMutex::new(theirs.client.clone(), &path).unwrap();
    let guard = mutex.lock_owned().unwrap();
    ours.faults.blip();
    assert_eq!(guard.state(), LockState::Held);
    assert!(rival.try_lock_for(KEPT_OUT).unwrap().is_none());
    assert_eq!(drop_on_another_thread(guard), LockState::Held);
    assert!(rival.try_lock_for(b.patience()).unwrap().is_some());
}

/// A lost session: the guard says `Lost`, the rival gets in, the lost guard releases from
/// another thread with `Ok`, and the object takes a new owned hold in the new session.
fn through_a_lost_session(b: &dyn Backend) {
    let (ours, theirs) = (b.connect(), b.connect());
    let path = format!("{}/lock", b.root());
    let mutex = Arc::new(InterProcessMutex::new(ours.client.clone(), &path).unwrap());
    let rival = InterProcessMutex::new(theirs.client.clone(), &path).unwrap();
    let guard = mutex.lock_owned().unwrap();
    ours.faults.expire();
    assert_eq!(guard.state(), LockState::Lost);
    let rival_guard = rival.try_lock_for(b.patience()).unwrap().expect("rival in");
    let released = thread::spawn(move || guard.unlock()).join().unwrap();
    assert!(released.is_ok(), "{released:?}");
    assert!(!mutex.is_acquired_in_this_process());
    drop(rival_guard);
    let again = mutex.try_lock_owned_for(b.patience()).unwrap().unwrap();
    assert_eq!(again.state(), LockState::Held);
}

suite!([
    mutex_guard_moves_and_releases_on_another_thread,
    owned_holds_are_contenders_of_their_own,
    read_write_sides,
    semaphore_mutex,
    multi_lock_all_or_nothing,
    through_a_connection_blip,
    through_a_lost_session,
]);

/// Exact link-down cases on the in-memory ensemble: the guard seen `Suspect` and waited on
/// from another thread, a lost guard released from another thread while the link is still
/// down, revocation answered by dropping the owned guard from the listener's thread, and a
/// lock of another crate refused.
mod memory_only {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    use std::time::Duration;

    use zk_locks::client::CountingClient;

    use zk_locks::client::memory::MemoryEnsemble;
    use zk_locks::locks::{HeldNode, Revoker};
    use zk_locks::retry::RetryNTimes;
    use zk_locks::testing::harness::eventually;
    use zk_locks::ZkClient;

    use super::*;

    const PATIENCE: Duration = Duration::from_secs(30);

    #[test]
    fn suspect_while_the_link_is_down_and_waited_on_from_another_thread() {
        let ensemble = MemoryEnsemble::new();
        let client = ensemble.connect();
        let mutex = Arc::new(InterProcessMutex::new(client.clone(), "/owned/lock").unwrap());
        let guard = Arc::new(mutex.lock_owned().unwrap());

        let (tx, rx) = mpsc::channel();
        let watcher = {
            let guard = guard.clone();
            thread::spawn(move || {
                tx.send(guard.wait_while_held(None)).unwrap();
                guard.wait_until_lost(None)
            })
        };
        client.suspend();
        assert_eq!(guard.state(), LockState::Suspect);
        assert_eq!(rx.recv_timeout(PATIENCE), Ok(LockState::Suspect));
        client.resume();
        assert_eq!(guard.state(), LockState::Held);

        client.expire();
        assert_eq!(watcher.join().unwrap(), LockState::Lost);
        let guard = Arc::into_inner(guard).expect("the watcher let go of the guard");
        assert!(guard.unlock().is_ok());
        assert!(!mutex.is_acquired_in_this_process());
    }

    #[test]
    fn a_lost_guard_releases_from_another_thread_without_waiting_for_the_link() {
        let ensemble = MemoryEnsemble::new();
        let (client, theirs) = (ensemble.connect(), ensemble.connect());
        // Minutes of retries: a release that waited for the link could not answer in time.
        let retries = Arc::new(RetryNTimes::new(1000, Duration::from_millis(100)));
        let mutex = Arc::new(
            InterProcessMutex::new(client.clone(), "/owned/lock")
                .unwrap()
                .with_retry_policy(retries),
        );
        let rival = InterProcessMutex::new(theirs.clone(), "/owned/lock").unwrap();
        let guard = mutex.lock_owned().unwrap();

        client.suspend();
        client.expire();
        client.give_up_session();
        assert_eq!(guard.state(), LockState::Lost);
        let rival_guard = rival.try_lock_for(PATIENCE).unwrap().expect("rival in");

        let (tx, rx) = mpsc::channel();
        thread::spawn(move || tx.send(guard.unlock()).unwrap());
        let released = rx.recv_timeout(PATIENCE).expect("the release answered");
        assert!(released.is_ok(), "{released:?}");
        assert!(!mutex.is_acquired_in_this_process());

        client.resume();
        drop(rival_guard);
        let again = mutex.try_lock_owned_for(PATIENCE).unwrap().unwrap();
        assert_eq!(again.state(), LockState::Held);
    }

    #[test]
    fn a_revoked_owned_guard_is_dropped_by_the_listener() {
        let ensemble = MemoryEnsemble::new();
        let (client, theirs) = (ensemble.connect(), ensemble.connect());
        let mutex = Arc::new(InterProcessMutex::new(client.clone(), "/owned/lock").unwrap());
        let rival = InterProcessMutex::new(theirs.clone(), "/owned/lock").unwrap();
        let held: Arc<Mutex<Option<OwnedLockGuard<InterProcessMutex>>>> = Arc::default();
        let slot = held.clone();
        // The listener runs on a thread of its own: an owned guard can be released there.
        mutex.make_revocable(move || drop(slot.lock().unwrap().take()));
        let guard = mutex.lock_owned().unwrap();
        let node = guard.node_path().unwrap().to_string();
        *held.lock().unwrap() = Some(guard);

        let revoker: zk_locks::SharedClient = theirs.clone();
        Revoker::attempt_revoke(&revoker, &node).unwrap();
        assert!(rival.try_lock_for(PATIENCE).unwrap().is_some());
        eventually(PATIENCE, "the revoked hold is forgotten", || {
            !mutex.is_acquired_in_this_process()
        });
        assert_eq!(client.exists(&node).unwrap(), None);
    }

    /// An owned guard costs what a borrowed one does: the uncontended cycle is two round
    /// trips (create + listing pipelined, the delete), and the token comes with the create.
    #[test]
    fn the_uncontended_owned_cycle_is_two_round_trips() {
        let ensemble = MemoryEnsemble::new();
        let counting = Arc::new(CountingClient::new(ensemble.connect()));
        let mutex = Arc::new(InterProcessMutex::new(counting.clone(), "/owned/rt").unwrap());
        drop(mutex.lock_owned().unwrap()); // the directory exists from here on
        counting.reset_counters();
        for _ in 0..10 {
            let guard = mutex.lock_owned().unwrap();
            guard.fencing_token().unwrap();
            assert_eq!(guard.state(), LockState::Held);
            drop(guard);
        }
        let c = counting.counters();
        assert_eq!(c.round_trips, 2 * 10, "{c:?}");
        assert_eq!((c.create, c.get_children, c.delete), (10, 10, 10), "{c:?}");
    }

    /// Threads sharing one lock object through owned guards, moved between threads while
    /// held: never two inside.
    #[test]
    fn threads_sharing_one_object_exclude_each_other() {
        let ensemble = MemoryEnsemble::new();
        let mutex = Arc::new(InterProcessMutex::new(ensemble.connect(), "/owned/lock").unwrap());
        let inside = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..6)
            .map(|_| {
                let (mutex, inside) = (mutex.clone(), inside.clone());
                thread::spawn(move || {
                    for _ in 0..5 {
                        let guard = mutex.lock_owned().unwrap();
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two inside");
                        // Handed to another thread, which leaves and releases.
                        let inside = inside.clone();
                        thread::spawn(move || {
                            inside.fetch_sub(1, Ordering::SeqCst);
                            drop(guard);
                        })
                        .join()
                        .unwrap();
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        assert!(!mutex.is_acquired_in_this_process());
        assert!(children(ensemble.connect().as_ref(), "/owned/lock").is_empty());
    }

    /// A lock of another crate that does not implement owned holds.
    struct Foreign;

    impl InterProcessLock for Foreign {
        fn acquire(&self) -> zk_locks::Result<()> {
            Ok(())
        }
        fn acquire_timeout(&self, _: Duration) -> zk_locks::Result<bool> {
            Ok(true)
        }
        fn release(&self) -> zk_locks::Result<()> {
            Ok(())
        }
        fn is_acquired_in_this_process(&self) -> bool {
            false
        }
        fn held_nodes(&self) -> Vec<Arc<HeldNode>> {
            Vec::new()
        }
    }

    #[test]
    fn a_lock_without_owned_holds_is_refused_and_a_multi_lock_gives_back_the_rest() {
        assert!(matches!(
            Arc::new(Foreign).lock_owned(),
            Err(Error::InvalidArgument { .. })
        ));
        let ensemble = MemoryEnsemble::new();
        let client = ensemble.connect();
        let mutex = InterProcessMutex::new(client.clone(), "/owned/a").unwrap();
        let both =
            Arc::new(InterProcessMultiLock::new(vec![Box::new(mutex), Box::new(Foreign)]).unwrap());
        assert!(matches!(
            both.try_lock_owned_for(PATIENCE),
            Err(Error::InvalidArgument { .. })
        ));
        assert!(children(client.as_ref(), "/owned/a").is_empty());
    }
}
