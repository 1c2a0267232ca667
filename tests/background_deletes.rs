//! Deletes left to the background during an outage go through one worker per client, not a
//! thread each: thousands of them add a constant number of threads, and every node is gone
//! once the link is back. The worker ends with its last job, and with its client: dropped
//! (it never keeps the client alive) or two more sessions lost. On the in-memory ensemble;
//! the tests of this binary run one at a time, so the process's thread count is one test's.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use zk_locks::client::memory::{MemoryClient, MemoryEnsemble, Op};
use zk_locks::locks::{
    Acquire, CancelToken, InterProcessLock, InterProcessMultiLock, InterProcessMutex,
};
use zk_locks::session::ConnectionState;
use zk_locks::{Error, ZkClient};

/// How many deletes the outage leaves to the background.
const JOBS: usize = 5000;
/// How many threads the background may add, whatever the number of deletes.
const MORE_THREADS_AT_MOST: usize = 4;
/// A generous bound on the background's work once the link is back (a loaded machine).
const PATIENCE: Duration = Duration::from_secs(30);
/// The name of the background's threads.
const WORKER: &str = "zk-locks-delete";

/// One test at a time: each counts the process's threads.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The threads of this process (Linux: `/proc/self/task`).
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| tasks.count())
        .unwrap_or(0)
}

/// The threads of this process named `name`.
fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .filter_map(|t| t.ok())
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .filter(|comm| comm.trim_end() == name)
                .count()
        })
        .unwrap_or(0)
}

fn can_count_threads() -> bool {
    std::path::Path::new("/proc/self/task").exists()
}

/// Polls `cond` every 20 ms until it holds; false after `within`.
fn within(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An outage that leaves `jobs` deletes to the background of `c`.
struct Outage {
    /// The lock paths; the last one is held by another client.
    paths: Vec<String>,
    /// The holder's node under the last path.
    held: Vec<String>,
    _holder: InterProcessMutex,
    /// The process's threads before the deletes went to the background.
    threads_before: usize,
}

impl Outage {
    /// A multi-lock through `c` over `jobs` mutexes takes all but the last (held by another
    /// client), then waits for it; the link goes down and the wait is cancelled: the
    /// `jobs - 1` holds it gives back and its own waiting node, `jobs` deletes in all, go to
    /// the background (the link is down and the call is past its deadline).
    fn start(e: &MemoryEnsemble, c: &Arc<MemoryClient>, root: &str, jobs: usize) -> Outage {
        let paths: Vec<String> = (0..jobs).map(|i| format!("{root}/{i:05}")).collect();
        let last = paths[jobs - 1].clone();
        let holder = InterProcessMutex::new(e.connect(), &last).unwrap();
        holder.acquire().unwrap();
        let held = e.children(&last).unwrap();
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        let multi = InterProcessMultiLock::from_paths(c.clone(), &refs).unwrap();
        // Once the multi-lock watches the holder's node, the link goes down and the wait is
        // cancelled (from the hook, on the acquiring thread: no other thread to count).
        let token = CancelToken::new();
        let (fired, t, c2) = (Arc::new(AtomicBool::new(false)), token.clone(), c.clone());
        let f = fired.clone();
        c.on_request(Some(Box::new(move |op, path| {
            if op == Op::GetData && path.starts_with(&last) && !f.swap(true, Ordering::SeqCst) {
                c2.suspend();
                t.cancel();
            }
        })));
        let threads_before = threads();
        let outcome = multi.try_acquire_with(&Acquire::new().cancel(&token));
        assert!(
            matches!(outcome, Err(Error::Cancelled { .. })),
            "{outcome:?}"
        );
        assert!(fired.load(Ordering::SeqCst), "the wait was reached");
        c.on_request(None);
        Outage {
            paths,
            held,
            _holder: holder,
            threads_before,
        }
    }

    /// Whether no node of ours is left (the holder's stays).
    fn ours_gone(&self, e: &MemoryEnsemble) -> bool {
        self.left(e).is_empty()
    }

    /// The lock paths with a node of ours still under them.
    fn left(&self, e: &MemoryEnsemble) -> Vec<&String> {
        let last = &self.paths[self.paths.len() - 1];
        self.paths
            .iter()
            .filter(|p| {
                let children = e.children(p).unwrap_or_default();
                match *p == last {
                    true => children != self.held,
                    false => !children.is_empty(),
                }
            })
            .collect()
    }
}

/// Thousands of deletes left to the background add at most a few threads, and once the link
/// is back every node of ours is deleted; then the worker ends.
#[test]
fn thousands_of_background_deletes_add_a_constant_number_of_threads() {
    if !can_count_threads() {
        return;
    }
    let _one_at_a_time = serial();
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let outage = Outage::start(&e, &c, "/bg", JOBS);
    let (before, during) = (outage.threads_before, threads());
    assert!(
        during <= before + MORE_THREADS_AT_MOST,
        "{JOBS} deletes in the background took {} more threads",
        during.saturating_sub(before)
    );
    assert!(
        !outage.ours_gone(&e),
        "the nodes stay while the link is down"
    );

    c.resume();
    assert!(
        within(PATIENCE, || outage.ours_gone(&e)),
        "left: {:?}",
        outage.left(&e).iter().take(5).collect::<Vec<_>>()
    );
    // The worker ends once its queue is empty.
    assert!(
        within(PATIENCE, || threads() <= before
            && threads_named(WORKER) == 0),
        "{} threads, {before} before",
        threads()
    );
}

/// A client dropped while its deletes wait for the link: the worker does not keep it alive
/// (it is dropped at once; dropping it closes its session, and the nodes go with it), and
/// the worker ends.
#[test]
fn a_dropped_client_is_not_kept_alive_and_ends_its_worker() {
    if !can_count_threads() {
        return;
    }
    let _one_at_a_time = serial();
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let outage = Outage::start(&e, &c, "/dropped", 20);
    // (A thread names itself once it runs.)
    assert!(
        within(PATIENCE, || threads_named(WORKER) == 1),
        "one worker"
    );
    let weak = Arc::downgrade(&c);
    drop(c);
    assert!(
        within(PATIENCE, || weak.upgrade().is_none()),
        "the client is kept alive"
    );
    assert!(
        within(PATIENCE, || outage.ours_gone(&e)),
        "left: {:?}",
        outage.left(&e)
    );
    assert!(
        within(PATIENCE, || threads_named(WORKER) == 0),
        "the worker outlives its client"
    );
}

/// Deletes that cannot be made while two more sessions are lost end then: their nodes went
/// with those sessions (here the client gave them up, and the server has not expired them
/// yet: the nodes stay, and the worker ends all the same).
#[test]
fn background_deletes_end_once_two_more_sessions_are_lost() {
    if !can_count_threads() {
        return;
    }
    let _one_at_a_time = serial();
    let e = MemoryEnsemble::new();
    let c = e.connect();
    let outage = Outage::start(&e, &c, "/lost", 20);
    // (A thread names itself once it runs.)
    assert!(
        within(PATIENCE, || threads_named(WORKER) == 1),
        "one worker"
    );
    // The first session given up; in the next one, the first delete takes the link down.
    c.give_up_session();
    let c2 = c.clone();
    let struck = Arc::new(AtomicBool::new(false));
    let s = struck.clone();
    c.on_request(Some(Box::new(move |op, _| {
        if op == Op::Delete && !s.swap(true, Ordering::SeqCst) {
            c2.suspend();
        }
    })));
    c.resume();
    assert!(
        within(PATIENCE, || struck.load(Ordering::SeqCst)
            && c.session().state() == ConnectionState::Suspended),
        "a delete was tried in the new session"
    );
    assert_eq!(
        threads_named(WORKER),
        1,
        "one session lost: the deletes go on"
    );
    c.give_up_session();
    assert!(
        within(PATIENCE, || threads_named(WORKER) == 0),
        "the worker goes on after two sessions lost"
    );
    assert!(
        !outage.ours_gone(&e),
        "the nodes of the given-up session stay"
    );
    c.on_request(None);
}
