//! No waiter of any recipe depends on its session's event thread: with a user's watch
//! callback blocking that thread (here until the test lets it go), a hand-off still reaches
//! the waiter — a mutex's, a semaphore's, a semaphore mutex's, a multi-lock's over semaphore
//! mutexes, a semaphore whose `SharedCount` maximum grows — and a guard's own
//! `wait_while_held` still sees its node deleted. Each waiter's wake-up runs where its
//! notification is read (our client's reader thread, `watches::wake_only`). Against a real
//! server through our own client: the event thread is the native client's.

use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use zk_locks::client::native::NativeClient;
use zk_locks::locks::Revoker;
use zk_locks::locks::{
    InterProcessMultiLock, InterProcessSemaphoreMutex, InterProcessSemaphoreV2, SharedCount,
};
use zk_locks::testing::harness::{eventually, unique_root};
use zk_locks::testing::shared_server;
use zk_locks::{
    CreateMode, InterProcessLock, InterProcessMutex, LockState, SharedClient, ZkClient,
};

/// Bound of every wait on a condition (a loaded machine).
const PATIENCE: Duration = Duration::from_secs(120);

/// How long a waiter is given to be handed over while its event thread is blocked; a waiter
/// that depends on that thread waits until the test lets it go, after this.
const HAND_OFF: Duration = Duration::from_secs(20);

/// Two sessions on the shared server (the waiter's, whose event thread a user's callback
/// blocks, and the holder's) and a fresh root.
struct Blocked {
    waiter: Arc<NativeClient>,
    holder: Arc<NativeClient>,
    root: String,
    let_go: mpsc::Sender<()>,
}

impl Blocked {
    /// `None` when no real server can run here (a failure under `ZK_LOCKS_REQUIRE_SERVER`).
    fn new(name: &str) -> Option<Blocked> {
        let server = shared_server()?;
        let connect = || NativeClient::connect(&server.connect_string(), PATIENCE).unwrap();
        let (waiter, holder) = (connect(), connect());
        let root = unique_root(name);
        holder.create(&root, b"", CreateMode::Persistent).unwrap();
        let watched = format!("{root}/watched");
        holder
            .create(&watched, b"", CreateMode::Persistent)
            .unwrap();
        // The user's callback: it says it runs, then blocks until the test lets it go.
        let (entered_tx, entered) = mpsc::channel();
        let (let_go, blocked) = mpsc::channel::<()>();
        waiter
            .get_data(
                &watched,
                Some(Box::new(move |_| {
                    entered_tx.send(()).unwrap();
                    let _ = blocked.recv_timeout(PATIENCE);
                })),
            )
            .unwrap();
        holder.set_data(&watched, b"x", None).unwrap();
        entered
            .recv_timeout(PATIENCE)
            .expect("the user's callback runs");
        Some(Blocked {
            waiter,
            holder,
            root,
            let_go,
        })
    }

    fn path(&self, name: &str) -> String {
        format!("{}/{name}", self.root)
    }

    /// Runs `wait` on a thread of its own; once the waiter's session holds `watches` watches
    /// (the waiter is queued and watching), runs `release`; then the wait must end within
    /// [`HAND_OFF`] while the event thread is still blocked.
    fn assert_woken(
        self,
        watches: usize,
        wait: impl FnOnce() + Send + 'static,
        release: impl FnOnce(),
    ) {
        let (done_tx, done) = mpsc::channel();
        let thread = thread::spawn(move || {
            wait();
            done_tx.send(()).unwrap();
        });
        eventually(PATIENCE, "the waiter is queued and watching", || {
            self.waiter.watch_count() == watches
        });
        release();
        let woken = done.recv_timeout(HAND_OFF);
        self.let_go.send(()).unwrap();
        woken.expect("the waiter was woken while its session's event thread was blocked");
        thread.join().unwrap();
        self.waiter.close();
        self.holder.close();
    }
}

#[test]
fn a_mutex_waiter_is_handed_the_lock() {
    let Some(b) = Blocked::new("blocked-mutex") else {
        return;
    };
    let holder = InterProcessMutex::new(b.holder.clone(), &b.path("lock")).unwrap();
    holder.acquire().unwrap();
    let waiter = InterProcessMutex::new(b.waiter.clone(), &b.path("lock")).unwrap();
    b.assert_woken(
        1,
        move || {
            waiter.acquire().unwrap();
            waiter.release().unwrap();
        },
        || holder.release().unwrap(),
    );
}

#[test]
fn a_semaphore_waiter_is_handed_the_lease() {
    let Some(b) = Blocked::new("blocked-semaphore") else {
        return;
    };
    let holder = InterProcessSemaphoreV2::new(b.holder.clone(), &b.path("sem"), 1).unwrap();
    let lease = holder.acquire().unwrap();
    let waiter = InterProcessSemaphoreV2::new(b.waiter.clone(), &b.path("sem"), 1).unwrap();
    b.assert_woken(1, move || drop(waiter.acquire().unwrap()), || drop(lease));
}

#[test]
fn a_semaphore_mutex_waiter_is_handed_the_lock() {
    let Some(b) = Blocked::new("blocked-semaphore-mutex") else {
        return;
    };
    let holder = InterProcessSemaphoreMutex::new(b.holder.clone(), &b.path("sm")).unwrap();
    holder.acquire().unwrap();
    let waiter = InterProcessSemaphoreMutex::new(b.waiter.clone(), &b.path("sm")).unwrap();
    b.assert_woken(
        1,
        move || {
            waiter.acquire().unwrap();
            waiter.release().unwrap();
        },
        || holder.release().unwrap(),
    );
}

/// The multi-lock takes its first semaphore mutex at once and waits for the second.
#[test]
fn a_multi_lock_waiter_over_semaphore_mutexes_is_handed_the_lock() {
    let Some(b) = Blocked::new("blocked-multi") else {
        return;
    };
    let holder = InterProcessSemaphoreMutex::new(b.holder.clone(), &b.path("second")).unwrap();
    holder.acquire().unwrap();
    let locks: Vec<Box<dyn InterProcessLock>> = ["first", "second"]
        .iter()
        .map(|name| {
            Box::new(InterProcessSemaphoreMutex::new(b.waiter.clone(), &b.path(name)).unwrap())
                as Box<dyn InterProcessLock>
        })
        .collect();
    let waiter = InterProcessMultiLock::new(locks).unwrap();
    b.assert_woken(
        1,
        move || {
            waiter.acquire().unwrap();
            waiter.release().unwrap();
        },
        || holder.release().unwrap(),
    );
}

/// Nobody releases: the shared maximum grows from 1 to 2, which the waiter's count hears
/// through its own data watch.
#[test]
fn a_semaphore_waiter_is_admitted_when_its_shared_maximum_grows() {
    let Some(b) = Blocked::new("blocked-shared-count") else {
        return;
    };
    let (sem, max) = (b.path("sem"), b.path("max"));
    let holder_count = SharedCount::new(b.holder.clone(), &max, 1).unwrap();
    let holder =
        InterProcessSemaphoreV2::with_shared_count(b.holder.clone(), &sem, holder_count.clone())
            .unwrap();
    let lease = holder.acquire().unwrap();
    let waiter_count = SharedCount::new(b.waiter.clone(), &max, 1).unwrap();
    let waiter =
        InterProcessSemaphoreV2::with_shared_count(b.waiter.clone(), &sem, waiter_count).unwrap();
    // The count's data watch and the leases' child watch.
    b.assert_woken(
        2,
        move || drop(waiter.acquire().unwrap()),
        || holder_count.set_count(2).unwrap(),
    );
    drop(lease);
}

/// A holder waiting on its own node hears it deleted by someone else.
#[test]
fn a_guard_waiting_while_held_sees_its_node_deleted() {
    let Some(b) = Blocked::new("blocked-guard") else {
        return;
    };
    let lock = Arc::new(InterProcessMutex::new(b.waiter.clone(), &b.path("lock")).unwrap());
    let guard = lock.lock_owned().unwrap();
    let node = guard.node_path().unwrap().to_string();
    let deleter = b.holder.clone();
    b.assert_woken(
        1,
        move || assert_eq!(guard.wait_while_held(None), LockState::Lost),
        || deleter.delete(&node, None).unwrap(),
    );
}

/// A revocable holder hears a revocation request (and so can let its waiters in) although its
/// session's event thread is blocked.
#[test]
fn a_revocable_holder_hears_a_revocation_request() {
    let Some(b) = Blocked::new("blocked-revocation") else {
        return;
    };
    let lock = InterProcessMutex::new(b.waiter.clone(), &b.path("lock")).unwrap();
    let (asked_tx, asked) = mpsc::channel();
    let asked_tx = std::sync::Mutex::new(asked_tx);
    lock.make_revocable(move || {
        let _ = asked_tx.lock().unwrap().send(());
    });
    let guard = lock.lock().unwrap();
    let node = guard.node_path().unwrap().to_string();
    let revoker: SharedClient = b.holder.clone();
    b.assert_woken(
        1,
        move || asked.recv_timeout(PATIENCE).unwrap(),
        || Revoker::attempt_revoke(&revoker, &node).unwrap(),
    );
    drop(guard);
}
