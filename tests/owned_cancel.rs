//! Owned guards taken with a cancellable wait (`try_lock_owned_with(&Acquire)` on an `Arc` of
//! every recipe that has owned guards: mutex, both read/write sides, semaphore mutex,
//! multi-lock): an owned waiter cancelled mid-queue returns `Error::Cancelled`, leaves no node
//! of its session and no owned hold in its object, lets the waiter behind it in, and leaves
//! its session and its client's other locks alone. On the in-memory ensemble for every recipe
//! (also with the link down, after a lost session, a token cancelled before the call, a
//! timeout told apart from the token); on a real server through our own client for every
//! recipe, and for a waiter that went through a blip and a lost session before the cancel.

mod common;

use std::any::Any;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use common::{children, eventually, owned_nodes, Backend, Memory, Real, TestClient};
use zk_locks::locks::{
    Acquire, CancelToken, InterProcessLock, InterProcessMultiLock, InterProcessMutex,
    InterProcessReadWriteLock, InterProcessSemaphoreMutex, LockState,
};
use zk_locks::{ConnectionState, Error, Result, SharedClient};

/// An owned guard of any recipe, held for as long as the box lives (dropped on any thread).
type Guard = Box<dyn Any + Send>;

/// An owned acquire as `Acquire` says: the guard, `None` (timed out), or the error.
type Take = Box<dyn Fn(&Acquire) -> Result<Option<Guard>> + Send + Sync>;

/// One recipe's lock object on one client, seen through its owned acquire.
struct Owned {
    take: Take,
    /// `is_acquired_in_this_process` of the object (counts its owned holds).
    in_process: Box<dyn Fn() -> bool + Send + Sync>,
}

fn owned<L: InterProcessLock + 'static>(lock: Arc<L>) -> Owned {
    let probe = lock.clone();
    Owned {
        take: Box::new(move |how| {
            Ok(lock
                .try_lock_owned_with(how)?
                .map(|guard| Box::new(guard) as Guard))
        }),
        in_process: Box::new(move || probe.is_acquired_in_this_process()),
    }
}

type Make = fn(&SharedClient, &str) -> Owned;

fn mutex(c: &SharedClient, root: &str) -> Owned {
    owned(Arc::new(InterProcessMutex::new(c.clone(), root).unwrap()))
}
fn read(c: &SharedClient, root: &str) -> Owned {
    owned(
        InterProcessReadWriteLock::new(c.clone(), root)
            .unwrap()
            .read_lock_arc(),
    )
}
fn write(c: &SharedClient, root: &str) -> Owned {
    owned(
        InterProcessReadWriteLock::new(c.clone(), root)
            .unwrap()
            .write_lock_arc(),
    )
}
fn semaphore_mutex(c: &SharedClient, root: &str) -> Owned {
    owned(Arc::new(
        InterProcessSemaphoreMutex::new(c.clone(), root).unwrap(),
    ))
}
/// The multi-lock's holder takes `b` only; the waiter takes `a` then waits for `b`; the next
/// waiter wants `a`, which the cancelled waiter gives back.
fn multi_holder(c: &SharedClient, root: &str) -> Owned {
    mutex(c, &format!("{root}/b"))
}
fn multi(c: &SharedClient, root: &str) -> Owned {
    let paths = [format!("{root}/a"), format!("{root}/b")];
    let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
    owned(Arc::new(
        InterProcessMultiLock::from_paths(c.clone(), &paths).unwrap(),
    ))
}
fn multi_next(c: &SharedClient, root: &str) -> Owned {
    mutex(c, &format!("{root}/a"))
}

/// A recipe under test: the holder's lock, the cancelled waiter's, the next waiter's, and the
/// directories their nodes live in.
struct Recipe {
    name: &'static str,
    holder: Make,
    waiter: Make,
    next: Make,
    dirs: fn(&str) -> Vec<String>,
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
    let recipe = |name, holder, waiter, next, dirs| Recipe {
        name,
        holder,
        waiter,
        next,
        dirs,
    };
    vec![
        recipe("mutex", mutex, mutex, mutex, one_dir),
        recipe("read side", write, read, write, one_dir),
        recipe("write side", read, write, read, one_dir),
        recipe(
            "semaphore mutex",
            semaphore_mutex,
            semaphore_mutex,
            semaphore_mutex,
            semaphore_dirs,
        ),
        recipe("multi-lock", multi_holder, multi, multi_next, multi_dirs),
    ]
}

/// An owned acquire running on a thread of its own; its outcome (the guard, when it got one)
/// comes back to the test, which holds the guard and drops it where it likes.
struct Contender {
    outcome: mpsc::Receiver<Result<Option<Guard>>>,
    done: Option<thread::JoinHandle<()>>,
}

impl Contender {
    fn start(lock: Arc<Owned>, how: Acquire) -> Contender {
        let (tx, outcome) = mpsc::channel();
        let done = thread::spawn(move || {
            let _ = tx.send((lock.take)(&how));
        });
        Contender {
            outcome,
            done: Some(done),
        }
    }

    fn outcome(&self, patience: Duration, what: &str) -> Result<Option<Guard>> {
        self.outcome
            .recv_timeout(patience)
            .unwrap_or_else(|_| panic!("{what}: no outcome within {patience:?}"))
    }
}

impl Drop for Contender {
    fn drop(&mut self) {
        // A failed test does not wait for a thread that may never end (a wait not cancelled).
        if let Some(done) = self.done.take().filter(|_| !thread::panicking()) {
            let _ = done.join();
        }
    }
}

/// The waiter of `session` has a node where it waits for the lock: the last of `dirs` (a
/// semaphore mutex's leases: it is admitted; a multi-lock's second lock: it holds the first).
fn waits(c: &TestClient, dirs: &[String], session: i64) -> bool {
    let last = dirs.last().map(std::slice::from_ref).unwrap_or_default();
    owned_nodes(c.client.as_ref(), last)
        .iter()
        .any(|(_, o)| *o == session)
}

fn root_of(b: &dyn Backend, r: &Recipe) -> String {
    format!("{}/{}", b.root(), r.name.replace(' ', "-"))
}

fn assert_cancelled(outcome: Result<Option<Guard>>, what: &str) {
    assert!(
        matches!(outcome, Err(Error::Cancelled { .. })),
        "{what}: {:?}",
        outcome.map(|g| g.is_some())
    );
}

/// One recipe's queue: a holder (an owned guard), an owned waiter with a token behind it, and
/// an owned next waiter behind that (acquiring as `next` says), each on a client of its own;
/// returned once all queued.
struct Queue {
    // Fields drop in this order: the contenders and guards go before their clients.
    next: Contender,
    waiter: Contender,
    waiter_lock: Arc<Owned>,
    token: CancelToken,
    holder: Option<Guard>,
    waiter_session: i64,
    _cn: TestClient,
    cw: TestClient,
    ch: TestClient,
    dirs: Vec<String>,
}

impl Queue {
    fn start(b: &dyn Backend, r: &Recipe, next: Acquire) -> Queue {
        let patience = b.patience();
        let root = root_of(b, r);
        let dirs = (r.dirs)(&root);
        let (ch, cw, cn) = (b.connect(), b.connect(), b.connect());
        let waiter_session = cw.session_id();
        let holder = ((r.holder)(&ch.client, &root).take)(&Acquire::new())
            .unwrap()
            .expect("the holder holds");
        let token = CancelToken::new();
        let waiter_lock = Arc::new((r.waiter)(&cw.client, &root));
        let waiter = Contender::start(waiter_lock.clone(), Acquire::new().cancel(&token));
        eventually(patience, "the waiter queues", || {
            waits(&ch, &dirs, waiter_session)
        });
        let count = owned_nodes(ch.client.as_ref(), &dirs).len();
        let next = Contender::start(Arc::new((r.next)(&cn.client, &root)), next);
        eventually(patience, "the next waiter queues", || {
            owned_nodes(ch.client.as_ref(), &dirs).len() > count
        });
        Queue {
            dirs,
            ch,
            cw,
            _cn: cn,
            waiter_session,
            holder: Some(holder),
            token,
            waiter_lock,
            waiter,
            next,
        }
    }

    /// The cancelled waiter's object holds nothing, and no node of its session is left.
    fn waiter_left(&self, patience: Duration, what: &str) {
        assert!(
            !(self.waiter_lock.in_process)(),
            "{what}: the cancelled owned acquire left an owned hold in its object"
        );
        eventually(patience, "no node of the cancelled waiter is left", || {
            owned_nodes(self.ch.client.as_ref(), &self.dirs)
                .iter()
                .all(|(_, o)| *o != self.waiter_session)
        });
    }
}

/// The scenario of the issue with owned guards, for one recipe: the cancel ends the owned
/// waiter with `Cancelled`, leaves no node of its session nor an owned hold in its object,
/// and the owned waiter behind it gets the lock once the holder's guard drops. The cancelled
/// waiter's client keeps its session and its other lock.
fn cancelled_mid_queue(b: &dyn Backend, r: &Recipe) {
    let patience = b.patience();
    let mut q = Queue::start(b, r, Acquire::new());
    let other = InterProcessMutex::new(q.cw.client.clone(), &format!("{}-other", b.root()));
    let other_guard = Arc::new(other.unwrap()).lock_owned().unwrap();
    let before = q.cw.client.session().snapshot();

    q.token.cancel();
    assert_cancelled(q.waiter.outcome(patience, "the cancelled waiter"), r.name);
    q.waiter_left(patience, r.name);
    drop(q.holder.take());
    let next = q.next.outcome(patience, "the next waiter").unwrap();
    assert!(
        next.is_some(),
        "{}: the waiter behind the cancelled one gets the lock",
        r.name
    );
    let after = q.cw.client.session().snapshot();
    assert_eq!(after.losses, before.losses, "{}", r.name);
    assert!(after.state.is_connected(), "{}: {after:?}", r.name);
    assert_eq!(other_guard.state(), LockState::Held, "{}", r.name);
    drop(next);
    drop(other_guard);
    eventually(patience, "every node is deleted", || {
        owned_nodes(q.ch.client.as_ref(), &q.dirs).is_empty()
    });
}

#[test]
fn memory_every_recipe_cancelled_mid_queue() {
    let b = Memory::new();
    for r in recipes() {
        cancelled_mid_queue(&b, &r);
    }
}

/// The same on a real server through our own client.
#[test]
fn native_every_recipe_cancelled_mid_queue() {
    let Some(b) = Real::native() else { return };
    for r in recipes() {
        cancelled_mid_queue(&b, &r);
    }
}

/// A real server: an owned mutex waiter goes through a blip (same session) and then a lost
/// session (it queues again in the new one) before the cancel; the cancel still ends it with
/// `Cancelled`, no node of either session is left, and the next waiter gets in.
#[test]
fn native_cancel_after_a_blip_and_a_lost_session() {
    let Some(b) = Real::native() else { return };
    let patience = b.patience();
    let r = &recipes()[0];
    let mut q = Queue::start(&b, r, Acquire::new());
    let first_session = q.waiter_session;
    q.cw.faults.blip();
    eventually(patience, "the waiter waits again after the blip", || {
        waits(&q.ch, &q.dirs, first_session)
    });
    q.cw.faults.expire();
    eventually(
        patience,
        "the waiter queues again in its new session",
        || {
            let now = q.cw.client.session().session_id();
            now.is_some_and(|s| s != first_session)
                && owned_nodes(q.ch.client.as_ref(), &q.dirs)
                    .iter()
                    .any(|(_, o)| Some(*o) == now)
        },
    );
    q.waiter_session = q.cw.session_id();
    q.token.cancel();
    assert_cancelled(q.waiter.outcome(patience, "the cancelled waiter"), r.name);
    q.waiter_left(patience, r.name);
    eventually(patience, "no node of the first session is left", || {
        owned_nodes(q.ch.client.as_ref(), &q.dirs)
            .iter()
            .all(|(_, o)| *o != first_session)
    });
    drop(q.holder.take());
    let next = q.next.outcome(patience, "the next waiter").unwrap();
    assert!(
        next.is_some(),
        "the waiter behind the cancelled one gets in"
    );
    assert!(q.cw.client.session().state().is_connected());
}

// ---------------------------------------------------------------------------------------------
// In-memory ensemble: exact counts and faults at exact points

/// A token cancelled before the call: `Cancelled`, and not one request (nor a round trip),
/// with and without a timeout.
#[test]
fn a_token_cancelled_before_the_owned_call_makes_no_request() {
    let b = Memory::new();
    for r in recipes() {
        let c = b.connect();
        let lock = Arc::new((r.waiter)(&c.client, &root_of(&b, &r)));
        let token = CancelToken::new();
        token.cancel();
        let memory = c.memory().unwrap();
        memory.reset_counters();
        for how in [
            Acquire::new().cancel(&token),
            Acquire::new()
                .cancel(&token)
                .timeout(Duration::from_secs(5)),
        ] {
            assert_cancelled((lock.take)(&how), r.name);
        }
        let counted = memory.counters();
        assert_eq!(counted.requests(), 0, "{}: {counted:?}", r.name);
        assert_eq!(counted.round_trips, 0, "{}: {counted:?}", r.name);
        assert!(!(lock.in_process)(), "{}", r.name);
    }
}

/// Cancelled while its link is down: the owned waiter returns without waiting for the link
/// (its node's delete goes to the background); once the link is back the node is gone and the
/// next waiter gets the lock.
#[test]
fn an_owned_cancel_while_the_link_is_down_returns_at_once() {
    let b = Memory::new();
    let patience = b.patience();
    for r in recipes() {
        let mut q = Queue::start(&b, &r, Acquire::new());
        let memory = q.cw.memory().unwrap();
        memory.reset_counters();
        memory.suspend();
        eventually(patience, "the waiter lists again and fails", || {
            memory.counters().get_children > 0
        });
        q.token.cancel();
        assert_cancelled(
            q.waiter
                .outcome(patience, "the waiter cancelled with its link down"),
            r.name,
        );
        assert_eq!(
            q.cw.client.session().state(),
            ConnectionState::Suspended,
            "{}: the call did not wait for the link",
            r.name
        );
        memory.resume();
        q.waiter_left(patience, r.name);
        drop(q.holder.take());
        let next = q.next.outcome(patience, "the next waiter").unwrap();
        assert!(next.is_some(), "{}", r.name);
        assert_eq!(q.cw.client.session().snapshot().losses, 0, "{}", r.name);
    }
}

/// An owned waiter whose session was lost queues again in its new session (behind the next
/// waiter, which its lost node let through where it waited first); a cancel then ends that
/// wait too: `Cancelled`, no node of either session left, the next waiter gets in, and
/// the client stays connected.
#[test]
fn an_owned_cancel_after_a_lost_session_leaves_nothing() {
    let b = Memory::new();
    let patience = b.patience();
    for r in recipes() {
        let mut q = Queue::start(&b, &r, Acquire::new());
        let first_session = q.waiter_session;
        q.cw.memory().unwrap().expire();
        eventually(
            patience,
            "the waiter queues again in its new session",
            || {
                let now = q.cw.client.session().session_id();
                now.is_some_and(|s| s != first_session)
                    && owned_nodes(q.ch.client.as_ref(), &q.dirs)
                        .iter()
                        .any(|(_, o)| Some(*o) == now)
            },
        );
        q.waiter_session = q.cw.session_id();
        q.token.cancel();
        assert_cancelled(
            q.waiter
                .outcome(patience, "the waiter cancelled after a lost session"),
            r.name,
        );
        q.waiter_left(patience, r.name);
        eventually(patience, "no node of the first session is left", || {
            owned_nodes(q.ch.client.as_ref(), &q.dirs)
                .iter()
                .all(|(_, o)| *o != first_session)
        });
        drop(q.holder.take());
        let next = q.next.outcome(patience, "the next waiter").unwrap();
        assert!(next.is_some(), "{}", r.name);
        assert!(q.cw.client.session().state().is_connected(), "{}", r.name);
    }
}

/// A timeout and a token together: the timeout gives `Ok(None)`, the token `Cancelled`; a
/// guard granted before the cancel stays held (too late), and releases on drop.
#[test]
fn owned_timeout_and_token_are_told_apart() {
    let b = Memory::new();
    let patience = b.patience();
    let (ch, cw) = (b.connect(), b.connect());
    let root = b.root();
    let holder = Arc::new(InterProcessMutex::new(ch.client.clone(), &root).unwrap());
    let waiter = Arc::new(InterProcessMutex::new(cw.client.clone(), &root).unwrap());
    let token = CancelToken::new();
    let guard = holder
        .try_lock_owned_with(&Acquire::new().cancel(&token))
        .unwrap()
        .expect("uncontended: held");
    let timed_out = waiter
        .try_lock_owned_with(
            &Acquire::new()
                .cancel(&token)
                .timeout(Duration::from_millis(20)),
        )
        .unwrap();
    assert!(timed_out.is_none());
    assert_eq!(children(ch.client.as_ref(), &root).len(), 1);
    let w = Contender::start(
        Arc::new(owned(waiter.clone())),
        Acquire::new()
            .cancel(&token)
            .timeout(Duration::from_secs(3600)),
    );
    eventually(patience, "the waiter queues", || {
        children(ch.client.as_ref(), &root).len() == 2
    });
    token.cancel();
    assert_cancelled(w.outcome(patience, "the cancelled waiter"), "mutex");
    eventually(patience, "its node is deleted", || {
        children(ch.client.as_ref(), &root).len() == 1
    });
    assert!(!waiter.is_acquired_in_this_process());
    // Cancelled after the grant: too late, the guard holds until it drops.
    assert_eq!(guard.state(), LockState::Held);
    drop(guard);
    assert!(children(ch.client.as_ref(), &root).is_empty());
    assert!(!holder.is_acquired_in_this_process());
}

/// A token costs no request: an uncontended owned cycle through `try_lock_owned_with` and a
/// token makes the requests and round trips of a plain `lock_owned()`.
#[test]
fn an_owned_token_costs_no_request() {
    let b = Memory::new();
    let c = b.connect();
    let memory = c.memory().unwrap();
    let token = CancelToken::new();
    let with_token = Acquire::new().cancel(&token);
    let plain = Acquire::new();
    let cases: [(&str, Make); 2] = [("mutex", mutex), ("semaphore mutex", semaphore_mutex)];
    for (name, make) in cases {
        let lock = make(
            &c.client,
            &format!("{}/{}", b.root(), name.replace(' ', "-")),
        );
        let cost = |how: &Acquire| {
            drop((lock.take)(how).unwrap().expect("uncontended: held"));
            memory.reset_counters();
            drop((lock.take)(how).unwrap().expect("uncontended: held"));
            memory.counters()
        };
        let (plain, cancellable) = (cost(&plain), cost(&with_token));
        assert_eq!(cancellable.requests(), plain.requests(), "{name}");
        assert_eq!(cancellable.round_trips, plain.round_trips, "{name}");
    }
}
