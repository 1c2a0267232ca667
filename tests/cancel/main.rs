//! Cancellable waits (`CancelToken`, `Acquire`): a waiter cancelled mid-queue returns
//! `Error::Cancelled`, leaves no node of its session, lets the waiter behind it in, and leaves
//! its session and its client's other locks alone — for every recipe (mutex, both sides of the
//! read/write lock, the semaphore and the semaphore mutex, the multi-lock), on the in-memory
//! ensemble and on a real server. On the in-memory ensemble also: a token cancelled before the
//! call makes no request, and a cancel while the link is down returns before the link is back.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;
mod awaited;
mod memory_faults;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use common::{children, eventually, owned_nodes, Backend, TestClient};
use zk_locks::locks::{
    Acquire, CancelToken, HeldNode, InterProcessLock, InterProcessMultiLock, InterProcessMutex,
    InterProcessReadWriteLock, InterProcessSemaphoreMutex, InterProcessSemaphoreV2, LockState,
};
use zk_locks::retry::RetryNTimes;
use zk_locks::{ConnectionState, Error, Result, SharedClient};

/// One side of a read/write lock as a lock of its own (a test owns it on a thread).
struct Side {
    rw: InterProcessReadWriteLock,
    write: bool,
}

impl Side {
    fn lock(&self) -> &dyn InterProcessLock {
        match self.write {
            true => self.rw.write_lock(),
            false => self.rw.read_lock(),
        }
    }
}

impl InterProcessLock for Side {
    fn acquire(&self) -> Result<()> {
        self.lock().acquire()
    }
    fn acquire_timeout(&self, timeout: Duration) -> Result<bool> {
        self.lock().acquire_timeout(timeout)
    }
    fn try_acquire_with(&self, how: &Acquire) -> Result<bool> {
        self.lock().try_acquire_with(how)
    }
    fn release(&self) -> Result<()> {
        self.lock().release()
    }
    fn is_acquired_in_this_process(&self) -> bool {
        self.lock().is_acquired_in_this_process()
    }
    fn held_nodes(&self) -> Vec<std::sync::Arc<HeldNode>> {
        self.lock().held_nodes()
    }
    fn lock_paths(&self) -> Vec<String> {
        self.lock().lock_paths()
    }
}

type Make = fn(&SharedClient, &str) -> Box<dyn InterProcessLock>;

/// A recipe under test: the holder's lock, the cancelled waiter's, the next waiter's, and
/// the directories their nodes live in.
struct Recipe {
    name: &'static str,
    holder: Make,
    waiter: Make,
    next: Make,
    dirs: fn(&str) -> Vec<String>,
}

fn mutex(c: &SharedClient, root: &str) -> Box<dyn InterProcessLock> {
    Box::new(InterProcessMutex::new(c.clone(), root).unwrap())
}
fn read(c: &SharedClient, root: &str) -> Box<dyn InterProcessLock> {
    let rw = InterProcessReadWriteLock::new(c.clone(), root).unwrap();
    Box::new(Side { rw, write: false })
}
fn write(c: &SharedClient, root: &str) -> Box<dyn InterProcessLock> {
    let rw = InterProcessReadWriteLock::new(c.clone(), root).unwrap();
    Box::new(Side { rw, write: true })
}
fn semaphore_mutex(c: &SharedClient, root: &str) -> Box<dyn InterProcessLock> {
    Box::new(InterProcessSemaphoreMutex::new(c.clone(), root).unwrap())
}
/// The semaphore V2 as a lock: one lease of one, held in the object.
struct OneLease {
    semaphore: InterProcessSemaphoreV2,
    lease: parking_lot::Mutex<Option<zk_locks::locks::Lease>>,
}
impl InterProcessLock for OneLease {
    fn acquire(&self) -> Result<()> {
        *self.lease.lock() = Some(self.semaphore.acquire()?);
        Ok(())
    }
    fn acquire_timeout(&self, timeout: Duration) -> Result<bool> {
        self.try_acquire_with(&Acquire::new().timeout(timeout))
    }
    fn try_acquire_with(&self, how: &Acquire) -> Result<bool> {
        let lease = self.semaphore.acquire_with(how)?;
        let got = lease.is_some();
        *self.lease.lock() = lease;
        Ok(got)
    }
    fn release(&self) -> Result<()> {
        match self.lease.lock().take() {
            Some(l) => l.close(),
            None => Ok(()),
        }
    }
    fn is_acquired_in_this_process(&self) -> bool {
        self.lease.lock().is_some()
    }
    fn held_nodes(&self) -> Vec<std::sync::Arc<HeldNode>> {
        let lease = self.lease.lock();
        lease.iter().map(|l| l.held_node().clone()).collect()
    }
}
fn semaphore(c: &SharedClient, root: &str) -> Box<dyn InterProcessLock> {
    Box::new(OneLease {
        semaphore: InterProcessSemaphoreV2::new(c.clone(), root, 1).unwrap(),
        lease: parking_lot::Mutex::new(None),
    })
}
/// The multi-lock's holder takes `b` only; the waiter takes `a` then waits for `b`; the next
/// waiter wants `a`, which the cancelled waiter gives back.
fn multi_holder(c: &SharedClient, root: &str) -> Box<dyn InterProcessLock> {
    mutex(c, &format!("{root}/b"))
}
fn multi(c: &SharedClient, root: &str) -> Box<dyn InterProcessLock> {
    let paths = [format!("{root}/a"), format!("{root}/b")];
    let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
    Box::new(InterProcessMultiLock::from_paths(c.clone(), &paths).unwrap())
}
fn multi_next(c: &SharedClient, root: &str) -> Box<dyn InterProcessLock> {
    mutex(c, &format!("{root}/a"))
}

fn one_dir(root: &str) -> Vec<String> {
    vec![root.to_string()]
}
fn semaphore_dirs(root: &str) -> Vec<String> {
    vec![format!("{root}/locks"), format!("{root}/leases")]
}
fn multi_dirs(root: &str) -> Vec<String> {
    vec![format!("{root}/a"), format!("{root}/b")]
}

fn recipes() -> Vec<Recipe> {
    vec![
        Recipe {
            name: "mutex",
            holder: mutex,
            waiter: mutex,
            next: mutex,
            dirs: one_dir,
        },
        Recipe {
            name: "read side",
            holder: write,
            waiter: read,
            next: write,
            dirs: one_dir,
        },
        Recipe {
            name: "write side",
            holder: read,
            waiter: write,
            next: read,
            dirs: one_dir,
        },
        Recipe {
            name: "semaphore",
            holder: semaphore,
            waiter: semaphore,
            next: semaphore,
            dirs: semaphore_dirs,
        },
        Recipe {
            name: "semaphore mutex",
            holder: semaphore_mutex,
            waiter: semaphore_mutex,
            next: semaphore_mutex,
            dirs: semaphore_dirs,
        },
        Recipe {
            name: "multi-lock",
            holder: multi_holder,
            waiter: multi,
            next: multi_next,
            dirs: multi_dirs,
        },
    ]
}

/// A lock owned by a thread: it acquires as told, reports, and releases (on its own thread,
/// as a reentrant mutex requires) when the handle says so or drops.
struct Contender {
    outcome: mpsc::Receiver<Result<bool>>,
    release: mpsc::Sender<()>,
    done: Option<thread::JoinHandle<()>>,
}

impl Contender {
    fn start(lock: Box<dyn InterProcessLock>, how: Acquire) -> Contender {
        let (outcome_tx, outcome) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let done = thread::spawn(move || {
            let r = lock.try_acquire_with(&how);
            let held = matches!(r, Ok(true));
            let _ = outcome_tx.send(r);
            if held {
                let _ = release_rx.recv();
                lock.release().unwrap();
            }
        });
        Contender {
            outcome,
            release,
            done: Some(done),
        }
    }

    fn outcome(&self, patience: Duration, what: &str) -> Result<bool> {
        self.outcome
            .recv_timeout(patience)
            .unwrap_or_else(|_| panic!("{what}: no outcome within {patience:?}"))
    }
}

impl Drop for Contender {
    fn drop(&mut self) {
        let _ = self.release.send(());
        // A failed test does not wait for a thread that may never end (a wait not cancelled).
        if let Some(done) = self.done.take().filter(|_| !thread::panicking()) {
            let _ = done.join();
        }
    }
}

/// The waiter of `session` has a node where it waits for the lock: the last of `dirs` (a
/// semaphore's leases: it is admitted, so the holder's admission node is gone; a multi-lock's
/// second lock: it holds the first).
fn waits(c: &TestClient, dirs: &[String], session: i64) -> bool {
    let last = dirs.last().map(std::slice::from_ref).unwrap_or_default();
    owned_nodes(c.client.as_ref(), last)
        .iter()
        .any(|(_, o)| *o == session)
}

/// One recipe's queue: a holder, a waiter with a token behind it, and a next waiter behind
/// that (acquiring as `next` says), each on a client of its own; returned once all queued.
struct Queue {
    // Fields drop in this order: the contenders release before their clients go.
    next: Contender,
    waiter: Contender,
    token: CancelToken,
    holder: Contender,
    waiter_session: i64,
    /// The next waiter's client, kept (with its link) as long as the queue.
    _cn: TestClient,
    cw: TestClient,
    ch: TestClient,
    dirs: Vec<String>,
}

impl Queue {
    fn start(b: &dyn Backend, r: &Recipe, next: Acquire) -> Queue {
        let patience = b.patience();
        let root = format!("{}/{}", b.root(), r.name.replace(' ', "-"));
        let dirs = (r.dirs)(&root);
        let (ch, cw, cn) = (b.connect(), b.connect(), b.connect());
        let waiter_session = cw.session_id();
        let holder = Contender::start((r.holder)(&ch.client, &root), Acquire::new());
        assert!(holder.outcome(patience, r.name).unwrap(), "{}", r.name);
        let token = CancelToken::new();
        let waiter = Contender::start((r.waiter)(&cw.client, &root), Acquire::new().cancel(&token));
        eventually(patience, "the waiter queues", || {
            waits(&ch, &dirs, waiter_session)
        });
        let count = owned_nodes(ch.client.as_ref(), &dirs).len();
        let next = Contender::start((r.next)(&cn.client, &root), next);
        eventually(patience, "the next waiter queues", || {
            owned_nodes(ch.client.as_ref(), &dirs).len() > count
        });
        Queue {
            dirs,
            ch,
            cw,
            _cn: cn,
            waiter_session,
            token,
            holder,
            waiter,
            next,
        }
    }
}

/// The scenario of the issue, for one recipe: holder, a waiter with a token, a waiter behind
/// it; the cancel ends the first waiter with `Cancelled`, leaves no node of its session, and
/// the one behind gets the lock once the holder lets go. The cancelled waiter's client keeps
/// its session and its other lock.
fn cancelled_mid_queue(b: &dyn Backend, r: &Recipe) {
    let patience = b.patience();
    let q = Queue::start(b, r, Acquire::new().timeout(patience));
    // Another lock of the waiter's client, held through the cancel.
    let other =
        InterProcessMutex::new(q.cw.client.clone(), &format!("{}-other", b.root())).unwrap();
    let other_guard = other.lock().unwrap();
    let before = q.cw.client.session().snapshot();

    q.token.cancel();
    let outcome = q.waiter.outcome(patience, "the cancelled waiter");
    assert!(
        matches!(outcome, Err(Error::Cancelled { .. })),
        "{}: {outcome:?}",
        r.name
    );
    eventually(patience, "no node of the cancelled waiter is left", || {
        owned_nodes(q.ch.client.as_ref(), &q.dirs)
            .iter()
            .all(|(_, o)| *o != q.waiter_session)
    });
    drop(q.holder);
    assert!(
        q.next.outcome(patience, "the next waiter").unwrap(),
        "{}: the waiter behind the cancelled one gets the lock",
        r.name
    );
    // The cancelled waiter's session and its other lock are untouched.
    let after = q.cw.client.session().snapshot();
    assert_eq!(after.losses, before.losses, "{}", r.name);
    assert!(after.state.is_connected(), "{}: {after:?}", r.name);
    assert_eq!(other_guard.state(), LockState::Held, "{}", r.name);
    drop(q.next);
    drop(other_guard);
    eventually(patience, "every node is deleted", || {
        owned_nodes(q.ch.client.as_ref(), &q.dirs).is_empty()
    });
}

fn every_recipe_cancelled_mid_queue(b: &dyn Backend) {
    for r in recipes() {
        cancelled_mid_queue(b, &r);
    }
}

suite!([every_recipe_cancelled_mid_queue]);
