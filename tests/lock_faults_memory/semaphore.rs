//! The semaphore and its `SharedCount` when the connection or the session is lost between
//! their requests.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;

use zk_locks::client::memory::{Fault, MemoryEnsemble, Op};
use zk_locks::testing::harness::eventually;

use super::PATIENCE;

/// CURATOR-335: a connection loss between the lease's create and the listing of the leases
/// must neither orphan the lease node nor fail the acquire.
#[test]
fn semaphore_survives_connection_loss_around_the_lease_create() {
    use zk_locks::locks::InterProcessSemaphoreV2;
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let s = InterProcessSemaphoreV2::new(c.clone(), "/pool", 2).unwrap();
    drop(s.acquire().unwrap()); // directories exist from here on
    for fault in [
        Fault::after(Op::Create).on_path("/pool/leases/"),
        Fault::before(Op::Create).on_path("/pool/leases/"),
        Fault::before(Op::GetChildren).on_path("/pool/leases"),
    ] {
        c.inject(fault.clone());
        let lease = s
            .acquire_timeout(PATIENCE)
            .unwrap()
            .unwrap_or_else(|| panic!("not acquired despite {fault:?}"));
        assert_eq!(
            e.children("/pool/leases").unwrap(),
            vec![lease.node_name().to_string()],
            "{fault:?}"
        );
        drop(lease);
        assert!(
            e.children("/pool/leases").unwrap().is_empty(),
            "no orphan after {fault:?}"
        );
        assert!(
            e.children("/pool/locks").unwrap_or_default().is_empty(),
            "admission released"
        );
    }
}

/// Expiry while a lease is being waited for: the waiter's lease node dies with its session, and
/// it queues again on the new session.
#[test]
fn semaphore_waiter_survives_its_session_expiry() {
    use zk_locks::locks::InterProcessSemaphoreV2;
    let e = MemoryEnsemble::new();
    let (c1, c2) = (e.connect(), e.connect());
    let s1 = InterProcessSemaphoreV2::new(c1.clone(), "/pool", 1).unwrap();
    let s2 = InterProcessSemaphoreV2::new(c2.clone(), "/pool", 1).unwrap();
    let held = s1.acquire().unwrap();
    thread::scope(|s| {
        let w = s.spawn(|| s2.acquire_timeout(PATIENCE).unwrap());
        eventually(PATIENCE, "waiting", || {
            e.children("/pool/leases").unwrap().len() == 2
        });
        c2.expire();
        eventually(PATIENCE, "re-queued", || {
            e.children("/pool/leases").unwrap().len() == 2
        });
        drop(held);
        let lease = w.join().unwrap().expect("acquired on the new session");
        assert!(lease.is_valid());
    });
    assert!(e.children("/pool/leases").unwrap().is_empty());
}

/// The read that re-arms a `SharedCount` after a reconnect fails too (another connection
/// loss): the count must still follow later changes.
#[test]
fn shared_count_survives_a_failed_refresh_after_a_reconnect() {
    use zk_locks::locks::SharedCount;
    let e = MemoryEnsemble::new();
    let (c1, c2) = (e.connect(), e.connect());
    let count = SharedCount::new(c1.clone(), "/count", 2).unwrap();
    let (seen, values) = mpsc::channel();
    count.subscribe(move |v| {
        let _ = seen.send(v);
    });
    let reads = Arc::new(AtomicUsize::new(0));
    let r = reads.clone();
    c1.on_request(Some(Box::new(move |op, path| {
        if op == Op::GetData && path == "/count" {
            r.fetch_add(1, Ordering::SeqCst);
        }
    })));
    c1.inject(Fault::before(Op::GetData).on_path("/count"));
    c1.suspend();
    c1.resume();
    eventually(PATIENCE, "the failed read and one more", || {
        reads.load(Ordering::SeqCst) >= 2
    });
    let writer = SharedCount::new(c2.clone(), "/count", 2).unwrap();
    writer.set_count(1).unwrap();
    assert_eq!(values.recv_timeout(PATIENCE), Ok(1));
    writer.set_count(3).unwrap();
    assert_eq!(values.recv_timeout(PATIENCE), Ok(3));
    assert_eq!(count.get_count(), 3);
}
