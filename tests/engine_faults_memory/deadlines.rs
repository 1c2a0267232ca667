//! Deadlines and endings: a timed acquire during an outage, a check asked again after a blip,
//! a verification that timed out, a client closed during a retry, a background delete that
//! ends with the client.

use super::*;

/// Runs `call` (given a timeout of half a second) on this thread while the link of `c` goes
/// down at its first `op` under `prefix` and stays down; then brings the link back. Returns
/// the outcome and the requests the thread started after the timeout had passed.
fn during_outage<R>(
    c: &Arc<MemoryClient>,
    op: Op,
    prefix: &str,
    call: impl FnOnce(Duration) -> R,
) -> (R, Vec<Op>) {
    let timeout = Duration::from_millis(500);
    let (caller, weak, prefix) = (
        thread::current().id(),
        Arc::downgrade(c),
        prefix.to_string(),
    );
    let late = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let (log, down, deadline) = (
        late.clone(),
        AtomicBool::new(false),
        Instant::now() + timeout,
    );
    c.on_request(Some(Box::new(move |o, path| {
        if o == op && path.starts_with(&prefix) && !down.swap(true, Ordering::SeqCst) {
            if let Some(c) = weak.upgrade() {
                c.suspend();
            }
        }
        if thread::current().id() == caller && Instant::now() > deadline {
            log.lock().push(o);
        }
    })));
    let result = call(timeout);
    c.on_request(None);
    c.resume();
    let late = late.lock().clone();
    (result, late)
}

/// The link goes down while a timed acquire waits: the call makes no request past its
/// deadline (the cleanup's retries through the outage would keep it for the whole retry
/// policy); the node is deleted once the link is back.
#[test]
fn a_timed_acquire_returns_by_its_deadline_during_an_outage() {
    let e = MemoryEnsemble::new();
    let t = contended(&e, "/locks/a");
    // The link drops as the waiter sets its watch, and stays down.
    let (acquired, late) = during_outage(&t.c, Op::GetData, "/locks/a", |d| {
        t.waiter.acquire_timeout(d)
    });
    assert!(matches!(acquired, Ok(false)), "{acquired:?}");
    assert_eq!(late, NO_REQUESTS, "requests past the deadline");
    eventually(PATIENCE, "our node deleted after the outage", || {
        e.children("/locks/a").unwrap() == t.held
    });
}

/// The same for a semaphore: the link drops at the lease listing and stays down; the call
/// returns "not acquired" with no request past its deadline, and the lease and admission
/// nodes are deleted once the link is back.
#[test]
fn a_timed_semaphore_acquire_returns_by_its_deadline_during_an_outage() {
    let (e, c, held, _lease_x) = semaphore_with_one_taken("/sem", 1);
    let sc = InterProcessSemaphoreV2::new(c.clone(), "/sem", 1).unwrap();
    let (result, late) = during_outage(&c, Op::GetChildren, "/sem/leases", |d| {
        sc.acquire_timeout(d)
    });
    assert!(matches!(result, Ok(None)), "{result:?}");
    assert_eq!(late, NO_REQUESTS, "requests past the deadline");
    semaphore_back_to(&e, "/sem", &held);
}

/// A semaphore's check that its admission still holds (the `exists` before a lease waits)
/// failing early (the link blips, the deadline is far): it is asked again once the link is
/// back, and the lease is granted when room comes; the client is not sent back to admission
/// as if it had been overtaken.
#[test]
fn a_semaphore_admission_check_that_meets_a_blip_is_asked_again() {
    let e = MemoryEnsemble::new();
    let (x, c) = (e.connect(), e.connect());
    let lease_x = InterProcessSemaphoreV2::new(x.clone(), "/sem", 1)
        .unwrap()
        .acquire()
        .unwrap();
    let sc = InterProcessSemaphoreV2::new(c.clone(), "/sem", 1).unwrap();
    c.inject(Fault::timeout(Op::Exists));
    let creates = Arc::new(AtomicUsize::new(0));
    let counted = creates.clone();
    c.on_request(Some(Box::new(move |op, _path| {
        if op == Op::Create {
            counted.fetch_add(1, Ordering::SeqCst);
        }
    })));
    thread::scope(|s| {
        let waiter = s.spawn(|| sc.acquire_timeout(PATIENCE));
        eventually(PATIENCE, "the lease waits with its watch set", || {
            e.watch_count() == 1
        });
        drop(lease_x);
        let lease = waiter.join().unwrap().unwrap().expect("no lease");
        assert!(lease.is_valid());
    });
    c.on_request(None);
    assert_eq!(
        creates.load(Ordering::SeqCst),
        2,
        "admission and lease were created more than once"
    );
}

/// A verification `exists` that timed out while connected leaves the holder `Suspect`; a wait
/// for `Lost` must verify again instead of sleeping until the next session change.
#[test]
fn wait_until_lost_verifies_again_after_a_verification_timed_out() {
    let e = MemoryEnsemble::new();
    let (c, other) = (e.connect(), e.connect());
    let m = mutex(&c, "/l");
    let g = m.lock().unwrap();
    let node = g.nodes()[0].clone();
    c.suspend();
    c.resume();
    zk_locks::testing::harness::wait_connected(c.as_ref());
    // The wait's own verification times out; the node is deleted after that.
    c.inject(Fault::timeout(Op::Exists));
    let (verifying, verified) = mpsc::channel();
    let verifying = parking_lot::Mutex::new(verifying);
    once_on(&c, Op::Exists, "/l", move || {
        let _ = verifying.lock().send(());
    });
    let (tx, rx) = mpsc::channel();
    let n = node.clone();
    thread::spawn(move || {
        let _ = tx.send(n.wait_until_lost(None));
    });
    verified.recv().unwrap();
    other.delete(node.path(), None).unwrap();
    assert_eq!(
        rx.recv_timeout(PATIENCE),
        Ok(LockState::Lost),
        "the wait never verified again"
    );
    c.on_request(None);
}

/// A client closed while the wait loop retries its listing: the acquire fails with `Closed`,
/// not "not acquired".
#[test]
fn a_client_closed_during_a_listing_retry_is_closed_not_a_timeout() {
    let e = MemoryEnsemble::new();
    let (h, c) = (e.connect(), e.connect());
    let holder = ready_mutex(&h, "/locks/a");
    holder.acquire().unwrap();
    let m = mutex(&c, "/locks/a");
    let (tx, rx) = mpsc::channel();
    let c2 = c.clone();
    let tx = parking_lot::Mutex::new(tx);
    once_on(&c, Op::GetChildren, "/locks/a", move || {
        c2.suspend();
        let _ = tx.lock().send(());
    });
    thread::scope(|s| {
        let waiter = s.spawn(|| m.acquire_timeout(PATIENCE));
        rx.recv().unwrap();
        c.close();
        let result = waiter.join().unwrap();
        assert!(matches!(result, Err(Error::Closed)), "{result:?}");
    });
}

/// Threads of this process whose name starts with `prefix` (Linux: `/proc/self/task`).
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .filter_map(|t| t.ok())
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .filter(|name| name.starts_with(prefix))
                .count()
        })
        .unwrap_or(0)
}

/// A delete left to the background (the link was down at the deadline) ends when the client is
/// closed, instead of retrying for ever.
#[test]
fn a_background_delete_ends_when_the_client_closes() {
    if !std::path::Path::new("/proc/self/task").exists() {
        return; // no way to count threads here
    }
    let e = MemoryEnsemble::new();
    let (h, c) = (e.connect(), e.connect());
    let holder = ready_mutex(&h, "/locks/bg");
    holder.acquire().unwrap();
    let m = mutex(&c, "/locks/bg");
    let c2 = c.clone();
    once_on(&c, Op::GetData, "/locks/bg", move || c2.suspend());
    assert!(!m.acquire_timeout(Duration::from_millis(200)).unwrap());
    eventually(PATIENCE, "a background delete", || {
        threads_named("zk-locks-delete") >= 1
    });
    c.on_request(None);
    c.close();
    eventually(PATIENCE, "background delete ended", || {
        threads_named("zk-locks-delete") == 0
    });
}
