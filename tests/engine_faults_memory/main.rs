//! The engine under faults that combine: a lost create then a lost look-up, a create run in a
//! session the client has not reported yet, an outage during a timed acquire, a session lost
//! between semaphore admission and the lease (reported or silent), requests about our node
//! answered `SessionExpired` by the report of a silent session change, a verification that
//! timed out, a client closed while a listing is retried. Deterministic, on the in-memory
//! ensemble.
//!
//! - `creates`: lost creates and look-ups, unreported sessions, the pipelined pair;
//! - `deadlines`: timed calls during outages, verification, closing;
//! - `admission`: the semaphore between admission and lease.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};
use zk_locks::client::memory::{Fault, MemoryClient, MemoryEnsemble, Op};
use zk_locks::locks::{InterProcessLock, InterProcessMutex, InterProcessSemaphoreV2, LockState};
use zk_locks::testing::harness::eventually;
use zk_locks::{Error, ZkClient};

mod admission;
mod creates;
mod deadlines;

const PATIENCE: Duration = Duration::from_secs(10);

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
