//! What the engine costs and in which order it serves: requests and round trips per
//! acquisition, one listing per waiter, one wake-up per release (no herd), FIFO order, and
//! a restored watch that hands over without a second listing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use zk_locks::client::memory::{MemoryClient, MemoryEnsemble};
use zk_locks::client::{Counters, CountingClient};
use zk_locks::locks::{
    InterProcessLock, InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreMutex,
    LockState,
};
use zk_locks::testing::harness::eventually;

use super::{mutex, PATIENCE};

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
    let n = third_in_queue_costs(&e, "/l", &cs, &[&ms[0], &ms[1], &ms[2]]);
    // create, list (2 ahead), watch #1, list again after #1's deletion (then 0 ahead).
    assert_eq!((n.create, n.get_children, n.get_data), (1, 2, 1), "{n:?}");
}

/// The contended write lock's cost per acquisition is the mutex's: a writer queued behind
/// two writers lists, watches the one just ahead, and lists once more when it goes.
#[test]
fn deep_queue_writer_costs_what_a_mutex_waiter_costs() {
    let e = MemoryEnsemble::new();
    let cs: Vec<_> = (0..3).map(|_| e.connect()).collect();
    let rws: Vec<_> = cs
        .iter()
        .map(|c| InterProcessReadWriteLock::new(c.clone(), "/rw").unwrap())
        .collect();
    let writers = [
        rws[0].write_lock(),
        rws[1].write_lock(),
        rws[2].write_lock(),
    ];
    let n = third_in_queue_costs(&e, "/rw", &cs, &writers);
    // As `deep_queue_waiter_relists_once`: create, list, watch #1, list again.
    assert_eq!(
        (n.create, n.get_children, n.get_data, n.requests()),
        (1, 2, 1, 4),
        "{n:?}"
    );
}

/// Three locks on `path` (on `clients`, one each) queue in order; when the first lets go and
/// the second has come and gone, what the third's client sent from the moment it queued
/// until it held the lock.
fn third_in_queue_costs<L: InterProcessLock + Sync>(
    e: &MemoryEnsemble,
    path: &str,
    clients: &[Arc<MemoryClient>],
    locks: &[&L; 3],
) -> Counters {
    let g0 = locks[0].lock().unwrap();
    thread::scope(|s| {
        let w1 = s.spawn(|| locks[1].lock().map(|g| g.unlock()).unwrap());
        eventually(PATIENCE, "1 queued", || {
            e.children(path).unwrap().len() == 2
        });
        clients[2].reset_counters();
        let w2 = s.spawn(|| {
            let g = locks[2].lock().unwrap();
            let n = clients[2].counters();
            drop(g);
            n
        });
        eventually(PATIENCE, "2 queued", || {
            e.children(path).unwrap().len() == 3
        });
        drop(g0);
        w1.join().unwrap().unwrap();
        w2.join().unwrap()
    })
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
fn uncontended_cycle_is_two_round_trips_on_a_pipelining_backend() {
    let e = MemoryEnsemble::new();
    let counting = Arc::new(CountingClient::new(e.connect()));
    let m = InterProcessMutex::new(counting.clone(), "/locks/rt").unwrap();
    let c = ten_uncontended_cycles(&m, &counting);
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
    let c = hand_over_across_a_reconnect(&e, true);
    assert_eq!(
        (c.create, c.get_children, c.get_data),
        (1, 1, 1),
        "queued once, listed once, watched once: {c:?}"
    );
    assert_eq!(e.children("/l").unwrap(), Vec::<String>::new());
}

/// Without restored watches the waiter lists again after the reconnect (and still gets the
/// lock): its watch may be gone.
#[test]
fn without_restored_watches_a_reconnect_lists_again() {
    let e = MemoryEnsemble::new();
    let c = hand_over_across_a_reconnect(&e, false);
    assert!(
        c.get_children >= 2,
        "listed again after the reconnect: {c:?}"
    );
}

/// A waiter (watches restored across a reconnect or not, as `restore_watches` says) queues
/// behind a holder on `/l`; its link is down while the holder releases, and it takes the lock
/// once the link is back, then releases it. What its client sent from before it queued until
/// it held the lock.
fn hand_over_across_a_reconnect(e: &MemoryEnsemble, restore_watches: bool) -> Counters {
    let (c1, c2) = (e.connect(), e.connect());
    c2.set_watches_survive_reconnect(restore_watches);
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
    waiter.start_cmd(false).recv().unwrap();
    c
}

#[test]
fn uncontended_semaphore_mutex_cycle_is_three_round_trips_on_a_pipelining_backend() {
    let e = MemoryEnsemble::new();
    let counting = Arc::new(CountingClient::new(e.connect()));
    let s = InterProcessSemaphoreMutex::new(counting.clone(), "/sem").unwrap();
    let c = ten_uncontended_cycles(&s, &counting);
    // Admission create + listing, lease create + listing, lease delete; the admission delete
    // is sent without waiting for its reply.
    assert_eq!(c.round_trips, 3 * 10, "{c:?}");
    assert_eq!(c.requests(), 6 * 10, "{c:?}");
}

/// What ten cycles of `lock`, fencing token and drop send through `counting` (the client
/// `lock` was made on), once a first cycle has created the parents.
fn ten_uncontended_cycles(
    lock: &impl InterProcessLock,
    counting: &CountingClient<Arc<MemoryClient>>,
) -> Counters {
    lock.acquire().unwrap();
    lock.release().unwrap();
    counting.reset_counters();
    for _ in 0..10 {
        let g = lock.lock().unwrap();
        g.fencing_token().unwrap();
        drop(g);
    }
    counting.counters()
}

/// A holder nobody waits on sends nothing for its state (the uncontended cycle stays three
/// requests); a waited-on guard arms one watch on its own node, once for all its waits, and
/// its release fires it (no watch left behind).
#[test]
fn only_a_waited_guard_watches_its_node() {
    let e = MemoryEnsemble::new();
    let counting = Arc::new(CountingClient::new(e.connect()));
    let m = InterProcessMutex::new(counting.clone(), "/locks/w").unwrap();
    m.acquire().unwrap();
    m.release().unwrap();
    counting.reset_counters();
    for _ in 0..10 {
        let g = m.lock().unwrap();
        assert_eq!(g.state(), LockState::Held);
        assert!(g.is_valid() && g.node_path().is_some());
        drop(g);
    }
    let c = counting.counters();
    assert_eq!((c.get_data, c.exists, c.requests()), (0, 0, 30), "{c:?}");
    assert_eq!(e.watch_count(), 0);

    let g = m.lock().unwrap();
    counting.reset_counters();
    for _ in 0..3 {
        assert_eq!(
            g.wait_while_held(Some(Duration::from_millis(20))),
            LockState::Held
        );
    }
    let c = counting.counters();
    assert_eq!(
        (c.get_data, c.requests()),
        (1, 1),
        "one watch for all waits: {c:?}"
    );
    assert_eq!(e.watch_count(), 1);
    drop(g);
    assert_eq!(e.watch_count(), 0, "the release fired the holder's watch");
}
