//! A request that outlives a timed call's deadline, in every recipe: past the deadline the call
//! starts no request but one delete of each node it made, and none at all when that request
//! failed with an unknown outcome (one more could keep it a whole call timeout more); what it
//! does not delete on its thread is deleted in the background.

use super::*;

/// The timeout of most calls here: long enough for the steps before the late request on a
/// loaded machine (each test sleeps about this long in its late request).
const TIMEOUT: Duration = Duration::from_millis(1000);

/// A client's first create in `/locks/a` (its directory made) times out, not applied, and its
/// timed acquire then meets the late request `late` makes for it. Returns the ensemble, the
/// outcome and the requests after the late one.
fn create_unknown_then(
    late: impl FnOnce(&Arc<MemoryClient>) -> Late,
) -> (MemoryEnsemble, zk_locks::Result<bool>, Vec<Op>) {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = ready_mutex(&c, "/locks/a");
    c.inject(Fault::timeout(Op::Create));
    let late = late(&c);
    let (acquired, after) = late.run(&c, |t| m.acquire_timeout(t));
    (e, acquired, after)
}

/// The semaphore's check that its admission still holds (an `exists` of its admission node),
/// made late by `late` (`Late::failure` or `Late::answer`).
fn admission_check(late: fn(Op, Duration) -> Late) -> Late {
    late(Op::Exists, TIMEOUT).under("/sem/locks/")
}

/// [`semaphore_meets`] with the default retry policy, which must end "not acquired"; returns
/// the requests after the late one.
fn semaphore_times_out(late: Late, max: usize, qty: usize) -> Vec<Op> {
    let (result, after) = semaphore_meets(late, max, qty, |s| s);
    assert!(matches!(&result, Ok(None)), "{result:?}");
    after
}

/// A client holding the write lock of `/rw` asks for its read lock (a downgrade) within the
/// timeout of the late request that `late_for` (given the ensemble and the write node's path)
/// makes for it: not granted; the read node is deleted, at once or in the background. Returns
/// the requests after the late one and the write lock's state.
fn downgrade_meets(late_for: impl FnOnce(&MemoryEnsemble, &str) -> Late) -> (Vec<Op>, LockState) {
    let e = MemoryEnsemble::new();
    let a = e.connect();
    let rw = InterProcessReadWriteLock::new(a.clone(), "/rw").unwrap();
    let write = rw.write_lock().lock().unwrap();
    let write_node = write.node_path().unwrap().to_string();
    let (read, after) = late_for(&e, &write_node).run(&a, |t| rw.read_lock().acquire_timeout(t));
    assert!(matches!(read, Ok(false)), "{read:?}");
    assert!(!rw.read_lock().is_owned_by_current_thread());
    eventually(PATIENCE, "the read node deleted", || {
        !e.children("/rw")
            .unwrap()
            .iter()
            .any(|c| c.contains("__READ__"))
    });
    (after, write.state())
}

/// A client's guard over mutexes on `paths`, its link dropped and back since (the next look at
/// the state reads each node): `wait` (given the guard and a timeout) meets a read that fails
/// late. Returns the state it ends with and the requests after the late read.
fn timed_wait_after_a_reconnect(
    paths: &[&str],
    wait: impl FnOnce(&LockGuard<'_, InterProcessMultiLock>, Duration) -> LockState,
) -> (LockState, Vec<Op>) {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let multi = InterProcessMultiLock::from_paths(c.clone(), paths).unwrap();
    let g = multi.lock().unwrap();
    c.suspend();
    c.resume();
    Late::failure(Op::Exists, TIMEOUT).run(&c, |t| wait(&g, t))
}

/// A client asks a semaphore of `max` leases at `/sem` (`setup` configures it), one lease
/// taken by another client, for `qty` leases within the timeout of `late`, which it meets.
/// Returns the outcome and the requests after the late one, once the semaphore's nodes are
/// back as they were (deleted in the background if need be).
fn semaphore_meets(
    late: Late,
    max: usize,
    qty: usize,
    setup: impl FnOnce(InterProcessSemaphoreV2) -> InterProcessSemaphoreV2,
) -> (zk_locks::Result<Option<Vec<Lease>>>, Vec<Op>) {
    let (e, c, held, _lease_x) = semaphore_with_one_taken("/sem", max);
    let sc = setup(InterProcessSemaphoreV2::new(c.clone(), "/sem", max).unwrap());
    let (result, after) = late.run(&c, |t| sc.acquire_many_timeout(qty, t));
    semaphore_back_to(&e, "/sem", &held);
    (result, after)
}

/// The waiter's watch request fails late: no more requests; the node goes in the background.
#[test]
fn a_timed_acquire_makes_no_request_after_a_late_failure() {
    let e = MemoryEnsemble::new();
    let t = contended(&e, "/locks/a");
    let (acquired, after) =
        Late::failure(Op::GetData, TIMEOUT).run(&t.c, |d| t.waiter.acquire_timeout(d));
    assert_eq!(acquired.ok(), Some(false));
    assert_eq!(after, NO_REQUESTS, "requests after the late failure");
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
    let gone = between.clone();
    let (acquired, after) = Late::answer(Op::GetData, TIMEOUT)
        .with(move |op, path| {
            if op == Op::GetData && path == gone {
                other.delete(&gone, None).unwrap();
            }
        })
        .run(&t.c, |d| t.waiter.acquire_timeout(d));
    assert_eq!(acquired.ok(), Some(false));
    assert_eq!(after, [Op::Delete], "requests after the late answer");
    assert_eq!(e.children("/locks/a").unwrap(), t.held);
}

/// A create's outcome is unknown and the look-up for it is answered past the deadline (the
/// node was not made): the call does not create again; a late copy of the create is looked for
/// in the background.
#[test]
fn a_look_up_answered_past_the_deadline_creates_no_more() {
    let (e, acquired, after) = create_unknown_then(|_| {
        Late::answer(Op::GetChildren, Duration::from_millis(1000)).under("/locks/a")
    });
    assert!(matches!(acquired, Ok(false)), "{acquired:?}");
    assert_eq!(after, NO_REQUESTS, "requests after the late look-up");
    assert_eq!(e.children("/locks/a").unwrap(), NO_NODES);
}

/// A late copy of our node is found, and its delete fails past the deadline: the call times
/// out (not an error) without another request; both nodes go in the background.
#[test]
fn a_late_copy_whose_delete_fails_past_the_deadline_ends_the_call() {
    let (e, acquired, after) = create_unknown_then(|c| {
        Late::failure(Op::Delete, Duration::from_millis(2000))
            .under("/locks/a/")
            .with(late_copy(c, "/locks/a/"))
    });
    assert!(matches!(acquired, Ok(false)), "{acquired:?}");
    assert_eq!(after, NO_REQUESTS, "requests after the late delete");
    eventually(PATIENCE, "both nodes deleted in the background", || {
        e.children("/locks/a").unwrap().is_empty()
    });
}

/// The same delete answered past the deadline: the call does not list again; it deletes its
/// own node, once.
#[test]
fn a_late_copy_deleted_past_the_deadline_ends_the_call() {
    let (e, acquired, after) = create_unknown_then(|c| {
        Late::answer(Op::Delete, Duration::from_millis(2000))
            .under("/locks/a/")
            .with(late_copy(c, "/locks/a/"))
    });
    assert!(matches!(acquired, Ok(false)), "{acquired:?}");
    assert_eq!(after, [Op::Delete], "requests after the late delete");
    assert_eq!(e.children("/locks/a").unwrap(), NO_NODES);
}

/// A multi-lock's second lock fails late: the first, taken by this call, is released without
/// a request on the caller's thread (in the background).
#[test]
fn a_timed_multi_lock_releases_what_it_took_without_a_request_after_a_late_failure() {
    let e = MemoryEnsemble::new();
    let t = contended(&e, "/locks/b");
    let multi = InterProcessMultiLock::from_paths(t.c.clone(), &["/locks/a", "/locks/b"]).unwrap();
    let (acquired, after) = Late::failure(Op::GetData, Duration::from_millis(1000))
        .under("/locks/b")
        .run(&t.c, |t| multi.acquire_timeout(t));
    assert_eq!(acquired.ok(), Some(false));
    assert_eq!(after, NO_REQUESTS, "requests after the late failure");
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
    let late = admission_check(Late::failure);
    assert_eq!(semaphore_times_out(late, 1, 1), NO_REQUESTS);
}

/// The same check answered (admitted) past the deadline: the call does not list again to
/// wait; it deletes its two nodes, once each.
#[test]
fn a_semaphore_admission_check_answered_past_the_deadline_lists_no_more() {
    let late = admission_check(Late::answer);
    assert_eq!(semaphore_times_out(late, 1, 1), [Op::Delete, Op::Delete]);
}

/// The same check after a reconnect (the admission node is then verified on the way): one
/// request, not one for the reconnect and one for the check.
#[test]
fn a_semaphore_admission_check_after_a_reconnect_is_one_request() {
    let late = admission_check(Late::failure).blip_before(Op::Create, "/sem/leases/");
    assert_eq!(semaphore_times_out(late, 1, 1), NO_REQUESTS);
}

/// Several leases in one timed call, the last one's admission check failing late: the leases
/// this call took are returned without a request on the caller's thread.
#[test]
fn a_timed_acquire_of_many_leases_returns_those_it_took_without_a_request() {
    let late = admission_check(Late::failure);
    assert_eq!(semaphore_times_out(late, 2, 2), NO_REQUESTS);
}

/// The downgrade's check of its write node fails past a timed downgrade's deadline: "not
/// acquired" without another request on its thread (the read node's delete goes on in the
/// background), and the write lock is still held.
#[test]
fn a_timed_downgrade_whose_check_outlives_its_deadline_makes_no_more_requests() {
    let (after, write) = downgrade_meets(|_, _| Late::failure(Op::Exists, TIMEOUT));
    assert_eq!(after, NO_REQUESTS, "requests after the late check");
    assert_eq!(write, LockState::Held);
}

/// The same after a reconnect since the read node was created: the check is the only request
/// about the write node (deciding for the read node asks the server nothing).
#[test]
fn a_timed_downgrade_after_a_reconnect_checks_its_write_node_once() {
    let (after, write) =
        downgrade_meets(|_, _| Late::failure(Op::Exists, TIMEOUT).blip_before(Op::Create, "/rw/"));
    assert_eq!(after, NO_REQUESTS, "requests after the late check");
    assert_eq!(write, LockState::Held);
}

/// The downgrade's check finds the write node gone, past the deadline: the read node's borrowed
/// place is given back (one delete) and the call does not queue again.
#[test]
fn a_downgrade_whose_write_node_is_found_gone_past_the_deadline_queues_no_more() {
    let (after, write) = downgrade_meets(|e, write_node| {
        let (other, gone) = (e.connect(), write_node.to_string());
        Late::answer(Op::Exists, TIMEOUT)
            .under(write_node)
            .with(move |op, path| {
                if op == Op::Exists && path == gone {
                    let _ = other.delete(&gone, None);
                }
            })
    });
    assert_eq!(after, [Op::Delete], "requests after the late check");
    assert_eq!(write, LockState::Lost);
}

/// A listing fails past the deadline and the retry policy gives up on it: the call fails
/// without another request; its node goes in the background.
#[test]
fn a_listing_given_up_past_the_deadline_makes_no_more_requests() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = ready_mutex(&c, "/locks/a").with_retry_policy(Arc::new(zk_locks::retry::NoRetry));
    let (acquired, after) = Late::failure(Op::GetChildren, TIMEOUT)
        .under("/locks/a")
        .run(&c, |t| m.acquire_timeout(t));
    assert!(
        matches!(&acquired, Err(e) if e.is_retryable()),
        "{acquired:?}"
    );
    assert_eq!(after, NO_REQUESTS, "requests after the late failure");
    eventually(PATIENCE, "our node deleted in the background", || {
        e.children("/locks/a").unwrap().is_empty()
    });
}

/// The same for a semaphore's leases listing: neither the lease nor the admission node is
/// deleted on the caller's thread.
#[test]
fn a_lease_listing_given_up_past_the_deadline_makes_no_more_requests() {
    let (result, after) = semaphore_meets(
        Late::failure(Op::GetChildren, TIMEOUT).under("/sem/leases"),
        1,
        1,
        |s| s.with_retry_policy(Arc::new(zk_locks::retry::NoRetry)),
    );
    assert!(matches!(&result, Err(e) if e.is_retryable()), "{result:?}");
    assert_eq!(after, NO_REQUESTS, "requests after the late one");
}

/// A timed wait for a loss after a reconnect: its read of the node fails late; the wait ends
/// at its deadline without reading again.
#[test]
fn a_timed_wait_for_a_loss_makes_no_request_after_a_late_verification() {
    let (state, after) =
        timed_wait_after_a_reconnect(&["/locks/a"], |g, t| g.nodes()[0].wait_until_lost(Some(t)));
    assert_eq!(state, LockState::Suspect);
    assert_eq!(after, NO_REQUESTS, "requests after the late verification");
}

/// The same for a guard over two nodes: the second node is not read once the first one's read
/// ended past the deadline.
#[test]
fn a_timed_wait_of_a_multi_lock_guard_makes_no_request_after_a_late_verification() {
    let (state, after) =
        timed_wait_after_a_reconnect(&["/locks/a", "/locks/b"], |g, t| g.wait_until_lost(Some(t)));
    assert_eq!(state, LockState::Suspect);
    assert_eq!(after, NO_REQUESTS, "requests after the late verification");
}

/// A revocable lock granted by a listing answered past the deadline: the grant stands, and
/// its revocation watch is armed off the caller's thread (no request past the deadline); a
/// revocation request still reaches the holder.
#[test]
fn a_revocable_lock_granted_past_the_deadline_arms_its_watch_in_the_background() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = ready_mutex(&c, "/locks/a");
    let (asked, revoked) = mpsc::channel();
    let asked = parking_lot::Mutex::new(asked);
    m.make_revocable(move || {
        let _ = asked.lock().send(());
    });
    let (acquired, after) = Late::answer(Op::GetChildren, TIMEOUT)
        .under("/locks/a")
        .run(&c, |t| m.acquire_timeout(t));
    assert!(matches!(acquired, Ok(true)), "{acquired:?}");
    assert_eq!(after, NO_REQUESTS, "requests after the late listing");
    let node = m.held_node().unwrap().path().to_string();
    let other: zk_locks::SharedClient = e.connect();
    eventually(PATIENCE, "the revocation watch armed", || {
        e.watch_count() == 1
    });
    zk_locks::locks::Revoker::attempt_revoke(&other, &node).unwrap();
    revoked
        .recv_timeout(PATIENCE)
        .expect("the holder was asked");
    m.release().unwrap();
}
