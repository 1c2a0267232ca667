//! InterProcessMutex: Curator's TestInterProcessMutexBase / TestInterProcessMutex cases and the
//! failure modes of the issue, on the memory backend and on a real ZooKeeper server.

#[macro_use]
mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use std::time::Duration;

use common::{children, eventually, Backend};
use zk_locks::locks::{InterProcessLock, InterProcessMutex, LockState, Revoker};
use zk_locks::Error;

fn is_curator_mutex_name(name: &str) -> bool {
    // _c_<uuid>-lock-<seq10>
    let b = name.as_bytes();
    name.len() == 40 + 5 + 10
        && name.starts_with("_c_")
        && b[39] == b'-'
        && name[3..39]
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase() || c == '-')
        && &name[40..45] == "lock-"
        && name[45..].bytes().all(|c| c.is_ascii_digit())
}

fn basic_and_wire_names(b: &dyn Backend) {
    let c = b.connect();
    let path = format!("{}/locks/our-lock", b.root());
    let m = InterProcessMutex::new(c.client.clone(), &path).unwrap();
    let g = m.lock().unwrap();
    let kids = children(c.client.as_ref(), &path);
    assert_eq!(kids.len(), 1);
    assert!(is_curator_mutex_name(&kids[0]), "{kids:?}");
    assert_eq!(g.node_path().unwrap(), format!("{path}/{}", kids[0]));
    assert_eq!(
        m.participant_nodes().unwrap(),
        vec![format!("{path}/{}", kids[0])]
    );
    assert!(m.is_acquired_in_this_process() && m.is_owned_by_current_thread());
    assert_eq!(g.state(), LockState::Held);
    drop(g);
    assert!(children(c.client.as_ref(), &path).is_empty());
    assert!(!m.is_acquired_in_this_process());
}

fn reentrant(b: &dyn Backend) {
    let c = b.connect();
    let m = InterProcessMutex::new(c.client.clone(), &format!("{}/lock", b.root())).unwrap();
    m.acquire().unwrap();
    m.acquire().unwrap();
    assert!(m.acquire_timeout(Duration::ZERO).unwrap());
    assert_eq!(
        m.participant_nodes().unwrap().len(),
        1,
        "reentry creates no node"
    );
    m.release().unwrap();
    m.release().unwrap();
    assert!(m.is_acquired_in_this_process());
    m.release().unwrap();
    assert!(!m.is_acquired_in_this_process());
    assert!(matches!(m.release(), Err(Error::NotOwner { .. })));
}

fn reentrant_two_threads(b: &dyn Backend) {
    let c = b.connect();
    let m =
        Arc::new(InterProcessMutex::new(c.client.clone(), &format!("{}/lock", b.root())).unwrap());
    m.acquire().unwrap();
    m.acquire().unwrap();
    let m2 = m.clone();
    let other = thread::spawn(move || {
        let early = m2.acquire_timeout(Duration::from_millis(100)).unwrap();
        assert!(
            matches!(m2.release(), Err(Error::NotOwner { .. })),
            "a foreign thread cannot release"
        );
        early
    });
    assert!(
        !other.join().unwrap(),
        "the lock is held by the main thread"
    );
    m.release().unwrap();
    m.release().unwrap();
    let m3 = m.clone();
    let later = thread::spawn(move || {
        let ok = m3.acquire_timeout(Duration::from_secs(10)).unwrap();
        m3.release().unwrap();
        ok
    });
    assert!(later.join().unwrap());
    assert!(!m.is_acquired_in_this_process());
}

/// Ten threads share one lock object; a flag proves they never hold it together.
fn single_lock_many_threads(b: &dyn Backend) {
    let c = b.connect();
    let m =
        Arc::new(InterProcessMutex::new(c.client.clone(), &format!("{}/lock", b.root())).unwrap());
    let inside = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..10)
        .map(|_| {
            let (m, inside) = (m.clone(), inside.clone());
            thread::spawn(move || {
                for _ in 0..5 {
                    let _g = m.lock().unwrap();
                    assert!(!inside.swap(true, Ordering::SeqCst), "two holders");
                    thread::yield_now();
                    inside.store(false, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

/// Several sessions, each with threads: exclusion holds across processes' worth of clients.
fn many_sessions_exclude(b: &dyn Backend) {
    let path = format!("{}/lock", b.root());
    let inside = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..4).map(|_| b.connect()).collect();
    thread::scope(|s| {
        for c in &clients {
            let m = Arc::new(InterProcessMutex::new(c.client.clone(), &path).unwrap());
            for _ in 0..2 {
                let (m, inside, count) = (m.clone(), inside.clone(), count.clone());
                s.spawn(move || {
                    for _ in 0..10 {
                        let g = m.lock().unwrap();
                        assert!(g.is_valid());
                        assert!(!inside.swap(true, Ordering::SeqCst), "two holders");
                        count.fetch_add(1, Ordering::SeqCst);
                        inside.store(false, Ordering::SeqCst);
                    }
                });
            }
        }
    });
    assert_eq!(count.load(Ordering::SeqCst), 80);
    assert!(children(clients[0].client.as_ref(), &path).is_empty());
}

fn timeout_leaves_nothing(b: &dyn Backend) {
    let (c1, c2) = (b.connect(), b.connect());
    let path = format!("{}/lock", b.root());
    let m1 = InterProcessMutex::new(c1.client.clone(), &path).unwrap();
    let m2 = InterProcessMutex::new(c2.client.clone(), &path).unwrap();
    let g = m1.lock().unwrap();
    assert!(!m2.acquire_timeout(Duration::from_millis(50)).unwrap());
    assert!(!m2.acquire_timeout(Duration::ZERO).unwrap());
    assert_eq!(
        children(c1.client.as_ref(), &path).len(),
        1,
        "the timed-out node is gone"
    );
    assert!(matches!(m2.release(), Err(Error::NotOwner { .. })));
    drop(g);
    assert!(
        m2.acquire_timeout(Duration::ZERO).unwrap(),
        "uncontended zero timeout acquires"
    );
    m2.release().unwrap();
    eventually(b.patience(), "no watches left", || {
        b.watches_under(&path) == 0
    });
}

fn fifo_order(b: &dyn Backend) {
    let path = format!("{}/lock", b.root());
    let holder_client = b.connect();
    let holder = InterProcessMutex::new(holder_client.client.clone(), &path).unwrap();
    let g = holder.lock().unwrap();
    let n = 12;
    let clients: Vec<_> = (0..n).map(|_| b.connect()).collect();
    let (tx, rx) = mpsc::channel();
    thread::scope(|s| {
        for (i, c) in clients.iter().enumerate() {
            let tx = tx.clone();
            let m = InterProcessMutex::new(c.client.clone(), &path).unwrap();
            s.spawn(move || {
                let _g = m.lock().unwrap();
                tx.send(i).unwrap();
            });
            // Start the next waiter only once this one is queued, so the queue order is known.
            eventually(b.patience(), "waiter queued", || {
                holder.participant_nodes().unwrap().len() == i + 2
            });
        }
        drop(g);
    });
    let order: Vec<usize> = rx.try_iter().collect();
    assert_eq!(order, (0..n).collect::<Vec<_>>());
}

fn panic_in_critical_section_releases(b: &dyn Backend) {
    let c = b.connect();
    let path = format!("{}/lock", b.root());
    let m = InterProcessMutex::new(c.client.clone(), &path).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _g = m.lock().unwrap();
        panic!("boom");
    }));
    assert!(r.is_err());
    assert!(!m.is_acquired_in_this_process());
    assert!(children(c.client.as_ref(), &path).is_empty());
}

/// Curator's testKilledSession: the waiter's session expires; it retries on the new session.
fn killed_session_waiter_acquires(b: &dyn Backend) {
    let path = format!("{}/lock", b.root());
    let (c1, c2) = (b.connect(), b.connect());
    let m1 = InterProcessMutex::new(c1.client.clone(), &path).unwrap();
    let g = m1.lock().unwrap();
    let m2 = InterProcessMutex::new(c2.client.clone(), &path).unwrap();
    let patience = b.patience();
    thread::scope(|s| {
        let waiter = s.spawn(|| {
            let ok = m2.acquire_timeout(patience * 2).unwrap();
            m2.release().unwrap();
            ok
        });
        eventually(patience, "waiter queued", || {
            m1.participant_nodes().unwrap().len() == 2
        });
        c2.faults.expire();
        eventually(patience, "waiter re-queued on its new session", || {
            m1.participant_nodes().unwrap().len() == 2
        });
        drop(g);
        assert!(waiter.join().unwrap());
    });
}

/// The holder's session expires: its guard says Lost, another client gets the lock, and the
/// old holder's release succeeds without touching the new holder's node.
fn expiry_while_holding(b: &dyn Backend) {
    let path = format!("{}/lock", b.root());
    let (c1, c2) = (b.connect(), b.connect());
    let m1 = InterProcessMutex::new(c1.client.clone(), &path).unwrap();
    let m2 = InterProcessMutex::new(c2.client.clone(), &path).unwrap();
    let g1 = m1.lock().unwrap();
    let token1 = g1.fencing_token().unwrap();
    c1.faults.expire();
    assert_eq!(g1.state(), LockState::Lost);
    assert!(!g1.is_valid());
    let g2 = m2
        .try_lock_for(b.patience())
        .unwrap()
        .expect("the lock is free after the expiry");
    assert!(g2.fencing_token().unwrap() > token1, "fencing tokens grow");
    g1.unlock().unwrap();
    assert_eq!(
        m1.participant_nodes().unwrap(),
        vec![g2.node_path().unwrap().to_string()]
    );
    assert!(g2.is_valid());
}

/// A waiter whose watch was dropped by a reconnect still acquires when the holder releases.
fn dropped_watch_still_acquires(b: &dyn Backend) {
    let path = format!("{}/lock", b.root());
    let (c1, c2) = (b.connect(), b.connect());
    let m1 = InterProcessMutex::new(c1.client.clone(), &path).unwrap();
    let m2 = InterProcessMutex::new(c2.client.clone(), &path).unwrap();
    let g = m1.lock().unwrap();
    let patience = b.patience();
    thread::scope(|s| {
        let waiter = s.spawn(|| {
            let ok = m2.acquire_timeout(patience).unwrap();
            m2.release().unwrap();
            ok
        });
        eventually(patience, "waiter queued", || {
            m1.participant_nodes().unwrap().len() == 2
        });
        c2.faults.blip();
        drop(g);
        assert!(waiter.join().unwrap());
    });
    eventually(b.patience(), "no watches left", || {
        b.watches_under(&path) == 0
    });
}

/// A connection blip while holding: the lock survives (same session) and is Held again.
fn blip_while_holding_keeps_lock(b: &dyn Backend) {
    let c = b.connect();
    let m = InterProcessMutex::new(c.client.clone(), &format!("{}/lock", b.root())).unwrap();
    let g = m.lock().unwrap();
    c.faults.blip();
    assert_eq!(
        g.state(),
        LockState::Held,
        "same session: the node is still ours"
    );
}

fn fencing_tokens_increase(b: &dyn Backend) {
    let c = b.connect();
    let m = InterProcessMutex::new(c.client.clone(), &format!("{}/lock", b.root())).unwrap();
    let mut last = i64::MIN;
    for _ in 0..5 {
        let g = m.lock().unwrap();
        let t = g.fencing_token().unwrap();
        assert!(t > last);
        assert_eq!(g.fencing_token().unwrap(), t, "stable while held");
        last = t;
    }
}

fn revoking(b: &dyn Backend) {
    let c = b.connect();
    let path = format!("{}/lock", b.root());
    let m = Arc::new(InterProcessMutex::new(c.client.clone(), &path).unwrap());
    let (tx, rx) = mpsc::channel();
    let tx = parking_lot::Mutex::new(tx);
    m.make_revocable(move || {
        let _ = tx.lock().send(());
    });
    m.acquire().unwrap();
    let nodes = m.participant_nodes().unwrap();
    assert_eq!(nodes.len(), 1);
    let other = b.connect();
    Revoker::attempt_revoke(&other.client, &nodes[0]).unwrap();
    rx.recv_timeout(b.patience())
        .expect("revocation listener called");
    m.release().unwrap();
    let m2 = InterProcessMutex::new(other.client.clone(), &path).unwrap();
    assert!(m2.acquire_timeout(b.patience()).unwrap());
    m2.release().unwrap();
    Revoker::attempt_revoke(&other.client, &nodes[0]).unwrap(); // a gone node is fine
}

/// Watches do not survive a reconnect (the `zookeeper` crate drops them): the revocation
/// watch on our own node must be re-armed, or a revocation after a blip goes unheard.
fn revoking_after_a_reconnect(b: &dyn Backend) {
    let c = b.connect();
    let path = format!("{}/lock", b.root());
    let m = InterProcessMutex::new(c.client.clone(), &path).unwrap();
    let (tx, rx) = mpsc::channel();
    let tx = parking_lot::Mutex::new(tx);
    m.make_revocable(move || {
        let _ = tx.lock().send(());
    });
    let g = m.lock().unwrap();
    c.faults.blip();
    let other = b.connect();
    Revoker::attempt_revoke(&other.client, g.node_path().unwrap()).unwrap();
    rx.recv_timeout(b.patience())
        .expect("revocation listener called after a reconnect");
    drop(g);
}

fn bad_paths_are_typed_errors(b: &dyn Backend) {
    let c = b.connect();
    for bad in [
        "",
        "relative",
        "/trailing/",
        "/a//b",
        "/a/./b",
        "/a/../b",
        "/nul\0",
        "/",
    ] {
        match InterProcessMutex::new(c.client.clone(), bad) {
            Err(Error::InvalidPath { path, .. }) => assert_eq!(path, bad),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
}

fn many_waiters_one_release(b: &dyn Backend) {
    let path = format!("{}/lock", b.root());
    let holder_c = b.connect();
    let holder = InterProcessMutex::new(holder_c.client.clone(), &path).unwrap();
    let g = holder.lock().unwrap();
    let n = 20;
    let clients: Vec<_> = (0..n).map(|_| b.connect()).collect();
    let start = Barrier::new(n + 1);
    let done = AtomicUsize::new(0);
    thread::scope(|s| {
        for c in &clients {
            let (start, done, path) = (&start, &done, &path);
            s.spawn(move || {
                let m = InterProcessMutex::new(c.client.clone(), path).unwrap();
                start.wait();
                let _g = m.lock().unwrap();
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
        start.wait();
        eventually(b.patience(), "all queued", || {
            holder.participant_nodes().unwrap().len() == n + 1
        });
        drop(g);
    });
    assert_eq!(done.load(Ordering::SeqCst), n);
    eventually(b.patience(), "no watches left", || {
        b.watches_under(&path) == 0
    });
}

suite!(tls [
    basic_and_wire_names,
    reentrant,
    reentrant_two_threads,
    single_lock_many_threads,
    many_sessions_exclude,
    timeout_leaves_nothing,
    fifo_order,
    panic_in_critical_section_releases,
    killed_session_waiter_acquires,
    expiry_while_holding,
    dropped_watch_still_acquires,
    blip_while_holding_keeps_lock,
    fencing_tokens_increase,
    revoking,
    revoking_after_a_reconnect,
    bad_paths_are_typed_errors,
    many_waiters_one_release
]);
