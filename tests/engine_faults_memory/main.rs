//! The engine under faults that combine: a lost create then a lost look-up, a create run in a
//! session the client has not reported yet, an outage during a timed acquire, a session lost
//! between semaphore admission and the lease (reported or silent), requests about our node
//! answered `SessionExpired` by the report of a silent session change, a verification that
//! timed out, a client closed while a listing is retried. Deterministic, on the in-memory
//! ensemble.
//!
//! - `creates`: lost creates and look-ups, unreported sessions, the pipelined pair;
//! - `deadlines`: timed calls during outages, verification, closing;
//! - `late`: a request that outlives a timed call's deadline, in every recipe;
//! - `admission`: the semaphore between admission and lease.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};
use zk_locks::client::memory::{Fault, MemoryClient, MemoryEnsemble, Op};
use zk_locks::client::Counters;
use zk_locks::locks::{
    InterProcessLock, InterProcessMultiLock, InterProcessMutex, InterProcessReadWriteLock,
    InterProcessSemaphoreV2, Lease, LockGuard, LockState,
};
use zk_locks::testing::harness::eventually;
use zk_locks::{Error, ZkClient};

mod admission;
mod creates;
mod deadlines;
mod late;

const PATIENCE: Duration = Duration::from_secs(10);

/// No node in a directory.
const NO_NODES: Vec<String> = Vec::new();

/// No request in a list of requests.
const NO_REQUESTS: Vec<Op> = Vec::new();

fn mutex(c: &Arc<MemoryClient>, path: &str) -> InterProcessMutex {
    InterProcessMutex::new(c.clone(), path).unwrap()
}

/// A mutex whose directory exists (the first create of a test then goes straight to the node).
fn ready_mutex(c: &Arc<MemoryClient>, path: &str) -> InterProcessMutex {
    let m = mutex(c, path);
    m.acquire().unwrap();
    m.release().unwrap();
    m
}

/// A mutex on `path` through a client of its own, held by another client: the `waiter`
/// (through `c`) queues behind `held`, the holder's node.
struct Contended {
    c: Arc<MemoryClient>,
    waiter: InterProcessMutex,
    held: Vec<String>,
    _holder: InterProcessMutex,
}

fn contended(e: &MemoryEnsemble, path: &str) -> Contended {
    let (h, c) = (e.connect(), e.connect());
    let holder = ready_mutex(&h, path);
    holder.acquire().unwrap();
    Contended {
        waiter: mutex(&c, path),
        c,
        held: e.children(path).unwrap(),
        _holder: holder,
    }
}

/// A request of a timed call that outlives the call's deadline: the first `op` under
/// `prefix` that the calling thread makes is held in the request hook for the call's timeout
/// and a little more (time is the subject here), then fails with an unknown outcome
/// (`OperationTimeout`) or, with [`Self::answer`], goes through.
struct Late {
    op: Op,
    prefix: String,
    timeout: Duration,
    fails: bool,
    also: Option<zk_locks::client::memory::RequestHook>,
    blip: Option<(Op, &'static str)>,
}

impl Late {
    /// The first `op` outlives a call of `timeout`, then fails with an unknown outcome.
    fn failure(op: Op, timeout: Duration) -> Late {
        Late {
            op,
            prefix: String::new(),
            timeout,
            fails: true,
            also: None,
            blip: None,
        }
    }

    /// The first `op` outlives a call of `timeout`, then is answered.
    fn answer(op: Op, timeout: Duration) -> Late {
        Late {
            fails: false,
            ..Late::failure(op, timeout)
        }
    }

    /// Only a request whose path starts with `prefix`.
    fn under(self, prefix: impl Into<String>) -> Late {
        Late {
            prefix: prefix.into(),
            ..self
        }
    }

    /// Also runs `hook` before every request of the client, on any thread.
    fn with(self, hook: impl Fn(Op, &str) + Send + Sync + 'static) -> Late {
        Late {
            also: Some(Box::new(hook)),
            ..self
        }
    }

    /// Also drops the client's link and brings it back (same session) just before its first
    /// `op` under `prefix`.
    fn blip_before(self, op: Op, prefix: &'static str) -> Late {
        Late {
            blip: Some((op, prefix)),
            ..self
        }
    }

    /// Runs `call` (given the timeout) on this thread with the late request set up on `c`;
    /// returns its result and every request the thread made after the late one.
    fn run<R>(self, c: &Arc<MemoryClient>, call: impl FnOnce(Duration) -> R) -> (R, Vec<Op>) {
        let Late {
            op,
            prefix,
            timeout,
            fails,
            also,
            blip,
        } = self;
        let blip = blip.map(|(op, prefix)| blip_on(c, op, prefix));
        if fails {
            c.inject(Fault::timeout(op).on_path(prefix.clone()));
        }
        let caller = thread::current().id();
        let after = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let (log, late) = (after.clone(), AtomicBool::new(false));
        c.on_request(Some(Box::new(move |o, path| {
            if let Some(also) = &also {
                also(o, path);
            }
            if let Some(blip) = &blip {
                blip(o, path);
            }
            if thread::current().id() != caller {
                return;
            }
            if late.load(Ordering::SeqCst) {
                log.lock().push(o);
            } else if o == op && path.starts_with(&prefix) {
                late.store(true, Ordering::SeqCst);
                thread::sleep(timeout + Duration::from_millis(50));
            }
        })));
        let result = call(timeout);
        c.on_request(None);
        let after = after.lock().clone();
        (result, after)
    }
}

/// A hook: the second create under `prefix` first applies the first one, late (a create that
/// timed out on the client and that the server applies after the look-up found nothing).
fn late_copy(c: &Arc<MemoryClient>, prefix: &str) -> impl Fn(Op, &str) + Send + Sync + 'static {
    let (creates, weak, prefix) = (AtomicUsize::new(0), Arc::downgrade(c), prefix.to_string());
    move |op, path| {
        if op == Op::Create
            && path.starts_with(&prefix)
            && creates.fetch_add(1, Ordering::SeqCst) == 1
        {
            if let Some(c) = weak.upgrade() {
                c.create(path, b"", zk_locks::CreateMode::EphemeralSequential)
                    .unwrap();
            }
        }
    }
}

/// A hook: the link of `c` drops and comes back (same session) just before its first `op`
/// under `prefix`.
fn blip_on(c: &Arc<MemoryClient>, op: Op, prefix: &str) -> impl Fn(Op, &str) + Send + Sync {
    let (fired, weak, prefix) = (
        AtomicBool::new(false),
        Arc::downgrade(c),
        prefix.to_string(),
    );
    move |o, path| {
        if o == op && path.starts_with(&prefix) && !fired.swap(true, Ordering::SeqCst) {
            if let Some(c) = weak.upgrade() {
                c.suspend();
                c.resume();
            }
        }
    }
}

/// A semaphore of `max` leases at `path`, one of them taken by another client (its lease is
/// returned); `c` is a client of its own, and the lease nodes as they are now are returned.
fn semaphore_with_one_taken(
    path: &str,
    max: usize,
) -> (MemoryEnsemble, Arc<MemoryClient>, Vec<String>, Lease) {
    let e = MemoryEnsemble::new();
    let (x, c) = (e.connect(), e.connect());
    let lease = InterProcessSemaphoreV2::new(x, path, max)
        .unwrap()
        .acquire()
        .unwrap();
    let held = e.children(&format!("{path}/leases")).unwrap();
    (e, c, held, lease)
}

/// Waits until the semaphore at `path` has the lease nodes `held` again and no admission node.
fn semaphore_back_to(e: &MemoryEnsemble, path: &str, held: &[String]) {
    eventually(PATIENCE, "lease and admission nodes deleted", || {
        e.children(&format!("{path}/leases")).unwrap() == held
            && e.children(&format!("{path}/locks"))
                .unwrap_or_default()
                .is_empty()
    });
}

/// Runs `f` the first time a request of `op` under `prefix` is made on `c` (on that request's
/// thread, before it is applied).
fn once_on(c: &Arc<MemoryClient>, op: Op, prefix: &str, f: impl Fn() + Send + Sync + 'static) {
    let fired = AtomicUsize::new(0);
    let prefix = prefix.to_string();
    c.on_request(Some(Box::new(move |o, path| {
        if o == op && path.starts_with(&prefix) && fired.fetch_add(1, Ordering::SeqCst) == 0 {
            f();
        }
    })));
}

/// Moves `c` to a new session it does not report yet: its old session ends on the server,
/// with its ephemeral nodes, and its requests run in the new one from now on.
fn change_session_silently(c: &MemoryClient) {
    c.inject(Fault::in_new_session(Op::Exists));
    c.exists("/").unwrap();
}

/// Reports `c`'s silent session change from another thread, as a link's event would come.
fn report_change(c: &Arc<MemoryClient>) {
    let c = c.clone();
    thread::spawn(move || c.report_session_change())
        .join()
        .unwrap();
}

/// Hooks the next create under `dir/`: it runs in a session the client has not reported, and
/// its outcome is unknown to the caller (the server made the node, the reply timed out). The
/// first listing of `dir` that `lists_on` picks then meets the report of the change, and
/// is answered `SessionExpired` although the node lives on in the new session.
fn silent_create_then_report(
    c: &Arc<MemoryClient>,
    dir: &'static str,
    lists_on: impl Fn() -> bool + Send + Sync + 'static,
) {
    let weak = Arc::downgrade(c);
    let (created, reported) = (AtomicUsize::new(0), AtomicUsize::new(0));
    c.on_request(Some(Box::new(move |op, path| {
        let Some(c) = weak.upgrade() else { return };
        let in_dir = path.strip_prefix(dir).is_some_and(|p| p.starts_with('/'));
        if op == Op::Create && in_dir && created.fetch_add(1, Ordering::SeqCst) == 0 {
            change_session_silently(&c);
            c.create(path, b"", zk_locks::CreateMode::EphemeralSequential)
                .unwrap();
            c.inject(Fault::timeout(Op::Create));
        } else if op == Op::GetChildren
            && path == dir
            && created.load(Ordering::SeqCst) > 0
            && lists_on()
            && reported.fetch_add(1, Ordering::SeqCst) == 0
        {
            report_change(&c);
        }
    })));
}
