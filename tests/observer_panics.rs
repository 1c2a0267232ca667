//! User code the library calls must not wedge a lock: a `LockObserver` that panics at any of
//! its events, a revocation listener or a `SharedCount` listener that panics, an observer that
//! blocks. After each, no node is left that nobody owns (the lock directory empties once the
//! contender released) and a fresh contender on another client acquires at once; the call the
//! user made returns as if the observer had returned. On the in-memory ensemble, for every
//! recipe (mutex, both read/write sides, semaphore, semaphore mutex) and for owned guards.

mod common;

use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::{children, eventually};
use zk_locks::client::memory::{MemoryClient, MemoryEnsemble};
use zk_locks::locks::{
    InterProcessLock, InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreMutex,
    InterProcessSemaphoreV2, Lease, LockEvent, LockObserver, LockState, OwnedLockGuard,
    ParticipantKind, Revoker, SharedCount,
};
use zk_locks::{Error, Result, SharedClient};

const PATIENCE: Duration = Duration::from_secs(20);

/// Panics at one event (every time), after recording that it was called.
struct Panicky {
    at: &'static str,
    seen: Mutex<Vec<&'static str>>,
}

impl Panicky {
    fn new(at: &'static str) -> Arc<Panicky> {
        Arc::new(Panicky {
            at,
            seen: Mutex::new(Vec::new()),
        })
    }

    fn hit(&self, event: &'static str) {
        self.seen.lock().unwrap().push(event);
        if event == self.at {
            panic!("a buggy observer panics at {event}");
        }
    }

    fn saw(&self, event: &str) -> bool {
        self.seen.lock().unwrap().contains(&event)
    }
}

impl LockObserver for Panicky {
    fn queued(&self, _: &LockEvent<'_>) {
        self.hit("queued");
    }
    fn acquired(&self, _: &LockEvent<'_>, _: Duration) {
        self.hit("acquired");
    }
    fn timed_out(&self, _: &str, _: ParticipantKind, _: Duration) {
        self.hit("timed_out");
    }
    fn failed(&self, _: &str, _: ParticipantKind, _: &Error) {
        self.hit("failed");
    }
    fn released(&self, _: &LockEvent<'_>, _: Duration) {
        self.hit("released");
    }
    fn suspect(&self, _: &LockEvent<'_>) {
        self.hit("suspect");
    }
    fn held_again(&self, _: &LockEvent<'_>) {
        self.hit("held_again");
    }
    fn lost(&self, _: &LockEvent<'_>) {
        self.hit("lost");
    }
}

/// The recipes, each as a contender on one client.
#[derive(Debug, Clone, Copy)]
enum Recipe {
    Mutex,
    Read,
    Write,
    Semaphore,
    SemaphoreMutex,
    OwnedMutex,
    OwnedWrite,
    OwnedSemaphoreMutex,
}

const RECIPES: [Recipe; 8] = [
    Recipe::Mutex,
    Recipe::Read,
    Recipe::Write,
    Recipe::Semaphore,
    Recipe::SemaphoreMutex,
    Recipe::OwnedMutex,
    Recipe::OwnedWrite,
    Recipe::OwnedSemaphoreMutex,
];

type Acquire = Box<dyn Fn(Option<Duration>) -> Result<bool> + Send + Sync>;
type Release = Box<dyn Fn() -> Result<()> + Send + Sync>;
type State = Box<dyn Fn() -> LockState + Send + Sync>;

/// One lock object seen through acquire (a timeout or none), release and the held state. A
/// thread's hold (mutex, read/write, semaphore mutex) is released by the thread that took it.
struct Contender {
    acquire: Acquire,
    release: Release,
    state: State,
}

fn threaded<L: InterProcessLock + 'static>(lock: Arc<L>) -> Contender {
    let (l1, l2) = (lock.clone(), lock.clone());
    Contender {
        acquire: Box::new(move |t| match t {
            Some(t) => l1.acquire_timeout(t),
            None => l1.acquire().map(|()| true),
        }),
        release: Box::new(move || l2.release()),
        state: Box::new(move || lock.held_nodes()[0].state()),
    }
}

fn owned<L: InterProcessLock + 'static>(lock: Arc<L>) -> Contender {
    let guard: Arc<Mutex<Option<OwnedLockGuard<L>>>> = Arc::default();
    let (g1, g2) = (guard.clone(), guard.clone());
    Contender {
        acquire: Box::new(move |t| {
            let g = match t {
                Some(t) => lock.try_lock_owned_for(t)?,
                None => Some(lock.lock_owned()?),
            };
            let got = g.is_some();
            *g1.lock().unwrap() = g;
            Ok(got)
        }),
        release: Box::new(move || {
            let g = g2.lock().unwrap().take();
            g.expect("held").unlock()
        }),
        state: Box::new(move || guard.lock().unwrap().as_ref().expect("held").state()),
    }
}

fn semaphore(s: InterProcessSemaphoreV2) -> Contender {
    let s = Arc::new(s);
    let leases: Arc<Mutex<Vec<Lease>>> = Arc::default();
    let (l1, l2) = (leases.clone(), leases.clone());
    Contender {
        acquire: Box::new(move |t| {
            let lease = match t {
                Some(t) => s.acquire_timeout(t)?,
                None => Some(s.acquire()?),
            };
            let got = lease.is_some();
            l1.lock().unwrap().extend(lease);
            Ok(got)
        }),
        release: Box::new(move || l2.lock().unwrap().pop().expect("held").close()),
        state: Box::new(move || leases.lock().unwrap()[0].state()),
    }
}

fn contender(
    recipe: Recipe,
    client: SharedClient,
    path: &str,
    observer: Option<Arc<dyn LockObserver>>,
) -> Contender {
    let mutex = || {
        let m = InterProcessMutex::new(client.clone(), path).unwrap();
        Arc::new(match &observer {
            Some(o) => m.with_observer(o.clone()),
            None => m,
        })
    };
    let rw = || {
        let rw = InterProcessReadWriteLock::new(client.clone(), path).unwrap();
        match &observer {
            Some(o) => rw.with_observer(o.clone()),
            None => rw,
        }
    };
    let sm = || {
        let s = InterProcessSemaphoreMutex::new(client.clone(), path).unwrap();
        Arc::new(match &observer {
            Some(o) => s.with_observer(o.clone()),
            None => s,
        })
    };
    match recipe {
        Recipe::Mutex => threaded(mutex()),
        Recipe::Read => threaded(rw().read_lock_arc()),
        Recipe::Write => threaded(rw().write_lock_arc()),
        Recipe::SemaphoreMutex => threaded(sm()),
        Recipe::OwnedMutex => owned(mutex()),
        Recipe::OwnedWrite => owned(rw().write_lock_arc()),
        Recipe::OwnedSemaphoreMutex => owned(sm()),
        Recipe::Semaphore => {
            let s = InterProcessSemaphoreV2::new(client.clone(), path, 1).unwrap();
            semaphore(match &observer {
                Some(o) => s.with_observer(o.clone()),
                None => s,
            })
        }
    }
}

/// A contender that keeps out `recipe` (a reader is kept out by a writer).
fn blocker(recipe: Recipe, client: SharedClient, path: &str) -> Contender {
    match recipe {
        Recipe::Read => contender(Recipe::Write, client, path, None),
        r => contender(r, client, path, None),
    }
}

/// No node is left under `path` (a semaphore's admission and lease directories included),
/// and a fresh contender on a new client acquires at once.
fn assert_no_orphan(e: &MemoryEnsemble, recipe: Recipe, path: &str, what: &str) {
    let probe: SharedClient = e.connect();
    let dirs = match recipe {
        Recipe::Semaphore | Recipe::SemaphoreMutex | Recipe::OwnedSemaphoreMutex => {
            vec![format!("{path}/locks"), format!("{path}/leases")]
        }
        _ => vec![path.to_string()],
    };
    eventually(PATIENCE, &format!("{what}: {path} empties"), || {
        dirs.iter().all(|d| children(probe.as_ref(), d).is_empty())
    });
    let fresh = contender(recipe, probe, path, None);
    assert!(
        (fresh.acquire)(Some(PATIENCE)).unwrap(),
        "{what}: a fresh contender is kept out of {path}"
    );
    (fresh.release)().unwrap();
}

/// Runs `f`, turning a panic that escapes the library into an error message.
fn no_panic<T>(what: &str, f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .map_err(|_| format!("{what}: the observer's panic escaped the call"))
}

/// Runs `scenario` for every recipe; the lock must be free of orphans first (what a panic
/// that escaped left behind shows there), then the call's outcome is checked (`Err`: how not).
fn each_recipe(
    event: &'static str,
    scenario: impl Fn(&Clients, Recipe, &str, &str) -> std::result::Result<(), String>,
) {
    let e = MemoryEnsemble::new();
    for recipe in RECIPES {
        let path = format!("/locks/{event}-{recipe:?}").to_lowercase();
        let what = format!("{recipe:?} panicking at {event}");
        let clients = Clients {
            e: &e,
            kept: Mutex::default(),
        };
        let outcome = scenario(&clients, recipe, &path, &what);
        assert_no_orphan(&e, recipe, &path, &what);
        outcome.unwrap();
    }
}

/// Connects clients that stay open until the check for orphans is done (a closed session
/// would take an orphan node with it).
struct Clients<'a> {
    e: &'a MemoryEnsemble,
    kept: Mutex<Vec<Arc<MemoryClient>>>,
}

impl Clients<'_> {
    fn connect(&self) -> Arc<MemoryClient> {
        let c = self.e.connect();
        self.kept.lock().unwrap().push(c.clone());
        c
    }
}

/// `Ok` when `cond`, else `what` and `detail`.
fn check(cond: bool, what: &str, detail: impl std::fmt::Debug) -> std::result::Result<(), String> {
    match cond {
        true => Ok(()),
        false => Err(format!("{what}: {detail:?}")),
    }
}

#[test]
fn an_observer_panicking_at_acquired_leaves_the_hold_recorded_and_releasable() {
    each_recipe("acquired", |c, recipe, path, what| {
        let seen = Panicky::new("acquired");
        let x = contender(recipe, c.connect(), path, Some(seen.clone()));
        let took = no_panic(what, || (x.acquire)(None));
        if let Ok(Ok(true)) = took {
            (x.release)().unwrap();
        }
        assert!(seen.saw("acquired"), "{what}: never reported");
        check(matches!(took, Ok(Ok(true))), what, took)
    });
}

#[test]
fn an_observer_panicking_at_released_still_deletes_the_node() {
    each_recipe("released", |c, recipe, path, what| {
        let seen = Panicky::new("released");
        let x = contender(recipe, c.connect(), path, Some(seen.clone()));
        assert!((x.acquire)(None).unwrap(), "{what}");
        let released = no_panic(what, || (x.release)());
        assert!(seen.saw("released"), "{what}: never reported");
        check(matches!(released, Ok(Ok(()))), what, released)
    });
}

#[test]
fn an_observer_panicking_at_queued_still_waits_and_gets_the_lock() {
    each_recipe("queued", |c, recipe, path, what| {
        let holder = blocker(recipe, c.connect(), path);
        assert!((holder.acquire)(None).unwrap());
        let seen = Panicky::new("queued");
        let x = contender(recipe, c.connect(), path, Some(seen.clone()));
        let (done, outcome) = mpsc::channel();
        let what_x = what.to_string();
        let waiter = thread::spawn(move || {
            let took = no_panic(&what_x, || (x.acquire)(Some(PATIENCE)));
            if let Ok(Ok(true)) = took {
                (x.release)().unwrap();
            }
            let _ = done.send(took);
        });
        eventually(PATIENCE, &format!("{what}: queued"), || seen.saw("queued"));
        (holder.release)().unwrap();
        let took = outcome.recv_timeout(PATIENCE).expect("the waiter ends");
        waiter.join().unwrap();
        check(matches!(took, Ok(Ok(true))), what, took)
    });
}

#[test]
fn an_observer_panicking_at_timed_out_returns_not_acquired() {
    each_recipe("timed_out", |c, recipe, path, what| {
        let holder = blocker(recipe, c.connect(), path);
        assert!((holder.acquire)(None).unwrap());
        let seen = Panicky::new("timed_out");
        let x = contender(recipe, c.connect(), path, Some(seen.clone()));
        let took = no_panic(what, || (x.acquire)(Some(Duration::from_millis(30))));
        (holder.release)().unwrap();
        assert!(seen.saw("timed_out"), "{what}: never reported");
        check(matches!(took, Ok(Ok(false))), what, took)
    });
}

#[test]
fn an_observer_panicking_at_suspect_held_again_or_lost_does_not_break_the_state_query() {
    for event in ["suspect", "held_again", "lost"] {
        each_recipe(event, |c, recipe, path, what| {
            let client: Arc<MemoryClient> = c.connect();
            let seen = Panicky::new(event);
            let x = contender(recipe, client.clone(), path, Some(seen.clone()));
            assert!((x.acquire)(None).unwrap(), "{what}");
            let (first, after) = match event {
                "lost" => {
                    client.expire();
                    (Ok(LockState::Suspect), no_panic(what, || (x.state)()))
                }
                _ => {
                    client.suspend();
                    let suspect = no_panic(what, || (x.state)());
                    client.resume();
                    (suspect, no_panic(what, || (x.state)()))
                }
            };
            let released = no_panic(what, || (x.release)());
            assert!(seen.saw(event), "{what}: never reported");
            let expected = match event {
                "lost" => LockState::Lost,
                _ => LockState::Held,
            };
            let states = (first, after, released);
            check(
                matches!(&states, (Ok(LockState::Suspect), Ok(s), Ok(Ok(()))) if *s == expected),
                what,
                states,
            )
        });
    }
}

/// An observer that blocks (in `acquired`, for one lock) holds up only the thread it was
/// called on: another lock of the same client hands over, and a guard of that client still
/// sees its session's changes. The wake-ups never go through an observer.
#[test]
fn an_observer_blocked_on_one_lock_holds_up_no_other_lock_of_its_client() {
    struct Blocking {
        gate: Mutex<mpsc::Receiver<()>>,
        entered: Mutex<Option<mpsc::Sender<()>>>,
    }
    impl LockObserver for Blocking {
        fn acquired(&self, event: &LockEvent<'_>, _: Duration) {
            if event.lock == "/locks/blocked" {
                if let Some(entered) = self.entered.lock().unwrap().take() {
                    let _ = entered.send(());
                }
                let _ = self.gate.lock().unwrap().recv_timeout(PATIENCE);
            }
        }
    }
    let (open, gate) = mpsc::channel();
    let (entered_tx, entered) = mpsc::channel();
    let observer = Arc::new(Blocking {
        gate: Mutex::new(gate),
        entered: Mutex::new(Some(entered_tx)),
    });
    let e = MemoryEnsemble::new();
    let client: Arc<MemoryClient> = e.connect();
    let shared: SharedClient = client.clone();
    let blocked = InterProcessMutex::new(shared.clone(), "/locks/blocked")
        .unwrap()
        .with_observer(observer.clone());
    let stuck = thread::spawn(move || {
        let g = blocked.lock().unwrap();
        drop(g);
    });
    entered.recv_timeout(PATIENCE).expect("the observer blocks");

    let other = Arc::new(
        InterProcessMutex::new(shared.clone(), "/locks/other")
            .unwrap()
            .with_observer(observer.clone()),
    );
    let held = other.lock().unwrap();
    let (got, handed) = mpsc::channel();
    let next = Arc::new(InterProcessMutex::new(shared.clone(), "/locks/other").unwrap());
    let waiter = thread::spawn(move || {
        let g = next.lock().unwrap();
        let _ = got.send(());
        drop(g);
    });
    eventually(PATIENCE, "the waiter queued", || {
        children(shared.as_ref(), "/locks/other").len() == 2
    });
    drop(held);
    handed
        .recv_timeout(PATIENCE)
        .expect("handed over while an observer of the client blocks");
    waiter.join().unwrap();

    let guard = other.lock().unwrap();
    client.suspend();
    assert_eq!(guard.wait_while_held(Some(PATIENCE)), LockState::Suspect);
    client.resume();
    drop(guard);
    open.send(()).unwrap();
    stuck.join().unwrap();
}

#[test]
fn a_panicking_revocation_listener_is_called_again_and_leaves_the_lock_releasable() {
    let e = MemoryEnsemble::new();
    let path = "/locks/revoked";
    let calls = Arc::new(Mutex::new(0));
    let mutex = InterProcessMutex::new(e.connect(), path).unwrap();
    let asker: SharedClient = e.connect();
    for round in 1..=2 {
        let c = calls.clone();
        mutex.make_revocable(move || {
            *c.lock().unwrap() += 1;
            panic!("a buggy revocation listener");
        });
        let guard = mutex.lock().unwrap();
        let node = guard.node_path().unwrap().to_string();
        Revoker::attempt_revoke(&asker, &node).unwrap();
        eventually(PATIENCE, "the listener was called", || {
            *calls.lock().unwrap() == round
        });
        guard.unlock().unwrap();
        assert_no_orphan(&e, Recipe::Mutex, path, "revocation listener");
    }
}

#[test]
fn a_panicking_shared_count_listener_stops_neither_the_others_nor_the_semaphore() {
    let e = MemoryEnsemble::new();
    let path = "/locks/counted";
    let count = SharedCount::new(e.connect(), &format!("{path}-count"), 1).unwrap();
    count.subscribe(|_| panic!("a buggy count listener"));
    let heard = Arc::new(Mutex::new(Vec::new()));
    let h = heard.clone();
    count.subscribe(move |v| h.lock().unwrap().push(v));
    let semaphore =
        InterProcessSemaphoreV2::with_shared_count(e.connect(), path, count.clone()).unwrap();
    let first = semaphore.acquire().unwrap();
    count.set_count(2).unwrap();
    eventually(PATIENCE, "the second listener heard 2", || {
        heard.lock().unwrap().last() == Some(&2)
    });
    let second = semaphore
        .acquire_timeout(PATIENCE)
        .unwrap()
        .expect("admitted under the raised count");
    count.set_count(3).unwrap();
    eventually(PATIENCE, "the second listener heard 3", || {
        heard.lock().unwrap().last() == Some(&3)
    });
    first.close().unwrap();
    second.close().unwrap();
    assert_no_orphan(&e, Recipe::Semaphore, path, "count listener");
}

/// A user's `ZkClient` wrapper that panics on the listing behind our create: the panic
/// unwinds the acquire (it is the library's I/O, not a callback), and the drop guard deletes
/// the node through the same wrapper: nothing is left behind.
#[test]
fn a_client_wrapper_that_panics_after_the_create_leaves_no_node() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use zk_locks::client::{CreateMode, Stat, Watcher, ZkResult};
    use zk_locks::{Session, ZkClient};

    struct PanicsOnListing {
        inner: Arc<MemoryClient>,
        armed: AtomicBool,
    }
    impl ZkClient for PanicsOnListing {
        fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> ZkResult<String> {
            self.inner.create(path, data, mode)
        }
        fn delete(&self, path: &str, version: Option<i32>) -> ZkResult<()> {
            self.inner.delete(path, version)
        }
        fn exists(&self, path: &str) -> ZkResult<Option<Stat>> {
            self.inner.exists(path)
        }
        fn get_data(&self, path: &str, watcher: Option<Watcher>) -> ZkResult<(Vec<u8>, Stat)> {
            self.inner.get_data(path, watcher)
        }
        fn get_children(&self, path: &str, watcher: Option<Watcher>) -> ZkResult<Vec<String>> {
            if self.armed.swap(false, Ordering::SeqCst) {
                panic!("a buggy client wrapper");
            }
            self.inner.get_children(path, watcher)
        }
        fn set_data(&self, path: &str, data: &[u8], version: Option<i32>) -> ZkResult<Stat> {
            self.inner.set_data(path, data, version)
        }
        fn session(&self) -> &Session {
            self.inner.session()
        }
        fn close(&self) {
            self.inner.close()
        }
    }

    let e = MemoryEnsemble::new();
    let path = "/locks/wrapped";
    let wrapped: SharedClient = Arc::new(PanicsOnListing {
        inner: e.connect(),
        armed: AtomicBool::new(true),
    });
    let mutex = InterProcessMutex::new(wrapped.clone(), path).unwrap();
    let took = no_panic("wrapper", || mutex.acquire());
    assert!(
        took.is_err(),
        "the wrapper's panic is the caller's: {took:?}"
    );
    assert!(!mutex.is_acquired_in_this_process());
    assert_no_orphan(&e, Recipe::Mutex, path, "a panicking client wrapper");
    drop(wrapped);
}
