//! Every way a shared and an exclusive holder of one read/write lock could both believe they
//! hold, forced on the in-memory ensemble at the exact point. Each test names the hypothesis
//! it rules in or out; the torture's checker relies on the outcome of the first.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use parking_lot::Mutex;
use zk_locks::client::memory::{Fault, MemoryClient, MemoryEnsemble};
use zk_locks::client::Op;
use zk_locks::locks::{InterProcessLock, InterProcessReadWriteLock, LockState};
use zk_locks::ZkClient;

const PATIENCE: Duration = Duration::from_secs(10);

/// Runs a closure when dropped: a watcher owning one runs it when the server discards the watch.
struct OnDrop<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

/// Waits (bounded) until `f` is true, re-checking as the ensemble changes.
fn until(mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + PATIENCE;
    while !f() {
        assert!(std::time::Instant::now() < deadline, "condition never met");
        thread::yield_now();
    }
}

/// A forced expiry (the server ends a session that was not silent: `closeSession` from another
/// connection, the memory backend's `expire`) deletes the holder's nodes and fires the other
/// clients' watches *before* the holder's client hears that its session is over: between the
/// two, another client takes the lock while the holder's guard still says `Held`. No lock can
/// prevent it (fencing does), so the torture's checker must not count such a holder's section.
#[test]
fn a_forced_expiry_reaches_other_clients_before_its_holder() {
    let e = MemoryEnsemble::new();
    let (a, b) = (e.connect(), e.connect());
    let rw_a = InterProcessReadWriteLock::new(a.clone(), "/rw").unwrap();
    let write = rw_a.write_lock().lock().unwrap();
    let held = write.nodes()[0].clone();

    // B's reader queues behind A's write node and watches it.
    let (acquired_tx, acquired) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let reader = {
        let b = b.clone();
        thread::spawn(move || {
            let rw_b = InterProcessReadWriteLock::new(b, "/rw").unwrap();
            let read = rw_b.read_lock().lock().unwrap();
            acquired_tx.send(read.state()).unwrap();
            let _ = release_rx.recv_timeout(PATIENCE);
            drop(read);
        })
    };
    until(|| e.watch_count() == 1);

    // A watch of A's session is discarded by the expiry and dropped after the server's state
    // changed, before A's client reports the loss: look at both holders right there.
    let seen = Arc::new(Mutex::new(None));
    let probe = {
        let (seen, held) = (seen.clone(), held.clone());
        OnDrop(Some(move || {
            let reader = acquired.recv_timeout(PATIENCE).ok();
            *seen.lock() = Some((reader, held.state()));
        }))
    };
    a.get_data(
        "/",
        Some(Box::new(move |_| {
            let _keep = &probe;
        })),
    )
    .unwrap();
    a.expire();

    let seen = seen.lock().take().expect("the probe ran during the expiry");
    assert_eq!(
        seen,
        (Some(LockState::Held), LockState::Held),
        "(B's read guard, A's write guard) while the server had ended A's session"
    );
    assert_eq!(
        write.state(),
        LockState::Lost,
        "A's guard knows once reported"
    );
    release.send(()).unwrap();
    reader.join().unwrap();
    drop(write);
}

/// A writer on its own thread: takes the write lock on `client` at `path`, reports its guard's
/// state, and holds until told (or the patience runs out).
struct Writer {
    acquired: mpsc::Receiver<LockState>,
    release: mpsc::Sender<()>,
    thread: thread::JoinHandle<()>,
    got: Arc<AtomicBool>,
}

impl Writer {
    fn start(client: Arc<MemoryClient>, path: &'static str) -> Writer {
        let (acquired_tx, acquired) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let got = Arc::new(AtomicBool::new(false));
        let got2 = got.clone();
        let thread = thread::spawn(move || {
            let rw = InterProcessReadWriteLock::new(client, path).unwrap();
            let write = rw.write_lock().lock().unwrap();
            got2.store(true, Ordering::SeqCst);
            acquired_tx.send(write.state()).unwrap();
            let _ = release_rx.recv_timeout(PATIENCE);
            drop(write);
        });
        Writer {
            acquired,
            release,
            thread,
            got,
        }
    }

    /// Whether it holds the write lock already.
    fn holds(&self) -> bool {
        self.got.load(Ordering::SeqCst)
    }

    /// Its guard's state once it holds (waits up to the patience).
    fn acquired(&self) -> Result<LockState, mpsc::RecvTimeoutError> {
        self.acquired.recv_timeout(PATIENCE)
    }

    /// Lets it release, and waits for its thread.
    fn finish(self) {
        self.release.send(()).unwrap();
        self.thread.join().unwrap();
    }

    /// After the node it watched went away: waits until it watches a node again (the only
    /// watch on `e`) or holds, and asserts that it does not hold (A reads).
    fn assert_waits_for_the_reader(&self, e: &MemoryEnsemble) {
        until(|| e.watch_count() == 1 || self.holds());
        assert!(!self.holds(), "B took the write lock while A read");
    }
}

/// Whether A's read attempt on `rw` (`acquired`: its answer) holds the read lock as `Held`
/// now; releases it when taken.
fn read_held_then_release(rw: &InterProcessReadWriteLock, acquired: bool) -> bool {
    if !acquired {
        return false;
    }
    let held = rw.read_lock().held_nodes()[0].state() == LockState::Held;
    rw.read_lock().release().unwrap();
    held
}

/// Hypothesis: a downgrade is granted on the holder's *belief* that it holds the write lock.
/// The client moves to a new session without reporting it (the `zookeeper` crate can open one
/// by itself and run queued calls in it): the write node dies with the old session, another
/// writer takes the lock, and then the holder downgrades. Its read node takes the dead write
/// node's sequence, so it sorts ahead of the new writer and is granted beside it.
#[test]
fn a_downgrade_after_a_silent_session_change_does_not_join_the_new_writer() {
    let e = MemoryEnsemble::new();
    let (a, b) = (e.connect(), e.connect());
    let rw_a = InterProcessReadWriteLock::new(a.clone(), "/rw-silent").unwrap();
    let write = rw_a.write_lock().lock().unwrap();
    let writer = Writer::start(b.clone(), "/rw-silent");
    until(|| e.children("/rw-silent").unwrap_or_default().len() == 2);

    // Another request of A's client runs in a new session it does not report: A's write node
    // goes with the old one, and B's writer takes the lock.
    a.inject(Fault::in_new_session(Op::Exists));
    let _ = a.exists("/rw-silent");
    assert_eq!(writer.acquired(), Ok(LockState::Held));

    let read = rw_a
        .read_lock()
        .acquire_timeout(Duration::from_millis(200))
        .unwrap();
    let read_held = read_held_then_release(&rw_a, read);
    writer.finish();
    assert!(
        !read_held,
        "A's read lock was granted while B held the write lock"
    );
    drop(write);
}

/// Hypothesis: a writer queued behind a downgrading writer takes the lock when the write node
/// goes, although the read node that replaced it sorts ahead (a hand-off without a re-list).
#[test]
fn a_writer_queued_behind_a_downgrade_waits_for_its_read_node() {
    let e = MemoryEnsemble::new();
    let (a, b) = (e.connect(), e.connect());
    let rw_a = InterProcessReadWriteLock::new(a.clone(), "/rw-down").unwrap();
    let write = rw_a.write_lock().lock().unwrap();
    let writer = Writer::start(b.clone(), "/rw-down");
    until(|| e.watch_count() == 1); // B watches A's write node

    let read = rw_a.read_lock().lock().unwrap();
    drop(write);
    // B's watch fired with the write node's deletion; it must now watch the read node.
    writer.assert_waits_for_the_reader(&e);
    assert_eq!(read.state(), LockState::Held);
    drop(read);
    assert_eq!(writer.acquired(), Ok(LockState::Held));
    writer.finish();
}

/// Hypothesis: a downgrade asked for while the server has ended the holder's session but the
/// client has not reported it yet (an unannounced expiry) is granted from the lost write lock.
/// Here B's writer takes the lock in that gap; A's read attempt starts in it too.
#[test]
fn a_downgrade_during_an_unannounced_expiry_waits_behind_the_new_writer() {
    let e = MemoryEnsemble::new();
    let (a, b) = (e.connect(), e.connect());
    let rw_a = InterProcessReadWriteLock::new(a.clone(), "/rw-late").unwrap();
    let write = rw_a.write_lock().lock().unwrap();
    let writer = Writer::start(b.clone(), "/rw-late");
    until(|| e.watch_count() == 1);

    // A's first create after the expiry marks the moment its downgrade runs inside the gap.
    let (created_tx, created) = mpsc::channel();
    let created_tx = Mutex::new(Some(created_tx));
    a.on_request(Some(Box::new(move |op, _| {
        if op == Op::Create {
            if let Some(tx) = created_tx.lock().take() {
                let _ = tx.send(());
            }
        }
    })));
    // The expiry runs on its own thread; it holds the report back until B holds the write
    // lock and A's downgrade has sent its create.
    let (window_tx, window) = mpsc::channel();
    let probe = OnDrop(Some(move || {
        let _ = window_tx.send(());
        let _ = created.recv_timeout(PATIENCE);
    }));
    a.get_data(
        "/",
        Some(Box::new(move |_| {
            let _keep = &probe;
        })),
    )
    .unwrap();
    let expirer = {
        let a = a.clone();
        thread::spawn(move || a.expire())
    };
    window.recv_timeout(PATIENCE).unwrap();
    assert_eq!(writer.acquired(), Ok(LockState::Held));
    let read = rw_a
        .read_lock()
        .acquire_timeout(Duration::from_millis(300))
        .unwrap();
    expirer.join().unwrap();
    a.on_request(None);
    let read_held = read_held_then_release(&rw_a, read);
    writer.finish();
    assert!(!read_held, "A read beside B's write lock");
    assert_eq!(write.state(), LockState::Lost);
    drop(write);
}

/// Hypothesis: a writer decides in its first round (its create and its listing sent together)
/// from a listing that misses a read node sorting ahead of it: a downgrade's read node takes a
/// lower sequence than the writer's, after the writer's create.
#[test]
fn a_writer_whose_first_listing_follows_a_downgrade_waits_for_the_read_node() {
    let e = MemoryEnsemble::new();
    let (a, b) = (e.connect(), e.connect());
    let rw_a = InterProcessReadWriteLock::new(a.clone(), "/rw-first").unwrap();
    let write = rw_a.write_lock().lock().unwrap();

    // Between B's create and its listing, A downgrades and lets the write lock go.
    let (between_tx, between) = mpsc::channel();
    let (downgraded, downgraded_rx) = mpsc::channel::<()>();
    let hook = Mutex::new(Some((between_tx, downgraded_rx)));
    b.on_request(Some(Box::new(move |op, path| {
        if op == Op::GetChildren && path == "/rw-first" {
            if let Some((between, downgraded)) = hook.lock().take() {
                between.send(()).unwrap();
                let _ = downgraded.recv_timeout(PATIENCE);
            }
        }
    })));
    let writer = Writer::start(b.clone(), "/rw-first");
    between.recv_timeout(PATIENCE).unwrap();
    let read = rw_a.read_lock().lock().unwrap();
    drop(write);
    downgraded.send(()).unwrap();

    writer.assert_waits_for_the_reader(&e);
    drop(read);
    assert_eq!(writer.acquired(), Ok(LockState::Held));
    b.on_request(None);
    writer.finish();
}

/// The downgrade's check of its write node (above) can itself fail with an unknown outcome.
/// Giving the borrowed place back then would queue this thread's reader behind a writer that
/// waits for this thread's own write lock; the check is asked again once the link is back.
#[test]
fn a_downgrade_whose_check_meets_a_connection_loss_keeps_its_place() {
    let e = MemoryEnsemble::new();
    let (a, b) = (e.connect(), e.connect());
    let rw_a = InterProcessReadWriteLock::new(a.clone(), "/rw-blip").unwrap();
    let write = rw_a.write_lock().lock().unwrap();
    let writer = Writer::start(b.clone(), "/rw-blip");
    until(|| e.watch_count() == 1); // B waits for A's write node

    a.inject(Fault::before(Op::Exists));
    let read = rw_a.read_lock().acquire_timeout(PATIENCE).unwrap();
    assert!(read, "the downgrade was not granted");
    assert_eq!(rw_a.read_lock().held_nodes()[0].state(), LockState::Held);
    assert!(!writer.holds(), "B holds the write lock");
    drop(write);
    // B now waits for A's read node, which holds the write node's place ahead of it.
    writer.assert_waits_for_the_reader(&e);
    rw_a.read_lock().release().unwrap();
    assert_eq!(writer.acquired(), Ok(LockState::Held));
    writer.finish();
}
