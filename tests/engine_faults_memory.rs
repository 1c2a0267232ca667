//! The engine under faults that combine: a lost create then a lost look-up, a create run in a
//! session the client has not reported yet, an outage during a timed acquire, a session lost
//! between semaphore admission and the lease (reported or silent), requests about our node
//! answered `SessionExpired` by the report of a silent session change, a verification that
//! timed out, a client closed while a listing is retried. Deterministic, on the in-memory
//! ensemble.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use common::eventually;
use zk_locks::client::memory::{Fault, MemoryClient, MemoryEnsemble, Op};
use zk_locks::locks::{InterProcessLock, InterProcessMutex, InterProcessSemaphoreV2, LockState};
use zk_locks::{Error, ZkClient};

const PATIENCE: Duration = Duration::from_secs(10);

fn mutex(c: &Arc<MemoryClient>, path: &str) -> InterProcessMutex {
    InterProcessMutex::new(c.clone(), path).unwrap()
}

/// A mutex whose directory exists (the first create of a test then goes straight to the node).
fn ready_mutex(c: &Arc<MemoryClient>, path: &str) -> InterProcessMutex {
    let m = mutex(c, path);
    m.acquire().unwrap();
    m.release().unwrap();
    m
}

/// Runs `f` the first time a request of `op` under `prefix` is made on `c` (on that request's
/// thread, before it is applied).
fn once_on(c: &Arc<MemoryClient>, op: Op, prefix: &str, f: impl Fn() + Send + Sync + 'static) {
    let fired = AtomicUsize::new(0);
    let prefix = prefix.to_string();
    c.on_request(Some(Box::new(move |o, path| {
        if o == op && path.starts_with(&prefix) && fired.fetch_add(1, Ordering::SeqCst) == 0 {
            f();
        }
    })));
}

/// CURATOR-45 with two losses: the create is applied but its reply lost, then the listing that
/// looks for our prefix is lost too. The look-up must be repeated, never the create: a second
/// node of ours would sit behind the first and wait on it.
#[test]
fn a_lost_look_up_after_a_lost_create_looks_again_and_never_creates_again() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = ready_mutex(&c, "/locks/a");
    c.inject(Fault::after(Op::Create));
    c.inject(Fault::before(Op::GetChildren));
    let acquired = m.acquire_timeout(Duration::from_secs(2)).unwrap();
    let kids = e.children("/locks/a").unwrap();
    assert!(acquired, "waited on its own first copy: {kids:?}");
    assert_eq!(kids.len(), 1, "one node of ours: {kids:?}");
    m.release().unwrap();
    assert_eq!(
        e.children("/locks/a").unwrap(),
        Vec::<String>::new(),
        "no orphan"
    );
}

/// A create that timed out on the client is applied by the server later, after the look-up
/// found nothing and a second create was sent: two nodes carry our prefix. The earlier copy
/// must be deleted, not waited on (it would block the lock until the session ends).
#[test]
fn a_copy_of_our_node_from_a_late_create_is_deleted_not_waited_on() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = ready_mutex(&c, "/locks/a");
    c.inject(Fault::timeout(Op::Create));
    let creates = AtomicUsize::new(0);
    let c2 = Arc::downgrade(&c);
    c.on_request(Some(Box::new(move |op, path| {
        // The second create: the first one is applied now, late.
        if op == Op::Create && creates.fetch_add(1, Ordering::SeqCst) == 1 {
            if let Some(c) = c2.upgrade() {
                c.create(path, b"", zk_locks::CreateMode::EphemeralSequential)
                    .unwrap();
            }
        }
    })));
    let acquired = m.acquire_timeout(Duration::from_secs(2)).unwrap();
    c.on_request(None);
    let kids = e.children("/locks/a").unwrap();
    assert!(acquired, "waited on its own earlier copy: {kids:?}");
    assert_eq!(kids.len(), 1, "{kids:?}");
    m.release().unwrap();
    assert_eq!(
        e.children("/locks/a").unwrap(),
        Vec::<String>::new(),
        "no orphan"
    );
}

/// The same for a semaphore lease: a late copy of our lease would count against the maximum.
#[test]
fn a_copy_of_our_lease_from_a_late_create_is_deleted_not_counted() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let s = InterProcessSemaphoreV2::new(c.clone(), "/sem", 1).unwrap();
    drop(s.acquire().unwrap()); // directories exist from here on
    c.inject(Fault::timeout(Op::Create).on_path("/sem/leases/"));
    let creates = AtomicUsize::new(0);
    let c2 = Arc::downgrade(&c);
    c.on_request(Some(Box::new(move |op, path| {
        if op == Op::Create
            && path.starts_with("/sem/leases/")
            && creates.fetch_add(1, Ordering::SeqCst) == 1
        {
            if let Some(c) = c2.upgrade() {
                c.create(path, b"", zk_locks::CreateMode::EphemeralSequential)
                    .unwrap();
            }
        }
    })));
    let lease = s.acquire_timeout(Duration::from_secs(2)).unwrap();
    c.on_request(None);
    let kids = e.children("/sem/leases").unwrap();
    let lease = lease.unwrap_or_else(|| panic!("blocked by its own copy: {kids:?}"));
    assert_eq!(kids, vec![lease.node_name().to_string()]);
    drop(lease);
    assert_eq!(
        e.children("/sem/leases").unwrap(),
        Vec::<String>::new(),
        "no orphan"
    );
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
        Vec::<String>::new(),
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
    let (h, c) = (e.connect(), e.connect());
    let holder = ready_mutex(&h, "/locks/a");
    holder.acquire().unwrap();
    let held = e.children("/locks/a").unwrap();
    let m = mutex(&c, "/locks/a");
    c.inject(Fault::in_new_session(Op::Create));
    let c2 = c.clone();
    once_on(&c, Op::GetData, "/locks/a", move || {
        c2.report_session_change()
    });
    assert!(!m.acquire_timeout(Duration::from_millis(300)).unwrap());
    c.on_request(None);
    assert_eq!(e.children("/locks/a").unwrap(), held, "orphan left behind");
}

/// The link goes down while a timed acquire waits: the call returns by its deadline (with
/// slack for a loaded machine), not after the cleanup's whole retry policy; the node is deleted
/// once the link is back.
#[test]
fn a_timed_acquire_returns_by_its_deadline_during_an_outage() {
    let e = MemoryEnsemble::new();
    let (h, c) = (e.connect(), e.connect());
    let holder = ready_mutex(&h, "/locks/a");
    holder.acquire().unwrap();
    let held = e.children("/locks/a").unwrap();
    let m = mutex(&c, "/locks/a");
    // The link drops as the waiter sets its watch, and stays down.
    let c2 = c.clone();
    once_on(&c, Op::GetData, "/locks/a", move || c2.suspend());
    let timeout = Duration::from_millis(500);
    let start = Instant::now();
    let acquired = m.acquire_timeout(timeout).unwrap();
    let took = start.elapsed();
    assert!(!acquired);
    assert!(
        took < timeout + Duration::from_secs(2),
        "returned after {took:?}"
    );
    c.on_request(None);
    c.resume();
    eventually(PATIENCE, "our node deleted after the outage", || {
        e.children("/locks/a").unwrap() == held
    });
}

/// A request of a timed acquire that outlives the deadline and then fails with an unknown
/// outcome: the call makes no further request on its thread (another could keep it a whole
/// call timeout more); the node is deleted in the background.
#[test]
fn a_timed_acquire_makes_no_request_after_a_late_failure() {
    let e = MemoryEnsemble::new();
    let (h, c) = (e.connect(), e.connect());
    let holder = ready_mutex(&h, "/locks/a");
    holder.acquire().unwrap();
    let held = e.children("/locks/a").unwrap();
    let m = mutex(&c, "/locks/a");
    let timeout = Duration::from_millis(200);
    let caller = thread::current().id();
    let after_late = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let (log, late) = (after_late.clone(), AtomicUsize::new(0));
    c.inject(Fault::timeout(Op::GetData));
    c.on_request(Some(Box::new(move |op, _path| {
        if thread::current().id() != caller {
            return;
        }
        if late.load(Ordering::SeqCst) > 0 {
            log.lock().push(op);
        }
        if op == Op::GetData && late.fetch_add(1, Ordering::SeqCst) == 0 {
            // The watch request is slow: it outlives the deadline (time is the subject here).
            thread::sleep(timeout + Duration::from_millis(50));
        }
    })));
    assert!(!m.acquire_timeout(timeout).unwrap());
    c.on_request(None);
    assert_eq!(
        *after_late.lock(),
        Vec::<Op>::new(),
        "requests after the late failure"
    );
    eventually(PATIENCE, "our node deleted in the background", || {
        e.children("/locks/a").unwrap() == held
    });
}

/// The same for a semaphore: the link drops at the lease listing and stays down; the call
/// returns "not acquired" by its deadline, and the lease and admission nodes are deleted once
/// the link is back.
#[test]
fn a_timed_semaphore_acquire_returns_by_its_deadline_during_an_outage() {
    let e = MemoryEnsemble::new();
    let (x, c) = (e.connect(), e.connect());
    let sx = InterProcessSemaphoreV2::new(x.clone(), "/sem", 1).unwrap();
    let lease_x = sx.acquire().unwrap();
    let held = e.children("/sem/leases").unwrap();
    let sc = InterProcessSemaphoreV2::new(c.clone(), "/sem", 1).unwrap();
    let c2 = c.clone();
    once_on(&c, Op::GetChildren, "/sem/leases", move || c2.suspend());
    let timeout = Duration::from_millis(500);
    let start = Instant::now();
    let result = sc.acquire_timeout(timeout);
    let took = start.elapsed();
    assert!(matches!(result, Ok(None)), "{result:?}");
    assert!(
        took < timeout + Duration::from_secs(2),
        "returned after {took:?}"
    );
    c.on_request(None);
    c.resume();
    eventually(PATIENCE, "lease and admission nodes deleted", || {
        e.children("/sem/leases").unwrap() == held
            && e.children("/sem/locks").unwrap_or_default().is_empty()
    });
    drop(lease_x);
}

/// The admitted waiter's session is lost between admission and its lease create; meanwhile
/// another client is admitted and queues its lease. The first must notice that its admission
/// is gone, delete its lease and queue for admission again; else both leases wait on each
/// other for ever.
#[test]
fn a_session_lost_between_admission_and_lease_goes_back_to_admission() {
    let e = MemoryEnsemble::new();
    let (x, c, d) = (e.connect(), e.connect(), e.connect());
    let sx = InterProcessSemaphoreV2::new(x.clone(), "/sem", 1).unwrap();
    let sc = InterProcessSemaphoreV2::new(c.clone(), "/sem", 1).unwrap();
    let sd = Arc::new(InterProcessSemaphoreV2::new(d.clone(), "/sem", 1).unwrap());
    let lease_x = sx.acquire().unwrap();
    let (tx, rx) = mpsc::channel();
    let (c2, e2, sd2) = (c.clone(), e.clone(), sd.clone());
    once_on(&c, Op::Create, "/sem/leases/", move || {
        let c3 = c2.clone();
        thread::spawn(move || c3.expire()).join().unwrap();
        // The other client is admitted and queues its lease behind x's.
        let (sd3, tx) = (sd2.clone(), tx.clone());
        thread::spawn(move || {
            let _ = tx.send(sd3.acquire_timeout(Duration::from_secs(5)));
        });
        eventually(PATIENCE, "the other lease queued", || {
            e2.children("/sem/leases").unwrap().len() == 2
        });
    });
    thread::scope(|s| {
        let waiter_c = s.spawn(|| sc.acquire_timeout(Duration::from_secs(8)));
        eventually(PATIENCE, "c's lease created", || {
            e.children("/sem/leases").unwrap().len() >= 3
                || e.children("/sem/locks").unwrap_or_default().len() >= 2
        });
        drop(lease_x);
        let lease_d = rx
            .recv()
            .unwrap()
            .unwrap()
            .expect("the admitted client got no lease: deadlocked with the other");
        drop(lease_d);
        let lease_c = waiter_c.join().unwrap().unwrap().expect("c got no lease");
        assert!(lease_c.is_valid());
    });
    c.on_request(None);
    assert!(e.children("/sem/leases").unwrap().is_empty());
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
    common::wait_connected(c.as_ref());
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

/// The create of the pipelined pair is applied and answered, the listing behind it is lost:
/// the node is ours (no look-up, no second create) and the wait loop lists again.
#[test]
fn a_listing_lost_behind_an_answered_create_lists_again_and_creates_once() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = ready_mutex(&c, "/locks/a");
    c.reset_counters();
    c.inject(Fault::before(Op::GetChildren));
    let g = m.lock().unwrap();
    let counters = c.counters();
    assert_eq!(counters.create, 1, "{counters:?}");
    assert_eq!(counters.get_children, 2, "the lost listing, then one more");
    assert_eq!(e.children("/locks/a").unwrap().len(), 1);
    assert_eq!(g.state(), LockState::Held);
    drop(g);
    assert_eq!(e.children("/locks/a").unwrap(), Vec::<String>::new());
}

/// The create's reply is lost: the listing sent behind it on the same connection is lost with
/// it (never counted as a view that includes our node), and the protected-name look-up adopts
/// the node instead of creating again.
#[test]
fn a_create_lost_in_the_pipeline_goes_through_the_look_up() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = ready_mutex(&c, "/locks/a");
    c.reset_counters();
    c.inject(Fault::after(Op::Create));
    let g = m.lock().unwrap();
    let counters = c.counters();
    assert_eq!(counters.create, 1, "never a blind re-create: {counters:?}");
    assert_eq!(e.children("/locks/a").unwrap().len(), 1);
    assert_eq!(g.state(), LockState::Held);
    drop(g);
    assert_eq!(e.children("/locks/a").unwrap(), Vec::<String>::new());
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
    assert_eq!(e.children("/locks/a").unwrap(), Vec::<String>::new());
}

/// The semaphore does not wait for its admission delete once the lease is granted; when that
/// delete's connection is lost, the delete goes on in the background and the next client is
/// admitted.
#[test]
fn an_admission_delete_cut_off_goes_on_in_the_background() {
    let e = MemoryEnsemble::new();
    let (c, other) = (e.connect(), e.connect());
    let s = InterProcessSemaphoreV2::new(c.clone(), "/sem", 1).unwrap();
    drop(s.acquire().unwrap()); // directories exist from here on
    c.inject(Fault::before(Op::Delete).on_path("/sem/locks/"));
    let lease = s.acquire().unwrap();
    eventually(PATIENCE, "the admission node is deleted", || {
        e.children("/sem/locks").unwrap_or_default().is_empty()
    });
    drop(lease);
    let s2 = InterProcessSemaphoreV2::new(other.clone(), "/sem", 1).unwrap();
    let lease = s2.acquire_timeout(PATIENCE).unwrap();
    assert!(lease.is_some(), "the next client is admitted");
}

/// Moves `c` to a new session it does not report yet: its old session ends on the server,
/// with its ephemeral nodes, and its requests run in the new one from now on.
fn change_session_silently(c: &MemoryClient) {
    c.inject(Fault::in_new_session(Op::Exists));
    c.exists("/").unwrap();
}

/// Reports `c`'s silent session change from another thread, as a link's event would come.
fn report_change(c: &Arc<MemoryClient>) {
    let c = c.clone();
    thread::spawn(move || c.report_session_change())
        .join()
        .unwrap();
}

/// Hooks the next create under `dir/`: it runs in a session the client has not reported, and
/// its outcome is unknown to the caller (the server made the node, the reply timed out). The
/// first listing of `dir` that `lists_on` picks then meets the report of the change, and
/// is answered `SessionExpired` although the node lives on in the new session.
fn silent_create_then_report(
    c: &Arc<MemoryClient>,
    dir: &'static str,
    lists_on: impl Fn() -> bool + Send + Sync + 'static,
) {
    let weak = Arc::downgrade(c);
    let (created, reported) = (AtomicUsize::new(0), AtomicUsize::new(0));
    c.on_request(Some(Box::new(move |op, path| {
        let Some(c) = weak.upgrade() else { return };
        let in_dir = path.strip_prefix(dir).is_some_and(|p| p.starts_with('/'));
        if op == Op::Create && in_dir && created.fetch_add(1, Ordering::SeqCst) == 0 {
            change_session_silently(&c);
            c.create(path, b"", zk_locks::CreateMode::EphemeralSequential)
                .unwrap();
            c.inject(Fault::timeout(Op::Create));
        } else if op == Op::GetChildren
            && path == dir
            && created.load(Ordering::SeqCst) > 0
            && lists_on()
            && reported.fetch_add(1, Ordering::SeqCst) == 0
        {
            report_change(&c);
        }
    })));
}

/// A create with an unknown outcome ran in a session the client had not reported; the look-up
/// for it meets the report and is answered `SessionExpired`. That says nothing of the node,
/// which lives on in the new session: the look-up is made again there and finds it. Creating
/// again instead leaves the first node ahead of ours, and we wait on ourselves.
#[test]
fn a_look_up_answered_session_expired_looks_again_in_the_session_of_now() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = ready_mutex(&c, "/locks/a");
    silent_create_then_report(&c, "/locks/a", || true);
    let acquired = m.acquire_timeout(Duration::from_secs(2)).unwrap();
    c.on_request(None);
    let kids = e.children("/locks/a").unwrap();
    assert!(acquired, "waited on its own first node: {kids:?}");
    assert_eq!(kids.len(), 1, "one node of ours: {kids:?}");
    m.release().unwrap();
    assert_eq!(
        e.children("/locks/a").unwrap(),
        Vec::<String>::new(),
        "no orphan"
    );
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
        thread::current().name() == Some("zk-locks-find-delete")
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

/// The admission node made in a session the client has not reported; the delete sent without
/// waiting once the lease is granted meets the report and is answered `SessionExpired`. The
/// node lives on in the new session and would keep every other client out: the delete goes
/// on in the background.
#[test]
fn an_admission_delete_answered_session_expired_goes_on_in_the_background() {
    let e = MemoryEnsemble::new();
    let (c, other) = (e.connect(), e.connect());
    let s = InterProcessSemaphoreV2::new(c.clone(), "/sem", 1).unwrap();
    drop(s.acquire().unwrap()); // directories exist from here on
    c.inject(Fault::in_new_session(Op::Create).on_path("/sem/locks/"));
    let c2 = c.clone();
    once_on(&c, Op::Delete, "/sem/locks/", move || report_change(&c2));
    let lease = s.acquire().unwrap();
    drop(lease);
    eventually(PATIENCE, "the admission node deleted", || {
        e.children("/sem/locks").unwrap_or_default().is_empty()
    });
    c.on_request(None);
    let s2 = InterProcessSemaphoreV2::new(other.clone(), "/sem", 1).unwrap();
    assert!(s2.acquire_timeout(PATIENCE).unwrap().is_some());
}

/// Item 8 with a silent session change: the admitted client's session changes unreported just
/// before its lease create (its admission node ends with the old session), another client is
/// admitted and queues its lease, and the first one's lease is made in the new session. The
/// client still believes it is admitted; it must ask the server before waiting, else both
/// leases are over the maximum and each waits on the other.
#[test]
fn a_silent_session_change_between_admission_and_lease_goes_back_to_admission() {
    let e = MemoryEnsemble::new();
    let (x, c, d) = (e.connect(), e.connect(), e.connect());
    let sx = InterProcessSemaphoreV2::new(x.clone(), "/sem", 1).unwrap();
    let sc = InterProcessSemaphoreV2::new(c.clone(), "/sem", 1).unwrap();
    let sd = Arc::new(InterProcessSemaphoreV2::new(d.clone(), "/sem", 1).unwrap());
    let lease_x = sx.acquire().unwrap();
    let (tx, rx) = mpsc::channel();
    let (c2, e2, sd2) = (c.clone(), e.clone(), sd.clone());
    once_on(&c, Op::Create, "/sem/leases/", move || {
        change_session_silently(&c2);
        let (sd3, tx) = (sd2.clone(), tx.clone());
        thread::spawn(move || {
            let _ = tx.send(sd3.acquire_timeout(Duration::from_secs(5)));
        });
        eventually(PATIENCE, "the other lease queued", || {
            e2.children("/sem/leases").unwrap().len() == 2
        });
    });
    thread::scope(|s| {
        let waiter_c = s.spawn(|| sc.acquire_timeout(Duration::from_secs(8)));
        eventually(PATIENCE, "c's lease created", || {
            e.children("/sem/leases").unwrap().len() >= 3
                || e.children("/sem/locks").unwrap_or_default().len() >= 2
        });
        drop(lease_x);
        let lease_d = rx
            .recv()
            .unwrap()
            .unwrap()
            .expect("the admitted client got no lease: deadlocked with the other");
        drop(lease_d);
        let lease_c = waiter_c.join().unwrap().unwrap().expect("c got no lease");
        assert!(lease_c.is_valid());
    });
    c.on_request(None);
    assert!(e.children("/sem/leases").unwrap().is_empty());
}
