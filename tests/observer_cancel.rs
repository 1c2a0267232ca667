//! A cancelled acquire is reported as a cancel, a timeout as a timeout: the observer hears
//! `cancelled` for an acquire that returned `Error::Cancelled` and `timed_out` for one that
//! returned "not acquired" at its deadline, and the debug log says which. Every recipe
//! (mutex, both read/write sides, semaphore, semaphore mutex, multi-lock) and every owned
//! path, on the in-memory ensemble.

mod common;

use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::thread;
use std::time::Duration;

use common::eventually;
use zk_locks::client::memory::MemoryEnsemble;
use zk_locks::locks::{
    Acquire, CancelToken, InterProcessLock, InterProcessMultiLock, InterProcessMutex,
    InterProcessReadWriteLock, InterProcessSemaphoreMutex, InterProcessSemaphoreV2, LockEvent,
    LockObserver, ParticipantKind,
};
use zk_locks::{Error, Result, SharedClient};

const PATIENCE: Duration = Duration::from_secs(20);

/// Records the kind of each event.
#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

impl Recorder {
    fn push(&self, what: &str) {
        self.0.lock().unwrap().push(what.to_string());
    }
    fn events(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl LockObserver for Recorder {
    fn queued(&self, _: &LockEvent<'_>) {
        self.push("queued");
    }
    fn acquired(&self, _: &LockEvent<'_>, _: Duration) {
        self.push("acquired");
    }
    fn timed_out(&self, _: &str, _: ParticipantKind, _: Duration) {
        self.push("timed_out");
    }
    fn cancelled(&self, _: &str, _: ParticipantKind, _: Duration) {
        self.push("cancelled");
    }
    fn failed(&self, _: &str, _: ParticipantKind, error: &Error) {
        self.push(&format!("failed: {error}"));
    }
    fn released(&self, _: &LockEvent<'_>, _: Duration) {
        self.push("released");
    }
}

/// The debug lines of `zk_locks::locks::observe`, kept for the tests to read.
struct Lines(Mutex<Vec<String>>);

impl log::Log for Lines {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.target().starts_with("zk_locks::locks::observe")
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            self.0.lock().unwrap().push(r.args().to_string());
        }
    }
    fn flush(&self) {}
}

fn log_lines() -> &'static Lines {
    static LINES: OnceLock<&'static Lines> = OnceLock::new();
    LINES.get_or_init(|| {
        let lines: &'static Lines = Box::leak(Box::new(Lines(Mutex::new(Vec::new()))));
        log::set_logger(lines).expect("the only logger of this test binary");
        log::set_max_level(log::LevelFilter::Debug);
        lines
    })
}

/// The log lines that name `lock` (each test uses paths of its own).
fn lines_of(lock: &str) -> Vec<String> {
    let all = log_lines().0.lock().unwrap();
    all.iter()
        .filter(|l| l.contains(&format!(" {lock}:")))
        .cloned()
        .collect()
}

#[derive(Debug, Clone, Copy)]
enum Recipe {
    Mutex,
    Read,
    Write,
    Semaphore,
    SemaphoreMutex,
    Multi,
}

const RECIPES: [Recipe; 6] = [
    Recipe::Mutex,
    Recipe::Read,
    Recipe::Write,
    Recipe::Semaphore,
    Recipe::SemaphoreMutex,
    Recipe::Multi,
];

/// An acquire as `Acquire` says, released at once when it got the lock: true when it did.
type Take = Box<dyn Fn(&Acquire) -> Result<bool> + Send + Sync>;

fn threaded<L: InterProcessLock + 'static>(lock: Arc<L>) -> Take {
    Box::new(move |how| {
        let got = lock.try_acquire_with(how)?;
        if got {
            lock.release()?;
        }
        Ok(got)
    })
}

fn owned<L: InterProcessLock + 'static>(lock: Arc<L>) -> Take {
    Box::new(move |how| Ok(lock.try_lock_owned_with(how)?.is_some()))
}

/// The recipe on `path` (a multi-lock: over `path`/a and `path`/b), reporting to `observer`,
/// through its thread's acquire or (when `as_owned`) its owned one. The semaphore has no
/// owned guard: its lease is owned already.
fn take(
    recipe: Recipe,
    client: SharedClient,
    path: &str,
    observer: Option<Arc<dyn LockObserver>>,
    as_owned: bool,
) -> Take {
    let mutex = |p: &str| {
        let m = InterProcessMutex::new(client.clone(), p).unwrap();
        match &observer {
            Some(o) => m.with_observer(o.clone()),
            None => m,
        }
    };
    let rw = || {
        let rw = InterProcessReadWriteLock::new(client.clone(), path).unwrap();
        match &observer {
            Some(o) => rw.with_observer(o.clone()),
            None => rw,
        }
    };
    match (recipe, as_owned) {
        (Recipe::Mutex, false) => threaded(Arc::new(mutex(path))),
        (Recipe::Mutex, true) => owned(Arc::new(mutex(path))),
        (Recipe::Read, false) => threaded(rw().read_lock_arc()),
        (Recipe::Read, true) => owned(rw().read_lock_arc()),
        (Recipe::Write, false) => threaded(rw().write_lock_arc()),
        (Recipe::Write, true) => owned(rw().write_lock_arc()),
        (Recipe::SemaphoreMutex, o) => {
            let s = InterProcessSemaphoreMutex::new(client.clone(), path).unwrap();
            let s = Arc::new(match &observer {
                Some(ob) => s.with_observer(ob.clone()),
                None => s,
            });
            match o {
                false => threaded(s),
                true => owned(s),
            }
        }
        (Recipe::Multi, o) => {
            let parts: Vec<Box<dyn InterProcessLock>> = vec![
                Box::new(mutex(&format!("{path}/a"))),
                Box::new(mutex(&format!("{path}/b"))),
            ];
            let multi = Arc::new(InterProcessMultiLock::new(parts).unwrap());
            match o {
                false => threaded(multi),
                true => owned(multi),
            }
        }
        (Recipe::Semaphore, _) => {
            let s = InterProcessSemaphoreV2::new(client.clone(), path, 1).unwrap();
            let s = match &observer {
                Some(o) => s.with_observer(o.clone()),
                None => s,
            };
            Box::new(move |how| Ok(s.acquire_with(how)?.is_some()))
        }
    }
}

/// The lock (of the multi-lock: its second part) that keeps `recipe` out, held until the
/// sender is dropped or sent to.
fn hold_against(e: &MemoryEnsemble, recipe: Recipe, path: &str) -> mpsc::Sender<()> {
    let (release, released) = mpsc::channel::<()>();
    let (held, holding) = mpsc::channel();
    let client: SharedClient = e.connect();
    let path = path.to_string();
    thread::spawn(move || {
        let taken: Box<dyn FnOnce()> = match recipe {
            Recipe::Semaphore => {
                let s = InterProcessSemaphoreV2::new(client, &path, 1).unwrap();
                let lease = s.acquire().unwrap();
                Box::new(move || lease.close().unwrap())
            }
            Recipe::SemaphoreMutex => {
                let s = InterProcessSemaphoreMutex::new(client, &path).unwrap();
                s.acquire().unwrap();
                Box::new(move || s.release().unwrap())
            }
            Recipe::Multi => {
                let m = InterProcessMutex::new(client, &format!("{path}/b")).unwrap();
                m.acquire().unwrap();
                Box::new(move || m.release().unwrap())
            }
            Recipe::Mutex => {
                let m = InterProcessMutex::new(client, &path).unwrap();
                m.acquire().unwrap();
                Box::new(move || m.release().unwrap())
            }
            Recipe::Read | Recipe::Write => {
                let w = InterProcessReadWriteLock::new(client, &path).unwrap();
                w.write_lock().acquire().unwrap();
                Box::new(move || w.write_lock().release().unwrap())
            }
        };
        held.send(()).unwrap();
        let _ = released.recv();
        taken();
    });
    holding.recv_timeout(PATIENCE).expect("the holder holds");
    release
}

/// The events of a waiter that ended without the lock with `end`: a multi-lock took its
/// first part (held by nobody else) and gives it back.
fn expected(recipe: Recipe, end: &str) -> Vec<String> {
    let events = match recipe {
        Recipe::Multi => vec!["acquired", "queued", end, "released"],
        _ => vec!["queued", end],
    };
    events.into_iter().map(String::from).collect()
}

fn each(as_owned: bool, check: impl Fn(&MemoryEnsemble, Recipe, &str, &str)) {
    let _ = log_lines();
    let e = MemoryEnsemble::new();
    for recipe in RECIPES {
        if as_owned && matches!(recipe, Recipe::Semaphore) {
            continue;
        }
        let path = format!("/locks/{recipe:?}-owned-{as_owned}-{}", line!()).to_lowercase();
        let what = format!("{recipe:?} (owned: {as_owned})");
        check(&e, recipe, &path, &what);
    }
}

/// A waiter cancelled in the queue: `Error::Cancelled`, and the observer hears `queued`
/// then `cancelled` (not `timed_out`); the log says "cancelled after".
fn cancelled_in_the_queue(e: &MemoryEnsemble, recipe: Recipe, path: &str, what: &str) {
    let holder = hold_against(e, recipe, path);
    let seen = Arc::new(Recorder::default());
    let waiter = take(recipe, e.connect(), path, Some(seen.clone()), false);
    let token = CancelToken::new();
    let how = Acquire::new().cancel(&token);
    let waiting = thread::spawn(move || waiter(&how));
    eventually(PATIENCE, &format!("{what}: queued"), || {
        seen.events().iter().any(|e| e == "queued")
    });
    token.cancel();
    let outcome = waiting.join().unwrap();
    drop(holder);
    assert!(
        matches!(outcome, Err(Error::Cancelled { .. })),
        "{what}: {outcome:?}"
    );
    assert_eq!(seen.events(), expected(recipe, "cancelled"), "{what}");
}

/// A timed wait that times out with a token not cancelled: "not acquired", `timed_out`.
fn timed_out_with_a_token(e: &MemoryEnsemble, recipe: Recipe, path: &str, what: &str) {
    let holder = hold_against(e, recipe, path);
    let seen = Arc::new(Recorder::default());
    let waiter = take(recipe, e.connect(), path, Some(seen.clone()), false);
    let token = CancelToken::new();
    let how = Acquire::new()
        .timeout(Duration::from_millis(30))
        .cancel(&token);
    let outcome = waiter(&how);
    drop(holder);
    assert!(matches!(outcome, Ok(false)), "{what}: {outcome:?}");
    assert_eq!(seen.events(), expected(recipe, "timed_out"), "{what}");
}

#[test]
fn a_cancelled_acquire_is_reported_as_cancelled_on_every_recipe() {
    each(false, cancelled_in_the_queue);
}

#[test]
fn a_timed_out_acquire_with_a_token_is_reported_as_timed_out_on_every_recipe() {
    each(false, timed_out_with_a_token);
}

#[test]
fn a_cancelled_owned_acquire_is_reported_as_cancelled() {
    each(true, |e, recipe, path, what| {
        let holder = hold_against(e, recipe, path);
        let seen = Arc::new(Recorder::default());
        let waiter = take(recipe, e.connect(), path, Some(seen.clone()), true);
        let token = CancelToken::new();
        let how = Acquire::new().cancel(&token);
        let waiting = thread::spawn(move || waiter(&how));
        eventually(PATIENCE, &format!("{what}: queued"), || {
            seen.events().iter().any(|e| e == "queued")
        });
        token.cancel();
        let outcome = waiting.join().unwrap();
        assert!(
            matches!(outcome, Err(Error::Cancelled { .. })),
            "{what}: {outcome:?}"
        );
        assert_eq!(seen.events(), expected(recipe, "cancelled"), "{what}");

        // A timed owned acquire that times out is a timeout.
        let seen = Arc::new(Recorder::default());
        let waiter = take(recipe, e.connect(), path, Some(seen.clone()), true);
        let outcome = waiter(&Acquire::new().timeout(Duration::from_millis(30)));
        drop(holder);
        assert!(matches!(outcome, Ok(false)), "{what}: {outcome:?}");
        assert_eq!(seen.events(), expected(recipe, "timed_out"), "{what}");
    });
}

#[test]
fn the_log_says_cancelled_for_a_cancel_and_timed_out_for_a_timeout() {
    let e = MemoryEnsemble::new();
    let _ = log_lines();
    let (cancelled, timed) = ("/locks/log-cancelled", "/locks/log-timed");
    cancelled_in_the_queue(&e, Recipe::Mutex, cancelled, "mutex cancelled");
    timed_out_with_a_token(&e, Recipe::Mutex, timed, "mutex timed out");
    let said = |lock: &str, what: &str| lines_of(lock).iter().any(|l| l.contains(what));
    assert!(
        said(cancelled, "cancelled after"),
        "{:?}",
        lines_of(cancelled)
    );
    assert!(!said(cancelled, "timed out"), "{:?}", lines_of(cancelled));
    assert!(said(timed, "timed out after"), "{:?}", lines_of(timed));
    assert!(!said(timed, "cancelled"), "{:?}", lines_of(timed));
}

/// Next to it: an untimed wait ended by its client's close returns `Error::Closed` and is
/// reported as that failure, not as a timeout (mutex and semaphore engines alike).
#[test]
fn a_wait_ended_by_a_closed_client_is_a_failure_not_a_timeout() {
    let e = MemoryEnsemble::new();
    for recipe in [Recipe::Mutex, Recipe::Semaphore] {
        let path = format!("/locks/closed-{recipe:?}").to_lowercase();
        let holder = hold_against(&e, recipe, &path);
        let seen = Arc::new(Recorder::default());
        let client: SharedClient = e.connect();
        let waiter = take(recipe, client.clone(), &path, Some(seen.clone()), false);
        let waiting = thread::spawn(move || waiter(&Acquire::new()));
        eventually(PATIENCE, "queued", || {
            seen.events().iter().any(|e| e == "queued")
        });
        client.close();
        let outcome = waiting.join().unwrap();
        drop(holder);
        assert!(
            matches!(outcome, Err(Error::Closed)),
            "{recipe:?}: {outcome:?}"
        );
        let events = seen.events();
        assert_eq!(events.len(), 2, "{recipe:?}: {events:?}");
        assert!(events[1].starts_with("failed: "), "{recipe:?}: {events:?}");
    }
}

/// An async acquire dropped while it waits is reported `cancelled` (the caller gave it up),
/// for a lock and for a semaphore lease; one that times out is `timed_out`.
#[test]
fn a_dropped_async_acquire_is_reported_as_cancelled() {
    use std::future::Future;
    use std::task::{Context, Waker};
    let e = MemoryEnsemble::new();
    let holder = InterProcessMutex::new(e.connect(), "/observed/async").unwrap();
    let _held = holder.lock().unwrap();
    let recorder = Arc::new(Recorder::default());
    let waiter = Arc::new(
        InterProcessMutex::new(e.connect(), "/observed/async")
            .unwrap()
            .with_observer(recorder.clone()),
    );
    {
        let mut future = Box::pin(waiter.lock_owned_async());
        assert!(future
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending());
    }
    assert_eq!(recorder.events(), ["queued", "cancelled"]);
    let pool = InterProcessSemaphoreV2::new(e.connect(), "/observed/pool", 1).unwrap();
    let _lease = pool.acquire().unwrap();
    let leases = Arc::new(Recorder::default());
    let waiting = Arc::new(
        InterProcessSemaphoreV2::new(e.connect(), "/observed/pool", 1)
            .unwrap()
            .with_observer(leases.clone()),
    );
    {
        let mut future = Box::pin(waiting.acquire_async());
        assert!(future
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending());
    }
    assert_eq!(leases.events(), ["queued", "cancelled"]);
}
