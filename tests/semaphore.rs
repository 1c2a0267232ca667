//! InterProcessSemaphoreV2 and InterProcessSemaphoreMutex: Curator's TestInterProcessSemaphore
//! and the base mutex cases that apply, on the memory backend and a real server.

#[macro_use]
mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use common::{children, eventually, Backend, TestClient};
use zk_locks::locks::{
    InterProcessLock, InterProcessSemaphoreMutex, InterProcessSemaphoreV2, Lease, LockState,
    SharedCount,
};
use zk_locks::Error;

const SHORT: Duration = Duration::from_millis(100);

fn simple(b: &dyn Backend) {
    let c = b.connect();
    let s =
        InterProcessSemaphoreV2::new(c.client.clone(), &format!("{}/test", b.root()), 1).unwrap();
    let lease = s.acquire_timeout(b.patience()).unwrap().unwrap();
    assert!(s.acquire_timeout(SHORT).unwrap().is_none());
    lease.close().unwrap();
    assert!(s.acquire_timeout(b.patience()).unwrap().is_some());
}

fn simple2(b: &dyn Backend) {
    let c = b.connect();
    let path = format!("{}/test", b.root());
    let s = InterProcessSemaphoreV2::new(c.client.clone(), &path, 3).unwrap();
    let mut leases: Vec<_> = (0..3)
        .map(|_| s.acquire_timeout(b.patience()).unwrap().unwrap())
        .collect();
    assert!(s.acquire_timeout(SHORT).unwrap().is_none());
    assert_eq!(s.participant_nodes().unwrap().len(), 3);
    for l in &leases {
        assert!(
            l.node_name().starts_with("_c_") && l.node_name().contains("-lease-"),
            "{}",
            l.node_name()
        );
        assert!(l.node_path().starts_with(&format!("{path}/leases/")));
        assert!(l.is_valid());
    }
    leases.pop().unwrap().close().unwrap();
    assert!(s.acquire_timeout(b.patience()).unwrap().is_some());
}

fn threads_max_one(b: &dyn Backend) {
    let c = b.connect();
    let s =
        InterProcessSemaphoreV2::new(c.client.clone(), &format!("{}/test", b.root()), 1).unwrap();
    let inside = AtomicBool::new(false);
    thread::scope(|sc| {
        for _ in 0..10 {
            let (s, inside) = (&s, &inside);
            sc.spawn(move || {
                for _ in 0..3 {
                    let lease = s.acquire().unwrap();
                    assert!(!inside.swap(true, Ordering::SeqCst), "two leases of one");
                    inside.store(false, Ordering::SeqCst);
                    drop(lease);
                }
            });
        }
    });
}

/// Curator's testRelease1AtATime: 10 clients, max 5; the peak is exactly 5.
fn release_one_at_a_time(b: &dyn Backend) {
    let path = format!("{}/test", b.root());
    let max = 5;
    let holding = AtomicUsize::new(0);
    let peak = AtomicUsize::new(0);
    let clients: Vec<_> = (0..10).map(|_| b.connect()).collect();
    thread::scope(|sc| {
        for c in &clients {
            let (holding, peak, path) = (&holding, &peak, &path);
            sc.spawn(move || {
                let s = InterProcessSemaphoreV2::new(c.client.clone(), path, max).unwrap();
                let lease = s.acquire().unwrap();
                let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                assert!(now <= max, "{now} leases of {max}");
                // Hold until the pool has been full once, then give back.
                eventually(Duration::from_secs(60), "pool full once", || {
                    peak.load(Ordering::SeqCst) == max
                });
                holding.fetch_sub(1, Ordering::SeqCst);
                drop(lease);
            });
        }
    });
    assert_eq!(peak.load(Ordering::SeqCst), max);
}

/// Curator's testReleaseInChunks, smaller: many threads, released in chunks; peak ≤ max.
fn release_in_chunks(b: &dyn Backend) {
    let c = b.connect();
    let max = 4;
    let s =
        InterProcessSemaphoreV2::new(c.client.clone(), &format!("{}/test", b.root()), max).unwrap();
    let holding = AtomicUsize::new(0);
    let peak = AtomicUsize::new(0);
    thread::scope(|sc| {
        for i in 0..12 {
            let (s, holding, peak) = (&s, &holding, &peak);
            sc.spawn(move || {
                let _ = i;
                let qty = 1; // one lease per thread: partial multi-lease holds could deadlock
                let leases = s.acquire_many(qty).unwrap();
                let now = holding.fetch_add(qty, Ordering::SeqCst) + qty;
                peak.fetch_max(now, Ordering::SeqCst);
                thread::sleep(Duration::from_millis(1));
                holding.fetch_sub(qty, Ordering::SeqCst);
                drop(leases);
            });
        }
    });
    assert!(peak.load(Ordering::SeqCst) <= max);
}

/// Curator's testMaxPerSession: quantities vary, the number held never exceeds the maximum.
fn max_per_session(b: &dyn Backend) {
    let path = format!("{}/test", b.root());
    let max = 5;
    let holding = AtomicUsize::new(0);
    // Leases are taken one at a time (as Curator does), so clients holding part of what they
    // want could block each other for good if their partial holds could fill the pool. With 4
    // clients asking for at most 2 each, at most 4 of the 5 leases are ever held partially:
    // someone can always finish, and no timeout is needed.
    let clients: Vec<_> = (0..4).map(|_| b.connect()).collect();
    let patience = b.patience();
    thread::scope(|sc| {
        for (i, c) in clients.iter().enumerate() {
            let (holding, path) = (&holding, &path);
            sc.spawn(move || {
                let s = InterProcessSemaphoreV2::new(c.client.clone(), path, max).unwrap();
                for j in 0..4 {
                    let qty = 1 + (i + j) % 2;
                    let leases = s
                        .acquire_many_timeout(qty, patience)
                        .unwrap()
                        .expect("no deadlock is possible here");
                    let now = holding.fetch_add(qty, Ordering::SeqCst) + qty;
                    assert!(now <= max, "{now} > {max}");
                    holding.fetch_sub(qty, Ordering::SeqCst);
                    drop(leases);
                }
            });
        }
    });
}

/// Two sessions of `b`, each with a one-lease semaphore at `path`; the first one holds the
/// lease.
fn first_of_two_holds(
    b: &dyn Backend,
    path: &str,
) -> (
    TestClient,
    TestClient,
    InterProcessSemaphoreV2,
    InterProcessSemaphoreV2,
    Lease,
) {
    let (c1, c2) = (b.connect(), b.connect());
    let s1 = InterProcessSemaphoreV2::new(c1.client.clone(), path, 1).unwrap();
    let s2 = InterProcessSemaphoreV2::new(c2.client.clone(), path, 1).unwrap();
    let lease = s1.acquire().unwrap();
    (c1, c2, s1, s2, lease)
}

/// Curator's testClientClose: closing a client frees its leases.
fn client_close_frees_leases(b: &dyn Backend) {
    let path = format!("{}/test", b.root());
    let (c1, _c2, _s1, s2, lease) = first_of_two_holds(b, &path);
    assert!(s2.acquire_timeout(SHORT).unwrap().is_none());
    c1.client.close();
    assert!(!lease.is_valid());
    drop(lease); // returning a lease of a closed client is quiet
    assert!(s2.acquire_timeout(b.patience()).unwrap().is_some());
}

/// Curator's testNoOrphanedNodes: a waiting lease node deleted by hand forces a retry; at the
/// end nothing is left under `leases`.
fn no_orphaned_nodes(b: &dyn Backend) {
    let path = format!("{}/test", b.root());
    let (c1, _c2, s1, s2, lease) = first_of_two_holds(b, &path);
    let leases_path = format!("{path}/leases");
    thread::scope(|sc| {
        let w = sc.spawn(|| s2.acquire_timeout(Duration::from_secs(30)).unwrap());
        eventually(b.patience(), "waiter's lease created", || {
            children(c1.client.as_ref(), &leases_path).len() == 2
        });
        let theirs = children(c1.client.as_ref(), &leases_path)
            .into_iter()
            .find(|n| format!("{leases_path}/{n}") != lease.node_path())
            .unwrap();
        c1.client
            .delete(&format!("{leases_path}/{theirs}"), None)
            .unwrap();
        eventually(b.patience(), "waiter retried", || {
            children(c1.client.as_ref(), &leases_path).len() == 2
        });
        drop(lease);
        let l2 = w.join().unwrap().expect("acquired after retry");
        drop(l2);
    });
    assert!(children(c1.client.as_ref(), &leases_path).is_empty());
    assert!(s1.acquire_timeout(b.patience()).unwrap().is_some());
}

/// Curator's testInterruptAcquire, with a timeout: the timed-out acquire leaves no lease.
fn timed_out_acquire_leaves_no_lease(b: &dyn Backend) {
    let path = format!("{}/test", b.root());
    let c = b.connect();
    let s = InterProcessSemaphoreV2::new(c.client.clone(), &path, 1).unwrap();
    let lease = s.acquire().unwrap();
    assert!(s.acquire_many_timeout(1, SHORT).unwrap().is_none());
    assert_eq!(
        children(c.client.as_ref(), &format!("{path}/leases")).len(),
        1
    );
    assert!(
        children(c.client.as_ref(), &format!("{path}/locks")).is_empty(),
        "admission released"
    );
    drop(lease);
    eventually(b.patience(), "no watches left", || {
        b.watches_under(&path) == 0
    });
}

/// Curator's testThreadedLeaseIncrease: raising the shared count wakes a waiter.
fn lease_count_increase_wakes_waiter(b: &dyn Backend) {
    let root = b.root();
    let c = b.connect();
    let count = SharedCount::new(c.client.clone(), &format!("{root}/count"), 1).unwrap();
    let s = InterProcessSemaphoreV2::with_shared_count(
        c.client.clone(),
        &format!("{root}/test"),
        count.clone(),
    )
    .unwrap();
    let first = s.acquire().unwrap();
    thread::scope(|sc| {
        let w = sc.spawn(|| s.acquire_timeout(Duration::from_secs(30)).unwrap());
        eventually(b.patience(), "waiter queued", || {
            s.participant_nodes().unwrap().len() == 2
        });
        let other = b.connect();
        let writer = SharedCount::new(other.client.clone(), &format!("{root}/count"), 1).unwrap();
        writer.set_count(2).unwrap();
        assert!(w.join().unwrap().is_some());
    });
    assert_eq!(count.get_count(), 2);
    drop(first);
}

fn bad_input(b: &dyn Backend) {
    let c = b.connect();
    let path = format!("{}/test", b.root());
    assert!(matches!(
        InterProcessSemaphoreV2::new(c.client.clone(), &path, 0),
        Err(Error::InvalidArgument {
            name: "max_leases",
            ..
        })
    ));
    let s = InterProcessSemaphoreV2::new(c.client.clone(), &path, 2).unwrap();
    assert!(matches!(
        s.acquire_many(0),
        Err(Error::InvalidArgument { name: "qty", .. })
    ));
    assert!(matches!(
        s.acquire_many(3),
        Err(Error::InvalidArgument { name: "qty", .. })
    ));
    assert!(matches!(
        InterProcessSemaphoreV2::new(c.client.clone(), "bad", 1),
        Err(Error::InvalidPath { .. })
    ));
    let m = InterProcessSemaphoreMutex::new(c.client.clone(), &path).unwrap();
    assert!(matches!(m.release(), Err(Error::NotAcquired { .. })));
    assert!(children(c.client.as_ref(), &format!("{path}/leases")).is_empty());
}

/// Lease holders see the session: expiry makes the lease Lost and frees it.
fn expiry_while_holding_lease(b: &dyn Backend) {
    let path = format!("{}/test", b.root());
    let (c1, _c2, _s1, s2, lease) = first_of_two_holds(b, &path);
    let token = lease.fencing_token().unwrap();
    c1.faults.expire();
    assert!(!lease.is_valid());
    let l2 = s2.acquire_timeout(b.patience()).unwrap().unwrap();
    assert!(l2.fencing_token().unwrap() > token);
    drop(lease);
    assert!(l2.is_valid());
}

fn expiry_while_waiting_for_lease(b: &dyn Backend) {
    let path = format!("{}/test", b.root());
    let (_c1, c2, s1, s2, lease) = first_of_two_holds(b, &path);
    let patience = b.patience();
    thread::scope(|sc| {
        let w = sc.spawn(|| s2.acquire_timeout(patience * 2).unwrap());
        eventually(patience, "waiting", || {
            s1.participant_nodes().unwrap().len() == 2
        });
        c2.faults.expire();
        drop(lease);
        assert!(w.join().unwrap().is_some());
    });
}

// --- InterProcessSemaphoreMutex: the base mutex cases that apply (not the reentrant ones).

fn semaphore_mutex_basics(b: &dyn Backend) {
    let path = format!("{}/locks/our-lock", b.root());
    let (c1, c2) = (b.connect(), b.connect());
    let m1 = Arc::new(InterProcessSemaphoreMutex::new(c1.client.clone(), &path).unwrap());
    let m2 = InterProcessSemaphoreMutex::new(c2.client.clone(), &path).unwrap();
    {
        let g = m1.lock().unwrap();
        assert!(g.is_valid());
        assert!(!m2.acquire_timeout(SHORT).unwrap());
        assert!(
            !m1.acquire_timeout(SHORT).unwrap(),
            "not reentrant: the same object waits too"
        );
    }
    assert!(m2.acquire_timeout(Duration::from_secs(10)).unwrap());
    assert!(m2.is_acquired_in_this_process());
    // Releasable from any thread.
    let m2 = Arc::new(m2);
    let m2b = m2.clone();
    thread::spawn(move || m2b.release().unwrap())
        .join()
        .unwrap();
    assert!(matches!(m2.release(), Err(Error::NotAcquired { .. })));
}

fn semaphore_mutex_two_clients_exclude(b: &dyn Backend) {
    let path = format!("{}/locks/our-lock", b.root());
    let inside = AtomicBool::new(false);
    let clients: Vec<_> = (0..3).map(|_| b.connect()).collect();
    thread::scope(|sc| {
        for c in &clients {
            let (inside, path) = (&inside, &path);
            sc.spawn(move || {
                let m = InterProcessSemaphoreMutex::new(c.client.clone(), path).unwrap();
                for _ in 0..5 {
                    let _g = m.lock().unwrap();
                    assert!(!inside.swap(true, Ordering::SeqCst), "two holders");
                    inside.store(false, Ordering::SeqCst);
                }
            });
        }
    });
}

/// The session expires under a guard; the same object is acquired again (a new lease); the
/// old guard, dropped late, must not return the new lease.
fn semaphore_mutex_lost_guard_releases_only_its_own_lease(b: &dyn Backend) {
    let path = format!("{}/locks/our-lock", b.root());
    let (c1, c2) = (b.connect(), b.connect());
    let m = InterProcessSemaphoreMutex::new(c1.client.clone(), &path).unwrap();
    let other = InterProcessSemaphoreMutex::new(c2.client.clone(), &path).unwrap();
    let lost = m.lock().unwrap();
    c1.faults.expire();
    assert_eq!(lost.state(), LockState::Lost);
    let current = m
        .try_lock_for(b.patience())
        .unwrap()
        .expect("acquired again in the new session");
    assert!(
        lost.unlock().is_ok(),
        "a lost lease needs no release (the server deleted it)"
    );
    assert_eq!(current.state(), LockState::Held);
    assert!(
        other.try_lock_for(SHORT).unwrap().is_none(),
        "another client got in: the lost guard returned the current lease"
    );
    drop(current);
    assert!(other.try_lock_for(b.patience()).unwrap().is_some());
}

/// `release()` (Curator style, from any thread) must not return a lease that a guard of
/// another thread holds: a typed error, and the guard keeps its lease.
fn semaphore_mutex_release_leaves_another_threads_guard_alone(b: &dyn Backend) {
    let path = format!("{}/locks/our-lock", b.root());
    let (c1, c2) = (b.connect(), b.connect());
    let m = InterProcessSemaphoreMutex::new(c1.client.clone(), &path).unwrap();
    let other = InterProcessSemaphoreMutex::new(c2.client.clone(), &path).unwrap();
    let guard = m.lock().unwrap();
    let from_other_thread = thread::scope(|s| s.spawn(|| m.release()).join().unwrap());
    assert!(
        matches!(from_other_thread, Err(Error::NotOwner { .. })),
        "{from_other_thread:?}"
    );
    assert_eq!(guard.state(), LockState::Held);
    assert!(
        other.try_lock_for(SHORT).unwrap().is_none(),
        "another client got in while the guard held the lease"
    );
    guard.unlock().unwrap();
    assert!(other.try_lock_for(b.patience()).unwrap().is_some());
}

/// A blip drops every watch; the maximum is then lowered to 1 by another client. The cached
/// count must follow (re-armed after the reconnect), and the semaphore must not grant two
/// leases.
fn shared_count_follows_changes_after_a_blip(b: &dyn Backend) {
    let root = b.root();
    let count_path = format!("{root}/count");
    let (c1, c2) = (b.connect(), b.connect());
    let count = SharedCount::new(c1.client.clone(), &count_path, 2).unwrap();
    let s = InterProcessSemaphoreV2::with_shared_count(
        c1.client.clone(),
        &format!("{root}/test"),
        count.clone(),
    )
    .unwrap();
    let (seen, values) = mpsc::channel();
    count.subscribe(move |v| {
        let _ = seen.send(v);
    });
    c1.faults.blip();
    SharedCount::new(c2.client.clone(), &count_path, 2)
        .unwrap()
        .set_count(1)
        .unwrap();
    assert_eq!(
        values.recv_timeout(b.patience()),
        Ok(1),
        "the count did not follow the change made after the blip"
    );
    let first = s.acquire_timeout(b.patience()).unwrap().expect("one lease");
    assert!(
        s.acquire_timeout(SHORT).unwrap().is_none(),
        "two leases granted with a maximum of 1"
    );
    drop(first);
}

/// Issue 25 item 3: bursts of changes from another session, each ending on a lowered
/// maximum of 1. The watching side must follow every burst to its last value (a change right
/// after the read that armed the watch used to be dropped with the watch), and the semaphore
/// must then grant one lease, not two.
fn shared_count_follows_bursts_and_the_semaphore_keeps_the_lowered_maximum(b: &dyn Backend) {
    let root = b.root();
    let count_path = format!("{root}/count");
    let (c1, c2) = (b.connect(), b.connect());
    let count = SharedCount::new(c1.client.clone(), &count_path, 5).unwrap();
    let writer = SharedCount::new(c2.client.clone(), &count_path, 5).unwrap();
    let s = InterProcessSemaphoreV2::with_shared_count(
        c1.client.clone(),
        &format!("{root}/test"),
        count.clone(),
    )
    .unwrap();
    for round in 0..10 {
        for v in 2..=12 {
            writer.set_count(v).unwrap();
        }
        writer.set_count(-7).unwrap();
        writer.set_count(1).unwrap();
        eventually(
            b.patience(),
            &format!("round {round}: the count follows to 1"),
            || count.get_count() == 1,
        );
        let first = s.acquire_timeout(b.patience()).unwrap().expect("one lease");
        assert!(
            s.acquire_timeout(SHORT).unwrap().is_none(),
            "round {round}: two leases granted with a maximum of 1"
        );
        drop(first);
        // A value of this round's own, seen before the next burst: the next round's wait for
        // 1 cannot pass on this round's 1 before its burst is seen.
        let marker = 100 + round;
        writer.set_count(marker).unwrap();
        eventually(b.patience(), "the round's marker seen", || {
            count.get_count() == marker
        });
    }
}

/// The raise half of issue 25 item 3: a waiter held out by a maximum of 1 is granted when a
/// burst of changes from another session ends on 2 (a dropped notification left it asleep
/// until its timeout).
fn a_waiter_wakes_for_a_raise_at_the_end_of_a_burst(b: &dyn Backend) {
    let root = b.root();
    let count_path = format!("{root}/count");
    let (c1, c2) = (b.connect(), b.connect());
    let count = SharedCount::new(c1.client.clone(), &count_path, 1).unwrap();
    let writer = SharedCount::new(c2.client.clone(), &count_path, 1).unwrap();
    let s = InterProcessSemaphoreV2::with_shared_count(
        c1.client.clone(),
        &format!("{root}/test"),
        count.clone(),
    )
    .unwrap();
    for round in 0..5 {
        writer.set_count(1).unwrap();
        eventually(b.patience(), "maximum 1 seen", || count.get_count() == 1);
        let first = s.acquire_timeout(b.patience()).unwrap().expect("one lease");
        thread::scope(|sc| {
            let w = sc.spawn(|| s.acquire_timeout(b.patience()).unwrap());
            eventually(b.patience(), "the waiter queued", || {
                s.participant_nodes().unwrap().len() == 2
            });
            for v in [-3, 0, -1, 0] {
                writer.set_count(v).unwrap();
            }
            writer.set_count(2).unwrap();
            let second = w.join().unwrap();
            assert!(
                second.is_some(),
                "round {round}: the raise to 2 never woke the waiter"
            );
        });
        drop(first);
    }
}

suite!(tls [
    simple,
    simple2,
    threads_max_one,
    release_one_at_a_time,
    release_in_chunks,
    max_per_session,
    client_close_frees_leases,
    no_orphaned_nodes,
    timed_out_acquire_leaves_no_lease,
    lease_count_increase_wakes_waiter,
    bad_input,
    expiry_while_holding_lease,
    expiry_while_waiting_for_lease,
    semaphore_mutex_basics,
    semaphore_mutex_two_clients_exclude,
    semaphore_mutex_lost_guard_releases_only_its_own_lease,
    semaphore_mutex_release_leaves_another_threads_guard_alone,
    shared_count_follows_changes_after_a_blip,
    shared_count_follows_bursts_and_the_semaphore_keeps_the_lowered_maximum,
    a_waiter_wakes_for_a_raise_at_the_end_of_a_burst,
]);
