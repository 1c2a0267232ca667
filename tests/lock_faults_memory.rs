//! Deterministic failure modes of the lock engine on the in-memory ensemble: connection loss
//! before/after the create is applied, session loss at exact points, request counts, herd.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use common::{eventually, Memory};
use zk_locks::client::memory::{Fault, MemoryEnsemble, Op};
use zk_locks::locks::{InterProcessLock, InterProcessMutex, LockState};
use zk_locks::ZkClient;

const PATIENCE: Duration = Duration::from_secs(10);

fn mutex(c: &Arc<zk_locks::client::memory::MemoryClient>, path: &str) -> InterProcessMutex {
    InterProcessMutex::new(c.clone(), path).unwrap()
}

#[test]
fn connection_loss_before_create_is_applied_creates_once() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = mutex(&c, "/locks/a");
    m.acquire().unwrap(); // parents exist from here on
    m.release().unwrap();
    c.inject(Fault::before(Op::Create));
    let g = m.lock().unwrap();
    assert_eq!(e.children("/locks/a").unwrap().len(), 1);
    drop(g);
    assert_eq!(e.children("/locks/a").unwrap().len(), 0);
}

#[test]
fn connection_loss_after_create_is_applied_adopts_our_node() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = mutex(&c, "/locks/a");
    m.acquire().unwrap();
    m.release().unwrap();
    c.inject(Fault::after(Op::Create));
    let g = m.lock().unwrap();
    let kids = e.children("/locks/a").unwrap();
    assert_eq!(kids.len(), 1, "adopted, not created twice: {kids:?}");
    assert_eq!(g.node_path().unwrap(), format!("/locks/a/{}", kids[0]));
    drop(g);
    assert_eq!(e.children("/locks/a").unwrap().len(), 0, "no orphan");
}

#[test]
fn a_node_left_by_our_previous_session_is_not_adopted() {
    // CURATOR-498: the create is applied, the connection drops, and the session expires before
    // we look: the node we find by prefix (if the server still lists it) is not ours.
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = mutex(&c, "/locks/a");
    m.acquire().unwrap();
    m.release().unwrap();
    let c2 = c.clone();
    let expired = Arc::new(AtomicUsize::new(0));
    let ex = expired.clone();
    c.inject(Fault::after(Op::Create));
    c.on_request(Some(Box::new(move |op, _path| {
        // The first look-up after the lost create: expire the session first.
        if op == Op::GetChildren && ex.fetch_add(1, Ordering::SeqCst) == 0 {
            let c3 = c2.clone();
            thread::spawn(move || c3.expire()).join().unwrap();
        }
    })));
    let g = m.lock().unwrap();
    c.on_request(None);
    let kids = e.children("/locks/a").unwrap();
    assert_eq!(kids.len(), 1, "{kids:?}");
    let (_, stat) = e.node(g.node_path().unwrap()).unwrap();
    assert_eq!(
        stat.ephemeral_owner,
        c.session_id(),
        "owned by the current session"
    );
    assert_eq!(g.state(), LockState::Held);
}

/// A waiter deep in the queue whose node is deleted by hand notices at its next listing and
/// queues again with a new node. (The hand-off without a re-list assumes lock nodes are only
/// deleted by their owners or by session expiry: see ARCHITECTURE.md.)
#[test]
fn our_node_vanishing_while_waiting_retries_with_a_new_node() {
    let e = MemoryEnsemble::new();
    let (c1, c2, c3) = (e.connect(), e.connect(), e.connect());
    let (m1, m2, m3) = (mutex(&c1, "/l"), mutex(&c2, "/l"), mutex(&c3, "/l"));
    let g1 = m1.lock().unwrap();
    thread::scope(|s| {
        let w2 = s.spawn(|| m2.lock().map(|g| g.unlock()).unwrap());
        eventually(PATIENCE, "2 queued", || {
            e.children("/l").unwrap().len() == 2
        });
        let w3 = s.spawn(|| {
            assert!(m3.acquire_timeout(PATIENCE).unwrap());
            let live = e.node(m3.held_node().unwrap().path()).is_some();
            m3.release().unwrap();
            live
        });
        eventually(PATIENCE, "3 queued", || {
            e.children("/l").unwrap().len() == 3
        });
        let third = m1.participant_nodes().unwrap()[2].clone();
        c1.delete(&third, None).unwrap();
        drop(g1);
        w2.join().unwrap().unwrap();
        assert!(w3.join().unwrap(), "holds through a live node");
    });
    assert!(e.children("/l").unwrap_or_default().is_empty());
}

/// A thread that owns one mutex and acquires or releases it on command (a reentrant mutex is
/// released by the thread that took it).
struct Worker {
    tx: mpsc::Sender<(bool, mpsc::Sender<()>)>,
}

impl Worker {
    fn start(m: InterProcessMutex) -> Worker {
        let (tx, rx) = mpsc::channel::<(bool, mpsc::Sender<()>)>();
        thread::spawn(move || {
            for (acquire, done) in rx {
                if acquire {
                    m.acquire().unwrap();
                } else {
                    m.release().unwrap();
                }
                let _ = done.send(());
            }
        });
        Worker { tx }
    }

    /// Starts the command; the returned receiver says when it is done.
    fn start_cmd(&self, acquire: bool) -> mpsc::Receiver<()> {
        let (done_tx, done_rx) = mpsc::channel();
        self.tx.send((acquire, done_tx)).unwrap();
        done_rx
    }
}

#[test]
fn two_sessions_alternating_cost_four_requests_per_acquisition() {
    let e = MemoryEnsemble::new();
    let (c1, c2) = (e.connect(), e.connect());
    let workers = [
        Worker::start(mutex(&c1, "/l")),
        Worker::start(mutex(&c2, "/l")),
    ];
    workers[0].start_cmd(true).recv().unwrap();
    c1.reset_counters();
    c2.reset_counters();
    let rounds = 20;
    for round in 0..rounds {
        let (holder, waiter) = (&workers[round % 2], &workers[(round + 1) % 2]);
        let acquired = waiter.start_cmd(true);
        eventually(PATIENCE, "waiter queued", || {
            e.children("/l").unwrap().len() == 2
        });
        holder.start_cmd(false).recv().unwrap();
        acquired.recv().unwrap();
    }
    workers[rounds % 2].start_cmd(false).recv().unwrap();
    let (n1, n2) = (c1.counters(), c2.counters());
    // Each contended acquisition: create, list, watch (get_data), and the delete on release;
    // the hand-off itself needs no second listing.
    // (+1: the delete of the acquisition made before the counters were reset.)
    assert_eq!(
        n1.requests() + n2.requests(),
        4 * rounds as u64 + 1,
        "{n1:?} {n2:?}"
    );
    assert_eq!(
        n1.get_children + n2.get_children,
        rounds as u64,
        "{n1:?} {n2:?}"
    );
}

#[test]
fn deep_queue_waiter_relists_once() {
    let e = MemoryEnsemble::new();
    let cs: Vec<_> = (0..3).map(|_| e.connect()).collect();
    let ms: Vec<_> = cs.iter().map(|c| mutex(c, "/l")).collect();
    let g0 = ms[0].lock().unwrap();
    thread::scope(|s| {
        let w1 = s.spawn(|| ms[1].lock().map(|g| g.unlock()).unwrap());
        eventually(PATIENCE, "1 queued", || {
            e.children("/l").unwrap().len() == 2
        });
        cs[2].reset_counters();
        let w2 = s.spawn(|| {
            let g = ms[2].lock().unwrap();
            let n = cs[2].counters();
            drop(g);
            n
        });
        eventually(PATIENCE, "2 queued", || {
            e.children("/l").unwrap().len() == 3
        });
        drop(g0);
        w1.join().unwrap().unwrap();
        let n = w2.join().unwrap();
        // create, list (2 ahead), watch #1, list again after #1's deletion (then 0 ahead).
        assert_eq!((n.create, n.get_children, n.get_data), (1, 2, 1), "{n:?}");
    });
}

#[test]
fn one_release_wakes_one_waiter() {
    let e = MemoryEnsemble::new();
    let holder_c = e.connect();
    let holder = mutex(&holder_c, "/l");
    let g = holder.lock().unwrap();
    let n = 50;
    let clients: Vec<_> = (0..n).map(|_| e.connect()).collect();
    let acquired = AtomicUsize::new(0);
    let ms: Vec<_> = clients.iter().map(|c| mutex(c, "/l")).collect();
    let (tx, rx) = mpsc::channel::<()>();
    let rx = parking_lot::Mutex::new(rx);
    thread::scope(|s| {
        for m in &ms {
            let (acquired, rx) = (&acquired, &rx);
            s.spawn(move || {
                let _g = m.lock().unwrap();
                acquired.fetch_add(1, Ordering::SeqCst);
                // Hold until the test lets go, so only one hand-off happens at first.
                let _ = rx.lock().recv();
            });
        }
        eventually(PATIENCE, "all queued", || {
            e.children("/l").unwrap().len() == n + 1
        });
        let before: u64 = clients.iter().map(|c| c.counters().watch_events).sum();
        drop(g);
        eventually(PATIENCE, "one acquired", || {
            acquired.load(Ordering::SeqCst) == 1
        });
        let after: u64 = clients.iter().map(|c| c.counters().watch_events).sum();
        assert_eq!(after - before, 1, "exactly one watch event for one release");
        for _ in 0..n {
            tx.send(()).unwrap();
        }
    });
    assert_eq!(acquired.load(Ordering::SeqCst), n);
    assert_eq!(e.watch_count(), 0);
}

#[test]
fn holder_sees_suspect_then_held_on_a_blip_and_lost_on_expiry() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = mutex(&c, "/l");
    let g = m.lock().unwrap();
    c.suspend();
    assert_eq!(g.state(), LockState::Suspect);
    c.resume();
    common::wait_connected(c.as_ref());
    assert_eq!(g.state(), LockState::Held);
    let node = g.nodes()[0].clone();
    thread::scope(|s| {
        let waiting = s.spawn(|| node.wait_while_held(Some(PATIENCE)));
        c.expire();
        assert_eq!(waiting.join().unwrap(), LockState::Lost);
    });
    assert_eq!(g.state(), LockState::Lost);
}

#[test]
fn node_deleted_by_hand_while_holding_is_lost_after_reconnect() {
    let e = MemoryEnsemble::new();
    let (c, admin) = (e.connect(), e.connect());
    let m = mutex(&c, "/l");
    let g = m.lock().unwrap();
    admin.delete(g.node_path().unwrap(), None).unwrap();
    c.suspend();
    c.resume();
    common::wait_connected(c.as_ref());
    assert_eq!(g.state(), LockState::Lost);
}

#[test]
fn thousand_waiters_are_served_in_order() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let holder = Arc::new(mutex(&c, "/deep"));
    let n = 1000;
    let order = Arc::new(parking_lot::Mutex::new(Vec::with_capacity(n)));
    let g = holder.lock().unwrap();
    let clients: Vec<_> = (0..n).map(|_| e.connect()).collect();
    thread::scope(|s| {
        for (i, cl) in clients.iter().enumerate() {
            let order = order.clone();
            let m = mutex(cl, "/deep");
            thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn_scoped(s, move || {
                    let _g = m.lock().unwrap();
                    order.lock().push(i);
                })
                .unwrap();
            eventually(PATIENCE, "queued", || {
                e.children("/deep").unwrap().len() == i + 2
            });
        }
        drop(g);
    });
    let order = order.lock();
    assert_eq!(*order, (0..n).collect::<Vec<_>>());
    assert_eq!(e.watch_count(), 0);
}

#[test]
fn memory_backend_module_is_used() {
    // Keeps the shared harness's memory helpers exercised from this file too.
    let m = Memory::new();
    let c = m.connect_memory();
    assert!(c.session().state().is_connected());
}

#[test]
fn wait_until_lost_sits_out_a_suspect_spell() {
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let m = mutex(&c, "/l");
    let g = m.lock().unwrap();
    let node = g.nodes()[0].clone();
    thread::scope(|s| {
        let waiting = s.spawn(|| node.wait_until_lost(Some(PATIENCE)));
        c.suspend();
        c.resume();
        common::wait_connected(c.as_ref());
        c.expire();
        // Had the wait ended at Suspect, it would say so here.
        assert_eq!(waiting.join().unwrap(), LockState::Lost);
    });
}

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

/// A guard whose hold was lost with its session, then replaced by a new hold of the same
/// thread (after an explicit release), must not release the new hold when dropped: a guard
/// releases its own hold and nothing else. The same for each side of a read/write lock.
#[test]
fn a_lost_guard_does_not_release_the_next_hold() {
    use zk_locks::locks::InterProcessReadWriteLock;
    let e = MemoryEnsemble::new();
    let (c1, c2) = (e.connect(), e.connect());
    let m = mutex(&c1, "/m");
    let other = mutex(&c2, "/m");
    let lost = m.lock().unwrap();
    c1.expire();
    assert_eq!(lost.state(), LockState::Lost);
    m.release().unwrap();
    let current = m.lock().unwrap();
    drop(lost);
    assert_eq!(current.state(), LockState::Held);
    assert!(
        !other.acquire_timeout(Duration::from_millis(100)).unwrap(),
        "another client got in: the lost guard released the current hold"
    );
    drop(current);
    assert!(other.acquire_timeout(PATIENCE).unwrap());
    other.release().unwrap();

    let rw = InterProcessReadWriteLock::new(c1.clone(), "/rw").unwrap();
    let rw_other = InterProcessReadWriteLock::new(c2.clone(), "/rw").unwrap();
    let lost = rw.write_lock().lock().unwrap();
    c1.expire();
    rw.write_lock().release().unwrap();
    let current = rw.write_lock().lock().unwrap();
    drop(lost);
    assert!(
        !rw_other
            .read_lock()
            .acquire_timeout(Duration::from_millis(100))
            .unwrap(),
        "another client read: the lost guard released the current write hold"
    );
    drop(current);
    assert!(rw_other.read_lock().acquire_timeout(PATIENCE).unwrap());
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

/// A retry policy that closes a client the first time it is asked: "the client is closed
/// during a retry", at an exact point.
#[derive(Debug)]
struct CloseOnFirstRetry(Arc<zk_locks::client::memory::MemoryClient>, AtomicUsize);

impl zk_locks::retry::RetryPolicy for CloseOnFirstRetry {
    fn next_retry(&self, _attempt: u32, _elapsed: Duration) -> Option<Duration> {
        if self.1.fetch_add(1, Ordering::SeqCst) == 0 {
            self.0.close();
        }
        Some(Duration::from_millis(10))
    }
}

/// The link goes down on the first listing of `prefix` by `c` (and stays down).
fn link_down_on_first_listing(c: &Arc<zk_locks::client::memory::MemoryClient>, prefix: &str) {
    let (c2, prefix, fired) = (c.clone(), prefix.to_string(), AtomicUsize::new(0));
    c.on_request(Some(Box::new(move |op, path| {
        if op == Op::GetChildren
            && path.starts_with(&prefix)
            && fired.fetch_add(1, Ordering::SeqCst) == 0
        {
            c2.suspend();
        }
    })));
}

/// A timed semaphore acquire whose lease listing fails while the link stays down: it returns
/// "not acquired" once its deadline passed, not the error of a retry policy that ran on
/// past the deadline.
#[test]
fn semaphore_listing_retry_ends_at_the_deadline() {
    use zk_locks::locks::InterProcessSemaphoreV2;
    use zk_locks::retry::RetryNTimes;
    let e = MemoryEnsemble::new();
    let (c1, c2) = (e.connect(), e.connect());
    let holder = InterProcessSemaphoreV2::new(c2.clone(), "/s", 1).unwrap();
    let _lease = holder.acquire().unwrap();
    let sem = InterProcessSemaphoreV2::new(c1.clone(), "/s", 1)
        .unwrap()
        .with_retry_policy(Arc::new(RetryNTimes {
            n: 3,
            sleep: Duration::from_millis(200),
        }));
    link_down_on_first_listing(&c1, "/s/leases");
    let got = sem.acquire_timeout(Duration::from_millis(300));
    c1.on_request(None);
    c1.resume();
    assert!(matches!(got, Ok(None)), "{got:?}");
}

/// A client closed during a listing retry is `Error::Closed`, not a timeout, in the mutex and
/// in the semaphore.
#[test]
fn closed_during_a_listing_retry_is_closed() {
    use zk_locks::locks::InterProcessSemaphoreV2;
    use zk_locks::Error;
    let e = MemoryEnsemble::new();
    let holder_client = e.connect();
    let holder = mutex(&holder_client, "/m");
    holder.acquire().unwrap();
    let c = e.connect();
    let m = mutex(&c, "/m")
        .with_retry_policy(Arc::new(CloseOnFirstRetry(c.clone(), AtomicUsize::new(0))));
    link_down_on_first_listing(&c, "/m");
    let got = m.acquire_timeout(PATIENCE);
    assert!(matches!(got, Err(Error::Closed)), "mutex: {got:?}");

    let holder = InterProcessSemaphoreV2::new(holder_client.clone(), "/s", 1).unwrap();
    let _lease = holder.acquire().unwrap();
    let c = e.connect();
    let sem = InterProcessSemaphoreV2::new(c.clone(), "/s", 1)
        .unwrap()
        .with_retry_policy(Arc::new(CloseOnFirstRetry(c.clone(), AtomicUsize::new(0))));
    link_down_on_first_listing(&c, "/s/leases");
    let got = sem.acquire_timeout(PATIENCE);
    assert!(matches!(got, Err(Error::Closed)), "semaphore: {got:?}");
}

/// Re-entering a hold that was lost with its session must not succeed as a reentrant count
/// (another client may hold the lock by then): a typed error, and once the lost hold is
/// released, a fresh acquire queues as usual. The same for a write lock.
#[test]
fn reentering_a_lost_hold_is_a_typed_error() {
    use zk_locks::locks::InterProcessReadWriteLock;
    use zk_locks::Error;
    let e = MemoryEnsemble::new();
    let (c1, c2) = (e.connect(), e.connect());
    let m = mutex(&c1, "/m");
    let other = mutex(&c2, "/m");
    m.acquire().unwrap();
    c1.expire();
    assert!(other.acquire_timeout(PATIENCE).unwrap());
    let again = m.acquire_timeout(Duration::from_millis(100));
    assert!(
        matches!(again, Err(Error::SessionLost { .. })),
        "re-entered a lost hold while another client holds the lock: {again:?}"
    );
    m.release().unwrap();
    assert!(!m.acquire_timeout(Duration::from_millis(100)).unwrap());
    other.release().unwrap();
    assert!(m.acquire_timeout(PATIENCE).unwrap());
    m.release().unwrap();

    let rw = InterProcessReadWriteLock::new(c1.clone(), "/rw").unwrap();
    let rw_other = InterProcessReadWriteLock::new(c2.clone(), "/rw").unwrap();
    rw.write_lock().acquire().unwrap();
    c1.expire();
    assert!(rw_other.write_lock().acquire_timeout(PATIENCE).unwrap());
    let again = rw.write_lock().acquire();
    assert!(
        matches!(again, Err(Error::SessionLost { .. })),
        "re-entered a lost write lock while another client writes: {again:?}"
    );
    rw.write_lock().release().unwrap();
    rw_other.write_lock().release().unwrap();
}

#[test]
fn uncontended_cycle_is_two_round_trips_on_a_pipelining_backend() {
    use zk_locks::client::CountingClient;
    let e = MemoryEnsemble::new();
    let counting = Arc::new(CountingClient::new(e.connect()));
    let m = InterProcessMutex::new(counting.clone(), "/locks/rt").unwrap();
    m.acquire().unwrap(); // creates the parents
    m.release().unwrap();
    counting.reset_counters();
    for _ in 0..10 {
        let g = m.lock().unwrap();
        g.fencing_token().unwrap();
        drop(g);
    }
    let c = counting.counters();
    // One pipeline (create + listing), one delete; the fencing token comes with the create.
    assert_eq!(c.round_trips, 2 * 10, "{c:?}");
    assert_eq!(
        (c.create, c.get_children, c.delete, c.requests()),
        (10, 10, 10, 30),
        "{c:?}"
    );
}

/// On a backend that restores watches, a waiter whose predecessor went away while its link was
/// down takes the lock from its restored watch: no second listing.
#[test]
fn a_restored_watch_hands_over_without_a_second_listing() {
    let e = MemoryEnsemble::new();
    let (c1, c2) = (e.connect(), e.connect());
    c2.set_watches_survive_reconnect(true);
    let m1 = mutex(&c1, "/l");
    m1.acquire().unwrap();
    c2.reset_counters();
    let waiter = Worker::start(mutex(&c2, "/l"));
    let acquired = waiter.start_cmd(true);
    eventually(PATIENCE, "the waiter watches the holder", || {
        e.watch_count() == 1
    });
    c2.suspend();
    m1.release().unwrap();
    c2.resume();
    acquired.recv().unwrap();
    let c = c2.counters();
    assert_eq!(
        (c.create, c.get_children, c.get_data),
        (1, 1, 1),
        "queued once, listed once, watched once: {c:?}"
    );
    waiter.start_cmd(false).recv().unwrap();
    assert_eq!(e.children("/l").unwrap(), Vec::<String>::new());
}

/// Without restored watches the waiter lists again after the reconnect (and still gets the
/// lock): its watch may be gone.
#[test]
fn without_restored_watches_a_reconnect_lists_again() {
    let e = MemoryEnsemble::new();
    let (c1, c2) = (e.connect(), e.connect());
    let m1 = mutex(&c1, "/l");
    m1.acquire().unwrap();
    c2.reset_counters();
    let waiter = Worker::start(mutex(&c2, "/l"));
    let acquired = waiter.start_cmd(true);
    eventually(PATIENCE, "the waiter watches the holder", || {
        e.watch_count() == 1
    });
    c2.suspend();
    m1.release().unwrap();
    c2.resume();
    acquired.recv().unwrap();
    let c = c2.counters();
    assert!(
        c.get_children >= 2,
        "listed again after the reconnect: {c:?}"
    );
    waiter.start_cmd(false).recv().unwrap();
}

#[test]
fn uncontended_semaphore_mutex_cycle_is_three_round_trips_on_a_pipelining_backend() {
    use zk_locks::client::CountingClient;
    use zk_locks::locks::InterProcessSemaphoreMutex;
    let e = MemoryEnsemble::new();
    let counting = Arc::new(CountingClient::new(e.connect()));
    let s = InterProcessSemaphoreMutex::new(counting.clone(), "/sem").unwrap();
    s.acquire().unwrap(); // creates the parents
    s.release().unwrap();
    counting.reset_counters();
    for _ in 0..10 {
        let g = s.lock().unwrap();
        g.fencing_token().unwrap();
        drop(g);
    }
    let c = counting.counters();
    // Admission create + listing, lease create + listing, lease delete; the admission delete
    // is sent without waiting for its reply.
    assert_eq!(c.round_trips, 3 * 10, "{c:?}");
    assert_eq!(c.requests(), 6 * 10, "{c:?}");
}
