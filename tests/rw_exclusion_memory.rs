//! Every way a shared and an exclusive holder of one read/write lock could both believe they
//! hold, forced on the in-memory ensemble at the exact point. Each test names the hypothesis
//! it rules in or out; the torture's checker relies on the outcome of the first.

use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use parking_lot::Mutex;
use zk_locks::client::memory::MemoryEnsemble;
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
