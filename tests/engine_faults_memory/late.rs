//! A request that outlives a timed call's deadline, in every recipe: past the deadline the call
//! starts no request but one delete of each node it made, and none at all when that request
//! failed with an unknown outcome (one more could keep it a whole call timeout more); what it
//! does not delete on its thread is deleted in the background.

use super::*;

const NONE: Vec<Op> = Vec::new();

/// The waiter's watch request fails late: no more requests; the node goes in the background.
#[test]
fn a_timed_acquire_makes_no_request_after_a_late_failure() {
    let e = MemoryEnsemble::new();
    let t = contended(&e, "/locks/a");
    let timeout = Duration::from_millis(200);
    let (acquired, after) =
        Late::failure(Op::GetData, timeout).run(&t.c, || t.waiter.acquire_timeout(timeout));
    assert_eq!(acquired.ok(), Some(false));
    assert_eq!(after, NONE, "requests after the late failure");
    eventually(PATIENCE, "our node deleted in the background", || {
        e.children("/locks/a").unwrap() == t.held
    });
}

/// The waiter's watch finds the node ahead of it gone, but only past the deadline, with
/// another node still ahead: the call does not list again; it deletes its node, once.
#[test]
fn a_watch_answered_past_the_deadline_lists_no_more() {
    let e = MemoryEnsemble::new();
    let t = contended(&e, "/locks/a");
    let other = e.connect();
    let between = other
        .create(
            "/locks/a/lock-",
            b"",
            zk_locks::CreateMode::EphemeralSequential,
        )
        .unwrap();
    let timeout = Duration::from_millis(200);
    let gone = between.clone();
    let (acquired, after) = Late::answer(Op::GetData, timeout)
        .with(move |op, path| {
            if op == Op::GetData && path == gone {
                other.delete(&gone, None).unwrap();
            }
        })
        .run(&t.c, || t.waiter.acquire_timeout(timeout));
    assert_eq!(acquired.ok(), Some(false));
    assert_eq!(after, [Op::Delete], "requests after the late answer");
    assert_eq!(e.children("/locks/a").unwrap(), t.held);
}

/// A create's outcome is unknown and the look-up for it is answered past the deadline (the
/// node was not made): the call does not create again; a late copy of the create is looked for
/// in the background.
#[test]
fn a_look_up_answered_past_the_deadline_creates_no_more() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = ready_mutex(&c, "/locks/a");
    c.inject(Fault::timeout(Op::Create));
    let timeout = Duration::from_millis(300);
    let (acquired, after) = Late::answer(Op::GetChildren, timeout)
        .under("/locks/a")
        .run(&c, || m.acquire_timeout(timeout));
    assert_eq!(acquired.ok(), Some(false));
    assert_eq!(after, NONE, "requests after the late look-up");
    assert_eq!(e.children("/locks/a").unwrap(), Vec::<String>::new());
}

/// A late copy of our node is found, and its delete fails past the deadline: the call times
/// out (not an error) without another request; both nodes go in the background.
#[test]
fn a_late_copy_whose_delete_fails_past_the_deadline_ends_the_call() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = ready_mutex(&c, "/locks/a");
    c.inject(Fault::timeout(Op::Create));
    let timeout = Duration::from_millis(600);
    let (acquired, after) = Late::failure(Op::Delete, timeout)
        .under("/locks/a/")
        .with(late_copy(&c, "/locks/a/"))
        .run(&c, || m.acquire_timeout(timeout));
    assert!(matches!(acquired, Ok(false)), "{acquired:?}");
    assert_eq!(after, NONE, "requests after the late delete");
    eventually(PATIENCE, "both nodes deleted in the background", || {
        e.children("/locks/a").unwrap().is_empty()
    });
}

/// The same delete answered past the deadline: the call does not list again; it deletes its
/// own node, once.
#[test]
fn a_late_copy_deleted_past_the_deadline_ends_the_call() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = ready_mutex(&c, "/locks/a");
    c.inject(Fault::timeout(Op::Create));
    let timeout = Duration::from_millis(600);
    let (acquired, after) = Late::answer(Op::Delete, timeout)
        .under("/locks/a/")
        .with(late_copy(&c, "/locks/a/"))
        .run(&c, || m.acquire_timeout(timeout));
    assert!(matches!(acquired, Ok(false)), "{acquired:?}");
    assert_eq!(after, [Op::Delete], "requests after the late delete");
    assert_eq!(e.children("/locks/a").unwrap(), Vec::<String>::new());
}

/// A multi-lock's second lock fails late: the first, taken by this call, is released without
/// a request on the caller's thread (in the background).
#[test]
fn a_timed_multi_lock_releases_what_it_took_without_a_request_after_a_late_failure() {
    let e = MemoryEnsemble::new();
    let t = contended(&e, "/locks/b");
    let multi = InterProcessMultiLock::from_paths(t.c.clone(), &["/locks/a", "/locks/b"]).unwrap();
    let timeout = Duration::from_millis(300);
    let (acquired, after) = Late::failure(Op::GetData, timeout)
        .under("/locks/b")
        .run(&t.c, || multi.acquire_timeout(timeout));
    assert_eq!(acquired.ok(), Some(false));
    assert_eq!(after, NONE, "requests after the late failure");
    assert!(!multi.is_acquired_in_this_process());
    eventually(PATIENCE, "both nodes deleted in the background", || {
        e.children("/locks/a").unwrap().is_empty() && e.children("/locks/b").unwrap() == t.held
    });
}

/// A semaphore's check that its admission still holds fails late: the call returns "not
/// acquired" without another request (a cleanup delete for each of its two nodes would be
/// two); both nodes go in the background.
#[test]
fn a_timed_semaphore_acquire_makes_no_request_after_a_late_admission_check() {
    let (e, c, held, _lease_x) = semaphore_with_one_taken("/sem", 1);
    let sc = InterProcessSemaphoreV2::new(c.clone(), "/sem", 1).unwrap();
    let timeout = Duration::from_millis(200);
    let (result, after) = Late::failure(Op::Exists, timeout)
        .under("/sem/locks/")
        .run(&c, || sc.acquire_timeout(timeout));
    assert!(matches!(result, Ok(None)), "{result:?}");
    assert_eq!(after, NONE, "requests after the late admission check");
    semaphore_back_to(&e, "/sem", &held);
}

/// The same check answered (admitted) past the deadline: the call does not list again to
/// wait; it deletes its two nodes, once each.
#[test]
fn a_semaphore_admission_check_answered_past_the_deadline_lists_no_more() {
    let (e, c, held, _lease_x) = semaphore_with_one_taken("/sem", 1);
    let sc = InterProcessSemaphoreV2::new(c.clone(), "/sem", 1).unwrap();
    let timeout = Duration::from_millis(200);
    let (result, after) = Late::answer(Op::Exists, timeout)
        .under("/sem/locks/")
        .run(&c, || sc.acquire_timeout(timeout));
    assert!(matches!(result, Ok(None)), "{result:?}");
    assert_eq!(
        after,
        [Op::Delete, Op::Delete],
        "requests after the late check"
    );
    semaphore_back_to(&e, "/sem", &held);
}

/// The same check after a reconnect (the admission node is then verified on the way): one
/// request, not one for the reconnect and one for the check.
#[test]
fn a_semaphore_admission_check_after_a_reconnect_is_one_request() {
    let (e, c, held, _lease_x) = semaphore_with_one_taken("/sem", 1);
    let sc = InterProcessSemaphoreV2::new(c.clone(), "/sem", 1).unwrap();
    let timeout = Duration::from_millis(200);
    let (result, after) = Late::failure(Op::Exists, timeout)
        .under("/sem/locks/")
        .with(blip_on(&c, Op::Create, "/sem/leases/"))
        .run(&c, || sc.acquire_timeout(timeout));
    assert!(matches!(result, Ok(None)), "{result:?}");
    assert_eq!(after, NONE, "requests after the late admission check");
    semaphore_back_to(&e, "/sem", &held);
}

/// Several leases in one timed call, the last one's admission check failing late: the leases
/// this call took are returned without a request on the caller's thread.
#[test]
fn a_timed_acquire_of_many_leases_returns_those_it_took_without_a_request() {
    let (e, c, held, _lease_x) = semaphore_with_one_taken("/sem", 2);
    let sc = InterProcessSemaphoreV2::new(c.clone(), "/sem", 2).unwrap();
    let timeout = Duration::from_millis(300);
    let (result, after) = Late::failure(Op::Exists, timeout)
        .under("/sem/locks/")
        .run(&c, || sc.acquire_many_timeout(2, timeout));
    assert!(matches!(result, Ok(None)), "{result:?}");
    assert_eq!(after, NONE, "requests after the late admission check");
    semaphore_back_to(&e, "/sem", &held);
}

/// The downgrade's check of its write node fails past a timed downgrade's deadline: "not
/// acquired" without another request on its thread (the read node's delete goes on in the
/// background), and the write lock is still held.
#[test]
fn a_timed_downgrade_whose_check_outlives_its_deadline_makes_no_more_requests() {
    let e = MemoryEnsemble::new();
    let a = e.connect();
    let rw = InterProcessReadWriteLock::new(a.clone(), "/rw").unwrap();
    let write = rw.write_lock().lock().unwrap();
    let timeout = Duration::from_millis(200);
    let (read, after) =
        Late::failure(Op::Exists, timeout).run(&a, || rw.read_lock().acquire_timeout(timeout));
    assert_eq!(read.ok(), Some(false));
    assert_eq!(after, NONE, "requests after the late check");
    assert!(!rw.read_lock().is_owned_by_current_thread());
    eventually(PATIENCE, "the read node deleted", || {
        e.children("/rw").unwrap().len() == 1
    });
    assert_eq!(write.state(), LockState::Held);
}

/// The same after a reconnect since the read node was created: the check is the only request
/// about the write node (deciding for the read node asks the server nothing).
#[test]
fn a_timed_downgrade_after_a_reconnect_checks_its_write_node_once() {
    let e = MemoryEnsemble::new();
    let a = e.connect();
    let rw = InterProcessReadWriteLock::new(a.clone(), "/rw").unwrap();
    let write = rw.write_lock().lock().unwrap();
    let timeout = Duration::from_millis(200);
    let (read, after) = Late::failure(Op::Exists, timeout)
        .with(blip_on(&a, Op::Create, "/rw/"))
        .run(&a, || rw.read_lock().acquire_timeout(timeout));
    assert_eq!(read.ok(), Some(false));
    assert_eq!(after, NONE, "requests after the late check");
    eventually(PATIENCE, "the read node deleted", || {
        e.children("/rw").unwrap().len() == 1
    });
    assert_eq!(write.state(), LockState::Held);
}

/// The downgrade's check finds the write node gone, past the deadline: the read node's borrowed
/// place is given back (one delete) and the call does not queue again.
#[test]
fn a_downgrade_whose_write_node_is_found_gone_past_the_deadline_queues_no_more() {
    let e = MemoryEnsemble::new();
    let (a, other) = (e.connect(), e.connect());
    let rw = InterProcessReadWriteLock::new(a.clone(), "/rw").unwrap();
    let write = rw.write_lock().lock().unwrap();
    let write_node = write.node_path().unwrap().to_string();
    let timeout = Duration::from_millis(200);
    let gone = write_node.clone();
    let (read, after) = Late::answer(Op::Exists, timeout)
        .under(write_node)
        .with(move |op, path| {
            if op == Op::Exists && path == gone {
                let _ = other.delete(&gone, None);
            }
        })
        .run(&a, || rw.read_lock().acquire_timeout(timeout));
    assert_eq!(read.ok(), Some(false));
    assert_eq!(after, [Op::Delete], "requests after the late check");
    assert_eq!(e.children("/rw").unwrap(), Vec::<String>::new());
    drop(write);
}

/// A listing fails past the deadline and the retry policy gives up on it: the call fails
/// without another request; its node goes in the background.
#[test]
fn a_listing_given_up_past_the_deadline_makes_no_more_requests() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = ready_mutex(&c, "/locks/a").with_retry_policy(Arc::new(zk_locks::retry::NoRetry));
    let timeout = Duration::from_millis(200);
    let (acquired, after) = Late::failure(Op::GetChildren, timeout)
        .under("/locks/a")
        .run(&c, || m.acquire_timeout(timeout));
    assert!(
        matches!(&acquired, Err(e) if e.is_retryable()),
        "{acquired:?}"
    );
    assert_eq!(after, NONE, "requests after the late failure");
    eventually(PATIENCE, "our node deleted in the background", || {
        e.children("/locks/a").unwrap().is_empty()
    });
}

/// The same for a semaphore's leases listing: neither the lease nor the admission node is
/// deleted on the caller's thread.
#[test]
fn a_lease_listing_given_up_past_the_deadline_makes_no_more_requests() {
    let (e, c, held, _lease_x) = semaphore_with_one_taken("/sem", 1);
    let sc = InterProcessSemaphoreV2::new(c.clone(), "/sem", 1)
        .unwrap()
        .with_retry_policy(Arc::new(zk_locks::retry::NoRetry));
    let timeout = Duration::from_millis(200);
    let (result, after) = Late::failure(Op::GetChildren, timeout)
        .under("/sem/leases")
        .run(&c, || sc.acquire_timeout(timeout));
    assert!(matches!(&result, Err(e) if e.is_retryable()), "{result:?}");
    assert_eq!(after, NONE, "requests after the late failure");
    semaphore_back_to(&e, "/sem", &held);
}
