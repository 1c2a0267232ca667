//! InterProcessMultiLock: the base mutex cases over two paths, Curator's
//! testSomeReleasesFail / testSomeLocksFailToLock, mixed kinds, and ordering against deadlock.

#[macro_use]
mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use common::{children, Backend};
use zk_locks::locks::{
    HeldNode, InterProcessLock, InterProcessMultiLock, InterProcessMutex,
    InterProcessReadWriteLock, InterProcessSemaphoreMutex, LockState,
};
use zk_locks::{Error, Result, SharedClient};

fn paths(b: &dyn Backend) -> (String, String) {
    let root = b.root();
    (
        format!("{root}/locks/our-lock-1"),
        format!("{root}/locks/our-lock-2"),
    )
}

fn basic_two_paths(b: &dyn Backend) {
    let (p1, p2) = paths(b);
    let c = b.connect();
    let multi = InterProcessMultiLock::from_paths(c.client.clone(), &[&p1, &p2]).unwrap();
    let g = multi.lock().unwrap();
    assert_eq!(g.nodes().len(), 2);
    assert!(multi.is_acquired_in_this_process());
    assert_eq!(children(c.client.as_ref(), &p1).len(), 1);
    assert_eq!(children(c.client.as_ref(), &p2).len(), 1);
    // Reentrancy through the inner mutexes.
    multi.acquire().unwrap();
    multi.release().unwrap();
    assert!(multi.is_acquired_in_this_process());
    drop(g);
    assert!(!multi.is_acquired_in_this_process());
    assert!(
        children(c.client.as_ref(), &p1).is_empty() && children(c.client.as_ref(), &p2).is_empty()
    );
}

fn two_clients_exclude(b: &dyn Backend) {
    let (p1, p2) = paths(b);
    let inside = AtomicBool::new(false);
    let clients: Vec<_> = (0..3).map(|_| b.connect()).collect();
    thread::scope(|s| {
        for c in &clients {
            let (inside, p1, p2) = (&inside, &p1, &p2);
            s.spawn(move || {
                let multi = InterProcessMultiLock::from_paths(c.client.clone(), &[p1, p2]).unwrap();
                for _ in 0..5 {
                    let _g = multi.lock().unwrap();
                    assert!(!inside.swap(true, Ordering::SeqCst), "two holders");
                    inside.store(false, Ordering::SeqCst);
                }
            });
        }
    });
}

fn timeout_takes_nothing(b: &dyn Backend) {
    let (p1, p2) = paths(b);
    let (c1, c2) = (b.connect(), b.connect());
    let blocker = InterProcessMutex::new(c1.client.clone(), &p2).unwrap();
    let g = blocker.lock().unwrap();
    let multi = InterProcessMultiLock::from_paths(c2.client.clone(), &[&p1, &p2]).unwrap();
    assert!(!multi.acquire_timeout(Duration::from_millis(100)).unwrap());
    assert!(
        children(c1.client.as_ref(), &p1).is_empty(),
        "lock 1 was given back"
    );
    drop(g);
}

/// A test double: a lock whose acquire or release fails on demand.
/// `held` is shared with the test, which keeps a clone to look at.
struct Flaky {
    fail_acquire: bool,
    fail_release: bool,
    held: Arc<AtomicUsize>,
}

impl Flaky {
    fn new(fail_acquire: bool, fail_release: bool) -> (Flaky, Arc<AtomicUsize>) {
        let held = Arc::new(AtomicUsize::new(0));
        (
            Flaky {
                fail_acquire,
                fail_release,
                held: held.clone(),
            },
            held,
        )
    }
}

impl InterProcessLock for Flaky {
    fn acquire(&self) -> Result<()> {
        if self.fail_acquire {
            return Err(Error::SessionLost {
                path: "/flaky".into(),
            });
        }
        self.held.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn acquire_timeout(&self, _t: Duration) -> Result<bool> {
        self.acquire().map(|()| true)
    }
    fn release(&self) -> Result<()> {
        if self.fail_release {
            return Err(Error::NotOwner {
                path: "/flaky".into(),
            });
        }
        self.held.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
    fn is_acquired_in_this_process(&self) -> bool {
        self.held.load(Ordering::SeqCst) > 0
    }
    fn held_nodes(&self) -> Vec<Arc<HeldNode>> {
        Vec::new()
    }
}

/// Curator's testSomeReleasesFail: every lock is released, every failure reported.
fn some_releases_fail(b: &dyn Backend) {
    let (p1, _) = paths(b);
    let c = b.connect();
    let (bad1, held1) = Flaky::new(false, true);
    let (bad2, held2) = Flaky::new(false, true);
    let good = Arc::new(InterProcessMutex::new(c.client.clone(), &p1).unwrap());
    struct Shared(Arc<InterProcessMutex>);
    impl InterProcessLock for Shared {
        fn acquire(&self) -> Result<()> {
            self.0.acquire()
        }
        fn acquire_timeout(&self, t: Duration) -> Result<bool> {
            self.0.acquire_timeout(t)
        }
        fn release(&self) -> Result<()> {
            self.0.release()
        }
        fn is_acquired_in_this_process(&self) -> bool {
            self.0.is_acquired_in_this_process()
        }
        fn held_nodes(&self) -> Vec<Arc<HeldNode>> {
            self.0.held_nodes()
        }
    }
    let multi = InterProcessMultiLock::new(vec![
        Box::new(Shared(good.clone())),
        Box::new(bad1),
        Box::new(bad2),
    ])
    .unwrap();
    multi.acquire().unwrap();
    match multi.release() {
        Err(Error::Multiple(errors)) => assert_eq!(errors.len(), 2, "every failure: {errors:?}"),
        other => panic!("{other:?}"),
    }
    assert!(
        !good.is_acquired_in_this_process(),
        "the good lock was released despite the failures"
    );
    assert_eq!(
        (held1.load(Ordering::SeqCst), held2.load(Ordering::SeqCst)),
        (1, 1)
    );
}

/// Curator's testSomeLocksFailToLock: what was taken is given back, the error propagates.
fn some_locks_fail_to_lock(b: &dyn Backend) {
    let (p1, _) = paths(b);
    let c = b.connect();
    let good = InterProcessMutex::new(c.client.clone(), &p1).unwrap();
    let (bad, _) = Flaky::new(true, false);
    let multi = InterProcessMultiLock::new(vec![Box::new(good), Box::new(bad)]).unwrap();
    assert!(matches!(multi.acquire(), Err(Error::SessionLost { .. })));
    assert!(children(c.client.as_ref(), &p1).is_empty());
    assert!(matches!(
        multi.acquire_timeout(Duration::from_secs(1)),
        Err(Error::SessionLost { .. })
    ));
    assert!(children(c.client.as_ref(), &p1).is_empty());
}

fn mixed_kinds(b: &dyn Backend) {
    let root = b.root();
    let c = b.connect();
    let client: SharedClient = c.client.clone();
    let rw = InterProcessReadWriteLock::new(client.clone(), &format!("{root}/rw")).unwrap();
    struct WriteOf(InterProcessReadWriteLock);
    impl InterProcessLock for WriteOf {
        fn acquire(&self) -> Result<()> {
            self.0.write_lock().acquire()
        }
        fn acquire_timeout(&self, t: Duration) -> Result<bool> {
            self.0.write_lock().acquire_timeout(t)
        }
        fn release(&self) -> Result<()> {
            self.0.write_lock().release()
        }
        fn is_acquired_in_this_process(&self) -> bool {
            self.0.write_lock().is_acquired_in_this_process()
        }
        fn held_nodes(&self) -> Vec<Arc<HeldNode>> {
            self.0.write_lock().held_nodes()
        }
    }
    let multi = InterProcessMultiLock::new(vec![
        Box::new(InterProcessMutex::new(client.clone(), &format!("{root}/m")).unwrap()),
        Box::new(InterProcessSemaphoreMutex::new(client.clone(), &format!("{root}/sm")).unwrap()),
        Box::new(WriteOf(rw)),
    ])
    .unwrap();
    let g = multi
        .try_lock_for(Duration::from_secs(10))
        .unwrap()
        .expect("all three");
    assert_eq!(g.nodes().len(), 3);
    assert!(g.is_valid());
    assert!(g.fencing_token().is_ok());
    g.unlock().unwrap();
    assert!(children(client.as_ref(), &format!("{root}/m")).is_empty());
    assert!(children(client.as_ref(), &format!("{root}/sm/leases")).is_empty());
    assert!(children(client.as_ref(), &format!("{root}/rw")).is_empty());
}

/// Two multi-locks over the same paths listed in opposite orders: without ordering they can
/// deadlock (broken here by timeouts); with `ordered_by_path` they never do.
fn ordering_prevents_deadlock(b: &dyn Backend) {
    let (p1, p2) = paths(b);
    // Generous: with a canonical order nothing can deadlock, so nothing may time out.
    let patience = b.patience();
    let run = |ordered: bool| -> usize {
        let (c1, c2) = (b.connect(), b.connect());
        let a = InterProcessMultiLock::from_paths(c1.client.clone(), &[&p1, &p2]).unwrap();
        let z = InterProcessMultiLock::from_paths(c2.client.clone(), &[&p2, &p1]).unwrap();
        let (a, z) = if ordered {
            (a.ordered_by_path(), z.ordered_by_path())
        } else {
            (a, z)
        };
        let timeouts = AtomicUsize::new(0);
        let barrier = Barrier::new(2);
        thread::scope(|s| {
            for m in [&a, &z] {
                let (timeouts, barrier) = (&timeouts, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    for _ in 0..5 {
                        match m.acquire_timeout(patience).unwrap() {
                            true => m.release().unwrap(),
                            false => {
                                timeouts.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                    }
                });
            }
        });
        timeouts.load(Ordering::SeqCst)
    };
    assert_eq!(
        run(true),
        0,
        "ordered multi-locks never time out against each other"
    );
}

/// A multi-lock over two clients: the expiry of the *second* client's session must end
/// `wait_while_held` and `wait_until_lost` (before: only the first client's session was
/// watched, and the waits ran to their timeout).
fn guard_waits_on_every_client(b: &dyn Backend) {
    let (p1, p2) = paths(b);
    let (c1, c2) = (b.connect(), b.connect());
    let multi = InterProcessMultiLock::new(vec![
        Box::new(InterProcessMutex::new(c1.client.clone(), &p1).unwrap()),
        Box::new(InterProcessMutex::new(c2.client.clone(), &p2).unwrap()),
    ])
    .unwrap();
    // Long enough that only a wait missing the expiry reaches it.
    let timeout = b.patience() * 2;
    let guard = multi.lock().unwrap();
    assert_eq!(guard.state(), LockState::Held);
    let start = Instant::now();
    let state = thread::scope(|s| {
        s.spawn(|| c2.faults.expire());
        guard.wait_while_held(Some(timeout))
    });
    // Suspect first on a real server (the link drops before the expiry is known).
    assert_ne!(state, LockState::Held);
    assert!(
        start.elapsed() < timeout,
        "woke by its timeout, not the expiry"
    );
    assert_eq!(guard.state(), LockState::Lost);
    drop(guard);

    let guard = multi.lock().unwrap();
    let start = Instant::now();
    let state = thread::scope(|s| {
        s.spawn(|| c2.faults.expire());
        guard.wait_until_lost(Some(timeout))
    });
    assert_eq!(state, LockState::Lost);
    assert!(
        start.elapsed() < timeout,
        "woke by its timeout, not the expiry"
    );
}

suite!(tls [
    basic_two_paths,
    two_clients_exclude,
    timeout_takes_nothing,
    some_releases_fail,
    some_locks_fail_to_lock,
    mixed_kinds,
    ordering_prevents_deadlock,
    guard_waits_on_every_client,
]);

/// Deterministic on the memory backend: two multi-locks over the same paths in opposite
/// orders, each paused (by a request hook) after taking its first lock until the other has
/// taken its own first lock. Unordered, they deadlock, and only their timeouts end it;
/// ordered by path, both succeed.
#[test]
fn opposite_orders_deadlock_unless_ordered() {
    use zk_locks::client::memory::{MemoryEnsemble, Op};
    let run = |ordered: bool| -> (bool, bool) {
        let e = MemoryEnsemble::new();
        let (ca, cz) = (e.connect(), e.connect());
        let gate = Arc::new(Barrier::new(2));
        // Each client pauses at its first create under the *other* client's first path.
        for (client, second) in [(&ca, "/b/"), (&cz, "/a/")] {
            let (gate, fired) = (gate.clone(), Arc::new(AtomicBool::new(false)));
            client.on_request(Some(Box::new(move |op, path| {
                if op == Op::Create
                    && path.starts_with(second)
                    && !fired.swap(true, Ordering::SeqCst)
                {
                    gate.wait();
                }
            })));
        }
        let a = InterProcessMultiLock::from_paths(ca.clone(), &["/a", "/b"]).unwrap();
        let z = InterProcessMultiLock::from_paths(cz.clone(), &["/b", "/a"]).unwrap();
        let (a, z) = if ordered {
            (a.ordered_by_path(), z.ordered_by_path())
        } else {
            (a, z)
        };
        let timeout = Duration::from_millis(300);
        thread::scope(|s| {
            let ta = s.spawn(|| {
                let ok = a.acquire_timeout(timeout * 10).unwrap();
                if ok {
                    a.release().unwrap();
                }
                ok
            });
            let tz = s.spawn(|| {
                let ok = z.acquire_timeout(timeout).unwrap();
                if ok {
                    z.release().unwrap();
                }
                ok
            });
            (ta.join().unwrap(), tz.join().unwrap())
        })
    };
    // Unordered: z times out (deadlock broken by its timeout), after which a gets both.
    assert_eq!(run(false), (true, false));
    // Ordered: z waits behind a for "/a" instead of holding "/b"; no deadlock, a succeeds and
    // z only has to wait for a.
    let (a_ok, _) = run(true);
    assert!(a_ok);
}
