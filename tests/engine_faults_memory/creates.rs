//! Lost creates and look-ups: a create or its look-up lost, a late copy of our node, a create
//! run in a session the client has not reported yet, the pipelined create and listing.

use super::*;

/// A client's mutex on `/locks/a` (its directory made), with the faults and hooks `setup`
/// sets on the client: acquired within two seconds through one node, `Held` (a second node of
/// ours would wait on the first); released, nothing is left. Returns the client's requests
/// from the acquire.
fn holds_through_one_node(setup: impl FnOnce(&Arc<MemoryClient>)) -> Counters {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = ready_mutex(&c, "/locks/a");
    c.reset_counters();
    setup(&c);
    let g = m.try_lock_for(Duration::from_secs(2)).unwrap();
    c.on_request(None);
    let counters = c.counters();
    let kids = e.children("/locks/a").unwrap();
    let g = g.unwrap_or_else(|| panic!("waited on its own first node: {kids:?}"));
    assert_eq!(kids.len(), 1, "one node of ours: {kids:?}");
    assert_eq!(g.state(), LockState::Held);
    drop(g);
    assert_eq!(e.children("/locks/a").unwrap(), NO_NODES, "no orphan");
    counters
}

/// CURATOR-45 with two losses: the create is applied but its reply lost, then the listing that
/// looks for our prefix is lost too. The look-up must be repeated, never the create: a second
/// node of ours would sit behind the first and wait on it.
#[test]
fn a_lost_look_up_after_a_lost_create_looks_again_and_never_creates_again() {
    holds_through_one_node(|c| {
        c.inject(Fault::after(Op::Create));
        c.inject(Fault::before(Op::GetChildren));
    });
}

/// A create that timed out on the client is applied by the server later, after the look-up
/// found nothing and a second create was sent: two nodes carry our prefix. The earlier copy
/// must be deleted, not waited on (it would block the lock until the session ends).
#[test]
fn a_copy_of_our_node_from_a_late_create_is_deleted_not_waited_on() {
    holds_through_one_node(|c| {
        c.inject(Fault::timeout(Op::Create));
        c.on_request(Some(Box::new(late_copy(c, "/locks/a/"))));
    });
}

/// The same for a semaphore lease: a late copy of our lease would count against the maximum.
#[test]
fn a_copy_of_our_lease_from_a_late_create_is_deleted_not_counted() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let s = InterProcessSemaphoreV2::new(c.clone(), "/sem", 1).unwrap();
    drop(s.acquire().unwrap()); // directories exist from here on
    c.inject(Fault::timeout(Op::Create).on_path("/sem/leases/"));
    c.on_request(Some(Box::new(late_copy(&c, "/sem/leases/"))));
    let lease = s.acquire_timeout(Duration::from_secs(2)).unwrap();
    c.on_request(None);
    let kids = e.children("/sem/leases").unwrap();
    let lease = lease.unwrap_or_else(|| panic!("blocked by its own copy: {kids:?}"));
    assert_eq!(kids, vec![lease.node_name().to_string()]);
    drop(lease);
    assert_eq!(e.children("/sem/leases").unwrap(), NO_NODES, "no orphan");
}

/// The create runs in a new session the client has not reported yet; the change is reported
/// while the lock is held. The guard must say `Lost` (we cannot know the node is ours), and its
/// release must delete the node anyway: it lives in the live session and blocks the lock.
#[test]
fn a_node_created_in_an_unreported_new_session_is_deleted_on_release() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = ready_mutex(&c, "/locks/a");
    c.inject(Fault::in_new_session(Op::Create));
    let g = m.lock().unwrap();
    c.report_session_change();
    assert_eq!(g.state(), LockState::Lost);
    drop(g);
    assert_eq!(
        e.children("/locks/a").unwrap(),
        NO_NODES,
        "the node of the new session was left behind"
    );
    // And the lock is free for someone else.
    let other = e.connect();
    assert!(mutex(&other, "/locks/a")
        .acquire_timeout(Duration::from_millis(200))
        .unwrap());
}

/// Same, but the change is reported while we wait (the watch request then fails with an expired
/// session): the node must be deleted before queueing again, and the timeout deletes the
/// second one.
#[test]
fn a_node_created_in_an_unreported_new_session_is_deleted_when_the_wait_ends() {
    let e = MemoryEnsemble::new();
    let t = contended(&e, "/locks/a");
    t.c.inject(Fault::in_new_session(Op::Create));
    let c2 = t.c.clone();
    once_on(&t.c, Op::GetData, "/locks/a", move || {
        c2.report_session_change()
    });
    assert!(!t
        .waiter
        .acquire_timeout(Duration::from_millis(300))
        .unwrap());
    t.c.on_request(None);
    assert_eq!(
        e.children("/locks/a").unwrap(),
        t.held,
        "orphan left behind"
    );
}

/// The create of the pipelined pair is applied and answered, the listing behind it is lost:
/// the node is ours (no look-up, no second create) and the wait loop lists again.
#[test]
fn a_listing_lost_behind_an_answered_create_lists_again_and_creates_once() {
    let counters = holds_through_one_node(|c| c.inject(Fault::before(Op::GetChildren)));
    assert_eq!(counters.create, 1, "{counters:?}");
    assert_eq!(counters.get_children, 2, "the lost listing, then one more");
}

/// The create's reply is lost: the listing sent behind it on the same connection is lost with
/// it (never counted as a view that includes our node), and the protected-name look-up adopts
/// the node instead of creating again.
#[test]
fn a_create_lost_in_the_pipeline_goes_through_the_look_up() {
    let counters = holds_through_one_node(|c| c.inject(Fault::after(Op::Create)));
    assert_eq!(counters.create, 1, "never a blind re-create: {counters:?}");
}

/// The session expires between the create and the listing behind it: the node died with the
/// session, so the engine queues again with a new node in the new session.
#[test]
fn a_session_lost_between_create_and_listing_queues_again() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = ready_mutex(&c, "/locks/a");
    let first_session = c.session_id();
    let expirer = c.clone();
    once_on(&c, Op::GetChildren, "/locks/a", move || expirer.expire());
    let g = m.lock().unwrap();
    assert_ne!(c.session_id(), first_session);
    assert_eq!(g.state(), LockState::Held);
    let kids = e.children("/locks/a").unwrap();
    assert_eq!(kids.len(), 1, "only the node of the new session: {kids:?}");
    let (_, stat) = e.node(&format!("/locks/a/{}", kids[0])).unwrap();
    assert_eq!(stat.ephemeral_owner, c.session_id());
    assert_eq!(g.fencing_token().unwrap(), stat.czxid);
    drop(g);
    assert_eq!(e.children("/locks/a").unwrap(), NO_NODES);
}

/// A create with an unknown outcome ran in a session the client had not reported; the look-up
/// for it meets the report and is answered `SessionExpired`. That says nothing of the node,
/// which lives on in the new session: the look-up is made again there and finds it. Creating
/// again instead leaves the first node ahead of ours, and we wait on ourselves.
#[test]
fn a_look_up_answered_session_expired_looks_again_in_the_session_of_now() {
    holds_through_one_node(|c| silent_create_then_report(c, "/locks/a", || true));
}

/// The same create, given up at once (no retries): the node is looked for and deleted in the
/// background. That look-up meets the report and is answered `SessionExpired`: the node lives
/// on in the new session, so the background look-up goes on there until it is deleted.
#[test]
fn a_background_look_up_answered_session_expired_goes_on_in_the_session_of_now() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = ready_mutex(&c, "/locks/a").with_retry_policy(Arc::new(zk_locks::retry::NoRetry));
    silent_create_then_report(&c, "/locks/a", || {
        thread::current().name() == Some("zk-locks-delete")
    });
    let given_up = m.acquire_timeout(Duration::from_secs(2));
    assert!(
        matches!(given_up, Err(Error::RetriesExhausted { .. })),
        "{given_up:?}"
    );
    eventually(PATIENCE, "the node of the silent session deleted", || {
        e.children("/locks/a").unwrap().is_empty()
    });
    c.on_request(None);
}
